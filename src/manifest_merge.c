/* manifest_merge.c - `mvembed manifest merge OUT`: folds the per-shard manifests that Slurm array
 * tasks (or --shard runs) wrote, OUT/manifest-KKKKK-of-NNNNN.jsonl, together with an existing
 * OUT/manifest.jsonl, into one OUT/manifest.jsonl: one line per input (keyed by its raw path bytes),
 * the latest line winning, in first-seen order. Written atomically (temp file + rename). */
#include "mv_run.h"

#include "mv_manifest.h"
#include "mv_walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *key;
    size_t keylen;
    char *line;
} entry;

typedef struct {
    entry *v;
    size_t n, cap;
    size_t *slots; /* open addressing: index + 1 */
    size_t scap;
} table;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int table_put(table *t, char *key, size_t keylen, char *line)
{
    if ((t->n + 1) * 2 > t->scap) {
        size_t nc = t->scap ? t->scap * 2 : 1024;
        size_t *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < t->n; i++) {
            size_t j = mv_hash64(t->v[i].key, t->v[i].keylen) & (nc - 1);
            while (ns[j])
                j = (j + 1) & (nc - 1);
            ns[j] = i + 1;
        }
        free(t->slots);
        t->slots = ns;
        t->scap = nc;
    }
    size_t j = mv_hash64(key, keylen) & (t->scap - 1);
    while (t->slots[j]) {
        entry *en = &t->v[t->slots[j] - 1];
        if (en->keylen == keylen && !memcmp(en->key, key, keylen)) {
            free(en->line);
            en->line = line;
            free(key);
            return 0;
        }
        j = (j + 1) & (t->scap - 1);
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        entry *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n] = (entry){key, keylen, line};
    t->slots[j] = ++t->n;
    return 0;
}

/* Reads one manifest; unparsable lines (a torn last line) are skipped and counted. */
static mv_status read_manifest(const char *path, table *t, size_t *bad, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&buf, &cap, f)) > 0) {
        if (buf[len - 1] == '\n')
            buf[--len] = 0;
        json_error_t je;
        json_t *j = json_loadb(buf, len, 0, &je);
        const char *in = j ? json_string_value(json_object_get(j, "input")) : NULL;
        const char *b64 = j ? json_string_value(json_object_get(j, "input_b64")) : NULL;
        if (!in) {
            (*bad)++;
            json_decref(j);
            continue;
        }
        size_t kl;
        char *key;
        if (b64) {
            /* NULL is bad base64 here (not out of memory): an unreadable line like any other */
            key = (char *)mv_base64_decode(b64, &kl);
            if (!key || kl == 0) {
                (*bad)++;
                free(key);
                json_decref(j);
                continue;
            }
        } else {
            kl = strlen(in);
            key = malloc(kl + 1);
            if (key)
                memcpy(key, in, kl + 1);
        }
        json_decref(j);
        char *line = strdup(buf);
        if (!key || !line || table_put(t, key, kl, line)) {
            free(key);
            free(line);
            free(buf);
            fclose(f);
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    free(buf);
    fclose(f);
    return MV_OK;
}

int mv_manifest_merge_dir(const char *out_dir, int quiet, mv_err *e)
{
    DIR *d = opendir(out_dir);
    if (!d) {
        mv_fail(e, MV_ERR_IO, "%s: %s", out_dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t nn = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int k, n, used = 0;
        if (sscanf(de->d_name, "manifest-%5d-of-%5d.jsonl%n", &k, &n, &used) == 2 &&
            used == (int)strlen(de->d_name)) {
            if (nn == cap) {
                cap = cap ? cap * 2 : 16;
                char **nv = realloc(names, cap * sizeof *names);
                if (!nv)
                    break;
                names = nv;
            }
            names[nn++] = strdup(de->d_name);
        }
    }
    closedir(d);
    if (nn)
        qsort(names, nn, sizeof *names, cmp_str);
    table t = {0};
    size_t bad = 0;
    int rc = 1;
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/manifest.jsonl", out_dir);
    if (!nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: no manifest-*-of-*.jsonl files to merge", out_dir);
        goto out;
    }
    if (access(path, F_OK) == 0 && read_manifest(path, &t, &bad, e))
        goto out;
    for (size_t i = 0; i < nn; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        if (read_manifest(p, &t, &bad, e))
            goto out;
    }
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-manifest.jsonl", out_dir, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t ok = 0;
    for (size_t i = 0; i < t.n; i++) {
        fputs(t.v[i].line, f);
        fputc('\n', f);
        ok += strstr(t.v[i].line, "\"status\":\"ok\"") != NULL;
    }
    if (fflush(f) || fsync(fileno(f)) || fclose(f)) {
        mv_fail(e, MV_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path)) {
        mv_fail(e, MV_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (!quiet)
        fprintf(stderr, "mvembed: merged %zu manifest files into %s: %zu lines (%zu ok, %zu not ok)%s\n",
                nn, path, t.n, ok, t.n - ok, bad ? ", unreadable lines skipped" : "");
    rc = 0;
out:
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    for (size_t i = 0; i < t.n; i++) {
        free(t.v[i].key);
        free(t.v[i].line);
    }
    free(t.v);
    free(t.slots);
    return rc;
}
