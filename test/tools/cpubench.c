/* cpubench - times the CPU tower alone (model load excluded) and, beside it, the tower's Linear
 * GEMMs alone: the same shapes and weights through the tower's own GEMM path (mv_gemm_cpu.h:
 * oneDNN against packed weights, or OpenBLAS in a NO_DNNL build; N threads, each multiplying its
 * own block of rows cut as the tower cuts them), and with --blas also plain cblas_sgemm with
 * OpenBLAS's own thread pool at the same thread count (the way numpy would run them; slow where
 * OpenBLAS runs generic kernels). Not a test; scripts/bench-cpu.sh runs it.
 *   cpubench --model DIR --grid "t,h,w[;t,h,w...]" [--pixels P.npy] [-j N] [--iters K]
 *            [--what tower|gemm|both] [--blas 1] [--out OUT.npy] [--cpu-gemm f32|bf16x6|auto]
 * Pixels: P.npy [n_patches, patch_dim] f32, or (without --pixels) uniform [-1, 1) from a fixed
 * LCG. One warm-up run, then K runs; with --what both the tower and the GEMMs alternate, so that
 * both see the same load. Prints "tower S" / "gemm S" / "gemm_blas S" (median, seconds),
 * "tower_min S" / "gemm_min S" / "gemm_blas_min S" (fastest run), the GEMM library and the GEMMs'
 * TFLOP. --out saves the tower's output [tokens, L] (to compare -j runs byte for byte).
 * --cpu-gemm: the Linear layers' GEMM mode of the tower and of the GEMMs alone (mv_gemm_cpu.h;
 * default f32), printed as "gemm_lib oneDNN 2.6.3 bf16x6 (brg:...)"; gemm_tflop counts f32 flop
 * (bf16x6 runs 6x as many bf16 ones).
 *   cpubench --model DIR --grid G --what attn [--qkv QKV.npy] [-j N] [--iters K] [--out O.npy]
 *            [--cpu-gemm f32|bf16x6|auto]
 * times attention alone (mv_attention_cpu_gemm, the tower's attention with its head split, N
 * threads, its products on the f32 sgemm (the tower's path) or, with bf16x6, on AMX: linked
 * against the variants build of attention_cpu.c, which has that path)
 * on the grid's segments (one per frame of an entry: h x w patches) with the model's heads and
 * head_dim: qkv [n_patches, 3 x hidden] from QKV.npy or uniform [-1, 1); prints "attn_lib ...",
 * "attn S", "attn_min S" and "attn_tflop T" (4 L^2 D per segment and head); --out saves out
 * [n, hidden]. bf16x6 without AMX: exit 1 with the reason. */
#include "mv_backend.h"
#include "mv_common.h"
#include "mv_gemm_amx.h"
#include "mv_gemm_cpu.h"
#include "mv_npy.h"
#include "mv_ops_cpu.h"
#include "mv_plan.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "cpubench: %s: %s\n", what, msg);
    return 1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sorts t; the minimum is the estimate least disturbed by other load on a shared machine */
