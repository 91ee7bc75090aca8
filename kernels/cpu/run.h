/* Private to kernels/cpu: the state of one engine call shared by its
 * threads, and the producer/merge kernels instantiated for fp32 and fp64. */
#ifndef ATTN_CPU_RUN_H
#define ATTN_CPU_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/addr.h"
#include "kernels/common/mask.h"
#include "kernels/common/plan.h"

/* Everything a producer or merge unit reads; written only before the threads
 * start (the workspace is written by disjoint units). */
typedef struct cpu_run {
    const attn_manifest *m;
    const attn_split_plan *plan;
    attn_kv_addr addr;
    const void *k_store, *v_store;
    const void *q, *k_new, *v_new;
    void *o;
    float *lse;
    double *o64, *lse64; /* optional unrounded outputs (verification) */
    attn_mask_prog mask;
    uint32_t num_requests, num_qo_heads, num_kv_heads, group; /* group = H_q / H_kv */
    uint32_t heads_per_unit; /* K/V heads one producer unit walks: 1, or H_kv for NHD */
    uint32_t d_qk, d_vo;
    attn_dtype kv_dtype, q_dtype;
    attn_state_abi abi;
    double scale;
    uint32_t block_keys;
    int64_t total_q;
    uint32_t *row_req; /* [total_q]: request of each packed query row */
    uint64_t *ws_off;  /* [B]: first state of request b; state (i, h, s) at
                          ws_off[b] + (i * H_q + h) * S_b + s (seed 0x03D) */
    uint64_t num_states;
    void *ws_scal; /* [num_states] attn_mlu_* or attn_lseo_* */
    void *ws_vec;  /* [num_states][d_vo]: u (mlu) or O (lse_o) */
} cpu_run;

/* Bytes of per-thread scratch the producer of precision `acc_bytes` needs. */
size_t cpu_scratch_bytes(const cpu_run *r, size_t acc_bytes);

/* Producer of one unit: work item `item` over K/V heads [hk0, hk0 +
 * heads_per_unit); writes the partial states of every query row and query
 * head of those groups for the item's slot. */
void cpu_produce_f32(const cpu_run *r, void *scratch, uint32_t item, uint32_t hk0);
void cpu_produce_f64(const cpu_run *r, void *scratch, uint32_t item, uint32_t hk0);

/* Merge of one (packed query row, query head): fold the request's slots in
 * slot order, finalize, store O (q_dtype) and LSE. */
void cpu_merge_f32(const cpu_run *r, void *scratch, int64_t row, uint32_t h);
void cpu_merge_f64(const cpu_run *r, void *scratch, int64_t row, uint32_t h);

#endif
