/* mv_backend.h - the narrow interface between the pipeline and a tower implementation.
 *
 * A forward (mv_forward_req) takes n entries (images, or videos with t temporal groups) and
 * returns the merger output, or each entry's mean of it. Its input is either the packed
 * pixel_values (f32 rows in HF merge-block order) or the resized uint8 frames they come from (the
 * backend normalises and patchifies them itself, bit for bit as mv_patchify, so 8x fewer bytes
 * cross the bus; the pipeline sends these). Each temporal group of each entry is its own
 * attention segment (cu_seqlens = cumsum of h*w repeated t times), exactly as HF
 * Qwen3_5VisionModel.forward does.
 *
 * Implementations: CPU (src/tower/tower_cpu.c, f32, oneDNN or OpenBLAS) and CUDA (cu/, bf16 tensor cores).
 */
#ifndef MV_BACKEND_H
#define MV_BACKEND_H

#include "mv_common.h"
#include "mv_gemm_cpu.h"
#include "mv_model.h"

/* Called once per stage with the whole packed tensor [rows, cols] (f32, row-major), in the
 * order: pixel_values, patch_embed, embed, block_00 .. block_NN, merger_norm, merger_fc1, output.
 * Rows of pre-merger stages are patches in merge-block order; merger_fc1 and output rows are
 * merged tokens. Returns MV_OK or an error that aborts the forward. */
typedef mv_status (*mv_stage_fn)(void *ud, const char *stage, const float *data, int64_t rows,
                                 int64_t cols, mv_err *e);

typedef enum { MV_PREC_F32 = 0, MV_PREC_TF32, MV_PREC_BF16 } mv_precision;

/* One forward: what it computes from which input, and the caller's hooks into it. */
typedef struct {
    /* The input, one of the two (the other NULL). pixels: [n_patches, patch_dim] f32. frames:
     * the resized uint8 frames (HWC RGB) back to back, entry i being [n_frames[i]][h_i * patch]
     * [w_i * patch][3] with {t_i, h_i, w_i} = grid[3i..3i+2] and t_i = ceil(n_frames[i] /
     * temporal) (mv_frames_check): an image is 1 frame (duplicated to temporal), a video its
     * sampled frames in temporal groups, the last frame repeated when the count is not a multiple
     * of temporal. The backend normalises them with mv_norm_lut's table and patchifies in
     * merge-block order, columns (c, t, ph, pw), bit for bit as mv_patchify; the "pixel_values"
     * stage dump is that patchified result as the backend made it. Frames need in_ch 3. */
    const float *pixels;
    const uint8_t *frames;
    const int32_t *n_frames; /* [n_entries]: with frames, each entry's frame count */
    /* [n_entries][2] or NULL: with frames, only where mv_backend.resizes: entry i's frames are
     * the decoded ones, src_size[2i] x src_size[2i+1] (w x h) each, back to back as above, and the
     * backend resizes them to w_i * patch x h_i * patch first, bit for bit as
     * mv_resize_bicubic_aa_u8 (the weights are mv_resize_axis_init's); the "pixel_values" dump is
     * then made from its own resize. */
    const int32_t *src_size;
    const int32_t *grid;     /* [n_entries][3]: {t, h, w} in patches */
    int n_entries;
    /* mean 0: out [n_patches / merge^2, out_hidden], the merger's output tokens. mean 1 (--pool
     * mean on the device; only where mv_backend.pools_mean, without stage dumps): out
     * [n_entries, out_hidden], each entry's mean of its output tokens (a video's over all its
     * temporal groups), summed in f64 in row order and rounded once: bit-identical to
     * mv_pool_mean of the tokens. */
    float *out;
    int mean;
    mv_stage_fn dump; /* stage dumps (called with dump_ud), or NULL */
    void *dump_ud;
    /* Called at most once from inside the forward (with queued_arg), as soon as all of its
     * device work is queued (the device is still busy with it; the call then waits for its
     * results), or NULL. The pipeline lets the device's next forward start queuing there, so
     * that no gap opens on the device between two forwards. */
    void (*queued)(void *arg);
    void *queued_arg;
} mv_forward_req;

/* What a forward reports besides its output. */
typedef struct {
    /* When the device ran the forward's kernels, in mv_now() seconds, from the start of its first
     * kernel to the end of its last (CUDA: events); both 0 when the backend does not time its
     * device work, or could not. The pipeline's "GPU executing" time is the union of these
     * intervals per device (two forwards in flight overlap). */
    double gpu_t0, gpu_t1;
} mv_forward_info;

typedef struct mv_backend mv_backend;
struct mv_backend {
    const char *name; /* "cpu" or "cuda" */
    /* Runs the forward req. info, when not NULL, is filled whatever the outcome. */
    mv_status (*forward)(mv_backend *b, const mv_forward_req *req, mv_forward_info *info, mv_err *e);
    void (*destroy)(mv_backend *b);
    /* Host memory for a forward's pixels (or frames) and output, or NULL to use malloc/free. The CUDA backend
     * hands out page-locked memory, so uploads and downloads run at full bus speed and the upload
     * of the next chunk really overlaps the compute of this one. host_alloc may return NULL (no
     * page-locked memory left): callers then fall back to malloc. */
    void *(*host_alloc)(mv_backend *b, size_t bytes);
    void (*host_free)(mv_backend *b, void *p);
    const mv_model *model;
    /* Read-only, set at creation. batch_tokens: the most patches the caller should pack into one
     * forward (opts.batch_tokens, resolved): 0 = one input per forward (the CPU by default: keeps
     * results independent of batching); CUDA: its workspace's patches, sized from free memory
     * unless asked. pools_mean: 1 when forward takes req.mean (CUDA), else the caller pools the
     * tokens on the host (mv_pool_mean). out_bf16: 1 when every value of out (mean 0) is a bf16
     * value widened to f32 (CUDA in bf16 precision), so that --out-dtype auto stores it as f16, which
     * keeps bf16's 8 significant bits from 2^-17 to 65504 (mv_output_dtype). */
    int64_t batch_tokens;
    int pools_mean;
    int out_bf16;
    int resizes; /* 1: forward takes mv_forward_req.src_size (CUDA: cu/resize.cu) */
    int own_weights; /* 1: holds a copy of every weight apart from the model's (CUDA: on the device,
                      * one per GPU, mv_backend_opts.weights_from), so the model's host weights may go
                      * once every backend is made (mv_model_drop_weights) */
    void *impl;
};

