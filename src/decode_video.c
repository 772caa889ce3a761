/* decode_video.c - video files to RGB24 frames with libavformat/libavcodec/libswscale (FFmpeg 5.1).
 *
 * What it reproduces, bit for bit: `ffmpeg -i FILE -fps_mode passthrough -pix_fmt rgb24 -f rawvideo`.
 * That command (fftools 5.1) does, per decoded frame:
 *   1. autorotate: from the display matrix (frame side data, else stream side data) it inserts
 *      transpose (90/270), hflip/vflip (180) or vflip (mirrored 0) *before* any format conversion,
 *      so the planes are turned in the decoder's pixel format (rotate_planes() here);
 *   2. the auto-inserted scale filter with empty sws flags (libswscale then picks SWS_BICUBIC),
 *      src_v_chr_pos=128 for yuv420p, src_range from the frame, and sws_setColorspaceDetails with
 *      the frame's colorspace coefficients ("auto" matrix) and range (make_sws()/to_rgb()).
 * Frames are numbered in presentation order. open() demuxes every packet once (no decoding) and
 * keeps the sorted timestamps: index i <-> pts[i]. read() decodes forward while the next wanted
 * frame is near, otherwise seeks to the keyframe at or before it and decodes up to its pts.
 * Without usable timestamps (missing or duplicate pts) it decodes sequentially from the start and
 * counts frames. Not here: sampling math (video_sample.c), resizing to the model size.
 */
#include "mv_video.h"

#include <stdlib.h>
#include <string.h>

#ifndef MV_HAVE_FFMPEG

mv_status mv_video_open_limited(const char *path, double timeout_s, mv_video **v,
                                mv_video_info *info, mv_err *e)
{
    (void)timeout_s;
    (void)info;
    if (v)
        *v = NULL;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: cannot decode video: built without FFmpeg", path);
}

mv_status mv_video_open(const char *path, mv_video **v, mv_video_info *info, mv_err *e)
{
    return mv_video_open_limited(path, 0, v, info, e);
}

mv_status mv_video_read(mv_video *v, const int64_t *indices, int n, uint8_t **frames, double *ts,
                        mv_err *e)
{
    (void)v;
    (void)indices;
    (void)n;
    (void)ts;
    if (frames)
        *frames = NULL;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "cannot decode video: built without FFmpeg");
}

void mv_video_close(mv_video *v) { (void)v; }

int64_t mv_video_decoded_frames(const mv_video *v)
{
    (void)v;
    return 0;
}

#else /* MV_HAVE_FFMPEG */

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libavutil/time.h>
#include <libswscale/swscale.h>
#include <math.h>

/* Decoding forward is preferred over a seek when the wanted frame is at most this many frames
 * ahead, or when no keyframe lies between the current position and it. */
#define MV_SEEK_GAP 12

enum { ROT_NONE, ROT_TRANSPOSE, ROT_FLIP }; /* how rotate_planes() maps pixels */

struct mv_video {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVStream *st;
    int si;                 /* video stream index */
    int64_t n;              /* total frames */
    int64_t *pts;           /* [n] presentation timestamps, ascending (empty in sequential mode) */
    int64_t *key_pts;       /* [nkey] keyframe pts, ascending; seek targets (AVSEEK_FLAG_BACKWARD
                               on a pts lands on that keyframe whether the demuxer's index holds
                               pts (matroska) or dts (mov: the next key's dts is larger)) */
    int64_t nkey;
    int sequential;         /* no usable timestamps: identify frames by decode count */
    /* rotation, decided from the display matrix like fftools get_rotation()/autorotate */
    int rot_kind;           /* ROT_* */
    int tdir;               /* transpose dir: 0 cclock_flip, 1 clock, 2 cclock, 3 clock_flip */
    int hflip, vflip;       /* for ROT_FLIP */
    int rotation;           /* degrees reported in info */
    int out_w, out_h;       /* RGB frame size (after rotation) */
    /* decoder position */
    int positioned;         /* decoder state continues from a seek or the start */
    int64_t last_pts;       /* pts of the last frame produced (INT64_MIN after a seek) */
    int64_t seq_count;      /* sequential mode: frames produced since the start */
    int flushing, at_eof;
    /* conversion */
    struct SwsContext *sws;
    int sws_w, sws_h, sws_fmt, sws_range;
    AVFrame *frame, *rot, *rgb;
    AVPacket *pkt;
    int64_t deadline_us;    /* av_gettime_relative() limit; 0 = none */
    int64_t decoded;        /* frames produced by the decoder since open (statistics) */
};

