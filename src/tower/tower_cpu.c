/* tower_cpu.c - the CPU backend (mv_backend_cpu_create): the Qwen3.5 vision tower in f32, as
 * HF's Qwen3_5VisionModel.forward computes it (docs/hf-reference.md §3):
 *   patch_embed (GEMM + bias) -> + interpolated position table -> depth x pre-LN blocks
 *   (attention with 2D rope per segment, tanh-GELU MLP) -> merger (LN, 2x2 concat, fc1, erf-GELU, fc2).
 * The Linear layers run through gemm_cpu.c on weights packed at creation (oneDNN; OpenBLAS in a
 * NO_DNNL build; with --cpu-gemm bf16x6 the AMX kernel, which splits each f32 operand exactly
 * into three bf16 parts: f32's accuracy); each block's row-local chain runs fused on each
 * thread's own rows (ops_cpu.c's row operations), attention (attention_cpu.c) between. No bf16
 * rounding anywhere: it is compared against HF run in f32/f64, and is no model of the GPU path.
 *
 * Threads: one OpenMP pool; the GEMM libraries run single-threaded, each call on one thread's
 * block of rows. Results do not depend on the thread count: no reduction is split across threads
 * (GEMM rows cut at multiples of mv_gemm_row_atom, attention items fixed by segment length). One
 * forward at a time per backend: its activations are kept between forwards.
 */
#include "mv_backend.h"
#include "mv_gemm_cpu.h"
#include "mv_ops_cpu.h"
#include "mv_plan.h"
#include "tower_cpu_int.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failure inside a parallel region: the first one is kept. */
typedef struct {
    mv_status st;
    mv_err e;
} par_err;

static void par_fail(par_err *pe, mv_status st, const mv_err *e)
{
#pragma omp critical(mv_tower_cpu_err)
    if (!pe->st) {
        pe->st = st;
        pe->e = *e;
    }
}

#ifndef LIN_CHUNK /* -D only for measurements */
#define LIN_CHUNK 128
#endif

/* Rows per GEMM call (and per step of the block chain) on rows [r0, r1): LIN_CHUNK where a row's
 * bytes do not depend on its call (bf16x6, OpenBLAS: mv_gemm_w_rows_free), so that each chunk's
 * outputs are still in L2 for the next step (the AMX kernel streams the weights once per 128 rows
 * anyway: its M block; a thread's whole range at once leaves the GELU epilogue reading tens of MB
 * of fc1 outputs back from memory); else all of them at once
 * (oneDNN f32: its row bytes may depend on a call's row count). At least 1. */
_Static_assert(LIN_CHUNK % MV_GEMM_ROW_ATOM_FREE == 0 && LIN_CHUNK % MV_BLAS_ROW_ATOM == 0,
               "LIN_CHUNK: a multiple of every GEMM row atom");
static int64_t row_chunk(const mv_gemm_w *w, int64_t r0, int64_t r1)
{
    return mv_gemm_w_rows_free(w) ? LIN_CHUNK : r1 > r0 ? r1 - r0 : 1;
}

/* Rows [r0, r1) of x . W^T (weights w packed), one single-threaded GEMM on the calling thread
 * (slot omp_get_thread_num() of ws), then the epilogue on those rows while they are in cache.
 * o: row r0's output, row stride ldo; xi: row r0's input, row stride ldx; res (EPI_RES) is
 * indexed by the global row, stride od. Keep outputs dense (ldo = od): oneDNN's brgemm matmul
 * takes strided sources but not strided destinations (it falls back to a slow reference). */
static mv_status linear_block(mv_gemm_ws *ws, const mv_gemm_w *w, float *o, int64_t ldo,
                              const float *xi, int64_t ldx, const float *b, int64_t r0, int64_t r1,
                              int od, cpu_epilogue ep, float *res, mv_err *e)
{
    /* calls of row_chunk rows, each one's epilogue right after it (linear_rows: the patch
     * embedding and the merger; the block chain's chunks are no larger already) */
    int64_t ch = row_chunk(w, r0, r1);
    for (int64_t c0 = r0; c0 < r1; c0 += ch) {
        int64_t c1 = r1 - c0 < ch ? r1 : c0 + ch;
        float *oc = o + (c0 - r0) * ldo;
        mv_status st = mv_gemm_rows(ws, omp_get_thread_num(), w, oc, ldo, xi + (c0 - r0) * ldx, ldx,
                                    c1 - c0, e);
        if (st)
            return st;
        for (int64_t i = 0; i < c1 - c0; i++)
            mv_cpu_epilogue_row(oc + i * ldo, b, od, ep, res ? res + (c0 + i) * od : NULL);
    }
    return MV_OK;
}

