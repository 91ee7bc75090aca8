/* attnd's request handler: the daemon state (pools, plans, registry,
 * capture, counters) and the one function that turns a request frame into a
 * reply frame.  The socket loop and `attnctl run --local` both call
 * attn_server_handle, so there is one code path.
 */
#ifndef ATTN_DAEMON_SERVER_H
#define ATTN_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

typedef struct attn_server attn_server;

/* Build the state from a configuration: register the engines, create the
 * configured pools, open the capture file.  E_* with the field on failure. */
int attn_server_create(attn_server **out, const attnd_config *cfg, attn_error_detail *err);

/* Free everything (the capture file is flushed and closed). */
void attn_server_destroy(attn_server *s);

/* Answer one request frame: decode, validate, execute, encode.  *reply is
 * malloc'ed (free it); an error is an error reply, so this returns 0 unless
 * not even an error reply could be built (ATTN_E_NOMEM).  Thread-safe. */
int attn_server_handle(attn_server *s, const void *req, size_t len, void **reply,
                       size_t *reply_len);

/* attn_server_handle for a request of connection `conn` (nng pipe id; 0 =
 * no connection): registered buffers belong to it and only its requests
 * can name them (daemon/buffers.h). */
int attn_server_handle_conn(attn_server *s, uint32_t conn, const void *req, size_t len,
                            void **reply, size_t *reply_len);

/* Connection `conn` closed: release its registered buffers (idempotent). */
void attn_server_conn_closed(attn_server *s, uint32_t conn);

/* 1 when the frame is a hello or stats request (answered without the
 * loop/worker hand-off, which costs more than they do). */
int attn_server_is_cheap(attn_server *s, const void *req, size_t len);

/* The error reply `code` for a request that is not served: E_SHUTTING_DOWN
 * (it arrived after shutdown began), E_BUSY (its connection is at
 * --conn-inflight), E_RANGE field `order` (its order number was used
 * already), E_TIMEOUT field `order` (it waited behind a gap in the order
 * numbers longer than --order-timeout-ms) or E_NOMEM. */
int attn_server_refuse(attn_server *s, const void *req, size_t len, int code, void **reply,
                       size_t *reply_len);

/* The `"order": n` of a run/attend frame (its connection's submission
 * order, docs/protocol.md "Order"); 0 when it has none, is another op, or
 * the number is not a readable uint (the decode then reports it). */
uint64_t attn_server_order_of(attn_server *s, const void *req, size_t len);

/* Log every request through `log` (debug: one line each; warn, rate-limited:
 * error replies and malformed frames); NULL turns it off.  Call before serving. */
void attn_server_set_log(attn_server *s, attnd_log *log);

/* This attnd's version string ("0.1.0"). */
const char *attn_server_version(void);

/* The build id compiled into this binary (the source revision, "-dirty" when
 * the tree had changes). */
const char *attn_server_build_id(void);
/* Change the reply-bytes cap while serving (SIGHUP reload). */
void attn_server_set_max_reply(attn_server *s, uint64_t bytes);

/* The counters the loop updates (hand-off time, in-flight requests). */
attnd_metrics *attn_server_metrics(attn_server *s);

/* The Prometheus text of the counters and of the plan cache and pools
 * (daemon/metrics.h); *text is malloc'ed.  0 or ATTN_E_NOMEM. */
int attn_server_metrics_text(attn_server *s, char **text, size_t *len);

/* Checksum of a pool's bytes (tests: a rejected call leaves the pool as it was). */
int attn_server_pool_checksum(attn_server *s, const char *pool, uint64_t *sum);

/* The server's backend registry (tests register a test double of the
 * engine interface through it; the daemon itself never changes it after start). */
struct attn_registry *attn_server_registry(attn_server *s);

/* The handler signature of daemon/loop.h, bound to a server (arg = the server). */
int attn_server_handle_cb(void *arg, uint32_t conn, const void *req, size_t len, void **reply,
                          size_t *reply_len);

/* attn_server_conn_closed for daemon/loop.h. */
void attn_server_conn_closed_cb(void *arg, uint32_t conn);

/* How the server asks whether a connection is still open (daemon/loop.h's
 * attnd_loop_conn_open_cb; NULL: every connection is): a synchronous run of
 * a request handled after its connection closed is then treated as one the
 * close reached (its host waits are released at once). */
void attn_server_set_conn_open(attn_server *s, bool (*open)(void *arg, uint32_t conn), void *arg);

/* attn_server_is_cheap for daemon/loop.h. */
int attn_server_is_cheap_cb(void *arg, const void *req, size_t len);

/* attn_server_metrics_text for daemon/http.h (arg = the server). */
int attn_server_metrics_text_cb(void *arg, char **text, size_t *len);

/* attn_server_order_of for daemon/loop.h. */
uint64_t attn_server_order_of_cb(void *arg, const void *req, size_t len);

/* attn_server_refuse for daemon/loop.h. */
int attn_server_refuse_cb(void *arg, const void *req, size_t len, int code, void **reply,
                          size_t *reply_len);

#endif
