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

#endif
