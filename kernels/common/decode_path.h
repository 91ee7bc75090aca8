/* Which CUDA decode producer runs a launch, decided on the host without a
 * GPU (kernels/cuda/decode.cu asks at launch and for the dispatch
 * diagnostic; tests/unit/test_decode_path.c checks the table on CI).
 *
 * Three producers (docs/cuda.md, "Kernels"): the CUDA-core producer, the
 * tensor-core producer whose four warps copy their own rows with 16-byte
 * cp.async, and the tensor-core producer with a copy warp (issue 13): one
 * warp issues one cp.async.bulk per K and V row into a padded shared tile,
 * completing on an mbarrier, several stages ahead of the four compute warps
 * (1 or 4 copy warps at every head dim, 2 at head_dim 128), or two copy warps
 * that move whole pages with tensor-map copies (bulk 8: boxes of
 * min(P, 64) rows, so page sizes of 8 rows and more, on a store whose page
 * count is known).
 * The copy warp serves every case whose rows are whole 16-byte vectors at
 * 16-byte aligned addresses (the bulk copy's contract), except a q dtype
 * other than the cache's below head_dim 256: its hi + lo variant needs ~210
 * registers, so 160 threads hold fewer CTAs per SM than the cp.async
 * producer's 128 (measured with -Xptxas -v, docs/cuda.md).  The rest keeps
 * the cp.async producer.
 */
#ifndef ATTN_COMMON_DECODE_PATH_H
#define ATTN_COMMON_DECODE_PATH_H

#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Query heads one tensor-core producer CTA serves (the M = 16 rows of
 * mma.m16n8k16): a group of g heads takes ceil(g / 16) head chunks. */
#define ATTN_DECODE_CHUNK_HEADS 16u

/* attn_decode_path_in.bulk: two copy warps with tensor-map copies of whole
 * pages; and "the measured best for this launch" (attn_decode_path_bulk). */
#define ATTN_DECODE_BULK_TMAP 8
#define ATTN_DECODE_BULK_AUTO (-1)

/* The producers, in the order of the X-macro: id, name. */
#define ATTN_DECODE_PRODUCERS(X)                                                                   \
    X(ATTN_DECODE_SIMT, "simt")                                                                    \
    X(ATTN_DECODE_TC, "tc")                                                                        \
    X(ATTN_DECODE_TC_BULK, "tc_bulk")

typedef enum attn_decode_producer {
#define ATTN__X(id, name) id,
    ATTN_DECODE_PRODUCERS(ATTN__X)
#undef ATTN__X
        ATTN_DECODE_PRODUCER_COUNT
} attn_decode_producer;

/* What the choice depends on: the launch's shape, strides and buffers. */
typedef struct attn_decode_path_in {
    int simt; /* the CUDA-core producer was asked for */
    /* copy warps of the copy-warp producer (1, 2 or 4), ATTN_DECODE_BULK_TMAP
     * = two copy warps with tensor-map copies of whole pages, 0: not allowed,
     * ATTN_DECODE_BULK_AUTO: the measured best (attn_decode_path_bulk) */
    int bulk;
    uint32_t head_dim;                            /* 64, 128 or 256 have kernels */
    attn_dtype kv_dtype;                          /* bf16 / fp16 have kernels */
    attn_dtype q_dtype;                           /* not kv_dtype: q enters as hi + lo halves */
    int64_t page_stride, head_stride, row_stride; /* elements */
    uint32_t page_size;                           /* rows per page */
    uint32_t num_pages;                           /* pages of the store (0: unknown) */
    uint32_t keys_per_item;                       /* mean keys of a work item (0: unknown) */
    uint64_t pieces;         /* producer CTAs: items x H_kv x head chunks (0: unknown) */
    uint32_t sm_count;       /* SMs of the device (0: unknown) */
    uint32_t group;          /* query heads per K/V head (0: unknown) */
    uint64_t k_addr, v_addr; /* the layer's stores (0: not bound yet) */
} attn_decode_path_in;

/* The bulk value a launch runs: in->bulk, or for ATTN_DECODE_BULK_AUTO the
 * fastest measured on the H200 (2026-12-01, bench/results/
 * decode-h200-2026-12-01-r2.md): tensor-map copies at head_dim 128 with
 * pages of 8 rows or more and work items of ATTN_DECODE_TMAP_MIN_KEYS keys
 * or more on average (-5..-13 %; at 256 keys per item, B 2 x T 2048, it was
 * 5 % slower: the copy warp's first tiles are not hidden), or of any length
 * where its compute warps take the keys as rows (attn_decode_path_keys_as_rows;
 * B 2 x T 2048: 10.8 us against 11.4, 2026-12-02); at head_dim 256 with
 * pages of 8 rows or more, q in the cache dtype and items of
 * ATTN_DECODE_TMAP_MIN_KEYS keys or more (or unknown), tensor-map copies
 * three stages deep (cfg::TMAP_STAGES; d 128's rule for short items, kept
 * from the heads-as-rows build it was measured with): 3.7-6.5 % faster than
 * the four row-copy warps on the four d 256 shapes, 0.7-2 % more with keys
 * as rows (2026-12-03, docs/cuda.md round 16); the row-copy warps serve the
 * rest of head_dim 256 (they were 11 % faster
 * than cp.async), the cp.async producer (0) elsewhere
 * (head_dim 64: the copy warps were 5-13 % slower), except at head_dim 128
 * with pages of 8 rows or more when the launch has no more CTAs than SMs
 * (short items the planner could not split further): four row-copy warps,
 * whose one CTA per SM then costs no residency (B 2 x T 2048: 13.3 us
 * against 14.0, bench/results/decode-h200-2026-12-01-r5.md). */
