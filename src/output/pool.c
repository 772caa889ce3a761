/* pool.c - --pool mean (see mv_pool.h): the f64-accumulated mean over tokens, and the directory
 * OUT/pooled/ (pooled.npy + its row index pooled.jsonl, made together in a temp directory and put
 * in place in one rename), rebuilt under OUT's index lock from the newest pooled ok lines of
 * OUT's manifests by reading the outputs back (files, or tar samples at their offsets). Not here:
 * removing pooled directories, those whose rows a later run replaced too (pool_dirs.c), where
 * pooling happens in the pipeline (writers.c), writing single outputs (output.c / tar_out.c). */
#define _GNU_SOURCE /* renameat2 */
#include "mv_pool.h"
#include "pool_int.h"
#include "mv_hashset.h"
#include "mv_claims.h" /* OUT's lock file: the pooled directories' byte */
#include "mv_manifest.h" /* mv_manifest_format: the index lines escape paths like the manifest */
#include "mv_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void mv_pool_mean(const float *x, int64_t rows, int64_t cols, float *out)
{
    enum { BLOCK = 256 };
    double acc[BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += BLOCK) {
        int64_t nc = cols - c0 < BLOCK ? cols - c0 : BLOCK;
        for (int64_t c = 0; c < nc; c++)
            acc[c] = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float *row = x + r * cols + c0;
            for (int64_t c = 0; c < nc; c++)
                acc[c] += (double)row[c];
        }
        for (int64_t c = 0; c < nc; c++)
            out[c0 + c] = (float)(acc[c] / (double)rows);
    }
}

/* ---- directories ----------------------------------------------------------------------- */

/* A new file name in dir, for writing; fd or -1 with errno. */
static int open_new(const char *dir, const char *name)
{
    char p[4600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
}

/* Puts the complete directory tmp at fin in one step: renamed when fin does not exist, else
 * exchanged with it (renameat2 RENAME_EXCHANGE) and the old one removed; where the file system
 * cannot exchange, the old one is moved aside first (a crash then leaves no fin, never a mixed
 * one). */
static mv_status replace_dir(const char *tmp, const char *fin, const char *out_dir, mv_err *e)
{
    if (rename(tmp, fin) == 0)
        return mv_sync_dir(out_dir, e);
    if (errno != EEXIST && errno != ENOTEMPTY)
        return mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
    /* fin holding other files (outputs of inputs under a folder of that name, written by earlier
     * builds): replacing it would take them out of OUT with the old directory */
    DIR *dd = opendir(fin);
    struct dirent *de;
    if (!dd) /* unread, it may hold such files: never replaced blind */
        return mv_fail(e, MV_ERR_IO, "%s: cannot read it to check it holds only --pool mean's files: %s; "
                       "not replaced", fin, strerror(errno));
    errno = 0;
    while ((de = readdir(dd)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "pooled.npy") &&
            strcmp(de->d_name, "pooled.jsonl")) {
            mv_status st = mv_fail(e, MV_ERR_IO, "%s: holds %s, not a file of --pool mean: not replaced "
                                   "(move what is not pooled.npy or pooled.jsonl out of it)", fin, de->d_name);
            closedir(dd);
            return st;
        }
    int rerr = errno; /* readdir's NULL: the end, or (errno set) a failed read */
    closedir(dd);
    if (rerr)
        return mv_fail(e, MV_ERR_IO, "%s: cannot read it to check it holds only --pool mean's files: %s; "
                       "not replaced", fin, strerror(rerr));
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, fin, RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return mv_fail(e, MV_ERR_IO, "%s: exchange with %s: %s", fin, tmp, strerror(errno));
        char old[4500];
        snprintf(old, sizeof old, "%s-old", tmp);
        mv_pool_remove_dir(old);
        if (rename(fin, old) != 0 || rename(tmp, fin) != 0)
            return mv_fail(e, MV_ERR_IO, "%s: replacing it with %s: %s", fin, tmp, strerror(errno));
        mv_pool_remove_dir(old);
        return mv_sync_dir(out_dir, e);
    }
    mv_pool_remove_dir(tmp); /* the old directory, now at tmp */
    return mv_sync_dir(out_dir, e);
}

/* ---- the index's entries ------------------------------------------------------------------ */

typedef struct {
    char *input, *output; /* output: the file, or the tar shard; NULL for a left-out input */
    int64_t offset;       /* tar: the array data's byte offset in the shard; -1 for a file */
    char *error;          /* a left-out input's error */
    mv_line_order ord;    /* the manifest line of the row (run "" when not known) */
    int64_t bytes;        /* a file's size as its line says; -1 not known */
} pool_entry;

