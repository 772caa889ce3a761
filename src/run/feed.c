/* feed.c - the pipeline's walker (the caller's thread): walks the PATH arguments, keeps this
 * shard's inputs, checks resume (output names held in OUT's manifest, settings fingerprints,
 * damaged outputs; per input and complete shard for --layout tar) and names used twice in one
 * run (by two inputs: an error; by one input named twice: embedded once), and queues the rest
 * for the decode pool; plus the counting walk for the progress total. Not here: loading the
 * resume state and the layout checks (pipeline.c), the naming rules (names.c), decoding, the
 * tar layout's resume checks by input (feed_tar.c).
 */
#include "pipeline_int.h"
#include "feed_int.h"

#include "mv_filehash.h"
#include "mv_hashset.h"
#include "mv_output.h"
#include "mv_pool.h"
#include "mv_names.h"
#include "mv_tar_in.h"
#include "mv_tar_limit.h"
#include "mv_tar_resume.h"
#include "mv_walk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The output names of this run, each with the identity of the input that took it, so that a name
 * met again tells the same input named twice from another input, by mv_done_same_input's rule:
 * the regular file a path reaches now (device and inode), else the path once normalised (as
 * mv_output_name does, absolute and relative apart). The set holds 64-bit hashes, not names or
 * paths, so that it stays small for millions of inputs. */
static uint64_t input_identity(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        uint64_t id[3] = {1, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino};
        return mv_hash64(id, sizeof id);
    }
    size_t n = strlen(path);
    char *b = malloc(mv_output_name_cap(n) + 1);
    if (!b)
        return mv_hash64(path, n);
    b[0] = path[0] == '/' ? 'a' : 'r';
    size_t l = mv_output_name(path, b + 1);
    uint64_t h = mv_hash64(b, l + 1);
    free(b);
    return h;
}

/* Takes an output name for the input at path: 1 taken, 0 taken before (*same: by this input
 * too), -1 no memory. */
static int name_add(mv_hashset *s, const char *out_rel, const char *path, int *same)
{
    uint64_t h = mv_hash64(out_rel, strlen(out_rel)), id = input_identity(path);
    int added;
    mv_hashset_entry *en = mv_hashset_add(s, &h, sizeof h, &added);
    if (!en)
        return -1;
    if (added)
        en->value = (size_t)id;
    *same = !added && en->value == (size_t)id;
    return added;
}

/* 1 when this run took the input at abs (its path from /, as resume and compact know it) under
 * another spelling (/abs/a/x, a/../a/x, a linked directory, its directory): one input; else 0. */
static int abs_again(const mv_hashset *s, const char *abs)
{
    return abs && mv_hashset_find(s, abs, strlen(abs));
}

/* Notes the input at abs as taken by this run (embedded, or skipped as done): 0, -1 no memory. */
static int abs_note(mv_hashset *s, const char *abs)
{
    int added;
    return !abs || mv_hashset_add(s, abs, strlen(abs), &added) ? 0 : -1;
}

/* ---- feeding ------------------------------------------------------------------------------ */

/* --layout tar --pool mean --shard K/N: notes the input at path (abs: from /) as this shard's, so
 * that its pooled directory takes it whoever embeds it (R->pool_taken). 0, or -1 no memory. */
static int pool_note(runner *R, const char *path, const char *abs)
{
    if (!R->tars || R->o->pool != MV_POOL_MEAN || R->shard_n <= 1 || !abs)
        return 0;
    size_t pl = strlen(path), al = strlen(abs);
    char *k = malloc(pl + 1 + al + 1);
    if (!k)
        return -1;
    memcpy(k, path, pl + 1);
    memcpy(k + pl + 1, abs, al + 1);
    int r = mv_hashset_add(&R->pool_taken, k, pl + 1 + al, NULL) ? 0 : -1;
    free(k);
    return r;
}

/* What the walk item wi is to this run: -1 out of memory, 0 another shard's, 1 this run's, with
 * *abs its path from / (mv_path_from_root; cwd: the working directory, NULL when unknown; NULL for
 * an entry the walk failed), which its line records and resume finds it by, and *stem (length
 * *len) the name OUT's manifests give it in the files layout (mv_done_stem_of) or NULL. An input's shard is its output
 * name's: the held name when there is one, so that a retry or resume that spells it another way
 * (a path list after a walk, another working directory) keeps it in its shard; else the name its
 * path gives. */
