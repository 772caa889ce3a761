/* tower_cpu.c - the Qwen3.5 vision tower in plain C, f32 throughout (OpenBLAS sgemm for the
 * Linear layers, OpenMP loops elsewhere). This is the readable reference: each function below is
 * the CPU twin of a CUDA kernel in cu/, and mv_backend_cpu_create composes them exactly as HF's
 * Qwen3_5VisionModel.forward does (QWEN35_VISION.md section 3):
 *   patch_embed (GEMM + bias) -> + interpolated position table -> depth x pre-LN blocks
 *   (attention with 2D rope per segment, tanh-GELU MLP) -> merger (LN, 2x2 concat, fc1, erf-GELU, fc2).
 * It does not round to bf16 anywhere: it is compared against HF run in f32/f64. */
#include "mv_backend.h"
#include "mv_ops_cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mv_layernorm_cpu(float *out, const float *x, const float *w, const float *b, int64_t n,
                      int dim, float eps)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * dim;
        float *oi = out + i * dim;
        double mean = 0, var = 0;
        for (int d = 0; d < dim; d++)
            mean += xi[d];
        mean /= dim;
        for (int d = 0; d < dim; d++) {
            double t = xi[d] - mean;
            var += t * t;
        }
        var /= dim;
        float rstd = (float)(1.0 / sqrt(var + eps));
        float mu = (float)mean;
        for (int d = 0; d < dim; d++)
            oi[d] = (xi[d] - mu) * rstd * w[d] + b[d];
    }
}

void mv_linear_cpu(float *out, const float *x, const float *W, const float *b, int64_t n, int in,
                   int out_dim)
{
    if (n <= 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, out_dim, in, 1.0f, x, in, W, in,
                0.0f, out, out_dim);
    if (b) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int o = 0; o < out_dim; o++)
                out[i * out_dim + o] += b[o];
    }
}

void mv_gelu_tanh_cpu(float *x, int64_t count)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

void mv_gelu_erf_cpu(float *x, int64_t count)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float v = x[i];
        x[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
    }
}

void mv_act_cpu(mv_act act, float *x, int64_t count)
{
    switch (act) {
    case MV_ACT_GELU_TANH: mv_gelu_tanh_cpu(x, count); break;
    case MV_ACT_GELU_ERF: mv_gelu_erf_cpu(x, count); break;
    case MV_ACT_SILU:
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++)
            x[i] = x[i] / (1.0f + expf(-x[i]));
        break;
    }
}

/* One axis of HF's align_corners bilinear: taps and fp32 weights for position p of n. */
static void pos_axis(int p, int n, int side, int *t0, int *t1, float *w0, float *w1)
{
    float src = (float)p * (float)(side - 1);
    src = src / (float)(n - 1 > 1 ? n - 1 : 1);
    float f0 = floorf(src);
    float d = src - f0;
    int i0 = (int)f0;
    *t0 = i0 < 0 ? 0 : (i0 > side - 1 ? side - 1 : i0);
    *t1 = i0 + 1 < 0 ? 0 : (i0 + 1 > side - 1 ? side - 1 : i0 + 1);
    *w0 = fmaxf(0.0f, 1.0f - d);
    *w1 = fmaxf(0.0f, 1.0f - fabsf(d - 1.0f));
}

void mv_pos_embed_add_cpu(float *out, const float *table, int side, int H, int t, int h, int w,
                          int merge)
{
    int64_t hw = (int64_t)h * w;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < hw; q++) {
        int row, col;
        mv_mb_decode(q, w, merge, &row, &col);
        int r0, r1, c0, c1;
        float wr0, wr1, wc0, wc1;
        pos_axis(row, h, side, &r0, &r1, &wr0, &wr1);
        pos_axis(col, w, side, &c0, &c1, &wc0, &wc1);
        const float *e00 = table + ((int64_t)r0 * side + c0) * H;
        const float *e01 = table + ((int64_t)r0 * side + c1) * H;
        const float *e10 = table + ((int64_t)r1 * side + c0) * H;
        const float *e11 = table + ((int64_t)r1 * side + c1) * H;
        float k00 = wr0 * wc0, k01 = wr0 * wc1, k10 = wr1 * wc0, k11 = wr1 * wc1;
        for (int g = 0; g < t; g++) {
            float *o = out + ((int64_t)g * hw + q) * H;
            for (int d = 0; d < H; d++)
                o[d] += e00[d] * k00 + e01[d] * k01 + e10[d] * k10 + e11[d] * k11;
        }
    }
}