int attn_decode_path_bulk(const attn_decode_path_in *in);

/* Mean keys per work item below which auto keeps the cp.async producer at
 * head_dim 128 (measured: 256 slower, 1024 and more faster). */
#define ATTN_DECODE_TMAP_MIN_KEYS 512

/* The mean keys of n work items (0 for none): attn_decode_path_in.keys_per_item. */
uint32_t attn_decode_keys_per_item(const attn_work_item *items, uint32_t n);

/* The producer that serves `in`; *why (may be NULL) gets one sentence on
 * why the copy-warp producer does not, or NULL when it does or was not
 * allowed. */
attn_decode_producer attn_decode_path_pick(const attn_decode_path_in *in, const char **why);

/* 1 when the compute warps take their keys as the M rows of the mma
 * (S^T = K Q^T, O^T += V^T P^T: docs/cuda.md, issue 13 round 10): groups
 * of 1..8 heads, whose 16-row products were at least half empty, with q in
 * the cache dtype, on the cp.async producer at head_dim 64 and 128, the
 * tensor-map producer at every head dim and the four row-copy warps at 256;
 * else 0 (the products with the heads as rows). */
int attn_decode_path_keys_as_rows(const attn_decode_path_in *in);

/* The bulk value a plan is sized and launched with, before its split:
 * in->bulk, except that ATTN_DECODE_BULK_AUTO at head_dim 64 becomes the
 * tensor-map producer (keys as rows) when the batch's `units` (requests x
 * H_kv x head chunks, unsplit) fit in one wave of its
 * ATTN_DECODE_TMAP_D64_CTAS CTAs per SM: there it was faster than the
 * cp.async producer (B 1..64: -4..-13 %, B 16 equal), at B 256 x T 2048
 * (1024 units) 6 % slower, its 2 CTAs per SM against 4 (H200, 2026-12-02,
 * docs/cuda.md round 10).  Needs in->sm_count and the fields of
 * attn_decode_path_keys_as_rows. */
int attn_decode_path_plan_bulk(const attn_decode_path_in *in, uint64_t units);
#define ATTN_DECODE_TMAP_D64_CTAS 2u

/* CTAs of the persistent tensor-map producer (issue 13 round 4) for a
 * launch of `pieces` CTAs (items x H_kv x head chunks) that asks for at
 * most `persist` (attn_cuda_decode_params.persist), or 0 when the grid of
 * one CTA per piece runs: persist 0, a producer other than the tensor-map
 * one (attn_decode_path_pick and attn_decode_path_bulk), head_dim other
 * than 128, or q not in the cache dtype (its Q fragments stay in
 * registers).  Never more CTAs than pieces. */
uint32_t attn_decode_path_persist(const attn_decode_path_in *in, uint32_t persist, uint64_t pieces);
/* The K/V bytes a launch of n work items reads: their keys x num_kv_heads
 * x head_dim x elem_bytes, K and V. */
uint64_t attn_decode_kv_bytes(const attn_work_item *items, uint32_t n, uint32_t num_kv_heads,
                              uint32_t head_dim, uint32_t elem_bytes);

/* attn_cuda_decode_params.l2_evict_first for a launch reading kv_bytes on
 * a device with l2_bytes of L2: `force` when it is 0 or 1 (the tuning's
 * l2_evict_first), else (-1) the rule: 0 for an unknown L2, 1 when the launch's K/V
 * do not fit the L2, so none of them can still be there for a later launch
 * and each line is best evicted first; else 0 (no hint: a launch that
 * reads the same pages again, as a benchmark's or a graph's repeated call
 * does, finds them in the L2).  Measured on the H200
 * (2026-12-02, docs/cuda.md round 11): evict-first copies -0.3..-5.6 % at
 * the decode shapes of 64 MB and more, -1.4..-2.3 % on the mixed batches'
 * decode rows beside the prefill kernel, +9 % at B 2 x T 2048 (17 MB,
 * which the benchmark's repeated calls otherwise read from the L2). */
int attn_decode_path_l2_evict_first(int force, uint64_t kv_bytes, uint64_t l2_bytes);

/* 1 when a launch's split requests are folded by its producer (the last
 * CTA of each request, K/V head and head chunk; attn_cuda_decode_params
 * .fused_merge) instead of the reducer kernel: `asked`, the tensor-core
 * producer (not `simt`), and one round of 128 threads covers the chunk's
 * heads, min(group, 16) x head_dim / 4 <= 128 (group <= 4 at head_dim
 * 128): more rounds serialize L2 round trips in the last CTA, and group 16
 * measured 97.9 us fused against 91.6 with the reducer kernel (H200,
 * 2026-11-29, docs/cuda.md). */
int attn_decode_path_fused(int asked, int simt, uint32_t group, uint32_t head_dim);

/* The name of a producer ("simt", "tc", "tc_bulk"; "?" out of range). */
const char *attn_decode_producer_name(attn_decode_producer p);

#ifdef __cplusplus
}
#endif
#endif
