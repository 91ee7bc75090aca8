/* The IPC export of a CUDA pool (engines/cuda/ipc.h) on any machine: every
 * way it can fail names field "export", as docs/protocol.md ("Exported
 * pools", refusals) says.  Without a GPU (CI) the driver entry point is what
 * fails, which named "device" before; with one, host memory has no IPC
 * handle.  A CUDA=0 build refuses with the same field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "engines/cuda/ipc.h"

static void test_export_failure_names_export(void **state)
{
    (void)state;
    static char host_memory[256]; /* no cudaMalloc allocation: cannot be exported */
    uint8_t handle[64];
    uint64_t offset = 0;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    int rc = attn_cuda_ipc_export(0, host_memory, handle, &offset, &err);
    assert_int_not_equal(rc, 0);
    assert_int_equal(err.code, rc);
    assert_string_equal(err.field, "export");
    assert_true(strlen(err.message) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_failure_names_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
