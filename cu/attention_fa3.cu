/* attention_fa3.cu - varlen bidirectional attention for Hopper (sm_90a only) on wgmma.mma_async,
 * the FlashAttention-3 instruction set: bf16 q/k/v, f32 accumulators in registers, online softmax
 * in f32. Same inputs and outputs as the builtin bf16 kernel (cu/attention.cu): q|k|v read from
 * the packed qkv [n, 3*heads*D], out [n, heads*D], work items (query tile of mv_cuda_fa3_bm() =
 * 128 or 192 rows, head) from the tile list mv_attn_tiles() builds out of cu_seqlens, per-device
 * state in mv_attn_state. Head dims 64 and 72 only (the tower's); anything else is
 * refused (cudaErrorInvalidValue here, a message from mv_cuda_fa3_check).
 *
 * Two versions, same function, both twin-tested (test/cuda/test_fa3.cu, with wgmma layout probes
 * for each shared-memory layout) and clean under compute-sanitizer memcheck / racecheck on an
 * H200 (2026-11-30):
 *   - version 2 (default): TMA loads by a producer warp on an mbarrier ring, two or three
 *     consumer warpgroups taking turns, softmax overlapped with P.V inside each warpgroup
 *     (FlashAttention-3's design), a persistent grid. Options, each chosen by what measured
 *     fastest (fa3_auto_*, mv_cuda_fa3_keys) or set by MV_FA3_WG / MV_FA3_SWIZZLE / MV_FA3_QREG /
 *     MV_FA3_BN / MV_FA3_PERSIST: 3 consumer warpgroups (192 query rows per K/V tile, 160
 *     registers each) or 2 (128, 240); K and V in 32-byte-swizzled TMA boxes of 16 columns; Q
 *     held in registers; 112 keys per tile (784 = 7 x 112) or 128 or 64; one CTA per SM taking
 *     work items in turn, or one per item. Defaults (3, swizzled, Q in shared memory, 112 or 128
 *     by segment length, persistent) at head dim 72: 316 TFLOP/s on 64 x 784, 442 on 16 x 4096,
 *     467 on 4 x 8160, 487 on 1 x 47376 (cuDNN 9.19: 249 / 398 / 332 / 337); at 64: 357 / 471 /
 *     493 / 498 (cuDNN 294 / 490 / 425 / 425): bench/RESULTS.md, eighth session; in the ninth's
 *     four runs 16 x 4096 at head dim 64 made 492-521 against cuDNN's 484-488.
 *   - version 1 (MV_FA3_VERSION=1): all 256 threads load with cp.async, every wgmma waited for:
 *     half the speed; kept as the simplest correct wgmma kernel to bisect version 2 against.
 * A wrong number in a later change: run test_fa3 (its probes say whether the descriptors or the
 * fragment layouts broke), then compare MV_FA3_VERSION=1 and 2, MV_FA3_BN=64 and 128. A result
 * that changes between runs is a missing fence or barrier (racecheck / synccheck). A change that
 * makes it slow: look for ptxas "Potential Performance Loss: wgmma.mma_async instructions are
 * serialized" (C7518: a wgmma under a branch that is not uniform for the compiler, e.g. skipping
 * the products of a warpgroup with no rows, cost 30 % everywhere; C7512: too few registers, the
 * Q-in-registers option with 3 warpgroups).
 *
 * Design of version 1 (version 2 opens with its own, further down):
 *   - 256 threads = 2 consumer warpgroups; warpgroup w owns query rows [64w, 64w + 64) of the tile.
 *   - Q (128 x DP), K and V (BN x DP / BN x D, two stages) in shared memory, loaded by all 256
 *     threads with cp.async (16 bytes each), rows past the segment zero-filled (src-size 0); the
 *     next K/V tile loads while this one is computed, as in the builtin kernel. DP = D rounded up
 *     to 16 (72 -> 80): the Q.K^T reduction runs over zero columns 72..79 written once at start.
 *   - Shared layout, no swizzle ("interleave" in CUTLASS's words): a tile of R rows x C chunks of
 *     8 bf16 is stored as 8-row x 16-byte core matrices of 128 contiguous bytes; core matrix
 *     (row / 8, chunk) at byte ((row / 8) * C + chunk) * 128, row % 8 at 16 bytes each. One layout
 *     serves Q and K as K-major operands (LBO = 128 B between the two 8-column halves of a k16
 *     step, SBO = C * 128 B between 8-row groups) and V as the N-major B operand of P.V
 *     (imm-trans-b 1; SBO = 128 B between 8-column groups of D, LBO = C * 128 B between 8-key
 *     groups). A cp.async warp writes 8 rows of one chunk = one 128-byte core matrix per 8 lanes.
 *   - S = Q K^T: KS = DP / 16 wgmma m64nBNk16 (SS: both operands from shared memory), one commit,
 *     wait 0. Mask keys past the segment to -inf, online softmax in log2 units (each thread holds
 *     2 rows; the row max / sum reduce over the 4 lanes of a quad, as for mma.sync), P rounded to
 *     bf16 into the A-fragment registers (the m64 accumulator layout per warp is the m16n8 C layout,
 *     so P packs like the builtin kernel's), O rescaled.
 *   - O += P V: BN / 16 wgmma m64nDk16 (RS: A = P from registers, B = V N-major), wait 0.
 *   - BN (keys per tile) 128 by default, 64 with MV_FA3_BN=64 (fewer registers; a fallback to try
 *     when the 128 one spills or fails).
 * Tried and dropped (ninth session, bench/NOTES.md): a quarter or half of the exponentials on the
 * FMA pipe (a degree-3 polynomial, FlashAttention-4's trick: -5 to -20 %, the softmax is bound by
 * its instruction count, not by MUFU), three K/V stages (no change), the row sums of P from the
 * tensor cores (an m64n8 product with ones beside P.V instead of one FADD per score: no change
 * where it fits in the registers, -35 % at head dim 72 x 128 keys where it spills). Left: 192-key
 * tiles with P through shared memory at head dim 64.
 * Split work items (tenth session, version 2): a last wave of the persistent grid at most half
 * full (one 2048² image: 16 x 86 items of 192 rows on 132 SMs make 10 waves + 56 items) runs its
 * items as two pieces over halves of their keys, merged by attn_fa3_merge (mv_cuda_fa3_split
 * decides from the host tile list; MV_FA3_SPLIT=0 turns it off, =N splits the last N items).
 *
 * Not here: f32/tf32 attention, causal masks, head dims other than 64/72, other GPUs (sm_90a
 * code runs on compute capability 9.0 only; the launcher refuses other devices). CPU twin:
 * mv_attention_cpu. */
