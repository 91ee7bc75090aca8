/* Launch glue of the CUDA decode kernels (private to kernels/cuda, the GPU
 * tests and the benchmark library).
 *
 * Every pointer in attn_cuda_decode_params is a DEVICE pointer.  The kernels
 * take the struct by value (flashinfer's habit, STYLE.md), never allocate,
 * and read every count that changes between steps (items, requests) from
 * device memory, so one captured CUDA graph replays correctly while lengths
 * change inside its capacity envelope (seed 0x03G, issue 4 "graph mode").
 */
#ifndef ATTN_CUDA_DECODE_LAUNCH_H
#define ATTN_CUDA_DECODE_LAUNCH_H

#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/decode_path.h"
#include "kernels/common/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counts the kernels read from device memory (graph mode changes them
 * between replays without touching the captured launch parameters). */
typedef struct attn_cuda_counts {
    int32_t num_items;    /* producer CTAs at or past this exit at once */
    int32_t num_requests; /* reducer CTAs at or past this exit at once */
} attn_cuda_counts;

/* Per-request metadata of one decode step (device array of B entries).
 * Visible keys are [lo0, hi0) U [lo1, hi1): the mask program of a C = 1
 * query row already applied, so the producer never tests a cell (seed
 * 0x05E: decode needs only length masks). */
typedef struct attn_cuda_req {
    int64_t lo0, hi0, lo1, hi1;
    int32_t qrow;       /* row of q / o / lse (qo_indptr[b]) */
    int32_t page_begin; /* first entry of this request in page_indices */
    int32_t slot_begin; /* slot_indptr[b] */
    int32_t num_slots;  /* slot_indptr[b+1] - slot_indptr[b]; 1 = direct path */
} attn_cuda_req;

