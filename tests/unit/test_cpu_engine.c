/* The CPU reference engine against an unsplit fp64 reference, the seed's
 * worked numbers (0x02G, 0x08C, 0x04F), GQA and cache identities, both
 * state ABIs, fp16/bf16 storage, and the append transaction. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "attn/error.h"
#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "engines/cpu/engine.h"
#include "planner/engine.h"
#include "planner/split.h"
#include "protocol/manifest.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/random_batch.h"

/* Fresh random inputs every run: the base seed comes from ATTN_TEST_SEED
 * when set (to replay a failure) and from the clock otherwise; main prints
 * it. */
static uint64_t g_seed;

/* ---- dtype conversions -------------------------------------------------- */

static void test_dtype_known_values(void **state)
{
    (void)state;
    assert_int_equal(attn_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(attn_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(attn_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(attn_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(attn_f32_to_f16(65520.0f), 0x7c00); /* tie rounds to even: inf */
    assert_int_equal(attn_f32_to_f16(1e9f), 0x7c00);
    assert_int_equal(attn_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(attn_f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
    assert_int_equal(attn_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie to even: zero */
    assert_int_equal(attn_f32_to_f16(ldexpf(3, -26)), 0x0001); /* 0.75 ulp rounds up */
    assert_int_equal(attn_f32_to_f16(ldexpf(3, -25)), 0x0002); /* 1.5 ulp: tie to even 2 */
    assert_int_equal(attn_f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
    /* 1 + 2^-11 is the tie between 1 and 1 + 2^-10: even is 1 */
    assert_int_equal(attn_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);
    assert_int_equal(attn_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    uint16_t hn = attn_f32_to_f16(NAN);
    assert_true((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
    assert_true(isnan(attn_f16_to_f32(hn)));
    assert_true(attn_f16_to_f32(0x0001) == ldexpf(1, -24));
    assert_true(attn_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(isinf(attn_f16_to_f32(0xfc00)) && attn_f16_to_f32(0xfc00) < 0);

    assert_int_equal(attn_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(attn_f32_to_bf16(-1.0f), 0xbf80);
    assert_int_equal(attn_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80); /* tie, even */
    assert_int_equal(attn_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);
    assert_int_equal(attn_f32_to_bf16(3.4e38f), 0x7f80); /* rounds past the max: inf */
    uint16_t bn = attn_f32_to_bf16(NAN);
    assert_true((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0);
    /* a NaN whose payload lives only in the low half must stay NaN */
    float low_nan;
    uint32_t bits = 0x7f800001u;
    memcpy(&low_nan, &bits, sizeof low_nan);
    assert_true(isnan(attn_bf16_to_f32(attn_f32_to_bf16(low_nan))));
    assert_true(isnan(attn_f16_to_f32(attn_f32_to_f16(low_nan))));
}

/* Every finite half and bfloat16 survives widen-then-narrow bit for bit. */
static void test_dtype_exhaustive_roundtrip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = attn_f16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(attn_f32_to_f16(f), h);
        float g = attn_bf16_to_f32((uint16_t)h);
        if (!isnan(g))
            assert_int_equal(attn_f32_to_bf16(g), h);
    }
    /* narrowing is monotone and lands on a neighbour (round to nearest) */
    uint64_t s = g_seed ^ 7;
    for (int k = 0; k < 20000; k++) {
        float x = (float)((attn_rb_uniform(&s) * 2 - 1) * 70000.0);
        float r = attn_f16_to_f32(attn_f32_to_f16(x));
        if (fabsf(x) < 65504.0f)
            assert_true(fabsf(r - x) <= fabsf(x) * ldexpf(1, -11) + ldexpf(1, -25));
        float rb = attn_bf16_to_f32(attn_f32_to_bf16(x));
        assert_true(fabsf(rb - x) <= fabsf(x) * ldexpf(1, -8));
    }
}

/* ---- helpers ------------------------------------------------------------- */

typedef struct outs {
    void *o;
    float *lse;
    double *o64, *lse64;
} outs;

static void outs_alloc(outs *u, const attn_rb *rb)
{
    size_t es = attn_dtype_size(rb->m.q_dtype);
    u->o = calloc(rb->o_elems + 1, es);
    u->lse = calloc(rb->lse_elems + 1, sizeof(float));
    u->o64 = calloc(rb->o_elems + 1, sizeof(double));
    u->lse64 = calloc(rb->lse_elems + 1, sizeof(double));
    assert_non_null(u->o);
    assert_non_null(u->lse);
    assert_non_null(u->o64);
    assert_non_null(u->lse64);
}

static void outs_free(outs *u)
{
    free(u->o);
    free(u->lse);
    free(u->o64);
    free(u->lse64);
}

static int run_rb(attn_rb *rb, const attn_split_plan *plan, const attn_kv_addr *addr, void *ks,
                  void *vs, attn_cpu_acc acc, uint32_t threads, bool commit, outs *u,
                  attn_error_detail *e)
{
    attn_cpu_call c;
    attn_cpu_options opt;
    attn_rb_cpu_call(rb, ks, vs, u->o, u->lse, commit, &c);
    memset(&opt, 0, sizeof opt);
    c.plan = plan;
    c.addr = addr;
    c.o64 = u->o64;
    c.lse64 = u->lse64;
    opt.acc = acc;
    opt.num_threads = threads;
    opt.block_keys = 0;
    return attn_cpu_attend(&c, &opt, e);
}

/* A random split plan: per request 1..4 pieces cut at random points (a
 * coincident cut is an identity slot), items in a shuffled launch order. */
static void random_plan(const attn_manifest *m, uint64_t *s, attn_split_plan *p)
{
    uint32_t B = m->num_requests, total = 0;
    memset(p, 0, sizeof *p);
    p->num_requests = B;
    p->num_splits = calloc(B, sizeof(uint32_t));
    p->slot_indptr = calloc(B + 1, sizeof(uint32_t));
    assert_non_null(p->num_splits);
    assert_non_null(p->slot_indptr);
    for (uint32_t b = 0; b < B; b++) {
        p->num_splits[b] = (uint32_t)attn_rb_range(s, 1, 4);
        p->slot_indptr[b + 1] = p->slot_indptr[b] + p->num_splits[b];
    }
    total = p->slot_indptr[B];
    p->num_slots = p->slot_capacity = p->num_items = total;
    p->items = calloc(total, sizeof *p->items);
    p->policy = ATTN_SPLIT_FIXED;
    assert_non_null(p->items);
    for (uint32_t b = 0; b < B; b++) {
        int64_t L = m->requests[b].cache_len + m->requests[b].new_len, cuts[5];
        uint32_t n = p->num_splits[b];
        cuts[0] = 0;
        cuts[n] = L;
        for (uint32_t k = 1; k < n; k++)
            cuts[k] = attn_rb_range(s, 0, L);
        for (uint32_t k = 1; k < n; k++) /* sort the inner cuts */
            for (uint32_t j = k; j > 1 && cuts[j - 1] > cuts[j]; j--) {
                int64_t t = cuts[j];
                cuts[j] = cuts[j - 1];
                cuts[j - 1] = t;
            }
        for (uint32_t k = 0; k < n; k++) {
            attn_work_item *it = &p->items[p->slot_indptr[b] + k];
            it->req = b;
            it->slot = p->slot_indptr[b] + k;
            it->kv_begin = cuts[k];
            it->kv_end = cuts[k + 1];
            if (it->kv_begin == it->kv_end)
                it->kv_begin = it->kv_end = 0; /* identity slot */
        }
    }
    for (uint32_t k = total; k > 1; k--) { /* producer launch order is free */
        uint32_t j = (uint32_t)attn_rb_range(s, 0, k - 1);
        attn_work_item t = p->items[k - 1];
        p->items[k - 1] = p->items[j];
        p->items[j] = t;
    }
}

static double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* Engine vs reference: per row and head, |O - O_ref| <= tol * max|O_ref row|
 * (1 when the row is zero) and |LSE - LSE_ref| <= tol * max(1, |LSE_ref|);
 * an all-masked row must be exactly O = 0, LSE = -inf. */
static void expect_close(const attn_rb *rb, const double *o, const double *lse, const double *ro,
                         const double *rl, double tol)
{
    uint32_t dv = rb->g.head_dim_vo;
    for (size_t r = 0; r < rb->lse_elems; r++) {
        const double *a = o + r * dv, *b = ro + r * dv;
        if (isinf(rl[r])) {
            assert_true(isinf(lse[r]) && lse[r] < 0);
            for (uint32_t x = 0; x < dv; x++)
                assert_true(a[x] == 0.0);
            continue;
        }
        double scale = max_abs(b, dv);
        if (scale == 0)
            scale = 1;
        for (uint32_t x = 0; x < dv; x++) {
            assert_false(isnan(a[x]));
            if (fabs(a[x] - b[x]) > tol * scale) {
                print_error("row %zu lane %u: %.17g vs %.17g\n", r, x, a[x], b[x]);
                fail();
            }
        }
        assert_false(isnan(lse[r]));
        assert_true(fabs(lse[r] - rl[r]) <= tol * (fabs(rl[r]) > 1 ? fabs(rl[r]) : 1));
    }
}

static void reference(const attn_rb *rb, double **ro, double **rl)
{
    *ro = calloc(rb->o_elems + 1, sizeof(double));
    *rl = calloc(rb->lse_elems + 1, sizeof(double));
    assert_non_null(*ro);
    assert_non_null(*rl);
    assert_int_equal(attn_rb_reference(rb, *ro, *rl), 0);
}

/* ---- properties on fresh random inputs ----------------------------------- */

static const attn_mask_kind g_kinds[6] = {ATTN_MASK_CAUSAL, ATTN_MASK_NONE,      ATTN_MASK_WINDOW,
                                          ATTN_MASK_SINK,   ATTN_MASK_FLASHMASK, ATTN_MASK_DENSE};

static void random_spec(attn_rb_spec *sp, uint64_t *s)
{
    static const uint32_t heads[4][2] = {{4, 2}, {4, 4}, {6, 2}, {8, 1}};
    /* 64 and 128 take the engine's constant-width kernels, the others the generic one */
    static const uint32_t dims[5] = {4, 8, 20, 64, 128};
    int hsel = (int)attn_rb_range(s, 0, 3);
    memset(sp, 0, sizeof *sp);
    sp->num_requests = (uint32_t)attn_rb_range(s, 1, 6);
    sp->max_cache_len = attn_rb_range(s, 1, 70);
    sp->max_new_len = attn_rb_range(s, 2, 9);
    sp->num_qo_heads = heads[hsel][0];
    sp->num_kv_heads = heads[hsel][1];
    sp->head_dim_qk = dims[attn_rb_range(s, 0, 4)];
    sp->head_dim_vo = attn_rb_range(s, 0, 1) ? sp->head_dim_qk : dims[attn_rb_range(s, 0, 4)];
    sp->page_size = (uint32_t)attn_rb_range(s, 1, 9);
    sp->spare_pages = (uint32_t)attn_rb_range(s, 0, 3);
    sp->layout = attn_rb_range(s, 0, 1) ? ATTN_HND : ATTN_NHD;
    sp->format = attn_rb_range(s, 0, 1) ? ATTN_KV_DENSE : ATTN_KV_CSR;
    sp->mask_kind = g_kinds[attn_rb_range(s, 0, 5)];
    sp->poison = true;
}

/* Ragged mixed batches, random split partitions and launch orders, 1 to 3
 * threads, both ABIs, every mask kind: fp64 accumulation over fp32 storage
 * matches the unsplit fp64 reference to 1e-12, never NaN despite poisoned
 * page tails and spare pages. */
static void test_random_mixed_vs_reference(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 0x1234;
    for (int trial = 0; trial < 60; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        attn_split_plan plan;
        attn_error_detail e;
        double *ro, *rl;
        outs u;
        random_spec(&sp, &s);
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        rb.m.policy.state_abi = attn_rb_range(&s, 0, 1) ? ATTN_ABI_MLU : ATTN_ABI_LSE_O;
        random_plan(&rb.m, &s, &plan);
        reference(&rb, &ro, &rl);
        outs_alloc(&u, &rb);
        uint64_t before = attn_rb_pool_checksum(&rb);
        int rv = run_rb(&rb, &plan, NULL, NULL, NULL, ATTN_CPU_ACC_F64,
                        (uint32_t)attn_rb_range(&s, 1, 3), false, &u, &e);
        if (rv != 0)
            print_error("trial %d: %s %s: %s\n", trial, attn_err_name(rv), e.field, e.message);
        assert_int_equal(rv, 0);
        expect_close(&rb, u.o64, u.lse64, ro, rl, 1e-12);
        /* the wire outputs are the fp64 ones rounded once */
        for (size_t i = 0; i < rb.o_elems; i++)
            assert_true(((float *)u.o)[i] == (float)u.o64[i]);
        for (size_t i = 0; i < rb.lse_elems; i++)
            assert_true(u.lse[i] == (float)u.lse64[i] || (isinf(u.lse[i]) && isinf(u.lse64[i])));
        assert_true(attn_rb_pool_checksum(&rb) == before); /* no commit asked: no write */
        outs_free(&u);
        free(ro);
        free(rl);
        attn_split_plan_free(&plan);
        attn_rb_free(&rb);
    }
}

/* The engine's own default plan and fp32 accumulation: close to fp64. */
static void test_default_plan_fp32(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 99;
    for (int trial = 0; trial < 20; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        double *ro, *rl;
        outs u;
        random_spec(&sp, &s);
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        reference(&rb, &ro, &rl);
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F32, 2, false, &u, NULL),
                         0);
        expect_close(&rb, u.o64, u.lse64, ro, rl, 2e-5);
        outs_free(&u);
        free(ro);
        free(rl);
        attn_rb_free(&rb);
    }
}

/* fp16 and bf16 K/V storage (and q/o): against fp64 on the rounded values. */
static void test_half_storage(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 4242;
    for (int trial = 0; trial < 24; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        attn_split_plan plan;
        double *ro, *rl;
        outs u;
        random_spec(&sp, &s);
        sp.kv_dtype = trial % 2 ? ATTN_BF16 : ATTN_FP16;
        sp.q_dtype = (attn_dtype)attn_rb_range(&s, 0, 2);
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        random_plan(&rb.m, &s, &plan);
        reference(&rb, &ro, &rl);
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, &plan, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 2, false, &u, NULL),
                         0);
        expect_close(&rb, u.o64, u.lse64, ro, rl, 1e-12);
        /* o in q_dtype is the fp64 result rounded to nearest even */
        for (size_t i = 0; i < rb.o_elems; i++)
            assert_true(attn_load_f32(u.o, rb.m.q_dtype, i) ==
                        attn_round_through(rb.m.q_dtype, (float)u.o64[i]));
        outs_free(&u);
        free(ro);
        free(rl);
        attn_split_plan_free(&plan);
        attn_rb_free(&rb);
    }
}

/* MLU and LSE-O state ABIs give the same answer (seed 0x02F). */
static void test_abis_agree(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 77;
    for (int trial = 0; trial < 10; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        attn_split_plan plan;
        outs a, b;
        random_spec(&sp, &s);
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        random_plan(&rb.m, &s, &plan);
        outs_alloc(&a, &rb);
        outs_alloc(&b, &rb);
        rb.m.policy.state_abi = ATTN_ABI_MLU;
        assert_int_equal(run_rb(&rb, &plan, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 1, false, &a, NULL),
                         0);
        rb.m.policy.state_abi = ATTN_ABI_LSE_O;
        assert_int_equal(run_rb(&rb, &plan, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 3, false, &b, NULL),
                         0);
        expect_close(&rb, b.o64, b.lse64, a.o64, a.lse64, 1e-12);
        outs_free(&a);
        outs_free(&b);
        attn_split_plan_free(&plan);
        attn_rb_free(&rb);
    }
}

/* ---- the seed's worked numbers through the whole engine ------------------ */

/* seed 0x02G: scores {4,-1,0,0,3,-2,1}, keys 2 and 3 masked, three splits
 * [0,2) [2,4) [4,7) with an empty middle: O = (1.3543..., 0.7200...),
 * LSE = 4.3554...  One decode row (T = 6, C = 1), d_qk = 1, q = 1,
 * sm_scale = 1, so the score of key j is K_j; key 6 is the staged row. */
static void test_seed_worked_empty_middle(void **state)
{
    (void)state;
    static const float scores[7] = {4, -1, 0, 0, 3, -2, 1};
    static const float values[7][2] = {{1, 0}, {0, 2},  {99, 99}, {-99, -99},
                                       {2, 3}, {-1, 4}, {4, -2}};
    for (int abi = 0; abi < 2; abi++)
        for (int acc = 0; acc < 2; acc++) {
            attn_rb rb;
            attn_rb_spec sp;
            int64_t T = 6, C = 1;
            memset(&sp, 0, sizeof sp);
            sp.num_requests = 1;
            sp.num_qo_heads = sp.num_kv_heads = 1;
            sp.head_dim_qk = 1;
            sp.head_dim_vo = 2;
            sp.page_size = 4;
            sp.mask_kind = ATTN_MASK_DENSE;
            sp.poison = true;
            assert_int_equal(attn_rb_make_lengths(&rb, &sp, &T, &C, 1), 0);
            /* place the fixture: pool rows 0..5, staged row 6 */
            attn_kv_addr a;
            attn_kv_addr_from_table(&a, &rb.m.kv, 1, &rb.g);
            for (int64_t j = 0; j < 6; j++) {
                int64_t pg = 0, sl = 0;
                assert_true(attn_kv_addr_locate(&a, 0, j, &pg, &sl));
                ((float *)rb.k)[attn_kv_addr_elem(&a, pg, sl, 0, 0, 1)] = scores[j];
                for (uint32_t x = 0; x < 2; x++)
                    ((float *)rb.v)[attn_kv_addr_elem(&a, pg, sl, 0, x, 2)] = values[j][x];
            }
            ((float *)rb.k_new)[0] = scores[6];
            ((float *)rb.v_new)[0] = values[6][0];
            ((float *)rb.v_new)[1] = values[6][1];
            ((float *)rb.q)[0] = 1;
            rb.m.has_sm_scale = true;
            rb.m.sm_scale = 1;
            rb.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
            rb.m.mask.dense_bits[0] = 0x0c; /* keys 2 and 3 masked */
            rb.m.policy.state_abi = abi ? ATTN_ABI_LSE_O : ATTN_ABI_MLU;
            attn_split_plan plan;
            uint32_t ns[1] = {3}, si[2] = {0, 3};
            attn_work_item items[3] = {{0, 2, 4, 7}, {0, 0, 0, 2}, {0, 1, 2, 4}};
            memset(&plan, 0, sizeof plan);
            plan.num_requests = 1;
            plan.num_splits = ns;
            plan.slot_indptr = si;
            plan.num_slots = plan.slot_capacity = 3;
            plan.items = items;
            plan.num_items = 3;
            plan.policy = ATTN_SPLIT_FIXED;
            outs u;
            outs_alloc(&u, &rb);
            assert_int_equal(run_rb(&rb, &plan, NULL, NULL, NULL,
                                    acc ? ATTN_CPU_ACC_F64 : ATTN_CPU_ACC_F32, 2, false, &u, NULL),
                             0);
            double tol = acc ? 1e-15 : 1e-6;
            assert_float_equal(u.o64[0], 1.3543003322450418, tol);
            assert_float_equal(u.o64[1], 0.7200695075868776, tol);
            assert_float_equal(u.lse64[0], 4.355492491217523, tol * 4);
            outs_free(&u);
            attn_rb_free(&rb);
        }
}

/* seed 0x08C append trace: T = 5, C = 3, query a5..a7 sees [a0..a5],
 * [a0..a6], [a0..a7] (bottom-right), with keys >= 5 from the staged rows
 * while the pool rows 5..7 hold NaN.  All scores 0 and V_j = j make row i's
 * output the mean (T + i) / 2 and its LSE log(T + i + 1). */
static void test_seed_append_trace(void **state)
{
    (void)state;
    attn_rb rb;
    attn_rb_spec sp;
    int64_t T = 5, C = 3;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 1;
    sp.num_qo_heads = sp.num_kv_heads = 1;
    sp.head_dim_qk = sp.head_dim_vo = 4;
    sp.page_size = 3;
    sp.poison = true;
    assert_int_equal(attn_rb_make_lengths(&rb, &sp, &T, &C, 5), 0);
    attn_kv_addr a;
    attn_kv_addr_from_table(&a, &rb.m.kv, 1, &rb.g);
    for (int64_t j = 0; j < 5; j++) {
        int64_t pg = 0, sl = 0;
        assert_true(attn_kv_addr_locate(&a, 0, j, &pg, &sl));
        for (uint32_t x = 0; x < 4; x++) {
            ((float *)rb.k)[attn_kv_addr_elem(&a, pg, sl, 0, x, 4)] = 0;
            ((float *)rb.v)[attn_kv_addr_elem(&a, pg, sl, 0, x, 4)] = (float)j;
        }
    }
    for (int64_t i = 0; i < 3; i++)
        for (uint32_t x = 0; x < 4; x++) {
            ((float *)rb.k_new)[i * 4 + x] = 0;
            ((float *)rb.v_new)[i * 4 + x] = (float)(5 + i);
        }
    outs u;
    outs_alloc(&u, &rb);
    assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 2, true, &u, NULL), 0);
    for (int64_t i = 0; i < 3; i++) {
        for (uint32_t x = 0; x < 4; x++)
            assert_float_equal(u.o64[i * 4 + x], (5.0 + i) / 2, 1e-14);
        assert_float_equal(u.lse64[i], log(6.0 + i), 1e-14);
    }
    /* committed: pool rows 5..7 now hold the staged rows, in the request's pages */
    for (int64_t i = 0; i < 3; i++)
        for (uint32_t x = 0; x < 4; x++)
            assert_true(attn_rb_pool_value(&rb, 0, 5 + i, 0, x, true) == (float)(5 + i));
    outs_free(&u);
    attn_rb_free(&rb);
}

/* seed 0x04F: T = 10 in pages of 4 leaves two tail rows of the last page
 * invisible; NaN there (and in a spare page) never reaches the output. */
static void test_seed_page_tail_poison(void **state)
{
    (void)state;
    attn_rb rb;
    attn_rb_spec sp;
    int64_t T = 9, C = 1; /* T + C = 10 visible rows after the append */
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 1;
    sp.num_qo_heads = 4;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 8;
    sp.page_size = 4;
    sp.spare_pages = 2;
    sp.poison = true;
    for (int fmt = 0; fmt < 2; fmt++) {
        sp.format = fmt ? ATTN_KV_DENSE : ATTN_KV_CSR;
        assert_int_equal(attn_rb_make_lengths(&rb, &sp, &T, &C, 11), 0);
        if (fmt == 0)
            assert_int_equal(rb.m.kv.last_page_len[0], 2);
        double *ro, *rl;
        reference(&rb, &ro, &rl);
        outs u;
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F32, 1, false, &u, NULL),
                         0);
        for (size_t i = 0; i < rb.o_elems; i++)
            assert_false(isnan(((float *)u.o)[i]));
        expect_close(&rb, u.o64, u.lse64, ro, rl, 2e-5);
        outs_free(&u);
        free(ro);
        free(rl);
        attn_rb_free(&rb);
    }
}

/* ---- masks: all-masked rows ---------------------------------------------- */

/* A dense mask hiding every key of some rows: those rows give O = 0 and
 * LSE = -inf exactly (seed 0x02C), never NaN, in both ABIs and precisions. */
static void test_all_masked_rows(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 31337;
    for (int trial = 0; trial < 8; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        attn_split_plan plan;
        memset(&sp, 0, sizeof sp);
        sp.num_requests = 3;
        sp.max_cache_len = 20;
        sp.max_new_len = 4;
        sp.mask_kind = ATTN_MASK_DENSE;
        sp.poison = true;
        sp.page_size = 3;
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        /* mask everything of request 1 and of the first row of request 0 */
        attn_mask *mk = &rb.m.mask;
        bool masked_bit = mk->polarity == ATTN_POLARITY_TRUE_MEANS_MASKED;
        uint64_t byte0 = 0;
        for (uint32_t b = 0; b < 3; b++) {
            int64_t L = rb.m.requests[b].cache_len + rb.m.requests[b].new_len;
            int64_t cells = rb.m.requests[b].new_len * L;
            for (int64_t c = 0; c < cells; c++)
                if (b == 1 || (b == 0 && c < L)) {
                    uint8_t *p = &mk->dense_bits[byte0 + (uint64_t)c / 8];
                    *p = (uint8_t)(masked_bit ? *p | (1u << (c % 8)) : *p & ~(1u << (c % 8)));
                }
            byte0 += (uint64_t)(cells + 7) / 8;
        }
        rb.m.policy.state_abi = trial % 2 ? ATTN_ABI_LSE_O : ATTN_ABI_MLU;
        random_plan(&rb.m, &s, &plan);
        double *ro, *rl;
        reference(&rb, &ro, &rl);
        outs u;
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, &plan, NULL, NULL, NULL,
                                trial % 4 < 2 ? ATTN_CPU_ACC_F64 : ATTN_CPU_ACC_F32, 2, false, &u,
                                NULL),
                         0);
        uint32_t Hq = rb.m.num_qo_heads, dv = rb.g.head_dim_vo;
        int64_t masked_rows[2] = {rb.m.qo_indptr[0], rb.m.qo_indptr[1]};
        for (int k = 0; k < 2; k++)
            for (uint32_t h = 0; h < Hq; h++) {
                size_t r = (size_t)masked_rows[k] * Hq + h;
                assert_true(isinf(u.lse[r]) && u.lse[r] < 0);
                for (uint32_t x = 0; x < dv; x++)
                    assert_true(((float *)u.o)[r * dv + x] == 0.0f);
            }
        for (size_t i = 0; i < rb.o_elems; i++)
            assert_false(isnan(((float *)u.o)[i]));
        expect_close(&rb, u.o64, u.lse64, ro, rl, trial % 4 < 2 ? 1e-12 : 2e-5);
        outs_free(&u);
        free(ro);
        free(rl);
        attn_split_plan_free(&plan);
        attn_rb_free(&rb);
    }
}

/* ---- identities: GQA heads, cache rows ----------------------------------- */

/* seed 0x04A: query head h reads K/V head h / (H_q / H_kv).  V of K/V head
 * k is the constant k + 1, so every output lane of head h is h / g + 1. */
static void test_gqa_mapping(void **state)
{
    (void)state;
    static const uint32_t cfg[3][2] = {{8, 2}, {6, 3}, {4, 4}};
    for (int c = 0; c < 3; c++) {
        attn_rb rb;
        attn_rb_spec sp;
        memset(&sp, 0, sizeof sp);
        sp.num_requests = 3;
        sp.num_qo_heads = cfg[c][0];
        sp.num_kv_heads = cfg[c][1];
        sp.head_dim_qk = 8;
        sp.head_dim_vo = 5;
        sp.layout = c == 1 ? ATTN_HND : ATTN_NHD;
        sp.poison = true;
        assert_int_equal(attn_rb_make(&rb, &sp, 100 + c), 0);
        uint32_t Hkv = rb.g.num_kv_heads, dv = rb.g.head_dim_vo, g = sp.num_qo_heads / Hkv;
        for (uint32_t b = 0; b < 3; b++)
            for (int64_t t = 0; t < rb.m.requests[b].cache_len; t++)
                for (uint32_t k = 0; k < Hkv; k++)
                    for (uint32_t x = 0; x < dv; x++) {
                        attn_kv_addr a;
                        int64_t pg = 0, sl = 0;
                        attn_kv_addr_from_table(&a, &rb.m.kv, 3, &rb.g);
                        assert_true(attn_kv_addr_locate(&a, b, t, &pg, &sl));
                        ((float *)rb.v)[attn_kv_addr_elem(&a, pg, sl, k, x, dv)] = (float)(k + 1);
                    }
        for (int64_t r = 0; r < rb.total_q; r++)
            for (uint32_t k = 0; k < Hkv; k++)
                for (uint32_t x = 0; x < dv; x++)
                    ((float *)rb.v_new)[((size_t)r * Hkv + k) * dv + x] = (float)(k + 1);
        outs u;
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 2, false, &u, NULL),
                         0);
        for (int64_t r = 0; r < rb.total_q; r++)
            for (uint32_t h = 0; h < sp.num_qo_heads; h++)
                for (uint32_t x = 0; x < dv; x++)
                    assert_float_equal(u.o64[((size_t)r * sp.num_qo_heads + h) * dv + x],
                                       (double)(h / g + 1), 1e-13);
        outs_free(&u);
        attn_rb_free(&rb);
    }
}

