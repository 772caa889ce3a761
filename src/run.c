/* run.c - the batch driver. A pipeline of threads joined by bounded queues (mv_queue.h):
 *
 *   walker (caller's thread): resume / shard / duplicate-name checks, in input order
 *     -> jobs -> decode pool (--jobs threads): sniff, decode, preprocess exactly like HF
 *     -> ready -> tower thread per backend (per GPU): packs inputs into one forward (CUDA), or one
 *        input per forward (CPU, and whenever stages are dumped), one attention segment per image /
 *        temporal group
 *     -> done -> writer threads: zstd + atomic write of OUT/<rel>.npy.zst, then the manifest line.
 *
 * A bad input gets an error line and the batch goes on; fatal problems (device failure, a full or
 * read-only disk, the manifest) stop it. Memory stays bounded: paths are streamed and every queue
 * has a fixed capacity. Also the tower-only entry (--pixels/--grid) used for parity work. */
#include "mv_run.h"

#include "mv_batch.h"
#include "mv_image.h"
#include "mv_manifest.h"
#include "mv_output.h"
#include "mv_preprocess.h"
#include "mv_queue.h"
#include "mv_video.h"
#include "mv_walk.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    if (g_interrupted) /* second signal: leave now; temp files are swept by the next run */
        _exit(128 + sig);
    g_interrupted = sig;
}

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

typedef struct {
    float *pixels;    /* [patches, patch_dim] */
    int32_t grid[3];
    uint8_t *resized; /* [n_frames][rh][rw][3], for input.png (--dump-stages only) */
    int n_frames, rw, rh;
    const char *kind;
    int width, height;
    int64_t *frame_idx;
    double *ts;
    int n_idx;
    double fps, duration;
    int rotation;
} prepared;

static void prepared_free(prepared *p)
{
    free(p->pixels);
    free(p->resized);
    free(p->frame_idx);
    free(p->ts);
    memset(p, 0, sizeof *p);
}

/* One input travelling through the pipeline. */
typedef struct {
    char *path, *rel;
    double t0;
    char *error;      /* set: the input failed; it goes straight to the writer */
    const char *kind; /* for error lines */
    prepared p;
    float *out;       /* [rows, out_hidden] once the tower ran */
    int64_t rows;
} item;

static char oom_msg[] = "out of memory"; /* an item's error when even its message can't be copied */

static void item_free(item *it)
{
    if (!it)
        return;
    free(it->path);
    free(it->rel);
    if (it->error != oom_msg)
        free(it->error);
    prepared_free(&it->p);
    free(it->out);
    free(it);
}

static void item_fail(item *it, const char *msg)
{
    if (it->error != oom_msg)
        free(it->error);
    it->error = strdup(msg);
    if (!it->error)
        it->error = oom_msg;
    prepared_free(&it->p);
}

static mv_status prepare_image(const mv_run_opts *o, const mv_model *m, const char *path,
                               prepared *p, mv_err *e)
{
    mv_image img;
    mv_status st = mv_image_decode_limited(path, o->max_decode_pixels, o->timeout, &img, e);
    if (st)
        return st;
    p->kind = "image";
    p->width = img.width;
    p->height = img.height;
    st = mv_preprocess_image(&img, &m->pp, &p->pixels, p->grid, o->dump_dir ? &p->resized : NULL,
                             &p->rw, &p->rh, e);
    if (!st && o->dump_dir)
        p->n_frames = 1;
    mv_image_free(&img);
    if (st)
        return mv_fail_prefix(e, st, "%s", path);
    return MV_OK;
}

