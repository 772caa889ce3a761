/* writers.c - the pipeline's writer threads: each finished input becomes an output (an atomic
 * OUT/<rel>.npy.zst, or a sample in the thread's own tar shard with --layout tar; a mean vector
 * first with --pool mean) and a manifest line; failed inputs get their error line. Slow disks
 * and compression hold the tower back through the bounded done queue. Not here: naming and
 * resume (feed.c), the files' format (output.c, tar_out.c).
 */
#include "pipeline_int.h"

#include "mv_claims.h"
#include "mv_output.h"
#include "mv_names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- writers ------------------------------------------------------------------------------ */

/* The claim on an output name (mv_output_claim_fn): taken under OUT's lock file just before the
 * rename, held until the output's manifest line is written (write_item), so that two processes
 * never both take one name. */
typedef struct {
    mv_claims *claims;
    const char *input, *abs;
    mv_done_input_stat now; /* the input as this run read it */
    int taken, slot;
    char elsewhere[4200]; /* another run embedded the input meanwhile, as this output */
    /* for recorded_early: the output being written and its record */
    runner *R;
    mv_item *it;
    mv_dtype dt;
    const char *out_rel;
    mv_record *r;
    int recorded; /* its line is in (recorded_early) */
} claim_ctx;

static mv_status claim_name(void *ud, const char *rel, int *may_replace, mv_err *e)
{
    claim_ctx *cc = ud;
    char out_rel[4200];
    mv_name_output_file(out_rel, sizeof out_rel, rel);
    mv_status st = mv_claims_take(cc->claims, cc->input, cc->abs, &cc->now, out_rel, may_replace, &cc->slot, cc->elsewhere,
                                  sizeof cc->elsewhere, e);
    cc->taken = st == MV_OK;
    return st;
}

/* The item's record (its ok line) into r. */
static void record_ok(runner *R, const mv_item *it, mv_dtype dt, const char *out_rel, size_t bytes, mv_record *r)
{
    mv_item_record(it, &R->m->cfg, dt, R->m->fingerprint, out_rel, r);
    r->has_bytes = 1;
    r->bytes = (int64_t)bytes;
}

/* mv_output_replacing_fn: the output replaces a file (another run's settings, a changed input,
 * --force): its line goes in before the new file takes the name, the old file already gone. */
static mv_status recorded_early(void *ud, size_t bytes, mv_err *e)
{
    claim_ctx *cc = ud;
    record_ok(cc->R, cc->it, cc->dt, cc->out_rel, bytes, cc->r);
    mv_status st = pl_append_record(cc->R, cc->r, e);
    cc->recorded = st == MV_OK;
    return st;
}

/* Writes the item's output and its manifest line (*cc's claim held from just before the rename
 * until the line is written; the line first where the output replaces a file: recorded_early);
 * 0, 1 when another run live in OUT embedded the same file under another name meanwhile (nothing
 * written: it counts as skipped), or -1 after a fatal error. */