static int shard_take(const runner *R, const mv_done *done, mv_dir_cache *dc, const char *cwd,
                      const mv_walk_item *wi, char **abs, const char **stem, size_t *len)
{
    int oom = 0;
    *abs = NULL;
    *stem = NULL;
    if (!wi->error) {
        if (!(*abs = mv_path_from_root(dc, cwd, wi->path, &oom)) && oom)
            return -1;
        *stem = done && !R->tars ? mv_done_stem_of(done, wi->path, *abs, len) : NULL;
    }
    return *stem ? mv_name_in_shard_n(*stem, *len, R->shard_k, R->shard_n)
                 : mv_name_in_shard(wi->rel, R->shard_k, R->shard_n);
}

/* The input takes the name OUT's manifests give it (stem, len: shard_take's), so that it keeps the
 * name it first got (it->rel and out_rel[cap] take it). 0, or -1 when out of memory. */
static int take_held_name(mv_item *it, const char *stem, size_t len, char *out_rel, size_t cap)
{
    size_t kl = len + strlen(MV_OUTPUT_SUFFIX);
    if (kl >= cap || !strcmp(stem, out_rel))
        return 0;
    char *rel = strndup(stem, len);
    if (!rel)
        return -1;
    free(it->rel);
    it->rel = rel;
    memcpy(out_rel, stem, kl + 1);
    return 0;
}

/* -v: each entry the walk passes over, named */
static void say_skip(void *user, const char *path, mv_walk_skip why)
{
    char esc[8192];
    pl_say(user, "mvembed: %s: passed over (%s)\n", mv_escape(path, esc, sizeof esc), mv_walk_skip_str(why));
}

/* The walk options of a run: its path options, and OUT (which exists before the walk starts)
 * as the directory never walked into; with -v, entries passed over are told to teller (NULL:
 * not told). */
