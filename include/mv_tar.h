/* mv_tar.h - the tar layout (--layout tar): embeddings as WebDataset-compatible tar shards.
 *
 * What it is: a writer of OUT/shard-SSSSS.tar (or OUT/shard-KKKKK-of-NNNNN-SSSSS.tar for shard K
 * of N of a --shard run; mv_name_tar_shard, mv_names.h), each holding, per input, two members:
 *   <key>.npy   the embedding as an uncompressed NPY v1.0 file (header padded to 64 bytes), and
 *   <key>.json  its manifest record (input path, shape, dtype, shard, key, offset, ...).
 * A key is the shard file's name between "shard-" and ".tar", a '-', and the sample's index in
 * the shard (6 digits or more): "00003-000012", "00001-of-00004-00003-000012". Keys hold no dot
 * (WebDataset groups members by the name up to the first dot) and are unique within an OUT,
 * because shard names are. Members are ustar entries: 512-byte headers, data padded to 512
 * bytes, so the array data of <key>.npy starts 64-byte aligned in the tar; its byte offset is
 * measured while writing and recorded as "offset" (np.memmap(tar, offset=...) reads it).
 *
 * Each writer thread owns one open shard (mv_tar_shard), written under a temporary name
 * ".tmp-tar-<pid>-<host hash>-<final name>" in OUT. When the shard reaches about the target size
 * or holds the most samples a shard may (or the run ends) it is completed: end-of-archive, fsync, renamed to its final name (never over
 * an existing file), directory fsync'd, and only then are the manifest lines of its samples handed
 * to the commit callback, all at once (with mv_tar_set_dedup: appended by the set itself, the
 * naming and the append one step under the manifest's lock, after samples of inputs other runs
 * committed meanwhile were taken out; the others keep their keys, so indexes may skip). A crash therefore loses only open shards (their inputs
 * have no manifest line and are redone by the next run); a manifest line never points into a
 * shard that does not exist. A shard's number is chosen and its temporary file created in one
 * step under an flock of the manifest that the same naming writes (so runs sharing one OUT, with
 * the same --shard, exclude each other there) and the run's mutex: above every number used in OUT
 * under that naming at that moment (final shards, and temporary shards of any process).
 *
 * What it is not: it does not decide which inputs to embed, does not append to the manifest
 * itself (the caller's commit callback does), and does not read tars back. Writing is done with
 * libarchive (ustar format, no blocking so that the bytes written so far are the file position).
 */
#ifndef MV_TAR_H
#define MV_TAR_H

#include "mv_claims.h"
#include "mv_common.h"
#include "mv_manifest.h"
#include "mv_npy.h"

/* Called once per completed shard with the manifest lines of its samples: text[0..len) is one
 * or more complete lines, each ending in '\n'. Must be thread-safe (several writers complete
 * shards). A non-OK return is passed on to the caller of mv_tar_add / mv_tar_close. */
typedef mv_status (*mv_tar_commit_fn)(void *ud, const char *text, size_t len, mv_err *e);

typedef struct mv_tar_set mv_tar_set;     /* per run: OUT, naming, shard counter, commit */
typedef struct mv_tar_shard mv_tar_shard; /* one open shard, used by one thread at a time */

/* Default target size of a shard in bytes (--shard-size). */
#define MV_TAR_DEFAULT_SHARD_SIZE (1024LL * 1024 * 1024)

/* Prepares writing shards into out_dir (which must exist) for shard k of n (n <= 1: unsharded
 * names), each about target_bytes large and of at most max_samples samples (0: any number): a
 * shard is completed before a sample would take it past that size or past that count, whichever
 * comes first (a shard holds at least one sample). Removes temporary shards left by dead processes
 * of this host, then starts the shard counter above every number used in out_dir. Whether
 * max_samples agrees with OUT's earlier shards is the caller's (mv_tar_limit.h). */
mv_status mv_tar_set_open(const char *out_dir, int k, int n, long long target_bytes, long long max_samples,
                          mv_tar_commit_fn commit, void *ud, mv_tar_set **s, mv_err *e);
