/* attention_fa3.cu - varlen bidirectional attention for Hopper (sm_90a only) on TMA and
 * wgmma.mma_async, FlashAttention-3's design: bf16 q|k|v read from the packed qkv [n, 3*heads*D],
 * out [n, heads*D], f32 accumulators and online softmax, work items (a query tile of 64 x
 * consumers rows, a head) from the tile list mv_attn_tiles() builds out of cu_seqlens; a tile with
 * at most 64 rows of its segment may run in a second launch, the tail kernel, which shares its
 * key tiles among the consumers (mv_cuda_fa3_tails moves such tiles last). What a launch runs is
 * an mv_fa3_plan: mv_cuda_fa3_config, _split and _plan derive it from the kernel
 * table (fa3_table.cuh), the device and the segment lengths, and allocate nothing (the caller owns
 * the split pieces' scratch). This file instantiates only what the table can pick; compiled with
 * -DMV_VARIANTS (the variants build of make cuda-tests) it also holds the other configurations and
 * the simpler version 1 kernel (test/cuda/variants/attention_fa3_variants.cuh), for tests and A/B
 * runs. Invariants: the same function as the builtin bf16 kernel (cu/attention.cu) within its bf16
 * error (test_fa3: twin tests and wgmma layout probes); a launch on a device other than the
 * state's, or on a GPU that is not compute capability 9.0, is refused, never run. Debugging a
 * wrong number or a slow change: bench/NOTES.md, "fa3 kernel: debugging". Not here: f32/tf32
 * attention, causal masks, head dims outside the table, other GPUs. CPU twin: mv_attention_cpu. */
#include <math.h>
#include <stdio.h>
#include <algorithm>
#include <string.h>

#include <cuda.h> /* CUtensorMap and its enums; the encoder comes through cudart (no -lcuda) */
#include <cudaTypedefs.h>

#include "fa3_table.cuh"
#include "mv_cuda.cuh"
#include "wgmma.cuh"
#ifdef MV_VARIANTS
#include "variants/variants.cuh"
#endif

/* ---- tile sizes: D-wide heads, BN keys per tile ------------------------------------------ */
template <int D, int BN> struct fa3_shape {
    static constexpr int DP = (D + 15) / 16 * 16; /* padded reduction width of Q K^T (72 -> 80) */
    static constexpr int C = DP / 8;              /* 16-byte chunks per row of Q and K in shared memory */
    static constexpr int CV = D / 8;              /* chunks per row in global memory, and of V */
    static constexpr int KS = DP / 16;            /* k16 steps of Q K^T */
    static constexpr int K_BYTES = BN * C * 16; /* one stage */
    static constexpr int V_BYTES = BN * CV * 16;
};

/* ---- pieces of the kernel (per thread: rows g and g + 8 of its warp's 16; s[4 nt + e]
 * is row g (e < 2) or g + 8, key nt * 8 + 2t + (e & 1): the wgmma m64 accumulator layout) ---- */
/* keys at or past kv1 in the key tile starting at kbase: -inf */
template <int BN> static __device__ __forceinline__ void fa3_mask_tail(float *s, int kbase, int kv1, int t)
{
    if (kbase + BN <= kv1) return;
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (kbase + nt * 8 + 2 * t + (e & 1) >= kv1) s[4 * nt + e] = -INFINITY;
}
/* 2^x on the MUFU unit, results below 2^-126 flushed to 0 (exp2f without -ftz adds a range
 * check and two multiplies per call to keep them: a third of the softmax's instructions, for
 * probabilities that bf16 P and the f32 row sum cannot tell from 0 next to the row's max of 1) */
static __device__ __forceinline__ float fa3_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
/* the largest of row r's raw scores in s (r = 0: row g, 1: row g + 8), over this thread's
 * BN / 4 of them, as a chain (a tree of partial maxima keeps more registers live: ptxas spills
 * at head dim 72) */
template <int BN> static __device__ __forceinline__ float fa3_row_max(const float *s, int r)
{
    float raw = fmaxf(s[2 * r], s[2 * r + 1]);
#pragma unroll
    for (int nt = 1; nt < BN / 8; nt++) raw = fmaxf(raw, fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]));
    return raw;
}
/* online softmax in log2 units: s <- P (f32), m and l updated, corr[r] = exp2(m_old - m_new), the
 * factor the row's earlier output must be scaled by (0 on the first tile). The row max is taken
 * over the raw scores and scaled once (scale_log2 > 0: the same value as the max of the scaled
 * scores, rounding being monotonic). RM > 0 (the table's rescale_min): a row keeps its running
 * max unless a tile raises it by more than RM powers of 2 (FlashAttention-4's conditional
 * rescale), so that fa3_rescale_o is skipped more often; P then reaches at most 2^RM, which bf16
 * P, the f32 row sum and the f32 O hold without loss of relative precision. The kept max is the
 * same for the row's 4 threads (m and mx are equal across them after the shuffles). */
template <int BN, int RM>
static __device__ __forceinline__ void fa3_softmax(float *s, float *m, float *l, float *corr, float scale_log2)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = fmaxf(m[r], fa3_row_max<BN>(s, r) * scale_log2);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if constexpr (RM > 0)
            if (mx - m[r] <= (float)RM) mx = m[r]; /* false on the first tile (m = -inf) */
        corr[r] = fa3_ex2(m[r] - mx);
        m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            float p0 = fa3_ex2(fmaf(s[4 * nt + 2 * r], scale_log2, -mx));
            float p1 = fa3_ex2(fmaf(s[4 * nt + 2 * r + 1], scale_log2, -mx));
            s[4 * nt + 2 * r] = p0;
            s[4 * nt + 2 * r + 1] = p1;
            sum += p0 + p1;
        }
        l[r] = l[r] * corr[r] + sum;
    }
}
/* The same with the row's kept max subtracted by the tensor cores (PM: q pre-scaled by the softmax
 * scale in log2 units; Q's padded columns D..D+2 hold -m as three bf16 terms, hi + mid + lo = m
 * to f32's precision, and K's hold 1): s arrives as S c - m, so a tile whose rows all stay within
 * 2^FA3_PM_SLACK of their kept max needs no multiply-add per score, only the exponential. The
 * first tile (m = -inf; the pads then hold 0) and a tile that raises a row's max by more than the
 * slack take the slow path: the new max is written to the row's pad (by thread t = 0 of its quad;
 * pad: row g's shared address, row g + 8's 128 bytes on) and subtracted from this tile's scores.
 * Three terms, not one bf16 m: P of a row's largest score must round to 1 as the f32 row sum
 * counts it (a bf16 m of 50 is off by up to 0.1, a 7 % error on a one-hot row). Returns whether
 * it took the slow path (uniform over the warp): the caller then rescales O and fences the pad
 * stores before its next S. P reaches at most 2^FA3_PM_SLACK. */
