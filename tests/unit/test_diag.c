/* seed 0x07I, 0x0AH, 0x0B: the typed diagnostic, its msgpack and JSON forms, the evidence ladder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dispatch_fixture.h"
#include "planner/diag.h"
#include "planner/diag_encode.h"
#include "protocol/diag.h"

/* seed 0x0AH ladder with the capping rule: one row per situation. */
static void test_evidence_ladder(void **state)
{
    (void)state;
    static const struct {
        attn_evidence_inputs in;
        int level;
        const char *cap;
    } rows[] = {
        {{false, true, true, ATTN_KERNELS_TRACED, true, true, true}, 0, "source revision"},
        {{true, false, true, ATTN_KERNELS_TRACED, true, true, true}, 2, "loaded artifact"},
        {{true, true, false, ATTN_KERNELS_TRACED, true, true, true}, 3, "call key"},
        {{true, true, true, ATTN_KERNELS_NONE, false, false, false}, 4, "no kernels"},
        {{true, true, true, ATTN_KERNELS_DECLARED, true, true, true}, 4, "declared"},
        {{true, true, true, ATTN_KERNELS_TRACED, false, false, true}, 5, "verify: true"},
        {{true, true, true, ATTN_KERNELS_HOST, true, false, true}, 5, "failed"},
        {{true, true, true, ATTN_KERNELS_TRACED, true, true, false}, 5, "not timed"},
        {{true, true, true, ATTN_KERNELS_HOST, true, true, true}, 6, ""},
        {{true, true, true, ATTN_KERNELS_TRACED, true, true, true}, 6, ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char why[160];
        int level = attn_evidence_level(&rows[i].in, why, sizeof why);
        if (level != rows[i].level || strstr(why, rows[i].cap) == NULL)
            fail_msg("row %zu: level %d (%s), expected %d (%s)", i, level, why, rows[i].level,
                     rows[i].cap);
        if (level == 6)
            assert_string_equal(why, "");
    }
}

typedef struct built {
    fx_call c;
    attn_registry reg;
    fx_engine cuda, cpu;
    fx_device dev;
    attn_selection sel;
    attn_key key;
    attn_split_plan plan;
    uint32_t splits[1], slot_indptr[2];
    attn_work_item items[3];
    attn_diag dg;
} built;

/* A diagnostic of the seed 0x07D head-dimension fallback, planned and run. */
static built *build(void)
{
    built *b = calloc(1, sizeof *b);
    fx_base(&b->c);
    b->c.g.head_dim_qk = b->c.g.head_dim_vo = 80;
    b->c.m.policy.graph = false;
    b->dev.present = 1;
    fx_registry(&b->reg, &b->cuda, &b->cpu, &b->dev);
    assert_int_equal(attn_registry_select(&b->reg, &b->c.m, &b->c.g, &b->sel, NULL), 0);
    assert_int_equal(fx_call_key(&b->c, &b->key), 0);
    b->splits[0] = 3;
    b->slot_indptr[1] = 3;
    for (uint32_t i = 0; i < 3; i++)
        b->items[i] = (attn_work_item){0, i, i * 1366, i == 2 ? 4096 : (i + 1) * 1366};
    b->plan = (attn_split_plan){1, b->splits, b->slot_indptr, 3, 3, b->items, 3, ATTN_SPLIT_FA, 0};
    assert_int_equal(attn_diag_init(&b->dg, &b->key), 0);
    attn_diag_set_selection(&b->dg, &b->sel);
    attn_diag_set_schedule(&b->dg, &b->plan, ATTN_SCHED_PARTITION, ATTN_ABI_LSE_O);
    attn_diag_set_requests(&b->dg, b->c.m.requests, b->c.m.num_requests);
    assert_int_equal(
        attn_diag_add_workspace_field(&b->dg, "partial_o", "fp32", 3 * 32 * 80, 3 * 32 * 80 * 4),
        0);
    assert_int_equal(attn_diag_add_workspace(&b->dg, "partial_lse", 3 * 32 * 4), 0);
    attn_key pk;
    attn_key_init(&pk);
    assert_int_equal(attn_plan_key_build(&b->key, &pk), 0);
    char pk_hex[ATTN_SHA256_HEX];
    assert_int_equal(attn_key_sha256(&pk, pk_hex), 0);
    attn_plan_decision ev;
    attn_plan_decide(NULL, &pk, &ev);
    attn_diag_set_plan(&b->dg, pk_hex, &ev, 7);
    attn_key_fini(&pk);
    attn_exec_report rep = {0};
    rep.num_kernels = 2;
    snprintf(rep.kernels[0].symbol, sizeof rep.kernels[0].symbol, "cpu_produce_f32");
    rep.kernels[0].launches = 1;
    snprintf(rep.kernels[1].symbol, sizeof rep.kernels[1].symbol, "cpu_merge_f32");
    rep.kernels[1].launches = 1;
    rep.engine_us = 42.5;
    snprintf(rep.timing_method, sizeof rep.timing_method, "host_clock");
    attn_diag_set_report(&b->dg, &rep, ATTN_KERNELS_HOST);
    return b;
}

static void destroy(built *b)
{
    attn_key_fini(&b->key);
    free(b);
}

static const msgpack_object *mp_get(const msgpack_object *map, const char *k)
{
    if (map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(k) &&
            memcmp(kv->key.via.str.ptr, k, kv->key.via.str.size) == 0)
            return &kv->val;
    }
    return NULL;
}

