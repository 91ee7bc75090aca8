/* The JSON form of every message (PROTOCOL.md "JSON form", docs/protocol.md).
 *
 * JSON has the same keys as msgpack.  JSON -> typed goes through msgpack:
 * the JSON tree is packed (tensor number arrays converted to little-endian
 * `bin` of their dtype) and then decoded by the one msgpack decoder, so the
 * two forms cannot accept different things.  Typed/msgpack -> JSON renders
 * every `bin` as an array of numbers by its key: tensors by their dtype,
 * integer arrays as int32, mask bits and unknown bins as bytes.
 *
 * A tensor (q, k_new, v_new, o, lse, tensors.k, tensors.v) in JSON is either
 * an array of numbers (or "inf", "-inf", "nan"), converted with the dtype
 * the message states (q_dtype for q/o, o_dtype for o, kv_dtype for the K/V
 * tensors, fp32 for lse) or, failing that, the caller's hints; or an object
 * {"dtype": "bf16", "data": [...]} that states its own dtype.
 */
#ifndef ATTN_PROTOCOL_JSON_H
#define ATTN_PROTOCOL_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/client.h"
#include "protocol/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dtypes for JSON tensor arrays whose message does not state them (a run
 * names its plan, not its q_dtype; a kv_write names its pool). */
typedef struct attn_json_hints {
    bool has_q_dtype;
    attn_dtype q_dtype;
    bool has_kv_dtype;
    attn_dtype kv_dtype;
} attn_json_hints;

/* Convert JSON text to one msgpack message (`out`, free with attn_buf_free).
 * Errors: ATTN_E_PROTOCOL (not JSON; message has line and column),
 * ATTN_E_DEPTH, ATTN_E_DTYPE (a tensor array without a known dtype),
 * ATTN_E_TYPE (a tensor entry that is not a number). */
int attn_json_to_msgpack(const char *text, size_t len, const attn_json_hints *hints, attn_buf *out,
                         attn_error_detail *err);

/* JSON text -> typed request.  The request borrows its tensors from
 * `backing` (the intermediate msgpack), which the caller frees with
 * attn_buf_free after attn_request_free. */
int attn_json_request_decode(const char *text, size_t len, const attn_json_hints *hints,
                             attn_request *req, attn_buf *backing, attn_error_detail *err);

/* JSON text -> typed reply (tests, replay); rep->backing owns the bytes. */
int attn_json_reply_decode(const char *text, size_t len, attn_reply *rep, attn_error_detail *err);

/* Render one msgpack message (request, reply, or any map) as JSON text;
 * *out is malloc'ed.  `pretty` indents by two.  Nesting is bounded by
 * `max_depth` (0 = the codec default). */
int attn_msgpack_to_json(const void *buf, size_t len, uint32_t max_depth, bool pretty, char **out,
                         attn_error_detail *err);

/* Typed request -> JSON text (encode, then render). */
int attn_request_to_json(const attn_request *req, bool pretty, char **out, attn_error_detail *err);

/* Typed reply -> JSON text (encode, then render; diag rendered as JSON). */
int attn_reply_to_json(const attn_reply *rep, bool pretty, char **out, attn_error_detail *err);

#ifdef __cplusplus
}
#endif
#endif
