/* walk.c - streaming, deterministic walk over PATH arguments (see mv_walk.h).
 *
 * Each directory is read whole (its entries, filtered, then sorted by byte order with strcmp),
 * closed, and pushed on an explicit stack of frames; the walk then goes depth first through the
 * sorted names. Only the frames on the current descent path are in memory, and no directory stays
 * open between calls, so neither memory nor file descriptors grow with the size of the tree.
 * Symlinks are followed (stat, like find -L); each frame remembers its directory's (st_dev, st_ino)
 * so that a directory met again inside itself is reported as a loop instead of walked, and the
 * output directory (mv_walk_opts.skip_*) is never walked into.
 * Output names for every kind of input come from one rule, mv_output_name (mv_names.h).
 * This file does not decide what a file contains; it only looks at names and file types.
 */
#include "mv_walk.h"

#include "mv_interrupt.h"
#include "mv_names.h"
#include "mv_tar_in.h"
#include "mv_walk_rules.h"
#include "walk_int.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>

/* pb = pb[0..dirlen) + '/' + name (no '/' doubled when the directory path ends in one). */
static int set_child(mv_walk *w, size_t dirlen, const char *name)
{
    size_t nl = strlen(name);
    int sep = dirlen > 0 && w->pb[dirlen - 1] != '/';
    if (mv_walk_reserve(&w->pb, &w->pb_cap, dirlen + sep + nl + 1))
        return -1;
    if (sep)
        w->pb[dirlen] = '/';
    memcpy(w->pb + dirlen + sep, name, nl + 1);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    /* entries begin with their d_type byte; compare the names byte-wise (strcmp is unsigned) */
    return strcmp(*(char *const *)a + 1, *(char *const *)b + 1);
}

static void frame_free(frame *f)
{
    free(f->arena);
    free(f->names);
    memset(f, 0, sizeof *f);
}

const char *mv_walk_skip_str(mv_walk_skip why)
{
    static const char *const s[MV_WALK_SKIP_N] = {
        "not an image or video name", "hidden", "the output directory", "not a regular file"};
    return why < MV_WALK_SKIP_N ? s[why] : "?";
}

/* mv_walk_told, for the path w->pb[0..dirlen) + '/' + name (name NULL: w->pb itself). */
static void skip(mv_walk *w, size_t dirlen, const char *name, mv_walk_skip why)
{
    if (!name || !w->o.on_skip) {
        mv_walk_told(w, w->pb, why);
        return;
    }
    char keep = w->pb[dirlen];
    if (set_child(w, dirlen, name) == 0)
        mv_walk_told(w, w->pb, why);
    else /* no memory for the path: counted, not told */
        w->skipped[why]++;
    w->pb[dirlen] = keep;
}

/* listed_rules: why listed path p (sb: its stat; NULL when gone, judged by name and place) is
 * passed over, or -1 when it is an input (or a directory to walk); -2 out of memory (e set). */
static int listed_skip(mv_walk *w, const char *p, const struct stat *sb, mv_err *e)
{
    if (!w->o.hidden && mv_path_hidden(p))
        return MV_WALK_SKIP_HIDDEN;
    int dir = sb && S_ISDIR(sb->st_mode);
    if (sb && !dir && !S_ISREG(sb->st_mode))
        return MV_WALK_SKIP_SPECIAL;
    if (!dir && !w->o.all_files && !mv_name_is_media(p) && mv_name_kind_of(p) != MV_NAME_TAR)
        return MV_WALK_SKIP_NAME;
    int in = w->o.has_skip ? mv_path_in_dir(&w->memo, p, w->o.skip_dev, w->o.skip_ino) : 0;
    if (in < 0) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", p);
        return -2;
    }
    return in ? MV_WALK_SKIP_OUT : -1;
}

static int keep_entry(mv_walk *w, const struct dirent *d, size_t dirlen)
{
    const char *nm = d->d_name;
    if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0)))
        return 0;
    if (nm[0] == '.' && !w->o.hidden) {
        skip(w, dirlen, nm, MV_WALK_SKIP_HIDDEN);
        return 0;
    }
    switch (d->d_type) {
    case DT_DIR:
    case DT_LNK:
    case DT_UNKNOWN:
        return 1; /* may be (or point to) a directory: decided when visited */
    case DT_REG:
        if (w->o.all_files || mv_name_is_media(nm) || mv_name_kind_of(nm) == MV_NAME_TAR)
            return 1;
        skip(w, dirlen, nm, MV_WALK_SKIP_NAME);
        return 0;
    default:
        skip(w, dirlen, nm, MV_WALK_SKIP_SPECIAL); /* FIFOs, sockets, devices */
        return 0;
    }
}

