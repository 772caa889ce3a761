/* mv_pool.h - --pool mean: one vector per input instead of its tokens, and OUT/pooled.npy.
 *
 * What it is: the mean over an input's token rows (a video's over all its frames' tokens),
 * accumulated in f64 and rounded once to f32; and the end-of-run assembly of the per-input pooled
 * outputs of the files layout into one [inputs, out_hidden] array with its row index.
 * mv_pool_mean is the host path (the writer thread, CPU backend) and the CPU twin of the CUDA
 * backend's forward with mv_forward_req.mean (cu/pool.cu), which pools on the device with the
 * same f64 sums in the same order, bit-identical, so only [out_hidden] per input crosses PCIe.
 * What it is not: it does not decide which inputs belong to a run (the pipeline collects them,
 * mv_pool_list).
 */
#ifndef MV_POOL_H
#define MV_POOL_H

#include "mv_common.h"
#include "mv_npy.h"

typedef enum { MV_POOL_NONE = 0, MV_POOL_MEAN } mv_pool_kind;

/* out[c] = (float)(sum over r of (double)x[r, c]) / rows.  x: [rows, cols], out: [cols];
 * rows >= 1. */
void mv_pool_mean(const float *x, int64_t rows, int64_t cols, float *out);

/* The (input path, output name) pairs of the inputs a run finished ok (written now or skipped
 * as done before), collected from several threads. */
typedef struct mv_pool_list mv_pool_list;
mv_pool_list *mv_pool_list_new(void); /* NULL when out of memory */
void mv_pool_list_free(mv_pool_list *l);
/* Adds a copy of input and output (thread-safe). -1 when out of memory (the list then refuses
 * to be stacked), else 0. */
int mv_pool_list_add(mv_pool_list *l, const char *input, const char *output);

/* Writes out_dir/<stem>.npy, [n, cols] with row i = the pooled output out_dir/<output_i>
 * (read back, .npy.zst; each must be [1, cols] of one dtype, stored as that dtype), rows in byte
 * order of the input paths, and out_dir/<stem>.jsonl, line i = {"row":i,"input":...,
 * "output":...} (input_b64/output_b64 for paths that are not UTF-8, as in the manifest). Each
 * file is written to a temporary name, fsync'd and renamed, the index first; the arrays are
 * streamed, one row in memory at a time. */
mv_status mv_pool_stack(mv_pool_list *l, const char *out_dir, const char *stem, int64_t cols,
                        mv_err *e);

#endif
