/* image_tiff.c - the first page of a TIFF to 8-bit RGB with libtiff, as PIL gives it
 * (TiffImagePlugin.py: its OPEN_INFO table of layouts, Unpack.c, Convert.c): libtiff reads the
 * directory and the strips or tiles (uncompressed, LZW, deflate, PackBits; any predictor), and the
 * samples are converted here the way PIL's unpackers and convert("RGB") do it, not through
 * libtiff's RGBA interface: 1/2/4/8-bit grey (WhiteIsZero inverted), grey + alpha, RGB with or
 * without extra samples (premultiplied alpha divided out as PIL's "RGBa" unpacker does), 16-bit
 * RGB/RGBA/CMYK by their high byte, palette (the colour map's high byte, as PIL reads it), palette
 * + alpha, CMYK by PIL's cmyk2rgb. 16-bit grey is scaled to 8 bits (v >> 8), the rule 16-bit grey
 * PNG follows, where PIL clips to 255 (mv_image.h). Alpha is dropped, never composited.
 *
 * Orientation: IFD0's Orientation tag (274; its first value when it has more, as PIL reads it),
 * applied once, as Pillow 10.1 and later apply it (Pillow 6.2 to 10.0 applied it twice, on load
 * and again in exif_transpose). The IFD is scanned
 * here for what PIL reads from it and libtiff does not tell: whether PhotometricInterpretation is
 * there (PIL takes 0 when it is not), the Orientation entry as stored, XMP (tag 700).
 *
 * Only the first page is read (libtiff opens IFD0 and nothing else). The input is read by offset
 * (mv_input_pread; a stream is first read into memory); the time limit is checked between rows,
 * tiles and reads; libtiff's messages go to this decoder only (TIFFOpenOptions), never stderr.
 * Refused with a message: compressions other than the four (JPEG, CCITT, ZSTD ...), separate
 * planes, FillOrder 2, signed and float samples, YCbCr/CIELab/other photometrics, the layouts PIL
 * has no mode for, and the ones Pillow versions decode differently (orientation only in XMP:
 * Pillow 11.2 and later apply it, earlier versions do not; big-endian 16-bit CMYK; an
 * uncompressed file whose strip/tile offsets do not match its layout). Not here: applying the
 * orientation (image.c), resizing.
 */
#include "image_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tiffio.h>

/* How the samples of one pixel become RGB. */
enum {
    K_GREY,    /* 1/2/4/8-bit grey, spp 1 or 2 (grey + alpha) */
    K_GREY16,  /* v >> 8 */
    K_RGB,     /* 8-bit, first three samples */
    K_RGBA_PM, /* 8-bit premultiplied: PIL's unpackRGBa */
    K_RGB16,   /* 16-bit, high bytes */
    K_RGBA16_PM,
    K_PAL,     /* 1/2/4/8-bit index (spp 1), or 8-bit index + alpha (spp 2) */
    K_CMYK,
    K_CMYK16,
};

typedef struct {
    mv_image_req req;
    mv_input *in;
    uint64_t pos;
    int64_t size;
    int read_failed, timed_out, eof, have_msg;
    char msg[256];
    TIFF *tif;
    int kind, spp, bps, invert;
    uint8_t pal[256][3];
    uint8_t *buf;
    mv_image_raw res;
} tiff_ctx;

/* --- libtiff's client procedures over the mv_input ---------------------------------------- */

static tmsize_t t_read(thandle_t h, void *buf, tmsize_t n)
{
    tiff_ctx *x = h;
    if (mv_image_past(x->req.deadline)) {
        x->timed_out = 1;
        return -1;
    }
    if (n <= 0) return 0;
    ssize_t k = mv_input_pread(x->in, buf, (size_t)n, x->pos);
    if (k < 0) {
        x->read_failed = 1;
        return -1;
    }
    if (k < n) x->eof = 1;
    x->pos += (uint64_t)k;
    return (tmsize_t)k;
}

static tmsize_t t_write(thandle_t h, void *buf, tmsize_t n)
{
    (void)h;
    (void)buf;
    (void)n;
    return -1;
}