/* Opens the directory at w->pb and pushes its frame.
 * Returns 1 when pushed, 2 when it is the directory to skip (nothing pushed), 0 when an error
 * item message was written to w->err (nothing pushed), -1 when out of memory or of file
 * descriptors, the process's, not the directory's (e set). */
static int push_dir(mv_walk *w, mv_err *e)
{
    DIR *d = opendir(w->pb);
    if (!d) {
        int err = errno;
        if (err == EMFILE || err == ENFILE)
            return mv_fail(e, MV_ERR_IO, "%s: cannot open directory: %s", w->pb, strerror(err)), -1;
        snprintf(w->err, sizeof w->err, "cannot open directory: %s", strerror(err));
        return 0;
    }
    struct stat sb;
    if (fstat(dirfd(d), &sb) != 0) {
        snprintf(w->err, sizeof w->err, "cannot stat directory: %s", strerror(errno));
        closedir(d);
        return 0;
    }
    if (w->o.has_skip && sb.st_dev == w->o.skip_dev && sb.st_ino == w->o.skip_ino) {
        closedir(d);
        skip(w, 0, NULL, MV_WALK_SKIP_OUT);
        return 2;
    }
    for (size_t k = 0; k < w->depth; k++) {
        if (w->st[k].dev == sb.st_dev && w->st[k].ino == sb.st_ino) {
            snprintf(w->err, sizeof w->err,
                     "symlink loop: leads back to directory '%.*s' already being walked",
                     (int)(w->st[k].len > 1024 ? 1024 : w->st[k].len), w->pb);
            closedir(d);
            return 0;
        }
    }
    frame f = {.dev = sb.st_dev, .ino = sb.st_ino, .len = strlen(w->pb)};
    size_t used = 0, cap = 0, n = 0;
    size_t *offs = NULL, offs_cap = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                snprintf(w->err, sizeof w->err, "cannot read directory: %s", strerror(errno));
                closedir(d);
                free(f.arena);
                free(offs);
                return 0;
            }
            break;
        }
        if (!keep_entry(w, de, f.len))
            continue;
        size_t nl = strlen(de->d_name);
        if (mv_walk_reserve(&f.arena, &cap, used + nl + 2))
            goto nomem;
        if (n == offs_cap) {
            size_t nc = offs_cap ? offs_cap * 2 : 32;
            size_t *no = realloc(offs, nc * sizeof *no);
            if (!no)
                goto nomem;
            offs = no;
            offs_cap = nc;
        }
        offs[n++] = used;
        f.arena[used] = (char)de->d_type;
        memcpy(f.arena + used + 1, de->d_name, nl + 1);
        used += nl + 2;
    }
    closedir(d);
    d = NULL;
    f.names = mv_malloc(n * sizeof *f.names);
    if (!f.names)
        goto nomem;
    for (size_t k = 0; k < n; k++)
        f.names[k] = f.arena + offs[k];
    free(offs);
    offs = NULL, f.n = n;
    qsort(f.names, n, sizeof *f.names, cmp_names);
    if (w->depth == w->st_cap) {
        size_t nc = w->st_cap ? w->st_cap * 2 : 16;
        frame *ns = realloc(w->st, nc * sizeof *ns);
        if (!ns)
            goto nomem;
        w->st = ns;
        w->st_cap = nc;
    }
    w->st[w->depth++] = f;
    return 1;
nomem:
    if (d)
        closedir(d);
    free(offs);
    frame_free(&f);
    mv_fail(e, MV_ERR_NOMEM, "%s: out of memory while reading directory", w->pb);
    return -1;
}

/* Waits until the path list f has input (buffered, or on its descriptor: data, its end or an
 * error, which getdelim then tells) or the run is interrupted: 1, or 0 when interrupted. A list's
 * producer may stall for minutes (a slow find, a queue), and the stop a signal asks for must not
 * wait for its next line. glibc's FILE read pointers say whether anything is buffered (gnulib's
 * freadahead reads the same fields; stdio has no call for it). */
