/* model_config.c - the model directory's JSON files (see model_int.h): config.json's vision
 * parameters (under "vision_config", or at top level for a standalone vision model, with
 * Qwen3_5VisionConfig's class defaults), preprocessor_config.json and
 * video_preprocessor_config.json (with the released checkpoints' values where a file or field is
 * absent). Every field is checked for its type and range; a value that would make outputs
 * non-finite or meaningless (image_std near 0, a non-finite mean) is a model error naming the file
 * and field. Not here: the weights (model.c), run-time overrides of these values (src/run/run.c).
 */
#include "model_int.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mv_preproc_defaults(mv_preproc_config *pp)
{
    /* Values of the released Qwen3.5 checkpoints' preprocessor files (docs/hf-reference.md §1.2). */
    pp->min_pixels = 65536;
    pp->max_pixels = 16777216;
    for (int c = 0; c < 3; c++) {
        pp->mean[c] = 0.5f;
        pp->std[c] = 0.5f;
    }
    pp->rescale = 1.0 / 255.0;
    pp->patch = 16;
    pp->merge = 2;
    pp->temporal = 2;
    pp->video_min_pixels = 4096;
    pp->video_max_pixels = 25165824;
    pp->fps = 2.0;
    pp->min_frames = 4;
    pp->max_frames = 768;
    pp->video_frame_cap = 0; /* transformers 5.17 leaves cap_pixels_per_frame unset: uncapped */
    pp->video_frame_cap_src = MV_CAP_FROM_DEFAULT;
    pp->max_video_tokens = 768;
}

json_t *mv_model_read_json(const char *path, mv_err *e, mv_status *st)
{
    /* a FIFO or device would block json_load_file (or never end): only regular files */
    int fd;
    if ((*st = mv_open_regular(path, &fd, e)) != MV_OK)
        return NULL;
    json_error_t je;
    json_t *j = json_loadfd(fd, 0, &je);
    close(fd);
    if (!j) {
        *st = mv_fail(e, MV_ERR_MODEL, "%s: bad JSON at line %d: %s", path, je.line,
                      mv_printable(je.text));
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *st = mv_fail(e, MV_ERR_MODEL, "%s: bad JSON: not an object", path);
        return NULL;
    }
    *st = MV_OK;
    return j;
}

/* Reads an integer field; absent -> default; wrong type or out of range -> error. */
static mv_status get_int(json_t *o, const char *key, const char *alias, int def, int lo, int hi,
                         int *out, const char *path, mv_err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v && alias)
        v = json_object_get(o, alias);
    if (!v || json_is_null(v)) {
        *out = def;
        return MV_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mv_fail(e, MV_ERR_MODEL, "%s: \"%s\" must be an integer in [%d, %d]", path, key, lo, hi);
    *out = (int)json_integer_value(v);
    return MV_OK;
}

