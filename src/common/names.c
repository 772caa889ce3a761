/* names.c - every name mvembed gives or reads back (see mv_names.h): output names and files,
 * the hash and the shard rule, kinds by extension, shard manifests and tar shards, each builder
 * beside its parser. Pure string functions: this file opens nothing and keeps no state.
 */
#include "mv_names.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* --- inputs and outputs --------------------------------------------------------------------- */

size_t mv_output_name(const char *path, char *buf)
{
    size_t o = 0;
    const char *c = path;
    while (*c) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        const char *next = end ? end + 1 : c + n;
        if (n == 0 || (n == 1 && c[0] == '.')) {
            c = next;
            continue;
        }
        if (o > 0)
            buf[o++] = '/';
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            buf[o++] = '_';
            buf[o++] = '_';
        } else {
            size_t u = 0;
            while (u < n && c[u] == '_')
                u++;
            memcpy(buf + o, c, n);
            o += n;
            if (u == n && n >= 2)
                buf[o++] = '_';
        }
        c = next;
    }
    buf[o] = 0;
    return o;
}

int mv_name_output_file(char *buf, size_t cap, const char *rel)
{
    return snprintf(buf, cap, "%s" MV_OUTPUT_SUFFIX, rel);
}

const char *mv_name_flaw(const char *name)
{
    if (!name[0] || name[0] == '/')
        return "is not a relative path";
    for (const char *c = name; *c;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return "has an empty, '.' or '..' component";
        c += n + (end ? 1 : 0);
        if (end && !*c)
            return "ends with '/'";
    }
    return NULL;
}

int mv_name_pooled_dir(const char *name, size_t len, int *k, int *n)
{
    *k = *n = 0;
    if (len == 6)
        return !memcmp(name, "pooled", 6);
    if (len != 21 || memcmp(name, "pooled-", 7) || memcmp(name + 12, "-of-", 4))
        return 0;
    for (size_t i = 0; i < 5; i++) {
        char a = name[7 + i], b = name[16 + i];
        if (a < '0' || a > '9' || b < '0' || b > '9')
            return 0;
        *k = *k * 10 + (a - '0');
        *n = *n * 10 + (b - '0');
    }
    return 1;
}

int mv_name_in_pooled_dir(const char *rel)
{
    const char *slash = strchr(rel, '/');
    int k, n;
    return slash && mv_name_pooled_dir(rel, (size_t)(slash - rel), &k, &n);
}

