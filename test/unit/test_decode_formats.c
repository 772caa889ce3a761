/* test_decode_formats.c - unit tests for the GIF, BMP and TIFF decoders (src/input/image_gif.c,
 * image_bmp.c, image_tiff.c) as mv_image_decode_input runs them.
 *
 * Oracles: the pixels of every fixtures/formats file are PIL's, byte for byte
 * (test/bats/32-formats.bats, computed there by python3-pil); here the same files must decode to
 * the same bytes from a descriptor, from memory and from a stream handing out 7 bytes a read; a
 * truncated prefixes never decode (test_decode_image.c's input errors cover a stream failing or
 * ending half way for these formats too); the pixel limit refuses a header before allocating (an address-space cap proves
 * it), at exactly the limit the image decodes; a 1 ns time limit stops every format.
 * Runs from the repository root (make test does).
 */
#include "unit.h"

#include "mv_image.h"
#include "stream_io.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define FMT "fixtures/formats/"
#define BAD "fixtures/bad/"

static int same_image(const mv_image *a, const mv_image *b)
{
    return a->width == b->width && a->height == b->height && a->orientation == b->orientation &&
           !strcmp(a->format, b->format) && !memcmp(a->rgb, b->rgb, (size_t)a->width * a->height * 3);
}

static void test_input_sources(void)
{
    DIR *d = opendir(FMT);
    if (!d) {
        CHECK(0, "opendir %s", FMT);
        return;
    }
    int n = 0, formats[3] = {0, 0, 0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, FMT "%s", de->d_name);
        mv_image ref;
        mv_err e = {{0}};
        if (mv_image_decode(path, 0, &ref, &e) != MV_OK) {
            CHECK(0, "%s decodes: %s", path, e.msg);
            continue;
        }
        formats[0] += !strcmp(ref.format, "gif");
        formats[1] += !strcmp(ref.format, "bmp");
        formats[2] += !strcmp(ref.format, "tiff");
        int fd;
        uint8_t *buf;
        size_t len = 0;
        if (open_fixture(path, &fd, &buf, &len) != 0) {
            CHECK(0, "%s: open and read", path);
            mv_image_free(&ref);
            continue;
        }
        int same = 0;
        for (int k = 0; k < 3; k++) {
            mv_image img;
            same += decode_source(k, fd, buf, len, "shard.tar/member", &img, &e) == MV_OK && same_image(&img, &ref);
            mv_image_free(&img);
        }
        CHECK(same == 3, "%s: a descriptor, memory and 7-byte stream reads give the file's pixels (%d of 3)",
              de->d_name, same);
        n++;
        close(fd);
        free(buf);
        mv_image_free(&ref);
    }
    closedir(d);
    CHECK(n >= 80 && formats[0] >= 10 && formats[1] >= 20 && formats[2] >= 30,
          "fixtures/formats: %d files (%d GIF, %d BMP, %d TIFF)", n, formats[0], formats[1], formats[2]);
}

/* The sources of the truncation tests: single-frame files whose pixel data runs to their end (the
 * GIF's last two bytes, its end of data and trailer, are kept: PIL needs neither). */
static const char *cut_srcs[] = {
    FMT "gif_lzw_256colours_120x90.gif", FMT "gif_interlaced_99x45.gif", FMT "bmp_rle8_79x43.bmp",
    FMT "bmp_rle4_81x47.bmp", FMT "bmp_4bit_75x41.bmp", FMT "bmp_32bit_bgra_v5_58x26.bmp",
    FMT "tif_rgb_lzw_predictor_45x29.tif", FMT "tif_rgb_tiles_45x29.tif", FMT "tif_rgb_strips_45x29.tif",
    FMT "tif_rgb_bigtiff_deflate_45x29.tif",
};

