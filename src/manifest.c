/* manifest.c - JSON Lines manifest writer (append-safe across processes) and resume reader.
 *
 * Lines are built by hand so that numbers are written the shortest way that reads back exactly
 * (0.1, not jansson's 0.10000000000000001); strings are escaped by jansson, and reading back is
 * jansson's parser. The resume part reads lines back into a set keyed by input and by output name,
 * and checks that a recorded output is still whole. This file does not know how records are
 * produced, nor choose output names.
 */
#include "mv_manifest.h"
#include "mv_walk.h" /* mv_hash64 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- base64 ------------------------------------------------------------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *mv_base64_encode(const void *p, size_t n)
{
    const unsigned char *b = p;
    char *out = mv_malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0);
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = 0;
    return out;
}

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

uint8_t *mv_base64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    if (len % 4 != 0)
        return NULL;
    uint8_t *out = mv_malloc(len / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            int c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            v[k] = pad ? -1 : b64_value(c); /* data after '=' is invalid */
            if (v[k] < 0) {
                free(out);
                return NULL;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[o++] = (uint8_t)(x >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(x >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)x;
    }
    out[o] = 0;
    *n = o;
    return out;
}

/* --- line building ------------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 512;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when the byte at s is invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;        /* no overlongs */
        if (c == 0xed) hi = 0x9f;        /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;        /* <= U+10FFFF */
    } else
        return 0;
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

