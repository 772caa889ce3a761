/* main.c - command-line parsing for mvembed; the only file that decides exit statuses.
 * Everything else lives in the library (src/run/run.c drives the batch). */
#include "mv_pool.h"
#include "mv_run.h"
#include "mv_tar.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MV_VERSION "0.1.0"

/* The first SIGINT/SIGTERM asks the run to stop starting work (mv_run_opts.interrupt); a second
 * one leaves at once (temp files are swept by the next run). */
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    if (g_interrupted)
        _exit(128 + sig);
    g_interrupted = sig;
}

static const char usage_text[] =
    "Usage: mvembed --model DIR --out DIR [options] PATH...\n"
    "       mvembed --model DIR --pixels FILE.npy --grid T,H,W[;T,H,W...] [--out DIR] [--dump-stages DIR]\n"
    "       mvembed manifest merge OUT\n"
    "       mvembed manifest compact [--all] OUT\n"
    "\n"
    "Embeds images and videos with a Qwen3.5 vision tower: one OUT/<path>.npy.zst per input\n"
    "(zstd-compressed NPY, [tokens, out_hidden]) and OUT/manifest.jsonl. PATH is a file, a\n"
    "directory (walked recursively), or - to read paths from standard input.\n"
    "\n"
    "Inputs and outputs:\n"
    "  -m, --model DIR           checkpoint directory (config.json + safetensors), or a hub id\n"
    "                            ORG/NAME[@REVISION] found in the Hugging Face cache (offline);\n"
    "                            default $MVEMBED_MODEL\n"
    "  -o, --out DIR             output directory (created if missing)\n"
    "  -0, --null                paths on standard input are NUL-separated (find -print0)\n"
    "      --all-files           in directories, take every file, not only image/video extensions\n"
    "      --hidden              in directories, do not skip names starting with '.'\n"
    "      --force               redo inputs the manifest already lists as ok\n"
    "      --out-dtype f32|f16   element type of the saved embeddings (default f32)\n"
    "      --zstd-level N        compression level (default 2)\n"
    "      --layout files|tar    files: one OUT/<path>.npy.zst per input (default); tar: WebDataset\n"
    "                            shards OUT/shard-SSSSS.tar of <key>.npy + <key>.json samples\n"
    "      --shard-size BYTES    --layout tar: bytes per shard, suffix K/M/G allowed (default 1G)\n"
    "      --pool none|mean      mean: save one [1, out_hidden] mean vector per input instead of its\n"
    "                            tokens (files layout: also OUT/pooled.npy + pooled.jsonl)\n"
    "\n"
    "Compute:\n"
    "      --device cpu|cuda|auto  backend (default auto: CUDA when a GPU is usable)\n"
    "      --precision bf16|tf32|f32  CUDA arithmetic (default bf16); the CPU: f32 (--cpu-gemm)\n"
    "      --attention auto|builtin|cudnn|fa3  CUDA attention (default auto: the fastest that runs)\n"
    "      --batch-tokens N      most patches packed into one forward (CUDA default: sized from\n"
    "                            free memory; CPU default: one input per forward)\n"
    "      --gpu N               CUDA device ordinal (default 0)\n"
    "  -j, --threads N           CPU threads for the tower (default: the CPUs of the affinity mask)\n"
    "      --cpu-gemm f32|bf16x6|auto  CPU Linear layers: f32 GEMMs; bf16x6: operands split\n"
    "                            exactly into 3 bf16 parts, six products on Intel AMX at f32's\n"
    "                            accuracy (needs AMX); auto (default): bf16x6 where AMX is usable\n"
    "      --jobs N              decode/preprocess threads (default: the CPUs of the affinity mask)\n"
    "      --devices LIST|all    CUDA: one worker per GPU, e.g. 0,1 (default: --gpu)\n"
    "      --inflight N          CUDA: forwards in flight per GPU, each with its own stream and\n"
    "                            staging buffers, so one packs and copies while another computes\n"
    "                            (default 2)\n"
    "      --shard K/N           take only shard K (0-based) of N, by a hash of the relative path;\n"
    "                            default from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT; the manifest\n"
    "                            is then OUT/manifest-KKKKK-of-NNNNN.jsonl\n"
    "      --shard none          every input, OUT/manifest.jsonl, whatever SLURM_ARRAY_* says (= 0/1)\n"
    "\n"
    "Preprocessing (defaults from the model's preprocessor_config.json files):\n"
    "      --min-pixels N, --max-pixels N              image pixel budget after resizing\n"
    "      --video-min-pixels N, --video-max-pixels N  video pixel budget (all frames)\n"
    "      --fps X               video frames sampled per second (default 2)\n"
    "      --num-frames N        sample exactly N frames instead (excludes --fps)\n"
    "      --min-frames N, --max-frames N  clamps for the fps rule (default 4, 768)\n"
    "      --video-frame-cap on|off  HF's per-frame video pixel cap (cap_pixels_per_frame;\n"
    "                            default the model's, else off as transformers 5.17)\n"
    "      --max-video-tokens N  tokens per frame under the cap (default the model's, else 768)\n"
    "      --max-decode-pixels N decode budget: image / video frame pixels (default 178956970)\n"
    "      --timeout SECONDS     per-input decode time limit, images and videos (default 600, 0 = none)\n"
    "\n"
    "Debugging:\n"
    "      --dump-stages DIR     write every intermediate tensor to DIR/<path>/<stage>.npy\n"
    "      --pixels FILE.npy     embed given pixel_values [patches, C*T*P*P] (tower only)\n"
    "      --grid T,H,W[;...]    grid of each entry in --pixels, in patches\n"
    "\n"
    "Output to the terminal:\n"
    "  -q, --quiet               no progress or summary\n"
    "  -v, --verbose             explain each step\n"
    "      --progress / --no-progress  force the progress line on or off\n"
    "      --progress-every S    a plain progress line every S seconds (default 30 in logs with -v\n"
    "                            or under Slurm, else a line redrawn on a terminal)\n"
    "  -h, --help                this text\n"
    "  -V, --version             version\n"
    "\n"
    "Exit status: 0 all inputs ok; 2 some inputs failed (see the manifest); 1 usage or fatal error;\n"
    "130 interrupted. See mvembed(1).\n";

