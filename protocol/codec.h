/* msgpack encode/decode of every PROTOCOL.md message (docs/protocol.md).
 *
 * Decoding reads untrusted bytes through the bounded cursor of
 * protocol/wire.h: every declared str/bin/array/map length is checked
 * against the bytes that remain and against attn_codec_limits before
 * anything is allocated, nesting is bounded, and the decoder keeps no state
 * between calls (each call starts afresh, so an error never poisons the
 * next message).  Every failure returns a specific ATTN_E_* with the field
 * path and one sentence in attn_error_detail.  Encoding uses msgpack-c.
 *
 * Zero copy: a decoded request's tensors (q, k_new, v_new, k, v) and a
 * decoded reply's o, lse, k, v and diag point into the input buffer, which
 * must outlive the message.  Integer arrays (qo_indptr, page tables, masks,
 * pages) are copied into malloc'ed arrays (one memcpy for a `bin`).
 */
#ifndef ATTN_PROTOCOL_CODEC_H
#define ATTN_PROTOCOL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "attn/client.h"
#include "attn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hard limits on what a decoder accepts (redis-style: configuration with
 * safe defaults; a value past a limit is ATTN_E_TOO_LARGE). */
typedef struct attn_codec_limits {
    uint32_t max_depth;     /* nesting of maps/arrays, top level = 1 */
    uint32_t max_requests;  /* B */
    uint32_t max_array;     /* entries of any integer array (page_indices, pages, ...) */
    uint64_t max_bin_bytes; /* one bin/str payload */
    uint32_t max_map_keys;  /* entries of one map */
} attn_codec_limits;

/* The defaults: depth 16, B <= 65536, arrays <= 16 Mi entries, bins <= 4 GiB,
 * maps <= 4096 keys. */
void attn_codec_limits_default(attn_codec_limits *lim);

/* An encoded message: malloc'ed bytes, freed with attn_buf_free. */
typedef struct attn_buf {
    uint8_t *data;
    size_t len;
} attn_buf;

/* Free the bytes of `b` and zero it. */
void attn_buf_free(attn_buf *b);

/* Decode a request.  On success `req` owns its integer arrays (free with
 * attn_request_free) and borrows its tensors from `buf`.  On failure `req`
 * owns nothing, except that req->id/has_id are set when `id` was readable
 * so the error reply can carry it.  `lim` NULL means the defaults. */
int attn_request_decode(const void *buf, size_t len, const attn_codec_limits *lim,
                        attn_request *req, attn_error_detail *err);

/* Encode a typed request (integer arrays and tensors as `bin`). */
int attn_request_encode(const attn_request *req, attn_buf *out, attn_error_detail *err);

/* Where the per-submit fields of an encoded run request sit: the offset of
 * each value's 8 big-endian bytes (a fixed-width msgpack uint64), 0 when
 * the request has no such field (offset 0 is the map header, never a
 * value).  libattn's prepared runs (attn_run_prepare) rewrite them in place
 * instead of encoding the whole request again. */
typedef struct attn_run_patch {
    size_t id, layer, order, wait_value, signal_value;
} attn_run_patch;

/* The values attn_run_patch_apply writes (order, wait_value, signal_value
 * only where the request has the field). */
typedef struct attn_run_values {
    uint64_t id;
    uint32_t layer;
    uint64_t order, wait_value, signal_value;
} attn_run_values;

/* attn_request_encode for a run (req->op must be ATTN_OP_RUN, else
 * ATTN_E_INVALID "op"), with id, layer, order and the wait / signal values
 * in fixed-width form and their offsets in *patch.  The message decodes to
 * the same request as attn_request_encode's. */
int attn_run_request_encode_patchable(const attn_request *req, attn_buf *out, attn_run_patch *patch,
                                      attn_error_detail *err);

/* Rewrite the per-submit fields of a message from
 * attn_run_request_encode_patchable (msg: a copy of its bytes). */
void attn_run_patch_apply(uint8_t *msg, const attn_run_patch *patch, const attn_run_values *v);

/* Encode a typed reply; rep->diag (when len > 0) must be one complete
 * msgpack object and is spliced verbatim under key "diag". */
int attn_reply_encode(const attn_reply *rep, attn_buf *out, attn_error_detail *err);

/* Encode the error reply {v, id, op?, ok: false, error {code, field,
 * message}}; `op` may be ATTN_OP_COUNT when the op itself was unreadable. */
int attn_error_reply_encode(uint64_t id, attn_op op, const attn_error_detail *e, attn_buf *out);

/* Decode a reply (the client side).  Byte ranges point into `buf`; the
 * caller may hand ownership of `buf` to rep->backing.  `lim` NULL means the
 * defaults. */
int attn_reply_decode(const void *buf, size_t len, const attn_codec_limits *lim, attn_reply *rep,
                      attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif
