/* runner.c - the run's shared state and its services (runner.h): the first fatal error, the
 * caller's interrupt, the stage timers and -v's timeline, progress lines (a ticker thread redraws
 * them) and pl_say, manifest appends under their lock. Calls no stage: feed.c, towers.c,
 * writers.c and pipeline.c call down into it.
 */
#include "runner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static const char *const t_names[T_N] = {
    "decode", "preprocess", "decode wait", "stage-in", "output-slab wait", "forward", "stage-out", "tower wait",
    "write (convert+compress+fsync)", "manifest", "writer wait"};

runner *pl_runner_new(const mv_run_opts *o, mv_model *m, int shard_k, int shard_n)
{
    runner *R = calloc(1, sizeof *R);
    if (!R)
        return NULL;
    pthread_mutex_init(&R->man_mu, NULL);
    pthread_mutex_init(&R->err_mu, NULL);
    pthread_mutex_init(&R->prog_mu, NULL);
    mv_output_swept_init(&R->swept);
    pthread_cond_init(&R->ticker_cv, NULL);
    R->o = o;
    R->m = m;
    R->ictx = (mv_item_ctx){.m = m, .max_decode_pixels = o->max_decode_pixels, .timeout = o->timeout,
                            .num_frames = o->num_frames, .dump_dir = o->dump_dir,
                            .input_hash = o->input_hash};
    R->shard_k = shard_k;
    R->shard_n = shard_n;
    R->t0 = mv_now();
    R->every = o->progress_every;
    if (R->every == 0 && o->progress < 0 && !isatty(2) && (o->verbose || o->batch_job))
        R->every = 30; /* logs of batch jobs get a line now and then */
    if (o->quiet || o->progress == 0)
        R->progress = PROG_OFF;
    else if (R->every > 0)
        R->progress = PROG_LINES;
    else if (o->progress > 0 || isatty(2))
        R->progress = PROG_TTY;
    else
        R->progress = PROG_OFF;
    atomic_store(&R->total, -1);
    return R;
}

void pl_runner_free(runner *R)
{
    if (!R)
        return;
    mv_tar_set_free(R->tars);
    pthread_mutex_destroy(&R->man_mu);
    pthread_mutex_destroy(&R->err_mu);
    pthread_mutex_destroy(&R->prog_mu);
    mv_output_swept_destroy(&R->swept);
    mv_hashset_free(&R->pool_taken);
    pthread_cond_destroy(&R->ticker_cv);
    free(R);
}

double pl_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int pl_interrupted(const runner *R)
{
    return R->o->interrupt && *R->o->interrupt;
}

void pl_set_fatal(runner *R, const mv_err *e)
{
    pthread_mutex_lock(&R->err_mu);
    if (!atomic_load(&R->fatal)) {
        R->err = *e;
        atomic_store(&R->fatal, 1);
    }
    pthread_mutex_unlock(&R->err_mu);
}

void pl_t_add(runner *R, int k, double t0)
{
    atomic_fetch_add(&R->t_ns[k], (long long)((mv_now() - t0) * 1e9));
}

int pl_decode(runner *R, mv_item *it)
{
    if (atomic_load(&R->fatal) || it->error)
        return 0;
    mv_err e;
    if (mv_item_prepare(&R->ictx, it, &e))
        pl_set_fatal(R, &e);
    atomic_fetch_add(&R->t_ns[T_DECODE], (long long)(it->t_decode * 1e9));
    atomic_fetch_add(&R->t_ns[T_PREPROCESS], (long long)(it->t_preprocess * 1e9));
    if (!it->error)
        atomic_fetch_add(&R->n_decoded, 1);
    if (!it->error && it->p.sw) /* kept decoded: the backend resizes it on its device */
        atomic_fetch_add(&R->n_dev_resized, 1);
    return it->error && pl_interrupted(R);
}

/* mv_queue_pop, with the time spent waiting added to stage k */
void *pl_pop_timed(runner *R, mv_queue *q, int k)
{
    double t = mv_now();
    void *p = mv_queue_pop(q);
    pl_t_add(R, k, t);
    return p;
}

/* Progress. Modes: 0 off; PROG_TTY one line redrawn in place on a terminal, cut to its width,
 * with per-file lines (pl_say) printed above it; PROG_LINES one plain line every o->progress_every
 * seconds, for logs (default 30 s when stderr is not a terminal and -v is given or o->batch_job,
 * SLURM_JOB_ID, is set). A ticker thread draws it, so a long input still shows life. */

