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
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "protocol/tls.h"
#include "protocol/wire.h"
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

/* roundtrip, also copying the error reply's field into field[64]. */
static int roundtrip_field(nng_socket s, attn_request *req, char *field)
{
    attn_buf b;
    attn_reply rep;
    attn_error_detail e;
    void *buf = NULL;
    size_t sz = 0;
    int rc;
    field[0] = '\0';
    encode(req, &b);
    rc = nng_send(s, b.data, b.len, 0);
    attn_buf_free(&b);
    if (rc != 0 || nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) != 0)
        return ATTN_E_IO;
    memset(&rep, 0, sizeof rep);
    rc = attn_reply_decode(buf, sz, NULL, &rep, &e);
    if (rc == 0)
        rc = rep.ok ? 0 : rep.error.code;
    if (rc != 0)
        snprintf(field, 64, "%.63s", rep.ok ? e.field : rep.error.field);
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

/* A raw SP/REQ connection over the ipc socket that we drive byte by byte:
 * the 8-byte SP header (REQ, protocol 48), then frames of a type byte, a
 * 64-bit big-endian length and a 32-bit request id with the high bit set. */
static int sp_connect(const char *path)
{
    static const unsigned char hdr[8] = {0, 'S', 'P', 0, 0, 48, 0, 0};
    int fd = raw_connect(path);
    if (fd >= 0 && write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) {
        close(fd);
        return -1;
    }
    return fd;
}

/* An ipc frame header (message type 1, then the 64-bit big-endian length)
 * declaring `body` bytes after the request id, then the id: 13 bytes. */
static void sp_frame_bytes(unsigned char h[13], uint64_t body, uint32_t reqid)
{
    uint64_t n = body + 4;
    h[0] = 1;
    for (int i = 0; i < 8; i++)
        h[1 + i] = (unsigned char)(n >> (56 - 8 * i));
    reqid |= 0x80000000u;
    for (int i = 0; i < 4; i++)
        h[9 + i] = (unsigned char)(reqid >> (24 - 8 * i));
}

/* Write sp_frame_bytes' header to fd. */
static int sp_frame_header(int fd, uint64_t body, uint32_t reqid)
{
    unsigned char h[13];
    sp_frame_bytes(h, body, reqid);
    return write(fd, h, sizeof h) == (ssize_t)sizeof h ? 0 : -1;
}

/* One whole request on a raw connection (its reply is never read). */
static int sp_send(int fd, attn_request *req, uint32_t reqid)
{
    attn_buf b;
    int rc;
    encode(req, &b);
    rc = sp_frame_header(fd, b.len, reqid) == 0 && write(fd, b.data, b.len) == (ssize_t)b.len ? 0
                                                                                              : -1;
    attn_buf_free(&b);
    return rc;
}

/* Whether the daemon closed a raw connection within timeout_ms (EOF or reset
 * after whatever it sent). */
static int closed_by_peer(int fd, int timeout_ms)
{
    char buf[4096];
    double t0 = now_ms();
    while (now_ms() - t0 < timeout_ms) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 50) == 1) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                return 1;
        }
    }
    return 0;
}

