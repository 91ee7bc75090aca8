/* protocol/codec: round trip of every op, and the bad-input list.
 *
 * Fixtures: the mixed batch of seed 0x08F (mix_prefill (0,4), mix_append
 * (6,2), mix_decode (9,1), qo_indptr [0,4,6,7]) on a page size of 4, the
 * decode request using the logical-to-physical table [7,3,9] of seed 0x04D
 * (tokens 8..9 in page 9, so last_page_len 2).
 */
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

#include "attn/client.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"
#include "protocol/wire.h"

/* Under ASan, any single allocation above 256 MiB is a hard error: a
 * decoder that sized a buffer from a hostile declared length fails here
 * instead of quietly reserving address space. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=256:allocator_may_return_null=0";
}

static int32_t *i32dup(const int32_t *a, size_t n)
{
    int32_t *p = malloc(n * sizeof *p + 4);
    assert_non_null(p);
    memcpy(p, a, n * sizeof *p);
    return p;
}

/* seed 0x08F mixed batch, CSR pages on P = 4 (seed 0x04D table [7,3,9]). */
static void mixed_manifest(attn_manifest *m)
{
    static const int32_t qo[] = {0, 4, 6, 7};
    static const int32_t pind[] = {0, 1, 3, 6};
    static const int32_t pidx[] = {0, 1, 2, 7, 3, 9};
    static const int32_t last[] = {4, 4, 2};
    memset(m, 0, sizeof *m);
    snprintf(m->pool, sizeof m->pool, "main");
    m->num_qo_heads = 8;
    m->num_requests = 3;
    m->requests = calloc(3, sizeof *m->requests);
    assert_non_null(m->requests);
    snprintf(m->requests[0].id, ATTN_NAME_MAX, "mix_prefill");
    m->requests[0].cache_len = 0;
    m->requests[0].new_len = 4;
    snprintf(m->requests[1].id, ATTN_NAME_MAX, "mix_append");
    m->requests[1].cache_len = 6;
    m->requests[1].new_len = 2;
    snprintf(m->requests[2].id, ATTN_NAME_MAX, "mix_decode");
    m->requests[2].cache_len = 9;
    m->requests[2].new_len = 1;
    m->qo_indptr = i32dup(qo, 4);
    m->kv.format = ATTN_KV_CSR;
    m->kv.page_indptr = i32dup(pind, 4);
    m->kv.page_indices = i32dup(pidx, 6);
    m->kv.num_page_indices = 6;
    m->kv.last_page_len = i32dup(last, 3);
    m->mask.kind = ATTN_MASK_CAUSAL;
    m->q_dtype = ATTN_BF16;
    snprintf(m->policy.backend, sizeof m->policy.backend, "auto");
}

static void assert_i32_equal(const int32_t *a, const int32_t *b, size_t n)
{
    if (n == 0)
        return;
    assert_non_null(a);
    assert_non_null(b);
    assert_memory_equal(a, b, n * sizeof *a);
}

static void assert_manifest_equal(const attn_manifest *a, const attn_manifest *b)
{
    assert_string_equal(a->pool, b->pool);
    assert_int_equal(a->num_qo_heads, b->num_qo_heads);
    assert_int_equal(a->num_requests, b->num_requests);
    for (uint32_t i = 0; i < a->num_requests; i++) {
        assert_string_equal(a->requests[i].id, b->requests[i].id);
        assert_int_equal(a->requests[i].cache_len, b->requests[i].cache_len);
        assert_int_equal(a->requests[i].new_len, b->requests[i].new_len);
    }
    assert_i32_equal(a->qo_indptr, b->qo_indptr, a->num_requests + 1);
    assert_int_equal(a->kv.format, b->kv.format);
    if (a->kv.format == ATTN_KV_CSR) {
        assert_i32_equal(a->kv.page_indptr, b->kv.page_indptr, a->num_requests + 1);
        assert_int_equal(a->kv.num_page_indices, b->kv.num_page_indices);
        assert_i32_equal(a->kv.page_indices, b->kv.page_indices, a->kv.num_page_indices);
        assert_i32_equal(a->kv.last_page_len, b->kv.last_page_len, a->num_requests);
    } else {
        assert_int_equal(a->kv.max_blocks, b->kv.max_blocks);
        assert_i32_equal(a->kv.block_table, b->kv.block_table,
                         (size_t)a->num_requests * a->kv.max_blocks);
        assert_i32_equal(a->kv.lens, b->kv.lens, a->num_requests);
    }
    assert_int_equal(a->mask.kind, b->mask.kind);
    assert_int_equal(a->mask.left, b->mask.left);
    assert_int_equal(a->mask.sinks, b->mask.sinks);
    assert_int_equal(a->mask.fm_causal, b->mask.fm_causal);
    assert_int_equal(a->mask.fm_len, b->mask.fm_len);
    assert_i32_equal(a->mask.fm_lts, b->mask.fm_lts, a->mask.fm_len);
    assert_i32_equal(a->mask.fm_lte, b->mask.fm_lte, a->mask.fm_len);
    assert_i32_equal(a->mask.fm_uts, b->mask.fm_uts, a->mask.fm_len);
    assert_i32_equal(a->mask.fm_ute, b->mask.fm_ute, a->mask.fm_len);
    assert_int_equal(a->mask.polarity, b->mask.polarity);
    assert_int_equal(a->mask.dense_bytes, b->mask.dense_bytes);
    if (a->mask.dense_bytes)
        assert_memory_equal(a->mask.dense_bits, b->mask.dense_bits, a->mask.dense_bytes);
    assert_int_equal(a->has_sm_scale, b->has_sm_scale);
    if (a->has_sm_scale)
        assert_true(a->sm_scale == b->sm_scale);
    assert_int_equal(a->q_dtype, b->q_dtype);
    assert_string_equal(a->policy.backend, b->policy.backend);
    assert_int_equal(a->policy.schedule, b->policy.schedule);
    assert_int_equal(a->policy.splits, b->policy.splits);
    assert_int_equal(a->policy.split_policy, b->policy.split_policy);
    assert_int_equal(a->policy.state_abi, b->policy.state_abi);
    assert_int_equal(a->policy.deterministic, b->policy.deterministic);
    assert_int_equal(a->policy.graph, b->policy.graph);
}

static void assert_bytes_equal(attn_bytes a, attn_bytes b)
{
    assert_int_equal(a.len, b.len);
    if (a.len)
        assert_memory_equal(a.data, b.data, a.len);
}

