/* What a cuda_ipc registration needs to know about a device pointer: the
 * legacy IPC handle of its allocation, the pointer's offset inside it and
 * the device, found through the CUDA driver at run time (libattn links no
 * CUDA, so one libattn serves CPU-only and GPU machines alike).
 */
#ifndef ATTN_CLIENT_CUDA_IPC_H
#define ATTN_CLIENT_CUDA_IPC_H

#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"

/* A described device range: handle of the allocation's base, where `ptr`
 * sits in it, and the CUDA ordinal of its device. */
typedef struct attn_cuda_ipc_desc {
    uint8_t handle[ATTN_CUDA_IPC_HANDLE_BYTES];
    uint64_t offset;
    int ordinal;
} attn_cuda_ipc_desc;

/* Describe `bytes` of device memory at `ptr` for export.  The driver is
 * libcuda.so.1 (or $ATTN_CUDA_DRIVER_LIB); returns 0, or
 * ATTN_E_BUFFER_UNSUPPORTED (no driver, no device, not legacy-IPC-capable
 * device memory: field "dev_ptr") / ATTN_E_BUFFER_RANGE (past the
 * allocation's end: field "bytes") with `err` filled. */
int attn_cuda_ipc_describe(const void *ptr, uint64_t bytes, attn_cuda_ipc_desc *out,
                           attn_error_detail *err);

#endif
