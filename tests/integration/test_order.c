/* In-order runs (issue 11) through attnd (a subprocess, CPU engine, shm
 * buffers, --workers 1, --order-timeout-ms 300): a connection's runs that
 * carry `"order": n` are handled strictly by number whatever order they
 * arrive in.  Order 2 sent before order 1 on two contexts is held (as data:
 * the one worker still serves other requests meanwhile) and enqueued after
 * 1 (run_seq ascending, both outputs bit-identical to the synchronous
 * run); a duplicate or old number is E_RANGE, field order; a run refused
 * before enqueue uses up its number; a gap older than the timeout fails the
 * runs held behind it with E_TIMEOUT, field order; closing a connection
 * with held runs cancels them (nothing enqueued, the pool unchanged) and
 * attnd serves on; a run refused with E_BUSY uses up its number too; a
 * capture of numbered runs replays (--repeat 2, --verify).  Needs $ATTND
 * and $ATTNCTL (make integration).
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "attn/client.h"
#include "protocol/codec.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/served_batch.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"

static attn_daemon_proc g_d;
static attn_client *g_c;
static attn_rb g_rb;
static int32_t *g_pages;
static uint64_t g_plan;
static attn_reply g_ref; /* the synchronous inline run: O and LSE */

/* One shm object: inputs, then one O | LSE slot per run. */
#define SLOTS 4
typedef struct shm_buf {
    char name[64];
    uint8_t *p;
    size_t bytes;
    uint64_t q, k, v, o[SLOTS], lse[SLOTS], sem;
} shm_buf;

static uint64_t up64(uint64_t x)
{
    return (x + 63) & ~63ull;
}

static void shm_make(shm_buf *s, const char *tag)
{
    s->q = 0;
    s->k = up64(s->q + g_rb.q_bytes);
    s->v = up64(s->k + g_rb.k_new_bytes);
    uint64_t at = up64(s->v + g_rb.v_new_bytes);
    for (int i = 0; i < SLOTS; i++) {
        s->o[i] = at;
        s->lse[i] = up64(s->o[i] + g_rb.o_elems * 4);
        at = up64(s->lse[i] + g_rb.lse_elems * 4);
    }
    s->sem = at;
    s->bytes = at + 64;
    snprintf(s->name, sizeof s->name, "/attn-order-%d-%s", (int)getpid(), tag);
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
    memset(s->p + s->sem, 0, 8);
}

static void shm_free(shm_buf *s)
{
    munmap(s->p, s->bytes);
    shm_unlink(s->name);
}

static uint64_t register_shm(attn_client *c, const shm_buf *s)
{
    attn_reply rep;
    uint64_t id = 0;
    assert_int_equal(attn_buffer_register_shm(c, s->name, s->bytes, &id, &rep), 0);
    attn_reply_free(&rep);
    return id;
}

/* An async run by reference, its outputs into slot `slot`, with `order`. */
static void order_request(attn_request *req, uint64_t buf, const shm_buf *s, int slot,
                          uint64_t order)
{
    memset(req, 0, sizeof *req);
    req->v = ATTN_PROTOCOL_VERSION;
    req->op = ATTN_OP_RUN;
    attn_run_args *a = &req->run;
    a->plan_id = g_plan;
    a->q_ref = (attn_tensor_ref){buf, s->q, g_rb.q_bytes};
    a->k_new_ref = (attn_tensor_ref){buf, s->k, g_rb.k_new_bytes};
    a->v_new_ref = (attn_tensor_ref){buf, s->v, g_rb.v_new_bytes};
    a->o_ref = (attn_tensor_ref){buf, s->o[slot], g_rb.o_elems * 4};
    a->lse_ref = (attn_tensor_ref){buf, s->lse[slot], g_rb.lse_elems * 4};
    a->async = true;
    a->order = order;
}

/* One outstanding call's completion. */
typedef struct pending {
    _Atomic int done;
    int rv;
    uint64_t run_seq;
    int code;
    char field[128];
} pending;

static void on_reply(void *arg, int rv, attn_reply *rep)
{
    pending *p = arg;
    p->rv = rv;
    p->run_seq = rep->run_seq;
    p->code = rep->error.code;
    snprintf(p->field, sizeof p->field, "%s", rep->error.field);
    attn_reply_free(rep);
    free(rep);
    atomic_store(&p->done, 1);
}

