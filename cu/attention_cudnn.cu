/* attention_cudnn.cu - the tower's varlen bidirectional attention through cuDNN's fused flash
 * attention (bf16), built with cuDNN's graph (backend) API and loaded at run time: dlopen of
 * libcudnn.so.9 from the backend option cudnn_lib (a directory or the file), the loader's search
 * path, then the torch venv's nvidia/cudnn/lib, once per process. Where none loads (or cuDNN <
 * 9.6, or a GPU before sm_90, where cuDNN has no ragged layout), create fails with
 * MV_ERR_UNSUPPORTED and the reason, and the tower uses the builtin kernel (cu/attention.cu).
 * The graph is the one cudnn-frontend's SDPA node expands to for inference with a padding mask,
 * each segment one batch entry with ragged (THD) offsets into the packed buffers; a chunk of two
 * or more equal segments takes cudnn-frontend's plain BSHD graph instead (no offsets, no mask)
 * unless the option asks for the ragged graph always (mv_cudnn_graph). Plans are cached per
 * bucketed (batch, length) in the state, which belongs to one backend and its device: nothing
 * here is shared between devices but the loaded library's function table. Offsets are int32: a
 * chunk with n * 3 * heads * D >= 2^31 elements is refused (MV_ERR_UNSUPPORTED; the tower then
 * runs the builtin kernel for it). Not here: causal masks, dropout, training (stats output), f32 /
 * tf32 attention, head dims over 128 or not a multiple of 8. Build without it: make NO_CUDNN=1
 * (this file then only answers "not built"). CPU twin: mv_attention_cpu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mv_cuda.cuh"

#ifdef MV_HAVE_CUDNN
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>

/* ---- the library ------------------------------------------------------------------------ */
typedef struct {
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    void (*GetLastErrorString)(char *, size_t);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*BackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} cudnn_fns;

static cudnn_fns g_dnn;             /* process-wide, written once under g_dnn_mu, then read-only */
static char g_dnn_path[512];        /* where it was loaded from */
static char g_dnn_err[768];         /* why it was not */
static int g_dnn_ok, g_dnn_tried;
static pthread_mutex_t g_dnn_mu = PTHREAD_MUTEX_INITIALIZER;

#define TORCH_CUDNN "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9"

static void *try_open(const char *path, char *why, size_t wn)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *m = dlerror();
        size_t l = strlen(why);
        snprintf(why + l, wn - l, "%s%s", l ? "; " : "", m ? m : path);
    }
    return h;
}

/* lib: a directory holding libcudnn.so.9 or the library's path, tried first (NULL or "": none) */
static void load_cudnn(const char *lib)
{
    char why[600] = "";
    void *h = NULL;
    if (lib && *lib) {
        char p[sizeof g_dnn_path];
        size_t l = strlen(lib);
        if (l > 3 && !strcmp(lib + l - 3, ".so")) snprintf(p, sizeof p, "%s", lib);
        else if (strstr(lib, ".so.")) snprintf(p, sizeof p, "%s", lib);
        else snprintf(p, sizeof p, "%s/libcudnn.so.9", lib);
        if ((h = try_open(p, why, sizeof why))) snprintf(g_dnn_path, sizeof g_dnn_path, "%s", p);
    }
    if (!h && (h = try_open("libcudnn.so.9", why, sizeof why)))
        snprintf(g_dnn_path, sizeof g_dnn_path, "libcudnn.so.9");
    if (!h && (h = try_open(TORCH_CUDNN, why, sizeof why)))
        snprintf(g_dnn_path, sizeof g_dnn_path, "%s", TORCH_CUDNN);
    if (!h) {
        snprintf(g_dnn_err, sizeof g_dnn_err, "libcudnn.so.9 not loadable (%s)", why);
        return;
    }
    const char *missing = NULL;
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&g_dnn.field = dlsym(h, name);                                                   \
        if (!g_dnn.field && !missing) missing = name;                                              \
    } while (0)
    SYM(GetVersion, "cudnnGetVersion");
    SYM(GetErrorString, "cudnnGetErrorString");
    SYM(Create, "cudnnCreate");
    SYM(Destroy, "cudnnDestroy");
    SYM(SetStream, "cudnnSetStream");
    SYM(BackendCreateDescriptor, "cudnnBackendCreateDescriptor");
    SYM(BackendDestroyDescriptor, "cudnnBackendDestroyDescriptor");
    SYM(BackendFinalize, "cudnnBackendFinalize");
    SYM(BackendSetAttribute, "cudnnBackendSetAttribute");
    SYM(BackendGetAttribute, "cudnnBackendGetAttribute");
    SYM(BackendExecute, "cudnnBackendExecute");
