/* tar_limit.c - OUT's record of the tar shards' sample limit (see mv_tar_limit.h): read with
 * jansson, written through a locked temporary file (fsync) given the record's name exclusively
 * (mv_place), then the directory synced; and the signs of each layout in OUT's top level. */
#include "mv_tar_limit.h"

#include "mv_output.h"
#include "mv_place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Reads the record at path: 1 and *have (0: no limit) when it exists, 0 when it does not, -1
 * with e naming path and the cause when it cannot be read or is not a record. */
static int read_record(const char *path, long long *have, mv_err *e)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    char buf[4096];
    ssize_t n = -1;
    struct stat sb;
    int err = fd < 0 ? errno : fstat(fd, &sb) != 0 ? errno : 0; /* 0 and n < 0: not a regular file */
    if (!err && S_ISREG(sb.st_mode)) {
        while ((n = read(fd, buf, sizeof buf)) < 0 && errno == EINTR)
            ;
        err = n < 0 ? errno : 0;
    }
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        mv_fail(e, MV_ERR_IO, "%s: cannot read OUT's record of the tar shards' sample limit: %s", path,
                err ? strerror(err) : "not a regular file");
        return -1;
    }
    json_error_t je;
    json_t *o = json_loadb(buf, (size_t)n, 0, &je), *v = json_object_get(o, "shard_samples");
    int ok = json_is_null(v) || (json_is_integer(v) && json_integer_value(v) >= 1);
    *have = json_is_integer(v) ? (long long)json_integer_value(v) : 0;
    json_decref(o);
    if (!ok) {
        mv_fail(e, MV_ERR_IO, "%s: not a record of the tar shards' sample limit (want {\"shard_samples\": "
                "N} with N >= 1, or null): %s", path, o ? "\"shard_samples\" is missing or neither" : je.text);
        return -1;
    }
    return 1;
}

/* 1 with its name in ex[cap] (ex may be NULL) when OUT's top level holds a file of a kind: 0 a
 * .npy.zst output, 1 a tar shard or a temporary one (of any --shard naming); else 0. */
static int top_holds(const char *out_dir, int kind, char *ex, size_t cap)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if (kind)
            found = (!strncmp(nm, "shard-", 6) && l > 10 && !strcmp(nm + l - 4, ".tar")) ||
                    !strncmp(nm, ".tmp-tar-", 9);
        else
            found = l > 8 && !strcmp(nm + l - 8, ".npy.zst");
        if (found && ex)
            snprintf(ex, cap, "%s", nm);
    }
    closedir(d);
    return found;
}

static int holds_shards(const char *out_dir) { return top_holds(out_dir, 1, NULL, 0); }

/* Writes the record {"shard_samples": limit} (null for 0) at path unless a file is there: 1 when
 * written, 0 when one was there (another run's, read it), -1 with e on failure. */
static int write_record(const char *out_dir, const char *path, long long limit, mv_err *e)
{
    char tmp[4400], text[96];
    unsigned long long r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned long long)time(NULL) ^ (unsigned long long)(uintptr_t)&r;
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%016llx-tar.json", out_dir, (long)getpid(), r);
    int n = limit > 0 ? snprintf(text, sizeof text, "{\"shard_samples\": %lld}\n", limit)
                      : snprintf(text, sizeof text, "{\"shard_samples\": null}\n");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0)
        mv_output_lock_temp(fd); /* the sweep of temporary files leaves it alone */
    ssize_t w = fd < 0 ? -1 : write(fd, text, (size_t)n);
    if (fd < 0 || w != n || fsync(fd) != 0) {
        int err = fd < 0 || w < 0 || w == n ? errno : ENOSPC;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        mv_fail(e, MV_ERR_IO, "%s: cannot write OUT's record of the tar shards' sample limit: %s: %s",
                path, tmp, strerror(err));
        return -1;
    }
    int err;
    mv_status st = mv_place(AT_FDCWD, tmp, path, 0, &err, e);
    close(fd); /* its lock held until it has its name */
    if (st) {
        unlink(tmp);
        return err == EEXIST ? 0 : -1; /* another run's record won the name */
    }
    if (mv_sync_dir(out_dir, NULL)) {
        mv_fail(e, MV_ERR_IO, "%s: fsync of directory %s: %s", path, out_dir, strerror(errno));
        return -1;
    }
    return 1;
}

static void limit_text(long long n, char *buf, size_t cap)
{
    if (n > 0)
        snprintf(buf, cap, "at most %lld samples each (--shard-samples %lld)", n, n);
    else
        snprintf(buf, cap, "any number of samples (no --shard-samples)");
}

mv_status mv_tar_limit_agree(const char *out_dir, long long want, long long *limit, int *adopted, mv_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", out_dir, MV_TAR_LIMIT_FILE);
    *limit = want;
    *adopted = 0;
    long long have = 0;
    int r = 0, legacy = 0;
    for (int tries = 0; tries < 3 && r == 0; tries++) {
        if ((r = read_record(path, &have, e)) != 0)
            break; /* read (1), or unreadable (-1) */
        if (want > 0 && holds_shards(out_dir)) {
            /* shards and no record: written without a limit (an earlier version), unless a run
             * starting meanwhile wrote its record before its first shard */
            if ((r = read_record(path, &have, e)) == 0)
                legacy = 1;
            break;
        }
        if ((r = write_record(out_dir, path, want, e)) == 1)
            return MV_OK; /* 0: another run's record took the name first: read it */
    }
    if (r < 0)
        return MV_ERR_IO;
    if (r == 0 && !legacy)
        return mv_fail(e, MV_ERR_IO, "%s: the record appears and goes while it is read", path);
    if (have == want)
        return MV_OK;
    if (want == 0) {
        *limit = have;
        *adopted = 1;
        return MV_OK;
    }
    char was[96], asked[96], give[64];
    limit_text(have, was, sizeof was);
    limit_text(want, asked, sizeof asked);
    if (have > 0)
        snprintf(give, sizeof give, "--shard-samples %lld", have);
    else
        snprintf(give, sizeof give, "no --shard-samples");
    return mv_fail(e, MV_ERR_USAGE, "%s: the tar shards of %s hold %s%s; this run asks for %s, which would "
                   "mix the two in one OUT: give %s, or another OUT", legacy ? out_dir : path, out_dir, was,
                   legacy ? ", written before OUT had this record" : "", asked, give);
}

/* ---- OUT's layout ---------------------------------------------------------------------------- */

int mv_layout_signs(const char *out_dir, int tar, char *ex, size_t cap)
{
    if (!tar)
        return top_holds(out_dir, 0, ex, cap);
    /* a tar run writes its record before any shard: a look at one name, not a walk of what may be
     * millions of outputs */
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", out_dir, MV_TAR_LIMIT_FILE);
    if (lstat(p, &sb) != 0)
        return 0;
    snprintf(ex, cap, "%s", MV_TAR_LIMIT_FILE);
    return 1;
}
