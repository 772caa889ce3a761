/* gemm_amx.c - the bf16x6 GEMM kernel on Intel AMX (mv_gemm_amx.h): weights split into three
 * bf16 parts and packed into VNNI tiles (once per Linear layer, mv_amx_pack; or strided, into
 * the caller's memory, for attention's K and V^T each forward, mv_amx_pack_strided), each call's
 * rows split the same way into row tiles, six tile products per 32-k step. Not here: choosing the
 * mode, the f32 path, threads (gemm_cpu.c, tower_cpu.c, attention_cpu.c). Why our own kernel
 * rather than oneDNN's bf16 matmul: bench/NOTES.md, "bf16x6 on AMX".
 *
 * Layouts (bf16 bit patterns, 1 KiB tiles of 16 rows x 64 bytes): weights B[nt][s][p] (n-tile nt
 * of 16 outputs, k step s of 32 inputs, part p; tile row r holds the k pair (32 s + 2 r, +1) of
 * the tile's 16 outputs, VNNI); rows A[mt][s][p] (m-tile mt of 16 rows). in is padded to
 * KP = 32 steps, od to a multiple of 32 (n-tile pairs), rows to 16, with zeros; views of outputs
 * or inputs start at a pair or a step (mv_amx_cols, mv_amx_inputs).
 *
 * Invariant: each output element is the same sequence of TDPBF16PS on its own row of A and column
 * of B whatever the row count, and K blocking only stores and reloads exact f32 partial sums, so
 * results depend neither on the rows per call nor on -j. The micro-kernel (block()) holds a
 * 2 x 2 block of accumulator tiles, two row tiles and two weight tiles. */
#include "mv_gemm_amx.h"
#include "mv_gemm_cpu.h" /* MV_CLONES */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define MV_AMX_BUILD 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw")))
#else
#define MV_AMX_BUILD 0
#endif

#define TK 32           /* inputs per k step */
#define TE 512          /* bf16 elements per tile */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int amx_ok;
static const char *amx_why = "not probed";
static const char *refused; /* mv_amx_refuse's reason */

static void probe(void)
{
#if MV_AMX_BUILD
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
        amx_why = "the CPU has no AMX-BF16 tiles (cpuid)";
        return;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        amx_why = "the Linux kernel does not grant AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return;
    }
    amx_ok = 1;
    amx_why = "";
#else
    amx_why = "this build has no AMX kernel (x86-64 Linux with GCC only)";
#endif
}

void mv_amx_refuse(const char *reason) { refused = reason && *reason ? reason : "refused by the caller"; }

int mv_amx_available(const char **why)
{
    if (refused) {
        if (why)
            *why = refused;
        return 0;
    }
    pthread_once(&probe_once, probe);
    if (why)
        *why = amx_why;
    return amx_ok;
}

/* the tile of n-tile nt, k step s, part p: element offset in w->b */
static inline size_t wtile(const mv_amx_w *w, int nt, int s, int p)
{
    return (size_t)(nt >> 1) * w->pstride + (((size_t)s * 3 + p) * 2 + (nt & 1)) * TE;
}

/* f32 bits -> the nearest bf16, ties to even, as f32 bits with the low half zero. A finite value
 * whose rounding would overflow is truncated instead (the largest bf16 of its sign); infinities
 * stay, NaNs stay (quiet) NaNs. Branch-free, so that the loop below vectorises. */
static inline uint32_t bf16_hi(uint32_t u)
{
    uint32_t r = u + 0x7FFFu + ((u >> 16) & 1u);
    uint32_t nonfin = (u & 0x7F800000u) == 0x7F800000u;
    uint32_t ovf = (r & 0x7F800000u) == 0x7F800000u;
    uint32_t keep = u | ((u & 0x7FFFFFu) ? 0x400000u : 0u);
    r = nonfin ? keep : ovf ? u : r;
    return r & 0xFFFF0000u;
}

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The split loop is compiled for AVX-512 and AVX2 too (MV_CLONES, mv_gemm_cpu.h): integer and
 * exact f32 operations, the same bytes whichever runs. */

MV_CLONES
void mv_bf16x3_split(const float *a, int64_t n, uint16_t *p1, uint16_t *p2, uint16_t *p3)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = f2u(a[i]);
        uint32_t h1 = bf16_hi(u);
        float r1 = a[i] - u2f(h1);
        r1 = (u & 0x7F800000u) == 0x7F800000u ? 0.0f : r1; /* inf - inf: the whole value is in p1 */
        uint32_t h2 = bf16_hi(f2u(r1));
        uint32_t h3 = bf16_hi(f2u(r1 - u2f(h2)));
        p1[i] = (uint16_t)(h1 >> 16);
        p2[i] = (uint16_t)(h2 >> 16);
        p3[i] = (uint16_t)(h3 >> 16);
    }
}

