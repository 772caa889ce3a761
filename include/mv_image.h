/* mv_image.h - still-image decoding to 8-bit RGB, matching what Hugging Face's `load_image` gives:
 * PIL open, `ImageOps.exif_transpose`, then `convert("RGB")`.
 *
 * Supported: JPEG (libjpeg, PIL's default settings: ISLOW IDCT, fancy upsampling; grayscale,
 * YCbCr, RGB, CMYK and YCCK, baseline and progressive), PNG (libpng: every bit depth and colour
 * type, palette + tRNS, Adam7), WebP (libwebp, lossy and lossless, still images only), GIF
 * (giflib; the first frame, as PIL composes it), BMP (parsed here: palette, 16/24/32-bit,
 * bitfields, RLE8/RLE4) and TIFF (libtiff; the first page: uncompressed, LZW, deflate, PackBits,
 * strips or tiles, grey/RGB/palette/CMYK with PIL's own conversions), one decoder file each
 * (src/input/image_<format>.c). Alpha is dropped, never composited. File types are recognised
 * by their magic bytes, not by their extension (mv_sniff.h). A file that Pillow versions decode
 * differently is refused (MV_ERR_UNSUPPORTED, the message says why) rather than decoded one way.
 * This module does not resize or normalise (see mv_preprocess.h) and does not decode video
 * (mv_video.h).
 *
 * Known, deliberate divergence from PIL: 16-bit grayscale PNG and TIFF open in PIL as mode
 * "I;16" and convert("RGB") clips every value above 255 to white; here they are scaled to 8 bits
 * (v >> 8), the way PIL itself reduces 16-bit colour PNGs and TIFFs (it keeps the high byte).
 */
#ifndef MV_IMAGE_H
#define MV_IMAGE_H

#include "mv_common.h"
#include "mv_input.h"

/* PIL's decompression-bomb error threshold: 2 * Image.MAX_IMAGE_PIXELS. */
#define MV_IMAGE_MAX_PIXELS_DEFAULT MV_DECODE_MAX_PIXELS_DEFAULT

typedef struct {
    int width, height;          /* after EXIF orientation */
    uint8_t *rgb;               /* [height][width][3], after EXIF orientation */
    int src_width, src_height;  /* as stored in the file, before orientation */
    int orientation;            /* EXIF orientation 1..8 that was applied; 1 if none */
    const char *format;         /* "jpeg", "png", "webp", "gif", "bmp", "tiff" (static storage) */
} mv_image;

/* Decodes the image in in, which nothing has read from beyond its head bytes (mv_input.h: a file,
 * memory or a stream; every message names in->name). max_pixels: refuse (MV_ERR_LIMIT) images
 * whose header declares more pixels than this, before any pixel buffer is allocated; 0 means
 * MV_IMAGE_MAX_PIXELS_DEFAULT, a negative value means no limit. timeout_s: a wall-clock limit in
 * seconds from this call on (<= 0: none); past it the decode stops with MV_ERR_LIMIT "photo.jpg:
 * JPEG decode stopped: time limit exceeded (--timeout)". The header's size is checked first and
 * nothing after the image's end is read. A read error fails with MV_ERR_IO "photo.jpg: read
 * error". On failure img is zeroed and e names the input and the cause ("photo.jpg: corrupt JPEG
 * data: ..."); the input stays open (the caller closes it). */
mv_status mv_image_decode_input(mv_input *in, long long max_pixels, double timeout_s, mv_image *img,
                                mv_err *e);

/* The same for the file at path, without a time limit (mv_input_open_path: a non-regular file
 * fails with MV_ERR_IO without blocking). */
mv_status mv_image_decode(const char *path, long long max_pixels, mv_image *img, mv_err *e);

/* Same, with the wall-clock limit of mv_image_decode_input. */
mv_status mv_image_decode_limited(const char *path, long long max_pixels, double timeout_s,
                                  mv_image *img, mv_err *e);

/* Same as mv_image_decode, from memory; name is used only in messages. */
mv_status mv_image_decode_mem(const uint8_t *buf, size_t len, const char *name,
                              long long max_pixels, mv_image *img, mv_err *e);

void mv_image_free(mv_image *img);

#endif
