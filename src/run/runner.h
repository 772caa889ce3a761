/* runner.h - the run's shared state and the services every stage of the pipeline uses (runner.c;
 * internal to src/run, not a public header): the queues and counters, the first fatal error, the
 * caller's interrupt, the stage timers and -v's timeline, progress lines and pl_say, the manifest
 * under its lock. The stages (feed.c, towers.c, writers.c) and pipeline.c call down into it;
 * runner.c calls none of them. Not here: threads and their start and drain (pipeline.c).
 */
#ifndef MV_RUNNER_H
#define MV_RUNNER_H

#include "mv_run.h"

#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_output.h"
#include "mv_hashset.h"
#include "mv_pool.h"
#include "mv_queue.h"
#include "mv_tar.h"
#include "mv_walk.h"

#include <pthread.h>
#include <stdatomic.h>

/* Busy and waiting time of each stage, summed over its threads, in nanoseconds (-v's timeline). */
enum {
    T_DECODE, T_PREPROCESS, T_DECODE_WAIT, /* decode pool */
    T_STAGE_IN, T_SLAB_WAIT, T_FORWARD, T_STAGE_OUT, T_TOWER_WAIT, /* tower threads */
    T_WRITE, T_MANIFEST, T_WRITE_WAIT, /* writers */
    T_N
};
/* Progress modes. */
enum { PROG_OFF = 0, PROG_TTY, PROG_LINES };

typedef struct runner runner;

struct runner {
    const mv_run_opts *o;
    mv_model *m;
    mv_item_ctx ictx;
    mv_manifest *man;
    pthread_mutex_t man_mu;
    mv_queue jobs, ready, done;
    /* fatal error: the first one wins; the pipeline drains without doing more work */
    atomic_int fatal;
    pthread_mutex_t err_mu;
    mv_err err;
    /* counters */
    atomic_long n_ok, n_err, n_skip, n_decoded;
    atomic_long n_dev_resized; /* inputs handed to the backends decoded, for them to resize */
    atomic_long n_ok_lined; /* --layout tar: ok samples whose lines went in with their whole shard */
    atomic_long total; /* inputs in this run's share, once the counting walk finished; -1 unknown */
    long walk_skipped[MV_WALK_SKIP_N]; /* what the feed's walk passed over (set when it ends) */
    int shard_k, shard_n;
    atomic_llong patches; /* patches that went into forwards */
    atomic_llong t_ns[T_N];
    /* stage-in's parts: the tower threads' CPU time in it, (re)allocating page-locked buffers,
     * copying the frames */
    atomic_llong stage_in_cpu_ns, stage_alloc_ns, stage_copy_ns;
    atomic_llong writer_cpu_ns; /* the writer threads' CPU time, whole lifetime */
    atomic_long n_forwards;
    double t0, last_progress;
    int progress; /* PROG_* */
    int drawn;    /* a PROG_TTY line is on the screen (under prog_mu) */
    int ticking;  /* the ticker thread runs */
    int ticker_stop;
    double every; /* PROG_LINES: seconds between lines */
    pthread_t ticker;
    pthread_cond_t ticker_cv;
    pthread_mutex_t prog_mu;
    mv_tar_set *tars;      /* --layout tar: the run's shards (else NULL) */
    mv_output_swept swept; /* files layout: the directories the writers have swept of temp files */
    struct mv_claims *claims; /* files layout: output names claimed across processes (mv_claims.h) */
    const struct mv_done *resume; /* the resume set while the stages run (read only), else NULL */
    /* pooled directories the walker removed before the run replaced their rows (said at its end) */
    char pooled_gone[8][32];
    int n_pooled_gone;
    /* --layout tar --pool mean --shard K/N: the inputs the walk gave this shard, each key its path
     * as met, a NUL, its path from / (its pooled directory takes those other namings embedded) */
    mv_hashset pool_taken;
};

/* A runner for options o and model m, taking shard k of n: counters at zero, the total unknown,
 * the clock started, the progress mode chosen from o and stderr; no queue, manifest or thread
 * yet. NULL when out of memory. */
runner *pl_runner_new(const mv_run_opts *o, mv_model *m, int shard_k, int shard_n);
/* Frees R with its tar shards (the queues and the manifest are the pipeline's). */
void pl_runner_free(runner *R);

/* Starts the progress ticker, when the mode draws progress (a thread redrawing the line). */
void pl_progress_start(runner *R);
/* Stops the ticker and draws the final progress line. */
void pl_progress_end(runner *R);

/* 1 once the caller's interrupt flag is set. */
int pl_interrupted(const runner *R);
/* Records the first fatal error; the pipeline drains without doing more work. */
void pl_set_fatal(runner *R, const mv_err *e);
/* The calling thread's CPU time in seconds (beside a stage's wall time: how much of it ran). */
double pl_thread_cpu(void);
/* Adds the time since t0 to stage k's timer. */
void pl_t_add(runner *R, int k, double t0);
/* mv_queue_pop, its waiting time added to stage k. */
void *pl_pop_timed(runner *R, mv_queue *q, int k);
/* Decodes and preprocesses it (mv_item_prepare) unless the run is failing, counting its time;
 * a fatal error is set on R. For the decode pool, and the feed's streamed tar members. Returns 1
 * when the interrupt came while it decoded and it failed (stopped by it, mv_interrupt.h): the
 * caller drops it, with no manifest line (the next run does it); else 0. */
int pl_decode(runner *R, mv_item *it);
/* One line on stderr, above the progress line when one is drawn. */
void pl_say(runner *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends r to the run's manifest (one writer at a time). */
mv_status pl_append_record(runner *R, const mv_record *r, mv_err *e);

/* -v's time of one device: busy (at least one forward running on it, host-timed) and, when the
 * backend timed its kernels (timed), the union of their intervals and its first and last
 * moments (the GPU's idle time before the first forward and after the last one). */
typedef struct {
    double busy, gpu;
    double first, last; /* when timed: the first kernel's start, the last one's end (mv_now) */
    int timed;
} pl_device_time;

/* -v: where the time of a run of `wall` seconds went, per stage (busy and waiting, summed over
 * each stage's threads: jobs decoders, n_tower tower threads, writers), and per device. */
void pl_timeline(runner *R, double wall, int jobs, int n_tower, int writers, const pl_device_time *dev,
                 int n_dev);

#endif
