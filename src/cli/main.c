/* main.c - the mvembed command: the command line and the environment read into an mv_run_opts,
 * mv_run called, its result turned into the exit status. The only file of src/ that reads the
 * environment or decides exit statuses; everything else lives in the library (src/run/run.c
 * drives the batch).
 *
 * The options themselves (the table, --help, argument checks) are options.c's.
 *
 * Exit statuses: 0 every input ok, 2 some inputs failed, 1 usage or fatal error (standard output
 * that cannot be written too), 128 + signal when interrupted (141: standard output's reader gone). */
#include "mv_gemm_amx.h"
#include "mv_gemm_cpu.h"
#include "mv_numparse.h"
#include "mv_pool.h"
#include "mv_run.h"
#include "mv_stdfds.h"
#include "mv_tar.h"
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>


/* The first SIGINT, SIGTERM, SIGHUP (a dropped ssh connection), SIGQUIT or SIGXCPU (the CPU time
 * limit, ulimit -t, as batch schedulers set it) asks the run to stop starting work
 * (mv_run_opts.interrupt); a second one leaves at once (temp files are swept by the next run),
 * except SIGXCPU, which the kernel sends again each CPU second past the soft limit while the run
 * finishes what it started (the hard limit's SIGKILL still ends it). */
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    if (g_interrupted && sig == SIGXCPU)
        return;
    if (g_interrupted)
        _exit(128 + sig);
    g_interrupted = sig;
}

/* During a run the stop signals are blocked in every thread the run starts and taken here, by
 * sigwait, never by a handler on a thread that works: oneDNN's JIT GEMM kernels use the stack
 * pointer as a data register, and a signal delivered to a thread inside one has the kernel write
 * its frame at that "stack", over the heap (SIGXCPU, raised on the thread that used up the CPU
 * second, mostly lands there: a heap corrupted one run in ten). Cancelled when the run ends. */
static void *stop_waiter(void *arg)
{
    const sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) == 0)
            on_signal(sig);
    }
    return NULL;
}

/* The process's address-space and data-segment limits (ulimit -v / -d, soft): RLIM_INFINITY for
 * none, or where one cannot be read. */
