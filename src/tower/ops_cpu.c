/* ops_cpu.c - the CPU tower's elementwise and row operations (mv_ops_cpu.h, tower_cpu_int.h),
 * f32 with the reductions in double where HF's f32 would lose bits: LayerNorm, the tanh and erf
 * GELUs (libm-free, so that the row loops vectorise), SiLU, the Linear layers' epilogues (bias,
 * GELU, residual add), the interpolated position table and the 2D rope tables. Each is the CPU
 * twin of a kernel in cu/, and the row functions are what tower_cpu.c's fused block chain runs on
 * its rows; mv_linear_cpu is the CUDA tests' reference Linear (OpenBLAS on unpacked weights).
 * Results do not depend on the thread count: every reduction is one row's, in one thread, in a
 * fixed order; the row loops are compiled for AVX-512 and AVX2 too (MV_CLONES). Not here: the
 * GEMMs on packed weights (gemm_cpu.c), attention (attention_cpu.c), the forward (tower_cpu.c).
 */
#include "mv_gemm_cpu.h"
#include "mv_ops_cpu.h"
#include "tower_cpu_int.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* no-trapping-math for the row loops: set in tower_cpu_int.h */


/* 0.5 v (1 + tanh(u)) = v / (1 + e^(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3) */
static inline float gelu_tanh_f32(float v)
{
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return v / (1.0f + exp_f32(-2.0f * u));
}

/* e^x in double for x in [-708, 0] (the erf-GELU's range: [-112, 0]), within ~2 ulp of double:
 * n = round(x / ln 2) by the 1.5 * 2^52 trick, r = x - n ln 2 in two parts (fdlibm's), Taylor to
 * r^11 (|r| <= 0.347: truncation 6e-15), 2^n from n's bits; no libm call, so loops vectorise. */
static inline __attribute__((always_inline)) double exp_f64(double x)
{
    x = x < -708.0 ? -708.0 : x;
    union {
        double d;
        int64_t i;
    } u = {.d = x * 1.4426950408889634 + 6755399441055744.0};
    double n = u.d - 6755399441055744.0;
    double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 39916800;
    p = p * r + 1.0 / 3628800;
    p = p * r + 1.0 / 362880;
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    u.i = (u.i - 0x4338000000000000LL + 1023) << 52; /* 2^n */
    return p * u.d;
}

/* 0.5 v (1 + erf(v / sqrt 2)) = v Phi(v), computed in double and rounded once (libm-free, so that
 * loops vectorise; test_gelu_cpu checks it against libm's double erf: <= 1 ulp of the f32 result).
 * With z = |v| / sqrt 2 (erfc(z) = 0 above 10.5: erfc(10.5) = 1.4e-49), t = 2 / (2 + z):
 * erfc(z) = t exp(-z^2 + g(t)), g a degree-12 Chebyshev fit on t in [0.16, 1] (numpy, 400 Chebyshev
 * nodes, max |error| 1.7e-10 on [0, 10.5], the form of Numerical Recipes' erfccheb); then
 * Phi = erfc(z) / 2 for v < 0, 1 - erfc(z) / 2 else. */
static inline __attribute__((always_inline)) float gelu_erf_f32(float v)
{
    double vd = v, za = fabs(vd) * 0.70710678118654752440;
    double z = za > 10.5 ? 10.5 : za;
    double t = 2.0 / (2.0 + z);
    double y = t * 2.3809523809523809 - 1.3809523809523809; /* t in [0.16, 1] -> [-1, 1] */
    /* Clenshaw, unrolled (a loop over a coefficient array kept -O2 from vectorising the caller) */
    double y2 = 2.0 * y, b1 = 2.7335963664766592e-09, b2 = 0.0, tmp;
#define MV_CLENSHAW(ck) (tmp = b1, b1 = y2 * b1 - b2 + (ck), b2 = tmp)
    MV_CLENSHAW(-5.5414192768581577e-09);
    MV_CLENSHAW(-4.6909607703761478e-08);
    MV_CLENSHAW(2.3636369181347938e-07);
    MV_CLENSHAW(5.6615194355752336e-07);
    MV_CLENSHAW(-6.8234661622460206e-06);
    MV_CLENSHAW(-1.8477900128560815e-06);
    MV_CLENSHAW(0.00018777263809518011);
    MV_CLENSHAW(-0.00017890037696904169);
    MV_CLENSHAW(-0.0064951375454084482);
    MV_CLENSHAW(0.007669392760473819);
    MV_CLENSHAW(0.55413574731222182);
#undef MV_CLENSHAW
    double g = y * b1 - b2 - 0.55531095615809045;
    double ec = za > 10.5 ? 0.0 : t * exp_f64(g - z * z);
    return (float)(vd * (vd < 0.0 ? 0.5 * ec : 1.0 - 0.5 * ec));
}