static void test_truncated(void)
{
    for (size_t k = 0; k < sizeof cut_srcs / sizeof *cut_srcs; k++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        mv_err e = {{0}};
        if (mv_read_file(cut_srcs[k], &buf, &len, &e) != MV_OK) {
            CHECK(0, "%s: read", cut_srcs[k]);
            continue;
        }
        /* the last 4 bytes may go without a pixel: a GIF's end of data and trailer, a BMP's last
         * row padding, an RLE end of line and end of bitmap (PIL reads none of them either) */
        int ok = 0, tried = 0, named = 0;
        for (size_t cut = 1; cut < len - 4; cut += 1 + len / 151, tried++) {
            mv_image img;
            mv_status s = mv_image_decode_mem(buf, cut, "cut", 0, &img, &e);
            if (s == MV_OK) {
                ok++;
                mv_image_free(&img);
            } else {
                named += !strncmp(e.msg, "cut: ", 5) && !strchr(e.msg, '\n');
            }
        }
        CHECK(ok == 0 && named == tried, "%s: %d truncated prefixes all refused, each message naming the "
              "input (%d decoded)", cut_srcs[k], tried, ok);
        free(buf);
    }
    static const char *files[] = {BAD "truncated.gif", BAD "truncated.bmp", BAD "truncated.tif"};
    for (size_t k = 0; k < 3; k++) {
        mv_image img;
        mv_err e = {{0}};
        mv_status s = mv_image_decode(files[k], 0, &img, &e);
        char want[256];
        snprintf(want, sizeof want, "%s: truncated %s data (image file is truncated)", files[k],
                 k == 0 ? "GIF" : k == 1 ? "BMP" : "TIFF");
        CHECK(s == MV_ERR_FORMAT && !strcmp(e.msg, want) && !img.rgb, "%s: %s", files[k], e.msg);
    }
}

static void test_limits(void)
{
    static const struct { const char *file; long long px; } t[] = {
        {FMT "gif_frame_past_screen_48x32.gif", 48 * 32}, {FMT "bmp_rle4_81x47.bmp", 81 * 47},
        {FMT "tif_rgb_tiles_45x29.tif", 45 * 29}, {FMT "tif_orientation6_37x23.tif", 37 * 23}};
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        mv_image img;
        mv_err e = {{0}};
        mv_status s = mv_image_decode(t[k].file, t[k].px - 1, &img, &e);
        CHECK(s == MV_ERR_LIMIT && strstr(e.msg, "decompression bomb guard") && !img.rgb,
              "max_pixels %lld refuses %s: %s", t[k].px - 1, t[k].file, e.msg);
        s = mv_image_decode(t[k].file, t[k].px, &img, &e);
        CHECK(s == MV_OK, "max_pixels %lld accepts %s", t[k].px, t[k].file);
        if (s == MV_OK) mv_image_free(&img);
        s = mv_image_decode_limited(t[k].file, 0, 1e-9, &img, &e);
        CHECK(s == MV_ERR_LIMIT && strstr(e.msg, "decode stopped: time limit exceeded (--timeout)"),
              "a 1 ns time limit stops %s: %s", t[k].file, s == MV_OK ? "decoded" : e.msg);
        if (s == MV_OK) mv_image_free(&img);
    }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* With the address space capped at 1 GiB more than now, the bombs' pixel buffers (4 to 30 GB)
     * cannot be allocated: the default limit must refuse each header first (LIMIT, not NOMEM),
     * while an unlimited decode gets as far as the allocation and fails there. */
    static const char *bombs[] = {BAD "bomb_65535x65535.gif", BAD "bomb_100000x100000.bmp",
                                  BAD "bomb_100000x100000.tif"};
    struct rlimit old, cap;
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    if (pages && getrlimit(RLIMIT_AS, &old) == 0) {
        cap = old;
        cap.rlim_cur = (rlim_t)pages * 4096 + (1ULL << 30);
        for (size_t k = 0; k < 3; k++) {
            mv_image img;
            mv_err e = {{0}}, e2 = {{0}};
            if (setrlimit(RLIMIT_AS, &cap) != 0) {
                CHECK(0, "setrlimit(RLIMIT_AS) for the bomb test");
                break;
            }
            mv_status s = mv_image_decode(bombs[k], 0, &img, &e);
            mv_status s2 = mv_image_decode(bombs[k], -1, &img, &e2);
            setrlimit(RLIMIT_AS, &old);
            CHECK(s == MV_ERR_LIMIT && strstr(e.msg, "exceeds the limit of 178956970 pixels") && s2 == MV_ERR_NOMEM,
                  "%s refused before allocating (default limit: %s; no limit: %s)", bombs[k], e.msg, e2.msg);
        }
    } else {
        CHECK(0, "address-space size for the bomb test");
    }
#endif
}

int main(void)
{
    test_input_sources();
    test_truncated();
    test_limits();
    return UNIT_DONE();
}
