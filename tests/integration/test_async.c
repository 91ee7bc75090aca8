/* Asynchronous runs and semaphores through attnd (a subprocess, CPU engine,
 * shm buffers): an async run replies with a run_seq before it runs, its
 * diag says async and has no timing, run_status gives its completion and
 * timing, and its outputs equal the synchronous run's bit for bit; a run
 * that waits on a semaphore does not start until the client writes it and
 * signals its own semaphore when done; every refusal comes before anything
 * is enqueued, with its field, the pool checksum unchanged; a connection
 * that closes with a run waiting on its semaphore has the wait released,
 * the run cancelled (the pool unchanged) and its buffers dropped, and attnd
 * keeps serving.  Needs $ATTND (make integration).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "attn/client.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/served_batch.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"

static attn_daemon_proc g_d;
static attn_client *g_c;
static attn_rb g_rb;
static int32_t *g_pages;
static uint64_t g_plan;

/* One shm object mapped here, laid out as inputs | O | LSE | semaphores. */
typedef struct shm_buf {
    char name[64];
    uint8_t *p;
    size_t bytes;
    uint64_t q, k, v, o, lse, sem_wait, sem_signal;
} shm_buf;

static void shm_make(shm_buf *s, const char *tag)
{
    s->q = 0;
    s->k = (s->q + g_rb.q_bytes + 63) & ~63ull;
    s->v = (s->k + g_rb.k_new_bytes + 63) & ~63ull;
    s->o = (s->v + g_rb.v_new_bytes + 63) & ~63ull;
    s->lse = (s->o + g_rb.o_elems * 4 + 63) & ~63ull;
    s->sem_wait = (s->lse + g_rb.lse_elems * 4 + 63) & ~63ull;
    s->sem_signal = s->sem_wait + 8;
    s->bytes = s->sem_signal + 64;
    snprintf(s->name, sizeof s->name, "/attn-test-%d-%s", (int)getpid(), tag);
    int fd = shm_open(s->name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)s->bytes), 0);
    s->p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(s->p != MAP_FAILED);
    close(fd);
    memset(s->p, 0x5a, s->bytes);
    memcpy(s->p + s->q, g_rb.q, g_rb.q_bytes);
    memcpy(s->p + s->k, g_rb.k_new, g_rb.k_new_bytes);
    memcpy(s->p + s->v, g_rb.v_new, g_rb.v_new_bytes);
    memset(s->p + s->sem_wait, 0, 16);
}

static void shm_free(shm_buf *s)
{
    munmap(s->p, s->bytes);
    shm_unlink(s->name);
}

static uint64_t sem_read(const shm_buf *s, uint64_t off)
{
    return __atomic_load_n((const uint64_t *)(const void *)(s->p + off), __ATOMIC_ACQUIRE);
}

static void sem_write(shm_buf *s, uint64_t off, uint64_t v)
{
    __atomic_store_n((uint64_t *)(void *)(s->p + off), v, __ATOMIC_RELEASE);
}

static uint64_t register_shm(attn_client *c, const shm_buf *s)
{
    attn_reply rep;
    uint64_t id = 0;
    assert_int_equal(attn_buffer_register_shm(c, s->name, s->bytes, &id, &rep), 0);
    attn_reply_free(&rep);
    return id;
}

/* Run args: every tensor by reference into buffer `buf`, asynchronous. */
static void async_args(attn_run_args *a, uint64_t buf, const shm_buf *s)
{
    memset(a, 0, sizeof *a);
    a->plan_id = g_plan;
    a->q_ref = (attn_tensor_ref){buf, s->q, g_rb.q_bytes};
    a->k_new_ref = (attn_tensor_ref){buf, s->k, g_rb.k_new_bytes};
    a->v_new_ref = (attn_tensor_ref){buf, s->v, g_rb.v_new_bytes};
    a->o_ref = (attn_tensor_ref){buf, s->o, g_rb.o_elems * 4};
    a->lse_ref = (attn_tensor_ref){buf, s->lse, g_rb.lse_elems * 4};
    a->async = true;
}

