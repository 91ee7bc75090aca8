/* libattn against an in-process REP peer that speaks the protocol through
 * protocol/codec (so the client and the server sides meet on the wire):
 * every op synchronously, server errors with code and field, an async call,
 * concurrent calls from several threads on one client, and a timeout.
 */
#include <math.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "tests/lib/rep_serve.h"

/* diag {"selected": "cpu_ref"} as the admission module would pre-encode it */
static const uint8_t g_diag[] = {0x81, 0xa8, 's', 'e', 'l', 'e', 'c', 't', 'e',
                                 'd',  0xa7, 'c', 'p', 'u', '_', 'r', 'e', 'f'};

typedef struct peer {
    nng_socket sock;
    pthread_t thread;
    char url[64];
    int workers;
    atomic_int stop; /* set before the socket closes */
    pthread_mutex_t mu;
    int drops;          /* pool_drop requests seen */
    char last_drop[64]; /* the pool the latest one named */
} peer;

/* Pools named "exp-*" play attnd's exported pools: "exp-ok" gets a valid
 * export map, "exp-none" none (an attnd that ignored the flag), "exp-bad"
 * one that cannot be decoded, "exp-busy" the E_BUSY refusal. */
static void answer_export(const attn_request *req, attn_reply *rep)
{
    const char *name = req->geom.name;
    if (strcmp(name, "exp-taken") == 0) {
        rep->ok = false;
        attn_error_set(&rep->error, ATTN_E_POOL_EXISTS, "pool", "pool '%s' exists", name);
        return;
    }
    if (strcmp(name, "exp-busy") == 0) {
        rep->ok = false;
        attn_error_set(&rep->error, ATTN_E_BUSY, "export", "at most 16 exported pools at once");
        return;
    }
    if (strcmp(name, "exp-ok") != 0 && strcmp(name, "exp-bad") != 0)
        return;
    rep->has_export = true;
    rep->exp.kind = ATTN_BUFFER_SHM;
    snprintf(rep->exp.name, sizeof rep->exp.name, "/attnd-test-%s", name);
    snprintf(rep->exp.device, sizeof rep->exp.device, "cpu");
    rep->exp.bytes = rep->bytes;
    rep->exp.kv_dtype = req->geom.kv_dtype;
    rep->exp.layout = ATTN_NHD;
}

/* "exp-taken": attnd refuses (the pool exists, someone else's) with a
 * reply that also carries the key "export" twice, so the client cannot
 * decode it: add two "export": nil pairs to the top map (map32, as
 * attn_reply_encode writes it).  Returns 0, or -1 on another header. */
static int duplicate_export_key(attn_buf *out)
{
    static const uint8_t pair[] = {0xa6, 'e', 'x', 'p', 'o', 'r', 't', 0xc0};
    if (out->len < 5 || out->data[0] != 0xdf)
        return -1;
    uint8_t *b = realloc(out->data, out->len + 2 * sizeof pair);
    if (b == NULL)
        return -1;
    uint32_t n = ((uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4]) + 2;
    for (int i = 0; i < 4; i++)
        b[1 + i] = (uint8_t)(n >> (24 - 8 * i));
    memcpy(b + out->len, pair, sizeof pair);
    memcpy(b + out->len + sizeof pair, pair, sizeof pair);
    out->data = b;
    out->len += 2 * sizeof pair;
    return 0;
}

/* Spoil the export map's "layout": "NHD" (its only NHD string) so the
 * client cannot decode it. */
static void spoil_export_layout(uint8_t *b, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++)
        if (b[i] == 0xa3 && memcmp(b + i + 1, "NHD", 3) == 0)
            b[i + 1] = 'Q';
}

