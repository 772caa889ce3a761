/* test_fa3.cu - the Hopper wgmma attention kernel (cu/attention_fa3.cu, sm_90a) against its CPU
 * twin mv_attention_cpu (f32 on the same bf16-rounded q|k|v), beside the builtin bf16 kernel
 * (cu/attention.cu) on the same inputs: segment mixes around the query tiles (128 and 192 rows)
 * and the key tiles (1, 127, 128, 129, 784 x 3, 8160 and mixes of them), head dims 72 and 64,
 * near one-hot softmax rows, for every configuration of the variants build
 * (test/cuda/variants/attention_fa3_variants.cuh): 64 / 112 / 128 keys per tile, each K/V layout
 * and Q placement, 2 or 3 consumer warpgroups, a persistent grid of 5 CTAs or one CTA per item,
 * the table's entries with 3 stages, with the conditional rescale and with or without the tail kernel
 * (tiles with at most 64 rows of their segment: in the mixes 1, 17, 64, 784, 193, 1000, 1024),
 * split work items, and version 1. Per configuration:
 *   - rel L2 < 8e-3 against the twin (test_cuda_ops's bf16 attention budget), no NaN / inf;
 *   - rel L2 at most 2x the builtin kernel's (FlashAttention's error-budget rule);
 *   - every output row written (the output is NaN-poisoned before each run) and nothing written
 *     past the last row (a poisoned guard band of 128 rows after the output must stay intact);
 *   - a second run gives the same bits (a moving result is a race: METHOD.md).
 * Then the policy (mv_cuda_fa3_config's key-tile choice, mv_cuda_fa3_split's rule, mv_cuda_fa3_tails
 * and the plan's tail grid, all pure) and
 * the refusals: head dims other than the table's (launcher and mv_cuda_fa3_check's message), a
 * configuration the build does not instantiate. `--fa3 SPEC` (variants.cuh) checks that one
 * configuration (over the table's) instead of the sweep; `--big` runs only one 47376-row segment
 * (D 64) and 47376 + 1 (D 72): minutes of CPU twin; `--quick` (compute-sanitizer) the small mixes
 * only. Needs compute capability 9.0; on any other GPU it bails out (the kernel has no image
 * there). TAP output (test/unit/unit.h); built by make cuda-tests, run by scripts/device-run.sh
 * fa3. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "mv_cuda.cuh"
#include "variants/variants.cuh"
#include "wgmma.cuh"
extern "C" {
#include "mv_backend.h"
#include "mv_npy.h"
#include "mv_ops_cpu.h"
}
#include "unit.h"
#define TWIN_SEED 0x243F6A8885A308D3ull
#include "qscale.cuh"
#include "twin.cuh"

static std::vector<float> bf16_to_f32(const std::vector<uint16_t> &h)
{
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); i++) f[i] = mv_bf16_to_f32(h[i]);
    return f;
}

static mv_attn_state g_st;
static mv_fa3_device g_dev; /* device 0 */

/* What one run is: the builtin kernel (kind 0), fa3 version 1 (1, keys 64 or 128) or a
 * configuration of the production kernel (2: cfg; split: the last `split` items in two pieces;
 * a persistent grid of 5 CTAs, so that each takes several items, unevenly) */
struct fa3_run {
    int kind;
    mv_fa3_cfg cfg;
    int split;
};

/* One attention run into out (with a guard band of `guard` rows after n rows, all poisoned with
 * 0xffff = NaN first); tiles of the run's query rows. qkv_s: qkv with q multiplied by qs, for a
 * plan that wants its q pre-scaled (mv_fa3_plan.q_scale; *scaled then set). */
