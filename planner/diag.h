/* The typed dispatch diagnostic of one reply (PROTOCOL.md "diag", seed 0x07I,
 * 0x0B) and the evidence ladder that rates it (seed 0x0AH, 0x0B).
 *
 * The diagnostic borrows what is large and already lives until the reply is
 * encoded (call key, selection, split plan) and copies what is small.  The
 * encoders are in planner/diag_encode.h (msgpack for replies, JSON for
 * attnctl); the explanation of the JSON form is protocol/diag.h.
 */
#ifndef ATTN_PLANNER_DIAG_H
#define ATTN_PLANNER_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/backend.h"
#include "planner/key.h"
#include "planner/plan.h"
#include "planner/registry.h"

#define ATTN_DIAG_WS_MAX 8

/* How the kernels in a diagnostic are known (seed 0x0BF: a selected backend
 * class never stands in for an observed symbol). */
typedef enum attn_kernel_source {
    ATTN_KERNELS_NONE = 0,     /* nothing ran (error reply) or nothing recorded */
    ATTN_KERNELS_DECLARED = 1, /* the engine says what it launched; nothing watched */
    ATTN_KERNELS_HOST = 2,     /* host engine: recorded by the code that executed them */
    ATTN_KERNELS_TRACED = 3,   /* a device tracer (CUPTI activity) observed them */
} attn_kernel_source;

typedef struct attn_diag_kernel {
    char symbol[256]; /* the exact (mangled) symbol as the tracer reported it */
    uint32_t launches;
    uint32_t grid[3], block[3]; /* 0 when not traced */
    double gpu_us;              /* summed device duration, 0 when not traced */
} attn_diag_kernel;

/* One field of the workspace ledger (seed 0x03D-H): name, dtype, elements, bytes. */
typedef struct attn_diag_workspace {
    char field[32];
    char dtype[8]; /* "" when only the byte count is known */
    uint64_t elems;
    uint64_t bytes;
} attn_diag_workspace;

/* The correctness check of a reply (seed 0x0BG). */
typedef struct attn_verify_result {
    bool done;
    bool passed;
    char reference[48]; /* e.g. "cpu_ref fp64 accumulation" */
    char metric[16];    /* the declared metric: "max_rel" or "rel_l2" */
    double rtol, lse_atol;
    double max_abs, max_rel, rel_l2, lse_max_abs;
    uint64_t nonfinite_mismatches; /* -inf LSE / zero-O policy violations */
    bool cache_checked;            /* the committed rows were compared too */
    uint64_t cache_mismatches;     /* committed (row, head) pairs that differ from k_new/v_new */
} attn_verify_result;

/* What happened, as the evidence ladder needs it. */
typedef struct attn_evidence_inputs {
    bool source_identified;   /* build id names the source revision */
    bool artifact_identified; /* exe + loaded objects hashed, build and compiler known */
    bool selection_recorded;  /* call key digest and a selected backend */
    attn_kernel_source kernels;
    bool verified;      /* a correctness comparison ran */
    bool verify_passed; /* ... and passed at the declared tolerance */
    bool timed;         /* timing with a stated method */
} attn_evidence_inputs;

/* The highest level whose every lower rung is present (seed 0x0B: L* = max
 * l with R_1..R_l present; no skipping).  2 source revision, 3 loaded
 * artifact, 4 selection bound to a call key, 5 kernels observed (traced or
 * host-recorded; declared does not count), 6 correctness passed and timed.
 * `why` gets the first missing rung ("" at 6). */
int attn_evidence_level(const attn_evidence_inputs *in, char *why, size_t n);

typedef struct attn_diag {
    /* dispatch (borrowed; must outlive encoding) */
    const attn_key *call_key;
    char call_key_sha256[ATTN_SHA256_HEX];
    const attn_selection *sel; /* NULL when the call failed before selection */
    /* schedule */
    const attn_request_desc *requests; /* borrowed; the phase of each request */
    uint32_t num_requests;
    const attn_split_plan *plan;             /* NULL when not planned */
    attn_schedule_policy schedule;           /* what the engine runs */
    attn_schedule_policy schedule_requested; /* what policy.schedule asked */
    char schedule_why[512];                  /* the engine's reason for its schedule */
    const attn_tile_report *tiles;           /* borrowed; NULL when the engine does not tile */
    attn_state_abi state_abi;
    /* workspace ledger, bytes by field */
    uint32_t num_workspace;
    attn_diag_workspace workspace[ATTN_DIAG_WS_MAX];
    /* plan cache */
    char plan_key_sha256[ATTN_SHA256_HEX];
    attn_plan_decision plan_event;
    uint64_t plan_id;
    bool planned; /* the plan fields above are set */
    /* execution */
    attn_kernel_source kernel_source;
    char tracer[32]; /* "cupti activity", "host engine", "" */
    uint32_t num_kernels;
    attn_diag_kernel kernels[ATTN_KERNELS_MAX];
    double timing_us;
    char timing_method[32]; /* "cuda_events", "host_clock", "" when not timed */
    char timing_scope[64];  /* what the timed interval contains */
    bool host_timed;        /* the daemon's own host-clock window is set */
    double host_us;         /* that window, always by the host clock */
    char host_scope[64];
    attn_verify_result verify;
    /* zero-copy path (PROTOCOL.md v2) */
    uint64_t async_seq;     /* an asynchronous run's run_seq: no timing yet; 0 = synchronous */
    bool handoff_set;       /* the run waits or signals: the GPU hand-off is reported */
    int handoff_mps;        /* 1 under MPS, 0 not, -1 unknown */
    char handoff_note[256]; /* one sentence: overlapped or time-sliced, and what that costs */
    double handoff_us;      /* the semaphore ping-pong attnd measured; 0: none (host semaphores) */
    /* evidence */
    char artifact_sha256[ATTN_SHA256_HEX]; /* "" when not identified */
    int evidence_level;
    char evidence_cap[160];
} attn_diag;

