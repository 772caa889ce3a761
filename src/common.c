/* common.c - error formatting and small helpers (see mv_common.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "mv_common.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

mv_status mv_fail(mv_err *e, mv_status s, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

char *mv_printable(char *s)
{
    for (unsigned char *c = (unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            *c = '?';
    return s;
}

mv_status mv_fail_prefix(mv_err *e, mv_status s, const char *fmt, ...)
{
    if (e) {
        char prefix[512], old[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        size_t pl = strlen(prefix);
        if (pl > sizeof e->msg - 3)
            pl = sizeof e->msg - 3;
        memcpy(e->msg, prefix, pl);
        memcpy(e->msg + pl, ": ", 2);
        size_t rest = sizeof e->msg - pl - 3, ol = strlen(old);
        if (ol > rest)
            ol = rest;
        memcpy(e->msg + pl + 2, old, ol);
        e->msg[pl + 2 + ol] = 0;
    }
    return s;
}

const char *mv_status_str(mv_status s)
{
    switch (s) {
    case MV_OK: return "ok";
    case MV_ERR_IO: return "i/o error";
    case MV_ERR_FORMAT: return "bad format";
    case MV_ERR_MODEL: return "bad model";
    case MV_ERR_UNSUPPORTED: return "unsupported";
    case MV_ERR_LIMIT: return "limit exceeded";
    case MV_ERR_NOMEM: return "out of memory";
    case MV_ERR_DEVICE: return "device error";
    case MV_ERR_USAGE: return "usage error";
    case MV_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

void *mv_malloc(size_t n) { return malloc(n ? n : 1); }
void *mv_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }

mv_status mv_read_file(const char *path, uint8_t **data, size_t *len, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    if (ferror(f)) {
        int er = errno;
        free(buf);
        fclose(f);
        return mv_fail(e, MV_ERR_IO, "%s: read failed: %s", path, strerror(er));
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return MV_OK;
}

/* mkdir -p on a writable copy: 0, or -1 with errno and failed[] holding the component that failed
 * (copied: the caller's buffer is restored on the way back up). Tolerates a concurrent creator
 * (EEXIST on a directory). */
static int fail_at(const char *dir, char *failed, int err)
{
    snprintf(failed, 4096, "%s", dir);
    errno = err;
    return -1;
}

static int mkdirs_rec(char *dir, char *failed)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        return fail_at(dir, failed, ENOTDIR);
    }
    if (mkdir(dir, 0777) == 0)
        return 0;
    if (errno == EEXIST) { /* raced with another writer, or a dangling symlink */
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
            return 0;
        return fail_at(dir, failed, ENOTDIR);
    }
    if (errno != ENOENT && errno != ENOTDIR) /* ENOTDIR: find the parent that is a file */
        return fail_at(dir, failed, errno);
    char *slash = strrchr(dir, '/');
    while (slash && slash > dir && slash[-1] == '/')
        slash--;
    if (!slash || slash == dir) {
        return fail_at(dir, failed, ENOENT);
    }
    *slash = 0;
    int r = mkdirs_rec(dir, failed);
    *slash = '/';
    if (r)
        return -1;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    return fail_at(dir, failed, errno == EEXIST ? ENOTDIR : errno);
}

mv_status mv_mkdirs(const char *dir, mv_err *e)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return mv_fail(e, MV_ERR_IO, "%s: bad directory name", dir);
    memcpy(buf, dir, n + 1);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    char failed[4096];
    if (mkdirs_rec(buf, failed) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: %s", failed, strerror(errno));
    return MV_OK;
}

double mv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int mv_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