static std::vector<uint16_t> run(const fa3_run &r, bf16 *out, const bf16 *qkv, const bf16 *qkv_s, float qs,
                                 const mv_attn_tile *tiles, int nt, int ntail, int64_t n, int heads, int D,
                                 int64_t guard, cudaError_t *err, int *scaled = NULL)
{
    const size_t total = (size_t)((n + guard) * heads * D);
    CU(cudaMemset(out, 0xff, total * sizeof(bf16)));
    float *part = NULL;
    if (r.kind == 2) {
        mv_fa3_device d = g_dev;
        d.sms = 5;
        mv_fa3_plan p;
        mv_cuda_fa3_plan(&d, &r.cfg, D, nt, heads, r.split < nt * heads ? r.split : nt * heads, ntail, &p);
        if (p.part_bytes) CU(cudaMalloc(&part, p.part_bytes));
        if (p.q_scale != 1.f && p.q_scale != qs) {
            printf("Bail out! the plan wants q scaled by %g, the test made %g\n", p.q_scale, qs);
            exit(2);
        }
        *err = mv_cuda_attention_fa3(&g_st, &p, part, p.part_bytes, out, p.q_scale != 1.f ? qkv_s : qkv, n, tiles, nt,
                                     heads, D, 0);
        if (scaled) *scaled = p.q_scale != 1.f;
    } else if (r.kind == 1) {
        *err = mv_cuda_attention_fa3_v1(&g_st, out, qkv, tiles, nt, heads, D, r.cfg.keys, 0);
    } else {
        *err = mv_cuda_attention_bf16(&g_st, out, qkv, tiles, nt, heads, D, 0);
    }
    std::vector<uint16_t> h(total);
    if (*err == cudaSuccess) *err = cudaDeviceSynchronize();
    if (*err == cudaSuccess) CU(cudaMemcpy(h.data(), out, total * sizeof(bf16), cudaMemcpyDeviceToHost));
    if (part) CU(cudaFree(part));
    return h;
}

/* the table's configuration for these segments with `keys` keys per tile */
static mv_fa3_cfg table_cfg(const std::vector<int32_t> &cu, int D, int keys)
{
    mv_fa3_cfg c;
    if (mv_cuda_fa3_config(&g_dev, D, cu.data(), (int)cu.size() - 1, &c)) {
        printf("Bail out! no fa3 configuration for head dim %d\n", D);
        exit(2);
    }
    if (keys) c.keys = keys;
    return c;
}

/* --fa3 SPEC: that configuration alone (over the table's), else the sweep */
static int g_spec_set, g_spec_split = -1;
static mv_fa3_cfg g_spec;

/* kramp > 0: keys scaled by 1 + kramp r / n at row r, so that scores rise along a segment and its
 * rows' maxima move by many powers of 2 after their first key tile */
