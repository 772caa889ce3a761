/* attention_fa3_variants.cuh - the variants build's part of cu/attention_fa3.cu (included there
 * under -DMV_VARIANTS, after the production kernel and launcher, whose static pieces it uses):
 *   - fa3_variant_built / fa3_launch_variant: every configuration of the kernel family beyond the
 *     table's (fa3_table.cuh): consumer warpgroups 2 or 3, keys per tile 64 / 112 / 128, either
 *     K/V layout, Q in registers (with 2 consumer warpgroups only: with 3 the wgmma serialise for
 *     want of registers, ptxas C7512), any grid and split; and each table entry with 3 K/V stages
 *     or with the conditional rescale (rescale_min 8); at head dim 72 with Q in shared memory,
 *     each with or without the row max through Q's padded column (qpad);
 *   - version 1 (mv_cuda_attention_fa3_v1): all 256 threads load with cp.async, every wgmma
 *     waited for: half the speed; kept as the simplest correct wgmma kernel to bisect the
 *     production kernel against (bench/NOTES.md, "fa3 kernel: debugging").
 * All twin-tested by test/cuda/test_fa3.cu, selected by the harnesses' command lines
 * (test/cuda/variants/variants.cuh). Not here: anything production runs.
 *
 * Design of version 1:
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
 *   - BN (keys per tile) 128 or 64 (fewer registers). */

/* ---- version 1 ---------------------------------------------------------------------------- */
#define FA3_BM 128      /* query rows per CTA (two warpgroups x 64) */
#define FA3_THREADS 256 /* two consumer warpgroups */
static_assert(FA3_BM == MV_ATTN_BM_BF16, "fa3 version 1 reads the builtin bf16 kernel's tile list");

template <int D, int BN> struct fa3v1_shape : fa3_shape<D, BN> {
    typedef fa3_shape<D, BN> B;
    static constexpr int Q_BYTES = FA3_BM * B::C * 16;
    static constexpr size_t SMEM = (size_t)Q_BYTES + 2 * B::K_BYTES + 2 * B::V_BYTES;
};

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

/* version 1: grid (n_tiles, heads), block FA3_THREADS. */
template <int D, int BN>
__global__ void __launch_bounds__(FA3_THREADS, 1)
    attn_fa3_kernel(bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int heads, float scale_log2)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fa3v1_shape<D, BN> S;
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
        fa3_softmax<BN, 0>(s, m, l, corr, scale_log2);
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

template <int D, int BN>
static cudaError_t launch_fa3_v1(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int n_tiles,
                                 int heads, cudaStream_t st)
{
    const size_t smem = fa3v1_shape<D, BN>::SMEM;
    /* bits 384..387 (launch_fa3v2 has 0..383) */
    cudaError_t r = fa3_smem_limit(s, 384 + (D == 72 ? 0 : 2) + (BN == 128 ? 0 : 1), (const void *)attn_fa3_kernel<D, BN>,
                                   smem);
    if (r != cudaSuccess) return r;
    dim3 grid((unsigned)n_tiles, (unsigned)heads);
    attn_fa3_kernel<D, BN><<<grid, FA3_THREADS, smem, st>>>(out, qkv, tiles, heads, fa3_scale_log2(D));
    return cudaGetLastError();
}

cudaError_t mv_cuda_attention_fa3_v1(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                     int n_tiles, int heads, int D, int keys, cudaStream_t st)
{
    int cur = -1;
    cudaError_t r = cudaGetDevice(&cur);
    if (r != cudaSuccess) return r;
    if (cur != s->device) return cudaErrorInvalidDevice;
    if ((D != 64 && D != 72) || heads > 65535 || (keys != 64 && keys != 112 && keys != 128))
        return cudaErrorInvalidValue;
    if (s->fa3_cc == 0) {
        mv_fa3_device d;
        s->fa3_cc = mv_cuda_fa3_device(s->device, &d) == cudaSuccess && d.cc_major == 9 && d.cc_minor == 0 ? 1 : -1;
        (void)cudaGetLastError();
    }
    if (s->fa3_cc < 0) return cudaErrorNoKernelImageForDevice;
    if (n_tiles <= 0) return cudaSuccess;
    const int bn64 = keys == 64; /* 112 runs as 128 */
    if (D == 72)
        return bn64 ? launch_fa3_v1<72, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                    : launch_fa3_v1<72, 128>(s, out, qkv, tiles, n_tiles, heads, st);
    return bn64 ? launch_fa3_v1<64, 64>(s, out, qkv, tiles, n_tiles, heads, st)
                : launch_fa3_v1<64, 128>(s, out, qkv, tiles, n_tiles, heads, st);
}

/* ---- the other configurations of the production kernel ------------------------------------ */
/* built: D 64 / 72; keys 64 / 112 / 128; consumers 2 or 3; qreg only with 2 consumers; qpad 0 or
 * 1 (it acts where mv_cuda_fa3_plan's q_scale says so: D 72, qreg 0); tails 0 or 1 (the tail
 * kernel runs with 3 consumers, qreg 0: mv_cuda_fa3_plan); 2 stages and no rescale;
 * or a table entry with 3 stages or with rescale_min 8 (one change at a time) */