/* The same on dense matrices out[n, od], x[n, in]. */
static mv_status linear_range(mv_gemm_ws *ws, const mv_gemm_w *w, float *out, const float *x,
                              const float *b, int64_t r0, int64_t r1, int in, int od, cpu_epilogue ep,
                              float *res, mv_err *e)
{
    return linear_block(ws, w, out + r0 * od, od, x + r0 * in, in, b, r0, r1, od, ep, res, e);
}

/* out[n, od] = x[n, in] . W^T + b (w packed); rows split by row_parts/row_range at the GEMM
 * library's row atom. */
static mv_status linear_rows(mv_gemm_ws *ws, const mv_gemm_w *w, float *out, const float *x,
                             const float *b, int64_t n, int in, int od, int atom, mv_err *e)
{
    if (n <= 0)
        return MV_OK;
    par_err pe = {0};
    int P = row_parts(n, omp_get_max_threads(), atom);
#pragma omp parallel num_threads(P)
    {
        int64_t r0, r1;
        mv_err te;
        row_range(n, omp_get_thread_num(), omp_get_num_threads(), atom, &r0, &r1);
        mv_status st = linear_range(ws, w, out, x, b, r0, r1, in, od, EPI_BIAS, NULL, &te);
        if (st)
            par_fail(&pe, st, &te);
    }
    if (pe.st)
        *e = pe.e;
    return pe.st;
}


/* ---- the backend ------------------------------------------------------------------------ */

static mv_status dump(mv_stage_fn fn, void *ud, const char *stage, const float *x, int64_t rows,
                      int64_t cols, mv_err *e)
{
    return fn ? fn(ud, stage, x, rows, cols, e) : MV_OK;
}

/* A forward's activations are kept between forwards up to this many bytes: allocating and
 * first-touching them again (page faults: ~230 MB at 4096 patches) cost each forward time. */
#define KEEP_BYTES ((size_t)1 << 30)

/* The backend's state: the thread count, every Linear layer's packed weights, and the
 * activation buffer and GEMM workspace kept between forwards (the workspace holds bf16x6's
 * split rows, tens of MB per thread: made anew per forward, its first touch would be paid in page
 * faults each time). */
typedef struct {
    int threads;
    mv_gemm_cpu *g;
    mv_gemm_w *patch, *mfc1, *mfc2;
    mv_gemm_w **blk;    /* depth x {qkv, proj, fc1, fc2, fc1's second half} */
    int fc1_f1;         /* fc1's outputs in W_FC1, the rest in W_FC1B (fc1_split; set by pack_all) */
    pthread_mutex_t mu; /* one forward at a time uses buf */
    float *buf;         /* cap floats, 64-byte aligned; NULL after a forward larger than KEEP_BYTES */
    size_t cap;
    mv_gemm_ws *ws;     /* ws_slots thread slots; NULL after a forward larger than KEEP_BYTES */
    int ws_slots;
    char settings[256]; /* mv_backend_settings */
} cpu_impl;

/* W_FC1B: where a row's bytes do not depend on the call (bf16x6), fc1 is packed as two halves of
 * its outputs, W_FC1 [0, fc1_split) and W_FC1B [fc1_split, F), each GEMM'd and GELU'd in turn: a
 * 128-row chunk's half (1.1 MB) is still in L2 for its epilogue, the whole (2.2 MB) was not. */
enum { W_QKV, W_PROJ, W_FC1, W_FC2, W_FC1B, W_PER_BLOCK };

/* fc1's outputs [0, F1) in W_FC1, [F1, F) in W_FC1B: F1 about F / 2 at a multiple of 16 (the AMX
 * kernel's tile: a column's bytes are the same in either call) where rows are free (w: a packed
 * weight of the same mode), else F (one weight). */
static int fc1_split(const mv_gemm_w *w, int F)
{
    int F1 = F / 2 / 16 * 16;
    return mv_gemm_w_rows_free(w) && F1 >= 16 ? F1 : F;
}