#define FA3_PM_SLACK 8.f
static __device__ __forceinline__ uint32_t pack_bf16_raw(__nv_bfloat16 lo, __nv_bfloat16 hi)
{
    return (uint32_t)*(const unsigned short *)&lo | (uint32_t)*(const unsigned short *)&hi << 16;
}
template <int BN>
static __device__ __forceinline__ bool fa3_softmax_pm(float *s, float *m, float *l, float *corr, uint32_t pad, int t)
{
    float mx[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float raw = fa3_row_max<BN>(s, r);
        raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 1));
        mx[r] = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 2));
    }
    const bool move = mx[0] > FA3_PM_SLACK || mx[1] > FA3_PM_SLACK || m[0] == -INFINITY;
    if (__any_sync(0xffffffffu, move)) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float d = 0.f;
            if (m[r] == -INFINITY) { /* the pads held 0: s = S c */
                d = mx[r];
                corr[r] = 0.f;
                m[r] = d;
            } else if (mx[r] > FA3_PM_SLACK) {
                const float nm = m[r] + mx[r];
                d = nm - m[r];
                corr[r] = fa3_ex2(-d);
                m[r] = nm;
            } else {
                corr[r] = 1.f;
            }
            if (t == 0) { /* -m = hi + mid + lo, each rounded from what the ones before leave */
                const __nv_bfloat16 hi = __float2bfloat16_rn(-m[r]);
                const float r1 = -m[r] - __bfloat162float(hi);
                const __nv_bfloat16 mid = __float2bfloat16_rn(r1), lo = __float2bfloat16_rn(r1 - __bfloat162float(mid));
                const uint32_t w0 = pack_bf16_raw(hi, mid), w1 = pack_bf16_raw(lo, __float2bfloat16_rn(0.f));
                asm volatile("st.shared.v2.u32 [%0], {%1, %2};\n" ::"r"(pad + 128u * r), "r"(w0), "r"(w1) : "memory");
            }
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++) {
                const float p0 = fa3_ex2(s[4 * nt + 2 * r] - d), p1 = fa3_ex2(s[4 * nt + 2 * r + 1] - d);
                s[4 * nt + 2 * r] = p0;
                s[4 * nt + 2 * r + 1] = p1;
                sum += p0 + p1;
            }
            l[r] = l[r] * corr[r] + sum;
        }
        return true;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            const float p0 = fa3_ex2(s[4 * nt + 2 * r]), p1 = fa3_ex2(s[4 * nt + 2 * r + 1]);
            s[4 * nt + 2 * r] = p0;
            s[4 * nt + 2 * r + 1] = p1;
            sum += p0 + p1;
        }
        l[r] += sum;
    }
    return false;
}
/* skipped when no row of the warp changed its max (corr 1 everywhere: the common case once a long
 * row has seen its largest scores); the branch is warp-uniform */
template <int D> static __device__ __forceinline__ void fa3_rescale_o(float *o, const float *corr)
{
    if (__all_sync(0xffffffffu, corr[0] == 1.f && corr[1] == 1.f)) return;
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) {
        o[4 * nt + 0] *= corr[0];
        o[4 * nt + 1] *= corr[0];
        o[4 * nt + 2] *= corr[1];
        o[4 * nt + 3] *= corr[1];
    }
}
/* P (bf16) as the A operand of P.V: k16 step kk = n-tiles 2kk (a0 row g, a1 row g + 8) and 2kk + 1
 * (a2, a3), the mma.sync m16n8k16 A layout per warp */
template <int BN> static __device__ __forceinline__ void fa3_pack_p(uint32_t *p, const float *s)
{
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        p[4 * kk + 0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
        p[4 * kk + 1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
        p[4 * kk + 2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
        p[4 * kk + 3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
    }
}
/* the head's column held at column x of a tile loaded with fa3v2_shape's AL rotation (rot: an
 * odd head under AL): x + 8 mod D, else x. The producer loads by it, fa3_store / _part store by it */
template <int D> static __device__ __forceinline__ int fa3_rot_col(int x, bool rot) { return rot ? (x + 8) % D : x; }
/* O / l into out for this thread's rows row_g and row_g + 8 that lie before kv1; rot as
 * fa3_rot_col's (O's accumulator then holds the head's columns rotated as V's tile) */
template <int D>
static __device__ __forceinline__ void fa3_store(bf16 *out, const float *o, const float *l, int row_g, int kv1, int H,
                                                 int h, int t, bool rot = false)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const float inv = 1.f / lr;
        const int row = row_g + 8 * r;
        if (row < kv1) {
            bf16 *po = out + (int64_t)row * H + h * D + 2 * t;
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++)
                *(__nv_bfloat162 *)(po + fa3_rot_col<D>(nt * 8, rot)) =
                    __floats2bfloat162_rn(o[4 * nt + 2 * r] * inv, o[4 * nt + 2 * r + 1] * inv);
        }
    }
}

/* ---- split work items: the last `split` of the items * heads work items are run as
 * two pieces each, over the first and the second half of their key tiles, so that a last wave
 * that would leave most SMs idle (one 2048² image: 1376 items on 132 SMs, 10.4 waves) runs half
 * as long. A piece writes its unnormalised O (f32) and its rows' m and l (log2 units) to `part`;
 * attn_fa3_merge combines the two pieces as two steps of the online softmax and writes out.
 * Layout of part for P = 2 split pieces of BM rows: O [P][BM][D], then (m, l) [P][BM][2]. ---- */
struct fa3_item {
    mv_attn_tile tile;
    int h;      /* head */
    int jb, je; /* key tiles [jb, je) of the tile's ceil((kv_end - kv_start) / BN) */
    int piece;  /* -1: a whole item (out); else its piece index in part (2 per split item) */
};
/* virtual item v of items + split: items before items - split whole, then two pieces each (an
 * item with one key tile runs whole in both pieces, whose merge is then that item's result) */
template <int BN>
static __device__ __forceinline__ fa3_item fa3_item_of(int v, int items, int split, const mv_attn_tile *tiles,
                                                      int n_tiles)
{
    fa3_item it;
    const int w0 = items - split, piece = v - w0, w = piece < 0 ? v : w0 + piece / 2;
    it.tile = tiles[w % n_tiles];
    it.h = w / n_tiles;
    const int nkv = (it.tile.kv_end - it.tile.kv_start + BN - 1) / BN;
    it.jb = 0;
    it.je = nkv;
    it.piece = piece < 0 ? -1 : piece;
    if (piece >= 0 && nkv >= 2) {
        if (piece & 1) it.jb = nkv / 2;
        else it.je = nkv / 2;
    }
    return it;
}
/* one piece's unnormalised O, and m and l, for this thread's rows row_l and row_l + 8 of the
 * tile (those before kv1), into part (np pieces of BM rows); rot as fa3_store's */
template <int D>
static __device__ __forceinline__ void fa3_store_part(float *part, const float *o, const float *m, const float *l,
                                                      int piece, int np, int BM, int row_l, int q0, int kv1, int t,
                                                      bool rot)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const int row = row_l + 8 * r;
        if (q0 + row < kv1) {
            float *po = part + ((int64_t)piece * BM + row) * D + 2 * t;
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++)
                *(float2 *)(po + fa3_rot_col<D>(nt * 8, rot)) = make_float2(o[4 * nt + 2 * r], o[4 * nt + 2 * r + 1]);
            if (t == 0) *(float2 *)(part + (int64_t)np * BM * D + ((int64_t)piece * BM + row) * 2) = make_float2(m[r], lr);
        }
    }
}
/* grid: one CTA per split item; out rows of item items - split + blockIdx.x from its two pieces:
 * O = (O0 2^(m0 - m) + O1 2^(m1 - m)) / (l0 2^(m0 - m) + l1 2^(m1 - m)), m = max(m0, m1) */
