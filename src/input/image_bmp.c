/* image_bmp.c - BMP to 8-bit RGB, parsed here, as PIL decodes it (BmpImagePlugin.py, Unpack.c,
 * Convert.c): BITMAPCOREHEADER (12 bytes), BITMAPINFOHEADER (40), OS/2 2.x (64), V4 (108) and V5
 * (124) headers; 1/4/8-bit palette, 16-bit 5-5-5, 24-bit, 32-bit; BI_RGB, BI_BITFIELDS with the
 * masks PIL knows, BI_RLE8 and BI_RLE4; bottom-up and top-down; alpha dropped, palettes mapped.
 * PIL's own rules are kept: a palette of grey ramp entries makes the image grey (mode "L"/"1"),
 * its RLE decoder's run/line/alignment arithmetic is reproduced step by step, the pixel data
 * offset falls back as PIL's does. No orientation (PIL reads none from BMP).
 *
 * Parsed here, not through a library: a BMP is a header, a palette and rows of raw or RLE-coded
 * indices, a few hundred lines; Debian's BMP readers (ImageMagick, SDL, stb) each decide palette
 * greyness, RLE overruns and odd offsets their own way, and PIL's is the one HF uses. Every read
 * is bounds-checked against the input (mv_input_pread); fuzz_image.c covers the parser.
 *
 * Refused with a message instead of giving other pixels than some Pillow version gives: RLE
 * delta escapes (Pillow 12.2 changed them) and odd RLE4 literal runs (changed after 12.3), palette
 * indices past the palette (Pillow up to 10.0 shows grey there, 10.1 and later black), header
 * sizes 52/56 and the 32-bit masks only Pillow 10.4 and later read, an OS/2 pixel offset pointing
 * at the palette (12.2 changed it), and the layouts PIL itself garbles (a grey palette on a depth
 * it does not fit). Not here: orientation, resizing.
 */
#include "image_int.h"

#include <stdlib.h>
#include <string.h>

enum { BI_RGB = 0, BI_RLE8 = 1, BI_RLE4 = 2, BI_BITFIELDS = 3 };
enum { M_P, M_L, M_1, M_RGB };                                   /* PIL's mode */
enum { R_BGR15, R_BGR16, R_BGR, R_BGRX, R_XBGR, R_RGBA };        /* 16/24/32-bit layouts */

typedef struct {
    const mv_image_req *r;
    mv_input *in;
    int64_t size;         /* the input's length */
    uint64_t pos;         /* PIL's file position (fp.tell()) while parsing */
    int64_t w, h;
    int topdown, bits, comp, mode, raw, rle4;
    uint32_t colors;
    uint8_t pal[256][3];  /* RGB */
    uint64_t data;        /* pixel data offset */
    uint8_t *idx;         /* RLE: decoded indices [h][w] in file row order */
    uint8_t *row;
    mv_image_raw res;
} bmp_ctx;

static uint32_t u16le(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t u32le(const uint8_t *p) { return u16le(p) | u16le(p + 2) << 16; }

static mv_status bmp_truncated(const bmp_ctx *x, mv_err *e)
{
    return mv_fail(e, MV_ERR_FORMAT, "%s: truncated BMP data (image file is truncated)", x->r->name);
}

static mv_status bmp_unsupported(const bmp_ctx *x, mv_err *e, const char *what)
{
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: %s", x->r->name, what);
}

/* n bytes at off into buf, all of them or a truncation / read error. */
static mv_status bmp_read(bmp_ctx *x, uint64_t off, void *buf, size_t n, mv_err *e)
{
    if (mv_image_past(x->r->deadline)) return mv_image_fail_time(x->r->name, "BMP", e);
    ssize_t k = n ? mv_input_pread(x->in, buf, n, off) : 0;
    if (k < 0) return mv_input_fail(x->in, e);
    if ((size_t)k != n) return bmp_truncated(x, e);
    return MV_OK;
}

/* The 32/24/16-bit BI_BITFIELDS layouts Pillow 9 knows (BmpImagePlugin.py, MASK_MODES). */
static int bmp_mask_layout(int bits, const uint32_t m[4])
{
    static const struct { int bits; uint32_t m[4]; int raw; } t[] = {
        {32, {0xFF0000, 0xFF00, 0xFF, 0}, R_BGRX},
        {32, {0xFF000000, 0xFF0000, 0xFF00, 0}, R_XBGR},
        {32, {0xFF000000, 0xFF0000, 0xFF00, 0xFF}, R_XBGR},          /* ABGR */
        {32, {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, R_RGBA},
        {32, {0xFF0000, 0xFF00, 0xFF, 0xFF000000}, R_BGRX},          /* BGRA */
        {32, {0, 0, 0, 0}, R_BGRX},                                  /* BGRA */
        {24, {0xFF0000, 0xFF00, 0xFF, 0}, R_BGR},
        {16, {0xF800, 0x7E0, 0x1F, 0}, R_BGR16},
        {16, {0x7C00, 0x3E0, 0x1F, 0}, R_BGR15},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].bits != bits) continue;
        /* 24 and 16 bits: PIL compares the colour masks only */
        int n = bits == 32 ? 4 : 3;
        if (!memcmp(t[i].m, m, n * sizeof m[0])) return t[i].raw;
    }
    return -1;
}

