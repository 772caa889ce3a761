/* attention.cu - fused variable-length bidirectional attention (flash-attention style): online
 * softmax, no n x n matrix in memory, segments from the tile list built out of cu_seqlens, no
 * segment-length ceiling. q, k, v are read straight from the packed qkv GEMM output
 * [n, 3*heads*D] (q | k | v, head-major), the result is written as [n, heads*D].
 *
 * bf16 kernel: 4 warps x 2 m-tiles of 16 query rows = 128 rows per block (a warp loads its K and
 * V fragments once for both m-tiles), 64-key tiles double-buffered in shared memory with
 * cp.async, S = Q K^T and O += P V on mma.sync m16n8k16 (bf16 in, f32 accumulate). The head dim
 * is padded to a multiple of 16 for the Q K^T reduction only (72 -> 80, zero columns in shared
 * memory); P V uses D/8 output tiles, so D = 72 costs 80/72 on Q K^T and nothing on P V. P is
 * rounded to bf16 before P V, as FlashAttention does.
 * f32 kernel (f32 / tf32 precision, parity work): one thread per query row on CUDA cores.
 * Per-device state (shared-memory limits) lives in mv_attn_state, owned by the backend of one
 * device; nothing here is process-global, so backends on several GPUs run their tower threads
 * concurrently. The variants build (-DMV_VARIANTS) also has the bf16 kernel with 8 warps x 1
 * m-tile. CPU twin: mv_attention_cpu. */
#include <math.h>
#include <string.h>

#include "mv_cuda.cuh"
#ifdef MV_VARIANTS
#include "variants/variants.cuh"
#endif

