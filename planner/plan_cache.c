/* Bounded LRU plan cache with ids, references and counters (seed 0x07F). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan_cache.h"

typedef struct pc_entry {
    uint64_t id;
    char digest[ATTN_SHA256_HEX];
    void *plan;
    attn_plan_free_fn free_fn;
    uint32_t refs;
    bool live;                    /* in the LRU list and findable */
    struct pc_entry *prev, *next; /* LRU list (head = most recent) or retired list */
} pc_entry;

struct attn_plan_cache {
    pthread_mutex_t mu;
    uint32_t capacity, count;
    uint64_t next_id;
    pc_entry *head, *tail; /* live entries, most recent first */
    pc_entry *retired;     /* evicted while referenced; freed on last release */
    attn_plan_cache_stats st;
};

attn_plan_cache *attn_plan_cache_create(uint32_t capacity)
{
    if (capacity == 0)
        return NULL;
    attn_plan_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->capacity = capacity;
    c->next_id = 1; /* 0 is never an id, so callers can use it as "none" */
    return c;
}

static void entry_free(pc_entry *e)
{
    if (e->free_fn != NULL)
        e->free_fn(e->plan);
    free(e);
}

void attn_plan_cache_destroy(attn_plan_cache *c)
{
    if (c == NULL)
        return;
    for (pc_entry *e = c->head, *n; e != NULL; e = n) {
        n = e->next;
        entry_free(e);
    }
    for (pc_entry *e = c->retired, *n; e != NULL; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void lru_unlink(attn_plan_cache *c, pc_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(attn_plan_cache *c, pc_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (c->tail == NULL)
        c->tail = e;
}

/* Take `e` out of the live set.  Returns it when the caller must free it
 * (after unlocking), NULL when references keep it on the retired list. */
static pc_entry *retire(attn_plan_cache *c, pc_entry *e)
{
    lru_unlink(c, e);
    e->live = false;
    c->count--;
    if (e->refs == 0)
        return e;
    e->next = c->retired;
    if (c->retired)
        c->retired->prev = e;
    c->retired = e;
    return NULL;
}

static pc_entry *find_live_id(attn_plan_cache *c, uint64_t id)
{
    for (pc_entry *e = c->head; e != NULL; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

int attn_plan_cache_lookup(attn_plan_cache *c, const char digest[ATTN_SHA256_HEX], uint64_t *id,
                           void **plan)
{
    pthread_mutex_lock(&c->mu);
    for (pc_entry *e = c->head; e != NULL; e = e->next) {
        if (strcmp(e->digest, digest) == 0) {
            lru_unlink(c, e);
            lru_push_front(c, e);
            e->refs++;
            *id = e->id;
            *plan = e->plan;
            c->st.hits++;
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
    }
    c->st.misses++;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int attn_plan_cache_insert(attn_plan_cache *c, const char digest[ATTN_SHA256_HEX], void *plan,
                           attn_plan_free_fn free_fn, bool replan, uint64_t *id)
{
    pc_entry *n = calloc(1, sizeof *n);
    if (n == NULL)
        return ATTN_E_NOMEM;
    memcpy(n->digest, digest, ATTN_SHA256_HEX);
    n->digest[ATTN_SHA256_HEX - 1] = '\0';
    n->plan = plan;
    n->free_fn = free_fn;
    n->refs = 1;
    n->live = true;
    pc_entry *to_free[2] = {NULL, NULL};
    pthread_mutex_lock(&c->mu);
    n->id = c->next_id++;
    for (pc_entry *e = c->head; e != NULL; e = e->next) {
        if (strcmp(e->digest, n->digest) == 0) {
            to_free[0] = retire(c, e); /* one entry per digest: the newer plan wins */
            break;
        }
    }
    if (c->count == c->capacity) {
        to_free[1] = retire(c, c->tail);
        c->st.evictions++;
    }
    lru_push_front(c, n);
    c->count++;
    if (replan)
        c->st.replans++;
    *id = n->id;
    pthread_mutex_unlock(&c->mu);
    /* free callbacks run unlocked: they may be slow (device frees) */
    for (int i = 0; i < 2; i++)
        if (to_free[i] != NULL)
            entry_free(to_free[i]);
    return 0;
}

int attn_plan_cache_get(attn_plan_cache *c, uint64_t id, void **plan, attn_error_detail *d)
{
    pthread_mutex_lock(&c->mu);
    pc_entry *e = find_live_id(c, id);
    if (e == NULL) {
        pthread_mutex_unlock(&c->mu);
        return attn_error_set(d, ATTN_E_STALE_PLAN, "plan_id",
                              "plan %llu is unknown or was evicted; send the plan again",
                              (unsigned long long)id);
    }
    lru_unlink(c, e);
    lru_push_front(c, e);
    e->refs++;
    *plan = e->plan;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void attn_plan_cache_release(attn_plan_cache *c, uint64_t id)
{
    pc_entry *to_free = NULL;
    pthread_mutex_lock(&c->mu);
    pc_entry *e = find_live_id(c, id);
    if (e != NULL) {
        if (e->refs > 0)
            e->refs--;
    } else {
        for (e = c->retired; e != NULL; e = e->next) {
            if (e->id != id)
                continue;
            if (--e->refs == 0) {
                if (e->prev)
                    e->prev->next = e->next;
                else
                    c->retired = e->next;
                if (e->next)
                    e->next->prev = e->prev;
                to_free = e;
            }
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (to_free != NULL)
        entry_free(to_free);
}

int attn_plan_cache_evict(attn_plan_cache *c, uint64_t id)
{
    pthread_mutex_lock(&c->mu);
    pc_entry *e = find_live_id(c, id);
    pc_entry *to_free = NULL;
    if (e != NULL) {
        to_free = retire(c, e);
        c->st.evictions++;
    }
    pthread_mutex_unlock(&c->mu);
    if (to_free != NULL)
        entry_free(to_free);
    return e != NULL ? 0 : ATTN_E_STALE_PLAN;
}

attn_plan_cache_stats attn_plan_cache_get_stats(attn_plan_cache *c)
{
    pthread_mutex_lock(&c->mu);
    attn_plan_cache_stats s = c->st;
    s.entries = c->count;
    s.capacity = c->capacity;
    pthread_mutex_unlock(&c->mu);
    return s;
}
