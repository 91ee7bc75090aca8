/* attnd's event loop: a libuv loop owns signals, timers and the shutdown
 * state; an nng REP socket with several contexts receives requests, so one
 * slow request does not block other clients.
 *
 * Threads (STYLE.md, libuv habit): nng completion callbacks run on nng's
 * threads; cheap ops (hello, stats: their work costs less than any hand-off,
 * measured in bench/ipc) are answered right there, everything else is
 * pushed onto a locked queue with uv_async_send; the loop thread drains the
 * queue and hands each job to libuv's worker pool (uv_queue_work); the reply
 * is sent from the loop thread through the context's nng aio.
 *
 * systemd watchdog ($WATCHDOG_USEC): a loop timer sends WATCHDOG=1 every
 * half period, only while the socket answers a self-probe, so neither a
 * wedged loop nor a wedged listener keeps pinging.
 *
 * SIGTERM/SIGINT/SIGHUP: stop accepting connections, answer every request
 * already received (late arrivals get E_SHUTTING_DOWN and do not postpone the
 * close), close the socket, remove the IPC path, close every handle;
 * attnd_loop_run then returns 0.  The drain ends at drain_timeout_ms at the
 * latest, answered or not.  SIGHUP calls `reload` (the limits of
 * attnd_loop_live and what the handler applies, e.g. the reply cap); without
 * one it drains and exits like SIGTERM.
 *
 * What one client can hold (issue 9): at most conn_inflight requests of one
 * connection are in progress (a further one gets E_BUSY, or closes the
 * connection when replies already wait for it to read them); a reply it does
 * not take within send_timeout_ms closes it; a connection with nothing in
 * progress and no request for idle_timeout_ms (a stalled partial frame) is
 * closed; beyond max_conns connections, new ones are closed at once.
 *
 * In-order runs (issue 11): a request with `"order": n` waits in its
 * connection's reorder slot (as data, holding no thread) until every
 * smaller number of that connection has been handled, then goes to a
 * worker; the next one of that connection follows once its handler
 * returned.  A connection's close cancels its held requests.
 */
#ifndef ATTN_DAEMON_LOOP_H
#define ATTN_DAEMON_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

/* Answer one request frame of connection `conn` (its nng pipe id): *reply
 * is malloc'ed, the caller frees it.  Must be thread-safe; returns 0 (an
 * error reply is still 0 + bytes). */
typedef int (*attnd_handler_fn)(void *arg, uint32_t conn, const void *req, size_t len, void **reply,
                                size_t *reply_len);

/* Connection `conn` closed (nng thread or a worker): release what it owns.
 * Called once the pipe is gone, and again after any request of it that was
 * still being handled then, so state it created meanwhile goes too (the
 * callee must be idempotent). */
typedef void (*attnd_conn_closed_fn)(void *arg, uint32_t conn);

/* Whether a frame is cheap enough to answer without the loop/worker hand-off. */
typedef int (*attnd_cheap_fn)(void *arg, const void *req, size_t len);

/* Build the error reply `code` (ATTN_E_SHUTTING_DOWN: it arrived after
 * shutdown began; ATTN_E_BUSY: its connection is at --conn-inflight;
 * ATTN_E_RANGE: its order number was used already; ATTN_E_TIMEOUT: it
 * waited behind a gap in the order numbers) for a request that is not served. */
typedef int (*attnd_refuse_fn)(void *arg, const void *req, size_t len, int code, void **reply,
                               size_t *reply_len);

/* The `"order": n` of a frame (a run/attend that asks for in-order
 * handling on its connection), 0 when it has none or it cannot be read
 * cheaply (the handler then reports what is wrong with it). */
typedef uint64_t (*attnd_order_of_fn)(void *arg, const void *req, size_t len);

/* The limits a SIGHUP can change while serving. */
typedef struct attnd_loop_live {
    uint32_t conn_inflight;
    uint64_t send_timeout_ms;
    uint64_t idle_timeout_ms;
    uint64_t drain_timeout_ms;
} attnd_loop_live;

