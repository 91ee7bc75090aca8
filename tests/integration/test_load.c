/* attnd under load, as a subprocess: 64 concurrent clients x 200 requests
 * (hello, kv_read of a page whose bytes name it, and a run of one shared
 * decode plan) -> no lost, duplicated or mismatched reply; then SIGTERM
 * under load -> every request sent gets an answer (ok, or E_SHUTTING_DOWN
 * once shutdown began), exit 0, socket removed.  Needs $ATTND.
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "tests/lib/daemon_proc.h"

#define CLIENTS 64
#define REQUESTS 200
#define PAGES 64
#define P 4
#define HKV 1
#define D 4
#define HQ 2

static nng_socket open_req(const char *url, int timeout_ms)
{
    nng_socket s;
    assert_int_equal(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    assert_int_equal(nng_dial(s, url, NULL, 0), 0);
    return s;
}

/* One request on socket s; *rep decoded, *keep owns its bytes (nng_free with *klen). */
static int xcall(nng_socket s, attn_request *req, attn_reply *rep, void **keep, size_t *klen)
{
    attn_buf b = {0};
    attn_error_detail e;
    int rv;
    req->v = ATTN_PROTOCOL_VERSION;
    if (attn_request_encode(req, &b, &e) != 0)
        return -1;
    rv = nng_send(s, b.data, b.len, 0);
    attn_buf_free(&b);
    if (rv != 0 || nng_recv(s, keep, klen, NNG_FLAG_ALLOC) != 0)
        return -1;
    memset(rep, 0, sizeof *rep);
    return attn_reply_decode(*keep, *klen, NULL, rep, &e) == 0 ? 0 : -2;
}

typedef struct shared {
    const char *url;
    uint64_t plan_id;
    float q[HQ * D], kn[HKV * D], vn[HKV * D];
    float o_expect[HQ * D];
    atomic_int stop_after_refusal; /* SIGTERM phase: stop once refused */
} shared;

typedef struct client {
    shared *sh;
    int index;
    uint32_t requests;
    int lost, mismatched, refused, answered;
} client;

static void page_bytes(int page, float *k, float *v)
{
    for (int i = 0; i < P * HKV * D; i++) {
        k[i] = (float)(page * 1000 + i);
        v[i] = (float)(-page * 1000 - i);
    }
}

static void *client_main(void *arg)
{
    client *c = arg;
    nng_socket s = open_req(c->sh->url, 10000);
    for (uint32_t i = 0; i < c->requests; i++) {
        attn_request req;
        attn_reply rep;
        void *keep = NULL;
        size_t klen = 0;
        int32_t page = (int32_t)((c->index * 7 + i) % PAGES);
        int kind = (int)(i % 3), rv;
        memset(&req, 0, sizeof req);
        req.id = ((uint64_t)c->index << 32) | i; /* unique: a duplicate or crossed reply shows */
        if (kind == 0) {
            req.op = ATTN_OP_HELLO;
        } else if (kind == 1) {
            req.op = ATTN_OP_KV_READ;
            snprintf(req.kv.pool, sizeof req.kv.pool, "load");
            req.kv.pages = &page;
            req.kv.num_pages = 1;
        } else {
            req.op = ATTN_OP_RUN;
            req.run.plan_id = c->sh->plan_id;
            req.run.q = (attn_bytes){c->sh->q, sizeof c->sh->q};
            req.run.k_new = (attn_bytes){c->sh->kn, sizeof c->sh->kn};
            req.run.v_new = (attn_bytes){c->sh->vn, sizeof c->sh->vn};
        }
        rv = xcall(s, &req, &rep, &keep, &klen);
        if (rv == -1) {
            c->lost++;
            break; /* the connection is gone: a lost reply, and nothing more to send */
        }
        c->answered++;
        if (rv != 0 || rep.id != req.id) {
            c->mismatched++;
        } else if (!rep.ok) {
            if (rep.error.code == ATTN_E_SHUTTING_DOWN)
                c->refused++;
            else
                c->mismatched++;
        } else if (kind == 1) {
            float k[P * HKV * D], v[P * HKV * D];
            page_bytes(page, k, v);
            if (rep.k.len != sizeof k || memcmp(rep.k.data, k, sizeof k) != 0 ||
                memcmp(rep.v_data.data, v, sizeof v) != 0)
                c->mismatched++;
        } else if (kind == 2) {
            if (rep.o.len != sizeof c->sh->o_expect ||
                memcmp(rep.o.data, c->sh->o_expect, sizeof c->sh->o_expect) != 0)
                c->mismatched++;
        }
        nng_free(keep, klen);
        if (c->refused > 0 && atomic_load(&c->sh->stop_after_refusal))
            break;
    }
    nng_close(s);
    return NULL;
}

