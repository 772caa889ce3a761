/* mv_queue.h - a bounded multi-producer multi-consumer FIFO of pointers (pthreads), the glue
 * between mvembed's pipeline stages: walk -> decode pool -> tower -> writers. A queue may also
 * weigh its items (mv_queue_init_weighted): past `soft` items it takes another only while the
 * weights held stay within a budget, so that many light items (small images' patches) fit where
 * a few heavy ones would fill it. */
#ifndef MV_QUEUE_H
#define MV_QUEUE_H

#include <pthread.h>
#include <stddef.h>

typedef struct {
    void **buf;
    size_t *w;         /* the items' weights (weighted queues), else NULL */
    size_t soft, wcap, wsum;
    size_t cap, head, n;
    int closed;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
} mv_queue;

int mv_queue_init(mv_queue *q, size_t cap); /* 0 or -1 (no memory) */
/* At most cap items; past soft items, another only while the weights held plus its own stay
 * within wcap (an item is always taken when fewer than soft are held). 0 or -1 (no memory). */
int mv_queue_init_weighted(mv_queue *q, size_t cap, size_t soft, size_t wcap);
void mv_queue_destroy(mv_queue *q);
/* Blocks while full. Returns 0, or -1 when the queue is closed (the item was not taken). */
int mv_queue_push(mv_queue *q, void *item);
/* mv_queue_push of an item of weight w (0 on a queue that weighs nothing). */
int mv_queue_push_w(mv_queue *q, void *item, size_t w);
/* Blocks while empty and open. Returns the item, or NULL once closed and drained. */
void *mv_queue_pop(mv_queue *q);
/* Non-blocking: the item, or NULL when empty right now. */
void *mv_queue_try_pop(mv_queue *q);
/* No more pushes; poppers drain what is left, then get NULL. */
void mv_queue_close(mv_queue *q);
size_t mv_queue_len(mv_queue *q);

#endif
