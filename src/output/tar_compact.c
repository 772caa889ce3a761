/* tar_compact.c - `mvembed manifest compact` for the tar layout (see mv_tar_resume.h): shards with
 * dead samples (an input redone since has a newer sample elsewhere) are rewritten without them,
 * so that a reader of the shards sees each input once; a damaged shard no live line points into
 * is removed. Each step atomic: live samples are copied into new shards (new numbers: tar_out.c),
 * each manifest naming a moved sample is rewritten (temp file, fsync, rename; its older lines
 * naming a removed sample dropped: "newer" over every manifest, as merge), then --pool mean's
 * indexes (pooled.jsonl) likewise, or removed when they name a sample that is gone, then the old
 * shards go. A crash leaves the old shards (the copies, dead, go at the next compact) or dead old
 * shards. Shards with orphans (an input with no line, adopted by the next run) and shards a
 * writer holds stay. Not here: the rewriting of the manifests and pooled indexes
 * (tar_compact_rewrite.c), the manifest's own compaction (manifest_merge.c). */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "mv_tar_resume.h"
#include "tar_compact_int.h"

#include "mv_hashset.h"
#include "mv_names.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What OUT's manifests say: live = the samples the newest line of an input, over every manifest
 * (mv_line_order_cmp, as merge), names; lined = the inputs with any line; held = the shards of
 * the live samples. While reading: latest (input -> 1 + index into newest). */
typedef struct {
    mv_hashset live, lined, held, latest;
    struct newest {
        char *id; /* "shard/key" of its newest line (an ok line), else NULL */
        mv_line_order ord;
    } *newest;
    size_t n, cap;
    uint64_t pos;
} liveness;

/* Enters (add) or finds input's keys in L->lined: its path once normalised (mv_line_input_key;
 * a base64 name as it is) and the regular file it reaches now (device, inode), so that a sample
 * of "in/a.jpg" is dead once "/abs/in/a.jpg" has a newer line (mv_line_stale's rule). find: 1
 * when found; add: 0, or -1 when out of memory. */
static int lined_key(liveness *L, const char *input, int b64, int add)
{
    size_t kl = strlen(input);
    char *k = b64 ? NULL : mv_line_input_key(input, kl, &kl);
    if (!b64 && !k)
        return add ? -1 : 0; /* not found: the shard stays as it is */
    struct stat sb;
    dev_t id[2] = {0, 0};
    int has_id = !b64 && stat(input, &sb) == 0 && S_ISREG(sb.st_mode), r;
    if (has_id)
        id[0] = sb.st_dev, id[1] = sb.st_ino;
    const char *key = k ? k : input;
    if (add)
        r = mv_hashset_add(&L->lined, key, kl, NULL) &&
                    (!has_id || mv_hashset_add(&L->lined, id, sizeof id, NULL)) ? 0 : -1;
    else
        r = mv_hashset_find(&L->lined, key, kl) || (has_id && mv_hashset_find(&L->lined, id, sizeof id));
    free(k);
    return r;
}

/* Reads one manifest's lines into L: each input's newest line so far, over the manifests read. */
static mv_status read_liveness(const char *path, liveness *L, mv_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    mv_status st = MV_OK;
    while (!st && (len = getline(&line, &lcap, f)) > 0) {
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)len, 0, &jerr), *in = json_object_get(o, "input");
        json_t *b64 = json_object_get(o, "input_b64");
        const char *key = json_is_string(b64) ? json_string_value(b64) : json_string_value(in);
        char id[600];
        size_t idl = json_is_object(o) && json_is_string(json_object_get(o, "status")) &&
                     !strcmp(json_string_value(json_object_get(o, "status")), "ok")
                         ? mv_tar_sample_id(o, id, sizeof id) : 0;
        mv_hashset_entry *en = key ? mv_hashset_add(&L->latest, key, strlen(key), NULL) : NULL;
        struct newest nw = {.id = idl ? strdup(id) : NULL}, *nv;
        mv_line_order_of(o, L->pos++, &nw.ord);
        if (en && !en->value && L->n == L->cap) {
            size_t nc = L->cap ? L->cap * 2 : 1024;
            if ((nv = realloc(L->newest, nc * sizeof *nv)))
                L->newest = nv, L->cap = nc;
            else
                en = NULL;
        }
        if (key && (!en || lined_key(L, key, json_is_string(b64), 1) || (idl && !nw.id)))
            st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        else if (en && (!en->value || mv_line_order_cmp(&nw.ord, &L->newest[en->value - 1].ord) >= 0)) {
            if (!en->value)
                L->newest[(en->value = ++L->n) - 1].id = NULL;
            nv = &L->newest[en->value - 1];
            char *old = nv->id;
            *nv = nw;
            nw.id = old;
        }
        free(nw.id);
        json_decref(o);
    }
    if (!st && ferror(f)) /* a read error is not the file's end: the lines after it hold live samples */
        st = mv_fail(e, MV_ERR_IO, "%s: cannot read the manifest: %s", path, strerror(errno ? errno : EIO));
    free(line);
    fclose(f);
    return st;
}

