/* The engine interface: every engine (CPU reference, CUDA) plugs in through
 * one versioned, static table of operations, like nng's transports, and
 * runs as instances, one per (engine, device).
 *
 * Lifecycle (ARCHITECTURE.md "Engines are plug-ins"):
 *   attn_engine_create   ops->init: the instance's stream(s), workspace,
 *                        thread pool and tuning, from the daemon's config
 *   admit                every reason the instance cannot run a call
 *   attn_engine_plan_new ops->plan: once per scheduler step; validation,
 *                        the split plan, the ledger the engine carves, the
 *                        key environment, private data (device metadata is
 *                        uploaded here, once)
 *   attn_engine_run      ops->run: once per layer; binds q, k_new, v_new,
 *                        o, lse and the layer's stores, then launches
 *   attn_engine_plan_release  ops->plan_free
 *   attn_engine_destroy  ops->fini
 * A plan belongs to the instance that made it: running it on another is
 * ATTN_E_STALE_PLAN.  Error detail (code, field, one sentence, the CUDA
 * runtime's own text) crosses every boundary through attn_error_detail.
 */
#ifndef ATTN_PLANNER_ENGINE_H
#define ATTN_PLANNER_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "planner/backend.h"
#include "planner/key.h"
#include "planner/ledger.h"
#include "planner/plan.h"
#include "planner/prefill_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a member of attn_engine_ops changes meaning or layout;
 * attn_engine_create refuses a table of another version. */
#define ATTN_ENGINE_OPS_VERSION 4u

/* Most instances of one engine (one per device). */
#define ATTN_ENGINE_DEVICES_MAX 16

/* What the daemon's configuration gives one instance. */
typedef struct attn_engine_config {
    int device;           /* CUDA ordinal for a device engine; -1 for a host engine */
    uint32_t num_threads; /* host engines: worker threads, 0 = online CPUs */
    const void *tuning;   /* engine-specific knobs (attn_cpu_options for cpu_ref,
                             attn_cuda_tuning for cuda_decode); NULL = defaults */
} attn_engine_config;

/* Where a plan runs and keeps its workspace: the key environment of the
 * call and plan keys (seed 0x07A, 0x0BE). */
typedef struct attn_engine_env {
    char device_type[8];       /* "cpu" or "cuda" */
    int compute_capability;    /* major * 10 + minor, e.g. 90; 0 on the host */
    char device[16];           /* the pool's device the plan binds: "cpu", "cuda:0" */
    char workspace_device[16]; /* where the partial states live */
} attn_engine_env;

/* The tile classes of a tiled plan (seed 0x06G: SKIP tiles are never
 * loaded, FULL tiles do no per-element mask work, PARTIAL tiles test
 * elements; logical cells are the visible ones, executed cells what the
 * FULL and PARTIAL tiles compute).  counted = false for an engine that
 * does not plan in tiles (the diag then says null). */
typedef struct attn_tile_report {
    bool counted;
    uint32_t tile_m, tile_n; /* packed query rows x keys of one tile */
    attn_prefill_ledger ledger;
} attn_tile_report;

typedef struct attn_engine attn_engine;
typedef struct attn_engine_ops attn_engine_ops;

/* What plan produced and run consumes.  The manifest and geometry given to
 * plan must outlive the plan (the daemon's cached plan owns both).  Every
 * field is written by plan and read-only afterwards; `priv` is private to
 * the engine. */
typedef struct attn_engine_plan {
    attn_engine *owner;    /* the instance that made it; only it runs it */
    attn_split_plan split; /* which keys each producer summarises */
    attn_ledger ledger;    /* the workspace the engine really carves, by field */
    attn_engine_env env;
    attn_schedule_policy schedule; /* what run executes; never AUTO */
    char schedule_why[512];        /* why that schedule, in one sentence */
    attn_tile_report tiles;        /* tile classes, when the engine tiles */
    void *priv;                    /* the engine's own per-plan data */
    uint64_t priv_bytes; /* host and device bytes priv holds (the daemon's plan-cache bound) */
} attn_engine_plan;

