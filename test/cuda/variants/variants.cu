/* variants.cu - the variants build's selection (variants.cuh): mv_variants, set from a test/cuda
 * program's command line, and the GEMM hooks gemm.cu calls under -DMV_VARIANTS. Linked only into
 * the test/cuda programs. Not here: the kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "variants/variants.cuh"

mv_cuda_variants mv_variants = {0, {-1, -1, -1, -1, -1, -1, -1, -1, -1}, -1, 0, 0, 0, 0, 0, 0};

static int parse_int(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < -1 || x > 1 << 30) return -1;
    *v = (int)x;
    return 0;
}

int mv_variants_spec(const char *spec, mv_fa3_cfg *c, int *split)
{
    *c = mv_fa3_cfg{-1, -1, -1, -1, -1, -1, -1, -1, -1};
    *split = -1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        int v;
        if (!eq || parse_int(eq + 1, &v)) return -1;
        *eq = 0;
        int *f = !strcmp(kv, "wg")      ? &c->consumers
                 : !strcmp(kv, "bn")    ? &c->keys
                 : !strcmp(kv, "sw")    ? &c->swizzle
                 : !strcmp(kv, "qr")    ? &c->qreg
                 : !strcmp(kv, "ps")    ? &c->persistent
                 : !strcmp(kv, "st")    ? &c->stages
                 : !strcmp(kv, "rm")    ? &c->rescale_min
                 : !strcmp(kv, "qp")    ? &c->qpad
                 : !strcmp(kv, "tl")    ? &c->tails
                 : !strcmp(kv, "split") ? split
                                        : NULL;
        if (!f) return -1;
        *f = v;
    }
    return 0;
}

void mv_variants_apply(mv_fa3_cfg *c, const mv_fa3_cfg *o)
{
    if (o->consumers >= 0) c->consumers = o->consumers;
    if (o->keys >= 0) c->keys = o->keys;
    if (o->swizzle >= 0) c->swizzle = o->swizzle;
    if (o->qreg >= 0) c->qreg = o->qreg;
    if (o->persistent >= 0) c->persistent = o->persistent;
    if (o->stages >= 0) c->stages = o->stages;
    if (o->rescale_min >= 0) c->rescale_min = o->rescale_min;
    if (o->qpad >= 0) c->qpad = o->qpad;
    if (o->tails >= 0) c->tails = o->tails;
}

const char *mv_variants_name(const mv_fa3_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "wg=%d,bn=%d,sw=%d,qr=%d,ps=%d,st=%d,rm=%d,qp=%d,tl=%d", c->consumers, c->keys, c->swizzle,
             c->qreg, c->persistent, c->stages, c->rescale_min, c->qpad, c->tails);
    return buf;
}

int mv_variants_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--fa3")) {
            bad = !v || mv_variants_spec(v, &mv_variants.fa3, &mv_variants.fa3_split);
            i++;
        } else if (!strcmp(a, "--attn-variant")) {
            bad = !v || parse_int(v, &mv_variants.attn_variant) ||
                  (mv_variants.attn_variant != 1 && mv_variants.attn_variant != 2);
            i++;
        } else if (!strcmp(a, "--gemm-rank")) {
            mv_cuda_variants *m = &mv_variants;
            bad = !v || sscanf(v, "%d,%d,%d", &m->gemm_rank_in, &m->gemm_rank_out, &m->gemm_rank_k) != 3 ||
                  m->gemm_rank_k < 0 || m->gemm_rank_k > 7;
            i++;
        } else if (!strcmp(a, "--gemm-list")) {
            mv_variants.gemm_list = 1;
        } else if (!strcmp(a, "--gemm-bucket")) {
            bad = !v || parse_int(v, &mv_variants.gemm_bucket) || mv_variants.gemm_bucket < 1;
            i++;
        } else if (!strcmp(a, "--no-gelu-fuse")) {
            mv_variants.no_gelu_fuse = 1;
        }
        if (bad) {
            fprintf(stderr, "%s: bad %s %s (test/cuda/variants/variants.cuh)\n", argv[0], a, v ? v : "(missing)");
            return -1;
        }
    }
    return 0;
}

int64_t mv_variants_gemm_rows(int64_t n)
{
    const int64_t b = mv_variants.gemm_bucket;
    return b > 0 ? (n + b - 1) / b * b : n;
}

int mv_variants_gemm_want(void) { return mv_variants.gemm_list || mv_variants.gemm_rank_k ? 8 : 1; }

int mv_variants_gemm_pick(int64_t n, int in, int out, int epi, int acc, int yf32,
                          const cublasLtMatmulHeuristicResult_t *res, int found)
{
    const mv_cuda_variants *m = &mv_variants;
    int pick = 0;
    if (m->gemm_rank_k && in == m->gemm_rank_in && out == m->gemm_rank_out && m->gemm_rank_k < found)
        pick = m->gemm_rank_k;
    for (int i = 0; m->gemm_list && i < found; i++) {
        int id = -1, tile = -1, splitk = -1;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, NULL);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                             NULL);
        fprintf(stderr,
                "gemm plan n %lld in %d out %d epi %d acc %d yf32 %d: answer %d algo %d tile %d splitk %d "
                "waves %.2f%s\n",
                (long long)n, in, out, epi, acc, yf32, i, id, tile, splitk, res[i].wavesCount,
                i == pick ? " (used)" : "");
    }
    return pick;
}
