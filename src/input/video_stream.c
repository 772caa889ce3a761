/* video_stream.c - the FFmpeg plumbing beneath the frame index (video_int.h): the container
 * opened over the video's mv_input through an AVIOContext, packets of the video stream to decoded
 * frames, the restart at the start of the stream, the time limit and the failure messages.
 *
 * The demuxer reads the input with pread at an offset of its own (the input is seekable: a file or
 * memory), so each open starts afresh at 0; the input's name is the URL, so the demuxers' probes by
 * extension see what they see for a path. As FFmpeg's file protocol does, every read checks the
 * time limit first; the demuxer's interrupt callback and the decode loop check it too. The pixel
 * limit is checked on the container's header before any decoding, and the decoders that
 * avformat_find_stream_info() runs get it as their max_pixels. Not here: the frame index, seeking
 * to a frame, conversion to RGB (decode_video.c, video_convert.c).
 */
#ifdef MV_HAVE_FFMPEG

#include "video_int.h"

#include "mv_interrupt.h"

#include <libavutil/time.h>
#include <stdio.h>
#include <string.h>

/* open_input()'s answer for a frame size over the pixel limit (size in v->big_w x v->big_h). */
#define MV_AVERROR_TOO_BIG FFERRTAG('M', 'V', 'B', 'G')

#define MV_AVIO_BUFFER (32 << 10) /* the file protocol's IO_BUFFER_SIZE */

static void averr(int ret, char *buf, size_t len)
{
    if (av_strerror(ret, buf, len) < 0)
        snprintf(buf, len, "FFmpeg error %d", ret);
}

int mv_vstream_timed_out(const mv_video *v)
{
    return (v->deadline_us && av_gettime_relative() > v->deadline_us) || mv_interrupted();
}

static int interrupt_cb(void *opaque) { return mv_vstream_timed_out(opaque); }

mv_status mv_vstream_fail_av(mv_video *v, mv_err *e, int ret, const char *what)
{
    char buf[256];
    if (mv_vstream_timed_out(v))
        return mv_fail(e, MV_ERR_LIMIT, "%s: %s: time limit exceeded", v->path, what);
    averr(ret, buf, sizeof buf);
    return mv_fail(e, ret == AVERROR(ENOMEM) ? MV_ERR_NOMEM : MV_ERR_FORMAT, "%s: %s: %s", v->path,
                   what, buf);
}

mv_status mv_vstream_fail_frame(mv_video *v, mv_err *e, int64_t idx, int ret, const char *why)
{
    char buf[256];
    if (mv_vstream_timed_out(v))
        return mv_fail(e, MV_ERR_LIMIT, "%s: decode stopped at frame %lld of %lld: time limit exceeded",
                       v->path, (long long)idx, (long long)v->n);
    /* the decoder's max_pixels refuses a frame that grew past the limit mid-stream (a new
     * sequence header) as invalid data; its context holds the new size: name the limit instead */
    if (!why && ret != AVERROR(ENOMEM) && v->dec && mv_vstream_too_big(v, v->dec->width, v->dec->height))
        return mv_vstream_fail_too_big(v, e, v->dec->width, v->dec->height);
    if (why)
        snprintf(buf, sizeof buf, "%s", why);
    else
        averr(ret, buf, sizeof buf);
    return mv_fail(e, ret == AVERROR(ENOMEM) ? MV_ERR_NOMEM : MV_ERR_FORMAT,
                   "%s: decode failed at frame %lld of %lld: %s", v->path, (long long)idx,
                   (long long)v->n, buf);
}

mv_status mv_vstream_fail_too_big(const mv_video *v, mv_err *e, long long w, long long h)
{
    return mv_fail(e, MV_ERR_LIMIT,
                   "%s: video frame size %lldx%lld (%lld pixels) exceeds the limit of %lld pixels "
                   "(--max-decode-pixels)", v->path, w, h, w * h, v->max_pixels);
}

/* The AVIOContext's read: pread at its own offset (the mv_input's position is left alone), the
 * time limit checked first as the file protocol checks the interrupt callback. */
