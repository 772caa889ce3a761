/* test_fa3.cu - the Hopper wgmma attention kernel (cu/attention_fa3.cu, sm_90a) against its CPU
 * twin mv_attention_cpu (f32 on the same bf16-rounded q|k|v), beside the builtin bf16 kernel
 * (cu/attention.cu) on the same inputs: segment mixes around the 128-row query tile and the
 * 64/128-key tiles (1, 127, 128, 129, 784 x 3, 8160 and mixes of them), head dims 72 and 64,
 * both key-tile sizes (MV_FA3_BN 128 and 64), version 2 with each K/V layout and Q placement
 * (MV_FA3_SWIZZLE, MV_FA3_QREG) and version 1, near one-hot softmax rows. Per case:
 *   - rel L2 < 8e-3 against the twin (test_cuda_ops's bf16 attention budget), no NaN / inf;
 *   - rel L2 at most 2x the builtin kernel's (FlashAttention's error-budget rule);
 *   - every output row written (the output is NaN-poisoned before each run) and nothing written
 *     past the last row (a poisoned guard band of 128 rows after the output must stay intact);
 *   - a second run gives the same bits (a moving result is a race: METHOD.md).
 * Then the refusals: head dims other than 64 / 72 (launcher and mv_cuda_fa3_check's message).
 * `--big` runs only one 47376-row segment (D 64) and 47376 + 1 (D 72): minutes of CPU twin.
 * `--quick` (compute-sanitizer) runs the small mixes only. Needs compute capability 9.0; on any
 * other GPU it bails out (the kernel has no image there). TAP output (test/unit/unit.h); built by
 * scripts/device-bundle.sh, run by scripts/device-run.sh fa3. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "mv_cuda.cuh"
#include "wgmma.cuh"
extern "C" {
#include "mv_backend.h"
#include "mv_npy.h"
#include "mv_ops_cpu.h"
}
#include "unit.h"
#define TWIN_SEED 0x243F6A8885A308D3ull
#include "twin.cuh"

static std::vector<float> bf16_to_f32(const std::vector<uint16_t> &h)
{
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); i++) f[i] = mv_bf16_to_f32(h[i]);
    return f;
}

static mv_attn_state g_st;

/* One attention run into out (with a guard band of `guard` rows after n rows, all poisoned with
 * 0xffff = NaN first). fa3: 0 = builtin kernel, 64 / 128 = fa3 with that many keys per tile;
 * ver: the fa3 kernel version (1 or 2); sw, qr, wg: version 2's K/V layout, Q placement and consumer
 * warpgroups (tiles built with mv_cuda_fa3_bm's rows). */
static std::vector<uint16_t> run(int fa3, int ver, int sw, int qr, int wg, int ps, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles, int nt, int64_t n,
                                 int heads, int D, int64_t guard, cudaError_t *err, int split = 0)
{
    const size_t total = (size_t)((n + guard) * heads * D);
    CU(cudaMemset(out, 0xff, total * sizeof(bf16)));
    if (fa3) {
        g_st.fa3_ver = ver;
        g_st.fa3_sw = sw;
        g_st.fa3_qr = qr;
        g_st.fa3_wg = wg;
        g_st.fa3_ps = ps;
        g_st.fa3_sms = ps ? 5 : 0; /* a persistent grid of 5 CTAs: several items each, unevenly */
        /* split > 0: the last `split` items in two pieces (MV_FA3_SPLIT=split; the forced count
         * reads no tile) */
        g_st.fa3_split = split;
        const int sp = split ? mv_cuda_fa3_split(&g_st, D, NULL, nt, heads, fa3) : 0;
        g_st.fa3_split = -1;
        if (split && sp != (split < nt * heads ? split : nt * heads)) {
            *err = cudaErrorMemoryAllocation;
            return std::vector<uint16_t>();
        }
        *err = mv_cuda_attention_fa3(&g_st, out, qkv, n, tiles, nt, heads, D, fa3, sp, 0);
    } else {
        *err = mv_cuda_attention_bf16(&g_st, out, qkv, tiles, nt, heads, D, 0);
    }
    std::vector<uint16_t> h(total);
    if (*err == cudaSuccess) *err = cudaDeviceSynchronize();
    if (*err == cudaSuccess) CU(cudaMemcpy(h.data(), out, total * sizeof(bf16), cudaMemcpyDeviceToHost));
    return h;
}