static double median(double *t, int n)
{
    qsort(t, n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* One Linear of the tower: out[n, o] = x[n, i] . W[o, i]^T (pw: W packed). */
typedef struct {
    int64_t n;
    int in, out;
    const float *W;
    mv_gemm_w *pw;
} gemm_shape;

/* OpenBLAS's own threads on the whole matrix */
static void run_gemms_blas(const gemm_shape *g, int ng, float *a, float *c)
{
    for (int k = 0; k < ng; k++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g[k].n, g[k].out, g[k].in, 1.0f,
                    a, g[k].in, g[k].W, g[k].in, 0.0f, c, g[k].out);
}

/* The tower's path: T threads, thread t multiplies rows [r0, r1), cut at multiples of
 * mv_gemm_row_atom, at least 32 rows each (tower_cpu_int.h's row_parts / row_range). */
static int run_gemms_tower(const gemm_shape *g, int ng, float *a, float *c, const mv_gemm_cpu *gc,
                           mv_gemm_ws *ws, int T, mv_err *e)
{
    int bad = 0;
    for (int k = 0; k < ng && !bad; k++) {
        int64_t n = g[k].n, atom = mv_gemm_row_atom(gc), atoms = (n + atom - 1) / atom;
        int64_t P = atoms / ((32 + atom - 1) / atom);
        P = P < 1 ? 1 : (P > T ? T : P);
#pragma omp parallel num_threads((int)P) reduction(| : bad)
        {
            int t = omp_get_thread_num(), np = omp_get_num_threads();
            int64_t r0 = atoms * t / np * atom, r1 = atoms * (t + 1) / np * atom;
            r0 = r0 < n ? r0 : n;
            r1 = r1 < n ? r1 : n;
            mv_err te;
            if (mv_gemm_rows(ws, t, g[k].pw, c + r0 * g[k].out, g[k].out, a + r0 * g[k].in, g[k].in,
                             r1 - r0, &te)) {
#pragma omp critical
                *e = te;
                bad = 1;
            }
        }
    }
    return bad;
}

/* --what attn: attention alone (see the file comment). Returns the exit code. */
static int bench_attn(const mv_vision_config *c, const int32_t *grid, int ne, int64_t N,
                      const char *qkv_path, int threads, int iters, const char *out_path,
                      mv_cpu_gemm gmode)
{
    /* the products' library, as the tower's attention runs them in that GEMM mode */
    const char *why = "";
    int amx = mv_amx_available(&why);
    if (gmode == MV_CPU_GEMM_AUTO)
        gmode = amx ? MV_CPU_GEMM_BF16X6 : MV_CPU_GEMM_F32;
    if (gmode == MV_CPU_GEMM_BF16X6 && !amx) {
        fprintf(stderr, "cpubench: attn: bf16x6 GEMMs need Intel AMX: %s\n", why);
        return 1;
    }
    int H = c->hidden, heads = c->heads, D = c->head_dim;
    mv_err e;
    mv_plan plan; /* the tower's segments and cu_seqlens (src/tower/plan.c) */
    if (mv_plan_segments(&plan, c, grid, ne, 0, &e))
        return die("attn", e.msg);
    int nseg = plan.nseg;
    int32_t *cu = malloc((nseg + 1) * sizeof *cu);
    float *out = malloc(N * H * sizeof(float));
    double *tt = malloc((iters + 1) * sizeof(double));
    if (!cu || !out || !tt)
        return die("attn", "out of memory");
    if (mv_plan_cu_seqlens(&plan, 0, nseg, cu, &e))
        return die("attn", e.msg);
    mv_plan_free(&plan);
    double flop = 0;
    for (int sg = 0; sg < nseg; sg++) {
        double L = cu[sg + 1] - cu[sg];
        flop += 4.0 * L * L * D * heads;
    }
    mv_array qa = {0};
    float *qkv;
    if (qkv_path) {
        if (mv_npy_load_f32(qkv_path, &qa, &e))
            return die(qkv_path, e.msg);
        if (qa.ndim != 2 || qa.shape[0] != N || qa.shape[1] != 3 * H)
            return die(qkv_path, "shape is not [n_patches, 3 x hidden] for the grid and the model");
        qkv = qa.data;
    } else {
        if (!(qkv = malloc(N * 3 * H * sizeof(float))))
            return die("attn", "out of memory");
        uint64_t s = 0x9E3779B97F4A7C15ULL;
        for (int64_t k = 0; k < N * 3 * H; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            qkv[k] = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
        }
    }
    printf("cpubench: attention, %d segments, %lld patches, %d heads x %d, %d threads\n", nseg,
           (long long)N, heads, D, threads);
    if (gmode == MV_CPU_GEMM_BF16X6)
        printf("attn_lib AMX bf16x6 (gemm_amx.c)\n");
    else
        printf("attn_lib %s f32\n", MV_HAVE_DNNL ? "oneDNN sgemm" : "OpenBLAS sgemm");
    omp_set_num_threads(threads);
    for (int it = 0; it <= iters; it++) {
        double t0 = mv_now();
        if (mv_attention_cpu_gemm(out, qkv, cu, nseg, heads, D, gmode))
            return die("attn", "attention failed (out of memory or the GEMM library)");
        tt[it] = mv_now() - t0;
    }
    double med = median(tt + 1, iters);
    printf("attn %.4f\nattn_min %.4f\nattn_tflop %.4f\n", med, tt[1], flop * 1e-12);
    if (out_path) {
        int64_t shape[2] = {N, H};
        if (mv_npy_save(out_path, MV_DT_F32, 2, shape, out, &e))
            return die(out_path, e.msg);
    }
    if (qkv_path)
        mv_array_free(&qa);
    else
        free(qkv);
    free(cu);
    free(out);
    free(tt);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mdir = NULL, *gs = NULL, *pix_path = NULL, *what = "both", *out_path = NULL;
    const char *qkv_path = NULL;
    int threads = 0, iters = 3, blas = 0;
    mv_cpu_gemm gmode = MV_CPU_GEMM_F32;
    const char *no_amx = getenv("MV_NO_AMX"); /* as mvembed: set and not 0, act as without AMX */
    if (no_amx && strcmp(no_amx, "0"))
        mv_amx_refuse("MV_NO_AMX is set");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return die(a, "missing value");
        if (!strcmp(a, "--model"))
            mdir = v;
        else if (!strcmp(a, "--grid"))
            gs = v;
        else if (!strcmp(a, "--pixels"))
            pix_path = v;
        else if (!strcmp(a, "-j"))
            threads = atoi(v);
        else if (!strcmp(a, "--iters"))
            iters = atoi(v);
        else if (!strcmp(a, "--what"))
            what = v;
        else if (!strcmp(a, "--out"))
            out_path = v;
        else if (!strcmp(a, "--qkv"))
            qkv_path = v;
        else if (!strcmp(a, "--blas"))
            blas = atoi(v);
        else if (!strcmp(a, "--cpu-gemm")) {
            if (mv_cpu_gemm_parse(v, &gmode))
                return die(v, "--cpu-gemm must be f32, bf16x6 or auto");
        }
        else
            return die(a, "unknown option");
        i++;
    }
    if (!mdir || !gs || iters < 1 || iters > 1000)
        return die("usage", "cpubench --model DIR --grid \"t,h,w;...\" [--pixels P.npy] [-j N] "
                            "[--iters K] [--what tower|gemm|both|attn] [--blas 1] [--qkv QKV.npy] "
                            "[--out OUT.npy] [--cpu-gemm f32|bf16x6|auto]");
    if (threads <= 0)
        threads = mv_cpu_count();
    int32_t grid[3 * 256];
    int ne = 0;
    for (const char *p = gs; *p && ne < 256;) {
        int t, h, w, used;
        if (sscanf(p, "%d,%d,%d%n", &t, &h, &w, &used) != 3)
            return die(gs, "grid must be t,h,w[;t,h,w...]");
        grid[3 * ne] = t, grid[3 * ne + 1] = h, grid[3 * ne + 2] = w;
        ne++;
        p += used;
        if (*p == ';')
            p++;
    }
    mv_err e;
    mv_model *m;
    if (mv_model_load(mdir, &m, &e))
        return die(mdir, e.msg);
    const mv_vision_config *c = &m->cfg;
    int64_t N;
    if (mv_grid_check(c, grid, ne, &N, &e))
        return die(gs, e.msg);
    if (!strcmp(what, "attn")) {
        int rc = bench_attn(c, grid, ne, N, qkv_path, threads, iters, out_path, gmode);
        mv_model_free(m);
        return rc;
    }
    int H = c->hidden, F = c->inter, mm = c->merge * c->merge;
    int64_t M = N / mm;
    float *pixels;
    mv_array pa = {0};
    if (pix_path) {
        if (mv_npy_load_f32(pix_path, &pa, &e))
            return die(pix_path, e.msg);
        if (pa.ndim != 2 || pa.shape[0] != N || pa.shape[1] != c->patch_dim)
            return die(pix_path, "shape does not match the grid and the model's patch_dim");
        pixels = pa.data;
    } else {
        pixels = malloc(N * c->patch_dim * sizeof(float));
        if (!pixels)
            return die("pixels", "out of memory");
        uint64_t s = 0x2545F4914F6CDD1DULL;
        for (int64_t k = 0; k < N * c->patch_dim; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            pixels[k] = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
        }
    }
    printf("cpubench: %s, %d entries, %lld patches, %d threads\n", mdir, ne, (long long)N, threads);
    int do_tower = !strcmp(what, "tower") || !strcmp(what, "both");
    int do_gemm = !strcmp(what, "gemm") || !strcmp(what, "both");
    if (!do_tower && !do_gemm)
        return die(what, "--what must be tower, gemm or both");
    /* the tower: the CPU backend at `threads` (OpenBLAS single-threaded inside it) */
    mv_backend_opts bo = {.threads = threads, .cpu_gemm = gmode};
    mv_backend *be = NULL;
    if (do_tower && mv_backend_cpu_create(m, &bo, &be, &e))
        return die("cpu backend", e.msg);
    float *out = malloc(M * c->out_hidden * sizeof(float));
    /* the tower's Linear GEMMs, in its order */
    int ng = 0;
    gemm_shape *g = malloc((4 * c->depth + 3) * sizeof *g);
    if (!out || !g)
        return die("setup", "out of memory");
    g[ng++] = (gemm_shape){N, c->patch_dim, H, m->patch_w, NULL};
    for (int b = 0; b < c->depth; b++) {
        const mv_block *B = &m->blocks[b];
        g[ng++] = (gemm_shape){N, H, 3 * H, B->qkv_w, NULL};
        g[ng++] = (gemm_shape){N, H, H, B->proj_w, NULL};
        g[ng++] = (gemm_shape){N, H, F, B->fc1_w, NULL};
        g[ng++] = (gemm_shape){N, F, H, B->fc2_w, NULL};
    }
    g[ng++] = (gemm_shape){M, H * mm, H * mm, m->mfc1_w, NULL};
    g[ng++] = (gemm_shape){M, H * mm, c->out_hidden, m->mfc2_w, NULL};
    double flop = 0;
    int64_t amax = 0, cmax = 0;
    for (int k = 0; k < ng; k++) {
        flop += 2.0 * g[k].n * g[k].in * g[k].out;
        amax = g[k].n * g[k].in > amax ? g[k].n * g[k].in : amax;
        cmax = g[k].n * g[k].out > cmax ? g[k].n * g[k].out : cmax;
    }
    float *a = do_gemm ? malloc(amax * sizeof(float)) : NULL;
    float *cc = do_gemm ? malloc(cmax * sizeof(float)) : NULL;
    double *tt = malloc((iters + 1) * sizeof(double)), *tg = malloc((iters + 1) * sizeof(double));
    double *tb = malloc((iters + 1) * sizeof(double));
    if ((do_gemm && (!a || !cc)) || !tt || !tg || !tb)
        return die("setup", "out of memory");
    /* the tower's GEMM path: its own packed copy of every weight, one work-space slot per thread */
    mv_gemm_cpu *gc = NULL;
    mv_gemm_ws *ws = NULL;
    if (do_gemm) {
        if (mv_gemm_cpu_create(0, gmode, &gc, &e) || mv_gemm_ws_create(gc, threads, &ws, &e))
            return die("gemm", e.msg);
        for (int k = 0; k < ng; k++)
            if (mv_gemm_pack(gc, g[k].W, g[k].in, g[k].out, "weights", &g[k].pw, &e))
                return die("gemm", e.msg);
        printf("gemm_lib %s\n", mv_gemm_cpu_name(gc));
    }
    for (int64_t k = 0; do_gemm && k < amax; k++)
        a[k] = pixels[k % (N * c->patch_dim)];
    /* tower and GEMMs alternate, so that both see the same load on a shared machine */
    mv_forward_req req = {.pixels = pixels, .grid = grid, .n_entries = ne, .out = out};
    for (int it = 0; it <= iters; it++) {
        if (do_tower) {
            double t0 = mv_now();
            if (be->forward(be, &req, NULL, &e))
                return die("forward", e.msg);
            tt[it] = mv_now() - t0;
        }
        if (do_gemm) {
            omp_set_num_threads(threads);
            double t0 = mv_now();
            if (run_gemms_tower(g, ng, a, cc, gc, ws, threads, &e))
                return die("gemm", e.msg);
            tg[it] = mv_now() - t0;
        }
        if (do_gemm && blas) {
            openblas_set_num_threads(threads); /* OpenBLAS's own pool, as numpy runs it */
            double t0 = mv_now();
            run_gemms_blas(g, ng, a, cc);
            tb[it] = mv_now() - t0;
            openblas_set_num_threads(1);
        }
    }
    if (do_tower) {
        double med = median(tt + 1, iters);
        printf("tower %.4f\ntower_min %.4f\n", med, tt[1]);
    }
    if (do_gemm) {
        double med = median(tg + 1, iters);
        printf("gemm %.4f\ngemm_min %.4f\n", med, tg[1]);
    }
    if (do_gemm && blas) {
        double med = median(tb + 1, iters);
        printf("gemm_blas %.4f\ngemm_blas_min %.4f\n", med, tb[1]);
    }
    printf("gemm_tflop %.4f\n", flop * 1e-12);
    if (out_path && do_tower) {
        int64_t shape[2] = {M, c->out_hidden};
        if (mv_npy_save(out_path, MV_DT_F32, 2, shape, out, &e))
            return die(out_path, e.msg);
    }
    free(out);
    for (int k = 0; do_gemm && k < ng; k++)
        mv_gemm_w_free(g[k].pw);
    mv_gemm_ws_destroy(ws);
    mv_gemm_cpu_destroy(gc);
    free(tb);
    free(g);
    free(a);
    free(cc);
    free(tt);
    free(tg);
    if (be)
        be->destroy(be);
    if (pix_path)
        mv_array_free(&pa);
    else
        free(pixels);
    mv_model_free(m);
    return 0;
}