#undef SYM
    *(void **)&g_dnn.GetLastErrorString = dlsym(h, "cudnnGetLastErrorString"); /* optional */
    if (missing) {
        snprintf(g_dnn_err, sizeof g_dnn_err, "%s: symbol %s missing", g_dnn_path, missing);
        return;
    }
    size_t v = g_dnn.GetVersion();
    if (v < 90600) {
        snprintf(g_dnn_err, sizeof g_dnn_err, "%s is cuDNN %zu.%zu.%zu; ragged attention needs 9.6 or newer",
                 g_dnn_path, v / 10000, v / 100 % 100, v % 100);
        return;
    }
    g_dnn_ok = 1;
}

/* ---- state -------------------------------------------------------------------------------- */
#define PLAN_CACHE 24

typedef struct {
    int64_t B, S;
    int dense; /* 1: the dense graph (equal segments, no ragged offsets, no mask) */
    cudnnBackendDescriptor_t plan;
    int64_t ws; /* workspace bytes */
} dnn_plan;

typedef struct {
    int32_t *dev;         /* [3 * cap + 2]: seq_len[B] | qkv offsets[B + 1] | out offsets[B + 1] */
    int64_t cap;          /* B capacity */
    int64_t B, S, n;      /* the prepared chunk: bucketed batch and length, rows */
    int nseg;
    int dense;            /* nseg >= 2 segments of one length S = that length, B = nseg */
} dnn_meta;

struct mv_cudnn_attn {
    int device, heads, D;
    cudnnHandle_t h;
    cudaStream_t st;
    dnn_plan plans[PLAN_CACHE];
    int n_plans, next_evict;
    void *ws;
    int64_t ws_size;
    dnn_meta meta[2];
    int32_t *host; /* staging for one slot's metadata */
    int64_t host_cap;
    float scale, neg_inf; /* by-value scalars: host memory the variant pack points to */
    int dense_ok;         /* equal-length chunks may take the dense graph (MV_CUDNN_GRAPH_AUTO) */
    char desc[600];
};

static mv_status dnn_fail_code(mv_err *e, mv_status code, cudnnStatus_t s, const char *what)
{
    char last[512] = "";
    if (g_dnn.GetLastErrorString) g_dnn.GetLastErrorString(last, sizeof last);
    return mv_fail(e, code, "cuda: cuDNN attention: %s: %s%s%s", what, g_dnn.GetErrorString(s),
                   *last ? ": " : "", last);
}

static mv_status dnn_fail(mv_err *e, cudnnStatus_t s, const char *what)
{
    return dnn_fail_code(e, MV_ERR_DEVICE, s, what);
}

const char *mv_cudnn_attn_describe(const mv_cudnn_attn *a) { return a ? a->desc : "cuDNN not loaded"; }
size_t mv_cudnn_attn_version(const mv_cudnn_attn *a) { return a ? g_dnn.GetVersion() : 0; }

