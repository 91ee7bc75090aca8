/* attnd as a subprocess: every operation round-trips over ipc and matches
 * the in-process CPU engine bit for bit (fp32); the bad-input suite (each
 * case -> its specific code and field, the daemon still serving, the pool
 * checksum unchanged); the frame-size cap; the socket's mode; a clean exit
 * on SIGTERM with the socket removed.  Needs $ATTND (make integration).
 */
#include <msgpack.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "engines/cpu/engine.h"
#include "protocol/codec.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"

static attn_daemon_proc g_d;
static nng_socket g_s;

/* One raw request/reply on the shared REQ socket; returns the reply bytes
 * (malloc'ed) or NULL on a transport failure. */
static void *raw_call(nng_socket s, const void *req, size_t len, size_t *rlen)
{
    void *buf = NULL, *out;
    size_t sz = 0;
    if (nng_send(s, (void *)req, len, 0) != 0 || nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) != 0)
        return NULL;
    out = malloc(sz + 1);
    memcpy(out, buf, sz);
    nng_free(buf, sz);
    *rlen = sz;
    return out;
}

/* Typed call: encode, send, decode into rep (rep borrows *keep). */
static int call(attn_request *req, attn_reply *rep, void **keep)
{
    attn_buf b = {0};
    attn_error_detail e;
    size_t len = 0;
    req->v = ATTN_PROTOCOL_VERSION;
    if (req->id == 0)
        req->id = 9;
    assert_int_equal(attn_request_encode(req, &b, &e), 0);
    *keep = raw_call(g_s, b.data, b.len, &len);
    attn_buf_free(&b);
    assert_non_null(*keep);
    memset(rep, 0, sizeof *rep);
    assert_int_equal(attn_reply_decode(*keep, len, NULL, rep, &e), 0);
    assert_int_equal(rep->id, req->id);
    return rep->ok ? 0 : rep->error.code;
}

