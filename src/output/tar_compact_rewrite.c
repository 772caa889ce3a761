/* tar_compact_rewrite.c - `mvembed manifest compact` for the tar layout, its rewrites (see
 * tar_compact_int.h): once live samples are copied into new shards, each manifest line naming a
 * moved sample is pointed at its copy and the lines naming a dead sample of a shard that goes
 * are dropped, then --pool mean's indexes (pooled.jsonl) are pointed likewise, or removed when
 * they name a sample that is gone; each through a temp file (locked as output.c's are), fsync,
 * rename. Not here: which samples are live, the copies, removing old shards (tar_compact.c).
 */
#include "mv_tar_resume.h"
#include "tar_compact_int.h"

#include "mv_names.h"
#include "mv_output.h"
#include "mv_place.h"
#include "mv_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Opens temp file tmp (our pid names it: ours) into *w, locked as output.c's temp files are. */
static mv_status open_temp(const char *tmp, FILE **w, mv_err *e)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    *w = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!*w) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(err));
    }
    mv_output_lock_temp(fd);
    return MV_OK;
}

/* Ends a rewrite through tmp (w: NULL when it could not be opened; st: the status so far):
 * flush, fsync, close, then tmp renamed over path when keep, else removed. */
static mv_status close_temp(FILE *w, const char *tmp, const char *path, int keep, mv_status st, mv_err *e)
{
    if (w && !st && (fflush(w) || fsync(fileno(w))))
        st = mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (w && fclose(w) && !st)
        st = mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (!st && keep && rename(tmp, path) != 0)
        st = mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", path, tmp, strerror(errno));
    if (st || !keep)
        unlink(tmp);
    return st;
}

/* Rewrites manifest path (in out_dir) with the moved samples' lines pointing at their copies, and
 * without the lines naming a dead sample of a shard that goes (gs: older than their input's newest
 * line in another manifest); nothing when no line names either. Temp file ".tmp-<pid>-manifest.jsonl", locked as output.c's
 * temp files are, fsync, rename, fsync of out_dir. */
static mv_status rewrite_held(const char *out_dir, const char *path, moves *M, const mv_hashset *gs, mv_err *e);

mv_status mv_tar_rewrite_manifest(const char *out_dir, const char *path, moves *M, const mv_hashset *gs,
                                  mv_err *e)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-manifest.jsonl", out_dir, (long)getpid());
    mv_place_guard_begin(tmp); /* a signal meanwhile removes the temp file */
    mv_status st = rewrite_held(out_dir, path, M, gs, e);
    mv_place_guard_end();
    return st;
}

static mv_status rewrite_held(const char *out_dir, const char *path, moves *M, const mv_hashset *gs, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-manifest.jsonl", out_dir, (long)getpid());
    FILE *w;
    mv_status st = open_temp(tmp, &w, e);
    if (st) {
        fclose(f);
        return st;
    }
    char *line = NULL;
    size_t lcap = 0, changed = 0;
    ssize_t len;
    while (!st && (len = getline(&line, &lcap, f)) > 0) {
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)len, 0, &jerr);
        char id[600];
        size_t idl = json_is_object(o) ? mv_tar_sample_id(o, id, sizeof id) : 0;
        json_t *jo = json_object_get(o, "offset");
        long long off = json_is_integer(jo) ? (long long)json_integer_value(jo) : -1;
        json_decref(o);
        const mv_hashset_entry *en = idl ? mv_hashset_find(&M->ids, id, idl) : NULL;
        int drop = idl && !en && mv_hashset_find(gs, id, strcspn(id, "/"));
        changed += drop;
        char *a = NULL, *b = NULL, *c = NULL, *d = NULL, at[640];
        int atl = en ? snprintf(at, sizeof at, "%.*s\n%lld", (int)strcspn(id, "/"), id, off) : 0;
        mv_hashset_entry *ae = en && off >= 0 ? mv_hashset_add(&M->at, at, (size_t)atl, NULL) : NULL;
        if (ae)
            ae->value = en->value;
        else if (en && off >= 0)
            st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        if (en && !st) {
            const struct moved *mv = &M->to[en->value - 1];
            a = mv_tar_record_set(line, "output", mv->shard, 0);
            b = a ? mv_tar_record_set(a, "shard", mv->shard, 0) : NULL;
            c = b ? mv_tar_record_set(b, "key", mv->key, 0) : NULL;
            d = c ? mv_tar_record_set(c, "offset", mv->offset, 1) : NULL;
            if (!d)
                st = mv_fail(e, MV_ERR_FORMAT, "%s: a line naming %s lacks a field to move", path, id);
            changed++;
        }
        if (!st && !drop && fputs(d ? d : line, w) == EOF)
            st = mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
        free(a);
        free(b);
        free(c);
        free(d);
    }
    if (!st && ferror(f)) /* a read error is not the file's end: never a manifest cut there */
        st = mv_fail(e, MV_ERR_IO, "%s: cannot read the manifest: %s", path, strerror(errno ? errno : EIO));
    free(line);
    fclose(f);
    st = close_temp(w, tmp, path, changed > 0, st, e);
    if (!st && changed && mv_sync_dir(out_dir, NULL))
        st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", out_dir, strerror(errno));
    return st;
}

