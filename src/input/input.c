/* input.c - one input's bytes behind one reader (mv_input.h): a file descriptor read with pread
 * from the input's own position, a memory buffer, or a stream of read callbacks.
 *
 * Invariants: head[0..head_len) are the input's first bytes, read at open; pos is the offset of the
 * next byte mv_input_read delivers. A stream is read once, in order: bytes below head_len come
 * from head, later ones straight from the callbacks, so taken == max(pos, head_len) and a stream
 * can only go back to the start while pos <= head_len. Once a read fails the input stays failed.
 * A regular file whose size reads as 0 (a /proc pseudo-file) is read to its end into memory.
 * Not here: sniffing the head (sniff.c), decoding.
 */
#include "mv_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IN_FD = 1, IN_MEM, IN_IO };

/* Fills the head from the source (pos stays 0). */
static mv_status read_head(mv_input *in, mv_err *e)
{
    in->pos = 0;
    ssize_t n = in->kind == IN_IO ? mv_input_read(in, in->head, sizeof in->head)
                                  : mv_input_pread(in, in->head, sizeof in->head, 0);
    if (n < 0)
        return mv_input_fail(in, e);
    in->head_len = (size_t)n;
    in->pos = 0;
    return MV_OK;
}

/* The common part of every open: a zeroed input named name. */
static mv_status start(mv_input *in, int kind, const char *name, mv_err *e)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    in->kind = kind;
    in->size = -1;
    if (!(in->name = strdup(name ? name : "<memory>")))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name ? name : "<memory>");
    return MV_OK;
}

/* A failed open leaves a closed input. */
static mv_status opened(mv_input *in, mv_status st)
{
    if (st != MV_OK)
        mv_input_close(in);
    return st;
}

/* A regular file whose size reads as 0 may still hold bytes: a pseudo-file (/proc) or a file
 * system that does not know sizes up front reports 0 and delivers content. Its bytes are read
 * to their end into memory, up to MV_INPUT_UNSIZED_MAX (a pseudo-file may never end); a file
 * really empty stays an empty input. */
#define MV_INPUT_UNSIZED_MAX ((size_t)256 << 20)

static mv_status read_unsized(mv_input *in, mv_err *e)
{
    size_t cap = 0, len = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (len == cap) {
            if (cap >= MV_INPUT_UNSIZED_MAX) {
                free(buf);
                return mv_fail(e, MV_ERR_IO, "%s: its size reads as 0 bytes but it holds more than "
                               "%zu MiB (a pseudo-file?); not read", in->name, MV_INPUT_UNSIZED_MAX >> 20);
            }
            size_t nc = cap ? cap * 2 : 64 << 10;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory holding %zu bytes", in->name, nc);
            }
            buf = nb;
            cap = nc;
        }
        ssize_t k = read(in->fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int er = errno;
            free(buf);
            return mv_fail(e, MV_ERR_IO, "%s: read error: %s", in->name, strerror(er));
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    in->owned = buf;
    in->mem = buf;
    in->size = (int64_t)len;
    in->kind = IN_MEM;
    return MV_OK;
}

static mv_status open_fd(mv_input *in, int fd, mv_err *e)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: %s", in->name, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return mv_fail(e, MV_ERR_IO, "%s: not a regular file", in->name);
    in->fd = fd;
    in->size = sb.st_size;
    if (sb.st_size == 0 && lseek(fd, 0, SEEK_SET) == 0) {
        mv_status st = read_unsized(in, e);
        if (st != MV_OK)
            return st;
    }
    return read_head(in, e);
}

mv_status mv_input_open_path(mv_input *in, const char *path, mv_err *e)
{
    mv_status st = start(in, IN_FD, path, e);
    if (st != MV_OK)
        return opened(in, st);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        char why[1200];
        mv_path_why(path, errno, why, sizeof why);
        return opened(in, mv_fail(e, MV_ERR_IO, "%s: %s", path, why));
    }
    if (!S_ISREG(sb.st_mode))
        return opened(in, mv_fail(e, MV_ERR_IO, "%s: not a regular file", path));
    int fd;
    if ((st = mv_open_regular(path, &fd, e)) != MV_OK) /* no blocking if it became a FIFO since */
        return opened(in, st);
    in->own_fd = 1;
    in->fd = fd;
    return opened(in, open_fd(in, fd, e));
}

mv_status mv_input_open_fd(mv_input *in, int fd, const char *name, mv_err *e)
{
    mv_status st = start(in, IN_FD, name, e);
    return opened(in, st != MV_OK ? st : open_fd(in, fd, e));
}

