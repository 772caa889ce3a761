/* tar_out.c - the tar layout's shard writer (see mv_tar.h for the format and the guarantees).
 *
 * libarchive writes the ustar members; it is set to no blocking (bytes_per_block 0), so every
 * byte it produces reaches our write callback at once and the callback's running count is the
 * position in the file. The offset of a member's data is that count right after
 * archive_write_header, and it is checked rather than assumed: it must be a multiple of 512 and,
 * after the data, the count must have grown by exactly the data's size (an internal error
 * otherwise, so a different libarchive behaviour cannot record wrong offsets silently).
 * This file does not append to the manifest (the commit callback does) nor pick inputs.
 */
#define _GNU_SOURCE /* renameat2 */
#include "mv_tar.h"
#include "mv_names.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct mv_tar_set {
    char *dir;
    int k, n;
    long long target;
    atomic_llong next;    /* next shard number to try */
    mv_tar_commit_fn commit;
    void *ud;
    char host[17];        /* hash of this host's name, 16 hex digits */
};

struct mv_tar_shard {
    struct archive *a;
    int fd;
    char *tmp, *fin;      /* full paths: temporary and final */
    char name[96];        /* final name relative to OUT */
    char stem[80];        /* key prefix: name between "shard-" and ".tar" */
    char key[100];        /* key of the latest sample */
    int64_t pos;          /* bytes written so far (the write callback's count) */
    long n;               /* samples written */
    char *lines;          /* manifest lines of the samples, each ending in '\n' */
    size_t nlines, cap;
    int werrno;           /* errno of a failed write, 0 if none */
};

/* ---- temporary names (final names: mv_name_tar_shard, mv_names.h) ---------------------- */

/* Parses ".tmp-tar-<pid>-<16 hex>-<final>": returns the final part, sets *pid and host[17];
 * NULL when name is not a temporary shard. */
static const char *parse_temp(const char *name, long *pid, char host[17])
{
    const char *p = name;
    if (strncmp(p, ".tmp-tar-", 9) != 0)
        return NULL;
    p += 9;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || *end != '-' || v <= 0)
        return NULL;
    p = end + 1;
    for (int i = 0; i < 16; i++)
        if (!isxdigit((unsigned char)p[i]))
            return NULL;
    if (p[16] != '-')
        return NULL;
    memcpy(host, p, 16);
    host[16] = 0;
    *pid = v;
    return p + 17;
}

int mv_tar_parse_size(const char *s, long long *bytes)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    long long v = strtoll(s, &end, 10);
    if (errno || v <= 0)
        return -1;
    long long mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1LL << 10; end++; break;
    case 'm': case 'M': mul = 1LL << 20; end++; break;
    case 'g': case 'G': mul = 1LL << 30; end++; break;
    case 't': case 'T': mul = 1LL << 40; end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v > (1LL << 62) / mul)
        return -1;
    *bytes = v * mul;
    return 0;
}

/* ---- the set ------------------------------------------------------------------------------ */

mv_status mv_tar_set_open(const char *out_dir, int k, int n, long long target_bytes,
                          mv_tar_commit_fn commit, void *ud, mv_tar_set **out, mv_err *e)
{
    *out = NULL;
    mv_tar_set *s = mv_calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(out_dir))) {
        free(s);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
    }
    s->k = k;
    s->n = n;
    s->target = target_bytes > 0 ? target_bytes : MV_TAR_DEFAULT_SHARD_SIZE;
    s->commit = commit;
    s->ud = ud;
    char hn[256] = "";
    if (gethostname(hn, sizeof hn - 1) != 0)
        strcpy(hn, "localhost");
    snprintf(s->host, sizeof s->host, "%016llx", (unsigned long long)mv_hash64(hn, strlen(hn)));
    DIR *d = opendir(out_dir);
    if (!d) {
        mv_tar_set_free(s);
        return mv_fail(e, MV_ERR_IO, "%s: cannot list the output directory: %s", out_dir,
                       strerror(errno));
    }
    long long max = -1;
    long self = (long)getpid();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long long num = mv_name_tar_shard_parse(de->d_name, k, n);
        long pid;
        char host[17];
        const char *fin = parse_temp(de->d_name, &pid, host);
        if (fin) {
            /* a temporary shard of a process of this host that no longer exists: its inputs have
             * no manifest line, so they are redone; the file goes */
            if (!strcmp(host, s->host) && pid != self && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
                unlinkat(dirfd(d), de->d_name, 0); /* best effort: a leftover is only space */
                continue;
            }
            num = mv_name_tar_shard_parse(fin, k, n); /* alive (or another host's): its number is taken */
        }
        if (num > max)
            max = num;
    }
    closedir(d);
    atomic_store(&s->next, max + 1);
    *out = s;
    return MV_OK;
}

void mv_tar_set_free(mv_tar_set *s)
{
    if (!s)
        return;
    free(s->dir);
    free(s);
}

/* ---- one shard ---------------------------------------------------------------------------- */

