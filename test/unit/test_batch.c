/* test_batch.c - mv_pack_ffd against properties and an exhaustive oracle: every input in exactly
 * one forward, no forward over the limit unless it holds one oversized input alone, no two
 * forwards both at most half full (first fit never opens a forward that an earlier one could
 * take), and on small sets the forward count within first fit decreasing's proven bound of the
 * optimum found by exhaustive search (11/9 OPT + 6/9, Dosa 2007). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mv_batch.h"
#include "unit.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int64_t rnd(int64_t lo, int64_t hi) /* uniform-ish in [lo, hi] */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* Exhaustive minimum number of bins (n <= 9): tries each item in every open bin or a new one. */
static int best;
static void search(const int64_t *tok, int n, int k, int64_t limit, int64_t *fill, int nb)
{
    if (nb >= best)
        return;
    if (k == n) {
        best = nb;
        return;
    }
    for (int b = 0; b < nb; b++)
        if (fill[b] + tok[k] <= limit) {
            fill[b] += tok[k];
            search(tok, n, k + 1, limit, fill, nb);
            fill[b] -= tok[k];
        }
    fill[nb] = tok[k];
    search(tok, n, k + 1, limit, fill, nb + 1);
}
static int optimum(const int64_t *tok, int n, int64_t limit)
{
    int64_t fill[16];
    best = n + 1;
    search(tok, n, 0, limit, fill, 0);
    return best;
}

/* Checks the invariants of one packing; returns 1 when all hold. */
static int valid(const int64_t *tok, int n, int64_t limit, const int *bin, const int64_t *bt, int nb,
                 char *why, size_t wn)
{
    int64_t sum[600] = {0};
    int count[600] = {0};
    for (int i = 0; i < n; i++) {
        if (bin[i] < 0 || bin[i] >= nb)
            return snprintf(why, wn, "input %d in forward %d of %d", i, bin[i], nb), 0;
        sum[bin[i]] += tok[i];
        count[bin[i]]++;
    }
    int half_full = 0;
    for (int b = 0; b < nb; b++) {
        if (count[b] == 0)
            return snprintf(why, wn, "forward %d empty", b), 0;
        if (sum[b] != bt[b])
            return snprintf(why, wn, "forward %d: reported %lld, holds %lld", b, (long long)bt[b],
                            (long long)sum[b]), 0;
        if (sum[b] > limit && count[b] > 1)
            return snprintf(why, wn, "forward %d over the limit with %d inputs", b, count[b]), 0;
        if (2 * sum[b] <= limit && ++half_full > 1)
            return snprintf(why, wn, "two forwards at most half full"), 0;
    }
    return 1;
}

