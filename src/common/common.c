/* common.c - error formatting and small helpers (see mv_common.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, sync_file_range */
#include "mv_common.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Puts the len bytes of src into dst[cap] (cap >= 64): as they are when they fit, else their start
 * and their end around " ... ", so that a message keeps its cause (its end) after a long path.
 * The cuts fall between UTF-8 sequences. */
static void fit_msg(char *dst, size_t cap, const char *src, size_t len)
{
    if (len < cap) {
        memmove(dst, src, len);
        dst[len] = 0;
        return;
    }
    static const char mid[] = " ... ";
    size_t head = (cap - sizeof mid) / 4, tail = cap - sizeof mid - head;
    size_t from = len - tail;
    while (head > 0 && ((unsigned char)src[head] & 0xc0) == 0x80)
        head--; /* src[head] starts a sequence: the head ends before it */
    while (from < len && ((unsigned char)src[from] & 0xc0) == 0x80)
        from++;
    char *p = dst;
    memmove(p, src, head);
    p += head;
    memcpy(p, mid, sizeof mid - 1);
    p += sizeof mid - 1;
    memmove(p, src + from, len - from);
    p[len - from] = 0;
}

mv_status mv_fail(mv_err *e, mv_status s, const char *fmt, ...)
{
    if (e) {
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        char *full = n >= (int)sizeof e->msg ? malloc((size_t)n + 1) : NULL;
        if (full) { /* too long: the whole message, then its start and its end (else: its start) */
            vsnprintf(full, (size_t)n + 1, fmt, again);
            fit_msg(e->msg, sizeof e->msg, full, (size_t)n);
            free(full);
        }
        va_end(again);
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

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when the byte at s is invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlongs */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* <= U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

const char *mv_escape(const char *s, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), o = 0;
    if (cap < 4) {
        if (cap)
            buf[0] = 0;
        return buf;
    }
    for (size_t i = 0; i < n;) {
        char t[8];
        size_t tl, k = utf8_len(u + i, n - i);
        if (k == 1 && u[i] >= 0x20 && u[i] != 0x7f && u[i] != '\\') {
            t[0] = (char)u[i];
            tl = 1;
        } else if (k == 1 && (u[i] == '\\' || u[i] == '\n' || u[i] == '\r' || u[i] == '\t')) {
            t[0] = '\\';
            t[1] = u[i] == '\n' ? 'n' : u[i] == '\r' ? 'r' : u[i] == '\t' ? 't' : '\\';
            tl = 2;
        } else if (k > 1 && !(k == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0)) {
            memcpy(t, u + i, k); /* printable UTF-8 */
            tl = k;
        } else { /* a control byte, a C1 control (first of its two bytes), invalid UTF-8 */
            t[0] = '\\';
            t[1] = 'x';
            t[2] = hex[u[i] >> 4];
            t[3] = hex[u[i] & 15];
            tl = 4;
            k = 1;
        }
        if (o + tl + 4 > cap) { /* keep room for "..." and the NUL */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, t, tl);
        o += tl;
        i += k;
    }
    buf[o] = 0;
    return buf;
}

size_t mv_count_nonfinite(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) { /* blocks, so that a 32-bit count vectorises */
        size_t m = n - i < ((size_t)1 << 20) ? n - i : ((size_t)1 << 20);
        uint32_t c = 0;
#pragma omp simd reduction(+ : c)
        for (size_t k = 0; k < m; k++) { /* exponent bits all ones: Inf or NaN */
            uint32_t u;
            memcpy(&u, x + i + k, sizeof u);
            c += (u & 0x7f800000u) == 0x7f800000u;
        }
        bad += c;
        i += m;
    }
    return bad;
}

mv_status mv_fail_prefix(mv_err *e, mv_status s, const char *fmt, ...)
{
    if (e) {
        char prefix[512], all[sizeof prefix + 2 + sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        int n = snprintf(all, sizeof all, "%s: %s", prefix, e->msg);
        fit_msg(e->msg, sizeof e->msg, all, n < (int)sizeof all ? (size_t)n : sizeof all - 1);
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
    case MV_ERR_NOROOM: return "out of address space";
    case MV_ERR_DEVICE: return "device error";
    case MV_ERR_USAGE: return "usage error";
    case MV_ERR_INTERNAL: return "internal error";
    case MV_ERR_OUTPUT: return "output not writable";
    }
    return "unknown error";
}

void *mv_malloc(size_t n) { return malloc(n ? n : 1); }
void *mv_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }

