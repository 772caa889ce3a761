/* decode_video.c - video inputs to RGB24 frames with FFmpeg 5.1 (mv_video.h): the frame index,
 * opening as a sequence of named steps, reading frames by index, and the per-input limits.
 *
 * What it reproduces: the frames `ffmpeg -i FILE -fps_mode passthrough -pix_fmt rgb24 -f rawvideo`
 * writes, in that order. Frames are numbered in presentation order. open() demuxes every packet
 * once (no decoding) and keeps the sorted timestamps: index i <-> pts[i]. read() decodes forward
 * while the next wanted frame is near, otherwise seeks to the keyframe at or before it and decodes
 * up to its pts. When the packets are not the CLI's frame list - a packet without pts, duplicate
 * pts, no keyframes, packets an edit list discards, timestamps that restart (joined MPEG-TS), or a
 * first decodable frame that is not the first packet by timestamp (a cut GOP, open-GOP leading
 * pictures) - open() counts the frames by decoding the whole stream once and read() identifies
 * frames by decode count from a fresh open ("sequential mode"), as the CLI does.
 * Limits: the frame size against max_pixels before any decoding (container header, then every
 * decoder gets max_pixels), n x pixels per read before the frame buffer is allocated, and a wall
 * clock deadline (checked by every read of the input and the decode loop).
 * Not here: the container, packets and decoder plumbing over the mv_input (video_stream.c), the
 * conversion of a decoded frame (video_convert.c), sampling math (video_sample.c), resizing.
 */
#include "mv_video.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifndef MV_HAVE_FFMPEG

mv_status mv_video_open_input(mv_input *in, const mv_video_limits *lim, mv_video **v,
                              mv_video_info *info, mv_err *e)
{
    (void)lim;
    (void)info;
    if (v)
        *v = NULL;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: cannot decode video: built without FFmpeg", in->name);
}

static void keep_input(mv_video *v, mv_input *in)
{
    (void)v;
    (void)in;
}

