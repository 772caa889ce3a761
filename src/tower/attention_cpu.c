/* attention_cpu.c - the CPU tower's attention (tower_cpu_int.h, mv_ops_cpu.h): heads split out
 * of qkv (rope fused), then per (segment, head, ATT_QB queries) item a flash-style loop over key
 * blocks, f32 online softmax, its two products per block (S = Q K_b^T, O_b = P V_b) through the
 * GEMM library's single-threaded sgemm (the tower's path in both --cpu-gemm modes); and
 * mv_attention_cpu(_gemm), the CPU twin of cu/attention.cu's kernels. Results do not depend on
 * the thread count: an item is one thread's, its key blocks depend on the segment length (and
 * the mode) alone. Compiled again with -DMV_VARIANTS (the variants build, linked into cpubench
 * only) it also runs the products on the AMX kernel (gemm_amx.c) in bf16x6 against K and V^T
 * packed once per forward by a parallel pre-pass (heads in groups under ATT_PACK_CAP bytes) into
 * memory the caller keeps: a measurement that was no faster (bench/NOTES.md), whose rows get the
 * same bytes in any call. Not here: the Linear layers, the block loop (tower_cpu.c). */
#include "mv_gemm_amx.h"
#include "mv_ops_cpu.h"
#include "tower_cpu_int.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One row of one key block of the online softmax on raw scores si[L] (the scores are scale . si):
 * si <- e^(scale si - m') with m' = max(*mx, scale max si), *sum <- *sum . e^(*mx - m') + sum_j
 * si[j]; *mx <- m'. Returns the factor e^(*mx - m') by which the row's earlier output must be
 * scaled (1 when the maximum did not grow; 0 for the first block, *mx = -inf). scale > 0 (f32's
 * rounding keeps the order, so the maximum of the scaled scores is the scaled maximum; scale 1
 * changes no bit). One row, one thread, a fixed order. */
MV_CLONES static float softmax_block(float *si, int L, float scale, float *mx, float *sum)
{
    float m = -INFINITY, s = 0.0f, acc[16] = {0}, m64[64];
    int j = 0;
    /* 64 partial maxima (4 vectors: one would wait on its own latency); max is exact in any order */
    for (int l = 0; l < 64; l++)
        m64[l] = m;
    for (; j + 64 <= L; j += 64)
        for (int l = 0; l < 64; l++)
            m64[l] = si[j + l] > m64[l] ? si[j + l] : m64[l];
    for (; j < L; j++)
        m = si[j] > m ? si[j] : m;
    /* a tree, not a 64-long chain of scalar max; halves in arrays of their own (one array
     * halved in place, m64[l] against m64[l + w], stays scalar: 63 dependent loads and stores a
     * row) */
    float m32[32], m16[16], m8[8], m4[4];
    for (int l = 0; l < 32; l++)
        m32[l] = m64[l + 32] > m64[l] ? m64[l + 32] : m64[l];
    for (int l = 0; l < 16; l++)
        m16[l] = m32[l + 16] > m32[l] ? m32[l + 16] : m32[l];
    for (int l = 0; l < 8; l++)
        m8[l] = m16[l + 8] > m16[l] ? m16[l + 8] : m16[l];
    for (int l = 0; l < 4; l++)
        m4[l] = m8[l + 4] > m8[l] ? m8[l + 4] : m8[l];
    for (int l = 0; l < 4; l++)
        m = m4[l] > m ? m4[l] : m;
    m = m * scale;
    m = m > *mx ? m : *mx;
    j = 0;
    for (; j + 16 <= L; j += 16) /* 16 partial sums: the same order for every vector width */
        for (int l = 0; l < 16; l++) {
            float p = exp_f32(si[j + l] * scale - m);
            si[j + l] = p;
            acc[l] += p;
        }
    for (; j < L; j++) {
        float p = exp_f32(si[j] * scale - m);
        si[j] = p;
        s += p;
    }
    for (int l = 0; l < 16; l++)
        s += acc[l];
    float alpha = *mx == -INFINITY ? 0.0f : (m == *mx ? 1.0f : exp_f32(*mx - m));
    *sum = *sum * alpha + s;
    *mx = m;
    return alpha;
}

/* qkv[n, 3H] (q | k | v, head-major inside each) -> hm[3][heads][n][D]: each head's rows
 * contiguous, so that sgemm packs them from consecutive memory. With cos_t/sin_t (non-NULL), q and
 * k are rotated on the way (mv_rope_apply_cpu's arithmetic, fused into the same pass). */
/* Compiled for AVX-512 / AVX2 too (MV_CLONES), but with fp-contract=off: the rope keeps HF's
 * arithmetic, each product rounded to f32 before the sum (an FMA would round once), so the bytes
 * are the same in every clone (test_rope_cpu). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
MV_CLONES void mv_cpu_split_heads_range(float *hm, const float *qkv, const float *cos_t, const float *sin_t,
                                        int64_t n, int64_t r0, int64_t r1, int heads, int D)
{
    int H = heads * D, half = D / 2;
    for (int64_t i = r0; i < r1; i++)
        for (int part = 0; part < 3; part++)
            for (int hd = 0; hd < heads; hd++) {
                const float *x = qkv + i * 3 * H + part * H + hd * D;
                float *o = hm + (((int64_t)part * heads + hd) * n + i) * D;
                if (part == 2 || !cos_t) {
                    memcpy(o, x, D * sizeof(float));
                    continue;
                }
                const float *c = cos_t + i * D, *s = sin_t + i * D;
#pragma omp simd
                for (int d = 0; d < half; d++) { /* o never overlaps x, c, s */
                    o[d] = x[d] * c[d] - x[d + half] * s[d];
                    o[d + half] = x[d + half] * c[d + half] + x[d] * s[d + half];
                }
            }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

