/* seed 0x03B/C/G, 0x09D/G, 0x0AB, 0x0AD: split plans, their worked numbers
 * and their coverage properties on random ragged batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "planner/split.h"

static int64_t item_len(const attn_work_item *it)
{
    return it->kv_end - it->kv_begin;
}

/* Lengths of the slots of request b in slot order. */
static void slot_lengths(const attn_split_plan *p, uint32_t b, int64_t *out)
{
    for (uint32_t i = 0; i < p->num_items; i++)
        if (p->items[i].req == b)
            out[p->items[i].slot - p->slot_indptr[b]] = item_len(&p->items[i]);
}

/* seed 0x03B: T = 3587, S = 8 -> q = 448, r = 3 */
static void test_balanced_bounds_03B(void **state)
{
    (void)state;
    const int64_t want[8] = {449, 449, 449, 448, 448, 448, 448, 448};
    int64_t begin, end, prev = 0;
    for (uint32_t s = 0; s < 8; s++) {
        attn_split_bounds_balanced(3587, 8, s, &begin, &end);
        assert_int_equal(begin, prev);
        assert_int_equal(end - begin, want[s]);
        prev = end;
    }
    assert_int_equal(prev, 3587);
    attn_split_bounds_balanced(4096, 8, 7, &begin, &end);
    assert_int_equal(begin, 3584);
    assert_int_equal(end, 4096);
}

/* seed 0x03A/B/C: the main ragged GQA fixture through the plan builder. */
static void test_main_fixture_plan_03C(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 3587};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 8};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_requests, 2);
    assert_int_equal(plan.num_splits[0], 8);
    assert_int_equal(plan.num_splits[1], 8);
    assert_int_equal(plan.slot_indptr[1], 8);
    assert_int_equal(plan.num_slots, 16);
    assert_int_equal(plan.slot_capacity, 16);
    assert_int_equal(plan.policy, ATTN_SPLIT_FIXED);
    int64_t len[8];
    slot_lengths(&plan, 0, len);
    for (int s = 0; s < 8; s++)
        assert_int_equal(len[s], 512);
    slot_lengths(&plan, 1, len);
    const int64_t want1[8] = {449, 449, 449, 448, 448, 448, 448, 448};
    for (int s = 0; s < 8; s++)
        assert_int_equal(len[s], want1[s]);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);

    attn_owner_counts oc;
    attn_split_owner_counts(&plan, NULL, 8, &oc);
    assert_int_equal(oc.producer, 128); /* [2, 8, 8] */
    assert_int_equal(oc.reducer, 16);   /* [2, 8] */
    assert_int_equal(oc.merges, 112);   /* 16 * (8 - 1) */
    assert_int_equal(oc.active, 128);
    assert_int_equal(oc.identity, 0);
    attn_split_plan_free(&plan);
    assert_null(plan.items);
}

/* seed 0x03G fixed-capacity fixture: T = [3, 0], S = 5, S_capacity = 8. */
static void test_capacity_envelope_03G(void **state)
{
    (void)state;
    const int64_t kv[2] = {3, 0};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 5, .graph_splits = 8};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_slots, 16);
    assert_int_equal(plan.num_items, 16);
    assert_int_equal(plan.num_splits[0], 8);
    assert_int_equal(plan.num_splits[1], 8);
    int64_t len[8];
    const int64_t want0[8] = {1, 1, 1, 0, 0, 0, 0, 0};
    slot_lengths(&plan, 0, len);
    for (int s = 0; s < 8; s++)
        assert_int_equal(len[s], want0[s]);
    slot_lengths(&plan, 1, len);
    for (int s = 0; s < 8; s++)
        assert_int_equal(len[s], 0);
    /* every slot the reducer consumes has exactly one writer */
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_owner_counts oc;
    attn_split_owner_counts(&plan, NULL, 4, &oc);
    assert_int_equal(oc.producer, 64);
    assert_int_equal(oc.active, 12);
    assert_int_equal(oc.identity, 52);
    assert_int_equal(oc.reducer, 8);
    attn_split_plan_free(&plan);
}

