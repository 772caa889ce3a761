/* walk_int.h - inside the walk (src/input/): the walker's state and its small helpers (inline,
 * so that neither file calls into the other both ways), shared by walk.c (directories,
 * PATH arguments and stdin path lists) and walk_tar.c (a tar's members as inputs, whether the tar
 * is an argument or found in a walked directory).
 * Not a public header: include/mv_walk.h is the API.
 */
#ifndef MV_WALK_INT_H
#define MV_WALK_INT_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "mv_names.h"
#include "mv_tar_in.h"
#include "mv_walk.h"
#include "mv_walk_rules.h"

typedef struct {
    char *arena;   /* entries back to back: one d_type byte, the name, NUL */
    char **names;  /* [n] pointers into arena, sorted by name */
    size_t n, i;   /* count, next to visit */
    dev_t dev;
    ino_t ino;
    size_t len;    /* length of this directory's path in w->pb */
} frame;

struct mv_walk {
    char *const *args;
    int nargs, argi;
    mv_walk_opts o;
    FILE *in;
    int in_active;   /* reading PATHs from stdin now */
    char *line;      /* getdelim buffer */
    size_t line_cap;
    frame *st;       /* [depth] directory stack */
    size_t depth, st_cap;
    char *pb;        /* current path bytes */
    size_t pb_cap;
    size_t rel_off;  /* offset of rel in pb for files found under the current directory argument */
    char *name;      /* the current item's output name (mv_output_name) */
    size_t name_cap;
    mv_tar_in *tar;  /* the tar being read (an argument, or found in a walk), or NULL */
    char *tar_path;  /* its path */
    size_t tar_rel;  /* where in it the part that names its members' outputs starts */
    int fd;          /* the last tar member's memfd, closed at the next call */
    long skipped[MV_WALK_SKIP_N]; /* entries passed over, by reason */
    mv_dir_memo memo; /* listed_rules: whether the last listed path's directory is in OUT */
    char err[1536];
};

/* *buf grown to hold need bytes (0; -1 when out of memory) */
static inline int mv_walk_reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need)
        nc *= 2;
    char *nb = realloc(*buf, nc);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = nc;
    return 0;
}

/* w->name = mv_output_name(p); returns it, or NULL when out of memory (e set). */
static inline const char *mv_walk_set_name(mv_walk *w, const char *p, mv_err *e)
{
    if (mv_walk_reserve(&w->name, &w->name_cap, mv_output_name_cap(strlen(p))))
        return mv_fail(e, MV_ERR_NOMEM, "out of memory for an output name"), NULL;
    mv_output_name(p, w->name);
    return w->name;
}

/* *it an error item for path (output name rel), w->err saying why: returns 1 */
static inline int mv_walk_yield_error(mv_walk *w, mv_walk_item *it, const char *path, const char *rel)
{
    it->path = path;
    it->rel = rel;
    it->error = w->err;
    return 1;
}

/* Counts an entry passed over (path) and tells on_skip (here, not in walk.c: walk_tar.c calls it
 * too, and walk.c calls walk_tar.c). */
static inline void mv_walk_told(mv_walk *w, const char *path, mv_walk_skip why)
{
    w->skipped[why]++;
    if (w->o.on_skip)
        w->o.on_skip(w->o.skip_user, path, why);
}

/* walk_tar.c: the tar being read, w->tar */
void mv_walk_tar_end(mv_walk *w);
int mv_walk_tar_start(mv_walk *w, const char *p, size_t rel_off, const char *rel, mv_walk_item *it,
                      mv_err *e);
int mv_walk_tar_next(mv_walk *w, mv_walk_item *it, mv_err *e);

#endif
