/* test_gemm_amx.c - the AMX bf16x6 kernel (src/gemm_amx.c). Oracles: /proc/cpuinfo's flags for
 * whether AMX is there; mv_bf16x3_split (itself checked against a field-by-field decoder in
 * test_bf16split) and a plain loop over (n, k) for the VNNI packing, on awkward K (40, 4304: one
 * partial 32-k step) and N (48, 40: an odd and a partial 16-column tile), with infinities, NaN,
 * FLT_MAX, subnormals and -0 among the weights; a double triple loop for the products; the full
 * product's bytes for row blocks of 1, 7, 16, 33 and 200 rows (determinism). Without AMX (or with
 * MV_NO_AMX=1) it checks that the kernel says so with a reason, and nothing else can run. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mv_gemm_amx.h"
#include "mv_gemm_cpu.h"
#include "unit.h"

static uint64_t rng = 88172645463325252ull;
static float urand(void) /* uniform [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

static int cpu_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int has = 0;
    size_t n = strlen(flag);
    while (f && !has && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5))
            for (char *p = strstr(line, flag); p && !has; p = strstr(p + 1, flag))
                has = (p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n');
    if (f)
        fclose(f);
    return has;
}

/* the packed parts of W against the split of each row, padding included */
static void check_pack(int in, int od)
{
    float *W = malloc(sizeof *W * in * od);
    for (int i = 0; i < in * od; i++)
        W[i] = urand() * 0.05f;
    const float special[] = {INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 1e-40f, -0.0f, 3.0e38f,
                             1.0f + 1.0f / 256, 1e-38f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        W[(i * 7919) % (in * od)] = special[i];
    mv_amx_w *w = NULL;
    mv_err e;
    CHECK(!mv_amx_pack(W, in, od, "W", &w, &e), "pack %d x %d", od, in);
    int kp = (in + 31) / 32 * 32, np = (od + 31) / 32 * 32, bad = 0;
    uint16_t *p = malloc(sizeof *p * 3 * in);
    for (int n = 0; n < np; n++) {
        if (n < od)
            mv_bf16x3_split(W + (size_t)n * in, in, p, p + in, p + 2 * in);
        for (int q = 0; q < 3; q++)
            for (int k = 0; k < kp; k++) {
                uint16_t want = n < od && k < in ? p[q * in + k] : 0;
                bad += mv_amx_w_at(w, q, n, k) != want;
            }
    }
    CHECK(bad == 0, "VNNI packing of %d x %d (padded to %d x %d): %d parts differ from the split",
          od, in, np, kp, bad);
    free(p);
    mv_amx_w_free(w);
    free(W);
}

/* out = x . W^T against a double loop (error within f32 accumulation's 2e-6 of sum |x w|), and
 * row blocks of several sizes against the full product, byte for byte */
static void check_rows(int m, int in, int od)
{
    float *x = malloc(sizeof *x * m * in), *W = malloc(sizeof *W * od * in);
    float *o = malloc(sizeof *o * m * (od + 3)), *ob = malloc(sizeof *ob * m * (od + 3));
    for (int i = 0; i < m * in; i++)
        x[i] = urand() * 0.5f + 0.2f;
    for (int i = 0; i < od * in; i++)
        W[i] = urand() * 0.05f;
    mv_amx_w *w = NULL;
    mv_err e;
    if (mv_amx_pack(W, in, od, "W", &w, &e)) {
        CHECK(0, "pack: %s", e.msg);
        return;
    }
    void *scr = aligned_alloc(64, (mv_amx_scratch_bytes(w, m) + 63) / 64 * 64);
    int64_t ldo = od + 3; /* a row stride other than od */
    mv_amx_rows(w, o, ldo, x, in, m, scr);
    double worst = 0;
    for (int r = 0; r < m; r++)
        for (int n = 0; n < od; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < in; k++) {
                s += (double)x[(size_t)r * in + k] * W[(size_t)n * in + k];
                a += fabs((double)x[(size_t)r * in + k] * W[(size_t)n * in + k]);
            }
            double d = fabs(o[r * ldo + n] - s) / a;
            worst = d > worst ? d : worst;
        }
    CHECK(worst < 2e-6, "%d x %d . (%d x %d)^T: worst error %.2e of sum |x w| (< 2e-6)", m, in, od,
          in, worst);
    const int blocks[] = {1, 7, 16, 33, 200};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        memset(ob, 0xFF, sizeof *ob * m * ldo);
        for (int r = 0; r < m; r += blocks[b]) {
            int n = m - r < blocks[b] ? m - r : blocks[b];
            mv_amx_rows(w, ob + (size_t)r * ldo, ldo, x + (size_t)r * in, in, n, scr);
        }
        int same = 1;
        for (int r = 0; r < m; r++)
            same &= !memcmp(o + (size_t)r * ldo, ob + (size_t)r * ldo, sizeof *o * od);
        CHECK(same, "%d x %d . (%d x %d)^T in blocks of %d rows: the full product's bytes", m, in,
              od, in, blocks[b]);
    }
    free(scr);
    mv_amx_w_free(w);
    free(x), free(W), free(o), free(ob);
}

int main(void)
{
    const char *why = NULL;
    int have = mv_amx_available(&why);
    const char *off = getenv("MV_NO_AMX");
    int want = cpu_has("amx_bf16") && cpu_has("amx_tile") && !(off && strcmp(off, "0"));
    CHECK(have == want, "AMX usable (%d) exactly where /proc/cpuinfo has amx_bf16 and amx_tile and "
                        "MV_NO_AMX is not set (%d)%s%s", have, want, have ? "" : ": ", have ? "" : why);
    if (!have) {
        CHECK(why && *why, "without AMX, a reason: %s", why ? why : "(none)");
        return UNIT_DONE();
    }
    check_pack(40, 48);
    check_pack(4304, 40);
    check_pack(64, 33);
    check_rows(200, 40, 48);
    check_rows(33, 4304, 40);
    check_rows(17, 100, 33);
    check_rows(15, 1152, 64);
    check_rows(1, 64, 16);
    check_rows(300, 1152, 48); /* two M blocks of the kernel (256 rows each) */
    check_rows(290, 1600, 100); /* 3 K blocks x 4 n-tile pairs x 2 M blocks: every weight
                                   panel prefetch target (next pair, next K block, next M block) */
    return UNIT_DONE();
}