uint64_t mv_hash64(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int mv_name_in_shard_n(const char *rel, size_t len, int k, int n)
{
    return n <= 1 || (int)(mv_hash64(rel, len) % (uint64_t)n) == k;
}

int mv_name_in_shard(const char *rel, int k, int n)
{
    return mv_name_in_shard_n(rel, strlen(rel), k, n);
}

/* --- kinds by extension ----------------------------------------------------------------------- */

static const struct {
    const char *ext;
    mv_name_kind kind;
} media_exts[] = {
    {"jpg", MV_NAME_IMAGE},  {"jpeg", MV_NAME_IMAGE}, {"jpe", MV_NAME_IMAGE},  {"png", MV_NAME_IMAGE},
    {"webp", MV_NAME_IMAGE}, {"gif", MV_NAME_IMAGE},  {"bmp", MV_NAME_IMAGE},  {"tif", MV_NAME_IMAGE},
    {"tiff", MV_NAME_IMAGE}, {"mp4", MV_NAME_VIDEO},  {"m4v", MV_NAME_VIDEO},  {"mov", MV_NAME_VIDEO},
    {"mkv", MV_NAME_VIDEO},  {"webm", MV_NAME_VIDEO}, {"avi", MV_NAME_VIDEO},  {"mpg", MV_NAME_VIDEO},
    {"mpeg", MV_NAME_VIDEO}, {"ts", MV_NAME_VIDEO},   {"m2ts", MV_NAME_VIDEO}, {"flv", MV_NAME_VIDEO},
    {"ogv", MV_NAME_VIDEO},  {"3gp", MV_NAME_VIDEO},  {"wmv", MV_NAME_VIDEO},
};

static const char *const tar_exts[] = {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2"};

int mv_name_is_tar_n(const char *path, size_t n)
{
    for (size_t i = 0; i < sizeof tar_exts / sizeof *tar_exts; i++) {
        size_t k = strlen(tar_exts[i]);
        if (n > k && !strncasecmp(path + n - k, tar_exts[i], k))
            return 1;
    }
    return 0;
}

mv_name_kind mv_name_kind_of(const char *path)
{
    if (mv_name_is_tar_n(path, strlen(path)))
        return MV_NAME_TAR;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base)
        return MV_NAME_OTHER;
    for (size_t i = 0; i < sizeof media_exts / sizeof *media_exts; i++)
        if (!strcasecmp(dot + 1, media_exts[i].ext))
            return media_exts[i].kind;
    return MV_NAME_OTHER;
}

int mv_name_is_media(const char *path)
{
    mv_name_kind k = mv_name_kind_of(path);
    return k == MV_NAME_IMAGE || k == MV_NAME_VIDEO;
}

/* --- shard manifests and tar shards ----------------------------------------------------------- */

int mv_name_manifest(char *buf, size_t cap, const char *dir, int k, int n)
{
    if (n > 1)
        return snprintf(buf, cap, "%s/manifest-%05d-of-%05d.jsonl", dir, k, n);
    return snprintf(buf, cap, "%s/manifest.jsonl", dir);
}

/* The decimal number at *p (one digit or more, at most INT_MAX) into *v; the end, or NULL. */
static const char *parse_int(const char *p, int *v)
{
    long long x = 0;
    const char *s = p;
    for (; isdigit((unsigned char)*p); p++)
        if ((x = x * 10 + (*p - '0')) > INT_MAX)
            return NULL;
    *v = (int)x;
    return p > s ? p : NULL;
}

int mv_name_manifest_parse(const char *name, int *k, int *n)
{
    int kk, nn;
    const char *p = name;
    if (strncmp(p, "manifest-", 9) != 0 || !(p = parse_int(p + 9, &kk)) || strncmp(p, "-of-", 4) != 0 ||
        !(p = parse_int(p + 4, &nn)) || strcmp(p, ".jsonl") != 0)
        return 0;
    *k = kk;
    *n = nn;
    return 1;
}

void mv_name_tar_shard(char *buf, size_t cap, int k, int n, long long num)
{
    if (n > 1)
        snprintf(buf, cap, "shard-%05d-of-%05d-%05lld.tar", k, n, num);
    else
        snprintf(buf, cap, "shard-%05lld.tar", num);
}

long long mv_name_tar_shard_parse(const char *name, int k, int n)
{
    char pre[64];
    if (n > 1)
        snprintf(pre, sizeof pre, "shard-%05d-of-%05d-", k, n);
    else
        snprintf(pre, sizeof pre, "shard-");
    size_t pl = strlen(pre);
    if (strncmp(name, pre, pl) != 0)
        return -1;
    const char *p = name + pl;
    long long v = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*p) && digits < 15; p++, digits++)
        v = v * 10 + (*p - '0');
    if (digits < 5 || strcmp(p, ".tar") != 0)
        return -1;
    return v;
}

int mv_name_is_manifest(const char *name)
{
    int k, n;
    return !strcmp(name, "manifest.jsonl") || mv_name_manifest_parse(name, &k, &n);
}

int mv_name_tar_shard_naming(const char *name, int *k, int *n)
{
    *k = 0;
    *n = 1;
    if (mv_name_tar_shard_parse(name, 0, 1) >= 0)
        return 1;
    return sscanf(name, "shard-%d-of-%d-", k, n) == 2 && mv_name_tar_shard_parse(name, *k, *n) >= 0;
}

int mv_name_run_record(char *buf, size_t cap, const char *dir, int k, int n, const char *run)
{
    if (n <= 1)
        return snprintf(buf, cap, "%s/run-%s.json", dir, run);
    return snprintf(buf, cap, "%s/run-%05d-of-%05d-%s.json", dir, k, n, run);
}

int mv_name_marker(char *buf, size_t cap, const char *dir, int k, int n)
{
    if (n <= 1)
        return snprintf(buf, cap, "%s/_SUCCESS", dir);
    return snprintf(buf, cap, "%s/_SUCCESS-%05d-of-%05d", dir, k, n);
}
