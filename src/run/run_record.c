/* run_record.c - the run record, OUT/run-[KKKKK-of-NNNNN-]RUN.json (see mv_run_record.h): built
 * with jansson from the run's facts and from its own manifest lines (read back from where the
 * manifest ended when the run started, keeping those with this run's id), written to a locked
 * temp file in OUT, fsync'd and renamed. Not here: the manifest lines themselves (manifest.c).
 */
#include "mv_run_record.h"

#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_version.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Causes by what the message says, first match wins; "decode" for the rest. */
static const struct {
    const char *needle, *cause;
} causes[] = {
    {"already holds the embedding of", "name_taken"},
    {"already used by another input of this run", "name_taken"},
    {"NaN/Inf", "non_finite"},
    {"exceeds the limit of", "too_large"},
    {"time limit", "timeout"},
    {"timed out", "timeout"},
    {"empty file", "empty"},
    {"not an image or video", "not_media"},
    {"not supported", "unsupported"},
    {"unsupported", "unsupported"},
    {"No such file or directory", "unreadable"},
    {"Permission denied", "unreadable"},
    {"not a regular file", "unreadable"},
    {"symbolic link", "unreadable"},
    {"read error", "unreadable"},
    {"cannot create", "output"},
    {"File name too long", "output"},
    {"path too long", "output"},
    {"Is a directory", "output"},
    {"Not a directory", "output"},
};

const char *mv_run_failure_cause(const char *msg)
{
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++)
        if (strstr(msg, causes[i].needle))
            return causes[i].cause;
    return "decode";
}

/* What the run's own manifest lines say: failures by cause (count, the first message and its
 * input), the bytes of its ok lines, and in the tar layout its samples by tar shard. */
typedef struct {
    json_t *failures; /* cause -> {"count", "example", "example_input"} */
    json_t *shards;   /* tar shard name -> {"samples", "embedding_bytes"}; NULL: files layout */
    json_int_t bytes;
} tallies;

static void count_failure(tallies *t, json_t *line)
{
    const char *err = json_string_value(json_object_get(line, "error"));
    const char *input = json_string_value(json_object_get(line, "input"));
    /* the cause is read from what follows the input's name: a folder named "unsupported" or
     * "timed out" says nothing about why its files failed */
    size_t n = input ? strlen(input) : 0;
    const char *why = err && n && !strncmp(err, input, n) && !strncmp(err + n, ": ", 2) ? err + n + 2 : err;
    const char *cause = mv_run_failure_cause(why ? why : "");
    json_t *c = json_object_get(t->failures, cause);
    if (!c && (c = json_pack("{s:I,s:s,s:s}", "count", (json_int_t)0, "example", err ? err : "",
                             "example_input", input ? input : "")))
        json_object_set_new(t->failures, cause, c);
    json_t *k = json_object_get(c, "count");
    if (k)
        json_integer_set(k, json_integer_value(k) + 1);
}

static void count_sample(tallies *t, const char *shard, json_int_t bytes)
{
    json_t *c = json_object_get(t->shards, shard);
    if (!c && (c = json_pack("{s:I,s:I}", "samples", (json_int_t)0, "embedding_bytes", (json_int_t)0)))
        json_object_set_new(t->shards, shard, c);
    json_t *n = json_object_get(c, "samples"), *b = json_object_get(c, "embedding_bytes");
    if (n && b) {
        json_integer_set(n, json_integer_value(n) + 1);
        json_integer_set(b, json_integer_value(b) + bytes);
    }
}

