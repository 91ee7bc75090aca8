/* attnd's event loop (see loop.h for the thread rules). */
#include "daemon/loop.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/conn_table.h"
#include "daemon/notify.h"
#include "daemon/order_slots.h"
#include "daemon/oversize.h"
#include "protocol/tls.h"

/* After the last reply of a shutdown, wait this long without new requests
 * before closing the socket, so replies already queued reach their pipes. */
#define ATTND_DRAIN_QUIET_MS 150
#define ATTND_DRAIN_TICK_MS 20

typedef enum job_state { JOB_RECV = 0, JOB_WORK, JOB_SEND, JOB_IDLE } job_state;

/* The watchdog's self-probe: a request to our own socket between two pings. */
typedef enum probe_state {
    PROBE_IDLE = 0, /* none sent yet */
    PROBE_SENDING,
    PROBE_WAITING, /* sent, reply not yet received */
    PROBE_ANSWERED,
    PROBE_FAILED, /* timed out or the socket refused it */
} probe_state;

typedef struct job {
    attnd_loop *l;
    nng_ctx ctx;
    nng_aio *aio;
    nng_msg *req;
    void *reply;
    size_t reply_len;
    uv_work_t work;
    uint64_t t_recv_ns;
    uint32_t pipe;       /* nng pipe id of the request's connection */
    int sending;         /* attnd_conn_sending was called for this request */
    int refused;         /* answered with a refusal: its reply does not postpone a drain */
    int ordered;         /* handed out by the reorder slot: attnd_order_done after its handler */
    attnd_order_item oi; /* its place in its connection's reorder slot (order 0: none) */
    struct job *next;
    _Atomic int state;
} job;

struct attnd_loop {
    uv_loop_t loop;
    uv_async_t async;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    uv_signal_t sighup;
    uv_timer_t drain;
    uv_timer_t watchdog;
    uint64_t watchdog_ms; /* ping period (half of $WATCHDOG_USEC); 0 = no watchdog */
    nng_socket probe_sock;
    nng_aio *probe_aio; /* NULL: the watchdog pings without probing */
    int probe_open;
    _Atomic int probe_state;
    uv_timer_t idle;
    uv_timer_t order_timer; /* fails runs held behind an order gap too long */
    attnd_order *order;     /* per-connection reorder slots (order_slots.h) */
    attnd_conn_table *conns;
    /* live limits (SIGHUP): read on nng threads, written on the loop thread */
    _Atomic uint64_t send_timeout_ms;
    _Atomic uint64_t idle_timeout_ms;
    _Atomic uint64_t drain_timeout_ms;
    uint64_t shutdown_start_ms; /* loop thread only */
    nng_socket sock;
    nng_listener lst;
    int sock_open;
    int lst_open;
    attnd_loop_opts o;
    char url[512];
    char ipc_path[512];
    job *jobs;
    uint32_t njobs;
    pthread_mutex_t qlock;
    job *qhead;
    job *qtail;
    _Atomic int stop_requested;
    _Atomic int refuse_pipes; /* shutdown began: close new connections */
    _Atomic uint64_t pending; /* received and not yet sent */
    _Atomic uint64_t last_recv_ms;
    _Atomic uint64_t last_reply_ms; /* a send completed: the reply is queued on its pipe */
    int stopping;                   /* loop thread only */
    int closed;                     /* loop thread only */
    attnd_metrics local_metrics;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
    return now_ns() / 1000000ull;
}

/* Close the connection with pipe id `id` (any thread). */
static void close_pipe(uint32_t id)
{
    nng_pipe p = NNG_PIPE_INITIALIZER;
    p.id = id;
    nng_pipe_close(p);
}

static void send_reply(attnd_loop *l, job *j);

static job *job_of(attnd_order_item *it)
{
    return (job *)(void *)((char *)it - offsetof(job, oi));
}

/* Held requests of a closed connection: nobody can be answered; release
 * their contexts (REP drops the request) without running them. */
static void cancel_held(attnd_loop *l, attnd_order_item *it)
{
    while (it != NULL) {
        attnd_order_item *next = it->next;
        job *j = job_of(it);
        j->reply = NULL;
        send_reply(l, j);
        it = next;
    }
}

/* Answer j with the refusal `code` (any thread that may send_reply). */
static void refuse_job(attnd_loop *l, job *j, int code)
{
    j->reply = NULL;
    if (l->o.refuse == NULL || l->o.refuse(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req),
                                           code, &j->reply, &j->reply_len) != 0)
        j->reply = NULL;
    send_reply(l, j);
}

