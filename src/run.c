/* run.c - the batch driver: for each input the walker yields, sniff its type, decode, preprocess
 * exactly like HF's processors, run the tower (one attention segment per image / temporal group),
 * write OUT/<rel>.npy.zst atomically and append a manifest line. A bad input gets an error line and
 * the batch goes on; only fatal problems (model, OUT unwritable, device failure) stop it.
 * Also the tower-only entry (--pixels/--grid) used for parity work. */
#include "mv_run.h"

#include "mv_image.h"
#include "mv_manifest.h"
#include "mv_output.h"
#include "mv_preprocess.h"
#include "mv_video.h"
#include "mv_walk.h"

#include <errno.h>
#include <signal.h>
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

/* A set of 64-bit hashes (open addressing) of output names written in this run. */
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
    const mv_run_opts *o;
    mv_model *m;
    mv_backend *be;
    mv_manifest *man;
    mv_done *done;
    hset rels;
    long n_ok, n_err, n_skip;
    long long tokens;
    double t0, last_progress;
    int progress;
    /* stage dumping */
    char dump_base[4096];
} runner;

typedef struct {
    /* filled by preparation */
    float *pixels;
    int32_t grid[3];
    uint8_t *resized; /* [n_frames][rh][rw][3], for input.png */
    int n_frames, rw, rh;
    /* manifest facts */
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

static mv_status prepare_image(runner *R, const char *path, prepared *p, mv_err *e)
{
    mv_image img;
    mv_status st = mv_image_decode(path, R->o->max_decode_pixels, &img, e);
    if (st)
        return st;
    p->kind = "image";
    p->width = img.width;
    p->height = img.height;
    st = mv_preprocess_image(&img, &R->m->pp, &p->pixels, p->grid, R->o->dump_dir ? &p->resized : NULL,
                             &p->rw, &p->rh, e);
    if (!st && R->o->dump_dir)
        p->n_frames = 1;
    mv_image_free(&img);
    if (st)
        return mv_fail_prefix(e, st, "%s", path);
    return MV_OK;
}

static mv_status prepare_video(runner *R, const char *path, prepared *p, mv_err *e)
{
    const mv_preproc_config *pp = &R->m->pp;
    mv_video *v;
    mv_video_info info;
    mv_status st = mv_video_open_limited(path, R->o->timeout, &v, &info, e);
    if (st)
        return st;
    p->kind = "video";
    p->width = info.width;
    p->height = info.height;
    p->fps = info.fps;
    p->duration = info.duration;
    p->rotation = info.rotation;
    int n;
    if (R->o->num_frames > 0) {
        n = R->o->num_frames;
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
    st = mv_video_read(v, p->frame_idx, n, &frames, p->ts, e);
    mv_video_close(v);
    if (st)
        return st;
    int oh, ow, f = pp->patch * pp->merge;
    st = mv_smart_resize_video(n, info.height, info.width, f, pp->temporal, pp->video_min_pixels,
                               pp->video_max_pixels, &oh, &ow, e);
    if (st) {
        free(frames);
        return mv_fail_prefix(e, st, "%s", path);
    }
    size_t fsz = (size_t)ow * oh * 3, isz = (size_t)info.width * info.height * 3;
    rs = malloc(fsz * n);
    const uint8_t **fp = malloc(n * sizeof *fp);
    if (!rs || !fp) {
        free(frames);
        free(rs);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < n && !st; i++) {
        st = mv_resize_bicubic_aa_u8(frames + isz * i, info.width, info.height, rs + fsz * i, ow, oh);
        fp[i] = rs + fsz * i;
    }
    free(frames);
    if (st) {
        free(rs);
        free(fp);
        return mv_fail(e, st, "%s: out of memory resizing frames", path);
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
    if (R->o->dump_dir) {
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
    runner *R;
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
        char path[4200];
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

static void progress(runner *R, int final)
{
    if (!R->progress)
        return;
    double now = mv_now();
    if (!final && now - R->last_progress < 0.5)
        return;
    R->last_progress = now;
    double dt = now - R->t0 > 1e-9 ? now - R->t0 : 1e-9;
    long done = R->n_ok + R->n_err;
    fprintf(stderr, "\rmvembed: %ld done (%ld failed, %ld skipped)  %.2f files/s  %.0f tokens/s   %s",
            done, R->n_err, R->n_skip, done / dt, R->tokens / dt, final ? "\n" : "");
    fflush(stderr);
}

static void report_error(runner *R, const char *msg)
{
    if (R->progress)
        fprintf(stderr, "\r\033[K");
    fprintf(stderr, "mvembed: %s\n", msg);
}

/* Writes an error line (and stderr). Returns MV_OK or a fatal manifest error. */
static mv_status record_error(runner *R, const char *input, const char *msg, const char *kind,
                              double secs, mv_err *e)
{
    R->n_err++;
    report_error(R, msg);
    mv_record r = {0};
    r.input = input;
    r.ok = 0;
    r.error = msg;
    r.kind = kind;
    r.model = R->m->fingerprint;
    r.has_seconds = 1;
    r.seconds = secs;
    return mv_manifest_append(R->man, &r, e);
}

/* Processes one input. Returns MV_OK (also when the input failed and was recorded) or a fatal error. */
static mv_status process(runner *R, const char *path, const char *rel, mv_err *fatal)
{
    const mv_run_opts *o = R->o;
    double t = mv_now();
    char out_rel[4200];
    snprintf(out_rel, sizeof out_rel, "%s.npy.zst", rel);
    if (!o->force && R->done) {
        const char *prev = mv_done_lookup(R->done, path);
        if (prev) {
            char full[8400];
            struct stat sb;
            snprintf(full, sizeof full, "%s/%s", o->out_dir, prev);
            if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode)) {
                R->n_skip++;
                hset_add(&R->rels, mv_hash64(prev, strlen(prev)));
                if (o->verbose)
                    fprintf(stderr, "mvembed: %s: already done, skipped (--force redoes it)\n", path);
                return MV_OK;
            }
        }
    }
    int added = hset_add(&R->rels, mv_hash64(out_rel, strlen(out_rel)));
    if (added < 0)
        return mv_fail(fatal, MV_ERR_NOMEM, "out of memory");
    mv_err e;
    if (added == 0) {
        snprintf(e.msg, sizeof e.msg, "%s: output name %s is already used by another input of this run",
                 path, out_rel);
        return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
    }
    uint8_t head[MV_SNIFF_BYTES];
    size_t nh = 0;
    {
        struct stat sb;
        if (stat(path, &sb) != 0) {
            snprintf(e.msg, sizeof e.msg, "%s: %s", path, strerror(errno));
            return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
        }
        if (!S_ISREG(sb.st_mode)) {
            snprintf(e.msg, sizeof e.msg, "%s: not a regular file", path);
            return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
        }
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(e.msg, sizeof e.msg, "%s: %s", path, strerror(errno));
            return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
        }
        nh = fread(head, 1, sizeof head, f);
        int rerr = ferror(f);
        fclose(f);
        if (rerr) {
            snprintf(e.msg, sizeof e.msg, "%s: read error", path);
            return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
        }
        if (nh == 0) {
            snprintf(e.msg, sizeof e.msg, "%s: empty file", path);
            return record_error(R, path, e.msg, NULL, mv_now() - t, fatal);
        }
    }
    mv_media_kind kind = mv_sniff(head, nh);
    prepared p = {0};
    mv_status st;
    switch (kind) {
    case MV_MEDIA_JPEG:
    case MV_MEDIA_PNG:
    case MV_MEDIA_WEBP:
        st = prepare_image(R, path, &p, &e);
        break;
    case MV_MEDIA_VIDEO:
        st = prepare_video(R, path, &p, &e);
        break;
    case MV_MEDIA_IMAGE_OTHER:
        st = mv_fail(&e, MV_ERR_UNSUPPORTED, "%s: %s images are not supported (JPEG, PNG, WebP are)",
                     path, mv_sniff_format(head, nh));
        break;
    default:
        st = mv_fail(&e, MV_ERR_FORMAT, "%s: not an image or video (unrecognised file type)", path);
        break;
    }
    const char *kname = kind == MV_MEDIA_VIDEO ? "video" : (kind == MV_MEDIA_UNKNOWN ? NULL : "image");
    if (st) {
        prepared_free(&p);
        return record_error(R, path, e.msg, kname, mv_now() - t, fatal);
    }
    const mv_vision_config *c = &R->m->cfg;
    int64_t n_patches = (int64_t)p.grid[0] * p.grid[1] * p.grid[2];
    int64_t rows = n_patches / (c->merge * c->merge);
    float *out = malloc(rows * c->out_hidden * sizeof(float));
    if (!out) {
        prepared_free(&p);
        return mv_fail(fatal, MV_ERR_NOMEM, "out of memory");
    }
    dump_ctx dc = {R, ""};
    if (o->dump_dir) {
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", o->dump_dir, rel);
        if ((st = mv_mkdirs(dc.dir, fatal)) || (st = dump_inputs(dc.dir, &p, fatal))) {
            free(out);
            prepared_free(&p);
            return st;
        }
    }
    st = R->be->forward(R->be, p.pixels, p.grid, 1, out, o->dump_dir ? dump_stage : NULL, &dc, &e);
    if (st) {
        free(out);
        prepared_free(&p);
        if (st == MV_ERR_DEVICE)
            return mv_fail(fatal, st, "%s", e.msg);
        return record_error(R, path, e.msg, kname, mv_now() - t, fatal);
    }
    char final_path[8400];
    st = mv_output_write(o->out_dir, rel, o->out_dtype, rows, c->out_hidden, out, o->zstd_level,
                         final_path, sizeof final_path, &e);
    free(out);
    if (st) {
        prepared_free(&p);
        /* a full or read-only disk fails every later write too: stop the batch */
        if (st == MV_ERR_IO)
            return mv_fail(fatal, st, "%s", e.msg);
        return record_error(R, path, e.msg, kname, mv_now() - t, fatal);
    }
    mv_record r = {0};
    r.input = path;
    r.output = out_rel;
    r.ok = 1;
    r.kind = p.kind;
    r.has_size = 1;
    r.width = p.width;
    r.height = p.height;
    r.has_resized = 1;
    r.resized[0] = (int64_t)p.grid[2] * c->patch;
    r.resized[1] = (int64_t)p.grid[1] * c->patch;
    r.has_grid = 1;
    for (int i = 0; i < 3; i++)
        r.grid_thw[i] = p.grid[i];
    r.has_shape = 1;
    r.shape[0] = rows;
    r.shape[1] = c->out_hidden;
    r.dtype = o->out_dtype == MV_DT_F16 ? "f16" : "f32";
    r.model = R->m->fingerprint;
    if (p.frame_idx) {
        r.frame_indices = p.frame_idx;
        r.n_frame_indices = p.n_idx;
        r.timestamps = p.ts;
        r.n_timestamps = p.n_idx;
        r.has_fps = 1;
        r.fps = p.fps;
        r.has_duration = 1;
        r.duration = p.duration;
        r.has_rotation = 1;
        r.rotation = p.rotation;
    }
    r.has_seconds = 1;
    r.seconds = mv_now() - t;
    st = mv_manifest_append(R->man, &r, fatal);
    prepared_free(&p);
    if (st)
        return st;
    R->n_ok++;
    R->tokens += n_patches;
    if (o->verbose)
        fprintf(stderr, "mvembed: %s -> %s [%lld x %d] %.3fs\n", path, out_rel, (long long)rows,
                c->out_hidden, r.seconds);
    return MV_OK;
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

static mv_status make_backend(const mv_run_opts *o, const mv_model *m, mv_backend **be, mv_err *e)
{
    mv_status st;
    if (o->device == MV_DEV_CUDA)
        return mv_backend_cuda_create(m, &o->bopts, be, e);
    if (o->device == MV_DEV_AUTO && mv_cuda_available()) {
        st = mv_backend_cuda_create(m, &o->bopts, be, e);
        if (st == MV_OK) {
            if (!o->quiet)
                fprintf(stderr, "mvembed: using the CUDA backend\n");
            return MV_OK;
        }
        if (!o->quiet)
            fprintf(stderr, "mvembed: CUDA backend unavailable (%s); using the CPU\n", e->msg);
    } else if (o->device == MV_DEV_AUTO && !o->quiet) {
        fprintf(stderr, "mvembed: no usable GPU; using the CPU backend\n");
    }
    mv_backend_opts bo = o->bopts;
    return mv_backend_cpu_create(m, &bo, be, e);
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
    dump_ctx dc = {NULL, ""};
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

int mv_run(const mv_run_opts *o, mv_err *e)
{
    mv_model *m = NULL;
    mv_backend *be = NULL;
    int rc = 1;
    runner R = {0};
    mv_walk *w = NULL;
    double tl = mv_now();
    if (mv_model_load(o->model_dir, &m, e))
        return 1;
    if (apply_overrides(o, m, e))
        goto out;
    if (o->verbose)
        fprintf(stderr, "mvembed: model %s: depth %d hidden %d heads %d out %d (%.2fs), fingerprint %s\n",
                o->model_dir, m->cfg.depth, m->cfg.hidden, m->cfg.heads, m->cfg.out_hidden,
                mv_now() - tl, m->fingerprint);
    if (make_backend(o, m, &be, e))
        goto out;
    if (o->pixels) {
        rc = run_pixels(o, m, be, e);
        goto out;
    }
    if (mv_mkdirs(o->out_dir, e))
        goto out;
    if (access(o->out_dir, W_OK) != 0) {
        mv_fail(e, MV_ERR_IO, "%s: output directory is not writable: %s", o->out_dir, strerror(errno));
        goto out;
    }
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/manifest.jsonl", o->out_dir);
    if (mv_done_create(&R.done, e))
        goto out;
    if (access(mpath, F_OK) == 0) {
        size_t nl, nb;
        if (mv_manifest_load_done(mpath, R.done, &nl, &nb, e))
            goto out;
        if (o->verbose)
            fprintf(stderr, "mvembed: %s: %zu lines, %zu done%s\n", mpath, nl, mv_done_count(R.done),
                    nb ? " (some unreadable lines ignored)" : "");
    }
    if (mv_manifest_open(mpath, &R.man, e))
        goto out;
    mv_walk_opts wo = {o->null_sep, o->all_files, o->hidden};
    if (mv_walk_open(o->paths, o->n_paths, &wo, stdin, &w, e))
        goto out;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    R.o = o;
    R.m = m;
    R.be = be;
    R.t0 = mv_now();
    R.progress = o->progress < 0 ? (!o->quiet && isatty(2)) : o->progress;
    mv_walk_item it;
    int r = 0;
    while (!g_interrupted && (r = mv_walk_next(w, &it, e)) > 0) {
        if (it.error) {
            mv_err fe;
            if (record_error(&R, it.path, it.error, NULL, 0, &fe)) {
                *e = fe;
                goto out;
            }
            continue;
        }
        if (process(&R, it.path, it.rel, e))
            goto out;
        progress(&R, 0);
    }
    if (r < 0 && !g_interrupted)
        goto out;
    progress(&R, 1);
    if (mv_manifest_close(R.man, e)) {
        R.man = NULL;
        goto out;
    }
    R.man = NULL;
    if (g_interrupted) {
        fprintf(stderr, "mvembed: interrupted; %ld done, finished work is kept (rerun to resume)\n",
                R.n_ok);
        rc = 128 + g_interrupted;
    } else {
        if (!o->quiet)
            fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs\n", R.n_ok, R.n_err,
                    R.n_skip, mv_now() - R.t0);
        rc = R.n_err ? 2 : 0;
    }
out:
    if (R.man) {
        mv_err ce;
        mv_manifest_close(R.man, &ce);
    }
    if (w)
        mv_walk_close(w);
    if (R.done)
        mv_done_free(R.done);
    free(R.rels.slots);
    if (be)
        be->destroy(be);
    mv_model_free(m);
    return rc;
}