/* Which tensors of a run are device pointers (bits of attn_run_io.on_device). */
#define ATTN_IO_TENSORS(X)                                                                         \
    X(ATTN_IO_Q, 0, "q")                                                                           \
    X(ATTN_IO_K_NEW, 1, "k_new")                                                                   \
    X(ATTN_IO_V_NEW, 2, "v_new")                                                                   \
    X(ATTN_IO_O, 3, "o")                                                                           \
    X(ATTN_IO_LSE, 4, "lse")
typedef enum attn_io_tensor { ATTN_IO_TENSORS(ATTN__ENUM_ENTRY) } attn_io_tensor;

/* The per-layer bindings of one run.  Buffers in wire dtypes (q, o in
 * q_dtype; k_new, v_new in the pool's kv_dtype): host memory, or, for a
 * tensor whose bit (1u << attn_io_tensor) is set in on_device, memory of
 * the engine's device (a registered cuda_ipc buffer: no host copy).  The
 * stores come from `pool` at `layer`.  wait_dev / signal_dev: uint64
 * semaphores in device memory; the engine's stream waits (cyclic GEQ) on
 * the first before it reads any input and writes the second after its
 * last kernel.  Only engines whose platform is CUDA accept on_device bits
 * or device semaphores (the daemon refuses them for host engines). */
typedef struct attn_run_io {
    const attn_pool_view *pool;
    uint32_t layer;
    const void *q;      /* [total_q, H_q, d_qk] */
    const void *k_new;  /* [total_q, H_kv, d_qk] */
    const void *v_new;  /* [total_q, H_kv, d_vo] */
    void *o;            /* [total_q, H_q, d_vo] */
    float *lse;         /* [total_q, H_q], may be NULL */
    bool commit;        /* write the new rows into their pages after attention succeeded */
    unsigned on_device; /* bits (1u << attn_io_tensor) */
    void *wait_dev;     /* NULL: no wait */
    uint64_t wait_value;
    void *signal_dev; /* NULL: no signal */
    uint64_t signal_value;
    /* May return once the work is enqueued (rep->deferred), when the engine
     * has a `complete` op and can: then the buffers, the pool's stores and
     * the semaphores must stay valid until complete(rep->ticket). */
    bool defer;
    /* The new rows are in their page slots already (an exported pool the
     * client wrote): k_new and v_new are NULL, nothing is appended, and
     * nothing is restored, whatever `commit` says (the client owns them). */
    bool kv_written;
} attn_run_io;

/* How often an instance planned and ran (tests count re-validation with
 * it; `hello`/stats may report it). */
typedef struct attn_engine_counters {
    _Atomic uint64_t plans; /* plans built (validation, mask program, metadata) */
    _Atomic uint64_t runs;  /* runs started */
} attn_engine_counters;

struct attn_engine_ops {
    uint32_t version; /* ATTN_ENGINE_OPS_VERSION */
    const char *name; /* "cpu_ref", "cuda_decode", ... */
    attn_platform platform;
    uint32_t phases;    /* bit (1u << attn_phase) per phase in the candidate domain */
    uint32_t schedules; /* bit (1u << attn_schedule_policy) per schedule run can execute */
    int priority;       /* lower runs first under `auto` */
    /* Make the instance state for `cfg`; 0 or an attn_err with detail. */
    int (*init)(const attn_engine_config *cfg, void **state, attn_error_detail *err);
    /* Release what init made (every plan of the instance is freed first). */
    void (*fini)(void *state);
    /* Fill `out` with every reason this instance cannot run the call. */
    void (*admit)(const attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                  attn_admission *out);
    /* Fill `out` (zeroed, owner set) for a manifest the caller validated
     * completely against `g` (attn_manifest_validate: the daemon does it
     * before selection, so engines do not repeat it); on failure leave
     * nothing for plan_free to release. */
    int (*plan)(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                attn_engine_plan *out, attn_error_detail *err);
    /* Stage, attend, merge and (when io->commit) commit; on failure the pool
     * is unchanged (or ATTN_E_POOL_UNRESTORED says it could not be).  A run
     * enqueues the write of io->signal_dev after its last kernel and copy
     * and says so (rep->signalled); one that fails before that leaves the
     * write to its caller, through `signal`. */
    int (*run)(attn_engine *self, attn_engine_plan *p, const attn_run_io *io, attn_exec_report *rep,
               attn_error_detail *err);
    /* Release the split plan, ledger and private data of `p`. */
    void (*plan_free)(attn_engine *self, attn_engine_plan *p);
    /* Optional (NULL: run never defers).  Wait for the deferred run
     * `ticket` (rep->ticket of its run) and fill rep's timing; 0, or the
     * failure its work met on the device (the pool may then be partly
     * written: ATTN_E_POOL_UNRESTORED; its signal, enqueued behind its
     * kernels, is lost when the device faulted).  Called once per deferred
     * run, in ticket order. */
    int (*complete)(attn_engine *self, uint64_t ticket, attn_exec_report *rep,
                    attn_error_detail *err);
    /* Optional (NULL: the engine takes no device semaphores).  Write `value`
     * at the device word `addr` in the order of the instance's stream: after
     * all the work enqueued on it before (an earlier deferred run's kernels
     * and signal), so it never lands ahead of an earlier run's signal;
     * returns once enqueued.  The signal of a run that failed before its
     * engine enqueued it (rep->signalled false) or was refused after it was
     * admitted. */
    int (*signal)(attn_engine *self, void *addr, uint64_t value, attn_error_detail *err);
};

