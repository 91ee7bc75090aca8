/* attnd's operator endpoints (issue 9 item 15): attnd started with
 * --metrics on a free loopback port; /health/live and /health/ready answer
 * 200; /metrics is a valid Prometheus text exposition whose request, error,
 * latency, engine, plan-cache and pool figures move with the requests sent;
 * /health/ready answers 503 while a SIGTERM drain waits for a slow request;
 * a non-loopback --metrics address is refused unless allowed.
 * Needs $ATTND and $ATTNCTL (make integration).
 */
#include <ctype.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/http_get.h"
#include "tests/lib/random_batch.h"

typedef struct served {
    attn_daemon_proc d;
    int port;
    nng_socket s;
    int open;
} served;

/* The test's daemon; the teardown stops it when a failed assertion left it. */
static served g_sv;

static int start(served *sv)
{
    char addr[64];
    const char *extra[] = {"--engine", "cpu", "--threads", "1", "--metrics", addr, NULL};
    sv->port = attn_free_port();
    snprintf(addr, sizeof addr, "127.0.0.1:%d", sv->port);
    if (sv->port <= 0 || attn_daemon_start(&sv->d, NULL, extra) != 0)
        return -1;
    if (nng_req0_open(&sv->s) != 0)
        return -1;
    sv->open = 1;
    nng_socket_set_ms(sv->s, NNG_OPT_RECVTIMEO, 60000);
    nng_socket_set_ms(sv->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    return nng_dial(sv->s, sv->d.url, NULL, 0) == 0 ? 0 : -1;
}

static void stop(served *sv, int expect_status)
{
    int st = -1;
    nng_close(sv->s);
    sv->open = 0;
    assert_int_equal(attn_daemon_stop(&sv->d, SIGTERM, &st), 0);
    assert_int_equal(st, expect_status);
    attn_daemon_cleanup(&sv->d);
}

static int teardown(void **state)
{
    (void)state;
    if (g_sv.open)
        nng_close(g_sv.s);
    if (g_sv.d.pid > 0) {
        attn_daemon_stop(&g_sv.d, SIGKILL, NULL);
        attn_daemon_cleanup(&g_sv.d);
    }
    memset(&g_sv, 0, sizeof g_sv);
    return 0;
}

/* Typed call over `s`; returns 0 or the reply's error code. */
static int call(nng_socket s, attn_request *req)
{
    attn_buf b = {0};
    attn_error_detail e;
    attn_reply rep;
    void *buf = NULL;
    size_t sz = 0;
    int rc;
    req->v = ATTN_PROTOCOL_VERSION;
    if (req->id == 0)
        req->id = 7;
    assert_int_equal(attn_request_encode(req, &b, &e), 0);
    assert_int_equal(nng_send(s, b.data, b.len, 0), 0);
    attn_buf_free(&b);
    assert_int_equal(nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC), 0);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_reply_decode(buf, sz, NULL, &rep, &e), 0);
    rc = rep.ok ? 0 : rep.error.code;
    nng_free(buf, sz);
    return rc;
}

static void pool_create(nng_socket s, const attn_pool_geometry *g, int expect)
{
    attn_request req;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_POOL_CREATE;
    req.geom = *g;
    snprintf(req.pool, sizeof req.pool, "%s", g->name);
    assert_int_equal(call(s, &req), expect);
}

static char *get(int port, const char *path, int expect_status)
{
    int status = 0;
    char *body = NULL;
    assert_int_equal(attn_http_get(port, path, &status, &body), 0);
    if (status != expect_status)
        fprintf(stderr, "GET %s: %d %s\n", path, status, body);
    assert_int_equal(status, expect_status);
    return body;
}

/* The value of the sample whose name and labels are exactly `series`
 * (-1 when absent). */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return -1;
}

/* Text exposition 0.0.4: every line is "# HELP name text", "# TYPE name
 * counter|gauge|histogram" or a sample `name{label="v",...} value` whose
 * family (name less _bucket/_sum/_count for a histogram) was typed first;
 * histogram buckets are cumulative and end at +Inf = _count. */
