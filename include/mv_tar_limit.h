/* mv_tar_limit.h - the sample limit an OUT's tar shards are cut at (--shard-samples), kept in OUT,
 * and the signs of each layout in OUT.
 *
 * What it is: OUT/.mvembed-tar.json, {"shard_samples": N} or {"shard_samples": null} (no limit),
 * written by the first --layout tar run into OUT before its first shard, under an exclusive name
 * (mv_place.h: of two runs starting at once, one writes it and the other reads it) and never
 * changed by mvembed. Every later tar run agrees with it: the same --shard-samples, or none given
 * (the run then cuts at the recorded limit). A different limit is refused, so that every shard in
 * OUT holds at most the recorded number of samples, whichever run, resume or concurrent process
 * wrote it (shards are never reopened; adoption and `manifest compact` never add samples to one).
 * An OUT that holds shards but no record was written without a limit (an earlier version).
 * What it is not: the cutting itself (tar_out.c), the byte limit --shard-size (not recorded:
 * shards of other sizes may be mixed), or the option's parsing (src/cli/options.c).
 */
#ifndef MV_TAR_LIMIT_H
#define MV_TAR_LIMIT_H

#include "mv_common.h"

/* The record's name in OUT. */
#define MV_TAR_LIMIT_FILE ".mvembed-tar.json"

/* Agrees want (this run's --shard-samples; 0: not given) with out_dir's record, writing it when
 * there is none. *limit: the samples a shard may hold from now on (0: no limit); *adopted = 1 when
 * want was 0 and the record's limit is taken. MV_ERR_USAGE (nothing written) when want differs
 * from the record, naming the file and both limits; MV_ERR_IO when the record cannot be read,
 * parsed or written. */
mv_status mv_tar_limit_agree(const char *out_dir, long long want, long long *limit, int *adopted, mv_err *e);

/* 1 with the name in ex[cap] when OUT's top level shows the layout (tar: 1, files: 0): a .npy.zst
 * output; the tar record (written by a tar run before any shard). Else 0. */
int mv_layout_signs(const char *out_dir, int tar, char *ex, size_t cap);

#endif
