/* gemm_cpu.c - the CPU tower's f32 GEMMs (mv_gemm_cpu.h): oneDNN's matmul primitive against
 * weights reordered once, at backend creation, into the layout the primitive picks; OpenBLAS's
 * cblas_sgemm on the weights as stored in a `make NO_DNNL=1` build; bf16x6 through the AMX kernel
 * (gemm_amx.c). Not here: which rows each thread takes, and what is done to them afterwards
 * (tower_cpu.c). Why oneDNN, and one single-threaded matmul per tower thread: bench/NOTES.md,
 * "GEMM libraries: OpenBLAS, oneDNN".
 *
 * Determinism: a row's bytes never depend on -j or on the rows beside it. Primitives are created
 * with OpenMP's thread count at 1, so their blocking depends on shapes alone, and run on the
 * calling thread. With AVX-512 (brgemm) a row's K products are summed in an order independent of
 * M: a thread's rows go in calls of at most MB rows (so the primitive cache holds at most MB
 * entries per weight shape). Without it (gemm:jit, as OpenBLAS), a row's bytes depend on the
 * call: weights packed for it are multiplied in calls of exactly MV_BLAS_ROW_ATOM rows and the
 * tower cuts rows at that atom (mv_gemm_row_atom). Attention's products go through dnnl_sgemm
 * with the thread count set to 1 around the call. 25-cpu-threads.bats checks -j 1..7 and ISAs. */
#include "mv_gemm_amx.h"
#include "mv_gemm_cpu.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MV_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

/* Rows per matmul call (see the file comment). */
#define MB 256

#if MV_HAVE_DNNL
/* one matmul primitive: m rows of x (row stride ldx) times packed weights [in, od] (layout wmd),
 * into out (row stride ldo) */
typedef struct prim {
    int64_t m, ldx, ldo;
    int in, od;
    dnnl_memory_desc_t wmd, src, dst, scr;
    size_t scr_bytes;
    dnnl_primitive_t p;
    struct prim *next;
} prim;
#endif

struct mv_gemm_cpu {
    char name[128];
    mv_cpu_gemm mode; /* MV_CPU_GEMM_F32 or MV_CPU_GEMM_BF16X6 */
    int row_atom;     /* mv_gemm_row_atom (set by create, raised by a pack for gemm:jit) */
#if MV_HAVE_DNNL
    dnnl_engine_t eng;
    pthread_mutex_t mu; /* guards cache and name */
    prim *cache;
#endif
};

struct mv_gemm_w {
    mv_gemm_cpu *g;
    int in, od;
    const float *W; /* OpenBLAS: the weights as stored */
    mv_amx_w *amx;  /* bf16x6: the AMX kernel's packed weights (nothing else is packed) */
#if MV_HAVE_DNNL
    dnnl_memory_desc_t md; /* the packed layout */
    void *packed;
    char impl[48]; /* the implementation it was packed for (every call's primitive must be it) */
    int fixed;     /* impl is not brgemm: calls of MV_BLAS_ROW_ATOM rows (mv_gemm_row_atom) */
#endif
};

typedef struct {
#if MV_HAVE_DNNL
    dnnl_stream_t st;
#endif
    void *scr;
    size_t scr_cap;
    void *xs;      /* bf16x6: the AMX kernel's scratch (the call's rows, split) */
    size_t xs_cap; /* bytes */
} slot_t;

struct mv_gemm_ws {
    mv_gemm_cpu *g;
    int n;
    slot_t *s;
};

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single(void) { openblas_set_num_threads(1); }
void mv_blas_single_threaded(void) { pthread_once(&blas_once, blas_single); }
int mv_blas_threads_at_load(void) { return openblas_get_num_threads(); }

void mv_blas_rows_nt(float *out, int64_t ldo, const float *x, int64_t ldx, const float *W, int in,
                     int od, int64_t m)
{
    for (int64_t r = 0; r < m; r += MV_BLAS_ROW_ATOM)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
                    (int)(m - r < MV_BLAS_ROW_ATOM ? m - r : MV_BLAS_ROW_ATOM), od, in, 1.0f,
                    x + r * ldx, (int)ldx, W, in, 0.0f, out + r * ldo, (int)ldo);
}