static void assert_exposition(const char *text)
{
    char typed[64][80];
    char kinds[64][16];
    int ntyped = 0, samples = 0;
    const char *p = text;
    double last_bucket = -1;
    while (*p != '\0') {
        const char *end = strchr(p, '\n');
        char line[512], name[128];
        size_t len;
        int i = 0, found = -1;
        assert_non_null(end); /* every line ends with \n */
        len = (size_t)(end - p);
        assert_true(len < sizeof line);
        memcpy(line, p, len);
        line[len] = '\0';
        p = end + 1;
        if (strncmp(line, "# HELP ", 7) == 0)
            continue;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_true(ntyped < 64);
            assert_int_equal(sscanf(line + 7, "%79s %15s", typed[ntyped], kinds[ntyped]), 2);
            assert_true(strcmp(kinds[ntyped], "counter") == 0 ||
                        strcmp(kinds[ntyped], "gauge") == 0 ||
                        strcmp(kinds[ntyped], "histogram") == 0);
            ntyped++;
            continue;
        }
        /* a sample: metric name, optional labels, one space, a number */
        assert_true(isalpha((unsigned char)line[0]) || line[0] == '_');
        while (isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == ':')
            i++;
        memcpy(name, line, (size_t)i);
        name[i] = '\0';
        if (line[i] == '{') {
            const char *close = strchr(line + i, '}');
            assert_non_null(close);
            for (const char *q = line + i + 1; q < close;) {
                const char *eq = strchr(q, '=');
                assert_true(eq != NULL && eq < close && eq[1] == '"');
                q = strchr(eq + 2, '"');
                assert_true(q != NULL && q < close);
                q++;
                if (*q == ',')
                    q++;
            }
            i = (int)(close - line) + 1;
        }
        assert_int_equal(line[i], ' ');
        {
            char *num_end = NULL;
            double v = strtod(line + i + 1, &num_end);
            assert_true(num_end != line + i + 1 && *num_end == '\0');
            assert_true(v >= 0);
            if (strstr(name, "_bucket") != NULL) {
                if (strstr(line, "le=\"0.00001\"") != NULL)
                    last_bucket = -1;
                assert_true(v >= last_bucket);
                last_bucket = v;
            }
        }
        for (int t = 0; t < ntyped; t++) {
            size_t tl = strlen(typed[t]);
            if (strncmp(name, typed[t], tl) == 0 &&
                (name[tl] == '\0' ||
                 (strcmp(kinds[t], "histogram") == 0 &&
                  (strcmp(name + tl, "_bucket") == 0 || strcmp(name + tl, "_sum") == 0 ||
                   strcmp(name + tl, "_count") == 0))))
                found = t;
        }
        if (found < 0)
            fprintf(stderr, "untyped sample: %s\n", line);
        assert_true(found >= 0);
        samples++;
    }
    assert_true(ntyped >= 20);
    assert_true(samples > 100);
    assert_true(sample(text, "attnd_request_duration_seconds_bucket{op=\"hello\",le=\"+Inf\"}") ==
                sample(text, "attnd_request_duration_seconds_count{op=\"hello\"}"));
}

static void test_health(void **state)
{
    served *sv = &g_sv;
    char *b;
    (void)state;
    assert_int_equal(start(sv), 0);
    b = get(sv->port, "/health/live", 200);
    free(b);
    b = get(sv->port, "/health/ready", 200);
    assert_string_equal(b, "ready\n");
    free(b);
    b = get(sv->port, "/nosuchpage", 404);
    free(b);
    stop(sv, 0);
}

