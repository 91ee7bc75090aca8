/* The mixed-batch cost model (planner/mixed_cost.h): the estimates follow
 * the counted work, the pick is the cheaper strategy (ties: unified), a
 * batch partition cannot run is never given to it, and the why names both
 * estimates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "planner/mixed_cost.h"

static const attn_mixed_cost_consts k_unit = {
    .tile_us = 2.0, .launch_us = 5.0, .decode_gbps = 1000.0, .decode_fixed_us = 3.0};

static attn_mixed_cost_in base_in(void)
{
    attn_mixed_cost_in in = {.unified_tiles = 132 * 100,
                             .unified_longest = 10,
                             .prefill_tiles = 132 * 50,
                             .prefill_longest = 10,
                             .decode_kv_bytes = 100000000, /* 100 MB: 100 us at 1000 GB/s */
                             .decode_requests = 64,
                             .num_sms = 132,
                             .head_dim = 128,
                             .tile_n = 128};
    return in;
}

static void test_estimates_follow_the_work(void **state)
{
    (void)state;
    attn_mixed_cost_in in = base_in();
    attn_mixed_cost c;
    attn_mixed_cost_estimate(&in, &k_unit, 1, &c);
    /* unified: 5 + 100 waves x 2 us; partition: 5 + 50 x 2 + 5 + 3 + 100 */
    assert_true(c.unified_us > 204.9 && c.unified_us < 205.1);
    assert_true(c.partition_us > 212.9 && c.partition_us < 213.1);
    assert_int_equal(c.pick, ATTN_SCHED_UNIFIED);
    assert_non_null(strstr(c.why, "unified est. 205 us"));
    assert_non_null(strstr(c.why, "partition 213 us"));
    /* less decode traffic: partition wins */
    in.decode_kv_bytes = 10000000;
    attn_mixed_cost_estimate(&in, &k_unit, 1, &c);
    assert_int_equal(c.pick, ATTN_SCHED_PARTITION);
    assert_non_null(strstr(c.why, "auto: partition est."));
    /* a longest item longer than the waves bounds the launch */
    in.unified_longest = 1000;
    attn_mixed_cost_estimate(&in, &k_unit, 1, &c);
    assert_true(c.unified_us > 2004.9 && c.unified_us < 2005.1);
    /* d = 256 tiles are 128 x 64 x 256: the same work as 128 x 128 x 128 */
    in = base_in();
    in.head_dim = 256;
    in.tile_n = 64;
    attn_mixed_cost e;
    attn_mixed_cost_estimate(&in, &k_unit, 1, &e);
    assert_true(e.unified_us > 204.9 && e.unified_us < 205.1);
}

static void test_partition_not_admitted_and_ties(void **state)
{
    (void)state;
    attn_mixed_cost_in in = base_in();
    in.decode_kv_bytes = 0; /* partition far cheaper ... */
    attn_mixed_cost c;
    attn_mixed_cost_estimate(&in, &k_unit, 0, &c); /* ... but not admitted */
    assert_int_equal(c.pick, ATTN_SCHED_UNIFIED);
    assert_true(c.partition_us < 0);
    assert_non_null(strstr(c.why, "partition not admitted"));
    /* equal estimates: unified (one launch, deterministic choice) */
    attn_mixed_cost_consts k = k_unit;
    k.launch_us = 0;
    k.decode_fixed_us = 0;
    in.unified_tiles = 132 * 10;
    in.prefill_tiles = 132 * 5;
    in.unified_longest = in.prefill_longest = 0;
    /* unified 10 waves x 2 us; partition 5 waves x 2 us + 10 MB at 1000 GB/s */
    in.decode_kv_bytes = 10000000;
    attn_mixed_cost_estimate(&in, &k, 1, &c);
    assert_true(c.unified_us == c.partition_us);
    assert_int_equal(c.pick, ATTN_SCHED_UNIFIED);
    /* the H200 constants exist and are positive */
    const attn_mixed_cost_consts *h = attn_mixed_cost_h200();
    assert_true(h->tile_us > 0 && h->decode_gbps > 0 && h->launch_us >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimates_follow_the_work),
        cmocka_unit_test(test_partition_not_admitted_and_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