static void tally(const mv_run_info *ri, tallies *t)
{
    char path[4200];
    mv_name_manifest(path, sizeof path, ri->o->out_dir, ri->shard_k, ri->shard_n);
    int fd;
    mv_err oe;
    if (mv_open_regular(path, &fd, &oe) != MV_OK) /* gone, or not a file (a FIFO would block) */
        return;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return;
    }
    if (ri->manifest_start > 0 && fseeko(f, (off_t)ri->manifest_start, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    const char *id = mv_manifest_run_id();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)n, 0, &je);
        const char *run = json_string_value(json_object_get(o, "run"));
        const char *st = json_string_value(json_object_get(o, "status"));
        if (run && st && !strcmp(run, id)) {
            json_t *b = json_object_get(o, "bytes");
            const char *shard = json_string_value(json_object_get(o, "shard"));
            if (!strcmp(st, "ok") && json_is_integer(b)) {
                t->bytes += json_integer_value(b);
                if (t->shards && shard)
                    count_sample(t, shard, json_integer_value(b));
            }
            if (strcmp(st, "ok") != 0)
                count_failure(t, o);
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
}

/* Each tar shard's file size as it is now ("bytes"; null when it is gone). */
static void shard_sizes(const char *out, json_t *shards)
{
    const char *name;
    json_t *v;
    json_object_foreach(shards, name, v) {
        char p[4400];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", out, name);
        json_object_set_new(v, "bytes", stat(p, &sb) == 0 ? json_integer((json_int_t)sb.st_size) : json_null());
    }
}

/* t (seconds since the epoch) as ISO 8601 UTC to the microsecond, "2026-01-31T12:00:00.000000Z". */
static json_t *iso_utc(double t)
{
    time_t s = (time_t)t;
    struct tm tm;
    char buf[64], out[80];
    if (!gmtime_r(&s, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm))
        return json_null();
    long us = (long)((t - (double)s) * 1e6);
    snprintf(out, sizeof out, "%s.%06ldZ", buf, us < 0 ? 0 : us > 999999 ? 999999 : us);
    return json_string(out);
}

/* A path (or a message naming one) as a JSON string: itself when it is UTF-8, else as messages
 * show it (mv_escape: other bytes read \xHH), so that a record is written whatever OUT or the
 * model directory is called. */
static json_t *path_string(const char *s)
{
    json_t *j = json_string(s);
    if (j)
        return j;
    size_t cap = 4 * strlen(s) + 1;
    char *buf = malloc(cap);
    j = buf ? json_string(mv_escape(s, buf, cap)) : NULL;
    free(buf);
    return j;
}

/* o[key "_b64"]: the raw bytes of a path that is not UTF-8 (as manifest lines carry them) */
static void path_b64(json_t *o, const char *key, const char *s)
{
    json_t *j = json_string(s);
    if (j) {
        json_decref(j);
        return;
    }
    char k64[64], *enc = mv_base64_encode(s, strlen(s));
    snprintf(k64, sizeof k64, "%s_b64", key);
    if (enc)
        json_object_set_new(o, k64, json_string(enc));
    free(enc);
}

/* The backend's "k=v k=v" line as an object. */
static json_t *settings_object(const char *line)
{
    json_t *o = json_object();
    const char *p = line;
    while (o && *p) {
        while (*p == ' ')
            p++;
        const char *end = p + strcspn(p, " "), *eq = memchr(p, '=', (size_t)(end - p));
        if (eq && eq > p) {
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            json_object_set_new(o, key, json_stringn(eq + 1, (size_t)(end - eq - 1)));
        }
        p = end;
    }
    return o;
}

