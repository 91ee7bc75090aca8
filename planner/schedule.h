/* Work schedules: which worker (CTA, persistent block, CPU thread) runs which
 * items of a split plan, and the logical load each one carries (seed 0x09D,
 * 0x09E, 0x09G).
 *
 * A schedule never changes what an item computes or where its state goes: it
 * only orders items into per-worker queues.  Every builder is deterministic
 * (same plan and workers, same queues) so the reduction order is frozen
 * (seed 0x09E: no atomics, identical manifests aggregate identically).
 */
#ifndef ATTN_PLANNER_SCHEDULE_H
#define ATTN_PLANNER_SCHEDULE_H

#include <stdint.h>

#include "attn/error.h"
#include "planner/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_schedule_kind {
    /* Item i runs on worker i mod W, in item order: the fixed first-stage
     * grid of Flash-Decoding (seed 0x09B). */
    ATTN_SCHEDULE_STATIC = 0,
    /* Items sorted by cost (largest first, ties by item index), each given
     * to the least-loaded worker (ties to the lowest worker): seed 0x09E. */
    ATTN_SCHEDULE_LEAST_LOADED = 1,
    /* The item sequence cut into W runs of equal total keys (items are
     * assumed cut at those boundaries, as a GLOBAL plan is): seed 0x09D. */
    ATTN_SCHEDULE_CONTIGUOUS = 2,
} attn_schedule_kind;

/* cost(item) = alpha * q_len[req] + beta * (kv_end - kv_begin) (seed 0x09E);
 * alpha = 0, beta = 1 counts keys only.  Identity items cost 0. */
typedef struct attn_cost_model {
    int64_t alpha;
    int64_t beta;
} attn_cost_model;

typedef struct attn_schedule {
    uint32_t num_workers;
    uint32_t num_items;
    uint32_t *worker_indptr; /* [W + 1]: the queue of worker w is order[indptr[w] .. indptr[w+1]) */
    uint32_t *order;         /* [num_items]: item indices into plan->items */
    int64_t *load;           /* [W]: sum of the costs of its items */
    int64_t max_load;
    double mean_load;     /* total / W */
    double max_over_mean; /* rho of seed 0x09G; 0 when nothing to do */
    double efficiency;    /* total / (W x max_load), eta of seed 0x09G */
} attn_schedule;

/* Build the per-worker queues of `plan` on `workers` workers; q_len may be
 * NULL (one row per request) and cost NULL (keys only).  Returns 0 or an
 * attn_err; on failure `out` holds no arrays. */
int attn_schedule_build(const attn_split_plan *plan, attn_schedule_kind kind, uint32_t workers,
                        const attn_cost_model *cost, const int64_t *q_len, attn_schedule *out,
                        attn_error_detail *err);

/* Build the per-worker queues of n items of the given costs (cost[i] >= 0)
 * on `workers` workers: the one home of the queue rules, which
 * attn_schedule_build applies to a split plan's items and the prefill
 * planner to its (item, K/V head) units.  Same contract as
 * attn_schedule_build (order[] holds indices into cost[]). */
int attn_schedule_from_costs(const int64_t *cost, uint32_t n, attn_schedule_kind kind,
                             uint32_t workers, attn_schedule *out, attn_error_detail *err);

/* Release the arrays of a schedule (the struct itself is the caller's). */
void attn_schedule_free(attn_schedule *s);

/* "static", "least_loaded" or "contiguous". */
const char *attn_schedule_kind_label(attn_schedule_kind k);

#ifdef __cplusplus
}
#endif
#endif
