/* seed 0x07A, 0x07D, 0x07F, 0x0BE: call keys, plan keys, canonical form, digests, lifecycle. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "dispatch_fixture.h"
#include "planner/key.h"

/* seed 0x07D: the base call's canonical teaching-key digest */
#define SEED_TEACHING_SHA "f4813d5b08179c23e85c587f0da636b380caeb8338e74c0c4a5faa87cd66d2eb"
/* seed 0x07F: the fixture's plan-key digest */
#define SEED_PLAN_SHA "2a378ec0dc32475c6b2cf67212cd405d9184e23d54d27eeb1c57471ad470c3a8"

/* The teaching key of seed 0x07A, fields deliberately not in sorted order. */
static void teaching_key(attn_key *k)
{
    attn_key_init(k);
    attn_key_set_str(k, "phase", "decode");
    attn_key_set_str(k, "device_type", "cuda");
    attn_key_set_int(k, "compute_capability", 90);
    attn_key_set_str(k, "dtype", "fp16");
    attn_key_set_str(k, "kv_dtype", "fp16");
    attn_key_set_int(k, "q_len", 1);
    attn_key_set_int(k, "kv_len", 4096);
    attn_key_set_int(k, "num_q_heads", 32);
    attn_key_set_int(k, "num_kv_heads", 8);
    attn_key_set_int(k, "head_dim_qk", 128);
    attn_key_set_int(k, "head_dim_vo", 128);
    attn_key_set_str(k, "cache_layout", "paged_nhd");
    attn_key_set_int(k, "page_size", 16);
    attn_key_set_str(k, "mask_kind", "causal");
    attn_key_set_double(k, "dropout_p", 0.0);
    attn_key_set_bool(k, "training", false);
    attn_key_set_bool(k, "requires_deterministic", true);
    attn_key_set_bool(k, "cuda_graph", true);
    attn_key_set_bool(k, "last_dim_contiguous", true);
    attn_key_set_str(k, "backend_request", "auto");
}

static void test_seed_teaching_key_digest(void **state)
{
    (void)state;
    attn_key k;
    char hex[ATTN_SHA256_HEX], *s = NULL;
    size_t n = 0;
    teaching_key(&k);
    assert_int_equal(attn_key_canonical(&k, &s, &n), 0);
    assert_string_equal(
        s, "{\"backend_request\":\"auto\",\"cache_layout\":\"paged_nhd\",\"compute_capability\":90,"
           "\"cuda_graph\":true,\"device_type\":\"cuda\",\"dropout_p\":0.0,\"dtype\":\"fp16\","
           "\"head_dim_qk\":128,\"head_dim_vo\":128,\"kv_dtype\":\"fp16\",\"kv_len\":4096,"
           "\"last_dim_contiguous\":true,\"mask_kind\":\"causal\",\"num_kv_heads\":8,"
           "\"num_q_heads\":32,\"page_size\":16,\"phase\":\"decode\",\"q_len\":1,"
           "\"requires_deterministic\":true,\"training\":false}");
    assert_int_equal(n, strlen(s));
    free(s);
    assert_int_equal(attn_key_sha256(&k, hex), 0);
    assert_string_equal(hex, SEED_TEACHING_SHA);
    /* seed 0x07D: changing only d_qk changes the digest */
    attn_key_set_int(&k, "head_dim_qk", 80);
    assert_int_equal(attn_key_sha256(&k, hex), 0);
    assert_string_not_equal(hex, SEED_TEACHING_SHA);
    attn_key_fini(&k);
}

static void test_seed_plan_key_digest(void **state)
{
    (void)state;
    attn_key k;
    char hex[ATTN_SHA256_HEX];
    attn_key_init(&k);
    attn_key_set_bool(&k, "cuda_graph", true);
    attn_key_set_str(&k, "workspace_device", "cuda:0");
    attn_key_set_str(&k, "kv_layout", "paged_nhd");
    attn_key_set_int(&k, "page_size", 16);
    attn_key_set_int(&k, "num_q_heads", 32);
    attn_key_set_int(&k, "num_kv_heads", 8);
    attn_key_set_int(&k, "head_dim_qk", 128);
    attn_key_set_int(&k, "head_dim_vo", 128);
    attn_key_set_str(&k, "q_dtype", "fp16");
    attn_key_set_str(&k, "kv_dtype", "fp16");
    attn_key_set_str(&k, "device", "cuda:0");
    assert_int_equal(attn_key_sha256(&k, hex), 0);
    assert_string_equal(hex, SEED_PLAN_SHA);
    attn_key_fini(&k);
}

