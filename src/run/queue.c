/* queue.c - bounded blocking FIFO of pointers, optionally weighing its items (see mv_queue.h). */
#include "mv_queue.h"

#include <stdlib.h>

int mv_queue_init(mv_queue *q, size_t cap)
{
    return mv_queue_init_weighted(q, cap, cap, 0);
}

int mv_queue_init_weighted(mv_queue *q, size_t cap, size_t soft, size_t wcap)
{
    /* the locks first: a queue whose buffer failed can still be closed and destroyed */
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->head = q->n = 0;
    q->closed = 0;
    cap = cap ? cap : 1;
    q->soft = soft < cap ? soft : cap;
    q->wcap = wcap;
    q->wsum = 0;
    q->buf = calloc(cap, sizeof *q->buf);
    q->w = q->soft < cap ? calloc(cap, sizeof *q->w) : NULL;
    if (q->soft < cap && !q->w) {
        free(q->buf);
        q->buf = NULL;
    }
    q->cap = q->buf ? cap : 0;
    return q->buf ? 0 : -1;
}

void mv_queue_destroy(mv_queue *q)
{
    free(q->buf);
    free(q->w);
    q->buf = NULL;
    q->w = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

/* No room for an item of weight w now. */
static int full(const mv_queue *q, size_t w)
{
    return q->n == q->cap || (q->w && q->n >= q->soft && q->wsum + w > q->wcap);
}

int mv_queue_push(mv_queue *q, void *item) { return mv_queue_push_w(q, item, 0); }

int mv_queue_push_w(mv_queue *q, void *item, size_t w)
{
    pthread_mutex_lock(&q->mu);
    while (full(q, w) && !q->closed)
        pthread_cond_wait(&q->not_full, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    size_t at = (q->head + q->n) % q->cap;
    q->buf[at] = item;
    if (q->w) {
        q->w[at] = w;
        q->wsum += w;
    }
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

static void *take(mv_queue *q)
{
    void *it = q->buf[q->head];
    if (q->w)
        q->wsum -= q->w[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    if (q->w) /* the room freed may fit several lighter items, or none of a heavier one */
        pthread_cond_broadcast(&q->not_full);
    else
        pthread_cond_signal(&q->not_full);
    return it;
}

void *mv_queue_pop(mv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->n == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->mu);
    void *it = q->n ? take(q) : NULL;
    pthread_mutex_unlock(&q->mu);
    return it;
}

void *mv_queue_try_pop(mv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    void *it = q->n ? take(q) : NULL;
    pthread_mutex_unlock(&q->mu);
    return it;
}

void mv_queue_close(mv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

size_t mv_queue_len(mv_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}