#if MV_HAVE_DNNL
#define DNNL_TRY(call, what)                                                                   \
    do {                                                                                       \
        dnnl_status_t s_ = (call);                                                             \
        if (s_ != dnnl_success) {                                                              \
            st = mv_fail(e, MV_ERR_INTERNAL, "oneDNN: %s: status %d", what, (int)s_);         \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* A matmul primitive descriptor for m rows; wmd NULL: the layout oneDNN prefers. Created with
 * OpenMP's thread count at 1 on this thread, so that its blocking does not depend on -j. */
static mv_status make_pd(mv_gemm_cpu *g, int64_t m, int in, int od, int64_t ldx, int64_t ldo,
                         const dnnl_memory_desc_t *wmd, dnnl_primitive_desc_t *pd, mv_err *e)
{
    mv_status st = MV_OK;
    dnnl_memory_desc_t dx, dw, dy;
    dnnl_dims_t sx = {m, in}, sw = {in, od}, sy = {m, od}, tx = {ldx, 1}, ty = {ldo, 1};
    dnnl_primitive_attr_t at = NULL;
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&dx, 2, sx, dnnl_f32, tx), "source descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&dy, 2, sy, dnnl_f32, ty), "destination descriptor");
    if (wmd)
        dw = *wmd;
    else
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&dw, 2, sw, dnnl_f32, dnnl_format_tag_any),
                 "weights descriptor");
    dnnl_matmul_desc_t md;
    DNNL_TRY(dnnl_matmul_desc_init(&md, &dx, &dw, NULL, &dy), "matmul descriptor");
    DNNL_TRY(dnnl_primitive_attr_create(&at), "attributes");
    /* our scratch per thread slot, not the library's */
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(at, dnnl_scratchpad_mode_user), "scratchpad");
    dnnl_status_t s = dnnl_primitive_desc_create(pd, &md, at, g->eng, NULL);
    if (s != dnnl_success)
        st = mv_fail(e, s == dnnl_unimplemented ? MV_ERR_UNSUPPORTED : MV_ERR_INTERNAL,
                     "oneDNN: no f32 matmul for %lld x %d . %d x %d on this CPU (status %d)",
                     (long long)m, in, in, od, (int)s);
out:
    if (at)
        dnnl_primitive_attr_destroy(at);
    omp_set_num_threads(nt);
    return st;
}

static const char *pd_impl(const_dnnl_primitive_desc_t pd)
{
    const char *s = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s)
        return "?";
    return s;
}

