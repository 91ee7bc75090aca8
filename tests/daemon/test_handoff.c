/* The hand-off sentence and figure (daemon/handoff.h) with a fake probe:
 * what a cuda_ipc registration reports under MPS, without MPS ("time-sliced"
 * said plainly) and with MPS unknown; a failed probe says why and keeps no
 * stale figure; shm semaphores are host semaphores with no GPU figure; the
 * figure a run's diag reports is the latest measured on its device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/handoff.h"

/* A probe that returns what the test says, and counts its calls. */
typedef struct fake_probe {
    double us;
    int rc;
    uint32_t calls, last_rounds;
    int last_device;
} fake_probe;

static int fake(void *arg, int device, uint32_t rounds, double *us, attn_error_detail *err)
{
    fake_probe *f = arg;
    f->calls++;
    f->last_rounds = rounds;
    f->last_device = device;
    *us = f->us;
    if (f->rc != 0)
        return attn_error_set(err, f->rc, "handoff", "the fake probe failed on purpose");
    return 0;
}

static void test_mps_reports_the_measured_figure(void **state)
{
    fake_probe f = {.us = 12.25};
    attnd_handoff h;
    char note[ATTND_HANDOFF_NOTE];
    double us = 0;
    (void)state;
    attnd_handoff_init(&h, 1, fake, &f);
    assert_true(attnd_handoff_measure(&h, 0, note, sizeof note) == 12.25);
    assert_int_equal(f.calls, 1);
    assert_int_equal(f.last_rounds, ATTND_HANDOFF_ROUNDS);
    assert_int_equal(f.last_device, 0);
    assert_non_null(strstr(note, "MPS"));
    assert_non_null(strstr(note, "12.2 us"));
    assert_null(strstr(note, "time-sliced"));
    /* a run's diag on that device: the same figure, no new measurement */
    attnd_handoff_describe(&h, 0, note, sizeof note, &us);
    assert_true(us == 12.25);
    assert_non_null(strstr(note, "12.2 us"));
    assert_int_equal(f.calls, 1);
    /* another device has measured nothing yet */
    attnd_handoff_describe(&h, 1, note, sizeof note, &us);
    assert_true(us == 0);
    assert_non_null(strstr(note, "no ping-pong measured on cuda:1"));
    attnd_handoff_fini(&h);
}

static void test_no_mps_says_time_sliced(void **state)
{
    fake_probe f = {.us = 10.75};
    attnd_handoff h;
    char note[ATTND_HANDOFF_NOTE];
    (void)state;
    attnd_handoff_init(&h, 0, fake, &f);
    attnd_handoff_measure(&h, 2, note, sizeof note);
    assert_true(strncmp(note, "time-sliced", 11) == 0);
    assert_non_null(strstr(note, "10.8 us"));
    assert_non_null(strstr(note, "nvidia-cuda-mps-control -d"));
    attnd_handoff_fini(&h);
    attnd_handoff_init(&h, -1, fake, &f);
    attnd_handoff_measure(&h, 0, note, sizeof note);
    assert_non_null(strstr(note, "unknown"));
    attnd_handoff_fini(&h);
}

static void test_failed_probe_says_why_and_forgets(void **state)
{
    fake_probe f = {.us = 9.0};
    attnd_handoff h;
    char note[ATTND_HANDOFF_NOTE];
    double us = -1;
    (void)state;
    attnd_handoff_init(&h, 1, fake, &f);
    attnd_handoff_measure(&h, 0, note, sizeof note);
    f.rc = ATTN_E_TIMEOUT;
    assert_true(attnd_handoff_measure(&h, 0, note, sizeof note) == 0);
    assert_non_null(strstr(note, "failed on purpose"));
    /* the older figure is not reported as if it were current */
    attnd_handoff_describe(&h, 0, note, sizeof note, &us);
    assert_true(us == 0);
    assert_non_null(strstr(note, "failed on purpose"));
    attnd_handoff_fini(&h);
    /* no probe at all (no CUDA engine) */
    attnd_handoff_init(&h, -1, NULL, NULL);
    assert_true(attnd_handoff_measure(&h, 0, note, sizeof note) == 0);
    assert_non_null(strstr(note, "no CUDA engine"));
    attnd_handoff_fini(&h);
}

/* A probe whose message fills a whole error detail (255 bytes). */
static int fake_long_failure(void *arg, int device, uint32_t rounds, double *us,
                             attn_error_detail *err)
{
    char msg[sizeof err->message];
    (void)arg;
    (void)device;
    (void)rounds;
    *us = 0;
    memset(msg, 'x', sizeof msg - 1);
    memcpy(msg, "probe-reason ", 13);
    msg[sizeof msg - 1] = '\0';
    return attn_error_set(err, ATTN_E_TIMEOUT, "handoff", "%s", msg);
}

/* The longest sentences fit ATTND_HANDOFF_NOTE whole: without MPS, on the
 * highest device, after a probe failing with the longest message (as
 * measured now and as a later run's diag reports it), and with a huge
 * figure.  The remedy was cut off at 224 bytes before. */
static void test_longest_sentences_fit(void **state)
{
    attnd_handoff h;
    char note[ATTND_HANDOFF_NOTE];
    const int dev = ATTND_HANDOFF_DEVICES - 1;
    (void)state;
    for (int mps = -1; mps <= 1; mps++) {
        attnd_handoff_init(&h, mps, fake_long_failure, NULL);
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 0)
                attnd_handoff_measure(&h, dev, note, sizeof note);
            else
                attnd_handoff_describe(&h, dev, note, sizeof note, NULL);
            /* only the reason is shortened: the sentence ends inside it */
            assert_true(strlen(note) <= sizeof note - 1);
            assert_int_equal(note[strlen(note) - 1], 'x');
            assert_non_null(strstr(note, "no ping-pong measured on cuda:15: probe-reason x"));
            if (mps == 0)
                assert_non_null(strstr(note, "; start nvidia-cuda-mps-control -d;"));
        }
        attnd_handoff_fini(&h);
    }
    fake_probe f = {.us = 123456789.0};
    for (int mps = -1; mps <= 1; mps++) {
        attnd_handoff_init(&h, mps, fake, &f);
        attnd_handoff_measure(&h, dev, note, sizeof note);
        assert_true(strlen(note) < sizeof note - 1);
        assert_non_null(strstr(note, "1.235e+08 us"));
        if (mps == 0) {
            const char *end = "; start nvidia-cuda-mps-control -d";
            assert_string_equal(note + strlen(note) - strlen(end), end);
        } else {
            assert_non_null(strstr(note, "on cuda:15"));
        }
        attnd_handoff_fini(&h);
    }
}

static void test_host_semaphores_have_no_gpu_figure(void **state)
{
    fake_probe f = {.us = 11.0};
    attnd_handoff h;
    char note[ATTND_HANDOFF_NOTE];
    double us = -1;
    (void)state;
    attnd_handoff_init(&h, 1, fake, &f);
    attnd_handoff_measure(&h, 0, note, sizeof note);
    attnd_handoff_describe(&h, -1, note, sizeof note, &us);
    assert_true(us == 0);
    assert_true(strncmp(note, "host semaphores", 15) == 0);
    assert_int_equal(f.calls, 1);
    attnd_handoff_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mps_reports_the_measured_figure),
        cmocka_unit_test(test_no_mps_says_time_sliced),
        cmocka_unit_test(test_failed_probe_says_why_and_forgets),
        cmocka_unit_test(test_longest_sentences_fit),
        cmocka_unit_test(test_host_semaphores_have_no_gpu_figure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