static toff_t t_seek(thandle_t h, toff_t off, int whence)
{
    tiff_ctx *x = h;
    if (whence == SEEK_SET) x->pos = off;
    else if (whence == SEEK_CUR) x->pos += off;
    else if (whence == SEEK_END) x->pos = (uint64_t)x->size + off;
    else return (toff_t)-1;
    return x->pos;
}

static int t_close(thandle_t h) { (void)h; return 0; }
static toff_t t_size(thandle_t h) { return (toff_t)((tiff_ctx *)h)->size; }
static int t_map(thandle_t h, void **base, toff_t *size) { (void)h; (void)base; (void)size; return 0; }
static void t_unmap(thandle_t h, void *base, toff_t size) { (void)h; (void)base; (void)size; }

static int t_on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    tiff_ctx *x = user;
    if (!x->have_msg) {
        char m[200];
        vsnprintf(m, sizeof m, fmt, ap);
        snprintf(x->msg, sizeof x->msg, "%s%s%s", module ? module : "", module ? ": " : "", m);
        mv_printable(x->msg);
        x->have_msg = 1;
    }
    return 1;
}

static int t_on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;
}

/* Before a libtiff call whose failure t_fail reports: forget what earlier calls said. */
static void t_arm(tiff_ctx *x)
{
    x->have_msg = 0;
    x->eof = 0;
}

/* A libtiff call failed: why, in words (its own message when it gave one). */
static mv_status t_fail(const tiff_ctx *x, mv_err *e, const char *what)
{
    if (x->timed_out) return mv_image_fail_time(x->req.name, "TIFF", e);
    if (x->read_failed) return mv_input_fail(x->in, e);
    if (x->eof) return mv_fail(e, MV_ERR_FORMAT, "%s: truncated TIFF data (image file is truncated)", x->req.name);
    if (x->have_msg) return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt TIFF data: %s", x->req.name, x->msg);
    return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt TIFF data: %s", x->req.name, what);
}

/* A check of this decoder's failed. */
static mv_status t_bad(const tiff_ctx *x, mv_err *e, const char *what)
{
    return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt TIFF data: %s", x->req.name, what);
}

/* n bytes at off, all of them, or a truncation / read error */
static mv_status t_pread(tiff_ctx *x, void *buf, size_t n, uint64_t off, mv_err *e)
{
    ssize_t k = mv_input_pread(x->in, buf, n, off);
    if (k < 0) return mv_input_fail(x->in, e);
    if ((size_t)k != n) return mv_fail(e, MV_ERR_FORMAT, "%s: truncated TIFF data (image file is truncated)", x->req.name);
    return MV_OK;
}

static mv_status t_unsupported(const tiff_ctx *x, mv_err *e, const char *fmt, ...)
{
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: %s", x->req.name, m);
}

/* --- what PIL reads from IFD0 itself --------------------------------------------------------- */

typedef struct {
    int have_photo, photo;
    int have_orient, orient_count, orient_type;
    uint64_t orient;
    int have_xmp;
    uint64_t xmp_off, xmp_len;
    uint64_t offsets_count;  /* StripOffsets or TileOffsets entries */
} ifd_tags;

static uint64_t rd(const uint8_t *p, int n, int be)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[be ? n - 1 - i : i] << (8 * i);
    return v;
}

