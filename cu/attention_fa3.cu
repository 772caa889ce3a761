/* attention_fa3.cu - varlen bidirectional attention for Hopper (sm_90a only) on wgmma.mma_async,
 * the FlashAttention-3 instruction set: bf16 q/k/v, f32 accumulators in registers, online softmax
 * in f32. Same inputs and outputs as the builtin bf16 kernel (cu/attention.cu): q|k|v read from
 * the packed qkv [n, 3*heads*D], out [n, heads*D], one CTA per (query tile of
 * MV_ATTN_BM_BF16 = 128 rows, head) from the tile list mv_attn_tiles() builds out of cu_seqlens,
 * per-device state in mv_attn_state. Head dims 64 and 72 only (the tower's); anything else is
 * refused (cudaErrorInvalidValue here, a message from mv_cuda_fa3_check).
 *
 * STATUS - READ FIRST. This is a draft written on a machine without a GPU. It compiles (nvcc 13.0,
 * -gencode arch=compute_90a,code=sm_90a, no warnings) and nothing else is known: it has NEVER RUN.
 * Untested: every numerical result; the shared-memory layout against the wgmma descriptors (the
 * no-swizzle "interleave" core-matrix layout, LBO/SBO for the K-major Q and K operands and the
 * N-major V operand); the register-fragment layouts (accumulator -> P as the A operand of P.V);
 * the async-proxy fences between cp.async and wgmma; the padding of the Q.K^T reduction 72 -> 80;
 * the launcher's capability check on a real sm_90 device; its speed. test/cuda/test_fa3.cu is the
 * twin test (vs mv_attention_cpu) that decides. Until it passes on an H200, --attention fa3 is
 * explicit only: auto never picks it.
 * If test_fa3 fails, in this order: a segment of 1 row has P = 1 whatever S is, so a failure
 * there (finite but wrong) is the P.V path: V's descriptor (LBO and SBO swapped is the likeliest
 * slip; the N-major "interleave" form is the least documented) or P's register packing; if only
 * longer segments fail, it is S (Q/K descriptors, the 72 -> 80 padding: compare D 64 with D 72)
 * or the key mask (127/128/129 around the tiles; MV_FA3_BN=64 against 128). A result that changes
 * between runs is a missing fence or barrier (compute-sanitizer racecheck / synccheck). There is
 * no mbarrier here yet, so no phase bugs either.
 *
 * Design (version 1; FA3's producer warp, TMA, mbarrier ring and ping-pong are not here yet):
 *   - 256 threads = 2 consumer warpgroups; warpgroup w owns query rows [64w, 64w + 64) of the tile.
 *   - Q (128 x DP), K and V (BN x DP / BN x D, two stages) in shared memory, loaded by all 256
 *     threads with cp.async (16 bytes each), rows past the segment zero-filled (src-size 0); the
 *     next K/V tile loads while this one is computed, as in the builtin kernel. DP = D rounded up
 *     to 16 (72 -> 80): the Q.K^T reduction runs over zero columns 72..79 written once at start.
 *   - Shared layout, no swizzle ("interleave" in CUTLASS's words): a tile of R rows x C chunks of
 *     8 bf16 is stored as 8-row x 16-byte core matrices of 128 contiguous bytes; core matrix
 *     (row / 8, chunk) at byte ((row / 8) * C + chunk) * 128, row % 8 at 16 bytes each. One layout
 *     serves Q and K as K-major operands (LBO = 128 B between the two 8-column halves of a k16
 *     step, SBO = C * 128 B between 8-row groups) and V as the N-major B operand of P.V
 *     (imm-trans-b 1; SBO = 128 B between 8-column groups of D, LBO = C * 128 B between 8-key
 *     groups). A cp.async warp writes 8 rows of one chunk = one 128-byte core matrix per 8 lanes.
 *   - S = Q K^T: KS = DP / 16 wgmma m64nBNk16 (SS: both operands from shared memory), one commit,
 *     wait 0. Mask keys past the segment to -inf, online softmax in log2 units (each thread holds
 *     2 rows; the row max / sum reduce over the 4 lanes of a quad, as for mma.sync), P rounded to
 *     bf16 into the A-fragment registers (the m64 accumulator layout per warp is the m16n8 C layout,
 *     so P packs like the builtin kernel's), O rescaled.
 *   - O += P V: BN / 16 wgmma m64nDk16 (RS: A = P from registers, B = V N-major), wait 0.
 *   - BN (keys per tile) 128 by default, 64 with MV_FA3_BN=64 (fewer registers; a fallback to try
 *     when the 128 one spills or fails).
 * Next steps once it is right: TMA loads by a producer warp with an mbarrier ring, S of tile j+1
 * issued before the softmax of tile j (intra-warpgroup overlap), two warpgroups ping-ponging
 * their softmax against each other's GEMMs, 128-byte swizzle.
 *
 * Not here: f32/tf32 attention, causal masks, head dims other than 64/72, other GPUs (sm_90a
 * code runs on compute capability 9.0 only; the launcher refuses other devices). CPU twin:
 * mv_attention_cpu. */
