/* daemon/buffers.c on its own: ids are never reused; a buffer is only its
 * connection's; a run's hold keeps a dropped buffer mapped (and counted)
 * until it lets go; a connection's close releases its buffers once
 * (idempotent); the caps are checked before anything is mapped.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/buffers.h"

static void make_shm(attn_buffer_args *a, const char *tag, uint64_t bytes)
{
    memset(a, 0, sizeof *a);
    a->kind = ATTN_BUFFER_SHM;
    a->bytes = bytes;
    snprintf(a->name, sizeof a->name, "/attn-table-%d-%s", (int)getpid(), tag);
    int fd = shm_open(a->name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    close(fd);
}

static void test_ownership_holds_and_close(void **state)
{
    attnd_buffer_table *t;
    attn_buffer_args a;
    attn_error_detail err;
    attnd_buffer_stats st;
    attnd_buffer_hold h = {0};
    void *p = NULL;
    uint64_t id1 = 0, id2 = 0, id3 = 0;
    (void)state;
    assert_int_equal(attnd_buffers_create(&t, 2, 1 << 20), 0);
    make_shm(&a, "own", 4096);
    assert_int_equal(attnd_buffers_register(t, 1, -1, &a, &id1, &err), 0);
    assert_int_equal(id1, 1);

    attn_tensor_ref ref = {id1, 16, 64};
    assert_int_equal(attnd_buffers_resolve(t, 2, &ref, "q", &h, &p, NULL, NULL, &err),
                     ATTN_E_UNKNOWN_BUFFER);
    assert_string_equal(err.field, "q.buf");
    assert_non_null(strstr(err.message, "another connection"));
    assert_int_equal(h.n, 0);
    assert_int_equal(attnd_buffers_drop(t, 2, id1, &err), ATTN_E_UNKNOWN_BUFFER);

    /* held by a run, then dropped: still mapped and counted until released */
    assert_int_equal(attnd_buffers_resolve(t, 1, &ref, "q", &h, &p, NULL, NULL, &err), 0);
    assert_int_equal(attnd_buffers_drop(t, 1, id1, &err), 0);
    attnd_buffers_stats(t, &st);
    assert_int_equal(st.live, 0);
    assert_int_equal(st.bytes, 4096);
    memset(p, 0xab, 64); /* the mapping is still there */
    assert_int_equal(attnd_buffers_resolve(t, 1, &ref, "q", &h, &p, NULL, NULL, &err),
                     ATTN_E_UNKNOWN_BUFFER);
    assert_non_null(strstr(err.message, "dropped"));
    attnd_buffer_hold_release(t, &h);
    attnd_buffers_stats(t, &st);
    assert_int_equal(st.bytes, 0);

    /* ids are never reused */
    assert_int_equal(attnd_buffers_register(t, 1, -1, &a, &id2, &err), 0);
    assert_int_equal(attnd_buffers_register(t, 3, -1, &a, &id3, &err), 0);
    assert_true(id2 > id1 && id3 > id2);
    /* the count cap, before anything is mapped */
    uint64_t id4 = 0;
    assert_int_equal(attnd_buffers_register(t, 1, -1, &a, &id4, &err), ATTN_E_BUSY);
    assert_string_equal(err.field, "max_buffers");
    assert_int_equal(id4, 0);

    /* a close releases that connection's buffers once */
    assert_int_equal(attnd_buffers_drop_conn(t, 1), 1);
    assert_int_equal(attnd_buffers_drop_conn(t, 1), 0);
    attnd_buffers_stats(t, &st);
    assert_int_equal(st.live, 1);
    assert_int_equal(st.released_on_close, 1);
    assert_int_equal(st.refused, 1);
    ref.buf = id3;
    assert_int_equal(attnd_buffers_resolve(t, 3, &ref, "k_new", &h, &p, NULL, NULL, &err), 0);
    attnd_buffer_hold_release(t, &h);
    attnd_buffers_destroy(t);
    shm_unlink(a.name);
}

static void test_ranges_and_overlap(void **state)
{
    attnd_buffer_table *t;
    attn_buffer_args a;
    attn_error_detail err;
    attnd_buffer_hold h = {0};
    void *p;
    uint64_t id = 0;
    (void)state;
    assert_int_equal(attnd_buffers_create(&t, 4, 1 << 20), 0);
    make_shm(&a, "range", 1000);
    assert_int_equal(attnd_buffers_register(t, 0, -1, &a, &id, &err), 0);
    attn_tensor_ref whole = {id, 0, 1000}, past = {id, 1001, 0}, over = {id, 999, 2},
                    wrap = {id, 8, UINT64_MAX - 4}, edge = {id, 1000, 0};
    assert_int_equal(attnd_buffers_resolve(t, 0, &whole, "o", &h, &p, NULL, NULL, &err), 0);
    assert_int_equal(attnd_buffers_resolve(t, 0, &edge, "o", &h, &p, NULL, NULL, &err), 0);
    assert_int_equal(attnd_buffers_resolve(t, 0, &past, "o", &h, &p, NULL, NULL, &err),
                     ATTN_E_BUFFER_RANGE);
    assert_string_equal(err.field, "o.offset");
    assert_int_equal(attnd_buffers_resolve(t, 0, &over, "v_new", &h, &p, NULL, NULL, &err),
                     ATTN_E_BUFFER_RANGE);
    assert_string_equal(err.field, "v_new.bytes");
    assert_int_equal(attnd_buffers_resolve(t, 0, &wrap, "lse", &h, &p, NULL, NULL, &err),
                     ATTN_E_BUFFER_RANGE);
    assert_string_equal(err.field, "lse.bytes");
    assert_int_equal(h.n, 2);
    attnd_buffer_hold_release(t, &h);

    attn_tensor_ref x = {id, 0, 8}, y = {id, 8, 8}, z = {id, 7, 2}, other = {id + 1, 0, 8};
    assert_false(attnd_refs_overlap(&x, &y));
    assert_true(attnd_refs_overlap(&x, &z));
    assert_true(attnd_refs_overlap(&z, &y));
    assert_false(attnd_refs_overlap(&x, &other));
    /* another user's object is not mapped for this peer */
    uint64_t before = id;
    a.bytes = 1000;
    assert_int_equal(attnd_buffers_register(t, 5, (int64_t)getuid() + 1, &a, &id, &err), ATTN_E_IO);
    assert_string_equal(err.field, "name");
    assert_non_null(strstr(err.message, "belongs to uid"));
    assert_int_equal(attnd_buffers_register(t, 5, (int64_t)getuid(), &a, &id, &err), 0);
    assert_true(id > before);
    /* too large by itself, and a smaller object than `bytes` */
    a.bytes = (1 << 20) + 1;
    assert_int_equal(attnd_buffers_register(t, 0, -1, &a, &id, &err), ATTN_E_TOO_LARGE);
    assert_string_equal(err.field, "bytes");
    a.bytes = 1001;
    assert_int_equal(attnd_buffers_register(t, 0, -1, &a, &id, &err), ATTN_E_BUFFER_RANGE);
    assert_string_equal(err.field, "bytes");
    attnd_buffers_destroy(t);
    shm_unlink(a.name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ownership_holds_and_close),
        cmocka_unit_test(test_ranges_and_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
