/* mv_run.h - the batch: walk the inputs, decode, preprocess, run the tower, write outputs and
 * the manifest. main.c parses the command line into an mv_run_opts and calls mv_run. */
#ifndef MV_RUN_H
#define MV_RUN_H

#include "mv_backend.h"
#include "mv_hub.h"
#include "mv_model.h"
#include "mv_npy.h"

#include <signal.h>
#include <stdio.h>

typedef enum { MV_DEV_AUTO = 0, MV_DEV_CPU, MV_DEV_CUDA } mv_device_kind;
typedef enum { MV_LAYOUT_FILES = 0, MV_LAYOUT_TAR } mv_layout;

/* A Slurm array task's SLURM_ARRAY_TASK_* variables as the program read them (NULL: unset). A
 * run without --shard whose id and count are set takes its shard from them. */
typedef struct {
    const char *id, *count, *min, *max, *step;
} mv_slurm_array;

/* The most CPU "devices" the test hook test_cpu_devices makes (x --inflight 8 =
 * MV_PIPELINE_MAX_TOWERS). */
#define MV_TEST_CPU_DEVICES_MAX 8

typedef struct {
    const char *model_dir;     /* a directory, or a hub id looked up in the cache that hub names */
    mv_hub_env hub;            /* the Hugging Face cache variables (main.c reads them) */
    const char *out_dir;
    char *const *paths;
    int n_paths;
    int null_sep, all_files, hidden;
    int walk_rules;            /* --walk-rules: listed paths passed over as a walk would (mv_walk.h) */
    mv_device_kind device;
    mv_backend_opts bopts;
    mv_dtype out_dtype;        /* MV_DT_F32 or MV_DT_F16 */
    int zstd_level;
    long long min_pixels, max_pixels, video_min_pixels, video_max_pixels; /* 0 = model's */
    double fps;                /* 0 = model's */
    int num_frames;            /* 0 = from fps */
    int min_frames, max_frames; /* 0 = model's */
    int video_frame_cap;       /* --video-frame-cap: 0 = model's, 1 on, -1 off */
    long long max_video_tokens; /* 0 = model's */
    long long max_decode_pixels;
    long long max_member_bytes; /* --max-member-bytes: a tar member's bound (0: MV_TAR_MEMBER_MAX_OF
                                 * max_decode_pixels, mv_tar_in.h) */
    double timeout;            /* per-input decode time limit, seconds (0 = none) */
    const char *dump_dir;
    const char *pixels;        /* tower-only: pixel_values .npy */
    const char *grid;          /* tower-only: "t,h,w[;t,h,w...]" */
    int force, quiet, verbose;
    int input_hash;            /* --input-hash: record each input's XXH64; resume compares it */
    int jobs;                  /* decode threads (0 = cores) */
    int writers;               /* writer threads (0 = 7/8 of jobs, at least 2) */
    int shard_k, shard_n;      /* --shard K/N (n = 0: none given; k = -1: auto/N) */
    mv_slurm_array slurm;      /* the array task's variables (main.c reads them) */
    const char *k8s_index;     /* JOB_COMPLETION_INDEX (a Kubernetes Indexed Job; NULL unset) */
    const char *aws_index, *aws_size; /* AWS_BATCH_JOB_ARRAY_INDEX, AWS_BATCH_JOB_ARRAY_SIZE */
    int devices[64];           /* --devices: CUDA ordinals, one tower thread each */
    int n_devices;
    int inflight;              /* CUDA: forwards in flight per GPU (a backend + tower thread each; 0 = 2) */
    int progress;              /* -1 auto (stderr is a terminal), 0 off, 1 on */
    double progress_every;     /* > 0: a plain progress line every N seconds (logs); 0 = auto */
    int batch_job;             /* SLURM_JOB_ID is set: a batch job's log, which gets plain progress
                                * lines (progress_every auto: 30 s) */
    int forward_overlap;       /* MVEMBED_FORWARD_TURNS=0 (comparisons): the forwards in flight on
                                * one device queue their work at once instead of taking turns */
    int test_fill_window;      /* test hook (MVEMBED_TEST_FILL_WINDOW=1): a tower thread packs only
                                * a full window, so that packing does not depend on timing */
    int layout;                /* MV_LAYOUT_FILES (OUT/<rel>.npy.zst) or MV_LAYOUT_TAR (mv_tar.h) */
    long long shard_size;      /* --layout tar: target bytes per tar shard (0 = default) */
    long long shard_samples;   /* --layout tar: most samples per tar shard (0 = OUT's record, or any) */
    int pool;                  /* mv_pool_kind (mv_pool.h): MV_POOL_NONE or MV_POOL_MEAN */
    /* Test hook (MVEMBED_TEST_CPU_DEVICES): 2..MV_TEST_CPU_DEVICES_MAX makes the CPU backend that
     * many devices of --inflight backends each, laid out as CUDA's, so that the many-device
     * pipeline runs where there is no GPU; 0: one backend. */
    int test_cpu_devices;
    /* Test hook (MVEMBED_TEST_PAUSE_TAR_OPEN=MS): --layout tar pauses MS milliseconds after
     * creating each temporary shard (mv_tar_set_test_pause); 0: none. */
    int test_pause_tar_open_ms;
    /* Set (to the signal number) by the caller's signal handler: the run starts no more work,
     * finishes the forwards in flight, writes them and returns. NULL: never interrupted. */
    const volatile sig_atomic_t *interrupt;
} mv_run_opts;

