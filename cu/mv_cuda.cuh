/* mv_cuda.cuh - shared internals of the CUDA backend: error checks, bf16/f32 element helpers and
 * the launchers of every op family in cu/ (layernorm, rope, posembed, attention, elementwise,
 * patchify, gemm). The tower driver (cu/tower_cuda.cu) and the kernel-vs-CPU-twin tests (test/cuda/)
 * include it. Not a public header: the public interface is include/mv_backend.h.
 *
 * Activations are templated on T = float (f32/tf32 precision) or __nv_bfloat16 (bf16 precision).
 * Internals of every kernel are f32; the store to T is the only rounding, which mirrors HF's bf16
 * model (QWEN35_VISION.md §6) when T is bf16. All launchers are asynchronous on `st` and return
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
 * f32, MV_CUDA_F32_RESIDUAL): identical f32 arithmetic, one rounding at the store. y != x. */
cudaError_t mv_cuda_layernorm_f32_bf16(bf16 *y, const float *x, const float *w, const float *b,
                                       int64_t n, int dim, float eps, cudaStream_t st);

/* ---- rope.cu --------------------------------------------------------------------------- */
/* cs[n, D/2] = (cos, sin) of pos * inv_freq[p mod Q] for pair p, pos = row for p < Q, col
 * otherwise (Q = D/4), f32. inv_freq[Q] lives on the device. Once per forward chunk. */
cudaError_t mv_cuda_rope_table(float2 *cs, const mv_rowinfo *ri, const float *inv_freq, int64_t n, int D,
                               cudaStream_t st);
/* Rotates q and k in qkv[n, 3*heads*D] in place (NeoX pairs (d, d + D/2)) with cs[n, D/2].
 * D % 8 == 0. */
template <typename T>
cudaError_t mv_cuda_rope(T *qkv, const float2 *cs, int64_t n, int heads, int D, cudaStream_t st);

/* ---- posembed.cu ----------------------------------------------------------------------- */
/* x[n, H] = T(x + T(pos)) where pos is the bilinear align_corners interpolation of
 * table[side*side, H] (f32) at (row, col) of an h x w grid, HF's fp32 weights. */
template <typename T>
cudaError_t mv_cuda_pos_embed_add(T *x, const mv_rowinfo *ri, const float *table, int side, int H,
                                  int64_t n, cudaStream_t st);

/* ---- attention.cu ---------------------------------------------------------------------- */
/* Attention state of one device context (residency law: it belongs to the backend that owns
 * the device, never to the process): the device ordinal, the bf16 kernel variant and which kernel
 * instantiations had their dynamic shared-memory limit raised on that device
 * (cudaFuncSetAttribute acts on the current device only). Launchers refuse to run
 * (cudaErrorInvalidDevice) when the calling thread's current device is not s->device. */
typedef struct {
    int device;
    int variant;       /* bf16 kernel: 1 = 8 warps x 16 query rows, 2 = 4 warps x 32 rows */
    uint32_t attr_set; /* bit (D index * 2 + variant - 1): limit raised on `device` */
    /* fa3 kernel (attention_fa3.cu): limits raised (one bit per instantiation), keys per tile
     * (MV_FA3_BN: 64, 112 or 128; 0 = by segment lengths, mv_cuda_fa3_keys), device checked
     * for sm_90a (0 not yet, 1 yes, -1 no) */
    uint64_t fa3_attr;
    int fa3_bn;
    int fa3_cc;
    int fa3_ver; /* fa3 kernel version (MV_FA3_VERSION): 2 (default: TMA, producer warp, ping-pong) or
                  * 1 (cp.async, no overlap) */
    int fa3_sw;  /* version 2's K and V layout (MV_FA3_SWIZZLE): 1 = 32-byte-swizzled boxes of 16
                  * columns, 0 = boxes of 8 columns, -1 = by head dim (what measured fastest) */
    int fa3_qr;  /* version 2's Q (MV_FA3_QREG): 1 = in registers, 0 = read from shared memory by
                  * every S product, -1 = by head dim */
    int fa3_wg;  /* version 2's consumer warpgroups (MV_FA3_WG): 2 (128 query rows per CTA) or 3
                  * (192), -1 = by head dim; the tile list's BM is mv_cuda_fa3_bm() */
    int fa3_ps;  /* version 2's grid (MV_FA3_PERSIST): 1 = persistent (one CTA per SM), 0 = one CTA
                  * per (query tile, head), -1 = the default (persistent) */
    int fa3_sms; /* multiprocessors of `device` (0: not yet asked) */
    void *fa3_encode; /* the driver's cuTensorMapEncodeTiled, looked up on first use */
    int fa3_split;    /* version 2's split work items (MV_FA3_SPLIT): -1 = by the last wave
                       * (mv_cuda_fa3_split), 0 = never, N > 0 = the last N items always */
    float *fa3_part;  /* the split pieces' partial results on `device` (grown by mv_cuda_fa3_split;
                       * one stream at a time per state), fa3_part_bytes of them */
    size_t fa3_part_bytes;
} mv_attn_state;
/* Fills s for `device`: variant 2, or MV_ATTN_VARIANT from the environment (1 or 2); fa3 keys per
 * tile by segment lengths, or MV_FA3_BN (64, 112 or 128); fa3 warpgroups by head dim, or
 * MV_FA3_WG (2 or 3); fa3's version (MV_FA3_VERSION), K/V layout (MV_FA3_SWIZZLE), Q placement
 * (MV_FA3_QREG) and grid (MV_FA3_PERSIST) by default, or from those variables. */
