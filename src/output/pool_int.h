/* pool_int.h - inside --pool mean's directories (src/output/): what pool.c, which rebuilds
 * OUT/pooled/, asks of pool_dirs.c, which removes pooled directories (one, or those a later run
 * made stale). Not a public header: include/mv_pool.h is the API.
 */
#ifndef MV_POOL_INT_H
#define MV_POOL_INT_H

#include "mv_manifest.h"
#include "mv_pool.h"

/* Removes dir with the files the pooled directory holds (pooled.npy, pooled.jsonl): 0, or -1. */
int mv_pool_remove_dir(const char *dir);

/* Removes OUT's temporary pooled directories (.tmp-PID-pooled*, made by pool.c's rebuild) of other
 * processes: every one where the caller holds OUT's index lock (locked: rebuilds take turns under
 * it, so another's is a killed rebuild's), else only those last modified over
 * MV_OUTPUT_TEMP_MAX_AGE ago (as a file system without locks: temps.c's rule, which judges both). */
void mv_pool_sweep_temps(const char *out_dir, int locked);
/* Removes each pooled directory of out_dir but keep (may be NULL) whose rows are not current in
 * D (OUT's manifests, read under OUT's index lock), and, keep being a shard's, those of another
 * shard count holding a row keep holds, calling removed for each; those of the other kind (pooled/
 * and a shard's) holding a row keep holds counted in c->beside (c may be NULL) (pool_dirs.c). */
mv_status mv_pool_drop_stale(const char *out_dir, const char *keep, const mv_done *D,
                             void (*removed)(const char *, const char *, void *), void *ud, mv_pool_counts *c,
                             mv_err *e);

#endif
