/* no_noreplace.c - an LD_PRELOAD shim for tests: renameat2() with RENAME_NOREPLACE fails with
 * EINVAL, as it does on NFS clients and other file systems without it; other calls pass through.
 * With NO_NOREPLACE_LOG set, each refused call appends a line to that file (so a test can tell
 * the shim was used). Built by test/bats/65-tar-share.bats: cc -shared -fPIC -o X.so THIS -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    if (flags & RENAME_NOREPLACE) {
        const char *log = getenv("NO_NOREPLACE_LOG");
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                char line[4200];
                int n = snprintf(line, sizeof line, "renameat2 RENAME_NOREPLACE %s -> %s: EINVAL\n",
                                 oldpath, newpath);
                if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
                    n = 0;
                close(fd);
            }
        }
        errno = EINVAL;
        return -1;
    }
    int (*real)(int, const char *, int, const char *, unsigned int) =
        (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(olddirfd, oldpath, newdirfd, newpath, flags);
}
