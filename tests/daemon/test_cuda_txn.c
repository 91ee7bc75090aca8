/* The CUDA engines' append-transaction rule (engines/cuda/txn.h) on any
 * machine: a fake launcher and stream wait stand in for the CUDA ones, so
 * every path of a run's failure is driven on the host.  The rule: once a
 * stage launch was enqueued, a failed run either confirms a restore (its
 * own error then stands, the pool is as it was) or says
 * ATTN_E_POOL_UNRESTORED with field "layer" naming the layer and the rows.
 * tests/gpu/test_restore_gpu.c checks the same on the device, through both
 * engines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "engines/cuda/txn.h"

/* What the fakes saw and how they answer; reached through the stream
 * pointer, as the CUDA ones reach their stream. */
typedef struct fake_stream {
    int launches, restores, waits;
    int fail_launch_at; /* 1-based launch that fails (0: none) */
    int fail_wait;      /* every wait fails */
} fake_stream;

static int fake_launch(const attn_cuda_append_params *p, void *stream)
{
    fake_stream *fs = stream;
    fs->launches++;
    if (fs->launches == fs->fail_launch_at)
        return ATTN_E_CUDA;
    fs->restores += p->restore != 0;
    return 0;
}

static int fake_wait(void *stream, char *why, size_t n)
{
    fake_stream *fs = stream;
    fs->waits++;
    if (fs->fail_wait)
        snprintf(why, n, "the stream: an illegal memory access was encountered");
    return fs->fail_wait;
}

static attn_cuda_txn make_txn(fake_stream *fs, int refusals)
{
    memset(fs, 0, sizeof *fs);
    attn_cuda_txn t = {.stream = fs,
                       .launch = fake_launch,
                       .wait = fake_wait,
                       .layer = 3,
                       .refuse_restores = refusals};
    t.rows.rows = 17;
    t.rows.num_kv_heads = 4;
    return t;
}

/* A no-commit run whose restore launch is refused once: the unwind's
 * restore puts the rows back, so the run's own error stands. */
static void test_restore_refused_once_is_put_back(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 1);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    int rv = attn_cuda_txn_restore(&t, &err);
    assert_int_equal(rv, ATTN_E_CUDA);
    assert_string_equal(err.field, "layer");
    assert_non_null(strstr(err.message, "layer 3: the restore launch failed"));
    assert_true(t.staged); /* not put back yet: the failure path must unwind */
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_CUDA);
    assert_int_equal(fs.restores, 1);
    assert_int_equal(fs.waits, 1);
    assert_false(t.staged);
}

/* Every restore refused: E_POOL_UNRESTORED naming the layer and the rows. */
static void test_restore_refused_twice_is_unrestored(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 2);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    int rv = attn_cuda_txn_restore(&t, &err);
    rv = attn_cuda_txn_unwind(&t, rv, &err);
    assert_int_equal(rv, ATTN_E_POOL_UNRESTORED);
    assert_int_equal(err.code, ATTN_E_POOL_UNRESTORED);
    assert_string_equal(err.field, "layer");
    assert_non_null(strstr(err.message, "layer 3: 17 new rows x 4 K/V heads were not put back"));
    assert_int_equal(fs.restores, 0);
    assert_int_equal(fs.waits, 1); /* drained all the same: nothing of the run still runs */
    assert_true(t.staged);
}

/* The launcher itself refusing every restore (no injection) reads the same. */
static void test_launcher_refusing_restores_is_unrestored(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 0);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    fs.fail_launch_at = 2;
    int rv = attn_cuda_txn_restore(&t, &err);
    assert_int_equal(rv, ATTN_E_CUDA);
    assert_null(strstr(err.message, "tuning")); /* a real refusal is not called injected */
    fs.fail_launch_at = 3;
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_POOL_UNRESTORED);
    assert_string_equal(err.field, "layer");
}

/* A restore enqueued, then a later step failed (a signal, the stream): the
 * pool is put back only when the stream confirms it; a failing stream is
 * E_POOL_UNRESTORED with its sentence, never "unchanged". */
static void test_enqueued_restore_counts_only_once_confirmed(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 0);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    assert_int_equal(attn_cuda_txn_restore(&t, &err), 0);
    assert_true(t.staged);
    fs.fail_wait = 1;
    int rv = attn_error_set(&err, ATTN_E_CUDA, "", "the run's stream failed");
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_POOL_UNRESTORED);
    assert_non_null(strstr(err.message, "illegal memory access"));

    t = make_txn(&fs, 0);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    assert_int_equal(attn_cuda_txn_restore(&t, &err), 0);
    rv = attn_error_set(&err, ATTN_E_BUFFER_UNSUPPORTED, "signal", "the signal failed");
    /* the restore again (idempotent) and a good wait: the signal's error stands */
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_BUFFER_UNSUPPORTED);
    assert_string_equal(err.field, "signal");
    assert_int_equal(fs.restores, 2);
    assert_int_equal(fs.waits, 1);
}

/* A committing run that fails after staging is put back too. */
static void test_failed_commit_run_is_put_back(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 0);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_stage(&t), 0);
    int rv = attn_error_set(&err, ATTN_E_CUDA, "", "decode launch failed");
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_CUDA);
    assert_string_equal(err.message, "decode launch failed");
    assert_int_equal(fs.restores, 1);
    assert_int_equal(fs.waits, 1);
}

/* A stage launch the driver refused enqueued nothing: nothing to unwind. */
static void test_refused_stage_is_not_unwound(void **state)
{
    (void)state;
    fake_stream fs;
    attn_cuda_txn t = make_txn(&fs, 0);
    fs.fail_launch_at = 1;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    int rv = attn_cuda_txn_stage(&t);
    assert_int_equal(rv, ATTN_E_CUDA);
    assert_false(t.staged);
    assert_int_equal(attn_cuda_txn_unwind(&t, rv, &err), ATTN_E_CUDA);
    assert_int_equal(fs.launches, 1);
    assert_int_equal(fs.waits, 0);
}

/* A deferred run's failed completion (the CUDA engine's engine_complete)
 * says E_POOL_UNRESTORED with field "layer" and the run's layer, as the
 * synchronous unwind does; it had field "" and no layer before. */
static void test_deferred_failure_names_the_layer(void **state)
{
    (void)state;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    assert_int_equal(attn_cuda_txn_deferred_failed(7, "an illegal memory access", &err),
                     ATTN_E_POOL_UNRESTORED);
    assert_int_equal(err.code, ATTN_E_POOL_UNRESTORED);
    assert_string_equal(err.field, "layer");
    assert_non_null(strstr(err.message, "layer 7: "));
    assert_non_null(strstr(err.message, "an illegal memory access"));
    assert_non_null(strstr(err.message, "may be partly written"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_refused_once_is_put_back),
        cmocka_unit_test(test_restore_refused_twice_is_unrestored),
        cmocka_unit_test(test_launcher_refusing_restores_is_unrestored),
        cmocka_unit_test(test_enqueued_restore_counts_only_once_confirmed),
        cmocka_unit_test(test_failed_commit_run_is_put_back),
        cmocka_unit_test(test_refused_stage_is_not_unwound),
        cmocka_unit_test(test_deferred_failure_names_the_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