int mv_video_frames_per_read(const mv_video *v)
{
    (void)v;
    return 1;
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

#include "video_int.h"

#include <libavutil/time.h>
#include <math.h>

/* Decoding forward is preferred over a seek when the wanted frame is at most this many frames
 * ahead, or when no keyframe lies between the current position and it. */
#define MV_SEEK_GAP 12

void mv_video_close(mv_video *v)
{
    if (!v)
        return;
    mv_vconv_free(&v->conv);
    av_frame_free(&v->frame);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    mv_vstream_close(v);
    free(v->pts);
    free(v->key_pts);
    if (v->own_in) {
        mv_input_close(v->own_in);
        free(v->own_in);
    }
    free(v);
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

/* The ffmpeg CLI's -dts_delta_threshold (10 s) in stream time base units: a forward jump larger
 * than this in a format with timestamp discontinuities (AVFMT_TS_DISCONT: MPEG-TS, PS) is one. */
static int64_t ts_jump(const mv_video *v)
{
    return av_rescale_q(10, (AVRational){1, 1}, v->st->time_base);
}

/* One frame's duration in stream time base units (the average frame rate, else the real base
 * rate; 1 when neither is known). */
static int64_t frame_dur(const mv_video *v)
{
    AVRational r = v->st->avg_frame_rate.num > 0 && v->st->avg_frame_rate.den > 0 ? v->st->avg_frame_rate
                                                                                  : v->st->r_frame_rate;
    int64_t dur = r.num > 0 && r.den > 0 ? av_rescale_q(1, av_inv_q(r), v->st->time_base) : 1;
    return dur > 0 ? dur : 1;
}

/* Sequential mode: the time of the frame just decoded with raw timestamp t, corrected as the ffmpeg
 * CLI corrects a format's timestamp discontinuities: where the timestamps go back (or, in MPEG-TS
 * and PS, jump more than 10 s ahead), the frame is timed one frame after the one before it, and
 * the frames after it keep that offset. A frame without a timestamp (the last ones an elementary
 * stream's decoder flushes) is timed one frame after the one before it too, as the CLI times it;
 * none before it had one: none. */
static int64_t seq_time(mv_video *v, int64_t t)
{
    if (t == AV_NOPTS_VALUE) {
        if (v->seq_prev != AV_NOPTS_VALUE)
            v->seq_prev += frame_dur(v);
        return v->seq_prev;
    }
    int64_t a = t + v->seq_shift;
    if (v->seq_prev != AV_NOPTS_VALUE && (v->fmt->iformat->flags & AVFMT_TS_DISCONT) &&
        (a <= v->seq_prev || a - v->seq_prev > ts_jump(v))) {
        int64_t dur = frame_dur(v);
        v->seq_shift += v->seq_prev + dur - a;
        a = v->seq_prev + dur;
    }
    v->seq_prev = a;
    return a;
}

/* The demux-only pass: packet timestamps -> frame index, keyframes -> seek points. */
static mv_status index_stream(mv_video *v, mv_err *e)
{
    int64_t cap = 256, np = 0, kcap = 16;
    int missing_ts = 0, discarded = 0, ret;
    v->pts = malloc(cap * sizeof *v->pts);
    v->key_pts = malloc(kcap * sizeof *v->key_pts);
    if (!v->pts || !v->key_pts)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory indexing frames", v->path);
    int64_t expected = v->st->nb_frames, max_pts = INT64_MIN;
    if (v->si < 16 && v->head_index[v->si] > 0 && v->head_index[v->si] < expected)
        expected = v->head_index[v->si]; /* an AVI's dropped frames: listed, no packet */
    int restarts = 0;
    for (;;) {
        ret = av_read_frame(v->fmt, v->pkt);
        if (ret == AVERROR_EOF)
            break;
        if (ret < 0) {
            v->n = expected > np ? expected : np + 1;
            return mv_vstream_fail_frame(v, e, np, ret, NULL);
        }
        if (v->pkt->stream_index != v->si) {
            av_packet_unref(v->pkt);
            continue;
        }
        if (v->pkt->flags & AV_PKT_FLAG_DISCARD) { /* before an edit list's start: no frame */
            discarded++;
            av_packet_unref(v->pkt);
            continue;
        }
        /* a packet's dts is not its frame's timestamp (B-frames): without pts, count by decoding */
        int64_t t = v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
        if (v->pkt->pts == AV_NOPTS_VALUE)
            missing_ts = 1;
        /* a keyframe at or before a time already seen: the timestamps restart (concatenated
         * recordings); sorting them would reorder the frames */
        if (t != AV_NOPTS_VALUE && (v->pkt->flags & AV_PKT_FLAG_KEY) && t <= max_pts)
            restarts = 1;
        if (t != AV_NOPTS_VALUE && t > max_pts)
            max_pts = t;
        if (push_i64(&v->pts, &np, &cap, t) ||
            ((v->pkt->flags & AV_PKT_FLAG_KEY) && t != AV_NOPTS_VALUE &&
             push_i64(&v->key_pts, &v->nkey, &kcap, t))) {
            av_packet_unref(v->pkt);
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory indexing frames", v->path);
        }
        av_packet_unref(v->pkt);
    }
    if (expected > 0 && np + discarded < expected) {
        v->n = expected;
        return mv_vstream_fail_frame(v, e, np, AVERROR_INVALIDDATA,
                                     "file is truncated (the container lists more frames)");
    }
    v->n = np;
    if (np == 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: the video stream has no frames", v->path);
    qsort(v->pts, np, sizeof *v->pts, cmp_i64);
    for (int64_t i = 1; i < np && !missing_ts; i++)
        if (v->pts[i] == v->pts[i - 1])
            missing_ts = 1;
    qsort(v->key_pts, v->nkey, sizeof *v->key_pts, cmp_i64);
    for (int64_t i = 1; i < np && !restarts && (v->fmt->iformat->flags & AVFMT_TS_DISCONT); i++)
        restarts = v->pts[i] != AV_NOPTS_VALUE && v->pts[i - 1] != AV_NOPTS_VALUE &&
                   v->pts[i] - v->pts[i - 1] > ts_jump(v);
    v->sequential = missing_ts || discarded || restarts || v->nkey == 0;
    return MV_OK;
}

/* Sequential mode: the frames are what the decoder outputs from a fresh open, as the CLI counts
 * them (packets that give no frame, frames dropped by an edit list, streams without usable
 * timestamps); one decoding pass, no conversion. */
static mv_status count_by_decoding(mv_video *v, mv_err *e)
{
    v->sequential = 1;
    int ret = mv_vstream_rewind(v);
    if (ret < 0)
        return mv_vstream_fail_frame(v, e, 0, ret, NULL);
    int64_t n = 0;
    for (;;) {
        ret = mv_vstream_next_frame(v);
        if (ret == AVERROR_EOF)
            break;
        if (ret < 0)
            return mv_vstream_fail_frame(v, e, n, ret, NULL);
        if (n == 0)
            v->t_first = mv_vstream_frame_ts(v->frame);
        av_frame_unref(v->frame);
        n++;
    }
    if (n == 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: decode failed at frame 0 of %lld: no frame could be decoded",
                       v->path, (long long)v->n);
    v->n = n;
    v->positioned = 0;
    return MV_OK;
}

/* A video over in under lim: its frame, packet and converter allocated, even when it fails (so
 * that mv_video_close frees them). */
static mv_status video_new(mv_input *in, const mv_video_limits *lim, mv_video **out, mv_err *e)
{
    mv_video *v = *out = calloc(1, sizeof *v);
    if (!v)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", in->name);
    v->in = in;
    v->path = in->name;
    v->frame = av_frame_alloc();
    v->pkt = av_packet_alloc();
    if (!v->frame || mv_vconv_init(&v->conv) < 0 || !v->pkt)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", v->path);
    v->t_first = AV_NOPTS_VALUE;
    v->max_pixels = lim && lim->max_pixels ? lim->max_pixels : MV_DECODE_MAX_PIXELS_DEFAULT;
    if (lim && lim->timeout_s > 0)
        v->deadline_us = av_gettime_relative() + (int64_t)(lim->timeout_s * 1e6);
    return MV_OK;
}

/* The best video stream and its decoder, opened under lim; the other streams are discarded. */
static mv_status open_decoder(mv_video *v, const mv_video_limits *lim, mv_err *e)
{
    const AVCodec *codec = NULL;
    int ret = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret == AVERROR_STREAM_NOT_FOUND)
        return mv_fail(e, MV_ERR_FORMAT, "%s: no video stream", v->path);
    if (ret == AVERROR_DECODER_NOT_FOUND || (ret >= 0 && !codec)) {
        int i = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: no decoder for video codec '%s' in this FFmpeg build",
                       v->path, i >= 0 ? avcodec_get_name(v->fmt->streams[i]->codecpar->codec_id) : "?");
    }
    if (ret < 0)
        return mv_vstream_fail_av(v, e, ret, "finding the video stream");
    v->si = ret;
    v->st = v->fmt->streams[ret];
    mv_vstream_discard_others(v);
    if (!(v->dec = avcodec_alloc_context3(codec)))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", v->path);
    if ((ret = avcodec_parameters_to_context(v->dec, v->st->codecpar)) < 0)
        return mv_vstream_fail_av(v, e, ret, "decoder parameters");
    v->dec->pkt_timebase = v->st->time_base;
    /* frame threading does not change the output; 0 = auto (one thread per CPU) */
    v->dec->thread_count = lim && lim->threads > 0 ? lim->threads : 0;
    if (v->max_pixels > 0)
        v->dec->max_pixels = v->max_pixels; /* a later, larger frame fails to decode */
    if ((ret = avcodec_open2(v->dec, codec, NULL)) < 0)
        return mv_vstream_fail_av(v, e, ret, "opening the decoder");
    return MV_OK;
}

/* Decodes the first frame: proves the stream decodes, gives the frame size and a frame-level
 * display matrix (which the CLI prefers over the stream's). When that frame is not the first
 * packet by timestamp (packets before it cannot be decoded: a stream cut in the middle of a GOP,
 * leading pictures of an open GOP), the packet index is not the CLI's frame list: sequential. */
static mv_status probe_first_frame(mv_video *v, mv_err *e)
{
    int ret;
    if ((ret = mv_vstream_rewind(v)) < 0)
        return mv_vstream_fail_frame(v, e, 0, ret, NULL);
    if ((ret = mv_vstream_next_frame(v)) < 0)
        return mv_vstream_fail_frame(v, e, 0, ret, ret == AVERROR_EOF ? "no frame could be decoded" : NULL);
    const AVFrameSideData *sd = av_frame_get_side_data(v->frame, AV_FRAME_DATA_DISPLAYMATRIX);
    const int32_t *dm = sd && sd->size >= 9 * sizeof(int32_t) ? (const int32_t *)sd->data
                        : (const int32_t *)av_stream_get_side_data(v->st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    if (mv_vstream_too_big(v, v->frame->width, v->frame->height))
        return mv_vstream_fail_too_big(v, e, v->frame->width, v->frame->height);
    mv_vconv_setup(&v->conv, dm, v->frame->width, v->frame->height);
    int64_t t0 = mv_vstream_frame_ts(v->frame);
    av_frame_unref(v->frame);
    if (!v->sequential && (t0 == AV_NOPTS_VALUE || t0 != v->pts[0]))
        v->sequential = 1;
    return MV_OK;
}

static void describe(const mv_video *v, mv_video_info *info)
{
    AVRational r = v->st->avg_frame_rate;
    info->total_frames = v->n;
    info->fps = r.num > 0 && r.den > 0 ? av_q2d(r) : 0.0;
    info->duration = info->fps > 0 ? (double)v->n / info->fps : 0.0;
    info->width = v->conv.out_w;
    info->height = v->conv.out_h;
    info->rotation = v->conv.rotation;
    info->codec = v->dec->codec->name;
}

mv_status mv_video_open_input(mv_input *in, const mv_video_limits *lim, mv_video **out,
                              mv_video_info *info, mv_err *e)
{
    *out = NULL;
    mv_video *v = NULL;
    mv_status st = mv_input_make_seekable(in, e);
    if (st == MV_OK)
        st = video_new(in, lim, &v, e);
    if (st == MV_OK)
        st = mv_vstream_open(v, e);
    if (st == MV_OK)
        st = open_decoder(v, lim, e);
    if (st == MV_OK)
        st = index_stream(v, e);
    if (st == MV_OK)
        st = probe_first_frame(v, e);
    if (st == MV_OK && v->sequential)
        st = count_by_decoding(v, e);
    if (st != MV_OK) {
        mv_video_close(v);
        return st;
    }
    v->positioned = 0; /* the next read seeks or rewinds */
    describe(v, info);
    *out = v;
    return MV_OK;
}

static void keep_input(mv_video *v, mv_input *in) { v->own_in = in; }

/* Positions the decoder so that the next frames lead to pts target (timestamp mode). */
static int seek_before(mv_video *v, int64_t key)
{
    if (!mv_vstream_exact_seek(v->fmt))
        return mv_vstream_rewind(v);
    int ret = av_seek_frame(v->fmt, v->si, v->key_pts[key], AVSEEK_FLAG_BACKWARD);
    if (ret < 0)
        return mv_vstream_rewind(v);
    avcodec_flush_buffers(v->dec);
    v->flushing = v->at_eof = 0;
    v->positioned = 1;
    v->last_pts = INT64_MIN;
    return 0;
}

/* next_frame on the way to frame idx: a stream that ends or fails there is idx's error. */
static mv_status next_frame_for(mv_video *v, int64_t idx, mv_err *e)
{
    int ret = mv_vstream_next_frame(v);
    if (ret == AVERROR_EOF)
        return mv_vstream_fail_frame(v, e, idx, ret, "the stream ended before this frame");
    return ret < 0 ? mv_vstream_fail_frame(v, e, idx, ret, NULL) : MV_OK;
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
        if (idx - cur > MV_SEEK_GAP && v->key_pts[key] > v->last_pts && mv_vstream_exact_seek(v->fmt))
            need_seek = 1;
    }
    int ret, tries = 0;
    if (need_seek && (ret = seek_before(v, key)) < 0)
        return mv_vstream_fail_frame(v, e, idx, ret, NULL);
    for (;;) {
        mv_status st = next_frame_for(v, idx, e);
        if (st)
            return st;
        int64_t t = mv_vstream_frame_ts(v->frame);
        int first = v->last_pts == INT64_MIN;
        if (t != AV_NOPTS_VALUE)
            v->last_pts = t;
        if (t == target)
            return MV_OK;
        if (t != AV_NOPTS_VALUE && t > target) {
            /* Overshot: after a seek the decoder started past the target (leading frames of an
             * open GOP, or a demuxer that landed late): restart from an earlier keyframe. */
            if (first && mv_vstream_exact_seek(v->fmt) && tries < 3 && key > 0) {
                tries++;
                key--;
                if ((ret = seek_before(v, key)) < 0)
                    return mv_vstream_fail_frame(v, e, idx, ret, NULL);
                continue;
            }
            if (first && mv_vstream_exact_seek(v->fmt) && tries < 4) {
                tries = 4;
                if ((ret = mv_vstream_rewind(v)) < 0)
                    return mv_vstream_fail_frame(v, e, idx, ret, NULL);
                continue;
            }
            return mv_vstream_fail_frame(v, e, idx, AVERROR_INVALIDDATA,
                                         "the decoder did not produce this frame");
        }
        av_frame_unref(v->frame);
    }
}

/* Sequential mode: decode frame idx (decode-order count) into v->frame. */
static mv_status get_by_count(mv_video *v, int64_t idx, mv_err *e)
{
    int ret;
    if (!v->positioned || v->seq_count > idx) {
        if ((ret = mv_vstream_rewind(v)) < 0)
            return mv_vstream_fail_frame(v, e, idx, ret, NULL);
        v->seq_shift = 0;
        v->seq_prev = AV_NOPTS_VALUE;
    }
    for (;;) {
        mv_status st = next_frame_for(v, idx, e);
        if (st)
            return st;
        seq_time(v, mv_vstream_frame_ts(v->frame));
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
    int ow = v->conv.out_w, oh = v->conv.out_h;
    if (n > mv_video_frames_per_read(v))
        return mv_fail(e, MV_ERR_LIMIT,
                       "%s: %d frames of %dx%d (%lld pixels) exceed the limit of %lld pixels per read "
                       "(--max-decode-pixels)", v->path, n, ow, oh, (long long)n * ow * oh, v->max_pixels);
    size_t fsz = (size_t)ow * oh * 3;
    uint8_t *buf = malloc(fsz * n);
    if (!buf)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for %d frames of %dx%d", v->path, n, ow, oh);
    AVRational tb = v->st->time_base;
    int64_t t0 = v->sequential ? v->t_first : v->pts[0];
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
            return mv_vstream_fail_frame(v, e, idx, AVERROR_INVALIDDATA, "decoded frame has no size");
        }
        int ret = mv_vconv_frame(&v->conv, v->frame, buf + fsz * k);
        int64_t t = v->sequential ? v->seq_prev : mv_vstream_frame_ts(v->frame);
        av_frame_unref(v->frame);
        if (ret < 0) {
            free(buf);
            return mv_vstream_fail_frame(v, e, idx, ret, NULL);
        }
        if (ts)
            ts[k] = t == AV_NOPTS_VALUE || t0 == AV_NOPTS_VALUE ? NAN : (double)(t - t0) * av_q2d(tb);
        have = idx;
    }
    *frames = buf;
    return MV_OK;
}

