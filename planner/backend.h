/* What crosses the engine interface besides the ops table itself
 * (planner/engine.h): platforms, the admission vector, the pool view and
 * the report of one run.
 *
 * The daemon never calls an engine directly: it asks the registry
 * (planner/registry.h) to admit and select an engine instance for a
 * validated manifest, then plans and runs through planner/engine.h.
 * Admission fills a full reason vector (seed 0x07B), never just the first
 * reason.
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

#define ATTN_KERNELS_MAX 8

/* What an engine says it ran (seed 0x0B): kernel symbols with launch counts
 * and the time the engine measured, and how. */
typedef struct attn_exec_report {
    uint32_t num_kernels;
    struct {
        char symbol[96];
        uint32_t launches;
    } kernels[ATTN_KERNELS_MAX];
    bool kernels_observed;  /* true when a tracer saw them, false when declared */
    double engine_us;       /* as the engine measured it, by timing_method */
    char timing_method[32]; /* "cuda_events" (kernels only) or "host_clock" */
    char timing_scope[64];  /* what the engine's interval contains */
    /* The run was only enqueued (attn_run_io.defer and an engine with a
     * `complete` op): its outcome and timing come from complete(ticket). */
    bool deferred;
    uint64_t ticket;
    /* The write of attn_run_io.signal_dev is enqueued on the engine's stream
     * (set even when the run fails after it): nobody may write it again, a
     * second write could land after the client reset the word. */
    bool signalled;
} attn_exec_report;

#endif
