/* mv_run_record.h - the run record and the completion marker.
 *
 * The run record: one JSON file per run (per shard when sharded) beside the manifest,
 * OUT/run-RUN.json or OUT/run-KKKKK-of-NNNNN-RUN.json (mv_name_run_record), written atomically
 * when the run ends (also after an interrupt or a fatal error, when OUT still takes it). It says
 * what ran and what came of it: the model as given, its resolved directory and snapshot commit,
 * the resolved settings and the fingerprint, the mvembed version, counts by status, failures by
 * cause, bytes written, times, rates and, in the tar layout, samples and bytes per tar shard.
 * Failures, bytes and shards come from the manifest lines this run wrote (its run id), read back
 * from where the manifest ended when the run started.
 *
 * The completion marker: OUT/_SUCCESS or OUT/_SUCCESS-KKKKK-of-NNNNN (mv_name_marker), a small
 * JSON object naming the run and its record, written (atomically, after the record) only by a
 * run that went through every input it owns; a run removes its naming's marker before it starts
 * work. Fields of both: docs/run-record.md. Not here: the manifest's record (mv_manifest.h).
 */
#ifndef MV_RUN_RECORD_H
#define MV_RUN_RECORD_H

#include "mv_common.h"
#include "mv_run.h"

/* The version of the run record's schema ("schema" in the file). */
#define MV_RUN_RECORD_SCHEMA 2

/* The version of the completion marker's schema. */
#define MV_RUN_MARKER_SCHEMA 1

typedef struct {
    const mv_run_opts *o;
    const char *model_dir;   /* the directory loaded (o->model_dir resolved) */
    const char *fingerprint; /* the model fingerprint of the run's ok lines */
    const char *settings;    /* mv_backend_settings() of the backend that ran */
    int shard_k, shard_n;
    int64_t manifest_start;  /* the manifest's size when the run started */
    double t_start, t_end;   /* mv_now() */
    double started_at;       /* wall clock, seconds since the epoch */
    const mv_run_result *res;
    const char *fatal;       /* the fatal error's message, or NULL */
} mv_run_info;

/* The failure cause of an error line's message (the record's "failures" keys; the man page lists
 * them): a fixed word chosen by what the message says. */
const char *mv_run_failure_cause(const char *msg);

/* Writes the record of run ri into ri->o->out_dir (temp file, fsync, rename, fsync of OUT), its
 * name into path[cap] when path is non-NULL. MV_ERR_IO naming the file and cause. */
mv_status mv_run_record_write(const mv_run_info *ri, char *path, size_t cap, mv_err *e);

/* 1 when the run went through every input it owns: neither fatal nor interrupted (failed inputs
 * do not matter). */
int mv_run_complete(const mv_run_info *ri);

/* 1 when the run writes its completion marker: complete, and no other run was still live in OUT
 * as it left (they may redo or add inputs; the last of them to get through writes it). */
int mv_run_marks(const mv_run_info *ri);

/* Removes the completion marker of shard k of n from out (fsync of out after it), *removed 1 when
 * there was one. None there, or no out yet, is fine; MV_ERR_IO when it cannot be removed. */
mv_status mv_run_marker_remove(const char *out, int k, int n, int *removed, mv_err *e);

/* Writes the completion marker of run ri (temp file, fsync, rename, fsync of OUT), its path into
 * path[cap] when path is non-NULL. Call it after the record, for a run mv_run_marks says
 * writes one. MV_ERR_IO naming the file and cause. */
mv_status mv_run_marker_write(const mv_run_info *ri, char *path, size_t cap, mv_err *e);

#endif
