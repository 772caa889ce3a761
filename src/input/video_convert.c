/* video_convert.c - decoded video frames to packed RGB24 exactly as `ffmpeg -i FILE -fps_mode
 * passthrough -pix_fmt rgb24 -f rawvideo` (fftools 5.1) converts them:
 *   1. autorotate: from the display matrix (frame side data, else stream side data) it inserts
 *      transpose (90/270), hflip/vflip (180) or vflip (mirrored 0) *before* any format conversion,
 *      so the planes are turned in the decoder's pixel format (rotate_planes() here);
 *   2. the auto-inserted scale filter with empty sws flags (libswscale then picks SWS_BICUBIC),
 *      src_v_chr_pos=128 for yuv420p, src_range from the frame, and sws_setColorspaceDetails with
 *      the frame's colorspace coefficients ("auto" matrix) and range (make_sws()/to_rgb()).
 * Not here: demuxing, decoding and frame indexing (decode_video.c). Built only with FFmpeg.
 */
#ifdef MV_HAVE_FFMPEG
#include "mv_video_convert.h"

#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int mv_vconv_init(mv_vconv *c)
{
    memset(c, 0, sizeof *c);
    c->rot = av_frame_alloc();
    c->rgb = av_frame_alloc();
    return c->rot && c->rgb ? 0 : AVERROR(ENOMEM);
}

void mv_vconv_free(mv_vconv *c)
{
    sws_freeContext(c->sws);
    c->sws = NULL;
    av_frame_free(&c->rot);
    av_frame_free(&c->rgb);
}

/* fftools/cmdutils.c get_rotation() */
static double cli_rotation(const int32_t *m)
{
    double theta = 0;
    if (m)
        theta = -round(av_display_rotation_get(m));
    theta -= 360 * floor(theta / 360 + 0.9 / 360);
    return theta;
}

/* fftools/ffmpeg_filter.c configure_input_video_filter() autorotate branch. */
static void decide_rotation(mv_vconv *v, const int32_t *m)
{
    double theta = cli_rotation(m);
    v->rot_kind = MV_ROT_NONE;
    v->hflip = v->vflip = 0;
    v->rotation = 0;
    if (fabs(theta - 90) < 1.0) {
        v->rot_kind = MV_ROT_TRANSPOSE;
        v->tdir = m[3] > 0 ? 0 : 1; /* cclock_flip : clock */
        v->rotation = 90;
    } else if (fabs(theta - 180) < 1.0) {
        v->rot_kind = MV_ROT_FLIP;
        v->hflip = m[0] < 0;
        v->vflip = m[4] < 0;
        v->rotation = 180;
    } else if (fabs(theta - 270) < 1.0) {
        v->rot_kind = MV_ROT_TRANSPOSE;
        v->tdir = m[3] < 0 ? 3 : 2; /* clock_flip : cclock */
        v->rotation = 270;
    } else if (fabs(theta) < 1.0) {
        if (m && m[4] < 0) {
            v->rot_kind = MV_ROT_FLIP;
            v->vflip = 1;
        }
    }
    /* Other angles: the CLI inserts the "rotate" filter (bilinear, black corners); we keep the
     * frame unrotated rather than approximate it. */
    if (v->rot_kind == MV_ROT_FLIP && !v->hflip && !v->vflip)
        v->rot_kind = MV_ROT_NONE;
}

/* Pixel formats the CLI's transpose/hflip/vflip filters accept directly (vf_transpose.c
 * query_formats; the flips accept a superset). Others are converted to RGB first (not bit-exact
 * to the CLI, which would negotiate an intermediate format). */
static int planes_rotatable(enum AVPixelFormat f)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f);
    return d && !(d->flags & (AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BITSTREAM)) &&
           d->log2_chroma_w == d->log2_chroma_h;
}

/* out = rotated copy of in (any format planes_rotatable() accepts, or packed RGB24).
 * Transpose: out[y][x] = in[sy][sx] with the vf_transpose dir semantics; flips per plane. */
