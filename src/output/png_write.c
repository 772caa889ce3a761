/* png_write.c - writes an 8-bit RGB buffer as a PNG file (used by --dump-stages to save the
 * decoded / resized input). Not a general PNG encoder: RGB only, default compression, no metadata.
 * Errors (open, libpng, short write, close) are returned as MV_ERR_IO with the path. */
#include "mv_png_write.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <png.h>

typedef struct {
    char msg[512];
} pngw_err;

static void pngw_on_error(png_structp p, png_const_charp msg)
{
    pngw_err *x = png_get_error_ptr(p);
    snprintf(x->msg, sizeof x->msg, "%s", msg);
    png_longjmp(p, 1);
}

static void pngw_on_warning(png_structp p, png_const_charp msg)
{
    (void)p;
    (void)msg;
}

/* Runs under setjmp; png/info/f belong to the caller, which cleans up. */
static int pngw_run(png_structp png, png_infop info, FILE *f, const uint8_t *rgb, int w, int h)
{
    if (setjmp(png_jmpbuf(png))) return -1;
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(rgb + (size_t)y * w * 3));
    png_write_end(png, info);
    return 0;
}

mv_status mv_png_write_rgb(const char *path, const uint8_t *rgb, int w, int h, mv_err *e)
{
    if (!rgb || w <= 0 || h <= 0)
        return mv_fail(e, MV_ERR_USAGE, "%s: cannot write an empty %dx%d image", path, w, h);
    FILE *f = fopen(path, "wb");
    if (!f) return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    pngw_err err = {{0}};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, pngw_on_error, pngw_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    int rc = -1;
    if (!png || !info) snprintf(err.msg, sizeof err.msg, "cannot create a libpng encoder");
    else rc = pngw_run(png, info, f, rgb, w, h);
    if (png) png_destroy_write_struct(&png, info ? &info : NULL);
    int ferr = ferror(f);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err.msg, sizeof err.msg, "close failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && ferr) {
        snprintf(err.msg, sizeof err.msg, "write failed");
        rc = -1;
    }
    if (rc != 0) return mv_fail(e, MV_ERR_IO, "%s: cannot write PNG: %s", path, err.msg);
    return MV_OK;
}
