/* tar_meta.c - a WebDataset sample's metadata members (tar_int.h): read within MV_TAR_META_MAX,
 * then made into the mv_tar_meta a record carries: .json checked with jansson and put on one line
 * (its text otherwise kept, numbers as written, a leading UTF-8 BOM dropped), .txt's bytes as they are, .cls trimmed and read
 * as an integer where it is one. Not here: which members form a sample (tar_in.c).
 */
#include "tar_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const meta_ext[MV_TAR_META_N] = {"json", "txt", "cls"};

void mv_tar_raw_clear(mv_tar_raw *r)
{
    for (int k = 0; k < MV_TAR_META_N; k++)
        free(r->buf[k]);
    memset(r, 0, sizeof *r);
}

/* see tar_int.h: the extension of member name nm is what follows the first '.' of its
 * basename ("" when none), its key what precedes that '.' (directory included), into key[cap]
 * (truncated to cap - 1 bytes). */
const char *mv_tar_split_key(const char *nm, char *key, size_t cap)
{
    const char *base = strrchr(nm, '/');
    const char *dot = strchr(base ? base + 1 : nm, '.');
    size_t kl = dot ? (size_t)(dot - nm) : strlen(nm);
    if (kl >= cap)
        kl = cap - 1;
    memcpy(key, nm, kl);
    key[kl] = 0;
    return dot ? dot + 1 : "";
}

int mv_tar_meta_kind(const char *ext)
{
    for (int k = 0; k < MV_TAR_META_N; k++)
        if (!strcasecmp(ext, meta_ext[k])) /* WebDataset lower-cases extensions */
            return k;
    return -1;
}

/* Reads the current member of a (entry en, named nm) as metadata of kind k into r, replacing one
 * read before; on failure r->err (its first) names the member and why. */
void mv_tar_read_meta(struct archive *a, struct archive_entry *en, const char *nm, int k, mv_tar_raw *r)
{
    char why[160] = "";
    char *buf = NULL;
    size_t n = 0;
    int64_t size = archive_entry_size_is_set(en) ? archive_entry_size(en) : 0;
    if (archive_entry_hardlink(en) || archive_entry_filetype(en) != AE_IFREG)
        snprintf(why, sizeof why, "is a link (metadata members are read only as regular members)");
    else if (size > MV_TAR_META_MAX)
        snprintf(why, sizeof why, "of %lld bytes is over the %d-byte limit on a metadata member",
                 (long long)size, MV_TAR_META_MAX);
    else if (!(buf = malloc((size_t)MV_TAR_META_MAX + 1)))
        snprintf(why, sizeof why, "cannot be held: out of memory");
    else
        for (la_ssize_t got; (got = archive_read_data(a, buf + n, (size_t)MV_TAR_META_MAX + 1 - n)) != 0;) {
            if (got < 0) {
                snprintf(why, sizeof why, "is unreadable: %.120s", archive_error_string(a));
                break;
            }
            if ((n += (size_t)got) > MV_TAR_META_MAX) { /* a member without a size in its header */
                snprintf(why, sizeof why, "of more than %d bytes is over the limit on a metadata member",
                         MV_TAR_META_MAX);
                break;
            }
        }
    if (why[0]) {
        free(buf);
        if (!r->err[0])
            snprintf(r->err, sizeof r->err, "tar member %.400s %s", nm, why);
        return;
    }
    buf[n] = 0;
    char *fit = realloc(buf, n + 1);
    free(r->buf[k]);
    r->buf[k] = fit ? fit : buf;
    r->len[k] = n;
}

void mv_tar_meta_clear(mv_tar_meta *m)
{
    free(m->key);
    free(m->json);
    free(m->txt);
    free(m->cls);
    memset(m, 0, sizeof *m);
}

