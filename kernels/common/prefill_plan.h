/* The prefill kernel's plan as plain data (arrays of integers the engine
 * uploads once per plan), shared by the kernel (kernels/cuda) and its
 * planner (planner/prefill_plan.c builds it):
 *
 *   reqs   [B]          T, C, q row of each request
 *   tiles  [num_tiles]  per m tile, the key tiles that are not SKIP, in
 *                       ascending key order: (n << 1) | partial
 *   items  [num_items]  an m tile of tile_m packed rows and a contiguous
 *                       range of its tiles (with each K/V head one unit of
 *                       work); part >= 0 names the partial-state slot of a
 *                       split item
 *   merges [num_merges] split m tiles: parts [part_begin, +num_parts) are
 *                       folded in that (fixed, ascending key) order
 *   worker_indptr [W+1] the persistent grid's per-CTA queues (seed 0x09E):
 *   order  [units]      CTA w runs units order[worker_indptr[w] ..
 *                       worker_indptr[w + 1]) in that order, unit u =
 *                       item u / H_kv, K/V head u % H_kv (NULL: the kernel
 *                       walks its snake over the units instead); an entry
 *                       is the unit (ATTN_PREFILL_ORDER_UNIT) and a flag
 *                       (ATTN_PREFILL_ORDER_SHARED)
 *
 * Rows are packed for GQA: packed row r of a request is token r / g, query
 * head (kv_head * g + r % g).
 */
#ifndef ATTN_KERNELS_COMMON_PREFILL_PLAN_H
#define ATTN_KERNELS_COMMON_PREFILL_PLAN_H

#include <stdint.h>

/* A queue entry's flag: the entry at the same position of the other CTA of
 * its pair (CTAs 2j and 2j + 1) is this unit's sibling (the same request
 * and K/V head; their key tiles the same but for one more at the end of
 * one), so a pair run as a 2-CTA cluster loads the shared tiles once for
 * both (the pair walk sets it, planner/prefill_plan.h; the cluster walk
 * reads it).  The unit is the entry's other bits. */
#define ATTN_PREFILL_ORDER_SHARED 0x80000000u
#define ATTN_PREFILL_ORDER_UNIT 0x7fffffffu

/* The kernel's tile: ATTN_PREFILL_TILE_M packed query rows by
 * ATTN_PREFILL_TILE_N(d) keys (the one home of the shape: the kernel's
 * configuration and the planner both read it). */
#define ATTN_PREFILL_TILE_M 128u
#define ATTN_PREFILL_TILE_N(d) ((d) > 128u ? 64u : 128u)

/* The light variant's tile (issue 12's overlap: one consumer warpgroup,
 * co-resident with a decode CTA on one SM; d 64 and 128 only). */
#define ATTN_PREFILL_LIGHT_TILE_M 64u
#define ATTN_PREFILL_LIGHT_TILE_N 64u

/* The fused variant's key tile (issue 12's overlap in one launch: the
 * prefill roles of kernels/cuda/mixed.cu, beside the decode roles in one
 * CTA; ATTN_PREFILL_TILE_M rows, d 64 and 128 only). */
#define ATTN_PREFILL_FUSED_TILE_N 64u

/* Which configuration of the prefill kernel a plan is built for:
 * X(enumerator, value, name). */
#define ATTN_PREFILL_VARIANTS(X)                                                                   \
    X(ATTN_PREFILL_FULL, 0, "full")   /* fills an SM: 2 consumer warpgroups, 128-row tile */       \
    X(ATTN_PREFILL_LIGHT, 1, "light") /* 1 consumer warpgroup, 64 x 64 tile, beside decode */      \
    X(ATTN_PREFILL_FUSED, 2, "fused") /* 128 x 64 tile, decode roles in the same CTA */

#define ATTN__PREFILL_VARIANT_ENTRY(e, v, n) e = (v),
typedef enum attn_prefill_variant {
    ATTN_PREFILL_VARIANTS(ATTN__PREFILL_VARIANT_ENTRY)
} attn_prefill_variant;
#undef ATTN__PREFILL_VARIANT_ENTRY

/* One request of the plan. */
typedef struct attn_prefill_req {
    int32_t T;    /* committed keys */
    int32_t C;    /* new query rows */
    int32_t qrow; /* first row of the request in q / o / lse */
    int32_t pad;
} attn_prefill_req;

/* One unit of work per K/V head: an m tile and a range of its key tiles. */
typedef struct attn_prefill_item {
    int32_t req;        /* request */
    int32_t row0;       /* first packed row of the m tile */
    int32_t tile_begin; /* tiles[tile_begin, tile_end) */
    int32_t tile_end;
    int32_t part; /* -1: write O and LSE; else the partial slot */
} attn_prefill_item;

/* One split m tile whose parts the combine kernel folds. */
typedef struct attn_prefill_merge {
    int32_t req;
    int32_t row0;
    int32_t part_begin;
    int32_t num_parts;
} attn_prefill_merge;

/* Tile-class ledger of a plan (seed 0x06G): tiles and score cells, counted
 * per K/V head times H_kv (cells in units of one query head's cells). */
typedef struct attn_prefill_ledger {
    uint64_t skip_tiles, full_tiles, partial_tiles;
    uint64_t logical_cells;  /* visible cells x H_q (the mask's ledger) */
    uint64_t executed_cells; /* (full + partial) tiles x tile_m x tile_n x H_kv */
} attn_prefill_ledger;

/* The whole plan (host arrays; the engine uploads each once). */
typedef struct attn_prefill_plan {
    attn_prefill_variant variant; /* the kernel configuration the tiles are cut for */
    uint32_t tile_m, tile_n;
    attn_prefill_req *reqs;
    uint32_t num_requests;
    int32_t *tiles;
    uint32_t num_tiles;
    attn_prefill_item *items; /* longest first */
    uint32_t num_items;
    attn_prefill_merge *merges;
    uint32_t num_merges;
    uint32_t num_parts; /* partial-state slots (0 = no split) */
    attn_prefill_ledger ledger;
    /* per-CTA queues (planner/prefill_plan.h attn_prefill_plan_queues); 0
     * and NULL until built */
    uint32_t num_workers;
    uint32_t *worker_indptr; /* [num_workers + 1] */
    uint32_t *order;         /* [num_items x H_kv] */
} attn_prefill_plan;

#endif