mv_status mv_input_open_mem(mv_input *in, const uint8_t *buf, size_t len, const char *name, mv_err *e)
{
    mv_status st = start(in, IN_MEM, name, e);
    if (st != MV_OK)
        return opened(in, st);
    in->mem = buf;
    in->size = buf ? (int64_t)len : 0;
    return opened(in, read_head(in, e));
}

mv_status mv_input_open_io(mv_input *in, const mv_input_io *io, void *user, const char *name,
                           mv_err *e)
{
    mv_status st = start(in, IN_IO, name, e);
    if (st != MV_OK)
        return opened(in, st);
    in->io = *io;
    in->user = user;
    return opened(in, read_head(in, e));
}

void mv_input_close(mv_input *in)
{
    if (!in)
        return;
    if (in->own_fd && in->fd >= 0)
        close(in->fd);
    free(in->owned);
    free(in->name);
    memset(in, 0, sizeof *in);
    in->fd = -1;
}

const uint8_t *mv_input_head(const mv_input *in, size_t *n)
{
    *n = in->head_len;
    return in->head;
}

/* Stream: up to n bytes from the callbacks, looping over short reads; -1 on a read error. */
static ssize_t take(mv_input *in, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n && !in->ended) {
        ssize_t k = in->io.read(in->user, buf + got, n - got);
        if (k < 0 || (size_t)k > n - got) {
            const char *why = in->io.error ? in->io.error(in->user) : NULL;
            snprintf(in->why, sizeof in->why, "%s", why ? why : "");
            in->failed = 1;
            return -1;
        }
        if (k == 0)
            in->ended = 1;
        got += (size_t)k;
    }
    in->taken += got;
    return (ssize_t)got;
}

ssize_t mv_input_read(mv_input *in, void *buf, size_t n)
{
    if (in->failed)
        return -1;
    if (in->kind != IN_IO) {
        ssize_t k = mv_input_pread(in, buf, n, in->pos);
        if (k > 0)
            in->pos += (uint64_t)k;
        return k;
    }
    size_t got = 0;
    if (in->pos < in->head_len && in->taken >= in->head_len) { /* the head, again */
        got = in->head_len - (size_t)in->pos < n ? in->head_len - (size_t)in->pos : n;
        memcpy(buf, in->head + in->pos, got);
    }
    ssize_t k = got < n ? take(in, (uint8_t *)buf + got, n - got) : 0;
    if (k < 0)
        return -1;
    in->pos += got + (size_t)k;
    return (ssize_t)(got + (size_t)k);
}

int mv_input_rewind(mv_input *in)
{
    if (in->kind == IN_IO && in->pos > in->head_len)
        return -1;
    in->pos = 0;
    return 0;
}

int64_t mv_input_size(const mv_input *in) { return in->size; }

ssize_t mv_input_pread(mv_input *in, void *buf, size_t n, uint64_t off)
{
    if (in->failed || in->kind == IN_IO)
        return -1;
    if (off >= (uint64_t)in->size)
        return 0;
    if (n > (uint64_t)in->size - off)
        n = (size_t)((uint64_t)in->size - off);
    if (in->kind == IN_MEM) {
        memcpy(buf, in->mem + off, n);
        return (ssize_t)n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(in->fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) { /* the cause, for mv_input_fail */
            snprintf(in->why, sizeof in->why, "%s", strerror(errno));
            in->failed = 1;
            return -1;
        }
        if (k == 0)
            break; /* the file shrank since fstat */
        got += (size_t)k;
    }
    return (ssize_t)got;
}

mv_status mv_input_make_seekable(mv_input *in, mv_err *e)
{
    if (in->kind != IN_IO)
        return MV_OK;
    if (mv_input_rewind(in) != 0)
        return mv_fail(e, MV_ERR_USAGE, "%s: the stream was read past its first bytes", in->name);
    size_t cap = sizeof in->head * 2, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf)
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory holding %zu bytes", in->name, cap);
        ssize_t k = mv_input_read(in, buf + len, cap - len);
        if (k < 0) {
            free(buf);
            return mv_input_fail(in, e);
        }
        len += (size_t)k;
        if (len < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb)
            free(buf);
        buf = nb;
        cap *= 2;
    }
    in->owned = buf;
    in->mem = buf;
    in->size = (int64_t)len;
    in->kind = IN_MEM;
    in->pos = 0;
    return MV_OK;
}

mv_status mv_input_fail(const mv_input *in, mv_err *e)
{
    return mv_fail(e, MV_ERR_IO, "%s: read error%s%s", in->name, in->why[0] ? ": " : "", in->why);
}
