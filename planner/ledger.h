/* Workspace ledgers: the bytes of every partial-state field (seed 0x03D-0x03H).
 *
 * One function sizes and carves: with base == NULL it only counts (the
 * workspace size to allocate); with a base it also hands out aligned
 * pointers from that buffer.  Both modes run the same code, so the size the
 * daemon allocates is the size the engine carves (flashinfer's aligned
 * allocator habit, STYLE.md).
 */
#ifndef ATTN_PLANNER_LEDGER_H
#define ATTN_PLANNER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "planner/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_LEDGER_FIELDS_MAX 8

/* What a workspace holds (seed 0x03D, 0x03H). */
typedef struct attn_ledger_spec {
    attn_state_abi abi;      /* MLU: u, m, l (+valid); LSE_O: O, LSE (+valid) */
    uint64_t states;         /* partial states: query rows x H_q x slots */
    uint32_t head_dim_vo;    /* d_v */
    uint32_t vec_align;      /* pad d_v up to a multiple of this many elements; 0 = 1 */
    attn_dtype vec_dtype;    /* storage of u or O */
    attn_dtype scalar_dtype; /* storage of m, l or LSE */
    bool explicit_valid;     /* a uint8 validity field per state */
    uint32_t align_bytes;    /* offset alignment of each field; 0 = packed */
} attn_ledger_spec;

/* One workspace field: partial_u [states, d_v_padded] fp32 at `offset`. */
typedef struct attn_ledger_field {
    char name[24]; /* "partial_u", "partial_m", "partial_l", "partial_O", "partial_LSE",
                      "partial_valid" */
    char dtype[8]; /* "fp32", "fp16", "bf16", "uint8" */
    uint32_t elem_bytes;
    uint64_t elems;
    uint64_t bytes;  /* elems x elem_bytes */
    uint64_t offset; /* from the workspace base, aligned */
    void *ptr;       /* base + offset in carving mode, NULL when counting */
} attn_ledger_field;

typedef struct attn_ledger {
    uint32_t num_fields;
    attn_ledger_field fields[ATTN_LEDGER_FIELDS_MAX];
    uint32_t head_dim_padded; /* d_v rounded up to vec_align */
    uint64_t payload_bytes;   /* sum of field bytes (seed 0x03E) */
    uint64_t total_bytes;     /* end of the last field, with offset alignment */
} attn_ledger;

/* Lay out the fields of `spec`.  base == NULL counts only; otherwise every
 * field gets a pointer into [base, base + capacity) and a workspace smaller
 * than total_bytes is E_WORKSPACE.  Returns 0 or an attn_err. */
int attn_ledger_layout(const attn_ledger_spec *spec, void *base, uint64_t capacity,
                       attn_ledger *out, attn_error_detail *err);

/* The field called `name`, or NULL. */
const attn_ledger_field *attn_ledger_find(const attn_ledger *l, const char *name);

/* Partial states of a plan: H_q x sum_b q_len[b] x (slots of b).  With
 * `capacity` false only slots owning keys count (the configured, logical
 * N_cfg of seed 0x03E); with true every slot counts, identity and unused
 * capacity slots included (N_cap; an unused slot counts one row).
 * q_len NULL means one query row per request. */
uint64_t attn_plan_num_states(const attn_split_plan *plan, const int64_t *q_len,
                              uint32_t num_qo_heads, bool capacity);

/* The reduction path of a two-launch design (seed 0x03F). */
typedef struct attn_reduction_traffic {
    uint64_t partial_write; /* producers write every consumed state once */
    uint64_t partial_read;  /* the reducer reads each once */
    uint64_t output_write;  /* out_states x d_v x bytes(o_dtype) */
    uint64_t lse_write;     /* out_states x 4 when write_lse */
    uint64_t total;
} attn_reduction_traffic;

/* Fill `t` for ledger `l` with out_states = query rows x H_q final rows. */
void attn_ledger_reduction_traffic(const attn_ledger *l, uint64_t out_states, uint32_t head_dim_vo,
                                   attn_dtype o_dtype, bool write_lse, attn_reduction_traffic *t);

/* Shapes that set the logical load ledger of seed 0x03F. */
typedef struct attn_load_spec {
    uint32_t num_qo_heads;
    uint32_t num_kv_heads;
    uint32_t head_dim_qk;
    uint32_t head_dim_vo;
    attn_dtype q_dtype;
    attn_dtype kv_dtype;
} attn_load_spec;

/* Logical (not measured) load bytes of a plan: unique payloads next to the
 * demand when every split loads Q and every query head loads its K/V rows. */
typedef struct attn_load_traffic {
    uint64_t q_unique;  /* query rows x H_q x d_qk x b_q */
    uint64_t q_demand;  /* the same once per non-empty split */
    uint64_t kv_unique; /* keys x H_kv x (d_qk + d_vo) x b_kv */
    uint64_t kv_demand; /* keys x H_q x (d_qk + d_vo) x b_kv */
} attn_load_traffic;

/* Fill `t` for `plan` (q_len NULL: one query row per request). */
void attn_plan_load_traffic(const attn_split_plan *plan, const int64_t *q_len,
                            const attn_load_spec *s, attn_load_traffic *t);

/* Write the ledger as JSON: {"total_bytes":..,"payload_bytes":..,"fields":
 * [{"name":..,"dtype":..,"elems":..,"bytes":..,"offset":..}, ...]}.
 * Returns the length it needs, like snprintf. */
size_t attn_ledger_json(const attn_ledger *l, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
