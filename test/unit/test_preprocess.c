/* test_preprocess.c - unit tests for smart_resize, the torch uint8 antialiased bicubic resize,
 * the normalization LUT, patchify layout, the whole image path, and the video pixel budget with
 * HF's per-frame cap (src/input/preprocess.c; python3 evaluates HF's formula as the oracle).
 *
 * Bit-exactness oracles (hashes, FNV-1a 64) were produced on the GPU machine with torch 2.11.0
 * (AVX512 and ATEN_CPU_CAPABILITY=default gave identical bytes), torchvision 0.26.0,
 * transformers 5.17.0 and Pillow 12.3.0:
 *  - resize: torchvision.transforms.v2.functional.resize(uint8 CHW, [dh, dw], BICUBIC,
 *    antialias=True) of the synthetic image gen_pixel() describes;
 *  - pixel_values: Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
 *    image_mean=image_std=[.5]*3, size={shortest_edge: 65536, longest_edge: 16777216}) applied to
 *    transformers.image_utils.load_image(fixture) for the committed fixtures/media/images files.
 *    If the fixture files are regenerated these hashes must be regenerated too.
 */
#include "mv_names.h"
#include "unit.h"

#include "mv_image.h"
#include "mv_preprocess.h"
#include "mv_video.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a 64 of a buffer (the stored PIL/HF hashes were made with it) */
#define fnv1a mv_hash64

/* The oracle's synthetic input: hashed noise and a smooth ramp in an 8x8 checkerboard. */
static uint8_t gen_pixel(uint64_t x, uint64_t y, uint64_t c)
{
    uint64_t v = ((x * 2654435761ULL) ^ (y * 40503ULL) ^ (c * 2246822519ULL)) * 2654435761ULL;
    v = (v >> 13) & 255;
    uint64_t s = (x * 3 + y * 5 + c * 70) & 255;
    return (uint8_t)(((x / 8 + y / 8) % 2 == 0) ? v : s);
}

/* the released Qwen3.5 checkpoints' values: 65536..16777216 pixels, mean = std = 0.5, 16/2/2 */
static void qwen35_pp(mv_preproc_config *pp)
{
    memset(pp, 0, sizeof *pp);
    mv_preproc_defaults(pp);
}

static void test_smart_resize(void)
{
    /* expected values from HF's smart_resize run in Python */
    static const struct { int h, w, factor; long long mn, mx; int oh, ow; } t[] = {
        {1080, 1920, 32, 65536, 16777216, 1088, 1920},
        {480, 640, 32, 65536, 16777216, 480, 640},
        {100, 100, 32, 65536, 16777216, 256, 256},
        {48, 80, 32, 65536, 16777216, 224, 352},
        {97, 173, 32, 65536, 16777216, 192, 352},
        {60, 400, 32, 65536, 16777216, 128, 672},
        {240, 320, 32, 65536, 16777216, 256, 320},
        {256, 320, 32, 65536, 16777216, 256, 320},
        {720, 1280, 32, 65536, 16777216, 704, 1280},
        {10000, 10000, 32, 65536, 16777216, 4096, 4096},   /* max_pixels branch */
        {4000, 6000, 32, 65536, 16777216, 3328, 4992},
        {8192, 8192, 32, 65536, 16777216, 4096, 4096},
        {5000, 7000, 32, 65536, 1000000, 832, 1152},
        {3000, 50, 32, 65536, 16777216, 3008, 64},
        {1, 200, 32, 65536, 16777216, 32, 3648},           /* aspect ratio exactly 200 is allowed */
        {1, 1, 32, 65536, 16777216, 256, 256},
        {2, 3, 28, 3136, 12845056, 56, 84},
        {1000, 1000, 28, 3136, 200704, 448, 448},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int oh = 0, ow = 0;
        mv_err e = {{0}};
        mv_status s = mv_smart_resize(t[i].h, t[i].w, t[i].factor, t[i].mn, t[i].mx, &oh, &ow, &e);
        CHECK(s == MV_OK && oh == t[i].oh && ow == t[i].ow,
              "smart_resize %dx%d (factor %d, %lld..%lld) -> %dx%d (got %dx%d, %s)", t[i].h, t[i].w,
              t[i].factor, t[i].mn, t[i].mx, t[i].oh, t[i].ow, oh, ow, s == MV_OK ? "ok" : e.msg);
    }
    int oh, ow;
    mv_err e = {{0}};
    mv_status s = mv_smart_resize(1, 201, 32, 65536, 16777216, &oh, &ow, &e);
    CHECK(s == MV_ERR_LIMIT && strstr(e.msg, "aspect ratio"), "aspect ratio 201 refused: %s", e.msg);
    s = mv_smart_resize(300, 1, 32, 65536, 16777216, &oh, &ow, &e);
    CHECK(s == MV_ERR_LIMIT, "aspect ratio 300 (tall) refused");
    s = mv_smart_resize(0, 10, 32, 65536, 16777216, &oh, &ow, &e);
    CHECK(s == MV_ERR_USAGE, "zero height refused");
}

