/* wgmma.cuh - the Hopper (sm_90a) PTX this project's wgmma code uses, as small inline wrappers:
 * cp.async, the async-proxy fence, wgmma fence / commit / wait, shared-memory matrix descriptors
 * (no swizzle; two layouts), the m64nNk16 f32 += bf16 x bf16 shapes the fa3 attention kernel
 * needs, mbarriers, TMA loads, named barriers and register reconfiguration.
 * Shared by cu/attention_fa3.cu and the layout probes of test/cuda/test_fa3.cu, so that a probe
 * checks the very descriptors and fragment layouts the kernel uses. Include only from code
 * compiled for sm_90a (the wgmma instructions exist nowhere else). Not here: any kernel. */
#ifndef MV_WGMMA_CUH
#define MV_WGMMA_CUH

#include <stdint.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* shared memory written by this thread through the generic proxy (cp.async, st.shared) becomes
 * visible to the async proxy (wgmma operands) after this fence and a barrier */
static __device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving reads or writes of wgmma operand registers across the
 * asynchronous window (CUTLASS's warpgroup_fence_operand). */
template <int N> static __device__ __forceinline__ void reg_fence(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> static __device__ __forceinline__ void reg_fence(uint32_t (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
/* wgmma shared-memory matrix descriptor: start address, leading / stride byte offsets (all >> 4,
 * 14 bits each), base offset 0, layout type 0 = no swizzle (bits 62-63). */
static __device__ __forceinline__ uint64_t gmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32);
}

/* ---- wgmma wrappers (m64nNk16, f32 += bf16 x bf16) ------------------------------------- */
/* The accumulator operands, one copy for every wrapper: "+f" constraints on d[0..N/2) and the
 * matching "%0, %1, ..." list of the instruction's D registers */
#define WG_D8(i)                                                                                     \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),       \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32 WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
#define WG_D36 WG_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define WG_D56 WG_D32, WG_D8(32), WG_D8(40), WG_D8(48)
#define WG_D64 WG_D56, WG_D8(56)
#define WG_R32                                                                                       \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R36 WG_R32 ", %32, %33, %34, %35"
#define WG_R56 WG_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                           \
                      "%48, %49, %50, %51, %52, %53, %54, %55"
#define WG_R64 WG_R56 ", %56, %57, %58, %59, %60, %61, %62, %63"

/* d[32] (+)= A . B, m64n64k16, A = descriptor a (K-major), B = descriptor b (K-major) */
static __device__ __forceinline__ void wgmma_ss_n64(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_R32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WG_D32
                 : "l"(a), "l"(b), "r"(scale_d));
}
/* d[64] (+)= A . B, m64n128k16, A = descriptor a (K-major), B = descriptor b (K-major) */
static __device__ __forceinline__ void wgmma_ss_n128(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" WG_R64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_D64
                 : "l"(a), "l"(b), "r"(scale_d));
}
/* d[56] (+)= A . B, m64n112k16 (112-key tiles: 784 = 7 x 112), operands as wgmma_ss_n128 */
static __device__ __forceinline__ void wgmma_ss_n112(float *d, uint64_t a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 {" WG_R56 "}, %56, %57, p, 1, 1, 0, 0;\n}\n"
                 : WG_D56
                 : "l"(a), "l"(b), "r"(scale_d));
}
/* d[32] += A . B, m64n64k16, A = a[4] in registers (bf16 pairs), B = descriptor b (N-major,
 * imm-trans-b 1) */
