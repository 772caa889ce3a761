/* tower_cpu_int.h - what the CPU tower's files share (tower_cpu.c: the backend; ops_cpu.c: the
 * elementwise and row operations; attention_cpu.c: attention): the row split between threads,
 * the f32 exp, the row operations of the block chain, attention's work-item and key-block sizes.
 * Internal to src/; not an API. */
#ifndef MV_TOWER_CPU_INT_H
#define MV_TOWER_CPU_INT_H

#include "mv_backend.h"
#include "mv_gemm_cpu.h"
#include "mv_model.h" /* mv_act */

#include <stdint.h>

/* Attention work item: this many query rows of one head of one segment. */
#define ATT_QB 128
/* Keys per block of attention's online softmax, at most (att_key_block): the item's score block
 * (ATT_QB x ATT_KB f32) stays in L2. Overridable for measurement (-DATT_KB=...). */
#ifndef ATT_KB
#define ATT_KB 1024
#endif

/* The row loops of ops_cpu.c and attention_cpu.c (softmax, GELU) are compiled for AVX-512 and
 * AVX2 too (MV_CLONES, mv_gemm_cpu.h); their results depend on the CPU model then, as OpenBLAS's
 * do, never on threads. */

/* The f32 clamps and selects in the row loops may be computed for every lane (no FP exceptions
 * are used anywhere): lets GCC vectorise them at -O2. Set here, before exp_f32, for every file
 * that includes this one: GCC inlines no function into one compiled with other optimize flags,
 * and an exp_f32 compiled before the pragma of its caller's file was called per element, out of
 * line and unvectorised: the CPU tower's attention ran 25x slower (the split of attention_cpu.c
 * out of tower_cpu.c; fixed in 832fe80). always_inline makes such a mismatch a build error
 * instead of a slow tower. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* e^x in f32 for x in [-87, 88] (clamped outside), within 2 ulp: Cephes' expf polynomial with a
 * round-to-nearest trick instead of rintf, so that loops calling it vectorise (no libm call). */
static inline __attribute__((always_inline)) float exp_f32(float x)
{
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } sc = {.i = ((int32_t)n + 127) << 23};
    return y * sc.f;
}

/* The row operations of ops_cpu.c that tower_cpu.c's block chain runs on its own rows. */
/* LayerNorm of one row: mean and variance in double, 8 partial sums in a fixed order. */
void mv_cpu_layernorm_row(float *oi, const float *xi, const float *w, const float *b, int dim, float eps);
/* What a GEMM's thread does to its rows after the sgemm, while they are still in cache. b may be
 * NULL (no bias). */
typedef enum {
    EPI_BIAS, /* out += b */
    EPI_GELU, /* out = gelu_tanh(out + b) */
    EPI_RES,  /* res += out + b (out is scratch) */
} cpu_epilogue;
/* The epilogue ep on one row o[od] (ri: the residual row of EPI_RES, else NULL). */
void mv_cpu_epilogue_row(float *restrict o, const float *restrict b, int od, cpu_epilogue ep, float *restrict ri);
/* act in place on one row (the non-tanh activations; tanh-GELU is fused into fc1's epilogue). */
void mv_cpu_act_row(mv_act act, float *x, int64_t count);

/* GEMM rows are split between threads at multiples of the GEMM library's row atom
 * (mv_gemm_row_atom: what it needs for a row's bytes not to depend on the call), each thread's
 * part at least ROW_PART_MIN rows. */
#define ROW_PART_MIN 32

/* Parts a GEMM's n rows are cut into: at most T, each of >= ROW_PART_MIN rows (a whole number of
 * atoms). Depends on n and the atom, never on T beyond the cap. */
static inline int row_parts(int64_t n, int T, int atom)
{
    int64_t atoms = (n + atom - 1) / atom;
    int64_t P = atoms / ((ROW_PART_MIN + atom - 1) / atom);
    return P < 1 ? 1 : (P > T ? T : (int)P);
}

/* Rows [r0, r1) of part t of P: cuts at multiples of atom. */
static inline void row_range(int64_t n, int t, int P, int atom, int64_t *r0, int64_t *r1)
{
    int64_t atoms = (n + atom - 1) / atom;
    *r0 = atoms * t / P * atom;
    *r1 = atoms * (t + 1) / P * atom;
    *r0 = *r0 < n ? *r0 : n;
    *r1 = *r1 < n ? *r1 : n;
}

/* Bytes of bf16x6 attention's packed K and V^T (per head group, attention_cpu.c's variants build) at most, unless
 * one head needs more; a 47376-key segment of 72-wide heads packs 4 heads at a time under it.
 * Overridable for tests of the grouping (-DATT_PACK_CAP=...). */
#ifndef ATT_PACK_CAP
#define ATT_PACK_CAP ((size_t)256 << 20)
#endif

/* Attention on head-major hm[3][heads][n][D] (mv_cpu_split_heads), out[n, heads * D], its two
 * products per key block in f32 through the GEMM library (amx 0: the tower's, in both GEMM
 * modes) or in bf16x6 through the AMX kernel (amx 1: the variants build's only, cpubench; -1
 * elsewhere); scratch: n_threads x mv_cpu_attention_scratch_floats(D, amx) floats, pack:
 * mv_cpu_attention_pack_bytes(...) bytes (none for f32), both 64-byte aligned. 0, or -1 when the
 * GEMM library failed (attention_cpu.c). */
int mv_cpu_attention(float *out, const float *hm, int64_t n, const int32_t *cu, int n_seg, int heads, int D,
                     int amx, float *scratch, void *pack);
size_t mv_cpu_attention_scratch_floats(int D, int amx);
size_t mv_cpu_attention_pack_bytes(const int32_t *cu, int n_seg, int heads, int D, int amx);
/* Rows [r0, r1) of mv_cpu_split_heads, on the calling thread. */
void mv_cpu_split_heads_range(float *hm, const float *qkv, const float *cos_t, const float *sin_t, int64_t n,
                              int64_t r0, int64_t r1, int heads, int D);
/* qkv[n, 3H] -> hm[3][heads][n][D], q and k rotated when cos_t / sin_t are given (OpenMP over rows). */
void mv_cpu_split_heads(float *hm, const float *qkv, const float *cos_t, const float *sin_t, int64_t n, int heads,
                        int D);

/* cpu_hooks.c, the CPU backend's test hooks: req's tokens rounded to bf16 (test_out_bf16); req's
 * decoded frames (src_size) resized into *out (malloc'd, packed as frames of the grid's size). */
void mv_cpu_hook_round_out(const mv_forward_req *req, const mv_vision_config *c);
mv_status mv_cpu_hook_resize(const mv_forward_req *req, const mv_vision_config *c, uint8_t **out, mv_err *e);

/* mv_patchify of every entry's frames (src, laid out as req says; threads: the backend's) into one
 * pixel_values tensor *pixp [N, patch_dim] (malloc'ed) (cpu_frames.c). */
mv_status mv_cpu_patchify_frames(const mv_model *m, int threads, const mv_forward_req *req, const uint8_t *src,
                                 float **pixp, mv_err *e);

#endif