typedef struct attn_cuda_decode_params {
    const void *q; /* [rows, H_q, d] in q_dtype */
    const void *k; /* the layer's K store */
    const void *v; /* the layer's V store */
    void *o;       /* [rows, H_q, d] in q_dtype */
    float *lse;    /* [rows, H_q] natural log, or NULL */
    /* workspace (carved from the ledger): state index = slot * H_q + h_q */
    float *part_vec;                /* [slot_capacity * H_q, d]: u (MLU) or O (LSE_O) */
    float *part_m;                  /* [slot_capacity * H_q]: m (MLU) or LSE (LSE_O) */
    float *part_l;                  /* [slot_capacity * H_q]: l (MLU only) */
    const attn_cuda_req *reqs;      /* [request_capacity] */
    const int32_t *page_indices;    /* flattened page list of every request */
    const attn_work_item *items;    /* [item_capacity] */
    const attn_cuda_counts *counts; /* device */
    uint32_t item_capacity;         /* producer grid.x */
    uint32_t request_capacity;      /* reducer grid.x */
    uint32_t num_qo_heads, num_kv_heads, head_dim;
    uint32_t page_shift;                          /* log2(page_size) */
    int64_t page_stride, head_stride, row_stride; /* elements (seed 0x04D) */
    attn_dtype q_dtype, kv_dtype;
    attn_state_abi abi;
    float sm_scale;
    int force_merge;  /* launch the reducer even when no request is split (graph mode) */
    int any_split;    /* some request has more than one slot */
    int heads_fast;   /* grid (H_kv, items, chunks) instead of (items, H_kv, chunks) */
    int row_prefetch; /* tensor-core producer: walk the page table ST tiles ahead */
    int simt;         /* run the CUDA-core producer instead of the tensor-core one */
    /* Fused reducer: the tensor-core producer's last CTA of each split
     * (request, K/V head, head chunk) folds the slots in slot order and no
     * reducer is launched (where one round of 128 threads folds the chunk's
     * heads; elsewhere the reducer kernel runs anyway).  Needs merge_counters. */
    int fused_merge;
    /* [request_capacity * H_kv * head_chunks] int32 counters, zero before
     * the first launch (the kernel leaves them zero again), or NULL. */
    int32_t *merge_counters;
    /* Tensor-core producer pipeline depth: 0 = the default of its head dim
     * (4 / 3 / 2 stages for d = 64 / 128 / 256), else 2 .. 6 (d = 256: 2 .. 3);
     * fewer stages take less shared memory, so more CTAs are resident
     * (attn_cuda_decode_occupancy_stages).  Out of range: ATTN_E_SHAPE. */
    uint32_t stages;
    /* Tensor-core producer: 1, 2 or 4 = the copy-warp producer with that
     * many copy warps (they issue a bulk copy per K/V row into mbarrier
     * stages), ATTN_CUDA_BULK_TMAP = two copy warps with tensor-map copies of
     * whole pages, ATTN_DECODE_BULK_AUTO = the measured best of those for the
     * launch, where kernels/common/decode_path.h says it serves the launch,
     * else (and with 0) the cp.async one; `stages` then means its
     * depth (3 / 3 / 2 by default, at most 6 / 5 / 3). */
    int bulk;
    /* Pages of the layer's K (and V) store: the extent of the tensor maps
     * of the tensor-map producer (bulk = ATTN_CUDA_BULK_TMAP); 0 = unknown. */
    uint32_t num_pages;
    /* Mean keys per work item of the plan (attn_decode_keys_per_item; 0 =
     * unknown): bulk auto keeps short items on the cp.async producer. */
    uint32_t keys_per_item;
    /* Tensor-map producer: L2 promotion of its copies, 0 = the default
     * (128 bytes), 1 = none, 2 = 128 bytes, 3 = 256 bytes (an A/B knob; out
     * of range: the default).  256 bytes cost one L2 lookup more per two
     * sectors and 7 % at B 128 x T 8192 (docs/cuda.md). */
    int tmap_l2;
    /* Tensor-map producer: 1 = its K/V copies carry the L2 evict_first
     * policy (a line read once leaves the L2 first), 0 = no cache hint;
     * the engine's plan sets it where the launch's K/V exceed the L2
     * (attn_decode_path_l2_evict_first). */
    int l2_evict_first;
    /* ATTN_CUDA_PDL_*: launch the producer and the reducer with
     * programmatic stream serialization (programmatic dependent launch,
     * sm_90): each may be placed on the SMs while the kernel before it in
     * the stream drains, and waits (griddepcontrol.wait) before its first
     * global access, so the stream order of every byte is kept.  EARLY: a
     * producer lets the next kernel be placed from its start, LATE: after
     * every CTA's main loop.  OFF (0): plain launches. */
    int pdl;
    /* Persistent CTAs (issue 13 round 4): 0 = one CTA per (item, K/V head,
     * head chunk); N > 0 = where the tensor-map producer runs at d = 128
     * with q in the cache dtype, at most N CTAs of its persistent variant
     * walk those pieces, each CTA's copy warp streaming on across its pieces
     * (docs/cuda.md; the engine passes SMs x resident CTAs per SM).  The
     * other producers ignore it. */
    uint32_t persist;
    /* SMs of the device (0: unknown): the auto producer choice for grids of
     * at most one CTA per SM (attn_decode_path_bulk). */
    uint32_t sm_count;
    /* tests and the overlap co-residency probe only (issue 12), else NULL:
     * the tensor-map producer's CTA of linear block id i < probe_ctas
     * writes {%smid, %globaltimer at its start, at its end} at 3 i */
    unsigned long long *probe;
    uint32_t probe_ctas;
    /* with probe (benchmarks only, else NULL): CTA i < probe_ctas of the
     * copy-warp producers writes {%globaltimer when its compute warps read
     * their last tile, when it starts folding the slots (0: not the last
     * CTA of its request)} at 2 i (bench/gpu/decode_probe.py) */
    unsigned long long *probe_phases;
} attn_cuda_decode_params;

/* attn_cuda_decode_params.pdl (docs/cuda.md, issue 13 round 3); any other
 * value is refused by the launch (ATTN_E_SHAPE). */
#define ATTN_CUDA_PDL_OFF 0
#define ATTN_CUDA_PDL_EARLY 1
#define ATTN_CUDA_PDL_LATE 2
/* The producer launched as the programmatic dependent of a kernel whose
 * writes it does not read (partition's one-stream fork: the prefill attend
 * kernel, which triggers at its start): its CTAs start without waiting and
 * trigger as LATE; thread 0 of CTA 0 waits for that kernel before it exits,
 * so the producer grid completes after it and the stream's later work
 * (reducer, combine, copy back) follows both.  The reducer waits as LATE. */
#define ATTN_CUDA_PDL_NO_WAIT 3
/* The engine's default: the late trigger, measured on the H200 never slower
 * and 2-7 % faster at the latency-bound shapes; the early one lost 9-18 % on
 * under-filled grids (bench/results/decode-h200-2026-12-01-r3.md). */
#define ATTN_CUDA_PDL_DEFAULT ATTN_CUDA_PDL_LATE

/* attn_cuda_decode_params.bulk: two copy warps moving whole pages with
 * tensor-map copies (boxes of min(P, 64) rows x 64 columns, 128-byte
 * swizzle) instead of one bulk copy per row. */
#define ATTN_CUDA_BULK_TMAP ATTN_DECODE_BULK_TMAP

/* The engine's default copy warps (attn_cuda_decode_params.bulk): the
 * measured best per head dim and page size (attn_decode_path_bulk). */
