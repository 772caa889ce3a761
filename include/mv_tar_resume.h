/* mv_tar_resume.h - the tar layout's resume checks: is an input's recorded sample still in OUT,
 * whole and the bytes that were written?
 *
 * What it is: given an input's latest ok record (mv_done_sample, mv_manifest.h) it checks that
 * the record names a tar sample (shard, key, offset, size and XXH64 of its <key>.npy member),
 * that the shard is a regular file directly inside OUT, long enough to hold the member, and that
 * the member's bytes hash to the recorded XXH64 (xxHash's library). A shard overwritten, cut short,
 * removed, or a record without a checksum (older manifests) does not verify: the input is redone.
 * Orphan shards: a run killed after a shard got its final name but before its samples' manifest
 * lines were appended leaves a complete shard no line names. Its writer holds an OFD write lock
 * on it until the lines are appended, so a shard nobody holds a lock on and no ok line names is
 * such an orphan: mv_tar_adopt appends, for each of its samples whose input has no ok line and
 * whose .npy member verifies against its .json member (the record), that record to the manifest.
 * What it is not: it does not decide what the run does with the input (feed.c) and does not
 * compare settings (the fingerprint is the caller's).
 */
#ifndef MV_TAR_RESUME_H
#define MV_TAR_RESUME_H

#include "mv_common.h"
#include "mv_manifest.h"
#include "mv_claims.h"
#include "mv_tar.h"

/* 1 when the sample s points at is whole in OUT (out_real: realpath of OUT), else 0 with the
 * reason in why[cap] ("shard-00003.tar: 2048 bytes, the sample ends at byte 9728", ...). */
int mv_tar_sample_intact(const char *out_real, const mv_done_sample *s, char *why, size_t cap);

/* XXH64 (seed 0) of p[0..n): the checksum a sample's record carries. */
uint64_t mv_tar_checksum(const void *p, size_t n);

/* rec (a record's line, as mv_manifest_format writes it) with its field name set to v: a string
 * field "name":"...", or with number a field "name":digits. The field must be there with a value
 * free of escapes (shard names, keys, offsets are); malloc'd, NULL when absent or out of memory. */
char *mv_tar_record_set(const char *rec, const char *name, const char *v, int number);

/* Adopts the orphan samples of the complete shards of naming (k, n) in out_dir (see above): their
 * records go through commit (one call per shard, complete lines). *n_adopted counts them. A shard
 * that cannot be read whole is left as it is (its inputs are done again where they have no line),
 * and so is one whose lines another run appended after done was read (mv_claims_named: claims may
 * be NULL without locks). MV_OK, or the commit's error, or MV_ERR_IO when out_dir cannot be listed. */
mv_status mv_tar_adopt(const char *out_dir, int k, int n, const mv_done *done, mv_claims *claims,
                       mv_tar_commit_fn commit, void *ud, long *n_adopted, mv_err *e);

/* `mvembed manifest compact`, tar layout (tar_compact.c): rewrites the shards of out_dir that
 * hold dead samples (their input's newest line over every manifest of OUT names another sample:
 * shard manifests of two --shard counts, merged or not, as merge folds them)
 * without them: live samples are copied into new shards, the manifests naming them rewritten,
 * then the old shards removed. Shards a writer holds or with orphan samples are left. Says what it
 * did on stderr unless quiet. */
mv_status mv_tar_compact_dir(const char *out_dir, int quiet, mv_err *e);

#endif
