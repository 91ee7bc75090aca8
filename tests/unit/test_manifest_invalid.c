/* Every failure row of the seed's closure tables that a manifest (or a run's
 * plan and buffers) can express: 0x02I, 0x03J, 0x04J, 0x06J, 0x08I.  Each
 * invalid call goes through the engine entry point that validates
 * (attn_cpu_attend with commit requested) and must return its specific
 * code and field path while the pool stays byte-identical. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/error.h"
#include "kernels/common/mask.h"
#include "engines/cpu/engine.h"
#include "planner/split.h"
#include "protocol/manifest.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/random_batch.h"

/* The base batch: append (5, 3), prefill (0, 4), decode (9, 1) (seed 0x08C
 * phases), pages of 4, two spare pages, H_q = 4 over H_kv = 2. */
static const int64_t g_T[3] = {5, 0, 9}, g_C[3] = {3, 4, 1};

static void make_base(attn_rb *rb, attn_kv_format fmt, attn_mask_kind mask)
{
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 3;
    sp.num_qo_heads = 4;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 4;
    sp.page_size = 4;
    sp.spare_pages = 2;
    sp.format = fmt;
    sp.mask_kind = mask;
    sp.poison = true;
    assert_int_equal(attn_rb_make_lengths(rb, &sp, g_T, g_C, 17), 0);
}

/* Run the engine on a (mutated) manifest and geometry; expect `code` and
 * `field` (NULL: any field), the validator agreeing, and no pool change. */
static void expect_rejected(attn_rb *rb, const attn_manifest *m, const attn_pool_geometry *g,
                            const attn_split_plan *plan, int code, const char *field)
{
    attn_error_detail e;
    attn_cpu_call c;
    float *o = calloc(rb->o_elems + 64, sizeof(float));
    float *lse = calloc(rb->lse_elems + 64, sizeof(float));
    assert_non_null(o);
    assert_non_null(lse);
    attn_rb_cpu_call(rb, NULL, NULL, o, lse, true, &c);
    memset(&e, 0, sizeof e);
    c.m = m;
    c.g = g;
    c.plan = plan;
    uint64_t before = attn_rb_pool_checksum(rb);
    int rv = attn_cpu_attend(&c, NULL, &e);
    if (rv != code || (field && strcmp(e.field, field) != 0))
        print_error("expected %s at \"%s\", got %s at \"%s\": %s\n", attn_err_name(code),
                    field ? field : "*", attn_err_name(rv), e.field, e.message);
    assert_int_equal(rv, code);
    assert_int_equal(e.code, code);
    if (field)
        assert_string_equal(e.field, field);
    assert_true(e.message[0] != '\0');
    assert_true(attn_rb_pool_checksum(rb) == before); /* seed 0x08I: nothing mutated */
    if (plan == NULL && code != ATTN_E_MISSING) {
        attn_error_detail e2;
        assert_int_equal(attn_manifest_validate(m, g, &e2), code);
        if (field)
            assert_string_equal(e2.field, field);
    }
    free(o);
    free(lse);
}

/* A mutation of a clone of the base manifest. */
typedef void (*mutate_fn)(attn_manifest *m, attn_pool_geometry *g);

static void check_case(attn_kv_format fmt, attn_mask_kind mask, mutate_fn fn, int code,
                       const char *field)
{
    attn_rb rb;
    attn_manifest m;
    attn_pool_geometry g;
    make_base(&rb, fmt, mask);
    /* the unmutated base is valid, so the failure below is the mutation's */
    assert_int_equal(attn_manifest_validate(&rb.m, &rb.g, NULL), 0);
    assert_int_equal(attn_manifest_clone(&m, &rb.m), 0);
    g = rb.g;
    fn(&m, &g);
    expect_rejected(&rb, &m, &g, NULL, code, field);
    attn_manifest_free(&m);
    attn_rb_free(&rb);
}

/* ---- seed 0x08I: phases, packing, identities ----------------------------- */

