/* tar_dedup.c - the tar layout's member writer, and its commit-time check of runs over the same
 * inputs (see mv_tar.h, mv_tar_set_dedup; the structures are tar_int.h's).
 *
 * Member writer: libarchive, no blocking, so the write callback's running count is the file
 * position, and every member's data offset is checked rather than assumed (see tar_out.c).
 *
 * The check: two runs into one OUT over the same inputs each embed what they did not find done
 * when they started. A completed shard's commit (its check, its name, its lines) is therefore one
 * step under the flock of its naming's manifest: the lines appended since the last look are read
 * (only what came since the run started: a --force run redoes what older runs did), the inputs
 * another run of the same settings has an ok line for are noted, and the shard's samples of those
 * inputs are taken out: the shard is written again, beside it, without them (each kept .npy copied
 * as it was, its record's "offset" set to its new place), and replaces the temporary file. Then the
 * shard is named and its lines are appended with the lock still held, so whichever run commits an
 * input second sees the first's line. Runs of other namings (--shard K/N, or none) commit under
 * other manifests' locks: with the run's claims, every commit also holds OUT's commit lock, and
 * an input whose newest line in any manifest since the run started is another run's ok line is
 * taken out too. Not here: choosing shard numbers, naming (tar_out.c).
 */
#include "tar_int.h"

#include "mv_claims.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_tar_resume.h"

#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the member writer ----------------------------------------------------------------------- */

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
    mv_start_writeback(sh->fd, &sh->flushed, sh->pos);
    return (la_ssize_t)len;
}

