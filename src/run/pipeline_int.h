/* pipeline_int.h - internals shared by the pipeline's files (not a public header): the run's
 * state (runner), the stage timers of -v's timeline, and the helpers every stage uses.
 *   pipeline.c  threads, queues, progress, the decode pool, the tower threads, the run
 *   feed.c      the walker: shard, resume and output-name checks, the counting walk
 *   writers.c   writer threads: outputs (files or tar shards), pooling, manifest lines
 */
#ifndef MV_PIPELINE_INT_H
#define MV_PIPELINE_INT_H

#include "mv_pipeline.h"

#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_output.h"
#include "mv_pool.h"
#include "mv_queue.h"
#include "mv_tar.h"

#include <pthread.h>
#include <stdatomic.h>

/* Busy and waiting time of each stage, summed over its threads, in nanoseconds (-v's timeline). */
enum {
    T_DECODE, T_PREPROCESS, T_DECODE_WAIT, /* decode pool */
    T_STAGE_IN, T_SLAB_WAIT, T_FORWARD, T_STAGE_OUT, T_TOWER_WAIT, /* tower threads */
    T_WRITE, T_MANIFEST, T_WRITE_WAIT, /* writers */
    T_N
};
/* Progress modes (pipeline.c). */
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
    atomic_long total; /* inputs in this run's share, once the counting walk finished; -1 unknown */
    int shard_k, shard_n;
    atomic_llong tokens;
    atomic_llong t_ns[T_N];
    /* stage-in's parts: the tower threads' CPU time in it, (re)allocating page-locked buffers,
     * copying the frames */
    atomic_llong stage_in_cpu_ns, stage_alloc_ns, stage_copy_ns;
    atomic_llong writer_cpu_ns; /* the writer threads' CPU time, whole lifetime */
    atomic_long n_forwards;
    double t0, last_progress;
    int progress; /* PROG_* */
    int drawn;    /* a PROG_TTY line is on the screen (under prog_mu) */
    int ticker_stop;
    double every; /* PROG_LINES: seconds between lines */
    pthread_cond_t ticker_cv;
    pthread_mutex_t prog_mu;
    mv_tar_set *tars;      /* --layout tar: the run's shards (else NULL) */
    mv_output_swept swept; /* files layout: the directories the writers have swept of temp files */
    mv_pool_list *pooled;  /* --pool mean, files layout: inputs ok so far, for pooled.npy */
};


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
/* One line on stderr, above the progress line when one is drawn. */
void pl_say(runner *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends r to the run's manifest (one writer at a time). */
mv_status pl_append_record(runner *R, const mv_record *r, mv_err *e);

/* feed.c */
mv_status pl_feed(runner *R, mv_done *done, mv_err *e);
void *pl_count_main(void *arg);
mv_status pl_load_done(const mv_run_opts *o, int shard_k, int shard_n, mv_done **done, mv_err *e);

/* writers.c */
void *pl_writer_main(void *arg);
mv_status pl_tar_commit(void *ud, const char *text, size_t len, mv_err *e);

#endif