static void mut_no_new_rows(attn_manifest *m, attn_pool_geometry *g)
{
    m->requests[2].new_len = 0; /* T > 0, C = 0: no phase */
}
static void mut_empty_prefill(attn_manifest *m, attn_pool_geometry *g)
{
    m->requests[1].new_len = 0; /* T = 0, C = 0 */
}
static void mut_negative_T(attn_manifest *m, attn_pool_geometry *g)
{
    m->requests[0].cache_len = -1;
}
static void mut_qo_diff(attn_manifest *m, attn_pool_geometry *g)
{
    m->qo_indptr[2] = 6; /* request 1 has C = 4: [3, 7) */
}
static void mut_qo_start(attn_manifest *m, attn_pool_geometry *g)
{
    m->qo_indptr[0] = 1;
}
static void mut_qo_missing(attn_manifest *m, attn_pool_geometry *g)
{
    free(m->qo_indptr);
    m->qo_indptr = NULL;
}
static void mut_dup_id(attn_manifest *m, attn_pool_geometry *g)
{
    snprintf(m->requests[2].id, sizeof m->requests[2].id, "%s", m->requests[0].id);
}
static void mut_empty_batch(attn_manifest *m, attn_pool_geometry *g)
{
    m->num_requests = 0;
}
static void mut_heads(attn_manifest *m, attn_pool_geometry *g)
{
    m->num_qo_heads = 3; /* seed 0x04J "use h_q as h_kv": H_q % H_kv != 0 */
}
static void mut_scale_nan(attn_manifest *m, attn_pool_geometry *g)
{
    m->has_sm_scale = true;
    m->sm_scale = NAN;
}
static void mut_scale_zero(attn_manifest *m, attn_pool_geometry *g)
{
    m->has_sm_scale = true;
    m->sm_scale = 0;
}
static void mut_scale_neg(attn_manifest *m, attn_pool_geometry *g)
{
    m->has_sm_scale = true;
    m->sm_scale = -0.5f;
}
static void mut_scale_inf(attn_manifest *m, attn_pool_geometry *g)
{
    m->has_sm_scale = true;
    m->sm_scale = INFINITY;
}
static void mut_q_dtype(attn_manifest *m, attn_pool_geometry *g)
{
    m->q_dtype = (attn_dtype)9;
}
static void mut_abi(attn_manifest *m, attn_pool_geometry *g)
{
    m->policy.state_abi = (attn_state_abi)5;
}
static void mut_schedule(attn_manifest *m, attn_pool_geometry *g)
{
    m->policy.schedule = (attn_schedule_policy)(ATTN_SCHED_OVERLAP + 1);
}
static void mut_pool_page_size(attn_manifest *m, attn_pool_geometry *g)
{
    g->page_size = 0;
}
static void mut_pool_dtype(attn_manifest *m, attn_pool_geometry *g)
{
    g->kv_dtype = (attn_dtype)7;
}

static void test_phase_and_packing_rows(void **state)
{
    (void)state;
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_no_new_rows, ATTN_E_PHASE, "requests[2].new_len");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_empty_prefill, ATTN_E_PHASE,
               "requests[1].new_len");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_negative_T, ATTN_E_PHASE,
               "requests[0].cache_len");
    /* seed 0x08I "classify a mixed batch from global query length" */
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_qo_diff, ATTN_E_QO_INDPTR, "qo_indptr[2]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_qo_start, ATTN_E_QO_INDPTR, "qo_indptr[0]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_qo_missing, ATTN_E_QO_INDPTR, "qo_indptr");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_dup_id, ATTN_E_DUPLICATE_REQUEST,
               "requests[2].id");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_empty_batch, ATTN_E_EMPTY_BATCH, "requests");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_heads, ATTN_E_HEADS, "num_qo_heads");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_scale_nan, ATTN_E_RANGE, "sm_scale");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_scale_zero, ATTN_E_RANGE, "sm_scale");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_scale_neg, ATTN_E_RANGE, "sm_scale");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_scale_inf, ATTN_E_RANGE, "sm_scale");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_q_dtype, ATTN_E_DTYPE, "q_dtype");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_abi, ATTN_E_POLICY, "policy.state_abi");
    /* overlap (3) is the last schedule; one past it is not a schedule */
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_schedule, ATTN_E_POLICY, "policy.schedule");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_pool_page_size, ATTN_E_RANGE, "pool.page_size");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_pool_dtype, ATTN_E_DTYPE, "pool.kv_dtype");
}

/* ---- seed 0x04J: address translation ------------------------------------- */