static uint64_t stat_counter(attn_client *c, const char *name)
{
    attn_reply rep;
    uint64_t v = UINT64_MAX;
    assert_int_equal(attn_stats(c, &rep), 0);
    for (uint32_t i = 0; i < rep.stats.num_counters; i++)
        if (strcmp(rep.stats.counters[i].name, name) == 0)
            v = rep.stats.counters[i].value;
    attn_reply_free(&rep);
    if (v == UINT64_MAX)
        fail_msg("stats has no counter %s", name);
    return v;
}

static int run_status(attn_client *c, uint64_t seq, attn_reply *rep)
{
    memset(rep, 0, sizeof *rep);
    return attn_run_status_get(c, seq, rep);
}

/* Poll run_status until the run is no longer queued or running (5 s at most). */
static attn_run_status wait_settled(attn_client *c, uint64_t seq)
{
    attn_reply rep;
    attn_run_status st;
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(run_status(c, seq, &rep), 0);
        st = rep.status;
        attn_reply_free(&rep);
        if (st.state != ATTN_RUN_QUEUED && st.state != ATTN_RUN_RUNNING)
            return st;
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    }
    fail_msg("run %llu did not settle", (unsigned long long)seq);
    return st;
}

static uint64_t pool_checksum(void)
{
    attn_kv_args a;
    attn_reply rep;
    uint64_t h;
    memset(&a, 0, sizeof a);
    snprintf(a.pool, sizeof a.pool, "%s", g_rb.g.name);
    a.pages = g_pages;
    a.num_pages = g_rb.g.num_pages;
    assert_int_equal(attn_kv_read(g_c, &a, &rep), 0);
    h = attn_rb_checksum(rep.k.data, rep.k.len) * 31 +
        attn_rb_checksum(rep.v_data.data, rep.v_data.len);
    attn_reply_free(&rep);
    return h;
}

/* The diag as a JSON object (json_decref it). */
static json_t *diag_json(const attn_reply *rep)
{
    char *text = NULL;
    attn_error_detail e;
    json_error_t je;
    assert_int_equal(attn_reply_diag_json(rep, &text, &e), 0);
    json_t *js = json_loads(text, 0, &je);
    free(text);
    assert_non_null(js);
    return js;
}

static int setup(void **state)
{
    (void)state;
    const char *extra[] = {"--engine", "cpu", NULL};
    if (attn_daemon_start(&g_d, NULL, extra) != 0 || attn_client_open(&g_c, g_d.url) != 0)
        return -1;
    if (attn_served_batch(g_c, &g_rb, 4, 91, "async", &g_pages, &g_plan) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    attn_client_close(g_c);
    attn_daemon_stop(&g_d, 0, &st);
    attn_daemon_cleanup(&g_d);
    attn_rb_free(&g_rb);
    free(g_pages);
    return st == 0 ? 0 : -1;
}

static void test_async_run_bitexact(void **state)
{
    attn_run_args a;
    attn_reply rep, ref;
    shm_buf s;
    (void)state;
    shm_make(&s, "exact");
    uint64_t id = register_shm(g_c, &s);

    /* the synchronous inline run */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    a.return_lse = true;
    assert_int_equal(attn_run(g_c, &a, &ref), 0);

    uint64_t enq = stat_counter(g_c, "async_enqueued");
    async_args(&a, id, &s);
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    assert_true(rep.run_seq > 0);
    assert_int_equal(rep.o.len, 0);
    assert_int_equal(rep.o_ref.offset, s.o);
    json_t *js = diag_json(&rep);
    json_t *as = json_object_get(js, "async");
    assert_true(json_is_object(as));
    assert_int_equal(json_integer_value(json_object_get(as, "run_seq")), rep.run_seq);
    assert_string_equal(json_string_value(json_object_get(as, "state")), "enqueued");
    assert_true(json_is_null(json_object_get(js, "timing_us"))); /* not run yet */
    assert_true(json_is_null(json_object_get(js, "handoff")));   /* no semaphore */
    json_decref(js);
    uint64_t seq = rep.run_seq;
    attn_reply_free(&rep);

    attn_run_status st = wait_settled(g_c, seq);
    assert_int_equal(st.state, ATTN_RUN_DONE);
    assert_true(st.engine_us > 0);
    assert_string_equal(st.timing_method, "host_clock");
    assert_true(st.exec_us >= st.engine_us);
    assert_memory_equal(s.p + s.o, ref.o.data, ref.o.len);
    assert_memory_equal(s.p + s.lse, ref.lse.data, ref.lse.len);
    attn_reply_free(&ref);
    assert_int_equal(stat_counter(g_c, "async_enqueued"), enq + 1);
    assert_int_equal(stat_counter(g_c, "async_pending"), 0);

    /* several in a row: they apply in order, and a synchronous request of
     * the same connection (kv_read) comes after them */
    uint64_t seqs[4];
    for (int i = 0; i < 4; i++) {
        async_args(&a, id, &s);
        assert_int_equal(attn_run(g_c, &a, &rep), 0);
        seqs[i] = rep.run_seq;
        attn_reply_free(&rep);
    }
    (void)pool_checksum();
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run_status(g_c, seqs[i], &rep), 0);
        assert_int_equal(rep.status.state, ATTN_RUN_DONE);
        attn_reply_free(&rep);
    }
    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

