/* The CUDA prefill/append engine's host functions, on any machine (no GPU
 * here): admission names every failing factor (seed 0x07B/0x07D), the
 * host half of the plan (tile plan from a manifest, the tile-class ledger
 * and the partial-state ledger as the diag reports them, key environment,
 * schedule, the checks the validator cannot make), and the choice between
 * cuda_decode and cuda_prefill by phase through the registry with
 * instances that were never initialised (the engines' admit functions are
 * pure host code). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/prefill_engine.h"
#include "planner/diag.h"
#include "planner/engine.h"
#include "planner/registry.h"
#include "planner/diag_encode.h"
#include "planner/split.h"
#include "tests/lib/random_batch.h"

static const attn_cuda_device_facts k_h200 = {
    .device = 0, .cc_major = 9, .cc_minor = 0, .sm_count = 132, .ctas_per_sm = 1, .head_chunks = 1};

/* A batch on a cuda:0 pool with the given (T, C) per request. */
static void make_batch(attn_rb *rb, uint32_t B, const int64_t *T, const int64_t *C,
                       attn_mask_kind mask, uint32_t d, uint64_t seed)
{
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = B;
    sp.max_cache_len = 1;
    for (uint32_t b = 0; b < B; b++)
        sp.max_cache_len = T[b] > sp.max_cache_len ? T[b] : sp.max_cache_len;
    sp.num_qo_heads = 8;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = d;
    sp.page_size = 16;
    sp.spare_pages = 2;
    sp.kv_dtype = ATTN_BF16;
    sp.q_dtype = ATTN_BF16;
    sp.layout = ATTN_NHD;
    sp.format = ATTN_KV_CSR;
    sp.mask_kind = mask;
    assert_int_equal(attn_rb_make_lengths(rb, &sp, T, C, seed), 0);
    snprintf(rb->g.device, sizeof rb->g.device, "cuda:0");
}

static bool has_reason(const attn_admission *a, attn_admit_factor f, const char *field)
{
    for (uint32_t i = 0; i < a->num_reasons; i++)
        if (a->reasons[i].factor == f && (field == NULL || strcmp(a->reasons[i].field, field) == 0))
            return true;
    return false;
}

/* Every phase and every mask kind is admitted on an H200 pool. */
static void test_admits_every_phase_and_mask(void **state)
{
    (void)state;
    const int64_t T[4] = {0, 700, 33, 5000}, C[4] = {300, 1, 7, 64};
    for (int k = 0; k <= ATTN_MASK_DENSE; k++) {
        attn_rb rb;
        make_batch(&rb, 4, T, C, (attn_mask_kind)k, 128, 40 + (uint64_t)k);
        attn_admission a;
        attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
        if (!a.admitted)
            fprintf(stderr, "mask %d: %s\n", k, a.reasons[0].text);
        assert_true(a.admitted);
        assert_int_equal(a.num_reasons, 0);
        attn_rb_free(&rb);
    }
}

/* One call that fails every factor the engine checks gets one reason for
 * each, each head dimension separately (seed 0x07D). */
