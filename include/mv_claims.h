/* mv_claims.h - output names claimed across processes sharing one OUT (files layout), and the
 * lock that tells `manifest compact`/`merge` a run is writing there.
 *
 * OUT/.mvembed.lock holds the names of the manifests runs append to, one a line, and is locked
 * with OFD locks (fcntl(2): per open file, shared by NFSv4 and local file systems): byte 0 shared
 * by every run for its whole life; byte 1 exclusive while a starting run adds its manifest to the
 * list and notes where each manifest's lines end; byte 2 + slot exclusive while one output whose
 * name falls in that slot (a hash of the name, MV_CLAIM_SLOTS slots) is claimed, renamed into
 * place and its manifest line appended (mv_claims_take ... mv_claims_release), so outputs of
 * different names are written side by side and a starting run never waits for claims; compact
 * and merge take byte 0 exclusively (mv_claims_exclusive), so they never rewrite a manifest a run
 * appends to. Under its slot the claimer first reads the manifest lines every process appended
 * since its last look (every manifest of OUT, from where it stopped), so an output name another
 * input holds is never taken: the later input fails "already holds". It also holds a line per
 * live run ("live SLOT FP PID RUN HOST", its slot's byte after the index byte held shared while
 * it runs), so that a run of another output fingerprint is refused while one is live (mv_claims_open).
 * Runs of one OUT must share
 * this protocol (builds before it claimed every name under byte 1). What it
 * is not: the resume decision at the start of a run (feed.c, over the manifests read then), and
 * the tar layout's shards (tar_out.c).
 */
#ifndef MV_CLAIMS_H
#define MV_CLAIMS_H

#include "mv_common.h"
#include "mv_manifest.h" /* mv_done_input_stat */

typedef struct mv_claims mv_claims;

/* Claim slots: names whose mv_claims_slot differ never wait for each other. */
#define MV_CLAIM_SLOTS 256
int mv_claims_slot(const char *out_rel);

/* The lock file's name in OUT. Its bytes: 0 the run lock, 1 the list of manifests, 2.. the
 * claim slots (MV_CLAIMS_SLOT_BYTE), then a files-layout run's (mv_claims_hold_files), then the
 * one --pool mean takes around a rebuild of OUT's pooled directories (pool.c), then one per live
 * run (mv_claims_open), then one per input slot (mv_claims_take), then the tar layout's commit
 * lock (mv_claims_commit_lock). */
#define MV_CLAIMS_LOCK ".mvembed.lock"
#define MV_CLAIMS_SLOT_BYTE(slot) (2 + (slot))
#define MV_CLAIMS_INDEX_BYTE (2 + MV_CLAIM_SLOTS + 1)
#define MV_CLAIMS_LIVE_BYTE0 (MV_CLAIMS_INDEX_BYTE + 1)

/* Opens (creating) OUT's lock file and takes the run's shared lock (waiting while a compact or
 * merge holds it exclusively); with fp (the run's output fingerprint), refuses the run
 * (MV_ERR_USAGE, e naming OUT, the live run's id, pid, host and both fingerprints) when a run
 * of another fingerprint is live in OUT now, else enters this run as live with fp (a line of the
 * lock file, "live SLOT FP PID RUN HOST", and a byte held shared until mv_claims_close), so that
 * runs of other settings never write into one OUT at once; adds manifest (the file name in OUT
 * the run appends to) to the lock file's list of manifests, then notes where each manifest of
 * OUT's whole lines end now: later lines of the listed ones are what mv_claims_take reads.
 * *no_locks = 1 when the file system offers no locks (then claims are kept apart as far as lines
 * already written and exclusive creation can tell: mv_claims_take's *may_replace; live runs are
 * not told apart). MV_ERR_IO when the file cannot be made. */
mv_status mv_claims_open(const char *out_dir, const char *manifest, const char *fp, mv_claims **c,
                         int *no_locks, mv_err *e);

