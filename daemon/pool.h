/* attnd pools: named paged K/V stores, per layer one K and one V store in the
 * fixed layout of kernels/common/addr.h (NHD: page -> slot -> head -> dim,
 * HND: page -> head -> slot -> dim), so one page is contiguous either way.
 *
 * The scheduler owns page allocation; attnd only reads and writes the pages
 * manifests and kv_write name.  A pool is reference-counted so pool_drop while
 * a run uses it is safe; each pool has one mutex that serialises writers
 * (kv_write, run commits) and readers that must not see a half commit.
 */
#ifndef ATTN_DAEMON_POOL_H
#define ATTN_DAEMON_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"
#include "attn/types.h"
#include "planner/backend.h"

typedef struct attnd_pool {
    attn_pool_geometry geom;
    attn_pool_view view; /* what an engine sees; k/v point into layer_k/layer_v */
    void **layer_k;
    void **layer_v;
    uint64_t page_bytes_k; /* one page of one layer's K store */
    uint64_t page_bytes_v;
    uint64_t bytes;      /* all layers, K and V */
    uint64_t generation; /* distinct per created pool: a plan names the pool it was built on */
    pthread_mutex_t lock;
    int refs; /* guarded by the table lock */
    /* runs enqueued on a device and not yet completed (deferred async runs):
     * they write the pool after its lock was released, so every other
     * reader or writer waits for 0 first (attnd_pool_wait_device_idle) */
    _Atomic uint32_t deferred;
    /* exported pools (pool_export.h): every store lives in one allocation
     * the client maps; `exporter` is the connection that asked for it */
    bool exported;
    void *export_base;
    attn_pool_export exp;
    uint32_t exporter;
    _Atomic bool export_live; /* false once the exporter's connection closed */
    /* quarantine (attnd_pool_quarantine): 0 serving, 1 while the reason is
     * written, 2 quarantined; only the first failure writes the reason */
    _Atomic int quarantine;
    char quarantine_why[160];
} attnd_pool;

typedef struct attnd_pool_table attnd_pool_table;

/* Create an empty table whose pools together may hold at most `budget` bytes. */
int attnd_pool_table_create(attnd_pool_table **t, uint64_t budget);

/* Pools at once (E_BUSY beyond); `stats` lists every one of them. */
#define ATTND_MAX_POOLS 64

/* Take p->lock once no deferred device run writes `p` any more (every
 * host reader and writer of the pool, and every run that does not defer,
 * locks it this way; deferred runs raise `deferred` under the lock). */
void attnd_pool_lock_idle(attnd_pool *p);

/* Drop every pool and free the table. */
void attnd_pool_table_destroy(attnd_pool_table *t);

/* Validate the geometry and create a zero-filled pool (E_POOL_EXISTS, E_RANGE
 * with the field, E_TOO_LARGE over the budget, E_NOMEM). */
int attnd_pool_create(attnd_pool_table *t, const attn_pool_geometry *g, uint64_t *bytes,
                      attn_error_detail *err);

/* attnd_pool_create of an exported pool (pool_export.h) for connection
 * `conn`: *exp gets where its memory is and its layout.  Beyond the create
 * errors: E_BUSY "export" past ATTND_MAX_EXPORTED_POOLS, E_IO "export" (no
 * shm object), E_CUDA "export" (no IPC handle). */
int attnd_pool_create_exported(attnd_pool_table *t, const attn_pool_geometry *g, uint32_t conn,
                               uint64_t *bytes, attn_pool_export *exp, attn_error_detail *err);

/* Connection `conn` closed: the pools it exported stay (their K/V is the
 * scheduler's), but their export ends: a CPU pool's shm name is removed and
 * kv_written runs on them are refused.  Returns how many exports ended. */
uint32_t attnd_pool_table_conn_closed(attnd_pool_table *t, uint32_t conn);

/* Pools exported now (stats). */
uint32_t attnd_pool_table_exported(attnd_pool_table *t);

/* A run or kv_write on `p` failed and could not put the old rows back
 * (E_POOL_UNRESTORED): its bytes may hold rows no manifest describes, so
 * from now on no run uses it (attnd_pool_check_serving) until it is dropped.
 * `why` (the failure, naming the layer) is kept from the first call only. */
void attnd_pool_quarantine(attnd_pool *p, const char *why);

/* 0 for a pool that serves runs; E_POOL_UNRESTORED, field "pool", saying
 * why and how to recover (pool_drop), for a quarantined one. */
int attnd_pool_check_serving(const attnd_pool *p, attn_error_detail *err);

/* Pools quarantined now (stats). */
uint32_t attnd_pool_table_quarantined(attnd_pool_table *t);

/* Remove a pool from the table; its memory goes when the last user releases it. */
int attnd_pool_drop(attnd_pool_table *t, const char *name, attn_error_detail *err);

/* Find a pool and take a reference (E_UNKNOWN_POOL with field `field`). */
int attnd_pool_acquire(attnd_pool_table *t, const char *name, const char *field, attnd_pool **out,
                       attn_error_detail *err);

/* Release a reference taken by attnd_pool_acquire. */
void attnd_pool_release(attnd_pool_table *t, attnd_pool *p);

/* Check a page list against the pool and the layer (E_LAYER, E_PAGE_OUT_OF_POOL). */
int attnd_pool_check_pages(const attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n,
                           attn_error_detail *err);

/* Copy the named pages of one layer out (k: n*page_bytes_k, v: n*page_bytes_v);
 * takes the pool lock; checks pages first. */
int attnd_pool_read(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, void *k,
                    void *v, attn_error_detail *err);

/* attnd_pool_read for a caller that already holds p->lock (a run's verify
 * reads the layer exactly as it committed it). */
int attnd_pool_read_held(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, void *k,
                         void *v, attn_error_detail *err);

/* Write the named pages of one layer; everything is checked before the first byte changes. */
int attnd_pool_write(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, const void *k,
                     const void *v, attn_error_detail *err);

/* FNV-1a 64 over every K and V byte of every layer (tests: "pool unchanged"). */
uint64_t attnd_pool_checksum(attnd_pool *p);

/* Number of pools and total bytes in use. */
void attnd_pool_table_usage(attnd_pool_table *t, uint32_t *num_pools, uint64_t *bytes);

/* Copy up to `max` pool geometries (for stats and the capture header); returns the count. */
uint32_t attnd_pool_table_list(attnd_pool_table *t, attn_pool_geometry *out, uint32_t max);

#endif