static int utf8_valid(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

/* Appends s as a JSON string, invalid UTF-8 bytes replaced by U+FFFD. */
static void sb_json_string(sbuf *b, const char *s)
{
    sbuf clean = {0};
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (k) {
            sb_add(&clean, s + i, k);
            i += k;
        } else {
            sb_add(&clean, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    if (clean.oom) {
        b->oom = 1;
        free(clean.p);
        return;
    }
    json_t *js = json_stringn(clean.p ? clean.p : "", clean.n);
    char *enc = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    if (!enc)
        b->oom = 1;
    else
        sb_str(b, enc);
    free(enc);
    json_decref(js);
    free(clean.p);
}

static void sb_key(sbuf *b, const char *key)
{
    if (b->n > 1)
        sb_add(b, ",", 1);
    sb_add(b, "\"", 1);
    sb_str(b, key);
    sb_add(b, "\":", 2);
}

static void sb_i64(sbuf *b, int64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, v);
    sb_str(b, t);
}

/* Shortest %.Ng that reads back as exactly v; null for NaN/inf (not JSON numbers). */
static void sb_f64(sbuf *b, double v)
{
    if (!isfinite(v)) {
        sb_str(b, "null");
        return;
    }
    char t[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v);
        if (strtod(t, NULL) == v)
            break;
    }
    sb_str(b, t);
}

static void sb_i64_array(sbuf *b, const int64_t *v, size_t n)
{
    sb_add(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_add(b, ",", 1);
        sb_i64(b, v[i]);
    }
    sb_add(b, "]", 1);
}

static void sb_path(sbuf *b, const char *key, const char *path)
{
    sb_key(b, key);
    sb_json_string(b, path);
    if (!utf8_valid(path)) {
        char k64[64];
        snprintf(k64, sizeof k64, "%s_b64", key);
        char *enc = mv_base64_encode(path, strlen(path));
        if (!enc) {
            b->oom = 1;
            return;
        }
        sb_key(b, k64);
        sb_add(b, "\"", 1);
        sb_str(b, enc);
        sb_add(b, "\"", 1);
        free(enc);
    }
}

mv_status mv_manifest_format(const mv_record *r, char **line, size_t *len, mv_err *e)
{
    *line = NULL;
    *len = 0;
    if (!r->input)
        return mv_fail(e, MV_ERR_INTERNAL, "manifest: record without an input path");
    sbuf b = {0};
    sb_add(&b, "{", 1);
    sb_path(&b, "input", r->input);
    if (r->output)
        sb_path(&b, "output", r->output);
    sb_key(&b, "status");
    sb_str(&b, r->ok ? "\"ok\"" : "\"error\"");
    if (r->error) {
        sb_key(&b, "error");
        sb_json_string(&b, r->error);
    }
    if (r->kind) {
        sb_key(&b, "kind");
        sb_json_string(&b, r->kind);
    }
    if (r->has_size) {
        sb_key(&b, "width");
        sb_i64(&b, r->width);
        sb_key(&b, "height");
        sb_i64(&b, r->height);
    }
    if (r->has_resized) {
        sb_key(&b, "resized");
        sb_i64_array(&b, r->resized, 2);
    }
    if (r->has_grid) {
        sb_key(&b, "grid_thw");
        sb_i64_array(&b, r->grid_thw, 3);
    }
    if (r->has_shape) {
        sb_key(&b, "shape");
        sb_i64_array(&b, r->shape, 2);
    }
    if (r->dtype) {
        sb_key(&b, "dtype");
        sb_json_string(&b, r->dtype);
    }
    if (r->has_bytes) {
        sb_key(&b, "bytes");
        sb_i64(&b, r->bytes);
    }
    if (r->model) {
        sb_key(&b, "model");
        sb_json_string(&b, r->model);
    }
    if (r->frame_indices) {
        sb_key(&b, "frame_indices");
        sb_i64_array(&b, r->frame_indices, r->n_frame_indices);
    }
    if (r->timestamps) {
        sb_key(&b, "timestamps");
        sb_add(&b, "[", 1);
        for (size_t i = 0; i < r->n_timestamps; i++) {
            if (i)
                sb_add(&b, ",", 1);
            sb_f64(&b, r->timestamps[i]);
        }
        sb_add(&b, "]", 1);
    }
    if (r->has_fps) {
        sb_key(&b, "fps");
        sb_f64(&b, r->fps);
    }
    if (r->has_duration) {
        sb_key(&b, "duration");
        sb_f64(&b, r->duration);
    }
    if (r->has_rotation) {
        sb_key(&b, "rotation");
        sb_i64(&b, r->rotation);
    }
    if (r->has_seconds) {
        sb_key(&b, "seconds");
        sb_f64(&b, round(r->seconds * 1e6) / 1e6);
    }
    if (r->shard)
        sb_path(&b, "shard", r->shard);
    if (r->key) {
        sb_key(&b, "key");
        sb_json_string(&b, r->key);
    }
    if (r->has_offset) {
        sb_key(&b, "offset");
        sb_i64(&b, r->offset);
    }
    sb_add(&b, "}", 1);
    if (b.oom) {
        free(b.p);
        return mv_fail(e, MV_ERR_NOMEM, "manifest: out of memory building the line for %s",
                       r->input);
    }
    *line = b.p;
    *len = b.n;
    return MV_OK;
}

/* --- appending ---------------------------------------------------------------------------- */

struct mv_manifest {
    int fd;
    char *path;
    unsigned unsynced; /* lines appended since the last fdatasync */
};

mv_status mv_manifest_open(const char *path, mv_manifest **out, mv_err *e)
{
    *out = NULL;
    mv_manifest *m = mv_calloc(1, sizeof *m);
    char *p = strdup(path);
    if (!m || !p) {
        free(m);
        free(p);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    /* O_RDWR, not O_WRONLY: append reads the last byte to detect a torn line */
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(m);
        free(p);
        return mv_fail(e, MV_ERR_IO, "%s: cannot open manifest: %s", path, strerror(err));
    }
    m->fd = fd;
    m->path = p;
    *out = m;
    return MV_OK;
}

static int lock_fd(int fd, int op)
{
    int r;
    do
        r = flock(fd, op);
    while (r != 0 && errno == EINTR);
    return r;
}

/* Writes buf[1..n) (or buf[0..n) when the file does not end in '\n': buf[0] is a '\n' that ends
 * a line torn by a crash) under the lock; frees buf. sync: fdatasync now, else every
 * MV_MANIFEST_SYNC_EVERY calls. */
static mv_status append_buf(mv_manifest *m, char *buf, size_t n, int sync, mv_err *e)
{
    if (lock_fd(m->fd, LOCK_EX) != 0) {
        int err = errno;
        free(buf);
        return mv_fail(e, MV_ERR_IO, "%s: cannot lock manifest: %s", m->path, strerror(err));
    }
    mv_status s = MV_OK;
    struct stat st;
    if (fstat(m->fd, &st) != 0) {
        s = mv_fail(e, MV_ERR_IO, "%s: fstat: %s", m->path, strerror(errno));
        goto unlock;
    }
    const char *p = buf + 1;
    size_t left = n - 1;
    if (st.st_size > 0) {
        char last;
        ssize_t k = pread(m->fd, &last, 1, st.st_size - 1);
        if (k != 1) {
            s = mv_fail(e, MV_ERR_IO, "%s: reading the last byte: %s", m->path,
                        k < 0 ? strerror(errno) : "file shrank");
            goto unlock;
        }
        if (last != '\n') { /* a line torn by a crash: end it so ours stays whole */
            p = buf;
            left++;
        }
    }
    while (left > 0) {
        ssize_t k = write(m->fd, p, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int err = k < 0 ? errno : EIO;
            s = mv_fail(e, MV_ERR_IO, "%s: write: %s", m->path, strerror(err));
            if (ftruncate(m->fd, st.st_size) != 0) /* drop our partial line */
                mv_fail_prefix(e, s, "%s: could not remove a partial line (%s)", m->path,
                               strerror(errno));
            goto unlock;
        }
        p += k;
        left -= (size_t)k;
    }
unlock:
    if (lock_fd(m->fd, LOCK_UN) != 0 && s == MV_OK)
        s = mv_fail(e, MV_ERR_IO, "%s: cannot unlock manifest: %s", m->path, strerror(errno));
    free(buf);
    if (s != MV_OK)
        return s;
    if (sync || ++m->unsynced >= MV_MANIFEST_SYNC_EVERY) {
        m->unsynced = 0;
        if (fdatasync(m->fd) != 0)
            return mv_fail(e, MV_ERR_IO, "%s: fdatasync: %s", m->path, strerror(errno));
    }
    return MV_OK;
}

mv_status mv_manifest_append(mv_manifest *m, const mv_record *r, mv_err *e)
{
    char *line;
    size_t len;
    mv_status s = mv_manifest_format(r, &line, &len, e);
    if (s != MV_OK)
        return mv_fail_prefix(e, s, "%s", m->path);
    /* room for a leading '\n' and the trailing one: line becomes "\n" + line + "\n" */
    char *buf = mv_malloc(len + 2);
    if (!buf) {
        free(line);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", m->path);
    }
    buf[0] = '\n';
    memcpy(buf + 1, line, len);
    buf[len + 1] = '\n';
    free(line);
    return append_buf(m, buf, len + 2, 0, e);
}

mv_status mv_manifest_append_lines(mv_manifest *m, const char *text, size_t len, mv_err *e)
{
    if (len == 0)
        return MV_OK;
    if (text[len - 1] != '\n')
        return mv_fail(e, MV_ERR_INTERNAL, "%s: lines to append do not end in a newline", m->path);
    char *buf = mv_malloc(len + 1);
    if (!buf)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", m->path);
    buf[0] = '\n';
    memcpy(buf + 1, text, len);
    return append_buf(m, buf, len + 1, 1, e);
}

mv_status mv_manifest_close(mv_manifest *m, mv_err *e)
{
    if (!m)
        return MV_OK;
    mv_status s = MV_OK;
    if (fdatasync(m->fd) != 0)
        s = mv_fail(e, MV_ERR_IO, "%s: fdatasync: %s", m->path, strerror(errno));
    if (close(m->fd) != 0 && s == MV_OK)
        s = mv_fail(e, MV_ERR_IO, "%s: close: %s", m->path, strerror(errno));
    free(m->path);
    free(m);
    return s;
}

/* --- resume set --------------------------------------------------------------------------- */

/* One entry per input that had an ok line; two open-addressing indexes point into the entries:
 * by input, and by output name (whose slots own the name strings; an entry's output points at
 * its slot's key, so "does this input still hold that name" is a pointer comparison). */
typedef struct {
    char *input;
    const char *output; /* a key owned by the output index; NULL = ok without a usable output */
    char *odd_output;   /* a recorded output that is not a canonical name (owned; never followed) */
    char model[17];
    int64_t bytes;      /* -1 = not recorded */
    int ok;             /* latest line ok */
} done_ent;

typedef struct {
    uint64_t h;
    size_t idx1; /* entry index + 1; 0 = empty slot */
} in_slot;

typedef struct {
    uint64_t h;
    char *key;
    size_t idx1;
} out_slot;

struct mv_done {
    done_ent *ents;
    size_t n_ents, ents_cap, n_ok;
    in_slot *in;
    out_slot *out;
    size_t in_cap, out_cap, out_used;
};

mv_status mv_done_create(mv_done **out, mv_err *e)
{
    mv_done *d = mv_calloc(1, sizeof *d);
    if (d) {
        d->in_cap = d->out_cap = 1024;
        d->in = mv_calloc(d->in_cap, sizeof *d->in);
        d->out = mv_calloc(d->out_cap, sizeof *d->out);
    }
    if (!d || !d->in || !d->out) {
        if (d) {
            free(d->in);
            free(d->out);
        }
        free(d);
        *out = NULL;
        return mv_fail(e, MV_ERR_NOMEM, "resume set: out of memory");
    }
    *out = d;
    return MV_OK;
}

void mv_done_free(mv_done *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_ents; i++) {
        free(d->ents[i].input);
        free(d->ents[i].odd_output);
    }
    for (size_t i = 0; i < d->out_cap; i++)
        free(d->out[i].key);
    free(d->ents);
    free(d->in);
    free(d->out);
    free(d);
}