/* Answer one request the way attnd would, from the typed request. */
static void answer(const attn_request *req, int drv, const attn_error_detail *derr, attn_reply *rep,
                   float *scratch)
{
    memset(rep, 0, sizeof *rep);
    rep->id = req->id;
    rep->op = req->op;
    rep->ok = drv == 0;
    if (drv != 0) {
        rep->error = *derr;
        return;
    }
    switch (req->op) {
    case ATTN_OP_HELLO:
        snprintf(rep->server.version, sizeof rep->server.version, "test-peer");
        rep->server.num_backends = 1;
        snprintf(rep->server.backends[0].name, ATTN_NAME_MAX, "cpu_ref");
        rep->server.backends[0].available = true;
        break;
    case ATTN_OP_POOL_CREATE:
        snprintf(rep->pool, sizeof rep->pool, "%s", req->geom.name);
        rep->bytes = (uint64_t)req->geom.layers * req->geom.num_pages * req->geom.page_size *
                     req->geom.num_kv_heads * (req->geom.head_dim_qk + req->geom.head_dim_vo) * 2;
        if (req->pool_export)
            answer_export(req, rep);
        break;
    case ATTN_OP_POOL_INFO:
    case ATTN_OP_POOL_DROP:
        if (strcmp(req->pool, "main") != 0 && strncmp(req->pool, "exp-", 4) != 0) {
            rep->ok = false;
            attn_error_set(&rep->error, ATTN_E_UNKNOWN_POOL, "pool", "no pool named %s", req->pool);
            break;
        }
        snprintf(rep->geom.name, sizeof rep->geom.name, "main");
        rep->geom.layers = 1;
        rep->geom.num_pages = 8;
        rep->geom.page_size = 4;
        rep->geom.num_kv_heads = 1;
        rep->geom.head_dim_qk = rep->geom.head_dim_vo = 2;
        rep->bytes = 256;
        break;
    case ATTN_OP_PLAN:
        rep->plan_id = 100 + req->manifest.num_requests;
        snprintf(rep->plan_key, sizeof rep->plan_key, "key-%s", req->manifest.requests[0].id);
        rep->diag = (attn_bytes){g_diag, sizeof g_diag};
        break;
    case ATTN_OP_RUN:
    case ATTN_OP_ATTEND:
        /* echo q as o, and lse = the layer, so the caller can check routing */
        rep->o = req->run.q;
        rep->o_dtype = ATTN_FP32;
        if (req->run.return_lse) {
            scratch[0] = (float)req->run.layer;
            scratch[1] = -INFINITY;
            rep->has_lse = true;
            rep->lse = (attn_bytes){scratch, 2 * sizeof(float)};
        }
        rep->plan_id = req->op == ATTN_OP_ATTEND ? 7 : 0;
        rep->diag = (attn_bytes){g_diag, sizeof g_diag};
        break;
    case ATTN_OP_KV_READ:
        rep->k = (attn_bytes){req->kv.pages, req->kv.num_pages * 4ull};
        rep->v_data = (attn_bytes){req->kv.pages, req->kv.num_pages * 4ull};
        rep->kv_dtype = ATTN_FP32;
        break;
    case ATTN_OP_KV_WRITE:
        if (req->kv.k.len != req->kv.v.len) {
            rep->ok = false;
            attn_error_set(&rep->error, ATTN_E_SHAPE, "tensors.v", "v and k differ");
        }
        break;
    case ATTN_OP_STATS:
        rep->stats.num_counters = 1;
        snprintf(rep->stats.counters[0].name, 48, "requests");
        rep->stats.counters[0].value = 5;
        break;
    default:
        break;
    }
}

/* Decode, answer and encode one request; an encode failure stops the peer. */
static int peer_handle(void *arg, const void *body, size_t len, void **reply, size_t *reply_len)
{
    attn_request req;
    attn_error_detail derr;
    attn_reply rep;
    attn_buf out;
    float scratch[2];
    peer *p = arg;
    int drv = attn_request_decode(body, len, NULL, &req, &derr);
    answer(&req, drv, &derr, &rep, scratch);
    if (attn_reply_encode(&rep, &out, &derr) != 0)
        return -1;
    if (drv == 0 && req.op == ATTN_OP_POOL_CREATE && strcmp(req.geom.name, "exp-bad") == 0)
        spoil_export_layout(out.data, out.len);
    if (drv == 0 && req.op == ATTN_OP_POOL_CREATE && strcmp(req.geom.name, "exp-taken") == 0 &&
        duplicate_export_key(&out) != 0) {
        attn_buf_free(&out);
        attn_request_free(&req);
        return -1;
    }
    if (drv == 0 && req.op == ATTN_OP_POOL_DROP) {
        pthread_mutex_lock(&p->mu);
        p->drops++;
        snprintf(p->last_drop, sizeof p->last_drop, "%s", req.pool);
        pthread_mutex_unlock(&p->mu);
    }
    attn_request_free(&req);
    *reply = out.data;
    *reply_len = out.len;
    return 0;
}

static void *peer_worker(void *arg)
{
    peer *p = arg;
    attn_rep_serve(p->sock, peer_handle, p, &p->stop);
    return NULL;
}

static pthread_t g_workers[4];