/* What a run did. The library decides nothing about the process: main.c maps this to an exit
 * status (0 all ok, 2 some inputs failed, 1 fatal, 128 + signal when interrupted). */
typedef struct {
    long ok, failed, skipped;
    int signal; /* the interrupting signal, or 0 */
    /* unsharded runs: other runs still live in OUT as this one left it (they may redo or add
     * inputs): its completion marker waits for the last of them; live_other names one */
    int others_live;
    char live_other[160];
    /* after a fatal error: a later failure to tell after the run's error (the run record's, when
     * OUT took none either), "" when none */
    char after_fatal[1024];
} mv_run_result;

/* The options o gives (away from their defaults) that a run's backend does not use, joined by
 * ", " into buf[n] (empty: none); returns how many. cuda 1, the CUDA backend: --threads,
 * --cpu-gemm (the CPU tower's). cuda 0, the CPU backend: --inflight, --devices, --gpu,
 * --attention, --cuda-residual, --cudnn-graph, except --inflight and --devices where fake > 1
 * (the test hook's CPU devices take them). mv_run names them on stderr (not with -q). */
int mv_run_unused_options(const mv_run_opts *o, int cuda, int fake, char *buf, size_t n);

/* Loads the model, makes the backends and runs the batch (or the tower-only --pixels entry).
 * Returns MV_OK with res filled, or a fatal error (model, backend, output directory, manifest,
 * full disk) with the message in e. */
mv_status mv_run(const mv_run_opts *o, mv_run_result *res, mv_err *e);

/* `mvembed manifest merge OUT`: folds OUT/manifest-*-of-*.jsonl (and an existing manifest.jsonl)
 * into OUT/manifest.jsonl, one line per input, the latest line winning. */
int mv_manifest_merge_dir(const char *out_dir, int quiet, mv_err *e);

/* `mvembed manifest compact [--all] OUT`: rewrites OUT/manifest.jsonl (all: and every
 * OUT/manifest-*-of-*.jsonl, each in place) with one line per input, the latest line winning;
 * unparsable lines are dropped and counted. Returns 0, or 1 with the reason in e. */
int mv_manifest_compact_dir(const char *out_dir, int all, int quiet, mv_err *e);

/* `mvembed manifest failed OUT [-0]`: writes to `to` the inputs of OUT whose newest line, over
 * every manifest there (mv_line_order_cmp, as merge), is not ok, one a line ('\n', or NUL with
 * null_sep), byte for byte (input_b64's bytes where a line has them), each once, in the order they
 * first appear; a tar member as its tar's path (once), which a rerun of the tar retries. Reads
 * only, takes no lock. Returns 0, or 1 with the reason in e (OUT missing, not a directory, no
 * manifest in it, a manifest unreadable, `to` failing: errno then its cause, EPIPE for a reader
 * gone). */
int mv_manifest_failed_dir(const char *out_dir, int null_sep, FILE *to, mv_err *e);

#endif
