/* test_rope_cpu.c - mv_cpu_split_heads_range (src/tower/attention_cpu.c: qkv -> head-major, q and k
 * rotated; compiled for AVX-512 / AVX2 with fp-contract off) against HF's rope arithmetic written
 * out here with every f32 product rounded before the sum (volatile temporaries, so no FMA can
 * fuse them): x1 c - x2 s and x2 c' + x1 s' per pair, compared bit for bit; v copied as is; rows
 * outside [r0, r1) untouched. Head widths 72 (the 27B tower's: 36 pairs, a vector tail), 64 and
 * 80, odd row counts, a range not starting at 0. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tower/tower_cpu_int.h"
#include "unit.h"

static float rnd(void) { return (float)((double)rand() / RAND_MAX * 4.0 - 2.0); }

static int run(int64_t n, int heads, int D, int64_t r0, int64_t r1)
{
    int H = heads * D, half = D / 2;
    float *qkv = malloc(n * 3 * H * sizeof *qkv), *c = malloc(n * D * sizeof *c);
    float *s = malloc(n * D * sizeof *s), *hm = malloc(3 * n * H * sizeof *hm);
    for (int64_t i = 0; i < n * 3 * H; i++)
        qkv[i] = rnd();
    for (int64_t i = 0; i < n * D; i++) {
        c[i] = rnd() / 2;
        s[i] = rnd() / 2;
    }
    for (int64_t i = 0; i < 3 * n * H; i++)
        hm[i] = 12345.0f;
    mv_cpu_split_heads_range(hm, qkv, c, s, n, r0, r1, heads, D);
    int bad = 0;
    for (int part = 0; part < 3; part++)
        for (int hd = 0; hd < heads; hd++)
            for (int64_t i = 0; i < n; i++) {
                const float *x = qkv + i * 3 * H + part * H + hd * D;
                const float *ci = c + i * D, *si = s + i * D;
                const float *o = hm + (((int64_t)part * heads + hd) * n + i) * D;
                for (int d = 0; d < D; d++) {
                    float want;
                    if (i < r0 || i >= r1) {
                        want = 12345.0f;
                    } else if (part == 2) {
                        want = x[d];
                    } else {
                        volatile float a, b;
                        if (d < half) {
                            a = x[d] * ci[d];
                            b = x[d + half] * si[d];
                            want = a - b;
                        } else {
                            a = x[d] * ci[d];
                            b = x[d - half] * si[d];
                            want = a + b;
                        }
                    }
                    if (memcmp(&want, &o[d], 4))
                        bad++;
                }
            }
    free(qkv);
    free(c);
    free(s);
    free(hm);
    return bad;
}

int main(void)
{
    srand(15);
    int bad = run(37, 3, 72, 0, 37);
    CHECK(bad == 0, "D 72, 37 rows: rope bit-exact, v copied (%d values off)", bad);
    bad = run(29, 2, 64, 5, 23);
    CHECK(bad == 0, "D 64, rows [5, 23) of 29: only those written, bit-exact (%d values off)", bad);
    bad = run(17, 4, 80, 1, 16);
    CHECK(bad == 0, "D 80, rows [1, 16) of 17 (%d values off)", bad);
    return UNIT_DONE();
}