static in_slot *in_find(const mv_done *d, in_slot *slots, size_t cap, const char *key, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        in_slot *s = &slots[i];
        if (!s->idx1 || (s->h == h && strcmp(d->ents[s->idx1 - 1].input, key) == 0))
            return s;
        i = (i + 1) & (cap - 1);
    }
}

static out_slot *out_find(out_slot *slots, size_t cap, const char *key, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        out_slot *s = &slots[i];
        if (!s->key || (s->h == h && strcmp(s->key, key) == 0))
            return s;
        i = (i + 1) & (cap - 1);
    }
}

static int grow_in(mv_done *d)
{
    size_t nc = d->in_cap * 2;
    in_slot *ns = mv_calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < d->in_cap; i++)
        if (d->in[i].idx1) {
            size_t j = (size_t)d->in[i].h & (nc - 1);
            while (ns[j].idx1)
                j = (j + 1) & (nc - 1);
            ns[j] = d->in[i];
        }
    free(d->in);
    d->in = ns;
    d->in_cap = nc;
    return 0;
}

static int grow_out(mv_done *d)
{
    size_t nc = d->out_cap * 2;
    out_slot *ns = mv_calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < d->out_cap; i++)
        if (d->out[i].key)
            *out_find(ns, nc, d->out[i].key, d->out[i].h) = d->out[i];
    free(d->out);
    d->out = ns;
    d->out_cap = nc;
    return 0;
}

