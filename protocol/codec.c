/* msgpack encode/decode of every PROTOCOL.md message (docs/protocol.md).
 *
 * Decoding is two passes over one map: index_map records where each known
 * key's value starts (skipping values with the depth-bounded skipper), then
 * the op's fields are read from those positions in a fixed order, so error
 * precedence does not depend on the sender's key order: id, v, op, then the
 * op's fields.  Integer arrays accept `bin` (int32 little-endian, one
 * memcpy) or a msgpack array; tensors must be `bin` (the JSON form converts
 * its number arrays to `bin` before decoding).
 */
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"
#include "protocol/codec.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"
#include "protocol/wire.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attnd's wire payloads are little-endian and copied verbatim: big-endian hosts unsupported"
#endif

#define ABSENT SIZE_MAX

void attn_codec_limits_default(attn_codec_limits *lim)
{
    lim->max_depth = 16;
    lim->max_requests = 65536;
    lim->max_array = 16u << 20;
    lim->max_bin_bytes = 4ull << 30;
    lim->max_map_keys = 4096;
}

void attn_buf_free(attn_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

/* ---- decoding ------------------------------------------------------------ */

typedef struct dec {
    attn_wire_reader r;
    attn_codec_limits lim;
    attn_error_detail *err;
    char unknown[160]; /* first unknown top-level key of a lenient index */
} dec;

static int wire_fail(dec *d, int rv, const char *field)
{
    /* the frame itself: the field is "message", the sentence names no field */
    const char *named = strcmp(field, "message") == 0 ? "" : field;
    switch (rv) {
    case ATTN_E_TRUNCATED:
        return attn_error_set(d->err, rv, field, "the message ends inside %s",
                              named[0] ? named : "the top-level value");
    case ATTN_E_TOO_LARGE:
        return attn_error_set(d->err, rv, field,
                              "%s declares more entries than the message has bytes",
                              named[0] ? named : "the top-level value");
    case ATTN_E_DEPTH:
        return attn_error_set(d->err, rv, field, "%s nests deeper than %u levels",
                              named[0] ? named : "the message", d->lim.max_depth);
    default:
        return attn_error_set(d->err, rv, field, "%s is not valid msgpack",
                              named[0] ? named : "the message");
    }
}

/* Read the header at `pos` (a position index_map recorded). */
static int item_at(dec *d, size_t pos, const char *field, attn_wire_item *it)
{
    d->r.pos = pos;
    int rv = attn_wire_next(&d->r, it);
    return rv != 0 ? wire_fail(d, rv, field) : 0;
}

static const char *type_name(attn_wire_type t)
{
    static const char *const names[] = {"nil", "bool", "integer", "integer", "float",
                                        "str", "bin",  "array",   "map",     "ext"};
    return names[t];
}

static int type_fail(dec *d, const char *field, const char *want, attn_wire_type got)
{
    return attn_error_set(d->err, ATTN_E_TYPE, field, "%s must be %s, not %s", field, want,
                          type_name(got));
}

/* Index a map whose header was just read: for every entry, find its key in
 * `names` and record the value position in pos[]; skip the value with the
 * remaining depth budget.  Unknown keys are an error when `strict`, except
 * the documented extension prefix "x_". */
static int index_map(dec *d, const attn_wire_item *map, uint32_t depth, const char *path,
                     const char *const *names, size_t n, size_t *pos, bool strict)
{
    /* errors of the map itself name its path, or "message" for the top level */
    const char *where = path[0] ? path : "message";
    for (size_t k = 0; k < n; k++)
        pos[k] = ABSENT;
    if (map->len > d->lim.max_map_keys)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, where, "map %s has %u keys (limit %u)",
                              where, map->len, d->lim.max_map_keys);
    if (depth > d->lim.max_depth)
        return wire_fail(d, ATTN_E_DEPTH, where);
    for (uint32_t e = 0; e < map->len; e++) {
        attn_wire_item key;
        int rv = attn_wire_next(&d->r, &key);
        if (rv != 0)
            return wire_fail(d, rv, where);
        if (key.type != ATTN_WT_STR)
            return attn_error_set(d->err, ATTN_E_TYPE, where, "keys of %s must be strings, not %s",
                                  where, type_name(key.type));
        size_t k = 0;
        while (k < n && !attn_wire_str_eq(&key, names[k]))
            k++;
        /* the field path is built only for an error (hot loop otherwise) */
        char field[160];
#define KEY_FIELD()                                                                                \
    snprintf(field, sizeof field, "%s%s%.*s", path, path[0] ? "." : "",                            \
             (int)(key.len > 64 ? 64 : key.len), (const char *)key.ptr)
        if (k == n && !(key.len >= 2 && memcmp(key.ptr, "x_", 2) == 0)) {
            KEY_FIELD();
            if (strict)
                return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY, field, "key %s is not part of %s",
                                      field, path[0] ? path : "this message");
            if (!d->unknown[0]) /* reported once the header (id) is known */
                snprintf(d->unknown, sizeof d->unknown, "%s", field);
        }
        if (k < n) {
            if (pos[k] != ABSENT) {
                KEY_FIELD();
                return attn_error_set(d->err, ATTN_E_PROTOCOL, field, "key %s appears twice",
                                      field);
            }
            pos[k] = d->r.pos;
        }
        rv = attn_wire_skip(&d->r, d->lim.max_depth - depth);
        if (rv != 0) {
            KEY_FIELD();
            return wire_fail(d, rv, field);
        }
#undef KEY_FIELD
    }
    return 0;
}

/* Open the map at `pos` and index it. */
static int open_map(dec *d, size_t pos, uint32_t depth, const char *path, const char *const *names,
                    size_t n, size_t *idx, bool strict)
{
    attn_wire_item it;
    int rv = item_at(d, pos, path, &it);
    if (rv != 0)
        return rv;
    if (it.type != ATTN_WT_MAP)
        return type_fail(d, path, "a map", it.type);
    return index_map(d, &it, depth, path, names, n, idx, strict);
}

static int missing(dec *d, const char *field)
{
    return attn_error_set(d->err, ATTN_E_MISSING, field, "required field %s is missing", field);
}

/* Read the header of a required field: E_MISSING when the key was absent. */
static int item_required(dec *d, size_t pos, const char *field, attn_wire_item *it)
{
    if (pos == ABSENT)
        return missing(d, field);
    return item_at(d, pos, field, it);
}

/* The next element of an array being read; a wire error names field[i]. */
static int next_elem(dec *d, const char *field, uint32_t i, attn_wire_item *e)
{
    int rv = attn_wire_next(&d->r, e);
    if (rv != 0) {
        char f[192];
        snprintf(f, sizeof f, "%s[%u]", field, i);
        return wire_fail(d, rv, f);
    }
    return 0;
}

static int get_uint(dec *d, size_t pos, const char *field, uint64_t lo, uint64_t hi, uint64_t *out)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_required(d, pos, field, &it)) != 0)
        return rv;
    if (it.type == ATTN_WT_INT)
        return attn_error_set(d->err, ATTN_E_RANGE, field, "%s is %lld but must be >= %llu", field,
                              (long long)it.i, (unsigned long long)lo);
    if (it.type != ATTN_WT_UINT)
        return type_fail(d, field, "an unsigned integer", it.type);
    if (it.u < lo || it.u > hi)
        return attn_error_set(d->err, ATTN_E_RANGE, field, "%s is %llu, outside [%llu, %llu]",
                              field, (unsigned long long)it.u, (unsigned long long)lo,
                              (unsigned long long)hi);
    *out = it.u;
    return 0;
}

static int get_u32(dec *d, size_t pos, const char *field, uint32_t lo, uint32_t *out)
{
    uint64_t v = 0;
    int rv = get_uint(d, pos, field, lo, UINT32_MAX, &v);
    if (rv == 0)
        *out = (uint32_t)v;
    return rv;
}

static int get_bool(dec *d, size_t pos, const char *field, bool dflt, bool *out)
{
    attn_wire_item it;
    int rv;
    if (pos == ABSENT) {
        *out = dflt;
        return 0;
    }
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_BOOL)
        return type_fail(d, field, "a bool", it.type);
    *out = it.b;
    return 0;
}

/* A str into a fixed buffer: 1..cap-1 bytes, no NUL inside. */
static int get_str(dec *d, size_t pos, const char *field, char *dst, size_t cap)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_required(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_STR)
        return type_fail(d, field, "a string", it.type);
    if (it.len == 0 || it.len >= cap)
        return attn_error_set(d->err, ATTN_E_RANGE, field, "%s must have 1 to %zu bytes, not %u",
                              field, cap - 1, it.len);
    if (memchr(it.ptr, 0, it.len) != NULL)
        return attn_error_set(d->err, ATTN_E_RANGE, field, "%s contains a NUL byte", field);
    if (!attn_utf8_valid(it.ptr, it.len))
        return attn_error_set(d->err, ATTN_E_RANGE, field, "%s is not valid UTF-8", field);
    memcpy(dst, it.ptr, it.len);
    dst[it.len] = '\0';
    return 0;
}

/* A str that must be a wire name of one enumeration list: the list's parser
 * (attn/names.h) names the field and the allowed values.  A str that does
 * not fit (empty, too long, NUL inside) is handed on as "", so it is
 * refused with the list's own error code like any other unknown name. */
static int get_name(dec *d, size_t pos, const char *field, char s[ATTN_NAME_MAX])
{
    int rv = get_str(d, pos, field, s, ATTN_NAME_MAX);
    if (rv == ATTN_E_RANGE)
        s[0] = '\0';
    return rv == ATTN_E_RANGE ? 0 : rv;
}

#define GET_NAME_DEFINE(type)                                                                      \
    static int get_##type(dec *d, size_t pos, const char *field, type *out)                        \
    {                                                                                              \
        char s[ATTN_NAME_MAX];                                                                     \
        int rv = get_name(d, pos, field, s);                                                       \
        return rv != 0 ? rv : type##_parse(s, field, out, d->err);                                 \
    }
GET_NAME_DEFINE(attn_dtype)
GET_NAME_DEFINE(attn_layout)
GET_NAME_DEFINE(attn_kv_format)
GET_NAME_DEFINE(attn_mask_kind)
GET_NAME_DEFINE(attn_mask_polarity)
GET_NAME_DEFINE(attn_schedule_policy)
GET_NAME_DEFINE(attn_split_policy)
GET_NAME_DEFINE(attn_state_abi)
#undef GET_NAME_DEFINE

/* An int32 array: `bin` of little-endian int32 (one memcpy) or a msgpack
 * array of integers in int32 range.  Always returns a non-NULL array. */
static int get_i32s(dec *d, size_t pos, const char *field, int32_t **out, uint32_t *n_out)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_required(d, pos, field, &it)) != 0)
        return rv;
    uint32_t n;
    if (it.type == ATTN_WT_BIN) {
        if (it.len % 4 != 0)
            return attn_error_set(d->err, ATTN_E_SHAPE, field,
                                  "%s has %u bytes, not a whole number of int32", field, it.len);
        n = it.len / 4;
    } else if (it.type == ATTN_WT_ARRAY) {
        n = it.len;
    } else {
        return type_fail(d, field, "an int32 array (bin or array)", it.type);
    }
    if (n > d->lim.max_array)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, field, "%s has %u entries (limit %u)",
                              field, n, d->lim.max_array);
    int32_t *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    if (a == NULL)
        return attn_error_set(d->err, ATTN_E_NOMEM, field, "no memory for %s", field);
    if (it.type == ATTN_WT_BIN) {
        if (n)
            memcpy(a, it.ptr, (size_t)n * 4);
    } else {
        for (uint32_t i = 0; i < n; i++) {
            attn_wire_item e;
            char f[192];
            if ((rv = next_elem(d, field, i, &e)) != 0) {
                free(a);
                return rv;
            }
            if ((e.type != ATTN_WT_UINT && e.type != ATTN_WT_INT) || e.i < INT32_MIN ||
                e.i > INT32_MAX || (e.type == ATTN_WT_UINT && e.u > INT32_MAX)) {
                free(a);
                snprintf(f, sizeof f, "%s[%u]", field, i);
                if (e.type != ATTN_WT_UINT && e.type != ATTN_WT_INT)
                    return type_fail(d, f, "an integer", e.type);
                return attn_error_set(d->err, ATTN_E_RANGE, f, "%s does not fit int32", f);
            }
            a[i] = (int32_t)e.i;
        }
    }
    *out = a;
    *n_out = n;
    return 0;
}

/* Bytes: `bin`, or (for mask bits) a msgpack array of integers 0..255. */
static int get_u8s(dec *d, size_t pos, const char *field, uint8_t **out, uint64_t *n_out)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_required(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_BIN && it.type != ATTN_WT_ARRAY)
        return type_fail(d, field, "bytes (bin or array)", it.type);
    if (it.len > d->lim.max_bin_bytes)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, field, "%s has %u bytes", field, it.len);
    uint8_t *a = malloc(it.len ? it.len : 1);
    if (a == NULL)
        return attn_error_set(d->err, ATTN_E_NOMEM, field, "no memory for %s", field);
    if (it.type == ATTN_WT_BIN) {
        if (it.len)
            memcpy(a, it.ptr, it.len);
    } else {
        for (uint32_t i = 0; i < it.len; i++) {
            attn_wire_item e;
            char f[192];
            if ((rv = next_elem(d, field, i, &e)) != 0) {
                free(a);
                return rv;
            }
            if (e.type != ATTN_WT_UINT || e.u > 255) {
                free(a);
                snprintf(f, sizeof f, "%s[%u]", field, i);
                return e.type == ATTN_WT_UINT || e.type == ATTN_WT_INT
                           ? attn_error_set(d->err, ATTN_E_RANGE, f, "%s is not a byte", f)
                           : type_fail(d, f, "a byte", e.type);
            }
            a[i] = (uint8_t)e.u;
        }
    }
    *out = a;
    *n_out = it.len;
    return 0;
}