/* seed 0x04A/0x08F: the same logical rows stored in a contiguous cache under
 * a cache-row remap (active b -> cache row c) and in a packed ragged store
 * give the paged result bit for bit; the commit lands in cache row c. */
static void test_cache_row_remap_and_encodings(void **state)
{
    (void)state;
    attn_rb rb;
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 3;
    sp.num_qo_heads = 4;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 4;
    sp.page_size = 4;
    sp.max_cache_len = 9;
    sp.poison = true;
    assert_int_equal(attn_rb_make(&rb, &sp, 2024), 0);
    uint32_t B = 3, H = 2, d = 4, Bc = 4;
    int64_t Tc = 0;
    for (uint32_t b = 0; b < B; b++)
        if (rb.m.requests[b].cache_len + rb.m.requests[b].new_len > Tc)
            Tc = rb.m.requests[b].cache_len + rb.m.requests[b].new_len;
    /* req 0 -> cache row 2 (the seed's req-A), req 1 -> 0, req 2 -> 3; row 1 unused */
    int32_t remap[3] = {2, 0, 3}, lens[3], indptr[4] = {0, 0, 0, 0};
    size_t celems = (size_t)Bc * Tc * H * d;
    float *ck = malloc(celems * sizeof(float)), *cv = malloc(celems * sizeof(float));
    assert_non_null(ck);
    assert_non_null(cv);
    for (size_t i = 0; i < celems; i++)
        ck[i] = cv[i] = NAN;
    for (uint32_t b = 0; b < B; b++) {
        lens[b] = (int32_t)(rb.m.requests[b].cache_len + rb.m.requests[b].new_len);
        indptr[b + 1] = indptr[b] + lens[b];
    }
    float *rk = malloc((size_t)indptr[B] * H * d * sizeof(float) + 4);
    float *rv_ = malloc((size_t)indptr[B] * H * d * sizeof(float) + 4);
    assert_non_null(rk);
    assert_non_null(rv_);
    for (uint32_t b = 0; b < B; b++)
        for (int64_t t = 0; t < lens[b]; t++)
            for (uint32_t h = 0; h < H; h++)
                for (uint32_t x = 0; x < d; x++) {
                    float kv = t < rb.m.requests[b].cache_len
                                   ? attn_rb_pool_value(&rb, b, t, h, x, false)
                                   : NAN;
                    float vv = t < rb.m.requests[b].cache_len
                                   ? attn_rb_pool_value(&rb, b, t, h, x, true)
                                   : NAN;
                    size_t co = (((size_t)remap[b] * Tc + t) * H + h) * d + x; /* seed 0x04B NHD */
                    size_t ro = (((size_t)indptr[b] + t) * H + h) * d + x;     /* seed 0x04C */
                    ck[co] = kv;
                    cv[co] = vv;
                    rk[ro] = kv;
                    rv_[ro] = vv;
                }
    attn_kv_addr contig, ragged;
    attn_kv_addr_contiguous(&contig, ATTN_NHD, B, H, Bc, Tc, remap, lens);
    attn_kv_addr_ragged(&ragged, ATTN_NHD, B, H, indptr);

    outs paged, c1, r1;
    outs_alloc(&paged, &rb);
    outs_alloc(&c1, &rb);
    outs_alloc(&r1, &rb);
    attn_error_detail e;
    assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 2, false, &paged, &e),
                     0);
    int rv = run_rb(&rb, NULL, &contig, ck, cv, ATTN_CPU_ACC_F64, 2, true, &c1, &e);
    if (rv != 0)
        print_error("%s %s %s\n", attn_err_name(rv), e.field, e.message);
    assert_int_equal(rv, 0);
    assert_int_equal(run_rb(&rb, NULL, &ragged, rk, rv_, ATTN_CPU_ACC_F64, 1, false, &r1, &e), 0);
    assert_memory_equal(paged.o64, c1.o64, rb.o_elems * sizeof(double));
    assert_memory_equal(paged.o64, r1.o64, rb.o_elems * sizeof(double));
    /* committed into cache row remap[b], never into row b */
    for (uint32_t b = 0; b < B; b++)
        for (int64_t i = 0; i < rb.m.requests[b].new_len; i++) {
            int64_t t = rb.m.requests[b].cache_len + i;
            for (uint32_t h = 0; h < H; h++)
                for (uint32_t x = 0; x < d; x++)
                    assert_true(ck[(((size_t)remap[b] * Tc + t) * H + h) * d + x] ==
                                attn_rb_new_value(&rb, b, i, h, x, false));
        }
    for (size_t i = (size_t)1 * Tc * H * d; i < (size_t)2 * Tc * H * d; i++)
        assert_true(isnan(ck[i])); /* the unused cache row 1 is untouched */
    /* a remap that sends two requests to one cache row is refused, store unchanged */
    int32_t bad[3] = {2, 2, 3};
    attn_kv_addr dup;
    attn_kv_addr_contiguous(&dup, ATTN_NHD, B, H, Bc, Tc, bad, lens);
    uint64_t before = attn_rb_checksum(ck, celems * sizeof(float));
    assert_int_not_equal(run_rb(&rb, NULL, &dup, ck, cv, ATTN_CPU_ACC_F64, 2, true, &c1, &e), 0);
    assert_true(attn_rb_checksum(ck, celems * sizeof(float)) == before);
    outs_free(&paged);
    outs_free(&c1);
    outs_free(&r1);
    free(ck);
    free(cv);
    free(rk);
    free(rv_);
    attn_rb_free(&rb);
}

