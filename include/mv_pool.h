/* mv_pool.h - --pool mean: one vector per input instead of its tokens, and OUT/pooled.npy.
 *
 * What it is: the mean over an input's token rows (a video's over all its frames' tokens),
 * accumulated in f64 and rounded once to f32; and the end-of-run assembly of the per-input pooled
 * outputs (files or tar samples) into one [inputs, out_hidden] array with its row index, in one
 * directory that changes as a whole.
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

/* The inputs of a run for the pooled directory: those that finished ok (written now or skipped
 * as done before) with where their pooled vector is, and those left out (failed) with their
 * error; collected from several threads. */
typedef struct mv_pool_list mv_pool_list;
mv_pool_list *mv_pool_list_new(void); /* NULL when out of memory */
void mv_pool_list_free(mv_pool_list *l);
/* Adds an ok input (copies): output is its file relative to OUT with offset -1 (files layout), or
 * its tar shard with the byte offset of the array data (tar layout). Thread-safe. -1 when out of
 * memory (the list then refuses to be stacked), else 0. */
int mv_pool_list_add(mv_pool_list *l, const char *input, const char *output, int64_t offset);
/* Adds a left-out input with its error (copies), likewise. */
int mv_pool_list_add_failed(mv_pool_list *l, const char *input, const char *error);

/* Writes the directory out_dir/<stem>/ holding pooled.npy, [rows, cols] with row i = the pooled
 * vector of the i-th ok input ([1, cols] read back from its file, each of one dtype, stored as
 * that dtype; or from its tar sample, which must be a [1, cols] tar_dt NPY member), and
 * pooled.jsonl, one line per input in byte order of the input paths: {"row":i,"input":...,
 * "output":..., "status":"ok"} ("offset" too for a tar sample), or {"row":null,"input":...,
 * "status":"error","error":...} for one left out (input_b64/output_b64 for paths that are not
 * UTF-8, as in the manifest). Both are written into a temp directory in out_dir, fsync'd, and
 * the directory takes <stem>'s place in one rename (exchanged with an existing one, which is then
 * removed): a reader sees the old pair or the new pair, never one of each. *rows and *left (may
 * be NULL) receive the counts. */
mv_status mv_pool_stack(mv_pool_list *l, const char *out_dir, const char *stem, int64_t cols, mv_dtype tar_dt,
                        size_t *rows, size_t *left, mv_err *e);

/* Removes out_dir/<stem>/ (a pooled directory made stale by a run that ended early): 1 removed, 0
 * there was none, -1 it could not be removed. */
int mv_pool_remove(const char *out_dir, const char *stem);

/* Removes out_dir/<stem>.npy and out_dir/<stem>.jsonl, where earlier builds wrote them, when both
 * are regular files (stale beside out_dir/<stem>/): 1 removed, 0 none there, -1 a removal failed. */
int mv_pool_remove_old(const char *out_dir, const char *stem);

#endif
