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

/* ---- enumerations: one X-macro list each ---------------------------------
 *
 * Every enumeration of the wire (and of the configuration) is one list below,
 * libuv's UV_ERRNO_MAP habit: X(enumerator, value, "wire name"[, extra]).
 * The list generates the enum here, its count (ATTN_<LIST>_COUNT), and in
 * include/attn/names.h its to-string and from-string functions.  Add an
 * entry by appending one line; never renumber one (captures record them).
 * Code that dispatches on one of these enums uses a switch without a
 * `default:`, so -Wswitch -Werror names every place a new entry must be
 * handled.
 */
#define ATTN__ENUM_ENTRY(e, v, ...) e = (v),
#define ATTN__ENUM_PLUS_ONE(...) +1

/* Storage dtypes: X(enumerator, value, name, bytes per element). */
#define ATTN_DTYPES(X)                                                                             \
    X(ATTN_FP32, 0, "fp32", 4)                                                                     \
    X(ATTN_FP16, 1, "fp16", 2)                                                                     \
    X(ATTN_BF16, 2, "bf16", 2)

/* Pool layouts.  NHD: page -> slot -> head -> dim.  HND: page -> head -> slot -> dim. */
#define ATTN_LAYOUTS(X)                                                                            \
    X(ATTN_NHD, 0, "NHD")                                                                          \
    X(ATTN_HND, 1, "HND")

/* Phases follow from (T, C) alone (seed 0x08C): X(enumerator, value, name,
 * the one letter of the diagnostic's phase string). */
#define ATTN_PHASES(X)                                                                             \
    X(ATTN_PHASE_PREFILL, 0, "prefill", 'P') /* T = 0, C > 0 */                                    \
    X(ATTN_PHASE_APPEND, 1, "append", 'A')   /* T > 0, C > 1 */                                    \
    X(ATTN_PHASE_DECODE, 2, "decode", 'D')   /* T > 0, C = 1 */

/* Page-table formats of a manifest (PROTOCOL.md "kv.format"). */
#define ATTN_KV_FORMATS(X)                                                                         \
    X(ATTN_KV_CSR, 0, "csr")                                                                       \
    X(ATTN_KV_DENSE, 1, "dense")

/* Mask kinds (PROTOCOL.md "mask.kind", seed 0x05, 0x06). */
#define ATTN_MASK_KINDS(X)                                                                         \
    X(ATTN_MASK_CAUSAL, 0, "causal") /* bottom-right causal from (T, C): row i sees [0, T+i+1) */  \
    X(ATTN_MASK_NONE, 1, "none")     /* every committed and new row visible */                     \
    X(ATTN_MASK_WINDOW, 2, "window") /* causal and key >= T+i-left */                              \
    X(ATTN_MASK_SINK, 3, "sink")     /* causal and (key < sinks or key >= T+i-left) */             \
    X(ATTN_MASK_FLASHMASK, 4, "flashmask") /* per-column masked row intervals (seed 0x06) */       \
    X(ATTN_MASK_DENSE, 5, "dense")         /* explicit bit matrix with explicit polarity */

/* Dense-mask polarities; "unset" (0) is not on the list: polarity must be
 * explicit (seed 0x05B), so no wire name parses to it. */
#define ATTN_MASK_POLARITIES(X)                                                                    \
    X(ATTN_POLARITY_TRUE_MEANS_MASKED, 1, "true_means_masked")                                     \
    X(ATTN_POLARITY_TRUE_MEANS_ALLOWED, 2, "true_means_allowed")

/* Schedules of a mixed batch (policy.schedule, seed 0x08G). */
#define ATTN_SCHEDULES(X)                                                                          \
    X(ATTN_SCHED_AUTO, 0, "auto")                                                                  \
    X(ATTN_SCHED_PARTITION, 1, "partition") /* one launch family per phase */                      \
    X(ATTN_SCHED_UNIFIED, 2, "unified")     /* one persistent launch for the mixed batch */        \
    X(ATTN_SCHED_OVERLAP, 3, "overlap")     /* prefill and decode tiles co-resident per SM (POD) */

/* The two sufficient-state ABIs of seed 0x02: (LSE, O) or (valid, m, l, u). */
#define ATTN_STATE_ABIS(X)                                                                         \
    X(ATTN_ABI_LSE_O, 0, "lse_o")                                                                  \
    X(ATTN_ABI_MLU, 1, "mlu")

/* How split counts are chosen (policy.split_policy, seed 0x09, issue 4). */
#define ATTN_SPLIT_POLICIES(X)                                                                     \
    X(ATTN_SPLIT_AUTO, 0, "auto")                                                                  \
    X(ATTN_SPLIT_FA, 1, "fa")         /* FlashAttention wave-efficiency heuristic */               \
    X(ATTN_SPLIT_FI, 2, "fi")         /* FlashInfer pages-per-chunk binary search */               \
    X(ATTN_SPLIT_GLOBAL, 3, "global") /* global equal-work partition */                            \
    X(ATTN_SPLIT_FIXED, 4, "fixed")   /* policy.splits given explicitly */

/* Backend platforms: the device family of a pool and of an engine ("cpu",
 * "cuda:N" -> cuda).  0 is no platform. */
#define ATTN_PLATFORMS(X)                                                                          \
    X(ATTN_PLATFORM_CPU, 1, "cpu")                                                                 \
    X(ATTN_PLATFORM_CUDA, 2, "cuda")

