/* Host planning of the tensor-core prefill/append kernel (plain C: built
 * and tested without CUDA).  From per-request (T, C, q row offset) and a
 * host mask program it builds the plan of kernels/common/prefill_plan.h.
 * The tile classes come from attn_mask_classify_tile (kernels/common/
 * mask.h), the one classifier; a key tile cut short by the end of the
 * request's keys is PARTIAL so the kernel masks the rows past the end.
 */
#ifndef ATTN_PLANNER_PREFILL_PLAN_H
#define ATTN_PLANNER_PREFILL_PLAN_H

#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "kernels/common/mask.h"
#include "kernels/common/prefill_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_prefill_plan_in {
    uint32_t num_requests;
    const int64_t *T;         /* [B] */
    const int64_t *C;         /* [B] */
    const int32_t *qo_indptr; /* [B + 1]: q row offsets */
    uint32_t num_qo_heads, num_kv_heads, head_dim;
    const attn_mask_prog *mask; /* host program over the same requests */
    /* the persistent grid's CTAs (one per SM): an m tile whose unit costs
     * more than the mean load of one of them, total / num_sms, is cut into
     * ceil(cost / mean) contiguous parts of at least 4 tiles, so no unit
     * exceeds the mean by more than its rounding (0: no split) */
    uint32_t num_sms;
    uint32_t fixed_splits; /* > 0: split every m tile into this many parts */
    /* [B] or NULL: nonzero marks a request another kernel serves (the
     * decode rows of a partitioned mixed batch): it keeps its q rows and
     * record but gets no m tile, so the prefill kernel never touches it */
    const uint8_t *skip;
    /* the kernel configuration to cut tiles for (zero: ATTN_PREFILL_FULL);
     * ATTN_PREFILL_LIGHT serves d 64 and 128 only */
    attn_prefill_variant variant;
} attn_prefill_plan_in;

/* The cost of a unit (one item, one K/V head) in quarter tiles, for the
 * split bound and the least-loaded queues: 4 per FULL tile, 5 per PARTIAL
 * tile, 2 per unit.  Documented estimates, not a fit: a PARTIAL tile adds
 * the per-cell mask (a compare and select per score, BN/2 per thread) to
 * the tile's MMAs and softmax; the unit's own Q load and epilogue were
 * taken as half a tile's time (the decode rows of a unified plan are such
 * one-m-tile units).  Measured on the H200 (2026-12-02g, docs/cuda-
 * prefill.md round 4) a unit costs ~2.5 tiles beyond its tiles; the queues
 * of symmetric batches come out the same for any unit cost (every queue
 * gets the same mix), so 2 stays until a schedule hands small units to
 * late CTAs (the fork tail that measured it). */
#define ATTN_PREFILL_COST_FULL 4
#define ATTN_PREFILL_COST_PARTIAL 5
#define ATTN_PREFILL_COST_UNIT 2

/* What cutting a launch's m tiles into parts costs beyond the parts
 * themselves, in the same quarter tiles: the combine kernel's launch after
 * the attend kernel and its fold of the parts' states.  The load bound's
 * cuts are kept only when they shorten the launch's least-loaded makespan
 * by more than this.  Measured on the H200 (2026-12-03, the prefill rows of
 * bench_mixed.py's small steps alone, 132 CTAs): S1's 2 prefills of 256
 * (T 0 and 1024; 128 units, 8 m tiles cut in two) ran 49.9 us cut and 39.6
 * uncut, S2's append of 128 at T 2048 (32 units of 17 tiles, cut in four)
 * 37.1 cut and 54.4 uncut; the combine came to ~10-16 us there (with
 * ~2.12 us a tile, 19-30 quarter tiles), and 24 takes the faster form of
 * both. */
#define ATTN_PREFILL_COST_COMBINE 24

/* Cost of tile codes tiles[begin, end) of one unit (the constants above). */
int64_t attn_prefill_unit_cost(const int32_t *tiles, int32_t begin, int32_t end);

/* The tile shape of variant v at head dim d: tile_m packed query rows by
 * tile_n keys (full: 128 x 128 for d <= 128, 128 x 64 for d = 256; light:
 * 64 x 64; fused: 128 x 64). */
void attn_prefill_tile_shape(uint32_t head_dim, attn_prefill_variant v, uint32_t *tile_m,
                             uint32_t *tile_n);

/* Whether variant v has a kernel at head dim d (full: 64, 128, 256; light
 * and fused: 64, 128). */
int attn_prefill_variant_serves(attn_prefill_variant v, uint32_t head_dim);

/* The name of a variant ("full", "light", "fused"), "?" outside the enum. */
const char *attn_prefill_variant_name(attn_prefill_variant v);

/* Build a plan; 0 or ATTN_E_SHAPE / ATTN_E_RANGE / ATTN_E_NOMEM with the
 * field named in err.  Release with attn_prefill_plan_free. */
int attn_prefill_plan_build(const attn_prefill_plan_in *in, attn_prefill_plan *out,
                            attn_error_detail *err);

/* Load figures of a plan's queues (seed 0x09G), in quarter tiles. */
typedef struct attn_prefill_queue_stats {
    uint32_t workers;
    int64_t max_load, max_unit;
    double mean_load;
    double rho;     /* max / mean load */
    double eta;     /* total / (workers x max load) */
    uint32_t pairs; /* units run beside their sibling (attn_prefill_plan_pair_queues) */
} attn_prefill_queue_stats;

