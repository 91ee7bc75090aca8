/* mbarrier building blocks (sm_90): the transaction barriers that TMA
 * copies and producer/consumer warp pipelines synchronise on, and the
 * phase-bit pipeline state that walks a ring of such barriers.
 *
 * An mbarrier is one 64-bit word in shared memory.  It completes a phase
 * when `count` arrivals have been made and every byte announced with
 * expect_tx has landed; waiters name the phase by its parity bit.  A ring
 * of S stages keeps one "full" barrier (the data of the stage arrived) and
 * usually one "empty" barrier (its consumers are done) per stage; the
 * pipeline_state below names the stage and the parity a waiter expects.
 */
#ifndef ATTN_CUDA_BARRIER_CUH
#define ATTN_CUDA_BARRIER_CUH

#include <stdint.h>

#include "kernels/cuda/ptx.cuh"

namespace attn
{
namespace mbar
{

/* Initialise the barrier for `count` arrivals per phase (one thread does
 * it, then a fence_init + __syncthreads before any other thread uses it). */
__device__ __forceinline__ void init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::smem_addr(bar)),
                 "r"(count));
}

/* Make initialised barriers visible to the async proxy (TMA) and the
 * cluster before they are used. */
__device__ __forceinline__ void fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* One arrival on the current phase. */
__device__ __forceinline__ void arrive(uint64_t *bar)
{
    asm volatile("{\n\t.reg .b64 st;\n\t"
                 "mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}\n" ::"r"(ptx::smem_addr(bar))
                 : "memory");
}

/* One arrival that also announces `bytes` of asynchronous transactions
 * (the TMA copies that complete_tx on this barrier) for the phase. */
__device__ __forceinline__ void arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile(
        "{\n\t.reg .b64 st;\n\t"
        "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}\n" ::"r"(ptx::smem_addr(bar)),
        "r"(bytes)
        : "memory");
}

/* Announce `bytes` more transactions without arriving. */
__device__ __forceinline__ void expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile(
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::smem_addr(bar)),
        "r"(bytes)
        : "memory");
}

/* True once the phase with parity `phase` has completed (one probe, with
 * the hardware's bounded suspend). */
__device__ __forceinline__ bool try_wait(uint64_t *bar, uint32_t phase)
{
    uint32_t done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}\n"
                 : "=r"(done)
                 : "r"(ptx::smem_addr(bar)), "r"(phase)
                 : "memory");
    return done != 0;
}

/* Block until the phase with parity `phase` has completed. */
__device__ __forceinline__ void wait(uint64_t *bar, uint32_t phase)
{
    while (!try_wait(bar, phase)) {
    }
}

/* Bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned)
 * from global to this CTA's shared memory by the async proxy; its bytes
 * complete_tx on `bar`, so the waiter of the phase that announced them
 * (arrive_expect_tx) sees them landed.  One instruction moves a whole row,
 * where cp.async needs one per 16 bytes and lane. */
__device__ __forceinline__ void bulk_copy_g2s(void *smem, const void *gmem, uint32_t bytes,
                                              uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];\n" ::"r"(ptx::smem_addr(smem)),
        "l"(gmem), "r"(bytes), "r"(ptx::smem_addr(bar))
        : "memory");
}

/* Tensor-map copy of one box of the 4-D tensor `tmap` (a CUtensorMap in
 * kernel parameter space, __grid_constant__) at element coordinates
 * (c0, c1, c2, c3) into shared memory at `smem` (aligned to the swizzle
 * span), its bytes complete_tx on `bar`; coordinates past a dimension read
 * as zeros. */
__device__ __forceinline__ void tensor_copy_4d(void *smem, const void *tmap, int c0, int c1, int c2,
                                               int c3, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(ptx::smem_addr(smem)),
                 "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(ptx::smem_addr(bar))
                 : "memory");
}

/* tensor_copy_4d with an L2 eviction policy (ptx::l2_policy_*). */
__device__ __forceinline__ void tensor_copy_4d_hint(void *smem, const void *tmap, int c0, int c1,
                                                    int c2, int c3, uint64_t *bar, uint64_t policy)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(ptx::smem_addr(smem)),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
        "r"(ptx::smem_addr(bar)), "l"(policy)
        : "memory");
}

/* Order this thread's generic-proxy shared-memory writes before later
 * async-proxy (bulk copy) accesses of the same bytes. */
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Stage index and phase parity of a ring of S barriers: advance() moves to
 * the next stage and flips the parity each time the ring wraps, so a
 * waiter on stage i always names the phase it has not seen yet. */
template <int S> struct pipeline_state {
    int index = 0;
    uint32_t phase = 0;

    __device__ __forceinline__ void advance()
    {
        if (++index == S) {
            index = 0;
            phase ^= 1u;
        }
    }
};

} // namespace mbar
} // namespace attn

#endif
