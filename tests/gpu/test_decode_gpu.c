/* GPU tests of the CUDA decode engine (run on a machine with a GPU:
 * tests/gpu/build.sh builds, bench/gpu/run_device.sh runs).
 *
 * Every run draws fresh random manifests (the seed is printed, ATTN_SEED
 * replays one): ragged lengths up to 131,072 keys, pages in random physical
 * order with unused pages, page tails and the append slots filled with NaN
 * (tests/lib/random_batch.c), device outputs and workspace poisoned with NaN
 * before every run.  Each is compared with the CPU engine (engines/cpu,
 * fp64 accumulation): relative L2 of O <= 1e-2, |LSE error| <= 1e-3, no NaN
 * anywhere.  Commit and no-commit runs are checked against the pool bytes.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "engines/cpu/engine.h"
#include "engines/cuda/cuda_engine.h"
#include "planner/engine.h"
#include "kernels/cuda/decode_launch.h"
#include "planner/split.h"
#include "tests/lib/random_batch.h"

static uint64_t g_seed;
static int g_quick; /* ATTN_GPU_QUICK=1: small sweep for compute-sanitizer */
static double g_worst_rel, g_worst_lse;
static attn_engine *g_cuda;       /* the engine instance on cuda:0 every test runs on */
static int g_l2_evict_first = -1; /* the next plans' tensor-map copy policy (drawn per case) */

/* The instance's tuning for the next plans (a plan keeps the tuning it was
 * made with); poison on, so an element no kernel wrote shows as NaN. */
/* The instance's tuning for the plans made next (a plan keeps the tuning
 * it was made with); every run poisons its outputs and workspace. */
static void tune_persist(int simt, int heads_fast, int row_prefetch, int fused_merge, int bulk,
                         int pdl, int persist)
{
    attn_cuda_tuning t;
    attn_cuda_tuning_defaults(&t);
    t.persist = persist;
    t.simt = simt;
    t.bulk = bulk;
    t.heads_fast = heads_fast;
    t.row_prefetch = row_prefetch;
    t.fused_merge = fused_merge;
    t.pdl = pdl;
    t.l2_evict_first = g_l2_evict_first;
    t.poison = 1;
    attn_cuda_engine_set_tuning(g_cuda, &t);
}

static void tune_all(int simt, int heads_fast, int row_prefetch, int fused_merge, int bulk, int pdl)
{
    tune_persist(simt, heads_fast, row_prefetch, fused_merge, bulk, pdl, 0);
}

static void tune(int simt, int heads_fast, int row_prefetch)
{
    tune_all(simt, heads_fast, row_prefetch, 0, 1, ATTN_CUDA_PDL_DEFAULT);
}

/* "/fused" when the producer folds the slots, then the programmatic launch
 * (ATTN_CUDA_PDL_*): how a case line names the run's reducer and launch. */
static const char *fold_label(int fused, int pdl)
{
    static const char *const names[2][3] = {{"", "/pdl-early", "/pdl-late"},
                                            {"/fused", "/fused/pdl-early", "/fused/pdl-late"}};
    return names[fused != 0][pdl >= 0 && pdl <= 2 ? pdl : 0];
}

typedef struct gpu_case {
    const char *name;
    uint32_t B;
    int64_t min_len, max_len; /* T + 1 drawn in [min_len, max_len] */
    int64_t long_len;         /* when > 0, request 0 has exactly this many keys */
    uint32_t hq, hkv, d, page;
    attn_dtype kv;
    attn_layout layout;
    attn_kv_format format;
    attn_mask_kind mask;
    attn_split_policy policy; /* AUTO = random among FA, FI, GLOBAL */
    uint32_t fixed_splits;
    bool graph;
    /* > 0: K row t of request b scaled by 1 + ramp * t / T_b, so scores grow
     * along the keys: the tensor-core producer's row maxima grow inside a
     * tile, across tiles within the lazy-rescale bound and past it */
    float ramp;
    /* 1: the copy-warp producer (q in the cache dtype, so it serves every
     * head dim; the diagnostic must name it); 0: tensor-core runs take it
     * one in two, q dtype random; > 1: this bulk value (copy warps, or
     * ATTN_CUDA_BULK_TMAP), no persistent CTAs */
    int bulk;
} gpu_case;

static attn_split_policy pick_policy(uint64_t *s, attn_split_policy p)
{
    static const attn_split_policy all[] = {ATTN_SPLIT_FA, ATTN_SPLIT_FI, ATTN_SPLIT_GLOBAL};
    return p != ATTN_SPLIT_AUTO ? p : all[attn_rb_range(s, 0, 2)];
}

/* Locate logical row t of request b in a host copy of a store. */
static int64_t row_elem(const attn_rb *rb, uint32_t b, int64_t t, uint32_t h, uint32_t d)
{
    attn_kv_addr a;
    attn_kv_addr_from_table(&a, &rb->m.kv, rb->m.num_requests, &rb->g);
    int64_t page, slot;
    if (!attn_kv_addr_locate(&a, b, t, &page, &slot))
        return -1;
    return attn_kv_addr_elem(&a, page, slot, h, 0, d);
}

