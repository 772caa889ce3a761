/* mv_beneath.h - directories opened (and made) beneath the output directory, never outside it.
 *
 * OUT is the user's choice and is followed wherever it leads; what lies under it is not: a
 * symbolic link inside OUT (OUT/d -> ../elsewhere) must not carry an output out of OUT. A path
 * below OUT is resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) where the kernel
 * has it (Linux 5.6+): symlinks that stay beneath OUT are followed, one that leaves is refused
 * (EXDEV); where it does not, one component at a time with O_NOFOLLOW, and then no symlink
 * below OUT is followed at all (ELOOP). Missing directories are made with mkdirat in the parent
 * opened that way, so no component is ever made outside. The caller then works relative to the
 * directory's descriptor (openat, renameat, fsync). Not here: output names (mv_names.h), what is
 * written (mv_output.h).
 */
#ifndef MV_BENEATH_H
#define MV_BENEATH_H

#include "mv_common.h"

/* Opens the directory root/rel, making the missing ones among root and rel's components (mode
 * 0777 & ~umask) when create. rel is relative and '/'-separated, with no "", "." or ".."
 * component ("" is root itself). *dfd: the directory's descriptor (O_DIRECTORY, O_CLOEXEC), which
 * the caller closes. On failure errno holds the cause and e says which component and why:
 * EXDEV "ROOT/d: a symbolic link (to ../x) that leads outside the output directory ROOT",
 * ELOOP "ROOT/d: a symbolic link (to x), not followed below the output directory", ENOTDIR,
 * EACCES, ENOSPC ... MV_ERR_OUTPUT for links, ENOTDIR and permissions, MV_ERR_IO otherwise. */
mv_status mv_beneath_dir(const char *root, const char *rel, int create, int *dfd, mv_err *e);

/* Tests: 1 makes mv_beneath_dir act as on a kernel without openat2 (O_NOFOLLOW walk). */
void mv_beneath_test_no_openat2(int on);

#endif