/* A tensor: a `bin`, kept as a pointer into the message (zero copy). */
static int get_tensor(dec *d, size_t pos, const char *field, bool required, attn_bytes *out)
{
    attn_wire_item it;
    int rv;
    out->data = NULL;
    out->len = 0;
    if (pos == ABSENT)
        return required ? missing(d, field) : 0;
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_BIN)
        return type_fail(d, field, "a bin of little-endian elements", it.type);
    if (it.len > d->lim.max_bin_bytes)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, field, "%s has %u bytes", field, it.len);
    out->data = it.ptr;
    out->len = it.len;
    return 0;
}

/* The value bytes at `pos` (one complete object), e.g. the opaque diag. */
static int get_raw(dec *d, size_t pos, uint32_t depth, const char *field, attn_bytes *out)
{
    d->r.pos = pos;
    int rv = attn_wire_skip(&d->r, d->lim.max_depth - depth);
    if (rv != 0)
        return wire_fail(d, rv, field);
    out->data = d->r.p + pos;
    out->len = d->r.pos - pos;
    return 0;
}

/* Top-level keys of every request and reply. */
enum {
    K_V,
    K_OP,
    K_ID,
    K_POOL,
    K_LAYERS,
    K_NUM_PAGES,
    K_PAGE_SIZE,
    K_NUM_KV_HEADS,
    K_HEAD_DIM_QK,
    K_HEAD_DIM_VO,
    K_KV_DTYPE,
    K_LAYOUT,
    K_DEVICE,
    K_NUM_QO_HEADS,
    K_REQUESTS,
    K_QO_INDPTR,
    K_KV,
    K_MASK,
    K_SM_SCALE,
    K_Q_DTYPE,
    K_POLICY,
    K_PLAN_ID,
    K_LAYER,
    K_Q,
    K_K_NEW,
    K_V_NEW,
    K_RETURN_LSE,
    K_TRACE,
    K_VERIFY,
    K_PAGES,
    K_TENSORS,
    K_KIND,
    K_NAME,
    K_HANDLE,
    K_BUF,
    K_ASYNC,
    K_WAIT,
    K_SIGNAL,
    K_RUN_SEQ,
    K_OFFSET,
    K_ORDER,
    K_EXPORT,
    K_KV_WRITTEN,
    /* reply only (o and lse are also a run's output references) */
    K_OK,
    K_ERROR,
    K_SERVER,
    K_BYTES,
    K_PLAN_KEY,
    K_O,
    K_O_DTYPE,
    K_LSE,
    K_DIAG,
    K_COUNTERS,
    K_PLAN_CACHE,
    K_POOLS,
    K_STATUS,
    K_ASYNC_ERROR,
    K_HANDOFF,
    K_HANDOFF_US,
    K_COUNT
};

static const char *const g_keys[K_COUNT] = {
    "v",          "op",           "id",          "pool",        "layers",    "num_pages",
    "page_size",  "num_kv_heads", "head_dim_qk", "head_dim_vo", "kv_dtype",  "layout",
    "device",     "num_qo_heads", "requests",    "qo_indptr",   "kv",        "mask",
    "sm_scale",   "q_dtype",      "policy",      "plan_id",     "layer",     "q",
    "k_new",      "v_new",        "return_lse",  "trace",       "verify",    "pages",
    "tensors",    "kind",         "name",        "handle",      "buf",       "async",
    "wait",       "signal",       "run_seq",     "offset",      "order",     "export",
    "kv_written", "ok",           "error",       "server",      "bytes",     "plan_key",
    "o",          "o_dtype",      "lse",         "diag",        "counters",  "plan_cache",
    "pools",      "status",       "async_error", "handoff",     "handoff_us"};
/* every key is a bit of a uint64_t (g_req_allowed) */
_Static_assert(K_COUNT <= 64, "too many top-level keys for the allowed-key masks");

#define B(k) (1ull << (k))
#define GEOM_KEYS                                                                                  \
    (B(K_POOL) | B(K_LAYERS) | B(K_NUM_PAGES) | B(K_PAGE_SIZE) | B(K_NUM_KV_HEADS) |               \
     B(K_HEAD_DIM_QK) | B(K_HEAD_DIM_VO) | B(K_KV_DTYPE) | B(K_LAYOUT) | B(K_DEVICE))
#define PLAN_KEYS                                                                                  \
    (B(K_POOL) | B(K_NUM_QO_HEADS) | B(K_REQUESTS) | B(K_QO_INDPTR) | B(K_KV) | B(K_MASK) |        \
     B(K_SM_SCALE) | B(K_Q_DTYPE) | B(K_POLICY))
#define RUN_KEYS                                                                                   \
    (B(K_LAYER) | B(K_Q) | B(K_K_NEW) | B(K_V_NEW) | B(K_O) | B(K_LSE) | B(K_RETURN_LSE) |         \
     B(K_TRACE) | B(K_VERIFY) | B(K_ASYNC) | B(K_WAIT) | B(K_SIGNAL) | B(K_ORDER) |                \
     B(K_KV_WRITTEN))

/* Which top-level keys each request op allows (besides v, op, id). */
static const uint64_t g_req_allowed[ATTN_OP_COUNT] = {
    [ATTN_OP_HELLO] = 0,
    [ATTN_OP_POOL_CREATE] = GEOM_KEYS | B(K_EXPORT),
    [ATTN_OP_POOL_DROP] = B(K_POOL),
    [ATTN_OP_POOL_INFO] = B(K_POOL),
    [ATTN_OP_PLAN] = PLAN_KEYS,
    [ATTN_OP_RUN] = RUN_KEYS | B(K_PLAN_ID) | B(K_Q_DTYPE),
    [ATTN_OP_ATTEND] = PLAN_KEYS | RUN_KEYS,
    [ATTN_OP_KV_READ] = B(K_POOL) | B(K_LAYER) | B(K_PAGES),
    [ATTN_OP_KV_WRITE] = B(K_POOL) | B(K_LAYER) | B(K_PAGES) | B(K_TENSORS) | B(K_KV_DTYPE),
    [ATTN_OP_STATS] = 0,
    [ATTN_OP_BUFFER_REGISTER] =
        B(K_KIND) | B(K_NAME) | B(K_HANDLE) | B(K_OFFSET) | B(K_BYTES) | B(K_DEVICE),
    [ATTN_OP_BUFFER_DROP] = B(K_BUF),
    [ATTN_OP_RUN_STATUS] = B(K_RUN_SEQ),
};

static int decode_geometry(dec *d, const size_t *pos, attn_pool_geometry *g, bool *has_device)
{
    int rv;
    if ((rv = get_str(d, pos[K_POOL], "pool", g->name, sizeof g->name)) ||
        (rv = get_u32(d, pos[K_LAYERS], "layers", 1, &g->layers)) ||
        (rv = get_u32(d, pos[K_NUM_PAGES], "num_pages", 1, &g->num_pages)) ||
        (rv = get_u32(d, pos[K_PAGE_SIZE], "page_size", 1, &g->page_size)) ||
        (rv = get_u32(d, pos[K_NUM_KV_HEADS], "num_kv_heads", 1, &g->num_kv_heads)) ||
        (rv = get_u32(d, pos[K_HEAD_DIM_QK], "head_dim_qk", 1, &g->head_dim_qk)) ||
        (rv = get_u32(d, pos[K_HEAD_DIM_VO], "head_dim_vo", 1, &g->head_dim_vo)) ||
        (rv = get_attn_dtype(d, pos[K_KV_DTYPE], "kv_dtype", &g->kv_dtype)))
        return rv;
    if ((rv = get_attn_layout(d, pos[K_LAYOUT], "layout", &g->layout)) != 0)
        return pos[K_LAYOUT] == ABSENT ? missing(d, "layout") : rv;
    *has_device = pos[K_DEVICE] != ABSENT;
    if (!*has_device)
        return 0;
    if ((rv = get_str(d, pos[K_DEVICE], "device", g->device, sizeof g->device)) != 0)
        return rv;
    /* "cpu" or "cuda:N" with N a decimal ordinal */
    if (strcmp(g->device, "cpu") == 0)
        return 0;
    const char *p = g->device + 5;
    if (strncmp(g->device, "cuda:", 5) == 0 && *p != '\0' && strspn(p, "0123456789") == strlen(p))
        return 0;
    return attn_error_set(d->err, ATTN_E_RANGE, "device",
                          "device \"%s\" is neither \"cpu\" nor \"cuda:N\"", g->device);
}

enum { RQ_ID, RQ_CACHE_LEN, RQ_NEW_LEN, RQ_COUNT };
static const char *const g_req_keys[RQ_COUNT] = {"id", "cache_len", "new_len"};

/* "requests[b]" or "requests[b].name" into buf (>= 48 bytes), without
 * printf: this runs for every request of every plan. */
static const char *req_field(char *buf, uint32_t b, const char *name)
{
    char digits[12];
    int n = 0;
    do {
        digits[n++] = (char)('0' + b % 10);
        b /= 10;
    } while (b != 0);
    char *p = buf;
    memcpy(p, "requests[", 9);
    p += 9;
    while (n > 0)
        *p++ = digits[--n];
    *p++ = ']';
    if (name != NULL) {
        size_t len = strlen(name);
        *p++ = '.';
        memcpy(p, name, len);
        p += len;
    }
    *p = '\0';
    return buf;
}

/* One requests[b] map, read in a single pass: this runs B times per plan,
 * so there is no index and no field path unless something is wrong.
 * Errors are reported in the entry's wire order, missing keys after. */
static int decode_one_request(dec *d, uint32_t b, attn_request_desc *q)
{
    attn_wire_item map, key, val;
    char f[64];
    bool seen[RQ_COUNT] = {false, false, false};
    int rv;
    if ((rv = attn_wire_next(&d->r, &map)) != 0)
        return wire_fail(d, rv, req_field(f, b, NULL));
    if (map.type != ATTN_WT_MAP)
        return type_fail(d, req_field(f, b, NULL), "a map", map.type);
    if (map.len > d->lim.max_map_keys)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, req_field(f, b, NULL), "%s has %u keys", f,
                              map.len);
    for (uint32_t e = 0; e < map.len; e++) {
        if ((rv = attn_wire_next(&d->r, &key)) != 0)
            return wire_fail(d, rv, req_field(f, b, NULL));
        if (key.type != ATTN_WT_STR)
            return attn_error_set(d->err, ATTN_E_TYPE, req_field(f, b, NULL),
                                  "keys of %s must be strings", f);
        int k = 0;
        while (k < RQ_COUNT && !attn_wire_str_eq(&key, g_req_keys[k]))
            k++;
        if (k == RQ_COUNT) {
            char path[32];
            snprintf(f, sizeof f, "%s.%.*s", req_field(path, b, NULL),
                     (int)(key.len > 24 ? 24 : key.len), (const char *)key.ptr);
            return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY, f, "key %s is not part of a request",
                                  f);
        }
#define F() req_field(f, b, g_req_keys[k])
        if (seen[k])
            return attn_error_set(d->err, ATTN_E_PROTOCOL, F(), "key %s appears twice", f);
        seen[k] = true;
        if ((rv = attn_wire_next(&d->r, &val)) != 0)
            return wire_fail(d, rv, F());
        if (k == RQ_ID) {
            if (val.type == ATTN_WT_UINT) {
                snprintf(q->id, sizeof q->id, "%llu", (unsigned long long)val.u);
            } else if (val.type == ATTN_WT_STR) {
                if (val.len == 0 || val.len >= sizeof q->id ||
                    memchr(val.ptr, 0, val.len) != NULL || !attn_utf8_valid(val.ptr, val.len))
                    return attn_error_set(d->err, ATTN_E_RANGE, F(),
                                          "%s must have 1 to %zu bytes of UTF-8 and no NUL", f,
                                          sizeof q->id - 1);
                memcpy(q->id, val.ptr, val.len);
                q->id[val.len] = '\0';
            } else {
                return type_fail(d, F(), "an unsigned integer or a string", val.type);
            }
            continue;
        }
        if (val.type == ATTN_WT_INT || (val.type == ATTN_WT_UINT && val.u > INT32_MAX))
            return attn_error_set(d->err, ATTN_E_RANGE, F(), "%s must be in [0, %d]", f, INT32_MAX);
        if (val.type != ATTN_WT_UINT)
            return type_fail(d, F(), "an unsigned integer", val.type);
        if (k == RQ_CACHE_LEN)
            q->cache_len = (int64_t)val.u;
        else
            q->new_len = (int64_t)val.u;
#undef F
    }
    for (int k = 0; k < RQ_COUNT; k++)
        if (!seen[k])
            return missing(d, req_field(f, b, g_req_keys[k]));
    return 0;
}

static int decode_requests(dec *d, size_t pos, attn_manifest *m)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_required(d, pos, "requests", &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_ARRAY)
        return type_fail(d, "requests", "an array of maps", it.type);
    if (it.len > d->lim.max_requests)
        return attn_error_set(d->err, ATTN_E_TOO_LARGE, "requests",
                              "requests has %u entries (limit %u)", it.len, d->lim.max_requests);
    m->num_requests = it.len;
    m->requests = calloc(it.len ? it.len : 1, sizeof *m->requests);
    if (m->requests == NULL)
        return attn_error_set(d->err, ATTN_E_NOMEM, "requests", "no memory for requests");
    for (uint32_t b = 0; b < it.len; b++)
        if ((rv = decode_one_request(d, b, &m->requests[b])) != 0)
            return rv;
    return 0;
}

