/* mv_gemm_amx.h - bf16x6 matrix products on Intel AMX (src/gemm_amx.c): out[m, od] =
 * x[m, in] . W[od, in]^T with both operands split exactly into three bf16 parts
 * (mv_bf16x3_split) and the six part products whose sizes sum to at most 2^-16 of the whole
 * accumulated in f32 by the AMX tile unit. Used by gemm_cpu.c for --cpu-gemm bf16x6; not a
 * public GEMM (no epilogue, no transposes, one thread per call).
 *
 * Determinism: every output element is summed in the same order (32-k steps ascending, the six
 * products in a fixed order inside each step) whatever m, the row's place in the call or the
 * thread: a row's bytes depend on the row and W alone. */
#ifndef MV_GEMM_AMX_H
#define MV_GEMM_AMX_H

#include "mv_common.h"

/* 1 when this CPU and kernel let us run AMX bf16 tiles (cpuid AMX-TILE + AMX-BF16, the OS's
 * permission for tile data through arch_prctl); else 0, with *why (when why is not NULL) saying
 * what is missing. Probed once per process. MV_NO_AMX=1 in the environment makes it 0 (tests of
 * the fallback on a CPU that has AMX). */
int mv_amx_available(const char **why);

typedef struct mv_amx_w mv_amx_w; /* one Linear layer's weights: three bf16 parts in VNNI tiles */

/* Packs W[od, in] (row-major) for mv_amx_rows; W may be freed afterwards. 6 bytes per weight
 * (in padded to a multiple of 32, od to a multiple of 32, with zeros). */
mv_status mv_amx_pack(const float *W, int in, int od, const char *name, mv_amx_w **out, mv_err *e);
void mv_amx_w_free(mv_amx_w *w);

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
