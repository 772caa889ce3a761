/* fuzz_image.c - libFuzzer harness for the still-image path: magic-byte sniffing, JPEG / PNG /
 * WebP / GIF / BMP / TIFF decoding through the format table (mv_image_decode_input, including
 * EXIF / XMP / TIFF orientation; seeds of every format: seed-corpora.sh) from an mv_input over
 * the bytes in memory and again over read callbacks handing them out in short reads (a tar member
 * streamed), and, for every image that decodes, HF's preprocessing (smart_resize, antialiased
 * bicubic resize, normalize, patchify: mv_preprocess_image). The input is one image file. Both
 * inputs must give the same status, message and pixels; a decoded image must be width x height
 * RGB with every byte readable and its orientation in 1..8; preprocessing must give a grid whose
 * patches fit the pixel budget (HF lets one side stay at 32 px for extreme aspect ratios, so that
 * case may exceed it) and values in [-1, 1]; a failure must leave one line naming the input.
 * The pixel limits are lowered (decode 4 Mpx, resize budget 256 Kpx) to keep iterations fast;
 * the limit logic is the same as the CLI's. Not here: video frames (fuzz_video.c), the tower. */
#include "fuzz_util.h"
#include "mv_image.h"
#include "mv_input.h"
#include "mv_preprocess.h"
#include "mv_sniff.h"

#define FZ_NAME "fuzz-input.img"
#define FZ_MAX_DECODE (1LL << 22)

/* A stream over the fuzz input: 1 to 64 bytes a read, the sizes taken from the data itself. */
typedef struct {
    const uint8_t *data;
    size_t len, off;
} fz_stream;

static ssize_t fz_stream_read(void *user, void *buf, size_t n)
{
    fz_stream *s = user;
    size_t k = s->len - s->off;
    size_t step = 1 + (s->len ? s->data[s->off % s->len] % 64 : 0);
    if (k > n) k = n;
    if (k > step) k = step;
    memcpy(buf, s->data + s->off, k);
    s->off += k;
    return (ssize_t)k;
}

/* Decodes data from memory and from a stream: the two must agree on everything. */
static mv_status decode_twice(const uint8_t *data, size_t size, mv_image *img, mv_err *e)
{
    memset(img, 0, sizeof *img);
    mv_input in;
    mv_status st = mv_input_open_mem(&in, data, size, FZ_NAME, e);
    if (st == MV_OK)
        st = mv_image_decode_input(&in, FZ_MAX_DECODE, 0, img, e);
    mv_input_close(&in);
    mv_image img2;
    mv_err e2;
    e2.msg[0] = 0;
    fz_stream s = {data, size, 0};
    static const mv_input_io io = {fz_stream_read, NULL};
    mv_status st2 = mv_input_open_io(&in, &io, &s, FZ_NAME, &e2);
    if (st2 == MV_OK)
        st2 = mv_image_decode_input(&in, FZ_MAX_DECODE, 0, &img2, &e2);
    mv_input_close(&in);
    if (st2 != st || (st != MV_OK && strcmp(e->msg, e2.msg)) ||
        (st == MV_OK && (img2.width != img->width || img2.height != img->height ||
                         img2.orientation != img->orientation ||
                         memcmp(img2.rgb, img->rgb, (size_t)img->width * img->height * 3)))) {
        fprintf(stderr, "memory and stream decodes differ: %d \"%s\" vs %d \"%s\"\n", st, e->msg, st2, e2.msg);
        abort();
    }
    if (st2 == MV_OK)
        mv_image_free(&img2);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t nh = size < MV_SNIFF_BYTES ? size : MV_SNIFF_BYTES;
    mv_media_kind kind = mv_sniff(data, nh);
    const char *fmt = mv_sniff_format(data, nh);
    if (!fmt || !*fmt)
        abort();
    if (kind != MV_MEDIA_IMAGE)
        return 0; /* the CLI never hands anything else to the image decoder */

    mv_image img;
    mv_err e;
    e.msg[0] = 0;
    mv_status ds = decode_twice(data, size, &img, &e);
    if (ds != MV_OK) {
        fz_check_msg(&e, FZ_NAME, "mv_image_decode_input");
        if (img.rgb)
            abort(); /* zeroed on failure */
        return 0;
    }
    if (img.width < 1 || img.height < 1 || !img.rgb || img.orientation < 1 || img.orientation > 8 ||
        (long long)img.width * img.height > FZ_MAX_DECODE || !img.format ||
        (long long)img.src_width * img.src_height != (long long)img.width * img.height) {
        fprintf(stderr, "bad image: %dx%d (stored %dx%d) orientation %d\n", img.width, img.height,
                img.src_width, img.src_height, img.orientation);
        abort();
    }
    fz_touch(img.rgb, (size_t)img.width * img.height * 3);

    mv_preproc_config pp;
    mv_preproc_defaults(&pp);
    pp.min_pixels = 4096;
    pp.max_pixels = 1 << 18;
    float *pixels = NULL;
    uint8_t *resized = NULL;
    int32_t grid[3] = {0, 0, 0};
    int rw = 0, rh = 0;
    e.msg[0] = 0;
    mv_status st = mv_preprocess_image(&img, &pp, &pixels, grid, &resized, &rw, &rh, &e);
    if (st == MV_OK) {
        int f = pp.patch * pp.merge;
        if (grid[0] != 1 || grid[1] < 1 || grid[2] < 1 || rw != grid[2] * pp.patch ||
            rh != grid[1] * pp.patch || rw % f || rh % f ||
            ((long long)rw * rh > pp.max_pixels && rw != f && rh != f)) {
            fprintf(stderr, "bad preprocessing of %dx%d: grid %d,%d,%d resized %dx%d\n", img.width,
                    img.height, grid[0], grid[1], grid[2], rw, rh);
            abort();
        }
        fz_touch(resized, (size_t)rw * rh * 3);
        size_t n = (size_t)grid[1] * grid[2] * 3 * pp.temporal * pp.patch * pp.patch;
        for (size_t i = 0; i < n; i++)
            if (!(pixels[i] >= -1.0001f && pixels[i] <= 1.0001f)) { /* mean = std = 0.5 */
                fprintf(stderr, "pixel value %g at %zu out of [-1, 1]\n", pixels[i], i);
                abort();
            }
    } else {
        if (st != MV_ERR_LIMIT && st != MV_ERR_USAGE && st != MV_ERR_NOMEM) {
            fprintf(stderr, "mv_preprocess_image: unexpected status %d: %s\n", st, e.msg);
            abort();
        }
        if (!e.msg[0] || strchr(e.msg, '\n'))
            abort();
    }
    free(pixels);
    free(resized);
    mv_image_free(&img);
    return 0;
}
