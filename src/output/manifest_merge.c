/* manifest_merge.c - `mvembed manifest merge OUT` and `mvembed manifest compact [--all] OUT`.
 * merge folds the per-shard manifests that Slurm array tasks (or --shard runs) wrote,
 * OUT/manifest-KKKKK-of-NNNNN.jsonl, together with an existing OUT/manifest.jsonl, into one
 * OUT/manifest.jsonl; compact rewrites a manifest in place (after --force reruns it holds several
 * lines per input). Both keep one line per input, its newest line winning (mv_line_order_cmp: the
 * order survives merging), in first-seen order; lines of one input are those whose inputs are the
 * same path once normalised (mv_line_input_key), and then an older line that a newer one shows to
 * be stale (the same file now, or the same output file: mv_line_stale) is dropped too. Lines that
 * are not JSON objects with a string "input" (a torn last line) are dropped and counted. Written
 * atomically: temp file in OUT, fsync, rename, fsync of OUT, so a crash leaves the old manifest or
 * the new one, never half of one. Both take OUT's run lock exclusively first (mv_claims_exclusive)
 * and refuse while a run holds it: a run's lines are never lost to a rewrite; a run starting
 * meanwhile waits. `mvembed manifest failed OUT` folds every
 * manifest the same way, read-only, and prints the inputs whose newest line failed. */
#include "mv_run.h"

#include "mv_claims.h"
#include "mv_hashset.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_place.h"
#include "mv_tar_resume.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The lines kept, one per input in first-seen order, each its input's newest (mv_line_order_cmp);
 * keys: the input's key (mv_line_input_key) -> its index in lines. Beside each line: its order, its
 * input and output (who), and for an ok line its model fingerprint and the file it came from (an
 * index into the files read). */
typedef struct {
    char **lines;
    mv_line_order *ord;
    char (*model)[17]; /* "" for error lines and lines without one */
    int *file;
    mv_line_who *who;
    unsigned char *has_abs; /* the kept line recorded the input's path from / (input_abs) */
    size_t n, cap;
    uint64_t pos; /* lines read, over every file */
    int n_files;
    mv_hashset keys;
} table;

/* line becomes its input's line when it is newer than the one kept (t owns it and who's strings
 * from here: 0, and frees them when older), or -1 when out of memory (they are the caller's
 * still). The input is found by akey (the key of the line's input_abs, or NULL) first: lines of
 * one file written from other working directories are one input; else by key, which a line with
 * akey takes only where the kept line has none (a line written before input_abs was recorded),
 * so that one relative spelling met from two directories stays two inputs. */
static int table_put(table *t, const char *key, size_t keylen, const char *akey, size_t akl, char *line,
                     const mv_line_order *ord, const char *model, mv_line_who who)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        char **nl = realloc(t->lines, nc * sizeof *nl);
        if (nl)
            t->lines = nl;
        mv_line_order *no = nl ? realloc(t->ord, nc * sizeof *no) : NULL;
        if (no)
            t->ord = no;
        char (*nm)[17] = no ? realloc(t->model, nc * sizeof *nm) : NULL;
        if (nm)
            t->model = nm;
        int *nf = nm ? realloc(t->file, nc * sizeof *nf) : NULL;
        if (nf)
            t->file = nf;
        mv_line_who *nw = nf ? realloc(t->who, nc * sizeof *nw) : NULL;
        if (nw)
            t->who = nw;
        unsigned char *na = nw ? realloc(t->has_abs, nc) : NULL;
        if (!na)
            return -1;
        t->has_abs = na;
        t->cap = nc;
    }
    mv_hashset_entry *ea = akey ? mv_hashset_find(&t->keys, akey, akl) : NULL;
    mv_hashset_entry *ek = mv_hashset_find(&t->keys, key, keylen);
    const int added = !ea && !(ek && (!akey || !t->has_abs[ek->value]));
    const size_t i = ea ? ea->value : !added ? ek->value : t->n;
    if (!ek && (!(ek = mv_hashset_add(&t->keys, key, keylen, NULL)) || (ek->value = i, 0)))
        return -1;
    if (akey && !ea && (!(ea = mv_hashset_add(&t->keys, akey, akl, NULL)) || (ea->value = i, 0)))
        return -1;
    if (!added) {
        if (mv_line_order_cmp(ord, &t->ord[i]) < 0) { /* an older line: the kept one stays */
            free(line);
            free(who.in);
            free(who.out);
            return 0;
        }
        free(t->lines[i]);
        free(t->who[i].in);
        free(t->who[i].out);
    } else {
        t->n++;
        t->has_abs[i] = 0;
    }
    t->has_abs[i] |= akey != NULL;
    t->lines[i] = line;
    t->who[i] = who;
    t->ord[i] = *ord;
    snprintf(t->model[i], sizeof t->model[i], "%s", model);
    t->file[i] = t->n_files - 1;
    return 0;
}

