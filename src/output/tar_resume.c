/* tar_resume.c - the tar layout's resume checks (see mv_tar_resume.h): a recorded sample is
 * re-read from its shard and its XXH64 compared (one pread of the member per input: the shard's
 * other members are not read); orphan shards are read whole with libarchive and their samples'
 * records adopted. Not here: writing shards (tar_out.c), the manifest (manifest*.c).
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "mv_tar_resume.h"

#include "mv_claims.h"
#include "mv_names.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
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

char *mv_tar_record_set(const char *rec, const char *name, const char *v, int number)
{
    char pat[32];
    snprintf(pat, sizeof pat, number ? "\"%s\":" : "\"%s\":\"", name);
    const char *p = strstr(rec, pat); /* inside a JSON string every '"' is escaped: no false hit */
    if (!p)
        return NULL;
    const char *vs = p + strlen(pat), *ve = vs;
    while (*ve && (number ? isdigit((unsigned char)*ve) : *ve != '"'))
        ve++;
    size_t n = (size_t)(vs - rec) + strlen(v) + strlen(ve) + 1;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%.*s%s%s", (int)(vs - rec), rec, v, ve);
    return out;
}

/* ---- orphan shards ------------------------------------------------------------------------ */

/* 1 when the sample's record (text[0..len), its .json member) names this shard and key, has no ok
 * line in done, and npy[0..npy_len) is the member it records (size, XXH64; not checked when npy
 * is NULL). */
static int adoptable(const char *shard, const char *key, const char *text, size_t len,
                     const uint8_t *npy, size_t npy_len, const mv_done *done)
{
    json_error_t jerr;
    json_t *o = json_loadb(text, len, 0, &jerr);
    json_t *js = json_object_get(o, "shard"), *jk = json_object_get(o, "key");
    json_t *jb = json_object_get(o, "bytes"), *jx = json_object_get(o, "xxh64");
    json_t *st = json_object_get(o, "status");
    char *input = json_is_object(o) ? mv_line_path_field(o, "input", NULL) : NULL;
    char *abs = input ? mv_line_path_field(o, "input_abs", NULL) : NULL;
    char hex[24] = "";
    if (npy)
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)mv_tar_checksum(npy, npy_len));
    mv_done_sample smp;
    int ok = input && json_is_string(st) && !strcmp(json_string_value(st), "ok") &&
             json_is_string(js) && !strcmp(json_string_value(js), shard) && json_is_string(jk) &&
             !strcmp(json_string_value(jk), key) && json_is_integer(jb) && json_is_string(jx) &&
             (!npy || (json_integer_value(jb) == (json_int_t)npy_len && !strcmp(json_string_value(jx), hex))) &&
             !mv_done_sample_of(done, input, abs, &smp);
    free(input);
    free(abs);
    json_decref(o);
    return ok;
}

/* Reads the whole data of the current member into *buf (realloc'd); -1 when unreadable. */
static int read_member(struct archive *a, int64_t size, uint8_t **buf, size_t *cap)
{
    if (size < 0 || size > (1LL << 34))
        return -1;
    if ((size_t)size + 1 > *cap) {
        uint8_t *nb = realloc(*buf, (size_t)size + 1);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = (size_t)size + 1;
    }
    for (int64_t got = 0; got < size;) {
        la_ssize_t k = archive_read_data(a, *buf + got, (size_t)(size - got));
        if (k <= 0)
            return -1;
        got += k;
    }
    return 0;
}

/* The adoptable samples' records of the shard open as fd, appended to *lines (with verify; else
 * only counted, the .npy members' data not read). 0, or -1 when the shard cannot be read whole
 * (then nothing of it is adopted). */
