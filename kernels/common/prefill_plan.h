/* The plain data of a prefill tile plan that the host planner
 * (planner/prefill_plan.h) builds and the CUDA prefill kernel reads
 * (kernels/cuda/prefill_launch.h): per-request records, work items, split
 * merges and the tile-class ledger.  Here so both sides see it with the
 * arrows ARCHITECTURE.md gives (kernels/cuda reaches only kernels/common), as
 * kernels/common/plan.h does for the split plan.
 */
#ifndef ATTN_KERNELS_COMMON_PREFILL_PLAN_H
#define ATTN_KERNELS_COMMON_PREFILL_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_prefill_req {
    int32_t T;    /* committed keys */
    int32_t C;    /* new query rows */
    int32_t qrow; /* first row of the request in q / o / lse */
    int32_t pad;
} attn_prefill_req;

typedef struct attn_prefill_item {
    int32_t req;        /* request */
    int32_t row0;       /* first packed row of the m tile */
    int32_t tile_begin; /* tiles[tile_begin, tile_end) */
    int32_t tile_end;
    int32_t part; /* -1: write O and LSE; else the partial slot */
} attn_prefill_item;

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

#ifdef __cplusplus
}
#endif
#endif