/* The daemon's virtual size in MiB (/proc), or -1. */
static long vm_size_mib(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
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

/* A kv_read of two 4 MiB pages (K + V): an 8 MiB reply. */
static void kv_read_req(attn_request *req, int32_t *pages)
{
    memset(req, 0, sizeof *req);
    req->op = ATTN_OP_KV_READ;
    snprintf(req->kv.pool, sizeof req->kv.pool, "big");
    req->kv.pages = pages;
    req->kv.num_pages = 2;
}

/* Issue 9 item 1: 40 kv_reads of 8 MiB from one connection that reads
 * nothing held all 16 REP contexts; every other client's hello timed out
 * and SIGTERM did not complete while that client stayed. */
static void test_stuck_reader(void **state)
{
    const char *extra[] = {"--engine", "cpu", "--pool", "big:1:2:256:16:128:fp32", NULL};
    int32_t pages[2] = {0, 1};
    attn_request req;
    int fd;
    double ms, worst = 0;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    fd = sp_connect(g_d.sock);
    assert_true(fd >= 0);
    kv_read_req(&req, pages);
    for (uint32_t i = 0; i < 40; i++)
        if (sp_send(fd, &req, i + 1) != 0)
            break; /* attnd closed the connection: also fine */
    usleep(300000);
    for (int i = 0; i < 5; i++) {
        ms = hello_ms(g_d.url, 1000);
        assert_true(ms >= 0);
        worst = ms > worst ? ms : worst;
    }
    printf("hello with a stuck reader: worst of 5 %.2f ms\n", worst);
    assert_true(worst < 1000);
    {
        /* stats says how: the stuck connection holds at most --conn-inflight
         * (8) contexts; its further requests were answered E_BUSY at once */
        nng_socket st;
        attn_request sreq;
        attn_buf b;
        attn_reply rep;
        attn_error_detail e;
        void *buf = NULL;
        size_t sz = 0;
        uint64_t busy = 0, in_flight = 99;
        assert_int_equal(dial(&st, g_d.url, 2000), 0);
        memset(&sreq, 0, sizeof sreq);
        sreq.op = ATTN_OP_STATS;
        encode(&sreq, &b);
        assert_int_equal(nng_send(st, b.data, b.len, 0), 0);
        attn_buf_free(&b);
        assert_int_equal(nng_recv(st, &buf, &sz, NNG_FLAG_ALLOC), 0);
        memset(&rep, 0, sizeof rep);
        assert_int_equal(attn_reply_decode(buf, sz, NULL, &rep, &e), 0);
        for (uint32_t i = 0; i < rep.stats.num_counters; i++) {
            if (strcmp(rep.stats.counters[i].name, "busy_replies") == 0)
                busy = rep.stats.counters[i].value;
            if (strcmp(rep.stats.counters[i].name, "in_flight") == 0)
                in_flight = rep.stats.counters[i].value;
        }
        printf("stuck reader: busy_replies %llu, in_flight %llu (this stats included)\n",
               (unsigned long long)busy, (unsigned long long)in_flight);
        assert_true(busy >= 1);
        assert_true(in_flight <= 8 + 1);
        attn_reply_free(&rep);
        nng_free(buf, sz);
        nng_close(st);
    }
    /* the clean exit with the stuck client still connected: this hung 1 run
     * in 50 with nng 1.5.2 (scripts/nng/close-during-transfer.patch;
     * test_close_during_transfer drives the same race harder) */
    stop_clean(&g_d);
    close(fd);
}

/* Streams requests on `n` raw connections until killed, reading every reply
 * as it comes (a child process of test_close_during_transfer): connections
 * [0, nbig) ask for 8 MiB kv_reads, the others for hellos, so that at any
 * moment nng is in the middle of receiving a frame on some pipes and of a
 * partial write on others. */
static void stream_requests(const char *sock, int n, int nbig)
{
    enum { FRAMES = 16, NMAX = 32 };
    int32_t pages[2] = {0, 1};
    attn_request req;
    attn_buf b;
    unsigned char *batch[2];
    size_t batch_len[2], off[NMAX];
    int fds[NMAX];
    char sink[1 << 16];
    for (int k = 0; k < 2; k++) {
        attn_error_detail e;
        if (k == 0) {
            kv_read_req(&req, pages);
        } else {
            memset(&req, 0, sizeof req);
            req.op = ATTN_OP_HELLO;
        }
        req.v = ATTN_PROTOCOL_VERSION;
        req.id = 7;
        memset(&b, 0, sizeof b);
        if (attn_request_encode(&req, &b, &e) != 0)
            _exit(2);
        batch_len[k] = FRAMES * (13 + b.len);
        batch[k] = malloc(batch_len[k]);
        if (batch[k] == NULL)
            _exit(2);
        for (int f = 0; f < FRAMES; f++) {
            unsigned char *h = batch[k] + (size_t)f * (13 + b.len);
            sp_frame_bytes(h, b.len, (uint32_t)(f + 1));
            memcpy(h + 13, b.data, b.len);
        }
        attn_buf_free(&b);
    }
    n = n > NMAX ? NMAX : n;
    for (int i = 0; i < n; i++) {
        if ((fds[i] = sp_connect(sock)) < 0)
            _exit(3);
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
        off[i] = 0;
    }
    for (;;) {
        for (int i = 0; i < n; i++) {
            int k = i < nbig ? 0 : 1;
            ssize_t w = write(fds[i], batch[k] + off[i], batch_len[k] - off[i]);
            if (w > 0)
                off[i] = (off[i] + (size_t)w) % batch_len[k];
            while (read(fds[i], sink, sizeof sink) > 0)
                ;
        }
    }
}

/* Issue 9, the shutdown hang: a pipe closed while nng's ipc transport was
 * between two steps of one transfer (the rest of a frame after its header,
 * the rest of a partial write) resubmitted the step on an aio the close had
 * already stopped; nothing ever completed it, nng's reaper waited for it in
 * rep0_pipe_stop and nng_close waited for the reaper, after "drained,
 * closing" (scripts/nng/close-during-transfer.patch).  Each round: requests
 * streaming on 12 connections (8 of them reading 8 MiB replies), SIGTERM,
 * and attnd must exit 0 within 5 s.  Bounded: the test fails at the first
 * hang, whose daemon the teardown SIGKILLs. */
static void test_close_during_transfer(void **state)
{
    /* the traffic never pauses, so each drain ends at its deadline */
    const char *extra[] = {"--engine",           "cpu", "--pool", "big:1:2:256:16:128:fp32",
                           "--drain-timeout-ms", "500", NULL};
    const int rounds = 12;
    (void)state;
    for (int r = 0; r < rounds; r++) {
        pid_t gen;
        int st = -1, exited = 0;
        double t0;
        assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
        gen = fork();
        assert_true(gen >= 0);
        if (gen == 0)
            stream_requests(g_d.sock, 12, 8);
        usleep(300000);
        kill(g_d.pid, SIGTERM);
        t0 = now_ms();
        while (now_ms() - t0 < 5000) {
            if (waitpid(g_d.pid, &st, WNOHANG) == g_d.pid) {
                exited = 1;
                g_d.pid = -1;
                break;
            }
            usleep(10000);
        }
        kill(gen, SIGKILL);
        waitpid(gen, NULL, 0);
        if (!exited)
            printf("round %d: attnd did not exit within 5 s of SIGTERM\n", r);
        assert_true(exited); /* the teardown SIGKILLs a daemon left running */
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(attn_daemon_cleanup(&g_d), 0);
    }
    printf("close during transfer: %d rounds, every SIGTERM exited 0\n", rounds);
}

/* Issue 9 item 5: a connection cap; connections beyond it are closed at once
 * and the ones within it keep being served. */
static void test_conn_cap(void **state)
{
    const char *extra[] = {"--engine", "cpu", "--max-conns", "4", NULL};
    int fds[4];
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    for (int i = 0; i < 4; i++) {
        fds[i] = sp_connect(g_d.sock);
        assert_true(fds[i] >= 0);
    }
    usleep(100000);
    assert_true(hello_ms(g_d.url, 500) < 0); /* a fifth connection */
    close(fds[0]);
    usleep(100000);
    assert_true(hello_ms(g_d.url, 1000) >= 0);
    for (int i = 1; i < 4; i++)
        close(fds[i]);
    stop_clean(&g_d);
}

/* Issue 9 item 5: 20 connections that declare a 60 MiB frame and send 1 KiB
 * are closed after --idle-timeout-ms, and what nng allocated for them goes. */
static void test_stalled_partial_frames(void **state)
{
    const char *extra[] = {"--engine", "cpu", "--idle-timeout-ms", "500", NULL};
    char kib[1024] = {0};
    int fds[20];
    long vm_before, vm_stalled, vm_after;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    vm_before = vm_size_mib(g_d.pid);
    for (int i = 0; i < 20; i++) {
        fds[i] = sp_connect(g_d.sock);
        assert_true(fds[i] >= 0);
        assert_int_equal(sp_frame_header(fds[i], 60u << 20, 1), 0);
        assert_true(write(fds[i], kib, sizeof kib) == (ssize_t)sizeof kib);
    }
    usleep(200000);
    vm_stalled = vm_size_mib(g_d.pid);
    for (int i = 0; i < 20; i++)
        assert_true(closed_by_peer(fds[i], 3000));
    usleep(200000);
    vm_after = vm_size_mib(g_d.pid);
    printf("virtual size: %ld MiB idle, %ld MiB with 20 stalled 60 MiB frames, %ld MiB after "
           "the idle timeout\n",
           vm_before, vm_stalled, vm_after);
    assert_true(vm_after < vm_stalled);
    for (int i = 0; i < 20; i++)
        close(fds[i]);
    assert_true(hello_ms(g_d.url, 1000) >= 0);
    stop_clean(&g_d);
}

/* Issue 9 item 3: a 75-byte kv_read naming one large page 8 times made a
 * reply of 8 pages; the reply-bytes cap refuses it, naming `pages`, before
 * anything is allocated, and a read within the cap still works. */
static void test_reply_cap(void **state)
{
    const char *extra[] = {"--engine",    "cpu",      "--pool", "big:1:2:256:16:128:fp32",
                           "--max-reply", "16777216", NULL};
    int32_t eight[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t two[2] = {0, 1};
    attn_request req;
    nng_socket s;
    char field[64];
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 5000), 0);
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0);
    kv_read_req(&req, eight);
    req.kv.num_pages = 8;
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_TOO_LARGE);
    assert_string_equal(field, "pages");
    kv_read_req(&req, two);
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    nng_close(s);
    stop_clean(&g_d);
}

