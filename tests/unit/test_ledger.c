/* seed 0x03D-0x03H: workspace ledgers by field, the reduction round trip and
 * head-width padding, in count-only and carving modes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "planner/ledger.h"
#include "planner/split.h"

/* seed 0x03E main call: N_cfg = 2 * 8 * 8 = 128, d_v = 128 */
static const attn_ledger_spec mlu_main = {.abi = ATTN_ABI_MLU,
                                          .states = 128,
                                          .head_dim_vo = 128,
                                          .vec_dtype = ATTN_FP32,
                                          .scalar_dtype = ATTN_FP32,
                                          .explicit_valid = true};
static const attn_ledger_spec lseo_main = {.abi = ATTN_ABI_LSE_O,
                                           .states = 128,
                                           .head_dim_vo = 128,
                                           .vec_dtype = ATTN_BF16,
                                           .scalar_dtype = ATTN_FP32,
                                           .explicit_valid = true};

static void test_mlu_ledger_03E(void **state)
{
    (void)state;
    attn_ledger l;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&mlu_main, NULL, 0, &l, &err), 0);
    assert_int_equal(l.payload_bytes, 66688); /* 128 * (128*4 + 2*4 + 1) */
    assert_int_equal(l.total_bytes, 66688);
    assert_int_equal(l.num_fields, 4);
    const attn_ledger_field *u = attn_ledger_find(&l, "partial_u");
    assert_non_null(u);
    assert_string_equal(u->dtype, "fp32");
    assert_int_equal(u->elems, 128 * 128);
    assert_int_equal(u->bytes, 65536);
    assert_null(u->ptr);
    assert_int_equal(attn_ledger_find(&l, "partial_m")->bytes, 512);
    assert_int_equal(attn_ledger_find(&l, "partial_l")->bytes, 512);
    const attn_ledger_field *v = attn_ledger_find(&l, "partial_valid");
    assert_string_equal(v->dtype, "uint8");
    assert_int_equal(v->bytes, 128);
    assert_null(attn_ledger_find(&l, "partial_O"));
}

static void test_lseo_ledger_03E(void **state)
{
    (void)state;
    attn_ledger l;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&lseo_main, NULL, 0, &l, &err), 0);
    assert_int_equal(l.payload_bytes, 33408); /* 128 * (128*2 + 4 + 1) */
    assert_int_equal(l.num_fields, 3);
    assert_string_equal(attn_ledger_find(&l, "partial_O")->dtype, "bf16");
    assert_int_equal(attn_ledger_find(&l, "partial_O")->bytes, 32768);
    assert_int_equal(attn_ledger_find(&l, "partial_LSE")->bytes, 512);
    /* the validity field is a choice: without it 128 bytes less */
    attn_ledger_spec s = lseo_main;
    s.explicit_valid = false;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), 0);
    assert_int_equal(l.payload_bytes, 33280);
}

/* seed 0x03F: 2 M_partial + B H_q d_v b_O + B H_q b_state */
static void test_reduction_path_03F(void **state)
{
    (void)state;
    attn_ledger l;
    attn_reduction_traffic t;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&mlu_main, NULL, 0, &l, &err), 0);
    attn_ledger_reduction_traffic(&l, 16, 128, ATTN_BF16, true, &t);
    assert_int_equal(t.partial_write, 66688);
    assert_int_equal(t.partial_read, 66688);
    assert_int_equal(t.output_write, 4096);
    assert_int_equal(t.lse_write, 64);
    assert_int_equal(t.total, 137536);
    assert_int_equal(attn_ledger_layout(&lseo_main, NULL, 0, &l, &err), 0);
    attn_ledger_reduction_traffic(&l, 16, 128, ATTN_BF16, true, &t);
    assert_int_equal(t.total, 70976);
    attn_ledger_reduction_traffic(&l, 16, 128, ATTN_BF16, false, &t);
    assert_int_equal(t.total, 70912);
}

/* seed 0x03F load ledger of the main call (T = [4096, 3587], H_q 8, H_kv 2,
 * d 128, bf16, S = 8) and the full two-launch demand of both ABIs. */
