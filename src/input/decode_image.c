/* decode_image.c - JPEG / PNG / WebP decoding to 8-bit RGB the way HF's load_image does it (PIL
 * open + ImageOps.exif_transpose + convert("RGB")), and magic-byte sniffing of media files.
 *
 * Not here: resizing and normalisation (preprocess.c), video (decode_video.c), PNG writing
 * (png_write.c). Every libjpeg / libpng call runs under setjmp, so a corrupt file returns an
 * error and never aborts. Images are decoded from a stdio stream (the file itself, or fmemopen for
 * mv_image_decode_mem): the header is read and its size checked against the pixel limit before
 * any pixel buffer is allocated, and nothing after the image's end (PNG IEND, JPEG EOI, the WebP
 * RIFF size) is ever read. The time limit is checked by libjpeg's progress monitor (every scan
 * and row), between PNG rows and input reads, and between the WebP incremental decoder's steps;
 * a decode past it stops with MV_ERR_LIMIT.
 *
 * PIL behaviours reproduced (Pillow sources: JpegImagePlugin.py, JpegDecode.c, PngImagePlugin.py,
 * Unpack.c, Convert.c, _webp.c, Image.getexif, ImageOps.exif_transpose):
 *  - JPEG: libjpeg defaults (ISLOW IDCT, fancy upsampling), output colour space chosen from the
 *    component count only (1 gray, 3 RGB, 4 CMYK); 4-component data is always treated as Adobe
 *    inverted CMYK ("CMYK;I": every sample inverted) and then converted by Convert.c cmyk2rgb.
 *    libjpeg warnings are ignored, except running out of data before the last scanline, which PIL
 *    reports as "image file is truncated" (we do too).
 *  - PNG: 16-bit samples keep their high byte ("RGB;16B"), 1/2/4-bit gray is scaled to 8 bits,
 *    palette images map through PLTE, alpha and tRNS are ignored by convert("RGB").
 *    16-bit grayscale: see mv_image.h (v >> 8, where PIL clips).
 *  - WebP: decoded as non-premultiplied RGBA (WebPAnimDecoder's default mode), alpha dropped.
 *  - Orientation: EXIF IFD0 tag 0x0112 from JPEG APP1 "Exif", PNG eXIf / "Raw profile type exif",
 *    WebP "EXIF"; when absent, XMP tiff:Orientation; values 2..8 are applied, others ignored.
 */
#include "mv_image.h"

#include <setjmp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <webp/decode.h>

/* ---------------------------------------------------------------------------------------------
 * Sniffing
 * ------------------------------------------------------------------------------------------- */

static int has(const uint8_t *h, size_t n, size_t off, const void *magic, size_t len)
{
    return n >= off + len && memcmp(h + off, magic, len) == 0;
}

static int isobmff_image_brand(const uint8_t *b)
{
    static const char *brands[] = {"heic", "heix", "hevc", "hevx", "heim", "heis", "hevm",
                                   "hevs", "mif1", "msf1", "avif", "avis"};
    for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++)
        if (memcmp(b, brands[i], 4) == 0) return 1;
    return 0;
}

const char *mv_sniff_format(const uint8_t *h, size_t n)
{
    if (!h) return "unknown";
    if (has(h, n, 0, "\xff\xd8\xff", 3)) return "jpeg";
    if (has(h, n, 0, "\x89PNG\r\n\x1a\n", 8)) return "png";
    if (has(h, n, 0, "RIFF", 4) && has(h, n, 8, "WEBP", 4)) return "webp";
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
    if (has(h, n, 0, "GIF87a", 6) || has(h, n, 0, "GIF89a", 6)) return "gif";
    if (has(h, n, 0, "II*\0", 4) || has(h, n, 0, "MM\0*", 4)) return "tiff";
    if (has(h, n, 0, "BM", 2) && n >= 14 && h[6] == 0 && h[7] == 0 && h[8] == 0 && h[9] == 0)
        return "bmp";
    if (has(h, n, 0, "\x00\x00\x00\x0cjP  \r\n\x87\n", 12) || has(h, n, 0, "\xff\x4f\xff\x51", 4))
        return "jpeg2000";
    if (has(h, n, 0, "\xff\x0a", 2) || has(h, n, 0, "\x00\x00\x00\x0cJXL \r\n\x87\n", 12))
        return "jpegxl";
    if (has(h, n, 0, "8BPS", 4)) return "psd";
    if (has(h, n, 0, "\x00\x00\x01\x00", 4) && n >= 6 && (h[4] | h[5]) != 0) return "ico";
    return "unknown";
}

