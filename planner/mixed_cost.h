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
 *   partition  the prefill kernel over the prefill/append rows and the
 *              decode kernels over the decode rows: on one stream one after
 *              the other (serial), or forked onto two streams after the
 *              shared append and joined before the copy back (concurrent;
 *              the prefill grid capped so the decode kernels find idle
 *              SMs), the order and the cap an instance setting
 *              (attn_mixed_streams, from ATTN_MIXED_STREAMS and
 *              ATTN_MIXED_PREFILL_CTAS) or, by default, the model's pick
 *              among serial and each candidate cap of the constants;
 *   overlap    the light prefill kernel over the prefill/append rows (one
 *              CTA per SM) and the decode kernels on a second stream beside
 *              it: light_factor x the prefill launch, plus the decode time
 *              not hidden beside the light grid, plus the fork; estimated
 *              only where the caller offers it (overlap_ok).  Measured on
 *              the H200 (r5) nothing was hidden, so it never wins there;
 *              cuda_prefill does not offer it to auto (it refuses overlap
 *              unless its instance runs a trial).
 */
#ifndef ATTN_PLANNER_MIXED_COST_H
#define ATTN_PLANNER_MIXED_COST_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How partition runs its two kernel families: X(enumerator, value, name). */
#define ATTN_MIXED_ORDERS(X)                                                                       \
    X(ATTN_MIXED_ORDER_AUTO, 0, "auto")     /* the cost model picks serial or prefill-first */     \
    X(ATTN_MIXED_ORDER_SERIAL, 1, "serial") /* one stream: prefill kernel, then decode */          \
    X(ATTN_MIXED_ORDER_DECODE_FIRST, 2, "decode-first")   /* forked, decode launched first */      \
    X(ATTN_MIXED_ORDER_PREFILL_FIRST, 3, "prefill-first") /* forked, prefill launched first */

#define ATTN__MIXED_ORDER_ENTRY(e, v, n) e = (v),
typedef enum attn_mixed_order { ATTN_MIXED_ORDERS(ATTN__MIXED_ORDER_ENTRY) } attn_mixed_order;
#undef ATTN__MIXED_ORDER_ENTRY

/* The instance's stream setting for partition: the order, and the cap of
 * the prefill grid when forked (0: one CTA per SM, as serial). */
typedef struct attn_mixed_streams {
    attn_mixed_order order;
    uint32_t prefill_ctas;
} attn_mixed_streams;

/* The wire name of an order ("serial", ...), "?" outside the enum. */
const char *attn_mixed_order_name(attn_mixed_order o);

/* Parse the instance setting: `order` one of the ATTN_MIXED_ORDERS names
 * (NULL or "": auto), `ctas` a decimal CTA count in [0, num_sms] (NULL or
 * "": 0).  ATTN_E_RANGE naming ATTN_MIXED_STREAMS or
 * ATTN_MIXED_PREFILL_CTAS on anything else; *out is untouched then. */
int attn_mixed_streams_parse(const char *order, const char *ctas, uint32_t num_sms,
                             attn_mixed_streams *out, attn_error_detail *err);

/* What the two candidate plans count. */
typedef struct attn_mixed_cost_in {
    uint64_t unified_tiles;   /* FULL + PARTIAL tiles x H_kv when the prefill kernel serves all */
    uint64_t unified_longest; /* tiles of the longest work item of that plan */
    uint64_t unified_units;   /* its units: work items x H_kv (each one Q load and epilogue) */
    uint32_t unified_merges;  /* its m tiles cut into parts (a combine launch follows) */
    uint64_t prefill_tiles;   /* the same without the decode rows (partition's prefill launch) */
    uint64_t prefill_longest;
    uint64_t prefill_units;
    uint32_t prefill_merges;
    uint64_t decode_kv_bytes;    /* K and V bytes the decode rows read (visible keys) */
    uint32_t decode_requests;    /* 0: nothing for the decode kernels */
    uint32_t decode_ctas;        /* the decode producer's grid (0: unknown, no wave term) */
    uint32_t decode_ctas_per_sm; /* its resident CTAs per SM */
    uint32_t num_sms;
    uint32_t head_dim, tile_n;  /* one tile is tile_m x tile_n x head_dim */
    attn_mixed_streams streams; /* the instance's setting (zero: auto, no cap) */
    int overlap_ok;             /* 1: estimate overlap and let it be picked */
} attn_mixed_cost_in;

/* The most candidate caps of the prefill grid a constants set holds. */
#define ATTN_MIXED_MAX_CAPS 12

