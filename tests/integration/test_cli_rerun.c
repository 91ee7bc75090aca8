/* attnctl re-runnable on one daemon (issue 9 item 18): a second `run
 * mixed.json` stops at E_POOL_EXISTS with exit 1 instead of carrying on, and
 * --reuse / --replace make it succeed; `replay` renames its pools per
 * invocation, so a second replay verifies too, and drops them afterwards;
 * --keep-names keeps the recorded names and stops at the collision; `bench
 * --op decode` drops its pool (also on Ctrl-C), so a later `--batch 64`
 * works; progress goes to stderr only when it is a terminal, stdout stays
 * machine-readable.  Needs $ATTND and $ATTNCTL (make integration).
 */
#include <fcntl.h>
#include <jansson.h>
#include <pty.h>
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

#include "tests/lib/daemon_proc.h"

static attn_daemon_proc g_d;

static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    int st;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    char *b;
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return b;
}

/* The pools the daemon holds, as `attnctl stats` lists them. */
static size_t pool_count(void)
{
    char out[] = "/tmp/attnd-cli-stats-XXXXXX";
    json_t *st;
    size_t n;
    close(mkstemp(out));
    assert_int_equal(sh("%s stats --url %s --compact > %s", getenv("ATTNCTL"), g_d.url, out), 0);
    st = json_load_file(out, 0, NULL);
    assert_non_null(st);
    assert_true(json_is_array(json_object_get(st, "pools")));
    n = json_array_size(json_object_get(st, "pools"));
    json_decref(st);
    unlink(out);
    return n;
}

static int setup(void **state)
{
    const char *extra[] = {"--engine", "cpu", "--threads", "1", NULL};
    (void)state;
    if (getenv("ATTND") == NULL || getenv("ATTNCTL") == NULL)
        return -1;
    return attn_daemon_start(&g_d, NULL, extra);
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    if (attn_daemon_stop(&g_d, 0, &st) != 0 || st != 0)
        return -1;
    attn_daemon_cleanup(&g_d);
    return 0;
}

static void test_run_twice(void **state)
{
    const char *ctl = getenv("ATTNCTL"), *src = getenv("ATTN_SRCDIR");
    char out[] = "/tmp/attnd-cli-run-XXXXXX", err[] = "/tmp/attnd-cli-err-XXXXXX";
    char *text;
    json_t *replies;
    (void)state;
    if (src == NULL)
        src = ".";
    close(mkstemp(out));
    close(mkstemp(err));
    assert_int_equal(
        sh("%s run %s/examples/mixed.json --url %s --compact > %s", ctl, src, g_d.url, out), 0);
    /* again: the pool exists; the run stops there, exit 1, stdout still one JSON array */
    assert_int_equal(sh("%s run %s/examples/mixed.json --url %s --compact > %s 2> %s", ctl, src,
                        g_d.url, out, err),
                     1);
    replies = json_load_file(out, 0, NULL);
    assert_non_null(replies);
    assert_int_equal(json_array_size(replies), 1); /* nothing sent after the failure */
    assert_false(json_is_true(json_object_get(json_array_get(replies, 0), "ok")));
    json_decref(replies);
    text = slurp(err);
    assert_non_null(strstr(text, "E_POOL_EXISTS"));
    assert_non_null(strstr(text, "--reuse"));
    free(text);
    /* --reuse keeps the pool of the same geometry, --replace drops it first */
    assert_int_equal(sh("%s run %s/examples/mixed.json --url %s --compact --reuse > %s 2>/dev/null",
                        ctl, src, g_d.url, out),
                     0);
    replies = json_load_file(out, 0, NULL);
    assert_non_null(replies);
    assert_true(json_array_size(replies) > 1);
    json_decref(replies);
    assert_int_equal(sh("%s run %s/examples/mixed.json --url %s --compact --replace > %s", ctl, src,
                        g_d.url, out),
                     0);
    /* --keep-going sends the rest but still fails */
    assert_int_equal(sh("%s run %s/examples/mixed.json --url %s --compact --keep-going > %s "
                        "2>/dev/null",
                        ctl, src, g_d.url, out),
                     1);
    replies = json_load_file(out, 0, NULL);
    assert_non_null(replies);
    assert_true(json_array_size(replies) > 1);
    json_decref(replies);
    assert_int_equal(sh("%s pool drop demo --url %s > /dev/null", ctl, g_d.url), 0);
    assert_int_equal(pool_count(), 0);
    unlink(out);
    unlink(err);
}

static void test_replay_twice(void **state)
{
    const char *ctl = getenv("ATTNCTL");
    char cap[] = "/tmp/attnd-cli-cap-XXXXXX";
    (void)state;
    close(mkstemp(cap));
    assert_int_equal(
        sh("%s gen --out %s --kind mixed --seed 4 --requests 3 --steps 2 --pool rr 2>/dev/null",
           ctl, cap),
        0);
    assert_int_equal(
        sh("%s replay %s --url %s --verify --quiet >/dev/null 2>&1", ctl, cap, g_d.url), 0);
    assert_int_equal(
        sh("%s replay %s --url %s --verify --quiet >/dev/null 2>&1", ctl, cap, g_d.url), 0);
    assert_int_equal(pool_count(), 0); /* each replay dropped what it created */
    /* the recorded names: the first creates "rr" and leaves it, the second stops at it */
    assert_int_equal(sh("%s replay %s --url %s --verify --quiet --keep-names >/dev/null 2>&1", ctl,
                        cap, g_d.url),
                     0);
    assert_int_equal(pool_count(), 1);
    assert_int_equal(sh("%s replay %s --url %s --verify --quiet --keep-names >/dev/null 2>&1", ctl,
                        cap, g_d.url),
                     1);
    assert_int_equal(
        sh("%s replay %s --url %s --verify --quiet --replace >/dev/null 2>&1", ctl, cap, g_d.url),
        0);
    assert_int_equal(sh("%s pool drop rr --url %s > /dev/null", ctl, g_d.url), 0);
    assert_int_equal(pool_count(), 0);
    unlink(cap);
}