/* nng thread: a connection is being added (refused once shutdown began or
 * beyond max_conns), was added, or went away.  Added and gone are debug
 * lines, so a connection that nng closed without a request still shows in
 * the log; one closed for a frame over --max-msg is a warn line and counted
 * (daemon/oversize.c). */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    attnd_loop *l = arg;
    uint64_t pid = 0;
    if (ev == NNG_PIPE_EV_REM_POST) {
        /* nng reports the removal of every pipe it announced */
        char peer[ATTND_CONN_PEER_CAP];
        atomic_fetch_sub(&l->o.metrics->connections, 1);
        attnd_conn_peer(l->conns, nng_pipe_id(p), peer, sizeof peer);
        attnd_conn_remove(l->conns, nng_pipe_id(p));
        cancel_held(l, attnd_order_conn_closed(l->order, nng_pipe_id(p)));
        attnd_oversize_note_removed(p, peer, l->o.max_msg, l->o.metrics, l->o.log);
        if (l->o.conn_closed != NULL)
            l->o.conn_closed(l->o.arg, nng_pipe_id(p));
        attnd_log_write(l->o.log, ATTND_LOG_DEBUG, "connection %d closed", nng_pipe_id(p));
        return;
    }
    if (ev == NNG_PIPE_EV_ADD_POST) {
        if (!attnd_log_enabled(l->o.log, ATTND_LOG_DEBUG))
            return;
        if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0)
            attnd_log_write(l->o.log, ATTND_LOG_DEBUG, "connection %d opened (peer pid %llu)",
                            nng_pipe_id(p), (unsigned long long)pid);
        else
            attnd_log_write(l->o.log, ATTND_LOG_DEBUG, "connection %d opened", nng_pipe_id(p));
        return;
    }
    atomic_fetch_add(&l->o.metrics->connections, 1);
    atomic_fetch_add(&l->o.metrics->connections_total, 1);
    if (atomic_load(&l->refuse_pipes)) {
        nng_pipe_close(p);
    } else if (attnd_conn_add(l->conns, nng_pipe_id(p), now_ms()) != 0) {
        atomic_fetch_add(&l->o.metrics->conns_refused, 1);
        attnd_log_limited(l->o.log, ATTND_LOG_WARN,
                          "connection %d refused: --max-conns connections are open",
                          nng_pipe_id(p));
        nng_pipe_close(p);
    } else {
        char peer[ATTND_CONN_PEER_CAP];
        attnd_oversize_describe_peer(p, peer, sizeof peer);
        attnd_conn_set_peer(l->conns, nng_pipe_id(p), peer);
    }
}

int attnd_conn_peer_uid(uint32_t conn, uint64_t *uid)
{
    nng_pipe p = NNG_PIPE_INITIALIZER;
    p.id = conn;
    return conn != 0 && nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, uid) == 0 ? 0 : -1;
}

/* Run the handler on j's request.  A connection that closed while its
 * request was handled has that request's leftovers released here (the
 * REM_POST callback may have run before the request created them). */
static void handle(attnd_loop *l, job *j)
{
    l->o.handler(l->o.arg, j->pipe, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply,
                 &j->reply_len);
    if (l->o.conn_closed != NULL && j->pipe != 0 && !attnd_conn_is_open(l->conns, j->pipe))
        l->o.conn_closed(l->o.arg, j->pipe);
}