/* An int32 array whose length must be `want` (`code` otherwise). */
static int get_i32s_len(dec *d, size_t pos, const char *field, uint64_t want, int code,
                        int32_t **out)
{
    uint32_t n;
    int rv = get_i32s(d, pos, field, out, &n);
    if (rv != 0)
        return rv;
    if (n != want) {
        free(*out);
        *out = NULL;
        return attn_error_set(d->err, code, field, "%s has %u entries, expected %llu", field, n,
                              (unsigned long long)want);
    }
    return 0;
}

/* block_table: B arrays of max_blocks int32, or one flat int32 array or
 * bin of B * max_blocks entries, row-major. */
static int get_block_table(dec *d, size_t pos, uint32_t nb, attn_kv_table *kv)
{
    attn_wire_item it;
    int rv;
    const char *field = "kv.block_table";
    if ((rv = item_required(d, pos, field, &it)) != 0)
        return rv;
    if (it.type == ATTN_WT_ARRAY && it.len > 0) {
        attn_wire_item row;
        if ((rv = attn_wire_next(&d->r, &row)) != 0)
            return wire_fail(d, rv, field);
        if (row.type == ATTN_WT_ARRAY) {
            /* nested form: read row by row */
            if (it.len != nb)
                return attn_error_set(d->err, ATTN_E_SHAPE, field, "%s has %u rows, expected %u",
                                      field, it.len, nb);
            uint32_t mb = row.len;
            if (nb != 0 && mb > d->lim.max_array / nb)
                return attn_error_set(d->err, ATTN_E_TOO_LARGE, field, "%s is too large", field);
            int32_t *t = malloc((size_t)nb * mb * sizeof *t + 4);
            if (t == NULL)
                return attn_error_set(d->err, ATTN_E_NOMEM, field, "no memory for %s", field);
            d->r.pos = pos;
            attn_wire_next(&d->r, &it);
            for (uint32_t b = 0; b < nb; b++) {
                char f[64];
                snprintf(f, sizeof f, "%s[%u]", field, b);
                if ((rv = attn_wire_next(&d->r, &row)) != 0 || row.type != ATTN_WT_ARRAY ||
                    row.len != mb) {
                    free(t);
                    if (rv != 0)
                        return wire_fail(d, rv, f);
                    return row.type != ATTN_WT_ARRAY
                               ? type_fail(d, f, "an array", row.type)
                               : attn_error_set(d->err, ATTN_E_SHAPE, f,
                                                "%s has %u entries but row 0 has %u", f, row.len,
                                                mb);
                }
                for (uint32_t j = 0; j < mb; j++) {
                    attn_wire_item e;
                    if ((rv = attn_wire_next(&d->r, &e)) != 0 ||
                        (e.type != ATTN_WT_UINT && e.type != ATTN_WT_INT) || e.i < INT32_MIN ||
                        e.i > INT32_MAX) {
                        free(t);
                        snprintf(f, sizeof f, "%s[%u][%u]", field, b, j);
                        if (rv != 0)
                            return wire_fail(d, rv, f);
                        return e.type != ATTN_WT_UINT && e.type != ATTN_WT_INT
                                   ? type_fail(d, f, "an integer", e.type)
                                   : attn_error_set(d->err, ATTN_E_RANGE, f,
                                                    "%s does not fit int32", f);
                    }
                    t[(size_t)b * mb + j] = (int32_t)e.i;
                }
            }
            kv->block_table = t;
            kv->max_blocks = mb;
            return 0;
        }
    }
    uint32_t n;
    if ((rv = get_i32s(d, pos, field, &kv->block_table, &n)) != 0)
        return rv;
    if (nb == 0 ? n != 0 : n % nb != 0) {
        free(kv->block_table);
        kv->block_table = NULL;
        return attn_error_set(d->err, ATTN_E_SHAPE, field,
                              "%s has %u entries, not a multiple of B = %u", field, n, nb);
    }
    kv->max_blocks = nb ? n / nb : 0;
    return 0;
}

enum {
    KV_FORMAT,
    KV_PAGE_INDPTR,
    KV_PAGE_INDICES,
    KV_LAST_PAGE_LEN,
    KV_BLOCK_TABLE,
    KV_LENS,
    KV_COUNT
};
static const char *const g_kv_keys[KV_COUNT] = {"format",        "page_indptr", "page_indices",
                                                "last_page_len", "block_table", "lens"};

/* The keys a page-table format allows besides "format" (no default: a new
 * format must say which keys it takes). */
static uint32_t kv_keys_allowed(attn_kv_format f)
{
    switch (f) {
    case ATTN_KV_CSR:
        return (1u << KV_PAGE_INDPTR) | (1u << KV_PAGE_INDICES) | (1u << KV_LAST_PAGE_LEN);
    case ATTN_KV_DENSE:
        return (1u << KV_BLOCK_TABLE) | (1u << KV_LENS);
    }
    return 0;
}

static int decode_kv(dec *d, size_t pos, uint32_t nb, attn_kv_table *kv)
{
    size_t idx[KV_COUNT];
    int rv;
    if (pos == ABSENT)
        return missing(d, "kv");
    if ((rv = open_map(d, pos, 2, "kv", g_kv_keys, KV_COUNT, idx, true)) != 0)
        return rv;
    if (idx[KV_FORMAT] == ABSENT)
        return missing(d, "kv.format");
    if ((rv = get_attn_kv_format(d, idx[KV_FORMAT], "kv.format", &kv->format)) != 0)
        return rv;
    /* keys of the other format are not silently ignored */
    for (int j = 0; j < KV_COUNT; j++)
        if (idx[j] != ABSENT && j != KV_FORMAT && !(kv_keys_allowed(kv->format) & (1u << j))) {
            char f[48];
            snprintf(f, sizeof f, "kv.%s", g_kv_keys[j]);
            return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY, f, "%s is not part of a %s table", f,
                                  attn_kv_format_name(kv->format));
        }
    if (kv->format == ATTN_KV_CSR) {
        if ((rv = get_i32s_len(d, idx[KV_PAGE_INDPTR], "kv.page_indptr", (uint64_t)nb + 1,
                               ATTN_E_INDPTR, &kv->page_indptr)) ||
            (rv = get_i32s(d, idx[KV_PAGE_INDICES], "kv.page_indices", &kv->page_indices,
                           &kv->num_page_indices)) ||
            (rv = get_i32s_len(d, idx[KV_LAST_PAGE_LEN], "kv.last_page_len", nb, ATTN_E_SHAPE,
                               &kv->last_page_len)))
            return rv;
        return 0;
    }
    if ((rv = get_block_table(d, idx[KV_BLOCK_TABLE], nb, kv)) != 0)
        return rv;
    return get_i32s_len(d, idx[KV_LENS], "kv.lens", nb, ATTN_E_SHAPE, &kv->lens);
}

enum {
    MK_KIND,
    MK_LEFT,
    MK_SINKS,
    MK_CAUSAL,
    MK_LTS,
    MK_LTE,
    MK_UTS,
    MK_UTE,
    MK_POLARITY,
    MK_BITS,
    MK_COUNT
};
static const char *const g_mask_keys[MK_COUNT] = {"kind", "left", "sinks", "causal",   "lts",
                                                  "lte",  "uts",  "ute",   "polarity", "bits"};

/* The keys a mask kind allows besides "kind" (no default: a new kind must
 * say which keys it takes). */
static uint32_t mask_keys_allowed(attn_mask_kind kind)
{
    switch (kind) {
    case ATTN_MASK_CAUSAL:
    case ATTN_MASK_NONE:
        return 0;
    case ATTN_MASK_WINDOW:
        return 1u << MK_LEFT;
    case ATTN_MASK_SINK:
        return (1u << MK_LEFT) | (1u << MK_SINKS);
    case ATTN_MASK_FLASHMASK:
        return (1u << MK_CAUSAL) | (1u << MK_LTS) | (1u << MK_LTE) | (1u << MK_UTS) |
               (1u << MK_UTE);
    case ATTN_MASK_DENSE:
        return (1u << MK_POLARITY) | (1u << MK_BITS);
    }
    return 0;
}

static int decode_mask(dec *d, size_t pos, attn_mask *mk)
{
    size_t idx[MK_COUNT];
    int rv;
    uint64_t v;
    memset(mk, 0, sizeof *mk);
    mk->kind = ATTN_MASK_CAUSAL; /* PROTOCOL.md: the default */
    if (pos == ABSENT)
        return 0;
    if ((rv = open_map(d, pos, 2, "mask", g_mask_keys, MK_COUNT, idx, true)) != 0)
        return rv;
    if (idx[MK_KIND] == ABSENT)
        return missing(d, "mask.kind");
    if ((rv = get_attn_mask_kind(d, idx[MK_KIND], "mask.kind", &mk->kind)) != 0)
        return rv;
    for (int j = 1; j < MK_COUNT; j++)
        if (idx[j] != ABSENT && !(mask_keys_allowed(mk->kind) & (1u << j))) {
            char f[32];
            snprintf(f, sizeof f, "mask.%s", g_mask_keys[j]);
            return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY, f, "%s is not part of a %s mask", f,
                                  attn_mask_kind_name(mk->kind));
        }
    switch (mk->kind) {
    case ATTN_MASK_SINK:
        if ((rv = get_uint(d, idx[MK_SINKS], "mask.sinks", 0, INT32_MAX, &v)) != 0)
            return rv;
        mk->sinks = (int32_t)v;
        /* a sink mask also has a window */
        /* fall through */
    case ATTN_MASK_WINDOW:
        if ((rv = get_uint(d, idx[MK_LEFT], "mask.left", 0, INT32_MAX, &v)) != 0)
            return rv;
        mk->left = (int32_t)v;
        return 0;
    case ATTN_MASK_FLASHMASK: {
        /* seed 0x06A: four endpoint vectors, one entry per key column;
         * upper-triangle vectors are optional (absent = no masked run). */
        int32_t **vec[4] = {&mk->fm_lts, &mk->fm_lte, &mk->fm_uts, &mk->fm_ute};
        uint32_t n[4] = {0, 0, 0, 0};
        if ((rv = get_bool(d, idx[MK_CAUSAL], "mask.causal", false, &mk->fm_causal)) != 0)
            return rv;
        for (int j = 0; j < 4; j++) {
            char f[16];
            snprintf(f, sizeof f, "mask.%s", g_mask_keys[MK_LTS + j]);
            if (j >= 2 && idx[MK_LTS + j] == ABSENT) {
                *vec[j] = calloc(n[0] ? n[0] : 1, sizeof(int32_t));
                if (*vec[j] == NULL)
                    return attn_error_set(d->err, ATTN_E_NOMEM, f, "no memory for %s", f);
                n[j] = n[0];
            } else if ((rv = get_i32s(d, idx[MK_LTS + j], f, vec[j], &n[j])) != 0) {
                return rv;
            }
            if (n[j] != n[0])
                return attn_error_set(d->err, ATTN_E_MASK_INTERVAL, f,
                                      "%s has %u entries but mask.lts has %u", f, n[j], n[0]);
        }
        mk->fm_len = n[0];
        return 0;
    }
    case ATTN_MASK_DENSE:
        /* seed 0x05B: polarity is bound before the kernel, never guessed */
        if (idx[MK_POLARITY] == ABSENT)
            return attn_error_set(d->err, ATTN_E_MASK_POLARITY, "mask.polarity",
                                  "a dense mask needs an explicit polarity");
        if ((rv = get_attn_mask_polarity(d, idx[MK_POLARITY], "mask.polarity", &mk->polarity)) != 0)
            return rv;
        return get_u8s(d, idx[MK_BITS], "mask.bits", &mk->dense_bits, &mk->dense_bytes);
    case ATTN_MASK_CAUSAL:
    case ATTN_MASK_NONE:
        return 0;
    }
    return 0;
}

enum {
    PO_BACKEND,
    PO_SCHEDULE,
    PO_SPLITS,
    PO_SPLIT_POLICY,
    PO_STATE_ABI,
    PO_DETERMINISTIC,
    PO_GRAPH,
    PO_COUNT
};
static const char *const g_policy_keys[PO_COUNT] = {
    "backend", "schedule", "splits", "split_policy", "state_abi", "deterministic", "graph"};

static int decode_policy(dec *d, size_t pos, attn_policy *p)
{
    size_t idx[PO_COUNT];
    int rv;
    memset(p, 0, sizeof *p);
    snprintf(p->backend, sizeof p->backend, "auto");
    if (pos == ABSENT)
        return 0;
    if ((rv = open_map(d, pos, 2, "policy", g_policy_keys, PO_COUNT, idx, true)) != 0)
        return rv;
    if (idx[PO_BACKEND] != ABSENT &&
        (rv = get_str(d, idx[PO_BACKEND], "policy.backend", p->backend, sizeof p->backend)) != 0)
        return rv == ATTN_E_RANGE ? attn_error_set(d->err, ATTN_E_POLICY, "policy.backend",
                                                   "policy.backend must name a backend")
                                  : rv;
    if (idx[PO_SCHEDULE] != ABSENT) {
        if ((rv = get_attn_schedule_policy(d, idx[PO_SCHEDULE], "policy.schedule", &p->schedule)) !=
            0)
            return rv;
    }
    if (idx[PO_SPLIT_POLICY] != ABSENT) {
        if ((rv = get_attn_split_policy(d, idx[PO_SPLIT_POLICY], "policy.split_policy",
                                        &p->split_policy)) != 0)
            return rv;
    }
    if (idx[PO_SPLITS] != ABSENT) {
        attn_wire_item it;
        uint64_t v;
        if ((rv = item_at(d, idx[PO_SPLITS], "policy.splits", &it)) != 0)
            return rv;
        if (it.type == ATTN_WT_STR) {
            if (!attn_wire_str_eq(&it, "auto"))
                return attn_error_set(d->err, ATTN_E_POLICY, "policy.splits",
                                      "policy.splits must be \"auto\" or a count >= 1");
        } else {
            if ((rv = get_uint(d, idx[PO_SPLITS], "policy.splits", 1, 65535, &v)) != 0)
                return rv == ATTN_E_RANGE ? attn_error_set(d->err, ATTN_E_POLICY, "policy.splits",
                                                           "policy.splits must be in [1, 65535]")
                                          : rv;
            p->splits = (uint32_t)v;
            /* a count is a fixed split policy unless one was named */
            if (idx[PO_SPLIT_POLICY] == ABSENT)
                p->split_policy = ATTN_SPLIT_FIXED;
        }
    }
    if (p->split_policy == ATTN_SPLIT_FIXED && p->splits == 0)
        return attn_error_set(d->err, ATTN_E_POLICY, "policy.splits",
                              "split_policy \"fixed\" needs a split count");
    if (idx[PO_STATE_ABI] != ABSENT) {
        if ((rv = get_attn_state_abi(d, idx[PO_STATE_ABI], "policy.state_abi", &p->state_abi)) != 0)
            return rv;
    }
    if ((rv = get_bool(d, idx[PO_DETERMINISTIC], "policy.deterministic", false,
                       &p->deterministic)) != 0)
        return rv;
    return get_bool(d, idx[PO_GRAPH], "policy.graph", false, &p->graph);
}

