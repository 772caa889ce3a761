/* attention_cpu.c - the CPU tower's attention (tower_cpu_int.h, mv_ops_cpu.h): heads split out
 * of qkv (rope fused), then per (segment, head, ATT_QB queries) item a flash-style loop over key
 * blocks through the GEMM library's single-threaded sgemm, f32 online softmax; and
 * mv_attention_cpu, the CPU twin of cu/attention.cu's kernels. Results do not depend on the
 * thread count: an item is one thread's, its key blocks depend on the segment length alone. Not
 * here: the Linear layers, the block loop (tower_cpu.c). */
#include "mv_ops_cpu.h"
#include "tower_cpu_int.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One row of one key block of the online softmax: si[L] <- e^(si - m') with m' = max(*mx, max si),
 * *sum <- *sum . e^(*mx - m') + sum_j si[j]; *mx <- m'. Returns the factor e^(*mx - m') by which
 * the row's earlier output must be scaled (1 when the maximum did not grow; 0 for the first block,
 * *mx = -inf). One row, one thread, a fixed order. */
MV_CLONES static float softmax_block(float *si, int L, float *mx, float *sum)
{
    float m = *mx, s = 0.0f, acc[16] = {0}, m64[64];
    int j = 0;
    /* 64 partial maxima (4 vectors: one would wait on its own latency); max is exact in any order */
    for (int l = 0; l < 64; l++)
        m64[l] = m;
    for (; j + 64 <= L; j += 64)
        for (int l = 0; l < 64; l++)
            m64[l] = si[j + l] > m64[l] ? si[j + l] : m64[l];
    for (; j < L; j++)
        m = si[j] > m ? si[j] : m;
    for (int w = 32; w >= 1; w /= 2) /* a tree, not a 64-long chain of scalar max */
        for (int l = 0; l < w; l++)
            m64[l] = m64[l + w] > m64[l] ? m64[l + w] : m64[l];
    m = m64[0] > m ? m64[0] : m;
    j = 0;
    for (; j + 16 <= L; j += 16) /* 16 partial sums: the same order for every vector width */
        for (int l = 0; l < 16; l++) {
            float p = exp_f32(si[j + l] - m);
            si[j + l] = p;
            acc[l] += p;
        }
    for (; j < L; j++) {
        float p = exp_f32(si[j] - m);
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
void mv_cpu_split_heads_range(float *hm, const float *qkv, const float *cos_t, const float *sin_t,
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
                for (int d = 0; d < half; d++) {
                    o[d] = x[d] * c[d] - x[d + half] * s[d];
                    o[d + half] = x[d + half] * c[d + half] + x[d] * s[d + half];
                }
            }
}

void mv_cpu_split_heads(float *hm, const float *qkv, const float *cos_t, const float *sin_t,
                        int64_t n, int heads, int D)
{
#pragma omp parallel
    {
        int64_t r0, r1;
        row_range(n, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
        mv_cpu_split_heads_range(hm, qkv, cos_t, sin_t, n, r0, r1, heads, D);
    }
}

/* Keys per block of a segment of L keys: L when L <= ATT_KB, else L cut into equal blocks of at
 * most ATT_KB keys (a multiple of 16 but the last). Depends on L alone. */
static int att_key_block(int L)
{
    if (L <= ATT_KB)
        return L;
    int nb = (L + ATT_KB - 1) / ATT_KB;
    return ((L + nb - 1) / nb + 15) / 16 * 16;
}

/* Attention through BLAS on head-major hm[3][heads][n][D] (mv_cpu_split_heads), out[n, H]. One work
 * item = ATT_QB query rows of one head of one segment, done by one thread in a fixed order. Keys
 * go in blocks of att_key_block(L), so that the item's score block S[m, kb] stays in L2 at any L
 * (flash-style, f32 online softmax): per block, S = scale * Q K_b^T (mv_sgemm_1t), row
 * numerators e^(S - running max) and running sums (a row's earlier output scaled by e^(old max -
 * new max) when its max grows), O += P V_b (mv_sgemm_1t, accumulating in out); at the end
 * O /= sum. With one block this is the plain softmax (f32, as torch's CPU softmax).
 * scratch: n_threads x ATT_QB x ATT_KB floats. Returns 0, or -1 when the GEMM library failed
 * (out is then incomplete). */
int mv_cpu_attention(float *out, const float *hm, int64_t n, const int32_t *cu, int n_seg,
                          int heads, int D, float *scratch)
{
    int H = heads * D;
    float scale = 1.0f / sqrtf((float)D);
    int64_t n_items = 0;
    for (int sg = 0; sg < n_seg; sg++)
        n_items += (int64_t)heads * ((cu[sg + 1] - cu[sg] + ATT_QB - 1) / ATT_QB);
    mv_blas_single_threaded();
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        float *S = scratch + (int64_t)omp_get_thread_num() * ATT_QB * ATT_KB;
        float mx[ATT_QB], sum[ATT_QB];
        int sg = 0;
        int64_t first = 0; /* first item of segment sg */
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; it++) {
            /* items arrive in increasing order per thread: walk the segments forward */
            if (it < first)
                sg = 0, first = 0;
            for (;;) {
                int64_t nq = (cu[sg + 1] - cu[sg] + ATT_QB - 1) / ATT_QB;
                if (it < first + heads * nq)
                    break;
                first += heads * nq;
                sg++;
            }
            int L = cu[sg + 1] - cu[sg], kb = att_key_block(L);
            int64_t nq = (L + ATT_QB - 1) / ATT_QB, k = it - first;
            int hd = (int)(k / nq), qb = (int)(k % nq);
            int64_t s0 = cu[sg], q0 = s0 + (int64_t)qb * ATT_QB;
            int m = L - qb * ATT_QB < ATT_QB ? L - qb * ATT_QB : ATT_QB;
            const float *Q = hm + ((int64_t)hd * n + q0) * D;
            const float *K = hm + ((int64_t)(heads + hd) * n + s0) * D;
            const float *V = hm + ((int64_t)(2 * heads + hd) * n + s0) * D;
            float *O = out + q0 * H + hd * D;
            for (int i = 0; i < m; i++)
                mx[i] = -INFINITY, sum[i] = 0.0f;
            for (int j0 = 0; j0 < L && !bad; j0 += kb) {
                int nk = L - j0 < kb ? L - j0 : kb;
                bad |= mv_sgemm_1t(1, m, nk, D, scale, Q, D, K + (int64_t)j0 * D, D, 0.0f, S, nk) != 0;
                for (int i = 0; i < m; i++) {
                    float alpha = softmax_block(S + (int64_t)i * nk, nk, &mx[i], &sum[i]);
                    if (j0 > 0 && alpha != 1.0f)
                        for (int d = 0; d < D; d++)
                            O[(int64_t)i * H + d] *= alpha;
                }
                bad |= mv_sgemm_1t(0, m, D, nk, 1.0f, S, nk, V + (int64_t)j0 * D, D,
                                   j0 > 0 ? 1.0f : 0.0f, O, H) != 0;
            }
            for (int i = 0; i < m; i++) {
                float r = 1.0f / sum[i];
                for (int d = 0; d < D; d++)
                    O[(int64_t)i * H + d] *= r;
            }
        }
    }
    return bad ? -1 : 0;
}

void mv_attention_cpu(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seg,
                      int heads, int D)
{
    int64_t n = cu_seqlens[n_seg];
    float *scratch = malloc((size_t)omp_get_max_threads() * ATT_QB * ATT_KB * sizeof(float));
    float *hm = malloc((size_t)(n > 0 ? n : 1) * 3 * heads * D * sizeof(float));
    if (scratch && hm)
        mv_cpu_split_heads(hm, qkv, NULL, NULL, n, heads, D);
    if (!scratch || !hm ||
        mv_cpu_attention(out, hm, n, cu_seqlens, n_seg, heads, D, scratch)) {
        /* a twin for tests: poison the output so that the comparison fails */
        for (int64_t k = 0; k < n * heads * D; k++)
            out[k] = NAN;
    }
    free(scratch);
    free(hm);
}