/* Wait for the next request on j's context (no timeout: it may be long). */
static void rearm(job *j)
{
    atomic_store(&j->state, JOB_RECV);
    nng_aio_set_timeout(j->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(j->ctx, j->aio);
}

/* Requests handed to the loop wait in its queue, then in libuv's for a
 * worker: the queue depth counts both, until a handler starts. */
static void enqueue(attnd_loop *l, job *j)
{
    atomic_fetch_add(&l->o.metrics->queued, 1);
    pthread_mutex_lock(&l->qlock);
    j->next = NULL;
    if (l->qtail != NULL)
        l->qtail->next = j;
    else
        l->qhead = j;
    l->qtail = j;
    pthread_mutex_unlock(&l->qlock);
}

static job *dequeue_all(attnd_loop *l)
{
    job *h;
    pthread_mutex_lock(&l->qlock);
    h = l->qhead;
    l->qhead = l->qtail = NULL;
    pthread_mutex_unlock(&l->qlock);
    return h;
}

/* nng thread: a receive or a send of context `arg` completed. */
static void aio_cb(void *arg)
{
    job *j = arg;
    attnd_loop *l = j->l;
    int rv = nng_aio_result(j->aio);

    if (atomic_load(&j->state) == JOB_RECV) {
        if (rv != 0) {
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                atomic_store(&j->state, JOB_IDLE);
                return;
            }
            rearm(j); /* transient (a dropped pipe): keep serving */
            return;
        }
        j->req = nng_aio_get_msg(j->aio);
        j->t_recv_ns = now_ns();
        j->pipe = nng_pipe_id(nng_msg_get_pipe(j->req));
        j->sending = 0;
        j->refused = 0;
        atomic_fetch_add(&l->pending, 1);
        /* requests refused during a shutdown do not postpone its close */
        if (!atomic_load(&l->refuse_pipes))
            atomic_store(&l->last_recv_ms, j->t_recv_ns / 1000000ull);
        atomic_fetch_add(&l->o.metrics->requests, 1);
        atomic_fetch_add(&l->o.metrics->in_flight, 1);
        atomic_store(&j->state, JOB_WORK);
        switch (attnd_conn_begin(l->conns, j->pipe, j->t_recv_ns / 1000000ull)) {
        case ATTND_CONN_SERVE:
            break;
        case ATTND_CONN_CLOSE:
            /* over its cap while replies wait for it to read them: answering
             * would queue behind those and hold this context too */
            atomic_fetch_add(&l->o.metrics->conns_closed_inflight, 1);
            close_pipe(j->pipe);
            nng_msg_free(j->req);
            j->req = NULL;
            attnd_conn_end(l->conns, j->pipe, 0, now_ms());
            atomic_fetch_sub(&l->o.metrics->in_flight, 1);
            rearm(j);
            atomic_fetch_sub(&l->pending, 1);
            return;
        case ATTND_CONN_BUSY:
            atomic_fetch_add(&l->o.metrics->busy_replies, 1);
            j->refused = 1;
            if (l->o.order_of != NULL) {
                /* a refused run uses up its number: later ones do not wait for it */
                uint64_t n = l->o.order_of(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req));
                if (n != 0)
                    attnd_order_consume(l->order, j->pipe, n);
            }
            if (l->o.refuse == NULL ||
                l->o.refuse(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), ATTN_E_BUSY,
                            &j->reply, &j->reply_len) != 0)
                j->reply = NULL;
            send_reply(l, j);
            return;
        }
        /* hello/stats cost less than the hop to the loop thread (bench/ipc):
         * answer them here, on the nng thread; the handler is thread-safe
         * and touches no libuv state.  During shutdown everything goes to
         * the loop, which refuses it. */
        if (l->o.is_cheap != NULL && !atomic_load(&l->stop_requested) &&
            !atomic_load(&l->refuse_pipes) &&
            l->o.is_cheap(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req))) {
            atomic_fetch_add(&l->o.metrics->inline_ops, 1);
            handle(l, j);
            send_reply(l, j);
            return;
        }
        enqueue(l, j);
        uv_async_send(&l->async);
        return;
    }
    /* JOB_SEND completed */
    if (rv != 0) {
        nng_msg *m = nng_aio_get_msg(j->aio);
        if (m != NULL)
            nng_msg_free(m);
        if (rv == NNG_ETIMEDOUT) {
            /* the peer does not read its replies: it holds no context longer */
            atomic_fetch_add(&l->o.metrics->send_timeouts, 1);
            close_pipe(j->pipe);
        }
    } else {
        atomic_fetch_add(&l->o.metrics->replies, 1);
        /* a refusal handed over during a drain does not postpone the close
         * (test_shutdown_not_postponed); an answered request's reply does */
        if (!j->refused)
            atomic_store(&l->last_reply_ms, now_ms());
    }
    attnd_conn_end(l->conns, j->pipe, j->sending, now_ms());
    atomic_fetch_sub(&l->o.metrics->in_flight, 1);
    if (rv == NNG_ECLOSED) {
        atomic_store(&j->state, JOB_IDLE);
        atomic_fetch_sub(&l->pending, 1);
        return;
    }
    rearm(j);
    /* decrement after re-arming so the drain never closes between the two */
    atomic_fetch_sub(&l->pending, 1);
}

/* Hand the reply bytes of `j` to nng (loop thread, or the nng thread for
 * cheap ops: it touches only nng and atomics). */
static void send_reply(attnd_loop *l, job *j)
{
    nng_msg *m = NULL;
    if (j->req != NULL) {
        nng_msg_free(j->req);
        j->req = NULL;
    }
    if (j->reply == NULL || nng_msg_alloc(&m, j->reply_len) != 0) {
        /* no reply possible: REP drops the request; the client's REQ times out */
        free(j->reply);
        j->reply = NULL;
        attnd_conn_end(l->conns, j->pipe, 0, now_ms());
        atomic_fetch_sub(&l->o.metrics->in_flight, 1);
        rearm(j);
        atomic_fetch_sub(&l->pending, 1);
        return;
    }
    if (j->reply_len > 0)
        memcpy(nng_msg_body(m), j->reply, j->reply_len);
    free(j->reply);
    j->reply = NULL;
    atomic_store(&j->state, JOB_SEND);
    attnd_conn_sending(l->conns, j->pipe);
    j->sending = 1;
    uint64_t send_ms = atomic_load(&l->send_timeout_ms);
    nng_aio_set_timeout(j->aio, send_ms > 0 ? (nng_duration)send_ms : NNG_DURATION_INFINITE);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
}

static void dispatch(attnd_loop *l, job *j);
static void pump_ordered(attnd_loop *l);
static void offer_ordered(attnd_loop *l, job *j);

