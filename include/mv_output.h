/* mv_output.h - atomic writing of embeddings as OUT/<rel>.npy.zst.
 *
 * The file is an NPY v1.0 array compressed as ONE zstd frame carrying its content size and a
 * checksum, so `zstd -d` + numpy.load read it. It is written to a temp file in the same directory
 * (".tmp-<pid>-<random>", write-locked with an OFD lock from creation until it is renamed or
 * removed), fsync'd, renamed over the final name, and the directory fsync'd: a reader never sees a
 * partial file. This module does not decide names or detect collisions between inputs; the
 * caller does. It keeps no state of its own: a writer's compression context and buffers
 * (mv_output_writer) and the run's set of swept directories (mv_output_swept) are the caller's.
 */
#ifndef MV_OUTPUT_H
#define MV_OUTPUT_H

#include "mv_common.h"
#include "mv_hashset.h"
#include "mv_npy.h"

#include <pthread.h>

/* Final path out_dir/rel.npy.zst into buf[cap]. rel must be relative: not empty, not starting
 * with '/', no "", "." or ".." component (MV_ERR_USAGE otherwise); MV_ERR_LIMIT if it does not
 * fit in cap. */
mv_status mv_output_path(const char *out_dir, const char *rel, char *buf, size_t cap, mv_err *e);

/* The directories a run has swept of abandoned temp files (mv_output_clean_temps): each is swept
 * once per run, by the first of its writers to write there. Shared by the run's writers (under
 * its own lock); the run owns it: mv_output_swept_init before its writers start,
 * mv_output_swept_destroy after they end. */
typedef struct {
    pthread_mutex_t mu;
    mv_hashset dirs;
} mv_output_swept;
void mv_output_swept_init(mv_output_swept *s);
void mv_output_swept_destroy(mv_output_swept *s);

/* One writer's resources, kept across its outputs: a zstd compression context and its buffers
 * (zstd's cRess_t in programs/fileio.c is the model). Made once per writer thread and passed to
 * each of its mv_output_write calls; never used by two threads at once. swept: the run's set,
 * or NULL (then every write sweeps its directory: for a single output). MV_ERR_NOMEM, or MV_OK
 * with *out to free with mv_output_writer_free (NULL is fine there). */
typedef struct mv_output_writer mv_output_writer;
mv_status mv_output_writer_new(mv_output_swept *swept, mv_output_writer **out, mv_err *e);
void mv_output_writer_free(mv_output_writer *w);

/* The dtype an output of count values is stored as when want was asked for: want itself, except
 * MV_DT_AUTO: MV_DT_F16 when every value is inside f16's range (mv_f16_fits_n), else MV_DT_F32.
 * f16 keeps a bf16 value exactly when it is zero or its magnitude lies in [2^-17, 65504]; one
 * under 2^-17 is rounded to a multiple of 2^-24 (an absolute error of at most 2^-25). The caller
 * resolves auto to f32 up front where the values are not the bf16 tower's (an f32 tower, pooled
 * means), whose precision f16 would not keep. */
mv_dtype mv_output_dtype(mv_dtype want, const float *data, size_t count);

/* A claim on the output name rel, asked by mv_output_write once the temp file is whole and
 * synced, just before it takes the final name: a status other than MV_OK leaves the final name as
 * it is (the temp file is removed) and is returned by mv_output_write. *may_replace (preset to 1)
 * says whether an existing file there may be replaced (it is this input's, or nobody's as far as
 * a locked look can tell); 0: the name is only taken when free. What the claim holds (a lock:
 * mv_claims.h) is the caller's to release once it has recorded the output. */
typedef mv_status (*mv_output_claim_fn)(void *ud, const char *rel, int *may_replace, mv_err *e);
void mv_output_writer_set_claim(mv_output_writer *w, mv_output_claim_fn fn, void *ud);

/* Called (with the claim's ud) when the output replaces a file at its name: after that file is
 * removed and before the new one takes the name, with the new file's size in bytes. The caller
 * records the output then (its manifest line), so that a process killed meanwhile leaves a line
 * naming a missing file at worst, never the new file under the old file's line (another dtype,
 * model or input). A status other than MV_OK leaves the name empty and is returned. */
typedef mv_status (*mv_output_replacing_fn)(void *ud, size_t bytes, mv_err *e);
void mv_output_writer_set_replacing(mv_output_writer *w, mv_output_replacing_fn fn);

