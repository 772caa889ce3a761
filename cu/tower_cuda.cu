/* tower_cuda.cu - the CUDA backend (mv_backend_cuda_create, mv_cuda_available,
 * mv_cuda_device_count; src/tower/cuda_stub.c stands in for them without CUDA): the Qwen3.5
 * vision tower on one GPU, composed from the op families in cu/ exactly as the CPU tower
 * (src/tower/tower_cpu.c) and HF's Qwen3_5VisionModel.forward do:
 *   pixels -> T -> patch GEMM (+bias) -> + interpolated position table -> depth x pre-LN blocks
 *   [LN1, qkv GEMM, 2D rope, varlen flash attention, proj GEMM (+bias +residual),
 *    LN2, fc1 GEMM (+bias, tanh GELU fused), fc2 GEMM (+bias +residual)]
 *   -> merger [LN, 4 consecutive rows = one 2x2 block (a free reshape in merge-block order),
 *    fc1 GEMM (+bias), erf GELU, fc2 GEMM (+bias)] -> f32 output.
 * T is bf16 (precision bf16: tensor cores, HF's bf16 rounding points, the residual stream x kept
 * in f32 unless opts.residual asks for HF's rounding) or f32 (precision f32 / tf32). A packed
 * batch runs as chunks of whole attention segments that fit the workspace (src/tower/plan.c),
 * pipelined over two streams (chunk k+1 uploads and k-1 downloads while k computes), from f32
 * pixel_values or uint8 frames (mv_forward_req; patchified on the GPU bit for bit as
 * mv_patchify). Attention (builtin, cuDNN or fa3) and the other settings are resolved once at
 * creation; mv_backend_cuda_settings says what they became. Invariants: no host round trip
 * inside a chunk but the stage dumps (which need the batch in one chunk); one forward at a time
 * per backend; all state belongs to one backend and its device and every entry point calls
 * cudaSetDevice first, so backends on several GPUs run concurrently. Not here: the kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa3_table.cuh" /* MV_FA3_TABLE_VERSION */
#include "mv_cuda.cuh"
#ifdef MV_VARIANTS
#include "variants/variants.cuh"
#endif

extern "C" {
#include "mv_backend.h"
#include "mv_model.h"
#include "mv_npy.h" /* bf16 rounding of the weights */
#include "mv_preprocess.h"
}

/* Workspace rows (patches per chunk) when opts.batch_tokens is 0, or fewer if free memory is
 * short (80 % of it); why 32768: bench/NOTES.md, "The CUDA tower". */
#define DEFAULT_BATCH_TOKENS 32768
#define MAX_BATCH_TOKENS (1 << 20)

typedef struct {
    float *n1w, *n1b, *n2w, *n2b;
    void *qkv_w, *qkv_b, *proj_w, *proj_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} dblock;

/* The weights on one device, in one arena: uploaded by the first backend made there, shared
 * (read-only on the device) by the backends made after it on that device with the same precision
 * and residual type (mv_backend_opts.weights_from), freed by the last of them to go. Backends are
 * made and destroyed on one thread (mv_run), so the count needs no lock. */
typedef struct {
    int refs;
    void *arena;
    void *patch_w, *patch_b, *m1w, *m1b, *m2w, *m2b;
    float *pos, *mnw, *mnb, *inv_freq;
    dblock *blocks;
} cuda_weights;

typedef struct {
    mv_backend base; /* first: the public handle */
    int device;
    mv_precision prec;
    size_t esz; /* bytes per activation element */
    /* bf16 mode with the residual stream x [n, H] in f32 (MV_RESIDUAL_F32) instead of rounded to
     * bf16 after every add as HF does: the patch GEMM writes f32 x (bf16 operands, f32 bias and
     * accumulation), the position table is added in f32, LayerNorms read f32 x and write bf16,
     * proj / fc2 accumulate into f32 x (mv_gemm_run_f32y); stage dumps of x read f32 */
    int f32res;
    size_t xsz; /* bytes per element of x: esz, or 4 with f32res */
    cudaStream_t st, io;
    cudaEvent_t ev_up[2], ev_done[2];
    /* device-time of each forward's kernels (base.gpu_t0/t1): ev_ref was recorded at creation and
     * synchronised at host time ref_host; ev_f0 / ev_f1 bracket a forward's compute on st */
    cudaEvent_t ev_ref, ev_f0, ev_f1;
    double ref_host;
    /* waits of the forward's host thread (block_on): an event made with cudaEventBlockingSync,
     * so the thread sleeps instead of spinning a core for the length of a chunk (the process's
     * default, cudaDeviceScheduleAuto, spins while there are fewer contexts than CPUs, and the
     * writers need those CPUs) */
    cudaEvent_t ev_wait;
    mv_gemm *gemm;
    mv_attn_state attn; /* this device's attention launcher state */
    mv_cudnn_attn *dnn; /* cuDNN attention (bf16), NULL = builtin kernel */
    int fa3; /* attention through the fa3 kernel (choose_attention) */
    mv_fa3_device fa3dev; /* what the fa3 plans depend on besides the shape */
    float *fa3_part;      /* the fa3 split pieces' scratch (grown by plan_fa3), fa3_part_bytes */
    size_t fa3_part_bytes;
    mv_attn_impl attn_impl;
    int verbose;
    int fuse_gelu;
    char settings[512]; /* mv_backend_cuda_settings (make_settings) */
    cuda_weights *w; /* the weights, on this backend's device: its own or shared */
    /* workspace, sized for `cap` patches per chunk */
    int64_t cap, cap_max;
    mv_tower_sizes sz;      /* byte sizes of the weight buffers and workspace rows (src/tower/plan.c) */
    float *pix[2];          /* [cap, sz.pix_cols] f32: pixels in, f32 output / dump scratch out */
    uint8_t *u8[2];         /* [cap * patch_dim] bytes: a chunk's uint8 frames (req.frames), at
                             * most temporal * patch^2 * 3 = patch_dim bytes per patch row */
    mv_patch_seg *pseg[2];  /* [cap / merge^2 + 1]: the chunk's segments for the patchify */
    mv_cuda_resizer *rz;    /* req.src_size: source frames, axes and the resize of each chunk */
    float *lut;             /* [3 * 256] mv_norm_lut of the model's preprocessing */
    void *x, *xn, *qkv, *att, *mlp; /* T: [cap, H] [cap, H] [cap, sz.qkv_cols] [cap, H]
                                     * [cap, sz.mlp_cols] (x is f32 with f32res) */
    mv_rowinfo *ri[2];      /* [cap] */
    mv_attn_tile *tiles[2]; /* [tiles_cap] */
    float2 *rope_cs;        /* [cap, D/2] rope (cos, sin) of the chunk being computed */
    int64_t tiles_cap;
    mv_rowinfo *h_ri;       /* host staging */
    mv_attn_tile *h_tiles;
    int32_t *h_cu;
    int64_t h_cu_cap;
    /* --pool mean on the device (req.mean): f64 sums [pool_cap, L], rows per entry, the f32
     * means [pool_cap, L]; spans of one chunk [pool_span_cap] (device and host staging) */
    double *pool_acc;
    int64_t *pool_rows;
    float *pool_out;
    int64_t pool_cap;
    mv_pool_span *pool_spans, *h_spans;
    int64_t pool_span_cap;
} cuda_backend;


/* ---- helpers ---------------------------------------------------------------------------- */
#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t r_ = (call);                                                                   \
        if (r_ != cudaSuccess) return mv_cuda_check(r_, e, what);                                  \
    } while (0)
#define ST(call)                                                                                   \
    do {                                                                                           \
        mv_status s_ = (call);                                                                     \
        if (s_ != MV_OK) return s_;                                                                \
    } while (0)

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* ---- weights ---------------------------------------------------------------------------- */
typedef struct {
    char *base;
    size_t off, size;
    void *host; /* staging buffer for one tensor */
    size_t host_size;
} arena;

/* Places weight v's count values in the arena: as_t 0 as f32, 1 as T, 2 as f32 holding the
 * values T would hold (bf16-rounded in bf16 mode: the biases of the f32-residual GEMMs). v is the
 * model's f32 copy, or the checkpoint's bytes (mv_weight_view): a bf16 checkpoint's T weights go
 * up as stored (the bits the f32 round trip would give back; little-endian, as the device reads
 * them), the others through f32. table: the buffer's bytes in the size table (b->sz), which sized
 * the arena. */
