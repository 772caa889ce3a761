/* manifest_read.c - reads a manifest's lines back into the resume set (manifest_done.c) through
 * jansson's parser: at a run's start (mv_manifest_load_done) in batches whose lines are parsed
 * over the OpenMP threads, then recorded in file order, so that the set is the one a reading
 * line by line makes; the claims' looks from writer threads (mv_manifest_load_done_at) line by
 * line. A line that is not a record (a torn last line, garbage) is counted, not an error. Also
 * the count of a manifest's lines and ok lines that compact reports (mv_manifest_count). Not
 * here: the set and its questions (manifest_done.c), writing lines (manifest.c).
 */
#include "manifest_done_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mv_status mv_manifest_count(const char *path, size_t *n, size_t *ok, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    *n = *ok = 0;
    while (f && getline(&line, &cap, f) > 0)
        (*n)++, *ok += strstr(line, "\"status\":\"ok\"") != NULL; /* as merge's writer counts them */
    int err = !f || ferror(f) ? (errno ? errno : EIO) : 0; /* a read error is not the file's end */
    free(line);
    if (f)
        fclose(f);
    return err ? mv_fail(e, MV_ERR_IO, "%s: cannot read the manifest: %s", path, strerror(err)) : MV_OK;
}

/* mv_line_path_field (mv_manifest.h): here, merge's and tar resume's reader of a path field. */
char *mv_line_path_field(json_t *o, const char *field, int *nomem)
{
    char k64[64];
    snprintf(k64, sizeof k64, "%s_b64", field);
    json_t *b = json_object_get(o, k64);
    if (json_is_string(b)) {
        size_t n;
        uint8_t *raw = mv_base64_decode(json_string_value(b), &n);
        if (!raw || n == 0 || memchr(raw, 0, n)) {
            free(raw);
            return NULL;
        }
        return (char *)raw;
    }
    json_t *s = json_object_get(o, field);
    if (!json_is_string(s))
        return NULL;
    char *p = strdup(json_string_value(s));
    if (!p && nomem)
        *nomem = 1;
    return p;
}

/* See mv_manifest.h (absent: bytes -1, no mtime, no hash). */
void mv_line_input_stat(json_t *o, mv_done_input_stat *src)
{
    json_t *b = json_object_get(o, "input_bytes"), *t = json_object_get(o, "input_mtime_ns");
    json_t *h = json_object_get(o, "input_xxh64"), *ts = json_object_get(o, "input_mtime_s");
    src->bytes = json_is_integer(b) ? (int64_t)json_integer_value(b) : -1;
    src->has_mtime = json_is_integer(t);
    src->mtime_ns = src->has_mtime ? (int64_t)json_integer_value(t) : -1;
    src->has_mtime_s = json_is_integer(ts);
    src->mtime_s = src->has_mtime_s ? (int64_t)json_integer_value(ts) : 0;
    const char *hs = json_is_string(h) ? json_string_value(h) : "";
    char *end;
    src->xxh64 = strtoull(hs, &end, 16);
    src->has_xxh64 = strlen(hs) == 16 && *end == 0;
}

/* The tar layout's parts of an ok line o into *tp (left as they are when absent or malformed). */
static void read_tar_part(json_t *o, tar_part *tp)
{
    json_t *jo = json_object_get(o, "offset"), *jx = json_object_get(o, "xxh64");
    json_t *sh = json_object_get(o, "shape"), *dt = json_object_get(o, "dtype");
    tp->tar = json_is_string(json_object_get(o, "shard")) && json_is_string(json_object_get(o, "key"));
    if (json_is_integer(jo) && json_integer_value(jo) >= 0)
        tp->offset = (int64_t)json_integer_value(jo);
    if (json_is_string(jx) && strlen(json_string_value(jx)) == 16) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(json_string_value(jx), &end, 16);
        if (!errno && !*end) {
            tp->xxh64 = (uint64_t)v;
            tp->has_xxh64 = 1;
        }
    }
    int64_t dsize = !json_is_string(dt) ? 0 : !strcmp(json_string_value(dt), "f32") ? 4
                    : !strcmp(json_string_value(dt), "f16") || !strcmp(json_string_value(dt), "bf16") ? 2 : 0;
    json_t *r0 = json_array_get(sh, 0), *r1 = json_array_get(sh, 1);
    if (dsize && json_array_size(sh) == 2 && json_is_integer(r0) && json_is_integer(r1) &&
        json_integer_value(r0) >= 0 && json_integer_value(r1) >= 0 &&
        json_integer_value(r0) < (1LL << 31) && json_integer_value(r1) < (1LL << 24))
        tp->data_len = (int64_t)json_integer_value(r0) * (int64_t)json_integer_value(r1) * dsize;
}

