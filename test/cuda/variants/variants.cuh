/* variants.cuh - the variants build: the kernel versions and measurement options that production
 * does not run, for the test/cuda programs (make cuda-tests links them against
 * BUILD/variants/: cu/attention.cu, attention_fa3.cu, gemm.cu and tower_cuda.cu compiled again
 * with -DMV_VARIANTS -Itest/cuda, plus variants.cu). What a program selects comes from its
 * command line (mv_variants_args), never the environment; with nothing selected a variants
 * object runs exactly the production code path. cu/ reads mv_variants only under MV_VARIANTS.
 *   --fa3 SPEC          the tower's fa3 configuration, field by field over the table's
 *                       (mv_variants_spec: wg=2|3,bn=64|112|128,sw=0|1,qr=0|1,ps=0|1,st=2|3,
 *                       rm=0|8,qp=0|1,tl=0|1,split=-1|0|N)
 *   --attn-variant 1    the builtin bf16 kernel with 8 warps x 16 query rows (2: production's)
 *   --gemm-rank I,O,K   the Linear I -> O runs cuBLASLt's K-th heuristic answer (0: its first)
 *   --gemm-list         each GEMM plan's heuristic answers on stderr
 *   --gemm-bucket B     each GEMM plan asks the heuristic at its row count rounded up to a
 *                       multiple of B and runs that answer where cublasLtMatmulAlgoCheck accepts
 *                       it for the real count (else the real count's answer): one algorithm for
 *                       the CLI's forwards of nearby sizes (with --gemm-rank, its rank among
 *                       the rounded count's answers, unchecked)
 *   --no-gelu-fuse      fc1's tanh GELU by the activation kernel, not cuBLASLt's epilogue
 * Not here: the kernels (cu/, attention_fa3_variants.cuh), the harnesses. */
#ifndef MV_VARIANTS_CUH
#define MV_VARIANTS_CUH

#include <cublasLt.h>

#include "mv_cuda.cuh"

typedef struct {
    int attn_variant;   /* builtin bf16 kernel: 1 = 8 warps x 16 query rows; else 4 warps x 32 */
    mv_fa3_cfg fa3;     /* the tower's fa3 configuration: fields >= 0 replace the table's */
    int fa3_split;      /* -1: the table's split rule; 0: never split; N > 0: the last N items */
    int gemm_rank_in;   /* with gemm_rank_out and gemm_rank_k (1..7): that Linear's answer k */
    int gemm_rank_out;
    int gemm_rank_k;
    int gemm_list;      /* print every GEMM plan's heuristic answers on stderr */
    int gemm_bucket;    /* > 0: the heuristic asked at row counts rounded up to a multiple of it */
    int no_gelu_fuse;   /* fc1's GELU by mv_cuda_act, not the GEMM's epilogue */
} mv_cuda_variants;
extern mv_cuda_variants mv_variants; /* set by the harness before it creates a backend */

/* Reads the options above from argv[1..argc-1] (other arguments are left to the program) into
 * mv_variants: 0, or -1 with a message on stderr naming the bad one. */
int mv_variants_args(int argc, char **argv);
/* SPEC "key=value,..." (keys above; missing ones -1) into *c and *split; 0, or -1. */
int mv_variants_spec(const char *spec, mv_fa3_cfg *c, int *split);
/* c's fields replaced by o's that are >= 0 */
void mv_variants_apply(mv_fa3_cfg *c, const mv_fa3_cfg *o);
/* "wg=3,bn=112,sw=1,qr=0,ps=1,st=2,rm=0,qp=1,tl=1" (buf: at least 64 bytes) */
const char *mv_variants_name(const mv_fa3_cfg *c, char *buf, size_t n);

/* gemm.cu's hooks: how many of cuBLASLt's answers a plan asks for (1, or 8 with --gemm-rank /
 * --gemm-list), and which of the `found` answers it runs (listing them with --gemm-list) */
int mv_variants_gemm_want(void);
int mv_variants_gemm_pick(int64_t n, int in, int out, int epi, int acc, int yf32,
                          const cublasLtMatmulHeuristicResult_t *res, int found);
/* the row count the heuristic is asked at for a plan of n rows (--gemm-bucket; else n) */
int64_t mv_variants_gemm_rows(int64_t n);

/* fa3 version 1 (attention_fa3_variants.cuh): cp.async loads, every wgmma waited for; tiles of
 * MV_ATTN_BM_BF16 rows, keys 64 or 128 (112 runs as 128); errors as mv_cuda_attention_fa3's. */
cudaError_t mv_cuda_attention_fa3_v1(mv_attn_state *s, bf16 *out, const bf16 *qkv, const mv_attn_tile *tiles,
                                     int n_tiles, int heads, int D, int keys, cudaStream_t st);

#endif
