/* The append transaction's restore rule for the CUDA engines (see txn.h).
 * Plain C in both builds: the engines hand in the CUDA launcher and wait. */
#include "engines/cuda/txn.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifdef ATTN_WITH_CUDA
#include <cuda_runtime_api.h>

int attn_cuda_txn_stream_wait(void *stream, char *why, size_t n)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess)
        snprintf(why, n, "the stream: %s", cudaGetErrorString(e));
    return e != cudaSuccess;
}
#endif

int attn_cuda_txn_stage(attn_cuda_txn *t)
{
    t->rows.restore = 0;
    int rv = t->launch(&t->rows, t->stream);
    /* a launch the driver refused enqueued nothing: the pool is untouched */
    if (rv == 0)
        t->staged = true;
    return rv;
}

/* One restore launch, or the refusal the tuning injects (tests). */
static int launch_restore(attn_cuda_txn *t)
{
    if (t->refuse_restores > 0) {
        t->refuse_restores--;
        return ATTN_E_CUDA;
    }
    t->rows.restore = 1;
    return t->launch(&t->rows, t->stream);
}

int attn_cuda_txn_restore(attn_cuda_txn *t, attn_error_detail *err)
{
    const bool injected = t->refuse_restores > 0;
    int rv = launch_restore(t);
    if (rv != 0)
        return attn_error_set(err, rv, "layer", "layer %u: the restore launch failed%s", t->layer,
                              injected ? " (refused by the tuning, for tests)" : "");
    return 0;
}

int attn_cuda_txn_unwind(attn_cuda_txn *t, int rv, attn_error_detail *err)
{
    if (!t->staged)
        return rv;
    /* the saved rows back (again, when a restore was already enqueued: it
     * is idempotent), then the stream, so "unchanged" is known, not hoped;
     * the wait comes without a restore too, so nothing of the run still
     * writes the pool or reads the caller's buffers once it returns */
    char why[160] = "the restore launch failed", wait_why[160] = "";
    const bool launched = launch_restore(t) == 0;
    const bool drained = t->wait(t->stream, wait_why, sizeof wait_why) == 0;
    if (launched && drained) {
        t->staged = false;
        return rv;
    }
    if (launched)
        snprintf(why, sizeof why, "%s", wait_why);
    return attn_error_set(err, ATTN_E_POOL_UNRESTORED, "layer",
                          "layer %u: %u new rows x %u K/V heads were not put back (%.100s); "
                          "they may hold this run's K/V",
                          t->layer, t->rows.rows, t->rows.num_kv_heads, why);
}

int attn_cuda_txn_deferred_failed(uint32_t layer, const char *why, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_POOL_UNRESTORED, "layer",
                          "layer %u: the run's device work failed after it was enqueued (%.120s); "
                          "its rows may be partly written",
                          layer, why);
}