static void test_fa3(const std::vector<int> &lens, int heads, int D, float qscale)
{
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    const int64_t n = cu.back(), H = (int64_t)heads * D, guard = 128;
    /* random q|k|v, rounded to bf16 (the kernels' input), q and k scaled: peaky softmax rows */
    std::vector<float> qkv((size_t)(n * 3 * H));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < 3 * H; c++)
            qkv[(size_t)(r * 3 * H + c)] = mv_round_bf16(urand() * (c < 2 * H ? qscale : 1.f));
    std::vector<float> ref((size_t)(n * H));
    mv_attention_cpu(ref.data(), qkv.data(), cu.data(), (int)lens.size(), heads, D);
    std::vector<uint16_t> hq(qkv.size());
    for (size_t i = 0; i < qkv.size(); i++) hq[i] = mv_f32_to_bf16(qkv[i]);
    bf16 *dq, *dout;
    CU(cudaMalloc(&dq, hq.size() * sizeof(bf16)));
    CU(cudaMemcpy(dq, hq.data(), hq.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, (size_t)((n + guard) * H) * sizeof(bf16)));
    /* tile lists of 128 rows (builtin kernel, fa3 with 2 consumer warpgroups) and 192 (3) */
    int ntl[2];
    mv_attn_tile *dtl[2];
    for (int w = 0; w < 2; w++) {
        const int bm = w ? 192 : MV_ATTN_BM_BF16;
        ntl[w] = mv_attn_tile_count(cu.data(), (int)lens.size(), bm);
        std::vector<mv_attn_tile> tiles((size_t)ntl[w]);
        mv_attn_tiles(tiles.data(), cu.data(), (int)lens.size(), bm);
        CU(cudaMalloc(&dtl[w], (size_t)ntl[w] * sizeof(mv_attn_tile)));
        CU(cudaMemcpy(dtl[w], tiles.data(), (size_t)ntl[w] * sizeof(mv_attn_tile), cudaMemcpyHostToDevice));
    }
    mv_attn_tile *dt = dtl[0];
    const int nt = ntl[0];
    char segs[128] = "";
    for (size_t i = 0; i < lens.size() && strlen(segs) < 100; i++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%d", i ? "," : "", lens[i]);

    cudaError_t e0;
    std::vector<uint16_t> hb = run(0, 0, 0, 0, 0, 0, dout, dq, dt, nt, n, heads, D, guard, &e0);
    CU(e0);
    std::vector<float> fb = bf16_to_f32(hb);
    cmp_t cb = compare(fb.data(), ref.data(), (size_t)(n * H));
    /* one configuration (label: what it is), run twice: within 2x the builtin kernel's error,
     * nothing written past n rows, both runs bitwise equal; a failed launch ends the test */
    auto check = [&](const char *label, int bn, int ver, int sw, int qr, int wg, int ps, int split) {
        const int w = mv_cuda_fa3_bm(&g_st, D) == 192;
        cudaError_t e1 = cudaSuccess, e2 = cudaSuccess;
        std::vector<uint16_t> h1 = run(bn, ver, sw, qr, wg, ps, dout, dq, dtl[w], ntl[w], n, heads, D, guard, &e1, split);
        std::vector<uint16_t> h2 =
            e1 == cudaSuccess ? run(bn, ver, sw, qr, wg, ps, dout, dq, dtl[w], ntl[w], n, heads, D, guard, &e2, split) : h1;
        if (e1 != cudaSuccess || e2 != cudaSuccess) {
            CHECK(0, "%s BN=%d D=%d heads=%d segments [%s]: %s", label, bn, D, heads, segs,
                  cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
            printf("Bail out! a failed launch may leave the context unusable\n");
            exit(2);
        }
        std::vector<float> f1 = bf16_to_f32(h1);
        cmp_t c = compare(f1.data(), ref.data(), (size_t)(n * H));
        long guard_hit = 0;
        for (size_t i = (size_t)(n * H); i < h1.size(); i++) guard_hit += h1[i] != 0xffff;
        const int same = h1 == h2;
        CHECK(c.nonfinite == 0 && c.rel_l2 < 8e-3 && c.rel_l2 <= 2 * cb.rel_l2 && guard_hit == 0 && same,
              "%s BN=%d D=%d heads=%d segments [%s] qk scale %.1f: rel_l2 %.2e (builtin %.2e) max_abs %.2e "
              "nonfinite %ld, guard band written %ld, second run %s",
              label, bn, D, heads, segs, qscale, c.rel_l2, cb.rel_l2, c.max_abs, c.nonfinite, guard_hit,
              same ? "identical" : "DIFFERENT");
    };
    /* version 2 with 128, 112 or 64 keys per tile, each layout (sw), Q placement (qr) and 2 or 3
     * consumer warpgroups (wg), then version 1 with 128 and 64 */
    char label[96];
    for (int vb = 0; vb < 26; vb++) {
        static const int bns[3] = {128, 112, 64};
        const int v2 = vb < 24, o = vb / 3; /* version 2: bn cycles fastest, then sw, qr, wg */
        const int ver = v2 ? 2 : 1, bn = v2 ? bns[vb % 3] : vb % 2 ? 64 : 128,
                  sw = v2 ? o & 1 : 0, qr = v2 ? (o >> 1) & 1 : 0, wg = v2 ? 2 + ((o >> 2) & 1) : 2,
                  ps = v2 ? sw ^ qr : 0; /* persistent grid: half of each sw and qr */
        g_st.fa3_ver = ver;
        g_st.fa3_wg = wg;
        if (mv_cuda_fa3_bm(&g_st, D) != 64 * wg) {
            CHECK(0, "fa3 v%d with %d consumer warpgroups: tile rows %d, not %d", ver, wg, mv_cuda_fa3_bm(&g_st, D),
                  64 * wg);
            continue;
        }
        snprintf(label, sizeof label, "fa3 v%d sw %d qr %d wg %d ps %d", ver, sw, qr, wg, ps);
        check(label, bn, ver, sw, qr, wg, ps, 0);
    }
    /* split work items (version 2, defaults otherwise): the last item, half of them, all of them
     * (items of one key tile run whole in both pieces), on a persistent grid and one CTA per item */
    g_st.fa3_ver = 2;
    g_st.fa3_wg = -1;
    const int items = ntl[mv_cuda_fa3_bm(&g_st, D) == 192] * heads;
    for (int split : {1, items / 2 + 1, items})
        for (int ps = 0; ps < 2; ps++)
            for (int bn : {112, 128}) {
                snprintf(label, sizeof label, "fa3 split %d of %d items ps %d", split, items, ps);
                check(label, bn, 2, -1, -1, -1, ps, split);
            }
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dtl[0]);
    cudaFree(dtl[1]);
}

