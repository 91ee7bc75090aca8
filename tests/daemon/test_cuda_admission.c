/* The real CUDA decode engine's admission (seed 0x07B/0x07D), on any machine:
 * a rejection names every failing factor, each head dimension separately.
 * Built against the CUDA engine when nvcc exists (CI compiles it); skipped
 * in a CUDA=0 build. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tests/lib/random_batch.h"
#ifdef ATTN_WITH_CUDA
#include "engines/cuda/cuda_engine.h"
#endif

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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_head_dim_80_names_both_dims)};
    return cmocka_run_group_tests_name("cuda_admission", tests, NULL, NULL);
}