static int write_output(runner *R, mv_item *it, mv_output_writer *ow, claim_ctx *cc, mv_record *r)
{
    const mv_run_opts *o = R->o;
    const mv_vision_config *c = &R->m->cfg;
    mv_err e;
    char out_rel[4200];
    mv_name_output_file(out_rel, sizeof out_rel, it->rel);
    size_t bytes = 0;
    mv_dtype dt = o->out_dtype;
    mv_done_input_stat now = {.bytes = it->in_bytes, .mtime_ns = it->in_mtime_ns, .has_mtime = 1,
                              .mtime_s = it->in_mtime_s, .has_mtime_s = 1};
    mv_claims *claims = cc->claims;
    *cc = (claim_ctx){.claims = claims, .input = it->path, .abs = it->abs, .now = now, .R = R, .it = it,
                      .out_rel = out_rel, .r = r};
    if (!it->error) {
        char final_path[8400];
        double t = mv_now();
        dt = cc->dt = mv_output_dtype(o->out_dtype, it->out, (size_t)it->rows * (size_t)c->out_hidden);
        /* refuses an embedding holding NaN/Inf (the input fails, the batch goes on) */
        mv_status st = mv_output_write(ow, o->out_dir, it->rel, dt, it->rows, c->out_hidden,
                                       it->out, o->zstd_level, final_path, sizeof final_path,
                                       &bytes, &e);
        pl_t_add(R, T_WRITE, t);
        /* a full, read-only or failing disk fails every later write too; out of memory with no
         * address space left is the run's shortage, not this input's (mv_short_of_room) */
        if (st == MV_ERR_IO || mv_short_of_room(st, 0)) {
            if (cc->taken)
                mv_claims_release(cc->claims, cc->slot);
            pl_set_fatal(R, &e);
            return -1;
        }
        if (st && cc->elsewhere[0]) { /* the other run's line and file stand for it */
            atomic_fetch_add(&R->n_skip, 1);
            if (o->verbose) {
                char esc[8192];
                pl_say(R, "mvembed: %s\n", mv_escape(e.msg, esc, sizeof esc));
            }
            return 1;
        }
        if (st) /* this output only (its name or place, non-finite values): the batch goes on */
            mv_item_fail(it, e.msg);
    }
    if (cc->recorded && !it->error) { /* its line went in before the rename (recorded_early) */
        if (cc->taken)
            mv_claims_release(cc->claims, cc->slot);
        return 0;
    }
    if (it->error)
        mv_item_record(it, c, dt, R->m->fingerprint, out_rel, r);
    else
        record_ok(R, it, dt, out_rel, bytes, r);
    if (it->error && it->named) /* the name it takes when a rerun succeeds (mv_done_name_of) */
        r->planned_output = out_rel;
    mv_status st = pl_append_record(R, r, &e);
    if (cc->taken)
        mv_claims_release(cc->claims, cc->slot);
    if (st) {
        pl_set_fatal(R, &e);
        return -1;
    }
    return 0;
}

static void write_item(runner *R, mv_item *it, mv_output_writer *ow, claim_ctx *cc)
{
    const mv_run_opts *o = R->o;
    const mv_vision_config *c = &R->m->cfg;
    char out_rel[4200];
    mv_name_output_file(out_rel, sizeof out_rel, it->rel);
    if (!it->error && !it->out)
        return; /* discarded after a fatal error */
    mv_record r;
    if (write_output(R, it, ow, cc, &r)) /* fatal, or done by another run */
        return;
    /* paths are escaped: a file name cannot forge a line or send terminal escapes */
    char esc[8192];
    if (it->error) {
        atomic_fetch_add(&R->n_err, 1);
        pl_say(R, "mvembed: %s\n", mv_escape(it->error, esc, sizeof esc));
    } else {
        atomic_fetch_add(&R->n_ok, 1);
        if (o->verbose) {
            char esc2[8192];
            pl_say(R, "mvembed: %s -> %s [%lld x %d] %.3fs\n", mv_escape(it->path, esc, sizeof esc),
                mv_escape(out_rel, esc2, sizeof esc2), (long long)it->rows, c->out_hidden, r.seconds);
        }
    }
}

/* ---- --pool mean and --layout tar (pool.c, tar_out.c) ---------------------------------------- */

/* Replaces the item's token rows by their mean: [1, out_hidden]. A single row is its own mean
 * (and is what a backend that pools on the device, mv_forward_req.mean, hands over). */
static void pool_item(runner *R, mv_item *it)
{
    int64_t cols = R->m->cfg.out_hidden;
    if (it->rows == 1)
        return;
    float *p = malloc(cols * sizeof *p);
    if (!p) {
        mv_item_fail(it, "out of memory");
        return;
    }
    mv_pool_mean(it->out, it->rows, cols, p);
    mv_item_set_out(it, p, 1);
}

/* mv_tar_commit_fn: a completed shard's manifest lines, in one append */
mv_status pl_tar_commit(void *ud, const char *text, size_t len, mv_err *e)
{
    runner *R = ud;
    double t = mv_now();
    pthread_mutex_lock(&R->man_mu);
    mv_status st = mv_manifest_append_lines(R->man, text, len, e);
    pthread_mutex_unlock(&R->man_mu);
    pl_t_add(R, T_MANIFEST, t);
    return st;
}

/* mv_tar_dedup_opts.dropped: another run committed the input's sample first; this run's is
 * taken out of its shard, so the input counts as skipped */
