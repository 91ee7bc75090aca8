/* Registered shm buffers through attnd (a subprocess, libattn connections):
 * a run whose q, k_new, v_new are references and whose O and LSE go into the
 * buffer equals the inline run bit for bit; every bad reference or
 * registration gets its code and field, with the pool checksum and the
 * output bytes unchanged; the caps refuse with the setting's name; a
 * connection that closes has its buffers released (stats shows it).
 * Needs $ATTND (make integration).
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

#include "attn/client.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/served_batch.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"

#define MAX_BUFFERS 4
#define MAX_BUFFER_BYTES (1u << 20)

static attn_daemon_proc g_d;
static attn_client *g_c; /* connection A */
static attn_client *g_b; /* connection B */
static attn_rb g_rb;
static int32_t *g_pages;
static uint64_t g_plan;

/* A shm object of `bytes` bytes mapped here; its name goes into `name`. */
typedef struct shm_obj {
    char name[64];
    uint8_t *p;
    size_t bytes;
} shm_obj;

static void shm_make(shm_obj *s, const char *tag, size_t bytes)
{
    snprintf(s->name, sizeof s->name, "/attn-test-%d-%s", (int)getpid(), tag);
    int fd = shm_open(s->name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    s->p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(s->p != MAP_FAILED);
    close(fd);
    s->bytes = bytes;
}

static void shm_free(shm_obj *s)
{
    munmap(s->p, s->bytes);
    shm_unlink(s->name);
}

static int call(attn_client *c, attn_request *req, attn_reply *rep)
{
    memset(rep, 0, sizeof *rep);
    return attn_call(c, req, rep);
}

static uint64_t stat_counter(const char *name)
{
    attn_reply rep;
    uint64_t v = UINT64_MAX;
    assert_int_equal(attn_stats(g_c, &rep), 0);
    for (uint32_t i = 0; i < rep.stats.num_counters; i++)
        if (strcmp(rep.stats.counters[i].name, name) == 0)
            v = rep.stats.counters[i].value;
    attn_reply_free(&rep);
    assert_true(v != UINT64_MAX);
    return v;
}

/* FNV of every page of the pool, read back through kv_read. */
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

static int setup(void **state)
{
    char nb[24], nbytes[24];
    (void)state;
    snprintf(nb, sizeof nb, "%d", MAX_BUFFERS);
    snprintf(nbytes, sizeof nbytes, "%u", MAX_BUFFER_BYTES);
    const char *extra[] = {"--engine", "cpu", "--max-buffers", nb, "--max-buffer-bytes",
                           nbytes,     NULL};
    if (attn_daemon_start(&g_d, NULL, extra) != 0 || attn_client_open(&g_c, g_d.url) != 0 ||
        attn_client_open(&g_b, g_d.url) != 0)
        return -1;
    if (attn_served_batch(g_c, &g_rb, 5, 77, "bufs", &g_pages, &g_plan) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    attn_client_close(g_c);
    attn_client_close(g_b);
    attn_daemon_stop(&g_d, 0, &st);
    attn_daemon_cleanup(&g_d);
    attn_rb_free(&g_rb);
    free(g_pages);
    return st == 0 ? 0 : -1;
}

/* The layout of the inputs and outputs in one buffer; k_new sits at an odd
 * offset (attnd copies a misaligned input), o and lse at aligned ones. */
typedef struct layout {
    uint64_t q, k, v, o, lse, end;
} layout;

static layout lay_out(void)
{
    layout l;
    size_t o_bytes = g_rb.o_elems * 4, lse_bytes = g_rb.lse_elems * 4;
    l.q = 64;
    l.k = l.q + g_rb.q_bytes + 3;
    l.v = (l.k + g_rb.k_new_bytes + 63) & ~63ull;
    l.o = (l.v + g_rb.v_new_bytes + 63) & ~63ull;
    l.lse = (l.o + o_bytes + 63) & ~63ull;
    l.end = l.lse + lse_bytes;
    return l;
}

/* Run args naming buffer `buf` laid out as `l`, with O and LSE into it. */
static void ref_args(attn_run_args *a, uint64_t buf, const layout *l)
{
    memset(a, 0, sizeof *a);
    a->plan_id = g_plan;
    a->q_ref = (attn_tensor_ref){buf, l->q, g_rb.q_bytes};
    a->k_new_ref = (attn_tensor_ref){buf, l->k, g_rb.k_new_bytes};
    a->v_new_ref = (attn_tensor_ref){buf, l->v, g_rb.v_new_bytes};
    a->o_ref = (attn_tensor_ref){buf, l->o, g_rb.o_elems * 4};
    a->lse_ref = (attn_tensor_ref){buf, l->lse, g_rb.lse_elems * 4};
}

static void fill(shm_obj *s, const layout *l)
{
    memset(s->p, 0x5a, s->bytes); /* outputs start as a known pattern */
    memcpy(s->p + l->q, g_rb.q, g_rb.q_bytes);
    memcpy(s->p + l->k, g_rb.k_new, g_rb.k_new_bytes);
    memcpy(s->p + l->v, g_rb.v_new, g_rb.v_new_bytes);
}

static uint64_t register_shm(attn_client *c, const shm_obj *s, uint64_t bytes)
{
    attn_reply rep;
    uint64_t id = 0;
    assert_int_equal(attn_buffer_register_shm(c, s->name, bytes, &id, &rep), 0);
    assert_true(id > 0);
    attn_reply_free(&rep);
    return id;
}

static void test_run_by_reference_bitexact(void **state)
{
    attn_run_args a;
    attn_reply rep, ref;
    layout l = lay_out();
    shm_obj s;
    (void)state;
    shm_make(&s, "exact", l.end);
    fill(&s, &l);
    uint64_t id = register_shm(g_c, &s, l.end);
    assert_int_equal(stat_counter("buffers"), 1);
    assert_int_equal(stat_counter("buffer_bytes"), l.end);

    /* the inline run */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    assert_int_equal(attn_run(g_c, &a, &ref), 0);
    assert_int_equal(ref.o.len, g_rb.o_elems * 4);

    /* the same by reference: O and LSE land in the buffer, not the reply */
    ref_args(&a, id, &l);
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    assert_int_equal(rep.o.len, 0);
    assert_int_equal(rep.o_ref.buf, id);
    assert_int_equal(rep.o_ref.offset, l.o);
    assert_int_equal(rep.o_ref.bytes, g_rb.o_elems * 4);
    assert_true(rep.has_lse);
    assert_int_equal(rep.lse.len, 0);
    assert_int_equal(rep.lse_ref.offset, l.lse);
    assert_memory_equal(s.p + l.o, ref.o.data, ref.o.len);
    assert_memory_equal(s.p + l.lse, ref.lse.data, ref.lse.len);
    attn_reply_free(&rep);

    /* inputs by reference, outputs inline */
    ref_args(&a, id, &l);
    memset(&a.o_ref, 0, sizeof a.o_ref);
    memset(&a.lse_ref, 0, sizeof a.lse_ref);
    a.return_lse = true;
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    assert_int_equal(rep.o.len, ref.o.len);
    assert_memory_equal(rep.o.data, ref.o.data, ref.o.len);
    assert_memory_equal(rep.lse.data, ref.lse.data, ref.lse.len);
    attn_reply_free(&rep);
    attn_reply_free(&ref);

    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(stat_counter("buffers"), 0);
    assert_int_equal(stat_counter("buffer_bytes"), 0);
    shm_free(&s);
}

/* One refused run: its code and field; pool and output bytes unchanged. */
static void expect_run(const attn_run_args *a, int code, const char *field, const shm_obj *s,
                       const layout *l)
{
    attn_reply rep;
    uint64_t before = pool_checksum();
    uint64_t out_before = attn_rb_checksum(s->p + l->o, l->end - l->o);
    assert_int_equal(attn_run(g_c, a, &rep), code);
    assert_string_equal(rep.error.field, field);
    attn_reply_free(&rep);
    assert_int_equal(pool_checksum(), before);
    assert_int_equal(attn_rb_checksum(s->p + l->o, l->end - l->o), out_before);
}

static void expect_register(attn_client *c, const char *name, uint64_t bytes, int code,
                            const char *field)
{
    attn_reply rep;
    uint64_t id = 7;
    assert_int_equal(attn_buffer_register_shm(c, name, bytes, &id, &rep), code);
    assert_int_equal(id, 0);
    assert_string_equal(rep.error.field, field);
    attn_reply_free(&rep);
}

static void test_bad_references(void **state)
{
    attn_run_args a;
    attn_reply rep;
    layout l = lay_out();
    shm_obj s, sb;
    (void)state;
    shm_make(&s, "bad", l.end);
    shm_make(&sb, "other", l.end);
    fill(&s, &l);
    fill(&sb, &l);
    uint64_t id = register_shm(g_c, &s, l.end);
    uint64_t other = register_shm(g_b, &sb, l.end); /* connection B's */

    ref_args(&a, id, &l);
    a.q_ref.buf = id + 100;
    expect_run(&a, ATTN_E_UNKNOWN_BUFFER, "q.buf", &s, &l);
    ref_args(&a, id, &l);
    a.k_new_ref.buf = other;
    expect_run(&a, ATTN_E_UNKNOWN_BUFFER, "k_new.buf", &s, &l);
    ref_args(&a, id, &l);
    a.v_new_ref.offset = l.end + 1;
    expect_run(&a, ATTN_E_BUFFER_RANGE, "v_new.offset", &s, &l);
    ref_args(&a, id, &l);
    a.q_ref.offset = l.end - g_rb.q_bytes + 1;
    expect_run(&a, ATTN_E_BUFFER_RANGE, "q.bytes", &s, &l);
    ref_args(&a, id, &l);
    a.lse_ref.offset = UINT64_MAX - 2; /* offset + bytes wraps */
    expect_run(&a, ATTN_E_BUFFER_RANGE, "lse.offset", &s, &l);
    ref_args(&a, id, &l);
    a.q_ref.bytes -= 4;
    expect_run(&a, ATTN_E_SHAPE, "q", &s, &l);
    ref_args(&a, id, &l);
    a.o_ref.bytes += 4;
    expect_run(&a, ATTN_E_SHAPE, "o", &s, &l);
    ref_args(&a, id, &l);
    a.o_ref.offset = l.v; /* O would overwrite v_new while it is read */
    expect_run(&a, ATTN_E_BUFFER_RANGE, "o", &s, &l);
    ref_args(&a, id, &l);
    a.lse_ref.offset = l.o;
    expect_run(&a, ATTN_E_BUFFER_RANGE, "lse", &s, &l);

    /* another connection's buffer cannot be dropped either */
    assert_int_equal(attn_buffer_drop(g_c, other, &rep), ATTN_E_UNKNOWN_BUFFER);
    assert_string_equal(rep.error.field, "buf");
    attn_reply_free(&rep);

    /* a dropped id stays refused */
    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    ref_args(&a, id, &l);
    expect_run(&a, ATTN_E_UNKNOWN_BUFFER, "q.buf", &s, &l);
    assert_int_equal(attn_buffer_drop(g_c, id, &rep), ATTN_E_UNKNOWN_BUFFER);
    assert_string_equal(rep.error.field, "buf");
    attn_reply_free(&rep);

    /* an object of another user is refused (needs the right to chown: root) */
    {
        shm_obj other_user;
        shm_make(&other_user, "uid", 4096);
        int fd = shm_open(other_user.name, O_RDWR, 0);
        assert_true(fd >= 0);
        if (fchown(fd, 65534, 65534) == 0)
            expect_register(g_c, other_user.name, 4096, ATTN_E_IO, "name");
        close(fd);
        shm_free(&other_user);
    }

    /* registrations */
    expect_register(g_c, "/attn-test-does-not-exist", 4096, ATTN_E_IO, "name");
    expect_register(g_c, "no-slash", 4096, ATTN_E_RANGE, "name");
    expect_register(g_c, "/..", 4096, ATTN_E_RANGE, "name");
    expect_register(g_c, s.name, l.end + 1, ATTN_E_BUFFER_RANGE, "bytes");
    expect_register(g_c, s.name, MAX_BUFFER_BYTES + 1ull, ATTN_E_TOO_LARGE, "bytes");
    expect_register(g_c, s.name, 0, ATTN_E_RANGE, "bytes");
    {
        /* cuda_ipc is parsed and validated, then refused plainly: this attnd runs the CPU engine
         * only */
        attn_request req;
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_BUFFER_REGISTER;
        req.buffer.kind = ATTN_BUFFER_CUDA_IPC;
        req.buffer.bytes = 4096;
        snprintf(req.buffer.device, sizeof req.buffer.device, "cuda:0");
        assert_int_equal(call(g_c, &req, &rep), ATTN_E_BUFFER_UNSUPPORTED);
        assert_string_equal(rep.error.field, "kind");
        assert_non_null(strstr(rep.error.message, "CUDA"));
        attn_reply_free(&rep);
        snprintf(req.buffer.device, sizeof req.buffer.device, "gpu0");
        assert_int_equal(call(g_c, &req, &rep), ATTN_E_RANGE);
        assert_string_equal(rep.error.field, "device");
        attn_reply_free(&rep);
    }
    /* too many: B holds one, A fills the rest; the next is refused by name */
    uint64_t ids[MAX_BUFFERS];
    for (int i = 0; i < MAX_BUFFERS - 1; i++)
        ids[i] = register_shm(g_c, &s, 4096);
    expect_register(g_c, s.name, 4096, ATTN_E_BUSY, "max_buffers");
    for (int i = 0; i < MAX_BUFFERS - 1; i++) {
        assert_int_equal(attn_buffer_drop(g_c, ids[i], &rep), 0);
        attn_reply_free(&rep);
    }
    /* too many bytes together: B's buffer plus one that would pass the cap */
    {
        shm_obj big;
        shm_make(&big, "big", MAX_BUFFER_BYTES);
        expect_register(g_c, big.name, MAX_BUFFER_BYTES - l.end + 1, ATTN_E_BUSY,
                        "max_buffer_bytes");
        uint64_t fits = register_shm(g_c, &big, MAX_BUFFER_BYTES - l.end);
        assert_int_equal(attn_buffer_drop(g_c, fits, &rep), 0);
        attn_reply_free(&rep);
        shm_free(&big);
    }
    assert_int_equal(attn_buffer_drop(g_b, other, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(stat_counter("buffers"), 0);
    shm_free(&s);
    shm_free(&sb);
}

/* A connection that closes has its buffers released; a run in progress on
 * another connection is not disturbed, and attnd keeps serving. */
static void test_close_releases(void **state)
{
    attn_client *c;
    attn_reply rep;
    shm_obj s;
    (void)state;
    shm_make(&s, "close", 8192);
    uint64_t released = stat_counter("buffers_released_on_close");
    assert_int_equal(attn_client_open(&c, g_d.url), 0);
    register_shm(c, &s, 4096);
    register_shm(c, &s, 8192);
    assert_int_equal(stat_counter("buffers"), 2);
    assert_int_equal(stat_counter("buffer_bytes"), 4096 + 8192);
    attn_client_close(c);
    /* the pipe's close reaches attnd asynchronously */
    for (int i = 0; i < 500 && stat_counter("buffers_released_on_close") < released + 2; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    assert_int_equal(stat_counter("buffers_released_on_close"), released + 2);
    assert_int_equal(stat_counter("buffers"), 0);
    assert_int_equal(stat_counter("buffer_bytes"), 0);
    assert_int_equal(attn_hello(g_c, &rep), 0);
    attn_reply_free(&rep);
    shm_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_by_reference_bitexact),
        cmocka_unit_test(test_bad_references),
        cmocka_unit_test(test_close_releases),
    };
    if (getenv("ATTND") == NULL) {
        printf("[  SKIPPED ] test_buffers: ATTND is not set (run through make integration)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