static int decode_manifest(dec *d, const size_t *pos, attn_manifest *m)
{
    int rv;
    if ((rv = get_str(d, pos[K_POOL], "pool", m->pool, sizeof m->pool)) ||
        (rv = get_u32(d, pos[K_NUM_QO_HEADS], "num_qo_heads", 1, &m->num_qo_heads)) ||
        (rv = decode_requests(d, pos[K_REQUESTS], m)) ||
        (rv = get_i32s_len(d, pos[K_QO_INDPTR], "qo_indptr", (uint64_t)m->num_requests + 1,
                           ATTN_E_QO_INDPTR, &m->qo_indptr)) ||
        (rv = decode_kv(d, pos[K_KV], m->num_requests, &m->kv)) ||
        (rv = decode_mask(d, pos[K_MASK], &m->mask)) ||
        (rv = get_attn_dtype(d, pos[K_Q_DTYPE], "q_dtype", &m->q_dtype)) ||
        (rv = decode_policy(d, pos[K_POLICY], &m->policy)))
        return rv;
    m->has_sm_scale = pos[K_SM_SCALE] != ABSENT;
    if (m->has_sm_scale) {
        attn_wire_item it;
        if ((rv = item_at(d, pos[K_SM_SCALE], "sm_scale", &it)) != 0)
            return rv;
        double s = it.type == ATTN_WT_FLOAT  ? it.f
                   : it.type == ATTN_WT_UINT ? (double)it.u
                   : it.type == ATTN_WT_INT  ? (double)it.i
                                             : NAN;
        if (it.type != ATTN_WT_FLOAT && it.type != ATTN_WT_UINT && it.type != ATTN_WT_INT)
            return type_fail(d, "sm_scale", "a number", it.type);
        if (!(s > 0) || !isfinite(s) || !isfinite((float)s))
            return attn_error_set(d->err, ATTN_E_RANGE, "sm_scale",
                                  "sm_scale must be finite and > 0, not %g", s);
        m->sm_scale = (float)s;
    }
    return 0;
}

enum { TR_BUF, TR_OFFSET, TR_BYTES, TR_COUNT };
static const char *const g_ref_keys[TR_COUNT] = {"buf", "offset", "bytes"};

/* A tensor reference map {"buf", "offset", "bytes"} at `pos`, all three
 * required; buf 0 is never an id. */
static int get_ref(dec *d, size_t pos, const char *field, attn_tensor_ref *ref)
{
    size_t idx[TR_COUNT];
    char f[3][48];
    int rv;
    for (int k = 0; k < TR_COUNT; k++)
        snprintf(f[k], sizeof f[k], "%s.%s", field, g_ref_keys[k]);
    if ((rv = open_map(d, pos, 2, field, g_ref_keys, TR_COUNT, idx, true)) ||
        (rv = get_uint(d, idx[TR_BUF], f[TR_BUF], 1, UINT64_MAX, &ref->buf)) ||
        (rv = get_uint(d, idx[TR_OFFSET], f[TR_OFFSET], 0, UINT64_MAX, &ref->offset)))
        return rv;
    return get_uint(d, idx[TR_BYTES], f[TR_BYTES], 0, UINT64_MAX, &ref->bytes);
}

/* A run input: an inline bin, or a reference map into a registered buffer. */
static int get_tensor_or_ref(dec *d, size_t pos, const char *field, attn_bytes *t,
                             attn_tensor_ref *ref)
{
    attn_wire_item it;
    int rv;
    memset(ref, 0, sizeof *ref);
    if (pos != ABSENT) {
        if ((rv = item_at(d, pos, field, &it)) != 0)
            return rv;
        if (it.type == ATTN_WT_MAP) {
            t->data = NULL;
            t->len = 0;
            return get_ref(d, pos, field, ref);
        }
    }
    return get_tensor(d, pos, field, true, t);
}

/* A run output reference (optional; an inline output in a request has no meaning). */
static int get_out_ref(dec *d, size_t pos, const char *field, attn_tensor_ref *ref)
{
    attn_wire_item it;
    int rv;
    memset(ref, 0, sizeof *ref);
    if (pos == ABSENT)
        return 0;
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_MAP)
        return type_fail(d, field, "a buffer reference {buf, offset, bytes}", it.type);
    return get_ref(d, pos, field, ref);
}

enum { SR_BUF, SR_OFFSET, SR_VALUE, SR_COUNT };
static const char *const g_sem_keys[SR_COUNT] = {"buf", "offset", "value"};

/* An optional semaphore {"buf", "offset", "value"} (all three required when
 * given); the offset's alignment is checked against the buffer later. */
static int get_sem(dec *d, size_t pos, const char *field, attn_sem_ref *s)
{
    size_t idx[SR_COUNT];
    char f[SR_COUNT][48];
    int rv;
    memset(s, 0, sizeof *s);
    if (pos == ABSENT)
        return 0;
    for (int k = 0; k < SR_COUNT; k++)
        snprintf(f[k], sizeof f[k], "%s.%s", field, g_sem_keys[k]);
    if ((rv = open_map(d, pos, 2, field, g_sem_keys, SR_COUNT, idx, true)) ||
        (rv = get_uint(d, idx[SR_BUF], f[SR_BUF], 1, UINT64_MAX, &s->buf)) ||
        (rv = get_uint(d, idx[SR_OFFSET], f[SR_OFFSET], 0, UINT64_MAX, &s->offset)))
        return rv;
    return get_uint(d, idx[SR_VALUE], f[SR_VALUE], 0, UINT64_MAX, &s->value);
}

static int decode_run(dec *d, const size_t *pos, attn_op op, attn_run_args *a)
{
    int rv;
    if (op == ATTN_OP_RUN) {
        if ((rv = get_uint(d, pos[K_PLAN_ID], "plan_id", 0, UINT64_MAX, &a->plan_id)) != 0)
            return rv;
        a->has_q_dtype = pos[K_Q_DTYPE] != ABSENT;
        if (a->has_q_dtype && (rv = get_attn_dtype(d, pos[K_Q_DTYPE], "q_dtype", &a->q_dtype)) != 0)
            return rv;
    }
    /* a kv_written run has its new rows in the pool: k_new and v_new may be absent */
    if ((rv = get_bool(d, pos[K_KV_WRITTEN], "kv_written", false, &a->kv_written)) != 0)
        return rv;
    bool rows_optional = a->kv_written;
    if ((rv = get_u32(d, pos[K_LAYER], "layer", 0, &a->layer)) ||
        (rv = get_tensor_or_ref(d, pos[K_Q], "q", &a->q, &a->q_ref)) ||
        (!(rows_optional && pos[K_K_NEW] == ABSENT) &&
         (rv = get_tensor_or_ref(d, pos[K_K_NEW], "k_new", &a->k_new, &a->k_new_ref))) ||
        (!(rows_optional && pos[K_V_NEW] == ABSENT) &&
         (rv = get_tensor_or_ref(d, pos[K_V_NEW], "v_new", &a->v_new, &a->v_new_ref))) ||
        (rv = get_out_ref(d, pos[K_O], "o", &a->o_ref)) ||
        (rv = get_out_ref(d, pos[K_LSE], "lse", &a->lse_ref)) ||
        (rv = get_bool(d, pos[K_RETURN_LSE], "return_lse", false, &a->return_lse)) ||
        (rv = get_bool(d, pos[K_TRACE], "trace", false, &a->trace)) ||
        (rv = get_bool(d, pos[K_VERIFY], "verify", false, &a->verify)) ||
        (rv = get_bool(d, pos[K_ASYNC], "async", false, &a->async)) ||
        (rv = get_sem(d, pos[K_WAIT], "wait", &a->wait)) ||
        (rv = get_sem(d, pos[K_SIGNAL], "signal", &a->sig)) ||
        (pos[K_ORDER] != ABSENT &&
         (rv = get_uint(d, pos[K_ORDER], "order", 1, UINT64_MAX, &a->order))))
        return rv;
    /* LSE written into a buffer is LSE asked for */
    if (a->lse_ref.buf != 0)
        a->return_lse = true;
    return 0;
}

/* True when `name` is a portable shm_open name: "/" then 1..126 of
 * [A-Za-z0-9._-], not starting with "." (so never "/." or "/.."). */
static bool shm_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n < 2 || name[0] != '/' || name[1] == '.')
        return false;
    return strspn(name + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
           n - 1;
}

static int decode_buffer_register(dec *d, const size_t *pos, attn_buffer_args *a)
{
    char kind[24];
    int rv;
    attn_wire_item it;
    if ((rv = get_str(d, pos[K_KIND], "kind", kind, sizeof kind)) != 0)
        return rv == ATTN_E_RANGE ? attn_error_set(d->err, ATTN_E_RANGE, "kind",
                                                   "kind must be \"shm\" or \"cuda_ipc\"")
                                  : rv;
    if ((rv = attn_buffer_kind_parse(kind, "kind", &a->kind, d->err)) != 0 ||
        (rv = get_uint(d, pos[K_BYTES], "bytes", 1, UINT64_MAX, &a->bytes)) != 0)
        return rv;
    switch (a->kind) {
    case ATTN_BUFFER_SHM:
        if (pos[K_HANDLE] != ABSENT || pos[K_DEVICE] != ABSENT || pos[K_OFFSET] != ABSENT)
            return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY,
                                  pos[K_HANDLE] != ABSENT   ? "handle"
                                  : pos[K_DEVICE] != ABSENT ? "device"
                                                            : "offset",
                                  "a shm buffer takes name and bytes only");
        if ((rv = get_str(d, pos[K_NAME], "name", a->name, sizeof a->name)) != 0)
            return rv;
        if (!shm_name_ok(a->name))
            return attn_error_set(d->err, ATTN_E_RANGE, "name",
                                  "name \"%s\" is not \"/\" followed by [A-Za-z0-9._-] "
                                  "(not starting with \".\")",
                                  a->name);
        return 0;
    case ATTN_BUFFER_CUDA_IPC:
        if (pos[K_NAME] != ABSENT)
            return attn_error_set(d->err, ATTN_E_UNKNOWN_KEY, "name",
                                  "a cuda_ipc buffer takes handle, bytes and device, not name");
        if ((rv = item_required(d, pos[K_HANDLE], "handle", &it)) != 0)
            return rv;
        if (it.type != ATTN_WT_BIN)
            return type_fail(d, "handle", "a bin (cudaIpcMemHandle_t)", it.type);
        if (it.len != ATTN_CUDA_IPC_HANDLE_BYTES)
            return attn_error_set(d->err, ATTN_E_RANGE, "handle",
                                  "handle has %u bytes; a cudaIpcMemHandle_t has %d", it.len,
                                  ATTN_CUDA_IPC_HANDLE_BYTES);
        memcpy(a->handle, it.ptr, it.len);
        if (pos[K_OFFSET] != ABSENT &&
            (rv = get_uint(d, pos[K_OFFSET], "offset", 0, UINT64_MAX, &a->offset)) != 0)
            return rv;
        if ((rv = get_str(d, pos[K_DEVICE], "device", a->device, sizeof a->device)) != 0)
            return rv;
        {
            const char *p = a->device + 5;
            if (strncmp(a->device, "cuda:", 5) != 0 || *p == '\0' ||
                strspn(p, "0123456789") != strlen(p))
                return attn_error_set(d->err, ATTN_E_RANGE, "device",
                                      "device \"%s\" is not \"cuda:N\"", a->device);
        }
        return 0;
    }
    return attn_error_set(d->err, ATTN_E_RANGE, "kind", "unknown buffer kind");
}

static const char *const g_tensor_keys[2] = {"k", "v"};

static int decode_kv_args(dec *d, const size_t *pos, attn_op op, attn_kv_args *a)
{
    int rv;
    if ((rv = get_str(d, pos[K_POOL], "pool", a->pool, sizeof a->pool)) ||
        (rv = get_u32(d, pos[K_LAYER], "layer", 0, &a->layer)) ||
        (rv = get_i32s(d, pos[K_PAGES], "pages", &a->pages, &a->num_pages)))
        return rv;
    if (op != ATTN_OP_KV_WRITE)
        return 0;
    a->has_kv_dtype = pos[K_KV_DTYPE] != ABSENT;
    if (a->has_kv_dtype && (rv = get_attn_dtype(d, pos[K_KV_DTYPE], "kv_dtype", &a->kv_dtype)) != 0)
        return rv;
    size_t idx[2];
    if (pos[K_TENSORS] == ABSENT)
        return missing(d, "tensors");
    if ((rv = open_map(d, pos[K_TENSORS], 2, "tensors", g_tensor_keys, 2, idx, true)) ||
        (rv = get_tensor(d, idx[0], "tensors.k", true, &a->k)))
        return rv;
    return get_tensor(d, idx[1], "tensors.v", true, &a->v);
}