static int canonical_name(const char *name);

/* Records one line: input's latest status is ok (with output, which may be NULL, model and
 * bytes) or not. Returns 0, or -1 when out of memory. */
static int done_set(mv_done *d, const char *input, int ok, const char *output, const char *model,
                    int64_t bytes)
{
    uint64_t h = mv_hash64(input, strlen(input));
    in_slot *is = in_find(d, d->in, d->in_cap, input, h);
    done_ent *en;
    if (is->idx1) {
        en = &d->ents[is->idx1 - 1];
    } else {
        if (!ok)
            return 0; /* never ok: nothing to remember */
        if ((d->n_ents + 1) * 2 > d->in_cap) {
            if (grow_in(d))
                return -1;
            is = in_find(d, d->in, d->in_cap, input, h);
        }
        if (d->n_ents == d->ents_cap) {
            size_t nc = d->ents_cap ? d->ents_cap * 2 : 256;
            done_ent *ne = realloc(d->ents, nc * sizeof *ne);
            if (!ne)
                return -1;
            d->ents = ne;
            d->ents_cap = nc;
        }
        en = &d->ents[d->n_ents];
        memset(en, 0, sizeof *en);
        if (!(en->input = strdup(input)))
            return -1;
        is->h = h;
        is->idx1 = ++d->n_ents;
    }
    if (!ok) { /* a later error: the name stays held (its file is still that input's) */
        if (en->ok)
            d->n_ok--;
        en->ok = 0;
        return 0;
    }
    if (!en->ok)
        d->n_ok++;
    en->ok = 1;
    snprintf(en->model, sizeof en->model, "%s", model);
    en->bytes = bytes;
    en->output = NULL;
    free(en->odd_output);
    en->odd_output = NULL;
    if (!output)
        return 0;
    if (!canonical_name(output)) /* kept for mv_done_lookup, never held nor followed */
        return (en->odd_output = strdup(output)) ? 0 : -1;
    uint64_t oh = mv_hash64(output, strlen(output));
    out_slot *os = out_find(d->out, d->out_cap, output, oh);
    if (!os->key) {
        if ((d->out_used + 1) * 2 > d->out_cap) {
            if (grow_out(d))
                return -1;
            os = out_find(d->out, d->out_cap, output, oh);
        }
        if (!(os->key = strdup(output)))
            return -1;
        os->h = oh;
        d->out_used++;
    }
    os->idx1 = (size_t)(en - d->ents) + 1;
    en->output = os->key;
    return 0;
}

