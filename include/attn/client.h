/* libattn: the C client of attnd, and the typed messages of PROTOCOL.md.
 *
 * An engine includes this header only: it fills typed request structs, calls
 * one function per operation, and reads typed replies; it never touches
 * msgpack.  The daemon decodes the same structs (protocol/msg.h,
 * protocol/codec.h), so both sides share one definition of every message.
 *
 * Thread safety: an attn_client may be used by any number of threads at
 * once.  Every call opens its own nng REQ context on the one socket, so
 * concurrent synchronous calls and asynchronous calls never share state;
 * replies are matched to their request by nng.  attn_client_close must not
 * race with calls still in flight (wait for them first).  Reply structs are
 * owned by the caller and are not shared.
 *
 * Errors: every call returns 0 or a negative attn_err (include/attn/error.h).
 * A failed server reply returns its code and fills reply->error (code, field
 * path, sentence); a transport failure returns ATTN_E_IO with nng's message.
 */
#ifndef ATTN_CLIENT_H
#define ATTN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PROTOCOL_VERSION 1

/* libattn.so is built with -fvisibility=hidden: the functions of this header
 * are its whole ABI, and ATTN_EXPORT marks each of them (tests/lint checks
 * that the exported set equals the declarations here). */
#if defined(__GNUC__)
#define ATTN_EXPORT __attribute__((visibility("default")))
#else
#define ATTN_EXPORT
#endif

/* Operations of PROTOCOL.md (the list ATTN_OPS is in attn/types.h);
 * ATTN_OP_COUNT follows the last one and means "no operation". */
typedef enum attn_op { ATTN_OPS(ATTN__ENUM_ENTRY) ATTN_OP_COUNT } attn_op;

/* Wire name of an operation ("pool_create"); "?" when unknown. */
ATTN_EXPORT const char *attn_op_name(attn_op op);

/* Parse a wire name; returns 1 and sets *op when known, else 0. */
ATTN_EXPORT int attn_op_from_name(const char *name, attn_op *op);

/* A byte range: a tensor payload (little-endian elements of a dtype the
 * message states) or a pre-encoded msgpack object.  Decoders point it into
 * the received buffer (zero copy); `len` is in bytes. */
typedef struct attn_bytes {
    const void *data;
    uint64_t len;
} attn_bytes;

/* `run` arguments (also the second half of `attend`).  Shapes (PROTOCOL.md):
 * q [total_q, num_qo_heads, head_dim_qk] in q_dtype; k_new [total_q,
 * num_kv_heads, head_dim_qk] and v_new [total_q, num_kv_heads, head_dim_vo]
 * in the pool's kv_dtype. */
typedef struct attn_run_args {
    uint64_t plan_id; /* run only */
    uint32_t layer;
    attn_bytes q, k_new, v_new;
    bool return_lse, trace, verify;
    bool has_q_dtype; /* optional cross-check of the plan's q_dtype (run only) */
    attn_dtype q_dtype;
} attn_run_args;

/* `kv_read` / `kv_write` arguments: the named pages in order, each page in
 * the pool's layout and kv_dtype (k and v only for kv_write; on the wire
 * they travel as "tensors": {"k", "v"}, since "v" is the version key). */
typedef struct attn_kv_args {
    char pool[ATTN_NAME_MAX];
    uint32_t layer;
    int32_t *pages; /* [num_pages]; malloc-owned when decoded */
    uint32_t num_pages;
    attn_bytes k, v;
    bool has_kv_dtype; /* optional cross-check of the pool's kv_dtype */
    attn_dtype kv_dtype;
} attn_kv_args;

/* One typed request.  Only the part named by `op` is meaningful:
 * pool_create -> geom; pool_drop/pool_info -> pool; plan -> manifest;
 * run -> run; attend -> manifest + run; kv_read/kv_write -> kv. */
typedef struct attn_request {
    uint32_t v; /* protocol version, ATTN_PROTOCOL_VERSION */
    attn_op op;
    uint64_t id;
    bool has_id; /* decoders set it once `id` was read, even on failure */
    char pool[ATTN_NAME_MAX];
    attn_pool_geometry geom;
    bool has_device; /* pool_create: `device` given */
    attn_manifest manifest;
    attn_run_args run;
    attn_kv_args kv;
} attn_request;

