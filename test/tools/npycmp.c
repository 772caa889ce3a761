/* npycmp - compares two .npy (or .npy.zst) arrays of the same element count.
 *
 *   npycmp [--max-abs X] [--max-rel X] [--min-cos X] [--exact] A B
 *
 * B is the reference. Prints "max_abs=.. rel_l2=.. min_row_cos=.. rows=.. cols=.." where rel_l2 =
 * ||A-B|| / ||B|| and min_row_cos is the smallest cosine between matching rows (last axis).
 * Exits 1 when a given limit is exceeded (or any NaN), 2 on usage / read errors. */
#include "mv_npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load64(const char *p, mv_array *a, double **out)
{
    mv_err e;
    if (mv_npy_load(p, a, &e)) {
        fprintf(stderr, "npycmp: %s\n", e.msg);
        return -1;
    }
    double *d = malloc((a->count ? a->count : 1) * sizeof *d);
    for (int64_t i = 0; i < a->count; i++) {
        switch (a->dtype) {
        case MV_DT_F32: d[i] = ((float *)a->data)[i]; break;
        case MV_DT_F64: d[i] = ((double *)a->data)[i]; break;
        case MV_DT_F16: d[i] = mv_f16_to_f32(((uint16_t *)a->data)[i]); break;
        case MV_DT_I64: d[i] = (double)((int64_t *)a->data)[i]; break;
        case MV_DT_I32: d[i] = ((int32_t *)a->data)[i]; break;
        case MV_DT_U8: d[i] = ((uint8_t *)a->data)[i]; break;
        case MV_DT_BF16: d[i] = mv_bf16_to_f32(((uint16_t *)a->data)[i]); break;
        case MV_DT_AUTO: d[i] = 0; break; /* no array has it */
        }
    }
    *out = d;
    return 0;
}

int main(int argc, char **argv)
{
    double max_abs = -1, max_rel = -1, min_cos = -2;
    int exact = 0, i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        if (!strcmp(argv[i], "--exact"))
            exact = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--max-abs"))
            max_abs = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--max-rel"))
            max_rel = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--min-cos"))
            min_cos = atof(argv[++i]);
        else {
            fprintf(stderr, "npycmp: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: npycmp [--max-abs X] [--max-rel X] [--min-cos X] [--exact] A B\n");
        return 2;
    }
    mv_array A, B;
    double *a, *b;
    if (load64(argv[i], &A, &a))
        return 2;
    if (load64(argv[i + 1], &B, &b)) {
        free(a);
        mv_array_free(&A);
        return 2;
    }
    if (A.count != B.count) {
        fprintf(stderr, "npycmp: %s has %lld elements, %s has %lld\n", argv[i], (long long)A.count,
                argv[i + 1], (long long)B.count);
        free(a);
        free(b);
        mv_array_free(&A);
        mv_array_free(&B);
        return 1;
    }
    int64_t cols = B.ndim ? B.shape[B.ndim - 1] : 1;
    if (cols <= 0)
        cols = 1;
    int64_t rows = B.count / cols;
    double mabs = 0, dn = 0, bn = 0, mcos = 1;
    int64_t ndiff = 0, nan = 0;
    for (int64_t r = 0; r < rows; r++) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t c = 0; c < cols; c++) {
            double x = a[r * cols + c], y = b[r * cols + c];
            if (isnan(x) != isnan(y) || (isnan(x) && isnan(y)))
                nan++;
            double d = fabs(x - y);
            if (d > mabs)
                mabs = d;
            if (x != y)
                ndiff++;
            dn += d * d;
            bn += y * y;
            ab += x * y;
            aa += x * x;
            bb += y * y;
        }
        double cs = (aa == 0 && bb == 0) ? 1.0 : ab / (sqrt(aa) * sqrt(bb) + 1e-300);
        if (cs < mcos)
            mcos = cs;
    }
    double rel = bn > 0 ? sqrt(dn) / sqrt(bn) : sqrt(dn);
    printf("max_abs=%.6g rel_l2=%.6g min_row_cos=%.9f rows=%lld cols=%lld differing=%lld\n", mabs,
           rel, mcos, (long long)rows, (long long)cols, (long long)ndiff);
    int fail = nan > 0;
    if (nan)
        printf("FAIL: %lld NaN mismatches\n", (long long)nan);
    if (exact && ndiff) {
        printf("FAIL: %lld elements differ (--exact)\n", (long long)ndiff);
        fail = 1;
    }
    if (max_abs >= 0 && mabs > max_abs) {
        printf("FAIL: max_abs %.6g > %.6g\n", mabs, max_abs);
        fail = 1;
    }
    if (max_rel >= 0 && rel > max_rel) {
        printf("FAIL: rel_l2 %.6g > %.6g\n", rel, max_rel);
        fail = 1;
    }
    if (min_cos > -2 && mcos < min_cos) {
        printf("FAIL: min_row_cos %.9f < %.9f\n", mcos, min_cos);
        fail = 1;
    }
    free(a);
    free(b);
    mv_array_free(&A);
    mv_array_free(&B);
    return fail;
}
