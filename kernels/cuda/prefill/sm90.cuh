/* Hopper (sm_90a) primitives of the prefill kernel, as readable PTX:
 * mbarriers, cp.async with zero fill, TMA box loads, proxy fences, register reallocation,
 * the wgmma fence/commit/wait triple and the shared-memory matrix
 * descriptor of the 128-byte-swizzled layout.
 *
 * The one smem tile layout (see swz_offset): a tile of R rows by W 2-byte
 * columns (W a multiple of 64) is stored as W/64 column chunks of R rows x
 * 128 bytes; inside a chunk, 16-byte piece c of row r sits at piece
 * c ^ (r % 8).  That is CUTLASS's Swizzle<3,4,3> atom; read with
 * K-major descriptors it is the A/B operand of S = Q K^T (rows = M or N,
 * columns = K), read with MN-major descriptors it is the B operand of
 * O += P V (rows = K, columns = N).  Chunks start 1024-byte aligned.
 */
#ifndef ATTN_CUDA_PREFILL_SM90_CUH
#define ATTN_CUDA_PREFILL_SM90_CUH

#include <stdint.h>

#include "kernels/cuda/ptx.cuh"

namespace attn_sm90
{

/* the shared-state-space address: ptx.cuh's, one home for the decode and
 * prefill kernels (this file keeps what only the prefill kernel uses) */
using attn::ptx::smem_addr;

/* Byte offset of 16-byte piece `piece` (0 .. W/8-1) of row `row` in a
 * swizzled tile of `rows` rows (the layout above). */
__device__ __forceinline__ uint32_t swz_offset(uint32_t row, uint32_t piece, uint32_t rows)
{
    const uint32_t chunk = piece >> 3, c = piece & 7u;
    return chunk * rows * 128u + row * 128u + ((c ^ (row & 7u)) << 4);
}

/* swz_offset in a tile stored as blocks of 2^lg rows, each holding every
 * column chunk of its rows ([block][chunk][row], chunks of 2^lg x 128
 * bytes, 1024-byte aligned for lg >= 3): V's stage when its TMA boxes are
 * whole pages of 2^lg rows.  lg = log2(rows) is swz_offset's layout. */
__device__ __forceinline__ uint32_t swz_offset_blk(uint32_t row, uint32_t piece, uint32_t lg,
                                                   uint32_t chunks)
{
    const uint32_t chunk = piece >> 3, c = piece & 7u;
    const uint32_t blk = row >> lg, r = row & ((1u << lg) - 1u);
    return ((blk * chunks + chunk) << (lg + 7u)) + r * 128u + ((c ^ (row & 7u)) << 4);
}

/* 16-byte asynchronous copy global -> shared; `pred` false writes zeros
 * (rows past a range never carry stale or poisoned bytes into a product). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool pred)
{
    const int n = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Make this thread's generic-proxy smem writes (cp.async, st.shared)
 * visible to the async proxy that wgmma reads through. */
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile(
        "{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_addr(bar))
        : "memory");
}

/* Block until the phase of parity `parity` of `bar` has completed (a fresh
 * barrier is in phase 0, so waiting for parity 1 returns at once). */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n.reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}

/* Named barrier over `threads` threads (a multiple of 32): wait ... */
__device__ __forceinline__ void named_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* ... or only arrive (the other side of a producer/consumer handoff). */
__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* Tensor-memory-accelerator copy of one box of a 4-d tensor map into
 * shared memory at `dst`; the bytes complete_tx on `bar` (the caller
 * announced them with expect_tx).  `map` is the generic address of a
 * __grid_constant__ CUtensorMap; the CTA is its own cluster of one.  The
 * boxes are K/V tiles that every m tile of their head reads again, so they
 * carry the L2 evict_last policy: a stream beside the kernel (the decode
 * rows of a mixed batch, whose copies are evict_first when their K/V exceed
 * the L2) then evicts its own lines before these.  H200, 2026-12-02
 * (docs/cuda-prefill.md): prefill alone -0.3..-1.6 %, the mixed batches
 * -0.4..-1.0 % more than evict_first on the decode copies alone. */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void *map, uint64_t *bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3)
{
    const uint64_t pol = attn::ptx::l2_policy_evict_last();
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(dst),
                 "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "l"(pol)
                 : "memory");
}

