/* GPU test of the CUDA engines' no-commit restore (run on an H100/H200:
 * tests/gpu/build.sh builds it; one device call runs it in seconds).
 *
 * cuda_decode (a decode batch) and cuda_prefill (an append batch, and a
 * mixed batch under partition) run a no-commit run on layer 1 of a two-layer
 * device pool, on fresh random inputs (the seed is printed, ATTN_SEED
 * replays one), with the instance refusing the run's restore launches
 * (tuning fail_restore_launches; poison on):
 *  - one refused: the failure path enqueues the restore again, so the run
 *    fails with ATTN_E_CUDA, field "layer", and the pool is byte-identical;
 *  - two refused (every restore the run tries): ATTN_E_POOL_UNRESTORED,
 *    field "layer", the message naming layer 1, and the pool holds exactly
 *    what a commit writes (the CPU engine's commit of the same rows), so
 *    the error tells the truth about the pool;
 *  - after either, the instance is not left broken: a clean no-commit run
 *    of a fresh plan returns 0 and leaves the pool as it found it, and
 *    layer 0 was never touched.
 * Before the fix the no-commit path cleared its "swapped" flag before the
 * restore launch: one refusal left the new rows in the pool behind a plain
 * launch error (field ""), two never said E_POOL_UNRESTORED.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "attn/names.h"
#include "engines/cpu/engine.h"
#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/prefill_engine.h"
#include "kernels/common/dtype.h"
#include "planner/engine.h"
#include "tests/lib/random_batch.h"

#define P (1u << ATTN_PHASE_PREFILL)
#define A (1u << ATTN_PHASE_APPEND)
#define D (1u << ATTN_PHASE_DECODE)

typedef struct restore_env {
    uint64_t seed;
    attn_engine *dec, *pre; /* cuda_decode and cuda_prefill on cuda:0 */
} restore_env;

typedef struct restore_case {
    const char *name;
    bool prefill_engine;
    uint32_t B, phases;
    int64_t t_max, c_max;
    uint32_t hq, hkv, d, page;
    attn_dtype kv;
    attn_schedule_policy sched;
} restore_case;

static const restore_case k_cases[] = {
    {"decode-d128-g4", false, 6, D, 3000, 1, 16, 4, 128, 16, ATTN_BF16, ATTN_SCHED_AUTO},
    {"append-d128-fp16", true, 3, P | A, 800, 200, 8, 2, 128, 16, ATTN_FP16, ATTN_SCHED_AUTO},
    {"mixed-d64-partition", true, 5, P | A | D, 700, 150, 16, 4, 64, 16, ATTN_BF16,
     ATTN_SCHED_PARTITION},
};

/* The instance's tuning for the plans made next: poison on, `refusals`
 * restore launches of every run refused. */
static void tune(const restore_env *env, bool prefill_engine, int refusals)
{
    if (prefill_engine) {
        attn_cuda_prefill_tuning t = {.poison = 1, .fail_restore_launches = refusals};
        attn_cuda_prefill_engine_set_tuning(env->pre, &t);
    } else {
        attn_cuda_tuning t;
        attn_cuda_tuning_defaults(&t);
        t.poison = 1;
        t.fail_restore_launches = refusals;
        attn_cuda_engine_set_tuning(env->dec, &t);
    }
}

/* A batch of the case's phases: T in [1, t_max] for append and decode rows,
 * C in [1, c_max] (2 at least for append), one layer of host K/V. */
static void draw(const restore_case *rc, uint64_t seed, attn_rb *rb)
{
    uint64_t s = seed;
    int64_t T[16], C[16], max_t = 1;
    assert_true(rc->B <= 16);
    for (uint32_t b = 0; b < rc->B; b++) {
        int ph;
        do
            ph = (int)attn_rb_range(&s, 0, 2);
        while (!(rc->phases & (1u << ph)));
        T[b] = ph == ATTN_PHASE_PREFILL ? 0 : attn_rb_range(&s, 1, rc->t_max);
        C[b] = ph == ATTN_PHASE_DECODE   ? 1
               : ph == ATTN_PHASE_APPEND ? attn_rb_range(&s, 2, rc->c_max)
                                         : attn_rb_range(&s, 1, rc->c_max);
        max_t = T[b] > max_t ? T[b] : max_t;
    }
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = rc->B;
    sp.max_cache_len = max_t;
    sp.num_qo_heads = rc->hq;
    sp.num_kv_heads = rc->hkv;
    sp.head_dim_qk = sp.head_dim_vo = rc->d;
    sp.page_size = rc->page;
    sp.spare_pages = (uint32_t)attn_rb_range(&s, 1, 9);
    sp.kv_dtype = rc->kv;
    sp.q_dtype = rc->kv;
    sp.layout = ATTN_NHD;
    sp.format = ATTN_KV_CSR;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    sp.poison = true;
    assert_int_equal(attn_rb_make_lengths(rb, &sp, T, C, seed), 0);
    rb->m.policy.schedule = rc->sched;
}

