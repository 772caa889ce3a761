/* image_gif.c - the first frame of a GIF to 8-bit RGB with giflib, as PIL gives it
 * (GifImagePlugin.py, frame 0 with its default loading strategy, then convert("RGB")): the
 * canvas is the logical screen, grown to hold the frame when the frame reaches past it; it is
 * filled with the frame's transparent index (its graphic control extension), else index 0; the
 * frame's indices are written into it (interlaced rows put in place); then every index maps
 * through the frame's colour table (local, else global). A colour table that is the identity grey
 * ramp is dropped, as PIL drops it, and the indices are the grey levels. Transparency is not
 * composited: a transparent pixel shows its palette colour, as convert("RGB") shows it. Later
 * frames are never read: decoding stops after frame 0's last row. No orientation (PIL reads none
 * from GIF).
 *
 * giflib reads the blocks and decompresses the LZW data (DGifGetRecordType, DGifGetImageHeader,
 * DGifGetLine) from the mv_input, sequentially; the blocks between the header and frame 0 are
 * checked as PIL checks them. A byte outside any block is skipped, as PIL skips it.
 *
 * Refused with a message instead of giving other pixels than some Pillow version gives: an index
 * past its colour table (Pillow up to 10.0 shows grey there, 10.1 and later black), a local
 * grey-ramp table under a global one (PIL then maps through the global one), extension blocks
 * without data (Pillow 10.4 and later skip them, earlier versions fail), and LZW code sizes 9..12
 * (PIL decodes them, giflib refuses them). Not here: orientation, resizing.
 */
#include "image_int.h"

#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

typedef struct {
    mv_image_req req;
    GifFileType *gf;
    int read_failed, timed_out, eof;
    int last_byte;          /* the last byte giflib read: after DGifGetImageHeader, the LZW code size */
    uint8_t *canvas;        /* [h][w] indices */
    uint8_t *line;
    mv_image_raw res;
} gif_ctx;

static int gif_on_read(GifFileType *g, GifByteType *buf, int n)
{
    gif_ctx *x = g->UserData;
    if (mv_image_past(x->req.deadline)) {
        x->timed_out = 1;
        return 0;
    }
    ssize_t k = n > 0 ? mv_input_read(x->req.in, buf, (size_t)n) : 0;
    if (k < 0) {
        x->read_failed = 1;
        return 0;
    }
    if (k < n) x->eof = 1;
    if (k > 0) x->last_byte = buf[k - 1];
    return (int)k;
}

/* A giflib failure (code err) in words. */
static mv_status gif_fail(const gif_ctx *x, int err, mv_err *e)
{
    if (x->timed_out) return mv_image_fail_time(x->req.name, "GIF", e);
    if (x->read_failed) return mv_input_fail(x->req.in, e);
    if (x->eof) return mv_fail(e, MV_ERR_FORMAT, "%s: truncated GIF data (image file is truncated)", x->req.name);
    if (err == D_GIF_ERR_NOT_ENOUGH_MEM) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", x->req.name);
    const char *why = GifErrorString(err);
    return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt GIF data: %s", x->req.name, why ? why : "unknown giflib error");
}

static mv_status gif_unsupported(const gif_ctx *x, mv_err *e, const char *what)
{
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: %s", x->req.name, what);
}

/* PIL's _is_palette_needed: anything but entry i = (i, i, i). */
static int gif_palette_needed(const ColorMapObject *m)
{
    for (int i = 0; i < m->ColorCount; i++)
        if (m->Colors[i].Red != i || m->Colors[i].Green != i || m->Colors[i].Blue != i) return 1;
    return 0;
}

/* The blocks before frame 0's image descriptor: the transparent index of the last graphic
 * control extension that sets one (-1: none). */
static mv_status gif_blocks(gif_ctx *x, int *trans, mv_err *e)
{
    GifFileType *g = x->gf;
    for (;;) {
        GifRecordType t;
        if (DGifGetRecordType(g, &t) == GIF_ERROR) {
            if (g->Error == D_GIF_ERR_WRONG_RECORD && !x->eof && !x->read_failed && !x->timed_out)
                continue;                          /* PIL skips a byte that starts no block */
            return gif_fail(x, g->Error, e);
        }
        if (t == IMAGE_DESC_RECORD_TYPE) return MV_OK;
        if (t == TERMINATE_RECORD_TYPE)
            return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt GIF data: no image in the file", x->req.name);
        int code;
        GifByteType *ext;
        if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) return gif_fail(x, g->Error, e);
        if (code == GRAPHICS_EXT_FUNC_CODE) {
            if (!ext)
                return gif_unsupported(x, e, "GIF graphic control extension without data is not supported: "
                                             "Pillow 10.4 and later skip it, earlier versions refuse it");
            /* PIL reads the flags, the delay (2 bytes) and, when flagged, the index */
            if (ext[0] < 3 || ((ext[1] & 1) && ext[0] < 4))
                return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt GIF data: graphic control extension of %d bytes",
                               x->req.name, ext[0]);
            if (ext[1] & 1) *trans = ext[4];
        } else if (code == APPLICATION_EXT_FUNC_CODE) {
            if (!ext)
                return gif_unsupported(x, e, "GIF application extension without data is not supported: "
                                             "Pillow 10.4 and later skip it, earlier versions refuse it");
            if (ext[0] >= 11 && !memcmp(ext + 1, "NETSCAPE2.0", 11)) {
                if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) return gif_fail(x, g->Error, e);
                if (!ext)
                    return gif_unsupported(x, e, "GIF NETSCAPE2.0 extension without its loop block is not "
                                                 "supported: Pillow 10.4 and later skip it, earlier versions refuse it");
            }
        }
        while (ext)
            if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) return gif_fail(x, g->Error, e);
    }
}