/* The cached primitive for (w's shape, m, ldx, ldo), made on first use. */
static mv_status get_prim(mv_gemm_cpu *g, const mv_gemm_w *w, int64_t m, int64_t ldx, int64_t ldo,
                          prim **out, mv_err *e)
{
    mv_status st = MV_OK;
    dnnl_primitive_desc_t pd = NULL;
    pthread_mutex_lock(&g->mu);
    prim *p;
    for (p = g->cache; p; p = p->next)
        if (p->m == m && p->ldx == ldx && p->ldo == ldo && p->in == w->in && p->od == w->od &&
            dnnl_memory_desc_equal(&p->wmd, &w->md))
            goto out;
    p = calloc(1, sizeof *p);
    if (!p || !mv_address_room(MV_ROOM_PROBE)) { /* see warm_kernels */
        st = mv_fail(e, p ? MV_ERR_NOROOM : MV_ERR_NOMEM, "out of memory for a oneDNN primitive");
        goto out;
    }
    if ((st = make_pd(g, m, w->in, w->od, ldx, ldo, &w->md, &pd, e)))
        goto out;
    /* another implementation (a strided destination gets oneDNN's reference one) would be
     * slow, and its bytes unchecked: refuse it */
    if (strcmp(pd_impl(pd), w->impl)) {
        st = mv_fail(e, MV_ERR_INTERNAL,
                     "oneDNN: matmul %lld x %d . %d x %d (row strides %lld, %lld) runs %s, not %s",
                     (long long)m, w->in, w->in, w->od, (long long)ldx, (long long)ldo, pd_impl(pd),
                     w->impl);
        goto out;
    }
    *p = (prim){.m = m, .ldx = ldx, .ldo = ldo, .in = w->in, .od = w->od, .wmd = w->md};
    p->src = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    p->dst = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    p->scr = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->scr_bytes = dnnl_memory_desc_get_size(&p->scr);
    dnnl_status_t s = dnnl_primitive_create(&p->p, pd);
    if (s != dnnl_success) {
        st = mv_fail(e, MV_ERR_INTERNAL, "oneDNN: matmul %lld x %d . %d x %d: status %d",
                     (long long)m, w->in, w->in, w->od, (int)s);
        goto out;
    }
    p->next = g->cache;
    g->cache = p;
out:
    if (st) {
        free(p);
        p = NULL;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    pthread_mutex_unlock(&g->mu);
    *out = p;
    return st;
}
#endif

int mv_cpu_gemm_parse(const char *s, mv_cpu_gemm *m)
{
    if (!strcmp(s, "f32"))
        *m = MV_CPU_GEMM_F32;
    else if (!strcmp(s, "bf16x6"))
        *m = MV_CPU_GEMM_BF16X6;
    else if (!strcmp(s, "auto"))
        *m = MV_CPU_GEMM_AUTO;
    else
        return -1;
    return 0;
}

mv_cpu_gemm mv_gemm_cpu_mode(const mv_gemm_cpu *g) { return g->mode; }

/* OpenBLAS cores whose kernels use AVX2 or AVX-512 (anything else is a generic one) */
static int blas_core_is_modern(const char *c)
{
    static const char *const modern[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                         "SapphireRapids", "Excavator", "Steamroller"};
    for (size_t i = 0; i < sizeof modern / sizeof *modern; i++)
        if (!strcmp(c, modern[i]))
            return 1;
    return 0;
}

#if MV_HAVE_DNNL
/* oneDNN 2.6 makes its GEMM driver's kernels on first use, inside a call_once that does not check
 * the allocation of their code: under an address-space limit (ulimit -v) with no room left at that
 * moment, the process dies of SIGSEGV in the middle of a forward. They are made here, at creation,
 * once room for them is known to be there (mv_address_room): a shortage later is one of our own
 * allocations, checked. Every mode needs them (attention's dnnl_sgemm, the f32 matmul's gemm:jit).
 * Primitive creation does not check all of its allocations either: get_prim probes first too. */
#define WARM_ROOM ((size_t)32 << 20) /* making them takes over 4 MiB (measured under ulimit -v) */
static mv_status warm_kernels(mv_err *e)
{
    if (!mv_address_room(WARM_ROOM))
        return mv_fail(e, MV_ERR_NOROOM, "out of memory: no address space left for oneDNN's GEMM "
                       "kernels (an address-space limit, ulimit -v?)");
    enum { N = 32 };
    static const float a[N * N], b[N * N];
    float c[N * N];
    if (mv_sgemm_1t(1, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N))
        return mv_fail(e, MV_ERR_NOMEM, "oneDNN's GEMM kernels could not be made (out of memory?)");
    return MV_OK;
}
#endif

mv_status mv_gemm_cpu_create(int verbose, mv_cpu_gemm mode, mv_gemm_cpu **out, mv_err *e)
{
    mv_blas_single_threaded(); /* OpenBLAS (what stays on it) */
    mv_gemm_cpu *g = calloc(1, sizeof *g);
    if (!g)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    const char *core = openblas_get_corename();
    /* bf16x6: our AMX kernel, whatever the f32 library */
    const char *why = "";
    int amx = mv_amx_available(&why);
    if (mode == MV_CPU_GEMM_AUTO)
        mode = amx ? MV_CPU_GEMM_BF16X6 : MV_CPU_GEMM_F32;
    if (mode == MV_CPU_GEMM_BF16X6 && !amx) {
        free(g);
        return mv_fail(e, MV_ERR_UNSUPPORTED, "bf16x6 GEMMs need Intel AMX: %s; use f32 GEMMs", why);
    }
    g->mode = mode;
    g->row_atom =
        mode == MV_CPU_GEMM_BF16X6 || MV_HAVE_DNNL ? MV_GEMM_ROW_ATOM_FREE : MV_BLAS_ROW_ATOM;
#if MV_HAVE_DNNL
    const dnnl_version_t *v = dnnl_version();
    if (mode == MV_CPU_GEMM_BF16X6)
        snprintf(g->name, sizeof g->name, "AMX bf16x6 (gemm_amx.c; attention: oneDNN %d.%d.%d f32)",
                 v->major, v->minor, v->patch);
    else
        snprintf(g->name, sizeof g->name, "oneDNN %d.%d.%d f32", v->major, v->minor, v->patch);
    pthread_mutex_init(&g->mu, NULL);
    dnnl_status_t s = dnnl_engine_create(&g->eng, dnnl_cpu, 0);
    if (s != dnnl_success) {
        pthread_mutex_destroy(&g->mu);
        free(g);
        return mv_fail(e, MV_ERR_INTERNAL, "oneDNN: no CPU engine (status %d)", (int)s);
    }
    mv_status ws = warm_kernels(e);
    if (ws) {
        dnnl_engine_destroy(g->eng);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return ws;
    }
    (void)core;
#else
    if (mode == MV_CPU_GEMM_BF16X6)
        snprintf(g->name, sizeof g->name, "AMX bf16x6 (gemm_amx.c; attention: OpenBLAS (core %s) f32)",
                 core ? core : "?");
    else
        snprintf(g->name, sizeof g->name, "OpenBLAS (core %s) f32", core ? core : "?");
#if defined(__x86_64__) && defined(__GNUC__)
    /* OpenBLAS picks its kernels when it loads (OPENBLAS_CORETYPE is read then, not later); on a
     * CPU newer than it knows it falls back to generic SSE3 kernels, several times slower */
    if (verbose && core && !blas_core_is_modern(core) &&
        (__builtin_cpu_supports("avx512f") || __builtin_cpu_supports("avx2")))
        fprintf(stderr,
                "mvembed: OpenBLAS does not know this CPU and runs its generic %s kernels; set "
                "OPENBLAS_CORETYPE=%s before starting mvembed for several times the CPU speed\n",
                core, __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell");
#endif
#endif
    (void)blas_core_is_modern;
    (void)verbose;
    *out = g;
    return MV_OK;
}

void mv_gemm_cpu_destroy(mv_gemm_cpu *g)
{
    if (!g)
        return;
#if MV_HAVE_DNNL
    while (g->cache) {
        prim *p = g->cache;
        g->cache = p->next;
        dnnl_primitive_destroy(p->p);
        free(p);
    }
    dnnl_engine_destroy(g->eng);
    pthread_mutex_destroy(&g->mu);
#endif
    free(g);
}

const char *mv_gemm_cpu_name(const mv_gemm_cpu *g) { return g->name; }

mv_status mv_gemm_pack(mv_gemm_cpu *g, const float *W, int in, int od, const char *name,
                       mv_gemm_w **out, mv_err *e)
{
    mv_gemm_w *w = calloc(1, sizeof *w);
    if (!w)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
    *w = (mv_gemm_w){.g = g, .in = in, .od = od, .W = W};
    mv_status st = MV_OK;
    if (g->mode == MV_CPU_GEMM_BF16X6) {
        if ((st = mv_amx_pack(W, in, od, name, &w->amx, e))) {
            free(w);
            return st;
        }
        *out = w;
        return MV_OK;
    }
#if MV_HAVE_DNNL
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_memory_t mu = NULL, mp = NULL;
    dnnl_stream_t s = NULL;
    if (!mv_address_room(MV_ROOM_PROBE)) { /* see warm_kernels */
        st = mv_fail(e, MV_ERR_NOROOM, "out of memory for a oneDNN primitive");
        goto out;
    }
    /* the layout the primitive picks for a full MB-row call: every other call takes it as is */
    if ((st = make_pd(g, MB, in, od, in, od, NULL, &pd, e)))
        goto out;
    w->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    snprintf(w->impl, sizeof w->impl, "%s", pd_impl(pd));
    /* brgemm's row bytes do not depend on the call; anything else (gemm:jit: oneDNN 2.6's f32
     * matmul without AVX-512) is multiplied in fixed calls, as OpenBLAS (mv_gemm_row_atom) */
    w->fixed = strncmp(w->impl, "brg", 3) != 0;
    pthread_mutex_lock(&g->mu);
    if (w->fixed)
        g->row_atom = MV_BLAS_ROW_ATOM;
    if (!strchr(g->name, '('))
        snprintf(g->name + strlen(g->name), sizeof g->name - strlen(g->name), " (%s)", pd_impl(pd));
    pthread_mutex_unlock(&g->mu);
    size_t bytes = dnnl_memory_desc_get_size(&w->md);
    w->packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!w->packed) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for packed weights (%zu bytes)", name, bytes);
        goto out;
    }
    dnnl_memory_desc_t du; /* W[od, in] seen as [in, od] with strides (1, in) */
    dnnl_dims_t sw = {in, od};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&du, 2, sw, dnnl_f32, dnnl_ba), "weights descriptor");
    DNNL_TRY(dnnl_memory_create(&mu, &du, g->eng, (void *)W), "weights memory");
    DNNL_TRY(dnnl_memory_create(&mp, &w->md, g->eng, w->packed), "packed weights memory");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, &du, g->eng, &w->md, g->eng, NULL), "reorder");
    DNNL_TRY(dnnl_primitive_create(&r, rpd), "reorder primitive");
    DNNL_TRY(dnnl_stream_create(&s, g->eng, dnnl_stream_default_flags), "stream");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, mu}, {DNNL_ARG_TO, mp}};
    if (!mv_omp_room(0)) { /* the reorder's team, once all else is made (mv_omp_room) */
        st = mv_fail(e, MV_ERR_NOROOM, "out of memory: no address space for the packing's threads");
        goto out;
    }
    DNNL_TRY(dnnl_primitive_execute(r, s, 2, a), "reorder");
    DNNL_TRY(dnnl_stream_wait(s), "reorder");
    mv_omp_started(0); /* the reorder's team (mv_omp_room) */