static void test_fa3(const std::vector<int> &lens, int heads, int D, float qscale, float kramp = 0.f)
{
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    const int64_t n = cu.back(), H = (int64_t)heads * D, guard = 128;
    /* random q|k|v, rounded to bf16 (the kernels' input), q and k scaled: peaky softmax rows */
    std::vector<float> qkv((size_t)(n * 3 * H));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < 3 * H; c++)
            qkv[(size_t)(r * 3 * H + c)] = mv_round_bf16(urand() * (c < 2 * H ? qscale : 1.f) *
                                                         (c >= H && c < 2 * H ? 1.f + kramp * (float)r / (float)n : 1.f));
    std::vector<float> ref((size_t)(n * H));
    mv_attention_cpu(ref.data(), qkv.data(), cu.data(), (int)lens.size(), heads, D);
    std::vector<uint16_t> hq(qkv.size());
    for (size_t i = 0; i < qkv.size(); i++) hq[i] = mv_f32_to_bf16(qkv[i]);
    bf16 *dq, *dout;
    CU(cudaMalloc(&dq, hq.size() * sizeof(bf16)));
    CU(cudaMemcpy(dq, hq.data(), hq.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, (size_t)((n + guard) * H) * sizeof(bf16)));
    /* the q scale a plan with the padded-column max wants at this D (1: none) */
    mv_fa3_cfg qc = table_cfg(cu, D, 0);
    qc.qpad = 1;
    qc.qreg = 0;
    mv_fa3_plan qp;
    mv_cuda_fa3_plan(&g_dev, &qc, D, 1, 1, 0, 0, &qp);
    const float qs = qp.q_scale;
    bf16 *dqs = dq;
    /* such a plan's reference: attention of the q it is given, bf16(q qs) / qs (the tower's rope
     * rounds q qs once; here q is rounded twice, which the reference must see too) */
    std::vector<float> ref_s = ref;
    if (qs != 1.f) {
        CU(cudaMalloc(&dqs, hq.size() * sizeof(bf16)));
        CU(test_scale_q(dqs, dq, n, heads, D, qs, 0));
        std::vector<float> qkv_s = qkv;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < H; c++) {
                float &v = qkv_s[(size_t)(r * 3 * H + c)];
                v = mv_round_bf16(v * qs) / qs;
            }
        mv_attention_cpu(ref_s.data(), qkv_s.data(), cu.data(), (int)lens.size(), heads, D);
    }
    /* tile lists of 128 rows (builtin kernel, fa3 with 2 consumer warpgroups) and 192 (3; its
     * tail tiles last, ntail[1] of them: mv_cuda_fa3_tails, for every run of 3 consumers) */
    int ntl[2], ntail[2] = {0, 0};
    mv_attn_tile *dtl[2];
    for (int w = 0; w < 2; w++) {
        const int bm = w ? 192 : MV_ATTN_BM_BF16;
        ntl[w] = mv_attn_tile_count(cu.data(), (int)lens.size(), bm);
        std::vector<mv_attn_tile> tiles((size_t)ntl[w]);
        mv_attn_tiles(tiles.data(), cu.data(), (int)lens.size(), bm);
        if (w) { /* the rule with the tail kernel on, on the runs' grid of 5 SMs (so that a few tail
                  * tiles qualify); a run without it takes the reordered list as it is */
            mv_fa3_device d5 = g_dev;
            d5.sms = 5;
            mv_fa3_cfg tc = qc;
            tc.tails = 1;
            ntail[w] = mv_cuda_fa3_tails(&d5, &tc, tiles.data(), ntl[w], heads);
        }
        CU(cudaMalloc(&dtl[w], (size_t)ntl[w] * sizeof(mv_attn_tile)));
        CU(cudaMemcpy(dtl[w], tiles.data(), (size_t)ntl[w] * sizeof(mv_attn_tile), cudaMemcpyHostToDevice));
    }
    mv_attn_tile *dt = dtl[0];
    const int nt = ntl[0];
    char segs[128] = "";
    for (size_t i = 0; i < lens.size() && strlen(segs) < 100; i++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s%d", i ? "," : "", lens[i]);

    cudaError_t e0;
    std::vector<uint16_t> hb = run(fa3_run{0, {}, 0}, dout, dq, dqs, qs, dt, nt, 0, n, heads, D, guard, &e0);
    CU(e0);
    std::vector<float> fb = bf16_to_f32(hb);
    cmp_t cb = compare(fb.data(), ref.data(), (size_t)(n * H));
    /* one configuration, run twice: within 2x the builtin kernel's error, nothing written past n
     * rows, both runs bitwise equal; a failed launch ends the test */
    auto check = [&](const fa3_run &r) {
        char label[160], nm[64];
        if (r.kind == 1) snprintf(label, sizeof label, "fa3 version 1 bn=%d", r.cfg.keys);
        else snprintf(label, sizeof label, "fa3 %s split=%d", mv_variants_name(&r.cfg, nm, sizeof nm), r.split);
        if (r.kind == 2 && !mv_cuda_fa3_built(&r.cfg, D)) {
            CHECK(0, "%s D=%d: this build does not instantiate it", label, D);
            return;
        }
        const int w = r.kind == 2 && mv_cuda_fa3_bm(&r.cfg) == 192;
        cudaError_t e1 = cudaSuccess, e2 = cudaSuccess;
        int scaled = 0;
        std::vector<uint16_t> h1 =
            run(r, dout, dq, dqs, qs, dtl[w], ntl[w], ntail[w], n, heads, D, guard, &e1, &scaled);
        std::vector<uint16_t> h2 =
            e1 == cudaSuccess ? run(r, dout, dq, dqs, qs, dtl[w], ntl[w], ntail[w], n, heads, D, guard, &e2) : h1;
        if (e1 != cudaSuccess || e2 != cudaSuccess) {
            CHECK(0, "%s D=%d heads=%d segments [%s]: %s", label, D, heads, segs,
                  cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
            printf("Bail out! a failed launch may leave the context unusable\n");
            exit(2);
        }
        std::vector<float> f1 = bf16_to_f32(h1);
        cmp_t c = compare(f1.data(), (scaled ? ref_s : ref).data(), (size_t)(n * H));
        long guard_hit = 0;
        for (size_t i = (size_t)(n * H); i < h1.size(); i++) guard_hit += h1[i] != 0xffff;
        const int same = h1 == h2;
        CHECK(c.nonfinite == 0 && c.rel_l2 < 8e-3 && c.rel_l2 <= 2 * cb.rel_l2 && guard_hit == 0 && same,
              "%s D=%d heads=%d segments [%s] qk scale %.1f: rel_l2 %.2e (builtin %.2e) max_abs %.2e "
              "nonfinite %ld, guard band written %ld, second run %s",
              label, D, heads, segs, qscale, c.rel_l2, cb.rel_l2, c.max_abs, c.nonfinite, guard_hit,
              same ? "identical" : "DIFFERENT");
    };
    std::vector<fa3_run> runs;
    if (g_spec_set) {
        mv_fa3_cfg c = table_cfg(cu, D, 0);
        mv_variants_apply(&c, &g_spec);
        runs.push_back(fa3_run{2, c, g_spec_split > 0 ? g_spec_split : 0});
    } else {
        /* 128, 112 or 64 keys per tile, each layout (sw), Q placement (qr) and 2 or 3 consumer
         * warpgroups (wg; Q in registers with 2 only), a persistent grid for half of each sw and qr */
        for (int o = 0; o < 8; o++)
            for (int bn : {128, 112, 64}) {
                const int sw = o & 1, qr = (o >> 1) & 1, wg = 2 + ((o >> 2) & 1);
                if (qr && wg == 3) continue; /* not built: attention_fa3_variants.cuh */
                const int tl = wg == 3; /* the tail kernel where it runs (3 consumers, Q in shared memory) */
                runs.push_back(fa3_run{2, mv_fa3_cfg{wg, bn, sw, qr, sw ^ qr, 2, 0, 0, tl}, 0});
                if (!qr && D % 16 == 8) /* and with the row max through Q's padded column */
                    runs.push_back(fa3_run{2, mv_fa3_cfg{wg, bn, sw, qr, sw ^ qr, 2, 0, 1, tl}, 0});
            }
        /* the table's configurations (both key-tile sizes: in the sweep above) with 3 stages, with
         * the conditional rescale and with the other choice of tail kernel */
        for (int bn : {112, 128}) {
            mv_fa3_cfg c = table_cfg(cu, D, bn), c3 = c, c8 = c, ct = c;
            c3.stages = 3;
            c8.rescale_min = 8;
            ct.tails = !c.tails;
            runs.push_back(fa3_run{2, c3, 0});
            runs.push_back(fa3_run{2, c8, 0});
            runs.push_back(fa3_run{2, ct, 0});
        }
        /* version 1 with 128 and 64 keys */
        for (int bn : {128, 64}) runs.push_back(fa3_run{1, mv_fa3_cfg{2, bn, 0, 0, 0, 2, 0, 0, 0}, 0});
    }
    /* split work items (the table's configuration, or --fa3's): the last item, half of them, all of
     * them (items of one key tile run whole in both pieces), persistent grid and one CTA per item */
    const mv_fa3_cfg base = runs[0].kind == 2 && g_spec_set ? runs[0].cfg : table_cfg(cu, D, 0);
    const int wb = mv_cuda_fa3_bm(&base) == 192, items = (ntl[wb] - (base.tails ? ntail[wb] : 0)) * heads;
    for (int split : {1, items / 2 + 1, items})
        for (int ps = 0; ps < 2; ps++)
            for (int bn : {112, 128}) {
                mv_fa3_cfg c = base;
                c.persistent = ps;
                if (!g_spec_set) c.keys = bn;
                else if (bn == 112) continue; /* --fa3: its own keys */
                runs.push_back(fa3_run{2, c, split});
            }
    for (const fa3_run &r : runs) check(r);
    if (dqs != dq) cudaFree(dqs);
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
 * group; fa3 version 1), 1 = chunk-major with R rows a chunk (what TMA writes; the production
 * kernel), 2 = its swizzled K and V (sw=1): chunk pairs (16 columns) of R rows as 32-byte-swizzled
 * boxes, R * 32 bytes apart, chunks from `tail` on chunk-major at the same offsets. */
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
          L == 2 ? "32-byte-swizzled boxes (TMA, sw=1)" : L ? "chunk-major (TMA)" : "interleaved", N,
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

/* mv_cuda_fa3_config's key-tile size: of the entry's two, the one whose key tiles (each costing
 * its keys plus a fixed 16) pad the segments less; and the rest of the configuration from the
 * table (fa3_table.cuh) */
static void test_config_policy(void)
{
    const mv_fa3_device d = {0, 9, 0, 132};
    struct {
        std::vector<int> lens;
        int want; /* what the rule gives (checked, so that both outcomes are covered) */
    } cases[] = {{{784}, 112}, {{784, 784, 784}, 112}, {{4096}, 128}, {{8160, 8160}, 128}, {{1}, 112}, {{16384}, 128}};
    for (int D : {64, 72})
        for (auto &c : cases) {
            std::vector<int32_t> cu(c.lens.size() + 1, 0);
            for (size_t i = 0; i < c.lens.size(); i++) cu[i + 1] = cu[i] + c.lens[i];
            double c112 = 0, c128 = 0; /* the rule, restated */
            for (int L : c.lens) {
                c112 += (double)L * ceil(L / 112.0) * (112 + 16);
                c128 += (double)L * ceil(L / 128.0) * (128 + 16);
            }
            mv_fa3_cfg g;
            const int rc = mv_cuda_fa3_config(&d, D, cu.data(), (int)c.lens.size(), &g);
            const int rule = c112 < c128 ? 112 : 128;
            /* the padded column carries the row max where there is one (D % 16 = 8); q then comes
             * scaled by D^-0.5 log2(e) */
            mv_fa3_plan pl;
            mv_cuda_fa3_plan(&d, &g, D, 1, 1, 0, 0, &pl);
            const float want_qs = D % 16 == 8 ? (float)(1.0 / sqrt((double)D) * 1.4426950408889634) : 1.f;
            CHECK(rc == 0 && g.keys == rule && rule == c.want && g.consumers == 3 && g.swizzle == 1 && g.qreg == 0 &&
                      g.persistent == 1 && g.stages == 2 && g.rescale_min == 0 && g.qpad == (D % 16 == 8) &&
                      g.tails == 0 && pl.q_scale == want_qs && mv_cuda_fa3_built(&g, D),
                  "fa3 config D=%d %zu segments of %d: keys %d (rule %d), wg %d sw %d qr %d ps %d st %d rm %d qp %d "
                  "tl %d q_scale %g", D, c.lens.size(), c.lens[0], g.keys, rule, g.consumers, g.swizzle, g.qreg,
                  g.persistent, g.stages, g.rescale_min, g.qpad, g.tails, pl.q_scale);
        }
    mv_fa3_cfg g;
    const mv_fa3_device ampere = {0, 8, 0, 108};
    const int32_t cu1[2] = {0, 784};
    CHECK(mv_cuda_fa3_config(&ampere, 72, cu1, 1, &g) == -1 && mv_cuda_fa3_config(&d, 80, cu1, 1, &g) == -1,
          "fa3 config: none on compute capability 8.0, none at head dim 80");
}

/* mv_cuda_fa3_split's rule: split the items of a last wave of the persistent grid that is at most
 * half full, behind full waves, when all tiles walk the same >= 8 key tiles */
static void test_split_policy(void)
{
    const mv_fa3_device d = {0, 9, 0, 132};
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
        mv_fa3_cfg cfg;
        mv_cuda_fa3_config(&d, 72, cu.data(), (int)c.lens.size(), &cfg);
        cfg.keys = keys;
        const int nseg = (int)c.lens.size(), bm = mv_cuda_fa3_bm(&cfg);
        const int nt = mv_attn_tile_count(cu.data(), nseg, bm);
        std::vector<mv_attn_tile> tiles((size_t)nt);
        mv_attn_tiles(tiles.data(), cu.data(), nseg, bm);
        const int items = nt * heads, rem = items % d.sms;
        int equal = 1, nkv = (tiles[0].kv_end - tiles[0].kv_start + keys - 1) / keys;
        for (int i = 1; i < nt; i++) equal &= (tiles[i].kv_end - tiles[i].kv_start + keys - 1) / keys == nkv;
        /* the rule, restated from the inputs */
        const bool rule = items >= d.sms && rem > 0 && 2 * rem <= d.sms && equal && nkv >= 8;
        const int got = mv_cuda_fa3_split(&d, &cfg, 72, tiles.data(), nt, heads);
        mv_fa3_plan p;
        mv_cuda_fa3_plan(&d, &cfg, 72, nt, heads, got, 0, &p);
        CHECK(got == (rule ? rem : 0) && rule == c.want && p.split == got &&
                  p.grid == (d.sms < items + got ? d.sms : items + got) &&
                  p.part_bytes == (got ? (size_t)2 * got * bm * (72 + 2) * sizeof(float) : 0),
              "fa3 split policy: %zu segments of %d, %d items on %d SMs (last wave %d), %d key tiles%s: split %d, "
              "want %d; plan grid %d, scratch %zu bytes",
              c.lens.size(), c.lens[0], items, d.sms, rem, nkv, equal ? "" : " (unequal)", got, rule ? rem : 0, p.grid,
              p.part_bytes);
        if (c.lens[0] == 16384) {
            cfg.persistent = 0;
            const int g0 = mv_cuda_fa3_split(&d, &cfg, 72, tiles.data(), nt, heads);
            mv_cuda_fa3_plan(&d, &cfg, 72, nt, heads, g0, 0, &p);
            CHECK(g0 == 0 && p.grid == items && p.part_bytes == 0,
                  "fa3 split policy: one CTA per item never splits (split %d, grid %d of %d items)", g0, p.grid, items);
        }
    }
}

