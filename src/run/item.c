/* item.c - one input from sniff to manifest record: the input opened once (mv_input.h) and
 * sniffed from its head, decoded from the same input (mv_image.h / mv_video.h), resized exactly
 * like HF (mv_preprocess.h; the backend normalises and patchifies the resized frames),
 * --dump-stages input images, and the manifest record of the result. Knows
 * nothing of threads, queues or backends: the pipeline (pipeline.c) calls these on whichever
 * thread it likes, one item at a time.
 */
#include "mv_item.h"

#include "mv_filehash.h"
#include "mv_image.h"
#include "mv_input.h"
#include "mv_npy.h"
#include "mv_png_write.h"
#include "mv_preprocess.h"
#include "mv_sniff.h"
#include "mv_video.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void prepared_free(mv_prepared *p)
{
    free(p->frames);
    free(p->frame_idx);
    free(p->ts);
    memset(p, 0, sizeof *p);
}

mv_item *mv_item_new(const char *path, const char *rel)
{
    mv_item *it = calloc(1, sizeof *it);
    if (!it || !(it->path = strdup(path)) || !(it->rel = strdup(rel))) {
        if (it)
            it->fd = -1;
        mv_item_free(it);
        return NULL;
    }
    it->fd = -1;
    it->t0 = mv_now();
    return it;
}

void mv_item_free(mv_item *it)
{
    if (!it)
        return;
    if (it->fd >= 0)
        close(it->fd);
    free(it->path);
    free(it->rel);
    free(it->abs);
    free(it->error_copy);
    mv_tar_meta_free(it->meta);
    prepared_free(&it->p);
    if (it->out_release)
        it->out_release(it->out_owner);
    else
        free(it->out);
    free(it);
}

void mv_item_set_out(mv_item *it, float *out, int64_t rows)
{
    if (it->out_release)
        it->out_release(it->out_owner);
    else
        free(it->out);
    it->out_release = NULL;
    it->out_owner = NULL;
    it->out = out;
    it->rows = rows;
}

void mv_item_fail(mv_item *it, const char *msg)
{
    free(it->error_copy);
    it->error_copy = strdup(msg);
    /* when even the message cannot be copied, a constant says why */
    it->error = it->error_copy ? it->error_copy : "out of memory";
    prepared_free(&it->p);
}

int64_t mv_item_patches(const mv_item *it)
{
    return (int64_t)it->p.grid[0] * it->p.grid[1] * it->p.grid[2];
}

size_t mv_item_frame_bytes(const mv_item *it)
{
    const mv_prepared *p = &it->p;
    return (size_t)p->n_frames * (p->sw ? (size_t)p->sw * p->sh : (size_t)p->rw * p->rh) * 3;
}

/* An image the backend resizes on its device (c->device_resize): its target size and grid, and
 * the decoded frame itself in p->frames (taken from img, or a copy when keep wants img too), with
 * p->sw set; p->sw stays 0 when the CPU is to resize it after all (over 4x the target's pixels:
 * the staging and the upload stay bounded). */
static mv_status keep_decoded(const mv_item_ctx *c, mv_prepared *p, mv_image *img, int keep, mv_err *e)
{
    mv_status st = mv_preprocess_image_size(img, &c->m->pp, p->grid, &p->rw, &p->rh, e);
    size_t n = (size_t)img->width * img->height;
    if (st || n > 4 * (size_t)p->rw * p->rh)
        return st;
    if (!(p->frames = keep ? malloc(n * 3) : img->rgb))
        return mv_fail(e, MV_ERR_NOMEM, "out of memory for a %dx%d frame", img->width, img->height);
    if (keep)
        memcpy(p->frames, img->rgb, n * 3);
    else
        img->rgb = NULL;
    p->sw = img->width;
    p->sh = img->height;
    return MV_OK;
}