static void test_capacity_errors(void **state)
{
    (void)state;
    const int64_t kv[2] = {100, 7};
    attn_split_plan plan;
    attn_error_detail err = {0};
    /* graph envelope below the active splits of one request */
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 9, .graph_splits = 8};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), ATTN_E_CAPACITY);
    assert_string_equal(err.field, "graph_splits");
    assert_null(plan.items);
    /* workspace slot capacity below the slots the plan needs: 4 + 4 > 7 */
    attn_split_params q = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 4, .slot_capacity = 7};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &q, &plan, &err), ATTN_E_CAPACITY);
    assert_string_equal(err.field, "slot_capacity");
    q.slot_capacity = 8;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &q, &plan, &err), 0);
    assert_int_equal(plan.slot_capacity, 8);
    attn_split_plan_free(&plan);
}

static void test_invalid_params(void **state)
{
    (void)state;
    const int64_t kv[2] = {100, 7};
    const int64_t bad[2] = {100, -1};
    attn_split_plan plan;
    attn_error_detail err = {0};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), ATTN_E_SPLIT);
    assert_string_equal(err.field, "policy.splits");
    assert_string_equal(attn_err_name(err.code), "E_SPLIT");

    p.fixed_splits = 2;
    p.fixed_chunk = 10;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), ATTN_E_SPLIT);

    attn_split_params fa = {.policy = ATTN_SPLIT_FA};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &fa, &plan, &err), ATTN_E_SPLIT);
    assert_string_equal(err.field, "grid_capacity");

    attn_split_params au = {.policy = ATTN_SPLIT_AUTO};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &au, &plan, &err), ATTN_E_POLICY);
    attn_split_params unk = {.policy = (attn_split_policy)42};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &unk, &plan, &err), ATTN_E_POLICY);

    attn_split_params mm = {
        .policy = ATTN_SPLIT_FI, .grid_capacity = 8, .min_chunk = 10, .max_chunk = 5};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &mm, &plan, &err), ATTN_E_SPLIT);
    assert_string_equal(err.field, "min_chunk");

    attn_split_params ok = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 2};
    assert_int_equal(attn_split_plan_build_lengths(2, bad, NULL, &ok, &plan, &err), ATTN_E_RANGE);
    assert_string_equal(err.field, "requests[1]");
    assert_int_equal(attn_split_plan_build_lengths(0, kv, NULL, &ok, &plan, &err),
                     ATTN_E_EMPTY_BATCH);
    /* chunk 1 over 2^40 keys is a configuration error, not 2^40 items */
    const int64_t huge[1] = {(int64_t)1 << 40};
    attn_split_params tiny = {.policy = ATTN_SPLIT_FIXED, .fixed_chunk = 1};
    assert_int_equal(attn_split_plan_build_lengths(1, huge, NULL, &tiny, &plan, &err),
                     ATTN_E_TOO_LARGE);
    const int64_t sum_over[2] = {INT64_MAX, 1};
    attn_split_params gl = {.policy = ATTN_SPLIT_GLOBAL, .grid_capacity = 4};
    assert_int_equal(attn_split_plan_build_lengths(2, sum_over, NULL, &gl, &plan, &err),
                     ATTN_E_TOO_LARGE);
    assert_null(plan.items);
}

static void test_auto_resolution(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 1024};
    attn_split_plan plan;
    attn_error_detail err = {0};
    attn_split_params p = {.policy = ATTN_SPLIT_AUTO,
                           .default_policy = ATTN_SPLIT_FI,
                           .grid_capacity = 8,
                           .units_per_split = 1};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.policy, ATTN_SPLIT_FI);
    attn_split_plan_free(&plan);
    p.fixed_splits = 3; /* an explicit count beats the engine default */
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.policy, ATTN_SPLIT_FIXED);
    assert_int_equal(plan.num_splits[0], 3);
    attn_split_plan_free(&plan);
}

/* seed 0x0AB, numbers derived by hand from w(s) = G s / N_SM and
 * eta(s) = w / ceil(w). */