static la_ssize_t write_cb(struct archive *a, void *ud, const void *buf, size_t len)
{
    mv_tar_shard *sh = ud;
    const char *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t k = write(sh->fd, p, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            sh->werrno = k < 0 ? errno : EIO;
            archive_set_error(a, sh->werrno, "%s", strerror(sh->werrno));
            return -1;
        }
        p += k;
        left -= (size_t)k;
    }
    sh->pos += (int64_t)len;
    return (la_ssize_t)len;
}

static void shard_free(mv_tar_shard *sh)
{
    if (sh->a)
        archive_write_free(sh->a); /* closes the archive too; its writes may fail, no matter */
    if (sh->fd >= 0)
        close(sh->fd);
    free(sh->tmp);
    free(sh->fin);
    free(sh->lines);
    free(sh);
}

void mv_tar_abandon(mv_tar_shard *sh)
{
    if (!sh)
        return;
    if (sh->tmp)
        unlink(sh->tmp);
    shard_free(sh);
}

static mv_status shard_open(mv_tar_set *s, mv_tar_shard **out, mv_err *e)
{
    *out = NULL;
    mv_tar_shard *sh = mv_calloc(1, sizeof *sh);
    size_t plen = strlen(s->dir) + 200;
    if (!sh || !(sh->tmp = mv_malloc(plen)) || !(sh->fin = mv_malloc(plen))) {
        if (sh) {
            free(sh->tmp);
            free(sh);
        }
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a shard", s->dir);
    }
    sh->fd = -1;
    /* a number whose final name exists already (another process under the same naming) is
     * skipped; the temporary name carries our pid, so it cannot collide */
    for (int tries = 0; tries < 1000; tries++) {
        long long num = atomic_fetch_add(&s->next, 1);
        mv_name_tar_shard(sh->name, sizeof sh->name, s->k, s->n, num);
        snprintf(sh->stem, sizeof sh->stem, "%.*s", (int)(strlen(sh->name) - 10), sh->name + 6);
        snprintf(sh->fin, plen, "%s/%s", s->dir, sh->name);
        snprintf(sh->tmp, plen, "%s/.tmp-tar-%ld-%s-%s", s->dir, (long)getpid(), s->host, sh->name);
        if (access(sh->fin, F_OK) == 0)
            continue;
        sh->fd = open(sh->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (sh->fd >= 0 || errno != EEXIST)
            break;
    }
    if (sh->fd < 0) {
        mv_fail(e, MV_ERR_IO, "%s: cannot create temporary shard %s: %s", sh->fin, sh->tmp,
                strerror(errno));
        free(sh->tmp);
        sh->tmp = NULL;
        shard_free(sh);
        return MV_ERR_IO;
    }
    sh->a = archive_write_new();
    if (!sh->a) {
        mv_tar_abandon(sh);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for libarchive", s->dir);
    }
    if (archive_write_set_format_ustar(sh->a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(sh->a, 0) != ARCHIVE_OK ||
        archive_write_open(sh->a, sh, NULL, write_cb, NULL) != ARCHIVE_OK) {
        mv_fail(e, MV_ERR_IO, "%s: libarchive: %s", sh->fin, archive_error_string(sh->a));
        mv_tar_abandon(sh);
        return MV_ERR_IO;
    }
    *out = sh;
    return MV_OK;
}

/* Writes one member name with data[0..len); *data_off receives the offset of its data. */
static mv_status add_member(mv_tar_shard *sh, const char *name, const void *data, size_t len,
                            int64_t *data_off, mv_err *e)
{
    struct archive_entry *en = archive_entry_new();
    if (!en)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
    archive_entry_set_pathname(en, name);
    archive_entry_set_size(en, (la_int64_t)len);
    archive_entry_set_filetype(en, AE_IFREG);
    archive_entry_set_perm(en, 0644);
    archive_entry_set_mtime(en, time(NULL), 0);
    int r = archive_write_header(sh->a, en);
    archive_entry_free(en);
    if (r != ARCHIVE_OK)
        return mv_fail(e, MV_ERR_IO, "%s: %s: %s", sh->fin, name, archive_error_string(sh->a));
    int64_t off = sh->pos;
    if (off % 512 != 0)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: %s: libarchive put the data at byte %lld, not on a "
                       "512-byte block", sh->fin, name, (long long)off);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        la_ssize_t k = archive_write_data(sh->a, p, left);
        if (k <= 0)
            return mv_fail(e, MV_ERR_IO, "%s: %s: %s", sh->fin, name,
                           k < 0 ? archive_error_string(sh->a) : "libarchive wrote nothing");
        p += k;
        left -= (size_t)k;
    }
    if (sh->pos != off + (int64_t)len)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: %s: %zu bytes of data moved the file by %lld",
                       sh->fin, name, len, (long long)(sh->pos - off));
    *data_off = off;
    return MV_OK;
}

static int64_t pad512(int64_t n) { return (n + 511) / 512 * 512; }

