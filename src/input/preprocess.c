/* preprocess.c - HF Qwen2VLImageProcessor (torchvision backend, CPU) reimplemented bit for bit:
 * smart_resize, torch's uint8 antialiased bicubic resize, rescale+normalize LUT, patchify; and the
 * video path after sampling, with the pixel budget of Qwen3VLVideoProcessor.resize (capped per
 * frame or not).
 *
 * The resize follows pytorch aten/src/ATen/native/cpu/UpSampleKernel.cpp:
 *   HelperInterpBase::_compute_indices_min_size_weights_aa   (per-output xmin, xsize, weights)
 *   HelperInterpBase::_compute_index_ranges_weights          (support, max_interp_size)
 *   HelperInterpBase::_compute_index_ranges_int16_weights    (precision search, int16 rounding)
 *   HelperInterpCubic::aa_filter<double, true>               (Keys cubic, a = -0.5)
 *   basic_loop_aa_horizontal<uint8_t> / basic_loop_aa_vertical<uint8_t>
 *   separable_upsample_generic_Nd_kernel_impl                (W pass, then H pass, skip equal)
 * and UpSample.h area_pixel_compute_scale (align_corners=False, no scale factor: in/out, or 0
 * when the output size is 1). The AVX2 kernel (UpSampleKernelAVXAntialias.h) uses the same int16
 * weights and integer sums, so both torch paths give these bytes. Not here: the float / CUDA
 * resize paths, decoding, video sampling.
 *
 * Floating-point contraction is disabled for the weight math (fp-contract=off): a fused
 * multiply-add would round differently from torch's separate operations.
 */
#include "mv_preprocess.h"
#include "mv_interrupt.h" /* mv_interrupted: a chunk of frames stops between them */
#include "mv_plan.h"      /* mv_mb_decode: HF's merge-block order */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * smart_resize
 * ------------------------------------------------------------------------------------------- */

mv_status mv_smart_resize(int h, int w, int factor, long long min_px, long long max_px,
                          int *oh, int *ow, mv_err *e)
{
    if (h <= 0 || w <= 0 || factor <= 0 || min_px < 0 || max_px <= 0)
        return mv_fail(e, MV_ERR_USAGE, "smart_resize: bad arguments: size %dx%d, factor %d, "
                       "min_pixels %lld, max_pixels %lld", w, h, factor, min_px, max_px);
    double ratio = (double)(h > w ? h : w) / (double)(h < w ? h : w);
    if (ratio > 200.0)
        return mv_fail(e, MV_ERR_LIMIT,
                       "absolute aspect ratio must be smaller than 200, got %.17g (%dx%d)", ratio, w, h);
    /* Python round() on floats is round-half-to-even: nearbyint in the default rounding mode */
    long long hb = (long long)nearbyint((double)h / factor) * factor;
    long long wb = (long long)nearbyint((double)w / factor) * factor;
    long long area = (long long)h * w;
    if (hb * wb > max_px) {
        double beta = sqrt((double)area / (double)max_px);
        long long fh = (long long)floor((double)h / beta / factor) * factor;
        long long fw = (long long)floor((double)w / beta / factor) * factor;
        hb = fh > factor ? fh : factor;
        wb = fw > factor ? fw : factor;
    } else if (hb * wb < min_px) {
        double beta = sqrt((double)min_px / (double)area);
        hb = (long long)ceil((double)h * beta / factor) * factor;
        wb = (long long)ceil((double)w * beta / factor) * factor;
    }
    if (hb <= 0 || wb <= 0 || hb > 1000000 || wb > 1000000)
        return mv_fail(e, MV_ERR_USAGE, "smart_resize: %dx%d gives an unusable size %lldx%lld "
                       "(min_pixels %lld, max_pixels %lld)", w, h, wb, hb, min_px, max_px);
    *oh = (int)hb;
    *ow = (int)wb;
    return MV_OK;
}