static void test_fa_heuristic_0AB(void **state)
{
    (void)state;
    /* G = 16, N_SM = 132, N_K = 64: best eta = 128/132 (s = 8, 16, 32, 64;
     * s = 33 would reach 1.0 but ceil(64/33) == ceil(64/32) makes it
     * ineligible); the smallest s with eta >= 0.85 best is 7 (112/132). */
    assert_int_equal(attn_split_fa_heuristic(16, 132, 64, 128), 7);
    /* G = 105 < 0.8 * 132: s = 5 gives 525/528, s = 1..4 give 0.795 */
    assert_int_equal(attn_split_fa_heuristic(105, 132, 64, 128), 5);
    /* G = 106 >= 105.6 fills 80% of the SMs: no split */
    assert_int_equal(attn_split_fa_heuristic(106, 132, 64, 128), 1);
    /* G = 33, N_K = 5: s = 4 (eta 1.0) is ineligible (ceil(5/4) == ceil(5/3)),
     * so the best is s = 3 (0.75) and the first within 85% is 3 */
    assert_int_equal(attn_split_fa_heuristic(33, 132, 5, 128), 3);
    /* capped by the K/V block count and by max_splits */
    assert_int_equal(attn_split_fa_heuristic(1, 132, 3, 128), 3);
    assert_int_equal(attn_split_fa_heuristic(1, 132, 64, 2), 2);
    assert_int_equal(attn_split_fa_heuristic(1, 0, 64, 128), 1);
}

static void test_fa_plan(void **state)
{
    (void)state;
    /* main fixture, one block per (request, query head): G = 16 -> S = 7 */
    const int64_t kv[2] = {4096, 3587};
    attn_split_params p = {
        .policy = ATTN_SPLIT_FA, .grid_capacity = 132, .units_per_split = 8, .kv_block = 64};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 7);
    assert_int_equal(plan.num_splits[1], 7);
    int64_t len[7];
    slot_lengths(&plan, 0, len);
    assert_int_equal(len[0], 586); /* 4096 = 7 * 585 + 1 */
    assert_int_equal(len[6], 585);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_split_plan_free(&plan);
    /* min_chunk 1024 allows at most 4 and 3 splits */
    p.min_chunk = 1024;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 4);
    assert_int_equal(plan.num_splits[1], 3);
    attn_split_plan_free(&plan);
}

/* seed 0x0AD: ceil(4096/c) + ceil(1024/c) <= 8 first holds at c = 683
 * (6 + 2); at 682 it is 7 + 2. */
static void test_fi_binary_search_0AD(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 1024};
    uint64_t chunks = 0;
    assert_int_equal(attn_split_fi_search(2, kv, 1, 8, 1, &chunks), 683);
    assert_int_equal(chunks, 8);
    /* pages of 16: [256, 64] pages, 43 pages -> 6 + 2 chunks, 42 -> 7 + 2 */
    const int64_t pages[2] = {256, 64};
    assert_int_equal(attn_split_fi_search(2, pages, 1, 8, 1, &chunks), 43);
    /* a minimum chunk above the answer wins */
    assert_int_equal(attn_split_fi_search(2, kv, 1, 8, 1000, &chunks), 1000);
    assert_int_equal(chunks, 7); /* 5 + 2 */

    attn_split_params p = {.policy = ATTN_SPLIT_FI, .grid_capacity = 8, .units_per_split = 1};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.chunk, 683);
    assert_int_equal(plan.num_splits[0], 6);
    assert_int_equal(plan.num_splits[1], 2);
    int64_t len[6];
    slot_lengths(&plan, 0, len);
    assert_int_equal(len[5], 4096 - 5 * 683);
    slot_lengths(&plan, 1, len);
    assert_int_equal(len[1], 1024 - 683);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_split_plan_free(&plan);

    p.kv_block = 16; /* page granularity: 43 pages = 688 keys */
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.chunk, 688);
    assert_int_equal(plan.num_splits[0], 6);
    attn_split_plan_free(&plan);

    /* units x B already fills the grid: unsplit (seed 0x0AD) */
    p.kv_block = 0;
    p.units_per_split = 4;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 1);
    assert_int_equal(plan.num_splits[1], 1);
    attn_split_plan_free(&plan);

    /* with H_kv = 2 units per chunk a 16-wide grid holds 8 chunks again */
    p.units_per_split = 2;
    p.grid_capacity = 16;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.chunk, 683);
    attn_split_plan_free(&plan);

    /* max_chunk caps the searched width */
    p.max_chunk = 500;
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.chunk, 500);
    assert_int_equal(plan.num_splits[0], 9);
    assert_int_equal(plan.num_splits[1], 3);
    attn_split_plan_free(&plan);
}