void mv_cuda_attn_state_init(mv_attn_state *s, int device);
/* Frees what s holds on its device (fa3's split scratch); s may be initialised again after. */
void mv_cuda_attn_state_free(mv_attn_state *s);

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
/* The same function and inputs as mv_cuda_attention_bf16 (tiles of mv_cuda_fa3_bm() rows) on
 * Hopper's TMA and wgmma; n = the rows of qkv (the TMA tensor map's extent), keys = keys per tile
 * from mv_cuda_fa3_keys() (version 1 runs 112 as 128), split = work items run as two pieces over
 * halves of their keys, then merged (0, or what mv_cuda_fa3_split returned for these tiles).
 * cudaErrorInvalidValue for D other than 64 / 72 or a split mv_cuda_fa3_split did not size,
 * cudaErrorNoKernelImageForDevice on a device that is not compute capability 9.0,
 * cudaErrorInvalidDevice as the builtin's. */
cudaError_t mv_cuda_attention_fa3(mv_attn_state *s, bf16 *out, const bf16 *qkv, int64_t n, const mv_attn_tile *tiles,
                                  int n_tiles, int heads, int D, int keys, int split, cudaStream_t st);
/* How many of the n_tiles * heads work items (the last ones) mv_cuda_attention_fa3 should split
 * over their keys, from the host copy of the tile list: by default (MV_FA3_SPLIT unset) the
 * items of a last wave of the persistent grid that is at most half full, behind full ones, when
 * every tile walks the same number (>= 8) of key tiles of `keys` (one large image: 16 x 86 items
 * on 132 SMs); MV_FA3_SPLIT=0 never, =N the last N. Allocates s's scratch for them on s's device
 * (no memory: 0). Version 2 only (0 for version 1). */
int mv_cuda_fa3_split(mv_attn_state *s, int D, const mv_attn_tile *tiles, int n_tiles, int heads, int keys);
int mv_cuda_fa3_head_dim_ok(int D);
/* Query rows per tile of the fa3 kernel that s runs at head dim D (128 or 192): the BM its tile
 * list must be built with (mv_attn_tiles). */
int mv_cuda_fa3_bm(const mv_attn_state *s, int D);
/* Keys per tile (`keys` of mv_cuda_attention_fa3: 64, 112 or 128) for the segments cu[0..nseg]:
 * MV_FA3_BN when set, else 112 or 128, whichever pads the segments' key tiles less (784 = 7 x 112,
 * 4096 = 32 x 128), counting each tile's fixed cost (bench/RESULTS.md, eighth session). */
int mv_cuda_fa3_keys(const mv_attn_state *s, int D, const int32_t *cu, int nseg);
/* MV_OK when the fa3 kernel runs head dim D on `device`, else MV_ERR_UNSUPPORTED saying why. */
mv_status mv_cuda_fa3_check(int device, int D, mv_err *e);

/* ---- attention_cudnn.cu (cuDNN fused flash attention, loaded at run time) ---------------- */
/* State of one backend on one device: handle on stream st, plan cache, workspace, per-slot
 * (two chunk buffers) segment metadata. create fails with MV_ERR_UNSUPPORTED and the reason
 * when cuDNN is not built in, not loadable, too old, the GPU is before sm_90, or D is not a
 * multiple of 8 up to 128. Call with `device` current. */
typedef struct mv_cudnn_attn mv_cudnn_attn;
mv_status mv_cudnn_attn_create(mv_cudnn_attn **out, int device, int heads, int D, cudaStream_t st,
                               mv_err *e);
void mv_cudnn_attn_destroy(mv_cudnn_attn *a);
/* "cuDNN 9.x.y fused flash attention (library path)" */
const char *mv_cudnn_attn_describe(const mv_cudnn_attn *a);
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

/* ---- gemm.cu (cuBLASLt) ---------------------------------------------------------------- */
typedef enum { MV_GEMM_BF16 = 0, MV_GEMM_F32, MV_GEMM_TF32 } mv_gemm_mode;
typedef enum { MV_EPI_NONE = 0, MV_EPI_BIAS, MV_EPI_GELU_BIAS } mv_gemm_epi;
typedef struct mv_gemm mv_gemm;
mv_status mv_gemm_create(mv_gemm **g, mv_gemm_mode mode, cudaStream_t st, mv_err *e);
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
 * (MV_CUDA_F32_RESIDUAL) uses it for the patch embedding, proj and fc2. */
mv_status mv_gemm_run_f32y(mv_gemm *g, float *Y, const void *X, const void *W, const float *bias,
                           int64_t n, int in, int out, mv_gemm_epi epi, int accumulate, mv_err *e);

#endif
