/* batch.c - first-fit-decreasing packing of inputs into forwards (see mv_batch.h). */
#include "mv_batch.h"

#include <stdlib.h>

typedef struct {
    int64_t tok;
    int idx;
} sized;

static int by_size_desc(const void *a, const void *b)
{
    const sized *x = a, *y = b;
    if (x->tok != y->tok)
        return x->tok > y->tok ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int mv_pack_ffd(const int64_t *tok, int n, int64_t limit, int *bin, int64_t *bin_tokens)
{
    if (n <= 0)
        return 0;
    if (limit <= 0) {
        for (int i = 0; i < n; i++) {
            bin[i] = i;
            if (bin_tokens)
                bin_tokens[i] = tok[i];
        }
        return n;
    }
    sized *s = malloc((size_t)n * sizeof *s);
    int64_t *fill = malloc((size_t)n * sizeof *fill);
    if (!s || !fill) {
        free(s);
        free(fill);
        return -1;
    }
    for (int i = 0; i < n; i++)
        s[i] = (sized){tok[i], i};
    qsort(s, (size_t)n, sizeof *s, by_size_desc);
    int nb = 0;
    for (int k = 0; k < n; k++) {
        int b = 0;
        while (b < nb && fill[b] + s[k].tok > limit)
            b++;
        if (b == nb)
            fill[nb++] = 0;
        fill[b] += s[k].tok;
        bin[s[k].idx] = b;
    }
    if (bin_tokens)
        for (int b = 0; b < nb; b++)
            bin_tokens[b] = fill[b];
    free(s);
    free(fill);
    return nb;
}

int mv_pack_keep(const int64_t *bin_tokens, const unsigned char *fixed, int nb, int64_t limit,
                 unsigned char *keep)
{
    int full = 0, kept = 0;
    for (int b = 0; b < nb; b++) {
        keep[b] = 0;
        full |= limit > 0 && 2 * bin_tokens[b] >= limit;
    }
    for (int b = 0; full && b < nb; b++)
        if (2 * bin_tokens[b] < limit && !(fixed && fixed[b]))
            kept += keep[b] = 1;
    return kept;
}