void mv_rope_tables_cpu(float *cos_t, float *sin_t, const int32_t *grid, int n_entries, int D,
                        double theta, int merge)
{
    int Q = D / 4, half = D / 2;
    float inv_freq[256];
    for (int j = 0; j < Q; j++) {
        /* HF: 1.0 / (theta ** (arange(0, dim, 2, float) / dim)) with dim = D/2, all fp32 */
        float ex = (float)(2 * j) / (float)half;
        float pw = (float)pow(theta, (double)ex);
        inv_freq[j] = 1.0f / pw;
    }
    int64_t base = 0;
    for (int en = 0; en < n_entries; en++) {
        int t = grid[3 * en], h = grid[3 * en + 1], w = grid[3 * en + 2];
        int64_t hw = (int64_t)h * w;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < t * hw; i++) {
            int row, col;
            mv_mb_decode(i % hw, w, merge, &row, &col);
            float *c = cos_t + (base + i) * D, *s = sin_t + (base + i) * D;
            for (int j = 0; j < Q; j++) {
                float ah = (float)row * inv_freq[j], aw = (float)col * inv_freq[j];
                float ch = (float)cos((double)ah), sh = (float)sin((double)ah);
                float cw = (float)cos((double)aw), sw = (float)sin((double)aw);
                c[j] = ch; c[Q + j] = cw; c[half + j] = ch; c[half + Q + j] = cw;
                s[j] = sh; s[Q + j] = sw; s[half + j] = sh; s[half + Q + j] = sw;
            }
        }
        base += t * hw;
    }
}

void mv_rope_apply_cpu(float *qkv, const float *cos_t, const float *sin_t, int64_t n, int heads,
                       int D)
{
    int H = heads * D, half = D / 2;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *c = cos_t + i * D, *s = sin_t + i * D;
        for (int part = 0; part < 2; part++) /* q, then k */
            for (int hd = 0; hd < heads; hd++) {
                float *x = qkv + i * 3 * H + part * H + hd * D;
                float tmp[512];
                for (int d = 0; d < half; d++) {
                    tmp[d] = x[d] * c[d] - x[d + half] * s[d];
                    tmp[d + half] = x[d + half] * c[d + half] + x[d] * s[d + half];
                }
                memcpy(x, tmp, D * sizeof(float));
            }
    }
}

int mv_cu_seqlens(const int32_t *grid, int n_entries, int32_t *cu)
{
    int s = 0;
    cu[0] = 0;
    for (int en = 0; en < n_entries; en++)
        for (int g = 0; g < grid[3 * en]; g++) {
            cu[s + 1] = cu[s] + grid[3 * en + 1] * grid[3 * en + 2];
            s++;
        }
    return s;
}