static mv_status prepare_video(const mv_run_opts *o, const mv_model *m, const char *path,
                               prepared *p, mv_err *e)
{
    const mv_preproc_config *pp = &m->pp;
    mv_video *v;
    mv_video_info info;
    mv_video_limits lim = {.timeout_s = o->timeout, .max_pixels = o->max_decode_pixels};
    mv_status st = mv_video_open_with(path, &lim, &v, &info, e);
    if (st)
        return st;
    p->kind = "video";
    p->width = info.width;
    p->height = info.height;
    p->fps = info.fps;
    p->duration = info.duration;
    p->rotation = info.rotation;
    int n;
    if (o->num_frames > 0) {
        n = o->num_frames;
        if (n > info.total_frames) {
            mv_video_close(v);
            return mv_fail(e, MV_ERR_FORMAT, "%s: --num-frames %d but the video has %lld frames", path,
                           n, (long long)info.total_frames);
        }
    } else {
        n = mv_video_num_frames(info.total_frames, info.fps, pp->fps, pp->min_frames, pp->max_frames);
    }
    if (n < 1) {
        mv_video_close(v);
        return mv_fail(e, MV_ERR_FORMAT, "%s: video has no frames", path);
    }
    p->frame_idx = malloc(n * sizeof *p->frame_idx);
    p->ts = malloc(n * sizeof *p->ts);
    uint8_t *frames = NULL, *rs = NULL;
    if (!p->frame_idx || !p->ts) {
        mv_video_close(v);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    mv_video_indices(info.total_frames, n, p->frame_idx);
    p->n_idx = n;
    int oh, ow, f = pp->patch * pp->merge;
    st = mv_smart_resize_video(n, info.height, info.width, f, pp->temporal, pp->video_min_pixels,
                               pp->video_max_pixels, &oh, &ow, e);
    if (st) {
        mv_video_close(v);
        return mv_fail_prefix(e, st, "%s", path);
    }
    size_t fsz = (size_t)ow * oh * 3, isz = (size_t)info.width * info.height * 3;
    rs = malloc(fsz * n);
    const uint8_t **fp = malloc(n * sizeof *fp);
    if (!rs || !fp) {
        mv_video_close(v);
        free(rs);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    /* full-size frames are held at most mv_video_frames_per_read() at a time (the decode budget) */
    int chunk = mv_video_frames_per_read(v);
    for (int k0 = 0; k0 < n && !st; k0 += chunk) {
        int nk = n - k0 < chunk ? n - k0 : chunk;
        st = mv_video_read(v, p->frame_idx + k0, nk, &frames, p->ts + k0, e);
        for (int i = 0; i < nk && !st; i++) {
            st = mv_resize_bicubic_aa_u8(frames + isz * i, info.width, info.height, rs + fsz * (k0 + i), ow, oh);
            fp[k0 + i] = rs + fsz * (k0 + i);
            if (st)
                mv_fail(e, st, "%s: out of memory resizing frames", path);
        }
        free(frames);
        frames = NULL;
    }
    mv_video_close(v);
    if (st) {
        free(rs);
        free(fp);
        return st;
    }
    int gt = (n + pp->temporal - 1) / pp->temporal;
    int64_t rows = (int64_t)gt * (oh / pp->patch) * (ow / pp->patch);
    p->pixels = malloc(rows * 3 * pp->temporal * pp->patch * pp->patch * sizeof(float));
    if (!p->pixels) {
        free(rs);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    mv_patchify(fp, n, oh, ow, pp, p->pixels, p->grid);
    free(fp);
    if (o->dump_dir) {
        p->resized = rs;
        p->n_frames = n;
        p->rw = ow;
        p->rh = oh;
    } else {
        free(rs);
    }
    return MV_OK;
}

typedef struct {
    char dir[4096];
} dump_ctx;

static mv_status dump_stage(void *ud, const char *stage, const float *data, int64_t rows,
                            int64_t cols, mv_err *e)
{
    dump_ctx *d = ud;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.npy", d->dir, stage);
    int64_t shape[2] = {rows, cols};
    return mv_npy_save(path, MV_DT_F32, 2, shape, data, e);
}

static mv_status dump_inputs(const char *dir, const prepared *p, mv_err *e)
{
    for (int i = 0; i < p->n_frames; i++) {
        char path[4300];
        if (p->n_frames == 1 && !strcmp(p->kind, "image"))
            snprintf(path, sizeof path, "%s/input.png", dir);
        else
            snprintf(path, sizeof path, "%s/input_%03d.png", dir, i);
        mv_status st = mv_png_write_rgb(path, p->resized + (size_t)i * p->rw * p->rh * 3, p->rw, p->rh, e);
        if (st)
            return st;
    }
    return MV_OK;
}

/* ---- shared state ------------------------------------------------------------------------- */

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
    mv_backend **be;
    int n_be;
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
    atomic_llong tower_ns; /* time the tower threads spent inside forward(), summed */
    atomic_long n_forwards;
    double t0, last_progress;
    int progress;
    pthread_mutex_t prog_mu;
};

static void set_fatal(runner *R, const mv_err *e)
{
    pthread_mutex_lock(&R->err_mu);
    if (!atomic_load(&R->fatal)) {
        R->err = *e;
        atomic_store(&R->fatal, 1);
    }
    pthread_mutex_unlock(&R->err_mu);
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
    pthread_mutex_lock(&R->man_mu);
    mv_status st = mv_manifest_append(R->man, r, e);
    pthread_mutex_unlock(&R->man_mu);
    return st;
}

/* ---- decode pool -------------------------------------------------------------------------- */

/* Sniffs, decodes and preprocesses one input; on failure sets it->error. */
static void prepare(runner *R, item *it)
{
    const mv_run_opts *o = R->o;
    char msg[1200];
    struct stat sb;
    if (stat(it->path, &sb) != 0) {
        snprintf(msg, sizeof msg, "%s: %s", it->path, strerror(errno));
        item_fail(it, msg);
        return;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(msg, sizeof msg, "%s: not a regular file", it->path);
        item_fail(it, msg);
        return;
    }
    uint8_t head[MV_SNIFF_BYTES];
    FILE *f = fopen(it->path, "rb");
    if (!f) {
        snprintf(msg, sizeof msg, "%s: %s", it->path, strerror(errno));
        item_fail(it, msg);
        return;
    }
    size_t nh = fread(head, 1, sizeof head, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || nh == 0) {
        snprintf(msg, sizeof msg, "%s: %s", it->path, rerr ? "read error" : "empty file");
        item_fail(it, msg);
        return;
    }
    mv_err e;
    mv_status st;
    mv_media_kind kind = mv_sniff(head, nh);
    switch (kind) {
    case MV_MEDIA_JPEG:
    case MV_MEDIA_PNG:
    case MV_MEDIA_WEBP:
        it->kind = "image";
        st = prepare_image(o, R->m, it->path, &it->p, &e);
        break;
    case MV_MEDIA_VIDEO:
        it->kind = "video";
        st = prepare_video(o, R->m, it->path, &it->p, &e);
        break;
    case MV_MEDIA_IMAGE_OTHER:
        it->kind = "image";
        st = mv_fail(&e, MV_ERR_UNSUPPORTED, "%s: %s images are not supported (JPEG, PNG, WebP are)",
                     it->path, mv_sniff_format(head, nh));
        break;
    default:
        st = mv_fail(&e, MV_ERR_FORMAT, "%s: not an image or video (unrecognised file type)", it->path);
        break;
    }
    if (st) {
        item_fail(it, e.msg);
        return;
    }
    if (o->dump_dir) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", o->dump_dir, it->rel);
        if ((st = mv_mkdirs(dir, &e)) || (st = dump_inputs(dir, &it->p, &e)))
            set_fatal(R, &e);
    }
}

static void *decode_main(void *arg)
{
    runner *R = arg;
    item *it;
    while ((it = mv_queue_pop(&R->jobs))) {
        if (!atomic_load(&R->fatal) && !it->error) {
            prepare(R, it);
            if (!it->error)
                atomic_fetch_add(&R->n_decoded, 1);
        }
        if (mv_queue_push(&R->ready, it))
            item_free(it);
    }
    return NULL;
}

/* ---- tower -------------------------------------------------------------------------------- */

static int64_t item_patches(const item *it)
{
    return (int64_t)it->p.grid[0] * it->p.grid[1] * it->p.grid[2];
}

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
static void tower_batch(tower_arg *ta, item **items, int n)
{
    runner *R = ta->R;
    mv_backend *be = ta->be;
    const mv_vision_config *c = &R->m->cfg;
    int mm = c->merge * c->merge;
    int64_t N = 0;
    for (int i = 0; i < n; i++)
        N += item_patches(items[i]);
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
                   item_patches(items[i]) * c->patch_dim * sizeof(float));
        off += item_patches(items[i]);
    }
    dump_ctx dc;
    if (R->o->dump_dir) /* stages are dumped one input per forward */
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", R->o->dump_dir, items[0]->rel);
    double tf = mv_now();
    mv_status st = be->forward(be, pix, grid, n, out, R->o->dump_dir ? dump_stage : NULL, &dc, &e);
    atomic_fetch_add(&R->tower_ns, (long long)((mv_now() - tf) * 1e9));
    if (st) {
        if (st == MV_ERR_DEVICE || R->o->dump_dir) {
            set_fatal(R, &e);
        } else {
            for (int i = 0; i < n; i++) {
                char msg[1200];
                snprintf(msg, sizeof msg, "%s: %s", items[i]->path, e.msg);
                item_fail(items[i], msg);
            }
        }
        goto out;
    }
    off = 0;
    for (int i = 0; i < n; i++) {
        int64_t rows = item_patches(items[i]) / mm;
        items[i]->out = malloc(rows * c->out_hidden * sizeof(float));
        if (!items[i]->out) {
            item_fail(items[i], "out of memory");
            continue;
        }
        memcpy(items[i]->out, out + off * c->out_hidden, rows * c->out_hidden * sizeof(float));
        items[i]->rows = rows;
        off += rows;
        free(items[i]->p.pixels);
        items[i]->p.pixels = NULL;
        atomic_fetch_add(&R->tokens, item_patches(items[i]));
    }
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
    item *win[TOWER_WINDOW], *fwd[TOWER_WINDOW];
    int64_t tok[TOWER_WINDOW], bt[TOWER_WINDOW];
    int bin[TOWER_WINDOW];
    for (;;) {
        int n = 0;
        int64_t wtok = 0;
        item *it = mv_queue_pop(&R->ready);
        if (!it)
            break; /* closed and drained */
        while (it) {
            if (it->error || atomic_load(&R->fatal)) {
                if (mv_queue_push(&R->done, it))
                    item_free(it);
            } else {
                tok[n] = item_patches(it);
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
            if (!atomic_load(&R->fatal)) {
                tower_batch(ta, fwd, k);
                atomic_fetch_add(&R->n_forwards, 1);
            }
            for (int i = 0; i < k; i++)
                if (mv_queue_push(&R->done, fwd[i]))
                    item_free(fwd[i]);
        }
    }
    stage_release(ta);
    return NULL;
}

