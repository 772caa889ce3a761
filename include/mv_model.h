/* mv_model.h - Qwen3.5 vision tower configuration and weights, loaded from a checkpoint directory.
 *
 * A model directory is laid out as released on the hub: config.json (vision parameters under
 * "vision_config", or at top level for a standalone vision model), weights in model.safetensors or
 * sharded *.safetensors listed by model.safetensors.index.json, and optionally
 * preprocessor_config.json / video_preprocessor_config.json.
 *
 * mv_model_load converts every weight to f32 on the host (bf16 and f16 convert exactly): the
 * CPU tower's form. mv_model_load_mode(MV_WEIGHTS_SOURCE) keeps the checkpoint's own bytes
 * instead (mapped; 1.8 GB of f32 less for the 27B tower), for backends that copy the weights
 * elsewhere (CUDA: bf16 checkpoints upload as they are): they read them with mv_model_weight, and
 * mv_model_weights_f32 converts them for a CPU backend made after all. Either way shapes are
 * checked against the config, every weight is checked for NaN/Inf, and the fingerprint is the
 * same.
 */
#ifndef MV_MODEL_H
#define MV_MODEL_H

#include "mv_common.h"
#include "mv_safetensors.h"

typedef enum { MV_ACT_GELU_TANH = 0, MV_ACT_GELU_ERF, MV_ACT_SILU } mv_act;

typedef struct {
    int depth;            /* blocks */
    int hidden;           /* H */
    int heads;
    int head_dim;         /* D = H / heads */
    int inter;            /* I, block MLP width */
    int out_hidden;       /* L, merger output width */
    int patch;            /* P = 16 */
    int merge;            /* spatial merge = 2 */
    int temporal;         /* temporal patch = 2 */
    int in_ch;            /* 3 */
    int num_pos;          /* 2304 */
    int pos_side;         /* int(sqrt(num_pos)) = 48 */
    mv_act act;           /* block MLP activation (hidden_act) */
    double rope_theta;    /* 10000 */
    float ln_eps;         /* 1e-6 */
    int patch_dim;        /* in_ch * temporal * patch * patch = 1536 */
} mv_vision_config;

/* Preprocessing parameters (preprocessor_config.json, video_preprocessor_config.json). */
typedef struct {
    long long min_pixels, max_pixels;             /* size.shortest_edge / size.longest_edge */
    float mean[3], std[3];
    double rescale;                               /* 1/255 */
    int patch, merge, temporal;
    /* video */
    long long video_min_pixels, video_max_pixels;
    double fps;                                   /* default sampling fps (2) */
    int min_frames, max_frames;                   /* 4 / 768 */
    /* HF's per-frame pixel cap (cap_pixels_per_frame, max_video_tokens): see mv_video_max_pixels */
    int video_frame_cap;                          /* 1 capped, 0 uncapped (transformers 5.17's default) */
    int video_frame_cap_src;                      /* where video_frame_cap came from (MV_CAP_FROM_*) */
    long long max_video_tokens;                   /* merged tokens per frame under the cap (768) */
} mv_preproc_config;

/* Sources of mv_preproc_config.video_frame_cap, for -v. */
enum { MV_CAP_FROM_DEFAULT = 0, MV_CAP_FROM_CONFIG, MV_CAP_FROM_OPTION };

typedef struct {
    float *norm1_w, *norm1_b;   /* [H] */
    float *qkv_w, *qkv_b;       /* [3H, H], [3H] */
    float *proj_w, *proj_b;     /* [H, H], [H] */
    float *norm2_w, *norm2_b;   /* [H] */
    float *fc1_w, *fc1_b;       /* [I, H], [I] */
    float *fc2_w, *fc2_b;       /* [H, I], [H] */
} mv_block;

typedef struct {
    mv_vision_config cfg;
    mv_preproc_config pp;
    float *patch_w, *patch_b;   /* [H, patch_dim] (Conv3d weight flattened row-major), [H] */
    float *pos_embed;           /* [num_pos, H] */
    mv_block *blocks;           /* [depth] */
    float *mnorm_w, *mnorm_b;   /* [H] */
    float *mfc1_w, *mfc1_b;     /* [4H, 4H], [4H] */
    float *mfc2_w, *mfc2_b;     /* [L, 4H], [L] */
    char fingerprint[17];       /* hex of a 64-bit hash over weights + preprocessing + run settings */
    uint64_t weights_hash;      /* hash of the raw tensor bytes and the vision config */
    char dir[4096];
    /* private */
    void *storage;
} mv_model;

