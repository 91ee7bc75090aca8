/* GPU timestamps for timelines across processes: a 1-thread kernel writes
 * %globaltimer (ns), one clock for every context and process on a GPU, so
 * stamps of attnd's stream and of a client's stream can be compared.  A
 * stamp is itself one launch on the stream: a diagnostic, not for timed
 * runs. */
#ifndef ATTN_KERNELS_CUDA_STAMP_H
#define ATTN_KERNELS_CUDA_STAMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue on `stream` (a cudaStream_t) the write of the GPU's global timer
 * into *dst (device or mapped host memory).  Returns 0 or ATTN_E_CUDA. */
int attn_cuda_stamp_launch(uint64_t *dst, void *stream);

#ifdef __cplusplus
}
#endif
#endif