/* ---- layout probes ----------------------------------------------------------------------
 * One warpgroup, one product of the kind the kernel runs, through the same helpers (wgmma.cuh:
 * cm_offset, desc_kmajor, desc_nmajor, the register fragments), against a double product on the
 * host. variant 0 = the kernel's descriptors; variant 1 = LBO and SBO swapped, run only when 0
 * fails, to say which way the hardware reads them (a diagnosis printed as a TAP comment). The
 * shared allocation has slack, so that a wrong descriptor reads garbage instead of faulting. */
#define PROBE_SMEM (96 * 1024)
/* Byte offset of (row, chunk) in layout L: 0 = interleaved core matrices (cs chunks a row
 * group; fa3 version 1), 1 = chunk-major with R rows a chunk (what TMA writes; version 2), 2 =
 * version 2's swizzled K and V (MV_FA3_SWIZZLE=1): chunk pairs (16 columns) of R rows as
 * 32-byte-swizzled boxes, R * 32 bytes apart, chunks from `tail` on chunk-major at the same
 * offsets. */
template <int L> static __device__ __forceinline__ uint32_t probe_off(int row, int chunk, int cs, int R, int tail = 0)
{
    if (L == 2 && chunk < tail) return (uint32_t)((chunk / 2) * R * 32) + sw32_offset(row, chunk & 1);
    return L ? (uint32_t)((chunk * R + row) * 16) : cm_offset(row, chunk, cs);
}