#define ATTN_HELLO_MAX_BACKENDS 16
#define ATTN_HELLO_MAX_DEVICES 16
#define ATTN_STATS_MAX_COUNTERS 64
#define ATTN_STATS_MAX_POOLS 64 /* attnd's pool limit: stats lists every pool */

/* One backend as `hello` reports it. */
typedef struct attn_backend_info {
    char name[ATTN_NAME_MAX];
    bool available;
    char reason[160]; /* why not available; empty when available */
} attn_backend_info;

/* The `hello` reply's `server` map. */
typedef struct attn_server_info {
    char version[32];
    char build_id[64];
    char artifact[128]; /* loaded-artifact identity (seed 0x0BA) */
    uint32_t num_backends;
    attn_backend_info backends[ATTN_HELLO_MAX_BACKENDS];
    uint32_t num_devices;
    char devices[ATTN_HELLO_MAX_DEVICES][ATTN_NAME_MAX];
    /* The full loaded-artifact identity (seed 0x0BA: build id and flags,
     * compiler versions, SHA-256 of the binary and every loaded object, the
     * kernel image hash, device properties, driver and runtime): one
     * pre-encoded msgpack map, spliced verbatim; empty when absent. */
    attn_bytes identity;
} attn_server_info;

/* The `stats` reply. */
typedef struct attn_stats_info {
    uint32_t num_counters;
    struct {
        char name[48];
        uint64_t value;
    } counters[ATTN_STATS_MAX_COUNTERS];
    struct {
        uint64_t entries, capacity, hits, misses, replans, evictions;
    } plan_cache;
    uint32_t num_pools;
    struct {
        char name[ATTN_NAME_MAX];
        uint64_t bytes;
    } pools[ATTN_STATS_MAX_POOLS];
} attn_stats_info;

/* One typed reply.  `ok` false means `error` holds the code, field path and
 * sentence; otherwise the part named by `op` is meaningful:
 * hello -> server; pool_create -> pool, bytes; pool_info -> geom, bytes;
 * plan -> plan_id, plan_key, diag; run -> o, lse, diag; attend -> all of
 * plan and run; kv_read -> k, v (kv_dtype); stats -> stats. */
typedef struct attn_reply {
    uint32_t v;
    attn_op op;
    uint64_t id;
    bool ok;
    attn_error_detail error;
    attn_server_info server;
    char pool[ATTN_NAME_MAX];
    uint64_t bytes;
    attn_pool_geometry geom;
    uint64_t plan_id;
    char plan_key[128];
    attn_bytes o; /* [total_q, num_qo_heads, head_dim_vo] in o_dtype */
    attn_dtype o_dtype;
    bool has_lse;
    attn_bytes lse;       /* float32 [total_q, num_qo_heads] */
    attn_bytes k, v_data; /* kv_read: wire keys "tensors.k" and "tensors.v" */
    attn_dtype kv_dtype;
    attn_bytes diag; /* the diagnostic: one pre-encoded msgpack map, spliced verbatim */
    attn_stats_info stats;
    /* private: the buffer the byte ranges point into, released by attn_reply_free */
    void *backing;
    void (*backing_free)(void *backing);
} attn_reply;

/* Release what a decoded reply owns (its backing buffer) and zero it. */
ATTN_EXPORT void attn_reply_free(attn_reply *rep);

/* Release the arrays a decoded request owns (manifest arrays, kv pages); the
 * byte ranges borrowed from the received buffer are not freed. */
ATTN_EXPORT void attn_request_free(attn_request *req);

/* Render a reply's diagnostic (raw msgpack) as JSON text; *json is malloc'ed
 * (free it).  Returns 0 or an attn_err with `err` filled. */
ATTN_EXPORT int attn_reply_diag_json(const attn_reply *rep, char **json, attn_error_detail *err);

/* ---- the client ---------------------------------------------------------- */

typedef struct attn_client attn_client;

/* Connect to attnd at `url` ("ipc:///run/attnd/attnd.sock", "tcp://...");
 * the dial is non-blocking, so a daemon started later is still reached. */