mv_status mv_tar_archive_open(mv_tar_shard *sh, mv_err *e)
{
    sh->a = archive_write_new();
    if (!sh->a)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for libarchive", sh->fin);
    if (archive_write_set_format_ustar(sh->a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(sh->a, 0) != ARCHIVE_OK ||
        archive_write_open(sh->a, sh, NULL, write_cb, NULL) != ARCHIVE_OK)
        return mv_fail(e, MV_ERR_IO, "%s: libarchive: %s", sh->fin, archive_error_string(sh->a));
    return MV_OK;
}

mv_status mv_tar_member(mv_tar_shard *sh, const char *name, const void *data, size_t len,
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

mv_status mv_tar_note_npy(mv_tar_shard *sh, int64_t off, size_t len, size_t hdr, mv_err *e)
{
    if ((size_t)sh->n >= sh->npy_cap) {
        size_t nc = sh->npy_cap ? sh->npy_cap * 2 : 64;
        mv_tar_npy_at *nv = realloc(sh->npy, nc * sizeof *nv);
        if (!nv)
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
        sh->npy = nv;
        sh->npy_cap = nc;
    }
    sh->npy[sh->n] = (mv_tar_npy_at){.off = off, .len = (int64_t)len, .hdr = (int64_t)hdr};
    return MV_OK;
}

/* ---- the check ------------------------------------------------------------------------------- */

mv_status mv_tar_set_dedup(mv_tar_set *s, const mv_tar_dedup_opts *o, mv_err *e)
{
    mv_tar_dd *dd = mv_calloc(1, sizeof *dd);
    if (!dd)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", s->dir);
    dd->o = *o;
    snprintf(dd->run, sizeof dd->run, "%s", o->run ? o->run : "");
    snprintf(dd->model, sizeof dd->model, "%s", o->model ? o->model : "");
    dd->o.run = dd->run;
    dd->o.model = dd->model;
    dd->off = o->from > 0 ? o->from : 0;
    mv_tar_dedup_free(s->dd);
    s->dd = dd;
    return MV_OK;
}

void mv_tar_dedup_free(mv_tar_dd *dd)
{
    if (!dd)
        return;
    mv_hashset_free(&dd->others);
    free(dd);
}

/* The key of a parsed line's input (its path from /, else its input: mv_line_input_key),
 * malloc'd, *kl its length; NULL when it has none (or out of memory). */
static char *input_key(json_t *o, size_t *kl)
{
    char *p = mv_line_path_field(o, "input_abs", NULL);
    if (!p)
        p = mv_line_path_field(o, "input", NULL);
    char *k = p ? mv_line_input_key(p, strlen(p), kl) : NULL;
    free(p);
    return k;
}

/* A tag of it (0: not recorded), an others entry's value: a sample of an input read otherwise
 * (changed on disk between two runs' reads) is not the other run's. */
static size_t src_tag(const mv_done_input_stat *s)
{
    int64_t v[2] = {s->bytes, s->has_mtime ? s->mtime_ns : 0};
    size_t h = s->bytes < 0 ? 0 : (size_t)mv_hash64(v, sizeof v);
    return s->bytes < 0 || h ? h : 1;
}

/* Reads n bytes at off of fd into a malloc'd buffer (NULL when out of memory), *got of them: fewer
 * where the file ends first or a read fails (errno set). */
static char *read_at(int fd, int64_t off, size_t n, size_t *got)
{
    char *b = mv_malloc(n);
    *got = 0;
    while (b && *got < n) {
        ssize_t k = pread(fd, b + *got, n - *got, off + (int64_t)*got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            errno = k < 0 ? errno : EIO;
            break;
        }
        *got += (size_t)k;
    }
    return b;
}

/* Reads the manifest (the lock's descriptor, the lock held) from dd->off to its last whole
 * line, noting the inputs of other runs' ok lines of this model. */
static mv_status read_new(mv_tar_set *s, mv_err *e)
{
    mv_tar_dd *dd = s->dd;
    struct stat sb;
    if (fstat(s->lock_fd, &sb) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: manifest: fstat: %s", s->dir, strerror(errno));
    int64_t size = (int64_t)sb.st_size;
    if (size < dd->off) /* cut back (a line that failed to be written): nothing new */
        dd->off = size;
    while (!dd->started && dd->off > 0) { /* the start offset: back to the start of its line */
        char c;
        if (pread(s->lock_fd, &c, 1, dd->off - 1) != 1 || c == '\n')
            break;
        dd->off--;
    }
    dd->started = 1;
    if (size == dd->off)
        return MV_OK;
    size_t got; /* a short read: its whole lines now, the rest next time */
    char *buf = read_at(s->lock_fd, dd->off, (size_t)(size - dd->off), &got);
    if (!buf)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory reading the manifest", s->dir);
    mv_status st = MV_OK;
    char *p = buf, *end = buf + got, *nl;
    for (; !st && p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
        const char *status = json_string_value(json_object_get(o, "status"));
        const char *run = json_string_value(json_object_get(o, "run"));
        const char *model = json_string_value(json_object_get(o, "model"));
        if (status && !strcmp(status, "ok") && run && strcmp(run, dd->run) && model && !strcmp(model, dd->model)) {
            size_t kl = 0;
            char *k = input_key(o, &kl);
            mv_hashset_entry *en = k ? mv_hashset_add(&dd->others, k, kl, NULL) : NULL;
            mv_done_input_stat src;
            mv_line_input_stat(o, &src);
            if (en)
                en->value = src_tag(&src); /* its newest ok line's */
            else if (k)
                st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", s->dir);
            free(k);
        }
        json_decref(o);
    }
    dd->off += (int64_t)(p - buf); /* a line still being written is read next time */
    free(buf);
    return st;
}

/* Appends line[0..len) (no '\n'), then '\n', to *buf (*n bytes, *cap). 0, or -1 out of memory. */
static int add_line(char **buf, size_t *n, size_t *cap, const char *line, size_t len)
{
    if (*n + len + 1 > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *n + len + 1)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *n, line, len);
    (*buf)[*n + len] = '\n';
    *n += len + 1;
    return 0;
}

/* One kept sample i (its line[0..len), no '\n'; its key) into nsh: the .npy as it was in rfd,
 * the record with its new offset as .json and in *lines. */
static mv_status copy_sample(mv_tar_shard *sh, mv_tar_shard *nsh, int rfd, long i, const char *line,
                             size_t len, const char *key, char **lines, size_t *nl, size_t *cap, mv_err *e)
{
    mv_tar_npy_at at = sh->npy[i];
    char member[160], num[24];
    int64_t off;
    size_t got;
    char *npy = read_at(rfd, at.off, (size_t)at.len, &got);
    if (!npy || got < (size_t)at.len) {
        int err = npy ? errno : ENOMEM;
        free(npy);
        return mv_fail(e, MV_ERR_IO, "%s: reading back sample %s: %s", sh->tmp, key, strerror(err));
    }
    snprintf(member, sizeof member, "%s.npy", key);
    mv_status st = mv_tar_member(nsh, member, npy, (size_t)at.len, &off, e);
    free(npy);
    if (st)
        return st;
    snprintf(num, sizeof num, "%lld", (long long)(off + at.hdr));
    size_t start = *nl; /* the new line, with its '\n', is the .json member */
    char *l0 = strndup(line, len), *l1 = l0 ? mv_tar_record_set(l0, "offset", num, 1) : NULL;
    free(l0);
    if (!l1 || add_line(lines, nl, cap, l1, strlen(l1))) {
        free(l1);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory (or a record without offset)", sh->fin);
    }
    free(l1);
    snprintf(member, sizeof member, "%s.json", key);
    return mv_tar_member(nsh, member, *lines + start, *nl - start, &off, e);
}

/* Writes sh again without the samples drop marks, as "<temporary name>.dedup" (locked as a
 * temporary shard is, so no sweep takes it), which then stands for sh's temporary file (sh->fd,
 * tmp, lines, nlines, n = kept); kept 0: nothing to write, sh->n becomes 0. */
static mv_status rewrite(mv_tar_shard *sh, const unsigned char *drop, long kept, mv_err *e)
{
    if (kept == 0) {
        sh->n = 0;
        sh->nlines = 0;
        return MV_OK;
    }
    size_t tl = strlen(sh->tmp) + 8;
    char *ntmp = mv_malloc(tl), *lines = NULL;
    if (!ntmp)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
    snprintf(ntmp, tl, "%s.dedup", sh->tmp);
    mv_tar_shard nsh = {.fd = open(ntmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666), .fin = sh->fin};
    int rfd = open(sh->tmp, O_RDONLY | O_CLOEXEC);
    size_t nl = 0, cap = 0;
    mv_status st = MV_OK;
    if (nsh.fd < 0 || rfd < 0)
        st = mv_fail(e, MV_ERR_IO, "%s: %s: %s", sh->fin, nsh.fd < 0 ? ntmp : sh->tmp, strerror(errno));
    else if (!(st = mv_tar_archive_open(&nsh, e)))
        mv_output_lock_temp(nsh.fd);
    const char *p = sh->lines, *end = sh->lines + sh->nlines;
    for (long i = 0; !st && i < sh->n; i++) {
        const char *q = memchr(p, '\n', (size_t)(end - p));
        if (!q) {
            st = mv_fail(e, MV_ERR_INTERNAL, "%s: fewer lines than samples", sh->fin);
            break;
        }
        if (!drop[i]) {
            json_t *o = json_loadb(p, (size_t)(q - p), 0, NULL);
            const char *key = json_string_value(json_object_get(o, "key"));
            st = key ? copy_sample(sh, &nsh, rfd, i, p, (size_t)(q - p), key, &lines, &nl, &cap, e)
                     : mv_fail(e, MV_ERR_INTERNAL, "%s: a sample's record without its key", sh->fin);
            json_decref(o);
        }
        p = q + 1;
    }
    if (nsh.a) { /* closed before it is freed, also after a failed write (see mv_tar_abandon) */
        if (archive_write_close(nsh.a) != ARCHIVE_OK && !st)
            st = mv_fail(e, MV_ERR_IO, "%s: completing the tar: %s", ntmp, archive_error_string(nsh.a));
        archive_write_free(nsh.a);
    }
    if (!st && fsync(nsh.fd) != 0)
        st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", ntmp, strerror(errno));
    if (rfd >= 0)
        close(rfd);
    if (st) {
        if (nsh.fd >= 0) {
            unlink(ntmp);
            close(nsh.fd);
        }
        free(ntmp);
        free(lines);
        return st;
    }
    unlink(sh->tmp); /* its number is taken by ntmp's final name meanwhile: the lock is held */
    close(sh->fd);
    sh->fd = nsh.fd;
    free(sh->tmp);
    sh->tmp = ntmp;
    free(sh->lines);
    sh->lines = lines;
    sh->nlines = nl;
    sh->cap = cap;
    sh->n = kept;
    return MV_OK;
}

/* Marks in drop[] (and names in inputs[]) the samples of sh whose input is among dd's others, or
 * (cross: other namings' manifests gained lines) another run's newest ok line in any manifest
 * since the run started; *n counts them. */
static void find_others(const mv_tar_dd *dd, const mv_tar_shard *sh, int cross, unsigned char *drop, char **inputs,
                        long *n)
{
    const char *p = sh->lines, *end = sh->lines + sh->nlines, *q;
    for (long i = 0; i < sh->n && (q = memchr(p, '\n', (size_t)(end - p))); i++, p = q + 1) {
        json_t *o = json_loadb(p, (size_t)(q - p), 0, NULL);
        size_t kl = 0;
        char *k = o ? input_key(o, &kl) : NULL, *in = k ? mv_line_path_field(o, "input", NULL) : NULL;
        mv_done_input_stat src; /* the file as this run read it */
        mv_line_input_stat(o, &src);
        const mv_hashset_entry *en = k ? mv_hashset_find(&dd->others, k, kl) : NULL;
        int other = en && (!en->value || !src_tag(&src) || en->value == src_tag(&src));
        if (!other && in && cross) {
            char *abs = mv_line_path_field(o, "input_abs", NULL);
            other = mv_claims_ok_of_other(dd->o.claims, in, abs, &src, dd->run, dd->model);
            free(abs);
        }
        if (other) {
            drop[i] = 1;
            inputs[i] = in;
            in = NULL;
            (*n)++;
        }
        free(in);
        free(k);
        json_decref(o);
    }
}

mv_status mv_tar_dedup_begin(mv_tar_set *s, mv_tar_shard *sh, mv_err *e)
{
    mv_tar_dd *dd = s->dd;
    pthread_mutex_lock(&s->mu);
    int lr;
    while ((lr = flock(s->lock_fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (lr) {
        mv_status st = mv_fail(e, MV_ERR_IO, "%s: cannot lock the manifest to commit %s: %s", s->dir, sh->name,
                               strerror(errno));
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    mv_status st = read_new(s, e);
    if (!st && dd->o.claims && !(st = mv_claims_commit_lock(dd->o.claims, 1, e)))
        dd->commit_locked = 1;
    char mine[4200]; /* the other namings' lines are asked for only where their manifests grew */
    mv_name_manifest(mine, sizeof mine, "", s->k, s->n);
    int cross = !st && dd->commit_locked && mv_claims_others_grew(dd->o.claims, strrchr(mine, '/') + 1);
    if (st || (dd->others.n == 0 && !cross) || sh->n == 0) {
        if (st)
            mv_tar_dedup_end(s);
        return st;
    }
    unsigned char *drop = calloc((size_t)sh->n, 1);
    char **inputs = calloc((size_t)sh->n, sizeof *inputs);
    long n = 0;
    if (!drop || !inputs)
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
    else
        find_others(dd, sh, cross, drop, inputs, &n);
    long all = sh->n;
    if (!st && n)
        st = rewrite(sh, drop, all - n, e);
    for (long i = 0; inputs && i < all; i++) {
        if (!st && drop[i] && dd->o.dropped)
            dd->o.dropped(s->ud, inputs[i] ? inputs[i] : "(an input)");
        free(inputs[i]);
    }
    free(drop);
    free(inputs);
    if (st)
        mv_tar_dedup_end(s);
    return st;
}

mv_status mv_tar_dedup_append(mv_tar_set *s, const char *text, size_t len, mv_err *e)
{
    int fd = s->lock_fd;
    char path[4200];
    mv_name_manifest(path, sizeof path, s->dir, s->k, s->n);
    int64_t at, was;
    if (len == 0)
        return MV_OK;
    mv_status st = mv_manifest_append_held(fd, path, text, len, &at, &was, e);
    if (st)
        return st;
    if (fdatasync(fd) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: fdatasync: %s", path, strerror(errno));
    if (s->dd->started && s->dd->off == was) /* read up to them: no need to again */
        s->dd->off = at + (int64_t)len;
    long n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    if (s->dd->o.appended)
        s->dd->o.appended(s->ud, n);
    return MV_OK;
}

void mv_tar_dedup_end(mv_tar_set *s)
{
    mv_err e;
    if (s->dd && s->dd->commit_locked) /* before the naming's lock: another naming's commit may go */
        mv_claims_commit_lock(s->dd->o.claims, 0, &e);
    if (s->dd)
        s->dd->commit_locked = 0;
    flock(s->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&s->mu);
}