static int io_read(void *opaque, uint8_t *buf, int n)
{
    mv_video *v = opaque;
    if (mv_vstream_timed_out(v))
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

int mv_vstream_next_frame(mv_video *v)
{
    for (;;) {
        if (mv_vstream_timed_out(v))
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

int64_t mv_vstream_frame_ts(const AVFrame *f)
{
    return f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
}

int mv_vstream_too_big(const mv_video *v, long long w, long long h)
{
    return v->max_pixels > 0 && w > 0 && h > 0 && w * h > v->max_pixels;
}

/* A video stream whose declared frame size is over the limit: MV_AVERROR_TOO_BIG, else 0. */
static int check_stream_sizes(mv_video *v)
{
    for (unsigned i = 0; i < v->fmt->nb_streams; i++) {
        const AVCodecParameters *cp = v->fmt->streams[i]->codecpar;
        if (cp->codec_type == AVMEDIA_TYPE_VIDEO && mv_vstream_too_big(v, cp->width, cp->height)) {
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
    for (unsigned i = 0; i < 16; i++)
        v->head_index[i] = i < v->fmt->nb_streams && !strcmp(v->fmt->iformat->name, "avi")
                           ? avformat_index_get_entries_count(v->fmt->streams[i]) : 0;
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

void mv_vstream_discard_others(mv_video *v)
{
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        if ((int)i != v->si)
            v->fmt->streams[i]->discard = AVDISCARD_ALL;
}

mv_status mv_vstream_open(mv_video *v, mv_err *e)
{
    if (av_log_get_level() == AV_LOG_INFO) /* untouched by the caller: keep FFmpeg's chatter off stderr */
        av_log_set_level(AV_LOG_QUIET);
    int ret = open_input(v);
    if (ret == MV_AVERROR_TOO_BIG)
        return mv_vstream_fail_too_big(v, e, v->big_w, v->big_h);
    if (ret < 0 && !v->fmt) {
        if (mv_vstream_timed_out(v))
            return mv_fail(e, MV_ERR_LIMIT, "%s: open: time limit exceeded", v->path);
        char buf[256];
        averr(ret, buf, sizeof buf);
        return mv_fail(e, ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) || ret == AVERROR(EISDIR)
                       ? MV_ERR_IO : MV_ERR_FORMAT, "%s: %s", v->path, buf);
    }
    if (ret < 0)
        return mv_vstream_fail_av(v, e, ret, "reading stream info");
    return MV_OK;
}

void mv_vstream_close(mv_video *v)
{
    avformat_close_input(&v->fmt);
    free_avio(v);
}

int mv_vstream_exact_seek(const AVFormatContext *f)
{
    const char *n = f->iformat->name;
    return !strcmp(n, "mov,mp4,m4a,3gp,3g2,mj2") || !strcmp(n, "matroska,webm") || !strcmp(n, "avi");
}

int mv_vstream_rewind(mv_video *v)
{
    int ret = -1;
    if (mv_vstream_exact_seek(v->fmt) && !v->sequential) /* sequential: start exactly as a fresh open */
        ret = av_seek_frame(v->fmt, v->si, v->st->start_time != AV_NOPTS_VALUE ? v->st->start_time : 0,
                            AVSEEK_FLAG_BACKWARD);
    if (ret < 0) {
        if ((ret = open_input(v)) < 0)
            return ret;
        if (v->si >= (int)v->fmt->nb_streams || v->fmt->streams[v->si]->codecpar->codec_id != v->dec->codec_id)
            return AVERROR_INVALIDDATA; /* the reopened file differs */
        v->st = v->fmt->streams[v->si];
        mv_vstream_discard_others(v);
    }
    avcodec_flush_buffers(v->dec);
    v->flushing = v->at_eof = 0;
    v->positioned = 1;
    v->last_pts = INT64_MIN;
    v->seq_count = 0;
    return 0;
}

#endif /* MV_HAVE_FFMPEG */
