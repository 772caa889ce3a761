/* mv_common.h - status codes and error messages shared by every mvembed module.
 *
 * Library code never exits: it returns an mv_status and writes a one-line reason into an
 * mv_err the caller passed in (stb_image style). Only src/cli/main.c decides to exit.
 * Messages name the file / tensor / cause, e.g. "model/x.safetensors: tensor 'blocks.0.attn.qkv.weight':
 * shape [3,4] does not match config [3456,1152]".
 */
#ifndef MV_COMMON_H
#define MV_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MV_OK = 0,
    MV_ERR_IO,          /* open/read/write/fsync/rename failed */
    MV_ERR_FORMAT,      /* malformed input file (image, video, npy, safetensors, json) */
    MV_ERR_MODEL,       /* model directory inconsistent: missing tensor, wrong shape, bad config */
    MV_ERR_UNSUPPORTED, /* valid but unsupported (dtype, codec, pixel format) */
    MV_ERR_LIMIT,       /* refused by a configured limit (pixel count, aspect ratio, timeout) */
    MV_ERR_NOMEM,       /* allocation failed */
    MV_ERR_DEVICE,      /* CUDA / cuBLASLt failure */
    MV_ERR_USAGE,       /* bad option or argument */
    MV_ERR_INTERNAL,
    MV_ERR_OUTPUT,      /* this one output cannot be written where it belongs (name too long, a
                         * directory or file in the way, no permission there); unlike MV_ERR_IO
                         * (a full, read-only or failing disk) other outputs can still be written */
    MV_ERR_NOROOM,      /* no address space left (ulimit -v; mv_address_room): the run's shortage,
                         * never one input's fault */
} mv_status;

typedef struct {
    char msg[1024];
} mv_err;

/* Default decode budget in pixels, for an image and for a video frame (--max-decode-pixels):
 * PIL's decompression-bomb error threshold, 2 * Image.MAX_IMAGE_PIXELS. */
#define MV_DECODE_MAX_PIXELS_DEFAULT 178956970LL

/* Formats the message into e (if non-NULL) and returns s. A message longer than e->msg keeps its
 * start and its end around " ... " (the cause after a long path), cut between UTF-8 sequences. */