int64_t mv_video_decoded_frames(const mv_video *v) { return v ? v->decoded : 0; }

int mv_video_frames_per_read(const mv_video *v)
{
    long long px = (long long)v->conv.out_w * v->conv.out_h;
    if (v->max_pixels < 0 || px <= 0)
        return INT_MAX;
    long long k = v->max_pixels / px;
    return k < 1 ? 1 : k > INT_MAX ? INT_MAX : (int)k;
}

#endif /* MV_HAVE_FFMPEG */

mv_status mv_video_open_with(const char *path, const mv_video_limits *lim, mv_video **v,
                             mv_video_info *info, mv_err *e)
{
    *v = NULL;
    mv_input *in = malloc(sizeof *in);
    if (!in)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    mv_status st = mv_input_open_path(in, path, e);
    if (st == MV_OK)
        st = mv_video_open_input(in, lim, v, info, e);
    if (st != MV_OK) {
        mv_input_close(in);
        free(in);
        return st;
    }
    keep_input(*v, in);
    return MV_OK;
}

mv_status mv_video_open(const char *path, mv_video **v, mv_video_info *info, mv_err *e)
{
    return mv_video_open_with(path, NULL, v, info, e);
}

mv_status mv_video_open_limited(const char *path, double timeout_s, mv_video **v,
                                mv_video_info *info, mv_err *e)
{
    mv_video_limits lim = {.timeout_s = timeout_s};
    return mv_video_open_with(path, &lim, v, info, e);
}
