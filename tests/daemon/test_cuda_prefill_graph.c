/* Graph mode of the CUDA prefill engine, host half (no GPU; issue 12 item
 * 3, seed 0x03G): the capacity envelope's sizing (its bounds by hand, and
 * every random step inside the direct limits fits them), a graph-mode plan
 * (unified, the queues padded to the grid, the image sized to the
 * envelope), updates within the envelope producing the arrays of a fresh
 * plan of the new lengths (padding past them), updates beyond it or
 * changing a plan-static field refused with the field named and the image
 * untouched, and the admission of graph mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/names.h"
#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/prefill_engine.h"
#include "kernels/common/mask.h"
#include "planner/engine.h"
#include "planner/prefill_plan.h"
#include "tests/lib/random_batch.h"

static const attn_cuda_device_facts k_h200 = {
    .device = 0, .cc_major = 9, .cc_minor = 0, .sm_count = 132, .ctas_per_sm = 1, .head_chunks = 1};

/* A batch on a cuda:0 pool (H_q 8, H_kv 2, d 128, page 16) with (T, C). */
static void make_batch(attn_rb *rb, uint32_t B, const int64_t *T, const int64_t *C,
                       attn_kv_format format, uint64_t seed)
{
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = B;
    sp.max_cache_len = 1;
    for (uint32_t b = 0; b < B; b++)
        sp.max_cache_len = T[b] > sp.max_cache_len ? T[b] : sp.max_cache_len;
    sp.num_qo_heads = 8;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.spare_pages = 2;
    sp.kv_dtype = sp.q_dtype = ATTN_BF16;
    sp.layout = ATTN_NHD;
    sp.format = format;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    assert_int_equal(attn_rb_make_lengths(rb, &sp, T, C, seed), 0);
    snprintf(rb->g.device, sizeof rb->g.device, "cuda:0");
    rb->m.policy.graph = true;
}

/* The bounds of attn_prefill_envelope_size, by hand. */
static void test_envelope_sizing(void **state)
{
    (void)state;
    attn_error_detail err;
    attn_prefill_envelope_in ei = {.max_requests = 4,
                                   .max_q_rows = 300,
                                   .max_keys = 1000,
                                   .num_qo_heads = 8,
                                   .num_kv_heads = 2,
                                   .head_dim = 128,
                                   .num_sms = 132,
                                   .workers = 132};
    attn_prefill_envelope e;
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), 0);
    /* m tiles (300 x 4 + 4 x 127) / 128 = 13; 8 key tiles of 128 each;
     * the load bound cuts < 132 / 2 m tiles (all 13 here) into < 2 x 132
     * / 2 parts */
    assert_int_equal(e.max_m_tiles, 13);
    assert_int_equal(e.max_tiles, 13 * 8);
    assert_int_equal(e.max_merges, 13);
    assert_int_equal(e.max_parts, 132);
    assert_int_equal(e.max_items, 13 + 132);
    assert_int_equal(e.workers, 132);
    ei.fixed_splits = 3; /* fixed: 3 parts per m tile */
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), 0);
    assert_int_equal(e.max_merges, 13);
    assert_int_equal(e.max_parts, 39);
    assert_int_equal(e.max_items, 52);
    ei.fixed_splits = 0;
    ei.num_sms = 0; /* no split */
    ei.num_kv_heads = 8;
    ei.num_qo_heads = 8; /* g 1: (300 + 4 x 127) / 128 = 6 */
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), 0);
    assert_int_equal(e.max_m_tiles, 6);
    assert_int_equal(e.max_parts, 0);
    assert_int_equal(e.max_merges, 0);
    assert_int_equal(e.max_items, 6);
    /* a bound past the kernel's indices, an empty envelope */
    ei.max_keys = (int64_t)1 << 40;
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), ATTN_E_CAPACITY);
    assert_string_equal(err.field, "envelope.max_tiles");
    ei.max_keys = 1000;
    ei.max_requests = 0;
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), ATTN_E_RANGE);
    assert_string_equal(err.field, "envelope");
    /* the check names the first field a plan exceeds */
    attn_prefill_plan p;
    memset(&p, 0, sizeof p);
    ei.max_requests = 4;
    assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), 0);
    p.num_requests = 4;
    p.num_tiles = e.max_tiles;
    assert_int_equal(attn_prefill_envelope_check(&e, &p, &err), 0);
    p.num_tiles = e.max_tiles + 1;
    assert_int_equal(attn_prefill_envelope_check(&e, &p, &err), ATTN_E_CAPACITY);
    assert_string_equal(err.field, "envelope.max_tiles");
    p.num_tiles = 0;
    p.num_workers = e.workers + 1;
    assert_int_equal(attn_prefill_envelope_check(&e, &p, &err), ATTN_E_CAPACITY);
    assert_string_equal(err.field, "envelope.workers");
}

