/* daemon/oversize and the nng patch under it (scripts/nng/rcv-max-rejects.patch)
 * in-process: a REP listener with a 4096-byte receive limit, a peer
 * declaring a larger frame; at the pipe's removal the frame's declared size
 * is readable, attnd_oversize_note_removed counts it once and logs it with
 * the peer; the listener's statistics count it in rcv_max_rejects, not in
 * "other"; a connection closed for any other reason is not counted.
 */
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/oversize.h"

#define LIMIT 4096
/* what nng puts on the wire for a REQ message: its 4-byte request id, then the body */
#define REQ_HEADER_BYTES 4

typedef struct fixture {
    nng_socket rep;
    nng_listener lst;
    char dir[64];
    char url[128];
    char log_path[128];
    int log_fd;
    attnd_log *log;
    attnd_metrics m;
    _Atomic int removed;   /* REM_POST callbacks seen */
    _Atomic int oversized; /* ... for which attnd_oversize_note_removed said 1 */
} fixture;

static void on_removed(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    fixture *f = arg;
    (void)ev;
    if (attnd_oversize_note_removed(p, NULL, LIMIT, &f->m, f->log))
        atomic_fetch_add(&f->oversized, 1);
    atomic_fetch_add(&f->removed, 1);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    attnd_log_opts o;
    snprintf(f->dir, sizeof f->dir, "/tmp/attnd-oversize-XXXXXX");
    if (f == NULL || mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->url, sizeof f->url, "ipc://%s/s.sock", f->dir);
    snprintf(f->log_path, sizeof f->log_path, "%s/log.txt", f->dir);
    attnd_log_opts_default(&o);
    o.format = ATTND_LOG_FORMAT_PLAIN;
    o.fd = f->log_fd = open(f->log_path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (o.fd < 0 || (f->log = attnd_log_create(&o)) == NULL)
        return -1;
    if (nng_rep0_open(&f->rep) != 0 ||
        nng_pipe_notify(f->rep, NNG_PIPE_EV_REM_POST, on_removed, f) != 0 ||
        nng_listener_create(&f->lst, f->rep, f->url) != 0 ||
        nng_listener_set_size(f->lst, NNG_OPT_RECVMAXSZ, LIMIT) != 0 ||
        nng_listener_start(f->lst, 0) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nng_close(f->rep);
    attnd_log_destroy(f->log);
    close(f->log_fd);
    unlink(f->log_path);
    snprintf(f->url, sizeof f->url, "%s/s.sock", f->dir);
    unlink(f->url);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* One REQ connection sends `body` bytes, within the limit; the REP side
 * takes the frame (so that its pipe reads on and sees the close), the peer
 * closes; waits (up to 5 s) until the listener's side of it is gone. */
static void send_small_and_close(fixture *f, size_t body)
{
    nng_socket s;
    char *buf = calloc(1, body);
    void *msg = NULL;
    size_t len = 0;
    int before = atomic_load(&f->removed);
    assert_non_null(buf);
    assert_true(body + REQ_HEADER_BYTES <= LIMIT);
    assert_int_equal(nng_req0_open(&s), 0);
    assert_int_equal(nng_dial(s, f->url, NULL, 0), 0);
    assert_int_equal(nng_send(s, buf, body, 0), 0);
    nng_socket_set_ms(f->rep, NNG_OPT_RECVTIMEO, 5000);
    assert_int_equal(nng_recv(f->rep, &msg, &len, NNG_FLAG_ALLOC), 0);
    nng_free(msg, len);
    nng_close(s);
    free(buf);
    for (int i = 0; i < 500 && atomic_load(&f->removed) == before; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&f->removed), before + 1);
}

/* A peer speaking the SP-over-ipc wire itself (an nng REQ socket would
 * redial after the refusal, and that pipe's close counts in "other"):
 * the handshake as REQ, then the 9-byte header of a `declared`-byte frame;
 * waits for nng to close the connection and for the pipe's removal. */
static void send_raw_header(fixture *f, uint64_t declared)
{
    static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 0x30 /* REQ */, 0, 0};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tmo = {.tv_sec = 5};
    uint8_t head[9] = {1 /* a message */}, reply[8];
    int before = atomic_load(&f->removed);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s.sock", f->dir);
    for (int i = 0; i < 8; i++)
        head[1 + i] = (uint8_t)(declared >> (56 - 8 * i));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(write(fd, hello, sizeof hello), (ssize_t)sizeof hello);
    assert_int_equal(read(fd, reply, sizeof reply), (ssize_t)sizeof reply);
    assert_int_equal(write(fd, head, sizeof head), (ssize_t)sizeof head);
    assert_int_equal(read(fd, reply, sizeof reply), 0); /* closed by nng, unanswered */
    close(fd);
    for (int i = 0; i < 500 && atomic_load(&f->removed) == before; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&f->removed), before + 1);
}

/* The value of the listener's statistic `name`. */
static uint64_t listener_stat(fixture *f, const char *name)
{
    nng_stat *all = NULL, *scope, *st;
    uint64_t v;
    assert_int_equal(nng_stats_get(&all), 0);
    scope = nng_stat_find_listener(all, f->lst);
    assert_non_null(scope);
    st = nng_stat_find(scope, name);
    if (st == NULL)
        fprintf(stderr, "the listener has no statistic %s\n", name);
    assert_non_null(st);
    v = nng_stat_value(st);
    nng_stats_free(all);
    return v;
}

static char *read_log(fixture *f)
{
    FILE *in = fopen(f->log_path, "rb");
    char *buf = calloc(1, 1 << 16);
    assert_non_null(in);
    assert_non_null(buf);
    fread(buf, 1, (1 << 16) - 1, in);
    fclose(in);
    return buf;
}

static void test_oversized_frame_counted_once(void **state)
{
    fixture *f = *state;
    char want[160];
    char *log;
    if (!attnd_oversize_observable())
        fail_msg("the linked nng %d.%d.%d does not report oversized frames", NNG_MAJOR_VERSION,
                 NNG_MINOR_VERSION, NNG_PATCH_VERSION);
    send_raw_header(f, 2 * LIMIT);
    assert_int_equal(atomic_load(&f->oversized), 1);
    assert_int_equal(atomic_load(&f->m.frames_oversized), 1);
    assert_int_equal(listener_stat(f, "rcv_max_rejects"), 1);
    assert_int_equal(listener_stat(f, "other"), 0);
    log = read_log(f);
    assert_non_null(strstr(log, " warn connection "));
    snprintf(want, sizeof want, "closed: frame of %d bytes over --max-msg %d, peer pid %d uid %u\n",
             2 * LIMIT, LIMIT, (int)getpid(), (unsigned)getuid());
    if (strstr(log, want) == NULL)
        fprintf(stderr, "log: %s\nwanted: %s", log, want);
    assert_non_null(strstr(log, want));
    free(log);
}

static void test_other_close_not_counted(void **state)
{
    fixture *f = *state;
    send_small_and_close(f, LIMIT / 2); /* within the limit; the peer closes it */
    assert_int_equal(atomic_load(&f->oversized), 0);
    assert_int_equal(atomic_load(&f->m.frames_oversized), 0);
    if (attnd_oversize_observable())
        assert_int_equal(listener_stat(f, "rcv_max_rejects"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_oversized_frame_counted_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_close_not_counted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