/* encode -> decode -> the same typed request */
static void roundtrip_request(const attn_request *in)
{
    attn_buf b;
    attn_request out;
    attn_error_detail e = {0};
    assert_int_equal(attn_request_encode(in, &b, &e), 0);
    int rv = attn_request_decode(b.data, b.len, NULL, &out, &e);
    if (rv != 0)
        fail_msg("%s %s: %s", attn_err_name(rv), e.field, e.message);
    assert_int_equal(out.v, 1);
    assert_int_equal(out.op, in->op);
    assert_int_equal(out.id, in->id);
    switch (in->op) {
    case ATTN_OP_POOL_CREATE:
        assert_memory_equal(&out.geom, &in->geom, sizeof out.geom);
        assert_int_equal(out.has_device, in->geom.device[0] != 0);
        break;
    case ATTN_OP_POOL_DROP:
    case ATTN_OP_POOL_INFO:
        assert_string_equal(out.pool, in->pool);
        break;
    case ATTN_OP_ATTEND:
    case ATTN_OP_PLAN:
    case ATTN_OP_RUN:
        if (in->op != ATTN_OP_RUN)
            assert_manifest_equal(&out.manifest, &in->manifest);
        if (in->op == ATTN_OP_PLAN)
            break;
        if (in->op == ATTN_OP_RUN) {
            assert_int_equal(out.run.plan_id, in->run.plan_id);
            assert_int_equal(out.run.has_q_dtype, in->run.has_q_dtype);
        }
        assert_int_equal(out.run.layer, in->run.layer);
        /* a referenced tensor travels as its reference only */
        if (in->run.q_ref.buf == 0)
            assert_bytes_equal(out.run.q, in->run.q);
        if (in->run.k_new_ref.buf == 0)
            assert_bytes_equal(out.run.k_new, in->run.k_new);
        if (in->run.v_new_ref.buf == 0)
            assert_bytes_equal(out.run.v_new, in->run.v_new);
        assert_int_equal(out.run.return_lse, in->run.return_lse);
        assert_int_equal(out.run.trace, in->run.trace);
        assert_int_equal(out.run.verify, in->run.verify);
        assert_memory_equal(&out.run.q_ref, &in->run.q_ref, sizeof out.run.q_ref);
        assert_memory_equal(&out.run.k_new_ref, &in->run.k_new_ref, sizeof out.run.k_new_ref);
        assert_memory_equal(&out.run.v_new_ref, &in->run.v_new_ref, sizeof out.run.v_new_ref);
        assert_memory_equal(&out.run.o_ref, &in->run.o_ref, sizeof out.run.o_ref);
        assert_memory_equal(&out.run.lse_ref, &in->run.lse_ref, sizeof out.run.lse_ref);
        assert_int_equal(out.run.async, in->run.async);
        assert_memory_equal(&out.run.wait, &in->run.wait, sizeof out.run.wait);
        assert_memory_equal(&out.run.sig, &in->run.sig, sizeof out.run.sig);
        assert_int_equal(out.run.order, in->run.order);
        /* zero copy: the tensor points into the received bytes */
        if (in->run.q_ref.buf == 0)
            assert_true((const uint8_t *)out.run.q.data > b.data &&
                        (const uint8_t *)out.run.q.data < b.data + b.len);
        break;
    case ATTN_OP_BUFFER_REGISTER:
        assert_int_equal(out.buffer.kind, in->buffer.kind);
        assert_int_equal(out.buffer.bytes, in->buffer.bytes);
        assert_string_equal(out.buffer.name, in->buffer.name);
        assert_string_equal(out.buffer.device, in->buffer.device);
        assert_memory_equal(out.buffer.handle, in->buffer.handle, sizeof out.buffer.handle);
        assert_int_equal(out.buffer.offset, in->buffer.offset);
        break;
    case ATTN_OP_BUFFER_DROP:
        assert_int_equal(out.buffer.buf, in->buffer.buf);
        break;
    case ATTN_OP_RUN_STATUS:
        assert_int_equal(out.run_seq, in->run_seq);
        break;
    case ATTN_OP_KV_READ:
    case ATTN_OP_KV_WRITE:
        assert_string_equal(out.kv.pool, in->kv.pool);
        assert_int_equal(out.kv.layer, in->kv.layer);
        assert_int_equal(out.kv.num_pages, in->kv.num_pages);
        assert_i32_equal(out.kv.pages, in->kv.pages, in->kv.num_pages);
        if (in->op == ATTN_OP_KV_WRITE) {
            assert_bytes_equal(out.kv.k, in->kv.k);
            assert_bytes_equal(out.kv.v, in->kv.v);
            assert_int_equal(out.kv.has_kv_dtype, in->kv.has_kv_dtype);
        }
        break;
    default:
        break;
    }
    attn_request_free(&out);
    attn_buf_free(&b);
}

static uint16_t g_q[7 * 8 * 4], g_k[7 * 2 * 4], g_v[7 * 2 * 4];

static void fill_run(attn_run_args *a)
{
    for (size_t i = 0; i < sizeof g_q / 2; i++)
        g_q[i] = (uint16_t)(0x3f80 + i);
    for (size_t i = 0; i < sizeof g_k / 2; i++) {
        g_k[i] = (uint16_t)(0x4000 + i);
        g_v[i] = (uint16_t)(0xbf80 + i);
    }
    a->layer = 3;
    a->q = (attn_bytes){g_q, sizeof g_q};
    a->k_new = (attn_bytes){g_k, sizeof g_k};
    a->v_new = (attn_bytes){g_v, sizeof g_v};
    a->return_lse = true;
    a->verify = true;
}

static void test_roundtrip_every_op(void **state)
{
    (void)state;
    attn_request r;
    for (int op = 0; op < ATTN_OP_COUNT; op++) {
        memset(&r, 0, sizeof r);
        r.op = (attn_op)op;
        r.id = 1000 + (uint64_t)op;
        switch (r.op) {
        case ATTN_OP_POOL_CREATE:
            snprintf(r.geom.name, sizeof r.geom.name, "main");
            r.geom.layers = 2;
            r.geom.num_pages = 16;
            r.geom.page_size = 4;
            r.geom.num_kv_heads = 2;
            r.geom.head_dim_qk = 4;
            r.geom.head_dim_vo = 4;
            r.geom.kv_dtype = ATTN_BF16;
            r.geom.layout = ATTN_HND;
            snprintf(r.geom.device, sizeof r.geom.device, "cuda:0");
            break;
        case ATTN_OP_POOL_DROP:
        case ATTN_OP_POOL_INFO:
            snprintf(r.pool, sizeof r.pool, "main");
            break;
        case ATTN_OP_PLAN:
        case ATTN_OP_ATTEND:
            mixed_manifest(&r.manifest);
            if (r.op == ATTN_OP_ATTEND) {
                fill_run(&r.run);
                r.manifest.has_sm_scale = true;
                r.manifest.sm_scale = 0.125f;
                r.manifest.mask.kind = ATTN_MASK_SINK;
                r.manifest.mask.sinks = 1;
                r.manifest.mask.left = 3;
            }
            r.manifest.policy.splits = 4;
            r.manifest.policy.split_policy = ATTN_SPLIT_FIXED;
            r.manifest.policy.schedule = ATTN_SCHED_UNIFIED;
            r.manifest.policy.state_abi = ATTN_ABI_MLU;
            r.manifest.policy.deterministic = true;
            break;
        case ATTN_OP_RUN:
            fill_run(&r.run);
            r.run.plan_id = 0xfeedfacecafeull;
            r.run.has_q_dtype = true;
            r.run.q_dtype = ATTN_BF16;
            r.run.async = true;
            r.run.wait = (attn_sem_ref){3, 64, 0xffffffff00000001ull};
            r.run.sig = (attn_sem_ref){4, 0, 7};
            r.run.order = 0x100000001ull; /* beyond 32 bits */
            break;
        case ATTN_OP_KV_READ:
        case ATTN_OP_KV_WRITE: {
            static const int32_t pages[] = {7, 3, 9};
            snprintf(r.kv.pool, sizeof r.kv.pool, "main");
            r.kv.layer = 1;
            r.kv.pages = i32dup(pages, 3);
            r.kv.num_pages = 3;
            if (r.op == ATTN_OP_KV_WRITE) {
                r.kv.k = (attn_bytes){g_k, sizeof g_k};
                r.kv.v = (attn_bytes){g_v, sizeof g_v};
                r.kv.has_kv_dtype = true;
                r.kv.kv_dtype = ATTN_BF16;
            }
            break;
        }
        case ATTN_OP_BUFFER_REGISTER:
            r.buffer.kind = ATTN_BUFFER_SHM;
            r.buffer.bytes = 1ull << 33;
            snprintf(r.buffer.name, sizeof r.buffer.name, "/attn-engine.0");
            break;
        case ATTN_OP_BUFFER_DROP:
            r.buffer.buf = 0xabcdef12345ull;
            break;
        case ATTN_OP_RUN_STATUS:
            r.run_seq = 0x1234567890ull;
            break;
        default:
            break;
        }
        roundtrip_request(&r);
        attn_request_free(&r);
    }
}

/* Tensor references and the cuda_ipc registration survive encode -> decode;
 * a reference with a missing key, buf 0, or a bin where an output reference
 * belongs is refused with the field. */
static void test_roundtrip_references(void **state)
{
    attn_request r;
    (void)state;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_RUN;
    r.id = 5;
    fill_run(&r.run);
    r.run.q_ref = (attn_tensor_ref){3, 128, 64};
    r.run.v_new_ref = (attn_tensor_ref){4, 0, 32};
    r.run.o_ref = (attn_tensor_ref){3, 4096, 256};
    r.run.lse_ref = (attn_tensor_ref){9, 8, 16};
    r.run.return_lse = true; /* implied by lse_ref on decode */
    roundtrip_request(&r);
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_BUFFER_REGISTER;
    r.id = 6;
    r.buffer.kind = ATTN_BUFFER_CUDA_IPC;
    r.buffer.bytes = 1u << 20;
    for (int i = 0; i < ATTN_CUDA_IPC_HANDLE_BYTES; i++)
        r.buffer.handle[i] = (uint8_t)(i * 7 + 1);
    snprintf(r.buffer.device, sizeof r.buffer.device, "cuda:3");
    r.buffer.offset = 1u << 16; /* a sub-allocation inside the handle's allocation */
    roundtrip_request(&r);
}

static void expect_json(const char *json, int code, const char *field);

/* A shm registration takes no offset (only cuda_ipc handles name a larger
 * allocation); refused naming "offset". */
static void test_shm_takes_no_offset(void **state)
{
    (void)state;
    expect_json("{\"v\":1,\"op\":\"buffer_register\",\"id\":1,\"kind\":\"shm\",\"name\":"
                "\"/a\",\"bytes\":1,\"offset\":0}",
                ATTN_E_UNKNOWN_KEY, "offset");
}