/* One line parsed: what done_set takes, the strings its own; bad: not a record. */
typedef struct {
    done_line l;
    char *input, *output, *error, *abs, *planned;
    char model[17];
    int bad;
} parsed_line;

/* Parses line[0..n) into *p (no d: lines of a batch are parsed on several threads); a line that
 * is not a record (or whose strings find no memory, as before batches) is p->bad. */
static void parse_line(const char *line, size_t n, parsed_line *p)
{
    memset(p, 0, sizeof *p);
    json_error_t jerr;
    json_t *o = json_loadb(line, n, 0, &jerr);
    p->input = json_is_object(o) ? mv_line_path_field(o, "input", NULL) : NULL;
    json_t *st = json_is_object(o) ? json_object_get(o, "status") : NULL;
    if (!p->input || !json_is_string(st)) {
        free(p->input);
        p->input = NULL;
        p->bad = 1;
        json_decref(o);
        return;
    }
    done_line *l = &p->l;
    l->input = p->input;
    l->ok = strcmp(json_string_value(st), "ok") == 0;
    mv_line_order_of(o, 0, &l->ord); /* the position is given in file order, by apply_line */
    p->output = l->ok ? mv_line_path_field(o, "output", NULL) : NULL;
    l->output = p->output;
    json_t *je = l->ok ? NULL : json_object_get(o, "error"); /* kept for --pool mean's index */
    p->error = json_is_string(je) ? strdup(json_string_value(je)) : NULL;
    l->error = p->error;
    p->abs = mv_line_path_field(o, "input_abs", NULL);
    if (p->abs && p->abs[0] != '/') { /* not a path from /: not an identity */
        free(p->abs);
        p->abs = NULL;
    }
    l->abs = p->abs ? p->abs : p->input[0] == '/' ? p->input : NULL;
    p->planned = l->ok ? NULL : mv_line_path_field(o, "planned_output", NULL);
    l->planned = p->planned;
    l->member = json_object_get(o, "input_key") != NULL;
    json_t *jm = json_object_get(o, "model"), *jb = json_object_get(o, "bytes");
    snprintf(p->model, sizeof p->model, "%s", json_is_string(jm) ? json_string_value(jm) : "");
    l->model = p->model;
    l->bytes = json_is_integer(jb) && json_integer_value(jb) >= 0 ? (int64_t)json_integer_value(jb) : -1;
    json_t *jo = json_object_get(o, "offset");
    l->offset = json_is_integer(jo) && json_integer_value(jo) >= 0 ? (int64_t)json_integer_value(jo) : -1;
    mv_line_input_stat(o, &l->src);
    l->tp = (tar_part){-1, -1, 0, 0, 0};
    if (l->ok)
        read_tar_part(o, &l->tp);
    json_decref(o);
}

/* Records parsed line p in d, the next in d's order: 0, 1 when it is not a record (counted bad),
 * -1 out of memory. Frees p's strings. */
static int apply_line(mv_done *d, parsed_line *p)
{
    int r = p->bad ? 1 : mv_done_record(d, &p->l);
    free(p->input);
    free(p->output);
    free(p->error);
    free(p->abs);
    free(p->planned);
    p->input = p->output = p->error = p->abs = p->planned = NULL;
    return r;
}

/* A batch of lines read and not yet parsed: their bytes back to back, each line's start. */
typedef struct {
    char *buf;
    size_t len, cap;
    size_t *start; /* [n + 1]: line i is buf[start[i] .. start[i + 1]) */
    size_t n, ncap;
    parsed_line *p; /* [ncap] */
} line_batch;

/* Lines per batch, and a batch's bytes at most (a batch's parsed lines and its text stay bounded
 * whatever the manifest's size); a batch of fewer than PAR_MIN lines is parsed on one thread. */
#define BATCH_LINES 16384
#define BATCH_BYTES ((size_t)16 << 20)
#define PAR_MIN 256

static int batch_add(line_batch *b, const char *line, size_t n)
{
    if (b->n + 2 > b->ncap) {
        size_t nc = b->ncap ? 2 * b->ncap : 1024;
        size_t *ns = realloc(b->start, nc * sizeof *ns);
        if (!ns)
            return -1;
        b->start = ns;
        parsed_line *np = realloc(b->p, nc * sizeof *np);
        if (!np)
            return -1;
        b->p = np;
        b->ncap = nc;
    }
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 1 << 20;
        while (nc < b->len + n)
            nc *= 2;
        char *nb = realloc(b->buf, nc);
        if (!nb)
            return -1;
        b->buf = nb;
        b->cap = nc;
    }
    b->start[b->n] = b->len;
    memcpy(b->buf + b->len, line, n);
    b->len += n;
    b->start[++b->n] = b->len;
    return 0;
}

