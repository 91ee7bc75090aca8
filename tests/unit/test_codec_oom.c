/* Issue 9 item 9: an allocation failure while encoding a reply is reported
 * as E_NOMEM.  The encoder or-ed msgpack-c's -1 into its error bits, which
 * set the "payload exceeds 4 GiB" bit too, so an out-of-memory reply said
 * E_TOO_LARGE with an empty field.  The failure is injected by an address
 * space limit in a child process (not under ASan, which reserves terabytes of
 * address space up front).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "attn/client.h"
#include "protocol/codec.h"

#if defined(__SANITIZE_ADDRESS__)
#define ATTN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_TEST_ASAN 1
#endif
#endif

/* The process's virtual size in bytes (/proc/self/statm), or 0. */
static size_t vm_bytes(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu", &pages) != 1)
        pages = 0;
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Child: encode a kv_read reply of 256 MiB with 64 MiB of address space
 * left; exit with the error code's magnitude (0 when it encoded). */
static int child_encode(void)
{
    const size_t payload = 256u << 20;
    void *k = calloc(1, payload); /* untouched: address space, no memory */
    attn_reply rep;
    attn_buf out = {0};
    attn_error_detail err;
    struct rlimit rl;
    int rc;
    if (k == NULL)
        return 100;
    memset(&rep, 0, sizeof rep);
    memset(&err, 0, sizeof err);
    rep.v = ATTN_PROTOCOL_VERSION;
    rep.op = ATTN_OP_KV_READ;
    rep.id = 1;
    rep.ok = true;
    snprintf(rep.pool, sizeof rep.pool, "p");
    rep.k.data = k;
    rep.k.len = payload;
    rep.v_data.data = k;
    rep.v_data.len = 16;
    rl.rlim_cur = rl.rlim_max = vm_bytes() + (64u << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 101;
    rc = attn_reply_encode(&rep, &out, &err);
    if (rc == 0) {
        attn_buf_free(&out);
        return 0;
    }
    fprintf(stderr, "encode: %s field '%s': %s\n", attn_err_name(err.code), err.field, err.message);
    return -rc;
}

static void test_encode_oom_is_nomem(void **state)
{
    pid_t pid;
    int st;
    (void)state;
#ifdef ATTN_TEST_ASAN
    skip();
#endif
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_encode());
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), -ATTN_E_NOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_oom_is_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
