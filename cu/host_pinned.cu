/* host_pinned.cu - the CUDA backend's page-locked host buffers (mv_backend.host_alloc): the
 * pipeline's staging of a forward's frames and its output slabs, which the device reads and
 * writes with asynchronous copies. Not cudaHostAlloc: it faults in and zeroes the pages while
 * holding the driver's lock, 80-110 ms for 190 MB on the H200 host, and every other thread's
 * CUDA call (the other tower thread's launches, so the device) waits that long. Here the pages
 * are mapped (2 MB aligned, transparent huge pages asked for with madvise) and faulted in by
 * this thread first, outside the driver, and only then registered (cudaHostRegister: the lock
 * held about 4 ms for those 190 MB); freeing unregisters (3-4 ms, cudaFreeHost's 24) and unmaps.
 * Measured by test/cuda/pinprobe.cu (bench/RESULTS.md). Not here: who holds the buffers
 * (src/run/slabs.c).
 */
#include "mv_cuda.cuh"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE ((size_t)4096)

/* A buffer is a whole number of huge pages from a huge-page aligned start inside a mapping one
 * huge page longer; the mapping's start and length sit in the page (PAGE) just before the buffer
 * (inside the mapping, outside the registered range), for the free. */
typedef struct {
    void *map;
    size_t map_len;
} pinned_head;

void *mv_cuda_host_pinned_alloc(int device, size_t bytes)
{
    if (bytes == 0 || cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    size_t len = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    size_t map_len = len + HUGE_PAGE; /* room for the header page and the alignment */
    uint8_t *map = (uint8_t *)mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)map + HUGE_PAGE) & ~(uintptr_t)(HUGE_PAGE - 1));
    madvise(p, len, MADV_HUGEPAGE); /* a hint: without huge pages the faults below cost more */
    for (size_t o = 0; o < len; o += PAGE) p[o] = 0; /* fault every page in, here, not in the driver */
    pinned_head *h = (pinned_head *)(p - PAGE);
    h->map = map;
    h->map_len = map_len;
    if (cudaHostRegister(p, len, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError(); /* not sticky; the caller falls back to pageable memory */
        munmap(map, map_len);
        return NULL;
    }
    return p;
}

void mv_cuda_host_pinned_free(void *p)
{
    if (!p) return;
    const pinned_head *h = (const pinned_head *)((uint8_t *)p - PAGE);
    void *map = h->map;
    size_t map_len = h->map_len;
    if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
    munmap(map, map_len);
}
