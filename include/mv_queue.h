/* mv_queue.h - a bounded multi-producer multi-consumer FIFO of pointers (pthreads), the glue
 * between mvembed's pipeline stages: walk -> decode pool -> tower -> writers. */
#ifndef MV_QUEUE_H
#define MV_QUEUE_H

#include <pthread.h>
#include <stddef.h>

typedef struct {
    void **buf;
    size_t cap, head, n;
    int closed;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
} mv_queue;

int mv_queue_init(mv_queue *q, size_t cap); /* 0 or -1 (no memory) */
void mv_queue_destroy(mv_queue *q);
/* Blocks while full. Returns 0, or -1 when the queue is closed (the item was not taken). */
int mv_queue_push(mv_queue *q, void *item);
/* Blocks while empty and open. Returns the item, or NULL once closed and drained. */
void *mv_queue_pop(mv_queue *q);
/* Non-blocking: the item, or NULL when empty right now. */
void *mv_queue_try_pop(mv_queue *q);
/* No more pushes; poppers drain what is left, then get NULL. */
void mv_queue_close(mv_queue *q);
size_t mv_queue_len(mv_queue *q);

#endif
