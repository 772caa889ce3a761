/* mv_plan.h - host-side planning of one tower forward, in plain C (no CUDA), shared by the CPU
 * tower (src/tower/tower_cpu.c) and the CUDA backend (cu/tower_cuda.cu) and unit-tested without a GPU
 * (test/unit/test_plan.c): from the grid list [n_entries][t, h, w] (patches) and the vision
 * config it checks the grid and a uint8 forward's frames (mv_grid_check, the authority on valid
 * grids, which mv_plan_segments calls; mv_frames_check) and derives
 *   - the attention segments: one per temporal group of each entry (docs/hf-reference.md §3.2 step 5),
 *   - the merge-block order decode of a row (§3, "Input layout"): the one definition in the tree
 *     besides the preprocessor's encoder,
 *   - the chunk plan: runs of whole segments that fit a workspace of `cap` patch rows,
 *   - per chunk: row info (row, col, h, w of each patch row) and cu_seqlens,
 *   - the attention tile list of the CUDA kernels,
 *   - the byte sizes of the CUDA backend's weight buffers and of its workspace per patch row.
 * It is not: any device memory or stream logic, or the CPU attention's work split (ATT_QB items
 * in tower_cpu.c), which is a different partition. */
#ifndef MV_PLAN_H
#define MV_PLAN_H

#include "mv_backend.h"
#include "mv_common.h"
#include "mv_model.h"

/* Validates a grid list (h, w even and >= 2, t >= 1) and counts patches. */
mv_status mv_grid_check(const mv_vision_config *c, const int32_t *grid, int n, int64_t *n_patches,
                        mv_err *e);

/* Validates a uint8 forward's input (mv_forward_req.frames) for model m: the preprocessing's
 * patch/merge/temporal equal the tower's, the grid (mv_grid_check), in_ch 3, n_frames[i] >= 1
 * with grid t = ceil(n_frames[i] / temporal). Counts patches and the frames' bytes (sum of
 * n_frames[i] * h_i * w_i * patch^2 * 3); either pointer may be NULL. */
mv_status mv_frames_check(const mv_model *m, const int32_t *n_frames, const int32_t *grid, int n,
                          int64_t *n_patches, int64_t *bytes, mv_err *e);

/* Merge-block order decode: local index q in [0, h*w) of an h x w grid (w % merge == 0) ->
 * (row, col) in patches: blk = q / merge^2, in = q % merge^2,
 * row = (blk / (w / merge)) * merge + in / merge, col = (blk % (w / merge)) * merge + in % merge. */
static inline void mv_mb_decode(int64_t q, int w, int merge, int *row, int *col)
{
    int bw = w / merge, mm = merge * merge;
    int64_t blk = q / mm;
    int in = (int)(q % mm);
    *row = (int)(blk / bw) * merge + in / merge;
    *col = (int)(blk % bw) * merge + in % merge;
}

/* Per patch row: position in patches inside its entry and the entry's grid (h, w); int16, so
 * h and w must be <= MV_ROWINFO_MAX_SIDE. The CUDA kernels read it (rope, position table). */
typedef struct {
    int16_t row, col, h, w;
} mv_rowinfo;
#define MV_ROWINFO_MAX_SIDE 32767

/* One query tile of the attention: rows [q0, min(q0 + BM, kv_end)) attend to [kv_start, kv_end). */
typedef struct {
    int32_t q0, kv_start, kv_end, pad;
} mv_attn_tile;

/* One attention segment: rows [row0, row0 + len) of the packed batch, len = h * w. */
typedef struct {
    int64_t row0;
    int32_t len;
    int32_t h, w;  /* the entry's grid in patches */
    int32_t entry; /* index into the grid list */
} mv_segment;

/* One chunk: whole segments [seg0, seg0 + nseg), rows [r0, r0 + n). */
typedef struct {
    int64_t r0, n;
    int seg0, nseg;
} mv_chunk;

typedef struct {
    mv_segment *seg;   /* [nseg], in input order (entry, then temporal group) */
    int nseg;
    int64_t n_patches; /* sum of len */
    int32_t max_len;   /* longest segment */
    mv_chunk *chunk;   /* [nchunk] after mv_plan_chunks ([nseg] allocated) */
    int nchunk;
} mv_plan;

/* Segments of grid[n_entries][3] (t, h, w), after mv_grid_check(c, ...). max_side > 0 refuses
 * (MV_ERR_LIMIT) an entry whose h or w exceeds it (MV_ROWINFO_MAX_SIDE for row info users); 0 = no
 * limit. p is zeroed first; free with mv_plan_free (also after an error). */
mv_status mv_plan_segments(mv_plan *p, const mv_vision_config *c, const int32_t *grid, int n_entries,
                           int max_side, mv_err *e);
void mv_plan_free(mv_plan *p);

/* The chunk plan for a workspace of cap rows (MV_ERR_LIMIT when a segment is longer than cap).
 * The rule, chunk k starting at segment s (row r0 = seg[s].row0, left = n_patches - r0 rows):
 *   limit = cap, except when !whole:
 *     k == 0 and left > cap / 4                 -> limit = cap / 4
 *       (the first chunk's upload is not overlapped with compute: keep it small)
 *     otherwise, cap / 2 < left <= cap          -> limit = left - cap / 4
 *       (split the tail so that the last chunk, whose download is not overlapped, is ~cap / 4)
 *   then the chunk takes segments s, s+1, ... while the total stays <= limit, and always at
 *   least one (a first segment longer than limit goes alone; it is <= cap).
 * Integer division throughout. whole = 1 (the stage dumps) uses limit = cap for every chunk. */