static mv_status tiff_scan_ifd(tiff_ctx *x, ifd_tags *t, mv_err *e)
{
    int big = TIFFIsBigTIFF(x->tif), be = TIFFIsBigEndian(x->tif);
    uint64_t off = TIFFCurrentDirOffset(x->tif);
    int csize = big ? 8 : 2, esize = big ? 20 : 12, vsize = big ? 8 : 4;
    uint8_t b[20];
    mv_status s = t_pread(x, b, csize, off, e);
    if (s != MV_OK) return s;
    uint64_t n = rd(b, csize, be);
    if (n > 65535) return t_bad(x, e, "IFD0 has too many entries");
    for (uint64_t i = 0; i < n; i++) {
        if ((s = t_pread(x, b, esize, off + csize + i * esize, e)) != MV_OK) return s;
        uint32_t tag = (uint32_t)rd(b, 2, be), type = (uint32_t)rd(b + 2, 2, be);
        uint64_t count = rd(b + 4, big ? 8 : 4, be);
        const uint8_t *v = b + (big ? 12 : 8);
        /* an inline integer, left-justified, as wide as its type */
        static const int width[] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8, 8, 8};
        int wdt = type < sizeof width / sizeof width[0] ? width[type] : 0;
        if (tag == 262) {
            t->have_photo = 1;
            t->photo = count == 1 && (type == 3 || type == 4) ? (int)rd(v, wdt, be) : -1;
        } else if (tag == 274) {
            /* PIL keeps the first value of a longer Orientation (it warns "too many entries") */
            t->have_orient = 1;
            t->orient_count = count > 1 ? 2 : (int)count;
            t->orient_type = (int)type;
            if (count >= 1 && wdt > 0 && count * wdt <= (uint64_t)vsize) {
                t->orient = rd(v, wdt, be);
            } else if (count >= 1 && wdt > 0) {
                uint8_t o[8];
                if ((s = t_pread(x, o, wdt, rd(v, vsize, be), e)) != MV_OK) return s;
                t->orient = rd(o, wdt, be);
            }
        } else if (tag == 700) {
            t->have_xmp = 1;
            t->xmp_len = wdt == 1 ? count : 0;
            t->xmp_off = t->xmp_len <= (uint64_t)vsize ? off + csize + i * esize + (big ? 12 : 8) : rd(v, vsize, be);
        } else if (tag == 273 || tag == 324) {
            t->offsets_count = count;
        }
    }
    return MV_OK;
}

/* PIL's orientation (exif_transpose of IFD0's tag 274, else XMP in Pillow 11.2+). */
static mv_status tiff_orientation(tiff_ctx *x, const ifd_tags *t, mv_err *e)
{
    x->res.orientation = 1;
    if (t->have_orient) {
        if (t->orient_count == 0) return t_bad(x, e, "an Orientation tag without a value");
        int ty = t->orient_type;
        if (ty != 1 && ty != 3 && ty != 4 && ty != 6 && ty != 8 && ty != 9 && ty != 16 && ty != 17)
            return t_unsupported(x, e, "TIFF Orientation tag of type %d is not supported", ty);
        uint64_t o = t->orient;
        int signed_ty = ty == 6 || ty == 8 || ty == 9 || ty == 17;
        if (signed_ty) {                             /* a negative value is no orientation */
            int bits = ty == 6 ? 8 : ty == 8 ? 16 : ty == 9 ? 32 : 64;
            if (bits < 64 && (o >> (bits - 1)) & 1) return MV_OK;
        }
        if (o >= 2 && o <= 8) x->res.orientation = (int)o;
        return MV_OK;
    }
    if (t->have_xmp && t->xmp_len > 0) {
        if (t->xmp_len > (64u << 20))
            return t_unsupported(x, e, "TIFF XMP packet of %llu bytes is too large",
                                 (unsigned long long)t->xmp_len);
        uint8_t *p = mv_malloc((size_t)t->xmp_len);
        if (!p) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->req.name);
        ssize_t k = mv_input_pread(x->in, p, (size_t)t->xmp_len, t->xmp_off);
        int o = k > 0 ? mv_xmp_orientation(p, (size_t)k) : 0;
        free(p);
        if (k < 0) return mv_input_fail(x->in, e);
        if (o >= 2 && o <= 8)
            return t_unsupported(x, e, "TIFF orientation given only in XMP (tiff:Orientation %d) is not "
                                       "supported: Pillow 11.2 and later apply it, earlier versions do not", o);
    }
    return MV_OK;
}

/* --- the layout: PIL's OPEN_INFO, the entries this decoder takes ---------------------------- */

