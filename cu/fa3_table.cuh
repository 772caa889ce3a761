/* fa3_table.cuh - the tuning of the Hopper attention kernel (cu/attention_fa3.cu): one entry per
 * head dim it runs, and the table's version. The kernel configuration a launch runs is a pure
 * function of the device (compute capability 9.0, its SM count) and the shape (head dim, segment
 * lengths) through this table: mv_cuda_fa3_config picks the entry and, by its cost model, one of
 * its key-tile sizes; mv_cuda_fa3_split applies its split rule. A production build instantiates
 * exactly the kernels these entries can pick (one per entry and key-tile size); the variants
 * build (make cuda-tests, test/cuda/variants/) instantiates the others for tests and A/B runs.
 *
 * Changing an entry: measure it first (bench/NOTES.md, "Method": A/B runs in both row orders with
 * rests, on the tower's shapes and on 16 x 1600x1200), then bump MV_FA3_TABLE_VERSION: the CUDA
 * backend reports it (mv_backend_settings), so that output fingerprints tell the tables apart.
 * A kernel change that moves its outputs' last bits (another order of its sums) bumps it too
 * (3: an odd head's columns loaded rotated by 8 at head dim 72).
 * Not here: the kernel, the launcher, the device checks (attention_fa3.cu). */
#ifndef MV_FA3_TABLE_CUH
#define MV_FA3_TABLE_CUH

#define MV_FA3_TABLE_VERSION 3

typedef struct {
    int head_dim;        /* D of q, k and v */
    int consumers;       /* consumer warpgroups: 64 query rows each per tile (3: tiles of 192 rows) */
    int swizzle;         /* 1: K and V in 32-byte-swizzled TMA boxes of 16 columns; 0: boxes of 8 */
    int qreg;            /* 1: each consumer keeps its Q rows in registers; 0: read from shared memory */
    int persistent;      /* 1: one CTA per SM taking work items in turn; 0: one CTA per work item */
    int stages;          /* K and V tiles in flight in shared memory (the mbarrier ring) */
    int rescale_min;     /* a row keeps its max unless a tile raises it by more than 2^this (0: off) */
    int qpad;            /* 1 (D % 16 = 8, qreg 0): the tensor cores subtract the row max through Q's padded
                          * columns, q pre-scaled by the caller (mv_fa3_plan.q_scale); 0: a multiply-add per
                          * score (+1-3 % attention at head dim 72: bench/NOTES.md, "The row max ...") */
    int tails;           /* 1: a query tile with at most 64 rows in its segment (the last of a 784-patch one:
                          * 16) runs in the tail kernel, its key tiles shared out among the three consumers;
                          * 0: one consumer runs it as the others idle. 0 until measured (bench/NOTES.md,
                          * "The tail kernel"): production builds instantiate the tail kernel only when an
                          * entry has 1, the variants build always (`--fa3 tl=1`) */
    int keys[2];         /* key-tile sizes the cost model chooses between (the fewer padded keys) */
    int key_cost;        /* the cost model's fixed cost of a key tile, in keys */
    int split_min_tiles; /* split work items only when every item walks at least this many key tiles */
    int split_max_fill;  /* ... and the grid's last wave fills at most this many percent of the SMs */
} mv_fa3_entry;

static constexpr mv_fa3_entry mv_fa3_table[] = {
    /* D   cons sw qr ps st rm qp tl  keys        cost min fill */
    {64,   3,   1, 0, 1, 2, 0, 0, 0,  {112, 128}, 16,  8,  50},
    {72,   3,   1, 0, 1, 2, 0, 1, 0,  {112, 128}, 16,  8,  50},
};
static constexpr int mv_fa3_table_len = (int)(sizeof mv_fa3_table / sizeof mv_fa3_table[0]);
/* whether an entry runs the tail kernel (a production build then instantiates it) */
static constexpr bool mv_fa3_table_tails(int i = 0)
{
    return i < mv_fa3_table_len && (mv_fa3_table[i].tails != 0 || mv_fa3_table_tails(i + 1));
}

#endif
