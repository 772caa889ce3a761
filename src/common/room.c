/* room.c - room in the address space (mv_common.h): whether a mapping can be made now, and
 * whether an OpenMP team can start on the calling thread. Under an address-space limit
 * (ulimit -v) these stand before the steps that do not check their own allocations (oneDNN's
 * kernels and primitives, libgomp's team threads) and tell the run's shortage from an input's
 * (mv_short_of_room); without such a limit (mv_room_set_limited) they do not probe. Not here:
 * what a caller does without room (gemm_cpu.c, tower_cpu.c, the pipeline), reading the limit
 * (src/cli/main.c). */
#define _GNU_SOURCE /* pthread_getattr_default_np */
#include "mv_common.h"

#include <omp.h>
#include <pthread.h>
#include <sys/mman.h>

static __thread int g_omp_started = 1; /* the calling thread's largest team (itself alone) */
static int g_limited = 1;                /* a finite RLIMIT_AS, or not told (mv_room_set_limited) */

void mv_room_set_limited(int limited) { g_limited = limited != 0; }

void mv_omp_started(int threads)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (threads > g_omp_started)
        g_omp_started = threads;
}

int mv_omp_room(int threads)
{
    int started = g_omp_started;
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (threads <= started || !g_limited)
        return 1;
    pthread_attr_t a;
    size_t stack = (size_t)8 << 20;
    if (pthread_getattr_default_np(&a) == 0) {
        size_t s = 0;
        if (pthread_attr_getstacksize(&a, &s) == 0 && s > stack)
            stack = s;
        pthread_attr_destroy(&a);
    }
    return mv_address_room((size_t)(threads - started) * (stack + ((size_t)64 << 10)) + MV_ROOM_PROBE);
}

int mv_address_room(size_t bytes)
{
    if (!g_limited)
        return 1; /* no limit to run into: the probe would only cost a mapping */
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, bytes);
    return 1;
}

int mv_short_of_room(mv_status st, int team)
{
    return st == MV_ERR_NOROOM ||
           (st == MV_ERR_NOMEM && (!mv_address_room(MV_ROOM_PROBE) || (team && !mv_omp_room(0))));
}
