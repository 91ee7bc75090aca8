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
 * SIGTERM/SIGINT: stop accepting connections, answer every request already
 * received (late arrivals get E_SHUTTING_DOWN), close the socket, remove the
 * IPC path, close every handle; attnd_loop_run then returns 0.
 */
#ifndef ATTN_DAEMON_LOOP_H
#define ATTN_DAEMON_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

/* Answer one request frame: *reply is malloc'ed, the caller frees it.
 * Must be thread-safe; returns 0 (an error reply is still 0 + bytes). */
typedef int (*attnd_handler_fn)(void *arg, const void *req, size_t len, void **reply,
                                size_t *reply_len);

/* Whether a frame is cheap enough to answer without the loop/worker hand-off. */
typedef int (*attnd_cheap_fn)(void *arg, const void *req, size_t len);

/* Build the reply sent to a request that arrives after shutdown began. */
typedef int (*attnd_refuse_fn)(void *arg, const void *req, size_t len, void **reply,
                               size_t *reply_len);

typedef struct attnd_loop_opts {
    const char *url;
    size_t max_msg;    /* NNG_OPT_RECVMAXSZ on the listener */
    int ipc_mode;      /* NNG_OPT_IPC_PERMISSIONS for ipc:// URLs */
    uint32_t contexts; /* concurrent REP contexts */
    uint32_t workers;  /* libuv worker threads */
    int ready_fd;      /* "READY\n" written and closed once listening; -1 = none */
    attnd_handler_fn handler;
    attnd_cheap_fn is_cheap; /* NULL: everything goes to a worker */
    attnd_refuse_fn refuse;  /* NULL: late requests are dropped without reply */
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

/* Serve until a signal or attnd_loop_stop; returns 0 after a clean shutdown
 * (every accepted request answered, uv_loop_close succeeded). */
int attnd_loop_run(attnd_loop *l);

/* Ask the loop to shut down as on SIGTERM; safe from any thread. */
void attnd_loop_stop(attnd_loop *l);

/* Free the loop after attnd_loop_run returned (or instead of running it);
 * returns 0, or the uv_loop_close error when a handle was left open. */
int attnd_loop_destroy(attnd_loop *l);

#endif
