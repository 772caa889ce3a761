/* mv_gemm_cpu.h - the CPU tower's f32 matrix products: each Linear layer's weights packed once
 * for the GEMM library (oneDNN's matmul primitive; OpenBLAS in a `make NO_DNNL=1` build, which
 * packs nothing), row blocks multiplied against them on the calling thread alone, and
 * attention's two small products in f32 (in both modes). Not here: the tower's threading and
 * epilogues (tower_cpu.c, ops_cpu.c).
 *
 * Modes (one per mv_gemm_cpu): f32, oneDNN's or OpenBLAS's f32 matmul; bf16x6, f32 operands split
 * exactly into three bf16 parts each (mv_bf16x3_split, mv_gemm_amx.h) and x . W^T summed from the
 * six products of parts whose sizes sum to at most 2^-16 of the whole (Henry et al. 2019, "Leveraging the
 * bfloat16 AI datatype for higher-precision computations"), products of bf16 pairs being exact
 * in f32, on Intel AMX tiles (our kernel: gemm_amx.c, mv_gemm_amx.h). At least f32's accuracy at
 * AMX's rate; its packed weights take 1.5x the f32 bytes.
 *
 * Determinism: a row's result depends on the row and the weights only, never on how many rows
 * the call had or where the row sat in it, as long as calls start at multiples of
 * mv_gemm_row_atom rows. Every call is single-threaded, whatever -j is. */
#ifndef MV_GEMM_CPU_H
#define MV_GEMM_CPU_H

#include "mv_common.h"

#ifndef MV_HAVE_DNNL
#define MV_HAVE_DNNL 0 /* the Makefile sets 1 when it links oneDNN */
#endif

/* The row atom where every call gives a row the same bytes (oneDNN's brgemm matmul, the AMX
 * kernel; 25-cpu-threads.bats checks it on blocks of every size): small, so that cuts balance
 * many threads on the rows of one image. */
#define MV_GEMM_ROW_ATOM_FREE 16

/* OpenBLAS (and oneDNN's gemm:jit, its f32 matmul on CPUs without AVX-512) gives a row other
 * bytes depending on where it sits in its call, even where the calls start at multiples of 64
 * rows and are large: its kernels take rows in groups with tail kernels, and a "small matrix"
 * kernel, that sum in another order (bench/NOTES.md, "That rule was not enough"). So rows go to
 * OpenBLAS only in calls of exactly this many (the last of a matrix fewer), starting at multiples
 * of it: the same calls whatever the thread cut. 128 rather than 64, because each call packs the
 * whole weight matrix again (the cost of both: the same section). */
#define MV_BLAS_ROW_ATOM 128

/* Row loops compiled for AVX-512 and AVX2 too, chosen at load time (ifunc): the CPU tower's
 * elementwise loops and the bf16x3 split. Not under the sanitizers: their ifunc resolvers run
 * before the sanitizer runtime (a crash at load). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define MV_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MV_CLONES
#endif

typedef enum {
    MV_CPU_GEMM_F32 = 0, /* f32 matmul */
    MV_CPU_GEMM_BF16X6,  /* three-part bf16 split, six products on AMX (gemm_amx.c) */
    MV_CPU_GEMM_AUTO     /* bf16x6 where AMX is usable (mv_amx_available), else f32 */
} mv_cpu_gemm;

typedef struct mv_gemm_cpu mv_gemm_cpu; /* the library's state and primitive cache */
typedef struct mv_gemm_w mv_gemm_w;     /* one Linear layer's weights, packed */
typedef struct mv_gemm_ws mv_gemm_ws;   /* per-forward work space: one slot per thread */

/* verbose: say once on stderr which GEMM library runs (and, for OpenBLAS, when it runs generic
 * kernels on a CPU it does not know, how to fix that). mode: MV_CPU_GEMM_BF16X6 fails with
 * MV_ERR_UNSUPPORTED where AMX is not usable (the message says why); MV_CPU_GEMM_AUTO never fails
 * for that reason. */
mv_status mv_gemm_cpu_create(int verbose, mv_cpu_gemm mode, mv_gemm_cpu **out, mv_err *e);
void mv_gemm_cpu_destroy(mv_gemm_cpu *g);
/* "oneDNN 2.6.3 f32 (brg:avx512_core)" (the implementation once weights were packed), "AMX
 * bf16x6 (gemm_amx.c; attention: oneDNN 2.6.3 f32)" or "OpenBLAS (core SkylakeX) f32" */
