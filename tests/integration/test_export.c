/* Exported pools through attnd (a subprocess, libattn connections), the CPU
 * engine and shm-backed exports (docs/protocol.md "Exported pools"):
 *   - the client writes the new rows into the mapping at the addresses the
 *     export's layout gives, runs with kv_written, and gets O and LSE bit
 *     for bit those of the same run sent inline to an ordinary pool; the
 *     two pools are then byte-identical;
 *   - every bad combination gets its code and field, the pool unchanged;
 *   - lifetime: the exporter's close ends the export (name gone, kv_written
 *     refused, inline runs still served); a dropped pool's name goes while
 *     a mapping made before stays usable; the cap on exported pools.
 * Needs $ATTND (make integration).
 */
#include <errno.h>
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
#include "kernels/common/dtype.h"
#include "tests/lib/batch_call.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"
#include "tests/lib/served_batch.h"

#define MAX_EXPORTED 16 /* ATTND_MAX_EXPORTED_POOLS */

static attn_daemon_proc g_d;
static attn_client *g_c;
static attn_rb g_rb;     /* the batch; its pool "inl" is an ordinary one */
static int32_t *g_pages; /* 0, 1, ... num_pages - 1 */
static uint64_t g_plan;  /* the batch's plan on "inl" */
static uint64_t g_eplan; /* the same manifest planned on the exported pool "exp" */
static attn_pool_export g_exp;
static uint8_t *g_map; /* the client's mapping of "exp" */

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

/* FNV of every page of pool `pool`, read back through kv_read. */
static uint64_t pool_checksum(const char *pool)
{
    attn_kv_args a;
    attn_reply rep;
    uint64_t h;
    memset(&a, 0, sizeof a);
    snprintf(a.pool, sizeof a.pool, "%s", pool);
    a.pages = g_pages;
    a.num_pages = g_rb.g.num_pages;
    assert_int_equal(attn_kv_read(g_c, &a, &rep), 0);
    h = attn_rb_checksum(rep.k.data, rep.k.len) * 31 +
        attn_rb_checksum(rep.v_data.data, rep.v_data.len);
    attn_reply_free(&rep);
    return h;
}

/* The page holding logical row t of request b (the manifest's page table). */
static int64_t page_of(uint32_t b, int64_t t)
{
    const attn_kv_table *kv = &g_rb.m.kv;
    int64_t j = t / g_rb.g.page_size;
    if (kv->format == ATTN_KV_DENSE)
        return kv->block_table[(size_t)b * kv->max_blocks + (size_t)j];
    return kv->page_indices[kv->page_indptr[b] + j];
}

/* What an engine does with its own kernels: put every new row (request b,
 * row i at logical T_b + i, every K/V head) where the export's layout says. */
static void write_new_rows(uint8_t *map, const attn_pool_export *x, uint32_t layer)
{
    const attn_pool_geometry *g = &g_rb.g;
    size_t es = attn_dtype_size(g->kv_dtype);
    for (uint32_t b = 0; b < g_rb.m.num_requests; b++) {
        const attn_request_desc *q = &g_rb.m.requests[b];
        for (int64_t i = 0; i < q->new_len; i++) {
            int64_t t = q->cache_len + i, page = page_of(b, t), slot = t % g->page_size;
            size_t row = (size_t)g_rb.m.qo_indptr[b] + (size_t)i;
            for (uint32_t h = 0; h < g->num_kv_heads; h++) {
                uint8_t *kd = map + x->k_offset + layer * x->layer_stride +
                              page * x->page_stride_k + slot * x->row_stride_k +
                              h * x->head_stride_k;
                uint8_t *vd = map + x->v_offset + layer * x->layer_stride +
                              page * x->page_stride_v + slot * x->row_stride_v +
                              h * x->head_stride_v;
                memcpy(kd,
                       (const uint8_t *)g_rb.k_new +
                           (row * g->num_kv_heads + h) * g->head_dim_qk * es,
                       g->head_dim_qk * es);
                memcpy(vd,
                       (const uint8_t *)g_rb.v_new +
                           (row * g->num_kv_heads + h) * g->head_dim_vo * es,
                       g->head_dim_vo * es);
            }
        }
    }
}

