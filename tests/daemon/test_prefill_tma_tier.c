/* The prefill kernel's load-tier gate (attn_cuda_prefill_tma_tier) and V's
 * box rule (attn_cuda_prefill_v_page_boxes), on any
 * machine: which K/V stores take the TMA tier and which the cp.async gather
 * (host logic only, no GPU; skipped in a CUDA=0 build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#ifdef ATTN_WITH_CUDA
#include "kernels/cuda/prefill_launch.h"

/* Params of a paged store of page size P at head dim d; K and V at
 * 256-byte aligned addresses that are never dereferenced. */
static attn_cuda_prefill_params paged(attn_kv_addr_kind kind, int64_t P, uint32_t d)
{
    attn_cuda_prefill_params p;
    memset(&p, 0, sizeof p);
    p.head_dim = d;
    p.kv.kind = kind;
    p.kv.layout = ATTN_NHD;
    p.kv.num_kv_heads = 8;
    p.kv.page_size = P;
    p.kv.num_pages = 1000;
    p.k = (const void *)(uintptr_t)0x10000;
    p.v = (const void *)(uintptr_t)0x20000;
    return p;
}
#endif

/* Powers of two from 8 up to the key tile (128 at d 64/128, 64 at d 256):
 * TMA; page 1, a page that is not a power of two, or one larger than the
 * key tile: the gather. */
static void test_page_sizes(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    static const struct {
        int64_t P;
        uint32_t d;
        int tma;
    } k_cases[] = {
        {1, 128, 0},  {4, 128, 0},   {8, 128, 1},   {12, 128, 0}, {16, 128, 1},
        {64, 128, 1}, {128, 128, 1}, {256, 128, 0}, {16, 64, 1},  {128, 64, 1},
        {64, 256, 1}, {128, 256, 0}, {16, 256, 1},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        attn_cuda_prefill_params p = paged(ATTN_KV_ADDR_PAGED_CSR, k_cases[i].P, k_cases[i].d);
        assert_int_equal(attn_cuda_prefill_tma_tier(&p), k_cases[i].tma);
        p.kv.kind = ATTN_KV_ADDR_PAGED_DENSE; /* the dense table: the same rule */
        assert_int_equal(attn_cuda_prefill_tma_tier(&p), k_cases[i].tma);
        p.kv.layout = ATTN_HND; /* both layouts */
        assert_int_equal(attn_cuda_prefill_tma_tier(&p), k_cases[i].tma);
    }
#endif
}

/* Contiguous and ragged stores, gather_only, a base not 16-byte aligned
 * and an empty or 2^31-page store all take the gather. */
static void test_everything_else_gathers(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    attn_cuda_prefill_params p = paged(ATTN_KV_ADDR_CONTIG, 16, 128);
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p.kv.kind = ATTN_KV_ADDR_RAGGED;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p = paged(ATTN_KV_ADDR_PAGED_CSR, 16, 128);
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 1);
    p.gather_only = 1;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p.gather_only = 0;
    p.k = (const void *)(uintptr_t)0x10008;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p.k = (const void *)(uintptr_t)0x10000;
    p.v = (const void *)(uintptr_t)0x20004;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p.v = (const void *)(uintptr_t)0x20000;
    p.kv.num_pages = 0;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
    p.kv.num_pages = (int64_t)INT32_MAX + 1;
    assert_int_equal(attn_cuda_prefill_tma_tier(&p), 0);
#endif
}

/* V's whole-page boxes (attn_cuda_prefill_v_page_boxes): only on the TMA
 * tier, at d >= 128, pages of >= 16 rows; v_chunk_boxes turns them off. */
static void test_v_page_boxes(void **state)
{
    (void)state;
#ifndef ATTN_WITH_CUDA
    skip();
#else
    static const struct {
        int64_t P;
        uint32_t d;
        int pages;
    } k_cases[] = {
        {8, 128, 0},  {16, 128, 1},  {16, 64, 0}, {32, 128, 1},  {16, 256, 1},
        {64, 256, 1}, {128, 128, 1}, {1, 128, 0}, {128, 256, 0}, /* no tier: page 1, > key tile */
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        attn_cuda_prefill_params p = paged(ATTN_KV_ADDR_PAGED_CSR, k_cases[i].P, k_cases[i].d);
        assert_int_equal(attn_cuda_prefill_v_page_boxes(&p), k_cases[i].pages);
        p.kv.layout = ATTN_HND;
        assert_int_equal(attn_cuda_prefill_v_page_boxes(&p), k_cases[i].pages);
        p.v_chunk_boxes = 1;
        assert_int_equal(attn_cuda_prefill_v_page_boxes(&p), 0);
        p.v_chunk_boxes = 0;
        p.variant = ATTN_PREFILL_LIGHT; /* the trials have no whole-page path */
        assert_int_equal(attn_cuda_prefill_v_page_boxes(&p), 0);
        p.variant = ATTN_PREFILL_FULL;
        p.gather_only = 1; /* the gather has no boxes */
        assert_int_equal(attn_cuda_prefill_v_page_boxes(&p), 0);
    }
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_sizes),
        cmocka_unit_test(test_everything_else_gathers),
        cmocka_unit_test(test_v_page_boxes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
