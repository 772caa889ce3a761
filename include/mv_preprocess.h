/* mv_preprocess.h - image preprocessing bit-identical to HF transformers 5.17's default
 * Qwen2VLImageProcessor (torchvision backend, CPU): smart_resize, torch's uint8 antialiased
 * bicubic resize, fused rescale+normalize, and patchify into pixel_values rows
 * (docs/hf-reference.md §4 and §5).
 *
 * Also the video path (HF's Qwen3VLVideoProcessor after frame sampling): the video pixel budget
 * with or without HF's per-frame cap, video smart_resize of all frames, the same resize per
 * frame, temporal patchify.
 *
 * Not here: decoding (mv_image.h), video frame sampling (mv_video.h),
 * the bf16 cast at tower entry (the tower does it).
 */
#ifndef MV_PREPROCESS_H
#define MV_PREPROCESS_H

#include "mv_common.h"
#include "mv_image.h"
#include "mv_model.h"

/* HF image smart_resize(height, width, factor, min_pixels, max_pixels), in doubles with Python's
 * round-half-to-even. MV_ERR_LIMIT when max(h,w)/min(h,w) > 200, MV_ERR_USAGE on non-positive
 * sizes or a zero-sized result. */
mv_status mv_smart_resize(int h, int w, int factor, long long min_px, long long max_px,
                          int *oh, int *ow, mv_err *e);

/* HF qwen3_vl video smart_resize: t sampled frames, h x w frame; factor = patch*merge (32),
 * tfactor = temporal patch (2), min_px/max_px = size shortest_edge/longest_edge (pixel counts).
 * Errors (MV_ERR_FORMAT) where HF raises: t < tfactor, aspect ratio > 200, bad sizes. */
mv_status mv_smart_resize_video(int t, int h, int w, int factor, int tfactor, long long min_px,
                                long long max_px, int *oh, int *ow, mv_err *e);

/* torch CPU uint8 antialiased bicubic resize (interpolate(..., mode="bicubic", antialias=True,
 * align_corners=False) on uint8, as torchvision's resize runs it): a = -0.5 Keys kernel, double
 * weights turned into int16 with a per-axis precision (mv_resize_axis), horizontal pass then
 * vertical pass with a uint8 intermediate [sh][dw][3], an axis of unchanged size skipped,
 * identical size copied. src [sh][sw][3] -> dst [dh][dw][3]. Fails only for lack of memory
 * (MV_ERR_NOMEM) or non-positive sizes (MV_ERR_USAGE). cu/resize.cu is its CUDA twin. */
mv_status mv_resize_bicubic_aa_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);

/* The integer weights of one axis of that resize, in -> out pixels (torch's
 * _compute_index_ranges_int16_weights): output index o takes input indices xmin[o] ..
 * xmin[o] + xsize[o] - 1 with weights w[o * ksize + j] (int16, zero past xsize[o]), and each
 * channel of the output is clamp((2^(prec-1) + sum_j in[xmin[o] + j] * w[o * ksize + j]) >> prec,
 * 0, 255) in int arithmetic (an arithmetic shift). The CPU passes and the CUDA kernels
 * (cu/resize.cu) both apply exactly these, so they agree bit for bit. */
typedef struct {
    int n;             /* output pixels along the axis */
    int ksize;         /* max_interp_size: weights stored per output index */
    int *xmin, *xsize; /* [out] */
    int16_t *w;        /* [out][ksize] */
    unsigned prec;     /* weights_precision */
} mv_resize_axis;
/* MV_OK, MV_ERR_NOMEM, or MV_ERR_USAGE for a non-positive size; a is zeroed on failure. */
mv_status mv_resize_axis_init(mv_resize_axis *a, int in, int out);
void mv_resize_axis_free(mv_resize_axis *a); /* and zeroes it; a zeroed axis is fine */

/* lut[c][v] = fl32(fl32(v - mean'_c) / std'_c), mean'_c = fl32(mean_c / rescale),
 * std'_c = fl32(std_c / rescale): HF's fused rescale+normalize for every uint8 value. */
void mv_norm_lut(const mv_preproc_config *pp, float lut[3][256]);

/* Rows per entry of mv_patchify's output: ceil(n_frames / temporal) * (h / patch) * (w / patch). */
long long mv_patchify_rows(int n_frames, int h, int w, const mv_preproc_config *pp);

/* Normalizes and patchifies n_frames frames [h][w][3] (h, w multiples of patch * merge) into
 * out [grid_t * gh * gw, 3 * temporal * patch * patch] (fp32), grid = {grid_t, gh, gw}.
 * A frame count that is not a multiple of temporal repeats the last frame (a single image is
 * duplicated). Rows are t-major then in merge-block order; columns are (c, t, ph, pw).
 * The CPU backend's forward of uint8 frames runs it; cu/patchify.cu is its CUDA twin. */