void mv_cpu_split_heads(float *hm, const float *qkv, const float *cos_t, const float *sin_t,
                        int64_t n, int heads, int D)
{
#pragma omp parallel
    {
        int64_t r0, r1;
        row_range(n, omp_get_thread_num(), omp_get_num_threads(), 16, &r0, &r1); /* any cut */
        mv_cpu_split_heads_range(hm, qkv, cos_t, sin_t, n, r0, r1, heads, D);
    }
}

/* Keys per block of a segment of L keys: L when L <= ATT_KB, else L cut into equal blocks of at
 * most ATT_KB keys, a multiple of 16 (bf16x6: of 32, the AMX kernel's k step, so that a block is
 * a view of the packed K and V^T) but the last. Depends on L (and the mode) alone. */
_Static_assert(ATT_KB % 32 == 0, "ATT_KB: a multiple of 32 keys");
static int att_key_block(int L, int amx)
{
    if (L <= ATT_KB)
        return L;
    int nb = (L + ATT_KB - 1) / ATT_KB, a = amx ? 32 : 16;
    return ((L + nb - 1) / nb + a - 1) / a * a;
}

#ifdef MV_VARIANTS /* ---- the AMX path's packing: the variants build (cpubench) ---- */
/* bf16x6's packed K and V^T of one head of a segment of L keys: K as W[L, D] (S = Q K^T), then V^T
 * as W[D, L] (O = P V); a multiple of 1 KiB */
static size_t seg_pack_bytes(int L, int D) { return mv_amx_packed_bytes(D, L) + mv_amx_packed_bytes(L, D); }

/* *Kw, *Vw: the packed K and V^T of head hl (of a group of gc) of a segment of L keys whose
 * group's packing starts poff bytes per head into pack (seg_pos) */
static void head_views(void *pack, size_t poff, int gc, int hl, int L, int D, mv_amx_w *Kw, mv_amx_w *Vw)
{
    char *base = (char *)pack + poff * gc + (size_t)hl * seg_pack_bytes(L, D);
    mv_amx_view_init(Kw, base, D, L);
    mv_amx_view_init(Vw, base + mv_amx_packed_bytes(D, L), L, D);
}

/* heads per group of the bf16x6 pre-pass: as many as fit ATT_PACK_CAP (at least 1) */
static int pack_group(size_t per_head, int heads)
{
    size_t g = per_head ? ATT_PACK_CAP / per_head : (size_t)heads;
    return g < 1 ? 1 : g > (size_t)heads ? heads : (int)g;
}

static size_t pack_per_head(const int32_t *cu, int n_seg, int D)
{
    size_t b = 0;
    for (int sg = 0; sg < n_seg; sg++)
        b += seg_pack_bytes(cu[sg + 1] - cu[sg], D);
    return b;
}


/* floats of the AMX kernel's row scratch for ATT_QB rows of Q (D inputs) or of P (ATT_KB) */
static size_t amx_scratch_floats(int D)
{
    mv_amx_w q, p;
    mv_amx_view_init(&q, NULL, D, 32);
    mv_amx_view_init(&p, NULL, ATT_KB, 32);
    size_t a = mv_amx_scratch_bytes(&q, ATT_QB), b = mv_amx_scratch_bytes(&p, ATT_QB);
    return ((a > b ? a : b) / sizeof(float) + 15) / 16 * 16;
}
#endif

