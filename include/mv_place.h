/* mv_place.h - the exclusive final name: a complete file written under a temporary name gets its
 * final name only where no file has that name, on every file system that can promise it.
 *
 * What it is: renameat2(RENAME_NOREPLACE); where the file system lacks it (EINVAL, ENOSYS,
 * EOPNOTSUPP: NFS clients, some FUSE and network file systems) link(2) of the temporary file to
 * the final name, which fails when the name exists and is atomic on NFS too, then unlink of the
 * temporary name; where neither exists, a refusal naming the file system. It never replaces a
 * file (an output another input holds, another run's shard). A link that NFS reports as failed
 * after a retransmission is checked by the link count, as open(2) advises.
 * What it is not: the fsync of the file and of its directory are the caller's (tar_out.c), and
 * replacing one's own earlier output (a redo) is not an exclusive placement: plain rename(2).
 */
#ifndef MV_PLACE_H
#define MV_PLACE_H

#include "mv_common.h"

/* Renames tmp to fin unless fin exists. MV_OK; MV_ERR_IO with e naming fin and the cause
 * ("exists already: not replaced", the errno's text, or the file system that cannot do it). */
mv_status mv_place_exclusive(const char *tmp, const char *fin, mv_err *e);

/* The window of a temporary file that a single-threaded command makes and renames (manifest
 * merge and compact): from begin to end, SIGINT, SIGTERM, SIGHUP and SIGQUIT remove tmp (unlink is
 * async-signal-safe; after the rename it finds nothing) and then end the process as they would
 * have (the default action, re-raised). One window at a time per process. SIGKILL cannot be
 * caught: the file is then left, unlocked, for the sweep (mv_output_clean_temps). */
void mv_place_guard_begin(const char *tmp);
void mv_place_guard_end(void);

#endif
