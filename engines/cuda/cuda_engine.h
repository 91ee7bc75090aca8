/* The CUDA engine as the daemon sees it: plain C, no CUDA header needed.
 *
 * The engine ("cuda_decode") runs paged split-KV decode (every request
 * T > 0, C = 1) on one device: it appends each request's new K/V row into
 * its page slot, runs the GQA-packed producer and the reducer, and copies O
 * and LSE back.  Built without CUDA (make CUDA=0) every function still
 * exists: attn_cuda_available says why nothing runs, admission rejects with
 * the INSTALLED factor, and the pool functions return ATTN_E_CUDA.
 */
#ifndef ATTN_CUDA_ENGINE_H
#define ATTN_CUDA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "planner/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a usable CUDA device exists; *num_devices (may be NULL) gets the
 * count and `why` (may be NULL) one sentence when the answer is 0. */
int attn_cuda_available(int *num_devices, char *why, size_t n);

/* The engine's backend table (name "cuda_decode", platform CUDA, decode only). */
const attn_backend *attn_cuda_backend(void);

/* Which split policy the engine's plan uses when the manifest says auto
 * (the default is the best measured one, docs/cuda.md); FA, FI or GLOBAL. */
void attn_cuda_set_default_split(attn_split_policy p);

/* Which producer runs: simt != 0 selects the CUDA-core kernel instead of
 * the tensor-core one; heads_fast orders the grid (H_kv, items) instead of
 * (items, H_kv); row_prefetch walks the page table a pipeline ahead.
 * Defaults: tensor cores, heads_fast, row_prefetch (docs/cuda.md). */
void attn_cuda_set_producer(int simt, int heads_fast, int row_prefetch);

/* Tests: when on, every run first fills O, LSE and the workspace with NaN
 * bytes on the device, so an element no kernel wrote shows as NaN. */
void attn_cuda_debug_poison(int on);

/* Fill `out` with every reason the engine cannot run the call (seed 0x07B);
 * pure host code, the same function the backend table points to. */
void attn_cuda_admit(const attn_manifest *m, const attn_pool_geometry *g, attn_admission *out);

/* Bytes of one layer's K store (and V store) of a pool:
 * num_pages x page_size x H_kv x head_dim x element size. */
uint64_t attn_cuda_store_bytes(const attn_pool_geometry *g, int v_store);

/* Allocate one zero-filled store of `bytes` on `device` (cudaMalloc). */
int attn_cuda_pool_alloc(int device, uint64_t bytes, void **out, attn_error_detail *err);

/* Free a store made by attn_cuda_pool_alloc (NULL is ignored). */
void attn_cuda_pool_free(int device, void *store);

/* Copy whole pages between a device store and host memory (kv_write /
 * kv_read): `pages` lists page ids, host data holds them in order, each in
 * the pool's layout.  write != 0 copies host -> device.  Page ids outside
 * the pool are ATTN_E_PAGE_OUT_OF_POOL with field "pages[i]". */
int attn_cuda_pool_pages(const attn_pool_geometry *g, int device, void *store, int v_store,
                         const int32_t *pages, uint32_t num_pages, void *host, int write,
                         attn_error_detail *err);

/* Device properties for the artifact identity (hello / loaded artifact). */
typedef struct attn_cuda_device_info {
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    uint64_t total_mem;
    uint64_t l2_bytes;
    int driver_version;  /* e.g. 13000 */
    int runtime_version; /* the runtime this engine was linked with */
    /* FNV-1a 64 of the producer kernels' binary/PTX versions and symbols:
     * an identity of the loaded image, not a hash of the fatbin bytes */
    char image_id[24];
} attn_cuda_device_info;

/* Read the properties of `device`; ATTN_E_CUDA when there is none. */
int attn_cuda_device_info_get(int device, attn_cuda_device_info *out, attn_error_detail *err);

/* The split policy, grid capacity and producer occupancy the last plan used
 * (for the dispatch diagnostic). */
typedef struct attn_cuda_plan_info {
    attn_split_policy policy;
    uint32_t sm_count;
    uint32_t ctas_per_sm; /* measured by cudaOccupancyMaxActiveBlocksPerMultiprocessor */
    uint32_t grid_capacity;
} attn_cuda_plan_info;

/* Plan for `m` like the backend's plan function, with `policy` forced
 * unless it is AUTO; `info` (may be NULL) says what was used. */
int attn_cuda_plan(const attn_manifest *m, const attn_pool_geometry *g, attn_split_policy policy,
                   attn_split_plan *out, attn_cuda_plan_info *info, attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif
