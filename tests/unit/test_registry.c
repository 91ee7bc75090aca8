/* seed 0x07A-0x07D: registry, candidate domain, admission vectors, policies, fallbacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dispatch_fixture.h"
#include "planner/registry.h"

typedef struct world {
    attn_registry reg;
    fx_engine cuda, cpu;
    fx_device dev;
    attn_selection sel;
} world;

static int setup(void **state)
{
    world *w = calloc(1, sizeof *w);
    w->dev.present = 1;
    fx_registry(&w->reg, &w->cuda, &w->cpu, &w->dev);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static const attn_candidate *cand(const attn_selection *s, const char *name)
{
    for (uint32_t i = 0; i < s->num_candidates; i++)
        if (strcmp(s->candidates[i].name, name) == 0)
            return &s->candidates[i];
    return NULL;
}

static int has_reason(const attn_candidate *c, attn_admit_factor f, const char *field)
{
    for (uint32_t i = 0; i < c->admission.num_reasons; i++)
        if (c->admission.reasons[i].factor == f &&
            strcmp(c->admission.reasons[i].field, field) == 0)
            return 1;
    return 0;
}

static const char *selected_name(const attn_selection *s)
{
    return s->selected >= 0 ? s->candidates[s->selected].name : NULL;
}

/* seed 0x07D, the seven-case matrix with our backends: five selections,
 * two errors, two backend fallbacks. */