static int peer_start(void **state)
{
    static peer p;
    static int n;
    snprintf(p.url, sizeof p.url, "inproc://attn-client-test-%d-%d", (int)getpid(), n++);
    assert_int_equal(nng_rep0_open(&p.sock), 0);
    assert_int_equal(nng_socket_set_size(p.sock, NNG_OPT_RECVMAXSZ, 0), 0);
    assert_int_equal(nng_listen(p.sock, p.url, NULL, 0), 0);
    p.workers = 4;
    atomic_store(&p.stop, 0);
    pthread_mutex_init(&p.mu, NULL);
    p.drops = 0;
    p.last_drop[0] = '\0';
    for (int i = 0; i < p.workers; i++)
        pthread_create(&g_workers[i], NULL, peer_worker, &p);
    *state = &p;
    return 0;
}

static int peer_stop(void **state)
{
    peer *p = *state;
    atomic_store(&p->stop, 1);
    for (int i = 0; i < p->workers; i++)
        pthread_join(g_workers[i], NULL);
    nng_close(p->sock);
    return 0;
}

static attn_client *open_client(void **state)
{
    peer *p = *state;
    attn_client *c;
    assert_int_equal(attn_client_open(&c, p->url), 0);
    attn_client_set_timeout(c, 5000);
    return c;
}

static void test_every_op_sync(void **state)
{
    attn_client *c = open_client(state);
    attn_reply rep;

    assert_int_equal(attn_hello(c, &rep), 0);
    assert_string_equal(rep.server.version, "test-peer");
    assert_true(rep.server.backends[0].available);
    attn_reply_free(&rep);

    attn_pool_geometry g = {.layers = 2,
                            .num_pages = 16,
                            .page_size = 4,
                            .num_kv_heads = 2,
                            .head_dim_qk = 8,
                            .head_dim_vo = 8,
                            .kv_dtype = ATTN_BF16};
    snprintf(g.name, sizeof g.name, "main");
    assert_int_equal(attn_pool_create(c, &g, &rep), 0);
    assert_string_equal(rep.pool, "main");
    assert_int_equal(rep.bytes, 2ull * 16 * 4 * 2 * 16 * 2);
    attn_reply_free(&rep);

    assert_int_equal(attn_pool_info(c, "main", &rep), 0);
    assert_int_equal(rep.geom.num_pages, 8);
    assert_int_equal(rep.bytes, 256);
    attn_reply_free(&rep);

    /* the server's error comes back as the return value with its field */
    assert_int_equal(attn_pool_drop(c, "nope", &rep), ATTN_E_UNKNOWN_POOL);
    assert_false(rep.ok);
    assert_string_equal(rep.error.field, "pool");
    assert_string_equal(rep.error.message, "no pool named nope");
    attn_reply_free(&rep);

    /* seed 0x08F mixed batch */
    attn_request_desc reqs[3] = {{"mix_prefill", 0, 4}, {"mix_append", 6, 2}, {"mix_decode", 9, 1}};
    int32_t qo[4] = {0, 4, 6, 7}, pind[4] = {0, 1, 3, 6}, pidx[6] = {0, 1, 2, 7, 3, 9};
    int32_t last[3] = {4, 4, 2};
    attn_manifest m = {.num_qo_heads = 2, .num_requests = 3, .requests = reqs, .qo_indptr = qo};
    snprintf(m.pool, sizeof m.pool, "main");
    m.kv.format = ATTN_KV_CSR;
    m.kv.page_indptr = pind;
    m.kv.page_indices = pidx;
    m.kv.num_page_indices = 6;
    m.kv.last_page_len = last;
    m.q_dtype = ATTN_FP32;
    assert_int_equal(attn_plan(c, &m, &rep), 0);
    assert_int_equal(rep.plan_id, 103);
    assert_string_equal(rep.plan_key, "key-mix_prefill");
    /* the diag arrives as the same msgpack bytes, and renders as JSON */
    assert_int_equal(rep.diag.len, sizeof g_diag);
    assert_memory_equal(rep.diag.data, g_diag, sizeof g_diag);
    char *js;
    attn_error_detail e;
    assert_int_equal(attn_reply_diag_json(&rep, &js, &e), 0);
    assert_non_null(strstr(js, "\"selected\": \"cpu_ref\""));
    free(js);
    attn_reply_free(&rep);

    float q[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    attn_run_args a = {.plan_id = 103, .layer = 1, .return_lse = true};
    a.q = (attn_bytes){q, sizeof q};
    a.k_new = (attn_bytes){q, 8};
    a.v_new = (attn_bytes){q, 8};
    assert_int_equal(attn_run(c, &a, &rep), 0);
    assert_int_equal(rep.o.len, sizeof q);
    assert_memory_equal(rep.o.data, q, sizeof q);
    assert_true(rep.has_lse);
    float lse[2];
    memcpy(lse, rep.lse.data, sizeof lse);
    assert_true(lse[0] == 1.0f && isinf(lse[1]) && lse[1] < 0);
    attn_reply_free(&rep);

    assert_int_equal(attn_attend(c, &m, &a, &rep), 0);
    assert_int_equal(rep.plan_id, 7);
    assert_memory_equal(rep.o.data, q, sizeof q);
    attn_reply_free(&rep);

    int32_t pages[3] = {7, 3, 9};
    attn_kv_args kv = {.layer = 0, .pages = pages, .num_pages = 3};
    snprintf(kv.pool, sizeof kv.pool, "main");
    assert_int_equal(attn_kv_read(c, &kv, &rep), 0);
    assert_int_equal(rep.k.len, 12);
    assert_memory_equal(rep.k.data, pages, 12);
    attn_reply_free(&rep);
    kv.k = (attn_bytes){q, 16};
    kv.v = (attn_bytes){q, 12};
    assert_int_equal(attn_kv_write(c, &kv, &rep), ATTN_E_SHAPE);
    assert_string_equal(rep.error.field, "tensors.v");
    attn_reply_free(&rep);
    kv.v.len = 16;
    assert_int_equal(attn_kv_write(c, &kv, &rep), 0);
    attn_reply_free(&rep);

    assert_int_equal(attn_stats(c, &rep), 0);
    assert_string_equal(rep.stats.counters[0].name, "requests");
    assert_int_equal(rep.stats.counters[0].value, 5);
    attn_reply_free(&rep);

    /* a request the client itself cannot encode never leaves */
    attn_request bad = {.op = ATTN_OP_COUNT};
    assert_int_equal(attn_call(c, &bad, &rep), ATTN_E_UNKNOWN_OP);
    attn_reply_free(&rep);
    attn_client_close(c);
}

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int rv;
    uint64_t counter;
} waiter;