/* Issue 9 item 11: capture files were created 0644, followed symlinks and
 * truncated their target.  Now 0600, never through a symlink, never over a
 * file that holds something (attnd refuses to start, the file unchanged). */
static void test_capture_file_rules(void **state)
{
    char dir[] = "/tmp/attnd-cap-XXXXXX", cap[128], victim[128], link[128];
    const char *extra[] = {"--engine", "cpu", "--capture", cap, NULL};
    struct stat sb;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(cap, sizeof cap, "%s/new.capture", dir);
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(stat(cap, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    stop_clean(&g_d);
    /* cap now holds a capture: a second daemon must not truncate it */
    assert_int_equal(stat(cap, &sb), 0);
    off_t size = sb.st_size;
    assert_true(size > 0);
    assert_int_not_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(stat(cap, &sb), 0);
    assert_int_equal(sb.st_size, size);
    /* a symlink to another file */
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(link, sizeof link, "%s/link.capture", dir);
    f = fopen(victim, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(symlink(victim, link), 0);
    snprintf(cap, sizeof cap, "%s", link);
    assert_int_not_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(stat(victim, &sb), 0);
    assert_int_equal(sb.st_size, 0);
    unlink(link);
    unlink(victim);
    snprintf(cap, sizeof cap, "%s/new.capture", dir);
    unlink(cap);
    rmdir(dir);
}

/* Issue 9 item 8: a pool named b"bad\xff" was created, and every later
 * stats reply broke strict clients.  Now refused naming `pool`, and stats
 * carries only valid UTF-8. */
static void test_non_utf8_refused(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    static const char *bad[] = {"bad\xff", "\xc0\xaf", "\xed\xa0\x80x", "ok\xe2\x82"};
    nng_socket s;
    attn_request req;
    attn_buf b;
    attn_reply rep;
    attn_error_detail e;
    char field[64];
    void *buf = NULL;
    size_t sz = 0;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 5000), 0);
    for (int i = 0; i < 4; i++) {
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_POOL_CREATE;
        snprintf(req.geom.name, sizeof req.geom.name, "%s", bad[i]);
        snprintf(req.pool, sizeof req.pool, "%s", bad[i]);
        req.geom.layers = 1;
        req.geom.num_pages = 4;
        req.geom.page_size = 16;
        req.geom.num_kv_heads = 1;
        req.geom.head_dim_qk = req.geom.head_dim_vo = 8;
        assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_RANGE);
        assert_string_equal(field, "pool");
    }
    /* a valid multi-byte name is still fine */
    snprintf(req.geom.name, sizeof req.geom.name, "k\xc3\xa4se");
    snprintf(req.pool, sizeof req.pool, "k\xc3\xa4se");
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_STATS;
    encode(&req, &b);
    assert_int_equal(nng_send(s, b.data, b.len, 0), 0);
    attn_buf_free(&b);
    assert_int_equal(nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC), 0);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_reply_decode(buf, sz, NULL, &rep, &e), 0);
    assert_int_equal(rep.stats.num_pools, 1);
    for (uint32_t i = 0; i < rep.stats.num_pools; i++)
        assert_true(attn_utf8_valid(rep.stats.pools[i].name, strlen(rep.stats.pools[i].name)));
    attn_reply_free(&rep);
    nng_free(buf, sz);
    nng_close(s);
    stop_clean(&g_d);
}

