/* seed 0x09B/D/E/G: per-worker queues and their logical loads on the one
 * ragged workload of 0x09G (4096 + 1024 keys, 8 workers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "planner/schedule.h"
#include "planner/split.h"

static const int64_t g_kv[2] = {4096, 1024};

static void build(const attn_split_params *p, attn_split_plan *plan)
{
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, g_kv, NULL, p, plan, &err), 0);
}

/* Every item in exactly one queue, loads equal to the queue sums. */
static void assert_schedule_sound(const attn_split_plan *plan, const attn_schedule *s)
{
    uint8_t *seen = calloc(plan->num_items + 1, 1);
    assert_non_null(seen);
    assert_int_equal(s->worker_indptr[0], 0);
    assert_int_equal(s->worker_indptr[s->num_workers], plan->num_items);
    for (uint32_t w = 0; w < s->num_workers; w++) {
        int64_t sum = 0;
        assert_true(s->worker_indptr[w] <= s->worker_indptr[w + 1]);
        for (uint32_t k = s->worker_indptr[w]; k < s->worker_indptr[w + 1]; k++) {
            uint32_t i = s->order[k];
            assert_true(i < plan->num_items);
            seen[i]++;
            sum += plan->items[i].kv_end - plan->items[i].kv_begin;
        }
        assert_int_equal(sum, s->load[w]);
    }
    for (uint32_t i = 0; i < plan->num_items; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
}

/* Fixed four-way split: loads [1024 x 4, 256 x 4], max/mean 1.6, eta 0.625. */
static void test_fixed_four_way_09G(void **state)
{
    (void)state;
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 4};
    attn_split_plan plan;
    attn_schedule s;
    attn_error_detail err = {0};
    build(&p, &plan);
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_STATIC, 8, NULL, NULL, &s, &err), 0);
    const int64_t want[8] = {1024, 1024, 1024, 1024, 256, 256, 256, 256};
    for (int w = 0; w < 8; w++)
        assert_int_equal(s.load[w], want[w]);
    assert_int_equal(s.max_load, 1024);
    assert_true(s.mean_load == 640.0);
    assert_true(s.max_over_mean == 1.6);
    assert_true(s.efficiency == 0.625);
    assert_schedule_sound(&plan, &s);
    attn_schedule_free(&s);
    assert_null(s.order);
    attn_split_plan_free(&plan);
}

/* Global equal work: [640 x 8]; worker 6 publishes two output states
 * (256 keys of the long output, 384 of the short). */
static void test_global_equal_work_09G(void **state)
{
    (void)state;
    attn_split_params p = {.policy = ATTN_SPLIT_GLOBAL, .grid_capacity = 8, .units_per_split = 1};
    attn_split_plan plan;
    attn_schedule s;
    attn_error_detail err = {0};
    build(&p, &plan);
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_CONTIGUOUS, 8, NULL, NULL, &s, &err),
                     0);
    for (int w = 0; w < 8; w++)
        assert_int_equal(s.load[w], 640);
    assert_true(s.max_over_mean == 1.0);
    assert_int_equal(s.worker_indptr[7] - s.worker_indptr[6], 2);
    const attn_work_item *a = &plan.items[s.order[s.worker_indptr[6]]];
    const attn_work_item *b = &plan.items[s.order[s.worker_indptr[6] + 1]];
    assert_int_equal(a->req, 0);
    assert_int_equal(a->kv_end - a->kv_begin, 256);
    assert_int_equal(b->req, 1);
    assert_int_equal(b->kv_end - b->kv_begin, 384);
    assert_true(a->slot != b->slot); /* output identity kept apart */
    for (int w = 0; w < 8; w++)
        if (w != 6)
            assert_int_equal(s.worker_indptr[w + 1] - s.worker_indptr[w], 1);
    assert_schedule_sound(&plan, &s);
    attn_schedule_free(&s);
    attn_split_plan_free(&plan);
}

/* Planned chunks [640 x 7, 384, 256] on a least-loaded queue: [640 x 8],
 * with 384 and 256 on the same worker, no chunk crossing an output. */