static void mut_csr_out_of_pool(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.page_indices[0] = (int32_t)g->num_pages;
}
static void mut_csr_negative_page(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.page_indices[3] = -7;
}
static void mut_csr_sentinel(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.page_indices[1] = -1; /* a visible block with the unmapped sentinel */
}
static void mut_last_len_big(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.last_page_len[2] = 5; /* > P: rounds T up into the allocated tail */
}
static void mut_last_len_zero(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.last_page_len[1] = 0;
}
static void mut_last_len_stale(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.last_page_len[0] = 3; /* 2 pages cover 7 rows, T + C = 8 */
}
static void mut_page_indptr_down(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.page_indptr[1] = 4;
    m->kv.page_indptr[2] = 3;
}
static void mut_page_indptr_end(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.num_page_indices -= 1;
}
static void mut_written_shared(attn_manifest *m, attn_pool_geometry *g)
{
    /* seed 0x08I "use active batch index as cache row": request 2's last
     * block (which receives its new row) is request 0's written page */
    m->kv.page_indices[m->kv.page_indptr[3] - 1] = m->kv.page_indices[m->kv.page_indptr[1] - 1];
}
static void mut_dense_sentinel(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.block_table[1 * m->kv.max_blocks + 0] = -1;
}
static void mut_dense_out_of_pool(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.block_table[2 * m->kv.max_blocks + 2] = (int32_t)g->num_pages + 3;
}
static void mut_dense_stale_len(attn_manifest *m, attn_pool_geometry *g)
{
    m->kv.lens[0] -= 1;
}

static void test_address_rows(void **state)
{
    (void)state;
    char f[64];
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_csr_out_of_pool, ATTN_E_PAGE_OUT_OF_POOL,
               "kv.page_indices[0]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_csr_negative_page, ATTN_E_PAGE_OUT_OF_POOL,
               "kv.page_indices[3]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_csr_sentinel, ATTN_E_UNMAPPED_BLOCK,
               "kv.page_indices[1]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_last_len_big, ATTN_E_LAST_PAGE_LEN,
               "kv.last_page_len[2]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_last_len_zero, ATTN_E_LAST_PAGE_LEN,
               "kv.last_page_len[1]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_last_len_stale, ATTN_E_COVERAGE,
               "kv.last_page_len[0]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_page_indptr_down, ATTN_E_INDPTR,
               "kv.page_indptr[2]");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_page_indptr_end, ATTN_E_INDPTR,
               "kv.page_indptr[3]");
    snprintf(f, sizeof f, "kv.page_indices[%d]", 5); /* request 2's last block: 2 + 1 + 3 - 1 */
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_written_shared, ATTN_E_DUPLICATE_CACHE, f);
    check_case(ATTN_KV_DENSE, ATTN_MASK_CAUSAL, mut_dense_sentinel, ATTN_E_UNMAPPED_BLOCK,
               "kv.block_table[1][0]");
    check_case(ATTN_KV_DENSE, ATTN_MASK_CAUSAL, mut_dense_out_of_pool, ATTN_E_PAGE_OUT_OF_POOL,
               "kv.block_table[2][2]");
    check_case(ATTN_KV_DENSE, ATTN_MASK_CAUSAL, mut_dense_stale_len, ATTN_E_COVERAGE, "kv.lens[0]");
}

/* seed 0x04J "use active b as stable cache row": a contiguous cache whose
 * remap sends two requests to one row, or outside the cache, is refused by
 * the engine's direct entry point before anything is read or written. */
static void test_cache_row_remap_rows(void **state)
{
    (void)state;
    attn_rb rb;
    make_base(&rb, ATTN_KV_CSR, ATTN_MASK_CAUSAL);
    int32_t lens[3] = {8, 4, 10};
    int32_t dup[3] = {1, 1, 0}, out[3] = {0, 4, 1};
    size_t n = (size_t)4 * 10 * 2 * 4;
    float *ks = calloc(n, sizeof(float)), *vs = calloc(n, sizeof(float));
    float *o = calloc(rb.o_elems, sizeof(float));
    assert_non_null(ks);
    assert_non_null(vs);
    assert_non_null(o);
    for (int k = 0; k < 2; k++) {
        attn_kv_addr a;
        attn_cpu_call c;
        attn_error_detail e;
        attn_kv_addr_contiguous(&a, ATTN_NHD, 3, 2, 4, 10, k ? out : dup, lens);
        attn_rb_cpu_call(&rb, ks, vs, o, NULL, true, &c);
        c.addr = &a;
        uint64_t before = attn_rb_checksum(ks, n * sizeof(float));
        assert_int_equal(attn_cpu_attend(&c, NULL, &e), ATTN_E_CACHE_ROW);
        assert_non_null(strstr(e.field, "cache_batch_idx"));
        assert_true(attn_rb_checksum(ks, n * sizeof(float)) == before);
    }
    free(ks);
    free(vs);
    free(o);
    attn_rb_free(&rb);
}