static mv_status bmp_header(bmp_ctx *x, mv_err *e)
{
    uint8_t fh[18], hd[124];
    mv_status s = bmp_read(x, 0, fh, sizeof fh, e);
    if (s != MV_OK) return s;
    uint32_t offset = u32le(fh + 10), hsize = u32le(fh + 14);
    if (hsize == 52 || hsize == 56)
        return bmp_unsupported(x, e, "BMP header of 52/56 bytes (BITMAPV2/V3INFOHEADER) is not "
                                     "supported: Pillow 10.4 and later read it, earlier versions refuse it");
    if (hsize != 12 && hsize != 40 && hsize != 64 && hsize != 108 && hsize != 124)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP header type (%u bytes)", x->r->name, hsize);
    if ((s = bmp_read(x, 18, hd, hsize - 4, e)) != MV_OK) return s;
    x->pos = 14 + hsize;
    uint32_t m[4] = {0, 0, 0, 0};
    int pal_pad;
    if (hsize == 12) {
        x->w = u16le(hd);
        x->h = u16le(hd + 2);
        x->bits = (int)u16le(hd + 6);
        x->comp = BI_RGB;
        pal_pad = 3;
    } else {
        x->topdown = hd[7] == 0xFF;       /* PIL: the top byte of the height, not its sign */
        x->w = u32le(hd);
        x->h = x->topdown ? (int64_t)(((uint64_t)1 << 32) - u32le(hd + 4)) : (int64_t)u32le(hd + 4);
        x->bits = (int)u16le(hd + 10);
        x->comp = (int)u32le(hd + 12);
        x->colors = u32le(hd + 28);
        pal_pad = 4;
        if (x->comp == BI_BITFIELDS) {
            if (hsize - 4 >= 52) {
                for (int i = 0; i < 4; i++) m[i] = u32le(hd + 36 + 4 * i);
            } else {                      /* 40 bytes: three masks follow the header */
                uint8_t b[12];
                if ((s = bmp_read(x, x->pos, b, sizeof b, e)) != MV_OK) return s;
                for (int i = 0; i < 3; i++) m[i] = u32le(b + 4 * i);
                x->pos += 12;
            }
        }
    }
    if ((s = mv_image_check_size(x->r->name, "BMP", x->w, x->h, x->r->max_pixels, e)) != MV_OK) return s;
    uint64_t colors = x->colors ? x->colors : (uint64_t)1 << (x->bits & 63);
    uint64_t data = offset;
    if (offset == 14 + hsize && x->bits <= 8) {
        if (hsize == 12)    /* Pillow up to 12.1 skips 4 bytes a colour here, 12.2 and later 3 */
            return bmp_unsupported(x, e, "OS/2 BMP whose pixel offset points at its palette is not "
                                         "supported: Pillow 12.2 and later read it differently from earlier versions");
        data += 4 * colors;
    }

    switch (x->bits) {
    case 1: case 4: case 8: x->mode = M_P; break;
    case 16: x->mode = M_RGB; x->raw = R_BGR15; break;
    case 24: x->mode = M_RGB; x->raw = R_BGR; break;
    case 32: x->mode = M_RGB; x->raw = R_BGRX; break;
    default:
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP pixel depth (%d)", x->r->name, x->bits);
    }
    if (x->comp == BI_BITFIELDS) {
        int l = x->bits >= 16 ? bmp_mask_layout(x->bits, m) : -1;
        if (l < 0) {
            if (x->bits == 32 && m[0] == 0xFF000000 && m[1] == 0xFF00 && m[2] == 0xFF)
                return bmp_unsupported(x, e, "BMP bitfields layout BGXR/BGAR is not supported: "
                                             "Pillow 10.4 and later read it, earlier versions refuse it");
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP bitfields layout (masks "
                           "%08x %08x %08x %08x, %d-bit)", x->r->name, m[0], m[1], m[2], m[3], x->bits);
        }
        x->raw = l;
    } else if (x->comp == BI_RLE8 || x->comp == BI_RLE4) {
        if (x->mode != M_P)
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP layout: RLE-coded %d-bit pixels",
                           x->r->name, x->bits);
        x->rle4 = x->comp == BI_RLE4;
    } else if (x->comp != BI_RGB) {
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP compression (%d)", x->r->name, x->comp);
    }

    if (x->mode == M_P) {
        if (colors == 0 || colors > 256)
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP palette size (%llu colours)",
                           x->r->name, (unsigned long long)colors);
        uint8_t p[256 * 4];
        if ((s = bmp_read(x, x->pos, p, pal_pad * colors, e)) != MV_OK) return s;
        x->pos += pal_pad * colors;
        int grey = 1;
        for (uint64_t i = 0; i < colors; i++) {
            const uint8_t *c = p + i * pal_pad;
            int v = colors == 2 ? (int)i * 255 : (int)i;
            if (c[0] != v || c[1] != v || c[2] != v) grey = 0;
            x->pal[i][0] = c[2];
            x->pal[i][1] = c[1];
            x->pal[i][2] = c[0];
        }
        x->colors = (uint32_t)colors;
        if (grey) {
            /* PIL drops a grey palette and reads the data as "1" or "L" whatever the depth */
            x->mode = colors == 2 ? M_1 : M_L;
            int rle = x->comp != BI_RGB;
            if ((x->mode == M_1 && (rle || x->bits != 1)) || (x->mode == M_L && !rle && x->bits != 8))
                return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported BMP layout: a %llu-entry grey "
                               "palette on %s%d-bit pixels (PIL misreads it)", x->r->name,
                               (unsigned long long)colors, rle ? "RLE-coded " : "", x->bits);
        }
    }
    x->data = data ? data : x->pos;
    return MV_OK;
}

