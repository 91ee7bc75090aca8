/* A bounded msgpack cursor for untrusted bytes.
 *
 * msgpack-c's unpacker trusts declared lengths (the five bytes
 * `dd ff 00 00 00` make it reserve ~96 GB); this reader instead checks every
 * declared str/bin length and every array/map count against the bytes that
 * remain before the caller can act on it, and it allocates nothing.  It is
 * stateless apart from its position, so nothing needs resetting after an
 * error.
 */
#ifndef ATTN_PROTOCOL_WIRE_H
#define ATTN_PROTOCOL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_wire_type {
    ATTN_WT_NIL = 0,
    ATTN_WT_BOOL,
    ATTN_WT_UINT, /* non-negative integer: value in .u */
    ATTN_WT_INT,  /* negative integer: value in .i */
    ATTN_WT_FLOAT,
    ATTN_WT_STR,
    ATTN_WT_BIN,
    ATTN_WT_ARRAY,
    ATTN_WT_MAP,
    ATTN_WT_EXT,
} attn_wire_type;

/* One decoded header.  For str/bin/ext the payload is `ptr[0..len)` (already
 * consumed); for array/map `len` is the entry count (entries follow). */
typedef struct attn_wire_item {
    attn_wire_type type;
    bool b;
    uint64_t u;
    int64_t i;
    double f;
    const uint8_t *ptr;
    uint32_t len;
} attn_wire_item;

typedef struct attn_wire_reader {
    const uint8_t *p;
    size_t len;
    size_t pos;
} attn_wire_reader;

/* Start reading `len` bytes at `p`. */
void attn_wire_init(attn_wire_reader *r, const void *p, size_t len);

/* Bytes not yet consumed. */
size_t attn_wire_remaining(const attn_wire_reader *r);

/* Read one header.  Returns 0, ATTN_E_TRUNCATED (the header or a str/bin/ext
 * payload runs past the end), ATTN_E_TOO_LARGE (an array/map declares more
 * entries than the remaining bytes could hold), or ATTN_E_PROTOCOL (the
 * reserved byte 0xc1).  On error the position is unspecified. */
int attn_wire_next(attn_wire_reader *r, attn_wire_item *it);

/* Skip one complete value of at most `max_depth` nesting levels (a scalar is
 * depth 0 below its container); ATTN_E_DEPTH past it, or an attn_wire_next
 * error. */
int attn_wire_skip(attn_wire_reader *r, uint32_t max_depth);

/* True when `it` is a str equal to the NUL-terminated `s`. */
bool attn_wire_str_eq(const attn_wire_item *it, const char *s);

/* Whether p[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF); every string attnd keeps and echoes
 * must be, or strict clients cannot decode its replies. */
bool attn_utf8_valid(const void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