mv_status mv_cudnn_attn_create(mv_cudnn_attn **out, int device, int heads, int D, cudaStream_t st,
                               const char *lib, int ragged, mv_err *e)
{
    *out = NULL;
    pthread_mutex_lock(&g_dnn_mu); /* the first caller loads the library, for the process */
    if (!g_dnn_tried) load_cudnn(lib);
    g_dnn_tried = 1;
    pthread_mutex_unlock(&g_dnn_mu);
    if (!g_dnn_ok) return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention unavailable: %s", g_dnn_err);
    if (D % 8 || D > 128 || D < 8)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention: head dim %d not supported (multiple of 8, <= 128)", D);
    cudaDeviceProp prop;
    cudaError_t r = cudaGetDeviceProperties(&prop, device);
    if (r != cudaSuccess) return mv_cuda_check(r, e, "cudaGetDeviceProperties");
    if (prop.major < 9)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention: %s (sm_%d%d): ragged attention needs sm_90 or newer",
                       prop.name, prop.major, prop.minor);
    mv_status ms = mv_cuda_check_resident(NULL, device, "cuDNN attention create", e);
    if (ms != MV_OK) return ms;
    mv_cudnn_attn *a = (mv_cudnn_attn *)calloc(1, sizeof *a);
    if (!a) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    a->device = device;
    a->heads = heads;
    a->D = D;
    a->st = st;
    a->scale = (float)(1.0 / sqrt((double)D));
    a->neg_inf = g_dnn.GetVersion() < 91000 ? -3.40282347e38f : -INFINITY; /* as the frontend */
    a->dense_ok = !ragged;
    cudnnStatus_t s = g_dnn.Create(&a->h);
    if (s == CUDNN_STATUS_SUCCESS) s = g_dnn.SetStream(a->h, st);
    if (s != CUDNN_STATUS_SUCCESS) {
        mv_status rs = dnn_fail(e, s, "handle creation");
        if (a->h) g_dnn.Destroy(a->h);
        free(a);
        return rs;
    }
    size_t v = g_dnn.GetVersion();
    snprintf(a->desc, sizeof a->desc, "cuDNN %zu.%zu.%zu fused flash attention (%s)", v / 10000, v / 100 % 100,
             v % 100, g_dnn_path);
    *out = a;
    return MV_OK;
}

void mv_cudnn_attn_destroy(mv_cudnn_attn *a)
{
    if (!a) return;
    cudaSetDevice(a->device);
    cudaStreamSynchronize(a->st);
    for (int i = 0; i < a->n_plans; i++)
        if (a->plans[i].plan) g_dnn.BackendDestroyDescriptor(a->plans[i].plan);
    for (int i = 0; i < 2; i++)
        if (a->meta[i].dev) cudaFree(a->meta[i].dev);
    if (a->ws) cudaFree(a->ws);
    free(a->host);
    g_dnn.Destroy(a->h);
    free(a);
}

/* ---- buckets ---------------------------------------------------------------------------- */
static int64_t bucket_b(int64_t b)
{
    int64_t p = 1;
    while (p < b) p *= 2;
    return p;
}
/* up to the next multiple of a quarter of the octave: at most 25% padding, ~4 plans per octave */
static int64_t bucket_s(int64_t s)
{
    if (s <= 64) return 64;
    int64_t p = 1;
    while (p * 2 <= s) p *= 2;
    int64_t step = p / 4;
    return (s + step - 1) / step * step;
}

mv_status mv_cudnn_attn_prepare(mv_cudnn_attn *a, int buf, const int32_t *cu, int nseg, cudaStream_t io,
                                mv_err *e)
{
    dnn_meta *m = &a->meta[buf & 1];
    int64_t n = cu[nseg], H = (int64_t)a->heads * a->D, maxlen = 0;
    m->nseg = 0;
    if (n * 3 * H >= ((int64_t)1 << 31))
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuDNN attention: %lld rows x %lld columns exceed its int32 offsets", (long long)n,
                       (long long)(3 * H));
    int same = nseg >= 2;
    for (int i = 0; i < nseg; i++) {
        if (cu[i + 1] - cu[i] > maxlen) maxlen = cu[i + 1] - cu[i];
        same = same && cu[i + 1] - cu[i] == cu[1] - cu[0];
    }
    if (same && a->dense_ok) { /* the dense graph needs no metadata on the device */
        m->B = nseg;
        m->S = maxlen;
        m->n = n;
        m->nseg = nseg;
        m->dense = 1;
        return MV_OK;
    }
    m->dense = 0;
    int64_t B = bucket_b(nseg), S = bucket_s(maxlen);
    if (B > m->cap) {
        if (m->dev) cudaFree(m->dev); /* synchronizes: the slot's previous chunk is done */
        m->dev = NULL;
        m->cap = 0;
        cudaError_t r = cudaMalloc((void **)&m->dev, (size_t)(3 * B + 2) * sizeof(int32_t));
        if (r != cudaSuccess) return mv_cuda_check(r, e, "cuDNN attention metadata");
        m->cap = B;
    }
    if (a->host_cap < 3 * B + 2) {
        free(a->host);
        a->host = (int32_t *)malloc((size_t)(3 * B + 2) * sizeof(int32_t));
        a->host_cap = a->host ? 3 * B + 2 : 0;
        if (!a->host) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    }
    int32_t *seq = a->host, *oq = seq + B, *oo = oq + B + 1;
    for (int64_t i = 0; i <= B; i++) {
        int64_t r0 = cu[i < nseg ? i : nseg];
        if (i < B) seq[i] = i < nseg ? cu[i + 1] - cu[i] : 0; /* padding entries: empty, at the end */
        oq[i] = (int32_t)(r0 * 3 * H);
        oo[i] = (int32_t)(r0 * H);
    }
    /* pageable source: the copy has read it when the call returns, so the staging is reusable */
    cudaError_t r = cudaMemcpyAsync(m->dev, a->host, (size_t)(3 * B + 2) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, io);
    if (r != cudaSuccess) return mv_cuda_check(r, e, "cuDNN attention metadata upload");
    m->B = B;
    m->S = S;
    m->n = n;
    m->nseg = nseg;
    return MV_OK;
}

