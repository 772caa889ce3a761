/* test_decode_image.c - unit tests for the image decoder (src/input/image*.c, orientation.c),
 * src/output/png_write.c and mv_sniff (src/input/sniff.c).
 *
 * Oracles:
 *  - PIL: FNV-1a 64 hashes of np.asarray(transformers.image_utils.load_image(f)) for the committed
 *    fixtures, computed with Pillow 12.3.0 / transformers 5.17.0 on the GPU machine (regenerate
 *    them if the fixtures are regenerated). png_gray16 is the documented exception (PIL clips
 *    16-bit gray to 255; we scale, v >> 8), checked against FFmpeg instead.
 *  - FFmpeg CLI: lossless formats (PNG, lossless WebP) decode identically everywhere, so
 *    `ffmpeg -i f -f rawvideo -pix_fmt <native>` is compared byte for byte.
 *  - EXIF rotation: the same file with its orientation tag patched to 1, rotated by hand.
 *  - Inputs (mv_input.h): a descriptor, memory and read callbacks give PIL's pixels too; a
 *    stream cut short gives what the same bytes from memory give.
 * Runs from the repository root (make test does).
 */
#include "mv_names.h"
#include "unit.h"

#include "mv_image.h"
#include "mv_png_write.h"
#include "mv_sniff.h"
#include "stream_io.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define IMG "fixtures/media/images/"
#define BAD "fixtures/bad/"
#define FMT "fixtures/formats/"

/* FNV-1a 64 of a buffer (the stored PIL/HF hashes were made with it) */
#define fnv1a mv_hash64

/* Runs ffmpeg on path and returns its raw frame in pix_fmt (malloc'd), or NULL. */
static uint8_t *ffmpeg_raw(const char *path, const char *pix_fmt, size_t *n)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -i '%s' -frames:v 1 -f rawvideo -pix_fmt %s - 2>/dev/null",
             path, pix_fmt);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len, p)) > 0) {
        len += r;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    int rc = pclose(p);
    if (rc != 0 || len == 0) {
        free(buf);
        return NULL;
    }
    *n = len;
    return buf;
}

static const struct {
    const char *file, *format;
    int w, h, sw, sh, orientation;
    uint64_t pil;   /* 0: not compared with PIL (see header) */
} fixtures[] = {
    {"jpeg_baseline_420_320x240.jpg", "jpeg", 320, 240, 320, 240, 1, 0x9ae6c7b5ecb68cccULL},
    {"jpeg_cmyk_ycck_adobe_160x120.jpg", "jpeg", 160, 120, 160, 120, 1, 0x12f896971b82ed43ULL},
    {"jpeg_exif3_117x199.jpg", "jpeg", 117, 199, 117, 199, 3, 0x63cf37b17c0d3ee1ULL},
    {"jpeg_exif6_168x104.jpg", "jpeg", 104, 168, 168, 104, 6, 0x740fc1a86968e699ULL},
    {"jpeg_exif8_256x160.jpg", "jpeg", 160, 256, 256, 160, 8, 0x235b3ede8c8f1a59ULL},
    {"jpeg_gradient_420_221x127.jpg", "jpeg", 221, 127, 221, 127, 1, 0x7ce8fbbb9c02a447ULL},
    {"jpeg_gray_200x149.jpg", "jpeg", 200, 149, 200, 149, 1, 0xb06c1a5f5bf46c42ULL},
    {"jpeg_progressive_422_256x160.jpg", "jpeg", 256, 160, 256, 160, 1, 0x85e0b362d541d1adULL},
    {"png_gray16_96x64.png", "png", 96, 64, 96, 64, 1, 0},
    {"png_gray_128x72.png", "png", 128, 72, 128, 72, 1, 0x127e3e5570ba556cULL},
    {"png_graya_112x80.png", "png", 112, 80, 112, 80, 1, 0x87065364b2c39452ULL},
    {"png_interlaced_131x87.png", "png", 131, 87, 131, 87, 1, 0x2eac48eac13aaeedULL},
    {"png_palette4_trns_90x60.png", "png", 90, 60, 90, 60, 1, 0x3aac0def9987209dULL},
    {"png_palette_trns_144x96.png", "png", 144, 96, 144, 96, 1, 0x0553ebb111dcf5e5ULL},
    {"png_rgb16_96x64.png", "png", 96, 64, 96, 64, 1, 0xc359320cce81396dULL},
    {"png_rgb_320x256.png", "png", 320, 256, 320, 256, 1, 0x18550c009bef5de3ULL},
    {"png_rgb_odd_173x97.png", "png", 173, 97, 173, 97, 1, 0x5391abf8a88f142eULL},
    {"png_rgb_wide_400x60.png", "png", 400, 60, 400, 60, 1, 0x320aa9514b70fa08ULL},
    {"png_rgba_160x120.png", "png", 160, 120, 160, 120, 1, 0x14024bd8de4f7c33ULL},
    {"webp_lossless_alpha_120x90.webp", "webp", 120, 90, 120, 90, 1, 0xd3157e8a6f76f5aeULL},
    {"webp_lossy_192x128.webp", "webp", 192, 128, 192, 128, 1, 0x2eb164fe112d4d31ULL},
};

