/* pool_dirs.c - OUT's pooled directories (see mv_pool.h), kept tidy: a pooled directory removed
 * (pooled/, pooled-KKKKK-of-NNNNN/, or the older pooled.npy + pooled.jsonl pair), OUT's pooled
 * directories listed, and those whose rows a later run replaced found (their index checked
 * against OUT's manifests) and removed. Not here: building a pooled directory and putting it in
 * place (pool.c), which calls the stale check under OUT's index lock.
 */
#include "mv_pool.h"
#include "pool_int.h"
#include "mv_names.h"
#include "mv_hashset.h"
#include "mv_output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes dir with the files the pooled directory holds (pooled.npy, pooled.jsonl): 0, or -1. */
int mv_pool_remove_dir(const char *dir)
{
    char p[4600];
    static const char *const names[] = {"pooled.npy", "pooled.jsonl"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

void mv_pool_sweep_temps(const char *out_dir, int locked)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char p[4400];
        const char *kind;
        struct stat sb;
        long pid = mv_output_temp_name(de->d_name, &kind);
        if (pid < 0 || strncmp(kind, "pooled", 6) != 0 || pid == (long)getpid() ||
            fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode) ||
            !mv_output_temp_gone(&sb, pid, locked ? MV_TEMP_WRITER_DEAD : MV_TEMP_WRITER_UNKNOWN))
            continue;
        snprintf(p, sizeof p, "%s/%s", out_dir, de->d_name);
        mv_pool_remove_dir(p); /* best effort: one left is tried again by the next rebuild */
    }
    closedir(d);
}

int mv_pool_remove(const char *out_dir, const char *stem)
{
    char fin[4400];
    snprintf(fin, sizeof fin, "%s/%s", out_dir, stem);
    struct stat sb;
    if (lstat(fin, &sb) != 0)
        return 0;
    return mv_pool_remove_dir(fin) == 0 && mv_sync_dir(out_dir, NULL) == MV_OK ? 1 : -1;
}

int mv_pool_remove_old(const char *out_dir, const char *stem)
{
    char npy[4400], idx[4400];
    snprintf(npy, sizeof npy, "%s/%s.npy", out_dir, stem);
    snprintf(idx, sizeof idx, "%s/%s.jsonl", out_dir, stem);
    struct stat a, b;
    if (lstat(npy, &a) != 0 || lstat(idx, &b) != 0 || !S_ISREG(a.st_mode) || !S_ISREG(b.st_mode))
        return 0;
    return unlink(idx) == 0 && unlink(npy) == 0 && mv_sync_dir(out_dir, NULL) == MV_OK ? 1 : -1;
}

/* out_dir/<stem>/pooled.jsonl's lines as a set (free with mv_done_free), or NULL when it cannot
 * be read or memory runs out. */
static mv_done *load_index(const char *out_dir, const char *stem)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s/pooled.jsonl", out_dir, stem);
    mv_done *P;
    mv_err e;
    if (mv_done_create(&P, &e))
        return NULL;
    if (mv_manifest_load_done(p, P, NULL, NULL, &e)) {
        mv_done_free(P);
        return NULL;
    }
    return P;
}

/* 1 when every row that out_dir/<stem>/pooled.jsonl lists is still its input's newest ok line in
 * D (the same manifest line: run and seq; for lines without them the same fingerprint, output
 * and offset) and no input it lists as failed (row null) has an ok newest line in D now (a
 * retry made it ok: a reader would miss its row), 0 when one is not, -1 when the index cannot
 * be read. */
static int dir_current(const char *out_dir, const char *stem, const mv_done *D)
{
    mv_done *P = load_index(out_dir, stem);
    if (!P)
        return -1;
    int cur = 1;
    for (size_t i = 0; cur && i < mv_done_inputs(P); i++) {
        const char *input;
        mv_done_sample ps, ds;
        mv_done_owner w;
        if (!mv_done_entry(P, i, &input, &ps))
            continue; /* left out: no row */
        /* a row listed by its path from / (pool.c add_taken: no line names it so) is found so */
        cur = mv_done_sample_of(D, input, input[0] == '/' ? input : NULL, &ds) && !strcmp(ps.model, ds.model) &&
              ds.output &&
              (ds.tar || (mv_done_owner_of(D, ds.output, &w) && !strcmp(w.input, input)));
        if (cur && ps.ord.run[0] && ds.ord.run[0])
            cur = !strcmp(ps.ord.run, ds.ord.run) && ps.ord.seq == ds.ord.seq;
        else if (cur)
            cur = ps.output && !strcmp(ps.output, ds.output) && ps.offset == (ds.tar ? ds.offset : -1);
    }
    for (size_t i = 0; cur && i < mv_done_inputs(D); i++) {
        const char *input;
        mv_done_sample ds;
        if (mv_done_entry(D, i, &input, &ds) && mv_done_error(P, input))
            cur = 0; /* listed as failed, ok now */
    }
    mv_done_free(P);
    return cur;
}