/* Create pool `name` with the batch's geometry, exported, on client c. */
static int create_exported(attn_client *c, const char *name, attn_pool_export *x)
{
    attn_pool_geometry g = g_rb.g;
    attn_reply rep;
    snprintf(g.name, sizeof g.name, "%s", name);
    int rc = attn_pool_create_exported(c, &g, &rep);
    if (rc == 0 && x != NULL)
        *x = rep.exp;
    attn_reply_free(&rep);
    return rc;
}

/* Write the batch's whole K/V history into pool `name` (kv_write). */
static void write_history(const char *name)
{
    attn_request req;
    attn_reply rep;
    attn_rb_kv_write_all(&g_rb, g_pages, &req);
    snprintf(req.kv.pool, sizeof req.kv.pool, "%s", name);
    memset(&rep, 0, sizeof rep);
    assert_int_equal(attn_call(g_c, &req, &rep), 0);
    attn_reply_free(&rep);
}

/* Plan the batch's manifest on pool `name`. */
static uint64_t plan_on(const char *name)
{
    attn_manifest m = g_rb.m;
    attn_reply rep;
    snprintf(m.pool, sizeof m.pool, "%s", name);
    assert_int_equal(attn_plan(g_c, &m, &rep), 0);
    uint64_t id = rep.plan_id;
    attn_reply_free(&rep);
    return id;
}

static int setup(void **state)
{
    attn_error_detail e;
    (void)state;
    const char *extra[] = {"--engine", "cpu", NULL};
    if (attn_daemon_start(&g_d, NULL, extra) != 0 || attn_client_open(&g_c, g_d.url) != 0)
        return -1;
    if (attn_served_batch(g_c, &g_rb, 6, 91, "inl", &g_pages, &g_plan) != 0)
        return -1;
    if (create_exported(g_c, "exp", &g_exp) != 0 ||
        attn_pool_export_map_shm(&g_exp, (void **)&g_map, &e) != 0)
        return -1;
    write_history("exp");
    g_eplan = plan_on("exp");
    return 0;
}

static int teardown(void **state)
{
    int st = -1;
    (void)state;
    if (g_map != NULL)
        munmap(g_map, g_exp.bytes);
    attn_client_close(g_c);
    attn_daemon_stop(&g_d, 0, &st);
    attn_daemon_cleanup(&g_d);
    attn_rb_free(&g_rb);
    free(g_pages);
    return st == 0 ? 0 : -1;
}

static void test_export_describes_the_layout(void **state)
{
    const attn_pool_geometry *g = &g_rb.g;
    size_t es = attn_dtype_size(g->kv_dtype);
    (void)state;
    assert_int_equal(g_exp.kind, ATTN_BUFFER_SHM);
    assert_string_equal(g_exp.device, "cpu");
    assert_true(strncmp(g_exp.name, "/attnd-", 7) == 0);
    assert_int_equal(g_exp.kv_dtype, g->kv_dtype);
    assert_int_equal(g_exp.layout, g->layout);
    assert_int_equal(g_exp.page_stride_k,
                     (uint64_t)g->page_size * g->num_kv_heads * g->head_dim_qk * es);
    assert_int_equal(g_exp.page_stride_v,
                     (uint64_t)g->page_size * g->num_kv_heads * g->head_dim_vo * es);
    /* every store 256-aligned, the layers one stride apart, all inside the mapping */
    assert_int_equal(g_exp.k_offset % 256, 0);
    assert_int_equal(g_exp.v_offset % 256, 0);
    assert_int_equal(g_exp.layer_stride % 256, 0);
    assert_true(g_exp.v_offset >= g_exp.k_offset + g_exp.page_stride_k * g->num_pages);
    assert_true(g_exp.bytes >= g_exp.layer_stride * g->layers);
    assert_int_equal(stat_counter("pools_exported"), 1);
}

