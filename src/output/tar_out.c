/* tar_out.c - the tar layout's shard writer (see mv_tar.h for the format and the guarantees).
 *
 * libarchive writes the ustar members (tar_dedup.c's member writer); it is set to no blocking
 * (bytes_per_block 0), so every byte it produces reaches the write callback at once and the
 * callback's running count is the position in the file. The offset of a member's data is that
 * count right after archive_write_header, and it is checked rather than assumed: it must be a
 * multiple of 512 and, after the data, the count must have grown by exactly the data's size (an
 * internal error otherwise, so a different libarchive behaviour cannot record wrong offsets
 * silently).
 * This file does not append to the manifest (the commit callback does, or with a run's check
 * of the same inputs tar_dedup.c) nor pick inputs.
 */
#include "mv_tar.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_place.h"
#include "mv_tar_resume.h"
#include "tar_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- temporary names (final names: mv_name_tar_shard, mv_names.h) ---------------------- */

/* Parses ".tmp-tar-<pid>-<16 hex>-<final>": returns the final part, sets *pid and host[17];
 * NULL when name is not a temporary shard. */
static const char *parse_temp(const char *name, long *pid, char host[17])
{
    const char *p = name;
    if (strncmp(p, ".tmp-tar-", 9) != 0)
        return NULL;
    p += 9;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || *end != '-' || v <= 0)
        return NULL;
    p = end + 1;
    for (int i = 0; i < 16; i++)
        if (!isxdigit((unsigned char)p[i]))
            return NULL;
    if (p[16] != '-')
        return NULL;
    memcpy(host, p, 16);
    host[16] = 0;
    *pid = v;
    return p + 17;
}

int mv_tar_parse_size(const char *s, long long *bytes)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    long long v = strtoll(s, &end, 10);
    if (errno || v <= 0)
        return -1;
    long long mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1LL << 10; end++; break;
    case 'm': case 'M': mul = 1LL << 20; end++; break;
    case 'g': case 'G': mul = 1LL << 30; end++; break;
    case 't': case 'T': mul = 1LL << 40; end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v > (1LL << 62) / mul)
        return -1;
    *bytes = v * mul;
    return 0;
}

/* ---- the set ------------------------------------------------------------------------------ */

/* 1 when the temporary shard name (in directory d; its writer pid of host) is abandoned: by
 * output.c's lock rule (its writer holds an OFD write lock from creation until the rename, seen
 * from any process, PID namespace or machine sharing the locks; unlocked and its pid not running
 * here, or old), and of this host or old (a shard of another host's run is left to age). */
static int temp_abandoned(DIR *d, const char *name, long pid, int same_host, struct stat *st)
{
    int fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int r = fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_nlink > 0 &&
            mv_output_temp_abandoned(fd, st, pid) &&
            (same_host || mv_output_temp_gone(st, pid, MV_TEMP_WRITER_UNKNOWN)); /* age alone */
    close(fd); /* drops the read lock the rule took */
    return r;
}

/* The highest shard number used in OUT under s's naming (-1 when none): final shards, and
 * temporary shards of any process (a live one's number is taken). With sweep, abandoned
 * temporary shards (temp_abandoned) are removed first (their inputs have no manifest line). */
static mv_status max_used(mv_tar_set *s, int sweep, long long *maxp, mv_err *e)
{
    DIR *d = opendir(s->dir);
    if (!d)
        return mv_fail(e, MV_ERR_IO, "%s: cannot list the output directory: %s", s->dir, strerror(errno));
    long long max = -1;
    long self = (long)getpid();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long long num = mv_name_tar_shard_parse(de->d_name, s->k, s->n);
        long pid;
        char host[17];
        const char *fin = parse_temp(de->d_name, &pid, host);
        struct stat st, now;
        if (fin) {
            if (sweep && pid != self && temp_abandoned(d, de->d_name, pid, !strcmp(host, s->host), &st) &&
                /* still the file judged (not renamed away and replaced meanwhile) */
                fstatat(dirfd(d), de->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
                unlinkat(dirfd(d), de->d_name, 0) == 0)
                continue; /* best effort: a leftover is only space */
            num = mv_name_tar_shard_parse(fin, s->k, s->n);
        }
        if (num > max)
            max = num;
    }
    closedir(d);
    *maxp = max;
    return MV_OK;
}