static void test_resize_basic(void)
{
    /* identical size: a copy */
    int w = 37, h = 23;
    uint8_t *a = malloc((size_t)w * h * 3), *b = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) a[i] = (uint8_t)(i * 31 + 7);
    CHECK(mv_resize_bicubic_aa_u8(a, w, h, b, w, h) == MV_OK && memcmp(a, b, (size_t)w * h * 3) == 0,
          "resize to the same size copies the image");
    free(a);
    free(b);

    /* a constant image stays constant, up and down, one axis or both */
    static const int sz[][4] = {{50, 40, 100, 80}, {50, 40, 20, 15}, {50, 40, 50, 97}, {50, 40, 13, 40},
                                {7, 300, 64, 32}, {1, 1, 32, 32}};
    for (size_t k = 0; k < sizeof sz / sizeof sz[0]; k++) {
        int sw = sz[k][0], sh = sz[k][1], dw = sz[k][2], dh = sz[k][3];
        uint8_t *s = malloc((size_t)sw * sh * 3), *d = malloc((size_t)dw * dh * 3);
        for (int i = 0; i < sw * sh; i++) {
            s[3 * i] = 0;
            s[3 * i + 1] = 137;
            s[3 * i + 2] = 255;
        }
        mv_status st = mv_resize_bicubic_aa_u8(s, sw, sh, d, dw, dh);
        int bad = 0;
        for (int i = 0; i < dw * dh; i++)
            bad += d[3 * i] != 0 || d[3 * i + 1] != 137 || d[3 * i + 2] != 255;
        CHECK(st == MV_OK && bad == 0, "constant image stays constant %dx%d -> %dx%d (%d pixels off)",
              sw, sh, dw, dh, bad);
        free(s);
        free(d);
    }
}