/* ---- graph --------------------------------------------------------------------------------
 * The graph is the one cudnn-frontend's SDPA node expands to for inference with a padding mask
 * (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, utils/attn_score_modifiers.h):
 *   S = Q K^T (f32) -> * D^-0.5 -> padding mask (row < seq_len_q and col < seq_len_kv, else -inf)
 *   -> softmax (max, sub, exp, sum, log, add, div: the log-sum-exp stats are computed into a virtual
 *   tensor, as the frontend's CompositeSoftmaxNode does when no stats are requested; cuDNN's SDPA
 *   pattern matcher expects them) -> P (bf16) -> O = P V. seq_len_q and seq_len_kv are two tensors
 *   (as the frontend's) bound to the same device array.
 * Every segment (one image, one temporal group of a video) is one batch entry of the graph, with
 * ragged (THD) offsets into the packed buffers: Q, K, V are strided views of qkv[n, 3*heads*D]
 * (row stride 3*heads*D, head stride D; K and V start heads*D and 2*heads*D elements in), O is
 * out[n, heads*D]; offsets are in elements (segment start row * row stride). The graph's batch
 * count B and max sequence length S are bucketed (bucket_b, bucket_s: B to a power of two, padding
 * entries of length 0 at the end; S up to a quarter-octave step: 784 -> 896, 8160 -> 8192, 47376
 * -> 49152), so few plans are built; the padding mask handles the rest. */
enum { U_Q = 1, U_K, U_V, U_O, U_SEQ_Q = 10, U_SEQ_KV, U_RQ, U_RK, U_RV, U_RO, U_SCALE = 20, U_NEGINF };

typedef struct {
    cudnnBackendDescriptor_t d[256];
    int n;
    cudnnStatus_t s;
    const char *what;
} dset;

static cudnnBackendDescriptor_t mk(dset *g, cudnnBackendDescriptorType_t t, const char *what)
{
    cudnnBackendDescriptor_t d = NULL;
    if (g->s != CUDNN_STATUS_SUCCESS) return NULL;
    if (g->n >= 256) {
        g->s = CUDNN_STATUS_INTERNAL_ERROR;
        g->what = "descriptor table";
        return NULL;
    }
    g->s = g_dnn.BackendCreateDescriptor(t, &d);
    if (g->s != CUDNN_STATUS_SUCCESS) {
        g->what = what;
        return NULL;
    }
    g->d[g->n++] = d;
    return d;
}
static void set(dset *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *v, const char *what)
{
    if (g->s != CUDNN_STATUS_SUCCESS) return;
    g->s = g_dnn.BackendSetAttribute(d, name, type, count, v);
    if (g->s != CUDNN_STATUS_SUCCESS) g->what = what;
}
static void fin(dset *g, cudnnBackendDescriptor_t d, const char *what)
{
    if (g->s != CUDNN_STATUS_SUCCESS) return;
    g->s = g_dnn.BackendFinalize(d);
    if (g->s != CUDNN_STATUS_SUCCESS) g->what = what;
}

