/* systemd's watchdog as attnd drives it (issue 9 item 16): with
 * $WATCHDOG_USEC set, WATCHDOG=1 comes from the loop every half period while
 * the socket answers the loop's self-probe; when serving wedges (here: the
 * only context blocked in the handler) the pings stop, so systemd would
 * restart attnd, and they resume once it answers again.  $WATCHDOG_PID
 * naming another process turns the watchdog off.
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

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "daemon/loop.h"
#include "daemon/notify.h"

typedef struct wedge {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int wedged;
    int calls;
} wedge;

/* Echo handler that blocks while the test holds the wedge. */
static int wedge_handler(void *arg, uint32_t conn, const void *req, size_t len, void **reply,
                         size_t *reply_len)
{
    (void)conn;
    wedge *w = arg;
    pthread_mutex_lock(&w->lock);
    w->calls++;
    while (w->wedged)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    *reply = malloc(len + 1);
    memcpy(*reply, req, len);
    *reply_len = len;
    return 0;
}

static void set_wedged(wedge *w, int on)
{
    pthread_mutex_lock(&w->lock);
    w->wedged = on;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

typedef struct notify_sink {
    char dir[40];
    char path[64];
    int fd;
} notify_sink;

static void sink_open(notify_sink *s)
{
    struct sockaddr_un sa;
    snprintf(s->dir, sizeof s->dir, "/tmp/attnd-wd-XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->path, sizeof s->path, "%s/notify", s->dir);
    s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(s->fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->path);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setenv("NOTIFY_SOCKET", s->path, 1);
}

static void sink_close(notify_sink *s)
{
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(s->fd);
    unlink(s->path);
    rmdir(s->dir);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Read datagrams for `ms`; count those equal to `what` (and set *saw_other
 * when one starting with `other` arrived). */
static int count_for(notify_sink *s, double ms, const char *what, const char *other, int *saw_other)
{
    double end = now_ms() + ms;
    int n = 0;
    for (;;) {
        double left = end - now_ms();
        struct pollfd pf = {s->fd, POLLIN, 0};
        char buf[512];
        ssize_t r;
        if (left <= 0)
            break;
        if (poll(&pf, 1, (int)left + 1) != 1)
            continue;
        r = recv(s->fd, buf, sizeof buf - 1, 0);
        if (r <= 0)
            continue;
        buf[r] = '\0';
        if (strcmp(buf, what) == 0)
            n++;
        else if (other != NULL && strncmp(buf, other, strlen(other)) == 0 && saw_other != NULL)
            *saw_other = 1;
    }
    return n;
}

static void *loop_thread(void *arg)
{
    return (void *)(intptr_t)attnd_loop_run(arg);
}

static const char probe_bytes[] = "probe";

static attnd_loop *start_loop(wedge *w, const char *url, int with_probe, pthread_t *th)
{
    attnd_loop_opts o;
    attn_error_detail e;
    attnd_loop *l;
    memset(&o, 0, sizeof o);
    o.url = url;
    o.max_msg = 1 << 16;
    o.contexts = 1; /* one context: a blocked handler blocks serving */
    o.workers = 1;
    o.ready_fd = -1;
    o.handler = wedge_handler;
    o.arg = w;
    if (with_probe) {
        o.probe_frame = probe_bytes;
        o.probe_len = sizeof probe_bytes;
    }
    assert_int_equal(attnd_loop_create(&l, &o, &e), 0);
    assert_int_equal(pthread_create(th, NULL, loop_thread, l), 0);
    return l;
}

static void stop_loop(attnd_loop *l, pthread_t th, notify_sink *s)
{
    void *ret;
    int stopping = 0;
    attnd_loop_stop(l);
    count_for(s, 300, "", "STOPPING=1", &stopping);
    assert_true(stopping);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_int_equal((intptr_t)ret, 0);
    assert_int_equal(attnd_loop_destroy(l), 0);
}

static void test_watchdog_env(void **state)
{
    char pid[32];
    (void)state;
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    assert_int_equal(attnd_notify_watchdog_usec(), 0);
    setenv("WATCHDOG_USEC", "30000000", 1);
    assert_int_equal(attnd_notify_watchdog_usec(), 30000000u);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    assert_int_equal(attnd_notify_watchdog_usec(), 30000000u);
    setenv("WATCHDOG_PID", "1", 1); /* for another process */
    assert_int_equal(attnd_notify_watchdog_usec(), 0);
    unsetenv("WATCHDOG_PID");
    setenv("WATCHDOG_USEC", "12x", 1);
    assert_int_equal(attnd_notify_watchdog_usec(), 0);
    setenv("WATCHDOG_USEC", "-5", 1);
    assert_int_equal(attnd_notify_watchdog_usec(), 0);
    unsetenv("WATCHDOG_USEC");
}

static void test_watchdog_stops_when_wedged(void **state)
{
    wedge w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    notify_sink s;
    pthread_t th;
    attnd_loop *l;
    int ready = 0, pings;
    (void)state;
    sink_open(&s);
    setenv("WATCHDOG_USEC", "100000", 1); /* 100 ms: a ping every 50 ms */
    l = start_loop(&w, "inproc://attnd-watchdog-wedge", 1, &th);
    pings = count_for(&s, 500, "WATCHDOG=1", "READY=1", &ready);
    assert_true(ready);
    assert_true(pings >= 5);
    assert_true(w.calls >= 3); /* the probes reached the handler */

    set_wedged(&w, 1);
    count_for(&s, 150, "WATCHDOG=1", NULL, NULL); /* the probe in flight lands */
    pings = count_for(&s, 500, "WATCHDOG=1", NULL, NULL);
    assert_int_equal(pings, 0);

    set_wedged(&w, 0);
    pings = count_for(&s, 600, "WATCHDOG=1", NULL, NULL);
    assert_true(pings >= 3);
    stop_loop(l, th, &s);
    sink_close(&s);
}

static void test_watchdog_without_probe(void **state)
{
    wedge w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    notify_sink s;
    pthread_t th;
    attnd_loop *l;
    (void)state;
    sink_open(&s);
    setenv("WATCHDOG_USEC", "100000", 1);
    l = start_loop(&w, "inproc://attnd-watchdog-plain", 0, &th);
    assert_true(count_for(&s, 400, "WATCHDOG=1", NULL, NULL) >= 4);
    assert_int_equal(w.calls, 0);
    stop_loop(l, th, &s);
    sink_close(&s);
}

static void test_watchdog_other_pid(void **state)
{
    wedge w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    notify_sink s;
    pthread_t th;
    attnd_loop *l;
    int ready = 0;
    (void)state;
    sink_open(&s);
    setenv("WATCHDOG_USEC", "100000", 1);
    setenv("WATCHDOG_PID", "1", 1);
    l = start_loop(&w, "inproc://attnd-watchdog-pid", 1, &th);
    assert_int_equal(count_for(&s, 300, "WATCHDOG=1", "READY=1", &ready), 0);
    assert_true(ready);
    stop_loop(l, th, &s);
    sink_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watchdog_env),
        cmocka_unit_test(test_watchdog_stops_when_wedged),
        cmocka_unit_test(test_watchdog_without_probe),
        cmocka_unit_test(test_watchdog_other_pid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
