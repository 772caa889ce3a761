/* manifest_done.c - the resume set: the lines read back from a manifest (manifest_read.c) kept
 * in a set keyed by input (as written, and by its path from /) and by output name, which answers
 * "is this input done, which name does it hold, and does it still own that name"; and the checks
 * that a recorded output is still whole (size, zstd frame).
 * Not here: reading the lines (manifest_read.c), writing them (manifest.c), the naming rules
 * (names.c), merging manifests (manifest_merge.c).
 */
#include "manifest_done_int.h"

#include "mv_hashset.h"
#include "mv_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- resume set --------------------------------------------------------------------------- */

/* One entry per input met; three sets index the entries (their values are entry indexes + 1): by
 * input, by the input's path from / (mv_line_input_key of a line's input_abs or absolute input:
 * lines of one input written from different working directories are one entry), and by output
 * name. The sets own the strings; an entry's input and output point at their
 * keys, so "does this input still hold that name" is a pointer comparison. An entry's status is
 * its newest line's (ord); the name it holds, with its model and bytes, is its newest ok line's
 * (ok_ord), whatever order the lines were read in (mv_line_order_cmp). */
typedef struct {
    const char *input;  /* a key of the input set */
    const char *output; /* a key of the output set; NULL = ok without a usable output */
    char *odd_output;   /* a recorded output that is not a canonical name (owned; never followed) */
    char *error;        /* newest line an error: its "error" (owned), else NULL */
    char *planned;      /* the newest error line's planned_output that has one (owned), or NULL */
    char model[17];
    int64_t bytes;      /* -1 = not recorded */
    int64_t offset;     /* tar layout: the array data's offset in the shard; -1 = not recorded */
    mv_done_input_stat src; /* the input file as its newest ok line recorded it */
    int ok;             /* newest line ok */
    int had_ok;         /* some line ok: output, model, bytes and src are set */
    mv_line_order ord, ok_ord;
    int64_t data_len;   /* tar samples (mv_done_sample): -1 = not known */
    uint64_t xxh64;
    int has_xxh64, tar;
} done_ent;

struct mv_done {
    done_ent *ents;
    size_t n_ents, ents_cap, n_ok;
    uint64_t pos; /* lines read so far, over every manifest loaded */
    mv_hashset in, ids, out;
    /* tar paths as their members' lines spell them -> index + 1 in tar_ord: the order of the
     * newest member line, which may settle the tar's error line (mv_line_settles) */
    mv_hashset tars;
    mv_line_order *tar_ord;
    size_t tars_cap;
};

mv_status mv_done_create(mv_done **out, mv_err *e)
{
    *out = mv_calloc(1, sizeof **out);
    return *out ? MV_OK : mv_fail(e, MV_ERR_NOMEM, "resume set: out of memory");
}

void mv_done_free(mv_done *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_ents; i++) {
        free(d->ents[i].odd_output);
        free(d->ents[i].error);
        free(d->ents[i].planned);
    }
    free(d->ents);
    mv_hashset_free(&d->in);
    mv_hashset_free(&d->ids);
    mv_hashset_free(&d->out);
    mv_hashset_free(&d->tars);
    free(d->tar_ord);
    free(d);
}

/* The entry index + 1 that the path from / abs keys (0: none). key (may be NULL): receives abs's
 * key, malloc'd (NULL when out of memory), and *kl its length. */
static size_t id_find(const mv_done *d, const char *abs, char **key, size_t *kl)
{
    size_t l = 0;
    char *k = mv_line_input_key(abs, strlen(abs), &l);
    const mv_hashset_entry *s = k ? mv_hashset_find(&d->ids, k, l) : NULL;
    if (key) {
        *key = k;
        *kl = l;
    } else
        free(k);
    return s ? s->value : 0;
}

/* The entry of input (abs: its path from /, or NULL), made when new; when only abs is known, the
 * entry abs keys (input becomes one more name of it); NULL when out of memory. */
static done_ent *done_entry(mv_done *d, const char *input, const char *abs)
{
    size_t kl = 0, by_id = 0;
    char *key = NULL;
    mv_hashset_entry *is = mv_hashset_find(&d->in, input, strlen(input));
    size_t ix = is ? is->value : 0;
    if (abs && (by_id = id_find(d, abs, &key, &kl), !key))
        return NULL;
    if (key && ix != by_id) {
        if (!ix) { /* the same input, written from another working directory */
            if (!(is = mv_hashset_add(&d->in, input, strlen(input), NULL))) {
                free(key);
                return NULL;
            }
            is->value = ix = by_id;
        } else if (!by_id) { /* one more path from / of a known input */
            mv_hashset_entry *ks = mv_hashset_add(&d->ids, key, kl, NULL);
            if (!ks) {
                free(key);
                return NULL;
            }
            ks->value = ix;
        } /* else abs keys another input (a relative path met from two directories): ix's */
    }
    if (ix) {
        free(key);
        return &d->ents[ix - 1];
    }
    if (d->n_ents == d->ents_cap) {
        size_t nc = d->ents_cap ? d->ents_cap * 2 : 256;
        done_ent *ne = realloc(d->ents, nc * sizeof *ne);
        if (!ne) {
            free(key);
            return NULL;
        }
        d->ents = ne;
        d->ents_cap = nc;
    }
    /* a key added with value 0 (the next add failing) is found as none */
    mv_hashset_entry *ks = key ? mv_hashset_add(&d->ids, key, kl, NULL) : NULL;
    free(key);
    if ((abs && !ks) || !(is = mv_hashset_add(&d->in, input, strlen(input), NULL)))
        return NULL;
    done_ent *en = &d->ents[d->n_ents];
    memset(en, 0, sizeof *en);
    en->input = is->key;
    is->value = ++d->n_ents;
    if (ks)
        ks->value = is->value;
    return en;
}

