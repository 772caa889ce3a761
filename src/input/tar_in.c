/* tar_in.c - WebDataset shards as inputs (see mv_tar_in.h): libarchive reads the tar as a stream;
 * each media member is copied into a memfd, which the item reads as an mv_input (mv_input.h). A
 * hard-link member (what GNU tar writes for a second name of one file) has no data of its own:
 * the tar is read again from its start up to the member it links to, whose data it gets; a
 * symbolic-link member likewise gets the data of the regular member its target names, resolved
 * within the tar (an absolute target, or one that leaves the tar, fails that member).
 * Samples (mv_tar_meta): the main reader keeps the metadata members of the sample it is in as it
 * passes them; a second reader of the tar, opened at the first input member and only ever moved
 * forward, reads what follows an input member within its sample, so each tar is read at most
 * twice (the second reader skips data it does not want: a seek in a plain tar). */
#define _GNU_SOURCE /* memfd_create */
#include "mv_tar_in.h"

#include "mv_hashset.h"
#include "mv_names.h"
#include "tar_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The extensions met in a sample (lower case), and the first met twice ("" none). */
typedef struct {
    mv_hashset seen;
    char twice[256];
} sample_exts;

struct mv_tar_in {
    struct archive *a;
    mv_tar_src *src, *ahead_src; /* what a and ahead read through (tar_unzip.c) */
    long long at;        /* headers the main reader has read */
    int in_sample;       /* gkey is the sample of the main reader's current member */
    char gkey[4096];
    mv_tar_raw before;     /* that sample's metadata members passed so far */
    sample_exts gext;      /* its members' extensions so far */
    struct archive *ahead; /* the second reader (NULL until wanted) */
    long long ahead_at;  /* headers it has read */
    int ahead_end;       /* it reached the end (or a damaged part) of the tar */
    char akey[4096];     /* the sample it last scanned, and what it found after its member */
    mv_tar_raw after;
    sample_exts aext;    /* that sample's extensions after the member; twice: of the whole sample */
    mv_hashset names;    /* the names handed out (as output names: mv_output_name) */
    mv_tar_meta meta;    /* handed out (mv_tar_in_meta) when has_meta */
    int has_meta;
    char *path;
    int all_files, names_only;
    char name[4096];
    char err[640];
    long long max_bytes, stream_from; /* mv_tar_in_limits */
    int streaming;                    /* the current member is handed out as a stream */
    int fd_limit;                     /* no memfd for it: the process is out of file descriptors */
    long long streamed;               /* its bytes read so far */
    mv_input_io io;
};

/* mv_tar_reader on t's tar, noting in t->fd_limit when the process is out of file descriptors. */
static struct archive *reader(mv_tar_in *t, mv_tar_src **src, char *why, size_t cap)
{
    struct archive *a = mv_tar_reader(t->path, src, why, cap);
    t->fd_limit |= !a && (errno == EMFILE || errno == ENFILE);
    return a;
}

mv_status mv_tar_in_open(const char *path, int all_files, int names_only, mv_tar_in **out, mv_err *e)
{
    *out = NULL;
    mv_tar_in *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    t->all_files = all_files;
    t->names_only = names_only;
    mv_tar_in_limits(t, 0, 0);
    if (!(t->a = reader(t, &t->src, t->err, sizeof t->err))) { /* out of descriptors: MV_ERR_IO */
        mv_status st = t->fd_limit ? MV_ERR_IO : MV_ERR_FORMAT;
        mv_fail(e, st, "%s: not a readable tar file (%s)", path, t->err);
        mv_tar_in_close(t);
        return st;
    }
    *out = t;
    return MV_OK;
}

void mv_tar_in_limits(mv_tar_in *t, long long max_bytes, long long stream_from)
{
    t->max_bytes = max_bytes > 0 ? max_bytes : MV_TAR_MEMBER_MAX_OF(MV_DECODE_MAX_PIXELS_DEFAULT);
    t->stream_from = stream_from ? stream_from : MV_TAR_STREAM_FROM;
}

static void over_bound(mv_tar_in *t, const char *what, long long size)
{
    snprintf(t->err, sizeof t->err, "tar member %s%lld bytes is over the %lld-byte bound on a member "
             "(--max-member-bytes)", what, size, t->max_bytes);
}