/* ---- the append transaction ---------------------------------------------- */

/* With commit, exactly the rows [T_b, T_b + C_b) of every request change,
 * to the staged rows, in both layouts and both page-table formats; the
 * attention itself read the staged rows (the pool held NaN there). */
static void test_commit_writes_only_new_rows(void **state)
{
    (void)state;
    uint64_t s = g_seed ^ 555;
    for (int trial = 0; trial < 8; trial++) {
        attn_rb rb;
        attn_rb_spec sp;
        random_spec(&sp, &s);
        sp.kv_dtype = (attn_dtype)(trial % 3);
        assert_int_equal(attn_rb_make(&rb, &sp, attn_rb_next(&s)), 0);
        /* expected pool = old pool with the new rows written by the reference's
         * own address formula */
        unsigned char *ek = malloc(rb.k_bytes), *ev = malloc(rb.v_bytes);
        assert_non_null(ek);
        assert_non_null(ev);
        memcpy(ek, rb.k, rb.k_bytes);
        memcpy(ev, rb.v, rb.v_bytes);
        void *save_k = rb.k, *save_v = rb.v;
        rb.k = ek;
        rb.v = ev;
        for (uint32_t b = 0; b < rb.m.num_requests; b++)
            for (int64_t i = 0; i < rb.m.requests[b].new_len; i++) {
                int64_t t = rb.m.requests[b].cache_len + i;
                int64_t P = rb.g.page_size, page;
                page = rb.m.kv.format == ATTN_KV_DENSE
                           ? rb.m.kv.block_table[b * rb.m.kv.max_blocks + t / P]
                           : rb.m.kv.page_indices[rb.m.kv.page_indptr[b] + t / P];
                for (uint32_t h = 0; h < rb.g.num_kv_heads; h++) {
                    for (uint32_t x = 0; x < rb.g.head_dim_qk; x++) {
                        int64_t H = rb.g.num_kv_heads, dq = rb.g.head_dim_qk, slot = t % P;
                        int64_t off = rb.g.layout == ATTN_HND
                                          ? ((page * H + h) * P + slot) * dq + x
                                          : ((page * P + slot) * H + h) * dq + x;
                        attn_store_f32(ek, rb.g.kv_dtype, (size_t)off,
                                       attn_rb_new_value(&rb, b, i, h, x, false));
                    }
                    for (uint32_t x = 0; x < rb.g.head_dim_vo; x++) {
                        int64_t H = rb.g.num_kv_heads, dv = rb.g.head_dim_vo, slot = t % P;
                        int64_t off = rb.g.layout == ATTN_HND
                                          ? ((page * H + h) * P + slot) * dv + x
                                          : ((page * P + slot) * H + h) * dv + x;
                        attn_store_f32(ev, rb.g.kv_dtype, (size_t)off,
                                       attn_rb_new_value(&rb, b, i, h, x, true));
                    }
                }
            }
        rb.k = save_k;
        rb.v = save_v;
        double *ro, *rl;
        reference(&rb, &ro, &rl);
        outs u;
        outs_alloc(&u, &rb);
        assert_int_equal(run_rb(&rb, NULL, NULL, NULL, NULL, ATTN_CPU_ACC_F64, 2, true, &u, NULL),
                         0);
        expect_close(&rb, u.o64, u.lse64, ro, rl, 1e-12); /* staged rows, not NaN pool rows */
        assert_memory_equal(rb.k, ek, rb.k_bytes);
        assert_memory_equal(rb.v, ev, rb.v_bytes);
        outs_free(&u);
        free(ro);
        free(rl);
        free(ek);
        free(ev);
        attn_rb_free(&rb);
    }
}