/* Operations of PROTOCOL.md (the enum is in attn/client.h). */
#define ATTN_OPS(X)                                                                                \
    X(ATTN_OP_HELLO, 0, "hello")                                                                   \
    X(ATTN_OP_POOL_CREATE, 1, "pool_create")                                                       \
    X(ATTN_OP_POOL_DROP, 2, "pool_drop")                                                           \
    X(ATTN_OP_POOL_INFO, 3, "pool_info")                                                           \
    X(ATTN_OP_PLAN, 4, "plan")                                                                     \
    X(ATTN_OP_RUN, 5, "run")                                                                       \
    X(ATTN_OP_ATTEND, 6, "attend")                                                                 \
    X(ATTN_OP_KV_READ, 7, "kv_read")                                                               \
    X(ATTN_OP_KV_WRITE, 8, "kv_write")                                                             \
    X(ATTN_OP_STATS, 9, "stats")                                                                   \
    X(ATTN_OP_BUFFER_REGISTER, 10, "buffer_register")                                              \
    X(ATTN_OP_BUFFER_DROP, 11, "buffer_drop")                                                      \
    X(ATTN_OP_RUN_STATUS, 12, "run_status")

/* States of an asynchronous run (run_status): queued behind others or
 * behind its wait, running, done, failed (the pool restored), or cancelled
 * (its connection closed before it started: nothing ran, the pool unchanged). */
#define ATTN_RUN_STATES(X)                                                                         \
    X(ATTN_RUN_QUEUED, 0, "queued")                                                                \
    X(ATTN_RUN_RUNNING, 1, "running")                                                              \
    X(ATTN_RUN_DONE, 2, "done")                                                                    \
    X(ATTN_RUN_FAILED, 3, "failed")                                                                \
    X(ATTN_RUN_CANCELLED, 4, "cancelled")

/* Kinds of registered buffer (PROTOCOL.md v2, docs/protocol.md). */
#define ATTN_BUFFER_KINDS(X)                                                                       \
    X(ATTN_BUFFER_SHM, 0, "shm")           /* POSIX shared memory, mapped read-write */            \
    X(ATTN_BUFFER_CUDA_IPC, 1, "cuda_ipc") /* a cudaIpcMemHandle_t of device memory */

typedef enum attn_dtype { ATTN_DTYPES(ATTN__ENUM_ENTRY) } attn_dtype;
typedef enum attn_layout { ATTN_LAYOUTS(ATTN__ENUM_ENTRY) } attn_layout;
typedef enum attn_phase { ATTN_PHASES(ATTN__ENUM_ENTRY) } attn_phase;
typedef enum attn_kv_format { ATTN_KV_FORMATS(ATTN__ENUM_ENTRY) } attn_kv_format;
typedef enum attn_mask_kind { ATTN_MASK_KINDS(ATTN__ENUM_ENTRY) } attn_mask_kind;
typedef enum attn_mask_polarity {
    ATTN_POLARITY_UNSET = 0, /* rejected: polarity must be explicit (seed 0x05B) */
    ATTN_MASK_POLARITIES(ATTN__ENUM_ENTRY)
} attn_mask_polarity;
typedef enum attn_schedule_policy { ATTN_SCHEDULES(ATTN__ENUM_ENTRY) } attn_schedule_policy;
typedef enum attn_state_abi { ATTN_STATE_ABIS(ATTN__ENUM_ENTRY) } attn_state_abi;
typedef enum attn_split_policy { ATTN_SPLIT_POLICIES(ATTN__ENUM_ENTRY) } attn_split_policy;
typedef enum attn_platform { ATTN_PLATFORMS(ATTN__ENUM_ENTRY) } attn_platform;
typedef enum attn_buffer_kind { ATTN_BUFFER_KINDS(ATTN__ENUM_ENTRY) } attn_buffer_kind;
typedef enum attn_run_state { ATTN_RUN_STATES(ATTN__ENUM_ENTRY) } attn_run_state;

/* How many entries each list has (arrays indexed by an enum use these,
 * never a literal). */
enum {
    ATTN_DTYPE_COUNT = 0 ATTN_DTYPES(ATTN__ENUM_PLUS_ONE),
    ATTN_LAYOUT_COUNT = 0 ATTN_LAYOUTS(ATTN__ENUM_PLUS_ONE),
    ATTN_PHASE_COUNT = 0 ATTN_PHASES(ATTN__ENUM_PLUS_ONE),
    ATTN_KV_FORMAT_COUNT = 0 ATTN_KV_FORMATS(ATTN__ENUM_PLUS_ONE),
    ATTN_MASK_KIND_COUNT = 0 ATTN_MASK_KINDS(ATTN__ENUM_PLUS_ONE),
    ATTN_MASK_POLARITY_COUNT = 0 ATTN_MASK_POLARITIES(ATTN__ENUM_PLUS_ONE),
    ATTN_SCHEDULE_COUNT = 0 ATTN_SCHEDULES(ATTN__ENUM_PLUS_ONE),
    ATTN_STATE_ABI_COUNT = 0 ATTN_STATE_ABIS(ATTN__ENUM_PLUS_ONE),
    ATTN_SPLIT_POLICY_COUNT = 0 ATTN_SPLIT_POLICIES(ATTN__ENUM_PLUS_ONE),
    ATTN_PLATFORM_COUNT = 0 ATTN_PLATFORMS(ATTN__ENUM_PLUS_ONE),
    ATTN_BUFFER_KIND_COUNT = 0 ATTN_BUFFER_KINDS(ATTN__ENUM_PLUS_ONE),
    ATTN_RUN_STATE_COUNT = 0 ATTN_RUN_STATES(ATTN__ENUM_PLUS_ONE),
};

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