static void fmt_dur(char *buf, size_t cap, double t)
{
    if (t < 0)
        t = 0;
    long s = (long)t;
    if (s >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
}

/* Caller holds prog_mu. */
static void progress_draw(runner *R, int final)
{
    double now = mv_now();
    double dt = now - R->t0 > 1e-9 ? now - R->t0 : 1e-9;
    long done = atomic_load(&R->n_ok) + atomic_load(&R->n_err);
    long total = atomic_load(&R->total), skip = atomic_load(&R->n_skip);
    char tot[48] = "", eta[48] = "", el[32], line[512];
    if (total >= 0)
        snprintf(tot, sizeof tot, "/%ld", total - skip);
    if (total >= 0 && done > 0 && !final) {
        char d[32];
        fmt_dur(d, sizeof d, (total - skip - done) * (dt / done));
        snprintf(eta, sizeof eta, ", ETA %s", d);
    }
    fmt_dur(el, sizeof el, dt);
    int n = snprintf(line, sizeof line,
                     "mvembed: %ld%s done%s, %ld failed, %ld skipped | decode %.1f/s | tower %.0f patches/s "
                     "| written %.1f files/s | elapsed %s",
                     done, tot, eta, (long)atomic_load(&R->n_err), skip, atomic_load(&R->n_decoded) / dt,
                     atomic_load(&R->patches) / dt, done / dt, el);
    if (R->progress == PROG_TTY) {
        struct winsize ws;
        if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && n >= ws.ws_col && ws.ws_col < sizeof line)
            line[ws.ws_col - 1] = 0; /* one column short: no wrap, so \r returns to this line */
        fprintf(stderr, "\r\033[K%s%s", line, final ? "\n" : "");
        R->drawn = !final;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    R->last_progress = now;
}

static void progress(runner *R, int final)
{
    if (!R->progress)
        return;
    pthread_mutex_lock(&R->prog_mu);
    progress_draw(R, final);
    pthread_mutex_unlock(&R->prog_mu);
}

void pl_say(runner *R, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&R->prog_mu);
    if (R->drawn) {
        fputs("\r\033[K", stderr);
        R->drawn = 0;
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    pthread_mutex_unlock(&R->prog_mu);
}

static void *ticker_main(void *arg)
{
    runner *R = arg;
    double every = R->progress == PROG_TTY ? 0.5 : R->every;
    pthread_mutex_lock(&R->prog_mu);
    while (!R->ticker_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double next = ts.tv_sec + ts.tv_nsec * 1e-9 + (every < 0.05 ? 0.05 : every);
        ts.tv_sec = (time_t)next;
        ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
        if (pthread_cond_timedwait(&R->ticker_cv, &R->prog_mu, &ts) == ETIMEDOUT && !R->ticker_stop)
            progress_draw(R, 0);
    }
    pthread_mutex_unlock(&R->prog_mu);
    return NULL;
}

void pl_progress_start(runner *R)
{
    R->t0 = mv_now();
    if (R->progress)
        R->ticking = !mv_thread_create(&R->ticker, ticker_main, R);
}

void pl_progress_end(runner *R)
{
    if (R->ticking) {
        pthread_mutex_lock(&R->prog_mu);
        R->ticker_stop = 1;
        pthread_cond_signal(&R->ticker_cv);
        pthread_mutex_unlock(&R->prog_mu);
        pthread_join(R->ticker, NULL);
        R->ticking = 0;
    }
    progress(R, 1);
}

mv_status pl_append_record(runner *R, const mv_record *r, mv_err *e)
{
    double t = mv_now();
    pthread_mutex_lock(&R->man_mu);
    mv_status st = mv_manifest_append(R->man, r, e);
    pthread_mutex_unlock(&R->man_mu);
    pl_t_add(R, T_MANIFEST, t);
    return st;
}

void pl_timeline(runner *R, double wall, int jobs, int n_tower, int writers, const pl_device_time *dev,
                 int n_dev)
{
    long ok = atomic_load(&R->n_ok);
    double fwd = atomic_load(&R->t_ns[T_FORWARD]) * 1e-9;
    long nf = atomic_load(&R->n_forwards);
    long long tok = atomic_load(&R->patches);
    if (ok && fwd > 0)
        fprintf(stderr,
                "mvembed: end to end %.2f files/s, %.0f patches/s; tower busy %.1fs (%.0f%% of the "
                "run, time inside forward()): %.2f files/s, %.0f patches/s while busy; %ld forwards, "
                "%.0f patches each\n",
                ok / wall, tok / wall, fwd, 100 * fwd / wall / (n_tower ? n_tower : 1), ok / fwd,
                tok / fwd, nf, (double)tok / (nf ? nf : 1));
    if (ok && fwd > 0) {
        fprintf(stderr, "mvembed: device busy (a forward running on it, host-timed):");
        for (int d = 0; d < n_dev; d++)
            fprintf(stderr, "%s %.1fs = %.0f%% of the run", d ? "," : "", dev[d].busy, 100 * dev[d].busy / wall);
        fputc('\n', stderr);
        if (dev[0].timed) {
            fprintf(stderr, "mvembed: GPU executing the tower's kernels (CUDA events, union over forwards in "
                            "flight):");
            for (int d = 0; d < n_dev; d++)
                fprintf(stderr, "%s %.1fs = %.0f%% of the run (idle %.2fs before the first forward, %.2fs after the "
                        "last)", d ? "," : "", dev[d].gpu, 100 * dev[d].gpu / wall, dev[d].first - R->t0,
                        R->t0 + wall - dev[d].last);
            fputc('\n', stderr);
        }
    }
    const int threads[T_N] = {jobs, jobs, jobs, n_tower, n_tower, n_tower, n_tower, n_tower,
                              writers, writers, writers};
    fprintf(stderr, "mvembed: timeline (seconds summed over threads; %% of the stage's thread-time):");
    for (int k = 0; k < T_N; k++) {
        double s = atomic_load(&R->t_ns[k]) * 1e-9;
        fprintf(stderr, "%s %s %.2fs (%.0f%%", k ? "," : "", t_names[k], s,
                100 * s / (wall * (threads[k] ? threads[k] : 1)));
        if (k == T_WRITE_WAIT) /* writer threads' CPU time, all stages: vs their wall time */
            fprintf(stderr, "; writers on CPU %.2fs", atomic_load(&R->writer_cpu_ns) * 1e-9);
        if (k == T_STAGE_IN) /* wall time the thread did not run: preempted or page-faulting */
            fprintf(stderr, "; on CPU %.2fs, buffers %.2fs, copy %.2fs", atomic_load(&R->stage_in_cpu_ns) * 1e-9,
                    atomic_load(&R->stage_alloc_ns) * 1e-9, atomic_load(&R->stage_copy_ns) * 1e-9);
        fputc(')', stderr);
    }
    fputc('\n', stderr);
}