static cudnnBackendDescriptor_t tensor(dset *g, int64_t uid, cudnnDataType_t dt, const int64_t *dim,
                                       const int64_t *str, bool virt, bool byval,
                                       cudnnBackendDescriptor_t ragged, const char *what)
{
    cudnnBackendDescriptor_t t = mk(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t align = 16;
    set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what);
    set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, what);
    set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, what);
    set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what);
    if (virt) set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, what);
    if (byval) set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval, what);
    if (ragged) set(g, t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged, what);
    fin(g, t, what);
    return t;
}

/* y = mode(x [, b [, t]]) */
static cudnnBackendDescriptor_t pointwise(dset *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                                          cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                          cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                                          int64_t axis, const char *what)
{
    cudnnBackendDescriptor_t pw = mk(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
    if (axis >= 0) set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    fin(g, pw, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    if (b) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    if (t) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    const float one = 1.0f; /* the frontend sets both alphas (node/pointwise.h) */
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, what);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, what);
    fin(g, op, what);
    return op;
}

static cudnnBackendDescriptor_t reduction(dset *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t y, const char *what)
{
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t rd = mk(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, what);
    set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, what);
    fin(g, rd, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    fin(g, op, what);
    return op;
}

static cudnnBackendDescriptor_t matmul(dset *g, cudnnBackendDescriptor_t A, cudnnBackendDescriptor_t Bm,
                                       cudnnBackendDescriptor_t C, cudnnBackendDescriptor_t m_ov,
                                       cudnnBackendDescriptor_t n_ov, cudnnBackendDescriptor_t k_ov,
                                       const char *what)
{
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t md = mk(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    set(g, md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, what);
    fin(g, md, what);
    cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &A, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Bm, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &C, what);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md, what);
    if (m_ov) set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_ov, what);
    if (n_ov) set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n_ov, what);
    if (k_ov) set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k_ov, what);
    fin(g, op, what);
    return op;
}

/* Builds and finalizes the plan for (B, S); the first engine configuration of heuristic mode A
 * that finalizes wins. dense: B segments of exactly S rows each, consecutive in the packed
 * buffers (batch stride S rows): no ragged offsets, no seq_len tensors, no padding mask - the
 * graph cudnn-frontend builds for plain BSHD SDPA, the faster of the two on equal segments
 * (bench/NOTES.md). */