static int setup(void **state)
{
    const char *extra[] = {"--engine", "cpu", "--max-msg", "1048576", NULL};
    (void)state;
    if (attn_daemon_start(&g_d, NULL, extra) != 0)
        return -1;
    if (nng_req0_open(&g_s) != 0)
        return -1;
    nng_socket_set_ms(g_s, NNG_OPT_RECVTIMEO, 20000);
    nng_socket_set_ms(g_s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    return nng_dial(g_s, g_d.url, NULL, 0) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    nng_close(g_s);
    attn_daemon_stop(&g_d, 0, &st);
    /* SIGTERM: exit 0 and the socket removed */
    if (st != 0 || attn_daemon_cleanup(&g_d) != 0) {
        fprintf(stderr, "attnd exit %d or socket left behind\n", st);
        return -1;
    }
    return 0;
}

static void test_socket_mode(void **state)
{
    struct stat sb;
    (void)state;
    assert_int_equal(stat(g_d.sock, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0660);
}

static void test_hello_and_stats(void **state)
{
    attn_request req;
    attn_reply rep;
    void *keep;
    int cpu = 0;
    (void)state;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_HELLO;
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_true(rep.server.version[0] != '\0');
    for (uint32_t i = 0; i < rep.server.num_backends; i++)
        if (strcmp(rep.server.backends[i].name, "cpu_ref") == 0 && rep.server.backends[i].available)
            cpu = 1;
    assert_true(cpu);
    free(keep);
    req.op = ATTN_OP_STATS;
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_true(rep.stats.num_counters > 0);
    assert_int_equal(rep.stats.plan_cache.capacity, 256);
    free(keep);
}

static void pool_req(attn_request *req, attn_op op, const attn_pool_geometry *g)
{
    memset(req, 0, sizeof *req);
    req->op = op;
    req->geom = *g;
    snprintf(req->pool, sizeof req->pool, "%s", g->name);
}

static void test_pool_ops(void **state)
{
    attn_request req;
    attn_reply rep;
    void *keep;
    attn_pool_geometry g;
    (void)state;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "ops");
    g.layers = 3;
    g.num_pages = 5;
    g.page_size = 4;
    g.num_kv_heads = 2;
    g.head_dim_qk = g.head_dim_vo = 8;
    g.kv_dtype = ATTN_BF16;
    g.layout = ATTN_HND;
    pool_req(&req, ATTN_OP_POOL_CREATE, &g);
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_int_equal(rep.bytes, 3ull * 5 * 4 * 2 * 8 * 2 * 2);
    free(keep);
    assert_int_equal(call(&req, &rep, &keep), ATTN_E_POOL_EXISTS);
    free(keep);
    pool_req(&req, ATTN_OP_POOL_INFO, &g);
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_int_equal(rep.geom.layers, 3);
    assert_int_equal(rep.geom.num_pages, 5);
    assert_int_equal(rep.geom.kv_dtype, ATTN_BF16);
    assert_int_equal(rep.geom.layout, ATTN_HND);
    free(keep);
    pool_req(&req, ATTN_OP_POOL_DROP, &g);
    assert_int_equal(call(&req, &rep, &keep), 0);
    free(keep);
    pool_req(&req, ATTN_OP_POOL_INFO, &g);
    assert_int_equal(call(&req, &rep, &keep), ATTN_E_UNKNOWN_POOL);
    assert_string_equal(rep.error.field, "pool");
    free(keep);
}

/* ---- a batch in the daemon ---------------------------------------------- */

static attn_rb g_rb;
static int32_t *g_all_pages;

static void load_batch(const char *name, uint64_t seed)
{
    attn_rb_spec spec;
    attn_request req;
    attn_reply rep;
    void *keep;
    memset(&spec, 0, sizeof spec);
    spec.num_requests = 6;
    spec.spare_pages = 3;
    spec.max_cache_len = 60;
    assert_int_equal(attn_rb_make(&g_rb, &spec, seed), 0);
    snprintf(g_rb.g.name, sizeof g_rb.g.name, "%s", name);
    snprintf(g_rb.m.pool, sizeof g_rb.m.pool, "%s", name);
    pool_req(&req, ATTN_OP_POOL_CREATE, &g_rb.g);
    assert_int_equal(call(&req, &rep, &keep), 0);
    free(keep);
    g_all_pages = malloc(sizeof(int32_t) * g_rb.g.num_pages);
    attn_rb_kv_write_all(&g_rb, g_all_pages, &req);
    assert_int_equal(call(&req, &rep, &keep), 0);
    free(keep);
}

static void unload_batch(void)
{
    attn_request req;
    attn_reply rep;
    void *keep;
    pool_req(&req, ATTN_OP_POOL_DROP, &g_rb.g);
    assert_int_equal(call(&req, &rep, &keep), 0);
    free(keep);
    attn_rb_free(&g_rb);
    free(g_all_pages);
}

/* FNV of every page of the pool, read back through kv_read. */
static uint64_t pool_checksum(void)
{
    attn_request req;
    attn_reply rep;
    void *keep;
    uint64_t h;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_KV_READ;
    snprintf(req.kv.pool, sizeof req.kv.pool, "%s", g_rb.g.name);
    req.kv.pages = g_all_pages;
    req.kv.num_pages = g_rb.g.num_pages;
    assert_int_equal(call(&req, &rep, &keep), 0);
    h = attn_rb_checksum(rep.k.data, rep.k.len) * 31 +
        attn_rb_checksum(rep.v_data.data, rep.v_data.len);
    free(keep);
    return h;
}

/* kv_write/kv_read round trip; plan + run over the socket equals the CPU
 * engine in this process bit for bit, and the committed pages equal the
 * engine's committed copy. */
static void test_plan_run_bitexact(void **state)
{
    attn_request req;
    attn_reply rep;
    attn_error_detail e;
    void *keep, *k2, *v2;
    float *o, *lse;
    uint64_t plan_id;
    (void)state;
    load_batch("exact", 2024);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_KV_READ;
    snprintf(req.kv.pool, sizeof req.kv.pool, "exact");
    req.kv.pages = g_all_pages;
    req.kv.num_pages = g_rb.g.num_pages;
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_int_equal(rep.k.len, g_rb.k_bytes);
    assert_memory_equal(rep.k.data, g_rb.k, g_rb.k_bytes);
    assert_memory_equal(rep.v_data.data, g_rb.v, g_rb.v_bytes);
    free(keep);

    assert_int_equal(attn_rb_cpu_attend_copy(&g_rb, &k2, &v2, &o, &lse, &e), 0);

    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_PLAN;
    req.manifest = g_rb.m;
    assert_int_equal(call(&req, &rep, &keep), 0);
    plan_id = rep.plan_id;
    assert_true(rep.diag.len > 0);
    free(keep);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_RUN;
    attn_rb_run_args(&g_rb, &req.run);
    req.run.plan_id = plan_id;
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_int_equal(rep.o.len, g_rb.o_elems * 4);
    assert_memory_equal(rep.o.data, o, rep.o.len);
    assert_memory_equal(rep.lse.data, lse, g_rb.lse_elems * 4);
    free(keep);
    /* attend (one-shot) gives the same again */
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_ATTEND;
    req.manifest = g_rb.m;
    attn_rb_run_args(&g_rb, &req.run);
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_memory_equal(rep.o.data, o, g_rb.o_elems * 4);
    free(keep);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_KV_READ;
    snprintf(req.kv.pool, sizeof req.kv.pool, "exact");
    req.kv.pages = g_all_pages;
    req.kv.num_pages = g_rb.g.num_pages;
    assert_int_equal(call(&req, &rep, &keep), 0);
    assert_memory_equal(rep.k.data, k2, g_rb.k_bytes);
    assert_memory_equal(rep.v_data.data, v2, g_rb.v_bytes);
    free(keep);
    free(k2);
    free(v2);
    free(o);
    free(lse);
    unload_batch();
}

/* ---- the bad-input suite -------------------------------------------------- */

/* Send raw bytes; expect an error reply with `code` and a field starting
 * with `field` (NULL: any); the daemon answers hello afterwards. */
static void expect_raw(const void *bytes, size_t len, int code, const char *field)
{
    size_t rl = 0;
    void *r = raw_call(g_s, bytes, len, &rl);
    attn_reply rep;
    attn_error_detail e;
    attn_request hello;
    void *keep;
    assert_non_null(r);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_reply_decode(r, rl, NULL, &rep, &e), 0);
    assert_false(rep.ok);
    if (rep.error.code != code ||
        (field != NULL && strncmp(rep.error.field, field, strlen(field)) != 0))
        fail_msg("expected %s at %s, got %s at '%s': %s", attn_err_name(code), field ? field : "*",
                 attn_err_name(rep.error.code), rep.error.field, rep.error.message);
    free(r);
    memset(&hello, 0, sizeof hello);
    hello.op = ATTN_OP_HELLO;
    assert_int_equal(call(&hello, &rep, &keep), 0);
    free(keep);
}

