/* plan.c - host-side planning of one tower forward (include/mv_plan.h): the checks of its grid
 * and frames (mv_grid_check, mv_frames_check), segments, the chunk plan under a workspace limit,
 * row info and cu_seqlens per chunk, the attention tile list, and the byte sizes of the CUDA
 * backend's weight and workspace buffers. Plain C, no CUDA, no threads, no global state: the CPU
 * tower and every CUDA backend call it concurrently. It does not touch pixels or device memory. */
#include "mv_plan.h"

#include <stdlib.h>
#include <string.h>

mv_status mv_grid_check(const mv_vision_config *c, const int32_t *grid, int n, int64_t *n_patches,
                        mv_err *e)
{
    int64_t tot = 0;
    for (int i = 0; i < n; i++) {
        int t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        if (t < 1 || h < c->merge || w < c->merge || h % c->merge || w % c->merge ||
            (int64_t)h * w > (1LL << 30))
            return mv_fail(e, MV_ERR_USAGE,
                           "grid %d,%d,%d: t must be >= 1 and h, w multiples of %d (>= %d)", t, h,
                           w, c->merge, c->merge);
        tot += (int64_t)t * h * w;
    }
    *n_patches = tot;
    return MV_OK;
}

mv_status mv_frames_check(const mv_model *m, const int32_t *n_frames, const int32_t *grid, int n,
                          int64_t *n_patches, int64_t *bytes, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    const mv_preproc_config *pp = &m->pp;
    if (pp->patch != c->patch || pp->merge != c->merge || pp->temporal != c->temporal)
        return mv_fail(e, MV_ERR_MODEL, "patch/merge/temporal %d/%d/%d of the preprocessing disagree "
                       "with the tower's %d/%d/%d", pp->patch, pp->merge, pp->temporal, c->patch,
                       c->merge, c->temporal);
    int64_t np;
    mv_status st = mv_grid_check(c, grid, n, &np, e);
    if (st)
        return st;
    if (c->in_ch != 3)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "uint8 frames need 3 input channels, the model has %d",
                       c->in_ch);
    int64_t tot = 0;
    for (int i = 0; i < n; i++) {
        int32_t nf = n_frames[i], t = grid[3 * i];
        if (nf < 1 || (nf + c->temporal - 1) / c->temporal != t)
            return mv_fail(e, MV_ERR_USAGE, "entry %d: %d frames do not make %d temporal groups of %d",
                           i, nf, t, c->temporal);
        tot += (int64_t)nf * grid[3 * i + 1] * grid[3 * i + 2] * c->patch * c->patch * 3;
    }
    if (n_patches)
        *n_patches = np;
    if (bytes)
        *bytes = tot;
    return MV_OK;
}

mv_status mv_plan_segments(mv_plan *p, const mv_vision_config *c, const int32_t *grid, int n_entries,
                           int max_side, mv_err *e)
{
    memset(p, 0, sizeof *p);
    int64_t N;
    mv_status st = mv_grid_check(c, grid, n_entries, &N, e);
    if (st != MV_OK)
        return st;
    int64_t nseg = 0;
    for (int i = 0; i < n_entries; i++) {
        int t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        if (max_side > 0 && (h > max_side || w > max_side))
            return mv_fail(e, MV_ERR_LIMIT, "grid %d,%d,%d: h and w must be < %d patches", t, h, w,
                           max_side + 1);
        nseg += t;
    }
    if (nseg > (1 << 30))
        return mv_fail(e, MV_ERR_LIMIT, "plan: %lld attention segments in one forward (at most %d)",
                       (long long)nseg, 1 << 30);
    if (nseg > 0) {
        p->seg = malloc(sizeof(mv_segment) * (size_t)nseg);
        p->chunk = malloc(sizeof(mv_chunk) * (size_t)nseg);
        if (!p->seg || !p->chunk) {
            mv_plan_free(p);
            return mv_fail(e, MV_ERR_NOMEM, "plan: out of host memory for %lld segments",
                           (long long)nseg);
        }
    }
    int64_t row = 0;
    int s = 0;
    for (int i = 0; i < n_entries; i++)
        for (int g = 0; g < grid[3 * i]; g++, s++) {
            mv_segment *sg = &p->seg[s];
            sg->row0 = row;
            sg->h = grid[3 * i + 1];
            sg->w = grid[3 * i + 2];
            sg->len = sg->h * sg->w; /* <= 2^30 (mv_grid_check) */
            sg->entry = i;
            row += sg->len;
            if (sg->len > p->max_len)
                p->max_len = sg->len;
        }
    p->nseg = s;
    p->n_patches = row;
    return MV_OK;
}

void mv_plan_free(mv_plan *p)
{
    free(p->seg);
    free(p->chunk);
    memset(p, 0, sizeof *p);
}

