/* image.c - the still-image decoder's entry points (mv_image.h): sniff the file, hand it to its
 * format's decoder through the table in sniff.c, apply the EXIF orientation, fill the mv_image.
 *
 * The limits are set here and enforced by every decoder (image_int.h): the decompression-bomb
 * guard on the header's size before any pixel buffer is allocated (max_pixels, PIL's threshold by
 * default), and the wall-clock deadline of --timeout, from the call on. Files are read as a stdio
 * stream from their first byte (the file itself, or fmemopen for mv_image_decode_mem); non-regular
 * files are refused before reading (mv_open_regular). Not here: the formats themselves
 * (image_<format>.c), sniffing (sniff.c), orientation parsing (orientation.c), resizing.
 */
#include "image_int.h"

#include "mv_sniff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Decodes the image in f (positioned at its start); name is for messages. */
static mv_status decode_stream(FILE *f, const char *name, long long max_pixels, double deadline,
                               mv_image *img, mv_err *e)
{
    uint8_t head[MV_SNIFF_BYTES];
    size_t n = fread(head, 1, sizeof head, f);
    if (ferror(f)) return mv_fail(e, MV_ERR_IO, "%s: read error", name);
    if (n == 0) return mv_fail(e, MV_ERR_FORMAT, "%s: empty file", name);
    if (fseek(f, 0, SEEK_SET) != 0) return mv_fail(e, MV_ERR_IO, "%s: cannot seek back to the start", name);
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
    mv_image_req req = {.f = f, .name = name, .max_pixels = max_pixels, .deadline = deadline};
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

mv_status mv_image_decode_mem(const uint8_t *buf, size_t len, const char *name,
                              long long max_pixels, mv_image *img, mv_err *e)
{
    if (!name) name = "<memory>";
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", name);
    memset(img, 0, sizeof *img);
    if (!buf || len == 0) return mv_fail(e, MV_ERR_FORMAT, "%s: empty file", name);
    FILE *f = fmemopen((void *)buf, len, "rb");
    if (!f) return mv_fail(e, MV_ERR_NOMEM, "%s: cannot open a memory stream", name);
    mv_status s = decode_stream(f, name, max_pixels, 0, img, e);
    fclose(f);
    return s;
}

mv_status mv_image_decode_limited(const char *path, long long max_pixels, double timeout_s,
                                  mv_image *img, mv_err *e)
{
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", path);
    memset(img, 0, sizeof *img);
    double deadline = timeout_s > 0 ? mv_now() + timeout_s : 0;
    int fd;
    mv_status s = mv_open_regular(path, &fd, e);
    if (s != MV_OK) return s;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mv_fail(e, MV_ERR_NOMEM, "%s: cannot open a stdio stream", path);
    }
    s = decode_stream(f, path, max_pixels, deadline, img, e);
    fclose(f);
    return s;
}

mv_status mv_image_decode(const char *path, long long max_pixels, mv_image *img, mv_err *e)
{
    return mv_image_decode_limited(path, max_pixels, 0, img, e);
}

void mv_image_free(mv_image *img)
{
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
