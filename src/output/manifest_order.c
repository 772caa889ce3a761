/* manifest_order.c - the order and provenance of records: the run id drawn once per process,
 * each record's stamp (schema, run, seq, time), and the one comparison that decides which of an
 * input's lines is the newest, for resume (manifest_done.c) and merge (manifest_merge.c) alike.
 * Not here: writing lines (manifest.c), reading them (manifest_done.c).
 */
#include "mv_manifest.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static char run_id[17];
static pthread_once_t run_once = PTHREAD_ONCE_INIT;
static _Atomic int64_t run_seq;

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
    r->time = (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) * 1e-6;
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
    snprintf(ord->run, sizeof ord->run, "%s", json_string_value(r));
    ord->seq = json_is_integer(q) ? (int64_t)json_integer_value(q) : 0;
}

