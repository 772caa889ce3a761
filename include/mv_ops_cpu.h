/* mv_ops_cpu.h - the tower's operations in plain C (f32), the CPU twins of the CUDA kernels in
 * cu/ (the CUDA tests' references): src/tower/ops_cpu.c, and attention in src/tower/attention_cpu.c;
 * the CPU backend (src/tower/tower_cpu.c) runs them. Shapes are given in brackets; all tensors
 * are row-major f32. n = number of patch rows. */
#ifndef MV_OPS_CPU_H
#define MV_OPS_CPU_H

#include "mv_common.h"
#include "mv_gemm_cpu.h" /* mv_cpu_gemm */
#include "mv_model.h"
#include "mv_plan.h" /* mv_mb_decode: the merge-block order */

/* out[n, dim] = LayerNorm(x[n, dim]) * w + b  (biased variance, eps inside sqrt). out may be x. */
void mv_layernorm_cpu(float *out, const float *x, const float *w, const float *b, int64_t n,
                      int dim, float eps);
/* out[n, out_dim] = x[n, in] . W[out_dim, in]^T + b[out_dim]  (OpenBLAS sgemm, single-threaded,
 * called per block of rows from OpenMP threads; the bytes do not depend on the thread count).
 * b may be NULL. */
void mv_linear_cpu(float *out, const float *x, const float *W, const float *b, int64_t n, int in,
                   int out_dim);
void mv_gelu_tanh_cpu(float *x, int64_t count); /* 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) */
void mv_gelu_erf_cpu(float *x, int64_t count);  /* 0.5x(1+erf(x/sqrt 2)) */
void mv_act_cpu(mv_act act, float *x, int64_t count);

/* Bilinear align_corners position-table interpolation for one entry, HF's exact fp32 weights.
 * out[t*h*w, H] += interpolated table rows, rows in merge-block order (repeated per group). */
void mv_pos_embed_add_cpu(float *out, const float *table, int side, int H, int t, int h, int w,
                          int merge);

/* Rotary tables for all entries: cos/sin [n, D] with HF's layout
 * [a_row(Q), a_col(Q), a_row(Q), a_col(Q)], Q = D/4, fp32 inv_freq as HF computes it. */
void mv_rope_tables_cpu(float *cos_t, float *sin_t, const int32_t *grid, int n_entries, int D,
                        double theta, int merge);
/* Rotates q and k (NeoX pairs (d, d+D/2)) inside qkv[n, 3H] in place; v untouched. */
void mv_rope_apply_cpu(float *qkv, const float *cos_t, const float *sin_t, int64_t n, int heads,
                       int D);
/* Bidirectional attention per segment: out[n, H] from qkv[n, 3H] (q | k | v, head-major inside
 * each). cu_seqlens[n_seg + 1]. scale = D^-0.5. Any segment length. Q K^T and P V are sgemm calls
 * per (segment, head, 128 queries); softmax in f32. The CPU tower's attention with --cpu-gemm f32. */
void mv_attention_cpu(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                      int heads, int D);
/* The same as the tower runs it with --cpu-gemm `mode` (mv_gemm_cpu.h; auto: bf16x6 where AMX is
 * usable): the products on the f32 sgemm in every mode; in the variants build (cpubench,
 * attention_cpu.c) bf16x6 runs them on the AMX kernel. Returns 0, or -1 (out all NaN) when out of
 * memory, the GEMM library failed or bf16x6 was asked for without AMX. */
int mv_attention_cpu_gemm(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                          int heads, int D, mv_cpu_gemm mode);

#endif