static void memory_limits(rlim_t *as, rlim_t *data)
{
    struct rlimit rl;
    *as = getrlimit(RLIMIT_AS, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
    *data = getrlimit(RLIMIT_DATA, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
}

/* OpenBLAS started a server thread per CPU when it loaded (before main), each reserving a buffer
 * of about 128 MiB of address space and retrying forever when that fails (under `ulimit -v`: a
 * hang). mvembed calls OpenBLAS on one thread only (mv_blas_single_threaded), so under such a
 * limit (limited: one of memory_limits) the program starts itself again with
 * OPENBLAS_NUM_THREADS=1, once; where it cannot, it goes on with the threads. Without a limit
 * nothing is restarted (the reservations cost nothing, and tools that follow one program, such
 * as valgrind, keep following it). */
static void blas_without_threads(char **argv, int limited)
{
    const char *v = getenv("OPENBLAS_NUM_THREADS");
    if (mv_blas_threads_at_load() <= 1 || (v && !strcmp(v, "1")) || !limited)
        return;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0)
        return;
    self[n] = 0;
    execv(self, argv); /* by its name, which ps and pgrep show; then by the link (a deleted file) */
    execv("/proc/self/exe", argv);
}

/* Under an address-space limit as (ulimit -v), glibc's malloc reserving 64 MiB per arena, up to
 * eight per CPU, would take it all before the run needs any: at most one arena per 256 MiB of it. */
static void fit_address_space(rlim_t as)
{
    if (as == RLIM_INFINITY)
        return;
    rlim_t arenas = as >> 28;
    mallopt(M_ARENA_MAX, arenas < 1 ? 1 : arenas > 64 ? 64 : (int)arenas);
}

/* ---- the program ----------------------------------------------------------------------------- */

static void defaults(mv_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->out_dtype = MV_DT_AUTO; /* f16 for bf16 tokens, else f32 (run.c, mv_output_dtype) */
    /* zstd_level 0: not given (cli_check_args makes it 2, or refuses one given with --layout tar) */
    o->max_decode_pixels = 178956970LL;
    o->timeout = 600;
    o->progress = -1;
    o->bopts.precision = MV_PREC_BF16;
    o->bopts.cpu_gemm = MV_CPU_GEMM_AUTO; /* bf16x6 where AMX is usable: faster and closer to f64 */
}

/* What the program takes from the environment (man page, ENVIRONMENT): -1 when the run goes on,
 * else 1 after a value it cannot take. */
static int from_environment(mv_run_opts *o)
{
    o->model_dir = getenv("MVEMBED_MODEL");
    o->bopts.cudnn_lib = getenv("MV_CUDNN_LIB"); /* where libcudnn.so.9 is tried first */
    o->hub = (mv_hub_env){.hf_hub_cache = getenv("HF_HUB_CACHE"), .hf_home = getenv("HF_HOME"),
                          .huggingface_hub_cache = getenv("HUGGINGFACE_HUB_CACHE"),
                          .xdg_cache_home = getenv("XDG_CACHE_HOME"), .home = getenv("HOME")};
    o->slurm = (mv_slurm_array){.id = getenv("SLURM_ARRAY_TASK_ID"), .count = getenv("SLURM_ARRAY_TASK_COUNT"),
                                .min = getenv("SLURM_ARRAY_TASK_MIN"), .max = getenv("SLURM_ARRAY_TASK_MAX"),
                                .step = getenv("SLURM_ARRAY_TASK_STEP")};
    o->k8s_index = getenv("JOB_COMPLETION_INDEX");
    o->aws_index = getenv("AWS_BATCH_JOB_ARRAY_INDEX");
    o->aws_size = getenv("AWS_BATCH_JOB_ARRAY_SIZE");
    /* set and not 0: act as on a CPU without AMX (--cpu-gemm auto takes f32, bf16x6 is refused) */
    const char *no_amx = getenv("MV_NO_AMX");
    if (no_amx && strcmp(no_amx, "0"))
        mv_amx_refuse("MV_NO_AMX is set");
    /* test hooks: a test must not run what it did not ask for, so any other value is refused */
    const char *fake = getenv("MVEMBED_TEST_CPU_DEVICES"), *pause = getenv("MVEMBED_TEST_PAUSE_TAR_OPEN");
    long long n = 0, ms = 0;
    if ((fake && *fake && (mv_parse_ll(fake, 0, MV_TEST_CPU_DEVICES_MAX, &n) || n == 1)) ||
        (pause && *pause && mv_parse_ll(pause, 0, 60000, &ms))) {
        char esc[256], esc2[256];
        fprintf(stderr, "mvembed: MVEMBED_TEST_CPU_DEVICES=%s, MVEMBED_TEST_PAUSE_TAR_OPEN=%s: test hooks; give "
                "2..%d and 0..60000 (milliseconds) or leave them unset\n", mv_escape(fake ? fake : "", esc, 256),
                mv_escape(pause ? pause : "", esc2, 256), MV_TEST_CPU_DEVICES_MAX);
        return 1;
    }
    o->test_cpu_devices = (int)n;
    o->test_pause_tar_open_ms = (int)ms; /* each temporary tar shard waits that long once created */
    o->batch_job = getenv("SLURM_JOB_ID") != NULL; /* a batch job's log: plain progress lines */
    /* 0 (comparisons): the forwards in flight on one device queue their work at once */
    const char *turns = getenv("MVEMBED_FORWARD_TURNS");
    o->forward_overlap = turns && !strcmp(turns, "0");
    /* test hooks, on with 1: full windows only (packing without timing); the CPU backend's tokens
     * rounded to bf16, or decoded images resized by it, as the CUDA backend does both */
    const char *fill = getenv("MVEMBED_TEST_FILL_WINDOW"), *ob = getenv("MVEMBED_TEST_OUT_BF16");
    const char *rz = getenv("MVEMBED_TEST_CPU_RESIZES");
    o->test_fill_window = fill && !strcmp(fill, "1");
    o->bopts.test_out_bf16 = ob && !strcmp(ob, "1");
    o->bopts.test_resizes = rz && !strcmp(rz, "1");
    return -1;
}

/* `mvembed manifest merge OUT`, `mvembed manifest compact [--all] OUT` and
 * `mvembed manifest failed OUT [-0]`. */
static int manifest_command(int argc, char **argv)
{
    mv_err e;
    int rc, all = argc == 5 && !strcmp(argv[3], "--all");
    int nul = argc == 5 && (!strcmp(argv[3], "-0") || !strcmp(argv[3], "--null"));
    int nul_after = argc == 5 && (!strcmp(argv[4], "-0") || !strcmp(argv[4], "--null"));
    if (argc == 4 && !strcmp(argv[2], "merge"))
        rc = mv_manifest_merge_dir(argv[3], 0, &e);
    else if ((argc == 4 || all) && !strcmp(argv[2], "compact"))
        rc = mv_manifest_compact_dir(argv[argc - 1], all, 0, &e);
    else if ((argc == 4 || nul || nul_after) && !strcmp(argv[2], "failed")) {
        if (mv_stdfds_was_closed(1)) { /* the list is the command's product: never lost unsaid */
            fprintf(stderr, "mvembed: manifest failed: standard output is closed: the list of failed "
                            "inputs would be lost\n");
            return 1;
        }
        rc = mv_manifest_failed_dir(argv[nul ? 4 : 3], nul || nul_after, stdout, &e);
        if (rc && ferror(stdout) && errno == EPIPE) /* the reader left (`| head`): as SIGPIPE's default */
            return 128 + SIGPIPE;
    }
    else
        return cli_usage_error("usage: mvembed manifest merge OUT | mvembed manifest compact [--all] OUT | "
                               "mvembed manifest failed OUT [-0]", NULL);
    char esc[4200];
    if (rc)
        fprintf(stderr, "mvembed: %s\n", mv_escape(e.msg, esc, sizeof esc));
    return rc;
}

/* Runs the batch with the stop signals taken (by stop_waiter; where no thread can be started for
 * it, by on_signal on whichever thread they reach, as on the threads that were there before: the
 * handler is set for them); the exit status. */
static int run(mv_run_opts *o)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    static const int stop[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXCPU};
    sigset_t set, before;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++) {
        struct sigaction old;
        /* a SIGHUP the caller ignores (nohup) stays ignored; SIGINT and SIGQUIT are taken even
         * when ignored, as a shell without job control ignores them for `cmd &` */
        if (stop[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(stop[i], &sa, NULL);
        sigaddset(&set, stop[i]);
    }
    pthread_t waiter;
    int waiting = pthread_sigmask(SIG_BLOCK, &set, &before) == 0;
    if (waiting && mv_thread_create(&waiter, stop_waiter, &set) != 0) {
        pthread_sigmask(SIG_SETMASK, &before, NULL);
        waiting = 0;
    }
    o->interrupt = &g_interrupted;
    mv_err e;
    e.msg[0] = 0;
    mv_run_result res;
    mv_status st = mv_run(o, &res, &e);
    if (waiting) { /* a signal still pending goes to on_signal on this thread */
        pthread_cancel(waiter);
        pthread_join(waiter, NULL);
        pthread_sigmask(SIG_SETMASK, &before, NULL);
    }
    if (st) {
        char esc[4200]; /* the message names a path: escaped, so it cannot forge lines */
        fprintf(stderr, "mvembed: %s\n", e.msg[0] ? mv_escape(e.msg, esc, sizeof esc) : "failed");
        if (res.after_fatal[0]) /* the cause first, then what failed because of it */
            fprintf(stderr, "mvembed: %s\n", mv_escape(res.after_fatal, esc, sizeof esc));
        return 1;
    }
    if (res.signal)
        return 128 + res.signal;
    return res.failed ? 2 : 0;
}

/* What went to standard output (--help, --version, manifest failed) must have reached it, as GNU
 * coreutils' close_stdout checks: else the cause on stderr and status 1 (unless an error was
 * already reported: status 1, or an interrupt's; 141 without a word where the reader is gone). */
static int close_stdout(int rc)
{
    int had = ferror(stdout);
    errno = 0;
    if (fclose(stdout) == 0 && !had)
        return rc;
    int err = errno;
    if (rc == 1 || rc >= 128)
        return rc;
    if (err == EPIPE) /* the reader left (`| head`): what SIGPIPE's default would have given */
        return 128 + SIGPIPE;
    fprintf(stderr, "mvembed: cannot write to standard output%s%s\n", err ? ": " : "", err ? strerror(err) : "");
    return 1;
}

/* Everything after the process's set-up: the manifest command or a batch; the exit status. */
static int body(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "manifest"))
        return close_stdout(manifest_command(argc, argv));
    mv_run_opts o;
    defaults(&o);
    int rc = from_environment(&o);
    if (rc < 0)
        rc = cli_parse_args(argc, argv, &o);
    if (rc < 0)
        rc = cli_check_args(&o);
    return close_stdout(rc < 0 ? run(&o) : rc);
}