typedef struct {
    pool_entry *v;
    size_t n, cap;
    int oom;
} mv_pool_list;

static void entry_free(pool_entry *en)
{
    free(en->input);
    free(en->output);
    free(en->error);
}

static void mv_pool_list_free(mv_pool_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        entry_free(&l->v[i]);
    free(l->v);
    free(l);
}

static int list_add(mv_pool_list *l, pool_entry en, int whole)
{
    if (whole && l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        pool_entry *nv = realloc(l->v, nc * sizeof *nv);
        if (nv) {
            l->v = nv;
            l->cap = nc;
        }
    }
    int ok = whole && l->n < l->cap;
    if (ok)
        l->v[l->n++] = en;
    else
        l->oom = 1;
    if (!ok)
        entry_free(&en);
    return ok ? 0 : -1;
}

/* Every manifest of OUT (the shard manifests, then manifest.jsonl) into *d: the newest line of
 * each input wins, as for resume. */
static mv_status load_manifests(const char *out_dir, mv_done **d, mv_err *e)
{
    char **names = NULL, p[4400];
    size_t nn = 0;
    mv_status st = mv_done_create(d, e);
    if (!st)
        st = mv_manifest_list(out_dir, &names, &nn, e);
    for (size_t i = 0; !st && i <= nn; i++) {
        if (i == nn)
            mv_name_manifest(p, sizeof p, out_dir, 0, 1);
        else
            snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        st = mv_manifest_load_done(p, *d, NULL, NULL, e);
    }
    mv_manifest_list_free(names, nn);
    return st;
}

/* input's entry by its newest line in D into *en: 1 a row (that line is ok, made with fingerprint
 * fp, so a [1, cols] array of the run's dtype, and still holds its output: a file it owns, or a
 * tar sample), 2 left out (an error line), 0 neither (*other counts the ok ones of other
 * settings; en->input alone is set). Strings are strdup'd: NULL when out of memory. */
static int resolve(const mv_done *D, const char *input, const char *abs, const char *fp, pool_entry *en,
                   size_t *other)
{
    mv_done_sample s;
    mv_done_owner w;
    const char *err;
    *en = (pool_entry){.input = strdup(input), .offset = -1, .bytes = -1};
    if (mv_done_sample_of(D, input, abs, &s)) {
        if (strcmp(s.model, fp) != 0) {
            (*other)++;
            return 0;
        }
        if (!s.output || mv_name_flaw(s.output) ||
            (s.tar ? s.offset < 0 : !mv_done_owner_of(D, s.output, &w) || strcmp(w.input, input)))
            return 0;
        *en = (pool_entry){en->input, strdup(s.output), s.tar ? s.offset : -1, NULL, s.ord, s.tar ? -1 : s.bytes};
        return 1;
    }
    err = mv_done_error(D, input);
    en->error = err ? strdup(err) : NULL;
    return err ? 2 : 0;
}

/* ---- OUT/<stem>/: pooled.npy + pooled.jsonl ------------------------------------------------ */

static int cmp_input(const void *a, const void *b)
{
    return strcmp(((const pool_entry *)a)->input, ((const pool_entry *)b)->input);
}

/* fsync + close fd (dir/name), which a failure names. */
static mv_status sync_close(int fd, const char *dir, const char *name, mv_err *e)
{
    int bad = fsync(fd) != 0, err = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    return bad ? mv_fail(e, MV_ERR_IO, "%s/%s: %s", dir, name, strerror(err)) : MV_OK;
}

/* The index: one line per entry, in input order; ok inputs get their row, with its dtype (the
 * manifest's name), the model fingerprint fp (when known) and the order of the manifest line it
 * comes from; left-out ones "row":null and their error. *rows counts the ok ones. */