#include <math.h>
#include <stdlib.h>

#include <cuda.h> /* CUtensorMap and its enums; the encoder comes through cudart (no -lcuda) */
#include <cudaTypedefs.h>

#include "mv_cuda.cuh"
#include "wgmma.cuh"

#define FA3_BM 128      /* query rows per CTA (two warpgroups x 64) */
#define FA3_THREADS 256 /* two consumer warpgroups */
static_assert(FA3_BM == MV_ATTN_BM_BF16, "fa3 reads the builtin bf16 kernel's tile list");

/* ---- kernel --------------------------------------------------------------------------- */
template <int D, int BN> struct fa3_shape {
    static constexpr int DP = (D + 15) / 16 * 16; /* padded reduction width of Q K^T (72 -> 80) */
    static constexpr int C = DP / 8;              /* 16-byte chunks per row of Q and K in shared memory */
    static constexpr int CV = D / 8;              /* chunks per row in global memory, and of V */
    static constexpr int KS = DP / 16;            /* k16 steps of Q K^T */
    static constexpr int Q_BYTES = FA3_BM * C * 16;
    static constexpr int K_BYTES = BN * C * 16; /* one stage */
    static constexpr int V_BYTES = BN * CV * 16;
    static constexpr size_t SMEM = (size_t)Q_BYTES + 2 * K_BYTES + 2 * V_BYTES;
};

/* ---- pieces both versions share (per thread: rows g and g + 8 of its warp's 16; s[4 nt + e]
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
/* FA3_RESCALE_MIN (a -D only for measurements, scripts/device-bundle.sh FA3_VARIANTS; 0 = off):
 * a row keeps its running max unless a tile raises it by more than this many powers of 2
 * (FlashAttention-4's conditional rescale), so O's rescale (fa3_rescale_o, skipped when no row of
 * the warp moved) is skipped more often; P then reaches at most 2^FA3_RESCALE_MIN, which bf16 P,
 * the f32 row sum and the f32 O hold without loss of relative precision. The value stays the
 * same for the row's 4 threads (m and mx are equal across them after the shuffles). Measured with
 * 8 (thirteenth session, bench/RESULTS.md): test_fa3 passes, the tower at 2048² and 448² does not
 * move, so it stays off. */
#ifndef FA3_RESCALE_MIN
#define FA3_RESCALE_MIN 0
#endif
/* online softmax in log2 units: s <- P (f32), m and l updated, corr[r] = exp2(m_old - m_new), the
 * factor the row's earlier output must be scaled by (0 on the first tile). The row max is taken
 * over the raw scores and scaled once (scale_log2 > 0: the same value as the max of the scaled
 * scores, rounding being monotonic). */
