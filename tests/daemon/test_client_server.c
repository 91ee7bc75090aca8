/* libattn end to end against the real request handler (daemon/server.c with
 * the CPU engine) behind an in-process nng REP socket: typed calls in,
 * typed replies out, exact numbers checked.
 *
 * Fixture: a one-token decode of request "req-A" whose history of T = 9
 * rows lives in the seed 0x04D page table [7, 3, 9] (page size 4: tokens
 * 0..3 in page 7, 4..7 in page 3, 8 in page 9), so the new row lands at
 * logical position 9 = page 9, row 1 and last_page_len is 2.
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
#include "daemon/config.h"
#include "daemon/server.h"
#include "tests/lib/rep_serve.h"

#define P 4
#define HKV 1
#define HQ 2
#define D 4

typedef struct rig {
    nng_socket sock;
    attn_server *srv;
    pthread_t worker;
    char url[80];
    attn_client *c;
    atomic_int stop; /* set before the socket closes */
} rig;

/* The real request handler: bytes in, reply bytes out. */
static int handle(void *arg, const void *body, size_t len, void **reply, size_t *reply_len)
{
    rig *r = arg;
    attn_server_handle(r->srv, body, len, reply, reply_len);
    return 0;
}

static void *serve(void *arg)
{
    rig *r = arg;
    attn_rep_serve(r->sock, handle, r, &r->stop);
    return NULL;
}

static int rig_up(void **state)
{
    static rig r;
    attnd_config cfg;
    attn_error_detail e;
    attnd_config_defaults(&cfg);
    cfg.engine = ATTND_ENGINE_CPU;
    cfg.threads = 1;
    if (attn_server_create(&r.srv, &cfg, &e) != 0) {
        print_error("server: %s %s\n", e.field, e.message);
        return -1;
    }
    snprintf(r.url, sizeof r.url, "inproc://attn-client-server-%d", (int)getpid());
    if (nng_rep0_open(&r.sock) != 0 || nng_socket_set_size(r.sock, NNG_OPT_RECVMAXSZ, 0) != 0 ||
        nng_listen(r.sock, r.url, NULL, 0) != 0)
        return -1;
    atomic_store(&r.stop, 0);
    pthread_create(&r.worker, NULL, serve, &r);
    if (attn_client_open(&r.c, r.url) != 0)
        return -1;
    attn_client_set_timeout(r.c, 10000);
    *state = &r;
    return 0;
}

static int rig_down(void **state)
{
    rig *r = *state;
    attn_client_close(r->c);
    atomic_store(&r->stop, 1);
    pthread_join(r->worker, NULL);
    nng_close(r->sock);
    attn_server_destroy(r->srv);
    return 0;
}

/* Deterministic values in [-1, 1) (exact in fp32). */
static float val(int i)
{
    return (float)(((i * 37 + 11) % 64) - 32) / 32.0f;
}

static void decode_manifest(attn_manifest *m, attn_request_desc *rq, int32_t *qo, int32_t *pind,
                            int32_t *pidx, int32_t *last)
{
    memset(m, 0, sizeof *m);
    snprintf(rq->id, sizeof rq->id, "req-A");
    rq->cache_len = 9;
    rq->new_len = 1;
    qo[0] = 0;
    qo[1] = 1;
    pind[0] = 0;
    pind[1] = 3;
    pidx[0] = 7;
    pidx[1] = 3;
    pidx[2] = 9;
    last[0] = 2;
    snprintf(m->pool, sizeof m->pool, "main");
    m->num_qo_heads = HQ;
    m->num_requests = 1;
    m->requests = rq;
    m->qo_indptr = qo;
    m->kv.format = ATTN_KV_CSR;
    m->kv.page_indptr = pind;
    m->kv.page_indices = pidx;
    m->kv.num_page_indices = 3;
    m->kv.last_page_len = last;
    m->q_dtype = ATTN_FP32;
}

