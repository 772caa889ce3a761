/* pipeline.c - the batch's threads and queues (see mv_pipeline.h for the picture): starting and
 * draining the stages, the decode pool, one tower thread per backend packing ready inputs into
 * forwards (output slabs, per-device busy time), progress lines and -v's per-stage timeline. The
 * walker is in feed.c, the writer threads in writers.c (pipeline_int.h holds what they share).
 *
 * A bad input gets an error line and the batch goes on; fatal problems (device failure, a full or
 * read-only disk, the manifest) stop it. Memory stays bounded: paths are streamed and every queue
 * has a fixed capacity. After an interrupt no queued input is started: inputs not yet decoded or
 * not yet in a forward are dropped (no manifest line: the next run does them), forwards in flight
 * finish and are written. Test hook: MVEMBED_TEST_FILL_WINDOW=1 (see tower_main) makes packing
 * independent of timing.
 */
#include "pipeline_int.h"

#include "mv_batch.h"
#include "mv_busy.h"
#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_pool.h"
#include "mv_queue.h"
#include "mv_tar.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const t_names[T_N] = {
    "decode", "preprocess", "decode wait", "stage-in", "output-slab wait", "forward", "stage-out", "tower wait",
    "write (convert+compress+fsync)", "manifest", "writer wait"};

/* Output slabs: a forward writes its outputs into a slab (page-locked when the backend offers it);
 * each input of the forward points into it and holds a reference until its writer is done, then
 * the slab goes back to its tower thread. No per-input output allocation or copy on the tower
 * thread. A slab comes back only when every input in it is written, so a tower thread needs enough
 * of them to keep the writers fed: it has at least OUT_SLABS_MIN, and takes more (up to
 * OUT_SLABS_MAX) while its slabs hold at most OUT_SLAB_BYTES together (measured: 3 slabs of ~3.6
 * clips each left 28 writers idle half the time while the tower waited for slabs). Memory stays
 * bounded, and slow writers hold the tower back (backpressure) instead of piling up outputs. */
#define OUT_SLABS_MIN 3
#define OUT_SLABS_MAX 16
#define OUT_SLAB_BYTES ((size_t)1 << 30)
typedef struct slab_pool slab_pool;
typedef struct {
    float *buf;
    size_t cap; /* bytes */
    int pinned;
    int refs;   /* inputs still holding it (under the pool's mutex) */
    slab_pool *pool;
} slab;
struct slab_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    slab s[OUT_SLABS_MAX];
};

/* Per device, for -v: how long at least one forward was running on it (the union over its tower
 * threads' forward() calls, host-timed: forwards are synchronous), and when the device executed
 * the forwards' kernels (the backends' gpu_t0/gpu_t1 intervals, from CUDA events; their union is
 * "GPU executing"). */
typedef struct {
    pthread_mutex_t mu;
    int active;
    double since, busy;
    mv_busy gpu; /* the forwards' kernel intervals (mv_busy.h) */
    /* Turns: the device's tower threads queue their forwards' device work one at a time, in the
     * order they became ready (a ticket lock, given back as soon as a forward's work is queued:
     * mv_backend.queued). Two forwards started together share the GPU, end together, and then
     * both threads stage in their next batch while the GPU idles; taking turns, one thread stages
     * in while the other's forward runs, and the next forward's work is queued behind the last
     * one's. MVEMBED_FORWARD_TURNS=0 lets them overlap freely. */
    int turns;
    pthread_cond_t turn_cv;
    unsigned long ticket, serving;
} dev_busy;

/* A forward's turn on its device: given back once, as soon as the forward's device work is
 * queued (mv_backend.queued), or when the call returns. */
typedef struct {
    dev_busy *d;
    int given;
} turn;