mv_status mv_model_read_config(const char *dir, mv_vision_config *c, mv_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, R_OK) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return mv_fail(e, MV_ERR_MODEL, "%s: missing (is '%s' a model directory?)", path, dir);
        return mv_fail(e, MV_ERR_MODEL, "%s: cannot read: %s", path, strerror(errno));
    }
    mv_status st;
    json_t *root = mv_model_read_json(path, e, &st);
    if (!root)
        return st;
    json_t *v = json_object_get(root, "vision_config");
    if (v && !json_is_object(v)) {
        json_decref(root);
        return mv_fail(e, MV_ERR_MODEL, "%s: \"vision_config\" is not an object", path);
    }
    if (!v)
        v = root;
    /* Defaults are Qwen3_5VisionConfig's class defaults (transformers 5.17). */
    if ((st = get_int(v, "depth", NULL, 27, 1, 1000, &c->depth, path, e)) ||
        (st = get_int(v, "hidden_size", NULL, 1152, 1, 1 << 16, &c->hidden, path, e)) ||
        (st = get_int(v, "num_heads", "num_attention_heads", 16, 1, 1024, &c->heads, path, e)) ||
        (st = get_int(v, "intermediate_size", NULL, 4304, 1, 1 << 18, &c->inter, path, e)) ||
        (st = get_int(v, "out_hidden_size", NULL, 3584, 1, 1 << 18, &c->out_hidden, path, e)) ||
        (st = get_int(v, "patch_size", NULL, 16, 1, 1024, &c->patch, path, e)) ||
        (st = get_int(v, "spatial_merge_size", NULL, 2, 1, 16, &c->merge, path, e)) ||
        (st = get_int(v, "temporal_patch_size", NULL, 2, 1, 16, &c->temporal, path, e)) ||
        (st = get_int(v, "in_channels", NULL, 3, 3, 3, &c->in_ch, path, e)) ||
        (st = get_int(v, "num_position_embeddings", NULL, 2304, 4, 1 << 24, &c->num_pos, path, e))) {
        json_decref(root);
        return st;
    }
    const char *act = "gelu_pytorch_tanh";
    json_t *ja = json_object_get(v, "hidden_act");
    if (ja) {
        if (!json_is_string(ja)) {
            json_decref(root);
            return mv_fail(e, MV_ERR_MODEL, "%s: \"hidden_act\" must be a string", path);
        }
        act = json_string_value(ja);
    }
    if (!strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_new") || !strcmp(act, "gelu_fast"))
        c->act = MV_ACT_GELU_TANH;
    else if (!strcmp(act, "gelu"))
        c->act = MV_ACT_GELU_ERF;
    else if (!strcmp(act, "silu"))
        c->act = MV_ACT_SILU;
    else {
        char esc[256]; /* the value comes from the file: no raw control bytes in the message */
        mv_status s = mv_fail(e, MV_ERR_MODEL, "%s: unsupported hidden_act \"%s\"", path,
                              mv_escape(act, esc, sizeof esc));
        json_decref(root);
        return s;
    }
    c->rope_theta = 10000.0;
    json_t *rp = json_object_get(v, "rope_parameters");
    json_t *th = rp && json_is_object(rp) ? json_object_get(rp, "rope_theta") : NULL;
    if (!th)
        th = json_object_get(v, "rope_theta");
    if (th) {
        if (!json_is_number(th) || json_number_value(th) <= 1.0) {
            json_decref(root);
            return mv_fail(e, MV_ERR_MODEL, "%s: \"rope_theta\" must be a number > 1", path);
        }
        c->rope_theta = json_number_value(th);
    }
    json_decref(root);
    if (c->hidden % c->heads)
        return mv_fail(e, MV_ERR_MODEL, "%s: hidden_size %d is not divisible by num_heads %d", path,
                       c->hidden, c->heads);
    c->head_dim = c->hidden / c->heads;
    if (c->head_dim % 4)
        return mv_fail(e, MV_ERR_MODEL, "%s: head_dim %d must be a multiple of 4 for 2D rope", path,
                       c->head_dim);
    c->pos_side = (int)sqrt((double)c->num_pos);
    if (c->pos_side * c->pos_side != c->num_pos)
        return mv_fail(e, MV_ERR_MODEL, "%s: num_position_embeddings %d is not a square", path,
                       c->num_pos);
    c->ln_eps = 1e-6f;
    c->patch_dim = c->in_ch * c->temporal * c->patch * c->patch;
    return MV_OK;
}

static mv_status get_num(json_t *o, const char *key, double *out, const char *path, mv_err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return MV_OK;
    if (!json_is_number(v))
        return mv_fail(e, MV_ERR_MODEL, "%s: \"%s\" must be a number", path, key);
    *out = json_number_value(v);
    return MV_OK;
}

/* Reads an integral number in [lo, hi] (JSON files often write 2.0 for 2). */
static mv_status get_whole(json_t *o, const char *key, double lo, double hi, long long *out,
                           const char *path, mv_err *e)
{
    double v = (double)*out;
    mv_status st = get_num(o, key, &v, path, e);
    if (st)
        return st;
    if (!(v >= lo && v <= hi) || v != floor(v))
        return mv_fail(e, MV_ERR_MODEL, "%s: \"%s\" must be a whole number in [%.0f, %.0f]", path, key,
                       lo, hi);
    *out = (long long)v;
    return MV_OK;
}

static mv_status get_size(json_t *o, long long *minp, long long *maxp, const char *path, mv_err *e)
{
    double lo = (double)*minp, hi = (double)*maxp;
    mv_status st;
    json_t *sz = json_object_get(o, "size");
    if (sz && json_is_object(sz)) {
        if ((st = get_num(sz, "shortest_edge", &lo, path, e)) || (st = get_num(sz, "longest_edge", &hi, path, e)))
            return st;
    }
    if ((st = get_num(o, "min_pixels", &lo, path, e)) || (st = get_num(o, "max_pixels", &hi, path, e)))
        return st;
    if (!(lo >= 1 && hi >= lo && hi <= 1e15))
        return mv_fail(e, MV_ERR_MODEL, "%s: pixel budget [%g, %g] is invalid", path, lo, hi);
    *minp = (long long)lo;
    *maxp = (long long)hi;
    return MV_OK;
}

static mv_status get_triplet(json_t *o, const char *key, float *out, const char *path, mv_err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return MV_OK;
    if (json_is_number(v) && fabs(json_number_value(v)) <= 1e30) {
        for (int i = 0; i < 3; i++)
            out[i] = (float)json_number_value(v);
        return MV_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 3)
        return mv_fail(e, MV_ERR_MODEL, "%s: \"%s\" must be a list of 3 numbers", path, key);
    for (int i = 0; i < 3; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_number(x) || fabs(json_number_value(x)) > 1e30)
            return mv_fail(e, MV_ERR_MODEL, "%s: \"%s\" must be a list of 3 numbers", path, key);
        out[i] = (float)json_number_value(x);
    }
    return MV_OK;
}