/* wait / signal / async travel as PROTOCOL.md v2 writes them: two
 * {"buf", "offset", "value"} maps and a bool, absent when unset. */
static void test_run_ordering_encoding(void **state)
{
    attn_request r;
    attn_buf b = {0};
    attn_error_detail e;
    char *json = NULL;
    (void)state;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_RUN;
    r.id = 8;
    fill_run(&r.run);
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    assert_int_equal(attn_msgpack_to_json(b.data, b.len, 8, false, &json, &e), 0);
    assert_null(strstr(json, "\"wait\""));
    assert_null(strstr(json, "\"signal\""));
    assert_null(strstr(json, "\"async\""));
    free(json);
    attn_buf_free(&b);
    r.run.wait = (attn_sem_ref){5, 64, 41};
    r.run.sig = (attn_sem_ref){5, 72, 0x100000000ull};
    r.run.async = true;
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    assert_int_equal(attn_msgpack_to_json(b.data, b.len, 8, false, &json, &e), 0);
    assert_non_null(strstr(json, "\"wait\":{\"buf\":5,\"offset\":64,\"value\":41}"));
    assert_non_null(strstr(json, "\"signal\":{\"buf\":5,\"offset\":72,\"value\":4294967296}"));
    assert_non_null(strstr(json, "\"async\":true"));
    free(json);
    attn_buf_free(&b);
}

/* The JSON rendering of request `r` encoded the ordinary way (malloc'ed). */
static char *request_json(const attn_request *r)
{
    attn_buf b = {0};
    attn_error_detail e;
    char *json = NULL;
    assert_int_equal(attn_request_encode(r, &b, &e), 0);
    assert_int_equal(attn_msgpack_to_json(b.data, b.len, 8, false, &json, &e), 0);
    attn_buf_free(&b);
    return json;
}

/* A prepared run's encoding, its fields rewritten in place, is the request
 * attn_request_encode makes of the same values (compared decoded, as JSON:
 * the widths of the integers differ), with and without the optional fields;
 * only a run can be prepared. */
static void test_run_patchable_encoding(void **state)
{
    attn_request r;
    attn_buf b = {0};
    attn_run_patch patch;
    attn_error_detail e;
    char *json = NULL;
    (void)state;
    for (int with_opt = 0; with_opt < 2; with_opt++) {
        memset(&r, 0, sizeof r);
        r.op = ATTN_OP_RUN;
        r.id = 1;
        fill_run(&r.run);
        r.run.verify = false;
        r.run.async = true;
        if (with_opt) {
            r.run.wait = (attn_sem_ref){5, 64, 0};
            r.run.sig = (attn_sem_ref){5, 72, 0};
            r.run.order = 1;
        }
        assert_int_equal(attn_run_request_encode_patchable(&r, &b, &patch, &e), 0);
        assert_true(patch.id != 0 && patch.layer != 0);
        assert_int_equal(patch.order != 0, with_opt);
        assert_int_equal(patch.wait_value != 0, with_opt);
        assert_int_equal(patch.signal_value != 0, with_opt);
        /* values of every width msgpack has, up to the full 64 bits */
        const uint64_t vals[] = {0, 7, 200, 70000, 0x100000000ull, UINT64_MAX};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            attn_run_values v = {.id = vals[i] | 1,
                                 .layer = (uint32_t)vals[(i + 1) % 6],
                                 .order = vals[(i + 2) % 6] | 1,
                                 .wait_value = vals[(i + 3) % 6],
                                 .signal_value = vals[(i + 4) % 6]};
            attn_run_patch_apply(b.data, &patch, &v);
            assert_int_equal(attn_msgpack_to_json(b.data, b.len, 8, false, &json, &e), 0);
            r.id = v.id;
            r.run.layer = v.layer;
            if (with_opt) {
                r.run.order = v.order;
                r.run.wait.value = v.wait_value;
                r.run.sig.value = v.signal_value;
            }
            char *want = request_json(&r);
            assert_string_equal(json, want);
            free(want);
            free(json);
            attn_request rd;
            assert_int_equal(attn_request_decode(b.data, b.len, NULL, &rd, &e), 0);
            assert_int_equal(rd.run.layer, v.layer);
            assert_int_equal(rd.id, v.id);
            attn_request_free(&rd);
        }
        attn_buf_free(&b);
    }
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_HELLO;
    assert_int_equal(attn_run_request_encode_patchable(&r, &b, &patch, &e), ATTN_E_INVALID);
    assert_string_equal(e.field, "op");
    assert_null(b.data);
}

static void expect_json(const char *json, int code, const char *field);

/* Bad references and registrations: each refused with its code and field. */
static void test_bad_references_decode(void **state)
{
    (void)state;
#define RUN_HEAD "{\"v\":1,\"op\":\"run\",\"id\":1,\"plan_id\":1,\"layer\":0,"
#define KV_INLINE                                                                                  \
    "\"k_new\":{\"dtype\":\"fp32\",\"data\":[0]},\"v_new\":{\"dtype\":\"fp32\",\"data\":[0]}"
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE "}", 0, NULL);
    expect_json(RUN_HEAD "\"q\":{\"buf\":0,\"offset\":0,\"bytes\":8}," KV_INLINE "}", ATTN_E_RANGE,
                "q.buf");
    expect_json(RUN_HEAD "\"q\":{\"buf\":2,\"bytes\":8}," KV_INLINE "}", ATTN_E_MISSING,
                "q.offset");
    expect_json(RUN_HEAD "\"q\":{\"buf\":2,\"offset\":0,\"bytes\":8,\"dev\":1}," KV_INLINE "}",
                ATTN_E_UNKNOWN_KEY, "q.dev");
    expect_json(RUN_HEAD "\"q\":{\"buf\":2,\"offset\":-4,\"bytes\":8}," KV_INLINE "}", ATTN_E_RANGE,
                "q.offset");
    expect_json(RUN_HEAD "\"q\":{\"dtype\":\"fp32\",\"data\":[0]}," KV_INLINE ",\"o\":\"inline\"}",
                ATTN_E_TYPE, "o");
    expect_json(RUN_HEAD "\"q\":{\"dtype\":\"fp32\",\"data\":[0]}," KV_INLINE
                         ",\"lse\":{\"buf\":1,\"offset\":0}}",
                ATTN_E_MISSING, "lse.bytes");
#define REG_HEAD "{\"v\":1,\"op\":\"buffer_register\",\"id\":1,"
    expect_json(REG_HEAD "\"kind\":\"shm\",\"name\":\"/a\",\"bytes\":4096}", 0, NULL);
    expect_json(REG_HEAD "\"kind\":\"tmpfs\",\"name\":\"/a\",\"bytes\":4096}", ATTN_E_RANGE,
                "kind");
    expect_json(REG_HEAD "\"kind\":\"shm\",\"bytes\":4096}", ATTN_E_MISSING, "name");
    expect_json(REG_HEAD "\"kind\":\"shm\",\"name\":\"/a\"}", ATTN_E_MISSING, "bytes");
    expect_json(REG_HEAD "\"kind\":\"shm\",\"name\":\"/a/b\",\"bytes\":1}", ATTN_E_RANGE, "name");
    expect_json(REG_HEAD "\"kind\":\"shm\",\"name\":\"/a\",\"bytes\":1,\"device\":\"cuda:0\"}",
                ATTN_E_UNKNOWN_KEY, "device");
    expect_json(REG_HEAD "\"kind\":\"cuda_ipc\",\"bytes\":1,\"device\":\"cuda:0\"}", ATTN_E_MISSING,
                "handle");
    expect_json(REG_HEAD
                "\"kind\":\"cuda_ipc\",\"handle\":[1,2],\"bytes\":1,\"device\":\"cuda:0\"}",
                ATTN_E_TYPE, "handle");
    expect_json(REG_HEAD "\"kind\":\"shm\",\"name\":\"/a\",\"bytes\":1,\"offset\":8}",
                ATTN_E_UNKNOWN_KEY, "offset");
    /* semaphores: all three keys, buf >= 1; async a bool; run_status needs run_seq >= 1 */
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE
                         ",\"wait\":{\"buf\":1,\"offset\":8,\"value\":3},\"async\":true}",
                0, NULL);
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE
                         ",\"wait\":{\"buf\":1,\"offset\":8}}",
                ATTN_E_MISSING, "wait.value");
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE
                         ",\"signal\":{\"buf\":0,\"offset\":8,\"value\":1}}",
                ATTN_E_RANGE, "signal.buf");
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE ",\"async\":1}",
                ATTN_E_TYPE, "async");
    /* order: a uint >= 1 on run/attend only */
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE ",\"order\":3}", 0,
                NULL);
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE ",\"order\":0}",
                ATTN_E_RANGE, "order");
    expect_json(RUN_HEAD "\"q\":{\"buf\":1,\"offset\":0,\"bytes\":8}," KV_INLINE
                         ",\"order\":\"1\"}",
                ATTN_E_TYPE, "order");
    expect_json("{\"v\":1,\"op\":\"pool_info\",\"id\":1,\"pool\":\"p\",\"order\":1}",
                ATTN_E_UNKNOWN_KEY, "order");
    expect_json("{\"v\":1,\"op\":\"run_status\",\"id\":1}", ATTN_E_MISSING, "run_seq");
    expect_json("{\"v\":1,\"op\":\"run_status\",\"id\":1,\"run_seq\":0}", ATTN_E_RANGE, "run_seq");
    expect_json("{\"v\":1,\"op\":\"buffer_drop\",\"id\":1}", ATTN_E_MISSING, "buf");
    expect_json("{\"v\":1,\"op\":\"buffer_drop\",\"id\":1,\"buf\":0}", ATTN_E_RANGE, "buf");