static void send_async(attn_client *c, attn_request *req, pending *p)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(attn_call_async(c, req, on_reply, p), 0);
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* Wait for p's reply (5 s at most). */
static void wait_reply(pending *p)
{
    for (int i = 0; i < 5000 && !atomic_load(&p->done); i++)
        sleep_ms(1);
    assert_true(atomic_load(&p->done));
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

/* Wait until no async run is queued or running (5 s at most). */
static void wait_idle(void)
{
    for (int i = 0; i < 500 && stat_counter(g_c, "async_pending") > 0; i++)
        sleep_ms(10);
    assert_int_equal(stat_counter(g_c, "async_pending"), 0);
}

/* Wait until the connections of earlier tests have let go of their buffers
 * (attnd releases a closed connection's buffers asynchronously), so that a
 * test reading buffers_released_on_close counts only its own (5 s at most). */
static void wait_no_buffers(void)
{
    for (int i = 0; i < 500 && stat_counter(g_c, "buffers") > 0; i++)
        sleep_ms(10);
    assert_int_equal(stat_counter(g_c, "buffers"), 0);
}

static uint64_t pool_checksum(void)
{
    attn_kv_args a;
    attn_reply rep;
    memset(&a, 0, sizeof a);
    snprintf(a.pool, sizeof a.pool, "%s", g_rb.g.name);
    a.pages = g_pages;
    a.num_pages = g_rb.g.num_pages;
    assert_int_equal(attn_kv_read(g_c, &a, &rep), 0);
    uint64_t h = attn_rb_checksum(rep.k.data, rep.k.len) * 31 +
                 attn_rb_checksum(rep.v_data.data, rep.v_data.len);
    attn_reply_free(&rep);
    return h;
}

static int setup(void **state)
{
    attn_run_args a;
    (void)state;
    const char *extra[] = {"--engine", "cpu", "--workers", "1", "--order-timeout-ms", "300", NULL};
    if (attn_daemon_start(&g_d, NULL, extra) != 0 || attn_client_open(&g_c, g_d.url) != 0)
        return -1;
    if (attn_served_batch(g_c, &g_rb, 4, 92, "order", &g_pages, &g_plan) != 0)
        return -1;
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    a.return_lse = true;
    return attn_run(g_c, &a, &g_ref);
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    attn_reply_free(&g_ref);
    attn_client_close(g_c);
    attn_daemon_stop(&g_d, 0, &st);
    attn_daemon_cleanup(&g_d);
    attn_rb_free(&g_rb);
    free(g_pages);
    return st == 0 ? 0 : -1;
}

/* Order 2 sent first is held (its reply waits, the one worker serves a plan
 * meanwhile), order 1 then runs first; a duplicate and an old number are
 * E_RANGE, field order; outputs equal the synchronous run's bit for bit. */
static void test_order_two_before_one(void **state)
{
    attn_client *c;
    attn_request req;
    attn_reply rep;
    pending p1, p2, p3;
    shm_buf s;
    (void)state;
    shm_make(&s, "two");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);

    order_request(&req, id, &s, 1, 2);
    send_async(c, &req, &p2);
    sleep_ms(50);
    assert_false(atomic_load(&p2.done)); /* held behind the gap at 1 */
    /* held as data: the only worker still answers another request */
    assert_int_equal(attn_plan(c, &g_rb.m, &rep), 0);
    attn_reply_free(&rep);
    assert_false(atomic_load(&p2.done));

    order_request(&req, id, &s, 2, 2); /* a duplicate of the held one */
    send_async(c, &req, &p3);
    wait_reply(&p3);
    assert_int_equal(p3.rv, ATTN_E_RANGE);
    assert_string_equal(p3.field, "order");

    order_request(&req, id, &s, 0, 1);
    send_async(c, &req, &p1);
    wait_reply(&p1);
    wait_reply(&p2);
    assert_int_equal(p1.rv, 0);
    assert_int_equal(p2.rv, 0);
    assert_true(p1.run_seq > 0);
    assert_true(p2.run_seq > p1.run_seq); /* enqueued 1 then 2 */

    order_request(&req, id, &s, 2, 1); /* old */
    send_async(c, &req, &p3);
    wait_reply(&p3);
    assert_int_equal(p3.rv, ATTN_E_RANGE);
    assert_string_equal(p3.field, "order");

    wait_idle();
    assert_memory_equal(s.p + s.o[0], g_ref.o.data, g_ref.o.len);
    assert_memory_equal(s.p + s.o[1], g_ref.o.data, g_ref.o.len);
    assert_memory_equal(s.p + s.lse[0], g_ref.lse.data, g_ref.lse.len);
    assert_memory_equal(s.p + s.lse[1], g_ref.lse.data, g_ref.lse.len);
    attn_client_close(c);
    shm_free(&s);
}

