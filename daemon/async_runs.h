/* Asynchronous runs (`"async": true`, PROTOCOL.md v2) and the semaphore
 * waits of every run, with their release when a connection closes.
 *
 * A run that asks for async is validated completely on the request path
 * (every error before enqueue is reported as for a synchronous run), then
 * queued here and answered with a run_seq.  One worker thread executes the
 * queue in order (runs of one pool must apply in order, and the engine
 * instances are serial anyway); `run_status` reads a run's state, timing
 * and failure, and a failure is also handed to the next reply of the
 * connection that asked (attnd_async_take_failure) and counted in stats.
 *
 * Waits: a run that waits on a semaphore registers an attnd_wait while it
 * waits (host waits on shm words poll here; device waits sit on the engine's
 * stream), so that the close of its connection releases it: a host wait is
 * cancelled (the run does not execute, the pool is unchanged), a device wait
 * is released by writing the awaited value from a control stream (its
 * already-enqueued kernels then complete).  Queued runs of a closed
 * connection are cancelled before they start; each one's `cancel` still
 * comes, in its turn in the queue (so its signal lands in run order).
 *
 * Thread-safe (one mutex, one condition variable per purpose).
 */
#ifndef ATTN_DAEMON_ASYNC_RUNS_H
#define ATTN_DAEMON_ASYNC_RUNS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"

typedef struct attnd_async attnd_async;
typedef struct attnd_async_job attnd_async_job;

/* One queued run: the caller embeds it in its own job record (first
 * member) and fills conn, seq (attnd_async_reserve_seq), run and release. */
struct attnd_async_job {
    attnd_async_job *next;
    uint32_t conn;
    uint64_t seq;
    double t_enqueued_us; /* monotonic clock */
    /* Execute the run; 0 or an attn_err with `err` filled.  *engine_us and
     * `method` get the engine's timing. */
    int (*run)(attnd_async_job *j, double *engine_us, char method[32], attn_error_detail *err);
    /* Free the job (after run, or instead of it when cancelled). */
    void (*release)(attnd_async_job *j);
    /* Optional.  run returned ATTND_ASYNC_PENDING: the work is only
     * enqueued; complete waits for it (0 or an attn_err, timing as run's). */
    int (*complete)(attnd_async_job *j, double *engine_us, char method[32], attn_error_detail *err);
    /* Optional: true when j may be run while `prev` (pending) is still in
     * flight (same device stream); else prev completes first. */
    bool (*follows)(const attnd_async_job *j, const attnd_async_job *prev);
    /* Optional: called instead of run when j was cancelled while queued, at
     * its turn (after the jobs before it, as run would be); `err` says why
     * and may be extended (the run's signal, written as a failed run's). */
    void (*cancel)(attnd_async_job *j, attn_error_detail *err);
    bool cancelled; /* the queue's: cancelled while queued */
};

/* What run returns for work it only enqueued (complete finishes it). */
#define ATTND_ASYNC_PENDING 1

/* Deferred jobs in flight at once: the CUDA engine's event slots
 * (engines/cuda/engine.c CUDA_DEFER_SLOTS; beyond them it would run
 * synchronously).  A pipelined client's runs of a 32-layer step are then
 * enqueued on the device up to 16 layers ahead, so the host's jitter stays
 * off the GPU's path (4 covered ~1 ms of it, issue 11). */
#define ATTND_ASYNC_INFLIGHT 16

/* A wait in progress on a semaphore of connection `conn`; `release` (called
 * at most once, under the table's lock, so it must not block: it enqueues
 * the write of the awaited value) frees it when the connection closes.
 * Host waits poll `released`. */
typedef struct attnd_wait {
    struct attnd_wait *next;
    uint32_t conn;
    _Atomic int released;
    void (*release)(struct attnd_wait *w); /* NULL: setting `released` is enough */
    void *arg;                             /* the release's own data */
} attnd_wait;

