/* gemmprobe.c - f32 GEMM rate of one CPU BLAS library on the CPU tower's Linear shapes (a
 * benchmark tool, not a test): M patch rows times the four Linear layers of one tower block
 * (qkv H->3H, proj H->H, fc1 H->I, fc2 I->H), row-major, weights [out][in] as the tower stores
 * them (B transposed). Prints TFLOP/s per shape and for the block, fastest of ITERS runs.
 * Built once per library (`make gemmprobe` builds build/gemmprobe-openblas, -dnnl, -blis):
 *   -DPROBE_OPENBLAS  cblas_sgemm of OpenBLAS (its own threads)
 *   -DPROBE_BLIS      cblas_sgemm of BLIS (its own OpenMP threads)
 *   -DPROBE_DNNL      oneDNN matmul, weights reordered once into the layout it picks (OpenMP)
 * Usage: gemmprobe M H I THREADS ITERS
 * Not here: the tower itself (build/cpubench), correctness (each result is checked against the
 * OpenBLAS-free naive product on a few entries only, to catch a wrong call). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);

#if defined(PROBE_OPENBLAS)
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);
char *openblas_get_config(void);
static const char *lib_init(int threads)
{
    openblas_set_num_threads(threads);
    static char s[256];
    snprintf(s, sizeof s, "OpenBLAS core %s (%s)", openblas_get_corename(), openblas_get_config());
    return s;
}
#elif defined(PROBE_BLIS)
void bli_thread_set_num_threads(long n);
int bli_arch_query_id(void);
char *bli_arch_string(int id);
static const char *lib_init(int threads)
{
    bli_thread_set_num_threads(threads);
    static char s[128];
    snprintf(s, sizeof s, "BLIS arch %s", bli_arch_string(bli_arch_query_id()));
    return s;
}
#elif defined(PROBE_DNNL)
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
static const char *lib_init(int threads)
{
    omp_set_num_threads(threads);
    const dnnl_version_t *v = dnnl_version();
    static char s[128];
    snprintf(s, sizeof s, "oneDNN %d.%d.%d (%s)", v->major, v->minor, v->patch, v->cpu_runtime == 2 ? "omp" : "other");
    return s;
}
#define DK(x)                                                                                  \
    do {                                                                                       \
        dnnl_status_t s_ = (x);                                                                \
        if (s_ != dnnl_success) {                                                              \
            fprintf(stderr, "gemmprobe: %s: status %d\n", #x, (int)s_);                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#else
#error "define PROBE_OPENBLAS, PROBE_BLIS or PROBE_DNNL"
#endif

/* y[M][N] = x[M][K] . w[N][K]^T */
typedef struct {
    int m, n, k;
    float *x, *w, *y;
#ifdef PROBE_DNNL
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t mm;
    dnnl_memory_t mx, mw, my;
#endif
} gemm;