typedef struct {
    int argc, rc;
    char **argv;
} body_args;

static void *body_thread(void *p)
{
    body_args *a = p;
    a->rc = body(a->argc, a->argv);
    return NULL;
}

int main(int argc, char **argv)
{
    /* threads the libraries start (OpenMP's team, oneDNN's) get 8 MiB of stack too, whatever
     * ulimit -s says (glibc's default follows it: 64 KiB is too little for oneDNN) */
    mv_thread_stacks_default();
    rlim_t as, data;
    memory_limits(&as, &data);
    /* first: the new program sees the descriptors as they were */
    blas_without_threads(argv, as != RLIM_INFINITY || data != RLIM_INFINITY);
    fit_address_space(as);
    mv_room_set_limited(as != RLIM_INFINITY); /* the room probes only where a limit can be hit */
    if (mv_stdfds_guard())
        return 1; /* no /dev/null for a closed 0-2: nothing may be opened, no message written */
    /* a reader of stderr gone (`2>&1 | head`): writes fail with EPIPE, ignored, the run goes on */
    signal(SIGPIPE, SIG_IGN);
    /* a file size limit (ulimit -f): a write past it fails with EFBIG, a fatal disk error that
     * removes its temp file and says so, instead of SIGXFSZ killing the run mid-write */
    signal(SIGXFSZ, SIG_IGN);
    /* The work runs on a thread of 8 MiB stack (mv_thread_create): the main thread's is what
     * ulimit -s gives, maybe 64 KiB or less. The main thread only waits, with the stop signals
     * blocked, so that they reach another thread (during a run: run()'s stop_waiter). */
    body_args a = {argc, 1, argv};
    pthread_t t;
    if (mv_thread_create(&t, body_thread, &a) != 0)
        return body(argc, argv); /* no thread to be had: on this stack, as it is */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigaddset(&stop, SIGQUIT);
    sigaddset(&stop, SIGXCPU);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    pthread_join(t, NULL);
    return a.rc;
}
