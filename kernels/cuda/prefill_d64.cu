/* Prefill kernels of head dim 64 (bf16 and fp16 K/V). */
#include "kernels/cuda/prefill/instance.cuh"

ATTN_PREFILL_INSTANCE(64)
