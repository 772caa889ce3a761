/* test_gemm_amx.c - the AMX bf16x6 kernel (src/tower/gemm_amx.c). Oracles: /proc/cpuinfo's flags for
 * whether AMX is there; mv_bf16x3_split (itself checked against a field-by-field decoder in
 * test_bf16split) and a plain loop over (n, k) for the VNNI packing, on awkward K (40, 4304: one
 * partial 32-k step) and N (48, 40: an odd and a partial 16-column tile), with infinities, NaN,
 * FLT_MAX, subnormals and -0 among the weights; a double triple loop for the products; the full
 * product's bytes for row blocks of 1, 7, 16, 33 and 200 rows (determinism); attention's strided
 * packing of K and V^T against the row-major packing of the same matrices, and its key-block views
 * (the whole product's bytes; a double loop over the block). Without AMX (or with
 * MV_NO_AMX=1, which it passes on as mvembed does: mv_amx_refuse) it checks that the kernel says
 * so with a reason, and nothing else can run; last, that mv_amx_refuse turns AMX off. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mv_gemm_amx.h"
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

/* attention's use (attention_cpu.c): K [L, D] packed strided as W(key, d) and V [L, D] as
 * V^T, W(d, key), into caller memory, against mv_amx_pack of the same matrices made row-major
 * (every part's bits); then products through views of a key block (outputs [j0, j0 + nk) of K,
 * inputs [j0, j0 + nk) of V^T): the K view's bytes equal the whole product's columns, the V^T
 * view's product against a double loop over the block's keys */