mv_media_kind mv_sniff(const uint8_t *head, size_t n)
{
    const char *f = mv_sniff_format(head, n);
    if (!strcmp(f, "jpeg")) return MV_MEDIA_JPEG;
    if (!strcmp(f, "png")) return MV_MEDIA_PNG;
    if (!strcmp(f, "webp")) return MV_MEDIA_WEBP;
    static const char *video[] = {"mp4", "matroska", "avi", "mpegts", "mpegps", "ogg", "flv", "asf"};
    for (size_t i = 0; i < sizeof video / sizeof video[0]; i++)
        if (!strcmp(f, video[i])) return MV_MEDIA_VIDEO;
    if (!strcmp(f, "unknown")) return MV_MEDIA_UNKNOWN;
    return MV_MEDIA_IMAGE_OTHER;
}

/* ---------------------------------------------------------------------------------------------
 * Orientation metadata
 * ------------------------------------------------------------------------------------------- */

/* Orientation from an EXIF blob (TIFF header, optionally preceded by "Exif\0\0").
 * Returns 0 when there is no orientation tag (so XMP may be consulted), -1 when the tag exists
 * but is not a single integer (PIL then leaves the image alone), else the value. */
static int exif_orientation(const uint8_t *d, size_t n)
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
    for (uint32_t i = 0; i < count; i++) {
        size_t off = (size_t)ifd + 2 + 12 * (size_t)i;
        if (off + 12 > n) break;
        const uint8_t *ent = d + off;
        if (RD16(ent) != 0x0112) continue;
        uint32_t type = RD16(ent + 2), cnt = RD32(ent + 4);
        if (cnt != 1) return -1;
        if (type == 3 || type == 8) return (int)RD16(ent + 8) > 0 ? (int)RD16(ent + 8) : -1;
        if (type == 4 || type == 9) return RD32(ent + 8) > 0 && RD32(ent + 8) < 1000 ? (int)RD32(ent + 8) : -1;
        if (type == 1 || type == 6) return ent[8] > 0 ? ent[8] : -1;
        return -1;
    }
    return 0;
#undef RD16
#undef RD32
}

/* PIL: re.search(r'tiff:Orientation(="|>)([0-9])', xmp). 0 when absent. */
static int xmp_orientation(const uint8_t *d, size_t n)
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

/* Decodes PIL's "Raw profile type exif" text ("\nexif\n    LEN\nHEX...") into bytes. */
static int raw_profile_orientation(const char *txt, size_t n)
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
    int o = exif_orientation(buf, m);
    free(buf);
    return o;
}

/* Combines EXIF (wins when it has the tag) and XMP, and maps to the orientation to apply. */
static int final_orientation(int exif_o, int xmp_o)
{
    int o = exif_o != 0 ? exif_o : xmp_o;
    return (o >= 2 && o <= 8) ? o : 1;
}

/* Applies ImageOps.exif_transpose to src [h][w][3]. Returns a new buffer (or src itself for
 * orientation 1) and the displayed size in *ow, *oh. NULL on allocation failure. */
static uint8_t *apply_orientation(uint8_t *src, int w, int h, int o, int *ow, int *oh)
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

