/* protocol/json: JSON -> typed -> JSON, tensor dtypes, and JSON errors. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "protocol/json.h"

/* JSON text a and b are the same JSON value (key order aside). */
static void assert_json_same(const char *a, const char *b)
{
    json_error_t e;
    json_t *ja = json_loads(a, 0, &e), *jb = json_loads(b, 0, &e);
    assert_non_null(ja);
    assert_non_null(jb);
    if (!json_equal(ja, jb))
        fail_msg("JSON differs:\n%s\n%s", a, b);
    json_decref(ja);
    json_decref(jb);
}

/* The seed 0x08F mixed batch in its canonical JSON form (every optional
 * field spelled out, reals where the typed form holds floats), as an
 * attend with a FlashMask on the three requests' 4 + 8 + 10 key columns. */
static const char *g_attend =
    "{\"v\":1,\"op\":\"attend\",\"id\":21,\"pool\":\"main\",\"num_qo_heads\":2,"
    "\"requests\":[{\"id\":\"mix_prefill\",\"cache_len\":0,\"new_len\":4},"
    "{\"id\":\"mix_append\",\"cache_len\":6,\"new_len\":2},"
    "{\"id\":\"mix_decode\",\"cache_len\":9,\"new_len\":1}],"
    "\"qo_indptr\":[0,4,6,7],"
    "\"kv\":{\"format\":\"csr\",\"page_indptr\":[0,1,3,6],\"page_indices\":[0,1,2,7,3,9],"
    "\"last_page_len\":[4,4,2]},"
    "\"mask\":{\"kind\":\"window\",\"left\":3},"
    "\"sm_scale\":0.5,\"q_dtype\":\"bf16\","
    "\"policy\":{\"backend\":\"cpu_ref\",\"schedule\":\"partition\",\"splits\":2,"
    "\"split_policy\":\"fixed\",\"state_abi\":\"lse_o\",\"deterministic\":true,\"graph\":false},"
    "\"layer\":0,"
    "\"q\":[1.0,-2.5,0.333984375,\"inf\",\"-inf\",0.0,65280.0,-0.0078125],"
    "\"k_new\":[1.0,2.0],\"v_new\":[3.0,4.0],"
    "\"return_lse\":true}";

static void test_json_typed_json(void **state)
{
    (void)state;
    attn_request req;
    attn_buf backing;
    attn_error_detail e;
    /* k_new/v_new need the pool's kv_dtype: given as a hint here */
    attn_json_hints h = {.has_kv_dtype = true, .kv_dtype = ATTN_FP16};
    int rv = attn_json_request_decode(g_attend, strlen(g_attend), &h, &req, &backing, &e);
    if (rv != 0)
        fail_msg("%s %s %s", attn_err_name(rv), e.field, e.message);
    assert_int_equal(req.op, ATTN_OP_ATTEND);
    assert_int_equal(req.manifest.num_requests, 3);
    assert_int_equal(req.manifest.mask.kind, ATTN_MASK_WINDOW);
    assert_int_equal(req.manifest.mask.left, 3);
    assert_true(req.manifest.sm_scale == 0.5f);
    assert_int_equal(req.manifest.policy.splits, 2);
    /* q in bf16: 8 values, 16 bytes; 1.0 is 0x3f80, -2.5 is 0xc020 */
    assert_int_equal(req.run.q.len, 16);
    const uint8_t *q = req.run.q.data;
    assert_int_equal(q[0] | q[1] << 8, 0x3f80);
    assert_int_equal(q[2] | q[3] << 8, 0xc020);
    assert_int_equal(q[6] | q[7] << 8, 0x7f80); /* inf */
    assert_int_equal(q[8] | q[9] << 8, 0xff80); /* -inf */
    /* k_new in fp16: 1.0 is 0x3c00 */
    assert_int_equal(req.run.k_new.len, 4);
    const uint8_t *k = req.run.k_new.data;
    assert_int_equal(k[0] | k[1] << 8, 0x3c00);

    /* typed -> JSON: the same message, kv_dtype aside (not on the wire of
     * an attend: the renderer shows K/V bins as bytes without it) */
    char *out;
    assert_int_equal(attn_request_to_json(&req, false, &out, &e), 0);
    json_error_t je;
    json_t *got = json_loads(out, 0, &je), *want = json_loads(g_attend, 0, &je);
    assert_non_null(got);
    json_object_del(got, "k_new");
    json_object_del(got, "v_new");
    json_object_del(want, "k_new");
    json_object_del(want, "v_new");
    /* the encoder writes every optional policy field; the input did too */
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(want, JSON_SORT_KEYS);
        fail_msg("round trip differs:\n%s\n%s", g, w);
    }
    json_decref(got);
    json_decref(want);
    free(out);
    attn_request_free(&req);
    attn_buf_free(&backing);
}

static void test_kv_write_explicit_dtype_roundtrip(void **state)
{
    (void)state;
    const char *j = "{\"v\":1,\"op\":\"kv_write\",\"id\":3,\"pool\":\"main\",\"layer\":1,"
                    "\"pages\":[7,3,9],\"kv_dtype\":\"fp32\","
                    "\"tensors\":{\"k\":[0.5,1.5],\"v\":{\"dtype\":\"fp32\",\"data\":[2.0,-1.0]}}}";
    const char *canon = "{\"v\":1,\"op\":\"kv_write\",\"id\":3,\"pool\":\"main\",\"layer\":1,"
                        "\"pages\":[7,3,9],\"kv_dtype\":\"fp32\","
                        "\"tensors\":{\"k\":[0.5,1.5],\"v\":[2.0,-1.0]}}";
    attn_request req;
    attn_buf backing;
    attn_error_detail e;
    assert_int_equal(attn_json_request_decode(j, strlen(j), NULL, &req, &backing, &e), 0);
    assert_int_equal(req.kv.num_pages, 3);
    assert_int_equal(req.kv.k.len, 8);
    float v[2];
    memcpy(v, req.kv.v.data, 8);
    assert_true(v[0] == 2.0f && v[1] == -1.0f);
    char *out;
    assert_int_equal(attn_request_to_json(&req, true, &out, &e), 0);
    assert_json_same(out, canon);
    free(out);
    attn_request_free(&req);
    attn_buf_free(&backing);
}

