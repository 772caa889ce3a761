/* test_plan.c - the host-side forward plan (src/tower/plan.c) without a GPU:
 *   - chunk plans on awkward segment mixes (one segment larger than cap/4, hundreds of tiny ones,
 *     videos with t groups, sums of exactly cap and cap/4, random mixes) against an independent
 *     restatement of the rule (prefix sums + binary search instead of the greedy loop), and the
 *     invariants: every segment in exactly one chunk, in order, chunk rows <= cap; a segment
 *     longer than cap is refused;
 *   - row info against the merge-block decode written out here from docs/hf-reference.md §3.1 (in_col =
 *     q mod 2, in_row = (q div 2) mod 2, bcol = (q div 4) mod bw, brow = q div (4 bw)), and each
 *     segment's rows cover its h x w grid once;
 *   - cu_seqlens cumulative; attention tiles cover every (segment, query block) once, longest
 *     segments first with ties in input order; the tile capacity bound holds for the worst mix;
 *   - the weight size table against the tensor shapes in fixtures/model-tiny's safetensors header,
 *     read with jansson (not our loader), and the workspace columns against those shapes. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mv_model.h"
#include "mv_plan.h"
#include "unit.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static int64_t rnd(int64_t lo, int64_t hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* ---- the chunk rule, restated ------------------------------------------------------------- */
typedef struct {
    int seg0, nseg;
    int64_t r0, n;
} ref_chunk;

/* Chunks of segments with lengths len[nseg]: chunk k from segment s has
 * limit = cap / 4 (k == 0, !whole, rest > cap / 4), rest - cap / 4 (!whole, cap / 2 < rest <= cap),
 * else cap; it ends at the largest j with pre[j] - pre[s] <= limit, at least s + 1. */
static int ref_chunks(const int64_t *len, int nseg, int64_t cap, int whole, ref_chunk *out)
{
    int64_t *pre = malloc(sizeof(int64_t) * (size_t)(nseg + 1));
    pre[0] = 0;
    for (int i = 0; i < nseg; i++)
        pre[i + 1] = pre[i] + len[i];
    int k = 0;
    for (int s = 0; s < nseg; k++) {
        int64_t rest = pre[nseg] - pre[s], limit = cap;
        if (!whole && k == 0 && rest > cap / 4)
            limit = cap / 4;
        else if (!whole && rest > cap / 2 && rest <= cap)
            limit = rest - cap / 4;
        int lo = s + 1, hi = nseg; /* largest j in [s+1, nseg] with pre[j] - pre[s] <= limit */
        if (pre[lo] - pre[s] > limit) {
            hi = lo;
        } else {
            while (lo < hi) {
                int mid = (lo + hi + 1) / 2;
                if (pre[mid] - pre[s] <= limit)
                    lo = mid;
                else
                    hi = mid - 1;
            }
        }
        out[k] = (ref_chunk){s, lo - s, pre[s], pre[lo] - pre[s]};
        s = lo;
    }
    free(pre);
    return k;
}