/* Build the plan's per-CTA queues for a persistent grid of at most
 * max_ctas CTAs (0: one per unit): units (item, K/V head) by the
 * deterministic least-loaded rule of planner/schedule.h (largest cost
 * first, ties to the lower unit index, each to the least-loaded CTA, ties
 * to the lower CTA), costs by attn_prefill_unit_cost.  Replaces queues
 * built before; st may be NULL.  0, ATTN_E_RANGE naming "plan" when the
 * units exceed the 32-bit queue index, or ATTN_E_NOMEM (the plan unchanged
 * on either error). */
int attn_prefill_plan_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                             attn_prefill_queue_stats *st, attn_error_detail *err);

/* How much longer (percent of the least-loaded makespan) the pair walk's
 * queues may be before attn_prefill_plan_pair_queues keeps the plain ones. */
#define ATTN_PREFILL_PAIR_SLACK_PCT 2

/* attn_prefill_plan_queues for the pair walk: units of sibling items (one
 * request, the same key tiles but for one more at the end of one of them:
 * the two m tiles of an append whose C x g rows fill two, the m tiles of a
 * prefill chunk whose rows see the same keys, or the same part of two such
 * m tiles) of one K/V head run at the same queue position of CTAs 2j and
 * 2j + 1, so the two CTAs read each K/V tile at about the same time and the
 * second read finds it in the L2 (H200, bench_mixed.py's M3 appends alone:
 * 775 MB read from DRAM for 667 MB of K/V under the plain queues, 696 MB in
 * pairs; bench/results/mixed-h200-2026-12-03-r31).  The other units go two
 * by two in item order (longest first); the CTA pairs' jobs are scheduled
 * least-loaded, so the grid is an even number of CTAs (one of them may get
 * no unit).
 * Where no siblings exist, fewer than two CTAs run, or the pairs' makespan
 * exceeds the plain queues' by more than ATTN_PREFILL_PAIR_SLACK_PCT, the
 * plain queues are built (st->pairs 0).  Errors as attn_prefill_plan_queues. */
int attn_prefill_plan_pair_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                                  attn_prefill_queue_stats *st, attn_error_detail *err);

/* attn_prefill_plan_pair_queues for the cluster walk (CTAs 2j and 2j + 1 in
 * lockstep: each queue position costs both CTAs its longer unit), so the
 * loads, rho / eta and the slack test count a job's longer unit on both of
 * its CTAs.  The same queues and flags; errors as there. */
int attn_prefill_plan_cluster_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                                     attn_prefill_queue_stats *st, attn_error_detail *err);

/* The capacity envelope of a graph-mode plan (seed 0x03G): the most of
 * every array a step may fill, fixed when the plan is made, so one device
 * image (and one captured CUDA graph) serves every step inside it.  The
 * direct limits are the capacity step's own (requests, q rows, keys of a
 * request); the others are bounds that every step within the direct
 * limits meets (attn_prefill_envelope_size says why each holds). */
typedef struct attn_prefill_envelope {
    uint32_t max_requests; /* B of a step */
    uint32_t max_q_rows;   /* qo_indptr[B] of a step */
    int64_t max_keys;      /* T + C of any request */
    uint32_t max_m_tiles, max_tiles, max_items, max_merges, max_parts;
    uint32_t workers; /* the attend grid: one queue per CTA, the empty ones exit at once */
} attn_prefill_envelope;

/* What an envelope is sized from: the direct limits, the kernel's shape
 * and the split policy the steps are planned with (that of
 * attn_prefill_plan_in: num_sms for the load bound, or fixed_splits). */
typedef struct attn_prefill_envelope_in {
    uint32_t max_requests, max_q_rows;
    int64_t max_keys;
    uint32_t num_qo_heads, num_kv_heads, head_dim;
    uint32_t num_sms, fixed_splits;
    uint32_t workers;             /* CTAs of the persistent grid (the queues' max_ctas) */
    attn_prefill_variant variant; /* the kernel configuration: its tile shape */
} attn_prefill_envelope_in;

/* Size the envelope; ATTN_E_CAPACITY naming the envelope field when a
 * bound does not fit the kernel's 32-bit indices, ATTN_E_RANGE for an
 * empty limit. */
int attn_prefill_envelope_size(const attn_prefill_envelope_in *in, attn_prefill_envelope *out,
                               attn_error_detail *err);

/* Whether plan p (its queues built) fits e: 0, or ATTN_E_CAPACITY naming
 * the first field it exceeds ("envelope.max_tiles", ...). */
int attn_prefill_envelope_check(const attn_prefill_envelope *e, const attn_prefill_plan *p,
                                attn_error_detail *err);

/* Release the arrays of a plan and zero it. */
void attn_prefill_plan_free(attn_prefill_plan *p);

/* Partial-state floats the plan needs: vec (num_parts * H_kv * tile_m * d)
 * and m / l (num_parts * H_kv * tile_m each). */
void attn_prefill_plan_workspace(const attn_prefill_plan *p, uint32_t num_kv_heads,
                                 uint32_t head_dim, uint64_t *vec_floats, uint64_t *row_floats);

#ifdef __cplusplus
}
#endif
#endif
