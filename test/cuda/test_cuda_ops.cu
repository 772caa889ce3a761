/* test_cuda_ops.cu - every CUDA kernel of cu/ against its CPU twin (include/mv_ops_cpu.h), in f32
 * and bf16 (and the mixed f32-in / bf16-out LayerNorm and bf16-operand / f32-output GEMM of the
 * f32 residual stream), on awkward shapes and several segment mixes, both variants of the builtin
 * bf16 attention kernel (the second from the variants build, test/cuda/variants); then the whole
 * CUDA tower against the CPU tower on random models (head_dim 72 and 64), chunked and unchunked,
 * with stage dumps, with the residual stream in f32 (the default, which must beat HF's bf16
 * rounding), and under memory pressure; the patchify kernel (uint8 frames -> pixel_values) bit for
 * bit against mv_patchify and forward of frames against forward of the same pixel_values; forward
 * of decoded frames resized on the device (src_size) against forward of host-resized ones; cuDNN's fused
 * attention (cu/attention_cudnn.cu, loaded from MV_CUDNN_LIB as the CLI does) against the same
 * twin, through both graphs, and in the whole tower (--attention cudnn); two backends on two GPUs
 * (or two threads on one) bit for bit against solo runs; the CPU tower's options (threads, GEMM
 * mode) leave the CUDA tower's bits and settings as they are; the backend's page-locked host
 * buffers (cu/host_pinned.cu) round-trip their bytes. `--big` runs only the 47376-row
 * single-segment cuDNN case (minutes of CPU twin). Outputs are poisoned (NaN) before each run, so
 * unwritten elements fail. TAP output (test/unit/unit.h). Needs a GPU; built by make cuda-tests,
 * run by scripts/device-run.sh tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <thread>
#include <vector>

#include "fa3_table.cuh" /* MV_FA3_TABLE_VERSION */
#include "mv_cuda.cuh"
#include "variants/variants.cuh"
extern "C" {
#include "mv_backend.h"
#include "mv_model.h"
#include "mv_npy.h"
#include "mv_ops_cpu.h"
#include "mv_pool.h"
#include "mv_preprocess.h"
}
#include "unit.h"
#define TWIN_SEED 0x9e3779b97f4a7c15ull
#include "twin.cuh"

/* ---- helpers -------------------------------------------------------------------------- */
/* One forward of backend b (mv_forward_req): from f32 pixel_values or from uint8 frames (nfr:
 * their counts), tokens or (mean) the per-entry means; info may be NULL. */
static mv_status fwd(mv_backend *b, const float *pix, const uint8_t *frames, const int32_t *nfr, const int32_t *grid,
                     int n, float *out, mv_stage_fn dump, void *ud, int mean, mv_forward_info *info, mv_err *e)
{
    mv_forward_req req = {};
    req.pixels = pix;
    req.frames = frames;
    req.n_frames = nfr;
    req.grid = grid;
    req.n_entries = n;
    req.out = out;
    req.mean = mean;
    req.dump = dump;
    req.dump_ud = ud;
    return b->forward(b, &req, info, e);
}
static mv_status fwd_pixels(mv_backend *b, const float *pix, const int32_t *grid, int n, float *out, mv_stage_fn dump,
                            void *ud, mv_err *e, mv_forward_info *info = NULL)
{
    return fwd(b, pix, NULL, NULL, grid, n, out, dump, ud, 0, info, e);
}
static mv_status fwd_frames(mv_backend *b, const uint8_t *frames, const int32_t *nfr, const int32_t *grid, int n,
                            float *out, mv_stage_fn dump, void *ud, mv_err *e, int mean = 0)
{
    return fwd(b, NULL, frames, nfr, grid, n, out, dump, ud, mean, NULL, e);
}
static std::vector<float> randv(size_t n, float scale)
{
    std::vector<float> v(n);
    for (auto &x : v) x = urand() * scale;
    return v;
}
static std::vector<float> round_bf16(const std::vector<float> &v)
{
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = mv_round_bf16(v[i]);
    return r;
}