/* HF's merge-block decode for merge 2 (docs/hf-reference.md §3.1), generalised to merge m the same way. */
static void hf_decode(int64_t q, int w, int m, int *row, int *col)
{
    int bw = w / m;
    int in_col = (int)(q % m);
    int in_row = (int)((q / m) % m);
    int64_t bcol = (q / ((int64_t)m * m)) % bw;
    int64_t brow = q / ((int64_t)m * m * bw);
    *row = (int)(m * brow + in_row);
    *col = (int)(m * bcol + in_col);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Everything about one grid list and cap: the plan against the restated rule and the invariants,
 * then per chunk row info, cu_seqlens and tiles. Returns the number of failed sub-checks. */
static int check_plan(const mv_vision_config *c, const int32_t *grid, int n, int64_t cap, int whole,
                      const char *what, int verbose)
{
    int bad = 0;
    mv_plan p;
    mv_err e;
    if (mv_plan_segments(&p, c, grid, n, MV_ROWINFO_MAX_SIDE, &e) != MV_OK) {
        CHECK(0, "%s: segments: %s", what, e.msg);
        mv_plan_free(&p);
        return 1;
    }
    /* segments: one per temporal group, in order, lengths h*w */
    int nseg = 0;
    int64_t row = 0;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < grid[3 * i]; g++, nseg++) {
            const mv_segment *sg = &p.seg[nseg];
            if (nseg >= p.nseg || sg->row0 != row || sg->len != grid[3 * i + 1] * grid[3 * i + 2] ||
                sg->h != grid[3 * i + 1] || sg->w != grid[3 * i + 2] || sg->entry != i)
                bad++;
            row += (int64_t)grid[3 * i + 1] * grid[3 * i + 2];
        }
    bad += nseg != p.nseg || row != p.n_patches;
    if (mv_plan_chunks(&p, cap, whole, &e) != MV_OK) {
        CHECK(0, "%s: chunks: %s", what, e.msg);
        mv_plan_free(&p);
        return 1;
    }
    int64_t *len = malloc(sizeof(int64_t) * (size_t)(p.nseg + 1));
    ref_chunk *rc = malloc(sizeof(ref_chunk) * (size_t)(p.nseg + 1));
    for (int s = 0; s < p.nseg; s++)
        len[s] = p.seg[s].len;
    int nref = ref_chunks(len, p.nseg, cap, whole, rc);
    int same = nref == p.nchunk;
    for (int k = 0; same && k < nref; k++)
        same = rc[k].seg0 == p.chunk[k].seg0 && rc[k].nseg == p.chunk[k].nseg && rc[k].r0 == p.chunk[k].r0 &&
               rc[k].n == p.chunk[k].n;
    bad += !same;
    /* invariants: consecutive, whole segments, each once, rows <= cap */
    int next = 0;
    for (int k = 0; k < p.nchunk; k++) {
        const mv_chunk *ch = &p.chunk[k];
        int64_t sum = 0;
        for (int s = ch->seg0; s < ch->seg0 + ch->nseg; s++)
            sum += p.seg[s].len;
        bad += ch->seg0 != next || ch->nseg < 1 || ch->n != sum || ch->n > cap || ch->r0 != p.seg[ch->seg0].row0;
        next = ch->seg0 + ch->nseg;
    }
    bad += next != p.nseg;
    /* per chunk: row info, cu_seqlens, tiles */
    mv_rowinfo *ri = malloc(sizeof(mv_rowinfo) * (size_t)(cap + 1));
    int32_t *cu = malloc(sizeof(int32_t) * (size_t)(p.nseg + 1));
    for (int k = 0; k < p.nchunk; k++) {
        const mv_chunk *ch = &p.chunk[k];
        if (mv_plan_rowinfo(&p, ch->seg0, ch->nseg, c->merge, ri, &e) != MV_OK ||
            mv_plan_cu_seqlens(&p, ch->seg0, ch->nseg, cu, &e) != MV_OK) {
            bad++;
            continue;
        }
        int64_t q = 0;
        bad += cu[0] != 0;
        for (int j = 0; j < ch->nseg; j++) {
            const mv_segment *sg = &p.seg[ch->seg0 + j];
            bad += cu[j + 1] - cu[j] != sg->len;
            char *seen = calloc((size_t)sg->len, 1);
            for (int64_t i = 0; i < sg->len; i++, q++) {
                int r, cc;
                hf_decode(i, sg->w, c->merge, &r, &cc);
                bad += ri[q].row != r || ri[q].col != cc || ri[q].h != sg->h || ri[q].w != sg->w;
                if (r >= 0 && r < sg->h && cc >= 0 && cc < sg->w)
                    bad += seen[(int64_t)r * sg->w + cc]++ != 0;
                else
                    bad++;
            }
            free(seen);
        }
        bad += cu[ch->nseg] != ch->n || q != ch->n;
        for (int bi = 0; bi < 2; bi++) {
            int bm = bi ? 128 : 64;
            int64_t tcap = mv_plan_tiles_cap(cap, c->merge, bm);
            mv_attn_tile *t = malloc(sizeof(mv_attn_tile) * (size_t)tcap);
            int nt = -1;
            if (mv_plan_tiles(cu, ch->nseg, bm, t, tcap, &nt, &e) != MV_OK) {
                bad++;
                free(t);
                continue;
            }
            /* expected: every (segment, q0) once; compare sorted q0 lists, kv ranges per tile */
            int64_t want = 0;
            for (int j = 0; j < ch->nseg; j++)
                want += (cu[j + 1] - cu[j] + bm - 1) / bm;
            bad += nt != want || nt != mv_attn_tile_count(cu, ch->nseg, bm);
            int32_t *q0 = malloc(sizeof(int32_t) * (size_t)(nt + 1));
            int prev_len = INT32_MAX, prev_seg = -1;
            for (int i = 0; i < nt; i++) {
                q0[i] = t[i].q0;
                /* the segment holding q0: its range must be [kv_start, kv_end) */
                int j = 0;
                while (j < ch->nseg && cu[j + 1] <= t[i].q0)
                    j++;
                bad += j >= ch->nseg || t[i].kv_start != cu[j] || t[i].kv_end != cu[j + 1] ||
                       (t[i].q0 - cu[j]) % bm != 0;
                int l = t[i].kv_end - t[i].kv_start;
                if (j != prev_seg) { /* a new segment: not longer than the last, ties in order */
                    bad += l > prev_len || (l == prev_len && j < prev_seg);
                    prev_len = l;
                    prev_seg = j;
                }
            }
            qsort(q0, (size_t)nt, sizeof(int32_t), cmp_i32);
            int64_t idx = 0;
            for (int j = 0; j < ch->nseg; j++)
                for (int32_t s0 = cu[j]; s0 < cu[j + 1]; s0 += bm)
                    bad += idx >= nt || q0[idx++] != s0;
            free(q0);
            free(t);
        }
    }
    if (verbose || bad)
        CHECK(bad == 0, "%s: cap %lld%s: %d segments -> %d chunks, as the restated rule; rows, cu, tiles (%d bad)",
              what, (long long)cap, whole ? " whole" : "", p.nseg, p.nchunk, bad);
    free(ri);
    free(cu);
    free(len);
    free(rc);
    mv_plan_free(&p);
    return bad;
}