static mv_status write_index(const mv_pool_list *l, const char *dir, const char *fp, mv_dtype dt, size_t *rows,
                             mv_err *e)
{
    int fd = open_new(dir, "pooled.jsonl");
    if (fd < 0)
        return mv_fail(e, MV_ERR_IO, "%s/pooled.jsonl: %s", dir, strerror(errno));
    mv_status st = MV_OK;
    *rows = 0;
    for (size_t i = 0; i < l->n && !st; i++) {
        const pool_entry *en = &l->v[i];
        if (!en->output && !en->error)
            continue; /* no row since its file was read (take_row) */
        mv_record r = {.input = en->input, .output = en->output, .ok = en->output != NULL,
                       .error = en->error, .has_offset = en->offset >= 0, .offset = en->offset};
        if (en->output) {
            r.dtype = dt == MV_DT_F16 ? "f16" : dt == MV_DT_BF16 ? "bfloat16" : "f32";
            r.model = fp;
            if (en->ord.run[0]) {
                r.schema = MV_MANIFEST_SCHEMA;
                r.run = en->ord.run;
                r.seq = en->ord.seq;
                r.time = en->ord.time;
            }
        }
        char *line, pre[40];
        size_t len;
        if ((st = mv_manifest_format(&r, &line, &len, e)))
            break;
        int pl = en->output ? snprintf(pre, sizeof pre, "{\"row\":%zu,", (*rows)++)
                            : snprintf(pre, sizeof pre, "{\"row\":null,");
        line[len] = '\n'; /* "{...}" + '\n', written after "{"row":i," */
        if (mv_write_all(fd, pre, (size_t)pl) || mv_write_all(fd, line + 1, len))
            st = mv_fail(e, MV_ERR_IO, "%s/pooled.jsonl: write: %s", dir, strerror(errno));
        free(line);
    }
    if (st)
        close(fd);
    return st ? st : sync_close(fd, dir, "pooled.jsonl", e);
}

/* Reads entry en's pooled row ([1, cols] of *dt; the first row read sets *dt when *dt < 0) into
 * row: from its file, or from its tar shard at its offset, after checking the NPY header there. */
static mv_status read_row(const char *out_dir, const pool_entry *en, int64_t cols, int *dt, void *row,
                          mv_err *e)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", out_dir, en->output);
    if (en->offset >= 0) { /* a tar sample: the header right before the data must be ours */
        uint8_t want[MV_NPY_HEADER_MAX], got[MV_NPY_HEADER_MAX];
        int64_t shape[2] = {1, cols};
        size_t hl = mv_npy_header((mv_dtype)*dt, 2, shape, want), n = (size_t)cols * mv_dtype_size((mv_dtype)*dt);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return mv_fail(e, MV_ERR_FORMAT, "%s: %s", path, strerror(errno));
        int ok = en->offset >= (int64_t)hl && pread(fd, got, hl, en->offset - (off_t)hl) == (ssize_t)hl &&
                 !memcmp(got, want, hl) && pread(fd, row, n, en->offset) == (ssize_t)n;
        close(fd);
        return ok ? MV_OK : mv_fail(e, MV_ERR_FORMAT, "%s: no pooled [1, %lld] %s sample at byte %lld for %s",
                                    path, (long long)cols, mv_dtype_descr((mv_dtype)*dt), (long long)en->offset,
                                    en->input);
    }
    struct stat before, after; /* the file the line describes: its size, not renamed over meanwhile */
    if (stat(path, &before) != 0 || (en->bytes >= 0 && before.st_size != en->bytes))
        return mv_fail(e, MV_ERR_FORMAT, "%s: gone, or not the file of %lld bytes its manifest line says", path,
                       (long long)en->bytes);
    mv_array a;
    mv_status st = mv_npy_load(path, &a, e);
    if (st)
        return st;
    if (*dt < 0)
        *dt = (int)a.dtype;
    if (stat(path, &after) != 0 || after.st_ino != before.st_ino || after.st_dev != before.st_dev)
        st = mv_fail(e, MV_ERR_FORMAT, "%s: replaced while read", path);
    else if (a.ndim != 2 || a.shape[0] != 1 || a.shape[1] != cols || (int)a.dtype != *dt ||
        (a.dtype != MV_DT_F32 && a.dtype != MV_DT_F16 && a.dtype != MV_DT_BF16))
        st = mv_fail(e, MV_ERR_FORMAT, "%s: not a pooled output like the others ([1, %lld] %s): "
                     "written without --pool mean or with another --out-dtype? (--force redoes it)",
                     path, (long long)cols, mv_dtype_descr((mv_dtype)*dt));
    else
        memcpy(row, a.data, (size_t)cols * mv_dtype_size(a.dtype));
    mv_array_free(&a);
    return st;
}

/* What a rebuild reads from: OUT, the fingerprint of its rows, OUT's manifests as read (D: read
 * again when a row's file changed since), the lock file's descriptor (-1: none) and the count
 * of ok inputs of other fingerprints. */
