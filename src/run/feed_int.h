/* feed_int.h - inside the feed stage (src/run/): what feed.c, the walker, asks of feed_tar.c,
 * resume by input for --layout tar (and a tar member's identity, which both layouts record).
 * Not a public header: pipeline_int.h is what pipeline.c sees of the feed.
 */
#ifndef MV_FEED_INT_H
#define MV_FEED_INT_H

#include <stddef.h>
#include <stdint.h>

#include "mv_hashset.h"
#include "mv_walk.h"
#include "runner.h"

/* --layout tar: the recorded inputs by the file they reach now (device, inode), made at the first
 * input the manifest does not name as given, so that "in", "./in" and "/abs/in" resume each
 * other (mv_done_same_input's rule; the files layout finds them by output name). */
typedef struct {
    int built;
    mv_hashset by_file; /* (st_dev, st_ino) -> entry index + 1 */
} tar_aliases;

/* A tar member as this run finds it: its size and mtime from its tar header, and the XXH64 of
 * its bytes followed by its sample's .json, .txt and .cls (the record carries those too), read
 * from the member's copy in memory (a streamed large member: none). Its ok line records them
 * (input_bytes, input_mtime_ns, input_xxh64), and resume compares them, so that a rebuilt tar
 * redoes exactly the members whose image or metadata changed. */
typedef struct {
    int member; /* a tar member: the fields below are its */
    int64_t bytes, mtime_ns, mtime_s;
    int has_xxh64;
    uint64_t xxh64;
} member_now;

member_now pl_member_of(const mv_walk_item *wi);
/* 1 with the reason in why[cap] when the input at path (a tar member: mn) is not what its ok
 * line recorded (src) */
int pl_input_changed(const mv_run_opts *o, const char *path, const member_now *mn,
                     const mv_done_input_stat *src, char *why, size_t cap);
/* 1 when the input is done and its sample verifies: skip it (ta: the run's, zeroed at the start) */
int pl_tar_done(runner *R, mv_done *done, tar_aliases *ta, const char *path, const char *abs,
                const member_now *mn, const char *out_real, long *n_stale, char stale_fp[17]);
/* 1 for the first member this run meets of a tar whose newest line failed: embed it */
int pl_tar_reread(const mv_done *done, char **last, const char *tar);

#endif