/* One forward's state, shared by its steps: the model and backend, the stage dumps, the
 * segments' cu_seqlens, the thread count and GEMM row atom (every GEMM's thread cuts), the
 * activations carved from ci->buf and the GEMM work space. */
typedef struct {
    const mv_model *m;
    cpu_impl *ci;
    mv_stage_fn fn;
    void *ud;
    int64_t N;   /* patches */
    int T, atom, P; /* threads, row atom, the block chain's parts (row_parts) */
    int amx;     /* attention on the AMX kernel: 0 (the f32 sgemm in both modes; AMX: the variants build) */
    int32_t *cu; /* cu_seqlens [nseg + 1] */
    int nseg;
    float *x, *xn, *qkv, *hm, *big, *cos_t, *sin_t, *scratch;
    void *pack;
    mv_gemm_ws *ws;
} fwd;

/* Checks the grid and plans the forward: its segments' cu_seqlens (src/tower/plan.c, as the CUDA
 * backend plans them) into f->cu (the caller frees it), the threads of this backend. */
static mv_status fwd_plan(fwd *f, const int32_t *grid, int n_entries, mv_err *e)
{
    const mv_vision_config *c = &f->m->cfg;
    mv_status st = mv_grid_check(c, grid, n_entries, &f->N, e);
    if (st)
        return st;
    mv_plan plan;
    if ((st = mv_plan_segments(&plan, c, grid, n_entries, 0, e)))
        return st;
    omp_set_num_threads(f->ci->threads); /* this thread's parallel regions (the tower thread) */
    f->T = omp_get_max_threads();
    f->atom = mv_gemm_row_atom(f->ci->g); /* thread cuts of every GEMM (mv_gemm_cpu.h) */
    f->P = row_parts(f->N, f->T, f->atom);
    f->amx = 0;
    f->nseg = plan.nseg;
    if (!(f->cu = malloc((f->nseg + 1) * sizeof(int32_t))))
        st = mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %d segments", f->nseg);
    else
        st = mv_plan_cu_seqlens(&plan, 0, f->nseg, f->cu, e);
    mv_plan_free(&plan);
    return st;
}

/* The activations, carved from ci->buf (grown when too small; each part a multiple of 16 floats:
 * 64-byte aligned): x, xn [N, H]; qkv, hm [N, 3H] (hm head-major, split_heads); big [N, max(F,
 * H mm)] (fc1 outputs, merger); cos_t, sin_t [N, D]; attention's scratch [T, its floats per
 * thread] and (bf16x6) its packed K and V^T; and the GEMM work space of T slots. The caller holds
 * ci->mu. */
static mv_status fwd_buffers(fwd *f, mv_err *e)
{
    const mv_vision_config *c = &f->m->cfg;
    cpu_impl *ci = f->ci;
    const int64_t N = f->N;
    const int H = c->hidden, F = c->inter, D = c->head_dim, mm = c->merge * c->merge;
    size_t sz[9] = {N * H, N * H, N * 3 * H, N * 3 * H, N * (F > H * mm ? F : H * mm), N * D, N * D,
                    (size_t)f->T * mv_cpu_attention_scratch_floats(D, f->amx),
                    (mv_cpu_attention_pack_bytes(f->cu, f->nseg, c->heads, D, f->amx) + sizeof(float) - 1) /
                        sizeof(float)};
    size_t off[9], tot = 0;
    for (int k = 0; k < 9; k++) {
        off[k] = tot;
        tot += (sz[k] + 15) / 16 * 16;
    }
    if (tot > ci->cap) {
        free(ci->buf);
        ci->cap = 0;
        if ((ci->buf = aligned_alloc(64, tot * sizeof(float))))
            ci->cap = tot;
    }
    if (!ci->buf)
        return mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %lld patches", (long long)N);
    f->x = ci->buf + off[0], f->xn = ci->buf + off[1], f->qkv = ci->buf + off[2], f->hm = ci->buf + off[3];
    f->big = ci->buf + off[4], f->cos_t = ci->buf + off[5], f->sin_t = ci->buf + off[6];
    f->scratch = ci->buf + off[7];
    f->pack = ci->buf + off[8];
    if (ci->ws && ci->ws_slots < f->T) {
        mv_gemm_ws_destroy(ci->ws);
        ci->ws = NULL;
    }
    if (!ci->ws) {
        mv_status st = mv_gemm_ws_create(ci->g, f->T, &ci->ws, e);
        if (st)
            return st;
        ci->ws_slots = f->T;
    }
    f->ws = ci->ws;
    return MV_OK;
}

