/* manifest.c - JSON Lines manifest writer (append-safe across processes) and base64 for paths
 * that are not UTF-8.
 *
 * Lines are built by hand so that numbers are written the shortest way that reads back exactly
 * (0.1, not jansson's 0.10000000000000001); strings are escaped by jansson. This file does not
 * know how records are produced, nor choose output names; reading lines back for resume is
 * manifest_done.c.
 */
#include "mv_manifest.h"

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

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when the byte at s is invalid
 * (or NUL: a string holds no U+0000, so that the line reads back). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return c ? 1 : 0; /* a NUL byte is not taken: jansson reads no \u0000 back */
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

static int utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

/* Appends s[n] as a JSON string, invalid UTF-8 bytes replaced by U+FFFD. */
static void sb_json_stringn(sbuf *b, const char *s, size_t n)
{
    sbuf clean = {0};
    const unsigned char *u = (const unsigned char *)s;
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

static void sb_json_string(sbuf *b, const char *s) { sb_json_stringn(b, s, strlen(s)); }

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

/* A real as Python's repr writes it: the fewest significant digits that read back as exactly v,
 * in positional notation with a fraction ("30.0", "0.1", "1796186244.449735") for 1e-4 <= |v| <
 * 1e16 and 0, else with an exponent ("1e-05", "1.5e+20"), so that every JSON reader keeps it a
 * real; null for NaN/inf (not JSON numbers: only array elements, sb_f64_field leaves a field out). */
static void sb_f64(sbuf *b, double v)
{
    if (!isfinite(v)) {
        sb_str(b, "null");
        return;
    }
    char t[400];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, v);
        if (strtod(t, NULL) == v)
            break;
    }
    snprintf(t, sizeof t, "%.*e", prec - 1, v);
    int x = atoi(strchr(t, 'e') + 1); /* the decimal exponent */
    if (v == 0 || (x >= -4 && x < 16)) {
        snprintf(t, sizeof t, "%.*f", prec - 1 - x > 0 ? prec - 1 - x : 0, v);
        if (!strchr(t, '.'))
            strcat(t, ".0");
    }
    sb_str(b, t);
}

