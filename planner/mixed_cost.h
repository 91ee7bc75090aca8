/* The cost model behind `policy.schedule: auto` for a mixed batch on the
 * GPU (issue 12 item 5): from what the plans already count (the prefill
 * kernel's executed tiles with and without the decode rows, the K/V bytes
 * the decode rows read) it estimates each strategy's kernel time and picks
 * the cheapest, with one sentence saying why.  Pure host code (CI tests
 * it); the constants are measured on the device (attn_mixed_cost_h200).
 *
 * The strategies:
 *   unified    one persistent launch of the prefill kernel over every row
 *              (a decode row fills g of the tile_m rows of its m tile);
 *   partition  the prefill kernel over the prefill/append rows, then the
 *              decode kernels over the decode rows, on one stream;
 *   overlap    not estimated: no co-resident kernel exists (admission
 *              refuses it with the reason).
 */
#ifndef ATTN_PLANNER_MIXED_COST_H
#define ATTN_PLANNER_MIXED_COST_H

#include <stddef.h>
#include <stdint.h>

#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the two candidate plans count. */
typedef struct attn_mixed_cost_in {
    uint64_t unified_tiles;   /* FULL + PARTIAL tiles x H_kv when the prefill kernel serves all */
    uint64_t unified_longest; /* tiles of the longest work item of that plan */
    uint64_t prefill_tiles;   /* the same without the decode rows (partition's prefill launch) */
    uint64_t prefill_longest;
    uint64_t decode_kv_bytes; /* K and V bytes the decode rows read (visible keys) */
    uint32_t decode_requests; /* 0: nothing for the decode kernels */
    uint32_t num_sms;
    uint32_t head_dim, tile_n; /* one tile is tile_m x tile_n x head_dim */
} attn_mixed_cost_in;

/* Device constants (measured; see attn_mixed_cost_h200 for the date). */
typedef struct attn_mixed_cost_consts {
    double tile_us;         /* one 128 x 128 x d128 tile on one SM, in the prefill kernel */
    double launch_us;       /* fixed cost of one kernel launch on the stream */
    double decode_gbps;     /* decode kernels' K/V read rate, GB/s */
    double decode_fixed_us; /* producer + reducer fixed cost */
} attn_mixed_cost_consts;

/* The constants measured on the H200 (date in mixed_cost.c). */
const attn_mixed_cost_consts *attn_mixed_cost_h200(void);

/* The estimates and the choice. */
typedef struct attn_mixed_cost {
    double unified_us, partition_us; /* partition_us < 0: not admitted */
    attn_schedule_policy pick;       /* UNIFIED or PARTITION */
    char why[160];
} attn_mixed_cost;

/* Estimate both strategies; partition_ok false leaves partition out
 * (partition_us -1).  Deterministic: a tie picks unified. */
void attn_mixed_cost_estimate(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k,
                              int partition_ok, attn_mixed_cost *out);

#ifdef __cplusplus
}
#endif
#endif