static void turn_take(dev_busy *d)
{
    if (!d->turns)
        return;
    pthread_mutex_lock(&d->mu);
    unsigned long me = d->ticket++;
    while (d->serving != me)
        pthread_cond_wait(&d->turn_cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static void turn_give(void *arg)
{
    turn *tn = arg;
    dev_busy *d = tn->d;
    if (!d->turns || tn->given)
        return;
    tn->given = 1;
    pthread_mutex_lock(&d->mu);
    d->serving++;
    pthread_cond_broadcast(&d->turn_cv);
    pthread_mutex_unlock(&d->mu);
}

double pl_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    runner *R;
    mv_backend *be;
    dev_busy *dev; /* the device this backend runs on */
    /* staging of one forward's uint8 frames (mv_backend.forward_u8), kept between forwards
     * (page-locked when the backend offers it) */
    void *pix;
    size_t pix_cap; /* bytes */
    int pix_pinned;
    slab_pool out;
} tower_arg;

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

/* mv_queue_pop, with the time spent waiting added to stage k */
void *pl_pop_timed(runner *R, mv_queue *q, int k)
{
    double t = mv_now();
    void *p = mv_queue_pop(q);
    pl_t_add(R, k, t);
    return p;
}

/* Progress. Modes: 0 off; PROG_TTY one line redrawn in place on a terminal, cut to its width,
 * with per-file lines (say) printed above it; PROG_LINES one plain line every o->progress_every
 * seconds, for logs (default 30 s when stderr is not a terminal and -v is given or SLURM_JOB_ID is
 * set). A ticker thread draws it, so a long input still shows life. */

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
                     "mvembed: %ld%s done%s, %ld failed, %ld skipped | decode %.1f/s | tower %.0f tok/s "
                     "| written %.1f files/s | elapsed %s",
                     done, tot, eta, (long)atomic_load(&R->n_err), skip, atomic_load(&R->n_decoded) / dt,
                     atomic_load(&R->tokens) / dt, done / dt, el);
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

/* Prints one line to stderr, above the progress line when one is drawn. */
void pl_say(runner *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

mv_status pl_append_record(runner *R, const mv_record *r, mv_err *e)
{
    double t = mv_now();
    pthread_mutex_lock(&R->man_mu);
    mv_status st = mv_manifest_append(R->man, r, e);
    pthread_mutex_unlock(&R->man_mu);
    pl_t_add(R, T_MANIFEST, t);
    return st;
}

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
        }
        if (mv_queue_push(&R->ready, it))
            mv_item_free(it);
    }
    return NULL;
}

/* ---- tower -------------------------------------------------------------------------------- */

static void stage_free(mv_backend *be, void *buf, int pinned)
{
    if (pinned)
        be->host_free(be, buf);
    else
        free(buf);
}

/* Grows one of a tower thread's staging buffers to at least `bytes`, page-locked when the backend
 * can (CUDA), else with malloc. Returns 0, or -1 when out of memory. */
static int stage_reserve(mv_backend *be, void **buf, size_t *cap, int *pinned, size_t bytes)
{
    if (*cap >= bytes)
        return 0;
    stage_free(be, *buf, *pinned);
    *buf = NULL;
    *cap = 0;
    *pinned = 0;
    bytes += bytes / 4; /* room to grow without a new allocation each time */
    if (be->host_alloc && (*buf = be->host_alloc(be, bytes)))
        *pinned = 1;
    else
        *buf = malloc(bytes);
    if (!*buf)
        return -1;
    *cap = bytes;
    return 0;
}

static void slab_release(void *owner)
{
    slab *sb = owner;
    pthread_mutex_lock(&sb->pool->mu);
    if (--sb->refs == 0)
        pthread_cond_broadcast(&sb->pool->freed);
    pthread_mutex_unlock(&sb->pool->mu);
}

/* A free slab of at least `bytes` (waits for the writers to release one), or NULL when out of
 * memory. The caller owns it (refs = 1) until it hands references to the inputs. *waited: the
 * seconds spent waiting for a free slab (the timeline's "output-slab wait"). */