static int rotate_planes(const mv_vconv *v, const AVFrame *in, AVFrame *out)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(in->format);
    int steps[4];
    int ret;
    av_frame_unref(out);
    out->format = in->format;
    out->width = v->rot_kind == MV_ROT_TRANSPOSE ? in->height : in->width;
    out->height = v->rot_kind == MV_ROT_TRANSPOSE ? in->width : in->height;
    if ((ret = av_frame_get_buffer(out, 0)) < 0)
        return ret;
    if ((ret = av_frame_copy_props(out, in)) < 0)
        return ret;
    av_image_fill_max_pixsteps(steps, NULL, d);
    int planes = av_pix_fmt_count_planes(in->format);
    for (int p = 0; p < planes; p++) {
        int sub_w = (p == 1 || p == 2) ? d->log2_chroma_w : 0;
        int sub_h = (p == 1 || p == 2) ? d->log2_chroma_h : 0;
        int inw = AV_CEIL_RSHIFT(in->width, sub_w), inh = AV_CEIL_RSHIFT(in->height, sub_h);
        int outw = AV_CEIL_RSHIFT(out->width, sub_w), outh = AV_CEIL_RSHIFT(out->height, sub_h);
        int ps = steps[p];
        const uint8_t *src = in->data[p];
        uint8_t *dst = out->data[p];
        ptrdiff_t sl = in->linesize[p], dl = out->linesize[p];
        for (int y = 0; y < outh; y++) {
            uint8_t *drow = dst + y * dl;
            for (int x = 0; x < outw; x++) {
                int sx, sy;
                if (v->rot_kind == MV_ROT_TRANSPOSE) {
                    switch (v->tdir) {
                    case 0: sy = x; sx = y; break;                         /* cclock_flip */
                    case 1: sy = inh - 1 - x; sx = y; break;               /* clock */
                    case 2: sy = x; sx = inw - 1 - y; break;               /* cclock */
                    default: sy = inh - 1 - x; sx = inw - 1 - y; break;    /* clock_flip */
                    }
                } else {
                    sx = v->hflip ? inw - 1 - x : x;
                    sy = v->vflip ? inh - 1 - y : y;
                }
                memcpy(drow + (size_t)x * ps, src + sy * sl + (size_t)sx * ps, ps);
            }
        }
    }
    return 0;
}

/* libswscale context as vf_scale config_props() builds it for the CLI's auto-inserted scaler. */
static int make_sws(mv_vconv *v, const AVFrame *f)
{
    int range = f->color_range;
    if (v->sws && v->sws_w == f->width && v->sws_h == f->height && v->sws_fmt == f->format &&
        v->sws_range == range)
        return 0;
    sws_freeContext(v->sws);
    v->sws = sws_alloc_context();
    if (!v->sws)
        return AVERROR(ENOMEM);
    struct SwsContext *s = v->sws;
    int ret = 0;
#define SETI(k, val) \
    if (ret >= 0) ret = av_opt_set_int(s, k, val, 0)
    SETI("srcw", f->width);
    SETI("srch", f->height);
    SETI("src_format", f->format);
    SETI("dstw", v->out_w);
    SETI("dsth", v->out_h);
    SETI("dst_format", AV_PIX_FMT_RGB24);
    SETI("sws_flags", 0); /* vf_scale flags "" -> swscale's default, SWS_BICUBIC */
    SETI("threads", 1);
    if (range != AVCOL_RANGE_UNSPECIFIED)
        SETI("src_range", range == AVCOL_RANGE_JPEG);
    SETI("src_h_chr_pos", -513);
    SETI("src_v_chr_pos", f->format == AV_PIX_FMT_YUV420P ? 128 : -513);
    SETI("dst_h_chr_pos", -513);
    SETI("dst_v_chr_pos", -513);
#undef SETI
    if (ret < 0)
        return ret;
    if ((ret = sws_init_context(s, NULL, NULL)) < 0)
        return ret;
    v->sws_w = f->width;
    v->sws_h = f->height;
    v->sws_fmt = f->format;
    v->sws_range = range;
    return 0;
}

/* vf_scale parse_yuv_type("auto", colorspace) */
static const int *auto_coeffs(enum AVColorSpace cs)
{
    if (cs < 1 || cs > 10 || cs == 8)
        cs = AVCOL_SPC_BT470BG;
    return sws_getCoefficients(cs);
}

