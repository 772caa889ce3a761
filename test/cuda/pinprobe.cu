/* pinprobe.cu - what a page-locked host buffer costs on this machine (a benchmark tool, not a
 * test; bench/RESULTS.md, "cc6ea21"): for each way of getting one, the time of the allocation,
 * how long another thread's CUDA call waited meanwhile (a second thread records an event in a
 * loop; its longest call is the time the driver's lock was held), and the time of the free:
 *   cudaHostAlloc        / cudaFreeHost
 *   host_pinned          mv_cuda_host_pinned_alloc / _free (cu/host_pinned.cu, production)
 *   malloc+register      malloc, every page written, cudaHostRegister / unregister, free
 * Usage: pinprobe [MB (190)] [REPS (3)]. Prints one line per way and repetition, then the kernel's
 * transparent huge page setting. Not here: correctness (test_cuda_ops checks host_pinned). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mv_cuda.cuh"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile int g_stop;
static double g_worst; /* the other thread's longest cudaEventRecord since the last reset */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void *poke(void *arg)
{
    (void)arg;
    cudaStream_t s;
    cudaEvent_t ev;
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return NULL;
    while (!g_stop) {
        double t = now();
        cudaEventRecord(ev, s);
        double d = now() - t;
        pthread_mutex_lock(&g_mu);
        if (d > g_worst) g_worst = d;
        pthread_mutex_unlock(&g_mu);
    }
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
    return NULL;
}

/* The other thread's longest wait over what just ran: a call blocked until the lock was given
 * back returns just after it, so wait a little for it before reading, then reset. */
static double stall(void)
{
    usleep(3000);
    pthread_mutex_lock(&g_mu);
    double w = g_worst;
    g_worst = 0;
    pthread_mutex_unlock(&g_mu);
    return w;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 190, n = mb << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
        printf("pinprobe: no CUDA device\n");
        return 2;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, poke, NULL)) return 1;
    usleep(20000);
    const char *way[] = {"cudaHostAlloc", "host_pinned", "malloc+register"};
    for (int v = 0; v < 3; v++)
        for (int r = 0; r < reps; r++) {
            void *p = NULL;
            stall();
            double t0 = now();
            int ok = 1;
            if (v == 0) {
                ok = cudaHostAlloc(&p, n, cudaHostAllocPortable) == cudaSuccess;
            } else if (v == 1) {
                ok = (p = mv_cuda_host_pinned_alloc(0, n)) != NULL;
            } else {
                volatile unsigned char *q = (volatile unsigned char *)malloc(n);
                ok = q != NULL;
                for (size_t o = 0; ok && o < n; o += 4096) q[o] = 1;
                p = (void *)q;
                ok = ok && cudaHostRegister(p, n, cudaHostRegisterPortable) == cudaSuccess;
            }
            double ta = now() - t0, sa = stall();
            t0 = now();
            if (v == 0) cudaFreeHost(p);
            else if (v == 1) mv_cuda_host_pinned_free(p);
            else if (p) {
                cudaHostUnregister(p);
                free(p);
            }
            double tf = now() - t0, sf = stall();
            printf("%-16s %zu MB: %s alloc %.1f ms (the other thread waited up to %.1f ms), free %.1f ms (waited %.1f ms)\n",
                   way[v], mb, ok ? "ok" : "FAILED", ta * 1e3, sa * 1e3, tf * 1e3, sf * 1e3);
        }
    g_stop = 1;
    pthread_join(th, NULL);
    char buf[200] = "?\n";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    printf("transparent huge pages: %s", buf);
    return 0;
}