/* ---- writers ------------------------------------------------------------------------------ */

static void write_item(runner *R, item *it)
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
        mv_status st = mv_output_write(o->out_dir, it->rel, o->out_dtype, it->rows, c->out_hidden,
                                       it->out, o->zstd_level, final_path, sizeof final_path, &e);
        if (st == MV_ERR_IO) { /* a full or read-only disk fails every later write too */
            set_fatal(R, &e);
            return;
        }
        if (st)
            item_fail(it, e.msg);
    }
    mv_record r = {0};
    r.input = it->path;
    r.kind = it->kind;
    r.model = R->m->fingerprint;
    r.has_seconds = 1;
    r.seconds = mv_now() - it->t0;
    if (it->error) {
        r.ok = 0;
        r.error = it->error;
    } else {
        const prepared *p = &it->p;
        r.ok = 1;
        r.output = out_rel;
        r.has_size = 1;
        r.width = p->width;
        r.height = p->height;
        r.has_resized = 1;
        r.resized[0] = (int64_t)p->grid[2] * c->patch;
        r.resized[1] = (int64_t)p->grid[1] * c->patch;
        r.has_grid = 1;
        for (int i = 0; i < 3; i++)
            r.grid_thw[i] = p->grid[i];
        r.has_shape = 1;
        r.shape[0] = it->rows;
        r.shape[1] = c->out_hidden;
        r.dtype = o->out_dtype == MV_DT_F16 ? "f16" : "f32";
        if (p->frame_idx) {
            r.frame_indices = p->frame_idx;
            r.n_frame_indices = p->n_idx;
            r.timestamps = p->ts;
            r.n_timestamps = p->n_idx;
            r.has_fps = 1;
            r.fps = p->fps;
            r.has_duration = 1;
            r.duration = p->duration;
            r.has_rotation = 1;
            r.rotation = p->rotation;
        }
    }
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
    item *it;
    while ((it = mv_queue_pop(&R->done))) {
        if (!atomic_load(&R->fatal))
            write_item(R, it);
        item_free(it);
    }
    return NULL;
}