#if MV_AMX_BUILD
/* f32 bits -> the nearest bf16, ties to even, in the high half of the lane (the low half is not
 * zeroed): exact for values below 2^127 in magnitude (finite, and their rounding cannot
 * overflow); bf16_hi16 adds the masks for the rest */
AMX_FN static inline __m512i bf16_hi_small(__m512i u)
{
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)),
                            _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
}

/* mv_bf16x3_split (above) on 16 values at once, bit for bit (the unit test compares the
 * packed weights, split here, with it): f32 bits -> the nearest bf16, ties to even, in the high
 * half; a finite value whose rounding would overflow truncated; infinities kept, NaNs quiet. */
AMX_FN static inline __m512i bf16_hi16(__m512i u)
{
    const __m512i expo = _mm512_set1_epi32(0x7F800000);
    __m512i r = bf16_hi_small(u); /* rounded to nearest, ties to even */
    __mmask16 nonfin = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, expo), expo);
    __mmask16 ovf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(r, expo), expo);
    __mmask16 man = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFF));
    __m512i keep = _mm512_mask_or_epi32(u, man, u, _mm512_set1_epi32(0x400000));
    r = _mm512_mask_mov_epi32(r, ovf, u);
    r = _mm512_mask_mov_epi32(r, nonfin, keep);
    return _mm512_srli_epi32(r, 16); /* the bf16 bits, in the low half */
}

/* 16 values -> their three parts' bf16 bits, each in the high half of a 32-bit lane (the low
 * half: anything) */
AMX_FN static inline void split_lanes(__m512 x, __m512i *h1, __m512i *h2, __m512i *h3)
{
    __m512i u = _mm512_castps_si512(x);
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    if (!_mm512_cmpge_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                 _mm512_set1_epi32(0x7F000000))) {
        /* every lane below 2^127 (weights and activations in practice; residuals are smaller
         * than their values): half the instructions, the same bits */
        *h1 = bf16_hi_small(u);
        __m512 r1 = _mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_and_si512(*h1, hi)));
        *h2 = bf16_hi_small(_mm512_castps_si512(r1));
        __m512 r2 = _mm512_sub_ps(r1, _mm512_castsi512_ps(_mm512_and_si512(*h2, hi)));
        *h3 = bf16_hi_small(_mm512_castps_si512(r2));
        return;
    }
    const __m512i expo = _mm512_set1_epi32(0x7F800000);
    __mmask16 nonfin = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, expo), expo);
    *h1 = _mm512_slli_epi32(bf16_hi16(u), 16);
    __m512 r1 = _mm512_sub_ps(x, _mm512_castsi512_ps(*h1));
    r1 = _mm512_mask_mov_ps(r1, nonfin, _mm512_setzero_ps()); /* inf - inf: all of it is in p1 */
    *h2 = _mm512_slli_epi32(bf16_hi16(_mm512_castps_si512(r1)), 16);
    __m512 r2 = _mm512_sub_ps(r1, _mm512_castsi512_ps(*h2));
    *h3 = _mm512_slli_epi32(bf16_hi16(_mm512_castps_si512(r2)), 16);
}

/* n <= 32 values of a (the rest read as 0) -> their three parts' bf16 bits at p1, p2, p3 (32
 * each, 64-byte stores): split_lanes on both halves, the high 16-bit halves gathered by one permute
 * per part instead of two narrowing stores (attention's P . V, od = D, spends a third of its time
 * splitting its rows) */
AMX_FN static inline void split32(const float *a, int n, uint16_t *p1, uint16_t *p2, uint16_t *p3)
{
    int n0 = n < 16 ? n : 16, n1 = n > 16 ? n - 16 : 0;
    __m512i a1, a2, a3, b1, b2, b3;
    split_lanes(_mm512_maskz_loadu_ps((__mmask16)((1u << n0) - 1), a), &a1, &a2, &a3);
    split_lanes(_mm512_maskz_loadu_ps((__mmask16)((1u << n1) - 1), n1 ? a + 16 : a), &b1, &b2, &b3);
    const __m512i od = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35,
                                        33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    _mm512_storeu_si512(p1, _mm512_permutex2var_epi16(a1, od, b1));
    _mm512_storeu_si512(p2, _mm512_permutex2var_epi16(a2, od, b2));
    _mm512_storeu_si512(p3, _mm512_permutex2var_epi16(a3, od, b3));
}

