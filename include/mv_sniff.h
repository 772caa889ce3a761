/* mv_sniff.h - what kind of media a file is, from its first bytes (magic numbers), never from its
 * name: a still image this program decodes, a video container (for FFmpeg), an image format it
 * recognises but does not decode (so that the message can name it), or unknown.
 *
 * The decoded still-image formats come from one table (src/input/sniff.c, a row per decoder file
 * src/input/image_<format>.c); the containers and the other image formats are recognised here.
 * Not here: decoding (mv_image.h, mv_video.h), extensions (mv_walk.h).
 */
#ifndef MV_SNIFF_H
#define MV_SNIFF_H

#include "mv_common.h"

/* How many leading bytes mv_sniff / mv_sniff_format look at; fewer is fine (weaker checks). */
#define MV_SNIFF_BYTES 512

typedef enum {
    MV_MEDIA_UNKNOWN = 0,
    MV_MEDIA_IMAGE,       /* a still image this program decodes (mv_sniff_format names it) */
    MV_MEDIA_VIDEO,       /* ISO-BMFF (mp4/mov/3gp), Matroska/WebM, AVI, MPEG-TS/PS, Ogg, FLV, ASF */
    MV_MEDIA_IMAGE_OTHER, /* a recognised image format this program does not decode (HEIF/AVIF,
                             JPEG 2000, JPEG XL, PSD, ICO) */
} mv_media_kind;

/* Classifies a file from its first n bytes (pass up to MV_SNIFF_BYTES). */
mv_media_kind mv_sniff(const uint8_t *head, size_t n);

/* Short format name for messages: "jpeg", "png", "webp", "gif", "bmp", "tiff", "heif", "avif",
 * "jpeg2000", "jpegxl", "psd", "ico", "mp4", "matroska", "avi", "mpegts", "mpegps", "ogg", "flv",
 * "asf", or "unknown". Static storage. */
const char *mv_sniff_format(const uint8_t *head, size_t n);

/* The decoded still-image formats for messages, in table order: "JPEG, PNG, WebP, GIF, BMP,
 * TIFF" with last ", ", "JPEG, PNG, WebP, GIF, BMP or TIFF" with last " or " (the separator
 * before the last one). Written into buf[cap]; returns buf. */
const char *mv_sniff_image_formats(const char *last, char *buf, size_t cap);

#endif
