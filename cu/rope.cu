/* rope.cu - axial 2-D rotary embedding applied to q and k inside the packed qkv buffer.
 * mv_cuda_rope_table computes, once per forward chunk, cos/sin in f32 for every (row, pair p):
 * angle = pos * inv_freq[p mod Q] with pos = row for p < Q, col otherwise (Q = D/4), fp32
 * inv_freq as HF computes it (host, once). mv_cuda_rope then rotates q and k of every block in
 * place, 4 pairs per thread: y1 = x1*c + (-x2)*s, y2 = x2*c + x1*s with separate roundings, as
 * torch's elementwise ops do, stored as T; q's results times qscale before that store (1 but
 * for an fa3 plan that wants q pre-scaled: mv_fa3_plan.q_scale, one rounding either way). v is
 * untouched. CPU twins: mv_rope_tables_cpu + mv_rope_apply_cpu. */
#include "mv_cuda.cuh"

/* cs: [n, D/2] (cos, sin). One thread per (row, pair). */
__global__ void rope_table_kernel(float2 *cs, const mv_rowinfo *ri, const float *inv_freq, int64_t n,
                                  int D)
{
    int half = D / 2, Q = D / 4;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * half) return;
    int64_t r = idx / half;
    int p = (int)(idx % half);
    mv_rowinfo info = ri[r];
    float pos = (float)(p < Q ? info.row : info.col);
    float a = __fmul_rn(pos, inv_freq[p % Q]);
    cs[idx] = make_float2(cosf(a), sinf(a));
}

static __device__ __forceinline__ void load4(const bf16 *p, float *v)
{
    uint2 u = *(const uint2 *)p;
    const bf16 *h = (const bf16 *)&u;
    v[0] = __bfloat162float(h[0]); v[1] = __bfloat162float(h[1]);
    v[2] = __bfloat162float(h[2]); v[3] = __bfloat162float(h[3]);
}
static __device__ __forceinline__ void load4(const float *p, float *v)
{
    float4 a = *(const float4 *)p;
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
}
static __device__ __forceinline__ void store4(bf16 *p, const float *v)
{
    uint2 u;
    bf16 *h = (bf16 *)&u;
    h[0] = __float2bfloat16_rn(v[0]); h[1] = __float2bfloat16_rn(v[1]);
    h[2] = __float2bfloat16_rn(v[2]); h[3] = __float2bfloat16_rn(v[3]);
    *(uint2 *)p = u;
}
static __device__ __forceinline__ void store4(float *p, const float *v)
{
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}

/* One thread per (row, q/k, head, quad j < D/8): pairs 4j..4j+3 and their partners + D/2.
 * qkv: [n, 3*heads*D]; cs: [n, D/2]. Needs D % 8 == 0. */
template <typename T>
__global__ void rope_kernel(T *qkv, const float2 *cs, int64_t n, int heads, int D, float qscale)
{
    const int nq = D / 8, half = D / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * 2 * heads * nq) return;
    int j = (int)(idx % nq);
    int64_t t = idx / nq;
    int hp = (int)(t % (2 * heads)); /* part * heads + head: q and k are adjacent */
    int64_t r = t / (2 * heads);
    T *x = qkv + r * (int64_t)(3 * heads * D) + (int64_t)hp * D + 4 * j;
    const float4 *c4 = (const float4 *)(cs + r * half + 4 * j);
    float4 ca = c4[0], cb = c4[1]; /* (c0 s0 c1 s1) (c2 s2 c3 s3) */
    float c[4] = {ca.x, ca.z, cb.x, cb.z}, s[4] = {ca.y, ca.w, cb.y, cb.w};
    float x1[4], x2[4], y1[4], y2[4];
    load4(x, x1);
    load4(x + half, x2);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        y1[i] = __fadd_rn(__fmul_rn(x1[i], c[i]), __fmul_rn(-x2[i], s[i]));
        y2[i] = __fadd_rn(__fmul_rn(x2[i], c[i]), __fmul_rn(x1[i], s[i]));
    }
    if (hp < heads && qscale != 1.f)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            y1[i] = __fmul_rn(y1[i], qscale);
            y2[i] = __fmul_rn(y2[i], qscale);
        }
    store4(x, y1);
    store4(x + half, y2);
}

cudaError_t mv_cuda_rope_table(float2 *cs, const mv_rowinfo *ri, const float *inv_freq, int64_t n, int D,
                               cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    if (D % 8) return cudaErrorInvalidValue;
    int64_t total = n * (D / 2);
    rope_table_kernel<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(cs, ri, inv_freq, n, D);
    return cudaGetLastError();
}

template <typename T>
cudaError_t mv_cuda_rope(T *qkv, const float2 *cs, int64_t n, int heads, int D, float qscale, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    if (D % 8) return cudaErrorInvalidValue;
    int64_t total = n * 2 * heads * (D / 8);
    rope_kernel<T><<<(unsigned)((total + 255) / 256), 256, 0, st>>>(qkv, cs, n, heads, D, qscale);
    return cudaGetLastError();
}

template cudaError_t mv_cuda_rope<float>(float *, const float2 *, int64_t, int, int, float, cudaStream_t);
template cudaError_t mv_cuda_rope<bf16>(bf16 *, const float2 *, int64_t, int, int, float, cudaStream_t);