/* ---- size table against the safetensors header ---------------------------------------------- */
static json_t *st_header(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char b8[8];
    json_t *j = NULL;
    if (fread(b8, 1, 8, f) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | b8[i];
        char *buf = malloc(n);
        if (buf && fread(buf, 1, n, f) == n)
            j = json_loadb(buf, n, 0, NULL);
        free(buf);
    }
    fclose(f);
    return j;
}

static int64_t shape_count(json_t *t, int64_t *dim0)
{
    json_t *sh = json_object_get(t, "shape");
    int64_t c = 1;
    for (size_t i = 0; i < json_array_size(sh); i++)
        c *= json_integer_value(json_array_get(sh, i));
    if (dim0)
        *dim0 = json_integer_value(json_array_get(sh, 0));
    return c;
}

static size_t up256(size_t v) { return (v + 255) / 256 * 256; }

static void check_sizes(void)
{
    mv_model *m = NULL;
    mv_err e;
    json_t *hdr = st_header("fixtures/model-tiny/model.safetensors");
    CHECK(hdr != NULL, "safetensors header of fixtures/model-tiny parsed with jansson");
    CHECK(mv_model_load("fixtures/model-tiny", &m, &e) == MV_OK, "model-tiny loads");
    if (!hdr || !m)
        return;
    json_t *cfgj = json_load_file("fixtures/model-tiny/config.json", 0, NULL);
    json_t *vc = json_object_get(cfgj, "vision_config");
    int64_t heads = json_integer_value(json_object_get(vc, "num_heads"));
    int64_t hidden = json_integer_value(json_object_get(vc, "hidden_size"));
    int64_t merge = json_integer_value(json_object_get(vc, "spatial_merge_size"));
    int64_t D = hidden / heads, mm = merge * merge;
    static const struct {
        mv_precision prec;
        int f32res;
        const char *name;
    } modes[] = {{MV_PREC_BF16, 1, "bf16 + f32 residual"}, {MV_PREC_BF16, 0, "bf16"},
                 {MV_PREC_F32, 0, "f32"}, {MV_PREC_TF32, 1, "tf32 (f32res ignored)"}};
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        mv_tower_sizes s;
        if (mv_tower_sizes_compute(&m->cfg, modes[mi].prec, modes[mi].f32res, &s, &e) != MV_OK) {
            CHECK(0, "%s: sizes: %s", modes[mi].name, e.msg);
            continue;
        }
        size_t T = modes[mi].prec == MV_PREC_BF16 ? 2 : 4;
        size_t XB = modes[mi].prec == MV_PREC_BF16 && modes[mi].f32res ? 4 : T;
        /* name suffix -> (table field, element bytes) */
        struct {
            const char *suffix;
            size_t field, esz;
        } map[] = {
            {"patch_embed.proj.weight", s.patch_w, T}, {"patch_embed.proj.bias", s.patch_b, XB},
            {"pos_embed.weight", s.pos_embed, 4},      {"norm1.weight", s.norm, 4},
            {"norm1.bias", s.norm, 4},                 {"norm2.weight", s.norm, 4},
            {"norm2.bias", s.norm, 4},                 {"attn.qkv.weight", s.qkv_w, T},
            {"attn.qkv.bias", s.qkv_b, T},             {"attn.proj.weight", s.proj_w, T},
            {"attn.proj.bias", s.proj_b, XB},          {"mlp.linear_fc1.weight", s.fc1_w, T},
            {"mlp.linear_fc1.bias", s.fc1_b, T},       {"mlp.linear_fc2.weight", s.fc2_w, T},
            {"mlp.linear_fc2.bias", s.fc2_b, XB},      {"merger.norm.weight", s.mnorm, 4},
            {"merger.norm.bias", s.mnorm, 4},          {"merger.linear_fc1.weight", s.m1_w, T},
            {"merger.linear_fc1.bias", s.m1_b, T},     {"merger.linear_fc2.weight", s.m2_w, T},
            {"merger.linear_fc2.bias", s.m2_b, T},
        };
        const int nmap = (int)(sizeof map / sizeof map[0]);
        size_t total = 0, big = 0;
        int matched = 0, bad = 0, tensors = 0;
        int64_t qkv_rows = 0, patch_cols = 0, fc1_rows = 0, out_rows = 0, H = 0;
        const char *key;
        json_t *val;
        json_object_foreach(hdr, key, val) {
            if (!strcmp(key, "__metadata__"))
                continue;
            tensors++;
            int64_t d0 = 0, cnt = shape_count(val, &d0);
            size_t klen = strlen(key);
            int hit = -1;
            for (int i = 0; i < nmap; i++) {
                size_t sl = strlen(map[i].suffix);
                if (klen >= sl && !strcmp(key + klen - sl, map[i].suffix) &&
                    (klen == sl || key[klen - sl - 1] == '.'))
                    hit = hit < 0 || strlen(map[hit].suffix) < sl ? i : hit;
            }
            if (hit < 0) {
                bad++;
                continue;
            }
            matched++;
            size_t bytes = (size_t)cnt * map[hit].esz;
            bad += bytes != map[hit].field;
            total += up256(bytes);
            if (map[hit].esz == T && (size_t)cnt * 2 > big)
                big = (size_t)cnt * 2;
            if (strstr(key, "attn.qkv.weight"))
                qkv_rows = d0;
            if (strstr(key, "patch_embed.proj.weight"))
                patch_cols = cnt / d0, H = d0;
            if (strstr(key, "blocks.0.mlp.linear_fc1.weight"))
                fc1_rows = d0;
            if (strstr(key, "merger.linear_fc2.weight"))
                out_rows = d0;
        }
        total += up256((size_t)(D / 4) * 4); /* rope inv_freq, f32 [D / 4], not in checkpoints */
        CHECK(bad == 0 && matched == tensors && tensors > 0,
              "%s: every tensor's bytes (shape product x element size) equal its size-table field (%d/%d)",
              modes[mi].name, matched, tensors);
        CHECK(s.weights_total == total, "%s: arena bytes = sum over the header's tensors of the 256-aligned "
              "sizes + inv_freq (%zu == %zu)", modes[mi].name, s.weights_total, total);
        CHECK(s.staging >= big, "%s: staging holds the largest tensor as bf16 (%zu >= %zu)", modes[mi].name,
              s.staging, big);
        int64_t pix = patch_cols > H ? patch_cols : H, lq = (out_rows + mm - 1) / mm;
        pix = pix > lq ? pix : lq;
        CHECK(s.pix_cols == pix && s.qkv_cols == (qkv_rows > patch_cols ? qkv_rows : patch_cols) &&
                  s.mlp_cols == (fc1_rows > lq ? fc1_rows : lq),
              "%s: workspace columns from the shapes (pix %lld, qkv %lld, mlp %lld)", modes[mi].name,
              (long long)s.pix_cols, (long long)s.qkv_cols, (long long)s.mlp_cols);
        size_t xs = modes[mi].prec == MV_PREC_BF16 && modes[mi].f32res ? 4 : T;
        size_t per = 2 * (size_t)pix * 4 + (size_t)H * xs + 2 * (size_t)H * T +
                     (size_t)(s.qkv_cols + s.mlp_cols) * T + (size_t)(D / 2) * 8 + 2 * 8 + 2 * 16 + 8 + 16 +
                     2 * ((size_t)patch_cols + (32 + mm - 1) / mm); /* uint8 frames + patchify segments */
        CHECK(s.per_token == per, "%s: workspace bytes per patch row (%zu == %zu)", modes[mi].name,
              s.per_token, per);
    }
    mv_vision_config bad = m->cfg;
    bad.hidden = 0;
    mv_tower_sizes s;
    CHECK(mv_tower_sizes_compute(&bad, MV_PREC_BF16, 1, &s, &e) == MV_ERR_MODEL && strstr(e.msg, "hidden 0"),
          "a config with hidden 0 is refused: %s", e.msg);
    json_decref(cfgj);
    json_decref(hdr);
    mv_model_free(m);
}

