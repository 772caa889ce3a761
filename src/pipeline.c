/* pipeline.c - the batch's threads and queues (see mv_pipeline.h for the picture): the walker
 * feeding jobs, the decode pool, one tower thread per backend packing ready inputs into forwards,
 * the writers, progress lines and -v's per-stage timeline.
 *
 * A bad input gets an error line and the batch goes on; fatal problems (device failure, a full or
 * read-only disk, the manifest) stop it. Memory stays bounded: paths are streamed and every queue
 * has a fixed capacity. After an interrupt no queued input is started: inputs not yet decoded or
 * not yet in a forward are dropped (no manifest line: the next run does them), forwards in flight
 * finish and are written.
 */
#include "mv_pipeline.h"

#include "mv_batch.h"
#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_output.h"
#include "mv_queue.h"
#include "mv_walk.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A set of 64-bit hashes (open addressing) of output names written in this run: 16 bytes per
 * input at most, so memory stays small even for millions of inputs. */
typedef struct {
    uint64_t *slots;
    size_t cap, n;
} hset;

static int hset_add(hset *s, uint64_t h) /* 1 added, 0 present, -1 no memory */
{
    if (h == 0)
        h = 1;
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) {
                size_t j = s->slots[i] & (nc - 1);
                while (ns[j])
                    j = (j + 1) & (nc - 1);
                ns[j] = s->slots[i];
            }
        free(s->slots);
        s->slots = ns;
        s->cap = nc;
    }
    size_t j = h & (s->cap - 1);
    while (s->slots[j]) {
        if (s->slots[j] == h)
            return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->slots[j] = h;
    s->n++;
    return 1;
}

/* ---- shared state ------------------------------------------------------------------------- */

/* Busy and waiting time of each stage, summed over its threads, in nanoseconds (-v's timeline). */
enum {
    T_DECODE, T_PREPROCESS, T_DECODE_WAIT, /* decode pool */
    T_STAGE_IN, T_FORWARD, T_STAGE_OUT, T_TOWER_WAIT, /* tower threads */
    T_WRITE, T_MANIFEST, T_WRITE_WAIT, /* writers */
    T_N
};
static const char *const t_names[T_N] = {
    "decode", "preprocess", "decode wait", "stage-in", "forward", "stage-out", "tower wait",
    "write (convert+compress+fsync)", "manifest", "writer wait"};

typedef struct runner runner;

typedef struct {
    runner *R;
    mv_backend *be;
    /* staging for one forward, kept between forwards (page-locked when the backend offers it) */
    float *pix, *out;
    size_t pix_cap, out_cap; /* bytes */
    int pix_pinned, out_pinned;
} tower_arg;

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
    atomic_long n_forwards;
    double t0, last_progress;
    int progress;
    pthread_mutex_t prog_mu;
};

static int interrupted(const runner *R)
{
    return R->o->interrupt && *R->o->interrupt;
}

static void set_fatal(runner *R, const mv_err *e)
{
    pthread_mutex_lock(&R->err_mu);
    if (!atomic_load(&R->fatal)) {
        R->err = *e;
        atomic_store(&R->fatal, 1);
    }
    pthread_mutex_unlock(&R->err_mu);
}

static void t_add(runner *R, int k, double t0)
{
    atomic_fetch_add(&R->t_ns[k], (long long)((mv_now() - t0) * 1e9));
}

/* mv_queue_pop, with the time spent waiting added to stage k */
static void *pop_timed(runner *R, mv_queue *q, int k)
{
    double t = mv_now();
    void *p = mv_queue_pop(q);
    t_add(R, k, t);
    return p;
}