/* Takes the claim lock of out_rel's slot (*slot; this process's threads and other processes
 * claiming a name of that slot wait), with abs (the input's path from /, or NULL) first the lock
 * of the input's slot, reads the new manifest
 * lines and checks that no other input than `input` (mv_done_same_input) holds out_rel (an
 * output name with its suffix), and that no other live run embedded this input (found by abs)
 * under another name meanwhile (from the file as this run read it: now, its size and mtime, or
 * NULL; a line of other ones does not count): MV_ERR_OUTPUT, elsewhere[cap] (may be NULL) naming that output,
 * "" otherwise. MV_OK: the locks are held until mv_claims_release, and
 * *may_replace says whether an existing file at out_rel may be replaced: 1 under a working lock
 * (a file nobody's lines hold is a crashed run's), or where this input's own line holds it; 0
 * without locks otherwise (another run may be writing it: the caller only takes a free name).
 * MV_ERR_OUTPUT with e naming both inputs: held by another (the lock is released); MV_ERR_IO /
 * MV_ERR_NOMEM: the lock or reading failed (released). */
mv_status mv_claims_take(mv_claims *c, const char *input, const char *abs, const mv_done_input_stat *now,
                         const char *out_rel, int *may_replace, int *slot, char *elsewhere, size_t cap, mv_err *e);
void mv_claims_release(mv_claims *c, int slot);

/* How many other runs are live in OUT now (0 without locks); who (may be NULL) names the first:
 * "run RUN, pid PID on HOST". */
int mv_claims_others_live(mv_claims *c, char *who, size_t cap);

/* 1 when a line another run appended since c was opened names out_rel as an ok output (or the
 * manifests cannot be read); 0 when none does, or c is NULL. */
int mv_claims_named(mv_claims *c, const char *out_rel);

/* The tar layout's commit over every naming (tar_dedup.c): mv_claims_commit_lock takes (lock 1,
 * waiting) or drops (0) OUT's commit lock, one byte of the lock file held exclusively around a
 * shard's check, name and lines by runs of any --shard naming (MV_OK, or MV_ERR_IO naming the
 * file; nothing without locks). Under it, mv_claims_others_grew reads the registered manifests'
 * new lines and says 1 when a manifest other than mine (a file name in OUT) gained lines since c
 * was opened (or they cannot be read), 0 otherwise and without locks; then mv_claims_ok_of_other
 * says 1 when, among the lines read, input's newest is an ok line of another run (another run
 * id, the same model fingerprint; input as written, or abs: its path from /, may be NULL) that
 * records the input file as now (its size and mtime as this run read it; NULL: not compared). */
mv_status mv_claims_commit_lock(mv_claims *c, int lock, mv_err *e);
int mv_claims_others_grew(mv_claims *c, const char *mine);
int mv_claims_ok_of_other(mv_claims *c, const char *input, const char *abs, const mv_done_input_stat *now,
                          const char *run, const char *model);

/* Drops the run's lock and frees c (NULL is fine). */
void mv_claims_close(mv_claims *c);

/* A files-layout run holds a byte of the lock file (shared) while it runs, so that a tar-layout
 * run starting into the same OUT sees it before either writes an output (mv_claims_files_run):
 * MV_OK, or MV_ERR_IO naming the file. Nothing where the file system offers no locks. */
mv_status mv_claims_hold_files(mv_claims *c, mv_err *e);

/* 1 when a files-layout run (another process) holds that byte now; 0 when none, or no locks. */
int mv_claims_files_run(const mv_claims *c);

/* Takes OUT's run lock exclusively without waiting: MV_OK (hold it until mv_claims_close), or
 * MV_ERR_USAGE naming the pid of a run that holds OUT. For compact and merge. */
mv_status mv_claims_exclusive(const char *out_dir, mv_claims **c, mv_err *e);

/* 1 when OUT's file system offered no locks to c (no run holding OUT can be seen), else 0. */
int mv_claims_lockless(const mv_claims *c);

#endif