static void test_fixtures(void)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, IMG "%s", fixtures[i].file);
        mv_image img;
        mv_err e = {{0}};
        mv_status s = mv_image_decode(path, 0, &img, &e);
        if (s != MV_OK) {
            CHECK(0, "%s decodes: %s", fixtures[i].file, e.msg);
            continue;
        }
        CHECK(img.width == fixtures[i].w && img.height == fixtures[i].h && img.src_width == fixtures[i].sw &&
              img.src_height == fixtures[i].sh && img.orientation == fixtures[i].orientation &&
              !strcmp(img.format, fixtures[i].format),
              "%s: %s %dx%d (stored %dx%d, orientation %d)", fixtures[i].file, img.format, img.width,
              img.height, img.src_width, img.src_height, img.orientation);
        if (fixtures[i].pil) {
            uint64_t h = fnv1a(img.rgb, (size_t)img.width * img.height * 3);
            CHECK(h == fixtures[i].pil, "%s: RGB bit-identical to PIL load_image (%016llx)", fixtures[i].file,
                  (unsigned long long)h);
        }
        mv_image_free(&img);
    }
}

/* The same pixels from a descriptor, memory and callbacks (short reads) as PIL's. */
static void test_input_sources(void)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        if (!fixtures[i].pil) continue;
        char path[512];
        snprintf(path, sizeof path, IMG "%s", fixtures[i].file);
        uint8_t *buf;
        size_t len = 0;
        mv_err e = {{0}};
        int fd;
        if (open_fixture(path, &fd, &buf, &len) != 0) {
            CHECK(0, "%s: open and read", path);
            continue;
        }
        for (int k = 0; k < 3; k++) {
            mv_image img;
            mv_status st = decode_source(k, fd, buf, len, "shard.tar/member", &img, &e);
            uint64_t h = st == MV_OK ? fnv1a(img.rgb, (size_t)img.width * img.height * 3) : 0;
            CHECK(st == MV_OK && h == fixtures[i].pil && img.width == fixtures[i].w && img.height == fixtures[i].h,
                  "%s from a %s: RGB bit-identical to PIL load_image (%s)", fixtures[i].file, source_names[k],
                  st == MV_OK ? "decoded" : e.msg);
            mv_image_free(&img);
        }
        close(fd);
        free(buf);
    }
}

/* A stream that fails part way fails the decode with MV_ERR_IO naming the input and the reason;
 * one that ends early is a truncated file, as the same bytes from memory are. */
