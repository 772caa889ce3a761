/* pipeline.c - the batch's threads and queues (see mv_pipeline.h for the picture): opens the
 * run's outputs (resume state, manifest, tar shards, pooled list), starts the stages' threads,
 * feeds them from the caller's thread, drains them stage by stage and reports. The decode pool is
 * here; the walker is in feed.c, the tower threads in towers.c, the writers in writers.c
 * (pipeline_int.h), the state they share and its services in runner.c.
 *
 * A bad input gets an error line and the batch goes on; fatal problems (device failure, a full or
 * read-only disk, the manifest) stop it. Memory stays bounded: paths are streamed and every queue
 * has a fixed capacity. After an interrupt no queued input is started: inputs not yet decoded or
 * not yet in a forward are dropped (no manifest line: the next run does them), forwards in flight
 * finish and are written.
 */
#include "pipeline_int.h"

#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_pool.h"
#include "mv_queue.h"
#include "mv_tar.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- decode pool -------------------------------------------------------------------------- */

static void *decode_main(void *arg)
{
    runner *R = arg;
    mv_item *it;
    while ((it = pl_pop_timed(R, &R->jobs, T_DECODE_WAIT))) {
        if (pl_interrupted(R) && !it->error) { /* not started: the next run does it */
            mv_item_free(it);
            continue;
        }
        if (!atomic_load(&R->fatal) && !it->error) {
            mv_err e;
            if (mv_item_prepare(&R->ictx, it, &e))
                pl_set_fatal(R, &e);
            atomic_fetch_add(&R->t_ns[T_DECODE], (long long)(it->t_decode * 1e9));
            atomic_fetch_add(&R->t_ns[T_PREPROCESS], (long long)(it->t_preprocess * 1e9));
            if (!it->error)
                atomic_fetch_add(&R->n_decoded, 1);
            if (!it->error && it->p.sw)
                atomic_fetch_add(&R->n_dev_resized, 1);
        }
        if (mv_queue_push(&R->ready, it))
            mv_item_free(it);
    }
    return NULL;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* Writer threads at most (zstd + fsync of outputs of tens of MB: the slow CPU stage). */
#define MAX_WRITERS 64

/* The run's threads: jobs decoders, one tower thread per backend, writers, the counting walk. */
typedef struct {
    int jobs, writers;
    pthread_t *dec, tw[MV_PIPELINE_MAX_TOWERS], wr[MAX_WRITERS], counter;
    int nd, nt, nw, counting; /* started */
} threads;

/* Opens what the run writes into: the resume state (*done), the manifest, the tar shards
 * (--layout tar) and the list of pooled outputs (--pool mean, files layout). On failure closes
 * what it opened. */
static mv_status open_outputs(runner *R, int shard_k, int shard_n, mv_done **done, mv_err *e)
{
    const mv_run_opts *o = R->o;
    char mpath[4200];
    mv_name_manifest(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    mv_status st;
    *done = NULL;
    if ((st = pl_load_done(o, shard_k, shard_n, done, e)))
        return st;
    if ((st = mv_manifest_open(mpath, &R->man, e)))
        goto fail_done;
    if (o->layout == MV_LAYOUT_TAR &&
        (st = mv_tar_set_open(o->out_dir, shard_k, shard_n, o->shard_size, pl_tar_commit, R, &R->tars, e)))
        goto fail_man;
    if (o->layout == MV_LAYOUT_FILES && o->pool == MV_POOL_MEAN && !(R->pooled = mv_pool_list_new())) {
        st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
        goto fail_man;
    }
    return MV_OK;
fail_man:
    mv_manifest_close(R->man, NULL);
    R->man = NULL;
fail_done:
    mv_done_free(*done);
    *done = NULL;
    return st;
}

/* How many decoders and writers, and each decoder's share of the CPUs for video. */
static void size_threads(runner *R, int n_be, threads *th)
{
    const mv_run_opts *o = R->o;
    int jobs = o->jobs > 0 ? o->jobs : mv_cpu_count();
    /* each decode thread's video decoder gets its share of the CPUs: FFmpeg's default, a frame
     * thread per CPU in every decoder, puts jobs x CPUs threads on the CPUs, and its frame
     * threads decode ahead of the frames a sampled read wants */
    int cpus = mv_cpu_count();
    R->ictx.video_threads = cpus / jobs > 1 ? cpus / jobs : 1;
    /* writers compress (zstd) and fsync outputs that can be tens of MB each (27B layout: 5120
     * floats per token): on a GPU machine they, not decoding, are the slow CPU stage */
    /* measured on 32 cores (bench/RESULTS.md): 16 writers (half the CPUs) made 35 files/s of
     * 1900 x 5120 f32 (~0.46 s of a thread each) and held back two GPUs that make ~54; writers
     * sleep when there is nothing to write, so: 7/8 of the CPUs, at most MAX_WRITERS */
    int writers = jobs - jobs / 8;
    writers = writers < 2 ? 2 : (writers > MAX_WRITERS ? MAX_WRITERS : writers);
    if (o->verbose)
        fprintf(stderr, "mvembed: pipeline: %d decode threads, %d tower thread%s, %d writers (%d CPUs in "
                "this process's affinity mask)\n", jobs, n_be, n_be > 1 ? "s" : "", writers, cpus);
    th->jobs = jobs;
    th->writers = writers;
}

/* Makes the queues and starts the progress ticker, the counting walk and every stage's threads
 * (the tower stage T's, for n_be backends). MV_OK when each stage has a thread at least. */
static mv_status start_threads(runner *R, pl_towers *T, int n_be, threads *th, mv_err *e)
{
    const mv_run_opts *o = R->o;
    size_t qcap = (size_t)th->jobs * 2 + 4;
    int qfail = mv_queue_init(&R->jobs, qcap);
    qfail |= mv_queue_init(&R->ready, qcap);
    qfail |= mv_queue_init(&R->done, qcap);
    pl_progress_start(R);
    if (R->progress) {
        int from_stdin = 0;
        for (int i = 0; i < o->n_paths; i++)
            from_stdin |= !strcmp(o->paths[i], "-");
        th->counting = !from_stdin && !pthread_create(&th->counter, NULL, pl_count_main, R);
    }
    th->dec = qfail || !T ? NULL : calloc(th->jobs, sizeof *th->dec);
    if (!th->dec)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory for the pipeline's queues");
    for (; th->nd < th->jobs; th->nd++)
        if (pthread_create(&th->dec[th->nd], NULL, decode_main, R))
            break;
    for (; th->nt < n_be; th->nt++)
        if (pthread_create(&th->tw[th->nt], NULL, pl_tower_main, pl_tower_arg(T, th->nt)))
            break;
    for (; th->nw < th->writers; th->nw++)
        if (pthread_create(&th->wr[th->nw], NULL, pl_writer_main, R))
            break;
    if (!th->nd || !th->nt || !th->nw)
        return mv_fail(e, MV_ERR_INTERNAL, "cannot start threads");
    return MV_OK;
}

/* Drains the pipeline: each stage closes the next queue once its own threads are finished. */
static void drain(runner *R, threads *th)
{
    mv_queue_close(&R->jobs);
    for (int i = 0; i < th->nd; i++)
        pthread_join(th->dec[i], NULL);
    mv_queue_close(&R->ready);
    for (int i = 0; i < th->nt; i++)
        pthread_join(th->tw[i], NULL);
    mv_queue_close(&R->done);
    for (int i = 0; i < th->nw; i++)
        pthread_join(th->wr[i], NULL);
    if (th->counting)
        pthread_join(th->counter, NULL);
    free(th->dec);
    th->dec = NULL;
    mv_queue_destroy(&R->jobs);
    mv_queue_destroy(&R->ready);
    mv_queue_destroy(&R->done);
}

/* Closes the manifest and fills res; then, for --pool mean in the files layout, writes
 * OUT/pooled.npy once every input of the run's share is ok. The run's first fatal error wins. */
static mv_status finish(runner *R, mv_run_result *res, mv_err *e)
{
    const mv_run_opts *o = R->o;
    mv_status cst = mv_manifest_close(R->man, e);
    R->man = NULL;
    res->ok = atomic_load(&R->n_ok);
    res->failed = atomic_load(&R->n_err);
    res->skipped = atomic_load(&R->n_skip);
    res->signal = o->interrupt ? *o->interrupt : 0;
    if (atomic_load(&R->fatal)) {
        *e = R->err;
        return MV_ERR_IO;
    }
    if (cst || !R->pooled || res->signal || res->failed)
        return cst;
    char stem[64];
    if (R->shard_n > 1)
        snprintf(stem, sizeof stem, "pooled-%05d-of-%05d", R->shard_k, R->shard_n);
    else
        snprintf(stem, sizeof stem, "pooled");
    mv_status st = mv_pool_stack(R->pooled, o->out_dir, stem, R->m->cfg.out_hidden, e);
    if (!st && o->verbose)
        fprintf(stderr, "mvembed: %s/%s.npy and %s.jsonl: %ld pooled inputs\n", o->out_dir, stem, stem,
                res->ok + res->skipped);
    return st;
}

/* The closing lines: counts and time, or the interrupt; with -v the timeline. */
static void report(runner *R, const mv_run_result *res, const threads *th, pl_towers *T, int n_dev)
{
    const mv_run_opts *o = R->o;
    double wall = mv_now() - R->t0;
    if (res->signal) {
        fprintf(stderr, "mvembed: interrupted; %ld done and kept (run again to resume)\n", res->ok);
        return;
    }
    if (!o->quiet)
        fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs\n", res->ok, res->failed,
                res->skipped, wall);
    if (o->verbose) {
        pl_device_time dev[MV_PIPELINE_MAX_TOWERS];
        for (int d = 0; d < n_dev; d++)
            dev[d] = pl_towers_time(T, d);
        pl_timeline(R, wall, th->jobs, th->nt, th->nw, dev, n_dev);
        if (R->ictx.device_resize)
            fprintf(stderr, "mvembed: %ld input%s resized by the backend on its device (the others by the "
                    "decode threads)\n", (long)atomic_load(&R->n_dev_resized),
                    atomic_load(&R->n_dev_resized) == 1 ? "" : "s");
    }
}

mv_status mv_pipeline_run(const mv_run_opts *o, mv_model *m, mv_backend **be, int n_be, int n_dev,
                          int shard_k, int shard_n, mv_run_result *res, mv_err *e)
{
    memset(res, 0, sizeof *res);
    mv_status st;
    if (n_be < 1 || n_be > MV_PIPELINE_MAX_TOWERS || n_dev < 1 || n_dev > n_be)
        return mv_fail(e, MV_ERR_USAGE, "pipeline: %d backends on %d devices: 1..%d backends, each device one or more",
                       n_be, n_dev, MV_PIPELINE_MAX_TOWERS);
    if ((st = mv_mkdirs(o->out_dir, e)))
        return st;
    if (access(o->out_dir, W_OK) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: output directory is not writable: %s", o->out_dir, strerror(errno));
    runner *R = pl_runner_new(o, m, shard_k, shard_n);
    if (!R)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    mv_done *done;
    if ((st = open_outputs(R, shard_k, shard_n, &done, e))) {
        pl_runner_free(R);
        return st;
    }
    threads th = {0};
    size_threads(R, n_be, &th);
    R->ictx.device_resize = 1; /* images stay decoded where every backend resizes on its device */
    for (int i = 0; i < n_be; i++)
        R->ictx.device_resize &= be[i]->resizes;
    pl_towers *T = pl_towers_new(R, be, n_be, n_dev);
    mv_err fe;
    st = start_threads(R, T, n_be, &th, &fe);
    if (!st)
        st = pl_feed(R, done, &fe);
    if (st)
        pl_set_fatal(R, &fe);
    drain(R, &th);
    mv_done_free(done);
    pl_progress_end(R);
    if (!(st = finish(R, res, e)))
        report(R, res, &th, T, n_dev);
    pl_towers_free(T);
    pl_runner_free(R);
    return st;
}
