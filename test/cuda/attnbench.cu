/* attnbench.cu - kernel-level attention benchmark on the GPU machine: the builtin bf16 kernel
 * (cu/attention.cu, both variants), cuDNN's fused flash attention (cu/attention_cudnn.cu) and the
 * Hopper wgmma kernel (cu/attention_fa3.cu: the table's configuration as row "fa3", and rows that
 * change one thing in it; only on compute capability 9.0, and not with --no-fa3) on the tower's
 * shapes: head dim 72 and 64, 16 heads, segments 64 x 784, 16 x 4096, 16 x 7600 (1600x1200
 * photos), 4 x 8160, 1 x 16384 (one 2048² image: fa3 splits its last wave's items, fa3_nosplit
 * does not), 1 x 47376, q|k|v read from
 * one packed [n, 3*16*D] bf16 buffer of random values. Times with CUDA events, median of --iters
 * (default 20) after 3 warm-ups (cuDNN's plan is built in the first, timed apart as plan_s); work
 * = sum over segments of 4 * S^2 * D * heads. Prints one JSON line per (impl, D, shape) and a
 * table at the end. Also checks that they agree (rel L2 of cuDNN and of fa3 vs builtin, bf16
 * budget) so a fast wrong answer shows. Not a test: the twin tests are in test_cuda_ops and
 * test_fa3. Linked against the variants build (test/cuda/variants/variants.cuh).
 * Usage: attnbench [--iters N] [--no-fa3] [--only IMPL,IMPL...] [--shape NxL] [--dim D] [--reverse]
 * [--rest MS] [--fa3-row NAME=SPEC]... [--cudnn-graph auto|ragged] (cuDNN from MV_CUDNN_LIB, as
 * the CLI finds it; --shape, --dim: that shape / head dim alone; --reverse:
 * the rows in the opposite order, --rest: an idle pause before each row: a card that slows down
 * as it heats makes a row that follows heavy ones look slower, so compare both orders; --only:
 * those rows and builtin_v2, the agreement check's reference; --fa3-row: one more fa3 row, NAME
 * fa3_[a-z0-9_]*, SPEC the fields it changes in the table's configuration, as mvtower's --fa3:
 * "bn=128,sw=0", "split=0", ...) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mv_cuda.cuh"
#include "qscale.cuh"
#include "variants/variants.cuh"

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t r_ = (x);                                                                      \
        if (r_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "attnbench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int nseg, len;
} shape;

/* one row of the table: kind 0 builtin (ver: its variant), 1 cudnn, 2 fa3 version 1, 3 fa3, the
 * table's configuration with spec's fields (mv_variants_spec) */
struct impl {
    std::string name;
    int kind, ver;
    std::string spec;
};