static mv_status build_plan(mv_cudnn_attn *a, int64_t B, int64_t S, int dense, dnn_plan *out, mv_err *e)
{
    dset g;
    memset(&g, 0, sizeof g);
    const int64_t h = a->heads, D = a->D, H = h * D, ld = 3 * H;
    const cudnnDataType_t BF = CUDNN_DATA_BFLOAT16, F = CUDNN_DATA_FLOAT, I32 = CUDNN_DATA_INT32,
                          BO = CUDNN_DATA_BOOLEAN;
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t d_seq[4] = {B, 1, 1, 1}, d_rag[4] = {B + 1, 1, 1, 1};
    const int64_t d_q[4] = {B, h, S, D}, s_q[4] = {S * ld, D, ld, 1};
    const int64_t d_kt[4] = {B, h, D, S}, s_kt[4] = {S * ld, D, 1, ld};
    const int64_t s_o[4] = {S * H, D, H, 1};
    const int64_t d_s[4] = {B, h, S, S}, s_s[4] = {h * S * S, S * S, S, 1};
    const int64_t d_r[4] = {B, h, S, 1}, s_r[4] = {h * S, S, 1, 1};
    int64_t uid = 100;

    cudnnBackendDescriptor_t sq = NULL, skv = NULL, rq = NULL, rk = NULL, rv = NULL, ro = NULL;
    if (!dense) {
        sq = tensor(&g, U_SEQ_Q, I32, d_seq, one, false, false, NULL, "seq_len_q tensor");
        skv = tensor(&g, U_SEQ_KV, I32, d_seq, one, false, false, NULL, "seq_len_kv tensor");
        rq = tensor(&g, U_RQ, I32, d_rag, one, false, false, NULL, "ragged offsets");
        rk = tensor(&g, U_RK, I32, d_rag, one, false, false, NULL, "ragged offsets");
        rv = tensor(&g, U_RV, I32, d_rag, one, false, false, NULL, "ragged offsets");
        ro = tensor(&g, U_RO, I32, d_rag, one, false, false, NULL, "ragged offsets");
    }
    cudnnBackendDescriptor_t Q = tensor(&g, U_Q, BF, d_q, s_q, false, false, rq, "Q tensor");
    cudnnBackendDescriptor_t KT = tensor(&g, U_K, BF, d_kt, s_kt, false, false, rk, "K tensor");
    cudnnBackendDescriptor_t V = tensor(&g, U_V, BF, d_q, s_q, false, false, rv, "V tensor");
    cudnnBackendDescriptor_t O = tensor(&g, U_O, BF, d_q, s_o, false, false, ro, "O tensor");
    cudnnBackendDescriptor_t scale = tensor(&g, U_SCALE, F, one, one, false, true, NULL, "scale");
    cudnnBackendDescriptor_t ninf = dense ? NULL : tensor(&g, U_NEGINF, F, one, one, false, true, NULL, "-inf");
#define VT(dt, dim, str) tensor(&g, uid++, dt, dim, str, true, false, NULL, "virtual tensor")
    cudnnBackendDescriptor_t s1 = VT(F, d_s, s_s), s2 = VT(F, d_s, s_s), row = VT(I32, d_s, s_s),
                             col = VT(I32, d_s, s_s), rm = VT(BO, d_s, s_s), cm = VT(BO, d_s, s_s),
                             mask = VT(BO, d_s, s_s), s3 = VT(F, d_s, s_s), mx = VT(F, d_r, s_r),
                             s4 = VT(F, d_s, s_s), s5 = VT(F, d_s, s_s), sm = VT(F, d_r, s_r),
                             lg = VT(F, d_r, s_r), stats = VT(F, d_r, s_r), P = VT(BF, d_s, s_s);
#undef VT
    cudnnBackendDescriptor_t ops[20];
    int no = 0;
    ops[no++] = matmul(&g, Q, KT, s1, sq, skv, NULL, "Q K^T");
    if (dense) { /* no padding: the scaled scores go straight to the softmax */
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_MUL, F, s1, scale, NULL, s3, -1, "scale");
    } else {
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_MUL, F, s1, scale, NULL, s2, -1, "scale");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_GEN_INDEX, I32, s2, NULL, NULL, row, 2, "row index");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_GEN_INDEX, I32, s2, NULL, NULL, col, 3, "column index");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_CMP_LT, BO, row, sq, NULL, rm, -1, "row mask");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_CMP_LT, BO, col, skv, NULL, cm, -1, "column mask");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_LOGICAL_AND, BO, rm, cm, NULL, mask, -1, "mask");
        ops[no++] = pointwise(&g, CUDNN_POINTWISE_BINARY_SELECT, F, s2, ninf, mask, s3, -1, "padding select");
    }
    ops[no++] = reduction(&g, CUDNN_REDUCE_TENSOR_MAX, s3, mx, "row max");
    ops[no++] = pointwise(&g, CUDNN_POINTWISE_SUB, F, s3, mx, NULL, s4, -1, "sub max");
    ops[no++] = pointwise(&g, CUDNN_POINTWISE_EXP, F, s4, NULL, NULL, s5, -1, "exp");
    ops[no++] = reduction(&g, CUDNN_REDUCE_TENSOR_ADD, s5, sm, "row sum");
    ops[no++] = pointwise(&g, CUDNN_POINTWISE_LOG, F, sm, NULL, NULL, lg, -1, "log");
    ops[no++] = pointwise(&g, CUDNN_POINTWISE_ADD, F, mx, lg, NULL, stats, -1, "stats");
    ops[no++] = pointwise(&g, CUDNN_POINTWISE_DIV, F, s5, sm, NULL, P, -1, "softmax");
    ops[no++] = matmul(&g, P, V, O, sq, NULL, skv, "P V");

    cudnnBackendDescriptor_t og = mk(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->h, "operation graph");
    set(&g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, no, ops, "operation graph");
    fin(&g, og, "operation graph");
    cudnnBackendDescriptor_t heur = mk(&g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    set(&g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og, "heuristics");
    set(&g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, "heuristics");
    fin(&g, heur, "heuristics");
    enum { NCFG = 8 };
    cudnnBackendDescriptor_t cfg[NCFG];
    for (int i = 0; i < NCFG; i++) cfg[i] = mk(&g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    int64_t ncfg = 0;
    if (g.s == CUDNN_STATUS_SUCCESS) {
        g.s = g_dnn.BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                        NCFG, &ncfg, cfg);
        if (g.s != CUDNN_STATUS_SUCCESS) g.what = "heuristic results";
    }
    mv_status rs = MV_OK;
    cudnnBackendDescriptor_t plan = NULL;
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; g.s == CUDNN_STATUS_SUCCESS && i < ncfg && !plan; i++) {
        cudnnBackendDescriptor_t p = NULL;
        last = g_dnn.BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p);
        if (last != CUDNN_STATUS_SUCCESS) break;
        last = g_dnn.BackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->h);
        if (last == CUDNN_STATUS_SUCCESS)
            last = g_dnn.BackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
        if (last == CUDNN_STATUS_SUCCESS) last = g_dnn.BackendFinalize(p);
        if (last == CUDNN_STATUS_SUCCESS) plan = p;
        else g_dnn.BackendDestroyDescriptor(p);
    }
    if (g.s != CUDNN_STATUS_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "building the graph (B %lld, S %lld, heads %lld, D %lld) at %s",
                 (long long)B, (long long)S, (long long)h, (long long)D, g.what ? g.what : "?");
        rs = dnn_fail(e, g.s, what);
    } else if (!plan) {
        char what[160];
        snprintf(what, sizeof what, "no engine runs the graph (B %lld, S %lld, heads %lld, D %lld; %lld configs)",
                 (long long)B, (long long)S, (long long)h, (long long)D, (long long)ncfg);
        rs = dnn_fail_code(e, MV_ERR_UNSUPPORTED, last, what);
    } else {
        int64_t ws = 0, cnt = 0;
        cudnnStatus_t s = g_dnn.BackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                    CUDNN_TYPE_INT64, 1, &cnt, &ws);
        if (s != CUDNN_STATUS_SUCCESS) {
            g_dnn.BackendDestroyDescriptor(plan);
            rs = dnn_fail(e, s, "plan workspace size");
        } else {
            out->B = B;
            out->S = S;
            out->dense = dense;
            out->plan = plan;
            out->ws = ws;
        }
    }
    for (int i = g.n - 1; i >= 0; i--) g_dnn.BackendDestroyDescriptor(g.d[i]);
    return rs;
}