/* A rare large forward's buffers are not kept (KEEP_BYTES). */
static void fwd_release(cpu_impl *ci)
{
    if (ci->cap * sizeof(float) > KEEP_BYTES) {
        free(ci->buf);
        ci->buf = NULL;
        ci->cap = 0;
        mv_gemm_ws_destroy(ci->ws);
        ci->ws = NULL;
    }
}

/* pixel_values -> patch embedding -> + the interpolated position table, into x; the rope tables. */
static mv_status fwd_embed(fwd *f, const float *pixels, const int32_t *grid, int n_entries, mv_err *e)
{
    const mv_model *m = f->m;
    const mv_vision_config *c = &m->cfg;
    const int64_t N = f->N;
    const int H = c->hidden;
    mv_status st;
    if ((st = dump(f->fn, f->ud, "pixel_values", pixels, N, c->patch_dim, e)) ||
        (st = linear_rows(f->ws, f->ci->patch, f->x, pixels, m->patch_b, N, c->patch_dim, H, f->atom, e)) ||
        (st = dump(f->fn, f->ud, "patch_embed", f->x, N, H, e)))
        return st;
    int64_t base = 0;
    for (int i = 0; i < n_entries; i++) {
        int t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        mv_pos_embed_add_cpu(f->x + base * H, m->pos_embed, c->pos_side, H, t, h, w, c->merge);
        base += (int64_t)t * h * w;
    }
    if ((st = dump(f->fn, f->ud, "embed", f->x, N, H, e)))
        return st;
    mv_rope_tables_cpu(f->cos_t, f->sin_t, grid, n_entries, c->head_dim, c->rope_theta, c->merge);
    return MV_OK;
}

/* Rows [c0, c1) of the rest of block B (weights W), xn holding its attention output: proj +
 * residual, LN2, fc1 + GELU, fc2 + residual. bt: the calling thread's scratch rows of big, used
 * densely for each chunk (proj's [c1 - c0, H], then fc1's [c1 - c0, F]). */
static mv_status block_tail(const fwd *f, const mv_block *B, mv_gemm_w *const *W, float *bt, int64_t c0,
                            int64_t c1, mv_err *e)
{
    const mv_vision_config *c = &f->m->cfg;
    const int H = c->hidden, F = c->inter;
    const int F1 = f->ci->fc1_f1; /* fc1's split, the same in every block */
    float *x = f->x, *xn = f->xn;
    mv_status st = linear_block(f->ws, W[W_PROJ], bt, H, xn + c0 * H, H, B->proj_b, c0, c1, H, EPI_RES, x, e);
    if (st)
        return st;
    for (int64_t i = c0; i < c1; i++)
        mv_cpu_layernorm_row(xn + i * H, x + i * H, B->norm2_w, B->norm2_b, H, c->ln_eps);
    cpu_epilogue ep1 = c->act == MV_ACT_GELU_TANH ? EPI_GELU : EPI_BIAS;
    if ((st = linear_block(f->ws, W[W_FC1], bt, F, xn + c0 * H, H, B->fc1_b, c0, c1, F1, ep1, NULL, e)))
        return st;
    if (F1 < F && (st = linear_block(f->ws, W[W_FC1B], bt + F1, F, xn + c0 * H, H, B->fc1_b ? B->fc1_b + F1 : NULL,
                                     c0, c1, F - F1, ep1, NULL, e)))
        return st;
    if (c->act != MV_ACT_GELU_TANH)
        for (int64_t i = 0; i < c1 - c0; i++)
            mv_cpu_act_row(c->act, bt + i * F, F);
    return linear_block(f->ws, W[W_FC2], xn + c0 * H, H, bt, F, B->fc2_b, c0, c1, H, EPI_RES, x, e);
}

/* Rows [c0, c1) of the start of block B (weights W): LN1, qkv, rope and the head split into hm. */
static mv_status block_head(const fwd *f, const mv_block *B, mv_gemm_w *const *W, int64_t c0, int64_t c1,
                            mv_err *e)
{
    const mv_vision_config *c = &f->m->cfg;
    const int H = c->hidden;
    for (int64_t i = c0; i < c1; i++)
        mv_cpu_layernorm_row(f->xn + i * H, f->x + i * H, B->norm1_w, B->norm1_b, H, c->ln_eps);
    mv_status st = linear_range(f->ws, W[W_QKV], f->qkv, f->xn, B->qkv_b, c0, c1, H, 3 * H, EPI_BIAS, NULL, e);
    if (!st)
        mv_cpu_split_heads_range(f->hm, f->qkv, f->cos_t, f->sin_t, f->N, c0, c1, c->heads, c->head_dim);
    return st;
}

