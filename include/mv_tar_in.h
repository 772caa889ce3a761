/* mv_tar_in.h - a WebDataset shard (a tar file) as a source of inputs, read member by member.
 *
 * Each regular member whose name has an image/video extension (mv_name_is_media), or every
 * regular member with all_files, is handed out with its bytes in an anonymous in-memory file
 * (memfd) that the item reads as an mv_input (mv_input_open_fd), so no decoder knows about tars;
 * an image member over MV_TAR_STREAM_FROM bytes is handed out as a stream instead (the caller
 * decodes it before asking for the next member), and a member over the bound on a member's
 * bytes (mv_tar_in_limits) fails alone, checked on its header before anything is read: a sparse
 * member of 4 GiB of holes is never materialised.
 * Members are read in archive order (a tar is a stream). A sample is WebDataset's: the run of
 * consecutive members sharing a key (a member's name up to the first '.' of its basename,
 * directory and a leading "./" included); two of its members with one extension (compared in
 * lower case) fail its input members, as WebDataset's reader refuses such a sample ("duplicate
 * file name"); its metadata members <key>.json, <key>.txt and <key>.cls (mv_tar_meta,
 * each at most MV_TAR_META_MAX bytes; never inputs, --all-files or not) are handed out with every
 * input member of the sample, whether they come before or after it: what follows an input member
 * is read ahead through a second reader of the tar, so a streamed member gets it too. Other
 * members (directories, other extensions) are skipped; a sample without an input member makes
 * nothing. Uses libarchive (plain, gzip, zstd ... tars alike); a gzip, zstd or xz tar cut short or
 * damaged gives every member before the damage, then fails as a plain tar would there.
 * Not here: which paths are tars and what members are named as outputs (mv_names.h), decoding.
 */
#ifndef MV_TAR_IN_H
#define MV_TAR_IN_H

#include <stdint.h>

#include "mv_common.h"

#include "mv_input.h"

/* The default bound on a member's bytes (--max-member-bytes): 4 bytes a pixel of the decode
 * budget (an uncompressed 32-bit picture at --max-decode-pixels) and 16 MiB of headers. */
#define MV_TAR_MEMBER_MAX_OF(max_decode_pixels) (4 * (long long)(max_decode_pixels) + (16LL << 20))
/* Image members of more bytes than this are streamed (mv_tar_in_stream), not copied into memory. */
#define MV_TAR_STREAM_FROM (16LL << 20)

/* The most bytes of a metadata member (.json, .txt, .cls): one over it fails its sample. */
#define MV_TAR_META_MAX (1 << 20)

/* A sample's metadata, as the record carries it (mv_manifest.h's input_key, json, txt, cls). */
typedef struct mv_tar_meta {
    char *key;          /* the sample key (raw bytes) */
    char *json;         /* <key>.json, checked to be JSON and with the whitespace between its
                         * tokens removed (one line); NULL when the sample has none */
    char *txt;          /* <key>.txt's bytes as they are ([txt_len], NUL-terminated); NULL: none */
    size_t txt_len;
    char *cls;          /* <key>.cls's bytes, ASCII white space trimmed ([cls_len]); NULL: none */
    size_t cls_len;
    int cls_is_int;     /* cls is [+-]digits within int64: cls_int */
    long long cls_int;
    int64_t member_bytes, member_mtime_ns; /* the input member's size and mtime (its tar header;
                                            * -1: not given; mv_time_ns, saturated) */
    int64_t member_mtime_s;                /* that mtime's whole seconds (-1: not given) */
} mv_tar_meta;

/* A malloc'd deep copy (NULL when out of memory); mv_tar_meta_free frees one (NULL is fine). */
mv_tar_meta *mv_tar_meta_copy(const mv_tar_meta *m);
void mv_tar_meta_free(mv_tar_meta *m);

typedef struct mv_tar_in mv_tar_in;

/* names_only: members are listed without copying their bytes (*fd stays -1): for counting.
 * MV_ERR_IO: the process is out of file descriptors (the run's failure, not the tar's). */
mv_status mv_tar_in_open(const char *path, int all_files, int names_only, mv_tar_in **t, mv_err *e);

/* The most bytes a member may hold (0: MV_TAR_MEMBER_MAX_OF the default decode budget): a member
 * whose header says more fails alone before any of its bytes is read, and one whose data runs
 * past it (no size in its header) fails when it does; and the size from which image members are
 * streamed (0: MV_TAR_STREAM_FROM; -1: never). */
void mv_tar_in_limits(mv_tar_in *t, long long max_bytes, long long stream_from);

/* Next input member: returns 1 with *name (the member's path inside the archive, leading "./"
 * removed; "NAME#2", "#3" ... for a later member whose name is one handed out already (as output
 * names, mv_output_name, compare them); valid until the next call) and either *fd (a memfd holding its bytes, positioned at 0;
 * the caller closes it) or *err (a one-line reason this member cannot be an input, e.g. too large;
 * *fd is then -1); 0 at the end; -1 when the archive itself is unreadable past this point (e set:
 * "PATH: reason"); -2 when the process is out of file descriptors (e set), the run's failure. */
int mv_tar_in_next(mv_tar_in *t, const char **name, int *fd, const char **err, mv_err *e);

/* After mv_tar_in_next returned a member with *fd -1 and no *err (not names_only): the member is
 * a large image, to be read as a stream: *io and *user read its bytes (mv_input_open_io) until
 * the next mv_tar_in_next, which skips what was not read. 0, or -1 when the member is not one. */
int mv_tar_in_stream(mv_tar_in *t, const mv_input_io **io, void **user);

/* The metadata of the sample of the input member mv_tar_in_next last handed out (valid until the
 * next call), or NULL (names_only, an error member). A metadata member that is over
 * MV_TAR_META_MAX, unreadable, a link, or (.json) not JSON fails each input member of its sample:
 * mv_tar_in_next's *err names that member and why. */
const mv_tar_meta *mv_tar_in_meta(const mv_tar_in *t);

void mv_tar_in_close(mv_tar_in *t);

#endif
