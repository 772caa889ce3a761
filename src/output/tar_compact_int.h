/* tar_compact_int.h - what `manifest compact` for the tar layout (tar_compact.c: surveys the
 * shards, copies their live samples) and its rewriting of the lines that name moved samples
 * (tar_compact_rewrite.c: the manifests, --pool mean's indexes) share. Not a public header: the
 * interface is mv_tar_resume.h's mv_tar_compact_dir.
 */
#ifndef MV_TAR_COMPACT_INT_H
#define MV_TAR_COMPACT_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "mv_hashset.h"

/* Moved samples: old "shard/key" -> its new line's shard, key and offset. */
typedef struct {
    mv_hashset ids;  /* value: 1 + index */
    mv_hashset at;   /* old "shard\noffset" (as the manifests said) -> 1 + index: for OUT/pooled/ */
    mv_hashset made; /* the copies' shard names: never surveyed in the same compact */
    struct moved { char shard[96], key[100], offset[24]; } *to;
    size_t n, cap;
} moves;

/* "shard/key" of a record (neither holds a '/'), in buf; 0 when the record names no sample. */
static inline size_t mv_tar_sample_id(json_t *o, char *buf, size_t cap)
{
    json_t *s = json_object_get(o, "shard"), *k = json_object_get(o, "key");
    if (!json_is_string(s) || !json_is_string(k))
        return 0;
    int n = snprintf(buf, cap, "%s/%s", json_string_value(s), json_string_value(k));
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* tar_compact_rewrite.c: manifest path (in out_dir) rewritten with the moved samples' lines
 * pointing at their copies, without the lines naming a dead sample of a shard that goes (gs) */
mv_status mv_tar_rewrite_manifest(const char *out_dir, const char *path, moves *M, const mv_hashset *gs,
                                  mv_err *e);
/* --pool mean's index of stem (old: OUT/<stem>.jsonl) pointed at the copies of moved samples, or
 * removed when it names a removed shard (gone) at no moved sample */
mv_status mv_tar_fix_pooled(const char *out_dir, const char *stem, int old, const moves *M,
                            const mv_hashset *gone, int quiet, mv_err *e);
/* The pooled index stem a name of OUT holds (*old: the .jsonl beside the outputs); 0: none */
int mv_tar_pooled_stem(const char *name, char *stem, size_t cap, int *old);

#endif
