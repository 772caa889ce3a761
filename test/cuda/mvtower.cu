/* mvtower.cu - a driver for the tower backends, for parity and speed work on the GPU machine (not
 * the CLI: no images, no preprocessing).
 *   mvtower run   --model DIR --pixels P.npy --grid "t,h,w[;t,h,w...]" --out DIR
 *                 [--backend cuda|cpu] [--precision bf16|tf32|f32] [--batch-tokens N]
 *                 [--attention auto|builtin|cudnn|fa3] [--cuda-residual f32|bf16]
 *                 [--cudnn-graph auto|ragged]
 *       runs one forward and writes every stage as DIR/<stage>.npy (f32), the names
 *       scripts/hf_reference.py uses (pixel_values patch_embed embed block_NN merger_norm
 *       merger_fc1 output).
 *   mvtower bench --model DIR --pixels P.npy --grid ... [--precision ..] [--batch-tokens N]
 *                 [--iters 10] [--warmup 2] [--input f32|u8] [--inflight K] [--vary V]
 *                 [--src-scale F]
 *       times whole forwards (host f32 pixels in, host f32 embeddings out, wall clock, median)
 *       and prints one JSON line: tokens/s, images/s (entries/s), TFLOP/s of the work done.
 *       Pixels and embeddings live in page-locked host memory from the backend's host_alloc,
 *       as the CLI's staging buffers and output slabs do (src/run/towers.c); pageable memory
 *       ("pinned": false in the JSON) where the backend has none. --input u8 --inflight 2 times
 *       the tower as the CLI drives it (uint8 frames in, two forwards taking turns): bench().
 *   mvtower gemm-peak
 *       cuBLASLt bf16 GEMM rate (8192^3, random data, f32 accumulation), median of 20: JSON line.
 * Linked against the variants build: its options (test/cuda/variants/variants.cuh: --fa3 SPEC,
 * --attn-variant 1, --gemm-rank I,O,K, --gemm-list, --gemm-bucket B, --no-gelu-fuse) select a
 * kernel configuration or measurement option for every backend it creates; without them the
 * tower runs the production path. The backend says on stderr what its settings resolved to
 * (mv_backend_settings).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "mv_cuda.cuh"
#include "variants/variants.cuh"
extern "C" {
#include "mv_backend.h"
#include "mv_model.h"
#include "mv_npy.h"
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

static int parse_grid(const char *s, std::vector<int32_t> *g)
{
    while (*s) {
        int t, h, w, used = 0;
        if (sscanf(s, "%d,%d,%d%n", &t, &h, &w, &used) != 3) return -1;
        g->push_back(t);
        g->push_back(h);
        g->push_back(w);
        s += used;
        if (*s == ';') s++;
        else if (*s) return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *dir;
} dump_ctx;
static mv_status save_stage(void *ud, const char *stage, const float *data, int64_t rows, int64_t cols,
                            mv_err *e)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.npy", ((dump_ctx *)ud)->dir, stage);
    int64_t shape[2] = {rows, cols};
    return mv_npy_save(path, MV_DT_F32, 2, shape, data, e);
}

static int die(const char *what, const mv_err *e)
{
    fprintf(stderr, "mvtower: %s: %s\n", what, e->msg);
    return 1;
}

static int gemm_peak(void)
{
    const int n = 8192;
    cudaStream_t st;
    cudaStreamCreate(&st);
    mv_gemm *g;
    mv_err e;
    if (mv_gemm_create(&g, MV_GEMM_BF16, st, &e)) return die("gemm", &e);
    std::vector<float> h((size_t)n * n);
    uint64_t r = 88172645463325252ull;
    for (auto &v : h) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        v = (float)((r >> 40) * (1.0 / 16777216.0)) - 0.5f;
    }
    float *tmp;
    bf16 *a, *b, *c;
    if (cudaMalloc(&tmp, h.size() * 4) || cudaMalloc(&a, h.size() * 2) || cudaMalloc(&b, h.size() * 2) ||
        cudaMalloc(&c, h.size() * 2)) {
        fprintf(stderr, "mvtower: gemm-peak: cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(tmp, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    mv_cuda_from_f32<bf16>(a, tmp, (int64_t)h.size(), st);
    for (auto &v : h) v = -v * 0.75f;
    cudaMemcpy(tmp, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    mv_cuda_from_f32<bf16>(b, tmp, (int64_t)h.size(), st);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<double> ts;
    for (int i = 0; i < 25; i++) {
        cudaEventRecord(e0, st);
        if (mv_gemm_run(g, c, a, b, NULL, n, n, n, MV_EPI_NONE, 0, &e)) return die("gemm", &e);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 5) ts.push_back(ms * 1e-3);
    }
    std::sort(ts.begin(), ts.end());
    double med = ts[ts.size() / 2];
    cudaError_t err = cudaGetLastError();
    printf("{\"what\": \"gemm_peak\", \"m\": %d, \"n\": %d, \"k\": %d, \"median_s\": %.6e, "
           "\"tflops\": %.1f, \"status\": \"%s\"}\n",
           n, n, n, med, 2.0 * n * n * (double)n / med / 1e12, cudaGetErrorString(err));
    mv_gemm_destroy(g);
    cudaFree(tmp); cudaFree(a); cudaFree(b); cudaFree(c);
    return err != cudaSuccess;
}

/* --backend cpu|cuda (anything but "cpu" is cuda) */
static mv_status make_backend(const char *backend, const mv_model *m, const mv_backend_opts *o, mv_backend **b,
                              mv_err *e)
{
    return !strcmp(backend, "cpu") ? mv_backend_cpu_create(m, o, b, e) : mv_backend_cuda_create(m, o, b, e);
}