/* Parses the batch's lines (over the OpenMP threads when par and the batch is large: jansson
 * keeps no state between documents) and records them in d in their order; empties the batch.
 * 0, or -1 out of memory. *bad counts the lines that are not records. */
static int batch_flush(mv_done *d, line_batch *b, int par, size_t *bad)
{
    const long n = (long)b->n;
#pragma omp parallel for schedule(dynamic, 64) if (par && n >= PAR_MIN && mv_omp_region(0))
    for (long i = 0; i < n; i++)
        parse_line(b->buf + b->start[i], b->start[i + 1] - b->start[i], &b->p[i]);
    int r = 0;
    for (long i = 0; i < n; i++) {
        if (r < 0) { /* out of memory before: only free */
            free(b->p[i].input);
            free(b->p[i].output);
            free(b->p[i].error);
            free(b->p[i].abs);
            free(b->p[i].planned);
            continue;
        }
        int k = apply_line(d, &b->p[i]);
        if (k < 0)
            r = -1;
        else
            *bad += (size_t)k;
    }
    b->n = 0;
    b->len = 0;
    return r;
}

/* The lines of path from *offset on into d (see mv_manifest_load_done_at); par: parse batches
 * over the OpenMP threads (the resume set's load at a run's start, which may read millions of
 * lines; not the claims' looks from writer threads). */
static mv_status load_from(const char *path, mv_done *d, int64_t *offset, int whole, int par, size_t *n_lines,
                           size_t *n_bad, mv_err *e)
{
    size_t lines = 0, bad = 0;
    if (n_lines)
        *n_lines = 0;
    if (n_bad)
        *n_bad = 0;
    int fd;
    mv_err oe;
    struct stat lsb;
    if (lstat(path, &lsb) != 0 && errno == ENOENT)
        return MV_OK;
    if (mv_open_regular(path, &fd, &oe) != MV_OK) /* a FIFO would block the run for ever */
        return mv_fail(e, MV_ERR_IO, "cannot read manifest: %s", oe.msg);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mv_fail(e, MV_ERR_IO, "%s: cannot read manifest: %s", path, strerror(errno));
    }
    if (*offset > 0 && fseeko(f, (off_t)*offset, SEEK_SET) != 0) {
        int err = errno;
        fclose(f);
        return mv_fail(e, MV_ERR_IO, "%s: seek: %s", path, strerror(err));
    }
    char *line = NULL;
    size_t cap = 0;
    line_batch b = {0};
    mv_status s = MV_OK;
    int oom = 0;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&line, &cap, f);
        if (n < 0) {
            if (ferror(f))
                s = mv_fail(e, MV_ERR_IO, "%s: read: %s", path, strerror(errno ? errno : EIO));
            break;
        }
        if (line[n - 1] != '\n' && !whole)
            break; /* a line still being written: read again next time */
        *offset += n;
        if (n == 1 && line[0] == '\n')
            continue; /* the empty line that ends a torn one */
        lines++;
        if (batch_add(&b, line, (size_t)n) < 0 ||
            ((b.n >= BATCH_LINES || b.len >= BATCH_BYTES) && batch_flush(d, &b, par, &bad) < 0)) {
            oom = 1;
            break;
        }
    }
    if (!oom && batch_flush(d, &b, par, &bad) < 0)
        oom = 1;
    if (oom) /* lines added but not yet parsed hold no strings */
        s = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for the resume set", path);
    free(b.buf);
    free(b.start);
    free(b.p);
    free(line);
    fclose(f);
    if (n_lines)
        *n_lines = lines;
    if (n_bad)
        *n_bad = bad;
    return s;
}

mv_status mv_manifest_load_done_at(const char *path, mv_done *d, int64_t *offset, int whole,
                                   size_t *n_lines, size_t *n_bad, mv_err *e)
{
    return load_from(path, d, offset, whole, 0, n_lines, n_bad, e);
}

mv_status mv_manifest_load_done(const char *path, mv_done *d, size_t *n_lines, size_t *n_bad,
                                mv_err *e)
{
    int64_t off = 0;
    return load_from(path, d, &off, 1, 1, n_lines, n_bad, e);
}