static mv_status tiff_layout(tiff_ctx *x, const ifd_tags *t, mv_err *e)
{
    TIFF *tif = x->tif;
    uint16_t comp = 1, planar = 1, fill = 1, fmt = 1, spp = 1, bps = 1, nes = 0, *es = NULL;
    if (!TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &comp) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &fill) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps) ||
        !TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &nes, &es))
        return t_bad(x, e, "cannot read the image's layout tags");
    if (comp != COMPRESSION_NONE && comp != COMPRESSION_LZW && comp != COMPRESSION_ADOBE_DEFLATE &&
        comp != COMPRESSION_DEFLATE && comp != COMPRESSION_PACKBITS)
        return t_unsupported(x, e, "TIFF compression %u is not supported (uncompressed, LZW, deflate "
                                   "and PackBits are)", comp);
    if (planar != PLANARCONFIG_CONTIG && spp > 1)
        return t_unsupported(x, e, "TIFF with separate colour planes (PlanarConfiguration 2) is not supported");
    if (fill != FILLORDER_MSB2LSB) return t_unsupported(x, e, "TIFF FillOrder %u is not supported", fill);
    if (fmt != SAMPLEFORMAT_UINT)
        return t_unsupported(x, e, "TIFF sample format %u (signed or floating-point) is not supported", fmt);
    if (!t->have_photo || t->photo < 0) {
        /* PIL takes a missing tag as 0 (WhiteIsZero) */
        if (t->have_photo) return t_unsupported(x, e, "TIFF PhotometricInterpretation is not one number");
    }
    int ph = t->have_photo ? t->photo : 0;
    int be = TIFFIsBigEndian(tif);
    /* extra samples as a small number: (), (0), (1), (2), (0,0), (1,0), (2,0), (0,0,0) ... */
    int es0 = nes ? es[0] : -1, rest0 = 1;
    for (int i = 1; i < nes; i++) rest0 &= es[i] == 0;
    int k = -1;
    x->spp = spp;
    x->bps = bps;
    if ((ph == 0 || ph == 1) && spp == 1 && nes == 0 && (bps == 1 || bps == 2 || bps == 4 || bps == 8)) {
        k = K_GREY;
        x->invert = ph == 0;
    } else if (ph == 1 && spp == 2 && bps == 8 && nes == 1 && es0 == 2) {
        k = K_GREY;
    } else if (ph == 1 && spp == 1 && nes == 0 && bps == 16) {
        k = K_GREY16;
    } else if (ph == 2 && bps == 8 && spp >= 3 && spp <= 6 && nes == spp - 3 && rest0) {
        if (spp == 3 || es0 == 0 || es0 == 2) k = K_RGB;
        else if (es0 == 1) k = K_RGBA_PM;
    } else if (ph == 2 && bps == 8 && spp == 4 && nes == 0) {
        k = K_RGB;                                   /* RGBA without ExtraSamples */
    } else if (ph == 2 && bps == 16 && (spp == 3 || spp == 4) && (nes == 0 || (spp == 4 && nes == 1))) {
        if (nes == 0 || es0 == 0 || es0 == 2) k = K_RGB16;
        else if (es0 == 1) k = K_RGBA16_PM;
    } else if (ph == 3 && spp == 1 && nes == 0 && (bps == 1 || bps == 2 || bps == 4 || bps == 8)) {
        k = K_PAL;
    } else if (ph == 3 && spp == 2 && bps == 8 && nes == 1 && es0 == 2) {
        k = K_PAL;
    } else if (ph == 5 && bps == 8 && spp >= 4 && spp <= 6 && nes == spp - 4 && (nes == 0 || (rest0 && es0 == 0))) {
        k = K_CMYK;
    } else if (ph == 5 && bps == 16 && spp == 4 && nes == 0) {
        if (be)
            return t_unsupported(x, e, "big-endian 16-bit CMYK TIFF is not supported: Pillow 11 and later "
                                       "read it, earlier versions refuse it");
        k = K_CMYK16;
    }
    if (k < 0) {
        char ex[64] = "";
        for (int i = 0, n = 0; i < nes && n < (int)sizeof ex - 8; i++)
            n += snprintf(ex + n, sizeof ex - n, "%s%u", i ? "," : "", es[i]);
        return t_unsupported(x, e, "unsupported TIFF pixel layout (photometric %d, %u samples of %u bits, "
                                   "extra samples (%s))", ph, spp, bps, ex);
    }
    x->kind = k;
    if (k == K_PAL) {
        uint16_t *r, *g, *b;
        if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &b)) return t_bad(x, e, "palette image without a colour map");
        for (int i = 0; i < (1 << bps); i++) {
            x->pal[i][0] = (uint8_t)(r[i] >> 8);
            x->pal[i][1] = (uint8_t)(g[i] >> 8);
            x->pal[i][2] = (uint8_t)(b[i] >> 8);
        }
    }
    if (comp == COMPRESSION_NONE) {
        /* PIL reads an uncompressed file by its offsets list itself: it must be the list libtiff reads */
        uint64_t n = TIFFIsTiled(tif) ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
        if (t->offsets_count != n)
            return t_unsupported(x, e, "uncompressed TIFF with %llu strip/tile offsets for %llu strips/tiles "
                                       "is not supported (PIL reads it differently)",
                                 (unsigned long long)t->offsets_count, (unsigned long long)n);
    }
    return MV_OK;
}

