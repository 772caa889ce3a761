/* mv_names.h - every name mvembed gives or reads back, each built and parsed in one place: the
 * output name of an input and its file's suffix, the hash of names and the shard that owns an
 * input, which extensions are images, videos and tars, and the names of shard manifests and of
 * tar shards.
 *
 * One rule each, so that the walker, resume, the writers and `manifest merge` cannot disagree:
 * whatever a run writes, the parser of the same name reads back. Names are raw bytes
 * (no UTF-8 assumed). Pure functions of their arguments: no file system, no state, thread-safe.
 * Not here: walking directories (mv_walk.h), reading tars (mv_tar_in.h), what a file holds (its
 * bytes decide how it is decoded: mv_sniff, mv_image.h; an extension only decides whether a
 * directory walk or a tar takes the file).
 */
#ifndef MV_NAMES_H
#define MV_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* --- inputs and outputs --------------------------------------------------------------------- */

/* The output name of path (relative to OUT, without ".npy.zst"): the one rule for every kind
 * of input. Components are split on '/'; empty and "." components are dropped (so "./a//b/" is
 * "a/b", and a leading '/' is dropped: "/data/x.jpg" is "data/x.jpg"); ".." becomes "__" so that
 * no name leaves OUT; a component made only of two or more '_' gets one more '_' ("__" is "___")
 * so that it never meets an escaped "..". Distinct normalised paths give distinct names. The
 * result is "" when nothing is left (".", "/"). Other bytes (spaces, control bytes, non-UTF-8)
 * pass unchanged. buf must hold mv_output_name_cap(strlen(path)) bytes; returns the length. */
#define mv_output_name_cap(n) ((n) + (n) / 2 + 2)
size_t mv_output_name(const char *path, char *buf);

/* An output file is OUT/<output name>.npy.zst (--layout files). */
#define MV_OUTPUT_SUFFIX ".npy.zst"

/* rel (an output name) + MV_OUTPUT_SUFFIX into buf[cap]: the "output" a manifest line records.
 * Returns snprintf's count (the result is cut to cap - 1 bytes when that is >= cap). */
int mv_name_output_file(char *buf, size_t cap, const char *rel);

/* NULL when name is canonical, as mv_output_name makes it and as resume and the writer accept
 * it: not empty, relative, no "", "." or ".." component, no trailing '/'. Otherwise the reason,
 * to follow the name in a message: "is not a relative path", "has an empty, '.' or '..'
 * component", "ends with '/'" (static storage). */
const char *mv_name_flaw(const char *name);

/* 1 when name[0..len) names a directory --pool mean writes and replaces whole in OUT: "pooled"
 * (*k = *n = 0) or "pooled-KKKKK-of-NNNNN", five digits each (*k, *n); else 0. */
int mv_name_pooled_dir(const char *name, size_t len, int *k, int *n);

/* 1 when the output name rel lies inside such a directory (mv_name_pooled_dir): its first
 * component is one and more follows. */
int mv_name_in_pooled_dir(const char *rel);

/* Deterministic 64-bit hash of bytes: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3). The same bytes give the same value on every platform and run. */
uint64_t mv_hash64(const void *p, size_t n);

/* 1 when shard k of n (--shard K/N) takes the input whose output name is rel: n <= 1 (no
 * sharding), or mv_hash64(rel) mod n == k. */
int mv_name_in_shard(const char *rel, int k, int n);
/* The same for the len bytes at rel (a name inside a longer string). */
int mv_name_in_shard_n(const char *rel, size_t len, int k, int n);

/* --- kinds by extension ----------------------------------------------------------------------- */

typedef enum {
    MV_NAME_OTHER = 0,
    MV_NAME_IMAGE, /* jpg jpeg jpe png webp gif bmp tif tiff */
    MV_NAME_VIDEO, /* mp4 m4v mov mkv webm avi mpg mpeg ts m2ts flv ogv 3gp wmv */
    MV_NAME_TAR,   /* .tar .tar.gz .tgz .tar.zst .tar.xz .tar.bz2 (a WebDataset shard, mv_tar_in.h) */
} mv_name_kind;

/* The kind of path by its name, case-insensitive: a tar when the whole path ends in a tar
 * extension (and is longer than it); else an image or a video by the extension after the last
 * '.' of the last component (not a leading '.': ".jpg" is no image). */
mv_name_kind mv_name_kind_of(const char *path);
/* 1 when the len bytes at path end in a tar archive's extension (MV_NAME_TAR's rule). */
int mv_name_is_tar_n(const char *path, size_t len);

/* 1 when mv_name_kind_of(path) is MV_NAME_IMAGE or MV_NAME_VIDEO: what a directory walk or a tar
 * takes without --all-files. */
int mv_name_is_media(const char *path);

/* --- shard manifests and tar shards ----------------------------------------------------------- */

/* The manifest of shard k of n in dir, into buf[cap]: "dir/manifest.jsonl" when n <= 1, else
 * "dir/manifest-KKKKK-of-NNNNN.jsonl" (K and N zero-padded to 5 digits, more past 99999).
 * Returns snprintf's count. */
int mv_name_manifest(char *buf, size_t cap, const char *dir, int k, int n);

/* 1 with *k, *n set when name (a file name, no directory) is a shard manifest's:
 * "manifest-K-of-N.jsonl" with K and N decimal digits, as many as mv_name_manifest writes for any
 * N (values up to INT_MAX), else 0. */
int mv_name_manifest_parse(const char *name, int *k, int *n);

/* The run record of run `run` (16 hex digits, mv_manifest_run_id) of shard k of n in dir, into
 * buf[cap]: "dir/run-RUN.json" when n <= 1, else "dir/run-KKKKK-of-NNNNN-RUN.json" (padded as
 * mv_name_manifest), so that no two runs or shards share one. Returns snprintf's count. */
int mv_name_run_record(char *buf, size_t cap, const char *dir, int k, int n, const char *run);

/* The completion marker of shard k of n in dir, into buf[cap]: "dir/_SUCCESS" when n <= 1, else
 * "dir/_SUCCESS-KKKKK-of-NNNNN" (padded as mv_name_manifest): one file per naming, so that shards
 * never share one. Returns snprintf's count. */
int mv_name_marker(char *buf, size_t cap, const char *dir, int k, int n);

/* The final name of tar shard number num of shard k of n (--layout tar), into buf[cap]:
 * "shard-SSSSS.tar" when n <= 1, else "shard-KKKKK-of-NNNNN-SSSSS.tar" (zero-padded to 5 digits). */
void mv_name_tar_shard(char *buf, size_t cap, int k, int n, long long num);

/* The number num of name when it is mv_name_tar_shard(k, n, num) for some num (5 to 15 digits),
 * else -1. */
long long mv_name_tar_shard_parse(const char *name, int k, int n);

/* 1 when name is a manifest of OUT: manifest.jsonl or manifest-KKKKK-of-NNNNN.jsonl. */
int mv_name_is_manifest(const char *name);

/* 1 when name is a tar shard's final name of some naming, which goes to *k, *n (0 and 1 for an
 * unsharded run's shard-SSSSS.tar); else 0. */
int mv_name_tar_shard_naming(const char *name, int *k, int *n);

#endif
