/* attnd's registered buffers (PROTOCOL.md v2, docs/protocol.md "Registered
 * buffers"): memory a client shares with attnd so that run tensors travel by
 * reference instead of inside the frame.
 *
 * Each buffer belongs to the connection (nng pipe id; 0 for calls without
 * one, such as `attnctl run --local`) that registered it: only that
 * connection can name it, and it is released when that connection closes.
 * Ids count up from 1 and are never reused, so a stale id can never reach
 * another buffer.  A run holds the buffers it names (attnd_buffer_hold), so
 * a drop or a close while it runs unmaps them only once it is done.
 *
 * Kinds: "shm" (POSIX shm_open + mmap read-write, the object must exist and
 * hold at least `bytes`); "cuda_ipc" (a cudaIpcMemHandle_t plus an offset
 * into its allocation), opened through the hook the server installs
 * (attnd_buffers_set_ipc: the CUDA engine of the device opens, caches per
 * allocation and closes; this file includes no CUDA header).  Without a
 * hook a cuda_ipc registration is ATTN_E_BUFFER_UNSUPPORTED "kind".
 *
 * Thread-safe (one mutex).  Caps: at most max_buffers buffers and
 * max_buffer_bytes mapped bytes, all connections together (daemon/config.h).
 */
#ifndef ATTN_DAEMON_BUFFERS_H
#define ATTN_DAEMON_BUFFERS_H

#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"

typedef struct attnd_buffer_table attnd_buffer_table;
typedef struct attnd_buffer attnd_buffer;

/* Counters for `stats`. */
typedef struct attnd_buffer_stats {
    uint64_t live;              /* buffers registered now */
    uint64_t bytes;             /* bytes mapped now (a dropped buffer still in use counts) */
    uint64_t registered;        /* registrations that succeeded */
    uint64_t dropped;           /* buffer_drop calls that released one */
    uint64_t released_on_close; /* buffers released because their connection closed */
    uint64_t refused;           /* registrations refused (any error) */
} attnd_buffer_stats;

/* How a cuda_ipc handle is opened and closed (the CUDA engine's functions
 * behind the server's glue).  open: the device pointer of [offset, offset +
 * bytes) of the allocation `handle` names, on device `device`; errors name
 * "handle", "offset" or "bytes".  close: release what open gave. */
typedef struct attnd_ipc_opener {
    int (*open)(void *arg, int device, const uint8_t *handle, uint64_t offset, uint64_t bytes,
                void **dev_ptr, attn_error_detail *err);
    void (*close)(void *arg, int device, void *dev_ptr);
    void *arg;
} attnd_ipc_opener;

/* A table for at most `max_buffers` buffers and `max_bytes` mapped bytes. */
int attnd_buffers_create(attnd_buffer_table **out, uint32_t max_buffers, uint64_t max_bytes);

/* Install the cuda_ipc hook (NULL removes it); before any registration. */
void attnd_buffers_set_ipc(attnd_buffer_table *t, const attnd_ipc_opener *o);

/* Unmap everything and free the table (no run may hold a buffer any more). */
void attnd_buffers_destroy(attnd_buffer_table *t);

/* Register the buffer `a` describes for connection `conn`; *id gets its id.
 * `peer_uid` >= 0: a shm object must be owned by that user (the connecting
 * process's), so a client cannot map objects of other users through attnd;
 * -1: not checked (an in-process caller).
 * E_BUFFER_UNSUPPORTED "kind" (cuda_ipc), E_IO "name" (shm_open/mmap
 * failed, or another user's object), E_BUFFER_RANGE "bytes" (the object is smaller), E_TOO_LARGE
 * "bytes" (over max_buffer_bytes by itself), E_BUSY "max_buffers" /
 * "max_buffer_bytes" (the caps are reached now). */
int attnd_buffers_register(attnd_buffer_table *t, uint32_t conn, int64_t peer_uid,
                           const attn_buffer_args *a, uint64_t *id, attn_error_detail *err);

/* Drop buffer `id` of connection `conn` (E_UNKNOWN_BUFFER "buf" when it has none). */
int attnd_buffers_drop(attnd_buffer_table *t, uint32_t conn, uint64_t id, attn_error_detail *err);

/* Release every buffer of connection `conn` (it closed); returns how many.
 * Idempotent: a second call for the same connection releases nothing. */
uint32_t attnd_buffers_drop_conn(attnd_buffer_table *t, uint32_t conn);

/* The buffers one run names, held until attnd_buffer_hold_release. */
#define ATTND_HOLD_MAX 7 /* q, k_new, v_new, o, lse, wait, signal */
typedef struct attnd_buffer_hold {
    uint32_t n;
    attnd_buffer *held[ATTND_HOLD_MAX];
} attnd_buffer_hold;

/* Resolve reference `ref` of tensor `field` for connection `conn`: the
 * buffer must be this connection's and live (E_UNKNOWN_BUFFER "<field>.buf")
 * and [offset, offset + bytes) inside it (E_BUFFER_RANGE "<field>.offset" /
 * "<field>.bytes").  On success *ptr points at the bytes (a device pointer
 * for a cuda_ipc buffer), *kind (may be NULL) gets the buffer's kind and
 * *device its CUDA ordinal (-1 for shm; may be NULL), and `h` holds the
 * buffer (a buffer named twice is held twice). */
int attnd_buffers_resolve(attnd_buffer_table *t, uint32_t conn, const attn_tensor_ref *ref,
                          const char *field, attnd_buffer_hold *h, void **ptr,
                          attn_buffer_kind *kind, int *device, attn_error_detail *err);

/* Release what `h` holds (a buffer dropped meanwhile is unmapped now). */
void attnd_buffer_hold_release(attnd_buffer_table *t, attnd_buffer_hold *h);

/* True when references a and b name overlapping bytes of one buffer. */
bool attnd_refs_overlap(const attn_tensor_ref *a, const attn_tensor_ref *b);

/* The counters now. */
void attnd_buffers_stats(attnd_buffer_table *t, attnd_buffer_stats *st);

#endif