/* Two layers on the device: layer 0 zero-filled (never run), layer 1 the
 * batch's K/V. */
typedef struct dev_pool {
    attn_pool_geometry g;
    void *k[2], *v[2];
    attn_pool_view pv;
    int32_t *all;
} dev_pool;

static void pool_up(dev_pool *p, const attn_rb *rb)
{
    attn_error_detail err;
    p->g = rb->g;
    p->g.layers = 2;
    snprintf(p->g.device, sizeof p->g.device, "cuda:0");
    for (int l = 0; l < 2; l++) {
        assert_int_equal(attn_cuda_pool_alloc(0, rb->k_bytes, &p->k[l], &err), 0);
        assert_int_equal(attn_cuda_pool_alloc(0, rb->v_bytes, &p->v[l], &err), 0);
    }
    p->all = malloc(sizeof *p->all * p->g.num_pages);
    assert_non_null(p->all);
    for (uint32_t i = 0; i < p->g.num_pages; i++)
        p->all[i] = (int32_t)i;
    assert_int_equal(
        attn_cuda_pool_pages(&p->g, 0, p->k[1], 0, p->all, p->g.num_pages, rb->k, 1, &err), 0);
    assert_int_equal(
        attn_cuda_pool_pages(&p->g, 0, p->v[1], 1, p->all, p->g.num_pages, rb->v, 1, &err), 0);
    p->pv = (attn_pool_view){
        .geom = &p->g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = p->k, .v = p->v};
}

/* FNV checksums of one layer's K and V stores. */
static void layer_sums(const dev_pool *p, const attn_rb *rb, int layer, uint64_t *ks, uint64_t *vs)
{
    attn_error_detail err;
    void *kb = malloc(rb->k_bytes), *vb = malloc(rb->v_bytes);
    assert_true(kb && vb);
    assert_int_equal(
        attn_cuda_pool_pages(&p->g, 0, p->k[layer], 0, p->all, p->g.num_pages, kb, 0, &err), 0);
    assert_int_equal(
        attn_cuda_pool_pages(&p->g, 0, p->v[layer], 1, p->all, p->g.num_pages, vb, 0, &err), 0);
    *ks = attn_rb_checksum(kb, rb->k_bytes);
    *vs = attn_rb_checksum(vb, rb->v_bytes);
    free(kb);
    free(vb);
}

static void pool_down(dev_pool *p)
{
    for (int l = 0; l < 2; l++) {
        attn_cuda_pool_free(0, p->k[l]);
        attn_cuda_pool_free(0, p->v[l]);
    }
    free(p->all);
}

/* What a commit of the batch's new rows writes: the CPU engine's commit on
 * a host copy of the pool, as checksums. */
static void committed_sums(const attn_rb *rb, uint64_t *ks, uint64_t *vs)
{
    void *k = malloc(rb->k_bytes), *v = malloc(rb->v_bytes);
    const size_t qs = attn_dtype_size(rb->m.q_dtype);
    void *o = malloc(rb->o_elems * qs);
    float *lse = malloc(sizeof *lse * rb->lse_elems);
    assert_true(k && v && o && lse);
    memcpy(k, rb->k, rb->k_bytes);
    memcpy(v, rb->v, rb->v_bytes);
    attn_cpu_call cc = {.m = &rb->m,
                        .g = &rb->g,
                        .k_store = k,
                        .v_store = v,
                        .q = rb->q,
                        .k_new = rb->k_new,
                        .v_new = rb->v_new,
                        .o = o,
                        .lse = lse,
                        .commit = true};
    attn_cpu_options opt = {.acc = ATTN_CPU_ACC_F32};
    attn_error_detail err;
    assert_int_equal(attn_cpu_attend(&cc, &opt, &err), 0);
    *ks = attn_rb_checksum(k, rb->k_bytes);
    *vs = attn_rb_checksum(v, rb->v_bytes);
    free(k);
    free(v);
    free(o);
    free(lse);
}

/* One no-commit run of a fresh plan on layer 1: its code, with err filled. */
static int run_no_commit(attn_engine *eng, const attn_rb *rb, dev_pool *dp, attn_error_detail *err)
{
    attn_engine_plan *ep = NULL;
    int rv = attn_engine_plan_new(eng, &rb->m, &dp->g, &ep, err);
    if (rv != 0)
        fail_msg("plan: %s %s: %s", attn_err_name(rv), err->field, err->message);
    const size_t qs = attn_dtype_size(rb->m.q_dtype);
    void *o = malloc(rb->o_elems * qs);
    float *lse = malloc(sizeof *lse * rb->lse_elems);
    assert_true(o && lse);
    attn_run_io a = {.pool = &dp->pv,
                     .layer = 1,
                     .q = rb->q,
                     .k_new = rb->k_new,
                     .v_new = rb->v_new,
                     .o = o,
                     .lse = lse,
                     .commit = false};
    memset(err, 0, sizeof *err);
    rv = attn_engine_run(eng, ep, &a, NULL, err);
    attn_engine_plan_release(ep);
    free(o);
    free(lse);
    return rv;
}

