/* pipeline.c - the batch's threads and queues (see mv_pipeline.h for the picture): opens the
 * run's outputs (resume state, manifest, tar shards) after checking that OUT holds one layout
 * (by its lines, and against runs starting beside it), starts the stages' threads,
 * feeds them from the caller's thread, drains them stage by stage and reports. The decode pool is
 * here; the walker is in feed.c, the tower threads in towers.c, the writers in writers.c
 * (pipeline_int.h), the state they share and its services in runner.c.
 *
 * A bad input gets an error line and the batch goes on; fatal problems (device failure, a full or
 * read-only disk, the manifest) stop it. Memory stays bounded: paths are streamed and every queue
 * has a fixed capacity. After an interrupt no queued input is started: inputs not yet decoded or
 * not yet in a forward are dropped (no manifest line: the next run does them), forwards in flight
 * finish and are written.
 */
#include "pipeline_int.h"

#include "mv_claims.h"
#include "mv_interrupt.h"
#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_pool.h"
#include "mv_queue.h"
#include "mv_run_record.h"
#include "mv_tar.h"
#include "mv_tar_limit.h"
#include "mv_tar_resume.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- decode pool -------------------------------------------------------------------------- */

static void *decode_main(void *arg)
{
    runner *R = arg;
    mv_item *it;
    while ((it = pl_pop_timed(R, &R->jobs, T_DECODE_WAIT))) {
        if (pl_interrupted(R) && !it->error) { /* not started: the next run does it */
            mv_item_free(it);
            continue;
        }
        if (pl_decode(R, it)) { /* stopped by the interrupt: not failed, the next run does it */
            mv_item_free(it);
            continue;
        }
        /* weighed by patches: the ready queue holds what fills the next forwards */
        if (mv_queue_push_w(&R->ready, it, it->error ? 0 : (size_t)mv_item_patches(it)))
            mv_item_free(it);
    }
    return NULL;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* Writer threads at most (zstd + fsync of outputs of tens of MB: the slow CPU stage). */
#define MAX_WRITERS 64

/* The run's threads: jobs decoders, one tower thread per backend, writers, the counting walk. */
typedef struct {
    int jobs, writers;
    pthread_t *dec, tw[MV_PIPELINE_MAX_TOWERS], wr[MAX_WRITERS], counter;
    int nd, nt, nw, counting; /* started */
} threads;

/* --layout tar: the sample limit OUT's record agrees on (*limit), said when taken from it. */
static mv_status agree_tar_limit(runner *R, long long *limit, mv_err *e)
{
    const mv_run_opts *o = R->o;
    int adopted;
    mv_status st = mv_tar_limit_agree(o->out_dir, o->shard_samples, limit, &adopted, e);
    if (!st && adopted && !o->quiet)
        fprintf(stderr, "mvembed: %s/%s: shards hold at most %lld samples, as OUT's earlier runs cut them "
                "(--shard-samples %lld)\n", o->out_dir, MV_TAR_LIMIT_FILE, *limit, *limit);
    return st;
}

/* An OUT holds one layout: a run whose --layout differs from the one OUT's ok lines record is
 * refused before anything is written (mixing them would leave files beside shards, and readers
 * of either layout would meet lines of the other); one that already holds both is refused
 * whatever the layout. */
static mv_status one_layout(const mv_run_opts *o, const mv_done *done, mv_err *e)
{
    size_t n_files, n_tar;
    const char *ex_files, *ex_tar;
    mv_done_layouts(done, &n_files, &n_tar, &ex_files, &ex_tar);
    int tar = o->layout == MV_LAYOUT_TAR;
    char esc[4096], esc2[4096];
    if (n_files && n_tar)
        return mv_fail(e, MV_ERR_USAGE, "%s holds both layouts (%zu input%s, such as %s, in the files layout "
                       "and %zu, such as %s, in the tar layout, in its manifest): mvembed does not sort them "
                       "apart; use another --out", o->out_dir, n_files, n_files > 1 ? "s" : "",
                       mv_escape(ex_files, esc, sizeof esc), n_tar, mv_escape(ex_tar, esc2, sizeof esc2));
    size_t n = tar ? n_files : n_tar;
    char other[300];
    int lt = n_tar > 0; /* the layout the lines show (when any), and the other one's files beside */
    if ((n_files || n_tar) && mv_layout_signs(o->out_dir, !lt, other, sizeof other))
        return mv_fail(e, MV_ERR_USAGE, "%s holds both layouts (%zu input%s, such as %s, in the %s layout in "
                       "its manifest, and %s): mvembed does not sort them apart; use another --out",
                       o->out_dir, lt ? n_tar : n_files, (lt ? n_tar : n_files) > 1 ? "s" : "",
                       mv_escape(lt ? ex_tar : ex_files, esc, sizeof esc), lt ? "tar" : "files",
                       mv_escape(other, esc2, sizeof esc2));
    if (n)
        return mv_fail(e, MV_ERR_USAGE, "%s holds the %s layout (%zu input%s, such as %s, in its manifest): "
                       "--layout %s would mix two layouts in one output directory; use another --out, or "
                       "--layout %s", o->out_dir, tar ? "files" : "tar", n, n > 1 ? "s" : "",
                       mv_escape(tar ? ex_files : ex_tar, esc, sizeof esc), tar ? "tar" : "files",
                       tar ? "files" : "tar");
    return MV_OK; /* runs starting side by side: hold_layout */
}

/* Loads the resume state: every manifest in OUT (manifest.jsonl and each shard's, whatever its
 * shard count), so that no run takes a name another run's input holds; an input's newest line
 * wins (mv_line_order_cmp). */
static mv_status load_done(const mv_run_opts *o, mv_done **done, mv_err *e)
{
    char **names = NULL;
    size_t nn = 0;
    mv_status st = mv_done_create(done, e);
    if (!st)
        st = mv_manifest_list(o->out_dir, &names, &nn, e);
    for (size_t i = 0; !st && i <= nn; i++) {
        char p[4200];
        if (i == nn)
            mv_name_manifest(p, sizeof p, o->out_dir, 0, 1);
        else
            snprintf(p, sizeof p, "%s/%s", o->out_dir, names[i]);
        if (access(p, F_OK) != 0)
            continue;
        size_t nl, nb;
        double t = mv_now();
        if ((st = mv_manifest_load_done(p, *done, &nl, &nb, e)))
            break;
        if (o->verbose) {
            char esc[8192];
            fprintf(stderr, "mvembed: %s: %zu lines, %zu done so far%s (%.2fs)\n", mv_escape(p, esc, sizeof esc),
                    nl, mv_done_count(*done), nb ? " (unreadable lines ignored)" : "", mv_now() - t);
        }
    }
    mv_manifest_list_free(names, nn);
    if (!st)
        st = one_layout(o, *done, e);
    if (st) {
        mv_done_free(*done);
        *done = NULL;
    }
    return st;
}

/* --layout tar: adopts the samples of orphan shards (mv_tar_adopt) into the manifest, and when
 * there were any, loads the resume state again so that they count as done. */
static mv_status tar_adopt(runner *R, mv_done **done, mv_err *e)
{
    const mv_run_opts *o = R->o;
    long n = 0;
    mv_status st = mv_tar_adopt(o->out_dir, R->shard_k, R->shard_n, *done, R->claims, pl_tar_commit, R, &n, e);
    if (st || !n)
        return st;
    if (!o->quiet)
        fprintf(stderr, "mvembed: %ld sample%s of complete shards had no manifest line (a run stopped "
                "in between): adopted\n", n, n > 1 ? "s" : "");
    mv_done_free(*done);
    *done = NULL;
    return load_done(o, done, e);
}

/* Runs starting side by side into one OUT with different layouts, before either has written a
 * line (one_layout above reads the lines): each marks its layout, then looks for the other's,
 * so that at least one of two sees the other. A files run holds its byte of OUT's lock file
 * (mv_claims_hold_files) and looks for the tar layout's record (which a tar run writes before any
 * shard); a tar run, its record written (agree_tar_limit), looks for a
 * files run holding that byte and for .npy.zst outputs. Refused: exit 1, nothing written (the tar
 * record this run made, at record_made, is removed again, so that OUT is not taken for a tar
 * OUT). */
static mv_status hold_layout(runner *R, const char *record_made, mv_err *e)
{
    const mv_run_opts *o = R->o;
    char ex[300], esc[1300];
    if (o->layout != MV_LAYOUT_TAR) {
        mv_status st = mv_claims_hold_files(R->claims, e);
        if (!st && mv_layout_signs(o->out_dir, 1, ex, sizeof ex))
            st = mv_fail(e, MV_ERR_USAGE, "%s holds the tar layout, or a tar-layout run is starting there "
                         "(%s): --layout files would mix two layouts in one output directory; use another "
                         "--out, or --layout tar", o->out_dir, mv_escape(ex, esc, sizeof esc));
        return st;
    }
    int busy = mv_claims_files_run(R->claims);
    if (!busy && !mv_layout_signs(o->out_dir, 0, ex, sizeof ex))
        return MV_OK;
    if (record_made)
        unlink(record_made);
    if (busy)
        return mv_fail(e, MV_ERR_USAGE, "%s holds the files layout, or a files-layout run is writing into it "
                       "(it holds %s/%s): --layout tar would mix two layouts in one output directory; use "
                       "another --out, or --layout files", o->out_dir, o->out_dir, MV_CLAIMS_LOCK);
    return mv_fail(e, MV_ERR_USAGE, "%s holds the files layout (%s): --layout tar would mix two layouts in one "
                   "output directory; use another --out, or --layout files", o->out_dir,
                   mv_escape(ex, esc, sizeof esc));
}

/* Opens what the run writes into: the resume state (*done), the manifest, the tar shards
 * (--layout tar). On failure closes
 * what it opened. */
static mv_status open_outputs(runner *R, int shard_k, int shard_n, mv_done **done, mv_err *e)
{
    const mv_run_opts *o = R->o;
    char mpath[4200];
    mv_name_manifest(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    mv_status st;
    *done = NULL;
    /* the manifest is a regular file of OUT: never followed out of it, never a FIFO to block on */
    struct stat sb;
    if (lstat(mpath, &sb) == 0 && !S_ISREG(sb.st_mode))
        return mv_fail(e, MV_ERR_IO, "%s: the manifest is %s, not a regular file: refused", mpath,
                       S_ISLNK(sb.st_mode) ? "a symbolic link" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                       : S_ISDIR(sb.st_mode) ? "a directory" : "a device or socket");
    int no_locks = 0;
    /* claims first: what it notes as read is then read by the resume set too */
    const char *mname = strrchr(mpath, '/') ? strrchr(mpath, '/') + 1 : mpath;
    /* the run lock, both layouts; a live run of other settings (fingerprint) refuses this one */
    if ((st = mv_claims_open(o->out_dir, mname, R->m->fingerprint, &R->claims, &no_locks, e)))
        return st;
    if (no_locks && !o->quiet)
        fprintf(stderr, "mvembed: %s: warning: the file system offers no locks: an output name is only "
                "taken when free or this input's own, and manifest merge/compact cannot tell that a run "
                "writes here\n", o->out_dir);
    /* what another run appends to this naming's manifest from here on may be the same inputs */
    struct stat ms;
    int64_t from = stat(mpath, &ms) == 0 ? (int64_t)ms.st_size : 0;
    if ((st = load_done(o, done, e)))
        goto fail_claims;
    long long limit = 0; /* a run refused for its --shard-samples leaves the marker too */
    char rec[4400];
    snprintf(rec, sizeof rec, "%s/%s", o->out_dir, MV_TAR_LIMIT_FILE);
    int made = o->layout == MV_LAYOUT_TAR && access(rec, F_OK) != 0;
    if (o->layout == MV_LAYOUT_TAR && (st = agree_tar_limit(R, &limit, e)))
        goto fail_done;
    if ((st = hold_layout(R, made ? rec : NULL, e)))
        goto fail_done;
    /* the run is let in: an earlier run's completion marker goes before its first change to OUT,
     * so a run that dies from here on leaves none (a refused run changed nothing: it stays) */
    int stale = 0;
    if ((st = mv_run_marker_remove(o->out_dir, shard_k, shard_n, &stale, e)))
        goto fail_done;
    if (stale && o->verbose)
        fprintf(stderr, "mvembed: %s: the completion marker of an earlier run removed\n", o->out_dir);
    if ((st = mv_manifest_open(mpath, &R->man, e)))
        goto fail_done;
    if (o->layout == MV_LAYOUT_TAR &&
        (st = mv_tar_set_open(o->out_dir, shard_k, shard_n, o->shard_size, limit, pl_tar_commit, R,
                              &R->tars, e)))
        goto fail_man;
    if (R->tars)
        mv_tar_set_test_pause(R->tars, o->test_pause_tar_open_ms);
    mv_tar_dedup_opts dd = {.run = mv_manifest_run_id(), .model = R->m->fingerprint, .from = from,
                            .claims = R->claims, .dropped = pl_tar_dropped, .appended = pl_tar_appended};
    if (R->tars && (st = mv_tar_set_dedup(R->tars, &dd, e)))
        goto fail_tars;
    /* --force redoes every input: a dead run's orphan samples would count as committed by another
     * run at this run's commits and take the place of its own (compact removes them later) */
    if (R->tars && !o->force && (st = tar_adopt(R, done, e)))
        goto fail_tars;
    return MV_OK;
fail_tars:
    mv_tar_set_free(R->tars);
    R->tars = NULL;
fail_man:
    mv_manifest_close(R->man, NULL);
    R->man = NULL;
fail_done:
    mv_done_free(*done);
    *done = NULL;
fail_claims:
    mv_claims_close(R->claims);
    R->claims = NULL;
    return st;
}

/* How many decoders and writers, and each decoder's share of the CPUs for video. */
static void size_threads(runner *R, int n_be, threads *th)
{
    const mv_run_opts *o = R->o;
    int jobs = o->jobs > 0 ? o->jobs : mv_cpu_count();
    /* each decode thread's video decoder gets its share of the CPUs: FFmpeg's default, a frame
     * thread per CPU in every decoder, puts jobs x CPUs threads on the CPUs, and its frame
     * threads decode ahead of the frames a sampled read wants */
    int cpus = mv_cpu_count();
    R->ictx.video_threads = cpus / jobs > 1 ? cpus / jobs : 1;
    /* writers compress (zstd) and fsync outputs that can be tens of MB each (27B layout: 5120
     * floats per token): on a GPU machine they, not decoding, are the slow CPU stage */
    /* half the CPUs held back two GPUs (bench/RESULTS.md, writers); writers sleep when there is
     * nothing to write, so: 7/8 of the CPUs, at most MAX_WRITERS */
    int writers = jobs - jobs / 8 < 2 ? 2 : jobs - jobs / 8;
    if (o->writers > 0) /* --writers: as given */
        writers = o->writers;
    writers = writers > MAX_WRITERS ? MAX_WRITERS : writers;
    if (o->verbose)
        fprintf(stderr, "mvembed: pipeline: %d decode threads, %d tower thread%s, %d writers (%d CPUs in "
                "this process's affinity mask)\n", jobs, n_be, n_be > 1 ? "s" : "", writers, cpus);
    th->jobs = jobs;
    th->writers = writers;
}

/* Makes the queues and starts the progress ticker, the counting walk and every stage's threads
 * (the tower stage T's, for n_be backends). MV_OK when each stage has a thread at least. */
static mv_status start_threads(runner *R, pl_towers *T, int n_be, threads *th, mv_err *e)
{
    const mv_run_opts *o = R->o;
    size_t qcap = (size_t)th->jobs * 2 + 4, ready_items = 0, ready_patches = 0;
    if (T)
        pl_towers_ready_room(T, R, &ready_items, &ready_patches);
    /* ready: at least qcap inputs, more while their patches fit two forwards per tower thread
     * (36 inputs made forwards of ~27 small images where 42 fit); done: a forward's inputs
     * whose outputs are in the tower threads' slabs (bounded there) */
    size_t rcap = ready_patches && ready_items > qcap ? ready_items : qcap;
    int qfail = mv_queue_init(&R->jobs, qcap);
    qfail |= mv_queue_init_weighted(&R->ready, rcap, qcap, ready_patches);
    qfail |= mv_queue_init(&R->done, rcap);
    pl_progress_start(R);
    if (R->progress) {
        int from_stdin = 0;
        for (int i = 0; i < o->n_paths; i++)
            from_stdin |= !strcmp(o->paths[i], "-");
        th->counting = !from_stdin && !mv_thread_create(&th->counter, pl_count_main, R);
    }
    th->dec = qfail || !T ? NULL : calloc(th->jobs, sizeof *th->dec);
    if (!th->dec)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory for the pipeline's queues");
    /* the towers and one writer before the decoders, which are many: where the address space
     * runs out (ulimit -v), each stage has its thread before the pool of decoders takes the rest */
    int err = 0;
    for (; !err && th->nt < n_be; th->nt++)
        if ((err = mv_thread_create(&th->tw[th->nt], pl_tower_main, pl_tower_arg(T, th->nt))))
            break;
    for (; !err && th->nw < 1; th->nw++)
        if ((err = mv_thread_create(&th->wr[th->nw], pl_writer_main, R)))
            break;
    for (; !err && th->nd < th->jobs; th->nd++)
        if ((err = mv_thread_create(&th->dec[th->nd], decode_main, R)))
            break;
    for (; !err && th->nw < th->writers; th->nw++)
        if ((err = mv_thread_create(&th->wr[th->nw], pl_writer_main, R)))
            break;
    if (!th->nd || !th->nt || !th->nw)
        return mv_fail(e, MV_ERR_NOMEM, "cannot start threads: %s%s", strerror(err),
                       err == EAGAIN ? " (an address-space limit, ulimit -v, or a limit on processes?)" : "");
    return MV_OK;
}

/* Drains the pipeline: each stage closes the next queue once its own threads are finished. */
static void drain(runner *R, threads *th)
{
    mv_queue_close(&R->jobs);
    for (int i = 0; i < th->nd; i++)
        pthread_join(th->dec[i], NULL);
    mv_queue_close(&R->ready);
    for (int i = 0; i < th->nt; i++)
        pthread_join(th->tw[i], NULL);
    mv_queue_close(&R->done);
    for (int i = 0; i < th->nw; i++)
        pthread_join(th->wr[i], NULL);
    if (th->counting)
        pthread_join(th->counter, NULL);
    free(th->dec);
    th->dec = NULL;
    mv_queue_destroy(&R->jobs);
    mv_queue_destroy(&R->ready);
    mv_queue_destroy(&R->done);
}

/* mv_pool_update's removed: says which pooled directory went (by: the directory of another shard
 * count that holds its rows now, or NULL) */
static void pooled_removed(const char *stem, const char *by, void *ud)
{
    const runner *R = ud;
    if (R->o->quiet)
        return;
    if (by)
        fprintf(stderr, "mvembed: %s/%s/ removed: its rows are in %s/ now (another shard count; its "
                "other shards' directories are written as they end)\n", R->o->out_dir, stem, by);
    else
        fprintf(stderr, "mvembed: %s/%s/ removed: its rows were replaced; a --pool mean run rebuilds it\n",
                R->o->out_dir, stem);
}

/* --pool mean: a run that went through its inputs rebuilds OUT/pooled/ from OUT's manifests (every
 * run's pooled ok inputs, and the failed ones listed); one that ended early (an interrupt, a fatal
 * error) removes the one it made stale, if it wrote anything. A run without --pool that wrote
 * lines removes the pooled directories whose rows it replaced (as a --pool run does with the other
 * shards' directories). Says on stderr what it did. */
static mv_status finish_pooled(runner *R, const mv_run_result *res, int early, mv_err *e)
{
    const mv_run_opts *o = R->o;
    char stem[64];
    if (R->shard_n > 1)
        snprintf(stem, sizeof stem, "pooled-%05d-of-%05d", R->shard_k, R->shard_n);
    else
        snprintf(stem, sizeof stem, "pooled");
    mv_pool_counts c;
    int gone_own = 0; /* removed by the walker before the run replaced rows (feed.c) */
    for (int i = 0; i < R->n_pooled_gone; i++) {
        int own = !strcmp(R->pooled_gone[i], stem);
        gone_own |= own;
        if (!own || o->pool != MV_POOL_MEAN) /* a --pool run's own: rebuilt, or "ended early" below */
            pooled_removed(R->pooled_gone[i], NULL, R);
    }
    if (o->pool != MV_POOL_MEAN)
        return res->ok + res->failed > 0 ? mv_pool_update(o->out_dir, NULL, &c, pooled_removed, R, e) : MV_OK;
    if (early) {
        if (res->ok > 0 && (mv_pool_remove(o->out_dir, stem) > 0 || gone_own) && !o->quiet)
            fprintf(stderr, "mvembed: %s/%s/ removed: this run ended early and changed outputs it was "
                    "made from (the next complete run writes it again)\n", o->out_dir, stem);
        return MV_OK;
    }
    mv_pool_target t = {stem, R->m->fingerprint, R->shard_k, R->shard_n, R->m->cfg.out_hidden, o->out_dtype,
                        R->tars && R->shard_n > 1 ? &R->pool_taken : NULL};
    mv_status st = mv_pool_update(o->out_dir, &t, &c, pooled_removed, R, e);
    int old = st ? 0 : mv_pool_remove_old(o->out_dir, stem);
    if (old > 0 && !o->quiet)
        fprintf(stderr, "mvembed: %s/%s.npy and %s.jsonl of an earlier build removed: they are in %s/ now\n",
                o->out_dir, stem, stem, stem);
    if (!st && !o->quiet)
        fprintf(stderr, "mvembed: %s/%s/: pooled.npy holds %zu rows, one per ok input; pooled.jsonl "
                "indexes them%s%zu input%s left out\n", o->out_dir, stem, c.rows, c.left ? " and lists the " : ", ",
                c.left, c.left == 1 ? "" : "s");
    if (!st && c.other && !o->quiet)
        fprintf(stderr, "mvembed: %s/%s/: %zu ok input%s of OUT made with other settings (fingerprints) not "
                "indexed\n", o->out_dir, stem, c.other, c.other == 1 ? "" : "s");
    char more[48] = ""; /* a warning, -q or not: a reader of both kinds of directory reads rows twice */
    if (c.beside > 1)
        snprintf(more, sizeof more, " and %zu more pooled-*-of-*/", c.beside - 1);
    if (!st && c.beside)
        fprintf(stderr, "mvembed: warning: %s/%s/%s also hold%s rows of inputs %s/%s/ holds (%s into this OUT): "
                "read %s/pooled/ alone or the pooled-*-of-*/ directories alone, never both (a glob of pooled* "
                "reads those rows twice)\n", o->out_dir, c.beside_first, more, c.beside > 1 ? "" : "s", o->out_dir,
                stem, R->shard_n > 1 ? "a run without --shard" : "--shard runs", o->out_dir);
    return st;
}

/* Closes the manifest and fills res; then keeps OUT's pooled directories current
 * (finish_pooled) while the run is still live in OUT (its claims are closed after: a run of
 * other settings cannot start replacing the outputs the rebuild reads). The run's first fatal
 * error wins. */
static mv_status finish(runner *R, mv_run_result *res, mv_err *e)
{
    const mv_run_opts *o = R->o;
    mv_status cst = mv_manifest_close(R->man, e);
    R->man = NULL;
    res->ok = atomic_load(R->tars ? &R->n_ok_lined : &R->n_ok); /* tar: what the manifest got */
    res->failed = atomic_load(&R->n_err);
    res->skipped = atomic_load(&R->n_skip);
    res->signal = o->interrupt ? *o->interrupt : 0;
    int fatal = atomic_load(&R->fatal);
    mv_err pe;
    if (fatal || cst || res->signal) /* ended early: the pooled directory is stale */
        finish_pooled(R, res, 1, &pe);
    if (fatal) {
        *e = R->err;
        return MV_ERR_IO;
    }
    if (cst || res->signal)
        return cst;
    return finish_pooled(R, res, 0, e);
}

/* finish, then the run leaves OUT (its claims and live entry). */
static mv_status finish_and_leave(runner *R, mv_run_result *res, mv_err *e)
{
    mv_status st = finish(R, res, e);
    /* an unsharded run's marker speaks for OUT as a whole; shard K's only for its own share, which
     * the other shards' live runs never take (Slurm array tasks run side by side) */
    if (R->shard_n <= 1)
        res->others_live = mv_claims_others_live(R->claims, res->live_other, sizeof res->live_other);
    mv_claims_close(R->claims);
    R->claims = NULL;
    return st;
}

/* The closing lines: counts and time, or the interrupt; with -v the timeline. */
static void report(runner *R, const mv_run_result *res, const threads *th, pl_towers *T, int n_dev)
{
    const mv_run_opts *o = R->o;
    double wall = mv_now() - R->t0;
    if (res->signal) {
        fprintf(stderr, "mvembed: %s; %ld done and kept (run again to resume)\n",
                res->signal == SIGXCPU ? "CPU time limit reached (ulimit -t): stopped" : "interrupted", res->ok);
        return;
    }
    char passed[300] = ""; /* "; passed over: not an image or video name: 2, hidden: 1" */
    for (int k = 0, n = 0; k < MV_WALK_SKIP_N; k++)
        if (R->walk_skipped[k])
            n += snprintf(passed + n, sizeof passed - (size_t)n, "%s%s: %ld", n ? ", " : "; passed over: ",
                          mv_walk_skip_str((mv_walk_skip)k), R->walk_skipped[k]);
    if (!o->quiet)
        fprintf(stderr, "mvembed: %ld ok, %ld failed, %ld skipped in %.1fs%s\n", res->ok, res->failed,
                res->skipped, wall, passed);
    if (!res->ok && !res->failed && !res->skipped) { /* said even with -q: nothing was done */
        /* what would take the passed-over ones: only the options not given already */
        char hint[300] = "";
        int n = 0;
        if (R->walk_skipped[MV_WALK_SKIP_NAME] && !o->all_files)
            n += snprintf(hint + n, sizeof hint - (size_t)n, "; --all-files takes other names");
        if (R->walk_skipped[MV_WALK_SKIP_HIDDEN] && !o->hidden)
            n += snprintf(hint + n, sizeof hint - (size_t)n, "; --hidden takes hidden ones");
        if (R->walk_skipped[MV_WALK_SKIP_OUT])
            snprintf(hint + n, sizeof hint - (size_t)n, "; files inside the output directory are never "
                                                        "inputs: give an --out outside the inputs");
        fprintf(stderr, "mvembed: no input found in the given paths%s%s%s%s\n", passed,
                passed[0] ? " (-v names them" : "", hint, passed[0] ? ")" : "");
    }
    if (o->verbose) {
        pl_device_time dev[MV_PIPELINE_MAX_TOWERS];
        for (int d = 0; d < n_dev; d++)
            dev[d] = pl_towers_time(T, d);
        pl_timeline(R, wall, th->jobs, th->nt, th->nw, dev, n_dev);
        if (R->ictx.device_resize)
            fprintf(stderr, "mvembed: %ld input%s resized by the backend on its device (the others by the "
                    "decode threads)\n", (long)atomic_load(&R->n_dev_resized),
                    atomic_load(&R->n_dev_resized) == 1 ? "" : "s");
    }
}

mv_status mv_pipeline_run(const mv_run_opts *o, mv_model *m, mv_backend **be, int n_be, int n_dev,
                          int shard_k, int shard_n, mv_run_result *res, mv_err *e)
{
    memset(res, 0, sizeof *res);
    mv_status st;
    if (n_be < 1 || n_be > MV_PIPELINE_MAX_TOWERS || n_dev < 1 || n_dev > n_be)
        return mv_fail(e, MV_ERR_USAGE, "pipeline: %d backends on %d devices: 1..%d backends, each device one or more",
                       n_be, n_dev, MV_PIPELINE_MAX_TOWERS);
    if ((st = mv_out_dir_make(o->out_dir, e)))
        return st;
    runner *R = pl_runner_new(o, m, shard_k, shard_n);
    if (!R)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    mv_done *done;
    if ((st = open_outputs(R, shard_k, shard_n, &done, e))) {
        pl_runner_free(R);
        return st;
    }
    threads th = {0};
    size_threads(R, n_be, &th);
    R->ictx.device_resize = 1; /* images stay decoded where every backend resizes on its device */
    for (int i = 0; i < n_be; i++)
        R->ictx.device_resize &= be[i]->resizes;
    mv_interrupt_watch(o->interrupt); /* decodes in flight stop at an interrupt too */
    R->resume = done; /* read by the counting walk too; freed after the threads are joined */
    pl_towers *T = pl_towers_new(R, be, n_be, n_dev);
    mv_err fe;
    st = start_threads(R, T, n_be, &th, &fe);
    if (!st)
        st = pl_feed(R, done, &fe);
    if (st)
        pl_set_fatal(R, &fe);
    drain(R, &th);
    mv_interrupt_watch(NULL);
    R->resume = NULL;
    mv_done_free(done);
    pl_progress_end(R);
    if (!(st = finish_and_leave(R, res, e)))
        report(R, res, &th, T, n_dev);
    pl_towers_free(T);
    pl_runner_free(R);
    return st;
}