static slab *slab_get(tower_arg *ta, size_t bytes, double *waited)
{
    slab_pool *p = &ta->out;
    slab *sb = NULL;
    double t0 = mv_now();
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* a free slab already big enough, else any free one that was used, else a new one while
         * the pool is under its minimum count or its byte budget */
        size_t held = 0;
        int n_used = 0;
        slab *fit = NULL, *used = NULL, *fresh = NULL;
        for (int i = 0; i < OUT_SLABS_MAX; i++) {
            slab *x = &p->s[i];
            held += x->cap;
            n_used += x->cap > 0;
            if (x->refs)
                continue;
            if (x->cap >= bytes && !fit)
                fit = x;
            else if (x->cap && !used)
                used = x;
            else if (!x->cap && !fresh)
                fresh = x;
        }
        if (fresh && (n_used < OUT_SLABS_MIN || held + bytes <= OUT_SLAB_BYTES) && !fit)
            sb = fresh;
        else
            sb = fit ? fit : used;
        if (sb)
            break;
        pthread_cond_wait(&p->freed, &p->mu);
    }
    sb->refs = 1;
    pthread_mutex_unlock(&p->mu);
    *waited = mv_now() - t0;
    void *buf = sb->buf;
    int fail = stage_reserve(ta->be, &buf, &sb->cap, &sb->pinned, bytes);
    sb->buf = buf;
    if (fail) {
        slab_release(sb);
        return NULL;
    }
    return sb;
}

static void stage_release(tower_arg *ta)
{
    stage_free(ta->be, ta->pix, ta->pix_pinned);
    ta->pix = NULL;
    ta->pix_cap = 0;
    slab_pool *p = &ta->out;
    pthread_mutex_lock(&p->mu); /* every input written or freed: wait for the last references */
    for (int i = 0; i < OUT_SLABS_MAX; i++)
        while (p->s[i].refs)
            pthread_cond_wait(&p->freed, &p->mu);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < OUT_SLABS_MAX; i++)
        stage_free(ta->be, p->s[i].buf, p->s[i].pinned);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->freed);
}

/* Runs one forward over items[0..n) (all prepared without error): their resized uint8 frames,
 * packed back to back into the staging buffer, go to forward_u8, which patchifies them. */
