/* busy.c - the union of time intervals in bounded memory (see mv_busy.h). Not thread-safe: the
 * caller locks. */
#include "mv_busy.h"

#include <stdlib.h>
#include <string.h>

static int iv_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts iv[0..n) and merges it into disjoint intervals in place; returns their count. */
static size_t iv_merge(double (*iv)[2], size_t n)
{
    if (n == 0) /* iv may be NULL then, which qsort must not get */
        return 0;
    qsort(iv, n, sizeof *iv, iv_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && iv[i][0] <= iv[m - 1][1]) {
            if (iv[i][1] > iv[m - 1][1])
                iv[m - 1][1] = iv[i][1];
        } else {
            iv[m][0] = iv[i][0];
            iv[m++][1] = iv[i][1];
        }
    }
    return m;
}

int mv_busy_add(mv_busy *b, double t0, double t1)
{
    if (b->n == MV_BUSY_MAX) {
        size_t m = iv_merge(b->iv, b->n);
        size_t fold = m > MV_BUSY_KEEP ? m - MV_BUSY_KEEP : 0;
        for (size_t i = 0; i < fold; i++)
            b->folded += b->iv[i][1] - b->iv[i][0];
        memmove(b->iv, b->iv + fold, (m - fold) * sizeof *b->iv);
        b->n = m - fold;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        void *p = realloc(b->iv, cap * sizeof *b->iv);
        if (!p)
            return -1;
        b->iv = p;
        b->cap = cap;
    }
    int any = b->n > 0 || b->folded > 0;
    if (!any || t0 < b->first)
        b->first = t0;
    if (!any || t1 > b->last)
        b->last = t1;
    b->iv[b->n][0] = t0;
    b->iv[b->n++][1] = t1;
    return 0;
}

double mv_busy_seconds(mv_busy *b)
{
    b->n = iv_merge(b->iv, b->n);
    double total = b->folded;
    for (size_t i = 0; i < b->n; i++)
        total += b->iv[i][1] - b->iv[i][0];
    return total;
}

void mv_busy_free(mv_busy *b)
{
    free(b->iv);
    memset(b, 0, sizeof *b);
}
