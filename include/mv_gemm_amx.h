/* mv_gemm_amx.h - bf16x6 matrix products on Intel AMX (src/tower/gemm_amx.c): out[m, od] =
 * x[m, in] . W[od, in]^T with both operands split exactly into three bf16 parts
 * (mv_bf16x3_split) and the six part products whose sizes sum to at most 2^-16 of the whole
 * accumulated in f32 by the AMX tile unit. Used by gemm_cpu.c for --cpu-gemm bf16x6 (the Linear
 * layers' weights, packed once) and by attention_cpu.c's variants build (cpubench; each
 * forward's K and V^T, packed strided into memory the caller owns, and multiplied by key blocks
 * through views of the packed matrix); not a public GEMM (no epilogue, one thread per call).
 *
 * Determinism: every output element is summed in the same order (32-k steps ascending, the six
 * products in a fixed order inside each step) whatever m, the row's place in the call or the
 * thread: a row's bytes depend on the row and W (or the view of it) alone. */
#ifndef MV_GEMM_AMX_H
#define MV_GEMM_AMX_H

#include "mv_common.h"

/* 1 when this CPU and kernel let us run AMX bf16 tiles (cpuid AMX-TILE + AMX-BF16, the OS's
 * permission for tile data through arch_prctl); else 0, with *why (when why is not NULL) saying
 * what is missing. Probed once per process; after mv_amx_refuse, 0 with its reason. */
int mv_amx_available(const char **why);
/* From now on this process acts as on a CPU without AMX: mv_amx_available gives 0 and *why =
 * reason (tests and comparisons of the fallback on a CPU that has AMX; the CLI calls it for
 * MV_NO_AMX). Call before any thread asks mv_amx_available. */
void mv_amx_refuse(const char *reason);

/* The exact split of bf16x6: a[i] = p1 + p2 + p3 (bf16 bit patterns) with p1 = bf16_rne(a),
 * p2 = bf16_rne(a - p1), p3 = bf16_rne(a - p1 - p2); exact for every finite |a| >= 2^-110 (below,
 * the bf16 parts' own subnormal spacing 2^-133 bounds the residual). p1 never overflows (a finite
 * a whose rounding would give infinity takes the truncation); infinities and NaNs go whole into
 * p1 (NaNs stay NaNs), with p2 = p3 = 0. */
void mv_bf16x3_split(const float *a, int64_t n, uint16_t *p1, uint16_t *p2, uint16_t *p3);

/* A packed matrix W[od, in] (or a view of part of one): three bf16 parts in VNNI tiles, in
 * padded to a multiple of 32 (k steps), od to a multiple of 32 (n-tile pairs), with zeros. The
 * fields are for gemm_amx.c and for making views (mv_amx_view_init, mv_amx_cols, mv_amx_inputs);
 * callers do not read the tiles. */
typedef struct mv_amx_w {
    int in, od;     /* the (viewed) matrix's inputs and outputs */
    int steps;      /* k steps of 32 inputs */
    int ntiles;     /* n-tiles of 16 outputs, even */
    size_t pstride; /* uint16 elements from one n-tile pair's tiles to the next pair's */
    uint16_t *b;    /* the tiles of n-tile pair 0, k step 0 */
} mv_amx_w;

/* Packs W[od, in] (row-major) for mv_amx_rows, into memory of its own (OpenMP over n-tiles); W
 * may be freed afterwards. 6 bytes per weight, padding included (mv_amx_packed_bytes). */
mv_status mv_amx_pack(const float *W, int in, int od, const char *name, mv_amx_w **out, mv_err *e);
void mv_amx_w_free(mv_amx_w *w); /* one from mv_amx_pack */

/* Bytes of a packed W[od, in]. */
size_t mv_amx_packed_bytes(int in, int od);
/* *w describes a W[od, in] packed at mem (mv_amx_packed_bytes(in, od) bytes, 64-byte aligned);
 * its tiles are written by mv_amx_pack_strided. */
void mv_amx_view_init(mv_amx_w *w, void *mem, int in, int od);
/* Writes the tiles of n-tiles [nt0, nt1) (16 outputs each, < w->ntiles) and k steps [s0, s1)
 * (< w->steps) of w from W(n, k) = src[n sn + k sk] (n < od, k < in; the padding gets zeros),
 * on the calling thread: K [keys, D] as W(key, d) (sn = D, sk = 1), V as V^T, W(d, key) (sn = 1,
 * sk = D), with no transposed copy. Disjoint ranges may run on several threads at once. The
 * split is mv_bf16x3_split's, bit for bit. */
void mv_amx_pack_strided(const mv_amx_w *w, const float *src, int64_t sn, int64_t sk, int nt0,
                         int nt1, int s0, int s1);
/* Views of part of w for mv_amx_rows, nothing copied: its outputs [n0, n0 + nn) (n0 a multiple
 * of 32, n0 + nn <= w->od): x . W[n0 : n0 + nn, :]^T, each element the bytes it has in the whole
 * product; its inputs [k0, k0 + kk) (k0 a multiple of 32, kk too unless k0 + kk == w->in):
 * x[m, kk] . W[:, k0 : k0 + kk]^T (attention's key blocks of S = Q K^T and of O = P V). */
mv_amx_w mv_amx_cols(const mv_amx_w *w, int n0, int nn);
mv_amx_w mv_amx_inputs(const mv_amx_w *w, int k0, int kk);

/* Bytes of 64-byte-aligned scratch that mv_amx_rows needs for m rows against w. */
size_t mv_amx_scratch_bytes(const mv_amx_w *w, int64_t m);

/* out[m, od] (row stride ldo) = x[m, in] (row stride ldx) . W^T in bf16x6, on the calling thread
 * alone (which must have mv_amx_available() true); scratch: mv_amx_scratch_bytes(w, m) bytes,
 * 64-byte aligned. m may be 0. */
void mv_amx_rows(const mv_amx_w *w, float *out, int64_t ldo, const float *x, int64_t ldx, int64_t m,
                 void *scratch);

/* For the unit test of the packing: the bf16 bits that w holds for part p (0..2) of W[n, k],
 * n < od padded, k < in padded (padding reads 0). */
uint16_t mv_amx_w_at(const mv_amx_w *w, int p, int n, int k);

#endif
