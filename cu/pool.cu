/* pool.cu - --pool mean on the device: the mean over each input's output tokens, so only one
 * [out_hidden] vector per input comes back over PCIe instead of its [tokens, out_hidden] rows.
 * Sums are f64 in row order, one thread per (input, column), carried across the forward's chunks
 * in a device accumulator, divided once and rounded once to f32: the same operations in the same
 * order as the CPU twin mv_pool_mean (src/output/pool.c), so the result is bit-identical to pooling the
 * downloaded tokens on the host (test/cuda/test_cuda_ops.cu checks it).
 * Not here: which rows belong to which input (the forward's planning, cu/tower_cuda.cu), writing
 * the vectors (src/run/writers.c). */
#include "mv_cuda.cuh"

/* acc[span.entry, c] += x[span.row0 + r, c] for r = 0 .. span.rows - 1, in that order. */
__global__ void pool_add_kernel(double *acc, const float *x, const mv_pool_span *spans, int cols)
{
    const mv_pool_span sp = spans[blockIdx.x];
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const float *p = x + sp.row0 * cols + c;
    double a = acc[sp.entry * cols + c];
    int64_t r = 0;
    /* loads run ahead; the additions stay in row order */
    for (; r + 4 <= sp.rows; r += 4) {
        float v0 = p[(r + 0) * cols], v1 = p[(r + 1) * cols], v2 = p[(r + 2) * cols], v3 = p[(r + 3) * cols];
        a += (double)v0;
        a += (double)v1;
        a += (double)v2;
        a += (double)v3;
    }
    for (; r < sp.rows; r++) a += (double)p[r * cols];
    acc[sp.entry * cols + c] = a;
}

/* out[e, c] = (float)(acc[e, c] / rows[e]) */
__global__ void pool_finish_kernel(float *out, const double *acc, const int64_t *rows, int n, int cols)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n * cols) return;
    out[i] = (float)(acc[i] / (double)rows[i / cols]);
}

cudaError_t mv_cuda_pool_add(double *acc, const float *x, const mv_pool_span *spans, int n_spans, int cols,
                             cudaStream_t st)
{
    if (n_spans <= 0) return cudaSuccess;
    dim3 grid((unsigned)n_spans, (unsigned)((cols + 127) / 128));
    pool_add_kernel<<<grid, 128, 0, st>>>(acc, x, spans, cols);
    return cudaGetLastError();
}

cudaError_t mv_cuda_pool_finish(float *out, const double *acc, const int64_t *rows, int n, int cols,
                                cudaStream_t st)
{
    int64_t count = (int64_t)n * cols;
    if (count <= 0) return cudaSuccess;
    pool_finish_kernel<<<(unsigned)((count + 255) / 256), 256, 0, st>>>(out, acc, rows, n, cols);
    return cudaGetLastError();
}