/* Step b (0..depth) of the blocks: x = x + proj(attn(rope(qkv(LN1(x))))); x = x + fc2(act(fc1(
 * LN2(x)))). Everything but attention is row-local, so each thread runs the chain on its own
 * rows with no barrier, in chunks of row_chunk rows that stay in L2 from one step to the next:
 * the rest of block b - 1 (block_tail), then the start of block b (block_head); then block
 * b - 1's dump and block b's attention, which needs every row of a segment. */
static mv_status fwd_block_step(fwd *f, int b, mv_err *e)
{
    const mv_model *m = f->m;
    const mv_vision_config *c = &m->cfg;
    cpu_impl *ci = f->ci;
    const int64_t N = f->N, LB = c->inter > c->hidden ? c->inter : c->hidden; /* big's row stride */
    const mv_block *B = b > 0 ? &m->blocks[b - 1] : NULL, *Bn = b < c->depth ? &m->blocks[b] : NULL;
    mv_gemm_w *const *WB = B ? ci->blk + (size_t)(b - 1) * W_PER_BLOCK : NULL;
    mv_gemm_w *const *WBn = Bn ? ci->blk + (size_t)b * W_PER_BLOCK : NULL;
    par_err pe = {0};
#pragma omp parallel num_threads(f->P)
    {
        int64_t r0, r1;
        mv_err te;
        mv_status ts = MV_OK;
        row_range(N, omp_get_thread_num(), omp_get_num_threads(), f->atom, &r0, &r1);
        const int64_t ch = row_chunk(B ? WB[W_PROJ] : Bn ? WBn[W_QKV] : NULL, r0, r1);
        /* big is scratch for proj's and fc1's outputs: this thread owns its rows [r0, r1) at row
         * stride LB, so no thread's rows overlap another's */
        float *bt = f->big + r0 * LB;
        for (int64_t c0 = r0; c0 < r1 && !ts; c0 += ch) {
            const int64_t c1 = r1 - c0 < ch ? r1 : c0 + ch;
            if (B)
                ts = block_tail(f, B, WB, bt, c0, c1, &te);
            if (Bn && !ts)
                ts = block_head(f, Bn, WBn, c0, c1, &te);
        }
        if (ts)
            par_fail(&pe, ts, &te);
    }
    if (pe.st) {
        *e = pe.e;
        return pe.st;
    }
    if (B) {
        char name[32];
        snprintf(name, sizeof name, "block_%02d", b - 1);
        mv_status st = dump(f->fn, f->ud, name, f->x, N, c->hidden, e);
        if (st)
            return st;
    }
    if (Bn && mv_cpu_attention(f->xn, f->hm, N, f->cu, f->nseg, c->heads, c->head_dim, f->amx, f->scratch, f->pack))
        return mv_fail(e, MV_ERR_INTERNAL, "cpu tower: %s failed in attention of block %d", mv_gemm_cpu_name(ci->g), b);
    return MV_OK;
}

/* The merger: LN per patch row, then 4 consecutive rows (one 2x2 block) form one 4H row; fc1,
 * erf-GELU, fc2 into out [N / mm, out_hidden]. */
static mv_status fwd_merger(fwd *f, float *out, mv_err *e)
{
    const mv_model *m = f->m;
    const mv_vision_config *c = &m->cfg;
    const int H = c->hidden, mm = c->merge * c->merge;
    const int64_t N = f->N, M = N / mm;
    mv_status st;
    mv_layernorm_cpu(f->xn, f->x, m->mnorm_w, m->mnorm_b, N, H, c->ln_eps);
    if ((st = dump(f->fn, f->ud, "merger_norm", f->xn, N, H, e)) ||
        (st = linear_rows(f->ws, f->ci->mfc1, f->big, f->xn, m->mfc1_b, M, H * mm, H * mm, f->atom, e)) ||
        (st = dump(f->fn, f->ud, "merger_fc1", f->big, M, H * mm, e)))
        return st;
    mv_gelu_erf_cpu(f->big, M * H * mm);
    if ((st = linear_rows(f->ws, f->ci->mfc2, out, f->big, m->mfc2_b, M, H * mm, c->out_hidden, f->atom, e)))
        return st;
    return dump(f->fn, f->ud, "output", out, M, c->out_hidden, e);
}

