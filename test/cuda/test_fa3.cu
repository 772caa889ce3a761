/* test_fa3.cu - the Hopper wgmma attention kernel (cu/attention_fa3.cu, sm_90a) against its CPU
 * twin mv_attention_cpu (f32 on the same bf16-rounded q|k|v), beside the builtin bf16 kernel
 * (cu/attention.cu) on the same inputs: segment mixes around the 128-row query tile and the
 * 64/128-key tiles (1, 127, 128, 129, 784 x 3, 8160 and mixes of them), head dims 72 and 64,
 * both key-tile sizes (MV_FA3_BN 128 and 64), near one-hot softmax rows. Per case:
 *   - rel L2 < 8e-3 against the twin (test_cuda_ops's bf16 attention budget), no NaN / inf;
 *   - rel L2 at most 2x the builtin kernel's (FlashAttention's error-budget rule);
 *   - every output row written (the output is NaN-poisoned before each run) and nothing written
 *     past the last row (a poisoned guard band of 128 rows after the output must stay intact);
 *   - a second run gives the same bits (a moving result is a race: METHOD.md).
 * Then the refusals: head dims other than 64 / 72 (launcher and mv_cuda_fa3_check's message).
 * `--big` runs only one 47376-row segment (D 64) and 47376 + 1 (D 72): minutes of CPU twin.
 * `--quick` (compute-sanitizer) runs the small mixes only. Needs compute capability 9.0; on any
 * other GPU it bails out (the kernel has no image there). TAP output (test/unit/unit.h); built by
 * scripts/device-bundle.sh, run by scripts/device-run.sh fa3. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "mv_cuda.cuh"
extern "C" {
#include "mv_backend.h"
#include "mv_npy.h"
#include "mv_ops_cpu.h"
}
#include "unit.h"

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t r_ = (x);                                                                      \
        if (r_ != cudaSuccess) {                                                                   \
            printf("Bail out! %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_));   \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t rng = 0x243F6A8885A308D3ull;
static float urand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

typedef struct {
    double rel_l2, max_abs;
    long nonfinite;
} cmp_t;
static cmp_t compare(const float *a, const float *ref, size_t n)
{
    cmp_t c = {0, 0, 0};
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) {
            c.nonfinite++;
            continue;
        }
        double d = (double)a[i] - ref[i];
        d2 += d * d;
        r2 += (double)ref[i] * ref[i];
        if (fabs(d) > c.max_abs) c.max_abs = fabs(d);
    }
    c.rel_l2 = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    return c;
}

static std::vector<float> bf16_to_f32(const std::vector<uint16_t> &h)
{
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); i++) f[i] = mv_bf16_to_f32(h[i]);
    return f;
}

static mv_attn_state g_st;

/* One attention run into out (with a guard band of `guard` rows after n rows, all poisoned with
 * 0xffff = NaN first). fa3: 0 = builtin kernel, 64 / 128 = fa3 with that many keys per tile. */
static std::vector<uint16_t> run(int fa3, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int nt, int64_t n,
                                 int heads, int D, int64_t guard, cudaError_t *err)
{
    const size_t total = (size_t)((n + guard) * heads * D);
    CU(cudaMemset(out, 0xff, total * sizeof(bf16)));
    if (fa3) {
        g_st.fa3_bn = fa3;
        *err = mv_cuda_attention_fa3(&g_st, out, qkv, tiles, nt, heads, D, 0);
    } else {
        *err = mv_cuda_attention_bf16(&g_st, out, qkv, tiles, nt, heads, D, 0);
    }
    std::vector<uint16_t> h(total);
    if (*err == cudaSuccess) *err = cudaDeviceSynchronize();
    if (*err == cudaSuccess) CU(cudaMemcpy(h.data(), out, total * sizeof(bf16), cudaMemcpyDeviceToHost));
    return h;
}