static void test_resize_torch(void)
{
    static const struct { int sh, sw, dh, dw; uint64_t hash; } t[] = {
        {97, 173, 192, 352, 0x32c36ab82494c15cULL},
        {240, 320, 256, 320, 0x7e17b305dae6b027ULL},
        {60, 400, 128, 832, 0xa37e767f3da9bb72ULL},
        {300, 200, 96, 64, 0x0b5724ebd8ed8815ULL},
        {200, 300, 32, 608, 0x962cd3393676c95aULL},
        {1, 50, 32, 64, 0x2353cacb8bb25525ULL},
        {50, 1, 64, 32, 0x58c4f229f4c6a905ULL},
        {77, 311, 160, 640, 0x344d82087df3461aULL},
        {255, 255, 256, 256, 0xff417026134a4f7bULL},
        {256, 256, 255, 255, 0xbc0ad04d03a346b2ULL},
        {123, 45, 400, 150, 0x0737d88e0837d511ULL},
        {400, 300, 224, 160, 0x2a8f060b18a092ceULL},
        {64, 64, 32, 32, 0x9143fb824bc4cf87ULL},
        {33, 97, 32, 96, 0xf745496ba6f48654ULL},
        {500, 20, 96, 32, 0x911d1caa77baa477ULL},
        {17, 900, 32, 576, 0x0964edb20c3c1acfULL},
        {149, 200, 320, 416, 0x4cbf15cd6334a337ULL},
        {199, 117, 384, 224, 0x17c0217a9d6e6d99ULL},
        {640, 480, 64, 32, 0x29ebed63953b85e3ULL},
        {3, 3, 288, 288, 0x0f0e7948732b3e14ULL},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int sh = t[k].sh, sw = t[k].sw, dh = t[k].dh, dw = t[k].dw;
        uint8_t *s = malloc((size_t)sw * sh * 3), *d = malloc((size_t)dw * dh * 3);
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < sw; x++)
                for (int c = 0; c < 3; c++) s[((size_t)y * sw + x) * 3 + c] = gen_pixel(x, y, c);
        mv_status st = mv_resize_bicubic_aa_u8(s, sw, sh, d, dw, dh);
        uint64_t hsh = fnv1a(d, (size_t)dw * dh * 3);
        CHECK(st == MV_OK && hsh == t[k].hash, "resize %dx%d -> %dx%d bit-identical to torch (%016llx)",
              sw, sh, dw, dh, (unsigned long long)hsh);
        free(s);
        free(d);
    }
}

static void test_lut(void)
{
    mv_preproc_config pp;
    qwen35_pp(&pp);
    float lut[3][256];
    mv_norm_lut(&pp, lut);
    CHECK(lut[0][0] == -1.0f && lut[1][255] == 1.0f, "LUT ends: 0 -> -1, 255 -> 1");
    /* (127 - 127.5) / 127.5 and (128 - 127.5) / 127.5 rounded once to fp32 */
    CHECK(lut[2][127] == -0.003921568859368563f && lut[2][128] == 0.003921568859368563f,
          "LUT middle: 127 -> %.9g, 128 -> %.9g", lut[2][127], lut[2][128]);
    int mono = 1;
    for (int v = 1; v < 256; v++) mono &= lut[0][v] > lut[0][v - 1];
    CHECK(mono, "LUT strictly increasing");
    /* CLIP statistics: fl32(fl32(v - fl32(mean*255)) / fl32(std*255)) */
    mv_preproc_config clip = pp;
    clip.mean[0] = 0.48145466f;
    clip.std[0] = 0.26862954f;
    mv_norm_lut(&clip, lut);
    float m = (float)((double)0.48145466f * 255.0), s = (float)((double)0.26862954f * 255.0);
    float d = 200.0f - m;
    CHECK(lut[0][200] == d / s, "LUT with CLIP mean/std follows the fused fp32 formula");
}

/* R = row & 255, G = col & 255, B = 10 * frame + (row >> 8) + 4 * (col >> 8): with mean 0 and
 * std = rescale, the LUT is the identity, so each output value names its source pixel. */
