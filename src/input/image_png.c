/* image_png.c - PNG to 8-bit RGB with libpng, as PIL decodes it (PngImagePlugin.py, Unpack.c,
 * Convert.c): every bit depth and colour type, palette + tRNS, Adam7; 16-bit samples keep their
 * high byte ("RGB;16B"), 1/2/4-bit gray is scaled to 8 bits, palette images map through PLTE,
 * alpha and tRNS are dropped as convert("RGB") drops them. 16-bit grayscale: v >> 8, where PIL
 * clips (mv_image.h). Every chunk's CRC is verified, as PIL does. Orientation: the eXIf chunk,
 * else the "Raw profile type exif" text, then XMP. Every libpng call runs under setjmp; nothing
 * after IEND is read; the time limit is checked between rows and input reads.
 * Not here: applying the orientation (image.c), PNG writing (src/output/png_write.c).
 */
#include "image_int.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

typedef struct {
    mv_image_req req;
    int timed_out, read_failed;
    png_structp png;
    png_infop info;
    mv_image_raw res;
    uint8_t *raw;
    png_bytep *rows;
    char msg[512];
} png_ctx;

static void png_on_error(png_structp p, png_const_charp msg)
{
    png_ctx *x = png_get_error_ptr(p);
    snprintf(x->msg, sizeof x->msg, "%s", msg);
    png_longjmp(p, 1);
}

static void png_on_warning(png_structp p, png_const_charp msg)
{
    (void)p;
    (void)msg;
}

static void png_check_time(png_structp p, png_ctx *x)
{
    if (mv_image_past(x->req.deadline)) {
        x->timed_out = 1;
        png_error(p, "time limit exceeded");
    }
}

static void png_on_read(png_structp p, png_bytep out, size_t n)
{
    png_ctx *x = png_get_io_ptr(p);
    png_check_time(p, x);
    ssize_t k = mv_input_read(x->req.in, out, n);
    if (k < 0) {
        x->read_failed = 1;
        png_error(p, "read error");
    }
    if ((size_t)k != n) png_error(p, "unexpected end of file (image file is truncated)");
}

static void png_on_row(png_structp p, png_uint_32 row, int pass)
{
    (void)row;
    (void)pass;
    png_check_time(p, png_get_error_ptr(p));
}

static int png_orientation(png_ctx *x)
{
    /* PIL: info["exif"] (eXIf chunk), else the "Raw profile type exif" text chunk; then XMP */
    int exif_o = 0, xmp_o = 0, have_exif = 0;
#ifdef PNG_eXIf_SUPPORTED
    png_uint_32 n = 0;
    png_bytep exif = NULL;
    if (png_get_eXIf_1(x->png, x->info, &n, &exif) && exif && n > 0) {
        exif_o = mv_exif_orientation(exif, n);
        have_exif = 1;
    }
#endif
    png_textp text = NULL;
    int nt = 0;
    png_get_text(x->png, x->info, &text, &nt);
    for (int i = 0; i < nt; i++) {
        if (!text[i].key || !text[i].text) continue;
        size_t len = strlen(text[i].text);    /* libpng NUL-terminates (decompressed) text */
        if (!have_exif && !strcmp(text[i].key, "Raw profile type exif")) {
            exif_o = mv_raw_profile_orientation(text[i].text, len);
            have_exif = 1;
        } else if (!xmp_o && !strcmp(text[i].key, "XML:com.adobe.xmp")) {
            xmp_o = mv_xmp_orientation((const uint8_t *)text[i].text, len);
        }
    }
    return mv_orientation_pick(exif_o, xmp_o);
}

static mv_status png_run(png_ctx *x, mv_err *e)
{
    if (setjmp(png_jmpbuf(x->png))) {
        if (x->timed_out) return mv_image_fail_time(x->req.name, "PNG", e);
        if (x->read_failed) return mv_input_fail(x->req.in, e);
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt PNG data: %s", x->req.name, x->msg);
    }
    /* PIL verifies the CRC of every chunk it reads; do not let libpng skip bad ancillary chunks */
    png_set_crc_action(x->png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
    png_set_read_fn(x->png, x, png_on_read);
    if (mv_image_watch(x->req.deadline)) png_set_read_status_fn(x->png, png_on_row);
    png_read_info(x->png, x->info);
    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0, interlace = 0;
    png_get_IHDR(x->png, x->info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    mv_status s = mv_image_check_size(x->req.name, "PNG", w, h, x->req.max_pixels, e);
    if (s != MV_OK) return s;

    if (depth == 16) png_set_strip_16(x->png);                     /* high byte, like "RGB;16B" */
    if (depth < 8) png_set_packing(x->png);
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(x->png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(x->png);
    png_set_interlace_handling(x->png);
    png_read_update_info(x->png, x->info);
    int ch = png_get_channels(x->png, x->info);
    size_t rowbytes = png_get_rowbytes(x->png, x->info);
    if (ch < 1 || ch > 4 || rowbytes != (size_t)w * ch || png_get_bit_depth(x->png, x->info) != 8)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unexpected PNG layout (%d channels, %d-bit)",
                       x->req.name, ch, png_get_bit_depth(x->png, x->info));
    x->raw = mv_malloc(rowbytes * h);
    x->rows = mv_malloc(sizeof(png_bytep) * h);
    if (!x->raw || !x->rows)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %ux%u image", x->req.name, w, h);
    for (png_uint_32 y = 0; y < h; y++) x->rows[y] = x->raw + rowbytes * y;
    png_read_image(x->png, x->rows);
    png_read_end(x->png, x->info);
    x->res.orientation = png_orientation(x);

    size_t np = (size_t)w * h;
    if (ch == 3) {
        x->res.rgb = x->raw;
        x->raw = NULL;
    } else {
        x->res.rgb = mv_malloc(np * 3);
        if (!x->res.rgb)
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %ux%u image", x->req.name, w, h);
        const uint8_t *r = x->raw;
        uint8_t *o = x->res.rgb;
        for (size_t i = 0; i < np; i++, o += 3) {
            if (ch <= 2) {              /* gray or gray+alpha: replicate, drop alpha */
                o[0] = o[1] = o[2] = r[i * ch];
            } else {                    /* RGBA: drop alpha */
                o[0] = r[i * 4];
                o[1] = r[i * 4 + 1];
                o[2] = r[i * 4 + 2];
            }
        }
    }
    x->res.w = (int)w;
    x->res.h = (int)h;
    return MV_OK;
}

int mv_png_sniff(const uint8_t *head, size_t n) { return mv_magic_at(head, n, 0, "\x89PNG\r\n\x1a\n", 8); }

mv_status mv_png_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    png_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", r->name);
    x->req = *r;
    mv_status s;
    x->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, x, png_on_error, png_on_warning);
    x->info = x->png ? png_create_info_struct(x->png) : NULL;
    if (!x->png || !x->info) s = mv_fail(e, MV_ERR_NOMEM, "%s: cannot create a libpng decoder", r->name);
    else s = png_run(x, e);
    if (x->png) png_destroy_read_struct(&x->png, x->info ? &x->info : NULL, NULL);
    free(x->raw);
    free(x->rows);
    if (s == MV_OK) *out = x->res;
    else free(x->res.rgb);
    free(x);
    return s;
}