/* Converts f to packed RGB24 into dst [out_h, out_w, 3] (vf_scale scale_frame()). */
static int to_rgb(mv_vconv *v, const AVFrame *f, uint8_t *dst)
{
    int ret;
    if ((ret = make_sws(v, f)) < 0)
        return ret;
    int *inv_table, *table, in_full, out_full, bri, con, sat;
    if ((ret = sws_getColorspaceDetails(v->sws, &inv_table, &in_full, &table, &out_full, &bri, &con,
                                        &sat)) < 0)
        return ret;
    const int *coeffs = auto_coeffs(f->colorspace);
    if (f->color_range != AVCOL_RANGE_UNSPECIFIED)
        in_full = f->color_range == AVCOL_RANGE_JPEG;
    /* returns -1 for RGB input (no YUV matrix), which is not an error for the conversion */
    sws_setColorspaceDetails(v->sws, coeffs, in_full, coeffs, out_full, bri, con, sat);
    /* the CLI scales into an aligned AVFrame; do the same so swscale takes the same code paths */
    if (!v->rgb->data[0] || v->rgb->width != v->out_w || v->rgb->height != v->out_h) {
        av_frame_unref(v->rgb);
        v->rgb->format = AV_PIX_FMT_RGB24;
        v->rgb->width = v->out_w;
        v->rgb->height = v->out_h;
        if ((ret = av_frame_get_buffer(v->rgb, 0)) < 0)
            return ret;
    }
    if ((ret = av_frame_make_writable(v->rgb)) < 0)
        return ret;
    ret = sws_scale(v->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, v->rgb->data,
                    v->rgb->linesize);
    if (ret < 0)
        return ret;
    for (int y = 0; y < v->out_h; y++)
        memcpy(dst + (size_t)y * v->out_w * 3, v->rgb->data[0] + (ptrdiff_t)y * v->rgb->linesize[0],
               (size_t)v->out_w * 3);
    return 0;
}

/* Decoded frame -> RGB24 [out_h, out_w, 3], rotation applied as the CLI does. */
static int frame_to_rgb(mv_vconv *v, AVFrame *f, uint8_t *dst)
{
    int ret;
    if (v->rot_kind == MV_ROT_NONE)
        return to_rgb(v, f, dst);
    if (planes_rotatable(f->format)) {
        if ((ret = rotate_planes(v, f, v->rot)) < 0)
            return ret;
        return to_rgb(v, v->rot, dst);
    }
    /* fallback: convert unrotated to RGB24, then rotate the packed RGB */
    AVFrame *tmp = av_frame_alloc();
    if (!tmp)
        return AVERROR(ENOMEM);
    int ow = v->out_w, oh = v->out_h;
    v->out_w = f->width;
    v->out_h = f->height;
    tmp->format = AV_PIX_FMT_RGB24;
    tmp->width = f->width;
    tmp->height = f->height;
    ret = av_frame_get_buffer(tmp, 0);
    if (ret >= 0) {
        uint8_t *packed = malloc((size_t)f->width * f->height * 3);
        ret = packed ? to_rgb(v, f, packed) : AVERROR(ENOMEM);
        if (ret >= 0)
            for (int y = 0; y < f->height; y++)
                memcpy(tmp->data[0] + (ptrdiff_t)y * tmp->linesize[0], packed + (size_t)y * f->width * 3,
                       (size_t)f->width * 3);
        free(packed);
    }
    v->out_w = ow;
    v->out_h = oh;
    sws_freeContext(v->sws); /* its destination size was the unrotated one */
    v->sws = NULL;
    if (ret >= 0)
        ret = rotate_planes(v, tmp, v->rot);
    if (ret >= 0 && (v->rot->width != v->out_w || v->rot->height != v->out_h)) {
        /* a frame whose size changed mid-stream: scaled to the first frame's, as the CLI's
         * scaler after its transpose does (copying rows would read past the smaller frame) */
        ret = to_rgb(v, v->rot, dst);
        sws_freeContext(v->sws); /* made for this frame's size */
        v->sws = NULL;
    } else if (ret >= 0)
        for (int y = 0; y < v->out_h; y++)
            memcpy(dst + (size_t)y * v->out_w * 3, v->rot->data[0] + (ptrdiff_t)y * v->rot->linesize[0],
                   (size_t)v->out_w * 3);
    av_frame_free(&tmp);
    return ret;
}

void mv_vconv_setup(mv_vconv *c, const int32_t *m, int w, int h)
{
    decide_rotation(c, m);
    c->out_w = c->rot_kind == MV_ROT_TRANSPOSE ? h : w;
    c->out_h = c->rot_kind == MV_ROT_TRANSPOSE ? w : h;
}

int mv_vconv_frame(mv_vconv *c, AVFrame *f, uint8_t *dst) { return frame_to_rgb(c, f, dst); }

#else
typedef int mv_video_convert_unused; /* ISO C: no empty translation unit */
#endif /* MV_HAVE_FFMPEG */
