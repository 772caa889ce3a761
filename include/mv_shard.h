/* mv_shard.h - which share of the inputs a run takes (src/run/shard.c): --shard K/N, --shard
 * none, --shard auto/N (K from the scheduler's array index), or, without --shard, a scheduler's
 * array task (Slurm, AWS Batch). Not here: which inputs fall in shard K (mv_name_in_shard,
 * mv_names.h). */
#ifndef MV_SHARD_H
#define MV_SHARD_H

#include "mv_common.h"
#include "mv_run.h"

/* The shard of the run's options o: *k of *n (*n = 0: no sharding). Precedence: an explicit
 * --shard K/N or none, then a Slurm array task, then a Kubernetes Indexed Job
 * (JOB_COMPLETION_INDEX, whose count only --shard auto/N gives), then an AWS Batch array job.
 * --shard auto/N takes K from the first of those that is set. A shard taken from the environment
 * is announced on stderr unless o->quiet. MV_ERR_USAGE, naming the variables, when the
 * environment gives no shard that covers every input exactly once. */
mv_status mv_shard_resolve(const mv_run_opts *o, int *k, int *n, mv_err *e);

#endif
