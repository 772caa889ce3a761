/* filehash.c - XXH64 of a file's bytes for --input-hash (see mv_filehash.h): streamed through
 * libxxhash's state in 1 MiB preads. */
#include "mv_filehash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

int mv_filehash_fd(int fd, uint64_t *h)
{
    enum { PIECE = 1 << 20 };
    XXH64_state_t *st = XXH64_createState();
    unsigned char *buf = malloc(PIECE);
    if (!st || !buf || XXH64_reset(st, 0) == XXH_ERROR) {
        XXH64_freeState(st);
        free(buf);
        errno = ENOMEM;
        return -1;
    }
    int rc = 0;
    for (off_t off = 0;;) {
        ssize_t n = pread(fd, buf, PIECE, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        if (XXH64_update(st, buf, (size_t)n) == XXH_ERROR) {
            errno = ENOMEM;
            rc = -1;
            break;
        }
        off += n;
    }
    if (!rc)
        *h = XXH64_digest(st);
    int err = errno;
    XXH64_freeState(st);
    free(buf);
    errno = err;
    return rc;
}

int mv_filehash_path(const char *path, uint64_t *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    int rc = mv_filehash_fd(fd, h), err = errno;
    close(fd);
    errno = err;
    return rc;
}
