/* test_queue.c - mv_queue (src/run/queue.c): FIFO order, the item bound, and a weighted queue's
 * budget (past `soft` items another is taken only while the weights fit; below soft always, even
 * an item heavier than the whole budget), a pop waking pushers that now fit, close waking a
 * blocked pusher; then many producers and consumers of random weights, where a watcher thread
 * sees the bounds hold at every moment and every item comes out exactly once. A push is shown to
 * block by a thread still inside it after 200 ms that returns once room is made. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "mv_queue.h"
#include "unit.h"

typedef struct {
    mv_queue *q;
    void *item;
    size_t w;
    atomic_int done;
    int rc;
} pusher;

static void *push_main(void *arg)
{
    pusher *p = arg;
    p->rc = mv_queue_push_w(p->q, p->item, p->w);
    atomic_store(&p->done, 1);
    return NULL;
}

static int done_within(pusher *p, int ms) { return unit_wait_flag(&p->done, ms); }

/* ---- many threads ---- */
#define N_ITEMS 20000
#define SOFT 4
#define CAP 64
#define WCAP 1000
static mv_queue mq;
static atomic_int seen[N_ITEMS];
static atomic_int next_item, stop_watch, bound_broken;

static size_t weight_of(intptr_t i) { return (size_t)((i * 2654435761u) % 400); }

static void *producer(void *arg)
{
    (void)arg;
    for (;;) {
        intptr_t i = atomic_fetch_add(&next_item, 1);
        if (i >= N_ITEMS)
            return NULL;
        mv_queue_push_w(&mq, (void *)(i + 1), weight_of(i));
    }
}

static void *consumer(void *arg)
{
    (void)arg;
    void *it;
    while ((it = mv_queue_pop(&mq)))
        atomic_fetch_add(&seen[(intptr_t)it - 1], 1);
    return NULL;
}

static void *watcher(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_watch)) {
        pthread_mutex_lock(&mq.mu);
        /* past SOFT items the weights stay within WCAP; never more than CAP items */
        if (mq.n > CAP || (mq.n > SOFT && mq.wsum > WCAP))
            atomic_store(&bound_broken, 1);
        pthread_mutex_unlock(&mq.mu);
    }
    return NULL;
}

int main(void)
{
    mv_queue q;
    CHECK(mv_queue_init(&q, 3) == 0, "a queue of 3 items");
    intptr_t a = 1, b = 2, c = 3;
    mv_queue_push(&q, (void *)a);
    mv_queue_push(&q, (void *)b);
    mv_queue_push(&q, (void *)c);
    pusher p = {.q = &q, .item = (void *)4};
    pthread_t t;
    pthread_create(&t, NULL, push_main, &p);
    CHECK(!done_within(&p, 200), "a fourth push waits");
    CHECK((intptr_t)mv_queue_pop(&q) == 1, "first in, first out");
    CHECK(done_within(&p, 5000) && p.rc == 0, "and goes in once one is taken");
    pthread_join(t, NULL);
    CHECK((intptr_t)mv_queue_pop(&q) == 2 && (intptr_t)mv_queue_pop(&q) == 3 && (intptr_t)mv_queue_pop(&q) == 4,
          "the rest in order");
    mv_queue_destroy(&q);

    /* weighted: at most 8 items, past 2 items the weights within 100 */
    CHECK(mv_queue_init_weighted(&q, 8, 2, 100) == 0, "a weighted queue (8 items, soft 2, budget 100)");
    mv_queue_push_w(&q, (void *)1, 500);
    mv_queue_push_w(&q, (void *)2, 10);
    CHECK(mv_queue_len(&q) == 2, "below soft, an item past the whole budget is taken");
    pusher p3 = {.q = &q, .item = (void *)3, .w = 0};
    pthread_create(&t, NULL, push_main, &p3);
    CHECK(!done_within(&p3, 200), "past soft and over budget, even a weightless item waits");
    mv_queue_pop(&q); /* the 500: 10 held */
    CHECK(done_within(&p3, 5000), "a pop that makes room wakes it");
    pthread_join(t, NULL);
    /* held: 10 + 0 in 2 items = soft: another fits while within 100 */
    mv_queue_push_w(&q, (void *)4, 90);
    CHECK(mv_queue_len(&q) == 3, "past soft, an item that fits the budget exactly is taken (100 of 100)");
    pusher p5 = {.q = &q, .item = (void *)5, .w = 1};
    pthread_create(&t, NULL, push_main, &p5);
    CHECK(!done_within(&p5, 200), "one more of weight 1 waits");
    mv_queue_close(&q);
    CHECK(done_within(&p5, 5000) && p5.rc == -1, "close wakes it, refused");
    pthread_join(t, NULL);
    CHECK((intptr_t)mv_queue_pop(&q) == 2 && (intptr_t)mv_queue_pop(&q) == 3 && (intptr_t)mv_queue_pop(&q) == 4 &&
              mv_queue_pop(&q) == NULL,
          "a closed queue drains what it holds, in order, then says empty");
    mv_queue_destroy(&q);

    /* unweighted queues built by init weigh nothing: weights are ignored */
    CHECK(mv_queue_init(&q, 2) == 0 && mv_queue_push_w(&q, (void *)1, 1000000) == 0 &&
              mv_queue_push_w(&q, (void *)2, 1000000) == 0 && mv_queue_len(&q) == 2,
          "a queue made by mv_queue_init counts items only");
    mv_queue_destroy(&q);

    /* 4 producers, 3 consumers, random weights */
    mv_queue_init_weighted(&mq, CAP, SOFT, WCAP);
    pthread_t pr[4], co[3], w;
    pthread_create(&w, NULL, watcher, NULL);
    for (int i = 0; i < 3; i++)
        pthread_create(&co[i], NULL, consumer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_create(&pr[i], NULL, producer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(pr[i], NULL);
    mv_queue_close(&mq);
    for (int i = 0; i < 3; i++)
        pthread_join(co[i], NULL);
    atomic_store(&stop_watch, 1);
    pthread_join(w, NULL);
    int once = 1;
    for (int i = 0; i < N_ITEMS; i++)
        once &= atomic_load(&seen[i]) == 1;
    CHECK(once, "%d items of random weights through 4 producers and 3 consumers, each exactly once", N_ITEMS);
    CHECK(!atomic_load(&bound_broken) && mq.wsum == 0, "the item bound and the budget held throughout");
    mv_queue_destroy(&mq);
    return UNIT_DONE();
}