static mv_status gif_run(gif_ctx *x, mv_err *e)
{
    int err = 0;
    x->gf = DGifOpen(x, gif_on_read, &err);
    if (!x->gf) return gif_fail(x, err, e);
    GifFileType *g = x->gf;
    /* PIL: a global table that is the grey ramp is no palette */
    const ColorMapObject *global = g->SColorMap && gif_palette_needed(g->SColorMap) ? g->SColorMap : NULL;
    int trans = -1;
    mv_status s = gif_blocks(x, &trans, e);
    if (s != MV_OK) return s;
    if (DGifGetImageHeader(g) == GIF_ERROR) {
        if (g->Error == D_GIF_ERR_READ_FAILED && !x->eof && !x->read_failed && !x->timed_out && x->last_byte > 8)
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: GIF LZW code size %d (above 8) is not supported",
                           x->req.name, x->last_byte);
        return gif_fail(x, g->Error, e);
    }
    int code_size = x->last_byte;
    const GifImageDesc *d = &g->Image;
    long long fx = d->Left, fy = d->Top, fw = d->Width, fh = d->Height;
    if (fw <= 0 || fh <= 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt GIF data: frame size %lldx%lld", x->req.name, fw, fh);
    if (code_size > 8)  /* giflib refuses it from DGifGetImageHeader already; kept for clarity */
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: GIF LZW code size %d (above 8) is not supported",
                       x->req.name, code_size);
    /* the canvas: the screen, grown to hold the frame */
    long long W = g->SWidth > fx + fw ? g->SWidth : fx + fw;
    long long H = g->SHeight > fy + fh ? g->SHeight : fy + fh;
    if ((s = mv_image_check_size(x->req.name, "GIF", W, H, x->req.max_pixels, e)) != MV_OK) return s;

    const ColorMapObject *pal;
    if (d->ColorMap) {
        pal = gif_palette_needed(d->ColorMap) ? d->ColorMap : NULL;
        if (!pal && global)
            return gif_unsupported(x, e, "GIF frame whose local colour table is the grey ramp under a "
                                         "global colour table is not supported (PIL maps it through the global one)");
    } else {
        pal = global;
    }

    size_t w = (size_t)W, h = (size_t)H;
    x->canvas = mv_malloc(w * h);
    x->line = mv_malloc((size_t)fw);
    x->res.rgb = mv_malloc(w * h * 3);
    if (!x->canvas || !x->line || !x->res.rgb)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %lldx%lld image", x->req.name, W, H);
    memset(x->canvas, trans >= 0 ? trans : 0, w * h);
    /* interlaced: rows 0, 8, 16 ..., then 4, 12 ..., then 2, 6 ..., then 1, 3 ... */
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int pass = 0;
    long long row = 0;
    for (long long i = 0; i < fh; i++) {
        if (mv_image_past(x->req.deadline)) return mv_image_fail_time(x->req.name, "GIF", e);
        if (DGifGetLine(g, x->line, (int)fw) == GIF_ERROR) return gif_fail(x, g->Error, e);
        if (d->Interlace) {
            while (row >= fh && pass < 3) row = start[++pass];
        } else {
            row = i;
        }
        memcpy(x->canvas + (size_t)(fy + row) * w + (size_t)fx, x->line, (size_t)fw);
        if (d->Interlace) row += step[pass];
    }

    int ncol = pal ? pal->ColorCount : 256;
    for (size_t i = 0; i < w * h; i++) {
        if (i % w == 0 && mv_image_past(x->req.deadline)) return mv_image_fail_time(x->req.name, "GIF", e);
        int v = x->canvas[i];
        uint8_t *o = x->res.rgb + 3 * i;
        if (!pal) {
            o[0] = o[1] = o[2] = (uint8_t)v;
        } else if (v < ncol) {
            o[0] = pal->Colors[v].Red;
            o[1] = pal->Colors[v].Green;
            o[2] = pal->Colors[v].Blue;
        } else {
            return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: GIF pixel index %d is past its %d-colour table: "
                           "Pillow 10.1 and later show black there, earlier versions grey", x->req.name, v, ncol);
        }
    }
    x->res.w = (int)W;
    x->res.h = (int)H;
    x->res.orientation = 1;
    return MV_OK;
}

int mv_gif_sniff(const uint8_t *head, size_t n)
{
    return mv_magic_at(head, n, 0, "GIF87a", 6) || mv_magic_at(head, n, 0, "GIF89a", 6);
}

mv_status mv_gif_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    gif_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", r->name);
    x->req = *r;
    mv_status s = gif_run(x, e);
    if (x->gf) {
        int err = 0;
        if (DGifCloseFile(x->gf, &err) == GIF_ERROR && s == MV_OK)
            s = mv_fail(e, MV_ERR_INTERNAL, "%s: giflib could not close the decoder (%d)", r->name, err);
    }
    free(x->canvas);
    free(x->line);
    if (s == MV_OK) *out = x->res;
    else free(x->res.rgb);
    free(x);
    return s;
}