static void test_seven_case_matrix(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    int selections = 0, errors = 0, fallbacks = 0;

    /* 1. paged decode: the fast path, no rejection above the winner */
    fx_base(&c);
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cuda_decode");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_NONE);
    assert_false(cand(&w->sel, "cuda_decode")->above_winner);
    assert_ptr_equal(w->sel.engine, &w->cuda.inst);
    /* the full vector is kept after the winner: cpu_ref rejects graph mode */
    assert_true(has_reason(cand(&w->sel, "cpu_ref"), ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    selections++;

    /* 2. custom (dense) mask, graph off: backend fallback to the reference */
    static uint8_t bits[512];
    fx_base(&c);
    c.m.mask.kind = ATTN_MASK_DENSE;
    c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    c.m.mask.dense_bits = bits;
    c.m.mask.dense_bytes = sizeof bits;
    c.m.policy.graph = false;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_BACKEND);
    assert_true(cand(&w->sel, "cuda_decode")->above_winner);
    assert_true(has_reason(cand(&w->sel, "cuda_decode"), ATTN_ADMIT_MASK, "mask.kind"));
    assert_int_equal(cand(&w->sel, "cuda_decode")->admission.num_reasons, 1);
    assert_non_null(strstr(w->sel.fallback_reason, "mask_kind=dense unsupported"));
    selections++;
    fallbacks++;

    /* 3. d_qk = d_v = 80, graph off: fallback keeping both failed predicates */
    fx_base(&c);
    c.g.head_dim_qk = c.g.head_dim_vo = 80;
    c.m.policy.graph = false;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_BACKEND);
    const attn_candidate *cd = cand(&w->sel, "cuda_decode");
    assert_int_equal(cd->admission.num_reasons, 2);
    assert_string_equal(cd->admission.reasons[0].text, "head_dim_qk=80 unsupported");
    assert_string_equal(cd->admission.reasons[1].text, "head_dim_vo=80 unsupported");
    selections++;
    fallbacks++;

    /* 4. forced fast path with the custom mask: error with its reasons, no fallback */
    fx_base(&c);
    c.m.mask.kind = ATTN_MASK_DENSE;
    c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    c.m.mask.dense_bits = bits;
    c.m.mask.dense_bytes = sizeof bits;
    c.m.policy.graph = false;
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "policy.backend");
    assert_non_null(strstr(err.message, "mask_kind=dense unsupported"));
    assert_int_equal(w->sel.selected, -1);
    assert_null(w->sel.engine);
    assert_true(w->sel.forced);
    /* cpu_ref admitted, but forced fails closed */
    assert_true(cand(&w->sel, "cpu_ref")->admission.admitted);
    errors++;

    /* 5. prefill S_q = 128: the candidate domain changes (cuda_decode leaves it) */
    fx_base(&c);
    c.req[0].cache_len = 0;
    c.req[0].new_len = 128;
    c.qo_indptr[1] = 128;
    c.m.policy.graph = false;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_NONE);
    assert_null(cand(&w->sel, "cuda_decode"));
    assert_int_equal(w->sel.num_out_of_domain, 1);
    assert_string_equal(w->sel.out_of_domain[0].name, "cuda_decode");
    selections++;

    /* 6. CPU decode: CUDA backends leave the domain */
    fx_base(&c);
    fx_to_cpu(&c);
    c.m.policy.graph = false;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_NONE);
    assert_int_equal(w->sel.num_candidates, 1);
    assert_string_equal(w->sel.out_of_domain[0].why, "platform cpu not served");
    selections++;

    /* 7. custom mask under graph mode: every in-domain candidate has reasons */
    fx_base(&c);
    c.m.mask.kind = ATTN_MASK_DENSE;
    c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    c.m.mask.dense_bits = bits;
    c.m.mask.dense_bytes = sizeof bits;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_NO_BACKEND);
    assert_int_equal(w->sel.num_candidates, 2);
    for (uint32_t i = 0; i < w->sel.num_candidates; i++) {
        assert_false(w->sel.candidates[i].admission.admitted);
        assert_true(w->sel.candidates[i].admission.num_reasons >= 1);
    }
    assert_true(has_reason(cand(&w->sel, "cuda_decode"), ATTN_ADMIT_MASK, "mask.kind"));
    assert_true(has_reason(cand(&w->sel, "cpu_ref"), ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    errors++;

    assert_int_equal(selections, 5);
    assert_int_equal(errors, 2);
    assert_int_equal(fallbacks, 2);
}

/* seed 0x07B: a rejection is the full vector, not the first reason. */
static void test_rejection_is_a_vector(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    w->dev.present = 0;
    c.g.head_dim_qk = 96;
    c.g.head_dim_vo = 64;
    c.g.page_size = 8;
    c.g.kv_dtype = ATTN_FP32;
    c.m.q_dtype = ATTN_BF16;
    c.m.mask.kind = ATTN_MASK_FLASHMASK;
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_BACKEND_REJECTED);
    const attn_candidate *cd = cand(&w->sel, "cuda_decode");
    assert_true(has_reason(cd, ATTN_ADMIT_HARDWARE, "device"));
    assert_true(has_reason(cd, ATTN_ADMIT_KV_DTYPE, "kv_dtype"));
    assert_true(has_reason(cd, ATTN_ADMIT_Q_DTYPE, "q_dtype"));
    assert_true(has_reason(cd, ATTN_ADMIT_SHAPE, "head_dim_qk"));
    assert_true(has_reason(cd, ATTN_ADMIT_SHAPE, "head_dim_vo"));
    assert_true(has_reason(cd, ATTN_ADMIT_LAYOUT, "page_size"));
    assert_true(has_reason(cd, ATTN_ADMIT_MASK, "mask.kind"));
    assert_int_equal(cd->admission.num_reasons, 7); /* d_vo 64 is fine; d_qk != d_vo is not */
    /* the error message carries every reason, not the first one */
    assert_non_null(strstr(err.message, "no CUDA device present"));
    assert_non_null(
        strstr(err.message, "7 reasons [hardware,kv_dtype,q_dtype,shape,shape,layout,mask]"));
    /* disabling by runtime policy is factor E */
    w->dev.present = 1;
    fx_base(&c);
    assert_int_equal(attn_registry_set_enabled(&w->reg, "cuda_decode", false), 0);
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_NO_BACKEND);
    assert_true(has_reason(cand(&w->sel, "cuda_decode"), ATTN_ADMIT_ENABLED, "backend"));
    assert_int_equal(attn_registry_set_enabled(&w->reg, "nope", false), ATTN_E_UNKNOWN_BACKEND);
}

/* seed 0x07A: semantic checks run before any backend and are errors. */
static void test_semantic_checks_before_backends(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    c.m.num_qo_heads = 30; /* not divisible by H_kv = 8 */
    w->dev.admit_calls = 0;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_HEADS);
    assert_string_equal(err.field, "num_qo_heads");
    assert_int_equal(w->dev.admit_calls, 0);
    assert_int_equal(w->sel.num_candidates, 0);

    fx_base(&c);
    c.req[0].cache_len = 0;
    c.req[0].new_len = 0;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_PHASE);
    assert_string_equal(err.field, "requests[0].new_len");

    fx_base(&c);
    c.g.page_size = 0;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_SEMANTIC);
    assert_string_equal(err.field, "page_size");

    fx_base(&c);
    c.m.mask.kind = ATTN_MASK_DENSE; /* polarity unset */
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_MASK_POLARITY);

    fx_base(&c);
    c.m.num_requests = 0;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_EMPTY_BATCH);

    fx_base(&c);
    snprintf(c.g.device, sizeof c.g.device, "tpu:0");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_SEMANTIC);
    assert_string_equal(err.field, "pool.device");
    assert_int_equal(w->dev.admit_calls, 0);
}

