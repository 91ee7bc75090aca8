/* The CUDA prefill/append engine ("cuda_prefill") as the daemon sees it:
 * plain C, no CUDA header needed.
 *
 * A second engine next to cuda_decode (cuda_engine.h), one instance per
 * device: it serves rows with C >= 1 (prefill T = 0, append T > 0 with
 * C > 1, few-query rows, and the C = 1 rows of a batch that mixes phases)
 * on CUDA pools with the sm_90a tensor-core kernel of
 * kernels/cuda/prefill_launch.h.  Its registry priority is just below
 * cuda_decode's, so a pure-decode batch keeps the decode kernel (faster
 * for C = 1) and this engine takes every batch that has a prefill or
 * append row, or a pure-decode batch the decode engine refuses.
 *
 * Plan (once per scheduler step): the tile plan of planner/prefill_plan.h
 * (tile classes from the one mask classifier), the mask program at the
 * kernel's key-tile width, the page-table arrays and every new row's page
 * slot, in one metadata image uploaded once; the ledger of the split
 * tiles' partial states, which the run carves.  Run (per layer, one append
 * transaction, seed 0x08C): stage the C new rows of every request in their
 * page slots saving the bytes they replace, attend (row i sees
 * [0, T + i + 1) under causal), copy O and LSE back, then commit, or put
 * the saved bytes back (no commit, or any failure), so a refused or failed
 * run leaves the pool byte-identical.
 */
#ifndef ATTN_CUDA_PREFILL_ENGINE_H
#define ATTN_CUDA_PREFILL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "engines/cuda/cuda_engine.h"
#include "planner/engine.h"
#include "planner/mixed_cost.h"
#include "planner/prefill_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registry priority of cuda_prefill: after cuda_decode (10), so decode
 * batches keep the decode kernel. */
#define ATTN_CUDA_PREFILL_PRIORITY 11

/* How the persistent CTAs of the prefill kernel take their units (item,
 * K/V head): X(enumerator, value, name). */
#define ATTN_PREFILL_WALKS(X)                                                                      \
    X(ATTN_PREFILL_WALK_AUTO, 0, "auto")   /* ATTN_PREFILL_WALK_DEFAULT */                         \
    X(ATTN_PREFILL_WALK_QUEUE, 1, "queue") /* the plan's least-loaded per-CTA queues */            \
    X(ATTN_PREFILL_WALK_SNAKE, 2, "snake") /* units longest first, grid-strided, snaked */         \
    X(ATTN_PREFILL_WALK_PAIRS, 3, "pairs") /* queues, sibling units side by side */                \
    X(ATTN_PREFILL_WALK_CLUSTER, 4,                                                                \
      "cluster") /* pairs, each CTA pair a 2-CTA cluster multicasting its siblings' K/V tiles */

#define ATTN__PREFILL_WALK_ENTRY(e, v, n) e = (v),
typedef enum attn_prefill_walk { ATTN_PREFILL_WALKS(ATTN__PREFILL_WALK_ENTRY) } attn_prefill_walk;
#undef ATTN__PREFILL_WALK_ENTRY

/* The walk auto means (measured: docs/cuda-prefill-engine.md, "Unit walk":
 * H200 2026-12-03, pairs against queue in one process, M3 0.96-0.97x, the
 * other batches within 1 %; the cluster walk against pairs 1.05-1.57x,
 * bench/results/mixed-h200-2026-12-03-r32). */
#define ATTN_PREFILL_WALK_DEFAULT ATTN_PREFILL_WALK_PAIRS

/* The name of a walk ("queue", ...), "?" outside the enum. */
const char *attn_prefill_walk_name(attn_prefill_walk w);

/* Parse the instance setting ATTN_PREFILL_WALK (one of the names; NULL or
 * "": auto).  ATTN_E_RANGE naming ATTN_PREFILL_WALK on anything else; *out
 * is untouched then. */
int attn_prefill_walk_parse(const char *s, attn_prefill_walk *out, attn_error_detail *err);