out:
    if (st)
        st = mv_fail_prefix(e, st, "%s", name);
    if (s)
        dnnl_stream_destroy(s);
    if (r)
        dnnl_primitive_destroy(r);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (mu)
        dnnl_memory_destroy(mu);
    if (mp)
        dnnl_memory_destroy(mp);
#else
    (void)g;
#endif
    if (st) {
        mv_gemm_w_free(w);
        return st;
    }
    *out = w;
    return MV_OK;
}

int mv_gemm_w_rows_free(const mv_gemm_w *w)
{
#if MV_HAVE_DNNL
    return w && (w->amx || w->fixed);
#else
    return w != NULL;
#endif
}

int mv_gemm_row_atom(const mv_gemm_cpu *g) { return g->row_atom; }

void mv_gemm_w_free(mv_gemm_w *w)
{
    if (!w)
        return;
    mv_amx_w_free(w->amx);
#if MV_HAVE_DNNL
    free(w->packed);
#endif
    free(w);
}

mv_status mv_gemm_ws_create(mv_gemm_cpu *g, int slots, mv_gemm_ws **out, mv_err *e)
{
    mv_gemm_ws *ws = calloc(1, sizeof *ws);
    if (ws)
        ws->s = calloc(slots > 0 ? slots : 1, sizeof *ws->s);
    if (!ws || !ws->s) {
        free(ws);
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    }
    ws->g = g;
    ws->n = slots;
#if MV_HAVE_DNNL
    for (int i = 0; i < slots; i++) {
        dnnl_status_t s = dnnl_stream_create(&ws->s[i].st, g->eng, dnnl_stream_default_flags);
        if (s != dnnl_success) {
            mv_gemm_ws_destroy(ws);
            return mv_fail(e, MV_ERR_INTERNAL, "oneDNN: stream: status %d", (int)s);
        }
    }
#endif
    *out = ws;
    return MV_OK;
}