static mv_status put(cuda_backend *b, arena *a, const mv_weight_view *v, int64_t count, int as_t, size_t table,
                     void **dst, const char *name, mv_err *e)
{
    size_t esz = as_t == 1 ? b->esz : 4;
    size_t bytes = (size_t)count * esz;
    if (bytes != table)
        return mv_fail(e, MV_ERR_INTERNAL, "cuda: %s: %zu bytes, the size table says %zu", name, bytes,
                       table);
    if (a->off + bytes > a->size)
        return mv_fail(e, MV_ERR_INTERNAL, "cuda: weight arena overflow at %s", name);
    void *d = a->base + a->off;
    a->off += (size_t)round_up((int64_t)bytes, MV_ARENA_ALIGN);
    if (!v->f32 && !v->tensor)
        return mv_fail(e, MV_ERR_MODEL, "cuda: model tensor %s is missing", name);
    if (!v->f32 && v->n != (size_t)count)
        return mv_fail(e, MV_ERR_INTERNAL, "cuda: %s: %zu values in the checkpoint, %lld wanted", name, v->n,
                       (long long)count);
    const float *src = v->f32;
    float *tmp = NULL;
    if (!src && !(as_t == 1 && b->esz == 2 && v->tensor->dtype == MV_ST_BF16)) {
        if (!(tmp = (float *)malloc((size_t)count * sizeof(float))))
            return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory for %s", name);
        mv_weight_view_f32(v, tmp);
        src = tmp;
    }
    const void *hsrc = src ? (const void *)src : (const void *)v->tensor->data;
    if (src && as_t == 1 && b->esz == 2) {
        if (bytes > a->host_size) {
            free(tmp);
            return mv_fail(e, MV_ERR_INTERNAL, "cuda: weight staging overflow at %s", name);
        }
        uint16_t *h = (uint16_t *)a->host;
        mv_f32_to_bf16_par(src, h, (size_t)count);
        hsrc = h;
    } else if (as_t == 2 && b->esz == 2) {
        if (bytes > a->host_size) {
            free(tmp);
            return mv_fail(e, MV_ERR_INTERNAL, "cuda: weight staging overflow at %s", name);
        }
        float *h = (float *)a->host;
        for (int64_t i = 0; i < count; i++) {
            uint32_t u = (uint32_t)mv_f32_to_bf16(src[i]) << 16;
            memcpy(&h[i], &u, 4);
        }
        hsrc = h;
    }
    cudaError_t r = cudaMemcpy(d, hsrc, bytes, cudaMemcpyHostToDevice);
    free(tmp);
    if (r != cudaSuccess) return mv_cuda_check(r, e, name);
    *dst = d;
    return MV_OK;
}

static mv_status upload_weights(cuda_backend *b, mv_err *e)
{
    const mv_model *m = b->base.model;
    const mv_vision_config *c = &m->cfg;
    int64_t H = c->hidden, I = c->inter, L = c->out_hidden, P = c->patch_dim, mm = c->merge * c->merge;
    /* the arena holds every buffer of the size table, each rounded up to MV_ARENA_ALIGN (put) */
    size_t total = b->sz.weights_total;
    cuda_weights *w = (cuda_weights *)calloc(1, sizeof *w);
    if (!w) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    w->refs = 1;
    b->w = w; /* freed with the backend, whatever happens below */
    cudaError_t r = cudaMalloc(&w->arena, total);
    if (r != cudaSuccess)
        return mv_fail(e, r == cudaErrorMemoryAllocation ? MV_ERR_NOMEM : MV_ERR_DEVICE,
                       "cuda: cannot allocate %.1f MiB for the weights: %s", total / 1048576.0,
                       cudaGetErrorString(r));
    arena a = {(char *)w->arena, 0, total, malloc(b->sz.staging), b->sz.staging};
    if (!a.host) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory staging weights");
    w->blocks = (dblock *)calloc((size_t)c->depth, sizeof(dblock));
    mv_status st = w->blocks ? MV_OK : mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    mv_weight_view v;
#define PUT(field, n, ast, tb, dst, name)                                                          \
    if (st == MV_OK) {                                                                             \
        mv_model_weight(m, &(field), &v);                                                          \
        st = put(b, &a, &v, n, ast, b->sz.tb, (void **)(dst), name, e);                           \
    }
    PUT(m->patch_w, H * P, 1, patch_w, &w->patch_w, "patch_embed.proj.weight");
    const int xb = b->f32res ? 2 : 1; /* biases of the GEMMs writing x */
    PUT(m->patch_b, H, xb, patch_b, &w->patch_b, "patch_embed.proj.bias");
    PUT(m->pos_embed, (int64_t)c->num_pos * H, 0, pos_embed, &w->pos, "pos_embed.weight");
    for (int i = 0; st == MV_OK && i < c->depth; i++) {
        const mv_block *B = &m->blocks[i];
        dblock *d = &w->blocks[i];
        PUT(B->norm1_w, H, 0, norm, &d->n1w, "norm1.weight");
        PUT(B->norm1_b, H, 0, norm, &d->n1b, "norm1.bias");
        PUT(B->norm2_w, H, 0, norm, &d->n2w, "norm2.weight");
        PUT(B->norm2_b, H, 0, norm, &d->n2b, "norm2.bias");
        PUT(B->qkv_w, 3 * H * H, 1, qkv_w, &d->qkv_w, "attn.qkv.weight");
        PUT(B->qkv_b, 3 * H, 1, qkv_b, &d->qkv_b, "attn.qkv.bias");
        PUT(B->proj_w, H * H, 1, proj_w, &d->proj_w, "attn.proj.weight");
        PUT(B->proj_b, H, xb, proj_b, &d->proj_b, "attn.proj.bias");
        PUT(B->fc1_w, I * H, 1, fc1_w, &d->fc1_w, "mlp.linear_fc1.weight");
        PUT(B->fc1_b, I, 1, fc1_b, &d->fc1_b, "mlp.linear_fc1.bias");
        PUT(B->fc2_w, H * I, 1, fc2_w, &d->fc2_w, "mlp.linear_fc2.weight");
        PUT(B->fc2_b, H, xb, fc2_b, &d->fc2_b, "mlp.linear_fc2.bias");
    }
    PUT(m->mnorm_w, H, 0, mnorm, &w->mnw, "merger.norm.weight");
    PUT(m->mnorm_b, H, 0, mnorm, &w->mnb, "merger.norm.bias");
    PUT(m->mfc1_w, mm * H * mm * H, 1, m1_w, &w->m1w, "merger.linear_fc1.weight");
    PUT(m->mfc1_b, mm * H, 1, m1_b, &w->m1b, "merger.linear_fc1.bias");
    PUT(m->mfc2_w, L * mm * H, 1, m2_w, &w->m2w, "merger.linear_fc2.weight");
    PUT(m->mfc2_b, L, 1, m2_b, &w->m2b, "merger.linear_fc2.bias");
    if (st == MV_OK) {
        /* HF: inv_freq = 1 / theta^(arange(0, D/2, 2) / (D/2)), fp32 (as mv_rope_tables_cpu) */
        float inv[256];
        int Q = c->head_dim / 4, half = c->head_dim / 2;
        for (int j = 0; j < Q && j < 256; j++) {
            float ex = (float)(2 * j) / (float)half;
            inv[j] = 1.0f / (float)pow(c->rope_theta, (double)ex);
        }
        v = (mv_weight_view){inv, NULL, NULL, (size_t)Q};
        st = put(b, &a, &v, Q, 0, b->sz.inv_freq, (void **)&w->inv_freq, "rope inv_freq", e);
    }
#undef PUT
    free(a.host);
    return st;
}

/* ---- workspace -------------------------------------------------------------------------- */
static void free_workspace(cuda_backend *b)
{
    void **p[] = {(void **)&b->pix[0], (void **)&b->pix[1], (void **)&b->u8[0], (void **)&b->u8[1],
                  (void **)&b->pseg[0], (void **)&b->pseg[1], &b->x, &b->xn, &b->qkv, &b->att, &b->mlp,
                  (void **)&b->rope_cs,
                  (void **)&b->ri[0], (void **)&b->ri[1], (void **)&b->tiles[0], (void **)&b->tiles[1]};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        if (*p[i]) cudaFree(*p[i]);
        *p[i] = NULL;
    }
    free(b->h_ri);
    free(b->h_tiles);
    b->h_ri = NULL;
    b->h_tiles = NULL;
    b->cap = 0;
}

static cudaError_t alloc_workspace(cuda_backend *b, int64_t cap)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const mv_tower_sizes *z = &b->sz;
    /* >= the tiles of any chunk of cap rows (segments of >= merge^2 rows, BM >= MV_ATTN_BM_F32) */
    int64_t tiles = mv_plan_tiles_cap(cap, c->merge, MV_ATTN_BM_F32);
    cudaError_t r = cudaSuccess;
#define AL(ptr, bytes)                                                                             \
    if (r == cudaSuccess) r = cudaMalloc((void **)&(ptr), (size_t)(bytes))
    for (int i = 0; i < 2; i++) {
        AL(b->pix[i], cap * (int64_t)z->row_pix);
        AL(b->u8[i], cap * (int64_t)c->patch_dim);
        AL(b->pseg[i], (cap / (c->merge * c->merge) + 1) * (int64_t)sizeof(mv_patch_seg));
        AL(b->ri[i], cap * (int64_t)z->row_ri);
        AL(b->tiles[i], tiles * (int64_t)sizeof(mv_attn_tile));
    }
    AL(b->x, cap * (int64_t)z->row_x);
    AL(b->xn, cap * (int64_t)z->row_xn);
    AL(b->att, cap * (int64_t)z->row_att);
    AL(b->qkv, cap * (int64_t)z->row_qkv);
    AL(b->mlp, cap * (int64_t)z->row_mlp);
    AL(b->rope_cs, cap * (int64_t)z->row_rope);
