/* stream_io.h - for the unit tests of inputs (mv_input.h): a stream source for mv_input_open_io
 * (a buffer handed out at most `chunk` bytes a read, failing with a reason once fail_at bytes
 * have been handed out (fail_at < 0: never), counting the calls made after its end), a
 * fixture opened both as a descriptor and as bytes in memory, and an input opened (and an image
 * decoded) from either or as that stream. */
#ifndef MV_TEST_STREAM_IO_H
#define MV_TEST_STREAM_IO_H

#include "mv_image.h"
#include "mv_input.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const uint8_t *data;
    size_t len, off, chunk;
    long fail_at;
    int calls_after_end;
} stream;

static inline ssize_t stream_read(void *user, void *buf, size_t n)
{
    stream *s = user;
    if (s->off == s->len && s->fail_at < 0) s->calls_after_end++;
    if (s->fail_at >= 0 && s->off >= (size_t)s->fail_at) return -1;
    size_t k = s->len - s->off;
    if (k > n) k = n;
    if (k > s->chunk) k = s->chunk;
    if (s->fail_at >= 0 && s->off + k > (size_t)s->fail_at) k = (size_t)s->fail_at - s->off;
    memcpy(buf, s->data + s->off, k);
    s->off += k;
    return (ssize_t)k;
}

#define STREAM_ERROR "member data unreadable: damaged archive"

static inline const char *stream_error(void *user)
{
    (void)user;
    return STREAM_ERROR;
}

static const mv_input_io stream_io = {stream_read, stream_error};

/* The three ways an input reaches a decoder: a descriptor, memory, a stream (7 bytes a read). */
static const char *const source_names[3] = {"descriptor", "memory", "callbacks, 7 bytes a read"};

/* Opens source k (0..2 as above) of a file held both as fd and as buf[len], named name; s is the
 * stream's state (the caller keeps it while the input is open). */
static inline mv_status open_source(int k, mv_input *in, int fd, const uint8_t *buf, size_t len, stream *s,
                                    const char *name, mv_err *e)
{
    *s = (stream){buf, len, 0, 7, -1, 0};
    return k == 0   ? mv_input_open_fd(in, fd, name, e)
           : k == 1 ? mv_input_open_mem(in, buf, len, name, e)
                    : mv_input_open_io(in, &stream_io, s, name, e);
}

/* Decodes source k of that file into img (mv_image_decode_input, default limits; img is zeroed on
 * failure). */
static inline mv_status decode_source(int k, int fd, const uint8_t *buf, size_t len, const char *name,
                                      mv_image *img, mv_err *e)
{
    mv_input in;
    stream s;
    memset(img, 0, sizeof *img);
    mv_status st = open_source(k, &in, fd, buf, len, &s, name, e);
    if (st == MV_OK) st = mv_image_decode_input(&in, 0, 0, img, e);
    mv_input_close(&in);
    return st;
}

/* Opens path (*fd) and reads it whole (*buf, malloc'd): 0, or -1 with nothing left open. */
static inline int open_fixture(const char *path, int *fd, uint8_t **buf, size_t *len)
{
    mv_err e;
    *buf = NULL;
    *fd = open(path, O_RDONLY);
    if (*fd >= 0 && mv_read_file(path, buf, len, &e) == MV_OK)
        return 0;
    if (*fd >= 0)
        close(*fd);
    return -1;
}

#endif