/* ---- the engine interface ------------------------------------------------ */

static attn_engine *cpu_instance(uint32_t threads)
{
    attn_cpu_options opt = {.num_threads = threads, .acc = ATTN_CPU_ACC_F32, .block_keys = 0};
    attn_engine_config cfg = {.device = -1, .num_threads = 0, .tuning = &opt};
    attn_engine *e = NULL;
    attn_error_detail err;
    assert_int_equal(attn_engine_create(attn_cpu_engine_ops(), &cfg, &e, &err), 0);
    return e;
}

static attn_run_io run_io(const attn_rb *rb, const attn_pool_view *pv, outs *u, bool commit)
{
    attn_run_io io = {.pool = pv,
                      .layer = 0,
                      .q = rb->q,
                      .k_new = rb->k_new,
                      .v_new = rb->v_new,
                      .o = u->o,
                      .lse = u->lse,
                      .commit = commit};
    return io;
}

static void test_engine_run(void **state)
{
    (void)state;
    attn_rb rb;
    attn_rb_spec sp;
    attn_error_detail err;
    memset(&sp, 0, sizeof sp);
    sp.poison = true;
    assert_int_equal(attn_rb_make(&rb, &sp, 8), 0);
    attn_engine *e = cpu_instance(2);
    assert_string_equal(e->ops->name, "cpu_ref");
    assert_int_equal(e->ops->version, ATTN_ENGINE_OPS_VERSION);
    assert_int_equal(e->ops->phases, 7u);
    attn_admission adm;
    e->ops->admit(e, &rb.m, &rb.g, &adm);
    assert_true(adm.admitted);
    assert_int_equal(adm.num_reasons, 0);
    attn_engine_plan *plan = NULL;
    assert_int_equal(attn_engine_plan_new(e, &rb.m, &rb.g, &plan, &err), 0);
    assert_ptr_equal(plan->owner, e);
    /* the key environment and the ledger are the engine's own */
    assert_string_equal(plan->env.device_type, "cpu");
    assert_int_equal(plan->env.compute_capability, 0);
    assert_string_equal(plan->env.workspace_device, "cpu");
    assert_int_equal(plan->ledger.num_fields, 2);
    assert_true(plan->ledger.total_bytes >= plan->ledger.payload_bytes);
    assert_true(plan->ledger.fields[1].elems % rb.g.head_dim_vo == 0);
    void *kl[1] = {rb.k}, *vl[1] = {rb.v};
    attn_pool_view pv = {&rb.g, ATTN_PLATFORM_CPU, -1, kl, vl};
    outs u;
    outs_alloc(&u, &rb);
    attn_run_io io = run_io(&rb, &pv, &u, false);
    attn_exec_report rep;
    assert_int_equal(attn_engine_run(e, plan, &io, &rep, &err), 0);
    assert_int_equal(rep.num_kernels, 2);
    assert_false(rep.kernels_observed);
    assert_string_equal(rep.timing_method, "host_clock");
    assert_true(rep.timing_scope[0] != '\0');
    double *ro, *rl;
    reference(&rb, &ro, &rl);
    for (size_t i = 0; i < rb.o_elems; i++)
        assert_float_equal(((float *)u.o)[i], ro[i], 1e-5);
    /* a layer outside the pool is refused before anything runs, with its field */
    uint64_t before = attn_rb_pool_checksum(&rb);
    io.layer = 1;
    io.commit = true;
    assert_int_equal(attn_engine_run(e, plan, &io, &rep, &err), ATTN_E_LAYER);
    assert_string_equal(err.field, "layer");
    assert_true(attn_rb_pool_checksum(&rb) == before);
    /* a device pool is refused by the host engine, naming the device */
    attn_pool_view dv = pv;
    dv.platform = ATTN_PLATFORM_CUDA;
    io.layer = 0;
    io.pool = &dv;
    assert_int_equal(attn_engine_run(e, plan, &io, &rep, &err), ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "pool.device");
    /* head ratio that does not divide: admission says why */
    attn_manifest m2 = rb.m;
    m2.num_qo_heads = 3;
    e->ops->admit(e, &m2, &rb.g, &adm);
    assert_false(adm.admitted);
    assert_int_equal(adm.reasons[0].factor, ATTN_ADMIT_HEAD_RATIO);
    /* plan validates before it splits: a bad manifest is refused with its
     * field and leaves no plan behind */
    attn_engine_plan *bad = NULL;
    assert_true(attn_engine_plan_new(e, &m2, &rb.g, &bad, &err) != 0);
    assert_null(bad);
    assert_true(err.field[0] != '\0');
    free(ro);
    free(rl);
    outs_free(&u);
    attn_engine_plan_release(plan);
    attn_engine_destroy(e);
    attn_rb_free(&rb);
}