/* attn_cuda_prefill_tuning.overlap_trial: policy.schedule overlap is
 * refused (OFF, the default: both designs measured slower than partition
 * on the H200, docs/cuda-prefill-engine.md "Overlap"), or runs as a trial
 * for measurement: the light prefill kernel with the decode kernels on a
 * second stream (LIGHT), or the fused kernel, prefill and decode roles in
 * one CTA per SM (FUSED, kernels/cuda/mixed_launch.h). */
#define ATTN_OVERLAP_OFF 0
#define ATTN_OVERLAP_LIGHT 1
#define ATTN_OVERLAP_FUSED 2

/* Parse the instance setting ATTN_MIXED_OVERLAP: "1" or "light" (LIGHT),
 * "fused" (FUSED), NULL, "" or "0" (OFF).  ATTN_E_RANGE naming
 * ATTN_MIXED_OVERLAP on anything else; *trial is untouched then. */
int attn_mixed_overlap_parse(const char *s, int *trial, attn_error_detail *err);

/* Knobs of one instance. */
typedef struct attn_cuda_prefill_tuning {
    int poison;                 /* tests: NaN bytes in O, LSE and the workspace before every run */
    int fail_after_staging;     /* tests: fail the run once the new rows are staged (the restore
                                   path); the run returns ATTN_E_CUDA with field "test" */
    int fail_restore_launches;  /* tests: refuse this many restore launches of every run
                                   (ATTN_E_CUDA, as a launch the driver refuses); 0: none */
    attn_mixed_streams streams; /* partition's stream variant; engine init reads it from
                                   ATTN_MIXED_STREAMS / ATTN_MIXED_PREFILL_CTAS when set */
    /* tests (the overlap co-residency check): a device buffer of 2 + 3 x
     * (SMs + probe_decode_ctas) values, or NULL.  A forked run writes the
     * GPU time at which the second stream reached its decode kernels and
     * the time it was done with them ([0], [1], by attn_cuda_stamp_launch),
     * per CTA of the prefill attend kernel {%smid, start, end} from [2] on,
     * and per CTA of the tensor-map decode producer the same from
     * [2 + 3 x SMs] on (the first probe_decode_ctas CTAs) */
    uint64_t *probe;
    uint32_t probe_decode_ctas;
    /* ATTN_OVERLAP_*: which trial of policy.schedule overlap runs (engine
     * init reads ATTN_MIXED_OVERLAP); OFF: overlap is refused with the
     * measured reason (attn_cuda_prefill_admit) */
    int overlap_trial;
    attn_prefill_walk walk; /* the unit walk; engine init reads ATTN_PREFILL_WALK when set */
    /* the cluster walk's launch, ATTN_PREFILL_CLUSTER_MULTICAST (0 means
     * it too), or one of its parts alone for measurement: LOCKSTEP or
     * LAUNCH (kernels/cuda/prefill_launch.h); engine init reads
     * ATTN_PREFILL_CLUSTER_TRIAL ("lockstep", "launch") when set */
    uint32_t cluster_trial;
} attn_cuda_prefill_tuning;

/* The engine's ops table (name "cuda_prefill", platform CUDA, phases
 * prefill, append and decode, schedules partition and unified).  A batch
 * with decode rows next to prefill/append rows runs as asked: unified (one
 * launch of the prefill kernel over every row), partition (the prefill
 * kernel over the prefill/append rows, then the decode kernels of
 * engines/cuda/decode_plan.h over the decode rows, one stream), or auto
 * (the cheaper by planner/mixed_cost.h; the plan's schedule_why gives both
 * estimates); overlap only as a trial of the instance
 * (attn_cuda_prefill_tuning.overlap_trial: the light prefill kernel, one
 * CTA per SM, and the decode kernels on the instance's second stream; or
 * the fused kernel, both in one launch; head dims 64 and 128), refused
 * otherwise.  The config's device is the CUDA
 * ordinal; its tuning, when not NULL, an attn_cuda_prefill_tuning. */
const attn_engine_ops *attn_cuda_prefill_engine_ops(void);

/* Replace the tuning of an instance made from attn_cuda_prefill_engine_ops()
 * (plans made afterwards use it). */
void attn_cuda_prefill_engine_set_tuning(attn_engine *e, const attn_cuda_prefill_tuning *t);