#undef RUN_HEAD
#undef KV_INLINE
#undef REG_HEAD
}

/* A run reply whose outputs went into a buffer carries the references only. */
static void test_reply_references(void **state)
{
    attn_reply in, out;
    attn_buf b;
    attn_error_detail e;
    (void)state;
    memset(&in, 0, sizeof in);
    in.op = ATTN_OP_RUN;
    in.id = 3;
    in.ok = true;
    in.o_dtype = ATTN_FP16;
    in.o_ref = (attn_tensor_ref){12, 256, 1024};
    in.has_lse = true;
    in.lse_ref = (attn_tensor_ref){12, 2048, 64};
    assert_int_equal(attn_reply_encode(&in, &b, &e), 0);
    assert_int_equal(attn_reply_decode(b.data, b.len, NULL, &out, &e), 0);
    assert_int_equal(out.o.len, 0);
    assert_memory_equal(&out.o_ref, &in.o_ref, sizeof in.o_ref);
    assert_true(out.has_lse);
    assert_memory_equal(&out.lse_ref, &in.lse_ref, sizeof in.lse_ref);
    attn_buf_free(&b);
}

/* Exported pools on the wire: "export" asked and answered (both kinds),
 * "kv_written" runs without k_new / v_new, the registration's hand-off. */
static void test_export_kv_written_handoff(void **state)
{
    attn_request r, rd;
    attn_reply in, out;
    attn_buf b = {0};
    attn_error_detail e;
    (void)state;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_POOL_CREATE;
    snprintf(r.geom.name, sizeof r.geom.name, "px");
    r.geom.layers = 2;
    r.geom.num_pages = 4;
    r.geom.page_size = 16;
    r.geom.num_kv_heads = 2;
    r.geom.head_dim_qk = r.geom.head_dim_vo = 64;
    r.geom.kv_dtype = ATTN_BF16;
    r.geom.layout = ATTN_HND;
    r.pool_export = true;
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    assert_int_equal(attn_request_decode(b.data, b.len, NULL, &rd, &e), 0);
    assert_true(rd.pool_export);
    attn_request_free(&rd);
    attn_buf_free(&b);

    for (int kind = 0; kind < 2; kind++) {
        memset(&in, 0, sizeof in);
        in.op = ATTN_OP_POOL_CREATE;
        in.ok = true;
        snprintf(in.pool, sizeof in.pool, "px");
        in.bytes = 4096;
        in.has_export = true;
        attn_pool_export *x = &in.exp;
        x->kind = kind ? ATTN_BUFFER_CUDA_IPC : ATTN_BUFFER_SHM;
        if (kind) {
            for (int i = 0; i < ATTN_CUDA_IPC_HANDLE_BYTES; i++)
                x->handle[i] = (uint8_t)(i * 7 + 1);
            x->offset = 512;
            snprintf(x->device, sizeof x->device, "cuda:1");
        } else {
            snprintf(x->name, sizeof x->name, "/attnd-1-2-px");
            snprintf(x->device, sizeof x->device, "cpu");
        }
        x->bytes = 1 << 20;
        x->k_offset = 0;
        x->v_offset = 65536;
        x->layer_stride = 131072;
        x->page_stride_k = 4096;
        x->row_stride_k = 128;
        x->head_stride_k = 2048;
        x->page_stride_v = 4096;
        x->row_stride_v = 128;
        x->head_stride_v = 2048;
        x->kv_dtype = ATTN_BF16;
        x->layout = ATTN_HND;
        assert_int_equal(attn_reply_encode(&in, &b, &e), 0);
        assert_int_equal(attn_reply_decode(b.data, b.len, NULL, &out, &e), 0);
        assert_true(out.has_export);
        assert_memory_equal(&out.exp, &in.exp, sizeof in.exp);
        attn_reply_free(&out);
        attn_buf_free(&b);
    }

    /* a kv_written run: the rows are not on the wire, and decode without them */
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_RUN;
    fill_run(&r.run);
    r.run.k_new = r.run.v_new = (attn_bytes){NULL, 0};
    r.run.kv_written = true;
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    char *json = NULL;
    assert_int_equal(attn_msgpack_to_json(b.data, b.len, 8, false, &json, &e), 0);
    assert_null(strstr(json, "\"k_new\""));
    assert_non_null(strstr(json, "\"kv_written\":true"));
    free(json);
    assert_int_equal(attn_request_decode(b.data, b.len, NULL, &rd, &e), 0);
    assert_true(rd.run.kv_written);
    assert_null(rd.run.k_new.data);
    attn_request_free(&rd);
    attn_buf_free(&b);
    /* without kv_written an absent row is still missing on the wire */
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    {
        static const char frame[] = "{\"v\":1,\"op\":\"run\",\"id\":1,\"plan_id\":1,\"layer\":0,"
                                    "\"q\":{\"dtype\":\"fp32\",\"data\":[1.0]},"
                                    "\"v_new\":{\"dtype\":\"fp32\",\"data\":[1.0]}}";
        expect_json(frame, ATTN_E_MISSING, "k_new");
    }
    attn_buf_free(&b);

    memset(&in, 0, sizeof in);
    in.op = ATTN_OP_BUFFER_REGISTER;
    in.ok = true;
    in.buf = 9;
    snprintf(in.handoff, sizeof in.handoff, "MPS: measured");
    in.handoff_us = 11.25;
    assert_int_equal(attn_reply_encode(&in, &b, &e), 0);
    assert_int_equal(attn_reply_decode(b.data, b.len, NULL, &out, &e), 0);
    assert_string_equal(out.handoff, "MPS: measured");
    assert_true(out.handoff_us == 11.25);
    attn_reply_free(&out);
    attn_buf_free(&b);
}

static void test_roundtrip_masks_and_dense(void **state)
{
    (void)state;
    attn_request r;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_PLAN;
    r.id = 5;
    mixed_manifest(&r.manifest);
    /* dense block table [B][3] with -1 past the visible blocks */
    static const int32_t bt[] = {0, -1, -1, 1, 2, -1, 7, 3, 9};
    static const int32_t lens[] = {4, 8, 10};
    attn_manifest *m = &r.manifest;
    free(m->kv.page_indptr);
    free(m->kv.page_indices);
    free(m->kv.last_page_len);
    m->kv.page_indptr = m->kv.page_indices = m->kv.last_page_len = NULL;
    m->kv.num_page_indices = 0;
    m->kv.format = ATTN_KV_DENSE;
    m->kv.block_table = i32dup(bt, 9);
    m->kv.max_blocks = 3;
    m->kv.lens = i32dup(lens, 3);
    /* seed 0x05B: explicit polarity, true_means_masked */
    m->mask.kind = ATTN_MASK_DENSE;
    m->mask.polarity = ATTN_POLARITY_TRUE_MEANS_MASKED;
    m->mask.dense_bits = malloc(5);
    memcpy(m->mask.dense_bits, "\x01\x80\xff\x00\x5a", 5);
    m->mask.dense_bytes = 5;
    roundtrip_request(&r);
    free(m->mask.dense_bits);
    m->mask.dense_bits = NULL;
    m->mask.dense_bytes = 0;
    /* FlashMask: one entry per key column, sum T_b + C_b = 4 + 8 + 10 */
    m->mask.kind = ATTN_MASK_FLASHMASK;
    m->mask.polarity = ATTN_POLARITY_UNSET;
    m->mask.fm_causal = true;
    m->mask.fm_len = 22;
    int32_t *v[4];
    for (int j = 0; j < 4; j++) {
        v[j] = calloc(22, sizeof(int32_t));
        for (int i = 0; i < 22; i++)
            v[j][i] = (i + j) % 3;
    }
    m->mask.fm_lts = v[0];
    m->mask.fm_lte = v[1];
    m->mask.fm_uts = v[2];
    m->mask.fm_ute = v[3];
    roundtrip_request(&r);
    attn_request_free(&r);
}