template <int BN>
static __device__ __forceinline__ void fa3_softmax(float *s, float *m, float *l, float *corr, float scale_log2)
{
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float raw = fmaxf(s[2 * r], s[2 * r + 1]);
#pragma unroll
        for (int nt = 1; nt < BN / 8; nt++) raw = fmaxf(raw, fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]));
        float mx = fmaxf(m[r], raw * scale_log2);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
#if FA3_RESCALE_MIN > 0
        if (mx - m[r] <= (float)FA3_RESCALE_MIN) mx = m[r]; /* false on the first tile (m = -inf) */
#endif
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
/* O / l into out for this thread's rows row_g and row_g + 8 that lie before kv1 */
template <int D>
static __device__ __forceinline__ void fa3_store(bf16 *out, const float *o, const float *l, int row_g, int kv1, int H,
                                                 int h, int t)
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
                *(__nv_bfloat162 *)(po + nt * 8) = __floats2bfloat162_rn(o[4 * nt + 2 * r] * inv, o[4 * nt + 2 * r + 1] * inv);
        }
    }
}

/* Rows [row0, row0 + nrows) of one head's q, k or v (src: its first column, row stride ld) into
 * the core-matrix layout at dst (CS chunks per 8-row group); rows >= limit are zero-filled.
 * Element i: 8 consecutive i are 8 rows of one chunk (one 128-byte core matrix). */
template <int CS, int CH>
static __device__ __forceinline__ void load_tile(uint32_t dst, const bf16 *src, int64_t ld, int row0, int nrows,
                                                 int limit, int tid)
{
    for (int i = tid; i < nrows * CH; i += FA3_THREADS) {
        int rg = i / (8 * CH), rem = i - rg * 8 * CH, c = rem >> 3, r8 = rem & 7;
        int gr = row0 + rg * 8 + r8;
        bool ok = gr < limit;
        cp_async16(dst + cm_offset(rg * 8 + r8, c, CS), src + (int64_t)(ok ? gr : row0) * ld + c * 8,
                   ok ? 16 : 0);
    }
}

