/* The CUDA engine's cross-process side (ZERO-COPY.md §1, §2): opening
 * legacy CUDA IPC handles (cached per allocation, refcounted), the stream
 * memory operations of semaphores (cuStreamWaitValue64 / WriteValue64,
 * reached through cudaGetDriverEntryPointByVersion, so nothing links
 * libcuda), a control stream that releases waits, and whether the device
 * runs under MPS.  Plain C: no CUDA header here.
 *
 * One attn_cuda_ipc belongs to one engine instance (its device); its own
 * mutex never waits for the instance's run lock, so a connection's close can
 * release a wait while a run sits behind it.
 */
#ifndef ATTN_CUDA_IPC_H
#define ATTN_CUDA_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_cuda_ipc attn_cuda_ipc;

/* Set up for `device`: the control stream and the driver entry points
 * (ATTN_E_CUDA naming the missing one when the driver lacks it). */
int attn_cuda_ipc_create(int device, attn_cuda_ipc **out, attn_error_detail *err);

/* Close every handle still open, destroy the control stream, free. */
void attn_cuda_ipc_destroy(attn_cuda_ipc *c);

/* The device pointer of [offset, offset + bytes) inside the allocation the
 * 64-byte legacy `handle` names.  The first open of an allocation costs
 * ~130-180 us (cudaIpcOpenMemHandle); later ones find it in the cache.
 * Errors: "handle" (cannot be opened: not a legacy handle, expandable
 * segments, the exporter gone, this very process), "offset" / "bytes"
 * (outside the allocation, by cuMemGetAddressRange). */
int attn_cuda_ipc_open(attn_cuda_ipc *c, const uint8_t *handle, uint64_t offset, uint64_t bytes,
                       void **dev_ptr, attn_error_detail *err);

/* The other direction (exported pools): the 64-byte legacy IPC handle of
 * the cudaMalloc allocation holding `dev_ptr` on `device`, and the offset
 * of dev_ptr inside it (E_CUDA "export" when the driver refuses). */
int attn_cuda_ipc_export(int device, void *dev_ptr, uint8_t handle[64], uint64_t *offset,
                         attn_error_detail *err);

/* Release one open of the allocation holding `dev_ptr`; the last closes it. */
void attn_cuda_ipc_close(attn_cuda_ipc *c, void *dev_ptr);

/* Allocations open now (tests, stats). */
uint32_t attn_cuda_ipc_open_count(attn_cuda_ipc *c);

/* Enqueue on `stream` (a cudaStream_t): wait until the uint64 at `addr` is
 * >= value (cyclic GEQ), or write `value` there after the work before it. */
int attn_cuda_ipc_wait(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                       attn_error_detail *err);
int attn_cuda_ipc_signal(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                         attn_error_detail *err);

/* Write `value` at `addr` from the control stream: releases a wait enqueued
 * on another stream of this process (0.04 ms measured); does not block. */
int attn_cuda_ipc_release(attn_cuda_ipc *c, void *addr, uint64_t value);

/* The semaphore ping-pong attnd reports at cuda_ipc registration: two
 * streams of this instance's own on the device (made at the first probe and
 * kept, as are its two uint64 words of device memory: freeing memory or
 * synchronising could wait behind another client's pending wait), `rounds`
 * round trips with values that only rise (stream A waits w0 >= n
 * and writes w1 = n; stream B writes w0 = n and waits w1 >= n), timed by
 * CUDA events on B after one warm-up round.  *us gets the mean round trip.
 * It is the floor of a GPU-side hand-off on this device: the same stream
 * memory operations a run's wait and signal enqueue, on memory of the same
 * GPU (an IPC mapping of it is the same memory), with nothing between.
 * Across processes it predicts the hand-off only when their kernels can
 * overlap (MPS); without MPS the contexts time-slice and a hand-off costs
 * the slice switches on top (ZERO-COPY.md: 286-288 us, not ~11).  The
 * client's own words are not touched: attnd does not know which of them are
 * in use.  A probe that does not finish in 100 ms is released from the
 * control stream and reported as E_TIMEOUT "handoff" (as is every later
 * one while it has not drained); the call never blocks on the GPU. */
int attn_cuda_ipc_pingpong(attn_cuda_ipc *c, uint32_t rounds, double *us, attn_error_detail *err);

/* Whether contexts on `device` run under MPS (CU_DEVICE_ATTRIBUTE_MPS_ENABLED):
 * 1 yes, 0 no, -1 unknown (no device, no driver attribute); `why` gets one
 * sentence. */
int attn_cuda_mps_state(int device, char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