/* plan does the per-step work once: a plan reused for five runs validated
 * the manifest and built its mask program once, and the runs started no
 * thread (the instance's workers are persistent).  A plan belongs to the
 * instance that made it. */
static void test_engine_plan_once(void **state)
{
    (void)state;
    attn_rb rb;
    attn_rb_spec sp;
    attn_error_detail err;
    memset(&sp, 0, sizeof sp);
    sp.mask_kind = ATTN_MASK_WINDOW;
    assert_int_equal(attn_rb_make(&rb, &sp, 21), 0);
    attn_engine *e = cpu_instance(3);
    attn_cpu_engine_counts c0, c1;
    attn_cpu_engine_counts_get(e, &c0);
    assert_int_equal(c0.threads_started, 2); /* 3 workers: the caller and two threads */
    attn_engine_plan *plan = NULL;
    assert_int_equal(attn_engine_plan_new(e, &rb.m, &rb.g, &plan, &err), 0);
    void *kl[1] = {rb.k}, *vl[1] = {rb.v};
    attn_pool_view pv = {&rb.g, ATTN_PLATFORM_CPU, -1, kl, vl};
    outs u;
    outs_alloc(&u, &rb);
    double *ro, *rl;
    reference(&rb, &ro, &rl);
    for (int run = 0; run < 5; run++) {
        attn_run_io io = run_io(&rb, &pv, &u, false);
        memset(u.o, 0, rb.o_elems * attn_dtype_size(rb.m.q_dtype));
        assert_int_equal(attn_engine_run(e, plan, &io, NULL, &err), 0);
        for (size_t i = 0; i < rb.o_elems; i++)
            assert_float_equal(((float *)u.o)[i], ro[i], 1e-5);
    }
    attn_cpu_engine_counts_get(e, &c1);
    assert_int_equal(c1.validations - c0.validations, 1);
    assert_int_equal(c1.mask_programs - c0.mask_programs, 1);
    assert_int_equal(c1.runs - c0.runs, 5);
    assert_int_equal(c1.threads_started, c0.threads_started);
    assert_int_equal(atomic_load(&e->count.plans), 1);
    assert_int_equal(atomic_load(&e->count.runs), 5);
    /* another instance does not run this plan */
    attn_engine *other = cpu_instance(1);
    attn_run_io io = run_io(&rb, &pv, &u, false);
    assert_int_equal(attn_engine_run(other, plan, &io, NULL, &err), ATTN_E_STALE_PLAN);
    assert_string_equal(err.field, "plan_id");
    attn_engine_destroy(other);
    free(ro);
    free(rl);
    outs_free(&u);
    attn_engine_plan_release(plan);
    attn_engine_destroy(e);
    attn_rb_free(&rb);
}