/* grid (n_tiles, heads), block FA3_THREADS. */
template <int D, int BN>
__global__ void __launch_bounds__(FA3_THREADS, 1)
    attn_fa3_kernel(bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int heads, float scale_log2)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fa3_shape<D, BN> S;
    constexpr int C = S::C, CV = S::CV, KS = S::KS;
    static_assert(BN == 64 || BN == 128, "keys per tile");
    static_assert(D == 64 || D == 72, "head dim");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const uint32_t sQ = smem_u32(smem_raw), sK = sQ + S::Q_BYTES, sV = sK + 2 * S::K_BYTES;
    const int tid = threadIdx.x, wg = tid / 128, wl = (tid % 128) / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const mv_attn_tile tile = tiles[blockIdx.x];
    const int h = blockIdx.y;
    const int H = heads * D;
    const int64_t ld = 3 * (int64_t)H;
    const bf16 *gq = qkv + h * D, *gk = qkv + H + h * D, *gv = qkv + 2 * H + h * D;
    const int q0 = tile.q0, kv0 = tile.kv_start, kv1 = tile.kv_end;
    const int nkv = (kv1 - kv0 + BN - 1) / BN;

    if constexpr (C > CV) {
        /* zero chunks CV..C-1 (columns D..DP-1) of every 8-row group of sQ and both sK stages:
         * they are contiguous groups of C chunks, and cp.async never writes those chunks */
        constexpr int PADC = C - CV, GROUPS = FA3_BM / 8 + 2 * BN / 8;
        for (int i = tid; i < GROUPS * PADC * 8; i += FA3_THREADS) {
            int grp = i / (PADC * 8), rem = i % (PADC * 8);
            uint32_t a = sQ + cm_offset(grp * 8 + rem % 8, CV + rem / 8, C);
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
        }
    }
    load_tile<C, CV>(sQ, gq, ld, q0, FA3_BM, kv1, tid);
    load_tile<C, CV>(sK, gk, ld, kv0, BN, kv1, tid);
    load_tile<CV, CV>(sV, gv, ld, kv0, BN, kv1, tid);
    cp_async_commit();

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const uint32_t qw = sQ + (uint32_t)(wg * 8 * C * 128); /* this warpgroup's 64 rows: 8 groups */

    for (int j = 0; j < nkv; j++) {
        const int buf = j & 1;
        if (j + 1 < nkv) {
            const int nb = kv0 + (j + 1) * BN;
            load_tile<C, CV>(sK + (buf ^ 1) * S::K_BYTES, gk, ld, nb, BN, kv1, tid);
            load_tile<CV, CV>(sV + (buf ^ 1) * S::V_BYTES, gv, ld, nb, BN, kv1, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async(); /* this thread's cp.async / st.shared data -> wgmma's async proxy */
        __syncthreads();
        const uint32_t kb = sK + buf * S::K_BYTES, vb = sV + buf * S::V_BYTES;

        /* S[64, BN] = Q[64, DP] K[BN, DP]^T */
        float s[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++) s[i] = 0.f;
        reg_fence(s);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            wgmma_ss<BN>(s, desc_kmajor(qw + ks * 256, C), desc_kmajor(kb + ks * 256, C), ks > 0);
        wg_commit();
        wg_wait<0>();
        reg_fence(s);

        float corr[2];
        fa3_mask_tail<BN>(s, kv0 + j * BN, kv1, t);
        fa3_softmax<BN>(s, m, l, corr, scale_log2);
        fa3_rescale_o<D>(o, corr);
        uint32_t p[BN / 4];
        fa3_pack_p<BN>(p, s);
        /* O[64, D] += P[64, BN] V[BN, D] */
        reg_fence(o);
        reg_fence(p);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs<D>(o, &p[4 * kk], desc_nmajor(vb + kk * 2 * CV * 128, CV));
        wg_commit();
        wg_wait<0>();
        reg_fence(o);
        reg_fence(p);
        __syncthreads(); /* the next iteration's loads overwrite this stage */
    }

    fa3_store<D>(out, o, l, q0 + wg * 64 + wl * 16 + g, kv1, H, h, t);
#endif
}

/* ---- split work items (version 2): the last `split` of the items * heads work items are run as
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
 * tile (those before kv1), into part (np pieces of BM rows) */
template <int D>
static __device__ __forceinline__ void fa3_store_part(float *part, const float *o, const float *m, const float *l,
                                                      int piece, int np, int BM, int row_l, int q0, int kv1, int t)
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
            for (int nt = 0; nt < D / 8; nt++) *(float2 *)(po + nt * 8) = make_float2(o[4 * nt + 2 * r], o[4 * nt + 2 * r + 1]);
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

/* ---- version 2: TMA loads by a producer warp, mbarrier ring, ping-pong consumers ---------
 * 128 (NC + 1) threads: warpgroup 0 is the producer (one thread issues every TMA load; the
 * warpgroup gives its registers back), warpgroups 1..NC are consumers owning query rows
 * [64 (w - 1), 64 w) of the tile (BM = 64 NC rows). Shared memory in the chunk-major layout a TMA
 * box of 8 columns x R rows writes (wgmma.cuh): Q in two buffers (BM rows, C = DP / 8 chunks, the
 * last one zero when D = 72; work item i in buffer i % 2), K (FA3V2_ST stages of BN rows, same
 * chunks) and V (FA3V2_ST stages of BN rows, D / 8 chunks). Barriers: q_full / q_empty per Q
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
#ifndef FA3V2_ST /* a -D of its own only for measurements (scripts/device-bundle.sh FA3_VARIANTS) */
#define FA3V2_ST 2 /* stages of K and of V */
#endif

/* the same tile sizes as version 1 (fa3_shape: C chunks of Q and K, CV of V), more stages, and
 * the mbarriers after the data. SW: K's first D / 16 column pairs and all of V in
 * 32-byte-swizzled boxes of 16 columns (wgmma.cuh), V rounded up to VG = ceil(D / 16) boxes (its
 * columns D..16 VG - 1, the next head's or TMA's zeros, are loaded and never read: wgmma's N is
 * D). 256 bytes of slack to align the data to the swizzle's 256-byte period. */
template <int D, int BN, bool SW, int NC> struct fa3v2_shape : fa3_shape<D, BN> {
    typedef fa3_shape<D, BN> B;
    static constexpr int BM = 64 * NC;            /* query rows per CTA: NC consumer warpgroups x 64 */
    static constexpr int THREADS = 128 * (NC + 1); /* and the producer warpgroup */
    static constexpr int Q_BYTES = BM * B::C * 16;
    static constexpr int VG = (D + 15) / 16;
    static constexpr int V_BYTES = SW ? BN * VG * 32 : B::V_BYTES;
    static constexpr int DATA = 2 * Q_BYTES + FA3V2_ST * (B::K_BYTES + V_BYTES); /* Q: two buffers */
    static constexpr size_t SMEM = (size_t)DATA + 8 * (4 + 4 * FA3V2_ST) + 256;
};

/* SW: K (its first D / 16 column pairs) and V in 32-byte-swizzled boxes of 16 columns (whole
 * 32-byte sectors from L2), else in boxes of 8 columns. tm: boxes of 8 columns x BN rows, no
 * swizzle (Q; K and V without SW; K's last 8 columns when D % 16 = 8 with SW); tm16 (SW): boxes
 * of 16 columns x BN rows, 32-byte swizzle. QR: each consumer holds its 64 rows of Q in
 * registers (KS x 4 bf16 pairs, the A fragment) and runs S = Q K^T with A from registers, so
 * that the tensor cores read only K from shared memory (a third less shared-memory traffic per S
 * tile). Measured (attnbench, bench/RESULTS.md, seventh session): at head dim 72 both cost
 * (4 x 8160: 415 TFLOP/s without either, 351 with SW, 388 with QR), at 64 they help a little on
 * short segments (64 x 784: 231 -> 248). */
template <int D, int BN, bool SW, bool QR, int NC>
__global__ void __launch_bounds__(fa3v2_shape<D, BN, SW, NC>::THREADS, 1)
    attn_fa3v2_kernel(const __grid_constant__ CUtensorMap tm, const __grid_constant__ CUtensorMap tm16,
                      const __grid_constant__ CUtensorMap tmq, bf16 *out, const mv_attn_tile *tiles, int n_tiles,
                      int heads, float scale_log2, int split, float *part)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fa3v2_shape<D, BN, SW, NC> S;
    constexpr int C = S::C, CV = S::CV, KS = S::KS, ST = FA3V2_ST, KG = SW ? D / 16 : 0, BM = S::BM;
    constexpr int VW = SW ? 16 : 8, VB = SW ? S::VG : CV; /* V: boxes of VW columns, VB of them */
    static_assert(BN == 64 || BN == 112 || BN == 128, "keys per tile");
    static_assert(NC == 2 || NC == 3, "consumer warpgroups");
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
            mbar_init(k_empty + 8 * i, 4 * NC);
            mbar_init(v_empty + 8 * i, 4 * NC);
        }
        mbar_init_fence();
    }
    if constexpr (C > CV) {
        /* chunk CV (columns D..DP-1) of both Q buffers and of every K stage: zero, once (TMA never
         * writes it) */
        for (int i = tid; i < 2 * BM + ST * BN; i += S::THREADS) {
            const uint32_t a = i < 2 * BM ? sQ + (uint32_t)((i / BM) * S::Q_BYTES + (CV * BM + i % BM) * 16)
                                          : sK + (uint32_t)(((i - 2 * BM) / BN) * S::K_BYTES +
                                                            (CV * BN + (i - 2 * BM) % BN) * 16);
            asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0) : "memory");
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
                const uint32_t qb = (uint32_t)(qi & 1), qbuf = sQ + qb * S::Q_BYTES;
                mbar_wait(q_empty + 8 * qb, (uint32_t)((qi >> 1) & 1) ^ 1u);
                mbar_expect_tx(q_full + 8 * qb, BM * CV * 16);
                for (int c = 0; c < CV; c++) /* tmq: boxes of 8 columns x 64 rows */
                    for (int r = 0; r < BM; r += 64)
                        tma_load_2d(qbuf + (uint32_t)((c * BM + r) * 16), &tmq, h * D + c * 8, tile.q0 + r,
                                    q_full + 8 * qb);
                for (int j = 0; j < nkv; j++, kt++) {
                    const int st = kt % ST;
                    const uint32_t ph = (uint32_t)(kt / ST) & 1u, row = (uint32_t)(kv0 + j * BN);
                    mbar_wait(k_empty + 8 * st, ph ^ 1u);
                    mbar_expect_tx(k_full + 8 * st, BN * CV * 16);
                    /* SW: column pairs as swizzled 16-column boxes, the rest (8 columns when D %
                     * 16 = 8) in the 8-column layout at the offsets they have without SW */
                    for (int g = 0; g < KG; g++)
                        tma_load_2d(sK + (uint32_t)(st * S::K_BYTES + g * BN * 32), &tm16, H + h * D + g * 16,
                                    (int)row, k_full + 8 * st);
                    for (int c = 2 * KG; c < CV; c++)
                        tma_load_2d(sK + (uint32_t)(st * S::K_BYTES + c * BN * 16), &tm, H + h * D + c * 8, (int)row,
                                    k_full + 8 * st);
                    mbar_wait(v_empty + 8 * st, ph ^ 1u);
                    mbar_expect_tx(v_full + 8 * st, S::V_BYTES); /* VB boxes of VW columns x BN rows */
                    for (int c = 0; c < VB; c++)
                        tma_load_2d(sV + (uint32_t)(st * S::V_BYTES + c * BN * VW * 2), SW ? &tm16 : &tm,
                                    2 * H + h * D + c * VW, (int)row, v_full + 8 * st);
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
        auto softmax = [&](int j) {
            fa3_mask_tail<BN>(s, kv0 + j * BN, kv1, t);
            fa3_softmax<BN>(s, m, l, corr, scale_log2);
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
            softmax(j);
            wg_wait<0>();
            reg_fence(o);
            reg_fence(p);
            release(v_empty + 8 * sv);
            fa3_rescale_o<D>(o, corr);
            pack_p();
        }
        if constexpr (!QR) release(q_empty + 8 * qb); /* every S of the item is done */

        /* epilogue: O += P(n - 1) V(n - 1); the last consumer makes no arrival after the CTA's last
         * item, for a turn that never comes */
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

        if (it.piece < 0) fa3_store<D>(out, o, l, tile.q0 + cw * 64 + wl * 16 + g, kv1, H, h, t);
        else fa3_store_part<D>(part, o, m, l, it.piece, 2 * split, BM, cw * 64 + wl * 16 + g, tile.q0, kv1, t);
        kt += nkv;
    }