mv_status mv_smart_resize_video(int t, int h, int w, int factor, int tfactor, long long min_px,
                                long long max_px, int *oh, int *ow, mv_err *e)
{
    if (factor <= 0 || tfactor <= 0 || h <= 0 || w <= 0)
        return mv_fail(e, MV_ERR_FORMAT, "video smart_resize: bad arguments (t=%d h=%d w=%d factor=%d "
                       "temporal=%d)", t, h, w, factor, tfactor);
    if (t < tfactor)
        return mv_fail(e, MV_ERR_FORMAT, "video smart_resize: t:%d must be larger than temporal_factor:%d",
                       t, tfactor);
    double height = h, width = w;
    if (h < factor || w < factor) {
        double sh = (double)factor / height, sw = (double)factor / width;
        double scale = sh > sw ? sh : sw;
        height = floor(height * scale); /* int() of a positive float */
        width = floor(width * scale);
    }
    double mx = height > width ? height : width, mn = height < width ? height : width;
    if (mn <= 0 || mx / mn > 200)
        return mv_fail(e, MV_ERR_FORMAT, "video smart_resize: absolute aspect ratio must be smaller than "
                       "200, got %g (%dx%d)", mn > 0 ? mx / mn : INFINITY, w, h);
    double f = factor;
    double h_bar = nearbyint(height / f) * f;
    double w_bar = nearbyint(width / f) * f;
    double t_bar = nearbyint((double)t / tfactor) * tfactor;
    /* Python ints: t_bar * h_bar * w_bar is exact; these products stay far below 2^53. */
    double vol = t_bar * h_bar * w_bar;
    if (vol > (double)max_px) {
        double beta = sqrt(((double)t * height * width) / (double)max_px);
        h_bar = floor(height / beta / f) * f;
        w_bar = floor(width / beta / f) * f;
        if (h_bar < f)
            h_bar = f;
        if (w_bar < f)
            w_bar = f;
    } else if (vol < (double)min_px) {
        double beta = sqrt((double)min_px / ((double)t * height * width));
        h_bar = ceil(height * beta / f) * f;
        w_bar = ceil(width * beta / f) * f;
    }
    if (h_bar < 1 || w_bar < 1 || h_bar > 1e9 || w_bar > 1e9)
        return mv_fail(e, MV_ERR_FORMAT, "video smart_resize: result %gx%g out of range for %dx%d",
                       w_bar, h_bar, w, h);
    *oh = (int)h_bar;
    *ow = (int)w_bar;
    return MV_OK;
}

/* ---------------------------------------------------------------------------------------------
 * torch uint8 antialiased bicubic
 * ------------------------------------------------------------------------------------------- */

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#define NOCONTRACT
#else
#define NOCONTRACT __attribute__((optimize("fp-contract=off")))
#endif

/* HelperInterpCubic::aa_filter<double, use_keys_cubic=true>: cubic_convolution1/2 with a = -0.5 */
static NOCONTRACT double aa_cubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

void mv_resize_axis_free(mv_resize_axis *a)
{
    free(a->xmin);
    free(a->xsize);
    free(a->w);
    memset(a, 0, sizeof *a);
}