/* device buffer of T with the given f32 contents */
template <typename T> static T *dev_from(const std::vector<float> &h)
{
    float *tmp;
    T *d;
    CU(cudaMalloc(&tmp, h.size() * 4 + 16));
    CU(cudaMalloc(&d, h.size() * sizeof(T) + 16));
    CU(cudaMemcpy(tmp, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    CU(mv_cuda_from_f32<T>(d, tmp, (int64_t)h.size(), 0));
    CU(cudaDeviceSynchronize());
    cudaFree(tmp);
    return d;
}
template <typename T> static std::vector<float> host_from(const T *d, size_t n)
{
    float *tmp;
    std::vector<float> h(n);
    CU(cudaMalloc(&tmp, n * 4 + 16));
    CU(mv_cuda_to_f32<T>(tmp, d, (int64_t)n, 0));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h.data(), tmp, n * 4, cudaMemcpyDeviceToHost));
    cudaFree(tmp);
    return h;
}
static float *dev_f32(const std::vector<float> &h)
{
    float *d;
    CU(cudaMalloc(&d, h.size() * 4 + 16));
    CU(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
template <typename T> static void poison(T *d, size_t n) { CU(cudaMemset(d, 0xff, n * sizeof(T))); }

template <typename T> static const char *tname() { return sizeof(T) == 2 ? "bf16" : "f32"; }

/* ---- layernorm ------------------------------------------------------------------------ */
template <typename T> static void test_layernorm(int64_t n, int dim, int inplace)
{
    std::vector<float> x = randv((size_t)(n * dim), 3.f), w = randv(dim, 1.f), b = randv(dim, 0.5f);
    for (int i = 0; i < (int)x.size(); i++) x[i] += 2.f; /* a mean offset */
    if (sizeof(T) == 2) x = round_bf16(x);
    std::vector<float> ref(x.size());
    mv_layernorm_cpu(ref.data(), x.data(), w.data(), b.data(), n, dim, 1e-6f);
    T *dx = dev_from<T>(x), *dy = dx;
    if (!inplace) {
        CU(cudaMalloc(&dy, x.size() * sizeof(T)));
        poison(dy, x.size());
    }
    float *dw = dev_f32(w), *db = dev_f32(b);
    CU(mv_cuda_layernorm<T>(dy, dx, dw, db, n, dim, 1e-6f, 0));
    std::vector<float> got = host_from(dy, x.size());
    cmp_t c = compare(got.data(), ref.data(), x.size());
    double tol = sizeof(T) == 2 ? 6e-3 : 2e-6;
    CHECK(c.nonfinite == 0 && c.rel_l2 < tol, "layernorm %s n=%lld dim=%d%s: rel_l2 %.2e max_abs %.2e",
          tname<T>(), (long long)n, dim, inplace ? " in place" : "", c.rel_l2, c.max_abs);
    cudaFree(dx);
    if (!inplace) cudaFree(dy);
    cudaFree(dw);
    cudaFree(db);
}

/* f32 x in, bf16 y out (the f32 residual stream's norms): the CPU twin on the unrounded f32 input */
static void test_layernorm_f32_bf16(int64_t n, int dim)
{
    std::vector<float> x = randv((size_t)(n * dim), 3.f), w = randv(dim, 1.f), b = randv(dim, 0.5f);
    for (auto &v : x) v += 2.f; /* a mean offset; x deliberately not on the bf16 grid */
    std::vector<float> ref(x.size());
    mv_layernorm_cpu(ref.data(), x.data(), w.data(), b.data(), n, dim, 1e-6f);
    float *dx = dev_f32(x), *dw = dev_f32(w), *db = dev_f32(b);
    bf16 *dy;
    CU(cudaMalloc(&dy, x.size() * sizeof(bf16)));
    poison(dy, x.size());
    CU(mv_cuda_layernorm_f32_bf16(dy, dx, dw, db, n, dim, 1e-6f, 0));
    std::vector<float> got = host_from(dy, x.size());
    /* all but a few ties land on the CPU result rounded to bf16 */
    long off = 0;
    for (size_t i = 0; i < x.size(); i++) off += got[i] != mv_round_bf16(ref[i]);
    cmp_t c = compare(got.data(), ref.data(), x.size());
    CHECK(c.nonfinite == 0 && c.rel_l2 < 6e-3 && off <= (long)(x.size() / 100),
          "layernorm f32 -> bf16 n=%lld dim=%d: rel_l2 %.2e max_abs %.2e, %ld of %zu not the rounded CPU value",
          (long long)n, dim, c.rel_l2, c.max_abs, off, x.size());
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dw);
    cudaFree(db);
}

/* ---- rope ----------------------------------------------------------------------------- */
static std::vector<mv_rowinfo> rowinfo_for(const std::vector<int32_t> &grid)
{
    std::vector<mv_rowinfo> ri;
    for (size_t e = 0; e < grid.size() / 3; e++) {
        int t = grid[3 * e], h = grid[3 * e + 1], w = grid[3 * e + 2];
        for (int g = 0; g < t; g++)
            for (int64_t q = 0; q < (int64_t)h * w; q++) {
                int r, c;
                mv_mb_decode(q, w, 2, &r, &c);
                ri.push_back({(int16_t)r, (int16_t)c, (int16_t)h, (int16_t)w});
            }
    }
    return ri;
}

/* qscale != 1: q's results also multiplied by it (in f32, before T's rounding), k's not */
template <typename T> static void test_rope(const std::vector<int32_t> &grid, int heads, int D, float qscale = 1.f)
{
    std::vector<mv_rowinfo> ri = rowinfo_for(grid);
    int64_t n = (int64_t)ri.size();
    int H = heads * D;
    std::vector<float> qkv = randv((size_t)(n * 3 * H), 2.f);
    if (sizeof(T) == 2) qkv = round_bf16(qkv);
    std::vector<float> cs((size_t)(n * D)), sn((size_t)(n * D)), ref = qkv;
    mv_rope_tables_cpu(cs.data(), sn.data(), grid.data(), (int)grid.size() / 3, D, 10000.0, 2);
    mv_rope_apply_cpu(ref.data(), cs.data(), sn.data(), n, heads, D);
    for (int64_t r = 0; r < n; r++)
        for (int c = 0; c < H; c++) ref[(size_t)(r * 3 * H + c)] *= qscale;
    std::vector<float> inv(D / 4);
    for (int j = 0; j < D / 4; j++) inv[j] = 1.0f / (float)pow(10000.0, (double)((float)(2 * j) / (float)(D / 2)));
    T *d = dev_from<T>(qkv);
    float *dinv = dev_f32(inv);
    mv_rowinfo *dri;
    CU(cudaMalloc(&dri, ri.size() * sizeof(mv_rowinfo)));
    CU(cudaMemcpy(dri, ri.data(), ri.size() * sizeof(mv_rowinfo), cudaMemcpyHostToDevice));
    float2 *dcs;
    CU(cudaMalloc(&dcs, (size_t)(n * (D / 2)) * sizeof(float2)));
    CU(mv_cuda_rope_table(dcs, dri, dinv, n, D, 0));
    CU(mv_cuda_rope<T>(d, dcs, n, heads, D, qscale, 0));
    std::vector<float> got = host_from(d, qkv.size());
    if (sizeof(T) == 2) ref = round_bf16(ref);
    cmp_t c = compare(got.data(), ref.data(), qkv.size());
    /* f32: cos/sin of the same f32 angles, a few ulps; bf16: at most one rounding apart */
    double tol = sizeof(T) == 2 ? 3e-3 : 2e-6;
    CHECK(c.nonfinite == 0 && c.rel_l2 < tol, "rope %s D=%d heads=%d rows=%lld q scale %g: rel_l2 %.2e max_abs %.2e",
          tname<T>(), D, heads, (long long)n, qscale, c.rel_l2, c.max_abs);
    cudaFree(d);
    cudaFree(dinv);
    cudaFree(dri);
    cudaFree(dcs);
}

/* ---- position embedding --------------------------------------------------------------- */
template <typename T> static void test_pos(const std::vector<int32_t> &grid, int side, int H)
{
    std::vector<mv_rowinfo> ri = rowinfo_for(grid);
    int64_t n = (int64_t)ri.size();
    std::vector<float> table = round_bf16(randv((size_t)side * side * H, 1.f));
    std::vector<float> x = randv((size_t)(n * H), 1.f);
    if (sizeof(T) == 2) x = round_bf16(x);
    /* CPU twin adds the f32 interpolation; the kernel adds T(pos) and rounds the sum */
    std::vector<float> pos((size_t)(n * H), 0.f);
    int64_t base = 0;
    for (size_t e = 0; e < grid.size() / 3; e++) {
        int t = grid[3 * e], h = grid[3 * e + 1], w = grid[3 * e + 2];
        mv_pos_embed_add_cpu(pos.data() + base * H, table.data(), side, H, t, h, w, 2);
        base += (int64_t)t * h * w;
    }
    std::vector<float> ref(x.size());
    for (size_t i = 0; i < x.size(); i++)
        ref[i] = sizeof(T) == 2 ? mv_round_bf16(x[i] + mv_round_bf16(pos[i])) : x[i] + pos[i];
    T *d = dev_from<T>(x);
    float *dt = dev_f32(table);
    mv_rowinfo *dri;
    CU(cudaMalloc(&dri, ri.size() * sizeof(mv_rowinfo)));
    CU(cudaMemcpy(dri, ri.data(), ri.size() * sizeof(mv_rowinfo), cudaMemcpyHostToDevice));
    CU(mv_cuda_pos_embed_add<T>(d, dri, dt, side, H, n, 0));
    std::vector<float> got = host_from(d, x.size());
    long mism = 0;
    for (size_t i = 0; i < x.size(); i++) mism += got[i] != ref[i];
    cmp_t c = compare(got.data(), ref.data(), x.size());
    /* same f32 operations in the same order: bit-exact, allow a handful of 1-ulp cases */
    CHECK(c.nonfinite == 0 && mism <= (long)(x.size() / 1000) && c.rel_l2 < 1e-5,
          "pos_embed %s side=%d H=%d rows=%lld: %ld of %zu differ, rel_l2 %.2e", tname<T>(), side, H,
          (long long)n, mism, x.size(), c.rel_l2);
    cudaFree(d);
    cudaFree(dt);
    cudaFree(dri);
}

/* ---- attention ------------------------------------------------------------------------ */
static mv_attn_state g_attn; /* the test thread's device-0 attention state */

template <typename T> static void test_attention(const std::vector<int> &lens, int heads, int D, float qscale)
{
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    int64_t n = cu.back();
    int H = heads * D;
    std::vector<float> qkv = randv((size_t)(n * 3 * H), 1.f);
    for (int64_t r = 0; r < n; r++) /* q, k larger: peaky softmax rows */
        for (int c = 0; c < 2 * H; c++) qkv[(size_t)(r * 3 * H + c)] *= qscale;
    if (sizeof(T) == 2) qkv = round_bf16(qkv);
    std::vector<float> ref((size_t)(n * H));
    mv_attention_cpu(ref.data(), qkv.data(), cu.data(), (int)lens.size(), heads, D);
    int bm = sizeof(T) == 2 ? MV_ATTN_BM_BF16 : MV_ATTN_BM_F32;
    int nt = mv_attn_tile_count(cu.data(), (int)lens.size(), bm);
    std::vector<mv_attn_tile> tiles((size_t)nt);
    int nt2 = mv_attn_tiles(tiles.data(), cu.data(), (int)lens.size(), bm);
    T *d = dev_from<T>(qkv), *o;
    CU(cudaMalloc(&o, (size_t)(n * H) * sizeof(T)));
    poison(o, (size_t)(n * H));
    mv_attn_tile *dtl;
    CU(cudaMalloc(&dtl, (size_t)nt * sizeof(mv_attn_tile)));
    CU(cudaMemcpy(dtl, tiles.data(), (size_t)nt * sizeof(mv_attn_tile), cudaMemcpyHostToDevice));
    cudaError_t r = sizeof(T) == 2
                        ? mv_cuda_attention_bf16(&g_attn, (bf16 *)o, (const bf16 *)d, dtl, nt, heads, D, 0)
                        : mv_cuda_attention_f32(&g_attn, (float *)o, (const float *)d, dtl, nt, heads, D, 0);
    CU(r);
    CU(cudaDeviceSynchronize());
    std::vector<float> got = host_from(o, (size_t)(n * H));
    cmp_t c = compare(got.data(), ref.data(), got.size());
    /* bf16: P rounded to bf16 and the output stored as bf16 (~2^-9 each) */
    double tol = sizeof(T) == 2 ? 8e-3 : 2e-5;
    char segs[128] = "";
    for (size_t i = 0; i < lens.size() && strlen(segs) < 100; i++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%d", i ? "," : "", lens[i]);
    CHECK(nt == nt2 && c.nonfinite == 0 && c.rel_l2 < tol,
          "attention %s D=%d heads=%d segments [%s] qk scale %.1f: rel_l2 %.2e max_abs %.2e nonfinite %ld",
          tname<T>(), D, heads, segs, qscale, c.rel_l2, c.max_abs, c.nonfinite);
    cudaFree(d);
    cudaFree(o);
    cudaFree(dtl);
}

/* cuDNN's fused attention (cu/attention_cudnn.cu) against the same CPU twin: ragged segments
 * read straight from the packed qkv buffer, bf16, head dims 64 / 72. */
/* ragged: every chunk through the ragged graph (MV_CUDNN_GRAPH_RAGGED); else a chunk of equal
 * segments takes the dense one. cuDNN from MV_CUDNN_LIB, as the CLI finds it. */
static void test_attention_cudnn(const std::vector<int> &lens, int heads, int D, float qscale, int ragged = 0)
{
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    int64_t n = cu.back();
    int H = heads * D;
    std::vector<float> qkv = randv((size_t)(n * 3 * H), 1.f);
    for (int64_t r = 0; r < n; r++)
        for (int c = 0; c < 2 * H; c++) qkv[(size_t)(r * 3 * H + c)] *= qscale;
    qkv = round_bf16(qkv);
    std::vector<float> ref((size_t)(n * H));
    mv_attention_cpu(ref.data(), qkv.data(), cu.data(), (int)lens.size(), heads, D);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    mv_cudnn_attn *a = NULL;
    mv_err e;
    char segs[128] = "";
    for (size_t i = 0; i < lens.size() && strlen(segs) < 100; i++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%d", i ? "," : "", lens[i]);
    mv_status s = mv_cudnn_attn_create(&a, 0, heads, D, st, getenv("MV_CUDNN_LIB"), ragged, &e);
    bf16 *d = dev_from<bf16>(qkv), *o;
    CU(cudaMalloc(&o, (size_t)(n * H) * sizeof(bf16)));
    poison(o, (size_t)(n * H));
    if (s == MV_OK) s = mv_cudnn_attn_prepare(a, 1, cu.data(), (int)lens.size(), st, &e);
    if (s == MV_OK) s = mv_cudnn_attn_run(a, 1, o, d, &e);
    if (s == MV_OK) CU(cudaStreamSynchronize(st));
    std::vector<float> got = host_from(o, (size_t)(n * H));
    cmp_t c = compare(got.data(), ref.data(), got.size());
    CHECK(s == MV_OK && c.nonfinite == 0 && c.rel_l2 < 8e-3,
          "cudnn attention%s D=%d heads=%d segments [%s] qk scale %.1f: rel_l2 %.2e max_abs %.2e nonfinite %ld %s",
          ragged ? " (ragged graph)" : "", D, heads, segs, qscale, c.rel_l2, c.max_abs, c.nonfinite, s ? e.msg : "");
    mv_cudnn_attn_destroy(a);
    cudaFree(d);
    cudaFree(o);
    cudaStreamDestroy(st);
}

/* ---- GEMM ----------------------------------------------------------------------------- */
static void test_gemm(mv_gemm_mode mode, int64_t n, int in, int out, mv_gemm_epi epi, int acc)
{
    bool bf = mode == MV_GEMM_BF16;
    std::vector<float> x = randv((size_t)(n * in), 1.f), w = randv((size_t)out * in, 1.f / sqrtf((float)in)),
                       b = randv(out, 0.5f), y0 = randv((size_t)(n * out), 1.f);
    if (bf) {
        x = round_bf16(x);
        w = round_bf16(w);
        b = round_bf16(b);
        y0 = round_bf16(y0);
    }
    std::vector<float> ref((size_t)(n * out));
    mv_linear_cpu(ref.data(), x.data(), w.data(), epi != MV_EPI_NONE ? b.data() : NULL, n, in, out);
    if (epi == MV_EPI_GELU_BIAS) mv_gelu_tanh_cpu(ref.data(), (int64_t)ref.size());
    if (acc)
        for (size_t i = 0; i < ref.size(); i++) ref[i] += y0[i];
    cudaStream_t st;
    CU(cudaStreamCreate(&st));
    mv_gemm *g;
    mv_err e;
    CHECK(mv_gemm_create(&g, mode, st, &e) == MV_OK, "gemm create");
    std::vector<float> got;
    mv_status s;
    if (bf) {
        bf16 *dx = dev_from<bf16>(x), *dw = dev_from<bf16>(w), *db = dev_from<bf16>(b), *dy = dev_from<bf16>(y0);
        if (!acc) poison(dy, y0.size());
        s = mv_gemm_run(g, dy, dx, dw, db, n, in, out, epi, acc, &e);
        CU(cudaStreamSynchronize(st));
        got = host_from(dy, y0.size());
        cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy);
    } else {
        float *dx = dev_f32(x), *dw = dev_f32(w), *db = dev_f32(b), *dy = dev_f32(y0);
        if (!acc) poison(dy, y0.size());
        s = mv_gemm_run(g, dy, dx, dw, db, n, in, out, epi, acc, &e);
        CU(cudaStreamSynchronize(st));
        got.resize(y0.size());
        CU(cudaMemcpy(got.data(), dy, y0.size() * 4, cudaMemcpyDeviceToHost));
        cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy);
    }
    cmp_t c = compare(got.data(), ref.data(), got.size());
    /* f32 with the GELU epilogue: cuBLASLt's fast tanh (~1e-6 relative); the backend uses it in
     * bf16 mode only */
    double tol = bf ? 6e-3 : mode == MV_GEMM_TF32 ? 3e-3 : epi == MV_EPI_GELU_BIAS ? 2e-5 : 2e-6;
    const char *mn = bf ? "bf16" : mode == MV_GEMM_TF32 ? "tf32" : "f32";
    if (s == MV_ERR_UNSUPPORTED && epi == MV_EPI_GELU_BIAS) {
        /* the backend falls back to bias + kernel; record that cuBLASLt refused */
        CHECK(1, "gemm %s GELU epilogue unsupported by cuBLASLt here (backend falls back): %s", mn, e.msg);
    } else {
        CHECK(s == MV_OK && c.nonfinite == 0 && c.rel_l2 < tol,
              "gemm %s [%lld x %d] . [%d x %d]^T epi %d acc %d: rel_l2 %.2e max_abs %.2e %s", mn,
              (long long)n, in, out, in, (int)epi, acc, c.rel_l2, c.max_abs, s ? e.msg : "");
    }
    mv_gemm_destroy(g);
    cudaStreamDestroy(st);
}

/* bf16 X, W; f32 bias and f32 Y (C = D): no bf16 rounding at the store, so the error is f32
 * accumulation order only (a bf16 store would be ~1e-3). */
static void test_gemm_f32y(int64_t n, int in, int out, mv_gemm_epi epi, int acc)
{
    std::vector<float> x = round_bf16(randv((size_t)(n * in), 1.f)),
                       w = round_bf16(randv((size_t)out * in, 1.f / sqrtf((float)in))),
                       b = round_bf16(randv(out, 0.5f)), y0 = randv((size_t)(n * out), 1.f);
    std::vector<float> ref((size_t)(n * out));
    mv_linear_cpu(ref.data(), x.data(), w.data(), epi != MV_EPI_NONE ? b.data() : NULL, n, in, out);
    if (acc)
        for (size_t i = 0; i < ref.size(); i++) ref[i] += y0[i];
    cudaStream_t st;
    CU(cudaStreamCreate(&st));
    mv_gemm *g;
    mv_err e;
    if (mv_gemm_create(&g, MV_GEMM_BF16, st, &e) != MV_OK) {
        CHECK(0, "gemm create: %s", e.msg);
        cudaStreamDestroy(st);
        return;
    }
    bf16 *dx = dev_from<bf16>(x), *dw = dev_from<bf16>(w);
    float *db = dev_f32(b), *dy = dev_f32(y0);
    if (!acc) poison(dy, y0.size());
    mv_status s = mv_gemm_run_f32y(g, dy, dx, dw, db, n, in, out, epi, acc, &e);
    CU(cudaStreamSynchronize(st));
    std::vector<float> got(y0.size());
    CU(cudaMemcpy(got.data(), dy, y0.size() * 4, cudaMemcpyDeviceToHost));
    cmp_t c = compare(got.data(), ref.data(), got.size());
    long offgrid = 0; /* values a bf16 store could not hold */
    for (float v : got) offgrid += v != mv_round_bf16(v);
    CHECK(s == MV_OK && c.nonfinite == 0 && c.rel_l2 < 2e-5 && offgrid > (long)(got.size() / 2),
          "gemm bf16 -> f32 Y [%lld x %d] . [%d x %d]^T epi %d acc %d: rel_l2 %.2e max_abs %.2e, "
          "%ld of %zu off the bf16 grid %s",
          (long long)n, in, out, in, (int)epi, acc, c.rel_l2, c.max_abs, offgrid, got.size(),
          s ? e.msg : "");
    /* the GELU epilogue is refused with an f32 Y (the tower never asks for it) */
    mv_status s2 = mv_gemm_run_f32y(g, dy, dx, dw, db, n, in, out, MV_EPI_GELU_BIAS, 0, &e);
    CHECK(s2 == MV_ERR_INTERNAL, "gemm bf16 -> f32 Y refuses the GELU epilogue (%d)", (int)s2);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy);
    mv_gemm_destroy(g);
    cudaStreamDestroy(st);
}

