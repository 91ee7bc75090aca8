/* Programmatic dependent launch (sm_90): the device side of
 * attn_cuda_decode_params.pdl.  A kernel launched with programmatic stream
 * serialization may be placed on the SMs while the kernel before it in the
 * stream still runs; these two instructions say when the next kernel may be
 * placed and where this one waits for the previous one's memory.  Kept out
 * of ptx.cuh so the kernels that do not use it are not rebuilt with it.
 */
#ifndef ATTN_CUDA_PDL_CUH
#define ATTN_CUDA_PDL_CUH

#include <stdint.h>

namespace attn
{
namespace ptx
{

/* Let the next kernel of the stream, when it was launched with programmatic
 * stream serialization, start its CTAs once every CTA of this grid has
 * executed this (or exited).  It never lets that kernel read what this one
 * writes: the dependent still waits (griddep_wait) for this grid to finish. */
__device__ __forceinline__ void griddep_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* Wait until the grids this one depends on have completed and their memory
 * is visible; a no-op when this kernel was launched without programmatic
 * stream serialization.  Must precede every global access of the kernel. */
__device__ __forceinline__ void griddep_wait()
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

/* Fetch a tensor map (a kernel parameter: __grid_constant__) into the TMA
 * unit's descriptor cache ahead of its first copy.  Reads only the
 * parameter, so it may precede griddep_wait. */
__device__ __forceinline__ void prefetch_tensormap(const void *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

} // namespace ptx
} // namespace attn

#endif
