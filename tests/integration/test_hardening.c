/* attnd as a subprocess against hostile or careless clients and operators
 * (issue 9): a bare connect-and-close, a second listener on the same path, a
 * client that never reads its replies, stalled partial frames, a connection
 * cap, shutdown under a stream of refused requests, SIGHUP, the non-loopback
 * TCP refusal and TLS with client certificates.  Each test starts its own
 * daemon with the flags it needs.  Needs $ATTND (make integration).
 */
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "tests/lib/daemon_proc.h"

/* The daemon of the running test; the teardown kills it if an assertion
 * left it running. */
static attn_daemon_proc g_d;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Encode a request (id 7) into b. */
static void encode(attn_request *req, attn_buf *b)
{
    attn_error_detail e;
    req->v = ATTN_PROTOCOL_VERSION;
    if (req->id == 0)
        req->id = 7;
    memset(b, 0, sizeof *b);
    assert_int_equal(attn_request_encode(req, b, &e), 0);
}

/* Open a REQ socket dialed to url (no resend, receive timeout timeout_ms). */
static int dial(nng_socket *s, const char *url, int timeout_ms)
{
    if (nng_req0_open(s) != 0)
        return -1;
    nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    if (nng_dial(*s, url, NULL, 0) != 0) {
        nng_close(*s);
        return -1;
    }
    return 0;
}

/* One request/reply on s; returns the decoded reply's code (0 = ok) or
 * ATTN_E_IO on a transport failure.  The reply bytes are freed. */
static int roundtrip(nng_socket s, attn_request *req)
{
    attn_buf b;
    attn_reply rep;
    attn_error_detail e;
    void *buf = NULL;
    size_t sz = 0;
    int rc;
    encode(req, &b);
    rc = nng_send(s, b.data, b.len, 0);
    attn_buf_free(&b);
    if (rc != 0 || nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) != 0)
        return ATTN_E_IO;
    memset(&rep, 0, sizeof rep);
    rc = attn_reply_decode(buf, sz, NULL, &rep, &e);
    if (rc == 0)
        rc = rep.ok ? 0 : rep.error.code;
    attn_reply_free(&rep);
    nng_free(buf, sz);
    return rc;
}

/* How long a fresh connection's `hello` takes (ms), or -1 when it got no
 * answer within timeout_ms. */
static double hello_ms(const char *url, int timeout_ms)
{
    nng_socket s;
    attn_request req;
    double t0 = now_ms(), dt;
    if (dial(&s, url, timeout_ms) != 0)
        return -1;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_HELLO;
    dt = roundtrip(s, &req) == 0 ? now_ms() - t0 : -1;
    nng_close(s);
    return dt;
}

/* Connect a raw stream socket to an ipc path; returns the fd or -1. */
static int raw_connect(const char *path)
{
    struct sockaddr_un sa;
    int fd;
    if (strlen(path) >= sizeof sa.sun_path || (fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* SIGTERM; asserts a clean exit (0, socket removed) within the helper's 10 s. */
static void stop_clean(attn_daemon_proc *d)
{
    int st = -1;
    assert_int_equal(attn_daemon_stop(d, 0, &st), 0);
    assert_int_equal(st, 0);
    assert_int_equal(attn_daemon_cleanup(d), 0);
}

/* Issue 9 item 2: nng 1.5.2 stopped its listener when a peer disconnected
 * during the SP handshake; a bare connect-and-close (a health probe) then
 * left every later client unanswered. */
static void test_bare_connect_close(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    double ms;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    for (int i = 0; i < 3; i++) {
        int fd = raw_connect(g_d.sock);
        assert_true(fd >= 0);
        close(fd);
    }
    usleep(50000);
    ms = hello_ms(g_d.url, 1000);
    printf("hello after 3 bare connect+close: %.2f ms\n", ms);
    assert_true(ms >= 0 && ms < 1000);
    stop_clean(&g_d);
}

/* Issue 9 item 2: a second `attnd --listen` on the same path fails clearly
 * (exit 2, "in use") and the first one keeps serving. */
static void test_second_listener(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    char cmd[1024];
    FILE *p;
    char out[2048] = {0};
    size_t n;
    int st;
    double ms;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    snprintf(cmd, sizeof cmd, "timeout 10 '%s' --listen '%s' --engine cpu 2>&1", getenv("ATTND"),
             g_d.url);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    st = pclose(p);
    printf("second listener: exit %d: %s", WEXITSTATUS(st), out);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_non_null(strstr(out, "in use"));
    ms = hello_ms(g_d.url, 1000);
    printf("hello after the second listener: %.2f ms\n", ms);
    assert_true(ms >= 0 && ms < 1000);
    stop_clean(&g_d);
}

static int kill_left(void **state)
{
    (void)state;
    if (g_d.pid > 0) {
        attn_daemon_stop(&g_d, SIGKILL, NULL);
        attn_daemon_cleanup(&g_d);
    }
    return 0;
}

#define HTEST(f) cmocka_unit_test_teardown(f, kill_left)

int main(void)
{
    const struct CMUnitTest tests[] = {
        HTEST(test_bare_connect_close),
        HTEST(test_second_listener),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_hardening: ATTND is not set (run through make integration)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