/* Every step inside the direct limits (requests, q rows, keys of a request)
 * fits the envelope's derived bounds: random steps, every length mask,
 * the load bound and fixed splits, groups 1..8, d 64..256. */
static void test_envelope_holds_random_steps(void **state)
{
    (void)state;
    uint64_t s = 0x03600003u;
    uint32_t worst_items = 0, worst_parts = 0, worst_tiles = 0;
    for (int trial = 0; trial < 400; trial++) {
        const uint32_t Bmax = (uint32_t)attn_rb_range(&s, 1, 12);
        const uint32_t Q = Bmax + (uint32_t)attn_rb_range(&s, 0, 1500);
        const int64_t K = attn_rb_range(&s, 1, 6000);
        const uint32_t hkv = (uint32_t)attn_rb_range(&s, 1, 4),
                       g = (uint32_t)attn_rb_range(&s, 1, 8);
        const uint32_t d = trial % 3 == 0 ? 64 : trial % 3 == 1 ? 128 : 256;
        const uint32_t fixed = attn_rb_range(&s, 0, 3) == 0 ? (uint32_t)attn_rb_range(&s, 2, 5) : 0;
        /* the light kernel's 64 x 64 tiles (d <= 128) have an envelope of their own */
        const attn_prefill_variant v =
            d <= 128 && attn_rb_range(&s, 0, 1) ? ATTN_PREFILL_LIGHT : ATTN_PREFILL_FULL;
        attn_prefill_envelope_in ei = {.max_requests = Bmax,
                                       .max_q_rows = Q,
                                       .max_keys = K,
                                       .num_qo_heads = hkv * g,
                                       .num_kv_heads = hkv,
                                       .head_dim = d,
                                       .num_sms = 132,
                                       .fixed_splits = fixed,
                                       .workers = 132,
                                       .variant = v};
        attn_prefill_envelope e;
        attn_error_detail err;
        assert_int_equal(attn_prefill_envelope_size(&ei, &e, &err), 0);
        /* a step: B <= Bmax requests, each C >= 1 and T + C <= K, rows <= Q */
        const uint32_t B = (uint32_t)attn_rb_range(&s, 1, Bmax < Q ? Bmax : Q);
        attn_request_desc req[12];
        int64_t T[12], C[12];
        int32_t qo[13] = {0};
        uint32_t left = Q - B; /* rows beyond one per request */
        for (uint32_t b = 0; b < B; b++) {
            int64_t cmax = (int64_t)left + 1 < K ? (int64_t)left + 1 : K;
            C[b] = attn_rb_range(&s, 1, cmax);
            /* skew toward the worst case: long rows just past an m tile */
            left -= (uint32_t)(C[b] - 1);
            T[b] = attn_rb_range(&s, 0, K - C[b]);
            memset(&req[b], 0, sizeof req[b]);
            req[b].cache_len = T[b];
            req[b].new_len = C[b];
            qo[b + 1] = qo[b] + (int32_t)C[b];
        }
        attn_mask mk;
        memset(&mk, 0, sizeof mk);
        mk.kind = (attn_mask_kind)attn_rb_range(&s, 0, 3);
        if (mk.kind == ATTN_MASK_WINDOW || mk.kind == ATTN_MASK_SINK) {
            mk.left = (int32_t)attn_rb_range(&s, 1, 3000);
            mk.sinks = mk.kind == ATTN_MASK_SINK ? (int32_t)attn_rb_range(&s, 1, 64) : 0;
        }
        uint32_t tm, tn;
        attn_prefill_tile_shape(d, v, &tm, &tn);
        attn_mask_prog mp;
        int rv = attn_mask_prog_build_blocks(&mk, req, B, tn, &mp, &err);
        if (rv)
            fail_msg("mask %d: %s %s", (int)mk.kind, err.field, err.message);
        attn_prefill_plan_in in = {.num_requests = B,
                                   .T = T,
                                   .C = C,
                                   .qo_indptr = qo,
                                   .num_qo_heads = hkv * g,
                                   .num_kv_heads = hkv,
                                   .head_dim = d,
                                   .mask = &mp,
                                   .num_sms = 132,
                                   .fixed_splits = fixed,
                                   .variant = v};
        attn_prefill_plan p;
        assert_int_equal(attn_prefill_plan_build(&in, &p, &err), 0);
        assert_int_equal(attn_prefill_plan_queues(&p, hkv, 132, NULL, &err), 0);
        rv = attn_prefill_envelope_check(&e, &p, &err);
        if (rv)
            fail_msg("trial %d: %s: %s", trial, err.field, err.message);
        worst_items = p.num_items * 100 / e.max_items > worst_items
                          ? p.num_items * 100 / e.max_items
                          : worst_items;
        worst_parts = e.max_parts && p.num_parts * 100 / e.max_parts > worst_parts
                          ? p.num_parts * 100 / e.max_parts
                          : worst_parts;
        worst_tiles = p.num_tiles * 100 / e.max_tiles > worst_tiles
                          ? p.num_tiles * 100 / e.max_tiles
                          : worst_tiles;
        attn_prefill_plan_free(&p);
        attn_mask_prog_free(&mp);
    }
    printf("  envelope use at most: items %u %%, parts %u %%, tiles %u %%\n", worst_items,
           worst_parts, worst_tiles);
}

