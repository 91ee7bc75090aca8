/* attnd's plan cache: plans by id, bounded (LRU eviction), with the
 * lifecycle event of every new plan decided from its plan key, the static
 * projection of seed 0x07F (planner/key.h).
 *
 * A `plan` request always gets a fresh id holding its own frozen manifest
 * (concurrent clients never overwrite each other's plan); the event says
 * whether the static projection was already planned (hit), never (miss), or
 * whether the caller's previous plan on that pool froze other static fields
 * (replan, with the changed fields).  A `run` naming an id that was never
 * issued or has been evicted gets E_STALE_PLAN.  Thread-safe (one mutex);
 * entries are reference-counted so an eviction during a run is safe.
 */
#ifndef ATTN_DAEMON_PLAN_CACHE_H
#define ATTN_DAEMON_PLAN_CACHE_H

#include <stdint.h>

#include "attn/error.h"
#include "planner/key.h"

typedef struct attnd_plan_cache attnd_plan_cache;

typedef struct attnd_plan_cache_stats {
    uint64_t entries, capacity, hits, misses, replans, evictions, stale;
    uint64_t bytes; /* what the sizer says the entries hold, together */
} attnd_plan_cache_stats;

/* Create a cache of at most `capacity` plans; `free_obj` releases a plan object. */
int attnd_plan_cache_create(attnd_plan_cache **out, uint32_t capacity, void (*free_obj)(void *));

/* Count each plan object's bytes with `size_obj` from now on (stats.bytes;
 * plans inserted before count 0). */
void attnd_plan_cache_set_sizer(attnd_plan_cache *c, uint64_t (*size_obj)(const void *));

/* Free every entry and the cache. */
void attnd_plan_cache_destroy(attnd_plan_cache *c);

/* Insert a plan object under its plan key (copied) for pool `pool`: assigns
 * the id, decides the event (hit/miss/replan + reason) and evicts the least
 * recently used entry nobody holds when full.  The cache owns `obj` from now
 * on, and the caller holds one reference to it (as after
 * attnd_plan_cache_acquire): release it when done. */
int attnd_plan_cache_insert(attnd_plan_cache *c, const char *pool, const attn_key *plan_key,
                            void *obj, uint64_t *id, attn_plan_decision *dec);

/* Find plan `id` and take a reference; E_STALE_PLAN (field "plan_id") when unknown or evicted. */
int attnd_plan_cache_acquire(attnd_plan_cache *c, uint64_t id, void **obj, attn_error_detail *err);

/* Release a reference taken by attnd_plan_cache_acquire (the object may be freed now). */
void attnd_plan_cache_release(attnd_plan_cache *c, void *obj);

/* Counters and occupancy. */
void attnd_plan_cache_stats_get(attnd_plan_cache *c, attnd_plan_cache_stats *out);

#endif