#include <math.h>
#include <stdlib.h>

#include "mv_cuda.cuh"

#define FA3_BM 128      /* query rows per CTA (two warpgroups x 64) */
#define FA3_THREADS 256 /* two consumer warpgroups */
static_assert(FA3_BM == MV_ATTN_BM_BF16, "fa3 reads the builtin bf16 kernel's tile list");

/* ---- PTX helpers ---------------------------------------------------------------------- */
static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* shared memory written by this thread through the generic proxy (cp.async, st.shared) becomes
 * visible to the async proxy (wgmma operands) after this fence and a barrier */
static __device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving reads or writes of wgmma operand registers across the
 * asynchronous window (CUTLASS's warpgroup_fence_operand). */
template <int N> static __device__ __forceinline__ void reg_fence(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> static __device__ __forceinline__ void reg_fence(uint32_t (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
/* wgmma shared-memory matrix descriptor: start address, leading / stride byte offsets (all >> 4,
 * 14 bits each), base offset 0, layout type 0 = no swizzle (bits 62-63). */
static __device__ __forceinline__ uint64_t gmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32);
}

/* ---- wgmma wrappers (m64nNk16, f32 += bf16 x bf16) ------------------------------------- */
/* d[32] (+)= A . B, m64n64k16, A = descriptor a (K-major), B = descriptor b (K-major) */
static __device__ __forceinline__ void wgmma_ss_n64(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(scale_d));
}
/* d[64] (+)= A . B, m64n128k16, A = descriptor a (K-major), B = descriptor b (K-major) */
static __device__ __forceinline__ void wgmma_ss_n128(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(scale_d));
}
/* d[32] += A . B, m64n64k16, A = a[4] in registers (bf16 pairs), B = descriptor b (N-major,
 * imm-trans-b 1) */
