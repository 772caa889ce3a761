/* test_resize.cu - the CUDA uint8 antialiased bicubic resize (cu/resize.cu) byte for byte
 * against its CPU twin mv_resize_bicubic_aa_u8 (src/input/preprocess.c, itself checked against
 * torch/PIL-made references by the unit and bats tests), on awkward sizes: 1xN and Nx1 sources and
 * targets, 1x1, upscales, downscales by 10x and 200x, odd sizes, one axis only, equal sizes,
 * and runs of video frames in one call; random bytes and 0/255 checkerboards (the bicubic
 * overshoot then hits both clamps). The destination is poisoned before each run, so an unwritten
 * byte fails too. TAP output (test/unit/unit.h). Needs a GPU; built by make cuda-tests. */
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "mv_cuda.cuh"
extern "C" {
#include "mv_preprocess.h"
}
#include "unit.h"

typedef struct {
    int nf, sw, sh, dw, dh;
    int checker; /* 0: random bytes; 1: 0/255 checkerboard of 1-pixel squares; 2: of 3-pixel ones */
} rcase;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t next_byte(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static void fill(std::vector<uint8_t> &v, const rcase &c)
{
    for (int f = 0; f < c.nf; f++)
        for (int y = 0; y < c.sh; y++)
            for (int x = 0; x < c.sw; x++)
                for (int ch = 0; ch < 3; ch++) {
                    size_t i = (((size_t)f * c.sh + y) * c.sw + x) * 3 + ch;
                    int s = c.checker == 2 ? 3 : 1;
                    v[i] = c.checker ? (uint8_t)((((x / s) + (y / s) + f + ch) & 1) ? 255 : 0) : next_byte();
                }
}

/* Uploads axis a into a fresh device buffer (*buf, freed by the caller) and describes it in *d. */
static int upload_axis(const mv_resize_axis *a, void **buf, mv_cuda_resize_axis *d)
{
    size_t nb = mv_cuda_resize_axis_bytes(a);
    std::vector<uint8_t> h(nb);
    if (cudaMalloc(buf, nb) != cudaSuccess) return -1;
    mv_cuda_resize_axis_pack(a, h.data(), *buf, d);
    return cudaMemcpy(*buf, h.data(), nb, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

static void run_case(const rcase &c)
{
    const size_t sfr = (size_t)c.sh * c.sw * 3, dfr = (size_t)c.dh * c.dw * 3;
    std::vector<uint8_t> src(sfr * c.nf), want(dfr * c.nf), got(dfr * c.nf);
    fill(src, c);
    int cpu_ok = 1;
    for (int f = 0; f < c.nf; f++)
        cpu_ok &= mv_resize_bicubic_aa_u8(src.data() + f * sfr, c.sw, c.sh, want.data() + f * dfr, c.dw, c.dh) ==
                  MV_OK;
    mv_resize_axis ax = {}, ay = {};
    mv_cuda_resize_axis dx = {}, dy = {};
    void *bx = NULL, *by = NULL;
    uint8_t *dsrc = NULL, *ddst = NULL, *dtmp = NULL;
    int setup = cpu_ok && cudaMalloc((void **)&dsrc, src.size()) == cudaSuccess &&
                cudaMalloc((void **)&ddst, got.size()) == cudaSuccess &&
                cudaMalloc((void **)&dtmp, (size_t)c.nf * c.sh * c.dw * 3) == cudaSuccess &&
                cudaMemcpy(dsrc, src.data(), src.size(), cudaMemcpyHostToDevice) == cudaSuccess &&
                cudaMemset(ddst, 0xab, got.size()) == cudaSuccess;
    if (setup && c.sw != c.dw)
        setup = mv_resize_axis_init(&ax, c.sw, c.dw) == MV_OK && upload_axis(&ax, &bx, &dx) == 0;
    if (setup && c.sh != c.dh)
        setup = mv_resize_axis_init(&ay, c.sh, c.dh) == MV_OK && upload_axis(&ay, &by, &dy) == 0;
    cudaError_t r = setup ? mv_cuda_resize_u8(ddst, dsrc, dtmp, c.nf, c.sw, c.sh, c.dw, c.dh,
                                              c.sw != c.dw ? &dx : NULL, c.sh != c.dh ? &dy : NULL, 0)
                          : cudaErrorUnknown;
    if (r == cudaSuccess) r = cudaDeviceSynchronize();
    if (r == cudaSuccess) r = cudaMemcpy(got.data(), ddst, got.size(), cudaMemcpyDeviceToHost);
    size_t bad = 0, first = 0;
    for (size_t i = 0; r == cudaSuccess && i < got.size(); i++)
        if (got[i] != want[i] && !bad++) first = i;
    CHECK(setup && r == cudaSuccess && bad == 0,
          "resize %d frame(s) %dx%d -> %dx%d (%s): %zu of %zu bytes differ%s%s (first at %zu: %d vs CPU %d)",
          c.nf, c.sw, c.sh, c.dw, c.dh, c.checker ? "checkerboard" : "random", bad, got.size(),
          r == cudaSuccess ? "" : ", CUDA: ", r == cudaSuccess ? "" : cudaGetErrorString(r), first,
          bad ? got[first] : 0, bad ? want[first] : 0);
    cudaFree(dsrc);
    cudaFree(ddst);
    cudaFree(dtmp);
    cudaFree(bx);
    cudaFree(by);
    mv_resize_axis_free(&ax);
    mv_resize_axis_free(&ay);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("not ok 1 - no usable CUDA device\n1..1\n");
        return 1;
    }
    const rcase cases[] = {
        {1, 1, 37, 32, 64, 0},    {1, 37, 1, 64, 32, 0},     {1, 1, 1, 64, 64, 0},
        {1, 100, 50, 1, 50, 0},   {1, 100, 50, 100, 1, 0},   {1, 50, 100, 1, 1, 0},
        {1, 1, 200, 1, 32, 0},    {1, 200, 1, 32, 1, 1},     {1, 33, 17, 320, 160, 0},
        {1, 33, 17, 320, 160, 1}, {1, 1600, 1200, 160, 120, 0}, {1, 1600, 1200, 160, 120, 2},
        {1, 4000, 3000, 400, 300, 0}, {1, 5000, 20, 25, 20, 0}, {1, 173, 97, 192, 96, 0},
        {1, 401, 299, 211, 157, 1}, {1, 320, 240, 320, 128, 0}, {1, 320, 240, 128, 240, 0},
        {1, 320, 240, 640, 240, 2}, {1, 64, 64, 64, 64, 0},    {5, 176, 144, 192, 160, 0},
        {3, 1920, 1080, 224, 128, 1}, {4, 854, 480, 854, 256, 0}, {4, 854, 480, 320, 480, 2},
        {2, 17, 9, 17, 9, 0},      {7, 3, 5, 64, 96, 0},
    };
    for (const rcase &c : cases) run_case(c);
    return UNIT_DONE();
}
