/* slabs.h - a tower thread's host memory (slabs.c; internal to src/run, not a public header): the
 * staging buffer of a forward's frames and the pool of output slabs, page-locked when the backend
 * offers it (mv_backend.host_alloc), else malloc'ed.
 *
 * Output slabs: a forward writes its outputs into a slab; each input of the forward points into
 * it and holds a reference until its writer is done, then the slab goes back to its tower thread.
 * No per-input output allocation or copy on the tower thread. A slab comes back only when every
 * input in it is written, so a tower thread needs enough of them to keep the writers fed: it has
 * at least OUT_SLABS_MIN, and takes more (up to OUT_SLABS_MAX) while its slabs hold at most
 * OUT_SLAB_BYTES together (too few slabs leave the writers idle while the tower waits for one:
 * bench/NOTES.md, the pipeline). Memory stays bounded, and slow writers hold the tower
 * back (backpressure) instead of piling up outputs. Not here: what goes into them (towers.c).
 */
#ifndef MV_SLABS_H
#define MV_SLABS_H

#include "mv_backend.h"

#include <pthread.h>
#include <stddef.h>

#define OUT_SLABS_MIN 3
#define OUT_SLABS_MAX 16
#define OUT_SLAB_BYTES ((size_t)1 << 30)

typedef struct pl_slab_pool pl_slab_pool;
typedef struct {
    float *buf;
    size_t cap; /* bytes */
    int pinned;
    int refs;   /* the forward and its inputs still holding it (under the pool's mutex) */
    pl_slab_pool *pool;
} pl_slab;
struct pl_slab_pool {
    mv_backend *be; /* whose host memory the slabs are */
    size_t least;   /* the bytes a slab takes at least when allocated */
    pthread_mutex_t mu;
    pthread_cond_t freed;
    pl_slab s[OUT_SLABS_MAX];
};

/* Grows a staging buffer (*buf of *cap bytes, *pinned when from be's host_alloc) to at least
 * `bytes`, page-locked when the backend can (CUDA), else with malloc. A buffer that has to grow
 * takes `least` bytes at once where that holds `bytes`, else half again `bytes`: a page-locked
 * buffer costs its tower thread ~40 ms per 190 MB (cu/host_pinned.cu) and a free, a reallocation
 * (bench/NOTES.md, the pipeline). Returns 0, or
 * -1 when out of memory (the buffer is then empty). */
int pl_stage_reserve(mv_backend *be, void **buf, size_t *cap, int *pinned, size_t bytes, size_t least);
/* Frees a staging buffer (NULL: nothing). */
void pl_stage_free(mv_backend *be, void *buf, int pinned);

/* An empty pool of be's slabs, each taking at least `least` bytes when allocated (a full
 * forward's output, so that slabs do not grow: pl_stage_reserve); pl_slabs_destroy once no
 * thread uses it. */
void pl_slabs_init(pl_slab_pool *p, mv_backend *be, size_t least);
void pl_slabs_destroy(pl_slab_pool *p);
/* A free slab of at least `bytes` (waits for the writers to release one), or NULL when out of
 * memory. The caller owns it (one reference) until it hands references to the inputs.
 * *waited: the seconds spent waiting for a free slab (the timeline's "output-slab wait"). */
pl_slab *pl_slab_get(pl_slab_pool *p, size_t bytes, double *waited);
/* n more references to sb (one per input pointing into it). */
void pl_slab_hold(pl_slab *sb, int n);
/* Drops one reference to the slab `owner` (an mv_item's out_release). */
void pl_slab_release(void *owner);
/* Waits until no slab is referenced (every input written or freed), then frees their buffers:
 * the pool is empty again. */
void pl_slabs_drain(pl_slab_pool *p);

#endif