static void test_admission_names_every_factor(void **state)
{
    (void)state;
    const int64_t T[2] = {0, 40}, C[2] = {20, 1};
    attn_rb rb;
    make_batch(&rb, 2, T, C, ATTN_MASK_CAUSAL, 128, 7);
    attn_pool_geometry g = rb.g;
    snprintf(g.device, sizeof g.device, "cpu");
    g.head_dim_qk = 80;
    g.head_dim_vo = 96;
    g.kv_dtype = ATTN_FP32;
    g.num_kv_heads = 3; /* 8 query heads: not a multiple */
    g.layout = (attn_layout)7;
    g.page_size = 100000;
    attn_manifest m = rb.m;
    m.q_dtype = (attn_dtype)9;
    m.policy.schedule = ATTN_SCHED_PARTITION; /* on a batch that mixes prefill and decode */
    m.policy.state_abi = (attn_state_abi)5;
    m.policy.graph = true;
    attn_cuda_device_facts ampere = k_h200;
    ampere.cc_major = 8;
    attn_admission a;
    attn_cuda_prefill_admit(&m, &g, &ampere, NULL, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_HARDWARE, "pool.device"));
    assert_true(has_reason(&a, ATTN_ADMIT_HARDWARE, "device"));
    assert_true(has_reason(&a, ATTN_ADMIT_Q_DTYPE, "q_dtype"));
    assert_true(has_reason(&a, ATTN_ADMIT_KV_DTYPE, "kv_dtype"));
    assert_true(has_reason(&a, ATTN_ADMIT_SHAPE, "head_dim_qk"));
    assert_true(has_reason(&a, ATTN_ADMIT_SHAPE, "head_dim_vo"));
    assert_true(has_reason(&a, ATTN_ADMIT_HEAD_RATIO, "num_qo_heads"));
    assert_true(has_reason(&a, ATTN_ADMIT_LAYOUT, "layout"));
    assert_true(has_reason(&a, ATTN_ADMIT_LAYOUT, "page_size"));
    assert_true(has_reason(&a, ATTN_ADMIT_PHASE, "policy.schedule"));
    assert_true(has_reason(&a, ATTN_ADMIT_NUMERICS, "policy.state_abi"));
    assert_true(has_reason(&a, ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    /* the differing head dims (qk 80 vs vo 96) are a reason of their own */
    uint32_t shape = 0;
    for (uint32_t i = 0; i < a.num_reasons; i++)
        shape += a.reasons[i].factor == ATTN_ADMIT_SHAPE;
    assert_int_equal(shape, 3);
    assert_int_equal(a.num_reasons, 13);
    /* with the device unknown (no instance state) there is no capability reason */
    attn_cuda_prefill_admit(&m, &g, NULL, NULL, &a);
    assert_false(has_reason(&a, ATTN_ADMIT_HARDWARE, "device"));
    /* the same mixed batch with schedule unified is fine; an fp32 q on a
     * bf16 pool is not (the MMA takes q in the K/V dtype) */
    m = rb.m;
    m.policy.schedule = ATTN_SCHED_UNIFIED;
    attn_cuda_prefill_admit(&m, &rb.g, &k_h200, NULL, &a);
    assert_true(a.admitted);
    m.q_dtype = ATTN_FP32;
    attn_cuda_prefill_admit(&m, &rb.g, &k_h200, NULL, &a);
    assert_int_equal(a.num_reasons, 1);
    assert_true(has_reason(&a, ATTN_ADMIT_Q_DTYPE, "q_dtype"));
    attn_rb_free(&rb);
}

/* Tiles of one request with causal visibility, counted independently of
 * the planner: for every m tile of packed rows and every key tile, SKIP
 * when no row sees a key of it. */
static void count_causal(int64_t T, int64_t C, uint32_t g, uint32_t tm, uint32_t tn, uint64_t *skip,
                         uint64_t *visited)
{
    int64_t rows = C * g, ntiles = (T + C + tn - 1) / tn;
    for (int64_t r0 = 0; r0 < rows; r0 += tm) {
        int64_t last = (r0 + tm - 1 < rows ? r0 + tm - 1 : rows - 1) / g;
        int64_t hi = T + last + 1; /* keys the last token of the tile sees */
        int64_t need = (hi + tn - 1) / tn;
        *visited += (uint64_t)need;
        *skip += (uint64_t)(ntiles - need);
    }
}

/* The host plan of a prefill + append batch: tile classes and cells as
 * counted independently, the partial-state ledger as the kernel indexes it,
 * the key environment, the schedule, the split view, and the diag's
 * "tiles" object carrying the same numbers. */
static void test_plan_host_tiles_ledger_diag(void **state)
{
    (void)state;
    const int64_t T[2] = {0, 4000}, C[2] = {300, 40};
    attn_rb rb;
    make_batch(&rb, 2, T, C, ATTN_MASK_CAUSAL, 128, 9);
    rb.m.policy.state_abi = ATTN_ABI_MLU;
    attn_engine_plan p;
    attn_error_detail err;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &p, &err), 0);
    assert_true(p.tiles.counted);
    assert_int_equal(p.tiles.tile_m, 128);
    assert_int_equal(p.tiles.tile_n, 128);
    uint64_t skip = 0, visited = 0, logical = 0;
    const uint32_t g = 4, hkv = 2;
    for (int b = 0; b < 2; b++) {
        count_causal(T[b], C[b], g, 128, 128, &skip, &visited);
        logical += (uint64_t)(C[b] * T[b] + C[b] * (C[b] + 1) / 2) * 8; /* x H_q */
    }
    const attn_prefill_ledger *lg = &p.tiles.ledger;
    assert_int_equal(lg->skip_tiles, skip * hkv);
    assert_int_equal(lg->full_tiles + lg->partial_tiles, visited * hkv);
    assert_true(lg->partial_tiles > 0); /* the diagonal tiles */
    assert_int_equal(lg->logical_cells, logical);
    assert_int_equal(lg->executed_cells, (lg->full_tiles + lg->partial_tiles) * 128 * 128);

    attn_cuda_prefill_plan_info info;
    assert_int_equal(attn_cuda_prefill_plan_info_get(&p, &info), 0);
    assert_int_equal(info.total_q, 340);
    assert_true(info.meta_bytes > 0);
    /* 12 units per K/V head (10 + 2 m tiles) x 2 heads fill fewer than the
     * 132 SMs, and the append's two m tiles list 32 key tiles each: the
     * planner cuts them (the cut pays for its combine) and the ledger holds
     * the partial states */
    assert_true(info.num_parts > 0);
    assert_int_equal(p.ledger.num_fields, 3);
    const attn_ledger_field *u = attn_ledger_find(&p.ledger, "partial_u");
    assert_non_null(u);
    assert_int_equal(u->elems, (uint64_t)info.num_parts * hkv * 128 * 128);
    assert_non_null(attn_ledger_find(&p.ledger, "partial_m"));
    assert_non_null(attn_ledger_find(&p.ledger, "partial_l"));
    assert_int_equal(p.split.num_slots, info.num_parts);
    assert_int_equal(p.split.num_items, info.num_items);
    assert_int_equal(p.split.policy, ATTN_SPLIT_FA);
    assert_string_equal(p.env.device_type, "cuda");
    assert_int_equal(p.env.compute_capability, 90);
    assert_string_equal(p.env.workspace_device, "cuda:0");
    /* prefill + append rows in one launch: unified, and the why says so */
    assert_int_equal(p.schedule, ATTN_SCHED_UNIFIED);
    assert_non_null(strstr(p.schedule_why, "one launch of the prefill kernel"));

    /* the diag reports the plan's tile classes */
    attn_diag dg;
    memset(&dg, 0, sizeof dg);
    attn_diag_set_requests(&dg, rb.m.requests, rb.m.num_requests);
    attn_diag_set_schedule(&dg, &p.split, p.schedule, rb.m.policy.state_abi);
    attn_diag_set_tiles(&dg, &p.tiles);
    json_t *j = attn_diag_to_json(&dg);
    assert_non_null(j);
    json_t *tl = json_object_get(json_object_get(j, "schedule"), "tiles");
    assert_true(json_is_object(tl));
    assert_int_equal(json_integer_value(json_object_get(tl, "skip")), lg->skip_tiles);
    assert_int_equal(json_integer_value(json_object_get(tl, "full")), lg->full_tiles);
    assert_int_equal(json_integer_value(json_object_get(tl, "partial")), lg->partial_tiles);
    assert_int_equal(json_integer_value(json_object_get(tl, "logical_cells")), lg->logical_cells);
    assert_int_equal(json_integer_value(json_object_get(tl, "executed_cells")), lg->executed_cells);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(tl, "shape"), 1)), 128);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "schedule"), "phases")), "PA");
    json_decref(j);
    /* an engine that does not tile leaves "tiles" null */
    attn_tile_report none = {0};
    attn_diag_set_tiles(&dg, &none);
    j = attn_diag_to_json(&dg);
    assert_true(json_is_null(json_object_get(json_object_get(j, "schedule"), "tiles")));
    json_decref(j);

    attn_cuda_prefill_plan_host_free(&p);
    assert_null(p.priv);
    assert_null(p.split.num_splits);
    attn_rb_free(&rb);
}

/* A FlashMask of documents skips tiles a causal mask of the same lengths
 * runs, and forced splits are reported as FIXED. */
static void test_plan_host_flashmask_and_fixed_splits(void **state)
{
    (void)state;
    const int64_t T[1] = {0}, C[1] = {1024};
    attn_rb rb;
    make_batch(&rb, 1, T, C, ATTN_MASK_CAUSAL, 64, 3);
    attn_engine_plan causal, docs;
    attn_error_detail err;
    memset(&causal, 0, sizeof causal);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &causal, &err), 0);
    attn_rb_free(&rb);
    make_batch(&rb, 1, T, C, ATTN_MASK_FLASHMASK, 64, 3);
    /* 4 causal documents of 256 rows: column j masks rows past its document */
    attn_mask *mk = &rb.m.mask;
    mk->fm_causal = true;
    for (int64_t j = 0; j < 1024; j++) {
        mk->fm_lts[j] = (int32_t)((j / 256 + 1) * 256);
        mk->fm_lte[j] = 1024;
        mk->fm_uts[j] = 0;
        mk->fm_ute[j] = 0;
    }
    rb.m.policy.splits = 3;
    memset(&docs, 0, sizeof docs);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &docs, &err), 0);
    assert_true(docs.tiles.ledger.skip_tiles > causal.tiles.ledger.skip_tiles);
    assert_true(docs.tiles.ledger.logical_cells < causal.tiles.ledger.logical_cells);
    assert_int_equal(docs.split.policy, ATTN_SPLIT_FIXED);
    assert_int_equal(causal.schedule, ATTN_SCHED_PARTITION); /* one phase */
    attn_cuda_prefill_plan_host_free(&causal);
    attn_cuda_prefill_plan_host_free(&docs);
    attn_rb_free(&rb);
}

