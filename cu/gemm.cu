/* gemm.cu - every Linear of the tower through cuBLASLt: Y[n, out] = X[n, in] . W[out, in]^T with
 * the bias (and tanh GELU) fused as epilogues, and the residual add fused as beta = 1 (Y is both
 * C and D). bf16 mode: bf16 operands and bias, f32 accumulation, one rounding at the store;
 * f32 / tf32 modes: f32 operands with CUBLAS_COMPUTE_32F / _FAST_TF32. mv_gemm_run_f32y: the
 * same with an f32 Y (C = D = CUDA_R_32F) and an f32 bias (cuBLASLt's bias type is D's type),
 * for the bf16 tower's optional f32 residual stream: bf16 X . W^T accumulated in f32 and added to
 * f32 Y without any bf16 rounding. Plans (descriptors, layouts and the heuristic's algorithm) are
 * cached per shape and output type; each runs cuBLASLt's first heuristic answer (the variants build
 * can pick another, test/cuda/variants). CPU twin: mv_linear_cpu.
 *
 * Row-major to column-major: Y^T[out, n] = W[out, in] . X^T[in, n], i.e. A = W (transposed view
 * of the [in, out] column-major buffer), B = X, C = D = Y, bias along the m = out dimension. */
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mv_cuda.cuh"
#ifdef MV_VARIANTS
#include "variants/variants.cuh" /* the harness's --gemm-rank, --gemm-list */
#endif

#define GEMM_WORKSPACE (32u << 20)
#define PLAN_CACHE 48

typedef struct {
    int64_t n;
    int in, out, epi, acc;
    int yf32; /* Y (C, D) and bias are f32 whatever the mode */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int ok; /* 1 = algo found, -1 = no algorithm for this plan */
} gemm_plan;

struct mv_gemm {
    cublasLtHandle_t lt;
    mv_gemm_mode mode;
    cudaStream_t st;
    void *ws;
    gemm_plan plans[PLAN_CACHE];
    int n_plans, next_evict;
};

static mv_status lt_fail(mv_err *e, cublasStatus_t s, const char *what)
{
    return mv_fail(e, MV_ERR_DEVICE, "cuda: cuBLASLt %s failed (status %d)", what, (int)s);
}

static void plan_free(gemm_plan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

mv_status mv_gemm_create(mv_gemm **out, mv_gemm_mode mode, cudaStream_t st, mv_err *e)
{
    mv_gemm *g = (mv_gemm *)calloc(1, sizeof *g);
    if (!g) return mv_fail(e, MV_ERR_NOMEM, "cuda: gemm: out of host memory");
    g->mode = mode;
    g->st = st;
    cublasStatus_t s = cublasLtCreate(&g->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(g);
        return lt_fail(e, s, "handle creation");
    }
    cudaError_t r = cudaMalloc(&g->ws, GEMM_WORKSPACE);
    if (r != cudaSuccess) {
        cublasLtDestroy(g->lt);
        free(g);
        return mv_cuda_check(r, e, "gemm workspace (32 MiB)");
    }
    *out = g;
    return MV_OK;
}

size_t mv_gemm_lib_version(void) { return cublasLtGetVersion(); }

void mv_gemm_destroy(mv_gemm *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_plans; i++) plan_free(&g->plans[i]);
    cudaFree(g->ws);
    cublasLtDestroy(g->lt);
    free(g);
}

static mv_status plan_build(mv_gemm *g, gemm_plan *p, mv_err *e)
{
    cudaDataType_t dt = g->mode == MV_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cudaDataType_t dy = p->yf32 ? CUDA_R_32F : dt; /* C, D and bias */
    cublasComputeType_t ct =
        g->mode == MV_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t s;
#define LT(call, what)                                                                             \
    do {                                                                                           \
        s = (call);                                                                                \
        if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(e, s, what);                                \
    } while (0)
    LT(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "matmul descriptor");
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    cublasLtEpilogue_t epi = p->epi == MV_EPI_GELU_BIAS ? CUBLASLT_EPILOGUE_GELU_BIAS
                             : p->epi == MV_EPI_BIAS    ? CUBLASLT_EPILOGUE_BIAS
                                                        : CUBLASLT_EPILOGUE_DEFAULT;
    LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
       "epilogue");
    if (p->epi != MV_EPI_NONE)
        LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dy, sizeof dy),
           "bias type");
    /* A = W: column-major [in, out], ld in (op T -> [out, in]); B = X: [in, n], ld in;
     * C = D = Y: [out, n], ld out. */
    LT(cublasLtMatrixLayoutCreate(&p->la, dt, (uint64_t)p->in, (uint64_t)p->out, p->in), "layout A");
    LT(cublasLtMatrixLayoutCreate(&p->lb, dt, (uint64_t)p->in, (uint64_t)p->n, p->in), "layout B");
    LT(cublasLtMatrixLayoutCreate(&p->lc, dy, (uint64_t)p->out, (uint64_t)p->n, p->out), "layout C");
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref), "preference");
    uint64_t wsz = GEMM_WORKSPACE;
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz,
                                             sizeof wsz);
    cublasLtMatmulHeuristicResult_t res[8];
    int found = 0;