static void test_counts_move(void **state)
{
    served *sv = &g_sv;
    attn_pool_geometry g;
    attn_request req;
    char *before, *after, cmd[1200];
    const char *ctl = getenv("ATTNCTL"), *src = getenv("ATTN_SRCDIR");
    (void)state;
    assert_non_null(ctl);
    assert_int_equal(start(sv), 0);
    /* the server adds our pipe a moment after the dial returned */
    for (int i = 0;; i++) {
        before = get(sv->port, "/metrics", 200);
        if (sample(before, "attnd_connections") >= 1 || i == 500)
            break;
        free(before);
        usleep(10000);
    }
    assert_exposition(before);
    assert_true(sample(before, "attnd_requests_total{op=\"hello\"}") == 0);
    assert_true(sample(before, "attnd_connections") >= 1);
    assert_true(sample(before, "attnd_ready") == 1);

    for (int i = 0; i < 3; i++) {
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_HELLO;
        assert_int_equal(call(sv->s, &req), 0);
    }
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "m1");
    g.layers = 1;
    g.num_pages = 8;
    g.page_size = 4;
    g.num_kv_heads = 1;
    g.head_dim_qk = g.head_dim_vo = 8;
    g.kv_dtype = ATTN_FP32;
    snprintf(g.device, sizeof g.device, "cpu");
    pool_create(sv->s, &g, 0);
    pool_create(sv->s, &g, ATTN_E_POOL_EXISTS);
    /* a plan and a run on the CPU engine: the shipped JSON workload */
    snprintf(cmd, sizeof cmd, "%s run %s/examples/mixed.json --url %s >/dev/null", ctl,
             src != NULL ? src : ".", sv->d.url);
    assert_int_equal(system(cmd), 0);

    /* a reply counts as sent when nng's send completes, a moment after the
     * client has it: wait for the last one */
    for (int i = 0;; i++) {
        after = get(sv->port, "/metrics", 200);
        if (sample(after, "attnd_in_flight_requests") == 0 || i == 500)
            break;
        free(after);
        usleep(10000);
    }
    assert_exposition(after);
    assert_true(sample(after, "attnd_requests_total{op=\"hello\"}") == 3);
    assert_true(sample(after, "attnd_request_duration_seconds_count{op=\"hello\"}") == 3);
    assert_true(sample(after, "attnd_requests_total{op=\"pool_create\"}") >= 3);
    assert_true(sample(after, "attnd_request_errors_total{op=\"pool_create\"}") == 1);
    assert_true(sample(after, "attnd_errors_total{code=\"E_POOL_EXISTS\"}") == 1);
    assert_true(sample(after, "attnd_errors_total{code=\"E_STALE_PLAN\"}") == 0);
    assert_true(sample(after, "attnd_requests_total{op=\"attend\"}") >= 1);
    assert_true(sample(after, "attnd_request_duration_seconds_sum{op=\"attend\"}") > 0);
    assert_true(sample(after, "attnd_engine_runs_total{engine=\"cpu\"}") >= 1);
    assert_true(sample(after, "attnd_engine_seconds_total{engine=\"cpu\"}") > 0);
    assert_true(sample(after, "attnd_plan_cache_entries") >= 1);
    assert_true(sample(after, "attnd_plan_cache_bytes") > 0);
    assert_true(sample(after, "attnd_plan_cache_misses_total") >= 1);
    assert_true(sample(after, "attnd_pools") == 2);
    assert_true(sample(after, "attnd_pool_bytes") > sample(before, "attnd_pool_bytes"));
    assert_true(sample(after, "attnd_connections_total") >= 2); /* ours and attnctl's */
    assert_true(sample(after, "attnd_connections") >= 1);
    assert_true(sample(after, "attnd_in_flight_requests") == 0);
    assert_true(sample(after, "attnd_queue_depth") == 0);
    free(before);
    free(after);
    stop(sv, 0);
}

/* A prefill heavy enough for the one CPU thread to take a while. */
typedef struct slow_call {
    nng_socket s;
    attn_rb rb;
    int rc;
    int nng_rv; /* of the send or receive that failed */
} slow_call;

/* Thread body: no cmocka assertion here (they may only fail on the test's
 * own thread); sc->rc is the reply's code, or -1 for a transport failure. */
static void *run_slow(void *arg)
{
    slow_call *sc = arg;
    attn_request req;
    attn_reply rep;
    attn_error_detail e;
    attn_buf b = {0};
    void *buf = NULL;
    size_t sz = 0;
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.id = 8;
    req.op = ATTN_OP_ATTEND;
    req.manifest = sc->rb.m;
    attn_rb_run_args(&sc->rb, &req.run);
    sc->rc = -1;
    if (attn_request_encode(&req, &b, &e) != 0)
        return NULL;
    if ((sc->nng_rv = nng_send(sc->s, b.data, b.len, 0)) == 0 &&
        (sc->nng_rv = nng_recv(sc->s, &buf, &sz, NNG_FLAG_ALLOC)) == 0) {
        memset(&rep, 0, sizeof rep);
        if (attn_reply_decode(buf, sz, NULL, &rep, &e) == 0)
            sc->rc = rep.ok ? 0 : rep.error.code;
        nng_free(buf, sz);
    }
    attn_buf_free(&b);
    return NULL;
}

