/* walk_rules.c - a directory walk's rules for a path given whole (see mv_walk_rules.h): the
 * components of the path read in place, its directories stat'ed from the deepest up. */
#include "mv_walk_rules.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mv_path_hidden(const char *p)
{
    for (const char *c = p; *c;) {
        size_t l = strcspn(c, "/");
        if (l && c[0] == '.' && !(l == 1 || (l == 2 && c[1] == '.')))
            return 1;
        c += l;
        while (*c == '/')
            c++;
    }
    return 0;
}

void mv_dir_memo_free(mv_dir_memo *m)
{
    free(m->dir);
    m->dir = NULL;
}

int mv_path_in_dir(mv_dir_memo *m, const char *p, dev_t dev, ino_t ino)
{
    const char *slash = strrchr(p, '/');
    size_t dl = slash ? (size_t)(slash - p) : 0;
    if (m->dir && strlen(m->dir) == dl && !memcmp(m->dir, p, dl))
        return m->in;
    mv_dir_memo_free(m);
    char *d = malloc(dl + 1);
    if (!d || !(m->dir = malloc(dl + 1))) {
        free(d);
        return -1;
    }
    memcpy(d, p, dl);
    d[dl] = 0;
    memcpy(m->dir, d, dl + 1);
    int in = 0;
    /* d, then each directory above it written in p: "a/b", "a"; "/d/e", "/d" (not "/") */
    while (!in && d[0] && strcmp(d, "/")) {
        struct stat sb;
        in = stat(d, &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino;
        char *up = strrchr(d, '/');
        if (!up)
            break;
        while (up > d && up[-1] == '/') /* "a//b" */
            up--;
        *up = 0;
    }
    free(d);
    m->in = in;
    return in;
}