template <int L, int N, int DP>
__global__ void __launch_bounds__(128) probe_qk(float *out, const uint16_t *a, const uint16_t *b, int variant)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int C = DP / 8, KS = DP / 16, KG = L == 2 ? 4 : 0; /* swizzled K: 4 k16 steps */
    extern __shared__ __align__(128) unsigned char sm_raw[];
    unsigned char *sm = sm_raw + (((smem_u32(sm_raw) + 255u) & ~255u) - smem_u32(sm_raw)); /* the swizzle's period */
    const uint32_t sa = smem_u32(sm), sb = sa + 64 * DP * 2;
    const int tid = threadIdx.x, wl = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int i = tid; i < 64 * C; i += 128)
        *(uint4 *)(sm + probe_off<L == 2 ? 1 : L>(i / C, i % C, C, 64)) = *(const uint4 *)(a + (i / C) * DP + (i % C) * 8);
    for (int i = tid; i < N * C; i += 128)
        *(uint4 *)(sm + 64 * DP * 2 + probe_off<L>(i / C, i % C, C, N, 2 * KG)) =
            *(const uint4 *)(b + (i / C) * DP + (i % C) * 8);
    fence_proxy_async();
    __syncthreads();
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.f;
    reg_fence(d);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint64_t da, db;
        if (L == 0) {
            da = variant ? gmma_desc(sa + ks * 256, C * 128, 128) : desc_kmajor(sa + ks * 256, C);
            db = variant ? gmma_desc(sb + ks * 256, C * 128, 128) : desc_kmajor(sb + ks * 256, C);
        } else if (L == 2 && ks < KG) {
            da = desc_kmajor_cols(sa + ks * 2 * 64 * 16, 64);
            db = variant ? gmma_desc_sw32(sb + ks * N * 32, 256, 16) : desc_kmajor_sw32(sb + ks * N * 32);
        } else {
            da = variant ? gmma_desc(sa + ks * 2 * 64 * 16, 128, 64 * 16) : desc_kmajor_cols(sa + ks * 2 * 64 * 16, 64);
            db = variant ? gmma_desc(sb + ks * 2 * N * 16, 128, N * 16) : desc_kmajor_cols(sb + ks * 2 * N * 16, N);
        }
        wgmma_ss<N>(d, da, db, ks > 0);
    }
    wg_commit();
    wg_wait<0>();
    reg_fence(d);
#pragma unroll
    for (int nt = 0; nt < N / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            out[(16 * wl + g + 8 * (e >> 1)) * N + nt * 8 + 2 * t + (e & 1)] = d[4 * nt + e];
#endif
}