static void test_input_errors(void)
{
    const char *files[] = {IMG "jpeg_progressive_422_256x160.jpg", IMG "png_interlaced_131x87.png",
                           IMG "webp_lossy_192x128.webp", FMT "gif_interlaced_99x45.gif", FMT "bmp_rle8_79x43.bmp",
                           FMT "bmp_4bit_75x41.bmp", FMT "tif_rgb_lzw_predictor_45x29.tif",
                           FMT "tif_rgb_tiles_45x29.tif"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = files[i];
        uint8_t *buf = NULL;
        size_t len = 0;
        mv_err e = {{0}}, e2 = {{0}};
        if (mv_read_file(path, &buf, &len, &e) != MV_OK) {
            CHECK(0, "%s: read", path);
            continue;
        }
        mv_input in;
        mv_image img;
        stream s = {buf, len, 0, 100, (long)len / 2, 0};
        mv_status st = mv_input_open_io(&in, &stream_io, &s, "shard.tar/bad", &e);
        if (st == MV_OK) st = mv_image_decode_input(&in, 0, 0, &img, &e);
        mv_input_close(&in);
        CHECK(st == MV_ERR_IO && !img.rgb &&
                  !strcmp(e.msg, "shard.tar/bad: read error: member data unreadable: damaged archive"),
              "%s: a read error half way: %s", files[i], e.msg);
        s = (stream){buf, len / 2, 0, 100, -1, 0};
        st = mv_input_open_io(&in, &stream_io, &s, "shard.tar/cut", &e);
        if (st == MV_OK) st = mv_image_decode_input(&in, 0, 0, &img, &e);
        mv_input_close(&in);
        mv_status st2 = mv_image_decode_mem(buf, len / 2, "shard.tar/cut", 0, &img, &e2);
        CHECK(st != MV_OK && st == st2 && !strcmp(e.msg, e2.msg) && strstr(e.msg, "shard.tar/cut: ") == e.msg &&
                  strstr(e.msg, "truncated"),
              "%s: a stream ending half way is a truncated file: %s", files[i], e.msg);
        free(buf);
    }
}

/* Compares our decode of a lossless file with ffmpeg's, channel map described by (fmt, bpp, pick). */
static void check_vs_ffmpeg(const char *file, const char *pix_fmt, int bpp, int gray, int sixteen)
{
    char path[512];
    snprintf(path, sizeof path, IMG "%s", file);
    mv_image img;
    mv_err e = {{0}};
    if (mv_image_decode(path, 0, &img, &e) != MV_OK) {
        CHECK(0, "%s decodes: %s", file, e.msg);
        return;
    }
    size_t n = 0;
    uint8_t *ff = ffmpeg_raw(path, pix_fmt, &n);
    size_t np = (size_t)img.width * img.height;
    if (!ff || n != np * bpp) {
        CHECK(0, "%s: ffmpeg -pix_fmt %s gave %zu bytes, expected %zu (is ffmpeg installed?)", file, pix_fmt,
              n, np * bpp);
        free(ff);
        mv_image_free(&img);
        return;
    }
    size_t bad = 0;
    for (size_t i = 0; i < np; i++) {
        for (int c = 0; c < 3; c++) {
            int src = gray ? 0 : c;
            uint8_t want = sixteen ? ff[i * bpp + 2 * src] : ff[i * bpp + src]; /* big-endian high byte */
            bad += img.rgb[i * 3 + c] != want;
        }
    }
    CHECK(bad == 0, "%s: identical to ffmpeg -pix_fmt %s%s (%zu values differ)", file, pix_fmt,
          sixteen ? " (high byte)" : "", bad);
    free(ff);
    mv_image_free(&img);
}

static void test_ffmpeg_oracle(void)
{
    check_vs_ffmpeg("png_rgb_320x256.png", "rgb24", 3, 0, 0);
    check_vs_ffmpeg("png_rgb_odd_173x97.png", "rgb24", 3, 0, 0);
    check_vs_ffmpeg("png_rgb_wide_400x60.png", "rgb24", 3, 0, 0);
    check_vs_ffmpeg("png_interlaced_131x87.png", "rgb24", 3, 0, 0);
    check_vs_ffmpeg("png_rgba_160x120.png", "rgba", 4, 0, 0);
    check_vs_ffmpeg("png_palette_trns_144x96.png", "rgba", 4, 0, 0);
    check_vs_ffmpeg("png_palette4_trns_90x60.png", "rgba", 4, 0, 0);
    check_vs_ffmpeg("png_rgb16_96x64.png", "rgb48be", 6, 0, 1);
    check_vs_ffmpeg("png_gray16_96x64.png", "gray16be", 2, 1, 1);
    check_vs_ffmpeg("png_gray_128x72.png", "gray", 1, 1, 0);
    check_vs_ffmpeg("png_graya_112x80.png", "ya8", 2, 1, 0);
    check_vs_ffmpeg("webp_lossless_alpha_120x90.webp", "rgba", 4, 0, 0);
}