static mv_status check_limit(const char *name, const char *fmt, long long w, long long h,
                             long long max_pixels, mv_err *e)
{
    if (w <= 0 || h <= 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt %s data: image size %lldx%lld", name, fmt, w, h);
    if (max_pixels == 0) max_pixels = MV_IMAGE_MAX_PIXELS_DEFAULT;
    if (max_pixels > 0 && w * h > max_pixels)
        return mv_fail(e, MV_ERR_LIMIT,
                       "%s: image size %lldx%lld (%lld pixels) exceeds the limit of %lld pixels "
                       "(decompression bomb guard)", name, w, h, w * h, max_pixels);
    return MV_OK;
}

/* The per-input time limit: deadline is an mv_now() value, 0 for none. */
static int past(double deadline) { return deadline > 0 && mv_now() > deadline; }

static mv_status fail_time(const char *name, const char *fmt, mv_err *e)
{
    return mv_fail(e, MV_ERR_LIMIT, "%s: %s decode stopped: time limit exceeded (--timeout)", name, fmt);
}

/* ---------------------------------------------------------------------------------------------
 * JPEG
 * ------------------------------------------------------------------------------------------- */

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

typedef struct {
    FILE *f;
    const char *name;
    long long max_pixels;
    struct jpeg_decompress_struct cinfo;
    jerr_mgr jerr;
    jprog_mgr prog;
    int created;
    uint8_t *rgb, *row;
    int w, h, orientation;
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

/* Called for every scan libjpeg absorbs (a progressive file can hold thousands) and every output
 * row: past the deadline it unwinds like an error. */
static void jpeg_on_progress(j_common_ptr c)
{
    if (past(((jprog_mgr *)c->progress)->deadline)) {
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
        if (x->jerr.timed_out)
            return fail_time(x->name, "JPEG", e);
        x->jerr.pub.format_message((j_common_ptr)ci, x->msg);
        if (x->jerr.eof)
            return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated): %s",
                           x->name, x->msg);
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt JPEG data: %s", x->name, x->msg);
    }
    jpeg_create_decompress(ci);
    x->created = 1;
    jpeg_stdio_src(ci, x->f);
    if (x->prog.deadline > 0) {
        x->prog.pub.progress_monitor = jpeg_on_progress;
        ci->progress = &x->prog.pub;
    }
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xffff);
    if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt JPEG data: no image in the file", x->name);
    if (x->jerr.eof)
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->name);
    int comps = ci->num_components;
    if (comps != 1 && comps != 3 && comps != 4)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: cannot handle %d-component JPEG images", x->name, comps);
    mv_status s = check_limit(x->name, "JPEG", ci->image_width, ci->image_height, x->max_pixels, e);
    if (s != MV_OK) return s;

    /* orientation: first APP1 "Exif" segment, else XMP */
    int exif_o = 0, xmp_o = 0, have_exif = 0;
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1) continue;
        if (!have_exif && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
            exif_o = exif_orientation(m->data, m->data_length);
            have_exif = 1;
        } else if (!xmp_o && m->data_length >= 29 &&
                   memcmp(m->data, "http://ns.adobe.com/xap/1.0/\0", 29) == 0) {
            xmp_o = xmp_orientation(m->data + 29, m->data_length - 29);
        }
    }
    x->orientation = final_orientation(exif_o, xmp_o);

    ci->out_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
    if (ci->output_components != comps)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: libjpeg returned %d components, expected %d",
                       x->name, ci->output_components, comps);
    int w = (int)ci->output_width, h = (int)ci->output_height;
    x->rgb = mv_malloc((size_t)w * h * 3);
    x->row = mv_malloc((size_t)w * comps);
    if (!x->rgb || !x->row)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %dx%d image", x->name, w, h);
    while (ci->output_scanline < ci->output_height) {
        int y = (int)ci->output_scanline;
        uint8_t *out = x->rgb + (size_t)y * w * 3;
        JSAMPROW rp = comps == 3 ? out : x->row;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1)
            return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->name);
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
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated JPEG data (image file is truncated)", x->name);
    jpeg_finish_decompress(ci);
    x->w = w;
    x->h = h;
    return MV_OK;
}

static mv_status decode_jpeg(FILE *f, const char *name, long long max_pixels, double deadline,
                             uint8_t **rgb, int *w, int *h, int *orientation, mv_err *e)
{
    jpeg_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
    x->f = f;
    x->prog.deadline = deadline;
    x->name = name;
    x->max_pixels = max_pixels;
    mv_status s = jpeg_run(x, e);
    if (x->created) jpeg_destroy_decompress(&x->cinfo);
    free(x->row);
    if (s == MV_OK) {
        *rgb = x->rgb;
        *w = x->w;
        *h = x->h;
        *orientation = x->orientation;
    } else {
        free(x->rgb);
    }
    free(x);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * PNG
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    double deadline;
    int timed_out;
    const char *name;
    long long max_pixels;
    png_structp png;
    png_infop info;
    uint8_t *raw, *rgb;
    png_bytep *rows;
    int w, h, orientation;
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
    if (past(x->deadline)) {
        x->timed_out = 1;
        png_error(p, "time limit exceeded");
    }
}

static void png_on_read(png_structp p, png_bytep out, size_t n)
{
    png_ctx *x = png_get_io_ptr(p);
    png_check_time(p, x);
    if (fread(out, 1, n, x->f) != n) {
        if (ferror(x->f)) png_error(p, "read error");
        png_error(p, "unexpected end of file (image file is truncated)");
    }
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
        exif_o = exif_orientation(exif, n);
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
            exif_o = raw_profile_orientation(text[i].text, len);
            have_exif = 1;
        } else if (!xmp_o && !strcmp(text[i].key, "XML:com.adobe.xmp")) {
            xmp_o = xmp_orientation((const uint8_t *)text[i].text, len);
        }
    }
    return final_orientation(exif_o, xmp_o);
}

