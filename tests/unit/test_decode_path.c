/* The CUDA decode engine's producer choice (kernels/common/decode_path.h),
 * without a GPU: the copy-warp producer serves the bf16/fp16 launches at
 * head_dim 64/128/256 whose rows start on 16-byte boundaries, q hi + lo only
 * at head_dim 256; everything else falls back to the cp.async tensor-core
 * producer with one sentence saying why; the CUDA-core producer when asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/common/decode_path.h"

/* An NHD page-16 launch: H_kv 8, d 128, bf16 q and cache, aligned stores. */
static attn_decode_path_in nhd_launch(uint32_t d)
{
    attn_decode_path_in in;
    memset(&in, 0, sizeof in);
    in.bulk = 1;
    in.head_dim = d;
    in.kv_dtype = ATTN_BF16;
    in.q_dtype = ATTN_BF16;
    in.row_stride = 8 * (int64_t)d;
    in.head_stride = d;
    in.page_stride = 16 * 8 * (int64_t)d;
    in.page_size = 16;
    in.num_pages = 1000;
    in.k_addr = 0x7f0000000000ull;
    in.v_addr = 0x7f0000100000ull;
    return in;
}

static void expect(const attn_decode_path_in *in, attn_decode_producer want, const char *why_has)
{
    const char *why = "unset";
    assert_int_equal(attn_decode_path_pick(in, &why), want);
    if (why_has == NULL) {
        assert_null(why);
    } else {
        assert_non_null(why);
        assert_non_null(strstr(why, why_has));
    }
    assert_int_equal(attn_decode_path_pick(in, NULL), want); /* why may be NULL */
}

static void test_bulk_serves_every_head_dim_layout_and_page(void **state)
{
    (void)state;
    static const uint32_t dims[] = {64, 128, 256};
    static const uint32_t pages[] = {1, 2, 16, 64, 128};
    static const attn_dtype dts[] = {ATTN_BF16, ATTN_FP16};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 5; j++)
            for (size_t k = 0; k < 2; k++)
                for (int hnd = 0; hnd < 2; hnd++) {
                    attn_decode_path_in in = nhd_launch(dims[i]);
                    in.kv_dtype = in.q_dtype = dts[k];
                    const int64_t d = dims[i], P = pages[j], H = 8;
                    in.page_stride = P * H * d;
                    in.row_stride = hnd ? d : H * d;
                    in.head_stride = hnd ? P * d : d;
                    expect(&in, ATTN_DECODE_TC_BULK, NULL);
                }
}

static void test_copy_warps(void **state)
{
    (void)state;
    static const uint32_t dims[] = {64, 128, 256};
    for (size_t i = 0; i < 3; i++) {
        attn_decode_path_in in = nhd_launch(dims[i]);
        in.bulk = 4;
        expect(&in, ATTN_DECODE_TC_BULK, NULL);
        in.bulk = 2;
        expect(&in, dims[i] == 128 ? ATTN_DECODE_TC_BULK : ATTN_DECODE_TC,
               dims[i] == 128 ? NULL : "head_dim 128 only");
        in.bulk = 3;
        expect(&in, ATTN_DECODE_TC, "1, 2 or 4 copy warps");
        in.bulk = 8;
        expect(&in, ATTN_DECODE_TC_BULK, NULL);
        in.bulk = -2;
        expect(&in, ATTN_DECODE_TC, "1, 2 or 4 copy warps");
    }
}

static void test_tensor_maps(void **state)
{
    (void)state;
    static const uint32_t pages[] = {1, 2, 4, 8, 16, 64, 128};
    for (size_t i = 0; i < 7; i++) {
        attn_decode_path_in in = nhd_launch(128);
        in.bulk = 8;
        in.page_size = pages[i];
        in.page_stride = (int64_t)pages[i] * 8 * 128;
        if (pages[i] >= 8)
            expect(&in, ATTN_DECODE_TC_BULK, NULL);
        else
            expect(&in, ATTN_DECODE_TC, "pages of 8 rows or more");
    }
    attn_decode_path_in in = nhd_launch(64);
    in.bulk = 8;
    in.num_pages = 0;
    expect(&in, ATTN_DECODE_TC, "page count");
    in = nhd_launch(256);
    in.bulk = 8;
    in.q_dtype = ATTN_FP32;
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
}