static void run_case(const gpu_case *gc, uint64_t seed)
{
    uint64_t s = seed;
    int64_t *T = calloc(gc->B, sizeof *T), *C = calloc(gc->B, sizeof *C);
    assert_non_null(T);
    assert_non_null(C);
    for (uint32_t b = 0; b < gc->B; b++) {
        T[b] = attn_rb_range(&s, gc->min_len, gc->max_len) - 1;
        if (T[b] < 1)
            T[b] = 1;
        C[b] = 1;
    }
    if (gc->long_len > 0)
        T[0] = gc->long_len - 1;
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = gc->B;
    sp.max_cache_len = gc->max_len;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.num_qo_heads = gc->hq;
    sp.num_kv_heads = gc->hkv;
    sp.head_dim_qk = gc->d;
    sp.head_dim_vo = gc->d;
    sp.page_size = gc->page;
    sp.spare_pages = (uint32_t)attn_rb_range(&s, 1, 9);
    sp.kv_dtype = gc->kv;
    sp.q_dtype = gc->bulk ? gc->kv : (attn_dtype)attn_rb_range(&s, 0, 2);
    sp.layout = gc->layout;
    sp.format = gc->format;
    sp.mask_kind = gc->mask;
    sp.poison = true;
    attn_rb rb;
    assert_int_equal(attn_rb_make_lengths(&rb, &sp, T, C, seed), 0);
    rb.m.policy.state_abi = (attn_state_abi)attn_rb_range(&s, 0, 1);
    rb.m.policy.split_policy = gc->fixed_splits ? ATTN_SPLIT_FIXED : pick_policy(&s, gc->policy);
    rb.m.policy.splits = gc->fixed_splits;
    rb.m.policy.graph = gc->graph;
    const bool commit = attn_rb_range(&s, 0, 1) != 0;
    /* one run in four on the CUDA-core producer; the grid order either way */
    const int simt = attn_rb_range(&s, 0, 3) == 0 && !gc->bulk;
    const int heads_fast = (int)attn_rb_range(&s, 0, 1);
    const int prefetch = (int)attn_rb_range(&s, 0, 1);
    /* split requests folded by the producer's last CTA (3 in 4) or the reducer kernel */
    const int fused = attn_rb_range(&s, 0, 3) != 0;
    /* the copy-warp producer with 1, 4 (or, d = 128, 2) row-copy warps or the
     * tensor-map copy warp (8): forced by the case, else the cp.async
     * producer, the engine's default (auto) or one of those */
    const int nps[6] = {0, ATTN_DECODE_BULK_AUTO, 1,
                        4, ATTN_CUDA_BULK_TMAP,   gc->d == 128 ? 2 : ATTN_CUDA_BULK_TMAP};
    const int bulk = gc->bulk > 1 ? gc->bulk : nps[attn_rb_range(&s, gc->bulk ? 2 : 0, 5)];
    /* programmatic dependent launch of producer and reducer: off, early or late trigger */
    const int pdl = (int)attn_rb_range(&s, ATTN_CUDA_PDL_OFF, ATTN_CUDA_PDL_LATE);
    /* persistent CTAs (the tensor-map producer at d = 128): off, the grid
     * capacity, or 1..12 CTAs, so each walks many pieces and the ring runs
     * on across them */
    const int pz = (int)attn_rb_range(&s, 0, 3);
    const int persist = pz == 0 || gc->bulk > 1 ? 0 : pz == 1 ? -1 : (int)attn_rb_range(&s, 1, 12);
    /* the tensor-map copies' L2 policy: the engine's rule, no hint, evict_first */
    g_l2_evict_first = (int)attn_rb_range(&s, 0, 2) - 1;
    tune_persist(simt, heads_fast, prefetch, fused, bulk, pdl, persist);

    if (gc->ramp > 0.f) { /* the host copy the CPU engine reads too, before the upload */
        for (uint32_t b = 0; b < gc->B; b++)
            for (int64_t t = 0; t < T[b]; t++)
                for (uint32_t h = 0; h < gc->hkv; h++) {
                    int64_t e = row_elem(&rb, b, t, h, gc->d);
                    const float f = 1.f + gc->ramp * (float)t / (float)T[b];
                    for (uint32_t x = 0; x < gc->d && e >= 0; x++)
                        attn_store_f32(rb.k, gc->kv, (size_t)e + x,
                                       attn_load_f32(rb.k, gc->kv, (size_t)e + x) * f);
                }
    }
    /* the device pool: the same bytes, NaN poison included */
    attn_pool_geometry g = rb.g;
    snprintf(g.device, sizeof g.device, "cuda:0");
    void *dk = NULL, *dv = NULL;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_pool_alloc(0, rb.k_bytes, &dk, &err), 0);
    assert_int_equal(attn_cuda_pool_alloc(0, rb.v_bytes, &dv, &err), 0);
    int32_t *all = malloc(sizeof *all * g.num_pages);
    assert_non_null(all);
    for (uint32_t p = 0; p < g.num_pages; p++)
        all[p] = (int32_t)p;
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, rb.k, 1, &err), 0);
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, rb.v, 1, &err), 0);

    attn_engine_plan *ep = NULL;
    attn_cuda_plan_info info;
    int rv = attn_engine_plan_new(g_cuda, &rb.m, &g, &ep, &err);
    if (rv)
        fprintf(stderr, "plan: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
    assert_int_equal(rv, 0);
    assert_int_equal(attn_cuda_plan_info_get(ep, &info), 0);
    const attn_split_plan plan = ep->split;
    assert_string_equal(ep->env.device_type, "cuda");
    assert_true(ep->env.compute_capability >= 70);

    attn_admission adm;
    attn_cuda_admit(&rb.m, &g, &adm);
    if (!adm.admitted)
        fprintf(stderr, "rejected: %s\n", adm.reasons[0].text);
    assert_true(adm.admitted);

    size_t qs = attn_dtype_size(rb.m.q_dtype);
    void *o = malloc(rb.o_elems * qs), *o_ref = malloc(rb.o_elems * qs);
    float *lse = malloc(sizeof *lse * rb.lse_elems), *lse_ref = malloc(sizeof *lse * rb.lse_elems);
    assert_true(o && o_ref && lse && lse_ref);
    void *kd[1] = {dk}, *vd[1] = {dv};
    attn_pool_view pv = {.geom = &g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = kd, .v = vd};
    attn_run_io a = {.pool = &pv,
                     .layer = 0,
                     .q = rb.q,
                     .k_new = rb.k_new,
                     .v_new = rb.v_new,
                     .o = o,
                     .lse = lse,
                     .commit = false};
    attn_exec_report rep;
    /* the plan's metadata was uploaded once: a second run of the same plan
     * (the first one without commit, so the pool is as before) agrees bit
     * for bit */
    rv = attn_engine_run(g_cuda, ep, &a, &rep, &err);
    if (rv)
        fprintf(stderr, "run: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
    assert_int_equal(rv, 0);
    void *o_first = malloc(rb.o_elems * qs);
    assert_non_null(o_first);
    memcpy(o_first, o, rb.o_elems * qs);
    if (fused && !simt) {
        /* the fold of the producer's last CTA and the reducer kernel run
         * merge_fold's batches in the same order: bit-identical, for every
         * producer, head dim, ABI and split drawn (the worked trace below
         * checks it for one d = 64 case) */
        tune_persist(simt, heads_fast, prefetch, 0, bulk, pdl, persist);
        attn_engine_plan *ep_r = NULL;
        assert_int_equal(attn_engine_plan_new(g_cuda, &rb.m, &g, &ep_r, &err), 0);
        void *o_r = malloc(rb.o_elems * qs);
        float *lse_r = malloc(sizeof *lse_r * rb.lse_elems);
        assert_true(o_r && lse_r);
        attn_run_io ar = a;
        ar.o = o_r;
        ar.lse = lse_r;
        assert_int_equal(attn_engine_run(g_cuda, ep_r, &ar, NULL, &err), 0);
        assert_memory_equal(o_r, o_first, rb.o_elems * qs);
        assert_memory_equal(lse_r, lse, sizeof *lse * rb.lse_elems);
        free(o_r);
        free(lse_r);
        attn_engine_plan_release(ep_r);
        tune_persist(simt, heads_fast, prefetch, fused, bulk, pdl, persist);
    }
    a.commit = commit;
    rv = attn_engine_run(g_cuda, ep, &a, &rep, &err);
    assert_int_equal(rv, 0);
    assert_memory_equal(o_first, o, rb.o_elems * qs);
    free(o_first);
    assert_true(rep.num_kernels >= 2);
    /* the diagnostic names the producer that ran */
    const char *producer = "?";
    for (uint32_t k = 0; k < rep.num_kernels; k++)
        if (strstr(rep.kernels[k].symbol, "producer"))
            producer = rep.kernels[k].symbol;
    if (gc->bulk && bulk == ATTN_CUDA_BULK_TMAP) {
        /* tensor-map boxes need pages of 8 rows or more (decode_path.h);
         * persistent CTAs are built for d = 128 */
        const char *want = gc->page < 8                   ? "producer_tc<"
                           : persist != 0 && gc->d == 128 ? "producer_tc_tmap_persist<"
                                                          : "producer_tc_tmap<";
        assert_non_null(strstr(producer, want));
        /* keys as rows: g <= 8 on the tensor maps, and on the cp.async
         * producer at d <= 128 */
        const bool kr = gc->hq / gc->hkv <= 8 && (gc->page >= 8 || gc->d <= 128);
        if (strcmp(want, "producer_tc_tmap_persist<") != 0)
            assert_non_null(strstr(producer, kr ? ", true>" : ", false>"));
    } else if (gc->bulk) {
        char tail[24];
        snprintf(tail, sizeof tail, ", %d, %s>", bulk, /* as many copy warps as asked */
                 bulk == 4 && gc->d == 256 && gc->hq / gc->hkv <= 8 ? "true" : "false");
        assert_non_null(strstr(producer, "producer_tc_bulk<"));
        assert_non_null(strstr(producer, tail)); /* keys as rows: d 256, four warps, g <= 8 */
    } else if (simt)
        assert_non_null(strstr(producer, "producer_simt<"));
    else if (!bulk)
        assert_non_null(strstr(producer, "producer_tc<"));
    assert_string_equal(rep.timing_method, "cuda_events");

    attn_cpu_call cc = {.m = &rb.m,
                        .g = &rb.g,
                        .plan = NULL,
                        .addr = NULL,
                        .k_store = rb.k,
                        .v_store = rb.v,
                        .q = rb.q,
                        .k_new = rb.k_new,
                        .v_new = rb.v_new,
                        .o = o_ref,
                        .lse = lse_ref,
                        .commit = false};
    attn_cpu_options opt = {.acc = ATTN_CPU_ACC_F64};
    rv = attn_cpu_attend(&cc, &opt, &err);
    if (rv)
        fprintf(stderr, "cpu: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
    assert_int_equal(rv, 0);

    double num = 0, den = 0, lse_err = 0;
    size_t nan = 0, inf_mismatch = 0;
    for (size_t i = 0; i < rb.o_elems; i++) {
        double x = attn_load_f32(o, rb.m.q_dtype, i), r = attn_load_f32(o_ref, rb.m.q_dtype, i);
        if (isnan(x))
            nan++;
        num += (x - r) * (x - r);
        den += r * r;
    }
    for (size_t i = 0; i < rb.lse_elems; i++) {
        if (isnan(lse[i]))
            nan++;
        else if (isinf(lse[i]) || isinf(lse_ref[i]))
            inf_mismatch += lse[i] != lse_ref[i];
        else if (fabs(lse[i] - lse_ref[i]) > lse_err)
            lse_err = fabs(lse[i] - lse_ref[i]);
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    printf("  %-28s seed=%llu B=%u g=%u d=%u P=%u %s %s q=%s abi=%s policy=%s slots=%u items=%u "
           "occ=%u persist=%d l2=%d %s%s%s%s rel=%.2e lse=%.2e nan=%zu %s %s\n",
           gc->name, (unsigned long long)seed, gc->B, gc->hq / gc->hkv, gc->d, gc->page,
           attn_dtype_name(gc->kv), gc->layout == ATTN_HND ? "HND" : "NHD",
           attn_dtype_name(rb.m.q_dtype), rb.m.policy.state_abi == ATTN_ABI_MLU ? "mlu" : "lse_o",
           attn_split_policy_name(plan.policy), plan.num_slots, plan.num_items, info.ctas_per_sm,
           persist, g_l2_evict_first, simt ? "simt" : "tc", heads_fast ? "/hf" : "/if",
           prefetch ? "/pre" : "", fold_label(fused && !simt, pdl), rel, lse_err, nan,
           commit ? "commit" : "no-commit",
           strchr(producer, ':') ? strrchr(producer, ':') + 1 : producer);
    if (rel > g_worst_rel)
        g_worst_rel = rel;
    if (lse_err > g_worst_lse)
        g_worst_lse = lse_err;
    assert_int_equal(nan, 0);
    assert_int_equal(inf_mismatch, 0);
    assert_true(rel <= 1e-2);
    assert_true(lse_err <= 1e-3);

    /* the pool after the run: unchanged without commit; with commit, the
     * new row of every request sits at logical row T_b and nothing else moved */
    void *kb = malloc(rb.k_bytes), *vb = malloc(rb.v_bytes);
    assert_true(kb && vb);
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, kb, 0, &err), 0);
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, vb, 0, &err), 0);
    if (commit) {
        size_t es = attn_dtype_size(g.kv_dtype);
        for (uint32_t b = 0; b < rb.m.num_requests; b++)
            for (uint32_t h = 0; h < g.num_kv_heads; h++) {
                int64_t e = row_elem(&rb, b, rb.m.requests[b].cache_len, h, g.head_dim_qk);
                assert_true(e >= 0);
                size_t src = ((size_t)rb.m.qo_indptr[b] * g.num_kv_heads + h) * g.head_dim_qk;
                assert_memory_equal((char *)kb + e * es, (char *)rb.k_new + src * es,
                                    g.head_dim_qk * es);
                assert_memory_equal((char *)vb + e * es, (char *)rb.v_new + src * es,
                                    g.head_dim_qk * es);
                /* write the same into the host copy, so the checksums compare */
                memcpy((char *)rb.k + e * es, (char *)rb.k_new + src * es, g.head_dim_qk * es);
                memcpy((char *)rb.v + e * es, (char *)rb.v_new + src * es, g.head_dim_qk * es);
            }
    }
    assert_true(attn_rb_checksum(kb, rb.k_bytes) == attn_rb_checksum(rb.k, rb.k_bytes));
    assert_true(attn_rb_checksum(vb, rb.v_bytes) == attn_rb_checksum(rb.v, rb.v_bytes));

    free(kb);
    free(vb);
    free(o);
    free(o_ref);
    free(lse);
    free(lse_ref);
    free(all);
    attn_engine_plan_release(ep);
    attn_cuda_pool_free(0, dk);
    attn_cuda_pool_free(0, dv);
    attn_rb_free(&rb);
    tune(0, 1, 1);
    free(T);
    free(C);
}

