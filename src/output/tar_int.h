/* tar_int.h - what the tar layout's writer (tar_out.c) and its member writer and commit-time
 * check (tar_dedup.c) share: the set and shard structures and the ustar member writer. Not part of
 * the library's interface (mv_tar.h is).
 */
#ifndef MV_TAR_INT_H
#define MV_TAR_INT_H

#include "mv_hashset.h"
#include "mv_tar.h"

#include <archive.h>
#include <pthread.h>
#include <stdatomic.h>

/* Runs into one OUT over the same inputs (mv_tar_set_dedup): what this run knows of the others'
 * samples, read from its naming's manifest under that manifest's lock when a shard is committed:
 * every ok line of another run of this model since the run started. Beside it the claims' view
 * (mv_claims_ok_of_other) for other namings' manifests, under OUT's commit lock: it keeps an
 * input's newest line only, and without locks tells nothing. */
typedef struct {
    mv_tar_dedup_opts o;
    char run[17], model[17];
    int64_t off;        /* the manifest is read up to here */
    int started;        /* off has been moved back to the start of its line */
    mv_hashset others;  /* inputs (mv_line_input_key) another run has an ok line for since */
    int commit_locked;  /* OUT's commit lock is held (o.claims) */
} mv_tar_dd;

struct mv_tar_set {
    char *dir;
    int k, n;
    long long target, max_samples; /* bytes; samples (0: no limit) */
    atomic_llong next;    /* next shard number to try */
    /* choosing a shard number and creating its temporary file is one step under this mutex (the
     * run's writers) and an flock of the manifest this naming shares (other runs into OUT); with
     * dd, so is a shard's commit (check, name, lines) */
    pthread_mutex_t mu;
    int lock_fd;
    int pause_ms;         /* test hook: a pause after creating a temporary shard */
    mv_tar_commit_fn commit;
    void *ud;
    char host[17];        /* hash of this host's name, 16 hex digits */
    mv_tar_dd *dd;        /* NULL: no check at commit (manifest compact) */
};

typedef struct {
    int64_t off;          /* the <key>.npy member's data */
    int64_t len;          /* its size */
    int64_t hdr;          /* its NPY header's size: the array data is at off + hdr */
} mv_tar_npy_at;

struct mv_tar_shard {
    struct archive *a;
    int fd;
    char *tmp, *fin;      /* full paths: temporary and final */
    char name[96];        /* final name relative to OUT */
    char stem[80];        /* key prefix: name between "shard-" and ".tar" */
    char key[100];        /* key of the latest sample */
    int64_t pos;          /* bytes written so far (the write callback's count) */
    int64_t flushed;      /* bytes whose writeback has been started (mv_start_writeback) */
    long n;               /* samples written */
    char *lines;          /* manifest lines of the samples, each ending in '\n' */
    size_t nlines, cap;
    mv_tar_npy_at *npy;   /* [n]: where each sample's .npy member is */
    size_t npy_cap;
    int werrno;           /* errno of a failed write, 0 if none */
};

/* Opens sh->a: a ustar archive, no blocking, written to sh->fd through the counting callback. */
mv_status mv_tar_archive_open(mv_tar_shard *sh, mv_err *e);

/* Writes one member name with data[0..len); *data_off receives the offset of its data. */
mv_status mv_tar_member(mv_tar_shard *sh, const char *name, const void *data, size_t len,
                        int64_t *data_off, mv_err *e);

/* Notes where the sample sh->n's .npy member is (for a rewrite without some samples). */
mv_status mv_tar_note_npy(mv_tar_shard *sh, int64_t off, size_t len, size_t hdr, mv_err *e);

/* With s->dd: takes the commit lock (s->mu and the manifest's flock), reads the manifest lines
 * appended since the last look, and rewrites sh (complete and synced, not yet named) without
 * the samples of inputs another run has committed meanwhile (sh->n, lines and files updated; 0
 * samples left: nothing written, the caller drops the shard). On failure the lock is released. */
mv_status mv_tar_dedup_begin(mv_tar_set *s, mv_tar_shard *sh, mv_err *e);

/* Appends text[0..len) (complete lines) to the manifest through the lock's descriptor, the lock
 * held (as mv_manifest_append_lines: a torn last line ended first, cut back on failure,
 * fdatasync), then tells the run (o.appended). */
mv_status mv_tar_dedup_append(mv_tar_set *s, const char *text, size_t len, mv_err *e);

/* Releases the commit lock mv_tar_dedup_begin took. */
void mv_tar_dedup_end(mv_tar_set *s);

void mv_tar_dedup_free(mv_tar_dd *dd);

#endif
