/* options.c - the command line into an mv_run_opts (options.h): the option table, --help printed
 * from it, and the checks of options taken together. Every option is one row of options[]: its
 * long and short names, the kind of argument it takes (flag, int, long long, real, enum, string,
 * or a parser of its own), the bounds of a number, the mv_run_opts field it sets (offsetof, with
 * the field's type checked at compile time), an enum's names, and its --help text. One parser
 * (set_option) reads every argument through the table, and --help is printed from it, so the two
 * cannot drift apart; test/bats/05-repo.bats checks that the man page's OPTIONS list the same
 * options. A number is read whole and must lie within its row's bounds (and its type): anything
 * else is a usage error naming the option. Not here: the environment, exit statuses (main.c). */
#include "options.h"

#include "mv_gemm_amx.h"
#include "mv_numparse.h"
#include "mv_pool.h"
#include "mv_stdfds.h"
#include "mv_tar.h"
#include "mv_version.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int cli_usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "mvembed: %s%s%s\nTry 'mvembed --help'.\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

/* ---- the option table ------------------------------------------------------------------------ */

typedef enum { K_SECTION, K_FLAG, K_INT, K_LL, K_REAL, K_ENUM, K_STRING, K_CUSTOM } opt_kind;

typedef struct {
    const char *name;
    int value;
} opt_name;

/* What a K_CUSTOM parser returns besides 0 (taken) and -1 (a usage error) */
#define OPT_EXIT_OK 1 /* done: the program exits with status 0 (--help, --version) */

typedef struct {
    opt_kind kind;
    const char *name;       /* the long option without "--"; K_SECTION: the --help heading */
    char short_name;        /* or 0 */
    size_t at;              /* the mv_run_opts field set (K_FLAG, K_INT, K_ENUM: an int) */
    long long lo, hi;       /* K_INT, K_LL: the bounds; K_FLAG: the value set (lo) */
    double rlo, rhi;        /* K_REAL: the bounds, rlo excluded when open_lo */
    int open_lo;
    const opt_name *names;  /* K_ENUM: the values, {NULL} last */
    int (*parse)(const char *arg, mv_run_opts *o); /* K_CUSTOM: 0, -1 or OPT_EXIT_OK */
    const char *must;       /* the usage error "--NAME must be MUST: ARG" (K_ENUM: from names) */
    const char *meta;       /* --help: the argument (K_ENUM: the names joined by '|') */
    const char *help;       /* --help: the description, lines separated by '\n' */
} opt_def;

/* offsetof a field of mv_run_opts, a compile error unless it has the type the row's kind writes */
#define AT_T(f, T) _Generic(((mv_run_opts *)0)->f, T: offsetof(mv_run_opts, f))
#define AT_ENUM(f) \
    (offsetof(mv_run_opts, f) + 0 * sizeof(char[sizeof(((mv_run_opts *)0)->f) == sizeof(int) ? 1 : -1]))

#define SECTION(title) {.kind = K_SECTION, .name = title}
#define FLAG(nm, sh, f, v, h) {.kind = K_FLAG, .name = nm, .short_name = sh, .at = AT_T(f, int), .lo = v, .help = h}
#define INT(nm, sh, f, l, u, m, mt, h)                                                               \
    {.kind = K_INT, .name = nm, .short_name = sh, .at = AT_T(f, int), .lo = l, .hi = u, .must = m, \
     .meta = mt, .help = h}
#define LL(nm, f, l, u, m, mt, h)                                                                    \
    {.kind = K_LL, .name = nm, .at = AT_T(f, long long), .lo = l, .hi = u, .must = m, .meta = mt,  \
     .help = h}
#define REAL(nm, f, l, open, u, m, mt, h)                                                            \
    {.kind = K_REAL, .name = nm, .at = AT_T(f, double), .rlo = l, .open_lo = open, .rhi = u,       \
     .must = m, .meta = mt, .help = h}
#define ENUM(nm, f, nms, h) {.kind = K_ENUM, .name = nm, .at = AT_ENUM(f), .names = nms, .help = h}
#define STRING(nm, sh, f, mt, h) \
    {.kind = K_STRING, .name = nm, .short_name = sh, .at = AT_T(f, const char *), .meta = mt, .help = h}
