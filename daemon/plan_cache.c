/* attnd's plan cache (see plan_cache.h). */
#include "daemon/plan_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t id;
    uint64_t last_use;
    char pool[ATTN_NAME_MAX];
    char digest[ATTN_SHA256_HEX];
    attn_key key;
    void *obj;
    uint64_t bytes; /* what obj holds, as the inserter counted it */
    int refs;       /* the cache's own reference plus one per acquire */
} entry;

struct attnd_plan_cache {
    pthread_mutex_t lock;
    uint32_t capacity;
    uint32_t n;
    entry **e;
    uint64_t next_id;
    uint64_t tick;
    void (*free_obj)(void *);
    attnd_plan_cache_stats st;
    uint32_t alloc; /* slots in e; > capacity only while every entry is in use */
    uint64_t bytes; /* sum over entries */
    uint64_t max_bytes;
};

int attnd_plan_cache_create(attnd_plan_cache **out, uint32_t capacity, uint64_t max_bytes,
                            void (*free_obj)(void *))
{
    attnd_plan_cache *c = calloc(1, sizeof *c);
    if (c == NULL || capacity == 0)
        goto fail;
    c->e = calloc(capacity, sizeof *c->e);
    if (c->e == NULL)
        goto fail;
    c->alloc = capacity;
    pthread_mutex_init(&c->lock, NULL);
    c->capacity = capacity;
    c->next_id = 1;
    c->free_obj = free_obj;
    c->st.capacity = capacity;
    c->max_bytes = max_bytes ? max_bytes : UINT64_MAX;
    *out = c;
    return 0;
fail:
    if (c != NULL)
        free(c->e);
    free(c);
    return capacity == 0 ? ATTN_E_RANGE : ATTN_E_NOMEM;
}

static void entry_free(attnd_plan_cache *c, entry *x)
{
    if (x->obj != NULL && c->free_obj != NULL)
        c->free_obj(x->obj);
    attn_key_fini(&x->key);
    free(x);
}

void attnd_plan_cache_destroy(attnd_plan_cache *c)
{
    if (c == NULL)
        return;
    for (uint32_t i = 0; i < c->n; i++)
        entry_free(c, c->e[i]);
    pthread_mutex_destroy(&c->lock);
    free(c->e);
    free(c);
}

/* Drop the least recently used entry that no run holds; returns 0 when
 * every entry is in use (the cache then grows past its bound until one is
 * released, rather than pull a plan from under a running request). */
static int evict_one(attnd_plan_cache *c)
{
    int victim = -1;
    entry *x;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->e[i]->refs == 1 && (victim < 0 || c->e[i]->last_use < c->e[victim]->last_use))
            victim = (int)i;
    if (victim < 0)
        return 0;
    x = c->e[victim];
    c->e[victim] = c->e[--c->n];
    c->bytes -= x->bytes;
    c->st.evictions++;
    entry_free(c, x);
    return 1;
}

int attnd_plan_cache_insert(attnd_plan_cache *c, const char *pool, const attn_key *plan_key,
                            void *obj, uint64_t bytes, uint64_t *id, attn_plan_decision *dec)
{
    entry *x = calloc(1, sizeof *x);
    const entry *same = NULL, *prev_pool = NULL;
    int rc;

    if (x == NULL)
        return ATTN_E_NOMEM;
    attn_key_init(&x->key);
    if ((rc = attn_key_copy(&x->key, plan_key)) != 0 ||
        (rc = attn_key_sha256(plan_key, x->digest)) != 0) {
        attn_key_fini(&x->key);
        free(x);
        return rc;
    }
    snprintf(x->pool, sizeof x->pool, "%s", pool);
    x->obj = obj;
    x->bytes = bytes;
    /* the cache's reference and the caller's: an entry the caller has not
     * used yet must not be evicted by a concurrent insert */
    x->refs = 2;

    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->n; i++) {
        if (strcmp(c->e[i]->digest, x->digest) == 0) {
            same = c->e[i];
            break;
        }
        if (strcmp(c->e[i]->pool, pool) == 0 &&
            (prev_pool == NULL || c->e[i]->last_use > prev_pool->last_use))
            prev_pool = c->e[i];
    }
    if (same != NULL) {
        attn_plan_decide(&same->key, &x->key, dec);
        c->st.hits++;
    } else if (prev_pool != NULL) {
        /* seed 0x07F: a frozen field changed against the pool's last plan */
        attn_plan_decide(&prev_pool->key, &x->key, dec);
        c->st.replans++;
    } else {
        attn_plan_decide(NULL, &x->key, dec);
        c->st.misses++;
    }
    /* a plan larger than the whole bound evicts nothing */
    while (bytes <= c->max_bytes && (c->n >= c->capacity || c->bytes + bytes > c->max_bytes) &&
           evict_one(c)) {
    }
    if (bytes > c->max_bytes - c->bytes) {
        /* larger than the whole bound, or plans in use hold the rest */
        rc = bytes > c->max_bytes ? ATTN_E_TOO_LARGE : ATTN_E_BUSY;
        c->st.refused++;
        pthread_mutex_unlock(&c->lock);
        entry_free(c, x);
        return rc;
    }
    if (c->n == c->alloc) {
        entry **grown = realloc(c->e, (size_t)c->alloc * 2 * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&c->lock);
            entry_free(c, x); /* frees obj too: the caller handed it over */
            return ATTN_E_NOMEM;
        }
        c->e = grown;
        c->alloc *= 2;
    }
    c->bytes += bytes;
    x->id = c->next_id++;
    x->last_use = ++c->tick;
    c->e[c->n++] = x;
    *id = x->id;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int attnd_plan_cache_acquire(attnd_plan_cache *c, uint64_t id, void **obj, attn_error_detail *err)
{
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->e[i]->id == id) {
            c->e[i]->refs++;
            c->e[i]->last_use = ++c->tick;
            *obj = c->e[i]->obj;
            pthread_mutex_unlock(&c->lock);
            return 0;
        }
    }
    c->st.stale++;
    pthread_mutex_unlock(&c->lock);
    return attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id", "plan %llu is unknown or was evicted",
                          (unsigned long long)id);
}

void attnd_plan_cache_release(attnd_plan_cache *c, void *obj)
{
    if (obj == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->e[i]->obj == obj) {
            c->e[i]->refs--; /* the cache's own reference keeps it above 0 */
            break;
        }
    }
    /* back under the bound once nobody holds the extra entries */
    while (c->n > c->capacity && evict_one(c)) {
    }
    pthread_mutex_unlock(&c->lock);
}

void attnd_plan_cache_stats_get(attnd_plan_cache *c, attnd_plan_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    out->entries = c->n;
    out->bytes = c->bytes;
    out->max_bytes = c->max_bytes;
    pthread_mutex_unlock(&c->lock);
}
