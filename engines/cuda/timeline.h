/* A GPU timeline of the CUDA decode engine's runs, for attributing the idle
 * time of a cross-process step (issue 11): with ATTN_CUDA_TIMELINE=FILE in
 * attnd's environment every run stamps %globaltimer (kernels/cuda/stamp.h,
 * the clock a client's own stamps on the same GPU share) on its stream
 * when its semaphore wait is released, when its first kernel is about to
 * start and after its last kernel, and appends one JSON line per run to
 * FILE once the run completed (timeline_file.h: every instance, one per
 * device, appends to the same FILE, each line naming attnd's pid and the
 * device):
 *   {"pid":P,"device":D,"layer":L,"wait":V,"signal":V,"host_behind":B,
 *    "wait_released":NS,"kernels_start":NS,"kernels_end":NS}
 * host_behind: the engine's stream had nothing left to do when the run was
 * enqueued (the GPU waited for the host).  Each stamp is one more launch on
 * the stream: a diagnostic for a separate pass, not for timed runs.  Plain
 * C; built without CUDA, open says it is unavailable.
 */
#ifndef ATTN_CUDA_TIMELINE_H
#define ATTN_CUDA_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CUDA_TIMELINE_POINTS(X)                                                               \
    X(ATTN_TL_WAIT_RELEASED, 0, "wait_released")                                                   \
    X(ATTN_TL_KERNELS_START, 1, "kernels_start")                                                   \
    X(ATTN_TL_KERNELS_END, 2, "kernels_end")
typedef enum attn_cuda_timeline_point {
    ATTN_CUDA_TIMELINE_POINTS(ATTN__ENUM_ENTRY)
} attn_cuda_timeline_point;
#define ATTN_TL_NUM_POINTS (0 ATTN_CUDA_TIMELINE_POINTS(ATTN__ENUM_PLUS_ONE))

typedef struct attn_cuda_timeline attn_cuda_timeline;

/* Open FILE for appending the lines of the instance on `device` (the
 * current CUDA device), with `slots` runs' stamps in mapped pinned memory;
 * errors name the field "ATTN_CUDA_TIMELINE" and leave nothing behind. */
int attn_cuda_timeline_open(const char *path, int device, uint32_t slots, attn_cuda_timeline **out,
                            attn_error_detail *err);

/* Flush and close the file, free the stamps (NULL: nothing). */
void attn_cuda_timeline_close(attn_cuda_timeline *t);

/* Slot `slot` starts a run: what its line will say besides the stamps. */
void attn_cuda_timeline_begin(attn_cuda_timeline *t, uint32_t slot, uint32_t layer,
                              uint64_t wait_value, uint64_t signal_value, bool host_behind);

/* Enqueue stamp `point` of slot `slot` on `stream`; 0 or ATTN_E_CUDA. */
int attn_cuda_timeline_stamp(attn_cuda_timeline *t, uint32_t slot, attn_cuda_timeline_point point,
                             void *stream);

/* The slot's run completed (its stamps are written): append its line. */
void attn_cuda_timeline_write(attn_cuda_timeline *t, uint32_t slot);

#ifdef __cplusplus
}
#endif
#endif