#define CUSTOM(nm, sh, fn, m, mt, h) \
    {.kind = K_CUSTOM, .name = nm, .short_name = sh, .parse = fn, .must = m, .meta = mt, .help = h}

static const opt_name dtype_names[] = {
    {"auto", MV_DT_AUTO}, {"f32", MV_DT_F32}, {"f16", MV_DT_F16}, {"bf16", MV_DT_BF16}, {NULL, 0}};
static const opt_name layout_names[] = {{"files", MV_LAYOUT_FILES}, {"tar", MV_LAYOUT_TAR}, {NULL, 0}};
static const opt_name pool_names[] = {{"none", MV_POOL_NONE}, {"mean", MV_POOL_MEAN}, {NULL, 0}};
static const opt_name device_names[] = {
    {"cpu", MV_DEV_CPU}, {"cuda", MV_DEV_CUDA}, {"auto", MV_DEV_AUTO}, {NULL, 0}};
static const opt_name precision_names[] = {
    {"bf16", MV_PREC_BF16}, {"tf32", MV_PREC_TF32}, {"f32", MV_PREC_F32}, {NULL, 0}};
static const opt_name attention_names[] = {{"auto", MV_ATTN_AUTO}, {"builtin", MV_ATTN_BUILTIN},
                                           {"cudnn", MV_ATTN_CUDNN}, {"fa3", MV_ATTN_FA3}, {NULL, 0}};
static const opt_name cpu_gemm_names[] = {
    {"f32", MV_CPU_GEMM_F32}, {"bf16x6", MV_CPU_GEMM_BF16X6}, {"auto", MV_CPU_GEMM_AUTO}, {NULL, 0}};
static const opt_name frame_cap_names[] = {{"on", 1}, {"off", -1}, {NULL, 0}};
static const opt_name residual_names[] = {
    {"f32", MV_RESIDUAL_F32}, {"bf16", MV_RESIDUAL_BF16}, {NULL, 0}};
static const opt_name cudnn_graph_names[] = {
    {"auto", MV_CUDNN_GRAPH_AUTO}, {"ragged", MV_CUDNN_GRAPH_RAGGED}, {NULL, 0}};

static int parse_shard_size(const char *s, mv_run_opts *o);
static int parse_member_bytes(const char *s, mv_run_opts *o);
static int parse_devices(const char *s, mv_run_opts *o);
static int parse_shard(const char *s, mv_run_opts *o);
static int print_help(const char *s, mv_run_opts *o);
static int print_version(const char *s, mv_run_opts *o);