/* A run refused before enqueue (a bad reference) uses up its number: the
 * next one is not held behind it. */
static void test_refused_run_uses_its_number(void **state)
{
    attn_client *c;
    attn_request req;
    pending p;
    shm_buf s;
    (void)state;
    shm_make(&s, "refused");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);
    uint64_t enq = stat_counter(g_c, "async_enqueued");

    order_request(&req, id, &s, 0, 1);
    req.run.q_ref.buf = id + 1000; /* unknown buffer */
    send_async(c, &req, &p);
    wait_reply(&p);
    assert_int_equal(p.rv, ATTN_E_UNKNOWN_BUFFER);
    assert_string_equal(p.field, "q.buf");

    order_request(&req, id, &s, 0, 2);
    send_async(c, &req, &p);
    wait_reply(&p); /* well within the 300 ms gap timeout */
    assert_int_equal(p.rv, 0);
    assert_true(p.run_seq > 0);
    wait_idle();
    assert_int_equal(stat_counter(g_c, "async_enqueued"), enq + 1);
    attn_client_close(c);
    shm_free(&s);
}

/* A synchronous run waiting on a shm semaphore (unnumbered), on its own thread. */
typedef struct sync_wait {
    attn_client *c;
    attn_run_args a;
    int rv;
} sync_wait;

static void *sync_wait_main(void *arg)
{
    sync_wait *w = arg;
    attn_reply rep;
    w->rv = attn_run(w->c, &w->a, &rep);
    attn_reply_free(&rep);
    return NULL;
}

/* A run refused with E_BUSY uses up its number too.  The connection (cap
 * --conn-inflight 8) holds 2..8 behind the gap at 1 and a synchronous run
 * waiting on a semaphore; 9 is then E_BUSY.  Once the wait is released and
 * 1 fills the gap, 1..8 run, and 10 runs at once instead of waiting for 9. */
static void test_busy_run_uses_its_number(void **state)
{
    attn_client *c;
    attn_request req;
    pending held[7], busy, p;
    shm_buf s;
    sync_wait w;
    pthread_t th;
    (void)state;
    shm_make(&s, "busy");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);
    for (int i = 0; i < 7; i++) {
        order_request(&req, id, &s, i % SLOTS, (uint64_t)i + 2);
        send_async(c, &req, &held[i]);
    }
    order_request(&req, id, &s, 0, 0);
    w.c = c;
    w.a = req.run;
    w.a.async = false;
    w.a.wait = (attn_sem_ref){id, s.sem, 1};
    assert_int_equal(pthread_create(&th, NULL, sync_wait_main, &w), 0);
    sleep_ms(50);
    order_request(&req, id, &s, 0, 9); /* the 9th request in progress: over the cap */
    send_async(c, &req, &busy);
    wait_reply(&busy);
    assert_int_equal(busy.rv, ATTN_E_BUSY);
    assert_string_equal(busy.field, "conn_inflight");
    __atomic_store_n((uint64_t *)(void *)(s.p + s.sem), 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    assert_int_equal(w.rv, 0);
    sleep_ms(30); /* attnd counts the sync run until its reply's send completed */
    order_request(&req, id, &s, 0, 1); /* fills the gap */
    send_async(c, &req, &p);
    wait_reply(&p);
    assert_int_equal(p.rv, 0);
    for (int i = 0; i < 7; i++) {
        wait_reply(&held[i]);
        assert_int_equal(held[i].rv, 0);
        assert_true(held[i].run_seq > (i == 0 ? p.run_seq : held[i - 1].run_seq));
    }
    order_request(&req, id, &s, 0, 10);
    send_async(c, &req, &p);
    wait_reply(&p); /* at once: 9 was used up by its refusal */
    assert_int_equal(p.rv, 0);
    assert_true(p.run_seq > held[6].run_seq);
    wait_idle();
    attn_client_close(c);
    shm_free(&s);
}