/* W(n, k) = src[n sn + k sk] for nn <= 16 outputs n0.. and one input k (the rest 0), as 16 lanes */
AMX_FN static inline __m512 gather16(const float *src, int64_t sn, int64_t sk, int n0, int nn, int k)
{
    __mmask16 mk = (__mmask16)((1u << nn) - 1);
    const float *a = src + (int64_t)n0 * sn + (int64_t)k * sk;
    if (sn == 1)
        return _mm512_maskz_loadu_ps(mk, a);
    if (sn <= INT32_MAX / 16) {
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int)sn));
        return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, idx, a, 4);
    }
    float v[16] = {0};
    for (int j = 0; j < nn; j++)
        v[j] = a[(int64_t)j * sn];
    return _mm512_loadu_ps(v);
}

/* the three part tiles of n-tile nt, step s: row r holds inputs (32 s + 2 r, + 1) of the 16
 * outputs, each pair one 32-bit lane (VNNI): the even input's bits low, the odd one's high */
AMX_FN static void pack_tile(const mv_amx_w *w, const float *src, int64_t sn, int64_t sk, int nt, int s)
{
    int n0 = nt * 16, nn = w->od - n0 < 0 ? 0 : w->od - n0 > 16 ? 16 : w->od - n0;
    uint16_t *t[3];
    for (int p = 0; p < 3; p++)
        t[p] = w->b + wtile(w, nt, s, p);
    for (int r = 0; r < 16; r++) {
        int k = s * TK + 2 * r;
        __m512i e1, e2, e3, o1, o2, o3;
        __m512 z = _mm512_setzero_ps();
        split_lanes(nn && k < w->in ? gather16(src, sn, sk, n0, nn, k) : z, &e1, &e2, &e3);
        split_lanes(nn && k + 1 < w->in ? gather16(src, sn, sk, n0, nn, k + 1) : z, &o1, &o2, &o3);
        const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
        /* (even >> 16) | (odd & hi) */
        _mm512_store_si512((__m512i *)(t[0] + r * 32), _mm512_ternarylogic_epi32(_mm512_srli_epi32(e1, 16), o1, hi, 0xF8));
        _mm512_store_si512((__m512i *)(t[1] + r * 32), _mm512_ternarylogic_epi32(_mm512_srli_epi32(e2, 16), o2, hi, 0xF8));
        _mm512_store_si512((__m512i *)(t[2] + r * 32), _mm512_ternarylogic_epi32(_mm512_srli_epi32(e3, 16), o3, hi, 0xF8));
    }
}
#else
static void pack_tile(const mv_amx_w *w, const float *src, int64_t sn, int64_t sk, int nt, int s)
{
    for (int p = 0; p < 3; p++)
        memset(w->b + wtile(w, nt, s, p), 0, TE * sizeof(uint16_t));
    for (int j = 0; j < 16 && nt * 16 + j < w->od; j++)
        for (int k = s * TK; k < (s + 1) * TK && k < w->in; k++) {
            float a = src[(int64_t)(nt * 16 + j) * sn + (int64_t)k * sk];
            uint16_t q[3];
            mv_bf16x3_split(&a, 1, q, q + 1, q + 2);
            for (int p = 0; p < 3; p++)
                w->b[wtile(w, nt, s, p) + (k % TK) / 2 * 32 + j * 2 + (k & 1)] = q[p];
        }
}
#endif

size_t mv_amx_packed_bytes(int in, int od)
{
    return (size_t)((od + 31) / 32) * ((in + TK - 1) / TK) * 6 * TE * sizeof(uint16_t);
}

void mv_amx_view_init(mv_amx_w *w, void *mem, int in, int od)
{
    int steps = (in + TK - 1) / TK;
    *w = (mv_amx_w){.in = in, .od = od, .steps = steps, .ntiles = (od + 31) / 32 * 2,
                    .pstride = (size_t)steps * 6 * TE, .b = mem};
}

void mv_amx_pack_strided(const mv_amx_w *w, const float *src, int64_t sn, int64_t sk, int nt0,
                         int nt1, int s0, int s1)
{
    for (int nt = nt0; nt < nt1; nt++)
        for (int s = s0; s < s1; s++)
            pack_tile(w, src, sn, sk, nt, s);
}

