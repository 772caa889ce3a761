/* rope.cu - axial 2-D rotary embedding applied to q and k inside the packed qkv buffer.
 * cos/sin are computed in f32 per (row, pair) from the row's patch position and fp32 inv_freq
 * (HF's values, computed on the host once), never stored; the rotation is y1 = x1*c + (-x2)*s,
 * y2 = x2*c + x1*s with separate roundings, as torch's elementwise ops do; the result is stored as
 * T. v is untouched. CPU twins: mv_rope_tables_cpu + mv_rope_apply_cpu. */
#include "mv_cuda.cuh"

/* One thread per (row, pair p in [0, D/2)); loops over heads and q/k. qkv: [n, 3*heads*D]. */
template <typename T>
__global__ void rope_kernel(T *qkv, const mv_rowinfo *ri, const float *inv_freq, int64_t n,
                            int heads, int D)
{
    int half = D / 2, Q = D / 4;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * half) return;
    int64_t r = idx / half;
    int p = (int)(idx % half);
    mv_rowinfo info = ri[r];
    float pos = (float)(p < Q ? info.row : info.col);
    float a = __fmul_rn(pos, inv_freq[p % Q]);
    float c = cosf(a), s = sinf(a);
    int H = heads * D;
    T *base = qkv + r * (int64_t)(3 * H);
    for (int part = 0; part < 2; part++) {
        for (int h = 0; h < heads; h++) {
            T *v = base + part * H + h * D;
            float x1 = mv_to_f(v[p]), x2 = mv_to_f(v[p + half]);
            float y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(-x2, s));
            float y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
            v[p] = mv_from_f<T>(y1);
            v[p + half] = mv_from_f<T>(y2);
        }
    }
}

template <typename T>
cudaError_t mv_cuda_rope(T *qkv, const mv_rowinfo *ri, const float *inv_freq, int64_t n, int heads,
                         int D, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    if (D % 4) return cudaErrorInvalidValue;
    int64_t total = n * (D / 2);
    rope_kernel<T><<<(unsigned)((total + 255) / 256), 256, 0, st>>>(qkv, ri, inv_freq, n, heads, D);
    return cudaGetLastError();
}

template cudaError_t mv_cuda_rope<float>(float *, const mv_rowinfo *, const float *, int64_t, int,
                                         int, cudaStream_t);
template cudaError_t mv_cuda_rope<bf16>(bf16 *, const mv_rowinfo *, const float *, int64_t, int,
                                        int, cudaStream_t);