/* A gap that is never filled: the runs held behind it fail with E_TIMEOUT,
 * field order, after --order-timeout-ms; nothing of them is enqueued; the
 * missing number and theirs are used up, the next one runs at once. */
static void test_gap_times_out(void **state)
{
    attn_client *c;
    attn_request req;
    pending p2, p3, p;
    shm_buf s;
    (void)state;
    shm_make(&s, "gap");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    uint64_t id = register_shm(c, &s);
    uint64_t before = pool_checksum();
    uint64_t enq = stat_counter(g_c, "async_enqueued");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    order_request(&req, id, &s, 0, 2);
    send_async(c, &req, &p2);
    order_request(&req, id, &s, 1, 3);
    send_async(c, &req, &p3);
    wait_reply(&p2);
    wait_reply(&p3);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    assert_true(ms >= 290.0);
    assert_int_equal(p2.rv, ATTN_E_TIMEOUT);
    assert_string_equal(p2.field, "order");
    assert_int_equal(p3.rv, ATTN_E_TIMEOUT);
    assert_string_equal(p3.field, "order");
    assert_int_equal(stat_counter(g_c, "async_enqueued"), enq);
    assert_int_equal(pool_checksum(), before);

    order_request(&req, id, &s, 0, 1); /* the gap came too late */
    send_async(c, &req, &p);
    wait_reply(&p);
    assert_int_equal(p.rv, ATTN_E_RANGE);
    assert_string_equal(p.field, "order");
    order_request(&req, id, &s, 0, 4);
    send_async(c, &req, &p);
    wait_reply(&p);
    assert_int_equal(p.rv, 0);
    wait_idle();
    attn_client_close(c);
    shm_free(&s);
}

/* A connection closed with runs held: they are cancelled (never enqueued,
 * the pool unchanged) and attnd serves on.  A raw REQ socket sends them
 * (libattn's close must not race with calls in flight). */