/* Pool "load": page p holds page_bytes(p); one decode request reading pages
 * 0..1 (T = 5, C = 1) is planned; its expected O comes from a first run. */
static void prepare(shared *sh)
{
    nng_socket s = open_req(sh->url, 20000);
    attn_request req;
    attn_reply rep;
    void *keep;
    size_t klen;
    attn_request_desc rd = {.id = "d0", .cache_len = 5, .new_len = 1};
    int32_t qo[2] = {0, 1}, pind[2] = {0, 2}, pidx[2] = {0, 1}, lpl[1] = {2};
    float *k = malloc(sizeof(float) * PAGES * P * HKV * D),
          *v = malloc(sizeof(float) * PAGES * P * HKV * D);
    int32_t pages[PAGES];

    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_POOL_CREATE;
    snprintf(req.pool, sizeof req.pool, "load");
    snprintf(req.geom.name, sizeof req.geom.name, "load");
    req.geom.layers = 1;
    req.geom.num_pages = PAGES;
    req.geom.page_size = P;
    req.geom.num_kv_heads = HKV;
    req.geom.head_dim_qk = req.geom.head_dim_vo = D;
    req.geom.kv_dtype = ATTN_FP32;
    assert_int_equal(xcall(s, &req, &rep, &keep, &klen), 0);
    assert_true(rep.ok);
    nng_free(keep, klen);
    for (int p = 0; p < PAGES; p++) {
        pages[p] = p;
        page_bytes(p, k + p * P * HKV * D, v + p * P * HKV * D);
    }
    /* the decode's new row lands in page 1 slot 1; the run rewrites it with
     * the same value every time, so page 1 keeps the bytes page_bytes gives
     * only if the new row equals them: make k_new/v_new those bytes */
    for (int i = 0; i < HKV * D; i++) {
        sh->kn[i] = k[1 * P * HKV * D + 1 * HKV * D + i];
        sh->vn[i] = v[1 * P * HKV * D + 1 * HKV * D + i];
    }
    for (int i = 0; i < HQ * D; i++)
        sh->q[i] = (float)(i % 3) * 0.001f - 0.001f;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_KV_WRITE;
    snprintf(req.kv.pool, sizeof req.kv.pool, "load");
    req.kv.pages = pages;
    req.kv.num_pages = PAGES;
    req.kv.k = (attn_bytes){k, sizeof(float) * PAGES * P * HKV * D};
    req.kv.v = (attn_bytes){v, sizeof(float) * PAGES * P * HKV * D};
    assert_int_equal(xcall(s, &req, &rep, &keep, &klen), 0);
    assert_true(rep.ok);
    nng_free(keep, klen);

    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_PLAN;
    snprintf(req.manifest.pool, sizeof req.manifest.pool, "load");
    req.manifest.num_qo_heads = HQ;
    req.manifest.num_requests = 1;
    req.manifest.requests = &rd;
    req.manifest.qo_indptr = qo;
    req.manifest.kv.format = ATTN_KV_CSR;
    req.manifest.kv.page_indptr = pind;
    req.manifest.kv.page_indices = pidx;
    req.manifest.kv.num_page_indices = 2;
    req.manifest.kv.last_page_len = lpl;
    req.manifest.q_dtype = ATTN_FP32;
    snprintf(req.manifest.policy.backend, sizeof req.manifest.policy.backend, "auto");
    assert_int_equal(xcall(s, &req, &rep, &keep, &klen), 0);
    assert_true(rep.ok);
    sh->plan_id = rep.plan_id;
    nng_free(keep, klen);

    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_RUN;
    req.run.plan_id = sh->plan_id;
    req.run.q = (attn_bytes){sh->q, sizeof sh->q};
    req.run.k_new = (attn_bytes){sh->kn, sizeof sh->kn};
    req.run.v_new = (attn_bytes){sh->vn, sizeof sh->vn};
    assert_int_equal(xcall(s, &req, &rep, &keep, &klen), 0);
    assert_true(rep.ok);
    assert_int_equal(rep.o.len, sizeof sh->o_expect);
    memcpy(sh->o_expect, rep.o.data, sizeof sh->o_expect);
    nng_free(keep, klen);
    nng_close(s);
    free(k);
    free(v);
}

