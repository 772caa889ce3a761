/* temps.c - OUT's temporary names ".tmp-<pid>-<kind>" read back, and the one rule by which a
 * sweep judges a temporary file or directory abandoned (see mv_output.h): the write lock its
 * writer holds until the rename, its pid, its age. Every sweep of such names asks here: output.c's
 * of temp outputs and manifests, pool_dirs.c's of pooled directories, tar_out.c's of temporary
 * shards. Not here: making temp files (output.c, and each writer of its own), the sweeps
 * themselves, the tar layout's ".tmp-tar-" names (tar_out.c).
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "mv_output.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

long mv_output_temp_name(const char *name, const char **kind)
{
    if (strncmp(name, ".tmp-", 5) != 0)
        return -1;
    char *end;
    errno = 0;
    long pid = strtol(name + 5, &end, 10);
    if (errno || end == name + 5 || *end != '-' || pid <= 0)
        return -1;
    if (kind)
        *kind = end + 1;
    return pid;
}

int mv_output_lock_temp(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int r;
    do
        r = fcntl(fd, F_OFD_SETLKW, &fl);
    while (r != 0 && errno == EINTR);
    return r;
}

int mv_output_temp_gone(const struct stat *st, long pid, mv_temp_writer w)
{
    int old = time(NULL) - st->st_mtime > MV_OUTPUT_TEMP_MAX_AGE;
    switch (w) {
    case MV_TEMP_WRITER_LIVE:
        return 0;
    case MV_TEMP_WRITER_DEAD:
        return 1;
    case MV_TEMP_WRITER_UNLOCKED:
        /* a writer that died (kill -9, a crash, a lost node). The pid is checked too for mounts
         * whose locks are local to one machine: a pid running here may still be writing. */
        return old || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
    case MV_TEMP_WRITER_UNKNOWN:
        break;
    }
    return old; /* nothing tells: age alone decides */
}

int mv_output_temp_abandoned(int fd, const struct stat *st, long pid)
{
    /* a read lock is refused while anyone (any process, machine or PID namespace sharing the
     * file system's locks) holds the write lock its writer keeps until rename */
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    mv_temp_writer w = MV_TEMP_WRITER_UNLOCKED;
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0)
        w = errno == EAGAIN || errno == EACCES || errno == EINTR ? MV_TEMP_WRITER_LIVE
                                                                 : MV_TEMP_WRITER_UNKNOWN; /* no locks here */
    return mv_output_temp_gone(st, pid, w);
}