static void work_cb(uv_work_t *w)
{
    job *j = w->data;
    attnd_loop *l = j->l;
    atomic_fetch_sub(&l->o.metrics->queued, 1);
    attnd_metrics_note_handoff(l->o.metrics, now_ns() - j->t_recv_ns);
    j->reply = NULL;
    j->reply_len = 0;
    handle(l, j);
}

static void after_work_cb(uv_work_t *w, int status)
{
    job *j = w->data;
    attnd_loop *l = j->l;
    int ordered = j->ordered;
    uint32_t pipe = j->pipe;
    (void)status;
    j->ordered = 0;
    send_reply(l, j); /* j may be reused from here on */
    if (ordered) {
        attnd_order_done(l->order, pipe);
        pump_ordered(l);
    }
}

/* Loop thread: hand j to a worker (or handle it here when libuv cannot). */
static void dispatch(attnd_loop *l, job *j)
{
    atomic_fetch_add(&l->o.metrics->worker_ops, 1);
    atomic_fetch_add(&l->o.metrics->queued, 1); /* into libuv's, until work_cb */
    j->work.data = j;
    if (uv_queue_work(&l->loop, &j->work, work_cb, after_work_cb) != 0) {
        atomic_fetch_sub(&l->o.metrics->queued, 1);
        int ordered = j->ordered;
        uint32_t pipe = j->pipe;
        j->ordered = 0;
        handle(l, j);
        send_reply(l, j);
        if (ordered)
            attnd_order_done(l->order, pipe);
    }
}

/* Loop thread: hand every ordered request whose turn has come to a worker. */
static void pump_ordered(attnd_loop *l)
{
    attnd_order_item *it;
    while ((it = attnd_order_next(l->order)) != NULL) {
        job *j = job_of(it);
        j->ordered = 1;
        dispatch(l, j);
    }
}

/* Loop thread: put j (its order number set) in its connection's slot. */
static void offer_ordered(attnd_loop *l, job *j)
{
    j->oi.conn = j->pipe;
    j->oi.held_ms = now_ms();
    switch (attnd_order_offer(l->order, &j->oi)) {
    case ATTND_ORDER_HELD:
        break;
    case ATTND_ORDER_OLD:
        refuse_job(l, j, ATTN_E_RANGE);
        return;
    case ATTND_ORDER_FULL:
        refuse_job(l, j, ATTN_E_NOMEM);
        return;
    }
    /* the connection closed before its request got here: its slot goes */
    if (!attnd_conn_is_open(l->conns, j->pipe))
        cancel_held(l, attnd_order_conn_closed(l->order, j->pipe));
}

/* Answer every request in list `it` with the refusal `code`. */
static void refuse_held(attnd_loop *l, attnd_order_item *it, int code)
{
    while (it != NULL) {
        attnd_order_item *next = it->next;
        refuse_job(l, job_of(it), code);
        it = next;
    }
}

/* Loop thread, every tick: runs held behind a gap older than the timeout fail. */
static void order_timer_cb(uv_timer_t *t)
{
    attnd_loop *l = t->data;
    refuse_held(l, attnd_order_expire(l->order, now_ms(), l->o.order_timeout_ms), ATTN_E_TIMEOUT);
    pump_ordered(l);
}

/* nng thread: a step of the watchdog's self-probe completed. */
static void probe_cb(void *arg)
{
    attnd_loop *l = arg;
    int rv = nng_aio_result(l->probe_aio);
    int st = atomic_load(&l->probe_state);
    if (rv != 0) {
        nng_msg *m = st == PROBE_SENDING ? nng_aio_get_msg(l->probe_aio) : NULL;
        if (m != NULL)
            nng_msg_free(m); /* a failed send leaves the message with us */
        atomic_store(&l->probe_state, PROBE_FAILED);
        return;
    }
    if (st == PROBE_SENDING) {
        atomic_store(&l->probe_state, PROBE_WAITING);
        nng_recv_aio(l->probe_sock, l->probe_aio);
        return;
    }
    nng_msg_free(nng_aio_get_msg(l->probe_aio));
    atomic_store(&l->probe_state, PROBE_ANSWERED);
}

/* Loop thread: send the probe request to our own socket. */
static void probe_start(attnd_loop *l)
{
    nng_msg *m;
    if (nng_msg_alloc(&m, l->o.probe_len) != 0) {
        atomic_store(&l->probe_state, PROBE_FAILED);
        return;
    }
    memcpy(nng_msg_body(m), l->o.probe_frame, l->o.probe_len);
    atomic_store(&l->probe_state, PROBE_SENDING);
    nng_aio_set_msg(l->probe_aio, m);
    nng_send_aio(l->probe_sock, l->probe_aio);
}