/* ---- seed 0x06J: masks ---------------------------------------------------- */

static void mut_polarity_unset(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.polarity = ATTN_POLARITY_UNSET;
}
static void mut_mask_kind(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.kind = (attn_mask_kind)17;
}
static void mut_dense_bytes(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.dense_bytes -= 1;
}
static void mut_fm_inclusive_end(attn_manifest *m, attn_pool_geometry *g)
{
    /* column 2 of request 0 (C = 3): an inclusive end would read 4 */
    m->mask.fm_uts[2] = 0;
    m->mask.fm_ute[2] = 4;
}
static void mut_fm_overlap(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.fm_uts[1] = 0;
    m->mask.fm_ute[1] = 2;
    m->mask.fm_lts[1] = 1;
    m->mask.fm_lte[1] = 3;
}
static void mut_fm_start_after_end(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.fm_lts[0] = 3;
    m->mask.fm_lte[0] = 1;
}
static void mut_fm_length(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.fm_len -= 1;
}
static void mut_window_left(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.kind = ATTN_MASK_WINDOW;
    m->mask.left = -2;
}
static void mut_sink_negative(attn_manifest *m, attn_pool_geometry *g)
{
    m->mask.kind = ATTN_MASK_SINK;
    m->mask.left = 2;
    m->mask.sinks = -1;
}

static void test_mask_rows(void **state)
{
    (void)state;
    /* "invert mask polarity": a dense mask must bind its polarity */
    check_case(ATTN_KV_CSR, ATTN_MASK_DENSE, mut_polarity_unset, ATTN_E_MASK_POLARITY,
               "mask.polarity");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_mask_kind, ATTN_E_MASK_KIND, "mask.kind");
    check_case(ATTN_KV_CSR, ATTN_MASK_DENSE, mut_dense_bytes, ATTN_E_SHAPE, "mask.bits");
    /* "use inclusive interval ends" */
    check_case(ATTN_KV_CSR, ATTN_MASK_FLASHMASK, mut_fm_inclusive_end, ATTN_E_MASK_INTERVAL,
               "mask.ute[2]");
    /* "accept malformed triangle intervals": overlap, order */
    check_case(ATTN_KV_CSR, ATTN_MASK_FLASHMASK, mut_fm_overlap, ATTN_E_MASK_INTERVAL,
               "mask.lts[1]");
    check_case(ATTN_KV_CSR, ATTN_MASK_FLASHMASK, mut_fm_start_after_end, ATTN_E_MASK_INTERVAL,
               "mask.lts[0]");
    check_case(ATTN_KV_CSR, ATTN_MASK_FLASHMASK, mut_fm_length, ATTN_E_SHAPE, "mask.lts");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_window_left, ATTN_E_MASK_INTERVAL, "mask.left");
    check_case(ATTN_KV_CSR, ATTN_MASK_CAUSAL, mut_sink_negative, ATTN_E_MASK_INTERVAL,
               "mask.sinks");
}

/* seed 0x06H / 0x06J "represent five runs with two intervals": the column
 * with hidden rows {0, 2, 4, 6, 8} has no FlashMask form. */
