/* attnd wire types: what a pool is and what one microbatch manifest says.
 *
 * These are the typed forms of the PROTOCOL.md messages.  The protocol
 * module decodes bytes into them, validates them completely, and every other
 * module (planner, engines, client) reads them.  Arrays are owned by whoever
 * filled the struct (see protocol/manifest.h for the owning helpers).
 */
#ifndef ATTN_TYPES_H
#define ATTN_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_MAX_HEAD_DIM 1024 /* head_dim_qk and head_dim_vo of a pool: one limit everywhere */
#define ATTN_NAME_MAX 64       /* pool names, request ids, backend names (with NUL) */

typedef enum attn_dtype { ATTN_FP32 = 0, ATTN_FP16 = 1, ATTN_BF16 = 2 } attn_dtype;

/* NHD: page -> slot -> head -> dim.  HND: page -> head -> slot -> dim. */
typedef enum attn_layout { ATTN_NHD = 0, ATTN_HND = 1 } attn_layout;

/* Phase follows from (T, C) alone (seed 0x08C). */
typedef enum attn_phase {
    ATTN_PHASE_PREFILL = 0, /* T = 0, C > 0 */
    ATTN_PHASE_APPEND = 1,  /* T > 0, C > 1 */
    ATTN_PHASE_DECODE = 2,  /* T > 0, C = 1 */
} attn_phase;

/* Geometry of one paged K/V pool (pool_create). */
typedef struct attn_pool_geometry {
    char name[ATTN_NAME_MAX];
    uint32_t layers;
    uint32_t num_pages;
    uint32_t page_size;    /* P: rows per page */
    uint32_t num_kv_heads; /* H_kv */
    uint32_t head_dim_qk;  /* d of K (and Q) */
    uint32_t head_dim_vo;  /* d of V (and O) */
    attn_dtype kv_dtype;
    attn_layout layout;
    char device[16]; /* "cpu" or "cuda:N" */
} attn_pool_geometry;

typedef enum attn_kv_format { ATTN_KV_CSR = 0, ATTN_KV_DENSE = 1 } attn_kv_format;

/* Page table of a microbatch.  Either way the pages of request b must cover
 * exactly T_b + C_b rows after the append (PROTOCOL.md, seed 0x04D). */
typedef struct attn_kv_table {
    attn_kv_format format;
    /* csr */
    int32_t *page_indptr;  /* [B + 1] */
    int32_t *page_indices; /* [page_indptr[B]] */
    uint32_t num_page_indices;
    int32_t *last_page_len; /* [B], each in [1, P] */
    /* dense */
    int32_t *block_table; /* [B][max_blocks]; entries past the visible blocks may be -1 */
    uint32_t max_blocks;
    int32_t *lens; /* [B]: rows after the append, must equal T_b + C_b */
} attn_kv_table;

typedef enum attn_mask_kind {
    ATTN_MASK_CAUSAL = 0,    /* bottom-right causal from (T, C): row i sees [0, T+i+1) */
    ATTN_MASK_NONE = 1,      /* every committed and new row visible */
    ATTN_MASK_WINDOW = 2,    /* causal and key >= T+i-left */
    ATTN_MASK_SINK = 3,      /* causal and (key < sinks or key >= T+i-left) */
    ATTN_MASK_FLASHMASK = 4, /* per-column masked row intervals (seed 0x06) */
    ATTN_MASK_DENSE = 5,     /* explicit bit matrix with explicit polarity */
} attn_mask_kind;

typedef enum attn_mask_polarity {
    ATTN_POLARITY_UNSET = 0, /* rejected: polarity must be explicit (seed 0x05B) */
    ATTN_POLARITY_TRUE_MEANS_MASKED = 1,
    ATTN_POLARITY_TRUE_MEANS_ALLOWED = 2,
} attn_mask_polarity;

/* Mask program of a microbatch (PROTOCOL.md "mask").  For FlashMask and dense
 * masks, data of all requests is concatenated in request order; request b's
 * block covers its C_b query rows and T_b + C_b key columns. */
typedef struct attn_mask {
    attn_mask_kind kind;
    int32_t left;  /* window, sink: how many keys before the diagonal stay visible */
    int32_t sinks; /* sink: the first `sinks` keys always visible */
    /* flashmask: four endpoint vectors, one entry per key column; each pair is
     * a half-open interval [start, end) of masked *query rows* (local, in
     * [0, C_b]); start == end means no masked run.  `causal` additionally
     * applies bottom-right causality. */
    bool fm_causal;
    int32_t *fm_lts, *fm_lte, *fm_uts, *fm_ute;
    uint64_t fm_len; /* sum over b of T_b + C_b */
    /* dense: per request a C_b x (T_b + C_b) row-major bit matrix, bits packed
     * LSB first, each request starting on a byte boundary. */
    attn_mask_polarity polarity;
    uint8_t *dense_bits;
    uint64_t dense_bytes;
} attn_mask;

typedef enum attn_schedule_policy {
    ATTN_SCHED_AUTO = 0,
    ATTN_SCHED_PARTITION = 1, /* one launch family per phase */
    ATTN_SCHED_UNIFIED = 2,   /* one persistent launch for the mixed batch */
} attn_schedule_policy;

/* The two sufficient-state ABIs of seed 0x02: (valid, m, l, u) or (LSE, O). */
typedef enum attn_state_abi { ATTN_ABI_LSE_O = 0, ATTN_ABI_MLU = 1 } attn_state_abi;

/* How split counts are chosen (seed 0x09, issue 4). */
typedef enum attn_split_policy {
    ATTN_SPLIT_AUTO = 0,
    ATTN_SPLIT_FA = 1,     /* FlashAttention wave-efficiency heuristic */
    ATTN_SPLIT_FI = 2,     /* FlashInfer pages-per-chunk binary search */
    ATTN_SPLIT_GLOBAL = 3, /* global equal-work partition */
    ATTN_SPLIT_FIXED = 4,  /* policy.splits given explicitly */
} attn_split_policy;

typedef struct attn_policy {
    char backend[ATTN_NAME_MAX]; /* "auto" or a registered backend name */
    attn_schedule_policy schedule;
    uint32_t splits; /* 0 = auto; otherwise a fixed split count per request */
    attn_split_policy split_policy;
    attn_state_abi state_abi;
    bool deterministic;
    bool graph;
} attn_policy;

typedef struct attn_request_desc {
    char id[ATTN_NAME_MAX]; /* unique within the manifest */
    int64_t cache_len;      /* T: committed rows before this step */
    int64_t new_len;        /* C: rows this step appends and queries */
} attn_request_desc;

/* One frozen microbatch (the `plan` request). */
typedef struct attn_manifest {
    char pool[ATTN_NAME_MAX];
    uint32_t num_qo_heads;
    uint32_t num_requests;       /* B */
    attn_request_desc *requests; /* [B] */
    int32_t *qo_indptr;          /* [B + 1] */
    attn_kv_table kv;
    attn_mask mask;
    bool has_sm_scale;
    float sm_scale; /* default 1/sqrt(head_dim_qk) */
    attn_dtype q_dtype;
    attn_policy policy;
} attn_manifest;

#ifdef __cplusplus
}
#endif
#endif