mv_status mv_fail(mv_err *e, mv_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message: "prefix: old message", shortened as mv_fail does. Returns s. */
mv_status mv_fail_prefix(mv_err *e, mv_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *mv_status_str(mv_status s);

/* Replaces control bytes (below 0x20, and 0x7f) in s with '?', in place, and returns s: for text
 * that comes from a file (a JSON parser's "near '...'" excerpt) and goes into a one-line message. */
char *mv_printable(char *s);

/* Escapes s for a one-line message on a terminal (stderr): a backslash as two, newline, CR and
 * tab as \n \r \t, other control bytes (below 0x20, 0x7f), C1 controls (U+0080..U+009F) and bytes
 * that are not valid UTF-8 as \xHH; valid UTF-8 is kept. Writes into buf[cap] (cap >= 4),
 * shortened with "..." when it does not fit, and returns buf. For every path or message that
 * holds a path and goes to stderr: a file name cannot forge a line or send terminal escapes. */
const char *mv_escape(const char *s, char *buf, size_t cap);

/* Number of NaN / +-Inf values in x[0..n) (one branch-free pass the compiler vectorises). */
size_t mv_count_nonfinite(const float *x, size_t n);

/* Checked allocation helpers: NULL on failure (caller reports MV_ERR_NOMEM). */
void *mv_malloc(size_t n);
void *mv_calloc(size_t n, size_t size);

/* Whether a mapping of `bytes` of address space can be made now (made and given back at once).
 * Under an address-space limit (ulimit -v) an allocation that failed while this says no failed
 * for want of room, the run's (fatal), not for the size an input asked for (that input's). */
int mv_address_room(size_t bytes);
#define MV_ROOM_PROBE ((size_t)16 << 20)

/* Whether the process has a finite address-space limit (RLIMIT_AS; src/cli/main.c reads it and
 * says so here before any thread starts). Without one (limited 0) mv_address_room and
 * mv_omp_room say yes without probing: their mmap + munmap fails only under such a limit, and
 * they stand on hot paths (every oneDNN primitive-cache miss, every CPU forward until its team
 * is noted). Until this is called they probe (limited 1). */
void mv_room_set_limited(int limited);

/* Whether a failure st is the run's shortage of address space (fatal), not one input's: always
 * MV_ERR_NOROOM, and MV_ERR_NOMEM when no MV_ROOM_PROBE of room is left now (mv_address_room)
 * or, with team, when the calling thread's OpenMP team cannot start (mv_omp_room(0): the CPU
 * tower's forwards). The one rule for the pipeline's stages (item.c, towers.c, writers.c). */
int mv_short_of_room(mv_status st, int team);

/* Whether an OpenMP team of `threads` (0: omp_get_max_threads()) can start on the calling thread:
 * libgomp ends the process (exit 1, "libgomp: Thread creation failed") when it cannot make a
 * team's threads, so under an address-space limit a parallel region asks here first (room for
 * their stacks) and runs serially, or fails its work, where there is none. A team that started
 * stays (libgomp keeps its threads): mv_omp_started notes it (the largest per thread), and a team
 * no larger needs no room. mv_omp_region: both, for a region's `if` clause (it starts at once). */
int mv_omp_room(int threads);
void mv_omp_started(int threads);
static inline int mv_omp_region(int threads)
{
    return mv_omp_room(threads) ? (mv_omp_started(threads), 1) : 0;
}

/* Reads a whole file into a malloc'd buffer (NUL-terminated for convenience). */
mv_status mv_read_file(const char *path, uint8_t **data, size_t *len, mv_err *e);

/* Opens path read-only for a file that must be a regular file: opened with O_NONBLOCK (a FIFO
 * does not block the open), checked with fstat, then switched back to blocking reads. A FIFO,
 * device, socket or directory fails with MV_ERR_IO "PATH: not a regular file (a fifo)". Returns
 * the descriptor in *fd (O_CLOEXEC), which the caller closes. */
mv_status mv_open_regular(const char *path, int *fd, mv_err *e);

/* mkdir -p: creates dir and its missing parents (mode 0777 & ~umask). On failure errno holds the
 * cause (ENAMETOOLONG for a name over 4095 bytes). */
mv_status mv_mkdirs(const char *dir, mv_err *e);
/* Why opening path failed with err, in words: for a symbolic link, where it leads (a dangling
 * one, a loop of links), else strerror(err). */
void mv_path_why(const char *path, int err, char *why, size_t cap);

/* A time (seconds, nanoseconds 0..999999999) in nanoseconds since the epoch, saturated to
 * INT64_MAX / INT64_MIN outside int64's range (after 2262-04-11, before 1677-09-22): never a
 * wrapped value. */
int64_t mv_time_ns(int64_t sec, long nsec);
/* Such a time in words into out[cap]: "seconds.nanoseconds" since the epoch, or "S s" (whole
 * seconds s) where ns is saturated. */
void mv_time_words(int64_t ns, int64_t s, char *out, size_t cap);

/* write(2) of all n bytes (EINTR retried): 0, or -1 with errno (EIO for a write of 0 bytes). */
int mv_write_all(int fd, const void *buf, size_t n);

/* fsync of directory dir (EINVAL, a file system that cannot, and EROFS are fine): MV_OK, or
 * MV_ERR_IO naming dir in e (e may be NULL, for a caller that words its own message) with errno
 * the cause. */
mv_status mv_sync_dir(const char *dir, mv_err *e);

/* CPUs this process may run on (its affinity mask: taskset, Slurm and container CPU sets), for
 * default thread counts; the online CPU count when the mask cannot be read. */
int mv_cpu_count(void);

/* A file written sequentially up to pos: starts (without waiting) the writeback of what it gained
 * since *flushed once that is 32 MiB, so that the fsync completing it waits for the last part
 * only rather than for all of it at once. A hint: where sync_file_range is missing or fails, the
 * fsync does it all. */
void mv_start_writeback(int fd, int64_t *flushed, int64_t pos);

/* Monotonic clock in seconds. */
double mv_now(void);

/* pthread_create with a stack of at least 8 MiB: a thread's stack otherwise follows
 * RLIMIT_STACK (ulimit -s), and a small one overflows in the pipeline's frames and the
 * libraries' thread-local storage. 0, or an errno value as pthread_create returns. */
int mv_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
/* The same 8 MiB for threads created without a stack size (pthread's default attributes:
 * OpenMP's team, the libraries' own threads), where the default is less; main calls it first. */
void mv_thread_stacks_default(void);

/* The path from / of the file at path: its directory resolved (realpath: ".", "..", symlinks),
 * '/', its name (the name itself not followed); where the directory does not resolve (gone, or a
 * directory inside a tar), the working directory cwd (NULL: unknown) joined to a relative path,
 * empty and "." components left out. dc keeps the last directory resolved (a walk meets a
 * directory's files one after another): zero-initialise it, free it with mv_dir_cache_free.
 * malloc'd; NULL when not known, or out of memory (then *oom is set). */
typedef struct {
    char *dir, *real;
} mv_dir_cache;
char *mv_path_from_root(mv_dir_cache *dc, const char *cwd, const char *path, int *oom);
void mv_dir_cache_free(mv_dir_cache *dc);

#endif