static void test_reply_json(void **state)
{
    (void)state;
    /* a run reply: o in fp16, lse with an all-masked row (-inf, seed 0x02C) */
    uint16_t o[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
    float lse[2] = {0.6931472f, -INFINITY};
    static const uint8_t diag[] = {0x82, 0xa8, 's',  'e', 'l',  'e',  'c',  't',
                                   'e',  'd',  0xa7, 'c', 'p',  'u',  '_',  'r',
                                   'e',  'f',  0xa1, 'b', 0xc4, 0x02, 0x01, 0xff};
    attn_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.op = ATTN_OP_RUN;
    rep.id = 8;
    rep.ok = true;
    rep.o = (attn_bytes){o, sizeof o};
    rep.o_dtype = ATTN_FP16;
    rep.has_lse = true;
    rep.lse = (attn_bytes){lse, sizeof lse};
    rep.diag = (attn_bytes){diag, sizeof diag};
    char *out;
    attn_error_detail e;
    assert_int_equal(attn_reply_to_json(&rep, false, &out, &e), 0);
    assert_json_same(out, "{\"v\":1,\"id\":8,\"op\":\"run\",\"ok\":true,\"o\":[1.0,-2.0],"
                          "\"o_dtype\":\"fp16\",\"lse\":[0.693147182,\"-inf\"],"
                          "\"diag\":{\"selected\":\"cpu_ref\",\"b\":[1,255]}}");
    /* and back: JSON reply -> typed reply */
    attn_reply back;
    assert_int_equal(attn_json_reply_decode(out, strlen(out), &back, &e), 0);
    assert_int_equal(back.o.len, 4);
    assert_memory_equal(back.o.data, o, 4);
    assert_memory_equal(back.lse.data, lse, 8);
    attn_reply_free(&back);
    free(out);

    /* an error reply */
    attn_error_detail d;
    attn_buf b;
    attn_error_set(&d, ATTN_E_MASK_POLARITY, "mask.polarity", "a dense mask needs a polarity");
    assert_int_equal(attn_error_reply_encode(4, ATTN_OP_PLAN, &d, &b), 0);
    assert_int_equal(attn_msgpack_to_json(b.data, b.len, 0, false, &out, &e), 0);
    assert_json_same(out, "{\"v\":1,\"id\":4,\"op\":\"plan\",\"ok\":false,\"error\":{\"code\":"
                          "\"E_MASK_POLARITY\",\"field\":\"mask.polarity\",\"message\":"
                          "\"a dense mask needs a polarity\"}}");
    free(out);
    attn_buf_free(&b);
}

static void test_json_errors(void **state)
{
    (void)state;
    attn_buf b;
    attn_error_detail e;
    attn_request req;
    const char *bad = "{\"v\":1,\"op\":";
    assert_int_equal(attn_json_to_msgpack(bad, strlen(bad), NULL, &b, &e), ATTN_E_PROTOCOL);
    assert_non_null(strstr(e.message, "line 1"));
    /* a run's q without any dtype: the message must say it or the caller hint it */
    const char *run = "{\"v\":1,\"op\":\"run\",\"id\":1,\"plan_id\":5,\"layer\":0,"
                      "\"q\":[1.0],\"k_new\":[1.0],\"v_new\":[1.0]}";
    assert_int_equal(attn_json_to_msgpack(run, strlen(run), NULL, &b, &e), ATTN_E_DTYPE);
    assert_string_equal(e.field, "q");
    attn_json_hints h = {true, ATTN_FP32, true, ATTN_BF16};
    assert_int_equal(attn_json_request_decode(run, strlen(run), &h, &req, &b, &e), 0);
    assert_int_equal(req.run.q.len, 4);
    assert_int_equal(req.run.k_new.len, 2);
    attn_request_free(&req);
    attn_buf_free(&b);
    const char *nan = "{\"v\":1,\"op\":\"run\",\"id\":1,\"plan_id\":5,\"layer\":0,\"q_dtype\":"
                      "\"fp32\",\"q\":[1.0,\"one\"],\"k_new\":[],\"v_new\":[]}";
    assert_int_equal(attn_json_to_msgpack(nan, strlen(nan), &h, &b, &e), ATTN_E_TYPE);
    assert_string_equal(e.field, "q[1]");
    /* duplicate keys are not silently merged */
    const char *dup = "{\"v\":1,\"v\":2,\"op\":\"hello\",\"id\":1}";
    assert_int_equal(attn_json_to_msgpack(dup, strlen(dup), NULL, &b, &e), ATTN_E_PROTOCOL);
    /* decoding errors pass through from the msgpack decoder */
    const char *ver = "{\"v\":3,\"op\":\"hello\",\"id\":1}";
    assert_int_equal(attn_json_request_decode(ver, strlen(ver), NULL, &req, &b, &e),
                     ATTN_E_VERSION);
    assert_null(b.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_typed_json),
        cmocka_unit_test(test_kv_write_explicit_dtype_roundtrip),
        cmocka_unit_test(test_reply_json),
        cmocka_unit_test(test_json_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
