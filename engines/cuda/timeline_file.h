/* Where the CUDA timeline's lines go (ATTN_CUDA_TIMELINE=FILE, timeline.h):
 * host-only, so it is tested without a GPU.
 *
 * Every engine instance of the process (one per device) and every attnd
 * started with the same FILE append to it: the file is opened O_APPEND,
 * never truncated, and each line leaves in one write(2), so lines of
 * several writers never mix within a line; each line names the process
 * and the device it comes from:
 *   {"pid":P,"device":D,"layer":L,"wait":V,"signal":V,"host_behind":B,
 *    "wait_released":NS,"kernels_start":NS,"kernels_end":NS}
 */
#ifndef ATTN_CUDA_TIMELINE_FILE_H
#define ATTN_CUDA_TIMELINE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "engines/cuda/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_tl_file attn_tl_file;

/* One completed run as its line says it; stamps[] in the order of
 * ATTN_CUDA_TIMELINE_POINTS (timeline.h), 0 for a stamp it did not reach. */
typedef struct attn_tl_record {
    uint32_t layer;
    uint64_t wait_value, signal_value;
    bool host_behind;
    uint64_t stamps[ATTN_TL_NUM_POINTS];
} attn_tl_record;

/* Open `path` for appending the lines of the instance on `device`; on
 * failure nothing is left open and err names field "ATTN_CUDA_TIMELINE"
 * with the path and the reason (E_IO; E_NOMEM). */
int attn_tl_file_open(const char *path, int device, attn_tl_file **out, attn_error_detail *err);

/* Close the file (NULL: nothing). */
void attn_tl_file_close(attn_tl_file *f);

/* Append one record's line in one write; 0, or ATTN_E_IO when the line
 * could not be written whole (a short write is not retried: the next line
 * still starts on a line of its own). */
int attn_tl_file_write(attn_tl_file *f, const attn_tl_record *r);

#ifdef __cplusplus
}
#endif
#endif
