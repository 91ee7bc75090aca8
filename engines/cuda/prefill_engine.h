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
    X(ATTN_PREFILL_WALK_SNAKE, 2, "snake") /* units longest first, grid-strided, snaked */

#define ATTN__PREFILL_WALK_ENTRY(e, v, n) e = (v),
typedef enum attn_prefill_walk { ATTN_PREFILL_WALKS(ATTN__PREFILL_WALK_ENTRY) } attn_prefill_walk;
#undef ATTN__PREFILL_WALK_ENTRY

/* The walk auto means (measured: docs/cuda-prefill-engine.md, "Unit walk"). */
#define ATTN_PREFILL_WALK_DEFAULT ATTN_PREFILL_WALK_QUEUE

/* The name of a walk ("queue", ...), "?" outside the enum. */
const char *attn_prefill_walk_name(attn_prefill_walk w);

/* Parse the instance setting ATTN_PREFILL_WALK (one of the names; NULL or
 * "": auto).  ATTN_E_RANGE naming ATTN_PREFILL_WALK on anything else; *out
 * is untouched then. */
int attn_prefill_walk_parse(const char *s, attn_prefill_walk *out, attn_error_detail *err);

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
    /* 1: admit policy.schedule overlap, for measurement (engine init sets
     * it from ATTN_MIXED_OVERLAP=1); 0: overlap is refused with the
     * measured reason (attn_cuda_prefill_admit) */
    int overlap_trial;
    attn_prefill_walk walk; /* the unit walk; engine init reads ATTN_PREFILL_WALK when set */
} attn_cuda_prefill_tuning;

/* The engine's ops table (name "cuda_prefill", platform CUDA, phases
 * prefill, append and decode, schedules partition and unified).  A batch
 * with decode rows next to prefill/append rows runs as asked: unified (one
 * launch of the prefill kernel over every row), partition (the prefill
 * kernel over the prefill/append rows, then the decode kernels of
 * engines/cuda/decode_plan.h over the decode rows, one stream), or auto
 * (the cheaper by planner/mixed_cost.h; the plan's schedule_why gives both
 * estimates); overlap (the light prefill kernel, one CTA per SM, and the
 * decode kernels on the instance's second stream; head dims 64 and 128)
 * only as a trial (attn_cuda_prefill_tuning.overlap_trial), refused
 * otherwise.  The config's device is the CUDA
 * ordinal; its tuning, when not NULL, an attn_cuda_prefill_tuning. */
const attn_engine_ops *attn_cuda_prefill_engine_ops(void);

/* Replace the tuning of an instance made from attn_cuda_prefill_engine_ops()
 * (plans made afterwards use it). */
void attn_cuda_prefill_engine_set_tuning(attn_engine *e, const attn_cuda_prefill_tuning *t);

/* Fill `out` with every reason the prefill kernel cannot run the call:
 * device (a CUDA pool; compute capability 9.0 when `dev` is known), q in
 * the K/V dtype, K/V dtype bf16 or fp16, each head dimension, the head
 * ratio, page size, graph mode (not supported), the state ABI and the
 * kernel's index limits; on policy.schedule: partition of a mixed batch
 * whose decode rows the decode kernels cannot take (a per-cell mask, a page
 * size they do not walk); overlap unless `t` asks for its trial
 * (overlap_trial: measured to lose, r5), and then at head dims the light
 * kernel does not serve (256) or with decode rows the decode kernels cannot
 * take.  `dev` NULL: the device is not known (no capability check); `t`
 * NULL: the default tuning.  Pure host code. */
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
    const char *walk;     /* the unit walk: "queue" or "snake" */
    uint32_t num_workers; /* queue: the CTAs that have a queue (the grid); snake: 0 */
    double rho, eta;      /* queue: max / mean load and total / (CTAs x max load) */
} attn_cuda_prefill_plan_info;

/* Fill `out` for a plan made by attn_cuda_prefill_plan_host (or the
 * engine's plan); ATTN_E_ENGINE when `p` is not one. */
int attn_cuda_prefill_plan_info_get(const attn_engine_plan *p, attn_cuda_prefill_plan_info *out);

#ifdef __cplusplus
}
#endif
#endif
