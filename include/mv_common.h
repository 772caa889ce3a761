/* mv_common.h - status codes and error messages shared by every mvembed module.
 *
 * Library code never exits: it returns an mv_status and writes a one-line reason into an
 * mv_err the caller passed in (stb_image style). Only src/main.c decides to exit.
 * Messages name the file / tensor / cause, e.g. "model/x.safetensors: tensor 'blocks.0.attn.qkv.weight':
 * shape [3,4] does not match config [3456,1152]".
 */
#ifndef MV_COMMON_H
#define MV_COMMON_H

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
} mv_status;

typedef struct {
    char msg[1024];
} mv_err;

/* Formats the message into e (if non-NULL) and returns s. */
mv_status mv_fail(mv_err *e, mv_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message: "prefix: old message". Returns s. */
mv_status mv_fail_prefix(mv_err *e, mv_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *mv_status_str(mv_status s);

/* Replaces control bytes (below 0x20, and 0x7f) in s with '?', in place, and returns s: for text
 * that comes from a file (a JSON parser's "near '...'" excerpt) and goes into a one-line message. */
char *mv_printable(char *s);

/* Checked allocation helpers: NULL on failure (caller reports MV_ERR_NOMEM). */
void *mv_malloc(size_t n);
void *mv_calloc(size_t n, size_t size);

/* Reads a whole file into a malloc'd buffer (NUL-terminated for convenience). */
mv_status mv_read_file(const char *path, uint8_t **data, size_t *len, mv_err *e);

/* mkdir -p: creates dir and its missing parents (mode 0777 & ~umask). */
mv_status mv_mkdirs(const char *dir, mv_err *e);

/* CPUs this process may run on: the affinity mask (taskset, cgroup cpusets, Slurm), else the
 * online CPUs; at least 1. The default thread count of the CPU tower. */
int mv_cpu_count(void);

/* Monotonic clock in seconds. */
double mv_now(void);

#endif
