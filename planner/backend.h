/* The engine interface: every backend (CPU reference, CUDA) plugs in through
 * one static table of function pointers, like nng's transports.
 *
 * The daemon never calls an engine directly: it asks the registry
 * (planner/registry.h) to admit and select a backend for a validated
 * manifest, then calls that backend's `run`.  Admission fills a full reason
 * vector (seed 0x07B), never just the first reason.
 */
#ifndef ATTN_PLANNER_BACKEND_H
#define ATTN_PLANNER_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/types.h"
#include "planner/plan.h"

/* The twelve admission factors of seed 0x07B. */
typedef enum attn_admit_factor {
    ATTN_ADMIT_INSTALLED = 0,
    ATTN_ADMIT_ENABLED,
    ATTN_ADMIT_PHASE,
    ATTN_ADMIT_HARDWARE,
    ATTN_ADMIT_Q_DTYPE,
    ATTN_ADMIT_KV_DTYPE, /* K/V dtype and cache representation */
    ATTN_ADMIT_SHAPE,    /* query length and head dims */
    ATTN_ADMIT_HEAD_RATIO,
    ATTN_ADMIT_LAYOUT, /* layout, strides, page size */
    ATTN_ADMIT_MASK,
    ATTN_ADMIT_NUMERICS,  /* numerics and determinism */
    ATTN_ADMIT_LIFECYCLE, /* graph, workspace, lifecycle */
    ATTN_ADMIT_NUM_FACTORS
} attn_admit_factor;

#define ATTN_REASONS_MAX 24

typedef struct attn_reason {
    attn_admit_factor factor;
    char field[48]; /* e.g. "head_dim_qk" */
    char text[160]; /* one sentence: "head_dim_qk 80 not in {64, 128, 256}" */
} attn_reason;

typedef struct attn_admission {
    bool admitted;
    uint32_t num_reasons;
    attn_reason reasons[ATTN_REASONS_MAX];
} attn_admission;

/* A pool as an engine sees it: geometry and per-layer base pointers, host or
 * device memory depending on the pool's platform. */
typedef struct attn_pool_view {
    const attn_pool_geometry *geom;
    attn_platform platform;
    int device; /* CUDA ordinal, -1 for host */
    void **k;   /* [layers] */
    void **v;   /* [layers] */
} attn_pool_view;

/* Everything one `run` needs.  Inputs and outputs are host buffers in wire
 * dtypes (q, o in q_dtype; k_new, v_new in the pool's kv_dtype). */
typedef struct attn_exec_args {
    const attn_manifest *m; /* validated */
    const attn_split_plan *plan;
    const attn_pool_view *pool;
    uint32_t layer;
    const void *q;     /* [total_q, H_q, d_qk] */
    const void *k_new; /* [total_q, H_kv, d_qk] */
    const void *v_new; /* [total_q, H_kv, d_vo] */
    void *o;           /* [total_q, H_q, d_vo] */
    float *lse;        /* [total_q, H_q], may be NULL */
    bool commit;       /* write the new rows into their pages after attention succeeded */
} attn_exec_args;

#define ATTN_KERNELS_MAX 8

/* What an engine says it ran (seed 0x0B): kernel symbols with launch counts
 * and the time the engine measured, and how. */
typedef struct attn_exec_report {
    uint32_t num_kernels;
    struct {
        char symbol[96];
        uint32_t launches;
    } kernels[ATTN_KERNELS_MAX];
    bool kernels_observed; /* true when a tracer saw them, false when declared */
    double engine_us;
    char timing_method[32]; /* "cuda_events" or "host_clock" */
} attn_exec_report;

typedef struct attn_backend attn_backend;

struct attn_backend {
    const char *name; /* "cpu_ref", "cuda_decode", ... */
    attn_platform platform;
    uint32_t phases; /* bit (1u << attn_phase) per phase in the candidate domain */
    int priority;    /* lower runs first under `auto` */
    /* Fill `out` with every reason this backend cannot run the call. */
    void (*admit)(const attn_backend *self, const attn_manifest *m, const attn_pool_geometry *g,
                  attn_admission *out);
    /* Build the split plan this backend will run (policy from m->policy). */
    int (*plan)(const attn_backend *self, const attn_manifest *m, const attn_pool_geometry *g,
                attn_split_plan *out);
    /* Stage, attend, merge and (when a->commit) commit; on failure the pool
     * is unchanged.  Returns 0 or an attn_err. */
    int (*run)(const attn_backend *self, const attn_exec_args *a, attn_exec_report *rep);
    void *ctx; /* the engine's own state */
};

#endif