static __device__ __forceinline__ void wgmma_rs_n64(float *d, const uint32_t *a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
/* d[36] += A . B, m64n72k16, A = a[4] in registers (bf16 pairs), B = descriptor b (N-major,
 * imm-trans-b 1) */
static __device__ __forceinline__ void wgmma_rs_n72(float *d, const uint32_t *a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35"
                 "}, {%36, %37, %38, %39}, %40, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

/* ---- kernel --------------------------------------------------------------------------- */
template <int D, int BN> struct fa3_shape {
    static constexpr int DP = (D + 15) / 16 * 16; /* padded reduction width of Q K^T (72 -> 80) */
    static constexpr int C = DP / 8;              /* 16-byte chunks per row of Q and K in shared memory */
    static constexpr int CV = D / 8;              /* chunks per row in global memory, and of V */
    static constexpr int KS = DP / 16;            /* k16 steps of Q K^T */
    static constexpr int Q_BYTES = FA3_BM * C * 16;
    static constexpr int K_BYTES = BN * C * 16; /* one stage */
    static constexpr int V_BYTES = BN * CV * 16;
    static constexpr size_t SMEM = (size_t)Q_BYTES + 2 * K_BYTES + 2 * V_BYTES;
};

template <int BN> static __device__ __forceinline__ void wgmma_s(float *d, uint64_t a, uint64_t b, int scale_d)
{
    if constexpr (BN == 128) wgmma_ss_n128(d, a, b, scale_d);
    else wgmma_ss_n64(d, a, b, scale_d);
}
template <int D> static __device__ __forceinline__ void wgmma_o(float *d, const uint32_t *a, uint64_t b)
{
    if constexpr (D == 72) wgmma_rs_n72(d, a, b);
    else wgmma_rs_n64(d, a, b);
}

/* Rows [row0, row0 + nrows) of one head's q, k or v (src: its first column, row stride ld) into
 * the core-matrix layout at dst (CS chunks per 8-row group); rows >= limit are zero-filled.
 * Element i: 8 consecutive i are 8 rows of one chunk (one 128-byte core matrix). */
template <int CS, int CH>
static __device__ __forceinline__ void load_tile(uint32_t dst, const bf16 *src, int64_t ld, int row0, int nrows,
                                                 int limit, int tid)
{
    for (int i = tid; i < nrows * CH; i += FA3_THREADS) {
        int rg = i / (8 * CH), rem = i - rg * 8 * CH, c = rem >> 3, r8 = rem & 7;
        int gr = row0 + rg * 8 + r8;
        bool ok = gr < limit;
        cp_async16(dst + (uint32_t)(((rg * CS + c) * 8 + r8) * 16), src + (int64_t)(ok ? gr : row0) * ld + c * 8,
                   ok ? 16 : 0);
    }
}

/* grid (n_tiles, heads), block FA3_THREADS. */
template <int D, int BN>
__global__ void __launch_bounds__(FA3_THREADS, 1)
    attn_fa3_kernel(bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int heads, float scale_log2)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fa3_shape<D, BN> S;
    constexpr int C = S::C, CV = S::CV, KS = S::KS;
    constexpr int NS = BN / 8; /* 8-key n-tiles of S */
    constexpr int NO = D / 8;  /* 8-column n-tiles of O */
    static_assert(BN == 64 || BN == 128, "keys per tile");
    static_assert(D == 64 || D == 72, "head dim");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const uint32_t sQ = smem_u32(smem_raw), sK = sQ + S::Q_BYTES, sV = sK + 2 * S::K_BYTES;
    const int tid = threadIdx.x, wg = tid / 128, wl = (tid % 128) / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const mv_attn_tile tile = tiles[blockIdx.x];
    const int h = blockIdx.y;
    const int H = heads * D;
    const int64_t ld = 3 * (int64_t)H;
    const bf16 *gq = qkv + h * D, *gk = qkv + H + h * D, *gv = qkv + 2 * H + h * D;
    const int q0 = tile.q0, kv0 = tile.kv_start, kv1 = tile.kv_end;
    const int nkv = (kv1 - kv0 + BN - 1) / BN;

    if constexpr (C > CV) {
        /* zero chunks CV..C-1 (columns D..DP-1) of every 8-row group of sQ and both sK stages:
         * they are contiguous groups of C chunks, and cp.async never writes those chunks */
        constexpr int PADC = C - CV, GROUPS = FA3_BM / 8 + 2 * BN / 8;
        for (int i = tid; i < GROUPS * PADC * 8; i += FA3_THREADS) {
            int grp = i / (PADC * 8), rem = i % (PADC * 8);
            uint32_t a = sQ + (uint32_t)(((grp * C + CV + rem / 8) * 8 + rem % 8) * 16);
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
        }
    }
    load_tile<C, CV>(sQ, gq, ld, q0, FA3_BM, kv1, tid);
    load_tile<C, CV>(sK, gk, ld, kv0, BN, kv1, tid);
    load_tile<CV, CV>(sV, gv, ld, kv0, BN, kv1, tid);
    cp_async_commit();

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const uint32_t qw = sQ + (uint32_t)(wg * 8 * C * 128); /* this warpgroup's 64 rows: 8 groups */

    for (int j = 0; j < nkv; j++) {
        const int buf = j & 1;
        if (j + 1 < nkv) {
            const int nb = kv0 + (j + 1) * BN;
            load_tile<C, CV>(sK + (buf ^ 1) * S::K_BYTES, gk, ld, nb, BN, kv1, tid);
            load_tile<CV, CV>(sV + (buf ^ 1) * S::V_BYTES, gv, ld, nb, BN, kv1, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async(); /* this thread's cp.async / st.shared data -> wgmma's async proxy */
        __syncthreads();
        const uint32_t kb = sK + buf * S::K_BYTES, vb = sV + buf * S::V_BYTES;

        /* S[64, BN] = Q[64, DP] K[BN, DP]^T */
        float s[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++) s[i] = 0.f;
        reg_fence(s);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            wgmma_s<BN>(s, gmma_desc(qw + ks * 256, 128, C * 128), gmma_desc(kb + ks * 256, 128, C * 128), ks > 0);
        wg_commit();
        wg_wait<0>();
        reg_fence(s);

        /* keys past the segment: -inf. s[4 nt + e]: row g (e < 2) or g + 8, key nt * 8 + 2t + (e & 1) */
        const int kbase = kv0 + j * BN;
        if (kbase + BN > kv1) {
#pragma unroll
            for (int nt = 0; nt < NS; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (kbase + nt * 8 + 2 * t + (e & 1) >= kv1) s[4 * nt + e] = -INFINITY;
        }
        /* online softmax in log2 units; rows g (r = 0) and g + 8 (r = 1) of this warp's 16 */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = m[r];
#pragma unroll
            for (int nt = 0; nt < NS; nt++) mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]) * scale_log2);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float corr = exp2f(m[r] - mx);
            m[r] = mx;
            l[r] *= corr;
#pragma unroll
            for (int nt = 0; nt < NO; nt++) {
                o[4 * nt + 2 * r] *= corr;
                o[4 * nt + 2 * r + 1] *= corr;
            }
#pragma unroll
            for (int nt = 0; nt < NS; nt++) {
                float p0 = exp2f(fmaf(s[4 * nt + 2 * r], scale_log2, -mx));
                float p1 = exp2f(fmaf(s[4 * nt + 2 * r + 1], scale_log2, -mx));
                s[4 * nt + 2 * r] = p0;
                s[4 * nt + 2 * r + 1] = p1;
                l[r] += p0 + p1;
            }
        }
        /* P (bf16) as the A operand: k16 step kk = n-tiles 2kk (a0 row g, a1 row g+8) and 2kk+1
         * (a2, a3), the mma.sync m16n8k16 A layout per warp */
        uint32_t p[BN / 4];
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            p[4 * kk + 0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
            p[4 * kk + 1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
            p[4 * kk + 2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
            p[4 * kk + 3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
        }
        /* O[64, D] += P[64, BN] V[BN, D] */
        reg_fence(o);
        reg_fence(p);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_o<D>(o, &p[4 * kk], gmma_desc(vb + kk * 2 * CV * 128, CV * 128, 128));
        wg_commit();
        wg_wait<0>();
        reg_fence(o);
        reg_fence(p);
        __syncthreads(); /* the next iteration's loads overwrite this stage */
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const float inv = 1.f / lr;
        const int row = q0 + wg * 64 + wl * 16 + g + 8 * r;
        if (row < kv1) {
            bf16 *po = out + (int64_t)row * H + h * D + 2 * t;
#pragma unroll
            for (int nt = 0; nt < NO; nt++)
                *(__nv_bfloat162 *)(po + nt * 8) = __floats2bfloat162_rn(o[4 * nt + 2 * r] * inv, o[4 * nt + 2 * r + 1] * inv);
        }
    }
#endif
}

/* ---- launcher ------------------------------------------------------------------------- */
int mv_cuda_fa3_head_dim_ok(int D) { return D == 64 || D == 72; }

mv_status mv_cuda_fa3_check(int device, int D, mv_err *e)
{
    if (!mv_cuda_fa3_head_dim_ok(D))
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: the model's head dim is %d; the fa3 kernel has 64 and 72 only", D);
    int major = 0, minor = 0;
    cudaError_t r = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (r == cudaSuccess) r = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (r != cudaSuccess) return mv_cuda_check(r, e, "fa3 attention: compute capability");
    if (major != 9 || minor != 0)
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: device %d has compute capability %d.%d; the fa3 kernel is built "
                       "for sm_90a (9.0: H100, H200) only",
                       device, major, minor);
    return MV_OK;
}

static float fa3_scale_log2(int D) { return (float)(1.0 / sqrt((double)D) * 1.4426950408889634); }

template <int D, int BN>
static cudaError_t launch_fa3(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int n_tiles,
                              int heads, cudaStream_t st)
{
    const size_t smem = fa3_shape<D, BN>::SMEM;
    const uint32_t bit = 1u << ((D == 72 ? 0 : 2) + (BN == 128 ? 0 : 1));
    if (!(s->fa3_attr & bit)) {
        cudaError_t r = cudaFuncSetAttribute(attn_fa3_kernel<D, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (r != cudaSuccess) return r;
        s->fa3_attr |= bit;
    }
    dim3 grid((unsigned)n_tiles, (unsigned)heads);
    attn_fa3_kernel<D, BN><<<grid, FA3_THREADS, smem, st>>>(out, qkv, tiles, heads, fa3_scale_log2(D));
    return cudaGetLastError();
}

cudaError_t mv_cuda_attention_fa3(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                  int n_tiles, int heads, int D, cudaStream_t st)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return r;
    if (cur != s->device) return cudaErrorInvalidDevice;
    if (!mv_cuda_fa3_head_dim_ok(D) || heads > 65535) return cudaErrorInvalidValue;
    if (s->fa3_cc == 0) { /* once per state: sm_90a code has no image for any other device */
        mv_err e;
        s->fa3_cc = mv_cuda_fa3_check(s->device, D, &e) == MV_OK ? 1 : -1;
    }
    if (s->fa3_cc < 0) return cudaErrorNoKernelImageForDevice;
    if (n_tiles <= 0) return cudaSuccess;
    const int bn64 = s->fa3_bn == 64;
    if (D == 72)
        return bn64 ? launch_fa3<72, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                    : launch_fa3<72, 128>(s, out, qkv, tiles, n_tiles, heads, st);
    return bn64 ? launch_fa3<64, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                : launch_fa3<64, 128>(s, out, qkv, tiles, n_tiles, heads, st);
}
