/* A deterministic mini-fuzzer for the decoders: thousands of random
 * mutations of valid frames (byte flips, hostile length bytes, cuts,
 * insertions, splices) must each be decoded or rejected with an attn_err,
 * never crash, never read out of bounds, never leak (run it under
 * `make SAN=1`: ASan fails on oversized mallocs and on leaks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "protocol/json.h"

/* Under ASan, any single allocation above 256 MiB is a hard error: a
 * decoder that sized a buffer from a hostile declared length fails here
 * instead of quietly reserving address space. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=256:allocator_may_return_null=0";
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

/* xorshift64*: the same sequence on every run */
static uint64_t rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

static const char *const g_seeds_json[] = {
    "{\"v\":1,\"op\":\"attend\",\"id\":21,\"pool\":\"main\",\"num_qo_heads\":2,"
    "\"requests\":[{\"id\":\"mix_prefill\",\"cache_len\":0,\"new_len\":4},"
    "{\"id\":\"mix_append\",\"cache_len\":6,\"new_len\":2},"
    "{\"id\":\"mix_decode\",\"cache_len\":9,\"new_len\":1}],\"qo_indptr\":[0,4,6,7],"
    "\"kv\":{\"format\":\"csr\",\"page_indptr\":[0,1,3,6],\"page_indices\":[0,1,2,7,3,9],"
    "\"last_page_len\":[4,4,2]},\"mask\":{\"kind\":\"dense\",\"polarity\":\"true_means_masked\","
    "\"bits\":[1,2,3,4]},\"sm_scale\":0.5,\"q_dtype\":\"fp32\","
    "\"policy\":{\"backend\":\"auto\",\"splits\":2,\"state_abi\":\"mlu\"},\"layer\":0,"
    "\"q\":[1.0,2.0],\"k_new\":[1.0],\"v_new\":[2.0],\"return_lse\":true}",
    "{\"v\":1,\"op\":\"plan\",\"id\":2,\"pool\":\"p\",\"num_qo_heads\":8,"
    "\"requests\":[{\"id\":1,\"cache_len\":4096,\"new_len\":1},{\"id\":2,\"cache_len\":3587,"
    "\"new_len\":1}],\"qo_indptr\":[0,1,2],\"kv\":{\"format\":\"dense\",\"block_table\":"
    "[[7,3,9],[1,2,-1]],\"lens\":[4097,3588]},\"mask\":{\"kind\":\"flashmask\",\"causal\":true,"
    "\"lts\":[1,2],\"lte\":[2,2]},\"q_dtype\":\"bf16\"}",
    "{\"v\":1,\"op\":\"pool_create\",\"id\":3,\"pool\":\"main\",\"layers\":2,\"num_pages\":64,"
    "\"page_size\":16,\"num_kv_heads\":2,\"head_dim_qk\":128,\"head_dim_vo\":128,"
    "\"kv_dtype\":\"bf16\",\"layout\":\"NHD\",\"device\":\"cuda:0\"}",
    "{\"v\":1,\"op\":\"kv_write\",\"id\":4,\"pool\":\"main\",\"layer\":1,\"pages\":[7,3,9],"
    "\"kv_dtype\":\"fp16\",\"tensors\":{\"k\":[1.0,2.0],\"v\":[3.0,4.0]}}",
    "{\"v\":1,\"op\":\"run\",\"id\":5,\"plan_id\":99,\"layer\":3,\"q_dtype\":\"fp32\","
    "\"q\":[1.0],\"k_new\":{\"dtype\":\"fp32\",\"data\":[1.0]},\"v_new\":{\"dtype\":\"fp32\","
    "\"data\":[1.0]},\"trace\":true,\"x_tag\":{\"a\":[1,{\"b\":null}]}}",
    /* replies */
    "{\"v\":1,\"id\":6,\"op\":\"hello\",\"ok\":true,\"server\":{\"version\":\"1\",\"backends\":"
    "[{\"name\":\"cpu_ref\",\"available\":true,\"reason\":\"\"}],\"devices\":[\"cpu\"]}}",
    "{\"v\":1,\"id\":7,\"op\":\"run\",\"ok\":true,\"o\":[1.0,2.0],\"o_dtype\":\"fp32\","
    "\"lse\":[0.5,\"-inf\"],\"diag\":{\"selected\":\"cpu_ref\",\"candidates\":[{\"name\":\"x\","
    "\"admitted\":false,\"reasons\":[\"head_dim\"]}]}}",
    "{\"v\":1,\"id\":8,\"op\":\"stats\",\"ok\":true,\"counters\":{\"requests\":3},"
    "\"plan_cache\":{\"hits\":1},\"pools\":[{\"pool\":\"main\",\"bytes\":4096}]}",
    "{\"v\":1,\"id\":9,\"op\":\"plan\",\"ok\":false,\"error\":{\"code\":\"E_PHASE\","
    "\"field\":\"requests[0]\",\"message\":\"bad\"}}",
};