/* id, v and op, in that order, so that an error reply can carry the id. */
static int decode_header(dec *d, const size_t *pos, uint32_t *v, attn_op *op, uint64_t *id,
                         bool *has_id)
{
    int rv;
    uint64_t ver;
    char name[24];
    if ((rv = get_uint(d, pos[K_ID], "id", 0, UINT64_MAX, id)) != 0)
        return rv;
    *has_id = true;
    if ((rv = get_uint(d, pos[K_V], "v", 0, UINT64_MAX, &ver)) != 0)
        return rv == ATTN_E_RANGE
                   ? attn_error_set(d->err, ATTN_E_VERSION, "v", "protocol version must be %d",
                                    ATTN_PROTOCOL_VERSION)
                   : rv;
    if (ver != ATTN_PROTOCOL_VERSION)
        return attn_error_set(d->err, ATTN_E_VERSION, "v",
                              "protocol version %llu is not supported (this build speaks %d)",
                              (unsigned long long)ver, ATTN_PROTOCOL_VERSION);
    *v = (uint32_t)ver;
    if ((rv = get_str(d, pos[K_OP], "op", name, sizeof name)) != 0)
        return rv == ATTN_E_RANGE
                   ? attn_error_set(d->err, ATTN_E_UNKNOWN_OP, "op", "op is not a known operation")
                   : rv;
    if (!attn_op_from_name(name, op))
        return attn_error_set(d->err, ATTN_E_UNKNOWN_OP, "op", "op \"%s\" is not a known operation",
                              name);
    return 0;
}

static void dec_init(dec *d, const void *buf, size_t len, const attn_codec_limits *lim,
                     attn_error_detail *err)
{
    attn_wire_init(&d->r, buf, len);
    if (lim != NULL)
        d->lim = *lim;
    else
        attn_codec_limits_default(&d->lim);
    if (d->lim.max_depth < 1)
        d->lim.max_depth = 1;
    d->err = err;
    d->unknown[0] = '\0';
}

/* The top-level map, indexed; `strict` for requests. */
static int decode_top(dec *d, size_t *pos, bool strict)
{
    attn_wire_item top;
    int rv = attn_wire_next(&d->r, &top);
    /* a failure of the frame itself names the field "message" */
    if (rv != 0)
        return wire_fail(d, rv, "message");
    if (top.type != ATTN_WT_MAP)
        return attn_error_set(d->err, ATTN_E_TYPE, "message", "a message must be a map, not %s",
                              type_name(top.type));
    if ((rv = index_map(d, &top, 1, "", g_keys, K_COUNT, pos, strict)) != 0)
        return rv;
    if (attn_wire_remaining(&d->r) != 0)
        return attn_error_set(d->err, ATTN_E_PROTOCOL, "message",
                              "%zu bytes follow the message map", attn_wire_remaining(&d->r));
    return 0;
}

int attn_request_decode(const void *buf, size_t len, const attn_codec_limits *lim,
                        attn_request *req, attn_error_detail *err)
{
    dec d;
    size_t pos[K_COUNT];
    int rv;
    memset(req, 0, sizeof *req);
    dec_init(&d, buf, len, lim, err);
    if ((rv = decode_top(&d, pos, false)) != 0 ||
        (rv = decode_header(&d, pos, &req->v, &req->op, &req->id, &req->has_id)) != 0)
        goto fail;
    if (d.unknown[0]) {
        rv = attn_error_set(err, ATTN_E_UNKNOWN_KEY, d.unknown, "key %s is not part of any request",
                            d.unknown);
        goto fail;
    }
    /* the keys the op does not allow (extensions "x_*" were never indexed) */
    uint64_t allowed = g_req_allowed[req->op] | B(K_V) | B(K_OP) | B(K_ID);
    for (int k = 0; k < K_COUNT; k++)
        if (pos[k] != ABSENT && !(allowed & B(k))) {
            rv = attn_error_set(err, ATTN_E_UNKNOWN_KEY, g_keys[k], "key %s is not part of %s",
                                g_keys[k], attn_op_name(req->op));
            goto fail;
        }
    switch (req->op) {
    case ATTN_OP_POOL_CREATE:
        if ((rv = decode_geometry(&d, pos, &req->geom, &req->has_device)) == 0)
            rv = get_bool(&d, pos[K_EXPORT], "export", false, &req->pool_export);
        break;
    case ATTN_OP_POOL_DROP:
    case ATTN_OP_POOL_INFO:
        rv = get_str(&d, pos[K_POOL], "pool", req->pool, sizeof req->pool);
        break;
    case ATTN_OP_PLAN:
        rv = decode_manifest(&d, pos, &req->manifest);
        break;
    case ATTN_OP_RUN:
        rv = decode_run(&d, pos, req->op, &req->run);
        break;
    case ATTN_OP_ATTEND:
        if ((rv = decode_manifest(&d, pos, &req->manifest)) == 0)
            rv = decode_run(&d, pos, req->op, &req->run);
        break;
    case ATTN_OP_KV_READ:
    case ATTN_OP_KV_WRITE:
        rv = decode_kv_args(&d, pos, req->op, &req->kv);
        break;
    case ATTN_OP_BUFFER_REGISTER:
        rv = decode_buffer_register(&d, pos, &req->buffer);
        break;
    case ATTN_OP_BUFFER_DROP:
        rv = get_uint(&d, pos[K_BUF], "buf", 1, UINT64_MAX, &req->buffer.buf);
        break;
    case ATTN_OP_RUN_STATUS:
        rv = get_uint(&d, pos[K_RUN_SEQ], "run_seq", 1, UINT64_MAX, &req->run_seq);
        break;
    default:
        rv = 0;
        break;
    }
    if (rv == 0)
        return 0;
fail:;
    /* nothing stays owned after a failure; keep what an error reply needs */
    uint64_t id = req->id;
    bool has_id = req->has_id;
    attn_op op = req->op;
    attn_request_free(req);
    memset(req, 0, sizeof *req);
    req->id = id;
    req->has_id = has_id;
    req->op = has_id ? op : ATTN_OP_COUNT;
    return rv;
}

/* ---- reply decoding (the client side; unknown keys are ignored) ---------- */

enum { ER_CODE, ER_FIELD, ER_MESSAGE, ER_COUNT };
static const char *const g_err_keys[ER_COUNT] = {"code", "field", "message"};

static int decode_error(dec *d, size_t pos, attn_error_detail *e)
{
    size_t idx[ER_COUNT];
    int rv;
    char code[48];
    if (pos == ABSENT)
        return missing(d, "error");
    if ((rv = open_map(d, pos, 2, "error", g_err_keys, ER_COUNT, idx, false)) ||
        (rv = get_str(d, idx[ER_CODE], "error.code", code, sizeof code)))
        return rv;
    if (!attn_err_from_name(code, &e->code))
        e->code = ATTN_E_INTERNAL; /* a newer server's code: keep its text */
    e->field[0] = e->message[0] = '\0';
    /* field may be empty (a whole-message error), so read it as raw str */
    attn_wire_item it;
    if (idx[ER_FIELD] != ABSENT && item_at(d, idx[ER_FIELD], "error.field", &it) == 0 &&
        it.type == ATTN_WT_STR)
        snprintf(e->field, sizeof e->field, "%.*s", (int)it.len, (const char *)it.ptr);
    if (idx[ER_MESSAGE] != ABSENT && item_at(d, idx[ER_MESSAGE], "error.message", &it) == 0 &&
        it.type == ATTN_WT_STR)
        snprintf(e->message, sizeof e->message, "%.*s", (int)it.len, (const char *)it.ptr);
    return 0;
}

static int get_text(dec *d, size_t pos, const char *field, char *dst, size_t cap);

/* A number (float or integer) at `pos`; absent leaves *out as it is. */
static int get_number(dec *d, size_t pos, const char *field, double *out)
{
    attn_wire_item it;
    int rv;
    if (pos == ABSENT)
        return 0;
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type == ATTN_WT_FLOAT)
        *out = it.f;
    else if (it.type == ATTN_WT_UINT)
        *out = (double)it.u;
    else if (it.type == ATTN_WT_INT)
        *out = (double)it.i;
    else if (it.type != ATTN_WT_NIL)
        return type_fail(d, field, "a number", it.type);
    return 0;
}

enum { AE_RUN_SEQ, AE_CODE, AE_FIELD, AE_MESSAGE, AE_COUNT };
static const char *const g_async_err_keys[AE_COUNT] = {"run_seq", "code", "field", "message"};

/* "async_error": {"run_seq", "code", "field", "message"}. */
static int decode_async_error(dec *d, size_t pos, attn_reply *rep)
{
    size_t idx[AE_COUNT];
    char code[48];
    int rv;
    if ((rv = open_map(d, pos, 2, "async_error", g_async_err_keys, AE_COUNT, idx, false)) ||
        (rv = get_uint(d, idx[AE_RUN_SEQ], "async_error.run_seq", 1, UINT64_MAX,
                       &rep->async_error_seq)) ||
        (rv = get_str(d, idx[AE_CODE], "async_error.code", code, sizeof code)) ||
        (rv = get_text(d, idx[AE_FIELD], "async_error.field", rep->async_error.field,
                       sizeof rep->async_error.field)) ||
        (rv = get_text(d, idx[AE_MESSAGE], "async_error.message", rep->async_error.message,
                       sizeof rep->async_error.message)))
        return rv;
    if (!attn_err_from_name(code, &rep->async_error.code))
        rep->async_error.code = ATTN_E_INTERNAL;
    rep->has_async_error = true;
    return 0;
}

enum { ST_STATE, ST_ENGINE_US, ST_METHOD, ST_EXEC_US, ST_QUEUED_US, ST_ERROR, ST_COUNT };
static const char *const g_status_keys[ST_COUNT] = {"state",   "engine_us", "timing_method",
                                                    "exec_us", "queued_us", "error"};

/* run_status's "status" map. */
static int decode_status(dec *d, size_t pos, attn_run_status *st)
{
    size_t idx[ST_COUNT];
    char state[24];
    int rv;
    if (pos == ABSENT)
        return missing(d, "status");
    if ((rv = open_map(d, pos, 2, "status", g_status_keys, ST_COUNT, idx, false)) ||
        (rv = get_str(d, idx[ST_STATE], "status.state", state, sizeof state)) ||
        (rv = attn_run_state_parse(state, "status.state", &st->state, d->err)) ||
        (rv = get_number(d, idx[ST_ENGINE_US], "status.engine_us", &st->engine_us)) ||
        (rv = get_text(d, idx[ST_METHOD], "status.timing_method", st->timing_method,
                       sizeof st->timing_method)) ||
        (rv = get_number(d, idx[ST_EXEC_US], "status.exec_us", &st->exec_us)) ||
        (rv = get_number(d, idx[ST_QUEUED_US], "status.queued_us", &st->queued_us)))
        return rv;
    if (idx[ST_ERROR] != ABSENT)
        return decode_error(d, idx[ST_ERROR], &st->error);
    return 0;
}

/* A str into a fixed buffer, truncating (reply side: display only). */
static int get_text(dec *d, size_t pos, const char *field, char *dst, size_t cap)
{
    attn_wire_item it;
    int rv;
    dst[0] = '\0';
    if (pos == ABSENT)
        return 0;
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_STR)
        return type_fail(d, field, "a string", it.type);
    snprintf(dst, cap, "%.*s", (int)it.len, (const char *)it.ptr);
    return 0;
}

/* Open the array or map at `pos` (type `want`); *n is its entry count and
 * the cursor stands on its first entry. */
static int get_container(dec *d, size_t pos, const char *field, attn_wire_type want, uint32_t *n)
{
    attn_wire_item it;
    int rv;
    if ((rv = item_at(d, pos, field, &it)) != 0)
        return rv;
    if (it.type != want)
        return type_fail(d, field, want == ATTN_WT_MAP ? "a map" : "an array", it.type);
    *n = it.len;
    return 0;
}

enum {
    SV_VERSION,
    SV_BUILD_ID,
    SV_ARTIFACT,
    SV_BACKENDS,
    SV_DEVICES,
    SV_IDENTITY,
    SV_MPS,
    SV_GPU_HANDOFF,
    SV_COUNT
};
static const char *const g_server_keys[SV_COUNT] = {
    "version", "build_id", "artifact", "backends", "devices", "identity", "mps", "gpu_handoff"};
enum { BK_NAME, BK_AVAILABLE, BK_REASON, BK_COUNT };
static const char *const g_backend_keys[BK_COUNT] = {"name", "available", "reason"};

