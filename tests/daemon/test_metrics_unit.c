/* daemon/metrics and the request path's accounting in-process: bucket
 * edges of the latency histogram (an observation equal to a bound lands in
 * that bucket), errors by code and by op, the op of an undecodable frame
 * (its op when readable, else "unreadable"), the plan cache's byte count
 * rising with a plan and falling with its eviction, and --metrics address
 * rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/config.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "daemon/plan_cache.h"
#include "daemon/server.h"
#include "protocol/codec.h"

static void test_histogram_edges(void **state)
{
    attnd_metrics *m = calloc(1, sizeof *m);
    (void)state;
    attnd_metrics_observe(m, ATTN_OP_HELLO, 0, 10000); /* exactly 10 us: first bucket */
    attnd_metrics_observe(m, ATTN_OP_HELLO, 0, 10001); /* just above: second */
    attnd_metrics_observe(m, ATTN_OP_HELLO, 0, 11e9);  /* above 10 s: +Inf */
    attnd_metrics_observe(m, ATTN_OP_RUN, ATTN_E_STALE_PLAN, 5);
    attnd_metrics_observe(m, ATTN_OP_COUNT, ATTN_E_PROTOCOL, 5);
    attnd_metrics_observe(m, ATTN_OP_RUN, -12345, 5); /* no such code: counted as internal */
    assert_int_equal(atomic_load(&m->op_latency[ATTN_OP_HELLO].bucket[0]), 1);
    assert_int_equal(atomic_load(&m->op_latency[ATTN_OP_HELLO].bucket[1]), 1);
    assert_int_equal(atomic_load(&m->op_latency[ATTN_OP_HELLO].bucket[ATTND_NUM_BUCKETS]), 1);
    assert_int_equal(atomic_load(&m->op_latency[ATTN_OP_HELLO].count), 3);
    assert_int_equal(atomic_load(&m->op_requests[ATTN_OP_RUN]), 2);
    assert_int_equal(atomic_load(&m->op_errors[ATTN_OP_RUN]), 2);
    assert_int_equal(atomic_load(&m->op_errors[ATTN_OP_HELLO]), 0);
    assert_int_equal(atomic_load(&m->error_codes[-ATTN_E_STALE_PLAN]), 1);
    assert_int_equal(atomic_load(&m->error_codes[-ATTN_E_INTERNAL]), 1);
    assert_int_equal(atomic_load(&m->op_requests[ATTN_OP_COUNT]), 1);
    assert_int_equal(attnd_metrics_ready(m), 0);
    atomic_store(&m->engines_ready, 1);
    atomic_store(&m->listening, 1);
    assert_int_equal(attnd_metrics_ready(m), 1);
    atomic_store(&m->draining, 1);
    assert_int_equal(attnd_metrics_ready(m), 0);
    free(m);
}

