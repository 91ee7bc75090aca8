// The polling wait of spin_wait.h.
#include <cuda_runtime.h>

#include "attn/error.h"
#include "kernels/cuda/spin_wait.h"

__global__ void attn_spin_wait_geq(const volatile uint64_t *word, uint64_t value)
{
    // cyclic GEQ: the signed distance, so a counter that wraps still compares
    while ((int64_t)(*word - value) < 0)
        __nanosleep(64);
    __threadfence(); // the writer's data before the word: read after it
}

extern "C" int attn_cuda_spin_wait_launch(const uint64_t *word, uint64_t value, void *stream)
{
    attn_spin_wait_geq<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, value);
    return cudaGetLastError() == cudaSuccess ? 0 : ATTN_E_CUDA;
}