/* The snapshot commit when dir is a Hugging Face cache snapshot (.../snapshots/<40 hex>). */
static json_t *snapshot_commit(const char *dir)
{
    char *real = realpath(dir, NULL);
    json_t *c = json_null();
    const char *slash = real ? strrchr(real, '/') : NULL;
    if (slash && strlen(slash + 1) == 40 && strspn(slash + 1, "0123456789abcdef") == 40 &&
        slash - real >= 10 && !strncmp(slash - 10, "/snapshots", 10))
        c = json_string(slash + 1);
    free(real);
    return c;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The record's counts: {"inputs", "ok", "failed", "skipped"}. */
static json_t *counts_object(const mv_run_result *r)
{
    return json_pack("{s:I,s:I,s:I,s:I}", "inputs", (json_int_t)(r->ok + r->failed + r->skipped), "ok",
                     (json_int_t)r->ok, "failed", (json_int_t)r->failed, "skipped", (json_int_t)r->skipped);
}

int mv_run_complete(const mv_run_info *ri)
{
    return !ri->fatal && !ri->res->signal;
}

int mv_run_marks(const mv_run_info *ri)
{
    return mv_run_complete(ri) && !ri->res->others_live;
}

/* --out-dtype as the run resolved it: auto stays auto where each output's type is its own */
static const char *dtype_option(mv_dtype d)
{
    return d == MV_DT_F16 ? "f16" : d == MV_DT_BF16 ? "bf16" : d == MV_DT_AUTO ? "auto" : "f32";
}

static json_t *build(const mv_run_info *ri, const char *manifest_name)
{
    const mv_run_opts *o = ri->o;
    const mv_run_result *r = ri->res;
    tallies t = {.failures = json_object(), .shards = o->layout == MV_LAYOUT_TAR ? json_object() : NULL};
    tally(ri, &t);
    if (t.shards)
        shard_sizes(o->out_dir, t.shards);
    double secs = ri->t_end - ri->t_start;
    long inputs = r->ok + r->failed + r->skipped;
    const char *status = ri->fatal ? "fatal" : r->signal ? "interrupted" : "complete";
    json_t *shard = ri->shard_n > 1 ? json_pack("{s:i,s:i}", "k", ri->shard_k, "n", ri->shard_n) : json_null();
    char marker[4200];
    mv_name_marker(marker, sizeof marker, o->out_dir, ri->shard_k, ri->shard_n);
    json_t *j = json_pack(
        "{s:i,s:s,s:s,s:s,s:o,s:s,s:f,s:f,s:o,s:o,s:f,s:o,s:o*,"
        "s:{s:o,s:o,s:o},s:s,s:s,s:o,"
        "s:{s:s,s:s,s:s,s:i,s:i,s:b,s:b,s:I,s:I},"
        "s:o,s:o,s:I,s:o,s:o,s:{s:f,s:f,s:f}}",
        "schema", MV_RUN_RECORD_SCHEMA, "run", mv_manifest_run_id(), "mvembed_version", MV_VERSION,
        "status", status, "shard", shard, "manifest", manifest_name, "started_at", ri->started_at,
        "finished_at", ri->started_at + secs, "started_at_utc", iso_utc(ri->started_at), "finished_at_utc",
        iso_utc(ri->started_at + secs), "seconds", secs, "out", path_string(o->out_dir), "fatal_error",
        ri->fatal ? path_string(ri->fatal) : NULL, "model", "given", path_string(o->model_dir ? o->model_dir : ""),
        "dir", path_string(ri->model_dir), "commit", snapshot_commit(ri->model_dir),
        "fingerprint", ri->fingerprint, "settings_line", ri->settings, "settings", settings_object(ri->settings),
        "options", "out_dtype", dtype_option(o->out_dtype), "layout",
        o->layout == MV_LAYOUT_TAR ? "tar" : "files", "pool", o->pool ? "mean" : "none", "zstd_level",
        o->zstd_level, "num_frames", o->num_frames, "force", o->force, "input_hash", o->input_hash,
        "shard_size", (json_int_t)o->shard_size, "shard_samples", (json_int_t)o->shard_samples, "counts", counts_object(r), "failures", t.failures, "bytes_written", t.bytes,
        "tar_shards", t.shards ? t.shards : json_null(),
        "marker", mv_run_marks(ri) ? json_string(base_name(marker)) : json_null(),
        "rates", "inputs_per_second", secs > 0 ? inputs / secs : 0.0, "ok_per_second",
        secs > 0 ? r->ok / secs : 0.0, "bytes_per_second", secs > 0 ? t.bytes / secs : 0.0);
    if (j) {
        path_b64(j, "out", o->out_dir);
        json_t *m = json_object_get(j, "model");
        path_b64(m, "given", o->model_dir ? o->model_dir : "");
        path_b64(m, "dir", ri->model_dir);
    }
    return j;
}

/* Writes j (with a final newline) to fin through tmp in out: created exclusively, locked (the
 * sweep leaves it alone), fsync'd, renamed, and out fsync'd. */
static mv_status write_json(const char *out, const char *tmp, const char *fin, json_t *j, mv_err *e)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
    if (!text)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", fin);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    mv_status st = MV_OK;
    if (fd < 0) {
        st = mv_fail(e, MV_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(text);
        return st;
    }
    mv_output_lock_temp(fd); /* best effort where there are no locks */
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' NUL: the file ends in a newline */
    const char *p = text;
    size_t left = len + 1;
    while (left > 0 && !st) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            st = mv_fail(e, MV_ERR_IO, "%s: write: %s", tmp, k < 0 ? strerror(errno) : "no progress");
        else {
            p += k;
            left -= (size_t)k;
        }
    }
    free(text);
    if (!st && fsync(fd) != 0)
        st = mv_fail(e, MV_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (!st && rename(tmp, fin) != 0)
        st = mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
    close(fd);
    if (st) {
        unlink(tmp);
        return st;
    }
    return mv_sync_dir(out, e);
}

/* write_json, then j freed and fin copied into path[cap] (when non-NULL and written). */
static mv_status write_owned(const char *out, const char *tmp, const char *fin, json_t *j, char *path,
                             size_t cap, mv_err *e)
{
    mv_status st = write_json(out, tmp, fin, j, e);
    json_decref(j);
    if (!st && path)
        snprintf(path, cap, "%s", fin);
    return st;
}

mv_status mv_run_record_write(const mv_run_info *ri, char *path, size_t cap, mv_err *e)
{
    const char *out = ri->o->out_dir;
    char fin[4200], man[4200], tmp[4300];
    mv_name_run_record(fin, sizeof fin, out, ri->shard_k, ri->shard_n, mv_manifest_run_id());
    mv_name_manifest(man, sizeof man, out, ri->shard_k, ri->shard_n);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-run-%s.json", out, (long)getpid(), mv_manifest_run_id());
    return write_owned(out, tmp, fin, build(ri, base_name(man)), path, cap, e);
}

mv_status mv_run_marker_remove(const char *out, int k, int n, int *removed, mv_err *e)
{
    char p[4200];
    mv_name_marker(p, sizeof p, out, k, n);
    *removed = 0;
    if (unlink(p) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) /* none, or no OUT yet (the run says what OUT is) */
            return MV_OK;
        return mv_fail(e, MV_ERR_IO, "%s: cannot remove the completion marker of an earlier run: %s", p,
                       strerror(errno));
    }
    *removed = 1;
    return mv_sync_dir(out, e); /* a crash from here on must not bring it back */
}