/* A reply with every field of its op survives encode -> decode. */
static void test_reply_roundtrip(void **state)
{
    (void)state;
    /* a diag as another module would pre-encode it: {"selected": "cpu_ref", "n": [1, 2]} */
    static const uint8_t diag[] = {0x82, 0xa8, 's', 'e', 'l', 'e', 'c',  't', 'e',  'd',  0xa7, 'c',
                                   'p',  'u',  '_', 'r', 'e', 'f', 0xa1, 'n', 0x92, 0x01, 0x02};
    static const float lse[2] = {1.5f, -INFINITY};
    for (int op = 0; op < ATTN_OP_COUNT; op++) {
        attn_reply in, out;
        attn_buf b;
        attn_error_detail e;
        memset(&in, 0, sizeof in);
        in.op = (attn_op)op;
        in.id = 77;
        in.ok = true;
        snprintf(in.pool, sizeof in.pool, "main");
        in.bytes = 1ull << 33;
        snprintf(in.server.version, sizeof in.server.version, "0.1.0");
        snprintf(in.server.build_id, sizeof in.server.build_id, "abc123");
        in.server.num_backends = 2;
        snprintf(in.server.backends[0].name, ATTN_NAME_MAX, "cpu_ref");
        in.server.backends[0].available = true;
        snprintf(in.server.backends[1].name, ATTN_NAME_MAX, "cuda_decode");
        snprintf(in.server.backends[1].reason, 160, "no CUDA device");
        in.server.num_devices = 1;
        snprintf(in.server.devices[0], ATTN_NAME_MAX, "cpu");
        in.geom = (attn_pool_geometry){.layers = 2,
                                       .num_pages = 16,
                                       .page_size = 4,
                                       .num_kv_heads = 2,
                                       .head_dim_qk = 4,
                                       .head_dim_vo = 4,
                                       .kv_dtype = ATTN_FP16,
                                       .layout = ATTN_NHD};
        snprintf(in.geom.name, sizeof in.geom.name, "main");
        in.plan_id = 42;
        snprintf(in.plan_key, sizeof in.plan_key, "9f86d081884c7d65");
        in.o = (attn_bytes){g_q, 16};
        in.o_dtype = ATTN_BF16;
        in.has_lse = true;
        in.lse = (attn_bytes){lse, sizeof lse};
        in.k = (attn_bytes){g_k, 8};
        in.v_data = (attn_bytes){g_v, 8};
        in.kv_dtype = ATTN_FP16;
        in.diag = (attn_bytes){diag, sizeof diag};
        in.stats.num_counters = 1;
        snprintf(in.stats.counters[0].name, 48, "requests");
        in.stats.counters[0].value = 12;
        in.stats.plan_cache.hits = 3;
        in.stats.num_pools = 1;
        snprintf(in.stats.pools[0].name, ATTN_NAME_MAX, "main");
        in.stats.pools[0].bytes = 4096;
        in.buf = 31;
        in.run_seq = in.op == ATTN_OP_RUN || in.op == ATTN_OP_RUN_STATUS ? 99 : 0;
        in.status.state = ATTN_RUN_FAILED;
        in.status.engine_us = 12.5;
        snprintf(in.status.timing_method, sizeof in.status.timing_method, "cuda_events");
        in.status.exec_us = 20.25;
        in.status.queued_us = 3.0;
        in.status.error.code = ATTN_E_CUDA;
        snprintf(in.status.error.field, sizeof in.status.error.field, "wait");
        /* any reply may carry an earlier async run's failure */
        in.has_async_error = true;
        in.async_error_seq = 98;
        in.async_error.code = ATTN_E_ENGINE;
        snprintf(in.async_error.field, sizeof in.async_error.field, "layer");
        in.server.mps = 1;
        snprintf(in.server.gpu_handoff, sizeof in.server.gpu_handoff, "overlaps");
        assert_int_equal(attn_reply_encode(&in, &b, &e), 0);
        int rv = attn_reply_decode(b.data, b.len, NULL, &out, &e);
        if (rv != 0)
            fail_msg("%s: %s %s", attn_op_name(in.op), e.field, e.message);
        assert_int_equal(out.op, in.op);
        assert_int_equal(out.id, 77);
        assert_true(out.ok);
        /* the diag is spliced verbatim and comes back as the same bytes */
        assert_bytes_equal(out.diag, in.diag);
        assert_true(out.has_async_error);
        assert_int_equal(out.async_error_seq, 98);
        assert_int_equal(out.async_error.code, ATTN_E_ENGINE);
        assert_string_equal(out.async_error.field, "layer");
        switch (in.op) {
        case ATTN_OP_HELLO:
            assert_string_equal(out.server.version, "0.1.0");
            assert_int_equal(out.server.num_backends, 2);
            assert_false(out.server.backends[1].available);
            assert_string_equal(out.server.backends[1].reason, "no CUDA device");
            assert_string_equal(out.server.devices[0], "cpu");
            assert_int_equal(out.server.mps, 1);
            assert_string_equal(out.server.gpu_handoff, "overlaps");
            break;
        case ATTN_OP_RUN_STATUS:
            assert_int_equal(out.run_seq, 99);
            assert_int_equal(out.status.state, ATTN_RUN_FAILED);
            assert_true(out.status.engine_us == 12.5);
            assert_string_equal(out.status.timing_method, "cuda_events");
            assert_true(out.status.exec_us == 20.25);
            assert_true(out.status.queued_us == 3.0);
            assert_int_equal(out.status.error.code, ATTN_E_CUDA);
            assert_string_equal(out.status.error.field, "wait");
            break;
        case ATTN_OP_POOL_CREATE:
            assert_string_equal(out.pool, "main");
            assert_int_equal(out.bytes, 1ull << 33);
            break;
        case ATTN_OP_POOL_INFO:
            assert_memory_equal(&out.geom, &in.geom, sizeof out.geom);
            assert_int_equal(out.bytes, 1ull << 33);
            break;
        case ATTN_OP_ATTEND:
        case ATTN_OP_RUN:
            assert_bytes_equal(out.o, in.o);
            assert_int_equal(out.o_dtype, ATTN_BF16);
            assert_true(out.has_lse);
            assert_bytes_equal(out.lse, in.lse);
            if (in.op == ATTN_OP_RUN) {
                assert_int_equal(out.run_seq, 99);
                break;
            }
            /* fall through */
        case ATTN_OP_PLAN:
            assert_int_equal(out.plan_id, 42);
            assert_string_equal(out.plan_key, "9f86d081884c7d65");
            break;
        case ATTN_OP_KV_READ:
            assert_bytes_equal(out.k, in.k);
            assert_bytes_equal(out.v_data, in.v_data);
            assert_int_equal(out.kv_dtype, ATTN_FP16);
            break;
        case ATTN_OP_BUFFER_REGISTER:
            assert_int_equal(out.buf, 31);
            break;
        case ATTN_OP_STATS:
            assert_int_equal(out.stats.num_counters, 1);
            assert_string_equal(out.stats.counters[0].name, "requests");
            assert_int_equal(out.stats.counters[0].value, 12);
            assert_int_equal(out.stats.plan_cache.hits, 3);
            assert_int_equal(out.stats.num_pools, 1);
            assert_int_equal(out.stats.pools[0].bytes, 4096);
            break;
        default:
            break;
        }
        attn_buf_free(&b);
    }
}

static void test_error_reply(void **state)
{
    (void)state;
    attn_error_detail d, e;
    attn_buf b;
    attn_reply out;
    attn_error_set(&d, ATTN_E_LAST_PAGE_LEN, "kv.last_page_len[2]", "last_page_len 5 exceeds %d",
                   4);
    assert_int_equal(attn_error_reply_encode(9, ATTN_OP_PLAN, &d, &b), 0);
    assert_int_equal(attn_reply_decode(b.data, b.len, NULL, &out, &e), 0);
    assert_false(out.ok);
    assert_int_equal(out.id, 9);
    assert_int_equal(out.op, ATTN_OP_PLAN);
    assert_int_equal(out.error.code, ATTN_E_LAST_PAGE_LEN);
    assert_string_equal(out.error.field, "kv.last_page_len[2]");
    assert_string_equal(out.error.message, "last_page_len 5 exceeds 4");
    attn_buf_free(&b);
}

/* ---- bad input ----------------------------------------------------------- */

