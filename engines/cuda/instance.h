/* What every CUDA engine instance (cuda_decode, cuda_prefill) does the same
 * way, in one place: the checks of a run's inputs against the instance
 * before it is locked, the conversion of a CUDA runtime error into an
 * attn_err with its sentence (STYLE: convert at the boundary), and the
 * growth of a device buffer that runs reuse.
 *
 * Plain C: a CUDA error travels as its int value (cudaError_t). */
#ifndef ATTN_CUDA_INSTANCE_H
#define ATTN_CUDA_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "engines/cuda/ipc.h"
#include "planner/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a run needs from the instance it runs on. */
typedef struct attn_cuda_run_target {
    int device;          /* the instance's CUDA ordinal */
    const char *where;   /* "cuda:N", for the messages */
    bool plan_uploaded;  /* the plan's metadata is on the device */
    bool has_ipc;        /* the driver has stream memory operations (device semaphores) */
    const char *ipc_why; /* why not, when !has_ipc */
} attn_cuda_run_target;

/* Check a run's inputs before anything runs: a pool on the instance's
 * device with the layer inside it, q, k_new, v_new and o, an uploaded plan,
 * and device semaphores only where the driver has them.  0, or the code
 * with its field (pool, pool.device, layer, q, o, wait, signal). */
int attn_cuda_run_check(const attn_run_io *io, const attn_cuda_run_target *t,
                        attn_error_detail *err);

#ifdef ATTN_WITH_CUDA
/* ops->signal of both engines, under the instance's lock: write `value` at
 * device word `addr` on `stream` (a cudaStream_t) behind what it holds, or
 * E_BUFFER_UNSUPPORTED "signal" naming `t->ipc_why` when there is no ipc. */
int attn_cuda_signal_behind(attn_cuda_ipc *ipc, const attn_cuda_run_target *t, void *stream,
                            void *addr, uint64_t value, attn_error_detail *err);

/* Convert CUDA error `cuda_error` (a cudaError_t) into ATTN_E_NOMEM (an
 * allocation) or ATTN_E_CUDA with "what: the runtime's sentence". */
int attn_cuda_error(attn_error_detail *err, int cuda_error, const char *field, const char *what);

/* Make *buf (a cudaMalloc'd buffer of *cap bytes, or NULL) hold `need`
 * bytes, 25 % more when it grows (its contents are not kept); 0 or the
 * cudaError_t of the allocation, *buf NULL and *cap 0 then. */
int attn_cuda_grow(void **buf, size_t *cap, size_t need);
#endif

#ifdef __cplusplus
}
#endif
#endif