/* The output file an ok line of the files layout names ("output", or its "output_b64"), malloc'd;
 * NULL for other lines (errors, tar samples: their "output" is a shared shard) and when out of
 * memory (*nomem set). */
static char *line_output(json_t *j, int ok, int *nomem)
{
    if (!ok || !json_is_string(json_object_get(j, "output")) || json_object_get(j, "shard"))
        return NULL;
    return mv_line_path_field(j, "output", nomem); /* a bad output_b64: keyed by input only */
}

/* Reads one manifest into t; unparsable lines (a torn last line) are skipped and counted in *bad;
 * *lines (may be NULL) counts every line read. */
static mv_status read_manifest(const char *path, table *t, size_t *bad, size_t *lines, mv_err *e)
{
    int fd;
    mv_status st = mv_open_regular(path, &fd, e); /* a FIFO would block the merge for ever */
    if (st)
        return st;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    }
    t->n_files++;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&buf, &cap, f)) > 0) {
        if (lines)
            (*lines)++;
        if (buf[len - 1] == '\n')
            buf[--len] = 0;
        if (len == 0)
            continue; /* the empty line that ends a torn one */
        json_error_t je;
        json_t *j = json_loadb(buf, len, 0, &je);
        const char *in = j ? json_string_value(json_object_get(j, "input")) : NULL;
        const char *b64 = j ? json_string_value(json_object_get(j, "input_b64")) : NULL;
        if (!in) {
            (*bad)++;
            json_decref(j);
            continue;
        }
        size_t rl, kl = 0;
        char *raw;
        if (b64) {
            /* NULL is bad base64 here (not out of memory): an unreadable line like any other */
            raw = (char *)mv_base64_decode(b64, &rl);
            if (!raw || rl == 0) {
                (*bad)++;
                free(raw);
                json_decref(j);
                continue;
            }
        } else {
            rl = strlen(in);
            raw = strdup(in);
        }
        mv_line_order ord;
        mv_line_order_of(j, ++t->pos, &ord);
        const char *status = json_string_value(json_object_get(j, "status"));
        const char *model = json_string_value(json_object_get(j, "model"));
        int ok = status && !strcmp(status, "ok"), nomem = 0;
        char fp[17];
        snprintf(fp, sizeof fp, "%s", ok && model ? model : "");
        mv_line_who who = {raw, line_output(j, ok, &nomem), !ok, json_object_get(j, "input_key") != NULL};
        char *abs = mv_line_path_field(j, "input_abs", &nomem); /* the input's path from / */
        size_t al = abs ? strlen(abs) : 0, akl = 0;
        json_decref(j);
        char *key = raw ? mv_line_input_key(raw, rl, &kl) : NULL;
        char *akey = abs ? mv_line_input_key(abs, al, &akl) : NULL;
        nomem |= abs && !akey;
        free(abs);
        char *line = strdup(buf);
        if (!key || !line || nomem || table_put(t, key, kl, akey, akl, line, &ord, fp, who)) {
            free(akey);
            free(key);
            free(line);
            free(who.in);
            free(who.out);
            free(buf);
            fclose(f);
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        }
        free(akey);
        free(key);
    }
    int rerr = ferror(f) ? (errno ? errno : EIO) : 0; /* a read error is not the file's end */
    free(buf);
    fclose(f);
    return rerr ? mv_fail(e, MV_ERR_IO, "%s: cannot read the manifest: %s", path, strerror(rerr)) : MV_OK;
}

typedef struct {
    table t;
    size_t bad; /* unparsable lines dropped */
} folded;

static void folded_free(folded *f)
{
    for (size_t i = 0; i < f->t.n; i++) {
        free(f->t.lines[i]);
        free(f->t.who[i].in);
        free(f->t.who[i].out);
    }
    free(f->t.who);
    free(f->t.lines);
    free(f->t.ord);
    free(f->t.model);
    free(f->t.file);
    free(f->t.has_abs);
    mv_hashset_free(&f->t.keys);
    memset(f, 0, sizeof *f);
}