static const gpu_case k_cases[] = {
    {"ragged-bf16-nhd-p16", 16, 1, 16384, 0, 32, 8, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"page1-fp16-hnd", 8, 1, 4096, 0, 32, 8, 128, 1, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"d64-mha-p32-window", 12, 1, 6000, 0, 8, 8, 64, 32, ATTN_BF16, ATTN_NHD, ATTN_KV_DENSE,
     ATTN_MASK_WINDOW, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"d256-p64-hnd-sink", 6, 1, 5000, 0, 8, 4, 256, 64, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"group16-p128", 4, 1, 9000, 0, 64, 4, 128, 128, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"group3-d64-dense-none", 9, 1, 3000, 0, 12, 4, 64, 16, ATTN_FP16, ATTN_NHD, ATTN_KV_DENSE,
     ATTN_MASK_NONE, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"group5-hnd-p32", 5, 1, 7000, 0, 10, 2, 128, 32, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"group32-headchunks", 3, 1, 5000, 0, 64, 2, 256, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"long-131072", 3, 1, 2000, 131072, 8, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 0},
    {"batch64-global", 64, 1, 2048, 0, 32, 8, 128, 16, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_GLOBAL, 0, false, 0.f, 0},
    {"graph-identity-slots", 7, 1, 5, 0, 16, 4, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_FIXED, 8, true, 0.f, 0},
    {"fixed-splits-window", 5, 1, 3000, 0, 16, 2, 64, 64, ATTN_FP16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_WINDOW, ATTN_SPLIT_FIXED, 7, false, 0.f, 0},
    /* 40 x 8 units fill 264 slots: the FI wave model splits the long requests
     * (added after the 2026-12-01 device run; not yet run on a device) */
    {"wave-split-ragged", 40, 1, 16384, 0, 32, 8, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_FI, 0, false, 0.f, 0},
    {"ramp-scores-lazy-rescale", 6, 500, 8000, 0, 32, 8, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_NONE, ATTN_SPLIT_AUTO, 0, false, 6.f, 0},
    {"ramp-scores-fp16-d64", 4, 500, 6000, 0, 16, 4, 64, 32, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 4.f, 0},
    /* issue 13, the copy-warp producer on every page-size class (1, 2, 16,
     * 64, 128), NHD and HND, d 64/128/256, both cache dtypes; the random
     * lengths leave poisoned tails in the last page and past the last tile */
    {"bulk-p1-hnd-d128", 6, 1, 3000, 0, 32, 8, 128, 1, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    {"bulk-p2-nhd-d64-window", 8, 1, 4000, 0, 16, 4, 64, 2, ATTN_FP16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_WINDOW, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    {"bulk-p16-nhd-d128-ragged", 16, 1, 9000, 0, 32, 8, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    {"bulk-p64-hnd-d256-sink", 5, 1, 5000, 0, 16, 4, 256, 64, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    {"bulk-p128-nhd-d256-g32", 3, 1, 7000, 0, 64, 2, 256, 128, ATTN_BF16, ATTN_NHD, ATTN_KV_DENSE,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    {"bulk-p32-hnd-d64-mha-ramp", 6, 100, 6000, 0, 8, 8, 64, 32, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_NONE, ATTN_SPLIT_AUTO, 0, false, 6.f, 1},
    {"bulk-p16-graph-fixed", 7, 1, 70, 0, 16, 4, 128, 16, ATTN_FP16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_FIXED, 8, true, 0.f, 1},
    {"bulk-long-65536-group5", 2, 1, 900, 65536, 10, 2, 128, 16, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, 1},
    /* keys as the mma's M rows (tensor maps at d 64/128, four row-copy
     * warps at d 256) at their edge (g 8, the ramp through the lazy and
     * exact rescales), and the heads as rows past it (g 16) */
    {"kr-p16-nhd-d128-g8-ramp", 6, 100, 5000, 0, 16, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 6.f, ATTN_CUDA_BULK_TMAP},
    {"kr-p8-hnd-d64-g2", 7, 1, 3000, 0, 8, 4, 64, 8, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_WINDOW, ATTN_SPLIT_AUTO, 0, false, 0.f, ATTN_CUDA_BULK_TMAP},
    {"kr-p16-hnd-d256-g4-sink", 5, 1, 4000, 0, 16, 4, 256, 16, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_AUTO, 0, false, 0.f, 4},
    {"kr-p32-nhd-d256-g8-ramp", 4, 100, 3000, 0, 16, 2, 256, 32, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 6.f, 4},
    /* d 256's default since 2026-12-03: tensor maps three stages deep, keys
     * as rows at g <= 8 (ramp: the lazy and exact rescales), the heads as
     * rows past it */
    {"tmap-p16-nhd-d256-g4-ramp", 5, 100, 5000, 0, 16, 4, 256, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 6.f, ATTN_CUDA_BULK_TMAP},
    {"tmap-p64-hnd-d256-g16", 3, 1, 6000, 0, 32, 2, 256, 64, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_AUTO, 0, false, 0.f, ATTN_CUDA_BULK_TMAP},
    {"rows-p16-nhd-d128-g16", 5, 1, 4000, 0, 64, 4, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, ATTN_CUDA_BULK_TMAP},
    /* pages under 8 rows: the cp.async producer, its keys as rows */
    {"kr-p1-nhd-d128-g4-cpasync", 6, 1, 3000, 0, 32, 8, 128, 1, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 0.f, ATTN_CUDA_BULK_TMAP},
    {"kr-p4-hnd-d64-g8-ramp-cpasync", 5, 100, 3000, 0, 16, 2, 64, 4, ATTN_FP16, ATTN_HND,
     ATTN_KV_CSR, ATTN_MASK_CAUSAL, ATTN_SPLIT_AUTO, 0, false, 6.f, ATTN_CUDA_BULK_TMAP},
    /* more slots than one pass of the staged fold holds (d 128: 35 / 51 at 2 / 3 stages, d 256:
     * 71), so it folds in passes of whole batches; the fused cases' bits against the reducer's */
    {"fold-passes-d128-g4", 2, 5000, 7000, 0, 8, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, ATTN_SPLIT_FIXED, 100, false, 0.f, 0},
    {"fold-passes-d256-g2", 2, 5000, 7000, 0, 4, 2, 256, 32, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_SINK, ATTN_SPLIT_FIXED, 100, false, 0.f, 0},
};

static void test_random_sweep(void **state)
{
    (void)state;
    size_t n = sizeof k_cases / sizeof k_cases[0];
    int rounds = g_quick ? 1 : 2;
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++) {
            if (g_quick && (k_cases[i].long_len > 0 || k_cases[i].B > 16))
                continue;
            gpu_case gc = k_cases[i];
            if (g_quick && gc.max_len > 600)
                gc.max_len = 600;
            run_case(&gc, g_seed + 1000u * (uint64_t)r + i);
        }
    printf("  worst rel L2 %.3e, worst |LSE err| %.3e\n", g_worst_rel, g_worst_lse);
}

/* Seed 0x02G worked trace: scores [4, -1 | masked, masked | 3, -2, 1] with a
 * sink mask (sinks 2, window 2) hiding the middle keys, whose values are
 * +-99; three fixed splits.  O = [1.3543003322450418, 0.7200695075868776],
 * LSE = 4.355492491217523.  The CUDA-core producer keeps p in fp32 (1e-5);
 * the tensor-core producer feeds p to the P V product as bf16, whose
 * relative rounding 2^-9 times max |v| = 4 bounds the O error by 8e-3
 * (LSE still sums p in fp32). */
static void test_seed_0x02G_known_answer(void **state)
{
    (void)state;
    const float scores[7] = {4, -1, 99, 99, 3, -2, 1};
    const float vals[7][2] = {{1, 0}, {0, 2}, {99, 99}, {-99, -99}, {2, 3}, {-1, 4}, {4, -2}};
    for (int simt = 0; simt < 2; simt++)
        for (int layout = 0; layout < 2; layout++)
            for (int abi = 0; abi < 2; abi++) {
                int64_t T = 6, C = 1;
                attn_rb_spec sp;
                memset(&sp, 0, sizeof sp);
                sp.num_requests = 1;
                sp.max_cache_len = 6;
                sp.phase_mask = 1u << ATTN_PHASE_DECODE;
                sp.num_qo_heads = 1;
                sp.num_kv_heads = 1;
                sp.head_dim_qk = sp.head_dim_vo = 64;
                sp.page_size = 4;
                sp.spare_pages = 2;
                sp.kv_dtype = ATTN_BF16;
                sp.q_dtype = ATTN_FP32;
                sp.layout = (attn_layout)layout;
                sp.mask_kind = ATTN_MASK_SINK;
                sp.poison = true;
                attn_rb rb;
                assert_int_equal(attn_rb_make_lengths(&rb, &sp, &T, &C, 7), 0);
                rb.m.mask.sinks = 2;
                rb.m.mask.left = 2;
                rb.m.has_sm_scale = true;
                rb.m.sm_scale = 1.0f;
                rb.m.policy.split_policy = ATTN_SPLIT_FIXED;
                rb.m.policy.splits = 3;
                rb.m.policy.state_abi = (attn_state_abi)abi;
                float *q = rb.q;
                for (int i = 0; i < 64; i++)
                    q[i] = i == 0 ? 1.f : 0.f;
                for (int t = 0; t < 7; t++) {
                    uint16_t *kr, *vr;
                    if (t < 6) {
                        int64_t e = row_elem(&rb, 0, t, 0, 64);
                        assert_true(e >= 0);
                        kr = (uint16_t *)rb.k + e;
                        vr = (uint16_t *)rb.v + e;
                    } else {
                        kr = rb.k_new;
                        vr = rb.v_new;
                    }
                    for (int i = 0; i < 64; i++) {
                        kr[i] = attn_f32_to_bf16(i == 0 ? scores[t] : 0.f);
                        vr[i] = attn_f32_to_bf16(i < 2 ? vals[t][i] : 0.f);
                    }
                }
                attn_pool_geometry g = rb.g;
                snprintf(g.device, sizeof g.device, "cuda:0");
                void *dk, *dv;
                attn_error_detail err;
                assert_int_equal(attn_cuda_pool_alloc(0, rb.k_bytes, &dk, &err), 0);
                assert_int_equal(attn_cuda_pool_alloc(0, rb.v_bytes, &dv, &err), 0);
                int32_t all[16];
                for (uint32_t p = 0; p < g.num_pages; p++)
                    all[p] = (int32_t)p;
                assert_int_equal(
                    attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, rb.k, 1, &err), 0);
                assert_int_equal(
                    attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, rb.v, 1, &err), 0);
                /* two plans: the fused reducer (a plan keeps its tuning) and the reducer kernel */
                tune_all(simt, layout, abi, 1, 1, ATTN_CUDA_PDL_LATE); /* and programmatic launch */
                attn_engine_plan *ep = NULL, *ep2 = NULL;
                assert_int_equal(attn_engine_plan_new(g_cuda, &rb.m, &g, &ep, &err), 0);
                assert_int_equal(ep->split.num_slots, 3);
                tune_all(simt, layout, abi, 0, 1, ATTN_CUDA_PDL_OFF);
                assert_int_equal(attn_engine_plan_new(g_cuda, &rb.m, &g, &ep2, &err), 0);
                float o[64], lse;
                void *kd[1] = {dk}, *vd[1] = {dv};
                attn_pool_view pv = {
                    .geom = &g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = kd, .v = vd};
                attn_run_io a = {.pool = &pv,
                                 .q = rb.q,
                                 .k_new = rb.k_new,
                                 .v_new = rb.v_new,
                                 .o = o,
                                 .lse = &lse};
                assert_int_equal(attn_engine_run(g_cuda, ep, &a, NULL, &err), 0);
                /* the fused reducer (last CTA folds) and the reducer kernel
                 * fold the same slots in the same order: bit-identical */
                float o2[64], lse2;
                a.o = o2;
                a.lse = &lse2;
                assert_int_equal(attn_engine_run(g_cuda, ep2, &a, NULL, &err), 0);
                attn_engine_plan_release(ep2);
                assert_memory_equal(o, o2, sizeof o);
                assert_memory_equal(&lse, &lse2, sizeof lse);
                tune(0, 1, 1);
                const double tol = simt ? 1e-5 : 8e-3;
                assert_float_equal(o[0], 1.3543003322450418, tol);
                assert_float_equal(o[1], 0.7200695075868776, tol);
                for (int i = 2; i < 64; i++)
                    assert_float_equal(o[i], 0.0, 1e-7);
                assert_float_equal(lse, 4.355492491217523, 1e-5);
                attn_engine_plan_release(ep);
                attn_cuda_pool_free(0, dk);
                attn_cuda_pool_free(0, dv);
                attn_rb_free(&rb);
            }
}

/* The NaN rule (kernels/common/state.h, issue 8): a NaN or inf inside the
 * *visible* history of a request is a data error that must reach every head
 * of that request as NaN, never pass for a masked key or a masked split; the
 * other requests of the batch stay untouched and correct.  On the H200
 * (2026-12-01) the tensor-core producer returned a finite O here (it decided
 * emptiness with l > 0, which a NaN l fails).  Every producer x split policy
 * x state ABI, for a short and a long request 0, with the poison in K
 * (NaN, +inf: the score is NaN) or in V (NaN: the score is finite, u is NaN);
 * the grid order, page-table prefetch, q dtype (hi + lo split or not) and
 * fused reducer vary with the case index. */
typedef enum poison_kind { POISON_K_NAN, POISON_K_INF, POISON_V_NAN, POISON_NUM } poison_kind;

static void run_nonfinite(int simt, attn_split_policy policy, attn_state_abi abi, int64_t T0,
                          poison_kind kind, uint64_t seed)
{
    int64_t T[2] = {T0, 777}, C[2] = {1, 1};
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 2;
    sp.max_cache_len = T0 + 1 > 778 ? T0 + 1 : 778;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.num_qo_heads = 32;
    sp.num_kv_heads = 8;
    sp.head_dim_qk = sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.spare_pages = 3;
    sp.kv_dtype = ATTN_BF16;
    sp.q_dtype = (seed & 1) ? ATTN_FP32 : ATTN_BF16;
    sp.layout = (seed >> 1) & 1 ? ATTN_HND : ATTN_NHD;
    sp.format = ATTN_KV_CSR;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    sp.poison = true;
    attn_rb rb;
    assert_int_equal(attn_rb_make_lengths(&rb, &sp, T, C, seed), 0);
    rb.m.policy.state_abi = abi;
    rb.m.policy.split_policy = policy;
    rb.m.policy.splits = policy == ATTN_SPLIT_FIXED ? 5 : 0;

    /* one whole row of the visible history of request 0, every K/V head */
    uint64_t s = seed;
    const int64_t t = attn_rb_range(&s, 0, T0 - 1);
    const uint16_t bad = kind == POISON_K_INF ? 0x7f80 : 0x7fc0; /* bf16 +inf / NaN */
    for (uint32_t h = 0; h < rb.g.num_kv_heads; h++) {
        int64_t e = row_elem(&rb, 0, t, h, 128);
        assert_true(e >= 0);
        uint16_t *row = (uint16_t *)(kind == POISON_V_NAN ? rb.v : rb.k) + e;
        for (int i = 0; i < 128; i++)
            row[i] = bad;
    }

    const int heads_fast = (int)((seed >> 2) & 1), prefetch = (int)((seed >> 3) & 1);
    const int fused = (int)((seed >> 4) & 1);
    static const int kBulk[8] = {0,
                                 1,
                                 4,
                                 ATTN_CUDA_BULK_TMAP,
                                 ATTN_DECODE_BULK_AUTO,
                                 ATTN_DECODE_BULK_AUTO,
                                 ATTN_CUDA_BULK_TMAP,
                                 4}; /* copy warps */
    const int bulk = kBulk[(seed >> 5) & 7];
    const int pdl = (int)((seed >> 8) % 3); /* ATTN_CUDA_PDL_OFF / _EARLY / _LATE */
    tune_all(simt, heads_fast, prefetch, fused, bulk, pdl);

    attn_pool_geometry g = rb.g;
    snprintf(g.device, sizeof g.device, "cuda:0");
    void *dk = NULL, *dv = NULL;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_pool_alloc(0, rb.k_bytes, &dk, &err), 0);
    assert_int_equal(attn_cuda_pool_alloc(0, rb.v_bytes, &dv, &err), 0);
    int32_t *all = malloc(sizeof *all * g.num_pages);
    assert_non_null(all);
    for (uint32_t p = 0; p < g.num_pages; p++)
        all[p] = (int32_t)p;
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, rb.k, 1, &err), 0);
    assert_int_equal(attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, rb.v, 1, &err), 0);
    attn_engine_plan *ep = NULL;
    assert_int_equal(attn_engine_plan_new(g_cuda, &rb.m, &g, &ep, &err), 0);
    const attn_split_plan *plan = &ep->split;

    size_t qs = attn_dtype_size(rb.m.q_dtype);
    void *o = malloc(rb.o_elems * qs), *o_ref = malloc(rb.o_elems * qs);
    float *lse = malloc(sizeof *lse * rb.lse_elems), *lse_ref = malloc(sizeof *lse * rb.lse_elems);
    assert_true(o && o_ref && lse && lse_ref);
    void *kd[1] = {dk}, *vd[1] = {dv};
    attn_pool_view pv = {.geom = &g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = kd, .v = vd};
    attn_run_io a = {
        .pool = &pv, .q = rb.q, .k_new = rb.k_new, .v_new = rb.v_new, .o = o, .lse = lse};
    assert_int_equal(attn_engine_run(g_cuda, ep, &a, NULL, &err), 0);

    attn_cpu_call cc = {.m = &rb.m,
                        .g = &rb.g,
                        .k_store = rb.k,
                        .v_store = rb.v,
                        .q = rb.q,
                        .k_new = rb.k_new,
                        .v_new = rb.v_new,
                        .o = o_ref,
                        .lse = lse_ref};
    attn_cpu_options opt = {.acc = ATTN_CPU_ACC_F64};
    assert_int_equal(attn_cpu_attend(&cc, &opt, &err), 0);

    /* request 0 (row 0): every element of every head NaN, as on the CPU;
     * its LSE NaN exactly where the CPU's is (a NaN in V leaves it finite) */
    const size_t row_elems = (size_t)32 * 128;
    size_t finite0 = 0, lse_mismatch = 0, nan1 = 0;
    for (size_t i = 0; i < row_elems; i++) {
        assert_true(isnan(attn_load_f32(o_ref, rb.m.q_dtype, i))); /* the rule itself */
        finite0 += !isnan(attn_load_f32(o, rb.m.q_dtype, i));
    }
    for (size_t h = 0; h < 32; h++) {
        if (isnan(lse_ref[h]) != isnan(lse[h]))
            lse_mismatch++;
        else if (!isnan(lse[h]) && fabs(lse[h] - lse_ref[h]) > 1e-3)
            lse_mismatch++;
    }
    /* request 1 (row 1): untouched and correct */
    double num = 0, den = 0, lse_err = 0;
    for (size_t i = row_elems; i < 2 * row_elems; i++) {
        double x = attn_load_f32(o, rb.m.q_dtype, i), r = attn_load_f32(o_ref, rb.m.q_dtype, i);
        nan1 += isnan(x) != 0;
        num += (x - r) * (x - r);
        den += r * r;
    }
    for (size_t h = 32; h < 64; h++) {
        nan1 += isnan(lse[h]) != 0;
        if (fabs(lse[h] - lse_ref[h]) > lse_err)
            lse_err = fabs(lse[h] - lse_ref[h]);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    static const char *const kinds[] = {"K=nan", "K=+inf", "V=nan"};
    printf("  nonfinite %s T0=%-5lld key=%-5lld %s %s policy=%s slots=%u q=%s%s%s%s%s: "
           "finite O in req 0: %zu, LSE mismatch %zu; req 1 rel=%.2e lse=%.2e nan=%zu\n",
           kinds[kind], (long long)T0, (long long)t, simt ? "simt" : "tc",
           abi == ATTN_ABI_MLU ? "mlu" : "lse_o", attn_split_policy_name(plan->policy),
           plan->num_slots, attn_dtype_name(rb.m.q_dtype), heads_fast ? "/hf" : "/if",
           prefetch ? "/pre" : "", fold_label(fused && !simt, pdl),
           bulk && !simt ? (bulk == 4   ? "/bulk4"
                            : bulk == 1 ? "/bulk1"
                            : bulk == 8 ? "/tmap"
                                        : "/auto")
                         : "",
           finite0, lse_mismatch, rel, lse_err, nan1);
    assert_int_equal(finite0, 0);
    assert_int_equal(lse_mismatch, 0);
    assert_int_equal(nan1, 0);
    assert_true(rel <= 1e-2);
    assert_true(lse_err <= 1e-3);

    free(o);
    free(o_ref);
    free(lse);
    free(lse_ref);
    free(all);
    attn_engine_plan_release(ep);
    attn_cuda_pool_free(0, dk);
    attn_cuda_pool_free(0, dv);
    attn_rb_free(&rb);
    tune(0, 1, 1);
}