/* keep: NULL, or where the decoded image goes instead of being freed (--dump-stages) */
static mv_status prepare_image(const mv_item_ctx *c, mv_item *it, mv_input *in, mv_image *keep, mv_err *e)
{
    mv_prepared *p = &it->p;
    mv_image img;
    double t = mv_now();
    mv_status st = mv_image_decode_input(in, c->max_decode_pixels, c->timeout, &img, e);
    it->t_decode = mv_now() - t;
    if (st)
        return st;
    p->kind = "image";
    p->width = img.width;
    p->height = img.height;
    t = mv_now();
    st = c->device_resize ? keep_decoded(c, p, &img, keep != NULL, e) : MV_OK;
    /* no pixel_values here: the backend normalises and patchifies the frame (mv_forward_req.frames) */
    if (!st && !p->sw)
        st = mv_preprocess_image(&img, &c->m->pp, NULL, p->grid, &p->frames, &p->rw, &p->rh, e);
    it->t_preprocess = mv_now() - t;
    if (!st)
        p->n_frames = 1;
    if (keep)
        *keep = img;
    else
        mv_image_free(&img);
    if (st)
        return mv_fail_prefix(e, st, "%s", in->name);
    return MV_OK;
}

/* mv_frame_reader over an open video: frames [first, first + count) of the sampled indices */
typedef struct {
    mv_video *v;
    const int64_t *idx;
    double *ts;
} video_reader;

static mv_status read_frames(void *ud, int first, int count, uint8_t **frames, mv_err *e)
{
    video_reader *r = ud;
    return mv_video_read(r->v, r->idx + first, count, frames, r->ts + first, e);
}