/* ---- PTX helpers ---------------------------------------------------------------------- */
static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
static __device__ __forceinline__ void ldsm_x4(uint32_t *r, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
static __device__ __forceinline__ void ldsm_x4_t(uint32_t *r, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
static __device__ __forceinline__ void ldsm_x2_t(uint32_t *r, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}
static __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* ---- bf16 tensor-core kernel ---------------------------------------------------------- */
#define BF_BM MV_ATTN_BM_BF16
#define BF_BN 64

template <int D> struct attn_shape {
    static constexpr int DP = (D + 15) / 16 * 16; /* padded reduction width of Q K^T */
    static constexpr int KS = DP / 16;            /* k-steps of Q K^T */
    static constexpr int NO = D / 8;              /* output n-tiles of P V */
    static constexpr int SR = DP + 8;             /* shared row stride: odd 16-byte count */
    static constexpr int CH = D / 8;              /* 16-byte chunks per row in global memory */
    static constexpr size_t SMEM = (size_t)(BF_BM + 4 * BF_BN) * SR * sizeof(bf16);
};

/* grid (n_tiles, heads), block WARPS * 32; each warp owns MT m-tiles of 16 query rows
 * (WARPS * MT * 16 == BF_BM). K and V fragments are loaded once per warp and used by its MT
 * m-tiles. */
template <int D, int WARPS, int MT>
__global__ void __launch_bounds__(WARPS * 32, 2)
    attn_bf16_kernel(bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int heads,
                     float scale_log2)
{
    typedef attn_shape<D> S;
    constexpr int DP = S::DP, KS = S::KS, NO = S::NO, SR = S::SR, CH = S::CH;
    constexpr int NT = BF_BN / 8; /* S n-tiles */
    constexpr int NTH = WARPS * 32;
    static_assert(WARPS * MT * 16 == BF_BM, "tile rows");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16 *sQ = (bf16 *)smem_raw;    /* [BM][SR] */
    bf16 *sK = sQ + BF_BM * SR;     /* [2][BN][SR] */
    bf16 *sV = sK + 2 * BF_BN * SR; /* [2][BN][SR] */
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const mv_attn_tile tile = tiles[blockIdx.x];
    const int h = blockIdx.y;
    const int H = heads * D;
    const int64_t ld = 3 * (int64_t)H;
    const bf16 *gq = qkv + h * D, *gk = qkv + H + h * D, *gv = qkv + 2 * H + h * D;
    const int q0 = tile.q0, kv0 = tile.kv_start, kv1 = tile.kv_end;
    const int nkv = (kv1 - kv0 + BF_BN - 1) / BF_BN;

    if (DP > D) { /* zero padding columns of sQ and both sK buffers (contiguous rows) */
        constexpr int PADW = DP > D ? DP - D : 1;
        const bf16 z = __float2bfloat16_rn(0.f);
        for (int i = tid; i < (BF_BM + 2 * BF_BN) * PADW; i += NTH)
            sQ[(i / PADW) * SR + D + i % PADW] = z;
    }
    /* rows >= limit are zero-filled (cp.async with 0 source bytes) */
    auto load_rows = [&](bf16 *dst, const bf16 *src, int row0, int nrows, int limit) {
        for (int i = tid; i < nrows * CH; i += NTH) {
            int r = i / CH, c = (i % CH) * 8;
            int gr = row0 + r;
            bool ok = gr < limit;
            const bf16 *p = src + (int64_t)(ok ? gr : row0) * ld + c;
            cp_async16(smem_u32(dst + r * SR + c), p, ok ? 16 : 0);
        }
    };
    load_rows(sQ, gq, q0, BF_BM, kv1);
    load_rows(sK, gk, kv0, BF_BN, kv1);
    load_rows(sV, gv, kv0, BF_BN, kv1);
    cp_async_commit();

    uint32_t qf[MT][KS][4];
    float o[MT][NO][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NO; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    const int mi = lane / 8;

    for (int j = 0; j < nkv; j++) {
        const int buf = j & 1;
        if (j + 1 < nkv) {
            load_rows(sK + (buf ^ 1) * BF_BN * SR, gk, kv0 + (j + 1) * BF_BN, BF_BN, kv1);
            load_rows(sV + (buf ^ 1) * BF_BN * SR, gv, kv0 + (j + 1) * BF_BN, BF_BN, kv1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int ks = 0; ks < KS; ks++)
                    ldsm_x4(qf[mt][ks], smem_u32(sQ + ((warp * MT + mt) * 16 + lane % 16) * SR + ks * 16 +
                                                 (lane / 16) * 8));
        }
        const bf16 *ks_ = sK + buf * BF_BN * SR, *vs_ = sV + buf * BF_BN * SR;

        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < NT; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t b[4];
                int key = np * 16 + (mi / 2) * 8 + lane % 8, dim = ks * 16 + (mi % 2) * 8;
                ldsm_x4(b, smem_u32(ks_ + key * SR + dim));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(s[mt][2 * np], qf[mt][ks], b[0], b[1]);
                    mma16816(s[mt][2 * np + 1], qf[mt][ks], b[2], b[3]);
                }
            }
        }
        const int kbase = kv0 + j * BF_BN;
        if (kbase + BF_BN > kv1) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (kbase + nt * 8 + 2 * (lane % 4) + (e & 1) >= kv1) s[mt][nt][e] = -INFINITY;
        }
        /* online softmax in log2 units; rows g (r = 0) and g + 8 (r = 1) of each m-tile */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = m[mt][r];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]) * scale_log2);
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float corr = exp2f(m[mt][r] - mx);
                m[mt][r] = mx;
                l[mt][r] *= corr;
#pragma unroll
                for (int nt = 0; nt < NO; nt++) {
                    o[mt][nt][2 * r] *= corr;
                    o[mt][nt][2 * r + 1] *= corr;
                }
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    float p0 = exp2f(fmaf(s[mt][nt][2 * r], scale_log2, -mx));
                    float p1 = exp2f(fmaf(s[mt][nt][2 * r + 1], scale_log2, -mx));
                    s[mt][nt][2 * r] = p0;
                    s[mt][nt][2 * r + 1] = p1;
                    l[mt][r] += p0 + p1;
                }
            }
        /* O += P V */
#pragma unroll
        for (int kk = 0; kk < BF_BN / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int np = 0; np < NO / 2; np++) {
                uint32_t b[4];
                int key = kk * 16 + (mi % 2) * 8 + lane % 8, dim = np * 16 + (mi / 2) * 8;
                ldsm_x4_t(b, smem_u32(vs_ + key * SR + dim));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(o[mt][2 * np], a[mt], b[0], b[1]);
                    mma16816(o[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
            if (NO % 2) {
                uint32_t b[2];
                int key = kk * 16 + (mi % 2) * 8 + lane % 8;
                ldsm_x2_t(b, smem_u32(vs_ + key * SR + (NO - 1) * 8));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) mma16816(o[mt][NO - 1], a[mt], b[0], b[1]);
            }
        }
        __syncthreads(); /* the next iteration's loads overwrite this buffer */
    }

    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            float inv = 1.f / lr;
            int row = q0 + (warp * MT + mt) * 16 + g + 8 * r;
            if (row < kv1) {
                bf16 *po = out + (int64_t)row * H + h * D + 2 * t;
#pragma unroll
                for (int nt = 0; nt < NO; nt++)
                    *(__nv_bfloat162 *)(po + nt * 8) =
                        __floats2bfloat162_rn(o[mt][nt][2 * r] * inv, o[mt][nt][2 * r + 1] * inv);
            }
        }
}