/* A buffered forward reader over the RLE data, tracking PIL's file position. */
typedef struct {
    bmp_ctx *x;
    uint8_t buf[4096];
    size_t len, at;
    int eof;
} bmp_rd;

/* Up to n bytes into out (fewer at the end of the input); -1 on a read error. */
static long bmp_take(bmp_rd *b, uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        if (b->at == b->len) {
            if (b->eof) break;
            if (b->x->pos >= (uint64_t)b->x->size) {
                b->eof = 1;
                break;
            }
            ssize_t k = mv_input_pread(b->x->in, b->buf, sizeof b->buf, b->x->pos);
            if (k < 0) return -1;
            if (k == 0) {
                b->eof = 1;
                break;
            }
            b->len = (size_t)k;
            b->at = 0;
        }
        size_t k = b->len - b->at < n - got ? b->len - b->at : n - got;
        memcpy(out + got, b->buf + b->at, k);
        b->at += k;
        b->x->pos += k;
        got += k;
    }
    return (long)got;
}

/* BmpRleDecoder.decode: indices into x->idx, in file row order. */
static mv_status bmp_rle(bmp_ctx *x, mv_err *e)
{
    size_t w = (size_t)x->w, dest = (size_t)x->w * (size_t)x->h, len = 0, xpos = 0;
    x->idx = calloc(dest, 1);
    if (!x->idx) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %lldx%lld image", x->r->name,
                                (long long)x->w, (long long)x->h);
    bmp_rd b = {.x = x};
    x->pos = x->data;
    unsigned ops = 0;
    while (len < dest) {
        if ((++ops & 1023) == 0 && mv_image_past(x->r->deadline)) return mv_image_fail_time(x->r->name, "BMP", e);
        uint8_t pb[2];
        long k = bmp_take(&b, pb, 2);
        if (k < 0) return mv_input_fail(x->in, e);
        if (k < 2) break;
        size_t n = pb[0];
        if (n) {                                   /* encoded run, cut at the row's end */
            if (xpos + n > w) n = xpos < w ? w - xpos : 0;
            for (size_t i = 0; i < n && len + i < dest; i++)
                x->idx[len + i] = x->rle4 ? (i % 2 ? pb[1] & 15 : pb[1] >> 4) : pb[1];
            len = len + n < dest ? len + n : dest;
            xpos += n;
        } else if (pb[1] == 0) {                   /* end of line */
            while (len % w) len++;                 /* the gap stays index 0 */
            xpos = 0;
        } else if (pb[1] == 1) {                   /* end of bitmap */
            break;
        } else if (pb[1] == 2) {
            return bmp_unsupported(x, e, "BMP RLE delta escapes are not supported: Pillow 12.2 and "
                                         "later decode them differently from earlier versions");
        } else {                                   /* literal run */
            size_t cnt = pb[1], nbytes = x->rle4 ? cnt / 2 : cnt;
            if (x->rle4 && cnt % 2 && cnt - 1 < dest - len)
                return bmp_unsupported(x, e, "BMP RLE4 literal runs of odd length are not supported: "
                                             "Pillow 12.3 and its development version decode them differently");
            uint8_t lit[255];
            k = bmp_take(&b, lit, nbytes);
            if (k < 0) return mv_input_fail(x->in, e);
            size_t npix = x->rle4 ? 2 * (size_t)k : (size_t)k;
            for (size_t i = 0; i < npix && len + i < dest; i++)
                x->idx[len + i] = x->rle4 ? (i % 2 ? lit[i / 2] & 15 : lit[i / 2] >> 4) : lit[i];
            len = len + npix < dest ? len + npix : dest;
            if ((size_t)k < nbytes) break;
            xpos += cnt;
            if (x->pos % 2) {                      /* word alignment, by the file offset */
                uint8_t pad;
                if (bmp_take(&b, &pad, 1) < 0) return mv_input_fail(x->in, e);
            }
        }
    }
    if (len < dest && b.eof) return bmp_truncated(x, e);
    if (len < dest)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt BMP data: the RLE data ends before the image "
                       "does (not enough image data)", x->r->name);
    return MV_OK;
}