int main(void)
{
    int bin[600];
    int64_t bt[600], tok[600];
    char why[200] = "";

    /* no limit: one input per forward, in input order */
    int64_t t3[3] = {5, 7, 9};
    int nb = mv_pack_ffd(t3, 3, 0, bin, bt);
    CHECK(nb == 3 && bin[0] == 0 && bin[1] == 1 && bin[2] == 2 && bt[2] == 9,
          "limit 0: one input per forward in input order");
    CHECK_INT_EQ(mv_pack_ffd(t3, 0, 100, bin, bt), 0, "no inputs: no forwards");

    /* an oversized input goes alone; nothing joins it */
    int64_t t4[4] = {10, 500, 20, 30};
    nb = mv_pack_ffd(t4, 4, 100, bin, bt);
    CHECK(nb == 2 && bin[1] == 0 && bt[0] == 500 && bin[0] == 1 && bin[2] == 1 && bin[3] == 1,
          "an input over the limit gets a forward of its own, the rest share one");

    /* arriving as 60 60 40 40, next fit (cut at the first input that does not fit) makes three
     * forwards, [60] [60 40] [40]; first fit decreasing pairs them into two */
    int64_t t5[4] = {60, 60, 40, 40};
    nb = mv_pack_ffd(t5, 4, 100, bin, bt);
    CHECK(nb == optimum(t5, 4, 100) && nb == 2, "60 60 40 40 / 100: %d forwards, optimum 2", nb);

    /* equal sizes keep input order (determinism) */
    int64_t t6[5] = {30, 30, 30, 30, 30};
    nb = mv_pack_ffd(t6, 5, 60, bin, bt);
    CHECK(nb == 3 && bin[0] == 0 && bin[1] == 0 && bin[2] == 1 && bin[3] == 1 && bin[4] == 2,
          "equal sizes are packed in input order");

    /* random small sets against the exhaustive optimum */
    int bad_bound = 0, bad_inv = 0, runs = 0, worst_extra = 0;
    for (int r = 0; r < 3000; r++) {
        int n = (int)rnd(1, 9);
        int64_t limit = rnd(10, 1000);
        for (int i = 0; i < n; i++)
            tok[i] = rnd(1, r % 5 == 0 ? limit + limit / 4 : limit); /* some oversized */
        nb = mv_pack_ffd(tok, n, limit, bin, bt);
        if (!valid(tok, n, limit, bin, bt, nb, why, sizeof why)) {
            if (!bad_inv++)
                printf("# run %d: %s\n", r, why);
            continue;
        }
        int opt = optimum(tok, n, limit);
        if (9 * nb > 11 * opt + 6)
            bad_bound++;
        if (nb - opt > worst_extra)
            worst_extra = nb - opt;
        runs++;
    }
    CHECK(bad_inv == 0, "3000 random sets of 1..9 inputs: every packing valid (%d invalid)", bad_inv);
    CHECK(bad_bound == 0, "forward count within 11/9 OPT + 6/9 of the exhaustive optimum (%d over; "
                          "at most %d forward(s) more than optimal)", bad_bound, worst_extra);

    /* large windows: invariants and the volume lower bound */
    int ok_large = 1;
    for (int r = 0; r < 200 && ok_large; r++) {
        int n = (int)rnd(10, 512);
        int64_t limit = rnd(1000, 40000), total = 0;
        for (int i = 0; i < n; i++)
            total += tok[i] = rnd(4, limit / (int64_t)rnd(1, 8));
        nb = mv_pack_ffd(tok, n, limit, bin, bt);
        ok_large = valid(tok, n, limit, bin, bt, nb, why, sizeof why) && nb >= (total + limit - 1) / limit;
        if (!ok_large)
            printf("# run %d: %s\n", r, why);
    }
    CHECK(ok_large, "200 random windows of 10..512 inputs: valid packings, never below sum/limit");

    /* held back: the sliver of a window past two forwards' worth, not a half-full forward, not
     * an input held back once already, nothing when no forward of the window is half full */
    unsigned char keep[8], fixed[8] = {0};
    int64_t w1[3] = {32256, 32256, 768};
    CHECK(mv_pack_keep(w1, fixed, 3, 32768, keep) == 1 && !keep[0] && !keep[1] && keep[2],
          "two full forwards and one input: the input waits for the next window");
    int64_t w2[2] = {32256, 16384};
    CHECK(mv_pack_keep(w2, fixed, 2, 32768, keep) == 0 && !keep[1], "a forward half full runs");
    fixed[2] = 1;
    CHECK(mv_pack_keep(w1, fixed, 3, 32768, keep) == 0 && !keep[2], "an input held back once runs in the next window");
    int64_t w3[2] = {700, 900};
    CHECK(mv_pack_keep(w3, NULL, 2, 32768, keep) == 0, "a window of slivers only runs them (the queue had no more)");
    CHECK(mv_pack_keep(w1, NULL, 3, 0, keep) == 0, "one input per forward (limit 0): nothing held back");
    /* the oracle: windows of random sizes, kept bins are exactly the under-half ones beside a
     * half-full one */
    int ok_keep = 1;
    for (int r = 0; r < 500 && ok_keep; r++) {
        int n = (int)rnd(1, 60);
        int64_t limit = rnd(100, 40000);
        for (int i = 0; i < n; i++)
            tok[i] = rnd(1, limit);
        nb = mv_pack_ffd(tok, n, limit, bin, bt);
        unsigned char k2[600];
        int kept = mv_pack_keep(bt, NULL, nb, limit, k2), any_half = 0, want = 0;
        for (int b = 0; b < nb; b++)
            any_half |= 2 * bt[b] >= limit;
        for (int b = 0; b < nb; b++) {
            int w = any_half && 2 * bt[b] < limit;
            want += w;
            ok_keep &= k2[b] == w;
        }
        ok_keep &= kept == want && (kept < nb || nb == 0);
    }
    CHECK(ok_keep, "500 random windows: the forwards held back are the under-half ones, never all");
    return UNIT_DONE();
}
