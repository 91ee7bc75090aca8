/* The instance-level steps both CUDA engines share (see instance.h). */
#include "engines/cuda/instance.h"

#ifdef ATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

int attn_cuda_run_check(const attn_run_io *io, const attn_cuda_run_target *t,
                        attn_error_detail *err)
{
    if (io == NULL || io->pool == NULL || io->pool->geom == NULL || !t->plan_uploaded)
        return attn_error_set(err, ATTN_E_MISSING, "pool", "no pool or no uploaded plan");
    if (io->pool->platform != ATTN_PLATFORM_CUDA || io->pool->device != t->device)
        return attn_error_set(err, ATTN_E_ENGINE, "pool.device",
                              "the pool is not on %s, the device of this instance", t->where);
    if (io->layer >= io->pool->geom->layers || io->pool->k == NULL || io->pool->v == NULL)
        return attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u outside the pool", io->layer);
    if (io->q == NULL || io->o == NULL ||
        (!io->kv_written && (io->k_new == NULL || io->v_new == NULL)))
        return attn_error_set(err, ATTN_E_MISSING, io->q == NULL ? "q" : "o",
                              "a run needs q, k_new, v_new (unless kv_written) and o");
    if ((io->wait_dev != NULL || io->signal_dev != NULL) && !t->has_ipc)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, io->wait_dev ? "wait" : "signal",
                              "device semaphores need the driver's stream memory operations: %s",
                              t->ipc_why);
    return 0;
}

#ifdef ATTN_WITH_CUDA
int attn_cuda_signal_behind(attn_cuda_ipc *ipc, const attn_cuda_run_target *t, void *stream,
                            void *addr, uint64_t value, attn_error_detail *err)
{
    if (ipc == NULL)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "signal",
                              "device semaphores need the driver's stream memory operations: %s",
                              t->ipc_why);
    cudaError_t e = cudaSetDevice(t->device);
    if (e != cudaSuccess)
        return attn_cuda_error(err, e, "signal", "cudaSetDevice");
    /* the run's own stream, not the control stream: stream order puts it
     * after every earlier run's kernels and signal */
    return attn_cuda_ipc_signal(ipc, stream, addr, value, err);
}

int attn_cuda_error(attn_error_detail *err, int cuda_error, const char *field, const char *what)
{
    const cudaError_t e = (cudaError_t)cuda_error;
    return attn_error_set(err, e == cudaErrorMemoryAllocation ? ATTN_E_NOMEM : ATTN_E_CUDA, field,
                          "%s: %s", what, cudaGetErrorString(e));
}

int attn_cuda_grow(void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return cudaSuccess;
    if (*buf)
        cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    const size_t n = need + need / 4;
    cudaError_t e = cudaMalloc(buf, n ? n : 256);
    if (e != cudaSuccess) {
        *buf = NULL;
        return e;
    }
    *cap = n;
    return cudaSuccess;
}
#endif
