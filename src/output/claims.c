/* claims.c - output names claimed across processes under OUT's lock file (see mv_claims.h).
 *
 * The claimer's view of other processes' claims is an mv_done set of the manifest lines appended
 * since the run opened its claims (without locks: every line, so that its own outputs are known),
 * each manifest read on from where the last look stopped (one replaced since, by inode, again
 * from its start), so it stays as small as the lines written during the run. Which manifests to
 * look at is the lock file's content: each run adds its manifest's name there when it starts, so
 * a claim never lists OUT (which holds the outputs). The lock file also says which runs are live
 * and with which fingerprint, so that a run of other settings is refused while one writes (see
 * live_enter). Not here: the tar layout's commit over every naming (claims_commit.c), the resume
 * set loaded at the start (manifest_done.c), writing outputs (output.c) or lines (manifest.c).
 */
#define _GNU_SOURCE /* F_OFD_SETLKW */
#include "claims_int.h"

#include "mv_manifest.h"
#include "mv_names.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mv_claims_slot(const char *out_rel) { return (int)(mv_hash64(out_rel, strlen(out_rel)) % CLAIM_SLOTS); }

static int no_lock_errno(int err) { return err == ENOLCK || err == EINVAL || err == EOPNOTSUPP; }

static mv_status open_lock(const char *out_dir, mv_claims **out, mv_err *e)
{
    *out = NULL;
    mv_claims *c = mv_calloc(1, sizeof *c);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", out_dir, MV_CLAIMS_LOCK);
    if (!c || !(c->out_dir = strdup(out_dir))) {
        free(c);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    c->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666); /* a FIFO there: no wait */
    struct stat sb;
    int err = c->fd < 0 ? errno : fstat(c->fd, &sb) != 0 ? errno : S_ISREG(sb.st_mode) ? 0 : -1;
    if (err) {
        if (c->fd >= 0)
            close(c->fd);
        free(c->out_dir);
        free(c);
        return mv_fail(e, MV_ERR_IO, "%s: cannot open OUT's lock file: %s", path,
                       err > 0 ? strerror(err) : "not a regular file (remove it: mvembed makes it again)");
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
    pthread_mutex_init(&c->mu, NULL);
    for (int i = 0; i < CLAIM_SLOTS; i++) {
        pthread_mutex_init(&c->slot_mu[i], NULL);
        pthread_mutex_init(&c->input_mu[i], NULL);
    }
    *out = c;
    return MV_OK;
}

/* The manifest names registered in the lock file (one a line, each a manifest's name as
 * mv_name_manifest makes it; others are ignored), into *names / *nn (free with
 * mv_manifest_list_free). */
static mv_status registered(mv_claims *c, char ***names, size_t *nn, mv_err *e)
{
    *names = NULL;
    *nn = 0;
    struct stat sb;
    if (fstat(c->fd, &sb) != 0)
        return mv_fail(e, MV_ERR_IO, "%s/%s: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    size_t len = (size_t)sb.st_size;
    char *text = mv_malloc(len + 1);
    if (!text)
        return mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", c->out_dir, MV_CLAIMS_LOCK);
    ssize_t got = len ? pread(c->fd, text, len, 0) : 0;
    if (got < 0) {
        free(text);
        return mv_fail(e, MV_ERR_IO, "%s/%s: read: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    }
    text[got] = 0;
    size_t cap = 0;
    mv_status st = MV_OK;
    for (char *line = strtok(text, "\n"); line && !st; line = strtok(NULL, "\n")) {
        int k, n;
        if (strcmp(line, "manifest.jsonl") != 0 && !mv_name_manifest_parse(line, &k, &n))
            continue;
        if (*nn == cap) {
            cap = cap ? cap * 2 : 8;
            char **nv = realloc(*names, cap * sizeof *nv);
            if (!nv) {
                st = mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", c->out_dir, MV_CLAIMS_LOCK);
                break;
            }
            *names = nv;
        }
        if (!((*names)[*nn] = strdup(line)))
            st = mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", c->out_dir, MV_CLAIMS_LOCK);
        else
            (*nn)++;
    }
    free(text);
    return st;
}

/* Adds manifest (a file name in OUT) to the lock file's list when it is not there yet; under
 * the list's lock (byte 1). */
static mv_status enlist(mv_claims *c, const char *manifest, mv_err *e)
{
    char **names;
    size_t nn;
    mv_status st = registered(c, &names, &nn, e);
    int there = 0;
    for (size_t i = 0; !st && i < nn; i++)
        there |= !strcmp(names[i], manifest);
    mv_manifest_list_free(names, nn);
    if (st || there)
        return st;
    char line[300];
    int n = snprintf(line, sizeof line, "%s\n", manifest);
    struct stat sb;
    if (fstat(c->fd, &sb) != 0 || pwrite(c->fd, line, (size_t)n, sb.st_size) != n)
        return mv_fail(e, MV_ERR_IO, "%s/%s: write: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    return MV_OK;
}

/* The end of path's last whole line (just past its last '\n') within its first size bytes; 0
 * when it has none or cannot be read (then every line is read on the next look). */
static int64_t whole_lines_end(const char *path, int64_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a regular file: never waits */
    if (fd < 0)
        return 0;
    char buf[65536];
    int64_t end = size, found = 0;
    while (end > 0 && !found) {
        int64_t from = end > (int64_t)sizeof buf ? end - (int64_t)sizeof buf : 0;
        ssize_t got = pread(fd, buf, (size_t)(end - from), from);
        if (got != end - from)
            break;
        for (int64_t i = got - 1; i >= 0 && !found; i--)
            if (buf[i] == '\n')
                found = from + i + 1;
        end = from;
    }
    close(fd);
    return found;
}

/* The manifest name's entry among those a look noted, or NULL. */
static seen_file *seen_of(const mv_claims *c, const char *name)
{
    for (size_t k = 0; k < c->n_files; k++)
        if (!strcmp(c->files[k].name, name))
            return &c->files[k];
    return NULL;
}

/* Notes where OUT's manifests end now (at open: every manifest in OUT, under the list's lock), or
 * reads on from there what the registered manifests gained since (other processes' lines; under
 * a slot's lock and c->mu). */
static mv_status look(mv_claims *c, int at_open, int note_only, mv_err *e)
{
    char **names;
    size_t nn;
    mv_status st = at_open ? mv_manifest_list(c->out_dir, &names, &nn, e) : registered(c, &names, &nn, e);
    for (size_t i = 0; !st && i <= nn; i++) {
        if (i == nn && !at_open)
            break; /* manifest.jsonl is registered like the others */
        const char *name = i < nn ? names[i] : "manifest.jsonl";
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", c->out_dir, name);
        struct stat sb;
        if (stat(p, &sb) != 0)
            continue;
        seen_file *f = seen_of(c, name);
        if (!f) {
            seen_file *nf = realloc(c->files, (c->n_files + 1) * sizeof *nf);
            char *dup = strdup(name);
            if (!nf || !dup) {
                if (nf)
                    c->files = nf;
                free(dup);
                st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", p);
                break;
            }
            c->files = nf;
            f = &c->files[c->n_files++];
            /* noted where its last whole line ends: a line another run is appending now is
             * read by the next look */
            int64_t off = !note_only ? 0 : S_ISREG(sb.st_mode) ? whole_lines_end(p, sb.st_size) : (int64_t)sb.st_size;
            *f = (seen_file){.name = dup, .ino = sb.st_ino, .off = off, .off0 = off};
        }
        if (f->ino != sb.st_ino || (int64_t)sb.st_size < f->off) { /* replaced (compact, merge) */
            f->ino = sb.st_ino;
            f->off = f->off0 = 0;
        }
        if (!note_only)
            st = mv_manifest_load_done_at(p, c->seen, &f->off, 0, NULL, NULL, e);
    }
    mv_manifest_list_free(names, nn);
    return st;
}

mv_status mv_claims_read_on(mv_claims *c, mv_err *e) { return look(c, 0, 0, e); }

int mv_claims_others_moved(mv_claims *c, const char *mine)
{
    char **names;
    size_t nn;
    mv_err e;
    if (registered(c, &names, &nn, &e) != MV_OK)
        return 1;
    int moved = 0;
    for (size_t i = 0; i < nn && !moved; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", c->out_dir, names[i]);
        struct stat sb;
        if (!strcmp(names[i], mine) || stat(p, &sb) != 0)
            continue;
        const seen_file *f = seen_of(c, names[i]);
        moved = !f || f->ino != sb.st_ino || (int64_t)sb.st_size != f->off;
    }
    mv_manifest_list_free(names, nn);
    return moved;
}

/* See mv_claims.h: the lines of the registered manifests read on (look), then asked. */
int mv_claims_named(mv_claims *c, const char *out_rel)
{
    mv_err e;
    mv_done_owner w;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    int named = look(c, 0, 0, &e) != MV_OK || mv_done_owner_of(c->seen, out_rel, &w);
    pthread_mutex_unlock(&c->mu);
    return named;
}

/* ---- live runs: who writes into OUT now, with which settings ---------------------------------
 * Each run (with locks) holds byte LIVE_BYTE0 + slot shared for its life and describes itself
 * in a line of the lock file, "live SSSS FP PID RUN HOST" in fixed widths: the line of a slot
 * nobody holds is a finished run's, and the next run takes it over in place (same length), so
 * the file grows by a line only for each run more at one time. Lines are read and written under
 * the list's lock (byte 1) only; lines that are not manifest names are ignored by the list. */
#define LIVE_FMT "live %04d %-16.16s %10ld %-16.16s %-64.64s\n"
#define LIVE_LEN (5 + 4 + 1 + 16 + 1 + 10 + 1 + 16 + 1 + 64 + 1)

typedef struct {
    int slot;
    off_t at; /* the line's offset in the lock file */
    char fp[17], run[17], host[65];
    long pid;
} live_line;

/* 1 when another open file description holds slot's byte. */
static int live_held(int fd, int slot)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LIVE_BYTE0 + slot, .l_len = 1};
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* The live lines of the lock file into *v (malloc'd) / *n. */
static mv_status live_lines(mv_claims *c, live_line **v, size_t *n, mv_err *e)
{
    *v = NULL;
    *n = 0;
    struct stat sb;
    if (fstat(c->fd, &sb) != 0)
        return mv_fail(e, MV_ERR_IO, "%s/%s: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    char *text = mv_malloc((size_t)sb.st_size + 1);
    if (!text)
        return mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", c->out_dir, MV_CLAIMS_LOCK);
    ssize_t got = sb.st_size ? pread(c->fd, text, (size_t)sb.st_size, 0) : 0;
    if (got < 0) {
        free(text);
        return mv_fail(e, MV_ERR_IO, "%s/%s: read: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    }
    text[got] = 0;
    size_t cap = 0;
    for (char *p = text, *nl; p < text + got && (nl = memchr(p, '\n', (size_t)(text + got - p))); p = nl + 1) {
        live_line l = {.at = p - text};
        *nl = 0;
        if (nl - p + 1 != LIVE_LEN || strncmp(p, "live ", 5) ||
            sscanf(p, "live %4d %16s %ld %16s %64s", &l.slot, l.fp, &l.pid, l.run, l.host) != 5 ||
            l.slot < 0 || l.slot >= LIVE_SLOTS)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            live_line *nv = realloc(*v, cap * sizeof *nv);
            if (!nv) {
                free(text);
                free(*v);
                *v = NULL;
                return mv_fail(e, MV_ERR_NOMEM, "%s/%s: out of memory", c->out_dir, MV_CLAIMS_LOCK);
            }
            *v = nv;
        }
        (*v)[(*n)++] = l;
    }
    free(text);
    return MV_OK;
}

int mv_claims_others_live(mv_claims *c, char *who, size_t cap)
{
    live_line *v;
    size_t n;
    mv_err e;
    if (!c || c->no_locks || live_lines(c, &v, &n, &e))
        return 0;
    int k = 0; /* this run's own slot is held by its own open file description: never counted */
    for (size_t i = 0; i < n; i++)
        if (live_held(c->fd, v[i].slot) && !k++ && who)
            snprintf(who, cap, "run %s, pid %ld on %s", v[i].run, v[i].pid, v[i].host);
    free(v);
    return k;
}

/* Under the list's lock: refuses (MV_ERR_USAGE) when a live run holds OUT with another
 * fingerprint than fp, else describes this run in a live line and holds its slot. */
static mv_status live_enter(mv_claims *c, const char *fp, mv_err *e)
{
    live_line *v;
    size_t n;
    mv_status st = live_lines(c, &v, &n, e);
    if (st)
        return st;
    const live_line *reuse = NULL;
    int next = 0;
    for (size_t i = 0; i < n && !st; i++) {
        next = v[i].slot >= next ? v[i].slot + 1 : next;
        if (!live_held(c->fd, v[i].slot)) {
            reuse = reuse ? reuse : &v[i];
            continue;
        }
        if (strcmp(v[i].fp, fp) != 0)
            st = mv_fail(e, MV_ERR_USAGE, "%s: another run is writing into it with other settings (run %s, "
                         "pid %ld on %s, fingerprint %s; this run's fingerprint is %s): both would write "
                         "their outputs into one OUT, mixed; nothing written: wait until that run has "
                         "finished (a later run redoes the outputs made with other settings), give this "
                         "run the same settings, or use another --out", c->out_dir, v[i].run, v[i].pid,
                         v[i].host, v[i].fp, fp);
    }
    int slot = reuse ? reuse->slot : next;
    off_t at = reuse ? reuse->at : -1;
    free(v);
    if (st)
        return st;
    if (slot >= LIVE_SLOTS)
        return MV_OK; /* that many runs at once: this one is not described (never refused either) */
    char host[65] = "", line[256];
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "?");
    for (char *h = host; *h; h++)
        *h = *h == ' ' || *h == '\n' ? '_' : *h;
    if (snprintf(line, sizeof line, LIVE_FMT, slot, fp, (long)getpid(), mv_manifest_run_id(), host) != LIVE_LEN)
        return MV_OK; /* not a line the others read (a pid of more than 10 digits): not described */
    struct stat sb;
    if (at < 0)
        at = fstat(c->fd, &sb) == 0 ? sb.st_size : -1;
    if (at < 0 || pwrite(c->fd, line, LIVE_LEN, at) != LIVE_LEN)
        return mv_fail(e, MV_ERR_IO, "%s/%s: write: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    if (ofd_lock(c->fd, F_RDLCK, LIVE_BYTE0 + slot, 1) != 0)
        return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
    return MV_OK;
}

mv_status mv_claims_open(const char *out_dir, const char *manifest, const char *fp, mv_claims **out,
                         int *no_locks, mv_err *e)
{
    *no_locks = 0;
    mv_claims *c;
    mv_status st = open_lock(out_dir, &c, e);
    if (st)
        return st;
    if ((st = mv_done_create(&c->seen, e))) {
        mv_claims_close(c);
        return st;
    }
    if (ofd_lock(c->fd, F_RDLCK, 0, 1) != 0) {
        int err = errno;
        if (!no_lock_errno(err)) {
            mv_claims_close(c);
            return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", out_dir, MV_CLAIMS_LOCK, strerror(err));
        }
        c->no_locks = *no_locks = 1;
    }
    /* the list grows one run at a time */
    if (!c->no_locks && ofd_lock(c->fd, F_WRLCK, LIST_BYTE, 1) != 0) {
        int err = errno;
        mv_claims_close(c);
        return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", out_dir, MV_CLAIMS_LOCK, strerror(err));
    }
    /* a run of other settings writing here now refuses this one before it adds anything */
    if (!c->no_locks && fp && fp[0])
        st = live_enter(c, fp, e);
    /* without locks, whether a file there is this input's own needs every line, old ones too */
    if (!st)
        st = enlist(c, manifest, e);
    if (!st)
        st = look(c, 1, !c->no_locks, e);
    if (!c->no_locks)
        ofd_lock(c->fd, F_UNLCK, LIST_BYTE, 0);
    if (st) {
        mv_claims_close(c);
        return st;
    }
    *out = c;
    return MV_OK;
}

/* The input slot of a path from /: the byte a claim holds around its name's, so that two runs
 * naming one file two ways (a relative path and one from /, from two directories) take turns. */
static int input_slot(const char *abs) { return (int)(mv_hash64(abs, strlen(abs)) % CLAIM_SLOTS); }

mv_status mv_claims_take(mv_claims *c, const char *input, const char *abs, const mv_done_input_stat *now,
                         const char *out_rel, int *may_replace, int *slot, char *elsewhere, size_t cap, mv_err *e)
{
    int k = mv_claims_slot(out_rel), ik = abs && !c->no_locks ? input_slot(abs) : -1;
    if (elsewhere && cap)
        elsewhere[0] = 0;
    if (ik >= 0) { /* the input's turn first, then the name's: one order for every run */
        pthread_mutex_lock(&c->input_mu[ik]);
        if (ofd_lock(c->fd, F_WRLCK, INPUT_BYTE0 + ik, 1) != 0) {
            int err = errno;
            pthread_mutex_unlock(&c->input_mu[ik]);
            return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(err));
        }
    }
    pthread_mutex_lock(&c->slot_mu[k]);
    mv_status st = MV_OK;
    if (!c->no_locks && ofd_lock(c->fd, F_WRLCK, SLOT_BYTE0 + k, 1) != 0) {
        int err = errno;
        pthread_mutex_unlock(&c->slot_mu[k]);
        st = mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(err));
        goto input_release;
    }
    *slot = k + CLAIM_SLOTS * (ik + 1); /* both slots, for mv_claims_release */
    pthread_mutex_lock(&c->mu);
    st = look(c, 0, 0, e);
    mv_done_owner w;
    int held = !st && mv_done_owner_of(c->seen, out_rel, &w), mine = held && mv_done_same_input(w.input, input);
    /* another run live beside this one embedded this file meanwhile, under another name or this
     * one (the same inputs given to two runs at once, or to runs of two --shard namings): its
     * line and file stand for it */
    const char *other = !st && ik >= 0 ? mv_done_name_of(c->seen, input, abs) : NULL;
    *may_replace = !c->no_locks || mine;
    if (mine && ik >= 0 && w.ok && strcmp(w.run, mv_manifest_run_id()))
        other = out_rel;
    if (held && !mine)
        st = mv_fail(e, MV_ERR_OUTPUT,
                     "%s: output name %s already holds the embedding of %s (written by another run "
                     "into this OUT meanwhile); not overwritten: use another --out, or remove that "
                     "output and its manifest lines", input, out_rel, w.input);
    else if (other && (other == out_rel || (strcmp(other, out_rel) && mv_done_owner_of(c->seen, other, &w) &&
                                            w.ok && strcmp(w.run, mv_manifest_run_id()))) &&
             !mv_done_input_differs(&w.src, now)) {
        st = mv_fail(e, MV_ERR_OUTPUT, "%s: embedded meanwhile by another run into this OUT as %s", input, other);
        if (elsewhere && cap)
            snprintf(elsewhere, cap, "%s", other);
    }
    pthread_mutex_unlock(&c->mu);
    if (st)
        mv_claims_release(c, *slot);
    return st;
input_release:
    if (ik >= 0) {
        ofd_lock(c->fd, F_UNLCK, INPUT_BYTE0 + ik, 0);
        pthread_mutex_unlock(&c->input_mu[ik]);
    }
    return st;
}

void mv_claims_release(mv_claims *c, int slot)
{
    int k = slot % CLAIM_SLOTS, ik = slot / CLAIM_SLOTS - 1; /* the name's slot, the input's or -1 */
    if (!c->no_locks)
        ofd_lock(c->fd, F_UNLCK, SLOT_BYTE0 + k, 0);
    pthread_mutex_unlock(&c->slot_mu[k]);
    if (ik >= 0) {
        ofd_lock(c->fd, F_UNLCK, INPUT_BYTE0 + ik, 0);
        pthread_mutex_unlock(&c->input_mu[ik]);
    }
}

void mv_claims_close(mv_claims *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd); /* drops the OFD locks */
    for (size_t i = 0; i < c->n_files; i++)
        free(c->files[i].name);
    free(c->files);
    mv_done_free(c->seen);
    pthread_mutex_destroy(&c->mu);
    for (int i = 0; i < CLAIM_SLOTS; i++) {
        pthread_mutex_destroy(&c->slot_mu[i]);
        pthread_mutex_destroy(&c->input_mu[i]);
    }
    free(c->out_dir);
    free(c);
}

mv_status mv_claims_hold_files(mv_claims *c, mv_err *e)
{
    if (c->no_locks || ofd_lock(c->fd, F_RDLCK, FILES_BYTE, 1) == 0)
        return MV_OK;
    return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", c->out_dir, MV_CLAIMS_LOCK, strerror(errno));
}

int mv_claims_files_run(const mv_claims *c)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = FILES_BYTE, .l_len = 1};
    return !c->no_locks && fcntl(c->fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

int mv_claims_lockless(const mv_claims *c) { return c && c->no_locks; }

mv_status mv_claims_exclusive(const char *out_dir, mv_claims **out, mv_err *e)
{
    mv_claims *c;
    mv_status st = open_lock(out_dir, &c, e);
    if (st)
        return st;
    if (ofd_lock(c->fd, F_WRLCK, 0, 0) != 0) {
        int err = errno;
        if (!no_lock_errno(err)) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
            if ((err == EAGAIN || err == EACCES) && fcntl(c->fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_WRLCK)
                err = -1; /* held exclusively: not a run (runs hold it shared) but a merge or compact */
            mv_claims_close(c);
            if (err == -1)
                return mv_fail(e, MV_ERR_USAGE, "%s: another manifest merge or compact is rewriting its "
                               "manifests (it holds %s/%s); try again once it has finished", out_dir, out_dir,
                               MV_CLAIMS_LOCK);
            if (err == EAGAIN || err == EACCES)
                return mv_fail(e, MV_ERR_USAGE, "%s: an mvembed run is writing into it (it holds %s/%s): "
                               "rewriting its manifests now would lose that run's lines; try again "
                               "once it has finished", out_dir, out_dir, MV_CLAIMS_LOCK);
            return mv_fail(e, MV_ERR_IO, "%s/%s: cannot lock: %s", out_dir, MV_CLAIMS_LOCK, strerror(err));
        }
        c->no_locks = 1;
    }
    *out = c;
    return MV_OK;
}
