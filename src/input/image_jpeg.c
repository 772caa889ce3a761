/* image_jpeg.c - JPEG to 8-bit RGB with libjpeg(-turbo), as PIL decodes it (JpegImagePlugin.py,
 * JpegDecode.c, Convert.c): libjpeg's defaults (ISLOW IDCT, fancy upsampling), the output colour
 * space chosen from the component count only (1 gray, 3 RGB, 4 CMYK); 4-component data is always
 * taken as Adobe inverted CMYK ("CMYK;I": every sample inverted), then Convert.c's cmyk2rgb.
 * libjpeg warnings are ignored, except running out of data before the last scanline, which PIL
 * reports as "image file is truncated" (we do too). Orientation: the first APP1 "Exif" segment,
 * else the XMP one. Every libjpeg call runs under setjmp, so a corrupt file returns an error and
 * never aborts; the time limit is checked by libjpeg's progress monitor (every scan and row).
 * The bytes come from an mv_input through a source manager that behaves as libjpeg's stdio one
 * (4096-byte reads, a fake EOI with a warning at the end of the data), except that a read error
 * is reported as one.
 * Not here: applying the orientation (image.c), other formats.
 */
#include "image_int.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int eof;            /* libjpeg ran out of data (JWRN_JPEG_EOF) */
    int timed_out;      /* the progress monitor stopped the decode at the deadline */
} jerr_mgr;

typedef struct {
    struct jpeg_progress_mgr pub;
    double deadline;
} jprog_mgr;

/* libjpeg's stdio source manager (jdatasrc.c) over an mv_input. */
typedef struct {
    struct jpeg_source_mgr pub;
    mv_input *in;
    int start_of_file;
    int read_failed;
    JOCTET buf[4096];
} jsrc_mgr;

typedef struct {
    mv_image_req req;
    struct jpeg_decompress_struct cinfo;
    jerr_mgr jerr;
    jprog_mgr prog;
    jsrc_mgr src;
    int created;
    mv_image_raw res;
    uint8_t *row;
    char msg[JMSG_LENGTH_MAX];
} jpeg_ctx;

static void jpeg_on_error(j_common_ptr c)
{
    jerr_mgr *m = (jerr_mgr *)c->err;
    longjmp(m->jb, 1);
}

static void jpeg_on_message(j_common_ptr c, int level)
{
    /* Warnings (level -1) are ignored as PIL ignores them, except running out of data. */
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) ((jerr_mgr *)c->err)->eof = 1;
}

static void jpeg_silent(j_common_ptr c) { (void)c; }

static void src_init(j_decompress_ptr c) { ((jsrc_mgr *)c->src)->start_of_file = 1; }

static boolean src_fill(j_decompress_ptr c)
{
    jsrc_mgr *s = (jsrc_mgr *)c->src;
    ssize_t n = mv_input_read(s->in, s->buf, sizeof s->buf);
    if (n < 0) {
        s->read_failed = 1;
        ERREXIT(c, JERR_FILE_READ);
    }
    if (n == 0) {
        if (s->start_of_file) ERREXIT(c, JERR_INPUT_EMPTY);
        WARNMS(c, JWRN_JPEG_EOF);
        s->buf[0] = (JOCTET)0xFF; /* a fake EOI marker */
        s->buf[1] = (JOCTET)JPEG_EOI;
        n = 2;
    }
    s->pub.next_input_byte = s->buf;
    s->pub.bytes_in_buffer = (size_t)n;
    s->start_of_file = 0;
    return TRUE;
}

/* As jdatasrc.c: by reading (past the end, through fake EOI markers). */
static void src_skip(j_decompress_ptr c, long num_bytes)
{
    struct jpeg_source_mgr *src = c->src;
    if (num_bytes <= 0) return;
    while (num_bytes > (long)src->bytes_in_buffer) {
        num_bytes -= (long)src->bytes_in_buffer;
        (void)src->fill_input_buffer(c);
    }
    src->next_input_byte += (size_t)num_bytes;
    src->bytes_in_buffer -= (size_t)num_bytes;
}

static void src_term(j_decompress_ptr c) { (void)c; }

/* Called for every scan libjpeg absorbs (a progressive file can hold thousands) and every output
 * row: past the deadline it unwinds like an error. */
static void jpeg_on_progress(j_common_ptr c)
{
    if (mv_image_past(((jprog_mgr *)c->progress)->deadline)) {
        jerr_mgr *m = (jerr_mgr *)c->err;
        m->timed_out = 1;
        longjmp(m->jb, 1);
    }
}

