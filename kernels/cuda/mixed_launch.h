/* Launch glue of the fused mixed-batch kernel (issue 12's overlap in one
 * launch; kernels/cuda/mixed.cu).
 *
 * A mixed batch has compute-bound rows (prefill, append: the tensor-core
 * prefill kernel) and bandwidth-bound rows (one-token decodes: the paged
 * split-KV decode producer).  Run one after the other, the SMs idle their
 * tensor cores through the decode rows and their memory pipes through the
 * prefill rows; the two kernels cannot share an SM, since each fills its
 * registers or shared memory (docs/cuda-prefill-engine.md, Overlap).  The
 * fused kernel puts both inside one CTA of 12 warps per SM:
 *
 *   warps 0-1   decode compute (the tensor-core decode producer's QK,
 *               online softmax and PV, 32 keys of each 64-key tile each)
 *   warp  2     decode copy warp (tensor-map page boxes into 3-4 stages)
 *   warp  3     prefill producer (Q, then K/V tiles: TMA page boxes or the
 *               cp.async gather)
 *   warps 4-11  two prefill consumer warpgroups (wgmma, 128 x 64 tiles)
 *
 * so each SM streams decode K/V from HBM while its tensor cores run prefill
 * tiles.  CTA b runs decode piece b (the decode grid's CTA b: one work
 * item, K/V head and head chunk; none past the pieces) and prefill queue b
 * of the plan's per-CTA queues (attn_prefill_plan_pair_queues or _queues over the launch's
 * CTAs), so every CTA gets an equal share of the prefill work beside its
 * piece (the queues know nothing of the decode pieces).  The prefill plan is cut for
 * ATTN_PREFILL_FUSED (kernels/common/prefill_plan.h); its split m tiles are
 * folded by the prefill combine kernel after, the decode rows' split slots
 * by the decode reducer after (attn_cuda_decode_merge_launch).
 *
 * Every pointer in both parameter structs is a DEVICE pointer.
 */
#ifndef ATTN_CUDA_MIXED_LAUNCH_H
#define ATTN_CUDA_MIXED_LAUNCH_H

#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/mixed_path.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/prefill_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads of one fused CTA (12 warps: 168 registers each, one CTA per SM). */
#define ATTN_CUDA_MIXED_THREADS 384u

/* Shared memory of one fused CTA at head dim d (0: no instance). */
uint32_t attn_cuda_mixed_smem(uint32_t head_dim);

/* Launch the fused kernel over max(prefill grid, decode pieces) CTAs (the
 * prefill grid: pf->num_workers with pf's per-CTA queues, else the snake's
 * min(pf->max_ctas, units); the CTAs past the queues run only their piece),
 * then the prefill combine kernel when pf has merges and the decode reducer
 * (with dp->pdl) when a decode request is split, on `stream` (a
 * cudaStream_t).  pf->variant must be ATTN_PREFILL_FUSED and the geometry
 * one attn_mixed_fused_refusal (kernels/common/mixed_path.h) admits.  dp's
 * producer choices (bulk, stages, persist, fused_merge) do not apply: its
 * rows run on the fused kernel's decode roles.  Returns 0, ATTN_E_SHAPE (no
 * instance for the geometry, pf and dp of different shapes), ATTN_E_DTYPE
 * (q or K/V dtype) or ATTN_E_CUDA. */
int attn_cuda_mixed_launch(const attn_cuda_prefill_params *pf, const attn_cuda_decode_params *dp,
                           void *stream);

/* The fused kernel's symbol at this head dim and K/V dtype, as the
 * profiler shows it (NULL: no instance). */
const char *attn_cuda_mixed_symbol(uint32_t head_dim, attn_dtype kv_dtype);

/* The kernels attn_cuda_mixed_launch runs for (pf, dp), for the dispatch
 * diagnostic: the fused kernel, the prefill combine (NULL when pf has no
 * merges) and the decode reducer (NULL when no decode request is split).
 * Returns how many names were written (0: no instance). */
int attn_cuda_mixed_symbols(const attn_cuda_prefill_params *pf, const attn_cuda_decode_params *dp,
                            const char **fused, const char **combine, const char **reducer);

#ifdef __cplusplus
}
#endif
#endif