typedef struct {
    const char *out_dir, *fp;
    mv_done *D;
    int lfd;
    size_t other;
} pool_src;

/* An OFD lock of type (F_RDLCK, F_WRLCK, F_UNLCK) on byte `byte` of OUT's lock file fd, waiting:
 * 0, or -1 with errno. A writer holds the claim slot (MV_CLAIMS_SLOT_BYTE) of an output name
 * exclusively while it renames the output and appends its manifest line. */
static int lock_byte(int fd, off_t byte, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    int r;
    while ((r = fcntl(fd, F_OFD_SETLKW, &fl)) != 0 && errno == EINTR)
        ;
    return r;
}
#define lock_slot(fd, name, type) lock_byte(fd, MV_CLAIMS_SLOT_BYTE(mv_claims_slot(name)), type)

/* en's row into row. A file that is not the one en's line describes (another run renamed a new
 * output over it since the manifests were read) is read again under its name's claim lock from
 * OUT's manifests as they are then: en becomes its input's newest line, or no row (output NULL;
 * error set for an error line: listed left out). */
static mv_status take_row(pool_src *src, pool_entry *en, int64_t cols, int *dt, void *row, mv_err *e)
{
    mv_status st = read_row(src->out_dir, en, cols, dt, row, e);
    for (int k = 0; st == MV_ERR_FORMAT && en->offset < 0 && k < 4; k++) {
        char name[4200];
        snprintf(name, sizeof name, "%s", en->output);
        mv_done *D = NULL;
        lock_slot(src->lfd, name, F_RDLCK);
        if ((st = load_manifests(src->out_dir, &D, e)) == MV_OK) {
            mv_done_free(src->D);
            src->D = D;
            pool_entry now;
            int r = resolve(D, en->input, en->input[0] == '/' ? en->input : NULL, src->fp, &now, &src->other);
            entry_free(en);
            *en = now;
            st = !en->input || (r == 1 && !en->output) ? mv_fail(e, MV_ERR_NOMEM, "out of memory")
                 : r != 1 ? MV_OK /* no row now */
                 : strcmp(name, en->output) && en->offset < 0 ? MV_ERR_FORMAT /* its lock first */
                 : read_row(src->out_dir, en, cols, dt, row, e);
        } else
            mv_done_free(D);
        lock_slot(src->lfd, name, F_UNLCK);
    }
    return st;
}

/* The NPY header of [rows, cols] of dt, padded to len bytes (the length written for more rows). */
static size_t header_of_len(mv_dtype dt, size_t rows, int64_t cols, size_t len, uint8_t *hdr)
{
    int64_t shape[2] = {(int64_t)rows, cols};
    size_t hl = mv_npy_header(dt, 2, shape, hdr);
    if (hl < len) { /* more spaces before the '\n'; the dict's length in bytes 8-9 */
        memset(hdr + hl - 1, ' ', len - hl);
        hdr[len - 1] = '\n';
        hdr[8] = (uint8_t)((len - 10) & 0xff), hdr[9] = (uint8_t)((len - 10) >> 8);
    }
    return len > hl ? len : hl;
}

/* The array: the ok entries' rows, streamed in the index's order (take_row may drop an entry's
 * row: *rows counts those written, the header says so). */
static mv_status write_array(mv_pool_list *l, pool_src *src, const char *dir, int64_t cols, mv_dtype tar_dt,
                             size_t *rows, mv_err *e)
{
    int fd = open_new(dir, "pooled.npy");
    if (fd < 0)
        return mv_fail(e, MV_ERR_IO, "%s/pooled.npy: %s", dir, strerror(errno));
    float *row = malloc((size_t)cols * sizeof *row);
    mv_status st = row ? MV_OK : mv_fail(e, MV_ERR_NOMEM, "%s/pooled.npy: out of memory", dir);
    int dt = (int)tar_dt; /* every row is of the run's dtype */
    size_t n0 = *rows = 0;
    for (size_t i = 0; i < l->n; i++)
        n0 += l->v[i].output != NULL;
    uint8_t hdr[MV_NPY_HEADER_MAX];
    size_t hl = header_of_len(tar_dt, n0, cols, 0, hdr);
    if (!st && mv_write_all(fd, hdr, hl))
        st = mv_fail(e, MV_ERR_IO, "%s/pooled.npy: write: %s", dir, strerror(errno));
    for (size_t i = 0; i < l->n && !st; i++) {
        pool_entry *en = &l->v[i];
        if (!en->output || (st = take_row(src, en, cols, &dt, row, e)) || !en->output)
            continue;
        if (mv_write_all(fd, row, (size_t)cols * mv_dtype_size((mv_dtype)dt)))
            st = mv_fail(e, MV_ERR_IO, "%s/pooled.npy: write: %s", dir, strerror(errno));
        (*rows)++;
    }
    if (!st && *rows != n0 && pwrite(fd, hdr, header_of_len(tar_dt, *rows, cols, hl, hdr), 0) != (ssize_t)hl)
        st = mv_fail(e, MV_ERR_IO, "%s/pooled.npy: write: %s", dir, strerror(errno));
    free(row);
    if (st)
        close(fd);
    return st ? st : sync_close(fd, dir, "pooled.npy", e);
}