/* mv_cuda_fa3_tails: the tiles of a 192-row list with at most 64 rows of their segment go last
 * when they make a wave of work items, the others keep their order; the plan runs them in the
 * tail kernel only when the configuration says so, its grids counted apart */
static void test_tail_policy(void)
{
    const mv_fa3_device d = {0, 9, 0, 132};
    const int heads = 32;
    const std::vector<int> lens = {784, 200, 64, 1, 8160, 1024, 65, 192, 256};
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); i++) cu[i + 1] = cu[i] + lens[i];
    const int nseg = (int)lens.size(), bm = 192, nt = mv_attn_tile_count(cu.data(), nseg, bm);
    std::vector<mv_attn_tile> tiles((size_t)nt), moved;
    mv_attn_tiles(tiles.data(), cu.data(), nseg, bm);
    moved = tiles;
    mv_fa3_cfg cfg;
    mv_cuda_fa3_config(&d, 72, cu.data(), nseg, &cfg);
    cfg.tails = 1; /* the tail kernel on (the variants build's tl=1) */
    const int got = mv_cuda_fa3_tails(&d, &cfg, moved.data(), nt, heads);
    /* the rule restated: rows of the tile in its segment, min(bm, kv_end - q0) <= 64 */
    std::vector<mv_attn_tile> want_rest, want_tail;
    for (const mv_attn_tile &t : tiles) (t.kv_end - t.q0 <= 64 ? want_tail : want_rest).push_back(t);
    bool same = got == (int)want_tail.size() && (int)moved.size() == nt;
    for (int i = 0; same && i < nt; i++) {
        const mv_attn_tile &a = moved[(size_t)i], &b = i < nt - got ? want_rest[(size_t)i] : want_tail[(size_t)(i - (nt - got))];
        same = a.q0 == b.q0 && a.kv_start == b.kv_start && a.kv_end == b.kv_end;
    }
    CHECK(same && got > 0 && got < nt && got * heads >= d.sms,
          "fa3 tails: %d of %d tiles moved last (want %zu), the others' order kept", got, nt, want_tail.size());
    /* fewer than a wave of tail items (16 heads: 16 x 5 < 132 SMs), or no tail kernel: none move */
    std::vector<mv_attn_tile> kept = tiles;
    const int few = mv_cuda_fa3_tails(&d, &cfg, kept.data(), nt, 16);
    mv_fa3_cfg off = cfg;
    off.tails = 0;
    const int none = mv_cuda_fa3_tails(&d, &off, kept.data(), nt, heads);
    bool unmoved = true;
    for (int i = 0; i < nt; i++) unmoved &= kept[(size_t)i].q0 == tiles[(size_t)i].q0;
    CHECK(few == 0 && none == 0 && unmoved && (int)want_tail.size() * 16 < d.sms,
          "fa3 tails: none moved below a wave (%d) or without the tail kernel (%d)", few, none);
    mv_fa3_plan p;
    mv_cuda_fa3_plan(&d, &cfg, 72, nt, heads, 0, got, &p);
    const int rest = (nt - got) * heads, ti = got * heads;
    CHECK(p.tail == got && p.grid == (rest > d.sms ? d.sms : rest) && p.tail_grid == (ti > d.sms ? d.sms : ti),
          "fa3 plan with %d tail tiles: tail %d, grid %d, tail grid %d", got, p.tail, p.grid, p.tail_grid);
    cfg.tails = 0;
    mv_cuda_fa3_plan(&d, &cfg, 72, nt, heads, 0, got, &p);
    CHECK(p.tail == 0 && p.tail_grid == 0 && p.grid == (nt * heads > d.sms ? d.sms : nt * heads),
          "fa3 plan without the tail kernel: tail %d, grid %d", p.tail, p.grid);
    cfg.tails = 1;
    cfg.consumers = 2;
    mv_cuda_fa3_plan(&d, &cfg, 72, nt, heads, 0, got, &p);
    CHECK(p.tail == 0, "fa3 plan: no tail kernel with 2 consumer warpgroups (tail %d)", p.tail);
}