/* Alpha is dropped, not composited: transparent pixels keep their colour. */
static void test_alpha_dropped(void)
{
    const char *files[] = {"png_rgba_160x120.png", "webp_lossless_alpha_120x90.webp", "png_palette_trns_144x96.png"};
    for (size_t k = 0; k < 3; k++) {
        char path[512];
        snprintf(path, sizeof path, IMG "%s", files[k]);
        size_t n = 0;
        uint8_t *ff = ffmpeg_raw(path, "rgba", &n);
        mv_image img;
        mv_err e = {{0}};
        if (!ff || mv_image_decode(path, 0, &img, &e) != MV_OK) {
            CHECK(0, "%s: decode (%s) and ffmpeg rgba", files[k], ff ? e.msg : "ffmpeg failed");
            free(ff);
            continue;
        }
        size_t transparent = 0, coloured = 0, bad = 0, np = (size_t)img.width * img.height;
        for (size_t i = 0; i < np && 4 * i + 3 < n; i++) {
            if (ff[4 * i + 3] == 0) {
                transparent++;
                if (ff[4 * i] | ff[4 * i + 1] | ff[4 * i + 2]) coloured++;
            }
            bad += memcmp(img.rgb + 3 * i, ff + 4 * i, 3) != 0;
        }
        CHECK(transparent > 0 && coloured > 0 && bad == 0,
              "%s: %zu fully transparent pixels (%zu with colour) keep their RGB; %zu differ", files[k],
              transparent, coloured, bad);
        free(ff);
        mv_image_free(&img);
    }
}

/* Decodes the JPEG with its EXIF orientation patched to 1 and checks the rotation by hand. */
static void test_orientation(void)
{
    const struct { const char *file; int o; } t[] = {
        {"jpeg_exif3_117x199.jpg", 3}, {"jpeg_exif6_168x104.jpg", 6}, {"jpeg_exif8_256x160.jpg", 8}};
    for (size_t k = 0; k < 3; k++) {
        char path[512];
        snprintf(path, sizeof path, IMG "%s", t[k].file);
        uint8_t *buf = NULL;
        size_t len = 0;
        mv_err e = {{0}};
        if (mv_read_file(path, &buf, &len, &e) != MV_OK) {
            CHECK(0, "%s: read: %s", t[k].file, e.msg);
            continue;
        }
        /* big-endian IFD entry: tag 0112, type SHORT, count 1, value o */
        const uint8_t pat[10] = {0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, (uint8_t)t[k].o};
        size_t at = 0;
        for (size_t i = 0; i + 10 <= len && i < 4096; i++)
            if (!memcmp(buf + i, pat, 10)) {
                at = i;
                break;
            }
        mv_image rot, raw;
        mv_status s1 = mv_image_decode_mem(buf, len, t[k].file, 0, &rot, &e);
        if (at) buf[at + 9] = 1;
        mv_status s2 = mv_image_decode_mem(buf, len, t[k].file, 0, &raw, &e);
        if (!at || s1 != MV_OK || s2 != MV_OK) {
            CHECK(0, "%s: orientation tag found and both decodes work", t[k].file);
            free(buf);
            continue;
        }
        int W = raw.width, H = raw.height;
        size_t bad = 0;
        for (int y = 0; y < rot.height; y++)
            for (int x = 0; x < rot.width; x++) {
                int sx, sy;
                if (t[k].o == 3) { sx = W - 1 - x; sy = H - 1 - y; }       /* 180 */
                else if (t[k].o == 6) { sx = y; sy = H - 1 - x; }          /* 90 clockwise */
                else { sx = W - 1 - y; sy = x; }                           /* 90 counter-clockwise */
                bad += memcmp(rot.rgb + ((size_t)y * rot.width + x) * 3, raw.rgb + ((size_t)sy * W + sx) * 3, 3) != 0;
            }
        int swap = t[k].o != 3;
        CHECK(raw.orientation == 1 && rot.width == (swap ? H : W) && rot.height == (swap ? W : H) && bad == 0,
              "%s: orientation %d rotates the stored %dx%d picture to %dx%d (%zu pixels misplaced)", t[k].file,
              t[k].o, W, H, rot.width, rot.height, bad);
        mv_image_free(&rot);
        mv_image_free(&raw);
        free(buf);
    }
}