static void test_render(void **state)
{
    attnd_metrics *m = calloc(1, sizeof *m);
    attnd_metrics_gauges g;
    char *text = NULL;
    size_t len = 0;
    (void)state;
    memset(&g, 0, sizeof g);
    g.plan_bytes = 4242;
    attnd_metrics_observe(m, ATTN_OP_PLAN, 0, 3000000); /* 3 ms */
    attnd_metrics_note_engine(m, 1, 2500000000ull);
    assert_int_equal(attnd_metrics_render(m, &g, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    assert_non_null(
        strstr(text, "attnd_request_duration_seconds_bucket{op=\"plan\",le=\"0.0025\"} 0\n"));
    assert_non_null(
        strstr(text, "attnd_request_duration_seconds_bucket{op=\"plan\",le=\"0.005\"} 1\n"));
    assert_non_null(
        strstr(text, "attnd_request_duration_seconds_bucket{op=\"plan\",le=\"+Inf\"} 1\n"));
    assert_non_null(strstr(text, "attnd_request_duration_seconds_sum{op=\"plan\"} 0.003000000\n"));
    assert_non_null(strstr(text, "attnd_engine_seconds_total{engine=\"cpu\"} 2.500000000\n"));
    assert_non_null(strstr(text, "attnd_errors_total{code=\"E_POOL_EXISTS\"} 0\n"));
    assert_non_null(strstr(text, "attnd_plan_cache_bytes 4242\n"));
    assert_non_null(strstr(text, "# TYPE attnd_request_duration_seconds histogram\n"));
    free(text);
    free(m);
}

/* A frame that is a map with a readable "op" but a bad field counts under its op. */
static void test_server_accounting(void **state)
{
    attnd_config cfg;
    attn_server *s;
    attn_error_detail e;
    attn_request req;
    attn_buf b = {0};
    void *rep;
    size_t rl;
    attnd_metrics *m;
    static const unsigned char garbage[] = {0xc1, 0x00};
    /* {"v":1,"op":"pool_info","id":3,"pool":7}: pool must be a string */
    static const unsigned char bad_info[] = {0x84, 0xa1, 'v',  0x01, 0xa2, 'o', 'p', 0xa9, 'p',
                                             'o',  'o',  'l',  '_',  'i',  'n', 'f', 'o',  0xa2,
                                             'i',  'd',  0x03, 0xa4, 'p',  'o', 'o', 'l',  0x07};
    (void)state;
    attnd_config_defaults(&cfg);
    cfg.engine = ATTND_ENGINE_CPU;
    cfg.threads = 1;
    assert_int_equal(attn_server_create(&s, &cfg, &e), 0);
    m = attn_server_metrics(s);
    assert_int_equal(atomic_load(&m->engines_ready), 1);
    assert_int_equal(attn_server_handle(s, garbage, sizeof garbage, &rep, &rl), 0);
    free(rep);
    assert_int_equal(attn_server_handle(s, bad_info, sizeof bad_info, &rep, &rl), 0);
    free(rep);
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.op = ATTN_OP_HELLO;
    req.id = 1;
    assert_int_equal(attn_request_encode(&req, &b, &e), 0);
    assert_int_equal(attn_server_handle(s, b.data, b.len, &rep, &rl), 0);
    free(rep);
    attn_buf_free(&b);
    assert_int_equal(atomic_load(&m->op_requests[ATTN_OP_COUNT]), 1);
    assert_int_equal(atomic_load(&m->op_requests[ATTN_OP_POOL_INFO]), 1);
    assert_int_equal(atomic_load(&m->op_errors[ATTN_OP_POOL_INFO]), 1);
    assert_int_equal(atomic_load(&m->error_codes[-ATTN_E_TYPE]), 1);
    assert_int_equal(atomic_load(&m->op_requests[ATTN_OP_HELLO]), 1);
    assert_int_equal(atomic_load(&m->op_errors[ATTN_OP_HELLO]), 0);
    attn_server_destroy(s);
}

static void test_plan_cache_bytes(void **state)
{
    attnd_plan_cache *c;
    attnd_plan_cache_stats st;
    attn_key k1, k2;
    attn_plan_decision d;
    uint64_t id1, id2;
    (void)state;
    assert_int_equal(attnd_plan_cache_create(&c, 1, 0, free), 0);
    attn_key_init(&k1);
    attn_key_init(&k2);
    assert_int_equal(attn_key_set_str(&k1, "a", "1"), 0);
    assert_int_equal(attn_key_set_str(&k2, "a", "2"), 0);
    assert_int_equal(attnd_plan_cache_insert(c, "p", &k1, malloc(8), 1000, &id1, &d), 0);
    attnd_plan_cache_stats_get(c, &st);
    assert_int_equal(st.bytes, 1000);
    attnd_plan_cache_release(c, NULL); /* no-op */
    {
        void *o;
        assert_int_equal(attnd_plan_cache_acquire(c, id1, &o, NULL), 0);
        attnd_plan_cache_release(c, o); /* the acquire's */
        attnd_plan_cache_release(c, o); /* the insert's */
    }
    /* capacity 1: the second plan evicts the first, the bytes follow */
    assert_int_equal(attnd_plan_cache_insert(c, "p", &k2, malloc(8), 1000, &id2, &d), 0);
    attnd_plan_cache_stats_get(c, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.bytes, 1000);
    attn_key_fini(&k1);
    attn_key_fini(&k2);
    attnd_plan_cache_destroy(c);
}

static void test_metrics_address(void **state)
{
    char url[300];
    attn_error_detail e;
    (void)state;
    assert_int_equal(attnd_http_url("127.0.0.1:9464", 0, url, sizeof url, &e), 0);
    assert_string_equal(url, "http://127.0.0.1:9464");
    assert_int_equal(attnd_http_url("http://localhost:9", 0, url, sizeof url, &e), 0);
    assert_int_equal(attnd_http_url("[::1]:9464", 0, url, sizeof url, &e), 0);
    assert_int_equal(attnd_http_url("127.9.9.9:1", 0, url, sizeof url, &e), 0);
    assert_int_equal(attnd_http_url("0.0.0.0:9464", 0, url, sizeof url, &e), ATTN_E_RANGE);
    assert_string_equal(e.field, "metrics");
    assert_non_null(strstr(e.message, "--metrics-allow-remote"));
    assert_int_equal(attnd_http_url("0.0.0.0:9464", 1, url, sizeof url, &e), 0);
    assert_int_equal(attnd_http_url("127.0.0.1", 0, url, sizeof url, &e), ATTN_E_RANGE);
    assert_int_equal(attnd_http_url("127.0.0.1:80/x", 0, url, sizeof url, &e), ATTN_E_RANGE);
    assert_int_equal(attnd_http_url("tcp://127.0.0.1:9", 0, url, sizeof url, &e), ATTN_E_RANGE);
}

/* "metrics" and "metrics_allow_remote" as configuration-file keys too. */
static void test_metrics_config_keys(void **state)
{
    char path[] = "/tmp/attnd-metrics-conf-XXXXXX";
    int fd = mkstemp(path);
    attnd_config c;
    attn_error_detail e;
    static const char text[] = "{\"metrics\": \"127.0.0.1:9464\", \"metrics_allow_remote\": 1}";
    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    attnd_config_defaults(&c);
    assert_string_equal(c.metrics, "");
    assert_int_equal(attnd_config_load_file(&c, path, &e), 0);
    assert_string_equal(c.metrics, "127.0.0.1:9464");
    assert_int_equal(c.metrics_allow_remote, 1);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram_edges),   cmocka_unit_test(test_render),
        cmocka_unit_test(test_server_accounting), cmocka_unit_test(test_plan_cache_bytes),
        cmocka_unit_test(test_metrics_address),   cmocka_unit_test(test_metrics_config_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