/* Loop thread, every watchdog_ms: WATCHDOG=1 only when the loop runs (this
 * timer fires) and, with a probe, the socket answered the previous probe, so
 * a wedged loop or a wedged listener lets systemd's watchdog restart attnd. */
static void watchdog_cb(uv_timer_t *t)
{
    attnd_loop *l = t->data;
    int st = l->probe_aio != NULL ? atomic_load(&l->probe_state) : PROBE_ANSWERED;

    if (l->stopping || st == PROBE_ANSWERED || st == PROBE_IDLE) {
        attnd_notify("WATCHDOG=1");
    } else {
        attnd_log_limited(l->o.log, ATTND_LOG_WARN,
                          "watchdog: %s did not answer its self-probe within %llu ms; "
                          "not pinging systemd",
                          l->url, (unsigned long long)l->watchdog_ms);
    }
    if (l->probe_aio != NULL && !l->stopping && st != PROBE_SENDING && st != PROBE_WAITING)
        probe_start(l);
}

static void begin_shutdown(attnd_loop *l)
{
    if (l->stopping)
        return;
    l->stopping = 1;
    l->shutdown_start_ms = now_ms();
    atomic_store(&l->o.metrics->draining, 1);
    attnd_notify("STOPPING=1\nSTATUS=draining");
    attnd_log_write(l->o.log, ATTND_LOG_INFO, "shutdown: draining %llu requests in flight",
                    (unsigned long long)atomic_load(&l->pending));
    /* Stop accepting: new connections are closed by pipe_cb from now on.
     * The listener itself stays open, because closing an nng listener also
     * closes the pipes it accepted, and with them the replies still owed on
     * them; requests arriving on open pipes get E_SHUTTING_DOWN. */
    atomic_store(&l->refuse_pipes, 1);
    /* held runs are refused like late arrivals (they were never handled) */
    refuse_held(l, attnd_order_expire(l->order, 0, 0), ATTN_E_SHUTTING_DOWN);
}

static void close_all(attnd_loop *l);

static void drain_cb(uv_timer_t *t)
{
    attnd_loop *l = t->data;
    uint64_t now = now_ms();
    uint64_t pending = atomic_load(&l->pending);
    uint64_t deadline = atomic_load(&l->drain_timeout_ms);
    if (deadline > 0 && now - l->shutdown_start_ms >= deadline) {
        /* a shutdown cannot be postponed forever (a supervisor would SIGKILL) */
        if (pending != 0)
            attnd_log_write(l->o.log, ATTND_LOG_WARN,
                            "shutdown: drain deadline (%llu ms) passed; %llu requests unanswered",
                            (unsigned long long)deadline, (unsigned long long)pending);
        close_all(l);
        return;
    }
    if (pending != 0)
        return;
    if (now - atomic_load(&l->last_recv_ms) < ATTND_DRAIN_QUIET_MS)
        return;
    /* a reply handed over just now may still sit in its pipe's queue, and
     * closing the socket drops it: the quiet period runs from the last
     * reply too (a request that ran longer than the period lost its reply) */
    if (now - atomic_load(&l->last_reply_ms) < ATTND_DRAIN_QUIET_MS)
        return;
    close_all(l);
}

static void async_cb(uv_async_t *a)
{
    attnd_loop *l = a->data;
    job *j = dequeue_all(l);

    if (atomic_load(&l->stop_requested) && !l->stopping) {
        begin_shutdown(l);
        uv_timer_start(&l->drain, drain_cb, ATTND_DRAIN_TICK_MS, ATTND_DRAIN_TICK_MS);
    }
    while (j != NULL) {
        job *next = j->next;
        atomic_fetch_sub(&l->o.metrics->queued, 1); /* out of the loop's queue */
        if (l->closed) {
            /* only after the socket closed: nobody can be answered */
            nng_msg_free(j->req);
            j->req = NULL;
            atomic_fetch_sub(&l->pending, 1);
        } else if (l->stopping && l->o.refuse != NULL) {
            atomic_fetch_add(&l->o.metrics->shutting_down_replies, 1);
            j->refused = 1;
            l->o.refuse(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), ATTN_E_SHUTTING_DOWN,
                        &j->reply, &j->reply_len);
            send_reply(l, j);
        } else if (l->o.is_cheap != NULL &&
                   l->o.is_cheap(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req))) {
            /* the hand-off costs more than hello/stats themselves (docs/daemon.md) */
            atomic_fetch_add(&l->o.metrics->inline_ops, 1);
            handle(l, j);
            send_reply(l, j);
        } else if (l->o.order_of != NULL &&
                   (j->oi.order =
                        l->o.order_of(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req))) != 0) {
            offer_ordered(l, j);
        } else {
            dispatch(l, j);
        }
        j = next;
    }
    pump_ordered(l);
}

