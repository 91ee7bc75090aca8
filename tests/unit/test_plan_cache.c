/* seed 0x07F: the bounded plan cache — ids, LRU, stale ids, counters, references, threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "planner/plan_cache.h"

static int g_freed[64];

static void free_plan(void *p)
{
    g_freed[*(int *)p]++;
    free(p);
}

static void *new_plan(int tag)
{
    int *p = malloc(sizeof *p);
    *p = tag;
    return p;
}

static void digest(int n, char hex[ATTN_SHA256_HEX])
{
    char s[16];
    snprintf(s, sizeof s, "plan-%d", n);
    assert_int_equal(attn_key_sha256_bytes(s, strlen(s), hex), 0);
}

static void test_hit_miss_and_ids(void **state)
{
    (void)state;
    memset(g_freed, 0, sizeof g_freed);
    attn_plan_cache *c = attn_plan_cache_create(4);
    assert_non_null(c);
    char d1[ATTN_SHA256_HEX], d2[ATTN_SHA256_HEX];
    digest(1, d1);
    digest(2, d2);
    uint64_t id = 0, id1 = 0, id2 = 0;
    void *p = NULL;
    assert_int_equal(attn_plan_cache_lookup(c, d1, &id, &p), 0);
    assert_int_equal(attn_plan_cache_insert(c, d1, new_plan(1), free_plan, false, &id1), 0);
    attn_plan_cache_release(c, id1);
    assert_int_equal(attn_plan_cache_insert(c, d2, new_plan(2), free_plan, true, &id2), 0);
    attn_plan_cache_release(c, id2);
    assert_true(id1 != 0 && id2 != 0 && id1 != id2);
    assert_int_equal(attn_plan_cache_lookup(c, d1, &id, &p), 1);
    assert_int_equal(id, id1);
    assert_int_equal(*(int *)p, 1);
    attn_plan_cache_release(c, id);
    assert_int_equal(attn_plan_cache_get(c, id2, &p, NULL), 0);
    assert_int_equal(*(int *)p, 2);
    attn_plan_cache_release(c, id2);
    attn_plan_cache_stats s = attn_plan_cache_get_stats(c);
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.replans, 1);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(s.entries, 2);
    assert_int_equal(s.capacity, 4);
    attn_plan_cache_destroy(c);
    assert_int_equal(g_freed[1], 1);
    assert_int_equal(g_freed[2], 1);
    assert_null(attn_plan_cache_create(0));
}

static void test_lru_eviction_and_stale_id(void **state)
{
    (void)state;
    memset(g_freed, 0, sizeof g_freed);
    attn_plan_cache *c = attn_plan_cache_create(2);
    char d[4][ATTN_SHA256_HEX];
    uint64_t id[4];
    void *p;
    for (int i = 1; i <= 3; i++)
        digest(i, d[i]);
    assert_int_equal(attn_plan_cache_insert(c, d[1], new_plan(1), free_plan, false, &id[1]), 0);
    attn_plan_cache_release(c, id[1]);
    assert_int_equal(attn_plan_cache_insert(c, d[2], new_plan(2), free_plan, false, &id[2]), 0);
    attn_plan_cache_release(c, id[2]);
    /* touch 1, so 2 is the least recently used */
    assert_int_equal(attn_plan_cache_get(c, id[1], &p, NULL), 0);
    attn_plan_cache_release(c, id[1]);
    assert_int_equal(attn_plan_cache_insert(c, d[3], new_plan(3), free_plan, false, &id[3]), 0);
    attn_plan_cache_release(c, id[3]);
    assert_int_equal(g_freed[2], 1);
    attn_error_detail err;
    assert_int_equal(attn_plan_cache_get(c, id[2], &p, &err), ATTN_E_STALE_PLAN);
    assert_string_equal(err.field, "plan_id");
    assert_int_equal(err.code, ATTN_E_STALE_PLAN);
    assert_int_equal(attn_plan_cache_get(c, 999, &p, &err), ATTN_E_STALE_PLAN);
    assert_int_equal(attn_plan_cache_get(c, id[1], &p, NULL), 0);
    attn_plan_cache_release(c, id[1]);
    assert_int_equal(attn_plan_cache_get_stats(c).evictions, 1);
    /* explicit eviction makes the id stale */
    assert_int_equal(attn_plan_cache_evict(c, id[1]), 0);
    assert_int_equal(attn_plan_cache_evict(c, id[1]), ATTN_E_STALE_PLAN);
    assert_int_equal(g_freed[1], 1);
    /* a digest inserted again replaces the older entry (one plan per projection) */
    uint64_t again;
    assert_int_equal(attn_plan_cache_insert(c, d[3], new_plan(4), free_plan, true, &again), 0);
    attn_plan_cache_release(c, again);
    assert_int_equal(g_freed[3], 1);
    assert_int_equal(attn_plan_cache_get(c, id[3], &p, NULL), ATTN_E_STALE_PLAN);
    assert_int_equal(attn_plan_cache_get_stats(c).entries, 1);
    attn_plan_cache_destroy(c);
    assert_int_equal(g_freed[4], 1);
}

