/* Private to engines/cpu: the pieces attn_cpu_attend (one direct call) and
 * the engine instance (plan once, run per layer) share. */
#ifndef ATTN_ENGINES_CPU_INT_H
#define ATTN_ENGINES_CPU_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "engines/cpu/engine.h"
#include "engines/cpu/threads.h"
#include "kernels/cpu/run.h"

/* In which order a run visits the plan: segments run one after the other,
 * each its producers then its merges.  PARTITION has one segment per phase
 * present (prefill, append, decode); UNIFIED one over every phase with the
 * largest items first.  Every unit writes its own state slot and the merge
 * folds slots in slot order, so the order never changes a result bit. */
typedef struct cpu_order {
    attn_schedule_policy schedule; /* PARTITION or UNIFIED */
    uint32_t num_segments;
    uint32_t item_indptr[4]; /* segment s: items[item_indptr[s] .. item_indptr[s + 1]) */
    uint32_t *items;         /* indices into plan->items */
    uint64_t row_indptr[4];  /* segment s: rows[row_indptr[s] .. row_indptr[s + 1]) */
    int64_t *rows;           /* packed query rows */
} cpu_order;

/* Everything of a call that does not change per layer: validation (the
 * manifest unless `validated` says the caller just did it, `addr` when not
 * NULL, the plan), the shape fields, the mask program and the row maps.  No
 * buffer is bound and no workspace made. */
int cpu_prepare(cpu_run *r, const attn_manifest *m, const attn_pool_geometry *g,
                const attn_kv_addr *addr, const attn_split_plan *plan, const attn_cpu_options *opt,
                bool validated, attn_error_detail *err);

/* Release what cpu_prepare made. */
void cpu_release(cpu_run *r);

/* Fill `l` with the workspace the run carves (scalar states, then the
 * vectors, 64-byte aligned); fp64 accumulation when `f64`. */
void cpu_ledger(const cpu_run *r, bool f64, attn_ledger *l);

/* Point r->ws_scal and r->ws_vec into `ws` as `l` lays them out. */
void cpu_ws_bind(cpu_run *r, void *ws, const attn_ledger *l);

/* The visiting order of `s` (AUTO picks, and `why` says why). */
int cpu_order_build(const cpu_run *r, attn_schedule_policy s, cpu_order *out, char *why,
                    size_t why_len);

/* Release the arrays of an order. */
void cpu_order_free(cpu_order *o);

/* Run the producers and merges of `r` in `ord` on the pool's workers.
 * 0 or ATTN_E_NOMEM (a worker's scratch). */
int cpu_execute(cpu_run *r, bool f64, cpu_threads *t, const cpu_order *ord);

/* seed 0x08C: write the staged rows into their pages (after attention). */
void cpu_commit_rows(const cpu_run *r, void *k_store, void *v_store);

/* Bytes of the new rows of `r` in k_new / v_new form ([total_q, H_kv, d]). */
void cpu_rows_bytes(const cpu_run *r, size_t *k_bytes, size_t *v_bytes);

/* The inverse of cpu_commit_rows: copy the rows at logical T_b + i of each
 * request's pages into k_new / v_new form (a kv_written run's rows). */
void cpu_gather_rows(const cpu_run *r, const void *k_store, const void *v_store, void *k_new,
                     void *v_new);

/* Buffers a call must name; field paths as on the wire. */
int cpu_check_buffers(const void *k_store, const void *v_store, const void *q, const void *k_new,
                      const void *v_new, const void *o, attn_error_detail *err);

#endif
