/* mv_video.h - video input: decoding with FFmpeg (src/input/decode_video.c) and HF's frame sampling
 * (src/input/video_sample.c).
 *
 * Decoding gives exactly the RGB frames that `ffmpeg -i FILE -fps_mode passthrough -pix_fmt rgb24
 * -f rawvideo -` (FFmpeg 5.1 CLI) writes: the display-matrix rotation applied to the decoded planes
 * as the CLI's autorotate filters do, then libswscale with the options of the CLI's auto-inserted
 * scale filter. Frames are identified by their index in presentation order; the index <-> pts map
 * comes from one demux-only pass at open, so sparse reads seek to a keyframe instead of decoding
 * everything (streams whose packets are not the CLI's frame list are counted by decoding once). Without MV_HAVE_FFMPEG (make NO_VIDEO=1) open/read return MV_ERR_UNSUPPORTED.
 *
 * Sampling follows transformers 5.17 Qwen3VLVideoProcessor.sample_frames (docs/hf-reference.md
 * section 5). Not here: the video smart_resize, resizing pixels, normalization, patchify
 * (mv_preprocess.h).
 */
#ifndef MV_VIDEO_H
#define MV_VIDEO_H

#include "mv_common.h"
#include "mv_input.h"

typedef struct {
    int64_t total_frames; /* frames in presentation order (HF metadata.total_num_frames) */
    double fps;           /* stream average frame rate (PyAV stream.average_rate); 0 if unknown */
    double duration;      /* total_frames / fps (HF VideoMetadata.duration); 0 if fps unknown */
    int width, height;    /* frame size after rotation */
    int rotation;         /* clockwise degrees the CLI turns the picture: 0, 90, 180, 270 */
    const char *codec;    /* decoder name, e.g. "h264" (static string owned by FFmpeg) */
} mv_video_info;

typedef struct mv_video mv_video;

/* Opens the file at path (mv_input_open_path), demuxes the whole video stream once (no decoding) to build the frame index, and
 * checks the container's frame count against the packets found (a truncated file fails here:
 * "clip.mp4: decode failed at frame 24 of 48: Invalid data found when processing input").
 * Errors: MV_ERR_IO (cannot open), MV_ERR_FORMAT (no video stream, corrupt, truncated),
 * MV_ERR_UNSUPPORTED (no decoder, or built without FFmpeg), MV_ERR_LIMIT (timeout). */
mv_status mv_video_open(const char *path, mv_video **v, mv_video_info *info, mv_err *e);
/* Same, with a wall-clock limit in seconds for everything done on this input (open and every
 * later read); timeout_s <= 0 means no limit. The pixel limit is the default one. */
mv_status mv_video_open_limited(const char *path, double timeout_s, mv_video **v,
                                mv_video_info *info, mv_err *e);

typedef struct {
    double timeout_s;     /* wall clock for open and every later read, seconds; <= 0: none */
    long long max_pixels; /* decode budget: a frame may have at most this many pixels (checked on
                             the container header before decoding, and by the decoder on every
                             frame), and one mv_video_read at most n x pixels = this many;
                             0: MV_DECODE_MAX_PIXELS_DEFAULT; < 0: no limit */
    int threads;          /* the decoder's threads: 0 = FFmpeg's choice (one per CPU); a batch
                             decoding many videos at once gives each its share of the CPUs */
} mv_video_limits;

/* Same with explicit limits (lim may be NULL: defaults). Over the pixel limit: MV_ERR_LIMIT
 * "clip.mp4: video frame size 16000x16000 (256000000 pixels) exceeds the limit of 178956970
 * pixels (--max-decode-pixels)", before any frame is decoded. */
mv_status mv_video_open_with(const char *path, const mv_video_limits *lim, mv_video **v,
                             mv_video_info *info, mv_err *e);

/* The same from an open input (mv_input.h; messages name in->name): FFmpeg reads it through an
 * AVIOContext at offsets of its own, the input's name as the URL. A stream is first read into
 * memory (mv_input_make_seekable: the demuxer seeks). in must stay open until mv_video_close. */
mv_status mv_video_open_input(mv_input *in, const mv_video_limits *lim, mv_video **v,
                              mv_video_info *info, mv_err *e);

/* The most frames one mv_video_read may ask for under the pixel budget (>= 1; INT_MAX without a
 * limit): read longer samples in chunks of this size. */
int mv_video_frames_per_read(const mv_video *v);

/* Decodes the frames at indices[0..n) (ascending, each in [0, total_frames)); repeated indices
 * are allowed; n above mv_video_frames_per_read() is refused (MV_ERR_LIMIT) before allocating. *frames receives one malloc'd block uint8 [n, height, width, 3] (caller frees);
 * ts (may be NULL) receives each frame's presentation time in seconds from the first frame.
 * A decode error names the file and frame: "clip.mp4: decode failed at frame 37 of 120: ...". */
mv_status mv_video_read(mv_video *v, const int64_t *indices, int n, uint8_t **frames, double *ts,
                        mv_err *e);
void mv_video_close(mv_video *v);
/* Frames the decoder has produced since open, including the one open() decodes (for tests and
 * benchmarks: a sparse read should not decode every frame). */
int64_t mv_video_decoded_frames(const mv_video *v);

/* --- sampling math (always built) ------------------------------------------------------------ */

/* HF Qwen3VLVideoProcessor.sample_frames frame count. fps > 0: n = int(total / video_fps * fps)
 * then min(max(n, min_frames), max_frames, total); video_fps <= 0 is taken as 24 like HF.
 * fps <= 0 (no fps): min(max(total, min_frames), max_frames). Returns -1 if total < 0. */
int mv_video_num_frames(int64_t total, double video_fps, double fps, int min_frames, int max_frames);

/* idx[0..n) = round_half_even(np.linspace(0, total - 1, n)), numpy's formula exactly. */
void mv_video_indices(int64_t total, int n, int64_t *idx);

#endif