static __device__ __forceinline__ void wgmma_rs_n64(float *d, const uint32_t *a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_R32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : WG_D32
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
/* d[36] += A . B, m64n72k16, A = a[4] in registers (bf16 pairs), B = descriptor b (N-major,
 * imm-trans-b 1) */
static __device__ __forceinline__ void wgmma_rs_n72(float *d, const uint32_t *a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {" WG_R36 "}, {%36, %37, %38, %39}, %40, p, 1, 1, 1;\n}\n"
                 : WG_D36
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
/* d[64] (+)= A . B, m64n128k16, A = a[4] in registers (bf16 pairs, the m16n8k16 A fragment per
 * warp), B = descriptor b (K-major, imm-trans-b 0): S = Q K^T with Q held in registers */
static __device__ __forceinline__ void wgmma_rs_kb_n128(float *d, const uint32_t *a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" WG_R64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : WG_D64
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
/* d[56] (+)= A . B, m64n112k16, A in registers, B K-major (as wgmma_rs_kb_n128) */
static __device__ __forceinline__ void wgmma_rs_kb_n112(float *d, const uint32_t *a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %61, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 {" WG_R56 "}, {%56, %57, %58, %59}, %60, p, 1, 1, 0;\n}\n"
                 : WG_D56
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
/* d[32] (+)= A . B, m64n64k16, A in registers, B K-major (as wgmma_rs_kb_n128) */
static __device__ __forceinline__ void wgmma_rs_kb_n64(float *d, const uint32_t *a, uint64_t b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WG_R32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : WG_D32
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
#undef WG_D8
#undef WG_D32
#undef WG_D36
#undef WG_D56
#undef WG_D64
#undef WG_R32
#undef WG_R36
#undef WG_R56
#undef WG_R64
/* S-shaped product with A from registers (B K-major), N = 64, 112 or 128 */
template <int N> static __device__ __forceinline__ void wgmma_rs_kb(float *d, const uint32_t *a, uint64_t b, int scale_d)
{
    static_assert(N == 64 || N == 112 || N == 128, "wgmma_rs_kb: N");
    if constexpr (N == 128) wgmma_rs_kb_n128(d, a, b, scale_d);
    else if constexpr (N == 112) wgmma_rs_kb_n112(d, a, b, scale_d);
    else wgmma_rs_kb_n64(d, a, b, scale_d);
}

/* S-shaped product (both operands descriptors, B K-major) with N = 64, 112 or 128 */
template <int N> static __device__ __forceinline__ void wgmma_ss(float *d, uint64_t a, uint64_t b, int scale_d)
{
    static_assert(N == 64 || N == 112 || N == 128, "wgmma_ss: N");
    if constexpr (N == 128) wgmma_ss_n128(d, a, b, scale_d);
    else if constexpr (N == 112) wgmma_ss_n112(d, a, b, scale_d);
    else wgmma_ss_n64(d, a, b, scale_d);
}
/* O-shaped product (A from registers, B N-major) with N = 64 or 72 */
template <int N> static __device__ __forceinline__ void wgmma_rs(float *d, const uint32_t *a, uint64_t b)
{
    static_assert(N == 64 || N == 72, "wgmma_rs: N");
    if constexpr (N == 72) wgmma_rs_n72(d, a, b);
    else wgmma_rs_n64(d, a, b);
}

/* ---- the no-swizzle ("interleave") core-matrix layout ----------------------------------- */
/* A tile of rows x (cs chunks of 8 bf16) is stored as 8-row x 16-byte core matrices of 128
 * contiguous bytes: core matrix (row / 8, chunk) at ((row / 8) * cs + chunk) * 128, row % 8 at 16
 * bytes each. Byte offset of (row, chunk): */
static __host__ __device__ __forceinline__ uint32_t cm_offset(int row, int chunk, int cs)
{
    return (uint32_t)((((row >> 3) * cs + chunk) * 8 + (row & 7)) * 16);
}
/* Descriptor of a K-major operand in that layout (rows = M or N, chunks along K; cs chunks per
 * row group), at the k16 step starting at addr: the two 8-column halves of a k16 step are
 * adjacent core matrices (LBO = 128 B), 8-row groups are cs * 128 B apart (SBO). CUTLASS's
 * canonical K-major INTERLEAVE layout ((8,m),(T,2k)):((1T,SBO),(1,LBO)). */
static __device__ __forceinline__ uint64_t desc_kmajor(uint32_t addr, int cs)
{
    return gmma_desc(addr, 128, (uint32_t)cs * 128);
}
/* Descriptor of an N-major B operand (rows = K, chunks along N; cs chunks per 8-row group), at
 * the k16 step starting at addr (2 row groups): 8-column groups of N are adjacent core matrices
 * (SBO = 128 B), 8-row groups of K are cs * 128 B apart (LBO). CUTLASS's canonical MN-major
 * INTERLEAVE layout ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)). */
static __device__ __forceinline__ uint64_t desc_nmajor(uint32_t addr, int cs)
{
    return gmma_desc(addr, (uint32_t)cs * 128, 128);
}

/* ---- the chunk-major layout (what a TMA box of 8 columns x R rows writes) ---------------- */
/* Chunk c of all R rows is contiguous: (row, chunk) at (chunk * R + row) * 16 bytes. Core matrix
 * (row / 8, chunk) is again 128 contiguous bytes, so the same descriptors apply with other
 * strides. K-major operand of R rows at the k16 step starting at addr: the two halves of a k16
 * step are chunks R * 16 B apart (LBO), 8-row groups 128 B apart (SBO). */
static __device__ __forceinline__ uint64_t desc_kmajor_cols(uint32_t addr, int R)
{
    return gmma_desc(addr, (uint32_t)R * 16, 128);
}
/* N-major B operand (K rows = R keys, chunks along N) at the k16 step starting at addr: 8-key
 * groups 128 B apart (LBO), 8-column groups of N R * 16 B apart (SBO). */
static __device__ __forceinline__ uint64_t desc_nmajor_cols(uint32_t addr, int R)
{
    return gmma_desc(addr, 128, (uint32_t)R * 16);
}

/* ---- the 32-byte-swizzled layout (what a TMA box of 16 columns x R rows writes with
 * CU_TENSOR_MAP_SWIZZLE_32B) ----------------------------------------------------------------
 * Row r of a box at r * 32 bytes, its two 16-byte halves swapped where bit 2 of r is set (byte
 * address bit 4 ^= bit 7: Swizzle<1,4,3>, applied to the absolute shared address by TMA and by
 * wgmma alike, so boxes start on 256-byte boundaries). A box reads 32 contiguous bytes of every
 * global row: whole 32-byte sectors, where a box of 8 columns reads half of each sector it
 * touches. Layout type 3 in bits 62-63 of the descriptor. */
static __device__ __forceinline__ uint64_t gmma_desc_sw32(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return gmma_desc(addr, lbo, sbo) | (3ull << 62);
}
/* K-major operand whose k16 step is one box (16 columns) of rows: 8-row groups 256 B apart (SBO);
 * LBO unused (16). CUTLASS's K-major B32 ((8,m),(T,2k)):((2T,SBO),(1,T)). */
static __device__ __forceinline__ uint64_t desc_kmajor_sw32(uint32_t addr) { return gmma_desc_sw32(addr, 16, 256); }
/* N-major B operand (K rows = R keys; N in boxes of 16 columns of R rows each, R * 32 B apart) at
 * the k16 step starting at addr (box 0's base + 16 keys x 32 B per step): 16-column groups R * 32
 * B apart (LBO), 8-key groups 256 B apart (SBO). CUTLASS's MN-major B32
 * ((T,2,m),(8,k)):((1,T,LBO),(2T,SBO)): the roles of LBO and SBO are those of the interleaved
 * MN-major layout swapped. */
static __device__ __forceinline__ uint64_t desc_nmajor_sw32(uint32_t addr, int R)
{
    return gmma_desc_sw32(addr, (uint32_t)R * 32, 256);
}
/* byte offset of (row, 16-byte half h) in a box of 32-byte rows based at a 256-byte boundary */
static __device__ __forceinline__ uint32_t sw32_offset(int row, int h)
{
    return (uint32_t)(row * 32 + ((h ^ (row >> 2)) & 1) * 16);
}

static __device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

/* ---- mbarriers, TMA, named barriers, register reconfiguration ---------------------------- */
static __device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* makes the barriers' initialisation visible to the async proxy (TMA) and other threads */
static __device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* one arrival that also announces `bytes` of TMA transactions to come on this phase */
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* waits until the phase of parity `parity` has completed (a barrier starts in phase 0, so waiting
 * for parity 1 on a fresh barrier returns at once) */
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    /* labels are local to the { } block, so every inlined copy may use the same ones */
    asm volatile("{\n.reg .pred P1;\nLAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra LAB_DONE;\nbra LAB_WAIT;\nLAB_DONE:\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* TMA: the box at (column c0, row c1) of a 2-D tensor map into shared memory at dst; completion
 * counted in bytes on mbarrier bar. Rows or columns outside the tensor are zero-filled. */
static __device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *tmap, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}
static __device__ __forceinline__ void tma_prefetch_desc(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
}
/* named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32) */
static __device__ __forceinline__ void named_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
static __device__ __forceinline__ void named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int N> static __device__ __forceinline__ void regs_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> static __device__ __forceinline__ void regs_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

#endif
