/* writebench - times the writer stage alone (NPY encode + zstd + temp file + fsync + rename), the
 * part of the pipeline that runs on writer threads, for outputs shaped like a real tower's.
 *   writebench DIR ROWS COLS FILES [LEVEL [f32|f16|bf16|auto [THREADS [DATA]]]]
 * auto: each file's type chosen as the pipeline's writers choose it (mv_output_dtype).
 * DATA: "gauss" (default: Gaussian f32 values, what an f32 tower's output looks like to a
 * compressor), "bf16" (the same rounded to bfloat16, as the CUDA backend's bf16 outputs are: half
 * of every value's bytes are zero, which zstd finds, at a cost), or the path of a 2-D .npy file
 * (a real output, e.g. from --dump-stages; ROWS and COLS then come from the file). A fresh array
 * per thread. Prints files/s, MB/s of f32 data, the compressed size ratio (of the f32 size), CPU
 * seconds and bytes per file, and the type file 0 was stored as. */
#include "mv_npy.h"
#include "mv_output.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *dir;
    int64_t rows, cols;
    int files, level, id, nthreads;
    mv_dtype dt;
    float *data;
    int failed;
    mv_dtype first; /* the type file 0 got (thread 0) */
    mv_output_swept *swept; /* the "run"'s, shared by the threads as the pipeline's writers share it */
} job;

static void *work(void *arg)
{
    job *j = arg;
    char rel[64];
    mv_err e;
    mv_output_writer *w; /* one per thread, as a writer thread of the pipeline has */
    if (mv_output_writer_new(j->swept, &w, &e)) {
        fprintf(stderr, "writebench: %s\n", e.msg);
        j->failed = 1;
        return NULL;
    }
    for (int f = j->id; f < j->files; f += j->nthreads) {
        snprintf(rel, sizeof rel, "w%05d", f);
        mv_dtype dt = mv_output_dtype(j->dt, j->data, (size_t)(j->rows * j->cols));
        if (f == 0)
            j->first = dt;
        if (mv_output_write(w, j->dir, rel, dt, j->rows, j->cols, j->data, j->level, NULL, 0, NULL, &e)) {
            fprintf(stderr, "writebench: %s\n", e.msg);
            j->failed = 1;
            break;
        }
    }
    mv_output_writer_free(w);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: writebench DIR ROWS COLS FILES [LEVEL [f32|f16|bf16|auto [THREADS [gauss|bf16|FILE.npy]]]]\n");
        return 2;
    }
    int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
    int files = atoi(argv[4]), level = argc > 5 ? atoi(argv[5]) : 3;
    const char *dts = argc > 6 ? argv[6] : "f32";
    mv_dtype dt = !strcmp(dts, "f16") ? MV_DT_F16 : !strcmp(dts, "bf16") ? MV_DT_BF16
                : !strcmp(dts, "auto") ? MV_DT_AUTO : MV_DT_F32;
    int nt = argc > 7 ? atoi(argv[7]) : 1;
    const char *src = argc > 8 ? argv[8] : "gauss";
    mv_array file = {0};
    if (strcmp(src, "gauss") && strcmp(src, "bf16")) {
        mv_err e;
        if (mv_npy_load_f32(src, &file, &e)) {
            fprintf(stderr, "writebench: %s\n", e.msg);
            return 2;
        }
        if (file.ndim != 2) {
            fprintf(stderr, "writebench: %s: not a 2-D array\n", src);
            return 2;
        }
        rows = file.shape[0];
        cols = file.shape[1];
    }
    if (rows < 1 || cols < 1 || files < 1 || nt < 1 || nt > 64) {
        fprintf(stderr, "writebench: bad arguments\n");
        return 2;
    }
    job jobs[64];
    pthread_t th[64];
    mv_output_swept swept;
    mv_output_swept_init(&swept);
    uint64_t s = 88172645463325252ull;
    for (int t = 0; t < nt; t++) {
        float *d = malloc((size_t)(rows * cols) * sizeof *d);
        if (!d)
            return 1;
        for (int64_t i = 0; i < rows * cols; i += 2) { /* Box-Muller from xorshift */
            double u[2];
            for (int k = 0; k < 2; k++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                u[k] = ((s >> 11) + 0.5) / 9007199254740992.0;
            }
            double r = sqrt(-2 * log(u[0]));
            d[i] = (float)(r * cos(2 * M_PI * u[1]));
            if (i + 1 < rows * cols)
                d[i + 1] = (float)(r * sin(2 * M_PI * u[1]));
        }
        if (file.data)
            memcpy(d, file.data, (size_t)(rows * cols) * sizeof *d);
        else if (!strcmp(src, "bf16"))
            for (int64_t i = 0; i < rows * cols; i++) { /* round to nearest even bf16 (finite) */
                uint32_t u;
                memcpy(&u, &d[i], 4);
                u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
                memcpy(&d[i], &u, 4);
            }
        jobs[t] = (job){argv[1], rows, cols, files, level, t, nt, dt, d, 0, MV_DT_F32, &swept};
    }
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = mv_now();
    for (int t = 0; t < nt; t++)
        pthread_create(&th[t], NULL, work, &jobs[t]);
    int failed = 0;
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        failed |= jobs[t].failed;
    }
    double dt_s = mv_now() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    double mb = (double)files * rows * cols * 4 / 1e6;
    char p[4200];
    snprintf(p, sizeof p, "%s/w00000.npy.zst", argv[1]);
    FILE *f = fopen(p, "rb");
    long zs = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        zs = ftell(f);
        fclose(f);
    }
    static const char *names[] = {[MV_DT_F32] = "f32", [MV_DT_F16] = "f16", [MV_DT_BF16] = "bf16"};
    printf("writebench: %d files of [%lld x %lld] %s (%s), zstd level %d, %d thread(s): %.3f s, %.2f files/s, "
           "%.0f MB/s of f32 data, compressed to %.1f%% of f32; %.4f CPU-s and %ld bytes per file; "
           "stored as %s\n",
           files, (long long)rows, (long long)cols, dts, src, level, nt, dt_s, files / dt_s, mb / dt_s,
           100.0 * zs / (mb * 1e6 / files), cpu / files, zs, names[jobs[0].first]);
    for (int t = 0; t < nt; t++)
        free(jobs[t].data);
    mv_output_swept_destroy(&swept);
    mv_array_free(&file);
    return failed;
}
