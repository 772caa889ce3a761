/* layernorm.cu - LayerNorm over the last dimension (blocks' norm1/norm2, merger norm).
 * One warp per row; statistics in f32 with two passes (mean, then mean squared deviation), as
 * torch's fp32 LayerNorm. Rows of up to LN_REG_CHUNKS x 256 elements (the towers' widths: 1152,
 * 1024) are held in registers, read from memory once, weights and bias read 8 at a time; wider
 * or unaligned rows are re-read for each pass (layernorm_kernel). Both kernels add in the same
 * order: the same bits. Input and output element types may differ (f32 in, bf16 out: the bf16
 * tower with an f32 residual stream, MV_RESIDUAL_F32). Not fused with anything: the GEMM that
 * follows reads its output. CPU twin: mv_layernorm_cpu (include/mv_ops_cpu.h). */
#include "mv_cuda.cuh"

/* Loads 8 consecutive elements as f32 (16-byte load for bf16, two for f32). */
static __device__ __forceinline__ void load8(const bf16 *p, float *v)
{
    uint4 u = *(const uint4 *)p;
    const bf16 *h = (const bf16 *)&u;
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __bfloat162float(h[i]);
}
static __device__ __forceinline__ void load8(const float *p, float *v)
{
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
static __device__ __forceinline__ void store8(bf16 *p, const float *v)
{
    uint4 u;
    bf16 *h = (bf16 *)&u;
#pragma unroll
    for (int i = 0; i < 8; i++) h[i] = __float2bfloat16_rn(v[i]);
    *(uint4 *)p = u;
}
static __device__ __forceinline__ void store8(float *p, const float *v)
{
    ((float4 *)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4 *)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* x: [n, dim] of TI, y: [n, dim] of TO; VEC: dim % 8 == 0 and 16-byte aligned rows. */
template <typename TI, typename TO, bool VEC>
__global__ void layernorm_kernel(TO *y, const TI *x, const float *w, const float *b, int64_t n,
                                 int dim, float eps)
{
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= n) return;
    const TI *xr = x + row * dim;
    TO *yr = y + row * dim;
    float s = 0.f;
    if (VEC) {
        for (int c = lane * 8; c < dim; c += 256) {
            float v[8];
            load8(xr + c, v);
#pragma unroll
            for (int i = 0; i < 8; i++) s += v[i];
        }
    } else {
        for (int c = lane; c < dim; c += 32) s += mv_to_f(xr[c]);
    }
    float mean = warp_sum(s) / (float)dim;
    float q = 0.f;
    if (VEC) {
        for (int c = lane * 8; c < dim; c += 256) {
            float v[8];
            load8(xr + c, v);
#pragma unroll
            for (int i = 0; i < 8; i++) q += (v[i] - mean) * (v[i] - mean);
        }
    } else {
        for (int c = lane; c < dim; c += 32) {
            float d = mv_to_f(xr[c]) - mean;
            q += d * d;
        }
    }
    float rstd = rsqrtf(warp_sum(q) / (float)dim + eps);
    /* every lane has read its whole share of the row before any write (y may alias x) */
    __syncwarp();
    if (VEC) {
        for (int c = lane * 8; c < dim; c += 256) {
            float v[8], o[8];
            load8(xr + c, v);
#pragma unroll
            for (int i = 0; i < 8; i++) o[i] = (v[i] - mean) * rstd * w[c + i] + b[c + i];
            store8(yr + c, o);
        }
    } else {
        for (int c = lane; c < dim; c += 32)
            yr[c] = mv_from_f<TO>((mv_to_f(xr[c]) - mean) * rstd * w[c] + b[c]);
    }
}

/* The row in registers: lane l holds chunks c = 8 l + 256 k (k < NC, c < dim) of 8 elements.
 * Sums in layernorm_kernel's order (chunk by chunk, element by element), so the bits are its
 * bits; why it exists: bench/NOTES.md, "The CUDA tower". */
#define LN_REG_CHUNKS 5
template <typename TI, typename TO, int NC>
__global__ void layernorm_reg_kernel(TO *y, const TI *x, const float *w, const float *b, int64_t n, int dim,
                                     float eps)
{
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= n) return;
    const TI *xr = x + row * dim;
    TO *yr = y + row * dim;
    float v[NC][8];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < NC; k++) {
        const int c = lane * 8 + 256 * k;
        if (c < dim) {
            load8(xr + c, v[k]);
#pragma unroll
            for (int i = 0; i < 8; i++) s += v[k][i];
        }
    }
    float mean = warp_sum(s) / (float)dim;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < NC; k++)
        if (lane * 8 + 256 * k < dim)
#pragma unroll
            for (int i = 0; i < 8; i++) q += (v[k][i] - mean) * (v[k][i] - mean);
    float rstd = rsqrtf(warp_sum(q) / (float)dim + eps);
    __syncwarp(); /* every lane has read its share of the row before any write (y may alias x) */
#pragma unroll
    for (int k = 0; k < NC; k++) {
        const int c = lane * 8 + 256 * k;
        if (c < dim) {
            float wv[8], bv[8], o[8];
            load8(w + c, wv);
            load8(b + c, bv);
#pragma unroll
            for (int i = 0; i < 8; i++) o[i] = (v[k][i] - mean) * rstd * wv[i] + bv[i];
            store8(yr + c, o);
        }
    }
}

template <typename TI, typename TO>
static cudaError_t layernorm_launch(TO *y, const TI *x, const float *w, const float *b, int64_t n,
                                    int dim, float eps, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    const int warps = 8;
    unsigned blocks = (unsigned)((n + warps - 1) / warps);
    bool vec = dim % 8 == 0 && ((uintptr_t)x % 16) == 0 && ((uintptr_t)y % 16) == 0;
    bool wvec = ((uintptr_t)w % 16) == 0 && ((uintptr_t)b % 16) == 0;
    if (vec && wvec && dim <= LN_REG_CHUNKS * 256)
        layernorm_reg_kernel<TI, TO, LN_REG_CHUNKS><<<blocks, warps * 32, 0, st>>>(y, x, w, b, n, dim, eps);
    else if (vec)
        layernorm_kernel<TI, TO, true><<<blocks, warps * 32, 0, st>>>(y, x, w, b, n, dim, eps);
    else
        layernorm_kernel<TI, TO, false><<<blocks, warps * 32, 0, st>>>(y, x, w, b, n, dim, eps);
    return cudaGetLastError();
}

template <typename T>
cudaError_t mv_cuda_layernorm(T *y, const T *x, const float *w, const float *b, int64_t n, int dim,
                              float eps, cudaStream_t st)
{
    return layernorm_launch<T, T>(y, x, w, b, n, dim, eps, st);
}

cudaError_t mv_cuda_layernorm_f32_bf16(bf16 *y, const float *x, const float *w, const float *b,
                                       int64_t n, int dim, float eps, cudaStream_t st)
{
    return layernorm_launch<float, bf16>(y, x, w, b, n, dim, eps, st);
}

template cudaError_t mv_cuda_layernorm<float>(float *, const float *, const float *, const float *,
                                              int64_t, int, float, cudaStream_t);
template cudaError_t mv_cuda_layernorm<bf16>(bf16 *, const bf16 *, const float *, const float *,
                                             int64_t, int, float, cudaStream_t);