/* A loopback TCP port free right now. */
static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t n = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &n) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Issue 9 item 10: a tcp:// listener on a non-loopback address needs
 * --allow-remote; without it attnd exits 2 naming `listen`, before it binds.
 * (Only the refusal is exercised: nothing here listens beyond loopback.) */
static void test_tcp_nonloopback_refused(void **state)
{
    char cmd[1024], out[4096] = {0};
    FILE *p;
    size_t n;
    int st;
    (void)state;
    snprintf(cmd, sizeof cmd, "timeout 5 '%s' --listen tcp://0.0.0.0:%d --engine cpu 2>&1",
             getenv("ATTND"), free_port());
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    st = pclose(p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(out, "listen: tcp://0.0.0.0"));
    assert_non_null(strstr(out, "--allow-remote"));
}

/* Make a CA, a server certificate (127.0.0.1) and a client certificate in
 * dir with the openssl tool; 0 on success. */
static int make_certs(const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout ca.key -out ca.pem -days 2 -subj /CN=attnd-test-ca && "
             "for who in server client; do "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout $who.key -out $who.csr -subj /CN=127.0.0.1 && "
             "printf 'subjectAltName=DNS:127.0.0.1,IP:127.0.0.1\\n' > $who.ext && "
             "openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out $who.pem -days 2 -extfile $who.ext || exit 1; done",
             dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Issue 9 item 10: a tls+tcp:// listener requires a client certificate that
 * chains to --tls-ca; libattn and attnctl connect with the matching client
 * settings; a plain tcp client and a TLS client without a certificate get
 * nothing.  Loopback only. */
static void test_tls_client_certs(void **state)
{
    char dir[] = "/tmp/attnd-tls-XXXXXX", url[128], cert[160], key[160], ca[160], cmd[1200];
    char ccert[160], ckey[160], plain[128];
    const char *extra[] = {"--engine",  "cpu", "--listen", url, "--tls-cert", cert,
                           "--tls-key", key,   "--tls-ca", ca,  NULL};
    attn_client_tls ct;
    attn_client *c;
    attn_reply rep;
    nng_socket s;
    int port = free_port();
    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(make_certs(dir), 0);
    snprintf(url, sizeof url, "tls+tcp://127.0.0.1:%d", port);
    snprintf(plain, sizeof plain, "tcp://127.0.0.1:%d", port);
    snprintf(cert, sizeof cert, "%s/server.pem", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(ccert, sizeof ccert, "%s/client.pem", dir);
    snprintf(ckey, sizeof ckey, "%s/client.key", dir);
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    /* libattn with the client certificate */
    memset(&ct, 0, sizeof ct);
    ct.cert = ccert;
    ct.key = ckey;
    ct.ca = ca;
    ct.server_name = "127.0.0.1";
    assert_int_equal(attn_client_open_tls(&c, url, &ct), 0);
    attn_client_set_timeout(c, 5000);
    memset(&rep, 0, sizeof rep);
    if (attn_hello(c, &rep) != 0)
        printf("hello over TLS: %s\n", rep.error.message);
    assert_true(rep.ok);
    assert_true(rep.server.version[0] != '\0');
    attn_reply_free(&rep);
    attn_client_close(c);
    /* attnctl with the same files from the environment */
    snprintf(cmd, sizeof cmd,
             "ATTN_TLS_CERT='%s' ATTN_TLS_KEY='%s' ATTN_TLS_CA='%s' timeout 10 '%s' hello "
             "--url '%s' >/dev/null",
             ccert, ckey, ca, getenv("ATTNCTL") ? getenv("ATTNCTL") : "build/attnctl", url);
    assert_int_equal(system(cmd), 0);
    /* plain tcp: no answer */
    assert_true(hello_ms(plain, 500) < 0);
    /* TLS without a client certificate: no answer */
    {
        nng_tls_config *cfg;
        nng_dialer d;
        attn_request req;
        assert_int_equal(nng_req0_open(&s), 0);
        nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 500);
        nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 500);
        assert_int_equal(nng_dialer_create(&d, s, url), 0);
        assert_int_equal(nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT), 0);
        assert_int_equal(nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE), 0);
        assert_int_equal(nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg), 0);
        nng_tls_config_free(cfg);
        nng_dialer_start(d, NNG_FLAG_NONBLOCK);
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_HELLO;
        assert_int_not_equal(roundtrip(s, &req), 0);
        nng_close(s);
    }
    stop_clean(&g_d);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Issue 9 item 12: stats listed 32 of up to 64 pools; kv_write with a page
 * named twice was accepted. */
