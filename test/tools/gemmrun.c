/* gemmrun - one product through the CPU tower's GEMM path (mv_gemm_cpu.h), for tests that check it
 * against numpy: OUT[m, od] = X[m, in] . W[od, in]^T, W packed once, X's rows cut into blocks at
 * multiples of mv_gemm_row_atom for T threads as the tower cuts them (each block one
 * single-threaded mv_gemm_rows call on its thread's slot). Not a benchmark (cpubench), not the
 * tower. Prints "gemm_lib NAME" (library, mode, implementation) on stdout.
 *   gemmrun [--cpu-gemm f32|bf16x6|auto] [-j T] X.npy W.npy OUT.npy
 * Exit status 0, or 1 with "gemmrun: ..." on stderr (bad arguments or files, a GEMM error). */
#include "mv_common.h"
#include "mv_gemm_cpu.h"
#include "mv_npy.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "gemmrun: %s: %s\n", what, msg);
    return 1;
}

int main(int argc, char **argv)
{
    mv_cpu_gemm mode = MV_CPU_GEMM_F32;
    int T = 1, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--cpu-gemm")) {
            if (mv_cpu_gemm_parse(argv[i + 1], &mode))
                return die(argv[i + 1], "--cpu-gemm must be f32, bf16x6 or auto");
        } else if (!strcmp(argv[i], "-j")) {
            T = atoi(argv[i + 1]);
            if (T < 1 || T > 256)
                return die(argv[i + 1], "-j must be 1..256");
        } else
            return die(argv[i], "unknown option");
    }
    if (argc - i != 3)
        return die("usage", "gemmrun [--cpu-gemm f32|bf16x6|auto] [-j T] X.npy W.npy OUT.npy");
    mv_err e;
    mv_array xa = {0}, wa = {0};
    if (mv_npy_load_f32(argv[i], &xa, &e))
        return die(argv[i], e.msg);
    if (mv_npy_load_f32(argv[i + 1], &wa, &e))
        return die(argv[i + 1], e.msg);
    if (xa.ndim != 2 || wa.ndim != 2 || xa.shape[1] != wa.shape[1])
        return die("shapes", "X must be [m, in] and W [od, in]");
    int64_t m = xa.shape[0];
    int in = (int)xa.shape[1], od = (int)wa.shape[0];
    const float *X = xa.data, *W = wa.data;
    mv_gemm_cpu *g = NULL;
    mv_gemm_w *w = NULL;
    mv_gemm_ws *ws = NULL;
    float *out = malloc((size_t)(m ? m : 1) * od * sizeof(float));
    if (!out)
        return die("output", "out of memory");
    if (mv_gemm_cpu_create(0, mode, &g, &e) || mv_gemm_pack(g, W, in, od, "W", &w, &e) ||
        mv_gemm_ws_create(g, T, &ws, &e))
        return die("gemm", e.msg);
    printf("gemm_lib %s\n", mv_gemm_cpu_name(g));
    int64_t atom = mv_gemm_row_atom(g), atoms = (m + atom - 1) / atom;
    int bad = 0;
    mv_err te = {0};
#pragma omp parallel num_threads(T) reduction(| : bad)
    {
        int t = omp_get_thread_num(), np = omp_get_num_threads();
        int64_t r0 = atoms * t / np * atom, r1 = atoms * (t + 1) / np * atom;
        r0 = r0 < m ? r0 : m;
        r1 = r1 < m ? r1 : m;
        mv_err le;
        if (mv_gemm_rows(ws, t, w, out + r0 * od, od, X + r0 * in, in, r1 - r0, &le)) {
#pragma omp critical
            te = le;
            bad = 1;
        }
    }
    if (bad)
        return die("gemm", te.msg);
    int64_t shape[2] = {m, od};
    if (mv_npy_save(argv[i + 2], MV_DT_F32, 2, shape, out, &e))
        return die(argv[i + 2], e.msg);
    mv_gemm_ws_destroy(ws);
    mv_gemm_w_free(w);
    mv_gemm_cpu_destroy(g);
    mv_array_free(&xa);
    mv_array_free(&wa);
    free(out);
    return 0;
}