static mv_status png_run(png_ctx *x, mv_err *e)
{
    if (setjmp(png_jmpbuf(x->png))) {
        if (x->timed_out) return fail_time(x->name, "PNG", e);
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt PNG data: %s", x->name, x->msg);
    }
    /* PIL verifies the CRC of every chunk it reads; do not let libpng skip bad ancillary chunks */
    png_set_crc_action(x->png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
    png_set_read_fn(x->png, x, png_on_read);
    if (x->deadline > 0) png_set_read_status_fn(x->png, png_on_row);
    png_read_info(x->png, x->info);
    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0, interlace = 0;
    png_get_IHDR(x->png, x->info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    mv_status s = check_limit(x->name, "PNG", w, h, x->max_pixels, e);
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
                       x->name, ch, png_get_bit_depth(x->png, x->info));
    x->raw = mv_malloc(rowbytes * h);
    x->rows = mv_malloc(sizeof(png_bytep) * h);
    if (!x->raw || !x->rows)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %ux%u image", x->name, w, h);
    for (png_uint_32 y = 0; y < h; y++) x->rows[y] = x->raw + rowbytes * y;
    png_read_image(x->png, x->rows);
    png_read_end(x->png, x->info);
    x->orientation = png_orientation(x);

    size_t np = (size_t)w * h;
    if (ch == 3) {
        x->rgb = x->raw;
        x->raw = NULL;
    } else {
        x->rgb = mv_malloc(np * 3);
        if (!x->rgb) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %ux%u image", x->name, w, h);
        const uint8_t *r = x->raw;
        uint8_t *o = x->rgb;
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
    x->w = (int)w;
    x->h = (int)h;
    return MV_OK;
}

static mv_status decode_png(FILE *f, const char *name, long long max_pixels, double deadline,
                            uint8_t **rgb, int *w, int *h, int *orientation, mv_err *e)
{
    png_ctx *x = calloc(1, sizeof *x);
    if (!x) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
    x->f = f;
    x->deadline = deadline;
    x->name = name;
    x->max_pixels = max_pixels;
    mv_status s;
    x->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, x, png_on_error, png_on_warning);
    x->info = x->png ? png_create_info_struct(x->png) : NULL;
    if (!x->png || !x->info) s = mv_fail(e, MV_ERR_NOMEM, "%s: cannot create a libpng decoder", name);
    else s = png_run(x, e);
    if (x->png) png_destroy_read_struct(&x->png, x->info ? &x->info : NULL, NULL);
    free(x->raw);
    free(x->rows);
    if (s == MV_OK) {
        *rgb = x->rgb;
        *w = x->w;
        *h = x->h;
        *orientation = x->orientation;
    } else {
        free(x->rgb);
    }
    free(x);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * WebP
 * ------------------------------------------------------------------------------------------- */

static const char *webp_status_str(VP8StatusCode c)
{
    switch (c) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data (image file is truncated)";
    }
    return "unknown error";
}

/* Walks the RIFF chunks for EXIF and XMP metadata. */
static int webp_orientation(const uint8_t *buf, size_t len)
{
    int exif_o = 0, xmp_o = 0;
    size_t pos = 12;
    while (pos + 8 <= len) {
        const uint8_t *c = buf + pos;
        size_t n = (size_t)c[4] | (size_t)c[5] << 8 | (size_t)c[6] << 16 | (size_t)c[7] << 24;
        if (n > len - pos - 8) break;
        if (!exif_o && memcmp(c, "EXIF", 4) == 0) exif_o = exif_orientation(c + 8, n);
        if (!xmp_o && memcmp(c, "XMP ", 4) == 0) xmp_o = xmp_orientation(c + 8, n);
        pos += 8 + n + (n & 1);
    }
    return final_orientation(exif_o, xmp_o);
}

/* Bytes of the file the WebP header is parsed from (VP8X, VP8 and VP8L headers are ~30 bytes). */
#define WEBP_HEAD 4096
/* Input fed to the incremental decoder per step (the time limit is checked between steps). */
#define WEBP_STEP (256 << 10)
/* Metadata (ICC, EXIF, XMP) a WebP may carry on top of 4 bytes per pixel of image data. */
#define WEBP_SLACK (64LL << 20)

/* Reads the RIFF of a WebP file from f: the header first (size check), then only the RIFF's
 * declared length, never what follows; decodes in WEBP_STEP steps with WebPIDecoder. */
static mv_status decode_webp(FILE *f, const char *name, long long max_pixels, double deadline,
                             uint8_t **rgb, int *w, int *h, int *orientation, mv_err *e)
{
    uint8_t head[WEBP_HEAD];
    size_t hn = fread(head, 1, sizeof head, f);
    if (ferror(f)) return mv_fail(e, MV_ERR_IO, "%s: read error", name);
    WebPBitstreamFeatures ft;
    VP8StatusCode st = WebPGetFeatures(head, hn, &ft);
    if (st != VP8_STATUS_OK)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt WebP data: %s", name, webp_status_str(st));
    if (ft.has_animation)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: animated WebP is not supported", name);
    mv_status s = check_limit(name, "WebP", ft.width, ft.height, max_pixels, e);
    if (s != MV_OK) return s;
    size_t np = (size_t)ft.width * ft.height;
    /* mv_sniff saw "RIFF....WEBP": hn >= 12 */
    unsigned long long riff = 8ULL + ((unsigned long long)head[4] | (unsigned long long)head[5] << 8 |
                                      (unsigned long long)head[6] << 16 | (unsigned long long)head[7] << 24);
    unsigned long long cap = 4ULL * np + (unsigned long long)WEBP_SLACK;
    if (riff > cap)
        return mv_fail(e, MV_ERR_LIMIT, "%s: WebP file declares %llu bytes, more than a %dx%d image may "
                       "take here (%llu: 4 bytes per pixel + 64 MiB of metadata)", name, riff,
                       ft.width, ft.height, cap);
    uint8_t *buf = mv_malloc(riff), *rgba = NULL;
    if (!buf) return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %llu-byte WebP file", name, riff);
    size_t len = hn < riff ? hn : (size_t)riff;
    memcpy(buf, head, len);
    while (len < riff) {
        if (past(deadline)) {
            free(buf);
            return fail_time(name, "WebP", e);
        }
        size_t want = riff - len < WEBP_STEP ? (size_t)(riff - len) : WEBP_STEP;
        size_t r = fread(buf + len, 1, want, f);
        len += r;
        if (r < want) break;        /* a truncated file: the decoder says what is missing */
    }
    if (ferror(f)) {
        free(buf);
        return mv_fail(e, MV_ERR_IO, "%s: read error", name);
    }
    rgba = mv_malloc(np * 4);
    WebPDecoderConfig cfg;
    WebPIDecoder *idec = NULL;
    if (!rgba) {
        s = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %dx%d image", name, ft.width, ft.height);
    } else if (!WebPInitDecoderConfig(&cfg)) {
        s = mv_fail(e, MV_ERR_INTERNAL, "%s: libwebp version mismatch", name);
    } else {
        cfg.output.colorspace = MODE_RGBA;      /* non-premultiplied, as WebPAnimDecoder's default */
        cfg.output.is_external_memory = 1;
        cfg.output.u.RGBA.rgba = rgba;
        cfg.output.u.RGBA.stride = ft.width * 4;
        cfg.output.u.RGBA.size = np * 4;
        idec = WebPIDecode(NULL, 0, &cfg);
        if (!idec) s = mv_fail(e, MV_ERR_NOMEM, "%s: cannot create a WebP decoder", name);
    }
    for (size_t fed = 0; s == MV_OK;) {
        if (past(deadline)) {
            s = fail_time(name, "WebP", e);
            break;
        }
        fed = len - fed < WEBP_STEP ? len : fed + WEBP_STEP;
        st = WebPIUpdate(idec, buf, fed);
        if (st == VP8_STATUS_OK) break;
        if (st == VP8_STATUS_SUSPENDED && fed == len) st = VP8_STATUS_NOT_ENOUGH_DATA;
        if (st != VP8_STATUS_SUSPENDED)
            s = mv_fail(e, MV_ERR_FORMAT, "%s: corrupt WebP data: %s", name, webp_status_str(st));
    }
    if (idec) WebPIDelete(idec);
    if (s == MV_OK) {
        WebPFreeDecBuffer(&cfg.output);
        *orientation = webp_orientation(buf, len);
    }
    free(buf);
    if (s != MV_OK) {
        free(rgba);
        return s;
    }
    for (size_t i = 0; i < np; i++) {       /* RGBA -> RGB in place, dropping alpha */
        rgba[3 * i] = rgba[4 * i];
        rgba[3 * i + 1] = rgba[4 * i + 1];
        rgba[3 * i + 2] = rgba[4 * i + 2];
    }
    uint8_t *shrunk = realloc(rgba, np * 3);
    *rgb = shrunk ? shrunk : rgba;
    *w = ft.width;
    *h = ft.height;
    return MV_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------- */

/* Decodes the image in f (positioned at its start); name is for messages. */
static mv_status decode_stream(FILE *f, const char *name, long long max_pixels, double deadline,
                               mv_image *img, mv_err *e)
{
    uint8_t head[MV_SNIFF_BYTES];
    size_t n = fread(head, 1, sizeof head, f);
    if (ferror(f)) return mv_fail(e, MV_ERR_IO, "%s: read error", name);
    if (n == 0) return mv_fail(e, MV_ERR_FORMAT, "%s: empty file", name);
    if (fseek(f, 0, SEEK_SET) != 0) return mv_fail(e, MV_ERR_IO, "%s: cannot seek back to the start", name);
    mv_media_kind k = mv_sniff(head, n);
    uint8_t *rgb = NULL;
    int w = 0, h = 0, o = 1;
    mv_status s;
    const char *fmt;
    switch (k) {
    case MV_MEDIA_JPEG:
        fmt = "jpeg";
        s = decode_jpeg(f, name, max_pixels, deadline, &rgb, &w, &h, &o, e);
        break;
    case MV_MEDIA_PNG:
        fmt = "png";
        s = decode_png(f, name, max_pixels, deadline, &rgb, &w, &h, &o, e);
        break;
    case MV_MEDIA_WEBP:
        fmt = "webp";
        s = decode_webp(f, name, max_pixels, deadline, &rgb, &w, &h, &o, e);
        break;
    case MV_MEDIA_VIDEO:
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: is a video (%s), not a still image", name,
                       mv_sniff_format(head, n));
    case MV_MEDIA_IMAGE_OTHER:
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: %s images are not supported (JPEG, PNG, WebP only)",
                       name, mv_sniff_format(head, n));
    default:
        return mv_fail(e, MV_ERR_FORMAT, "%s: not a JPEG, PNG or WebP image (unrecognised file signature)", name);
    }
    if (s != MV_OK) return s;
    int ow, oh;
    uint8_t *out = apply_orientation(rgb, w, h, o, &ow, &oh);
    if (!out) {
        free(rgb);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory rotating a %dx%d image", name, w, h);
    }
    if (out != rgb) free(rgb);
    img->rgb = out;
    img->width = ow;
    img->height = oh;
    img->src_width = w;
    img->src_height = h;
    img->orientation = o;
    img->format = fmt;
    return MV_OK;
}

