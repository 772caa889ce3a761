/* resize.cu - torch's uint8 antialiased bicubic resize on the GPU, bit for bit as its CPU twin
 * mv_resize_bicubic_aa_u8 (src/input/preprocess.c): the same int16 weights per axis
 * (mv_resize_axis_init, computed on the host and uploaded with mv_cuda_resize_axis_pack), the same
 * int sums from the same bias, arithmetic shift and clamp to 0..255, the horizontal pass first and
 * then the vertical one through a uint8 intermediate [sh][dw][3], an axis of unchanged size
 * skipped, equal sizes copied. Integer arithmetic only (the sum of int products is the same in
 * any order), so there is nothing to round differently. Frames of one size (a video's) go
 * through one launch per pass. Not here: the weights' computation (preprocess.c), the target
 * size (smart_resize), normalise + patchify (patchify.cu).
 */
#include "mv_cuda.cuh"

#include <stdlib.h>
#include <string.h>

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t mv_cuda_resize_axis_bytes(const mv_resize_axis *a)
{
    return 2 * align16((size_t)a->n * sizeof(int)) + align16((size_t)a->n * a->ksize * sizeof(int16_t));
}

void mv_cuda_resize_axis_pack(const mv_resize_axis *a, void *h, void *dev, mv_cuda_resize_axis *d)
{
    const size_t ib = align16((size_t)a->n * sizeof(int));
    uint8_t *hp = (uint8_t *)h, *dp = (uint8_t *)dev;
    memcpy(hp, a->xmin, (size_t)a->n * sizeof(int));
    memcpy(hp + ib, a->xsize, (size_t)a->n * sizeof(int));
    memcpy(hp + 2 * ib, a->w, (size_t)a->n * a->ksize * sizeof(int16_t));
    d->xmin = (const int *)dp;
    d->xsize = (const int *)(dp + ib);
    d->w = (const int16_t *)(dp + 2 * ib);
    d->n = a->n;
    d->ksize = a->ksize;
    d->prec = a->prec;
}

static __device__ __forceinline__ uint8_t clamp_shift(int acc, unsigned p)
{
    int v = acc >> p; /* arithmetic shift of a possibly negative int, as torch and the CPU twin */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* src [nf][h][sw][3] -> dst [nf][h][dw][3] along x: one thread per output byte (grid-stride). */
static __global__ void resize_h_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t n,
                                       int sw, int dw, mv_cuda_resize_axis a)
{
    const int bias = 1 << (a.prec - 1);
    const int64_t drow = (int64_t)dw * 3;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / drow; /* frame * h + y */
        const int k = (int)(i % drow), x = k / 3, c = k % 3;
        const uint8_t *p = src + row * sw * 3 + (int64_t)a.xmin[x] * 3 + c;
        const int16_t *w = a.w + (int64_t)x * a.ksize;
        const int m = a.xsize[x];
        int acc = bias;
        for (int j = 0; j < m; j++)
            acc += p[3 * j] * w[j];
        dst[i] = clamp_shift(acc, a.prec);
    }
}

/* src [nf][sh][w][3] -> dst [nf][dh][w][3] along y: one thread per output byte (grid-stride). */
static __global__ void resize_v_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, int64_t n,
                                       int w3, int sh, int dh, mv_cuda_resize_axis a)
{
    const int bias = 1 << (a.prec - 1);
    const int64_t dframe = (int64_t)dh * w3;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t f = i / dframe, r = i % dframe;
        const int y = (int)(r / w3), k = (int)(r % w3);
        const uint8_t *p = src + f * sh * (int64_t)w3 + (int64_t)a.xmin[y] * w3 + k;
        const int16_t *wt = a.w + (int64_t)y * a.ksize;
        const int m = a.xsize[y];
        int acc = bias;
        for (int j = 0; j < m; j++)
            acc += p[(int64_t)j * w3] * wt[j];
        dst[i] = clamp_shift(acc, a.prec);
    }
}

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 65536 * 16 ? b : 65536 * 16); /* grid-stride beyond */
}

