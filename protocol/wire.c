/* Bounded msgpack cursor (see wire.h for why not msgpack_unpack). */
#include <string.h>

#include "attn/error.h"
#include "protocol/wire.h"

void attn_wire_init(attn_wire_reader *r, const void *p, size_t len)
{
    r->p = (const uint8_t *)p;
    r->len = p != NULL ? len : 0;
    r->pos = 0;
}

size_t attn_wire_remaining(const attn_wire_reader *r)
{
    return r->len - r->pos;
}

/* Read an n-byte big-endian unsigned integer (msgpack byte order). */
static int read_be(attn_wire_reader *r, unsigned n, uint64_t *out)
{
    if (attn_wire_remaining(r) < n)
        return ATTN_E_TRUNCATED;
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v = (v << 8) | r->p[r->pos + k];
    r->pos += n;
    *out = v;
    return 0;
}

/* A str/bin/ext payload of `n` bytes: it must fit in what remains. */
static int take_payload(attn_wire_reader *r, uint64_t n, attn_wire_item *it)
{
    if (n > attn_wire_remaining(r))
        return ATTN_E_TRUNCATED;
    it->ptr = r->p + r->pos;
    it->len = (uint32_t)n;
    r->pos += (size_t)n;
    return 0;
}

/* An array (per = 1) or map (per = 2) count: each entry takes at least one
 * byte, so a count beyond the remaining bytes is a lie, rejected before any
 * caller sizes an allocation from it. */
static int take_count(attn_wire_reader *r, uint64_t n, unsigned per, attn_wire_item *it)
{
    if (n * per > attn_wire_remaining(r))
        return ATTN_E_TOO_LARGE;
    it->len = (uint32_t)n;
    return 0;
}

static int read_float(attn_wire_reader *r, unsigned n, attn_wire_item *it)
{
    uint64_t bits;
    int rv = read_be(r, n, &bits);
    if (rv != 0)
        return rv;
    it->type = ATTN_WT_FLOAT;
    if (n == 4) {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        it->f = f;
    } else {
        memcpy(&it->f, &bits, sizeof it->f);
    }
    return 0;
}

static int read_sized(attn_wire_reader *r, attn_wire_type t, unsigned nbytes, attn_wire_item *it)
{
    uint64_t n;
    int rv = read_be(r, nbytes, &n);
    if (rv != 0)
        return rv;
    it->type = t;
    switch (t) {
    case ATTN_WT_ARRAY:
        return take_count(r, n, 1, it);
    case ATTN_WT_MAP:
        return take_count(r, n, 2, it);
    case ATTN_WT_EXT:
        /* the type byte precedes the payload */
        if (attn_wire_remaining(r) < 1)
            return ATTN_E_TRUNCATED;
        r->pos++;
        return take_payload(r, n, it);
    default:
        return take_payload(r, n, it);
    }
}

static int read_int(attn_wire_reader *r, unsigned n, bool is_signed, attn_wire_item *it)
{
    uint64_t v;
    int rv = read_be(r, n, &v);
    if (rv != 0)
        return rv;
    if (is_signed) {
        /* sign-extend from n bytes */
        int64_t s = n == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * n)) >> (64 - 8 * n);
        if (s < 0) {
            it->type = ATTN_WT_INT;
            it->i = s;
            return 0;
        }
        v = (uint64_t)s;
    }
    it->type = ATTN_WT_UINT;
    it->u = v;
    it->i = v <= (uint64_t)INT64_MAX ? (int64_t)v : INT64_MAX;
    return 0;
}