mv_status mv_plan_chunks(mv_plan *p, int64_t cap, int whole, mv_err *e)
{
    p->nchunk = 0;
    if (p->max_len > cap)
        return mv_fail(e, MV_ERR_LIMIT, "plan: a segment of %d patches does not fit a workspace of %lld",
                       p->max_len, (long long)cap);
    int s = 0, k = 0;
    while (s < p->nseg) {
        mv_chunk *ch = &p->chunk[k];
        ch->seg0 = s;
        ch->r0 = p->seg[s].row0;
        ch->n = 0;
        int64_t limit = cap, left = p->n_patches - ch->r0;
        if (!whole && k == 0 && left > cap / 4)
            limit = cap / 4;
        else if (!whole && left <= cap && left > cap / 2)
            limit = left - cap / 4;
        while (s < p->nseg && (ch->n == 0 || ch->n + p->seg[s].len <= limit))
            ch->n += p->seg[s++].len;
        ch->nseg = s - ch->seg0;
        k++;
    }
    p->nchunk = k;
    return MV_OK;
}

mv_status mv_plan_rowinfo(const mv_plan *p, int seg0, int nseg, int merge, mv_rowinfo *ri, mv_err *e)
{
    int64_t q = 0;
    for (int j = seg0; j < seg0 + nseg; j++) {
        const mv_segment *sg = &p->seg[j];
        if (sg->h > MV_ROWINFO_MAX_SIDE || sg->w > MV_ROWINFO_MAX_SIDE)
            return mv_fail(e, MV_ERR_LIMIT, "grid %d,%d: h and w must be < %d patches", sg->h, sg->w,
                           MV_ROWINFO_MAX_SIDE + 1);
        for (int64_t i = 0; i < sg->len; i++, q++) {
            int r, c;
            mv_mb_decode(i, sg->w, merge, &r, &c);
            ri[q].row = (int16_t)r;
            ri[q].col = (int16_t)c;
            ri[q].h = (int16_t)sg->h;
            ri[q].w = (int16_t)sg->w;
        }
    }
    return MV_OK;
}

mv_status mv_plan_cu_seqlens(const mv_plan *p, int seg0, int nseg, int32_t *cu, mv_err *e)
{
    int64_t q = 0;
    cu[0] = 0;
    for (int j = 0; j < nseg; j++) {
        q += p->seg[seg0 + j].len;
        if (q > INT32_MAX)
            return mv_fail(e, MV_ERR_LIMIT, "plan: %lld+ patch rows in one attention call (int32 offsets)",
                           (long long)q);
        cu[j + 1] = (int32_t)q;
    }
    return MV_OK;
}

/* ---- attention tiles --------------------------------------------------------------------- */
int mv_attn_tile_count(const int32_t *cu, int n_seg, int bm)
{
    int n = 0;
    for (int s = 0; s < n_seg; s++)
        n += (cu[s + 1] - cu[s] + bm - 1) / bm;
    return n;
}

/* Stable merge sort of segment indices by length, longest first (ties keep input order). */
static void sort_longest_first(int *a, int *tmp, int n, const int32_t *cu)
{
    if (n < 2)
        return;
    int h = n / 2;
    sort_longest_first(a, tmp, h, cu);
    sort_longest_first(a + h, tmp, n - h, cu);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int32_t li = cu[a[i] + 1] - cu[a[i]], lj = cu[a[j] + 1] - cu[a[j]];
        tmp[k++] = lj > li ? a[j++] : a[i++];
    }
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof(int) * (size_t)n);
}

static int tiles_fill(mv_attn_tile *tiles, const int32_t *cu, int n_seg, int bm, const int *order)
{
    int n = 0;
    for (int o = 0; o < n_seg; o++) {
        int s = order ? order[o] : o;
        for (int32_t q = cu[s]; q < cu[s + 1]; q += bm)
            tiles[n++] = (mv_attn_tile){q, cu[s], cu[s + 1], 0};
    }
    return n;
}

int mv_attn_tiles(mv_attn_tile *tiles, const int32_t *cu, int n_seg, int bm)
{
    /* longest segments first (their tiles run longest), ties in input order */
    if (n_seg <= 0)
        return 0;
    int *order = malloc(sizeof(int) * 2 * (size_t)n_seg);
    if (!order) /* still every tile, in input order: only the schedule differs */
        return tiles_fill(tiles, cu, n_seg, bm, NULL);
    for (int s = 0; s < n_seg; s++)
        order[s] = s;
    sort_longest_first(order, order + n_seg, n_seg, cu);
    int n = tiles_fill(tiles, cu, n_seg, bm, order);
    free(order);
    return n;
}

mv_status mv_plan_tiles(const int32_t *cu, int n_seg, int bm, mv_attn_tile *tiles, int64_t tiles_cap,
                        int *n_tiles, mv_err *e)
{
    int need = mv_attn_tile_count(cu, n_seg, bm);
    if (need > tiles_cap)
        return mv_fail(e, MV_ERR_INTERNAL, "attention tile list overflow: %d tiles, room for %lld", need,
                       (long long)tiles_cap);
    *n_tiles = mv_attn_tiles(tiles, cu, n_seg, bm);
    return MV_OK;
}

