/* place.c - the exclusive final name (see mv_place.h): renameat2(RENAME_NOREPLACE), else
 * linkat(2) + unlinkat(2), else a refusal naming the file system (statfs(2)'s magic number) or,
 * where the caller asks, a checked rename. */
#define _GNU_SOURCE /* renameat2 */
#include "mv_place.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A name for the file system holding tmp (in dfd): the common ones by statfs's f_type, else the
 * magic. */
static void fs_name(int dfd, const char *tmp, char *buf, size_t cap)
{
    static const struct { long magic; const char *name; } known[] = {
        {0x6969, "nfs"}, {0xff534d42, "cifs"}, {0xfe534d42, "smb2"}, {0x65735546, "fuse"},
        {0x4d44, "vfat"}, {0x2011bab0, "exfat"}, {0x01021997, "9p"}, {0x794c7630, "overlayfs"},
        {0x5346544e, "ntfs"}, {0x19830326, "fhgfs/beegfs"}, {0x0bd00bd0, "lustre"},
        {0x47504653, "gpfs"}, {0x00c36400, "ceph"}, {0xef53, "ext2/3/4"}, {0x58465342, "xfs"},
        {0x9123683e, "btrfs"}, {0x01021994, "tmpfs"}, {0x2fc12fc1, "zfs"},
    };
    struct statfs sf;
    if ((dfd == AT_FDCWD ? statfs(tmp, &sf) : fstatfs(dfd, &sf)) != 0) {
        snprintf(buf, cap, "unknown: %s", strerror(errno));
        return;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if ((unsigned long)sf.f_type == (unsigned long)known[i].magic) {
            snprintf(buf, cap, "%s", known[i].name);
            return;
        }
    snprintf(buf, cap, "type 0x%lx", (unsigned long)sf.f_type);
}

/* fin exists: replaced with MV_PLACE_REPLACE, else kept (EEXIST). */
static mv_status taken(int dfd, const char *tmp, const char *fin, unsigned flags, int *err, mv_err *e)
{
    if (!(flags & MV_PLACE_REPLACE)) {
        *err = EEXIST;
        return mv_fail(e, MV_ERR_IO, "%s: exists already: not replaced", fin);
    }
    if (renameat(dfd, tmp, dfd, fin) == 0)
        return MV_OK;
    *err = errno;
    return mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
}

mv_status mv_place(int dfd, const char *tmp, const char *fin, unsigned flags, int *err, mv_err *e)
{
    int dummy;
    if (!err)
        err = &dummy;
    *err = 0;
    if (renameat2(dfd, tmp, dfd, fin, RENAME_NOREPLACE) == 0)
        return MV_OK;
    if (errno == EEXIST)
        return taken(dfd, tmp, fin, flags, err, e);
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
        *err = errno;
        return mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
    }
    /* no RENAME_NOREPLACE here: a hard link is just as exclusive */
    int lr = linkat(dfd, tmp, dfd, fin, 0), lerr = errno;
    struct stat a, b;
    if (lr != 0 && lerr == EEXIST && fstatat(dfd, tmp, &a, 0) == 0 && a.st_nlink == 2 &&
        fstatat(dfd, fin, &b, 0) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        lr = 0; /* NFS: the link was made, the reply to a retransmission said EEXIST */
    if (lr == 0) {
        unlinkat(dfd, tmp, 0); /* fin is the file now; a name left is the sweep's */
        return MV_OK;
    }
    if (lerr == EEXIST)
        return taken(dfd, tmp, fin, flags, err, e);
    if (lerr == EPERM || lerr == EOPNOTSUPP || lerr == ENOSYS || lerr == EMLINK) { /* no hard links */
        if (flags & MV_PLACE_CHECK_RENAME) {
            if (fstatat(dfd, fin, &b, AT_SYMLINK_NOFOLLOW) == 0)
                return taken(dfd, tmp, fin, flags, err, e);
            if (renameat(dfd, tmp, dfd, fin) == 0)
                return MV_OK;
            *err = errno;
            return mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
        }
        char fs[64];
        fs_name(dfd, tmp, fs, sizeof fs);
        *err = lerr;
        return mv_fail(e, MV_ERR_IO, "%s: the file system (%s) offers neither rename without "
                       "replacing (RENAME_NOREPLACE) nor hard links, so the file cannot be given its "
                       "name safely: use another file system for OUT", fin, fs);
    }
    char fs[64];
    fs_name(dfd, tmp, fs, sizeof fs);
    *err = lerr;
    return mv_fail(e, MV_ERR_IO, "%s: link from %s (file system %s, without RENAME_NOREPLACE): %s", fin,
                   tmp, fs, strerror(lerr));
}

static const int guarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXCPU};
#define N_GUARDED (int)(sizeof guarded / sizeof guarded[0])
static char g_tmp[4400];
static struct sigaction g_old[N_GUARDED];
static int g_set[N_GUARDED]; /* installed by mv_place_guard_begin (not ignored) */

static void on_guarded(int sig)
{
    unlink(g_tmp);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered once this handler returns: the process ends as it would have */
}

void mv_place_guard_begin(const char *tmp)
{
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_guarded;
    sigfillset(&sa.sa_mask);
    /* an ignored signal (SIGHUP under nohup; SIGINT for `cmd &` without job control) stays
     * ignored: it would not have ended the process */
    for (int i = 0; i < N_GUARDED; i++)
        g_set[i] = sigaction(guarded[i], NULL, &g_old[i]) == 0 && g_old[i].sa_handler != SIG_IGN &&
                   sigaction(guarded[i], &sa, NULL) == 0;
}

void mv_place_guard_end(void)
{
    for (int i = 0; i < N_GUARDED; i++)
        if (g_set[i])
            sigaction(guarded[i], &g_old[i], NULL);
}