/* PIL Convert.c: MULDIV255(a, b) = (a*b + 128 + ((a*b + 128) >> 8)) >> 8. */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static inline uint8_t clip8(int v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* Runs under setjmp; everything it allocates hangs off ctx so the caller can free it. */
static mv_status jpeg_run(jpeg_ctx *x, mv_err *e)
{
    struct jpeg_decompress_struct *ci = &x->cinfo;
    ci->err = jpeg_std_error(&x->jerr.pub);
    x->jerr.pub.error_exit = jpeg_on_error;
    x->jerr.pub.emit_message = jpeg_on_message;
    x->jerr.pub.output_message = jpeg_silent;
    if (setjmp(x->jerr.jb)) {
        if (x->src.read_failed)
            return mv_input_fail(x->req.in, e);
        if (x->jerr.timed_out)
            return mv_image_fail_time(x->req.name, "JPEG", e);
        x->jerr.pub.format_message((j_common_ptr)ci, x->msg);
        if (x->jerr.eof)
            return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated): %s",
                           x->req.name, x->msg);
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt JPEG data: %s", x->req.name, x->msg);
    }
    jpeg_create_decompress(ci);
    x->created = 1;
    x->src = (jsrc_mgr){.pub = {.init_source = src_init, .fill_input_buffer = src_fill,
                                .skip_input_data = src_skip, .resync_to_restart = jpeg_resync_to_restart,
                                .term_source = src_term},
                        .in = x->req.in};
    ci->src = &x->src.pub;
    if (mv_image_watch(x->prog.deadline)) {
        x->prog.pub.progress_monitor = jpeg_on_progress;
        ci->progress = &x->prog.pub;
    }
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xffff);
    if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt JPEG data: no image in the file", x->req.name);
    if (x->jerr.eof)
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->req.name);
    int comps = ci->num_components;
    if (comps != 1 && comps != 3 && comps != 4)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: cannot handle %d-component JPEG images", x->req.name,
                       comps);
    mv_status s = mv_image_check_size(x->req.name, "JPEG", ci->image_width, ci->image_height,
                                      x->req.max_pixels, e);
    if (s != MV_OK) return s;

    /* orientation: first APP1 "Exif" segment, else XMP */
    int exif_o = 0, xmp_o = 0, have_exif = 0;
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1) continue;
        if (!have_exif && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
            exif_o = mv_exif_orientation(m->data, m->data_length);
            have_exif = 1;
        } else if (!xmp_o && m->data_length >= 29 &&
                   memcmp(m->data, "http://ns.adobe.com/xap/1.0/\0", 29) == 0) {
            xmp_o = mv_xmp_orientation(m->data + 29, m->data_length - 29);
        }
    }
    x->res.orientation = mv_orientation_pick(exif_o, xmp_o);

    ci->out_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
    if (ci->output_components != comps)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: libjpeg returned %d components, expected %d",
                       x->req.name, ci->output_components, comps);
    int w = (int)ci->output_width, h = (int)ci->output_height;
    x->res.rgb = mv_malloc((size_t)w * h * 3);
    x->row = mv_malloc((size_t)w * comps);
    if (!x->res.rgb || !x->row)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %dx%d image", x->req.name, w, h);
    while (ci->output_scanline < ci->output_height) {
        int y = (int)ci->output_scanline;
        uint8_t *out = x->res.rgb + (size_t)y * w * 3;
        JSAMPROW rp = comps == 3 ? out : x->row;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1)
            return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->req.name);
        if (comps == 1) {
            for (int i = 0; i < w; i++) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = x->row[i];
        } else if (comps == 4) {
            /* "CMYK;I" (inverted samples), then Convert.c cmyk2rgb */
            for (int i = 0; i < w; i++) {
                const uint8_t *p = x->row + 4 * i;
                int c = 255 - p[0], mm = 255 - p[1], yy = 255 - p[2], k = 255 - p[3];
                int nk = 255 - k;
                out[3 * i + 0] = clip8(nk - muldiv255(c, nk));
                out[3 * i + 1] = clip8(nk - muldiv255(mm, nk));
                out[3 * i + 2] = clip8(nk - muldiv255(yy, nk));
            }
        }
    }
    if (x->jerr.eof)
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->req.name);
    jpeg_finish_decompress(ci);
    x->res.w = w;
    x->res.h = h;
    return MV_OK;
}

int mv_jpeg_sniff(const uint8_t *head, size_t n) { return mv_magic_at(head, n, 0, "\xff\xd8\xff", 3); }

mv_status mv_jpeg_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    jpeg_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", r->name);
    x->req = *r;
    x->prog.deadline = r->deadline;
    mv_status s = jpeg_run(x, e);
    if (x->created) jpeg_destroy_decompress(&x->cinfo);
    free(x->row);
    if (s == MV_OK) *out = x->res;
    else free(x->res.rgb);
    free(x);
    return s;
}
