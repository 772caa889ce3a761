/* decode_video.c - video files to RGB24 frames with libavformat/libavcodec (FFmpeg 5.1): demuxing,
 * decoding, the frame index, seeking, and the per-input limits (time, pixels).
 *
 * What it reproduces: the frames `ffmpeg -i FILE -fps_mode passthrough -pix_fmt rgb24 -f rawvideo`
 * writes, in that order; the conversion of each decoded frame is video_convert.c. The bytes come
 * from an mv_input (a file, memory, or a stream first read into memory) through an AVIOContext.
 * Frames are numbered in presentation order. open() demuxes every packet once (no decoding) and
 * keeps the sorted timestamps: index i <-> pts[i]. read() decodes forward while the next wanted
 * frame is near, otherwise seeks to the keyframe at or before it and decodes up to its pts.
 * When the packets are not the CLI's frame list - a packet without pts, duplicate pts, no
 * keyframes, packets an edit list discards, or a first decodable frame that is not the first
 * packet by timestamp (a cut GOP, open-GOP leading pictures) - open() counts the frames by decoding
 * the whole stream once and read() identifies frames by decode count from a fresh open
 * ("sequential mode"), as the CLI does.
 * Limits: the frame size against max_pixels before any decoding (container header, then every
 * decoder gets max_pixels), n x pixels per read before the frame buffer is allocated, and a wall
 * clock deadline through the demuxer's interrupt callback and the decode loop.
 * Not here: sampling math (video_sample.c), resizing to the model size.
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

#include "mv_video_convert.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/time.h>
#include <math.h>

/* Decoding forward is preferred over a seek when the wanted frame is at most this many frames
 * ahead, or when no keyframe lies between the current position and it. */
#define MV_SEEK_GAP 12