static void test_stats_pools_and_kv_duplicates(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    nng_socket s;
    attn_request req;
    attn_buf b;
    attn_reply rep;
    attn_error_detail e;
    char field[64];
    void *buf = NULL;
    size_t sz = 0;
    int32_t pages[3] = {1, 2, 1};
    float kv[3 * 16 * 8];
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 5000), 0);
    for (int i = 0; i < 40; i++) {
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_POOL_CREATE;
        snprintf(req.geom.name, sizeof req.geom.name, "p%d", i);
        snprintf(req.pool, sizeof req.pool, "p%d", i);
        req.geom.layers = 1;
        req.geom.num_pages = 4;
        req.geom.page_size = 16;
        req.geom.num_kv_heads = 1;
        req.geom.head_dim_qk = req.geom.head_dim_vo = 8;
        assert_int_equal(roundtrip_field(s, &req, field), 0);
    }
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_STATS;
    encode(&req, &b);
    assert_int_equal(nng_send(s, b.data, b.len, 0), 0);
    attn_buf_free(&b);
    assert_int_equal(nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC), 0);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_reply_decode(buf, sz, NULL, &rep, &e), 0);
    assert_int_equal(rep.stats.num_pools, 40);
    attn_reply_free(&rep);
    nng_free(buf, sz);
    memset(kv, 0, sizeof kv);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_KV_WRITE;
    snprintf(req.kv.pool, sizeof req.kv.pool, "p0");
    req.kv.pages = pages;
    req.kv.num_pages = 3;
    req.kv.k.data = req.kv.v.data = kv;
    req.kv.k.len = req.kv.v.len = sizeof kv;
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_RANGE);
    assert_string_equal(field, "pages[2]");
    pages[2] = 3;
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    nng_close(s);
    stop_clean(&g_d);
}