int64_t mv_plan_tiles_cap(int64_t cap, int merge, int bm)
{
    return cap / bm + cap / ((int64_t)merge * merge) + 1;
}

/* ---- buffer sizes ------------------------------------------------------------------------ */
static size_t align_up(size_t v) { return (v + MV_ARENA_ALIGN - 1) / MV_ARENA_ALIGN * MV_ARENA_ALIGN; }
static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

mv_status mv_tower_sizes_compute(const mv_vision_config *c, mv_precision prec, int f32res,
                                 mv_tower_sizes *s, mv_err *e)
{
    memset(s, 0, sizeof *s);
    const int64_t H = c->hidden, I = c->inter, L = c->out_hidden, P = c->patch_dim, D = c->head_dim;
    const int64_t mm = (int64_t)c->merge * c->merge, npos = c->num_pos;
    if (H <= 0 || I <= 0 || L <= 0 || P <= 0 || D <= 0 || mm <= 0 || npos <= 0 || c->depth <= 0 ||
        H > (1 << 20) || I > (1 << 22) || L > (1 << 22) || P > (1 << 22) || mm > 64 || npos > (1 << 24))
        return mv_fail(e, MV_ERR_MODEL, "plan: vision config out of range (hidden %lld, inter %lld, "
                       "out %lld, patch_dim %lld, merge %d, positions %lld)", (long long)H, (long long)I,
                       (long long)L, (long long)P, c->merge, (long long)npos);
    const size_t t = prec == MV_PREC_BF16 ? 2 : 4, f = 4;
    const size_t xb = prec == MV_PREC_BF16 && f32res ? 4 : t; /* biases of the GEMMs writing x */
    s->esz = t;
    s->xsz = prec == MV_PREC_BF16 && f32res ? 4 : t;
    s->patch_w = (size_t)(H * P) * t;
    s->patch_b = (size_t)H * xb;
    s->pos_embed = (size_t)(npos * H) * f;
    s->norm = (size_t)H * f;
    s->qkv_w = (size_t)(3 * H * H) * t;
    s->qkv_b = (size_t)(3 * H) * t;
    s->proj_w = (size_t)(H * H) * t;
    s->proj_b = (size_t)H * xb;
    s->fc1_w = (size_t)(I * H) * t;
    s->fc1_b = (size_t)I * t;
    s->fc2_w = (size_t)(H * I) * t;
    s->fc2_b = (size_t)H * xb;
    s->mnorm = (size_t)H * f;
    s->m1_w = (size_t)(mm * H * mm * H) * t;
    s->m1_b = (size_t)(mm * H) * t;
    s->m2_w = (size_t)(L * mm * H) * t;
    s->m2_b = (size_t)L * t;
    s->inv_freq = (size_t)(D / 4) * f;
    size_t block = 4 * align_up(s->norm) + align_up(s->qkv_w) + align_up(s->qkv_b) + align_up(s->proj_w) +
                   align_up(s->proj_b) + align_up(s->fc1_w) + align_up(s->fc1_b) + align_up(s->fc2_w) +
                   align_up(s->fc2_b);
    s->weights_total = align_up(s->patch_w) + align_up(s->patch_b) + align_up(s->pos_embed) +
                       (size_t)c->depth * block + 2 * align_up(s->mnorm) + align_up(s->m1_w) +
                       align_up(s->m1_b) + align_up(s->m2_w) + align_up(s->m2_b) + align_up(s->inv_freq);
    /* staging: the T tensors as bf16 (count * 2), the bf16-rounded f32 biases (count * 4) */
    int64_t big_t = max3(max3(H * P, 3 * H * H, I * H), mm * H * mm * H, L * mm * H);
    int64_t big_b = max3(3 * H, I, max3(mm * H, L, H));
    s->staging = (size_t)(2 * big_t > 4 * big_b ? 2 * big_t : 4 * big_b);

    s->pix_cols = max3(P, H, (L + mm - 1) / mm);
    s->qkv_cols = 3 * H > P ? 3 * H : P;
    s->mlp_cols = I > (L + mm - 1) / mm ? I : (L + mm - 1) / mm;
    s->row_pix = (size_t)s->pix_cols * 4;
    s->row_x = (size_t)H * s->xsz;
    s->row_xn = s->row_att = (size_t)H * t;
    s->row_qkv = (size_t)s->qkv_cols * t;
    s->row_mlp = (size_t)s->mlp_cols * t;
    s->row_rope = (size_t)(D / 2) * 2 * sizeof(float);
    s->row_ri = sizeof(mv_rowinfo);
    s->row_tiles = sizeof(mv_attn_tile);
    s->row_host = sizeof(mv_rowinfo) + 16;
    s->row_u8 = (size_t)P + (32 + (size_t)mm - 1) / (size_t)mm;
    s->per_token = 2 * s->row_pix + s->row_x + s->row_xn + s->row_att + s->row_qkv + s->row_mlp +
                   s->row_rope + 2 * s->row_ri + 2 * s->row_tiles + s->row_host + 2 * s->row_u8;
    return MV_OK;
}