static mv_status apply_overrides(const mv_run_opts *o, mv_model *m, mv_err *e)
{
    mv_preproc_config *pp = &m->pp;
    if (o->min_pixels)
        pp->min_pixels = o->min_pixels;
    if (o->max_pixels)
        pp->max_pixels = o->max_pixels;
    if (o->video_min_pixels)
        pp->video_min_pixels = o->video_min_pixels;
    if (o->video_max_pixels)
        pp->video_max_pixels = o->video_max_pixels;
    if (o->fps > 0)
        pp->fps = o->fps;
    if (o->min_frames)
        pp->min_frames = o->min_frames;
    if (o->max_frames)
        pp->max_frames = o->max_frames;
    if (pp->min_pixels > pp->max_pixels || pp->video_min_pixels > pp->video_max_pixels)
        return mv_fail(e, MV_ERR_USAGE, "min pixels must not exceed max pixels");
    if (pp->min_frames > pp->max_frames)
        return mv_fail(e, MV_ERR_USAGE, "--min-frames must not exceed --max-frames");
    mv_model_update_fingerprint(m);
    return MV_OK;
}

static int parse_grid(const char *s, int32_t **grid, int *n)
{
    int cap = 8, cnt = 0;
    int32_t *g = malloc(cap * 3 * sizeof *g);
    const char *p = s;
    while (g && *p) {
        int t, h, w, used;
        if (sscanf(p, "%d,%d,%d%n", &t, &h, &w, &used) != 3) {
            free(g);
            return -1;
        }
        if (cnt == cap) {
            int32_t *ng = realloc(g, (cap *= 2) * 3 * sizeof *g);
            if (!ng) {
                free(g);
                return -1;
            }
            g = ng;
        }
        g[3 * cnt] = t;
        g[3 * cnt + 1] = h;
        g[3 * cnt + 2] = w;
        cnt++;
        p += used;
        if (*p == ';')
            p++;
        else if (*p) {
            free(g);
            return -1;
        }
    }
    if (!g || !cnt) {
        free(g);
        return -1;
    }
    *grid = g;
    *n = cnt;
    return 0;
}