static void test_nonfinite_history(void **state)
{
    (void)state;
    static const attn_split_policy policies[] = {ATTN_SPLIT_FA, ATTN_SPLIT_FI, ATTN_SPLIT_GLOBAL,
                                                 ATTN_SPLIT_FIXED};
    static const int64_t lens[] = {300, 5000};
    uint64_t n = 0;
    /* the quick sweep (compute-sanitizer) keeps one length and one poison */
    const int nlens = g_quick ? 1 : 2, nkinds = g_quick ? 1 : POISON_NUM;
    for (int simt = 0; simt < 2; simt++)
        for (int p = 0; p < 4; p++)
            for (int abi = 0; abi < 2; abi++)
                for (int l = 0; l < nlens; l++)
                    for (int k = 0; k < nkinds; k++)
                        run_nonfinite(simt, policies[p], (attn_state_abi)abi, lens[l],
                                      (poison_kind)k, g_seed + 7919u * n++);
}

/* Admission says every reason at once (seed 0x07B). */
static void test_admission_reasons(void **state)
{
    (void)state;
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = 2;
    sp.phase_mask = 1u << ATTN_PHASE_APPEND;
    sp.head_dim_qk = sp.head_dim_vo = 80;
    sp.page_size = 12;
    sp.kv_dtype = ATTN_FP32;
    sp.mask_kind = ATTN_MASK_DENSE;
    attn_rb rb;
    assert_int_equal(attn_rb_make(&rb, &sp, 3), 0);
    attn_admission adm;
    attn_cuda_admit(&rb.m, &rb.g, &adm); /* rb's pool is a cpu pool */
    assert_false(adm.admitted);
    bool seen[ATTN_ADMIT_NUM_FACTORS] = {0};
    for (uint32_t i = 0; i < adm.num_reasons; i++)
        seen[adm.reasons[i].factor] = true;
    assert_true(seen[ATTN_ADMIT_HARDWARE]);
    assert_true(seen[ATTN_ADMIT_PHASE]);
    assert_true(seen[ATTN_ADMIT_KV_DTYPE]);
    assert_true(seen[ATTN_ADMIT_SHAPE]);
    assert_true(seen[ATTN_ADMIT_LAYOUT]);
    assert_true(seen[ATTN_ADMIT_MASK]);
    attn_rb_free(&rb);
}