static void averr(int ret, char *buf, size_t len)
{
    if (av_strerror(ret, buf, len) < 0)
        snprintf(buf, len, "FFmpeg error %d", ret);
}

static int interrupt_cb(void *opaque)
{
    const mv_video *v = opaque;
    return v->deadline_us && av_gettime_relative() > v->deadline_us;
}

static mv_status fail_av(mv_video *v, mv_err *e, int ret, const char *what)
{
    char buf[256];
    if (v->deadline_us && av_gettime_relative() > v->deadline_us)
        return mv_fail(e, MV_ERR_LIMIT, "%s: %s: time limit exceeded", v->path, what);
    averr(ret, buf, sizeof buf);
    return mv_fail(e, ret == AVERROR(ENOMEM) ? MV_ERR_NOMEM : MV_ERR_FORMAT, "%s: %s: %s", v->path,
                   what, buf);
}

static mv_status fail_frame(mv_video *v, mv_err *e, int64_t idx, int ret, const char *why)
{
    char buf[256];
    if (v->deadline_us && av_gettime_relative() > v->deadline_us)
        return mv_fail(e, MV_ERR_LIMIT, "%s: decode stopped at frame %lld of %lld: time limit exceeded",
                       v->path, (long long)idx, (long long)v->n);
    if (why)
        snprintf(buf, sizeof buf, "%s", why);
    else
        averr(ret, buf, sizeof buf);
    return mv_fail(e, ret == AVERROR(ENOMEM) ? MV_ERR_NOMEM : MV_ERR_FORMAT,
                   "%s: decode failed at frame %lld of %lld: %s", v->path, (long long)idx,
                   (long long)v->n, buf);
}