/* SIGHUP with a reload callback: apply the live limits it returns. */
static void reload(attnd_loop *l)
{
    attnd_loop_live live;
    if (l->o.reload(l->o.reload_arg, &live) != 0) {
        attnd_log_write(l->o.log, ATTND_LOG_ERROR,
                        "SIGHUP: the configuration was not reloaded (see above)");
        return;
    }
    attnd_conn_set_inflight(l->conns, live.conn_inflight);
    atomic_store(&l->send_timeout_ms, live.send_timeout_ms);
    atomic_store(&l->idle_timeout_ms, live.idle_timeout_ms);
    atomic_store(&l->drain_timeout_ms, live.drain_timeout_ms);
    attnd_log_write(l->o.log, ATTND_LOG_INFO,
                    "SIGHUP: reloaded (conn-inflight %u, send-timeout-ms %llu, idle-timeout-ms "
                    "%llu, drain-timeout-ms %llu)",
                    live.conn_inflight, (unsigned long long)live.send_timeout_ms,
                    (unsigned long long)live.idle_timeout_ms,
                    (unsigned long long)live.drain_timeout_ms);
}

static void signal_cb(uv_signal_t *s, int signum)
{
    attnd_loop *l = s->data;
    attnd_log_write(l->o.log, ATTND_LOG_INFO, "signal %s received",
                    signum == SIGTERM  ? "SIGTERM"
                    : signum == SIGINT ? "SIGINT"
                    : signum == SIGHUP ? "SIGHUP"
                                       : "?");
    if (signum == SIGHUP && l->o.reload != NULL) {
        if (!l->stopping)
            reload(l);
        return;
    }
    if (signum == SIGHUP && !l->stopping)
        attnd_log_write(l->o.log, ATTND_LOG_WARN, "SIGHUP: no reload here; draining and exiting");
    if (!l->stopping) {
        begin_shutdown(l);
        uv_timer_start(&l->drain, drain_cb, ATTND_DRAIN_TICK_MS, ATTND_DRAIN_TICK_MS);
    }
}

static void close_all(attnd_loop *l)
{
    if (l->closed)
        return;
    l->closed = 1;
    if (l->stopping)
        attnd_log_write(l->o.log, ATTND_LOG_INFO, "shutdown: drained, closing %s", l->url);
    if (l->probe_open) {
        nng_close(l->probe_sock);
        l->probe_open = 0;
    }
    if (l->sock_open) {
        nng_close(l->sock); /* every context's aio completes with NNG_ECLOSED */
        l->sock_open = 0;
    }
    if (l->ipc_path[0] != '\0')
        unlink(l->ipc_path);
    uv_timer_stop(&l->drain);
    uv_timer_stop(&l->idle);
    uv_timer_stop(&l->order_timer);
    uv_close((uv_handle_t *)&l->order_timer, NULL);
    uv_close((uv_handle_t *)&l->drain, NULL);
    uv_timer_stop(&l->watchdog);
    uv_close((uv_handle_t *)&l->watchdog, NULL);
    uv_close((uv_handle_t *)&l->idle, NULL);
    uv_close((uv_handle_t *)&l->async, NULL);
    uv_close((uv_handle_t *)&l->sigterm, NULL);
    uv_close((uv_handle_t *)&l->sigint, NULL);
    uv_close((uv_handle_t *)&l->sighup, NULL);
}

static int fail(attn_error_detail *err, const char *what, int rv)
{
    return attn_error_set(err, ATTN_E_IO, "listen", "%s: %s", what, nng_strerror(rv));
}

/* Loop thread: close connections idle longer than idle_timeout_ms. */
static void idle_cb(uv_timer_t *t)
{
    attnd_loop *l = t->data;
    uint32_t ids[64];
    size_t n = attnd_conn_idle(l->conns, now_ms(), atomic_load(&l->idle_timeout_ms), ids, 64);
    for (size_t i = 0; i < n; i++) {
        atomic_fetch_add(&l->o.metrics->conns_closed_idle, 1);
        close_pipe(ids[i]);
    }
}

/* The tls+tcp:// listener's configuration: our certificate and key, and
 * client certificates required, chaining to tls_ca. */
static int setup_tls(attnd_loop *l, attn_error_detail *err)
{
    attn_tls_files f = {l->o.tls_cert, l->o.tls_key, l->o.tls_ca, NULL};
    nng_tls_config *cfg;
    int rv, rc = attn_tls_config_from_files(&cfg, 1, &f, err);
    if (rc != 0)
        return rc;
    if ((rv = nng_listener_set_ptr(l->lst, NNG_OPT_TLS_CONFIG, cfg)) != 0)
        rc = fail(err, "tls config", rv);
    nng_tls_config_free(cfg); /* the listener holds its own reference */
    return rc;
}