static void progress(runner *R, int final)
{
    if (!R->progress)
        return;
    pthread_mutex_lock(&R->prog_mu);
    double now = mv_now();
    if (final || now - R->last_progress >= 0.5) {
        R->last_progress = now;
        double dt = now - R->t0 > 1e-9 ? now - R->t0 : 1e-9;
        long done = atomic_load(&R->n_ok) + atomic_load(&R->n_err);
        long total = atomic_load(&R->total), skip = atomic_load(&R->n_skip);
        char tot[48] = "", eta[48] = "";
        if (total >= 0)
            snprintf(tot, sizeof tot, "/%ld", total - skip);
        if (total >= 0 && done > 0 && !final) {
            double t = (total - skip - done) * (dt / done);
            snprintf(eta, sizeof eta, ", ETA %dm%02ds", (int)(t / 60), (int)t % 60);
        }
        fprintf(stderr,
                "\r\033[Kmvembed: %ld%s done%s, %ld failed, %ld skipped | decode %.1f/s | tower %.0f tok/s "
                "| written %.1f files/s%s",
                done, tot, eta, (long)atomic_load(&R->n_err), skip, atomic_load(&R->n_decoded) / dt,
                atomic_load(&R->tokens) / dt, done / dt, final ? "\n" : "");
        fflush(stderr);
    }
    pthread_mutex_unlock(&R->prog_mu);
}

static mv_status append_record(runner *R, const mv_record *r, mv_err *e)
{
    double t = mv_now();
    pthread_mutex_lock(&R->man_mu);
    mv_status st = mv_manifest_append(R->man, r, e);
    pthread_mutex_unlock(&R->man_mu);
    t_add(R, T_MANIFEST, t);
    return st;
}

/* ---- decode pool -------------------------------------------------------------------------- */