/* ---- bench ------------------------------------------------------------------------------ */
typedef struct {
    int iters, warm, inflight, u8, vary;
    double src_scale; /* > 0: u8 frames of source size (the grid's size x this), resized on the device */
} bench_opts;

/* The pipeline's turns (src/run/towers.c dev_busy): forwards on one device queue their device work
 * one at a time, in ticket order, and give the turn back as soon as their work is queued
 * (mv_forward_req.queued), so the next forward's upload and kernels queue behind it. */
struct bench_turns {
    std::mutex mu;
    std::condition_variable cv;
    unsigned long ticket = 0, serving = 0;
};
struct bench_turn {
    bench_turns *t;
    int given;
};
static void bench_turn_give(void *arg)
{
    bench_turn *tn = (bench_turn *)arg;
    if (tn->given) return;
    tn->given = 1;
    std::lock_guard<std::mutex> lk(tn->t->mu);
    tn->t->serving++;
    tn->t->cv.notify_all();
}
static void bench_turn_take(bench_turns *t)
{
    std::unique_lock<std::mutex> lk(t->mu);
    unsigned long me = t->ticket++;
    t->cv.wait(lk, [&] { return t->serving == me; });
}

/* One forward of backend b in its turn: pixels (f32 rows) or frames (uint8). */
static mv_status bench_forward(mv_backend *b, bench_turns *turns, const float *pix, const uint8_t *frames,
                               const int32_t *n_frames, const int32_t *src_size, const std::vector<int32_t> &grid,
                               int n_entries, float *dst, mv_err *e)
{
    bench_turn tn = {turns, 0};
    mv_forward_req req = {};
    req.pixels = frames ? NULL : pix;
    req.frames = frames;
    req.n_frames = n_frames;
    req.src_size = src_size;
    req.grid = grid.data();
    req.n_entries = n_entries;
    req.out = dst;
    req.queued = bench_turn_give;
    req.queued_arg = &tn;
    bench_turn_take(turns);
    mv_status st = b->forward(b, &req, NULL, e);
    bench_turn_give(&tn);
    return st;
}