static void test_patchify_layout(void)
{
    mv_preproc_config pp;
    qwen35_pp(&pp);
    for (int c = 0; c < 3; c++) {
        pp.mean[c] = 0.0f;
        pp.std[c] = (float)pp.rescale;
    }
    float lut[3][256];
    mv_norm_lut(&pp, lut);
    int ident = 1;
    for (int v = 0; v < 256; v++) ident &= lut[1][v] == (float)v;
    CHECK(ident, "LUT with mean 0, std = rescale is the identity");

    const int h = 64, w = 96, P = 16, T = 2;
    for (int nf = 1; nf <= 3; nf++) {
        uint8_t *fr[3];
        for (int f = 0; f < nf; f++) {
            fr[f] = malloc((size_t)h * w * 3);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    uint8_t *p = fr[f] + ((size_t)y * w + x) * 3;
                    p[0] = (uint8_t)(y & 255);
                    p[1] = (uint8_t)(x & 255);
                    p[2] = (uint8_t)(10 * f + (y >> 8) + 4 * (x >> 8));
                }
        }
        long long rows = mv_patchify_rows(nf, h, w, &pp);
        int gt = (nf + 1) / 2, gh = h / P, gw = w / P;
        float *out = malloc(sizeof(float) * (size_t)rows * 3 * T * P * P);
        int32_t grid[3] = {0, 0, 0};
        mv_patchify((const uint8_t *const *)fr, nf, h, w, &pp, out, grid);
        CHECK(rows == (long long)gt * gh * gw && grid[0] == gt && grid[1] == gh && grid[2] == gw,
              "%d frame(s): grid %d,%d,%d rows %lld", nf, grid[0], grid[1], grid[2], rows);
        long long bad = 0;
        for (int g = 0; g < gt; g++)
            for (int q = 0; q < gh * gw; q++) {
                /* HF merge-block order */
                int in_col = q % 2, in_row = (q / 2) % 2, bcol = (q / 4) % (gw / 2), brow = q / (4 * (gw / 2));
                int prow = 2 * brow + in_row, pcol = 2 * bcol + in_col;
                const float *o = out + ((size_t)g * gh * gw + q) * (3 * T * P * P);
                for (int c = 0; c < 3; c++)
                    for (int t = 0; t < T; t++)
                        for (int ph = 0; ph < P; ph++)
                            for (int pw = 0; pw < P; pw++) {
                                int y = prow * P + ph, x = pcol * P + pw;
                                int f = g * T + t < nf ? g * T + t : nf - 1;
                                float want = c == 0 ? (float)(y & 255) : c == 1 ? (float)(x & 255)
                                                                   : (float)(10 * f);
                                bad += o[((c * T + t) * P + ph) * P + pw] != want;
                            }
            }
        CHECK(bad == 0, "%d frame(s): every value lands at (merge-block row, (c,t,ph,pw) column); "
              "%lld misplaced", nf, bad);
        free(out);
        for (int f = 0; f < nf; f++) free(fr[f]);
    }
}

