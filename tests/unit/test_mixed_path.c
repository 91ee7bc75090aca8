/* Where the fused mixed kernel serves (kernels/common/mixed_path.h), without
 * a GPU: head dims 64 and 128 with qk = vo, bf16/fp16 K/V with q in the
 * same dtype, power-of-two pages of at least 8 rows; each refusal one
 * sentence naming its limit; and the decode pieces the fused launch runs
 * one per CTA (items x H_kv x chunks of 16 query heads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/common/mixed_path.h"

static void test_serves(void **state)
{
    (void)state;
    const uint32_t dims[2] = {64, 128}, pages[4] = {8, 16, 64, 128};
    const attn_dtype kv[2] = {ATTN_BF16, ATTN_FP16};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++)
                assert_null(attn_mixed_fused_refusal(dims[i], dims[i], kv[k], kv[k], pages[j]));
}

static void test_refusals(void **state)
{
    (void)state;
    const char *w;
    assert_non_null(w = attn_mixed_fused_refusal(256, 256, ATTN_BF16, ATTN_BF16, 16));
    assert_non_null(strstr(w, "head_dim 64 and 128"));
    assert_non_null(w = attn_mixed_fused_refusal(128, 64, ATTN_BF16, ATTN_BF16, 16));
    assert_non_null(strstr(w, "qk = vo"));
    assert_non_null(w = attn_mixed_fused_refusal(128, 128, ATTN_FP32, ATTN_FP32, 16));
    assert_non_null(strstr(w, "bf16 and fp16"));
    assert_non_null(w = attn_mixed_fused_refusal(128, 128, ATTN_FP32, ATTN_BF16, 16));
    assert_non_null(strstr(w, "q in the K/V dtype"));
    const uint32_t bad_pages[4] = {1, 4, 24, 0};
    for (int j = 0; j < 4; j++) {
        assert_non_null(w = attn_mixed_fused_refusal(128, 128, ATTN_BF16, ATTN_BF16, bad_pages[j]));
        assert_non_null(strstr(w, "page_size"));
    }
}

static void test_pieces(void **state)
{
    (void)state;
    assert_int_equal(attn_mixed_fused_pieces(64, 32, 8), 64 * 8);    /* g 4: one chunk */
    assert_int_equal(attn_mixed_fused_pieces(8, 128, 8), 8 * 8);     /* g 16: one chunk */
    assert_int_equal(attn_mixed_fused_pieces(8, 136, 8), 8 * 8 * 2); /* g 17: two chunks */
    assert_int_equal(attn_mixed_fused_pieces(3, 64, 1), 3 * 1 * 4);  /* g 64: four */
    assert_int_equal(attn_mixed_fused_pieces(5, 30, 8), 0);          /* not whole */
    assert_int_equal(attn_mixed_fused_pieces(5, 32, 0), 0);          /* no K/V heads */
    assert_int_equal(attn_mixed_fused_pieces(1ull << 33, 8, 8), (1ull << 33) * 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serves),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