/* The whole host image of a plan (its arrays view starts it). */
static void *image_copy(const attn_engine_plan *p, size_t *bytes)
{
    attn_cuda_prefill_plan_info info;
    attn_prefill_plan v;
    const int64_t *rows;
    uint32_t nrows;
    assert_int_equal(attn_cuda_prefill_plan_info_get(p, &info), 0);
    assert_int_equal(attn_cuda_prefill_plan_arrays(p, &v, &rows, &nrows), 0);
    void *c = malloc(info.meta_bytes);
    assert_non_null(c);
    memcpy(c, v.reqs, info.meta_bytes); /* reqs open the image */
    *bytes = info.meta_bytes;
    return c;
}

/* The graph-mode plan `gp` after an update to `m` holds the arrays of a
 * fresh (unified, non-graph) plan of `m`, padded past them. */
static void expect_fresh_arrays(const attn_engine_plan *gp, const attn_manifest *m,
                                const attn_pool_geometry *g)
{
    attn_manifest fm = *m;
    fm.policy.graph = false;
    fm.policy.schedule = ATTN_SCHED_UNIFIED;
    attn_engine_plan fp;
    memset(&fp, 0, sizeof fp);
    attn_error_detail err;
    assert_int_equal(attn_cuda_prefill_plan_host(&fm, g, &k_h200, NULL, &fp, &err), 0);
    attn_prefill_plan a, f;
    const int64_t *ra, *rf;
    uint32_t na, nf;
    assert_int_equal(attn_cuda_prefill_plan_arrays(gp, &a, &ra, &na), 0);
    assert_int_equal(attn_cuda_prefill_plan_arrays(&fp, &f, &rf, &nf), 0);
    attn_cuda_prefill_graph_info gi;
    assert_int_equal(attn_cuda_prefill_graph_info_get(gp, &gi), 0);
    assert_true(gi.graph);
    const uint32_t B = m->num_requests, hkv = g->num_kv_heads;
    assert_int_equal(gi.step_requests, B);
    assert_int_equal(gi.step_items, f.num_items);
    assert_int_equal(gi.step_tiles, f.num_tiles);
    assert_int_equal(gi.step_merges, f.num_merges);
    assert_int_equal(gi.step_workers, f.num_workers);
    assert_int_equal(gi.step_q_rows, nf);
    /* the same arrays where the step has them */
    assert_memory_equal(a.reqs, f.reqs, sizeof *f.reqs * B);
    assert_memory_equal(a.items, f.items, sizeof *f.items * f.num_items);
    assert_memory_equal(a.tiles, f.tiles, sizeof *f.tiles * f.num_tiles);
    if (f.num_merges)
        assert_memory_equal(a.merges, f.merges, sizeof *f.merges * f.num_merges);
    assert_memory_equal(a.worker_indptr, f.worker_indptr, sizeof(uint32_t) * (f.num_workers + 1));
    assert_memory_equal(a.order, f.order, sizeof(uint32_t) * f.num_items * hkv);
    assert_memory_equal(ra, rf, sizeof *rf * nf);
    assert_memory_equal(&gp->tiles.ledger, &fp.tiles.ledger, sizeof fp.tiles.ledger);
    /* padding: requests with no rows, merges of the last (C = 0) request,
     * empty queues, rows that move nothing */
    assert_int_equal(a.num_requests, gi.env.max_requests + 1);
    for (uint32_t b = B; b < a.num_requests; b++)
        assert_int_equal(a.reqs[b].C, 0);
    for (uint32_t i = f.num_merges; i < a.num_merges; i++) {
        assert_int_equal(a.merges[i].req, (int32_t)gi.env.max_requests);
        assert_int_equal(a.merges[i].num_parts, 0);
    }
    assert_int_equal(a.num_workers, 132);
    for (uint32_t w = f.num_workers; w <= a.num_workers; w++)
        assert_int_equal(a.worker_indptr[w], f.num_items * hkv);
    assert_int_equal(na, gi.env.max_q_rows);
    for (uint32_t r = nf; r < na; r++)
        assert_int_equal(ra[r], -1);
    attn_cuda_prefill_plan_host_free(&fp);
}