/* Once every manifest is read (st: how that went): the newest lines' samples into L->live,
 * their shards into L->held. */
static mv_status settle_liveness(liveness *L, mv_status st, mv_err *e)
{
    for (size_t i = 0; i < L->n; i++) {
        const char *id = L->newest[i].id;
        if (!st && id && (!mv_hashset_add(&L->live, id, strlen(id), NULL) ||
                          !mv_hashset_add(&L->held, id, strcspn(id, "/"), NULL)))
            st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
        free(L->newest[i].id);
    }
    free(L->newest);
    mv_hashset_free(&L->latest);
    return st;
}

/* One sample of a shard, as the first pass found it. */
typedef struct {
    char key[100];
    int live;
} sample;

/* First pass over the shard open as fd: its samples (key, live) into *smp, and how many are dead
 * (the input has a newer sample) and orphans (the input has no line). -1 when unreadable. */
static int survey(int fd, const char *name, const liveness *L, sample **smp, size_t *n, size_t *dead,
                  size_t *orphans)
{
    struct archive *a = archive_read_new();
    if (!a)
        return -1;
    archive_read_support_format_tar(a);
    int rc = archive_read_open_fd(a, fd, 1 << 16) == ARCHIVE_OK ? 0 : -1, r = ARCHIVE_OK;
    size_t cap = 0;
    struct archive_entry *en;
    while (!rc && (r = archive_read_next_header(a, &en)) == ARCHIVE_OK) {
        const char *m = archive_entry_pathname(en);
        size_t ml = m ? strlen(m) : 0, sz = (size_t)archive_entry_size(en);
        if (ml < 6 || ml - 5 >= sizeof smp[0]->key || strcmp(m + ml - 5, ".json") || sz > (1 << 24))
            continue; /* the .npy members: their data is skipped */
        char *js = malloc(sz + 1);
        json_error_t jerr;
        json_t *o = NULL;
        if (!js || archive_read_data(a, js, sz) != (la_ssize_t)sz ||
            !(o = json_loadb(js, sz, 0, &jerr))) {
            rc = -1;
        } else if (*n == cap && !(*smp = realloc(*smp, (cap = cap ? cap * 2 : 256) * sizeof **smp))) {
            rc = -1;
        } else {
            sample *s = &(*smp)[(*n)++];
            snprintf(s->key, sizeof s->key, "%.*s", (int)(ml - 5), m);
            char id[600];
            snprintf(id, sizeof id, "%s/%s", name, s->key);
            json_t *b64 = json_object_get(o, "input_b64"), *in = json_object_get(o, "input");
            const char *input = json_is_string(b64) ? json_string_value(b64) : json_string_value(in);
            s->live = mv_hashset_find(&L->live, id, strlen(id)) != NULL;
            if (!s->live && input && lined_key((liveness *)L, input, json_is_string(b64), 0))
                (*dead)++;
            else if (!s->live)
                (*orphans)++;
        }
        json_decref(o);
        free(js);
    }
    if (!rc && r != ARCHIVE_EOF)
        rc = -1;
    archive_read_free(a);
    return rc;
}

/* The commit of the copies' shard: their new lines, in the order they were added. */
typedef struct {
    char *text;
    size_t len;
} collected;

static mv_status collect(void *ud, const char *text, size_t len, mv_err *e)
{
    collected *c = ud;
    char *nt = realloc(c->text, c->len + len + 1);
    if (!nt)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    memcpy(nt + c->len, text, len);
    c->len += len;
    nt[c->len] = 0;
    c->text = nt;
    return MV_OK;
}