/* seed 0x08G: policy.schedule is executed as asked, and AUTO picks and
 * says why.  A mixed batch (prefill, append, two decodes): partition runs
 * one producer and merge pass per phase (three launches each), unified one
 * over every phase; the results are bit-identical (every unit writes its
 * own slot; the merge folds slots in slot order). */
static void test_engine_schedules(void **state)
{
    (void)state;
    int64_t T[4] = {0, 37, 12, 80}, C[4] = {5, 4, 1, 1};
    attn_rb rb;
    attn_rb_spec sp;
    attn_error_detail err;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 4;
    sp.max_cache_len = 80;
    sp.max_new_len = 5;
    assert_int_equal(attn_rb_make_lengths(&rb, &sp, T, C, 77), 0);
    attn_engine *e = cpu_instance(2);
    void *kl[1] = {rb.k}, *vl[1] = {rb.v};
    attn_pool_view pv = {&rb.g, ATTN_PLATFORM_CPU, -1, kl, vl};
    const attn_schedule_policy asked[3] = {ATTN_SCHED_AUTO, ATTN_SCHED_PARTITION,
                                           ATTN_SCHED_UNIFIED};
    const attn_schedule_policy ran[3] = {ATTN_SCHED_UNIFIED, ATTN_SCHED_PARTITION,
                                         ATTN_SCHED_UNIFIED};
    const uint32_t launches[3] = {1, 3, 1};
    outs u[3];
    for (int k = 0; k < 3; k++) {
        attn_manifest m = rb.m;
        m.policy.schedule = asked[k];
        attn_engine_plan *plan = NULL;
        assert_int_equal(attn_engine_plan_new(e, &m, &rb.g, &plan, &err), 0);
        assert_int_equal(plan->schedule, ran[k]);
        assert_non_null(strstr(plan->schedule_why, k == 0 ? "auto" : "as asked"));
        outs_alloc(&u[k], &rb);
        attn_run_io io = run_io(&rb, &pv, &u[k], false);
        attn_exec_report rep;
        assert_int_equal(attn_engine_run(e, plan, &io, &rep, &err), 0);
        assert_int_equal(rep.kernels[0].launches, launches[k]);
        assert_int_equal(rep.kernels[1].launches, launches[k]);
        attn_engine_plan_release(plan);
    }
    size_t ob = rb.o_elems * attn_dtype_size(rb.m.q_dtype);
    assert_memory_equal(u[0].o, u[1].o, ob);
    assert_memory_equal(u[0].o, u[2].o, ob);
    assert_memory_equal(u[0].lse, u[1].lse, rb.lse_elems * sizeof(float));
    for (int k = 0; k < 3; k++)
        outs_free(&u[k]);
    attn_engine_destroy(e);
    attn_rb_free(&rb);
}