mv_status mv_image_decode_mem(const uint8_t *buf, size_t len, const char *name,
                              long long max_pixels, mv_image *img, mv_err *e)
{
    if (!name) name = "<memory>";
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", name);
    memset(img, 0, sizeof *img);
    if (!buf || len == 0) return mv_fail(e, MV_ERR_FORMAT, "%s: empty file", name);
    FILE *f = fmemopen((void *)buf, len, "rb");
    if (!f) return mv_fail(e, MV_ERR_NOMEM, "%s: cannot open a memory stream", name);
    mv_status s = decode_stream(f, name, max_pixels, 0, img, e);
    fclose(f);
    return s;
}

mv_status mv_image_decode_limited(const char *path, long long max_pixels, double timeout_s,
                                  mv_image *img, mv_err *e)
{
    if (!img) return mv_fail(e, MV_ERR_USAGE, "%s: no output image", path);
    memset(img, 0, sizeof *img);
    double deadline = timeout_s > 0 ? mv_now() + timeout_s : 0;
    int fd;
    mv_status s = mv_open_regular(path, &fd, e);
    if (s != MV_OK) return s;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mv_fail(e, MV_ERR_NOMEM, "%s: cannot open a stdio stream", path);
    }
    s = decode_stream(f, path, max_pixels, deadline, img, e);
    fclose(f);
    return s;
}

mv_status mv_image_decode(const char *path, long long max_pixels, mv_image *img, mv_err *e)
{
    return mv_image_decode_limited(path, max_pixels, 0, img, e);
}

void mv_image_free(mv_image *img)
{
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