/* mv_input_io over the current member's data (archive_read_data), within the bound */
static ssize_t stream_read(void *user, void *buf, size_t n)
{
    mv_tar_in *t = user;
    la_ssize_t k = archive_read_data(t->a, buf, n);
    if (k < 0) {
        snprintf(t->err, sizeof t->err, "member data unreadable: %s", mv_tar_src_why(t->a, t->src));
        return -1;
    }
    if ((t->streamed += k) > t->max_bytes) {
        over_bound(t, "of more than ", t->max_bytes);
        return -1;
    }
    return k;
}

static const char *stream_error(void *user) { return ((mv_tar_in *)user)->err; }

int mv_tar_in_stream(mv_tar_in *t, const mv_input_io **io, void **user)
{
    if (!t->streaming)
        return -1;
    t->io = (mv_input_io){.read = stream_read, .error = stream_error};
    *io = &t->io;
    *user = t;
    return 0;
}

/* Copies the current member's data of a (reading through src) into a new memfd; -1 with t->err
 * set on failure. */
static int member_to_memfd(mv_tar_in *t, struct archive *a, const mv_tar_src *src, int64_t size)
{
    int fd = memfd_create("mvembed-tar-member", MFD_CLOEXEC);
    if (fd < 0) {
        t->fd_limit = errno == EMFILE || errno == ENFILE; /* the process's limit, not the member's */
        snprintf(t->err, sizeof t->err, "cannot make an in-memory file: %s", strerror(errno));
        return -1;
    }
    if (size > 0 && ftruncate(fd, size) != 0) {
        snprintf(t->err, sizeof t->err, "cannot hold %lld bytes in memory: %s", (long long)size, strerror(errno));
        close(fd);
        return -1;
    }
    char buf[1 << 16];
    int64_t off = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            snprintf(t->err, sizeof t->err, "member data unreadable: %s", mv_tar_src_why(a, src));
            close(fd);
            return -1;
        }
        if (off + n > t->max_bytes) { /* a member without a size in its header */
            over_bound(t, "of more than ", t->max_bytes);
            close(fd);
            return -1;
        }
        for (la_ssize_t w = 0; w < n;) {
            ssize_t k = pwrite(fd, buf + w, (size_t)(n - w), off);
            if (k <= 0) {
                snprintf(t->err, sizeof t->err, "cannot hold the member in memory: %s", strerror(errno));
                close(fd);
                return -1;
            }
            w += k;
            off += k;
        }
    }
    if (off != size && ftruncate(fd, off) != 0) {
        snprintf(t->err, sizeof t->err, "cannot size the in-memory file: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* A member name without its leading "./"s. */
static const char *member_name(const char *nm)
{
    while (nm[0] == '.' && nm[1] == '/')
        nm += 2;
    return nm;
}

/* The member name a symbolic link member nm with target names, in out[cap]: resolved against
 * nm's directory, "." and ".." applied. -1 when the target is absolute or leaves the tar. */
static int symlink_target(const char *nm, const char *target, char *out, size_t cap)
{
    if (target[0] == '/')
        return -1;
    char buf[8200];
    const char *slash = strrchr(nm, '/');
    snprintf(buf, sizeof buf, "%.*s%s%s", slash ? (int)(slash - nm) : 0, nm, slash ? "/" : "", target);
    size_t n = 0;
    out[0] = 0;
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            if (!n)
                return -1;
            char *up = strrchr(out, '/');
            n = up ? (size_t)(up - out) : 0;
            out[n] = 0;
            continue;
        }
        int k = snprintf(out + n, cap - n, "%s%s", n ? "/" : "", c);
        if (k < 0 || (size_t)k >= cap - n)
            return -1;
        n += (size_t)k;
    }
    return n ? 0 : -1;
}

/* The data of the regular member named target, read from a second pass over the tar, in a new
 * memfd: a hard link's (target before the link) or, with sym, a symbolic link's (anywhere in the
 * tar). -1 with t->err set when it is not found or fails. */