#undef AL
    if (r == cudaSuccess) {
        b->h_ri = (mv_rowinfo *)malloc((size_t)cap * sizeof(mv_rowinfo));
        b->h_tiles = (mv_attn_tile *)malloc((size_t)tiles * sizeof(mv_attn_tile));
        if (!b->h_ri || !b->h_tiles) r = cudaErrorMemoryAllocation;
    }
    if (r != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free allocation error */
        free_workspace(b);
        return r;
    }
    b->cap = cap;
    b->tiles_cap = tiles;
    return cudaSuccess;
}

/* Makes the workspace hold `want` patches (at least `need`), halving on out-of-memory. The
 * workspace is allocated at the backend's size (cap_max) from the first forward on, or larger
 * where a segment needs it: the CLI's packed forwards vary in patch count (its first one is
 * often a single input), and each reallocation's cudaFree waits for the device, which drains
 * the forwards in flight. */
static mv_status ensure_workspace(cuda_backend *b, int64_t want, int64_t need, mv_err *e)
{
    if (b->cap >= want) return MV_OK;
    if (b->cap >= need && b->cap >= b->cap_max) return MV_OK;
    int64_t cap = b->cap_max > want ? b->cap_max : want;
    free_workspace(b);
    for (;;) {
        cap = round_up(cap, 64);
        cudaError_t r = alloc_workspace(b, cap);
        if (r == cudaSuccess) break;
        if (r != cudaErrorMemoryAllocation) return mv_cuda_check(r, e, "workspace allocation");
        if (cap <= need) {
            size_t fr = 0, tot = 0;
            cudaMemGetInfo(&fr, &tot);
            return mv_fail(e, MV_ERR_NOMEM,
                           "cuda: out of GPU memory: a segment of %lld patches needs a %.1f GiB "
                           "workspace, %.1f GiB free",
                           (long long)need, (double)cap * b->sz.per_token / 1073741824.0,
                           fr / 1073741824.0);
        }
        cap = cap / 2 > need ? cap / 2 : need;
        b->cap_max = cap; /* remember: later forwards do not retry the larger size */
    }
    if (b->verbose)
        fprintf(stderr, "mvembed: cuda: device %d: workspace of %lld patch rows (%.2f GiB)\n", b->device,
                (long long)b->cap, (double)b->cap * b->sz.per_token / 1073741824.0);
    return MV_OK;
}

/* ---- one chunk ------------------------------------------------------------------------ */
typedef struct {
    int64_t r0, n;          /* patch rows [r0, r0 + n) of the packed batch */
    int seg0, nseg;         /* segments */
    int buf;                /* pixel / metadata buffer */
    int n_tiles;
    int dnn;                /* attention through cuDNN (else fa3 or the builtin kernel: b->fa3) */
    int resize;             /* req.src_size: u8[buf] is resized from the source frames first */
    mv_fa3_plan fa3;        /* fa3: the launch (plan_fa3) */
} chunk;

/* Stage dump of d[rows, cols]: T, or f32 when f32src (x with f32res). */
static mv_status dump_t(cuda_backend *b, mv_stage_fn fn, void *ud, const char *stage, const void *d,
                        int64_t rows, int64_t cols, float *scratch, int f32src, mv_err *e)
{
    if (!fn) return MV_OK;
    int64_t count = rows * cols;
    cudaError_t r = b->prec == MV_PREC_BF16 && !f32src
                        ? mv_cuda_to_f32<bf16>(scratch, (const bf16 *)d, count, b->st)
                        : mv_cuda_to_f32<float>(scratch, (const float *)d, count, b->st);
    CK(r, "dump conversion");
    float *h = (float *)malloc((size_t)count * sizeof(float));
    if (!h) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory dumping %s", stage);
    r = cudaMemcpyAsync(h, scratch, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost, b->st);
    if (r == cudaSuccess) r = cudaStreamSynchronize(b->st);
    mv_status st = r == cudaSuccess ? fn(ud, stage, h, rows, cols, e) : mv_cuda_check(r, e, "dump copy");
    free(h);
    return st;
}

template <typename T>
static mv_status act_fallback(cuda_backend *b, T *y, int act, int64_t count, mv_err *e)
{
    CK(mv_cuda_act<T>(y, act, count, b->st), "activation kernel");
    return MV_OK;
}

/* fc1 with the block activation: fused tanh GELU when cuBLASLt has it, else bias + kernel. */
template <typename T>
static mv_status fc1_act(cuda_backend *b, T *y, const T *x, const void *w, const void *bias, int64_t n,
                         int in, int out, mv_act act, mv_err *e)
{
    if (act == MV_ACT_GELU_TANH && b->fuse_gelu) {
        mv_status st = mv_gemm_run(b->gemm, y, x, w, bias, n, in, out, MV_EPI_GELU_BIAS, 0, e);
        if (st != MV_ERR_UNSUPPORTED) return st;
        b->fuse_gelu = 0;
    }
    ST(mv_gemm_run(b->gemm, y, x, w, bias, n, in, out, MV_EPI_BIAS, 0, e));
    return act_fallback<T>(b, y, (int)act, n * out, e);
}

/* The GEMMs writing the residual stream x[n, out] (patch embedding; proj and fc2 with accumulate):
 * x of T, or f32 x from bf16 operands with the f32 bias copy (f32res). */
template <typename T>
static mv_status gemm_x(cuda_backend *b, T *x, const void *a, const void *w, const void *bias,
                        int64_t n, int in, int out, int acc, mv_err *e)
{
    return mv_gemm_run(b->gemm, x, a, w, bias, n, in, out, MV_EPI_BIAS, acc, e);
}
static mv_status gemm_x(cuda_backend *b, float *x, const void *a, const void *w, const void *bias,
                        int64_t n, int in, int out, int acc, mv_err *e)
{
    if (b->f32res)
        return mv_gemm_run_f32y(b->gemm, x, a, w, (const float *)bias, n, in, out, MV_EPI_BIAS, acc,
                                e);
    return mv_gemm_run(b->gemm, x, a, w, bias, n, in, out, MV_EPI_BIAS, acc, e);
}

/* LayerNorm of x (TX) into xn (T). */
template <typename T>
static cudaError_t ln_x(T *y, const T *x, const float *w, const float *bias, int64_t n, int dim,
                        float eps, cudaStream_t st)
{
    return mv_cuda_layernorm<T>(y, x, w, bias, n, dim, eps, st);
}
static cudaError_t ln_x(bf16 *y, const float *x, const float *w, const float *bias, int64_t n,
                        int dim, float eps, cudaStream_t st)
{
    return mv_cuda_layernorm_f32_bf16(y, x, w, bias, n, dim, eps, st);
}

/* Enqueues the whole tower for one chunk on b->st; its pixels are in pix[ch->buf] (f32), or, with
 * host_pixels NULL (req.frames), its uint8 frames are in u8[ch->buf] with its segments in
 * pseg[ch->buf] and the patchify kernel writes pix[ch->buf] first; its
 * output goes to pix[ch->buf] as f32 [n / mm, L]. T: activations; TX: the residual stream x
 * (T, or f32 in bf16 mode with f32res). */