/* What the validator cannot know is refused at plan time with its field:
 * a page outside this pool; nothing is left for plan_free. */
static void test_plan_host_refusals(void **state)
{
    (void)state;
    const int64_t T[2] = {30, 0}, C[2] = {5, 17};
    attn_rb rb;
    make_batch(&rb, 2, T, C, ATTN_MASK_CAUSAL, 128, 5);
    rb.m.kv.page_indices[1] = (int32_t)rb.g.num_pages + 3;
    attn_engine_plan p;
    attn_error_detail err;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &p, &err),
                     ATTN_E_PAGE_OUT_OF_POOL);
    assert_non_null(strstr(err.field, "kv.page_indices"));
    assert_null(p.priv);
    assert_null(p.split.num_splits);
    assert_false(p.tiles.counted);
    attn_pool_geometry g = rb.g;
    g.head_dim_qk = g.head_dim_vo = 96;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &g, &k_h200, NULL, &p, &err), ATTN_E_SHAPE);
    assert_null(p.priv);
    attn_rb_free(&rb);
}

/* Selection by phase through the registry: both CUDA engines registered
 * with an instance on cuda:0 (never initialised: admission is host code).
 * cuda_decode ranks first; a pure-decode batch lists it first, and its only
 * failing factor on this GPU-less machine is "installed", so on a GPU it
 * wins; a prefill batch leaves it out of the domain; a mixed batch rejects
 * it for the phase and runs on cuda_prefill, which says "unified". */
static void test_selection_by_phase(void **state)
{
    (void)state;
    attn_engine dec = {.ops = attn_cuda_engine_ops(), .device = 0, .where = "cuda:0"};
    attn_engine pre = {.ops = attn_cuda_prefill_engine_ops(), .device = 0, .where = "cuda:0"};
    attn_registry r;
    attn_error_detail err;
    attn_registry_init(&r);
    assert_int_equal(attn_registry_add(&r, &pre, &err), 0); /* order of adding does not matter */
    assert_int_equal(attn_registry_add(&r, &dec, &err), 0);
    assert_true(attn_cuda_engine_ops()->priority < attn_cuda_prefill_engine_ops()->priority);

    attn_selection sel;
    attn_rb rb;
    /* decode only */
    const int64_t Td[3] = {100, 2000, 17}, Cd[3] = {1, 1, 1};
    make_batch(&rb, 3, Td, Cd, ATTN_MASK_CAUSAL, 128, 21);
    int rv = attn_registry_select(&r, &rb.m, &rb.g, &sel, &err);
    assert_int_equal(sel.num_candidates, 2);
    assert_string_equal(sel.candidates[0].name, "cuda_decode");
    assert_string_equal(sel.candidates[1].name, "cuda_prefill");
    assert_true(sel.candidates[1].admission.admitted);
    for (uint32_t i = 0; i < sel.candidates[0].admission.num_reasons; i++)
        assert_int_equal(sel.candidates[0].admission.reasons[i].factor, ATTN_ADMIT_INSTALLED);
    if (sel.candidates[0].admission.admitted) /* a machine with a GPU */
        assert_int_equal(sel.selected, 0);
    else
        assert_int_equal(rv, 0);
    attn_rb_free(&rb);

    /* prefill only: cuda_decode is outside the domain, not a rejection */
    const int64_t Tp[2] = {0, 0}, Cp[2] = {64, 200};
    make_batch(&rb, 2, Tp, Cp, ATTN_MASK_CAUSAL, 128, 22);
    assert_int_equal(attn_registry_select(&r, &rb.m, &rb.g, &sel, &err), 0);
    assert_int_equal(sel.num_candidates, 1);
    assert_string_equal(sel.candidates[sel.selected].name, "cuda_prefill");
    assert_int_equal(sel.fallback, ATTN_FALLBACK_NONE);
    assert_int_equal(sel.num_out_of_domain, 1);
    assert_string_equal(sel.out_of_domain[0].name, "cuda_decode");
    attn_rb_free(&rb);

    /* mixed prefill, append and decode rows: cuda_decode is rejected for
     * the phase, cuda_prefill runs all rows */
    const int64_t Tm[3] = {0, 500, 300}, Cm[3] = {40, 9, 1};
    make_batch(&rb, 3, Tm, Cm, ATTN_MASK_CAUSAL, 128, 23);
    assert_int_equal(attn_registry_select(&r, &rb.m, &rb.g, &sel, &err), 0);
    assert_string_equal(sel.candidates[0].name, "cuda_decode");
    assert_true(has_reason(&sel.candidates[0].admission, ATTN_ADMIT_PHASE, NULL));
    assert_string_equal(sel.candidates[sel.selected].name, "cuda_prefill");
    assert_int_equal(sel.fallback, ATTN_FALLBACK_BACKEND);
    attn_engine_plan p;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &p, &err), 0);
    /* auto: the cost model's pick, both estimates in the why */
    assert_true(p.schedule == ATTN_SCHED_UNIFIED || p.schedule == ATTN_SCHED_PARTITION);
    assert_non_null(strstr(p.schedule_why, "auto: "));
    assert_non_null(strstr(strstr(p.schedule_why, "est.") + 4, " us"));
    assert_non_null(strstr(p.schedule_why, "unified"));
    assert_non_null(strstr(p.schedule_why, "partition"));
    attn_cuda_prefill_plan_host_free(&p);

    /* partition on that mixed batch runs on cuda_prefill (issue 12) */
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    assert_int_equal(attn_registry_select(&r, &rb.m, &rb.g, &sel, &err), 0);
    assert_string_equal(sel.candidates[sel.selected].name, "cuda_prefill");
    /* overlap: no engine runs it (cuda_prefill only as a trial of its
     * instance, measured to lose), cuda_prefill says why */
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    assert_int_equal(attn_registry_select(&r, &rb.m, &rb.g, &sel, &err), ATTN_E_NO_BACKEND);
    for (uint32_t k = 0; k < sel.num_candidates; k++)
        if (strcmp(sel.candidates[k].name, "cuda_prefill") == 0)
            assert_true(
                has_reason(&sel.candidates[k].admission, ATTN_ADMIT_PHASE, "policy.schedule"));
    attn_rb_free(&rb);
}

