/* tar_int.h - inside the tar reader (src/input/): what tar_in.c, which groups a tar's members into
 * WebDataset samples, asks of tar_meta.c, which reads a sample's metadata members and makes the
 * mv_tar_meta (mv_tar_in.h) its input members carry. A member's key and extension follow
 * WebDataset: the extension is what follows the first '.' of the basename, the key what precedes
 * it, directory included; "json", "txt" and "cls" are the metadata extensions.
 * Not a public header: include/mv_tar_in.h is the API.
 */
#ifndef MV_TAR_INT_H
#define MV_TAR_INT_H

#include <stddef.h>

#include "mv_tar_in.h"

struct archive;
struct archive_entry;

enum { MV_TAR_META_JSON, MV_TAR_META_TXT, MV_TAR_META_CLS, MV_TAR_META_N };

/* A reader of the tar at path: tar formats; a gzip, zstd or xz file decompressed by tar_unzip.c
 * (every byte before damage handed out, *src then tells the damage), others through libarchive's
 * filters (*src NULL). NULL with err[cap] saying why and errno the open's (0 when the file
 * opened). Free *src (mv_tar_src_free) after the
 * reader (archive_read_free). */
typedef struct mv_tar_src mv_tar_src;
struct archive *mv_tar_reader(const char *path, mv_tar_src **src, char *err, size_t cap);
void mv_tar_src_free(mv_tar_src *s);

/* Why reader a (over src) failed: src's damage where it found one, else libarchive's message. */
const char *mv_tar_src_why(struct archive *a, const mv_tar_src *src);

/* Metadata members of one sample as read: the last of each kind, and the first failure. */
typedef struct {
    char *buf[MV_TAR_META_N];
    size_t len[MV_TAR_META_N];
    char err[640]; /* "tar member NAME <why>", "" when none failed */
} mv_tar_raw;

void mv_tar_raw_clear(mv_tar_raw *r);

/* Member name nm's extension ("" when none), its key into key[cap] (truncated to cap - 1). */
const char *mv_tar_split_key(const char *nm, char *key, size_t cap);

/* MV_TAR_META_JSON ... for a metadata extension, else -1. */
int mv_tar_meta_kind(const char *ext);

/* Reads the current member of a (entry en, named nm) as metadata of kind k into r, replacing one
 * of that kind read before; on failure r->err (its first) names the member and why. */
void mv_tar_read_meta(struct archive *a, struct archive_entry *en, const char *nm, int k, mv_tar_raw *r);

/* *m (cleared) for an input member of sample key: the metadata of before and after (after's where
 * both hold one kind). 0, or -1 with err[cap] saying why the member fails (a failed metadata
 * member, a .json that is not JSON, out of memory). */
int mv_tar_meta_build(mv_tar_meta *m, const char *key, const mv_tar_raw *before, const mv_tar_raw *after,
                      char *err, size_t cap);

/* Frees m's fields and zeroes it (m itself stays). */
void mv_tar_meta_clear(mv_tar_meta *m);

#endif