/* The tower on f32 pixel_values [N, patch_dim]: out [N / merge^2, out_hidden], one forward at a
 * time (ci->mu). */
static mv_status tower_f32(mv_backend *be, const float *pixels, const int32_t *grid, int n_entries,
                           float *out, mv_stage_fn fn, void *ud, mv_err *e)
{
    fwd f = {.m = be->model, .ci = be->impl, .fn = fn, .ud = ud};
    mv_status st = fwd_plan(&f, grid, n_entries, e);
    if (st) {
        free(f.cu);
        return st;
    }
    pthread_mutex_lock(&f.ci->mu);
    st = fwd_buffers(&f, e);
    if (!st && !mv_omp_room(f.ci->threads)) /* its team's stacks, once its buffers are there (mv_omp_room) */
        st = mv_fail(e, MV_ERR_NOROOM, "cpu tower: out of memory: no address space for its %d threads' "
                     "stacks (an address-space limit, ulimit -v?)", f.ci->threads);
    if (!st)
        st = fwd_embed(&f, pixels, grid, n_entries, e);
    for (int b = 0; !st && b <= f.m->cfg.depth; b++)
        st = fwd_block_step(&f, b, e);
    if (!st)
        st = fwd_merger(&f, out, e);
    fwd_release(f.ci);
    pthread_mutex_unlock(&f.ci->mu);
    free(f.cu);
    return st;
}

/* mv_backend.forward: pixel_values as they are, frames patchified first (cpu_frames.c). No
 * per-entry mean here: the caller pools the tokens (pools_mean 0). */
static mv_status cpu_forward(mv_backend *be, const mv_forward_req *req, mv_forward_info *info, mv_err *e)
{
    if (info)
        *info = (mv_forward_info){0};
    if (req->mean)
        return mv_fail(e, MV_ERR_USAGE, "cpu tower: no per-entry mean (pool the tokens with mv_pool_mean)");
    if (!req->pixels == !req->frames)
        return mv_fail(e, MV_ERR_USAGE, "cpu tower: a forward takes pixel values or frames");
    int threads = ((const cpu_impl *)be->impl)->threads;
    float *pix = NULL;
    uint8_t *rs = NULL; /* the test hook test_resizes: decoded frames (src_size) resized first */
    mv_status st = req->src_size ? mv_cpu_hook_resize(req, &be->model->cfg, &rs, e) : MV_OK;
    if (!st && !req->pixels)
        st = mv_cpu_patchify_frames(be->model, threads, req, rs ? rs : req->frames, &pix, e);
    free(rs);
    if (!st)
        st = tower_f32(be, pix ? pix : req->pixels, req->grid, req->n_entries, req->out, req->dump,
                       req->dump_ud, e);
    free(pix);
    if (!st)
        mv_omp_started(threads);
    if (!st && be->out_bf16) /* the test hook test_out_bf16 */
        mv_cpu_hook_round_out(req, &be->model->cfg);
    return st;
}

static void cpu_impl_free(cpu_impl *ci, int depth)
{
    if (!ci)
        return;
    mv_gemm_w_free(ci->patch);
    mv_gemm_w_free(ci->mfc1);
    mv_gemm_w_free(ci->mfc2);
    for (int k = 0; ci->blk && k < depth * W_PER_BLOCK; k++)
        mv_gemm_w_free(ci->blk[k]);
    free(ci->blk);
    mv_gemm_cpu_destroy(ci->g);
    free(ci->buf);
    mv_gemm_ws_destroy(ci->ws);
    pthread_mutex_destroy(&ci->mu);
    free(ci);
}

static void cpu_destroy(mv_backend *b)
{
    cpu_impl_free(b->impl, b->model->cfg.depth);
    free(b);
}

