/* mv_filehash.h - the content hash an input's record may carry (--input-hash): XXH64, seed 0, of
 * a file's bytes, from libxxhash (xxhsum -H64 and Python's xxhash.xxh64 give the same value).
 * Reads the whole file through the descriptor with pread (its offset is left alone); keeps no
 * state. Not here: when to hash (item.c, feed.c) or where the value goes (mv_manifest.h).
 */
#ifndef MV_FILEHASH_H
#define MV_FILEHASH_H

#include <stdint.h>

/* XXH64 of the bytes of the regular file behind fd, into *h: 0, or -1 with errno (a read error;
 * ENOMEM). */
int mv_filehash_fd(int fd, uint64_t *h);

/* The same for the file at path (opened read-only, closed again). */
int mv_filehash_path(const char *path, uint64_t *h);

#endif