static void tower_batch(tower_arg *ta, mv_item **items, int n)
{
    runner *R = ta->R;
    mv_backend *be = ta->be;
    const mv_vision_config *c = &R->m->cfg;
    int mm = c->merge * c->merge;
    int64_t N = 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        N += mv_item_patches(items[i]);
        bytes += (size_t)items[i]->p.n_frames * items[i]->p.rw * items[i]->p.rh * 3;
    }
    /* --pool mean where the backend pools on the device: one row per input comes back */
    int dev_pool = R->o->pool == MV_POOL_MEAN && be->forward_mean && !R->o->dump_dir;
    double t = mv_now(), tc = pl_thread_cpu();
    /* one input on a backend without page-locked memory: its frames are used where they are */
    int gather = n > 1 || be->host_alloc;
    int32_t *grid = malloc(3 * n * sizeof *grid), *nfr = malloc(n * sizeof *nfr);
    mv_err e;
    uint8_t *frames = NULL;
    float *out = NULL;
    slab *sb = NULL;
    double slab_wait = 0;
    if (grid && nfr && (!gather || !stage_reserve(be, &ta->pix, &ta->pix_cap, &ta->pix_pinned, bytes)) &&
        (sb = slab_get(ta, (size_t)(dev_pool ? n : N / mm) * c->out_hidden * sizeof(float), &slab_wait))) {
        frames = gather ? ta->pix : items[0]->p.frames;
        out = sb->buf;
    }
    double t_copy = mv_now();
    atomic_fetch_add(&R->stage_alloc_ns, (long long)((t_copy - t - slab_wait) * 1e9));
    if (!frames || !out) {
        mv_fail(&e, MV_ERR_NOMEM, "out of memory for a batch of %lld patches", (long long)N);
        pl_set_fatal(R, &e);
        goto out;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const mv_prepared *p = &items[i]->p;
        memcpy(grid + 3 * i, p->grid, sizeof p->grid);
        nfr[i] = p->n_frames;
        size_t fb = (size_t)p->n_frames * p->rw * p->rh * 3;
        if (gather)
            memcpy(frames + off, p->frames, fb);
        off += fb;
    }
    mv_dump_ctx dc;
    if (R->o->dump_dir) /* stages are dumped one input per forward */
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", R->o->dump_dir, items[0]->rel);
    /* stage-in without the wait for a free output slab (writers' backpressure), counted apart */
    pl_t_add(R, T_STAGE_IN, t + slab_wait);
    atomic_fetch_add(&R->stage_copy_ns, (long long)((mv_now() - t_copy) * 1e9));
    atomic_fetch_add(&R->t_ns[T_SLAB_WAIT], (long long)(slab_wait * 1e9));
    atomic_fetch_add(&R->stage_in_cpu_ns, (long long)((pl_thread_cpu() - tc) * 1e9));
    turn tn = {ta->dev, 0};
    turn_take(ta->dev);
    be->queued = turn_give;
    be->queued_arg = &tn;
    t = mv_now();
    pthread_mutex_lock(&ta->dev->mu);
    if (ta->dev->active++ == 0)
        ta->dev->since = mv_now();
    pthread_mutex_unlock(&ta->dev->mu);
    be->gpu_t0 = be->gpu_t1 = 0;
    mv_status st = dev_pool ? be->forward_mean(be, frames, nfr, grid, n, out, &e)
                            : be->forward_u8(be, frames, nfr, grid, n, out, R->o->dump_dir ? mv_dump_stage : NULL,
                                             &dc, &e);
    pthread_mutex_lock(&ta->dev->mu);
    if (--ta->dev->active == 0)
        ta->dev->busy += mv_now() - ta->dev->since;
    if (!st && be->gpu_t1 > be->gpu_t0)
        mv_busy_add(&ta->dev->gpu, be->gpu_t0, be->gpu_t1); /* -v only: no memory, not counted */
    pthread_mutex_unlock(&ta->dev->mu);
    turn_give(&tn);
    be->queued = NULL;
    pl_t_add(R, T_FORWARD, t);
    if (st) {
        if (st == MV_ERR_DEVICE || R->o->dump_dir) {
            pl_set_fatal(R, &e);
        } else {
            for (int i = 0; i < n; i++) {
                char msg[1200];
                snprintf(msg, sizeof msg, "%s: %s", items[i]->path, e.msg);
                mv_item_fail(items[i], msg);
            }
        }
        goto out;
    }
    t = mv_now();
    int64_t orow = 0;
    pthread_mutex_lock(&ta->out.mu);
    sb->refs += n;
    pthread_mutex_unlock(&ta->out.mu);
    for (int i = 0; i < n; i++) {
        int64_t rows = dev_pool ? 1 : mv_item_patches(items[i]) / mm;
        items[i]->out = out + orow * c->out_hidden;
        items[i]->out_release = slab_release;
        items[i]->out_owner = sb;
        items[i]->rows = rows;
        orow += rows;
        free(items[i]->p.frames);
        items[i]->p.frames = NULL;
        atomic_fetch_add(&R->tokens, mv_item_patches(items[i]));
    }
    pl_t_add(R, T_STAGE_OUT, t);
out:
    if (sb)
        slab_release(sb); /* the forward's own reference */
    free(grid);
    free(nfr);
}

/* Writer threads at most (zstd + fsync of outputs of tens of MB: the slow CPU stage). */
#define MAX_WRITERS 64

/* Items a tower thread gathers at most before packing them into forwards. */
#define TOWER_WINDOW 512

