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

/* A tensor by reference (PROTOCOL.md v2): `bytes` bytes at byte `offset` of
 * the registered buffer `buf` (on the wire {"buf", "offset", "bytes"}).
 * Buffer ids start at 1, so buf == 0 means "no reference": the tensor is
 * inline (attn_bytes) or, for an output, travels in the reply. */
typedef struct attn_tensor_ref {
    uint64_t buf;
    uint64_t offset;
    uint64_t bytes;
} attn_tensor_ref;

/* `run` arguments (also the second half of `attend`).  Shapes (PROTOCOL.md):
 * q [total_q, num_qo_heads, head_dim_qk] in q_dtype; k_new [total_q,
 * num_kv_heads, head_dim_qk] and v_new [total_q, num_kv_heads, head_dim_vo]
 * in the pool's kv_dtype.  Each of q, k_new, v_new is either inline (its
 * attn_bytes) or, when its *_ref.buf is nonzero, a reference into a buffer
 * this connection registered (the attn_bytes is then ignored).  o_ref and
 * lse_ref, when nonzero, ask attnd to write O (and LSE; lse_ref implies
 * return_lse) into a buffer instead of the reply. */
/* A semaphore: the uint64 counter at byte `offset` (8-aligned) of the
 * registered buffer `buf` (on the wire {"buf", "offset", "value"}); buf 0 =
 * none.  A wait holds the run until the counter is >= value (compared as
 * CUDA's cyclic GEQ: (int64_t)(counter - value) >= 0); a signal stores
 * value after the run's last kernel. */
typedef struct attn_sem_ref {
    uint64_t buf;
    uint64_t offset;
    uint64_t value;
} attn_sem_ref;

typedef struct attn_run_args {
    uint64_t plan_id; /* run only */
    uint32_t layer;
    attn_bytes q, k_new, v_new;
    attn_tensor_ref q_ref, k_new_ref, v_new_ref, o_ref, lse_ref;
    bool return_lse, trace, verify;
    bool async; /* reply once enqueued (O and LSE must go to buffers) */
    /* The C new rows are already in their page slots of an exported pool
     * (the client wrote them through its mapping): k_new and v_new are
     * omitted, attnd appends nothing and restores nothing (on the wire
     * "kv_written": true; docs/protocol.md "Exported pools"). */
    bool kv_written;
    attn_sem_ref wait, sig; /* on the wire "wait" and "signal" */
    /* Per-connection submission order (1, 2, 3, ...; 0 = none): attnd
     * handles this connection's runs that carry one strictly in that order,
     * whatever order its contexts received them in, so pipelined runs
     * ordered by GPU semaphores are enqueued as sent (docs/protocol.md,
     * "Order").  A refused run still uses up its number. */
    uint64_t order;
    bool has_q_dtype; /* optional cross-check of the plan's q_dtype (run only) */
    attn_dtype q_dtype;
} attn_run_args;

#define ATTN_SHM_NAME_MAX 128         /* a shm buffer's name, "/" included, with NUL */
#define ATTN_CUDA_IPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t) */

/* `buffer_register` / `buffer_drop` arguments.  shm: `name` ("/x", the
 * shm_open name of an existing object of at least `bytes` bytes); cuda_ipc:
 * `handle` (cudaIpcGetMemHandle's bytes) and `device` ("cuda:N").
 * buffer_drop uses `buf` only. */
typedef struct attn_buffer_args {
    attn_buffer_kind kind;
    char name[ATTN_SHM_NAME_MAX];
    uint8_t handle[ATTN_CUDA_IPC_HANDLE_BYTES];
    char device[ATTN_NAME_MAX];
    uint64_t offset; /* cuda_ipc: where the buffer starts inside the handle's allocation */
    uint64_t bytes;
    uint64_t buf; /* buffer_drop */
} attn_buffer_args;

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

/* Where an exported pool's memory is and how it is laid out (the
 * pool_create reply of a request with "export": true; on the wire the
 * "export" map).  kind shm: `name` is a POSIX shm object of `bytes` bytes
 * that attnd created (shm_open it read-write and mmap it); kind cuda_ipc:
 * `handle` is cudaIpcGetMemHandle of the allocation holding the pool and the
 * pool starts `offset` bytes into it, on `device`.  Layer l's K store starts
 * at byte k_offset + l * layer_stride of the mapping, its V store at
 * v_offset + l * layer_stride; inside a store, element (page, slot, head,
 * dim) of K is at page * page_stride_k + slot * row_stride_k + head *
 * head_stride_k + dim * elem_size(kv_dtype) (V likewise with the _v
 * strides); NHD and HND differ only in the row and head strides. */
typedef struct attn_pool_export {
    attn_buffer_kind kind;
    char name[ATTN_SHM_NAME_MAX];
    uint8_t handle[ATTN_CUDA_IPC_HANDLE_BYTES];
    uint64_t offset;
    char device[ATTN_NAME_MAX];
    uint64_t bytes;
    uint64_t k_offset, v_offset, layer_stride;
    uint64_t page_stride_k, row_stride_k, head_stride_k;
    uint64_t page_stride_v, row_stride_v, head_stride_v;
    attn_dtype kv_dtype;
    attn_layout layout;
} attn_pool_export;