#ifdef MV_VARIANTS
    const int want = mv_variants_gemm_want(); /* --gemm-rank, --gemm-list: 8 answers */
#else
    const int want = 1; /* cuBLASLt's first answer */
#endif
    cublasLtMatrixLayout_t qb = p->lb, qc = p->lc; /* the B and C layouts the heuristic is asked at */
#ifdef MV_VARIANTS
    /* --gemm-bucket: the heuristic asked at a rounded row count, its answer checked below */
    const int64_t qn = mv_variants_gemm_rows(p->n);
    if (s == CUBLAS_STATUS_SUCCESS && qn != p->n)
        s = cublasLtMatrixLayoutCreate(&qb, dt, (uint64_t)p->in, (uint64_t)qn, p->in);
    if (s == CUBLAS_STATUS_SUCCESS && qn != p->n)
        s = cublasLtMatrixLayoutCreate(&qc, dy, (uint64_t)p->out, (uint64_t)qn, p->out);
#endif
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, qb, qc, qc, pref, want, res, &found);
#ifdef MV_VARIANTS
    if (s == CUBLAS_STATUS_SUCCESS && qn != p->n && found > 0) {
        cublasLtMatmulHeuristicResult_t chk;
        if (cublasLtMatmulAlgoCheck(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, &res[0].algo, &chk) !=
                CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > GEMM_WORKSPACE) /* not for the real count: its own answers */
            s = cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, want, res,
                                               &found);
    }
    if (qb != p->lb) cublasLtMatrixLayoutDestroy(qb);
    if (qc != p->lc) cublasLtMatrixLayoutDestroy(qc);
#endif
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found < 1) {
        p->ok = -1;
        return MV_OK;
    }
    int pick = 0;
#ifdef MV_VARIANTS
    pick = mv_variants_gemm_pick(p->n, p->in, p->out, p->epi, p->acc, p->yf32, res, found);
#endif
    p->algo = res[pick].algo;
    p->ok = 1;
    return MV_OK;
#undef LT
}

static mv_status plan_get(mv_gemm *g, int64_t n, int in, int out, int epi, int acc, int yf32,
                          gemm_plan **pp, mv_err *e)
{
    for (int i = 0; i < g->n_plans; i++) {
        gemm_plan *p = &g->plans[i];
        if (p->n == n && p->in == in && p->out == out && p->epi == epi && p->acc == acc &&
            p->yf32 == yf32) {
            *pp = p;
            return MV_OK;
        }
    }
    gemm_plan *p;
    if (g->n_plans < PLAN_CACHE) {
        p = &g->plans[g->n_plans++];
    } else {
        p = &g->plans[g->next_evict];
        g->next_evict = (g->next_evict + 1) % PLAN_CACHE;
        plan_free(p);
    }
    memset(p, 0, sizeof *p);
    p->n = n;
    p->in = in;
    p->out = out;
    p->epi = epi;
    p->acc = acc;
    p->yf32 = yf32;
    mv_status st = plan_build(g, p, e);
    if (st != MV_OK) {
        plan_free(p);
        return st;
    }
    *pp = p;
    return MV_OK;
}

static mv_status gemm_run(mv_gemm *g, void *Y, const void *X, const void *W, const void *bias,
                          int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, int yf32,
                          mv_err *e)
{
    if (n <= 0) return MV_OK;
    if (epi != MV_EPI_NONE && !bias)
        return mv_fail(e, MV_ERR_INTERNAL, "cuda: gemm: bias epilogue without a bias");
    gemm_plan *p;
    mv_status st = plan_get(g, n, in, out, (int)epi, accumulate, yf32, &p, e);
    if (st != MV_OK) return st;
    if (p->ok < 0)
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: cuBLASLt has no algorithm for [%lld x %d] . [%d x %d]^T (epilogue %d%s)",
                       (long long)n, in, out, in, (int)epi, yf32 ? ", f32 output" : "");
    if (epi != MV_EPI_NONE) {
        cublasStatus_t s = cublasLtMatmulDescSetAttribute(
            p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (s != CUBLAS_STATUS_SUCCESS) return lt_fail(e, s, "bias pointer");
    }
    float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
    cublasStatus_t s = cublasLtMatmul(g->lt, p->desc, &alpha, W, p->la, X, p->lb, &beta, Y, p->lc, Y,
                                      p->lc, &p->algo, g->ws, GEMM_WORKSPACE, g->st);
    if (s != CUBLAS_STATUS_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "matmul [%lld x %d] . [%d x %d]^T", (long long)n, in, out, in);
        return lt_fail(e, s, what);
    }
    return MV_OK;
}

mv_status mv_gemm_run(mv_gemm *g, void *Y, const void *X, const void *W, const void *bias,
                      int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, mv_err *e)
{
    return gemm_run(g, Y, X, W, bias, n, in, out, epi, accumulate, 0, e);
}

mv_status mv_gemm_run_f32y(mv_gemm *g, float *Y, const void *X, const void *W, const float *bias,
                           int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, mv_err *e)
{
    if (epi == MV_EPI_GELU_BIAS)
        return mv_fail(e, MV_ERR_INTERNAL, "cuda: gemm: no GELU epilogue with an f32 output");
    return gemm_run(g, Y, X, W, bias, n, in, out, epi, accumulate, 1, e);
}
