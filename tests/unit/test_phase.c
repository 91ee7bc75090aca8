/* seed 0x08B/C/F: phases, ledgers, packed query offsets of a mixed batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "protocol/manifest.h"

static void test_phase_classify(void **state)
{
    (void)state;
    attn_phase ph = ATTN_PHASE_APPEND;
    assert_int_equal(attn_phase_classify(0, 5, &ph), 0);
    assert_int_equal(ph, ATTN_PHASE_PREFILL);
    assert_int_equal(attn_phase_classify(5, 3, &ph), 0);
    assert_int_equal(ph, ATTN_PHASE_APPEND);
    assert_int_equal(attn_phase_classify(8, 1, &ph), 0);
    assert_int_equal(ph, ATTN_PHASE_DECODE);
    /* anything else: no phase, and the output is left untouched */
    ph = ATTN_PHASE_DECODE;
    assert_int_equal(attn_phase_classify(0, 0, &ph), ATTN_E_PHASE);
    assert_int_equal(attn_phase_classify(7, 0, &ph), ATTN_E_PHASE);
    assert_int_equal(attn_phase_classify(3, -1, &ph), ATTN_E_PHASE);
    assert_int_equal(attn_phase_classify(-1, 1, &ph), ATTN_E_PHASE);
    assert_int_equal(ph, ATTN_PHASE_DECODE);
    assert_string_equal(attn_phase_name(ATTN_PHASE_PREFILL), "prefill");
    assert_string_equal(attn_phase_name(ATTN_PHASE_APPEND), "append");
    assert_string_equal(attn_phase_name(ATTN_PHASE_DECODE), "decode");
}

/* seed 0x08C fixture table: rectangle / visible / causally masked / post length */
static void test_phase_fixture_ledgers(void **state)
{
    (void)state;
    static const struct {
        int64_t T, C, rect, vis, masked, post;
    } rows[] = {
        {0, 5, 25, 15, 10, 5}, /* prefill */
        {5, 3, 24, 21, 3, 8},  /* append */
        {8, 1, 9, 9, 0, 9},    /* decode */
        {0, 4, 16, 10, 6, 4},  /* seed 0x08E training S = 4 as T = 0, C = S */
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        attn_phase_ledger l;
        attn_phase_ledger_of(rows[k].T, rows[k].C, &l);
        assert_int_equal(l.rect, rows[k].rect);
        assert_int_equal(l.visible, rows[k].vis);
        assert_int_equal(l.causal_masked, rows[k].masked);
        assert_int_equal(l.post_len, rows[k].post);
        assert_int_equal(l.rect - l.visible, l.causal_masked);
    }
    /* seed 0x08D: decode is C = 1, visible T + 1, nothing causally masked */
    for (int64_t T = 1; T < 50; T += 7) {
        attn_phase_ledger l;
        attn_phase_ledger_of(T, 1, &l);
        assert_int_equal(l.visible, T + 1);
        assert_int_equal(l.causal_masked, 0);
    }
}

/* seed 0x08F: the three-request mixed batch */
static const attn_request_desc g_mix[3] = {
    {"mix_prefill", 0, 4},
    {"mix_append", 6, 2},
    {"mix_decode", 9, 1},
};

static void test_mixed_batch(void **state)
{
    (void)state;
    int32_t qo[4];
    attn_batch_ledger bl;
    assert_int_equal(attn_qo_indptr_derive(g_mix, 3, qo, NULL), 0);
    assert_int_equal(qo[0], 0);
    assert_int_equal(qo[1], 4);
    assert_int_equal(qo[2], 6);
    assert_int_equal(qo[3], 7);
    assert_int_equal(attn_qo_indptr_check(g_mix, 3, qo, 4, NULL), 0);

    static const int64_t vis[3] = {10, 15, 10}, rect[3] = {16, 16, 10}, post[3] = {4, 8, 10};
    for (int b = 0; b < 3; b++) {
        attn_phase_ledger l;
        attn_phase_ledger_of(g_mix[b].cache_len, g_mix[b].new_len, &l);
        assert_int_equal(l.visible, vis[b]);
        assert_int_equal(l.rect, rect[b]);
        assert_int_equal(l.post_len, post[b]);
    }

    assert_int_equal(attn_batch_ledger_build(g_mix, 3, &bl, NULL), 0);
    assert_int_equal(bl.visible, 35);
    assert_int_equal(bl.rect, 42);
    assert_int_equal(bl.total_q, 7); /* 7 rows appended */
    assert_int_equal(bl.max_q, 4);
    assert_int_equal(bl.max_kv, 10);
    assert_int_equal(bl.envelope, 120);   /* 3 x 4 x 10 */
    assert_int_equal(bl.beyond_rect, 78); /* outside even the request rectangles */
    assert_int_equal(bl.phase_count[ATTN_PHASE_PREFILL], 1);
    assert_int_equal(bl.phase_count[ATTN_PHASE_APPEND], 1);
    assert_int_equal(bl.phase_count[ATTN_PHASE_DECODE], 1);
}