/* O[64, D] = P[64, 64] V[64, D]: P from registers in the kernel's fragment order, V N-major */
template <int L, int D>
__global__ void __launch_bounds__(128) probe_pv(float *out, const uint16_t *p, const uint16_t *v, int variant)
{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int CV = D / 8, KP = 64, VG = (D + 15) / 16;
    extern __shared__ __align__(128) unsigned char sm_raw[];
    unsigned char *sm = sm_raw + (((smem_u32(sm_raw) + 255u) & ~255u) - smem_u32(sm_raw)); /* the swizzle's period */
    const uint32_t sv = smem_u32(sm);
    const int tid = threadIdx.x, wl = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int i = tid; i < KP * CV; i += 128)
        *(uint4 *)(sm + probe_off<L>(i / CV, i % CV, CV, KP, 2 * VG)) = *(const uint4 *)(v + (i / CV) * D + (i % CV) * 8);
    if (L == 2 && CV < 2 * VG) /* the swizzled V loads columns D..16 VG - 1 and must never read them: NaN */
        for (int r = tid; r < KP; r += 128)
            *(uint4 *)(sm + probe_off<2>(r, CV, CV, KP, 2 * VG)) = make_uint4(0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u);
    uint32_t a[KP / 4];
    const int r0 = 16 * wl + g;
#pragma unroll
    for (int kk = 0; kk < KP / 16; kk++) {
        a[4 * kk + 0] = *(const uint32_t *)(p + r0 * KP + 16 * kk + 2 * t);
        a[4 * kk + 1] = *(const uint32_t *)(p + (r0 + 8) * KP + 16 * kk + 2 * t);
        a[4 * kk + 2] = *(const uint32_t *)(p + r0 * KP + 16 * kk + 8 + 2 * t);
        a[4 * kk + 3] = *(const uint32_t *)(p + (r0 + 8) * KP + 16 * kk + 8 + 2 * t);
    }
    fence_proxy_async();
    __syncthreads();
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.f;
    reg_fence(o);
    reg_fence(a);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < KP / 16; kk++) {
        uint64_t dv;
        if (L == 0) {
            const uint32_t at = sv + kk * 2 * CV * 128;
            dv = variant ? gmma_desc(at, 128, CV * 128) : desc_nmajor(at, CV);
        } else if (L == 2) {
            const uint32_t at = sv + kk * 16 * 32;
            dv = variant ? gmma_desc_sw32(at, 256, KP * 32) : desc_nmajor_sw32(at, KP);
        } else {
            const uint32_t at = sv + kk * 256;
            dv = variant ? gmma_desc(at, KP * 16, 128) : desc_nmajor_cols(at, KP);
        }
        wgmma_rs<D>(o, &a[4 * kk], dv);
    }
    wg_commit();
    wg_wait<0>();
    reg_fence(o);
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            out[(16 * wl + g + 8 * (e >> 1)) * D + nt * 8 + 2 * t + (e & 1)] = o[4 * nt + e];
#endif
}

/* out[64, N] from the probe vs the double product A[64, K] . B (B [N, K] when bt, else [K, N]) */
static double probe_err(const std::vector<float> &out, const std::vector<uint16_t> &A, const std::vector<uint16_t> &B,
                        int N, int K, int bt)
{
    double d2 = 0, r2 = 0;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)mv_bf16_to_f32(A[(size_t)i * K + k]) *
                       mv_bf16_to_f32(bt ? B[(size_t)j * K + k] : B[(size_t)k * N + j]);
            double dd = out[(size_t)i * N + j] - acc;
            d2 += dd * dd;
            r2 += acc * acc;
        }
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

static std::vector<uint16_t> rand_bf16(size_t n)
{
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = mv_f32_to_bf16(urand());
    return h;
}