const char *mv_done_lookup(const mv_done *d, const char *input)
{
    uint64_t h = mv_hash64(input, strlen(input));
    const in_slot *s = in_find(d, d->in, d->in_cap, input, h);
    if (!s->idx1 || !d->ents[s->idx1 - 1].ok)
        return NULL;
    const done_ent *en = &d->ents[s->idx1 - 1];
    return en->output ? en->output : en->odd_output ? en->odd_output : "";
}

size_t mv_done_count(const mv_done *d) { return d->n_ok; }

int mv_done_owner_of(const mv_done *d, const char *output, mv_done_owner *w)
{
    uint64_t h = mv_hash64(output, strlen(output));
    const out_slot *s = out_find(d->out, d->out_cap, output, h);
    if (!s->key || !s->idx1)
        return 0;
    const done_ent *en = &d->ents[s->idx1 - 1];
    if (en->output != s->key) /* that input's latest ok line named another output */
        return 0;
    w->input = en->input;
    w->model = en->model;
    w->bytes = en->bytes;
    w->ok = en->ok;
    return 1;
}

int mv_done_same_input(const char *recorded, const char *path)
{
    if (strcmp(recorded, path) == 0)
        return 1;
    int same = 0;
    if ((recorded[0] == '/') == (path[0] == '/')) {
        char *a = mv_malloc(mv_output_name_cap(strlen(recorded)));
        char *b = mv_malloc(mv_output_name_cap(strlen(path)));
        if (a && b) {
            mv_output_name(recorded, a);
            mv_output_name(path, b);
            same = strcmp(a, b) == 0;
        }
        free(a);
        free(b);
        if (same)
            return 1;
    }
    struct stat sa, sb;
    if (stat(recorded, &sa) != 0 || stat(path, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* 1 when the zstd frame in fd (size bytes) ends exactly at the end of the file. */
static int zstd_frame_whole(int fd, int64_t size, char *why, size_t cap)
{
    unsigned char h[14];
    if (size < 9 || pread(fd, h, sizeof h < (size_t)size ? sizeof h : (size_t)size, 0) < 9 ||
        h[0] != 0x28 || h[1] != 0xb5 || h[2] != 0x2f || h[3] != 0xfd) {
        snprintf(why, cap, "not a zstd frame");
        return 0;
    }
    unsigned fhd = h[4];
    int single = (fhd >> 5) & 1, checksum = (fhd >> 2) & 1;
    static const int dict_bytes[4] = {0, 1, 2, 4}, fcs_bytes[4] = {0, 2, 4, 8};
    int64_t off = 5 + (single ? 0 : 1) + dict_bytes[fhd & 3] +
                  ((fhd >> 6) == 0 ? single : fcs_bytes[fhd >> 6]);
    for (;;) {
        unsigned char b[3];
        if (off + 3 > size || pread(fd, b, 3, off) != 3) {
            snprintf(why, cap, "truncated (the zstd frame ends past the file's %lld bytes)",
                     (long long)size);
            return 0;
        }
        uint32_t bh = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
        unsigned type = (bh >> 1) & 3;
        if (type == 3) {
            snprintf(why, cap, "corrupt zstd block header at byte %lld", (long long)off);
            return 0;
        }
        off += 3 + (type == 1 ? 1 : (int64_t)(bh >> 3));
        if (bh & 1)
            break;
    }
    off += checksum ? 4 : 0;
    if (off != size) {
        snprintf(why, cap, "%s (the zstd frame is %lld bytes, the file %lld)",
                 off > size ? "truncated" : "trailing bytes", (long long)off, (long long)size);
        return 0;
    }
    return 1;
}

int mv_done_output_intact(const char *out_real, const char *output, int64_t bytes, char *why,
                          size_t cap)
{
    size_t ol = strlen(out_real);
    char *full = mv_malloc(ol + strlen(output) + 2);
    if (!full) {
        snprintf(why, cap, "out of memory");
        return 0;
    }
    sprintf(full, "%s/%s", out_real, output);
    char *real = realpath(full, NULL);
    free(full);
    if (!real) {
        snprintf(why, cap, "%s", strerror(errno));
        return 0;
    }
    int ok = 0;
    struct stat sb;
    int inside = strncmp(real, out_real, ol) == 0 &&
                 (real[ol] == '/' || (ol == 1 && out_real[0] == '/'));
    if (!inside)
        snprintf(why, cap, "it leads outside the output directory (to %.900s)", real);
    else if (stat(real, &sb) != 0)
        snprintf(why, cap, "%s", strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        snprintf(why, cap, "not a regular file");
    else if (bytes >= 0 && sb.st_size != bytes)
        snprintf(why, cap, "%lld bytes, the manifest says %lld", (long long)sb.st_size,
                 (long long)bytes);
    else if (bytes >= 0)
        ok = 1;
    else {
        int fd = open(real, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            snprintf(why, cap, "%s", strerror(errno));
        else {
            ok = zstd_frame_whole(fd, (int64_t)sb.st_size, why, cap);
            close(fd);
        }
    }
    free(real);
    return ok;
}

/* 1 when name is relative with no "", "." or ".." component (what mv_output_name makes). */
static int canonical_name(const char *name)
{
    if (!name[0])
        return 0;
    for (const char *c = name;;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        if (!end)
            return 1;
        c = end + 1;
    }
}

/* The raw path of field (from "<field>_b64" when present, else the string); malloc'd, or NULL
 * when absent or malformed. */
static char *record_path(json_t *o, const char *field)
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
    return strdup(json_string_value(s));
}

mv_status mv_manifest_load_done(const char *path, mv_done *d, size_t *n_lines, size_t *n_bad,
                                mv_err *e)
{
    size_t lines = 0, bad = 0;
    if (n_lines)
        *n_lines = 0;
    if (n_bad)
        *n_bad = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return MV_OK;
        return mv_fail(e, MV_ERR_IO, "%s: cannot read manifest: %s", path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    mv_status s = MV_OK;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&line, &cap, f);
        if (n < 0) {
            if (ferror(f))
                s = mv_fail(e, MV_ERR_IO, "%s: read: %s", path, strerror(errno ? errno : EIO));
            break;
        }
        if (n == 1 && line[0] == '\n')
            continue; /* the empty line that ends a torn one */
        lines++;
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)n, 0, &jerr);
        char *input = json_is_object(o) ? record_path(o, "input") : NULL;
        json_t *st = json_is_object(o) ? json_object_get(o, "status") : NULL;
        if (!input || !json_is_string(st)) {
            bad++;
            free(input);
            json_decref(o);
            continue;
        }
        int ok = strcmp(json_string_value(st), "ok") == 0;
        char *output = ok ? record_path(o, "output") : NULL;
        json_t *jm = json_object_get(o, "model"), *jb = json_object_get(o, "bytes");
        const char *model = json_is_string(jm) ? json_string_value(jm) : "";
        int64_t bytes = json_is_integer(jb) && json_integer_value(jb) >= 0
                            ? (int64_t)json_integer_value(jb) : -1;
        int r = done_set(d, input, ok, output, model, bytes);
        free(output);
        free(input);
        json_decref(o);
        if (r) {
            s = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for the resume set", path);
            break;
        }
    }
    free(line);
    fclose(f);
    if (n_lines)
        *n_lines = lines;
    if (n_bad)
        *n_bad = bad;
    return s;
}