/* Decode raw bytes; expect `code` and, when given, the field path. */
static void expect_bytes(const void *p, size_t n, int code, const char *field)
{
    attn_request r;
    attn_error_detail e = {0};
    int rv = attn_request_decode(p, n, NULL, &r, &e);
    if (rv != code)
        fail_msg("want %s got %s (%s: %s)", attn_err_name(code), attn_err_name(rv), e.field,
                 e.message);
    assert_int_equal(e.code, code);
    if (field != NULL)
        assert_string_equal(e.field, field);
    if (code != 0)
        assert_true(strlen(e.message) > 0);
    attn_request_free(&r);
}

/* Build the message from JSON (the generic converter), then decode it. */
static void expect_json(const char *json, int code, const char *field)
{
    attn_buf b;
    attn_error_detail e = {0};
    int rv = attn_json_to_msgpack(json, strlen(json), NULL, &b, &e);
    if (rv != 0)
        fail_msg("fixture is not convertible: %s %s", e.field, e.message);
    expect_bytes(b.data, b.len, code, field);
    attn_buf_free(&b);
}

static void test_huge_declared_counts(void **state)
{
    (void)state;
    /* array32 of 0xff000000 entries in 5 bytes: msgpack-c would reserve ~96 GB */
    static const uint8_t arr[] = {0xdd, 0xff, 0x00, 0x00, 0x00};
    expect_bytes(arr, sizeof arr, ATTN_E_TOO_LARGE, "message");
    static const uint8_t map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    expect_bytes(map, sizeof map, ATTN_E_TOO_LARGE, "message");
    /* {"id": array32 of 4G} */
    static const uint8_t inner[] = {0x81, 0xa2, 'i', 'd', 0xdd, 0xff, 0xff, 0xff, 0xff};
    expect_bytes(inner, sizeof inner, ATTN_E_TOO_LARGE, "id");
    /* {"id": bin32 of 4 GiB}, {"op": str32 of 4 GiB}: payload beyond the end */
    static const uint8_t bin[] = {0x81, 0xa2, 'i', 'd', 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00};
    expect_bytes(bin, sizeof bin, ATTN_E_TRUNCATED, "id");
    static const uint8_t str[] = {0x81, 0xa2, 'o', 'p', 0xdb, 0xff, 0xff, 0xff, 0xff};
    expect_bytes(str, sizeof str, ATTN_E_TRUNCATED, "op");
    /* map16 claiming 65535 entries (fits the bytes rule only if they were there) */
    static const uint8_t map16[] = {0xde, 0xff, 0xff, 0xa1, 'v'};
    expect_bytes(map16, sizeof map16, ATTN_E_TOO_LARGE, "message");
    /* the reserved byte */
    static const uint8_t c1[] = {0xc1};
    expect_bytes(c1, sizeof c1, ATTN_E_PROTOCOL, "message");
    expect_bytes("", 0, ATTN_E_TRUNCATED, "message");
}

static void test_odd_encodings(void **state)
{
    (void)state;
    /* {"id": fixext1} : an ext is never a valid field */
    static const uint8_t ext[] = {0x81, 0xa2, 'i', 'd', 0xd4, 0x01, 0x02};
    expect_bytes(ext, sizeof ext, ATTN_E_TYPE, "id");
    /* {"id": 1, "id": 2}: a duplicated key is not last-one-wins */
    static const uint8_t dup[] = {0x82, 0xa2, 'i', 'd', 0x01, 0xa2, 'i', 'd', 0x02};
    expect_bytes(dup, sizeof dup, ATTN_E_PROTOCOL, "id");
    /* {1: 1}: keys are strings */
    static const uint8_t intkey[] = {0x81, 0x01, 0x01};
    expect_bytes(intkey, sizeof intkey, ATTN_E_TYPE, "message");
    /* non-minimal encodings are still msgpack: {"v": uint64 1, "op": str8 "hello",
     * "id": int8 5} decodes */
    static const uint8_t wide[] = {0x83, 0xa1, 'v', 0xcf, 0,    0,   0,    0,    0,
                                   0,    0,    1,   0xa2, 'o',  'p', 0xd9, 5,    'h',
                                   'e',  'l',  'l', 'o',  0xa2, 'i', 'd',  0xd0, 5};
    expect_bytes(wide, sizeof wide, 0, NULL);
    /* the encoder refuses to splice a diag that is not exactly one object */
    static const uint8_t two[] = {0x01, 0x02};
    attn_reply rep;
    attn_buf b;
    attn_error_detail e;
    memset(&rep, 0, sizeof rep);
    rep.op = ATTN_OP_PLAN;
    rep.ok = true;
    rep.diag = (attn_bytes){two, sizeof two};
    assert_int_equal(attn_reply_encode(&rep, &b, &e), ATTN_E_INTERNAL);
    assert_string_equal(e.field, "diag");
    assert_null(b.data);
}

static void test_huge_counts_within_bytes_hit_limits(void **state)
{
    (void)state;
    /* 70000 requests is within the bytes but past max_requests */
    size_t n = 70000;
    uint8_t *p = malloc(64 + n);
    size_t k = 0;
    const char *hdr =
        "\x86\xa1v\x01\xa2op\xa4plan\xa2id\x01\xa4pool\xa1p\xacnum_qo_heads\x08\xa8requests";
    memcpy(p, hdr, strlen(hdr));
    k = strlen(hdr);
    p[k++] = 0xdd;
    p[k++] = 0;
    p[k++] = (uint8_t)(n >> 16);
    p[k++] = (uint8_t)(n >> 8);
    p[k++] = (uint8_t)n;
    memset(p + k, 0xc0, n);
    attn_request r;
    attn_error_detail e;
    assert_int_equal(attn_request_decode(p, k + n, NULL, &r, &e), ATTN_E_TOO_LARGE);
    assert_string_equal(e.field, "requests");
    free(p);
    expect_json("{\"v\":1,\"op\":\"kv_read\",\"id\":1,\"pool\":\"p\",\"layer\":0,\"pages\":[1]}", 0,
                NULL);
    attn_codec_limits lim;
    attn_codec_limits_default(&lim);
    lim.max_array = 2;
    attn_buf b;
    const char *j =
        "{\"v\":1,\"op\":\"kv_read\",\"id\":1,\"pool\":\"p\",\"layer\":0,\"pages\":[1,2,3]}";
    assert_int_equal(attn_json_to_msgpack(j, strlen(j), NULL, &b, &e), 0);
    assert_int_equal(attn_request_decode(b.data, b.len, &lim, &r, &e), ATTN_E_TOO_LARGE);
    assert_string_equal(e.field, "pages");
    attn_buf_free(&b);
}

static void test_truncated_frames(void **state)
{
    (void)state;
    attn_request r, out;
    attn_buf b;
    attn_error_detail e;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_ATTEND;
    r.id = 3;
    mixed_manifest(&r.manifest);
    fill_run(&r.run);
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    /* every strict prefix is rejected, never read past, never leaked */
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, b.data, n);
        int rv = attn_request_decode(cut, n, NULL, &out, &e);
        assert_true(rv == ATTN_E_TRUNCATED || rv == ATTN_E_TOO_LARGE);
        attn_request_free(&out);
        free(cut);
    }
    assert_int_equal(attn_request_decode(b.data, b.len - 1, NULL, &out, &e), ATTN_E_TRUNCATED);
    /* one byte too many is not a message either */
    uint8_t *more = malloc(b.len + 1);
    memcpy(more, b.data, b.len);
    more[b.len] = 0xc0;
    assert_int_equal(attn_request_decode(more, b.len + 1, NULL, &out, &e), ATTN_E_PROTOCOL);
    free(more);
    attn_buf_free(&b);
    attn_request_free(&r);
}

#define PLAN_HEAD "{\"v\":1,\"op\":\"plan\",\"id\":11,\"pool\":\"main\","
#define REQS                                                                                       \
    "\"requests\":[{\"id\":\"mix_prefill\",\"cache_len\":0,\"new_len\":4},"                        \
    "{\"id\":\"mix_append\",\"cache_len\":6,\"new_len\":2},"                                       \
    "{\"id\":7,\"cache_len\":9,\"new_len\":1}],"
#define QO "\"qo_indptr\":[0,4,6,7],"
#define KV                                                                                         \
    "\"kv\":{\"format\":\"csr\",\"page_indptr\":[0,1,3,6],\"page_indices\":[0,1,2,7,3,9],"         \
    "\"last_page_len\":[4,4,2]},"
#define GOOD_PLAN(extra) PLAN_HEAD "\"num_qo_heads\":8," REQS QO KV extra "\"q_dtype\":\"bf16\"}"

