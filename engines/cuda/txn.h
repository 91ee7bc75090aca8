/* The append transaction of one CUDA run on one layer (seed 0x08C), the one
 * home of its restore rule for both CUDA engines (cuda_decode and
 * cuda_prefill).
 *
 * The stage launch swaps the new rows into their page slots, saving the
 * bytes they replace; a run that does not commit, or fails, puts the saved
 * bytes back with a restore launch.  From the stage launch until a restore
 * is known to have completed, the pool may hold the new rows: a run that
 * fails in that window either confirms a restore (the pool is as it was)
 * or says ATTN_E_POOL_UNRESTORED naming the layer and the rows — never
 * that the pool is unchanged when it may not be.  A restore is idempotent
 * (it copies the saved bytes, which nothing else writes), so the failure
 * path may enqueue it again after one that was already enqueued.
 *
 * Plain C, no CUDA header: the launcher and the stream wait are the
 * caller's (the CUDA ones in the engines, fakes in
 * tests/daemon/test_cuda_txn.c, which checks the rule without a GPU).
 */
#ifndef ATTN_CUDA_TXN_H
#define ATTN_CUDA_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "kernels/cuda/decode_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches one swap or restore (attn_cuda_append_launch): 0 or an attn_err. */
typedef int (*attn_cuda_rows_launch_fn)(const attn_cuda_append_params *p, void *stream);

/* Waits until the stream's work is done: 0, or nonzero with one sentence
 * in `why` (cudaStreamSynchronize and cudaGetErrorString). */
typedef int (*attn_cuda_stream_wait_fn)(void *stream, char *why, size_t n);

#ifdef ATTN_WITH_CUDA
/* The engines' attn_cuda_stream_wait_fn: cudaStreamSynchronize. */
int attn_cuda_txn_stream_wait(void *stream, char *why, size_t n);
#endif

/* One run's transaction.  The caller fills every field but `staged`
 * (zero it with the rest) before the first call. */
typedef struct attn_cuda_txn {
    attn_cuda_append_params rows; /* the swap's parameters; `restore` is set per launch */
    void *stream;                 /* a cudaStream_t: every launch and the wait */
    attn_cuda_rows_launch_fn launch;
    attn_cuda_stream_wait_fn wait;
    uint32_t layer;      /* the pool layer, named by the error */
    int refuse_restores; /* tests: refuse this many of the run's restore launches (instance
                            tuning fail_restore_launches; 0 in production) */
    bool staged;         /* private: a stage launch was enqueued and no restore confirmed */
} attn_cuda_txn;

/* Enqueue the swap of t's rows; on success the pool counts as staged until
 * attn_cuda_txn_unwind confirms a restore.  0 or the launcher's error. */
int attn_cuda_txn_stage(attn_cuda_txn *t);

/* Enqueue the restore of a staged run that does not commit.  The pool
 * still counts as staged (the restore is not known to have run until the
 * stream is waited for), so a failure after this call unwinds too.  0, the
 * launcher's error, or ATTN_E_CUDA for a refusal injected by
 * refuse_restores; err says which, with field "layer". */
int attn_cuda_txn_restore(attn_cuda_txn *t, attn_error_detail *err);

/* The failure path of a run that failed with `rv` (err already set): when
 * staged, enqueue the restore and wait for the stream (also when the
 * restore could not be enqueued, so nothing of the run is left running).  Returns rv when the
 * pool is known to be as it was (or was never staged), else
 * ATTN_E_POOL_UNRESTORED with field "layer" and a message that names the
 * layer and the rows. */
int attn_cuda_txn_unwind(attn_cuda_txn *t, int rv, attn_error_detail *err);

/* A deferred run's completion found its device work failed (`why`): its
 * rows were committed on the device as part of the run and no saved copy
 * is left, so ATTN_E_POOL_UNRESTORED with field "layer" naming `layer`,
 * as the unwind says it. */
int attn_cuda_txn_deferred_failed(uint32_t layer, const char *why, attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif
