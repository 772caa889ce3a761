/* test_busy.c - mv_busy (src/run/busy.c), the union of a device's busy intervals, against a time line
 * of whole milliseconds marked covered cell by cell (an oracle that shares no code with the
 * merge): empty, one interval, nested and touching ones, and long runs of overlapping, nearly
 * ordered intervals (forwards in flight) past MV_BUSY_MAX, where older ones are folded away; the
 * memory kept stays bounded; the first start and last end are the intervals' own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mv_busy.h"
#include "unit.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int rnd(int lo, int hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int)(rng % (uint64_t)(hi - lo + 1));
}

/* covered milliseconds of the intervals [s[i], e[i]) on a time line of `span` cells */
static long cells(const int *s, const int *e, int n, int span)
{
    unsigned char *t = calloc(span, 1);
    for (int i = 0; i < n; i++)
        for (int c = s[i]; c < e[i]; c++)
            t[c] = 1;
    long k = 0;
    for (int c = 0; c < span; c++)
        k += t[c];
    free(t);
    return k;
}

static void run(const char *what, const int *s, const int *e, int n, int span)
{
    mv_busy b = {0};
    int fail = 0;
    for (int i = 0; i < n; i++)
        fail |= mv_busy_add(&b, s[i] * 1e-3, e[i] * 1e-3);
    size_t cap = b.cap;
    double got = mv_busy_seconds(&b), want = cells(s, e, n, span) * 1e-3;
    CHECK(!fail && got > want - 1e-6 && got < want + 1e-6, "%s: %d intervals cover %.3f s (time line: %.3f s)",
          what, n, got, want);
    CHECK(cap <= MV_BUSY_MAX, "%s: at most %d intervals kept (capacity %zu)", what, MV_BUSY_MAX, cap);
    int lo = s[0], hi = e[0];
    for (int i = 1; i < n; i++)
        lo = s[i] < lo ? s[i] : lo, hi = e[i] > hi ? e[i] : hi;
    CHECK(b.first > lo * 1e-3 - 1e-9 && b.first < lo * 1e-3 + 1e-9 && b.last > hi * 1e-3 - 1e-9 &&
              b.last < hi * 1e-3 + 1e-9,
          "%s: first start %.3f s, last end %.3f s (of the intervals: %.3f, %.3f)", what, b.first, b.last,
          lo * 1e-3, hi * 1e-3);
    mv_busy_free(&b);
}

int main(void)
{
    mv_busy b = {0};
    CHECK(mv_busy_seconds(&b) == 0, "no intervals: 0 s");
    mv_busy_free(&b);
    int s1[] = {10}, e1[] = {25};
    run("one interval", s1, e1, 1, 100);
    int s2[] = {10, 12, 30, 40, 40, 5}, e2[] = {20, 15, 40, 50, 45, 8};
    run("nested, touching and out of order", s2, e2, 6, 100);
    /* forwards in flight: each starts a little after the previous one started and may end after
     * the next one starts (1 to 4 overlapping), far more than MV_BUSY_MAX of them */
    for (int rep = 0; rep < 4; rep++) {
        int n = rep == 0 ? 300 : 3 * MV_BUSY_MAX + rnd(0, 999);
        int *s = malloc(n * sizeof *s), *e = malloc(n * sizeof *e), t = 0;
        for (int i = 0; i < n; i++) {
            t += rnd(0, 40);
            s[i] = t;
            e[i] = t + rnd(1, 120);
        }
        /* neighbours swapped now and then: intervals reach the counter out of order */
        for (int i = 0; i + 1 < n; i += rnd(2, 9)) {
            int a = s[i], c = e[i];
            s[i] = s[i + 1], e[i] = e[i + 1], s[i + 1] = a, e[i + 1] = c;
        }
        int span = 0;
        for (int i = 0; i < n; i++)
            span = e[i] > span ? e[i] : span;
        run(rep == 0 ? "300 overlapping forwards" : "more overlapping forwards than are kept", s, e, n, span + 1);
        free(s);
        free(e);
    }
    return UNIT_DONE();
}
