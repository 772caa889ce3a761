/* mv_walk_rules.h - a directory walk's rules for a path given whole (mv_walk_opts.listed_rules).
 *
 * A directory walk sees each component of what it reaches and passes over hidden names and the
 * output directory; a path listed by find(1) arrives whole. These say the same of such a path:
 * whether a component of it is hidden, and whether a directory in it is the output directory.
 * Only the components written in the path count (a relative path's current directory does not).
 * Not here: extensions (mv_names.h), the walk itself (mv_walk.h).
 */
#ifndef MV_WALK_RULES_H
#define MV_WALK_RULES_H

#include <sys/types.h>

/* 1 when a component of p starts with '.' and is not "." or "..". */
int mv_path_hidden(const char *p);

/* The answer for the last directory asked about, so that a list of files side by side costs one
 * set of stat calls. Zeroed to start; mv_dir_memo_free at the end. */
typedef struct {
    char *dir;
    int in;
} mv_dir_memo;
void mv_dir_memo_free(mv_dir_memo *m);

/* 1 when one of the directories written in p above its last component (a/b of a/b/x.jpg; /d/e
 * and /d of /d/e/x.jpg) is the directory (dev, ino), followed as stat follows it; 0 when none
 * is; -1 out of memory. */
int mv_path_in_dir(mv_dir_memo *m, const char *p, dev_t dev, ino_t ino);

#endif