ATTN_EXPORT int attn_client_open(attn_client **c, const char *url);

/* TLS client settings for a tls+tcp:// URL (PEM file paths): our
 * certificate and key (attnd requires a client certificate), the CA the
 * server's certificate must chain to, and optionally the name to check in it. */
typedef struct attn_client_tls {
    const char *cert;
    const char *key;
    const char *ca;
    const char *server_name; /* NULL: not checked beyond the CA */
} attn_client_tls;

/* attn_client_open for a tls+tcp:// URL with the TLS settings `tls`
 * (ATTN_E_MISSING / ATTN_E_IO when a file is missing or unreadable). */
ATTN_EXPORT int attn_client_open_tls(attn_client **c, const char *url, const attn_client_tls *tls);

/* Close the connection and free the client (calls in flight must be done). */
ATTN_EXPORT void attn_client_close(attn_client *c);

/* Set the per-call timeout in milliseconds (default 30000; <= 0: none). */
ATTN_EXPORT void attn_client_set_timeout(attn_client *c, int ms);

/* Send any typed request and wait for its typed reply.  `req->id` is
 * assigned by the client when zero.  Returns 0 when the reply is ok, the
 * server's error code when not (rep->error filled), ATTN_E_IO on transport
 * failure.  Free `rep` with attn_reply_free in every case. */
ATTN_EXPORT int attn_call(attn_client *c, attn_request *req, attn_reply *rep);

/* Completion of an asynchronous call: `rv` as attn_call returns; `rep`
 * (never NULL) is the callback's: attn_reply_free it, then free() it.
 * Runs on an nng thread: hand work to your own thread or loop from there. */
typedef void (*attn_reply_cb)(void *arg, int rv, attn_reply *rep);

/* Send a request without waiting; `cb` runs exactly once when the reply
 * arrives or the call fails (also when this function returns an error, then
 * never).  The request is encoded before return, so it may be freed then.
 * With no connection to attnd, `cb` gets ATTN_E_IO "no daemon at URL" after
 * about a second (as attn_call), not after the whole call timeout. */
ATTN_EXPORT int attn_call_async(attn_client *c, attn_request *req, attn_reply_cb cb, void *arg);

/* hello: server version, build, backends, devices, artifact identity. */
ATTN_EXPORT int attn_hello(attn_client *c, attn_reply *rep);

/* pool_create: create a pool with geometry `g` (g->device "" = daemon default). */
ATTN_EXPORT int attn_pool_create(attn_client *c, const attn_pool_geometry *g, attn_reply *rep);

/* pool_drop: drop the pool named `pool`. */
ATTN_EXPORT int attn_pool_drop(attn_client *c, const char *pool, attn_reply *rep);

/* pool_info: geometry and usage of `pool` (rep->geom, rep->bytes). */
ATTN_EXPORT int attn_pool_info(attn_client *c, const char *pool, attn_reply *rep);

/* kv_write: write a->k, a->v into pages a->pages of layer a->layer. */
ATTN_EXPORT int attn_kv_write(attn_client *c, const attn_kv_args *a, attn_reply *rep);

/* kv_read: read pages a->pages of layer a->layer (rep->k, rep->v_data). */
ATTN_EXPORT int attn_kv_read(attn_client *c, const attn_kv_args *a, attn_reply *rep);

/* plan: send a manifest; the reply carries plan_id, plan_key and diag. */
ATTN_EXPORT int attn_plan(attn_client *c, const attn_manifest *m, attn_reply *rep);

/* run: one layer of a planned microbatch; the reply carries o, lse, diag. */
ATTN_EXPORT int attn_run(attn_client *c, const attn_run_args *a, attn_reply *rep);

/* attend: plan and run in one call. */
ATTN_EXPORT int attn_attend(attn_client *c, const attn_manifest *m, const attn_run_args *a,
                            attn_reply *rep);

/* stats: counters, plan-cache and pool usage (rep->stats). */
ATTN_EXPORT int attn_stats(attn_client *c, attn_reply *rep);

#ifdef __cplusplus
}
#endif
#endif