static int wait_input(FILE *f)
{
    struct pollfd pf = {.fd = fileno(f), .events = POLLIN};
    if (pf.fd < 0 || f->_IO_read_ptr < f->_IO_read_end)
        return 1;
    while (!mv_interrupted())
        if (poll(&pf, 1, 200) != 0)
            return 1;
    return 0;
}

/* Next PATH argument (from args or stdin). Returns 1 with *p set, 0 at the end, -1 fatal. */
static int next_arg(mv_walk *w, const char **p, mv_err *e)
{
    for (;;) {
        if (w->in_active) {
            int delim = w->o.null_sep ? '\0' : '\n';
            if (!wait_input(w->in))
                return 0; /* interrupted while the list's producer is silent */
            errno = 0;
            ssize_t r = getdelim(&w->line, &w->line_cap, delim, w->in);
            if (r < 0) {
                int err = errno;
                if (ferror(w->in))
                    return mv_fail(e, MV_ERR_IO, "<stdin>: cannot read paths: %s", strerror(err ?: EIO)), -1;
                if (err == ENOMEM)
                    return mv_fail(e, MV_ERR_NOMEM, "<stdin>: out of memory reading paths"), -1;
                w->in_active = 0;
                continue;
            }
            size_t n = (size_t)r - (w->line[r - 1] == (char)delim);
            n -= !w->o.null_sep && n > 0 && w->line[n - 1] == '\r'; /* a CRLF line end */
            w->line[n] = 0;
            if (!w->o.null_sep && strlen(w->line) < n) /* a\0b: no path holds a NUL; -0 was meant */
                return mv_fail(e, MV_ERR_USAGE, "<stdin>: a NUL byte in a path list read by lines, after "
                               "\"%s\": NUL-separated paths (find -print0) need -0 (--null)", w->line), -1;
            if (n == 0) { /* skipped: a stream of empty lines must not outlast a signal either */
                if (mv_interrupted())
                    return 0;
                continue;
            }
            *p = w->line;
            return 1;
        }
        if (w->argi >= w->nargs)
            return 0;
        const char *a = w->args[w->argi++];
        if (strcmp(a, "-") == 0) {
            w->in_active = 1;
            continue;
        }
        *p = a;
        return 1;
    }
}

/* Starts walking the directory argument p. Returns 1 when pushed, 0 for an error item (w->err,
 * w->pb hold it), -1 fatal. */
static int start_root(mv_walk *w, const char *p, mv_err *e)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (mv_walk_reserve(&w->pb, &w->pb_cap, n + 1)) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", p);
        return -1;
    }
    memcpy(w->pb, p, n);
    w->pb[n] = 0;
    w->rel_off = n + (w->pb[n - 1] == '/' ? 0 : 1);
    return push_dir(w, e);
}

/* The next entry of the directory on top of the stack: 1 with *it filled (an input or an error
 * item), 0 when there is nothing to hand out for it (passed over, a directory pushed, or the
 * directory done and popped), -1 fatal. */
static int frame_next(mv_walk *w, mv_walk_item *it, mv_err *e)
{
    frame *f = &w->st[w->depth - 1];
    if (f->i == f->n) {
        frame_free(f);
        w->depth--;
        return 0;
    }
    const char *ent = f->names[f->i++];
    unsigned char type = (unsigned char)ent[0];
    const char *name = ent + 1;
    if (set_child(w, f->len, name)) {
        mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
        return -1;
    }
    const char *rel = mv_walk_set_name(w, w->pb + w->rel_off, e);
    if (!rel)
        return -1;
    int tar = mv_name_kind_of(name) == MV_NAME_TAR; /* read as a shard, as when named itself */
    int taken = w->o.all_files || mv_name_is_media(name) || tar;
    int is_dir = type == DT_DIR, is_reg = type == DT_REG;
    if (!is_dir && !is_reg) { /* symlink or unknown type: follow it */
        struct stat sb;
        if (stat(w->pb, &sb) != 0) {
            if (!taken) { /* a dangling link, not named as media */
                skip(w, 0, NULL, MV_WALK_SKIP_SPECIAL);
                return 0;
            }
            mv_path_why(w->pb, errno, w->err, sizeof w->err); /* a dangling link: says so */
            return mv_walk_yield_error(w, it, w->pb, rel);
        }
        is_dir = S_ISDIR(sb.st_mode);
        is_reg = S_ISREG(sb.st_mode);
    }
    if (is_reg) {
        if (!taken) {
            skip(w, 0, NULL, MV_WALK_SKIP_NAME);
            return 0;
        }
        if (tar)
            return mv_walk_tar_start(w, w->pb, w->rel_off, rel, it, e);
        it->path = w->pb;
        it->rel = rel;
        return 1;
    }
    if (!is_dir) {
        skip(w, 0, NULL, MV_WALK_SKIP_SPECIAL);
        return 0;
    }
    int r = push_dir(w, e);
    if (r < 0)
        return -1;
    if (r == 0)
        return mv_walk_yield_error(w, it, w->pb, rel);
    return 0; /* pushed, or the output directory: skipped */
}