/* --- samples to RGB ------------------------------------------------------------------------ */

static inline uint8_t clip8(int v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* PIL Convert.c: MULDIV255(a, b) = (a*b + 128 + ((a*b + 128) >> 8)) >> 8. */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* n pixels of one stored row (starting at its first pixel) into o. */
static void tiff_row(const tiff_ctx *x, const uint8_t *in, int n, uint8_t *o)
{
    int spp = x->spp;
    const uint16_t *in16 = (const uint16_t *)in;   /* libtiff hands 16-bit samples in native order */
    for (int i = 0; i < n; i++, o += 3) {
        int v, a;
        switch (x->kind) {
        case K_GREY:
        case K_PAL:
            if (x->bps == 8) {
                v = in[i * spp];
            } else {
                int per = 8 / x->bps, sh = 8 - x->bps * (i % per + 1);
                v = in[i / per] >> sh & ((1 << x->bps) - 1);
            }
            if (x->kind == K_PAL) {
                memcpy(o, x->pal[v], 3);
                break;
            }
            if (x->bps < 8) v = v * 255 / ((1 << x->bps) - 1);   /* 0x55 / 0x11 / 0xff steps */
            if (x->invert) v = 255 - v;
            o[0] = o[1] = o[2] = (uint8_t)v;
            break;
        case K_GREY16:
            o[0] = o[1] = o[2] = (uint8_t)(in16[i] >> 8);
            break;
        case K_RGB:
            memcpy(o, in + (size_t)i * spp, 3);
            break;
        case K_RGBA_PM: {
            const uint8_t *p = in + (size_t)i * spp;
            a = p[3];
            for (int c = 0; c < 3; c++) o[c] = !a ? 0 : a == 255 ? p[c] : clip8(p[c] * 255 / a);
            break;
        }
        case K_RGB16:
            for (int c = 0; c < 3; c++) o[c] = (uint8_t)(in16[(size_t)i * spp + c] >> 8);
            break;
        case K_RGBA16_PM: {
            const uint16_t *p = in16 + (size_t)i * spp;
            a = p[3] >> 8;
            for (int c = 0; c < 3; c++) {
                int s = p[c] >> 8;
                o[c] = !a ? 0 : a == 255 ? (uint8_t)s : clip8(s * 255 / a);
            }
            break;
        }
        case K_CMYK:
        case K_CMYK16: {
            int s[4];
            for (int c = 0; c < 4; c++)
                s[c] = x->kind == K_CMYK ? in[(size_t)i * spp + c] : in16[(size_t)i * spp + c] >> 8;
            int nk = 255 - s[3];
            for (int c = 0; c < 3; c++) o[c] = clip8(nk - muldiv255(s[c], nk));
            break;
        }
        }
    }
}

static mv_status tiff_pixels(tiff_ctx *x, mv_err *e)
{
    TIFF *tif = x->tif;
    int w = x->res.w, h = x->res.h;
    if (!TIFFIsTiled(tif)) {
        uint64_t line = TIFFScanlineSize64(tif);
        if (line == 0 || line < ((uint64_t)w * x->spp * x->bps + 7) / 8) return t_bad(x, e, "bad scanline size");
        if (!(x->buf = mv_malloc((size_t)line))) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->req.name);
        for (int y = 0; y < h; y++) {
            if (mv_image_past(x->req.deadline)) return mv_image_fail_time(x->req.name, "TIFF", e);
            t_arm(x);
            if (TIFFReadScanline(tif, x->buf, (uint32_t)y, 0) < 0) return t_fail(x, e, "cannot read a scanline");
            tiff_row(x, x->buf, w, x->res.rgb + (size_t)y * w * 3);
        }
        return MV_OK;
    }
    uint32_t tw = 0, th = 0;
    if (!TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw) || !TIFFGetField(tif, TIFFTAG_TILELENGTH, &th) || !tw || !th)
        return t_bad(x, e, "tiled image without a tile size");
    /* a tile may overhang the image, not dwarf it */
    uint64_t area = (uint64_t)w * h > (1u << 24) ? (uint64_t)w * h : (1u << 24);
    if ((uint64_t)tw * th > area)
        return mv_fail(e, MV_ERR_LIMIT, "%s: TIFF tile size %ux%u is too large for a %dx%d image", x->req.name,
                       tw, th, w, h);
    uint64_t tsize = TIFFTileSize64(tif), trow = TIFFTileRowSize64(tif);
    if (!tsize || !trow || trow < ((uint64_t)tw * x->spp * x->bps + 7) / 8 || tsize < trow * th)
        return t_bad(x, e, "bad tile size");
    if (!(x->buf = mv_malloc((size_t)tsize))) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->req.name);
    for (uint32_t ty = 0; ty < (uint32_t)h; ty += th) {
        for (uint32_t tx = 0; tx < (uint32_t)w; tx += tw) {
            if (mv_image_past(x->req.deadline)) return mv_image_fail_time(x->req.name, "TIFF", e);
            t_arm(x);
            if (TIFFReadTile(tif, x->buf, tx, ty, 0, 0) < 0) return t_fail(x, e, "cannot read a tile");
            int cw = (int)(tw < w - tx ? tw : w - tx), ch = (int)(th < h - ty ? th : h - ty);
            for (int r = 0; r < ch; r++)
                tiff_row(x, x->buf + (size_t)r * trow, cw, x->res.rgb + ((size_t)(ty + r) * w + tx) * 3);
        }
    }
    return MV_OK;
}