template <typename T, typename TX>
static mv_status run_chunk(cuda_backend *b, const chunk *ch, mv_stage_fn fn, void *ud,
                           const float *host_pixels, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const int H = c->hidden, I = c->inter, L = c->out_hidden, P = c->patch_dim, D = c->head_dim;
    const int mm = c->merge * c->merge;
    const int64_t n = ch->n, M = n / mm;
    cudaStream_t st = b->st;
    const cuda_weights *W = b->w;
    float *pix = b->pix[ch->buf];
    const int xf = sizeof(TX) == 4; /* x dumps read f32 */
    TX *x = (TX *)b->x;
    T *xn = (T *)b->xn, *qkv = (T *)b->qkv, *att = (T *)b->att, *mlp = (T *)b->mlp;
    const mv_rowinfo *ri = b->ri[ch->buf];
    const mv_attn_tile *tiles = b->tiles[ch->buf];

    if (!host_pixels) {
        if (ch->resize) CK(mv_cuda_resizer_run(b->rz, ch->buf, b->u8[ch->buf], st), "resize");
        CK(mv_cuda_patchify(pix, b->u8[ch->buf], b->pseg[ch->buf], ch->nseg, n, b->lut, c->patch, c->merge,
                            c->temporal, st),
           "patchify");
        /* the dump is the kernel's own output (f32, its own scratch: an in-place copy) */
        ST(dump_t(b, fn, ud, "pixel_values", pix, n, P, pix, 1, e));
    } else if (fn) {
        ST(fn(ud, "pixel_values", host_pixels, n, P, e));
    }
    /* pixels -> T (bf16: rounded at tower entry, as HF casts pixel_values) */
    const T *px;
    if (sizeof(T) == 2) {
        CK(mv_cuda_from_f32<T>(qkv, pix, n * P, st), "pixel conversion");
        px = qkv;
    } else {
        px = (const T *)pix;
    }
    ST(gemm_x(b, x, px, W->patch_w, W->patch_b, n, P, H, 0, e));
    ST(dump_t(b, fn, ud, "patch_embed", x, n, H, pix, xf, e));
    CK(mv_cuda_pos_embed_add<TX>(x, ri, W->pos, c->pos_side, H, n, st), "position embedding");
    CK(mv_cuda_rope_table(b->rope_cs, ri, W->inv_freq, n, D, st), "rope table");
    ST(dump_t(b, fn, ud, "embed", x, n, H, pix, xf, e));
    /* the attention this chunk runs, decided once: fa3's plan may want q pre-scaled, which the
     * rope kernel folds in (one rounding), so the scale and the launch must agree */
    const bool use_fa3 = !ch->dnn && sizeof(T) == 2 && b->fa3;
    const float qscale = use_fa3 ? ch->fa3.q_scale : 1.f;
    for (int l = 0; l < c->depth; l++) {
        const dblock *B = &W->blocks[l];
        CK(ln_x(xn, x, B->n1w, B->n1b, n, H, c->ln_eps, st), "layernorm");
        ST(mv_gemm_run(b->gemm, qkv, xn, B->qkv_w, B->qkv_b, n, H, 3 * H, MV_EPI_BIAS, 0, e));
        CK(mv_cuda_rope<T>(qkv, b->rope_cs, n, c->heads, D, qscale, st), "rope");
        if (ch->dnn)
            ST(mv_cudnn_attn_run(b->dnn, ch->buf, (bf16 *)att, (const bf16 *)qkv, e));
        else if (use_fa3)
            CK(mv_cuda_attention_fa3(&b->attn, &ch->fa3, b->fa3_part, b->fa3_part_bytes, (bf16 *)att,
                                     (const bf16 *)qkv, n, tiles, ch->n_tiles, c->heads, D, st),
               "fa3 attention");
        else if (sizeof(T) == 2)
            CK(mv_cuda_attention_bf16(&b->attn, (bf16 *)att, (const bf16 *)qkv, tiles, ch->n_tiles, c->heads, D, st),
               "attention");
        else
            CK(mv_cuda_attention_f32(&b->attn, (float *)att, (const float *)qkv, tiles, ch->n_tiles, c->heads, D,
                                     st),
               "attention");
        ST(gemm_x(b, x, att, B->proj_w, B->proj_b, n, H, H, 1, e));
        CK(ln_x(xn, x, B->n2w, B->n2b, n, H, c->ln_eps, st), "layernorm");
        ST(fc1_act<T>(b, mlp, xn, B->fc1_w, B->fc1_b, n, H, I, c->act, e));
        ST(gemm_x(b, x, mlp, B->fc2_w, B->fc2_b, n, I, H, 1, e));
        if (fn) {
            char name[32];
            snprintf(name, sizeof name, "block_%02d", l);
            ST(dump_t(b, fn, ud, name, x, n, H, pix, xf, e));
        }
    }
    /* merger: rows are in merge-block order, so [n, H] viewed as [n / mm, mm * H] is the 2x2 concat */
    CK(ln_x(xn, x, W->mnw, W->mnb, n, H, c->ln_eps, st), "merger layernorm");
    ST(dump_t(b, fn, ud, "merger_norm", xn, n, H, pix, 0, e));
    ST(mv_gemm_run(b->gemm, att, xn, W->m1w, W->m1b, M, mm * H, mm * H, MV_EPI_BIAS, 0, e));
    ST(dump_t(b, fn, ud, "merger_fc1", att, M, (int64_t)mm * H, pix, 0, e));
    CK(mv_cuda_act<T>(att, MV_ACT_GELU_ERF, M * mm * H, st), "merger GELU");
    ST(mv_gemm_run(b->gemm, mlp, att, W->m2w, W->m2b, M, mm * H, L, MV_EPI_BIAS, 0, e));
    CK(mv_cuda_to_f32<T>(pix, mlp, M * L, st), "output conversion");
    return MV_OK;
}

/* ---- forward -------------------------------------------------------------------------- */
/* Device buffers for pooling n_entries inputs with chunks of at most nseg segments. */
static mv_status pool_reserve(cuda_backend *b, int64_t n_entries, int64_t nseg, mv_err *e)
{
    const int64_t L = b->base.model->cfg.out_hidden;
    if (b->pool_cap < n_entries) {
        cudaFree(b->pool_acc);
        cudaFree(b->pool_rows);
        cudaFree(b->pool_out);
        b->pool_acc = NULL;
        b->pool_rows = NULL;
        b->pool_out = NULL;
        b->pool_cap = 0;
        CK(cudaMalloc((void **)&b->pool_acc, (size_t)(n_entries * L) * sizeof(double)), "pool buffers");
        CK(cudaMalloc((void **)&b->pool_rows, (size_t)n_entries * sizeof(int64_t)), "pool buffers");
        CK(cudaMalloc((void **)&b->pool_out, (size_t)(n_entries * L) * sizeof(float)), "pool buffers");
        b->pool_cap = n_entries;
    }
    if (b->pool_span_cap < nseg) {
        cudaFree(b->pool_spans);
        free(b->h_spans);
        b->pool_spans = NULL;
        b->h_spans = (mv_pool_span *)malloc((size_t)nseg * sizeof(mv_pool_span));
        b->pool_span_cap = 0;
        if (!b->h_spans) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory for %lld pool spans", (long long)nseg);
        CK(cudaMalloc((void **)&b->pool_spans, (size_t)nseg * sizeof(mv_pool_span)), "pool buffers");
        b->pool_span_cap = nseg;
    }
    return MV_OK;
}

/* The chunk's output rows (merged tokens, in b->pix[ch->buf]) added to their entries' sums on the
 * compute stream: one span per entry (an entry's segments are consecutive rows). */
static mv_status pool_chunk(cuda_backend *b, const chunk *ch, const mv_segment *segs, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const int64_t mm = c->merge * c->merge;
    int n = 0;
    for (int j = 0; j < ch->nseg; j++) {
        const mv_segment *sg = &segs[ch->seg0 + j];
        int64_t r0 = (sg->row0 - ch->r0) / mm, rows = sg->len / mm;
        if (n > 0 && b->h_spans[n - 1].entry == sg->entry) b->h_spans[n - 1].rows += rows;
        else b->h_spans[n++] = (mv_pool_span){r0, rows, sg->entry};
    }
    CK(cudaMemcpyAsync(b->pool_spans, b->h_spans, (size_t)n * sizeof(mv_pool_span), cudaMemcpyHostToDevice,
                       b->st),
       "pool spans upload");
    /* pageable source: the copy has been staged when cudaMemcpyAsync returns, h_spans is free */
    CK(mv_cuda_pool_add(b->pool_acc, b->pix[ch->buf], b->pool_spans, n, c->out_hidden, b->st), "pool");
    return MV_OK;
}

/* uint8 input: the plan's segments with their frames in the packed input, offsets absolute
 * (upload_u8 makes a chunk's relative). Segment g of an entry of n frames has frames
 * [g*T, min(g*T + T, n)), as mv_patchify groups them. NULL when out of memory. */
static mv_patch_seg *u8_segments(const mv_vision_config *c, const int32_t *n_frames, const mv_plan *plan)
{
    mv_patch_seg *ps = (mv_patch_seg *)malloc(sizeof(mv_patch_seg) * (size_t)plan->nseg);
    if (!ps) return NULL;
    int64_t src = 0;
    for (int s = 0, g = 0; s < plan->nseg; s++) {
        const mv_segment *sg = &plan->seg[s];
        g = s > 0 && plan->seg[s - 1].entry == sg->entry ? g + 1 : 0; /* temporal group in its entry */
        int nf = n_frames[sg->entry] - g * c->temporal;
        if (nf > c->temporal) nf = c->temporal;
        ps[s] = mv_patch_seg{src, sg->row0, nf, sg->h, sg->w, 0};
        src += nf * (int64_t)sg->len * c->patch * c->patch * 3;
    }
    return ps;
}

/* req.src_size: each segment's source frames (entry i's frames are src_size[2i] x src_size[2i+1])
 * and where its resized frames go (ps[s].src, absolute), for mv_cuda_resizer_upload. NULL when
 * out of memory. */
static mv_resize_seg *u8_src_segments(const mv_vision_config *c, const int32_t *n_frames, const int32_t *src_size,
                                      const mv_plan *plan, const mv_patch_seg *ps)
{
    mv_resize_seg *rs = (mv_resize_seg *)malloc(sizeof(mv_resize_seg) * (size_t)plan->nseg);
    if (!rs) return NULL;
    int64_t src = 0;
    for (int s = 0, i = -1, g = 0; s < plan->nseg; s++) {
        const mv_segment *sg = &plan->seg[s];
        g = s > 0 && plan->seg[s - 1].entry == sg->entry ? g + 1 : 0;
        for (; i < sg->entry; i++) /* entries before this one (also any without patches) */
            if (i >= 0) src += (int64_t)n_frames[i] * src_size[2 * i] * src_size[2 * i + 1] * 3;
        const int64_t fsz = (int64_t)src_size[2 * sg->entry] * src_size[2 * sg->entry + 1] * 3;
        rs[s] = mv_resize_seg{src + (int64_t)g * c->temporal * fsz, ps[s].src, ps[s].nf, src_size[2 * sg->entry],
                              src_size[2 * sg->entry + 1], sg->w * c->patch, sg->h * c->patch, sg->entry};
    }
    return rs;
}

