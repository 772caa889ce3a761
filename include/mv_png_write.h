/* mv_png_write.h - an 8-bit RGB buffer as a PNG file, for --dump-stages (src/output/png_write.c).
 * Not a general PNG encoder: RGB only, default compression, no metadata. */
#ifndef MV_PNG_WRITE_H
#define MV_PNG_WRITE_H

#include "mv_common.h"

/* Writes rgb [h][w][3] as an 8-bit RGB PNG at path; MV_ERR_IO naming the path on failure. */
mv_status mv_png_write_rgb(const char *path, const uint8_t *rgb, int w, int h, mv_err *e);

#endif
