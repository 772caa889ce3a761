/* pool.c - --pool mean (see mv_pool.h): the f64-accumulated mean over tokens, the list of a run's
 * pooled outputs, and OUT/pooled.npy + its row index, assembled by reading those outputs back.
 * Not here: where pooling happens in the pipeline (writers.c), writing single outputs
 * (output.c / tar_out.c).
 */
#include "mv_pool.h"
#include "mv_manifest.h" /* mv_manifest_format: the index lines escape paths like the manifest */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mv_pool_mean(const float *x, int64_t rows, int64_t cols, float *out)
{
    enum { BLOCK = 256 };
    double acc[BLOCK];
    for (int64_t c0 = 0; c0 < cols; c0 += BLOCK) {
        int64_t nc = cols - c0 < BLOCK ? cols - c0 : BLOCK;
        for (int64_t c = 0; c < nc; c++)
            acc[c] = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float *row = x + r * cols + c0;
            for (int64_t c = 0; c < nc; c++)
                acc[c] += (double)row[c];
        }
        for (int64_t c = 0; c < nc; c++)
            out[c0 + c] = (float)(acc[c] / (double)rows);
    }
}

/* ---- the run's list ----------------------------------------------------------------------- */

typedef struct {
    char *input, *output;
} pool_entry;

struct mv_pool_list {
    pthread_mutex_t mu;
    pool_entry *v;
    size_t n, cap;
    int oom;
};

mv_pool_list *mv_pool_list_new(void)
{
    mv_pool_list *l = mv_calloc(1, sizeof *l);
    if (l)
        pthread_mutex_init(&l->mu, NULL);
    return l;
}

void mv_pool_list_free(mv_pool_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].input);
        free(l->v[i].output);
    }
    free(l->v);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int mv_pool_list_add(mv_pool_list *l, const char *input, const char *output)
{
    pool_entry en = {strdup(input), strdup(output)};
    pthread_mutex_lock(&l->mu);
    if (en.input && en.output && l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        pool_entry *nv = realloc(l->v, nc * sizeof *nv);
        if (nv) {
            l->v = nv;
            l->cap = nc;
        }
    }
    int ok = en.input && en.output && l->n < l->cap;
    if (ok)
        l->v[l->n++] = en;
    else
        l->oom = 1;
    pthread_mutex_unlock(&l->mu);
    if (!ok) {
        free(en.input);
        free(en.output);
    }
    return ok ? 0 : -1;
}

/* ---- pooled.npy + pooled.jsonl ------------------------------------------------------------- */

static int cmp_input(const void *a, const void *b)
{
    return strcmp(((const pool_entry *)a)->input, ((const pool_entry *)b)->input);
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The NPY v1.0 header of a [rows, cols] array of dt, padded so that its length is a multiple of
 * 64 (as numpy writes it). Returns its length. */
static size_t npy_header(char *buf, size_t cap, mv_dtype dt, int64_t rows, int64_t cols)
{
    char dict[200];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     mv_dtype_descr(dt), (long long)rows, (long long)cols);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    if (10 + hlen > cap)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    return 10 + hlen;
}

/* Temporary beside final (".tmp-<pid>-<name>", swept by mv_output_clean_temps if we die), opened
 * for writing; fd or -1 with errno. */
static int open_temp(const char *dir, const char *name, char *tmp, size_t cap)
{
    snprintf(tmp, cap, "%s/.tmp-%ld-%s", dir, (long)getpid(), name);
    unlink(tmp); /* ours from an earlier attempt in this process, if any */
    return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
}

