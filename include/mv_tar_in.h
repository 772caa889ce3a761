/* mv_tar_in.h - a WebDataset shard (a tar file) as a source of inputs, read member by member.
 *
 * Each regular member whose name has an image/video extension (mv_name_is_media), or every
 * regular member with all_files, is handed out with its bytes in an anonymous in-memory file
 * (memfd) that the item reads as an mv_input (mv_input_open_fd), so no decoder knows about tars.
 * Members are read in archive order (a tar is a stream). Other members (.json, .txt, .cls ...,
 * directories, links) are skipped. Uses libarchive (plain, gzip, zstd ... tars alike).
 * Not here: which paths are tars and what members are named as outputs (mv_names.h), decoding.
 */
#ifndef MV_TAR_IN_H
#define MV_TAR_IN_H

#include <stdint.h>

#include "mv_common.h"

/* Members larger than this are reported as errors instead of being copied into memory. */
#define MV_TAR_MEMBER_MAX (4LL << 30)

typedef struct mv_tar_in mv_tar_in;

/* names_only: members are listed without copying their bytes (*fd stays -1): for counting. */
mv_status mv_tar_in_open(const char *path, int all_files, int names_only, mv_tar_in **t, mv_err *e);

/* Next input member: returns 1 with *name (the member's path inside the archive, leading "./"
 * removed; valid until the next call) and either *fd (a memfd holding its bytes, positioned at 0;
 * the caller closes it) or *err (a one-line reason this member cannot be an input, e.g. too large;
 * *fd is then -1); 0 at the end; -1 when the archive itself is unreadable past this point (e set:
 * "PATH: reason"). */
int mv_tar_in_next(mv_tar_in *t, const char **name, int *fd, const char **err, mv_err *e);

void mv_tar_in_close(mv_tar_in *t);

#endif