template <int D>
__global__ void attn_fa3_merge(bf16 *out, const float *part, const mv_attn_tile *tiles, int n_tiles, int items,
                               int split, int BM, int heads)
{
    const int w = items - split + blockIdx.x, np = 2 * split;
    const mv_attn_tile tile = tiles[w % n_tiles];
    const int h = w / n_tiles, H = heads * D;
    const float *o0 = part + (int64_t)(2 * blockIdx.x) * BM * D, *o1 = o0 + (int64_t)BM * D;
    const float *ml0 = part + (int64_t)np * BM * D + (int64_t)(2 * blockIdx.x) * BM * 2, *ml1 = ml0 + 2 * BM;
    for (int i = threadIdx.x; i < BM * (D / 2); i += blockDim.x) {
        const int r = i / (D / 2), c = 2 * (i % (D / 2));
        if (tile.q0 + r >= tile.kv_end) continue;
        const float m0 = ml0[2 * r], m1 = ml1[2 * r], mx = fmaxf(m0, m1);
        const float a0 = exp2f(m0 - mx), a1 = exp2f(m1 - mx);
        const float inv = 1.f / (ml0[2 * r + 1] * a0 + ml1[2 * r + 1] * a1);
        const float2 x0 = *(const float2 *)(o0 + r * D + c), x1 = *(const float2 *)(o1 + r * D + c);
        *(__nv_bfloat162 *)(out + (int64_t)(tile.q0 + r) * H + h * D + c) =
            __floats2bfloat162_rn((x0.x * a0 + x1.x * a1) * inv, (x0.y * a0 + x1.y * a1) * inv);
    }
}

/* ---- the tail kernel's merge: consumers 0..NC - 1 hold partial softmaxes of the same query
 * rows (each over its own key tiles); consumer 0 takes theirs through shared memory scr (NC - 1
 * blocks of D / 2 + 4 words a thread: O, m, l) and combines them as steps of the online softmax,
 * O = sum_c O_c 2^(m_c - m) and l likewise, m = max_c m_c (m in log2 units, as fa3_softmax /
 * _softmax_pm keep it; a consumer without key tiles holds m = -inf, l = 0, O = 0: weight 0).
 * Named barrier 1: the others' words are written; 2: consumer 0 has read them (the next item's
 * writes wait for it; not arrived after the CTA's last item, where nobody waits). Returns true in
 * consumer 0, which then stores. */
template <int D, int NC>
static __device__ __forceinline__ bool fa3_tail_merge(float *scr, float *o, float *m, float *l, int cw, int qi,
                                                      bool last)
{
    constexpr int NR = D / 2 + 4, T = 128 * NC;
    const int i = threadIdx.x % 128;
    if (cw > 0) {
        if (qi > 0) named_sync(2, T);
        float *w = scr + (cw - 1) * NR * 128 + i;
#pragma unroll
        for (int k = 0; k < D / 2; k++) w[k * 128] = o[k];
        w[(D / 2) * 128] = m[0];
        w[(D / 2 + 1) * 128] = m[1];
        w[(D / 2 + 2) * 128] = l[0];
        w[(D / 2 + 3) * 128] = l[1];
        named_arrive(1, T);
        return false;
    }
    named_sync(1, T);
    float a[NC][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = m[r];
#pragma unroll
        for (int c = 1; c < NC; c++) mx = fmaxf(mx, scr[((c - 1) * NR + D / 2 + r) * 128 + i]);
        a[0][r] = exp2f(m[r] - mx);
        l[r] *= a[0][r];
#pragma unroll
        for (int c = 1; c < NC; c++) {
            a[c][r] = exp2f(scr[((c - 1) * NR + D / 2 + r) * 128 + i] - mx);
            l[r] += a[c][r] * scr[((c - 1) * NR + D / 2 + 2 + r) * 128 + i];
        }
        m[r] = mx;
    }
#pragma unroll
    for (int k = 0; k < D / 2; k++) {
        const int r = (k >> 1) & 1; /* o[4 nt + 2 r + e]: row g + 8 r */
        float v = o[k] * a[0][r];
#pragma unroll
        for (int c = 1; c < NC; c++) v += a[c][r] * scr[((c - 1) * NR + k) * 128 + i];
        o[k] = v;
    }
    if (!last) named_arrive(2, T); /* after every read's value is used */
    return true;
}

/* ---- the kernel: TMA loads by a producer warp, mbarrier ring, ping-pong consumers ---------
 * 128 (NC + 1) threads: warpgroup 0 is the producer (one thread issues every TMA load; the
 * warpgroup gives its registers back), warpgroups 1..NC are consumers owning query rows
 * [64 (w - 1), 64 w) of the tile (BM = 64 NC rows). Shared memory in the chunk-major layout a TMA
 * box of 8 columns x R rows writes (wgmma.cuh): Q in two buffers (BM rows, C = DP / 8 chunks, the
 * last one zero when D = 72; work item i in buffer i % 2), K (ST stages of BN rows, same
 * chunks) and V (ST stages of BN rows, D / 8 chunks). Barriers: q_full / q_empty per Q
 * buffer; k_full / v_full per stage (the producer's arrival with the transaction bytes, completed
 * by the TMA unit), k_empty / v_empty per stage and q_empty (one arrival per consumer warp, 4 NC,
 * after its wgmma read the stage). K and V have their own barriers so that K(j + 1) can load
 * while P(j - 1) V(j - 1) still reads V. A CTA runs work items blockIdx.x, + gridDim.x, ...
 * (one per CTA, or several on a persistent grid of one CTA per SM), its K/V tiles counted across
 * them, so the producer fills the next item's stages while the consumers finish the last one.
 * Consumer loop (FlashAttention-3's intra-warpgroup overlap): S(j) = Q K(j)^T and O += P(j - 1)
 * V(j - 1) are issued together; the softmax of S(j) runs while the P.V product is in flight; O
 * is rescaled once that product is done. Inter-warpgroup turns: each consumer issues its wgmma
 * only after the previous one (cw - 1 mod NC) has issued its own (named barriers 1..NC, 256
 * threads), so one warpgroup's softmax runs beside the others' matrix work. Rows of K and V past the segment
 * hold the next segment's keys (or TMA's zeros past the last row): keys past kv_end are masked
 * to -inf, so their P is 0 and V's rows there add nothing. */