int attnd_loop_create(attnd_loop **out, const attnd_loop_opts *o, attn_error_detail *err)
{
    attnd_loop *l = calloc(1, sizeof *l);
    int rv;
    char nthreads[16];

    if (l == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    l->o = *o;
    atomic_init(&l->send_timeout_ms, o->send_timeout_ms);
    atomic_init(&l->idle_timeout_ms, o->idle_timeout_ms);
    atomic_init(&l->drain_timeout_ms, o->drain_timeout_ms);
    if (l->o.metrics == NULL)
        l->o.metrics = &l->local_metrics;
    if (l->o.contexts == 0)
        l->o.contexts = 1;
    if (l->o.order_timeout_ms == 0)
        l->o.order_timeout_ms = 2000;
    snprintf(l->url, sizeof l->url, "%s", o->url);
    pthread_mutex_init(&l->qlock, NULL);
    /* libuv reads UV_THREADPOOL_SIZE once, at the first uv_queue_work */
    snprintf(nthreads, sizeof nthreads, "%u", o->workers == 0 ? 2 : o->workers);
    setenv("UV_THREADPOOL_SIZE", nthreads, 0);

    if ((rv = nng_rep0_open(&l->sock)) != 0) {
        free(l);
        return fail(err, "nng_rep0_open", rv);
    }
    l->sock_open = 1;
    if (attnd_order_create(&l->order) != 0) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    }
    if (attnd_conn_table_create(&l->conns, o->max_conns ? o->max_conns : 65536,
                                o->conn_inflight ? o->conn_inflight : UINT32_MAX) != 0) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_NOMEM, "max_conns", "out of memory");
    }
    nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, l);
    nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, l);
    nng_pipe_notify(l->sock, NNG_PIPE_EV_REM_POST, pipe_cb, l);
    if ((rv = nng_listener_create(&l->lst, l->sock, l->url)) != 0) {
        attnd_loop_destroy(l);
        return fail(err, l->url, rv);
    }
    l->lst_open = 1;
    /* the frame-size cap is the listener's: an oversized frame closes that pipe */
    if ((rv = nng_listener_set_size(l->lst, NNG_OPT_RECVMAXSZ, o->max_msg)) != 0) {
        attnd_loop_destroy(l);
        return fail(err, "recv-size-max", rv);
    }
    if (strncmp(l->url, "tls+tcp://", 10) == 0 && (rv = setup_tls(l, err)) != 0) {
        attnd_loop_destroy(l);
        return rv;
    }
    if (strncmp(l->url, "ipc://", 6) == 0) {
        snprintf(l->ipc_path, sizeof l->ipc_path, "%s", l->url + 6);
        if ((rv = nng_listener_set_int(l->lst, NNG_OPT_IPC_PERMISSIONS, o->ipc_mode)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "ipc:permissions", rv);
        }
    }
    l->njobs = l->o.contexts;
    l->jobs = calloc(l->njobs, sizeof *l->jobs);
    if (l->jobs == NULL) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    }
    for (uint32_t i = 0; i < l->njobs; i++) {
        job *j = &l->jobs[i];
        j->l = l;
        atomic_store(&j->state, JOB_IDLE);
        if ((rv = nng_ctx_open(&j->ctx, l->sock)) != 0 ||
            (rv = nng_aio_alloc(&j->aio, aio_cb, j)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "nng context", rv);
        }
    }
    if (uv_loop_init(&l->loop) != 0) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_IO, "", "uv_loop_init failed");
    }
    uv_async_init(&l->loop, &l->async, async_cb);
    l->async.data = l;
    uv_signal_init(&l->loop, &l->sigterm);
    uv_signal_init(&l->loop, &l->sigint);
    uv_signal_init(&l->loop, &l->sighup);
    l->sigterm.data = l->sigint.data = l->sighup.data = l;
    uv_timer_init(&l->loop, &l->drain);
    l->drain.data = l;
    uv_timer_init(&l->loop, &l->watchdog);
    l->watchdog.data = l;
    {
        uint64_t usec = attnd_notify_watchdog_usec();
        l->watchdog_ms = usec == 0 ? 0 : usec / 2000 > 0 ? usec / 2000 : 1;
    }
    /* the self-probe speaks to our own socket: local transports only (a
     * tcp listener may demand credentials the probe does not have) */
    if (l->watchdog_ms > 0 && o->probe_frame != NULL && o->probe_len > 0 &&
        (strncmp(l->url, "ipc://", 6) == 0 || strncmp(l->url, "inproc://", 9) == 0)) {
        if ((rv = nng_req0_open(&l->probe_sock)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "watchdog probe socket", rv);
        }
        l->probe_open = 1;
        nng_socket_set_ms(l->probe_sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
        if ((rv = nng_aio_alloc(&l->probe_aio, probe_cb, l)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "watchdog probe aio", rv);
        }
        nng_aio_set_timeout(l->probe_aio, (nng_duration)l->watchdog_ms);
    }
    uv_timer_init(&l->loop, &l->idle);
    l->idle.data = l;
    uv_timer_init(&l->loop, &l->order_timer);
    l->order_timer.data = l;
    *out = l;
    return 0;
}

