/* queue.c - bounded blocking FIFO of pointers (see mv_queue.h). */
#include "mv_queue.h"

#include <stdlib.h>

int mv_queue_init(mv_queue *q, size_t cap)
{
    /* the locks first: a queue whose buffer failed can still be closed and destroyed */
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->head = q->n = 0;
    q->closed = 0;
    q->buf = calloc(cap ? cap : 1, sizeof *q->buf);
    q->cap = q->buf ? (cap ? cap : 1) : 0;
    return q->buf ? 0 : -1;
}

void mv_queue_destroy(mv_queue *q)
{
    free(q->buf);
    q->buf = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

int mv_queue_push(mv_queue *q, void *item)
{
    pthread_mutex_lock(&q->mu);
    while (q->n == q->cap && !q->closed)
        pthread_cond_wait(&q->not_full, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    q->buf[(q->head + q->n) % q->cap] = item;
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

static void *take(mv_queue *q)
{
    void *it = q->buf[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
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