static const opt_def options[] = {
    SECTION("Inputs and outputs"),
    STRING("model", 'm', model_dir, "DIR",
           "checkpoint directory (config.json + safetensors), or a hub id\n"
           "ORG/NAME[@REVISION] found in the Hugging Face cache (offline);\n"
           "default $MVEMBED_MODEL"),
    STRING("out", 'o', out_dir, "DIR", "output directory (created if missing)"),
    FLAG("null", '0', null_sep, 1, "paths on standard input are NUL-separated (find -print0)"),
    FLAG("all-files", 0, all_files, 1, "in directories, take every file, not only image/video extensions"),
    FLAG("hidden", 0, hidden, 1, "in directories and tars, do not skip names starting with '.'"),
    FLAG("walk-rules", 0, walk_rules, 1,
         "paths given as files (arguments, -) follow the directory walk's rules:\n"
         "hidden ones, other extensions, non-files and OUT's are passed over"),
    FLAG("force", 0, force, 1, "redo inputs the manifest already lists as ok"),
    FLAG("input-hash", 0, input_hash, 1, "record each input's XXH64; resume redoes inputs whose bytes changed"),
    ENUM("out-dtype", out_dtype, dtype_names, "element type of the saved embeddings: auto (default):\n"
         "f16 for the bf16 tower's tokens, else f32; bf16: <u2 bits"),
    INT("zstd-level", 0, zstd_level, 1, 19, "1..19", "N", "compression level (default 2)"),
    ENUM("layout", layout, layout_names,
         "files: one OUT/<path>.npy.zst per input (default); tar: WebDataset\n"
         "shards OUT/shard-SSSSS.tar of <key>.npy + <key>.json samples"),
    CUSTOM("shard-size", 0, parse_shard_size, "a positive size like 1000000, 512M or 1G", "BYTES",
           "--layout tar: bytes per shard, suffix K/M/G allowed (default 1G)"),
    LL("shard-samples", shard_samples, 1, LLONG_MAX, "a positive integer", "N",
       "--layout tar: at most N samples per shard, whichever of this and\n"
       "--shard-size comes first; kept in OUT: later runs give the same N\n"
       "or none (default: OUT's, else no limit)"),
    ENUM("pool", pool, pool_names,
         "mean: save one [1, out_hidden] mean vector per input instead of its\n"
         "tokens; a run that goes through its inputs (exit 0 or 2, either layout)\n"
         "also writes OUT/pooled/ (a shard: pooled-KKKKK-of-NNNNN/): pooled.npy,\n"
         "a row per ok input, and pooled.jsonl, failed inputs too (row null); a\n"
         "run that stops early after writing outputs removes it"),

    SECTION("Compute"),
    ENUM("device", device, device_names, "backend (default auto: CUDA when a GPU is usable)"),
    ENUM("precision", bopts.precision, precision_names,
         "CUDA arithmetic (default bf16); the CPU: f32 (--cpu-gemm)"),
    ENUM("attention", bopts.attention, attention_names,
         "CUDA attention (default auto: the fastest that runs)"),
    ENUM("cuda-residual", bopts.residual, residual_names,
         "CUDA bf16: the residual stream between blocks in f32 (default:\n"
         "about half the error against f64) or rounded to bf16 as HF does"),
    ENUM("cudnn-graph", bopts.cudnn_graph, cudnn_graph_names,
         "cuDNN attention: auto (default): same-size images take its\n"
         "faster batched graph; ragged: every batch the ragged graph"),
    LL("batch-tokens", bopts.batch_tokens, 1, LLONG_MAX, "a positive integer", "N",
       "most patches packed into one forward (CUDA default: sized from\n"
       "free memory; CPU default: one input per forward)"),
    INT("gpu", 0, bopts.device, 0, 1024, "a device ordinal", "N", "CUDA device ordinal (default 0)"),
    INT("threads", 'j', bopts.threads, 1, 4096, "1..4096", "N",
        "CPU threads for the tower (default: the CPUs of the affinity mask)"),
    ENUM("cpu-gemm", bopts.cpu_gemm, cpu_gemm_names,
         "CPU Linear layers: f32 GEMMs; bf16x6: operands split\n"
         "exactly into 3 bf16 parts, six products on Intel AMX at f32's\n"
         "accuracy (needs AMX); auto (default): bf16x6 where AMX is usable"),
    INT("jobs", 0, jobs, 1, 1024, "1..1024", "N",
        "decode/preprocess threads (default: the CPUs of the affinity mask)"),
    INT("writers", 0, writers, 1, 64, "1..64", "N",
        "threads writing outputs and manifest lines (default: 7/8 of\n"
        "--jobs, at least 2); more where each file's fsync waits long"),
    CUSTOM("devices", 0, parse_devices, "a list of GPU ordinals like 0,1, or all (with a usable GPU)",
           "LIST|all", "CUDA: one worker per GPU, e.g. 0,1 (default: --gpu)"),
    INT("inflight", 0, inflight, 1, 8, "1..8", "N",
        "CUDA: forwards in flight per GPU, each with its own stream and\n"
        "staging buffers, so one packs and copies while another computes\n"
        "(default 2)"),
    CUSTOM("shard", 0, parse_shard, "K/N with 0 <= K < N, auto/N, or none", "K/N|auto/N|none",
           "take only shard K (0-based) of N, by a hash of the relative path;\n"
           "the manifest is then OUT/manifest-KKKKK-of-NNNNN.jsonl; auto/N: K\n"
           "from the array index (Slurm, JOB_COMPLETION_INDEX of a Kubernetes\n"
           "Indexed Job, AWS Batch); default: a Slurm or AWS Batch array task's\n"
           "shard; none: every input, OUT/manifest.jsonl, whatever the\n"
           "environment says (= 0/1)"),

    SECTION("Preprocessing (defaults from the model's preprocessor_config.json files)"),
    LL("min-pixels", min_pixels, 1, LLONG_MAX, "a positive integer", "N",
       "image pixel budget after resizing: at least N"),
    LL("max-pixels", max_pixels, 1, LLONG_MAX, "a positive integer", "N",
       "image pixel budget after resizing: at most N"),
    LL("video-min-pixels", video_min_pixels, 1, LLONG_MAX, "a positive integer", "N",
       "video pixel budget (all frames): at least N"),
    LL("video-max-pixels", video_max_pixels, 1, LLONG_MAX, "a positive integer", "N",
       "video pixel budget (all frames): at most N"),
    REAL("fps", fps, 0, 1, 1e6, "a positive number (at most 1e6)", "X",
         "video frames sampled per second (default 2)"),
    INT("num-frames", 0, num_frames, 1, 100000, "1..100000", "N",
        "sample exactly N frames instead (excludes --fps)"),
    INT("min-frames", 0, min_frames, 1, 100000, "1..100000", "N",
        "lower clamp of the fps rule (default 4)"),
    INT("max-frames", 0, max_frames, 1, 100000, "1..100000", "N",
        "upper clamp of the fps rule (default 768)"),
    ENUM("video-frame-cap", video_frame_cap, frame_cap_names,
         "HF's per-frame video pixel cap (cap_pixels_per_frame;\n"
         "default the model's, else off as transformers 5.17)"),
    LL("max-video-tokens", max_video_tokens, 1, 1000000000, "1..1000000000", "N",
       "tokens per frame under the cap (default the model's, else 768)"),
    LL("max-decode-pixels", max_decode_pixels, 1, LLONG_MAX, "a positive integer", "N",
       "decode budget: image / video frame pixels (default 178956970)"),
    CUSTOM("max-member-bytes", 0, parse_member_bytes, "a positive size like 100000000, 512M or 2G", "BYTES",
           "most bytes of one tar member, suffix K/M/G allowed (default 4 per\n"
           "pixel of --max-decode-pixels + 16M: about 699M)"),
    REAL("timeout", timeout, 0, 0, 1e9, "a number of seconds (0 to 1e9)", "SECONDS",
         "per-input decode time limit, images and videos (default 600, 0 = none)"),

    SECTION("Debugging"),
    STRING("dump-stages", 0, dump_dir, "DIR", "write every intermediate tensor to DIR/<path>/<stage>.npy"),
    STRING("pixels", 0, pixels, "FILE.npy", "embed given pixel_values [patches, C*T*P*P] (tower only)"),
    STRING("grid", 0, grid, "T,H,W[;...]", "grid of each entry in --pixels, in patches"),

    SECTION("Output to the terminal"),
    FLAG("quiet", 'q', quiet, 1, "no progress or summary"),
    FLAG("verbose", 'v', verbose, 1, "explain each step"),
    FLAG("progress", 0, progress, 1, "force the progress line on"),
    FLAG("no-progress", 0, progress, 0, "force the progress line off"),
    REAL("progress-every", progress_every, 0, 1, 1e6, "a number of seconds > 0", "S",
         "a plain progress line every S seconds (default 30 in logs with -v\n"
         "or under Slurm, else a line redrawn on a terminal)"),
    CUSTOM("help", 'h', print_help, NULL, NULL, "this text"),
    CUSTOM("version", 'V', print_version, NULL, NULL, "version"),
};
#define N_OPTIONS (sizeof options / sizeof *options)