#endif
}

/* ---- launcher ------------------------------------------------------------------------- */
int mv_cuda_fa3_head_dim_ok(int D) { return D == 64 || D == 72; }

mv_status mv_cuda_fa3_check(int device, int D, mv_err *e)
{
    if (!mv_cuda_fa3_head_dim_ok(D))
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: the model's head dim is %d; the fa3 kernel has 64 and 72 only", D);
    int major = 0, minor = 0;
    cudaError_t r = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (r == cudaSuccess) r = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (r != cudaSuccess) return mv_cuda_check(r, e, "fa3 attention: compute capability");
    if (major != 9 || minor != 0)
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: --attention fa3: device %d has compute capability %d.%d; the fa3 kernel is built "
                       "for sm_90a (9.0: H100, H200) only",
                       device, major, minor);
    return MV_OK;
}

static float fa3_scale_log2(int D) { return (float)(1.0 / sqrt((double)D) * 1.4426950408889634); }

/* Raises kernel's dynamic shared-memory limit to smem on s's device, once per state (bit: which
 * instantiation; cudaFuncSetAttribute acts on the current device only). */
static cudaError_t fa3_smem_limit(mv_attn_state *s, uint64_t bit, const void *kernel, size_t smem)
{
    if (s->fa3_attr & bit) return cudaSuccess;
    cudaError_t r = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (r == cudaSuccess) s->fa3_attr |= bit;
    return r;
}