/* Second pass: copies the live samples of the shard open as fd into a new shard of set S. */
static mv_status copy_live(int fd, const char *path, const sample *smp, size_t n, mv_tar_set *S, mv_err *e)
{
    struct archive *a = archive_read_new();
    if (!a)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    archive_read_support_format_tar(a);
    mv_status st = MV_OK;
    if (lseek(fd, 0, SEEK_SET) != 0 || archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK)
        st = mv_fail(e, MV_ERR_IO, "%s: cannot read it again", path);
    mv_tar_shard *sh = NULL;
    uint8_t *npy = NULL;
    size_t npy_len = 0, i = 0;
    struct archive_entry *en;
    while (!st && archive_read_next_header(a, &en) == ARCHIVE_OK) {
        const char *m = archive_entry_pathname(en);
        size_t ml = strlen(m), sz = (size_t)archive_entry_size(en);
        while (i < n && !smp[i].live)
            i++;
        if (i == n)
            break;
        size_t kl = strlen(smp[i].key);
        if (ml != kl + 4 + (ml > kl + 4) || strncmp(m, smp[i].key, kl))
            continue; /* a dead sample's members */
        uint8_t *buf = malloc(sz + 1);
        if (!buf || archive_read_data(a, buf, sz) != (la_ssize_t)sz) {
            free(buf);
            st = mv_fail(e, MV_ERR_IO, "%s: %s: unreadable", path, m);
        } else if (!strcmp(m + kl, ".npy")) {
            free(npy);
            npy = buf;
            npy_len = sz;
        } else if (!strcmp(m + kl, ".json") && npy && npy_len >= 10) {
            buf[sz] = 0;
            while (sz && buf[sz - 1] == '\n')
                buf[--sz] = 0;
            size_t hdr = 10 + (size_t)(npy[8] | npy[9] << 8);
            st = hdr <= npy_len ? mv_tar_add_copy(S, &sh, npy, npy_len, hdr, (char *)buf, e)
                                : mv_fail(e, MV_ERR_FORMAT, "%s: %s: not an NPY v1.0 member", path, m);
            free(buf);
            free(npy);
            npy = NULL;
            i++;
        } else
            free(buf);
    }
    free(npy);
    archive_read_free(a);
    if (st) {
        mv_tar_abandon(sh);
        return st;
    }
    return mv_tar_close(S, sh, e);
}

/* Enters the copies of the live samples of old shard name (smp, in order) from their new lines. */
static mv_status note_moves(moves *M, const char *name, const sample *smp, size_t n, const collected *c,
                            mv_err *e)
{
    const char *p = c->text;
    for (size_t i = 0; i < n; i++) {
        if (!smp[i].live)
            continue;
        const char *nl = p ? strchr(p, '\n') : NULL;
        json_error_t jerr;
        json_t *o = nl ? json_loadb(p, (size_t)(nl - p), 0, &jerr) : NULL;
        json_t *js = json_object_get(o, "shard"), *jk = json_object_get(o, "key"), *jo = json_object_get(o, "offset");
        char id[600];
        snprintf(id, sizeof id, "%s/%s", name, smp[i].key);
        mv_hashset_entry *en = json_is_string(js) && json_is_string(jk) && json_is_integer(jo)
                                   ? mv_hashset_add(&M->ids, id, strlen(id), NULL) : NULL;
        if (en && M->n == M->cap) {
            struct moved *nt = realloc(M->to, (M->cap = M->cap ? M->cap * 2 : 256) * sizeof *nt);
            if (!nt)
                en = NULL;
            else
                M->to = nt;
        }
        if (!en) {
            json_decref(o);
            return mv_fail(e, MV_ERR_NOMEM, "%s: the copy of %s: no record, or out of memory", name, smp[i].key);
        }
        struct moved *mv = &M->to[M->n];
        en->value = ++M->n;
        snprintf(mv->shard, sizeof mv->shard, "%s", json_string_value(js));
        snprintf(mv->key, sizeof mv->key, "%s", json_string_value(jk));
        snprintf(mv->offset, sizeof mv->offset, "%lld", (long long)json_integer_value(jo));
        json_decref(o);
        if (!mv_hashset_add(&M->made, mv->shard, strlen(mv->shard), NULL))
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
        p = nl + 1;
    }
    return MV_OK;
}

