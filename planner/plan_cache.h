/* The plan cache: a bounded LRU of prepared plans keyed by the plan-key
 * digest (seed 0x07F), shared by the daemon's workers under one mutex.
 *
 * Each plan gets a uint64 id so a `run` can name it.  Lookups take a
 * reference; an entry evicted while referenced stays alive until its last
 * release, and its id is stale from the eviction on (ATTN_E_STALE_PLAN).
 */
#ifndef ATTN_PLANNER_PLAN_CACHE_H
#define ATTN_PLANNER_PLAN_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "planner/key.h"

typedef struct attn_plan_cache attn_plan_cache;

/* Frees one cached plan object (called once, outside no lock the caller holds). */
typedef void (*attn_plan_free_fn)(void *plan);

typedef struct attn_plan_cache_stats {
    uint64_t hits, misses, replans, evictions;
    uint32_t entries, capacity;
} attn_plan_cache_stats;

/* Create a cache holding at most `capacity` (>= 1) plans; NULL when out of memory. */
attn_plan_cache *attn_plan_cache_create(uint32_t capacity);

/* Free every plan (the caller guarantees no references remain) and the cache. */
void attn_plan_cache_destroy(attn_plan_cache *c);

/* Look a plan up by plan-key digest; on a hit take a reference, fill *id and
 * *plan and return 1; on a miss return 0.  Counts a hit or a miss. */
int attn_plan_cache_lookup(attn_plan_cache *c, const char digest[ATTN_SHA256_HEX], uint64_t *id,
                           void **plan);

/* Insert a new plan under `digest` (replacing any older entry with that
 * digest), taking a reference for the caller; `replan` counts the insert as a
 * replan (a frozen field changed).  Evicts the least recently used
 * unreferenced-or-not entry beyond capacity.  Returns 0 or ATTN_E_NOMEM. */
int attn_plan_cache_insert(attn_plan_cache *c, const char digest[ATTN_SHA256_HEX], void *plan,
                           attn_plan_free_fn free_fn, bool replan, uint64_t *id);

/* Take a reference to the plan named by `id`; ATTN_E_STALE_PLAN (field
 * "plan_id") when the id is unknown or was evicted. */
int attn_plan_cache_get(attn_plan_cache *c, uint64_t id, void **plan, attn_error_detail *d);

/* Drop a reference taken by lookup, insert or get. */
void attn_plan_cache_release(attn_plan_cache *c, uint64_t id);

/* Forget the plan `id` now (e.g. its pool was dropped); its id becomes stale. */
int attn_plan_cache_evict(attn_plan_cache *c, uint64_t id);

/* A consistent snapshot of the counters. */
attn_plan_cache_stats attn_plan_cache_get_stats(attn_plan_cache *c);

#endif