void mv_patchify(const uint8_t *const *frames, int n_frames, int h, int w,
                 const mv_preproc_config *pp, float *out, int32_t grid[3]);

/* The size the image path resizes img to (smart_resize with factor = patch * merge and pp's
 * min/max pixels): *rw x *rh, grid = {1, rh / patch, rw / patch}; for a backend that resizes on its
 * device (mv_forward_req.src_size). Errors as mv_preprocess_image's. */
mv_status mv_preprocess_image_size(const mv_image *img, const mv_preproc_config *pp, int32_t grid[3], int *rw,
                                   int *rh, mv_err *e);

/* The whole image path: smart_resize(img) with factor = patch * merge and pp's min/max pixels,
 * resize, patchify. *pixels (malloc'd, [gh*gw, patch_dim]) and grid = {1, gh, gw}. If resized
 * is non-NULL it receives the resized HWC uint8 image (malloc'd) and *rw, *rh its size
 * (rw/rh may be NULL when resized is NULL). pixels NULL skips the patchify (the pipeline hands
 * the resized frame to the backend's forward, which patchifies); grid is set all the same and
 * resized must then be non-NULL. Errors name img->format's file only through the
 * caller: prefix the message with the file name (mv_fail_prefix). */
mv_status mv_preprocess_image(const mv_image *img, const mv_preproc_config *pp, float **pixels,
                              int32_t grid[3], uint8_t **resized, int *rw, int *rh, mv_err *e);

/* The pixel budget (max_pixels) video smart_resize gets for n sampled frames. Uncapped
 * (pp->video_frame_cap 0, transformers 5.17's default): pp->video_max_pixels, shared by all
 * frames. Capped (HF Qwen3VLVideoProcessor.resize with cap_pixels_per_frame=True, the default
 * from transformers 5.22 and qwen-vl-utils' rule), with factor = patch * merge:
 *   per_frame = max(min(max_video_tokens * factor^2, video_max_pixels // n),
 *                   int(video_min_pixels * 1.05))
 *   max_pixels = per_frame * n
 * (Python ints; a product past LLONG_MAX saturates, which smart_resize treats the same: no frame
 * set reaches it). min_pixels stays video_min_pixels under both rules. n < 1 gives
 * video_max_pixels. */
long long mv_video_max_pixels(const mv_preproc_config *pp, int n);

/* One line saying which video budget rule pp uses and where it came from (for -v), into buf. */
void mv_video_rule_describe(const mv_preproc_config *pp, char *buf, size_t size);

/* Supplies frames [first, first + count) of a video's sampled frames: *frames receives count
 * frames [count][h][w][3] (uint8 HWC, malloc'd; the callee frees it). */
typedef mv_status (*mv_frame_reader)(void *ud, int first, int count, uint8_t **frames, mv_err *e);

/* The whole video path after sampling: n frames of w x h read `chunk` at a time through read (so
 * at most chunk full-size frames are in memory), mv_smart_resize_video with pp's video budget
 * (mv_video_max_pixels: the per-frame cap when on), the same resize per frame, patchify in
 * temporal groups. *pixels (malloc'd, [ceil(n/temporal)*gh*gw, patch_dim]) and grid =
 * {ceil(n/temporal), gh, gw}; resized (may be NULL) receives the resized frames [n][rh][rw][3].
 * As for images, pixels NULL skips the patchify (resized then non-NULL; grid still set).
 * Callers prefix errors with the file. */
mv_status mv_preprocess_video(mv_frame_reader read, void *ud, int chunk, int n, int w, int h,
                              const mv_preproc_config *pp, float **pixels, int32_t grid[3],
                              uint8_t **resized, int *rw, int *rh, mv_err *e);

/* For a backend that resizes on its device (mv_backend.resizes): the target size *rw x *rh and the
 * grid mv_preprocess_video gives n frames of w x h, and the n frames as read, back to back in
 * *decoded (malloc'd, [n][h][w][3]). *decoded stays NULL (and nothing is read) when a frame has
 * over 4x the target's pixels: the caller then takes mv_preprocess_video, so that what is held
 * and uploaded stays within 4x the resized frames. Callers prefix errors with the file. */
mv_status mv_preprocess_video_decoded(mv_frame_reader read, void *ud, int chunk, int n, int w, int h,
                                      const mv_preproc_config *pp, int32_t grid[3], uint8_t **decoded,
                                      int *rw, int *rh, mv_err *e);

#endif