int main(int argc, char **argv)
{
    int iters = 20, fa3 = 1;
    char only[512] = ""; /* ",a,b," when --only a,b */
    const char *only_shape = NULL;
    int only_dim = 0, reverse = 0, rest_ms = 0, ragged = 0;
    /* the fa3 rows change one thing in the table's configuration; "fa3" (the table's) runs last,
     * and the agreement check reads the last fa3 row run */
    std::vector<impl> impls = {
        {"builtin_v2", 0, 2, ""},  {"builtin_v1", 0, 1, ""},  {"cudnn", 1, 0, ""},
        {"fa3_v1", 2, 0, "bn=128"}, {"fa3_wg2", 3, 0, "wg=2"}, {"fa3_wg2_qr1", 3, 0, "wg=2,qr=1"},
        {"fa3_sw0", 3, 0, "sw=0"},  {"fa3_bn112", 3, 0, "bn=112"}, {"fa3_bn128", 3, 0, "bn=128"},
        {"fa3_ps0", 3, 0, "ps=0"},  {"fa3_st3", 3, 0, "st=3"}, {"fa3_rm8", 3, 0, "rm=8"},
        {"fa3_nosplit", 3, 0, "split=0"},
    };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fa3-row") && i + 1 < argc) {
            const char *eq = strchr(argv[i + 1], '=');
            std::string nm = eq ? std::string(argv[i + 1], (size_t)(eq - argv[i + 1])) : "";
            mv_fa3_cfg c;
            int sp;
            if (!eq || nm.compare(0, 4, "fa3_") || nm.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                                                           std::string::npos || mv_variants_spec(eq + 1, &c, &sp)) {
                fprintf(stderr, "attnbench: bad --fa3-row %s (NAME=SPEC, NAME fa3_[a-z0-9_]*)\n", argv[i + 1]);
                return 2;
            }
            impls.push_back(impl{nm, 3, 0, eq + 1});
        }
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--no-fa3")) fa3 = 0;
        if (!strcmp(argv[i], "--only") && i + 1 < argc) snprintf(only, sizeof only, ",%s,", argv[i + 1]);
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[i + 1];
        if (!strcmp(argv[i], "--dim") && i + 1 < argc) only_dim = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--reverse")) reverse = 1;
        if (!strcmp(argv[i], "--cudnn-graph") && i + 1 < argc) ragged = !strcmp(argv[i + 1], "ragged");
        if (!strcmp(argv[i], "--rest") && i + 1 < argc) rest_ms = atoi(argv[i + 1]);
    }
    impls.push_back(impl{"fa3", 3, 0, ""}); /* the table's: last */
    if (iters < 1) iters = 1;
    const int heads = 16;
    const shape shapes[] = {{64, 784}, {16, 4096}, {16, 7600}, {4, 8160}, {1, 16384}, {1, 47376}};
    const int dims[] = {72, 64};
    CU(cudaSetDevice(0));
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    mv_attn_state as;
    mv_cuda_attn_state_init(&as, 0);
    mv_fa3_device dev;
    CU(mv_cuda_fa3_device(0, &dev));
    if (fa3) {
        mv_err fe;
        if (mv_cuda_fa3_check(&dev, 72, &fe) != MV_OK) {
            printf("{\"what\": \"attn\", \"impl\": \"fa3\", \"error\": \"%s\"}\n", fe.msg);
            fa3 = 0;
        }
    }
    char table[65536] = "";
    size_t tl = 0;
    tl += snprintf(table + tl, sizeof table - tl, "%-12s %4s %-10s %10s %9s %9s\n", "impl", "D", "segments",
                   "median_ms", "TFLOP/s", "plan_s");
    int rc = 0;
    for (int D : dims) {
        if (only_dim && D != only_dim) continue;
        mv_cudnn_attn *dnn = NULL;
        mv_err e;
        if (mv_cudnn_attn_create(&dnn, 0, heads, D, st, getenv("MV_CUDNN_LIB"), ragged, &e) != MV_OK) {
            printf("{\"what\": \"attn\", \"impl\": \"cudnn\", \"D\": %d, \"error\": \"%s\"}\n", D, e.msg);
            dnn = NULL;
        }
        for (const shape &sh : shapes) {
            char shname[32];
            snprintf(shname, sizeof shname, "%dx%d", sh.nseg, sh.len);
            if (only_shape && strcmp(only_shape, shname)) continue;
            int64_t n = (int64_t)sh.nseg * sh.len, H = (int64_t)heads * D;
            std::vector<int32_t> cu((size_t)sh.nseg + 1);
            for (int i = 0; i <= sh.nseg; i++) cu[(size_t)i] = i * sh.len;
            double flop = 4.0 * sh.len * (double)sh.len * D * heads * sh.nseg;
            /* random bf16 qkv, never zeros (METHOD.md) */
            std::vector<float> h((size_t)(n * 3 * H));
            uint64_t r = 0x2545F4914F6CDD1Dull ^ (uint64_t)(D * 131 + sh.len);
            for (auto &v : h) {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                v = ((float)((r >> 40) * (1.0 / 16777216.0)) - 0.5f) * 4.f;
            }
            float *tmp;
            bf16 *qkv, *o1, *o2, *o3, *qkv_s = NULL;
            CU(cudaMalloc(&tmp, h.size() * 4));
            CU(cudaMalloc(&qkv, h.size() * 2));
            CU(cudaMalloc(&o1, (size_t)(n * H) * 2));
            CU(cudaMalloc(&o2, (size_t)(n * H) * 2));
            CU(cudaMalloc(&o3, (size_t)(n * H) * 2));
            CU(cudaMemcpy(tmp, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
            CU(mv_cuda_from_f32<bf16>(qkv, tmp, (int64_t)h.size(), st));
            CU(cudaStreamSynchronize(st));
            /* tile lists of 128 query rows (builtin, fa3 with 2 consumer warpgroups) and 192 (3) */
            /* and [2]: 192 rows with the tail kernel's tiles last (mv_cuda_fa3_tails with it on), for
             * a row with tl=1; the others run the lists production builds */
            int ntl[3], ntail = 0;
            mv_attn_tile *dtl[3];
            std::vector<mv_attn_tile> htl[3];
            for (int w = 0; w < 3; w++) {
                const int bm = w ? 192 : MV_ATTN_BM_BF16;
                ntl[w] = mv_attn_tile_count(cu.data(), sh.nseg, bm);
                std::vector<mv_attn_tile> &tiles = htl[w];
                tiles.resize((size_t)ntl[w]);
                mv_attn_tiles(tiles.data(), cu.data(), sh.nseg, bm);
                mv_fa3_cfg tc;
                if (w == 2 && fa3 && !mv_cuda_fa3_config(&dev, D, cu.data(), sh.nseg, &tc)) {
                    tc.tails = 1;
                    ntail = mv_cuda_fa3_tails(&dev, &tc, tiles.data(), ntl[w], heads);
                }
                CU(cudaMalloc(&dtl[w], (size_t)ntl[w] * sizeof(mv_attn_tile)));
                CU(cudaMemcpy(dtl[w], tiles.data(), (size_t)ntl[w] * sizeof(mv_attn_tile), cudaMemcpyHostToDevice));
            }
            const int n_impls = (int)impls.size();
            for (int ii = 0; ii < n_impls; ii++) {
                const impl &im = impls[(size_t)(reverse ? n_impls - 1 - ii : ii)];
                if (im.kind == 1 && !dnn) continue;
                if (im.kind >= 2 && !fa3) continue;
                const char *name = im.name.c_str();
                char key[64];
                snprintf(key, sizeof key, ",%s,", name);
                if (only[0] && strcmp(name, "builtin_v2") && !strstr(only, key)) continue;
                mv_variants.attn_variant = im.kind == 0 ? im.ver : 2;
                /* fa3: the table's configuration for these segments, the row's fields over it */
                mv_fa3_cfg cfg = {2, 128, 0, 0, 0, 2, 0, 0, 0}, over;
                int split = 0, sp = -1;
                mv_fa3_plan plan;
                float *part = NULL;
                if (im.kind == 3) {
                    mv_variants_spec(im.spec.c_str(), &over, &sp);
                    mv_cuda_fa3_config(&dev, D, cu.data(), sh.nseg, &cfg);
                    mv_variants_apply(&cfg, &over);
                } else if (im.kind == 2) {
                    mv_variants_spec(im.spec.c_str(), &over, &sp);
                    cfg.keys = over.keys;
                }
                const int w = im.kind == 3 && mv_cuda_fa3_bm(&cfg) == 192 ? (cfg.tails && ntail ? 2 : 1) : 0;
                mv_attn_tile *dt = dtl[w];
                const int nt = ntl[w];
                if (im.kind == 3) {
                    const int tail = w == 2 ? ntail : 0; /* as the tower's plan_fa3 */
                    split = sp >= 0 ? (sp < nt * heads ? sp : nt * heads)
                                    : mv_cuda_fa3_split(&dev, &cfg, D, htl[w].data(), nt - tail, heads);
                    mv_cuda_fa3_plan(&dev, &cfg, D, nt, heads, split, tail, &plan);
                    if (plan.part_bytes) CU(cudaMalloc(&part, plan.part_bytes));
                    if (plan.q_scale != 1.f) { /* the plan wants q pre-scaled: a copy, made untimed */
                        if (!qkv_s) CU(cudaMalloc(&qkv_s, h.size() * 2));
                        CU(test_scale_q(qkv_s, qkv, n, heads, D, plan.q_scale, st));
                        CU(cudaStreamSynchronize(st));
                    }
                }
                const bf16 *qkv3 = im.kind == 3 && plan.q_scale != 1.f ? qkv_s : qkv;
                bf16 *o = im.kind == 1 ? o2 : im.kind >= 2 ? o3 : o1;
                double plan_s = 0;
                mv_status ms = MV_OK;
                if (im.kind == 1) {
                    double t0 = now_s();
                    ms = mv_cudnn_attn_prepare(dnn, 0, cu.data(), sh.nseg, st, &e);
                    if (ms == MV_OK) ms = mv_cudnn_attn_run(dnn, 0, o, qkv, &e);
                    CU(cudaStreamSynchronize(st));
                    plan_s = now_s() - t0;
                }
                if (rest_ms > 0) usleep((useconds_t)rest_ms * 1000u);
                std::vector<float> ts;
                for (int it = 0; ms == MV_OK && it < iters + 3; it++) {
                    CU(cudaEventRecord(e0, st));
                    if (im.kind == 1) ms = mv_cudnn_attn_run(dnn, 0, o, qkv, &e);
                    else if (im.kind == 3)
                        CU(mv_cuda_attention_fa3(&as, &plan, part, plan.part_bytes, o, qkv3, n, dt, nt, heads, D, st));
                    else if (im.kind == 2) CU(mv_cuda_attention_fa3_v1(&as, o, qkv, dt, nt, heads, D, cfg.keys, st));
                    else CU(mv_cuda_attention_bf16(&as, o, qkv, dt, nt, heads, D, st));
                    CU(cudaEventRecord(e1, st));
                    CU(cudaEventSynchronize(e1));
                    float ms_;
                    CU(cudaEventElapsedTime(&ms_, e0, e1));
                    if (it >= 3) ts.push_back(ms_);
                }
                if (part) CU(cudaFree(part));
                if (ms != MV_OK) {
                    printf("{\"what\": \"attn\", \"impl\": \"%s\", \"D\": %d, \"segments\": \"%dx%d\", "
                           "\"error\": \"%s\"}\n", name, D, sh.nseg, sh.len, e.msg);
                    rc = 1;
                    continue;
                }
                std::sort(ts.begin(), ts.end());
                double med = ts[ts.size() / 2] * 1e-3;
                printf("{\"what\": \"attn\", \"impl\": \"%s\", \"D\": %d, \"heads\": %d, \"segments\": \"%dx%d\", "
                       "\"median_s\": %.6e, \"min_s\": %.6e, \"tflops\": %.1f, \"plan_s\": %.3f}\n",
                       name, D, heads, sh.nseg, sh.len, med, ts[0] * 1e-3, flop / med / 1e12, plan_s);
                char seg[32];
                snprintf(seg, sizeof seg, "%dx%d", sh.nseg, sh.len);
                tl += snprintf(table + tl, sizeof table - tl, "%-12s %4d %-10s %10.3f %9.1f %9.3f\n", name, D,
                               seg, med * 1e3, flop / med / 1e12, plan_s);
            }
            /* the implementations compute the same function: cuDNN's and fa3's (the last fa3 row
             * run) output against the builtin kernel's (the last builtin row run) */
            for (int which = 0; which < 2; which++) {
                if (which == 0 ? !dnn : !fa3) continue;
                std::vector<float> a((size_t)(n * H)), b((size_t)(n * H));
                CU(mv_cuda_to_f32<bf16>(tmp, o1, n * H, st));
                CU(cudaMemcpyAsync(a.data(), tmp, a.size() * 4, cudaMemcpyDeviceToHost, st));
                CU(mv_cuda_to_f32<bf16>(tmp, which == 0 ? o2 : o3, n * H, st));
                CU(cudaMemcpyAsync(b.data(), tmp, b.size() * 4, cudaMemcpyDeviceToHost, st));
                CU(cudaStreamSynchronize(st));
                double d2 = 0, r2 = 0;
                long bad = 0;
                for (size_t i = 0; i < a.size(); i++) {
                    if (!isfinite(b[i])) bad++;
                    else d2 += (double)(b[i] - a[i]) * (b[i] - a[i]);
                    r2 += (double)a[i] * a[i];
                }
                double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
                printf("{\"what\": \"attn_agree\", \"D\": %d, \"segments\": \"%dx%d\", \"rel_l2_%s_vs_builtin\": %.3e, "
                       "\"nonfinite\": %ld}\n", D, sh.nseg, sh.len, which == 0 ? "cudnn" : "fa3", rel, bad);
                if (bad || rel > 1e-2) rc = 1;
            }
            cudaFree(tmp);
            cudaFree(qkv);
            if (qkv_s) cudaFree(qkv_s);
            cudaFree(o1);
            cudaFree(o2);
            cudaFree(o3);
            for (int w = 0; w < 3; w++) cudaFree(dtl[w]);
        }
        mv_cudnn_attn_destroy(dnn);
    }
    printf("%s", table);
    return rc;
}