/* partition (issue 12): the decode rows leave the prefill kernel's tile
 * plan for a decode sub-plan that reads and writes the batch's own rows;
 * the ledger holds both kernels' partial states, the split view both
 * kernels' splits; unified keeps every row on the prefill kernel.  A mask
 * the decode kernels cannot apply refuses partition (admission and plan)
 * naming policy.schedule, overlap too (its decode rows are the decode
 * kernels'). */
static void test_partition_plan_host(void **state)
{
    (void)state;
    const int64_t T[4] = {0, 3000, 500, 4000}, C[4] = {200, 1, 9, 1};
    attn_rb rb;
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 31);
    attn_engine_plan u, pt;
    attn_error_detail err;
    attn_admission a;
    rb.m.policy.schedule = ATTN_SCHED_UNIFIED;
    memset(&u, 0, sizeof u);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &u, &err), 0);
    assert_int_equal(u.schedule, ATTN_SCHED_UNIFIED);
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_true(a.admitted);
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err), 0);
    assert_int_equal(pt.schedule, ATTN_SCHED_PARTITION);
    assert_non_null(strstr(pt.schedule_why, "decode rows on the decode kernels"));
    attn_cuda_prefill_plan_info iu, ip;
    assert_int_equal(attn_cuda_prefill_plan_info_get(&u, &iu), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
    /* the two decode rows' key tiles (ceil(3001/128) + ceil(4001/128) per
     * K/V head) left the prefill kernel */
    const attn_prefill_ledger *lu = &u.tiles.ledger, *lp = &pt.tiles.ledger;
    assert_int_equal((lu->full_tiles + lu->partial_tiles) - (lp->full_tiles + lp->partial_tiles),
                     (24 + 32) * 2);
    assert_int_equal(ip.total_q, iu.total_q); /* every row is still staged and appended */
    /* the ledger: the decode states (at least one per decode row and query
     * head) after the prefill kernel's */
    const attn_ledger_field *fl = attn_ledger_find(
        &pt.ledger, rb.m.policy.state_abi == ATTN_ABI_MLU ? "partial_m" : "partial_LSE");
    assert_non_null(fl);
    assert_true(fl->elems >= (uint64_t)ip.num_parts * 2 * 128 + 2u * 8);
    assert_true(pt.split.num_splits[1] >= 1 && pt.split.num_splits[3] >= 1);
    assert_true(pt.split.num_items > ip.num_items);
    assert_true(pt.priv_bytes > sizeof(void *));
    /* the default stream variant (ATTN_MIXED_STREAMS=auto) is the cost
     * model's: the why lists serial and every candidate cap of the H200
     * constants, and the plan runs the one it names (a batch this small
     * stays serial while the fork's fixed cost outweighs the overlap) */
    assert_non_null(strstr(pt.schedule_why, "ATTN_MIXED_STREAMS=auto"));
    const attn_mixed_cost_consts *hk = attn_mixed_cost_h200();
    for (uint32_t i = 0; i < hk->num_caps; i++) {
        char cand[16];
        snprintf(cand, sizeof cand, " %u:", hk->caps[i]);
        assert_non_null(strstr(pt.schedule_why, cand));
    }
    if (strcmp(ip.streams, "serial") == 0) {
        assert_int_equal(ip.max_ctas, k_h200.sm_count);
        assert_non_null(strstr(pt.schedule_why, "partition serial: "));
    } else {
        char grid[32];
        assert_string_equal(ip.streams, "prefill-first");
        snprintf(grid, sizeof grid, "prefill grid %u CTAs", ip.max_ctas);
        assert_non_null(strstr(pt.schedule_why, grid));
    }
    attn_cuda_prefill_plan_host_free(&pt);
    /* a forced fork keeps its order and caps the prefill grid; the why
     * names the variant and the setting */
    static const struct {
        attn_mixed_order order;
        const char *name;
    } k_forks[] = {{ATTN_MIXED_ORDER_PREFILL_FIRST, "prefill-first"},
                   {ATTN_MIXED_ORDER_DECODE_FIRST, "decode-first"}};
    for (int i = 0; i < 2; i++) {
        attn_cuda_prefill_tuning tu;
        memset(&tu, 0, sizeof tu);
        tu.streams.order = k_forks[i].order;
        tu.streams.prefill_ctas = 66;
        memset(&pt, 0, sizeof pt);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &pt, &err), 0);
        assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
        assert_string_equal(ip.streams, k_forks[i].name);
        assert_int_equal(ip.max_ctas, 66);
        assert_non_null(strstr(pt.schedule_why, "prefill grid 66 CTAs"));
        assert_non_null(strstr(pt.schedule_why, k_forks[i].name));
        attn_cuda_prefill_plan_host_free(&pt);
    }
    /* auto with a forced fork: when auto picks partition it keeps the fork */
    {
        attn_cuda_prefill_tuning tu;
        memset(&tu, 0, sizeof tu);
        tu.streams.order = ATTN_MIXED_ORDER_PREFILL_FIRST;
        rb.m.policy.schedule = ATTN_SCHED_AUTO;
        memset(&pt, 0, sizeof pt);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &pt, &err), 0);
        assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
        /* the estimate read the decode sub-plan's grid (the wave term):
         * its items x 2 K/V heads, one head chunk */
        const char *dg = strstr(pt.schedule_why, "a decode grid of ");
        assert_non_null(dg);
        const unsigned long dctas = strtoul(dg + strlen("a decode grid of "), NULL, 10);
        assert_true(dctas >= 4 && dctas % 2 == 0);
        if (pt.schedule == ATTN_SCHED_PARTITION) {
            /* no cap asked: the model's pick among its candidate caps */
            char grid[32];
            assert_string_equal(ip.streams, "prefill-first");
            assert_non_null(strstr(pt.schedule_why, "forked"));
            snprintf(grid, sizeof grid, "prefill grid %u CTAs", ip.max_ctas);
            assert_non_null(strstr(pt.schedule_why, grid));
            bool candidate = false;
            for (uint32_t i = 0; i < hk->num_caps; i++)
                candidate |= ip.max_ctas == hk->caps[i];
            assert_true(candidate);
        } else {
            assert_string_equal(ip.streams, "serial");
            assert_int_equal(ip.max_ctas, k_h200.sm_count);
        }
        attn_cuda_prefill_plan_host_free(&pt);
        rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    }
    attn_cuda_prefill_plan_host_free(&u);
    attn_rb_free(&rb);

    /* a pure-decode batch under partition: the decode kernels alone, the
     * prefill kernel gets no work */
    const int64_t Td[3] = {100, 2000, 17}, Cd[3] = {1, 1, 1};
    make_batch(&rb, 3, Td, Cd, ATTN_MASK_CAUSAL, 128, 33);
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err), 0);
    assert_int_equal(pt.schedule, ATTN_SCHED_PARTITION);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
    assert_int_equal(ip.num_items, 0);
    assert_int_equal(ip.num_tiles, 0);
    assert_int_equal(ip.total_q, 3);
    assert_true(pt.split.num_items > 0);       /* the decode producers */
    assert_string_equal(ip.streams, "serial"); /* nothing to fork */
    attn_cuda_prefill_plan_host_free(&pt);
    attn_rb_free(&rb);

    /* a dense mask: the decode kernels cannot apply it */
    make_batch(&rb, 4, T, C, ATTN_MASK_DENSE, 128, 32);
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_PHASE, "policy.schedule"));
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "policy.schedule");
    assert_null(pt.priv);
    /* the same mask on a pure-decode batch: partition stays one launch of
     * the prefill kernel (every row belongs to it), no decode sub-plan */
    attn_rb rd;
    make_batch(&rd, 3, Td, Cd, ATTN_MASK_DENSE, 128, 34);
    rd.m.policy.schedule = ATTN_SCHED_PARTITION;
    attn_cuda_prefill_admit(&rd.m, &rd.g, &k_h200, NULL, &a);
    assert_true(a.admitted);
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rd.m, &rd.g, &k_h200, NULL, &pt, &err), 0);
    assert_int_equal(pt.schedule, ATTN_SCHED_PARTITION);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
    assert_true(ip.num_items >= 3); /* at least one m tile per decode row */
    assert_int_equal(pt.split.num_items, ip.num_items);
    attn_cuda_prefill_plan_host_free(&pt);
    attn_rb_free(&rd);
    /* auto on the mixed dense batch: unified, and the why says partition
     * was not admitted */
    rb.m.policy.schedule = ATTN_SCHED_AUTO;
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err), 0);
    assert_int_equal(pt.schedule, ATTN_SCHED_UNIFIED);
    assert_non_null(strstr(pt.schedule_why, "partition not admitted"));
    attn_cuda_prefill_plan_host_free(&pt);
    /* overlap: refused on this batch (a per-cell mask), with the reason */
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_PHASE, "policy.schedule"));
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_null(pt.priv);
    attn_rb_free(&rb);
}