template <int D, int BN>
static cudaError_t launch_fa3(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int n_tiles,
                              int heads, cudaStream_t st)
{
    const size_t smem = fa3_shape<D, BN>::SMEM;
    cudaError_t r = fa3_smem_limit(s, 1ull << ((D == 72 ? 0 : 2) + (BN == 128 ? 0 : 1)),
                                   (const void *)attn_fa3_kernel<D, BN>, smem);
    if (r != cudaSuccess) return r;
    dim3 grid((unsigned)n_tiles, (unsigned)heads);
    attn_fa3_kernel<D, BN><<<grid, FA3_THREADS, smem, st>>>(out, qkv, tiles, heads, fa3_scale_log2(D));
    return cudaGetLastError();
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

/* version 2's consumer warpgroups, layout and Q placement when not set (MV_FA3_WG,
 * MV_FA3_SWIZZLE, MV_FA3_QREG): what measured fastest on an H200 (bench/RESULTS.md, eighth
 * session). Three warpgroups at both head dims (+10-25 % over two), with the swizzled K/V layout
 * (+2-10 % with three); Q in registers only with two at head dim 64 (with three it spills: 160
 * registers per consumer thread). */
static int fa3_auto_wg(int D)
{
    (void)D;
    return 3;
}
static int fa3_auto_sw(int D, int wg) { return wg == 3 || D == 64; }
static int fa3_auto_qr(int D, int wg) { return wg == 2 && D == 64; }

/* consumer warpgroups of the kernel s runs at head dim D: 2 (version 1 always) or 3 */
static int fa3_wg(const mv_attn_state *s, int D)
{
    if (s->fa3_ver != 2) return 2;
    return s->fa3_wg == 2 || s->fa3_wg == 3 ? s->fa3_wg : fa3_auto_wg(D);
}

int mv_cuda_fa3_bm(const mv_attn_state *s, int D) { return 64 * fa3_wg(s, D); }

/* version 2's grid (MV_FA3_PERSIST): 1 (default) = persistent, one CTA per SM taking items in
 * turn, 0 = one CTA per item. Persistent measured 3-20 % faster on segments up to 8160 patches
 * (the next item's loads run under the last one's tail) and equal on 47376 (bench/RESULTS.md,
 * eighth session). */
static int fa3_persist(const mv_attn_state *s) { return s->fa3_ps != 0; }

/* The cost of a key-tile size: every query tile walks ceil(L / BN) key tiles of BN keys plus a
 * fixed ~16 keys' worth (barriers, softmax bookkeeping), L query rows per segment. Measured
 * (attnbench, eighth session): 112 gains 8-12 % on 784-patch segments, 128 gains 2-4 % on 4096
 * and longer at head dim 64 (equal within noise at 72). */
int mv_cuda_fa3_keys(const mv_attn_state *s, int D, const int32_t *cu, int nseg)
{
    (void)D;
    if (s->fa3_bn == 64 || s->fa3_bn == 112 || s->fa3_bn == 128) return s->fa3_bn;
    double c112 = 0, c128 = 0;
    for (int i = 0; i < nseg; i++) {
        const double L = cu[i + 1] - cu[i];
        c112 += L * ceil(L / 112) * (112 + 16);
        c128 += L * ceil(L / 128) * (128 + 16);
    }
    return c112 < c128 ? 112 : 128;
}

/* s->fa3_sms, the multiprocessors of s's device, asked once per state (0 again after a failure) */
static cudaError_t fa3_sms(mv_attn_state *s)
{
    if (s->fa3_sms > 0) return cudaSuccess;
    const cudaError_t r = cudaDeviceGetAttribute(&s->fa3_sms, cudaDevAttrMultiProcessorCount, s->device);
    if (r != cudaSuccess) s->fa3_sms = 0;
    return r;
}

template <int D, int BN, bool SW, bool QR, int NC>
static cudaError_t launch_fa3v2(mv_attn_state *s, bf16 *out, const bf16 *qkv, int64_t n, const mv_attn_tile *tiles,
                                int n_tiles, int heads, int split, cudaStream_t st)
{
    typedef fa3v2_shape<D, BN, SW, NC> S;
    const size_t smem = S::SMEM;
    /* bits 4..51: one per (NC, SW, QR, D, BN) */
    cudaError_t r = fa3_smem_limit(
        s, 1ull << (4 + 24 * (NC == 3) + 12 * SW + 6 * QR + 3 * (D == 72) + (BN == 128 ? 0 : BN == 112 ? 1 : 2)),
        (const void *)attn_fa3v2_kernel<D, BN, SW, QR, NC>, smem);
    if (r != cudaSuccess) return r;
    CUtensorMap tm, tm16, tmq;
    r = fa3_tensor_map(s, &tm, qkv, n, heads, D, BN, 8);
    if (r == cudaSuccess) r = SW ? fa3_tensor_map(s, &tm16, qkv, n, heads, D, BN, 16) : cudaSuccess;
    if (r == cudaSuccess) r = BN == 64 ? cudaSuccess : fa3_tensor_map(s, &tmq, qkv, n, heads, D, 64, 8);
    if (r != cudaSuccess) return r;
    if (!SW) tm16 = tm; /* not read */
    if (BN == 64) tmq = tm;
    /* one CTA per work item (query tile, head; a split item's two pieces are two), or a
     * persistent grid of one CTA per SM */
    const int64_t items = (int64_t)n_tiles * heads, vitems = items + split;
    if (vitems > 0x7fffffff || split < 0 || split > items) return cudaErrorInvalidValue;
    if (fa3_persist(s) && (r = fa3_sms(s)) != cudaSuccess) return r;
    const int64_t grid = fa3_persist(s) && s->fa3_sms > 0 && s->fa3_sms < vitems ? s->fa3_sms : vitems;
    attn_fa3v2_kernel<D, BN, SW, QR, NC><<<(unsigned)grid, S::THREADS, smem, st>>>(
        tm, tm16, tmq, out, tiles, n_tiles, heads, fa3_scale_log2(D), split, s->fa3_part);
    r = cudaGetLastError();
    if (r != cudaSuccess || split == 0) return r;
    attn_fa3_merge<D><<<(unsigned)split, 256, 0, st>>>(out, s->fa3_part, tiles, n_tiles, (int)items, split, S::BM, heads);
    return cudaGetLastError();
}

/* part's bytes for `split` items of BM rows at head dim D (fa3_store_part's layout) */
static size_t fa3_part_bytes(int split, int BM, int D) { return (size_t)2 * split * BM * (D + 2) * sizeof(float); }

int mv_cuda_fa3_split(mv_attn_state *s, int D, const mv_attn_tile *tiles, int n_tiles, int heads, int keys)
{
    const int64_t items = (int64_t)n_tiles * heads;
    if (s->fa3_ver != 2 || s->fa3_split == 0 || items <= 0 || items > 0x3fffffff || keys <= 0) return 0;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != s->device) {
        (void)cudaGetLastError();
        return 0; /* the launch refuses the wrong device */
    }
    int split = 0;
    if (s->fa3_split > 0) { /* MV_FA3_SPLIT=N: the last N items (tests, measurements) */
        split = s->fa3_split < items ? s->fa3_split : (int)items;
    } else {
        if (!fa3_persist(s)) return 0;
        if (fa3_sms(s) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        const int64_t G = s->fa3_sms, rem = G > 0 ? items % G : 0;
        /* a last wave at most half full behind at least one full one; items of equal cost (every
         * tile walks the same number of key tiles), each worth halving (>= 8 key tiles) */
        if (G <= 0 || items < G || rem == 0 || 2 * rem > G) return 0;
        const int nkv = (tiles[0].kv_end - tiles[0].kv_start + keys - 1) / keys;
        if (nkv < 8) return 0;
        for (int i = 1; i < n_tiles; i++)
            if ((tiles[i].kv_end - tiles[i].kv_start + keys - 1) / keys != nkv) return 0;
        split = (int)rem;
    }
    /* part: grown on demand (once per state in practice); no memory means no split */
    const size_t need = fa3_part_bytes(split, mv_cuda_fa3_bm(s, D), D);
    if (need > s->fa3_part_bytes) {
        if (s->fa3_part) cudaFree(s->fa3_part);
        s->fa3_part = NULL;
        s->fa3_part_bytes = 0;
        if (cudaMalloc((void **)&s->fa3_part, need) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: the attention runs without splitting */
            s->fa3_part = NULL;
            return 0;
        }
        s->fa3_part_bytes = need;
    }
    return split;
}

cudaError_t mv_cuda_attention_fa3(mv_attn_state *s, bf16 *out, const bf16 *qkv, int64_t n, const mv_attn_tile *tiles,
                                  int n_tiles, int heads, int D, int keys, int split, cudaStream_t st)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return r;
    if (cur != s->device) return cudaErrorInvalidDevice;
    if (!mv_cuda_fa3_head_dim_ok(D) || heads > 65535 || (keys != 64 && keys != 112 && keys != 128))
        return cudaErrorInvalidValue;
    if (s->fa3_cc == 0) { /* once per state: sm_90a code has no image for any other device */
        mv_err e;
        s->fa3_cc = mv_cuda_fa3_check(s->device, D, &e) == MV_OK ? 1 : -1;
    }
    if (s->fa3_cc < 0) return cudaErrorNoKernelImageForDevice;
    if (n_tiles <= 0) return cudaSuccess;
    if (split < 0 || split > (int64_t)n_tiles * heads || (split > 0 && s->fa3_ver != 2) ||
        (split > 0 && s->fa3_part_bytes < fa3_part_bytes(split, mv_cuda_fa3_bm(s, D), D)))
        return cudaErrorInvalidValue; /* split comes from mv_cuda_fa3_split, which sized part */
    const int bn64 = keys == 64, bn112 = keys == 112;
#define FA3V2_LAUNCH_BN(D_, SW, QR, NC)                                                                      \
    (bn64    ? launch_fa3v2<D_, 64, SW, QR, NC>(s, out, qkv, n, tiles, n_tiles, heads, split, st)                      \
     : bn112 ? launch_fa3v2<D_, 112, SW, QR, NC>(s, out, qkv, n, tiles, n_tiles, heads, split, st)                     \
             : launch_fa3v2<D_, 128, SW, QR, NC>(s, out, qkv, n, tiles, n_tiles, heads, split, st))
#define FA3V2_LAUNCH(SW, QR, NC) (D == 72 ? FA3V2_LAUNCH_BN(72, SW, QR, NC) : FA3V2_LAUNCH_BN(64, SW, QR, NC))
#define FA3V2_LAUNCH_NC(SW, QR) (wg == 3 ? FA3V2_LAUNCH(SW, QR, 3) : FA3V2_LAUNCH(SW, QR, 2))
    if (s->fa3_ver == 2) {
        const int wg = fa3_wg(s, D);
        const int sw = s->fa3_sw >= 0 ? s->fa3_sw : fa3_auto_sw(D, wg),
                  qr = s->fa3_qr >= 0 ? s->fa3_qr : fa3_auto_qr(D, wg);
        return sw ? (qr ? FA3V2_LAUNCH_NC(true, true) : FA3V2_LAUNCH_NC(true, false))
                  : (qr ? FA3V2_LAUNCH_NC(false, true) : FA3V2_LAUNCH_NC(false, false));
    }
#undef FA3V2_LAUNCH_NC
#undef FA3V2_LAUNCH
#undef FA3V2_LAUNCH_BN
    if (D == 72)
        return bn64 ? launch_fa3<72, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                    : launch_fa3<72, 128>(s, out, qkv, tiles, n_tiles, heads, st);
    return bn64 ? launch_fa3<64, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                : launch_fa3<64, 128>(s, out, qkv, tiles, n_tiles, heads, st);
}