const char *mv_gemm_cpu_name(const mv_gemm_cpu *g);
/* the mode that runs: MV_CPU_GEMM_F32 or MV_CPU_GEMM_BF16X6 (what MV_CPU_GEMM_AUTO became) */
mv_cpu_gemm mv_gemm_cpu_mode(const mv_gemm_cpu *g);
/* "f32", "bf16x6" or "auto" -> *m; returns 0, or -1 for anything else */
int mv_cpu_gemm_parse(const char *s, mv_cpu_gemm *m);

/* Packs W[od, in] (row-major, as the model stores a Linear's weight) for y = x . W^T. W must stay
 * alive as long as the packed copy (the OpenBLAS build keeps a pointer to it). name: for errors. */
mv_status mv_gemm_pack(mv_gemm_cpu *g, const float *W, int in, int od, const char *name,
                       mv_gemm_w **out, mv_err *e);
void mv_gemm_w_free(mv_gemm_w *w);

/* 1 when a row's result through w does not depend on how a thread's rows are grouped into
 * mv_gemm_rows calls starting at multiples of mv_gemm_row_atom (the bf16x6 AMX kernel; OpenBLAS
 * and oneDNN's gemm:jit, which mv_gemm_rows calls per MV_BLAS_ROW_ATOM rows anyway), so a caller
 * may cut them into smaller calls; 0 for oneDNN's brgemm f32 matmul. */
int mv_gemm_w_rows_free(const mv_gemm_w *w);

/* Callers cut a matrix's rows between threads (and into mv_gemm_rows calls) at multiples of this
 * many rows, counted from the matrix's first row: MV_GEMM_ROW_ATOM_FREE where every call gives a
 * row the same bytes, MV_BLAS_ROW_ATOM where mv_gemm_rows makes calls of exactly that many
 * (OpenBLAS; oneDNN once any weights were packed for its gemm:jit). Ask after packing. */
int mv_gemm_row_atom(const mv_gemm_cpu *g);

/* A work space for `slots` threads (thread t of a parallel region uses slot t). */
mv_status mv_gemm_ws_create(mv_gemm_cpu *g, int slots, mv_gemm_ws **out, mv_err *e);
void mv_gemm_ws_destroy(mv_gemm_ws *ws);

/* out[m, od] (row stride ldo) = x[m, in] (row stride ldx) . W^T, on the calling thread alone,
 * which uses slot `slot` of ws. Thread-safe for distinct slots. m may be 0. Where the library's
 * row bytes depend on the call (OpenBLAS, oneDNN's gemm:jit), it multiplies in calls of exactly
 * MV_BLAS_ROW_ATOM rows from x's first row. */
mv_status mv_gemm_rows(mv_gemm_ws *ws, int slot, const mv_gemm_w *w, float *out, int64_t ldo,
                       const float *x, int64_t ldx, int64_t m, mv_err *e);

/* out[m, od] (row stride ldo) = x[m, in] (row stride ldx) . W[od, in]^T through OpenBLAS on the
 * calling thread, in calls of MV_BLAS_ROW_ATOM rows from x's first row: row bytes independent of
 * how a matrix's rows are cut between threads when the cuts are at multiples of the atom. */
void mv_blas_rows_nt(float *out, int64_t ldo, const float *x, int64_t ldx, const float *W, int in,
                     int od, int64_t m);

/* Makes OpenBLAS's own calls single-threaded, once per process (every parallel loop is ours):
 * call before any direct cblas call. */
void mv_blas_single_threaded(void);
/* The threads OpenBLAS started when it loaded (its OPENBLAS_NUM_THREADS, else one per CPU), each
 * reserving about 128 MiB of address space; 1: none besides the caller. */
int mv_blas_threads_at_load(void);

/* Row-major C[m, n] = alpha . A[m, k] . op(B) + beta . C (op(B) = B[k, n], or B[n, k]^T when
 * tb), on the calling thread alone (attention's products). Returns 0, or -1 on a library error. */
int mv_sgemm_1t(int tb, int m, int n, int k, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc);

#endif