void mv_tar_meta_free(mv_tar_meta *m)
{
    if (m)
        mv_tar_meta_clear(m);
    free(m);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

mv_tar_meta *mv_tar_meta_copy(const mv_tar_meta *m)
{
    mv_tar_meta *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    *c = *m;
    c->key = c->json = c->txt = c->cls = NULL;
    if (!(c->key = strdup(m->key)) || (m->json && !(c->json = strdup(m->json))) ||
        (m->txt && !(c->txt = dup_bytes(m->txt, m->txt_len))) ||
        (m->cls && !(c->cls = dup_bytes(m->cls, m->cls_len)))) {
        mv_tar_meta_free(c);
        return NULL;
    }
    return c;
}

/* How deep a .json may nest: the record holds it one level deeper, and jansson, which reads the
 * manifest back, takes JSON_PARSER_MAX_DEPTH levels. */
#define JSON_MAX_DEPTH 1000

/* JSON text s[n] (checked) without the white space between its tokens: one line; its deepest
 * nesting in *depth. */
static char *json_one_line(const char *s, size_t n, int *depth)
{
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    *depth = 0;
    for (size_t i = 0, in_str = 0, d = 0; i < n; i++) {
        char c = s[i];
        if (!in_str && (c == '[' || c == '{') && (int)++d > *depth)
            *depth = (int)d;
        else if (!in_str && (c == ']' || c == '}'))
            d--;
        if (in_str) {
            o[k++] = c;
            if (c == '\\' && i + 1 < n)
                o[k++] = s[++i];
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            o[k++] = c;
            in_str = 1;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            o[k++] = c;
    }
    o[k] = 0;
    return o;
}

/* cls: ASCII white space trimmed; an integer when it is [+-]digits within long long. */
static void set_cls(mv_tar_meta *m, const char *s, size_t n)
{
    while (n && strchr(" \t\n\r\v\f", s[0]) && s[0])
        s++, n--;
    while (n && strchr(" \t\n\r\v\f", s[n - 1]) && s[n - 1])
        n--;
    m->cls_len = n;
    size_t i = n && (s[0] == '+' || s[0] == '-');
    int digits = i < n;
    for (size_t j = i; j < n; j++)
        digits &= s[j] >= '0' && s[j] <= '9';
    if (digits && n < 24) {
        char num[24], *end;
        memcpy(num, s, n);
        num[n] = 0;
        errno = 0;
        m->cls_int = strtoll(num, &end, 10);
        m->cls_is_int = errno == 0 && *end == 0;
    }
    m->cls = dup_bytes(s, n);
}

int mv_tar_meta_build(mv_tar_meta *m, const char *key, const mv_tar_raw *before, const mv_tar_raw *after,
                      char *err, size_t cap)
{
    const char *failed = before->err[0] ? before->err : after->err;
    if (failed[0]) {
        snprintf(err, cap, "%s", failed);
        return -1;
    }
    const char *src[MV_TAR_META_N];
    size_t len[MV_TAR_META_N];
    for (int k = 0; k < MV_TAR_META_N; k++) {
        const mv_tar_raw *r = after->buf[k] ? after : before;
        src[k] = r->buf[k];
        len[k] = r->len[k];
    }
    if (src[MV_TAR_META_JSON] && len[MV_TAR_META_JSON] >= 3 && !memcmp(src[MV_TAR_META_JSON], "\xef\xbb\xbf", 3)) {
        src[MV_TAR_META_JSON] += 3; /* a UTF-8 BOM: read without it, as Python's json.loads(bytes) */
        len[MV_TAR_META_JSON] -= 3; /* does in WebDataset's decoder */
    }
    if (src[MV_TAR_META_JSON]) {
        json_error_t je;
        /* as the manifest's readers (resume, merge, compact) will read it back, inside the record */
        json_t *j = json_loadb(src[MV_TAR_META_JSON], len[MV_TAR_META_JSON], JSON_DECODE_ANY, &je);
        if (!j) {
            snprintf(err, cap, "tar member %.400s.json is not JSON that a manifest can hold: %.120s "
                     "(line %d, column %d)", key, je.text, je.line, je.column);
            return -1;
        }
        json_decref(j);
        int depth;
        m->json = json_one_line(src[MV_TAR_META_JSON], len[MV_TAR_META_JSON], &depth);
        if (m->json && depth > JSON_MAX_DEPTH) {
            snprintf(err, cap, "tar member %.400s.json nests %d levels deep, over the %d a manifest "
                     "line may hold", key, depth, JSON_MAX_DEPTH);
            return -1;
        }
    }
    m->key = strdup(key);
    if (src[MV_TAR_META_TXT])
        m->txt = dup_bytes(src[MV_TAR_META_TXT], m->txt_len = len[MV_TAR_META_TXT]);
    if (src[MV_TAR_META_CLS])
        set_cls(m, src[MV_TAR_META_CLS], len[MV_TAR_META_CLS]);
    if (!m->key || (src[MV_TAR_META_JSON] && !m->json) || (src[MV_TAR_META_TXT] && !m->txt) ||
        (src[MV_TAR_META_CLS] && !m->cls)) {
        snprintf(err, cap, "out of memory holding the sample's metadata");
        return -1;
    }
    return 0;
}
