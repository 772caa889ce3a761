/* towers.c - the pipeline's tower stage: one thread per backend takes ready inputs, packs them
 * into forwards (first fit decreasing over a window of what is ready, up to the backend's batch
 * size), stages their uint8 frames in, runs the forward in its device's turn and hands each input
 * its rows of an output slab for the writers. Per device it keeps -v's busy time and the union of
 * the forwards' kernel intervals. Memory stays bounded: a thread's slabs (slabs.c) are few and
 * come back only when their inputs are written (backpressure from slow writers). Not here:
 * decoding, writing, the tower itself (src/tower, cu/).
 */
#include "pipeline_int.h"

#include "mv_batch.h"
#include "mv_busy.h"
#include "slabs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per device, for -v: how long at least one forward was running on it (the union over its tower
 * threads' forward() calls, host-timed: forwards are synchronous), and when the device executed
 * the forwards' kernels (mv_forward_info's gpu_t0/gpu_t1 intervals, from CUDA events; their
 * union is "GPU executing"). */
typedef struct {
    pthread_mutex_t mu;
    int active;
    double since, busy;
    mv_busy gpu; /* the forwards' kernel intervals (mv_busy.h) */
    /* Turns: the device's tower threads queue their forwards' device work one at a time, in the
     * order they became ready (a ticket lock, given back as soon as a forward's work is queued:
     * mv_forward_req.queued). Two forwards started together share the GPU, end together, and then
     * both threads stage in their next batch while the GPU idles; taking turns, one thread stages
     * in while the other's forward runs, and the next forward's work is queued behind the last
     * one's. o->forward_overlap (MVEMBED_FORWARD_TURNS=0) lets them overlap freely. */
    int turns;
    pthread_cond_t turn_cv;
    unsigned long ticket, serving;
} dev_busy;

/* A forward's turn on its device: given back once, as soon as the forward's device work is
 * queued (mv_forward_req.queued), or when the call returns. */
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

typedef struct {
    runner *R;
    mv_backend *be;
    dev_busy *dev; /* the device this backend runs on */
    /* staging of one forward's uint8 frames, kept between forwards (page-locked when the
     * backend offers it) */
    void *pix;
    size_t pix_cap;   /* bytes */
    size_t pix_least; /* the bytes it takes at least when allocated (pl_stage_reserve) */
    int pix_pinned;
    pl_slab_pool out;
} tower_arg;

struct pl_towers {
    int n_be, n_dev;
    dev_busy dev[MV_PIPELINE_MAX_TOWERS];
    tower_arg ta[MV_PIPELINE_MAX_TOWERS];
};

/* At the thread's end: its staging buffer freed, its slabs once every input in them is written. */
static void stage_release(tower_arg *ta)
{
    pl_stage_free(ta->be, ta->pix, ta->pix_pinned);
    ta->pix = NULL;
    ta->pix_cap = 0;
    pl_slabs_drain(&ta->out);
}

/* One forward of a tower thread: its inputs, their frames packed back to back, grids and frame
 * counts (the backend's request), and the output slab it writes. */
typedef struct {
    mv_item **items;
    int n;
    int64_t N;       /* patches */
    size_t bytes;    /* the frames' bytes */
    int mean;        /* --pool mean where the backend pools on the device: one row per input */
    int32_t *grid, *nfr;
    int32_t *src_size; /* [n][2] when an input's frames are decoded ones (mv_prepared.sw), else NULL */
    const uint8_t *frames;
    pl_slab *sb;
} batch;

/* Stage-in: grid, frame counts and frames of bt's inputs, gathered into the thread's staging
 * buffer (but one input on a backend without page-locked memory: its frames are used where they
 * are), and a free output slab. Returns 0, or -1 when out of memory (a fatal error). */