mv_amx_w mv_amx_cols(const mv_amx_w *w, int n0, int nn)
{
    mv_amx_w v = *w;
    v.od = nn;
    v.ntiles = (nn + 31) / 32 * 2;
    v.b = w->b + (size_t)(n0 / 32) * w->pstride;
    return v;
}

mv_amx_w mv_amx_inputs(const mv_amx_w *w, int k0, int kk)
{
    mv_amx_w v = *w;
    v.in = kk;
    v.steps = (kk + TK - 1) / TK;
    v.b = w->b + (size_t)(k0 / TK) * 6 * TE;
    return v;
}

mv_status mv_amx_pack(const float *W, int in, int od, const char *name, mv_amx_w **out, mv_err *e)
{
    if (in <= 0 || od <= 0)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: AMX packing of a %d x %d matrix", name, od, in);
    mv_amx_w *w = calloc(1, sizeof *w);
    size_t bytes = mv_amx_packed_bytes(in, od);
    void *mem = w ? aligned_alloc(64, bytes) : NULL;
    if (!mem) {
        free(w);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for AMX weights (%zu bytes)", name, bytes);
    }
    mv_amx_view_init(w, mem, in, od);
#pragma omp parallel for schedule(dynamic)
    for (int nt = 0; nt < w->ntiles; nt++)
        mv_amx_pack_strided(w, W, in, 1, nt, nt + 1, 0, w->steps);
    *out = w;
    return MV_OK;
}

void mv_amx_w_free(mv_amx_w *w)
{
    if (!w)
        return;
    free(w->b);
    free(w);
}

uint16_t mv_amx_w_at(const mv_amx_w *w, int p, int n, int k)
{
    return w->b[wtile(w, n / 16, k / TK, p) + (k % TK) / 2 * 32 + (n % 16) * 2 + (k & 1)];
}

/* A's tiles, then one f32 edge tile pair [2][16][16] per accumulator (partial tiles) */
size_t mv_amx_scratch_bytes(const mv_amx_w *w, int64_t m)
{
    int64_t mtp = (m + 31) / 32 * 2; /* m-tiles, even */
    return (size_t)mtp * w->steps * 3 * TE * sizeof(uint16_t) + 4 * 256 * sizeof(float);
}