static int decode_server(dec *d, size_t pos, attn_server_info *s)
{
    size_t idx[SV_COUNT];
    int rv;
    if (pos == ABSENT)
        return missing(d, "server");
    if ((rv = open_map(d, pos, 2, "server", g_server_keys, SV_COUNT, idx, false)) ||
        (rv = get_text(d, idx[SV_VERSION], "server.version", s->version, sizeof s->version)) ||
        (rv = get_text(d, idx[SV_BUILD_ID], "server.build_id", s->build_id, sizeof s->build_id)) ||
        (rv = get_text(d, idx[SV_ARTIFACT], "server.artifact", s->artifact, sizeof s->artifact)))
        return rv;
    if (idx[SV_IDENTITY] != ABSENT &&
        (rv = get_raw(d, idx[SV_IDENTITY], 2, "server.identity", &s->identity)) != 0)
        return rv;
    if (idx[SV_BACKENDS] != ABSENT) {
        uint32_t n;
        if ((rv = get_container(d, idx[SV_BACKENDS], "server.backends", ATTN_WT_ARRAY, &n)) != 0)
            return rv;
        size_t next = d->r.pos;
        for (uint32_t b = 0; b < n; b++) {
            char path[40];
            size_t bi[BK_COUNT];
            snprintf(path, sizeof path, "server.backends[%u]", b);
            if ((rv = open_map(d, next, 3, path, g_backend_keys, BK_COUNT, bi, false)) != 0)
                return rv;
            next = d->r.pos;
            if (b >= ATTN_HELLO_MAX_BACKENDS)
                continue;
            attn_backend_info *bk = &s->backends[s->num_backends++];
            if ((rv = get_text(d, bi[BK_NAME], path, bk->name, sizeof bk->name)) ||
                (rv = get_bool(d, bi[BK_AVAILABLE], path, false, &bk->available)) ||
                (rv = get_text(d, bi[BK_REASON], path, bk->reason, sizeof bk->reason)))
                return rv;
        }
    }
    if (idx[SV_DEVICES] != ABSENT) {
        uint32_t n;
        if ((rv = get_container(d, idx[SV_DEVICES], "server.devices", ATTN_WT_ARRAY, &n)) != 0)
            return rv;
        for (uint32_t k = 0; k < n; k++) {
            attn_wire_item e;
            if ((rv = attn_wire_next(&d->r, &e)) != 0)
                return wire_fail(d, rv, "server.devices");
            if (e.type != ATTN_WT_STR)
                return type_fail(d, "server.devices", "an array of strings", e.type);
            if (k < ATTN_HELLO_MAX_DEVICES)
                snprintf(s->devices[s->num_devices++], ATTN_NAME_MAX, "%.*s", (int)e.len,
                         (const char *)e.ptr);
        }
    }
    s->mps = -1;
    if (idx[SV_MPS] != ABSENT) {
        attn_wire_item it;
        if ((rv = item_at(d, idx[SV_MPS], "server.mps", &it)) != 0)
            return rv;
        if (it.type == ATTN_WT_BOOL)
            s->mps = it.b ? 1 : 0;
        else if (it.type != ATTN_WT_NIL)
            return type_fail(d, "server.mps", "a bool or nil", it.type);
    }
    return get_text(d, idx[SV_GPU_HANDOFF], "server.gpu_handoff", s->gpu_handoff,
                    sizeof s->gpu_handoff);
}

enum { PC_ENTRIES, PC_CAPACITY, PC_HITS, PC_MISSES, PC_REPLANS, PC_EVICTIONS, PC_COUNT };
static const char *const g_pc_keys[PC_COUNT] = {"entries", "capacity", "hits",
                                                "misses",  "replans",  "evictions"};

static int decode_stats(dec *d, const size_t *pos, attn_stats_info *s)
{
    int rv;
    if (pos[K_COUNTERS] != ABSENT) {
        uint32_t n;
        if ((rv = get_container(d, pos[K_COUNTERS], "counters", ATTN_WT_MAP, &n)) != 0)
            return rv;
        for (uint32_t k = 0; k < n; k++) {
            attn_wire_item key, val;
            if ((rv = attn_wire_next(&d->r, &key)) != 0 || (rv = attn_wire_next(&d->r, &val)) != 0)
                return wire_fail(d, rv, "counters");
            if (key.type != ATTN_WT_STR || val.type != ATTN_WT_UINT)
                return type_fail(d, "counters", "a map of string to unsigned integer",
                                 key.type != ATTN_WT_STR ? key.type : val.type);
            if (s->num_counters < ATTN_STATS_MAX_COUNTERS) {
                snprintf(s->counters[s->num_counters].name, sizeof s->counters[0].name, "%.*s",
                         (int)key.len, (const char *)key.ptr);
                s->counters[s->num_counters++].value = val.u;
            }
        }
    }
    if (pos[K_PLAN_CACHE] != ABSENT) {
        size_t idx[PC_COUNT];
        uint64_t *dst[PC_COUNT] = {&s->plan_cache.entries, &s->plan_cache.capacity,
                                   &s->plan_cache.hits,    &s->plan_cache.misses,
                                   &s->plan_cache.replans, &s->plan_cache.evictions};
        if ((rv = open_map(d, pos[K_PLAN_CACHE], 2, "plan_cache", g_pc_keys, PC_COUNT, idx,
                           false)) != 0)
            return rv;
        for (int k = 0; k < PC_COUNT; k++)
            if (idx[k] != ABSENT &&
                (rv = get_uint(d, idx[k], "plan_cache", 0, UINT64_MAX, dst[k])) != 0)
                return rv;
    }
    if (pos[K_POOLS] != ABSENT) {
        static const char *const pk[2] = {"pool", "bytes"};
        uint32_t n;
        if ((rv = get_container(d, pos[K_POOLS], "pools", ATTN_WT_ARRAY, &n)) != 0)
            return rv;
        size_t next = d->r.pos;
        for (uint32_t k = 0; k < n; k++) {
            size_t idx[2];
            if ((rv = open_map(d, next, 3, "pools", pk, 2, idx, false)) != 0)
                return rv;
            next = d->r.pos;
            if (s->num_pools >= ATTN_STATS_MAX_POOLS)
                continue;
            if ((rv = get_text(d, idx[0], "pools.pool", s->pools[s->num_pools].name,
                               sizeof s->pools[0].name)) ||
                (idx[1] != ABSENT && (rv = get_uint(d, idx[1], "pools.bytes", 0, UINT64_MAX,
                                                    &s->pools[s->num_pools].bytes))))
                return rv;
            s->num_pools++;
        }
    }
    return 0;
}

enum {
    EX_KIND,
    EX_NAME,
    EX_HANDLE,
    EX_OFFSET,
    EX_DEVICE,
    EX_BYTES,
    EX_K_OFFSET,
    EX_V_OFFSET,
    EX_LAYER_STRIDE,
    EX_PAGE_STRIDE_K,
    EX_ROW_STRIDE_K,
    EX_HEAD_STRIDE_K,
    EX_PAGE_STRIDE_V,
    EX_ROW_STRIDE_V,
    EX_HEAD_STRIDE_V,
    EX_KV_DTYPE,
    EX_LAYOUT,
    EX_COUNT
};
static const char *const g_export_keys[EX_COUNT] = {
    "kind",         "name",          "handle",        "offset",       "device",
    "bytes",        "k_offset",      "v_offset",      "layer_stride", "page_stride_k",
    "row_stride_k", "head_stride_k", "page_stride_v", "row_stride_v", "head_stride_v",
    "kv_dtype",     "layout"};

/* The pool_create reply's "export" map (attn_pool_export). */
static int decode_export(dec *d, size_t pos, attn_pool_export *x)
{
    size_t idx[EX_COUNT];
    char kind[24], f[48];
    attn_wire_item it;
    uint64_t *num[] = {&x->bytes,         &x->k_offset,     &x->v_offset,      &x->layer_stride,
                       &x->page_stride_k, &x->row_stride_k, &x->head_stride_k, &x->page_stride_v,
                       &x->row_stride_v,  &x->head_stride_v};
    int rv;
    if ((rv = open_map(d, pos, 2, "export", g_export_keys, EX_COUNT, idx, false)) != 0 ||
        (rv = get_str(d, idx[EX_KIND], "export.kind", kind, sizeof kind)) != 0 ||
        (rv = attn_buffer_kind_parse(kind, "export.kind", &x->kind, d->err)) != 0 ||
        (rv = get_str(d, idx[EX_DEVICE], "export.device", x->device, sizeof x->device)) != 0 ||
        (rv = get_attn_dtype(d, idx[EX_KV_DTYPE], "export.kv_dtype", &x->kv_dtype)) != 0 ||
        (rv = get_attn_layout(d, idx[EX_LAYOUT], "export.layout", &x->layout)) != 0)
        return rv;
    for (int k = 0; k < EX_KV_DTYPE - EX_BYTES; k++) {
        snprintf(f, sizeof f, "export.%s", g_export_keys[EX_BYTES + k]);
        if ((rv = get_uint(d, idx[EX_BYTES + k], f, 0, UINT64_MAX, num[k])) != 0)
            return rv;
    }
    if (x->kind == ATTN_BUFFER_SHM)
        return get_str(d, idx[EX_NAME], "export.name", x->name, sizeof x->name);
    if ((rv = item_required(d, idx[EX_HANDLE], "export.handle", &it)) != 0)
        return rv;
    if (it.type != ATTN_WT_BIN || it.len != ATTN_CUDA_IPC_HANDLE_BYTES)
        return attn_error_set(d->err, ATTN_E_RANGE, "export.handle",
                              "export.handle is not a %d-byte bin", ATTN_CUDA_IPC_HANDLE_BYTES);
    memcpy(x->handle, it.ptr, it.len);
    return get_uint(d, idx[EX_OFFSET], "export.offset", 0, UINT64_MAX, &x->offset);
}

int attn_reply_decode(const void *buf, size_t len, const attn_codec_limits *lim, attn_reply *rep,
                      attn_error_detail *err)
{
    dec d;
    size_t pos[K_COUNT];
    int rv;
    uint64_t ver;
    char name[24];
    memset(rep, 0, sizeof *rep);
    dec_init(&d, buf, len, lim, err);
    if ((rv = decode_top(&d, pos, false)) ||
        (rv = get_uint(&d, pos[K_V], "v", 0, UINT64_MAX, &ver)))
        goto fail;
    if (ver != ATTN_PROTOCOL_VERSION) {
        rv = attn_error_set(err, ATTN_E_VERSION, "v", "reply version %llu is not %d",
                            (unsigned long long)ver, ATTN_PROTOCOL_VERSION);
        goto fail;
    }
    rep->v = (uint32_t)ver;
    if ((rv = get_uint(&d, pos[K_ID], "id", 0, UINT64_MAX, &rep->id)) ||
        (rv = get_bool(&d, pos[K_OK], "ok", false, &rep->ok)))
        goto fail;
    if (pos[K_OK] == ABSENT) {
        rv = missing(&d, "ok");
        goto fail;
    }
    rep->op = ATTN_OP_COUNT;
    if (pos[K_OP] != ABSENT) {
        if ((rv = get_str(&d, pos[K_OP], "op", name, sizeof name)) != 0)
            goto fail;
        if (!attn_op_from_name(name, &rep->op)) {
            rv = attn_error_set(err, ATTN_E_UNKNOWN_OP, "op", "reply op \"%s\" is unknown", name);
            goto fail;
        }
    }
    if (pos[K_ASYNC_ERROR] != ABSENT && (rv = decode_async_error(&d, pos[K_ASYNC_ERROR], rep)) != 0)
        goto fail;
    if (!rep->ok) {
        rv = decode_error(&d, pos[K_ERROR], &rep->error);
        goto done;
    }
    if (pos[K_DIAG] != ABSENT && (rv = get_raw(&d, pos[K_DIAG], 1, "diag", &rep->diag)) != 0)
        goto fail;
    switch (rep->op) {
    case ATTN_OP_HELLO:
        rv = decode_server(&d, pos[K_SERVER], &rep->server);
        break;
    case ATTN_OP_POOL_INFO:
        rv = decode_geometry(&d, pos, &rep->geom, &(bool){false});
        if (rv == 0)
            snprintf(rep->pool, sizeof rep->pool, "%s", rep->geom.name);
        /* bytes follow, as for pool_create */
        /* fall through */
    case ATTN_OP_POOL_CREATE:
        if (rv == 0 && rep->op == ATTN_OP_POOL_CREATE)
            rv = get_str(&d, pos[K_POOL], "pool", rep->pool, sizeof rep->pool);
        if (rv == 0)
            rv = get_uint(&d, pos[K_BYTES], "bytes", 0, UINT64_MAX, &rep->bytes);
        if (rv == 0 && rep->op == ATTN_OP_POOL_CREATE && pos[K_EXPORT] != ABSENT) {
            rep->has_export = true;
            rv = decode_export(&d, pos[K_EXPORT], &rep->exp);
        }
        break;
    case ATTN_OP_PLAN:
    case ATTN_OP_RUN:
    case ATTN_OP_ATTEND:
        if (rep->op != ATTN_OP_RUN &&
            ((rv = get_uint(&d, pos[K_PLAN_ID], "plan_id", 0, UINT64_MAX, &rep->plan_id)) ||
             (rv = get_text(&d, pos[K_PLAN_KEY], "plan_key", rep->plan_key, sizeof rep->plan_key))))
            break;
        if (rep->op == ATTN_OP_PLAN)
            break;
        if ((rv = get_tensor_or_ref(&d, pos[K_O], "o", &rep->o, &rep->o_ref)) ||
            (rv = get_attn_dtype(&d, pos[K_O_DTYPE], "o_dtype", &rep->o_dtype)))
            break;
        rep->has_lse = pos[K_LSE] != ABSENT;
        if (rep->has_lse &&
            (rv = get_tensor_or_ref(&d, pos[K_LSE], "lse", &rep->lse, &rep->lse_ref)) != 0)
            break;
        if (pos[K_RUN_SEQ] != ABSENT)
            rv = get_uint(&d, pos[K_RUN_SEQ], "run_seq", 1, UINT64_MAX, &rep->run_seq);
        break;
    case ATTN_OP_RUN_STATUS:
        if ((rv = get_uint(&d, pos[K_RUN_SEQ], "run_seq", 1, UINT64_MAX, &rep->run_seq)) == 0)
            rv = decode_status(&d, pos[K_STATUS], &rep->status);
        break;
    case ATTN_OP_BUFFER_REGISTER:
        if ((rv = get_uint(&d, pos[K_BUF], "buf", 1, UINT64_MAX, &rep->buf)) == 0 &&
            pos[K_HANDOFF] != ABSENT)
            rv = get_text(&d, pos[K_HANDOFF], "handoff", rep->handoff, sizeof rep->handoff);
        if (rv == 0)
            rv = get_number(&d, pos[K_HANDOFF_US], "handoff_us", &rep->handoff_us);
        break;
    case ATTN_OP_KV_READ: {
        size_t idx[2];
        if ((rv = get_attn_dtype(&d, pos[K_KV_DTYPE], "kv_dtype", &rep->kv_dtype)) ||
            (rv = pos[K_TENSORS] == ABSENT ? missing(&d, "tensors") : 0) ||
            (rv = open_map(&d, pos[K_TENSORS], 2, "tensors", g_tensor_keys, 2, idx, false)) ||
            (rv = get_tensor(&d, idx[0], "tensors.k", true, &rep->k)))
            break;
        rv = get_tensor(&d, idx[1], "tensors.v", true, &rep->v_data);
        break;
    }
    case ATTN_OP_STATS:
        rv = decode_stats(&d, pos, &rep->stats);
        break;
    default:
        rv = 0;
        break;
    }
    if (rv != 0)
        goto fail;
done:
    if (rv == 0)
        return 0;
fail:;
    uint64_t id = rep->id;
    memset(rep, 0, sizeof *rep);
    rep->id = id;
    rep->op = ATTN_OP_COUNT;
    return rv;
}