static int stage_in(tower_arg *ta, batch *bt)
{
    runner *R = ta->R;
    mv_backend *be = ta->be;
    const mv_vision_config *c = &R->m->cfg;
    int n = bt->n, mm = c->merge * c->merge;
    double t = mv_now(), tc = pl_thread_cpu();
    int gather = n > 1 || be->host_alloc;
    bt->grid = malloc(3 * n * sizeof *bt->grid);
    bt->nfr = malloc(n * sizeof *bt->nfr);
    double slab_wait = 0;
    size_t out_bytes = (size_t)(bt->mean ? n : bt->N / mm) * c->out_hidden * sizeof(float);
    if (bt->grid && bt->nfr && (!gather || !pl_stage_reserve(be, &ta->pix, &ta->pix_cap, &ta->pix_pinned, bt->bytes, ta->pix_least)) &&
        (bt->sb = pl_slab_get(&ta->out, out_bytes, &slab_wait)))
        bt->frames = gather ? ta->pix : bt->items[0]->p.frames;
    double t_copy = mv_now();
    atomic_fetch_add(&R->stage_alloc_ns, (long long)((t_copy - t - slab_wait) * 1e9));
    if (!bt->frames) {
        mv_err e;
        mv_fail(&e, MV_ERR_NOMEM, "out of memory for a batch of %lld patches", (long long)bt->N);
        pl_set_fatal(R, &e);
        return -1;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const mv_prepared *p = &bt->items[i]->p;
        memcpy(bt->grid + 3 * i, p->grid, sizeof p->grid);
        bt->nfr[i] = p->n_frames;
        size_t fb = mv_item_frame_bytes(bt->items[i]);
        if (gather)
            memcpy((uint8_t *)ta->pix + off, p->frames, fb);
        off += fb;
    }
    /* stage-in without the wait for a free output slab (writers' backpressure), counted apart */
    pl_t_add(R, T_STAGE_IN, t + slab_wait);
    atomic_fetch_add(&R->stage_copy_ns, (long long)((mv_now() - t_copy) * 1e9));
    atomic_fetch_add(&R->t_ns[T_SLAB_WAIT], (long long)(slab_wait * 1e9));
    atomic_fetch_add(&R->stage_in_cpu_ns, (long long)((pl_thread_cpu() - tc) * 1e9));
    return 0;
}

/* The forward of bt on the backend, in its device's turn, counted in the device's busy time and
 * (info's interval) its kernels' time. */
static mv_status run_forward(tower_arg *ta, const batch *bt, mv_err *e)
{
    runner *R = ta->R;
    mv_backend *be = ta->be;
    dev_busy *d = ta->dev;
    mv_dump_ctx dc;
    if (R->o->dump_dir) /* stages are dumped one input per forward */
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", R->o->dump_dir, bt->items[0]->rel);
    turn tn = {d, 0};
    mv_forward_req req = {.frames = bt->frames, .n_frames = bt->nfr, .src_size = bt->src_size, .grid = bt->grid,
                          .n_entries = bt->n,
                          .out = bt->sb->buf, .mean = bt->mean, .dump = R->o->dump_dir ? mv_dump_stage : NULL,
                          .dump_ud = &dc, .queued = turn_give, .queued_arg = &tn};
    mv_forward_info info;
    turn_take(d);
    double t = mv_now();
    pthread_mutex_lock(&d->mu);
    if (d->active++ == 0)
        d->since = mv_now();
    pthread_mutex_unlock(&d->mu);
    mv_status st = be->forward(be, &req, &info, e);
    pthread_mutex_lock(&d->mu);
    if (--d->active == 0)
        d->busy += mv_now() - d->since;
    if (!st && info.gpu_t1 > info.gpu_t0)
        mv_busy_add(&d->gpu, info.gpu_t0, info.gpu_t1); /* -v only: no memory, not counted */
    pthread_mutex_unlock(&d->mu);
    turn_give(&tn);
    pl_t_add(R, T_FORWARD, t);
    return st;
}

/* Stage-out: each input of bt gets its rows of the slab (and a reference to it); its frames
 * are freed. */
static void stage_out(tower_arg *ta, const batch *bt)
{
    runner *R = ta->R;
    const mv_vision_config *c = &R->m->cfg;
    int mm = c->merge * c->merge;
    double t = mv_now();
    int64_t orow = 0;
    pl_slab_hold(bt->sb, bt->n);
    for (int i = 0; i < bt->n; i++) {
        mv_item *it = bt->items[i];
        int64_t rows = bt->mean ? 1 : mv_item_patches(it) / mm;
        it->out = bt->sb->buf + orow * c->out_hidden;
        it->out_release = pl_slab_release;
        it->out_owner = bt->sb;
        it->rows = rows;
        orow += rows;
        free(it->p.frames);
        it->p.frames = NULL;
        atomic_fetch_add(&R->patches, mv_item_patches(it));
    }
    pl_t_add(R, T_STAGE_OUT, t);
}

/* Runs one forward over items[0..n) (all prepared without error): their resized uint8 frames go
 * to the backend, which patchifies them. A device failure is fatal (and any failure with
 * --dump-stages, and running out of address space); else the forward's inputs fail with its
 * message and the batch goes on. */