struct mv_video {
    const char *path;       /* in->name, for messages */
    mv_input *in;           /* the bytes (seekable), read through pb */
    mv_input *own_in;       /* in, when opened by path here (closed with the video) */
    AVIOContext *pb;        /* the demuxer's reader over in, made again at each open_input() */
    int64_t io_pos;         /* pb's offset in in */
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
    int sequential;         /* frames identified by decode count (counted by decoding at open) */
    int64_t t_first;        /* sequential mode: timestamp of the first frame (AV_NOPTS_VALUE if none) */
    long long max_pixels;   /* per frame, and frames x pixels per read; < 0: no limit */
    int big_w, big_h;       /* open_input() saw a frame size over max_pixels */
    /* decoder position */
    int positioned;         /* decoder state continues from a seek or the start */
    int64_t last_pts;       /* pts of the last frame produced (INT64_MIN after a seek) */
    int64_t seq_count;      /* sequential mode: frames produced since the start */
    int flushing, at_eof;
    mv_vconv conv;          /* rotation + RGB conversion (video_convert.c) */
    AVFrame *frame;
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

/* The demuxer reads in through an AVIOContext: pread at its own offset, so that every open_input()
 * starts afresh at 0 and the mv_input's own position is left alone. As FFmpeg's file protocol
 * does, each read first checks the time limit (the interrupt callback). */
static int io_read(void *opaque, uint8_t *buf, int n)
{
    mv_video *v = opaque;
    if (interrupt_cb(v))
        return AVERROR_EXIT;
    ssize_t k = mv_input_pread(v->in, buf, (size_t)n, (uint64_t)v->io_pos);
    if (k < 0)
        return AVERROR(EIO);
    if (k == 0)
        return AVERROR_EOF;
    v->io_pos += k;
    return (int)k;
}

static int64_t io_seek(void *opaque, int64_t off, int whence)
{
    mv_video *v = opaque;
    int64_t size = mv_input_size(v->in);
    if (whence & AVSEEK_SIZE)
        return size;
    whence &= ~AVSEEK_FORCE;
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? v->io_pos : whence == SEEK_END ? size : -1;
    if (base < 0 || off < -base)
        return AVERROR(EINVAL);
    v->io_pos = base + off;
    return v->io_pos;
}

#define MV_AVIO_BUFFER (32 << 10) /* the file protocol's IO_BUFFER_SIZE */

static void free_avio(mv_video *v)
{
    if (v->pb)
        av_freep(&v->pb->buffer); /* FFmpeg may have replaced the one given */
    avio_context_free(&v->pb);
}

static int new_avio(mv_video *v)
{
    free_avio(v);
    uint8_t *buf = av_malloc(MV_AVIO_BUFFER);
    if (buf)
        v->pb = avio_alloc_context(buf, MV_AVIO_BUFFER, 0, v, io_read, NULL, io_seek);
    if (!v->pb) {
        av_free(buf);
        return AVERROR(ENOMEM);
    }
    v->io_pos = 0;
    return 0;
}

void mv_video_close(mv_video *v)
{
    if (!v)
        return;
    mv_vconv_free(&v->conv);
    av_frame_free(&v->frame);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);
    free_avio(v);
    free(v->pts);
    free(v->key_pts);
    if (v->own_in) {
        mv_input_close(v->own_in);
        free(v->own_in);
    }
    free(v);
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

/* open_input()'s answer for a frame size over the pixel limit (size in v->big_w x v->big_h). */
#define MV_AVERROR_TOO_BIG FFERRTAG('M', 'V', 'B', 'G')

static int too_big(const mv_video *v, long long w, long long h)
{
    return v->max_pixels > 0 && w > 0 && h > 0 && w * h > v->max_pixels;
}

/* A video stream whose declared frame size is over the limit: MV_AVERROR_TOO_BIG, else 0. */
static int check_stream_sizes(mv_video *v)
{
    for (unsigned i = 0; i < v->fmt->nb_streams; i++) {
        const AVCodecParameters *cp = v->fmt->streams[i]->codecpar;
        if (cp->codec_type == AVMEDIA_TYPE_VIDEO && too_big(v, cp->width, cp->height)) {
            v->big_w = cp->width;
            v->big_h = cp->height;
            return MV_AVERROR_TOO_BIG;
        }
    }
    return 0;
}

/* Opens v->in into v->fmt (fresh context with the time-limit callback and a fresh AVIOContext;
 * the input's name is the URL, for the demuxers' probes by extension) and reads stream info.
 * The pixel limit is checked on the container's header before any decoding, and the decoders that
 * avformat_find_stream_info() runs get it as their max_pixels (they refuse larger frames). */
static int open_input(mv_video *v)
{
    avformat_close_input(&v->fmt);
    if (new_avio(v) < 0 || !(v->fmt = avformat_alloc_context()))
        return AVERROR(ENOMEM);
    v->fmt->interrupt_callback.callback = interrupt_cb;
    v->fmt->interrupt_callback.opaque = v;
    v->fmt->pb = v->pb;
    int ret = avformat_open_input(&v->fmt, v->path, NULL, NULL); /* frees fmt on failure */
    if (ret < 0 || (ret = check_stream_sizes(v)) < 0)
        return ret;
    AVDictionary **opts = NULL;
    unsigned ns = v->fmt->nb_streams;
    if (v->max_pixels > 0 && ns > 0) {
        if (!(opts = av_calloc(ns, sizeof *opts)))
            return AVERROR(ENOMEM);
        for (unsigned i = 0; i < ns && ret >= 0; i++)
            ret = av_dict_set_int(&opts[i], "max_pixels", v->max_pixels, 0);
    }
    if (ret >= 0)
        ret = avformat_find_stream_info(v->fmt, opts);
    for (unsigned i = 0; opts && i < ns; i++)
        av_dict_free(&opts[i]);
    av_free(opts);
    return ret < 0 ? ret : check_stream_sizes(v);
}

static mv_status fail_too_big(const mv_video *v, mv_err *e, long long w, long long h)
{
    return mv_fail(e, MV_ERR_LIMIT,
                   "%s: video frame size %lldx%lld (%lld pixels) exceeds the limit of %lld pixels "
                   "(--max-decode-pixels)", v->path, w, h, w * h, v->max_pixels);
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
    if (exact_seek(v->fmt) && !v->sequential) /* sequential: start exactly as a fresh open */
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
    int missing_ts = 0, discarded = 0, ret;
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
    v->sequential = missing_ts || discarded || v->nkey == 0;
    return MV_OK;
}

/* Sequential mode: the frames are what the decoder outputs from a fresh open, as the CLI counts
 * them (packets that give no frame, frames dropped by an edit list, streams without usable
 * timestamps); one decoding pass, no conversion. */
static mv_status count_by_decoding(mv_video *v, mv_err *e)
{
    v->sequential = 1;
    int ret = rewind_stream(v);
    if (ret < 0)
        return fail_frame(v, e, 0, ret, NULL);
    int64_t n = 0;
    for (;;) {
        ret = next_frame(v);
        if (ret == AVERROR_EOF)
            break;
        if (ret < 0)
            return fail_frame(v, e, n, ret, NULL);
        if (n == 0)
            v->t_first = frame_ts(v->frame);
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

mv_status mv_video_open_input(mv_input *in, const mv_video_limits *lim, mv_video **out,
                              mv_video_info *info, mv_err *e)
{
    *out = NULL;
    const char *path = in->name;
    mv_status st = mv_input_make_seekable(in, e);
    if (st != MV_OK)
        return st;
    mv_video *v = calloc(1, sizeof *v);
    if (!v)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    int ret;
    v->in = in;
    v->path = path;
    v->frame = av_frame_alloc();
    v->pkt = av_packet_alloc();
    if (!v->frame || mv_vconv_init(&v->conv) < 0 || !v->pkt) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    v->t_first = AV_NOPTS_VALUE;
    v->max_pixels = lim && lim->max_pixels ? lim->max_pixels : MV_DECODE_MAX_PIXELS_DEFAULT;
    if (lim && lim->timeout_s > 0)
        v->deadline_us = av_gettime_relative() + (int64_t)(lim->timeout_s * 1e6);
    if (av_log_get_level() == AV_LOG_INFO) /* untouched by the caller: keep FFmpeg's chatter off stderr */
        av_log_set_level(AV_LOG_QUIET);
    ret = open_input(v);
    if (ret == MV_AVERROR_TOO_BIG) {
        st = fail_too_big(v, e, v->big_w, v->big_h);
        goto fail;
    }
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
    /* frame threading does not change the output; 0 = auto (one thread per CPU) */
    v->dec->thread_count = lim && lim->threads > 0 ? lim->threads : 0;
    if (v->max_pixels > 0)
        v->dec->max_pixels = v->max_pixels; /* a later, larger frame fails to decode */
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
    if (too_big(v, v->frame->width, v->frame->height)) {
        st = fail_too_big(v, e, v->frame->width, v->frame->height);
        goto fail;
    }
    mv_vconv_setup(&v->conv, dm, v->frame->width, v->frame->height);
    /* The first frame the decoder gives is not the first packet by timestamp (packets before it
     * cannot be decoded: a stream cut in the middle of a GOP, leading pictures of an open GOP):
     * the packet index is not the CLI's frame list, so count the frames by decoding. */
    int64_t t0 = frame_ts(v->frame);
    av_frame_unref(v->frame);
    if (!v->sequential && (t0 == AV_NOPTS_VALUE || t0 != v->pts[0]))
        v->sequential = 1;
    if (v->sequential && (st = count_by_decoding(v, e)) != MV_OK)
        goto fail;
    v->positioned = 0; /* the next read seeks or rewinds */

    AVRational r = v->st->avg_frame_rate;
    info->total_frames = v->n;
    info->fps = r.num > 0 && r.den > 0 ? av_q2d(r) : 0.0;
    info->duration = info->fps > 0 ? (double)v->n / info->fps : 0.0;
    info->width = v->conv.out_w;
    info->height = v->conv.out_h;
    info->rotation = v->conv.rotation;
    info->codec = codec->name;
    *out = v;
    return MV_OK;
fail:
    mv_video_close(v);
    return st;
}

static void keep_input(mv_video *v, mv_input *in) { v->own_in = in; }

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
            return fail_frame(v, e, idx, AVERROR_INVALIDDATA, "decoded frame has no size");
        }
        int ret = mv_vconv_frame(&v->conv, v->frame, buf + fsz * k);
        int64_t t = frame_ts(v->frame);
        av_frame_unref(v->frame);
        if (ret < 0) {
            free(buf);
            return fail_frame(v, e, idx, ret, NULL);
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