void mv_attention_cpu(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                      int heads, int D)
{
    int H = heads * D;
    float scale = 1.0f / sqrtf((float)D);
    for (int sg = 0; sg < n_seg; sg++) {
        int64_t s0 = cu_seqlens[sg];
        int L = cu_seqlens[sg + 1] - cu_seqlens[sg];
        if (L <= 0)
            continue;
        /* per head: K transposed to [D][L] so the score loop runs over contiguous keys */
        float *kt = malloc((size_t)heads * D * L * sizeof(float));
#pragma omp parallel for schedule(static)
        for (int hd = 0; hd < heads; hd++)
            for (int j = 0; j < L; j++)
                for (int d = 0; d < D; d++)
                    kt[((int64_t)hd * D + d) * L + j] = qkv[(s0 + j) * 3 * H + H + hd * D + d];
#pragma omp parallel
        {
            float *sc = malloc((size_t)L * sizeof(float));
            double *acc = malloc((size_t)D * sizeof(double));
#pragma omp for collapse(2) schedule(dynamic, 16)
            for (int hd = 0; hd < heads; hd++)
                for (int i = 0; i < L; i++) {
                    const float *q = qkv + (s0 + i) * 3 * H + hd * D;
                    const float *K = kt + (int64_t)hd * D * L;
                    for (int j = 0; j < L; j++)
                        sc[j] = 0.0f;
                    for (int d = 0; d < D; d++) {
                        float qd = q[d];
                        const float *kr = K + (int64_t)d * L;
                        for (int j = 0; j < L; j++)
                            sc[j] += qd * kr[j];
                    }
                    float mx = -INFINITY;
                    for (int j = 0; j < L; j++) {
                        sc[j] *= scale;
                        mx = sc[j] > mx ? sc[j] : mx;
                    }
                    double sum = 0;
                    for (int j = 0; j < L; j++) {
                        sc[j] = expf(sc[j] - mx);
                        sum += sc[j];
                    }
                    for (int d = 0; d < D; d++)
                        acc[d] = 0;
                    for (int j = 0; j < L; j++) {
                        const float *v = qkv + (s0 + j) * 3 * H + 2 * H + hd * D;
                        double p = sc[j];
                        for (int d = 0; d < D; d++)
                            acc[d] += p * v[d];
                    }
                    float *o = out + (s0 + i) * H + hd * D;
                    for (int d = 0; d < D; d++)
                        o[d] = (float)(acc[d] / sum);
                }
            free(sc);
            free(acc);
        }
        free(kt);
    }
}

mv_status mv_grid_check(const mv_vision_config *c, const int32_t *grid, int n, int64_t *n_patches,
                        mv_err *e)
{
    int64_t tot = 0;
    for (int i = 0; i < n; i++) {
        int t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        if (t < 1 || h < c->merge || w < c->merge || h % c->merge || w % c->merge ||
            (int64_t)h * w > (1LL << 30))
            return mv_fail(e, MV_ERR_USAGE,
                           "grid %d,%d,%d: t must be >= 1 and h, w multiples of %d (>= %d)", t, h,
                           w, c->merge, c->merge);
        tot += (int64_t)t * h * w;
    }
    *n_patches = tot;
    return MV_OK;
}

/* ---- the backend ------------------------------------------------------------------------ */

static mv_status dump(mv_stage_fn fn, void *ud, const char *stage, const float *x, int64_t rows,
                      int64_t cols, mv_err *e)
{
    return fn ? fn(ud, stage, x, rows, cols, e) : MV_OK;
}

