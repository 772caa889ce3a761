/* slabs.c - a tower thread's host memory (slabs.h): staging buffers grown on demand and the pool
 * of output slabs handed to the writers by reference. The pool's mutex guards the references; a
 * slab's buffer is written by its tower thread between pl_slab_get and handing out references,
 * then only read, by its inputs' writers, until the last reference is dropped.
 */
#include "slabs.h"

#include <stdlib.h>

void pl_slabs_init(pl_slab_pool *p, mv_backend *be, size_t least)
{
    p->be = be;
    p->least = least;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    for (int i = 0; i < OUT_SLABS_MAX; i++)
        p->s[i] = (pl_slab){.pool = p};
}

void pl_slabs_destroy(pl_slab_pool *p)
{
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->freed);
}

void pl_stage_free(mv_backend *be, void *buf, int pinned)
{
    if (pinned)
        be->host_free(be, buf);
    else
        free(buf);
}

/* The bytes a buffer that has to hold `bytes` is allocated with (pl_stage_reserve's rule). */
static size_t stage_size(size_t bytes, size_t least)
{
    return bytes <= least ? least /* a full forward's worth: later forwards fit */
                          : bytes + bytes / 2; /* past it: room to grow without a new allocation each time */
}

int pl_stage_reserve(mv_backend *be, void **buf, size_t *cap, int *pinned, size_t bytes, size_t least)
{
    if (*cap >= bytes)
        return 0;
    pl_stage_free(be, *buf, *pinned);
    *buf = NULL;
    *cap = 0;
    *pinned = 0;
    bytes = stage_size(bytes, least);
    if (be->host_alloc && (*buf = be->host_alloc(be, bytes)))
        *pinned = 1;
    else
        *buf = malloc(bytes);
    if (!*buf)
        return -1;
    *cap = bytes;
    return 0;
}

void pl_slab_release(void *owner)
{
    pl_slab *sb = owner;
    pthread_mutex_lock(&sb->pool->mu);
    if (--sb->refs == 0)
        pthread_cond_broadcast(&sb->pool->freed);
    pthread_mutex_unlock(&sb->pool->mu);
}

pl_slab *pl_slab_get(pl_slab_pool *p, size_t bytes, double *waited)
{
    pl_slab *sb = NULL;
    double t0 = mv_now();
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* a free slab already big enough, else any free one that was used, else a new one while
         * the pool is under its minimum count or its byte budget */
        size_t held = 0;
        int n_used = 0;
        pl_slab *fit = NULL, *used = NULL, *fresh = NULL;
        for (int i = 0; i < OUT_SLABS_MAX; i++) {
            pl_slab *x = &p->s[i];
            held += x->cap;
            n_used += x->cap > 0;
            if (x->refs)
                continue;
            if (x->cap >= bytes && !fit)
                fit = x;
            else if (x->cap && !used)
                used = x;
            else if (!x->cap && !fresh)
                fresh = x;
        }
        if (fresh && (n_used < OUT_SLABS_MIN || held + stage_size(bytes, p->least) <= OUT_SLAB_BYTES) && !fit)
            sb = fresh;
        else
            sb = fit ? fit : used;
        if (sb)
            break;
        pthread_cond_wait(&p->freed, &p->mu);
    }
    sb->refs = 1;
    pthread_mutex_unlock(&p->mu);
    *waited = mv_now() - t0;
    void *buf = sb->buf;
    int fail = pl_stage_reserve(p->be, &buf, &sb->cap, &sb->pinned, bytes, p->least);
    sb->buf = buf;
    if (fail) {
        pl_slab_release(sb);
        return NULL;
    }
    return sb;
}

void pl_slab_hold(pl_slab *sb, int n)
{
    pthread_mutex_lock(&sb->pool->mu);
    sb->refs += n;
    pthread_mutex_unlock(&sb->pool->mu);
}

void pl_slabs_drain(pl_slab_pool *p)
{
    pthread_mutex_lock(&p->mu); /* every input written or freed: wait for the last references */
    for (int i = 0; i < OUT_SLABS_MAX; i++)
        while (p->s[i].refs)
            pthread_cond_wait(&p->freed, &p->mu);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < OUT_SLABS_MAX; i++) {
        pl_stage_free(p->be, p->s[i].buf, p->s[i].pinned);
        p->s[i] = (pl_slab){.pool = p};
    }
}