/* auto: the measured best per head dim (decode_path.h) */
static void test_auto_choice(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
    in.page_size = 4;
    in.page_stride = 4 * 8 * 128;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    expect(&in, ATTN_DECODE_TC, NULL);
    /* d 256: tensor maps three stages deep; the four row-copy warps for
     * short items, pages under 8 rows and q hi + lo */
    in = nhd_launch(256);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS;
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS - 1;
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    in.keys_per_item = 0;
    in.q_dtype = ATTN_FP32;
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
    in.q_dtype = ATTN_BF16;
    in.page_size = 4;
    in.page_stride = 4 * 8 * 256;
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
    in = nhd_launch(64);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    expect(&in, ATTN_DECODE_TC, NULL);
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.q_dtype = ATTN_FP32; /* the choice stands, the hi + lo rule falls back */
    expect(&in, ATTN_DECODE_TC, "hi + lo");
    in.bulk = 4; /* an explicit value is kept */
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    /* short work items keep the cp.async producer at d = 128 */
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS - 1;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS;
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    in.keys_per_item = 0; /* unknown */
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    /* short items on a grid of at most one CTA per SM: four row-copy warps */
    in.keys_per_item = 256;
    in.sm_count = 132;
    in.pieces = 128;
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
    in.pieces = 132;
    assert_int_equal(attn_decode_path_bulk(&in), 4);
    in.pieces = 133; /* two CTAs per SM are resident: cp.async */
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    in.pieces = 0; /* unknown */
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    in.pieces = 128;
    in.sm_count = 0;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    in.sm_count = 132;
    in.page_size = 4; /* not measured below 8 rows */
    in.page_stride = 4 * 8 * 128;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
    in = nhd_launch(64); /* head_dim 64 keeps cp.async */
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.keys_per_item = 256;
    in.sm_count = 132;
    in.pieces = 64;
    assert_int_equal(attn_decode_path_bulk(&in), 0);
}

static void test_keys_per_item(void **state)
{
    (void)state;
    attn_work_item it[3];
    memset(it, 0, sizeof it);
    it[0].kv_begin = 0, it[0].kv_end = 256;
    it[1].kv_begin = 256, it[1].kv_end = 1024;
    it[2].kv_begin = 5, it[2].kv_end = 5; /* an empty item counts */
    assert_int_equal(attn_decode_keys_per_item(it, 3), 1024 / 3);
    assert_int_equal(attn_decode_keys_per_item(it, 0), 0);
}

static void test_bulk_off_or_simt(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.bulk = 0;
    expect(&in, ATTN_DECODE_TC, NULL);
    in.simt = 1;
    expect(&in, ATTN_DECODE_SIMT, NULL);
    in.bulk = 1; /* simt wins over the copy warp */
    expect(&in, ATTN_DECODE_SIMT, NULL);
}

static void test_q_hi_lo_only_at_d256(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.q_dtype = ATTN_FP32;
    expect(&in, ATTN_DECODE_TC, "fewer CTAs per SM");
    in = nhd_launch(64);
    in.q_dtype = ATTN_FP16; /* any q dtype other than the cache's */
    expect(&in, ATTN_DECODE_TC, "hi + lo");
    in = nhd_launch(256);
    in.q_dtype = ATTN_FP32;
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
}

static void test_fallbacks_name_the_reason(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(96);
    expect(&in, ATTN_DECODE_TC, "head_dim");
    in = nhd_launch(128);
    in.kv_dtype = in.q_dtype = ATTN_FP32;
    expect(&in, ATTN_DECODE_TC, "2-byte");
    in = nhd_launch(128);
    in.row_stride = 8 * 128 + 4; /* 8 bytes past a 16-byte boundary */
    expect(&in, ATTN_DECODE_TC, "row or head stride");
    in = nhd_launch(128);
    in.head_stride = 132;
    expect(&in, ATTN_DECODE_TC, "16-byte boundary");
    in = nhd_launch(128);
    in.page_stride += 4;
    expect(&in, ATTN_DECODE_TC, "16-byte boundary");
    in = nhd_launch(128);
    in.v_addr += 8;
    expect(&in, ATTN_DECODE_TC, "not 16-byte aligned");
    in = nhd_launch(128);
    in.k_addr = 0; /* not bound yet (the dispatch diagnostic asks before a run) */
    in.v_addr = 0;
    expect(&in, ATTN_DECODE_TC_BULK, NULL);
}

/* persistent CTAs: only where the tensor-map producer runs at d = 128 with
 * q in the cache dtype, never more CTAs than pieces */
static void test_persist(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 264);
    assert_int_equal(attn_decode_path_persist(&in, 264, 100), 100);
    assert_int_equal(attn_decode_path_persist(&in, 264, 0), 0);
    assert_int_equal(attn_decode_path_persist(&in, 0, 1024), 0); /* off */
    in.bulk = ATTN_DECODE_BULK_AUTO;                             /* auto picks tensor maps */
    assert_int_equal(attn_decode_path_persist(&in, 7, 1024), 7);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS - 1; /* auto: cp.async for short items */
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
    in = nhd_launch(128);
    in.bulk = 1; /* row copies */
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.page_size = 4; /* tensor maps need 8 rows: the cp.async producer runs */
    in.page_stride = 4 * 8 * 128;
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.q_dtype = ATTN_FP32;
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
    static const uint32_t dims[] = {64, 256};
    for (int i = 0; i < 2; i++) {
        in = nhd_launch(dims[i]);
        in.bulk = ATTN_DECODE_BULK_TMAP;
        assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
    }
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.simt = 1;
    assert_int_equal(attn_decode_path_persist(&in, 264, 1024), 0);
}

