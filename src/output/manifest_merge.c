/* manifest_merge.c - `mvembed manifest merge OUT` and `mvembed manifest compact [--all] OUT`.
 * merge folds the per-shard manifests that Slurm array tasks (or --shard runs) wrote,
 * OUT/manifest-KKKKK-of-NNNNN.jsonl, together with an existing OUT/manifest.jsonl, into one
 * OUT/manifest.jsonl; compact rewrites a manifest in place (after --force reruns it holds several
 * lines per input). Both keep one line per input (keyed by its raw path bytes), the latest line
 * winning, in first-seen order; lines that are not JSON objects with a string "input" (a torn last
 * line) are dropped and counted. Written atomically: temp file in OUT, fsync, rename, fsync of OUT,
 * so a crash leaves the old manifest or the new one, never half of one. Not for use while a run is
 * appending to the same manifest (its lines written after the read would be lost). */
#include "mv_run.h"

#include "mv_hashset.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_place.h"
#include "mv_tar_resume.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The lines kept, one per input in first-seen order; keys: input -> its index in lines. */
typedef struct {
    char **lines;
    size_t n, cap;
    mv_hashset keys;
} table;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* line becomes key's latest line (t owns it from here, 0), or -1 when out of memory (line is
 * the caller's still). */
static int table_put(table *t, const char *key, size_t keylen, char *line)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        char **nl = realloc(t->lines, nc * sizeof *nl);
        if (!nl)
            return -1;
        t->lines = nl;
        t->cap = nc;
    }
    int added;
    mv_hashset_entry *en = mv_hashset_add(&t->keys, key, keylen, &added);
    if (!en)
        return -1;
    if (!added) {
        free(t->lines[en->value]);
        t->lines[en->value] = line;
        return 0;
    }
    en->value = t->n;
    t->lines[t->n++] = line;
    return 0;
}

/* Reads one manifest into t; unparsable lines (a torn last line) are skipped and counted in *bad;
 * *lines (may be NULL) counts every line read. */
static mv_status read_manifest(const char *path, table *t, size_t *bad, size_t *lines, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&buf, &cap, f)) > 0) {
        if (lines)
            (*lines)++;
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
        free(key);
    }
    free(buf);
    fclose(f);
    return MV_OK;
}

typedef struct {
    table t;
    size_t bad; /* unparsable lines dropped */
} folded;

static void folded_free(folded *f)
{
    for (size_t i = 0; i < f->t.n; i++)
        free(f->t.lines[i]);
    free(f->t.lines);
    mv_hashset_free(&f->t.keys);
    memset(f, 0, sizeof *f);
}

static mv_status write_atomic_held(const char *dir, const char *tmp, const char *path, const folded *fd,
                                   size_t *ok, mv_err *e);

/* Writes f's lines to path through a temp file in dir (fsync, rename, fsync of dir); *ok counts
 * the lines with "status":"ok". */
static mv_status write_atomic(const char *dir, const char *path, const folded *fd, size_t *ok, mv_err *e)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-manifest.jsonl", dir, (long)getpid());
    mv_place_guard_begin(tmp); /* a signal meanwhile removes the temp file */
    mv_status st = write_atomic_held(dir, tmp, path, fd, ok, e);
    mv_place_guard_end();
    return st;
}

