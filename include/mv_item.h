/* mv_item.h - one input from sniff to manifest record, knowing nothing of threads or queues.
 *
 * An mv_item is what travels through the pipeline (mv_pipeline.h): its path and output name,
 * the resized uint8 frames once decoded, the tower's output once run, or an error. Every
 * function here works on one item; the pipeline decides which thread calls what and when.
 * Not here: output naming rules (mv_walk.h), writing files (mv_output.h), the manifest file
 * (mv_manifest.h).
 */
#ifndef MV_ITEM_H
#define MV_ITEM_H

#include "mv_input.h"
#include "mv_backend.h"
#include "mv_manifest.h"
#include "mv_model.h"
#include "mv_npy.h"
#include "mv_tar_in.h"

/* What decoding + preprocessing produced for one input: the resized frames, the tower's input
 * (the backend's forward normalises and patchifies them; 3 bytes a pixel instead of the 24 of
 * f32 pixel_values with the temporal duplicate) and what --dump-stages writes as input.png. */
typedef struct {
    uint8_t *frames;  /* [n_frames][rh][rw][3] uint8 HWC, rh = grid h * patch, rw = grid w * patch;
                       * freed once the forward ran */
    int n_frames;     /* images 1; videos the sampled frames (grid t = ceil(n_frames / temporal)) */
    int rw, rh;
    int sw, sh;       /* 0: frames are resized; else (mv_item_ctx.device_resize) frames holds the
                       * decoded image, sw x sh, which the backend resizes to rw x rh */
    int32_t grid[3];  /* t, h, w in patches */
    const char *kind; /* "image" / "video" */
    int width, height;
    int64_t *frame_idx; /* videos: sampled frame indices [n_idx] and timestamps */
    double *ts;
    int n_idx;
    double fps, duration;
    int rotation;
} mv_prepared;

/* One input travelling through the pipeline. */
typedef struct {
    char *path, *rel;  /* path as the user knows it; output name relative to OUT (without .npy.zst) */
    char *abs;         /* files layout: its path from / (feed.c's input_abs; its record's when it is
                        * not path), or NULL when not known */
    int named;         /* files layout: rel passed feed.c's naming checks (an error line records it) */
    int fd;            /* >= 0: the bytes are in this file (a tar member in a memfd), not at path;
                        * owned by the item */
    const mv_input_io *io; /* or non-NULL: the bytes are this stream (a large tar member), read
                            * with io_user; borrowed, valid while its walk item is */
    void *io_user;
    double t0;         /* when it entered the pipeline (mv_now) */
    const char *error; /* set (mv_item_fail): the input failed; it goes straight to the writer */
    char *error_copy;  /* error's own copy, freed with the item (NULL: error is a constant) */
    const char *kind;  /* for error lines */
    mv_prepared p;
    float *out;        /* [rows, out_hidden] once the tower ran */
    int64_t rows;
    /* Where out lives: NULL = malloc'd (freed with the item); else out points into a buffer
     * shared with the other inputs of its forward and out_release(out_owner) drops this item's
     * reference to it. */
    void (*out_release)(void *out_owner);
    void *out_owner;
    double t_decode, t_preprocess; /* seconds spent in each (for -v's timeline) */
    /* the input file as it was opened (a tar member: its tar, as the walk found it at its first
     * member; feed.c): for its record and resume */
    int has_stat;
    int64_t in_bytes, in_mtime_ns, in_mtime_s; /* in_mtime_ns: mv_time_ns, saturated */
    int has_xxh64;     /* mv_item_ctx.input_hash */
    uint64_t in_xxh64;
    mv_tar_meta *meta; /* a tar member's sample metadata (owned), for its record; or NULL */
} mv_item;

/* Settings one item's preparation needs (a view of the run's options). */
typedef struct {
    const mv_model *m;
    long long max_decode_pixels;
    double timeout;      /* per-input decode time limit in seconds, 0 = none */
    int num_frames;      /* videos: exactly N frames (0 = from fps) */
    int video_threads;   /* videos: decoder threads (mv_video_limits.threads; 0 = FFmpeg's choice) */
    const char *dump_dir; /* --dump-stages: write input.png / input_NNN.png (and an image's
                           * decoded.png) under DIR/<rel>/ */
    int device_resize;   /* every backend resizes (mv_backend.resizes): an image keeps its decoded
                          * frame (mv_prepared.sw), unless it is over 4x the resized pixels */
    int input_hash;       /* --input-hash: XXH64 of each input file's bytes (mv_filehash.h) */
} mv_item_ctx;

/* A new item for path with output name rel (both copied), fd = -1; NULL when out of memory. */
mv_item *mv_item_new(const char *path, const char *rel);
void mv_item_free(mv_item *it);

/* Replaces the item's output by out (malloc'd, [rows, out_hidden], owned by the item from now on),
 * releasing the old one wherever it lived. */
void mv_item_set_out(mv_item *it, float *out, int64_t rows);

/* Marks the item failed with msg (copied; "out of memory" if even that fails) and drops its
 * frames. */
void mv_item_fail(mv_item *it, const char *msg);

/* Opens the input once (it->fd when set, else it->path: mv_input.h), sniffs its head, decodes
 * it from that same input, resizes exactly like HF (the frames, not yet normalised: the backend
 * does that and the patchify) and, with dump_dir, writes the input PNGs. A bad input sets
 * it->error and returns MV_OK; a non-OK return is fatal for the run (the --dump-stages directory
 * cannot be written), with e set. */
mv_status mv_item_prepare(const mv_item_ctx *c, mv_item *it, mv_err *e);

/* Patches of a prepared item: t * h * w. */
int64_t mv_item_patches(const mv_item *it);
/* The bytes of its frames: resized (rw x rh) or decoded (sw x sh) ones. */
size_t mv_item_frame_bytes(const mv_item *it);

/* The manifest record of a finished item (ok with its output, or its error). out_rel is the
 * output's name relative to OUT; r's pointers point into it and into the item. */
void mv_item_record(const mv_item *it, const mv_vision_config *c, mv_dtype out_dtype,
                    const char *model_fingerprint, const char *out_rel, mv_record *r);

/* --dump-stages: an mv_stage_fn writing DIR/<stage>.npy, with ud a mv_dump_ctx. */
typedef struct {
    char dir[4096];
} mv_dump_ctx;
mv_status mv_dump_stage(void *ud, const char *stage, const float *data, int64_t rows, int64_t cols,
                        mv_err *e);

#endif