mv_status mv_tar_add(mv_tar_set *s, mv_tar_shard **shp, mv_record *r, mv_dtype dt, int64_t rows,
                     int64_t cols, const float *data, mv_err *e)
{
    if (dt != MV_DT_F32 && dt != MV_DT_F16 && dt != MV_DT_BF16)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tar layout: dtype must be f32, f16 or bf16", r->input);
    uint8_t *npy = NULL;
    size_t npy_len = 0;
    mv_status st = mv_npy_encode_f32_as(dt, rows, cols, data, &npy, &npy_len, e);
    if (st)
        return mv_fail_prefix(e, st, "%s", r->input);
    size_t npy_hdr = npy_len - (size_t)rows * (size_t)cols * mv_dtype_size(dt);
    char *line = NULL;
    size_t line_len = 0;
    /* complete a shard that this sample would take past the target (its .json counted as one
     * block plus a header; the end-of-archive is 1024 bytes) */
    mv_tar_shard *sh = *shp;
    if (sh && sh->n > 0 && sh->pos + 512 + pad512((int64_t)npy_len) + 1024 + 1024 > s->target) {
        *shp = NULL;
        if ((st = mv_tar_close(s, sh, e)))
            goto out;
        sh = NULL;
    }
    if (!sh) {
        if ((st = shard_open(s, &sh, e)))
            goto out;
        *shp = sh;
    }
    snprintf(sh->key, sizeof sh->key, "%s-%06ld", sh->stem, sh->n);
    char member[160];
    int64_t off;
    snprintf(member, sizeof member, "%s.npy", sh->key);
    if ((st = add_member(sh, member, npy, npy_len, &off, e)))
        goto out;
    r->output = sh->name;
    r->shard = sh->name;
    r->key = sh->key;
    r->has_offset = 1;
    r->offset = off + (int64_t)npy_hdr;
    if (r->offset % 64 != 0) {
        st = mv_fail(e, MV_ERR_INTERNAL, "%s: %s: array data at byte %lld is not 64-byte aligned",
                     sh->fin, member, (long long)r->offset);
        goto out;
    }
    if ((st = mv_manifest_format(r, &line, &line_len, e)))
        goto out;
    line[line_len++] = '\n'; /* the format's NUL terminator becomes the newline */
    snprintf(member, sizeof member, "%s.json", sh->key);
    if ((st = add_member(sh, member, line, line_len, &off, e)))
        goto out;
    if (sh->nlines + line_len > sh->cap) {
        size_t nc = sh->cap ? sh->cap : 4096;
        while (nc < sh->nlines + line_len)
            nc *= 2;
        char *nl = realloc(sh->lines, nc);
        if (!nl) {
            st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
            goto out;
        }
        sh->lines = nl;
        sh->cap = nc;
    }
    memcpy(sh->lines + sh->nlines, line, line_len);
    sh->nlines += line_len;
    sh->n++;
out:
    free(npy);
    free(line);
    return st;
}

mv_status mv_tar_close(mv_tar_set *s, mv_tar_shard *sh, mv_err *e)
{
    if (!sh)
        return MV_OK;
    mv_status st = MV_OK;
    if (archive_write_close(sh->a) != ARCHIVE_OK) {
        st = mv_fail(e, MV_ERR_IO, "%s: completing the tar: %s", sh->fin, archive_error_string(sh->a));
        mv_tar_abandon(sh);
        return st;
    }
    archive_write_free(sh->a);
    sh->a = NULL;
    if (fsync(sh->fd) != 0) {
        st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", sh->fin, strerror(errno));
        mv_tar_abandon(sh);
        return st;
    }
    int cr = close(sh->fd);
    sh->fd = -1;
    if (cr != 0) {
        st = mv_fail(e, MV_ERR_IO, "%s: close: %s", sh->fin, strerror(errno));
        mv_tar_abandon(sh);
        return st;
    }
    /* never over an existing shard; file systems without RENAME_NOREPLACE get a plain rename
     * (the name was free when the shard was opened) */
    int rr = renameat2(AT_FDCWD, sh->tmp, AT_FDCWD, sh->fin, RENAME_NOREPLACE);
    if (rr != 0 && (errno == EINVAL || errno == ENOSYS))
        rr = rename(sh->tmp, sh->fin);
    if (rr != 0) {
        st = mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", sh->fin, sh->tmp, strerror(errno));
        mv_tar_abandon(sh);
        return st;
    }
    int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL && errno != EROFS)) {
        st = mv_fail(e, MV_ERR_IO, "%s: fsync of directory %s: %s", sh->fin, s->dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        unlink(sh->fin); /* not durable: its inputs are redone, no line points into it */
        free(sh->tmp);
        sh->tmp = NULL;
        shard_free(sh);
        return st;
    }
    close(dfd);
    /* the shard is complete and durable: now its lines may name it */
    st = s->commit(s->ud, sh->lines, sh->nlines, e);
    free(sh->tmp);
    sh->tmp = NULL;
    shard_free(sh);
    return st;
}