#if MV_AMX_BUILD
/* the row tiles of x[m, in]: A[mt][s][p], rows and inputs past the ends zero */
AMX_FN static void pack_rows(const mv_amx_w *w, const float *x, int64_t ldx, int64_t m, uint16_t *A)
{
    int64_t mt = (m + 15) / 16;
    for (int64_t t = 0; t < mt; t++)
        for (int i = 0; i < 16; i++) {
            int64_t row = t * 16 + i;
            for (int s = 0; s < w->steps; s++) {
                uint16_t *a = A + ((((size_t)(t >> 1) * w->steps + s) * 3) * 2 + (t & 1)) * TE + i * TK;
                int k0 = s * TK, n = row >= m ? 0 : w->in - k0 < TK ? w->in - k0 : TK;
                const float *xr = x + (row < m ? row * ldx + k0 : 0);
                split32(xr, n, a, a + 2 * TE, a + 4 * TE);
            }
        }
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

AMX_FN static void tiles_on(void)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* One 2 x 2 (two 0: 1 x 2) block of C tiles over nsteps k steps. a0, a1: the two m-tiles' row
 * tiles at the first step (A[mt][s0]), b0, b1: the n-tile pair's weight tiles there; c[q]: the
 * four accumulators' f32 homes (row stride ldc[q] bytes), q = 2 (m-tile) + (n-tile); init: start
 * at zero, else load them; pf: pfn cache lines to prefetch into L2, pfl of them per step (only a
 * hint: no result depends on it).
 * Tiles are not renamed: a load into a tile waits for the products still reading it, and the
 * next products wait for the load. So the six products run in an order where each changes one
 * operand pair only, (x0,w2) (x0,w1) (x1,w1) (x1,w0) (x0,w0) (x2,w0) (14 tile loads per 24
 * products), and inside each the two products that free the tile to be reloaded next go first,
 * so that the load runs under the other two. */
#define T00 _tile_dpbf16ps(0, 4, 6)
#define T01 if (twon) _tile_dpbf16ps(1, 4, 7)
#define T10 if (two) _tile_dpbf16ps(2, 5, 6)
#define T11 if (two && twon) _tile_dpbf16ps(3, 5, 7)
#define LA0(p) _tile_loadd(4, a0 + (p) * 2 * TE, 64)
#define LA1(p) if (two) _tile_loadd(5, a1 + (p) * 2 * TE, 64)
#define LB0(p) _tile_loadd(6, b0 + (p) * 2 * TE, 64)
#define LB1(p) if (twon) _tile_loadd(7, b1 + (p) * 2 * TE, 64)
/* a group whose successor changes the weight tiles to part q, or the row tiles to part q */
#define GB(q) do { T00; T10; LB0(q); T01; T11; LB1(q); } while (0)
#define GA(q) do { T00; T01; LA0(q); T10; T11; LA1(q); } while (0)

static inline __attribute__((always_inline)) AMX_FN void
block(int two, int twon, const uint16_t *a0, const uint16_t *a1, const uint16_t *b0, const uint16_t *b1,
      int nsteps, float *const c[4], const int64_t ldc[4], int init, const char *pf, int pfl,
      int pfn)
{
    if (init) {
        _tile_zero(0);
        if (twon)
            _tile_zero(1);
        if (two) {
            _tile_zero(2);
            if (twon)
                _tile_zero(3);
        }
    } else {
        _tile_loadd(0, c[0], ldc[0]);
        if (twon)
            _tile_loadd(1, c[1], ldc[1]);
        if (two) {
            _tile_loadd(2, c[2], ldc[2]);
            if (twon)
                _tile_loadd(3, c[3], ldc[3]);
        }
    }
    LA0(0);
    LA1(0);
    LB0(2);
    LB1(2);
    for (int s = 0; s < nsteps; s++) {
        for (int i = 0; i < pfl && pfn > 0; i++, pfn--, pf += 64)
            _mm_prefetch(pf, _MM_HINT_T1);
        GB(1); /* x0 w2 */
        GA(1); /* x0 w1 */
        GB(0); /* x1 w1 */
        GA(0); /* x1 w0 */
        GA(2); /* x0 w0 */
        /* x2 w0, then the next step's x0 and w2 */
        a0 += 6 * TE;
        a1 += 6 * TE;
        b0 += 6 * TE;
        b1 += 6 * TE;
        if (s + 1 < nsteps) {
            T00; T10; LB0(2); T01; LA0(0); T11; LA1(0); LB1(2);
        } else {
            T00; T10; T01; T11;
        }
    }
    _tile_stored(0, c[0], ldc[0]);
    if (twon)
        _tile_stored(1, c[1], ldc[1]);
    if (two) {
        _tile_stored(2, c[2], ldc[2]);
        if (twon)
            _tile_stored(3, c[3], ldc[3]);
    }
}

/* Blocking: row tiles per M block (even) and steps per K block, so that a block of row tiles
 * (AMX_MT x AMX_KS x 3 KiB: 576 KiB) stays in L2 while each weight panel (2 n-tiles x AMX_KS
 * steps x 3 parts: 144 KiB) is used by every row tile pair of it; 8 row tiles rather than 16, as
 * two hyperthreads share a core's L2. The sizes were chosen by measurement: bench/NOTES.md,
 * "bf16x6 on our own AMX kernel" (K and M block sizes, L1 prefetch). */
#ifndef AMX_MT /* a -D of its own only for measurements (bench/NOTES.md) */
#define AMX_MT 8
#endif
#define AMX_KS 24

AMX_FN void mv_amx_rows(const mv_amx_w *w, float *out, int64_t ldo, const float *x, int64_t ldx,
                        int64_t m, void *scratch)
{
    if (m <= 0)
        return;
    uint16_t *A = scratch;
    int64_t mt = (m + 15) / 16;
    float *edge = (float *)(A + (size_t)(mt + 1) / 2 * 2 * w->steps * 3 * TE); /* [4][16][16] */
    pack_rows(w, x, ldx, m, A);
    tiles_on();
    int S = w->steps;
    for (int64_t m0 = 0; m0 < mt; m0 += AMX_MT) {
        int64_t m1 = m0 + AMX_MT < mt ? m0 + AMX_MT : mt;
        for (int k0 = 0; k0 < S; k0 += AMX_KS) {
            int ns = S - k0 < AMX_KS ? S - k0 : AMX_KS;
            for (int nt = 0; nt < w->ntiles; nt += 2) {
                /* The next weight panel (the next n-tile pair's, else the next K block's or M
                 * block's first), prefetched into L2 while this one runs, its lines shared out
                 * over this panel's row tile pairs, pfl per k step, so that the first row tile
                 * pair of a panel does not stream the weights from L3 (bench/NOTES.md, "weight-
                 * panel prefetch"). */
                const char *pf = NULL;
                int pfs = 0;
                if (nt + 2 < w->ntiles)
                    pf = (const char *)(w->b + wtile(w, nt + 2, k0, 0)), pfs = ns;
                else if (k0 + AMX_KS < S)
                    pf = (const char *)(w->b + wtile(w, 0, k0 + AMX_KS, 0)),
                    pfs = S - k0 - AMX_KS < AMX_KS ? S - k0 - AMX_KS : AMX_KS;
                else if (m1 < mt)
                    pf = (const char *)(w->b + wtile(w, 0, 0, 0)), pfs = S < AMX_KS ? S : AMX_KS;
                int pairs = (int)((m1 - m0 + 1) / 2), lines = pfs * 6 * TE * 2 / 64;
                int pfl = (lines + pairs * ns - 1) / (pairs * ns);
                const uint16_t *b0 = w->b + wtile(w, nt, k0, 0), *b1 = w->b + wtile(w, nt + 1, k0, 0);
                /* the pair's second n-tile only when it holds an output (od 72: 5 n-tiles) */
                int twon = (nt + 1) * 16 < w->od;
                for (int64_t t = m0; t < m1; t += 2) {
                    int two = t + 1 < m1;
                    const uint16_t *a0 = A + (((size_t)(t >> 1) * S + k0) * 6) * TE;
                    const uint16_t *a1 = a0 + TE;
                    float *c[4];
                    int64_t ldc[4];
                    int edge_of[4] = {0, 0, 0, 0};
                    for (int q = 0; q < (two ? 4 : 2); q++) {
                        if ((q & 1) && !twon)
                            continue;
                        int64_t r = (t + (q >> 1)) * 16, n = (int64_t)(nt + (q & 1)) * 16;
                        if (r + 16 <= m && n + 16 <= w->od) {
                            c[q] = out + r * ldo + n;
                            ldc[q] = ldo * (int64_t)sizeof(float);
                        } else { /* a partial tile: through edge[q] */
                            edge_of[q] = 1;
                            c[q] = edge + q * 256;
                            ldc[q] = 16 * sizeof(float);
                            memset(c[q], 0, 256 * sizeof(float));
                            for (int64_t i = 0; k0 && i < 16 && r + i < m; i++)
                                for (int64_t j = 0; j < 16 && n + j < w->od; j++)
                                    c[q][i * 16 + j] = out[(r + i) * ldo + n + j];
                        }
                    }
                    /* this pair's share of the next panel: lines [pf0, pf0 + pfn) */
                    int per = pfl * ns, pf0 = (int)(t - m0) / 2 * per;
                    int pfn = !pf || pf0 >= lines ? 0 : lines - pf0 < per ? lines - pf0 : per;
                    const char *pfp = pfn ? pf + (size_t)pf0 * 64 : NULL;
                    if (two && twon)
                        block(1, 1, a0, a1, b0, b1, ns, c, ldc, k0 == 0, pfp, pfl, pfn);
                    else if (twon)
                        block(0, 1, a0, a1, b0, b1, ns, c, ldc, k0 == 0, pfp, pfl, pfn);
                    else if (two)
                        block(1, 0, a0, a1, b0, b1, ns, c, ldc, k0 == 0, pfp, pfl, pfn);
                    else
                        block(0, 0, a0, a1, b0, b1, ns, c, ldc, k0 == 0, pfp, pfl, pfn);
                    for (int q = 0; q < 4; q++) {
                        if (!edge_of[q])
                            continue;
                        int64_t r = (t + (q >> 1)) * 16, n = (int64_t)(nt + (q & 1)) * 16;
                        for (int64_t i = 0; i < 16 && r + i < m; i++)
                            for (int64_t j = 0; j < 16 && n + j < w->od; j++)
                                out[(r + i) * ldo + n + j] = c[q][i * 16 + j];
                    }
                }
            }
        }
    }
    _tile_release();
}
#else
void mv_amx_rows(const mv_amx_w *w, float *out, int64_t ldo, const float *x, int64_t ldx, int64_t m,
                 void *scratch)
{
    (void)w, (void)out, (void)ldo, (void)x, (void)ldx, (void)m, (void)scratch;
}
#endif
