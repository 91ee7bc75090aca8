/* Issue 9 item 12: libattn with careless arguments and no daemon.  NULL
 * arguments were dereferenced; now ATTN_E_INVALID naming the argument.  With
 * nothing listening a call waited its whole timeout (30 s) and said "Timed
 * out"; now it says "no daemon at URL" within about a second, and so does
 * the callback of attn_call_async.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_null_arguments(void **state)
{
    attn_client *c = NULL;
    attn_reply rep;
    attn_request req;
    (void)state;
    assert_int_equal(attn_client_open(NULL, "ipc:///tmp/x"), ATTN_E_INVALID);
    assert_int_equal(attn_client_open(&c, NULL), ATTN_E_INVALID);
    assert_null(c);
    assert_int_equal(attn_client_open_tls(&c, "tls+tcp://127.0.0.1:1", NULL), ATTN_E_INVALID);
    assert_int_equal(attn_hello(NULL, &rep), ATTN_E_INVALID);
    assert_string_equal(rep.error.field, "client");
    assert_int_equal(attn_client_open(&c, "ipc:///tmp/attnd-test-no-such.sock"), 0);
    assert_int_equal(attn_hello(c, NULL), ATTN_E_INVALID);
    assert_int_equal(attn_pool_create(c, NULL, &rep), ATTN_E_INVALID);
    assert_string_equal(rep.error.field, "geometry");
    assert_int_equal(attn_pool_drop(c, NULL, &rep), ATTN_E_INVALID);
    assert_string_equal(rep.error.field, "pool");
    assert_int_equal(attn_kv_read(c, NULL, &rep), ATTN_E_INVALID);
    assert_int_equal(attn_plan(c, NULL, &rep), ATTN_E_INVALID);
    assert_int_equal(attn_run(c, NULL, &rep), ATTN_E_INVALID);
    assert_int_equal(attn_attend(c, NULL, NULL, &rep), ATTN_E_INVALID);
    assert_int_equal(attn_call(c, NULL, &rep), ATTN_E_INVALID);
    memset(&req, 0, sizeof req);
    assert_int_equal(attn_call_async(c, &req, NULL, NULL), ATTN_E_INVALID);
    attn_client_set_timeout(NULL, 5);
    attn_client_close(c);
    attn_client_close(NULL);
}

/* attn_buffer_register_cuda refuses before sending anything (no daemon is
 * listening, so a sent request would fail with ATTN_E_IO instead): no
 * driver, a NULL pointer, host memory, zero bytes, a NULL out-argument. */
static void test_register_cuda_refusals(void **state)
{
    attn_client *c = NULL;
    attn_reply rep;
    uint64_t id = 77;
    static char host[64];
    (void)state;
    assert_int_equal(attn_client_open(&c, "ipc:///tmp/attnd-test-no-such.sock"), 0);
    assert_int_equal(attn_buffer_register_cuda(c, host, sizeof host, NULL, &rep), ATTN_E_INVALID);
    assert_string_equal(rep.error.field, "buf");
    assert_int_equal(attn_buffer_register_cuda(c, host, 0, &id, &rep), ATTN_E_RANGE);
    assert_string_equal(rep.error.field, "bytes");
    assert_int_equal(id, 0);
    assert_int_equal(attn_buffer_register_cuda(c, NULL, 64, &id, &rep), ATTN_E_BUFFER_UNSUPPORTED);
    assert_string_equal(rep.error.field, "dev_ptr");
    /* host memory: refused by the driver where one exists, for want of one here */
    assert_int_equal(attn_buffer_register_cuda(c, host, sizeof host, &id, &rep),
                     ATTN_E_BUFFER_UNSUPPORTED);
    assert_string_equal(rep.error.field, "dev_ptr");
    setenv("ATTN_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1", 1);
    assert_int_equal(attn_buffer_register_cuda(c, host, sizeof host, &id, &rep),
                     ATTN_E_BUFFER_UNSUPPORTED);
    assert_string_equal(rep.error.field, "dev_ptr");
    assert_non_null(strstr(rep.error.message, "no CUDA driver"));
    unsetenv("ATTN_CUDA_DRIVER_LIB");
    attn_reply_free(&rep);
    attn_client_close(c);
}

static void test_no_daemon_is_fast(void **state)
{
    attn_client *c;
    attn_reply rep;
    double t0, dt;
    (void)state;
    assert_int_equal(attn_client_open(&c, "ipc:///tmp/attnd-test-no-such.sock"), 0);
    t0 = now_ms();
    assert_int_equal(attn_hello(c, &rep), ATTN_E_IO);
    dt = now_ms() - t0;
    printf("no daemon: %.0f ms: %s\n", dt, rep.error.message);
    assert_non_null(strstr(rep.error.message, "no daemon at ipc:///tmp/attnd-test-no-such.sock"));
    assert_true(dt < 2000);
    attn_reply_free(&rep);
    attn_client_close(c);
}

/* The asynchronous call waited out its whole timeout (30 s) with no daemon;
 * now its callback says "no daemon at URL" within about a second, like
 * attn_call. */
typedef struct async_result {
    atomic_int done;
    int rv;
    char message[256];
} async_result;

static void async_done(void *arg, int rv, attn_reply *rep)
{
    async_result *r = arg;
    r->rv = rv;
    snprintf(r->message, sizeof r->message, "%s", rep->error.message);
    attn_reply_free(rep);
    free(rep);
    atomic_store(&r->done, 1);
}

static void test_no_daemon_is_fast_async(void **state)
{
    attn_client *c;
    attn_request req;
    async_result r = {0};
    double t0, dt;
    (void)state;
    assert_int_equal(attn_client_open(&c, "ipc:///tmp/attnd-test-no-such.sock"), 0);
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.op = ATTN_OP_HELLO;
    t0 = now_ms();
    assert_int_equal(attn_call_async(c, &req, async_done, &r), 0);
    while (!atomic_load(&r.done) && now_ms() - t0 < 10000)
        usleep(1000);
    dt = now_ms() - t0;
    printf("no daemon, async: %.0f ms: %s\n", dt, r.message);
    assert_true(atomic_load(&r.done));
    assert_int_equal(r.rv, ATTN_E_IO);
    assert_non_null(strstr(r.message, "no daemon at ipc:///tmp/attnd-test-no-such.sock"));
    assert_true(dt < 2000);
    attn_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_no_daemon_is_fast),
        cmocka_unit_test(test_register_cuda_refusals),
        cmocka_unit_test(test_no_daemon_is_fast_async),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