/* An asynchronous run: the reply came once it was enqueued, so the diag
 * carries no timing; run_status `seq` gives it later. */
void attn_diag_set_async(attn_diag *dg, uint64_t seq);

/* A run that waits or signals: whether the hand-off runs under MPS (1, 0,
 * -1 unknown) and one sentence on what that means. */
void attn_diag_set_handoff(attn_diag *dg, int mps, const char *note);

/* The measured semaphore ping-pong of the run's device (us per round trip;
 * 0: none measured), reported beside the hand-off sentence. */
void attn_diag_set_handoff_measured(attn_diag *dg, double us);

/* Start a diagnostic for a call with key `call_key` (computes its digest). */
int attn_diag_init(attn_diag *dg, const attn_key *call_key);

/* Start a diagnostic whose call-key digest the caller already holds (a
 * plan's key is hashed once at plan time, not once per run). */
void attn_diag_init_digest(attn_diag *dg, const attn_key *call_key,
                           const char call_key_sha256[ATTN_SHA256_HEX]);

/* Record the selection (borrowed). */
void attn_diag_set_selection(attn_diag *dg, const attn_selection *sel);

/* Record the schedule: the split plan (borrowed), schedule and state ABI. */
void attn_diag_set_schedule(attn_diag *dg, const attn_split_plan *plan,
                            attn_schedule_policy schedule, attn_state_abi abi);

/* Add one workspace field; ATTN_E_TOO_LARGE beyond ATTN_DIAG_WS_MAX. */
int attn_diag_add_workspace(attn_diag *dg, const char *field, uint64_t bytes);

/* Append one ledger field with its dtype and element count. */
int attn_diag_add_workspace_field(attn_diag *dg, const char *field, const char *dtype,
                                  uint64_t elems, uint64_t bytes);

/* Record the tile classes of a tiled plan (borrowed; seed 0x06G); NULL
 * or an uncounted report leaves the diagnostic's "tiles" null. */
void attn_diag_set_tiles(attn_diag *dg, const attn_tile_report *tiles);

/* Record the manifest's requests (borrowed), so the diagnostic states the
 * phase of each request (seed 0x08F: a mixed batch has no single phase). */
void attn_diag_set_requests(attn_diag *dg, const attn_request_desc *requests, uint32_t n);

/* Record the plan key digest, the lifecycle event and the plan id. */
void attn_diag_set_plan(attn_diag *dg, const char plan_key_sha256[ATTN_SHA256_HEX],
                        const attn_plan_decision *ev, uint64_t plan_id);

/* Record an engine report; `source` says how its kernels are known. */
void attn_diag_set_report(attn_diag *dg, const attn_exec_report *rep, attn_kernel_source source);

/* How a report's kernels count as evidence (seed 0x0BF): TRACED when a
 * device tracer saw them, HOST when a host-platform engine reports what its
 * own code executed (there is no launch between the record and the work),
 * DECLARED for a device engine nobody watched, NONE when it reports none. */
attn_kernel_source attn_kernel_source_for(attn_platform platform, const attn_exec_report *rep,
                                          bool traced);

/* Replace the kernels with traced ones (symbol, launches, grid, block, duration). */
void attn_diag_set_traced(attn_diag *dg, const attn_diag_kernel *k, uint32_t n, const char *tracer);

/* Record the timing and how it was taken. */
void attn_diag_set_timing(attn_diag *dg, double us, const char *method, const char *scope);

/* Record the daemon's host-clock window around a run, kept apart from the
 * engine's own timing (which may be CUDA events around the kernels only). */
void attn_diag_set_host_timing(attn_diag *dg, double us, const char *scope);

/* Record what policy.schedule asked and why the engine runs the schedule
 * attn_diag_set_schedule recorded (seed 0x08G: named, never relabelled). */
void attn_diag_set_schedule_choice(attn_diag *dg, attn_schedule_policy requested, const char *why);

/* Record a verification result. */
void attn_diag_set_verify(attn_diag *dg, const attn_verify_result *v);

/* Compute evidence_level and evidence_cap from what the diagnostic holds;
 * `artifact_sha256` is the daemon's artifact digest (NULL or "" when unknown),
 * `source_identified` whether the build id names a source revision. */
void attn_diag_finish(attn_diag *dg, const char *artifact_sha256, bool source_identified);

#endif
