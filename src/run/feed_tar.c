/* feed_tar.c - the walker's resume checks by input for --layout tar (see feed_int.h): an input
 * found by the file it reaches now under another spelling, a tar member's size, mtime and XXH64
 * as this run finds them, whether an input changed since its ok line, whether its sample still
 * verifies, and a failed tar read again. Not here: the walk, shards and output names (feed.c),
 * the manifest state (manifest_done.c), a sample's check in its shard (tar_resume.c).
 */
#include "feed_int.h"

#include "mv_filehash.h"
#include "mv_output.h"
#include "mv_tar_in.h"
#include "mv_tar_resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

static const char *tar_alias(tar_aliases *ta, const mv_done *done, const char *path)
{
    struct stat sb;
    mv_done_sample smp;
    const char *in;
    if (stat(path, &sb) != 0)
        return NULL; /* a tar member, or gone: only its own path names it */
    if (!ta->built) {
        ta->built = 1;
        for (size_t i = 0; i < mv_done_inputs(done); i++) {
            struct stat rb;
            if (mv_done_entry(done, i, &in, &smp) && smp.tar && stat(in, &rb) == 0) {
                dev_t key[2] = {rb.st_dev, rb.st_ino};
                mv_hashset_entry *en = mv_hashset_add(&ta->by_file, key, sizeof key, NULL);
                if (en)
                    en->value = i + 1; /* out of memory: that input is not found by alias */
            }
        }
    }
    dev_t key[2] = {sb.st_dev, sb.st_ino};
    const mv_hashset_entry *en = mv_hashset_find(&ta->by_file, key, sizeof key);
    if (!en)
        return NULL;
    mv_done_entry(done, en->value - 1, &in, &smp);
    return mv_done_same_input(in, path) ? in : NULL;
}

member_now pl_member_of(const mv_walk_item *wi)
{
    member_now mn = {0};
    const mv_tar_meta *m = wi->meta;
    if (!wi->tar || !m)
        return mn;
    mn.member = 1;
    mn.bytes = m->member_bytes;
    mn.mtime_ns = m->member_mtime_ns;
    mn.mtime_s = m->member_mtime_s;
    if (wi->fd >= 0 && mv_filehash_fd(wi->fd, &mn.xxh64) == 0) {
        const char *part[3] = {m->json, m->txt, m->cls};
        size_t len[3] = {m->json ? strlen(m->json) : 0, m->txt_len, m->cls_len};
        for (int i = 0; i < 3; i++) { /* each part tagged, so that a part moved is a change */
            unsigned char tag = part[i] ? (unsigned char)(1 + i) : 0;
            mn.xxh64 = XXH64(&tag, 1, mn.xxh64);
            if (part[i])
                mn.xxh64 = XXH64(part[i], len[i], mn.xxh64);
        }
        mn.has_xxh64 = 1;
    }
    return mn;
}

/* 1 with the reason in why when the input at path (a tar member: mn) is not what its ok line
 * recorded: another size or mtime, or other bytes (a member's XXH64 always, as it is in memory;
 * a file's with --input-hash, when the line has one). Lines without these fields (older
 * builds) are trusted. */
