/* mv_pipeline.h - the batch as a pipeline of threads joined by bounded queues (mv_queue.h):
 *
 *   walker (caller's thread): shard / resume / duplicate-name checks, in input order
 *     -> jobs -> decode pool (--jobs threads): mv_item_prepare (sniff, decode, preprocess)
 *     -> ready (past 2 x jobs + 4 inputs, as many as two forwards per tower thread hold)
 *     -> one tower thread per backend (per GPU): packs ready inputs into forwards
 *     -> done -> writer threads: zstd + atomic write of OUT/<rel>.npy.zst, then the manifest line.
 *
 * Also: progress lines, the per-stage timeline of -v, and the reaction to an interrupt (queued
 * work is not started; forwards in flight finish and are written). Not here: loading the model,
 * making backends, choosing the shard (run.c); what happens to one input (item.c).
 */
#ifndef MV_PIPELINE_H
#define MV_PIPELINE_H

#include "mv_run.h"

/* The most tower threads (backends) and devices a run has: --devices x --inflight beyond it is
 * refused by run.c, not cut silently. */
#define MV_PIPELINE_MAX_TOWERS 64

/* Runs the batch of o over backends be[0..n_be) (one tower thread each) into o->out_dir, taking
 * shard k of n (n <= 1: everything). The backends are spread over n_dev devices: be[i] runs on
 * device i % n_dev (for -v's per-device busy time). Fills res's counts. Returns MV_OK (inputs may
 * have failed: see res) or a fatal error in e (the manifest, a full or read-only disk, a device
 * failure); MV_ERR_USAGE when n_be or n_dev is not 1..MV_PIPELINE_MAX_TOWERS. */
mv_status mv_pipeline_run(const mv_run_opts *o, mv_model *m, mv_backend **be, int n_be, int n_dev,
                          int shard_k, int shard_n, mv_run_result *res, mv_err *e);

#endif
