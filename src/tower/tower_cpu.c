/* tower_cpu.c - the Qwen3.5 vision tower in plain C, f32 throughout (the Linear layers and
 * attention's two products through gemm_cpu.c: oneDNN against weights packed at backend creation,
 * or OpenBLAS in a NO_DNNL build; with --cpu-gemm bf16x6 the Linear layers through the AMX
 * kernel, gemm_amx.c, and the row-local chain of each block in 128-row chunks; OpenMP loops
 * elsewhere). This is the readable
 * reference: each function below is the CPU twin of a CUDA kernel in cu/, and
 * mv_backend_cpu_create composes them exactly as HF's Qwen3_5VisionModel.forward does
 * (QWEN35_VISION.md section 3):
 *   patch_embed (GEMM + bias) -> + interpolated position table -> depth x pre-LN blocks
 *   (attention with 2D rope per segment, tanh-GELU MLP) -> merger (LN, 2x2 concat, fc1, erf-GELU, fc2).
 * It does not round to bf16 anywhere (--cpu-gemm bf16x6 splits each f32 operand exactly into
 * three bf16 parts inside the GEMM, at f32's accuracy): it is compared against HF run in f32/f64.
 * Attention is in attention_cpu.c, what the two files share in tower_cpu_int.h.
 *
 * Threads: one pool. The GEMM libraries run single-threaded (mv_gemm_cpu.h); every parallel
 * loop is ours (OpenMP), and each GEMM call is made by one thread on a block of rows, so two
 * pools never fight over the cores. Results do not depend on the thread count: no reduction is
 * ever split across threads. A GEMM's rows are split at multiples of mv_gemm_row_atom, each
 * row's dot products are summed by single-threaded calls that give a row the same bytes wherever
 * such cuts fall (mv_gemm_cpu.h); attention works on fixed (segment, head, ATT_QB-query) items,
 * each walking its segment's keys in blocks that depend on the segment length alone; LayerNorm
 * and softmax reduce one row in one thread in a fixed order. It is not a bf16 model of the GPU
 * path. */
#include "mv_backend.h"
#include "mv_gemm_cpu.h"
#include "mv_ops_cpu.h"
#include "mv_plan.h"
#include "mv_preprocess.h"
#include "tower_cpu_int.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

/* One row: mean and variance in double, 8 partial sums in a fixed order (vectorises). */
MV_CLONES static void layernorm_row(float *oi, const float *xi, const float *w, const float *b, int dim,
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
        layernorm_row(out + i * dim, x + i * dim, w, b, dim, eps);
}

/* What a GEMM's thread does to its rows after the sgemm, while they are still in cache. b may be
 * NULL (no bias). */
typedef enum {
    EPI_BIAS, /* out += b */
    EPI_GELU, /* out = gelu_tanh(out + b) */
    EPI_RES,  /* res += out + b (out is scratch) */
} epilogue;

