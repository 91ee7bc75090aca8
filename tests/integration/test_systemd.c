/* attnd under a systemd-like harness (issue 9 item 16): started as the
 * shipped unit starts it (--config with the shipped default configuration;
 * only --listen is moved to a temporary directory), with $NOTIFY_SOCKET a
 * datagram socket of the test and $WATCHDOG_USEC set, attnd says READY=1
 * once listening, WATCHDOG=1 at least every half period, STOPPING=1 on
 * SIGTERM, and exits 0 with its socket removed.  The unit itself is
 * Type=notify with WatchdogSec=, and names the configuration `make install`
 * installs.  Needs $ATTND and $ATTN_SRCDIR (make integration).
 */
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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/lib/daemon_proc.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* One datagram within `ms`, as a string in buf; 0 when none came. */
static int recv_within(int fd, double ms, char *buf, size_t n)
{
    struct pollfd pf = {fd, POLLIN, 0};
    ssize_t r;
    if (poll(&pf, 1, (int)ms) != 1)
        return 0;
    r = recv(fd, buf, n - 1, 0);
    if (r <= 0)
        return 0;
    buf[r] = '\0';
    return 1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1 << 16);
    assert_non_null(f);
    assert_true(fread(buf, 1, (1 << 16) - 1, f) > 0);
    fclose(f);
    return buf;
}

static void test_unit_as_shipped(void **state)
{
    char path[1024];
    char *unit, *sysusers, *tmpfiles;
    (void)state;
    snprintf(path, sizeof path, "%s/systemd/attnd.service.in", getenv("ATTN_SRCDIR"));
    unit = slurp(path);
    assert_non_null(strstr(unit, "\nType=notify\n"));
    assert_non_null(strstr(unit, "\nWatchdogSec="));
    assert_non_null(
        strstr(unit, "\nExecStart=@BINDIR@/attnd --config @SYSCONFDIR@/attnd/attnd.json"));
    assert_non_null(strstr(unit, "\nUser=attnd\n"));
    assert_non_null(strstr(unit, "\nRuntimeDirectory=attnd\n"));
    snprintf(path, sizeof path, "%s/systemd/attnd.sysusers", getenv("ATTN_SRCDIR"));
    sysusers = slurp(path);
    assert_non_null(strstr(sysusers, "\nu attnd "));
    snprintf(path, sizeof path, "%s/systemd/attnd.tmpfiles", getenv("ATTN_SRCDIR"));
    tmpfiles = slurp(path);
    assert_non_null(strstr(tmpfiles, "\nd /run/attnd 0750 attnd attnd"));
    free(unit);
    free(sysusers);
    free(tmpfiles);
}

static void test_notify_harness(void **state)
{
    char dir[] = "/tmp/attnd-sd-XXXXXX", cfg[1024], buf[512];
    struct sockaddr_un sa;
    attn_daemon_proc d;
    int fd, status, pings = 0, ready = 0, stopping = 0, pings_after_stop = 0;
    double t0, first_ping = 0, last_ping = 0, max_gap = 0;
    const char *extra[] = {"--config", cfg, "--engine", "cpu", NULL};
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(cfg, sizeof cfg, "%s/config/attnd.json", getenv("ATTN_SRCDIR"));
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify", dir);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    setenv("WATCHDOG_USEC", "200000", 1); /* 200 ms: a ping at least every 100 ms */
    /* --config first, then daemon_proc's --listen: flags after the file override it */
    assert_int_equal(attn_daemon_start(&d, NULL, extra), 0);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    assert_true(recv_within(fd, 2000, buf, sizeof buf));
    assert_int_equal(strncmp(buf, "READY=1\n", 8), 0); /* the first message */
    ready = 1;
    t0 = now_ms();
    while (now_ms() - t0 < 1000) {
        if (!recv_within(fd, 300, buf, sizeof buf))
            break;
        if (strcmp(buf, "WATCHDOG=1") == 0) {
            double t = now_ms();
            if (pings == 0)
                first_ping = t;
            else if (t - last_ping > max_gap)
                max_gap = t - last_ping;
            last_ping = t;
            pings++;
        }
    }
    assert_true(ready);
    assert_true(pings >= 6);
    assert_true(first_ping - t0 < 200);
    assert_true(max_gap < 200); /* under the 200 ms timeout */
    kill(d.pid, SIGTERM);
    t0 = now_ms();
    while (now_ms() - t0 < 2000 && recv_within(fd, 500, buf, sizeof buf)) {
        if (strncmp(buf, "STOPPING=1", 10) == 0)
            stopping = 1;
        else if (stopping && strcmp(buf, "WATCHDOG=1") == 0)
            pings_after_stop++;
    }
    assert_true(stopping);
    assert_int_equal(attn_daemon_stop(&d, SIGTERM, &status), 0);
    assert_int_equal(status, 0);
    assert_int_equal(attn_daemon_cleanup(&d), 0); /* the socket was removed */
    close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_as_shipped),
        cmocka_unit_test(test_notify_harness),
    };
    if (getenv("ATTND") == NULL || getenv("ATTN_SRCDIR") == NULL) {
        printf("[  SKIPPED ] test_systemd: ATTND/ATTN_SRCDIR not set (run through make "
               "integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