static void test_refusals(void)
{
    for (int D : {32, 80, 96, 128}) {
        mv_err e;
        e.msg[0] = 0;
        mv_status s = mv_cuda_fa3_check(&g_dev, D, &e);
        char want[32];
        snprintf(want, sizeof want, "head dim is %d", D);
        mv_fa3_plan p;
        p.cfg = mv_fa3_cfg{3, 128, 1, 0, 1, 2, 0, 0, 0};
        p.tail = p.tail_grid = 0;
        p.split = 0;
        p.grid = 1;
        p.part_bytes = 0;
        p.q_scale = 1.f;
        cudaError_t r = mv_cuda_attention_fa3(&g_st, &p, NULL, 0, NULL, NULL, 1, NULL, 1, 1, D, 0);
        CHECK(s == MV_ERR_UNSUPPORTED && strstr(e.msg, want) && strstr(e.msg, "64 and 72") &&
                  r == cudaErrorInvalidValue,
              "fa3 refuses head dim %d: \"%s\", launcher: %s", D, e.msg, cudaGetErrorString(r));
    }
    mv_err e;
    CHECK(mv_cuda_fa3_check(&g_dev, 72, &e) == MV_OK && mv_cuda_fa3_check(&g_dev, 64, &e) == MV_OK,
          "fa3 takes head dims 72 and 64 on this device");
    /* Q in registers with 3 consumer warpgroups: not instantiated (ptxas C7512), refused */
    mv_fa3_plan p;
    p.cfg = mv_fa3_cfg{3, 128, 1, 1, 1, 2, 0, 0, 0};
    p.tail = p.tail_grid = 0;
    p.split = 0;
    p.grid = 1;
    p.part_bytes = 0;
    p.q_scale = 1.f;
    const cudaError_t r = mv_cuda_attention_fa3(&g_st, &p, NULL, 0, NULL, NULL, 1, NULL, 1, 1, 72, 0);
    CHECK(!mv_cuda_fa3_built(&p.cfg, 72) && r == cudaErrorNotSupported,
          "fa3 refuses a configuration it does not instantiate (wg=3 qr=1): %s", cudaGetErrorString(r));
    /* tail tiles in a plan whose configuration has no tail kernel: a plan mv_cuda_fa3_plan never makes */
    p.cfg = mv_fa3_cfg{3, 128, 1, 0, 1, 2, 0, 1, 0};
    p.tail = p.tail_grid = 1;
    const cudaError_t r2 = mv_cuda_attention_fa3(&g_st, &p, NULL, 0, NULL, NULL, 1, NULL, 2, 1, 72, 0);
    CHECK(r2 == cudaErrorInvalidValue, "fa3 refuses tail tiles without the tail kernel: %s", cudaGetErrorString(r2));
}

