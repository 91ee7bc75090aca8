/* The real CUDA decode engine's host functions, on any machine: admission
 * (seed 0x07B/0x07D: a rejection names every failing factor, each head
 * dimension separately; skipped in a CUDA=0 build, where it says "not
 * built") and the host half of its plan (key environment, ledger, schedule,
 * the checks the manifest validator cannot make), which needs no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tests/lib/random_batch.h"
#include "engines/cuda/cuda_engine.h"
#include "planner/engine.h"

static void test_head_dim_80_names_both_dims(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    attn_rb_spec sp;
    attn_rb rb;
    attn_admission adm;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 2;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.head_dim_qk = sp.head_dim_vo = 80;
    sp.page_size = 16;
    sp.kv_dtype = ATTN_BF16;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    assert_int_equal(attn_rb_make(&rb, &sp, 5), 0);
    attn_cuda_admit(&rb.m, &rb.g, &adm);
    assert_false(adm.admitted);
    int qk = 0, vo = 0;
    for (uint32_t i = 0; i < adm.num_reasons; i++) {
        qk += strcmp(adm.reasons[i].field, "head_dim_qk") == 0;
        vo += strcmp(adm.reasons[i].field, "head_dim_vo") == 0;
    }
    assert_int_equal(qk, 1);
    assert_int_equal(vo, 1);

    /* a dense mask and a prefill add their own reasons to the same vector */
    attn_rb_free(&rb);
    sp.phase_mask = 1u << ATTN_PHASE_PREFILL;
    sp.mask_kind = ATTN_MASK_DENSE;
    assert_int_equal(attn_rb_make(&rb, &sp, 6), 0);
    attn_cuda_admit(&rb.m, &rb.g, &adm);
    bool seen[ATTN_ADMIT_NUM_FACTORS] = {0};
    for (uint32_t i = 0; i < adm.num_reasons; i++)
        seen[adm.reasons[i].factor] = true;
    assert_true(seen[ATTN_ADMIT_PHASE]);
    assert_true(seen[ATTN_ADMIT_MASK]);
    assert_true(seen[ATTN_ADMIT_SHAPE]);
    attn_rb_free(&rb);
#endif
}

static void decode_batch(attn_rb *rb, uint32_t seed)
{
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 3;
    sp.max_cache_len = 300;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.num_qo_heads = 8;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.kv_dtype = ATTN_BF16;
    sp.q_dtype = ATTN_BF16;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    assert_int_equal(attn_rb_make(rb, &sp, seed), 0);
    snprintf(rb->g.device, sizeof rb->g.device, "cuda:1");
}

/* The CUDA plan's key environment is the device's ("cuda", its compute
 * capability, workspace on that device), its ledger the one the run
 * carves, its schedule named with why; computed without any CUDA call. */
static void test_plan_host_env_ledger_schedule(void **state)
{
    (void)state;
    attn_rb rb;
    attn_error_detail err;
    decode_batch(&rb, 11);
    attn_cuda_device_facts dev = {.device = 1,
                                  .cc_major = 9,
                                  .cc_minor = 0,
                                  .sm_count = 132,
                                  .ctas_per_sm = 2,
                                  .head_chunks = 1};
    attn_cuda_tuning t;
    attn_cuda_tuning_defaults(&t);
    attn_engine_plan p;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_plan_host(&rb.m, &rb.g, &dev, &t, &p, &err), 0);
    assert_string_equal(p.env.device_type, "cuda");
    assert_int_equal(p.env.compute_capability, 90);
    assert_string_equal(p.env.device, "cuda:1");
    assert_string_equal(p.env.workspace_device, "cuda:1");
    attn_key_env kenv = attn_engine_key_env(&p.env);
    assert_string_equal(kenv.device_type, "cuda");
    /* one state per (slot, query head) with the fields the producer writes */
    bool mlu = rb.m.policy.state_abi == ATTN_ABI_MLU;
    assert_int_equal(p.ledger.num_fields, mlu ? 3 : 2);
    uint32_t slots =
        p.split.slot_capacity > p.split.num_slots ? p.split.slot_capacity : p.split.num_slots;
    assert_int_equal(p.ledger.fields[0].elems, (uint64_t)slots * rb.m.num_qo_heads * 128);
    assert_int_equal(p.schedule, ATTN_SCHED_PARTITION);
    /* who folds split requests: g 4 x d 128 fits one fold round, so the
     * producers' last CTAs by default, the reducer kernel when tuned off */
    assert_true(t.fused_merge);
    const bool split = p.split.num_items > rb.m.num_requests;
    assert_non_null(
        strstr(p.schedule_why, split ? "folded by its last producer CTA" : "no request split"));
    assert_true(attn_cuda_plan_meta_bytes(&p) > 0);
    attn_cuda_plan_host_free(&p);
    assert_null(p.priv);
    rb.m.policy.split_policy = ATTN_SPLIT_FIXED; /* every request split in two */
    rb.m.policy.splits = 2;
    for (int fused = 0; fused < 2; fused++) {
        t.fused_merge = fused;
        memset(&p, 0, sizeof p);
        assert_int_equal(attn_cuda_plan_host(&rb.m, &rb.g, &dev, &t, &p, &err), 0);
        assert_true(p.split.num_items > rb.m.num_requests);
        assert_non_null(
            strstr(p.schedule_why, fused ? "folded by its last producer CTA" : "then the reducer"));
        attn_cuda_plan_host_free(&p);
    }
    attn_cuda_tuning_defaults(&t);
    rb.m.policy.split_policy = ATTN_SPLIT_AUTO;
    rb.m.policy.splits = 0;

    /* what the manifest validator cannot know is refused at plan time with
     * its field: a page outside this pool, a request that is not decode */
    rb.m.kv.page_indices[0] = (int32_t)rb.g.num_pages + 5;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_plan_host(&rb.m, &rb.g, &dev, &t, &p, &err),
                     ATTN_E_PAGE_OUT_OF_POOL);
    assert_non_null(strstr(err.field, "kv.page_indices"));
    assert_null(p.priv);
    attn_rb_free(&rb);
    decode_batch(&rb, 12);
    rb.m.requests[1].new_len = 2;
    memset(&p, 0, sizeof p);
    assert_int_equal(attn_cuda_plan_host(&rb.m, &rb.g, &dev, &t, &p, &err), ATTN_E_PHASE);
    assert_string_equal(err.field, "requests[1].new_len");
    attn_rb_free(&rb);
}

/* The engine declares the schedules it runs: partition only, so the
 * registry refuses "unified" for it instead of relabelling. */
static void test_schedules_declared(void **state)
{
    (void)state;
    const attn_engine_ops *ops = attn_cuda_engine_ops();
    assert_int_equal(ops->version, ATTN_ENGINE_OPS_VERSION);
    assert_true(attn_engine_implements(ops, ATTN_SCHED_PARTITION));
    assert_true(attn_engine_implements(ops, ATTN_SCHED_AUTO));
    assert_false(attn_engine_implements(ops, ATTN_SCHED_UNIFIED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_head_dim_80_names_both_dims),
                                       cmocka_unit_test(test_plan_host_env_ledger_schedule),
                                       cmocka_unit_test(test_schedules_declared)};
    return cmocka_run_group_tests_name("cuda_admission", tests, NULL, NULL);
}
