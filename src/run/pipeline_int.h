/* pipeline_int.h - the stages pipeline.c starts (not a public header), each calling down into
 * the runner (runner.h) and none into another stage or pipeline.c:
 *   feed.c     the walker: shard, resume and output-name checks, the counting walk
 *   towers.c   tower threads: packing ready inputs into forwards, device turns (their output
 *              slabs and staging buffers: slabs.c)
 *   writers.c  writer threads: outputs (files or tar shards), pooling, manifest lines
 */
#ifndef MV_PIPELINE_INT_H
#define MV_PIPELINE_INT_H

#include "mv_pipeline.h"
#include "runner.h"

/* feed.c */
mv_status pl_feed(runner *R, mv_done *done, mv_err *e);
void *pl_count_main(void *arg);

/* towers.c: the tower stage of backends be[0..n_be) spread over n_dev devices (be[i] on device
 * i % n_dev), one thread each: mv_thread_create(..., pl_tower_main, pl_tower_arg(T, i)). A thread
 * returns once the ready queue is closed and drained and every output it handed out is written.
 * pl_towers_new returns NULL when out of memory; pl_towers_free after the threads are joined. */
typedef struct pl_towers pl_towers;
pl_towers *pl_towers_new(runner *R, mv_backend **be, int n_be, int n_dev);
void *pl_tower_arg(pl_towers *T, int i);
/* What the ready queue should hold for the tower threads to fill their windows (two forwards'
 * worth of each backend's batch_tokens patches): *items inputs at most, *patches patches (0:
 * one input per forward, nothing to fill). */
void pl_towers_ready_room(const pl_towers *T, const runner *R, size_t *items, size_t *patches);
void *pl_tower_main(void *arg);
/* Device d's -v time, once the threads are joined. */
pl_device_time pl_towers_time(pl_towers *T, int d);
void pl_towers_free(pl_towers *T);

/* writers.c */
void *pl_writer_main(void *arg);
/* Appends a complete shard's lines (text[0..len), '\n'-ended) to the run's manifest (adopted
 * shards'; the run's own go in through the tar set, mv_tar_set_dedup, and pl_tar_appended counts
 * them as this run's ok inputs, n_ok_lined). */
mv_status pl_tar_commit(void *ud, const char *text, size_t len, mv_err *e);
/* mv_tar_dedup_opts' callbacks: a sample dropped (another run's stands), n lines appended */
void pl_tar_dropped(void *ud, const char *input);
void pl_tar_appended(void *ud, long n);

#endif