enum {
    O_ALL = 256, O_HIDDEN, O_FORCE, O_OUTDT, O_ZLEVEL, O_DEVICE, O_PREC, O_BATCH, O_GPU, O_MINPX,
    O_MAXPX, O_VMINPX, O_VMAXPX, O_FPS, O_NFRAMES, O_MINF, O_MAXF, O_MAXDEC, O_TIMEOUT, O_DUMP,
    O_PIXELS, O_GRID, O_PROGRESS, O_NOPROGRESS, O_JOBS, O_DEVICES, O_SHARD, O_PROGEVERY, O_INFLIGHT,
    O_ATTN, O_CPUGEMM,
    O_VCAP, O_VTOKENS,
    O_LAYOUT, O_SHARDSIZE, O_POOL,
};

/* "0,1,3" or "all" (every visible CUDA device). */
static int parse_devices(const char *s, mv_run_opts *o)
{
    if (!strcmp(s, "all")) {
        int n = mv_cuda_device_count();
        if (n <= 0)
            return -1;
        for (int i = 0; i < n && i < 64; i++)
            o->devices[i] = i;
        o->n_devices = n < 64 ? n : 64;
        return 0;
    }
    o->n_devices = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1024 || o->n_devices == 64)
            return -1;
        o->devices[o->n_devices++] = (int)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return o->n_devices ? 0 : -1;
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "mvembed: %s%s%s\nTry 'mvembed --help'.\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

/* Strict numbers: the whole argument, no leading space, within [lo, hi] and within the type.
 * 0, or -1 when it is not a number, -2 when it is one out of range (the message says so). */
static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || isspace((unsigned char)*s) || *end)
        return -1;
    if (errno == ERANGE || v < lo || v > hi)
        return -2;
    *out = v;
    return 0;
}

/* The same for a finite real number in [lo, hi] (nan, inf and overflowing values are refused). */
static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || isspace((unsigned char)*s) || *end || isnan(v))
        return -1;
    if (errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        return -2;
    *out = v;
    return 0;
}

/* The usage error for a number option's bad value: the message, the value, and whether it was
 * out of range */
static int number_error(int rc, const char *msg, const char *arg)
{
    char what[300];
    snprintf(what, sizeof what, "%.200s%s", arg, rc == -2 ? " (out of range)" : "");
    return usage_error(msg, what);
}