/* Keys as the mma's M rows: groups of 1..8 heads with q in the cache dtype,
 * on the cp.async and tensor-map producers at head_dim 64 and 128 and the
 * four row-copy warps at 256; nothing else. */
static void test_keys_as_rows(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    static const uint32_t yes[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        in.group = yes[i];
        assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    }
    static const uint32_t no[] = {0, 9, 16, 32};
    for (int i = 0; i < 4; i++) {
        in.group = no[i];
        assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    }
    in = nhd_launch(64);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.group = 4;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in = nhd_launch(256); /* d 256: the tensor maps and the four row-copy warps */
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.group = 4;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.bulk = 4;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.bulk = 1;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in.bulk = ATTN_DECODE_BULK_AUTO; /* auto at d 256, page 16: tensor maps */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS - 1; /* short items: the row-copy warps */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.group = 16;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in = nhd_launch(128);
    in.group = 4;
    in.bulk = 4; /* the row-copy producer keeps the heads as rows */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in.bulk = ATTN_DECODE_BULK_AUTO; /* auto picks tensor maps at d 128, page 16 */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.keys_per_item = ATTN_DECODE_TMAP_MIN_KEYS - 1; /* short items too (auto_with_keys_as_rows) */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.group = 4;
    in.q_dtype = ATTN_FP32; /* q hi + lo */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in.q_dtype = ATTN_BF16;
    in.page_size = 4; /* tensor maps need pages of 8 rows: the cp.async producer's keys as rows */
    in.page_stride = 4 * 8 * 128;
    assert_int_equal(attn_decode_path_pick(&in, NULL), ATTN_DECODE_TC);
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.bulk = 0; /* asked for */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.group = 9;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in = nhd_launch(256);
    in.group = 4;
    in.bulk = 0; /* d 256's cp.async producer keeps the heads as rows */
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
    in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    in.group = 4;
    in.simt = 1;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 0);
}

/* Auto with keys as rows: tensor maps at head_dim 128 whatever the item
 * length; at head_dim 64 the plan takes them for a batch that fits one
 * wave of their 2 CTAs per SM, the cp.async producer otherwise. */
static void test_auto_with_keys_as_rows(void **state)
{
    (void)state;
    attn_decode_path_in in = nhd_launch(128);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.keys_per_item = 64;
    in.pieces = 100;
    in.sm_count = 132;
    assert_int_equal(attn_decode_path_bulk(&in), 4); /* heads as rows: short items, one wave */
    in.group = 4;
    assert_int_equal(attn_decode_path_bulk(&in), ATTN_DECODE_BULK_TMAP);
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.group = 16; /* heads as rows again */
    assert_int_equal(attn_decode_path_bulk(&in), 4);

    in = nhd_launch(64);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.group = 4;
    in.sm_count = 132;
    assert_int_equal(attn_decode_path_bulk(&in), 0); /* launch time: cp.async */
    assert_int_equal(attn_decode_path_plan_bulk(&in, 1), ATTN_DECODE_BULK_TMAP);
    assert_int_equal(attn_decode_path_plan_bulk(&in, 264), ATTN_DECODE_BULK_TMAP);
    assert_int_equal(attn_decode_path_plan_bulk(&in, 265), ATTN_DECODE_BULK_AUTO);
    assert_int_equal(attn_decode_path_plan_bulk(&in, 0), ATTN_DECODE_BULK_AUTO);
    in.bulk = ATTN_DECODE_BULK_TMAP;
    assert_int_equal(attn_decode_path_keys_as_rows(&in), 1);
    in.bulk = 4; /* asked for: kept */
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), 4);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.group = 16;
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), ATTN_DECODE_BULK_AUTO);
    in.group = 4;
    in.page_size = 4; /* no tensor maps under 8 rows */
    in.page_stride = 4 * 8 * 64;
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), ATTN_DECODE_BULK_AUTO);
    in = nhd_launch(64);
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.group = 4;
    in.q_dtype = ATTN_FP32;
    in.sm_count = 132;
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), ATTN_DECODE_BULK_AUTO);
    in.q_dtype = ATTN_BF16;
    in.sm_count = 0; /* unknown */
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), ATTN_DECODE_BULK_AUTO);
    in = nhd_launch(128); /* head_dim 128: the launch decides */
    in.bulk = ATTN_DECODE_BULK_AUTO;
    in.group = 4;
    in.sm_count = 132;
    assert_int_equal(attn_decode_path_plan_bulk(&in, 16), ATTN_DECODE_BULK_AUTO);
}

