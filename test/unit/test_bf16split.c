/* test_bf16split.c - mv_bf16x3_split (src/tower/gemm_amx.c), bf16x6's exact three-part split, against
 * an oracle that shares no code with it: each part decoded to double by its fields (sign,
 * exponent, mantissa: ldexp), the parts' sum compared with the input in double (exact: three
 * parts of 8 bits each span at most 2^-23 of the value's 24 bits), and the first part compared
 * with the nearest bf16 found by search (the two bf16 values around a, by nextafter-free
 * arithmetic on the decoded grid, ties to the even mantissa). Values: random f32 bit patterns
 * over the whole exponent range, random values of activation size, and edges (0, -0, 1, -1,
 * halfway cases, FLT_MAX, the largest value that rounds to a finite bf16, the smallest normal,
 * subnormals, 2^-110 and just below, infinities, NaN). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mv_gemm_amx.h"
#include "unit.h"

/* a bf16 bit pattern as a double, from its fields */
static double bf(uint16_t h)
{
    int s = h >> 15, ex = (h >> 7) & 0xFF, man = h & 0x7F;
    double v;
    if (ex == 0xFF)
        v = man ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp(man, -133); /* subnormal: man x 2^-126 / 2^7 */
    else
        v = ldexp(128 + man, ex - 127 - 7);
    return s ? -v : v;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the nearest bf16 to finite a (as a double), ties to even, by search over the decoded grid:
 * the largest bf16 pattern not above |a| and the next one */
static double nearest_bf16(float a)
{
    double x = fabs((double)a);
    uint16_t lo = 0;
    for (int bit = 14; bit >= 0; bit--) { /* binary search over the ordered positive patterns */
        uint16_t t = lo | (uint16_t)(1u << bit);
        if (t < 0x7F80 && bf(t) <= x)
            lo = t;
    }
    uint16_t hi = lo + 1;
    double dl = x - bf(lo), dh = bf(hi) - x; /* hi may be infinity (0x7F80) */
    double r = dl < dh ? bf(lo) : dh < dl ? bf(hi) : ((lo & 1) ? bf(hi) : bf(lo));
    return a < 0 ? -r : r;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

#define NV 200000

static float vals[NV];
static uint16_t p1[NV], p2[NV], p3[NV];

int main(void)
{
    int n = 0;
    const float edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 3.0f, 1.00390625f /* 1 + 2^-8: a tie */,
                           1.01171875f /* 1 + 3 x 2^-8: a tie rounding up */, 65504.0f, 1e-3f,
                           -123.456f, FLT_MAX, -FLT_MAX, 3.3961e38f, FLT_MIN, -FLT_MIN,
                           from_bits(0x7F7F7FFF) /* rounds to the largest bf16 */,
                           from_bits(0x7F7F8000) /* a tie above the largest bf16: overflow */,
                           ldexpf(1.0f, -110), ldexpf(1.5f, -110), ldexpf(1.0f, -111) * 1.999f,
                           1e-38f, ldexpf(1.0f, -149), ldexpf(3.0f, -140), 1.1754942e-38f /* FLT_MIN-ulp */};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        vals[n++] = edges[i];
    int n_edges = n;
    while (n < NV / 2) { /* any finite bit pattern */
        uint32_t u = rnd32();
        if ((u & 0x7F800000u) != 0x7F800000u)
            vals[n++] = from_bits(u);
    }
    while (n < NV - 3) /* activation-sized values, both signs */
        vals[n++] = (float)(((int32_t)rnd32()) * ldexp(1.0, -31 + (int)(rnd32() % 20) - 10));
    vals[n++] = INFINITY;
    vals[n++] = -INFINITY;
    vals[n++] = NAN;
    mv_bf16x3_split(vals, n, p1, p2, p3);

    int bad_exact = 0, bad_tiny = 0, bad_rne = 0, bad_small = 0, n_exact = 0, n_tiny = 0;
    double worst_tiny = 0;
    for (int i = 0; i < n - 3; i++) {
        double a = vals[i], s = bf(p1[i]) + bf(p2[i]) + bf(p3[i]);
        if (!isfinite(bf(p1[i])) || !isfinite(bf(p2[i])) || !isfinite(bf(p3[i]))) {
            bad_exact++;
            if (bad_exact < 5)
                printf("# non-finite part for %a: %04x %04x %04x\n", vals[i], p1[i], p2[i], p3[i]);
            continue;
        }
        if (fabs(a) >= ldexp(1.0, -110)) {
            n_exact++;
            if (s != a) {
                bad_exact++;
                if (bad_exact < 5)
                    printf("# %a: parts sum to %a\n", vals[i], s);
            }
        } else {
            n_tiny++;
            worst_tiny = fmax(worst_tiny, fabs(s - a));
            if (fabs(s - a) > ldexp(1.0, -134))
                bad_tiny++;
        }
        /* p1 is the nearest bf16, unless that overflows (then the largest finite one) */
        double want = nearest_bf16(vals[i]);
        if (isinf(want))
            want = copysign(bf(0x7F7F), a);
        if (bf(p1[i]) != want) {
            bad_rne++;
            if (bad_rne < 5)
                printf("# %a: p1 %a, nearest %a\n", vals[i], bf(p1[i]), want);
        }
        /* the parts shrink: |p2| <= 2^-8 |a| and |p3| <= 2^-16 |a| (normal range, no overflow) */
        if (fabs(a) >= ldexp(1.0, -100) && fabs(a) < 3e38 &&
            (fabs(bf(p2[i])) > ldexp(fabs(a), -8) || fabs(bf(p3[i])) > ldexp(fabs(a), -16)))
            bad_small++;
    }
    printf("# %d values with |a| >= 2^-110 (%d edges first), %d below\n", n_exact, n_edges, n_tiny);
    CHECK(bad_exact == 0, "p1 + p2 + p3 == a exactly in double for every finite |a| >= 2^-110 (%d bad)",
          bad_exact);
    CHECK(bad_tiny == 0, "below 2^-110 the residual is at most 2^-134 (worst %g, %d bad)", worst_tiny,
          bad_tiny);
    CHECK(bad_rne == 0, "p1 is the nearest bf16, ties to even, or the largest finite one (%d bad)",
          bad_rne);
    CHECK(bad_small == 0, "|p2| <= 2^-8 |a| and |p3| <= 2^-16 |a| (%d bad)", bad_small);
    CHECK(p1[10] == 0x7F7F && bf(p1[10]) + bf(p2[10]) + bf(p3[10]) == (double)FLT_MAX,
          "FLT_MAX: p1 the largest finite bf16, the parts still exact");
    CHECK(p1[0] == 0 && p2[0] == 0 && p3[0] == 0 && p1[1] == 0x8000, "0 -> 0, 0, 0; -0 keeps its sign");
    CHECK(isinf(bf(p1[n - 3])) && bf(p1[n - 3]) > 0 && p2[n - 3] == 0 && p3[n - 3] == 0 &&
              isinf(bf(p1[n - 2])) && bf(p1[n - 2]) < 0 && p2[n - 2] == 0 && p3[n - 2] == 0,
          "+-infinity: whole in p1, p2 = p3 = 0");
    CHECK(isnan(bf(p1[n - 1])) && p2[n - 1] == 0 && p3[n - 1] == 0, "NaN stays NaN in p1");
    return UNIT_DONE();
}
