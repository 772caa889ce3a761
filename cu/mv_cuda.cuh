/* mv_cuda.cuh - shared internals of the CUDA backend: error checks, bf16/f32 element helpers and
 * the launchers of every op family in cu/ (layernorm, rope, posembed, attention, elementwise,
 * patchify, gemm). The tower driver (cu/tower_cuda.cu) and the kernel-vs-CPU-twin tests (test/cuda/)
 * include it. Not a public header: the public interface is include/mv_backend.h.
 *
 * Activations are templated on T = float (f32/tf32 precision) or __nv_bfloat16 (bf16 precision).
 * Internals of every kernel are f32; the store to T is the only rounding, which mirrors HF's bf16
 * model (docs/hf-reference.md §6) when T is bf16. All launchers are asynchronous on `st` and return
 * the launch status (cudaGetLastError) so callers can check every launch.
 */
#ifndef MV_CUDA_CUH
#define MV_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "mv_common.h"
#include "mv_plan.h"
#include "mv_preprocess.h" /* mv_resize_axis */
}

typedef __nv_bfloat16 bf16;

/* ---- element helpers ------------------------------------------------------------------ */
static __device__ __forceinline__ float mv_to_f(float x) { return x; }
static __device__ __forceinline__ float mv_to_f(bf16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T mv_from_f(float x);
template <> __device__ __forceinline__ float mv_from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 mv_from_f<bf16>(float x) { return __float2bfloat16_rn(x); }
/* f32 -> T -> f32: the value T would store. */
template <typename T> static __device__ __forceinline__ float mv_round_t(float x)
{
    return mv_to_f(mv_from_f<T>(x));
}

/* mv_rowinfo (row, col, h, w per patch row) and mv_attn_tile (one query tile: rows
 * [q0, min(q0 + BM, kv_end)) attend to [kv_start, kv_end)) come from include/mv_plan.h. */

/* Query rows per attention tile (bf16 tensor-core kernel and f32 kernel). Host code builds the
 * tile list with these. */
#define MV_ATTN_BM_BF16 128
#define MV_ATTN_BM_F32 64

/* ---- status helpers ------------------------------------------------------------------- */
mv_status mv_cuda_check(cudaError_t r, mv_err *e, const char *what);

/* ---- layernorm.cu ---------------------------------------------------------------------- */
/* y[n, dim] = LayerNorm(x[n, dim]) * w[dim] + b[dim]; f32 statistics (two-pass), eps inside sqrt.
 * y may equal x. */
template <typename T>
cudaError_t mv_cuda_layernorm(T *y, const T *x, const float *w, const float *b, int64_t n, int dim,
                              float eps, cudaStream_t st);
/* The same from an f32 x[n, dim] to a bf16 y[n, dim] (the bf16 tower with its residual stream in
 * f32, MV_RESIDUAL_F32): identical f32 arithmetic, one rounding at the store. y != x. */
cudaError_t mv_cuda_layernorm_f32_bf16(bf16 *y, const float *x, const float *w, const float *b,
                                       int64_t n, int dim, float eps, cudaStream_t st);

/* ---- rope.cu --------------------------------------------------------------------------- */
/* cs[n, D/2] = (cos, sin) of pos * inv_freq[p mod Q] for pair p, pos = row for p < Q, col
 * otherwise (Q = D/4), f32. inv_freq[Q] lives on the device. Once per forward chunk. */
cudaError_t mv_cuda_rope_table(float2 *cs, const mv_rowinfo *ri, const float *inv_freq, int64_t n, int D,
                               cudaStream_t st);
/* Rotates q and k in qkv[n, 3*heads*D] in place (NeoX pairs (d, d + D/2)) with cs[n, D/2], q's
 * results multiplied by qscale before they are stored (1: none; an fa3 plan's q_scale). D % 8 == 0. */
template <typename T>
cudaError_t mv_cuda_rope(T *qkv, const float2 *cs, int64_t n, int heads, int D, float qscale, cudaStream_t st);

/* ---- posembed.cu ----------------------------------------------------------------------- */
/* x[n, H] = T(x + T(pos)) where pos is the bilinear align_corners interpolation of
 * table[side*side, H] (f32) at (row, col) of an h x w grid, HF's fp32 weights. */
template <typename T>
cudaError_t mv_cuda_pos_embed_add(T *x, const mv_rowinfo *ri, const float *table, int side, int H,
                                  int64_t n, cudaStream_t st);

/* ---- attention.cu ---------------------------------------------------------------------- */
/* Attention launcher state of one device context (residency law: it belongs to the backend that
 * owns the device, never to the process): the device ordinal, which kernel instantiations had
 * their dynamic shared-memory limit raised on that device (cudaFuncSetAttribute acts on the
 * current device only), and fa3's device check and tensor-map encoder. Nothing in it chooses a
 * kernel. Launchers refuse to run (cudaErrorInvalidDevice) when the calling thread's current
 * device is not s->device. */
typedef struct {
    int device;
    uint32_t attr_set;    /* builtin bf16 kernel: bit (D index * 2 + variant - 1), limit raised */
    uint64_t fa3_attr[13]; /* fa3 kernels: a bit per instantiation (attention_fa3.cu: 0..383, the tail kernels
                            * 448..831; version 1: 384..387) */
    int fa3_cc;           /* device checked for sm_90a: 0 not yet, 1 yes, -1 no */
    void *fa3_encode;     /* the driver's cuTensorMapEncodeTiled, looked up on first use */
} mv_attn_state;
/* An empty state for `device`; asks the device nothing. */
void mv_cuda_attn_state_init(mv_attn_state *s, int device);

/* out[n, heads*D] = softmax(q k^T * D^-0.5) v per segment, q|k|v from qkv[n, 3*heads*D].
 * tiles[n_tiles] from mv_attn_tiles() with the kernel's BM. bf16: mma.sync tensor cores, online
 * softmax in f32, P rounded to bf16 before P.V. f32: CUDA cores. Returns cudaErrorInvalidValue
 * for unsupported D (see mv_cuda_attn_supported). */
cudaError_t mv_cuda_attention_bf16(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                   int n_tiles, int heads, int D, cudaStream_t st);
cudaError_t mv_cuda_attention_f32(mv_attn_state *s, float *out, const float *qkv, const mv_attn_tile *tiles,
                                  int n_tiles, int heads, int D, cudaStream_t st);
int mv_cuda_attn_supported(int D);
/* The tile lists (mv_attn_tile_count, mv_attn_tiles) are built on the host by src/tower/plan.c. */

/* Residency: MV_OK when the calling thread's current device is `device` and p (when not NULL) is
 * host memory or device memory of `device`; else MV_ERR_DEVICE naming `what`. */
mv_status mv_cuda_check_resident(const void *p, int device, const char *what, mv_err *e);

/* ---- attention_fa3.cu (sm_90a only: TMA, wgmma; see the file's opening) ------------------ */
/* What the fa3 choice depends on besides the shape: the device's compute capability and SMs. */
typedef struct {
    int device, cc_major, cc_minor, sms;
} mv_fa3_device;
/* Fills d from the device's attributes. */
cudaError_t mv_cuda_fa3_device(int device, mv_fa3_device *d);
/* MV_OK when the fa3 kernel runs head dim D on d (a table entry for D, compute capability 9.0),
 * else MV_ERR_UNSUPPORTED saying why. */
mv_status mv_cuda_fa3_check(const mv_fa3_device *d, int D, mv_err *e);

/* One kernel configuration (fa3_table.cuh explains each field). */
typedef struct {
    int consumers;   /* consumer warpgroups: 2 or 3; the tile list's BM is mv_cuda_fa3_bm */
    int keys;        /* keys per K/V tile: 64, 112 or 128 */
    int swizzle;     /* K and V in 32-byte-swizzled boxes of 16 columns (1) or boxes of 8 (0) */
    int qreg;        /* Q in registers (1) or read from shared memory (0) */
    int persistent;  /* one CTA per SM taking work items in turn (1) or one per item (0) */
    int stages;      /* K and V stages */
    int rescale_min; /* conditional rescale threshold, powers of 2 (0: off) */
    int qpad;        /* the row max subtracted through Q's padded column, q pre-scaled (1) or not (0) */
    int tails;       /* tiles with at most 64 rows in their segment run by the tail kernel (1) or not (0) */
} mv_fa3_cfg;
/* Query rows per tile of configuration c: the BM its tile list is built with (mv_attn_tiles). */
static inline int mv_cuda_fa3_bm(const mv_fa3_cfg *c) { return 64 * c->consumers; }
/* The table's configuration for head dim D on d and the segments cu[0..nseg] (the key-tile size
 * by the entry's cost model): 0, or -1 when mv_cuda_fa3_check refuses (D, d). Pure. */
int mv_cuda_fa3_config(const mv_fa3_device *d, int D, const int32_t *cu, int nseg, mv_fa3_cfg *c);
/* How many of the n_tiles * heads work items (the last ones) to run as two pieces over halves of
 * their keys, by the entry's rule: the items of a last wave of the persistent grid at most
 * split_max_fill % full behind full ones, when every tile of the host tile list walks the same
 * number (>= split_min_tiles) of key tiles (one large image: 16 x 86 items on 132 SMs). Pure. */
int mv_cuda_fa3_split(const mv_fa3_device *d, const mv_fa3_cfg *c, int D, const mv_attn_tile *tiles, int n_tiles,
                      int heads);
/* The tail kernel's tiles of a tile list for configuration c (cfg.tails, 3 consumers, Q in shared
 * memory): those holding at most 64 rows of their segment, moved to the list's end (the others'
 * order kept) when they make at least a wave of work items on d (tails x heads >= SMs; fewer
 * would leave most SMs idle through the tail kernel's launch: they then stay where they are and
 * run with the others). Returns how many moved (0: none). The order of a tile list is only the
 * schedule: every kernel computes the same outputs from it. Pure. */
int mv_cuda_fa3_tails(const mv_fa3_device *d, const mv_fa3_cfg *c, mv_attn_tile *tiles, int n_tiles, int heads);
/* A launch: configuration, split items, CTAs, and the f32 scratch the split pieces need. */
typedef struct {
    mv_fa3_cfg cfg;
    int tail;          /* the list's last `tail` tiles run by the tail kernel (cfg.tails; 0: none) */
    int tail_grid;     /* the tail kernel's CTAs (0 without tail tiles) */
    int split;         /* the last `split` work items of the others run as two pieces each, then merged */
    int grid;          /* CTAs: min(SMs, work items) on a persistent grid, else one per work item; 0: none */
    size_t part_bytes; /* scratch for the split pieces (0 without a split); the caller owns it */
    float q_scale;     /* what the caller's q must already be multiplied by (cfg.qpad: D^-0.5 log2(e); else 1) */
} mv_fa3_plan;
/* The launch of n_tiles tiles whose last `tail` are tail tiles (mv_cuda_fa3_tails' count; run by
 * the tail kernel when c->tails, else with the others) and `split` items of the others to split
 * (mv_cuda_fa3_split over the others' tiles). Pure. */
void mv_cuda_fa3_plan(const mv_fa3_device *d, const mv_fa3_cfg *c, int D, int n_tiles, int heads, int split,
                      int tail, mv_fa3_plan *p);
size_t mv_cuda_fa3_part_bytes(const mv_fa3_cfg *c, int D, int split);
/* 1 when this build instantiates configuration c at head dim D: a production build only what
 * the table can pick, the variants build (-DMV_VARIANTS) also the others it lists. */
int mv_cuda_fa3_built(const mv_fa3_cfg *c, int D);
/* The same function and inputs as mv_cuda_attention_bf16 (tiles of mv_cuda_fa3_bm(&p->cfg) rows)
 * on Hopper's TMA and wgmma, as plan p says; n = the rows of qkv (the TMA tensor map's extent);
 * part: at least p->part_bytes bytes of device memory when p->split > 0 (else may be NULL), one
 * launch at a time. cudaErrorInvalidValue for D outside the table, a plan inconsistent with the
 * tiles or scratch too small; cudaErrorNotSupported for a configuration this build does not
 * instantiate; cudaErrorNoKernelImageForDevice on a device that is not compute capability 9.0;
 * cudaErrorInvalidDevice as the builtin's. */
cudaError_t mv_cuda_attention_fa3(mv_attn_state *s, const mv_fa3_plan *p, float *part, size_t part_bytes, bf16 *out,
                                  const bf16 *qkv, int64_t n, const mv_attn_tile *tiles, int n_tiles, int heads, int D,
                                  cudaStream_t st);

/* ---- attention_cudnn.cu (cuDNN fused flash attention, loaded at run time) ---------------- */
/* State of one backend on one device: handle on stream st, plan cache, workspace, per-slot
 * (two chunk buffers) segment metadata. lib: where libcudnn.so.9 is tried first (a directory or
 * the file; NULL: nowhere first), used by the process's first call only; ragged: every chunk
 * through the ragged graph (else a chunk of equal segments takes the dense one). create fails
 * with MV_ERR_UNSUPPORTED and the reason when cuDNN is not built in, not loadable, too old, the
 * GPU is before sm_90, or D is not a multiple of 8 up to 128. Call with `device` current. */
typedef struct mv_cudnn_attn mv_cudnn_attn;
mv_status mv_cudnn_attn_create(mv_cudnn_attn **out, int device, int heads, int D, cudaStream_t st,
                               const char *lib, int ragged, mv_err *e);
void mv_cudnn_attn_destroy(mv_cudnn_attn *a);
/* "cuDNN 9.x.y fused flash attention (library path)" */
const char *mv_cudnn_attn_describe(const mv_cudnn_attn *a);
/* the loaded library's version (cudnnGetVersion: 91900 for 9.19.0); 0 for NULL */
size_t mv_cudnn_attn_version(const mv_cudnn_attn *a);
/* Segments cu[nseg + 1] (rows of the packed chunk) -> slot buf's device metadata, copied on
 * stream io (the caller orders io before the run). MV_ERR_UNSUPPORTED when the chunk exceeds
 * the int32 offsets (callers fall back to the builtin kernel). */
mv_status mv_cudnn_attn_prepare(mv_cudnn_attn *a, int buf, const int32_t *cu, int nseg, cudaStream_t io,
                                mv_err *e);
/* out[n, heads*D] = attention of qkv[n, 3*heads*D] (bf16) over slot buf's segments, enqueued on
 * the state's stream; builds and caches the plan on first use of its (B, S) bucket
 * (MV_ERR_UNSUPPORTED when no engine runs it). */
mv_status mv_cudnn_attn_run(mv_cudnn_attn *a, int buf, bf16 *out, const bf16 *qkv, mv_err *e);

/* ---- elementwise.cu -------------------------------------------------------------------- */
template <typename T> cudaError_t mv_cuda_from_f32(T *y, const float *x, int64_t count, cudaStream_t st);
template <typename T> cudaError_t mv_cuda_to_f32(float *y, const T *x, int64_t count, cudaStream_t st);
/* act: 0 tanh GELU, 1 erf GELU, 2 SiLU (mv_act values); in place, f32 internals. */
template <typename T> cudaError_t mv_cuda_act(T *x, int act, int64_t count, cudaStream_t st);

/* ---- pool.cu (--pool mean on the device) ------------------------------------------------ */
/* Rows [row0, row0 + rows) of a chunk's output [*, cols] belong to input `entry`. */
typedef struct {
    int64_t row0, rows;
    int64_t entry;
} mv_pool_span;
/* acc[entry, c] += each span's rows in row order (f64; one span per entry per call). spans is a
 * device array. CPU twin: mv_pool_mean's inner loop. */
cudaError_t mv_cuda_pool_add(double *acc, const float *x, const mv_pool_span *spans, int n_spans, int cols,
                             cudaStream_t st);
/* out[e, c] = (float)(acc[e, c] / rows[e]) for e < n (rows: device array). */
cudaError_t mv_cuda_pool_finish(float *out, const double *acc, const int64_t *rows, int n, int cols,
                                cudaStream_t st);

/* ---- patchify.cu ---------------------------------------------------------------------- */
/* One attention segment (a temporal group of one entry) of a chunk of uint8 frames. */
typedef struct {
    int64_t src;    /* byte offset of the segment's first frame in the chunk's frame buffer */
    int64_t row0;   /* its first patch row, relative to the chunk (ascending over segments) */
    int32_t nf;     /* its frames, 1..temporal (fewer than temporal: the last one repeats) */
    int32_t gh, gw; /* its entry's grid h, w in patches; a frame is [gh * patch][gw * patch][3] */
    int32_t pad;
} mv_patch_seg;
/* out[n_rows, 3 * temporal * patch^2] (f32) = lut[c * 256 + v] of frames' uint8 values, rows in
 * merge-block order per segment, columns (c, t, ph, pw): mv_patchify's result for the rows of
 * segs[nseg]. lut[3 * 256] (device, mv_norm_lut). */
cudaError_t mv_cuda_patchify(float *out, const uint8_t *frames, const mv_patch_seg *segs, int nseg,
                             int64_t n_rows, const float *lut, int patch, int merge, int temporal,
                             cudaStream_t st);

/* ---- resize.cu -------------------------------------------------------------------------- */
/* One axis of torch's uint8 antialiased bicubic resize in device memory: mv_resize_axis's arrays
 * (include/mv_preprocess.h), uploaded. */
typedef struct {
    const int *xmin, *xsize; /* [n] */
    const int16_t *w;        /* [n][ksize] */
    int n, ksize;
    unsigned prec;
} mv_cuda_resize_axis;
/* Bytes of a's arrays packed by mv_cuda_resize_axis_pack (each part 16-byte aligned). */
size_t mv_cuda_resize_axis_bytes(const mv_resize_axis *a);
/* Copies a's arrays into host memory h (mv_cuda_resize_axis_bytes(a) bytes) and sets *d to
 * point at the same layout in device memory dev, where the caller uploads h. */
void mv_cuda_resize_axis_pack(const mv_resize_axis *a, void *h, void *dev, mv_cuda_resize_axis *d);
/* dst [nf][dh][dw][3] = mv_resize_bicubic_aa_u8 of each frame of src [nf][sh][sw][3], bit for
 * bit: ax (sw -> dw) when the width changes, ay (sh -> dh) when the height does (NULL or ignored
 * otherwise; a->n must be dw / dh), both through tmp [nf][sh][dw][3] when both change (tmp may be
 * NULL otherwise); equal sizes copy. All pointers are device memory; asynchronous on st. */
cudaError_t mv_cuda_resize_u8(uint8_t *dst, const uint8_t *src, uint8_t *tmp, int nf, int sw, int sh,
                              int dw, int dh, const mv_cuda_resize_axis *ax,
                              const mv_cuda_resize_axis *ay, cudaStream_t st);

/* A forward's device resize (mv_forward_req.src_size), for the backend: one segment of a chunk
 * (a temporal group of one entry) with its source frames at byte src of the forward's input and
 * its resized frames at byte dst of the packed resized frames (mv_patch_seg.src); segments of
 * one entry are consecutive and share its axes. */
typedef struct {
    int64_t src, dst;
    int32_t nf, sw, sh, dw, dh, entry;
} mv_resize_seg;
typedef struct mv_cuda_resizer mv_cuda_resizer;
mv_cuda_resizer *mv_cuda_resizer_new(void); /* NULL: out of memory */
void mv_cuda_resizer_free(mv_cuda_resizer *r);
/* Enqueues on io the upload of chunk buffer buf's source frames (host_frames: page-locked; the
 * segments' bytes are consecutive) and axes (computed here, mv_resize_axis_init), growing the
 * device buffers as needed (cudaFree / cudaMalloc: the device's earlier work ends first). */
mv_status mv_cuda_resizer_upload(mv_cuda_resizer *r, int buf, const uint8_t *host_frames, const mv_resize_seg *segs,
                                 int nseg, cudaStream_t io, mv_err *e);
/* Enqueues on st the resizes of buffer buf's segments into dst (offsets relative to the first
 * segment's dst), once its upload is waited for. */
cudaError_t mv_cuda_resizer_run(mv_cuda_resizer *r, int buf, uint8_t *dst, cudaStream_t st);

/* ---- host_pinned.cu -------------------------------------------------------------------- */
/* A page-locked host buffer of at least `bytes` for asynchronous copies with device `device`
 * (registered portable), its pages faulted in before the driver pins them; NULL when it cannot
 * be had (the caller then uses pageable memory). Freed with mv_cuda_host_pinned_free (NULL: no-op). */
void *mv_cuda_host_pinned_alloc(int device, size_t bytes);
void mv_cuda_host_pinned_free(void *p);

/* ---- gemm.cu (cuBLASLt) ---------------------------------------------------------------- */
typedef enum { MV_GEMM_BF16 = 0, MV_GEMM_F32, MV_GEMM_TF32 } mv_gemm_mode;
typedef enum { MV_EPI_NONE = 0, MV_EPI_BIAS, MV_EPI_GELU_BIAS } mv_gemm_epi;
typedef struct mv_gemm mv_gemm;
mv_status mv_gemm_create(mv_gemm **g, mv_gemm_mode mode, cudaStream_t st, mv_err *e);
size_t mv_gemm_lib_version(void); /* cublasLtGetVersion() */
void mv_gemm_destroy(mv_gemm *g);
/* Y[n, out] = X[n, in] . W[out, in]^T (+ bias[out]) (then tanh GELU) (+ Y when accumulate).
 * Element type: bf16 in MV_GEMM_BF16 mode, f32 otherwise; f32 accumulation. Bias has the element
 * type. Returns MV_ERR_UNSUPPORTED when cuBLASLt has no algorithm (callers fall back, e.g. to an
 * unfused GELU). */
mv_status mv_gemm_run(mv_gemm *g, void *Y, const void *X, const void *W, const void *bias,
                      int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, mv_err *e);
/* As mv_gemm_run with an f32 Y[n, out] (C = D = CUDA_R_32F) and an f32 bias[out] (epi NONE or
 * BIAS), X and W of the mode's element type: in MV_GEMM_BF16 mode bf16 X . W^T accumulated in f32
 * and stored (or added to Y) unrounded. The bf16 tower's f32 residual stream
 * (MV_RESIDUAL_F32) uses it for the patch embedding, proj and fc2. */
mv_status mv_gemm_run_f32y(mv_gemm *g, float *Y, const void *X, const void *W, const float *bias,
                           int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, mv_err *e);

#endif