int main(void)
{
    mv_vision_config c;
    memset(&c, 0, sizeof c);
    c.merge = 2;
    mv_err e;

    /* awkward mixes */
    int32_t huge[] = {1, 64, 64, 1, 2, 2, 1, 4, 6, 2, 8, 8, 1, 64, 64}; /* 4096 > cap / 4 */
    check_plan(&c, huge, 5, 8192, 0, "one huge segment > cap/4 first and last", 1);
    check_plan(&c, huge, 5, 4096, 0, "segments of exactly cap", 1);
    check_plan(&c, huge, 5, 4096, 1, "segments of exactly cap, whole", 1);
    int32_t tiny[3 * 600];
    for (int i = 0; i < 600; i++)
        tiny[3 * i] = 1, tiny[3 * i + 1] = 2, tiny[3 * i + 2] = 2;
    check_plan(&c, tiny, 600, 1024, 0, "600 tiny 2x2 images", 1);
    check_plan(&c, tiny, 600, 64, 0, "600 tiny 2x2 images, cap 64", 1);
    check_plan(&c, tiny, 256, 1024, 0, "256 tiny images summing to exactly cap", 1);
    check_plan(&c, tiny, 64, 1024, 0, "64 tiny images summing to exactly cap/4", 1);
    int32_t vid[] = {5, 8, 12, 3, 16, 16, 1, 2, 4, 7, 4, 4, 2, 20, 30};
    check_plan(&c, vid, 5, 1024, 0, "videos with t groups", 1);
    check_plan(&c, vid, 5, 600, 0, "videos with t groups, cap 600 (= the longest segment)", 1);
    check_plan(&c, vid, 5, 1 << 20, 0, "videos, a huge workspace", 1);
    check_plan(&c, vid, 5, 4096, 1, "videos, whole (stage dumps)", 1);

    /* random mixes, caps from the longest segment up */
    int rbad = 0, runs = 3000;
    for (int r = 0; r < runs; r++) {
        int n = (int)rnd(1, 40);
        int32_t g[3 * 40];
        int64_t mx = 0;
        for (int i = 0; i < n; i++) {
            g[3 * i] = (int32_t)(rnd(0, 4) == 0 ? rnd(1, 6) : 1);
            g[3 * i + 1] = (int32_t)(2 * rnd(1, rnd(0, 3) == 0 ? 40 : 6));
            g[3 * i + 2] = (int32_t)(2 * rnd(1, rnd(0, 3) == 0 ? 40 : 6));
            if ((int64_t)g[3 * i + 1] * g[3 * i + 2] > mx)
                mx = (int64_t)g[3 * i + 1] * g[3 * i + 2];
        }
        int64_t cap = mx + rnd(0, 4) * rnd(0, 2048);
        rbad += check_plan(&c, g, n, cap, (int)rnd(0, 7) == 0, "random mix", 0) != 0;
    }
    CHECK(rbad == 0, "%d random mixes: chunks as the restated rule, invariants, rows, cu, tiles (%d bad)", runs,
          rbad);

    /* refusals */
    mv_plan p;
    CHECK(mv_plan_segments(&p, &c, vid, 5, 0, &e) == MV_OK && mv_plan_chunks(&p, 599, 0, &e) == MV_ERR_LIMIT &&
              strstr(e.msg, "600"),
          "cap smaller than a segment is refused: %s", e.msg);
    mv_plan_free(&p);
    int32_t wide[] = {1, 2, 32768}, edge[] = {1, 2, 32766};
    CHECK(mv_plan_segments(&p, &c, wide, 1, MV_ROWINFO_MAX_SIDE, &e) == MV_ERR_LIMIT && strstr(e.msg, "32768"),
          "w = 32768 patches refused for row info: %s", e.msg);
    mv_plan_free(&p);
    CHECK(mv_plan_segments(&p, &c, wide, 1, 0, &e) == MV_OK && p.n_patches == 65536,
          "w = 32768 patches fine without the row-info limit (CPU tower)");
    mv_rowinfo *ri = malloc(sizeof(mv_rowinfo) * 65536);
    CHECK(mv_plan_rowinfo(&p, 0, 1, 2, ri, &e) == MV_ERR_LIMIT, "row info of w = 32768 refused: %s", e.msg);
    mv_plan_free(&p);
    CHECK(mv_plan_segments(&p, &c, edge, 1, MV_ROWINFO_MAX_SIDE, &e) == MV_OK &&
              mv_plan_rowinfo(&p, 0, 1, 2, ri, &e) == MV_OK && ri[65531].col == 32765 && ri[65531].row == 1,
          "w = 32766 patches: row info of the last row is (1, 32765)");
    free(ri);
    mv_plan_free(&p);
    int32_t odd[] = {1, 3, 4};
    CHECK(mv_plan_segments(&p, &c, odd, 1, 0, &e) == MV_ERR_USAGE, "an odd h is refused (mv_grid_check): %s",
          e.msg);
    mv_plan_free(&p);
    int32_t cu[] = {0, 256, 260};
    mv_attn_tile t[4];
    int nt = 0;
    CHECK(mv_plan_tiles(cu, 2, 128, t, 2, &nt, &e) == MV_ERR_INTERNAL && strstr(e.msg, "overflow"),
          "a tile list longer than its buffer is refused: %s", e.msg);

    /* the tile capacity bound against the worst mix: all segments of merge^2 rows */
    int tbad = 0;
    for (int64_t cap = 64; cap <= (1 << 16); cap = cap * 3 / 2 + 64) {
        int ns = (int)(cap / 4);
        int32_t *cw = malloc(sizeof(int32_t) * (size_t)(ns + 1));
        for (int i = 0; i <= ns; i++)
            cw[i] = 4 * i;
        tbad += mv_attn_tile_count(cw, ns, 64) > mv_plan_tiles_cap(cap, 2, 64);
        tbad += mv_attn_tile_count(cw, ns, 128) > mv_plan_tiles_cap(cap, 2, 128);
        free(cw);
    }
    CHECK(tbad == 0, "tile capacity bound holds for chunks of only 2x2 segments (caps 64..65536)");

    check_sizes();
    return UNIT_DONE();
}