/* "K/N" with 0 <= K < N <= INT_MAX, or "none" (= 0/1: no sharding, whatever SLURM_ARRAY_* says). */
static int parse_shard(const char *s, mv_run_opts *o)
{
    long long k, n;
    char ks[32];
    const char *slash = strchr(s, '/');
    if (!strcmp(s, "none")) {
        o->shard_k = 0;
        o->shard_n = 1;
        return 0;
    }
    if (!slash || (size_t)(slash - s) >= sizeof ks)
        return -1;
    memcpy(ks, s, (size_t)(slash - s));
    ks[slash - s] = 0;
    if (parse_ll(ks, 0, INT_MAX, &k) || parse_ll(slash + 1, 1, INT_MAX, &n) || k >= n)
        return -1;
    o->shard_k = (int)k;
    o->shard_n = (int)n;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"out", required_argument, 0, 'o'},
        {"null", no_argument, 0, '0'},             {"all-files", no_argument, 0, O_ALL},
        {"hidden", no_argument, 0, O_HIDDEN},      {"force", no_argument, 0, O_FORCE},
        {"out-dtype", required_argument, 0, O_OUTDT}, {"zstd-level", required_argument, 0, O_ZLEVEL},
        {"device", required_argument, 0, O_DEVICE}, {"precision", required_argument, 0, O_PREC},
        {"attention", required_argument, 0, O_ATTN}, {"cpu-gemm", required_argument, 0, O_CPUGEMM},
        {"batch-tokens", required_argument, 0, O_BATCH}, {"gpu", required_argument, 0, O_GPU},
        {"threads", required_argument, 0, 'j'},    {"min-pixels", required_argument, 0, O_MINPX},
        {"max-pixels", required_argument, 0, O_MAXPX}, {"video-min-pixels", required_argument, 0, O_VMINPX},
        {"video-max-pixels", required_argument, 0, O_VMAXPX}, {"fps", required_argument, 0, O_FPS},
        {"num-frames", required_argument, 0, O_NFRAMES}, {"min-frames", required_argument, 0, O_MINF},
        {"max-frames", required_argument, 0, O_MAXF}, {"max-decode-pixels", required_argument, 0, O_MAXDEC},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"dump-stages", required_argument, 0, O_DUMP},
        {"pixels", required_argument, 0, O_PIXELS}, {"grid", required_argument, 0, O_GRID},
        {"quiet", no_argument, 0, 'q'},            {"verbose", no_argument, 0, 'v'},
        {"progress", no_argument, 0, O_PROGRESS},  {"no-progress", no_argument, 0, O_NOPROGRESS},
        {"help", no_argument, 0, 'h'},             {"version", no_argument, 0, 'V'},
        {"jobs", required_argument, 0, O_JOBS},    {"devices", required_argument, 0, O_DEVICES},
        {"shard", required_argument, 0, O_SHARD},
        {"progress-every", required_argument, 0, O_PROGEVERY},
        {"inflight", required_argument, 0, O_INFLIGHT},
        {"video-frame-cap", required_argument, 0, O_VCAP}, {"max-video-tokens", required_argument, 0, O_VTOKENS},
        {"layout", required_argument, 0, O_LAYOUT}, {"shard-size", required_argument, 0, O_SHARDSIZE},
        {"pool", required_argument, 0, O_POOL},
        {0, 0, 0, 0},
    };
    mv_run_opts o;
    memset(&o, 0, sizeof o);
    o.out_dtype = MV_DT_F32;
    o.zstd_level = 2; /* embeddings: smaller and faster than zstd's usual 3 (man page) */
    o.max_decode_pixels = 178956970LL;
    o.timeout = 600;
    o.progress = -1;
    o.bopts.precision = MV_PREC_BF16;
    o.bopts.cpu_gemm = MV_CPU_GEMM_AUTO; /* bf16x6 where AMX is usable: faster and closer to f64 */
    o.model_dir = getenv("MVEMBED_MODEL");
    if (argc >= 2 && !strcmp(argv[1], "manifest")) {
        mv_err e;
        int rc, all = argc == 5 && !strcmp(argv[3], "--all");
        if (argc == 4 && !strcmp(argv[2], "merge"))
            rc = mv_manifest_merge_dir(argv[3], 0, &e);
        else if ((argc == 4 || all) && !strcmp(argv[2], "compact"))
            rc = mv_manifest_compact_dir(argv[argc - 1], all, 0, &e);
        else
            return usage_error("usage: mvembed manifest merge OUT | mvembed manifest compact [--all] OUT", NULL);
        char esc[4200];
        if (rc)
            fprintf(stderr, "mvembed: %s\n", mv_escape(e.msg, esc, sizeof esc));
        return rc;
    }
    int have_fps = 0, c, rc;
    long long v;
    while ((c = getopt_long(argc, argv, "m:o:0j:qvhV", opts, NULL)) != -1) {
        switch (c) {
        case 'm': o.model_dir = optarg; break;
        case 'o': o.out_dir = optarg; break;
        case '0': o.null_sep = 1; break;
        case O_ALL: o.all_files = 1; break;
        case O_HIDDEN: o.hidden = 1; break;
        case O_FORCE: o.force = 1; break;
        case O_OUTDT:
            if (!strcmp(optarg, "f32"))
                o.out_dtype = MV_DT_F32;
            else if (!strcmp(optarg, "f16"))
                o.out_dtype = MV_DT_F16;
            else
                return usage_error("--out-dtype must be f32 or f16", optarg);
            break;
        case O_ZLEVEL:
            if ((rc = parse_ll(optarg, 1, 19, &v)))
                return number_error(rc, "--zstd-level must be 1..19", optarg);
            o.zstd_level = (int)v;
            break;
        case O_DEVICE:
            if (!strcmp(optarg, "cpu"))
                o.device = MV_DEV_CPU;
            else if (!strcmp(optarg, "cuda"))
                o.device = MV_DEV_CUDA;
            else if (!strcmp(optarg, "auto"))
                o.device = MV_DEV_AUTO;
            else
                return usage_error("--device must be cpu, cuda or auto", optarg);
            break;
        case O_PREC:
            if (!strcmp(optarg, "bf16"))
                o.bopts.precision = MV_PREC_BF16;
            else if (!strcmp(optarg, "tf32"))
                o.bopts.precision = MV_PREC_TF32;
            else if (!strcmp(optarg, "f32"))
                o.bopts.precision = MV_PREC_F32;
            else
                return usage_error("--precision must be bf16, tf32 or f32", optarg);
            break;
        case O_ATTN:
            if (!strcmp(optarg, "auto"))
                o.bopts.attention = MV_ATTN_AUTO;
            else if (!strcmp(optarg, "builtin"))
                o.bopts.attention = MV_ATTN_BUILTIN;
            else if (!strcmp(optarg, "cudnn"))
                o.bopts.attention = MV_ATTN_CUDNN;
            else if (!strcmp(optarg, "fa3"))
                o.bopts.attention = MV_ATTN_FA3;
            else
                return usage_error("--attention must be auto, builtin, cudnn or fa3", optarg);
            break;
        case O_CPUGEMM:
            if (mv_cpu_gemm_parse(optarg, &o.bopts.cpu_gemm))
                return usage_error("--cpu-gemm must be f32, bf16x6 or auto", optarg);
            break;
        case O_BATCH:
            if ((rc = parse_ll(optarg, 1, LLONG_MAX, &v)))
                return number_error(rc, "--batch-tokens must be a positive integer", optarg);
            o.bopts.batch_tokens = v;
            break;
        case O_GPU:
            if ((rc = parse_ll(optarg, 0, 1024, &v)))
                return number_error(rc, "--gpu must be a device ordinal", optarg);
            o.bopts.device = (int)v;
            break;
        case 'j':
            if ((rc = parse_ll(optarg, 1, 4096, &v)))
                return number_error(rc, "--threads must be a positive integer", optarg);
            o.bopts.threads = (int)v;
            break;
#define PIXOPT(code, field, name)                                                     \
    case code:                                                                        \
        if ((rc = parse_ll(optarg, 1, LLONG_MAX, &v)))                                \
            return number_error(rc, name " must be a positive integer", optarg);      \
        o.field = v;                                                                  \
        break;
            PIXOPT(O_MINPX, min_pixels, "--min-pixels")
            PIXOPT(O_MAXPX, max_pixels, "--max-pixels")
            PIXOPT(O_VMINPX, video_min_pixels, "--video-min-pixels")
            PIXOPT(O_VMAXPX, video_max_pixels, "--video-max-pixels")
            PIXOPT(O_MAXDEC, max_decode_pixels, "--max-decode-pixels")
#undef PIXOPT
        case O_FPS:
            if ((rc = parse_num(optarg, 0, 1e6, &o.fps)) || !(o.fps > 0))
                return number_error(rc, "--fps must be a positive number (at most 1e6)", optarg);
            have_fps = 1;
            break;
        case O_NFRAMES:
            if ((rc = parse_ll(optarg, 1, 100000, &v)))
                return number_error(rc, "--num-frames must be a positive integer", optarg);
            o.num_frames = (int)v;
            break;
        case O_MINF:
        case O_MAXF:
            if ((rc = parse_ll(optarg, 1, 100000, &v)))
                return number_error(rc, "--min-frames/--max-frames must be positive integers", optarg);
            if (c == O_MINF)
                o.min_frames = (int)v;
            else
                o.max_frames = (int)v;
            break;
        case O_VCAP:
            if (strcmp(optarg, "on") && strcmp(optarg, "off"))
                return usage_error("--video-frame-cap must be on or off", optarg);
            o.video_frame_cap = strcmp(optarg, "on") ? -1 : 1;
            break;
        case O_VTOKENS:
            if ((rc = parse_ll(optarg, 1, 1000000000, &v)))
                return number_error(rc, "--max-video-tokens must be 1..1000000000", optarg);
            o.max_video_tokens = v;
            break;
        case O_TIMEOUT:
            if ((rc = parse_num(optarg, 0, 1e9, &o.timeout)))
                return number_error(rc, "--timeout must be a number of seconds (0 to 1e9)", optarg);
            break;
        case O_JOBS:
            if ((rc = parse_ll(optarg, 1, 1024, &v)))
                return number_error(rc, "--jobs must be 1..1024", optarg);
            o.jobs = (int)v;
            break;
        case O_DEVICES:
            if (parse_devices(optarg, &o))
                return usage_error("--devices must be a list of GPU ordinals like 0,1, or all (with a usable GPU)", optarg);
            break;
        case O_SHARD:
            if (parse_shard(optarg, &o))
                return usage_error("--shard must be K/N with 0 <= K < N, or none", optarg);
            break;
        case O_LAYOUT:
            if (!strcmp(optarg, "files"))
                o.layout = MV_LAYOUT_FILES;
            else if (!strcmp(optarg, "tar"))
                o.layout = MV_LAYOUT_TAR;
            else
                return usage_error("--layout must be files or tar", optarg);
            break;
        case O_SHARDSIZE:
            if (mv_tar_parse_size(optarg, &o.shard_size))
                return usage_error("--shard-size must be a positive size like 1000000, 512M or 1G", optarg);
            break;
        case O_POOL:
            if (!strcmp(optarg, "none"))
                o.pool = MV_POOL_NONE;
            else if (!strcmp(optarg, "mean"))
                o.pool = MV_POOL_MEAN;
            else
                return usage_error("--pool must be none or mean", optarg);
            break;
        case O_DUMP: o.dump_dir = optarg; break;
        case O_PIXELS: o.pixels = optarg; break;
        case O_GRID: o.grid = optarg; break;
        case 'q': o.quiet = 1; break;
        case 'v': o.verbose = o.bopts.verbose = 1; break;
        case O_PROGRESS: o.progress = 1; break;
        case O_NOPROGRESS: o.progress = 0; break;
        case O_INFLIGHT:
            if ((rc = parse_ll(optarg, 1, 8, &v)))
                return number_error(rc, "--inflight must be 1..8", optarg);
            o.inflight = (int)v;
            break;
        case O_PROGEVERY:
            if ((rc = parse_num(optarg, 0, 1e6, &o.progress_every)) || !(o.progress_every > 0))
                return number_error(rc, "--progress-every must be a number of seconds > 0", optarg);
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("mvembed %s\n", MV_VERSION); return 0;
        default: return usage_error("unknown option", NULL);
        }
    }
    if (have_fps && o.num_frames)
        return usage_error("--fps and --num-frames are mutually exclusive", NULL);
    if (!o.model_dir || !*o.model_dir)
        return usage_error("no model: give --model DIR or set MVEMBED_MODEL", NULL);
    o.paths = argv + optind;
    o.n_paths = argc - optind;
    if (o.pixels) {
        if (!o.grid)
            return usage_error("--pixels needs --grid T,H,W", NULL);
        if (o.n_paths)
            return usage_error("--pixels takes no PATH arguments", NULL);
    } else {
        if (!o.out_dir)
            return usage_error("no output directory: give --out DIR", NULL);
        if (!o.n_paths)
            return usage_error("no inputs: give files, directories, or - for standard input", NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    o.interrupt = &g_interrupted;
    mv_err e;
    e.msg[0] = 0;
    mv_run_result res;
    if (mv_run(&o, &res, &e)) {
        char esc[4200]; /* the message names a path: escaped, so it cannot forge lines */
        fprintf(stderr, "mvembed: %s\n", e.msg[0] ? mv_escape(e.msg, esc, sizeof esc) : "failed");
        return 1;
    }
    if (res.signal)
        return 128 + res.signal;
    return res.failed ? 2 : 0;
}