/* 1 when name is a pooled directory's (mv_name_pooled_dir: *k, *n) */
static int pooled_name(const char *name, int *k, int *n) { return mv_name_pooled_dir(name, strlen(name), k, n); }

/* Adds to rows (rows != NULL) the rows out_dir/<stem>/pooled.jsonl lists, each as its sample (the
 * output, a NUL, its offset), or (rows NULL) says whether one of them is in in: 1, 0, or -1 when
 * the index cannot be read or memory runs out. Of two current directories, one input's row names
 * one sample, its newest line's, and two inputs never share one. */
static int dir_rows(const char *out_dir, const char *stem, mv_hashset *rows, const mv_hashset *in)
{
    mv_done *P = load_index(out_dir, stem);
    if (!P)
        return -1;
    int r = 0;
    for (size_t i = 0; !r && i < mv_done_inputs(P); i++) {
        const char *input;
        mv_done_sample ps;
        if (!mv_done_entry(P, i, &input, &ps) || !ps.output)
            continue; /* left out: no row */
        char key[4400];
        int kl = snprintf(key, sizeof key, "%s%c%lld", ps.output, 0, (long long)ps.offset);
        if (kl < 0 || (size_t)kl >= sizeof key)
            continue;
        if (rows ? !mv_hashset_add(rows, key, (size_t)kl, NULL) : 0)
            r = -1;
        else if (!rows && mv_hashset_find(in, key, (size_t)kl))
            r = 1;
    }
    mv_done_free(P);
    return r;
}

/* Removes each pooled directory of out_dir but keep (may be NULL) whose rows are not current
 * (dir_current), calling removed(its name, NULL, ud) for each; keep being a shard's
 * (pooled-KKKKK-of-NNNNN, N > 1), also each shard's of another count M > 1 that holds a row keep
 * holds (an array resubmitted with another N: the old N's rows are in keep's now, and a reader of
 * every shard's directory would read them twice), calling removed(its name, keep, ud). Those of
 * the other kind (pooled/ and a shard's: an unsharded run's and an array's in one OUT) holding a
 * row keep holds stay, counted in c->beside (the first by name in c->beside_first). */
mv_status mv_pool_drop_stale(const char *out_dir, const char *keep, const mv_done *D,
                              void (*removed)(const char *, const char *, void *), void *ud, mv_pool_counts *c,
                              mv_err *e)
{
    DIR *dd = opendir(out_dir);
    if (!dd)
        return mv_fail(e, MV_ERR_IO, "%s: %s", out_dir, strerror(errno));
    struct dirent *de;
    mv_status st = MV_OK;
    int k, n, kk = 0, kn = 0;
    mv_hashset kept = {0}; /* keep's rows */
    if (keep && pooled_name(keep, &kk, &kn) && dir_rows(out_dir, keep, &kept, NULL) < 0)
        kn = -1; /* unread: nothing is removed or counted for it */
    while (!st && (de = readdir(dd))) {
        if (!pooled_name(de->d_name, &k, &n) || (keep && !strcmp(de->d_name, keep)))
            continue;
        int cur = dir_current(out_dir, de->d_name, D);
        const char *by = NULL;
        int shared = cur && keep && kn >= 0 && n != kn && dir_rows(out_dir, de->d_name, NULL, &kept) == 1;
        if (shared && kn > 1 && n > 1)
            by = keep;
        else if (cur) {
            if (shared && c && (!c->beside++ || strcmp(de->d_name, c->beside_first) < 0))
                snprintf(c->beside_first, sizeof c->beside_first, "%s", de->d_name);
            continue;
        }
        char fin[4400];
        snprintf(fin, sizeof fin, "%s/%s", out_dir, de->d_name);
        if (mv_pool_remove_dir(fin) != 0)
            st = mv_fail(e, MV_ERR_IO, "%s: %s, and it cannot be removed: %s", fin,
                         by ? "its rows are in another shard count's directory" : "its rows were replaced",
                         strerror(errno));
        else if (!(st = mv_sync_dir(out_dir, e)) && removed)
            removed(de->d_name, by, ud);
    }
    mv_hashset_free(&kept);
    closedir(dd);
    return st;
}

int mv_pool_dirs(const char *out_dir, int (*drop)(const char *stem, int k, int n, void *ud), void *ud)
{
    DIR *dd = opendir(out_dir);
    struct dirent *de;
    int count = 0, k, n;
    while (dd && (!count || drop) && (de = readdir(dd)))
        if (pooled_name(de->d_name, &k, &n) && ++count && drop && drop(de->d_name, k, n, ud))
            mv_pool_remove(out_dir, de->d_name);
    if (dd)
        closedir(dd);
    return count;
}