static int link_to_memfd(mv_tar_in *t, const char *self, const char *target, int sym)
{
    char want[4096], why[256];
    const char *kind = sym ? "symbolic link" : "hard link";
    if (sym ? symlink_target(self, target, want, sizeof want) != 0
            : snprintf(want, sizeof want, "%s", member_name(target)) >= (int)sizeof want) {
        snprintf(t->err, sizeof t->err, "%s to %.200s, which leads outside the tar", kind, target);
        return -1;
    }
    mv_tar_src *src;
    struct archive *a = reader(t, &src, why, sizeof why);
    int fd = -1;
    snprintf(t->err, sizeof t->err, "%s to %.200s, which is not a regular member %s the tar", kind, want,
             sym ? "of" : "before it in");
    if (!a) {
        snprintf(t->err, sizeof t->err, "%s to %.200s: cannot read the tar again: %s", kind, want, why);
        return -1;
    }
    struct archive_entry *en;
    while (archive_read_next_header(a, &en) == ARCHIVE_OK) {
        const char *nm = archive_entry_pathname(en);
        if (!nm || strcmp(member_name(nm), want))
            continue;
        if (!sym && !strcmp(member_name(nm), self))
            break; /* reached the link itself: its target is not before it */
        if (archive_entry_filetype(en) != AE_IFREG || archive_entry_hardlink(en))
            continue; /* the same name as a directory or another link: a later one may do */
        int64_t size = archive_entry_size_is_set(en) ? archive_entry_size(en) : 0;
        if (size > t->max_bytes)
            snprintf(t->err, sizeof t->err, "%s to %.200s, a member of %lld bytes, over the "
                     "%lld-byte bound on a member (--max-member-bytes)", kind, want, (long long)size,
                     t->max_bytes);
        else
            fd = member_to_memfd(t, a, src, size);
        break;
    }
    archive_read_free(a);
    mv_tar_src_free(src);
    return fd;
}

/* --- samples and their metadata ----------------------------------------------------------- */

/* x empty again, for a new sample. */
static void exts_reset(sample_exts *x)
{
    mv_hashset_free(&x->seen);
    x->twice[0] = 0;
}

/* Extension ext (lower case, as WebDataset compares them) met in a sample: noted in x, and in
 * x->twice when x, or before (NULL, or the sample's members before those x notes), has it
 * already (the first such). Out of memory, it is not noted. */
static void note_ext(sample_exts *x, const sample_exts *before, const char *ext)
{
    char e[sizeof x->twice];
    size_t n = 0;
    for (; ext[n] && n < sizeof e - 1; n++)
        e[n] = (char)(ext[n] >= 'A' && ext[n] <= 'Z' ? ext[n] - 'A' + 'a' : ext[n]);
    e[n] = 0;
    if (!n) /* no extension: WebDataset passes such a member by */
        return;
    int added = 1;
    if ((before && mv_hashset_find(&before->seen, e, n)) || (mv_hashset_add(&x->seen, e, n, &added) && !added))
        if (!x->twice[0])
            memcpy(x->twice, e, n + 1);
}

/* The main reader is at member raw (entry ent, its name as the tar has it): WebDataset's sample
 * is the run of members of one key (a leading "./" is part of it), so one of another key starts a
 * new sample; a metadata member is kept (not names_only). 1 when raw is a metadata member. */
static int track_sample(mv_tar_in *t, struct archive_entry *ent, const char *raw)
{
    char key[sizeof t->gkey];
    const char *ext = mv_tar_split_key(raw, key, sizeof key);
    int k = mv_tar_meta_kind(ext);
    if (!t->in_sample || strcmp(key, t->gkey)) {
        mv_tar_raw_clear(&t->before);
        exts_reset(&t->gext);
        memcpy(t->gkey, key, strlen(key) + 1);
        t->in_sample = 1;
    }
    note_ext(&t->gext, NULL, ext);
    if (k >= 0 && !t->names_only)
        mv_tar_read_meta(t->a, ent, raw, k, &t->before);
    return k >= 0;
}

/* The second reader is at the main reader's current member (header t->at): past its data, so
 * that damage inside it is told as such, not as damage after it. 0, or 1 with t->after.err set. */
static int skip_member(mv_tar_in *t)
{
    if (archive_read_data_skip(t->ahead) == ARCHIVE_OK)
        return 0;
    t->ahead_end = 1;
    if (!t->after.err[0])
        snprintf(t->after.err, sizeof t->after.err, "the tar is cut short or damaged inside this member: "
                 "%.300s", mv_tar_src_why(t->ahead, t->ahead_src));
    return 1;
}

/* The metadata members after the main reader's current member (header t->at) that share its key
 * t->gkey, into t->after, read by the second reader. 0, or -1 with t->err set when the tar cannot
 * be opened again. */