/* A member line l: its order becomes its tar's newest member order when newer. -1 when out of
 * memory. */
static int tar_member_seen(mv_done *d, const done_line *l)
{
    size_t tl = mv_line_tar_of(l->input);
    if (!tl)
        return 0;
    int added;
    mv_hashset_entry *t = mv_hashset_add(&d->tars, l->input, tl, &added);
    if (!t)
        return -1;
    if (added) {
        if (d->tars.n > d->tars_cap) {
            size_t nc = d->tars_cap ? 2 * d->tars_cap : 64;
            mv_line_order *no = realloc(d->tar_ord, nc * sizeof *no);
            if (!no)
                return -1; /* t's value stays 0: found as none */
            d->tar_ord = no;
            d->tars_cap = nc;
        }
        t->value = d->tars.n;
        d->tar_ord[t->value - 1] = l->ord;
    } else if (t->value && mv_line_order_cmp(&l->ord, &d->tar_ord[t->value - 1]) > 0)
        d->tar_ord[t->value - 1] = l->ord;
    return 0;
}

static int done_set(mv_done *d, const done_line *l)
{
    if (l->member && tar_member_seen(d, l))
        return -1;
    done_ent *en = done_entry(d, l->input, l->abs);
    if (!en)
        return -1;
    if (!en->ord.pos || mv_line_order_cmp(&l->ord, &en->ord) > 0) { /* the newest line: status */
        if (en->ok && !l->ok)
            d->n_ok--;
        if (!en->ok && l->ok)
            d->n_ok++;
        en->ok = l->ok;
        en->ord = l->ord;
        /* the input as the newest line spells it (a name of this entry: done_entry added it) */
        const mv_hashset_entry *is = mv_hashset_find(&d->in, l->input, strlen(l->input));
        if (is && &d->ents[is->value - 1] == en)
            en->input = is->key;
        free(en->error);
        en->error = NULL;
        if (!l->ok && !(en->error = strdup(l->error ? l->error : "")))
            return -1;
        if (!l->ok && l->planned && !mv_name_flaw(l->planned)) {
            free(en->planned);
            if (!(en->planned = strdup(l->planned)))
                return -1;
        }
    }
    /* an error line keeps the name held: its file is still that input's */
    if (!l->ok || (en->had_ok && mv_line_order_cmp(&l->ord, &en->ok_ord) < 0))
        return 0;
    en->had_ok = 1;
    en->ok_ord = l->ord;
    snprintf(en->model, sizeof en->model, "%s", l->model);
    en->bytes = l->bytes;
    en->offset = l->offset;
    en->src = l->src;
    en->data_len = l->tp.data_len;
    en->xxh64 = l->tp.xxh64;
    en->has_xxh64 = l->tp.has_xxh64;
    en->tar = l->tp.tar;
    en->output = NULL;
    free(en->odd_output);
    en->odd_output = NULL;
    if (!l->output)
        return 0;
    if (mv_name_flaw(l->output)) /* kept for mv_done_lookup, never held nor followed */
        return (en->odd_output = strdup(l->output)) ? 0 : -1;
    mv_hashset_entry *os = mv_hashset_add(&d->out, l->output, strlen(l->output), NULL);
    if (!os)
        return -1;
    os->value = (size_t)(en - d->ents) + 1;
    en->output = os->key;
    return 0;
}

int mv_done_record(mv_done *d, done_line *l)
{
    l->ord.pos = ++d->pos;
    return done_set(d, l);
}

const char *mv_done_lookup(const mv_done *d, const char *input)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->in, input, strlen(input));
    if (!s || !d->ents[s->value - 1].ok)
        return NULL;
    const done_ent *en = &d->ents[s->value - 1];
    return en->output ? en->output : en->odd_output ? en->odd_output : "";
}

size_t mv_done_count(const mv_done *d) { return d->n_ok; }

int64_t mv_done_offset(const mv_done *d, const char *input)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->in, input, strlen(input));
    return s && d->ents[s->value - 1].ok ? d->ents[s->value - 1].offset : -1;
}

size_t mv_done_inputs(const mv_done *d) { return d->n_ents; }

int mv_done_entry(const mv_done *d, size_t i, const char **input, mv_done_sample *smp)
{
    *input = d->ents[i].input;
    return mv_done_sample_of(d, d->ents[i].input, NULL, smp);
}