int main(int argc, char **argv)
{
    int quick = 0, big = 0;
    for (int i = 1; i < argc; i++) {
        quick |= !strcmp(argv[i], "--quick");
        big |= !strcmp(argv[i], "--big");
    }
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
    CU(mv_cuda_fa3_device(0, &g_dev));
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--fa3") && i + 1 < argc) {
            if (mv_variants_spec(argv[i + 1], &g_spec, &g_spec_split)) {
                printf("Bail out! bad --fa3 %s (test/cuda/variants/variants.cuh)\n", argv[i + 1]);
                return 2;
            }
            g_spec_set = 1;
        }
    if (!big) test_probes();
    if (big) {
        test_fa3({47376}, 1, 64, 2.f);
        test_fa3({47376, 1}, 1, 72, 2.f);
        return UNIT_DONE();
    }
    test_refusals();
    test_config_policy();
    test_split_policy();
    test_tail_policy();
    const std::vector<std::vector<int>> mixes = {{1}, {127, 128, 129}, {784, 784, 784}, {17, 130, 64, 1, 1, 2},
                                                 {191, 192, 193, 385}};
    for (auto &mx : mixes) {
        test_fa3(mx, 2, 72, 2.f);
        test_fa3(mx, 3, 64, 2.f);
    }
    /* three heads of 72: an odd head between two even ones (its columns loaded rotated by 8), and
     * a last head whose V box reads past the qkv row (TMA's zeros) */
    test_fa3({191, 192, 193, 385}, 3, 72, 2.f);
    test_fa3({300, 65}, 2, 72, 6.f); /* near one-hot softmax rows */
    test_fa3({1000, 300}, 2, 72, 3.f, 4.f); /* row maxima rising by many powers of 2 along the keys */
    /* tail tiles (at most 64 rows of a 192-row tile: the tail kernel) over many key tiles, with
     * near one-hot rows and with maxima that rise along the keys (the three consumers' partial
     * softmaxes then hold different maxima) */
    test_fa3({1024, 200}, 3, 72, 6.f);
    test_fa3({1000, 64}, 3, 64, 3.f, 4.f);
    if (!quick) {
        test_fa3({1, 127, 128, 129, 784, 784, 784, 8160}, 2, 72, 2.f);
        test_fa3({8160}, 1, 64, 2.f);
        test_fa3({8160, 784, 129, 1}, 2, 64, 2.f);
    }
    return UNIT_DONE();
}