static int scan_after(mv_tar_in *t)
{
    if (t->ahead && t->ahead_at > t->at && !strcmp(t->akey, t->gkey))
        return 0; /* an earlier input member of this sample was scanned past this one */
    mv_tar_raw_clear(&t->after);
    exts_reset(&t->aext); /* what follows this member, and the sample's first repeat */
    memcpy(t->aext.twice, t->gext.twice, sizeof t->aext.twice);
    memcpy(t->akey, t->gkey, strlen(t->gkey) + 1);
    char why[256];
    if (!t->ahead && !(t->ahead = reader(t, &t->ahead_src, why, sizeof why))) {
        snprintf(t->err, sizeof t->err, "cannot read the tar a second time for the metadata after "
                 "this member: %s", why);
        return -1;
    }
    struct archive_entry *en;
    while (!t->ahead_end) {
        if (t->ahead_at == t->at && skip_member(t))
            break;
        int r = archive_read_next_header(t->ahead, &en);
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            t->ahead_end = 1; /* the main reader tells what is wrong when it gets there */
            if (r != ARCHIVE_EOF && !t->after.err[0]) /* and the rest of this sample may be lost */
                snprintf(t->after.err, sizeof t->after.err, "the tar is unreadable after this member, "
                         "where the rest of its sample would be: %.300s", mv_tar_src_why(t->ahead, t->ahead_src));
            break;
        }
        if (++t->ahead_at <= t->at)
            continue;
        const char *nm = archive_entry_pathname(en);
        if (!nm || (archive_entry_filetype(en) != AE_IFREG && archive_entry_filetype(en) != AE_IFLNK &&
                    !archive_entry_hardlink(en)))
            continue; /* as the main reader: directories are in no sample */
        char key[sizeof t->gkey];
        const char *ext = mv_tar_split_key(nm, key, sizeof key);
        int k = mv_tar_meta_kind(ext);
        if (strcmp(key, t->gkey))
            break; /* the next sample: where the next scan starts */
        note_ext(&t->aext, &t->gext, ext);
        if (k >= 0)
            mv_tar_read_meta(t->ahead, en, nm, k, &t->after);
    }
    return 0;
}

/* t->meta for the input member the main reader is at: its sample's metadata members before it
 * and after it (the later where both hold one kind). 0, or -1 with t->err set: the member fails. */
static int sample_meta(mv_tar_in *t)
{
    mv_tar_meta_clear(&t->meta);
    int bad = scan_after(t);
    if (!bad && t->aext.twice[0]) { /* WebDataset's reader refuses it ("duplicate file name") */
        snprintf(t->err, sizeof t->err, "sample %.400s of the tar holds two .%.100s members (a name "
                 "repeated within a sample): which goes with which is unknown", t->gkey, t->aext.twice);
        bad = 1;
    }
    if (bad || mv_tar_meta_build(&t->meta, t->gkey, &t->before, &t->after, t->err, sizeof t->err)) {
        mv_tar_meta_clear(&t->meta); /* the failed sample's error line still names its key */
        t->meta.key = strdup(t->gkey);
        t->meta.member_bytes = t->meta.member_mtime_ns = t->meta.member_mtime_s = -1;
        t->has_meta = t->meta.key != NULL;
        return -1;
    }
    t->has_meta = 1;
    return 0;
}

const mv_tar_meta *mv_tar_in_meta(const mv_tar_in *t) { return t->has_meta ? &t->meta : NULL; }

/* t->name made unique within the tar: a member whose name (as an output name, mv_output_name:
 * "./a.jpg" is "a.jpg") was handed out already, a second sample of one key or a name repeated
 * within a sample, is named NAME#2 (#3 ...), so that its output and manifest line are its own.
 * 0, or -1 with t->err set (out of memory, no room for the suffix). */
static int unique_name(mv_tar_in *t)
{
    size_t nl = strlen(t->name);
    char *norm = malloc(mv_output_name_cap(nl + 24));
    if (!norm) {
        snprintf(t->err, sizeof t->err, "out of memory for the names of the tar's members");
        return -1;
    }
    int added = 0;
    for (int n = 1; n < 1000000 && !added; n++) {
        if (n > 1 && nl + snprintf(NULL, 0, "#%d", n) >= sizeof t->name) {
            snprintf(t->err, sizeof t->err, "tar member name repeated, with no room for #%d after it", n);
            break;
        }
        if (n > 1)
            snprintf(t->name + nl, sizeof t->name - nl, "#%d", n);
        size_t k = mv_output_name(t->name, norm);
        if (!mv_hashset_add(&t->names, norm, k, &added)) {
            snprintf(t->err, sizeof t->err, "out of memory for the names of the tar's members");
            break;
        }
    }
    free(norm);
    return added ? 0 : -1;
}