/* Enqueues on b->io the upload of a chunk's uint8 frames (one contiguous byte range: its segments
 * are consecutive) into u8[ch->buf] (frames NULL: the resizer makes them on the device) and of its
 * segment table, made chunk-relative in place, into pseg[ch->buf]. */
static cudaError_t upload_u8(cuda_backend *b, const chunk *ch, const uint8_t *frames, mv_patch_seg *ps)
{
    const mv_vision_config *c = &b->base.model->cfg;
    mv_patch_seg *s0 = ps + ch->seg0, *sl = ps + ch->seg0 + ch->nseg - 1;
    int64_t base = s0->src;
    int64_t end = sl->src + (int64_t)sl->nf * sl->gh * sl->gw * c->patch * c->patch * 3;
    if (end - base > b->cap * (int64_t)c->patch_dim || ch->nseg > b->cap / (c->merge * c->merge) + 1)
        return cudaErrorInvalidValue; /* cannot happen: at most patch_dim bytes a row, mm rows a segment */
    for (int j = 0; j < ch->nseg; j++) {
        s0[j].src -= base;
        s0[j].row0 -= ch->r0;
    }
    cudaError_t r = frames ? cudaMemcpyAsync(b->u8[ch->buf], frames + base, (size_t)(end - base),
                                             cudaMemcpyHostToDevice, b->io)
                           : cudaSuccess;
    if (r == cudaSuccess)
        r = cudaMemcpyAsync(b->pseg[ch->buf], s0, sizeof(mv_patch_seg) * (size_t)ch->nseg,
                            cudaMemcpyHostToDevice, b->io);
    return r;
}

/* ch->fa3 for the chunk's host tile list (its configuration set), before its upload: the tail
 * kernel's tiles moved last (mv_cuda_fa3_tails), the split the table's rule gives over the other
 * tiles, its scratch grown on demand (cudaFree waits for the device; out of memory: no split) */
static void plan_fa3(cuda_backend *b, chunk *ch)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const mv_fa3_cfg cfg = ch->fa3.cfg;
    const int tail = mv_cuda_fa3_tails(&b->fa3dev, &cfg, b->h_tiles, ch->n_tiles, c->heads);
    int split = mv_cuda_fa3_split(&b->fa3dev, &cfg, c->head_dim, b->h_tiles, ch->n_tiles - tail, c->heads);
    mv_cuda_fa3_plan(&b->fa3dev, &cfg, c->head_dim, ch->n_tiles, c->heads, split, tail, &ch->fa3);
    if (ch->fa3.part_bytes <= b->fa3_part_bytes) return;
    if (b->fa3_part) cudaFree(b->fa3_part);
    b->fa3_part = NULL;
    b->fa3_part_bytes = 0;
    if (cudaMalloc((void **)&b->fa3_part, ch->fa3.part_bytes) == cudaSuccess) {
        b->fa3_part_bytes = ch->fa3.part_bytes;
        return;
    }
    (void)cudaGetLastError(); /* not sticky: the attention runs without splitting */
    b->fa3_part = NULL;
    mv_cuda_fa3_plan(&b->fa3dev, &cfg, c->head_dim, ch->n_tiles, c->heads, 0, tail, &ch->fa3);
}

/* Waits, asleep, until the work queued so far on stream s is done. */
static cudaError_t block_on(cuda_backend *b, cudaStream_t s)
{
    cudaError_t r = cudaEventRecord(b->ev_wait, s);
    return r == cudaSuccess ? cudaEventSynchronize(b->ev_wait) : r;
}

/* A forward's checks and segments: the frames against the grid (mv_frames_check), the segments
 * (src/tower/plan.c: one per temporal group of each entry; h, w fit mv_rowinfo) and, when there
 * are patches, residency: this thread works on the backend's device, and buffers of another GPU
 * are refused. The caller frees *plan (zeroed before the call), also after an error. */
static mv_status forward_check(cuda_backend *b, const mv_forward_req *req, mv_plan *plan, mv_err *e)
{
    const mv_model *m = b->base.model;
    if (req->frames) {
        int64_t NF;
        ST(mv_frames_check(m, req->n_frames, req->grid, req->n_entries, &NF, NULL, e));
    }
    if (req->src_size && !req->frames) return mv_fail(e, MV_ERR_USAGE, "cuda: source sizes without frames");
    for (int i = 0; req->src_size && i < req->n_entries; i++)
        if (req->src_size[2 * i] < 1 || req->src_size[2 * i + 1] < 1)
            return mv_fail(e, MV_ERR_USAGE, "cuda: entry %d: source frames of %dx%d", i, req->src_size[2 * i],
                           req->src_size[2 * i + 1]);
    mv_status st = mv_plan_segments(plan, &m->cfg, req->grid, req->n_entries, MV_ROWINFO_MAX_SIDE, e);
    if (st != MV_OK) return st == MV_ERR_LIMIT ? mv_fail_prefix(e, st, "cuda") : st;
    if (plan->n_patches == 0) return MV_OK;
    CK(cudaSetDevice(b->device), "cudaSetDevice");
    ST(req->frames ? mv_cuda_check_resident(req->frames, b->device, "forward frames", e)
                   : mv_cuda_check_resident(req->pixels, b->device, "forward pixels", e));
    return mv_cuda_check_resident(req->out, b->device, "forward output", e);
}

/* --pool mean: the device sums for req's entries over chunks of at most nseg segments, zeroed,
 * with each entry's token count (on b->st). */
static mv_status pool_begin(cuda_backend *b, const mv_forward_req *req, int nseg, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const int n_entries = req->n_entries, L = c->out_hidden, mm = c->merge * c->merge;
    const int32_t *grid = req->grid;
    ST(pool_reserve(b, n_entries, nseg, e));
    int64_t *rows = (int64_t *)malloc((size_t)n_entries * sizeof(int64_t));
    if (!rows) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    for (int i = 0; i < n_entries; i++)
        rows[i] = (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2] / mm;
    cudaError_t r = cudaMemcpyAsync(b->pool_rows, rows, (size_t)n_entries * sizeof(int64_t), cudaMemcpyHostToDevice,
                                    b->st);
    if (r == cudaSuccess) r = cudaMemsetAsync(b->pool_acc, 0, (size_t)n_entries * L * sizeof(double), b->st);
    free(rows);
    return r == cudaSuccess ? MV_OK : mv_cuda_check(r, e, "pool setup");
}

/* --pool mean: the entries' means from the sums, downloaded into req->out; the forward's device
 * work is then all queued (req->queued). */
static mv_status pool_end(cuda_backend *b, const mv_forward_req *req, mv_err *e)
{
    const int n_entries = req->n_entries, L = b->base.model->cfg.out_hidden;
    cudaError_t r = mv_cuda_pool_finish(b->pool_out, b->pool_acc, b->pool_rows, n_entries, L, b->st);
    if (r == cudaSuccess)
        r = cudaMemcpyAsync(req->out, b->pool_out, (size_t)n_entries * L * sizeof(float), cudaMemcpyDeviceToHost,
                            b->st);
    if (r == cudaSuccess && req->queued) req->queued(req->queued_arg);
    if (r == cudaSuccess) r = block_on(b, b->st);
    return r == cudaSuccess ? MV_OK : mv_cuda_check(r, e, "pooled output");
}

/* The workspace for the forward (its largest segment at least, its patches up to the backend's
 * size), the chunk plan for it (the rule: mv_plan_chunks in include/mv_plan.h; stage dumps need
 * the batch in one chunk), the host staging of cu_seqlens, and the pool sums (req->mean). */
static mv_status forward_workspace(cuda_backend *b, const mv_forward_req *req, mv_plan *plan, mv_err *e)
{
    const int64_t N = plan->n_patches, maxlen = plan->max_len;
    int64_t want = N < b->cap_max ? N : b->cap_max;
    if (want < maxlen) want = maxlen;
    ST(ensure_workspace(b, want, maxlen, e));
    if (req->dump && N > b->cap)
        return mv_fail(e, MV_ERR_LIMIT,
                       "cuda: stage dumps need the whole batch in one forward: %lld patches > "
                       "workspace of %lld (raise --batch-tokens)",
                       (long long)N, (long long)b->cap);
    ST(mv_plan_chunks(plan, b->cap, req->dump != NULL, e));
    if (b->h_cu_cap < plan->nseg + 1) {
        free(b->h_cu);
        b->h_cu = (int32_t *)malloc(sizeof(int32_t) * (size_t)(plan->nseg + 1));
        b->h_cu_cap = b->h_cu ? plan->nseg + 1 : 0;
        if (!b->h_cu) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    }
    return req->mean ? pool_begin(b, req, plan->nseg, e) : MV_OK;
}

/* Chunk k of the plan and its metadata, staged on the host: rowinfo per patch, cu_seqlens,
 * attention tiles (fa3: of its plan's rows), the fa3 launch or the cuDNN plan. */