/* Malformed policies get their specific errors. */
static void test_malformed_policies(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "Fast Path!");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), ATTN_E_POLICY);
    assert_string_equal(err.field, "policy.backend");
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "flash_magic");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_UNKNOWN_BACKEND);
    assert_string_equal(err.field, "policy.backend");
    assert_non_null(strstr(err.message, "cuda_decode, cpu_ref"));

    /* a CPU-only build: cuda_decode is declared (known) but not installed */
    attn_registry r;
    attn_registry_init(&r);
    assert_int_equal(attn_registry_add_platforms(&r, &w->cpu.inst, 1u << ATTN_PLATFORM_CUDA, &err),
                     0);
    assert_int_equal(attn_registry_declare(&r, "cuda_decode", ATTN_PLATFORM_CUDA, FX_DECODE, 10,
                                           "built without CUDA (make CUDA=0)", &err),
                     0);
    fx_base(&c);
    c.m.policy.graph = false;
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&r, &c.m, &c.g, &w->sel, &err), ATTN_E_BACKEND_REJECTED);
    assert_non_null(strstr(err.message, "built without CUDA"));
    const attn_candidate *cd = cand(&w->sel, "cuda_decode");
    assert_false(cd->installed);
    assert_true(has_reason(cd, ATTN_ADMIT_INSTALLED, "backend"));
    /* the same call under auto falls back, and says so */
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "auto");
    assert_int_equal(attn_registry_select(&r, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_BACKEND);
    /* forcing a backend outside the call's domain fails closed too */
    fx_to_cpu(&c);
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&r, &c.m, &c.g, &w->sel, &err), ATTN_E_BACKEND_REJECTED);
    assert_non_null(strstr(err.message, "platform cpu not served"));

    /* registration errors */
    assert_int_equal(attn_registry_add(&r, &w->cpu.inst, &err), ATTN_E_POLICY); /* duplicate */
    fx_engine bad = w->cpu;
    bad.ops.name = "auto";
    assert_int_equal(attn_registry_add(&r, fx_engine_ready(&bad), &err), ATTN_E_POLICY);
    bad.ops.name = "Bad-Name";
    assert_int_equal(attn_registry_add(&r, fx_engine_ready(&bad), &err), ATTN_E_POLICY);
}

/* Priority, not registration order, decides under auto. */
static void test_priority_order(void **state)
{
    world *w = *state;
    attn_error_detail err;
    attn_registry r;
    attn_registry_init(&r);
    fx_engine slow = w->cuda, fast = w->cuda;
    slow.ops.name = "cuda_slow";
    slow.ops.priority = 50;
    fast.ops.name = "cuda_fast";
    fast.ops.priority = 5;
    assert_int_equal(attn_registry_add(&r, fx_engine_ready(&slow), &err), 0);
    assert_int_equal(attn_registry_add(&r, fx_engine_ready(&fast), &err), 0);
    fx_call c;
    fx_base(&c);
    assert_int_equal(attn_registry_select(&r, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cuda_fast");
    assert_string_equal(w->sel.candidates[1].name, "cuda_slow");
    assert_true(w->sel.candidates[1].admission.admitted); /* eligible, below the winner */
}

/* Mixed batches: a decode-only backend is in the domain (it serves one of
 * the phases) but its admission says which phase it lacks. */
static void test_mixed_batch_phase_factor(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    c.m.policy.graph = false;
    attn_request_desc two[2] = {{.id = "a", .cache_len = 10, .new_len = 1},
                                {.id = "b", .cache_len = 0, .new_len = 4}};
    int32_t qo[3] = {0, 1, 5};
    c.m.requests = two;
    c.m.num_requests = 2;
    c.m.qo_indptr = qo;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    const attn_candidate *cd = cand(&w->sel, "cuda_decode");
    assert_non_null(cd);
    assert_true(has_reason(cd, ATTN_ADMIT_PHASE, "requests"));
    assert_string_equal(cd->admission.reasons[0].text, "phase prefill not supported");
}

/* Algorithmic and semantic fallbacks are classified, never silent. */
static void test_fallback_classes(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    c.m.policy.splits = 4;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    uint32_t splits[1] = {2}, indptr[2] = {0, 2};
    attn_split_plan plan = {.num_requests = 1,
                            .num_splits = splits,
                            .slot_indptr = indptr,
                            .num_slots = 2,
                            .policy = ATTN_SPLIT_FIXED};
    attn_selection_note_plan(&w->sel, &c.m.policy, &plan);
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_ALGORITHMIC);
    assert_string_equal(w->sel.fallback_reason, "policy asked 4 splits; request 0 planned 2");
    splits[0] = 4;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    attn_selection_note_plan(&w->sel, &c.m.policy, &plan);
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_NONE);
    attn_selection_note_semantic(&w->sel, "pages gathered to host for the reference");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_SEMANTIC);
    assert_string_equal(attn_fallback_name(w->sel.fallback), "semantic");
    assert_string_equal(attn_admit_factor_name(ATTN_ADMIT_HEAD_RATIO), "head_ratio");
    assert_int_equal(attn_platform_of_device("cuda:3"), ATTN_PLATFORM_CUDA);
    assert_int_equal(attn_platform_of_device("cudax"), 0);
}

