/* sniff.c - what kind of media a file is, from its first bytes (mv_sniff.h).
 *
 * The table below lists the still-image formats this program decodes, a row per decoder file
 * (image_<format>.c: its magic-byte check and its decoder); image.c dispatches through it. The
 * rest of the file recognises, without decoding, the video containers FFmpeg gets and the image
 * formats that are refused by name. Checks look at the first MV_SNIFF_BYTES bytes at most and
 * never read past n. Not here: decoding, file names and extensions (walk.c).
 */
#include "mv_sniff.h"

#include "image_int.h"

#include <stdio.h>
#include <string.h>

const mv_image_format mv_image_formats[] = {
    {"jpeg", "JPEG", mv_jpeg_sniff, mv_jpeg_decode},
    {"png", "PNG", mv_png_sniff, mv_png_decode},
    {"webp", "WebP", mv_webp_sniff, mv_webp_decode},
    {"gif", "GIF", mv_gif_sniff, mv_gif_decode},
    {"bmp", "BMP", mv_bmp_sniff, mv_bmp_decode},
    {"tiff", "TIFF", mv_tiff_sniff, mv_tiff_decode},
};
const size_t mv_image_n_formats = sizeof mv_image_formats / sizeof mv_image_formats[0];

const mv_image_format *mv_image_format_of(const uint8_t *head, size_t n)
{
    for (size_t i = 0; head && i < mv_image_n_formats; i++)
        if (mv_image_formats[i].sniff(head, n))
            return &mv_image_formats[i];
    return NULL;
}

const char *mv_sniff_image_formats(const char *last, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < mv_image_n_formats && len < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 == mv_image_n_formats ? last : ", ";
        int k = snprintf(buf + len, cap - len, "%s%s", sep, mv_image_formats[i].label);
        if (k < 0)
            break;
        len += (size_t)k;
    }
    return buf;
}

#define has mv_magic_at

static int isobmff_image_brand(const uint8_t *b)
{
    static const char *brands[] = {"heic", "heix", "hevc", "hevx", "heim", "heis", "hevm",
                                   "hevs", "mif1", "msf1", "avif", "avis"};
    for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++)
        if (memcmp(b, brands[i], 4) == 0) return 1;
    return 0;
}

/* Formats recognised but not decoded here: containers and other images, or "unknown". */
static const char *other_format(const uint8_t *h, size_t n)
{
    if (has(h, n, 0, "RIFF", 4) && has(h, n, 8, "AVI ", 4)) return "avi";
    if (has(h, n, 4, "ftyp", 4) && n >= 12) {
        if (isobmff_image_brand(h + 8)) return memcmp(h + 8, "avi", 3) == 0 ? "avif" : "heif";
        return "mp4";
    }
    if (has(h, n, 4, "moov", 4) || has(h, n, 4, "mdat", 4) || has(h, n, 4, "wide", 4) ||
        has(h, n, 4, "free", 4) || has(h, n, 4, "skip", 4) || has(h, n, 4, "pnot", 4))
        return "mp4";
    if (has(h, n, 0, "\x1a\x45\xdf\xa3", 4)) return "matroska";
    if (n >= 189 && h[0] == 0x47 && h[188] == 0x47) return "mpegts";
    if (n >= 197 && h[4] == 0x47 && h[196] == 0x47) return "mpegts"; /* M2TS, 192-byte packets */
    if (has(h, n, 0, "\x00\x00\x01\xba", 4) || has(h, n, 0, "\x00\x00\x01\xb3", 4)) return "mpegps";
    if (has(h, n, 0, "OggS", 4)) return "ogg";
    if (has(h, n, 0, "FLV\x01", 4)) return "flv";
    if (has(h, n, 0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9\x00\xaa\x00\x62\xce\x6c", 16))
        return "asf";
    if (has(h, n, 0, "\x00\x00\x00\x0cjP  \r\n\x87\n", 12) || has(h, n, 0, "\xff\x4f\xff\x51", 4))
        return "jpeg2000";
    if (has(h, n, 0, "\xff\x0a", 2) || has(h, n, 0, "\x00\x00\x00\x0cJXL \r\n\x87\n", 12))
        return "jpegxl";
    if (has(h, n, 0, "8BPS", 4)) return "psd";
    if (has(h, n, 0, "\x00\x00\x01\x00", 4) && n >= 6 && (h[4] | h[5]) != 0) return "ico";
    return "unknown";
}

const char *mv_sniff_format(const uint8_t *h, size_t n)
{
    if (!h) return "unknown";
    const mv_image_format *f = mv_image_format_of(h, n);
    return f ? f->name : other_format(h, n);
}

mv_media_kind mv_sniff(const uint8_t *head, size_t n)
{
    if (!head) return MV_MEDIA_UNKNOWN;
    if (mv_image_format_of(head, n)) return MV_MEDIA_IMAGE;
    const char *f = other_format(head, n);
    static const char *video[] = {"mp4", "matroska", "avi", "mpegts", "mpegps", "ogg", "flv", "asf"};
    for (size_t i = 0; i < sizeof video / sizeof video[0]; i++)
        if (!strcmp(f, video[i])) return MV_MEDIA_VIDEO;
    if (!strcmp(f, "unknown")) return MV_MEDIA_UNKNOWN;
    return MV_MEDIA_IMAGE_OTHER;
}
