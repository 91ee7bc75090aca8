/* attnd error codes: one X-macro list, three uses (enum, wire name, message).
 *
 * 0 is success; every failure is a negative number.  The wire name of
 * ATTN_E_FOO is the string "E_FOO" (PROTOCOL.md: error.code).  Add a code by
 * appending one line; never renumber an existing one (captures record them).
 */
#ifndef ATTN_ERROR_H
#define ATTN_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, number, message) */
#define ATTN_ERRORS(X)                                                                             \
    X(OK, 0, "success")                                                                            \
    /* framing and decoding */                                                                     \
    X(VERSION, -1, "unsupported protocol version")                                                 \
    X(PROTOCOL, -2, "malformed message")                                                           \
    X(TRUNCATED, -3, "message ends before a declared value")                                       \
    X(TYPE, -4, "field has the wrong type")                                                        \
    X(MISSING, -5, "required field is missing")                                                    \
    X(RANGE, -6, "value out of range")                                                             \
    X(TOO_LARGE, -7, "declared size exceeds a configured limit")                                   \
    X(UNKNOWN_OP, -8, "unknown operation")                                                         \
    X(DEPTH, -9, "nesting too deep")                                                               \
    X(SHAPE, -10, "tensor byte length does not match its shape")                                   \
    X(DTYPE, -11, "unsupported or mismatched dtype")                                               \
    X(UNKNOWN_KEY, -12, "key not allowed in this message")                                         \
    /* daemon state */                                                                             \
    X(UNKNOWN_POOL, -20, "no pool with that name")                                                 \
    X(POOL_EXISTS, -21, "a pool with that name already exists")                                    \
    X(STALE_PLAN, -22, "plan id unknown or evicted")                                               \
    X(LAYER, -23, "layer index outside the pool")                                                  \
    X(BUSY, -24, "server is at a configured limit")                                                \
    X(SHUTTING_DOWN, -25, "server is shutting down")                                               \
    X(UNKNOWN_BUFFER, -26, "no registered buffer with that id on this connection")                 \
    X(BUFFER_RANGE, -27, "a buffer reference or mapping falls outside its buffer")                 \
    X(BUFFER_UNSUPPORTED, -28, "that buffer kind is not available in this build or device")        \
    X(TIMEOUT, -29, "a request waited longer than a configured timeout")                           \
    /* phases and manifests (seed 0x08) */                                                         \
    X(PHASE, -30, "(cache_len, new_len) is not prefill, append or decode")                         \
    X(QO_INDPTR, -31, "qo_indptr is not monotone or disagrees with new_len")                       \
    X(DUPLICATE_REQUEST, -32, "two requests share one id")                                         \
    X(HEADS, -33, "num_qo_heads is not a multiple of num_kv_heads")                                \
    X(EMPTY_BATCH, -34, "manifest has no requests")                                                \
    /* address translation (seed 0x04) */                                                          \
    X(PAGE_OUT_OF_POOL, -40, "page id outside the pool")                                           \
    X(UNMAPPED_BLOCK, -41, "a visible logical block has no physical page")                         \
    X(LAST_PAGE_LEN, -42, "last_page_len outside [1, page_size]")                                  \
    X(INDPTR, -43, "indptr is not monotone or does not match its array")                           \
    X(COVERAGE, -44, "pages do not cover exactly cache_len + new_len rows")                        \
    X(DUPLICATE_CACHE, -45, "two requests claim the same cache rows")                              \
    X(CACHE_ROW, -46, "cache row remap outside the cache or not injective")                        \
    /* masks (seed 0x05, 0x06) */                                                                  \
    X(MASK_KIND, -50, "unknown mask kind")                                                         \
    X(MASK_POLARITY, -51, "dense mask without an explicit polarity")                               \
    X(MASK_INTERVAL, -52, "malformed mask interval")                                               \
    X(MASK_UNREPRESENTABLE, -53, "mask not representable in that form")                            \
    /* splits, ledgers, schedules (seed 0x03, 0x09) */                                             \
    X(SPLIT, -60, "split count or bounds invalid")                                                 \
    X(CAPACITY, -61, "launch capacity exceeds the workspace capacity")                             \
    X(WORKSPACE, -62, "workspace too small for the plan")                                          \
    /* admission and selection (seed 0x07) */                                                      \
    X(NO_BACKEND, -70, "no backend admits this call")                                              \
    X(BACKEND_REJECTED, -71, "the forced backend rejects this call")                               \
    X(UNKNOWN_BACKEND, -72, "no backend with that name is registered")                             \
    X(POLICY, -73, "malformed policy")                                                             \
    X(SEMANTIC, -74, "call is semantically invalid")                                               \
    /* execution */                                                                                \
    X(ENGINE, -80, "engine failed; the pool is unchanged")                                         \
    X(CUDA, -81, "CUDA runtime error")                                                             \
    X(POOL_UNRESTORED, -82, "engine failed and could not restore the pool")                        \
    X(NOMEM, -90, "out of memory")                                                                 \
    X(IO, -91, "input/output error")                                                               \
    X(INVALID, -92, "invalid argument to a library call (a NULL pointer)")                         \
    X(INTERNAL, -99, "internal error")

typedef enum attn_err {
#define ATTN__ERR_ENUM(name, num, msg) ATTN_E_##name = (num),
    ATTN_ERRORS(ATTN__ERR_ENUM)
#undef ATTN__ERR_ENUM
} attn_err;

/* A failure with the path of the offending field (PROTOCOL.md error reply):
 * code "E_LAST_PAGE_LEN", field "kv.last_page_len[3]", one human sentence. */
typedef struct attn_error_detail {
    int code;
    char field[128];
    char message[256];
} attn_error_detail;

/* Fill `d` (when not NULL) and return `code`, so validators can write
 * `return attn_error_set(d, ATTN_E_RANGE, "qo_indptr[2]", "must be >= %d", x);`.
 * The field is a plain string; the message is printf-formatted. */
int attn_error_set(attn_error_detail *d, int code, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The wire name of an error ("E_PAGE_OUT_OF_POOL"); "OK" for 0, "E_UNKNOWN" otherwise. */
const char *attn_err_name(int err);

/* One human sentence describing an error code. */
const char *attn_err_message(int err);

/* Parse a wire name back into its code; returns 1 when found. */
int attn_err_from_name(const char *name, int *err);

#ifdef __cplusplus
}
#endif
#endif