static void test_end_to_end(void **state)
{
    rig *r = *state;
    attn_client *c = r->c;
    attn_reply rep;
    attn_error_detail e;

    assert_int_equal(attn_hello(c, &rep), 0);
    assert_true(rep.server.num_backends >= 1);
    attn_reply_free(&rep);

    attn_pool_geometry g = {.layers = 2,
                            .num_pages = 16,
                            .page_size = P,
                            .num_kv_heads = HKV,
                            .head_dim_qk = D,
                            .head_dim_vo = D,
                            .kv_dtype = ATTN_FP32,
                            .layout = ATTN_NHD};
    snprintf(g.name, sizeof g.name, "main");
    int rv = attn_pool_create(c, &g, &rep);
    if (rv != 0)
        fail_msg("pool_create: %s %s %s", attn_err_name(rv), rep.error.field, rep.error.message);
    attn_reply_free(&rep);
    assert_int_equal(attn_pool_info(c, "main", &rep), 0);
    assert_int_equal(rep.geom.num_pages, 16);
    assert_int_equal(rep.geom.page_size, P);
    assert_int_equal(rep.geom.kv_dtype, ATTN_FP32);
    attn_reply_free(&rep);

    /* history: 3 pages [P, HKV, D] of K and V */
    static float kh[3 * P * HKV * D], vh[3 * P * HKV * D];
    for (int i = 0; i < 3 * P * HKV * D; i++) {
        kh[i] = val(i);
        vh[i] = val(i + 1000);
    }
    int32_t pages[3] = {7, 3, 9};
    attn_kv_args kv = {.layer = 1, .pages = pages, .num_pages = 3};
    snprintf(kv.pool, sizeof kv.pool, "main");
    kv.k = (attn_bytes){kh, sizeof kh};
    kv.v = (attn_bytes){vh, sizeof vh};
    rv = attn_kv_write(c, &kv, &rep);
    if (rv != 0)
        fail_msg("kv_write: %s %s %s", attn_err_name(rv), rep.error.field, rep.error.message);
    attn_reply_free(&rep);
    assert_int_equal(attn_kv_read(c, &kv, &rep), 0);
    assert_int_equal(rep.k.len, sizeof kh);
    assert_memory_equal(rep.k.data, kh, sizeof kh);
    assert_memory_equal(rep.v_data.data, vh, sizeof vh);
    attn_reply_free(&rep);

    /* one-token decode on layer 1 */
    attn_manifest m;
    attn_request_desc rq;
    int32_t qo[2], pind[2], pidx[3], last[1];
    decode_manifest(&m, &rq, qo, pind, pidx, last);
    float q[HQ * D], kn[HKV * D], vn[HKV * D];
    for (int i = 0; i < HQ * D; i++)
        q[i] = val(i + 2000);
    for (int i = 0; i < HKV * D; i++) {
        kn[i] = val(i + 3000);
        vn[i] = val(i + 4000);
    }
    attn_run_args a = {.layer = 1, .return_lse = true};
    a.q = (attn_bytes){q, sizeof q};
    a.k_new = (attn_bytes){kn, sizeof kn};
    a.v_new = (attn_bytes){vn, sizeof vn};

    assert_int_equal(attn_plan(c, &m, &rep), 0);
    assert_true(rep.plan_id != 0);
    assert_true(rep.diag.len > 0);
    char *js;
    assert_int_equal(attn_reply_diag_json(&rep, &js, &e), 0);
    assert_non_null(strstr(js, "selected"));
    free(js);
    a.plan_id = rep.plan_id;
    attn_reply_free(&rep);

    rv = attn_run(c, &a, &rep);
    if (rv != 0)
        fail_msg("run: %s %s %s", attn_err_name(rv), rep.error.field, rep.error.message);
    assert_int_equal(rep.o_dtype, ATTN_FP32);
    assert_int_equal(rep.o.len, sizeof(float) * HQ * D);
    assert_true(rep.has_lse);
    float o[HQ * D], lse[HQ];
    memcpy(o, rep.o.data, sizeof o);
    memcpy(lse, rep.lse.data, sizeof lse);
    attn_reply_free(&rep);

    /* exact reference in double: keys 0..8 from the pages, key 9 the new row */
    for (int h = 0; h < HQ; h++) {
        double s[10], mx = -INFINITY, sum = 0, acc[D] = {0};
        for (int t = 0; t < 10; t++) {
            const float *k = t < 9 ? &kh[(size_t)t * HKV * D] : kn;
            s[t] = 0;
            for (int x = 0; x < D; x++)
                s[t] += (double)q[h * D + x] * k[x];
            s[t] /= sqrt((double)D);
            mx = s[t] > mx ? s[t] : mx;
        }
        for (int t = 0; t < 10; t++) {
            const float *v = t < 9 ? &vh[(size_t)t * HKV * D] : vn;
            double w = exp(s[t] - mx);
            sum += w;
            for (int x = 0; x < D; x++)
                acc[x] += w * v[x];
        }
        assert_float_equal(lse[h], mx + log(sum), 1e-5);
        for (int x = 0; x < D; x++)
            assert_float_equal(o[h * D + x], acc[x] / sum, 1e-5);
    }

    /* the server's checks arrive as typed errors with their field */
    a.q.len -= 4;
    assert_int_equal(attn_run(c, &a, &rep), ATTN_E_SHAPE);
    assert_string_equal(rep.error.field, "q");
    attn_reply_free(&rep);
    m.mask.kind = ATTN_MASK_DENSE; /* polarity left unset: never sent, never guessed */
    uint8_t bits[2] = {0xff, 0x03};
    m.mask.dense_bits = bits;
    m.mask.dense_bytes = 2;
    assert_int_equal(attn_plan(c, &m, &rep), ATTN_E_MASK_POLARITY);
    assert_string_equal(rep.error.field, "mask.polarity");
    attn_reply_free(&rep);

    assert_int_equal(attn_stats(c, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(attn_pool_drop(c, "main", &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(attn_pool_info(c, "main", &rep), ATTN_E_UNKNOWN_POOL);
    assert_string_equal(rep.error.field, "pool");
    attn_reply_free(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_end_to_end, rig_up, rig_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