/* fa3_shape's tile sizes (C chunks of Q and K, CV of V), ST stages of K and V, and the mbarriers
 * after the data. SW: K's first D / 16 column pairs and all of V in
 * 32-byte-swizzled boxes of 16 columns (wgmma.cuh), V rounded up to VG = ceil(D / 16) boxes (its
 * columns D..16 VG - 1, the next head's or TMA's zeros, are loaded and never read: wgmma's N is
 * D). 256 bytes of slack to align the data to the swizzle's 256-byte period.
 * AL (SW and D % 16 = 8: head dim 72), boxes on sector boundaries: head h starts 2 D h bytes into
 * the qkv row, so every odd head starts 16 bytes into a 32-byte sector, where each of its
 * 16-column boxes would read two sectors per row (and L2's request rate, not its bandwidth,
 * bounds the kernel: bench/NOTES.md, "At head dim 72 the limit was L2's request rate"). An odd
 * head's columns are therefore loaded rotated by 8: K's four 16-column boxes from its column 8
 * on, its columns 0..7 as the 8-column chunk after them, Q's chunks in the same order (chunk c
 * of the head at c - 1, chunk 0 at CV - 1), so that Q K^T sums the same products in another
 * order; V's first four boxes from column 8 on and the fifth from column 0 (the one box that
 * still reads two sectors), so that O's accumulator holds the head's columns rotated by 8 and
 * fa3_store puts them back (fa3_rot_col). The same layout in shared memory, the same consumer code. */
template <int D, int BN, bool SW, int NC, int ST, bool TL = false> struct fa3v2_shape : fa3_shape<D, BN> {
    typedef fa3_shape<D, BN> B;
    static constexpr int BM = 64 * NC;            /* query rows per CTA: NC consumer warpgroups x 64 */
    static constexpr int THREADS = 128 * (NC + 1); /* and the producer warpgroup */
    static constexpr int Q_BYTES = BM * B::C * 16;
    static constexpr int VG = (D + 15) / 16;
    static constexpr int V_BYTES = SW ? BN * VG * 32 : B::V_BYTES;
    static constexpr bool AL = SW && B::C > B::CV;
    static __device__ __forceinline__ bool rotated(int h) { return AL && (h & 1); } /* head h's columns */
    /* TL (fa3_tail_merge): consumers 1..NC - 1's O, m and l, one word a register and thread */
    static constexpr int MERGE_REGS = D / 2 + 4, MERGE_BYTES = TL ? (NC - 1) * MERGE_REGS * 128 * 4 : 0;
    static constexpr int DATA = 2 * Q_BYTES + ST * (B::K_BYTES + V_BYTES) + MERGE_BYTES; /* Q: two buffers */
    static constexpr size_t SMEM = (size_t)DATA + 8 * (4 + 4 * ST) + 256;
};

/* SW: K (its first D / 16 column pairs) and V in 32-byte-swizzled boxes of 16 columns (whole
 * 32-byte sectors from L2), else in boxes of 8 columns. tm: boxes of 8 columns x BN rows, no
 * swizzle (Q; K and V without SW; K's last 8 columns when D % 16 = 8 with SW); tm16 (SW): boxes
 * of 16 columns x BN rows, 32-byte swizzle. QR: each consumer holds its 64 rows of Q in
 * registers (KS x 4 bf16 pairs, the A fragment) and runs S = Q K^T with A from registers, so
 * that the tensor cores read only K from shared memory (a third less shared-memory traffic per S
 * tile). ST: K and V stages; RM: fa3_softmax's conditional rescale. PM (D % 16 = 8, Q in shared
 * memory): q arrives pre-scaled by scale_log2 and the row max is subtracted by the tensor cores
 * through the padded columns (fa3_softmax_pm; RM is then unused). TL: the tail kernel (every work
 * item a query tile with at most 64 rows in its segment, which one consumer would run while the
 * others idle): each consumer holds its own copy of the tile's first 64 query rows and takes the
 * key tiles j = cw, cw + NC, ... of the item, no turns; a K/V stage is released by its one
 * reader; at the item's end fa3_tail_merge combines the NC partial softmaxes in shared memory and
 * consumer 0 stores. */
