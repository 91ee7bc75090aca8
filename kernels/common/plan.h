/* The split plan as plain data: which K/V range of which request each
 * producer summarises, and where its partial state goes (seed 0x03, 0x09).
 * It lives in kernels/common so kernels and planner see one definition.
 *
 * Every engine runs the same plan: producers write one partial state per
 * (query row, query head, state slot); the merge reduces, for each request,
 * exactly the slots [slot_indptr[b], slot_indptr[b+1]) in slot order.
 * A plan is plain data (arrays of integers) so it can be copied to a device
 * in one transfer.  Built by planner/split.c (planner/plan.h frees it).
 */
#ifndef ATTN_KERNELS_COMMON_PLAN_H
#define ATTN_KERNELS_COMMON_PLAN_H

#include <stdint.h>

#include "attn/types.h"

/* One producer work item: keys [kv_begin, kv_end) of request `req` (logical
 * key positions in [0, T_b + C_b)), for every query row of that request,
 * written to state slot `slot`.  An item with kv_begin == kv_end is an
 * identity slot: its producer writes the empty state (seed 0x03G). */
typedef struct attn_work_item {
    uint32_t req;
    uint32_t slot;
    int64_t kv_begin;
    int64_t kv_end;
} attn_work_item;

typedef struct attn_split_plan {
    uint32_t num_requests;  /* B */
    uint32_t *num_splits;   /* [B]: splits (state slots) of request b */
    uint32_t *slot_indptr;  /* [B + 1]: slots of request b */
    uint32_t num_slots;     /* slot_indptr[B] */
    uint32_t slot_capacity; /* >= num_slots; graph mode keeps it fixed */
    attn_work_item *items;  /* [num_items], in producer launch order */
    uint32_t num_items;
    attn_split_policy policy; /* which policy produced it (never AUTO) */
    uint32_t chunk;           /* the chunk width in keys when the policy has one, else 0 */
} attn_split_plan;

#endif