#define ATTN_CUDA_BULK_DEFAULT ATTN_DECODE_BULK_AUTO

/* Threads per producer CTA and the group heads one CTA serves. */
typedef struct attn_cuda_launch_shape {
    uint32_t bdx, bdy, bdz; /* lanes per row, heads, row groups */
    uint32_t head_chunks;   /* grid.z: CTAs that share one (item, kv head) */
    uint32_t smem_bytes;
} attn_cuda_launch_shape;

/* The CUDA-core producer's block shape for head dim d and group size g. */
void attn_cuda_decode_shape(uint32_t head_dim, uint32_t group, attn_cuda_launch_shape *s);

/* Resident producer CTAs per SM measured by the occupancy API for this
 * shape (0 when the configuration has no kernel). */
int attn_cuda_decode_occupancy(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group);

/* The same for a tensor-core producer `stages` deep (0: the default depth;
 * 0 is returned for a depth out of range), of the engine's default
 * producer (ATTN_CUDA_BULK_DEFAULT; attn_cuda_decode_occupancy too). */
int attn_cuda_decode_occupancy_stages(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group,
                                      uint32_t stages);

/* The same for the copy-warp producer with `bulk` copy warps (1, 2, 4), or
 * the cp.async tensor-core producer (bulk 0). */
int attn_cuda_decode_occupancy_path(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group,
                                    uint32_t stages, int bulk);

/* The bulk value to size a plan with and launch (attn_decode_path_plan_bulk)
 * for `requests` requests of this shape on `sm_count` SMs: `bulk`, or for
 * ATTN_CUDA_BULK_DEFAULT at head_dim 64 a small batch's tensor-map producer. */
int attn_cuda_decode_plan_bulk(uint32_t head_dim, attn_dtype kv_dtype, attn_dtype q_dtype,
                               uint32_t num_qo_heads, uint32_t num_kv_heads, uint32_t page_size,
                               uint64_t requests, uint32_t sm_count, int bulk);

/* CTAs that share one (item, kv head): query-head chunks of the producer. */
uint32_t attn_cuda_decode_head_chunks(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group);

/* Launch producer (+ reducer when a request is split) on `stream`
 * (a cudaStream_t).  Returns 0 or ATTN_E_CUDA / ATTN_E_DTYPE / ATTN_E_SHAPE. */
int attn_cuda_decode_launch(const attn_cuda_decode_params *p, void *stream);

/* The reducer alone: when a request of `p` is split (or force_merge), the
 * kernel that folds its slots (attn_cuda_decode_launch runs it after the
 * producer unless the producer folds them; the fused mixed kernel,
 * kernels/cuda/mixed.cu, after itself).  Returns 0 or ATTN_E_SHAPE /
 * ATTN_E_CUDA. */
int attn_cuda_decode_merge_launch(const attn_cuda_decode_params *p, void *stream);

/* Symbols of the kernels attn_cuda_decode_launch uses for `p`, for the
 * dispatch diagnostic ("declared"); returns how many were written. */
int attn_cuda_decode_symbols(const attn_cuda_decode_params *p, const char **producer,
                             const char **reducer);

/* One append (or restore) launch: for row r and kv head h, swap the pool
 * row at element offset row_off[r] + h * head_stride with new_k/new_v
 * (saving the old bytes into save_k/save_v), or, with restore != 0, put
 * the saved bytes back; a row whose row_off is negative is left alone (the
 * padding of a capacity envelope).  Rows of new_* and save_* are [rows,
 * H_kv, d] in kv_dtype; every pointer is a device pointer. */
typedef struct attn_cuda_append_params {
    void *k, *v;            /* the layer's K and V stores */
    const int64_t *row_off; /* [rows]: element offset of each new row at kv head 0 */
    uint32_t rows, num_kv_heads, head_dim;
    int64_t head_stride;       /* elements between kv heads of one row */
    attn_dtype kv_dtype;       /* 2-byte dtypes only: a row is whole 16-byte vectors */
    const void *new_k, *new_v; /* the new rows (unused with restore) */
    void *save_k, *save_v;     /* the old rows, written by the swap, read by restore */
    int restore;
} attn_cuda_append_params;

/* Launch one append or restore on `stream` (a cudaStream_t).  Returns 0,
 * or ATTN_E_SHAPE when a row is not whole 16-byte vectors, or ATTN_E_CUDA. */
int attn_cuda_append_launch(const attn_cuda_append_params *p, void *stream);

/* The symbol of the append kernel, for the dispatch diagnostic ("declared"). */
const char *attn_cuda_append_symbol(void);

#ifdef __cplusplus
}
#endif
#endif