int pl_input_changed(const mv_run_opts *o, const char *path, const member_now *mn,
                            const mv_done_input_stat *src, char *why, size_t cap)
{
    struct stat sb;
    if (src->bytes < 0 || (mn->member ? mn->bytes < 0 : stat(path, &sb) != 0))
        return 0; /* not recorded; a file gone fails when it is read */
    int64_t size = mn->member ? mn->bytes : (int64_t)sb.st_size;
    int64_t mt = mn->member ? mn->mtime_ns : mv_time_ns(sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    int64_t mts = mn->member ? mn->mtime_s : (int64_t)sb.st_mtim.tv_sec;
    const char *pre = mn->member ? "the member in its tar: " : "";
    char now_t[48], rec_t[48]; /* mtimes outside int64 nanoseconds (saturated): whole seconds */
    mv_done_input_stat now = {.bytes = size, .mtime_ns = mt, .has_mtime = 1, .mtime_s = mts, .has_mtime_s = 1};
    if (mv_done_input_differs(src, &now)) {
        mv_time_words(mt, mts, now_t, sizeof now_t);
        mv_time_words(src->mtime_ns, src->has_mtime_s ? src->mtime_s : INT64_MIN, rec_t, sizeof rec_t);
        snprintf(why, cap, "%s%lld bytes, modified at %s; the manifest says %lld bytes, %s", pre,
                 (long long)size, now_t, (long long)src->bytes, rec_t);
        return 1;
    }
    uint64_t h = mn->xxh64;
    if (src->has_xxh64 && (mn->member ? mn->has_xxh64 : o->input_hash && mv_filehash_path(path, &h) == 0) &&
        h != src->xxh64) {
        snprintf(why, cap, "%sits XXH64 is %016llx, the manifest says %016llx",
                 mn->member ? "the member and its sample's metadata: " : "", (unsigned long long)h,
                 (unsigned long long)src->xxh64);
        return 1;
    }
    return 0;
}

/* --layout tar: samples live in shards that many inputs share, so resume goes by input. 1 when
 * the input's latest ok record is a sample made with this run's fingerprint from the input as it
 * is now (pl_input_changed; mn: a tar member as it is now) that still verifies (mv_tar_sample_intact): skip
 * it. 0: embed it (no record, other settings, a changed input, a sample missing or damaged; said
 * as the files layout says it). */
int pl_tar_done(runner *R, mv_done *done, tar_aliases *ta, const char *path, const char *abs,
                       const member_now *mn, const char *out_real, long *n_stale, char stale_fp[17])
{
    const mv_run_opts *o = R->o;
    const char *fp = R->m->fingerprint;
    mv_done_sample smp;
    if (!mv_done_sample_of(done, path, abs, &smp)) { /* as written, or by its path from / */
        const char *alias = tar_alias(ta, done, path); /* lines without input_abs */
        if (!alias || !mv_done_sample_of(done, alias, NULL, &smp))
            return 0;
    }
    char esc[8192], why[1100];
    if (strcmp(smp.model, fp) != 0) { /* other settings: redone */
        if (!(*n_stale)++)
            snprintf(stale_fp, 17, "%s", smp.model[0] ? smp.model : "none");
        if (o->verbose)
            pl_say(R, "mvembed: %s: made with fingerprint %s, this run's is %s: redoing it\n",
                   mv_escape(path, esc, sizeof esc), smp.model[0] ? smp.model : "(none)", fp);
        return 0;
    }
    if (pl_input_changed(o, path, mn, &smp.src, why, sizeof why)) {
        if (!o->quiet)
            pl_say(R, "mvembed: %s: changed since it was embedded (%s); redoing it\n",
                   mv_escape(path, esc, sizeof esc), why);
        return 0;
    }
    if (!mv_tar_sample_intact(out_real, &smp, why, sizeof why)) {
        if (!o->quiet)
            pl_say(R, "mvembed: %s: its sample is missing or damaged (%s); redoing it\n",
                   mv_escape(path, esc, sizeof esc), why);
        return 0;
    }
    atomic_fetch_add(&R->n_skip, 1);
    if (o->verbose)
        pl_say(R, "mvembed: %s: already done, skipped (--force redoes it)\n", mv_escape(path, esc, sizeof esc));
    return 1;
}

/* A tar whose newest line failed (unreadable part way) is read again by each run that meets it:
 * 1 for the first of its members this run meets (*last, malloc'd, remembers the tar), which is
 * then embedded even when done, so that its new line settles the tar's error line when the tar
 * now reads to its end (mv_line_settles; a run that meets the damage again writes a newer error
 * line). 0 for the others and other tars (out of memory: 1, the tar not remembered). */
int pl_tar_reread(const mv_done *done, char **last, const char *tar)
{
    if ((*last && !strcmp(*last, tar)) || !mv_done_error(done, tar))
        return 0;
    free(*last);
    *last = strdup(tar);
    return 1;
}