cudaError_t mv_cuda_resize_u8(uint8_t *dst, const uint8_t *src, uint8_t *tmp, int nf, int sw, int sh,
                              int dw, int dh, const mv_cuda_resize_axis *ax,
                              const mv_cuda_resize_axis *ay, cudaStream_t st)
{
    if (nf < 0 || sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0) return cudaErrorInvalidValue;
    if (nf == 0) return cudaSuccess;
    const int wx = sw != dw, wy = sh != dh;
    if ((wx && (!ax || ax->n != dw)) || (wy && (!ay || ay->n != dh)) || (wx && wy && !tmp))
        return cudaErrorInvalidValue;
    if (!wx && !wy)
        return cudaMemcpyAsync(dst, src, (size_t)nf * sh * sw * 3, cudaMemcpyDeviceToDevice, st);
    if (wx) {
        uint8_t *hout = wy ? tmp : dst;
        const int64_t n = (int64_t)nf * sh * dw * 3;
        resize_h_kernel<<<blocks_for(n), 256, 0, st>>>(hout, src, n, sw, dw, *ax);
        cudaError_t r = cudaGetLastError();
        if (r != cudaSuccess || !wy) return r;
        src = tmp;
    }
    const int64_t n = (int64_t)nf * dh * dw * 3;
    resize_v_kernel<<<blocks_for(n), 256, 0, st>>>(dst, src, n, dw * 3, sh, dh, *ay);
    return cudaGetLastError();
}

/* ---- the backend's staging of a forward's source frames (mv_forward_req.src_size) ----------- */
struct mv_cuda_resizer {
    uint8_t *src[2];           /* device: a chunk's source frames, per buffer */
    int64_t src_cap[2];
    uint8_t *axes[2], *h_axes[2]; /* device / page-locked host: the chunk's packed axes */
    size_t axes_cap[2];
    uint8_t *tmp;              /* device: the widest job's intermediate [nf][sh][dw][3] */
    int64_t tmp_cap;
    struct job {
        int64_t src, dst;
        int nf, sw, sh, dw, dh;
        mv_cuda_resize_axis ax, ay;
    } *jobs[2];
    int njobs[2], jobs_cap[2];
};

mv_cuda_resizer *mv_cuda_resizer_new(void)
{
    return (mv_cuda_resizer *)calloc(1, sizeof(mv_cuda_resizer));
}

void mv_cuda_resizer_free(mv_cuda_resizer *r)
{
    if (!r) return;
    for (int k = 0; k < 2; k++) {
        cudaFree(r->src[k]);
        cudaFree(r->axes[k]);
        cudaFreeHost(r->h_axes[k]);
        free(r->jobs[k]);
    }
    cudaFree(r->tmp);
    free(r);
}

/* A buffer that has to grow takes half as much again (the exact need where that much is not
 * free): each growth's cudaFree waits for the whole device, draining the forwards in flight, and
 * the CLI's forwards differ in size, so growing to each new maximum would do that many times. */
static int64_t headroom(int64_t need) { return need + need / 2; }

/* *p (device, *cap bytes) at least need bytes */
static cudaError_t grow_dev(uint8_t **p, int64_t *cap, int64_t need)
{
    if (need <= *cap) return cudaSuccess;
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    int64_t want = headroom(need);
    cudaError_t r = cudaMalloc((void **)p, (size_t)want);
    if (r == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* not sticky: try the exact need */
        want = need;
        r = cudaMalloc((void **)p, (size_t)want);
    }
    if (r == cudaSuccess) *cap = want;
    return r;
}

static int64_t seg_src_bytes(const mv_resize_seg *s) { return (int64_t)s->nf * s->sw * s->sh * 3; }