/* A graph-mode plan is the envelope of its manifest; updates within it
 * give a fresh plan's arrays, and the capacity step again its first image. */
static void test_graph_plan_and_updates(void **state)
{
    (void)state;
    for (int fmt = 0; fmt < 2; fmt++) {
        const attn_kv_format format = fmt ? ATTN_KV_DENSE : ATTN_KV_CSR;
        const int64_t T[4] = {600, 0, 900, 300}, C[4] = {100, 200, 1, 64};
        attn_rb rb;
        make_batch(&rb, 4, T, C, format, 11 + (uint64_t)fmt);
        attn_engine_plan gp;
        memset(&gp, 0, sizeof gp);
        attn_error_detail err;
        int rv = attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &gp, &err);
        if (rv)
            fail_msg("%s: %s", err.field, err.message);
        /* a mixed batch under auto: unified, the one launch the envelope covers */
        assert_int_equal(gp.schedule, ATTN_SCHED_UNIFIED);
        assert_non_null(strstr(gp.schedule_why, "graph mode: every row"));
        assert_non_null(strstr(gp.schedule_why, "graph envelope: requests 4, q rows 365"));
        attn_cuda_prefill_graph_info gi;
        assert_int_equal(attn_cuda_prefill_graph_info_get(&gp, &gi), 0);
        assert_true(gi.graph);
        assert_int_equal(gi.env.max_requests, 4);
        assert_int_equal(gi.env.max_q_rows, 365);
        assert_int_equal(gi.env.max_keys, 901);
        assert_int_equal(gi.env.workers, 132);
        attn_cuda_prefill_plan_info info;
        assert_int_equal(attn_cuda_prefill_plan_info_get(&gp, &info), 0);
        assert_int_equal(info.num_workers, 132); /* the grid, every step */
        assert_int_equal(info.num_merges, gi.env.max_merges);
        assert_int_equal(info.total_q, 365);
        /* the plan-cache bound counts the kept host image and the plan's own
         * run buffers (q, k, v, o, lse, saved k, v of 365 rows) and partial states */
        const uint64_t io = 2 * (365 * 8 * 128 * 2) + 4 * (365 * 2 * 128 * 2) + 365 * 8 * 4;
        assert_true(gp.priv_bytes >= 2 * info.meta_bytes + io + gp.ledger.total_bytes);
        expect_fresh_arrays(&gp, &rb.m, &rb.g);
        size_t bytes0;
        void *img0 = image_copy(&gp, &bytes0);

        /* fewer requests; then more rows on a request than it had (decode
         * to append) within the q rows; then the capacity step again */
        static const struct {
            uint32_t B;
            int64_t T[4], C[4];
        } k_steps[] = {{3, {500, 0, 800}, {50, 150, 1}},
                       {4, {600, 0, 100, 250}, {20, 30, 250, 50}},
                       {1, {10}, {1}}};
        for (size_t i = 0; i < sizeof k_steps / sizeof k_steps[0]; i++) {
            attn_rb_step st;
            assert_int_equal(
                attn_rb_make_step(&rb, k_steps[i].B, k_steps[i].T, k_steps[i].C, 100 + i, &st), 0);
            rv = attn_cuda_prefill_plan_host_update(&gp, &st.m, &rb.g, &err);
            if (rv)
                fail_msg("step %zu: %s: %s", i, err.field, err.message);
            expect_fresh_arrays(&gp, &st.m, &rb.g);
            attn_rb_step_free(&st);
        }
        assert_int_equal(attn_cuda_prefill_plan_host_update(&gp, &rb.m, &rb.g, &err), 0);
        size_t bytes1;
        void *img1 = image_copy(&gp, &bytes1);
        assert_int_equal(bytes1, bytes0);
        assert_memory_equal(img1, img0, bytes0);
        free(img0);
        free(img1);
        attn_cuda_prefill_plan_host_free(&gp);
        attn_rb_free(&rb);
    }
}

