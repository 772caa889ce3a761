/* manifest_order.c - the order and provenance of records: the run id drawn once per process,
 * each record's stamp (schema, run, seq, time), the one comparison that decides which of an
 * input's lines is the newest, for resume (manifest_done.c) and merge (manifest_merge.c) alike,
 * and which lines are of one input for merge, compact and failed (mv_line_input_key,
 * mv_line_stale).
 * Not here: writing lines (manifest.c), reading them (manifest_done.c).
 */
#include "mv_manifest.h"

#include "mv_hashset.h"
#include "mv_names.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char run_id[17];
static pthread_once_t run_once = PTHREAD_ONCE_INIT;
static _Atomic int64_t run_seq;
/* The newest "time" of any line read so far and of any record stamped, in microseconds: records
 * are stamped after it, so that a clock set back (or a host's clock behind the one of an earlier
 * run's host) never makes a rerun's lines older than the lines they replace. */
static _Atomic int64_t time_floor_us;
#define MV_TIME_FLOOR_MAX 8e9 /* seconds (year 2223): microseconds stay exact in a double */

static void raise_time_floor(int64_t us)
{
    int64_t cur = atomic_load(&time_floor_us);
    while (us > cur && !atomic_compare_exchange_weak(&time_floor_us, &cur, us))
        ;
}

static void draw_run_id(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) { /* no entropy source: time and pid */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40);
    }
    snprintf(run_id, sizeof run_id, "%016llx", (unsigned long long)v);
}

const char *mv_manifest_run_id(void)
{
    pthread_once(&run_once, draw_run_id);
    return run_id;
}

void mv_record_stamp(mv_record *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->schema = MV_MANIFEST_SCHEMA;
    r->run = mv_manifest_run_id();
    r->seq = atomic_fetch_add(&run_seq, 1) + 1;
    int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    int64_t floor = atomic_load(&time_floor_us);
    if (us <= floor) /* the clock is behind a line read or stamped before: just after it */
        us = floor + 1;
    raise_time_floor(us);
    r->time = (double)(us / 1000000) + (double)(us % 1000000) * 1e-6;
}

int mv_line_order_cmp(const mv_line_order *a, const mv_line_order *b)
{
    int ha = a->time > 0, hb = b->time > 0;
    if (ha != hb)
        return ha - hb;
    if (ha && a->run[0] && strcmp(a->run, b->run) == 0 && a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    if (ha && a->time != b->time)
        return a->time < b->time ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

void mv_line_order_of(json_t *line, uint64_t pos, mv_line_order *ord)
{
    memset(ord, 0, sizeof *ord);
    ord->pos = pos;
    json_t *t = json_object_get(line, "time"), *r = json_object_get(line, "run");
    json_t *q = json_object_get(line, "seq");
    if (!json_is_number(t) || json_number_value(t) <= 0 || !json_is_string(r))
        return;
    ord->time = json_number_value(t);
    if (ord->time < MV_TIME_FLOOR_MAX) /* records stamped from now on come after it */
        raise_time_floor((int64_t)(ord->time * 1e6 + 0.5));
    snprintf(ord->run, sizeof ord->run, "%s", json_string_value(r));
    ord->seq = json_is_integer(q) ? (int64_t)json_integer_value(q) : 0;
}

char *mv_line_input_key(const char *raw, size_t n, size_t *kl)
{
    int plain = memchr(raw, 0, n) == NULL;
    char *key = malloc(1 + (plain ? mv_output_name_cap(n) : n));
    if (!key)
        return NULL;
    key[0] = !plain ? 'r' : raw[0] == '/' ? '/' : '.';
    if (plain)
        *kl = 1 + mv_output_name(raw, key + 1);
    else {
        memcpy(key + 1, raw, n);
        *kl = 1 + n;
    }
    return key;
}

/* i's entry in s (key[0..len)) becomes i when line i is newer than the one it holds (values:
 * index + 1). -1 when out of memory. */
static int newest_put(mv_hashset *s, const mv_line_order *ord, const void *key, size_t len, size_t i)
{
    mv_hashset_entry *en = mv_hashset_add(s, key, len, NULL);
    if (!en)
        return -1;
    if (!en->value || mv_line_order_cmp(&ord[i], &ord[en->value - 1]) > 0)
        en->value = i + 1;
    return 0;
}

/* 1 when s holds key[0..len) for a line newer than line i. */
static int newer_in(const mv_hashset *s, const mv_line_order *ord, const void *key, size_t len, size_t i)
{
    const mv_hashset_entry *en = mv_hashset_find(s, key, len);
    return en && mv_line_order_cmp(&ord[en->value - 1], &ord[i]) > 0;
}

size_t mv_line_tar_of(const char *input)
{
    for (const char *c = strchr(input, '/'); c; c = strchr(c + 1, '/'))
        if (c > input && mv_name_is_tar_n(input, (size_t)(c - input)))
            return (size_t)(c - input);
    return 0;
}

int mv_line_settles(const mv_line_order *member, const mv_line_order *tar_error)
{
    return mv_line_order_cmp(member, tar_error) > 0 && member->run[0] && strcmp(member->run, tar_error->run);
}

/* Sets stale[i] for each tar error line (who[i].error, input a tar's path) that a member line
 * settles: the newest member line of each tar, keyed by the tar's path as the members spell it.
 * 0, or -1 when out of memory. */
static int tars_settled(size_t n, const mv_line_order *ord, const mv_line_who *who, char *stale)
{
    mv_hashset newest = {0};
    int rc = -1;
    for (size_t i = 0; i < n; i++) {
        size_t tl = who[i].member ? mv_line_tar_of(who[i].in) : 0;
        if (tl && newest_put(&newest, ord, who[i].in, tl, i))
            goto out;
    }
    for (size_t i = 0; newest.n && i < n; i++) {
        const mv_hashset_entry *en = who[i].error && !who[i].member
                                         ? mv_hashset_find(&newest, who[i].in, strlen(who[i].in)) : NULL;
        if (en && mv_line_settles(&ord[en->value - 1], &ord[i]))
            stale[i] = 1;
    }
    rc = 0;
out:
    mv_hashset_free(&newest);
    return rc;
}

int mv_line_stale(size_t n, const mv_line_order *ord, const mv_line_who *who, char *stale)
{
    mv_hashset by_out = {0}, by_file = {0}, by_file_ok = {0};
    dev_t(*id)[2] = calloc(n ? n : 1, sizeof *id);
    int rc = -1;
    if (!id)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (stat(who[i].in, &sb) == 0 && S_ISREG(sb.st_mode)) {
            id[i][0] = sb.st_dev;
            id[i][1] = sb.st_ino;
            if (newest_put(who[i].out ? &by_file_ok : &by_file, ord, id[i], sizeof id[i], i))
                goto out;
        } else
            id[i][0] = id[i][1] = (dev_t)-1; /* gone, a tar member: known by its path only */
        if (who[i].out && newest_put(&by_out, ord, who[i].out, strlen(who[i].out), i))
            goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *o = who[i].out;
        int known = id[i][0] != (dev_t)-1;
        stale[i] = (o && newer_in(&by_out, ord, o, strlen(o), i)) ||
                   (known && newer_in(&by_file, ord, id[i], sizeof id[i], i)) ||
                   (known && !o && newer_in(&by_file_ok, ord, id[i], sizeof id[i], i));
    }
    rc = tars_settled(n, ord, who, stale);
out:
    free(id);
    mv_hashset_free(&by_out);
    mv_hashset_free(&by_file);
    mv_hashset_free(&by_file_ok);
    return rc;
}
