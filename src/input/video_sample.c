/* video_sample.c - HF Qwen3VLVideoProcessor frame-count and frame-index math (transformers 5.17
 * video_processing_qwen3_vl.py; docs/hf-reference.md §5), in doubles like Python floats.
 * Always built (no FFmpeg needed). Not here: decoding (decode_video.c), the video smart_resize,
 * pixel resizing and patchify (preprocess.c).
 */
#include "mv_video.h"

#include <math.h>

/* Python round() on a float: half to even. rint() in the default rounding mode does that. */
static double py_round(double x) { return rint(x); }

int mv_video_num_frames(int64_t total, double video_fps, double fps, int min_frames, int max_frames)
{
    if (total < 0)
        return -1;
    int64_t n;
    if (fps > 0) {
        if (!(video_fps > 0))
            video_fps = 24.0; /* HF: metadata.fps None -> 24 with a warning */
        double x = (double)total / video_fps * fps; /* Python: int(total / fps_video * fps) */
        n = x >= 9.0e18 ? INT64_MAX : (int64_t)x; /* int() truncates toward zero */
        if (n < min_frames)
            n = min_frames;
        if (n > max_frames)
            n = max_frames;
        if (n > total)
            n = total;
    } else {
        n = total < min_frames ? min_frames : total;
        if (n > max_frames)
            n = max_frames;
    }
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

void mv_video_indices(int64_t total, int n, int64_t *idx)
{
    /* numpy 1.24 linspace(start=0, stop=total-1, num=n), endpoint=True:
     *   step = delta / (n-1); y[i] = i * step (or i / div * delta when step == 0); y += start;
     *   y[-1] = stop.  Then np.round (half to even) and astype(int). */
    if (n <= 0)
        return;
    double delta = (double)(total - 1);
    if (n == 1) {
        idx[0] = (int64_t)py_round(0.0 * delta + 0.0);
        return;
    }
    double div = (double)(n - 1);
    double step = delta / div;
    for (int i = 0; i < n; i++) {
        double y = step == 0.0 ? (double)i / div * delta : (double)i * step;
        y += 0.0;
        if (i == n - 1)
            y = delta;
        idx[i] = (int64_t)py_round(y);
    }
}