/* One (engine, device) instance.  Set by attn_engine_create and read-only
 * afterwards, except `state` (private to the engine) and `count` (updated
 * by attn_engine_plan_new and attn_engine_run). */
struct attn_engine {
    const attn_engine_ops *ops;
    int device;     /* CUDA ordinal, -1 for the host */
    char where[16]; /* "cpu" or "cuda:N" */
    void *state;    /* what ops->init made */
    attn_engine_counters count;
};

/* Create an instance of `ops` for `cfg` (NULL: the host, defaults):
 * checks the table's version and members, then calls init. */
int attn_engine_create(const attn_engine_ops *ops, const attn_engine_config *cfg, attn_engine **out,
                       attn_error_detail *err);

/* Finish and free an instance (NULL is ignored). */
void attn_engine_destroy(attn_engine *e);

/* Plan `m` (validated, as ops->plan says) on `e`: a new engine plan owned
 * by the caller, released with attn_engine_plan_release. */
int attn_engine_plan_new(attn_engine *e, const attn_manifest *m, const attn_pool_geometry *g,
                         attn_engine_plan **out, attn_error_detail *err);

/* Free a plan through its owner's plan_free (NULL is ignored). */
void attn_engine_plan_release(attn_engine_plan *p);

/* Run `p` on `e` for one layer; ATTN_E_STALE_PLAN when `p` was made by
 * another instance. */
int attn_engine_run(attn_engine *e, attn_engine_plan *p, const attn_run_io *io,
                    attn_exec_report *rep, attn_error_detail *err);

/* Wait for deferred run `ticket` of `e` (ops->complete; E_INVALID when the
 * engine has none). */
int attn_engine_complete(attn_engine *e, uint64_t ticket, attn_exec_report *rep,
                         attn_error_detail *err);

/* Write device semaphore `addr` = `value` behind e's earlier work
 * (ops->signal; E_BUFFER_UNSUPPORTED "signal" when the engine has none). */
int attn_engine_signal(attn_engine *e, void *addr, uint64_t value, attn_error_detail *err);

/* Fill the environment of a host engine: "cpu", cc 0, device and workspace "cpu". */
void attn_engine_env_host(attn_engine_env *env);

/* Fill the environment of a device engine: "cuda", cc major*10+minor, and
 * "cuda:N" for both the device and the workspace. */
void attn_engine_env_cuda(attn_engine_env *env, int device, int cc_major, int cc_minor);

/* The key environment as planner/key.h takes it (borrows `env`'s strings). */
attn_key_env attn_engine_key_env(const attn_engine_env *env);

/* Whether `ops` can run schedule `s` (AUTO always: the engine picks). */
bool attn_engine_implements(const attn_engine_ops *ops, attn_schedule_policy s);

#ifdef __cplusplus
}
#endif
#endif