/* Issue 9 item 12: pool_create named its fields two ways (pool.num_pages
 * from one validator, num_pages from the other) and the two disagreed on the
 * head-dim limit (4096 against 1024). */
static void test_pool_create_fields(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    nng_socket s;
    attn_request req;
    char field[64];
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 5000), 0);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_POOL_CREATE;
    snprintf(req.geom.name, sizeof req.geom.name, "f");
    snprintf(req.pool, sizeof req.pool, "f");
    req.geom.layers = 1;
    req.geom.num_pages = 4;
    req.geom.page_size = 16;
    req.geom.num_kv_heads = 1;
    req.geom.head_dim_qk = req.geom.head_dim_vo = ATTN_MAX_HEAD_DIM + 1;
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_RANGE);
    assert_string_equal(field, "head_dim_qk");
    req.geom.head_dim_qk = req.geom.head_dim_vo = 5000; /* over the other validator's 4096 */
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_RANGE);
    assert_string_equal(field, "head_dim_qk");
    req.geom.head_dim_qk = req.geom.head_dim_vo = 8;
    req.geom.num_kv_heads = 0;
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_RANGE);
    assert_string_equal(field, "num_kv_heads");
    req.geom.num_kv_heads = 1;
    req.geom.head_dim_qk = req.geom.head_dim_vo = ATTN_MAX_HEAD_DIM;
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    nng_close(s);
    stop_clean(&g_d);
}

/* Wait up to ms for the daemon to exit; its status, or -1 when it did not. */
static int wait_exit(attn_daemon_proc *d, int ms)
{
    int st;
    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = -1;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    return -1;
}

/* Issue 9 item 6: requests refused with E_SHUTTING_DOWN reset the quiet
 * period; a hello every 50 ms kept attnd from exiting. */