/* ---- elementwise ---------------------------------------------------------------------- */
template <typename T> static void test_act(int act, size_t n)
{
    std::vector<float> x = randv(n, 6.f);
    if (sizeof(T) == 2) x = round_bf16(x);
    std::vector<float> ref = x;
    mv_act_cpu((mv_act)act, ref.data(), (int64_t)n);
    if (sizeof(T) == 2) ref = round_bf16(ref);
    T *d = dev_from<T>(x);
    CU(mv_cuda_act<T>(d, act, (int64_t)n, 0));
    std::vector<float> got = host_from(d, n);
    cmp_t c = compare(got.data(), ref.data(), n);
    double tol = sizeof(T) == 2 ? 4e-3 : 2e-6;
    CHECK(c.nonfinite == 0 && c.rel_l2 < tol, "activation %d %s n=%zu: rel_l2 %.2e max_abs %.2e", act,
          tname<T>(), n, c.rel_l2, c.max_abs);
    cudaFree(d);
}

static void test_convert(size_t n)
{
    std::vector<float> x = randv(n, 100.f);
    x[0] = 1.00390625f; /* a tie: 1 + 2^-8 rounds to even (1.0) */
    x[1] = -3.0e38f;
    bf16 *d = dev_from<bf16>(x);
    std::vector<float> got = host_from(d, n);
    long mism = 0;
    for (size_t i = 0; i < n; i++) mism += got[i] != mv_round_bf16(x[i]);
    CHECK(mism == 0, "f32 -> bf16 -> f32 round to nearest even matches mv_round_bf16 (%ld of %zu differ)",
          mism, n);
    cudaFree(d);
}

/* ---- patchify ------------------------------------------------------------------------- */
static uint8_t u8rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 56);
}

/* Entries {n_frames, gh, gw} (grid in patches) of random uint8 frames packed back to back, as
 * forward of frames takes them; ref = mv_patchify of each entry, rows concatenated. */
typedef struct {
    std::vector<uint8_t> frames;
    std::vector<float> ref;
    std::vector<mv_patch_seg> segs; /* absolute offsets */
    int64_t rows;
} pf_case;
/* ent {n_frames, gh, gw} per entry -> the forward's grid {t = ceil(n_frames / 2), gh, gw} and frame
 * counts (temporal 2, as make_model's preprocessing) */
static void ent_grid(const std::vector<int> &ent, std::vector<int32_t> *grid, std::vector<int32_t> *nfr)
{
    for (size_t i = 0; i + 2 < ent.size(); i += 3) {
        nfr->push_back(ent[i]);
        grid->push_back((ent[i] + 1) / 2);
        grid->push_back(ent[i + 1]);
        grid->push_back(ent[i + 2]);
    }
}

static pf_case pf_make(const std::vector<int> &ent, const mv_preproc_config *pp)
{
    pf_case k;
    k.rows = 0;
    const int P = pp->patch, T = pp->temporal, cols = 3 * T * P * P;
    for (size_t i = 0; i + 2 < ent.size(); i += 3) {
        int nf = ent[i], gh = ent[i + 1], gw = ent[i + 2];
        size_t fb = (size_t)gh * P * gw * P * 3, base = k.frames.size();
        for (size_t b = 0; b < fb * nf; b++) k.frames.push_back(u8rand());
        std::vector<const uint8_t *> fp(nf);
        for (int f = 0; f < nf; f++) fp[f] = k.frames.data() + base + fb * f; /* no growth below */
        int32_t g[3];
        long long rows = mv_patchify_rows(nf, gh * P, gw * P, pp);
        std::vector<float> out((size_t)rows * cols);
        mv_patchify(fp.data(), nf, gh * P, gw * P, pp, out.data(), g);
        k.ref.insert(k.ref.end(), out.begin(), out.end());
        for (int t = 0; t < g[0]; t++) {
            int n = nf - t * T < T ? nf - t * T : T;
            k.segs.push_back(mv_patch_seg{(int64_t)(base + (size_t)t * T * fb), k.rows, n, gh, gw, 0});
            k.rows += (int64_t)gh * gw;
        }
    }
    return k;
}

/* mv_cuda_patchify vs mv_patchify, bit for bit: the whole packed input as one chunk, then split
 * into chunks of whole segments (offsets made chunk-relative as tower_cuda.cu's upload does). */
static void test_patchify(const std::vector<int> &ent, const mv_preproc_config *pp, const char *what)
{
    pf_case k = pf_make(ent, pp);
    const int cols = 3 * pp->temporal * pp->patch * pp->patch;
    float lut[3][256];
    mv_norm_lut(pp, lut);
    float *dlut, *dout;
    uint8_t *dfr;
    mv_patch_seg *dseg;
    CU(cudaMalloc(&dlut, sizeof lut));
    CU(cudaMemcpy(dlut, lut, sizeof lut, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dfr, k.frames.size()));
    CU(cudaMalloc(&dout, (size_t)k.rows * cols * 4));
    CU(cudaMalloc(&dseg, k.segs.size() * sizeof(mv_patch_seg)));
    std::vector<float> got((size_t)k.rows * cols);
    for (int split = 1; split <= 3; split++) { /* 1 chunk; 2 or 3 chunks of whole segments */
        int nseg = (int)k.segs.size();
        if (split > nseg) break;
        poison(dout, (size_t)k.rows * cols);
        for (int part = 0; part < split; part++) {
            int s0 = nseg * part / split, s1 = nseg * (part + 1) / split;
            std::vector<mv_patch_seg> cs(k.segs.begin() + s0, k.segs.begin() + s1);
            int64_t base = cs[0].src, r0 = cs[0].row0;
            int64_t end = s1 < nseg ? k.segs[s1].src : (int64_t)k.frames.size();
            int64_t r1 = s1 < nseg ? k.segs[s1].row0 : k.rows;
            for (auto &sg : cs) { sg.src -= base; sg.row0 -= r0; }
            CU(cudaMemset(dfr, 0, k.frames.size()));
            CU(cudaMemcpy(dfr, k.frames.data() + base, (size_t)(end - base), cudaMemcpyHostToDevice));
            CU(cudaMemcpy(dseg, cs.data(), cs.size() * sizeof(mv_patch_seg), cudaMemcpyHostToDevice));
            CU(mv_cuda_patchify(dout + r0 * cols, dfr, dseg, (int)cs.size(), r1 - r0, dlut, pp->patch,
                                pp->merge, pp->temporal, 0));
        }
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
        size_t diff = 0;
        for (size_t i = 0; i < got.size(); i++) diff += memcmp(&got[i], &k.ref[i], 4) != 0;
        CHECK(diff == 0, "patchify %s (%lld rows, %zu segments, %d chunk%s): %zu of %zu values differ from mv_patchify",
              what, (long long)k.rows, k.segs.size(), split, split > 1 ? "s" : "", diff, got.size());
    }
    cudaFree(dlut);
    cudaFree(dfr);
    cudaFree(dout);
    cudaFree(dseg);
}

/* ---- whole tower ---------------------------------------------------------------------- */
typedef struct {
    mv_model m;
    std::vector<std::vector<float>> store;
} rmodel;

static float *tensor(rmodel *r, size_t n, float scale, float offset)
{
    std::vector<float> v = round_bf16(randv(n, scale));
    for (auto &x : v) x = mv_round_bf16(x + offset);
    r->store.push_back(std::move(v));
    return r->store.back().data();
}