static void test_kv_written_equals_inline_bitexact(void **state)
{
    attn_run_args a;
    attn_reply ref, rep;
    (void)state;
    /* the inline run on the ordinary pool: attnd appends and commits */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    assert_int_equal(attn_run(g_c, &a, &ref), 0);

    /* the engine's way: rows into the mapping, then a run without them */
    write_new_rows(g_map, &g_exp, 0);
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_eplan;
    a.k_new = a.v_new = (attn_bytes){NULL, 0};
    a.kv_written = true;
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    assert_int_equal(rep.o.len, ref.o.len);
    assert_memory_equal(rep.o.data, ref.o.data, ref.o.len);
    assert_int_equal(rep.lse.len, ref.lse.len);
    assert_memory_equal(rep.lse.data, ref.lse.data, ref.lse.len);
    attn_reply_free(&rep);
    attn_reply_free(&ref);
    /* what the inline run committed is what the client wrote */
    assert_true(pool_checksum("inl") == pool_checksum("exp"));
    /* and attnd's view of the pool is the client's mapping */
    attn_kv_args k;
    memset(&k, 0, sizeof k);
    snprintf(k.pool, sizeof k.pool, "exp");
    k.pages = g_pages;
    k.num_pages = 1;
    assert_int_equal(attn_kv_read(g_c, &k, &rep), 0);
    assert_memory_equal(rep.k.data, g_map + g_exp.k_offset, g_exp.page_stride_k);
    attn_reply_free(&rep);
}

/* An asynchronous kv_written run (q and O in a shm buffer): the same O as
 * the synchronous one, once run_status says done. */
