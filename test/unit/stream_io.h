/* stream_io.h - for the unit tests of inputs (mv_input.h): a stream source for mv_input_open_io
 * (a buffer handed out at most `chunk` bytes a read, failing with a reason once fail_at bytes
 * have been handed out (fail_at < 0: never), counting the calls made after its end), and a
 * fixture opened both as a descriptor and as bytes in memory. */
#ifndef MV_TEST_STREAM_IO_H
#define MV_TEST_STREAM_IO_H

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