/* Fill `out` with every reason the prefill kernel cannot run the call:
 * device (a CUDA pool; compute capability 9.0 when `dev` is known), q in
 * the K/V dtype, K/V dtype bf16 or fp16, each head dimension, the head
 * ratio, page size, the state ABI and the kernel's index limits; on
 * policy.schedule: partition of a mixed batch whose decode rows the decode
 * kernels cannot take (a per-cell mask, a page size they do not walk);
 * overlap unless `t` asks for a trial (overlap_trial: both measured to
 * lose, r5 and r6), and then at geometries its kernel does not serve (head
 * dim 256; the fused kernel also page sizes below 8 or not a power of two)
 * or with decode rows the decode kernels cannot take; under policy.graph (admitted:
 * the capacity envelope of attn_cuda_prefill_graph_update) a per-cell mask
 * (its arrays have no envelope) and partition or overlap of a batch with
 * decode rows (the decode sub-plan has none).  `dev` NULL: the device is
 * not known (no capability check); `t` NULL: the default tuning.  Pure
 * host code. */
void attn_cuda_prefill_admit(const attn_manifest *m, const attn_pool_geometry *g,
                             const attn_cuda_device_facts *dev, const attn_cuda_prefill_tuning *t,
                             attn_admission *out);

/* The host half of the engine's plan, no CUDA call: the tile plan (split
 * policy from the manifest: FIXED with policy.splits, else the planner's
 * load bound, reported as FA) and its per-CTA queues (the tuning's walk),
 * the mask program at the key-tile width, the checks the manifest
 * validator cannot make (page ids inside this pool, a page slot for every
 * new row), the metadata image, the ledger of the partial states, the
 * tile-class report, the key environment and the schedule.  Free with
 * attn_cuda_prefill_plan_host_free. */
int attn_cuda_prefill_plan_host(const attn_manifest *m, const attn_pool_geometry *g,
                                const attn_cuda_device_facts *dev,
                                const attn_cuda_prefill_tuning *t, attn_engine_plan *out,
                                attn_error_detail *err);

/* Release what attn_cuda_prefill_plan_host made (and the device copy). */
void attn_cuda_prefill_plan_host_free(attn_engine_plan *p);

/* What a prefill plan holds, for tests and the bench: the tile plan's
 * sizes and the bytes of its one upload. */
typedef struct attn_cuda_prefill_plan_info {
    uint32_t tile_m, tile_n;
    uint32_t num_items, num_tiles, num_merges, num_parts;
    uint32_t total_q;     /* new rows staged per run */
    uint64_t meta_bytes;  /* the plan's one host-to-device transfer */
    const char *attend;   /* the attention kernel's symbol */
    const char *combine;  /* the combine kernel's symbol, NULL without merges */
    const char *streams;  /* partition's variant: "serial", "decode-first" or "prefill-first" */
    uint32_t max_ctas;    /* the prefill grid's CTAs at most (capped when forked) */
    const char *walk;     /* the unit walk: "queue", "pairs", "cluster" or "snake" */
    uint32_t num_workers; /* queue, pairs: the CTAs that have a queue (the grid); snake: 0 */
    uint32_t pairs;       /* pairs, cluster: the units run beside their sibling (0: plain) */
    double rho, eta;      /* queue, pairs: max / mean load, total / (CTAs x max load) */
    /* cluster: the launch asks for 2-CTA clusters (attn_cuda_prefill_params
     * .cluster; attn_cuda_prefill_clustered decides at launch) */
    uint32_t cluster;
} attn_cuda_prefill_plan_info;

/* Fill `out` for a plan made by attn_cuda_prefill_plan_host (or the
 * engine's plan); ATTN_E_ENGINE when `p` is not one. */
int attn_cuda_prefill_plan_info_get(const attn_engine_plan *p, attn_cuda_prefill_plan_info *out);