template <int D, int BN, bool SW, bool QR, int NC, int ST, int RM, bool PM, bool TL = false>
__global__ void __launch_bounds__(fa3v2_shape<D, BN, SW, NC, ST, TL>::THREADS, 1)
    attn_fa3v2_kernel(const __grid_constant__ CUtensorMap tm, const __grid_constant__ CUtensorMap tm16,
                      const __grid_constant__ CUtensorMap tmq, bf16 *out, const mv_attn_tile *tiles, int n_tiles,
                      int heads, float scale_log2, int split, float *part)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fa3v2_shape<D, BN, SW, NC, ST, TL> S;
    constexpr int C = S::C, CV = S::CV, KS = S::KS, KG = SW ? D / 16 : 0, BM = S::BM;
    constexpr int VW = SW ? 16 : 8, VB = SW ? S::VG : CV; /* V: boxes of VW columns, VB of them */
    static_assert(BN == 64 || BN == 112 || BN == 128, "keys per tile");
    static_assert(NC == 2 || NC == 3, "consumer warpgroups");
    static_assert(ST == 2 || ST == 3, "K/V stages");
    static_assert(!PM || (C > CV && !QR), "the max through the padded column: D % 16 = 8, Q in shared memory");
    static_assert(!TL || (NC == 3 && !QR), "the tail kernel: three consumers, Q in shared memory");
    static_assert(S::Q_BYTES % 256 == 0 && S::K_BYTES % 256 == 0 && S::V_BYTES % 256 == 0, "256-byte boxes");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    /* Q in two buffers (work item i in buffer i % 2), then the K and V stages, then the barriers */
    const uint32_t sQ = (smem_u32(smem_raw) + 255u) & ~255u, sK = sQ + 2 * S::Q_BYTES, sV = sK + ST * S::K_BYTES;
    const uint32_t q_full = sQ + S::DATA, q_empty = q_full + 16, k_full = q_empty + 16, v_full = k_full + 8 * ST,
                   k_empty = v_full + 8 * ST, v_empty = k_empty + 8 * ST;
    const int tid = threadIdx.x, wg = tid / 128;
    const int items = n_tiles * heads, H = heads * D, vitems = items + split;

    if (tid == 0) {
        for (int i = 0; i < 2; i++) {
            mbar_init(q_full + 8 * i, 1);
            mbar_init(q_empty + 8 * i, 4 * NC); /* one arrival per consumer warp */
        }
        for (int i = 0; i < ST; i++) {
            mbar_init(k_full + 8 * i, 1);
            mbar_init(v_full + 8 * i, 1);
            mbar_init(k_empty + 8 * i, TL ? 4 : 4 * NC); /* TL: one consumer reads a stage */
            mbar_init(v_empty + 8 * i, TL ? 4 : 4 * NC);
        }
        mbar_init_fence();
    }
    if constexpr (C > CV) {
        /* chunk CV (columns D..DP-1) of both Q buffers and of every K stage: zero, once (TMA never
         * writes it); PM: K's columns D..D+2 are 1 (bf16 0x3f80), Q's are written per item by its
         * consumer */
        for (int i = tid; i < 2 * BM + ST * BN; i += S::THREADS) {
            const uint32_t a = i < 2 * BM ? sQ + (uint32_t)((i / BM) * S::Q_BYTES + (CV * BM + i % BM) * 16)
                                          : sK + (uint32_t)(((i - 2 * BM) / BN) * S::K_BYTES +
                                                            (CV * BN + (i - 2 * BM) % BN) * 16);
            const bool one = PM && i >= 2 * BM;
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %3};\n" ::"r"(a), "r"(one ? 0x3f803f80u : 0u),
                         "r"(one ? 0x3f80u : 0u), "r"(0)
                         : "memory");
        }
        fence_proxy_async(); /* generic-proxy stores -> wgmma's async-proxy reads */
    }
    __syncthreads();

    /* Work items w = blockIdx.x, + gridDim.x, ...: (query tile w % n_tiles, head w / n_tiles). One
     * item per CTA when the grid has one CTA per item; a persistent grid (one CTA per SM) runs
     * several, and its producer loads the next item's Q and first K/V tiles while the consumers
     * finish the last one. K/V tiles are counted over all of the CTA's items (kt), so the ring's
     * stages and phases run on across items. */
    if (wg == 0) { /* producer */
        regs_dealloc<24>();
        if (tid == 0) {
            tma_prefetch_desc(&tm);
            int kt = 0, qi = 0;
            for (int v = blockIdx.x; v < vitems; v += gridDim.x, qi++) {
                const fa3_item it = fa3_item_of<BN>(v, items, split, tiles, n_tiles);
                const mv_attn_tile tile = it.tile;
                const int h = it.h, kv0 = tile.kv_start + it.jb * BN, nkv = it.je - it.jb;
                const bool rot = S::rotated(h);
                auto col = [&](int x) { return h * D + fa3_rot_col<D>(x, rot); }; /* in q's, k's or v's third */
                const uint32_t qb = (uint32_t)(qi & 1), qbuf = sQ + qb * S::Q_BYTES;
                mbar_wait(q_empty + 8 * qb, (uint32_t)((qi >> 1) & 1) ^ 1u);
                mbar_expect_tx(q_full + 8 * qb, BM * CV * 16);
                for (int c = 0; c < CV; c++) /* tmq: boxes of 8 columns x 64 rows */
                    for (int r = 0; r < BM; r += 64)
                        tma_load_2d(qbuf + (uint32_t)((c * BM + r) * 16), &tmq, col(c * 8),
                                    tile.q0 + (TL ? 0 : r), q_full + 8 * qb); /* TL: a copy each */
                for (int j = 0; j < nkv; j++, kt++) {
                    const int st = kt % ST;
                    const uint32_t ph = (uint32_t)(kt / ST) & 1u, row = (uint32_t)(kv0 + j * BN);
                    mbar_wait(k_empty + 8 * st, ph ^ 1u);
                    mbar_expect_tx(k_full + 8 * st, BN * CV * 16);
                    /* SW: column pairs as swizzled 16-column boxes, the rest (8 columns when D %
                     * 16 = 8) in the 8-column layout at the offsets they have without SW */
                    for (int g = 0; g < KG; g++)
                        tma_load_2d(sK + (uint32_t)(st * S::K_BYTES + g * BN * 32), &tm16, H + col(g * 16),
                                    (int)row, k_full + 8 * st);
                    for (int c = 2 * KG; c < CV; c++)
                        tma_load_2d(sK + (uint32_t)(st * S::K_BYTES + c * BN * 16), &tm, H + col(c * 8),
                                    (int)row, k_full + 8 * st);
                    mbar_wait(v_empty + 8 * st, ph ^ 1u);
                    mbar_expect_tx(v_full + 8 * st, S::V_BYTES); /* VB boxes of VW columns x BN rows */
                    for (int c = 0; c < VB; c++) /* AL, odd head: the last box from column 0 */
                        tma_load_2d(sV + (uint32_t)(st * S::V_BYTES + c * BN * VW * 2), SW ? &tm16 : &tm,
                                    2 * H + col(c * VW), (int)row, v_full + 8 * st);
                }
            }
        }
        return;
    }

    /* consumers: 24 + 2 x 240 or 24 + 3 x 160 registers per thread: 65536 or 64512 of the 65536 */
    regs_alloc<NC == 2 ? 240 : 160>();
    const int cw = wg - 1, wl = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    /* named barrier ids 1..NC: "my turn to issue wgmma"; the turn goes round cw = 0, 1, .. NC - 1,
     * on across items (every consumer takes nkv + 1 turns per item) */
    const int me = 1 + cw, next = 1 + (cw + 1) % NC;
    float o[D / 2], s[BN / 2], m[2], l[2], corr[2];
    uint32_t p[BN / 4];
    uint32_t qf[QR ? KS * 4 : 4]; /* QR: k16 step ks = chunks 2ks, 2ks + 1 of rows r0 and r0 + 8 */
    if constexpr (!TL)
        if (cw == NC - 1) named_arrive(1, 256); /* consumer 0 issues first */
    auto release = [&](uint32_t bar) {
        if (lane == 0) mbar_arrive(bar);
    };
    int kt = 0, qi = 0;
    for (int v = blockIdx.x; v < vitems; v += gridDim.x, qi++) {
        const fa3_item it = fa3_item_of<BN>(v, items, split, tiles, n_tiles);
        const mv_attn_tile tile = it.tile;
        /* this piece's keys: [kv0, kv1) of the segment's, from its first key tile it.jb */
        const int h = it.h, kv0 = tile.kv_start + it.jb * BN, kv1 = tile.kv_end, nkv = it.je - it.jb;
        const bool last = v + (int)gridDim.x >= vitems; /* this CTA's last item */
        const uint32_t qb = (uint32_t)(qi & 1), qw = sQ + qb * S::Q_BYTES + (uint32_t)(cw * 64 * 16);
#pragma unroll
        for (int i = 0; i < D / 2; i++) o[i] = 0.f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.f;
        mbar_wait(q_full + 8 * qb, (uint32_t)(qi >> 1) & 1u);
        /* PM: the pads of this thread's row g in Q's chunk CV (its first three columns; row g + 8's
         * 128 bytes on), 0 until the first tile. Recomputed from threadIdx at each use on purpose:
         * a variable held across the key loop costs a register there, and ptxas then spills. */
        auto pad_addr = [&]() {
            return qw + (uint32_t)((CV * BM + (threadIdx.x % 128) / 32 * 16 + (threadIdx.x % 32) / 4) * 16);
        };
        if constexpr (PM) {
            if (t == 0) {
                asm volatile("st.shared.v2.u32 [%0], {%1, %1};\n" ::"r"(pad_addr()), "r"(0) : "memory");
                asm volatile("st.shared.v2.u32 [%0], {%1, %1};\n" ::"r"(pad_addr() + 128u), "r"(0) : "memory");
            }
            fence_proxy_async(); /* generic-proxy stores -> the next S's async-proxy reads */
        }
        if constexpr (QR) {
            const int r0 = cw * 64 + wl * 16 + g;
#pragma unroll
            for (int ks = 0; ks < KS; ks++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const uint32_t at = sQ + qb * S::Q_BYTES + (uint32_t)(((2 * ks + hf) * BM + r0) * 16 + 4 * t);
                    qf[4 * ks + 2 * hf] = ld_shared_u32(at);
                    qf[4 * ks + 2 * hf + 1] = ld_shared_u32(at + 8 * 16);
                }
            __syncwarp();
            release(q_empty + 8 * qb); /* Q is in registers: the buffer may take item qi + 2 */
        }

        /* S(j) -> P(j) in s (f32), corr = exp2(m_old - m_new), m and l updated */
        /* returns whether O needs rescaling (always true without PM: fa3_rescale_o checks corr) */
        auto softmax = [&](int j) -> bool {
            fa3_mask_tail<BN>(s, kv0 + j * BN, kv1, t);
            if constexpr (PM) {
                const bool moved = fa3_softmax_pm<BN>(s, m, l, corr, pad_addr(), t);
                if (moved) fence_proxy_async();
                return moved;
            } else {
                fa3_softmax<BN, RM>(s, m, l, corr, scale_log2);
                return true;
            }
        };
        auto issue_s = [&](int j) {
            const uint32_t kb = sK + (uint32_t)(((kt + j) % ST) * S::K_BYTES);
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const uint64_t bd =
                    ks < KG ? desc_kmajor_sw32(kb + ks * BN * 32) : desc_kmajor_cols(kb + ks * 2 * BN * 16, BN);
                if constexpr (QR) wgmma_rs_kb<BN>(s, &qf[4 * ks], bd, ks > 0);
                else wgmma_ss<BN>(s, desc_kmajor_cols(qw + ks * 2 * BM * 16, BM), bd, ks > 0);
            }
        };
        auto issue_pv = [&](int j) {
            const uint32_t vb = sV + (uint32_t)(((kt + j) % ST) * S::V_BYTES);
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                wgmma_rs<D>(o, &p[4 * kk],
                            SW ? desc_nmajor_sw32(vb + kk * 16 * 32, BN) : desc_nmajor_cols(vb + kk * 256, BN));
        };
        auto pack_p = [&]() { fa3_pack_p<BN>(p, s); };
        auto kphase = [&](int j) { return (uint32_t)((kt + j) / ST) & 1u; };

        if constexpr (TL) { /* key tiles cw, cw + NC, ...: S, softmax, P.V one after the other */
            for (int j = cw; j < nkv; j += NC) {
                const int sj = (kt + j) % ST;
                mbar_wait(k_full + 8 * sj, kphase(j));
                reg_fence(s);
                wg_fence();
                issue_s(j);
                wg_commit();
                wg_wait<0>();
                reg_fence(s);
                release(k_empty + 8 * sj);
                if (softmax(j)) fa3_rescale_o<D>(o, corr);
                pack_p();
                mbar_wait(v_full + 8 * sj, kphase(j));
                reg_fence(o);
                reg_fence(p);
                wg_fence();
                issue_pv(j);
                wg_commit();
                wg_wait<0>();
                reg_fence(o);
                reg_fence(p);
                release(v_empty + 8 * sj);
            }
            release(q_empty + 8 * qb);
            const uint32_t scr = sV + (uint32_t)(ST * S::V_BYTES);
            if (fa3_tail_merge<D, NC>((float *)(smem_raw + (scr - smem_u32(smem_raw))), o, m, l, cw, qi, last))
                fa3_store<D>(out, o, l, tile.q0 + wl * 16 + g, kv1, H, h, t, S::rotated(h));
            kt += nkv;
        } else {
            /* prologue: S(0), P(0) */
            mbar_wait(k_full + 8 * (kt % ST), kphase(0));
            named_sync(me, 256);
            reg_fence(s);
            wg_fence();
            issue_s(0);
            wg_commit();
            named_arrive(next, 256);
            wg_wait<0>();
            reg_fence(s);
            release(k_empty + 8 * (kt % ST));
            softmax(0);
            pack_p();

            for (int j = 1; j < nkv; j++) {
                const int sk = (kt + j) % ST, sv = (kt + j - 1) % ST;
                mbar_wait(k_full + 8 * sk, kphase(j));
                mbar_wait(v_full + 8 * sv, kphase(j - 1));
                named_sync(me, 256);
                reg_fence(s);
                reg_fence(o);
                reg_fence(p);
                wg_fence();
                issue_s(j);
                wg_commit();
                issue_pv(j - 1);
                wg_commit();
                named_arrive(next, 256);
                wg_wait<1>();
                reg_fence(s);
                release(k_empty + 8 * sk);
                const bool moved = softmax(j);
                wg_wait<0>();
                reg_fence(o);
                reg_fence(p);
                release(v_empty + 8 * sv);
                if (moved) fa3_rescale_o<D>(o, corr);
                pack_p();
            }
            if constexpr (!QR) release(q_empty + 8 * qb); /* every S of the item is done */

            /* epilogue: O += P(n - 1) V(n - 1); the last consumer makes no arrival after the CTA's
             * last item, for a turn that never comes */
            {
                const int sv = (kt + nkv - 1) % ST;
                mbar_wait(v_full + 8 * sv, kphase(nkv - 1));
                named_sync(me, 256);
                reg_fence(o);
                reg_fence(p);
                wg_fence();
                issue_pv(nkv - 1);
                wg_commit();
                if (!last || cw != NC - 1) named_arrive(next, 256);
                wg_wait<0>();
                reg_fence(o);
                reg_fence(p);
                release(v_empty + 8 * sv);
            }

            const bool rot = S::rotated(h); /* the producer's rotated columns (fa3v2_shape) */
            if (it.piece < 0) fa3_store<D>(out, o, l, tile.q0 + cw * 64 + wl * 16 + g, kv1, H, h, t, rot);
            else
                fa3_store_part<D>(part, o, m, l, it.piece, 2 * split, BM, cw * 64 + wl * 16 + g, tile.q0, kv1, t,
                                  rot);
            kt += nkv;
        }
    }
