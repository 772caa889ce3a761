/* patchify.cu - normalise + patchify on the GPU: the resized uint8 frames of a chunk's attention
 * segments -> f32 pixel_values rows, bit for bit as the CPU twin mv_patchify (src/input/preprocess.c):
 * the same 256-entry table per channel (mv_norm_lut, uploaded once per backend), rows in HF
 * merge-block order, columns (c, t, ph, pw), a segment short of `temporal` frames repeating its
 * last one (an image's single frame is duplicated). A table lookup is the only arithmetic, so
 * there is nothing to round differently. Not here: resizing (the CPU does it, torch's uint8
 * bicubic), the bf16 cast at tower entry (tower_cuda.cu), choosing segments (tower_cuda.cu).
 */
#include "mv_cuda.cuh"

/* One block per patch row, threads over its 3 * temporal * patch^2 columns (writes coalesced;
 * the reads of one (c, t, ph) run are patch bytes 3 apart). The row's segment is found by a
 * binary search over segs[].row0 (ascending). */
static __global__ void patchify_kernel(float *__restrict__ out, const uint8_t *__restrict__ frames,
                                       const mv_patch_seg *__restrict__ segs, int nseg,
                                       const float *__restrict__ lut, int P, int M, int T)
{
    const int64_t r = blockIdx.x;
    int lo = 0, hi = nseg - 1;
    while (lo < hi) { /* last segment with row0 <= r */
        int mid = (lo + hi + 1) >> 1;
        if (segs[mid].row0 <= r) lo = mid;
        else hi = mid - 1;
    }
    const mv_patch_seg sg = segs[lo];
    /* merge-block order: i = ((brow * bw + bcol) * M + in_row) * M + in_col */
    const int64_t i = r - sg.row0;
    const int mm = M * M, bw = sg.gw / M;
    const int64_t blk = i / mm;
    const int in = (int)(i % mm);
    const int prow = (int)(blk / bw) * M + in / M, pcol = (int)(blk % bw) * M + in % M;
    const int64_t W = (int64_t)sg.gw * P;               /* frame width in pixels */
    const int64_t fbytes = (int64_t)sg.gh * P * W * 3;  /* one frame */
    const int PP = P * P, cols = 3 * T * PP;
    float *o = out + r * cols;
    for (int k = threadIdx.x; k < cols; k += blockDim.x) {
        const int pw = k % P, ph = (k / P) % P, t = (k / PP) % T, c = k / (PP * T);
        const int f = t < sg.nf ? t : sg.nf - 1; /* repeat the last frame */
        const int64_t px = ((int64_t)(prow * P + ph) * W + (int64_t)pcol * P + pw) * 3 + c;
        o[k] = __ldg(&lut[c * 256 + frames[sg.src + f * fbytes + px]]);
    }
}

cudaError_t mv_cuda_patchify(float *out, const uint8_t *frames, const mv_patch_seg *segs, int nseg,
                             int64_t n_rows, const float *lut, int patch, int merge, int temporal,
                             cudaStream_t st)
{
    if (n_rows <= 0) return cudaSuccess;
    if (nseg < 1 || patch < 1 || merge < 1 || temporal < 1 || n_rows > 0x7fffffffLL)
        return cudaErrorInvalidValue;
    int cols = 3 * temporal * patch * patch;
    int threads = cols >= 256 ? 256 : (cols + 31) / 32 * 32;
    patchify_kernel<<<(unsigned)n_rows, threads, 0, st>>>(out, frames, segs, nseg, lut, patch, merge,
                                                          temporal);
    return cudaGetLastError();
}