/* partition forked onto a capped prefill grid (ATTN_MIXED_STREAMS
 * prefill-first / decode-first with ATTN_MIXED_PREFILL_CTAS, the bench's
 * pf_c66 / pf_c96): the decode sub-plan's split-KV is the one serial gets,
 * planned for every SM of the device, not for the SMs the capped grid
 * leaves.  The fluid model that picks the fork (planner/mixed_cost.h) has
 * the decode kernels finish what they did not do beside the capped grid on
 * the whole machine once it ends, which needs a decode grid sized for
 * every SM (its waiting CTAs take the SMs the prefill grid frees); a split
 * for sm_count - prefill_ctas would be one wave of longer CTAs on the free
 * SMs alone.  The forked constants were fitted on such plans, and the run
 * keeps the fitted producer too (run_locked: dp.sm_count 0).  A split for
 * the free SMs was measured (2026-12-02, bench/results/
 * mixed-h200-2026-12-02-r23-caps/): it removed wave cliffs at caps no
 * batch picks (M2 cap 70 0.78 -> 0.74 ms) and cost where the decode rows
 * outlast the prefill grid (M3 cap 108 1.35 -> 1.41), the best caps
 * unchanged. */
static void test_forked_decode_split_whole_device(void **state)
{
    (void)state;
    const int64_t T[4] = {0, 3000, 500, 4000}, C[4] = {200, 1, 9, 1};
    const uint32_t dec_rows[2] = {1, 3};
    attn_rb rb;
    attn_engine_plan ser, left, fk;
    attn_error_detail err;
    attn_cuda_prefill_plan_info ip;
    attn_cuda_prefill_tuning tu;
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 31);
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    memset(&tu, 0, sizeof tu);
    tu.streams.order = ATTN_MIXED_ORDER_SERIAL;
    memset(&ser, 0, sizeof ser);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &ser, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&ser, &ip), 0);
    assert_string_equal(ip.streams, "serial");
    /* the decode rows' split depends on the grid: on the 36 SMs a cap of
     * 96 leaves, they would split less */
    attn_cuda_device_facts small = k_h200;
    small.sm_count = k_h200.sm_count - 96;
    memset(&left, 0, sizeof left);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &small, &tu, &left, &err), 0);
    for (int i = 0; i < 2; i++)
        assert_true(left.split.num_splits[dec_rows[i]] < ser.split.num_splits[dec_rows[i]]);
    attn_cuda_prefill_plan_host_free(&left);
    static const struct {
        attn_mixed_order order;
        const char *name;
        uint32_t ctas;
    } k_forks[] = {{ATTN_MIXED_ORDER_PREFILL_FIRST, "prefill-first", 96},
                   {ATTN_MIXED_ORDER_PREFILL_FIRST, "prefill-first", 66},
                   {ATTN_MIXED_ORDER_DECODE_FIRST, "decode-first", 96}};
    for (size_t k = 0; k < sizeof k_forks / sizeof k_forks[0]; k++) {
        tu.streams.order = k_forks[k].order;
        tu.streams.prefill_ctas = k_forks[k].ctas;
        memset(&fk, 0, sizeof fk);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &fk, &err), 0);
        assert_int_equal(attn_cuda_prefill_plan_info_get(&fk, &ip), 0);
        assert_string_equal(ip.streams, k_forks[k].name);
        assert_int_equal(ip.max_ctas, k_forks[k].ctas);
        for (int i = 0; i < 2; i++)
            assert_int_equal(fk.split.num_splits[dec_rows[i]], ser.split.num_splits[dec_rows[i]]);
        assert_int_equal(fk.split.num_items, ser.split.num_items);
        assert_true(fk.ledger.total_bytes == ser.ledger.total_bytes);
        attn_cuda_prefill_plan_host_free(&fk);
    }
    attn_cuda_prefill_plan_host_free(&ser);
    attn_rb_free(&rb);
}

/* overlap (issue 12): refused by default with the measured reason (both
 * designs lose to partition), by admission and plan, the reason naming the
 * trial switch.  The fused trial (ATTN_MIXED_OVERLAP=fused): every row in
 * one launch, the prefill/append rows in its 128 x 64 tiles, the decode
 * rows' sub-plan split for one fused CTA per SM, the grid max(SMs, decode
 * pieces) with one prefill queue per CTA, serial on one stream; refused at
 * d 256 and on page sizes it does not walk, naming policy.schedule; a batch
 * without decode rows runs the full kernel alone, labelled so.  The light
 * trial (ATTN_MIXED_OVERLAP=1): the prefill/append rows on the light
 * kernel's 64 x 64 tiles, one CTA per SM, the decode rows on the decode
 * kernels forked prefill-first. */