static mv_status tiff_run(tiff_ctx *x, mv_err *e)
{
    mv_status s = mv_input_make_seekable(x->in, e);
    if (s != MV_OK) return s;
    x->size = mv_input_size(x->in);
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->req.name);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, t_on_error, x);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, t_on_warning, x);
    /* no single allocation larger than the pixel budget's worth of 16-bit samples */
    long long mp = x->req.max_pixels == 0 ? MV_IMAGE_MAX_PIXELS_DEFAULT : x->req.max_pixels;
    if (mp > 0) TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)(mp * 12 + (64 << 20)));
    /* "r": read; "m": no memory mapping (reads go through t_read); "c": no strip chopping (the
     * strips are the file's, as PIL counts them) */
    x->tif = TIFFClientOpenExt(x->req.name, "rmc", x, t_read, t_write, t_seek, t_close, t_size, t_map,
                               t_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!x->tif) return t_fail(x, e, "cannot open");
    uint32_t w = 0, h = 0;
    if (!TIFFGetField(x->tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(x->tif, TIFFTAG_IMAGELENGTH, &h))
        return t_bad(x, e, "no image size");
    if ((s = mv_image_check_size(x->req.name, "TIFF", w, h, x->req.max_pixels, e)) != MV_OK) return s;
    ifd_tags t = {0};
    if ((s = tiff_scan_ifd(x, &t, e)) != MV_OK || (s = tiff_layout(x, &t, e)) != MV_OK ||
        (s = tiff_orientation(x, &t, e)) != MV_OK)
        return s;
    x->res.w = (int)w;
    x->res.h = (int)h;
    if (!(x->res.rgb = mv_malloc((size_t)w * h * 3)))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %ux%u image", x->req.name, w, h);
    return tiff_pixels(x, e);
}

int mv_tiff_sniff(const uint8_t *head, size_t n)
{
    /* classic and BigTIFF, both byte orders */
    return mv_magic_at(head, n, 0, "II*\0", 4) || mv_magic_at(head, n, 0, "MM\0*", 4) ||
           mv_magic_at(head, n, 0, "II+\0", 4) || mv_magic_at(head, n, 0, "MM\0+", 4);
}

mv_status mv_tiff_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    tiff_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", r->name);
    x->req = *r;
    x->in = r->in;
    mv_status s = tiff_run(x, e);
    if (x->tif) TIFFClose(x->tif);
    free(x->buf);
    if (s == MV_OK) *out = x->res;
    else free(x->res.rgb);
    free(x);
    return s;
}