size_t mv_cpu_attention_scratch_floats(int D, int amx)
{
    size_t f = (size_t)ATT_QB * ATT_KB;
#ifdef MV_VARIANTS
    if (amx)
        f += ((size_t)ATT_QB * D + 15) / 16 * 16 + amx_scratch_floats(D);
#else
    (void)D, (void)amx;
#endif
    return f;
}

size_t mv_cpu_attention_pack_bytes(const int32_t *cu, int n_seg, int heads, int D, int amx)
{
#ifdef MV_VARIANTS
    if (amx) {
        size_t ph = pack_per_head(cu, n_seg, D);
        return ph * pack_group(ph, heads);
    }
#else
    (void)cu, (void)n_seg, (void)heads, (void)D, (void)amx;
#endif
    return 0;
}

/* Pre-pass tasks of one head of a segment (the AMX path): its K's n-tile pairs and its V^T's k
 * steps, in chunks of this many (256 keys) */
#define PACK_CH 8

/* A thread's walk over the segments: work of a group of gc heads is numbered segment by
 * segment, count(L) per head (items: query blocks; kind 1: pre-pass chunks). */
typedef struct {
    int sg;
    int64_t first; /* first index of segment sg */
    size_t poff;   /* packed bytes of one head of the segments before sg */
} seg_pos;

static int64_t seg_count(int L, int kind)
{
    return kind ? 2 * (int64_t)(((L + 31) / 32 + PACK_CH - 1) / PACK_CH) : (L + ATT_QB - 1) / ATT_QB;
}

/* moves *p to the segment holding index it (items arrive in increasing order per thread: forward) */
static void seg_seek(seg_pos *p, int64_t it, const int32_t *cu, int gc, int kind, int D)
{
    if (it < p->first)
        *p = (seg_pos){0, 0, 0};
    for (;;) {
        int L = cu[p->sg + 1] - cu[p->sg];
        int64_t c = gc * seg_count(L, kind);
        if (it < p->first + c)
            return;
        p->first += c;
#ifdef MV_VARIANTS
        p->poff += seg_pack_bytes(L, D);
#else
        (void)D;
#endif
        p->sg++;
    }
}

/* One item, f32: per key block, S = scale * Q K_b^T and O (+)= P V_b through mv_sgemm_1t. Returns
 * nonzero when the GEMM library failed. */
static int item_f32(float *O, int H, const float *Q, const float *K, const float *V, int m, int L,
                    int D, float scale, float *S)
{
    float mx[ATT_QB], sum[ATT_QB];
    int kb = att_key_block(L, 0), bad = 0;
    for (int i = 0; i < m; i++)
        mx[i] = -INFINITY, sum[i] = 0.0f;
    for (int j0 = 0; j0 < L && !bad; j0 += kb) {
        int nk = L - j0 < kb ? L - j0 : kb;
        bad |= mv_sgemm_1t(1, m, nk, D, scale, Q, D, K + (int64_t)j0 * D, D, 0.0f, S, nk) != 0;
        for (int i = 0; i < m; i++) {
            float alpha = softmax_block(S + (int64_t)i * nk, nk, 1.0f, &mx[i], &sum[i]);
            if (j0 > 0 && alpha != 1.0f)
#pragma omp simd
                for (int d = 0; d < D; d++)
                    O[(int64_t)i * H + d] *= alpha;
        }
        bad |= mv_sgemm_1t(0, m, D, nk, 1.0f, S, nk, V + (int64_t)j0 * D, D, j0 > 0 ? 1.0f : 0.0f,
                           O, H) != 0;
    }
    for (int i = 0; i < m; i++) {
        float r = 1.0f / sum[i];
#pragma omp simd /* -O2 leaves this loop scalar otherwise */
        for (int d = 0; d < D; d++)
            O[(int64_t)i * H + d] *= r;
    }
    return bad;
}

#ifdef MV_VARIANTS
/* One item, bf16x6: per key block, S = Q K_b^T (the AMX kernel against the packed K's columns of
 * the block), the softmax of scale * S, O_b = P V_b (against the packed V^T's inputs of the
 * block; Ot [m, D]) and O = O alpha + O_b (the first block: O = O_b). */
