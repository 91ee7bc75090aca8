/* Kernel execution evidence through CUPTI's activity API (seed 0x0BF): the
 * exact symbols, launch counts, grid and block and GPU durations of the
 * kernels that ran between begin and end.  Plain C; without ATTN_WITH_CUDA
 * every function exists and says the tracer is unavailable.
 *
 * The window is device-wide, not per request: a kernel launched by another
 * thread inside the window is recorded too, so the caller holds the device
 * for the traced run (the daemon runs traced requests alone).  One window
 * at a time per process; begin returns ATTN_E_BUSY while one is open.
 * Tracing adds overhead: a traced run's timing is not a latency sample.
 * libcupti is loaded with dlopen at first use (no link flag; ATTN_CUPTI_LIB
 * overrides the path), so a build without CUPTI still links and says why.
 */
#ifndef ATTN_CUDA_CUPTI_TRACE_H
#define ATTN_CUDA_CUPTI_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "planner/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build can trace; `why` (may be NULL) gets one sentence when not. */
int attn_cupti_available(char *why, size_t n);

/* Open a trace window: enable CONCURRENT_KERNEL activity records. */
int attn_cupti_begin(attn_error_detail *d);

/* Close the window: the caller has synchronised the device; flush the
 * records, disable the activity, and aggregate them by symbol into `out`
 * (at most `max`), in first-launch order.  *n gets the number of symbols;
 * *dropped the records CUPTI reported lost (may be NULL). */
int attn_cupti_end(attn_diag_kernel *out, uint32_t max, uint32_t *n, uint64_t *dropped,
                   attn_error_detail *d);

/* CUPTI's version ("cupti 13.0" style) for the trace record, or "" without CUDA. */
const char *attn_cupti_version(void);

#ifdef __cplusplus
}
#endif
#endif