static mv_status bmp_index_error(const bmp_ctx *x, int v, mv_err *e)
{
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: BMP pixel index %d is past its %u-colour palette: "
                   "Pillow 10.1 and later show black there, earlier versions grey", x->r->name, v, x->colors);
}

/* One row of indices (P, L, 1) to RGB. */
static mv_status bmp_map(const bmp_ctx *x, const uint8_t *idx, int w, uint8_t *o, mv_err *e)
{
    for (int i = 0; i < w; i++, o += 3) {
        int v = idx[i];
        if (x->mode == M_P) {
            if ((uint32_t)v >= x->colors) return bmp_index_error(x, v, e);
            memcpy(o, x->pal[v], 3);
        } else {
            o[0] = o[1] = o[2] = x->mode == M_1 ? (v ? 255 : 0) : (uint8_t)v;
        }
    }
    return MV_OK;
}

/* One stored row (raw layout) to RGB; idx is scratch for the palette depths. */
static mv_status bmp_row(const bmp_ctx *x, const uint8_t *in, uint8_t *idx, uint8_t *o, mv_err *e)
{
    int w = (int)x->w;
    if (x->bits <= 8) {
        for (int i = 0; i < w; i++) {
            if (x->bits == 8) idx[i] = in[i];
            else if (x->bits == 4) idx[i] = i % 2 ? in[i / 2] & 15 : in[i / 2] >> 4;
            else idx[i] = in[i / 8] >> (7 - i % 8) & 1;
        }
        return bmp_map(x, idx, w, o, e);
    }
    for (int i = 0; i < w; i++, o += 3) {
        uint32_t p;
        switch (x->raw) {
        case R_BGR15:
            p = u16le(in + 2 * i);
            o[0] = (uint8_t)((p >> 10 & 31) * 255 / 31);
            o[1] = (uint8_t)((p >> 5 & 31) * 255 / 31);
            o[2] = (uint8_t)((p & 31) * 255 / 31);
            break;
        case R_BGR16:
            p = u16le(in + 2 * i);
            o[0] = (uint8_t)((p >> 11 & 31) * 255 / 31);
            o[1] = (uint8_t)((p >> 5 & 63) * 255 / 63);
            o[2] = (uint8_t)((p & 31) * 255 / 31);
            break;
        case R_BGR: o[0] = in[3 * i + 2]; o[1] = in[3 * i + 1]; o[2] = in[3 * i]; break;
        case R_BGRX: o[0] = in[4 * i + 2]; o[1] = in[4 * i + 1]; o[2] = in[4 * i]; break;
        case R_XBGR: o[0] = in[4 * i + 3]; o[1] = in[4 * i + 2]; o[2] = in[4 * i + 1]; break;
        default: o[0] = in[4 * i]; o[1] = in[4 * i + 1]; o[2] = in[4 * i + 2]; break;
        }
    }
    return MV_OK;
}