static mv_status prepare_video(const mv_item_ctx *c, mv_item *it, mv_input *in, mv_err *e)
{
    const char *path = in->name;
    mv_prepared *p = &it->p;
    const mv_preproc_config *pp = &c->m->pp;
    mv_video *v;
    mv_video_info info;
    double t = mv_now();
    mv_video_limits lim = {.timeout_s = c->timeout, .max_pixels = c->max_decode_pixels,
                           .threads = c->video_threads};
    mv_status st = mv_video_open_input(in, &lim, &v, &info, e);
    if (st)
        return st;
    p->kind = "video";
    p->width = info.width;
    p->height = info.height;
    p->fps = info.fps;
    p->duration = info.duration;
    p->rotation = info.rotation;
    int n;
    if (c->num_frames > 0) {
        n = c->num_frames;
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
    if (!p->frame_idx || !p->ts) {
        mv_video_close(v);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    mv_video_indices(info.total_frames, n, p->frame_idx);
    p->n_idx = n;
    video_reader vr = {v, p->frame_idx, p->ts};
    it->t_decode = mv_now() - t;
    t = mv_now();
    /* decoding happens inside, chunk by chunk: its time counts as preprocessing here. Where the
     * backend resizes (and the frames are within 4x the target's pixels), the frames stay decoded. */
    int chunk = mv_video_frames_per_read(v);
    st = c->device_resize ? mv_preprocess_video_decoded(read_frames, &vr, chunk, n, info.width, info.height, pp,
                                                        p->grid, &p->frames, &p->rw, &p->rh, e)
                          : MV_OK;
    if (!st && p->frames) {
        p->sw = info.width;
        p->sh = info.height;
    } else if (!st) {
        st = mv_preprocess_video(read_frames, &vr, chunk, n, info.width, info.height, pp, NULL, p->grid,
                                 &p->frames, &p->rw, &p->rh, e);
    }
    mv_video_close(v);
    it->t_preprocess = mv_now() - t;
    if (st && strncmp(e->msg, path, strlen(path))) /* decoding errors name the file already */
        return mv_fail_prefix(e, st, "%s", path);
    if (st)
        return st;
    p->n_frames = n;
    return MV_OK;
}

/* 1 for a file name --dump-stages writes: input.png, input_NNN.png, decoded.png, the tower's
 * stages (<stage>.npy, block_NN.npy). */
static int dump_name(const char *n)
{
    static const char *const fixed[] = {"input.png", "decoded.png", "pixel_values.npy", "patch_embed.npy",
                                        "embed.npy", "merger_norm.npy", "merger_fc1.npy", "output.npy"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (!strcmp(n, fixed[i]))
            return 1;
    const char *ext = !strncmp(n, "input_", 6) ? ".png" : !strncmp(n, "block_", 6) ? ".npy" : NULL;
    size_t d = ext ? strspn(n + 6, "0123456789") : 0;
    return d > 0 && !strcmp(n + 6 + d, ext);
}

/* Removes what an earlier --dump-stages run left in an input's directory (its files only), so
 * that what is there afterwards is this run's: fewer frames or blocks leave no stale ones. */
static mv_status dump_clear(const char *dir, mv_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT || errno == ENOTDIR ? MV_OK
               : mv_fail(e, MV_ERR_IO, "%s: cannot open the dump directory: %s", dir, strerror(errno));
    struct dirent *de;
    mv_status st = MV_OK;
    while (!st && (de = readdir(d)))
        if (dump_name(de->d_name) && unlinkat(dirfd(d), de->d_name, 0) && errno != ENOENT)
            st = mv_fail(e, MV_ERR_IO, "%s/%s: cannot remove an earlier dump: %s", dir, de->d_name,
                         strerror(errno));
    closedir(d);
    return st;
}

static mv_status dump_inputs(const char *dir, const mv_prepared *p, mv_err *e)
{
    /* resized on the device (p->sw): each input PNG from the CPU's resize, the same bytes */
    uint8_t *rs = p->sw ? malloc((size_t)p->rw * p->rh * 3) : NULL;
    if (p->sw && !rs)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for the input PNGs", dir);
    for (int i = 0; i < p->n_frames; i++) {
        char path[4300];
        if (p->n_frames == 1 && !strcmp(p->kind, "image"))
            snprintf(path, sizeof path, "%s/input.png", dir);
        else
            snprintf(path, sizeof path, "%s/input_%03d.png", dir, i);
        const uint8_t *f = p->frames + (size_t)i * (p->sw ? (size_t)p->sw * p->sh : (size_t)p->rw * p->rh) * 3;
        mv_status st = p->sw && mv_resize_bicubic_aa_u8(f, p->sw, p->sh, rs, p->rw, p->rh)
                           ? mv_fail(e, MV_ERR_NOMEM, "%s: out of memory resizing %s", dir, path)
                           : mv_png_write_rgb(path, p->sw ? rs : f, p->rw, p->rh, e);
        if (st) {
            free(rs);
            return st;
        }
    }
    free(rs);
    return MV_OK;
}

/* Notes the size and mtime of the file just opened (in's descriptor: the bytes decoded are those
 * described) and, with c->input_hash, its XXH64. -1 when the input failed (read error). */
static int note_file(const mv_item_ctx *c, mv_item *it, const mv_input *in)
{
    struct stat sb;
    if (fstat(in->fd, &sb) != 0)
        return 0; /* no record of it: resume then does not compare */
    it->has_stat = 1;
    it->in_bytes = (int64_t)sb.st_size;
    it->in_mtime_ns = mv_time_ns(sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    it->in_mtime_s = sb.st_mtim.tv_sec;
    if (!c->input_hash)
        return 0;
    if (mv_filehash_fd(in->fd, &it->in_xxh64) != 0) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s: read error while hashing it: %s", it->path, strerror(errno));
        mv_item_fail(it, msg);
        return -1;
    }
    it->has_xxh64 = 1;
    return 0;
}

mv_status mv_item_prepare(const mv_item_ctx *c, mv_item *it, mv_err *fatal)
{
    char list[128];
    mv_input in;
    mv_err e;
    mv_image decoded = {0};
    /* a tar member's bytes are in it->fd (a memfd) or the stream it->io, a file's at it->path */
    mv_status st = it->io ? mv_input_open_io(&in, it->io, it->io_user, it->path, &e)
                 : it->fd >= 0 ? mv_input_open_fd(&in, it->fd, it->path, &e)
                               : mv_input_open_path(&in, it->path, &e);
    int oerr = errno;
    if (st && (oerr == EMFILE || oerr == ENFILE)) /* the process's limit, not the input's fault */
        return mv_fail(fatal, MV_ERR_IO, "%s", e.msg);
    if (st) {
        mv_item_fail(it, e.msg);
        return MV_OK;
    }
    if (it->fd < 0 && note_file(c, it, &in)) {
        mv_input_close(&in);
        return MV_OK;
    }
    size_t nh;
    const uint8_t *head = mv_input_head(&in, &nh);
    if (nh == 0) {
        mv_fail(&e, MV_ERR_FORMAT, "%s: empty file", it->path);
        mv_input_close(&in);
        mv_item_fail(it, e.msg);
        return MV_OK;
    }
    switch (mv_sniff(head, nh)) {
    case MV_MEDIA_IMAGE:
        it->kind = "image";
        st = prepare_image(c, it, &in, c->dump_dir ? &decoded : NULL, &e);
        break;
    case MV_MEDIA_VIDEO:
        it->kind = "video";
        st = prepare_video(c, it, &in, &e);
        break;
    case MV_MEDIA_IMAGE_OTHER:
        it->kind = "image";
        st = mv_fail(&e, MV_ERR_UNSUPPORTED, "%s: %s images are not supported (%s are)", it->path,
                     mv_sniff_format(head, nh), mv_sniff_image_formats(", ", list, sizeof list));
        break;
    default:
        st = mv_fail(&e, MV_ERR_FORMAT, "%s: not an image or video (unrecognised file type)", it->path);
        break;
    }
    mv_input_close(&in);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/%s", c->dump_dir ? c->dump_dir : "", it->rel);
    if (c->dump_dir && dump_clear(dir, fatal)) {
        mv_image_free(&decoded);
        return MV_ERR_IO;
    }
    if (mv_short_of_room(st, 0)) {
        mv_image_free(&decoded); /* the run's shortage, not the input's: fatal */
        return mv_fail(fatal, MV_ERR_NOROOM, "%s", e.msg);
    }
    if (st) {
        mv_image_free(&decoded);
        mv_item_fail(it, e.msg);
        return MV_OK;
    }
    if (c->dump_dir) {
        snprintf(path, sizeof path, "%s/decoded.png", dir);
        if (!(st = mv_mkdirs(dir, fatal)) && !(st = dump_inputs(dir, &it->p, fatal)) && decoded.rgb)
            st = mv_png_write_rgb(path, decoded.rgb, decoded.width, decoded.height, fatal);
        mv_image_free(&decoded);
        if (st)
            return st;
    }
    return MV_OK;
}

void mv_item_record(const mv_item *it, const mv_vision_config *c, mv_dtype out_dtype,
                    const char *model_fingerprint, const char *out_rel, mv_record *r)
{
    memset(r, 0, sizeof *r);
    mv_record_stamp(r);
    r->input = it->path;
    r->input_abs = it->abs && strcmp(it->abs, it->path) ? it->abs : NULL; /* none: input is it */
    r->kind = it->kind;
    r->model = model_fingerprint;
    r->has_seconds = 1;
    r->seconds = mv_now() - it->t0;
    if (it->meta) {
        r->input_key = it->meta->key;
        r->json = it->meta->json;
        r->txt = it->meta->txt;
        r->txt_len = it->meta->txt_len;
        r->cls = it->meta->cls;
        r->cls_len = it->meta->cls_len;
        r->has_cls_int = it->meta->cls_is_int;
        r->cls_int = it->meta->cls_int;
    }
    if (it->error) {
        r->ok = 0;
        r->error = it->error;
        return;
    }
    const mv_prepared *p = &it->p;
    r->ok = 1;
    r->output = out_rel;
    r->has_size = 1;
    r->width = p->width;
    r->height = p->height;
    r->has_resized = 1;
    r->resized[0] = (int64_t)p->grid[2] * c->patch;
    r->resized[1] = (int64_t)p->grid[1] * c->patch;
    r->has_grid = 1;
    for (int i = 0; i < 3; i++)
        r->grid_thw[i] = p->grid[i];
    r->has_shape = 1;
    r->shape[0] = it->rows;
    r->shape[1] = c->out_hidden;
    /* the type this output is stored as (--out-dtype auto: its writer's choice) */
    r->dtype = out_dtype == MV_DT_F16 ? "f16" : out_dtype == MV_DT_BF16 ? "bfloat16" : "f32";
    r->has_input_stat = it->has_stat;
    r->input_bytes = it->in_bytes;
    r->input_mtime_ns = it->in_mtime_ns;
    r->input_mtime_s = it->in_mtime_s;
    r->has_input_xxh64 = it->has_xxh64;
    r->input_xxh64 = it->in_xxh64;
    if (p->frame_idx) {
        r->frame_indices = p->frame_idx;
        r->n_frame_indices = p->n_idx;
        r->timestamps = p->ts;
        r->n_timestamps = p->n_idx;
        r->has_fps = 1;
        r->fps = p->fps;
        r->has_duration = 1;
        r->duration = p->duration;
        r->has_rotation = 1;
        r->rotation = p->rotation;
    }
}

mv_status mv_dump_stage(void *ud, const char *stage, const float *data, int64_t rows, int64_t cols,
                        mv_err *e)
{
    mv_dump_ctx *d = ud;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.npy", d->dir, stage);
    int64_t shape[2] = {rows, cols};
    return mv_npy_save(path, MV_DT_F32, 2, shape, data, e);
}