static void on_reply(void *arg, int rv, attn_reply *rep)
{
    waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    if (rv != 0 || w->done == 0)
        w->rv = rv; /* a failure among several calls is kept */
    w->counter = rep->stats.counters[0].value;
    w->done++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    attn_reply_free(rep);
    free(rep);
}

static void test_async_call(void **state)
{
    attn_client *c = open_client(state);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, 0};
    attn_request req = {.op = ATTN_OP_STATS};
    assert_int_equal(attn_call_async(c, &req, on_reply, &w), 0);
    assert_true(req.id != 0); /* assigned by the client */
    pthread_mutex_lock(&w.mu);
    while (w.done == 0)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(w.rv, 0);
    assert_int_equal(w.counter, 5);
    attn_client_close(c);
}

/* Pipelining: several calls outstanding on one client at once (one nng
 * context each), every callback runs once with its own reply. */
static void test_async_calls_outstanding(void **state)
{
    enum { N = 8 };
    attn_client *c = open_client(state);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, 0};
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        attn_request req = {.op = ATTN_OP_STATS};
        assert_int_equal(attn_call_async(c, &req, on_reply, &w), 0);
        ids[i] = req.id;
        for (int j = 0; j < i; j++)
            assert_true(ids[j] != ids[i]);
    }
    pthread_mutex_lock(&w.mu);
    while (w.done < N)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(w.done, N);
    assert_int_equal(w.rv, 0);
    attn_client_close(c);
}

typedef struct hammer {
    attn_client *c;
    int failures;
    uint32_t layer;
} hammer;

/* Each thread runs with its own layer; every reply must be its own. */
static void *hammer_thread(void *arg)
{
    hammer *h = arg;
    for (int i = 0; i < 50; i++) {
        float q[2] = {(float)h->layer, (float)i};
        attn_run_args a = {.plan_id = 1, .layer = h->layer, .return_lse = true};
        attn_reply rep;
        a.q = (attn_bytes){q, sizeof q};
        a.k_new = a.v_new = a.q;
        int rv = attn_run(h->c, &a, &rep);
        float lse0 = -1;
        if (rv == 0)
            memcpy(&lse0, rep.lse.data, sizeof lse0);
        if (rv != 0 || rep.o.len != sizeof q || memcmp(rep.o.data, q, sizeof q) != 0 ||
            lse0 != (float)h->layer)
            h->failures++;
        attn_reply_free(&rep);
    }
    return NULL;
}

