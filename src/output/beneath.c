/* beneath.c - directories opened and made beneath the output directory (see mv_beneath.h).
 *
 * The walk goes one component at a time from root: each prefix of rel is opened from root with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) (the kernel refuses any way out: a symlink
 * leading up or to an absolute path, a mount crossing is allowed), or, without openat2, the next
 * component is opened from the previous one with O_NOFOLLOW. A missing component is made with
 * mkdirat in the parent already opened beneath root, and opened again the same way; another
 * process making it meanwhile (EEXIST) is fine. ENOSYS or EPERM (a seccomp filter) from openat2
 * switches the process to the O_NOFOLLOW walk for good.
 */
#define _GNU_SOURCE
#include "mv_beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int no_openat2; /* set once openat2 is known missing (or by the test hook) */

void mv_beneath_test_no_openat2(int on) { __atomic_store_n(&no_openat2, on, __ATOMIC_RELAXED); }

/* The directory rel[0..len) beneath root: fd or -1 with errno. cur is the directory of rel's
 * previous component (the O_NOFOLLOW walk's start), comp the last component. */
static int open_step(int root, int cur, char *rel, size_t len, const char *comp)
{
    const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
        char keep = rel[len];
        rel[len] = 0;
        struct open_how how = {.flags = flags, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        long fd;
        do
            fd = syscall(SYS_openat2, root, rel, &how, sizeof how);
        while (fd < 0 && (errno == EINTR || errno == EAGAIN));
        rel[len] = keep;
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return (int)fd;
        __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
    }
    return openat(cur, comp, flags | O_NOFOLLOW);
}

/* e for the failure err at the component comp (rel[0..len)) in directory parent. */
static mv_status step_fail(const char *root, const char *rel, size_t len, int parent, const char *comp,
                           int err, mv_err *e)
{
    char to[512] = "";
    ssize_t n = readlinkat(parent, comp, to, sizeof to - 1);
    int link = n >= 0;
    to[link ? n : 0] = 0;
    mv_status s = err == ENOTDIR || err == EACCES || err == EPERM || err == EXDEV || err == ELOOP ||
                  err == ENAMETOOLONG ? MV_ERR_OUTPUT : MV_ERR_IO;
    if (link && err == EXDEV)
        mv_fail(e, s, "%s/%.*s: a symbolic link (to %s) that leads outside the output directory %s: "
                "not followed", root, (int)len, rel, to, root);
    else if (link && (err == ELOOP || err == ENOTDIR))
        mv_fail(e, s, "%s/%.*s: a symbolic link (to %s), not followed below the output directory",
                root, (int)len, rel, to);
    else if (link) /* one that stays inside but leads to nothing, or nowhere writable */
        mv_fail(e, s, "%s/%.*s: a symbolic link (to %s): %s", root, (int)len, rel, to, strerror(err));
    else
        mv_fail(e, s, "%s/%.*s: %s", root, (int)len, rel, strerror(err));
    errno = link && err == ENOTDIR ? ELOOP : err;
    return s;
}

mv_status mv_beneath_dir(const char *root, const char *rel, int create, int *dfd, mv_err *e)
{
    *dfd = -1;
    int cur = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0 && errno == ENOENT && create) { /* OUT itself: made as the user named it */
        if (mv_mkdirs(root, e))
            return errno == ENOSPC || errno == EDQUOT || errno == EROFS || errno == EIO ? MV_ERR_IO
                                                                                     : MV_ERR_OUTPUT;
        cur = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (cur < 0) {
        int err = errno;
        mv_fail(e, err == ENOTDIR || err == EACCES ? MV_ERR_OUTPUT : MV_ERR_IO, "%s: %s", root, strerror(err));
        errno = err;
        return err == ENOTDIR || err == EACCES ? MV_ERR_OUTPUT : MV_ERR_IO;
    }
    int root_fd = cur;
    char *path = strdup(rel);
    if (!path) {
        close(cur);
        errno = ENOMEM;
        return mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", root, rel);
    }
    size_t len = 0, total = strlen(path);
    mv_status s = MV_OK;
    while (len < total) {
        size_t start = len, cl = strcspn(path + start, "/");
        len = start + cl;
        char comp[256 + 1];
        if (cl == 0 || cl >= sizeof comp) {
            s = step_fail(root, path, len, cur, "", cl ? ENAMETOOLONG : ENOENT, e);
            break;
        }
        memcpy(comp, path + start, cl);
        comp[cl] = 0;
        if (!strcmp(comp, ".") || !strcmp(comp, "..")) { /* the O_NOFOLLOW walk would step up out */
            s = mv_fail(e, MV_ERR_OUTPUT, "%s/%.*s: a \"%s\" component: not followed below the output "
                        "directory", root, (int)len, path, comp);
            errno = EXDEV;
            break;
        }
        int next = open_step(root_fd, cur, path, len, comp);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(cur, comp, 0777) != 0 && errno != EEXIST) {
                s = step_fail(root, path, len, cur, comp, errno, e);
                break;
            }
            next = open_step(root_fd, cur, path, len, comp);
        }
        if (next < 0) {
            s = step_fail(root, path, len, cur, comp, errno, e);
            break;
        }
        if (cur != root_fd)
            close(cur);
        cur = next;
        if (path[len] == '/')
            len++;
    }
    int err = errno;
    free(path);
    if (s) {
        if (cur != root_fd)
            close(cur);
        close(root_fd);
        errno = err;
        return s;
    }
    if (cur != root_fd)
        close(root_fd);
    *dfd = cur;
    return MV_OK;
}