static mv_status pool_stack(mv_pool_list *l, pool_src *src, const char *stem, int64_t cols, mv_dtype tar_dt,
                            size_t *rows, size_t *left, mv_err *e)
{
    const char *out_dir = src->out_dir;
    if (l->oom)
        return mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory collecting the pooled outputs", out_dir, stem);
    qsort(l->v, l->n, sizeof *l->v, cmp_input);
    char tmp[4400], fin[4400];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%s", out_dir, (long)getpid(), stem);
    snprintf(fin, sizeof fin, "%s/%s", out_dir, stem);
    mv_pool_remove_dir(tmp); /* ours from an earlier attempt in this process, if any */
    if (mkdir(tmp, 0777) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: cannot create %s: %s", fin, tmp, strerror(errno));
    size_t n_rows = 0, idx_rows = 0;
    mv_status st = write_array(l, src, tmp, cols, tar_dt, &n_rows, e);
    if (!st) /* after the rows: the entries as they were read */
        st = write_index(l, tmp, src->fp, tar_dt, &idx_rows, e);
    if (!st)
        st = mv_sync_dir(tmp, e);
    if (!st)
        st = replace_dir(tmp, fin, out_dir, e);
    if (st) {
        mv_pool_remove_dir(tmp);
        return st;
    }
    *rows = n_rows;
    for (size_t i = *left = 0; i < l->n; i++)
        *left += !l->v[i].output && l->v[i].error;
    return MV_OK;
}

/* ---- OUT's pooled directories, kept current ------------------------------------------------- */

/* Takes OUT's lock around every rebuild and staleness check of its pooled directories, byte
 * MV_CLAIMS_INDEX_BYTE of OUT's lock file (mv_claims.h), exclusively: *fd is its descriptor
 * (unlocked where the file system offers no locks). */
static mv_status lock_index(const char *out_dir, int *fd, int *locked, mv_err *e)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", out_dir, MV_CLAIMS_LOCK);
    *fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (*fd < 0)
        return mv_fail(e, MV_ERR_IO, "%s: cannot open the pooled directories' lock: %s", p, strerror(errno));
    *locked = lock_byte(*fd, MV_CLAIMS_INDEX_BYTE, F_WRLCK) == 0;
    if (!*locked && errno != ENOLCK && errno != EINVAL && errno != EOPNOTSUPP) {
        int err = errno;
        close(*fd);
        return mv_fail(e, MV_ERR_IO, "%s: lock: %s", p, strerror(err));
    }
    return MV_OK;
}

/* 1 when D's entry (input, s: its newest line ok) is a files-layout output whose name shard k of
 * n takes (the walk's rule: mv_name_in_shard_n over the output name less its suffix). */
static int in_shard(const mv_done_sample *s, int k, int n)
{
    size_t ol = s->output ? strlen(s->output) : 0, sl = strlen(MV_OUTPUT_SUFFIX);
    return !s->tar && ol > sl && !strcmp(s->output + ol - sl, MV_OUTPUT_SUFFIX) &&
           mv_name_in_shard_n(s->output, ol - sl, k, n);
}

/* Adds the entry of path (abs: from /) when D's newest line of it is an ok tar sample that S (the
 * shard's manifest) does not know, once per file (seen: the paths from / added). */