static void test_overlap_plan_host(void **state)
{
    (void)state;
    static const attn_cuda_prefill_tuning k_trial = {.overlap_trial = ATTN_OVERLAP_LIGHT};
    static const attn_cuda_prefill_tuning k_fused = {.overlap_trial = ATTN_OVERLAP_FUSED};
    const int64_t T[4] = {0, 3000, 500, 4000}, C[4] = {200, 1, 9, 1};
    attn_rb rb;
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 41);
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_engine_plan ov, pt;
    attn_error_detail err;
    attn_admission a;
    attn_cuda_prefill_plan_info io, ip;
    char walk[128];
    /* by default refused with the measured reason, by admission and plan */
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_PHASE, "policy.schedule"));
    assert_non_null(strstr(a.reasons[0].text, "ATTN_MIXED_OVERLAP=1 or fused"));
    memset(&ov, 0, sizeof ov);
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &ov, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "policy.schedule");
    assert_null(ov.priv);
    /* the fused trial */
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, &k_fused, &a);
    assert_true(a.admitted);
    memset(&ov, 0, sizeof ov);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &k_fused, &ov, &err), 0);
    assert_int_equal(ov.schedule, ATTN_SCHED_OVERLAP);
    assert_non_null(strstr(ov.schedule_why, "fused kernel"));
    assert_int_equal(attn_cuda_prefill_plan_info_get(&ov, &io), 0);
    assert_int_equal(io.tile_m, ATTN_PREFILL_TILE_M);
    assert_int_equal(io.tile_n, ATTN_PREFILL_FUSED_TILE_N);
    assert_string_equal(io.streams, "serial");
    /* two decode rows of at most 4000 keys on one CTA per SM: the grid is
     * the SMs', a queue per CTA up to one per prefill unit */
    assert_int_equal(io.max_ctas, k_h200.sm_count);
    assert_true(io.num_workers > 0 && io.num_workers <= k_h200.sm_count);
    snprintf(walk, sizeof walk,
             "; walk pairs (least-loaded, %u units beside their sibling): %u CTAs, rho %.3f, "
             "eta %.3f",
             io.pairs, io.num_workers, io.rho, io.eta);
    if (strstr(ov.schedule_why, walk) == NULL)
        fail_msg("the walk is cut from the why: %s", ov.schedule_why);
#ifdef ATTN_WITH_CUDA
    assert_non_null(io.attend);
    assert_string_equal(io.attend, "attn_mixed::mixed_fused<128, __nv_bfloat16>");
#endif
    attn_cuda_prefill_plan_host_free(&ov);
    attn_rb_free(&rb);
    /* on a device whose decode producer keeps 2 CTAs per SM, partition
     * splits long decode rows for those 264 CTAs, the fused plan for one
     * fused CTA per SM: fewer parts, the same rows.  Four long rows, so
     * that neither plan reaches the engine's 32 splits per request
     * (ATTN_SPLIT_FI_MAX_SPLITS_CUDA; with two rows both plans hit it) */
    const int64_t Tl[6] = {0, 12000, 500, 12000, 12000, 12000}, Cl[6] = {200, 1, 9, 1, 1, 1};
    make_batch(&rb, 6, Tl, Cl, ATTN_MASK_CAUSAL, 128, 46);
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_cuda_device_facts two = k_h200;
    two.ctas_per_sm = 2;
    memset(&ov, 0, sizeof ov);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &two, &k_fused, &ov, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&ov, &io), 0);
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &two, NULL, &pt, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
    assert_int_equal(io.total_q, ip.total_q);
    uint32_t ov_parts = 0, pt_parts = 0;
    static const int k_decode_rows[4] = {1, 3, 4, 5};
    for (int i = 0; i < 4; i++) {
        const int b = k_decode_rows[i];
        assert_true(ov.split.num_splits[b] >= 1);
        assert_true(pt.split.num_splits[b] <= ATTN_SPLIT_FI_MAX_SPLITS_CUDA);
        ov_parts += ov.split.num_splits[b];
        pt_parts += pt.split.num_splits[b];
    }
    assert_true(ov_parts < pt_parts);
    assert_true(io.num_tiles > ip.num_tiles); /* 64-key tiles: more of them */
    attn_cuda_prefill_plan_host_free(&pt);
    attn_cuda_prefill_plan_host_free(&ov);
    attn_rb_free(&rb);

    /* more decode pieces than SMs (300 decode rows x 2 K/V heads): the
     * fused grid is one CTA per piece, the why says so */
    {
        int64_t Tm[301], Cm[301];
        Tm[0] = 0;
        Cm[0] = 500;
        for (int b = 1; b < 301; b++) {
            Tm[b] = 300 + b;
            Cm[b] = 1;
        }
        make_batch(&rb, 301, Tm, Cm, ATTN_MASK_CAUSAL, 128, 45);
        rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
        memset(&ov, 0, sizeof ov);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &k_fused, &ov, &err),
                         0);
        assert_int_equal(attn_cuda_prefill_plan_info_get(&ov, &io), 0);
        /* the split view counts the decode rows' items after the prefill
         * plan's; a piece is a decode item x K/V head (g 4: one chunk) */
        const uint32_t pieces = ((uint32_t)ov.split.num_items - io.num_items) * 2;
        assert_true(pieces >= 600);
        assert_int_equal(io.max_ctas, pieces);
        char grid[48];
        snprintf(grid, sizeof grid, "%u CTAs", pieces);
        assert_non_null(strstr(ov.schedule_why, grid));
        attn_cuda_prefill_plan_host_free(&ov);
        attn_rb_free(&rb);
        make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 41);
    }

    /* the instance's trial runs the light kernel on two streams */
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, &k_trial, &a);
    assert_true(a.admitted);
    memset(&ov, 0, sizeof ov);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &k_trial, &ov, &err), 0);
    assert_int_equal(ov.schedule, ATTN_SCHED_OVERLAP);
    assert_non_null(strstr(ov.schedule_why, "light prefill kernel"));
    assert_non_null(strstr(ov.schedule_why, "second stream"));
    assert_int_equal(attn_cuda_prefill_plan_info_get(&ov, &io), 0);
    assert_int_equal(io.tile_m, ATTN_PREFILL_LIGHT_TILE_M);
    assert_int_equal(io.tile_n, ATTN_PREFILL_LIGHT_TILE_N);
    assert_int_equal(ov.tiles.tile_m, 64);
    assert_string_equal(io.streams, "prefill-first");
    assert_int_equal(io.max_ctas, k_h200.sm_count); /* persistent: one light CTA per SM */
    /* the why still ends with the walk's figures (seed 0x09G), whole */
    snprintf(walk, sizeof walk,
             "; walk pairs (least-loaded, %u units beside their sibling): %u CTAs, rho %.3f, "
             "eta %.3f",
             io.pairs, io.num_workers, io.rho, io.eta);
    assert_true(io.num_workers > 0);
    if (strstr(ov.schedule_why, walk) == NULL)
        fail_msg("the walk is cut from the why: %s", ov.schedule_why);