/* The cached plan for (B, S, dense), built on first use. */
static mv_status get_plan(mv_cudnn_attn *a, int64_t B, int64_t S, int dense, dnn_plan **out, mv_err *e)
{
    dnn_plan *p = NULL;
    for (int i = 0; i < a->n_plans && !p; i++)
        if (a->plans[i].B == B && a->plans[i].S == S && a->plans[i].dense == dense) p = &a->plans[i];
    if (!p) {
        dnn_plan np;
        memset(&np, 0, sizeof np);
        mv_status st = build_plan(a, B, S, dense, &np, e);
        if (st != MV_OK) return st;
        if (a->n_plans < PLAN_CACHE) {
            p = &a->plans[a->n_plans++];
        } else {
            p = &a->plans[a->next_evict];
            a->next_evict = (a->next_evict + 1) % PLAN_CACHE;
            g_dnn.BackendDestroyDescriptor(p->plan);
        }
        *p = np;
    }
    if (p->ws > a->ws_size) {
        if (a->ws) cudaFree(a->ws);
        a->ws = NULL;
        a->ws_size = 0;
        cudaError_t r = cudaMalloc(&a->ws, (size_t)p->ws);
        if (r != cudaSuccess) return mv_cuda_check(r, e, "cuDNN attention workspace");
        a->ws_size = p->ws;
    }
    *out = p;
    return MV_OK;
}