/* fsync + close fd, rename tmp to dir/name. */
static mv_status finish_temp(int fd, const char *tmp, const char *dir, const char *name, mv_err *e)
{
    char fin[4300];
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    if (fsync(fd) != 0) {
        int err = errno;
        close(fd);
        return mv_fail(e, MV_ERR_IO, "%s: fsync: %s", fin, strerror(err));
    }
    if (close(fd) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: close: %s", fin, strerror(errno));
    if (rename(tmp, fin) != 0)
        return mv_fail(e, MV_ERR_IO, "%s: rename from %s: %s", fin, tmp, strerror(errno));
    return MV_OK;
}

mv_status mv_pool_stack(mv_pool_list *l, const char *out_dir, const char *stem, int64_t cols,
                        mv_err *e)
{
    if (l->oom)
        return mv_fail(e, MV_ERR_NOMEM, "%s/%s.npy: out of memory collecting the pooled outputs",
                       out_dir, stem);
    qsort(l->v, l->n, sizeof *l->v, cmp_input);
    char name[300], tmp[4400], path[8400];
    mv_status st = MV_OK;
    /* the row index */
    snprintf(name, sizeof name, "%s.jsonl", stem);
    int fd = open_temp(out_dir, name, tmp, sizeof tmp);
    if (fd < 0)
        return mv_fail(e, MV_ERR_IO, "%s/%s: cannot create %s: %s", out_dir, name, tmp, strerror(errno));
    for (size_t i = 0; i < l->n && !st; i++) {
        mv_record r = {.input = l->v[i].input, .output = l->v[i].output, .ok = 1};
        char *line;
        size_t len;
        if ((st = mv_manifest_format(&r, &line, &len, e)))
            break;
        char pre[40];
        int pl = snprintf(pre, sizeof pre, "{\"row\":%zu,", i);
        line[len] = '\n'; /* "{...}" + '\n', written after "{"row":i," */
        if (write_all(fd, pre, (size_t)pl) || write_all(fd, line + 1, len))
            st = mv_fail(e, MV_ERR_IO, "%s/%s: write: %s", out_dir, name, strerror(errno));
        free(line);
    }
    if (st) {
        close(fd);
        unlink(tmp);
        return st;
    }
    if ((st = finish_temp(fd, tmp, out_dir, name, e))) {
        unlink(tmp);
        return st;
    }
    /* the array: rows streamed from the outputs, in the index's order */
    snprintf(name, sizeof name, "%s.npy", stem);
    fd = open_temp(out_dir, name, tmp, sizeof tmp);
    if (fd < 0)
        return mv_fail(e, MV_ERR_IO, "%s/%s: cannot create %s: %s", out_dir, name, tmp, strerror(errno));
    mv_dtype dt = MV_DT_F32;
    for (size_t i = 0; i < l->n && !st; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, l->v[i].output);
        mv_array a;
        if ((st = mv_npy_load(path, &a, e)))
            break;
        if (i == 0)
            dt = a.dtype;
        if (a.ndim != 2 || a.shape[0] != 1 || a.shape[1] != cols || a.dtype != dt ||
            (dt != MV_DT_F32 && dt != MV_DT_F16 && dt != MV_DT_BF16)) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: not a pooled output like the others ([1, %lld] %s): "
                         "written without --pool mean or with another --out-dtype? (--force redoes it)",
                         path, (long long)cols, mv_dtype_descr(dt));
        } else {
            char hdr[256];
            size_t hl = i == 0 ? npy_header(hdr, sizeof hdr, dt, (int64_t)l->n, cols) : 0;
            if ((hl && write_all(fd, hdr, hl)) ||
                write_all(fd, a.data, (size_t)cols * mv_dtype_size(dt)))
                st = mv_fail(e, MV_ERR_IO, "%s/%s: write: %s", out_dir, name, strerror(errno));
        }
        mv_array_free(&a);
    }
    if (!st && l->n == 0) {
        char hdr[256];
        size_t hl = npy_header(hdr, sizeof hdr, MV_DT_F32, 0, cols);
        if (write_all(fd, hdr, hl))
            st = mv_fail(e, MV_ERR_IO, "%s/%s: write: %s", out_dir, name, strerror(errno));
    }
    if (st) {
        close(fd);
        unlink(tmp);
        return st;
    }
    if ((st = finish_temp(fd, tmp, out_dir, name, e)))
        unlink(tmp);
    return st;
}