static void check_views(int L, int D, int j0, int nk)
{
    int m = 37;
    float *K = malloc(sizeof *K * L * D), *V = malloc(sizeof *V * L * D), *Vt = malloc(sizeof *Vt * L * D);
    float *q = malloc(sizeof *q * m * D), *p = malloc(sizeof *p * m * nk);
    float *s = malloc(sizeof *s * m * L), *sb = malloc(sizeof *sb * m * nk), *o = malloc(sizeof *o * m * D);
    for (int i = 0; i < L * D; i++)
        K[i] = urand() * 2, V[i] = urand();
    for (int key = 0; key < L; key++)
        for (int d = 0; d < D; d++)
            Vt[(size_t)d * L + key] = V[(size_t)key * D + d];
    for (int i = 0; i < m * D; i++)
        q[i] = urand() * 3;
    for (int i = 0; i < m * nk; i++)
        p[i] = urand() * 0.5f + 0.5f;
    void *kb = aligned_alloc(64, mv_amx_packed_bytes(D, L)), *vb = aligned_alloc(64, mv_amx_packed_bytes(L, D));
    mv_amx_w Kw, Vw, *Kr = NULL, *Vr = NULL;
    mv_err e;
    mv_amx_view_init(&Kw, kb, D, L);
    mv_amx_view_init(&Vw, vb, L, D);
    /* in pieces, as the pre-pass's threads write them */
    for (int nt = 0; nt < Kw.ntiles; nt += 3)
        mv_amx_pack_strided(&Kw, K, D, 1, nt, nt + 3 < Kw.ntiles ? nt + 3 : Kw.ntiles, 0, Kw.steps);
    for (int st = 0; st < Vw.steps; st += 5)
        mv_amx_pack_strided(&Vw, V, 1, D, 0, Vw.ntiles, st, st + 5 < Vw.steps ? st + 5 : Vw.steps);
    if (mv_amx_pack(K, D, L, "K", &Kr, &e) || mv_amx_pack(Vt, L, D, "Vt", &Vr, &e)) {
        CHECK(0, "pack: %s", e.msg);
        return;
    }
    int bad = 0;
    for (int part = 0; part < 3; part++) {
        for (int n = 0; n < Kw.ntiles * 16; n++)
            for (int k = 0; k < Kw.steps * 32; k++)
                bad += mv_amx_w_at(&Kw, part, n, k) != mv_amx_w_at(Kr, part, n, k);
        for (int n = 0; n < Vw.ntiles * 16; n++)
            for (int k = 0; k < Vw.steps * 32; k++)
                bad += mv_amx_w_at(&Vw, part, n, k) != mv_amx_w_at(Vr, part, n, k);
    }
    CHECK(bad == 0, "strided packing of K [%d, %d] and V^T (in pieces): the row-major packing's bits (%d differ)",
          L, D, bad);
    size_t sc = mv_amx_scratch_bytes(&Vw, m) > mv_amx_scratch_bytes(&Kw, m) ? mv_amx_scratch_bytes(&Vw, m)
                                                                          : mv_amx_scratch_bytes(&Kw, m);
    void *scr = aligned_alloc(64, (sc + 63) / 64 * 64);
    mv_amx_rows(&Kw, s, L, q, D, m, scr);
    mv_amx_w Kb = mv_amx_cols(&Kw, j0, nk), Vb = mv_amx_inputs(&Vw, j0, nk);
    mv_amx_rows(&Kb, sb, nk, q, D, m, scr);
    int same = 1;
    for (int r = 0; r < m; r++)
        same &= !memcmp(s + (size_t)r * L + j0, sb + (size_t)r * nk, sizeof *s * nk);
    CHECK(same, "Q . K^T through the view of keys [%d, %d): the whole product's bytes", j0, j0 + nk);
    mv_amx_rows(&Vb, o, D, p, nk, m, scr);
    double worst = 0;
    for (int r = 0; r < m; r++)
        for (int d = 0; d < D; d++) {
            double t = 0, a = 0;
            for (int k = 0; k < nk; k++) {
                t += (double)p[(size_t)r * nk + k] * V[(size_t)(j0 + k) * D + d];
                a += fabs((double)p[(size_t)r * nk + k] * V[(size_t)(j0 + k) * D + d]);
            }
            double dd = fabs(o[(size_t)r * D + d] - t) / a;
            worst = dd > worst ? dd : worst;
        }
    CHECK(worst < 2e-6, "P . V over keys [%d, %d) through the V^T view: worst error %.2e of sum |p v|", j0,
          j0 + nk, worst);
    free(scr), free(kb), free(vb);
    mv_amx_w_free(Kr), mv_amx_w_free(Vr);
    free(K), free(V), free(Vt), free(q), free(p), free(s), free(sb), free(o);
}

/* mv_amx_refuse: no AMX from then on, with the reason given */
static void check_refuse(void)
{
    const char *why = NULL;
    mv_amx_refuse("refused by test_gemm_amx");
    int have = mv_amx_available(&why);
    CHECK(!have && why && !strcmp(why, "refused by test_gemm_amx"),
          "after mv_amx_refuse: no AMX, with the reason given (%s)", why ? why : "(none)");
}

int main(void)
{
    const char *why = NULL;
    const char *off = getenv("MV_NO_AMX");
    if (off && strcmp(off, "0"))
        mv_amx_refuse("MV_NO_AMX is set");
    int have = mv_amx_available(&why);
    int want = cpu_has("amx_bf16") && cpu_has("amx_tile") && !(off && strcmp(off, "0"));
    CHECK(have == want, "AMX usable (%d) exactly where /proc/cpuinfo has amx_bf16 and amx_tile and "
                        "MV_NO_AMX is not set (%d)%s%s", have, want, have ? "" : ": ", have ? "" : why);
    if (!have) {
        CHECK(why && *why, "without AMX, a reason: %s", why ? why : "(none)");
        check_refuse();
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
    check_views(2116, 72, 736, 736);  /* the middle of 3 key blocks of a 2116-key segment */
    check_views(2116, 72, 1472, 644); /* the last block: a partial k step, od past the keys */
    check_views(1088, 64, 0, 544);
    check_refuse();
    check_views(1500, 72, 768, 732);
    return UNIT_DONE();
}