void mv_tar_set_free(mv_tar_set *s);

/* Test hook (mv_run_opts.test_pause_tar_open_ms): every temporary shard, once created, waits ms
 * milliseconds before its first sample, so that a test can make two runs choose their shard
 * numbers while the other's shard is open. 0: no pause. */
void mv_tar_set_test_pause(mv_tar_set *s, int ms);

/* Runs into one OUT over the same inputs (two runs given one folder, an array without --shard):
 * with this set, a completed shard is committed under the flock of its naming's manifest (the
 * commits of all runs of that naming one at a time): the manifest lines appended since the last
 * look are read, and the samples of inputs that another run (another "run" id, the same "model")
 * has an ok line for, written since from, are taken out of the shard before it gets its name
 * (it is rewritten without them; a shard left with none is not published). Its lines are then
 * appended under that same lock, so of two runs the later committer always sees the earlier's
 * lines: no input gets two samples. With claims, the commit also holds OUT's commit lock (every
 * naming's commits one at a time) and takes out the samples of inputs whose newest line, in any
 * manifest of OUT since the run started, is another run's ok line: runs of different --shard
 * namings over the same inputs at once make one sample each too. Callbacks get the set's ud. */
typedef struct {
    const char *run;   /* this run's id (mv_manifest_run_id) */
    const char *model; /* its fingerprint: lines of other settings are not its samples */
    int64_t from;      /* the manifest's size before the run read it for resume */
    mv_claims *claims; /* the run's claims: other namings' lines too, under OUT's commit lock (NULL:
                        * this naming's manifest only) */
    void (*dropped)(void *ud, const char *input); /* a sample taken out: embedded by another run */
    void (*appended)(void *ud, long n);           /* a shard's n lines appended */
} mv_tar_dedup_opts;
mv_status mv_tar_set_dedup(mv_tar_set *s, const mv_tar_dedup_opts *o, mv_err *e);

/* Adds one sample: data [rows, cols] float32 stored as dt (MV_DT_F32, or MV_DT_F16 rounded to
 * nearest even). r is the input's manifest record; this fills r->output and r->shard with the
 * shard's name, r->key and r->offset (pointing into *sh, valid until the next call), writes the
 * record as <key>.json and keeps its line for the commit. *sh is the caller's open shard: NULL
 * opens a new one; a full one is completed (and committed) first. An error leaves the shard
 * unusable: the caller passes it to mv_tar_abandon. */
mv_status mv_tar_add(mv_tar_set *s, mv_tar_shard **sh, mv_record *r, mv_dtype dt, int64_t rows,
                     int64_t cols, const float *data, mv_err *e);

/* Adds a sample written before (manifest compact moves live samples out of shards holding dead
 * ones): npy[0..npy_len) is its <key>.npy member as it was (npy_hdr bytes of NPY header), rec its
 * record's line as written then (no '\n'); the copy's "output", "shard", "key" and "offset" are
 * set in it, and it is written as the new <key>.json and kept for the commit. */
mv_status mv_tar_add_copy(mv_tar_set *s, mv_tar_shard **sh, const uint8_t *npy, size_t npy_len,
                          size_t npy_hdr, const char *rec, mv_err *e);

/* Completes sh (end-of-archive, fsync, rename, directory fsync) and commits its lines; frees sh
 * in any case (on failure its temporary file is removed). NULL is fine. */
mv_status mv_tar_close(mv_tar_set *s, mv_tar_shard *sh, mv_err *e);

/* Drops sh without completing it: its temporary file is removed, nothing is committed. */
void mv_tar_abandon(mv_tar_shard *sh);

/* Parses a size like "1000000", "64K", "512M", "1G" (powers of 1024, either case; a trailing "B" or "iB" is
 * accepted: "64KiB", "1GB"). Returns 0 and *bytes, or -1 when s is not a positive size. */
int mv_tar_parse_size(const char *s, long long *bytes);

#endif