static void run_clients(shared *sh, client *cl, uint32_t n, uint32_t requests, pthread_t *th)
{
    for (uint32_t i = 0; i < n; i++) {
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i].sh = sh;
        cl[i].index = (int)i;
        cl[i].requests = requests;
        assert_int_equal(pthread_create(&th[i], NULL, client_main, &cl[i]), 0);
    }
}

static void test_64_clients(void **state)
{
    attn_daemon_proc d;
    /* headroom over the 64 clients: prepare()'s connection is closed just
     * before they connect, and attnd drops a closed pipe from its table
     * asynchronously, so at the default cap (64) one client was refused
     * now and then (1 lost request in 5 of 14 runs, 2026-12-01) */
    const char *extra[] = {"--engine", "cpu", "--threads", "1", "--max-conns", "72", NULL};
    static shared sh;
    static client cl[CLIENTS];
    pthread_t th[CLIENTS];
    int lost = 0, mism = 0, answered = 0, st = -1;
    (void)state;
    assert_int_equal(attn_daemon_start(&d, NULL, extra), 0);
    memset(&sh, 0, sizeof sh);
    sh.url = d.url;
    prepare(&sh);
    run_clients(&sh, cl, CLIENTS, REQUESTS, th);
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        lost += cl[i].lost;
        mism += cl[i].mismatched + cl[i].refused;
        answered += cl[i].answered;
    }
    assert_int_equal(attn_daemon_stop(&d, 0, &st), 0);
    assert_int_equal(st, 0);
    assert_int_equal(attn_daemon_cleanup(&d), 0);
    printf("load: %d replies, %d lost, %d mismatched\n", answered, lost, mism);
    assert_int_equal(lost, 0);
    assert_int_equal(mism, 0);
    assert_int_equal(answered, CLIENTS * REQUESTS);
}

static void test_sigterm_under_load(void **state)
{
    attn_daemon_proc d;
    const char *extra[] = {"--engine", "cpu", "--threads", "1", NULL};
    static shared sh;
    static client cl[16];
    pthread_t th[16];
    int lost = 0, mism = 0, refused = 0, answered = 0, st = -1;
    (void)state;
    assert_int_equal(attn_daemon_start(&d, NULL, extra), 0);
    memset(&sh, 0, sizeof sh);
    sh.url = d.url;
    prepare(&sh);
    atomic_store(&sh.stop_after_refusal, 1);
    run_clients(&sh, cl, 16, 1000000, th);
    usleep(300000);
    assert_int_equal(kill(d.pid, SIGTERM), 0);
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        lost += cl[i].lost;
        mism += cl[i].mismatched;
        refused += cl[i].refused > 0;
        answered += cl[i].answered;
    }
    assert_int_equal(attn_daemon_stop(&d, 0, &st), 0);
    printf("sigterm: %d replies before shutdown completed, %d clients refused, %d lost\n", answered,
           refused, lost);
    assert_int_equal(st, 0);
    assert_int_equal(attn_daemon_cleanup(&d), 0); /* socket removed by attnd itself */
    assert_int_equal(lost, 0);
    assert_int_equal(mism, 0);
    assert_int_equal(refused, 16); /* every client saw the refusal: nothing hung */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_64_clients),
        cmocka_unit_test(test_sigterm_under_load),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_load: ATTND is not set (run through make integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