static uint32_t crc32_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return c ^ 0xffffffffu;
}

/* Appends a PNG chunk (length, type, data, CRC) at *pos in buf. */
static void put_chunk(uint8_t *buf, size_t *pos, const char *type, const void *data, size_t n)
{
    uint8_t *p = buf + *pos;
    p[0] = (uint8_t)(n >> 24);
    p[1] = (uint8_t)(n >> 16);
    p[2] = (uint8_t)(n >> 8);
    p[3] = (uint8_t)n;
    memcpy(p + 4, type, 4);
    memcpy(p + 8, data, n);
    uint32_t c = crc32_png(p + 4, n + 4);
    p[8 + n] = (uint8_t)(c >> 24);
    p[9 + n] = (uint8_t)(c >> 16);
    p[10 + n] = (uint8_t)(c >> 8);
    p[11 + n] = (uint8_t)c;
    *pos += 12 + n;
}

/* Orientation metadata in PNG: eXIf, ImageMagick's "Raw profile type exif", XMP, precedence. */
static void test_png_orientation(void)
{
    uint8_t *src = NULL;
    size_t len = 0;
    mv_err e = {{0}};
    if (mv_read_file(IMG "png_rgb_odd_173x97.png", &src, &len, &e) != MV_OK) {
        CHECK(0, "read: %s", e.msg);
        return;
    }
    /* big-endian TIFF with one IFD0 entry: Orientation (SHORT, 1) = o */
    uint8_t tiff[26] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int v = 0; v < 4; v++) {
        uint8_t *buf = malloc(len + 1024);
        size_t pos = 33;                        /* signature + IHDR */
        memcpy(buf, src, pos);
        int want;
        const char *what;
        char txt[512];
        if (v == 0) {
            tiff[19] = 6;
            put_chunk(buf, &pos, "eXIf", tiff, sizeof tiff);
            want = 6;
            what = "eXIf chunk";
        } else if (v == 1) {
            tiff[19] = 3;
            int n = snprintf(txt, sizeof txt, "Raw profile type exif%c\nexif\n      %d\n457869660000", 0,
                             (int)sizeof tiff + 6);
            for (size_t i = 0; i < sizeof tiff; i++) n += snprintf(txt + n, sizeof txt - n, "%02x", tiff[i]);
            n += snprintf(txt + n, sizeof txt - n, "\n");
            put_chunk(buf, &pos, "tEXt", txt, (size_t)n);
            want = 3;
            what = "Raw profile type exif text";
        } else {
            int n = snprintf(txt, sizeof txt, "XML:com.adobe.xmp%c%c%c%c%c<x:xmpmeta><rdf:Description "
                             "tiff:Orientation=\"8\"/></x:xmpmeta>", 0, 0, 0, 0, 0);
            if (v == 3) {
                tiff[19] = 1;
                put_chunk(buf, &pos, "eXIf", tiff, sizeof tiff);
            }
            put_chunk(buf, &pos, "iTXt", txt, (size_t)n);
            want = v == 3 ? 1 : 8;
            what = v == 3 ? "eXIf orientation 1 wins over XMP 8" : "XMP tiff:Orientation";
        }
        memcpy(buf + pos, src + 33, len - 33);
        mv_image img;
        mv_status s = mv_image_decode_mem(buf, pos + len - 33, "meta.png", 0, &img, &e);
        int swap = want >= 5;
        CHECK(s == MV_OK && img.orientation == want && img.width == (swap ? 97 : 173),
              "PNG %s -> orientation %d (%s)", what, s == MV_OK ? img.orientation : -1,
              s == MV_OK ? "decoded" : e.msg);
        if (s == MV_OK) mv_image_free(&img);
        free(buf);
    }
    free(src);
}