mv_status mv_tar_compact_dir(const char *out_dir, int quiet, mv_err *e)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return mv_fail(e, MV_ERR_IO, "%s: cannot list the output directory: %s", out_dir, strerror(errno));
    liveness L = {0};
    moves M = {0};
    mv_status st = MV_OK;
    struct dirent *de;
    char path[4400];
    while (!st && (de = readdir(d)) != NULL)
        if (mv_name_is_manifest(de->d_name)) {
            snprintf(path, sizeof path, "%s/%s", out_dir, de->d_name);
            st = read_liveness(path, &L, e);
        }
    st = settle_liveness(&L, st, e); /* frees what reading kept, in any case */
    char **gone = NULL; /* old shards to remove once the manifests name the copies */
    size_t n_gone = 0, n_dead = 0, n_rewritten = 0, n_bad = 0;
    rewinddir(d);
    while (!st && (de = readdir(d)) != NULL) {
        int k, n;
        if (!mv_name_tar_shard_naming(de->d_name, &k, &n) || mv_hashset_find(&M.made, de->d_name, strlen(de->d_name)))
            continue; /* not a shard, or a copy this compact made (a directory listing may show it) */
        snprintf(path, sizeof path, "%s/%s", out_dir, de->d_name);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
        if (fd < 0 || (fcntl(fd, F_OFD_SETLK, &fl) != 0 && (errno == EAGAIN || errno == EACCES))) {
            if (fd >= 0)
                close(fd); /* a writer's, its lines not yet in */
            continue;
        }
        sample *smp = NULL;
        size_t ns = 0, dead = 0, orphans = 0, live = 0;
        int bad = survey(fd, de->d_name, &L, &smp, &ns, &dead, &orphans) != 0;
        /* unreadable (damaged) with no live sample in it: nothing of it is read again, nor
         * adopted (tar_resume.c reads a shard whole) */
        int gone_bad = bad && !orphans && !mv_hashset_find(&L.held, de->d_name, strlen(de->d_name));
        n_bad += gone_bad;
        if ((!bad && dead && !orphans) || gone_bad) {
            for (size_t i = 0; i < ns; i++)
                live += smp[i].live;
            mv_tar_set *S = NULL;
            collected c = {0};
            if (live && !(st = mv_tar_set_open(out_dir, k, n, 1LL << 62, 0, collect, &c, &S, e)) &&
                !(st = copy_live(fd, path, smp, ns, S, e)))
                st = note_moves(&M, de->d_name, smp, ns, &c, e);
            mv_tar_set_free(S);
            free(c.text);
            char **ng = st ? NULL : realloc(gone, (n_gone + 1) * sizeof *ng);
            if (ng && (ng[n_gone] = strdup(de->d_name))) {
                gone = ng;
                n_gone++;
                n_dead += dead;
                n_rewritten += live > 0;
            } else if (!st)
                st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
        }
        free(smp);
        close(fd);
    }
    mv_hashset gs = {0}; /* the old shards, by name */
    for (size_t i = 0; !st && i < n_gone; i++)
        if (!mv_hashset_add(&gs, gone[i], strlen(gone[i]), NULL))
            st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
    rewinddir(d);
    while (!st && n_gone && (de = readdir(d)) != NULL)
        if (mv_name_is_manifest(de->d_name)) {
            snprintf(path, sizeof path, "%s/%s", out_dir, de->d_name);
            st = mv_tar_rewrite_manifest(out_dir, path, &M, &gs, e);
        }
    rewinddir(d);
    char stem[300];
    int old;
    while (!st && n_gone && (de = readdir(d)) != NULL)
        if (mv_tar_pooled_stem(de->d_name, stem, sizeof stem, &old))
            st = mv_tar_fix_pooled(out_dir, stem, old, &M, &gs, quiet, e);
    mv_hashset_free(&gs);
    closedir(d);
    for (size_t i = 0; i < n_gone; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, gone[i]);
        if (!st && unlink(path) != 0)
            st = mv_fail(e, MV_ERR_IO, "%s: cannot remove it: %s", path, strerror(errno));
        free(gone[i]);
    }
    free(gone);
    char bads[80] = "";
    if (n_bad)
        snprintf(bads, sizeof bads, " (%zu of them unreadable, damaged, with no live sample)", n_bad);
    if (!st && !quiet && n_gone)
        fprintf(stderr, "mvembed: compacted shards: %zu dead samples (inputs redone since) removed, %zu "
                "shards rewritten, %zu removed%s\n", n_dead, n_rewritten, n_gone - n_rewritten, bads);
    mv_hashset_free(&L.live);
    mv_hashset_free(&L.lined);
    mv_hashset_free(&L.held);
    mv_hashset_free(&M.ids);
    mv_hashset_free(&M.at);
    mv_hashset_free(&M.made);
    free(M.to);
    return st;
}