/* One instance per device: a pool on a device without an instance is an
 * admission reason naming `device` (not a run-time E_CUDA); a second
 * instance of the same engine serves its own device. */
static void test_instance_per_device(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    c.m.policy.graph = false;
    snprintf(c.g.device, sizeof c.g.device, "cuda:1");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_BACKEND);
    const attn_candidate *cd = cand(&w->sel, "cuda_decode");
    assert_true(has_reason(cd, ATTN_ADMIT_HARDWARE, "device"));
    assert_non_null(strstr(cd->admission.reasons[0].text, "cuda:1"));
    assert_non_null(strstr(cd->admission.reasons[0].text, "instances: cuda:0"));
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_non_null(strstr(err.message, "hardware"));

    /* a second instance of the same engine joins its entry */
    attn_engine second = w->cuda.inst;
    second.device = 1;
    snprintf(second.where, sizeof second.where, "cuda:1");
    assert_int_equal(attn_registry_add(&w->reg, &second, &err), 0);
    assert_int_equal(attn_registry_find(&w->reg, "cuda_decode")->num_instances, 2);
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_ptr_equal(w->sel.engine, &second);
    snprintf(c.g.device, sizeof c.g.device, "cuda:0");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_ptr_equal(w->sel.engine, &w->cuda.inst);
    /* one instance per device */
    attn_engine dup = second;
    assert_int_equal(attn_registry_add(&w->reg, &dup, &err), ATTN_E_POLICY);
    assert_ptr_equal(attn_registry_instance(attn_registry_find(&w->reg, "cuda_decode"), "cuda"),
                     &w->cuda.inst);
    assert_null(attn_registry_instance(attn_registry_find(&w->reg, "cuda_decode"), "cuda:7"));
}

/* seed 0x08G: a schedule an engine does not implement is refused (forced)
 * or falls back with the reason named, never run under another label. */
static void test_schedule_not_implemented(void **state)
{
    world *w = *state;
    attn_error_detail err;
    fx_call c;
    fx_base(&c);
    c.m.policy.graph = false;
    c.m.policy.schedule = ATTN_SCHED_UNIFIED;
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cuda_decode");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_true(has_reason(cand(&w->sel, "cuda_decode"), ATTN_ADMIT_PHASE, "policy.schedule"));
    snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "auto");
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cpu_ref");
    assert_int_equal(w->sel.fallback, ATTN_FALLBACK_BACKEND);
    assert_non_null(strstr(w->sel.fallback_reason, "schedule unified"));
    /* partition is implemented: the CUDA double keeps the call */
    c.m.policy.schedule = ATTN_SCHED_PARTITION;
    assert_int_equal(attn_registry_select(&w->reg, &c.m, &c.g, &w->sel, &err), 0);
    assert_string_equal(selected_name(&w->sel), "cuda_decode");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_seven_case_matrix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejection_is_a_vector, setup, teardown),
        cmocka_unit_test_setup_teardown(test_semantic_checks_before_backends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_policies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mixed_batch_phase_factor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_classes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instance_per_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schedule_not_implemented, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