/* Loads the model directory dir (a hub id is resolved to one first: mv_hub.h); m->dir is dir. On
 * error returns non-OK with a one-line message naming the file and tensor / field at fault. */
mv_status mv_model_load(const char *dir, mv_model **out, mv_err *e);
void mv_model_free(mv_model *m);

/* How a loaded model holds its weights: MV_WEIGHTS_F32, converted to f32 in host memory (every
 * weight pointer of mv_model set); MV_WEIGHTS_SOURCE, the checkpoint's bytes as stored, its files
 * kept mapped, every weight pointer NULL until mv_model_weights_f32. */
typedef enum { MV_WEIGHTS_F32 = 0, MV_WEIGHTS_SOURCE } mv_weights_mode;
mv_status mv_model_load_mode(const char *dir, mv_weights_mode mode, mv_model **out, mv_err *e);

/* One weight as the model holds it (mv_model_weight): its n values in f32 (NULL while the model
 * holds the checkpoint's bytes) and, with MV_WEIGHTS_SOURCE, the checkpoint's tensor in its
 * mapped file (its bytes, dtype and name; NULL once the weights are f32 or dropped). */
typedef struct {
    const float *f32;
    const mv_st_file *file;
    const mv_st_tensor *tensor;
    size_t n;
} mv_weight_view;

/* The weight whose pointer field of m is at `field` (&m->patch_w, &m->blocks[i].qkv_w, ...): 1
 * with *v filled, 0 when m holds no such weight (dropped, or not a field of m's). */
int mv_model_weight(const mv_model *m, float *const *field, mv_weight_view *v);

/* v's n values as f32 into dst (from v->f32, or converted from v->tensor, mv_st_to_f32_range, in
 * pieces over the OpenMP threads). */
void mv_weight_view_f32(const mv_weight_view *v, float *dst);

/* Converts a MV_WEIGHTS_SOURCE model's weights to f32, as mv_model_load would have (the pointers
 * set, the files unmapped); nothing for a model whose weights are f32 already. */
mv_status mv_model_weights_f32(mv_model *m, mv_err *e);
/* Frees the weights (their f32 copy in host memory, or the checkpoint's mappings) and sets every
 * weight pointer to NULL; the config, preprocessing, fingerprint and weights_hash stay. For a run whose every backend holds
 * its own copy (mv_backend.own_weights): the CPU tower reads the weights at every forward. */
void mv_model_drop_weights(mv_model *m);
/* Run settings beyond the model and m->pp that change an output's bytes (for the fingerprint). */
typedef struct {
    int num_frames;    /* --num-frames (0 = sampled from fps) */
    int out_dtype;     /* mv_dtype of the saved arrays */
    const char *backend; /* "cpu" or "cuda" */
    int precision;     /* mv_precision of the CUDA arithmetic (ignored for "cpu": always f32) */
    int pool;          /* --pool (0 none: not hashed, so token outputs keep their fingerprint) */
    const char *settings; /* mv_backend_settings(): what each setting resolved to on this machine,
                           * "key=value ..."; NULL = not hashed */
} mv_run_settings;

/* 1 when the fingerprint hashes key of a backend settings line (mv_backend.h): every key but
 * those that name the machine without changing what it computes (gpu: the device's name; sm and
 * sms decide the kernels). */
int mv_fingerprint_hashes_key(const char *key);

/* Recomputes m->fingerprint from weights_hash (weights + vision config), every number of m->pp
 * (image and video pixel budgets, patch/merge/temporal, mean/std/rescale, fps, frame bounds) and,
 * when rs is non-NULL, the run settings with the hashed key=value pairs of rs->settings (in their
 * order; a key appears once). Call after overriding m->pp. */
void mv_model_update_fingerprint(mv_model *m, const mv_run_settings *rs);

/* Default preprocessing values for Qwen3.5 checkpoints when the JSON files are absent. */
void mv_preproc_defaults(mv_preproc_config *pp);

#endif