static void *tower_main(void *arg)
{
    tower_arg *ta = arg;
    runner *R = ta->R;
    mv_backend *be = ta->be;
    /* CPU: one input per forward unless --batch-tokens asks otherwise (results then do not depend
     * on what else was ready); CUDA: up to the backend's batch size. The thread waits for one
     * input, takes whatever else is ready (up to two forwards' worth), and packs that window with
     * first fit decreasing, so mixed sizes still fill each forward. */
    int64_t limit = R->o->dump_dir ? 0 : be->max_batch_tokens;
    /* Test hook: MVEMBED_TEST_FILL_WINDOW=1 makes the thread wait until the window is full (two
     * forwards' worth, or TOWER_WINDOW inputs) or the ready queue is closed, instead of taking
     * only what is ready now, so that tests of packing do not depend on timing. */
    const char *fill_env = getenv("MVEMBED_TEST_FILL_WINDOW");
    int fill = fill_env && !strcmp(fill_env, "1");
    mv_item *win[TOWER_WINDOW], *fwd[TOWER_WINDOW];
    int64_t tok[TOWER_WINDOW], bt[TOWER_WINDOW];
    int bin[TOWER_WINDOW];
    for (;;) {
        int n = 0;
        int64_t wtok = 0;
        mv_item *it = pl_pop_timed(R, &R->ready, T_TOWER_WAIT);
        if (!it)
            break; /* closed and drained */
        while (it) {
            if (!it->error && pl_interrupted(R)) { /* not started: the next run does it */
                mv_item_free(it);
            } else if (it->error || atomic_load(&R->fatal)) {
                if (mv_queue_push(&R->done, it))
                    mv_item_free(it);
            } else {
                tok[n] = mv_item_patches(it);
                wtok += tok[n];
                win[n++] = it;
            }
            if (limit <= 0 ? n == 1 : n == TOWER_WINDOW || wtok >= 2 * limit)
                break;
            it = fill ? mv_queue_pop(&R->ready) : mv_queue_try_pop(&R->ready);
        }
        if (n == 0)
            continue;
        int nb = mv_pack_ffd(tok, n, limit, bin, bt);
        if (nb < 0) /* no memory for the packing: one input per forward */
            nb = mv_pack_ffd(tok, n, 0, bin, bt);
        for (int b = 0; b < nb; b++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (bin[i] == b)
                    fwd[k++] = win[i];
            /* after an interrupt only the forward already started (b == 0 was) completes */
            int run = !atomic_load(&R->fatal) && !(pl_interrupted(R) && b > 0);
            if (run) {
                tower_batch(ta, fwd, k);
                atomic_fetch_add(&R->n_forwards, 1);
            }
            for (int i = 0; i < k; i++)
                if (!run || mv_queue_push(&R->done, fwd[i]))
                    mv_item_free(fwd[i]);
        }
    }
    stage_release(ta);
    return NULL;
}