/* Device constants (measured; see attn_mixed_cost_h200 for the date).
 * One launch of the prefill kernel on c SMs takes
 *   P(c) = launch_us + prefill_fixed_us
 *          + max((tiles x tile_us + units x unit_us) / c, longest x tile_us),
 * a unit (work item x K/V head) costing unit_us beyond its tiles (its Q
 * load, first and last tile in step, epilogue), and a launch whose plan
 * cuts m tiles into parts (merges > 0) combine_us more for the combine
 * kernel after it.
 * The forked estimate at cap c on N SMs is a fluid model: the capped
 * prefill grid takes P(c); beside it the decode
 * kernels run on the N - c free SMs at r = min(1, (N - c) / decode_sat_sms)
 * of their full rate, times the share of those SMs' CTA slots their grid's
 * waves fill (decode_ctas over ceil(waves) x slots: a grid one CTA past a
 * whole wave runs a nearly empty last one), so they finish ov = min(D, r x P(c)) of their
 * full-machine time D there and the rest, D - ov, on the whole machine
 * after the prefill grid ends; the combine runs after them (it follows
 * the decode kernels on the stream):
 *   forked(c) = P(c) + (D - ov) + interference x ov + fork_us + combine. */
typedef struct attn_mixed_cost_consts {
    double tile_us;             /* one 128 x 128 x d128 tile on one SM, in the prefill kernel */
    double unit_us;             /* what a unit costs the prefill kernel beyond its tiles */
    double launch_us;           /* fixed cost of one kernel launch on the stream */
    double prefill_fixed_us;    /* the prefill kernel's own fixed time per launch: its first Q
                                   loads and ring fill, its last epilogue, its grid's drain */
    double combine_us;          /* the combine kernel of a launch whose plan cuts m tiles */
    double decode_gbps;         /* decode kernels' K/V read rate on the whole machine, GB/s */
    double unified_decode_gbps; /* unified: the decode rows' K/V read rate inside the prefill
                                   kernel's tiles, GB/s (0: their tiles cost tile_us as any) */
    double decode_fixed_us;     /* producer + reducer fixed cost */
    double fork_us;             /* event fork + join of the second stream */
    double interference;        /* the extra share of the decode time run beside the prefill
                                   grid (negative: that part ran faster than alone) */
    uint32_t decode_sat_sms;    /* SMs the decode kernels need for their full K/V rate (0: any
                                   number reaches it) */
    double light_factor;        /* overlap: the light prefill kernel's time over the full one's on
                                   the same rows */
    double overlap_hide;        /* overlap: the share of the decode time hidden beside the light
                                   grid (0: none co-resided, 1: all of it) */
    uint32_t num_caps;          /* candidate caps auto tries when forked (0: it never forks) */
    uint32_t caps[ATTN_MIXED_MAX_CAPS]; /* ascending CTA counts, each below the SM count */
} attn_mixed_cost_consts;

/* The constants measured on the H200 (date in mixed_cost.c). */
const attn_mixed_cost_consts *attn_mixed_cost_h200(void);

/* The estimates and the choice. */
typedef struct attn_mixed_cost {
    double unified_us, partition_us; /* partition_us < 0: not admitted; the variant it runs */
    double serial_us, concurrent_us; /* partition's serial and its best forked candidate (< 0:
                                        not admitted) */
    double overlap_us;               /* < 0: not estimated (overlap_ok 0) */
    uint32_t num_forks;              /* forked candidates estimated (0: none) */
    uint32_t fork_ctas[ATTN_MIXED_MAX_CAPS]; /* each candidate's prefill grid cap */
    double fork_est_us[ATTN_MIXED_MAX_CAPS]; /* and its estimate */
    attn_schedule_policy pick;               /* UNIFIED, PARTITION or OVERLAP */
    attn_mixed_order order; /* how partition runs: SERIAL, DECODE_FIRST or PREFILL_FIRST */
    uint32_t prefill_ctas;  /* the prefill grid's cap when forked (0: none) */
    char why[448];
} attn_mixed_cost;

/* Estimate both strategies and partition's variants (serial and, with
 * both kernel families, forked at each candidate cap: the setting's cap
 * alone when it names one, else the constants' caps); partition_ok false
 * leaves partition out (partition_us -1).  Deterministic: a tie picks
 * unified, serial over forked, and the smaller cap; an order the setting
 * forces is kept whatever its estimate. */
void attn_mixed_cost_estimate(const attn_mixed_cost_in *in, const attn_mixed_cost_consts *k,
                              int partition_ok, attn_mixed_cost *out);

/* Partition's variants in words into buf (NUL-terminated, cut to size):
 * "partition <order>, prefill grid <cap> CTAs: serial <us> us, forked
 * <cap>:<us> ... us" ("partition serial: <us> us, forked ..." when serial
 * won; no forked list when none was estimated). */
void attn_mixed_cost_describe_partition(const attn_mixed_cost *c, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
