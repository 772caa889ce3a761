/* mv_pool.h - --pool mean: one vector per input instead of its tokens, and OUT/pooled.npy.
 *
 * What it is: the mean over an input's token rows (a video's over all its frames' tokens),
 * accumulated in f64 and rounded once to f32; and the end-of-run assembly of OUT's per-input
 * pooled outputs (files or tar samples, as OUT's manifests list them) into one [inputs,
 * out_hidden] array with its row index, in one directory that changes as a whole.
 * mv_pool_mean is the host path (the writer thread, CPU backend) and the CPU twin of the CUDA
 * backend's forward with mv_forward_req.mean (cu/pool.cu), which pools on the device with the
 * same f64 sums in the same order, bit-identical, so only [out_hidden] per input crosses PCIe.
 * What it is not: it does not write the single outputs nor the manifest lines it indexes
 * (writers.c, output.c, tar_out.c).
 */
#ifndef MV_POOL_H
#define MV_POOL_H

#include "mv_common.h"
#include "mv_npy.h"
#include "mv_hashset.h"

typedef enum { MV_POOL_NONE = 0, MV_POOL_MEAN } mv_pool_kind;

/* out[c] = (float)(sum over r of (double)x[r, c]) / rows.  x: [rows, cols], out: [cols];
 * rows >= 1. */
void mv_pool_mean(const float *x, int64_t rows, int64_t cols, float *out);

/* The pooled directory a --pool mean run keeps: out_dir/<stem>/ ("pooled", or a shard's
 * "pooled-KKKKK-of-NNNNN"), of the outputs made with fingerprint fp: [1, cols] arrays of dt. */
typedef struct {
    const char *stem, *fp;
    int shard_k, shard_n;
    int64_t cols;
    mv_dtype dt;
    /* tar layout, a shard's: the inputs the run's walk gave it (keys: the path as met, a NUL, its
     * path from /), or NULL */
    const mv_hashset *taken;
} mv_pool_target;

typedef struct {
    size_t rows, left; /* rows written; inputs listed left out (failed) */
    size_t other;      /* ok inputs not indexed: made with other settings (fingerprints) */
    /* pooled directories of the other kind (pooled/ for a shard's, the shards' for pooled/)
     * holding a row of an input the rebuilt one holds, and the first of them by name: a reader
     * of both kinds reads those rows twice */
    size_t beside;
    char beside_first[32];
} mv_pool_counts;

/* Keeps OUT's pooled directories current, under OUT's lock .mvembed-index.lock (flock), so that
 * runs ending at the same time take turns and the last one sees every run's lines. With t:
 * rebuilds out_dir/<stem>/ from the manifests as they are now (all of OUT's; a shard's directory
 * takes the inputs of its own manifest, the files-layout outputs its shard takes by name
 * (mv_name_in_shard_n) from the others, and the tar-layout inputs of t->taken whose newest line
 * is ok, each by its newest line in any of them): pooled.npy,
 * [rows, cols], row i the pooled vector of the i-th indexed input, read back from its file or its
 * tar sample at its offset (streamed, one row at a time), and pooled.jsonl, one line per input
 * in byte order of the input paths: {"row":i,"input":...,"output":...,"status":"ok","dtype":...,
 * "model":fp,"schema":..,"run":..,"seq":..,"time":..} (the manifest line the row comes from;
 * "offset" too for a tar sample), or {"row":null,"input":...,"status":"error","error":...} for an
 * input whose newest line is an error (input_b64/output_b64 for paths that are not UTF-8, as in
 * the manifest). An input is a row when its newest line is ok and made with fp; ok inputs of other
 * settings (token outputs of a run without --pool) are not listed. Both files are written into a
 * temp directory in out_dir, fsync'd, and the directory takes <stem>'s place in one rename
 * (exchanged with an existing one, which is then removed): a reader sees the old pair or the new
 * pair, never one of each. Then (with or without t) every other pooled directory of out_dir one
 * of whose rows is no longer its input's newest ok line is removed, removed(its name, NULL, ud)
 * called (may be NULL); with t a shard's (shard_n > 1), so is each pooled-JJJJJ-of-MMMMM/ of
 * another count M > 1 holding a row of an input t's directory holds (an array resubmitted with
 * another N), removed(its name, t->stem, ud) called, so that the shards' directories hold each
 * input's row once. Those of the other kind (pooled/ beside a shard's, a shard's beside pooled/)
 * holding a row t's directory holds stay, counted in c->beside. Without t and no pooled
 * directory in out_dir, nothing is read. */
mv_status mv_pool_update(const char *out_dir, const mv_pool_target *t, mv_pool_counts *c,
                         void (*removed)(const char *stem, const char *by, void *ud), void *ud, mv_err *e);

/* Removes out_dir/<stem>/ (a pooled directory made stale by a run that ended early): 1 removed, 0
 * there was none, -1 it could not be removed. */
int mv_pool_remove(const char *out_dir, const char *stem);

/* The pooled directories of out_dir ("pooled", "pooled-KKKKK-of-NNNNN"): without drop, 1 when
 * there is one (0 when none); with drop, each one for which drop(its name, its shard k of n: 0 and
 * 0 for "pooled", ud) says 1 is removed (mv_pool_remove), and the count of all is returned. */
int mv_pool_dirs(const char *out_dir, int (*drop)(const char *stem, int k, int n, void *ud), void *ud);

/* Removes out_dir/<stem>.npy and out_dir/<stem>.jsonl, where earlier builds wrote them, when both
 * are regular files (stale beside out_dir/<stem>/): 1 removed, 0 none there, -1 a removal failed. */
int mv_pool_remove_old(const char *out_dir, const char *stem);

#endif