#ifdef ATTN_WITH_CUDA
    assert_non_null(io.attend);
    assert_non_null(strstr(io.attend, "attn_prefill_attend<128, __nv_bfloat16, true>"));
#endif
    /* the same rows leave the tile plan as under partition: the 200-row
     * prefill and the 9-row append, in 64-row m tiles (H_q / H_kv = 4) */
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    memset(&pt, 0, sizeof pt);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &pt, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&pt, &ip), 0);
    assert_int_equal(ip.tile_m, ATTN_PREFILL_TILE_M);
    assert_int_equal(io.total_q, ip.total_q);
    assert_true(io.num_tiles > ip.num_tiles); /* 64 x 64 tiles: more of them */
    assert_int_equal(ov.split.num_requests, 4);
    assert_int_equal(ov.split.num_splits[1], pt.split.num_splits[1]); /* a decode row's splits */
    attn_cuda_prefill_plan_host_free(&pt);
    attn_cuda_prefill_plan_host_free(&ov);
    attn_rb_free(&rb);

    /* no decode rows: the full kernel alone under the fused trial, the
     * light one under the light trial, and the why says so */
    const int64_t Tp[2] = {0, 100}, Cp[2] = {300, 20};
    make_batch(&rb, 2, Tp, Cp, ATTN_MASK_CAUSAL, 64, 42);
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    for (int trial = 0; trial < 2; trial++) {
        memset(&ov, 0, sizeof ov);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200,
                                                     trial ? &k_trial : &k_fused, &ov, &err),
                         0);
        assert_int_equal(ov.schedule, ATTN_SCHED_OVERLAP);
        assert_non_null(strstr(ov.schedule_why, "nothing to overlap"));
        assert_int_equal(attn_cuda_prefill_plan_info_get(&ov, &io), 0);
        assert_int_equal(io.tile_m, trial ? 64 : 128);
        attn_cuda_prefill_plan_host_free(&ov);
    }
    attn_rb_free(&rb);

    /* d 256: refused by admission and by the plan, naming the field, under
     * either trial */
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 256, 43);
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    for (int trial = 0; trial < 2; trial++) {
        const attn_cuda_prefill_tuning *t = trial ? &k_trial : &k_fused;
        attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, t, &a);
        assert_false(a.admitted);
        assert_true(has_reason(&a, ATTN_ADMIT_SHAPE, "policy.schedule"));
        memset(&ov, 0, sizeof ov);
        memset(&err, 0, sizeof err);
        assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, t, &ov, &err),
                         ATTN_E_BACKEND_REJECTED);
        assert_string_equal(err.field, "policy.schedule");
        assert_non_null(strstr(err.message, "64 and 128"));
        assert_null(ov.priv);
    }
    attn_rb_free(&rb);

    /* page size 4: the fused kernel's decode roles copy page runs of 8 rows
     * or more; refused naming the field, the light trial still runs it */
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 44);
    rb.g.page_size = 4;
    rb.m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, &k_fused, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_SHAPE, "policy.schedule"));
    assert_non_null(strstr(a.reasons[0].text, "page_size"));
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, &k_trial, &a);
    assert_true(a.admitted);
    attn_rb_free(&rb);
}

/* issue 12 item 3: the unified plan's unit walk.  By default the plan
 * holds the pair walk's per-CTA queues for the persistent grid (one per SM,
 * fewer when partition forks; sibling m tiles side by side) and the why
 * reports the units beside their sibling and the queues' rho / eta; the
 * plain least-loaded queues and the snake stay selectable by the
 * instance's tuning; the same manifest gives the same queues; a bad
 * ATTN_PREFILL_WALK names itself. */
