/* test_slabs.c - a tower thread's host memory (src/run/slabs.c) on a fake backend that counts its
 * page-locked allocations: a buffer that has to grow takes `least` bytes at once (a full
 * forward's worth) where that holds the need, needs up to that never allocate again, a need past
 * it takes half again, and pageable buffers (no host_alloc: the CPU backend) take their need and
 * half again; the slab pool hands out slabs of at least its `least`, reuses a free one that fits,
 * and gives every buffer back when drained. The oracle is arithmetic on the requested sizes. */
#include <stdlib.h>
#include <string.h>

#include "../../src/run/slabs.h"
#include "unit.h"

static int n_alloc, n_free;
static size_t last_bytes;

static void *fake_alloc(mv_backend *b, size_t bytes)
{
    (void)b;
    n_alloc++;
    last_bytes = bytes;
    return malloc(bytes);
}

static void fake_free(mv_backend *b, void *p)
{
    (void)b;
    if (p)
        n_free++;
    free(p);
}

static void test_stage_reserve(void)
{
    mv_backend be;
    memset(&be, 0, sizeof be);
    be.host_alloc = fake_alloc;
    be.host_free = fake_free;
    void *buf = NULL;
    size_t cap = 0, least = 1000000;
    int pinned = 0;
    n_alloc = n_free = 0;
    CHECK(pl_stage_reserve(&be, &buf, &cap, &pinned, 1000, least) == 0 && buf && pinned && cap == least &&
              last_bytes == least,
          "a first small need takes the full forward's %zu bytes, page-locked (cap %zu)", least, cap);
    int ok = 1;
    for (size_t need = 1; need <= least; need += least / 7)
        ok &= pl_stage_reserve(&be, &buf, &cap, &pinned, need, least) == 0;
    ok &= pl_stage_reserve(&be, &buf, &cap, &pinned, least, least) == 0;
    CHECK(ok && n_alloc == 1 && n_free == 0, "needs up to the full forward's bytes allocate nothing more (%d allocations)",
          n_alloc);
    CHECK(pl_stage_reserve(&be, &buf, &cap, &pinned, least + 1, least) == 0 && n_alloc == 2 && n_free == 1 &&
              cap == (least + 1) + (least + 1) / 2,
          "a need past it frees the old buffer and takes half again (cap %zu)", cap);
    pl_stage_free(&be, buf, pinned);
    CHECK(n_free == 2, "pl_stage_free gives the page-locked buffer back to the backend");

    mv_backend cpu;
    memset(&cpu, 0, sizeof cpu);
    buf = NULL;
    cap = 0;
    pinned = 0;
    CHECK(pl_stage_reserve(&cpu, &buf, &cap, &pinned, 4000, 0) == 0 && buf && !pinned && cap == 6000,
          "without host_alloc the buffer is pageable and takes its need and half again (cap %zu)", cap);
    pl_stage_free(&cpu, buf, pinned);
}

static void test_pool(void)
{
    mv_backend be;
    memset(&be, 0, sizeof be);
    be.host_alloc = fake_alloc;
    be.host_free = fake_free;
    n_alloc = n_free = 0;
    pl_slab_pool p;
    size_t least = 1 << 20;
    pl_slabs_init(&p, &be, least);
    double waited = -1;
    pl_slab *a = pl_slab_get(&p, 1000, &waited);
    CHECK(a && a->cap == least && a->pinned && waited >= 0, "a slab for a small forward takes the pool's least (%zu)",
          a ? a->cap : 0);
    pl_slab *b = pl_slab_get(&p, least, &waited);
    CHECK(b && b != a && b->cap == least && n_alloc == 2, "a second forward while the first holds its slab: a new one");
    pl_slab_release(a);
    pl_slab *c = pl_slab_get(&p, least - 1, &waited);
    CHECK(c == a && n_alloc == 2, "a freed slab that fits is reused, no allocation (%d)", n_alloc);
    pl_slab_hold(c, 2); /* two inputs point into it */
    pl_slab_release(c);
    pl_slab_release(c);
    pl_slab_release(c);
    pl_slab_release(b);
    pl_slabs_drain(&p);
    CHECK(n_free == n_alloc, "drained: every slab's buffer given back (%d of %d)", n_free, n_alloc);
    pl_slabs_destroy(&p);
}

int main(void)
{
    test_stage_reserve();
    test_pool();
    return UNIT_DONE();
}