static const char usage_head[] =
    "Usage: mvembed --model DIR --out DIR [options] PATH...\n"
    "       mvembed --model DIR --pixels FILE.npy --grid T,H,W[;T,H,W...] [--out DIR] [--dump-stages DIR]\n"
    "       mvembed manifest merge OUT\n"
    "       mvembed manifest compact [--all] OUT\n"
    "       mvembed manifest failed OUT [-0]    (the inputs whose newest line failed; to retry them:\n"
    "         mvembed manifest failed OUT -0 | mvembed --model DIR --out OUT -0 -)\n"
    "\n"
    "Embeds images and videos with a Qwen3.5 vision tower: one OUT/<path>.npy.zst per input\n"
    "(zstd-compressed NPY, [tokens, out_hidden]) and OUT/manifest.jsonl. PATH is a file, a\n"
    "directory (walked recursively; tars in it read as below), a tar (.tar, .tar.gz, .tgz,\n"
    ".tar.zst, .tar.xz, .tar.bz2: a WebDataset shard, each image or video member an input\n"
    "carrying its sample's .json, .txt and .cls), or - to read paths from standard input.\n";

static const char usage_tail[] =
    "\n"
    "Exit status: 0 all inputs ok; 2 some inputs failed (see the manifest); 1 usage or fatal error;\n"
    "130 interrupted. Each run writes its statistics to OUT/run-RUN.json and, when it got through\n"
    "every input (failed ones included), OUT/_SUCCESS (per shard _SUCCESS-KKKKK-of-NNNNN).\n"
    "See mvembed(1).\n";