/* One refused update: the step, the code and field it must get. */
typedef struct refusal {
    const char *what;
    attn_manifest m;
    int code;
    const char *field;
} refusal;

/* A step beyond the envelope, or one that changes a plan-static field, is
 * refused naming the field; the image and the step record stay as they
 * were. */
static void test_graph_update_refusals(void **state)
{
    (void)state;
    const int64_t T[4] = {600, 0, 900, 300}, C[4] = {100, 200, 1, 64};
    attn_rb rb;
    make_batch(&rb, 4, T, C, ATTN_KV_CSR, 21);
    attn_engine_plan gp;
    memset(&gp, 0, sizeof gp);
    attn_error_detail err;
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &gp, &err), 0);
    size_t bytes0;
    void *img0 = image_copy(&gp, &bytes0);
    attn_cuda_prefill_graph_info gi0;
    assert_int_equal(attn_cuda_prefill_graph_info_get(&gp, &gi0), 0);

    /* five requests (another batch's manifest on the same geometry) */
    const int64_t T5[5] = {10, 10, 10, 10, 10}, C5[5] = {2, 2, 2, 2, 2};
    attn_rb r5;
    make_batch(&r5, 5, T5, C5, ATTN_KV_CSR, 22);
    /* one request of 950 keys (T + C beyond the longest, 901) */
    const int64_t T1[1] = {940}, C1[1] = {10};
    attn_rb r1;
    make_batch(&r1, 1, T1, C1, ATTN_KV_CSR, 23);
    /* more q rows than the envelope (each request within its own keys) */
    const int64_t Tq[4] = {600, 0, 100, 250}, Cq[4] = {100, 200, 300, 64};
    attn_rb_step sq;
    assert_int_equal(attn_rb_make_step(&rb, 4, Tq, Cq, 24, &sq), 0);
    attn_rb_step ok;
    const int64_t To[2] = {500, 0}, Co[2] = {50, 10};
    assert_int_equal(attn_rb_make_step(&rb, 2, To, Co, 25, &ok), 0);

    attn_rb_step dec; /* a step with a decode row (request 2) */
    const int64_t Td[3] = {500, 0, 800}, Cd[3] = {50, 150, 1};
    assert_int_equal(attn_rb_make_step(&rb, 3, Td, Cd, 26, &dec), 0);
    refusal k[10];
    int n = 0;
    k[n++] = (refusal){"five requests", r5.m, ATTN_E_CAPACITY, "num_requests"};
    k[n++] = (refusal){"950 keys", r1.m, ATTN_E_CAPACITY, "requests[0]"};
    k[n++] = (refusal){"664 q rows", sq.m, ATTN_E_CAPACITY, "qo_indptr"};
    k[n] = (refusal){"mask none", ok.m, ATTN_E_BACKEND_REJECTED, "mask.kind"};
    k[n++].m.mask.kind = ATTN_MASK_NONE;
    k[n] = (refusal){"16 query heads", ok.m, ATTN_E_BACKEND_REJECTED, "num_qo_heads"};
    k[n++].m.num_qo_heads = 16;
    k[n] = (refusal){"not graph", ok.m, ATTN_E_BACKEND_REJECTED, "policy.graph"};
    k[n++].m.policy.graph = false;
    k[n] = (refusal){"abi", ok.m, ATTN_E_BACKEND_REJECTED, "policy.state_abi"};
    k[n++].m.policy.state_abi =
        rb.m.policy.state_abi == ATTN_ABI_MLU ? ATTN_ABI_LSE_O : ATTN_ABI_MLU;
    k[n] = (refusal){"scale", ok.m, ATTN_E_BACKEND_REJECTED, "sm_scale"};
    k[n].m.has_sm_scale = true;
    k[n++].m.sm_scale = 0.5f;
    k[n] = (refusal){"partition+decode", dec.m, ATTN_E_BACKEND_REJECTED, "policy.graph"};
    k[n++].m.policy.schedule = ATTN_SCHED_PARTITION;
    for (int i = 0; i < n; i++) {
        memset(&err, 0, sizeof err);
        int rv = attn_cuda_prefill_plan_host_update(&gp, &k[i].m, &rb.g, &err);
        printf("  %-16s -> %s %s: %s\n", k[i].what, attn_err_name(rv), err.field, err.message);
        assert_int_equal(rv, k[i].code);
        assert_string_equal(err.field, k[i].field);
        size_t b1;
        void *img1 = image_copy(&gp, &b1);
        assert_memory_equal(img1, img0, bytes0); /* nothing half-applied */
        free(img1);
        attn_cuda_prefill_graph_info gi;
        assert_int_equal(attn_cuda_prefill_graph_info_get(&gp, &gi), 0);
        assert_memory_equal(&gi, &gi0, sizeof gi);
    }
    /* partition of a batch without decode rows is one launch: admitted */
    ok.m.policy.schedule = ATTN_SCHED_PARTITION;
    assert_int_equal(attn_cuda_prefill_plan_host_update(&gp, &ok.m, &rb.g, &err), 0);
    ok.m.policy.schedule = ATTN_SCHED_AUTO;
    attn_rb_step_free(&dec);
    /* a pool that differs */
    attn_pool_geometry g2 = rb.g;
    g2.page_size = 32;
    assert_int_equal(attn_cuda_prefill_plan_host_update(&gp, &ok.m, &g2, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "pool.page_size");
    /* a plan made without policy.graph has no envelope */
    attn_engine_plan np;
    memset(&np, 0, sizeof np);
    attn_manifest nm = rb.m;
    nm.policy.graph = false;
    assert_int_equal(attn_cuda_prefill_plan_host(&nm, &rb.g, &k_h200, NULL, &np, &err), 0);
    assert_int_equal(attn_cuda_prefill_plan_host_update(&np, &ok.m, &rb.g, &err), ATTN_E_ENGINE);
    attn_cuda_prefill_graph_info gn;
    assert_int_equal(attn_cuda_prefill_graph_info_get(&np, &gn), 0);
    assert_false(gn.graph);
    attn_cuda_prefill_plan_host_free(&np);

    free(img0);
    attn_rb_step_free(&sq);
    attn_rb_step_free(&ok);
    attn_rb_free(&r5);
    attn_rb_free(&r1);
    attn_cuda_prefill_plan_host_free(&gp);
    attn_rb_free(&rb);
}

