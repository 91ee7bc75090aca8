/* Where the fused mixed-batch kernel (kernels/cuda/mixed.cu, issue 12's
 * overlap in one launch) serves a batch, decided on the host without a GPU
 * (the CUDA engine's admission and plan, the launch glue, and
 * tests/unit/test_mixed_path.c on CI).
 *
 * The kernel runs the prefill roles of the tensor-core prefill kernel (its
 * fused variant: 128 x 64 tiles) and the decode roles of the tensor-map
 * decode producer (one copy warp moving page runs by tensor map, two
 * compute warps) in one CTA per SM, so it serves what both of those serve
 * at once: head dims 64 and 128 with qk = vo, q in the K/V dtype (the
 * prefill MMA takes one type; the decode roles have no hi + lo split of q),
 * bf16 or fp16 K/V, and pages of a power-of-two size of at least 8 rows
 * (a tensor-map box is a run of one page's rows).
 */
#ifndef ATTN_COMMON_MIXED_PATH_H
#define ATTN_COMMON_MIXED_PATH_H

#include <stdint.h>

#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why the fused kernel has no instance for this geometry, one sentence
 * naming the limit; NULL when it has one. */
const char *attn_mixed_fused_refusal(uint32_t head_dim_qk, uint32_t head_dim_vo, attn_dtype q_dtype,
                                     attn_dtype kv_dtype, uint32_t page_size);

/* Decode pieces of a decode plan of `items` work items: the decode grid's
 * CTAs, items x H_kv x chunks of 16 query heads (0 for a head ratio that is
 * not whole).  The fused launch runs at least this many CTAs, one piece
 * each. */
uint64_t attn_mixed_fused_pieces(uint64_t items, uint32_t num_qo_heads, uint32_t num_kv_heads);

#ifdef __cplusplus
}
#endif
#endif