#endif
}

/* ---- the table: pure functions of the device and the shape ---------------------------- */
/* the softmax scale D^-0.5 in log2 units (the kernel's exponentials are powers of 2) */
static float fa3_scale_log2(int D) { return (float)(1.0 / sqrt((double)D) * 1.4426950408889634); }

static const mv_fa3_entry *fa3_entry(int D)
{
    for (int i = 0; i < mv_fa3_table_len; i++)
        if (mv_fa3_table[i].head_dim == D) return &mv_fa3_table[i];
    return NULL;
}

cudaError_t mv_cuda_fa3_device(int device, mv_fa3_device *d)
{
    d->device = device;
    cudaError_t r = cudaDeviceGetAttribute(&d->cc_major, cudaDevAttrComputeCapabilityMajor, device);
    if (r == cudaSuccess) r = cudaDeviceGetAttribute(&d->cc_minor, cudaDevAttrComputeCapabilityMinor, device);
    if (r == cudaSuccess) r = cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, device);
    return r;
}

mv_status mv_cuda_fa3_check(const mv_fa3_device *d, int D, mv_err *e)
{
    if (!fa3_entry(D)) {
        char dims[64] = "";
        for (int i = 0; i < mv_fa3_table_len; i++) {
            size_t l = strlen(dims);
            snprintf(dims + l, sizeof dims - l, "%s%d", i == 0 ? "" : i + 1 < mv_fa3_table_len ? ", " : " and ",
                     mv_fa3_table[i].head_dim);
        }
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: the model's head dim is %d; the fa3 kernel has %s only", D, dims);
    }
    if (d->cc_major != 9 || d->cc_minor != 0)
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: device %d has compute capability %d.%d; the fa3 kernel is built "
                       "for sm_90a (9.0: H100, H200) only",
                       d->device, d->cc_major, d->cc_minor);
    return MV_OK;
}

