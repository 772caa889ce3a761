/* image_int.h - inside the still-image decoder (src/input/): the contract between the entry point
 * (image.c), the format table (sniff.c) and the per-format decoders (image_<format>.c), plus what
 * they share: EXIF/XMP orientation (orientation.c) and the per-input limits (inline below, so that
 * no decoder calls back into image.c).
 *
 * A decoder reads the file from its first byte (an mv_input; a read error returns mv_input_fail)
 * and returns the picture as stored (8-bit RGB, alpha dropped) with the orientation its metadata
 * asks for; image.c applies the orientation. Before allocating any pixel buffer it checks the
 * header's size with mv_image_check_size, and it stops at the deadline (mv_image_past) with
 * mv_image_fail_time. Every message starts with the input's name. Adding a format: one file
 * image_<format>.c (a sniff and a decode function, declared here) and one row in sniff.c's
 * table. Not a public header: include/mv_image.h is the API.
 */
#ifndef MV_IMAGE_INT_H
#define MV_IMAGE_INT_H

#include "mv_image.h"
#include "mv_input.h"
#include "mv_interrupt.h"

#include <limits.h>
#include <string.h>

/* What a decoder reads and under which limits. */
typedef struct {
    mv_input *in;         /* positioned at the file's first byte (mv_input_read) */
    const char *name;     /* in->name, for messages */
    long long max_pixels; /* 0: MV_IMAGE_MAX_PIXELS_DEFAULT; < 0: no limit */
    double deadline;      /* an mv_now() value; 0: none */
} mv_image_req;

/* What a decoder gives: rgb [h][w][3] as stored (malloc'd), and the EXIF orientation 1..8 to
 * apply (1: none). */
typedef struct {
    uint8_t *rgb;
    int w, h, orientation;
} mv_image_raw;

/* One row of the format table. */
typedef struct {
    const char *name;  /* mv_image.format and mv_sniff_format: "jpeg" */
    const char *label; /* in messages: "JPEG" */
    int (*sniff)(const uint8_t *head, size_t n); /* 1 when the head bytes are this format */
    mv_status (*decode)(const mv_image_req *r, mv_image_raw *out, mv_err *e);
} mv_image_format;

/* sniff.c: the table, and the row whose sniff accepts head (NULL: none). */
extern const mv_image_format mv_image_formats[];
extern const size_t mv_image_n_formats;
const mv_image_format *mv_image_format_of(const uint8_t *head, size_t n);

/* The decoders (image_jpeg.c, image_png.c, image_webp.c, image_gif.c, image_bmp.c,
 * image_tiff.c). */
int mv_jpeg_sniff(const uint8_t *head, size_t n);
mv_status mv_jpeg_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);
int mv_png_sniff(const uint8_t *head, size_t n);
mv_status mv_png_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);
int mv_webp_sniff(const uint8_t *head, size_t n);
mv_status mv_webp_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);
int mv_gif_sniff(const uint8_t *head, size_t n);
mv_status mv_gif_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);
int mv_bmp_sniff(const uint8_t *head, size_t n);
mv_status mv_bmp_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);
int mv_tiff_sniff(const uint8_t *head, size_t n);
mv_status mv_tiff_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e);

/* orientation.c. EXIF blob (TIFF header, optionally after "Exif\0\0"): 0 when it has no
 * orientation tag (so XMP may be consulted), -1 when the tag's value is not a number equal to
 * an integer (bytes, text, NaN; PIL then leaves the image alone), else the value: the first of
 * the tag's values, as PIL takes it when there are several. */
int mv_exif_orientation(const uint8_t *d, size_t n);
/* XMP packet: PIL's re.search(r'tiff:Orientation(="|>)([0-9])', xmp); 0 when absent. */
int mv_xmp_orientation(const uint8_t *d, size_t n);
/* PIL's "Raw profile type exif" PNG text ("\nexif\n    LEN\nHEX..."): its EXIF orientation. */
int mv_raw_profile_orientation(const char *txt, size_t n);
/* EXIF wins when it has the tag, else XMP; the orientation to apply, 1 when none or invalid. */
int mv_orientation_pick(int exif_o, int xmp_o);
/* ImageOps.exif_transpose of src [h][w][3]: a new buffer (src itself for orientation 1) and the
 * displayed size in *ow, *oh; NULL when out of memory. */
uint8_t *mv_orientation_apply(uint8_t *src, int w, int h, int o, int *ow, int *oh);

/* 1 when head[off..off+len) is magic (and the head is that long). */
static inline int mv_magic_at(const uint8_t *h, size_t n, size_t off, const void *magic, size_t len)
{
    return n >= off + len && memcmp(h + off, magic, len) == 0;
}

/* The decompression-bomb guard on a header's size (before any pixel buffer), fmt the label.
 * Sides up to 2^32 - 1 (BMP and TIFF store 32 bits) are compared without overflow; a side over
 * INT_MAX is refused even without a limit (mv_image_raw holds ints). */
static inline mv_status mv_image_check_size(const char *name, const char *fmt, long long w, long long h,
                                            long long max_pixels, mv_err *e)
{
    if (w <= 0 || h <= 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt %s data: image size %lldx%lld", name, fmt, w, h);
    unsigned long long px = (unsigned long long)w * (unsigned long long)h;
    if (max_pixels == 0) max_pixels = MV_IMAGE_MAX_PIXELS_DEFAULT;
    if (max_pixels > 0 && px > (unsigned long long)max_pixels)
        return mv_fail(e, MV_ERR_LIMIT,
                       "%s: image size %lldx%lld (%llu pixels) exceeds the limit of %lld pixels "
                       "(decompression bomb guard)", name, w, h, px, max_pixels);
    if (w > INT_MAX || h > INT_MAX)
        return mv_fail(e, MV_ERR_LIMIT, "%s: image size %lldx%lld is too large", name, w, h);
    return MV_OK;
}

/* The per-input time limit (--timeout): deadline is an mv_now() value, 0 for none; and the
 * run's interrupt (mv_interrupt.h), which stops a decode as its deadline does. */
static inline int mv_image_past(double deadline)
{
    return (deadline > 0 && mv_now() > deadline) || mv_interrupted();
}

/* 1 when a decoder must keep watching (a deadline, or an interrupt that may come). */
static inline int mv_image_watch(double deadline) { return deadline > 0 || mv_interrupt_watched(); }

static inline mv_status mv_image_fail_time(const char *name, const char *fmt, mv_err *e)
{
    return mv_fail(e, MV_ERR_LIMIT, "%s: %s decode stopped: %s", name, fmt,
                   mv_interrupted() ? "interrupted" : "time limit exceeded (--timeout)");
}

#endif