static void expect_req(attn_request *req, int code, const char *field)
{
    attn_buf b = {0};
    attn_error_detail e;
    req->v = req->v ? req->v : ATTN_PROTOCOL_VERSION;
    req->id = 31;
    assert_int_equal(attn_request_encode(req, &b, &e), 0);
    expect_raw(b.data, b.len, code, field);
    attn_buf_free(&b);
}

static void pk_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void test_bad_inputs(void **state)
{
    attn_request req;
    attn_buf good = {0};
    attn_error_detail e;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint64_t sum0;
    int32_t saved;
    static const uint8_t huge_bin[] = {0x83, 0xa1, 'v',  0x01, 0xa2, 'o',
                                       'p',  0xdd, 0xff, 0x00, 0x00, 0x00};
    static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    (void)state;
    load_batch("bad", 77);
    sum0 = pool_checksum();

    /* truncated frame: a valid attend cut short */
    memset(&req, 0, sizeof req);
    req.v = 1;
    req.id = 31;
    req.op = ATTN_OP_ATTEND;
    req.manifest = g_rb.m;
    attn_rb_run_args(&g_rb, &req.run);
    assert_int_equal(attn_request_encode(&req, &good, &e), 0);
    expect_raw(good.data, good.len - 7, ATTN_E_TRUNCATED, "message");
    expect_raw(good.data, 3, ATTN_E_TRUNCATED, "message");
    attn_buf_free(&good);

    /* huge declared counts: no allocation, an error */
    expect_raw(huge_bin, sizeof huge_bin, ATTN_E_TOO_LARGE, "op");
    expect_raw(huge_map, sizeof huge_map, ATTN_E_TOO_LARGE, "message");

    /* wrong types, unknown op, wrong version */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pk_str(&pk, "v");
    msgpack_pack_uint32(&pk, 1);
    pk_str(&pk, "op");
    msgpack_pack_uint32(&pk, 5);
    pk_str(&pk, "id");
    msgpack_pack_uint32(&pk, 1);
    expect_raw(sb.data, sb.size, ATTN_E_TYPE, "op");
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_map(&pk, 3);
    pk_str(&pk, "v");
    msgpack_pack_uint32(&pk, 1);
    pk_str(&pk, "op");
    pk_str(&pk, "teleport");
    pk_str(&pk, "id");
    msgpack_pack_uint32(&pk, 1);
    expect_raw(sb.data, sb.size, ATTN_E_UNKNOWN_OP, "op");
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_map(&pk, 3);
    pk_str(&pk, "v");
    msgpack_pack_uint32(&pk, 2);
    pk_str(&pk, "op");
    pk_str(&pk, "hello");
    pk_str(&pk, "id");
    msgpack_pack_uint32(&pk, 1);
    expect_raw(sb.data, sb.size, ATTN_E_VERSION, "v");
    msgpack_sbuffer_destroy(&sb);

    /* stale plan id */
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_RUN;
    attn_rb_run_args(&g_rb, &req.run);
    req.run.plan_id = 987654321;
    expect_req(&req, ATTN_E_STALE_PLAN, "plan_id");

    /* unknown pool */
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_ATTEND;
    req.manifest = g_rb.m;
    snprintf(req.manifest.pool, sizeof req.manifest.pool, "nosuchpool");
    attn_rb_run_args(&g_rb, &req.run);
    expect_req(&req, ATTN_E_UNKNOWN_POOL, "pool");

    /* page id out of pool */
    req.manifest = g_rb.m;
    saved = g_rb.m.kv.page_indices[0];
    g_rb.m.kv.page_indices[0] = (int32_t)g_rb.g.num_pages;
    expect_req(&req, ATTN_E_PAGE_OUT_OF_POOL, "kv.page_indices[0]");
    g_rb.m.kv.page_indices[0] = saved;

    /* last_page_len out of range */
    saved = g_rb.m.kv.last_page_len[1];
    g_rb.m.kv.last_page_len[1] = (int32_t)g_rb.g.page_size + 1;
    expect_req(&req, ATTN_E_LAST_PAGE_LEN, "kv.last_page_len[1]");
    g_rb.m.kv.last_page_len[1] = 0;
    expect_req(&req, ATTN_E_LAST_PAGE_LEN, "kv.last_page_len[1]");
    g_rb.m.kv.last_page_len[1] = saved;

    /* coverage != T + C: one row too many on the last page */
    if (g_rb.m.kv.last_page_len[2] < (int32_t)g_rb.g.page_size) {
        g_rb.m.kv.last_page_len[2]++;
        expect_req(&req, ATTN_E_COVERAGE, "kv.last_page_len[2]");
        g_rb.m.kv.last_page_len[2]--;
    } else {
        g_rb.m.kv.last_page_len[2]--;
        expect_req(&req, ATTN_E_COVERAGE, "kv.last_page_len[2]");
        g_rb.m.kv.last_page_len[2]++;
    }

    /* non-monotone qo_indptr */
    saved = g_rb.m.qo_indptr[2];
    g_rb.m.qo_indptr[2] = g_rb.m.qo_indptr[1] - 1;
    expect_req(&req, ATTN_E_QO_INDPTR, "qo_indptr");
    g_rb.m.qo_indptr[2] = saved;

    /* duplicate request ids */
    {
        char id1[ATTN_NAME_MAX];
        memcpy(id1, g_rb.m.requests[1].id, sizeof id1);
        memcpy(g_rb.m.requests[1].id, g_rb.m.requests[0].id, sizeof id1);
        expect_req(&req, ATTN_E_DUPLICATE_REQUEST, "requests[1]");
        memcpy(g_rb.m.requests[1].id, id1, sizeof id1);
    }

    /* mask without polarity */
    {
        uint8_t bits[64];
        attn_mask saved_mask = g_rb.m.mask;
        memset(bits, 0xff, sizeof bits);
        req.manifest.mask.kind = ATTN_MASK_DENSE;
        req.manifest.mask.polarity = ATTN_POLARITY_UNSET;
        req.manifest.mask.dense_bits = bits;
        req.manifest.mask.dense_bytes = sizeof bits;
        expect_req(&req, ATTN_E_MASK_POLARITY, "mask");
        req.manifest.mask = saved_mask;
    }

    /* tensor byte length not matching its shape */
    req.manifest = g_rb.m;
    attn_rb_run_args(&g_rb, &req.run);
    req.run.k_new.len -= 4;
    expect_req(&req, ATTN_E_SHAPE, "k_new");

    /* none of it touched the pool, and the valid call still works */
    assert_true(pool_checksum() == sum0);
    req.run.k_new.len += 4;
    {
        attn_reply rep;
        void *keep;
        assert_int_equal(call(&req, &rep, &keep), 0);
        free(keep);
    }
    assert_true(pool_checksum() != sum0); /* the commit did change it */
    unload_batch();
}