static void test_bad_files(void)
{
    const struct { const char *path; mv_status s; const char *needle; } t[] = {
        {BAD "empty.jpg", MV_ERR_FORMAT, "empty file"},
        {BAD "x.jpg", MV_ERR_FORMAT, "not a JPEG, PNG, WebP, GIF, BMP or TIFF image"},
        {BAD "truncated.jpg", MV_ERR_FORMAT, "truncated"},
        {BAD "truncated.png", MV_ERR_FORMAT, "truncated"},
        {BAD "bad_huffman.jpg", MV_ERR_FORMAT, "Huffman"},
        {BAD "bomb_100000x100000.png", MV_ERR_LIMIT, "100000x100000"},
        {BAD "no_such_file.png", MV_ERR_IO, "No such file"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        mv_image img;
        mv_err e = {{0}};
        mv_status s = mv_image_decode(t[k].path, 0, &img, &e);
        CHECK(s == t[k].s && strstr(e.msg, t[k].path) == e.msg && strstr(e.msg, t[k].needle) && !img.rgb,
              "%s: %s (%s)", t[k].path, mv_status_str(s), e.msg);
    }
    /* truncations at many points never crash and always fail */
    const char *srcs[] = {IMG "jpeg_progressive_422_256x160.jpg", IMG "png_interlaced_131x87.png",
                          IMG "webp_lossy_192x128.webp", IMG "jpeg_cmyk_ycck_adobe_160x120.jpg"};
    for (size_t k = 0; k < 4; k++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        mv_err e = {{0}};
        if (mv_read_file(srcs[k], &buf, &len, &e) != MV_OK) {
            CHECK(0, "%s: read", srcs[k]);
            continue;
        }
        int ok = 0, tried = 0;
        for (size_t cut = 1; cut < len - 2; cut += 1 + len / 97, tried++) {
            mv_image img;
            if (mv_image_decode_mem(buf, cut, "cut", 0, &img, &e) == MV_OK) {
                ok++;
                mv_image_free(&img);
            }
        }
        CHECK(ok == 0, "%s: %d truncated prefixes all refused (%d decoded)", srcs[k], tried, ok);
        free(buf);
    }
    /* a video file is routed away, not decoded */
    mv_image img;
    mv_err e = {{0}};
    mv_status s = mv_image_decode(BAD "video_truncated.mp4", 0, &img, &e);
    CHECK(s == MV_ERR_UNSUPPORTED && strstr(e.msg, "video"), "mp4 given to the image decoder: %s", e.msg);
}

static void test_limit(void)
{
    mv_image img;
    mv_err e = {{0}};
    mv_status s = mv_image_decode(IMG "png_rgb_320x256.png", 81919, &img, &e);
    CHECK(s == MV_ERR_LIMIT && strstr(e.msg, "320x256"), "max_pixels 81919 refuses 320x256: %s", e.msg);
    s = mv_image_decode(IMG "png_rgb_320x256.png", 81920, &img, &e);
    CHECK(s == MV_OK, "max_pixels 81920 accepts 320x256");
    mv_image_free(&img);
    s = mv_image_decode(IMG "jpeg_progressive_422_256x160.jpg", 1000, &img, &e);
    CHECK(s == MV_ERR_LIMIT, "JPEG over the limit refused: %s", e.msg);
    s = mv_image_decode(IMG "webp_lossy_192x128.webp", 1000, &img, &e);
    CHECK(s == MV_ERR_LIMIT, "WebP over the limit refused: %s", e.msg);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* With the address space capped at 1 GiB more than now, a 30 GB allocation cannot happen:
     * the default limit must refuse the bomb before allocating (LIMIT, not NOMEM), while an
     * unlimited decode gets as far as the allocation and fails there. */
    struct rlimit old, cap;
    if (getrlimit(RLIMIT_AS, &old) == 0) {
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (f) {
            if (fscanf(f, "%lu", &pages) != 1) pages = 0;
            fclose(f);
        }
        cap = old;
        cap.rlim_cur = (rlim_t)pages * 4096 + (1ULL << 30);
        if (pages && setrlimit(RLIMIT_AS, &cap) == 0) {
            s = mv_image_decode(BAD "bomb_100000x100000.png", 0, &img, &e);
            mv_status s2 = mv_image_decode(BAD "bomb_100000x100000.png", -1, &img, &e);
            setrlimit(RLIMIT_AS, &old);
            CHECK(s == MV_ERR_LIMIT && s2 == MV_ERR_NOMEM,
                  "bomb refused before allocating (default limit: %s; no limit: %s)", mv_status_str(s),
                  mv_status_str(s2));
        } else {
            CHECK(0, "setrlimit(RLIMIT_AS) for the bomb test");
        }
    }
#endif
}

static void test_sniff(void)
{
    static uint8_t ts[400];
    ts[0] = ts[188] = ts[376] = 0x47;
    const struct { const char *what; const char *bytes; size_t n; mv_media_kind k; const char *fmt; } t[] = {
        {"JPEG", "\xff\xd8\xff\xe0\0\x10JFIF", 10, MV_MEDIA_IMAGE, "jpeg"},
        {"PNG", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, MV_MEDIA_IMAGE, "png"},
        {"WebP", "RIFF\x10\0\0\0WEBPVP8 ", 16, MV_MEDIA_IMAGE, "webp"},
        {"AVI", "RIFF\x10\0\0\0AVI LIST", 16, MV_MEDIA_VIDEO, "avi"},
        {"WAV", "RIFF\x10\0\0\0WAVEfmt ", 16, MV_MEDIA_UNKNOWN, "unknown"},
        {"MP4", "\0\0\0\x20" "ftypisom\0\0\x02\0", 16, MV_MEDIA_VIDEO, "mp4"},
        {"MOV", "\0\0\0\x14" "ftypqt  \0\0\x02\0", 16, MV_MEDIA_VIDEO, "mp4"},
        {"old QuickTime", "\0\0\0\x08wide\0\0\0\0mdat", 16, MV_MEDIA_VIDEO, "mp4"},
        {"HEIC", "\0\0\0\x18" "ftypheic\0\0\0\0", 16, MV_MEDIA_IMAGE_OTHER, "heif"},
        {"AVIF", "\0\0\0\x1c" "ftypavif\0\0\0\0", 16, MV_MEDIA_IMAGE_OTHER, "avif"},
        {"Matroska", "\x1a\x45\xdf\xa3\x9f\x42\x86\x81", 8, MV_MEDIA_VIDEO, "matroska"},
        {"MPEG-TS", (const char *)ts, sizeof ts, MV_MEDIA_VIDEO, "mpegts"},
        {"MPEG-PS", "\0\0\x01\xba\x44\0\x04", 7, MV_MEDIA_VIDEO, "mpegps"},
        {"Ogg", "OggS\0\x02\0\0", 8, MV_MEDIA_VIDEO, "ogg"},
        {"FLV", "FLV\x01\x05\0\0\0\x09", 9, MV_MEDIA_VIDEO, "flv"},
        {"GIF", "GIF89a\x10\0\x10\0", 10, MV_MEDIA_IMAGE, "gif"},
        {"GIF87a", "GIF87a\x10\0\x10\0", 10, MV_MEDIA_IMAGE, "gif"},
        {"GIF88a", "GIF88a\x10\0\x10\0", 10, MV_MEDIA_UNKNOWN, "unknown"},
        {"TIFF", "II*\0\x08\0\0\0", 8, MV_MEDIA_IMAGE, "tiff"},
        {"big-endian TIFF", "MM\0*\0\0\0\x08", 8, MV_MEDIA_IMAGE, "tiff"},
        {"BigTIFF", "II+\0\x08\0\0\0", 8, MV_MEDIA_IMAGE, "tiff"},
        {"BMP", "BM\x46\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0", 18, MV_MEDIA_IMAGE, "bmp"},
        {"OS/2 BMP", "BM\x46\0\0\0\0\0\0\0\x1a\0\0\0\x0c\0\0\0", 18, MV_MEDIA_IMAGE, "bmp"},
        {"BM then no DIB header", "BM\x46\0\0\0\0\0\0\0\x36\0\0\0\x29\0\0\0", 18, MV_MEDIA_UNKNOWN, "unknown"},
        {"text", "hello, world\n", 13, MV_MEDIA_UNKNOWN, "unknown"},
        {"short JPEG prefix", "\xff\xd8", 2, MV_MEDIA_UNKNOWN, "unknown"},
        {"nothing", "", 0, MV_MEDIA_UNKNOWN, "unknown"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        const uint8_t *b = (const uint8_t *)t[k].bytes;
        CHECK(mv_sniff(b, t[k].n) == t[k].k && !strcmp(mv_sniff_format(b, t[k].n), t[k].fmt),
              "sniff %s -> %s", t[k].what, mv_sniff_format(b, t[k].n));
    }
    /* files on disk: by content, whatever the extension */
    const struct { const char *path; mv_media_kind k; } f[] = {
        {IMG "png_rgb_320x256.png", MV_MEDIA_IMAGE}, {IMG "jpeg_gray_200x149.jpg", MV_MEDIA_IMAGE},
        {IMG "webp_lossy_192x128.webp", MV_MEDIA_IMAGE}, {BAD "video_no_moov.mp4", MV_MEDIA_VIDEO},
        {BAD "x.jpg", MV_MEDIA_UNKNOWN}, {BAD "empty.jpg", MV_MEDIA_UNKNOWN}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        uint8_t head[MV_SNIFF_BYTES];
        FILE *fp = fopen(f[k].path, "rb");
        size_t n = fp ? fread(head, 1, sizeof head, fp) : 0;
        if (fp) fclose(fp);
        CHECK(fp && mv_sniff(head, n) == f[k].k, "sniff %s -> %s", f[k].path, mv_sniff_format(head, n));
    }
}

static void test_png_write(void)
{
    mv_image img, back;
    mv_err e = {{0}};
    const char *out = "build/test_decode_image_roundtrip.png";
    if (mv_image_decode(IMG "jpeg_exif6_168x104.jpg", 0, &img, &e) != MV_OK) {
        CHECK(0, "decode for the PNG round trip: %s", e.msg);
        return;
    }
    mv_status s = mv_png_write_rgb(out, img.rgb, img.width, img.height, &e);
    mv_status s2 = s == MV_OK ? mv_image_decode(out, 0, &back, &e) : s;
    CHECK(s == MV_OK && s2 == MV_OK && back.width == img.width && back.height == img.height &&
              memcmp(back.rgb, img.rgb, (size_t)img.width * img.height * 3) == 0,
          "mv_png_write_rgb round trip is lossless (%s)", s == MV_OK && s2 == MV_OK ? "ok" : e.msg);
    if (s2 == MV_OK) mv_image_free(&back);
    remove(out);
    s = mv_png_write_rgb("/nonexistent-dir/x.png", img.rgb, img.width, img.height, &e);
    CHECK(s == MV_ERR_IO && strstr(e.msg, "/nonexistent-dir/x.png"), "unwritable path: %s", e.msg);
    mv_image_free(&img);
}

/* The time limit: a deadline already past stops every format with MV_ERR_LIMIT naming the file;
 * a generous one changes nothing (same pixels as the unlimited decode). */
static void test_time_limit(void)
{
    static const char *files[] = {IMG "jpeg_baseline_420_320x240.jpg", IMG "jpeg_progressive_422_256x160.jpg",
                                  IMG "png_interlaced_131x87.png", IMG "webp_lossy_192x128.webp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        mv_image img, ref;
        mv_err e = {{0}};
        mv_status s = mv_image_decode_limited(files[i], 0, 1e-9, &img, &e);
        CHECK(s == MV_ERR_LIMIT && strstr(e.msg, files[i]) && strstr(e.msg, "time limit exceeded"),
              "a 1 ns time limit stops %s: %s", files[i], s == MV_OK ? "decoded" : e.msg);
        if (s == MV_OK) mv_image_free(&img);
        s = mv_image_decode_limited(files[i], 0, 600, &img, &e);
        mv_status s2 = mv_image_decode(files[i], 0, &ref, &e);
        CHECK(s == MV_OK && s2 == MV_OK && img.width == ref.width && img.height == ref.height &&
                  memcmp(img.rgb, ref.rgb, (size_t)img.width * img.height * 3) == 0,
              "a 600 s limit decodes %s exactly as no limit", files[i]);
        if (s == MV_OK) mv_image_free(&img);
        if (s2 == MV_OK) mv_image_free(&ref);
    }
}

int main(void)
{
    test_fixtures();
    test_input_sources();
    test_input_errors();
    test_ffmpeg_oracle();
    test_alpha_dropped();
    test_orientation();
    test_png_orientation();
    test_bad_files();
    test_limit();
    test_time_limit();
    test_sniff();
    test_png_write();
    return UNIT_DONE();
}