static void test_good_plan_json(void **state)
{
    (void)state;
    const char *j = GOOD_PLAN("\"x_note\":{\"any\":[1,[2]]},");
    attn_buf b;
    attn_request r;
    attn_error_detail e;
    assert_int_equal(attn_json_to_msgpack(j, strlen(j), NULL, &b, &e), 0);
    assert_int_equal(attn_request_decode(b.data, b.len, NULL, &r, &e), 0);
    assert_int_equal(r.manifest.num_requests, 3);
    /* a numeric request id becomes its decimal string */
    assert_string_equal(r.manifest.requests[2].id, "7");
    assert_int_equal(r.manifest.qo_indptr[3], 7);
    assert_int_equal(r.manifest.kv.page_indices[5], 9);
    assert_int_equal(r.manifest.mask.kind, ATTN_MASK_CAUSAL); /* the default */
    assert_string_equal(r.manifest.policy.backend, "auto");
    assert_false(r.manifest.has_sm_scale);
    attn_request_free(&r);
    attn_buf_free(&b);
}

static void test_wrong_types_and_ranges(void **state)
{
    (void)state;
    expect_json("{\"v\":1,\"op\":\"hello\",\"id\":\"seven\"}", ATTN_E_TYPE, "id");
    expect_json("{\"v\":1,\"op\":\"hello\",\"id\":-1}", ATTN_E_RANGE, "id");
    expect_json("{\"v\":1,\"op\":7,\"id\":1}", ATTN_E_TYPE, "op");
    expect_json("[1,2]", ATTN_E_TYPE, "message");
    expect_json(PLAN_HEAD "\"num_qo_heads\":\"8\"," REQS QO KV "\"q_dtype\":\"bf16\"}", ATTN_E_TYPE,
                "num_qo_heads");
    expect_json(PLAN_HEAD "\"num_qo_heads\":0," REQS QO KV "\"q_dtype\":\"bf16\"}", ATTN_E_RANGE,
                "num_qo_heads");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,"
                          "\"requests\":[{\"id\":\"a\",\"cache_len\":0,\"new_len\":4},"
                          "{\"id\":\"b\",\"cache_len\":-6,\"new_len\":2},"
                          "{\"id\":\"c\",\"cache_len\":9,\"new_len\":1}]," QO KV
                          "\"q_dtype\":\"bf16\"}",
                ATTN_E_RANGE, "requests[1].cache_len");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,"
                          "\"requests\":[{\"id\":[1],\"cache_len\":0,\"new_len\":4}],"
                          "\"qo_indptr\":[0,4]," KV "\"q_dtype\":\"bf16\"}",
                ATTN_E_TYPE, "requests[0].id");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,"
                          "\"requests\":[{\"id\":\"a\",\"cache_len\":0,\"new_len\":4,\"prio\":1}],"
                          "\"qo_indptr\":[0,4]," KV "\"q_dtype\":\"bf16\"}",
                ATTN_E_UNKNOWN_KEY, "requests[0].prio");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,"
                          "\"requests\":[{\"id\":\"a\",\"cache_len\":0,\"new_len\":4},"
                          "{\"id\":\"b\",\"cache_len\":3}],"
                          "\"qo_indptr\":[0,4,5]," KV "\"q_dtype\":\"bf16\"}",
                ATTN_E_MISSING, "requests[1].new_len");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,"
                          "\"requests\":[{\"id\":\"a\",\"cache_len\":0,\"new_len\":4294967296}],"
                          "\"qo_indptr\":[0,4]," KV "\"q_dtype\":\"bf16\"}",
                ATTN_E_RANGE, "requests[0].new_len");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8,\"requests\":[7],"
                          "\"qo_indptr\":[0,4]," KV "\"q_dtype\":\"bf16\"}",
                ATTN_E_TYPE, "requests[0]");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS "\"qo_indptr\":[0,4,6,7,8]," KV
                          "\"q_dtype\":\"bf16\"}",
                ATTN_E_QO_INDPTR, "qo_indptr");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS "\"qo_indptr\":[0,4,6,4294967296]," KV
                          "\"q_dtype\":\"bf16\"}",
                ATTN_E_RANGE, "qo_indptr[3]");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS QO
                          "\"kv\":{\"format\":\"csr\",\"page_indptr\":[0,1,3],"
                          "\"page_indices\":[0],\"last_page_len\":[4,4,2]},"
                          "\"q_dtype\":\"bf16\"}",
                ATTN_E_INDPTR, "kv.page_indptr");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS QO
                          "\"kv\":{\"format\":\"csr\",\"page_indptr\":[0,1,3,6],"
                          "\"page_indices\":[0,1,2,7,3,9],\"last_page_len\":[4,4,2],"
                          "\"lens\":[1,2,3]},\"q_dtype\":\"bf16\"}",
                ATTN_E_UNKNOWN_KEY, "kv.lens");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS QO
                          "\"kv\":{\"format\":\"coo\"},\"q_dtype\":\"bf16\"}",
                ATTN_E_RANGE, "kv.format");
    expect_json(GOOD_PLAN(""), 0, NULL);
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS QO KV "\"q_dtype\":\"int8\"}", ATTN_E_DTYPE,
                "q_dtype");
    expect_json(GOOD_PLAN("\"sm_scale\":-1.0,"), ATTN_E_RANGE, "sm_scale");
    expect_json(GOOD_PLAN("\"policy\":{\"schedule\":\"eager\"},"), ATTN_E_POLICY,
                "policy.schedule");
    /* every schedule of the wire parses, overlap included (issue 12) */
    expect_json(GOOD_PLAN("\"policy\":{\"schedule\":\"overlap\"},"), 0, NULL);
    expect_json(GOOD_PLAN("\"policy\":{\"schedule\":\"partition\"},"), 0, NULL);
    expect_json(GOOD_PLAN("\"policy\":{\"splits\":0},"), ATTN_E_POLICY, "policy.splits");
    expect_json(GOOD_PLAN("\"policy\":{\"graph\":1},"), ATTN_E_TYPE, "policy.graph");
    expect_json(GOOD_PLAN("\"colour\":\"red\","), ATTN_E_UNKNOWN_KEY, "colour");
    /* a key of another op */
    expect_json(GOOD_PLAN("\"plan_id\":3,"), ATTN_E_UNKNOWN_KEY, "plan_id");
    expect_json(PLAN_HEAD "\"num_qo_heads\":8," REQS QO "\"q_dtype\":\"bf16\"}", ATTN_E_MISSING,
                "kv");
    expect_json("{\"v\":1,\"op\":\"pool_create\",\"id\":1,\"pool\":\"p\",\"layers\":1,"
                "\"num_pages\":4,\"page_size\":16,\"num_kv_heads\":1,\"head_dim_qk\":64,"
                "\"head_dim_vo\":64,\"kv_dtype\":\"fp16\",\"layout\":\"NHD\",\"device\":\"gpu0\"}",
                ATTN_E_RANGE, "device");
    expect_json("{\"v\":1,\"op\":\"pool_create\",\"id\":1,\"pool\":\"p\",\"layers\":1,"
                "\"num_pages\":4,\"page_size\":16,\"num_kv_heads\":1,\"head_dim_qk\":64,"
                "\"head_dim_vo\":64,\"kv_dtype\":\"fp16\"}",
                ATTN_E_MISSING, "layout");
    expect_json("{\"v\":1,\"op\":\"pool_drop\",\"id\":1,\"pool\":\"01234567890123456789012345678901"
                "234567890123456789012345678901234\"}",
                ATTN_E_RANGE, "pool");
}

static void test_version_op_and_header(void **state)
{
    (void)state;
    expect_json("{\"v\":2,\"op\":\"hello\",\"id\":1}", ATTN_E_VERSION, "v");
    expect_json("{\"v\":0,\"op\":\"hello\",\"id\":1}", ATTN_E_VERSION, "v");
    expect_json("{\"op\":\"hello\",\"id\":1}", ATTN_E_MISSING, "v");
    expect_json("{\"v\":1,\"op\":\"explode\",\"id\":1}", ATTN_E_UNKNOWN_OP, "op");
    expect_json("{\"v\":1,\"id\":1}", ATTN_E_MISSING, "op");
    expect_json("{\"v\":1,\"op\":\"hello\"}", ATTN_E_MISSING, "id");
    expect_json("{\"v\":1,\"op\":\"hello\",\"id\":1}", 0, NULL);
    /* the id survives a failure so the error reply can carry it */
    attn_buf b;
    attn_request r;
    attn_error_detail e;
    const char *j = "{\"v\":9,\"op\":\"hello\",\"id\":4242}";
    assert_int_equal(attn_json_to_msgpack(j, strlen(j), NULL, &b, &e), 0);
    assert_int_equal(attn_request_decode(b.data, b.len, NULL, &r, &e), ATTN_E_VERSION);
    assert_true(r.has_id);
    assert_int_equal(r.id, 4242);
    attn_buf_free(&b);
}