mv_status mv_open_regular(const char *path, int *fd, mv_err *e)
{
    *fd = -1;
    int d = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (d < 0)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(d, &sb) < 0) {
        int er = errno;
        close(d);
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(er));
    }
    if (!S_ISREG(sb.st_mode)) {
        const char *what = S_ISFIFO(sb.st_mode) ? "a fifo" : S_ISDIR(sb.st_mode) ? "a directory"
                           : S_ISCHR(sb.st_mode) ? "a character device" : S_ISBLK(sb.st_mode) ? "a block device"
                           : S_ISSOCK(sb.st_mode) ? "a socket" : "not a file";
        close(d);
        return mv_fail(e, MV_ERR_IO, "%s: not a regular file (%s)", path, what);
    }
    int fl = fcntl(d, F_GETFL);
    if (fl < 0 || fcntl(d, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int er = errno;
        close(d);
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(er));
    }
    *fd = d;
    return MV_OK;
}

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

static const char *file_kind(mode_t m)
{
    return S_ISREG(m) ? "a regular file" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "a file";
}

/* ELOOP on a path that is no link itself: the first directory on the way that is a symbolic
 * link in a loop, named with where it leads; plain words when none is found (the loop moved). */
static void loop_on_the_way(const char *path, char *why, size_t cap)
{
    char pre[4096], to[1024];
    struct stat st;
    size_t n = strlen(path);
    for (size_t i = 1; i < n && i < sizeof pre; i++) {
        if (path[i] != '/' || path[i - 1] == '/')
            continue;
        memcpy(pre, path, i);
        pre[i] = 0;
        ssize_t k;
        if (stat(pre, &st) == 0 || errno != ELOOP)
            continue;
        if (lstat(pre, &st) == 0 && S_ISLNK(st.st_mode) && (k = readlink(pre, to, sizeof to - 1)) > 0) {
            to[k] = 0;
            snprintf(why, cap, "too many levels of symbolic links: %s is a symbolic link (to %s) in a "
                     "loop of symbolic links", pre, to);
            return;
        }
    }
    snprintf(why, cap, "too many levels of symbolic links");
}

void mv_path_why(const char *path, int err, char *why, size_t cap)
{
    struct stat st;
    char to[1024];
    ssize_t n;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || (n = readlink(path, to, sizeof to - 1)) <= 0) {
        if (err == ELOOP)
            loop_on_the_way(path, why, cap);
        else
            snprintf(why, cap, "%s", strerror(err));
        return;
    }
    to[n] = 0;
    if (err == ENOENT && stat(path, &st) != 0 && errno == ENOENT)
        snprintf(why, cap, "a dangling symbolic link (to %s, which does not exist)", to);
    else if (err == ELOOP)
        snprintf(why, cap, "a symbolic link (to %s) in a loop of symbolic links", to);
    else
        snprintf(why, cap, "a symbolic link (to %s): %s", to, strerror(err));
}

/* Why path, which mkdir found in the way, is not a directory: what it is, and for a symbolic link
 * where it leads (nowhere: dangling; round: a loop). */
static void not_dir_why(const char *path, char *why, size_t cap)
{
    struct stat st;
    char to[1024];
    if (lstat(path, &st) != 0) {
        snprintf(why, cap, "%s", strerror(ENOTDIR));
        return;
    }
    if (!S_ISLNK(st.st_mode)) {
        snprintf(why, cap, "%s, not a directory", file_kind(st.st_mode));
        return;
    }
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = 0;
    if (stat(path, &st) == 0)
        snprintf(why, cap, "a symbolic link (to %s) to %s, not a directory", to, file_kind(st.st_mode));
    else
        mv_path_why(path, errno, why, cap);
}

mv_status mv_mkdirs(const char *dir, mv_err *e)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) {
        mv_fail(e, MV_ERR_IO, "%.200s...: %s", dir, strerror(n ? ENAMETOOLONG : ENOENT));
        errno = n ? ENAMETOOLONG : ENOENT;
        return MV_ERR_IO;
    }
    memcpy(buf, dir, n + 1);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    char failed[4096], why[1200];
    if (mkdirs_rec(buf, failed) != 0) {
        int err = errno;
        if (err == ENOTDIR)
            not_dir_why(failed, why, sizeof why);
        else if (err == ELOOP)
            mv_path_why(failed, err, why, sizeof why);
        else
            snprintf(why, sizeof why, "%s", strerror(err));
        if (strcmp(failed, buf))
            mv_fail(e, MV_ERR_IO, "%s: %s (on the way to %s)", failed, why, buf);
        else
            mv_fail(e, MV_ERR_IO, "%s: %s", failed, why);
        errno = err;
        return MV_ERR_IO;
    }
    return MV_OK;
}

