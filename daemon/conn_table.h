/* attnd's per-connection accounting (issue 9): how many requests each nng
 * pipe has in progress, how many of its replies wait for it to read, and when
 * it last completed a request, so that one client can neither hold every REP
 * context, nor keep a stalled connection (a partial frame nng has allocated
 * whole) forever, nor open connections without bound.
 *
 * Thread-safe (one mutex): nng's pipe and aio callbacks and the loop's idle
 * timer all call it.  A linear table of `cap` slots: `cap` is the connection
 * cap, small (docs/daemon.md), and a scan costs less than the hand-off.
 */
#ifndef ATTN_DAEMON_CONN_TABLE_H
#define ATTN_DAEMON_CONN_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct attnd_conn_table attnd_conn_table;

/* What attnd_conn_begin decided for one received request. */
typedef enum attnd_conn_verdict {
    ATTND_CONN_SERVE = 0, /* within the connection's in-flight cap */
    ATTND_CONN_BUSY,      /* over the cap, its replies are being read: answer E_BUSY */
    ATTND_CONN_CLOSE,     /* over the cap with replies it has not read: close it */
} attnd_conn_verdict;

/* A table for at most `cap` connections, each with at most `inflight` requests. */
int attnd_conn_table_create(attnd_conn_table **out, uint32_t cap, uint32_t inflight);

/* Remember connection `id`'s peer description (truncated to the cap); a
 * removed or unknown id is ignored. */
void attnd_conn_set_peer(attnd_conn_table *t, uint32_t id, const char *peer);

/* Copy connection `id`'s peer description into out ("" when none or unknown). */
void attnd_conn_peer(attnd_conn_table *t, uint32_t id, char *out, size_t cap);

/* Free the table. */
void attnd_conn_table_destroy(attnd_conn_table *t);

/* Room for a peer's description ("peer 127.0.0.1:4711", "peer pid 12 uid 1000"). */
#define ATTND_CONN_PEER_CAP 64

/* A connection appeared (nng pipe id); 0, or -1 when the table is full. */
int attnd_conn_add(attnd_conn_table *t, uint32_t id, uint64_t now_ms);

/* A connection went away (unknown ids are ignored). */
void attnd_conn_remove(attnd_conn_table *t, uint32_t id);

/* A request arrived on connection `id`: counts it in progress (also when the
 * verdict is not SERVE: attnd_conn_end is called for every begin). */
attnd_conn_verdict attnd_conn_begin(attnd_conn_table *t, uint32_t id, uint64_t now_ms);

/* The reply of a request on `id` was handed to nng (it may wait for the peer). */
void attnd_conn_sending(attnd_conn_table *t, uint32_t id);

/* A request on `id` is finished (its reply taken, dropped or never built);
 * `was_sending` says whether attnd_conn_sending was called for it. */
void attnd_conn_end(attnd_conn_table *t, uint32_t id, int was_sending, uint64_t now_ms);

/* Write into ids[] (at most max) the connections with nothing in progress
 * whose last activity is older than idle_ms; returns how many. */
size_t attnd_conn_idle(attnd_conn_table *t, uint64_t now_ms, uint64_t idle_ms, uint32_t *ids,
                       size_t max);

/* Change the per-connection in-flight cap (SIGHUP reload). */
void attnd_conn_set_inflight(attnd_conn_table *t, uint32_t inflight);

/* 1 when connection `id` is open (in the table), else 0. */
int attnd_conn_is_open(attnd_conn_table *t, uint32_t id);

/* Connections now open. */
uint32_t attnd_conn_count(attnd_conn_table *t);

#endif