static mv_status bmp_run(bmp_ctx *x, mv_err *e)
{
    mv_status s = mv_input_make_seekable(x->in, e);
    if (s != MV_OK) return s;
    x->size = mv_input_size(x->in);
    if ((s = bmp_header(x, e)) != MV_OK) return s;
    int w = (int)x->w, h = (int)x->h;
    x->res.rgb = mv_malloc((size_t)w * h * 3);
    x->row = mv_malloc((size_t)w * 4 + 4);
    if (!x->res.rgb || !x->row)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %dx%d image", x->r->name, w, h);
    if (x->comp == BI_RLE8 || x->comp == BI_RLE4) {
        if ((s = bmp_rle(x, e)) != MV_OK) return s;
        for (int y = 0; y < h; y++) {
            int dy = x->topdown ? y : h - 1 - y;
            if (mv_image_past(x->r->deadline)) return mv_image_fail_time(x->r->name, "BMP", e);
            if ((s = bmp_map(x, x->idx + (size_t)y * w, w, x->res.rgb + (size_t)dy * w * 3, e)) != MV_OK)
                return s;
        }
    } else {
        /* PIL's raw decoder: rows of ((w * bits + 31) >> 3) & ~3 bytes; the last row needs only
         * its pixels, not the padding */
        uint64_t stride = (((uint64_t)w * x->bits + 31) >> 3) & ~(uint64_t)3;
        size_t need = (size_t)(((uint64_t)w * x->bits + 7) / 8);
        uint8_t *in = mv_malloc(need);
        if (!in) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->r->name);
        for (int y = 0; y < h && s == MV_OK; y++) {
            int dy = x->topdown ? y : h - 1 - y;
            s = bmp_read(x, x->data + (uint64_t)y * stride, in, need, e);
            if (s == MV_OK) s = bmp_row(x, in, x->row, x->res.rgb + (size_t)dy * w * 3, e);
        }
        free(in);
        if (s != MV_OK) return s;
    }
    x->res.w = w;
    x->res.h = h;
    x->res.orientation = 1;
    return MV_OK;
}

int mv_bmp_sniff(const uint8_t *head, size_t n)
{
    /* "BM" and a DIB header size PIL or a later Pillow knows */
    if (!mv_magic_at(head, n, 0, "BM", 2) || n < 18) return 0;
    uint32_t hs = u32le(head + 14);
    return hs == 12 || hs == 40 || hs == 52 || hs == 56 || hs == 64 || hs == 108 || hs == 124;
}

mv_status mv_bmp_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    bmp_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", r->name);
    x->r = r;
    x->in = r->in;
    mv_status s = bmp_run(x, e);
    free(x->idx);
    free(x->row);
    if (s == MV_OK) *out = x->res;
    else free(x->res.rgb);
    free(x);
    return s;
}