static void test_shutdown_not_postponed(void **state)
{
    const char *extra[] = {"--engine", "cpu", NULL};
    nng_socket s;
    attn_request req;
    int st = -1, refused = 0;
    double t0;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 500), 0);
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_HELLO;
    assert_int_equal(roundtrip(s, &req), 0);
    kill(g_d.pid, SIGTERM);
    t0 = now_ms();
    while (now_ms() - t0 < 5000) {
        int rc = roundtrip(s, &req);
        refused += rc == ATTN_E_SHUTTING_DOWN;
        if ((st = wait_exit(&g_d, 50)) >= 0)
            break;
    }
    printf("exit %d %.0f ms after SIGTERM under a hello every 50 ms (%d refused)\n", st,
           now_ms() - t0, refused);
    nng_close(s);
    assert_int_equal(st, 0);
    assert_true(now_ms() - t0 < 2000);
    assert_int_equal(attn_daemon_cleanup(&g_d), 0);
}

/* Issue 9 item 6: the drain has a hard deadline: replies a client never
 * takes (send timeout set longer than the deadline) do not hold the exit. */
static void test_drain_deadline(void **state)
{
    const char *extra[] = {"--engine",
                           "cpu",
                           "--pool",
                           "big:1:2:256:16:128:fp32",
                           "--send-timeout-ms",
                           "60000",
                           "--conn-inflight",
                           "64",
                           "--drain-timeout-ms",
                           "500",
                           NULL};
    int32_t pages[2] = {0, 1};
    attn_request req;
    int fd, st;
    double t0;
    (void)state;
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    fd = sp_connect(g_d.sock);
    assert_true(fd >= 0);
    kv_read_req(&req, pages);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(sp_send(fd, &req, i + 1), 0);
    usleep(300000);
    kill(g_d.pid, SIGTERM);
    t0 = now_ms();
    st = wait_exit(&g_d, 5000);
    printf("exit %d %.0f ms after SIGTERM with 8 untaken 8 MiB replies (deadline 500 ms)\n", st,
           now_ms() - t0);
    close(fd);
    assert_int_equal(st, 0);
    assert_int_equal(attn_daemon_cleanup(&g_d), 0);
}

/* Write `text` to path. */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Issue 9 item 7: SIGHUP killed attnd (default action: no drain, socket
 * file left).  Now it re-reads the configuration and applies the limits that
 * can change live (here --max-reply); a broken file changes nothing; attnd
 * keeps serving and still stops cleanly. */
static void test_sighup_reload(void **state)
{
    char dir[] = "/tmp/attnd-hup-XXXXXX", conf[128];
    const char *extra[] = {"--engine", "cpu", "--pool", "big:1:2:256:16:128:fp32",
                           "--config", conf,  NULL};
    int32_t two[2] = {0, 1};
    attn_request req;
    nng_socket s;
    char field[64];
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(conf, sizeof conf, "%s/attnd.json", dir);
    write_file(conf, "{\"max_reply\": 1048576}\n");
    assert_int_equal(attn_daemon_start(&g_d, NULL, extra), 0);
    assert_int_equal(dial(&s, g_d.url, 5000), 0);
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0);
    kv_read_req(&req, two);
    assert_int_equal(roundtrip_field(s, &req, field), ATTN_E_TOO_LARGE);
    write_file(conf, "{\"max_reply\": 67108864}\n");
    assert_int_equal(kill(g_d.pid, SIGHUP), 0);
    usleep(300000);
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    write_file(conf, "{\"max_reply\": \"many\"}\n"); /* refused: nothing changes */
    assert_int_equal(kill(g_d.pid, SIGHUP), 0);
    usleep(300000);
    assert_int_equal(roundtrip_field(s, &req, field), 0);
    nng_close(s);
    stop_clean(&g_d);
    unlink(conf);
    rmdir(dir);
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
        HTEST(test_stuck_reader),
        HTEST(test_close_during_transfer),
        HTEST(test_conn_cap),
        HTEST(test_stalled_partial_frames),
        HTEST(test_shutdown_not_postponed),
        HTEST(test_drain_deadline),
        HTEST(test_sighup_reload),
        HTEST(test_reply_cap),
        HTEST(test_capture_file_rules),
        HTEST(test_non_utf8_refused),
        HTEST(test_tcp_nonloopback_refused),
        HTEST(test_tls_client_certs),
        HTEST(test_stats_pools_and_kv_duplicates),
        HTEST(test_pool_create_fields),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_hardening: ATTND is not set (run through make integration)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