int mv_walk_next(mv_walk *w, mv_walk_item *it, mv_err *e)
{
    memset(it, 0, sizeof *it);
    it->fd = -1;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    for (;;) {
        if (mv_interrupted()) /* a list of only passed-over entries must not outlast a signal */
            return 0;
        if (w->tar) {
            int r = mv_walk_tar_next(w, it, e);
            if (r != 0 && r != 2) /* 2: a member passed over */
                return r;
            continue;
        }
        if (w->depth > 0) {
            int r = frame_next(w, it, e);
            if (r != 0)
                return r;
            continue;
        }
        const char *p;
        int r = next_arg(w, &p, e);
        if (r <= 0)
            return r;
        if (p[0] == 0) {
            snprintf(w->err, sizeof w->err, "an empty path (an argument or a line of input)");
            return mv_walk_yield_error(w, it, p, p);
        }
        const char *rel = mv_walk_set_name(w, p, e);
        if (!rel)
            return -1;
        struct stat sb;
        int gone = stat(p, &sb) != 0, err = errno;
        int why = w->o.listed_rules && (!gone || err == ENOENT) ? listed_skip(w, p, gone ? NULL : &sb, e) : -1;
        if (why == -2)
            return -1;
        if (why >= 0) {
            mv_walk_told(w, p, (mv_walk_skip)why);
            continue;
        }
        if (gone && (mv_path_why(p, err, w->err, sizeof w->err), 1)) /* not passed over */
            return mv_walk_yield_error(w, it, p, rel);
        if (S_ISDIR(sb.st_mode)) {
            r = start_root(w, p, e);
            if (r < 0)
                return -1;
            if (r == 0)
                return mv_walk_yield_error(w, it, p, rel);
            continue; /* walked, or skipped when it is the output directory */
        }
        if (!S_ISREG(sb.st_mode)) {
            snprintf(w->err, sizeof w->err, "not a regular file");
            return mv_walk_yield_error(w, it, p, rel);
        }
        if (mv_name_kind_of(p) == MV_NAME_TAR) { /* a WebDataset shard: its members are the inputs */
            if ((r = mv_walk_tar_start(w, p, 0, rel, it, e)) != 0)
                return r;
            continue;
        }
        it->path = p;
        it->rel = rel;
        return 1;
    }
}

mv_status mv_walk_open(char *const *args, int nargs, const mv_walk_opts *o, FILE *stdin_fp,
                       mv_walk **out, mv_err *e)
{
    *out = NULL;
    for (int i = 0; i < nargs; i++)
        if (strcmp(args[i], "-") == 0 && !stdin_fp)
            return mv_fail(e, MV_ERR_USAGE, "'-' given but no stdin stream to read paths from");
    mv_walk *w = mv_calloc(1, sizeof *w);
    if (!w)
        return mv_fail(e, MV_ERR_NOMEM, "walk: out of memory");
    w->args = args;
    w->nargs = nargs;
    if (o)
        w->o = *o;
    w->in = stdin_fp;
    w->fd = -1;
    *out = w;
    return MV_OK;
}

void mv_walk_skipped(const mv_walk *w, long counts[MV_WALK_SKIP_N])
{
    memcpy(counts, w->skipped, sizeof w->skipped);
}

void mv_walk_close(mv_walk *w)
{
    if (!w)
        return;
    for (size_t k = 0; k < w->depth; k++)
        frame_free(&w->st[k]);
    free(w->st);
    if (w->fd >= 0)
        close(w->fd);
    mv_walk_tar_end(w);
    free(w->pb);
    free(w->name);
    free(w->line);
    mv_dir_memo_free(&w->memo);
    free(w);
}