/* ---- --help, from the table ------------------------------------------------------------------ */

enum { HELP_COLUMN = 28 }; /* where descriptions start */

/* "a|b|c" of an enum's names into buf */
static const char *enum_meta(const opt_name *n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (; n->name && len < cap; n++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "|" : "", n->name);
    return buf;
}

static void help_row(const opt_def *d)
{
    char meta[128], head[160];
    const char *mt = d->kind == K_ENUM ? enum_meta(d->names, meta, sizeof meta) : d->meta;
    int n = snprintf(head, sizeof head, "  %c%c%c --%s%s%s", d->short_name ? '-' : ' ',
                     d->short_name ? d->short_name : ' ', d->short_name ? ',' : ' ', d->name,
                     mt ? " " : "", mt ? mt : "");
    printf("%s%*s", head, n < HELP_COLUMN ? HELP_COLUMN - n : 2, "");
    for (const char *p = d->help; *p;) {
        size_t l = strcspn(p, "\n");
        printf("%.*s\n", (int)l, p);
        p += l;
        if (*p == '\n' && *++p)
            printf("%*s", HELP_COLUMN, "");
    }
}

static int print_help(const char *s, mv_run_opts *o)
{
    (void)s, (void)o;
    fputs(usage_head, stdout);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (options[i].kind == K_SECTION)
            printf("\n%s:\n", options[i].name);
        else
            help_row(&options[i]);
    }
    fputs(usage_tail, stdout);
    return OPT_EXIT_OK;
}

static int print_version(const char *s, mv_run_opts *o)
{
    (void)s, (void)o;
    printf("mvembed %s\n", MV_VERSION);
    return OPT_EXIT_OK;
}

/* ---- arguments ------------------------------------------------------------------------------- */

static int parse_shard_size(const char *s, mv_run_opts *o) { return mv_tar_parse_size(s, &o->shard_size); }
static int parse_member_bytes(const char *s, mv_run_opts *o) { return mv_tar_parse_size(s, &o->max_member_bytes); }

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
    if (!strncmp(s, "auto/", 5)) { /* K from the scheduler's array index (mv_shard.h) */
        if (mv_parse_ll(s + 5, 1, INT_MAX, &n))
            return -1;
        o->shard_k = -1;
        o->shard_n = (int)n;
        return 0;
    }
    if (!slash || (size_t)(slash - s) >= sizeof ks)
        return -1;
    memcpy(ks, s, (size_t)(slash - s));
    ks[slash - s] = 0;
    if (mv_parse_ll(ks, 0, INT_MAX, &k) || mv_parse_ll(slash + 1, 1, INT_MAX, &n) || k >= n)
        return -1;
    o->shard_k = (int)k;
    o->shard_n = (int)n;
    return 0;
}

/* The usage error of row d for arg: "--NAME must be ...: ARG", "(out of range)" after a number
 * beyond its type (rc -2). */
static int option_error(const opt_def *d, const char *arg, int rc)
{
    char msg[512], what[300];
    int n = snprintf(msg, sizeof msg, "--%s must be ", d->name);
    if (d->kind == K_ENUM) { /* "a, b or c" */
        for (const opt_name *v = d->names; v->name && n < (int)sizeof msg; v++)
            n += snprintf(msg + n, sizeof msg - n, "%s%s", v == d->names ? "" : v[1].name ? ", " : " or ",
                          v->name);
    } else {
        snprintf(msg + n, sizeof msg - n, "%s", d->must);
    }
    snprintf(what, sizeof what, "%.200s%s", arg, rc == -2 ? " (out of range)" : "");
    return cli_usage_error(msg, what);
}

/* Sets row d's field from arg: -1 when the run goes on, else the status to exit with (0 after
 * --help or --version, 1 after a usage error). */