void mv_video_close(mv_video *v)
{
    if (!v)
        return;
    sws_freeContext(v->sws);
    av_frame_free(&v->frame);
    av_frame_free(&v->rot);
    av_frame_free(&v->rgb);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);
    free(v->pts);
    free(v->key_pts);
    free(v->path);
    free(v);
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
static void decide_rotation(mv_video *v, const int32_t *m)
{
    double theta = cli_rotation(m);
    v->rot_kind = ROT_NONE;
    v->hflip = v->vflip = 0;
    v->rotation = 0;
    if (fabs(theta - 90) < 1.0) {
        v->rot_kind = ROT_TRANSPOSE;
        v->tdir = m[3] > 0 ? 0 : 1; /* cclock_flip : clock */
        v->rotation = 90;
    } else if (fabs(theta - 180) < 1.0) {
        v->rot_kind = ROT_FLIP;
        v->hflip = m[0] < 0;
        v->vflip = m[4] < 0;
        v->rotation = 180;
    } else if (fabs(theta - 270) < 1.0) {
        v->rot_kind = ROT_TRANSPOSE;
        v->tdir = m[3] < 0 ? 3 : 2; /* clock_flip : cclock */
        v->rotation = 270;
    } else if (fabs(theta) < 1.0) {
        if (m && m[4] < 0) {
            v->rot_kind = ROT_FLIP;
            v->vflip = 1;
        }
    }
    /* Other angles: the CLI inserts the "rotate" filter (bilinear, black corners); we keep the
     * frame unrotated rather than approximate it. */
    if (v->rot_kind == ROT_FLIP && !v->hflip && !v->vflip)
        v->rot_kind = ROT_NONE;
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
static int rotate_planes(const mv_video *v, const AVFrame *in, AVFrame *out)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(in->format);
    int steps[4];
    int ret;
    av_frame_unref(out);
    out->format = in->format;
    out->width = v->rot_kind == ROT_TRANSPOSE ? in->height : in->width;
    out->height = v->rot_kind == ROT_TRANSPOSE ? in->width : in->height;
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
                if (v->rot_kind == ROT_TRANSPOSE) {
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
static int make_sws(mv_video *v, const AVFrame *f)
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
static int to_rgb(mv_video *v, const AVFrame *f, uint8_t *dst)
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
static int frame_to_rgb(mv_video *v, AVFrame *f, uint8_t *dst)
{
    int ret;
    if (v->rot_kind == ROT_NONE)
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
    if (ret >= 0)
        for (int y = 0; y < v->out_h; y++)
            memcpy(dst + (size_t)y * v->out_w * 3, v->rot->data[0] + (ptrdiff_t)y * v->rot->linesize[0],
                   (size_t)v->out_w * 3);
    av_frame_free(&tmp);
    return ret;
}

/* Next decoded frame of the video stream into v->frame. 0, AVERROR_EOF at the end, or an error. */
static int next_frame(mv_video *v)
{
    for (;;) {
        if (interrupt_cb(v))
            return AVERROR_EXIT;
        int ret = avcodec_receive_frame(v->dec, v->frame);
        if (ret == 0) {
            v->decoded++;
            return 0;
        }
        if (ret == AVERROR_EOF) {
            v->at_eof = 1;
            return AVERROR_EOF;
        }
        if (ret != AVERROR(EAGAIN))
            return ret;
        if (v->flushing)
            return AVERROR_EOF; /* should not happen: a draining decoder returns EOF */
        for (;;) {
            ret = av_read_frame(v->fmt, v->pkt);
            if (ret == AVERROR_EOF) {
                v->flushing = 1;
                ret = avcodec_send_packet(v->dec, NULL);
                if (ret < 0 && ret != AVERROR_EOF)
                    return ret;
                break;
            }
            if (ret < 0)
                return ret;
            if (v->pkt->stream_index != v->si) {
                av_packet_unref(v->pkt);
                continue;
            }
            ret = avcodec_send_packet(v->dec, v->pkt);
            av_packet_unref(v->pkt);
            if (ret < 0 && ret != AVERROR(EAGAIN))
                return ret;
            break;
        }
    }
}

static int64_t frame_ts(const AVFrame *f)
{
    return f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
}

/* Opens v->path into v->fmt (fresh context with the time-limit callback) and reads stream info. */
static int open_input(mv_video *v)
{
    avformat_close_input(&v->fmt);
    v->fmt = avformat_alloc_context();
    if (!v->fmt)
        return AVERROR(ENOMEM);
    v->fmt->interrupt_callback.callback = interrupt_cb;
    v->fmt->interrupt_callback.opaque = v;
    int ret = avformat_open_input(&v->fmt, v->path, NULL, NULL); /* frees fmt on failure */
    if (ret < 0)
        return ret;
    return avformat_find_stream_info(v->fmt, NULL);
}

/* Demuxers whose timestamp seeks land exactly on index entries (mov/mp4, matroska/webm, avi);
 * others (mpegts, program streams, raw) seek by bisection and may land late or off a keyframe. */
static int exact_seek(const AVFormatContext *f)
{
    const char *n = f->iformat->name;
    return !strcmp(n, "mov,mp4,m4a,3gp,3g2,mj2") || !strcmp(n, "matroska,webm") || !strcmp(n, "avi");
}

/* Restarts decoding at the start of the stream: a timestamp seek where exact_seek(), else the
 * input is opened again. */
static int rewind_stream(mv_video *v)
{
    int ret = -1;
    if (exact_seek(v->fmt))
        ret = av_seek_frame(v->fmt, v->si, v->st->start_time != AV_NOPTS_VALUE ? v->st->start_time : 0,
                            AVSEEK_FLAG_BACKWARD);
    if (ret < 0) {
        if ((ret = open_input(v)) < 0)
            return ret;
        if (v->si >= (int)v->fmt->nb_streams || v->fmt->streams[v->si]->codecpar->codec_id != v->dec->codec_id)
            return AVERROR_INVALIDDATA; /* the reopened file differs */
        v->st = v->fmt->streams[v->si];
        for (unsigned i = 0; i < v->fmt->nb_streams; i++)
            if ((int)i != v->si)
                v->fmt->streams[i]->discard = AVDISCARD_ALL;
    }
    avcodec_flush_buffers(v->dec);
    v->flushing = v->at_eof = 0;
    v->positioned = 1;
    v->last_pts = INT64_MIN;
    v->seq_count = 0;
    return 0;
}

static int64_t lower_bound(const int64_t *a, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Appends t to a growing array (doubling). 0, or -1 when out of memory (the array is kept). */
static int push_i64(int64_t **a, int64_t *n, int64_t *cap, int64_t t)
{
    if (*n == *cap) {
        int64_t *p = realloc(*a, 2 * *cap * sizeof *p);
        if (!p)
            return -1;
        *a = p;
        *cap *= 2;
    }
    (*a)[(*n)++] = t;
    return 0;
}

/* The demux-only pass: packet timestamps -> frame index, keyframes -> seek points. */
static mv_status index_stream(mv_video *v, mv_err *e)
{
    int64_t cap = 256, np = 0, kcap = 16;
    int missing_ts = 0, ret;
    v->pts = malloc(cap * sizeof *v->pts);
    v->key_pts = malloc(kcap * sizeof *v->key_pts);
    if (!v->pts || !v->key_pts)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory indexing frames", v->path);
    int64_t expected = v->st->nb_frames;
    for (;;) {
        ret = av_read_frame(v->fmt, v->pkt);
        if (ret == AVERROR_EOF)
            break;
        if (ret < 0) {
            v->n = expected > np ? expected : np + 1;
            return fail_frame(v, e, np, ret, NULL);
        }
        if (v->pkt->stream_index != v->si || (v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            av_packet_unref(v->pkt);
            continue;
        }
        int64_t t = v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
        if (t == AV_NOPTS_VALUE)
            missing_ts = 1;
        if (push_i64(&v->pts, &np, &cap, t) ||
            ((v->pkt->flags & AV_PKT_FLAG_KEY) && t != AV_NOPTS_VALUE &&
             push_i64(&v->key_pts, &v->nkey, &kcap, t))) {
            av_packet_unref(v->pkt);
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory indexing frames", v->path);
        }
        av_packet_unref(v->pkt);
    }
    if (expected > 0 && np < expected) {
        v->n = expected;
        return fail_frame(v, e, np, AVERROR_INVALIDDATA, "file is truncated (the container lists more frames)");
    }
    v->n = np;
    if (np == 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: the video stream has no frames", v->path);
    qsort(v->pts, np, sizeof *v->pts, cmp_i64);
    for (int64_t i = 1; i < np && !missing_ts; i++)
        if (v->pts[i] == v->pts[i - 1])
            missing_ts = 1;
    qsort(v->key_pts, v->nkey, sizeof *v->key_pts, cmp_i64);
    v->sequential = missing_ts || v->nkey == 0;
    return MV_OK;
}

mv_status mv_video_open_limited(const char *path, double timeout_s, mv_video **out,
                                mv_video_info *info, mv_err *e)
{
    *out = NULL;
    mv_video *v = calloc(1, sizeof *v);
    if (!v)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    mv_status st = MV_OK;
    int ret;
    v->path = strdup(path);
    v->frame = av_frame_alloc();
    v->rot = av_frame_alloc();
    v->rgb = av_frame_alloc();
    v->pkt = av_packet_alloc();
    if (!v->path || !v->frame || !v->rot || !v->rgb || !v->pkt) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (timeout_s > 0)
        v->deadline_us = av_gettime_relative() + (int64_t)(timeout_s * 1e6);
    if (av_log_get_level() == AV_LOG_INFO) /* untouched by the caller: keep FFmpeg's chatter off stderr */
        av_log_set_level(AV_LOG_QUIET);
    ret = open_input(v);
    if (ret < 0 && !v->fmt) {
        if (v->deadline_us && av_gettime_relative() > v->deadline_us) {
            st = mv_fail(e, MV_ERR_LIMIT, "%s: open: time limit exceeded", path);
        } else {
            char buf[256];
            averr(ret, buf, sizeof buf);
            st = mv_fail(e, ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) || ret == AVERROR(EISDIR)
                         ? MV_ERR_IO : MV_ERR_FORMAT, "%s: %s", path, buf);
        }
        goto fail;
    }
    if (ret < 0) {
        st = fail_av(v, e, ret, "reading stream info");
        goto fail;
    }
    const AVCodec *codec = NULL;
    ret = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret == AVERROR_STREAM_NOT_FOUND) {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: no video stream", path);
        goto fail;
    }
    if (ret == AVERROR_DECODER_NOT_FOUND || (ret >= 0 && !codec)) {
        int i = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        st = mv_fail(e, MV_ERR_UNSUPPORTED, "%s: no decoder for video codec '%s' in this FFmpeg build", path,
                     i >= 0 ? avcodec_get_name(v->fmt->streams[i]->codecpar->codec_id) : "?");
        goto fail;
    }
    if (ret < 0) {
        st = fail_av(v, e, ret, "finding the video stream");
        goto fail;
    }
    v->si = ret;
    v->st = v->fmt->streams[ret];
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        if ((int)i != v->si)
            v->fmt->streams[i]->discard = AVDISCARD_ALL;
    v->dec = avcodec_alloc_context3(codec);
    if (!v->dec) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if ((ret = avcodec_parameters_to_context(v->dec, v->st->codecpar)) < 0) {
        st = fail_av(v, e, ret, "decoder parameters");
        goto fail;
    }
    v->dec->pkt_timebase = v->st->time_base;
    v->dec->thread_count = 0; /* auto; frame threading does not change the output */
    if ((ret = avcodec_open2(v->dec, codec, NULL)) < 0) {
        st = fail_av(v, e, ret, "opening the decoder");
        goto fail;
    }
    if ((st = index_stream(v, e)) != MV_OK)
        goto fail;

    /* Decode the first frame: proves the stream decodes, gives the frame size and a frame-level
     * display matrix (which the CLI prefers over the stream's). */
    if ((ret = rewind_stream(v)) < 0) {
        st = fail_frame(v, e, 0, ret, NULL);
        goto fail;
    }
    if ((ret = next_frame(v)) < 0) {
        st = fail_frame(v, e, 0, ret, ret == AVERROR_EOF ? "no frame could be decoded" : NULL);
        goto fail;
    }
    const AVFrameSideData *sd = av_frame_get_side_data(v->frame, AV_FRAME_DATA_DISPLAYMATRIX);
    const int32_t *dm = sd && sd->size >= 9 * sizeof(int32_t) ? (const int32_t *)sd->data
                        : (const int32_t *)av_stream_get_side_data(v->st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    decide_rotation(v, dm);
    /* Packets before the first frame the decoder can produce (a transport stream cut in the
     * middle of a GOP) are not frames: the CLI does not output them either. */
    int64_t t0 = frame_ts(v->frame);
    if (!v->sequential && t0 != AV_NOPTS_VALUE) {
        int64_t k = lower_bound(v->pts, v->n, t0);
        if (k > 0 && k < v->n && v->pts[k] == t0) {
            memmove(v->pts, v->pts + k, (v->n - k) * sizeof *v->pts);
            v->n -= k;
            int64_t kk = lower_bound(v->key_pts, v->nkey, t0);
            memmove(v->key_pts, v->key_pts + kk, (v->nkey - kk) * sizeof *v->key_pts);
            v->nkey -= kk;
            if (v->nkey == 0)
                v->sequential = 1;
        }
    }
    v->out_w = v->rot_kind == ROT_TRANSPOSE ? v->frame->height : v->frame->width;
    v->out_h = v->rot_kind == ROT_TRANSPOSE ? v->frame->width : v->frame->height;
    v->positioned = 0; /* the next read seeks or rewinds */
    av_frame_unref(v->frame);

    AVRational r = v->st->avg_frame_rate;
    info->total_frames = v->n;
    info->fps = r.num > 0 && r.den > 0 ? av_q2d(r) : 0.0;
    info->duration = info->fps > 0 ? (double)v->n / info->fps : 0.0;
    info->width = v->out_w;
    info->height = v->out_h;
    info->rotation = v->rotation;
    info->codec = codec->name;
    *out = v;
    return MV_OK;
fail:
    mv_video_close(v);
    return st;
}

mv_status mv_video_open(const char *path, mv_video **v, mv_video_info *info, mv_err *e)
{
    return mv_video_open_limited(path, 0, v, info, e);
}

/* Positions the decoder so that the next frames lead to pts target (timestamp mode). */
static int seek_before(mv_video *v, int64_t key)
{
    if (!exact_seek(v->fmt))
        return rewind_stream(v);
    int ret = av_seek_frame(v->fmt, v->si, v->key_pts[key], AVSEEK_FLAG_BACKWARD);
    if (ret < 0)
        return rewind_stream(v);
    avcodec_flush_buffers(v->dec);
    v->flushing = v->at_eof = 0;
    v->positioned = 1;
    v->last_pts = INT64_MIN;
    return 0;
}

/* next_frame on the way to frame idx: a stream that ends or fails there is idx's error. */
static mv_status next_frame_for(mv_video *v, int64_t idx, mv_err *e)
{
    int ret = next_frame(v);
    if (ret == AVERROR_EOF)
        return fail_frame(v, e, idx, ret, "the stream ended before this frame");
    return ret < 0 ? fail_frame(v, e, idx, ret, NULL) : MV_OK;
}

/* Timestamp mode: decode frame idx into v->frame. */
static mv_status get_by_pts(mv_video *v, int64_t idx, mv_err *e)
{
    int64_t target = v->pts[idx];
    /* keyframe at or before the target (by pts) */
    int64_t key = lower_bound(v->key_pts, v->nkey, target + 1) - 1;
    if (key < 0)
        key = 0;
    int need_seek = !v->positioned || v->last_pts >= target;
    if (!need_seek) {
        int64_t cur = lower_bound(v->pts, v->n, v->last_pts); /* index of the last frame produced */
        if (idx - cur > MV_SEEK_GAP && v->key_pts[key] > v->last_pts && exact_seek(v->fmt))
            need_seek = 1;
    }
    int ret, tries = 0;
    if (need_seek && (ret = seek_before(v, key)) < 0)
        return fail_frame(v, e, idx, ret, NULL);
    for (;;) {
        mv_status st = next_frame_for(v, idx, e);
        if (st)
            return st;
        int64_t t = frame_ts(v->frame);
        int first = v->last_pts == INT64_MIN;
        if (t != AV_NOPTS_VALUE)
            v->last_pts = t;
        if (t == target)
            return MV_OK;
        if (t != AV_NOPTS_VALUE && t > target) {
            /* Overshot: after a seek the decoder started past the target (leading frames of an
             * open GOP, or a demuxer that landed late): restart from an earlier keyframe. */
            if (first && exact_seek(v->fmt) && tries < 3 && key > 0) {
                tries++;
                key--;
                if ((ret = seek_before(v, key)) < 0)
                    return fail_frame(v, e, idx, ret, NULL);
                continue;
            }
            if (first && exact_seek(v->fmt) && tries < 4) {
                tries = 4;
                if ((ret = rewind_stream(v)) < 0)
                    return fail_frame(v, e, idx, ret, NULL);
                continue;
            }
            return fail_frame(v, e, idx, AVERROR_INVALIDDATA, "the decoder did not produce this frame");
        }
        av_frame_unref(v->frame);
    }
}

/* Sequential mode: decode frame idx (decode-order count) into v->frame. */
static mv_status get_by_count(mv_video *v, int64_t idx, mv_err *e)
{
    int ret;
    if ((!v->positioned || v->seq_count > idx) && (ret = rewind_stream(v)) < 0)
        return fail_frame(v, e, idx, ret, NULL);
    for (;;) {
        mv_status st = next_frame_for(v, idx, e);
        if (st)
            return st;
        if (v->seq_count++ == idx)
            return MV_OK;
        av_frame_unref(v->frame);
    }
}

mv_status mv_video_read(mv_video *v, const int64_t *indices, int n, uint8_t **frames, double *ts,
                        mv_err *e)
{
    *frames = NULL;
    if (n <= 0)
        return mv_fail(e, MV_ERR_USAGE, "%s: no frames requested", v->path);
    for (int k = 0; k < n; k++)
        if (indices[k] < 0 || indices[k] >= v->n || (k > 0 && indices[k] < indices[k - 1]))
            return mv_fail(e, MV_ERR_USAGE, "%s: frame index %lld (position %d) out of order or outside [0, %lld)",
                           v->path, (long long)indices[k], k, (long long)v->n);
    size_t fsz = (size_t)v->out_w * v->out_h * 3;
    uint8_t *buf = malloc(fsz * n);
    if (!buf)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for %d frames of %dx%d", v->path, n, v->out_w,
                       v->out_h);
    AVRational tb = v->st->time_base;
    int64_t t0 = v->sequential ? 0 : v->pts[0];
    int64_t have = -1; /* index held in buf[k-1] */
    for (int k = 0; k < n; k++) {
        int64_t idx = indices[k];
        if (idx == have) {
            memcpy(buf + fsz * k, buf + fsz * (k - 1), fsz);
            if (ts)
                ts[k] = ts[k - 1];
            continue;
        }
        mv_status st = v->sequential ? get_by_count(v, idx, e) : get_by_pts(v, idx, e);
        if (st != MV_OK) {
            free(buf);
            v->positioned = 0;
            return st;
        }
        if (v->frame->width <= 0 || v->frame->height <= 0) {
            av_frame_unref(v->frame);
            free(buf);
            return fail_frame(v, e, idx, AVERROR_INVALIDDATA, "decoded frame has no size");
        }
        int ret = frame_to_rgb(v, v->frame, buf + fsz * k);
        int64_t t = frame_ts(v->frame);
        av_frame_unref(v->frame);
        if (ret < 0) {
            free(buf);
            return fail_frame(v, e, idx, ret, NULL);
        }
        if (ts)
            ts[k] = t == AV_NOPTS_VALUE ? NAN : (double)(t - t0) * av_q2d(tb);
        have = idx;
    }
    *frames = buf;
    return MV_OK;
}

int64_t mv_video_decoded_frames(const mv_video *v) { return v ? v->decoded : 0; }

#endif /* MV_HAVE_FFMPEG */