/* Tower-only entry: embeds given pixel_values. */
static int run_pixels(const mv_run_opts *o, mv_model *m, mv_backend *be, mv_err *e)
{
    int32_t *grid;
    int n;
    if (parse_grid(o->grid ? o->grid : "", &grid, &n)) {
        mv_fail(e, MV_ERR_USAGE, "--grid must be T,H,W[;T,H,W...] (in patches)");
        return 1;
    }
    mv_array a;
    int rc = 1;
    float *out = NULL;
    if (mv_npy_load_f32(o->pixels, &a, e))
        goto done;
    int64_t N;
    if (mv_grid_check(&m->cfg, grid, n, &N, e))
        goto done_a;
    if (a.ndim != 2 || a.shape[0] != N || a.shape[1] != m->cfg.patch_dim) {
        mv_fail(e, MV_ERR_USAGE, "%s: shape must be [%lld, %d] for grid %s", o->pixels, (long long)N,
                m->cfg.patch_dim, o->grid);
        goto done_a;
    }
    int64_t rows = N / (m->cfg.merge * m->cfg.merge);
    out = malloc(rows * m->cfg.out_hidden * sizeof(float));
    const char *base = strrchr(o->pixels, '/');
    base = base ? base + 1 : o->pixels;
    char name[1024];
    snprintf(name, sizeof name, "%s", base);
    size_t nl = strlen(name);
    if (nl > 4 && !strcmp(name + nl - 4, ".npy"))
        name[nl - 4] = 0;
    dump_ctx dc = {""};
    if (o->dump_dir) {
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", o->dump_dir, name);
        if (mv_mkdirs(dc.dir, e))
            goto done_a;
    }
    if (be->forward(be, a.data, grid, n, out, o->dump_dir ? dump_stage : NULL, &dc, e))
        goto done_a;
    char final_path[8400];
    if (o->out_dir && mv_output_write(o->out_dir, name, o->out_dtype, rows, m->cfg.out_hidden, out,
                                      o->zstd_level, final_path, sizeof final_path, e))
        goto done_a;
    if (!o->quiet && o->out_dir)
        fprintf(stderr, "mvembed: %s -> %s [%lld x %d]\n", o->pixels, final_path, (long long)rows,
                m->cfg.out_hidden);
    rc = 0;
done_a:
    mv_array_free(&a);
done:
    free(out);
    free(grid);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* Shard from --shard or from a Slurm array task's environment. */
static mv_status resolve_shard(const mv_run_opts *o, int *k, int *n, mv_err *e)
{
    *k = o->shard_k;
    *n = o->shard_n;
    if (*n > 0)
        return MV_OK;
    const char *id = getenv("SLURM_ARRAY_TASK_ID"), *cnt = getenv("SLURM_ARRAY_TASK_COUNT");
    if (!id || !cnt)
        return MV_OK;
    const char *mn = getenv("SLURM_ARRAY_TASK_MIN"), *mx = getenv("SLURM_ARRAY_TASK_MAX"),
               *sp = getenv("SLURM_ARRAY_TASK_STEP");
    long vid = strtol(id, NULL, 10), vc = strtol(cnt, NULL, 10), vmin = mn ? strtol(mn, NULL, 10) : 0;
    long step = sp ? strtol(sp, NULL, 10) : 1, vmax = mx ? strtol(mx, NULL, 10) : vmin + (vc - 1) * step;
    /* only an evenly spaced range (a-b or a-b:s) maps task ids onto shards 0..COUNT-1; a list
     * like --array=3,7 would leave shards unprocessed */
    if (step < 1 || vc < 1 || (vid - vmin) % step || (vmax - vmin) / step + 1 != vc ||
        (vid - vmin) / step < 0 || (vid - vmin) / step >= vc)
        return mv_fail(e, MV_ERR_USAGE,
                       "cannot derive a shard from SLURM_ARRAY_TASK_ID=%s, SLURM_ARRAY_TASK_MIN=%s, "
                       "SLURM_ARRAY_TASK_MAX=%s, SLURM_ARRAY_TASK_STEP=%s, SLURM_ARRAY_TASK_COUNT=%s "
                       "(arrays that are not an evenly spaced range need --shard K/N)",
                       id, mn ? mn : "(unset)", mx ? mx : "(unset)", sp ? sp : "(unset)", cnt);
    vid = vmin + (vid - vmin) / step;
    *k = (int)(vid - vmin);
    *n = (int)vc;
    fprintf(stderr, "mvembed: shard %d/%d from SLURM_ARRAY_TASK_ID\n", *k, *n);
    return MV_OK;
}

static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 2;
}