static mv_walk_opts walk_opts(const mv_run_opts *o, runner *teller)
{
    mv_walk_opts wo = {.null_sep = o->null_sep, .all_files = o->all_files, .hidden = o->hidden,
                       .listed_rules = o->walk_rules,
                       .tar_member_max = o->max_member_bytes ? o->max_member_bytes
                                                             : MV_TAR_MEMBER_MAX_OF(o->max_decode_pixels),
                       .on_skip = teller && o->verbose ? say_skip : NULL, .skip_user = teller};
    struct stat sb;
    if (stat(o->out_dir, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        wo.has_skip = 1;
        wo.skip_dev = sb.st_dev;
        wo.skip_ino = sb.st_ino;
    }
    return wo;
}

/* For the progress line's total and ETA: a second, cheap walk (names only) that counts this run's
 * share of the inputs (shard_take, as the feeding walk takes them). Not done when paths come from
 * standard input (a stream). */
void *pl_count_main(void *arg)
{
    runner *R = arg;
    const mv_run_opts *o = R->o;
    mv_walk *w;
    mv_walk_opts wo = walk_opts(o, NULL);
    wo.names_only = 1;
    mv_err e;
    if (mv_walk_open(o->paths, o->n_paths, &wo, NULL, &w, &e))
        return NULL;
    long n = 0;
    mv_walk_item wi;
    char *cwd = getcwd(NULL, 0);
    mv_dir_cache dirs = {0};
    char *abs;
    const char *stem;
    size_t len;
    while (!pl_interrupted(R) && !atomic_load(&R->fatal) && mv_walk_next(w, &wi, &e) > 0) {
        if (shard_take(R, R->resume, &dirs, cwd, &wi, &abs, &stem, &len) > 0)
            n++;
        free(abs);
    }
    mv_walk_close(w);
    free(cwd);
    mv_dir_cache_free(&dirs);
    atomic_store(&R->total, n);
    return NULL;
}

/* mv_pool_dirs's drop: every pooled directory but another shard's of this run's N (which holds
 * none of this shard's inputs) goes; notes which (the run's end says so, as it ended) */
static int pooled_went(const char *stem, int k, int n, void *ud)
{
    runner *R = ud;
    if (n > 0 && n == R->shard_n && k != R->shard_k)
        return 0;
    if (R->n_pooled_gone < (int)(sizeof R->pooled_gone / sizeof R->pooled_gone[0]))
        snprintf(R->pooled_gone[R->n_pooled_gone++], sizeof R->pooled_gone[0], "%s", stem);
    return 1;
}

/* Before the first input this run redoes that had an ok line (held_ok: its files-layout name;
 * the tar layout: its sample), OUT's pooled directories go: their rows may be its old output, and
 * a run killed before its end (kill -9) would leave them looking current. Once per run (*gone);
 * a --pool run rebuilds its own at its end. */
static void pooled_check(runner *R, const mv_done *done, const mv_item *it, int held_ok, int *gone)
{
    mv_done_sample smp;
    if (*gone || !done || it->error ||
        !(held_ok || (R->tars && mv_done_sample_of(done, it->path, it->abs, &smp))))
        return;
    *gone = 1;
    mv_pool_dirs(R->o->out_dir, pooled_went, R);
}

/* Queues it for the decode pool; a streamed tar member (a large image) is decoded here first,
 * since its stream lasts only until the walk reads on, and goes to the towers. 0, or -1 when
 * the queue is closed (it freed). */
static int queue_item(runner *R, mv_item *it, const mv_walk_item *wi)
{
    if (wi->io) {
        it->io = wi->io;
        it->io_user = wi->io_user;
        int stopped = pl_decode(R, it);
        it->io = NULL;
        if (stopped) { /* by the interrupt: not failed, the next run does it */
            mv_item_free(it);
            return 0;
        }
    }
    if (mv_queue_push(wi->io ? &R->ready : &R->jobs, it)) {
        mv_item_free(it);
        return -1;
    }
    return 0;
}

/* The item of walk item wi (a tar member: its bytes kept open, its sample's metadata and its
 * record's size, mtime and hash, mn as it is now); NULL when out of memory or of descriptors. */
static mv_item *item_of(const mv_walk_item *wi, member_now *mn)
{
    mv_item *it = mv_item_new(wi->path, wi->rel);
    if (!it)
        return NULL;
    if (wi->fd >= 0 && (it->fd = dup(wi->fd)) < 0) { /* a tar member's bytes; only the process's */
        int er = errno;                                /* fd limit stops dup: NULL, errno kept */
        mv_item_free(it);
        errno = er;
        return NULL;
    }
    if (wi->meta && !(it->meta = mv_tar_meta_copy(wi->meta)))
        mv_item_fail(it, "out of memory");
    *mn = pl_member_of(wi);
    if (mn->member && mn->bytes >= 0) { /* a member's record: what resume compares */
        it->has_stat = 1;
        it->in_bytes = mn->bytes;
        it->in_mtime_ns = mn->mtime_ns;
        it->in_mtime_s = mn->mtime_s;
        it->has_xxh64 = mn->has_xxh64;
        it->in_xxh64 = mn->xxh64;
    }
    return it;
}

/* The walk item wi as this run takes it: 0 another shard's (shard_take), -1 out of memory, 1 with
 * *it made (item_of, *mn), its path from / and the output name out_rel[cap] it holds. */
static int item_take(const runner *R, const mv_done *done, mv_dir_cache *dc, const char *cwd,
                     const mv_walk_item *wi, member_now *mn, mv_item **it, char *out_rel, size_t cap)
{
    char *abs;
    const char *stem;
    size_t len;
    int take = shard_take(R, done, dc, cwd, wi, &abs, &stem, &len);
    if (take <= 0 || !(*it = item_of(wi, mn))) {
        free(abs);
        return take <= 0 ? take : -1;
    }
    (*it)->abs = abs;
    mv_name_output_file(out_rel, cap, wi->rel);
    if (stem && take_held_name(*it, stem, len, out_rel, cap)) {
        mv_item_free(*it);
        return -1;
    }
    return 1;
}

/* Files layout: 1 with it failed when output name out_rel cannot be made in OUT, its last
 * component (the input's name and ".npy.zst") over name_max bytes, the file system's limit on one
 * name: the input fails before it is embedded, not at its output's rename. */
static int name_too_long(mv_item *it, const char *path, const char *out_rel, long name_max)
{
    const char *base = strrchr(out_rel, '/');
    size_t n = strlen(base ? base + 1 : out_rel);
    char why[8600];
    if (name_max <= 0 || n <= (size_t)name_max)
        return 0;
    snprintf(why, sizeof why, "%s: its output's name %s is %zu bytes, over the %ld-byte limit on a file name "
             "in OUT (the input's name and \"%s\"): rename the input, or use --layout tar", path, base ? base + 1 : out_rel,
             n, name_max, MV_OUTPUT_SUFFIX);
    mv_item_fail(it, why);
    return 1;
}

/* Resume of an input whose own ok line holds its output name (files layout): 1 when it is
 * skipped (same settings, unchanged input, whole output), else 0 with the reason said (settings
 * are counted in *n_stale, the first fingerprint kept in stale_fp). */
static int resume_files(runner *R, const mv_walk_item *wi, const member_now *mn, const char *out_real,
                        const char *out_rel, const mv_done_owner *ow, long *n_stale, char *stale_fp,
                        size_t fp_cap)
{
    const mv_run_opts *o = R->o;
    const char *fp = R->m->fingerprint;
    char why[1100];
    if (strcmp(ow->model, fp) != 0) { /* other settings: redone */
        if (!(*n_stale)++)
            snprintf(stale_fp, fp_cap, "%s", ow->model[0] ? ow->model : "none");
        if (o->verbose) {
            char esc[8192];
            pl_say(R, "mvembed: %s: made with fingerprint %s, this run's is %s: redoing it\n",
                   mv_escape(wi->path, esc, sizeof esc), ow->model[0] ? ow->model : "(none)", fp);
        }
    } else if (pl_input_changed(o, wi->path, mn, &ow->src, why, sizeof why)) {
        if (!o->quiet) {
            char esc[8192];
            pl_say(R, "mvembed: %s: changed since it was embedded (%s); redoing it\n",
                   mv_escape(wi->path, esc, sizeof esc), why);
        }
    } else if (mv_done_output_intact(out_real, out_rel, ow->bytes, why, sizeof why)) {
        atomic_fetch_add(&R->n_skip, 1);
        if (o->verbose) {
            char esc[8192];
            pl_say(R, "mvembed: %s: already done, skipped (--force redoes it)\n",
                   mv_escape(wi->path, esc, sizeof esc));
        }
        return 1;
    } else if (!o->quiet) {
        char esc[8192], esc2[8192];
        pl_say(R, "mvembed: %s: output %s is missing or damaged (%s); redoing it\n",
               mv_escape(wi->path, esc, sizeof esc), mv_escape(out_rel, esc2, sizeof esc2), why);
    }
    return 0;
}

/* Walks the inputs and feeds the pipeline. Returns MV_OK or a fatal error (in e).
 * Resume works on output names (mv_output_name; an input the manifest knows keeps the name it
 * holds there, take_held_name): an input is skipped when OUT's manifest says that this same input
 * (mv_done_same_input, or its path from /: mv_done_held_by) made its output name with this run's
 * fingerprint and the output is whole; it is redone when the settings differ or the output is
 * missing or damaged; it fails when another input holds the name (never overwritten, even with --force). */
/* The same input named twice in this run (a/x and ./a//x, overlapping path lists, one tar twice,
 * /abs/a/x, a file and its directory): one input, embedded once, counted as skipped; it is freed. */
static void named_again(runner *R, mv_item *it, const char *path)
{
    atomic_fetch_add(&R->n_skip, 1);
    if (R->o->verbose) {
        char esc[8192];
        pl_say(R, "mvembed: %s: named again in this run: embedded once\n", mv_escape(path, esc, sizeof esc));
    }
    mv_item_free(it);
}

mv_status pl_feed(runner *R, mv_done *done, mv_err *e)
{
    const mv_run_opts *o = R->o;
    mv_walk *w;
    mv_walk_opts wo = walk_opts(o, R);
    char *out_real = realpath(o->out_dir, NULL);
    if (!out_real)
        return mv_fail(e, MV_ERR_IO, "%s: cannot resolve the output directory: %s", o->out_dir,
                       strerror(errno));
    mv_status st = mv_walk_open(o->paths, o->n_paths, &wo, stdin, &w, e);
    if (st) {
        free(out_real);
        return st;
    }
    const char *fp = R->m->fingerprint;
    long n_stale = 0;
    char stale_fp[17] = "";
    mv_hashset rels = {0}, abss = {0}; /* output names, paths from / of the inputs taken */
    tar_aliases aliases = {0};
    char *cwd = getcwd(NULL, 0); /* NULL: unknown (removed, unreadable) */
    mv_dir_cache dirs = {0};
    char *reread = NULL;
    long name_max = R->tars ? 0 : pathconf(out_real, _PC_NAME_MAX);
    mv_walk_item wi;
    int r = 0, pooled_gone = 0;
    while (!pl_interrupted(R) && !atomic_load(&R->fatal) && (r = mv_walk_next(w, &wi, e)) > 0) {
        member_now mn;
        mv_item *it;
        char out_rel[4200];
        int take = item_take(R, done, &dirs, cwd, &wi, &mn, &it, out_rel, sizeof out_rel);
        if (take < 0) { /* out of memory, or of file descriptors (item_of) */
            int er = errno;
            st = er == EMFILE || er == ENFILE ? mv_fail(e, MV_ERR_IO, "%s: cannot keep the tar member open: %s",
                                                        wi.path, strerror(er)) : mv_fail(e, MV_ERR_NOMEM, "out of memory");
            break;
        } else if (!take)
            continue;
        const char *abs = it->abs;
        if (!wi.error && pool_note(R, wi.path, abs) < 0) {
            mv_item_free(it);
            st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
            break;
        }
        mv_done_owner ow;
        int redo = o->force || (wi.tar && done && pl_tar_reread(done, &reread, wi.tar));
        if (R->tars && !wi.error && done && !redo &&
            pl_tar_done(R, done, &aliases, wi.path, it->abs, &mn, out_real, &n_stale, stale_fp)) {
            mv_item_free(it);
            continue;
        }
        int held = !R->tars && !wi.error && done && mv_done_owner_of(done, out_rel, &ow);
        if (wi.error) {
            char msg[8600]; /* a path of up to 4095 bytes and the whole reason */
            snprintf(msg, sizeof msg, "%s: %s", wi.path[0] ? wi.path : "\"\"", wi.error);
            mv_item_fail(it, msg);
        } else if (name_too_long(it, wi.path, out_rel, name_max)) { /* failed: goes on as an error */
        } else if (held && !mv_done_same_input(ow.input, wi.path) &&
                   !(abs && mv_done_held_by(done, out_rel, abs))) { /* from another directory */
            char msg[8600];
            snprintf(msg, sizeof msg,
                     "%s: output name %s already holds the embedding of %s (OUT's manifest says so); "
                     "not overwritten: use another --out, or remove that output and its manifest lines",
                     wi.path, out_rel, ow.input);
            mv_item_fail(it, msg);
        } else {
            int again = abs_again(&abss, abs);
            if (!again && held && ow.ok && !redo) {
                int sk = resume_files(R, &wi, &mn, out_real, out_rel, &ow, &n_stale, stale_fp, sizeof stale_fp);
                if (sk) {
                    int same, nomem = abs_note(&abss, abs) < 0; /* abs is the item's: before it is freed */
                    nomem |= name_add(&rels, out_rel, wi.path, &same) < 0;
                    mv_item_free(it);
                    if (nomem) {
                        st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
                        break;
                    }
                    continue;
                }
            }
            int same = again, added = again ? 0 : name_add(&rels, out_rel, wi.path, &same);
            if (added > 0 && abs_note(&abss, abs) < 0)
                added = -1;
            if (added < 0) {
                mv_item_free(it);
                st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
                break;
            }
            if (added == 0 && same) {
                named_again(R, it, wi.path);
                continue;
            }
            if (added == 0) {
                char msg[8600];
                snprintf(msg, sizeof msg, "%s: output name %s is already used by another input of this run",
                         wi.path, out_rel);
                mv_item_fail(it, msg);
            } else
                it->named = !R->tars;
        }
        pooled_check(R, done, it, held && ow.ok, &pooled_gone);
        if (queue_item(R, it, &wi))
            break;
    }
    if (r < 0 && !st && !pl_interrupted(R))
        st = MV_ERR_IO; /* e was set by mv_walk_next */
    if (n_stale && !o->quiet)
        fprintf(stderr, "mvembed: %ld input%s made with other settings (fingerprint %s%s; this run's "
                "is %s): redoing %s\n", n_stale, n_stale > 1 ? "s were" : " was", stale_fp,
                n_stale > 1 ? " and maybe others" : "", fp, n_stale > 1 ? "them" : "it");
    mv_walk_skipped(w, R->walk_skipped);
    mv_walk_close(w);
    mv_hashset_free(&rels);
    mv_hashset_free(&abss);
    mv_hashset_free(&aliases.by_file);
    free(reread);
    free(cwd);
    mv_dir_cache_free(&dirs);
    free(out_real);
    return st;
}
