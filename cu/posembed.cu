/* posembed.cu - learned position table, bilinearly interpolated (align_corners) to each entry's
 * grid and added to the patch embedding: x = T(x + T(pos)). Weights and the 4-tap sum are f32 in
 * HF's exact order (docs/hf-reference.md §3.2 step 3): src = fl32(fl32(p*(S-1)) / max(n-1, 1)),
 * w0 = max(0, 1-d), w1 = max(0, 1-|d-1|), taps (r0,c0) (r0,c1) (r1,c0) (r1,c1), weight = wr*wc.
 * The table stays f32 (exact copies of the bf16 checkpoint values). CPU twin:
 * mv_pos_embed_add_cpu (which adds without rounding). */
#include "mv_cuda.cuh"

static __device__ __forceinline__ void axis_taps(int p, int n, int side, int *t0, int *t1, float *w0,
                                                 float *w1)
{
    float src = __fdiv_rn(__fmul_rn((float)p, (float)(side - 1)), (float)(n - 1 > 1 ? n - 1 : 1));
    float f0 = floorf(src);
    float d = __fsub_rn(src, f0);
    int i0 = (int)f0;
    *t0 = min(max(i0, 0), side - 1);
    *t1 = min(max(i0 + 1, 0), side - 1);
    *w0 = fmaxf(0.f, __fsub_rn(1.f, d));
    *w1 = fmaxf(0.f, __fsub_rn(1.f, fabsf(__fsub_rn(d, 1.f))));
}

/* One block per row, threads stride over the H columns. x: [n, H]; table: [side*side, H]. */
template <typename T>
__global__ void pos_embed_kernel(T *x, const mv_rowinfo *ri, const float *table, int side, int H,
                                 int64_t n)
{
    int64_t r = blockIdx.x;
    if (r >= n) return;
    mv_rowinfo info = ri[r];
    int r0, r1, c0, c1;
    float wr0, wr1, wc0, wc1;
    axis_taps(info.row, info.h, side, &r0, &r1, &wr0, &wr1);
    axis_taps(info.col, info.w, side, &c0, &c1, &wc0, &wc1);
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        float e00 = table[(int64_t)(r0 * side + c0) * H + c];
        float e01 = table[(int64_t)(r0 * side + c1) * H + c];
        float e10 = table[(int64_t)(r1 * side + c0) * H + c];
        float e11 = table[(int64_t)(r1 * side + c1) * H + c];
        float pos = __fmul_rn(e00, __fmul_rn(wr0, wc0));
        pos = __fadd_rn(pos, __fmul_rn(e01, __fmul_rn(wr0, wc1)));
        pos = __fadd_rn(pos, __fmul_rn(e10, __fmul_rn(wr1, wc0)));
        pos = __fadd_rn(pos, __fmul_rn(e11, __fmul_rn(wr1, wc1)));
        T *xp = x + r * H + c;
        *xp = mv_from_f<T>(__fadd_rn(mv_to_f(*xp), mv_round_t<T>(pos)));
    }
}

template <typename T>
cudaError_t mv_cuda_pos_embed_add(T *x, const mv_rowinfo *ri, const float *table, int side, int H,
                                  int64_t n, cudaStream_t st)
{
    if (n <= 0) return cudaSuccess;
    if (n > 2147483647LL) return cudaErrorInvalidValue;
    pos_embed_kernel<T><<<(unsigned)n, 128, 0, st>>>(x, ri, table, side, H, n);
    return cudaGetLastError();
}

template cudaError_t mv_cuda_pos_embed_add<float>(float *, const mv_rowinfo *, const float *, int,
                                                  int, int64_t, cudaStream_t);
template cudaError_t mv_cuda_pos_embed_add<bf16>(bf16 *, const mv_rowinfo *, const float *, int, int,
                                                 int64_t, cudaStream_t);