void mv_start_writeback(int fd, int64_t *flushed, int64_t pos)
{
    enum { STEP = 32 << 20 };
#ifdef SYNC_FILE_RANGE_WRITE
    if (pos - *flushed >= STEP) {
        (void)sync_file_range(fd, *flushed, pos - *flushed, SYNC_FILE_RANGE_WRITE); /* a hint */
        *flushed = pos;
    }
#else
    (void)fd, (void)flushed, (void)pos;
#endif
}

int mv_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

mv_status mv_sync_dir(const char *dir, mv_err *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int bad = fd < 0 || (fsync(fd) != 0 && errno != EINVAL && errno != EROFS);
    int err = errno;
    if (fd >= 0)
        close(fd);
    if (bad && e)
        mv_fail(e, MV_ERR_IO, "%s: fsync of the directory: %s", dir, strerror(err));
    errno = err;
    return bad ? MV_ERR_IO : MV_OK;
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

void mv_thread_stacks_default(void)
{
    pthread_attr_t a;
    size_t have = 0;
    if (pthread_getattr_default_np(&a) != 0)
        return;
    if (pthread_attr_getstacksize(&a, &have) == 0 && have < ((size_t)8 << 20) &&
        pthread_attr_setstacksize(&a, (size_t)8 << 20) == 0)
        pthread_setattr_default_np(&a);
    pthread_attr_destroy(&a);
}

int mv_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    enum { STACK = 8 << 20 };
    pthread_attr_t a;
    size_t have = 0;
    if (pthread_attr_init(&a) != 0)
        return pthread_create(t, NULL, fn, arg);
    if (pthread_attr_getstacksize(&a, &have) != 0 || have < STACK)
        pthread_attr_setstacksize(&a, STACK);
    int r = pthread_create(t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return r;
}

char *mv_path_from_root(mv_dir_cache *dc, const char *cwd, const char *path, int *oom)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char *dir = slash ? strndup(path, dl ? dl : 1) : strdup(".");
    if (!dir || !dc->dir || strcmp(dir, dc->dir)) {
        free(dc->dir);
        free(dc->real);
        dc->real = dir ? realpath(dir, NULL) : NULL;
        dc->dir = dir;
        if (!dir)
            return *oom = 1, NULL;
    } else
        free(dir);
    /* what goes before and after: the directory resolved and the name, else cwd (or nothing for
     * a path from /) and the path */
    const char *pre = dc->real ? dc->real : path[0] == '/' ? "" : cwd;
    const char *post = dc->real ? (slash ? slash + 1 : path) : path;
    if (!pre)
        return NULL;
    char *a = malloc(strlen(pre) + strlen(post) + 3), *o = a;
    if (!a)
        return *oom = 1, NULL;
    for (int part = 0; part < 2; part++)
        for (const char *c = part ? post : pre; *c;) {
            const char *end = strchr(c, '/');
            size_t k = end ? (size_t)(end - c) : strlen(c);
            if (k && !(k == 1 && c[0] == '.')) {
                *o++ = '/';
                memcpy(o, c, k);
                o += k;
            }
            c += k + (end ? 1 : 0);
        }
    if (o == a)
        *o++ = '/';
    *o = 0;
    return a;
}

void mv_dir_cache_free(mv_dir_cache *dc)
{
    free(dc->dir);
    free(dc->real);
    dc->dir = dc->real = NULL;
}

int64_t mv_time_ns(int64_t sec, long nsec)
{
    if (sec > (INT64_MAX - nsec) / 1000000000)
        return INT64_MAX;
    if (sec < INT64_MIN / 1000000000 + 1)
        return INT64_MIN;
    return sec * 1000000000 + nsec;
}

void mv_time_words(int64_t ns, int64_t s, char *out, size_t cap)
{
    if (ns == INT64_MAX || ns == INT64_MIN)
        snprintf(out, cap, "%lld s", (long long)s);
    else
        snprintf(out, cap, "%lld.%09lld", (long long)(ns / 1000000000 - (ns % 1000000000 < 0)),
                 (long long)((ns % 1000000000 + 1000000000) % 1000000000));
}