/* Writes data (float32, [rows, cols] C order) as out_dir/rel.npy.zst through writer w, stored as
 * dt (MV_DT_F32, or MV_DT_F16 / MV_DT_BF16 (<u2 bit patterns) converted with round-to-nearest-
 * even; never MV_DT_AUTO: see mv_output_dtype), compressed at zstd_level.
 * Creates missing parent directories (mode 0777 & ~umask). The first time w's run writes into a
 * directory, abandoned temp files there are removed (mv_output_clean_temps). Data holding NaN or
 * Inf is not written (MV_ERR_MODEL). On success final_path (if non-NULL) receives the final path
 * and *bytes (if non-NULL) the file's size. On any failure the temp file is removed and e names
 * the file and cause (e.g. "No space left on device"); the status says whether other outputs can
 * still be written: MV_ERR_IO for the disk (ENOSPC, EDQUOT, EROFS, EIO, EFBIG, EMFILE, ENFILE, ENOMEM),
 * MV_ERR_OUTPUT for this output's name or place (ENAMETOOLONG, EISDIR, ENOTDIR, EACCES, ...).
 * Threads may write at once, each through its own writer. */
mv_status mv_output_write(mv_output_writer *w, const char *out_dir, const char *rel, mv_dtype dt,
                          int64_t rows, int64_t cols, const float *data, int zstd_level,
                          char *final_path, size_t cap, size_t *bytes, mv_err *e);

/* A temp file nobody holds a lock on and last modified longer ago than this (seconds) is
 * abandoned even when its pid runs on this machine; on a file system without locks, age alone
 * decides. */
#define MV_OUTPUT_TEMP_MAX_AGE (24 * 3600)

/* Removes abandoned ".tmp-<pid>-*" files in dir: those that no process holds a lock on (their
 * writer died) and whose pid is not running on this machine or that were last modified more than
 * MV_OUTPUT_TEMP_MAX_AGE ago; where the file system offers no locks, only those older than
 * MV_OUTPUT_TEMP_MAX_AGE. A live writer's file (another process, machine, container) is never
 * removed where locks are shared. Returns the number removed, or -1 if dir cannot be read.
 * mv_output_write calls it lazily. */
int mv_output_clean_temps(const char *dir);

/* The same for the directory beneath out_dir (mv_beneath_dir: never through a link) that holds
 * the output rel (a path relative to out_dir), unless s already holds that directory (then 0);
 * adds it to s. For manifest compact, which sweeps every directory its lines' outputs are in. */
int mv_output_sweep_of(const char *out_dir, const char *rel, mv_output_swept *s);

/* Write-locks (OFD lock, waiting) the open temp file fd the way mv_output_write does, so that
 * the sweep leaves it alone until it is renamed or removed: for other writers of ".tmp-<pid>-*"
 * files (manifest merge). 0, or -1 with errno (ENOLCK, EINVAL, ...: no locks there). */
int mv_output_lock_temp(int fd);

/* The writer's pid of a temporary name ".tmp-<pid>-<kind>" (pid in decimal, > 0), with *kind
 * (when kind is not NULL) pointing at what follows "<pid>-" in name: a random suffix (outputs),
 * "manifest.jsonl", "pooled..." (pool.c's directories), ...; -1 for any other name. The one
 * reader of these names for every sweep (temps.c). */
long mv_output_temp_name(const char *name, const char **kind);

/* What a sweep knows of a temp's writer: LIVE, it holds the temp's write lock; UNLOCKED, nobody
 * holds the lock (it died, unless its pid still runs here: a mount whose locks are local to one
 * machine); DEAD, the caller knows it is gone (pooled rebuilds take turns under OUT's index lock,
 * so another's temp seen under it is a killed one's); UNKNOWN, nothing tells (no locks). */
typedef enum {
    MV_TEMP_WRITER_LIVE,
    MV_TEMP_WRITER_UNLOCKED,
    MV_TEMP_WRITER_DEAD,
    MV_TEMP_WRITER_UNKNOWN,
} mv_temp_writer;

/* The rule of every sweep for one temp (fstat st, written by pid) given w: 1 when it is abandoned
 * and may be removed, else 0. LIVE: never; DEAD: always; UNLOCKED: when its pid is not running
 * here or it is older than MV_OUTPUT_TEMP_MAX_AGE; UNKNOWN: age alone, older than that. */
struct stat;
int mv_output_temp_gone(const struct stat *st, long pid, mv_temp_writer w);

/* The sweep's rule for one temp file, open as fd (read-only) with fstat st, written by pid: 1 when
 * it is abandoned and may be removed (nobody holds its lock, and its pid is not running here or
 * it is older than MV_OUTPUT_TEMP_MAX_AGE; without locks on the file system, age alone), else 0:
 * mv_output_temp_gone with what fd's lock tells. Takes a read lock on fd when it can (dropped
 * when fd is closed). For other sweeps of temp files that follow the lock rule (the tar
 * layout's temporary shards). */
int mv_output_temp_abandoned(int fd, const struct stat *st, long pid);

/* Makes OUT (and the directories on the way) and checks that it can be read, written and
 * searched. When it cannot, the directories this call made go again, and when the umask took the
 * owner's permissions from them (umask 0777: mode 000; 0222: r-x) the message says so. MV_ERR_IO
 * naming OUT and the cause. */
mv_status mv_out_dir_make(const char *out, mv_err *e);

#endif