static mv_status write_atomic_held(const char *dir, const char *tmp, const char *path, const folded *fd,
                                   size_t *ok, mv_err *e)
{
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
    mv_output_lock_temp(fileno(f)); /* the sweep's lock rule: kept while this process writes it */
    *ok = 0;
    for (size_t i = 0; i < fd->t.n; i++) {
        fputs(fd->t.lines[i], f);
        fputc('\n', f);
        *ok += strstr(fd->t.lines[i], "\"status\":\"ok\"") != NULL;
    }
    int werr = ferror(f);
    if (fflush(f) || werr || fsync(fileno(f))) {
        int err = errno;
        fclose(f);
        unlink(tmp);
        return mv_fail(e, MV_ERR_IO, "%s: write failed: %s", tmp, strerror(err));
    }
    if (fclose(f)) {
        unlink(tmp);
        return mv_fail(e, MV_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rename(tmp, path)) {
        int err = errno;
        unlink(tmp);
        return mv_fail(e, MV_ERR_IO, "%s: rename failed: %s", path, strerror(err));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(dfd)) {
        int err = errno;
        if (dfd >= 0)
            close(dfd);
        return mv_fail(e, MV_ERR_IO, "%s: fsync of the directory failed: %s", dir, strerror(err));
    }
    close(dfd);
    return MV_OK;
}

/* The sorted names of OUT's shard manifests, manifest-K-of-N.jsonl (mv_name_manifest_parse;
 * *names NULL when none). */
static mv_status list_shard_manifests(const char *out_dir, char ***names, size_t *nn, mv_err *e)
{
    *names = NULL;
    *nn = 0;
    DIR *d = opendir(out_dir);
    if (!d)
        return mv_fail(e, MV_ERR_IO, "%s: %s", out_dir, strerror(errno));
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int k, n;
        if (!mv_name_manifest_parse(de->d_name, &k, &n))
            continue;
        if (*nn == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(*names, cap * sizeof **names);
            if (!nv)
                goto nomem;
            *names = nv;
        }
        if (!((*names)[*nn] = strdup(de->d_name)))
            goto nomem;
        (*nn)++;
    }
    closedir(d);
    if (*nn)
        qsort(*names, *nn, sizeof **names, cmp_str);
    return MV_OK;
nomem:
    closedir(d);
    return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory listing manifests", out_dir);
}

static void free_names(char **names, size_t nn)
{
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
}

int mv_manifest_merge_dir(const char *out_dir, int quiet, mv_err *e)
{
    char **names;
    size_t nn;
    mv_output_clean_temps(out_dir); /* temp manifests of killed merges and compacts (lock rule) */
    if (list_shard_manifests(out_dir, &names, &nn, e))
        return 1;
    folded fd = {0};
    int rc = 1;
    char path[4200];
    mv_name_manifest(path, sizeof path, out_dir, 0, 1);
    if (!nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: no manifest-*-of-*.jsonl files to merge", out_dir);
        goto out;
    }
    if (access(path, F_OK) == 0 && read_manifest(path, &fd.t, &fd.bad, NULL, e))
        goto out;
    for (size_t i = 0; i < nn; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        if (read_manifest(p, &fd.t, &fd.bad, NULL, e))
            goto out;
    }
    size_t ok;
    if (write_atomic(out_dir, path, &fd, &ok, e))
        goto out;
    if (!quiet)
        fprintf(stderr, "mvembed: merged %zu manifest files into %s: %zu lines (%zu ok, %zu not ok)%s\n",
                nn, path, fd.t.n, ok, fd.t.n - ok, fd.bad ? ", unreadable lines skipped" : "");
    rc = 0;
out:
    free_names(names, nn);
    folded_free(&fd);
    return rc;
}

/* Compacts one manifest file in place. */
static mv_status compact_one(const char *out_dir, const char *path, int quiet, mv_err *e)
{
    folded fd = {0};
    size_t lines = 0, ok;
    mv_status st = read_manifest(path, &fd.t, &fd.bad, &lines, e);
    if (!st)
        st = write_atomic(out_dir, path, &fd, &ok, e);
    if (!st && !quiet)
        fprintf(stderr, "mvembed: compacted %s: %zu lines -> %zu (%zu ok, %zu not ok), %zu unparsable "
                        "lines dropped\n", path, lines, fd.t.n, ok, fd.t.n - ok, fd.bad);
    folded_free(&fd);
    return st;
}

int mv_manifest_compact_dir(const char *out_dir, int all, int quiet, mv_err *e)
{
    char path[4200];
    mv_name_manifest(path, sizeof path, out_dir, 0, 1);
    mv_output_clean_temps(out_dir); /* temp manifests of killed merges and compacts (lock rule) */
    int have_main = access(path, F_OK) == 0;
    char **names = NULL;
    size_t nn = 0;
    if (all && list_shard_manifests(out_dir, &names, &nn, e))
        return 1;
    int rc = 1;
    if (!have_main && !nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: no manifest.jsonl to compact%s", out_dir,
                all ? " (and no manifest-*-of-*.jsonl)"
                    : " (shard manifests: give --all, or join them with mvembed manifest merge)");
        goto out;
    }
    if (have_main && compact_one(out_dir, path, quiet, e))
        goto out;
    for (size_t i = 0; i < nn; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        if (compact_one(out_dir, p, quiet, e))
            goto out;
    }
    rc = mv_tar_compact_dir(out_dir, quiet, e) ? 1 : 0; /* the tar layout's dead samples */
out:
    free_names(names, nn);
    return rc;
}