static void test_async_kv_written(void **state)
{
    char name[64];
    attn_reply rep, ref;
    attn_run_args a;
    uint64_t id = 0;
    size_t o_bytes = g_rb.o_elems * 4, bytes = 256 + g_rb.q_bytes + o_bytes + 256;
    (void)state;
    snprintf(name, sizeof name, "/attn-test-%d-akv", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    close(fd);
    uint64_t q_off = 256, o_off = (q_off + g_rb.q_bytes + 255) & ~255ull;
    memcpy(m + q_off, g_rb.q, g_rb.q_bytes);
    memset(m + o_off, 0xff, o_bytes); /* NaN until attnd writes O */
    assert_int_equal(attn_buffer_register_shm(g_c, name, bytes, &id, &rep), 0);
    attn_reply_free(&rep);
    /* the synchronous kv_written run: the reference (the rows are in place) */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_eplan;
    a.k_new = a.v_new = (attn_bytes){NULL, 0};
    a.kv_written = true;
    uint64_t before = pool_checksum("exp");
    assert_int_equal(attn_run(g_c, &a, &ref), 0);
    memset(&a, 0, sizeof a);
    a.plan_id = g_eplan;
    a.kv_written = true;
    a.async = true;
    a.q_ref = (attn_tensor_ref){id, q_off, g_rb.q_bytes};
    a.o_ref = (attn_tensor_ref){id, o_off, o_bytes};
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    uint64_t seq = rep.run_seq;
    attn_reply_free(&rep);
    assert_true(seq > 0);
    attn_run_state st = ATTN_RUN_QUEUED;
    for (int i = 0; i < 500 && st != ATTN_RUN_DONE; i++) {
        assert_int_equal(attn_run_status_get(g_c, seq, &rep), 0);
        st = rep.status.state;
        attn_reply_free(&rep);
        if (st != ATTN_RUN_DONE)
            nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
    }
    assert_int_equal(st, ATTN_RUN_DONE);
    assert_memory_equal(m + o_off, ref.o.data, o_bytes);
    attn_reply_free(&ref);
    /* kv_written commits nothing of its own: the pool is as the client left it */
    assert_true(pool_checksum("exp") == before);
    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    munmap(m, bytes);
    shm_unlink(name);
}

/* One refused run: its code and field, and the exported pool unchanged. */
static void refused(attn_run_args *a, int code, const char *field)
{
    attn_reply rep;
    uint64_t before = pool_checksum("exp"), inl = pool_checksum("inl");
    assert_int_equal(attn_run(g_c, a, &rep), code);
    assert_string_equal(rep.error.field, field);
    attn_reply_free(&rep);
    assert_true(pool_checksum("exp") == before);
    assert_true(pool_checksum("inl") == inl);
}

static void test_bad_combinations_refused(void **state)
{
    attn_run_args a;
    (void)state;
    /* kv_written with the rows sent too: two versions of one row */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_eplan;
    a.kv_written = true;
    refused(&a, ATTN_E_SHAPE, "k_new");
    a.k_new = (attn_bytes){NULL, 0};
    refused(&a, ATTN_E_SHAPE, "v_new");
    /* on a pool that is not exported */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    a.k_new = a.v_new = (attn_bytes){NULL, 0};
    a.kv_written = true;
    refused(&a, ATTN_E_SEMANTIC, "kv_written");
    /* with verify, whose reference needs the rows */
    a.plan_id = g_eplan;
    a.verify = true;
    refused(&a, ATTN_E_SEMANTIC, "verify");
    /* an exported pool still needs the rows when the run does not say kv_written */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_eplan;
    a.k_new = (attn_bytes){NULL, 0};
    refused(&a, ATTN_E_SHAPE, "k_new");
}

static void test_exporter_close_ends_the_export(void **state)
{
    attn_client *b;
    attn_pool_export x;
    attn_error_detail e;
    void *base = NULL;
    attn_run_args a;
    attn_reply rep;
    (void)state;
    assert_int_equal(attn_client_open(&b, g_d.url), 0);
    assert_int_equal(create_exported(b, "exp_b", &x), 0);
    assert_int_equal(attn_pool_export_map_shm(&x, &base, &e), 0);
    munmap(base, x.bytes);
    write_history("exp_b");
    uint64_t plan = plan_on("exp_b");
    attn_client_close(b);
    /* the close is seen by attnd's pipe callback, soon after */
    for (int i = 0; i < 200; i++) {
        int fd = shm_open(x.name, O_RDWR, 0);
        if (fd < 0)
            break;
        close(fd);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    assert_int_equal(attn_pool_export_map_shm(&x, &base, &e), ATTN_E_IO);
    assert_string_equal(e.field, "export.name");
    /* kv_written runs are refused; the pool itself still serves */
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = plan;
    a.k_new = a.v_new = (attn_bytes){NULL, 0};
    a.kv_written = true;
    assert_int_equal(attn_run(g_c, &a, &rep), ATTN_E_SEMANTIC);
    assert_string_equal(rep.error.field, "kv_written");
    assert_non_null(strstr(rep.error.message, "closed"));
    attn_reply_free(&rep);
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = plan;
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(attn_pool_drop(g_c, "exp_b", &rep), 0);
    attn_reply_free(&rep);
}

static void test_drop_keeps_an_existing_mapping(void **state)
{
    attn_pool_export x;
    attn_error_detail e;
    uint8_t *base = NULL;
    attn_reply rep;
    (void)state;
    uint64_t n = stat_counter("pools_exported");
    assert_int_equal(create_exported(g_c, "exp_d", &x), 0);
    assert_int_equal(stat_counter("pools_exported"), n + 1);
    assert_int_equal(attn_pool_export_map_shm(&x, (void **)&base, &e), 0);
    assert_int_equal(attn_pool_drop(g_c, "exp_d", &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(stat_counter("pools_exported"), n);
    /* no new mapping of a dropped pool; the one made before is still memory */
    void *again = NULL;
    assert_int_equal(attn_pool_export_map_shm(&x, &again, &e), ATTN_E_IO);
    base[0] = 1;
    base[x.bytes - 1] = 2;
    assert_int_equal(base[0] + base[x.bytes - 1], 3);
    munmap(base, x.bytes);
    /* the name is free again */
    assert_int_equal(create_exported(g_c, "exp_d", NULL), 0);
    assert_int_equal(attn_pool_drop(g_c, "exp_d", &rep), 0);
    attn_reply_free(&rep);
}

static void test_exported_pool_cap(void **state)
{
    attn_pool_geometry g;
    attn_reply rep;
    char name[32];
    uint32_t made = 0;
    (void)state;
    uint64_t n = stat_counter("pools_exported");
    memset(&g, 0, sizeof g);
    g.layers = 1;
    g.num_pages = 1;
    g.page_size = 1;
    g.num_kv_heads = 1;
    g.head_dim_qk = g.head_dim_vo = 4;
    g.kv_dtype = ATTN_FP32;
    g.layout = ATTN_NHD;
    for (uint64_t i = n; i < MAX_EXPORTED; i++) {
        snprintf(g.name, sizeof g.name, "cap%u", made++);
        assert_int_equal(attn_pool_create_exported(g_c, &g, &rep), 0);
        attn_reply_free(&rep);
    }
    snprintf(g.name, sizeof g.name, "cap_over");
    assert_int_equal(attn_pool_create_exported(g_c, &g, &rep), ATTN_E_BUSY);
    assert_string_equal(rep.error.field, "export");
    attn_reply_free(&rep);
    /* an ordinary pool is not held back by the export cap */
    assert_int_equal(attn_pool_create(g_c, &g, &rep), 0);
    attn_reply_free(&rep);
    assert_int_equal(attn_pool_drop(g_c, "cap_over", &rep), 0);
    attn_reply_free(&rep);
    for (uint32_t i = 0; i < made; i++) {
        snprintf(name, sizeof name, "cap%u", i);
        assert_int_equal(attn_pool_drop(g_c, name, &rep), 0);
        attn_reply_free(&rep);
    }
    assert_int_equal(stat_counter("pools_exported"), n);
}

/* An exported geometry whose padded size would wrap 64 bits is refused
 * (review 2026-12-01: attnd accepted it as a 512-byte pool, and the first
 * attend on layer 2 wrote ~6e18 bytes past the mapping). */
static void test_exported_size_overflow_refused(void **state)
{
    attn_pool_geometry g;
    attn_reply rep;
    (void)state;
    uint64_t n = stat_counter("pools_exported");
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "wrap");
    g.layers = 3;
    g.num_pages = 405025111;
    g.page_size = 42751;
    g.num_kv_heads = 101;
    g.head_dim_qk = g.head_dim_vo = 879;
    g.kv_dtype = ATTN_BF16;
    g.layout = ATTN_NHD;
    assert_int_equal(attn_pool_create_exported(g_c, &g, &rep), ATTN_E_TOO_LARGE);
    assert_string_equal(rep.error.field, "num_pages");
    attn_reply_free(&rep);
    assert_int_equal(stat_counter("pools_exported"), n);
}

/* A shm buffer's semaphores are host semaphores: the registration says so
 * and carries no GPU figure; a run that signals one reports the same. */
static void test_shm_registration_reports_host_semaphores(void **state)
{
    char name[64];
    attn_reply rep;
    attn_run_args a;
    uint64_t id = 0;
    (void)state;
    snprintf(name, sizeof name, "/attn-test-%d-sem", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    close(fd);
    assert_int_equal(attn_buffer_register_shm(g_c, name, 4096, &id, &rep), 0);
    assert_true(strncmp(rep.handoff, "host semaphores", 15) == 0);
    assert_true(rep.handoff_us == 0);
    attn_reply_free(&rep);
    attn_rb_run_args(&g_rb, &a);
    a.plan_id = g_plan;
    a.sig = (attn_sem_ref){id, 0, 1};
    assert_int_equal(attn_run(g_c, &a, &rep), 0);
    char *json = NULL;
    attn_error_detail e;
    assert_int_equal(attn_reply_diag_json(&rep, &json, &e), 0);
    assert_non_null(strstr(json, "host semaphores"));
    const char *pp = strstr(json, "\"pingpong_us\"");
    assert_non_null(pp);
    pp += strlen("\"pingpong_us\"");
    pp += strspn(pp, ": ");
    assert_true(strncmp(pp, "null", 4) == 0);
    free(json);
    attn_reply_free(&rep);
    assert_int_equal(attn_buffer_drop(g_c, id, &rep), 0);
    attn_reply_free(&rep);
    shm_unlink(name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_describes_the_layout),
        cmocka_unit_test(test_kv_written_equals_inline_bitexact),
        cmocka_unit_test(test_async_kv_written),
        cmocka_unit_test(test_bad_combinations_refused),
        cmocka_unit_test(test_exporter_close_ends_the_export),
        cmocka_unit_test(test_drop_keeps_an_existing_mapping),
        cmocka_unit_test(test_exported_pool_cap),
        cmocka_unit_test(test_exported_size_overflow_refused),
        cmocka_unit_test(test_shm_registration_reports_host_semaphores),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