static mv_status make_backends(const mv_run_opts *o, runner *R, mv_err *e)
{
    const mv_model *m = R->m;
    int use_cuda = o->device == MV_DEV_CUDA || (o->device == MV_DEV_AUTO && mv_cuda_available());
    R->be = calloc(o->n_devices > 0 ? o->n_devices : 1, sizeof *R->be);
    if (!R->be)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    if (use_cuda) {
        int nd = o->n_devices > 0 ? o->n_devices : 1;
        mv_status st = MV_OK;
        for (int i = 0; i < nd && !st; i++) {
            mv_backend_opts bo = o->bopts;
            if (o->n_devices > 0)
                bo.device = o->devices[i];
            st = mv_backend_cuda_create(m, &bo, &R->be[i], e);
            if (!st) {
                R->n_be++;
                if (R->be[i]->max_batch_tokens <= 0)
                    R->be[i]->max_batch_tokens = o->bopts.batch_tokens > 0 ? o->bopts.batch_tokens : 32768;
            }
        }
        if (!st) {
            if (!o->quiet)
                fprintf(stderr, "mvembed: using the CUDA backend on %d GPU%s\n", R->n_be, R->n_be > 1 ? "s" : "");
            return MV_OK;
        }
        if (o->device == MV_DEV_CUDA)
            return st;
        for (int i = 0; i < R->n_be; i++)
            R->be[i]->destroy(R->be[i]);
        R->n_be = 0;
        if (!o->quiet)
            fprintf(stderr, "mvembed: CUDA backend unavailable (%s); using the CPU\n", e->msg);
    } else if (o->device == MV_DEV_AUTO && !o->quiet) {
        fprintf(stderr, "mvembed: no usable GPU; using the CPU backend\n");
    }
    mv_status st = mv_backend_cpu_create(m, &o->bopts, &R->be[0], e);
    if (!st) {
        R->n_be = 1;
        R->be[0]->max_batch_tokens = o->bopts.batch_tokens; /* 0: one input per forward */
    }
    return st;
}

/* For the progress line's total and ETA: a second, cheap walk (names only) that counts this run's
 * share of the inputs. Not done when paths come from standard input (a stream). */