NOCONTRACT mv_status mv_resize_axis_init(mv_resize_axis *a, int in, int out)
{
    memset(a, 0, sizeof *a);
    if (in <= 0 || out <= 0)
        return MV_ERR_USAGE;
    const int interp_size = 4;
    double scale = out > 1 ? (double)in / (double)out : 0.0;
    double support = (scale >= 1.0) ? (interp_size * 0.5) * scale : interp_size * 0.5;
    int ksize = (int)ceil(support) * 2 + 1;
    double *wd = malloc(sizeof(double) * (size_t)out * ksize);
    a->xmin = malloc(sizeof(int) * (size_t)out);
    a->xsize = malloc(sizeof(int) * (size_t)out);
    a->w = malloc(sizeof(int16_t) * (size_t)out * ksize);
    if (!wd || !a->xmin || !a->xsize || !a->w) {
        free(wd);
        mv_resize_axis_free(a);
        return MV_ERR_NOMEM;
    }
    a->n = out;
    a->ksize = ksize;
    double wt_max = 0.0;
    for (int64_t i = 0; i < out; i++) {
        double *wt = wd + i * ksize;
        double center = scale * (i + 0.5);
        double total_w = 0.0;
        double invscale = (scale >= 1.0) ? 1.0 / scale : 1.0;
        int64_t xmin = (int64_t)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmax > in) xmax = in;
        int64_t xsize = xmax - xmin;
        if (xsize < 0) xsize = 0;
        if (xsize > ksize) xsize = ksize;
        int64_t j = 0;
        for (; j < xsize; j++) {
            double w = aa_cubic((j + xmin - center + 0.5) * invscale);
            wt[j] = w;
            total_w += w;
        }
        double wt_max_i = 0.0;
        if (total_w != 0.0) {
            for (j = 0; j < xsize; j++) {
                wt[j] /= total_w;
                wt_max_i = wt_max_i > wt[j] ? wt_max_i : wt[j];
            }
        }
        for (; j < ksize; j++) wt[j] = 0.0;
        wt_max = wt_max > wt_max_i ? wt_max : wt_max_i;
        a->xmin[i] = (int)xmin;
        a->xsize[i] = (int)xsize;
    }
    unsigned p;
    for (p = 0; p < 22; ++p) {
        int next_value = (int)(0.5 + wt_max * (1 << (p + 1)));
        if (next_value >= (1 << 15)) break;
    }
    a->prec = p;
    for (size_t k = 0; k < (size_t)out * ksize; k++) {
        double v = wd[k] * (1 << p);
        a->w[k] = (int16_t)((v < 0) ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
    free(wd);
    return MV_OK;
}

static inline uint8_t clamp_shift(int acc, unsigned p)
{
    int v = acc >> p;   /* arithmetic shift of a possibly negative int, as in torch */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* src [h][sw][3] -> dst [h][dw][3] along x */
static void resize_h(const uint8_t *src, int sw, int h, uint8_t *dst, int dw, const mv_resize_axis *a)
{
    const int bias = 1 << (a->prec - 1);
    #pragma omp parallel for schedule(static) if ((long long)h * dw > 65536 && mv_omp_region(0))
    for (int y = 0; y < h; y++) {
        const uint8_t *s = src + (size_t)y * sw * 3;
        uint8_t *d = dst + (size_t)y * dw * 3;
        for (int x = 0; x < dw; x++) {
            const int16_t *k = a->w + (size_t)x * a->ksize;
            const uint8_t *p = s + (size_t)a->xmin[x] * 3;
            int n = a->xsize[x];
            for (int c = 0; c < 3; c++) {
                int acc = bias;
                for (int j = 0; j < n; j++) acc += p[3 * j + c] * k[j];
                d[3 * x + c] = clamp_shift(acc, a->prec);
            }
        }
    }
}

/* src [sh][w][3] -> dst [dh][w][3] along y */
static void resize_v(const uint8_t *src, int w, uint8_t *dst, int dh, const mv_resize_axis *a)
{
    const int bias = 1 << (a->prec - 1);
    const size_t row = (size_t)w * 3;
    #pragma omp parallel for schedule(static) if ((long long)dh * w > 65536 && mv_omp_region(0))
    for (int y = 0; y < dh; y++) {
        const int16_t *k = a->w + (size_t)y * a->ksize;
        const uint8_t *s = src + (size_t)a->xmin[y] * row;
        int n = a->xsize[y];
        uint8_t *d = dst + (size_t)y * row;
        for (size_t i = 0; i < row; i++) {
            int acc = bias;
            for (int j = 0; j < n; j++) acc += s[(size_t)j * row + i] * k[j];
            d[i] = clamp_shift(acc, a->prec);
        }
    }
}

mv_status mv_resize_bicubic_aa_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh)
{
    if (!src || !dst || sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0) return MV_ERR_USAGE;
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return MV_OK;
    }
    mv_resize_axis ax = {0}, ay = {0};
    uint8_t *tmp = NULL;
    mv_status s = MV_OK;
    if (sw != dw && sh != dh) {
        tmp = malloc((size_t)dw * sh * 3);
        if (!tmp)
            s = MV_ERR_NOMEM;
        else if (!(s = mv_resize_axis_init(&ax, sw, dw)) && !(s = mv_resize_axis_init(&ay, sh, dh))) {
            resize_h(src, sw, sh, tmp, dw, &ax);
            resize_v(tmp, dw, dst, dh, &ay);
        }
    } else if (sw != dw) {
        if (!(s = mv_resize_axis_init(&ax, sw, dw)))
            resize_h(src, sw, sh, dst, dw, &ax);
    } else {
        if (!(s = mv_resize_axis_init(&ay, sh, dh)))
            resize_v(src, sw, dst, dh, &ay);
    }
    free(tmp);
    mv_resize_axis_free(&ax);
    mv_resize_axis_free(&ay);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Normalize + patchify
 * ------------------------------------------------------------------------------------------- */

void mv_norm_lut(const mv_preproc_config *pp, float lut[3][256])
{
    double inv = 1.0 / pp->rescale;   /* HF: mean * (1.0 / rescale_factor), in Python doubles */
    for (int c = 0; c < 3; c++) {
        float m = (float)((double)pp->mean[c] * inv);
        float s = (float)((double)pp->std[c] * inv);
        for (int v = 0; v < 256; v++) {
            float d = (float)v - m;    /* fp32 subtract, rounded, then fp32 divide */
            lut[c][v] = d / s;
        }
    }
}

long long mv_patchify_rows(int n_frames, int h, int w, const mv_preproc_config *pp)
{
    int T = pp->temporal;
    long long gt = (n_frames + T - 1) / T;
    return gt * (h / pp->patch) * (long long)(w / pp->patch);
}

/* grid = {ceil(n_frames / temporal), h / patch, w / patch}: the grid of n_frames frames of h x w. */
static void patch_grid(int n_frames, int h, int w, const mv_preproc_config *pp, int32_t grid[3])
{
    grid[0] = (n_frames + pp->temporal - 1) / pp->temporal;
    grid[1] = h / pp->patch;
    grid[2] = w / pp->patch;
}

void mv_patchify(const uint8_t *const *frames, int n_frames, int h, int w,
                 const mv_preproc_config *pp, float *out, int32_t grid[3])
{
    const int P = pp->patch, M = pp->merge, T = pp->temporal;
    const size_t cols = (size_t)3 * T * P * P;
    float lut[3][256];
    mv_norm_lut(pp, lut);
    patch_grid(n_frames, h, w, pp, grid);
    const int gt = grid[0], gw = grid[2];
    const long long rows_per_t = (long long)grid[1] * gw;
    #pragma omp parallel for collapse(2) schedule(static) if (rows_per_t * gt > 256 && mv_omp_region(0))
    for (int g = 0; g < gt; g++) {
        for (long long q = 0; q < rows_per_t; q++) {
            /* merge-block order: q = ((brow * bw + bcol) * M + in_row) * M + in_col */
            int prow, pcol;
            mv_mb_decode(q, gw, M, &prow, &pcol);
            float *o = out + ((size_t)g * rows_per_t + (size_t)q) * cols;
            for (int c = 0; c < 3; c++) {
                for (int t = 0; t < T; t++) {
                    int f = g * T + t;
                    if (f >= n_frames) f = n_frames - 1;   /* repeat the last frame */
                    const uint8_t *fr = frames[f];
                    for (int ph = 0; ph < P; ph++) {
                        const uint8_t *src = fr + ((size_t)(prow * P + ph) * w + (size_t)pcol * P) * 3 + c;
                        float *dst = o + (((size_t)c * T + t) * P + ph) * P;
                        for (int pw = 0; pw < P; pw++) dst[pw] = lut[c][src[3 * pw]];
                    }
                }
            }
        }
    }
}

/* The resized frames to the caller who asked for them, else freed. */
static void hand_over_resized(uint8_t *rs, int ow, int oh, uint8_t **resized, int *rw, int *rh)
{
    if (resized) {
        *resized = rs;
        if (rw) *rw = ow;
        if (rh) *rh = oh;
    } else {
        free(rs);
    }
}

mv_status mv_preprocess_image_size(const mv_image *img, const mv_preproc_config *pp, int32_t grid[3], int *rw,
                                   int *rh, mv_err *e)
{
    if (!img || !img->rgb || img->width <= 0 || img->height <= 0)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: empty image");
    if (pp->patch <= 0 || pp->merge <= 0 || pp->temporal <= 0)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: bad patch/merge/temporal %d/%d/%d",
                       pp->patch, pp->merge, pp->temporal);
    mv_status s = mv_smart_resize(img->height, img->width, pp->patch * pp->merge, pp->min_pixels, pp->max_pixels,
                                  rh, rw, e);
    if (s == MV_OK)
        patch_grid(1, *rh, *rw, pp, grid);
    return s;
}