/* A frame over --max-msg closes that connection without a reply; the
 * daemon keeps serving others. */
static void test_frame_cap(void **state)
{
    nng_socket s2;
    size_t big = 2u << 20;
    char *buf = calloc(1, big);
    void *r = NULL;
    size_t rl = 0;
    attn_request hello;
    attn_reply rep;
    void *keep;
    (void)state;
    assert_int_equal(nng_req0_open(&s2), 0);
    nng_socket_set_ms(s2, NNG_OPT_RECVTIMEO, 500);
    nng_socket_set_ms(s2, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    assert_int_equal(nng_dial(s2, g_d.url, NULL, 0), 0);
    buf[0] = (char)0x80; /* an empty map, then padding */
    r = raw_call(s2, buf, big, &rl);
    assert_null(r);
    nng_close(s2);
    free(buf);
    memset(&hello, 0, sizeof hello);
    hello.op = ATTN_OP_HELLO;
    assert_int_equal(call(&hello, &rep, &keep), 0);
    free(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_mode), cmocka_unit_test(test_hello_and_stats),
        cmocka_unit_test(test_pool_ops),    cmocka_unit_test(test_plan_run_bitexact),
        cmocka_unit_test(test_bad_inputs),  cmocka_unit_test(test_frame_cap),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_daemon: ATTND is not set (run through make integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