int attnd_loop_run(attnd_loop *l)
{
    int rv;
    signal(SIGPIPE, SIG_IGN);
    uv_signal_start(&l->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&l->sigint, signal_cb, SIGINT);
    uv_signal_start(&l->sighup, signal_cb, SIGHUP);
    if (l->o.idle_timeout_ms > 0) {
        uint64_t tick = l->o.idle_timeout_ms / 4;
        tick = tick < 10 ? 10 : tick > 1000 ? 1000 : tick;
        uv_timer_start(&l->idle, idle_cb, tick, tick);
    }
    if (l->o.order_of != NULL) {
        uint64_t tick = l->o.order_timeout_ms / 4;
        tick = tick < 5 ? 5 : tick > 250 ? 250 : tick;
        uv_timer_start(&l->order_timer, order_timer_cb, tick, tick);
    }
    if ((rv = nng_listener_start(l->lst, 0)) != 0) {
        attnd_log_write(l->o.log, ATTND_LOG_ERROR, "cannot listen on %s: %s", l->url,
                        nng_strerror(rv));
        l->lst_open = 0;       /* never started; nng_close frees it */
        l->ipc_path[0] = '\0'; /* someone else's socket, or none: not ours to remove */
        close_all(l);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        return ATTN_E_IO;
    }
    for (uint32_t i = 0; i < l->njobs; i++)
        rearm(&l->jobs[i]);
    /* only now: the listener is bound and every context is receiving */
    attnd_log_write(l->o.log, ATTND_LOG_INFO,
                    "serving on %s (max frame %zu bytes, %u contexts, %u workers)", l->url,
                    l->o.max_msg, l->njobs, l->o.workers == 0 ? 2 : l->o.workers);
    atomic_store(&l->o.metrics->listening, 1);
    if (l->o.ready_fd >= 0) {
        ssize_t w = write(l->o.ready_fd, "READY\n", 6);
        (void)w;
        close(l->o.ready_fd);
        l->o.ready_fd = -1;
    }
    {
        char st[600];
        snprintf(st, sizeof st, "READY=1\nSTATUS=serving on %s", l->url);
        attnd_notify(st);
    }
    if (l->watchdog_ms > 0) {
        if (l->probe_aio != NULL && nng_dial(l->probe_sock, l->url, NULL, NNG_FLAG_NONBLOCK) != 0) {
            nng_aio_free(l->probe_aio); /* nothing pending on it yet */
            l->probe_aio = NULL;
        }
        uv_timer_start(&l->watchdog, watchdog_cb, l->watchdog_ms, l->watchdog_ms);
        attnd_log_write(l->o.log, ATTND_LOG_INFO, "watchdog: WATCHDOG=1 every %llu ms%s",
                        (unsigned long long)l->watchdog_ms,
                        l->probe_aio != NULL ? " while the socket answers a self-probe" : "");
    }
    /* a stop requested before the loop ran */
    if (atomic_load(&l->stop_requested))
        uv_async_send(&l->async);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return 0;
}

void attnd_loop_stop(attnd_loop *l)
{
    atomic_store(&l->stop_requested, 1);
    uv_async_send(&l->async);
}

bool attnd_loop_conn_open_cb(void *arg, uint32_t conn)
{
    attnd_loop *l = arg;
    return conn == 0 || attnd_conn_is_open(l->conns, conn);
}

int attnd_loop_destroy(attnd_loop *l)
{
    int rc = 0;
    if (l == NULL)
        return 0;
    if (l->probe_open) {
        nng_close(l->probe_sock);
        l->probe_open = 0;
    }
    if (l->probe_aio != NULL)
        nng_aio_free(l->probe_aio); /* waits for its callback */
    if (l->sock_open) {
        nng_close(l->sock);
        l->sock_open = 0;
    }
    for (uint32_t i = 0; l->jobs != NULL && i < l->njobs; i++) {
        job *j = &l->jobs[i];
        if (j->aio != NULL)
            nng_aio_free(j->aio); /* waits for its callback */
        if (j->req != NULL)
            nng_msg_free(j->req);
        free(j->reply);
    }
    /* the loop only exists when create got that far */
    if (l->async.loop != NULL) {
        if (!l->closed) {
            l->ipc_path[0] = '\0';
            close_all(l);
        }
        uv_run(&l->loop, UV_RUN_DEFAULT);
        rc = uv_loop_close(&l->loop);
        if (rc != 0)
            attnd_log_write(l->o.log, ATTND_LOG_ERROR, "uv_loop_close: %s", uv_strerror(rc));
    }
    free(l->jobs);
    attnd_conn_table_destroy(l->conns);
    attnd_order_destroy(l->order);
    pthread_mutex_destroy(&l->qlock);
    free(l);
    return rc;
}