mv_status mv_preprocess_image(const mv_image *img, const mv_preproc_config *pp, float **pixels,
                              int32_t grid[3], uint8_t **resized, int *rw, int *rh, mv_err *e)
{
    if (pixels) *pixels = NULL;
    if (resized) *resized = NULL;
    if (!pixels && !resized)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: neither pixel_values nor resized frames asked for");
    int oh, ow;
    mv_status s = mv_preprocess_image_size(img, pp, grid, &ow, &oh, e);
    if (s != MV_OK) return s;
    uint8_t *rs = malloc((size_t)ow * oh * 3);
    if (!rs) return mv_fail(e, MV_ERR_NOMEM, "preprocess: out of memory for a %dx%d image", ow, oh);
    if (mv_resize_bicubic_aa_u8(img->rgb, img->width, img->height, rs, ow, oh) != MV_OK) {
        free(rs);
        return mv_fail(e, MV_ERR_NOMEM, "preprocess: out of memory resizing to %dx%d", ow, oh);
    }
    if (!pixels) { /* the frame is the result: the backend patchifies */
        patch_grid(1, oh, ow, pp, grid);
        hand_over_resized(rs, ow, oh, resized, rw, rh);
        return MV_OK;
    }
    long long rows = mv_patchify_rows(1, oh, ow, pp);
    size_t cols = (size_t)3 * pp->temporal * pp->patch * pp->patch;
    float *px = malloc(sizeof(float) * (size_t)rows * cols);
    if (!px) {
        free(rs);
        return mv_fail(e, MV_ERR_NOMEM, "preprocess: out of memory for %lld x %zu pixel values", rows, cols);
    }
    const uint8_t *frames[1] = {rs};
    mv_patchify(frames, 1, oh, ow, pp, px, grid);
    *pixels = px;
    hand_over_resized(rs, ow, oh, resized, rw, rh);
    return MV_OK;
}