/* seed 0x09E/G: the paper's integer chunk limit is 640. */
static void test_paper_chunk_09G(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 1024};
    assert_int_equal(attn_split_paper_chunk(2, kv, NULL, 1, 8), 640);
    /* two query tiles for the first request double its work: 9216 / 8 */
    const int64_t q[2] = {128, 1};
    assert_int_equal(attn_split_paper_chunk(2, kv, q, 64, 8), 1152);

    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_chunk = 640};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.chunk, 640);
    assert_int_equal(plan.num_splits[0], 7);
    assert_int_equal(plan.num_splits[1], 2);
    int64_t len[7];
    slot_lengths(&plan, 0, len);
    assert_int_equal(len[6], 256);
    slot_lengths(&plan, 1, len);
    assert_int_equal(len[1], 384);
    attn_split_plan_free(&plan);
}

/* seed 0x09D/G: global equal work [640 x 8]; worker 6 owns 256 keys of the
 * long output and 384 of the short one, as two separate slots. */
static void test_global_partition_09G(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 1024};
    attn_split_params p = {.policy = ATTN_SPLIT_GLOBAL, .grid_capacity = 8, .units_per_split = 1};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.policy, ATTN_SPLIT_GLOBAL);
    assert_int_equal(plan.num_splits[0], 7);
    assert_int_equal(plan.num_splits[1], 2);
    assert_int_equal(plan.num_items, 9);
    /* items 6 and 7 are the two fragments of worker 6 */
    assert_int_equal(plan.items[6].req, 0);
    assert_int_equal(plan.items[6].kv_begin, 3840);
    assert_int_equal(plan.items[6].kv_end, 4096);
    assert_int_equal(plan.items[7].req, 1);
    assert_int_equal(plan.items[7].kv_begin, 0);
    assert_int_equal(plan.items[7].kv_end, 384);
    assert_int_equal(plan.items[8].kv_end, 1024);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_split_plan_free(&plan);

    /* fewer keys than workers: one fragment per key, no empty split */
    const int64_t small[3] = {2, 0, 1};
    assert_int_equal(attn_split_plan_build_lengths(3, small, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 2);
    assert_int_equal(plan.num_splits[1], 1); /* identity slot */
    assert_int_equal(plan.items[2].kv_begin, plan.items[2].kv_end);
    assert_int_equal(plan.num_splits[2], 1);
    assert_int_equal(attn_split_plan_check(&plan, small, &err), 0);
    attn_split_plan_free(&plan);
}

/* The manifest entry point: L_b = T_b + C_b. */
static void test_manifest_entry(void **state)
{
    (void)state;
    attn_request_desc reqs[3] = {{"a", 4095, 1}, {"b", 0, 17}, {"c", 100, 5}};
    attn_manifest m;
    memset(&m, 0, sizeof(m));
    m.num_qo_heads = 8;
    m.num_requests = 3;
    m.requests = reqs;
    m.policy.split_policy = ATTN_SPLIT_FIXED;
    m.policy.splits = 4;
    m.policy.graph = true;
    attn_split_params p;
    memset(&p, 0, sizeof(p));
    attn_split_params_from_manifest(&m, 2, &p);
    assert_int_equal(p.policy, ATTN_SPLIT_FIXED);
    assert_int_equal(p.fixed_splits, 4);
    assert_int_equal(p.units_per_split, 2);
    assert_int_equal(p.graph_splits, 4);
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build(&m, &p, &plan, &err), 0);
    const int64_t kv[3] = {4096, 17, 105};
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    assert_int_equal(plan.items[3].kv_end, 4096);
    attn_split_plan_free(&plan);

    reqs[2].new_len = -1;
    assert_int_equal(attn_split_plan_build(&m, &p, &plan, &err), ATTN_E_RANGE);
    assert_string_equal(err.field, "requests[2].new_len");
    m.num_requests = 0;
    assert_int_equal(attn_split_plan_build(&m, &p, &plan, &err), ATTN_E_EMPTY_BATCH);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Independent coverage oracle: a per-key owner count, not the plan checker. */