int main(void)
{
    const char *e = getenv("ATTN_SEED");
    g_seed = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    g_quick = getenv("ATTN_GPU_QUICK") != NULL;
    printf("test_decode_gpu: seed %llu (replay with ATTN_SEED)\n", (unsigned long long)g_seed);
    char why[160];
    if (!attn_cuda_available(NULL, why, sizeof why)) {
        printf("no GPU: %s\n", why);
        const struct CMUnitTest only[] = {cmocka_unit_test(test_admission_reasons)};
        return cmocka_run_group_tests(only, NULL, NULL);
    }
    attn_cuda_device_info di;
    if (attn_cuda_device_info_get(0, &di, NULL) == 0)
        printf("device: %s cc %d.%d, %d SMs, driver %d runtime %d image %s\n", di.name, di.cc_major,
               di.cc_minor, di.sm_count, di.driver_version, di.runtime_version, di.image_id);
    attn_engine_config cfg = {.device = 0, .num_threads = 0, .tuning = NULL};
    attn_error_detail err;
    if (attn_engine_create(attn_cuda_engine_ops(), &cfg, &g_cuda, &err) != 0) {
        printf("cannot make the cuda:0 instance: %s: %s\n", err.field, err.message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_reasons),
        cmocka_unit_test(test_seed_0x02G_known_answer),
        cmocka_unit_test(test_nonfinite_history),
        cmocka_unit_test(test_random_sweep),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    attn_engine_destroy(g_cuda);
    return rc;
}