int attn_wire_next(attn_wire_reader *r, attn_wire_item *it)
{
    memset(it, 0, sizeof *it);
    if (attn_wire_remaining(r) < 1)
        return ATTN_E_TRUNCATED;
    uint8_t c = r->p[r->pos++];
    if (c <= 0x7f) {
        it->type = ATTN_WT_UINT;
        it->u = c;
        it->i = c;
        return 0;
    }
    if (c >= 0xe0) {
        it->type = ATTN_WT_INT;
        it->i = (int8_t)c;
        return 0;
    }
    if ((c & 0xf0) == 0x80) {
        it->type = ATTN_WT_MAP;
        return take_count(r, c & 0x0f, 2, it);
    }
    if ((c & 0xf0) == 0x90) {
        it->type = ATTN_WT_ARRAY;
        return take_count(r, c & 0x0f, 1, it);
    }
    if ((c & 0xe0) == 0xa0) {
        it->type = ATTN_WT_STR;
        return take_payload(r, c & 0x1f, it);
    }
    switch (c) {
    case 0xc0:
        it->type = ATTN_WT_NIL;
        return 0;
    case 0xc2:
    case 0xc3:
        it->type = ATTN_WT_BOOL;
        it->b = c == 0xc3;
        return 0;
    case 0xc4:
        return read_sized(r, ATTN_WT_BIN, 1, it);
    case 0xc5:
        return read_sized(r, ATTN_WT_BIN, 2, it);
    case 0xc6:
        return read_sized(r, ATTN_WT_BIN, 4, it);
    case 0xc7:
        return read_sized(r, ATTN_WT_EXT, 1, it);
    case 0xc8:
        return read_sized(r, ATTN_WT_EXT, 2, it);
    case 0xc9:
        return read_sized(r, ATTN_WT_EXT, 4, it);
    case 0xca:
        return read_float(r, 4, it);
    case 0xcb:
        return read_float(r, 8, it);
    case 0xcc:
        return read_int(r, 1, false, it);
    case 0xcd:
        return read_int(r, 2, false, it);
    case 0xce:
        return read_int(r, 4, false, it);
    case 0xcf:
        return read_int(r, 8, false, it);
    case 0xd0:
        return read_int(r, 1, true, it);
    case 0xd1:
        return read_int(r, 2, true, it);
    case 0xd2:
        return read_int(r, 4, true, it);
    case 0xd3:
        return read_int(r, 8, true, it);
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: {
        /* fixext 1, 2, 4, 8, 16: a type byte then 2^(c-0xd4) bytes */
        if (attn_wire_remaining(r) < 1)
            return ATTN_E_TRUNCATED;
        r->pos++;
        it->type = ATTN_WT_EXT;
        return take_payload(r, 1u << (c - 0xd4), it);
    }
    case 0xd9:
        return read_sized(r, ATTN_WT_STR, 1, it);
    case 0xda:
        return read_sized(r, ATTN_WT_STR, 2, it);
    case 0xdb:
        return read_sized(r, ATTN_WT_STR, 4, it);
    case 0xdc:
        return read_sized(r, ATTN_WT_ARRAY, 2, it);
    case 0xdd:
        return read_sized(r, ATTN_WT_ARRAY, 4, it);
    case 0xde:
        return read_sized(r, ATTN_WT_MAP, 2, it);
    case 0xdf:
        return read_sized(r, ATTN_WT_MAP, 4, it);
    default: /* 0xc1 is reserved ("never used") */
        return ATTN_E_PROTOCOL;
    }
}

int attn_wire_skip(attn_wire_reader *r, uint32_t max_depth)
{
    /* Iterative: a pending-entry counter per open container, bounded by
     * max_depth, so hostile nesting costs neither stack nor heap. */
    uint64_t pending[64];
    uint32_t depth = 0;
    if (max_depth > 63)
        max_depth = 63;
    uint64_t todo = 1;
    for (;;) {
        while (todo == 0) {
            if (depth == 0)
                return 0;
            todo = pending[--depth];
        }
        todo--;
        attn_wire_item it;
        int rv = attn_wire_next(r, &it);
        if (rv != 0)
            return rv;
        if ((it.type == ATTN_WT_ARRAY || it.type == ATTN_WT_MAP) && it.len > 0) {
            if (depth >= max_depth)
                return ATTN_E_DEPTH;
            pending[depth++] = todo;
            todo = it.type == ATTN_WT_MAP ? 2ull * it.len : it.len;
        } else if ((it.type == ATTN_WT_ARRAY || it.type == ATTN_WT_MAP) && depth >= max_depth) {
            return ATTN_E_DEPTH;
        }
    }
}

bool attn_wire_str_eq(const attn_wire_item *it, const char *s)
{
    size_t n = strlen(s);
    return it->type == ATTN_WT_STR && it->len == n && memcmp(it->ptr, s, n) == 0;
}

bool attn_utf8_valid(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}