static void test_least_loaded_09G(void **state)
{
    (void)state;
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED,
                           .fixed_chunk = attn_split_paper_chunk(2, g_kv, NULL, 1, 8)};
    attn_split_plan plan;
    attn_schedule s;
    attn_error_detail err = {0};
    build(&p, &plan);
    assert_int_equal(plan.num_items, 9);
    assert_int_equal(
        attn_schedule_build(&plan, ATTN_SCHEDULE_LEAST_LOADED, 8, NULL, NULL, &s, &err), 0);
    for (int w = 0; w < 8; w++)
        assert_int_equal(s.load[w], 640);
    assert_true(s.max_over_mean == 1.0);
    assert_true(s.efficiency == 1.0);
    /* the seven 640 chunks fill workers 0..6 in item order; worker 7 gets
     * the 384 chunk, then the 256 chunk */
    assert_int_equal(s.worker_indptr[8] - s.worker_indptr[7], 2);
    const attn_work_item *x = &plan.items[s.order[s.worker_indptr[7]]];
    const attn_work_item *y = &plan.items[s.order[s.worker_indptr[7] + 1]];
    assert_int_equal(x->kv_end - x->kv_begin, 384);
    assert_int_equal(y->kv_end - y->kv_begin, 256);
    for (int w = 0; w < 7; w++) {
        assert_int_equal(s.worker_indptr[w + 1] - s.worker_indptr[w], 1);
        assert_int_equal(s.order[s.worker_indptr[w]], w < 6 ? w : 7);
    }
    assert_schedule_sound(&plan, &s);
    attn_schedule_free(&s);

    /* the same plan on the static grid leaves the tail idle: 9 items on 8
     * workers puts 640 + 384 on worker 0 */
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_STATIC, 8, NULL, NULL, &s, &err), 0);
    assert_int_equal(s.load[0], 640 + 384);
    assert_int_equal(s.max_load, 1024);
    attn_schedule_free(&s);
    attn_split_plan_free(&plan);
}

/* cost = alpha * q_len + beta * keys; identity items cost nothing. */
static void test_cost_model_and_identity(void **state)
{
    (void)state;
    const int64_t kv[3] = {30, 0, 10};
    const int64_t q[3] = {100, 1, 1};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_chunk = 10};
    attn_split_plan plan;
    attn_schedule s;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(3, kv, q, &p, &plan, &err), 0);
    assert_int_equal(plan.num_items, 5); /* 3 + identity + 1 */
    attn_cost_model cm = {1, 1};
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_LEAST_LOADED, 2, &cm, q, &s, &err),
                     0);
    /* costs [110, 110, 110, 0, 11]: 110 -> w0, 110 -> w1, 110 -> w0, 11 -> w1, 0 -> w1 */
    assert_int_equal(s.load[0], 220);
    assert_int_equal(s.load[1], 121);
    assert_int_equal(s.max_load, 220);
    attn_schedule_free(&s);
    attn_split_plan_free(&plan);
}