/* Drops the kept lines that newer ones show to be stale (mv_line_stale), keeping the others'
 * order. -1 when out of memory. */
static int same_input_drop(table *t)
{
    char *stale = t->n > 1 ? calloc(t->n, 1) : NULL;
    if (t->n < 2)
        return 0;
    if (!stale || mv_line_stale(t->n, t->ord, t->who, stale)) {
        free(stale);
        return -1;
    }
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (stale[i]) {
            free(t->lines[i]);
            free(t->who[i].in);
            free(t->who[i].out);
            continue;
        }
        t->lines[w] = t->lines[i];
        t->ord[w] = t->ord[i];
        memcpy(t->model[w], t->model[i], sizeof t->model[w]);
        t->file[w] = t->file[i];
        t->who[w++] = t->who[i];
    }
    t->n = w; /* t->keys' values are stale from here: nothing looks lines up by input again */
    free(stale);
    return 0;
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
    mv_output_lock_temp(fileno(f)); /* a sweep, here or in another PID namespace, leaves it alone */
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
    if (mv_sync_dir(dir, NULL))
        return mv_fail(e, MV_ERR_IO, "%s: fsync of the directory failed: %s", dir, strerror(errno));
    return MV_OK;
}

/* Says on stderr when the kept ok lines were made with more than one fingerprint: those inputs
 * were embedded with other weights or settings (files[i]: the i-th file read). */
static void warn_fingerprints(const folded *fd, const char *const *files, const char *out_dir)
{
    enum { MAX_FP = 8 };
    char fps[MAX_FP][17];
    size_t count[MAX_FP] = {0};
    int first_file[MAX_FP], n = 0, more = 0;
    for (size_t i = 0; i < fd->t.n; i++) {
        const char *m = fd->t.model[i];
        if (!m[0])
            continue;
        int k = 0;
        while (k < n && strcmp(fps[k], m) != 0)
            k++;
        if (k == n && n == MAX_FP) {
            more = 1;
            continue;
        }
        if (k == n) {
            snprintf(fps[n], sizeof fps[n], "%s", m);
            first_file[n++] = fd->t.file[i];
        }
        count[k]++;
    }
    if (n < 2)
        return;
    fprintf(stderr, "mvembed: %s: warning: the merged ok lines were made with %d%s different "
            "fingerprints (other weights or settings):", out_dir, n, more ? "+" : "");
    for (int k = 0; k < n; k++)
        fprintf(stderr, "%s %s (%zu input%s, first in %s)", k ? "," : "", fps[k], count[k],
                count[k] == 1 ? "" : "s", files[first_file[k]]);
    fprintf(stderr, "; a run with the settings you want redoes the others\n");
}

/* Without locks a run writing into OUT holds nothing compact or merge (cmd) can see: says so,
 * since lines such a run appends to a manifest being rewritten go to the replaced file. */
static void warn_lockless(const mv_claims *lock, const char *out_dir, const char *cmd)
{
    if (mv_claims_lockless(lock))
        fprintf(stderr, "mvembed: %s: warning: the file system offers no locks: manifest %s cannot tell "
                "whether a run is writing into it, and the lines such a run appends meanwhile are lost; "
                "run it once every run into OUT has ended\n", out_dir, cmd);
}

int mv_manifest_merge_dir(const char *out_dir, int quiet, mv_err *e)
{
    char **names;
    size_t nn;
    mv_claims *lock; /* no run appends while manifests are rewritten */
    if (mv_claims_exclusive(out_dir, &lock, e))
        return 1;
    warn_lockless(lock, out_dir, "merge");
    mv_output_clean_temps(out_dir); /* temp manifests of killed merges and compacts (lock rule) */
    if (mv_manifest_list(out_dir, &names, &nn, e)) {
        mv_claims_close(lock);
        return 1;
    }
    folded fd = {0};
    int rc = 1;
    char path[4200];
    const char **files = calloc(nn + 1, sizeof *files);
    mv_name_manifest(path, sizeof path, out_dir, 0, 1);
    if (!files) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
        goto out;
    }
    if (!nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: no manifest-*-of-*.jsonl files to merge", out_dir);
        goto out;
    }
    if (access(path, F_OK) == 0) {
        files[fd.t.n_files] = "manifest.jsonl";
        if (read_manifest(path, &fd.t, &fd.bad, NULL, e))
            goto out;
    }
    for (size_t i = 0; i < nn; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        files[fd.t.n_files] = names[i];
        if (read_manifest(p, &fd.t, &fd.bad, NULL, e))
            goto out;
    }
    if (same_input_drop(&fd.t)) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
        goto out;
    }
    size_t ok;
    if (write_atomic(out_dir, path, &fd, &ok, e))
        goto out;
    if (!quiet)
        fprintf(stderr, "mvembed: merged %zu manifest files into %s: %zu lines (%zu ok, %zu not ok)%s\n",
                nn, path, fd.t.n, ok, fd.t.n - ok, fd.bad ? ", unreadable lines skipped" : "");
    warn_fingerprints(&fd, files, out_dir);
    rc = 0;
