/* The prefill benchmark glue's device-buffer bookkeeping (bench/gpu/
 * prefill_glue.c, the ctypes library bench_mixed.py and prefill_ab.py
 * load), on any machine: the glue is compiled into this test over a mock
 * CUDA runtime that allocates host memory, so ASan sees every buffer.
 * Regression: a split plan needs eleven device buffers and the table held
 * ten, so the eleventh overwrote the count and free walked wild pointers
 * (bench_mixed.py's SIGSEGV after the small step S1, H200, 2026-12-03). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#ifdef ATTN_WITH_CUDA
#include "bench/gpu/prefill_glue.c"

/* ---- the mock runtime: host memory, counted; allocation k can fail ---- */
static int g_allocs, g_frees, g_fail_at = -1;

cudaError_t cudaMalloc(void **p, size_t n)
{
    if (g_allocs == g_fail_at) {
        *p = NULL;
        return cudaErrorMemoryAllocation;
    }
    g_allocs++;
    *p = malloc(n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
    g_frees += p != NULL;
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    *dev = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev)
{
    (void)a;
    (void)dev;
    *v = 132;
    return cudaSuccess;
}

int attn_cuda_prefill_launch(const attn_cuda_prefill_params *p, void *stream)
{
    (void)p;
    (void)stream;
    return 0;
}

/* The mock's counters from zero; allocation `fail_at` fails (-1: none). */
static void reset(int fail_at)
{
    g_allocs = g_frees = 0;
    g_fail_at = fail_at;
}

/* One causal prefill of C rows (T = 0) on pages of 16, H_q 32 / H_kv 8,
 * d 128, cut into `splits` parts per m tile (0: the planner's choice). */
static attnpf *create(int64_t C, uint32_t splits, int *rv)
{
    static int64_t T[1], Cs[1];
    static int32_t qo[2], pi[2], last[1], idx[4096];
    T[0] = 0;
    Cs[0] = C;
    qo[0] = 0;
    qo[1] = (int32_t)C;
    const int32_t pages = (int32_t)((C + 15) / 16);
    pi[0] = 0;
    pi[1] = pages;
    last[0] = (int32_t)(C - (pages - 1) * 16);
    for (int32_t i = 0; i < pages; i++)
        idx[i] = i;
    return attnpf_create(1, T, Cs, qo, pi, idx, last, (uint32_t)pages, 16, 32, 8, 128,
                         ATTN_MASK_CAUSAL, NULL, NULL, NULL, NULL, 0, splits, rv);
}
#endif

/* A split plan's eleven buffers are all recorded and all freed. */
static void test_split_plan_buffers(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    reset(-1);
    int rv = -1;
    attnpf *h = create(2048, 3, &rv);
    assert_int_equal(rv, 0);
    assert_non_null(h);
    assert_true(h->plan.num_parts > 0);
    assert_int_equal(h->ndev, g_allocs);
    assert_int_equal(h->ndev, 11); /* 3 table arrays, the arena, 4 plan arrays, 3 partial states */
    attnpf_free(h);
    assert_int_equal(g_frees, g_allocs);
#endif
}

/* Without a split, eight buffers; a failed allocation anywhere makes create
 * answer ATTN_E_CUDA and free what it had (it used to pass on a NULL). */
static void test_failed_allocation(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    reset(-1);
    int rv = -1;
    attnpf *h = create(512, 1, &rv);
    assert_non_null(h);
    assert_int_equal(h->plan.num_parts, 0);
    assert_int_equal(h->ndev, 8);
    attnpf_free(h);
    for (int k = 0; k < 11; k++) {
        reset(k);
        rv = 0;
        h = create(2048, 3, &rv);
        assert_null(h);
        assert_int_equal(rv, ATTN_E_CUDA);
        assert_int_equal(g_frees, g_allocs);
    }
    reset(-1);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_plan_buffers),
        cmocka_unit_test(test_failed_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