/* The ops table is versioned: a table of another version is refused. */
static void test_engine_version_checked(void **state)
{
    (void)state;
    attn_engine_ops old = *attn_cpu_engine_ops();
    attn_engine *e = NULL;
    attn_error_detail err;
    old.version = ATTN_ENGINE_OPS_VERSION - 1;
    assert_int_equal(attn_engine_create(&old, NULL, &e, &err), ATTN_E_VERSION);
    assert_null(e);
    assert_non_null(strstr(err.message, "ops version"));
    old = *attn_cpu_engine_ops();
    old.plan_free = NULL;
    assert_int_equal(attn_engine_create(&old, NULL, &e, &err), ATTN_E_INTERNAL);
}

int main(void)
{
    const char *env = getenv("ATTN_TEST_SEED");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed =
        env ? strtoull(env, NULL, 0) : (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    printf("test_cpu_engine: ATTN_TEST_SEED=0x%llx\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_known_values),
        cmocka_unit_test(test_dtype_exhaustive_roundtrip),
        cmocka_unit_test(test_random_mixed_vs_reference),
        cmocka_unit_test(test_default_plan_fp32),
        cmocka_unit_test(test_half_storage),
        cmocka_unit_test(test_abis_agree),
        cmocka_unit_test(test_seed_worked_empty_middle),
        cmocka_unit_test(test_seed_append_trace),
        cmocka_unit_test(test_seed_page_tail_poison),
        cmocka_unit_test(test_all_masked_rows),
        cmocka_unit_test(test_gqa_mapping),
        cmocka_unit_test(test_cache_row_remap_and_encodings),
        cmocka_unit_test(test_commit_writes_only_new_rows),
        cmocka_unit_test(test_engine_run),
        cmocka_unit_test(test_engine_plan_once),
        cmocka_unit_test(test_engine_schedules),
        cmocka_unit_test(test_engine_version_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
