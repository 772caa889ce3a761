/* claims_commit.c - the tar layout's commit over every --shard naming (see mv_claims.h,
 * mv_claims_commit_lock): OUT's commit lock, one byte of the lock file held exclusively around a
 * shard's check, name and lines, and under it what the other namings' manifests gained since the
 * run opened its claims, asked input by input (tar_dedup.c asks). Not here: the claims' view
 * itself and the claims of output names (claims.c).
 */
#define _GNU_SOURCE /* F_OFD_SETLKW */
#include "claims_int.h"

#include <stdio.h>
#include <string.h>

/* 1 when a manifest other than mine held more whole lines at the last look than at open. */
static int gained(const mv_claims *c, const char *mine)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (strcmp(c->files[i].name, mine) && c->files[i].off > c->files[i].off0)
            return 1;
    return 0;
}

/* See mv_claims.h. The registered manifests are read on (look) only where another one gained
 * lines or moved since the last look: without another naming's lines a commit costs a stat per
 * manifest, and this run's own lines (hundreds a shard) are not parsed at every commit. */
int mv_claims_others_grew(mv_claims *c, const char *mine)
{
    mv_err e;
    if (!c || c->no_locks)
        return 0;
    pthread_mutex_lock(&c->mu);
    int grew = 0;
    if (gained(c, mine) || mv_claims_others_moved(c, mine))
        grew = mv_claims_read_on(c, &e) != MV_OK || gained(c, mine); /* unreadable: ask input by input */
    pthread_mutex_unlock(&c->mu);
    return grew;
}

/* See mv_claims.h: the input's newest ok line among the lines read. */
int mv_claims_ok_of_other(mv_claims *c, const char *input, const char *abs, const mv_done_input_stat *now,
                          const char *run, const char *model)
{
    mv_done_sample smp;
    if (!c || c->no_locks)
        return 0;
    pthread_mutex_lock(&c->mu);
    int ok = mv_done_sample_of(c->seen, input, abs, &smp) && strcmp(smp.ord.run, run) && !strcmp(smp.model, model) &&
             !mv_done_input_differs(&smp.src, now);
    pthread_mutex_unlock(&c->mu);
    return ok;
}

mv_status mv_claims_commit_lock(mv_claims *c, int lock, mv_err *e)
{
    if (!c || c->no_locks || ofd_lock(c->fd, lock ? F_WRLCK : F_UNLCK, COMMIT_BYTE, lock) == 0)
        return MV_OK;
    return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock for a shard's commit: %s", c->out_dir, MV_CLAIMS_LOCK,
                   strerror(errno));
}