void mv_gemm_ws_destroy(mv_gemm_ws *ws)
{
    if (!ws)
        return;
    for (int i = 0; i < ws->n; i++) {
#if MV_HAVE_DNNL
        if (ws->s[i].st)
            dnnl_stream_destroy(ws->s[i].st);
#endif
        free(ws->s[i].scr);
        free(ws->s[i].xs);
    }
    free(ws->s);
    free(ws);
}

#if MV_HAVE_DNNL
/* one call of at most MB rows */
static mv_status gemm_call(mv_gemm_ws *ws, slot_t *sl, const mv_gemm_w *w, float *out, int64_t ldo,
                           const float *x, int64_t ldx, int64_t m, mv_err *e)
{
    prim *p;
    mv_status st = get_prim(ws->g, w, m, ldx, ldo, &p, e);
    if (st)
        return st;
    if (p->scr_bytes > sl->scr_cap) {
        free(sl->scr);
        sl->scr_cap = 0;
        if (!(sl->scr = aligned_alloc(64, (p->scr_bytes + 63) / 64 * 64)))
            return mv_fail(e, MV_ERR_NOMEM, "out of memory for oneDNN's scratchpad");
        sl->scr_cap = p->scr_bytes;
    }
    dnnl_memory_t mx = NULL, mw = NULL, my = NULL, ms = NULL;
    dnnl_engine_t eng = ws->g->eng;
    DNNL_TRY(dnnl_memory_create(&mx, &p->src, eng, (void *)x), "source memory");
    DNNL_TRY(dnnl_memory_create(&mw, &w->md, eng, w->packed), "weights memory");
    DNNL_TRY(dnnl_memory_create(&my, &p->dst, eng, out), "destination memory");
    DNNL_TRY(dnnl_memory_create(&ms, &p->scr, eng, sl->scr), "scratchpad memory");
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, my},
                            {DNNL_ARG_SCRATCHPAD, ms}};
    DNNL_TRY(dnnl_primitive_execute(p->p, sl->st, 4, a), "matmul");
    DNNL_TRY(dnnl_stream_wait(sl->st), "matmul");