/* An entry evicted while a run holds it stays alive until the release. */
static void test_eviction_while_referenced(void **state)
{
    (void)state;
    memset(g_freed, 0, sizeof g_freed);
    attn_plan_cache *c = attn_plan_cache_create(1);
    char d1[ATTN_SHA256_HEX], d2[ATTN_SHA256_HEX];
    digest(1, d1);
    digest(2, d2);
    uint64_t id1, id2;
    void *held;
    assert_int_equal(attn_plan_cache_insert(c, d1, new_plan(1), free_plan, false, &id1), 0);
    held = NULL;
    assert_int_equal(attn_plan_cache_get(c, id1, &held, NULL), 0); /* second reference */
    attn_plan_cache_release(c, id1);                               /* the insert's */
    assert_int_equal(attn_plan_cache_insert(c, d2, new_plan(2), free_plan, false, &id2), 0);
    attn_plan_cache_release(c, id2);
    assert_int_equal(g_freed[1], 0); /* still referenced */
    assert_int_equal(*(int *)held, 1);
    void *p;
    assert_int_equal(attn_plan_cache_get(c, id1, &p, NULL), ATTN_E_STALE_PLAN);
    attn_plan_cache_release(c, id1);
    assert_int_equal(g_freed[1], 1);
    attn_plan_cache_destroy(c);
    assert_int_equal(g_freed[2], 1);
}

typedef struct worker_arg {
    attn_plan_cache *c;
    int seed;
    uint64_t lookups;
} worker_arg;

static void free_counted(void *p)
{
    free(p);
}

static void *worker(void *argp)
{
    worker_arg *a = argp;
    unsigned s = (unsigned)a->seed;
    for (int i = 0; i < 3000; i++) {
        s = s * 1103515245u + 12345u;
        char d[ATTN_SHA256_HEX];
        char name[16];
        snprintf(name, sizeof name, "k%u", (s >> 16) % 12);
        attn_key_sha256_bytes(name, strlen(name), d);
        uint64_t id;
        void *p;
        a->lookups++;
        if (attn_plan_cache_lookup(a->c, d, &id, &p) == 1) {
            assert_non_null(p);
            attn_plan_cache_release(a->c, id);
        } else if (attn_plan_cache_insert(a->c, d, malloc(8), free_counted, false, &id) == 0) {
            attn_plan_cache_release(a->c, id);
        }
    }
    return NULL;
}

/* Two workers hammer one small cache; counters stay consistent (run under SAN=1 too). */
static void test_threads(void **state)
{
    (void)state;
    attn_plan_cache *c = attn_plan_cache_create(5);
    pthread_t t[2];
    worker_arg a[2] = {{c, 1, 0}, {c, 7, 0}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    attn_plan_cache_stats s = attn_plan_cache_get_stats(c);
    assert_int_equal(s.hits + s.misses, a[0].lookups + a[1].lookups);
    assert_true(s.entries <= 5);
    assert_true(s.evictions > 0);
    attn_plan_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_miss_and_ids),
        cmocka_unit_test(test_lru_eviction_and_stale_id),
        cmocka_unit_test(test_eviction_while_referenced),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