static int shard_orphans(int fd, const char *name, const mv_done *done, int verify, char **lines,
                         size_t *nlines, long *n)
{
    struct archive *a = archive_read_new();
    if (!a)
        return -1;
    archive_read_support_format_tar(a);
    int rc = archive_read_open_fd(a, fd, 1 << 16) == ARCHIVE_OK ? 0 : -1;
    uint8_t *npy = NULL, *js = NULL;
    size_t npy_cap = 0, js_cap = 0, npy_len = 0;
    char npy_key[160] = "";
    struct archive_entry *en;
    int r;
    while (!rc && (r = archive_read_next_header(a, &en)) == ARCHIVE_OK) {
        const char *m = archive_entry_pathname(en);
        size_t ml = m ? strlen(m) : 0;
        int64_t size = archive_entry_size(en);
        if (ml > 4 && ml < sizeof npy_key && !strcmp(m + ml - 4, ".npy")) {
            rc = verify ? read_member(a, size, &npy, &npy_cap) : 0;
            snprintf(npy_key, sizeof npy_key, "%.*s", (int)(ml - 4), m);
            npy_len = (size_t)size;
        } else if (ml > 5 && !strcmp(m + ml - 5, ".json") && npy_key[0] &&
                   strlen(npy_key) == ml - 5 && !strncmp(m, npy_key, ml - 5)) {
            if (!(rc = read_member(a, size, &js, &js_cap)) && size > 0 &&
                adoptable(name, npy_key, (const char *)js, (size_t)size, verify ? npy : NULL, npy_len, done)) {
                int nl = js[size - 1] != '\n';
                char *nb = verify ? realloc(*lines, *nlines + (size_t)size + 1) : NULL;
                if (!verify)
                    (*n)++;
                else if (!nb)
                    rc = -1;
                else {
                    *lines = nb;
                    memcpy(nb + *nlines, js, (size_t)size);
                    *nlines += (size_t)size;
                    if (nl)
                        nb[(*nlines)++] = '\n';
                    (*n)++;
                }
            }
            npy_key[0] = 0;
        }
    }
    if (!rc && r != ARCHIVE_EOF)
        rc = -1;
    archive_read_free(a);
    free(npy);
    free(js);
    return rc;
}

mv_status mv_tar_adopt(const char *out_dir, int k, int n, const mv_done *done, mv_claims *claims,
                       mv_tar_commit_fn commit, void *ud, long *n_adopted, mv_err *e)
{
    *n_adopted = 0;
    DIR *d = opendir(out_dir);
    if (!d)
        return mv_fail(e, MV_ERR_IO, "%s: cannot list the output directory: %s", out_dir, strerror(errno));
    mv_status st = MV_OK;
    struct dirent *de;
    mv_done_owner ow;
    while (!st && (de = readdir(d)) != NULL) {
        if (mv_name_tar_shard_parse(de->d_name, k, n) < 0 || mv_done_owner_of(done, de->d_name, &ow))
            continue; /* not a shard of this naming, or some input's latest ok line names it */
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
        struct stat sb;
        if (fd < 0)
            continue;
        /* its writer holds the lock until its lines are appended: a live run's shard is not ours */
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
            (fcntl(fd, F_OFD_SETLK, &fl) != 0 && (errno == EAGAIN || errno == EACCES))) {
            close(fd);
            continue;
        }
        char *lines = NULL;
        size_t nlines = 0;
        long cnt = 0;
        /* a first pass reads the records only: a shard whose inputs all have lines (dead samples
         * awaiting manifest compact) is not read whole at every run */
        int r = shard_orphans(fd, de->d_name, done, 0, &lines, &nlines, &cnt);
        /* done was read before the lock was taken: a run that appended this shard's lines and
         * let its lock go since then was no orphan's (its lines appear in the manifests now) */
        if (!r && cnt > 0 && !mv_claims_named(claims, de->d_name) && lseek(fd, 0, SEEK_SET) == 0) {
            cnt = 0;
            r = shard_orphans(fd, de->d_name, done, 1, &lines, &nlines, &cnt);
            if (!r && cnt > 0 && !(st = commit(ud, lines, nlines, e)))
                *n_adopted += cnt;
        }
        free(lines);
        close(fd);
    }
    closedir(d);
    return st;
}
