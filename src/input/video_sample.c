/* video_sample.c - HF Qwen3VLVideoProcessor frame-count, frame-index and video smart_resize math
 * (transformers 5.17 video_processing_qwen3_vl.py; QWEN35_VISION.md section 5), in doubles like
 * Python floats. Always built (no FFmpeg needed). Not here: decoding (decode_video.c), pixel
 * resizing and patchify (preprocessing).
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
    double h_bar = py_round(height / f) * f;
    double w_bar = py_round(width / f) * f;
    double t_bar = py_round((double)t / tfactor) * tfactor;
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