static void *count_main(void *arg)
{
    runner *R = arg;
    const mv_run_opts *o = R->o;
    mv_walk *w;
    mv_walk_opts wo = {o->null_sep, o->all_files, o->hidden};
    mv_err e;
    if (mv_walk_open(o->paths, o->n_paths, &wo, NULL, &w, &e))
        return NULL;
    long n = 0;
    mv_walk_item wi;
    while (!g_interrupted && !atomic_load(&R->fatal) && mv_walk_next(w, &wi, &e) > 0)
        if (R->shard_n <= 1 || (int)(mv_hash64(wi.rel, strlen(wi.rel)) % (uint64_t)R->shard_n) == R->shard_k)
            n++;
    mv_walk_close(w);
    atomic_store(&R->total, n);
    return NULL;
}

/* Walks the inputs and feeds the pipeline. Returns MV_OK or a fatal error (in e). */
static mv_status feed(runner *R, mv_done *done, int shard_k, int shard_n, mv_err *e)
{
    const mv_run_opts *o = R->o;
    mv_walk *w;
    mv_walk_opts wo = {o->null_sep, o->all_files, o->hidden};
    mv_status st = mv_walk_open(o->paths, o->n_paths, &wo, stdin, &w, e);
    if (st)
        return st;
    hset rels = {0};
    mv_walk_item wi;
    int r = 0;
    while (!g_interrupted && !atomic_load(&R->fatal) && (r = mv_walk_next(w, &wi, e)) > 0) {
        if (shard_n > 1 && (int)(mv_hash64(wi.rel, strlen(wi.rel)) % (uint64_t)shard_n) != shard_k)
            continue;
        item *it = calloc(1, sizeof *it);
        if (!it || !(it->path = strdup(wi.path)) || !(it->rel = strdup(wi.rel))) {
            item_free(it);
            st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
            break;
        }
        it->t0 = mv_now();
        char out_rel[4200];
        snprintf(out_rel, sizeof out_rel, "%s.npy.zst", wi.rel);
        if (wi.error) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s: %s", wi.path, wi.error);
            item_fail(it, msg);
        } else {
            const char *prev = done && !o->force ? mv_done_lookup(done, wi.path) : NULL;
            if (prev) {
                char full[8400];
                struct stat sb;
                snprintf(full, sizeof full, "%s/%s", o->out_dir, prev);
                if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
                    atomic_fetch_add(&R->n_skip, 1);
                    hset_add(&rels, mv_hash64(prev, strlen(prev)));
                    if (o->verbose)
                        fprintf(stderr, "mvembed: %s: already done, skipped (--force redoes it)\n", wi.path);
                    item_free(it);
                    continue;
                }
            }
            int added = hset_add(&rels, mv_hash64(out_rel, strlen(out_rel)));
            if (added < 0) {
                item_free(it);
                st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
                break;
            }
            if (added == 0) {
                char msg[8600];
                snprintf(msg, sizeof msg, "%s: output name %s is already used by another input of this run",
                         wi.path, out_rel);
                item_fail(it, msg);
            }
        }
        if (mv_queue_push(&R->jobs, it)) {
            item_free(it);
            break;
        }
    }
    if (r < 0 && !st && !g_interrupted)
        st = MV_ERR_IO; /* e was set by mv_walk_next */
    mv_walk_close(w);
    free(rels.slots);
    return st;
}

static void manifest_name(char *buf, size_t cap, const char *dir, int k, int n)
{
    if (n > 1)
        snprintf(buf, cap, "%s/manifest-%05d-of-%05d.jsonl", dir, k, n);
    else
        snprintf(buf, cap, "%s/manifest.jsonl", dir);
}

