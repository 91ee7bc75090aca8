/* attnd's plan cache: plans by id, bounded by count and by bytes (LRU
 * eviction of plans no run holds), with the
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
    uint64_t bytes, max_bytes, refused;
} attnd_plan_cache_stats;

/* Create a cache of at most `capacity` plans holding at most `max_bytes`
 * together; `free_obj` releases a plan object. */
int attnd_plan_cache_create(attnd_plan_cache **out, uint32_t capacity, uint64_t max_bytes,
                            void (*free_obj)(void *));

/* Free every entry and the cache. */
void attnd_plan_cache_destroy(attnd_plan_cache *c);

/* Insert a plan object of `bytes` bytes under its plan key (copied) for pool
 * `pool`: assigns the id, decides the event (hit/miss/replan + reason) and
 * evicts least recently used entries nobody holds until it fits the count
 * and the bytes.  When it cannot fit, it is refused and freed: E_TOO_LARGE
 * (larger than max_bytes alone) or E_BUSY (plans in use hold the rest).  The
 * cache owns `obj` from now on (also when refused), and on success the caller
 * holds one reference to it (as after attnd_plan_cache_acquire): release it
 * when done. */
int attnd_plan_cache_insert(attnd_plan_cache *c, const char *pool, const attn_key *plan_key,
                            void *obj, uint64_t bytes, uint64_t *id, attn_plan_decision *dec);

/* Find plan `id` and take a reference; E_STALE_PLAN (field "plan_id") when unknown or evicted. */
int attnd_plan_cache_acquire(attnd_plan_cache *c, uint64_t id, void **obj, attn_error_detail *err);

/* Release a reference taken by attnd_plan_cache_acquire (the object may be freed now). */
void attnd_plan_cache_release(attnd_plan_cache *c, void *obj);

/* Counters and occupancy. */
void attnd_plan_cache_stats_get(attnd_plan_cache *c, attnd_plan_cache_stats *out);

#endif
