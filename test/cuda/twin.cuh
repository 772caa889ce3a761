/* twin.cuh - what the CUDA twin tests (test_cuda_ops.cu, test_fa3.cu) share: CU() (a failed CUDA
 * call bails out of the TAP run), a xorshift urand() seeded per test file (TWIN_SEED, defined
 * before the include, so that each file keeps its own inputs), and compare() of a result against
 * its reference (rel L2 over the finite elements, max abs error, max abs reference, NaN/inf count).
 * Not here: the tests, the kernels' CPU twins (include/mv_ops_cpu.h). */
#ifndef MV_TWIN_CUH
#define MV_TWIN_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t r_ = (x);                                                                      \
        if (r_ != cudaSuccess) {                                                                   \
            printf("Bail out! %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_));   \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#ifndef TWIN_SEED
#error "define TWIN_SEED (the test file's random seed) before including twin.cuh"
#endif
static uint64_t rng = TWIN_SEED;
static float urand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

typedef struct {
    double rel_l2, max_abs, max_ref;
    long nonfinite;
} cmp_t;
static cmp_t compare(const float *a, const float *ref, size_t n)
{
    cmp_t c = {0, 0, 0, 0};
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
        if (fabs(ref[i]) > c.max_ref) c.max_ref = fabs(ref[i]);
    }
    c.rel_l2 = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    return c;
}

#endif
