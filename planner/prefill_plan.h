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
    uint32_t num_sms;           /* CTAs below which long m tiles are split */
    uint32_t fixed_splits;      /* > 0: split every m tile into this many parts */
    /* [B] or NULL: nonzero marks a request another kernel serves (the
     * decode rows of a partitioned mixed batch): it keeps its q rows and
     * record but gets no m tile, so the prefill kernel never touches it */
    const uint8_t *skip;
    /* the kernel configuration to cut tiles for (zero: ATTN_PREFILL_FULL);
     * ATTN_PREFILL_LIGHT serves d 64 and 128 only */
    attn_prefill_variant variant;
} attn_prefill_plan_in;

/* The tile shape of variant v at head dim d: tile_m packed query rows by
 * tile_n keys (full: 128 x 128 for d <= 128, 128 x 64 for d = 256; light:
 * 64 x 64). */
void attn_prefill_tile_shape(uint32_t head_dim, attn_prefill_variant v, uint32_t *tile_m,
                             uint32_t *tile_n);

/* Whether variant v has a kernel at head dim d (full: 64, 128, 256; light:
 * 64, 128). */
int attn_prefill_variant_serves(attn_prefill_variant v, uint32_t head_dim);

/* The name of a variant ("full", "light"), "?" outside the enum. */
const char *attn_prefill_variant_name(attn_prefill_variant v);

/* Build a plan; 0 or ATTN_E_SHAPE / ATTN_E_RANGE / ATTN_E_NOMEM with the
 * field named in err.  Release with attn_prefill_plan_free. */
int attn_prefill_plan_build(const attn_prefill_plan_in *in, attn_prefill_plan *out,
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
