/* Exported pools (docs/protocol.md "Exported pools"): a pool whose memory a
 * client maps, so an engine writes the new K/V rows with its own kernels
 * and runs with kv_written.
 *
 * An exported pool is one allocation: layer l's K store at k_offset + l *
 * layer_stride, its V store at v_offset + l * layer_stride, each store
 * 256-byte aligned (what the CUDA kernels assume of a store, and a whole
 * number of cache lines on the host).  A CPU pool lives in a POSIX shm
 * object attnd creates (O_EXCL, mode 0600: only attnd's user maps it); a
 * CUDA pool is one cudaMalloc whose legacy IPC handle the reply carries.
 * This file knows no CUDA: pool.c asks the CUDA engine for the handle.
 */
#ifndef ATTN_DAEMON_POOL_EXPORT_H
#define ATTN_DAEMON_POOL_EXPORT_H

#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"

/* Exported pools at once (pool_create with "export": true beyond it:
 * E_BUSY "export"); each also counts against the pool budget as any pool. */
#define ATTND_MAX_EXPORTED_POOLS 16

/* Fill the layout half of `x` (offsets, strides, dtype, layout, bytes) for
 * geometry `g` whose pages take page_k / page_v bytes per layer. */
void attnd_export_layout(const attn_pool_geometry *g, uint64_t page_k, uint64_t page_v,
                         attn_pool_export *x);

/* Create, size and map a fresh shm object for `x->bytes` bytes, named from
 * attnd's pid, the pool's generation and name (x->name gets it); *base is
 * the zero-filled mapping.  E_IO "export" when the object cannot be made. */
int attnd_export_shm_create(attn_pool_export *x, const char *pool, uint64_t generation, void **base,
                            attn_error_detail *err);

/* Remove the shm object's name (no new mapping can be made; mappings made
 * stay valid until they are unmapped).  Idempotent per name. */
void attnd_export_shm_unlink(const attn_pool_export *x);

/* Unmap attnd's mapping of an exported CPU pool. */
void attnd_export_shm_unmap(const attn_pool_export *x, void *base);

#endif
