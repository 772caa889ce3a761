/* video_int.h - inside the video decoder (src/input/, FFmpeg builds only): the state of an open
 * video, shared by decode_video.c (the frame index: open, read, close) and video_stream.c (the
 * FFmpeg plumbing beneath it: the container opened over the mv_input, packets to decoded frames,
 * the restart at the start, the time limit and the failure messages). decode_video.c calls down
 * into video_stream.c, never the other way. Not a public header: include/mv_video.h is the API.
 */
#ifndef MV_VIDEO_INT_H
#define MV_VIDEO_INT_H

#include "mv_video.h"
#include "mv_video_convert.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

struct mv_video {
    const char *path;       /* in->name, for messages */
    mv_input *in;           /* the bytes (seekable), read through pb */
    mv_input *own_in;       /* in, when opened by path here (closed with the video) */
    AVIOContext *pb;        /* the demuxer's reader over in, made again at each open */
    int64_t io_pos;         /* pb's offset in in */
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVStream *st;
    int si;                 /* video stream index */
    int head_index[16];     /* AVI: entries in each stream's index as read with the header (idx1 or
                               OpenDML; 0: none), its non-empty frames: its nb_frames also counts
                               the empty chunks of dropped frames, which give no packet */
    int64_t n;              /* total frames */
    int64_t *pts;           /* [n] presentation timestamps, ascending (empty in sequential mode) */
    int64_t *key_pts;       /* [nkey] keyframe pts, ascending; seek targets (AVSEEK_FLAG_BACKWARD
                               on a pts lands on that keyframe whether the demuxer's index holds
                               pts (matroska) or dts (mov: the next key's dts is larger)) */
    int64_t nkey;
    int sequential;         /* frames identified by decode count (counted by decoding at open) */
    int64_t t_first;        /* sequential mode: timestamp of the first frame (AV_NOPTS_VALUE if none) */
    long long max_pixels;   /* per frame, and frames x pixels per read; < 0: no limit */
    int big_w, big_h;       /* a container header declared a frame size over max_pixels */
    /* decoder position */
    int positioned;         /* decoder state continues from a seek or the start */
    int64_t last_pts;       /* pts of the last frame produced (INT64_MIN after a seek) */
    int64_t seq_count;      /* sequential mode: frames produced since the start */
    int64_t seq_shift;      /* sequential mode: added to the raw timestamps after a discontinuity */
    int64_t seq_prev;       /* sequential mode: corrected time of the last frame produced */
    int flushing, at_eof;
    mv_vconv conv;          /* rotation + RGB conversion (video_convert.c) */
    AVFrame *frame;
    AVPacket *pkt;
    int64_t deadline_us;    /* av_gettime_relative() limit; 0 = none */
    int64_t decoded;        /* frames produced by the decoder since open (statistics) */
};

/* Opens the container of v->in into v->fmt and reads its stream info: MV_ERR_LIMIT when a video
 * stream's declared frame size is over max_pixels or the time is up, MV_ERR_FORMAT when FFmpeg
 * cannot read it. */
mv_status mv_vstream_open(mv_video *v, mv_err *e);
/* Frees the container and its reader (mv_video_close). */
void mv_vstream_close(mv_video *v);
/* Every stream but v->si is discarded by the demuxer. */
void mv_vstream_discard_others(mv_video *v);
/* Next decoded frame of the video stream into v->frame: 0, AVERROR_EOF at the end, AVERROR_EXIT
 * past the deadline, or an FFmpeg error. */
int mv_vstream_next_frame(mv_video *v);
/* Restarts decoding at the start of the stream: a timestamp seek where mv_vstream_exact_seek(),
 * else the input is opened again. 0 or an FFmpeg error. */
int mv_vstream_rewind(mv_video *v);
/* 1 for demuxers whose timestamp seeks land exactly on index entries (mov/mp4, matroska/webm,
 * avi); others (mpegts, program streams, raw) seek by bisection and may land late or off a
 * keyframe. */
int mv_vstream_exact_seek(const AVFormatContext *f);
/* A decoded frame's timestamp: best effort, else pts (AV_NOPTS_VALUE when neither). */
int64_t mv_vstream_frame_ts(const AVFrame *f);
/* 1 when a w x h frame is over v->max_pixels. */
int mv_vstream_too_big(const mv_video *v, long long w, long long h);
/* 1 past v's deadline. */
int mv_vstream_timed_out(const mv_video *v);

/* The messages, each naming v->path; past the deadline they say "time limit exceeded".
 * "PATH: WHAT: <FFmpeg's reason>" */
mv_status mv_vstream_fail_av(mv_video *v, mv_err *e, int ret, const char *what);
/* "PATH: decode failed at frame IDX of N: <why, or FFmpeg's reason>" */
mv_status mv_vstream_fail_frame(mv_video *v, mv_err *e, int64_t idx, int ret, const char *why);
/* "PATH: video frame size WxH (P pixels) exceeds the limit of M pixels (--max-decode-pixels)" */
mv_status mv_vstream_fail_too_big(const mv_video *v, mv_err *e, long long w, long long h);

#endif