static void item_amx(float *O, int H, const float *Q, const mv_amx_w *Kw, const mv_amx_w *Vw,
                     int m, int L, int D, float scale, float *S, float *Ot, void *ascr)
{
    float mx[ATT_QB], sum[ATT_QB], al[ATT_QB];
    int kb = att_key_block(L, 1);
    for (int i = 0; i < m; i++)
        mx[i] = -INFINITY, sum[i] = 0.0f;
    for (int j0 = 0; j0 < L; j0 += kb) {
        int nk = L - j0 < kb ? L - j0 : kb;
        mv_amx_w Kb = mv_amx_cols(Kw, j0, nk), Vb = mv_amx_inputs(Vw, j0, nk);
        mv_amx_rows(&Kb, S, nk, Q, D, m, ascr);
        for (int i = 0; i < m; i++)
            al[i] = softmax_block(S + (int64_t)i * nk, nk, scale, &mx[i], &sum[i]);
        if (j0 == 0) {
            mv_amx_rows(&Vb, O, H, S, nk, m, ascr);
            continue;
        }
        mv_amx_rows(&Vb, Ot, D, S, nk, m, ascr);
        for (int i = 0; i < m; i++)
            for (int d = 0; d < D; d++)
                O[(int64_t)i * H + d] = O[(int64_t)i * H + d] * al[i] + Ot[(int64_t)i * D + d];
    }
    for (int i = 0; i < m; i++) {
        float r = 1.0f / sum[i];
#pragma omp simd /* -O2 leaves this loop scalar otherwise */
        for (int d = 0; d < D; d++)
            O[(int64_t)i * H + d] *= r;
    }
}
#endif

/* Attention on head-major hm[3][heads][n][D] (mv_cpu_split_heads), out[n, H]. One work item =
 * ATT_QB query rows of one head of one segment, done by one thread in a fixed order. Keys go in
 * blocks of att_key_block(L), so that the item's score block S[m, kb] stays in L2 at any L
 * (flash-style, f32 online softmax): per block, S = scale Q K_b^T, row numerators e^(S - running
 * max) and running sums (a row's earlier output scaled by e^(old max - new max) when its max
 * grows), O += P V_b; at the end O /= sum. With one block this is the plain softmax (f32, as
 * torch's CPU softmax). The products: f32, mv_sgemm_1t (oneDNN's or OpenBLAS's sgemm); amx
 * (bf16x6), the AMX kernel against K and V^T packed by a pre-pass (every segment's, for a group
 * of heads at a time that fits ATT_PACK_CAP; OpenMP over chunks of 256 keys), the scale applied
 * in the softmax. scratch: n_threads x mv_cpu_attention_scratch_floats(D, amx) floats, pack:
 * mv_cpu_attention_pack_bytes bytes (both 64-byte aligned). Returns 0, or -1 when the GEMM
 * library failed (out is then incomplete). */