/* The K/V bytes of a launch's items and the L2 rule of the tensor-map
 * copies (issue 13 round 11): evict_first only where the K/V exceed the L2. */
static void test_l2_evict_first(void **state)
{
    (void)state;
    /* B 2 x T 2048 split in two, H_kv 8, d 128, bf16: 2 x 2048 keys x 8 x 128 x 2 B x (K, V) */
    const attn_work_item items[4] = {
        {.req = 0, .slot = 0, .kv_begin = 0, .kv_end = 1024},
        {.req = 0, .slot = 1, .kv_begin = 1024, .kv_end = 2048},
        {.req = 1, .slot = 2, .kv_begin = 0, .kv_end = 1000},
        {.req = 1, .slot = 3, .kv_begin = 1000, .kv_end = 2048},
    };
    const uint64_t b2 = attn_decode_kv_bytes(items, 4, 8, 128, 2);
    assert_int_equal(b2, (uint64_t)4096 * 8 * 128 * 2 * 2);
    assert_int_equal(attn_decode_kv_bytes(items, 0, 8, 128, 2), 0);
    assert_int_equal(attn_decode_kv_bytes(items, 1, 1, 64, 4), (uint64_t)1024 * 64 * 4 * 2);
    const uint64_t l2 = 60ull << 20;                                      /* the H200's */
    assert_int_equal(attn_decode_path_l2_evict_first(-1, b2, l2), 0);     /* 16.8 MB stay */
    assert_int_equal(attn_decode_path_l2_evict_first(-1, b2 * 8, l2), 1); /* 134 MB stream */
    assert_int_equal(attn_decode_path_l2_evict_first(-1, l2, l2), 0);     /* exactly fits */
    assert_int_equal(attn_decode_path_l2_evict_first(-1, l2 + 1, l2), 1);
    assert_int_equal(attn_decode_path_l2_evict_first(-1, b2 * 8, 0), 0); /* unknown L2 */
    /* the tuning forces either way, whatever the bytes */
    assert_int_equal(attn_decode_path_l2_evict_first(1, b2, l2), 1);
    assert_int_equal(attn_decode_path_l2_evict_first(0, b2 * 8, l2), 0);
}

/* Who folds split requests (attn_cuda_decode_launch and the engine's
 * schedule ask the same rule): the producer where one round of 128 threads
 * covers the head chunk, else the reducer kernel. */
static void test_fused(void **state)
{
    (void)state;
    assert_int_equal(attn_decode_path_fused(1, 0, 4, 128), 1); /* 4 x 32 units */
    assert_int_equal(attn_decode_path_fused(1, 0, 8, 64), 1);  /* 8 x 16 */
    assert_int_equal(attn_decode_path_fused(1, 0, 2, 256), 1); /* 2 x 64 */
    assert_int_equal(attn_decode_path_fused(1, 0, 1, 128), 1);
    assert_int_equal(attn_decode_path_fused(1, 0, 8, 128), 0); /* two rounds */
    assert_int_equal(attn_decode_path_fused(1, 0, 4, 256), 0);
    assert_int_equal(attn_decode_path_fused(1, 0, 16, 64), 0);
    assert_int_equal(attn_decode_path_fused(1, 0, 32, 64), 0); /* chunks of 16 heads */
    assert_int_equal(attn_decode_path_fused(0, 0, 4, 128), 0); /* not asked */
    assert_int_equal(attn_decode_path_fused(1, 1, 4, 128), 0); /* the CUDA-core producer */
    assert_int_equal(attn_decode_path_fused(1, 0, 0, 128), 0); /* no group */
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(attn_decode_producer_name(ATTN_DECODE_SIMT), "simt");
    assert_string_equal(attn_decode_producer_name(ATTN_DECODE_TC), "tc");
    assert_string_equal(attn_decode_producer_name(ATTN_DECODE_TC_BULK), "tc_bulk");
    assert_string_equal(attn_decode_producer_name(ATTN_DECODE_PRODUCER_COUNT), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_serves_every_head_dim_layout_and_page),
        cmocka_unit_test(test_bulk_off_or_simt),
        cmocka_unit_test(test_copy_warps),
        cmocka_unit_test(test_tensor_maps),
        cmocka_unit_test(test_auto_choice),
        cmocka_unit_test(test_keys_per_item),
        cmocka_unit_test(test_q_hi_lo_only_at_d256),
        cmocka_unit_test(test_fallbacks_name_the_reason),
        cmocka_unit_test(test_persist),
        cmocka_unit_test(test_keys_as_rows),
        cmocka_unit_test(test_auto_with_keys_as_rows),
        cmocka_unit_test(test_l2_evict_first),
        cmocka_unit_test(test_fused),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