static void test_hf_pixel_values(void)
{
    static const struct { const char *file; int w, h, gh, gw; uint64_t pv; } t[] = {
        {"jpeg_baseline_420_320x240.jpg", 320, 240, 16, 20, 0x9ed7f0f702b2d5b9ULL},
        {"jpeg_cmyk_ycck_adobe_160x120.jpg", 160, 120, 14, 20, 0xed0f5ef6a4a46ecdULL},
        {"jpeg_exif3_117x199.jpg", 117, 199, 22, 14, 0xe656f70f8fee9b2dULL},
        {"jpeg_exif6_168x104.jpg", 104, 168, 22, 14, 0xec58fce0515eeaadULL},
        {"jpeg_exif8_256x160.jpg", 160, 256, 22, 14, 0xd232e722d7681655ULL},
        {"jpeg_gradient_420_221x127.jpg", 221, 127, 14, 22, 0xb74a04a0b6499c05ULL},
        {"jpeg_gray_200x149.jpg", 200, 149, 14, 20, 0x4dae6ff638450799ULL},
        {"jpeg_progressive_422_256x160.jpg", 256, 160, 14, 22, 0x8ea5900a31253c65ULL},
        {"png_gray_128x72.png", 128, 72, 12, 22, 0x90f686811efa58fdULL},
        {"png_graya_112x80.png", 112, 80, 14, 20, 0x700265dcb24a98f1ULL},
        {"png_interlaced_131x87.png", 131, 87, 14, 20, 0x01f0eaed79e7b245ULL},
        {"png_palette4_trns_90x60.png", 90, 60, 14, 20, 0x62b4299cdf309b75ULL},
        {"png_palette_trns_144x96.png", 144, 96, 14, 20, 0x949803f6be557a21ULL},
        {"png_rgb16_96x64.png", 96, 64, 14, 20, 0x5f27a492d5336fcdULL},
        {"png_rgb_320x256.png", 320, 256, 16, 20, 0x4ba794fd5ced22d1ULL},
        {"png_rgb_odd_173x97.png", 173, 97, 12, 22, 0x6bec9ec2ce504f4dULL},
        {"png_rgb_wide_400x60.png", 400, 60, 8, 42, 0x055e152eda44bbf5ULL},
        {"png_rgba_160x120.png", 160, 120, 14, 20, 0x1b49e7de086a51b9ULL},
        {"webp_lossless_alpha_120x90.webp", 120, 90, 14, 20, 0xd2da74000c1740a5ULL},
        {"webp_lossy_192x128.webp", 192, 128, 14, 20, 0xebee16c73a027921ULL},
    };
    mv_preproc_config pp;
    qwen35_pp(&pp);
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, "fixtures/media/images/%s", t[k].file);
        mv_image img;
        mv_err e = {{0}};
        mv_status s = mv_image_decode(path, 0, &img, &e);
        if (s != MV_OK) {
            CHECK(0, "%s: decode failed: %s", t[k].file, e.msg);
            continue;
        }
        float *px = NULL;
        int32_t grid[3] = {0, 0, 0};
        uint8_t *rs = NULL;
        int rw = 0, rh = 0;
        s = mv_preprocess_image(&img, &pp, &px, grid, &rs, &rw, &rh, &e);
        uint64_t hsh = s == MV_OK ? fnv1a(px, sizeof(float) * (size_t)grid[1] * grid[2] * 1536) : 0;
        CHECK(s == MV_OK && grid[0] == 1 && grid[1] == t[k].gh && grid[2] == t[k].gw &&
              rw == 16 * t[k].gw && rh == 16 * t[k].gh && hsh == t[k].pv,
              "%s: pixel_values bit-identical to HF (grid 1,%d,%d; %016llx)", t[k].file, grid[1],
              grid[2], (unsigned long long)hsh);
        free(px);
        free(rs);
        mv_image_free(&img);
    }
}

/* HF's cap_pixels_per_frame budget (Qwen3VLVideoProcessor.resize, transformers 5.17), evaluated
 * by Python on each case's (n, patch, merge, shortest_edge, longest_edge, max_video_tokens):
 * Python ints and float, so it is the oracle for the integer division, int(x * 1.05) and
 * products past 64 bits (where we saturate). */
static const char budget_py[] =
    "import sys\n"
    "a = [int(x) for x in sys.argv[1:]]\n"
    "for i in range(0, len(a), 6):\n"
    "    num_frames, patch_size, merge_size, shortest_edge, longest_edge, max_video_tokens = a[i:i + 6]\n"
    "    factor = patch_size * merge_size\n"
    "    frame_cap = max_video_tokens * factor * factor\n"
    "    pixels_per_frame = max(min(frame_cap, longest_edge // num_frames), int(shortest_edge * 1.05))\n"
    "    print(min(pixels_per_frame * num_frames, 2**63 - 1))\n";

typedef struct { int n, patch, merge; long long mn, mx, tokens; } budget_case;