/* mvtower bench: whole forwards of the batch, host to host, as one JSON line.
 *   --input f32 (default): the packed pixel_values (mv_forward_req.pixels), as HF is given them;
 *   --input u8: random uint8 frames of the grid's sizes (mv_forward_req.frames: what the CLI's
 *     pipeline sends; the backend normalises and patchifies them, 8x fewer bytes over the bus);
 *   --inflight K (default 1): K backends on the device, each forwarding the batch from its own
 *     thread and taking turns as the pipeline's tower threads do (the CLI's default is 2), so
 *     one forward's upload and download overlap another's kernels. median_s is then the wall
 *     time of all timed forwards over their number (the steady-state time per batch), not a
 *     median of single forwards; each thread's warm-up forwards run before the clock starts.
 *   --vary V (default 1): a thread's i-th forward takes the first n_entries - i % V entries, so
 *     that the patch count changes from forward to forward as in the CLI's packed forwards (new
 *     shapes for the GEMM plans and the attention's tiles); median_s is then the time per N
 *     patches (each forward's time scaled by N over its patches; with --inflight, all timed
 *     forwards' wall time over their patches).
 *   --src-scale F (with --input u8, 1 <= F <= 2): each entry's frames are of a source size, its
 *     grid's size x F rounded (w and h), and the backend resizes them on the device first
 *     (mv_forward_req.src_size, cu/resize.cu), as the CLI's forwards of decoded images do; F = 1
 *     takes the resizer's copy path (equal sizes).
 * Host buffers come from the backend's host_alloc (page-locked for CUDA), as the CLI's staging
 * buffers and output slabs do; pageable memory ("pinned": false) where the backend has none. */