long long mv_video_max_pixels(const mv_preproc_config *pp, int n)
{
    if (!pp->video_frame_cap || n < 1)
        return pp->video_max_pixels;
    long long f2 = (long long)pp->patch * pp->merge * pp->patch * pp->merge;
    /* max_video_tokens * factor * factor, saturated (model.c keeps both far below the limit) */
    long long frame_cap = pp->max_video_tokens > LLONG_MAX / f2 ? LLONG_MAX : pp->max_video_tokens * f2;
    long long share = pp->video_max_pixels / n; /* Python // of non-negative ints */
    long long per_frame = frame_cap < share ? frame_cap : share;
    /* int(shortest_edge * 1.05): the int converted to a Python float, multiplied, truncated */
    long long floor_px = (long long)((double)pp->video_min_pixels * 1.05);
    if (floor_px > per_frame)
        per_frame = floor_px;
    return per_frame > LLONG_MAX / n ? LLONG_MAX : per_frame * n;
}

void mv_video_rule_describe(const mv_preproc_config *pp, char *buf, size_t size)
{
    static const char *const from[] = {"default, as transformers 5.17", "video_preprocessor_config.json",
                                       "--video-frame-cap"};
    int src = pp->video_frame_cap_src >= 0 && pp->video_frame_cap_src <= 2 ? pp->video_frame_cap_src : 0;
    int f = pp->patch * pp->merge;
    if (pp->video_frame_cap)
        snprintf(buf, size, "video budget: per-frame cap on (%s): per frame max(min(%lld tokens * %d^2, "
                 "%lld // frames), int(%lld * 1.05)) pixels", from[src], pp->max_video_tokens, f,
                 pp->video_max_pixels, pp->video_min_pixels);
    else
        snprintf(buf, size, "video budget: per-frame cap off (%s): %lld..%lld pixels shared by all "
                 "sampled frames", from[src], pp->video_min_pixels, pp->video_max_pixels);
}

/* The size n frames of w x h are resized to (both video paths: the decode threads' and a
 * resizing backend's), after checking the arguments. */
static mv_status video_target(mv_frame_reader read, int n, int w, int h, const mv_preproc_config *pp, int *ow,
                              int *oh, mv_err *e)
{
    if (!read || n < 1 || w <= 0 || h <= 0)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: empty video");
    if (pp->patch <= 0 || pp->merge <= 0 || pp->temporal <= 0)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: bad patch/merge/temporal %d/%d/%d",
                       pp->patch, pp->merge, pp->temporal);
    return mv_smart_resize_video(n, h, w, pp->patch * pp->merge, pp->temporal, pp->video_min_pixels,
                                 mv_video_max_pixels(pp, n), oh, ow, e);
}