/* -v: where the time went, per stage (busy and waiting, summed over each stage's threads). */
static void print_timeline(runner *R, double wall, int jobs, int n_tower, int writers,
                           dev_busy *dev, int n_dev)
{
    long ok = atomic_load(&R->n_ok);
    double fwd = atomic_load(&R->t_ns[T_FORWARD]) * 1e-9;
    long nf = atomic_load(&R->n_forwards);
    long long tok = atomic_load(&R->tokens);
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
        if (dev[0].gpu.n) {
            fprintf(stderr, "mvembed: GPU executing the tower's kernels (CUDA events, union over forwards in "
                            "flight):");
            for (int d = 0; d < n_dev; d++) {
                double u = mv_busy_seconds(&dev[d].gpu);
                fprintf(stderr, "%s %.1fs = %.0f%% of the run", d ? "," : "", u, 100 * u / wall);
            }
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

mv_status mv_pipeline_run(const mv_run_opts *o, mv_model *m, mv_backend **be, int n_be, int n_dev,
                          int shard_k, int shard_n, mv_run_result *res, mv_err *e)
{
    memset(res, 0, sizeof *res);
    mv_status st;
    dev_busy dbz[MV_PIPELINE_MAX_TOWERS] = {{.active = 0}};
    if (n_be < 1 || n_be > MV_PIPELINE_MAX_TOWERS || n_dev < 1 || n_dev > n_be)
        return mv_fail(e, MV_ERR_USAGE, "pipeline: %d backends on %d devices: 1..%d backends, each device one or more",
                       n_be, n_dev, MV_PIPELINE_MAX_TOWERS);
    if ((st = mv_mkdirs(o->out_dir, e)))
        return st;
    if (access(o->out_dir, W_OK) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: output directory is not writable: %s", o->out_dir, strerror(errno));
    runner *R = calloc(1, sizeof *R);
    if (!R)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&R->man_mu, NULL);
    pthread_mutex_init(&R->err_mu, NULL);
    pthread_mutex_init(&R->prog_mu, NULL);
    mv_output_swept_init(&R->swept);
    pthread_cond_init(&R->ticker_cv, NULL);
    R->o = o;
    R->m = m;
    R->ictx = (mv_item_ctx){.m = m, .max_decode_pixels = o->max_decode_pixels, .timeout = o->timeout,
                            .num_frames = o->num_frames, .dump_dir = o->dump_dir};
    R->shard_k = shard_k;
    R->shard_n = shard_n;
    char mpath[4200];
    mv_name_manifest(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    mv_done *done = NULL;
    if ((st = pl_load_done(o, shard_k, shard_n, &done, e)))
        goto out;
    if ((st = mv_manifest_open(mpath, &R->man, e))) {
        mv_done_free(done);
        goto out;
    }
    if (o->layout == MV_LAYOUT_TAR &&
        (st = mv_tar_set_open(o->out_dir, shard_k, shard_n, o->shard_size, pl_tar_commit, R, &R->tars, e))) {
        mv_manifest_close(R->man, NULL);
        mv_done_free(done);
        goto out;
    }
    if (o->layout == MV_LAYOUT_FILES && o->pool == MV_POOL_MEAN && !(R->pooled = mv_pool_list_new())) {
        mv_manifest_close(R->man, NULL);
        mv_done_free(done);
        st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
        goto out;
    }
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
    size_t qcap = (size_t)jobs * 2 + 4;
    int qfail = mv_queue_init(&R->jobs, qcap);
    qfail |= mv_queue_init(&R->ready, qcap);
    qfail |= mv_queue_init(&R->done, qcap);
    R->t0 = mv_now();
    R->every = o->progress_every;
    if (R->every == 0 && o->progress < 0 && !isatty(2) && (o->verbose || getenv("SLURM_JOB_ID")))
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
    int counting = 0, ticking = 0;
    pthread_t counter, ticker;
    if (R->progress) {
        ticking = !pthread_create(&ticker, NULL, ticker_main, R);
        int from_stdin = 0;
        for (int i = 0; i < o->n_paths; i++)
            from_stdin |= !strcmp(o->paths[i], "-");
        counting = !from_stdin && !pthread_create(&counter, NULL, pl_count_main, R);
    }
    pthread_t *dec = qfail ? NULL : calloc(jobs, sizeof *dec), tw[MV_PIPELINE_MAX_TOWERS], wr[MAX_WRITERS];
    tower_arg ta[MV_PIPELINE_MAX_TOWERS];
    const char *turns = getenv("MVEMBED_FORWARD_TURNS");
    for (int d = 0; d < n_dev; d++) {
        pthread_mutex_init(&dbz[d].mu, NULL);
        pthread_cond_init(&dbz[d].turn_cv, NULL);
        dbz[d].turns = !(turns && !strcmp(turns, "0"));
    }
    int nd = 0, nt = 0, nw = 0;
    for (; dec && nd < jobs; nd++)
        if (pthread_create(&dec[nd], NULL, decode_main, R))
            break;
    for (; dec && nt < n_be; nt++) {
        ta[nt] = (tower_arg){.R = R, .be = be[nt], .dev = &dbz[nt % n_dev]};
        pthread_mutex_init(&ta[nt].out.mu, NULL);
        pthread_cond_init(&ta[nt].out.freed, NULL);
        for (int i = 0; i < OUT_SLABS_MAX; i++)
            ta[nt].out.s[i].pool = &ta[nt].out;
        if (pthread_create(&tw[nt], NULL, tower_main, &ta[nt]))
            break;
    }
    for (; dec && nw < writers; nw++)
        if (pthread_create(&wr[nw], NULL, pl_writer_main, R))
            break;
    mv_err fe;
    st = (nd && nt && nw) ? pl_feed(R, done, &fe)
                          : dec ? mv_fail(&fe, MV_ERR_INTERNAL, "cannot start threads")
                                : mv_fail(&fe, MV_ERR_NOMEM, "out of memory for the pipeline's queues");
    if (st)
        pl_set_fatal(R, &fe);
    /* drain: each stage closes the next queue once its own threads are finished */
    mv_queue_close(&R->jobs);
    for (int i = 0; i < nd; i++)
        pthread_join(dec[i], NULL);
    mv_queue_close(&R->ready);
    for (int i = 0; i < nt; i++)
        pthread_join(tw[i], NULL);
    mv_queue_close(&R->done);
    for (int i = 0; i < nw; i++)
        pthread_join(wr[i], NULL);
    if (counting)
        pthread_join(counter, NULL);
    for (int d = 0; d < n_dev; d++) {
        pthread_mutex_destroy(&dbz[d].mu);
        pthread_cond_destroy(&dbz[d].turn_cv);
    }
    if (ticking) {
        pthread_mutex_lock(&R->prog_mu);
        R->ticker_stop = 1;
        pthread_cond_signal(&R->ticker_cv);
        pthread_mutex_unlock(&R->prog_mu);
        pthread_join(ticker, NULL);
    }
    free(dec);
    mv_queue_destroy(&R->jobs);
    mv_queue_destroy(&R->ready);
    mv_queue_destroy(&R->done);
    mv_done_free(done);
    progress(R, 1);
    mv_status cst = mv_manifest_close(R->man, e);
    res->ok = atomic_load(&R->n_ok);
    res->failed = atomic_load(&R->n_err);
    res->skipped = atomic_load(&R->n_skip);
    res->signal = o->interrupt ? *o->interrupt : 0;
    if (atomic_load(&R->fatal)) {
        *e = R->err;
        st = MV_ERR_IO;
        goto out;
    }
    if ((st = cst))
        goto out;
    /* --pool mean, files layout: OUT/pooled.npy once every input of the run's share is ok */
    if (R->pooled && !res->signal && !res->failed) {
        char stem[64];
        if (shard_n > 1)
            snprintf(stem, sizeof stem, "pooled-%05d-of-%05d", shard_k, shard_n);
        else
            snprintf(stem, sizeof stem, "pooled");
        if ((st = mv_pool_stack(R->pooled, o->out_dir, stem, m->cfg.out_hidden, e)))
            goto out;
        if (o->verbose)
            fprintf(stderr, "mvembed: %s/%s.npy and %s.jsonl: %ld pooled inputs\n", o->out_dir, stem,
                    stem, res->ok + res->skipped);
    }
    double wall = mv_now() - R->t0;
    if (res->signal) {
        fprintf(stderr, "mvembed: interrupted; %ld done and kept (run again to resume)\n", res->ok);
    } else {
        if (!o->quiet)
            fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs\n", res->ok, res->failed,
                    res->skipped, wall);
        if (o->verbose)
            print_timeline(R, wall, jobs, nt, nw, dbz, n_dev);
    }
out:
    for (int d = 0; d < n_dev; d++)
        mv_busy_free(&dbz[d].gpu);
    mv_tar_set_free(R->tars);
    mv_pool_list_free(R->pooled);
    pthread_mutex_destroy(&R->man_mu);
    pthread_mutex_destroy(&R->err_mu);
    pthread_mutex_destroy(&R->prog_mu);
    mv_output_swept_destroy(&R->swept);
    pthread_cond_destroy(&R->ticker_cv);
    free(R);
    return st;
}