#define BENCH_SHAPE "--cache-len 64 --qo-heads 4 --kv-heads 2 --head-dim 16"

static void test_bench_drops_its_pool(void **state)
{
    const char *ctl = getenv("ATTNCTL");
    char out[] = "/tmp/attnd-cli-bench-XXXXXX";
    char cmd[1024];
    json_t *res;
    pid_t pid;
    int st = -1, seen = 0;
    (void)state;
    close(mkstemp(out));
    assert_int_equal(sh("%s bench --url %s --op decode --batch 4 " BENCH_SHAPE
                        " --clients 2 --requests 10 --json > %s",
                        ctl, g_d.url, out),
                     0);
    assert_int_equal(pool_count(), 0);
    /* a different batch on the same daemon: its own pool, not the last run's */
    assert_int_equal(sh("%s bench --url %s --op decode --batch 64 " BENCH_SHAPE
                        " --clients 2 --requests 10 --json > %s",
                        ctl, g_d.url, out),
                     0);
    res = json_load_file(out, 0, NULL);
    assert_non_null(res);
    assert_int_equal(json_integer_value(json_object_get(res, "errors")), 0);
    assert_int_equal(json_integer_value(json_object_get(res, "requests")), 20);
    json_decref(res);
    assert_int_equal(pool_count(), 0);
    /* Ctrl-C part way: exit 130 and the pool is gone */
    snprintf(cmd, sizeof cmd,
             "exec %s bench --url %s --op decode --batch 8 " BENCH_SHAPE
             " --clients 1 --requests 1000000 --json >/dev/null 2>&1",
             ctl, g_d.url);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !seen; i++) {
        seen = pool_count() == 1;
        if (!seen)
            usleep(10000);
    }
    assert_true(seen);
    usleep(100000);
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 130);
    assert_int_equal(pool_count(), 0);
    unlink(out);
}

/* Run `cmd` with stderr on a pseudo-terminal and stdout into `out`; returns
 * what the terminal showed (malloc'ed) and the exit status in *status. */
static char *on_tty(const char *cmd, const char *out, int *status)
{
    int master = -1, st = -1;
    size_t len = 0, cap = 1 << 16;
    char *seen = calloc(1, cap);
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_TRUNC);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
            _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (;;) {
        ssize_t n = read(master, seen + len, cap - len - 1);
        if (n <= 0)
            break; /* EIO once the child closed the terminal */
        len += (size_t)n;
        if (len + 1 >= cap)
            break;
    }
    seen[len] = '\0';
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(master);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return seen;
}

static void test_progress_only_on_a_terminal(void **state)
{
    const char *ctl = getenv("ATTNCTL");
    char out[] = "/tmp/attnd-cli-out-XXXXXX", err[] = "/tmp/attnd-cli-err-XXXXXX";
    char cap[] = "/tmp/attnd-cli-gen-XXXXXX";
    char cmd[1024], *tty, *text;
    json_t *res;
    int st = -1;
    (void)state;
    close(mkstemp(out));
    close(mkstemp(err));
    close(mkstemp(cap));
    snprintf(cmd, sizeof cmd, "%s bench --url %s --op hello --clients 2 --requests 20000 --json",
             ctl, g_d.url);
    tty = on_tty(cmd, out, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(tty, "bench: "));
    assert_non_null(strstr(tty, "requests ("));
    free(tty);
    /* stdout: the one JSON result line, nothing else */
    text = slurp(out);
    assert_non_null(strchr(text, '\n'));
    assert_null(strchr(text, '\r'));
    assert_string_equal(strchr(text, '\n') + 1, "");
    free(text);
    res = json_load_file(out, 0, NULL);
    assert_non_null(res);
    assert_int_equal(json_integer_value(json_object_get(res, "requests")), 40000);
    json_decref(res);
    /* gen on a terminal: frames and bytes written; its stdout stays empty */
    snprintf(cmd, sizeof cmd,
             "%s gen --out %s --kind decode --seed 2 --requests 8 --steps 40 --layers 2", ctl, cap);
    tty = on_tty(cmd, out, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(tty, "gen: "));
    assert_non_null(strstr(tty, "MiB written"));
    free(tty);
    text = slurp(out);
    assert_string_equal(text, "");
    free(text);
    /* not a terminal: no progress line in stderr */
    assert_int_equal(
        sh("%s bench --url %s --op hello --clients 2 --requests 2000 --json > %s 2> %s", ctl,
           g_d.url, out, err),
        0);
    text = slurp(err);
    assert_null(strstr(text, "bench: "));
    assert_null(strchr(text, '\r'));
    free(text);
    unlink(out);
    unlink(err);
    unlink(cap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_twice),
        cmocka_unit_test(test_replay_twice),
        cmocka_unit_test(test_bench_drops_its_pool),
        cmocka_unit_test(test_progress_only_on_a_terminal),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