/* ---- encoding ------------------------------------------------------------ */

/* A packer over an sbuffer whose maps get their count patched at the end,
 * so optional keys need no counting pass (map32 is valid msgpack). */
/* Why an encoding failed, as bits of enc.rc: msgpack-c's calls return -1
 * when an allocation fails, so their results are mapped through enc_ok
 * rather than or-ed in (which set every bit, TOO_LARGE included). */
#define ENC_NOMEM 1
#define ENC_TOO_LARGE 2

typedef struct enc {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int rc; /* ENC_* bits */
    size_t map_at[8];
    uint32_t map_n[8];
    int depth;
    /* attn_run_request_encode_patchable: where the per-submit fields went */
    attn_run_patch *patch;
} enc;

/* Note a msgpack-c result: nonzero is an allocation failure. */
static void enc_ok(enc *e, int rc)
{
    if (rc != 0)
        e->rc |= ENC_NOMEM;
}

static void enc_init(enc *e)
{
    memset(e, 0, sizeof *e);
    msgpack_sbuffer_init(&e->sb);
    msgpack_packer_init(&e->pk, &e->sb, msgpack_sbuffer_write);
}

static void map_begin(enc *e)
{
    static const char hdr[5] = {(char)0xdf, 0, 0, 0, 0};
    e->map_at[e->depth] = e->sb.size;
    e->map_n[e->depth++] = 0;
    enc_ok(e, msgpack_sbuffer_write(&e->sb, hdr, sizeof hdr));
}

static void map_end(enc *e)
{
    int k = --e->depth;
    if (e->rc != 0)
        return;
    uint8_t *p = (uint8_t *)e->sb.data + e->map_at[k] + 1;
    uint32_t n = e->map_n[k];
    p[0] = (uint8_t)(n >> 24);
    p[1] = (uint8_t)(n >> 16);
    p[2] = (uint8_t)(n >> 8);
    p[3] = (uint8_t)n;
}

static void put_str(enc *e, const char *s)
{
    size_t n = strlen(s);
    enc_ok(e, msgpack_pack_str(&e->pk, n));
    enc_ok(e, msgpack_pack_str_body(&e->pk, s, n));
}

static void key(enc *e, const char *k)
{
    e->map_n[e->depth - 1]++;
    put_str(e, k);
}

static void kv_str(enc *e, const char *k, const char *s)
{
    key(e, k);
    put_str(e, s);
}

static void kv_u64(enc *e, const char *k, uint64_t v)
{
    key(e, k);
    enc_ok(e, msgpack_pack_uint64(&e->pk, v));
}

/* kv_u64, but when the encoder records a patch map (at != NULL) the value
 * is the fixed 9-byte uint64 form and *at gets the offset of its 8
 * big-endian bytes, so attn_run_patch_apply can rewrite it in place. */
static void kv_u64_at(enc *e, const char *k, uint64_t v, size_t *at)
{
    if (at == NULL) {
        kv_u64(e, k, v);
        return;
    }
    key(e, k);
    *at = e->sb.size + 1;
    enc_ok(e, msgpack_pack_fix_uint64(&e->pk, v));
}

/* The patch map's slot `field` when the encoder records one, else NULL. */
#define PATCH_AT(e, field) ((e)->patch != NULL ? &(e)->patch->field : NULL)

static void kv_bool(enc *e, const char *k, bool v)
{
    key(e, k);
    enc_ok(e, v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk));
}

static void put_bin(enc *e, const void *p, uint64_t n)
{
    if (n > UINT32_MAX) {
        e->rc |= ENC_TOO_LARGE; /* bin32 cannot say it */
        return;
    }
    enc_ok(e, msgpack_pack_bin(&e->pk, (size_t)n));
    if (n)
        enc_ok(e, msgpack_pack_bin_body(&e->pk, p, (size_t)n));
}

static void kv_bin(enc *e, const char *k, attn_bytes b)
{
    key(e, k);
    put_bin(e, b.data, b.len);
}

/* A tensor reference {"buf", "offset", "bytes"} under key `k`. */
static void kv_ref(enc *e, const char *k, const attn_tensor_ref *r)
{
    key(e, k);
    map_begin(e);
    kv_u64(e, "buf", r->buf);
    kv_u64(e, "offset", r->offset);
    kv_u64(e, "bytes", r->bytes);
    map_end(e);
}

/* A tensor inline, or its reference when r->buf is nonzero. */
static void kv_tensor(enc *e, const char *k, attn_bytes b, const attn_tensor_ref *r)
{
    if (r->buf != 0)
        kv_ref(e, k, r);
    else
        kv_bin(e, k, b);
}

static void kv_i32s(enc *e, const char *k, const int32_t *a, uint64_t n)
{
    key(e, k);
    put_bin(e, a, n * 4);
}

static int enc_finish(enc *e, attn_buf *out, attn_error_detail *err)
{
    if (e->rc != 0) {
        msgpack_sbuffer_destroy(&e->sb);
        out->data = NULL;
        out->len = 0;
        return e->rc & ENC_TOO_LARGE
                   ? attn_error_set(err, ATTN_E_TOO_LARGE, "", "a payload exceeds 4 GiB")
                   : attn_error_set(err, ATTN_E_NOMEM, "", "no memory to encode");
    }
    out->len = e->sb.size;
    out->data = (uint8_t *)msgpack_sbuffer_release(&e->sb);
    return 0;
}

static void enc_geometry(enc *e, const attn_pool_geometry *g, bool with_device)
{
    kv_str(e, "pool", g->name);
    kv_u64(e, "layers", g->layers);
    kv_u64(e, "num_pages", g->num_pages);
    kv_u64(e, "page_size", g->page_size);
    kv_u64(e, "num_kv_heads", g->num_kv_heads);
    kv_u64(e, "head_dim_qk", g->head_dim_qk);
    kv_u64(e, "head_dim_vo", g->head_dim_vo);
    kv_str(e, "kv_dtype", attn_dtype_name(g->kv_dtype));
    kv_str(e, "layout", attn_layout_name(g->layout));
    if (with_device && g->device[0])
        kv_str(e, "device", g->device);
}

static void enc_mask(enc *e, const attn_mask *mk)
{
    key(e, "mask");
    map_begin(e);
    kv_str(e, "kind", attn_mask_kind_name(mk->kind));
    switch (mk->kind) {
    case ATTN_MASK_SINK:
        kv_u64(e, "sinks", (uint64_t)mk->sinks);
        /* fall through */
    case ATTN_MASK_WINDOW:
        kv_u64(e, "left", (uint64_t)mk->left);
        break;
    case ATTN_MASK_FLASHMASK:
        kv_bool(e, "causal", mk->fm_causal);
        kv_i32s(e, "lts", mk->fm_lts, mk->fm_len);
        kv_i32s(e, "lte", mk->fm_lte, mk->fm_len);
        if (mk->fm_uts != NULL)
            kv_i32s(e, "uts", mk->fm_uts, mk->fm_len);
        if (mk->fm_ute != NULL)
            kv_i32s(e, "ute", mk->fm_ute, mk->fm_len);
        break;
    case ATTN_MASK_DENSE:
        if (mk->polarity != ATTN_POLARITY_UNSET)
            kv_str(e, "polarity", attn_mask_polarity_name(mk->polarity));
        key(e, "bits");
        put_bin(e, mk->dense_bits, mk->dense_bytes);
        break;
    case ATTN_MASK_CAUSAL:
    case ATTN_MASK_NONE:
        break;
    }
    map_end(e);
}

static void enc_manifest(enc *e, const attn_manifest *m)
{
    kv_str(e, "pool", m->pool);
    kv_u64(e, "num_qo_heads", m->num_qo_heads);
    key(e, "requests");
    enc_ok(e, msgpack_pack_array(&e->pk, m->num_requests));
    for (uint32_t b = 0; b < m->num_requests; b++) {
        map_begin(e);
        kv_str(e, "id", m->requests[b].id);
        kv_u64(e, "cache_len", (uint64_t)m->requests[b].cache_len);
        kv_u64(e, "new_len", (uint64_t)m->requests[b].new_len);
        map_end(e);
    }
    kv_i32s(e, "qo_indptr", m->qo_indptr, m->qo_indptr ? (uint64_t)m->num_requests + 1 : 0);
    key(e, "kv");
    map_begin(e);
    kv_str(e, "format", attn_kv_format_name(m->kv.format));
    if (m->kv.format == ATTN_KV_CSR) {
        kv_i32s(e, "page_indptr", m->kv.page_indptr,
                m->kv.page_indptr ? (uint64_t)m->num_requests + 1 : 0);
        kv_i32s(e, "page_indices", m->kv.page_indices, m->kv.num_page_indices);
        kv_i32s(e, "last_page_len", m->kv.last_page_len, m->kv.last_page_len ? m->num_requests : 0);
    } else {
        kv_i32s(e, "block_table", m->kv.block_table, (uint64_t)m->num_requests * m->kv.max_blocks);
        kv_i32s(e, "lens", m->kv.lens, m->kv.lens ? m->num_requests : 0);
    }
    map_end(e);
    enc_mask(e, &m->mask);
    if (m->has_sm_scale) {
        key(e, "sm_scale");
        enc_ok(e, msgpack_pack_float(&e->pk, m->sm_scale));
    }
    kv_str(e, "q_dtype", attn_dtype_name(m->q_dtype));
    const attn_policy *p = &m->policy;
    key(e, "policy");
    map_begin(e);
    kv_str(e, "backend", p->backend[0] ? p->backend : "auto");
    kv_str(e, "schedule", attn_schedule_policy_name(p->schedule));
    if (p->splits == 0)
        kv_str(e, "splits", "auto");
    else
        kv_u64(e, "splits", p->splits);
    kv_str(e, "split_policy", attn_split_policy_name(p->split_policy));
    kv_str(e, "state_abi", attn_state_abi_name(p->state_abi));
    kv_bool(e, "deterministic", p->deterministic);
    kv_bool(e, "graph", p->graph);
    map_end(e);
}

/* A semaphore {"buf", "offset", "value"} under key `k` (value_at: kv_u64_at). */
static void kv_sem(enc *e, const char *k, const attn_sem_ref *r, size_t *value_at)
{
    key(e, k);
    map_begin(e);
    kv_u64(e, "buf", r->buf);
    kv_u64(e, "offset", r->offset);
    kv_u64_at(e, "value", r->value, value_at);
    map_end(e);
}

/* The pool_create reply's "export" map (attn_pool_export). */
static void enc_export(enc *e, const attn_pool_export *x)
{
    key(e, "export");
    map_begin(e);
    kv_str(e, "kind", attn_buffer_kind_name(x->kind));
    if (x->kind == ATTN_BUFFER_SHM) {
        kv_str(e, "name", x->name);
    } else {
        key(e, "handle");
        put_bin(e, x->handle, sizeof x->handle);
        kv_u64(e, "offset", x->offset);
    }
    kv_str(e, "device", x->device);
    kv_u64(e, "bytes", x->bytes);
    kv_u64(e, "k_offset", x->k_offset);
    kv_u64(e, "v_offset", x->v_offset);
    kv_u64(e, "layer_stride", x->layer_stride);
    kv_u64(e, "page_stride_k", x->page_stride_k);
    kv_u64(e, "row_stride_k", x->row_stride_k);
    kv_u64(e, "head_stride_k", x->head_stride_k);
    kv_u64(e, "page_stride_v", x->page_stride_v);
    kv_u64(e, "row_stride_v", x->row_stride_v);
    kv_u64(e, "head_stride_v", x->head_stride_v);
    kv_str(e, "kv_dtype", attn_dtype_name(x->kv_dtype));
    kv_str(e, "layout", attn_layout_name(x->layout));
    map_end(e);
}

static void enc_run(enc *e, const attn_run_args *a, attn_op op)
{
    if (op == ATTN_OP_RUN) {
        kv_u64(e, "plan_id", a->plan_id);
        if (a->has_q_dtype)
            kv_str(e, "q_dtype", attn_dtype_name(a->q_dtype));
    }
    kv_u64_at(e, "layer", a->layer, PATCH_AT(e, layer));
    kv_tensor(e, "q", a->q, &a->q_ref);
    /* a kv_written run omits the rows it does not send (one it sends anyway
     * goes out, so attnd can refuse it by name) */
    if (!a->kv_written || a->k_new.data != NULL || a->k_new_ref.buf != 0)
        kv_tensor(e, "k_new", a->k_new, &a->k_new_ref);
    if (!a->kv_written || a->v_new.data != NULL || a->v_new_ref.buf != 0)
        kv_tensor(e, "v_new", a->v_new, &a->v_new_ref);
    if (a->o_ref.buf != 0)
        kv_ref(e, "o", &a->o_ref);
    if (a->lse_ref.buf != 0)
        kv_ref(e, "lse", &a->lse_ref);
    if (a->return_lse)
        kv_bool(e, "return_lse", true);
    if (a->trace)
        kv_bool(e, "trace", true);
    if (a->verify)
        kv_bool(e, "verify", true);
    if (a->async)
        kv_bool(e, "async", true);
    if (a->kv_written)
        kv_bool(e, "kv_written", true);
    if (a->wait.buf != 0)
        kv_sem(e, "wait", &a->wait, PATCH_AT(e, wait_value));
    if (a->sig.buf != 0)
        kv_sem(e, "signal", &a->sig, PATCH_AT(e, signal_value));
    if (a->order != 0)
        kv_u64_at(e, "order", a->order, PATCH_AT(e, order));
}