int mv_done_input_differs(const mv_done_input_stat *rec, const mv_done_input_stat *now)
{
    if (!now || rec->bytes < 0)
        return 0;
    int both_s = rec->has_mtime_s && now->has_mtime_s; /* mtimes past int64 nanoseconds: whole seconds */
    return now->bytes != rec->bytes ||
           (rec->has_mtime && now->has_mtime && (now->mtime_ns != rec->mtime_ns || (both_s && now->mtime_s != rec->mtime_s)));
}

int mv_done_sample_of(const mv_done *d, const char *input, const char *abs, mv_done_sample *smp)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->in, input, strlen(input));
    size_t ix = s ? s->value : abs ? id_find(d, abs, NULL, NULL) : 0;
    if (!ix || !d->ents[ix - 1].ok)
        return 0;
    const done_ent *en = &d->ents[ix - 1];
    smp->output = en->output ? en->output : en->odd_output;
    smp->model = en->model;
    smp->bytes = en->bytes;
    smp->offset = en->offset;
    smp->data_len = en->data_len;
    smp->has_xxh64 = en->has_xxh64;
    smp->xxh64 = en->xxh64;
    smp->tar = en->tar;
    smp->src = en->src;
    smp->ord = en->ok_ord;
    return 1;
}

const char *mv_done_error(const mv_done *d, const char *input)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->in, input, strlen(input));
    if (!s || d->ents[s->value - 1].ok)
        return NULL;
    const done_ent *en = &d->ents[s->value - 1];
    const mv_hashset_entry *t = mv_hashset_find(&d->tars, input, strlen(input)); /* a tar's line */
    return t && t->value && mv_line_settles(&d->tar_ord[t->value - 1], &en->ord) ? NULL : en->error;
}

void mv_done_layouts(const mv_done *d, size_t *n_files, size_t *n_tar, const char **ex_files,
                     const char **ex_tar)
{
    *n_files = *n_tar = 0;
    if (ex_files)
        *ex_files = NULL;
    if (ex_tar)
        *ex_tar = NULL;
    for (size_t i = 0; i < d->n_ents; i++) {
        const done_ent *en = &d->ents[i];
        if (!en->ok)
            continue;
        const char **ex = en->tar ? ex_tar : ex_files;
        if (ex && !*ex)
            *ex = en->input;
        (*(en->tar ? n_tar : n_files))++;
    }
}

int mv_done_owner_of(const mv_done *d, const char *output, mv_done_owner *w)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->out, output, strlen(output));
    if (!s)
        return 0;
    const done_ent *en = &d->ents[s->value - 1];
    if (en->output != s->key) /* that input's latest ok line named another output */
        return 0;
    w->input = en->input;
    w->model = en->model;
    w->bytes = en->bytes;
    w->ok = en->ok;
    w->run = en->ok_ord.run;
    w->src = en->src;
    return 1;
}

/* The index + 1 of the entry that holds output now (0: none). */
static size_t holder(const mv_done *d, const char *output)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->out, output, strlen(output));
    return s && d->ents[s->value - 1].output == s->key ? s->value : 0;
}

const char *mv_done_name_of(const mv_done *d, const char *path, const char *abs)
{
    const mv_hashset_entry *s = mv_hashset_find(&d->in, path, strlen(path));
    size_t ix = s ? s->value : abs ? id_find(d, abs, NULL, NULL) : 0;
    if (!ix)
        return NULL;
    const done_ent *en = &d->ents[ix - 1];
    const char *name = en->had_ok && en->output ? en->output : en->planned;
    if (!name)
        return NULL;
    size_t h = holder(d, name);
    return !h || h == ix ? name : NULL;
}

const char *mv_done_stem_of(const mv_done *d, const char *path, const char *abs, size_t *len)
{
    const char *known = mv_done_name_of(d, path, abs);
    size_t kl = known ? strlen(known) : 0, sl = strlen(MV_OUTPUT_SUFFIX);
    if (kl <= sl || strcmp(known + kl - sl, MV_OUTPUT_SUFFIX))
        return NULL;
    *len = kl - sl;
    return known;
}

int mv_done_held_by(const mv_done *d, const char *output, const char *abs)
{
    size_t h = holder(d, output);
    return h && h == id_find(d, abs, NULL, NULL);
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

/* --- the manifests of OUT ------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void mv_manifest_list_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

mv_status mv_manifest_list(const char *out_dir, char ***names, size_t *nn, mv_err *e)
{
    *names = NULL;
    *nn = 0;
    DIR *d = opendir(out_dir);
    if (!d)
        return mv_fail(e, MV_ERR_IO, "%s: %s", out_dir, strerror(errno));
    size_t cap = 0;
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
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
    if (errno) {
        int err = errno;
        closedir(d);
        mv_manifest_list_free(*names, *nn);
        *names = NULL;
        *nn = 0;
        return mv_fail(e, MV_ERR_IO, "%s: listing manifests: %s", out_dir, strerror(err));
    }
    closedir(d);
    if (*nn)
        qsort(*names, *nn, sizeof **names, cmp_str);
    return MV_OK;
nomem:
    closedir(d);
    mv_manifest_list_free(*names, *nn);
    *names = NULL;
    *nn = 0;
    return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory listing manifests", out_dir);
}