static void test_load_traffic_03F(void **state)
{
    (void)state;
    const int64_t kv[2] = {4096, 3587};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 8};
    attn_split_plan plan;
    attn_error_detail err = {0};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    const attn_load_spec ls = {8, 2, 128, 128, ATTN_BF16, ATTN_BF16};
    attn_load_traffic t;
    attn_plan_load_traffic(&plan, NULL, &ls, &t);
    assert_int_equal(t.q_unique, 4096);
    assert_int_equal(t.q_demand, 32768);
    assert_int_equal(t.kv_unique, 7867392);
    assert_int_equal(t.kv_demand, 31469568);
    attn_ledger l;
    attn_reduction_traffic r;
    assert_int_equal(attn_ledger_layout(&mlu_main, NULL, 0, &l, &err), 0);
    attn_ledger_reduction_traffic(&l, 16, 128, ATTN_BF16, true, &r);
    assert_int_equal(t.q_demand + t.kv_demand + r.total, 31639872);
    assert_int_equal(attn_ledger_layout(&lseo_main, NULL, 0, &l, &err), 0);
    attn_ledger_reduction_traffic(&l, 16, 128, ATTN_BF16, true, &r);
    assert_int_equal(t.q_demand + t.kv_demand + r.total, 31573312);
    attn_split_plan_free(&plan);
}

/* seed 0x03G head-width tail: d_v = 80 padded to 96 with 32-element vectors. */
static void test_head_width_padding_03G(void **state)
{
    (void)state;
    attn_ledger_spec s = mlu_main;
    s.states = 32;
    s.head_dim_vo = 80;
    attn_ledger l;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), 0);
    assert_int_equal(l.head_dim_padded, 80);
    assert_int_equal(l.payload_bytes, 10528);
    s.vec_align = 32;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), 0);
    assert_int_equal(l.head_dim_padded, 96);
    assert_int_equal(l.payload_bytes, 12576);
    assert_int_equal(12576 - 10528, 2048);
}

/* N_cfg and N_cap from plans: the main fixture and the 0x03G capacity one. */
static void test_states_from_plan(void **state)
{
    (void)state;
    attn_split_plan plan;
    attn_error_detail err = {0};
    const int64_t kv[2] = {4096, 3587};
    attn_split_params p = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 8};
    assert_int_equal(attn_split_plan_build_lengths(2, kv, NULL, &p, &plan, &err), 0);
    assert_int_equal(attn_plan_num_states(&plan, NULL, 8, false), 128);
    assert_int_equal(attn_plan_num_states(&plan, NULL, 8, true), 128);
    attn_ledger_spec s = mlu_main;
    s.states = attn_plan_num_states(&plan, NULL, 8, false);
    attn_ledger l;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), 0);
    assert_int_equal(l.payload_bytes, 66688);
    attn_split_plan_free(&plan);

    const int64_t cap_kv[2] = {3, 0};
    attn_split_params g = {.policy = ATTN_SPLIT_FIXED, .fixed_splits = 5, .graph_splits = 8};
    assert_int_equal(attn_split_plan_build_lengths(2, cap_kv, NULL, &g, &plan, &err), 0);
    assert_int_equal(attn_plan_num_states(&plan, NULL, 4, false), 12);
    assert_int_equal(attn_plan_num_states(&plan, NULL, 4, true), 64);
    attn_split_plan_free(&plan);

    /* append rows multiply states: 3 rows x 2 splits + 1 row x 1 split, x H_q 2 */
    const int64_t kv2[2] = {10, 4};
    const int64_t q2[2] = {3, 1};
    attn_split_params f = {.policy = ATTN_SPLIT_FIXED, .fixed_chunk = 5, .slot_capacity = 5};
    assert_int_equal(attn_split_plan_build_lengths(2, kv2, q2, &f, &plan, &err), 0);
    assert_int_equal(attn_plan_num_states(&plan, q2, 2, false), 14);
    /* two unused capacity slots count one row each */
    assert_int_equal(attn_plan_num_states(&plan, q2, 2, true), 18);
    attn_split_plan_free(&plan);
}

/* Count-only and carving run the same code: same offsets, pointers inside
 * the buffer, aligned, and a short buffer is E_WORKSPACE. */