out:
    free(files);
    mv_manifest_list_free(names, nn);
    folded_free(&fd);
    mv_claims_close(lock);
    return rc;
}

/* Compacts one manifest file in place; *lines: the lines it held, *bad: the unparsable ones dropped. */
static mv_status compact_one(const char *out_dir, const char *path, size_t *lines, size_t *bad, mv_err *e)
{
    folded fd = {0};
    size_t ok;
    mv_status st = read_manifest(path, &fd.t, &fd.bad, lines, e); /* *lines counted from 0 by the caller */
    if (!st && same_input_drop(&fd.t))
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    if (!st)
        st = write_atomic(out_dir, path, &fd, &ok, e);
    *bad = fd.bad;
    mv_output_swept swept; /* killed runs' temp outputs, in every directory an output is in */
    mv_output_swept_init(&swept);
    for (size_t i = 0; !st && i < fd.t.n; i++)
        if (fd.t.who[i].out)
            mv_output_sweep_of(out_dir, fd.t.who[i].out, &swept); /* best effort, as a run's sweep */
    mv_output_swept_destroy(&swept);
    folded_free(&fd);
    return st;
}

int mv_manifest_compact_dir(const char *out_dir, int all, int quiet, mv_err *e)
{
    char p[4200];
    mv_name_manifest(p, sizeof p, out_dir, 0, 1);
    mv_output_clean_temps(out_dir); /* temp manifests of killed merges and compacts (lock rule) */
    int have_main = access(p, F_OK) == 0;
    char **names = NULL;
    size_t nn = 0, (*said)[2] = NULL; /* each file's lines before, unparsable lines dropped */
    mv_claims *lock = NULL; /* no run appends while manifests are rewritten */
    if (mv_claims_exclusive(out_dir, &lock, e))
        return 1;
    warn_lockless(lock, out_dir, "compact");
    int rc = 1;
    if (all && mv_manifest_list(out_dir, &names, &nn, e))
        goto out;
    if (!have_main && !nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: no manifest.jsonl to compact%s", out_dir,
                all ? " (and no manifest-*-of-*.jsonl)"
                    : " (shard manifests: give --all, or join them with mvembed manifest merge)");
        goto out;
    }
    if (!(said = calloc(nn + 1, sizeof *said)) && mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir))
        goto out;
    for (size_t i = !have_main; i <= nn; i++) {
        snprintf(p, sizeof p, "%s/%s", out_dir, i ? names[i - 1] : "manifest.jsonl");
        if (compact_one(out_dir, p, &said[i][0], &said[i][1], e))
            goto out;
    }
    if (mv_tar_compact_dir(out_dir, quiet, e)) /* the tar layout's dead samples, their lines too */
        goto out;
    for (size_t i = !have_main, n, ok; !quiet && i <= nn; i++) { /* what each holds now */
        snprintf(p, sizeof p, "%s/%s", out_dir, i ? names[i - 1] : "manifest.jsonl");
        if (mv_manifest_count(p, &n, &ok, e))
            goto out;
        fprintf(stderr, "mvembed: compacted %s: %zu lines -> %zu (%zu ok, %zu not ok), %zu unparsable lines "
                "dropped\n", p, said[i][0], n, ok, n - ok, said[i][1]);
    }
    rc = 0;
out:
    free(said);
    mv_manifest_list_free(names, nn);
    mv_claims_close(lock);
    return rc;
}

/* ---- manifest failed -------------------------------------------------------------------------- */

/* What retries in[0..n): for a tar member (a path whose leading part names a tar that is a
 * regular file now, mv_name_kind_of), that tar's path; else in itself. The length kept. */