static void test_not_ready_while_draining(void **state)
{
    served *sv = &g_sv;
    slow_call sc;
    attn_rb_spec spec;
    pthread_t t;
    int64_t T = 0, C = 1536;
    int saw_busy = 0, st = -1;
    double frames;
    char *b;
    (void)state;
    memset(&spec, 0, sizeof spec);
    spec.num_requests = 1;
    spec.num_qo_heads = 8;
    spec.num_kv_heads = 8;
    spec.head_dim_qk = 64;
    spec.page_size = 16;
    assert_int_equal(attn_rb_make_lengths(&sc.rb, &spec, &T, &C, 5), 0);
    snprintf(sc.rb.g.name, sizeof sc.rb.g.name, "slow");
    snprintf(sc.rb.m.pool, sizeof sc.rb.m.pool, "slow");
    assert_int_equal(start(sv), 0);
    pool_create(sv->s, &sc.rb.g, 0);
    sc.s = sv->s;
    b = get(sv->port, "/metrics", 200);
    frames = sample(b, "attnd_frames_received_total"); /* the attend will be the next */
    free(b);
    assert_int_equal(pthread_create(&t, NULL, run_slow, &sc), 0);
    /* wait until the attend is being served, then ask attnd to stop */
    for (int i = 0; i < 2000 && !saw_busy; i++) {
        b = get(sv->port, "/metrics", 200);
        saw_busy = sample(b, "attnd_frames_received_total") > frames &&
                   sample(b, "attnd_in_flight_requests") >= 1;
        free(b);
        if (!saw_busy)
            usleep(2000);
    }
    assert_true(saw_busy);
    assert_int_equal(kill(sv->d.pid, SIGTERM), 0);
    for (int i = 0; i < 500; i++) {
        int status = 0;
        char *body = NULL;
        if (attn_http_get(sv->port, "/health/ready", &status, &body) == 0 && status == 503) {
            assert_non_null(strstr(body, "shutting down"));
            free(body);
            saw_busy = 2;
            break;
        }
        free(body);
        usleep(2000);
    }
    assert_int_equal(saw_busy, 2);
    b = get(sv->port, "/health/live", 200);
    free(b);
    pthread_join(t, NULL);
    if (sc.rc != 0)
        fprintf(stderr, "slow attend: rc %d, nng: %s\n", sc.rc, nng_strerror(sc.nng_rv));
    assert_int_equal(sc.rc, 0); /* the drain answered it */
    nng_close(sv->s);
    sv->open = 0;
    assert_int_equal(attn_daemon_stop(&sv->d, SIGTERM, &st), 0);
    assert_int_equal(st, 0);
    attn_daemon_cleanup(&sv->d);
    attn_rb_free(&sc.rb);
}

/* attnd with these flags exits with `status` before serving. */
static int exit_status(const char *flags)
{
    char cmd[1024];
    int st;
    snprintf(cmd, sizeof cmd, "%s --listen ipc:///tmp/attnd-metrics-flag-%d.sock %s 2>/dev/null",
             getenv("ATTND"), (int)getpid(), flags);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_address_rules(void **state)
{
    (void)state;
    assert_non_null(getenv("ATTND"));
    assert_int_equal(exit_status("--metrics 0.0.0.0:9464"), 2);
    assert_int_equal(exit_status("--metrics 10.1.2.3:9464"), 2);
    assert_int_equal(exit_status("--metrics 127.0.0.1"), 2); /* no port */
    assert_int_equal(exit_status("--metrics tcp://127.0.0.1:9464"), 2);
    assert_int_equal(exit_status("--metrics-allow-remote yes"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_health, teardown),
        cmocka_unit_test_teardown(test_counts_move, teardown),
        cmocka_unit_test_teardown(test_not_ready_while_draining, teardown),
        cmocka_unit_test(test_address_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
