/* The CUDA engine as the daemon sees it: plain C, no CUDA header needed.
 *
 * The engine ("cuda_decode") runs paged split-KV decode (every request
 * T > 0, C = 1), one instance per device (planner/engine.h): the instance
 * owns its stream, events, workspace and tuning.  plan builds the split
 * plan, the page list, request records, mask ranges, row offsets and work
 * items once and uploads them in one transfer; run binds q, k_new, v_new,
 * o, lse and the layer's stores, appends each request's new K/V row into
 * its page slot, runs the GQA-packed producer and the reducer, and copies
 * O and LSE back.  Built without CUDA (make CUDA=0) every function still
 * exists: attn_cuda_available says why nothing runs, admission rejects with
 * the INSTALLED factor, and the pool functions return ATTN_E_CUDA.
 */
#ifndef ATTN_CUDA_ENGINE_H
#define ATTN_CUDA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "planner/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a usable CUDA device exists; *num_devices (may be NULL) gets the
 * count and `why` (may be NULL) one sentence when the answer is 0. */
int attn_cuda_available(int *num_devices, char *why, size_t n);

/* Knobs of one instance (the daemon's configuration; docs/cuda.md). */
typedef struct attn_cuda_tuning {
    attn_split_policy default_split; /* the plan's policy when the manifest says auto: FA, FI
                                        or GLOBAL (AUTO = the best measured, FI) */
    int simt;                        /* 1: the CUDA-core producer instead of the tensor-core one */
    int heads_fast;                  /* 1: grid (H_kv, items) instead of (items, H_kv) */
    int row_prefetch;                /* 1: walk the page table a pipeline ahead */
    int bulk;                        /* 1, 2, 4: the copy-warp tensor-core producer with that
                                        many copy warps, 8: two tensor-map copy warps, where it
                                        serves; 0: the cp.async one; -1: the measured best
                                        (kernels/common/decode_path.h; issue 13) */
    int fused_merge;                 /* 1: the tensor-core producer's last CTA of each split folds
                                        the slots instead of a reducer launch (docs/cuda.md) */
    int pdl;                         /* programmatic dependent launch of the producer and the
                                        reducer: ATTN_CUDA_PDL_OFF / _EARLY / _LATE (the default;
                                        attn_cuda_decode_params.pdl, docs/cuda.md; _NO_WAIT, the
                                        mixed fork's, runs as the default here) */
    int persist;                     /* persistent tensor-map producer (d = 128, q in the cache
                                        dtype; attn_cuda_decode_params.persist): 0 off, -1 SMs x
                                        resident CTAs per SM, N > 0 at most N CTAs (tests) */
    int l2_evict_first;              /* tensor-map producer's K/V copies: -1 evict_first where
                                        the launch's K/V exceed the L2 (the default;
                                        attn_decode_path_l2_evict_first), 0 never, 1 always */
    int wave_model;                  /* 1: FI plans that already fill the grid may split so the
                                        last wave is not mostly idle (planner/split.h) */
    int poison;                      /* tests: fill O, LSE and the workspace with NaN bytes before
                                        every run, so an element no kernel wrote shows as NaN */
    int fail_restore_launches;       /* tests: refuse this many restore launches of every run
                                        (ATTN_E_CUDA, as a launch the driver refuses); 0: none */
} attn_cuda_tuning;

/* The defaults: FI with the wave model, tensor cores (copy warps: ATTN_CUDA_BULK_DEFAULT),
 * heads_fast, row_prefetch, programmatic launch (ATTN_CUDA_PDL_DEFAULT), no poison. */
void attn_cuda_tuning_defaults(attn_cuda_tuning *t);

/* The engine's ops table (name "cuda_decode", platform CUDA, decode only,
 * the partition schedule).  The config's device is the CUDA ordinal; its
 * tuning, when not NULL, an attn_cuda_tuning. */
const attn_engine_ops *attn_cuda_engine_ops(void);

/* Replace the tuning of an instance made from attn_cuda_engine_ops(); plans
 * made afterwards use it (a plan keeps the tuning it was made with). */
void attn_cuda_engine_set_tuning(attn_engine *e, const attn_cuda_tuning *t);

typedef struct attn_cuda_ipc attn_cuda_ipc; /* engines/cuda/ipc.h */

/* The IPC handle cache, semaphore operations and control stream of a
 * cuda_decode instance (engines/cuda/ipc.h); NULL with `why` (may be NULL)
 * filled when the instance has none (no CUDA, the driver lacks stream
 * memory operations, not a cuda_decode instance). */
attn_cuda_ipc *attn_cuda_engine_ipc(attn_engine *e, char *why, size_t n);

/* What a device contributes to a plan: identity and the measured grid. */
typedef struct attn_cuda_device_facts {
    int device; /* CUDA ordinal */
    int cc_major, cc_minor;
    uint32_t sm_count;
    uint32_t ctas_per_sm; /* producer occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor) */
    uint32_t head_chunks; /* CTAs that share one (item, K/V head) */
    uint64_t l2_bytes;    /* L2 size (cudaDeviceProp.l2CacheSize; 0: unknown) */
} attn_cuda_device_facts;

/* The host half of the engine's plan, no CUDA call: split plan (policy
 * from the manifest or t->default_split, grid from `dev`), the checks the
 * manifest validator cannot make (decode only, page ids inside this pool,
 * plan capacity), the metadata image the run's kernels read, the ledger the
 * run carves, the key environment and the schedule.  Tests call it without
 * a GPU; the engine's plan uploads the image after it.  Free with
 * attn_cuda_plan_host_free. */
int attn_cuda_plan_host(const attn_manifest *m, const attn_pool_geometry *g,
                        const attn_cuda_device_facts *dev, const attn_cuda_tuning *t,
                        attn_engine_plan *out, attn_error_detail *err);

/* Release what attn_cuda_plan_host made (the device copy too, when the
 * engine uploaded one). */
void attn_cuda_plan_host_free(attn_engine_plan *p);

/* Bytes of the metadata image of a plan made by attn_cuda_plan_host (the
 * one host-to-device transfer of plan time). */
uint64_t attn_cuda_plan_meta_bytes(const attn_engine_plan *p);

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

/* The split policy, grid capacity and producer occupancy a plan used
 * (for the dispatch diagnostic and the GPU tests). */
typedef struct attn_cuda_plan_info {
    attn_split_policy policy;
    uint32_t sm_count;
    uint32_t ctas_per_sm; /* measured by cudaOccupancyMaxActiveBlocksPerMultiprocessor */
    uint32_t grid_capacity;
} attn_cuda_plan_info;

/* What a plan made by this engine used; ATTN_E_ENGINE for another plan. */
int attn_cuda_plan_info_get(const attn_engine_plan *p, attn_cuda_plan_info *out);

#ifdef __cplusplus
}
#endif
#endif
