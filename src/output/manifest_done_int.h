/* manifest_done_int.h - what the resume set (manifest_done.c) and the reader that fills it
 * (manifest_read.c) share: one line as read back, and recording it in the set. Not a public
 * header: the set's interface is mv_manifest.h's. */
#ifndef MV_MANIFEST_DONE_INT_H
#define MV_MANIFEST_DONE_INT_H

#include "mv_manifest.h"

/* The parts of an ok line that the tar layout's resume checks (mv_done_sample). */
typedef struct {
    int64_t offset, data_len;
    uint64_t xxh64;
    int has_xxh64, tar;
} tar_part;

/* One line read back: its input, status, order, and for an ok line what it made. */
typedef struct {
    const char *input, *output, *model;
    const char *error;  /* error lines: their "error" (NULL when absent) */
    const char *abs;    /* the input's path from /: "input_abs", or "input" when absolute; or NULL */
    const char *planned; /* error lines: their "planned_output" (NULL when absent) */
    int ok;
    int member;         /* a tar member's line (it records an "input_key") */
    int64_t bytes, offset;
    mv_done_input_stat src;
    tar_part tp;        /* ok lines: the tar layout's parts */
    mv_line_order ord;
} done_line;

/* Records line l in d as the next line in d's order (its ord.pos is set here): an input's
 * newest line decides its status, its newest ok line the name it holds. 0, or -1 when out of
 * memory. */
int mv_done_record(mv_done *d, done_line *l);

#endif