static mv_status cpu_forward(mv_backend *be, const float *pixels, const int32_t *grid,
                             int n_entries, float *out, mv_stage_fn fn, void *ud, mv_err *e)
{
    const mv_model *m = be->model;
    const mv_vision_config *c = &m->cfg;
    int64_t N;
    mv_status st = mv_grid_check(c, grid, n_entries, &N, e);
    if (st)
        return st;
    int H = c->hidden, F = c->inter, D = c->head_dim, mm = c->merge * c->merge;
    int64_t nseg_max = 0;
    for (int i = 0; i < n_entries; i++)
        nseg_max += grid[3 * i];
    float *x = malloc(N * H * sizeof(float));
    float *xn = malloc(N * H * sizeof(float));
    float *qkv = malloc(N * 3 * H * sizeof(float));
    float *big = malloc(N * (F > H * mm ? F : H * mm) * sizeof(float));
    float *cos_t = malloc(N * D * sizeof(float)), *sin_t = malloc(N * D * sizeof(float));
    int32_t *cu = malloc((nseg_max + 1) * sizeof(int32_t));
    if (!x || !xn || !qkv || !big || !cos_t || !sin_t || !cu) {
        st = mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %lld patches", (long long)N);
        goto out;
    }
    if ((st = dump(fn, ud, "pixel_values", pixels, N, c->patch_dim, e)))
        goto out;
    mv_linear_cpu(x, pixels, m->patch_w, m->patch_b, N, c->patch_dim, H);
    if ((st = dump(fn, ud, "patch_embed", x, N, H, e)))
        goto out;
    int64_t base = 0;
    for (int i = 0; i < n_entries; i++) {
        int t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        mv_pos_embed_add_cpu(x + base * H, m->pos_embed, c->pos_side, H, t, h, w, c->merge);
        base += (int64_t)t * h * w;
    }
    if ((st = dump(fn, ud, "embed", x, N, H, e)))
        goto out;
    mv_rope_tables_cpu(cos_t, sin_t, grid, n_entries, D, c->rope_theta, c->merge);
    int nseg = mv_cu_seqlens(grid, n_entries, cu);
    for (int b = 0; b < c->depth; b++) {
        const mv_block *B = &m->blocks[b];
        mv_layernorm_cpu(xn, x, B->norm1_w, B->norm1_b, N, H, c->ln_eps);
        mv_linear_cpu(qkv, xn, B->qkv_w, B->qkv_b, N, H, 3 * H);
        mv_rope_apply_cpu(qkv, cos_t, sin_t, N, c->heads, D);
        mv_attention_cpu(xn, qkv, cu, nseg, c->heads, D);
        mv_linear_cpu(big, xn, B->proj_w, B->proj_b, N, H, H);
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < N * H; k++)
            x[k] += big[k];
        mv_layernorm_cpu(xn, x, B->norm2_w, B->norm2_b, N, H, c->ln_eps);
        mv_linear_cpu(big, xn, B->fc1_w, B->fc1_b, N, H, F);
        mv_act_cpu(c->act, big, N * F);
        mv_linear_cpu(xn, big, B->fc2_w, B->fc2_b, N, F, H);
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < N * H; k++)
            x[k] += xn[k];
        char name[32];
        snprintf(name, sizeof name, "block_%02d", b);
        if ((st = dump(fn, ud, name, x, N, H, e)))
            goto out;
    }
    /* merger: LN per patch row, then 4 consecutive rows (one 2x2 block) form one 4H row */
    mv_layernorm_cpu(xn, x, m->mnorm_w, m->mnorm_b, N, H, c->ln_eps);
    if ((st = dump(fn, ud, "merger_norm", xn, N, H, e)))
        goto out;
    int64_t M = N / mm;
    mv_linear_cpu(big, xn, m->mfc1_w, m->mfc1_b, M, H * mm, H * mm);
    if ((st = dump(fn, ud, "merger_fc1", big, M, H * mm, e)))
        goto out;
    mv_gelu_erf_cpu(big, M * H * mm);
    mv_linear_cpu(out, big, m->mfc2_w, m->mfc2_b, M, H * mm, c->out_hidden);
    st = dump(fn, ud, "output", out, M, c->out_hidden, e);
out:
    free(x);
    free(xn);
    free(qkv);
    free(big);
    free(cos_t);
    free(sin_t);
    free(cu);
    return st;
}

static void cpu_destroy(mv_backend *b) { free(b); }

mv_status mv_backend_cpu_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                mv_err *e)
{
    mv_backend *b = calloc(1, sizeof *b);
    if (!b)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    if (o && o->threads > 0) {
        extern void omp_set_num_threads(int);
        omp_set_num_threads(o->threads);
        openblas_set_num_threads(o->threads);
    }
    b->name = "cpu";
    b->forward = cpu_forward;
    b->destroy = cpu_destroy;
    b->model = m;
    *out = b;
    return MV_OK;
}