/* One refused run: code, field; the pool, the outputs and the queue unchanged. */
static void expect_refused(const attn_run_args *a, int code, const char *field, const shm_buf *s)
{
    attn_reply rep;
    uint64_t before = pool_checksum();
    uint64_t out_before = attn_rb_checksum(s->p + s->o, s->bytes - s->o);
    uint64_t enq = stat_counter(g_c, "async_enqueued");
    assert_int_equal(attn_run(g_c, a, &rep), code);
    assert_string_equal(rep.error.field, field);
    attn_reply_free(&rep);
    assert_int_equal(pool_checksum(), before);
    assert_int_equal(attn_rb_checksum(s->p + s->o, s->bytes - s->o), out_before);
    assert_int_equal(stat_counter(g_c, "async_enqueued"), enq);
}

static void test_async_refusals(void **state)
{
    attn_run_args a;
    attn_reply rep;
    attn_client *other;
    shm_buf s;
    (void)state;
    shm_make(&s, "refuse");
    uint64_t id = register_shm(g_c, &s);

    async_args(&a, id, &s);
    memset(&a.o_ref, 0, sizeof a.o_ref); /* O would have nowhere to go */
    expect_refused(&a, ATTN_E_MISSING, "o", &s);
    async_args(&a, id, &s);
    memset(&a.lse_ref, 0, sizeof a.lse_ref);
    a.return_lse = true;
    expect_refused(&a, ATTN_E_MISSING, "lse", &s);
    async_args(&a, id, &s);
    a.trace = true;
    expect_refused(&a, ATTN_E_SEMANTIC, "trace", &s);
    async_args(&a, id, &s);
    a.verify = true;
    expect_refused(&a, ATTN_E_SEMANTIC, "verify", &s);
    async_args(&a, id, &s);
    a.wait = (attn_sem_ref){id, s.sem_wait + 4, 1}; /* not 8-aligned */
    expect_refused(&a, ATTN_E_BUFFER_RANGE, "wait.offset", &s);
    async_args(&a, id, &s);
    a.sig = (attn_sem_ref){id + 50, 0, 1};
    expect_refused(&a, ATTN_E_UNKNOWN_BUFFER, "signal.buf", &s);
    async_args(&a, id, &s);
    a.wait = (attn_sem_ref){id, s.bytes - 4, 1}; /* the word ends past the buffer */
    expect_refused(&a, ATTN_E_BUFFER_RANGE, "wait.offset", &s);
    async_args(&a, id, &s);
    a.q_ref.bytes -= 2;
    expect_refused(&a, ATTN_E_SHAPE, "q", &s);

    /* run_status: a run that never was, and another connection's */
    assert_int_equal(run_status(g_c, 1u << 30, &rep), ATTN_E_RANGE);
    assert_string_equal(rep.error.field, "run_seq");
    attn_reply_free(&rep);
    async_args(&a, id, &s);
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    uint64_t seq = rep.run_seq;
    attn_reply_free(&rep);
    wait_settled(g_c, seq);
    assert_int_equal(attn_client_open(&other, g_d.url), 0);
    assert_int_equal(run_status(other, seq, &rep), ATTN_E_RANGE);
    assert_string_equal(rep.error.field, "run_seq");
    attn_reply_free(&rep);
    attn_client_close(other);

    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

/* GPU-side ordering, host edition: the run waits for the client's write of
 * the awaited value, then signals its own semaphore after it ran. */
static void test_wait_then_signal(void **state)
{
    attn_run_args a;
    attn_reply rep;
    shm_buf s;
    (void)state;
    shm_make(&s, "sem");
    uint64_t id = register_shm(g_c, &s);
    uint64_t before = pool_checksum();
    uint64_t out_before = attn_rb_checksum(s.p + s.o, s.sem_wait - s.o);

    async_args(&a, id, &s);
    a.wait = (attn_sem_ref){id, s.sem_wait, 5};
    a.sig = (attn_sem_ref){id, s.sem_signal, 9};
    sem_write(&s, s.sem_wait, 4); /* below the awaited value */
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    uint64_t seq = rep.run_seq;
    json_t *js = diag_json(&rep);
    json_t *ho = json_object_get(js, "handoff");
    assert_true(json_is_object(ho));
    assert_true(json_is_null(json_object_get(ho, "mps"))); /* no GPU: unknown */
    assert_non_null(json_string_value(json_object_get(ho, "note")));
    json_decref(js);
    attn_reply_free(&rep);

    /* held: nothing written, nothing signalled */
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    assert_int_equal(run_status(g_c, seq, &rep), 0);
    assert_int_equal(rep.status.state, ATTN_RUN_RUNNING); /* at its wait */
    attn_reply_free(&rep);
    assert_int_equal(attn_rb_checksum(s.p + s.o, s.sem_wait - s.o), out_before);
    assert_int_equal(sem_read(&s, s.sem_signal), 0);

    sem_write(&s, s.sem_wait, 5);
    attn_run_status st = wait_settled(g_c, seq);
    assert_int_equal(st.state, ATTN_RUN_DONE);
    assert_true(st.queued_us >= 0);
    assert_int_equal(sem_read(&s, s.sem_signal), 9);
    assert_true(attn_rb_checksum(s.p + s.o, s.sem_wait - s.o) != out_before);
    (void)before;

    /* a synchronous run waits the same way (already satisfied here) */
    async_args(&a, id, &s);
    a.async = false;
    a.wait = (attn_sem_ref){id, s.sem_wait, 5};
    a.sig = (attn_sem_ref){id, s.sem_signal, 10};
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    assert_int_equal(rep.run_seq, 0);
    attn_reply_free(&rep);
    assert_int_equal(sem_read(&s, s.sem_signal), 10);

    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

/* A reply handed to a callback (attn_run_submit_prepared), waited for here. */
typedef struct cb_reply {
    int done; /* set (release) once rv and rep are filled */
    int rv;
    attn_reply *rep;
} cb_reply;

static void cb_store(void *arg, int rv, attn_reply *rep)
{
    cb_reply *r = arg;
    r->rv = rv;
    r->rep = rep;
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static void cb_wait(cb_reply *r)
{
    for (int i = 0; i < 5000 && !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE); i++)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    assert_true(__atomic_load_n(&r->done, __ATOMIC_ACQUIRE));
}

static void cb_free(cb_reply *r)
{
    attn_reply_free(r->rep);
    free(r->rep);
}

/* Prepared runs (attn_run_prepare, attn_run_submit_prepared) on a fresh
 * connection with order numbers and both semaphores: each submit waits for
 * its own value, signals its own, and writes what the synchronous inline
 * run writes, bit for bit; a submit whose order number does not match how
 * the run was prepared is refused before anything is sent. */
static void test_prepared_runs(void **state)
{
    attn_client *c;
    attn_run_args a, ia;
    attn_reply rep, ref;
    attn_prepared_run *p = NULL;
    attn_error_detail e;
    shm_buf s;
    (void)state;
    shm_make(&s, "prep");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);

    attn_rb_run_args(&g_rb, &ia);
    ia.plan_id = g_plan;
    ia.return_lse = true;
    assert_int_equal(attn_run(c, &ia, &ref), 0);

    async_args(&a, id, &s);
    a.return_lse = true;
    a.wait = (attn_sem_ref){id, s.sem_wait, 0};
    a.sig = (attn_sem_ref){id, s.sem_signal, 0};
    a.order = 1;
    assert_int_equal(attn_run_prepare(c, &a, &p, &e), 0);
    attn_run_submit bad = {.layer = 0, .wait_value = 1, .signal_value = 1, .order = 0};
    assert_int_equal(attn_run_submit_prepared(p, &bad, cb_store, NULL), ATTN_E_RANGE);
    for (uint64_t k = 1; k <= 3; k++) {
        cb_reply r = {0};
        memset(s.p + s.o, 0x5a, s.sem_wait - s.o); /* poison O and LSE */
        attn_run_submit v = {.layer = 0, .wait_value = 10 * k, .signal_value = 100 * k, .order = k};
        assert_int_equal(attn_run_submit_prepared(p, &v, cb_store, &r), 0);
        cb_wait(&r);
        assert_int_equal(r.rv, 0);
        assert_true(r.rep->run_seq > 0);
        uint64_t seq = r.rep->run_seq;
        cb_free(&r);
        /* held at its wait until the client writes 10k */
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        assert_int_equal(sem_read(&s, s.sem_signal), 100 * (k - 1));
        sem_write(&s, s.sem_wait, 10 * k);
        attn_run_status st = wait_settled(c, seq);
        assert_int_equal(st.state, ATTN_RUN_DONE);
        assert_int_equal(sem_read(&s, s.sem_signal), 100 * k);
        assert_memory_equal(s.p + s.o, ref.o.data, ref.o.len);
        assert_memory_equal(s.p + s.lse, ref.lse.data, ref.lse.len);
    }
    attn_run_prepared_free(p);

    /* prepared without an order number: one given is refused */
    async_args(&a, id, &s);
    assert_int_equal(attn_run_prepare(c, &a, &p, &e), 0);
    bad.order = 4;
    assert_int_equal(attn_run_submit_prepared(p, &bad, cb_store, NULL), ATTN_E_RANGE);
    attn_run_prepared_free(p);
    assert_int_equal(attn_run_prepare(c, NULL, &p, &e), ATTN_E_INVALID);
    assert_null(p);

    attn_reply_free(&ref);
    assert_int_equal(attn_buffer_drop(c, id, &rep), 0);
    attn_reply_free(&rep);
    attn_client_close(c);
    shm_free(&s);
}

/* A client that closes while its run waits on its semaphore: the wait is
 * released, that run and the one queued behind it are cancelled (nothing
 * ran: the pool is unchanged), its buffers are dropped, attnd serves on. */
static void test_close_releases_waits(void **state)
{
    attn_client *c;
    attn_run_args a;
    attn_reply rep;
    shm_buf s;
    (void)state;
    shm_make(&s, "closew");
    uint64_t before = pool_checksum();
    uint64_t released = stat_counter(g_c, "waits_released_on_close");
    uint64_t cancelled = stat_counter(g_c, "async_cancelled");
    uint64_t bufs_closed = stat_counter(g_c, "buffers_released_on_close");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);
    for (int i = 0; i < 2; i++) {
        async_args(&a, id, &s);
        a.plan_id = g_plan;
        a.wait = (attn_sem_ref){id, s.sem_wait, 1}; /* never written */
        assert_int_equal(attn_run(c, &a, &rep), 0);
        attn_reply_free(&rep);
    }
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    assert_int_equal(stat_counter(g_c, "async_pending"), 2);
    attn_client_close(c);
    for (int i = 0; i < 500 && stat_counter(g_c, "async_pending") > 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    assert_int_equal(stat_counter(g_c, "async_pending"), 0);
    assert_int_equal(stat_counter(g_c, "waits_released_on_close"), released + 1);
    assert_int_equal(stat_counter(g_c, "async_cancelled"), cancelled + 2);
    assert_int_equal(stat_counter(g_c, "buffers_released_on_close"), bufs_closed + 1);
    assert_int_equal(stat_counter(g_c, "buffers"), 0);
    assert_int_equal(pool_checksum(), before);
    assert_int_equal(sem_read(&s, s.sem_wait), 0); /* a host wait is cancelled, not written */
    assert_int_equal(attn_hello(g_c, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_run_bitexact),   cmocka_unit_test(test_async_refusals),
        cmocka_unit_test(test_wait_then_signal),     cmocka_unit_test(test_prepared_runs),
        cmocka_unit_test(test_close_releases_waits),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_async: ATTND is not set (run through make integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