static void tower_batch(tower_arg *ta, mv_item **items, int n)
{
    runner *R = ta->R;
    batch bt = {.items = items, .n = n};
    int decoded = 0; /* some input's frames are decoded ones, for the backend to resize */
    for (int i = 0; i < n; i++) {
        bt.N += mv_item_patches(items[i]);
        bt.bytes += mv_item_frame_bytes(items[i]);
        decoded |= items[i]->p.sw != 0;
    }
    bt.mean = R->o->pool == MV_POOL_MEAN && ta->be->pools_mean && !R->o->dump_dir;
    mv_err e;
    mv_status st = MV_OK;
    if (decoded && !(bt.src_size = malloc(2 * (size_t)n * sizeof *bt.src_size))) {
        mv_fail(&e, MV_ERR_NOMEM, "out of memory for a batch of %d inputs", n);
        pl_set_fatal(R, &e);
        return;
    }
    for (int i = 0; bt.src_size && i < n; i++) { /* the others' frames are resized: their own size */
        const mv_prepared *p = &items[i]->p;
        bt.src_size[2 * i] = p->sw ? p->sw : p->rw;
        bt.src_size[2 * i + 1] = p->sw ? p->sh : p->rh;
    }
    if (stage_in(ta, &bt) == 0 && (st = run_forward(ta, &bt, &e)) == MV_OK)
        stage_out(ta, &bt);
    /* out of memory with no address space left (for the CPU tower's team of threads: this
     * thread's OpenMP setting) is the run's shortage, not these inputs' */
    if (st == MV_ERR_DEVICE || (st && R->o->dump_dir) || mv_short_of_room(st, 1)) {
        pl_set_fatal(R, &e);
    } else if (st) {
        for (int i = 0; i < n; i++) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s: %s", items[i]->path, e.msg);
            mv_item_fail(items[i], msg);
        }
    }
    if (bt.sb)
        pl_slab_release(bt.sb); /* the forward's own reference */
    free(bt.grid);
    free(bt.nfr);
    free(bt.src_size);
}

/* Items a tower thread gathers at most before packing them into forwards. */
#define TOWER_WINDOW 512

/* The most patches a forward of be packs: its batch size; 0 (one input per forward) for stage
 * dumps, which are dumped one input per forward. */
static int64_t forward_limit(const runner *R, const mv_backend *be)
{
    return R->o->dump_dir ? 0 : be->batch_tokens;
}

/* The next window of inputs to pack, in win[0..n) with their patch counts in tok, after the nc
 * held back from the last window (already in win[0..nc)): waits for one ready input when none is
 * held back (else takes only what is ready now), then whatever else is ready (test hook
 * o->test_fill_window: waits for each) until the window holds two forwards' worth of `limit`
 * patches or TOWER_WINDOW inputs (limit 0: one input). Inputs that failed go on to the writers,
 * those not started after an interrupt are dropped (the next run does them). Returns n (0:
 * nothing to pack this time), or -1 once the ready queue is closed and drained and nothing is
 * held back. */
static int take_window(runner *R, int64_t limit, mv_item **win, int64_t *tok, int nc)
{
    int n = nc;
    int64_t wtok = 0;
    for (int i = 0; i < nc; i++)
        wtok += tok[i];
    mv_item *it = !nc                   ? pl_pop_timed(R, &R->ready, T_TOWER_WAIT)
                  : R->o->test_fill_window ? mv_queue_pop(&R->ready)
                                           : mv_queue_try_pop(&R->ready);
    if (!it && !nc)
        return -1;
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
        it = R->o->test_fill_window ? mv_queue_pop(&R->ready) : mv_queue_try_pop(&R->ready);
    }
    return n;
}