static void test_double_canonical_form(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *s;
    } cases[] = {
        {0.0, "0.0"},
        {1.0, "1.0"},
        {100.0, "100.0"},
        {-2.5, "-2.5"},
        {0.1, "0.1"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {1e16, "1e+16"},
        {123456.789, "123456.789"},
        {1e-300, "1e-300"},
        {0.08838834764831845, "0.08838834764831845"},
        {1.5e300, "1.5e+300"},
        {9007199254740993.0, "9007199254740992.0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_key k;
        attn_key_init(&k);
        attn_key_set_double(&k, "x", cases[i].v);
        char buf[64];
        attn_key_field_str(attn_key_get(&k, "x"), buf, sizeof buf);
        assert_string_equal(buf, cases[i].s);
        attn_key_fini(&k);
    }
}

static void test_key_fields_and_copy(void **state)
{
    (void)state;
    attn_key a, b;
    int64_t lens[3] = {5, 6, 7};
    attn_key_init(&a);
    attn_key_init(&b);
    assert_int_equal(attn_key_set_ints(&a, "kv_len", lens, 3), 0);
    assert_int_equal(attn_key_set_str(&a, "s", "a\"b"), 0);
    char big[ATTN_KEY_STR_MAX + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(attn_key_set_str(&a, "big", big), ATTN_E_RANGE);
    assert_int_equal(attn_key_copy(&b, &a), 0);
    lens[0] = 99; /* the key copied the array */
    char *s = NULL;
    assert_int_equal(attn_key_canonical(&b, &s, NULL), 0);
    assert_string_equal(s, "{\"kv_len\":[5,6,7],\"s\":\"a\\\"b\"}");
    free(s);
    assert_int_equal(attn_key_remove(&b, "s"), 1);
    assert_int_equal(attn_key_remove(&b, "s"), 0);
    assert_null(attn_key_get(&b, "s"));
    attn_key_fini(&a);
    attn_key_fini(&b);
}

/* seed 0x07A: our call key of the base call carries the readable fields. */
static void test_call_key_readable_fields(void **state)
{
    (void)state;
    fx_call c;
    fx_base(&c);
    attn_key_env env = fx_env(&c);
    attn_key k;
    attn_key_init(&k);
    assert_int_equal(attn_call_key_build(&c.m, &c.g, &env, &k), 0);
    assert_string_equal(attn_key_get(&k, "phase")->s, "decode");
    assert_int_equal(attn_key_get(&k, "kv_len")->num_ints, 1);
    assert_int_equal(attn_key_get(&k, "kv_len")->ints[0], 4096);
    assert_int_equal(attn_key_get(&k, "q_len")->ints[0], 1);
    assert_int_equal(attn_key_get(&k, "num_q_heads")->i, 32);
    assert_int_equal(attn_key_get(&k, "num_kv_heads")->i, 8);
    assert_string_equal(attn_key_get(&k, "cache_layout")->s, "paged_nhd");
    assert_string_equal(attn_key_get(&k, "q_dtype")->s, "fp16");
    assert_true(attn_key_get(&k, "cuda_graph")->b);
    assert_string_equal(attn_key_get(&k, "verify_metric")->s, "rel_l2");
    assert_float_equal(attn_key_get(&k, "verify_rtol")->d, 1e-2, 0);
    assert_float_equal(attn_key_get(&k, "sm_scale")->d, 1.0 / sqrt(128.0), 1e-15);
    /* a mixed batch is its own operation coordinate (seed 0x08F) */
    attn_request_desc two[2] = {{.id = "a", .cache_len = 10, .new_len = 1},
                                {.id = "b", .cache_len = 0, .new_len = 4}};
    c.m.requests = two;
    c.m.num_requests = 2;
    assert_int_equal(attn_call_key_build(&c.m, &c.g, &env, &k), 0);
    assert_string_equal(attn_key_get(&k, "phase")->s, "mixed");
    attn_key_fini(&k);
}

/* Digest of the call key of `c`. */
static void call_digest(const fx_call *c, char hex[ATTN_SHA256_HEX])
{
    attn_key k;
    assert_int_equal(fx_call_key(c, &k), 0);
    assert_int_equal(attn_key_sha256(&k, hex), 0);
    attn_key_fini(&k);
}

/* Every coordinate of the call changes the digest (seed 0x07I: a changed
 * coordinate is a new key and a new evidence row). */
static void test_call_key_sensitive_to_every_field(void **state)
{
    (void)state;
    fx_call base;
    fx_base(&base);
    char h0[ATTN_SHA256_HEX];
    call_digest(&base, h0);
    int32_t fm[4][4096 + 1] = {{0}};
    uint8_t bits[600] = {0};
    enum { NMUT = 33 };
    for (int mut = 0; mut < NMUT; mut++) {
        fx_call c;
        fx_base(&c);
        switch (mut) {
        case 0:
            c.req[0].cache_len = 4094;
            break;
        case 1:
            c.req[0].new_len = 2;
            break;
        case 2:
            c.m.num_qo_heads = 16;
            break;
        case 3:
            c.g.num_kv_heads = 4;
            break;
        case 4:
            c.g.head_dim_qk = 256;
            break;
        case 5:
            c.g.head_dim_vo = 64;
            break;
        case 6:
            c.m.q_dtype = ATTN_BF16;
            break;
        case 7:
            c.g.kv_dtype = ATTN_BF16;
            break;
        case 8:
            c.g.layout = ATTN_HND;
            break;
        case 9:
            c.g.page_size = 32;
            break;
        case 10:
            c.m.kv.format = ATTN_KV_DENSE;
            break;
        case 11:
            c.m.mask.kind = ATTN_MASK_NONE;
            break;
        case 12:
            c.m.mask.kind = ATTN_MASK_WINDOW;
            c.m.mask.left = 128;
            break;
        case 13:
            c.m.mask.kind = ATTN_MASK_SINK;
            c.m.mask.sinks = 4;
            c.m.mask.left = 128;
            break;
        case 14:
            c.m.has_sm_scale = true;
            c.m.sm_scale = 0.5f;
            break;
        case 15:
            snprintf(c.m.policy.backend, sizeof c.m.policy.backend, "cpu_ref");
            break;
        case 16:
            c.m.policy.schedule = ATTN_SCHED_UNIFIED;
            break;
        case 17:
            c.m.policy.splits = 4;
            break;
        case 18:
            c.m.policy.split_policy = ATTN_SPLIT_FI;
            break;
        case 19:
            c.m.policy.state_abi = ATTN_ABI_MLU;
            break;
        case 20:
            c.m.policy.deterministic = false;
            break;
        case 21:
            c.m.policy.graph = false;
            break;
        case 22:
            snprintf(c.device, sizeof c.device, "cuda:1");
            break;
        case 23:
            snprintf(c.workspace_device, sizeof c.workspace_device, "cuda:1");
            break;
        case 24:
            c.cc = 100;
            break;
        case 25:
            snprintf(c.device_type, sizeof c.device_type, "cpu");
            break;
        case 26: /* flashmask with all-empty intervals vs. one masked run */
            c.m.mask.kind = ATTN_MASK_FLASHMASK;
            c.m.mask.fm_lts = fm[0];
            c.m.mask.fm_lte = fm[1];
            c.m.mask.fm_uts = fm[2];
            c.m.mask.fm_ute = fm[3];
            c.m.mask.fm_len = 4096;
            break;
        case 27:
            c.m.mask.kind = ATTN_MASK_DENSE;
            c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
            c.m.mask.dense_bits = bits;
            c.m.mask.dense_bytes = 512;
            break;
        case 28:
            c.m.mask.kind = ATTN_MASK_DENSE;
            c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_ALLOWED;
            c.m.mask.dense_bits = bits;
            c.m.mask.dense_bytes = 512;
            break;
        case 29: /* same as 28 but one bit differs */
            c.m.mask.kind = ATTN_MASK_DENSE;
            c.m.mask.polarity = ATTN_POLARITY_TRUE_MEANS_ALLOWED;
            bits[7] = 1;
            c.m.mask.dense_bits = bits;
            c.m.mask.dense_bytes = 512;
            break;
        case 30:
            c.g.kv_dtype = ATTN_FP32;
            c.m.q_dtype = ATTN_FP32;
            break;
        case 31: /* flashmask data differs from case 26 */
            c.m.mask.kind = ATTN_MASK_FLASHMASK;
            fm[1][5] = 1;
            c.m.mask.fm_lts = fm[0];
            c.m.mask.fm_lte = fm[1];
            c.m.mask.fm_uts = fm[2];
            c.m.mask.fm_ute = fm[3];
            c.m.mask.fm_len = 4096;
            break;
        case 32: /* overlap is a schedule of its own (issue 12), not unified's */
            c.m.policy.schedule = ATTN_SCHED_OVERLAP;
            break;
        }
        char h[ATTN_SHA256_HEX];
        call_digest(&c, h);
        if (strcmp(h, h0) == 0)
            fail_msg("mutation %d does not change the call key digest", mut);
        /* remember digests of the mask-data pairs: they must differ pairwise */
        static char prev[NMUT][ATTN_SHA256_HEX];
        memcpy(prev[mut], h, sizeof h);
        if (mut == 29)
            assert_string_not_equal(prev[28], prev[29]);
        if (mut == 31)
            assert_string_not_equal(prev[26], prev[31]);
        if (mut == 32)
            assert_string_not_equal(prev[16], prev[32]);
    }
    /* and every field of the key, perturbed alone, changes the digest */
    attn_key k;
    assert_int_equal(fx_call_key(&base, &k), 0);
    for (uint32_t i = 0; i < k.num_fields; i++) {
        attn_key p;
        attn_key_init(&p);
        assert_int_equal(attn_key_copy(&p, &k), 0);
        attn_key_field *f = &p.fields[i];
        switch (f->type) {
        case ATTN_KEY_INT:
            f->i += 1;
            break;
        case ATTN_KEY_DOUBLE:
            f->d = f->d * 2 + 1;
            break;
        case ATTN_KEY_BOOL:
            f->b = !f->b;
            break;
        case ATTN_KEY_STR:
            strcat(f->s, "x");
            break;
        case ATTN_KEY_INTS:
            f->ints[0] += 1;
            break;
        }
        char h[ATTN_SHA256_HEX];
        assert_int_equal(attn_key_sha256(&p, h), 0);
        if (strcmp(h, h0) == 0)
            fail_msg("field %s does not reach the digest", f->name);
        attn_key_fini(&p);
    }
    attn_key_fini(&k);
}

/* Stable across runs and processes: insertion order does not matter, a
 * child process computes the same digest, and the seed digests (computed by
 * another implementation) match byte for byte (tests above). */
static void test_call_key_stable_across_processes(void **state)
{
    (void)state;
    fx_call c;
    fx_base(&c);
    char mine[ATTN_SHA256_HEX], theirs[ATTN_SHA256_HEX] = "";
    call_digest(&c, mine);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char h[ATTN_SHA256_HEX];
        fx_call cc;
        fx_base(&cc);
        call_digest(&cc, h);
        ssize_t w = write(fd[1], h, sizeof h);
        _exit(w == (ssize_t)sizeof h ? 0 : 1);
    }
    close(fd[1]);
    assert_int_equal(read(fd[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(mine, theirs);

    /* reversed insertion order, same digest */
    attn_key k, r;
    attn_key_init(&r);
    assert_int_equal(fx_call_key(&c, &k), 0);
    for (int i = (int)k.num_fields - 1; i >= 0; i--) {
        attn_key one;
        attn_key_init(&one);
        const attn_key_field *f = &k.fields[i];
        switch (f->type) {
        case ATTN_KEY_INT:
            attn_key_set_int(&r, f->name, f->i);
            break;
        case ATTN_KEY_DOUBLE:
            attn_key_set_double(&r, f->name, f->d);
            break;
        case ATTN_KEY_BOOL:
            attn_key_set_bool(&r, f->name, f->b);
            break;
        case ATTN_KEY_STR:
            attn_key_set_str(&r, f->name, f->s);
            break;
        case ATTN_KEY_INTS:
            attn_key_set_ints(&r, f->name, f->ints, f->num_ints);
            break;
        }
        attn_key_fini(&one);
    }
    char hr[ATTN_SHA256_HEX];
    assert_int_equal(attn_key_sha256(&r, hr), 0);
    assert_string_equal(hr, mine);
    attn_key_fini(&k);
    attn_key_fini(&r);
}

static void plan_key_of(const fx_call *c, attn_key *pk)
{
    attn_key k;
    assert_int_equal(fx_call_key(c, &k), 0);
    assert_int_equal(attn_plan_key_build(&k, pk), 0);
    attn_key_fini(&k);
}

/* seed 0x07F: our plan key of the base call, less our two schedule fields,
 * is the fixture's plan key byte for byte. */
static void test_plan_key_is_seed_projection(void **state)
{
    (void)state;
    fx_call c;
    fx_base(&c);
    attn_key pk;
    attn_key_init(&pk);
    plan_key_of(&c, &pk);
    assert_int_equal(pk.num_fields, 13);
    assert_string_equal(attn_key_get(&pk, "schedule")->s, "auto");
    assert_string_equal(attn_key_get(&pk, "state_abi")->s, "lse_o");
    assert_int_equal(attn_key_remove(&pk, "schedule"), 1);
    assert_int_equal(attn_key_remove(&pk, "state_abi"), 1);
    char hex[ATTN_SHA256_HEX];
    assert_int_equal(attn_key_sha256(&pk, hex), 0);
    assert_string_equal(hex, SEED_PLAN_SHA);
    attn_key_fini(&pk);
}

/* seed 0x07F lifecycle table. */
static void test_plan_lifecycle_table(void **state)
{
    (void)state;
    fx_call c;
    fx_base(&c);
    attn_key frozen, now;
    attn_key_init(&frozen);
    attn_key_init(&now);
    plan_key_of(&c, &frozen);
    attn_plan_decision d;
    attn_error_detail err;

    attn_plan_decide(NULL, &frozen, &d);
    assert_int_equal(d.event, ATTN_PLAN_MISS);

    /* declared dynamic lengths / page list: reuse */
    fx_call dyn = c;
    fx_base(&dyn);
    dyn.req[0].cache_len = 2000;
    dyn.page_indptr[1] = 126;
    dyn.m.kv.num_page_indices = 126;
    dyn.page_indices[0] = 200;
    plan_key_of(&dyn, &now);
    attn_plan_decide(&frozen, &now, &d);
    assert_int_equal(d.event, ATTN_PLAN_HIT);
    assert_string_equal(d.reason, "static projection unchanged");
    assert_int_equal(attn_plan_check_named(&frozen, &now, &err), 0);

    /* d_qk, d_v 128 -> 256: kernel specialization changes */
    fx_call dim;
    fx_base(&dim);
    dim.g.head_dim_qk = dim.g.head_dim_vo = 256;
    plan_key_of(&dim, &now);
    attn_plan_decide(&frozen, &now, &d);
    assert_int_equal(d.event, ATTN_PLAN_REPLAN);
    assert_non_null(
        strstr(d.reason, "head_dim_qk 128->256 (kernel/layout specialization changes)"));
    assert_non_null(strstr(d.reason, "head_dim_vo 128->256"));
    assert_int_equal(attn_plan_check_named(&frozen, &now, &err), ATTN_E_STALE_PLAN);
    assert_string_equal(err.field, "plan_id");

    /* workspace cuda:0 -> cuda:1: workspace ownership changes */
    fx_call ws;
    fx_base(&ws);
    snprintf(ws.workspace_device, sizeof ws.workspace_device, "cuda:1");
    plan_key_of(&ws, &now);
    attn_plan_decide(&frozen, &now, &d);
    assert_int_equal(d.event, ATTN_PLAN_REPLAN);
    assert_string_equal(d.reason,
                        "workspace_device \"cuda:0\"->\"cuda:1\" (workspace ownership changes)");

    /* graph mode true -> false: capture/lifecycle contract changes */
    fx_call gr;
    fx_base(&gr);
    gr.m.policy.graph = false;
    plan_key_of(&gr, &now);
    attn_plan_decide(&frozen, &now, &d);
    assert_int_equal(d.event, ATTN_PLAN_REPLAN);
    assert_string_equal(d.reason, "cuda_graph true->false (capture/lifecycle contract changes)");
    assert_int_equal(attn_plan_check_named(&frozen, &now, &err), ATTN_E_STALE_PLAN);
    assert_non_null(strstr(err.message, "cuda_graph"));
    attn_key_fini(&frozen);
    attn_key_fini(&now);
}

static void test_tolerance_per_dtype(void **state)
{
    (void)state;
    attn_tolerance t = attn_tolerance_for(ATTN_FP32, ATTN_FP32);
    assert_string_equal(t.metric, "max_rel");
    assert_float_equal(t.rtol, 1e-5, 0);
    t = attn_tolerance_for(ATTN_BF16, ATTN_BF16);
    assert_string_equal(t.metric, "rel_l2");
    assert_float_equal(t.rtol, 1e-2, 0);
    assert_float_equal(t.lse_atol, 1e-3, 0);
    t = attn_tolerance_for(ATTN_FP32, ATTN_FP16); /* half storage anywhere: half tolerance */
    assert_string_equal(t.metric, "rel_l2");
}

/* The canonical form writes integers with its own digit writer (the call
 * key's hot path): it must equal printf's "%lld" on every edge value. */
static void test_canonical_ints_equal_printf(void **state)
{
    (void)state;
    const int64_t vals[] = {0,
                            1,
                            9,
                            10,
                            11,
                            99,
                            100,
                            101,
                            999,
                            1000,
                            12345,
                            -1,
                            -9,
                            -10,
                            -100,
                            -12345,
                            INT64_MAX,
                            INT64_MIN,
                            INT64_MIN + 1,
                            1000000000000000000LL,
                            999999999999999999LL,
                            4294967295LL};
    const int n = (int)(sizeof vals / sizeof vals[0]);
    attn_key k;
    attn_key_init(&k);
    assert_int_equal(attn_key_set_ints(&k, "a", vals, (uint32_t)n), 0);
    assert_int_equal(attn_key_set_int(&k, "b", INT64_MIN), 0);
    char *out = NULL, want[1024];
    size_t len, o = (size_t)snprintf(want, sizeof want, "{\"a\":[");
    for (int i = 0; i < n; i++)
        o +=
            (size_t)snprintf(want + o, sizeof want - o, "%s%lld", i ? "," : "", (long long)vals[i]);
    snprintf(want + o, sizeof want - o, "],\"b\":%lld}", (long long)INT64_MIN);
    assert_int_equal(attn_key_canonical(&k, &out, &len), 0);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    free(out);
    attn_key_fini(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_ints_equal_printf),
        cmocka_unit_test(test_seed_teaching_key_digest),
        cmocka_unit_test(test_seed_plan_key_digest),
        cmocka_unit_test(test_double_canonical_form),
        cmocka_unit_test(test_key_fields_and_copy),
        cmocka_unit_test(test_call_key_readable_fields),
        cmocka_unit_test(test_call_key_sensitive_to_every_field),
        cmocka_unit_test(test_call_key_stable_across_processes),
        cmocka_unit_test(test_plan_key_is_seed_projection),
        cmocka_unit_test(test_plan_lifecycle_table),
        cmocka_unit_test(test_tolerance_per_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