MV_CLONES static void epilogue_row(float *restrict o, const float *restrict b, int od, epilogue ep,
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

/* out[n, od] = x[n, in] . W[od, in]^T, then the epilogue. Rows go to threads in contiguous
 * ranges cut at multiples of a row atom; each thread makes one single-threaded GEMM call. */
/* A failure inside a parallel region: the first one is kept. */
typedef struct {
    mv_status st;
    mv_err e;
} par_err;

static void par_fail(par_err *pe, mv_status st, const mv_err *e)
{
#pragma omp critical(mv_tower_cpu_err)
    if (!pe->st) {
        pe->st = st;
        pe->e = *e;
    }
}

#ifndef LIN_CHUNK /* -D only for measurements */
#define LIN_CHUNK 128
#endif

/* Rows per GEMM call (and per step of the block chain) on rows [r0, r1): LIN_CHUNK where a row's
 * bytes do not depend on its call (bf16x6, OpenBLAS: mv_gemm_w_rows_free), so that each chunk's
 * outputs are still in L2 for the next step (the AMX kernel streams the weights once per 128 rows
 * anyway: its M block; a thread's whole range at once left the GELU epilogue reading ~27 MB of
 * fc1 outputs back from memory, 4.5 % of a 4 x 448² forward on 2 cores); else all of them at once
 * (oneDNN f32: its row bytes may depend on a call's row count). At least 1. */
_Static_assert(LIN_CHUNK % MV_GEMM_ROW_ATOM_FREE == 0 && LIN_CHUNK % MV_BLAS_ROW_ATOM == 0,
               "LIN_CHUNK: a multiple of every GEMM row atom");
static int64_t row_chunk(const mv_gemm_w *w, int64_t r0, int64_t r1)
{
    return mv_gemm_w_rows_free(w) ? LIN_CHUNK : r1 > r0 ? r1 - r0 : 1;
}

/* Rows [r0, r1) of x . W^T (weights w packed), one single-threaded GEMM on the calling thread
 * (slot omp_get_thread_num() of ws), then the epilogue on those rows while they are in cache.
 * o: row r0's output, row stride ldo; xi: row r0's input, row stride ldx; res (EPI_RES) is
 * indexed by the global row, stride od. Keep outputs dense (ldo = od): oneDNN's brgemm matmul
 * takes strided sources but not strided destinations (it falls back to a slow reference). */
static mv_status linear_block(mv_gemm_ws *ws, const mv_gemm_w *w, float *o, int64_t ldo,
                              const float *xi, int64_t ldx, const float *b, int64_t r0, int64_t r1,
                              int od, epilogue ep, float *res, mv_err *e)
{
    /* calls of row_chunk rows, each one's epilogue right after it (linear_rows: the patch
     * embedding and the merger; the block chain's chunks are no larger already) */
    int64_t ch = row_chunk(w, r0, r1);
    for (int64_t c0 = r0; c0 < r1; c0 += ch) {
        int64_t c1 = r1 - c0 < ch ? r1 : c0 + ch;
        float *oc = o + (c0 - r0) * ldo;
        mv_status st = mv_gemm_rows(ws, omp_get_thread_num(), w, oc, ldo, xi + (c0 - r0) * ldx, ldx,
                                    c1 - c0, e);
        if (st)
            return st;
        for (int64_t i = 0; i < c1 - c0; i++)
            epilogue_row(oc + i * ldo, b, od, ep, res ? res + (c0 + i) * od : NULL);
    }
    return MV_OK;
}

/* The same on dense matrices out[n, od], x[n, in]. */
static mv_status linear_range(mv_gemm_ws *ws, const mv_gemm_w *w, float *out, const float *x,
                              const float *b, int64_t r0, int64_t r1, int in, int od, epilogue ep,
                              float *res, mv_err *e)
{
    return linear_block(ws, w, out + r0 * od, od, x + r0 * in, in, b, r0, r1, od, ep, res, e);
}

/* out[n, od] = x[n, in] . W^T + b (w packed); rows split by row_parts/row_range at the GEMM
 * library's row atom. */
static mv_status linear_rows(mv_gemm_ws *ws, const mv_gemm_w *w, float *out, const float *x,
                             const float *b, int64_t n, int in, int od, int atom, mv_err *e)
{
    if (n <= 0)
        return MV_OK;
    par_err pe = {0};
    int P = row_parts(n, omp_get_max_threads(), atom);
#pragma omp parallel num_threads(P)
    {
        int64_t r0, r1;
        mv_err te;
        row_range(n, omp_get_thread_num(), omp_get_num_threads(), atom, &r0, &r1);
        mv_status st = linear_range(ws, w, out, x, b, r0, r1, in, od, EPI_BIAS, NULL, &te);
        if (st)
            par_fail(&pe, st, &te);
    }
    if (pe.st)
        *e = pe.e;
    return pe.st;
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
            epilogue_row(out + i * out_dim, b, out_dim, EPI_BIAS, NULL);
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

/* act in place on one row (the non-tanh activations; tanh-GELU is fused into fc1's epilogue) */
static void act_row(mv_act act, float *x, int64_t count)
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

/* ---- the backend ------------------------------------------------------------------------ */

static mv_status dump(mv_stage_fn fn, void *ud, const char *stage, const float *x, int64_t rows,
                      int64_t cols, mv_err *e)
{
    return fn ? fn(ud, stage, x, rows, cols, e) : MV_OK;
}

/* A forward's activations are kept between forwards up to this many bytes: allocating and
 * first-touching them again (page faults: ~230 MB at 4096 patches) cost each forward time. */
#define KEEP_BYTES ((size_t)1 << 30)

/* The backend's state: the thread count, every Linear layer's packed weights, and the
 * activation buffer and GEMM workspace kept between forwards (the workspace holds bf16x6's
 * split rows, tens of MB per thread: made anew per forward, its first touch cost ~7 % of a
 * 4 x 448^2 forward on 2 cores in page faults). */
typedef struct {
    int threads;
    mv_gemm_cpu *g;
    mv_gemm_w *patch, *mfc1, *mfc2;
    mv_gemm_w **blk;    /* depth x {qkv, proj, fc1, fc2, fc1's second half} */
    int fc1_f1;         /* fc1's outputs in W_FC1, the rest in W_FC1B (fc1_split; set by pack_all) */
    pthread_mutex_t mu; /* one forward at a time uses buf */
    float *buf;         /* cap floats, 64-byte aligned; NULL after a forward larger than KEEP_BYTES */
    size_t cap;
    mv_gemm_ws *ws;     /* ws_slots thread slots; NULL after a forward larger than KEEP_BYTES */
    int ws_slots;
    char settings[256]; /* mv_backend_settings */
} cpu_impl;

/* W_FC1B: where a row's bytes do not depend on the call (bf16x6), fc1 is packed as two halves of
 * its outputs, W_FC1 [0, fc1_split) and W_FC1B [fc1_split, F), each GEMM'd and GELU'd in turn: a
 * 128-row chunk's half (1.1 MB) is still in L2 for its epilogue, the whole (2.2 MB) was not. */
enum { W_QKV, W_PROJ, W_FC1, W_FC2, W_FC1B, W_PER_BLOCK };

/* fc1's outputs [0, F1) in W_FC1, [F1, F) in W_FC1B: F1 about F / 2 at a multiple of 16 (the AMX
 * kernel's tile: a column's bytes are the same in either call) where rows are free (w: a packed
 * weight of the same mode), else F (one weight). */
static int fc1_split(const mv_gemm_w *w, int F)
{
    int F1 = F / 2 / 16 * 16;
    return mv_gemm_w_rows_free(w) && F1 >= 16 ? F1 : F;
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
    mv_plan plan; /* segments and cu_seqlens: src/tower/plan.c, as the CUDA backend plans them */
    if ((st = mv_plan_segments(&plan, c, grid, n_entries, 0, e)))
        return st;
    cpu_impl *ci = be->impl;
    omp_set_num_threads(ci->threads); /* this thread's parallel regions (the tower thread) */
    int T = omp_get_max_threads();
    const int atom = mv_gemm_row_atom(ci->g); /* thread cuts of every GEMM (mv_gemm_cpu.h) */
    int nseg = plan.nseg;
    int32_t *cu = malloc((nseg + 1) * sizeof(int32_t));
    if (!cu) {
        mv_plan_free(&plan);
        return mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %d segments", nseg);
    }
    if ((st = mv_plan_cu_seqlens(&plan, 0, nseg, cu, e))) {
        free(cu);
        mv_plan_free(&plan);
        return st;
    }
    const int amx = 0; /* attention on the f32 sgemm in both modes (AMX: cpubench's variants build) */
    /* the activations, carved from ci->buf (each part a multiple of 16 floats: 64-byte aligned):
     * x, xn [N, H]; qkv, hm [N, 3H] (hm head-major, split_heads); big [N, max(F, H mm)] (fc1
     * outputs, merger); cos_t, sin_t [N, D]; attention's scratch [T, its floats per thread] and
     * (bf16x6) its packed K and V^T */
    size_t sz[9] = {N * H, N * H, N * 3 * H, N * 3 * H, N * (F > H * mm ? F : H * mm), N * D, N * D,
                    (size_t)T * mv_cpu_attention_scratch_floats(D, amx),
                    (mv_cpu_attention_pack_bytes(cu, nseg, c->heads, D, amx) + sizeof(float) - 1) /
                        sizeof(float)};
    size_t off[9], tot = 0;
    for (int k = 0; k < 9; k++) {
        off[k] = tot;
        tot += (sz[k] + 15) / 16 * 16;
    }
    par_err pe = {0};
    pthread_mutex_lock(&ci->mu);
    if (tot > ci->cap) {
        free(ci->buf);
        ci->cap = 0;
        if ((ci->buf = aligned_alloc(64, tot * sizeof(float))))
            ci->cap = tot;
    }
    if (!ci->buf) {
        st = mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %lld patches", (long long)N);
        goto out;
    }
    float *x = ci->buf + off[0], *xn = ci->buf + off[1], *qkv = ci->buf + off[2], *hm = ci->buf + off[3];
    float *big = ci->buf + off[4], *cos_t = ci->buf + off[5], *sin_t = ci->buf + off[6];
    float *scratch = ci->buf + off[7];
    void *pack = ci->buf + off[8];
    if (ci->ws && ci->ws_slots < T) {
        mv_gemm_ws_destroy(ci->ws);
        ci->ws = NULL;
    }
    if (!ci->ws) {
        if ((st = mv_gemm_ws_create(ci->g, T, &ci->ws, e)))
            goto out;
        ci->ws_slots = T;
    }
    mv_gemm_ws *ws = ci->ws;
    if ((st = dump(fn, ud, "pixel_values", pixels, N, c->patch_dim, e)))
        goto out;
    if ((st = linear_rows(ws, ci->patch, x, pixels, m->patch_b, N, c->patch_dim, H, atom, e)))
        goto out;
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
    /* Per block: x = x + proj(attn(rope(qkv(LN1(x))))); x = x + fc2(act(fc1(LN2(x)))). Everything
     * but attention is row-local, so each thread runs the chain on its own rows with no barrier:
     * [proj + residual, LN2, fc1 + GELU, fc2 + residual] of block b, then [LN1, qkv, rope + head
     * split] of block b + 1; attention, which needs every row of a segment, sits between. */
    const int64_t LB = F > H ? F : H; /* row stride of big for proj and fc1 outputs */
    int P = row_parts(N, T, atom);
    const int F1 = ci->fc1_f1; /* fc1's split, the same in every block */
    for (int b = 0; b <= c->depth; b++) {
        const mv_block *B = b > 0 ? &m->blocks[b - 1] : NULL, *Bn = b < c->depth ? &m->blocks[b] : NULL;
        mv_gemm_w *const *WB = B ? ci->blk + (size_t)(b - 1) * W_PER_BLOCK : NULL;
        mv_gemm_w *const *WBn = Bn ? ci->blk + (size_t)b * W_PER_BLOCK : NULL;
#pragma omp parallel num_threads(P)
        {
            int64_t r0, r1;
            mv_err te;
            mv_status ts = MV_OK;
            row_range(N, omp_get_thread_num(), omp_get_num_threads(), atom, &r0, &r1);
            /* the chain on chunks of row_chunk rows: each chunk's activations stay in L2 from
             * one step to the next */
            const int64_t ch = row_chunk(B ? WB[W_PROJ] : Bn ? WBn[W_QKV] : NULL, r0, r1);
            for (int64_t c0 = r0; c0 < r1 && !ts; c0 += ch) {
                const int64_t c1 = r1 - c0 < ch ? r1 : c0 + ch;
                if (B) { /* the rest of block b - 1; xn holds its attention output */
                    /* big is scratch for proj's and fc1's outputs: this thread owns its rows
                     * [r0, r1) at row stride LB, bt, and uses them densely for each chunk
                     * (proj's [c1 - c0, H], then fc1's [c1 - c0, F]), so no thread's rows
                     * overlap another's */
                    float *bt = big + r0 * LB;
                    ts = linear_block(ws, WB[W_PROJ], bt, H, xn + c0 * H, H, B->proj_b, c0, c1, H,
                                      EPI_RES, x, &te);
                    for (int64_t i = c0; !ts && i < c1; i++)
                        layernorm_row(xn + i * H, x + i * H, B->norm2_w, B->norm2_b, H, c->ln_eps);
                    epilogue ep1 = c->act == MV_ACT_GELU_TANH ? EPI_GELU : EPI_BIAS;
                    if (!ts)
                        ts = linear_block(ws, WB[W_FC1], bt, F, xn + c0 * H, H, B->fc1_b, c0, c1, F1,
                                          ep1, NULL, &te);
                    if (!ts && F1 < F)
                        ts = linear_block(ws, WB[W_FC1B], bt + F1, F, xn + c0 * H, H,
                                          B->fc1_b ? B->fc1_b + F1 : NULL, c0, c1, F - F1, ep1, NULL,
                                          &te);
                    if (!ts && c->act != MV_ACT_GELU_TANH)
                        for (int64_t i = 0; i < c1 - c0; i++)
                            act_row(c->act, bt + i * F, F);
                    if (!ts)
                        ts = linear_block(ws, WB[W_FC2], xn + c0 * H, H, bt, F, B->fc2_b, c0, c1, H,
                                          EPI_RES, x, &te);
                }
                if (Bn && !ts) { /* the start of block b */
                    for (int64_t i = c0; i < c1; i++)
                        layernorm_row(xn + i * H, x + i * H, Bn->norm1_w, Bn->norm1_b, H, c->ln_eps);
                    ts = linear_range(ws, WBn[W_QKV], qkv, xn, Bn->qkv_b, c0, c1, H, 3 * H, EPI_BIAS,
                                      NULL, &te);
                    if (!ts)
                        mv_cpu_split_heads_range(hm, qkv, cos_t, sin_t, N, c0, c1, c->heads, D);
                }
            }
            if (ts)
                par_fail(&pe, ts, &te);
        }
        if (pe.st) {
            *e = pe.e;
            st = pe.st;
            goto out;
        }
        if (B) {
            char name[32];
            snprintf(name, sizeof name, "block_%02d", b - 1);
            if ((st = dump(fn, ud, name, x, N, H, e)))
                goto out;
        }
        if (Bn && mv_cpu_attention(xn, hm, N, cu, nseg, c->heads, D, amx, scratch, pack)) {
            st = mv_fail(e, MV_ERR_INTERNAL, "cpu tower: %s failed in attention of block %d",
                         mv_gemm_cpu_name(ci->g), b);
            goto out;
        }
    }
    /* merger: LN per patch row, then 4 consecutive rows (one 2x2 block) form one 4H row */
    mv_layernorm_cpu(xn, x, m->mnorm_w, m->mnorm_b, N, H, c->ln_eps);
    if ((st = dump(fn, ud, "merger_norm", xn, N, H, e)))
        goto out;
    int64_t M = N / mm;
    if ((st = linear_rows(ws, ci->mfc1, big, xn, m->mfc1_b, M, H * mm, H * mm, atom, e)))
        goto out;
    if ((st = dump(fn, ud, "merger_fc1", big, M, H * mm, e)))
        goto out;
    mv_gelu_erf_cpu(big, M * H * mm);
    if ((st = linear_rows(ws, ci->mfc2, out, big, m->mfc2_b, M, H * mm, c->out_hidden, atom, e)))
        goto out;
    st = dump(fn, ud, "output", out, M, c->out_hidden, e);
out:
    if (ci->cap * sizeof(float) > KEEP_BYTES) { /* a rare large forward: not kept */
        free(ci->buf);
        ci->buf = NULL;
        ci->cap = 0;
        mv_gemm_ws_destroy(ci->ws);
        ci->ws = NULL;
    }
    pthread_mutex_unlock(&ci->mu);
    free(cu);
    mv_plan_free(&plan);
    return st;
}

/* forward_u8: mv_patchify (the CPU twin of cu/patchify.cu) of every entry's frames into one
 * pixel_values tensor [N, patch_dim], then the f32 forward. */
static mv_status cpu_forward_u8(mv_backend *be, const uint8_t *frames, const int32_t *n_frames,
                                const int32_t *grid, int n_entries, float *out, mv_stage_fn fn,
                                void *ud, mv_err *e)
{
    const mv_model *m = be->model;
    const mv_vision_config *c = &m->cfg;
    const mv_preproc_config *pp = &m->pp;
    int64_t N;
    mv_status st = mv_frames_check(m, n_frames, grid, n_entries, &N, NULL, e);
    if (st)
        return st;
    int max_nf = 0;
    for (int i = 0; i < n_entries; i++)
        max_nf = n_frames[i] > max_nf ? n_frames[i] : max_nf;
    float *pix = malloc((size_t)N * c->patch_dim * sizeof(float));
    const uint8_t **fp = malloc((size_t)(max_nf ? max_nf : 1) * sizeof *fp);
    if (!pix || !fp) {
        free(pix);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %lld x %d pixel values",
                       (long long)N, c->patch_dim);
    }
    omp_set_num_threads(((const cpu_impl *)be->impl)->threads); /* mv_patchify's loop: this backend's threads */
    const uint8_t *src = frames;
    int64_t row = 0;
    for (int i = 0; i < n_entries; i++) {
        int h = grid[3 * i + 1] * c->patch, w = grid[3 * i + 2] * c->patch;
        size_t fsz = (size_t)h * w * 3;
        for (int f = 0; f < n_frames[i]; f++)
            fp[f] = src + fsz * f;
        int32_t g[3];
        mv_patchify(fp, n_frames[i], h, w, pp, pix + row * c->patch_dim, g);
        src += fsz * n_frames[i];
        row += (int64_t)g[0] * g[1] * g[2];
    }
    free(fp);
    st = cpu_forward(be, pix, grid, n_entries, out, fn, ud, e);
    free(pix);
    return st;
}

static void cpu_impl_free(cpu_impl *ci, int depth)
{
    if (!ci)
        return;
    mv_gemm_w_free(ci->patch);
    mv_gemm_w_free(ci->mfc1);
    mv_gemm_w_free(ci->mfc2);
    for (int k = 0; ci->blk && k < depth * W_PER_BLOCK; k++)
        mv_gemm_w_free(ci->blk[k]);
    free(ci->blk);
    mv_gemm_cpu_destroy(ci->g);
    free(ci->buf);
    mv_gemm_ws_destroy(ci->ws);
    pthread_mutex_destroy(&ci->mu);
    free(ci);
}

static void cpu_destroy(mv_backend *b)
{
    cpu_impl_free(b->impl, b->model->cfg.depth);
    free(b);
}

/* Packs every Linear layer's weights once (shared read-only by the tower's threads). */
static mv_status pack_all(const mv_model *m, cpu_impl *ci, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    int H = c->hidden, F = c->inter, mm = c->merge * c->merge;
    mv_status st;
    if ((st = mv_gemm_pack(ci->g, m->patch_w, c->patch_dim, H, "patch_embed", &ci->patch, e)) ||
        (st = mv_gemm_pack(ci->g, m->mfc1_w, H * mm, H * mm, "merger fc1", &ci->mfc1, e)) ||
        (st = mv_gemm_pack(ci->g, m->mfc2_w, H * mm, c->out_hidden, "merger fc2", &ci->mfc2, e)))
        return st;
    if (!(ci->blk = calloc((size_t)c->depth * W_PER_BLOCK, sizeof *ci->blk)))
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    ci->fc1_f1 = F; /* no block: no split */
    for (int b = 0; b < c->depth; b++) {
        const mv_block *B = &m->blocks[b];
        mv_gemm_w **w = ci->blk + (size_t)b * W_PER_BLOCK;
        char name[64];
        snprintf(name, sizeof name, "block %d", b);
        if ((st = mv_gemm_pack(ci->g, B->qkv_w, H, 3 * H, name, &w[W_QKV], e)) ||
            (st = mv_gemm_pack(ci->g, B->proj_w, H, H, name, &w[W_PROJ], e)) ||
            (st = mv_gemm_pack(ci->g, B->fc2_w, F, H, name, &w[W_FC2], e)))
            return st;
        const int F1 = fc1_split(w[W_QKV], F); /* every block's weights in one mode: one value */
        ci->fc1_f1 = F1;
        if ((st = mv_gemm_pack(ci->g, B->fc1_w, H, F1, name, &w[W_FC1], e)))
            return st;
        if (F1 < F && (st = mv_gemm_pack(ci->g, B->fc1_w + (size_t)F1 * H, H, F - F1, name, &w[W_FC1B], e)))
            return st;
    }
    return MV_OK;
}

mv_status mv_backend_cpu_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                mv_err *e)
{
    mv_backend *b = calloc(1, sizeof *b);
    cpu_impl *ci = calloc(1, sizeof *ci);
    if (!b || !ci) {
        free(b);
        free(ci);
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    }
    /* -j N, else every CPU of the affinity mask; the GEMM libraries stay single-threaded */
    ci->threads = o && o->threads > 0 ? o->threads : mv_cpu_count();
    pthread_mutex_init(&ci->mu, NULL);
    mv_blas_single_threaded();
    double t0 = mv_now();
    mv_status st = mv_gemm_cpu_create(o && o->verbose, o ? o->cpu_gemm : MV_CPU_GEMM_F32, &ci->g, e);
    if (!st)
        st = pack_all(m, ci, e);
    if (st) {
        cpu_impl_free(ci, m->cfg.depth);
        free(b);
        return st;
    }
    /* what --cpu-gemm became and the library with the kernels it picked (after pack_all: its name
     * names them), spaces as '_' */
    char lib[160];
    snprintf(lib, sizeof lib, "%s", mv_gemm_cpu_name(ci->g));
    for (char *p = lib; *p; p++)
        if (*p == ' ')
            *p = '_';
    snprintf(ci->settings, sizeof ci->settings, "backend=cpu gemm=%s gemm_lib=%s",
             mv_gemm_cpu_mode(ci->g) == MV_CPU_GEMM_BF16X6 ? "bf16x6" : "f32", lib);
    if (o && o->verbose)
        fprintf(stderr, "mvembed: CPU tower: %d threads, GEMMs through %s (%s %.2fs)\n",
                ci->threads, mv_gemm_cpu_name(ci->g),
                MV_HAVE_DNNL ? "weights packed in" : "set up in", mv_now() - t0);
    b->impl = ci;
    b->name = "cpu";
    b->forward = cpu_forward;
    b->forward_u8 = cpu_forward_u8;
    b->destroy = cpu_destroy;
    b->model = m;
    *out = b;
    return MV_OK;
}

const char *mv_backend_settings(const mv_backend *b)
{
    if (b->name && !strcmp(b->name, "cuda"))
        return mv_backend_cuda_settings(b);
    return ((const cpu_impl *)b->impl)->settings;
}