/* "key":<v as sb_f64 writes it>; nothing when v is NaN or inf (a field never null) */
static void sb_f64_field(sbuf *b, const char *key, double v)
{
    if (!isfinite(v))
        return;
    sb_key(b, key);
    sb_f64(b, v);
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

/* "key":"<s[n] as a string>", and "key_b64":"<base64 of s's exact bytes>" when s is not UTF-8 */
static void sb_bytes(sbuf *b, const char *key, const char *s, size_t n)
{
    sb_key(b, key);
    sb_json_stringn(b, s, n);
    if (!utf8_valid(s, n)) {
        char k64[64];
        snprintf(k64, sizeof k64, "%s_b64", key);
        char *enc = mv_base64_encode(s, n);
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

static void sb_path(sbuf *b, const char *key, const char *path) { sb_bytes(b, key, path, strlen(path)); }

/* "key":"<16 lowercase hex digits>" (an XXH64) */
static void sb_hex64(sbuf *b, const char *key, uint64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "\"%016" PRIx64 "\"", v);
    sb_key(b, key);
    sb_str(b, t);
}

/* The fields after dtype, bytes and model: video timing, seconds, the tar sample, the input
 * file, its path from / and planned name, the order (mv_manifest_format). */
static void sb_tail(sbuf *b, const mv_record *r)
{
    if (r->frame_indices) {
        sb_key(b, "frame_indices");
        sb_i64_array(b, r->frame_indices, r->n_frame_indices);
    }
    if (r->timestamps) {
        sb_key(b, "timestamps");
        sb_add(b, "[", 1);
        for (size_t i = 0; i < r->n_timestamps; i++) {
            if (i)
                sb_add(b, ",", 1);
            sb_f64(b, r->timestamps[i]);
        }
        sb_add(b, "]", 1);
    }
    if (r->has_fps)
        sb_f64_field(b, "fps", r->fps);
    if (r->has_duration)
        sb_f64_field(b, "duration", r->duration);
    if (r->has_rotation) {
        sb_key(b, "rotation");
        sb_i64(b, r->rotation);
    }
    if (r->has_seconds)
        sb_f64_field(b, "seconds", round(r->seconds * 1e6) / 1e6);
    if (r->shard)
        sb_path(b, "shard", r->shard);
    if (r->key) {
        sb_key(b, "key");
        sb_json_string(b, r->key);
    }
    if (r->has_offset) {
        sb_key(b, "offset");
        sb_i64(b, r->offset);
    }
    if (r->has_xxh64)
        sb_hex64(b, "xxh64", r->xxh64);
    if (r->has_input_stat) {
        sb_key(b, "input_bytes");
        sb_i64(b, r->input_bytes);
        sb_key(b, "input_mtime_ns");
        sb_i64(b, r->input_mtime_ns);
        if (r->input_mtime_ns == INT64_MAX || r->input_mtime_ns == INT64_MIN) { /* saturated */
            sb_key(b, "input_mtime_s");
            sb_i64(b, r->input_mtime_s);
        }
    }
    if (r->has_input_xxh64)
        sb_hex64(b, "input_xxh64", r->input_xxh64);
    if (r->input_key)
        sb_path(b, "input_key", r->input_key);
    if (r->json) {
        sb_key(b, "json");
        sb_str(b, r->json);
    }
    if (r->txt)
        sb_bytes(b, "txt", r->txt, r->txt_len);
    if (r->cls && r->has_cls_int) {
        sb_key(b, "cls");
        sb_i64(b, r->cls_int);
    } else if (r->cls)
        sb_bytes(b, "cls", r->cls, r->cls_len);
    if (r->input_abs)
        sb_path(b, "input_abs", r->input_abs);
    if (r->planned_output)
        sb_path(b, "planned_output", r->planned_output);
    if (r->schema) {
        sb_key(b, "schema");
        sb_i64(b, r->schema);
        sb_key(b, "run");
        sb_json_string(b, r->run ? r->run : "");
        sb_key(b, "seq");
        sb_i64(b, r->seq);
        sb_f64_field(b, "time", r->time);
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
    sb_tail(&b, r);
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

mv_status mv_manifest_append_held(int fd, const char *path, const char *text, size_t len, int64_t *at,
                                  int64_t *size, mv_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: fstat: %s", path, strerror(errno));
    int64_t pos = (int64_t)st.st_size;
    if (size)
        *size = pos;
    if (pos > 0) {
        char last;
        ssize_t k = pread(fd, &last, 1, pos - 1);
        if (k != 1)
            return mv_fail(e, MV_ERR_IO, "%s: reading the last byte: %s", path, k < 0 ? strerror(errno) : "file shrank");
        if (last != '\n' && pwrite(fd, "\n", 1, pos) != 1) /* a line torn by a crash: ended first */
            return mv_fail(e, MV_ERR_IO, "%s: write: %s", path, strerror(errno));
        pos += last != '\n';
    }
    for (size_t done = 0; done < len;) {
        ssize_t k = pwrite(fd, text + done, len - done, pos + (int64_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            mv_status s = mv_fail(e, MV_ERR_IO, "%s: write: %s", path, k < 0 ? strerror(errno) : strerror(EIO));
            if (ftruncate(fd, st.st_size) != 0) /* drop our partial line */
                mv_fail_prefix(e, s, "%s: could not remove a partial line (%s)", path, strerror(errno));
            return s;
        }
        done += (size_t)k;
    }
    if (at)
        *at = pos;
    return MV_OK;
}

/* Writes buf[1..n) under the lock (mv_manifest_append_held); frees buf. sync: fdatasync now, else every
 * MV_MANIFEST_SYNC_EVERY calls. */
static mv_status append_buf(mv_manifest *m, char *buf, size_t n, int sync, mv_err *e)
{
    if (lock_fd(m->fd, LOCK_EX) != 0) {
        int err = errno;
        free(buf);
        return mv_fail(e, MV_ERR_IO, "%s: cannot lock manifest: %s", m->path, strerror(err));
    }
    mv_status s = mv_manifest_append_held(m->fd, m->path, buf + 1, n - 1, NULL, NULL, e);
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
    mv_record stamped;
    if (!r->schema) { /* every line has its order */
        stamped = *r;
        mv_record_stamp(&stamped);
        r = &stamped;
    }
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
