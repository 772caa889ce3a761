/* nolock_shim.c - LD_PRELOAD shim for tests: a file system without locks and without
 * RENAME_NOREPLACE/RENAME_EXCHANGE, as an NFS client mounted with nolock can be. fcntl's record
 * and OFD locks fail with ENOLCK, renameat2 with EINVAL; everything else is passed on.
 * Build: cc -shared -fPIC -o nolock.so nolock_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>

static int is_lock(int cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK || cmd == F_OFD_SETLK ||
           cmd == F_OFD_SETLKW || cmd == F_OFD_GETLK;
}

/* fcntl or fcntl64 (name): locks fail with ENOLCK, the rest goes to the real one */
static int shim(const char *name, int fd, int cmd, void *arg)
{
    if (is_lock(cmd)) {
        errno = ENOLCK;
        return -1;
    }
    int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);
    return real(fd, cmd, arg);
}

#define SHIM(name)                                                                                  \
    int name(int fd, int cmd, ...)                                                                  \
    {                                                                                               \
        va_list ap;                                                                                 \
        va_start(ap, cmd);                                                                          \
        void *arg = va_arg(ap, void *);                                                             \
        va_end(ap);                                                                                 \
        return shim(#name, fd, cmd, arg);                                                           \
    }
SHIM(fcntl)
SHIM(fcntl64)

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    (void)olddirfd, (void)oldpath, (void)newdirfd, (void)newpath, (void)flags;
    errno = EINVAL;
    return -1;
}
