/* Launch glue of the Hopper tensor-core prefill/append kernel (rows with
 * C >= 1: prefill T = 0, append T > 0, few-query verification C = 2..8).
 *
 * The kernel is sm_90a only: one producer warpgroup loads K/V tiles into a
 * multi-stage shared-memory ring guarded by mbarriers (K and V of a stage
 * on their own barriers) -- whole pages of a paged store by TMA boxes
 * (page size a power of two >= 8), every other row (a request's last
 * page, contiguous and ragged stores, other page sizes) by a 16-byte
 * cp.async gather through the one address program (kernels/common/addr.h); two consumer
 * warpgroups run S = Q K^T (wgmma, both operands in swizzled smem), the
 * online softmax in fp32 in the base-2 frame, and O += P V (wgmma, P from
 * registers).  GQA is always packed: the M rows of a tile are the pairs
 * (token, query head of the group) of one K/V head, so the g heads share
 * every K/V tile.
 *
 * Masks never reach the kernel as per-cell work except on PARTIAL tiles:
 * the host planner (planner/prefill_plan.h) classifies every (m tile, key tile)
 * with the one classifier of kernels/common/mask.h and hands the kernel
 * a compact list per m tile; SKIP tiles are absent (never loaded), FULL
 * tiles run without a mask test, PARTIAL tiles test attn_mask_visible.
 *
 * Every pointer in attn_cuda_prefill_params is a DEVICE pointer.  The
 * struct goes to the kernels by value (STYLE.md); kernels never allocate.
 */
#ifndef ATTN_CUDA_PREFILL_LAUNCH_H
#define ATTN_CUDA_PREFILL_LAUNCH_H

#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/addr.h"
#include "kernels/common/mask.h"
#include "kernels/common/prefill_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_cuda_prefill_params {
    const void *q;       /* [rows, H_q, d] in q_dtype (rows = qo_indptr[B]) */
    void *o;             /* [rows, H_q, d] in q_dtype */
    float *lse;          /* [rows, H_q] natural log, or NULL */
    const void *k;       /* the layer's K store */
    const void *v;       /* the layer's V store */
    attn_kv_addr kv;     /* translator whose arrays are device copies */
    attn_mask_prog mask; /* rebased onto a device copy of its arena */
    /* the plan (kernels/common/prefill_plan.h), uploaded once per plan */
    const attn_prefill_req *reqs;
    const attn_prefill_item *items;
    const int32_t *tiles;
    const attn_prefill_merge *merges;
    uint32_t num_items, num_merges;
    /* the per-CTA queues of the plan (kernels/common/prefill_plan.h): when
     * worker_indptr is not NULL the grid is num_workers CTAs and CTA w runs
     * the units order[worker_indptr[w] .. worker_indptr[w + 1]); NULL: the
     * grid is min(units, max_ctas) CTAs walking the snake */
    const uint32_t *worker_indptr, *order;
    uint32_t num_workers;
    /* 1: V's TMA boxes per page and 64-column chunk, as K's, where
     * attn_cuda_prefill_v_page_boxes would take whole pages; 0 (the
     * default) lets it.  Tests and A/B runs only (here: the 4-byte hole
     * after num_workers, so no other field moves). */
    uint32_t v_chunk_boxes;
    /* split partial states (plan.num_parts * H_kv * tile_m rows); NULL when
     * the plan has no split: vec is u (MLU) or O (LSE_O), m is m or LSE */
    float *part_vec, *part_m, *part_l;
    uint32_t num_qo_heads, num_kv_heads, head_dim;
    attn_dtype q_dtype, kv_dtype;
    attn_state_abi abi;
    float sm_scale;
    /* persistent grid: at most this many CTAs walk the (item, K/V head)
     * units (the SM count: one CTA fits an SM); 0 = one CTA per unit */
    uint32_t max_ctas;
    /* 1: every K/V row through the cp.async gather even where the store
     * admits the TMA tier (paged, page size a power of two >= 8); 0 (the
     * default) lets the launcher choose TMA.  Tests and A/B runs only. */
    uint32_t gather_only;
    /* the kernel configuration the plan's tiles are cut for (its tile_m x
     * tile_n): ATTN_PREFILL_FULL (zero), ATTN_PREFILL_LIGHT (d <= 128), or
     * ATTN_PREFILL_FUSED (d <= 128; attn_cuda_mixed_launch runs it beside
     * decode rows, attn_cuda_prefill_launch refuses it: ATTN_E_SHAPE) */
    attn_prefill_variant variant;
    /* 1: every CTA of the attend kernel lets the next kernel of the stream,
     * launched as its programmatic dependent, be placed as soon as it has
     * started (griddepcontrol.launch_dependents): partition's one-stream
     * fork places the decode kernels beside a capped grid that way. */
    uint32_t trigger_dependents;
    /* which kernels attn_cuda_prefill_launch launches: ATTN_PREFILL_PARTS_*
     * (0 = both, the attend kernel then the combine kernel when split) */
    uint32_t parts;
    /* tests and the co-residency probe only, else NULL: per CTA of the
     * attend kernel, {%smid, %globaltimer at its start, at its consumers'
     * end} (3 x gridDim.x values) */
    unsigned long long *probe;
    /* ATTN_PREFILL_CLUSTER_*: the attend kernel in 2-CTA clusters where
     * attn_cuda_prefill_clustered admits p (the cluster walk: CTAs 2j and
     * 2j + 1 walk their queues in lockstep, each multicasting half of every
     * K/V tile their entries flagged ATTN_PREFILL_ORDER_SHARED share), or
     * one of its parts alone (measurement); OFF: one CTA per cluster */
    uint32_t cluster;
} attn_cuda_prefill_params;