/* CUDA attention implementation: auto = the fa3 kernel wherever it runs (Hopper, bf16, head dims
 * 64 and 72; cu/tower_cuda.cu choose_attention), else cuDNN's fused flash attention when
 * libcudnn.so.9 loads and supports the head dim (bf16 only), else the builtin kernel
 * (cu/attention.cu). fa3 = the Hopper kernel (cu/attention_fa3.cu: TMA, wgmma; bf16, head dims
 * 64 / 72, compute capability 9.0). */
typedef enum { MV_ATTN_AUTO = 0, MV_ATTN_BUILTIN, MV_ATTN_CUDNN, MV_ATTN_FA3 } mv_attn_impl;

/* CUDA, bf16 precision: the residual stream x kept in f32 between blocks (the default: about half
 * the output error against an f64 reference) or rounded to bf16 after every add, as HF does. */
typedef enum { MV_RESIDUAL_F32 = 0, MV_RESIDUAL_BF16 } mv_residual;
/* CUDA, cuDNN attention: auto = a chunk of equal segments (same-size images) takes cuDNN's plain
 * batched graph, which it runs faster, others the ragged one; ragged = every chunk the ragged
 * graph. The two agree within bf16 rounding, not bit for bit. */
typedef enum { MV_CUDNN_GRAPH_AUTO = 0, MV_CUDNN_GRAPH_RAGGED } mv_cudnn_graph;

typedef struct {
    int threads;            /* CPU: OpenMP threads (0 = default) */
    mv_cpu_gemm cpu_gemm;  /* CPU: Linear layers' GEMM mode (--cpu-gemm; 0 = f32) */
    int device;             /* CUDA device ordinal */
    mv_precision precision; /* CUDA: bf16 default */
    long long batch_tokens; /* max patches per forward (CUDA 0: sized from free memory; CPU 0: one input) */
    mv_attn_impl attention; /* CUDA: attention implementation (--attention) */
    mv_residual residual;   /* CUDA bf16: the residual stream's type (--cuda-residual) */
    mv_cudnn_graph cudnn_graph; /* CUDA: cuDNN attention's graph (--cudnn-graph) */
    /* CUDA: where libcudnn.so.9 is loaded from first (a directory or the library's path; NULL:
     * the loader's search path, then the PyTorch venv's); the CLI takes it from MV_CUDNN_LIB. The
     * first backend of the process that loads cuDNN decides. */
    const char *cudnn_lib;
    int verbose;            /* CUDA: say on stderr which attention implementation runs */
    /* CUDA: a backend of this process made before, whose weights this one shares (read-only on
     * the device; one upload and one copy in device memory) when it is a CUDA backend of the same
     * model on the same device with the same precision and residual type; else, or NULL, this
     * one uploads its own. It must outlive nothing: the weights go with the last backend using
     * them, whichever order they are destroyed in (all on one thread). */
    const mv_backend *weights_from;
    /* CPU, a test hook (MVEMBED_TEST_OUT_BF16): outputs rounded to bf16 and out_bf16 set, as the
     * CUDA bf16 tower's are, so that --out-dtype auto's choice is tested where there is no GPU */
    int test_out_bf16;
    /* CPU, a test hook (MVEMBED_TEST_CPU_RESIZES): resizes set, decoded frames (src_size) resized
     * by the backend with the CPU's resize, as the CUDA backend takes them */
    int test_resizes;
} mv_backend_opts;

mv_status mv_backend_cpu_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                mv_err *e);

/* Returns MV_ERR_UNSUPPORTED with a message when built without CUDA or no GPU is usable. */
mv_status mv_backend_cuda_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                 mv_err *e);

/* What backend b's settings resolved to on this machine, fixed at its creation, for output
 * fingerprints to hash: one line of space-separated key=value pairs in a fixed order, values
 * without spaces, "-" for a setting that does not apply; the same text for the same options on
 * the same kind of machine and build. CPU: backend=cpu gemm=f32|bf16x6 (what --cpu-gemm auto
 * became: bf16x6 only with AMX) gemm_lib=... (the GEMM library, its version and kernels). CUDA:
 * backend=cuda gpu=NAME sm=MAJORMINOR sms=N cublaslt=VERSION precision=bf16|tf32|f32
 * attention=fa3|cudnn-X.Y.Z|builtin (what --attention auto picked for the model's head dim)
 * fa3_table=VERSION residual=f32|bf16 cudnn_graph=auto|ragged gelu=epilogue|kernel. Never NULL. */
const char *mv_backend_settings(const mv_backend *b);
const char *mv_backend_cuda_settings(const mv_backend *b); /* its CUDA half (tower_cuda.cu) */
int mv_cuda_available(void); /* 1 when built with CUDA and a device is usable */
int mv_cuda_device_count(void); /* usable CUDA devices (0 without CUDA) */
/* Starts the CUDA driver and the primary context of device (what its first backend would wait
 * for: a run calls it on a thread of its own while the model loads); failures are left for the
 * backend's creation to report. Nothing without CUDA. */
void mv_cuda_prewarm(int device);

#endif