static void test_count_then_carve(void **state)
{
    (void)state;
    attn_ledger_spec s = mlu_main;
    s.head_dim_vo = 80;
    s.vec_align = 32;
    s.states = 37;
    s.align_bytes = 256;
    attn_ledger sized, carved;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &sized, &err), 0);
    assert_true(sized.total_bytes >= sized.payload_bytes);
    assert_int_equal(sized.payload_bytes, 37 * (96 * 4 + 4 + 4 + 1));
    void *buf = aligned_alloc(256, (sized.total_bytes + 255) / 256 * 256);
    assert_non_null(buf);
    assert_int_equal(attn_ledger_layout(&s, buf, sized.total_bytes, &carved, &err), 0);
    assert_int_equal(carved.total_bytes, sized.total_bytes);
    for (uint32_t i = 0; i < carved.num_fields; i++) {
        const attn_ledger_field *f = &carved.fields[i];
        assert_int_equal(f->offset, sized.fields[i].offset);
        assert_int_equal(f->offset % 256, 0);
        assert_ptr_equal(f->ptr, (char *)buf + f->offset);
        assert_true(f->offset + f->bytes <= carved.total_bytes);
        if (i > 0)
            assert_true(f->offset >= carved.fields[i - 1].offset + carved.fields[i - 1].bytes);
        memset(f->ptr, 0xab, f->bytes); /* ASan: the carved range is writable */
    }
    assert_int_equal(attn_ledger_layout(&s, buf, sized.total_bytes - 1, &carved, &err),
                     ATTN_E_WORKSPACE);
    assert_string_equal(err.field, "partial_valid");
    assert_int_equal(attn_ledger_layout(&s, (char *)buf + 8, sized.total_bytes, &carved, &err),
                     ATTN_E_WORKSPACE);
    free(buf);
}

static void test_invalid_specs(void **state)
{
    (void)state;
    attn_ledger l;
    attn_error_detail err = {0};
    attn_ledger_spec s = mlu_main;
    s.vec_dtype = (attn_dtype)9;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), ATTN_E_DTYPE);
    assert_string_equal(err.field, "vec_dtype");
    s = mlu_main;
    s.head_dim_vo = 0;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), ATTN_E_SHAPE);
    s = mlu_main;
    s.align_bytes = 48;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), ATTN_E_RANGE);
    s = mlu_main;
    s.abi = (attn_state_abi)7;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), ATTN_E_POLICY);
    s = mlu_main;
    s.states = UINT64_MAX / 64;
    assert_int_equal(attn_ledger_layout(&s, NULL, 0, &l, &err), ATTN_E_TOO_LARGE);
}

static void test_ledger_json(void **state)
{
    (void)state;
    attn_ledger l;
    attn_error_detail err = {0};
    assert_int_equal(attn_ledger_layout(&lseo_main, NULL, 0, &l, &err), 0);
    char buf[512];
    size_t n = attn_ledger_json(&l, buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));
    assert_string_equal(
        buf, "{\"total_bytes\":33408,\"payload_bytes\":33408,\"head_dim_padded\":128,\"fields\":["
             "{\"name\":\"partial_O\",\"dtype\":\"bf16\",\"elems\":16384,\"bytes\":32768,"
             "\"offset\":0},"
             "{\"name\":\"partial_LSE\",\"dtype\":\"fp32\",\"elems\":128,\"bytes\":512,"
             "\"offset\":32768},"
             "{\"name\":\"partial_valid\",\"dtype\":\"uint8\",\"elems\":128,\"bytes\":128,"
             "\"offset\":33280}]}");
    char small[10];
    assert_int_equal(attn_ledger_json(&l, small, sizeof(small)), n);
    assert_int_equal(strlen(small), 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlu_ledger_03E),
        cmocka_unit_test(test_lseo_ledger_03E),
        cmocka_unit_test(test_reduction_path_03F),
        cmocka_unit_test(test_load_traffic_03F),
        cmocka_unit_test(test_head_width_padding_03G),
        cmocka_unit_test(test_states_from_plan),
        cmocka_unit_test(test_count_then_carve),
        cmocka_unit_test(test_invalid_specs),
        cmocka_unit_test(test_ledger_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