static void assert_exact_cover(const attn_split_plan *plan, const int64_t *kv, uint32_t nb,
                               bool graph)
{
    for (uint32_t b = 0; b < nb; b++) {
        uint8_t *seen = calloc((size_t)kv[b] + 1, 1);
        assert_non_null(seen);
        uint32_t slots = 0;
        for (uint32_t i = 0; i < plan->num_items; i++) {
            const attn_work_item *it = &plan->items[i];
            if (it->req != b)
                continue;
            slots++;
            assert_true(it->slot >= plan->slot_indptr[b] && it->slot < plan->slot_indptr[b + 1]);
            if (it->kv_begin == it->kv_end) {
                /* identity only where a reducer needs a slot without keys */
                assert_true(graph || kv[b] == 0);
                continue;
            }
            assert_true(it->kv_begin >= 0 && it->kv_end <= kv[b] && it->kv_begin < it->kv_end);
            for (int64_t k = it->kv_begin; k < it->kv_end; k++)
                seen[k]++;
        }
        assert_int_equal(slots, plan->num_splits[b]);
        for (int64_t k = 0; k < kv[b]; k++)
            assert_int_equal(seen[k], 1);
        free(seen);
    }
}

/* The wave makespan is greedy list scheduling in plan order: 4 x 100 keys
 * on 3 slots is two waves; chunks of 50 give 8 producers, three waves. */
static void test_wave_makespan(void **state)
{
    (void)state;
    const int64_t kv[4] = {100, 100, 100, 100};
    assert_int_equal(attn_split_wave_makespan(4, kv, 100, 1, 2, 0), 200);
    assert_int_equal(attn_split_wave_makespan(4, kv, 100, 1, 3, 0), 200);
    assert_int_equal(attn_split_wave_makespan(4, kv, 50, 1, 3, 0), 150);
    assert_int_equal(attn_split_wave_makespan(4, kv, 100, 1, 2, 10), 220);
    /* units multiply the producers: 8 of 100 keys on 4 slots */
    assert_int_equal(attn_split_wave_makespan(4, kv, 100, 2, 4, 0), 200);
    /* ragged: 300 then 100 + 100 + 100 on two slots finish together */
    const int64_t rg[4] = {300, 100, 100, 100};
    assert_int_equal(attn_split_wave_makespan(4, rg, 300, 1, 2, 0), 300);
    /* an empty request still occupies one producer (its identity slot) */
    const int64_t em[2] = {0, 100};
    assert_int_equal(attn_split_wave_makespan(2, em, 100, 1, 1, 5), 110);
    assert_int_equal(attn_split_wave_makespan(0, kv, 100, 1, 2, 0), -1);
    assert_int_equal(attn_split_wave_makespan(4, kv, 0, 1, 2, 0), -1);
    assert_int_equal(attn_split_wave_makespan(4, kv, 100, 1, 0, 0), -1);
    const int64_t big[1] = {(int64_t)ATTN_SPLIT_WAVE_CTAS + 1};
    assert_int_equal(attn_split_wave_makespan(1, big, 1, 1, 8, 0), -1);
}

/* FI with the engine's cap on a request's chunks (fi_max_splits): the
 * H200 decode shape B1_T32768 (grid 264, H_kv 8 units, pages of 16) is
 * searched into 33 chunks of 63 pages; capped at 32, 32 chunks of 64 pages
 * (1024 keys); a shorter request beside it keeps the same chunk width; a
 * min_chunk above the cap's bound wins; 0 leaves the search alone. */
