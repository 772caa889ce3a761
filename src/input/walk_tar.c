/* walk_tar.c - the walk's tar input (see walk_int.h): a WebDataset shard, named as an argument or
 * found in a walked directory, read member by member (mv_tar_in.h), each input member handed out
 * as an item named <tar>/<member>, its output name from the same rule as a file's
 * (mv_output_name). A tar that cannot be read from some point on becomes one error item.
 * This file does not walk directories or read PATH arguments (walk.c), nor group members into
 * samples (tar_in.c).
 */
#include "walk_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mv_walk_tar_end(mv_walk *w)
{
    mv_tar_in_close(w->tar);
    w->tar = NULL;
    free(w->tar_path);
    w->tar_path = NULL;
}

static const char *after_path(const char *msg, const char *p) /* msg less the "p: " it starts with */
{
    return strncmp(msg, p, strlen(p)) == 0 && msg[strlen(p)] == ':' ? msg + strlen(p) + 2 : msg;
}

/* Starts reading the tar at p, a WebDataset shard whose members are the inputs, their outputs
 * named from p + rel_off (rel: p's own name): 0 (its members come next), 1 with *it an error
 * item, -1 fatal. */
int mv_walk_tar_start(mv_walk *w, const char *p, size_t rel_off, const char *rel, mv_walk_item *it, mv_err *e)
{
    mv_err te;
    if (!(w->tar_path = strdup(p))) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", p);
        return -1;
    }
    mv_status st = mv_tar_in_open(p, w->o.all_files, w->o.names_only, &w->tar, &te);
    if (st) { /* MV_ERR_IO: out of file descriptors, the run's failure */
        snprintf(w->err, sizeof w->err, "%s", after_path(te.msg, p));
        mv_walk_tar_end(w);
        return st == MV_ERR_IO ? (*e = te, -1) : mv_walk_yield_error(w, it, p, rel);
    }
    mv_tar_in_limits(w->tar, w->o.tar_member_max, 0);
    w->tar_rel = rel_off;
    return 0;
}

/* The next member of the tar being read: 1 with *it filled (an input or an error item), 0 when
 * the tar is done, 2 when it passed over a member with a hidden component (unless --hidden, as
 * a directory walk passes over hidden names: macOS's ._x.jpg beside x.jpg; WebDataset gives such
 * a basename no key), -1 fatal. */
int mv_walk_tar_next(mv_walk *w, mv_walk_item *it, mv_err *e)
{
    const char *name, *err;
    int fd;
    mv_err te;
    int r = mv_tar_in_next(w->tar, &name, &fd, &err, &te);
    if (r == 0 || r < -1) { /* the end; out of file descriptors (te says so): the run's failure */
        mv_walk_tar_end(w);
        return r ? (*e = te, -1) : 0;
    }
    /* the member's path <tar>/<member>, or the tar's when it is unreadable from here on (r < 0) */
    size_t tn = strlen(w->tar_path), mn = r > 0 ? strlen(name) : 0;
    const char *rel = NULL;
    if (mv_walk_reserve(&w->pb, &w->pb_cap, tn + mn + 2) == 0) {
        memcpy(w->pb, w->tar_path, tn + 1);
        if (r > 0) {
            w->pb[tn] = '/';
            memcpy(w->pb + tn + 1, name, mn + 1);
        }
        rel = mv_walk_set_name(w, w->pb + w->tar_rel, e);
    } else
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", w->tar_path);
    if (!rel) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (r > 0 && !w->o.hidden && mv_path_hidden(name)) {
        if (fd >= 0)
            close(fd);
        mv_walk_told(w, w->pb, MV_WALK_SKIP_HIDDEN);
        return 2;
    }
    if (r < 0) { /* one error item for the tar */
        snprintf(w->err, sizeof w->err, "%s", after_path(te.msg, w->tar_path)); /* te names the tar */
        mv_walk_tar_end(w);
        return mv_walk_yield_error(w, it, w->pb, rel);
    }
    it->meta = mv_tar_in_meta(w->tar); /* error items too: their lines name the sample */
    if (err) {
        snprintf(w->err, sizeof w->err, "%s", err);
        return mv_walk_yield_error(w, it, w->pb, rel);
    }
    w->fd = fd;
    it->path = w->pb;
    it->rel = rel;
    it->fd = fd;
    it->tar = w->tar_path;
    if (fd < 0)
        mv_tar_in_stream(w->tar, &it->io, &it->io_user); /* a large image, or names_only */
    return 1;
}