MV_CLONES void mv_cpu_layernorm_row(float *oi, const float *xi, const float *w, const float *b, int dim,
                                    float eps)
{
    double m8[8] = {0}, v8[8] = {0};
    int d = 0;
    for (; d + 8 <= dim; d += 8)
        for (int l = 0; l < 8; l++)
            m8[l] += xi[d + l];
    double mean = 0;
    for (; d < dim; d++)
        mean += xi[d];
    for (int l = 0; l < 8; l++)
        mean += m8[l];
    mean /= dim;
    for (d = 0; d + 8 <= dim; d += 8)
        for (int l = 0; l < 8; l++) {
            double t = xi[d + l] - mean;
            v8[l] += t * t;
        }
    double var = 0;
    for (; d < dim; d++) {
        double t = xi[d] - mean;
        var += t * t;
    }
    for (int l = 0; l < 8; l++)
        var += v8[l];
    var /= dim;
    float rstd = (float)(1.0 / sqrt(var + eps));
    float mu = (float)mean;
#pragma omp simd
    for (d = 0; d < dim; d++)
        oi[d] = (xi[d] - mu) * rstd * w[d] + b[d];
}

void mv_layernorm_cpu(float *out, const float *x, const float *w, const float *b, int64_t n,
                      int dim, float eps)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        mv_cpu_layernorm_row(out + i * dim, x + i * dim, w, b, dim, eps);
}

MV_CLONES void mv_cpu_epilogue_row(float *restrict o, const float *restrict b, int od, cpu_epilogue ep,
                                   float *restrict ri)
{
    /* -O2 vectorises only the simplest loops: omp simd asks for it (o, b, ri never overlap). No
     * bias: + 0.0f all the same (-0 becomes +0, as with a zero bias); a loop of its own, as a
     * stride-0 read of a zero (b[k * bs]) was gathered lane by lane, 16 loads a vector */
    const float zero = 0.0f;
    if (ep == EPI_BIAS && b) {
#pragma omp simd
        for (int k = 0; k < od; k++)
            o[k] += b[k];
    } else if (ep == EPI_GELU && b) {
#pragma omp simd
        for (int k = 0; k < od; k++)
            o[k] = gelu_tanh_f32(o[k] + b[k]);
    } else if (ep == EPI_GELU) {
#pragma omp simd
        for (int k = 0; k < od; k++)
            o[k] = gelu_tanh_f32(o[k] + zero);
    } else if (ep == EPI_RES && b) {
#pragma omp simd
        for (int k = 0; k < od; k++)
            ri[k] += o[k] + b[k];
    } else if (ep == EPI_RES) {
#pragma omp simd
        for (int k = 0; k < od; k++)
            ri[k] += o[k] + zero;
    }
}

/* The twin (CUDA tests' reference): W as stored, through OpenBLAS single-threaded in calls of
 * MV_BLAS_ROW_ATOM rows (mv_blas_rows_nt), in every build. */
void mv_linear_cpu(float *out, const float *x, const float *W, const float *b, int64_t n, int in,
                   int out_dim)
{
    if (n <= 0)
        return;
    mv_blas_single_threaded();
    int P = row_parts(n, omp_get_max_threads(), MV_BLAS_ROW_ATOM);
#pragma omp parallel num_threads(P)
    {
        int64_t r0, r1;
        row_range(n, omp_get_thread_num(), omp_get_num_threads(), MV_BLAS_ROW_ATOM, &r0, &r1);
        mv_blas_rows_nt(out + r0 * out_dim, out_dim, x + r0 * in, in, W, in, out_dim, r1 - r0);
        for (int64_t i = r0; i < r1; i++)
            mv_cpu_epilogue_row(out + i * out_dim, b, out_dim, EPI_BIAS, NULL);
    }
}

void mv_gelu_tanh_cpu(float *x, int64_t count)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++)
        x[i] = gelu_tanh_f32(x[i]);
}

MV_CLONES static void gelu_erf_run(float *x, int64_t count)
{
#pragma omp simd
    for (int64_t i = 0; i < count; i++)
        x[i] = gelu_erf_f32(x[i]);
}

void mv_gelu_erf_cpu(float *x, int64_t count)
{
    int64_t nb = (count + 4095) / 4096; /* elementwise: the cut cannot change a result */
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < nb; j++)
        gelu_erf_run(x + j * 4096, count - j * 4096 < 4096 ? count - j * 4096 : 4096);
}

void mv_cpu_act_row(mv_act act, float *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++) {
        float v = x[i];
        if (act == MV_ACT_GELU_TANH)
            x[i] = gelu_tanh_f32(v);
        else if (act == MV_ACT_GELU_ERF)
            x[i] = gelu_erf_f32(v);
        else
            x[i] = v / (1.0f + expf(-v));
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