static void test_fi_max_splits(void **state)
{
    (void)state;
    const int64_t kv[2] = {32768, 4096};
    attn_split_params p = {.policy = ATTN_SPLIT_FI,
                           .grid_capacity = 264,
                           .units_per_split = 8,
                           .kv_block = 16,
                           .min_chunk = 256};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(1, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 33);
    attn_split_plan_free(&plan);
    p.fi_max_splits = 32;
    assert_int_equal(attn_split_plan_build_lengths(1, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 32);
    int64_t len[32];
    slot_lengths(&plan, 0, len);
    assert_int_equal(len[0], 1024);
    assert_int_equal(len[31], 1024);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_split_plan_free(&plan);
    /* two requests: the search alone gives 31 + 4 <= 33 chunks at 66 pages;
     * the cap's bound (64 pages) is below it, so the search's width stays */
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_true(plan.num_splits[0] <= 32);
    assert_true((plan.num_splits[0] + plan.num_splits[1]) * 8 <= 264);
    attn_split_plan_free(&plan);
    /* min_chunk 4096 keys (256 pages) is above the cap's 64 pages: 8 chunks */
    p.min_chunk = 4096;
    assert_int_equal(attn_split_plan_build_lengths(1, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 8);
    attn_split_plan_free(&plan);
    /* d 64, H_kv 4 on a grid of 528: 128 chunks of 256 keys uncapped, 32 capped */
    p.min_chunk = 256;
    p.grid_capacity = 528;
    p.units_per_split = 4;
    p.fi_max_splits = 0;
    assert_int_equal(attn_split_plan_build_lengths(1, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 128);
    attn_split_plan_free(&plan);
    p.fi_max_splits = 32;
    assert_int_equal(attn_split_plan_build_lengths(1, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_splits[0], 32);
    attn_split_plan_free(&plan);
}

/* The FI wave model on the H200 benchmark shape B 128, T 8192, page 16,
 * H_kv 8: 1024 producers are 2.59 waves of 396 slots, three chunks per
 * request make 3072 = 7.76 waves (shorter); on 264 slots (3.88 waves)
 * no split wins, and with the model off the plan stays unsplit. */
static void test_fi_wave_model(void **state)
{
    (void)state;
    int64_t kv[128];
    for (int b = 0; b < 128; b++)
        kv[b] = 8192;
    attn_split_params p = {.policy = ATTN_SPLIT_FI,
                           .grid_capacity = 396,
                           .units_per_split = 8,
                           .kv_block = 16,
                           .min_chunk = 256,
                           .wave_model = 1,
                           .wave_item_keys = ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA,
                           .wave_merge_keys = ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(128, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_items, 3 * 128);
    assert_int_equal(plan.chunk, 171 * 16); /* ceil(512 pages / 3), page-aligned */
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    attn_split_plan_free(&plan);
    p.grid_capacity = 264;
    assert_int_equal(attn_split_plan_build_lengths(128, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_items, 128);
    attn_split_plan_free(&plan);
    p.grid_capacity = 396;
    p.wave_model = 0;
    assert_int_equal(attn_split_plan_build_lengths(128, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_items, 128);
    attn_split_plan_free(&plan);
    /* ragged 64 x [256, 16384]: the long requests are the tail; the model
     * splits, and the plan still covers every key exactly once */
    uint64_t seed = 13;
    int64_t rg[64];
    for (int b = 0; b < 64; b++)
        rg[b] = 256 + (int64_t)(lcg(&seed) % 16129);
    p.wave_model = 1;
    p.grid_capacity = 264;
    assert_int_equal(attn_split_plan_build_lengths(64, rg, NULL, &p, &plan, &err), 0);
    assert_true(plan.num_items > 64);
    assert_int_equal(attn_split_plan_check(&plan, rg, &err), 0);
    assert_exact_cover(&plan, rg, 64, false);
    attn_split_plan_free(&plan);
}

/* A serving step's decode rows: 263 requests of at most 512 keys and two
 * behind 51 K and 59 K, one K/V head, 264 slots.  Four chunks (the wave
 * model's cap) left each long one's 14.7 K-key chunks as the plan's end,
 * ~19x the fluid bound; past the cap the long requests are cut into up to
 * 32 (1840-key chunks) and the modelled end falls to under 3x the bound.  A uniform batch
 * the bound does not flag keeps its plan. */
static void test_fi_wave_tail(void **state)
{
    (void)state;
    int64_t kv[265];
    uint64_t seed = 29;
    for (int b = 0; b < 265; b++)
        kv[b] = 1 + (int64_t)(lcg(&seed) % 512);
    kv[10] = 58846;
    kv[200] = 51426;
    attn_split_params p = {.policy = ATTN_SPLIT_FI,
                           .grid_capacity = 264,
                           .units_per_split = 1,
                           .kv_block = 16,
                           .min_chunk = 256,
                           .fi_max_splits = 32,
                           .wave_model = 1,
                           .wave_item_keys = ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA,
                           .wave_merge_keys = ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(265, kv, NULL, &p, &plan, &err), 0);
    double fluid = 0;
    for (int b = 0; b < 265; b++)
        fluid += (double)(kv[b] + ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA) / 264.0;
    const int64_t span =
        attn_split_wave_makespan(265, kv, plan.chunk, 1, 264, ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA);
    const int64_t four = attn_split_wave_makespan(265, kv, ((58846 / 16 + 3) / 4) * 16, 1, 264,
                                                  ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA);
    printf("  chunk %lld keys: modelled end %lld keys (4 chunks: %lld), fluid bound %.0f\n",
           (long long)plan.chunk, (long long)span, (long long)four, fluid);
    assert_true(plan.chunk <= 58846 / 8);
    assert_true(span * 5 < four && (double)span < 3.0 * fluid);
    assert_true((58846 + plan.chunk - 1) / plan.chunk <= 32);
    assert_int_equal(attn_split_plan_check(&plan, kv, &err), 0);
    assert_exact_cover(&plan, kv, 265, false);
    attn_split_plan_free(&plan);
    /* a full uniform grid: not flagged, unsplit as before */
    int64_t u[128];
    for (int b = 0; b < 128; b++)
        u[b] = 8192;
    p.units_per_split = 8;
    assert_int_equal(attn_split_plan_build_lengths(128, u, NULL, &p, &plan, &err), 0);
    assert_int_equal(plan.num_items, 128);
    attn_split_plan_free(&plan);
}

static void test_random_ragged_properties(void **state)
{
    (void)state;
    uint64_t seed = 0x6f438b6dcea39b03ull;
    const attn_split_policy pols[5] = {ATTN_SPLIT_FA, ATTN_SPLIT_FI, ATTN_SPLIT_GLOBAL,
                                       ATTN_SPLIT_FIXED, ATTN_SPLIT_FIXED};
    for (int trial = 0; trial < 300; trial++) {
        uint32_t nb = 1 + (uint32_t)(lcg(&seed) % 9);
        int64_t kv[9], q[9];
        for (uint32_t b = 0; b < nb; b++) {
            uint64_t r = lcg(&seed) % 10;
            kv[b] = r == 0 ? 0 : (int64_t)(lcg(&seed) % (r < 5 ? 40 : 3000));
            q[b] = 1 + (int64_t)(lcg(&seed) % 4);
        }
        for (int pi = 0; pi < 5; pi++) {
            attn_split_params p;
            memset(&p, 0, sizeof(p));
            p.policy = pols[pi];
            p.grid_capacity = 1 + (uint32_t)(lcg(&seed) % 200);
            p.units_per_split = 1 + (uint32_t)(lcg(&seed) % 4);
            p.kv_block = (uint32_t)(lcg(&seed) % 33);
            p.q_tile = (uint32_t)(lcg(&seed) % 3);
            if (pi == 3)
                p.fixed_splits = 1 + (uint32_t)(lcg(&seed) % 12);
            if (pi == 4)
                p.fixed_chunk = 1 + (int64_t)(lcg(&seed) % 700);
            bool graph = lcg(&seed) % 3 == 0;
            if (graph)
                p.graph_splits = 200;
            if (pi == 1 && lcg(&seed) % 2) { /* FI with the wave model */
                p.wave_model = 1;
                p.wave_item_keys = (int64_t)(lcg(&seed) % 200);
                p.wave_merge_keys = (int64_t)(lcg(&seed) % 400);
            }
            attn_split_plan a, b2;
            attn_error_detail err = {0};
            int rv = attn_split_plan_build_lengths(nb, kv, q, &p, &a, &err);
            if (rv == ATTN_E_CAPACITY) {
                assert_true(graph);
                continue;
            }
            assert_int_equal(rv, 0);
            assert_int_equal(a.policy, pols[pi]);
            assert_int_equal(attn_split_plan_check(&a, kv, &err), 0);
            assert_exact_cover(&a, kv, nb, graph);
            /* determinism: same inputs, same plan, byte for byte */
            assert_int_equal(attn_split_plan_build_lengths(nb, kv, q, &p, &b2, &err), 0);
            assert_int_equal(a.num_items, b2.num_items);
            assert_memory_equal(a.items, b2.items, sizeof(attn_work_item) * a.num_items);
            assert_memory_equal(a.slot_indptr, b2.slot_indptr, sizeof(uint32_t) * (nb + 1));
            attn_split_plan_free(&a);
            attn_split_plan_free(&b2);
        }
    }
}

/* The checker itself must catch overlap, gaps and double writers. */
static void test_check_rejects(void **state)
{
    (void)state;
    const int64_t kv[1] = {10};
    uint32_t ns[1] = {2};
    uint32_t ind[2] = {0, 2};
    attn_work_item items[2] = {{0, 0, 0, 6}, {0, 1, 5, 10}};
    attn_split_plan p = {.num_requests = 1,
                         .num_splits = ns,
                         .slot_indptr = ind,
                         .num_slots = 2,
                         .slot_capacity = 2,
                         .items = items,
                         .num_items = 2};
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_check(&p, kv, &err), ATTN_E_SPLIT); /* overlap */
    assert_string_equal(err.field, "slots[1]");
    items[0].kv_end = 4;
    assert_int_equal(attn_split_plan_check(&p, kv, &err), ATTN_E_SPLIT); /* gap */
    items[0].kv_end = 5;
    assert_int_equal(attn_split_plan_check(&p, kv, &err), 0);
    items[1].kv_end = 9;
    assert_int_equal(attn_split_plan_check(&p, kv, &err), ATTN_E_SPLIT); /* short */
    assert_string_equal(err.field, "requests[0]");
    items[1].kv_end = 10;
    items[1].slot = 0;
    assert_int_equal(attn_split_plan_check(&p, kv, &err), ATTN_E_SPLIT); /* two writers */
    assert_string_equal(err.field, "items[1]");
    items[1].slot = 1;
    p.slot_capacity = 1;
    assert_int_equal(attn_split_plan_check(&p, kv, &err), ATTN_E_CAPACITY);
}

static void test_plan_json(void **state)
{
    (void)state;
    const int64_t kv[2] = {3, 0};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 2};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    char buf[512];
    size_t n = attn_split_plan_json(&plan, 2, buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "{\"policy\":\"fixed\",\"chunk\":0,\"num_requests\":2,\"num_slots\":3,"
                             "\"slot_capacity\":3,\"num_splits\":[2,1],\"num_items\":3,"
                             "\"items\":[[0,0,0,2],[0,1,2,3]],\"items_omitted\":1}");
    /* a short buffer gets a terminated prefix and the needed length */
    char small[8];
    assert_int_equal(attn_split_plan_json(&plan, 2, small, sizeof(small)), n);
    assert_int_equal(strlen(small), 7);
    assert_int_equal(attn_split_plan_json(&plan, 2, NULL, 0), n);
    attn_split_plan_free(&plan);
    assert_string_equal(attn_split_policy_name(ATTN_SPLIT_GLOBAL), "global");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_bounds_03B),
        cmocka_unit_test(test_main_fixture_plan_03C),
        cmocka_unit_test(test_capacity_envelope_03G),
        cmocka_unit_test(test_capacity_errors),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_auto_resolution),
        cmocka_unit_test(test_fa_heuristic_0AB),
        cmocka_unit_test(test_fa_plan),
        cmocka_unit_test(test_fi_binary_search_0AD),
        cmocka_unit_test(test_paper_chunk_09G),
        cmocka_unit_test(test_global_partition_09G),
        cmocka_unit_test(test_manifest_entry),
        cmocka_unit_test(test_wave_makespan),
        cmocka_unit_test(test_fi_wave_model),
        cmocka_unit_test(test_fi_wave_tail),
        cmocka_unit_test(test_fi_max_splits),
        cmocka_unit_test(test_random_ragged_properties),
        cmocka_unit_test(test_check_rejects),
        cmocka_unit_test(test_plan_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