/* Executes plan p with the variant pack (uids, ptrs)[n]. */
static mv_status execute(mv_cudnn_attn *a, const dnn_plan *p, const int64_t *uids, void **ptrs, int n, mv_err *e)
{
    dset g;
    memset(&g, 0, sizeof g);
    cudnnBackendDescriptor_t vp = mk(&g, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    set(&g, vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, "variant pack");
    set(&g, vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, "variant pack");
    set(&g, vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &a->ws, "variant pack");
    fin(&g, vp, "variant pack");
    if (g.s == CUDNN_STATUS_SUCCESS) {
        g.s = g_dnn.BackendExecute(a->h, p->plan, vp);
        if (g.s != CUDNN_STATUS_SUCCESS) g.what = "execute";
    }
    mv_status st = MV_OK;
    if (g.s != CUDNN_STATUS_SUCCESS) st = dnn_fail(e, g.s, g.what ? g.what : "variant pack");
    for (int i = g.n - 1; i >= 0; i--) g_dnn.BackendDestroyDescriptor(g.d[i]);
    return st;
}

mv_status mv_cudnn_attn_run(mv_cudnn_attn *a, int buf, bf16 *out, const bf16 *qkv, mv_err *e)
{
    const dnn_meta *m = &a->meta[buf & 1];
    if (m->nseg <= 0) return MV_OK;
    mv_status st = mv_cuda_check_resident(qkv, a->device, "cuDNN attention qkv", e);
    if (st == MV_OK) st = mv_cuda_check_resident(out, a->device, "cuDNN attention output", e);
    if (st != MV_OK) return st;
    const int64_t H = (int64_t)a->heads * a->D, B = m->B;
    dnn_plan *p = NULL;
    if (m->dense) {
        /* batches of a power of two (few plans: log2 of the batch sizes seen per length), each
         * on its own consecutive rows */
        for (int64_t done = 0; st == MV_OK && done < B;) {
            int64_t b = 1;
            while (b * 2 <= B - done) b *= 2;
            st = get_plan(a, b, m->S, 1, &p, e);
            const bf16 *q = qkv + done * m->S * 3 * H;
            int64_t uids[] = {U_Q, U_K, U_V, U_O, U_SCALE};
            void *ptrs[] = {(void *)q, (void *)(q + H), (void *)(q + 2 * H), (void *)(out + done * m->S * H),
                            &a->scale};
            if (st == MV_OK) st = execute(a, p, uids, ptrs, 5, e);
            done += b;
        }
        return st;
    }
    st = get_plan(a, B, m->S, 0, &p, e);
    if (st != MV_OK) return st;
    int64_t uids[] = {U_Q, U_K, U_V, U_O, U_SEQ_Q, U_SEQ_KV, U_RQ, U_RK, U_RV, U_RO, U_SCALE, U_NEGINF};
    void *ptrs[] = {(void *)qkv,  (void *)(qkv + H), (void *)(qkv + 2 * H), (void *)out,
                    m->dev,       m->dev,            m->dev + B,            m->dev + B,
                    m->dev + B,   m->dev + 2 * B + 1, &a->scale,            &a->neg_inf};
    return execute(a, p, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), e);
}

#else /* built without cuDNN (make NO_CUDNN=1, or no cudnn.h) */

struct mv_cudnn_attn {
    int unused;
};
const char *mv_cudnn_attn_describe(const mv_cudnn_attn *a)
{
    (void)a;
    return "not built (make NO_CUDNN=1 or no cudnn.h)";
}
size_t mv_cudnn_attn_version(const mv_cudnn_attn *a)
{
    (void)a;
    return 0;
}
mv_status mv_cudnn_attn_create(mv_cudnn_attn **out, int device, int heads, int D, cudaStream_t st,
                               const char *lib, int ragged, mv_err *e)
{
    (void)device, (void)heads, (void)D, (void)st, (void)lib, (void)ragged;
    *out = NULL;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention unavailable: mvembed was built without cuDNN");
}
void mv_cudnn_attn_destroy(mv_cudnn_attn *a) { (void)a; }
mv_status mv_cudnn_attn_prepare(mv_cudnn_attn *a, int buf, const int32_t *cu, int nseg, cudaStream_t io,
                                mv_err *e)
{
    (void)a, (void)buf, (void)cu, (void)nseg, (void)io;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention unavailable: mvembed was built without cuDNN");
}
mv_status mv_cudnn_attn_run(mv_cudnn_attn *a, int buf, bf16 *out, const bf16 *qkv, mv_err *e)
{
    (void)a, (void)buf, (void)out, (void)qkv;
    return mv_fail(e, MV_ERR_UNSUPPORTED, "cuDNN attention unavailable: mvembed was built without cuDNN");
}

#endif