static void *decode_main(void *arg)
{
    runner *R = arg;
    mv_item *it;
    while ((it = pop_timed(R, &R->jobs, T_DECODE_WAIT))) {
        if (interrupted(R) && !it->error) { /* not started: the next run does it */
            mv_item_free(it);
            continue;
        }
        if (!atomic_load(&R->fatal) && !it->error) {
            mv_err e;
            if (mv_item_prepare(&R->ictx, it, &e))
                set_fatal(R, &e);
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

static void stage_free(mv_backend *be, float *buf, int pinned)
{
    if (pinned)
        be->host_free(be, buf);
    else
        free(buf);
}

/* Grows one of a tower thread's staging buffers to at least `bytes`, page-locked when the backend
 * can (CUDA), else with malloc. Returns 0, or -1 when out of memory. */
static int stage_reserve(mv_backend *be, float **buf, size_t *cap, int *pinned, size_t bytes)
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

static void stage_release(tower_arg *ta)
{
    stage_free(ta->be, ta->pix, ta->pix_pinned);
    stage_free(ta->be, ta->out, ta->out_pinned);
    ta->pix = ta->out = NULL;
    ta->pix_cap = ta->out_cap = 0;
}

/* Runs one forward over items[0..n) (all prepared without error). */
static void tower_batch(tower_arg *ta, mv_item **items, int n)
{
    runner *R = ta->R;
    mv_backend *be = ta->be;
    const mv_vision_config *c = &R->m->cfg;
    int mm = c->merge * c->merge;
    int64_t N = 0;
    for (int i = 0; i < n; i++)
        N += mv_item_patches(items[i]);
    double t = mv_now();
    /* one input on a backend without page-locked memory: its pixels are used where they are */
    int gather = n > 1 || be->host_alloc;
    int32_t *grid = malloc(3 * n * sizeof *grid);
    mv_err e;
    float *pix = NULL, *out = NULL;
    if (grid && (!gather || !stage_reserve(be, &ta->pix, &ta->pix_cap, &ta->pix_pinned,
                                           (size_t)N * c->patch_dim * sizeof(float))) &&
        !stage_reserve(be, &ta->out, &ta->out_cap, &ta->out_pinned,
                       (size_t)(N / mm) * c->out_hidden * sizeof(float))) {
        pix = gather ? ta->pix : items[0]->p.pixels;
        out = ta->out;
    }
    if (!pix || !out) {
        mv_fail(&e, MV_ERR_NOMEM, "out of memory for a batch of %lld patches", (long long)N);
        set_fatal(R, &e);
        goto out;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(grid + 3 * i, items[i]->p.grid, sizeof items[i]->p.grid);
        if (gather)
            memcpy(pix + off * c->patch_dim, items[i]->p.pixels,
                   mv_item_patches(items[i]) * c->patch_dim * sizeof(float));
        off += mv_item_patches(items[i]);
    }
    mv_dump_ctx dc;
    if (R->o->dump_dir) /* stages are dumped one input per forward */
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", R->o->dump_dir, items[0]->rel);
    t_add(R, T_STAGE_IN, t);
    t = mv_now();
    mv_status st = be->forward(be, pix, grid, n, out, R->o->dump_dir ? mv_dump_stage : NULL, &dc, &e);
    t_add(R, T_FORWARD, t);
    if (st) {
        if (st == MV_ERR_DEVICE || R->o->dump_dir) {
            set_fatal(R, &e);
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
    off = 0;
    for (int i = 0; i < n; i++) {
        int64_t rows = mv_item_patches(items[i]) / mm;
        items[i]->out = malloc(rows * c->out_hidden * sizeof(float));
        if (!items[i]->out) {
            mv_item_fail(items[i], "out of memory");
            continue;
        }
        memcpy(items[i]->out, out + off * c->out_hidden, rows * c->out_hidden * sizeof(float));
        items[i]->rows = rows;
        off += rows;
        free(items[i]->p.pixels);
        items[i]->p.pixels = NULL;
        atomic_fetch_add(&R->tokens, mv_item_patches(items[i]));
    }
    t_add(R, T_STAGE_OUT, t);
out:
    free(grid);
}

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
    mv_item *win[TOWER_WINDOW], *fwd[TOWER_WINDOW];
    int64_t tok[TOWER_WINDOW], bt[TOWER_WINDOW];
    int bin[TOWER_WINDOW];
    for (;;) {
        int n = 0;
        int64_t wtok = 0;
        mv_item *it = pop_timed(R, &R->ready, T_TOWER_WAIT);
        if (!it)
            break; /* closed and drained */
        while (it) {
            if (!it->error && interrupted(R)) { /* not started: the next run does it */
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
            it = mv_queue_try_pop(&R->ready);
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
            int run = !atomic_load(&R->fatal) && !(interrupted(R) && b > 0);
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

/* ---- writers ------------------------------------------------------------------------------ */

static void write_item(runner *R, mv_item *it)
{
    const mv_run_opts *o = R->o;
    const mv_vision_config *c = &R->m->cfg;
    mv_err e;
    char out_rel[4200];
    snprintf(out_rel, sizeof out_rel, "%s.npy.zst", it->rel);
    if (!it->error && !it->out)
        return; /* discarded after a fatal error */
    if (!it->error) {
        char final_path[8400];
        double t = mv_now();
        mv_status st = mv_output_write(o->out_dir, it->rel, o->out_dtype, it->rows, c->out_hidden,
                                       it->out, o->zstd_level, final_path, sizeof final_path, &e);
        t_add(R, T_WRITE, t);
        if (st == MV_ERR_IO) { /* a full or read-only disk fails every later write too */
            set_fatal(R, &e);
            return;
        }
        if (st)
            mv_item_fail(it, e.msg);
    }
    mv_record r;
    mv_item_record(it, c, o->out_dtype, R->m->fingerprint, out_rel, &r);
    if (append_record(R, &r, &e)) {
        set_fatal(R, &e);
        return;
    }
    if (it->error) {
        atomic_fetch_add(&R->n_err, 1);
        if (R->progress)
            fprintf(stderr, "\r\033[K");
        fprintf(stderr, "mvembed: %s\n", it->error);
    } else {
        atomic_fetch_add(&R->n_ok, 1);
        if (o->verbose)
            fprintf(stderr, "mvembed: %s -> %s [%lld x %d] %.3fs\n", it->path, out_rel,
                    (long long)it->rows, c->out_hidden, r.seconds);
    }
    progress(R, 0);
}

static void *writer_main(void *arg)
{
    runner *R = arg;
    mv_item *it;
    while ((it = pop_timed(R, &R->done, T_WRITE_WAIT))) {
        if (!atomic_load(&R->fatal))
            write_item(R, it);
        mv_item_free(it);
    }
    return NULL;
}

/* ---- feeding ------------------------------------------------------------------------------ */

/* The walk options of a run: its path options, and OUT (which exists before the walk starts)
 * as the directory never walked into. */
static mv_walk_opts walk_opts(const mv_run_opts *o)
{
    mv_walk_opts wo = {o->null_sep, o->all_files, o->hidden, 0, 0, 0};
    struct stat sb;
    if (stat(o->out_dir, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        wo.has_skip = 1;
        wo.skip_dev = sb.st_dev;
        wo.skip_ino = sb.st_ino;
    }
    return wo;
}

/* For the progress line's total and ETA: a second, cheap walk (names only) that counts this run's
 * share of the inputs. Not done when paths come from standard input (a stream). */
static void *count_main(void *arg)
{
    runner *R = arg;
    const mv_run_opts *o = R->o;
    mv_walk *w;
    mv_walk_opts wo = walk_opts(o);
    mv_err e;
    if (mv_walk_open(o->paths, o->n_paths, &wo, NULL, &w, &e))
        return NULL;
    long n = 0;
    mv_walk_item wi;
    while (!interrupted(R) && !atomic_load(&R->fatal) && mv_walk_next(w, &wi, &e) > 0)
        if (R->shard_n <= 1 || (int)(mv_hash64(wi.rel, strlen(wi.rel)) % (uint64_t)R->shard_n) == R->shard_k)
            n++;
    mv_walk_close(w);
    atomic_store(&R->total, n);
    return NULL;
}

/* Walks the inputs and feeds the pipeline. Returns MV_OK or a fatal error (in e).
 * Resume works on output names (mv_output_name): an input is skipped when OUT's manifest says
 * that this same input (mv_done_same_input) made its output name with this run's fingerprint and
 * the output is whole; it is redone when the settings differ or the output is missing or
 * damaged; it fails when another input holds the name (never overwritten, even with --force). */
static mv_status feed(runner *R, mv_done *done, mv_err *e)
{
    const mv_run_opts *o = R->o;
    int shard_k = R->shard_k, shard_n = R->shard_n;
    mv_walk *w;
    mv_walk_opts wo = walk_opts(o);
    char *out_real = realpath(o->out_dir, NULL);
    if (!out_real)
        return mv_fail(e, MV_ERR_IO, "%s: cannot resolve the output directory: %s", o->out_dir,
                       strerror(errno));
    mv_status st = mv_walk_open(o->paths, o->n_paths, &wo, stdin, &w, e);
    if (st) {
        free(out_real);
        return st;
    }
    const char *fp = R->m->fingerprint;
    long n_stale = 0;
    char stale_fp[17] = "";
    hset rels = {0};
    mv_walk_item wi;
    int r = 0;
    while (!interrupted(R) && !atomic_load(&R->fatal) && (r = mv_walk_next(w, &wi, e)) > 0) {
        if (shard_n > 1 && (int)(mv_hash64(wi.rel, strlen(wi.rel)) % (uint64_t)shard_n) != shard_k)
            continue;
        mv_item *it = mv_item_new(wi.path, wi.rel);
        if (!it) {
            st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
            break;
        }
        char out_rel[4200];
        snprintf(out_rel, sizeof out_rel, "%s.npy.zst", wi.rel);
        mv_done_owner ow;
        int held = !wi.error && done && mv_done_owner_of(done, out_rel, &ow);
        if (wi.error) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s: %s", wi.path, wi.error);
            mv_item_fail(it, msg);
        } else if (held && !mv_done_same_input(ow.input, wi.path)) {
            char msg[8600];
            snprintf(msg, sizeof msg,
                     "%s: output name %s already holds the embedding of %s (OUT's manifest says so); "
                     "not overwritten: use another --out, or remove that output and its manifest lines",
                     wi.path, out_rel, ow.input);
            mv_item_fail(it, msg);
        } else {
            if (held && ow.ok && !o->force) {
                char why[1100];
                if (strcmp(ow.model, fp) != 0) { /* other settings: redone */
                    if (!n_stale++)
                        snprintf(stale_fp, sizeof stale_fp, "%s", ow.model[0] ? ow.model : "none");
                    if (o->verbose)
                        fprintf(stderr, "mvembed: %s: made with fingerprint %s, this run's is %s: redoing it\n",
                                wi.path, ow.model[0] ? ow.model : "(none)", fp);
                } else if (mv_done_output_intact(out_real, out_rel, ow.bytes, why, sizeof why)) {
                    atomic_fetch_add(&R->n_skip, 1);
                    hset_add(&rels, mv_hash64(out_rel, strlen(out_rel)));
                    if (o->verbose)
                        fprintf(stderr, "mvembed: %s: already done, skipped (--force redoes it)\n", wi.path);
                    mv_item_free(it);
                    continue;
                } else if (!o->quiet) {
                    fprintf(stderr, "%smvembed: %s: output %s is missing or damaged (%s); redoing it\n",
                            R->progress ? "\r\033[K" : "", wi.path, out_rel, why);
                }
            }
            int added = hset_add(&rels, mv_hash64(out_rel, strlen(out_rel)));
            if (added < 0) {
                mv_item_free(it);
                st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
                break;
            }
            if (added == 0) {
                char msg[8600];
                snprintf(msg, sizeof msg, "%s: output name %s is already used by another input of this run",
                         wi.path, out_rel);
                mv_item_fail(it, msg);
            }
        }
        if (mv_queue_push(&R->jobs, it)) {
            mv_item_free(it);
            break;
        }
    }
    if (r < 0 && !st && !interrupted(R))
        st = MV_ERR_IO; /* e was set by mv_walk_next */
    if (n_stale && !o->quiet)
        fprintf(stderr, "mvembed: %ld input%s made with other settings (fingerprint %s%s; this run's "
                "is %s): redoing %s\n", n_stale, n_stale > 1 ? "s were" : " was", stale_fp,
                n_stale > 1 ? " and maybe others" : "", fp, n_stale > 1 ? "them" : "it");
    mv_walk_close(w);
    free(rels.slots);
    free(out_real);
    return st;
}

static void manifest_name(char *buf, size_t cap, const char *dir, int k, int n)
{
    if (n > 1)
        snprintf(buf, cap, "%s/manifest-%05d-of-%05d.jsonl", dir, k, n);
    else
        snprintf(buf, cap, "%s/manifest.jsonl", dir);
}

/* Loads the resume state: this shard's manifest, and for a shard also the merged one. */
static mv_status load_done(const mv_run_opts *o, int shard_k, int shard_n, mv_done **done, mv_err *e)
{
    char mpath[4200], merged[4200];
    manifest_name(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    manifest_name(merged, sizeof merged, o->out_dir, 0, 1);
    mv_status st = mv_done_create(done, e);
    for (int i = 0; !st && i < (shard_n > 1 ? 2 : 1); i++) {
        const char *p = i ? merged : mpath;
        if (access(p, F_OK) != 0)
            continue;
        size_t nl, nb;
        if ((st = mv_manifest_load_done(p, *done, &nl, &nb, e)))
            break;
        if (o->verbose)
            fprintf(stderr, "mvembed: %s: %zu lines, %zu done so far%s\n", p, nl, mv_done_count(*done),
                    nb ? " (unreadable lines ignored)" : "");
    }
    if (st) {
        mv_done_free(*done);
        *done = NULL;
    }
    return st;
}

/* -v: where the time went, per stage (busy and waiting, summed over each stage's threads). */
static void print_timeline(runner *R, double wall, int jobs, int n_tower, int writers)
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
    const int threads[T_N] = {jobs, jobs, jobs, n_tower, n_tower, n_tower, n_tower,
                              writers, writers, writers};
    fprintf(stderr, "mvembed: timeline (seconds summed over threads; %% of the stage's thread-time):");
    for (int k = 0; k < T_N; k++) {
        double s = atomic_load(&R->t_ns[k]) * 1e-9;
        fprintf(stderr, "%s %s %.2fs (%.0f%%)", k ? "," : "", t_names[k], s,
                100 * s / (wall * (threads[k] ? threads[k] : 1)));
    }
    fputc('\n', stderr);
}

mv_status mv_pipeline_run(const mv_run_opts *o, mv_model *m, mv_backend **be, int n_be, int shard_k,
                          int shard_n, mv_run_result *res, mv_err *e)
{
    memset(res, 0, sizeof *res);
    mv_status st;
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
    R->o = o;
    R->m = m;
    R->ictx = (mv_item_ctx){.m = m, .max_decode_pixels = o->max_decode_pixels, .timeout = o->timeout,
                            .num_frames = o->num_frames, .dump_dir = o->dump_dir};
    R->shard_k = shard_k;
    R->shard_n = shard_n;
    char mpath[4200];
    manifest_name(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    mv_done *done = NULL;
    if ((st = load_done(o, shard_k, shard_n, &done, e)))
        goto out;
    if ((st = mv_manifest_open(mpath, &R->man, e))) {
        mv_done_free(done);
        goto out;
    }
    int jobs = o->jobs > 0 ? o->jobs : mv_cpu_count();
    /* writers compress (zstd) and fsync outputs that can be tens of MB each (27B layout: 5120
     * floats per token): on a GPU machine they, not decoding, are the slow CPU stage */
    int writers = jobs / 2 < 2 ? 2 : (jobs / 2 > 8 ? 8 : jobs / 2);
    size_t qcap = (size_t)jobs * 2 + 4;
    int qfail = mv_queue_init(&R->jobs, qcap);
    qfail |= mv_queue_init(&R->ready, qcap);
    qfail |= mv_queue_init(&R->done, qcap);
    R->t0 = mv_now();
    R->progress = o->progress < 0 ? (!o->quiet && isatty(2)) : o->progress;
    atomic_store(&R->total, -1);
    int counting = 0;
    pthread_t counter;
    if (R->progress) {
        int from_stdin = 0;
        for (int i = 0; i < o->n_paths; i++)
            from_stdin |= !strcmp(o->paths[i], "-");
        counting = !from_stdin && !pthread_create(&counter, NULL, count_main, R);
    }
    pthread_t *dec = qfail ? NULL : calloc(jobs, sizeof *dec), tw[64], wr[8];
    tower_arg ta[64];
    int nd = 0, nt = 0, nw = 0;
    for (; dec && nd < jobs; nd++)
        if (pthread_create(&dec[nd], NULL, decode_main, R))
            break;
    for (; dec && nt < n_be && nt < 64; nt++) {
        ta[nt] = (tower_arg){.R = R, .be = be[nt]};
        if (pthread_create(&tw[nt], NULL, tower_main, &ta[nt]))
            break;
    }
    for (; dec && nw < writers; nw++)
        if (pthread_create(&wr[nw], NULL, writer_main, R))
            break;
    mv_err fe;
    st = (nd && nt && nw) ? feed(R, done, &fe)
                          : dec ? mv_fail(&fe, MV_ERR_INTERNAL, "cannot start threads")
                                : mv_fail(&fe, MV_ERR_NOMEM, "out of memory for the pipeline's queues");
    if (st)
        set_fatal(R, &fe);
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
    double wall = mv_now() - R->t0;
    if (res->signal) {
        fprintf(stderr, "mvembed: interrupted; %ld done and kept (run again to resume)\n", res->ok);
    } else {
        if (!o->quiet)
            fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs\n", res->ok, res->failed,
                    res->skipped, wall);
        if (o->verbose)
            print_timeline(R, wall, jobs, nt, nw);
    }
out:
    pthread_mutex_destroy(&R->man_mu);
    pthread_mutex_destroy(&R->err_mu);
    pthread_mutex_destroy(&R->prog_mu);
    free(R);
    return st;
}