static void test_close_with_held_runs(void **state)
{
    nng_socket sock;
    nng_ctx ctx[2];
    nng_aio *aio;
    attn_request req;
    attn_reply rep;
    attn_buf b;
    attn_error_detail err;
    shm_buf s;
    (void)state;
    shm_make(&s, "close");
    uint64_t before = pool_checksum();
    uint64_t enq = stat_counter(g_c, "async_enqueued");
    wait_no_buffers(); /* the last test's client closed a connection with a buffer */
    uint64_t bufs_closed = stat_counter(g_c, "buffers_released_on_close");
    assert_int_equal(nng_req0_open(&sock), 0);
    assert_int_equal(nng_dial(sock, g_d.url, NULL, 0), 0);
    assert_int_equal(nng_aio_alloc(&aio, NULL, NULL), 0);
    /* the buffer, registered on this connection */
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.op = ATTN_OP_BUFFER_REGISTER;
    req.id = 1;
    req.buffer.kind = ATTN_BUFFER_SHM;
    snprintf(req.buffer.name, sizeof req.buffer.name, "%s", s.name);
    req.buffer.bytes = s.bytes;
    assert_int_equal(attn_request_encode(&req, &b, &err), 0);
    nng_msg *m;
    assert_int_equal(nng_ctx_open(&ctx[0], sock), 0);
    assert_int_equal(nng_msg_alloc(&m, 0), 0);
    assert_int_equal(nng_msg_append(m, b.data, b.len), 0);
    attn_buf_free(&b);
    nng_aio_set_msg(aio, m);
    nng_ctx_send(ctx[0], aio);
    nng_aio_wait(aio);
    assert_int_equal(nng_aio_result(aio), 0);
    nng_ctx_recv(ctx[0], aio);
    nng_aio_wait(aio);
    assert_int_equal(nng_aio_result(aio), 0);
    m = nng_aio_get_msg(aio);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_reply_decode(nng_msg_body(m), nng_msg_len(m), NULL, &rep, &err), 0);
    nng_msg_free(m);
    uint64_t id = rep.buf;
    attn_reply_free(&rep);
    assert_true(id > 0);
    for (int i = 0; i < 2; i++) {
        if (i == 1)
            assert_int_equal(nng_ctx_open(&ctx[1], sock), 0);
        order_request(&req, id, &s, i, (uint64_t)i + 2); /* 2 and 3: 1 never comes */
        req.id = 10 + (uint64_t)i;
        assert_int_equal(attn_request_encode(&req, &b, &err), 0);
        assert_int_equal(nng_msg_alloc(&m, 0), 0);
        assert_int_equal(nng_msg_append(m, b.data, b.len), 0);
        attn_buf_free(&b);
        nng_aio_set_msg(aio, m);
        nng_ctx_send(ctx[i], aio);
        nng_aio_wait(aio);
        assert_int_equal(nng_aio_result(aio), 0);
    }
    sleep_ms(50);
    assert_int_equal(stat_counter(g_c, "in_flight"), 3); /* the two held, and this stats */
    uint64_t errors = stat_counter(g_c, "errors");
    nng_close(sock); /* the two runs are held: the close cancels them */
    nng_aio_free(aio);
    for (int i = 0; i < 100 && stat_counter(g_c, "buffers_released_on_close") == bufs_closed; i++)
        sleep_ms(10);
    assert_int_equal(stat_counter(g_c, "buffers_released_on_close"), bufs_closed + 1);
    sleep_ms(20);
    /* released at the close, well before the 300 ms gap timeout */
    assert_int_equal(stat_counter(g_c, "in_flight"), 1);
    sleep_ms(400); /* past the gap timeout: nothing was left to time out or run */
    assert_int_equal(stat_counter(g_c, "errors"), errors);
    assert_int_equal(stat_counter(g_c, "async_enqueued"), enq);
    assert_int_equal(pool_checksum(), before);
    assert_int_equal(attn_hello(g_c, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

/* A capture of numbered runs replays (attnctl replay drops the recorded
 * numbers: they belong to the recording's connections, and --repeat sends
 * a run again), verified bit for bit. */
static void test_replay_of_numbered_runs(void **state)
{
    const char *ctl = getenv("ATTNCTL");
    attn_daemon_proc d;
    attn_client *c;
    attn_request req;
    attn_reply rep;
    attn_run_args a;
    char cap[] = "/tmp/attnd-order-cap-XXXXXX", cmd[1024];
    int fd = mkstemp(cap), st = -1;
    (void)state;
    assert_non_null(ctl);
    close(fd);
    const char *extra[] = {"--engine", "cpu", "--capture", cap, NULL};
    assert_int_equal(attn_daemon_start(&d, NULL, extra), 0);
    assert_int_equal(attn_client_open(&c, d.url), 0);
    assert_int_equal(attn_pool_create(c, &g_rb.g, &rep), 0);
    attn_reply_free(&rep);
    attn_rb_kv_write_all(&g_rb, g_pages, &req);
    assert_int_equal(attn_call(c, &req, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(attn_plan(c, &g_rb.m, &rep), 0);
    uint64_t plan = rep.plan_id;
    attn_reply_free(&rep);
    for (uint64_t n = 1; n <= 2; n++) {
        attn_rb_run_args(&g_rb, &a);
        a.plan_id = plan;
        a.return_lse = true;
        a.order = n;
        assert_int_equal(attn_run(c, &a, &rep), 0);
        assert_memory_equal(rep.o.data, g_ref.o.data, g_ref.o.len);
        attn_reply_free(&rep);
    }
    attn_client_close(c);
    assert_int_equal(attn_daemon_stop(&d, 0, &st), 0);
    assert_int_equal(st, 0);
    attn_daemon_cleanup(&d);
    snprintf(cmd, sizeof cmd, "%s replay %s --url %s --verify --repeat 2 >/dev/null 2>&1", ctl, cap,
             g_d.url);
    st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    unlink(cap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_two_before_one),
        cmocka_unit_test(test_refused_run_uses_its_number),
        cmocka_unit_test(test_busy_run_uses_its_number),
        cmocka_unit_test(test_gap_times_out),
        cmocka_unit_test(test_close_with_held_runs),
        cmocka_unit_test(test_replay_of_numbered_runs),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_order: ATTND is not set (run through make integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