mv_status mv_preprocess_video(mv_frame_reader read, void *ud, int chunk, int n, int w, int h,
                              const mv_preproc_config *pp, float **pixels, int32_t grid[3],
                              uint8_t **resized, int *rw, int *rh, mv_err *e)
{
    if (pixels) *pixels = NULL;
    if (resized) *resized = NULL;
    if (!pixels && !resized)
        return mv_fail(e, MV_ERR_USAGE, "preprocess: neither pixel_values nor resized frames asked for");
    if (chunk < 1) chunk = 1;
    int oh, ow;
    mv_status st = video_target(read, n, w, h, pp, &ow, &oh, e);
    if (st) return st;
    size_t fsz = (size_t)ow * oh * 3, isz = (size_t)w * h * 3;
    uint8_t *rs = malloc(fsz * n);
    const uint8_t **fp = malloc(n * sizeof *fp);
    long long rows = mv_patchify_rows(n, oh, ow, pp);
    size_t cols = (size_t)3 * pp->temporal * pp->patch * pp->patch;
    float *px = rs && fp && pixels ? malloc(sizeof(float) * (size_t)rows * cols) : NULL;
    if (!rs || !fp || (pixels && !px)) {
        free(rs);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "preprocess: out of memory for %d frames of %dx%d", n, ow, oh);
    }
    /* full-size frames are held `chunk` at a time (the caller's decode budget) */
    for (int k0 = 0; k0 < n && !st; k0 += chunk) {
        int nk = n - k0 < chunk ? n - k0 : chunk;
        uint8_t *frames = NULL;
        st = read(ud, k0, nk, &frames, e);
        for (int i = 0; i < nk && !st; i++) {
            fp[k0 + i] = rs + fsz * (k0 + i);
            /* a chunk of large frames takes seconds to resize: an interrupt stops it between
             * frames as the decoder's checks stop the decode (the run drops the input) */
            if (mv_interrupted())
                st = mv_fail(e, MV_ERR_LIMIT, "preprocess: stopped by an interrupt at frame %d of %d", k0 + i, n);
            else if ((st = mv_resize_bicubic_aa_u8(frames + isz * i, w, h, rs + fsz * (k0 + i), ow, oh)))
                mv_fail(e, st, "preprocess: out of memory resizing frames to %dx%d", ow, oh);
        }
        free(frames);
    }
    if (st) {
        free(rs);
        free(fp);
        free(px);
        return st;
    }
    if (pixels) {
        mv_patchify(fp, n, oh, ow, pp, px, grid);
        *pixels = px;
    } else {
        patch_grid(n, oh, ow, pp, grid);
    }
    free(fp);
    hand_over_resized(rs, ow, oh, resized, rw, rh);
    return MV_OK;
}

mv_status mv_preprocess_video_decoded(mv_frame_reader read, void *ud, int chunk, int n, int w, int h,
                                      const mv_preproc_config *pp, int32_t grid[3], uint8_t **decoded,
                                      int *rw, int *rh, mv_err *e)
{
    *decoded = NULL;
    int oh, ow;
    mv_status st = video_target(read, n, w, h, pp, &ow, &oh, e);
    if (st)
        return st;
    *rw = ow;
    *rh = oh;
    patch_grid(n, oh, ow, pp, grid);
    size_t isz = (size_t)w * h * 3;
    if ((size_t)w * h > 4 * (size_t)ow * oh)
        return MV_OK;
    uint8_t *all = malloc(isz * n);
    if (!all)
        return mv_fail(e, MV_ERR_NOMEM, "preprocess: out of memory for %d frames of %dx%d", n, w, h);
    if (chunk < 1) chunk = 1;
    for (int k0 = 0; k0 < n && !st; k0 += chunk) {
        int nk = n - k0 < chunk ? n - k0 : chunk;
        uint8_t *frames = NULL;
        if (!(st = read(ud, k0, nk, &frames, e)))
            memcpy(all + isz * k0, frames, isz * nk);
        free(frames);
    }
    if (st)
        free(all);
    else
        *decoded = all;
    return st;
}