mv_status mv_plan_chunks(mv_plan *p, int64_t cap, int whole, mv_err *e);

/* Row info of segments [seg0, seg0 + nseg): ri[rows] with rows = their total length, each
 * segment's rows in merge-block order. MV_ERR_LIMIT when h or w > MV_ROWINFO_MAX_SIDE. */
mv_status mv_plan_rowinfo(const mv_plan *p, int seg0, int nseg, int merge, mv_rowinfo *ri, mv_err *e);

/* cu[nseg + 1] = cumulative lengths of segments [seg0, seg0 + nseg), relative to seg0's first
 * row (cu[0] = 0). MV_ERR_LIMIT when the total exceeds INT32_MAX. */
mv_status mv_plan_cu_seqlens(const mv_plan *p, int seg0, int nseg, int32_t *cu, mv_err *e);

/* Attention tiles for segments cu[n_seg + 1] with bm query rows per tile: every (segment,
 * query block) once, longest segments first, ties in input order. mv_attn_tile_count gives the
 * count; mv_attn_tiles fills tiles[count] and returns it. Reentrant. */
int mv_attn_tile_count(const int32_t *cu, int n_seg, int bm);
int mv_attn_tiles(mv_attn_tile *tiles, const int32_t *cu, int n_seg, int bm);
/* The same into tiles[tiles_cap]: MV_ERR_INTERNAL (list overflow) when more are needed. */
mv_status mv_plan_tiles(const int32_t *cu, int n_seg, int bm, mv_attn_tile *tiles, int64_t tiles_cap,
                        int *n_tiles, mv_err *e);
/* An upper bound on the tiles of any chunk of at most cap rows: every segment has >= merge^2
 * rows (h, w >= merge), so tiles <= cap / bm + cap / merge^2 + 1. */
int64_t mv_plan_tiles_cap(int64_t cap, int merge, int bm);

/* Byte sizes of the CUDA backend's buffers for a config and a precision. Weights: one field per
 * buffer as uploaded (block buffers: one block's), elements T (bf16 in bf16 precision, else f32)
 * except the LayerNorm parameters, the position table and rope inv_freq (f32), and with f32res
 * (bf16 with an f32 residual stream) the biases of the GEMMs writing x (patch, proj, fc2: f32). */
#define MV_ARENA_ALIGN 256
typedef struct {
    size_t esz, xsz;           /* bytes of an activation element; of an element of x */
    /* weights */
    size_t patch_w, patch_b;   /* [H, P], [H] */
    size_t pos_embed;          /* f32 [num_pos, H] */
    size_t norm;               /* f32 [H]: each of norm1_w, norm1_b, norm2_w, norm2_b */
    size_t qkv_w, qkv_b;       /* [3H, H], [3H] */
    size_t proj_w, proj_b;     /* [H, H], [H] */
    size_t fc1_w, fc1_b;       /* [I, H], [I] */
    size_t fc2_w, fc2_b;       /* [H, I], [H] */
    size_t mnorm;              /* f32 [H]: each of merger.norm weight, bias */
    size_t m1_w, m1_b;         /* [mm H, mm H], [mm H] */
    size_t m2_w, m2_b;         /* [L, mm H], [L] */
    size_t inv_freq;           /* f32 [D / 4] */
    size_t weights_total;      /* the arena: every buffer (depth x each block one) rounded up to
                                * MV_ARENA_ALIGN */
    size_t staging;            /* host bytes to convert the largest tensor (bf16: count * 2;
                                * bf16-rounded f32 biases: count * 4) */
    /* workspace columns per patch row */
    int64_t pix_cols;          /* max(P, H, ceil(L / mm)): f32 pixels in; dump scratch [n, H] and
                                * output [n / mm, L] out */
    int64_t qkv_cols;          /* max(3H, P): qkv, and the bf16 pixels */
    int64_t mlp_cols;          /* max(I, ceil(L / mm)): fc1 output, and the merger output */
    /* workspace bytes per patch row of a chunk (the backend allocates cap rows of each) */
    size_t row_pix;            /* f32 [pix_cols], two buffers (double-buffered chunks) */
    size_t row_x;              /* x [H] of xsz */
    size_t row_xn, row_att;    /* T [H] each */
    size_t row_qkv, row_mlp;   /* T [qkv_cols], T [mlp_cols] */
    size_t row_rope;           /* float2 [D / 2] (cos, sin) */
    size_t row_ri;             /* mv_rowinfo, two buffers */
    size_t row_tiles;          /* budget of one mv_attn_tile per row, two buffers */
    size_t row_host;           /* host staging: one mv_rowinfo + 16 */
    size_t row_u8;             /* a chunk's uint8 frames (a uint8 forward): at most patch_dim bytes per
                                * patch row (temporal x patch^2 x 3), two buffers; plus its
                                * patchify segment table, one 32-byte entry per merge^2 rows */
    size_t per_token;          /* 2 row_pix + row_x + row_xn + row_att + row_qkv + row_mlp +
                                * row_rope + 2 row_ri + 2 row_tiles + row_host + 2 row_u8 */
} mv_tower_sizes;

/* Fills s for config c and precision prec (f32res: bf16 with the residual stream in f32; ignored
 * otherwise). MV_ERR_MODEL on a config whose sizes overflow. */
mv_status mv_tower_sizes_compute(const mv_vision_config *c, mv_precision prec, int f32res,
                                 mv_tower_sizes *s, mv_err *e);

#endif
