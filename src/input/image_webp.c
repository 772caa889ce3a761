/* image_webp.c - WebP to 8-bit RGB with libwebp, still images only (lossy and lossless), as PIL
 * decodes it (_webp.c): non-premultiplied RGBA (WebPAnimDecoder's default mode), alpha dropped;
 * an animated WebP gives its first frame as PIL's WebPAnimDecoder composes it (on a transparent
 * canvas, so uncovered pixels are black). The header is parsed first (size check), then only the RIFF's
 * declared length is read, never what follows, and decoded by WebPIDecoder in steps, the time
 * limit checked between them. Orientation: the RIFF's "EXIF" chunk, else its "XMP " chunk.
 * Not here: applying the orientation (image.c), other formats.
 */
#include "image_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

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
        if (!exif_o && memcmp(c, "EXIF", 4) == 0) exif_o = mv_exif_orientation(c + 8, n);
        if (!xmp_o && memcmp(c, "XMP ", 4) == 0) xmp_o = mv_xmp_orientation(c + 8, n);
        pos += 8 + n + (n & 1);
    }
    return mv_orientation_pick(exif_o, xmp_o);
}

/* Bytes of the file the WebP header is parsed from (VP8X, VP8 and VP8L headers are ~30 bytes). */
#define WEBP_HEAD 4096
/* Input fed to the incremental decoder per step (the time limit is checked between steps). */
#define WEBP_STEP (256 << 10)
/* Metadata (ICC, EXIF, XMP) a WebP may carry on top of 4 bytes per pixel of image data. */
#define WEBP_SLACK (64LL << 20)

/* Reads the RIFF of a WebP file from f: the header first (size check), then only the RIFF's
 * declared length, never what follows; decodes in WEBP_STEP steps with WebPIDecoder. */
int mv_webp_sniff(const uint8_t *head, size_t n)
{
    return mv_magic_at(head, n, 0, "RIFF", 4) && mv_magic_at(head, n, 8, "WEBP", 4);
}

/* The first frame of an animated WebP, as WebPAnimDecoder (PIL's decoder) composes it: RGBA,
 * non-premultiplied, into rgba [w*h*4]. */
static mv_status webp_first_frame(const char *name, const uint8_t *buf, size_t len, int w, int h,
                                  uint8_t *rgba, mv_err *e)
{
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o))
        return mv_fail(e, MV_ERR_INTERNAL, "%s: libwebpdemux version mismatch", name);
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    WebPData d = { buf, len };
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&d, &o);
    WebPAnimInfo info;
    uint8_t *frame = NULL;
    int ts = 0;
    mv_status s = MV_OK;
    if (!dec || !WebPAnimDecoderGetInfo(dec, &info) || (int)info.canvas_width != w ||
        (int)info.canvas_height != h || !WebPAnimDecoderGetNext(dec, &frame, &ts) || !frame)
        s = mv_fail(e, MV_ERR_FORMAT, "%s: corrupt animated WebP data", name);
    else
        memcpy(rgba, frame, (size_t)w * h * 4);
    WebPAnimDecoderDelete(dec);
    return s;
}

mv_status mv_webp_decode(const mv_image_req *r, mv_image_raw *out, mv_err *e)
{
    mv_input *in = r->in;
    const char *name = r->name;
    long long max_pixels = r->max_pixels;
    double deadline = r->deadline;
    uint8_t head[WEBP_HEAD];
    ssize_t got = mv_input_read(in, head, sizeof head);
    if (got < 0) return mv_input_fail(in, e);
    size_t hn = (size_t)got;
    WebPBitstreamFeatures ft;
    VP8StatusCode st = WebPGetFeatures(head, hn, &ft);
    if (st != VP8_STATUS_OK)
        return mv_fail(e, MV_ERR_FORMAT, "%s: corrupt WebP data: %s", name, webp_status_str(st));
    mv_status s = mv_image_check_size(name, "WebP", ft.width, ft.height, max_pixels, e);
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
        if (mv_image_past(deadline)) {
            free(buf);
            return mv_image_fail_time(name, "WebP", e);
        }
        size_t want = riff - len < WEBP_STEP ? (size_t)(riff - len) : WEBP_STEP;
        ssize_t k = mv_input_read(in, buf + len, want);
        if (k < 0) {
            free(buf);
            return mv_input_fail(in, e);
        }
        len += (size_t)k;
        if ((size_t)k < want) break; /* a truncated file: the decoder says what is missing */
    }
    rgba = mv_malloc(np * 4);
    if (ft.has_animation) { /* ft's size is the canvas's */
        s = rgba ? webp_first_frame(name, buf, len, ft.width, ft.height, rgba, e)
                 : mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a %dx%d image", name, ft.width, ft.height);
        if (s == MV_OK)
            out->orientation = webp_orientation(buf, len);
        free(buf);
        if (s != MV_OK) {
            free(rgba);
            return s;
        }
        goto rgb;
    }
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
        if (mv_image_past(deadline)) {
            s = mv_image_fail_time(name, "WebP", e);
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
        out->orientation = webp_orientation(buf, len);
    }
    free(buf);
    if (s != MV_OK) {
        free(rgba);
        return s;
    }
rgb:
    for (size_t i = 0; i < np; i++) {       /* RGBA -> RGB in place, dropping alpha */
        rgba[3 * i] = rgba[4 * i];
        rgba[3 * i + 1] = rgba[4 * i + 1];
        rgba[3 * i + 2] = rgba[4 * i + 2];
    }
    uint8_t *shrunk = realloc(rgba, np * 3);
    out->rgb = shrunk ? shrunk : rgba;
    out->w = ft.width;
    out->h = ft.height;
    return MV_OK;
}