void *pl_tower_main(void *arg)
{
    tower_arg *ta = arg;
    runner *R = ta->R;
    mv_backend *be = ta->be;
    /* CPU: one input per forward unless --batch-tokens asks otherwise (results then do not depend
     * on what else was ready); CUDA: up to the backend's batch size. Each window is packed with
     * first fit decreasing, so mixed sizes still fill each forward; a sliver of a forward beside
     * fuller ones waits for the next window (once: mv_pack_keep). */
    int64_t limit = forward_limit(R, be);
    mv_item *win[TOWER_WINDOW], *fwd[TOWER_WINDOW], *held[TOWER_WINDOW];
    int64_t tok[TOWER_WINDOW], bt[TOWER_WINDOW], held_tok[TOWER_WINDOW];
    int bin[TOWER_WINDOW], n, nc = 0;
    unsigned char was_held[TOWER_WINDOW], fixed[TOWER_WINDOW], keep[TOWER_WINDOW];
    while ((n = take_window(R, limit, win, tok, nc)) >= 0) {
        for (int i = 0; i < n; i++)
            was_held[i] = i < nc;
        nc = 0;
        if (n == 0)
            continue;
        int nb = mv_pack_ffd(tok, n, limit, bin, bt);
        if (nb < 0) /* no memory for the packing: one input per forward */
            nb = mv_pack_ffd(tok, n, 0, bin, bt);
        memset(fixed, 0, (size_t)nb);
        for (int i = 0; i < n; i++)
            fixed[bin[i]] |= was_held[i];
        int stopping = atomic_load(&R->fatal) || pl_interrupted(R);
        mv_pack_keep(bt, fixed, nb, stopping ? 0 : limit, keep); /* limit 0: none held back */
        int started = 0;
        for (int b = 0; b < nb; b++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (bin[i] == b)
                    fwd[k++] = win[i];
            if (keep[b]) { /* into the next window, in front */
                for (int i = 0; i < n; i++)
                    if (bin[i] == b) {
                        held[nc] = win[i];
                        held_tok[nc++] = tok[i];
                    }
                continue;
            }
            /* after an interrupt only the forward already started (the first) completes */
            int run = !atomic_load(&R->fatal) && !(pl_interrupted(R) && started);
            if (run) {
                tower_batch(ta, fwd, k);
                atomic_fetch_add(&R->n_forwards, 1);
            }
            started = 1;
            for (int i = 0; i < k; i++)
                if (!run || mv_queue_push(&R->done, fwd[i]))
                    mv_item_free(fwd[i]);
        }
        if (nc && (atomic_load(&R->fatal) || pl_interrupted(R))) { /* stopped meanwhile: not run, */
            for (int i = 0; i < nc; i++)                            /* as a forward not started */
                mv_item_free(held[i]);
            nc = 0;
        }
        memcpy(win, held, (size_t)nc * sizeof *win);
        memcpy(tok, held_tok, (size_t)nc * sizeof *tok);
    }
    stage_release(ta);
    return NULL;
}

pl_towers *pl_towers_new(runner *R, mv_backend **be, int n_be, int n_dev)
{
    pl_towers *T = calloc(1, sizeof *T);
    if (!T)
        return NULL;
    T->n_be = n_be;
    T->n_dev = n_dev;
    for (int d = 0; d < n_dev; d++) {
        pthread_mutex_init(&T->dev[d].mu, NULL);
        pthread_cond_init(&T->dev[d].turn_cv, NULL);
        T->dev[d].turns = !R->o->forward_overlap;
    }
    const mv_vision_config *c = &R->m->cfg;
    for (int i = 0; i < n_be; i++) {
        tower_arg *ta = &T->ta[i];
        *ta = (tower_arg){.R = R, .be = be[i], .dev = &T->dev[i % n_dev]};
        /* Page-locked buffers are allocated for a full forward at once (pl_stage_reserve): its
         * frames (a video's two frames a patch, or an image's source of up to twice the pixels
         * it is resized to) and its output rows (one per input when pooled on the device). */
        int64_t limit = be[i]->host_alloc ? forward_limit(R, be[i]) : 0;
        int64_t rows = R->o->pool == MV_POOL_MEAN && be[i]->pools_mean ? TOWER_WINDOW : limit / (c->merge * c->merge);
        ta->pix_least = limit > 0 ? (size_t)limit * c->patch_dim : 0;
        pl_slabs_init(&ta->out, be[i], limit > 0 ? (size_t)rows * c->out_hidden * sizeof(float) : 0);
    }
    return T;
}

void pl_towers_ready_room(const pl_towers *T, const runner *R, size_t *items, size_t *patches)
{
    *items = 0;
    *patches = 0;
    for (int i = 0; i < T->n_be; i++) {
        int64_t limit = forward_limit(R, T->ta[i].be);
        *items += 2 * TOWER_WINDOW;
        *patches += limit > 0 ? 2 * (size_t)limit : 0;
    }
}

void *pl_tower_arg(pl_towers *T, int i)
{
    return &T->ta[i];
}

pl_device_time pl_towers_time(pl_towers *T, int d)
{
    dev_busy *db = &T->dev[d];
    pl_device_time t = {.busy = db->busy, .timed = db->gpu.n > 0};
    t.gpu = mv_busy_seconds(&db->gpu);
    t.first = db->gpu.first;
    t.last = db->gpu.last;
    return t;
}

void pl_towers_free(pl_towers *T)
{
    if (!T)
        return;
    for (int d = 0; d < T->n_dev; d++) {
        pthread_mutex_destroy(&T->dev[d].mu);
        pthread_cond_destroy(&T->dev[d].turn_cv);
        mv_busy_free(&T->dev[d].gpu);
    }
    for (int i = 0; i < T->n_be; i++)
        pl_slabs_destroy(&T->ta[i].out);
    free(T);
}