static void make_model(rmodel *r, int depth, int H, int heads, int I, int L, int side)
{
    memset(&r->m, 0, sizeof r->m);
    r->store.reserve(64 + 12 * (size_t)depth);
    mv_vision_config *c = &r->m.cfg;
    c->depth = depth; c->hidden = H; c->heads = heads; c->head_dim = H / heads; c->inter = I;
    c->out_hidden = L; c->patch = 16; c->merge = 2; c->temporal = 2; c->in_ch = 3;
    c->num_pos = side * side; c->pos_side = side; c->act = MV_ACT_GELU_TANH; c->rope_theta = 10000.0;
    c->ln_eps = 1e-6f; c->patch_dim = 1536;
    mv_preproc_defaults(&r->m.pp); /* patch 16, merge 2, temporal 2: the uint8 forward's normalisation */
    mv_model *m = &r->m;
    int P = 1536;
    float sH = 1.f / sqrtf((float)H), sI = 1.f / sqrtf((float)I), sP = 1.f / sqrtf((float)P);
    m->patch_w = tensor(r, (size_t)H * P, sP * 1.7f, 0); m->patch_b = tensor(r, H, 0.1f, 0);
    m->pos_embed = tensor(r, (size_t)side * side * H, 0.5f, 0);
    m->blocks = (mv_block *)calloc((size_t)depth, sizeof(mv_block));
    for (int i = 0; i < depth; i++) {
        mv_block *B = &m->blocks[i];
        B->norm1_w = tensor(r, H, 0.2f, 1.f); B->norm1_b = tensor(r, H, 0.1f, 0);
        B->norm2_w = tensor(r, H, 0.2f, 1.f); B->norm2_b = tensor(r, H, 0.1f, 0);
        B->qkv_w = tensor(r, (size_t)3 * H * H, sH * 2.5f, 0); B->qkv_b = tensor(r, 3 * H, 0.1f, 0);
        B->proj_w = tensor(r, (size_t)H * H, sH, 0); B->proj_b = tensor(r, H, 0.1f, 0);
        B->fc1_w = tensor(r, (size_t)I * H, sH * 1.7f, 0); B->fc1_b = tensor(r, I, 0.1f, 0);
        B->fc2_w = tensor(r, (size_t)H * I, sI, 0); B->fc2_b = tensor(r, H, 0.1f, 0);
    }
    m->mnorm_w = tensor(r, H, 0.2f, 1.f); m->mnorm_b = tensor(r, H, 0.1f, 0);
    m->mfc1_w = tensor(r, (size_t)16 * H * H, sH * 0.85f, 0); m->mfc1_b = tensor(r, 4 * H, 0.1f, 0);
    m->mfc2_w = tensor(r, (size_t)L * 4 * H, sH * 0.5f, 0); m->mfc2_b = tensor(r, L, 0.1f, 0);
}

typedef struct {
    std::vector<std::string> names;
    long x_offgrid; /* values of the residual-stream dumps (patch_embed, embed, block_NN) not on the
                     * bf16 grid: 0 with MV_RESIDUAL_BF16, most of them with MV_RESIDUAL_F32 */
    long x_total;
} stage_log;
static mv_status log_stage(void *ud, const char *stage, const float *data, int64_t rows, int64_t cols,
                           mv_err *e)
{
    (void)e;
    stage_log *l = (stage_log *)ud;
    long bad = 0;
    for (int64_t i = 0; i < rows * cols; i++) bad += !isfinite(data[i]);
    l->names.push_back(std::string(stage) + (bad ? "(nonfinite)" : ""));
    if (!strcmp(stage, "patch_embed") || !strcmp(stage, "embed") || !strncmp(stage, "block_", 6)) {
        for (int64_t i = 0; i < rows * cols; i++) l->x_offgrid += data[i] != mv_round_bf16(data[i]);
        l->x_total += (long)(rows * cols);
    }
    return MV_OK;
}

static double min_row_cos(const float *a, const float *b, int64_t rows, int64_t cols)
{
    double mn = 1.0;
    for (int64_t r = 0; r < rows; r++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t c = 0; c < cols; c++) {
            double x = a[r * cols + c], y = b[r * cols + c];
            ab += x * y; aa += x * x; bb += y * y;
        }
        double cs = ab / (sqrt(aa * bb) + 1e-30);
        if (!(cs >= mn)) mn = cs; /* NaN sticks */
    }
    return mn;
}

