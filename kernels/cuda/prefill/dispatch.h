/* The per-head-dim launchers of the prefill kernels (one translation unit
 * each: kernels/cuda/prefill_d{64,128,256}.cu), called by prefill_launch.cu. */
#ifndef ATTN_CUDA_PREFILL_DISPATCH_H
#define ATTN_CUDA_PREFILL_DISPATCH_H

#include "kernels/cuda/prefill_launch.h"

/* Launch the attend (+ combine) kernels of head dim 64 for p's K/V dtype. */
int attn_prefill_launch_d64(const attn_cuda_prefill_params *p, void *stream);

/* Launch the attend (+ combine) kernels of head dim 128 for p's K/V dtype. */
int attn_prefill_launch_d128(const attn_cuda_prefill_params *p, void *stream);

/* Launch the attend (+ combine) kernels of head dim 256 for p's K/V dtype. */
int attn_prefill_launch_d256(const attn_cuda_prefill_params *p, void *stream);

#endif