mv_status mv_model_read_preproc(const char *dir, const mv_vision_config *c, mv_preproc_config *pp,
                                 mv_err *e)
{
    mv_preproc_defaults(pp);
    pp->patch = c->patch;
    pp->merge = c->merge;
    pp->temporal = c->temporal;
    char path[4200];
    mv_status st = MV_OK;
    snprintf(path, sizeof path, "%s/preprocessor_config.json", dir);
    if (access(path, F_OK) == 0) {
        json_t *j = mv_model_read_json(path, e, &st);
        if (!j)
            return st;
        long long pz = pp->patch, mz = pp->merge, tz = pp->temporal;
        if ((st = get_size(j, &pp->min_pixels, &pp->max_pixels, path, e)) ||
            (st = get_triplet(j, "image_mean", pp->mean, path, e)) ||
            (st = get_triplet(j, "image_std", pp->std, path, e)) ||
            (st = get_num(j, "rescale_factor", &pp->rescale, path, e)) ||
            (st = get_whole(j, "patch_size", 1, 1024, &pz, path, e)) ||
            (st = get_whole(j, "merge_size", 1, 16, &mz, path, e)) ||
            (st = get_whole(j, "temporal_patch_size", 1, 16, &tz, path, e))) {
            json_decref(j);
            return st;
        }
        json_decref(j);
        /* (pixel * rescale - mean) / std: numbers that make it non-finite or meaningless are
         * refused here rather than turning every embedding into NaN */
        for (int ch = 0; ch < 3; ch++) {
            if (!(fabsf(pp->mean[ch]) <= 1e6f))
                return mv_fail(e, MV_ERR_MODEL, "%s: \"image_mean\"[%d] = %g must be a finite number "
                               "of magnitude at most 1e6", path, ch, (double)pp->mean[ch]);
            if (!(pp->std[ch] > 1e-6f && pp->std[ch] <= 1e6f))
                return mv_fail(e, MV_ERR_MODEL, "%s: \"image_std\"[%d] = %g must be a finite number "
                               "in (1e-6, 1e6]", path, ch, (double)pp->std[ch]);
        }
        if (!(pp->rescale > 1e-12 && pp->rescale < 1e6))
            return mv_fail(e, MV_ERR_MODEL, "%s: \"rescale_factor\" = %g must be a finite number in "
                           "(1e-12, 1e6)", path, pp->rescale);
        if ((int)pz != c->patch || (int)mz != c->merge || (int)tz != c->temporal)
            return mv_fail(e, MV_ERR_MODEL,
                           "%s: patch/merge/temporal sizes %d/%d/%d disagree with config.json's %d/%d/%d",
                           path, (int)pz, (int)mz, (int)tz, c->patch, c->merge, c->temporal);
    }
    snprintf(path, sizeof path, "%s/video_preprocessor_config.json", dir);
    if (access(path, F_OK) == 0) {
        json_t *j = mv_model_read_json(path, e, &st);
        if (!j)
            return st;
        long long mn = pp->min_frames, mx = pp->max_frames;
        if ((st = get_size(j, &pp->video_min_pixels, &pp->video_max_pixels, path, e)) ||
            (st = get_num(j, "fps", &pp->fps, path, e)) ||
            (st = get_whole(j, "min_frames", 1, 1000000, &mn, path, e)) ||
            (st = get_whole(j, "max_frames", 1, 1000000, &mx, path, e)) ||
            (st = get_whole(j, "max_video_tokens", 1, 1e9, &pp->max_video_tokens, path, e))) {
            json_decref(j);
            return st;
        }
        /* cap_pixels_per_frame: true / false, or absent / null = unset (uncapped in 5.17) */
        json_t *cap = json_object_get(j, "cap_pixels_per_frame");
        if (cap && !json_is_null(cap)) {
            if (!json_is_boolean(cap)) {
                json_decref(j);
                return mv_fail(e, MV_ERR_MODEL, "%s: \"cap_pixels_per_frame\" must be true, false or null", path);
            }
            pp->video_frame_cap = json_is_true(cap);
            pp->video_frame_cap_src = MV_CAP_FROM_CONFIG;
        }
        json_decref(j);
        pp->min_frames = (int)mn;
        pp->max_frames = (int)mx;
        if (!(pp->fps > 0 && pp->fps < 1e6) || pp->max_frames < pp->min_frames)
            return mv_fail(e, MV_ERR_MODEL, "%s: invalid fps / min_frames / max_frames", path);
    }
    return MV_OK;
}