int mv_cuda_fa3_config(const mv_fa3_device *d, int D, const int32_t *cu, int nseg, mv_fa3_cfg *c)
{
    const mv_fa3_entry *t = fa3_entry(D);
    if (!t || d->cc_major != 9 || d->cc_minor != 0) return -1;
    /* the cost of a key-tile size: every query tile walks ceil(L / keys) key tiles of keys plus
     * key_cost keys' worth (barriers, softmax bookkeeping), L query rows per segment */
    double cost[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < nseg; i++) {
            const double L = cu[i + 1] - cu[i];
            cost[k] += L * ceil(L / t->keys[k]) * (t->keys[k] + t->key_cost);
        }
    c->consumers = t->consumers;
    c->keys = cost[0] < cost[1] ? t->keys[0] : t->keys[1];
    c->swizzle = t->swizzle;
    c->qreg = t->qreg;
    c->persistent = t->persistent;
    c->stages = t->stages;
    c->rescale_min = t->rescale_min;
    c->qpad = t->qpad;
    c->tails = t->tails;
#ifdef MV_VARIANTS
    mv_variants_apply(c, &mv_variants.fa3); /* the harness's --fa3 */
#endif
    return 0;
}

int mv_cuda_fa3_split(const mv_fa3_device *d, const mv_fa3_cfg *c, int D, const mv_attn_tile *tiles, int n_tiles,
                      int heads)
{
    const int64_t items = (int64_t)n_tiles * heads;
    const mv_fa3_entry *t = fa3_entry(D);
    if (!t || items <= 0 || items > 0x3fffffff || c->keys <= 0) return 0;
#ifdef MV_VARIANTS
    if (mv_variants.fa3_split >= 0) /* the harness's --fa3 split=N: the last N items */
        return mv_variants.fa3_split < items ? mv_variants.fa3_split : (int)items;
#endif
    if (!c->persistent) return 0;
    /* a last wave of the persistent grid at most split_max_fill % full behind at least one full
     * one; items of equal cost (every tile walks the same number of key tiles), each worth halving */
    const int64_t G = d->sms, rem = G > 0 ? items % G : 0;
    if (G <= 0 || items < G || rem == 0 || 100 * rem > (int64_t)t->split_max_fill * G) return 0;
    const int nkv = (tiles[0].kv_end - tiles[0].kv_start + c->keys - 1) / c->keys;
    if (nkv < t->split_min_tiles) return 0;
    for (int i = 1; i < n_tiles; i++)
        if ((tiles[i].kv_end - tiles[i].kv_start + c->keys - 1) / c->keys != nkv) return 0;
    return (int)rem;
}

/* whether configuration c runs tail tiles in the tail kernel (its template's static_assert) */
static bool fa3_tail_kernel(const mv_fa3_cfg *c) { return c->tails && c->consumers == 3 && !c->qreg; }

int mv_cuda_fa3_tails(const mv_fa3_device *d, const mv_fa3_cfg *c, mv_attn_tile *tiles, int n_tiles, int heads)
{
    if (!fa3_tail_kernel(c) || n_tiles <= 0) return 0;
    auto rest = [](const mv_attn_tile &t) { return t.kv_end - t.q0 > 64; };
    int64_t n = 0;
    for (int i = 0; i < n_tiles; i++) n += !rest(tiles[i]);
    if (n == 0 || n * heads < d->sms) return 0;
    std::stable_partition(tiles, tiles + n_tiles, rest);
    return (int)n;
}

size_t mv_cuda_fa3_part_bytes(const mv_fa3_cfg *c, int D, int split)
{
    return (size_t)2 * split * mv_cuda_fa3_bm(c) * (D + 2) * sizeof(float); /* fa3_store_part's layout */
}

void mv_cuda_fa3_plan(const mv_fa3_device *d, const mv_fa3_cfg *c, int D, int n_tiles, int heads, int split,
                      int tail, mv_fa3_plan *p)
{
    p->cfg = *c;
    p->tail = fa3_tail_kernel(c) && tail > 0 ? (tail < n_tiles ? tail : n_tiles) : 0;
    const int64_t items = (int64_t)(n_tiles - p->tail) * heads, titems = (int64_t)p->tail * heads;
    if (split > items) split = (int)items;
    const int64_t vitems = items + split; /* a split item's two pieces are two */
    auto grid = [&](int64_t v) {
        return c->persistent && d->sms > 0 && d->sms < v ? d->sms : v <= 0x7fffffff ? (int)v : 0;
    };
    p->q_scale = c->qpad && D % 16 == 8 && !c->qreg ? fa3_scale_log2(D) : 1.f;
    p->split = split;
    p->grid = grid(vitems);
    p->tail_grid = grid(titems);
    p->part_bytes = split > 0 ? mv_cuda_fa3_part_bytes(c, D, split) : 0;
}

/* ---- launcher ------------------------------------------------------------------------- */

/* Raises kernel's dynamic shared-memory limit to smem on s's device, once per state (bit: which
 * instantiation, < 448, unique across the family and version 1; cudaFuncSetAttribute acts on the
 * current device only). */
static cudaError_t fa3_smem_limit(mv_attn_state *s, int bit, const void *kernel, size_t smem)
{
    const uint64_t m = 1ull << (bit % 64);
    if (s->fa3_attr[bit / 64] & m) return cudaSuccess;
    cudaError_t r = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (r == cudaSuccess) s->fa3_attr[bit / 64] |= m;
    return r;
}

/* The tensor map of qkv [n, 3 * heads * D] bf16 in boxes of `cols` columns x BN rows: 8 without
 * swizzle, or 16 with the 32-byte swizzle. */
