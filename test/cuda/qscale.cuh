/* qscale.cuh - the test programs' copy of a packed qkv [n, 3 * heads * D] with q multiplied by
 * `scale` and rounded to bf16 again: the input of an fa3 plan whose q_scale is not 1 (the tower
 * folds that scale into its rope kernel instead, one rounding). Not here: production code. */
#ifndef MV_TEST_QSCALE_CUH
#define MV_TEST_QSCALE_CUH

#include "mv_cuda.cuh"

__global__ void test_scale_q_kernel(bf16 *dst, const bf16 *src, int64_t n, int64_t H, float scale)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * 3 * H) return;
    const float v = __bfloat162float(src[i]);
    dst[i] = i % (3 * H) < H ? __float2bfloat16_rn(v * scale) : src[i];
}
static inline cudaError_t test_scale_q(bf16 *dst, const bf16 *src, int64_t n, int heads, int D, float scale,
                                       cudaStream_t st)
{
    const int64_t total = n * 3 * (int64_t)heads * D;
    if (total <= 0) return cudaSuccess;
    test_scale_q_kernel<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(dst, src, n, (int64_t)heads * D, scale);
    return cudaGetLastError();
}

#endif
