/* orientation.c - the orientation PIL's ImageOps.exif_transpose applies, read from the metadata
 * the decoders hand over (EXIF IFD0 tag 0x0112, XMP tiff:Orientation, PNG "Raw profile type
 * exif" text), and the transpose itself on an 8-bit RGB buffer (image_int.h).
 *
 * Pillow's rules (Image.getexif, ImageOps.exif_transpose): EXIF wins when it has the tag; a tag
 * with several values counts by its first; one that is not a number equal to an integer leaves
 * the image alone; without EXIF, XMP's tiff:Orientation counts;
 * values 2..8 are applied, anything else is 1. Parsers read only inside the blob they are given.
 * Not here: finding the blobs in a file (each format's decoder does), decoding pixels.
 */
#include "image_int.h"

#include <stdlib.h>
#include <string.h>


/* Pillow's reading of IFD0 (TiffImagePlugin.ImageFileDirectory_v2.load, getexif): entries in
 * order, a later entry of a tag replacing an earlier one; an entry of a type it does not know is
 * passed over; an entry whose values lie outside the blob, or an entry table running past it,
 * ends the reading (what was read stands). A tag expected once that has several values keeps its
 * first. BYTE, UNDEFINED and ASCII values are bytes or text to it, never an orientation; numbers
 * (rationals and floats included) count when equal to an integer. */
enum { T_BYTE = 1, T_ASCII, T_SHORT, T_LONG, T_RATIONAL, T_SBYTE, T_UNDEF, T_SSHORT, T_SLONG,
       T_SRATIONAL, T_FLOAT, T_DOUBLE, T_IFD, T_LONG8 = 16 };

/* The bytes of one value of type t, 0 for a type Pillow does not know. */
static size_t type_size(uint32_t t)
{
    static const uint8_t size[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
    return t < 17 ? size[t] : 0;
}

int mv_exif_orientation(const uint8_t *d, size_t n)
{
    if (n >= 6 && memcmp(d, "Exif\0\0", 6) == 0) {
        d += 6;
        n -= 6;
    }
    if (n < 8) return 0;
    int le;
    if (d[0] == 'I' && d[1] == 'I') le = 1;
    else if (d[0] == 'M' && d[1] == 'M') le = 0;
    else return 0;
#define RD16(p) (le ? (uint32_t)(p)[0] | (uint32_t)(p)[1] << 8 : (uint32_t)(p)[1] | (uint32_t)(p)[0] << 8)
#define RD32(p) (le ? RD16(p) | RD16((p) + 2) << 16 : RD16((p) + 2) | RD16(p) << 16)
    if (RD16(d + 2) != 42) return 0;
    uint32_t ifd = RD32(d + 4);
    if (ifd > n - 2 || ifd < 8) return 0;
    uint32_t count = RD16(d + ifd);
    const uint8_t *val = NULL; /* the orientation entry's first value, of type vt, count vc */
    uint32_t vt = 0, vc = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t off = (size_t)ifd + 2 + 12 * (size_t)i;
        if (off + 12 > n) break;
        const uint8_t *ent = d + off;
        uint32_t type = RD16(ent + 2), cnt = RD32(ent + 4);
        size_t sz = type_size(type);
        if (!sz) continue;
        const uint8_t *v = ent + 8;
        if (sz * cnt > 4) {
            uint32_t at = RD32(ent + 8);
            if (at > n || sz * cnt > n - at) break;
            v = d + at;
        }
        if (RD16(ent) == 0x0112)
            val = v, vt = type, vc = cnt;
    }
    if (!val) return 0;
    if (!vc) return -1;
    double x;
    switch (vt) {
    case T_SHORT: x = RD16(val); break;
    case T_SSHORT: x = (int16_t)RD16(val); break;
    case T_LONG: case T_IFD: x = RD32(val); break;
    case T_SLONG: x = (int32_t)RD32(val); break;
    case T_SBYTE: x = (int8_t)val[0]; break;
    case T_LONG8: x = le ? (double)(RD32(val) | (uint64_t)RD32(val + 4) << 32)
                         : (double)(RD32(val + 4) | (uint64_t)RD32(val) << 32); break;
    case T_RATIONAL: x = RD32(val + 4) ? (double)RD32(val) / RD32(val + 4) : -1; break;
    case T_SRATIONAL: x = RD32(val + 4) ? (double)(int32_t)RD32(val) / (int32_t)RD32(val + 4) : -1; break;
    case T_FLOAT: { uint32_t u = RD32(val); float f; memcpy(&f, &u, 4); x = f; break; }
    case T_DOUBLE: {
        uint64_t u = le ? RD32(val) | (uint64_t)RD32(val + 4) << 32 : RD32(val + 4) | (uint64_t)RD32(val) << 32;
        memcpy(&x, &u, 8);
        break;
    }
    default: return -1; /* BYTE, UNDEFINED, ASCII: not a number to Pillow */
    }
    return x >= 1 && x <= 8 && x == (int)x ? (int)x : -1;
#undef RD16
#undef RD32
}

int mv_xmp_orientation(const uint8_t *d, size_t n)
{
    static const char key[] = "tiff:Orientation";
    size_t k = sizeof key - 1;
    for (size_t i = 0; i + k < n; i++) {
        if (memcmp(d + i, key, k) != 0) continue;
        size_t j = i + k;
        if (j + 1 < n && d[j] == '=' && d[j + 1] == '"') j += 2;
        else if (j < n && d[j] == '>') j += 1;
        else continue;
        if (j < n && d[j] >= '0' && d[j] <= '9') return d[j] - '0';
    }
    return 0;
}

/* the hex digits after the third line break, decoded into bytes, are an EXIF blob */
int mv_raw_profile_orientation(const char *txt, size_t n)
{
    size_t i = 0;
    for (int lines = 0; lines < 3 && i < n; i++)
        if (txt[i] == '\n') lines++;
    uint8_t *buf = mv_malloc(n / 2 + 1);
    if (!buf) return 0;
    size_t m = 0;
    int hi = -1;
    for (; i < n; i++) {
        int c = (unsigned char)txt[i], v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        else continue;
        if (hi < 0) hi = v;
        else {
            buf[m++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    int o = mv_exif_orientation(buf, m);
    free(buf);
    return o;
}

int mv_orientation_pick(int exif_o, int xmp_o)
{
    int o = exif_o != 0 ? exif_o : xmp_o;
    return (o >= 2 && o <= 8) ? o : 1;
}

uint8_t *mv_orientation_apply(uint8_t *src, int w, int h, int o, int *ow, int *oh)
{
    *ow = w;
    *oh = h;
    if (o == 1) return src;
    int swap = o >= 5;
    int W = swap ? h : w, H = swap ? w : h;
    uint8_t *dst = mv_malloc((size_t)W * H * 3);
    if (!dst) return NULL;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;              /* FLIP_LEFT_RIGHT */
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;      /* ROTATE_180 */
            case 4: sx = x; sy = h - 1 - y; break;              /* FLIP_TOP_BOTTOM */
            case 5: sx = y; sy = x; break;                      /* TRANSPOSE */
            case 6: sx = y; sy = h - 1 - x; break;              /* ROTATE_270 (90 clockwise) */
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;      /* TRANSVERSE */
            default: sx = w - 1 - y; sy = x; break;             /* 8: ROTATE_90 (counter-clockwise) */
            }
            memcpy(dst + ((size_t)y * W + x) * 3, src + ((size_t)sy * w + sx) * 3, 3);
        }
    }
    *ow = W;
    *oh = H;
    return dst;
}
