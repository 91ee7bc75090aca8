/* The CPU reference engine: exact attention for a whole mixed microbatch
 * (prefill, append and decode requests in one call) on the host, threaded.
 *
 * One call is one append transaction (seed 0x08C): validate everything,
 * stage the C_b new K/V rows of every request (query row i of request b sees
 * keys [0, T_b + i + 1) under causality, and keys >= T_b come from the
 * *staged* rows, never from the pool), run the split plan's producers (one
 * partial state per query row, query head and slot, seed 0x03I), merge each
 * request's slots in slot order with kernels/common/state.h, write O and
 * LSE, and only then, when asked, commit the new rows into their pages.  Any
 * failure before the commit leaves the pool byte-identical.
 *
 * Producers work on (work item, K/V head) units: one pass over the item's
 * K/V rows serves all H_q / H_kv query heads of the group (GQA packing);
 * scores of a block of keys are formed, exponentiated, then folded into the
 * values, and each block's summary is merged into the running state with
 * attn_mlu_merge (the algebra exists once, in state.h).  In an NHD store
 * the rows of all K/V heads of one token are adjacent, so there one unit
 * walks every K/V head of its item (still one pass per head) and reads the
 * pages in address order; the next block's rows are prefetched either way.
 */
#ifndef ATTN_CPU_ENGINE_H
#define ATTN_CPU_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "kernels/common/addr.h"
#include "planner/engine.h"
#include "planner/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Precision of scores, exponentials and partial states. */
typedef enum attn_cpu_acc {
    ATTN_CPU_ACC_F32 = 0, /* what a GPU kernel does; the fast path */
    ATTN_CPU_ACC_F64 = 1, /* reference precision for tests and `verify` */
} attn_cpu_acc;

/* Engine options; zero-initialised means: all online CPUs, fp32, default blocks. */
typedef struct attn_cpu_options {
    uint32_t num_threads; /* 0 = sysconf(_SC_NPROCESSORS_ONLN) */
    attn_cpu_acc acc;
    uint32_t block_keys; /* keys per score block, 0 = the layout's default (below) */
} attn_cpu_options;

/* Default keys per block: the rows of one block (and the block prefetched
 * ahead) should stay near L1/L2 size.  An NHD unit walks every K/V head of
 * a row, so its blocks hold H_kv times more bytes per key. */
#define ATTN_CPU_BLOCK_KEYS_DEFAULT 32u
#define ATTN_CPU_BLOCK_KEYS_NHD_DEFAULT 16u
#define ATTN_CPU_BLOCK_KEYS_MAX 1024u

/* One direct call.  `addr` NULL means: the paged pool of m->kv over `g`
 * (then the whole manifest is validated); otherwise `addr` describes another
 * store encoding of seed 0x04 (contiguous with a cache-row remap, packed
 * ragged, dense with a remap) addressing k_store/v_store, and the manifest
 * is validated without its page table while `addr` is validated with
 * attn_kv_addr_validate.  All buffers are host memory. */
typedef struct attn_cpu_call {
    const attn_manifest *m;
    const attn_pool_geometry *g; /* kv dtype, H_kv, head dims (and the pool for addr == NULL) */
    const attn_split_plan *plan; /* NULL: the engine builds its own (attn_cpu_plan) */
    const attn_kv_addr *addr;    /* NULL: m->kv over g */
    void *k_store;               /* K of one layer, in g->kv_dtype */
    void *v_store;               /* V of one layer */
    const void *q;               /* [total_q, H_q, d_qk] in m->q_dtype */
    const void *k_new;           /* [total_q, H_kv, d_qk] in g->kv_dtype */
    const void *v_new;           /* [total_q, H_kv, d_vo] in g->kv_dtype */
    void *o;                     /* [total_q, H_q, d_vo] in m->q_dtype */
    float *lse;                  /* [total_q, H_q] or NULL */
    double *o64;                 /* optional [total_q, H_q, d_vo]: O before output rounding */
    double *lse64;               /* optional [total_q, H_q]: LSE before rounding to float */
    bool commit;                 /* write the new rows into the store after attention */
} attn_cpu_call;

/* Run one call: validate (manifest, translator, plan, buffers), attend,
 * merge, then commit when asked.  Returns 0 or the specific ATTN_E_* with
 * the field in `err` (may be NULL); on failure the store is unchanged.
 * `opt` may be NULL (defaults). */
int attn_cpu_attend(const attn_cpu_call *c, const attn_cpu_options *opt, attn_error_detail *err);

/* Build the split plan the CPU engine runs for a manifest by default: the
 * manifest's policy, with FlashAttention's heuristic over `num_threads`
 * workers (0 = online CPUs) and H_kv units per split when it says auto. */
int attn_cpu_plan(const attn_manifest *m, const attn_pool_geometry *g, uint32_t num_threads,
                  attn_split_plan *out, attn_error_detail *err);

/* Online CPUs (at least 1). */
uint32_t attn_cpu_online_threads(void);

/* The engine's ops table ("cpu_ref", every phase, the partition and
 * unified schedules, always installed).  attn_engine_create makes an
 * instance with its own persistent worker threads; the config's tuning,
 * when not NULL, is an attn_cpu_options (num_threads there, when not 0,
 * wins over the config's). */
const attn_engine_ops *attn_cpu_engine_ops(void);

/* What one CPU instance did, for tests and stats: every plan validates the
 * manifest and builds the mask program once; a run does neither. */
typedef struct attn_cpu_engine_counts {
    uint64_t validations;     /* manifest + plan validations */
    uint64_t mask_programs;   /* mask programs built */
    uint64_t runs;            /* runs that reached the workers */
    uint64_t threads_started; /* worker threads this instance ever created */
} attn_cpu_engine_counts;

/* Read the counters of an instance made from attn_cpu_engine_ops(). */
void attn_cpu_engine_counts_get(const attn_engine *e, attn_cpu_engine_counts *out);

#ifdef __cplusplus
}
#endif
#endif
