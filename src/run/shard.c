/* shard.c - the share of the inputs a run takes (mv_shard.h): --shard as given, or an array
 * task's index from the scheduler's environment as main.c read it (Slurm's SLURM_ARRAY_TASK_*,
 * Kubernetes' JOB_COMPLETION_INDEX, AWS Batch's AWS_BATCH_JOB_ARRAY_*). Only mappings that cover
 * every input exactly once across the array's tasks are taken; anything else is refused with the
 * variables named, so that no array silently leaves inputs out or embeds them twice. Not here:
 * which inputs a shard holds (mv_names.h). */
#include "mv_shard.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* s as a decimal integer in [lo, INT_MAX]: 0, or -1 when it is not one (or s is NULL). */
static int env_int(const char *s, long lo, long *v)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (*end || errno || x < lo || x > INT_MAX)
        return -1;
    *v = x;
    return 0;
}

/* A Slurm array task (id and count set): its shard *k of *n. 1 when the variables are unset, -1
 * (with e) when they are set but do not make an evenly spaced range. */
static int slurm_shard(const mv_slurm_array *sl, long *k, long *n, mv_err *e)
{
    if (!sl->id || !sl->count)
        return 1;
    long id, cnt, mn = 0, step = 1, mx;
    int bad = env_int(sl->id, 0, &id) || env_int(sl->count, 1, &cnt) || (sl->min && env_int(sl->min, 0, &mn)) ||
              (sl->step && env_int(sl->step, 1, &step));
    if (!bad) {
        mx = mn + (cnt - 1) * step;
        bad = sl->max && env_int(sl->max, 0, &mx);
        /* only an evenly spaced range (a-b or a-b:s) maps task ids onto shards 0..COUNT-1; a
         * list like --array=3,7 would leave shards unprocessed */
        bad = bad || id < mn || (id - mn) % step || (mx - mn) / step + 1 != cnt || (id - mn) / step >= cnt;
    }
    if (bad) {
        mv_fail(e, MV_ERR_USAGE,
                "cannot derive a shard from SLURM_ARRAY_TASK_ID=%s, SLURM_ARRAY_TASK_MIN=%s, "
                "SLURM_ARRAY_TASK_MAX=%s, SLURM_ARRAY_TASK_STEP=%s, SLURM_ARRAY_TASK_COUNT=%s "
                "(arrays that are not an evenly spaced range need --shard K/N)",
                sl->id, sl->min ? sl->min : "(unset)", sl->max ? sl->max : "(unset)",
                sl->step ? sl->step : "(unset)", sl->count);
        return -1;
    }
    *k = (id - mn) / step;
    *n = cnt;
    return 0;
}

static void announce(const mv_run_opts *o, int k, int n, const char *from)
{
    if (!o->quiet)
        fprintf(stderr,
                "mvembed: shard %d/%d from %s: embedding only this shard's inputs (--shard none embeds "
                "them all)\n", k, n, from);
}

mv_status mv_shard_resolve(const mv_run_opts *o, int *k, int *n, mv_err *e)
{
    *k = o->shard_k;
    *n = o->shard_n;
    if (*n > 0 && *k >= 0)
        return MV_OK; /* --shard K/N or none */
    long sk, sn;
    int r = slurm_shard(&o->slurm, &sk, &sn, e);
    if (r < 0)
        return MV_ERR_USAGE; /* e holds why */
    char from[160];
    if (*n > 0) { /* --shard auto/N: K from the first scheduler index that is set */
        long idx;
        if (!r) {
            if (sn != *n)
                return mv_fail(e, MV_ERR_USAGE, "--shard auto/%d: the Slurm array has %ld tasks (SLURM_ARRAY_TASK_COUNT=%s)",
                               *n, sn, o->slurm.count);
            idx = sk;
            snprintf(from, sizeof from, "SLURM_ARRAY_TASK_ID=%s", o->slurm.id);
        } else if (o->k8s_index) {
            if (env_int(o->k8s_index, 0, &idx))
                return mv_fail(e, MV_ERR_USAGE, "--shard auto/%d: JOB_COMPLETION_INDEX=%s is not an index", *n,
                               o->k8s_index);
            snprintf(from, sizeof from, "JOB_COMPLETION_INDEX=%s", o->k8s_index);
        } else if (o->aws_index) {
            long size;
            if (env_int(o->aws_index, 0, &idx))
                return mv_fail(e, MV_ERR_USAGE, "--shard auto/%d: AWS_BATCH_JOB_ARRAY_INDEX=%s is not an index", *n,
                               o->aws_index);
            if (o->aws_size && (env_int(o->aws_size, 1, &size) || size != *n))
                return mv_fail(e, MV_ERR_USAGE, "--shard auto/%d: the AWS Batch array has AWS_BATCH_JOB_ARRAY_SIZE=%s jobs",
                               *n, o->aws_size);
            snprintf(from, sizeof from, "AWS_BATCH_JOB_ARRAY_INDEX=%s", o->aws_index);
        } else {
            return mv_fail(e, MV_ERR_USAGE,
                           "--shard auto/%d: no array index in the environment (SLURM_ARRAY_TASK_ID with "
                           "SLURM_ARRAY_TASK_COUNT, JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX)", *n);
        }
        if (idx >= *n)
            return mv_fail(e, MV_ERR_USAGE, "--shard auto/%d: %s is not below %d", *n, from, *n);
        *k = (int)idx;
        announce(o, *k, *n, from);
        return MV_OK;
    }
    if (!r) {
        *k = (int)sk;
        *n = (int)sn;
        snprintf(from, sizeof from, "SLURM_ARRAY_TASK_ID=%s (%s tasks)", o->slurm.id, o->slurm.count);
        announce(o, *k, *n, from);
        return MV_OK;
    }
    if (o->k8s_index) /* an Indexed Job says which pod this is, not how many there are */
        return mv_fail(e, MV_ERR_USAGE,
                       "JOB_COMPLETION_INDEX=%s is set (a Kubernetes Indexed Job): give --shard auto/N with the "
                       "Job's completions as N, or --shard none to embed every input", o->k8s_index);
    if (o->aws_index) {
        long idx, size;
        if (env_int(o->aws_index, 0, &idx) || env_int(o->aws_size, 1, &size) || idx >= size)
            return mv_fail(e, MV_ERR_USAGE,
                           "cannot derive a shard from AWS_BATCH_JOB_ARRAY_INDEX=%s, AWS_BATCH_JOB_ARRAY_SIZE=%s "
                           "(give --shard auto/N or --shard K/N)", o->aws_index, o->aws_size ? o->aws_size : "(unset)");
        *k = (int)idx;
        *n = (int)size;
        snprintf(from, sizeof from, "AWS_BATCH_JOB_ARRAY_INDEX=%s (AWS_BATCH_JOB_ARRAY_SIZE=%s)", o->aws_index,
                 o->aws_size);
        announce(o, *k, *n, from);
    }
    return MV_OK;
}