/* tma_load_4d's 5-d form (V's whole-page boxes), the same L2 policy. */
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void *map, uint64_t *bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            int32_t c4)
{
    const uint64_t pol = attn::ptx::l2_policy_evict_last();
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%3, %4, %5, %6, %7}], [%2], %8;\n" ::"r"(dst),
                 "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
                 "l"(pol)
                 : "memory");
}

/* The multicast forms (the cluster walk, kernel.cuh): one box, read from
 * L2 once, lands at `dst` and completes_tx on `bar` in every CTA of the
 * cluster that `mask` names, at the same shared-memory offsets in each
 * (the CTAs run one kernel, so their layouts match).  Every destination
 * CTA announces the box's bytes on its own barrier. */
__device__ __forceinline__ void tma_load_4d_mc(uint32_t dst, const void *map, uint64_t *bar,
                                               int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                               uint16_t mask)
{
    const uint64_t pol = attn::ptx::l2_policy_evict_last();
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster.L2::cache_hint [%0], [%1, {%3, %4, %5, %6}], [%2], %7, %8;\n" ::"r"(
            dst),
        "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(mask), "l"(pol)
        : "memory");
}

__device__ __forceinline__ void tma_load_5d_mc(uint32_t dst, const void *map, uint64_t *bar,
                                               int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                               int32_t c4, uint16_t mask)
{
    const uint64_t pol = attn::ptx::l2_policy_evict_last();
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster.L2::cache_hint [%0], [%1, {%3, %4, %5, %6, %7}], [%2], %8, "
                 "%9;\n" ::"r"(dst),
                 "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
                 "h"(mask), "l"(pol)
                 : "memory");
}

/* This CTA's rank in its cluster. */
__device__ __forceinline__ uint32_t cluster_ctarank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* One arrival on the barrier at `bar`'s offset in cluster CTA `cta`'s
 * shared memory, releasing this thread's prior accesses at cluster scope
 * (a consumer frees a stage that the other CTA's producer refills by
 * multicast). */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta)
{
    asm volatile(
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(smem_addr(bar)),
        "r"(cta)
        : "memory");
}

/* Every thread of every CTA of the cluster meets here (release/acquire at
 * cluster scope): after the barriers' init, before any remote arrival;
 * before exit, after the last one. */
__device__ __forceinline__ void cluster_sync_all()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

/* Pull a tensor map (a __grid_constant__ parameter) into the TMA unit's
 * cache ahead of its first copy. */
__device__ __forceinline__ void prefetch_tensormap(const void *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

/* Arrive on `bar` once every cp.async this thread issued so far has
 * landed (asynchronously; the barrier's expected count covers it). */
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
                 : "memory");
}

template <uint32_t R> __device__ __forceinline__ void reg_alloc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

template <uint32_t R> __device__ __forceinline__ void reg_dealloc()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keep the compiler from moving accumulator reads/writes across a wgmma
 * wait (the registers are written asynchronously by the tensor core). */
template <int N> __device__ __forceinline__ void reg_fence(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Shared-memory matrix descriptor (sm_90 GMMA): start address, leading and
 * stride byte offsets (16-byte units), layout 1 = 128-byte swizzle.
 *   K-major (S = Q K^T operands): SBO = 1024 (8 rows x 128 B), LBO unused;
 *     the k-th 16-column step adds 32 * (k % 4) bytes inside a chunk and
 *     moves to the next chunk every 4 steps.
 *   MN-major (V of O += P V): SBO = 1024 (8 K-rows), LBO = bytes between
 *     64-column chunks (rows * 128); the k-th 16-row step adds k * 2048. */
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
    uint64_t d = 0;
    d |= (uint64_t)((saddr & 0x3FFFFu) >> 4);
    d |= (uint64_t)((lbo >> 4) & 0x3FFFu) << 16;
    d |= (uint64_t)((sbo >> 4) & 0x3FFFu) << 32;
    d |= (uint64_t)1 << 62; /* SWIZZLE_128B */
    return d;
}

/* Hint: bring the 128-byte line at global address `p` into L2. */
__device__ __forceinline__ void prefetch_l2(const void *p)
{
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

} // namespace attn_sm90

#endif