int mv_cpu_attention(float *out, const float *hm, int64_t n, const int32_t *cu, int n_seg, int heads,
                     int D, int amx, float *scratch, void *pack)
{
    int H = heads * D;
    float scale = 1.0f / sqrtf((float)D);
    size_t sfl = mv_cpu_attention_scratch_floats(D, amx);
#ifdef MV_VARIANTS
    int g = amx ? pack_group(pack_per_head(cu, n_seg, D), heads) : heads;
#else
    if (amx)
        return -1; /* the AMX path is the variants build's */
    int g = heads;
    (void)pack;
#endif
    if (!amx)
        mv_blas_single_threaded();
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        float *S = scratch + (size_t)omp_get_thread_num() * sfl;
#ifdef MV_VARIANTS
        float *Ot = S + (size_t)ATT_QB * ATT_KB;
        void *ascr = Ot + ((size_t)ATT_QB * D + 15) / 16 * 16;
#endif
        for (int h0 = 0; h0 < heads; h0 += g) {
            int gc = heads - h0 < g ? heads - h0 : g;
            int64_t n_items = 0;
            for (int sg = 0; sg < n_seg; sg++)
                n_items += gc * seg_count(cu[sg + 1] - cu[sg], 0);
            seg_pos p = {0, 0, 0};
#ifdef MV_VARIANTS
            int64_t n_tasks = 0;
            for (int sg = 0; sg < n_seg; sg++)
                n_tasks += gc * seg_count(cu[sg + 1] - cu[sg], 1);
            if (amx) { /* the pre-pass: K and V^T of heads [h0, h0 + gc) of every segment */
#pragma omp for schedule(dynamic, 1)
                for (int64_t it = 0; it < n_tasks; it++) {
                    seg_seek(&p, it, cu, gc, 1, D);
                    int L = cu[p.sg + 1] - cu[p.sg];
                    int64_t k = it - p.first, nt = seg_count(L, 1);
                    int hl = (int)(k / nt), t = (int)(k % nt), c = t / 2;
                    int hd = h0 + hl;
                    mv_amx_w Kw, Vw;
                    head_views(pack, p.poff, gc, hl, L, D, &Kw, &Vw);
                    if (t % 2 == 0) {
                        const float *K = hm + ((int64_t)(heads + hd) * n + cu[p.sg]) * D;
                        int n1 = (c + 1) * 2 * PACK_CH;
                        mv_amx_pack_strided(&Kw, K, D, 1, c * 2 * PACK_CH,
                                            n1 < Kw.ntiles ? n1 : Kw.ntiles, 0, Kw.steps);
                    } else {
                        const float *V = hm + ((int64_t)(2 * heads + hd) * n + cu[p.sg]) * D;
                        int s1 = (c + 1) * PACK_CH;
                        mv_amx_pack_strided(&Vw, V, 1, D, 0, Vw.ntiles, c * PACK_CH,
                                            s1 < Vw.steps ? s1 : Vw.steps);
                    }
                }
                p = (seg_pos){0, 0, 0};
            }
#endif
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < n_items; it++) {
                seg_seek(&p, it, cu, gc, 0, D);
                int L = cu[p.sg + 1] - cu[p.sg];
                int64_t s0 = cu[p.sg], nq = seg_count(L, 0), k = it - p.first;
                int hl = (int)(k / nq), qb = (int)(k % nq), hd = h0 + hl;
                int64_t q0 = s0 + (int64_t)qb * ATT_QB;
                int m = L - qb * ATT_QB < ATT_QB ? L - qb * ATT_QB : ATT_QB;
                const float *Q = hm + ((int64_t)hd * n + q0) * D;
                float *O = out + q0 * H + hd * D;
                if (!amx) {
                    if (!bad)
                        bad |= item_f32(O, H, Q, hm + ((int64_t)(heads + hd) * n + s0) * D,
                                        hm + ((int64_t)(2 * heads + hd) * n + s0) * D, m, L, D, scale, S);
                    continue;
                }
#ifdef MV_VARIANTS
                mv_amx_w Kw, Vw;
                head_views(pack, p.poff, gc, hl, L, D, &Kw, &Vw);
                item_amx(O, H, Q, &Kw, &Vw, m, L, D, scale, S, Ot, ascr);
#endif
            }
        }
    }
    return bad ? -1 : 0;
}

int mv_attention_cpu_gemm(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                          int heads, int D, mv_cpu_gemm mode)
{
    int amx = mv_amx_available(NULL);
    if (mode == MV_CPU_GEMM_AUTO)
        mode = amx ? MV_CPU_GEMM_BF16X6 : MV_CPU_GEMM_F32;
    int64_t n = cu_seqlens[n_seg];
    int rc = -1;
    float *scratch = NULL, *hm = NULL;
    void *pack = NULL;
    if (mode == MV_CPU_GEMM_BF16X6 && !amx)
        goto out;
#ifdef MV_VARIANTS
    amx = mode == MV_CPU_GEMM_BF16X6; /* the AMX path */
#else
    amx = 0; /* the products on the f32 sgemm in every mode, as the tower runs them */
#endif
    size_t sfl = mv_cpu_attention_scratch_floats(D, amx);
    size_t pb = mv_cpu_attention_pack_bytes(cu_seqlens, n_seg, heads, D, amx);
    scratch = aligned_alloc(64, (size_t)omp_get_max_threads() * sfl * sizeof(float));
    hm = malloc((size_t)(n > 0 ? n : 1) * 3 * heads * D * sizeof(float));
    pack = pb ? aligned_alloc(64, pb) : NULL;
    if (!scratch || !hm || (pb && !pack))
        goto out;
    mv_cpu_split_heads(hm, qkv, NULL, NULL, n, heads, D);
    rc = mv_cpu_attention(out, hm, n, cu_seqlens, n_seg, heads, D, amx, scratch, pack) ? -1 : 0;
out:
    if (rc) /* a twin for tests: poison the output so that the comparison fails */
        for (int64_t k = 0; k < n * heads * D; k++)
            out[k] = NAN;
    free(scratch);
    free(hm);
    free(pack);
    return rc;
}

void mv_attention_cpu(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                      int heads, int D)
{
    mv_attention_cpu_gemm(out, qkv, cu_seqlens, n_seg, heads, D, MV_CPU_GEMM_F32);
}