static void test_masks(void **state)
{
    (void)state;
    /* seed 0x05B: a dense mask without polarity is rejected, never guessed */
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"dense\",\"bits\":[1,2,3]},"), ATTN_E_MASK_POLARITY,
                "mask.polarity");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"dense\",\"polarity\":\"true\",\"bits\":[1]},"),
                ATTN_E_MASK_POLARITY, "mask.polarity");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"dense\",\"polarity\":\"true_means_allowed\","
                          "\"bits\":[1,256]},"),
                ATTN_E_RANGE, "mask.bits[1]");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"alibi\"},"), ATTN_E_MASK_KIND, "mask.kind");
    expect_json(GOOD_PLAN("\"mask\":{\"left\":3},"), ATTN_E_MISSING, "mask.kind");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"window\"},"), ATTN_E_MISSING, "mask.left");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"causal\",\"left\":3},"), ATTN_E_UNKNOWN_KEY,
                "mask.left");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"flashmask\",\"lts\":[1,2],\"lte\":[1]},"),
                ATTN_E_MASK_INTERVAL, "mask.lte");
    expect_json(GOOD_PLAN("\"mask\":{\"kind\":\"sink\",\"sinks\":4,\"left\":64},"), 0, NULL);
}

static void test_depth_bound(void **state)
{
    (void)state;
    /* an extension value nested 40 deep: skipped only within the bound */
    char j[512];
    int k = snprintf(j, sizeof j, "{\"v\":1,\"op\":\"hello\",\"id\":1,\"x_deep\":");
    for (int i = 0; i < 40; i++)
        j[k++] = '[';
    for (int i = 0; i < 40; i++)
        j[k++] = ']';
    j[k++] = '}';
    j[k] = 0;
    attn_buf b;
    attn_error_detail e;
    /* the JSON converter has the same bound */
    assert_int_equal(attn_json_to_msgpack(j, strlen(j), NULL, &b, &e), ATTN_E_DEPTH);
    /* raw msgpack: {"v":1,"op":"hello","id":1,"x_deep":[[[...]]]} */
    uint8_t raw[128];
    const char *hdr = "\x84\xa1v\x01\xa2op\xa5hello\xa2id\x01\xa6x_deep";
    size_t n = strlen(hdr);
    memcpy(raw, hdr, n);
    for (int i = 0; i < 40; i++)
        raw[n++] = 0x91;
    raw[n++] = 0x90;
    expect_bytes(raw, n, ATTN_E_DEPTH, "x_deep");
    /* within the bound it is ignored */
    n = strlen(hdr);
    for (int i = 0; i < 5; i++)
        raw[n++] = 0x91;
    raw[n++] = 0x90;
    expect_bytes(raw, n, 0, NULL);
}

static void test_shape_checks(void **state)
{
    (void)state;
    attn_manifest m;
    attn_run_args a;
    attn_error_detail e;
    attn_pool_geometry g = {.layers = 4,
                            .num_pages = 16,
                            .page_size = 4,
                            .num_kv_heads = 2,
                            .head_dim_qk = 4,
                            .head_dim_vo = 4,
                            .kv_dtype = ATTN_BF16};
    mixed_manifest(&m);
    memset(&a, 0, sizeof a);
    fill_run(&a);
    /* total_q = 7: q [7, 8, 4] bf16 = 448 bytes, k_new/v_new [7, 2, 4] bf16 = 112 */
    assert_int_equal(attn_run_check_shapes(&a, &m, &g, &e), 0);
    a.k_new.len -= 2;
    assert_int_equal(attn_run_check_shapes(&a, &m, &g, &e), ATTN_E_SHAPE);
    assert_string_equal(e.field, "k_new");
    a.k_new.len += 2;
    a.q.len = 448 * 2; /* the fp32 size of a bf16 plan */
    assert_int_equal(attn_run_check_shapes(&a, &m, &g, &e), ATTN_E_SHAPE);
    assert_string_equal(e.field, "q");
    a.q.len = 448;
    a.has_q_dtype = true;
    a.q_dtype = ATTN_FP32;
    assert_int_equal(attn_run_check_shapes(&a, &m, &g, &e), ATTN_E_DTYPE);
    assert_string_equal(e.field, "q_dtype");
    attn_manifest_free(&m);

    /* kv_write of 3 pages: [3, 4, 2, 4] bf16 = 192 bytes each */
    static int32_t pages[3] = {7, 3, 9};
    static uint8_t kbuf[192], vbuf[192];
    attn_kv_args kv = {.layer = 1, .pages = pages, .num_pages = 3};
    kv.k = (attn_bytes){kbuf, 192};
    kv.v = (attn_bytes){vbuf, 190};
    assert_int_equal(attn_kv_check(&kv, ATTN_OP_KV_WRITE, &g, &e), ATTN_E_SHAPE);
    assert_string_equal(e.field, "v");
    kv.v.len = 192;
    assert_int_equal(attn_kv_check(&kv, ATTN_OP_KV_WRITE, &g, &e), 0);
    pages[2] = 16;
    assert_int_equal(attn_kv_check(&kv, ATTN_OP_KV_READ, &g, &e), ATTN_E_PAGE_OUT_OF_POOL);
    assert_string_equal(e.field, "pages[2]");
    pages[2] = 9;
    kv.layer = 4;
    assert_int_equal(attn_kv_check(&kv, ATTN_OP_KV_READ, &g, &e), ATTN_E_LAYER);
    bool ok;
    attn_tensor_bytes(UINT64_MAX / 2, 3, 1, ATTN_FP32, &ok);
    assert_false(ok);
}

/* A plan with B = 256 and 65,536 CSR page entries decodes in a small
 * fraction of the 300 us decode+validate+plan budget. */
static void test_decode_speed(void **state)
{
    (void)state;
    attn_request r, out;
    attn_buf b;
    attn_error_detail e;
    memset(&r, 0, sizeof r);
    r.op = ATTN_OP_PLAN;
    attn_manifest *m = &r.manifest;
    snprintf(m->pool, sizeof m->pool, "big");
    m->num_qo_heads = 32;
    m->num_requests = 256;
    m->requests = calloc(256, sizeof *m->requests);
    m->qo_indptr = calloc(257, 4);
    m->kv.page_indptr = calloc(257, 4);
    m->kv.page_indices = calloc(65536, 4);
    m->kv.num_page_indices = 65536;
    m->kv.last_page_len = calloc(256, 4);
    for (int i = 0; i < 256; i++) {
        snprintf(m->requests[i].id, ATTN_NAME_MAX, "req-%d", i);
        m->requests[i].cache_len = 256 * 16 - 1;
        m->requests[i].new_len = 1;
        m->qo_indptr[i + 1] = i + 1;
        m->kv.page_indptr[i + 1] = (i + 1) * 256;
        m->kv.last_page_len[i] = 16;
    }
    for (int i = 0; i < 65536; i++)
        m->kv.page_indices[i] = i;
    assert_int_equal(attn_request_encode(&r, &b, &e), 0);
    /* best of 10 batches: the build machine is shared, the minimum is the
     * decoder's own cost */
    double us = 1e9;
    for (int batch = 0; batch < 10; batch++) {
        struct timespec t0, t1;
        const int iters = 10;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < iters; i++) {
            assert_int_equal(attn_request_decode(b.data, b.len, NULL, &out, &e), 0);
            attn_request_free(&out);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double t = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / iters;
        us = t < us ? t : us;
    }
    print_message("plan decode, B=256, 65536 pages, %zu bytes: %.1f us\n", b.len, us);
#if defined(__SANITIZE_ADDRESS__)
    assert_true(us < 1000.0); /* instrumented build: only a sanity bound */
#else
    assert_true(us < 100.0);
#endif
    attn_buf_free(&b);
    attn_request_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_op),
        cmocka_unit_test(test_roundtrip_references),
        cmocka_unit_test(test_bad_references_decode),
        cmocka_unit_test(test_reply_references),
        cmocka_unit_test(test_export_kv_written_handoff),
        cmocka_unit_test(test_roundtrip_masks_and_dense),
        cmocka_unit_test(test_reply_roundtrip),
        cmocka_unit_test(test_error_reply),
        cmocka_unit_test(test_huge_declared_counts),
        cmocka_unit_test(test_odd_encodings),
        cmocka_unit_test(test_huge_counts_within_bytes_hit_limits),
        cmocka_unit_test(test_truncated_frames),
        cmocka_unit_test(test_good_plan_json),
        cmocka_unit_test(test_wrong_types_and_ranges),
        cmocka_unit_test(test_version_op_and_header),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_shm_takes_no_offset),
        cmocka_unit_test(test_run_ordering_encoding),
        cmocka_unit_test(test_run_patchable_encoding),
        cmocka_unit_test(test_depth_bound),
        cmocka_unit_test(test_shape_checks),
        cmocka_unit_test(test_decode_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
