/* A decode plan of cuda_decode (cuda_engine.h) held by another CUDA
 * engine: cuda_prefill's partition schedule runs the decode rows of a mixed
 * batch on the decode kernels through a sub-plan made here, so the decode
 * plan's image, split plan and ledger keep one home (engines/cuda/engine.c)
 * and the composite engine only binds pointers and launches
 * (kernels/cuda/decode_launch.h).
 */
#ifndef ATTN_CUDA_DECODE_PLAN_H
#define ATTN_CUDA_DECODE_PLAN_H

#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "engines/cuda/cuda_engine.h"
#include "kernels/cuda/decode_launch.h"
#include "planner/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_cuda_plan_host for requests whose q / o / lse rows are not their
 * qo_indptr: rows[b] is the packed row of request b in the caller's
 * buffers (NULL: qo_indptr[b]).  The caller's buffers must hold every such
 * row; nothing else changes. */
int attn_cuda_plan_host_rows(const attn_manifest *m, const attn_pool_geometry *g,
                             const attn_cuda_device_facts *dev, const attn_cuda_tuning *t,
                             const int32_t *rows, attn_engine_plan *out, attn_error_detail *err);

/* Upload the metadata image of a plan made by attn_cuda_plan_host(_rows)
 * (one transfer; the host copy is released).  ATTN_E_CUDA without CUDA. */
int attn_cuda_plan_upload(attn_engine_plan *p, attn_error_detail *err);

/* The launch parameters of an uploaded decode plan, its device metadata
 * bound; the caller sets q, k, v, o, lse, the partial-state pointers and
 * merge_counters (NULL: the plan's tuning must have fused_merge 0).
 * ATTN_E_ENGINE when `p` is not an uploaded decode plan. */
int attn_cuda_plan_params(const attn_engine_plan *p, attn_cuda_decode_params *out);

#ifdef __cplusplus
}
#endif
#endif
