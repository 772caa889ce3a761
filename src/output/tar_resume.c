/* tar_resume.c - the tar layout's resume checks (see mv_tar_resume.h): a recorded sample is
 * re-read from its shard and its XXH64 compared. One pread of the member per input: the shard's
 * other members are not read. Not here: writing shards (tar_out.c), the manifest (manifest*.c).
 */
#include "mv_tar_resume.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t mv_tar_checksum(const void *p, size_t n) { return (uint64_t)XXH64(p, n, 0); }

/* Hashes fd's bytes [off, off + len) into *h; 0, or -1 with errno (EIO for a short file). */
static int hash_range(int fd, int64_t off, int64_t len, uint64_t *h)
{
    XXH64_state_t *st = XXH64_createState();
    if (!st || XXH64_reset(st, 0) == XXH_ERROR) {
        XXH64_freeState(st);
        errno = ENOMEM;
        return -1;
    }
    char buf[1 << 16];
    int rc = 0;
    while (len > 0) {
        ssize_t k = pread(fd, buf, len < (int64_t)sizeof buf ? (size_t)len : sizeof buf, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            rc = -1;
            break;
        }
        if (XXH64_update(st, buf, (size_t)k) == XXH_ERROR) {
            errno = ENOMEM;
            rc = -1;
            break;
        }
        off += k;
        len -= k;
    }
    if (!rc)
        *h = (uint64_t)XXH64_digest(st);
    XXH64_freeState(st);
    return rc;
}

int mv_tar_sample_intact(const char *out_real, const mv_done_sample *s, char *why, size_t cap)
{
    const char *name = s->output;
    if (!s->tar || !name) {
        snprintf(why, cap, "its record names no tar sample (another layout)");
        return 0;
    }
    if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
        snprintf(why, cap, "its shard name '%.200s' is not a file directly in OUT", name);
        return 0;
    }
    if (!s->has_xxh64 || s->bytes < 0 || s->offset < 0 || s->data_len < 0 ||
        s->bytes < s->data_len || s->offset < s->bytes - s->data_len) {
        snprintf(why, cap, "its record has no size and checksum to verify the sample by");
        return 0;
    }
    int64_t start = s->offset - (s->bytes - s->data_len); /* the .npy member's first byte */
    char *p = mv_malloc(strlen(out_real) + strlen(name) + 2);
    if (!p) {
        snprintf(why, cap, "out of memory");
        return 0;
    }
    sprintf(p, "%s/%s", out_real, name);
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    free(p);
    struct stat sb;
    int ok = 0;
    uint64_t h;
    if (fd < 0)
        snprintf(why, cap, "%.200s: %s", name, strerror(errno));
    else if (fstat(fd, &sb) != 0)
        snprintf(why, cap, "%.200s: %s", name, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        snprintf(why, cap, "%.200s: not a regular file", name);
    else if (sb.st_size < start + s->bytes)
        snprintf(why, cap, "%.200s: %lld bytes, the sample ends at byte %lld", name,
                 (long long)sb.st_size, (long long)(start + s->bytes));
    else if (hash_range(fd, start, s->bytes, &h) != 0)
        snprintf(why, cap, "%.200s: read: %s", name, strerror(errno));
    else if (h != s->xxh64)
        snprintf(why, cap, "%.200s: the sample's bytes have XXH64 %016llx, the manifest says %016llx",
                 name, (unsigned long long)h, (unsigned long long)s->xxh64);
    else
        ok = 1;
    if (fd >= 0)
        close(fd);
    return ok;
}