#define NSEEDS (sizeof g_seeds_json / sizeof g_seeds_json[0])

/* Feed one buffer to every decoder; each must return 0 or a negative code
 * with a message, and own nothing after a failure. */
static void feed(const uint8_t *p, size_t n, unsigned *accepted)
{
    attn_request req;
    attn_reply rep;
    attn_error_detail e;
    attn_codec_limits lim;
    char *js = NULL;
    attn_codec_limits_default(&lim);
    lim.max_bin_bytes = 1u << 20;
    int rv = attn_request_decode(p, n, &lim, &req, &e);
    assert_true(rv <= 0);
    if (rv == 0) {
        (*accepted)++;
        /* an accepted request re-encodes */
        attn_buf b;
        if (attn_request_encode(&req, &b, &e) == 0)
            attn_buf_free(&b);
    } else {
        assert_true(e.message[0] != '\0');
    }
    attn_request_free(&req);
    rv = attn_reply_decode(p, n, &lim, &rep, &e);
    assert_true(rv <= 0);
    attn_reply_free(&rep);
    rv = attn_msgpack_to_json(p, n, 0, false, &js, &e);
    assert_true(rv <= 0);
    free(js);
}

static void mutate(uint8_t *p, size_t *n, size_t cap)
{
    static const uint8_t hostile[] = {0xdd, 0xdf, 0xdc, 0xde, 0xc6, 0xc5, 0xdb, 0xda, 0xc1,
                                      0xff, 0x00, 0x7f, 0x80, 0x90, 0xc7, 0xd8, 0xcf, 0xd3};
    int rounds = 1 + (int)(rnd() % 4);
    for (int r = 0; r<rounds && * n> 0; r++) {
        size_t at = rnd() % *n;
        switch (rnd() % 6) {
        case 0: /* flip a bit */
            p[at] ^= (uint8_t)(1u << (rnd() % 8));
            break;
        case 1: /* a hostile header byte, then big length bytes */
            p[at] = hostile[rnd() % sizeof hostile];
            for (size_t k = at + 1; k < *n && k < at + 5; k++)
                p[k] = (rnd() & 1) ? 0xff : p[k];
            break;
        case 2: /* cut */
            *n = at;
            break;
        case 3: /* insert a random byte */
            if (*n < cap) {
                memmove(p + at + 1, p + at, *n - at);
                p[at] = (uint8_t)rnd();
                (*n)++;
            }
            break;
        case 4: /* duplicate a chunk (re-declared keys, nested repeats) */ {
            size_t len = 1 + rnd() % 16;
            if (at + len <= *n && *n + len <= cap) {
                memmove(p + at + len, p + at, *n - at);
                (*n) += len;
            }
            break;
        }
        default: /* a random byte */
            p[at] = (uint8_t)rnd();
            break;
        }
    }
}

static void test_mutations_never_crash(void **state)
{
    (void)state;
    attn_buf seeds[NSEEDS];
    attn_error_detail e;
    unsigned accepted = 0;
    attn_json_hints h = {.has_kv_dtype = true, .kv_dtype = ATTN_FP32};
    for (size_t s = 0; s < NSEEDS; s++) {
        int rv = attn_json_to_msgpack(g_seeds_json[s], strlen(g_seeds_json[s]), &h, &seeds[s], &e);
        if (rv != 0)
            fail_msg("seed %zu: %s %s", s, e.field, e.message);
        /* the unmutated seeds decode (requests) or render */
        feed(seeds[s].data, seeds[s].len, &accepted);
    }
    assert_int_equal(accepted, 5); /* the five request seeds */
    enum { CAP = 4096, ITERS = 20000 };
    uint8_t *buf = malloc(CAP);
    for (int it = 0; it < ITERS; it++) {
        const attn_buf *s = &seeds[rnd() % NSEEDS];
        size_t n = s->len;
        memcpy(buf, s->data, n);
        mutate(buf, &n, CAP);
        /* decode from an exact-size heap copy so ASan sees any overread */
        uint8_t *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        feed(exact, n, &accepted);
        free(exact);
    }
    print_message("%d mutations, %u frames accepted as requests\n", ITERS, accepted);
    free(buf);
    for (size_t s = 0; s < NSEEDS; s++)
        attn_buf_free(&seeds[s]);
}

/* Random bytes (no seed structure) too. */
static void test_random_bytes(void **state)
{
    (void)state;
    unsigned accepted = 0;
    for (int it = 0; it < 5000; it++) {
        size_t n = rnd() % 64;
        uint8_t *p = malloc(n ? n : 1);
        for (size_t k = 0; k < n; k++)
            p[k] = (uint8_t)rnd();
        /* a map header first half the time, so keys get looked at */
        if (n > 0 && (it & 1))
            p[0] = (uint8_t)(0x80 | (p[0] & 0x0f));
        feed(p, n, &accepted);
        free(p);
    }
    assert_int_equal(accepted, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutations_never_crash),
        cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