static int mp_str_is(const msgpack_object *o, const char *s)
{
    return o != NULL && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
           memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* The msgpack form is one well-formed map and agrees with the JSON form key by key. */
static void test_msgpack_and_json_agree(void **state)
{
    (void)state;
    built *b = build();
    attn_diag_finish(&b->dg, "ab12", true);
    assert_int_equal(b->dg.evidence_level, 5);

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(attn_diag_pack(&b->dg, &pk), 0);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, sb.size); /* declared counts match what was written */
    const msgpack_object *root = &up.data;
    assert_int_equal(root->type, MSGPACK_OBJECT_MAP);
    assert_int_equal(root->via.map.size, 27);

    json_t *js = attn_diag_to_json(&b->dg);
    assert_non_null(js);
    assert_int_equal(json_object_size(js), 27);
    for (uint32_t i = 0; i < root->via.map.size; i++) {
        char k[64];
        const msgpack_object_kv *kv = &root->via.map.ptr[i];
        snprintf(k, sizeof k, "%.*s", (int)kv->key.via.str.size, kv->key.via.str.ptr);
        if (json_object_get(js, k) == NULL)
            fail_msg("JSON form lacks %s", k);
    }
    assert_true(mp_str_is(mp_get(root, "call_key_sha256"), b->dg.call_key_sha256));
    assert_string_equal(json_string_value(json_object_get(js, "call_key_sha256")),
                        b->dg.call_key_sha256);
    assert_true(mp_str_is(mp_get(root, "selected"), "cpu_ref"));
    assert_true(mp_str_is(mp_get(root, "fallback"), "backend"));
    assert_string_equal(json_string_value(json_object_get(js, "fallback")), "backend");
    /* candidates keep both failed predicates of the fast path */
    const msgpack_object *cands = mp_get(root, "candidates");
    assert_int_equal(cands->via.array.size, 2);
    const msgpack_object *reasons = mp_get(&cands->via.array.ptr[0], "reasons");
    assert_int_equal(reasons->via.array.size, 2);
    assert_true(
        mp_str_is(mp_get(&reasons->via.array.ptr[0], "text"), "head_dim_qk=80 unsupported"));
    assert_true(mp_str_is(mp_get(&reasons->via.array.ptr[1], "field"), "head_dim_vo"));
    json_t *jr = json_object_get(json_array_get(json_object_get(js, "candidates"), 0), "reasons");
    assert_string_equal(json_string_value(json_object_get(json_array_get(jr, 1), "text")),
                        "head_dim_vo=80 unsupported");
    /* the call key travels as readable fields */
    const msgpack_object *ck = mp_get(root, "call_key");
    assert_int_equal(mp_get(ck, "head_dim_qk")->via.u64, 80);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(js, "call_key"), "head_dim_qk")), 80);
    const msgpack_object *kv_len = mp_get(ck, "kv_len");
    assert_int_equal(kv_len->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(kv_len->via.array.ptr[0].via.u64, 4096);
    /* schedule, workspace, plan, kernels, timing */
    const msgpack_object *sch = mp_get(root, "schedule");
    assert_int_equal(mp_get(sch, "splits")->via.array.ptr[0].via.u64, 3);
    assert_true(mp_str_is(mp_get(sch, "state_abi"), "lse_o"));
    assert_int_equal(mp_get(mp_get(root, "workspace"), "partial_o")->via.u64, 3 * 32 * 80 * 4);
    /* the phase of each request (the fixture is one decode) and the ledger's dtypes */
    const msgpack_object *ph = mp_get(sch, "phases"); /* one letter per request */
    assert_int_equal(ph->via.str.size, b->c.m.num_requests);
    assert_int_equal(ph->via.str.ptr[0], 'D');
    const msgpack_object *wl = mp_get(root, "workspace_ledger");
    assert_int_equal(wl->via.array.size, 2);
    assert_true(mp_str_is(mp_get(&wl->via.array.ptr[0], "dtype"), "fp32"));
    assert_int_equal(mp_get(&wl->via.array.ptr[0], "elems")->via.u64, 3 * 32 * 80);
    assert_true(mp_str_is(mp_get(mp_get(root, "plan_cache"), "event"), "miss"));
    assert_int_equal(mp_get(mp_get(root, "plan_cache"), "plan_id")->via.u64, 7);
    const msgpack_object *ks = mp_get(root, "kernels");
    assert_true(mp_str_is(mp_get(ks, "source"), "observed"));
    assert_int_equal(mp_get(ks, "items")->via.array.size, 2);
    assert_float_equal(mp_get(root, "timing_us")->via.f64, 42.5, 0);
    assert_true(mp_str_is(mp_get(root, "timing_method"), "host_clock"));
    assert_int_equal(mp_get(root, "verify")->type, MSGPACK_OBJECT_NIL);
    assert_true(json_is_null(json_object_get(js, "verify")));
    assert_int_equal(mp_get(root, "evidence_level")->via.u64, 5);
    assert_true(mp_str_is(mp_get(root, "artifact_sha256"), "ab12"));
    json_decref(js);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    destroy(b);
}

