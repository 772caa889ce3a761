/* test_gelu_cpu.c - the CPU tower's GELUs (src/tower/ops_cpu.c: mv_gelu_erf_cpu, libm-free and
 * vectorised; mv_gelu_tanh_cpu, fc1's epilogue arithmetic, on [-2, 10]) against libm in double: the oracle is
 * 0.5 v (1 + erf(v / sqrt 2)), resp. 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))), computed
 * in double (as 0.5 v erfc(-v / sqrt 2), resp. v / (1 + e^(-2u)), exact identities that do not
 * cancel for v << 0) and rounded to f32. Inputs: every 2^-14 on [-10, 10] (327681 values; the GEMM outputs
 * a GELU sees lie well inside), random f32 over [-30, 30] and the edges (0, -0, +-tiny, +-1e-30,
 * +-FLT_MAX-ish large values). Error in ulp of the f32 result where |oracle| > 1e-30; below that,
 * the result must stay within 1e-30 of the oracle. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mv_ops_cpu.h"
#include "unit.h"

/* the distance in ulp between two finite floats of the same sign (monotone bit order) */
static double ulp_dist(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0)
        ia = INT32_MIN - ia;
    if (ib < 0)
        ib = INT32_MIN - ib;
    return fabs((double)ia - (double)ib);
}

/* 1 + erf(x) as erfc(-x), and 1 + tanh(u) as 2 / (1 + e^(-2u)): no cancellation for v << 0 */
static double ref_erf(double v) { return 0.5 * v * erfc(-v * 0.70710678118654752440); }
static double ref_tanh(double v)
{
    return v / (1.0 + exp(-2.0 * 0.79788456080286535588 * (v + 0.044715 * v * v * v)));
}

/* max ulp of fn's results on xs against ref; *tiny_bad counts results off by > 1e-30 where
 * |oracle| <= 1e-30 (and non-finite results) */
static double check(void (*fn)(float *, int64_t), double (*ref)(double), const float *xs, int64_t n,
                    int *tiny_bad, float *worst)
{
    float *y = malloc(n * sizeof *y);
    memcpy(y, xs, n * sizeof *y);
    fn(y, n);
    double mx = 0;
    *tiny_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double r = ref(xs[i]);
        float rf = (float)r;
        if (!isfinite(y[i])) {
            (*tiny_bad)++;
            continue;
        }
        if (fabs(r) <= 1e-30) {
            if (fabs(y[i] - r) > 1e-30)
                (*tiny_bad)++;
            continue;
        }
        double d = ulp_dist(y[i], rf);
        if (d > mx) {
            mx = d;
            *worst = xs[i];
        }
    }
    free(y);
    return mx;
}

int main(void)
{
    int64_t nd = 327681, nr = 200000, ne = 12;
    int64_t n = nd + nr + ne;
    float *xs = malloc(n * sizeof *xs);
    for (int64_t i = 0; i < nd; i++)
        xs[i] = (float)(-10.0 + i * (1.0 / 16384));
    srand(15);
    for (int64_t i = 0; i < nr; i++)
        xs[nd + i] = (float)(((double)rand() / RAND_MAX - 0.5) * 60.0);
    const float edge[12] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-38f, -1e-38f, 3e-3f, -3e-3f,
                            1e4f, -1e4f, 1e30f, -1e30f};
    memcpy(xs + nd + nr, edge, sizeof edge);

    int bad;
    float worst = 0;
    double u = check(mv_gelu_erf_cpu, ref_erf, xs, n, &bad, &worst);
    CHECK(u <= 1.0, "erf-GELU within 1 ulp of libm's double erf (max %.0f ulp, at %.9g)", u, worst);
    CHECK(bad == 0, "erf-GELU: results of |oracle| <= 1e-30 within 1e-30, all finite (%d off)", bad);
    float z[2] = {0.0f, -0.0f};
    mv_gelu_erf_cpu(z, 2);
    CHECK(z[0] == 0.0f && z[1] == 0.0f, "erf-GELU(+-0) = 0");

    /* tanh-GELU in f32 (exp_f32, then the division): u's rounding grows with |u|, so the bound
     * is per range (measured at this commit, AVX-512: 7 ulp on [-2, 10], 18 on [-4, -2), 170 on
     * [-10, -4)); 16 leaves room for the clones without FMA */
    int64_t n2 = 0;
    for (int64_t i = 0; i < nd; i++)
        if (xs[i] >= -2.0f)
            xs[n2++] = xs[i];
    u = check(mv_gelu_tanh_cpu, ref_tanh, xs, n2, &bad, &worst);
    CHECK(u <= 16.0 && bad == 0, "tanh-GELU on [-2, 10] within 16 ulp of libm's double exp (max %.0f, at %.9g)",
          u, worst);
    free(xs);
    return UNIT_DONE();
}