void pl_tar_dropped(void *ud, const char *input)
{
    runner *R = ud;
    atomic_fetch_add(&R->n_skip, 1);
    if (R->o->verbose) {
        char esc[8192];
        pl_say(R, "mvembed: %s: embedded meanwhile by another run (its sample stands; this run's is not "
               "kept)\n", mv_escape(input, esc, sizeof esc));
    }
}

/* mv_tar_dedup_opts.appended: a shard's lines are in the manifest (the tar set appended them) */
void pl_tar_appended(void *ud, long n)
{
    runner *R = ud;
    atomic_fetch_add(&R->n_ok_lined, n);
}

/* write_item for --layout tar: the sample goes into this writer's open shard *tar; its manifest
 * line waits for the shard's completion (mv_tar_close). Failed inputs (and samples refused for
 * non-finite values, before the shard is touched) get their line at once. */
static void write_item_tar(runner *R, mv_item *it, mv_tar_shard **tar)
{
    const mv_run_opts *o = R->o;
    const mv_vision_config *c = &R->m->cfg;
    mv_err e;
    if (!it->error && !it->out)
        return; /* discarded after a fatal error */
    mv_record r;
    mv_dtype dt = it->error ? o->out_dtype
                            : mv_output_dtype(o->out_dtype, it->out, (size_t)it->rows * (size_t)c->out_hidden);
    mv_item_record(it, c, dt, R->m->fingerprint, NULL, &r);
    char esc[8192];
    if (!it->error) {
        double t = mv_now();
        mv_status st = mv_tar_add(R->tars, tar, &r, dt, it->rows, c->out_hidden, it->out, &e);
        pl_t_add(R, T_WRITE, t);
        if (st == MV_ERR_MODEL) { /* this input only: its error line below */
            mv_item_fail(it, e.msg);
            mv_item_record(it, c, dt, R->m->fingerprint, NULL, &r);
        } else if (st) { /* a write error breaks the shard: its inputs are redone by the next run */
            mv_tar_abandon(*tar);
            *tar = NULL;
            char was[sizeof e.msg];
            snprintf(was, sizeof was, "%s", e.msg);
            mv_fail(&e, st, "%s (that shard is not kept: the next run redoes its inputs)", was);
            pl_set_fatal(R, &e);
            return;
        } else {
            atomic_fetch_add(&R->n_ok, 1);
            if (o->verbose)
                pl_say(R, "mvembed: %s -> %s key %s [%lld x %d] %.3fs\n", mv_escape(it->path, esc, sizeof esc),
                       r.shard, r.key, (long long)it->rows, c->out_hidden, r.seconds);
            return;
        }
    }
    if (pl_append_record(R, &r, &e)) {
        pl_set_fatal(R, &e);
        return;
    }
    atomic_fetch_add(&R->n_err, 1);
    pl_say(R, "mvembed: %s\n", mv_escape(it->error, esc, sizeof esc));
}

void *pl_writer_main(void *arg)
{
    runner *R = arg;
    mv_tar_shard *tar = NULL; /* --layout tar: this thread's open shard */
    mv_output_writer *ow = NULL; /* files layout: this thread's compression context and buffers */
    claim_ctx cc = {.claims = R->claims};
    mv_err e;
    if (!R->tars && mv_output_writer_new(&R->swept, &ow, &e))
        pl_set_fatal(R, &e); /* the loop below then only drains */
    else if (ow && R->claims) { /* files layout: names claimed across processes */
        mv_output_writer_set_claim(ow, claim_name, &cc);
        mv_output_writer_set_replacing(ow, recorded_early);
    }
    mv_item *it;
    while ((it = pl_pop_timed(R, &R->done, T_WRITE_WAIT))) {
        if (!atomic_load(&R->fatal)) {
            if (R->o->pool == MV_POOL_MEAN && !it->error && it->out)
                pool_item(R, it);
            if (R->tars)
                write_item_tar(R, it, &tar);
            else
                write_item(R, it, ow, &cc);
        }
        mv_item_free(it);
    }
    mv_output_writer_free(ow);
    if (tar && mv_tar_close(R->tars, tar, &e)) /* the open shard is complete: what it holds is kept */
        pl_set_fatal(R, &e);
    atomic_fetch_add(&R->writer_cpu_ns, (long long)(pl_thread_cpu() * 1e9));
    return NULL;
}

