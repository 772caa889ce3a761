/* fuzz_util.h - helpers shared by the libFuzzer harnesses in test/fuzz/: a private temporary
 * directory per fuzzing process (several APIs under test take paths, not buffers), writing the
 * fuzz input into a file there, and the checks every failed call must pass (a one-line, non-empty
 * message naming the input). Not a test framework: a violated invariant calls abort() so that
 * libFuzzer records the input as a crash. */
#ifndef MV_FUZZ_UTIL_H
#define MV_FUZZ_UTIL_H

#include "mv_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FZ_ROOT
#define FZ_ROOT "."
#endif

static char fz_dir_path[256];

static inline void fz_cleanup(void)
{
    DIR *d = opendir(fz_dir_path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", fz_dir_path, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(fz_dir_path);
}

/* The process's temp directory (created on first use, removed at exit). */
static inline const char *fz_dir(void)
{
    if (!fz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_dir_path, sizeof fz_dir_path, "%s/mvfuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir_path;
}

/* fz_dir()/name into buf. */
static inline const char *fz_path(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", fz_dir(), name);
    return buf;
}

/* Writes data[0..n) to path (replacing it). Aborts on I/O failure: that is the harness's fault. */
static inline void fz_write(const char *path, const uint8_t *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) {
            perror(path);
            abort();
        }
        off += (size_t)w;
    }
    close(fd);
}

/* Symlinks FZ_ROOT/rel to fz_dir()/name (for fixture files used unchanged). */
static inline void fz_link_fixture(const char *rel, const char *name)
{
    char src[1024], dst[512];
    snprintf(src, sizeof src, "%s/%s", FZ_ROOT, rel);
    fz_path(name, dst, sizeof dst);
    unlink(dst);
    if (symlink(src, dst) != 0) {
        perror(dst);
        abort();
    }
}

/* A failed call must leave one non-empty line naming `who` (a path or the in-memory name). */
static inline void fz_check_msg(const mv_err *e, const char *who, const char *api)
{
    if (!e->msg[0] || strchr(e->msg, '\n') || (who && !strstr(e->msg, who))) {
        fprintf(stderr, "%s: bad error message (must be one non-empty line naming '%s'): \"%s\"\n",
                api, who ? who : "", e->msg);
        abort();
    }
}

/* Reads every byte of p[0..n) so that AddressSanitizer checks the whole buffer is allocated. */
static inline unsigned fz_touch(const void *p, size_t n)
{
    const volatile unsigned char *b = p;
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s += b[i];
    return s;
}

#endif