out:
    if (mx)
        dnnl_memory_destroy(mx);
    if (mw)
        dnnl_memory_destroy(mw);
    if (my)
        dnnl_memory_destroy(my);
    if (ms)
        dnnl_memory_destroy(ms);
    return st;
}
#endif

mv_status mv_gemm_rows(mv_gemm_ws *ws, int slot, const mv_gemm_w *w, float *out, int64_t ldo,
                       const float *x, int64_t ldx, int64_t m, mv_err *e)
{
    if (m <= 0)
        return MV_OK;
    if (slot < 0 || slot >= ws->n)
        return mv_fail(e, MV_ERR_INTERNAL, "gemm: thread slot %d of %d", slot, ws->n);
    if (w->amx) { /* bf16x6 */
        slot_t *sl = &ws->s[slot];
        size_t need = mv_amx_scratch_bytes(w->amx, m);
        if (need > sl->xs_cap) {
            free(sl->xs);
            sl->xs_cap = 0;
            if (!(sl->xs = aligned_alloc(64, (need + 63) / 64 * 64)))
                return mv_fail(e, MV_ERR_NOMEM, "out of memory for split rows (%zu bytes)", need);
            sl->xs_cap = need;
        }
        mv_amx_rows(w->amx, out, ldo, x, ldx, m, sl->xs);
        return MV_OK;
    }
#if MV_HAVE_DNNL
    /* one thread at execution too: gemm:jit asks omp_get_max_threads() when it runs, not when it
     * was created, and from a one-thread region (a tower part of one thread) that is the
     * caller's -j: it then split its product over -j threads of its own and gave other bytes
     * at -j 4 than at -j 1 (ONEDNN_MAX_CPU_ISA=AVX, 25-cpu-threads.bats) */
    const int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    const int64_t cb = w->fixed ? MV_BLAS_ROW_ATOM : MB; /* rows per call */
    mv_status st = MV_OK;
    for (int64_t r = 0; r < m && !st; r += cb)
        st = gemm_call(ws, &ws->s[slot], w, out + r * ldo, ldo, x + r * ldx, ldx,
                       m - r < cb ? m - r : cb, e);
    omp_set_num_threads(nt);
    if (st)
        return st;
#else
    mv_blas_rows_nt(out, ldo, x, ldx, w->W, w->in, w->od, m);
#endif
    return MV_OK;
}

int mv_sgemm_1t(int tb, int m, int n, int k, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc)
{
#if MV_HAVE_DNNL
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t s = dnnl_sgemm('N', tb ? 'T' : 'N', m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(nt);
    return s == dnnl_success ? 0 : -1;
#else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A,
                lda, B, ldb, beta, C, ldc);
    return 0;
#endif
}