/* SIGHUP (loop thread): re-read the configuration, apply what the daemon
 * itself can change live and fill *live; nonzero keeps everything as it was. */
typedef int (*attnd_reload_fn)(void *arg, attnd_loop_live *live);

typedef struct attnd_loop_opts {
    const char *url;
    size_t max_msg;    /* NNG_OPT_RECVMAXSZ on the listener */
    int ipc_mode;      /* NNG_OPT_IPC_PERMISSIONS for ipc:// URLs */
    uint32_t contexts; /* concurrent REP contexts */
    uint32_t workers;  /* libuv worker threads */
    int ready_fd;      /* "READY\n" written and closed once listening; -1 = none */
    attnd_handler_fn handler;
    attnd_conn_closed_fn conn_closed; /* NULL: nothing is owned by a connection */
    attnd_cheap_fn is_cheap;          /* NULL: everything goes to a worker */
    attnd_refuse_fn refuse;           /* NULL: refused requests are dropped without reply */
    uint32_t max_conns;        /* connections at once; more are closed at once (0 = no cap) */
    uint32_t conn_inflight;    /* one connection's requests in progress (0 = no cap) */
    uint64_t send_timeout_ms;  /* a reply not taken in time closes its connection (0 = none) */
    uint64_t idle_timeout_ms;  /* an idle connection is closed after this (0 = never) */
    uint64_t drain_timeout_ms; /* a shutdown closes the socket after this at the latest */
    /* Requests with an order number (order_of) are handled one at a time
     * per connection, strictly by number (daemon/order_slots.h); a gap
     * older than order_timeout_ms (0 = 2000) fails the runs held behind it
     * (refuse with ATTN_E_TIMEOUT), an old or duplicate number is refused
     * with ATTN_E_RANGE.  NULL: no request is ordered. */
    attnd_order_of_fn order_of;
    uint64_t order_timeout_ms;
    const char *tls_cert, *tls_key, *tls_ca; /* tls+tcp:// listener (PEM files) */
    attnd_reload_fn reload;                  /* NULL: SIGHUP drains and exits like SIGTERM */
    void *reload_arg;
    void *arg;
    attnd_metrics *metrics; /* may be NULL */
    attnd_log *log;         /* may be NULL: listen, signal and drain events */
    /* With $WATCHDOG_USEC set, this request (a hello) is sent to our own
     * ipc/inproc socket between two WATCHDOG=1 pings, and a ping is skipped
     * when it went unanswered.  NULL: ping whenever the loop runs. */
    const void *probe_frame;
    size_t probe_len;
} attnd_loop_opts;

typedef struct attnd_loop attnd_loop;

/* Open the socket and the listener (not yet receiving); E_IO with a message on failure. */
int attnd_loop_create(attnd_loop **out, const attnd_loop_opts *o, attn_error_detail *err);

/* The user id of the process at the other end of connection `conn` (an
 * ipc:// pipe: the kernel's SO_PEERCRED, through nng); 0, or -1 when the
 * transport cannot say (tcp://, tls+tcp://, inproc://) or the pipe is gone. */
int attnd_conn_peer_uid(uint32_t conn, uint64_t *uid);

/* Serve until a signal or attnd_loop_stop; returns 0 after a clean shutdown
 * (every accepted request answered, uv_loop_close succeeded). */
int attnd_loop_run(attnd_loop *l);

/* Ask the loop to shut down as on SIGTERM; safe from any thread. */
void attnd_loop_stop(attnd_loop *l);

/* Whether connection `conn` is open (arg = the loop; conn 0, a request not
 * from a connection, is).  A connection leaves the table before the loop's
 * conn_closed callback runs for it. */
bool attnd_loop_conn_open_cb(void *arg, uint32_t conn);

/* Free the loop after attnd_loop_run returned (or instead of running it);
 * returns 0, or the uv_loop_close error when a handle was left open. */
int attnd_loop_destroy(attnd_loop *l);

#endif
