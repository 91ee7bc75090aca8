/* A semaphore wait as a kernel: one thread polls a uint64 word until it is
 * >= a value (cyclic GEQ, as cuStreamWaitValue64 GEQ), then exits, so the
 * stream's next kernel follows a kernel instead of a front-end semaphore
 * acquire.  Only under MPS: without it a spinning kernel holds its
 * context's time slice while the writer's context cannot run.  It occupies
 * one warp of one SM while it waits. */
#ifndef ATTN_KERNELS_CUDA_SPIN_WAIT_H
#define ATTN_KERNELS_CUDA_SPIN_WAIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue on `stream` (a cudaStream_t) the wait for *word >= value (device
 * memory, e.g. an IPC-mapped buffer).  Returns 0 or ATTN_E_CUDA. */
int attn_cuda_spin_wait_launch(const uint64_t *word, uint64_t value, void *stream);

#ifdef __cplusplus
}
#endif
#endif