static void test_mask_unrepresentable(void **state)
{
    (void)state;
    int64_t T = 0, C = 10;
    uint8_t bits[13];
    int32_t lts[10], lte[10], uts[10], ute[10];
    attn_error_detail e;
    memset(bits, 0, sizeof bits);
    for (int64_t i = 0; i < C; i += 2) { /* column 5, true means masked */
        int64_t bit = i * (T + C) + 5;
        bits[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
    assert_int_equal(attn_mask_dense_to_flashmask(bits, ATTN_POLARITY_TRUE_MEANS_MASKED, T, C, lts,
                                                  lte, uts, ute, &e),
                     ATTN_E_MASK_UNREPRESENTABLE);
    assert_string_equal(e.field, "mask.bits");
}

/* ---- seed 0x02I and 0x03J: split plans ------------------------------------ */

typedef struct plan_buf {
    attn_split_plan p;
    uint32_t ns[3], si[4];
    attn_work_item it[8];
} plan_buf;

/* The valid two-slot plan of the base batch: each request split at half. */
static void plan_base(plan_buf *b)
{
    memset(b, 0, sizeof *b);
    uint32_t k = 0;
    for (uint32_t r = 0; r < 3; r++) {
        int64_t L = g_T[r] + g_C[r];
        b->ns[r] = 2;
        b->si[r + 1] = b->si[r] + 2;
        b->it[k++] = (attn_work_item){r, b->si[r], 0, L / 2};
        b->it[k++] = (attn_work_item){r, b->si[r] + 1, L / 2, L};
    }
    b->p.num_requests = 3;
    b->p.num_splits = b->ns;
    b->p.slot_indptr = b->si;
    b->p.num_slots = b->p.slot_capacity = 6;
    b->p.items = b->it;
    b->p.num_items = 6;
    b->p.policy = ATTN_SPLIT_FIXED;
}

static void test_split_rows(void **state)
{
    (void)state;
    attn_rb rb;
    plan_buf pb;
    make_base(&rb, ATTN_KV_CSR, ATTN_MASK_CAUSAL);

    /* sanity: the base plan runs */
    plan_base(&pb);
    {
        attn_cpu_call c;
        float *o = calloc(rb.o_elems, sizeof(float));
        attn_rb_cpu_call(&rb, NULL, NULL, o, NULL, false, &c);
        c.plan = &pb.p;
        assert_int_equal(attn_cpu_attend(&c, NULL, NULL), 0);
        free(o);
    }
    /* 0x02I "missing visible position": a gap between the splits */
    plan_base(&pb);
    pb.it[1].kv_begin += 1;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "slots[1]");
    /* 0x02I "overlapping splits" */
    plan_base(&pb);
    pb.it[3].kv_begin -= 1;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "slots[3]");
    /* 0x03J "use batch maximum T for every request": request 1 read to 10 */
    plan_base(&pb);
    pb.it[3].kv_end = 10;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "requests[1]");
    /* 0x03J "reducer reads unwritten empty slots" */
    plan_base(&pb);
    pb.p.num_items = 5; /* slot 5 never written */
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "slots[5]");
    /* two producers for one slot */
    plan_base(&pb);
    pb.it[5].slot = 4;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "items[5]");
    /* 0x03J "allocate [B,H_q,S,d_v] but launch S_capacity": slots beyond capacity */
    plan_base(&pb);
    pb.p.slot_capacity = 5;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_CAPACITY, "slot_capacity");
    /* a plan built for another batch */
    plan_base(&pb);
    pb.p.num_requests = 2;
    expect_rejected(&rb, &rb.m, &rb.g, &pb.p, ATTN_E_SPLIT, "plan.num_requests");
    attn_rb_free(&rb);
}

/* ---- the run's buffers ----------------------------------------------------- */

static void test_missing_buffers(void **state)
{
    (void)state;
    attn_rb rb;
    attn_error_detail e;
    attn_cpu_call c;
    make_base(&rb, ATTN_KV_CSR, ATTN_MASK_CAUSAL);
    float *o = calloc(rb.o_elems, sizeof(float));
    static const char *fields[5] = {"q", "k_new", "v_new", "o", "pool.k"};
    for (int k = 0; k < 5; k++) {
        memset(&c, 0, sizeof c);
        c.m = &rb.m;
        c.g = &rb.g;
        c.k_store = k == 4 ? NULL : rb.k;
        c.v_store = rb.v;
        c.q = k == 0 ? NULL : rb.q;
        c.k_new = k == 1 ? NULL : rb.k_new;
        c.v_new = k == 2 ? NULL : rb.v_new;
        c.o = k == 3 ? NULL : (void *)o;
        c.commit = true;
        uint64_t before = attn_rb_pool_checksum(&rb);
        assert_int_equal(attn_cpu_attend(&c, NULL, &e), ATTN_E_MISSING);
        assert_string_equal(e.field, fields[k]);
        assert_true(attn_rb_pool_checksum(&rb) == before);
    }
    free(o);
    attn_rb_free(&rb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phase_and_packing_rows), cmocka_unit_test(test_address_rows),
        cmocka_unit_test(test_cache_row_remap_rows),   cmocka_unit_test(test_mask_rows),
        cmocka_unit_test(test_mask_unrepresentable),   cmocka_unit_test(test_split_rows),
        cmocka_unit_test(test_missing_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
