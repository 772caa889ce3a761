/* image.c - the still-image decoder's entry points (mv_image.h): take the input's head bytes,
 * hand the input to its format's decoder through the table in sniff.c, apply the EXIF orientation,
 * fill the mv_image.
 *
 * The limits are set here and enforced by every decoder (image_int.h): the decompression-bomb
 * guard on the header's size before any pixel buffer is allocated (max_pixels, PIL's threshold by
 * default), and the wall-clock deadline of --timeout, from the call on. The decoders read the
 * input once, from its first byte, and nothing after the image's end. The path and memory entry
 * points open an mv_input and close it. Not here: the formats themselves (image_<format>.c),
 * sniffing (sniff.c), orientation parsing (orientation.c), resizing.
 */
#include "image_int.h"

#include "mv_sniff.h"

#include <stdlib.h>
#include <string.h>

mv_status mv_image_decode_input(mv_input *in, long long max_pixels, double timeout_s, mv_image *img,
                                mv_err *e)
{
    const char *name = in->name;
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", name);
    memset(img, 0, sizeof *img);
    double deadline = timeout_s > 0 ? mv_now() + timeout_s : 0;
    size_t n;
    const uint8_t *head = mv_input_head(in, &n);
    if (n == 0) return mv_fail(e, MV_ERR_FORMAT, "%s: empty file", name);
    if (mv_input_rewind(in) != 0)
        return mv_fail(e, MV_ERR_USAGE, "%s: the input was read past its first bytes", name);
    const mv_image_format *fmt = mv_image_format_of(head, n);
    if (!fmt) {
        char list[128];
        switch (mv_sniff(head, n)) {
        case MV_MEDIA_VIDEO:
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: is a video (%s), not a still image", name,
                           mv_sniff_format(head, n));
        case MV_MEDIA_IMAGE_OTHER:
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: %s images are not supported (%s only)", name,
                           mv_sniff_format(head, n), mv_sniff_image_formats(", ", list, sizeof list));
        default:
            return mv_fail(e, MV_ERR_FORMAT, "%s: not a %s image (unrecognised file signature)", name,
                           mv_sniff_image_formats(" or ", list, sizeof list));
        }
    }
    mv_image_req req = {.in = in, .name = name, .max_pixels = max_pixels, .deadline = deadline};
    mv_image_raw raw = {.orientation = 1};
    mv_status s = fmt->decode(&req, &raw, e);
    if (s != MV_OK) return s;
    int ow, oh;
    uint8_t *out = mv_orientation_apply(raw.rgb, raw.w, raw.h, raw.orientation, &ow, &oh);
    if (!out) {
        free(raw.rgb);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory rotating a %dx%d image", name, raw.w, raw.h);
    }
    if (out != raw.rgb) free(raw.rgb);
    img->rgb = out;
    img->width = ow;
    img->height = oh;
    img->src_width = raw.w;
    img->src_height = raw.h;
    img->orientation = raw.orientation;
    img->format = fmt->name;
    return MV_OK;
}

mv_status mv_image_decode_limited(const char *path, long long max_pixels, double timeout_s,
                                  mv_image *img, mv_err *e)
{
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", path);
    memset(img, 0, sizeof *img);
    mv_input in;
    mv_status s = mv_input_open_path(&in, path, e);
    if (s != MV_OK) return s;
    s = mv_image_decode_input(&in, max_pixels, timeout_s, img, e);
    mv_input_close(&in);
    return s;
}

mv_status mv_image_decode(const char *path, long long max_pixels, mv_image *img, mv_err *e)
{
    return mv_image_decode_limited(path, max_pixels, 0, img, e);
}

mv_status mv_image_decode_mem(const uint8_t *buf, size_t len, const char *name,
                              long long max_pixels, mv_image *img, mv_err *e)
{
    if (!name) name = "<memory>";
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", name);
    memset(img, 0, sizeof *img);
    mv_input in;
    mv_status s = mv_input_open_mem(&in, buf, len, name, e);
    if (s != MV_OK) return s;
    s = mv_image_decode_input(&in, max_pixels, 0, img, e);
    mv_input_close(&in);
    return s;
}

void mv_image_free(mv_image *img)
{
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
