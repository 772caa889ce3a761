/* output.c - atomic OUT/<rel>.npy.zst writer and the sweep of abandoned temp files (see
 * mv_output.h).
 *
 * refuse non-finite data -> O_EXCL temp file ".tmp-<pid>-<random>" beside the final name,
 * write-locked (an OFD lock) for as long as it exists -> NPY header + data streamed through one
 * zstd frame (content size + checksum; the writer's reused context) into it -> fsync -> rename ->
 * fsync dir -> close (which drops the lock). The temp file is created with open(O_CREAT|O_EXCL, 0666) rather than mkstemp so
 * that the final file gets the usual 0666 & ~umask mode instead of mkstemp's 0600.
 * Errors are split: MV_ERR_IO when the disk itself fails (full, quota, read-only, I/O error, file
 * size limit, no descriptors or memory), MV_ERR_OUTPUT when only this output's name or place is
 * wrong (too long, a directory or file in the way, no permission).
 * Also here: making OUT itself (mv_out_dir_make).
 * This file does not choose output names or check collisions between inputs, nor read temp
 * names or judge them abandoned (temps.c: the sweep here asks it).
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "mv_output.h"
#include "mv_beneath.h"
#include "mv_hashset.h"
#include "mv_names.h"
#include "mv_place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

mv_status mv_output_path(const char *out_dir, const char *rel, char *buf, size_t cap, mv_err *e)
{
    const char *flaw = mv_name_flaw(rel);
    if (flaw)
        return mv_fail(e, MV_ERR_USAGE, "output name '%s' %s", rel, flaw);
    if (mv_name_in_pooled_dir(rel)) /* its file would go with the next --pool mean run's rebuild */
        return mv_fail(e, MV_ERR_USAGE, "output name '%s' lies in %s/%.*s/, the directory --pool mean "
                       "writes and replaces whole: give this input under another folder name", rel,
                       out_dir, (int)strcspn(rel, "/"), rel);
    size_t dl = strlen(out_dir);
    while (dl > 1 && out_dir[dl - 1] == '/')
        dl--;
    int sep = dl > 0 && out_dir[dl - 1] != '/';
    int n = snprintf(buf, cap, "%.*s%s", (int)dl, out_dir, sep ? "/" : "");
    if (n >= 0 && (size_t)n < cap) {
        int m = mv_name_output_file(buf + n, cap - (size_t)n, rel);
        n = m < 0 ? m : n + m;
    }
    if (n < 0 || (size_t)n >= cap)
        return mv_fail(e, MV_ERR_LIMIT, "%s/%s" MV_OUTPUT_SUFFIX ": path too long (%zu bytes at most)",
                       out_dir, rel, cap ? cap - 1 : 0);
    return MV_OK;
}

static int clean_dir(DIR *d);

int mv_output_clean_temps(const char *dir)
{
    DIR *d = opendir(dir);
    return d ? clean_dir(d) : -1;
}

/* Removes the abandoned temp files of the open directory d (mv_output_clean_temps' rule), closing d. */
static int clean_dir(DIR *d)
{
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long pid = mv_output_temp_name(de->d_name, NULL);
        if (pid < 0)
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue; /* gone already, or not ours to open: leave it */
        struct stat st, now;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 0 &&
            mv_output_temp_abandoned(fd, &st, pid) &&
            /* still the file we judged (not renamed away and replaced meanwhile) */
            fstatat(dirfd(d), de->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
            unlinkat(dirfd(d), de->d_name, 0) == 0)
            removed++;
        close(fd); /* drops the read lock */
    }
    closedir(d);
    return removed;
}

static int mark_swept(mv_output_swept *s, const char *dir);

int mv_output_sweep_of(const char *out_dir, const char *rel, mv_output_swept *s)
{
    const char *slash = strrchr(rel, '/');
    size_t n = slash ? (size_t)(slash - rel) : 0;
    char dir[PATH_MAX];
    if (n >= sizeof dir)
        return -1;
    memcpy(dir, rel, n);
    dir[n] = 0;
    if (!mark_swept(s, dir))
        return 0;
    int dfd;
    mv_err e;
    if (mv_beneath_dir(out_dir, dir, 0, &dfd, &e) != MV_OK)
        return -1; /* gone, or reached only through a link: nothing of OUT's to sweep */
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    return clean_dir(d);
}

void mv_output_swept_init(mv_output_swept *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
}