static cudaError_t fa3_tensor_map(mv_attn_state *s, CUtensorMap *tm, const bf16 *qkv, int64_t n, int heads, int D,
                                  int BN, int cols)
{
    if (!s->fa3_encode) {
        cudaDriverEntryPointQueryResult q;
        void *fn = NULL;
        cudaError_t r = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
        if (r != cudaSuccess) return r;
        if (q != cudaDriverEntryPointSuccess || !fn) return cudaErrorNotSupported;
        s->fa3_encode = fn;
    }
    const cuuint64_t dims[2] = {(cuuint64_t)3 * heads * D, (cuuint64_t)n};
    const cuuint64_t strides[1] = {(cuuint64_t)3 * heads * D * sizeof(bf16)};
    const cuuint32_t box[2] = {(cuuint32_t)cols, (cuuint32_t)BN}, es[2] = {1, 1};
    CUresult r = ((PFN_cuTensorMapEncodeTiled_v12000)s->fa3_encode)(
        tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)qkv, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
        cols == 16 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* One kernel of the family on plan p (validated by mv_cuda_attention_fa3): the grid p->grid over
 * the tiles before the last p->tail, then, with a split, the merge of the split items' pieces,
 * then the tail kernel (TL) over the last p->tail tiles. */
template <int D, int BN, bool SW, bool QR, int NC, int ST, int RM, bool PM>
static cudaError_t launch_fa3v2(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, cudaStream_t st)
{
    typedef fa3v2_shape<D, BN, SW, NC, ST> S;
    static_assert(RM == 0 || RM == 8, "fa3_smem_limit's bits");
#ifdef MV_VARIANTS
    constexpr bool TAILS = NC == 3 && !QR; /* the tail kernel exists for these */
#else
    constexpr bool TAILS = NC == 3 && !QR && mv_fa3_table_tails(); /* ... where the table runs it */
#endif
    /* bits 0..383: one per (PM, RM, ST, NC, SW, QR, D, BN); the tail kernel's 448 on */
    constexpr int bit = (BN == 128 ? 0 : BN == 112 ? 1 : 2) + 3 * (D == 72) + 6 * QR + 12 * SW + 24 * (NC == 3) +
                        48 * (ST == 3) + 96 * (RM > 0) + 192 * PM;
    const int tail = TAILS ? p->tail : 0, nm = n_tiles - tail;
    cudaError_t r = nm > 0 ? fa3_smem_limit(s, bit, (const void *)attn_fa3v2_kernel<D, BN, SW, QR, NC, ST, RM, PM>,
                                            S::SMEM)
                           : cudaSuccess;
    if constexpr (TAILS)
        if (r == cudaSuccess && tail > 0)
            r = fa3_smem_limit(s, 448 + bit, (const void *)attn_fa3v2_kernel<D, BN, SW, QR, NC, ST, RM, PM, true>,
                               fa3v2_shape<D, BN, SW, NC, ST, true>::SMEM);
    if (r != cudaSuccess) return r;
    CUtensorMap tm, tm16, tmq;
    r = fa3_tensor_map(s, &tm, qkv, n, heads, D, BN, 8);
    if (r == cudaSuccess) r = SW ? fa3_tensor_map(s, &tm16, qkv, n, heads, D, BN, 16) : cudaSuccess;
    if (r == cudaSuccess) r = BN == 64 ? cudaSuccess : fa3_tensor_map(s, &tmq, qkv, n, heads, D, 64, 8);
    if (r != cudaSuccess) return r;
    if (!SW) tm16 = tm; /* not read */
    if (BN == 64) tmq = tm;
    const int items = nm * heads, split = p->split;
    if (nm > 0) {
        attn_fa3v2_kernel<D, BN, SW, QR, NC, ST, RM, PM><<<(unsigned)p->grid, S::THREADS, S::SMEM, st>>>(
            tm, tm16, tmq, out, tiles, nm, heads, fa3_scale_log2(D), split, part);
        r = cudaGetLastError();
        if (r == cudaSuccess && split > 0) {
            attn_fa3_merge<D><<<(unsigned)split, 256, 0, st>>>(out, part, tiles, nm, items, split, S::BM, heads);
            r = cudaGetLastError();
        }
    }
    if constexpr (TAILS)
        if (r == cudaSuccess && tail > 0) {
            typedef fa3v2_shape<D, BN, SW, NC, ST, true> T;
            attn_fa3v2_kernel<D, BN, SW, QR, NC, ST, RM, PM, true><<<(unsigned)p->tail_grid, T::THREADS, T::SMEM, st>>>(
                tm, tm16, tmq, out, tiles + nm, tail, heads, fa3_scale_log2(D), 0, NULL);
            r = cudaGetLastError();
        }
    return r;
}

/* the table's kernels: entry E with its key-tile size keys[K] */
template <int E, int K>
static cudaError_t launch_entry(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, cudaStream_t st)
{
    constexpr mv_fa3_entry t = mv_fa3_table[E];
    return launch_fa3v2<t.head_dim, t.keys[K], t.swizzle != 0, t.qreg != 0, t.consumers, t.stages, t.rescale_min,
                        t.qpad != 0>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st);
}

/* 1 when c is what entry t can pick */
static int fa3_is_entry(const mv_fa3_cfg *c, const mv_fa3_entry *t)
{
    return c->consumers == t->consumers && c->swizzle == t->swizzle && c->qreg == t->qreg &&
           c->persistent == t->persistent && c->stages == t->stages && c->rescale_min == t->rescale_min &&
           c->qpad == t->qpad && c->tails == t->tails && (c->keys == t->keys[0] || c->keys == t->keys[1]);
}

template <int E = 0>
static cudaError_t launch_table(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, int D, cudaStream_t st)
{
    if constexpr (E == mv_fa3_table_len) {
        return cudaErrorNotSupported;
    } else {
        constexpr mv_fa3_entry t = mv_fa3_table[E];
        if (D == t.head_dim && fa3_is_entry(&p->cfg, &t))
            return p->cfg.keys == t.keys[0] ? launch_entry<E, 0>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st)
                                            : launch_entry<E, 1>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st);
        return launch_table<E + 1>(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
    }
}

#ifdef MV_VARIANTS
#include "variants/attention_fa3_variants.cuh" /* fa3_variant_built, fa3_launch_variant, version 1 */
#endif

int mv_cuda_fa3_built(const mv_fa3_cfg *c, int D)
{
    const mv_fa3_entry *t = fa3_entry(D);
    if (t && fa3_is_entry(c, t)) return 1;
#ifdef MV_VARIANTS
    return fa3_variant_built(c, D);
#else
    return 0;
#endif
}

cudaError_t mv_cuda_attention_fa3(mv_attn_state *s, const mv_fa3_plan *p, float *part, size_t part_bytes, bf16 *out,
                                  const bf16 *qkv, int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, int D,
                                  cudaStream_t st)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return r;
    if (cur != s->device) return cudaErrorInvalidDevice;
    const mv_fa3_cfg *c = &p->cfg;
    if (!fa3_entry(D) || heads > 65535 || (c->keys != 64 && c->keys != 112 && c->keys != 128))
        return cudaErrorInvalidValue;
    if (s->fa3_cc == 0) { /* once per state: sm_90a code has no image for any other device */
        mv_fa3_device d;
        s->fa3_cc = mv_cuda_fa3_device(s->device, &d) == cudaSuccess && d.cc_major == 9 && d.cc_minor == 0 ? 1 : -1;
        (void)cudaGetLastError(); /* a failed query is not sticky; the state remembers the refusal */
    }
    if (s->fa3_cc < 0) return cudaErrorNoKernelImageForDevice;
    if (n_tiles <= 0) return cudaSuccess;
    if (p->tail < 0 || p->tail > n_tiles || (p->tail > 0 && !fa3_tail_kernel(c)))
        return cudaErrorInvalidValue;
    const int64_t items = (int64_t)(n_tiles - p->tail) * heads, vitems = items + p->split,
                  titems = (int64_t)p->tail * heads;
    if (p->split < 0 || p->split > items || vitems > 0x7fffffff || titems > 0x7fffffff ||
        (vitems > 0 && (p->grid < 1 || p->grid > vitems)) ||
        (titems > 0 && (p->tail_grid < 1 || p->tail_grid > titems)) ||
        (p->split > 0 && (!part || part_bytes < mv_cuda_fa3_part_bytes(c, D, p->split))))
        return cudaErrorInvalidValue; /* a plan that mv_cuda_fa3_plan did not make, or scratch too small */
    const mv_fa3_entry *t = fa3_entry(D);
    if (fa3_is_entry(c, t)) return launch_table(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
#ifdef MV_VARIANTS
    if (fa3_variant_built(c, D)) return fa3_launch_variant(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
#endif
    return cudaErrorNotSupported; /* a configuration this build does not instantiate */
}