/* ---- f32 kernel ----------------------------------------------------------------------- */
#define F_BM MV_ATTN_BM_F32
#define F_BN 32

/* grid (n_tiles, heads), block F_BM: one thread per query row. */
template <int D>
__global__ void __launch_bounds__(F_BM)
    attn_f32_kernel(float *out, const float *qkv, const mv_attn_tile *tiles, int heads,
                    float scale_log2)
{
    __shared__ float sK[F_BN][D], sV[F_BN][D];
    const mv_attn_tile tile = tiles[blockIdx.x];
    const int h = blockIdx.y, tid = threadIdx.x;
    const int H = heads * D;
    const int64_t ld = 3 * (int64_t)H;
    const float *gk = qkv + H + h * D, *gv = qkv + 2 * H + h * D;
    const int kv0 = tile.kv_start, kv1 = tile.kv_end;
    const int row = tile.q0 + tid;
    const bool valid = row < kv1;
    float q[D], o[D];
    const float *gq = qkv + (int64_t)(valid ? row : kv0) * ld + h * D;
#pragma unroll
    for (int d = 0; d < D; d++) {
        q[d] = gq[d];
        o[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    for (int kb = kv0; kb < kv1; kb += F_BN) {
        __syncthreads();
        for (int i = tid; i < F_BN * D; i += F_BM) {
            int r = i / D, c = i % D, key = kb + r;
            sK[r][c] = key < kv1 ? gk[(int64_t)key * ld + c] : 0.f;
            sV[r][c] = key < kv1 ? gv[(int64_t)key * ld + c] : 0.f;
        }
        __syncthreads();
        const int nk = min(F_BN, kv1 - kb);
        float s[F_BN];
        float mx = m;
#pragma unroll
        for (int k = 0; k < F_BN; k++) {
            float dot = 0.f;
#pragma unroll
            for (int d = 0; d < D; d++) dot = fmaf(q[d], sK[k][d], dot);
            s[k] = k < nk ? dot * scale_log2 : -INFINITY;
            mx = fmaxf(mx, s[k]);
        }
        float corr = exp2f(m - mx);
        m = mx;
        l *= corr;
#pragma unroll
        for (int d = 0; d < D; d++) o[d] *= corr;
#pragma unroll
        for (int k = 0; k < F_BN; k++) {
            float p = exp2f(s[k] - mx);
            l += p;
#pragma unroll
            for (int d = 0; d < D; d++) o[d] = fmaf(p, sV[k][d], o[d]);
        }
    }
    if (valid) {
        float inv = 1.f / l;
        float *po = out + (int64_t)row * H + h * D;
#pragma unroll
        for (int d = 0; d < D; d++) po[d] = o[d] * inv;
    }
}

/* ---- launchers ------------------------------------------------------------------------ */
int mv_cuda_attn_supported(int D)
{
    return D == 32 || D == 64 || D == 72 || D == 80 || D == 96 || D == 128;
}

static float scale_log2_for(int D) { return (float)(1.0 / sqrt((double)D) * 1.4426950408889634); }

void mv_cuda_attn_state_init(mv_attn_state *s, int device)
{
    memset(s, 0, sizeof *s);
    s->device = device;
}

static int d_index(int D)
{
    return D == 32 ? 0 : D == 64 ? 1 : D == 72 ? 2 : D == 80 ? 3 : D == 96 ? 4 : 5;
}

/* the state belongs to the calling thread's current device, or the call is refused */
static cudaError_t on_device(const mv_attn_state *s)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return r;
    return cur == s->device ? cudaSuccess : cudaErrorInvalidDevice;
}

template <int D, int WARPS, int MT>
static cudaError_t launch_bf16_v(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                 int n_tiles, int heads, cudaStream_t st)
{
    size_t smem = attn_shape<D>::SMEM;
    uint32_t bit = 1u << (d_index(D) * 2 + (WARPS == 8 ? 0 : 1));
    if (!(s->attr_set & bit)) {
        cudaError_t r = cudaFuncSetAttribute(attn_bf16_kernel<D, WARPS, MT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (r != cudaSuccess) return r;
        s->attr_set |= bit;
    }
    dim3 grid((unsigned)n_tiles, (unsigned)heads);
    attn_bf16_kernel<D, WARPS, MT><<<grid, WARPS * 32, smem, st>>>(out, qkv, tiles, heads, scale_log2_for(D));
    return cudaGetLastError();
}

/* 4 warps x 2 m-tiles of 16 query rows; the variants build also has 8 warps x 1 (--attn-variant 1) */
template <int D>
static cudaError_t launch_bf16(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                               int n_tiles, int heads, cudaStream_t st)
{
#ifdef MV_VARIANTS
    if (mv_variants.attn_variant == 1) return launch_bf16_v<D, 8, 1>(s, out, qkv, tiles, n_tiles, heads, st);
#endif
    return launch_bf16_v<D, 4, 2>(s, out, qkv, tiles, n_tiles, heads, st);
}

template <int D>
static cudaError_t launch_f32(float *out, const float *qkv, const mv_attn_tile *tiles, int n_tiles,
                              int heads, cudaStream_t st)
{
    dim3 grid((unsigned)n_tiles, (unsigned)heads);
    attn_f32_kernel<D><<<grid, F_BM, 0, st>>>(out, qkv, tiles, heads, scale_log2_for(D));
    return cudaGetLastError();
}

cudaError_t mv_cuda_attention_bf16(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                   int n_tiles, int heads, int D, cudaStream_t st)
{
    cudaError_t r = on_device(s);
    if (r != cudaSuccess) return r;
    if (n_tiles <= 0) return cudaSuccess;
    if (heads > 65535) return cudaErrorInvalidValue;
    switch (D) {
    case 32: return launch_bf16<32>(s, out, qkv, tiles, n_tiles, heads, st);
    case 64: return launch_bf16<64>(s, out, qkv, tiles, n_tiles, heads, st);
    case 72: return launch_bf16<72>(s, out, qkv, tiles, n_tiles, heads, st);
    case 80: return launch_bf16<80>(s, out, qkv, tiles, n_tiles, heads, st);
    case 96: return launch_bf16<96>(s, out, qkv, tiles, n_tiles, heads, st);
    case 128: return launch_bf16<128>(s, out, qkv, tiles, n_tiles, heads, st);
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t mv_cuda_attention_f32(mv_attn_state *s, float *out, const float *qkv, const mv_attn_tile *tiles,
                                  int n_tiles, int heads, int D, cudaStream_t st)
{
    cudaError_t r = on_device(s);
    if (r != cudaSuccess) return r;
    if (n_tiles <= 0) return cudaSuccess;
    if (heads > 65535) return cudaErrorInvalidValue;
    switch (D) {
    case 32: return launch_f32<32>(out, qkv, tiles, n_tiles, heads, st);
    case 64: return launch_f32<64>(out, qkv, tiles, n_tiles, heads, st);
    case 72: return launch_f32<72>(out, qkv, tiles, n_tiles, heads, st);
    case 80: return launch_f32<80>(out, qkv, tiles, n_tiles, heads, st);
    case 96: return launch_f32<96>(out, qkv, tiles, n_tiles, heads, st);
    case 128: return launch_f32<128>(out, qkv, tiles, n_tiles, heads, st);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- residency ------------------------------------------------------------------------ */
mv_status mv_cuda_check_resident(const void *p, int device, const char *what, mv_err *e)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return mv_cuda_check(r, e, what);
    if (cur != device)
        return mv_fail(e, MV_ERR_DEVICE, "cuda: %s: the calling thread is on device %d, the backend on %d",
                       what, cur, device);
    if (!p) return MV_OK;
    cudaPointerAttributes pa;
    r = cudaPointerGetAttributes(&pa, p);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return MV_OK; /* unregistered host memory (older runtimes report it as an error) */
    }
    if (pa.type == cudaMemoryTypeDevice && pa.device != device)
        return mv_fail(e, MV_ERR_DEVICE, "cuda: %s is memory of device %d, the backend runs on device %d",
                       what, pa.device, device);
    return MV_OK;
}
