/* mv_video_convert.h - decoded video frame -> packed RGB24, the way the ffmpeg CLI (FFmpeg 5.1)
 * does it: display-matrix autorotation on the decoder's planes, then libswscale with the options of
 * the CLI's auto-inserted scale filter (src/input/video_convert.c). Internal to the video module
 * (src/input/decode_video.c); needs FFmpeg. Not here: demuxing, decoding, frame indexing, sampling.
 */
#ifndef MV_VIDEO_CONVERT_H
#define MV_VIDEO_CONVERT_H

#include <libavutil/frame.h>
#include <stdint.h>

struct SwsContext;

enum { MV_ROT_NONE, MV_ROT_TRANSPOSE, MV_ROT_FLIP }; /* how rotate_planes() maps pixels */

typedef struct {
    /* rotation, decided from the display matrix like fftools get_rotation()/autorotate */
    int rot_kind;           /* MV_ROT_* */
    int tdir;               /* transpose dir: 0 cclock_flip, 1 clock, 2 cclock, 3 clock_flip */
    int hflip, vflip;       /* for MV_ROT_FLIP */
    int rotation;           /* clockwise degrees the CLI turns the picture */
    int out_w, out_h;       /* RGB frame size (after rotation) */
    struct SwsContext *sws;
    int sws_w, sws_h, sws_fmt, sws_range;
    AVFrame *rot, *rgb;     /* scratch: rotated planes, aligned RGB24 */
} mv_vconv;

/* Allocates the scratch frames: 0 or AVERROR(ENOMEM). mv_vconv_free releases everything. */
int mv_vconv_init(mv_vconv *c);
void mv_vconv_free(mv_vconv *c);

/* Decides the rotation from a display matrix (m: 9 int32, or NULL) and sets out_w x out_h for
 * decoded frames of w x h. */
void mv_vconv_setup(mv_vconv *c, const int32_t *m, int w, int h);

/* Decoded frame f -> dst, uint8 [out_h, out_w, 3]. 0 or a negative AVERROR. */
int mv_vconv_frame(mv_vconv *c, AVFrame *f, uint8_t *dst);

#endif