static size_t retry_path(char *in, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (in[i] != '/')
            continue;
        in[i] = 0;
        struct stat sb;
        int tar = mv_name_kind_of(in) == MV_NAME_TAR && stat(in, &sb) == 0 && S_ISREG(sb.st_mode);
        in[i] = '/';
        if (tar)
            return i;
    }
    return n;
}

/* The raw input of line (input_b64's bytes, else input's), malloc'd, *n its length; NULL when the
 * line has none (or out of memory: *n is then 1). */
static char *line_input(const char *line, size_t *n, int *failed)
{
    json_error_t je;
    json_t *j = json_loads(line, 0, &je);
    const char *in = json_string_value(json_object_get(j, "input"));
    const char *b64 = json_string_value(json_object_get(j, "input_b64"));
    const char *st = json_string_value(json_object_get(j, "status"));
    char *key = NULL;
    *n = 0;
    *failed = !st || strcmp(st, "ok") != 0;
    if (b64)
        key = (char *)mv_base64_decode(b64, n);
    else if (in && (key = malloc(strlen(in) + 1))) {
        *n = strlen(in);
        memcpy(key, in, *n + 1);
    }
    if (!key && in)
        *n = 1;
    json_decref(j);
    return key;
}

int mv_manifest_failed_dir(const char *out_dir, int null_sep, FILE *to, mv_err *e)
{
    struct stat sb;
    if (stat(out_dir, &sb) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: %s", out_dir, strerror(errno)), 1;
    if (!S_ISDIR(sb.st_mode))
        return mv_fail(e, MV_ERR_USAGE, "%s: not a directory", out_dir), 1;
    char **names;
    size_t nn;
    if (mv_manifest_list(out_dir, &names, &nn, e))
        return 1;
    folded fd = {0};
    mv_hashset printed = {0};
    int rc = 1, werr = 0;
    size_t n_unsaid = 0; /* names holding a newline, without -0 */
    char path[4200];
    mv_name_manifest(path, sizeof path, out_dir, 0, 1);
    int have_main = access(path, F_OK) == 0;
    if (!have_main && !nn) {
        mv_fail(e, MV_ERR_USAGE, "%s: not an mvembed output directory (no manifest.jsonl or "
                "manifest-*-of-*.jsonl)", out_dir);
        goto out;
    }
    if (have_main && read_manifest(path, &fd.t, &fd.bad, NULL, e))
        goto out;
    for (size_t i = 0; i < nn; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out_dir, names[i]);
        if (read_manifest(p, &fd.t, &fd.bad, NULL, e))
            goto out;
    }
    if (same_input_drop(&fd.t)) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
        goto out;
    }
    for (size_t i = 0; i < fd.t.n; i++) {
        size_t n;
        int failed, added = 0;
        char *in = line_input(fd.t.lines[i], &n, &failed);
        if (!in && n) {
            mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
            goto out;
        }
        if (in && failed) {
            n = retry_path(in, n);
            if (!mv_hashset_add(&printed, in, n, &added)) {
                free(in);
                mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
                goto out;
            }
            if (added && !null_sep && memchr(in, '\n', n)) /* one name, two lines: only -0 can say it */
                n_unsaid++;
            else if (added && (fwrite(in, 1, n, to) != n || fputc(null_sep ? 0 : '\n', to) == EOF)) {
                free(in);
                goto write_failed;
            }
        }
        free(in);
    }
    if (fflush(to) != 0) {
    write_failed:
        werr = errno;
        mv_fail(e, MV_ERR_IO, "cannot write to standard output: %s", strerror(werr));
        goto out;
    }
    if (fd.bad)
        fprintf(stderr, "mvembed: %s: %zu unreadable manifest line%s skipped (a line torn by a crash, or one "
                "being written)\n", out_dir, fd.bad, fd.bad == 1 ? "" : "s");
    rc = n_unsaid > 0;
    if (n_unsaid)
        mv_fail(e, MV_ERR_USAGE, "%s: %zu failed input%s left out of this list: %s name%s a newline, which "
                "one name a line cannot say; `mvembed manifest failed OUT -0` lists every one", out_dir, n_unsaid,
                n_unsaid == 1 ? "" : "s", n_unsaid == 1 ? "its" : "their", n_unsaid == 1 ? " holds" : "s hold");
out:
    mv_hashset_free(&printed);
    mv_manifest_list_free(names, nn);
    folded_free(&fd);
    if (werr)
        errno = werr; /* EPIPE: the caller tells a reader gone from a full disk */
    return rc;
}