/* Packs every Linear layer's weights once (shared read-only by the tower's threads). */
static mv_status pack_all(const mv_model *m, cpu_impl *ci, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    int H = c->hidden, F = c->inter, mm = c->merge * c->merge;
    mv_status st;
    omp_set_num_threads(ci->threads); /* oneDNN's packing runs OpenMP here: --threads, not OMP_NUM_THREADS */
    if ((st = mv_gemm_pack(ci->g, m->patch_w, c->patch_dim, H, "patch_embed", &ci->patch, e)) ||
        (st = mv_gemm_pack(ci->g, m->mfc1_w, H * mm, H * mm, "merger fc1", &ci->mfc1, e)) ||
        (st = mv_gemm_pack(ci->g, m->mfc2_w, H * mm, c->out_hidden, "merger fc2", &ci->mfc2, e)))
        return st;
    if (!(ci->blk = calloc((size_t)c->depth * W_PER_BLOCK, sizeof *ci->blk)))
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    ci->fc1_f1 = F; /* no block: no split */
    for (int b = 0; b < c->depth; b++) {
        const mv_block *B = &m->blocks[b];
        mv_gemm_w **w = ci->blk + (size_t)b * W_PER_BLOCK;
        char name[64];
        snprintf(name, sizeof name, "block %d", b);
        if ((st = mv_gemm_pack(ci->g, B->qkv_w, H, 3 * H, name, &w[W_QKV], e)) ||
            (st = mv_gemm_pack(ci->g, B->proj_w, H, H, name, &w[W_PROJ], e)) ||
            (st = mv_gemm_pack(ci->g, B->fc2_w, F, H, name, &w[W_FC2], e)))
            return st;
        const int F1 = fc1_split(w[W_QKV], F); /* every block's weights in one mode: one value */
        ci->fc1_f1 = F1;
        if ((st = mv_gemm_pack(ci->g, B->fc1_w, H, F1, name, &w[W_FC1], e)))
            return st;
        if (F1 < F && (st = mv_gemm_pack(ci->g, B->fc1_w + (size_t)F1 * H, H, F - F1, name, &w[W_FC1B], e)))
            return st;
    }
    return MV_OK;
}

mv_status mv_backend_cpu_create(const mv_model *m, const mv_backend_opts *o, mv_backend **out,
                                mv_err *e)
{
    mv_backend *b = calloc(1, sizeof *b);
    cpu_impl *ci = calloc(1, sizeof *ci);
    if (!b || !ci) {
        free(b);
        free(ci);
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    }
    /* -j N, else every CPU of the affinity mask; the GEMM libraries stay single-threaded */
    ci->threads = o && o->threads > 0 ? o->threads : mv_cpu_count();
    pthread_mutex_init(&ci->mu, NULL);
    mv_blas_single_threaded();
    double t0 = mv_now();
    mv_status st = mv_gemm_cpu_create(o && o->verbose, o ? o->cpu_gemm : MV_CPU_GEMM_F32, &ci->g, e);
    if (!st)
        st = pack_all(m, ci, e);
    if (st) {
        cpu_impl_free(ci, m->cfg.depth);
        free(b);
        return st;
    }
    /* what --cpu-gemm became and the library with the kernels it picked (after pack_all: its name
     * names them), spaces as '_' */
    char lib[160];
    snprintf(lib, sizeof lib, "%s", mv_gemm_cpu_name(ci->g));
    for (char *p = lib; *p; p++)
        if (*p == ' ')
            *p = '_';
    snprintf(ci->settings, sizeof ci->settings, "backend=cpu gemm=%s gemm_lib=%s",
             mv_gemm_cpu_mode(ci->g) == MV_CPU_GEMM_BF16X6 ? "bf16x6" : "f32", lib);
    if (o && o->verbose)
        fprintf(stderr, "mvembed: CPU tower: %d threads, GEMMs through %s (%s %.2fs)\n",
                ci->threads, mv_gemm_cpu_name(ci->g),
                MV_HAVE_DNNL ? "weights packed in" : "set up in", mv_now() - t0);
    b->impl = ci;
    b->name = "cpu";
    b->forward = cpu_forward;
    b->destroy = cpu_destroy;
    b->model = m;
    b->batch_tokens = o && o->batch_tokens > 0 ? o->batch_tokens : 0; /* 0: one input per forward */
    b->out_bf16 = o && o->test_out_bf16;
    b->resizes = o && o->test_resizes;
    *out = b;
    return MV_OK;
}

const char *mv_backend_settings(const mv_backend *b)
{
    if (b->name && !strcmp(b->name, "cuda"))
        return mv_backend_cuda_settings(b);
    return ((const cpu_impl *)b->impl)->settings;
}