static int fa3_variant_built(const mv_fa3_cfg *c, int D)
{
    if ((D != 64 && D != 72) || (c->keys != 64 && c->keys != 112 && c->keys != 128) ||
        (c->consumers != 2 && c->consumers != 3) || (c->swizzle != 0 && c->swizzle != 1) ||
        (c->qreg != 0 && c->qreg != 1) || (c->persistent != 0 && c->persistent != 1) ||
        (c->qpad != 0 && c->qpad != 1) || (c->tails != 0 && c->tails != 1))
        return 0;
    if (c->stages == 2 && c->rescale_min == 0) return !(c->qreg && c->consumers == 3);
    if (!((c->stages == 3 && c->rescale_min == 0) || (c->stages == 2 && c->rescale_min == 8))) return 0;
    for (int i = 0; i < mv_fa3_table_len; i++) {
        mv_fa3_cfg t = *c; /* the entry with this one field changed */
        t.stages = mv_fa3_table[i].stages;
        t.rescale_min = mv_fa3_table[i].rescale_min;
        if (mv_fa3_table[i].head_dim == D && fa3_is_entry(&t, &mv_fa3_table[i])) return 1;
    }
    return 0;
}

/* the table's entries with ST stages and rescale RM */
template <int ST, int RM, int E = 0>
static cudaError_t launch_table_with(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                     int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, int D,
                                     cudaStream_t st)
{
    if constexpr (E == mv_fa3_table_len) {
        return cudaErrorNotSupported;
    } else {
        constexpr mv_fa3_entry t = mv_fa3_table[E];
        mv_fa3_cfg c = p->cfg;
        c.stages = t.stages;
        c.rescale_min = t.rescale_min;
        if (D == t.head_dim && fa3_is_entry(&c, &t))
            return c.keys == t.keys[0] ? launch_fa3v2<t.head_dim, t.keys[0], t.swizzle != 0, t.qreg != 0, t.consumers,
                                                      ST, RM, t.qpad != 0>(s, p, part, out, qkv, n, tiles, n_tiles,
                                                                           heads, st)
                                       : launch_fa3v2<t.head_dim, t.keys[1], t.swizzle != 0, t.qreg != 0, t.consumers,
                                                      ST, RM, t.qpad != 0>(s, p, part, out, qkv, n, tiles, n_tiles,
                                                                           heads, st);
        return launch_table_with<ST, RM, E + 1>(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
    }
}

template <int D, int BN, bool SW, bool QR, int NC>
static cudaError_t launch_cross(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, cudaStream_t st)
{
    if constexpr (QR && NC == 3) /* not built (fa3_variant_built) */
        return cudaErrorNotSupported;
    else if constexpr (D % 16 == 8 && !QR) /* the plan says whether q came pre-scaled */
        return p->q_scale != 1.f ? launch_fa3v2<D, BN, SW, QR, NC, 2, 0, true>(s, p, part, out, qkv, n, tiles, n_tiles,
                                                                                heads, st)
                                 : launch_fa3v2<D, BN, SW, QR, NC, 2, 0, false>(s, p, part, out, qkv, n, tiles, n_tiles,
                                                                                 heads, st);
    else
        return launch_fa3v2<D, BN, SW, QR, NC, 2, 0, false>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st);
}

/* c: fa3_variant_built */
static cudaError_t fa3_launch_variant(mv_attn_state *s, const mv_fa3_plan *p, float *part, bf16 *out, const bf16 *qkv,
                                      int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, int D,
                                      cudaStream_t st)
{
    const mv_fa3_cfg *c = &p->cfg;
    if (c->stages == 3) return launch_table_with<3, 0>(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
    if (c->rescale_min == 8) return launch_table_with<2, 8>(s, p, part, out, qkv, n, tiles, n_tiles, heads, D, st);
#define FA3X_BN(D_, SW, QR, NC)                                                                                 \
    (c->keys == 64    ? launch_cross<D_, 64, SW, QR, NC>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st)  \
     : c->keys == 112 ? launch_cross<D_, 112, SW, QR, NC>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st) \
                      : launch_cross<D_, 128, SW, QR, NC>(s, p, part, out, qkv, n, tiles, n_tiles, heads, st))
#define FA3X_D(SW, QR, NC) (D == 72 ? FA3X_BN(72, SW, QR, NC) : FA3X_BN(64, SW, QR, NC))
#define FA3X_NC(SW, QR) (c->consumers == 3 ? FA3X_D(SW, QR, 3) : FA3X_D(SW, QR, 2))
    return c->swizzle ? (c->qreg ? FA3X_NC(true, true) : FA3X_NC(true, false))
                      : (c->qreg ? FA3X_NC(false, true) : FA3X_NC(false, false));
#undef FA3X_NC
#undef FA3X_D
#undef FA3X_BN
}