mv_status mv_tar_set_open(const char *out_dir, int k, int n, long long target_bytes, long long max_samples,
                          mv_tar_commit_fn commit, void *ud, mv_tar_set **out, mv_err *e)
{
    *out = NULL;
    mv_tar_set *s = mv_calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(out_dir))) {
        free(s);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", out_dir);
    }
    s->k = k;
    s->n = n;
    s->target = target_bytes > 0 ? target_bytes : MV_TAR_DEFAULT_SHARD_SIZE;
    s->max_samples = max_samples > 0 ? max_samples : 0;
    s->commit = commit;
    s->ud = ud;
    char hn[256] = "";
    if (gethostname(hn, sizeof hn - 1) != 0)
        strcpy(hn, "localhost");
    snprintf(s->host, sizeof s->host, "%016llx", (unsigned long long)mv_hash64(hn, strlen(hn)));
    pthread_mutex_init(&s->mu, NULL);
    s->lock_fd = -1;
    char mpath[4200];
    mv_name_manifest(mpath, sizeof mpath, out_dir, k, n);
    if ((s->lock_fd = open(mpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666)) < 0) {
        mv_fail(e, MV_ERR_IO, "%s: cannot open the manifest: %s", mpath, strerror(errno));
        mv_tar_set_free(s);
        return MV_ERR_IO;
    }
    /* the sweep, under the lock that shard_open creates temporary shards under; the temporary
     * files of other writers in OUT's top folder (manifest merge and compact) by output.c */
    mv_output_clean_temps(out_dir);
    long long max = -1;
    int lr;
    while ((lr = flock(s->lock_fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    mv_status st = lr ? mv_fail(e, MV_ERR_IO, "%s: cannot lock the manifest: %s", mpath, strerror(errno))
                      : max_used(s, 1, &max, e);
    if (!lr)
        flock(s->lock_fd, LOCK_UN);
    if (st) {
        mv_tar_set_free(s);
        return st;
    }
    atomic_store(&s->next, max + 1);
    *out = s;
    return MV_OK;
}

void mv_tar_set_test_pause(mv_tar_set *s, int ms) { s->pause_ms = ms; }

void mv_tar_set_free(mv_tar_set *s)
{
    if (!s)
        return;
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    mv_tar_dedup_free(s->dd);
    free(s->dir);
    free(s);
}

/* ---- one shard ---------------------------------------------------------------------------- */

static void shard_free(mv_tar_shard *sh)
{
    if (sh->a)
        archive_write_free(sh->a); /* closes the archive too; its writes may fail, no matter */
    if (sh->fd >= 0)
        close(sh->fd);
    free(sh->tmp);
    free(sh->fin);
    free(sh->lines);
    free(sh->npy);
    free(sh);
}

void mv_tar_abandon(mv_tar_shard *sh)
{
    if (!sh)
        return;
    if (sh->tmp)
        unlink(sh->tmp);
    /* after a failed write the archive is FATAL, and archive_write_free then skips the close
     * that frees its filters (libarchive 3.6 leaks them): close it first, to nothing that stays */
    if (sh->a)
        archive_write_close(sh->a);
    shard_free(sh);
}

static mv_status shard_open(mv_tar_set *s, mv_tar_shard **out, mv_err *e)
{
    *out = NULL;
    mv_tar_shard *sh = mv_calloc(1, sizeof *sh);
    size_t plen = strlen(s->dir) + 200;
    if (!sh || !(sh->tmp = mv_malloc(plen)) || !(sh->fin = mv_malloc(plen))) {
        if (sh) {
            free(sh->tmp);
            free(sh);
        }
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for a shard", s->dir);
    }
    sh->fd = -1;
    /* under the lock, above every number used in OUT now (other runs' temporary shards too),
     * then created exclusively: two runs sharing one OUT never pick the same number */
    pthread_mutex_lock(&s->mu);
    int lr;
    while ((lr = flock(s->lock_fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    long long max = -1;
    mv_status st = lr != 0 ? mv_fail(e, MV_ERR_IO, "%s: cannot lock the manifest to choose a shard number: "
                                     "%s", s->dir, strerror(errno))
                           : max_used(s, 0, &max, e);
    errno = 0;
    for (int tries = 0; !st && tries < 1000; tries++) {
        long long num = atomic_load(&s->next);
        if (num <= max)
            num = max + 1;
        atomic_store(&s->next, num + 1);
        mv_name_tar_shard(sh->name, sizeof sh->name, s->k, s->n, num);
        snprintf(sh->stem, sizeof sh->stem, "%.*s", (int)(strlen(sh->name) - 10), sh->name + 6);
        snprintf(sh->fin, plen, "%s/%s", s->dir, sh->name);
        snprintf(sh->tmp, plen, "%s/.tmp-tar-%ld-%s-%s", s->dir, (long)getpid(), s->host, sh->name);
        if (access(sh->fin, F_OK) == 0)
            continue;
        sh->fd = open(sh->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        /* write-locked until it is renamed or removed, so that no sweep takes it (output.c's
         * rule; created and locked under the manifest's lock, which sweeps take too). Without
         * locks on the file system it goes on unlocked: the sweep then goes by age. */
        if (sh->fd >= 0)
            mv_output_lock_temp(sh->fd);
        if (sh->fd >= 0 || errno != EEXIST)
            break;
    }
    int oerr = errno;
    if (lr == 0)
        flock(s->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&s->mu);
    if (st) {
        free(sh->tmp);
        sh->tmp = NULL;
        shard_free(sh);
        return st;
    }
    errno = oerr;
    if (sh->fd < 0) {
        mv_fail(e, MV_ERR_IO, "%s: cannot create temporary shard %s: %s", sh->fin, sh->tmp,
                strerror(errno));
        free(sh->tmp);
        sh->tmp = NULL;
        shard_free(sh);
        return MV_ERR_IO;
    }
    if (s->pause_ms > 0) /* test hook: another run chooses its number meanwhile */
        nanosleep(&(struct timespec){s->pause_ms / 1000, (long)(s->pause_ms % 1000) * 1000000}, NULL);
    if ((st = mv_tar_archive_open(sh, e))) {
        mv_tar_abandon(sh);
        return st;
    }
    *out = sh;
    return MV_OK;
}

static int64_t pad512(int64_t n) { return (n + 511) / 512 * 512; }

/* NaN/Inf among the n values as written (f32, or f16 little-endian halves: f32 values past
 * 65504 become Inf there). */
static size_t nonfinite_written(mv_dtype dt, const uint8_t *p, const float *data, size_t n)
{
    if (dt == MV_DT_F32)
        return mv_count_nonfinite(data, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += ((p[2 * i] | p[2 * i + 1] << 8) & 0x7c00) == 0x7c00;
    return bad;
}

/* The first half of a sample: completes *shp when it holds max_samples or the sample would take
 * it past the target, opens a shard when there is none, gives the sample its key and writes
 * npy[0..npy_len) as <key>.npy; *shp and *shp_out are the shard, *data_off where the array data
 * (after npy_hdr header bytes) starts. */
static mv_status sample_npy(mv_tar_set *s, mv_tar_shard **shp, const uint8_t *npy, size_t npy_len,
                            size_t npy_hdr, int64_t json_blocks, mv_tar_shard **sh_out, int64_t *data_off,
                            mv_err *e)
{
    mv_status st;
    mv_tar_shard *sh = *shp;
    /* complete a shard that is full, or that this sample (its .npy, its .json's json_blocks) would
     * take past the target; the end-of-archive is 1024 bytes */
    if (sh && sh->n > 0 && ((s->max_samples && sh->n >= s->max_samples) ||
                            sh->pos + 512 + pad512((int64_t)npy_len) + json_blocks + 1024 > s->target)) {
        *shp = NULL;
        if ((st = mv_tar_close(s, sh, e)))
            return st;
        sh = NULL;
    }
    if (!sh) {
        if ((st = shard_open(s, &sh, e)))
            return st;
        *shp = sh;
    }
    *sh_out = sh;
    snprintf(sh->key, sizeof sh->key, "%s-%06ld", sh->stem, sh->n);
    char member[160];
    int64_t off;
    snprintf(member, sizeof member, "%s.npy", sh->key);
    if ((st = mv_tar_note_npy(sh, 0, npy_len, npy_hdr, e)) ||
        (st = mv_tar_member(sh, member, npy, npy_len, &off, e)))
        return st;
    sh->npy[sh->n].off = off;
    *data_off = off + (int64_t)npy_hdr;
    if (*data_off % 64 != 0)
        return mv_fail(e, MV_ERR_INTERNAL, "%s: %s: array data at byte %lld is not 64-byte aligned",
                       sh->fin, member, (long long)*data_off);
    return MV_OK;
}

/* The second half: line[0..len) (the record, ending in '\n') as <key>.json, kept for the commit. */
static mv_status sample_json(mv_tar_shard *sh, const char *line, size_t line_len, mv_err *e)
{
    char member[160];
    int64_t off;
    snprintf(member, sizeof member, "%s.json", sh->key);
    mv_status st = mv_tar_member(sh, member, line, line_len, &off, e);
    if (st)
        return st;
    if (sh->nlines + line_len > sh->cap) {
        size_t nc = sh->cap ? sh->cap : 4096;
        while (nc < sh->nlines + line_len)
            nc *= 2;
        char *nl = realloc(sh->lines, nc);
        if (!nl)
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", sh->fin);
        sh->lines = nl;
        sh->cap = nc;
    }
    memcpy(sh->lines + sh->nlines, line, line_len);
    sh->nlines += line_len;
    sh->n++;
    return MV_OK;
}

mv_status mv_tar_add_copy(mv_tar_set *s, mv_tar_shard **shp, const uint8_t *npy, size_t npy_len,
                          size_t npy_hdr, const char *rec, mv_err *e)
{
    mv_tar_shard *sh;
    int64_t off;
    mv_status st = sample_npy(s, shp, npy, npy_len, npy_hdr, 512 + pad512((int64_t)strlen(rec) + 256), &sh, &off, e);
    if (st)
        return st;
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)off);
    char *a = mv_tar_record_set(rec, "output", sh->name, 0), *b = a ? mv_tar_record_set(a, "shard", sh->name, 0) : NULL;
    char *c = b ? mv_tar_record_set(b, "key", sh->key, 0) : NULL, *d = c ? mv_tar_record_set(c, "offset", num, 1) : NULL;
    size_t n = d ? strlen(d) : 0;
    char *line = d ? realloc(d, n + 2) : NULL;
    if (line) {
        line[n] = '\n';
        line[n + 1] = 0;
        st = sample_json(sh, line, n + 1, e);
    } else {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: a record to copy without output, shard, key or offset "
                     "(or out of memory)", sh->fin);
        free(d);
    }
    free(a);
    free(b);
    free(c);
    free(line);
    return st;
}

mv_status mv_tar_add(mv_tar_set *s, mv_tar_shard **shp, mv_record *r, mv_dtype dt, int64_t rows,
                     int64_t cols, const float *data, mv_err *e)
{
    if (dt != MV_DT_F32 && dt != MV_DT_F16 && dt != MV_DT_BF16)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tar layout: dtype must be f32, f16 or bf16", r->input);
    uint8_t *npy = NULL;
    size_t npy_len = 0;
    mv_status st = mv_npy_encode_f32_as(dt, rows, cols, data, &npy, &npy_len, e);
    if (st)
        return mv_fail_prefix(e, st, "%s", r->input);
    size_t count = (size_t)rows * (size_t)cols, npy_hdr = npy_len - count * mv_dtype_size(dt);
    size_t bad = nonfinite_written(dt, npy + npy_hdr, data, count);
    if (bad) { /* refused before the shard is touched: only this input fails */
        free(npy);
        return mv_fail(e, MV_ERR_MODEL, "%s: not written: the embedding holds %zu NaN/Inf values of %zu "
                       "as %s (the model or its preprocessing produced non-finite numbers for this "
                       "input%s)", r->input, bad, count, dt == MV_DT_F16 ? "f16" : "f32",
                       dt == MV_DT_F16 ? ", or values past f16's 65504" : "");
    }
    r->has_bytes = 1;
    r->bytes = (int64_t)npy_len;
    r->has_xxh64 = 1;
    r->xxh64 = mv_tar_checksum(npy, npy_len);
    char *line = NULL;
    size_t line_len = 0;
    /* the sample's .json counted as the record's line before the shard, key and offset are in
     * it, plus room for them, and a header (sample_npy completes a shard it would overflow) */
    mv_record probe = *r; /* the line without the fields this shard sets (r may hold a closed one's) */
    probe.output = probe.shard = probe.key = NULL;
    probe.has_offset = 0;
    if ((st = mv_manifest_format(&probe, &line, &line_len, e)))
        goto out;
    free(line);
    line = NULL;
    int64_t json_blocks = 512 + pad512((int64_t)line_len + 256);
    mv_tar_shard *sh;
    int64_t off;
    if ((st = sample_npy(s, shp, npy, npy_len, npy_hdr, json_blocks, &sh, &off, e)))
        goto out;
    r->output = sh->name;
    r->shard = sh->name;
    r->key = sh->key;
    r->has_offset = 1;
    r->offset = off;
    if ((st = mv_manifest_format(r, &line, &line_len, e)))
        goto out;
    line[line_len++] = '\n'; /* the format's NUL terminator becomes the newline */
    st = sample_json(sh, line, line_len, e);
out:
    free(npy);
    free(line);
    return st;
}

/* Names the complete, synced shard and commits its lines (s->commit, or with s->dd appended
 * under the commit lock the caller holds); frees sh in any case. */
static mv_status publish(mv_tar_set *s, mv_tar_shard *sh, mv_err *e)
{
    mv_status st;
    /* never over an existing file (mv_place.h); the descriptor, and with it the temporary
     * shard's lock, stays open until the shard has its name */
    if ((st = mv_place(AT_FDCWD, sh->tmp, sh->fin, 0, NULL, e))) {
        mv_tar_abandon(sh);
        return st;
    }
    if (mv_sync_dir(s->dir, NULL)) {
        st = mv_fail(e, MV_ERR_IO, "%s: fsync of directory %s: %s", sh->fin, s->dir, strerror(errno));
        unlink(sh->fin); /* not durable: its inputs are redone, no line points into it */
        free(sh->tmp);
        sh->tmp = NULL;
        shard_free(sh);
        return st;
    }
    /* the shard is complete and durable: now its lines may name it. Its lock is held until they
     * are appended (shard_free closes it), so a shard no line names and nobody locks is an
     * orphan of a run killed in between (mv_tar_adopt); its data was synced, so the close
     * cannot lose it */
    st = s->dd ? mv_tar_dedup_append(s, sh->lines, sh->nlines, e) : s->commit(s->ud, sh->lines, sh->nlines, e);
    free(sh->tmp);
    sh->tmp = NULL;
    shard_free(sh);
    return st;
}

mv_status mv_tar_close(mv_tar_set *s, mv_tar_shard *sh, mv_err *e)
{
    if (!sh)
        return MV_OK;
    mv_status st = MV_OK;
    if (archive_write_close(sh->a) != ARCHIVE_OK) {
        st = mv_fail(e, MV_ERR_IO, "%s: completing the tar: %s", sh->fin, archive_error_string(sh->a));
        mv_tar_abandon(sh);
        return st;
    }
    archive_write_free(sh->a);
    sh->a = NULL;
    if (fsync(sh->fd) != 0) {
        st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", sh->fin, strerror(errno));
        mv_tar_abandon(sh);
        return st;
    }
    if (!s->dd)
        return publish(s, sh, e);
    /* runs over the same inputs: samples another run committed meanwhile are taken out first */
    if ((st = mv_tar_dedup_begin(s, sh, e))) {
        mv_tar_abandon(sh);
        return st;
    }
    if (sh->n > 0)
        st = publish(s, sh, e);
    else
        mv_tar_abandon(sh); /* every sample was another run's: no empty shard */
    mv_tar_dedup_end(s);
    return st;
}