static void test_video_budget(void)
{
    enum { NFIX = 16, NRAND = 240 };
    budget_case t[NFIX + NRAND] = {
        {4, 16, 2, 1024, 401408, 768},          /* the fixture model: the share binds */
        {6, 16, 2, 1024, 401408, 768},          /* 401408 // 6 = 66901 */
        {3, 16, 2, 1024, 401408, 768},
        {4, 16, 2, 1024, 401408, 4},            /* the bats binding config: the token cap binds */
        {4, 16, 2, 1024, 401408, 1},            /* 1024 < int(1024 * 1.05): the floor binds */
        {2, 16, 2, 4096, 25165824, 768},        /* released checkpoints: 768 * 32^2 binds */
        {32, 16, 2, 4096, 25165824, 768},       /* 786432 both ways */
        {33, 16, 2, 4096, 25165824, 768},       /* the share binds */
        {768, 16, 2, 4096, 25165824, 768},      /* 32768 per frame */
        {100000, 16, 2, 4096, 25165824, 768},   /* the floor: int(4096 * 1.05) = 4300 */
        {5, 14, 2, 3136, 12845056, 768},        /* Qwen2.5-VL-like factor 28 */
        {7, 16, 2, 20, 1000, 768},              /* int(20 * 1.05) = 21 from 21.000000000000004 */
        {9, 16, 2, 60, 100, 768},               /* the floor above the whole budget */
        {1, 16, 2, 1, 1, 1},
        {100000, 1024, 16, 1000000000000000LL, 1000000000000000LL, 1000000000}, /* past 2^63 */
        {3, 1024, 16, 1, 1000000000000000LL, 1000000000},
    };
    uint64_t r = 0x9e3779b97f4a7c15ULL;
    for (int i = NFIX; i < NFIX + NRAND; i++) {
        budget_case *c = &t[i];
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        c->n = 1 + (int)((r >> 33) % (i % 3 ? 64 : 2000));
        c->patch = (i % 5) ? 16 : 14;
        c->merge = (i % 7) ? 2 : 1;
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        c->mn = 1 + (long long)((r >> 24) % 70000);
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        c->mx = c->mn + (long long)((r >> 20) % 40000000);
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        c->tokens = 1 + (long long)((r >> 40) % 2000);
    }
    size_t cap = 64 + sizeof budget_py + (size_t)(NFIX + NRAND) * 6 * 24, len = 0;
    char *cmd = malloc(cap);
    len += (size_t)snprintf(cmd + len, cap - len, "/usr/bin/python3 -c '%s'", budget_py);
    for (int i = 0; i < NFIX + NRAND; i++)
        len += (size_t)snprintf(cmd + len, cap - len, " %d %d %d %lld %lld %lld", t[i].n, t[i].patch,
                                t[i].merge, t[i].mn, t[i].mx, t[i].tokens);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "python3 evaluates HF's per-frame cap formula");
    int bad = 0, got_lines = 0;
    for (int i = 0; p && i < NFIX + NRAND; i++) {
        long long want;
        if (fscanf(p, "%lld", &want) != 1)
            break;
        got_lines++;
        mv_preproc_config pp;
        qwen35_pp(&pp);
        pp.patch = t[i].patch;
        pp.merge = t[i].merge;
        pp.video_min_pixels = t[i].mn;
        pp.video_max_pixels = t[i].mx;
        pp.max_video_tokens = t[i].tokens;
        pp.video_frame_cap = 1;
        long long got = mv_video_max_pixels(&pp, t[i].n);
        pp.video_frame_cap = 0;
        long long off = mv_video_max_pixels(&pp, t[i].n);
        if (got != want || off != t[i].mx) {
            bad++;
            printf("#   n %d factor %d min %lld max %lld tokens %lld: capped %lld (python %lld), uncapped %lld\n",
                   t[i].n, t[i].patch * t[i].merge, t[i].mn, t[i].mx, t[i].tokens, got, want, off);
        }
        if (i < NFIX)
            CHECK(got == want, "capped budget n=%d factor %d [%lld, %lld] tokens %lld = %lld (python %lld)", t[i].n,
                  t[i].patch * t[i].merge, t[i].mn, t[i].mx, t[i].tokens, got, want);
    }
    if (p)
        CHECK(pclose(p) == 0 && got_lines == NFIX + NRAND, "python answered all %d cases", NFIX + NRAND);
    CHECK(bad == 0, "%d random + fixed cases: capped = python's formula, uncapped = longest_edge", NFIX + NRAND);
    free(cmd);
    mv_preproc_config pp;
    qwen35_pp(&pp);
    pp.video_frame_cap = 1;
    CHECK(mv_video_max_pixels(&pp, 0) == pp.video_max_pixels, "no frames: the plain budget");
}