/* mv_tar_in_next's end for a member copied to a memfd: 1 (fd, or *err set when it failed); -2
 * when the process is out of file descriptors (e set), which no member causes. */
static int member_fd(mv_tar_in *t, int fd, const char **err, mv_err *e)
{
    if (fd < 0 && t->fd_limit)
        return mv_fail(e, MV_ERR_IO, "%s/%s: %s", t->path, t->name, t->err), -2;
    *err = fd < 0 ? t->err : NULL;
    return 1;
}

int mv_tar_in_next(mv_tar_in *t, const char **name, int *fd, const char **err, mv_err *e)
{
    struct archive_entry *ent;
    *fd = -1;
    *err = NULL;
    t->streaming = t->fd_limit = 0;
    t->has_meta = 0;
    for (;;) {
        int r = archive_read_next_header(t->a, &ent);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            mv_fail(e, MV_ERR_FORMAT, "%s: tar unreadable after member %s: %s", t->path,
                    t->name[0] ? t->name : "(none)", mv_tar_src_why(t->a, t->src));
            return -1;
        }
        t->at++;
        const char *link = archive_entry_hardlink(ent), *nm = archive_entry_pathname(ent);
        const char *sym = archive_entry_filetype(ent) == AE_IFLNK ? archive_entry_symlink(ent) : NULL;
        if ((archive_entry_filetype(ent) != AE_IFREG && !link && !sym) || !nm)
            continue;
        if (track_sample(t, ent, nm))
            continue; /* a metadata member: never an input */
        nm = member_name(nm);
        const char *base = strrchr(nm, '/');
        base = base ? base + 1 : nm;
        if (!*base || (!t->all_files && !mv_name_is_media(base)))
            continue;
        *name = t->name;
        size_t nl = strlen(nm);
        if (nl >= sizeof t->name) { /* a pax name may be any length, a path at most 4095 bytes */
            size_t cut = 200;
            while (cut && ((unsigned char)nm[cut] & 0xC0) == 0x80) /* not inside a UTF-8 sequence */
                cut--;
            snprintf(t->name, sizeof t->name, "%.*s...", (int)cut, nm);
            snprintf(t->err, sizeof t->err, "tar member name of %zu bytes is over the %zu-byte limit "
                     "for paths (named here by its first %zu bytes)", nl, sizeof t->name - 1, cut);
            *err = t->err;
            return 1;
        }
        memcpy(t->name, nm, nl + 1);
        if (unique_name(t)) {
            *err = t->err;
            return 1;
        }
        if (!t->names_only && sample_meta(t))
            return member_fd(t, -1, err, e);
        int64_t size = archive_entry_size_is_set(ent) ? archive_entry_size(ent) : 0;
        t->meta.member_bytes = archive_entry_size_is_set(ent) ? size : -1;
        t->meta.member_mtime_s = archive_entry_mtime_is_set(ent) ? (int64_t)archive_entry_mtime(ent) : -1;
        t->meta.member_mtime_ns = archive_entry_mtime_is_set(ent)
                                      ? mv_time_ns(archive_entry_mtime(ent), archive_entry_mtime_nsec(ent))
                                      : -1;
        if ((link || sym) && !t->names_only) {
            *fd = link ? link_to_memfd(t, nm, link, 0) : link_to_memfd(t, nm, sym, 1);
            return member_fd(t, *fd, err, e);
        }
        if (size > t->max_bytes) { /* told by the header: nothing read, a sparse member's holes included */
            over_bound(t, "of ", size);
            *err = t->err;
            return 1;
        }
        if (t->names_only)
            return 1;
        t->streamed = 0;
        t->streaming = t->stream_from >= 0 && size > t->stream_from && mv_name_kind_of(base) == MV_NAME_IMAGE;
        if (t->streaming)
            return 1;
        *fd = member_to_memfd(t, t->a, t->src, size);
        return member_fd(t, *fd, err, e);
    }
}

void mv_tar_in_close(mv_tar_in *t)
{
    if (!t)
        return;
    if (t->a)
        archive_read_free(t->a);
    if (t->ahead)
        archive_read_free(t->ahead);
    mv_tar_src_free(t->src);
    mv_tar_src_free(t->ahead_src);
    mv_hashset_free(&t->names);
    mv_hashset_free(&t->gext.seen);
    mv_hashset_free(&t->aext.seen);
    mv_tar_raw_clear(&t->before);
    mv_tar_raw_clear(&t->after);
    mv_tar_meta_clear(&t->meta);
    free(t->path);
    free(t);
}
