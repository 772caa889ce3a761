/* resize.cu - torch's uint8 antialiased bicubic resize on the GPU, bit for bit as its CPU twin
 * mv_resize_bicubic_aa_u8 (src/input/preprocess.c): the same int16 weights per axis
 * (mv_resize_axis_init, computed on the host and uploaded with mv_cuda_resize_axis_pack), the same
 * int sums from the same bias, arithmetic shift and clamp to 0..255, the horizontal pass first and
 * then the vertical one through a uint8 intermediate [sh][dw][3], an axis of unchanged size
 * skipped, equal sizes copied. Integer arithmetic only (the sum of int products is the same in
 * any order), so there is nothing to round differently. Frames of one size (a video's) go
 * through one launch per pass. Not here: the weights' computation (preprocess.c), the target
 * size (smart_resize), normalise + patchify (patchify.cu).
 */
#include "mv_cuda.cuh"

#include <string.h>

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t mv_cuda_resize_axis_bytes(const mv_resize_axis *a)
{
    return 2 * align16((size_t)a->n * sizeof(int)) + align16((size_t)a->n * a->ksize * sizeof(int16_t));
}

void mv_cuda_resize_axis_pack(const mv_resize_axis *a, void *h, void *dev, mv_cuda_resize_axis *d)
{
    const size_t ib = align16((size_t)a->n * sizeof(int));
    uint8_t *hp = (uint8_t *)h, *dp = (uint8_t *)dev;
    memcpy(hp, a->xmin, (size_t)a->n * sizeof(int));
    memcpy(hp + ib, a->xsize, (size_t)a->n * sizeof(int));
    memcpy(hp + 2 * ib, a->w, (size_t)a->n * a->ksize * sizeof(int16_t));
    d->xmin = (const int *)dp;
    d->xsize = (const int *)(dp + ib);
    d->w = (const int16_t *)(dp + 2 * ib);
    d->n = a->n;
    d->ksize = a->ksize;
    d->prec = a->prec;
}

static __device__ __forceinline__ uint8_t clamp_shift(int acc, unsigned p)
{
    int v = acc >> p; /* arithmetic shift of a possibly negative int, as torch and the CPU twin */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* src [nf][h][sw][3] -> dst [nf][h][dw][3] along x: one thread per output byte (grid-stride). */
static __global__ void resize_h_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t n,
                                       int sw, int dw, mv_cuda_resize_axis a)
{
    const int bias = 1 << (a.prec - 1);
    const int64_t drow = (int64_t)dw * 3;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / drow; /* frame * h + y */
        const int k = (int)(i % drow), x = k / 3, c = k % 3;
        const uint8_t *p = src + row * sw * 3 + (int64_t)a.xmin[x] * 3 + c;
        const int16_t *w = a.w + (int64_t)x * a.ksize;
        const int m = a.xsize[x];
        int acc = bias;
        for (int j = 0; j < m; j++)
            acc += p[3 * j] * w[j];
        dst[i] = clamp_shift(acc, a.prec);
    }
}

/* src [nf][sh][w][3] -> dst [nf][dh][w][3] along y: one thread per output byte (grid-stride). */
static __global__ void resize_v_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t n,
                                       int w3, int sh, int dh, mv_cuda_resize_axis a)
{
    const int bias = 1 << (a.prec - 1);
    const int64_t dframe = (int64_t)dh * w3;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t f = i / dframe, r = i % dframe;
        const int y = (int)(r / w3), k = (int)(r % w3);
        const uint8_t *p = src + f * sh * (int64_t)w3 + (int64_t)a.xmin[y] * w3 + k;
        const int16_t *wt = a.w + (int64_t)y * a.ksize;
        const int m = a.xsize[y];
        int acc = bias;
        for (int j = 0; j < m; j++)
            acc += p[(int64_t)j * w3] * wt[j];
        dst[i] = clamp_shift(acc, a.prec);
    }
}

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 65536 * 16 ? b : 65536 * 16); /* grid-stride beyond */
}

cudaError_t mv_cuda_resize_u8(uint8_t *dst, const uint8_t *src, uint8_t *tmp, int nf, int sw, int sh,
                              int dw, int dh, const mv_cuda_resize_axis *ax,
                              const mv_cuda_resize_axis *ay, cudaStream_t st)
{
    if (nf < 0 || sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0) return cudaErrorInvalidValue;
    if (nf == 0) return cudaSuccess;
    const int wx = sw != dw, wy = sh != dh;
    if ((wx && (!ax || ax->n != dw)) || (wy && (!ay || ay->n != dh)) || (wx && wy && !tmp))
        return cudaErrorInvalidValue;
    if (!wx && !wy)
        return cudaMemcpyAsync(dst, src, (size_t)nf * sh * sw * 3, cudaMemcpyDeviceToDevice, st);
    if (wx) {
        uint8_t *hout = wy ? tmp : dst;
        const int64_t n = (int64_t)nf * sh * dw * 3;
        resize_h_kernel<<<blocks_for(n), 256, 0, st>>>(hout, src, n, sw, dw, *ax);
        cudaError_t r = cudaGetLastError();
        if (r != cudaSuccess || !wy) return r;
        src = tmp;
    }
    const int64_t n = (int64_t)nf * dh * dw * 3;
    resize_v_kernel<<<blocks_for(n), 256, 0, st>>>(dst, src, n, dw * 3, sh, dh, *ay);
    return cudaGetLastError();
}