static void run_case(const restore_env *env, const restore_case *rc, uint64_t seed, int refusals)
{
    attn_rb rb;
    draw(rc, seed, &rb);
    dev_pool dp;
    pool_up(&dp, &rb);
    attn_engine *eng = rc->prefill_engine ? env->pre : env->dec;
    uint64_t k0, v0, k1, v1, kc, vc, z0k, z0v, z1k, z1v;
    layer_sums(&dp, &rb, 1, &k0, &v0);
    assert_true(k0 == attn_rb_checksum(rb.k, rb.k_bytes));
    layer_sums(&dp, &rb, 0, &z0k, &z0v);
    committed_sums(&rb, &kc, &vc);
    assert_true(kc != k0 || vc != v0); /* a commit changes the pool, so the checks can fail */

    tune(env, rc->prefill_engine, refusals);
    attn_error_detail err;
    const int rv = run_no_commit(eng, &rb, &dp, &err);
    layer_sums(&dp, &rb, 1, &k1, &v1);
    const char *state = k1 == k0 && v1 == v0   ? "as it was"
                        : k1 == kc && v1 == vc ? "holds the new rows"
                                               : "neither";
    printf("  %-20s seed=%llu %s refused=%d -> %s field \"%s\" (%s); pool %s\n", rc->name,
           (unsigned long long)seed, eng->ops->name, refusals, attn_err_name(rv), err.field,
           err.message, state);
    fflush(stdout);
    assert_string_equal(err.field, "layer");
    if (refusals == 1) {
        /* the second restore (the failure path's) put the rows back */
        assert_int_equal(rv, ATTN_E_CUDA);
        assert_true(k1 == k0 && v1 == v0);
    } else {
        /* no restore ran: the pool holds what a commit writes, and the
         * error says so, naming the layer */
        assert_int_equal(rv, ATTN_E_POOL_UNRESTORED);
        assert_non_null(strstr(err.message, "layer 1"));
        assert_true(k1 == kc && v1 == vc);
    }

    /* the instance serves the next run as usual, on the pool as it is */
    tune(env, rc->prefill_engine, 0);
    const int again = run_no_commit(eng, &rb, &dp, &err);
    if (again != 0)
        fail_msg("the run after: %s %s: %s", attn_err_name(again), err.field, err.message);
    uint64_t k2, v2;
    layer_sums(&dp, &rb, 1, &k2, &v2);
    assert_true(k2 == k1 && v2 == v1);
    layer_sums(&dp, &rb, 0, &z1k, &z1v);
    assert_true(z1k == z0k && z1v == z0v); /* layer 0 never touched */

    pool_down(&dp);
    attn_rb_free(&rb);
}

static void run_all(void **state, int refusals)
{
    const restore_env *env = *state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        run_case(env, &k_cases[i], env->seed + 31u * i + (uint64_t)refusals, refusals);
}

/* One restore launch refused: the failure path's restore puts the rows back. */
static void test_one_refused_restore_leaves_the_pool(void **state)
{
    run_all(state, 1);
}

/* Every restore launch refused: E_POOL_UNRESTORED, and the pool is not restored. */
static void test_unrestored_pool_says_so(void **state)
{
    run_all(state, 2);
}

int main(void)
{
    restore_env env;
    memset(&env, 0, sizeof env);
    const char *e = getenv("ATTN_SEED");
    env.seed = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    printf("test_restore_gpu: seed %llu (replay with ATTN_SEED)\n", (unsigned long long)env.seed);
    char why[160];
    if (!attn_cuda_available(NULL, why, sizeof why)) {
        printf("no GPU: %s\n", why);
        return 1; /* this test exists to run on a GPU: no GPU is no result */
    }
    attn_engine_config cfg = {.device = 0, .num_threads = 0, .tuning = NULL};
    attn_error_detail err;
    if (attn_engine_create(attn_cuda_engine_ops(), &cfg, &env.dec, &err) != 0 ||
        attn_engine_create(attn_cuda_prefill_engine_ops(), &cfg, &env.pre, &err) != 0) {
        printf("cannot make the cuda:0 instances: %s: %s\n", err.field, err.message);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_one_refused_restore_leaves_the_pool, &env),
        cmocka_unit_test_prestate(test_unrestored_pool_says_so, &env),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    attn_engine_destroy(env.dec);
    attn_engine_destroy(env.pre);
    return rc;
}