void mv_output_swept_destroy(mv_output_swept *s)
{
    mv_hashset_free(&s->dirs);
    pthread_mutex_destroy(&s->mu);
}

/* 1 when dir is to be swept now: it was not yet in s (and is now), or there is no s. 0 when it
 * was (or the set cannot grow). */
static int mark_swept(mv_output_swept *s, const char *dir)
{
    if (!s)
        return 1;
    int fresh = 0;
    pthread_mutex_lock(&s->mu);
    if (!mv_hashset_add(&s->dirs, dir, strlen(dir), &fresh))
        fresh = 0;
    pthread_mutex_unlock(&s->mu);
    return fresh;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Creates dir/.tmp-<pid>-<6 base-36 chars> (dir open as dfd) with O_EXCL and write-locks it; fd
 * or -1 with errno.
 * Without lock support on the file system (ENOLCK, EINVAL, ENOSYS, EOPNOTSUPP) it goes on
 * unlocked: the sweep then goes by age only. */
static int create_temp(int dfd, const char *dir, char *tmp, size_t cap)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    static unsigned long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned long c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        uint64_t seed[3] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30), c,
                            (uint64_t)pthread_self()};
        uint64_t r = mv_hash64(seed, sizeof seed);
        char sfx[7];
        for (int k = 0; k < 6; k++) {
            sfx[k] = digits[r % 36];
            r /= 36;
        }
        sfx[6] = 0;
        int n = snprintf(tmp, cap, "%s/.tmp-%ld-%s", dir, (long)getpid(), sfx);
        if (n < 0 || (size_t)n >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = openat(dfd, strrchr(tmp, '/') + 1, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return -1;
        if (fd < 0)
            continue;
        struct stat st;
        /* a sweeper may have judged the file between open and lock and removed it: then the lock
         * is on an unlinked inode, and a new name is needed */
        if (mv_output_lock_temp(fd) == 0 && fstat(fd, &st) == 0 && st.st_nlink == 0) {
            close(fd);
            continue;
        }
        return fd;
    }
    errno = EEXIST;
    return -1;
}

/* MV_ERR_IO when err means the disk (or this process) cannot take more outputs, MV_ERR_OUTPUT
 * when it is about this one output's name or place. */
static mv_status io_status(int err)
{
    switch (err) {
    case ENOSPC: case EDQUOT: case EROFS: case EIO: case EFBIG:
    case EMFILE: case ENFILE: case ENOMEM:
        return MV_ERR_IO;
    default:
        return MV_ERR_OUTPUT;
    }
}

/* A writer's resources, kept across its outputs: a zstd context allocates megabytes of tables,
 * and making one per file (plus whole-file NPY and compressed buffers) page-faulted ~80 MB of
 * fresh memory per 39 MB output - about half of a writer's time (perf, writebench). */
struct mv_output_writer {
    mv_output_swept *swept; /* the run's, or NULL */
    ZSTD_CCtx *cc;
    uint8_t *zbuf;  /* compressed bytes on their way to the file [ZBUF] */
    uint16_t *half; /* f16 conversion of one input piece [HALF] */
    mv_output_claim_fn claim; /* before each rename, or NULL */
    void *claim_ud;
    mv_output_replacing_fn replacing; /* before a rename over an existing file, or NULL */
};

void mv_output_writer_set_replacing(mv_output_writer *w, mv_output_replacing_fn fn) { w->replacing = fn; }

void mv_output_writer_set_claim(mv_output_writer *w, mv_output_claim_fn fn, void *ud)
{
    w->claim = fn;
    w->claim_ud = ud;
}
enum { ZBUF = 1 << 20, HALF = 1 << 16, PIECE = 4 << 20 };

mv_status mv_output_writer_new(mv_output_swept *swept, mv_output_writer **out, mv_err *e)
{
    mv_output_writer *z = calloc(1, sizeof *z);
    *out = NULL;
    if (z) {
        z->swept = swept;
        z->cc = ZSTD_createCCtx();
        z->zbuf = malloc(ZBUF);
        z->half = malloc(HALF * sizeof *z->half);
    }
    if (!z || !z->cc || !z->zbuf || !z->half) {
        mv_output_writer_free(z);
        return mv_fail(e, MV_ERR_NOMEM, "out of memory for an output writer's compression");
    }
    *out = z;
    return MV_OK;
}

void mv_output_writer_free(mv_output_writer *z)
{
    if (!z)
        return;
    ZSTD_freeCCtx(z->cc);
    free(z->zbuf);
    free(z->half);
    free(z);
}

