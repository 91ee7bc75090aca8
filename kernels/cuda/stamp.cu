// The stamp kernel of stamp.h: one thread reads %globaltimer.
#include <cuda_runtime.h>

#include "attn/error.h"
#include "kernels/cuda/stamp.h"

__global__ void attn_stamp_globaltimer(uint64_t *dst)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *dst = t;
}

extern "C" int attn_cuda_stamp_launch(uint64_t *dst, void *stream)
{
    attn_stamp_globaltimer<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(dst);
    return cudaGetLastError() == cudaSuccess ? 0 : ATTN_E_CUDA;
}