/* A failed selection still encodes: the error reply carries the vector. */
static void test_error_diag_encodes(void **state)
{
    (void)state;
    built *b = calloc(1, sizeof *b);
    fx_base(&b->c);
    static uint8_t bits[512];
    b->c.m.mask.kind = ATTN_MASK_DENSE;
    b->c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    b->c.m.mask.dense_bits = bits;
    b->c.m.mask.dense_bytes = sizeof bits;
    b->dev.present = 1;
    fx_registry(&b->reg, &b->cuda, &b->cpu, &b->dev);
    assert_int_equal(attn_registry_select(&b->reg, &b->c.m, &b->c.g, &b->sel, NULL),
                     ATTN_E_NO_BACKEND);
    assert_int_equal(fx_call_key(&b->c, &b->key), 0);
    assert_int_equal(attn_diag_init(&b->dg, &b->key), 0);
    attn_diag_set_selection(&b->dg, &b->sel);
    attn_diag_finish(&b->dg, "ab12", true);
    assert_int_equal(b->dg.evidence_level, 3); /* no selection: a forced error is no execution */
    json_t *js = attn_diag_to_json(&b->dg);
    assert_true(json_is_null(json_object_get(js, "selected")));
    assert_true(json_is_null(json_object_get(js, "plan_cache")));
    assert_int_equal(json_array_size(json_object_get(js, "candidates")), 2);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(attn_diag_pack(&b->dg, &pk), 0);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, sb.size);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    json_decref(js);
    destroy(b);
}

/* With verify and a traced kernel the reply reaches 6, and explain prints the ladder. */
static void test_verify_level_and_explain(void **state)
{
    (void)state;
    built *b = build();
    attn_verify_result v = {.done = true,
                            .passed = true,
                            .rtol = 1e-2,
                            .lse_atol = 1e-3,
                            .max_abs = 1e-4,
                            .max_rel = 2e-4,
                            .rel_l2 = 1e-4,
                            .lse_max_abs = 1e-5};
    snprintf(v.reference, sizeof v.reference, "cpu_ref fp64");
    snprintf(v.metric, sizeof v.metric, "rel_l2");
    attn_diag_set_verify(&b->dg, &v);
    attn_diag_finish(&b->dg, "ab12", true);
    assert_int_equal(b->dg.evidence_level, 6);
    json_t *js = attn_diag_to_json(&b->dg);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(attn_diag_explain(js, f), 0);
    fclose(f);
    assert_non_null(strstr(text, "cuda_decode"));
    assert_non_null(strstr(text, "rejected (above the winner)"));
    assert_non_null(strstr(text, "[shape] head_dim_qk: head_dim_qk=80 unsupported"));
    assert_non_null(strstr(text, "selected cpu_ref, fallback backend"));
    assert_non_null(strstr(text, "plan     miss (id 7)"));
    assert_non_null(strstr(text, "cpu_produce_f32 x1"));
    assert_non_null(strstr(text, "verify   PASS"));
    assert_non_null(strstr(text, "evidence level 6 (correctness checked and timed)"));
    assert_non_null(strstr(text, "[x] 6"));
    free(text);
    /* not a diagnostic */
    json_t *other = json_object();
    f = open_memstream(&text, &len);
    assert_int_equal(attn_diag_explain(other, f), ATTN_E_TYPE);
    fclose(f);
    free(text);
    json_decref(other);
    json_decref(js);
    /* a failed comparison caps the level at 5 */
    v.passed = false;
    attn_diag_set_verify(&b->dg, &v);
    attn_diag_finish(&b->dg, "ab12", true);
    assert_int_equal(b->dg.evidence_level, 5);
    assert_non_null(strstr(b->dg.evidence_cap, "failed"));
    destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evidence_ladder),
        cmocka_unit_test(test_msgpack_and_json_agree),
        cmocka_unit_test(test_error_diag_encodes),
        cmocka_unit_test(test_verify_level_and_explain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
