/* attnd counters shared by the loop and the request handlers; every field is
 * an atomic so nng threads, the loop and the workers update them lock-free. */
#ifndef ATTN_DAEMON_METRICS_H
#define ATTN_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

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
} attnd_metrics;

/* Add `ns` to the hand-off sum and raise the maximum. */
static inline void attnd_metrics_note_handoff(attnd_metrics *m, uint64_t ns)
{
    uint64_t cur = atomic_load(&m->handoff_max_ns);
    atomic_fetch_add(&m->handoff_ns, ns);
    while (ns > cur && !atomic_compare_exchange_weak(&m->handoff_max_ns, &cur, ns)) {
    }
}

#endif