static void add_taken(const mv_done *D, const mv_done *S, const char *path, const char *abs, const char *fp,
                      mv_hashset *seen, mv_pool_list *l, size_t *other)
{
    mv_done_sample s;
    int added;
    if (!mv_done_sample_of(D, path, abs, &s) || !s.tar || mv_done_sample_of(S, path, abs, &s) ||
        mv_done_error(S, path))
        return;
    if (!mv_hashset_add(seen, abs, strlen(abs), &added)) {
        l->oom = 1;
        return;
    }
    pool_entry en; /* listed by its path from / where no line names it as met (it is read again so) */
    if (added && resolve(D, mv_done_lookup(D, path) ? path : abs, abs, fp, &en, other) == 1)
        list_add(l, en, en.input && en.output);
    else if (added)
        entry_free(&en);
}

/* The index's entries: the inputs of S (all of D when S is NULL) that resolve to a row or a
 * left-out line; with S (shard k of n), then the shard's inputs whose newest line is another
 * naming's ok line (a run of another naming embedded them meanwhile, or before this shard's run
 * skipped them as done): files layout, the outputs its name takes; tar layout, those of taken
 * (its walk's). */
static mv_status collect(const mv_done *D, const mv_done *S, int k, int n, const mv_hashset *taken,
                         const char *fp, mv_pool_list *l, size_t *other, mv_err *e)
{
    const mv_done *from = S ? S : D;
    size_t ns = mv_done_inputs(from), nd = S ? mv_done_inputs(D) : 0;
    mv_hashset own = {0}; /* S's inputs, taken in the first pass */
    for (size_t i = 0; i < ns + nd && !l->oom; i++) {
        const char *input;
        mv_done_sample s;
        int ok = mv_done_entry(i < ns ? from : D, i < ns ? i : i - ns, &input, &s);
        if (i < ns && S && !mv_hashset_add(&own, input, strlen(input), NULL))
            l->oom = 1;
        if (i >= ns && (!ok || !in_shard(&s, k, n) || mv_hashset_find(&own, input, strlen(input))))
            continue;
        pool_entry en;
        int r = resolve(D, input, NULL, fp, &en, other);
        if (r)
            list_add(l, en, en.input && (r == 1 ? en.output != NULL : en.error != NULL));
        else
            entry_free(&en);
    }
    mv_hashset_free(&own);
    mv_hashset seen = {0};
    for (size_t i = 0; S && taken && i < taken->cap && !l->oom; i++) {
        const mv_hashset_entry *t = &taken->slots[i];
        if (t->key && strlen(t->key) < t->len) /* the path as met, a NUL, its path from / */
            add_taken(D, S, t->key, t->key + strlen(t->key) + 1, fp, &seen, l, other);
    }
    mv_hashset_free(&seen);
    return l->oom ? mv_fail(e, MV_ERR_NOMEM, "out of memory collecting the pooled outputs") : MV_OK;
}

mv_status mv_pool_update(const char *out_dir, const mv_pool_target *t, mv_pool_counts *c,
                         void (*removed)(const char *stem, const char *by, void *ud), void *ud, mv_err *e)
{
    memset(c, 0, sizeof *c);
    if (!t && !mv_pool_dirs(out_dir, NULL, NULL))
        return MV_OK;
    int lfd, locked;
    mv_status st = lock_index(out_dir, &lfd, &locked, e);
    if (st)
        return st;
    mv_pool_sweep_temps(out_dir, locked); /* those of rebuilds killed before they were put in place */
    mv_done *D = NULL, *S = NULL;
    st = load_manifests(out_dir, &D, e); /* read under the lock: every run's lines before it */
    if (!st && t && t->shard_n > 1) {
        char p[4400];
        mv_name_manifest(p, sizeof p, out_dir, t->shard_k, t->shard_n);
        if (!(st = mv_done_create(&S, e)))
            st = mv_manifest_load_done(p, S, NULL, NULL, e);
    }
    if (!st && t) {
        mv_pool_list *l = mv_calloc(1, sizeof *l);
        st = l ? collect(D, S, t->shard_k, t->shard_n, t->taken, t->fp, l, &c->other, e)
               : mv_fail(e, MV_ERR_NOMEM, "out of memory");
        mv_done_free(S);
        S = NULL;
        pool_src src = {out_dir, t->fp, D, lfd, c->other};
        if (!st)
            st = pool_stack(l, &src, t->stem, t->cols, t->dt, &c->rows, &c->left, e);
        D = src.D; /* read again where a row's file changed */
        c->other = src.other;
        mv_pool_list_free(l);
    }
    if (!st)
        st = mv_pool_drop_stale(out_dir, t ? t->stem : NULL, D, removed, ud, c, e);
    mv_done_free(S);
    mv_done_free(D);
    close(lfd); /* the lock goes with it */
    return st;
}
