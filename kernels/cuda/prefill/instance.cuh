/* One instantiation of the prefill kernels per head dim (both K/V dtypes):
 * ATTN_PREFILL_INSTANCE(D) defines attn_prefill_launch_d<D>, declared in
 * prefill/dispatch.h, so each head dim compiles in its own translation unit. */
#ifndef ATTN_CUDA_PREFILL_INSTANCE_CUH
#define ATTN_CUDA_PREFILL_INSTANCE_CUH

#include "attn/error.h"
#include "kernels/cuda/prefill/dispatch.h"
#include "kernels/cuda/prefill/kernel.cuh"

namespace attn_prefill
{

template <int D, typename KV>
int launch_typed(const attn_cuda_prefill_params *p, cudaStream_t stream)
{
    using C = Cfg<D>;
    /* the attribute is per function and per device; setting it each launch
     * costs ~1 us and keeps no static state (STYLE.md: no file globals) */
    if (cudaFuncSetAttribute(attn_prefill_attend<D, KV>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) != cudaSuccess)
        return ATTN_E_CUDA;
    const uint32_t units = p->num_items * p->num_kv_heads;
    if (units) {
        dim3 grid(p->max_ctas && p->max_ctas < units ? p->max_ctas : units);
        attn_prefill_attend<D, KV><<<grid, kThreads, C::SMEM, stream>>>(*p);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    if (p->num_merges) {
        dim3 grid(p->num_merges, p->num_kv_heads);
        attn_prefill_combine<D><<<grid, 128, 0, stream>>>(*p);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    return 0;
}

} // namespace attn_prefill

#define ATTN_PREFILL_INSTANCE(D)                                                                   \
    int attn_prefill_launch_d##D(const attn_cuda_prefill_params *p, void *stream)                  \
    {                                                                                              \
        cudaStream_t s = static_cast<cudaStream_t>(stream);                                        \
        if (p->kv_dtype == ATTN_BF16)                                                              \
            return attn_prefill::launch_typed<D, __nv_bfloat16>(p, s);                             \
        if (p->kv_dtype == ATTN_FP16)                                                              \
            return attn_prefill::launch_typed<D, __half>(p, s);                                    \
        return ATTN_E_DTYPE;                                                                       \
    }

#endif