/* --pool mean's index of stem (OUT/<stem>/pooled.jsonl, or beside: OUT/<stem>.jsonl when old)
 * names tar samples by shard ("output") and "offset": each line naming a moved sample is pointed
 * at its copy (pooled.npy's rows stay: the same bytes), through a temp file in OUT, fsync,
 * rename. A line naming a removed shard at no moved sample (an index stale already) cannot be
 * mended: the index and its array are removed, and standard error says so. */
mv_status mv_tar_fix_pooled(const char *out_dir, const char *stem, int old, const moves *M,
                            const mv_hashset *gone, int quiet, mv_err *e)
{
    char path[4600], tmp[4400], dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", out_dir, old ? "." : stem);
    snprintf(path, sizeof path, old ? "%s/%s.jsonl" : "%s/%s/pooled.jsonl", out_dir, stem);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-pooled.jsonl", out_dir, (long)getpid());
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? MV_OK : mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    mv_place_guard_begin(tmp);
    FILE *w;
    mv_status st = open_temp(tmp, &w, e);
    char *line = NULL, *a = NULL, *b = NULL;
    size_t lcap = 0, changed = 0, stale = 0;
    ssize_t len;
    while (!st && !stale && (len = getline(&line, &lcap, f)) > 0) {
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)len, 0, &jerr);
        json_t *jp = json_object_get(o, "output"), *jo = json_object_get(o, "offset");
        const char *sh = json_string_value(jp);
        char at[640];
        int atl = sh && json_is_integer(jo) && mv_hashset_find(gone, sh, strlen(sh))
                      ? snprintf(at, sizeof at, "%s\n%lld", sh, (long long)json_integer_value(jo)) : 0;
        json_decref(o);
        const mv_hashset_entry *en = atl > 0 ? mv_hashset_find(&M->at, at, (size_t)atl) : NULL;
        const struct moved *mv = en ? &M->to[en->value - 1] : NULL;
        a = mv ? mv_tar_record_set(line, "output", mv->shard, 0) : NULL;
        b = a ? mv_tar_record_set(a, "offset", mv->offset, 1) : NULL;
        stale = atl && !b; /* names a removed shard, at no sample that moved */
        changed += b != NULL;
        if (!stale && fputs(b ? b : line, w) == EOF)
            st = mv_fail(e, MV_ERR_IO, "%s: %s", tmp, strerror(errno));
        free(a);
        free(b);
    }
    if (!st && !stale && ferror(f)) /* a read error is not the file's end: never an index cut there */
        st = mv_fail(e, MV_ERR_IO, "%s: cannot read it: %s", path, strerror(errno ? errno : EIO));
    free(line);
    fclose(f);
    st = close_temp(w, tmp, path, !stale && changed, st, e);
    mv_place_guard_end();
    if (!st && stale && (old ? mv_pool_remove_old(out_dir, stem) : mv_pool_remove(out_dir, stem)) < 0)
        st = mv_fail(e, MV_ERR_IO, "%s: cannot remove it: %s", old ? path : dir, strerror(errno));
    else if (!st && stale && !quiet)
        fprintf(stderr, "mvembed: %s%s removed: it indexed samples of shards compact removed (a run "
                "with --pool mean over the same inputs writes it again)\n", old ? path : dir, old ? "" : "/");
    else if (!st && changed && !stale) {
        if (mv_sync_dir(dir, NULL))
            st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", dir, strerror(errno));
        else if (!quiet)
            fprintf(stderr, "mvembed: %s: %zu line%s now name%s the copies of moved samples\n", path, changed,
                    changed == 1 ? "" : "s", changed == 1 ? "s" : "");
    }
    return st;
}

/* The pooled index stem names in OUT (pooled, pooled-KKKKK-of-NNNNN; *old: the .jsonl beside the
 * outputs that earlier builds wrote); 0 when name is none. */
int mv_tar_pooled_stem(const char *name, char *stem, size_t cap, int *old)
{
    int k, n;
    size_t l = strlen(name);
    *old = l > 6 && !strcmp(name + l - 6, ".jsonl");
    size_t sl = *old ? l - 6 : l;
    snprintf(stem, cap, "%.*s", (int)sl, name);
    return mv_name_pooled_dir(name, sl, &k, &n);
}