/* kind 0: S = Q K^T (probe_qk<N, DP>), kind 1: O = P V (probe_pv<N>); returns rel L2 */
template <int KIND, int L, int N, int DP> static double probe_run(int variant)
{
    const int kind = KIND, K = kind ? 64 : DP;
    std::vector<uint16_t> A = rand_bf16((size_t)64 * K), B = rand_bf16((size_t)N * K);
    uint16_t *dA, *dB;
    float *dO;
    CU(cudaMalloc(&dA, A.size() * 2));
    CU(cudaMalloc(&dB, B.size() * 2));
    CU(cudaMalloc(&dO, (size_t)64 * N * 4));
    CU(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
    CU(cudaMemset(dO, 0xff, (size_t)64 * N * 4));
    if constexpr (KIND == 1) {
        CU(cudaFuncSetAttribute(probe_pv<L, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, PROBE_SMEM));
        probe_pv<L, N><<<1, 128, PROBE_SMEM>>>(dO, dA, dB, variant);
    } else {
        CU(cudaFuncSetAttribute(probe_qk<L, N, DP>, cudaFuncAttributeMaxDynamicSharedMemorySize, PROBE_SMEM));
        probe_qk<L, N, DP><<<1, 128, PROBE_SMEM>>>(dO, dA, dB, variant);
    }
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    std::vector<float> out((size_t)64 * N);
    CU(cudaMemcpy(out.data(), dO, out.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dO);
    return probe_err(out, A, B, N, K, kind == 0);
}

template <int KIND, int L, int N, int DP> static void probe(void)
{
    const int kind = KIND;
    const char *what = kind ? "O = P V (A in registers, B N-major)" : "S = Q K^T (A and B K-major)";
    double e0 = probe_run<KIND, L, N, DP>(0);
    CHECK(e0 < 1e-5, "wgmma layout probe: %s, %s layout, m64n%dk16, K %d: rel L2 %.2e vs a double product", what,
          L == 2 ? "32-byte-swizzled boxes (TMA, MV_FA3_SWIZZLE=1)" : L ? "chunk-major (TMA)" : "interleaved", N,
          kind ? 64 : DP, e0);
    if (!(e0 < 1e-5))
        printf("# diagnosis: the same with LBO and SBO swapped: rel L2 %.2e\n", probe_run<KIND, L, N, DP>(1));
}

static void test_probes(void)
{
    probe<0, 0, 128, 80>();
    probe<0, 0, 64, 80>();
    probe<0, 0, 128, 64>();
    probe<0, 0, 64, 64>();
    probe<1, 0, 72, 72>();
    probe<1, 0, 64, 64>();
    probe<0, 1, 128, 80>();
    probe<0, 1, 64, 80>();
    probe<0, 1, 128, 64>();
    probe<0, 1, 64, 64>();
    probe<1, 1, 72, 72>();
    probe<1, 1, 64, 64>();
    probe<0, 2, 128, 80>();
    probe<0, 2, 64, 80>();
    probe<0, 2, 128, 64>();
    probe<0, 2, 64, 64>();
    probe<1, 2, 72, 72>();
    probe<1, 2, 64, 64>();
}

/* mv_cuda_fa3_split's rule (by default): split the items of a last wave of the persistent grid
 * that is at most half full, behind full waves, when all tiles walk the same >= 8 key tiles */
static void test_split_policy(void)
{
    mv_attn_state s;
    mv_cuda_attn_state_init(&s, 0);
    s.fa3_split = -1;
    s.fa3_wg = 3;
    s.fa3_ps = 1;
    s.fa3_sms = 132;
    const int heads = 16, keys = 128;
    struct {
        std::vector<int> lens;
        bool want; /* what the rule gives (checked, so that both outcomes are covered) */
    } cases[] = {
        {{16384}, true},                    /* one 2048² image: 16 x 86 items = 10 waves + 56 */
        {{900, 900, 900, 900, 900, 900, 900, 900, 900}, true}, /* 720 items = 5 waves + 60, 8 key tiles */
        {{8160, 8160, 8160, 8160}, false},  /* 16 x 172 items = 20 waves + 112: more than half */
        {{16384, 784}, false},              /* unequal segments */
        {{784, 784}, false},                /* 160 items = 1 wave + 28, but 7 key tiles */
        {{784}, false},                     /* 16 x 5 items: less than one wave */
    };
    for (auto &c : cases) {
        std::vector<int32_t> cu(c.lens.size() + 1, 0);
        for (size_t i = 0; i < c.lens.size(); i++) cu[i + 1] = cu[i] + c.lens[i];
        const int nseg = (int)c.lens.size(), bm = mv_cuda_fa3_bm(&s, 72);
        const int nt = mv_attn_tile_count(cu.data(), nseg, bm);
        std::vector<mv_attn_tile> tiles((size_t)nt);
        mv_attn_tiles(tiles.data(), cu.data(), nseg, bm);
        const int items = nt * heads, rem = items % s.fa3_sms;
        int equal = 1, nkv = (tiles[0].kv_end - tiles[0].kv_start + keys - 1) / keys;
        for (int i = 1; i < nt; i++) equal &= (tiles[i].kv_end - tiles[i].kv_start + keys - 1) / keys == nkv;
        /* the rule, restated from the inputs */
        const bool rule = items >= s.fa3_sms && rem > 0 && 2 * rem <= s.fa3_sms && equal && nkv >= 8;
        const int got = mv_cuda_fa3_split(&s, 72, tiles.data(), nt, heads, keys);
        CHECK(got == (rule ? rem : 0) && rule == c.want,
              "fa3 split policy: %zu segments of %d, %d items on %d SMs (last wave %d), %d key tiles%s: split %d, want %d",
              c.lens.size(), c.lens[0], items, s.fa3_sms, rem, nkv, equal ? "" : " (unequal)", got, rule ? rem : 0);
    }
    s.fa3_split = 0;
    CHECK(mv_cuda_fa3_split(&s, 72, NULL, 86, heads, keys) == 0, "fa3 split policy: MV_FA3_SPLIT=0 never splits");
    mv_cuda_attn_state_free(&s);
}

static void test_refusals(void)
{
    for (int D : {32, 80, 96, 128}) {
        mv_err e;
        e.msg[0] = 0;
        mv_status s = mv_cuda_fa3_check(0, D, &e);
        char want[32];
        snprintf(want, sizeof want, "head dim is %d", D);
        cudaError_t r = mv_cuda_attention_fa3(&g_st, NULL, NULL, 1, NULL, 1, 1, D, 128, 0, 0);
        CHECK(s == MV_ERR_UNSUPPORTED && strstr(e.msg, want) && strstr(e.msg, "64 and 72") &&
                  r == cudaErrorInvalidValue,
              "fa3 refuses head dim %d: \"%s\", launcher: %s", D, e.msg, cudaGetErrorString(r));
    }
    mv_err e;
    CHECK(mv_cuda_fa3_check(0, 72, &e) == MV_OK && mv_cuda_fa3_check(0, 64, &e) == MV_OK,
          "fa3 takes head dims 72 and 64 on this device");
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const int big = argc > 1 && !strcmp(argv[1], "--big");
    if (!mv_cuda_available()) {
        printf("Bail out! no CUDA device\n");
        return 2;
    }
    CU(cudaSetDevice(0));
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major != 9 || minor != 0) {
        printf("Bail out! the fa3 kernel needs compute capability 9.0; device 0 is %d.%d\n", major, minor);
        return 2;
    }
    mv_cuda_attn_state_init(&g_st, 0);
    if (!big) test_probes();
    if (big) {
        test_fa3({47376}, 1, 64, 2.f);
        test_fa3({47376, 1}, 1, 72, 2.f);
        mv_cuda_attn_state_free(&g_st);
        return UNIT_DONE();
    }
    test_refusals();
    test_split_policy();
    const std::vector<std::vector<int>> mixes = {{1}, {127, 128, 129}, {784, 784, 784}, {17, 130, 64, 1, 1, 2},
                                                 {191, 192, 193, 385}};
    for (auto &mx : mixes) {
        test_fa3(mx, 2, 72, 2.f);
        test_fa3(mx, 3, 64, 2.f);
    }
    test_fa3({300, 65}, 2, 72, 6.f); /* near one-hot softmax rows */
    if (!quick) {
        test_fa3({1, 127, 128, 129, 784, 784, 784, 8160}, 2, 72, 2.f);
        test_fa3({8160}, 1, 64, 2.f);
        test_fa3({8160, 784, 129, 1}, 2, 64, 2.f);
    }
    mv_cuda_attn_state_free(&g_st);
    return UNIT_DONE();
}