static mv_status chunk_meta(cuda_backend *b, const mv_plan *plan, int k, chunk *pch, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    chunk &ch = *pch;
    const mv_chunk *pc = &plan->chunk[k];
    ch.r0 = pc->r0;
    ch.n = pc->n;
    ch.seg0 = pc->seg0;
    ch.nseg = pc->nseg;
    mv_status st = mv_plan_rowinfo(plan, ch.seg0, ch.nseg, c->merge, b->h_ri, e);
    if (st == MV_OK) st = mv_plan_cu_seqlens(plan, ch.seg0, ch.nseg, b->h_cu, e);
    if (st == MV_OK && b->fa3 && mv_cuda_fa3_config(&b->fa3dev, c->head_dim, b->h_cu, ch.nseg, &ch.fa3.cfg))
        st = mv_fail(e, MV_ERR_INTERNAL, "fa3 attention: no configuration for head dim %d", c->head_dim);
    int bm = b->prec != MV_PREC_BF16 ? MV_ATTN_BM_F32
             : b->fa3                ? mv_cuda_fa3_bm(&ch.fa3.cfg)
                                     : MV_ATTN_BM_BF16;
    if (st == MV_OK)
        st = mv_plan_tiles(b->h_cu, ch.nseg, bm, b->h_tiles, b->tiles_cap, &ch.n_tiles, e);
    if (st != MV_OK) return mv_fail_prefix(e, st, "cuda");
    if (b->fa3) plan_fa3(b, &ch);
    ch.dnn = 0;
    if (b->dnn) {
        mv_err pe;
        mv_status ps = mv_cudnn_attn_prepare(b->dnn, ch.buf, b->h_cu, ch.nseg, b->io, &pe);
        ch.dnn = ps == MV_OK;
        if (ps != MV_OK && (ps != MV_ERR_UNSUPPORTED || b->attn_impl == MV_ATTN_CUDNN)) {
            memcpy(e, &pe, sizeof pe);
            return ps;
        }
        if (ps != MV_OK && b->verbose)
            fprintf(stderr, "mvembed: cuda: device %d: this chunk runs the builtin attention: %s\n", b->device,
                    pe.msg);
    }
    return MV_OK;
}

/* Enqueues on b->io the upload of chunk ch's input (uint8 frames, 8x fewer bytes than
 * pixel_values, which the kernel patchifies; or f32 rows) and metadata; the compute stream waits
 * for it. first: the forward's first chunk, whose start is the forward's first kernel (ev_f0). */
static mv_status chunk_upload(cuda_backend *b, const mv_forward_req *req, const chunk &ch, mv_patch_seg *psegs,
                              const mv_resize_seg *rsegs, int first, mv_err *e)
{
    const int P = b->base.model->cfg.patch_dim;
    if (rsegs) ST(mv_cuda_resizer_upload(b->rz, ch.buf, req->frames, rsegs + ch.seg0, ch.nseg, b->io, e));
    cudaError_t r = req->frames ? upload_u8(b, &ch, rsegs ? NULL : req->frames, psegs)
                                : cudaMemcpyAsync(b->pix[ch.buf], req->pixels + ch.r0 * P,
                                                  (size_t)(ch.n * P) * sizeof(float), cudaMemcpyHostToDevice, b->io);
    if (r == cudaSuccess)
        r = cudaMemcpyAsync(b->ri[ch.buf], b->h_ri, (size_t)ch.n * sizeof(mv_rowinfo), cudaMemcpyHostToDevice,
                            b->io);
    if (r == cudaSuccess)
        r = cudaMemcpyAsync(b->tiles[ch.buf], b->h_tiles, (size_t)ch.n_tiles * sizeof(mv_attn_tile),
                            cudaMemcpyHostToDevice, b->io);
    if (r == cudaSuccess) r = cudaEventRecord(b->ev_up[ch.buf], b->io);
    if (r == cudaSuccess) r = cudaStreamWaitEvent(b->st, b->ev_up[ch.buf], 0);
    if (r == cudaSuccess && first) r = cudaEventRecord(b->ev_f0, b->st); /* first kernel */
    return r == cudaSuccess ? MV_OK : mv_cuda_check(r, e, "upload");
}

/* Enqueues the tower on chunk ch (then its rows' pool sums with req->mean) on b->st, and the
 * events of its end (ev_done) and of the forward's last kernel so far (ev_f1). */
static mv_status chunk_compute(cuda_backend *b, const mv_forward_req *req, const mv_plan *plan, const chunk &ch,
                               mv_err *e)
{
    const int P = b->base.model->cfg.patch_dim;
    mv_stage_fn fn = req->dump;
    void *ud = req->dump_ud;
    const float *hp = req->frames ? NULL : req->pixels + ch.r0 * P;
    mv_status st = b->prec != MV_PREC_BF16 ? run_chunk<float, float>(b, &ch, fn, ud, hp, e)
                   : b->f32res              ? run_chunk<bf16, float>(b, &ch, fn, ud, hp, e)
                                            : run_chunk<bf16, bf16>(b, &ch, fn, ud, hp, e);
    if (st == MV_OK && req->mean) st = pool_chunk(b, &ch, plan->seg, e);
    if (st != MV_OK) return st;
    cudaError_t r = cudaEventRecord(b->ev_done[ch.buf], b->st);
    if (r == cudaSuccess) r = cudaEventRecord(b->ev_f1, b->st); /* the last one wins */
    return r == cudaSuccess ? MV_OK : mv_cuda_check(r, e, "event");
}

/* Once chunk ch is computed: its output rows downloaded into req->out on b->io (not with
 * req->mean: the chunk's sums stay on the device), waited for. */
static mv_status chunk_download(cuda_backend *b, const mv_forward_req *req, const chunk &ch, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    const int L = c->out_hidden, mm = c->merge * c->merge;
    const int64_t M = ch.n / mm;
    cudaError_t r = cudaStreamWaitEvent(b->io, b->ev_done[ch.buf], 0);
    if (r == cudaSuccess && !req->mean)
        r = cudaMemcpyAsync(req->out + (ch.r0 / mm) * L, b->pix[ch.buf], (size_t)(M * L) * sizeof(float),
                            cudaMemcpyDeviceToHost, b->io);
    if (r == cudaSuccess) r = block_on(b, b->io);
    return r == cudaSuccess ? MV_OK : mv_cuda_check(r, e, "forward");
}

/* The plan's chunks, pipelined: upload k (io stream) | compute k (main stream) | download k-1
 * (io). Once the last chunk's kernels are queued, so is the forward's device work (req->queued;
 * with req->mean, after pool_end). */
static mv_status run_chunks(cuda_backend *b, const mv_forward_req *req, const mv_plan *plan, mv_patch_seg *psegs,
                            const mv_resize_seg *rsegs, mv_err *e)
{
    chunk prev = {};
    int have_prev = 0;
    mv_status st = MV_OK;
    for (int k = 0; st == MV_OK && (k < plan->nchunk || have_prev); k++) {
        chunk ch = {};
        ch.buf = k & 1;
        const int have_cur = k < plan->nchunk;
        if (have_cur) {
            st = chunk_meta(b, plan, k, &ch, e);
            ch.resize = rsegs != NULL;
            if (st == MV_OK) st = chunk_upload(b, req, ch, psegs, rsegs, k == 0, e);
            if (st == MV_OK) st = chunk_compute(b, req, plan, ch, e);
            if (st != MV_OK) break;
            if (k == plan->nchunk - 1 && !req->mean && req->queued) req->queued(req->queued_arg);
        }
        if (have_prev && (st = chunk_download(b, req, prev, e)) != MV_OK) break;
        prev = ch;
        have_prev = have_cur;
    }
    return st;
}

/* info's interval: when the device ran this forward's kernels (ev_f0 .. ev_f1), on the host's
 * clock (-v only: an interval the events cannot give is left out, never the forward's results). */
static mv_status forward_times(cuda_backend *b, mv_forward_info *info, mv_err *e)
{
    CK(cudaEventSynchronize(b->ev_f1), "forward");
    float ms0 = 0, ms1 = 0;
    cudaError_t rt = cudaEventElapsedTime(&ms0, b->ev_ref, b->ev_f0);
    if (rt == cudaSuccess) rt = cudaEventElapsedTime(&ms1, b->ev_ref, b->ev_f1);
    if (rt == cudaSuccess) {
        info->gpu_t0 = b->ref_host + ms0 * 1e-3;
        info->gpu_t1 = b->ref_host + ms1 * 1e-3;
    } else {
        cudaGetLastError(); /* not sticky (an event without a timing record): clear it */
    }
    return MV_OK;
}

/* The forward req (out: [N / mm, L] tokens or, with req->mean, [n_entries, L] means) from f32
 * pixel_values or uint8 frames: checks and plan, workspace, the pipelined chunks, the pooled
 * means, the timing, the output stage's dump. */