static void enc_tensors(enc *e, attn_bytes k, attn_bytes v)
{
    key(e, "tensors");
    map_begin(e);
    kv_bin(e, "k", k);
    kv_bin(e, "v", v);
    map_end(e);
}

/* attn_request_encode, recording into `patch` (when not NULL) where the
 * run's per-submit fields went. */
static int request_encode(const attn_request *req, attn_buf *out, attn_run_patch *patch,
                          attn_error_detail *err)
{
    enc e;
    if ((unsigned)req->op >= ATTN_OP_COUNT)
        return attn_error_set(err, ATTN_E_UNKNOWN_OP, "op", "op %d is not a known operation",
                              (int)req->op);
    enc_init(&e);
    e.patch = patch;
    map_begin(&e);
    kv_u64(&e, "v", req->v ? req->v : ATTN_PROTOCOL_VERSION);
    kv_str(&e, "op", attn_op_name(req->op));
    kv_u64_at(&e, "id", req->id, PATCH_AT(&e, id));
    switch (req->op) {
    case ATTN_OP_POOL_CREATE:
        enc_geometry(&e, &req->geom, true);
        if (req->pool_export)
            kv_bool(&e, "export", true);
        break;
    case ATTN_OP_POOL_DROP:
    case ATTN_OP_POOL_INFO:
        kv_str(&e, "pool", req->pool);
        break;
    case ATTN_OP_PLAN:
        enc_manifest(&e, &req->manifest);
        break;
    case ATTN_OP_ATTEND:
        enc_manifest(&e, &req->manifest);
        /* fall through */
    case ATTN_OP_RUN:
        enc_run(&e, &req->run, req->op);
        break;
    case ATTN_OP_KV_READ:
    case ATTN_OP_KV_WRITE:
        kv_str(&e, "pool", req->kv.pool);
        kv_u64(&e, "layer", req->kv.layer);
        kv_i32s(&e, "pages", req->kv.pages, req->kv.num_pages);
        if (req->op == ATTN_OP_KV_WRITE) {
            if (req->kv.has_kv_dtype)
                kv_str(&e, "kv_dtype", attn_dtype_name(req->kv.kv_dtype));
            enc_tensors(&e, req->kv.k, req->kv.v);
        }
        break;
    case ATTN_OP_BUFFER_REGISTER:
        kv_str(&e, "kind", attn_buffer_kind_name(req->buffer.kind));
        kv_u64(&e, "bytes", req->buffer.bytes);
        if (req->buffer.kind == ATTN_BUFFER_SHM) {
            kv_str(&e, "name", req->buffer.name);
        } else {
            key(&e, "handle");
            put_bin(&e, req->buffer.handle, sizeof req->buffer.handle);
            kv_str(&e, "device", req->buffer.device);
            if (req->buffer.offset != 0)
                kv_u64(&e, "offset", req->buffer.offset);
        }
        break;
    case ATTN_OP_BUFFER_DROP:
        kv_u64(&e, "buf", req->buffer.buf);
        break;
    case ATTN_OP_RUN_STATUS:
        kv_u64(&e, "run_seq", req->run_seq);
        break;
    default:
        break;
    }
    map_end(&e);
    return enc_finish(&e, out, err);
}

int attn_request_encode(const attn_request *req, attn_buf *out, attn_error_detail *err)
{
    return request_encode(req, out, NULL, err);
}

int attn_run_request_encode_patchable(const attn_request *req, attn_buf *out, attn_run_patch *patch,
                                      attn_error_detail *err)
{
    memset(patch, 0, sizeof *patch);
    if (req->op != ATTN_OP_RUN)
        return attn_error_set(err, ATTN_E_INVALID, "op",
                              "only a run request can be prepared, not %s", attn_op_name(req->op));
    return request_encode(req, out, patch, err);
}

/* Store v as 8 big-endian bytes at p. */
static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

void attn_run_patch_apply(uint8_t *msg, const attn_run_patch *patch, const attn_run_values *v)
{
    put_be64(msg + patch->id, v->id);
    put_be64(msg + patch->layer, v->layer);
    if (patch->order != 0)
        put_be64(msg + patch->order, v->order);
    if (patch->wait_value != 0)
        put_be64(msg + patch->wait_value, v->wait_value);
    if (patch->signal_value != 0)
        put_be64(msg + patch->signal_value, v->signal_value);
}

static void enc_error(enc *e, const attn_error_detail *d)
{
    kv_bool(e, "ok", false);
    key(e, "error");
    map_begin(e);
    kv_str(e, "code", attn_err_name(d->code));
    kv_str(e, "field", d->field);
    kv_str(e, "message", d->message[0] ? d->message : attn_err_message(d->code));
    map_end(e);
}

static void kv_dbl(enc *e, const char *k, double v)
{
    key(e, k);
    enc_ok(e, msgpack_pack_double(&e->pk, v));
}

static void enc_async_error(enc *e, const attn_reply *rep)
{
    const attn_error_detail *d = &rep->async_error;
    key(e, "async_error");
    map_begin(e);
    kv_u64(e, "run_seq", rep->async_error_seq);
    kv_str(e, "code", attn_err_name(d->code));
    kv_str(e, "field", d->field);
    kv_str(e, "message", d->message[0] ? d->message : attn_err_message(d->code));
    map_end(e);
}

static void enc_status(enc *e, const attn_run_status *st)
{
    key(e, "status");
    map_begin(e);
    kv_str(e, "state", attn_run_state_name(st->state));
    if (st->state == ATTN_RUN_DONE || st->state == ATTN_RUN_FAILED) {
        kv_dbl(e, "engine_us", st->engine_us);
        kv_str(e, "timing_method", st->timing_method);
        kv_dbl(e, "exec_us", st->exec_us);
    }
    if (st->state != ATTN_RUN_QUEUED)
        kv_dbl(e, "queued_us", st->queued_us);
    if (st->state == ATTN_RUN_FAILED) {
        key(e, "error");
        map_begin(e);
        kv_str(e, "code", attn_err_name(st->error.code));
        kv_str(e, "field", st->error.field);
        kv_str(e, "message",
               st->error.message[0] ? st->error.message : attn_err_message(st->error.code));
        map_end(e);
    }
    map_end(e);
}

/* Splice a pre-encoded value (the diag, the server identity) under key `k`,
 * once checked to be exactly one msgpack object (else the reply would be
 * corrupt).  Returns false, splicing nothing, when it is not. */
static bool splice_raw(enc *e, const char *k, const attn_bytes *b)
{
    attn_wire_reader r;
    attn_wire_init(&r, b->data, (size_t)b->len);
    if (attn_wire_skip(&r, 32) != 0 || attn_wire_remaining(&r) != 0)
        return false;
    key(e, k);
    enc_ok(e, msgpack_sbuffer_write(&e->sb, b->data, (size_t)b->len));
    return true;
}

static void enc_server(enc *e, const attn_server_info *s)
{
    key(e, "server");
    map_begin(e);
    kv_str(e, "version", s->version);
    kv_str(e, "build_id", s->build_id);
    kv_str(e, "artifact", s->artifact);
    key(e, "backends");
    uint32_t nb =
        s->num_backends < ATTN_HELLO_MAX_BACKENDS ? s->num_backends : ATTN_HELLO_MAX_BACKENDS;
    enc_ok(e, msgpack_pack_array(&e->pk, nb));
    for (uint32_t b = 0; b < nb; b++) {
        map_begin(e);
        kv_str(e, "name", s->backends[b].name);
        kv_bool(e, "available", s->backends[b].available);
        kv_str(e, "reason", s->backends[b].reason);
        map_end(e);
    }
    key(e, "devices");
    uint32_t nd = s->num_devices < ATTN_HELLO_MAX_DEVICES ? s->num_devices : ATTN_HELLO_MAX_DEVICES;
    enc_ok(e, msgpack_pack_array(&e->pk, nd));
    for (uint32_t k = 0; k < nd; k++)
        put_str(e, s->devices[k]);
    if (s->identity.len > 0 && !splice_raw(e, "identity", &s->identity))
        e->rc |= ENC_NOMEM;
    key(e, "mps");
    enc_ok(e, s->mps < 0 ? msgpack_pack_nil(&e->pk)
              : s->mps   ? msgpack_pack_true(&e->pk)
                         : msgpack_pack_false(&e->pk));
    kv_str(e, "gpu_handoff", s->gpu_handoff);
    map_end(e);
}

static void enc_stats(enc *e, const attn_stats_info *s)
{
    key(e, "counters");
    map_begin(e);
    for (uint32_t k = 0; k < s->num_counters && k < ATTN_STATS_MAX_COUNTERS; k++)
        kv_u64(e, s->counters[k].name, s->counters[k].value);
    map_end(e);
    key(e, "plan_cache");
    map_begin(e);
    kv_u64(e, "entries", s->plan_cache.entries);
    kv_u64(e, "capacity", s->plan_cache.capacity);
    kv_u64(e, "hits", s->plan_cache.hits);
    kv_u64(e, "misses", s->plan_cache.misses);
    kv_u64(e, "replans", s->plan_cache.replans);
    kv_u64(e, "evictions", s->plan_cache.evictions);
    map_end(e);
    key(e, "pools");
    uint32_t np = s->num_pools < ATTN_STATS_MAX_POOLS ? s->num_pools : ATTN_STATS_MAX_POOLS;
    enc_ok(e, msgpack_pack_array(&e->pk, np));
    for (uint32_t k = 0; k < np; k++) {
        map_begin(e);
        kv_str(e, "pool", s->pools[k].name);
        kv_u64(e, "bytes", s->pools[k].bytes);
        map_end(e);
    }
}

int attn_reply_encode(const attn_reply *rep, attn_buf *out, attn_error_detail *err)
{
    enc e;
    enc_init(&e);
    map_begin(&e);
    kv_u64(&e, "v", ATTN_PROTOCOL_VERSION);
    kv_u64(&e, "id", rep->id);
    if ((unsigned)rep->op < ATTN_OP_COUNT)
        kv_str(&e, "op", attn_op_name(rep->op));
    if (rep->has_async_error)
        enc_async_error(&e, rep);
    if (!rep->ok) {
        enc_error(&e, &rep->error);
        map_end(&e);
        return enc_finish(&e, out, err);
    }
    kv_bool(&e, "ok", true);
    switch (rep->op) {
    case ATTN_OP_HELLO:
        enc_server(&e, &rep->server);
        break;
    case ATTN_OP_POOL_CREATE:
        kv_str(&e, "pool", rep->pool);
        kv_u64(&e, "bytes", rep->bytes);
        if (rep->has_export)
            enc_export(&e, &rep->exp);
        break;
    case ATTN_OP_POOL_INFO:
        enc_geometry(&e, &rep->geom, true);
        kv_u64(&e, "bytes", rep->bytes);
        break;
    case ATTN_OP_PLAN:
    case ATTN_OP_ATTEND:
        kv_u64(&e, "plan_id", rep->plan_id);
        kv_str(&e, "plan_key", rep->plan_key);
        if (rep->op == ATTN_OP_PLAN)
            break;
        /* fall through */
    case ATTN_OP_RUN:
        kv_tensor(&e, "o", rep->o, &rep->o_ref);
        kv_str(&e, "o_dtype", attn_dtype_name(rep->o_dtype));
        if (rep->has_lse)
            kv_tensor(&e, "lse", rep->lse, &rep->lse_ref);
        if (rep->run_seq != 0)
            kv_u64(&e, "run_seq", rep->run_seq);
        break;
    case ATTN_OP_RUN_STATUS:
        kv_u64(&e, "run_seq", rep->run_seq);
        enc_status(&e, &rep->status);
        break;
    case ATTN_OP_BUFFER_REGISTER:
        kv_u64(&e, "buf", rep->buf);
        if (rep->handoff[0] != '\0')
            kv_str(&e, "handoff", rep->handoff);
        if (rep->handoff_us > 0)
            kv_dbl(&e, "handoff_us", rep->handoff_us);
        break;
    case ATTN_OP_KV_READ:
        kv_str(&e, "kv_dtype", attn_dtype_name(rep->kv_dtype));
        enc_tensors(&e, rep->k, rep->v_data);
        break;
    case ATTN_OP_STATS:
        enc_stats(&e, &rep->stats);
        break;
    default:
        break;
    }
    if (rep->diag.len > 0 && !splice_raw(&e, "diag", &rep->diag)) {
        msgpack_sbuffer_destroy(&e.sb);
        out->data = NULL;
        out->len = 0;
        return attn_error_set(err, ATTN_E_INTERNAL, "diag",
                              "diag is not exactly one msgpack object");
    }
    map_end(&e);
    return enc_finish(&e, out, err);
}

int attn_error_reply_encode(uint64_t id, attn_op op, const attn_error_detail *d, attn_buf *out)
{
    attn_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = id;
    rep.op = op;
    rep.ok = false;
    rep.error = *d;
    return attn_reply_encode(&rep, out, NULL);
}