/* mv_frame_reader over frames held in one buffer (ud: {buffer, bytes per frame}), counting calls */
typedef struct {
    const uint8_t *fr;
    size_t fsz;
    int calls;
} mem_frames;

static mv_status read_mem(void *ud, int first, int count, uint8_t **frames, mv_err *e)
{
    mem_frames *m = ud;
    (void)e;
    *frames = malloc(m->fsz * count);
    if (!*frames) return MV_ERR_NOMEM;
    memcpy(*frames, m->fr + m->fsz * first, m->fsz * count);
    m->calls++;
    return MV_OK;
}

/* mv_preprocess_video resizes to video smart_resize under the capped budget: 4 frames of 192x128
 * with 4 tokens per frame come out as smart_resize(4, 128, 192, budget) says, not uncapped; read
 * one frame at a time or all at once, the pixels are the same. */
static void test_video_uses_budget(void)
{
    const int n = 4, w = 192, h = 128;
    uint8_t *fr = malloc((size_t)n * w * h * 3);
    for (size_t i = 0; i < (size_t)n * w * h * 3; i++)
        fr[i] = gen_pixel(i / 3 % w, i / 3 / w, i % 3);
    mv_preproc_config pp;
    qwen35_pp(&pp);
    pp.video_min_pixels = 1024;
    pp.video_max_pixels = 401408;
    pp.max_video_tokens = 4;
    for (int cap = 0; cap < 2; cap++) {
        pp.video_frame_cap = cap;
        mv_err e = {{0}};
        int oh = 0, ow = 0;
        CHECK(mv_smart_resize_video(n, h, w, 32, 2, 1024, mv_video_max_pixels(&pp, n), &oh, &ow, &e) == MV_OK,
              "smart_resize under the %s budget", cap ? "capped" : "uncapped");
        float *px = NULL, *px1 = NULL;
        int32_t grid[3] = {0}, grid1[3] = {0};
        mem_frames mf = {fr, (size_t)w * h * 3, 0}, mf1 = {fr, (size_t)w * h * 3, 0};
        CHECK(mv_preprocess_video(read_mem, &mf, n, n, w, h, &pp, &px, grid, NULL, NULL, NULL, &e) == MV_OK &&
                  grid[0] == 2 && grid[1] * 16 == oh && grid[2] * 16 == ow,
              "cap %s: grid %dx%dx%d, smart_resize %dx%d", cap ? "on" : "off", grid[0], grid[1], grid[2], ow, oh);
        if (cap)
            CHECK(oh * ow < h * w, "the capped frames are smaller than the source (%dx%d)", ow, oh);
        CHECK(mv_preprocess_video(read_mem, &mf1, 1, n, w, h, &pp, &px1, grid1, NULL, NULL, NULL, &e) == MV_OK &&
                  mf.calls == 1 && mf1.calls == n && !memcmp(grid, grid1, sizeof grid) &&
                  !memcmp(px, px1, sizeof(float) * (size_t)grid[0] * grid[1] * grid[2] * 3 * 2 * 16 * 16),
              "cap %s: frames read one at a time (%d reads) give the same pixel_values", cap ? "on" : "off",
              mf1.calls);
        free(px);
        free(px1);
    }
    free(fr);
}

int main(void)
{
    test_smart_resize();
    test_resize_basic();
    test_resize_torch();
    test_lut();
    test_patchify_layout();
    test_hf_pixel_values();
    test_video_budget();
    test_video_uses_budget();
    return UNIT_DONE();
}