static mv_status forward_impl(cuda_backend *b, const mv_forward_req *req, mv_forward_info *info, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    mv_plan plan = {};
    mv_status st = forward_check(b, req, &plan, e);
    if (st != MV_OK || plan.n_patches == 0) {
        mv_plan_free(&plan);
        return st;
    }
    const int64_t N = plan.n_patches;
    mv_patch_seg *psegs = NULL;
    st = forward_workspace(b, req, &plan, e);
    mv_resize_seg *rsegs = NULL;
    if (st == MV_OK && req->frames && !(psegs = u8_segments(c, req->n_frames, &plan)))
        st = mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory for %d segments", plan.nseg);
    if (st == MV_OK && req->src_size && !(rsegs = u8_src_segments(c, req->n_frames, req->src_size, &plan, psegs)))
        st = mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory for %d segments", plan.nseg);
    if (st != MV_OK) {
        mv_plan_free(&plan);
        free(psegs);
        return st;
    }
    st = run_chunks(b, req, &plan, psegs, rsegs, e);
    const int timed = plan.nchunk > 0; /* ev_f0 and ev_f1 were recorded by this forward */
    mv_plan_free(&plan);
    free(psegs);
    free(rsegs);
    if (st == MV_OK && req->mean) st = pool_end(b, req, e);
    if (st != MV_OK) {
        cudaStreamSynchronize(b->st);
        cudaStreamSynchronize(b->io);
        return st;
    }
    if (timed) ST(forward_times(b, info, e));
    if (req->dump) /* the output stage, already in host memory */
        ST(req->dump(req->dump_ud, "output", req->out, N / (c->merge * c->merge), c->out_hidden, e));
    return MV_OK;
}

/* mv_backend.forward: pixel_values or frames, tokens or (req->mean, no stage dumps) means. */
static mv_status cuda_forward(mv_backend *be, const mv_forward_req *req, mv_forward_info *info, mv_err *e)
{
    mv_forward_info none;
    if (!info) info = &none;
    *info = mv_forward_info{0, 0};
    if (!req->pixels == !req->frames) return mv_fail(e, MV_ERR_USAGE, "cuda: a forward takes pixel values or frames");
    if (req->mean && req->dump) return mv_fail(e, MV_ERR_USAGE, "cuda: no stage dumps with per-entry means");
    return forward_impl((cuda_backend *)be, req, info, e);
}

static void cuda_destroy(mv_backend *be)
{
    if (!be) return;
    cuda_backend *b = (cuda_backend *)be;
    cudaSetDevice(b->device);
    if (b->st) cudaStreamSynchronize(b->st);
    if (b->io) cudaStreamSynchronize(b->io);
    free_workspace(b);
    mv_cudnn_attn_destroy(b->dnn);
    if (b->fa3_part) cudaFree(b->fa3_part);
    mv_gemm_destroy(b->gemm);
    if (b->w && --b->w->refs == 0) {
        if (b->w->arena) cudaFree(b->w->arena);
        free(b->w->blocks);
        free(b->w);
    }
    if (b->lut) cudaFree(b->lut);
    mv_cuda_resizer_free(b->rz);
    for (int i = 0; i < 2; i++) {
        if (b->ev_up[i]) cudaEventDestroy(b->ev_up[i]);
        if (b->ev_done[i]) cudaEventDestroy(b->ev_done[i]);
    }
    if (b->ev_ref) cudaEventDestroy(b->ev_ref);
    if (b->ev_f0) cudaEventDestroy(b->ev_f0);
    if (b->ev_f1) cudaEventDestroy(b->ev_f1);
    if (b->ev_wait) cudaEventDestroy(b->ev_wait);
    if (b->st) cudaStreamDestroy(b->st);
    if (b->io) cudaStreamDestroy(b->io);
    free(b->h_cu);
    cudaFree(b->pool_acc);
    cudaFree(b->pool_rows);
    cudaFree(b->pool_out);
    cudaFree(b->pool_spans);
    free(b->h_spans);
    free(b);
}

static void *cuda_host_alloc(mv_backend *be, size_t bytes)
{
    return mv_cuda_host_pinned_alloc(((cuda_backend *)be)->device, bytes);
}

static void cuda_host_free(mv_backend *be, void *p)
{
    (void)be;
    mv_cuda_host_pinned_free(p);
}

/* --attention: cuDNN's fused attention (bf16) when asked or, in auto mode, when it loads and
 * takes the head dim; the fa3 kernel when asked; else the builtin kernel. Auto mode runs fa3
 * wherever mv_cuda_fa3_check takes the device and head dim (bf16; the kernel table's head dims
 * on compute capability 9.0), without loading cuDNN (why: bench/NOTES.md, "Attention on the GPU");
 * elsewhere cuDNN when it loads and runs the head dim, else the
 * builtin kernel. Auto mode builds and runs the smallest cuDNN plan here (one 2-row segment), so
 * that a graph no cuDNN engine takes falls back at creation, never in the middle of a run. With
 * -v (opts.verbose) says which implementation runs, and why. */
static mv_status choose_attention(cuda_backend *b, const mv_backend_opts *o, mv_err *e)
{
    const mv_vision_config *c = &b->base.model->cfg;
    b->attn_impl = o ? o->attention : MV_ATTN_AUTO;
    b->fa3 = 0;
    const char *why = NULL;
    mv_err de, fe;
    de.msg[0] = 0;
    cudaError_t r = mv_cuda_fa3_device(b->device, &b->fa3dev);
    if (r != cudaSuccess) return mv_cuda_check(r, e, "device attributes");
    const int fa3_ok = b->prec == MV_PREC_BF16 && mv_cuda_fa3_check(&b->fa3dev, c->head_dim, &fe) == MV_OK;
    if (b->attn_impl == MV_ATTN_AUTO && fa3_ok) { /* mv_cuda_fa3_check: head dims 64 and 72 */
        b->fa3 = 1;
        if (b->verbose)
            fprintf(stderr, "mvembed: cuda: device %d: attention: fa3 kernel (head dim %d: faster than cudnn)\n",
                    b->device, c->head_dim);
        return MV_OK;
    }
    if (b->attn_impl == MV_ATTN_BUILTIN) {
        why = "--attention builtin";
    } else if (b->attn_impl == MV_ATTN_FA3) { /* tiles of the plan's rows (chunk_meta) */
        if (b->prec != MV_PREC_BF16) return mv_fail(e, MV_ERR_USAGE, "cuda: --attention fa3 needs --precision bf16");
        mv_status fs = mv_cuda_fa3_check(&b->fa3dev, c->head_dim, e);
        if (fs != MV_OK) return fs;
        b->fa3 = 1;
        if (b->verbose)
            fprintf(stderr, "mvembed: cuda: device %d: attention: fa3 kernel (sm_90a: TMA, wgmma)\n", b->device);
        return MV_OK;
    } else if (b->prec != MV_PREC_BF16) {
        if (b->attn_impl == MV_ATTN_CUDNN)
            return mv_fail(e, MV_ERR_USAGE, "cuda: --attention cudnn needs --precision bf16");
        why = "f32/tf32 precision";
    } else if (mv_cudnn_attn_create(&b->dnn, b->device, c->heads, c->head_dim, b->st, o ? o->cudnn_lib : NULL,
                                    o && o->cudnn_graph == MV_CUDNN_GRAPH_RAGGED, &de) != MV_OK) {
        if (b->attn_impl == MV_ATTN_CUDNN) return mv_fail(e, MV_ERR_UNSUPPORTED, "cuda: --attention cudnn: %s", de.msg);
        why = de.msg;
    } else if (b->attn_impl == MV_ATTN_AUTO) {
        /* probe: build the smallest plan now (qkv/att workspace not needed: a tiny private one) */
        int32_t cu[2] = {0, 2};
        bf16 *tmp = NULL;
        int64_t H = c->hidden;
        mv_status ps = mv_cudnn_attn_prepare(b->dnn, 0, cu, 1, b->st, &de);
        if (ps == MV_OK) {
            r = cudaMalloc((void **)&tmp, (size_t)(2 * 4 * H) * sizeof(bf16));
            if (r == cudaSuccess) r = cudaMemsetAsync(tmp, 0, (size_t)(2 * 4 * H) * sizeof(bf16), b->st);
            if (r != cudaSuccess) ps = mv_cuda_check(r, &de, "cuDNN probe buffer");
        }
        if (ps == MV_OK) ps = mv_cudnn_attn_run(b->dnn, 0, tmp + 6 * H, tmp, &de);
        if (ps == MV_OK) {
            r = cudaStreamSynchronize(b->st);
            if (r != cudaSuccess) ps = mv_cuda_check(r, &de, "cuDNN probe");
        }
        if (tmp) cudaFree(tmp);
        if (ps != MV_OK) {
            if (ps != MV_ERR_UNSUPPORTED) { /* a device error is sticky: report, do not hide */
                memcpy(e, &de, sizeof de);
                return ps;
            }
            mv_cudnn_attn_destroy(b->dnn);
            b->dnn = NULL;
            why = de.msg;
        }
    }
    if (b->verbose) {
        if (b->dnn)
            fprintf(stderr, "mvembed: cuda: device %d: attention: cudnn: %s\n", b->device,
                    mv_cudnn_attn_describe(b->dnn));
        else
            fprintf(stderr, "mvembed: cuda: device %d: attention: builtin kernel (%s)\n", b->device, why);
    }
    return MV_OK;
}