/* The key tile of p's kernel (its variant's tile_n at p's head dim). */
uint32_t attn_cuda_prefill_tile_n(const attn_cuda_prefill_params *p);

/* Whether the prefill kernel exists for this head dim and K/V dtype
 * (d 64/128/256, bf16/fp16) with q in the same dtype (the MMA takes both
 * operands in one type; rounding another q dtype would exceed the LSE
 * tolerance, so the engine must refuse or convert it). */
int attn_cuda_prefill_supported(uint32_t head_dim, attn_dtype kv_dtype, attn_dtype q_dtype);

/* Whether a launch of `p` loads K/V by the TMA tier (1) or the cp.async
 * gather (0): a paged store whose page size is a power of two in [8, the
 * key tile of p's head dim], 16-byte aligned K and V bases, pages indexable
 * in 32 bits, and gather_only off.  Host-only, no CUDA call; the launcher
 * falls back to the gather only if the driver cannot encode the maps. */
int attn_cuda_prefill_tma_tier(const attn_cuda_prefill_params *p);

/* Whether the TMA tier loads V as one box per page carrying every 64-column
 * chunk (a 5-d tensor map; V's stage then holds blocks of one page, each
 * [chunk][row]) instead of one box per page and chunk: the full kernel
 * (not the light or fused trials), the tier applies, d >= 128 (at d 64 a
 * page is one chunk already), pages of at least 16 rows (a 16-key step of
 * P V stays inside one block), v_chunk_boxes off.  Every page size the
 * tier admits: H200, 2026-12-03, the launches of both forms interleaved in
 * one process (docs/cuda-prefill.md, round 7), page 16 0.87-0.95x the
 * per-chunk boxes' time (causal S 4096..16384, append, d 256, group 8),
 * pages 32 and 64 0.98-1.00x, page 128 (one 32 KB box per 128-key tile at
 * d 128) 0.99-1.00x.  Host-only, no CUDA call. */
int attn_cuda_prefill_v_page_boxes(const attn_cuda_prefill_params *p);

/* attn_cuda_prefill_params.cluster */
#define ATTN_PREFILL_CLUSTER_OFF 0u
#define ATTN_PREFILL_CLUSTER_MULTICAST 1u /* lockstep, sibling tiles multicast */
#define ATTN_PREFILL_CLUSTER_LOCKSTEP 2u  /* measurement: lockstep, every tile by its own CTA */
#define ATTN_PREFILL_CLUSTER_LAUNCH 3u    /* measurement: the plain kernel in 2-CTA clusters */

/* Which ATTN_PREFILL_CLUSTER_* a launch of `p` runs (OFF: one CTA per cluster):
 * p->cluster set, the full variant at d 128 (the one clustered instance),
 * per-CTA queues of an even number of CTAs (the pair walk's grid), and the
 * TMA tier (multicast is a TMA copy); else OFF, and the plain kernel runs the
 * same queues (it ignores the entries' flags).  Host-only, no CUDA call. */
int attn_cuda_prefill_clustered(const attn_cuda_prefill_params *p);

/* attn_cuda_prefill_params.parts */
#define ATTN_PREFILL_PARTS_ALL 0u
#define ATTN_PREFILL_PARTS_ATTEND 1u
#define ATTN_PREFILL_PARTS_COMBINE 2u

/* Launch the attention kernel and, when the plan has merges, the combine
 * kernel on `stream` (a cudaStream_t), or the one p->parts names.  Returns 0, ATTN_E_SHAPE or
 * ATTN_E_DTYPE for a configuration without a kernel, or ATTN_E_CUDA. */
int attn_cuda_prefill_launch(const attn_cuda_prefill_params *p, void *stream);

/* The kernel symbols attn_cuda_prefill_launch runs for `p` (for the
 * dispatch diagnostic); *combine is NULL when no merge runs.  Returns how
 * many names were written (0 for an unsupported configuration). */
int attn_cuda_prefill_symbols(const attn_cuda_prefill_params *p, const char **attend,
                              const char **combine);

#ifdef __cplusplus
}
#endif
#endif