static mv_status run_pipeline(runner *R, int *rc, mv_err *e)
{
    const mv_run_opts *o = R->o;
    int shard_k, shard_n;
    mv_status st = resolve_shard(o, &shard_k, &shard_n, e);
    if (st)
        return st;
    if ((st = mv_mkdirs(o->out_dir, e)))
        return st;
    if (access(o->out_dir, W_OK) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: output directory is not writable: %s", o->out_dir, strerror(errno));
    char mpath[4200], merged[4200];
    manifest_name(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    manifest_name(merged, sizeof merged, o->out_dir, 0, 1);
    mv_done *done = NULL;
    if ((st = mv_done_create(&done, e)))
        return st;
    for (int i = 0; i < (shard_n > 1 ? 2 : 1); i++) {
        const char *p = i ? merged : mpath;
        if (access(p, F_OK) != 0)
            continue;
        size_t nl, nb;
        if ((st = mv_manifest_load_done(p, done, &nl, &nb, e))) {
            mv_done_free(done);
            return st;
        }
        if (o->verbose)
            fprintf(stderr, "mvembed: %s: %zu lines, %zu done so far%s\n", p, nl, mv_done_count(done),
                    nb ? " (unreadable lines ignored)" : "");
    }
    if ((st = mv_manifest_open(mpath, &R->man, e))) {
        mv_done_free(done);
        return st;
    }
    int jobs = o->jobs > 0 ? o->jobs : default_jobs();
    /* writers compress (zstd) and fsync outputs that can be tens of MB each (27B layout: 5120
     * floats per token): on a GPU machine they, not decoding, are the slow CPU stage */
    int writers = jobs / 2 < 2 ? 2 : (jobs / 2 > 8 ? 8 : jobs / 2);
    size_t qcap = (size_t)jobs * 2 + 4;
    int qfail = mv_queue_init(&R->jobs, qcap);
    qfail |= mv_queue_init(&R->ready, qcap);
    qfail |= mv_queue_init(&R->done, qcap);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    R->t0 = mv_now();
    R->progress = o->progress < 0 ? (!o->quiet && isatty(2)) : o->progress;
    R->shard_k = shard_k;
    R->shard_n = shard_n;
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
    for (; dec && nt < R->n_be && nt < 64; nt++) {
        ta[nt] = (tower_arg){.R = R, .be = R->be[nt]};
        if (pthread_create(&tw[nt], NULL, tower_main, &ta[nt]))
            break;
    }
    for (; dec && nw < writers; nw++)
        if (pthread_create(&wr[nw], NULL, writer_main, R))
            break;
    mv_err fe;
    st = (nd && nt && nw) ? feed(R, done, shard_k, shard_n, &fe)
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
    R->man = NULL;
    if (atomic_load(&R->fatal)) {
        *e = R->err;
        return MV_ERR_IO;
    }
    if (cst)
        return cst;
    long ok = atomic_load(&R->n_ok), bad = atomic_load(&R->n_err), skip = atomic_load(&R->n_skip);
    if (g_interrupted) {
        fprintf(stderr, "mvembed: interrupted; %ld done and kept (run again to resume)\n", ok);
        *rc = 128 + g_interrupted;
    } else {
        double wall = mv_now() - R->t0, busy = atomic_load(&R->tower_ns) * 1e-9;
        if (!o->quiet)
            fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs\n", ok, bad, skip, wall);
        if (o->verbose && ok && busy > 0)
            fprintf(stderr,
                    "mvembed: end to end %.2f files/s, %.0f patches/s; tower busy %.1fs (%.0f%% of the "
                    "run): %.2f files/s, %.0f patches/s while busy; %ld forwards, %.0f patches each\n",
                    ok / wall, atomic_load(&R->tokens) / wall, busy, 100 * busy / wall, ok / busy,
                    atomic_load(&R->tokens) / busy, (long)atomic_load(&R->n_forwards),
                    (double)atomic_load(&R->tokens) / (atomic_load(&R->n_forwards) ? atomic_load(&R->n_forwards) : 1));
        *rc = bad ? 2 : 0;
    }
    return MV_OK;
}

int mv_run(const mv_run_opts *o, mv_err *e)
{
    runner R;
    memset(&R, 0, sizeof R);
    pthread_mutex_init(&R.man_mu, NULL);
    pthread_mutex_init(&R.err_mu, NULL);
    pthread_mutex_init(&R.prog_mu, NULL);
    R.o = o;
    int rc = 1;
    double tl = mv_now();
    if (mv_model_load(o->model_dir, &R.m, e))
        return 1;
    if (apply_overrides(o, R.m, e))
        goto out;
    if (o->verbose)
        fprintf(stderr, "mvembed: model %s: depth %d hidden %d heads %d out %d (%.2fs), fingerprint %s\n",
                o->model_dir, R.m->cfg.depth, R.m->cfg.hidden, R.m->cfg.heads, R.m->cfg.out_hidden,
                mv_now() - tl, R.m->fingerprint);
    if (make_backends(o, &R, e))
        goto out;
    if (o->pixels) {
        rc = run_pixels(o, R.m, R.be[0], e);
        goto out;
    }
    if (run_pipeline(&R, &rc, e))
        rc = 1;
out:
    for (int i = 0; i < R.n_be; i++)
        R.be[i]->destroy(R.be[i]);
    free(R.be);
    mv_model_free(R.m);
    return rc;
}