/* b->settings: what every setting resolved to on this device (mv_backend.h's list), at creation */
static void make_settings(cuda_backend *b, const cudaDeviceProp *prop, const mv_backend_opts *o)
{
    char gpu[64], attn[32], table[16]; /* gpu: the name, cut at 63 characters */
    snprintf(gpu, sizeof gpu, "%.63s", prop->name);
    for (char *p = gpu; *p; p++)
        if (*p == ' ' || *p == '=') *p = '_';
    const size_t dv = b->dnn ? mv_cudnn_attn_version(b->dnn) : 0;
    if (b->fa3) snprintf(attn, sizeof attn, "fa3");
    else if (b->dnn) snprintf(attn, sizeof attn, "cudnn-%zu.%zu.%zu", dv / 10000, dv / 100 % 100, dv % 100);
    else snprintf(attn, sizeof attn, "builtin");
    if (b->fa3) snprintf(table, sizeof table, "%d", MV_FA3_TABLE_VERSION);
    else snprintf(table, sizeof table, "-");
    const int bf = b->prec == MV_PREC_BF16;
    snprintf(b->settings, sizeof b->settings,
             "backend=cuda gpu=%s sm=%d%d sms=%d cublaslt=%zu precision=%s attention=%s fa3_table=%s residual=%s "
             "cudnn_graph=%s gelu=%s",
             gpu, prop->major, prop->minor, prop->multiProcessorCount, mv_gemm_lib_version(),
             bf ? "bf16" : b->prec == MV_PREC_TF32 ? "tf32" : "f32", attn, table,
             !bf ? "-" : b->f32res ? "f32" : "bf16",
             !b->dnn ? "-" : o && o->cudnn_graph == MV_CUDNN_GRAPH_RAGGED ? "ragged" : "auto",
             b->fuse_gelu ? "epilogue" : "kernel");
}

extern "C" const char *mv_backend_cuda_settings(const mv_backend *be) { return ((const cuda_backend *)be)->settings; }

/* ---- public entry points -------------------------------------------------------------- */
extern "C" void mv_cuda_prewarm(int device)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && device >= 0 && device < n && cudaSetDevice(device) == cudaSuccess)
        cudaFree(0); /* makes the device's primary context */
    cudaGetLastError(); /* failures are the backend's to report, at its creation */
}

extern "C" int mv_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int mv_cuda_available(void) { return mv_cuda_device_count() > 0; }

extern "C" mv_status mv_backend_cuda_create(const mv_model *m, const mv_backend_opts *o,
                                            mv_backend **out, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    int dev = o ? o->device : 0;
    int ndev = 0;
    cudaError_t r = cudaGetDeviceCount(&ndev);
    if (r != cudaSuccess || ndev == 0) {
        cudaGetLastError();
        return mv_fail(e, MV_ERR_UNSUPPORTED, "cuda: no usable GPU (%s)",
                       r != cudaSuccess ? cudaGetErrorString(r) : "no devices");
    }
    if (dev < 0 || dev >= ndev)
        return mv_fail(e, MV_ERR_USAGE, "cuda: device %d does not exist (%d found)", dev, ndev);
    if (!mv_cuda_attn_supported(c->head_dim) || c->head_dim % 8 || c->hidden % 8)
        return mv_fail(e, MV_ERR_UNSUPPORTED,
                       "cuda: head_dim %d / hidden %d not supported (head_dim 32/64/72/80/96/128)",
                       c->head_dim, c->hidden);
    if (c->heads > 65535 || c->pos_side < 1)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "cuda: model geometry not supported");
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    mv_precision prec = o ? o->precision : MV_PREC_BF16;
    if (prec == MV_PREC_BF16 && prop.major < 8)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "cuda: %s (sm_%d%d) has no bf16 tensor cores", prop.name,
                       prop.major, prop.minor);
    CK(cudaSetDevice(dev), "cudaSetDevice");

    cuda_backend *b = (cuda_backend *)calloc(1, sizeof *b);
    if (!b) return mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    b->base.name = "cuda";
    b->base.forward = cuda_forward;
    b->base.pools_mean = 1;
    b->base.out_bf16 = prec == MV_PREC_BF16; /* T = bf16: the output conversion widens bf16 values */
    b->base.resizes = 1;
    b->base.own_weights = 1; /* on the device (upload_weights or shared); only cfg and pp are read later */
    b->base.destroy = cuda_destroy;
    b->base.host_alloc = cuda_host_alloc;
    b->base.host_free = cuda_host_free;
    b->base.model = m;
    b->base.impl = b;
    b->device = dev;
    b->verbose = o ? o->verbose : 0;
    mv_cuda_attn_state_init(&b->attn, dev);
    b->prec = prec;
    b->esz = prec == MV_PREC_BF16 ? 2 : 4;
    b->f32res = prec == MV_PREC_BF16 && !(o && o->residual == MV_RESIDUAL_BF16);
    b->xsz = b->f32res ? 4 : b->esz;
    /* cuBLASLt's GELU epilogue is a fast tanh approximation (~1e-6 relative): fine under bf16
     * rounding, not for f32 parity work, which uses the accurate kernel */
    b->fuse_gelu = prec == MV_PREC_BF16;
#ifdef MV_VARIANTS
    if (mv_variants.no_gelu_fuse) b->fuse_gelu = 0; /* the harness's --no-gelu-fuse */
#endif
    mv_status st = mv_tower_sizes_compute(c, prec, b->f32res, &b->sz, e);
    if (st == MV_OK) {
        r = cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking);
        if (r == cudaSuccess) r = cudaStreamCreateWithFlags(&b->io, cudaStreamNonBlocking);
        if (r != cudaSuccess) st = mv_cuda_check(r, e, "stream creation");
    }
    for (int i = 0; st == MV_OK && i < 2; i++) {
        r = cudaEventCreateWithFlags(&b->ev_up[i], cudaEventDisableTiming);
        if (r == cudaSuccess) r = cudaEventCreateWithFlags(&b->ev_done[i], cudaEventDisableTiming);
        if (r != cudaSuccess) st = mv_cuda_check(r, e, "event creation");
    }
    if (st == MV_OK) {
        r = cudaEventCreate(&b->ev_ref);
        if (r == cudaSuccess) r = cudaEventCreate(&b->ev_f0);
        if (r == cudaSuccess) r = cudaEventCreate(&b->ev_f1);
        if (r == cudaSuccess) r = cudaEventCreateWithFlags(&b->ev_wait, cudaEventBlockingSync | cudaEventDisableTiming);
        if (r == cudaSuccess) r = cudaEventRecord(b->ev_ref, b->st);
        if (r == cudaSuccess) r = cudaEventSynchronize(b->ev_ref);
        b->ref_host = mv_now();
        if (r != cudaSuccess) st = mv_cuda_check(r, e, "timing event creation");
    }
    if (st == MV_OK)
        st = mv_gemm_create(&b->gemm, prec == MV_PREC_BF16   ? MV_GEMM_BF16
                                      : prec == MV_PREC_TF32 ? MV_GEMM_TF32
                                                             : MV_GEMM_F32,
                            b->st, e);
    /* the weights of an earlier backend on this device when they are these (the same model,
     * precision and residual type), else uploaded */
    const cuda_backend *from = o && o->weights_from && o->weights_from->destroy == cuda_destroy
                                   ? (const cuda_backend *)o->weights_from->impl : NULL;
    if (st == MV_OK && from && from->w && from->base.model == m && from->device == dev && from->prec == prec &&
        from->f32res == b->f32res) {
        b->w = from->w;
        b->w->refs++;
        if (b->verbose) fprintf(stderr, "mvembed: cuda: device %d: weights: shared with the backend before\n", dev);
    } else if (st == MV_OK) {
        double tw = mv_now();
        st = upload_weights(b, e);
        if (st == MV_OK && b->verbose)
            fprintf(stderr, "mvembed: cuda: device %d: weights: %.0f MiB to the device in %.2fs\n", dev,
                    b->sz.weights_total / 1048576.0, mv_now() - tw);
    }
    if (st == MV_OK) { /* the uint8 input's normalisation table, the CPU's own (mv_norm_lut) */
        float lut[3][256];
        mv_norm_lut(&m->pp, lut);
        r = cudaMalloc((void **)&b->lut, sizeof lut);
        if (r == cudaSuccess) r = cudaMemcpy(b->lut, lut, sizeof lut, cudaMemcpyHostToDevice);
        if (r != cudaSuccess) st = mv_cuda_check(r, e, "normalisation table upload");
    }
    if (st == MV_OK && !(b->rz = mv_cuda_resizer_new())) st = mv_fail(e, MV_ERR_NOMEM, "cuda: out of host memory");
    if (st == MV_OK) st = choose_attention(b, o, e);
    if (st == MV_OK) {
        long long bt = o ? o->batch_tokens : 0;
        if (bt <= 0) {
            size_t fr = 0, tot = 0;
            r = cudaMemGetInfo(&fr, &tot);
            if (r != cudaSuccess) {
                st = mv_cuda_check(r, e, "cudaMemGetInfo");
            } else {
                int64_t fit = (int64_t)((double)fr * 0.8 / (double)b->sz.per_token);
                bt = fit < DEFAULT_BATCH_TOKENS ? fit : DEFAULT_BATCH_TOKENS;
                if (bt < 1024) bt = 1024;
            }
        }
        if (bt > MAX_BATCH_TOKENS) bt = MAX_BATCH_TOKENS;
        b->cap_max = bt;
        b->base.batch_tokens = bt; /* the pipeline packs forwards of at most one workspace */
        make_settings(b, &prop, o);
        if (b->verbose) fprintf(stderr, "mvembed: cuda: device %d: settings: %s\n", dev, b->settings);
    }
    if (st != MV_OK) {
        cuda_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return MV_OK;
}
