/* mv_walk.h - streaming iterator over the command line's PATH arguments (files, directories, "-").
 *
 * Directories are walked recursively and depth first, like `find -L` with each directory's entries
 * sorted by byte order, so the order is deterministic. Memory stays flat in the number of files: only
 * the sorted entry lists of the directories on the current descent path are held. Symlinks are
 * followed; a symlink that leads back to a directory being walked is reported as an error item.
 * Which files of a directory are inputs is decided by their names (mv_name_is_media).
 * This module does not open or decode the files, and the naming rules are mv_names.h's.
 */
#ifndef MV_WALK_H
#define MV_WALK_H

#include <stdio.h>
#include <sys/types.h>

#include "mv_common.h"
#include "mv_input.h"
#include "mv_tar_in.h"

/* Why a directory entry was passed over (not an input, not an error): counted by the walk
 * (mv_walk_skipped) and, with mv_walk_opts.on_skip, told one by one. */
typedef enum {
    MV_WALK_SKIP_NAME,    /* a regular file without an image/video extension (--all-files takes it) */
    MV_WALK_SKIP_HIDDEN,  /* a name starting with '.' (--hidden takes it), file or directory */
    MV_WALK_SKIP_OUT,     /* the output directory */
    MV_WALK_SKIP_SPECIAL, /* in a directory: a FIFO, socket, device, or a dangling link not named as media */
    MV_WALK_SKIP_N
} mv_walk_skip;

/* The reason in words ("not an image or video name", "hidden", ...). */
const char *mv_walk_skip_str(mv_walk_skip why);

typedef struct {
    int null_sep;  /* paths read from stdin ("-") are NUL-separated (find -print0), not lines */
    int all_files; /* in directories take every regular file, not only image/video extensions */
    int hidden;    /* in directories do not skip entries whose name starts with '.' */
    /* skip_dir: a directory never walked into (the output directory, so that a run whose OUT
     * lies inside an input directory does not take its own outputs and manifest): compared by
     * (st_dev, st_ino), so it is skipped however it is reached, symlinks included. */
    int has_skip;
    dev_t skip_dev;
    ino_t skip_ino;
    /* names_only: tar members are listed without reading their bytes (item.fd stays -1), for
     * counting inputs */
    int names_only;
    /* listed_rules (--walk-rules): a path given as a file (an argument, or read from stdin) is
     * passed over as a directory walk would pass it over, instead of being an input or an error
     * item: a component of it starting with '.' (not "." or "..") unless hidden, a name without an
     * image/video extension unless all_files (a tar shard's name is still read as one), not a
     * regular file, or inside skip_dir. A path that does not exist stays an error item. */
    int listed_rules;
    /* tar_member_max: the bound on a tar member's bytes (0: the default; mv_tar_in_limits) */
    long long tar_member_max;
    /* on_skip (may be NULL): called with each entry passed over (its path, valid during the call)
     * and why, on the caller's thread, from inside mv_walk_next */
    void (*on_skip)(void *user, const char *path, mv_walk_skip why);
    void *skip_user;
} mv_walk_opts;

typedef struct mv_walk mv_walk;

/* One walked item. Pointers stay valid until the next mv_walk_next / mv_walk_close.
 * path:  the path to open (a PATH argument, or DIR/relative for files found under DIR).
 * rel:   the output name (relative to OUT, without ".npy.zst"), from mv_output_name
 *        (mv_names.h): of the path relative to DIR for a file found under the directory argument
 *        DIR, of the path as given for a file argument or a path read from stdin. Never NULL; never starts with '/' and
 *        holds no "", "." or ".." component; may be "" on error items (empty argument).
 * error: NULL when the item is fine; otherwise a one-line reason (missing file, unreadable
 *        directory, symlink loop, not a regular file) that does not repeat the path. The walk
 *        goes on after an error item.
 * fd:    -1, or for a member of a tar PATH (a WebDataset shard, mv_tar_in.h: a file argument,
 *        stdin path or file found under DIR whose name ends in .tar, .tar.gz, .tgz, .tar.zst ...)
 *        a memfd holding the member's bytes; path is then "<tar path>/<member>" and rel that
 *        path's output name (of the tar's path relative to DIR when found under DIR). The walker closes it at the next
 *        call: dup() it to keep it. A tar that is unreadable part way is one error item (its
 *        path) after the members read so far.
 * Paths are raw bytes: non-UTF-8 names pass through unchanged. */
typedef struct {
    const char *path;
    const char *rel;
    const char *error;
    int fd;
    const mv_input_io *io;
    void *io_user;
    const mv_tar_meta *meta; /* a tar member's sample metadata (mv_tar_in_meta), else NULL */
    const char *tar;         /* a tar member's: the tar PATH it is read from, else NULL */
} mv_walk_item;

/* args[0..nargs) are PATH arguments; "-" reads further PATHs from stdin_fp (read incrementally;
 * one per line with a trailing '\r' stripped, or NUL-separated with o->null_sep; empty ones are
 * skipped). o may be NULL (all options off). args must outlive the walker. */
mv_status mv_walk_open(char *const *args, int nargs, const mv_walk_opts *o, FILE *stdin_fp,
                       mv_walk **w, mv_err *e);

/* Returns 1 with *item filled, 0 at the end, <0 on a fatal error (out of memory, stdin read
 * error; e set). */
int mv_walk_next(mv_walk *w, mv_walk_item *item, mv_err *e);

/* The entries passed over so far, by reason: counts[MV_WALK_SKIP_N]. */
void mv_walk_skipped(const mv_walk *w, long counts[MV_WALK_SKIP_N]);

void mv_walk_close(mv_walk *w);

#endif