static void test_fa3(const std::vector<int> &lens, int heads, int D, float qscale)
{
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    const int64_t n = cu.back(), H = (int64_t)heads * D, guard = 128;
    /* random q|k|v, rounded to bf16 (the kernels' input), q and k scaled: peaky softmax rows */
    std::vector<float> qkv((size_t)(n * 3 * H));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < 3 * H; c++)
            qkv[(size_t)(r * 3 * H + c)] = mv_round_bf16(urand() * (c < 2 * H ? qscale : 1.f));
    std::vector<float> ref((size_t)(n * H));
    mv_attention_cpu(ref.data(), qkv.data(), cu.data(), (int)lens.size(), heads, D);
    std::vector<uint16_t> hq(qkv.size());
    for (size_t i = 0; i < qkv.size(); i++) hq[i] = mv_f32_to_bf16(qkv[i]);
    bf16 *dq, *dout;
    CU(cudaMalloc(&dq, hq.size() * sizeof(bf16)));
    CU(cudaMemcpy(dq, hq.data(), hq.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, (size_t)((n + guard) * H) * sizeof(bf16)));
    int nt = mv_attn_tile_count(cu.data(), (int)lens.size(), MV_ATTN_BM_BF16);
    std::vector<mv_attn_tile> tiles((size_t)nt);
    mv_attn_tiles(tiles.data(), cu.data(), (int)lens.size(), MV_ATTN_BM_BF16);
    mv_attn_tile *dt;
    CU(cudaMalloc(&dt, (size_t)nt * sizeof(mv_attn_tile)));
    CU(cudaMemcpy(dt, tiles.data(), (size_t)nt * sizeof(mv_attn_tile), cudaMemcpyHostToDevice));
    char segs[128] = "";
    for (size_t i = 0; i < lens.size() && strlen(segs) < 100; i++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%d", i ? "," : "", lens[i]);

    cudaError_t e0;
    std::vector<uint16_t> hb = run(0, dout, dq, dt, nt, n, heads, D, guard, &e0);
    CU(e0);
    std::vector<float> fb = bf16_to_f32(hb);
    cmp_t cb = compare(fb.data(), ref.data(), (size_t)(n * H));
    for (int bn : {128, 64}) {
        cudaError_t e1 = cudaSuccess, e2 = cudaSuccess;
        std::vector<uint16_t> h1 = run(bn, dout, dq, dt, nt, n, heads, D, guard, &e1);
        std::vector<uint16_t> h2 = e1 == cudaSuccess ? run(bn, dout, dq, dt, nt, n, heads, D, guard, &e2) : h1;
        if (e1 != cudaSuccess || e2 != cudaSuccess) {
            CHECK(0, "fa3 BN=%d D=%d heads=%d segments [%s]: %s", bn, D, heads, segs,
                  cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
            printf("Bail out! a failed launch may leave the context unusable\n");
            exit(2);
        }
        std::vector<float> f1 = bf16_to_f32(h1);
        cmp_t c = compare(f1.data(), ref.data(), (size_t)(n * H));
        long guard_hit = 0;
        for (size_t i = (size_t)(n * H); i < h1.size(); i++) guard_hit += h1[i] != 0xffff;
        const int same = h1 == h2;
        CHECK(c.nonfinite == 0 && c.rel_l2 < 8e-3 && c.rel_l2 <= 2 * cb.rel_l2 && guard_hit == 0 && same,
              "fa3 BN=%d D=%d heads=%d segments [%s] qk scale %.1f: rel_l2 %.2e (builtin %.2e) max_abs %.2e "
              "nonfinite %ld, guard band written %ld, second run %s",
              bn, D, heads, segs, qscale, c.rel_l2, cb.rel_l2, c.max_abs, c.nonfinite, guard_hit,
              same ? "identical" : "DIFFERENT");
    }
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dt);
}

static void test_refusals(void)
{
    for (int D : {32, 80, 96, 128}) {
        mv_err e;
        e.msg[0] = 0;
        mv_status s = mv_cuda_fa3_check(0, D, &e);
        char want[32];
        snprintf(want, sizeof want, "head dim is %d", D);
        cudaError_t r = mv_cuda_attention_fa3(&g_st, NULL, NULL, NULL, 1, 1, D, 0);
        CHECK(s == MV_ERR_UNSUPPORTED && strstr(e.msg, want) && strstr(e.msg, "64 and 72") &&
                  r == cudaErrorInvalidValue,
              "fa3 refuses head dim %d: \"%s\", launcher: %s", D, e.msg, cudaGetErrorString(r));
    }
    mv_err e;
    CHECK(mv_cuda_fa3_check(0, 72, &e) == MV_OK && mv_cuda_fa3_check(0, 64, &e) == MV_OK,
          "fa3 takes head dims 72 and 64 on this device");
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const int big = argc > 1 && !strcmp(argv[1], "--big");
    if (!mv_cuda_available()) {
        printf("Bail out! no CUDA device\n");
        return 2;
    }
    CU(cudaSetDevice(0));
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major != 9 || minor != 0) {
        printf("Bail out! the fa3 kernel needs compute capability 9.0; device 0 is %d.%d\n", major, minor);
        return 2;
    }
    mv_cuda_attn_state_init(&g_st, 0);
    if (big) {
        test_fa3({47376}, 1, 64, 2.f);
        test_fa3({47376, 1}, 1, 72, 2.f);
        return UNIT_DONE();
    }
    test_refusals();
    const std::vector<std::vector<int>> mixes = {{1}, {127, 128, 129}, {784, 784, 784}, {17, 130, 64, 1, 1, 2}};
    for (auto &mx : mixes) {
        test_fa3(mx, 2, 72, 2.f);
        test_fa3(mx, 3, 64, 2.f);
    }
    test_fa3({300, 65}, 2, 72, 6.f); /* near one-hot softmax rows */
    if (!quick) {
        test_fa3({1, 127, 128, 129, 784, 784, 784, 8160}, 2, 72, 2.f);
        test_fa3({8160}, 1, 64, 2.f);
        test_fa3({8160, 784, 129, 1}, 2, 64, 2.f);
    }
    return UNIT_DONE();
}