static void test_qo_indptr_failures(void **state)
{
    (void)state;
    attn_error_detail e;
    int32_t bad_start[4] = {1, 4, 6, 7};
    int32_t bad_mono[4] = {0, 4, 3, 7};
    int32_t bad_diff[4] = {0, 4, 5, 7};
    int32_t good[4] = {0, 4, 6, 7};

    assert_int_equal(attn_qo_indptr_check(g_mix, 3, bad_start, 4, &e), ATTN_E_QO_INDPTR);
    assert_string_equal(e.field, "qo_indptr[0]");
    assert_int_equal(attn_qo_indptr_check(g_mix, 3, bad_mono, 4, &e), ATTN_E_QO_INDPTR);
    assert_string_equal(e.field, "qo_indptr[2]");
    assert_int_equal(attn_qo_indptr_check(g_mix, 3, bad_diff, 4, &e), ATTN_E_QO_INDPTR);
    assert_string_equal(e.field, "qo_indptr[2]");
    assert_int_equal(attn_qo_indptr_check(g_mix, 3, good, 3, &e), ATTN_E_QO_INDPTR);
    assert_string_equal(e.field, "qo_indptr");
    assert_int_equal(attn_qo_indptr_check(g_mix, 3, NULL, 0, &e), ATTN_E_QO_INDPTR);
}

static void test_ledger_rejects(void **state)
{
    (void)state;
    attn_error_detail e;
    attn_batch_ledger bl;
    attn_request_desc r[2] = {{"a", 4, 1}, {"b", 3, 0}};
    int32_t qo[3];
    assert_int_equal(attn_batch_ledger_build(r, 0, &bl, &e), ATTN_E_EMPTY_BATCH);
    assert_int_equal(attn_batch_ledger_build(r, 2, &bl, &e), ATTN_E_PHASE);
    assert_string_equal(e.field, "requests[1].new_len");
    assert_int_equal(attn_qo_indptr_derive(r, 2, qo, &e), ATTN_E_PHASE);
    assert_string_equal(e.field, "requests[1].new_len");
    r[1].cache_len = -2;
    r[1].new_len = 1;
    assert_int_equal(attn_batch_ledger_build(r, 2, &bl, &e), ATTN_E_PHASE);
    assert_string_equal(e.field, "requests[1].cache_len");
}

static void test_summary_lists_phases(void **state)
{
    (void)state;
    attn_manifest m;
    char buf[1024];
    int32_t qo[4] = {0, 4, 6, 7};
    memset(&m, 0, sizeof m);
    m.num_requests = 3;
    m.requests = (attn_request_desc *)g_mix;
    m.qo_indptr = qo;
    size_t n = attn_manifest_summary(&m, buf, sizeof buf);
    assert_true(n > 0 && n < sizeof buf);
    assert_non_null(strstr(buf, "mix_prefill prefill (T=0, C=4) q[0:4) visible 10/16"));
    assert_non_null(strstr(buf, "mix_append append (T=6, C=2) q[4:6) visible 15/16"));
    assert_non_null(strstr(buf, "mix_decode decode (T=9, C=1) q[6:7) visible 10/10"));
    assert_non_null(strstr(buf, "visible 35/42, 7 rows appended, envelope 120 (78 beyond"));
    /* truncation reports the length needed, like snprintf */
    char small[16];
    assert_int_equal(attn_manifest_summary(&m, small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phase_classify), cmocka_unit_test(test_phase_fixture_ledgers),
        cmocka_unit_test(test_mixed_batch),    cmocka_unit_test(test_qo_indptr_failures),
        cmocka_unit_test(test_ledger_rejects), cmocka_unit_test(test_summary_lists_phases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