static void test_tower(int H, int heads, const std::vector<int32_t> &grid)
{
    rmodel rm;
    make_model(&rm, 2, H, heads, H + 16, 48, 16);
    const mv_vision_config *c = &rm.m.cfg;
    int n_entries = (int)grid.size() / 3;
    int64_t N = 0;
    for (int i = 0; i < n_entries; i++) N += (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    std::vector<float> pix = round_bf16(randv((size_t)(N * 1536), 1.f));
    int64_t M = N / 4;
    std::vector<float> ref((size_t)(M * c->out_hidden));
    mv_backend *cpu = NULL;
    mv_err e;
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    if (mv_backend_cpu_create(&rm.m, &o, &cpu, &e) != MV_OK) {
        CHECK(0, "cpu backend: %s", e.msg);
        return;
    }
    /* pixels already bf16 values, so every precision sees the same input */
    CHECK(fwd_pixels(cpu, pix.data(), grid.data(), n_entries, ref.data(), NULL, NULL, &e) == MV_OK,
          "cpu forward D=%d", H / heads);
    cpu->destroy(cpu);
    /* f32res: mv_backend_opts.residual MV_RESIDUAL_F32 (the default) or MV_RESIDUAL_BF16 */
    struct {
        mv_precision p;
        long long bt;
        double tol;
        int f32res;
        mv_attn_impl attn;
        const char *name;
    } runs[] = {{MV_PREC_F32, 0, 2e-5, 0, MV_ATTN_BUILTIN, "f32"},
                {MV_PREC_F32, 64, 2e-5, 0, MV_ATTN_BUILTIN, "f32 chunked (64-patch workspace)"},
                {MV_PREC_TF32, 0, 1e-2, 0, MV_ATTN_BUILTIN, "tf32"},
                {MV_PREC_BF16, 0, 3e-2, 0, MV_ATTN_BUILTIN, "bf16 HF residual"},
                {MV_PREC_BF16, 100, 3e-2, 0, MV_ATTN_BUILTIN, "bf16 HF residual chunked (100-patch workspace)"},
                {MV_PREC_BF16, 0, 3e-2, 1, MV_ATTN_BUILTIN, "bf16 f32 residual"},
                {MV_PREC_BF16, 100, 3e-2, 1, MV_ATTN_BUILTIN, "bf16 f32 residual chunked (100-patch workspace)"},
                {MV_PREC_BF16, 0, 3e-2, 1, MV_ATTN_CUDNN, "bf16 f32 residual, cudnn attention"},
                {MV_PREC_BF16, 100, 3e-2, 1, MV_ATTN_CUDNN, "bf16 cudnn attention chunked (100-patch workspace)"},
                {MV_PREC_BF16, 0, 3e-2, 0, MV_ATTN_CUDNN, "bf16 HF residual, cudnn attention"}};
    double rel_bf16 = -1, rel_f32res = -1;
    for (auto &run : runs) {
        o.precision = run.p;
        o.batch_tokens = run.bt;
        o.attention = run.attn;
        mv_backend *cb = NULL;
        o.residual = run.f32res ? MV_RESIDUAL_F32 : MV_RESIDUAL_BF16;
        mv_status s = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
        CHECK(s == MV_OK, "cuda create %s: %s", run.name, s ? e.msg : "ok");
        if (s) continue;
        /* what the settings resolved to (mv_backend_settings, for output fingerprints) */
        const char *ss = mv_backend_settings(cb);
        char wp[32];
        snprintf(wp, sizeof wp, " precision=%s ", run.p == MV_PREC_BF16 ? "bf16" : run.p == MV_PREC_TF32 ? "tf32" : "f32");
        CHECK(strstr(ss, "backend=cuda ") == ss && strstr(ss, wp) &&
                  strstr(ss, run.attn == MV_ATTN_CUDNN ? " attention=cudnn-9." : " attention=builtin fa3_table=- ") &&
                  strstr(ss, run.p != MV_PREC_BF16 ? " residual=- " : run.f32res ? " residual=f32 " : " residual=bf16 ") &&
                  strstr(ss, run.attn == MV_ATTN_CUDNN ? " cudnn_graph=auto " : " cudnn_graph=- "),
              "%s: settings \"%s\"", run.name, ss);
        std::vector<float> got(ref.size(), NAN);
        s = fwd_pixels(cb, pix.data(), grid.data(), n_entries, got.data(), NULL, NULL, &e);
        cmp_t cm = compare(got.data(), ref.data(), got.size());
        double mc = min_row_cos(got.data(), ref.data(), M, c->out_hidden);
        CHECK(s == MV_OK && cm.nonfinite == 0 && cm.rel_l2 < run.tol && mc > 0.999,
              "tower D=%d %s vs cpu: rel_l2 %.2e min row cos %.6f %s", H / heads, run.name, cm.rel_l2, mc,
              s ? e.msg : "");
        if (s == MV_OK && run.bt == 0 && run.p == MV_PREC_BF16 && run.attn == MV_ATTN_BUILTIN) {
            if (run.f32res) rel_f32res = cm.rel_l2;
            else rel_bf16 = cm.rel_l2;
        }
        if (run.bt == 0 && run.p == MV_PREC_BF16) {
            stage_log lg;
            lg.x_offgrid = lg.x_total = 0;
            std::vector<float> got2(ref.size(), NAN);
            s = fwd_pixels(cb, pix.data(), grid.data(), n_entries, got2.data(), log_stage, &lg, &e);
            std::string all;
            for (auto &nm : lg.names) all += nm + " ";
            CHECK(s == MV_OK && lg.names.size() == (size_t)(3 + c->depth + 3) &&
                      all == "pixel_values patch_embed embed block_00 block_01 merger_norm merger_fc1 output ",
                  "stage dumps: %s", all.c_str());
            /* a dump forward is one chunk; the plain one may split its first chunk (a quarter of
             * the workspace, sized to this batch): other GEMM row counts and, with cuDNN, the dense
             * graph for a chunk of equal segments - the same function, not always the same bits */
            cmp_t cd = compare(got2.data(), got.data(), got.size());
            CHECK(s == MV_OK && cd.nonfinite == 0 && cd.rel_l2 < 2e-3,
                  "%s forward with dumps computes the forward: rel_l2 %.2e", run.name, cd.rel_l2);
            std::vector<float> got3(ref.size(), NAN);
            s = fwd_pixels(cb, pix.data(), grid.data(), n_entries, got3.data(), NULL, NULL, &e);
            CHECK(s == MV_OK && memcmp(got.data(), got3.data(), got.size() * 4) == 0,
                  "%s forward is deterministic (the same forward twice, bit for bit)", run.name);
            /* page-locked staging (what the pipeline uses): same bits as pageable buffers */
            float *hp = (float *)cb->host_alloc(cb, pix.size() * 4);
            float *ho = (float *)cb->host_alloc(cb, got.size() * 4);
            s = MV_ERR_NOMEM;
            if (hp && ho) {
                memcpy(hp, pix.data(), pix.size() * 4);
                s = fwd_pixels(cb, hp, grid.data(), n_entries, ho, NULL, NULL, &e);
            }
            CHECK(hp && ho && s == MV_OK && memcmp(got.data(), ho, got.size() * 4) == 0,
                  "%s forward from page-locked host_alloc buffers equals the pageable one", run.name);
            cb->host_free(cb, hp);
            cb->host_free(cb, ho);
            /* default: x is rounded to bf16 at every write; f32 residual: x is really f32 */
            CHECK(s == MV_OK && lg.x_total > 0 &&
                      (run.f32res ? lg.x_offgrid > lg.x_total / 2 : lg.x_offgrid == 0),
                  "%s: %ld of %ld residual-stream dump values off the bf16 grid", run.name,
                  lg.x_offgrid, lg.x_total);
        }
        cb->destroy(cb);
    }
    /* the point of the option: a smaller error against the f32 tower than HF's rounding points */
    CHECK(rel_bf16 > 0 && rel_f32res >= 0 && rel_f32res < rel_bf16,
          "tower D=%d: f32 residual stream beats default bf16 vs cpu: rel_l2 %.3e < %.3e (ratio %.2f)",
          H / heads, rel_f32res, rel_bf16, rel_bf16 > 0 ? rel_f32res / rel_bf16 : 0.0);
    /* --attention auto where fa3 runs (Hopper, head dims 64 and 72: choose_attention) is fa3: the
     * same bits as --attention fa3 (cuDNN's or the builtin kernel's would differ), and fa3's
     * tower against the CPU's */
    mv_err fe;
    mv_fa3_device fd;
    CU(mv_cuda_fa3_device(0, &fd));
    if (mv_cuda_fa3_check(&fd, H / heads, &fe) == MV_OK) {
        const mv_attn_impl im[2] = {MV_ATTN_FA3, MV_ATTN_AUTO};
        std::vector<float> g[2];
        mv_status s[2] = {MV_ERR_USAGE, MV_ERR_USAGE};
        for (int k = 0; k < 2; k++) {
            o.precision = MV_PREC_BF16;
            o.residual = MV_RESIDUAL_F32;
            o.batch_tokens = 0;
            o.attention = im[k];
            mv_backend *cb = NULL;
            s[k] = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
            if (s[k] == MV_OK) {
                char wt[48];
                snprintf(wt, sizeof wt, " attention=fa3 fa3_table=%d ", MV_FA3_TABLE_VERSION);
                CHECK(strstr(mv_backend_settings(cb), wt) != NULL, "tower D=%d --attention %s: settings \"%s\"",
                      H / heads, k ? "auto" : "fa3", mv_backend_settings(cb));
            }
            g[k].assign(ref.size(), NAN);
            if (s[k] == MV_OK) s[k] = fwd_pixels(cb, pix.data(), grid.data(), n_entries, g[k].data(), NULL, NULL, &e);
            if (cb) cb->destroy(cb);
        }
        cmp_t cm = compare(g[0].data(), ref.data(), g[0].size());
        double mc = min_row_cos(g[0].data(), ref.data(), M, c->out_hidden);
        CHECK(s[0] == MV_OK && cm.nonfinite == 0 && cm.rel_l2 < 3e-2 && mc > 0.999,
              "tower D=%d bf16 f32 residual, fa3 attention vs cpu: rel_l2 %.2e min row cos %.6f", H / heads,
              cm.rel_l2, mc);
        CHECK(s[0] == MV_OK && s[1] == MV_OK && memcmp(g[0].data(), g[1].data(), g[0].size() * 4) == 0,
              "tower D=%d: --attention auto runs fa3 (the same output bits)", H / heads);
    } else {
        printf("# tower D=%d: no fa3 on device 0 (%s): auto's choice there is cuDNN's or builtin\n", H / heads,
               fe.msg);
    }
    /* the CPU tower's options (--threads, --cpu-gemm: the CLI names them as unused on a CUDA run,
     * mv_run_unused_options) change neither the CUDA tower's output bits nor its settings line,
     * which the output fingerprint hashes */
    {
        std::vector<float> g[2];
        std::string set[2];
        mv_status s[2] = {MV_ERR_USAGE, MV_ERR_USAGE};
        for (int k = 0; k < 2; k++) {
            o.precision = MV_PREC_BF16;
            o.residual = MV_RESIDUAL_F32;
            o.batch_tokens = 0;
            o.attention = MV_ATTN_AUTO;
            o.threads = k ? 3 : 0;
            o.cpu_gemm = k ? MV_CPU_GEMM_F32 : MV_CPU_GEMM_AUTO;
            mv_backend *cb = NULL;
            s[k] = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
            if (s[k] == MV_OK) set[k] = mv_backend_settings(cb);
            g[k].assign(ref.size(), NAN);
            if (s[k] == MV_OK) s[k] = fwd_pixels(cb, pix.data(), grid.data(), n_entries, g[k].data(), NULL, NULL, &e);
            if (cb) cb->destroy(cb);
        }
        CHECK(s[0] == MV_OK && s[1] == MV_OK && set[0] == set[1] &&
                  memcmp(g[0].data(), g[1].data(), g[0].size() * 4) == 0,
              "tower D=%d: --threads 3 --cpu-gemm f32 against the defaults: the same output bits and settings (%s)",
              H / heads, set[1].c_str());
    }
    free(rm.m.blocks);
}

static mv_status keep_pixels(void *ud, const char *stage, const float *data, int64_t rows, int64_t cols,
                             mv_err *e)
{
    (void)e;
    if (!strcmp(stage, "pixel_values")) ((std::vector<float> *)ud)->assign(data, data + rows * cols);
    return MV_OK;
}

/* forward of frames (uint8 frames in, patchified on the device) against forward of mv_patchify's
 * pixel_values on the same backend: the same output bits, chunked or not, from pageable or
 * page-locked frames; the "pixel_values" dump (the kernel's result, downloaded) equals
 * mv_patchify's bit for bit; the CPU backend's forward of frames likewise. ent: {n_frames, gh, gw}... */
static void test_tower_u8(const std::vector<int> &ent)
{
    rmodel rm;
    make_model(&rm, 2, 144, 2, 160, 48, 16);
    const mv_vision_config *c = &rm.m.cfg;
    pf_case k = pf_make(ent, &rm.m.pp);
    std::vector<int32_t> grid, nfr;
    ent_grid(ent, &grid, &nfr);
    int ne = (int)nfr.size();
    int64_t M = k.rows / 4;
    std::vector<float> ref((size_t)(M * c->out_hidden), NAN), cpix;
    mv_backend *cpu = NULL;
    mv_err e;
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    if (mv_backend_cpu_create(&rm.m, &o, &cpu, &e) != MV_OK) {
        CHECK(0, "cpu backend: %s", e.msg);
        return;
    }
    mv_status s = fwd_frames(cpu, k.frames.data(), nfr.data(), grid.data(), ne, ref.data(), keep_pixels,
                                  &cpix, &e);
    cpu->destroy(cpu);
    CHECK(s == MV_OK && cpix.size() == k.ref.size() && memcmp(cpix.data(), k.ref.data(), cpix.size() * 4) == 0,
          "cpu forward of frames: its pixel_values are mv_patchify's (%lld rows) %s", (long long)k.rows, s ? e.msg : "");
    struct {
        mv_precision p;
        long long bt;
        const char *name;
    } runs[] = {{MV_PREC_F32, 0, "f32"}, {MV_PREC_BF16, 0, "bf16"}, {MV_PREC_BF16, 100, "bf16 chunked (100-patch workspace)"},
                {MV_PREC_F32, 64, "f32 chunked (64-patch workspace)"}};
    for (auto &run : runs) {
        o.precision = run.p;
        o.batch_tokens = run.bt;
        o.attention = MV_ATTN_BUILTIN;
        mv_backend *cb = NULL;
        s = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
        CHECK(s == MV_OK, "cuda create %s: %s", run.name, s ? e.msg : "ok");
        if (s) continue;
        std::vector<float> of(ref.size(), NAN), ou(ref.size(), NAN), gpix;
        mv_status s1 = fwd_pixels(cb, k.ref.data(), grid.data(), ne, of.data(), NULL, NULL, &e);
        uint8_t *hf = (uint8_t *)cb->host_alloc(cb, k.frames.size());
        mv_status s2 = MV_ERR_NOMEM;
        if (hf) {
            memcpy(hf, k.frames.data(), k.frames.size());
            s2 = fwd_frames(cb, hf, nfr.data(), grid.data(), ne, ou.data(), NULL, NULL, &e);
        }
        cb->host_free(cb, hf);
        cmp_t cm = compare(ou.data(), ref.data(), ou.size());
        CHECK(s1 == MV_OK && s2 == MV_OK && memcmp(of.data(), ou.data(), of.size() * 4) == 0 && cm.nonfinite == 0,
              "tower %s: forward of frames of %d entries (page-locked frames) equals forward of mv_patchify's "
              "pixel_values bit for bit (rel_l2 vs cpu %.2e) %s", run.name, ne, cm.rel_l2, (s1 || s2) ? e.msg : "");
        if (run.p == MV_PREC_F32 && run.bt == 0)
            CHECK(s2 == MV_OK && cm.rel_l2 < 2e-5, "tower f32 forward of frames vs cpu forward of frames: rel_l2 %.2e", cm.rel_l2);
        if (run.bt == 0) { /* dumps need one chunk */
            std::vector<float> ou2(ref.size(), NAN);
            s = fwd_frames(cb, k.frames.data(), nfr.data(), grid.data(), ne, ou2.data(), keep_pixels, &gpix, &e);
            CHECK(s == MV_OK && gpix.size() == k.ref.size() && memcmp(gpix.data(), k.ref.data(), gpix.size() * 4) == 0,
                  "tower %s: the pixel_values dump of forward of frames (the kernel's output) is mv_patchify's bit for bit %s",
                  run.name, s ? e.msg : "");
            /* the dump forward is one chunk, the plain one may split (see test_tower): close, not
             * necessarily the same bits */
            cmp_t cd = compare(ou2.data(), ou.data(), ou.size());
            CHECK(s == MV_OK && cd.nonfinite == 0 && cd.rel_l2 < (run.p == MV_PREC_F32 ? 1e-5 : 2e-3),
                  "tower %s: forward of frames with dumps computes the forward: rel_l2 %.2e", run.name, cd.rel_l2);
        }
        /* a frame count that does not make the grid's t is refused, not read past */
        std::vector<int32_t> bad = nfr;
        bad[0] += 2;
        s = fwd_frames(cb, k.frames.data(), bad.data(), grid.data(), ne, ou.data(), NULL, NULL, &e);
        CHECK(s == MV_ERR_USAGE, "tower %s: forward of frames refuses %d frames for grid t %d: %s", run.name, bad[0],
              grid[0], e.msg);
        cb->destroy(cb);
    }
    free(rm.m.blocks);
}

/* forward of decoded frames with src_size (resized on the device, cu/resize.cu) against forward
 * of the same frames resized by mv_resize_bicubic_aa_u8 on the host: the same output bits in one
 * chunk and chunked, from page-locked frames, and the same pixel_values dump (so the device's
 * resize is the CPU's, byte for byte, inside the backend). ent: {n_frames, sw, sh, gh, gw}... */
static void test_tower_resize(const std::vector<int> &ent)
{
    rmodel rm;
    make_model(&rm, 2, 144, 2, 160, 48, 16);
    const mv_vision_config *c = &rm.m.cfg;
    const int P = c->patch;
    std::vector<uint8_t> src, rs;
    std::vector<int32_t> grid, nfr, ssz;
    int64_t rows = 0;
    for (size_t i = 0; i + 4 < ent.size(); i += 5) {
        int nf = ent[i], sw = ent[i + 1], sh = ent[i + 2], gh = ent[i + 3], gw = ent[i + 4];
        size_t sb = (size_t)sw * sh * 3, db = (size_t)gw * P * gh * P * 3, s0 = src.size(), d0 = rs.size();
        for (size_t b = 0; b < sb * nf; b++) src.push_back(u8rand());
        rs.resize(d0 + db * nf);
        for (int f = 0; f < nf; f++)
            mv_resize_bicubic_aa_u8(src.data() + s0 + sb * f, sw, sh, rs.data() + d0 + db * f, gw * P, gh * P);
        nfr.push_back(nf);
        grid.push_back((nf + 1) / 2);
        grid.push_back(gh);
        grid.push_back(gw);
        ssz.push_back(sw);
        ssz.push_back(sh);
        rows += (int64_t)((nf + 1) / 2) * gh * gw;
    }
    int ne = (int)nfr.size();
    size_t nout = (size_t)(rows / 4) * c->out_hidden;
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    long long bts[] = {0, 64};
    for (long long bt : bts) {
        o.precision = MV_PREC_BF16;
        o.batch_tokens = bt;
        o.attention = MV_ATTN_BUILTIN;
        mv_backend *cb = NULL;
        mv_err e;
        mv_status s = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
        CHECK(s == MV_OK && cb->resizes, "cuda create (resizes): %s", s ? e.msg : "ok");
        if (s) continue;
        std::vector<float> want(nout, NAN), got(nout, NAN), wpix, gpix;
        uint8_t *hf = (uint8_t *)cb->host_alloc(cb, src.size());
        mv_status s1 = fwd_frames(cb, rs.data(), nfr.data(), grid.data(), ne, want.data(), bt ? NULL : keep_pixels,
                                  &wpix, &e);
        mv_status s2 = MV_ERR_NOMEM;
        if (hf && s1 == MV_OK) {
            memcpy(hf, src.data(), src.size());
            mv_forward_req req = {};
            req.frames = hf;
            req.n_frames = nfr.data();
            req.src_size = ssz.data();
            req.grid = grid.data();
            req.n_entries = ne;
            req.out = got.data();
            req.dump = bt ? NULL : keep_pixels;
            req.dump_ud = &gpix;
            s2 = cb->forward(cb, &req, NULL, &e);
        }
        cb->host_free(cb, hf);
        CHECK(s1 == MV_OK && s2 == MV_OK && memcmp(want.data(), got.data(), nout * 4) == 0,
              "tower bf16%s: forward of %d decoded entries resized on the device equals forward of the host-resized "
              "frames bit for bit %s", bt ? " chunked (64-patch workspace)" : "", ne, (s1 || s2) ? e.msg : "");
        if (!bt)
            CHECK(s2 == MV_OK && gpix.size() == wpix.size() && !gpix.empty() &&
                      memcmp(gpix.data(), wpix.data(), gpix.size() * 4) == 0,
                  "tower bf16: the pixel_values dump of the device-resized forward is the host-resized one's (%zu values)",
                  gpix.size());
        cb->destroy(cb);
    }
    free(rm.m.blocks);
}

/* workspace sizing under memory pressure: a smaller batch, or a clear error, never a crash */
static void test_oom(void)
{
    rmodel rm;
    make_model(&rm, 1, 144, 2, 160, 48, 16);
    std::vector<int32_t> grid;
    for (int i = 0; i < 64; i++) { grid.push_back(1); grid.push_back(16); grid.push_back(16); }
    int64_t N = 64 * 256;
    std::vector<float> pix = randv((size_t)(N * 1536), 1.f), a((size_t)(N / 4 * 48)), b2(a.size());
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    o.precision = MV_PREC_BF16;
    o.batch_tokens = N;
    mv_backend *cb = NULL;
    mv_err e;
    if (mv_backend_cuda_create(&rm.m, &o, &cb, &e) != MV_OK) {
        CHECK(0, "oom: create: %s", e.msg);
        return;
    }
    mv_status s1 = fwd_pixels(cb, pix.data(), grid.data(), 64, a.data(), NULL, NULL, &e);
    cb->destroy(cb);
    /* now leave ~120 MiB free and ask again for the whole batch in one forward */
    size_t fr, tot;
    CU(cudaMemGetInfo(&fr, &tot));
    void *hog = NULL;
    size_t want = fr > (240u << 20) ? fr - (120u << 20) : 0;
    while (want && cudaMalloc(&hog, want) != cudaSuccess) {
        cudaGetLastError();
        want -= 64u << 20;
    }
    mv_status s2 = mv_backend_cuda_create(&rm.m, &o, &cb, &e);
    mv_status s3 = MV_ERR_INTERNAL;
    if (s2 == MV_OK) {
        s3 = fwd_pixels(cb, pix.data(), grid.data(), 64, b2.data(), NULL, NULL, &e);
        cb->destroy(cb);
    }
    if (hog) cudaFree(hog);
    cmp_t cm = compare(b2.data(), a.data(), a.size());
    CHECK(s1 == MV_OK && (s2 == MV_ERR_NOMEM || (s2 == MV_OK && (s3 == MV_ERR_NOMEM || (s3 == MV_OK && cm.rel_l2 < 1e-2)))),
          "memory pressure (%.0f MiB hogged): create %d forward %d rel_l2 vs unconstrained %.2e %s",
          want / 1048576.0, (int)s2, (int)s3, cm.rel_l2, (s2 || s3) ? e.msg : "");
}

/* Two backends on two GPUs at once (one thread each, its own backend and device), every result
 * bit for bit equal to a run of that device's backend alone; with one GPU, both backends on
 * device 0 from two threads (the thread-safety half of the same claim). Then the residency law:
 * output memory of another device is refused, not written. */
static void test_two_devices(mv_attn_impl attn)
{
    int ndev = 0;
    CU(cudaGetDeviceCount(&ndev));
    int dev[2] = {0, ndev > 1 ? 1 : 0};
    const char *an = attn == MV_ATTN_CUDNN ? "cudnn" : "builtin";
    if (ndev < 2) printf("# only %d GPU: both backends run on device 0 from two threads\n", ndev);
    rmodel rm;
    make_model(&rm, 2, 144, 2, 160, 48, 16);
    std::vector<int32_t> grid = {1, 32, 40, 2, 16, 24, 1, 6, 10, 1, 2, 2, 1, 64, 64};
    int ne = (int)grid.size() / 3;
    int64_t N = 0;
    for (int i = 0; i < ne; i++) N += (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    std::vector<float> pix = round_bf16(randv((size_t)(N * 1536), 1.f));
    size_t outn = (size_t)(N / 4 * 48);
    mv_backend *be[2] = {NULL, NULL};
    mv_err e[2];
    std::vector<float> solo[2], conc[2];
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        mv_backend_opts o;
        memset(&o, 0, sizeof o);
        o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
        o.precision = MV_PREC_BF16;
        o.device = dev[i];
        o.attention = attn;
        o.batch_tokens = 2048; /* several chunks: the pipelined path */
        mv_status s = mv_backend_cuda_create(&rm.m, &o, &be[i], &e[i]);
        CHECK(s == MV_OK, "two devices (%s): create backend on device %d: %s", an, dev[i], s ? e[i].msg : "ok");
        if (s) ok = 0;
    }
    if (ok)
        for (int i = 0; i < 2; i++) { /* each alone */
            solo[i].assign(outn, NAN);
            double t0 = mv_now();
            mv_forward_info info;
            mv_status s = fwd_pixels(be[i], pix.data(), grid.data(), ne, solo[i].data(), NULL, NULL, &e[i], &info);
            double t1 = mv_now();
            if (s) ok = 0;
            /* the device time of the forward's kernels (CUDA events), on the host's clock: inside
             * the call, not empty (1 ms of slack for the clock alignment at backend creation) */
            CHECK(s == MV_OK && info.gpu_t0 > t0 - 1e-3 && info.gpu_t1 < t1 + 1e-3 && info.gpu_t1 > info.gpu_t0,
                  "two devices (%s): device %d's forward kernels ran %.6f..%.6f s, inside the call %.6f..%.6f",
                  an, dev[i], info.gpu_t0 - t0, info.gpu_t1 - t0, 0.0, t1 - t0);
        }
    CHECK(ok, "two devices (%s): solo forwards: %s", an, ok ? "ok" : e[0].msg);
    for (int rep = 0; ok && rep < 3; rep++) {
        mv_status s[2] = {MV_OK, MV_OK};
        std::thread th[2];
        for (int i = 0; i < 2; i++) {
            conc[i].assign(outn, NAN);
            /* each thread starts on the other device: forward must switch itself */
            th[i] = std::thread([&, i]() {
                cudaSetDevice(dev[1 - i]);
                s[i] = fwd_pixels(be[i], pix.data(), grid.data(), ne, conc[i].data(), NULL, NULL, &e[i]);
            });
        }
        for (int i = 0; i < 2; i++) th[i].join();
        for (int i = 0; i < 2; i++)
            CHECK(s[i] == MV_OK && memcmp(conc[i].data(), solo[i].data(), outn * 4) == 0,
                  "two devices (%s) round %d: device %d concurrent forward equals its solo run bit for bit %s",
                  an, rep, dev[i], s[i] ? e[i].msg : "");
    }
    if (ok && ndev > 1) {
        /* residency: an output buffer on device 1 handed to device 0's backend is refused */
        float *d1 = NULL;
        CU(cudaSetDevice(1));
        CU(cudaMalloc(&d1, outn * 4));
        mv_status s = fwd_pixels(be[0], pix.data(), grid.data(), ne, d1, NULL, NULL, &e[0]);
        CHECK(s == MV_ERR_DEVICE, "residency: device 1 output memory refused by device 0's backend: %s",
              s ? e[0].msg : "accepted");
        CU(cudaSetDevice(1));
        cudaFree(d1);
        CU(cudaSetDevice(0));
    }
    for (int i = 0; i < 2; i++)
        if (be[i]) be[i]->destroy(be[i]);
    CU(cudaSetDevice(0));
    free(rm.m.blocks);
}

/* Backends sharing one device copy of the weights (mv_backend_opts.weights_from, as the CLI's
 * forwards in flight on a GPU): a sharing backend's results equal those of a backend with its own
 * copy bit for bit, also from two threads at once, and after the backend that uploaded the weights
 * is gone (they go with the last user, in any order); a backend of another precision given the
 * same weights_from uploads its own (its results equal an unshared one's). */
static void test_shared_weights(void)
{
    rmodel rm;
    make_model(&rm, 2, 144, 2, 160, 48, 16);
    std::vector<int32_t> grid = {1, 32, 40, 2, 16, 24, 1, 6, 10};
    int ne = (int)grid.size() / 3;
    int64_t N = 0;
    for (int i = 0; i < ne; i++) N += (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    std::vector<float> pix = round_bf16(randv((size_t)(N * 1536), 1.f));
    const size_t outn = (size_t)(N / 4 * 48);
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    o.precision = MV_PREC_BF16;
    o.batch_tokens = 2048; /* several chunks */
    mv_backend *own = NULL, *maker = NULL, *shared = NULL, *f32own = NULL, *f32 = NULL;
    mv_err e;
    int ok = mv_backend_cuda_create(&rm.m, &o, &own, &e) == MV_OK && mv_backend_cuda_create(&rm.m, &o, &maker, &e) == MV_OK;
    mv_backend_opts so = o;
    so.weights_from = maker;
    ok = ok && mv_backend_cuda_create(&rm.m, &so, &shared, &e) == MV_OK;
    mv_backend_opts fo = o;
    fo.precision = MV_PREC_F32;
    ok = ok && mv_backend_cuda_create(&rm.m, &fo, &f32own, &e) == MV_OK;
    fo.weights_from = shared; /* not the same precision: its own upload */
    ok = ok && mv_backend_cuda_create(&rm.m, &fo, &f32, &e) == MV_OK;
    CHECK(ok, "shared weights: five backends made: %s", ok ? "ok" : e.msg);
    std::vector<float> ref(outn, NAN), a(outn, NAN), b(outn, NAN), f32ref(outn, NAN), f32out(outn, NAN);
    if (ok) {
        mv_status s = fwd_pixels(own, pix.data(), grid.data(), ne, ref.data(), NULL, NULL, &e);
        s = s ? s : fwd_pixels(shared, pix.data(), grid.data(), ne, a.data(), NULL, NULL, &e);
        CHECK(s == MV_OK && !memcmp(ref.data(), a.data(), outn * 4),
              "shared weights: the sharing backend's forward equals an own-weights backend's bit for bit %s",
              s ? e.msg : "");
        mv_status st[2] = {MV_OK, MV_OK};
        mv_err te[2];
        std::fill(a.begin(), a.end(), NAN);
        std::thread th0([&]() { st[0] = fwd_pixels(maker, pix.data(), grid.data(), ne, a.data(), NULL, NULL, &te[0]); });
        std::thread th1([&]() { st[1] = fwd_pixels(shared, pix.data(), grid.data(), ne, b.data(), NULL, NULL, &te[1]); });
        th0.join();
        th1.join();
        CHECK(!st[0] && !st[1] && !memcmp(ref.data(), a.data(), outn * 4) && !memcmp(ref.data(), b.data(), outn * 4),
              "shared weights: the maker and the sharer at once, from two threads, equal it too %s",
              st[0] ? te[0].msg : st[1] ? te[1].msg : "");
        maker->destroy(maker);
        maker = NULL;
        std::fill(b.begin(), b.end(), NAN);
        s = fwd_pixels(shared, pix.data(), grid.data(), ne, b.data(), NULL, NULL, &e);
        CHECK(s == MV_OK && !memcmp(ref.data(), b.data(), outn * 4),
              "shared weights: the sharer after the maker was destroyed: the same bits %s", s ? e.msg : "");
        s = fwd_pixels(f32own, pix.data(), grid.data(), ne, f32ref.data(), NULL, NULL, &e);
        s = s ? s : fwd_pixels(f32, pix.data(), grid.data(), ne, f32out.data(), NULL, NULL, &e);
        CHECK(s == MV_OK && !memcmp(f32ref.data(), f32out.data(), outn * 4) && memcmp(f32out.data(), ref.data(), outn * 4),
              "shared weights: an f32 backend given a bf16 one's weights uploads its own: its results are f32's %s",
              s ? e.msg : "");
    }
    mv_backend *all[] = {own, maker, shared, f32own, f32};
    for (mv_backend *x : all)
        if (x) x->destroy(x);
    free(rm.m.blocks);
}

/* A backend made from a model that holds its checkpoint's bytes (MV_WEIGHTS_SOURCE, as a CLI run
 * that may use CUDA loads; bf16 weights go up as stored) against one made from the f32 load:
 * the same output bit for bit, in bf16 and in f32 precision, also once the model's weights are
 * dropped (as the CLI drops them after making its backends). Model: fixtures/model-tiny (the
 * program runs from the repository's root). */
static void test_source_weights(void)
{
    mv_model *mf = NULL, *ms = NULL;
    mv_err e;
    if (mv_model_load("fixtures/model-tiny", &mf, &e) != MV_OK ||
        mv_model_load_mode("fixtures/model-tiny", MV_WEIGHTS_SOURCE, &ms, &e) != MV_OK) {
        CHECK(0, "source weights: fixtures/model-tiny loads both ways: %s", e.msg);
        mv_model_free(mf);
        return;
    }
    std::vector<int32_t> grid = {1, 32, 40, 2, 16, 24, 1, 6, 10};
    int ne = (int)grid.size() / 3;
    int64_t N = 0;
    for (int i = 0; i < ne; i++) N += (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    std::vector<float> pix = round_bf16(randv((size_t)(N * mf->cfg.patch_dim), 1.f));
    const size_t outn = (size_t)(N / 4 * mf->cfg.out_hidden);
    const mv_precision precs[2] = {MV_PREC_BF16, MV_PREC_F32};
    mv_backend *bs[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        mv_backend_opts o;
        memset(&o, 0, sizeof o);
        o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
        o.precision = precs[k];
        mv_backend *bf = NULL;
        mv_status s1 = mv_backend_cuda_create(mf, &o, &bf, &e);
        mv_status s2 = s1 ? s1 : mv_backend_cuda_create(ms, &o, &bs[k], &e);
        std::vector<float> a(outn, NAN), b(outn, NAN);
        mv_status s3 = s2 ? s2 : fwd_pixels(bf, pix.data(), grid.data(), ne, a.data(), NULL, NULL, &e);
        mv_status s4 = s3 ? s3 : fwd_pixels(bs[k], pix.data(), grid.data(), ne, b.data(), NULL, NULL, &e);
        CHECK(!s4 && !memcmp(a.data(), b.data(), outn * 4),
              "source weights (%s): a backend from the checkpoint's bytes equals one from the f32 load bit for bit %s",
              k ? "f32" : "bf16", s4 ? e.msg : "");
        if (bf) bf->destroy(bf);
        if (k == 1) { /* dropped, as the CLI does: the backends keep their copies */
            mv_model_drop_weights(ms);
            std::vector<float> c(outn, NAN);
            mv_status s5 = bs[0] ? fwd_pixels(bs[0], pix.data(), grid.data(), ne, c.data(), NULL, NULL, &e) : MV_ERR_INTERNAL;
            mv_backend_opts o2;
            memset(&o2, 0, sizeof o2);
            o2.precision = MV_PREC_BF16;
            mv_backend *late = NULL;
            mv_status s6 = mv_backend_cuda_create(ms, &o2, &late, &e);
            CHECK(!s5 && !isnan(c[0]) && s6 != MV_OK && late == NULL,
                  "source weights: the model's weights dropped, its backends still run; a new backend is refused: %s",
                  s6 ? e.msg : "made");
        }
    }
    for (mv_backend *x : bs)
        if (x) x->destroy(x);
    mv_model_free(ms);
    mv_model_free(mf);
}

/* --pool mean on the device (cu/pool.cu via forward of means) vs the CPU twin mv_pool_mean of the same
 * backend's token output (forward of frames of the same frames): bit for bit, with entries split across
 * chunks (small workspaces) and videos whose temporal groups land in different chunks.
 * ent: {n_frames, gh, gw} per entry. */
static void test_pool_mean(mv_precision prec, long long batch_tokens, const std::vector<int> &ent)
{
    rmodel rm;
    make_model(&rm, 1, 144, 2, 160, 48, 16);
    const int L = rm.m.cfg.out_hidden;
    pf_case k = pf_make(ent, &rm.m.pp);
    std::vector<int32_t> grid, nfr;
    ent_grid(ent, &grid, &nfr);
    int ne = (int)nfr.size();
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    o.precision = prec;
    o.batch_tokens = batch_tokens;
    mv_backend *be = NULL;
    mv_err e;
    mv_status s = mv_backend_cuda_create(&rm.m, &o, &be, &e);
    CHECK(s == MV_OK && be->pools_mean, "pool mean: create backend: %s", s ? e.msg : "ok");
    if (s) {
        free(rm.m.blocks);
        return;
    }
    std::vector<float> tok((size_t)(k.rows / 4) * L, NAN), got((size_t)ne * L, NAN), want((size_t)ne * L, NAN);
    s = fwd_frames(be, k.frames.data(), nfr.data(), grid.data(), ne, tok.data(), NULL, NULL, &e);
    mv_status s2 = s ? s : fwd_frames(be, k.frames.data(), nfr.data(), grid.data(), ne, got.data(), NULL, NULL, &e, 1);
    int64_t row = 0;
    for (int i = 0; i < ne; i++) {
        int64_t rows = (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2] / 4;
        mv_pool_mean(tok.data() + row * L, rows, L, want.data() + (size_t)i * L);
        row += rows;
    }
    long diff = 0;
    for (size_t i = 0; i < got.size(); i++) diff += memcmp(&got[i], &want[i], 4) != 0;
    CHECK(s == MV_OK && s2 == MV_OK && diff == 0,
          "pool mean on the device (%s, workspace %lld, %d entries) equals mv_pool_mean of the tokens bit "
          "for bit (%ld of %zu differ) %s",
          prec == MV_PREC_BF16 ? "bf16" : "f32", batch_tokens, ne, diff, got.size(), (s || s2) ? e.msg : "");
    /* twice in a row: the device sums start from zero every forward */
    std::vector<float> again((size_t)ne * L, NAN);
    s = fwd_frames(be, k.frames.data(), nfr.data(), grid.data(), ne, again.data(), NULL, NULL, &e, 1);
    CHECK(s == MV_OK && memcmp(again.data(), got.data(), got.size() * 4) == 0,
          "pool mean: a second forward of means gives the same bits %s", s ? e.msg : "");
    be->destroy(be);
    free(rm.m.blocks);
}

/* The backend's page-locked host buffers (cu/host_pinned.cu): for sizes around a page and a huge
 * page and one output slab's worth, a buffer that CUDA reports as registered host memory, 2 MB
 * aligned, whose bytes make an asynchronous round trip through the device unchanged; freeing NULL
 * is a no-op. */
static void test_host_pinned(void)
{
    const size_t sizes[] = {1, 4095, 4097, ((size_t)2 << 20) + 1, (size_t)190 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        uint8_t *a = (uint8_t *)mv_cuda_host_pinned_alloc(0, n), *b = (uint8_t *)mv_cuda_host_pinned_alloc(0, n);
        cudaPointerAttributes at = {};
        int reg = a && b && cudaPointerGetAttributes(&at, a) == cudaSuccess && at.type == cudaMemoryTypeHost;
        CHECK(reg && ((uintptr_t)a & (((uintptr_t)2 << 20) - 1)) == 0,
              "pinned host buffer of %zu bytes: registered host memory, 2 MB aligned", n);
        int same = 0;
        void *d = NULL;
        cudaStream_t st = NULL;
        if (reg && cudaMalloc(&d, n) == cudaSuccess && cudaStreamCreate(&st) == cudaSuccess) {
            for (size_t i = 0; i < n; i++) a[i] = (uint8_t)(i * 131u + (i >> 12));
            memset(b, 0xee, n);
            same = cudaMemcpyAsync(d, a, n, cudaMemcpyHostToDevice, st) == cudaSuccess &&
                   cudaMemcpyAsync(b, d, n, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
                   cudaStreamSynchronize(st) == cudaSuccess && memcmp(a, b, n) == 0;
        }
        CHECK(same, "pinned host buffer of %zu bytes: asynchronous round trip through the device", n);
        if (st) cudaStreamDestroy(st);
        cudaFree(d);
        mv_cuda_host_pinned_free(a);
        mv_cuda_host_pinned_free(b);
    }
    mv_cuda_host_pinned_free(NULL);
    CHECK(cudaGetLastError() == cudaSuccess, "pinned host buffers: no CUDA error left behind");
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick"); /* compute-sanitizer: small shapes only */
    int big = argc > 1 && !strcmp(argv[1], "--big");     /* only the 47376-row cuDNN segment */
    if (!mv_cuda_available()) {
        printf("Bail out! no CUDA device\n");
        return 2;
    }
    CU(cudaSetDevice(0));
    mv_cuda_attn_state_init(&g_attn, 0);
    if (big) { /* one 2048x3024-class image: 47376 patches in one segment (CPU twin: minutes) */
        test_attention_cudnn({47376}, 1, 64, 2.f);
        test_attention_cudnn({47376, 1}, 1, 72, 2.f);
        return UNIT_DONE();
    }
    /* layernorm: widths of the released towers, odd widths (scalar path), in place */
    test_layernorm<float>(37, 1152, 0);
    test_layernorm<bf16>(37, 1152, 0);
    test_layernorm<bf16>(5, 72, 1);
    test_layernorm<float>(9, 100, 0);
    test_layernorm<bf16>(9, 100, 1);
    test_layernorm_f32_bf16(37, 1152); /* vectorized path */
    test_layernorm_f32_bf16(9, 100);   /* scalar path */
    if (!quick) {
        test_layernorm<bf16>(3001, 1024, 0);
        test_layernorm<bf16>(700, 4608, 1);
        test_layernorm_f32_bf16(3001, 1024);
    }
    /* rope: mixed grids, D 72 and 64 */
    std::vector<int32_t> g1 = {1, 4, 6, 2, 8, 10, 1, 2, 2};
    std::vector<int32_t> g2 = {1, 68, 120, 3, 6, 4};
    test_rope<float>(g1, 3, 72);
    test_rope<bf16>(g1, 3, 72);
    test_rope<float>(g1, 2, 64);
    test_rope<bf16>(g1, 2, 64);
    if (!quick) test_rope<bf16>(g2, 2, 72);
    test_rope<bf16>(g1, 3, 72, 0.17f); /* q pre-scaled for fa3's padded-column max */
    test_rope<float>(g1, 2, 72, 0.17f);
    /* position table: tiny grids, non-square, a grid larger than the table */
    std::vector<int32_t> gp = {1, 2, 2, 3, 6, 10, 1, 50, 2};
    test_pos<float>(gp, 48, 96);
    test_pos<bf16>(gp, 48, 96);
    test_pos<bf16>(g1, 16, 144);
    if (!quick) test_pos<bf16>(g2, 48, 1152);
    /* attention: segment mixes (single row, tile-boundary +-1, long), D 72 / 64 */
    std::vector<std::vector<int>> mixes = {{1}, {17, 130, 64}, {127, 128, 129, 3}, {784, 3, 1000}};
    for (auto &mx : mixes) {
        test_attention<float>(mx, 2, 72, 2.f);
        test_attention<float>(mx, 1, 64, 2.f);
    }
    if (!quick) test_attention<float>({4097}, 1, 72, 2.f);
    for (int variant = 1; variant <= 2; variant++) { /* both bf16 kernel variants */
        printf("# bf16 attention kernel variant %d\n", variant);
        mv_variants.attn_variant = variant; /* the variants build's (test/cuda/variants) */
        for (auto &mx : mixes) {
            test_attention<bf16>(mx, 2, 72, 2.f);
            test_attention<bf16>(mx, 3, 64, 2.f);
        }
        test_attention<bf16>({300, 65}, 2, 72, 6.f); /* near one-hot softmax rows */
        if (!quick) {
            test_attention<bf16>({4097, 1, 2500}, 2, 72, 2.f);
            test_attention<bf16>({8160}, 1, 72, 2.f);
            test_attention<bf16>({4096}, 2, 64, 2.f);
            test_attention<bf16>({200, 33}, 2, 128, 2.f);
            test_attention<bf16>({200, 33}, 2, 80, 2.f);
        }
    }
    mv_variants.attn_variant = 2;
    /* cuDNN fused attention: segment mixes around its tiles and the bucket edges, D 64 / 72 */
    std::vector<std::vector<int>> dmixes = {{1}, {127, 128, 129}, {784}, {1, 127, 128, 129, 784, 3},
                                            {17, 130, 64, 1, 1, 2}};
    for (auto &mx : dmixes) {
        test_attention_cudnn(mx, 2, 72, 2.f);
        test_attention_cudnn(mx, 3, 64, 2.f);
    }
    test_attention_cudnn({300, 65}, 2, 72, 6.f); /* near one-hot softmax rows */
    /* equal segments: the dense graph, in power-of-two batches (20 = 16 + 4, 5 = 4 + 1, 3 = 2 + 1) */
    test_attention_cudnn(std::vector<int>(20, 784), 2, 72, 2.f);
    test_attention_cudnn(std::vector<int>(5, 130), 3, 64, 2.f);
    test_attention_cudnn({1, 1, 1}, 2, 72, 2.f);
    test_attention_cudnn({64, 64}, 2, 72, 6.f);
    test_attention_cudnn(std::vector<int>(5, 130), 3, 64, 2.f, 1); /* the same through the ragged graph */
    if (!quick) {
        test_attention_cudnn({4096, 4096, 4096}, 2, 72, 2.f);
        test_attention_cudnn({8160}, 2, 72, 2.f);
        test_attention_cudnn({8160, 784, 129, 1}, 2, 64, 2.f);
        std::vector<int> many(64, 784); /* 64 images of 448x448: B bucket 64 */
        test_attention_cudnn(many, 2, 72, 2.f);
    }
    /* GEMM: every epilogue, odd n, each mode */
    mv_gemm_mode modes[] = {MV_GEMM_BF16, MV_GEMM_F32, MV_GEMM_TF32};
    for (mv_gemm_mode md : modes) {
        test_gemm(md, 37, 1536, 1152, MV_EPI_BIAS, 0);
        test_gemm(md, 1, 72, 200, MV_EPI_NONE, 0);
        test_gemm(md, 129, 144, 160, MV_EPI_GELU_BIAS, 0);
        test_gemm(md, 333, 160, 144, MV_EPI_BIAS, 1);
        if (!quick) test_gemm(md, 4000, 1152, 4304, MV_EPI_GELU_BIAS, 0);
    }
    /* GEMM with an f32 Y (the f32 residual stream): patch, proj (+Y), fc2 (+Y) shapes, odd n */
    test_gemm_f32y(37, 1536, 144, MV_EPI_BIAS, 0);
    test_gemm_f32y(333, 144, 144, MV_EPI_BIAS, 1);
    test_gemm_f32y(129, 160, 144, MV_EPI_BIAS, 1);
    test_gemm_f32y(1, 72, 200, MV_EPI_NONE, 0);
    if (!quick) test_gemm_f32y(4000, 4304, 1152, MV_EPI_BIAS, 1);
    /* elementwise */
    for (int act = 0; act < 3; act++) {
        test_act<float>(act, 10007);
        test_act<bf16>(act, 10007);
    }
    test_convert(100003);
    /* patchify (the uint8 forward's kernel) vs mv_patchify: images, odd frame counts, packed entries,
     * thin grids; the CLIP normalisation, temporal 3, patch 14 */
    {
        mv_preproc_config pp, clip, t3, p14;
        mv_preproc_defaults(&pp);
        clip = pp;
        const float cm[3] = {0.48145466f, 0.4578275f, 0.40821073f}, cs[3] = {0.26862954f, 0.26130258f, 0.27577711f};
        for (int i = 0; i < 3; i++) { clip.mean[i] = cm[i]; clip.std[i] = cs[i]; }
        t3 = clip;
        t3.temporal = 3;
        p14 = clip;
        p14.patch = 14;
        test_patchify({1, 2, 2}, &pp, "image 2x2");
        test_patchify({1, 2, 130}, &clip, "image 2x130");
        test_patchify({1, 64, 2}, &clip, "image 64x2");
        test_patchify({3, 4, 6}, &clip, "video 3 frames 4x6");
        test_patchify({5, 2, 2}, &pp, "video 5 frames 2x2");
        test_patchify({1, 12, 10, 3, 4, 6, 2, 6, 4, 1, 64, 2, 5, 2, 130, 1, 2, 2}, &clip, "6 entries packed");
        test_patchify({4, 4, 6, 1, 2, 2, 2, 2, 4}, &t3, "temporal 3: 4, 1, 2 frames");
        test_patchify({1, 6, 4, 3, 2, 8}, &p14, "patch 14");
        if (!quick) test_patchify({1, 76, 100, 9, 34, 44}, &clip, "a 1600x1216 photo and a 9-frame video");
    }
    /* whole tower vs the CPU tower */
    test_tower(144, 2, {1, 4, 6, 2, 6, 4, 1, 2, 2, 1, 12, 10});
    test_tower(128, 2, {1, 8, 8, 3, 4, 2});
    /* pooling: one forward; tiny workspaces split videos across chunks; one 1x2x2 image (1 token) */
    std::vector<int> gpool = {1, 4, 6, 6, 6, 4, 1, 2, 2, 3, 8, 10, 1, 12, 10}; /* {frames, gh, gw} */
    test_pool_mean(MV_PREC_F32, 0, gpool);
    test_pool_mean(MV_PREC_F32, 64, gpool);
    test_pool_mean(MV_PREC_BF16, 0, gpool);
    test_pool_mean(MV_PREC_BF16, 100, gpool);
    test_tower_u8({1, 8, 8, 3, 4, 6, 5, 2, 2, 1, 2, 30, 2, 6, 4});
    /* {frames, source w, h, grid h, w}: down, up, 1xN, Nx1, unchanged, one axis, a video */
    test_tower_resize({1, 300, 200, 4, 6, 1, 17, 9, 2, 4, 1, 1, 90, 8, 2, 1, 90, 1, 2, 6, 1, 64, 32, 2, 4,
                       1, 64, 100, 4, 4, 5, 50, 70, 6, 4, 1, 999, 333, 2, 6});
    test_two_devices(MV_ATTN_BUILTIN);
    test_two_devices(MV_ATTN_CUDNN);
    test_shared_weights();
    test_source_weights();
    test_host_pinned();
    if (!quick) test_oom();
    return UNIT_DONE();
}