static void test_determinism_and_errors(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    for (int trial = 0; trial < 50; trial++) {
        int64_t kv[6];
        for (int b = 0; b < 6; b++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            kv[b] = (int64_t)((seed >> 33) % 5000);
        }
        attn_split_params p = {.policy = ATTN_SPLIT_FI, .grid_capacity = 40, .units_per_split = 2};
        attn_split_plan plan;
        attn_schedule a, b2;
        attn_error_detail err = {0};
        assert_int_equal(attn_split_plan_build_lengths(6, kv, NULL, &p, &plan, &err), 0);
        for (int k = 0; k < 3; k++) {
            uint32_t workers = 1 + (uint32_t)(trial % 13);
            assert_int_equal(
                attn_schedule_build(&plan, (attn_schedule_kind)k, workers, NULL, NULL, &a, &err),
                0);
            assert_int_equal(
                attn_schedule_build(&plan, (attn_schedule_kind)k, workers, NULL, NULL, &b2, &err),
                0);
            assert_memory_equal(a.order, b2.order, sizeof(uint32_t) * plan.num_items);
            assert_memory_equal(a.load, b2.load, sizeof(int64_t) * workers);
            /* Graham's list-scheduling bound: the greedy queue's maximum is
             * at most the mean plus the largest item */
            if (k == ATTN_SCHEDULE_LEAST_LOADED) {
                int64_t biggest = 0;
                for (uint32_t i = 0; i < plan.num_items; i++)
                    if (plan.items[i].kv_end - plan.items[i].kv_begin > biggest)
                        biggest = plan.items[i].kv_end - plan.items[i].kv_begin;
                assert_true((double)a.max_load <= a.mean_load + (double)biggest);
            }
            assert_schedule_sound(&plan, &a);
            attn_schedule_free(&a);
            attn_schedule_free(&b2);
        }
        attn_split_plan_free(&plan);
    }
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 2};
    attn_split_plan plan;
    attn_schedule s;
    attn_error_detail err = {0};
    build(&p, &plan);
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_STATIC, 0, NULL, NULL, &s, &err),
                     ATTN_E_RANGE);
    assert_string_equal(err.field, "workers");
    attn_cost_model neg = {-1, 1};
    assert_int_equal(attn_schedule_build(&plan, ATTN_SCHEDULE_STATIC, 2, &neg, NULL, &s, &err),
                     ATTN_E_RANGE);
    assert_int_equal(attn_schedule_build(&plan, (attn_schedule_kind)9, 2, NULL, NULL, &s, &err),
                     ATTN_E_POLICY);
    assert_null(s.order);
    assert_string_equal(attn_schedule_kind_label(ATTN_SCHEDULE_LEAST_LOADED), "least_loaded");
    attn_split_plan_free(&plan);
}

/* Queues straight from costs (the prefill planner's units): the same
 * rules as over a split plan, a negative cost refused naming the field. */
static void test_from_costs(void **state)
{
    (void)state;
    /* LPT on 3 workers: 9 -> w0, 7 -> w1, 6 -> w2, 5 -> w2 (11), 4 -> w1
     * (11), 4 -> w0 (13), 0 -> w1 (ties by the lower index: item 5 before 6) */
    const int64_t cost[7] = {4, 9, 6, 7, 5, 4, 0};
    attn_schedule s;
    attn_error_detail err = {0};
    assert_int_equal(attn_schedule_from_costs(cost, 7, ATTN_SCHEDULE_LEAST_LOADED, 3, &s, &err), 0);
    const uint32_t want_indptr[4] = {0, 2, 5, 7};
    const uint32_t want_order[7] = {1, 5, 3, 0, 6, 2, 4};
    assert_memory_equal(s.worker_indptr, want_indptr, sizeof want_indptr);
    assert_memory_equal(s.order, want_order, sizeof want_order);
    assert_int_equal(s.load[0], 13);
    assert_int_equal(s.load[1], 11);
    assert_int_equal(s.load[2], 11);
    assert_int_equal(s.max_load, 13);
    assert_true(s.max_over_mean == 13.0 / (35.0 / 3.0));
    attn_schedule_free(&s);
    const int64_t bad[2] = {3, -1};
    assert_int_equal(attn_schedule_from_costs(bad, 2, ATTN_SCHEDULE_LEAST_LOADED, 2, &s, &err),
                     ATTN_E_RANGE);
    assert_string_equal(err.field, "cost");
    assert_null(s.order);
    /* no items: empty queues, no load */
    assert_int_equal(attn_schedule_from_costs(NULL, 0, ATTN_SCHEDULE_LEAST_LOADED, 4, &s, &err), 0);
    assert_int_equal(s.worker_indptr[4], 0);
    assert_int_equal(s.max_load, 0);
    attn_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_four_way_09G),
        cmocka_unit_test(test_global_equal_work_09G),
        cmocka_unit_test(test_least_loaded_09G),
        cmocka_unit_test(test_cost_model_and_identity),
        cmocka_unit_test(test_determinism_and_errors),
        cmocka_unit_test(test_from_costs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