static bool has_reason(const attn_admission *a, attn_admit_factor f, const char *field)
{
    for (uint32_t i = 0; i < a->num_reasons; i++)
        if (a->reasons[i].factor == f && strcmp(a->reasons[i].field, field) == 0)
            return true;
    return false;
}

/* Graph mode is admitted for length masks under unified and auto; a
 * per-cell mask, partition of a batch with decode rows and the snake walk
 * are refused, naming policy.graph (or the walk's setting). */
static void test_graph_admission(void **state)
{
    (void)state;
    const int64_t T[3] = {0, 700, 300}, C[3] = {300, 1, 40};
    attn_rb rb;
    make_batch(&rb, 3, T, C, ATTN_KV_CSR, 31);
    attn_admission a;
    attn_manifest m = rb.m;
    for (int k = ATTN_MASK_CAUSAL; k <= ATTN_MASK_SINK; k++) {
        m.mask.kind = (attn_mask_kind)k;
        m.mask.left = k >= ATTN_MASK_WINDOW ? 128 : 0;
        m.mask.sinks = k == ATTN_MASK_SINK ? 4 : 0;
        for (int s = 0; s < 2; s++) {
            m.policy.schedule = s ? ATTN_SCHED_UNIFIED : ATTN_SCHED_AUTO;
            attn_cuda_prefill_admit(&m, &rb.g, &k_h200, NULL, &a);
            assert_true(a.admitted);
        }
    }
    m = rb.m;
    m.policy.schedule = ATTN_SCHED_PARTITION;
    attn_cuda_prefill_admit(&m, &rb.g, &k_h200, NULL, &a);
    assert_false(a.admitted);
    assert_int_equal(a.num_reasons, 1);
    assert_true(has_reason(&a, ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    assert_non_null(strstr(a.reasons[0].text, "partition"));
    /* overlap's decode rows have no envelope either (whatever overlap's own admission says) */
    m.policy.schedule = ATTN_SCHED_OVERLAP;
    attn_cuda_prefill_admit(&m, &rb.g, &k_h200, NULL, &a);
    assert_true(has_reason(&a, ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    m.policy.schedule = ATTN_SCHED_PARTITION;
    attn_engine_plan p;
    memset(&p, 0, sizeof p);
    attn_error_detail err;
    assert_int_equal(attn_cuda_prefill_plan_host(&m, &rb.g, &k_h200, NULL, &p, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "policy.graph");
    /* the snake walk: refused at plan time, naming its setting */
    attn_cuda_prefill_tuning tu;
    memset(&tu, 0, sizeof tu);
    tu.walk = ATTN_PREFILL_WALK_SNAKE;
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, &tu, &p, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "ATTN_PREFILL_WALK");
    attn_rb_free(&rb);

    /* a FlashMask: its arrays grow with the lengths */
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 2;
    sp.max_cache_len = 100;
    sp.max_new_len = 40;
    sp.num_qo_heads = 8;
    sp.num_kv_heads = 2;
    sp.head_dim_qk = sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.kv_dtype = sp.q_dtype = ATTN_BF16;
    sp.mask_kind = ATTN_MASK_FLASHMASK;
    sp.phase_mask = 1u << ATTN_PHASE_PREFILL;
    assert_int_equal(attn_rb_make(&rb, &sp, 32), 0);
    snprintf(rb.g.device, sizeof rb.g.device, "cuda:0");
    rb.m.policy.graph = true;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_false(a.admitted);
    assert_true(has_reason(&a, ATTN_ADMIT_LIFECYCLE, "policy.graph"));
    assert_non_null(strstr(a.reasons[0].text, "length masks"));
    assert_int_equal(attn_cuda_prefill_plan_host(&rb.m, &rb.g, &k_h200, NULL, &p, &err),
                     ATTN_E_BACKEND_REJECTED);
    assert_string_equal(err.field, "policy.graph");
    rb.m.policy.graph = false;
    attn_cuda_prefill_admit(&rb.m, &rb.g, &k_h200, NULL, &a);
    assert_true(a.admitted);
    attn_rb_free(&rb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_sizing),
        cmocka_unit_test(test_envelope_holds_random_steps),
        cmocka_unit_test(test_graph_plan_and_updates),
        cmocka_unit_test(test_graph_update_refusals),
        cmocka_unit_test(test_graph_admission),
    };
    return cmocka_run_group_tests_name("cuda_prefill_graph", tests, NULL, NULL);
}