/* One typed request.  Only the part named by `op` is meaningful:
 * pool_create -> geom; pool_drop/pool_info -> pool; plan -> manifest;
 * run -> run; attend -> manifest + run; kv_read/kv_write -> kv;
 * buffer_register/buffer_drop -> buffer. */
typedef struct attn_request {
    uint32_t v; /* protocol version, ATTN_PROTOCOL_VERSION */
    attn_op op;
    uint64_t id;
    bool has_id; /* decoders set it once `id` was read, even on failure */
    char pool[ATTN_NAME_MAX];
    attn_pool_geometry geom;
    bool has_device;  /* pool_create: `device` given */
    bool pool_export; /* pool_create: "export": true (the reply carries attn_pool_export) */
    attn_manifest manifest;
    attn_run_args run;
    attn_kv_args kv;
    attn_buffer_args buffer;
    uint64_t run_seq; /* run_status: the asynchronous run asked about */
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
    /* Whether attnd's CUDA contexts run under MPS (1, 0; -1 unknown or no
     * GPU) and one sentence on what a GPU-side hand-off costs then. */
    int mps;
    char gpu_handoff[192];
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

/* What run_status says of one asynchronous run (the run_seq its run's
 * reply gave): its state; once done or failed, the engine's timing with its
 * method and the daemon's window; when failed, the error (the pool
 * restored, as for a synchronous run). */
typedef struct attn_run_status {
    attn_run_state state;
    double engine_us;        /* the engine's timing (CUDA events on a GPU); 0 until done */
    char timing_method[32];  /* "cuda_events", "host_clock", "" */
    double exec_us;          /* the daemon's window from dequeue to completion, host clock */
    double queued_us;        /* from enqueue to start (includes the wait on a semaphore) */
    attn_error_detail error; /* state failed: why */
} attn_run_status;

/* One typed reply.  `ok` false means `error` holds the code, field path and
 * sentence; otherwise the part named by `op` is meaningful:
 * hello -> server; pool_create -> pool, bytes; pool_info -> geom, bytes;
 * plan -> plan_id, plan_key, diag; run -> o, lse, diag; attend -> all of
 * plan and run; kv_read -> k, v (kv_dtype); stats -> stats;
 * buffer_register -> buf.  A run whose request gave o_ref / lse_ref has O /
 * LSE in that buffer: the reply then carries the reference (o_ref, lse_ref,
 * on the wire "o"/"lse" as {"buf", "offset", "bytes"}) and no bytes. */
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
    attn_bytes lse;                 /* float32 [total_q, num_qo_heads] */
    attn_tensor_ref o_ref, lse_ref; /* where O / LSE were written (buf 0: inline) */
    uint64_t buf;                   /* buffer_register: the new buffer's id */
    /* buffer_register: what a GPU-side hand-off through this buffer's
     * semaphores costs here (wire "handoff"), and the semaphore ping-pong
     * attnd measured on its device (wire "handoff_us"; 0: none measured,
     * e.g. host semaphores in a shm buffer) */
    char handoff[224];
    double handoff_us;
    bool has_export; /* pool_create with "export": true */
    attn_pool_export exp;
    attn_bytes k, v_data; /* kv_read: wire keys "tensors.k" and "tensors.v" */
    attn_dtype kv_dtype;
    attn_bytes diag; /* the diagnostic: one pre-encoded msgpack map, spliced verbatim */
    attn_stats_info stats;
    uint64_t run_seq;       /* an async run's id (run_status asks with it); 0 otherwise */
    attn_run_status status; /* run_status */
    /* An asynchronous run of this connection failed after its reply was
     * sent: the next reply (ok or not) carries it once ("async_error"). */
    bool has_async_error;
    uint64_t async_error_seq;
    attn_error_detail async_error;
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
 * about a second (as attn_call), not after the whole call timeout.  Several
 * may be outstanding at once (one nng context each); attnd may enqueue async
 * runs sent that way in another order unless they carry
 * attn_run_args.order (docs/protocol.md, "Order"). */
ATTN_EXPORT int attn_call_async(attn_client *c, attn_request *req, attn_reply_cb cb, void *arg);

/* ---- prepared runs: an engine's per-layer run, encoded once -------------
 *
 * The runs of one plan an engine sends every layer differ only in their
 * layer, their semaphore values and their order number.  attn_run_prepare
 * encodes such a run once; attn_run_submit_prepared copies those bytes,
 * rewrites the four fields (and the request id) in place, and sends them as
 * attn_call_async does: attnd receives the very request attn_run would send
 * for the same arguments and checks it the same way. */
typedef struct attn_prepared_run attn_prepared_run;

/* Prepare run `a` on client `c` (which must outlive it): everything but
 * a->layer, a->wait.value, a->sig.value and a->order is fixed from here on.
 * Whether the request waits, signals and carries an order number is fixed
 * too (a->wait.buf, a->sig.buf, a->order nonzero).  Returns 0 or an
 * attn_err with `err` filled (ATTN_E_INVALID for a NULL argument). */
ATTN_EXPORT int attn_run_prepare(attn_client *c, const attn_run_args *a, attn_prepared_run **p,
                                 attn_error_detail *err);

/* The per-submit values of a prepared run (wait_value / signal_value are
 * ignored when it was prepared without that semaphore). */
typedef struct attn_run_submit {
    uint32_t layer;
    uint64_t wait_value, signal_value;
    uint64_t order; /* nonzero exactly when the run was prepared with an order number */
} attn_run_submit;

/* Send prepared run `p` with the values `v` without waiting for the reply;
 * `cb` and `arg` as attn_call_async (which this otherwise is).  Errors
 * before anything is sent: ATTN_E_INVALID (NULL argument), ATTN_E_RANGE (an
 * order number given to a run prepared without one, or missing from one
 * prepared with one), ATTN_E_NOMEM; `cb` then never runs.  Safe from
 * several threads at once on one prepared run. */
ATTN_EXPORT int attn_run_submit_prepared(attn_prepared_run *p, const attn_run_submit *v,
                                         attn_reply_cb cb, void *arg);

/* Free a prepared run (submitted runs in flight are not affected). */
ATTN_EXPORT void attn_run_prepared_free(attn_prepared_run *p);

/* hello: server version, build, backends, devices, artifact identity. */
ATTN_EXPORT int attn_hello(attn_client *c, attn_reply *rep);

/* pool_create: create a pool with geometry `g` (g->device "" = daemon default). */
ATTN_EXPORT int attn_pool_create(attn_client *c, const attn_pool_geometry *g, attn_reply *rep);

/* pool_create with "export": true: rep->exp says where the pool's memory is
 * (a shm object attnd created for a CPU pool, a CUDA IPC handle for a device
 * pool) and its layout, so the client writes K/V rows itself and runs with
 * kv_written.  The export ends when the connection that made it closes.
 * A reply that says ok without a readable export map is ATTN_E_PROTOCOL
 * (field "export" or "export.*"), and the pool attnd made is dropped again
 * (the message says whether that worked). */
ATTN_EXPORT int attn_pool_create_exported(attn_client *c, const attn_pool_geometry *g,
                                          attn_reply *rep);

/* Map the shm object of an exported CPU pool read-write; *base gets the
 * mapping of e->bytes bytes (munmap it).  ATTN_E_BUFFER_UNSUPPORTED for a
 * cuda_ipc export (open e->handle with cudaIpcOpenMemHandle instead),
 * ATTN_E_IO when the object cannot be opened or mapped. */
ATTN_EXPORT int attn_pool_export_map_shm(const attn_pool_export *e, void **base,
                                         attn_error_detail *err);

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

/* buffer_register kind "shm": let attnd map the existing POSIX shared-memory
 * object `name` ("/x", at least `bytes` bytes) read-write; *buf gets its id,
 * valid on this client's connection until attn_buffer_drop or close. */
ATTN_EXPORT int attn_buffer_register_shm(attn_client *c, const char *name, uint64_t bytes,
                                         uint64_t *buf, attn_reply *rep);

/* buffer_register kind "cuda_ipc": register `bytes` of device memory at
 * `dev_ptr` (this process's pointer into a cudaMalloc allocation, interior
 * pointers allowed).  libattn finds the allocation's base and the offset,
 * takes its legacy IPC handle and device ordinal through the CUDA driver
 * (libcuda.so.1, opened at run time: libattn links no CUDA) and sends
 * {handle, offset, bytes, device}.  Errors before anything is sent:
 * ATTN_E_BUFFER_UNSUPPORTED (no driver, or memory that has no legacy IPC
 * handle: VMM / expandable segments, managed or host memory; field
 * "dev_ptr"), ATTN_E_BUFFER_RANGE (the range passes the allocation's end;
 * field "bytes"), both with rep->error filled.  The device is named
 * "cuda:<ordinal>" in this process's numbering: attnd must see the same
 * devices (same CUDA_VISIBLE_DEVICES). */
ATTN_EXPORT int attn_buffer_register_cuda(attn_client *c, const void *dev_ptr, uint64_t bytes,
                                          uint64_t *buf, attn_reply *rep);

/* buffer_drop: release buffer `buf` (a run in progress on it finishes first). */
ATTN_EXPORT int attn_buffer_drop(attn_client *c, uint64_t buf, attn_reply *rep);

/* run_status: the state of asynchronous run `run_seq` of this connection
 * (the run_seq of its run reply) in rep->status: queued, running, done or
 * failed (with the error), cancelled; timing once done. */
ATTN_EXPORT int attn_run_status_get(attn_client *c, uint64_t run_seq, attn_reply *rep);

/* stats: counters, plan-cache and pool usage (rep->stats). */
ATTN_EXPORT int attn_stats(attn_client *c, attn_reply *rep);

#ifdef __cplusplus
}
#endif
#endif