/* ---- graph mode (policy.graph, seed 0x03G) ----------------------------------
 *
 * A plan made under policy.graph is the capacity envelope of the steps that
 * follow: its manifest gives the most requests, q rows and keys of a
 * request (and the page-table sizes) any step may have; the tile, item,
 * merge and part counts are bounded from those (planner/prefill_plan.h).
 * Every array of the metadata image, the run's buffers and the partial
 * states are sized to the envelope once, so the kernels' pointers and
 * grids never change: the attend grid is one CTA per queue (a queue may be
 * empty: its CTA exits at once), the combine grid the envelope's merges
 * (the padded ones name a request with no rows and exit at once), the
 * append the envelope's rows (the padded rows have offset -1 and move
 * nothing), the copies the envelope's rows (rows past the step's are
 * unspecified).  An update rewrites the image in place for the next step's
 * lengths.  The schedule is unified (one launch of the prefill kernel),
 * the walk the queues; the mask kind, scale, heads, pool, dtypes, ABI and
 * split policy are the plan's and may not change. */

/* What a graph-mode plan holds (zero for another plan): its envelope and
 * the step the image describes now. */
typedef struct attn_cuda_prefill_graph_info {
    bool graph;
    attn_prefill_envelope env;
    uint32_t max_page_indices; /* CSR: page_indices; dense: the table's row length */
    uint32_t step_requests, step_q_rows, step_items, step_tiles, step_merges, step_parts;
    uint32_t step_workers; /* queues with units (the rest of the grid exits at once) */
} attn_cuda_prefill_graph_info;

/* Fill `out` (ATTN_E_ENGINE when `p` is not a prefill plan). */
int attn_cuda_prefill_graph_info_get(const attn_engine_plan *p, attn_cuda_prefill_graph_info *out);

/* The plan arrays of a plan's host image (non-owning views; the host image
 * lives until the upload, for a graph-mode plan for the plan's life):
 * reqs, items, tiles, merges and queues with their counts as the kernels
 * see them (graph mode: the envelope's counts, padding included), and the
 * new rows' element offsets (`*rows`, `*num_rows`; -1 past the step's).
 * ATTN_E_ENGINE without a host image. */
int attn_cuda_prefill_plan_arrays(const attn_engine_plan *p, attn_prefill_plan *view,
                                  const int64_t **rows, uint32_t *num_rows);

/* The host half of an update: plan the step `m` (the same pool geometry
 * `g` and plan-static fields as the graph-mode plan `p`, lengths inside
 * its envelope; the split bound and the grid of the plan's device) and
 * rewrite p's host image for it.  ATTN_E_ENGINE when p
 * is not a graph-mode plan; ATTN_E_CAPACITY naming the field a step
 * exceeds ("num_requests", "qo_indptr", "requests[3]", "kv.page_indices",
 * "envelope.max_tiles", ...); ATTN_E_BACKEND_REJECTED naming a
 * plan-static field that differs ("mask.kind", "num_qo_heads", ...); on
 * any error the image is untouched.  Pure host code. */
int attn_cuda_prefill_plan_host_update(attn_engine_plan *p, const attn_manifest *m,
                                       const attn_pool_geometry *g, attn_error_detail *err);

/* Update the graph-mode plan `p` of instance `e` for the step `m`: the host
 * half, then the new image copied into the same device buffer (a blocking
 * copy: the caller orders it after the replays that read the previous
 * step, e.g. by synchronizing their stream).  Errors as the host half, or
 * ATTN_E_CUDA (the host image then still describes the previous step). */
int attn_cuda_prefill_graph_update(attn_engine *e, attn_engine_plan *p, const attn_manifest *m,
                                   const attn_pool_geometry *g, attn_error_detail *err);

/* Enqueue one layer's run of the graph-mode plan `p` on `stream` (a
 * cudaStream_t; under stream capture it becomes the graph's nodes) and
 * return without waiting: q, k_new, v_new copied in (the envelope's rows),
 * the new rows staged and committed (io->commit must be set: there is no
 * restore without a wait), attend, combine, O and LSE copied out.  The
 * buffers are the plan's, so a graph captured once stays valid for the
 * plan's life; io's pointers are baked into it.  No semaphores (io's
 * wait_dev / signal_dev must be NULL), no timing.  ATTN_E_ENGINE when p
 * is not a graph-mode plan, ATTN_E_RANGE naming the io field, or the
 * launchers' errors. */
int attn_cuda_prefill_graph_enqueue(attn_engine *e, attn_engine_plan *p, const attn_run_io *io,
                                    void *stream, attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif
