/* attnd counters shared by the loop and the request handlers; every field is
 * an atomic so nng threads, the loop and the workers update them lock-free.
 *
 * The request path updates them in one place (attnd_metrics_observe, called
 * once per answered frame by daemon/server.c); the loop keeps the transport
 * gauges (in flight, queued, connections, serving state).  The text form is
 * the Prometheus exposition (attnd_metrics_render), served on `--metrics`
 * by daemon/http.c and documented in docs/daemon.md.
 */
#ifndef ATTN_DAEMON_METRICS_H
#define ATTN_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/client.h"

/* Latency histogram buckets (upper bounds, seconds), fixed at build time. */
#define ATTND_LATENCY_BUCKETS(X)                                                                   \
    X(0.00001)                                                                                     \
    X(0.00005)                                                                                     \
    X(0.0001)                                                                                      \
    X(0.00025)                                                                                     \
    X(0.0005)                                                                                      \
    X(0.001)                                                                                       \
    X(0.0025)                                                                                      \
    X(0.005)                                                                                       \
    X(0.01)                                                                                        \
    X(0.025)                                                                                       \
    X(0.05)                                                                                        \
    X(0.1)                                                                                         \
    X(0.25)                                                                                        \
    X(0.5)                                                                                         \
    X(1)                                                                                           \
    X(2.5)                                                                                         \
    X(5)                                                                                           \
    X(10)
#define ATTND__COUNT_ONE(b) +1
#define ATTND_NUM_BUCKETS (0 ATTND_LATENCY_BUCKETS(ATTND__COUNT_ONE))

/* attn_err codes are 0..-99: counted by -code. */
#define ATTND_NUM_ERROR_CODES 100

/* Ops by attn_op, plus one slot for frames whose op could not be read. */
#define ATTND_OP_SLOTS (ATTN_OP_COUNT + 1)

/* Engines by platform (planner/backend.h: 1 = cpu, 2 = cuda). */
#define ATTND_NUM_PLATFORMS 3

/* One latency histogram: per-bucket counts (not cumulative; the last slot
 * is +Inf), their sum in nanoseconds and the total count. */
typedef struct attnd_histogram {
    _Atomic uint64_t bucket[ATTND_NUM_BUCKETS + 1];
    _Atomic uint64_t sum_ns;
    _Atomic uint64_t count;
} attnd_histogram;

typedef struct attnd_metrics {
    _Atomic uint64_t requests;   /* frames received */
    _Atomic uint64_t replies;    /* replies handed to nng */
    _Atomic uint64_t errors;     /* replies with ok = false */
    _Atomic uint64_t inline_ops; /* cheap ops answered without the hand-off */
    _Atomic uint64_t worker_ops; /* ops run on a worker thread */
    _Atomic uint64_t handoff_ns; /* sum over worker ops: nng receive -> worker start */
    _Atomic uint64_t handoff_max_ns;
    _Atomic uint64_t in_flight; /* received and not yet answered */
    _Atomic uint64_t shutting_down_replies;
    _Atomic uint64_t busy_replies;          /* E_BUSY: a connection at --conn-inflight */
    _Atomic uint64_t conns_refused;         /* closed at once: --max-conns reached */
    _Atomic uint64_t conns_closed_inflight; /* over --conn-inflight with unread replies */
    _Atomic uint64_t conns_closed_idle;     /* idle past --idle-timeout-ms */
    _Atomic uint64_t send_timeouts;         /* a reply not taken within --send-timeout-ms */
    _Atomic uint64_t queued;                /* handed to the loop, not yet on a worker */
    _Atomic uint64_t connections;           /* open pipes */
    _Atomic uint64_t connections_total;     /* pipes ever opened */
    _Atomic uint64_t frames_oversized;      /* connections nng closed for a frame over --max-msg */
    /* the request path (attnd_metrics_observe) */
    _Atomic uint64_t op_requests[ATTND_OP_SLOTS];
    _Atomic uint64_t op_errors[ATTND_OP_SLOTS];
    attnd_histogram op_latency[ATTND_OP_SLOTS];
    _Atomic uint64_t error_codes[ATTND_NUM_ERROR_CODES];
    _Atomic uint64_t engine_ns[ATTND_NUM_PLATFORMS];
    _Atomic uint64_t engine_runs[ATTND_NUM_PLATFORMS];
    /* readiness: /health/ready is 200 when all three say so */
    _Atomic int engines_ready; /* the server built its engines and pools */
    _Atomic int listening;     /* the listener accepted its address */
    _Atomic int draining;      /* shutdown began */
} attnd_metrics;

/* Add `ns` to the hand-off sum and raise the maximum. */
static inline void attnd_metrics_note_handoff(attnd_metrics *m, uint64_t ns)
{
    uint64_t cur = atomic_load(&m->handoff_max_ns);
    atomic_fetch_add(&m->handoff_ns, ns);
    while (ns > cur && !atomic_compare_exchange_weak(&m->handoff_max_ns, &cur, ns)) {
    }
}

/* Count one answered frame: its op (ATTN_OP_COUNT when unreadable), the
 * attn_err code of its reply (0 = ok) and how long the handler took. */
void attnd_metrics_observe(attnd_metrics *m, attn_op op, int code, uint64_t ns);

/* Add one engine run of `ns` nanoseconds on `platform` (1 = cpu, 2 = cuda). */
void attnd_metrics_note_engine(attnd_metrics *m, int platform, uint64_t ns);

/* 1 when /health/ready should answer 200: engines up, listening, not draining. */
int attnd_metrics_ready(const attnd_metrics *m);

/* What the server knows besides the counters, sampled at render time. */
typedef struct attnd_metrics_gauges {
    uint64_t plan_entries, plan_capacity, plan_bytes;
    uint64_t plan_hits, plan_misses, plan_replans, plan_evictions, plan_stale;
    uint64_t pools, pool_bytes, pool_budget;
    uint64_t engine_failures;
} attnd_metrics_gauges;

/* Render the Prometheus text exposition (format 0.0.4) into a malloc'ed
 * NUL-terminated buffer (*len without the NUL); ATTN_E_NOMEM on failure.
 * attnd_frames_oversized_total is listed only when the linked nng can tell
 * (attnd_oversize_observable): a counter stuck at 0 would say "none". */
int attnd_metrics_render(const attnd_metrics *m, const attnd_metrics_gauges *g, char **out,
                         size_t *len);

#endif