static void test_concurrent_calls_one_client(void **state)
{
    attn_client *c = open_client(state);
    pthread_t t[4];
    hammer h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (hammer){c, 0, (uint32_t)i + 10};
        pthread_create(&t[i], NULL, hammer_thread, &h[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(h[i].failures, 0);
    }
    attn_client_close(c);
}

/* The pool_drop requests the peer has seen, and the latest one's pool. */
static int peer_drops(void **state, char *last, size_t n)
{
    peer *p = *state;
    pthread_mutex_lock(&p->mu);
    int drops = p->drops;
    snprintf(last, n, "%s", p->last_drop);
    pthread_mutex_unlock(&p->mu);
    return drops;
}

/* attn_pool_create_exported: a reply that says ok but carries no usable
 * export map leaves no pool behind (the client drops what attnd made); a
 * refusal made nothing, so nothing is dropped. */
static void test_create_exported_unusable_reply_drops_pool(void **state)
{
    attn_client *c = open_client(state);
    attn_reply rep;
    char last[64];
    attn_pool_geometry g = {.layers = 1,
                            .num_pages = 4,
                            .page_size = 4,
                            .num_kv_heads = 1,
                            .head_dim_qk = 8,
                            .head_dim_vo = 8,
                            .kv_dtype = ATTN_FP32};

    snprintf(g.name, sizeof g.name, "exp-ok");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), 0);
    assert_true(rep.has_export);
    assert_string_equal(rep.exp.name, "/attnd-test-exp-ok");
    attn_reply_free(&rep);
    assert_int_equal(peer_drops(state, last, sizeof last), 0);

    snprintf(g.name, sizeof g.name, "exp-none");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), ATTN_E_PROTOCOL);
    assert_false(rep.ok);
    assert_string_equal(rep.error.field, "export");
    assert_non_null(strstr(rep.error.message, "no export map"));
    assert_non_null(strstr(rep.error.message, "pool 'exp-none' was dropped again"));
    attn_reply_free(&rep);
    assert_int_equal(peer_drops(state, last, sizeof last), 1);
    assert_string_equal(last, "exp-none");

    snprintf(g.name, sizeof g.name, "exp-bad");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), ATTN_E_PROTOCOL);
    assert_string_equal(rep.error.field, "export.layout");
    assert_non_null(strstr(rep.error.message, "pool 'exp-bad' was dropped again"));
    attn_reply_free(&rep);
    assert_int_equal(peer_drops(state, last, sizeof last), 2);
    assert_string_equal(last, "exp-bad");

    /* attnd's own refusal (field "export" too) made no pool: no drop */
    snprintf(g.name, sizeof g.name, "exp-busy");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), ATTN_E_BUSY);
    assert_string_equal(rep.error.field, "export");
    attn_reply_free(&rep);
    assert_int_equal(peer_drops(state, last, sizeof last), 2);

    /* a refusal the client cannot decode, failing on a key "export" (here
     * one given twice): it said ok: false, so attnd made nothing, and the
     * pool of that name is someone else's: it must not be dropped */
    snprintf(g.name, sizeof g.name, "exp-taken");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), ATTN_E_PROTOCOL);
    assert_false(rep.ok);
    assert_string_equal(rep.error.field, "export");
    assert_null(strstr(rep.error.message, "dropped"));
    attn_reply_free(&rep);
    assert_int_equal(peer_drops(state, last, sizeof last), 2);

    /* a pool attnd made but the client cannot drop: said so */
    snprintf(g.name, sizeof g.name, "none-left");
    assert_int_equal(attn_pool_create_exported(c, &g, &rep), ATTN_E_PROTOCOL);
    assert_non_null(strstr(rep.error.message, "stays on attnd (pool_drop failed: no pool named"));
    attn_reply_free(&rep);
    attn_client_close(c);
}

static void test_no_server_times_out(void **state)
{
    (void)state;
    attn_client *c;
    attn_reply rep;
    assert_int_equal(attn_client_open(&c, "inproc://attn-nobody-listens"), 0);
    attn_client_set_timeout(c, 100);
    assert_int_equal(attn_hello(c, &rep), ATTN_E_IO);
    assert_false(rep.ok);
    assert_true(strlen(rep.error.message) > 0);
    attn_reply_free(&rep);
    attn_client_close(c);
    assert_int_equal(attn_client_open(&c, "bogus://x"), ATTN_E_RANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_op_sync, peer_start, peer_stop),
        cmocka_unit_test_setup_teardown(test_async_call, peer_start, peer_stop),
        cmocka_unit_test_setup_teardown(test_async_calls_outstanding, peer_start, peer_stop),
        cmocka_unit_test_setup_teardown(test_concurrent_calls_one_client, peer_start, peer_stop),
        cmocka_unit_test_setup_teardown(test_create_exported_unusable_reply_drops_pool, peer_start,
                                        peer_stop),
        cmocka_unit_test(test_no_server_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
