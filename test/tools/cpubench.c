/* cpubench - times the CPU tower alone (model load excluded) and, beside it, the tower's Linear
 * GEMMs alone: the same shapes and weights through plain cblas_sgemm with OpenBLAS's own thread
 * pool at the same thread count, the way numpy would run them. Not a test; scripts/bench-cpu.sh
 * runs it.
 *   cpubench --model DIR --grid "t,h,w[;t,h,w...]" [--pixels P.npy] [-j N] [--iters K]
 *            [--what tower|gemm|both] [--out OUT.npy]
 * Pixels: P.npy [n_patches, patch_dim] f32, or (without --pixels) uniform [-1, 1) from a fixed
 * LCG. One warm-up run, then K runs; with --what both the tower and the GEMMs alternate, so that
 * both see the same load. Prints "tower S" / "gemm S" (median, seconds), "tower_min S" /
 * "gemm_min S" (fastest run) and the GEMMs' TFLOP. --out saves the tower's output [tokens, L]. */
#include "mv_backend.h"
#include "mv_common.h"
#include "mv_npy.h"

#include <cblas.h>
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

/* One Linear of the tower: out[n, o] = x[n, i] . W[o, i]^T. */
typedef struct {
    int64_t n;
    int in, out;
    const float *W;
} gemm_shape;

static void run_gemms(const gemm_shape *g, int ng, float *a, float *c)
{
    for (int k = 0; k < ng; k++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g[k].n, g[k].out, g[k].in, 1.0f,
                    a, g[k].in, g[k].W, g[k].in, 0.0f, c, g[k].out);
}

int main(int argc, char **argv)
{
    const char *mdir = NULL, *gs = NULL, *pix_path = NULL, *what = "both", *out_path = NULL;
    int threads = 0, iters = 3;
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
        else
            return die(a, "unknown option");
        i++;
    }
    if (!mdir || !gs || iters < 1 || iters > 1000)
        return die("usage", "cpubench --model DIR --grid \"t,h,w;...\" [--pixels P.npy] [-j N] "
                            "[--iters K] [--what tower|gemm|both] [--out OUT.npy]");
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
    mv_backend_opts bo = {.threads = threads};
    mv_backend *be = NULL;
    if (do_tower && mv_backend_cpu_create(m, &bo, &be, &e))
        return die("cpu backend", e.msg);
    float *out = malloc(M * c->out_hidden * sizeof(float));
    /* the tower's Linear GEMMs, in its order */
    int ng = 0;
    gemm_shape *g = malloc((4 * c->depth + 3) * sizeof *g);
    if (!out || !g)
        return die("setup", "out of memory");
    g[ng++] = (gemm_shape){N, c->patch_dim, H, m->patch_w};
    for (int b = 0; b < c->depth; b++) {
        const mv_block *B = &m->blocks[b];
        g[ng++] = (gemm_shape){N, H, 3 * H, B->qkv_w};
        g[ng++] = (gemm_shape){N, H, H, B->proj_w};
        g[ng++] = (gemm_shape){N, H, F, B->fc1_w};
        g[ng++] = (gemm_shape){N, F, H, B->fc2_w};
    }
    g[ng++] = (gemm_shape){M, H * mm, H * mm, m->mfc1_w};
    g[ng++] = (gemm_shape){M, H * mm, c->out_hidden, m->mfc2_w};
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
    if ((do_gemm && (!a || !cc)) || !tt || !tg)
        return die("setup", "out of memory");
    for (int64_t k = 0; do_gemm && k < amax; k++)
        a[k] = pixels[k % (N * c->patch_dim)];
    /* tower and GEMMs alternate, so that both see the same load on a shared machine */
    for (int it = 0; it <= iters; it++) {
        if (do_tower) {
            double t0 = mv_now();
            if (be->forward(be, pixels, grid, ne, out, NULL, NULL, &e))
                return die("forward", e.msg);
            tt[it] = mv_now() - t0;
        }
        if (do_gemm) {
            openblas_set_num_threads(threads); /* OpenBLAS's own pool, as numpy runs it */
            double t0 = mv_now();
            run_gemms(g, ng, a, cc);
            tg[it] = mv_now() - t0;
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
    printf("gemm_tflop %.4f\n", flop * 1e-12);
    if (out_path && do_tower) {
        int64_t shape[2] = {M, c->out_hidden};
        if (mv_npy_save(out_path, MV_DT_F32, 2, shape, out, &e))
            return die(out_path, e.msg);
    }
    free(out);
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