static int set_option(const opt_def *d, const char *arg, mv_run_opts *o)
{
    char *field = (char *)o + d->at;
    long long v;
    int rc = 0;
    switch (d->kind) {
    case K_FLAG: *(int *)field = (int)d->lo; return -1;
    case K_STRING:
        if (!*arg) { /* `--out ''`: an empty argument, never read as the current directory */
            char msg[64];
            snprintf(msg, sizeof msg, "--%s must not be empty", d->name);
            return cli_usage_error(msg, NULL);
        }
        *(const char **)field = arg;
        return -1;
    case K_INT:
        if (!(rc = mv_parse_ll(arg, d->lo, d->hi, &v)))
            *(int *)field = (int)v;
        break;
    case K_LL: rc = mv_parse_ll(arg, d->lo, d->hi, (long long *)field); break;
    case K_REAL: rc = mv_parse_real(arg, d->rlo, d->open_lo, d->rhi, (double *)field); break;
    case K_ENUM:
        rc = -1;
        for (const opt_name *n = d->names; n->name && rc; n++)
            if (!strcmp(arg, n->name))
                *(int *)field = n->value, rc = 0;
        break;
    case K_CUSTOM:
        rc = d->parse(arg, o);
        if (rc == OPT_EXIT_OK)
            return 0;
        break;
    case K_SECTION: break;
    }
    return rc ? option_error(d, arg, rc) : -1;
}

/* Reads every option of argv into o (the operands: o->paths). -1 when the run goes on, else the
 * status to exit with (0 after --help or --version, 1 after a usage error). */
int cli_parse_args(int argc, char **argv, mv_run_opts *o)
{
    struct option lopts[N_OPTIONS + 1];
    char shorts[2 * N_OPTIONS + 1];
    size_t nl = 0, ns = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *d = &options[i];
        if (d->kind == K_SECTION)
            continue;
        int has_arg = d->kind == K_FLAG || (d->kind == K_CUSTOM && !d->meta) ? no_argument : required_argument;
        lopts[nl++] = (struct option){d->name, has_arg, NULL, 256 + (int)i};
        if (d->short_name) {
            shorts[ns++] = d->short_name;
            if (has_arg == required_argument)
                shorts[ns++] = ':';
        }
    }
    lopts[nl] = (struct option){0, 0, 0, 0};
    shorts[ns] = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
        const opt_def *d = NULL;
        if (c >= 256)
            d = &options[c - 256];
        for (size_t i = 0; i < N_OPTIONS && !d && c > 0 && c < 256; i++)
            if (options[i].kind != K_SECTION && options[i].short_name == c)
                d = &options[i];
        if (!d)
            return cli_usage_error("unknown option", NULL);
        int rc = set_option(d, optarg, o);
        if (rc >= 0)
            return rc;
    }
    o->paths = argv + optind;
    o->n_paths = argc - optind;
    return -1;
}

/* What the options say together: -1 when the run goes on, else 1 after a usage error. */
int cli_check_args(mv_run_opts *o)
{
    o->bopts.verbose = o->verbose;
    if (o->fps > 0 && o->num_frames)
        return cli_usage_error("--fps and --num-frames are mutually exclusive", NULL);
    if (o->shard_samples && o->layout != MV_LAYOUT_TAR)
        return cli_usage_error("--shard-samples needs --layout tar", NULL);
    if (o->shard_size && o->layout != MV_LAYOUT_TAR) /* else a files run would ignore it silently */
        return cli_usage_error("--shard-size needs --layout tar", NULL);
    if (o->zstd_level && o->layout == MV_LAYOUT_TAR) /* the shards' members are plain .npy */
        return cli_usage_error("--zstd-level applies to the files layout's .npy.zst outputs: --layout tar "
                               "writes uncompressed .npy members", NULL);
    if (!o->zstd_level)
        o->zstd_level = 2; /* embeddings: smaller and faster than zstd's usual 3 (man page) */
    if (!o->model_dir || !*o->model_dir)
        return cli_usage_error("no model: give --model DIR or set MVEMBED_MODEL", NULL);
    if (o->pixels) {
        if (!o->grid)
            return cli_usage_error("--pixels needs --grid T,H,W", NULL);
        if (o->n_paths)
            return cli_usage_error("--pixels takes no PATH arguments", NULL);
    } else {
        if (!o->out_dir)
            return cli_usage_error("no output directory: give --out DIR", NULL);
        if (!o->n_paths)
            return cli_usage_error("no inputs: give files, directories, or - for standard input", NULL);
    }
    return -1;
}