static void test_unit_walk_plan_host(void **state)
{
    (void)state;
    const int64_t T[4] = {0, 3000, 500, 4000}, C[4] = {700, 1, 90, 1};
    attn_rb rb;
    make_batch(&rb, 4, T, C, ATTN_MASK_CAUSAL, 128, 41);
    rb.m.policy.schedule = ATTN_SCHED_UNIFIED;
    attn_engine_plan a, b, sn;
    attn_error_detail err;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&sn, 0, sizeof sn);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &a, &err), 0);
    attn_cuda_prefill_plan_info ia, ib, is;
    assert_int_equal(attn_cuda_prefill_plan_info_get(&a, &ia), 0);
    assert_string_equal(ia.walk, "pairs");   /* the default: sibling m tiles side by side */
    const uint32_t units = ia.num_items * 2; /* H_kv 2 */
    assert_true(ia.pairs > 0 && ia.pairs <= units);
    assert_true(ia.num_workers % 2 == 0 && ia.num_workers <= 132);
    assert_true(ia.rho >= 1.0 && ia.eta > 0.0 && ia.eta <= 1.0);
    char want[128];
    snprintf(want, sizeof want,
             "walk pairs (least-loaded, %u units beside their sibling): %u CTAs, rho %.3f, "
             "eta %.3f",
             ia.pairs, ia.num_workers, ia.rho, ia.eta);
    assert_non_null(strstr(a.schedule_why, want));
    assert_non_null(strstr(a.schedule_why, "as asked: every row")); /* the why it extends */
    /* the queues are part of the one upload */
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &b, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&b, &ib), 0);
    assert_int_equal(ib.meta_bytes, ia.meta_bytes);
    assert_true(ib.rho == ia.rho && ib.eta == ia.eta && ib.num_workers == ia.num_workers);
    assert_string_equal(b.schedule_why, a.schedule_why);

    attn_cuda_prefill_tuning tu;
    memset(&tu, 0, sizeof tu);
    /* the plain least-loaded queues */
    attn_engine_plan qu;
    attn_cuda_prefill_plan_info iqu;
    memset(&qu, 0, sizeof qu);
    tu.walk = ATTN_PREFILL_WALK_QUEUE;
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &qu, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&qu, &iqu), 0);
    assert_string_equal(iqu.walk, "queue");
    assert_int_equal(iqu.pairs, 0);
    assert_int_equal(iqu.num_workers, units < 132 ? units : 132);
    snprintf(want, sizeof want, "walk queue (least-loaded): %u CTAs, rho %.3f, eta %.3f",
             iqu.num_workers, iqu.rho, iqu.eta);
    assert_non_null(strstr(qu.schedule_why, want));
    attn_cuda_prefill_plan_host_free(&qu);
    /* the cluster walk: the pair walk's queues, the launch in 2-CTA clusters */
    attn_engine_plan cl;
    attn_cuda_prefill_plan_info icl;
    memset(&cl, 0, sizeof cl);
    tu.walk = ATTN_PREFILL_WALK_CLUSTER;
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &cl, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&cl, &icl), 0);
    assert_string_equal(icl.walk, "cluster");
    assert_int_equal(icl.pairs, ia.pairs);
    assert_int_equal(icl.num_workers, ia.num_workers);
    assert_int_equal(icl.cluster, 1);
    assert_int_equal(ia.cluster, 0); /* the pair walk launches one CTA per cluster */
    snprintf(want, sizeof want,
             "walk cluster (least-loaded, %u units beside their sibling): %u CTAs, rho %.3f, "
             "eta %.3f",
             icl.pairs, icl.num_workers, icl.rho, icl.eta);
    assert_non_null(strstr(cl.schedule_why, want));
    attn_cuda_prefill_plan_host_free(&cl);
    tu.walk = ATTN_PREFILL_WALK_SNAKE;
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &sn, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&sn, &is), 0);
    assert_string_equal(is.walk, "snake");
    assert_int_equal(is.num_workers, 0);
    assert_non_null(strstr(sn.schedule_why, "walk snake: "));
    assert_null(strstr(sn.schedule_why, "least-loaded"));
    /* the tile plan is the same: only the walk differs */
    assert_int_equal(is.num_items, ia.num_items);
    assert_int_equal(is.num_parts, ia.num_parts);
    assert_true(is.meta_bytes < ia.meta_bytes);
    attn_cuda_prefill_plan_host_free(&a);
    attn_cuda_prefill_plan_host_free(&b);
    attn_cuda_prefill_plan_host_free(&sn);

    /* partition forked with the prefill grid capped at 66: 66 queues */
    rb.m.policy.schedule = ATTN_SCHED_PARTITION;
    memset(&tu, 0, sizeof tu);
    tu.streams.order = ATTN_MIXED_ORDER_PREFILL_FIRST;
    tu.streams.prefill_ctas = 66;
    memset(&a, 0, sizeof a);
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &a, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_info_get(&a, &ia), 0);
    assert_int_equal(ia.max_ctas, 66);
    assert_int_equal(ia.num_workers, ia.num_items * 2 < 66 ? ia.num_items * 2 : 66);
    attn_cuda_prefill_plan_host_free(&a);
    attn_rb_free(&rb);

    attn_prefill_walk w = ATTN_PREFILL_WALK_SNAKE;
    assert_int_equal(attn_prefill_walk_parse("queue", &w, &err), 0);
    assert_int_equal(w, ATTN_PREFILL_WALK_QUEUE);
    assert_int_equal(attn_prefill_walk_parse("pairs", &w, &err), 0);
    assert_int_equal(w, ATTN_PREFILL_WALK_PAIRS);
    assert_string_equal(attn_prefill_walk_name(ATTN_PREFILL_WALK_PAIRS), "pairs");
    assert_int_equal(attn_prefill_walk_parse("cluster", &w, &err), 0);
    assert_int_equal(w, ATTN_PREFILL_WALK_CLUSTER);
    assert_string_equal(attn_prefill_walk_name(ATTN_PREFILL_WALK_CLUSTER), "cluster");
    assert_int_equal(attn_prefill_walk_parse("", &w, &err), 0);
    assert_int_equal(w, ATTN_PREFILL_WALK_AUTO);
    w = ATTN_PREFILL_WALK_SNAKE;
    assert_int_equal(attn_prefill_walk_parse("zigzag", &w, &err), ATTN_E_RANGE);
    assert_string_equal(err.field, "ATTN_PREFILL_WALK");
    assert_int_equal(w, ATTN_PREFILL_WALK_SNAKE); /* untouched */
    assert_string_equal(attn_prefill_walk_name(ATTN_PREFILL_WALK_SNAKE), "snake");
    assert_string_equal(attn_prefill_walk_name((attn_prefill_walk)9), "?");
}

/* ATTN_MIXED_OVERLAP: 1 or light turns overlap's light-kernel trial on,
 * fused the fused kernel's, 0 or nothing leaves overlap refused, any other
 * word is refused naming the variable (it used to be ignored: "true" left
 * overlap refused without a word). */
static void test_overlap_trial_parse(void **state)
{
    (void)state;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    int trial = 7;
    assert_int_equal(attn_mixed_overlap_parse("1", &trial, &err), 0);
    assert_int_equal(trial, ATTN_OVERLAP_LIGHT);
    assert_int_equal(attn_mixed_overlap_parse("light", &trial, &err), 0);
    assert_int_equal(trial, ATTN_OVERLAP_LIGHT);
    assert_int_equal(attn_mixed_overlap_parse("fused", &trial, &err), 0);
    assert_int_equal(trial, ATTN_OVERLAP_FUSED);
    assert_int_equal(attn_mixed_overlap_parse("0", &trial, &err), 0);
    assert_int_equal(trial, 0);
    trial = 1;
    assert_int_equal(attn_mixed_overlap_parse(NULL, &trial, &err), 0);
    assert_int_equal(trial, 0);
    trial = 1;
    assert_int_equal(attn_mixed_overlap_parse("true", &trial, &err), ATTN_E_RANGE);
    assert_string_equal(err.field, "ATTN_MIXED_OVERLAP");
    assert_int_equal(trial, 1); /* untouched */
}

/* The ops table: versioned, partition, unified and overlap, every phase, CUDA. */
static void test_ops_table(void **state)
{
    (void)state;
    const attn_engine_ops *ops = attn_cuda_prefill_engine_ops();
    assert_int_equal(ops->version, ATTN_ENGINE_OPS_VERSION);
    assert_string_equal(ops->name, "cuda_prefill");
    assert_int_equal(ops->platform, ATTN_PLATFORM_CUDA);
    assert_int_equal(ops->phases, 7u);
    assert_true(attn_engine_implements(ops, ATTN_SCHED_PARTITION));
    assert_true(attn_engine_implements(ops, ATTN_SCHED_UNIFIED));
    assert_true(attn_engine_implements(ops, ATTN_SCHED_OVERLAP));
#ifndef ATTN_WITH_CUDA
    attn_engine *e = NULL;
    attn_error_detail err;
    assert_int_equal(attn_engine_create(ops, NULL, &e, &err), ATTN_E_CUDA);
    assert_null(e);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admits_every_phase_and_mask),
        cmocka_unit_test(test_unit_walk_plan_host),
        cmocka_unit_test(test_overlap_trial_parse),
        cmocka_unit_test(test_admission_names_every_factor),
        cmocka_unit_test(test_plan_host_tiles_ledger_diag),
        cmocka_unit_test(test_plan_host_flashmask_and_fixed_splits),
        cmocka_unit_test(test_plan_host_refusals),
        cmocka_unit_test(test_selection_by_phase),
        cmocka_unit_test(test_partition_plan_host),
        cmocka_unit_test(test_forked_decode_split_whole_device),
        cmocka_unit_test(test_overlap_plan_host),
        cmocka_unit_test(test_ops_table),
    };
    return cmocka_run_group_tests_name("cuda_prefill", tests, NULL, NULL);
}