static void gemm_prepare(gemm *g)
{
#ifdef PROBE_DNNL
    DK(dnnl_engine_create(&g->eng, dnnl_cpu, 0));
    DK(dnnl_stream_create(&g->st, g->eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t dx, dwu, dwa, dy;
    dnnl_dims_t sx = {g->m, g->k}, sw = {g->k, g->n}, sy = {g->m, g->n};
    DK(dnnl_memory_desc_init_by_tag(&dx, 2, sx, dnnl_f32, dnnl_ab));
    DK(dnnl_memory_desc_init_by_tag(&dwu, 2, sw, dnnl_f32, dnnl_ba)); /* [K][N] viewed from [N][K] */
    DK(dnnl_memory_desc_init_by_tag(&dwa, 2, sw, dnnl_f32, dnnl_format_tag_any));
    DK(dnnl_memory_desc_init_by_tag(&dy, 2, sy, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    DK(dnnl_matmul_desc_init(&md, &dx, &dwa, NULL, &dy));
    dnnl_primitive_desc_t pd;
    DK(dnnl_primitive_desc_create(&pd, &md, NULL, g->eng, NULL));
    const dnnl_memory_desc_t *wpd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const char *impl = NULL;
    DK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    fprintf(stderr, "gemmprobe: oneDNN matmul %dx%dx%d impl %s\n", g->m, g->n, g->k, impl);
    dnnl_memory_t wu;
    DK(dnnl_memory_create(&wu, &dwu, g->eng, g->w));
    DK(dnnl_memory_create(&g->mw, wpd, g->eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    DK(dnnl_reorder_primitive_desc_create(&rpd, &dwu, g->eng, wpd, g->eng, NULL));
    dnnl_primitive_t r;
    DK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, wu}, {DNNL_ARG_TO, g->mw}};
    DK(dnnl_primitive_execute(r, g->st, 2, ra));
    DK(dnnl_stream_wait(g->st));
    DK(dnnl_memory_create(&g->mx, &dx, g->eng, g->x));
    DK(dnnl_memory_create(&g->my, &dy, g->eng, g->y));
    DK(dnnl_primitive_create(&g->mm, pd));
#else
    (void)g;
#endif
}

static void gemm_run(gemm *g)
{
#ifdef PROBE_DNNL
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, g->mx}, {DNNL_ARG_WEIGHTS, g->mw}, {DNNL_ARG_DST, g->my}};
    DK(dnnl_primitive_execute(g->mm, g->st, 3, a));
    DK(dnnl_stream_wait(g->st));
#else
    cblas_sgemm(RowMajor, NoTrans, Trans, g->m, g->n, g->k, 1.0f, g->x, g->k, g->w, g->k, 0.0f, g->y,
                g->n);
#endif
}

static float *randv(size_t n, unsigned *s)
{
    float *v = malloc(n * sizeof *v);
    if (!v) exit(1);
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1103515245u + 12345u;
        v[i] = ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: gemmprobe M H I THREADS ITERS\n");
        return 2;
    }
    int M = atoi(argv[1]), H = atoi(argv[2]), I = atoi(argv[3]), T = atoi(argv[4]), it = atoi(argv[5]);
    printf("lib %s threads %d\n", lib_init(T), T);
    int shapes[4][2] = {{H, 3 * H}, {H, H}, {H, I}, {I, H}}; /* K, N */
    const char *names[4] = {"qkv", "proj", "fc1", "fc2"};
    unsigned seed = 1;
    gemm g[4];
    for (int s = 0; s < 4; s++) {
        g[s] = (gemm){.m = M, .k = shapes[s][0], .n = shapes[s][1]};
        g[s].x = randv((size_t)M * g[s].k, &seed);
        g[s].w = randv((size_t)g[s].n * g[s].k, &seed);
        g[s].y = calloc((size_t)M * g[s].n, sizeof(float));
        gemm_prepare(&g[s]);
        gemm_run(&g[s]);
        /* spot check a few entries against a double product */
        for (int c = 0; c < 4; c++) {
            int i = (c * 977) % M, j = (c * 331) % g[s].n;
            double r = 0;
            for (int k = 0; k < g[s].k; k++) r += (double)g[s].x[(size_t)i * g[s].k + k] * g[s].w[(size_t)j * g[s].k + k];
            double d = fabs(r - g[s].y[(size_t)i * g[s].n + j]);
            if (d > 1e-3 * (1 + fabs(r))) {
                fprintf(stderr, "gemmprobe: %s wrong at (%d,%d): %g vs %g\n", names[s], i, j, g[s].y[(size_t)i * g[s].n + j], r);
                return 1;
            }
        }
    }
    double tot = 0, flops = 0;
    for (int s = 0; s < 4; s++) {
        double best = 1e30;
        for (int r = 0; r < it; r++) {
            double t0 = now();
            gemm_run(&g[s]);
            double t = now() - t0;
            if (t < best) best = t;
        }
        double f = 2.0 * M * g[s].n * g[s].k;
        printf("%s %dx%dx%d %.4f s %.3f TFLOP/s\n", names[s], M, g[s].n, g[s].k, best, f / best / 1e12);
        tot += best;
        flops += f;
    }
    printf("block %.4f s %.3f TFLOP/s\n", tot, flops / tot / 1e12);
    return 0;
}