mv_status mv_cuda_resizer_upload(mv_cuda_resizer *r, int buf, const uint8_t *host_frames, const mv_resize_seg *segs,
                                 int nseg, cudaStream_t io, mv_err *e)
{
    r->njobs[buf] = 0;
    if (nseg <= 0) return MV_OK;
    const int64_t base = segs[0].src, dbase = segs[0].dst;
    const int64_t end = segs[nseg - 1].src + seg_src_bytes(&segs[nseg - 1]);
    if (r->jobs_cap[buf] < nseg) {
        free(r->jobs[buf]);
        r->jobs[buf] = (mv_cuda_resizer::job *)malloc(sizeof(mv_cuda_resizer::job) * (size_t)nseg);
        r->jobs_cap[buf] = r->jobs[buf] ? nseg : 0;
        if (!r->jobs[buf]) return mv_fail(e, MV_ERR_NOMEM, "cuda resize: out of host memory");
    }
    /* the axes of each run of segments of one entry (a video's temporal groups share them) */
    mv_resize_axis *ax = (mv_resize_axis *)calloc((size_t)nseg * 2, sizeof(mv_resize_axis));
    if (!ax) return mv_fail(e, MV_ERR_NOMEM, "cuda resize: out of host memory");
    mv_status st = MV_OK;
    size_t bytes = 0;
    int64_t tmp_need = 0;
    for (int s = 0; s < nseg && st == MV_OK; s++) {
        const mv_resize_seg *g = &segs[s];
        int fresh = s == 0 || g->entry != segs[s - 1].entry;
        if (fresh && g->sw != g->dw) st = mv_resize_axis_init(&ax[2 * s], g->sw, g->dw);
        if (fresh && st == MV_OK && g->sh != g->dh) st = mv_resize_axis_init(&ax[2 * s + 1], g->sh, g->dh);
        if (fresh) bytes += (ax[2 * s].n ? mv_cuda_resize_axis_bytes(&ax[2 * s]) : 0) +
                            (ax[2 * s + 1].n ? mv_cuda_resize_axis_bytes(&ax[2 * s + 1]) : 0);
        if (g->sw != g->dw && g->sh != g->dh && (int64_t)g->nf * g->sh * g->dw * 3 > tmp_need)
            tmp_need = (int64_t)g->nf * g->sh * g->dw * 3;
    }
    cudaError_t cr = cudaSuccess;
    if (st == MV_OK && bytes > r->axes_cap[buf]) {
        cudaFree(r->axes[buf]);
        cudaFreeHost(r->h_axes[buf]);
        r->axes[buf] = r->h_axes[buf] = NULL;
        r->axes_cap[buf] = 0;
        const size_t want = (size_t)headroom((int64_t)bytes); /* under a MB a chunk: no fallback */
        cr = cudaMalloc((void **)&r->axes[buf], want);
        if (cr == cudaSuccess) cr = cudaHostAlloc((void **)&r->h_axes[buf], want, cudaHostAllocDefault);
        if (cr == cudaSuccess) r->axes_cap[buf] = want;
    }
    if (st == MV_OK && cr == cudaSuccess) cr = grow_dev(&r->src[buf], &r->src_cap[buf], end - base);
    if (st == MV_OK && cr == cudaSuccess) cr = grow_dev(&r->tmp, &r->tmp_cap, tmp_need);
    size_t off = 0;
    mv_cuda_resize_axis cx = {}, cy = {};
    for (int s = 0; s < nseg && st == MV_OK && cr == cudaSuccess; s++) {
        const mv_resize_seg *g = &segs[s];
        if (s == 0 || g->entry != segs[s - 1].entry) {
            for (int k = 0; k < 2; k++) {
                mv_cuda_resize_axis *d = k ? &cy : &cx;
                *d = mv_cuda_resize_axis{};
                if (!ax[2 * s + k].n) continue;
                mv_cuda_resize_axis_pack(&ax[2 * s + k], r->h_axes[buf] + off, r->axes[buf] + off, d);
                off += mv_cuda_resize_axis_bytes(&ax[2 * s + k]);
            }
        }
        r->jobs[buf][s] = mv_cuda_resizer::job{g->src - base, g->dst - dbase, g->nf, g->sw, g->sh, g->dw, g->dh,
                                               cx, cy};
    }
    for (int s = 0; s < 2 * nseg; s++) mv_resize_axis_free(&ax[s]);
    free(ax);
    if (st != MV_OK) return mv_fail(e, st, "cuda resize: out of host memory for the weights");
    if (cr == cudaSuccess && off) cr = cudaMemcpyAsync(r->axes[buf], r->h_axes[buf], off, cudaMemcpyHostToDevice, io);
    if (cr == cudaSuccess)
        cr = cudaMemcpyAsync(r->src[buf], host_frames + base, (size_t)(end - base), cudaMemcpyHostToDevice, io);
    if (cr != cudaSuccess) return mv_cuda_check(cr, e, "cuda resize: source frames");
    r->njobs[buf] = nseg;
    return MV_OK;
}

cudaError_t mv_cuda_resizer_run(mv_cuda_resizer *r, int buf, uint8_t *dst, cudaStream_t st)
{
    for (int s = 0; s < r->njobs[buf]; s++) {
        const mv_cuda_resizer::job &j = r->jobs[buf][s];
        cudaError_t c = mv_cuda_resize_u8(dst + j.dst, r->src[buf] + j.src, r->tmp, j.nf, j.sw, j.sh, j.dw, j.dh,
                                          &j.ax, &j.ay, st);
        if (c != cudaSuccess) return c;
    }
    return cudaSuccess;
}