/* Feeds src into the frame (mode ZSTD_e_continue or ZSTD_e_end) and writes what comes out to fd.
 * -1 with errno set on a write error, -2 on a zstd error (*zerr). */
static int z_feed(mv_output_writer *z, int fd, const void *src, size_t n, ZSTD_EndDirective mode, size_t *written,
                  size_t *zerr)
{
    ZSTD_inBuffer in = {src, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {z->zbuf, ZBUF, 0};
        size_t left = ZSTD_compressStream2(z->cc, &out, &in, mode);
        if (ZSTD_isError(left)) {
            *zerr = left;
            return -2;
        }
        if (out.pos && write_all(fd, z->zbuf, out.pos) != 0)
            return -1;
        *written += out.pos;
        if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

/* Streams the NPY bytes of data as dt, in one zstd frame (content size + checksum), into fd;
 * *written = compressed bytes. f32 data goes to zstd where it lies (no copy); f16 and bf16 are
 * converted a piece at a time. */
static mv_status write_image(mv_output_writer *z, int fd, const char *fin, mv_dtype dt, int64_t rows,
                             int64_t cols, const float *data, int level, size_t *written, mv_err *e)
{
    *written = 0;
    uint8_t hdr[MV_NPY_HEADER_MAX];
    int64_t shape[2] = {rows, cols};
    size_t hl = mv_npy_header(dt, 2, shape, hdr);
    size_t count = (size_t)rows * (size_t)cols, inf = 0;
    size_t r = ZSTD_CCtx_reset(z->cc, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setParameter(z->cc, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setParameter(z->cc, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setParameter(z->cc, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setPledgedSrcSize(z->cc, hl + count * mv_dtype_size(dt));
    int rc = ZSTD_isError(r) ? -2 : z_feed(z, fd, hdr, hl, ZSTD_e_continue, written, &r);
    if (dt == MV_DT_F32) {
        const uint8_t *p = (const uint8_t *)data;
        size_t n = count * sizeof(float);
        for (size_t off = 0; rc == 0 && off < n; off += PIECE)
            rc = z_feed(z, fd, p + off, n - off < PIECE ? n - off : PIECE, ZSTD_e_continue, written, &r);
    } else { /* f16 or bf16 */
        for (size_t off = 0; rc == 0 && off < count; off += HALF) {
            size_t m = count - off < HALF ? count - off : HALF;
            if (dt == MV_DT_F16) {
                mv_f32_to_f16_n(data + off, z->half, m);
                for (size_t k = 0; k < m; k++) /* what is written: past f16's range is Inf there */
                    inf += (z->half[k] & 0x7c00) == 0x7c00;
            } else {
                mv_f32_to_bf16_n(data + off, z->half, m);
            }
            rc = z_feed(z, fd, z->half, m * sizeof *z->half, ZSTD_e_continue, written, &r);
        }
    }
    if (rc == 0)
        rc = z_feed(z, fd, NULL, 0, ZSTD_e_end, written, &r);
    if (rc == 0 && inf)
        return mv_fail(e, MV_ERR_MODEL,
                       "%s: not written: %zu of the embedding's %zu values are past f16's range "
                       "(+-65504) and would be stored as Inf (--out-dtype f32 keeps them)", fin, inf, count);
    if (rc == -1)
        return mv_fail(e, io_status(errno), "%s: write: %s", fin, strerror(errno));
    if (rc == -2)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: zstd compression (level %d): %s", fin, level,
                       ZSTD_getErrorName(r));
    return MV_OK;
}

mv_dtype mv_output_dtype(mv_dtype want, const float *data, size_t count)
{
    if (want != MV_DT_AUTO)
        return want;
    return mv_f16_fits_n(data, count) ? MV_DT_F16 : MV_DT_F32;
}

/* The output's claim (w->claim, when set) and its temp file tmp (bytes long) put at base in dfd:
 * exclusively when the name is free, over an existing file only when the claim lets this input
 * replace it (mv_place; under the claim's lock, so a checked rename where the file system has
 * neither RENAME_NOREPLACE nor hard links); where w->replacing is set, the existing file is
 * removed and w->replacing called first. MV_OK, or the reason naming fin. */
static mv_status place(mv_output_writer *w, const char *rel, int dfd, const char *tmp, const char *base,
                       const char *fin, size_t bytes, mv_err *e)
{
    int may_replace = 1;
    mv_status s;
    struct stat sb;
    if (w->claim && (s = w->claim(w->claim_ud, rel, &may_replace, e)) != MV_OK)
        return s; /* another input holds the name: the final name is left alone */
    if (may_replace && w->replacing && fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
        if (unlinkat(dfd, base, 0) != 0 && errno != ENOENT)
            return mv_fail(e, io_status(errno), "%s: cannot remove the output it replaces: %s", fin, strerror(errno));
        if ((s = w->replacing(w->claim_ud, bytes, e)) != MV_OK)
            return s;
    }
    int err;
    mv_err pe;
    if (mv_place(dfd, strrchr(tmp, '/') + 1, base, (may_replace ? MV_PLACE_REPLACE : 0) | MV_PLACE_CHECK_RENAME,
                 &err, &pe) == MV_OK)
        return MV_OK;
    if (err == EEXIST)
        return mv_fail(e, MV_ERR_OUTPUT, "%s: exists, and no manifest line gives it to this input (another "
                       "run may be writing it; this file system offers no locks to tell): not replaced", fin);
    return mv_fail(e, io_status(err), "%s: rename from '%s': %s", fin, tmp, strerror(err));
}

mv_status mv_output_write(mv_output_writer *w, const char *out_dir, const char *rel, mv_dtype dt,
                          int64_t rows, int64_t cols, const float *data, int zstd_level,
                          char *final_path, size_t cap, size_t *bytes, mv_err *e)
{
    if (final_path && cap)
        final_path[0] = 0;
    if (bytes)
        *bytes = 0;
    if (dt != MV_DT_F32 && dt != MV_DT_F16 && dt != MV_DT_BF16)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s/%s: output dtype must be f32, f16 or bf16 (auto "
                       "is chosen by mv_output_dtype first)", out_dir, rel);
    if (rows < 0 || cols < 0 || (cols > 0 && rows > (int64_t)(SIZE_MAX / 4) / cols))
        return mv_fail(e, MV_ERR_INTERNAL, "%s/%s: bad shape [%lld, %lld]", out_dir, rel,
                       (long long)rows, (long long)cols);
    size_t plen = strlen(out_dir) + strlen(rel) + 16;
    char *fin = mv_malloc(plen);
    char *dir = mv_malloc(plen);
    char *tmp = mv_malloc(plen + 32);
    size_t img_len = 0;
    int fd = -1, tmp_made = 0, dfd = -1;
    mv_status s = MV_OK;
    if (!fin || !dir || !tmp) {
        s = mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", out_dir, rel);
        goto done;
    }
    s = mv_output_path(out_dir, rel, fin, plen, e);
    if (s != MV_OK)
        goto done;
    if (final_path && cap && strlen(fin) >= cap) {
        s = mv_fail(e, MV_ERR_LIMIT, "%s: final path does not fit in %zu bytes", fin, cap);
        goto done;
    }
    memcpy(dir, fin, strlen(fin) + 1);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, "."); /* out_dir "" and a bare name */
    else if (slash == dir)
        strcpy(dir, "/");
    else
        *slash = 0;

    size_t count = (size_t)rows * (size_t)cols, bad = mv_count_nonfinite(data, count);
    if (bad) {
        s = mv_fail(e, MV_ERR_MODEL,
                    "%s: not written: the embedding holds %zu NaN/Inf values of %zu (the model or "
                    "its preprocessing produced non-finite numbers for this input)", fin, bad, count);
        goto done;
    }
    if (strlen(fin) >= PATH_MAX) { /* reachable from a descriptor, but by no reader's path */
        s = mv_fail(e, MV_ERR_OUTPUT, "%.200s...%s: %s (a path of %zu bytes, PATH_MAX is %d)", fin,
                    fin + strlen(fin) - 80, strerror(ENAMETOOLONG), strlen(fin), PATH_MAX);
        goto done;
    }
    /* the directory beneath OUT (mv_beneath.h): a symlink below OUT never leads an output out */
    const char *below = fin + strlen(fin) - mv_name_output_file(tmp, plen, rel);
    char *last = strrchr(tmp, '/');
    *(last ? last : tmp) = 0;
    if ((s = mv_beneath_dir(out_dir, tmp, 1, &dfd, e)) != MV_OK) {
        s = mv_fail_prefix(e, s, "%s: not written", fin);
        goto done;
    }
    if (mark_swept(w->swept, dir))
        mv_output_clean_temps(dir); /* best effort: a failure here is not the write's failure */

    fd = create_temp(dfd, dir, tmp, plen + 32);
    if (fd < 0) {
        s = mv_fail(e, io_status(errno), "%s: cannot create temp file in '%s': %s", fin, dir,
                    strerror(errno));
        goto done;
    }
    tmp_made = 1;
    if ((s = write_image(w, fd, fin, dt, rows, cols, data, zstd_level, &img_len, e)) != MV_OK)
        goto done;
    if (fsync(fd) != 0) {
        s = mv_fail(e, io_status(errno), "%s: fsync: %s", fin, strerror(errno));
        goto done;
    }
    /* put in place while still open: the lock holds until the temp name is gone */
    const char *base = strrchr(below, '/') ? strrchr(below, '/') + 1 : below;
    if ((s = place(w, rel, dfd, tmp, base, fin, img_len, e)) != MV_OK)
        goto done;
    tmp_made = 0;
    int cr = close(fd);
    fd = -1;
    if (cr != 0) {
        s = mv_fail(e, io_status(errno), "%s: close: %s", fin, strerror(errno));
        unlinkat(dfd, base, 0);
        goto done;
    }
    /* some file systems cannot fsync a directory (EINVAL): nothing more to do there */
    if (fsync(dfd) != 0 && errno != EINVAL && errno != EROFS) {
        s = mv_fail(e, io_status(errno), "%s: fsync of directory '%s': %s", fin, dir,
                    strerror(errno));
        unlinkat(dfd, base, 0);
        goto done;
    }
    if (final_path && cap)
        strcpy(final_path, fin);
    if (bytes)
        *bytes = img_len;
done:
    if (fd >= 0)
        close(fd);
    if (tmp_made)
        unlinkat(dfd, strrchr(tmp, '/') + 1, 0);
    if (dfd >= 0)
        close(dfd);
    free(fin);
    free(dir);
    free(tmp);
    return s;
}

/* The topmost directory on the way to path that does not exist yet (malloc'd); NULL when path
 * exists, or when out of memory (then nothing is taken for this run's own). */
static char *first_missing(const char *path)
{
    struct stat sb;
    char *cur = strdup(path), *top = NULL;
    for (size_t n = cur ? strlen(cur) : 0; n > 0 && lstat(cur, &sb) != 0 && errno == ENOENT;) {
        free(top);
        if (!(top = strdup(cur)))
            break;
        while (n > 1 && cur[n - 1] == '/') /* up one name */
            cur[--n] = 0;
        while (n > 0 && cur[n - 1] != '/')
            cur[--n] = 0;
        while (n > 1 && cur[n - 1] == '/')
            cur[--n] = 0;
    }
    free(cur);
    return top;
}

/* ---- OUT itself ----------------------------------------------------------------------------- */

mv_status mv_out_dir_make(const char *out, mv_err *e)
{
    char *top = first_missing(out);
    mv_status st = mv_mkdirs(out, e); /* "afile: Not a directory" alone does not say what failed */
    if (st)
        mv_fail_prefix(e, st, "cannot create the output directory (--out)");
    else if (access(out, W_OK) != 0 || access(out, R_OK | X_OK) != 0) /* its listing is read too */
        st = mv_fail(e, MV_ERR_IO, "%s: output directory is not %s: %s", out,
                     access(out, W_OK) ? "writable" : "readable and searchable", strerror(errno));
    struct stat sb;
    if (st && top && stat(top, &sb) == 0) {
        unsigned mode = (unsigned)sb.st_mode & 0777;
        char *cur = strdup(out);
        for (size_t n = cur ? strlen(cur) : 0; n > 0; ) { /* this run's directories, deepest first */
            while (n > 1 && cur[n - 1] == '/')
                cur[--n] = 0;
            int last = !strcmp(cur, top);
            rmdir(cur);
            if (last)
                break;
            while (n > 0 && cur[n - 1] != '/')
                cur[--n] = 0;
        }
        free(cur);
        if ((mode & 0700) != 0700) {
            char was[sizeof e->msg];
            snprintf(was, sizeof was, "%s", e->msg);
            mv_fail(e, st, "%s (mvembed made %s with mode %03o, as the umask %04o asks, and removed it "
                    "again: run with a umask that leaves the owner read, write and search permission, such "
                    "as 022)", was, top, mode, 0777 & ~mode);
        }
    }
    free(top);
    return st;
}