static int bench(mv_backend *b0, const mv_model *m, const mv_backend_opts *o, const char *backend,
                 const float *pixels, const std::vector<int32_t> &grid, int n_entries, int64_t N,
                 const bench_opts *bo, const char *prec, const char *attn_s, std::vector<float> *out)
{
    const mv_vision_config *c = &m->cfg;
    const int mm = c->merge * c->merge, K = bo->inflight;
    mv_err e;
    std::vector<mv_backend *> bs(1, b0);
    mv_backend_opts ok = *o;
    ok.weights_from = b0; /* as the CLI's backends on one device: one copy of the weights */
    for (int k = 1; k < K; k++) {
        mv_backend *bk;
        if (make_backend(backend, m, &ok, &bk, &e)) {
            for (int j = 1; j < k; j++) bs[j]->destroy(bs[j]);
            return die("backend (--inflight)", &e);
        }
        bs.push_back(bk);
    }
    /* inputs: shared by all threads (read only); one output per thread */
    std::vector<int32_t> n_frames((size_t)n_entries), src((size_t)(bo->src_scale > 0 ? 2 * n_entries : 0));
    size_t in_bytes = (size_t)N * c->patch_dim * sizeof(float);
    if (bo->u8) {
        in_bytes = 0;
        for (int i = 0; i < n_entries; i++) {
            n_frames[i] = grid[3 * i] * c->temporal; /* whole temporal groups: no repeated last frame */
            int64_t fw = grid[3 * i + 2] * c->patch, fh = grid[3 * i + 1] * c->patch;
            if (bo->src_scale > 0) {
                src[2 * i] = (int32_t)lround(fw * bo->src_scale);
                src[2 * i + 1] = (int32_t)lround(fh * bo->src_scale);
                fw = src[2 * i];
                fh = src[2 * i + 1];
            }
            in_bytes += (size_t)n_frames[i] * fh * fw * 3;
        }
    }
    const int32_t *src_size = src.empty() ? NULL : src.data();
    const size_t out_bytes = out->size() * sizeof(float);
    void *hin = b0->host_alloc ? b0->host_alloc(b0, in_bytes) : NULL;
    std::vector<float *> hout((size_t)K, (float *)NULL);
    int pinned = hin != NULL;
    for (int k = 0; k < K && pinned; k++) {
        hout[k] = (float *)bs[k]->host_alloc(bs[k], out_bytes);
        pinned = hout[k] != NULL;
    }
    /* pageable: the frames in a vector of their own, the pixels where they were loaded */
    std::vector<uint8_t> pg_in(pinned || !bo->u8 ? 0 : in_bytes);
    std::vector<std::vector<float>> pg_out(pinned ? 0 : (size_t)K, std::vector<float>(out->size()));
    void *in = pinned ? hin : bo->u8 ? (void *)pg_in.data() : (void *)pixels;
    if (bo->u8) { /* xorshift bytes: any frame content costs the same */
        uint64_t r = 88172645463325252ull;
        uint8_t *u = (uint8_t *)in;
        for (size_t i = 0; i < in_bytes; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            u[i] = (uint8_t)(r >> 56);
        }
    } else if (pinned) {
        memcpy(in, pixels, in_bytes);
    }
    const float *pix = bo->u8 ? NULL : (const float *)in;
    const uint8_t *frames = bo->u8 ? (const uint8_t *)in : NULL;
    /* --vary: forward i of a thread takes the first take(i) entries, patches[k] in the first k */
    std::vector<int64_t> patches((size_t)n_entries + 1, 0);
    for (int i = 0; i < n_entries; i++)
        patches[i + 1] = patches[i] + (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    auto take = [&](int i) { return n_entries - i % bo->vary > 0 ? n_entries - i % bo->vary : 1; };
    std::vector<int64_t> done_patches((size_t)K, 0);
    bench_turns turns;
    std::vector<double> ts;            /* inflight 1: each timed forward */
    std::vector<double> t_end((size_t)K, 0.0);
    std::vector<int> krc((size_t)K, 0);
    double t_start = 0;
    if (K == 1) {
        float *dst = pinned ? hout[0] : pg_out[0].data();
        for (int i = 0; i < bo->warm + bo->iters && !krc[0]; i++) {
            const int k = take(i);
            double t0 = now_s();
            if (bench_forward(b0, &turns, pix, frames, n_frames.data(), src_size, grid, k, dst, &e))
                krc[0] = die("forward", &e);
            if (i >= bo->warm) ts.push_back((now_s() - t0) * (double)N / (double)patches[k]);
        }
    } else {
        /* warm-up in every thread, then the clock, then each thread's timed forwards */
        std::mutex bar_mu;
        std::condition_variable bar_cv;
        int arrived = 0;
        std::vector<std::thread> th;
        for (int k = 0; k < K; k++)
            th.emplace_back([&, k] {
                mv_err ek;
                float *dst = pinned ? hout[k] : pg_out[k].data();
                for (int i = 0; i < bo->warm && !krc[k]; i++)
                    if (bench_forward(bs[k], &turns, pix, frames, n_frames.data(), src_size, grid, take(i), dst, &ek))
                        krc[k] = die("forward", &ek);
                {
                    std::unique_lock<std::mutex> lk(bar_mu);
                    if (++arrived == K) {
                        t_start = now_s();
                        bar_cv.notify_all();
                    } else {
                        bar_cv.wait(lk, [&] { return arrived == K; });
                    }
                }
                for (int i = bo->warm; i < bo->warm + bo->iters && !krc[k]; i++) {
                    const int n = take(i);
                    if (bench_forward(bs[k], &turns, pix, frames, n_frames.data(), src_size, grid, n, dst, &ek))
                        krc[k] = die("forward", &ek);
                    done_patches[k] += patches[n];
                }
                t_end[k] = now_s();
            });
        for (auto &t : th) t.join();
        double wall = *std::max_element(t_end.begin(), t_end.end()) - t_start;
        int64_t all = 0;
        for (int64_t p : done_patches) all += p;
        ts.assign(1, all > 0 ? wall * (double)N / (double)all : wall);
    }
    int rc = *std::max_element(krc.begin(), krc.end());
    memcpy(out->data(), pinned ? hout[0] : pg_out[0].data(), out_bytes);
    if (hin) b0->host_free(b0, hin);
    for (int k = 0; k < K; k++)
        if (hout[k]) bs[k]->host_free(bs[k], hout[k]);
    for (int k = 1; k < K; k++) bs[k]->destroy(bs[k]);
    if (rc) return rc;
    std::sort(ts.begin(), ts.end());
    double med = ts[ts.size() / 2];
    /* work: every GEMM, and attention's two products over the real head dim */
    int64_t H = c->hidden, I = c->inter, L = c->out_hidden, P = c->patch_dim;
    double gemm = 2.0 * N * (P * H + c->depth * (4.0 * H * H + 2.0 * H * I)) +
                  2.0 * (N / mm) * (mm * H * (double)mm * H + mm * H * (double)L);
    double attn = 0;
    for (int i = 0; i < n_entries; i++) {
        double len = (double)grid[3 * i + 1] * grid[3 * i + 2];
        attn += grid[3 * i] * 4.0 * len * len * H * c->depth;
    }
    double fin = 0;
    for (float v : *out) fin += isfinite(v) ? 0 : 1;
    printf("{\"what\": \"mvembed\", \"precision\": \"%s\", \"attention\": \"%s\", \"input\": \"%s\", "
           "\"inflight\": %d, \"vary\": %d, \"src_scale\": %.3f, \"entries\": %d, \"tokens\": %lld, "
           "\"iters\": %d, \"median_s\": %.6f, \"min_s\": %.6f, \"tokens_per_s\": %.1f, "
           "\"images_per_s\": %.2f, \"gemm_flop\": %.4e, \"attn_flop\": %.4e, \"tflops\": %.1f, "
           "\"nonfinite\": %.0f, \"pinned\": %s}\n",
           prec, attn_s, bo->u8 ? "u8" : "f32", K, bo->vary, bo->src_scale, n_entries, (long long)N, bo->iters, med,
           ts[0], N / med, n_entries / med, gemm, attn, (gemm + attn) / med / 1e12, fin, pinned ? "true" : "false");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mvtower run|bench|gemm-peak [options] (see the file's header)\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (mv_variants_args(argc, argv)) return 2;
    if (!strcmp(cmd, "gemm-peak")) return gemm_peak();
    const char *mdir = arg(argc, argv, "--model", NULL), *ppath = arg(argc, argv, "--pixels", NULL);
    const char *gs = arg(argc, argv, "--grid", NULL);
    const char *prec = arg(argc, argv, "--precision", "bf16");
    const char *backend = arg(argc, argv, "--backend", "cuda");
    if (!mdir || !ppath || !gs) {
        fprintf(stderr, "mvtower: --model, --pixels and --grid are required\n");
        return 2;
    }
    std::vector<int32_t> grid;
    if (parse_grid(gs, &grid) || grid.empty()) {
        fprintf(stderr, "mvtower: bad --grid '%s'\n", gs);
        return 2;
    }
    mv_err e;
    mv_model *m;
    if (mv_model_load(mdir, &m, &e)) return die("model", &e);
    mv_array pa;
    if (mv_npy_load_f32(ppath, &pa, &e)) return die("pixels", &e);
    int n_entries = (int)grid.size() / 3;
    int64_t N;
    if (mv_grid_check(&m->cfg, grid.data(), n_entries, &N, &e)) return die("grid", &e);
    if (pa.ndim != 2 || pa.shape[0] != N || pa.shape[1] != m->cfg.patch_dim) {
        fprintf(stderr, "mvtower: pixels shape does not match the grid (%lld rows expected)\n", (long long)N);
        return 2;
    }
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.precision = !strcmp(prec, "f32") ? MV_PREC_F32 : !strcmp(prec, "tf32") ? MV_PREC_TF32 : MV_PREC_BF16;
    o.batch_tokens = atoll(arg(argc, argv, "--batch-tokens", "0"));
    const char *attn_s = arg(argc, argv, "--attention", "auto");
    o.attention = !strcmp(attn_s, "cudnn")     ? MV_ATTN_CUDNN
                  : !strcmp(attn_s, "builtin") ? MV_ATTN_BUILTIN
                  : !strcmp(attn_s, "fa3")     ? MV_ATTN_FA3
                                               : MV_ATTN_AUTO;
    const char *res = arg(argc, argv, "--cuda-residual", "f32"), *graph = arg(argc, argv, "--cudnn-graph", "auto");
    if ((strcmp(res, "f32") && strcmp(res, "bf16")) || (strcmp(graph, "auto") && strcmp(graph, "ragged"))) {
        fprintf(stderr, "mvtower: --cuda-residual f32|bf16, --cudnn-graph auto|ragged (the CLI's options)\n");
        return 2;
    }
    o.residual = !strcmp(res, "bf16") ? MV_RESIDUAL_BF16 : MV_RESIDUAL_F32;
    o.cudnn_graph = !strcmp(graph, "ragged") ? MV_CUDNN_GRAPH_RAGGED : MV_CUDNN_GRAPH_AUTO;
    o.cudnn_lib = getenv("MV_CUDNN_LIB"); /* as the CLI */
    o.verbose = 1; /* stderr: which attention ran */
    mv_backend *b;
    if (make_backend(backend, m, &o, &b, &e)) return die("backend", &e);
    const mv_vision_config *c = &m->cfg;
    int mm = c->merge * c->merge;
    std::vector<float> out((size_t)(N / mm * c->out_hidden));
    int rc = 0;
    if (!strcmp(cmd, "run")) {
        dump_ctx dc = {arg(argc, argv, "--out", ".")};
        double t0 = now_s();
        mv_forward_req req = {};
        req.pixels = (const float *)pa.data;
        req.grid = grid.data();
        req.n_entries = n_entries;
        req.out = out.data();
        req.dump = save_stage;
        req.dump_ud = &dc;
        if (b->forward(b, &req, NULL, &e))
            rc = die("forward", &e);
        else
            fprintf(stderr, "mvtower: %s %s forward of %lld patches in %.3f s (with dumps)\n", backend,
                    prec, (long long)N, now_s() - t0);
    } else if (!strcmp(cmd, "bench")) {
        bench_opts bo;
        bo.iters = atoi(arg(argc, argv, "--iters", "10"));
        bo.warm = atoi(arg(argc, argv, "--warmup", "2"));
        bo.inflight = atoi(arg(argc, argv, "--inflight", "1"));
        bo.vary = atoi(arg(argc, argv, "--vary", "1"));
        bo.src_scale = atof(arg(argc, argv, "--src-scale", "0"));
        const char *input = arg(argc, argv, "--input", "f32");
        bo.u8 = !strcmp(input, "u8");
        if ((!bo.u8 && strcmp(input, "f32")) || bo.iters < 1 || bo.warm < 0 || bo.inflight < 1 ||
            bo.inflight > 8 || bo.vary < 1 || (bo.src_scale != 0 && (bo.src_scale < 1 || bo.src_scale > 2))) {
            fprintf(stderr, "mvtower: bench wants --input f32|u8, --iters >= 1, --warmup >= 0, --inflight 1..8, "
                            "--vary >= 1, --src-scale 1..2\n");
            rc = 2;
        } else if (bo.src_scale > 0 && (!bo.u8 || !b->resizes)) {
            fprintf(stderr, "mvtower: --src-scale needs --input u8 and a backend that resizes (cuda)\n");
            rc = 2;
        } else {
            rc = bench(b, m, &o, backend, (const float *)pa.data, grid, n_entries, N, &bo, prec, attn_s, &out);
        }
    } else {
        fprintf(stderr, "mvtower: unknown command %s\n", cmd);
        rc = 2;
    }
    b->destroy(b);
    mv_array_free(&pa);
    mv_model_free(m);
    return rc;
}
