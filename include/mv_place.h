/* mv_place.h - the exclusive final name: a complete file written under a temporary name gets its
 * final name only where no file has that name, on every file system that can promise it.
 *
 * What it is: one primitive for every writer of OUT (tar shards, OUT's records, the files
 * layout's outputs): renameat2(RENAME_NOREPLACE); where the file system lacks it (EINVAL, ENOSYS,
 * EOPNOTSUPP: NFS clients, some FUSE and network file systems) link(2) of the temporary file to
 * the final name, which fails when the name exists and is atomic on NFS too, then unlink of the
 * temporary name (a name left when that unlink fails is the sweep's: the file has its name);
 * where neither exists, a refusal naming the file system, or with MV_PLACE_CHECK_RENAME a check
 * and a rename. It replaces a file only with MV_PLACE_REPLACE (one's own earlier output: a redo).
 * A link that NFS reports as failed after a retransmission is checked by the link count, as
 * open(2) advises. What it is not: the fsync of the file and of its directory (the caller's), the
 * choice of names, or the lock that keeps other writers of a name away (mv_claims.h).
 */
#ifndef MV_PLACE_H
#define MV_PLACE_H

#include "mv_common.h"

/* mv_place's flags */
#define MV_PLACE_REPLACE 1u      /* an existing fin is replaced (plain rename) instead of kept */
#define MV_PLACE_CHECK_RENAME 2u /* with neither RENAME_NOREPLACE nor hard links: fin checked to be
                                  * free, then a rename; not atomic, so only for a caller whose lock
                                  * keeps other writers of fin away (the files layout's claim) */

/* Gives the complete file tmp the name fin (both relative to the directory dfd, or AT_FDCWD)
 * unless a file has that name (see flags). MV_OK; MV_ERR_IO with e naming fin and the cause
 * ("exists already: not replaced", the errno's text, or the file system that cannot do it) and
 * *err (when not NULL) its errno: EEXIST when fin exists and was kept. */
mv_status mv_place(int dfd, const char *tmp, const char *fin, unsigned flags, int *err, mv_err *e);

/* The window of a temporary file that a single-threaded command makes and renames (manifest
 * merge and compact): from begin to end, SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGXCPU remove tmp
 * (unlink is async-signal-safe; after the rename it finds nothing) and then end the process as
 * they would have (the default action, re-raised); one the process ignores (SIGHUP under nohup)
 * stays ignored. One window at a time per process. SIGKILL cannot be caught: the file is then
 * left, unlocked, for the sweep (mv_output_clean_temps). */
void mv_place_guard_begin(const char *tmp);
void mv_place_guard_end(void);

#endif
