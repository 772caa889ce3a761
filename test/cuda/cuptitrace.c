/* cuptitrace.c - a timeline recorder for the GPU machine, loaded with LD_PRELOAD into mvembed or
 * mvtower (scripts/device-dataset.sh step 7; scripts/timeline.py reads its output): every kernel,
 * memcpy and memset of the process, and the runtime calls that may hold the host up, as CUPTI's
 * activity records, one text line each, in the file
 * $CUPTITRACE_OUT (nothing is recorded without it):
 *   K start end stream name         a kernel (name as CUPTI gives it, mangled or not)
 *   C start end stream kind bytes   a copy (kind: CUpti_ActivityMemcpyKind, 1 = H2D, 2 = D2H, 8 = D2D)
 *   S start end stream bytes        a memset
 *   A start end thread name         a CUDA runtime call that may block the host: any taking over
 *                                   100 us, and every allocation, free, registration and
 *                                   synchronisation (name as cuptiGetCallbackName gives it)
 *   D n                             n records CUPTI dropped
 * Times are ns on the GPU's timestamp clock. CUPTI's concurrent-kernel mode keeps kernels
 * concurrent, so the timeline shows the overlap of streams that ncu's serialised durations hide.
 * Not here: any analysis (scripts/timeline.py), any production code: mvembed has no CUPTI in it.
 * Built by `make cuptitrace` where CUDA's CUPTI header is (scripts/device-bundle.sh). */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 16u << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    if (!*buf) *size = 0; /* CUPTI drops the records it cannot store (a "D" line says how many) */
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&mu);
    while (out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            fprintf(out, "K %llu %llu %u %s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    k->streamId, k->name ? k->name : "?");
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            fprintf(out, "C %llu %llu %u %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->streamId, (unsigned)m->copyKind, (unsigned long long)m->bytes);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
            const char *name = NULL;
            if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS || !name)
                name = "?";
            if (a->end - a->start > 100000 || strstr(name, "lloc") || strstr(name, "Free") ||
                strstr(name, "egister") || strstr(name, "ynchronize"))
                fprintf(out, "A %llu %llu %u %s\n", (unsigned long long)a->start, (unsigned long long)a->end,
                        (unsigned)a->threadId, name);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
            fprintf(out, "S %llu %llu %u %llu\n", (unsigned long long)m->start, (unsigned long long)m->end,
                    m->streamId, (unsigned long long)m->bytes);
        }
    }
    size_t dropped = 0;
    if (out && cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(out, "D %zu\n", dropped);
    pthread_mutex_unlock(&mu);
    free(buf);
}

__attribute__((constructor)) static void trace_start(void)
{
    const char *path = getenv("CUPTITRACE_OUT");
    if (!path) return;
    if (!(out = fopen(path, "w"))) {
        fprintf(stderr, "cuptitrace: cannot write %s\n", path);
        return;
    }
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS)
        fprintf(stderr, "cuptitrace: CUPTI refused the activity records; %s stays incomplete\n", path);
}

__attribute__((destructor)) static void trace_stop(void)
{
    if (!out) return;
    cuptiActivityFlushAll(1);
    pthread_mutex_lock(&mu);
    fclose(out);
    out = NULL;
    pthread_mutex_unlock(&mu);
}