/* A synchronous run in progress on a handler thread (the queue's worker
 * runs the async ones), listed from before it resolves its buffers until it
 * ends, so that the close of its connection also reaches a wait the run
 * enters after the close (attnd_async_wait_enter releases it at once). */
typedef struct attnd_sync_run {
    struct attnd_sync_run *next;
    uint32_t conn;
    bool closed; /* its connection closed (set under the queue's lock) */
} attnd_sync_run;

/* Counters for `stats`. */
typedef struct attnd_async_stats {
    uint64_t enqueued, done, failed, cancelled;
    uint64_t pending;                 /* queued or running now */
    uint64_t waits_released_on_close; /* semaphore waits a closing connection left */
} attnd_async_stats;

/* Start the worker; remembers the last `history` runs for run_status. */
int attnd_async_create(attnd_async **out, uint32_t history);

/* Cancel what is queued, release every wait, join the worker, free. */
void attnd_async_destroy(attnd_async *a);

/* A new run_seq (>= 1), for a job about to be submitted (its reply names it). */
uint64_t attnd_async_reserve_seq(attnd_async *a);

/* Queue `j` (its conn, seq, run, release set); from here the queue owns it. */
void attnd_async_submit(attnd_async *a, attnd_async_job *j);

/* The state of run `seq` of connection `conn`: E_RANGE "run_seq" when it is
 * unknown, of another connection or no longer remembered. */
int attnd_async_status(attnd_async *a, uint32_t conn, uint64_t seq, attn_run_status *st,
                       attn_error_detail *err);

/* The oldest failure of `conn`'s asynchronous runs not yet reported (then
 * forgotten): true with *seq and *e filled, false when there is none. */
bool attnd_async_take_failure(attnd_async *a, uint32_t conn, uint64_t *seq, attn_error_detail *e);

/* Block until no run of `conn` is queued or running (a synchronous request
 * that touches pools applies after the connection's earlier async runs). */
void attnd_async_drain_conn(attnd_async *a, uint32_t conn);

/* Whether connection `conn` is still open (the loop's connection table). */
typedef bool (*attnd_conn_open_fn)(void *arg, uint32_t conn);

/* Ask `fn` when a synchronous run lists itself (NULL, the default: every
 * connection is open).  A connection leaves the table before its close
 * reaches attnd_async_conn_closed, and the answer is taken under the
 * queue's lock, so a run listed after the close is marked closed at once,
 * and one listed before it is marked by the close. */
void attnd_async_set_conn_open(attnd_async *a, attnd_conn_open_fn fn, void *arg);

/* List / unlist synchronous run `r` of connection `conn` (see attnd_sync_run). */
void attnd_async_sync_begin(attnd_async *a, attnd_sync_run *r, uint32_t conn);
void attnd_async_sync_end(attnd_async *a, attnd_sync_run *r);

/* Connection `conn` closed: cancel its queued runs, release its waits,
 * mark its synchronous runs, forget its failures. */
void attnd_async_conn_closed(attnd_async *a, uint32_t conn);

/* Register / unregister a wait in progress (see the head of this file). */
void attnd_async_wait_enter(attnd_async *a, attnd_wait *w);
void attnd_async_wait_leave(attnd_async *a, attnd_wait *w);

/* Wait on the host until the uint64 at `addr` (shared memory) is >= value in
 * the cyclic sense of CUDA's GEQ; E_SHUTTING_DOWN "wait" when the wait was
 * released (its connection closed, or attnd stops) before that. */
int attnd_sem_wait_host(attnd_async *a, uint32_t conn, const uint64_t *addr, uint64_t value,
                        attn_error_detail *err);

/* Store `value` at `addr` (shared memory) with release ordering. */
void attnd_sem_signal_host(uint64_t *addr, uint64_t value);

/* The counters now. */
void attnd_async_stats_get(attnd_async *a, attnd_async_stats *st);

#endif