mv_status mv_run_marker_write(const mv_run_info *ri, char *path, size_t cap, mv_err *e)
{
    const char *out = ri->o->out_dir;
    char fin[4200], man[4200], rec[4200], tmp[4300];
    mv_name_marker(fin, sizeof fin, out, ri->shard_k, ri->shard_n);
    mv_name_manifest(man, sizeof man, out, ri->shard_k, ri->shard_n);
    mv_name_run_record(rec, sizeof rec, out, ri->shard_k, ri->shard_n, mv_manifest_run_id());
    double secs = ri->t_end - ri->t_start;
    json_t *shard = ri->shard_n > 1 ? json_pack("{s:i,s:i}", "k", ri->shard_k, "n", ri->shard_n) : json_null();
    json_t *j = json_pack("{s:i,s:s,s:s,s:o,s:s,s:s,s:f,s:f,s:o,s:o}", "schema", MV_RUN_MARKER_SCHEMA,
                          "status", "complete", "run", mv_manifest_run_id(), "shard", shard, "record",
                          base_name(rec), "manifest", base_name(man), "started_at", ri->started_at,
                          "finished_at", ri->started_at + secs, "finished_at_utc", iso_utc(ri->started_at + secs),
                          "counts", counts_object(ri->res));
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-marker-%s", out, (long)getpid(), mv_manifest_run_id());
    return write_owned(out, tmp, fin, j, path, cap, e);
}
