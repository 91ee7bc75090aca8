/* The JSON form: JSON -> msgpack -> the one decoder, and msgpack -> JSON. */
#include <jansson.h>
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"
#include "kernels/common/dtype.h" /* fp16/bf16 rounding: one home for engines and the JSON form */
#include "protocol/json.h"
#include "protocol/wire.h"

/* How a key's `bin` is converted.  Tensor dtypes come from the message. */
typedef enum bin_kind {
    BK_BYTES = 0,
    BK_I32,
    BK_Q,   /* q_dtype */
    BK_O,   /* o_dtype, else q_dtype */
    BK_KV,  /* kv_dtype */
    BK_F32, /* lse */
} bin_kind;

static bin_kind bin_kind_of(const char *key, size_t n)
{
    static const struct {
        const char *key;
        bin_kind kind;
    } table[] = {
        {"q", BK_Q},
        {"o", BK_O},
        {"k_new", BK_KV},
        {"v_new", BK_KV},
        {"k", BK_KV},
        {"v", BK_KV},
        {"lse", BK_F32},
        {"qo_indptr", BK_I32},
        {"page_indptr", BK_I32},
        {"page_indices", BK_I32},
        {"last_page_len", BK_I32},
        {"block_table", BK_I32},
        {"lens", BK_I32},
        {"lts", BK_I32},
        {"lte", BK_I32},
        {"uts", BK_I32},
        {"ute", BK_I32},
        {"pages", BK_I32},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (strlen(table[k].key) == n && memcmp(table[k].key, key, n) == 0)
            return table[k].kind;
    return BK_BYTES;
}

/* The dtypes a message states about its tensors. */
typedef struct dtypes {
    int q, o, kv; /* attn_dtype, or -1 when unknown */
} dtypes;

/* A dtype named by `n` bytes at `s` (not NUL-terminated), or -1; the names
 * are the list's (attn/names.h). */
static int dtype_parse(const char *s, size_t n)
{
    char name[16];
    attn_dtype dt;
    if (n >= sizeof name)
        return -1;
    memcpy(name, s, n);
    name[n] = '\0';
    return attn_dtype_parse(name, "dtype", &dt, NULL) == 0 ? (int)dt : -1;
}

static int dtype_for(const dtypes *dt, bin_kind kind)
{
    switch (kind) {
    case BK_Q:
        return dt->q;
    case BK_O:
        return dt->o >= 0 ? dt->o : dt->q;
    case BK_KV:
        return dt->kv;
    case BK_F32:
        return ATTN_FP32;
    default:
        return -1;
    }
}

/* ---- JSON -> msgpack ----------------------------------------------------- */

typedef struct j2m {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    dtypes dt;
    uint32_t max_depth;
    attn_error_detail *err;
} j2m;

/* One JSON tensor entry as a float: a number or "inf"/"-inf"/"nan". */
static int tensor_number(j2m *c, const json_t *v, const char *field, size_t i, float *out)
{
    if (json_is_number(v)) {
        *out = (float)json_number_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (s != NULL && (strcmp(s, "inf") == 0 || strcmp(s, "-inf") == 0 || strcmp(s, "nan") == 0)) {
        *out = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    char f[192];
    snprintf(f, sizeof f, "%.160s[%zu]", field, i);
    return attn_error_set(c->err, ATTN_E_TYPE, f, "%s must be a number", f);
}

/* Pack a JSON tensor (array, or {dtype, data}) as a `bin` of its dtype. */
static int pack_tensor(j2m *c, const json_t *v, int dtype, const char *field)
{
    if (json_is_object(v)) {
        const char *ds = json_string_value(json_object_get(v, "dtype"));
        const json_t *data = json_object_get(v, "data");
        if (ds == NULL || (dtype = dtype_parse(ds, strlen(ds))) < 0)
            return attn_error_set(c->err, ATTN_E_DTYPE, field,
                                  "%s.dtype must be \"fp32\", \"fp16\" or \"bf16\"", field);
        if (!json_is_array(data))
            return attn_error_set(c->err, ATTN_E_TYPE, field, "%s.data must be an array", field);
        v = data;
    }
    if (dtype < 0)
        return attn_error_set(c->err, ATTN_E_DTYPE, field,
                              "%s needs a dtype: state it in the message or as {dtype, data}",
                              field);
    size_t n = json_array_size(v), es = attn_dtype_size((attn_dtype)dtype);
    uint8_t *buf = malloc(n * es + 1);
    if (buf == NULL)
        return attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory for %s", field);
    for (size_t i = 0; i < n; i++) {
        float f = 0;
        int rv = tensor_number(c, json_array_get(v, i), field, i, &f);
        if (rv != 0) {
            free(buf);
            return rv;
        }
        attn_store_f32(buf, (attn_dtype)dtype, i, f);
    }
    int rc = msgpack_pack_bin(&c->pk, n * es);
    if (n)
        rc |= msgpack_pack_bin_body(&c->pk, buf, n * es);
    free(buf);
    return rc ? attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory") : 0;
}

static int pack_json(j2m *c, const json_t *v, uint32_t depth, const char *field);

static int pack_object(j2m *c, const json_t *obj, uint32_t depth, const char *field)
{
    const char *k;
    json_t *val;
    int rc = msgpack_pack_map(&c->pk, json_object_size(obj));
    if (rc)
        return attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory");
    json_object_foreach((json_t *)obj, k, val)
    {
        char f[160];
        size_t n = strlen(k);
        snprintf(f, sizeof f, "%s%s%s", field, field[0] ? "." : "", k);
        rc = msgpack_pack_str(&c->pk, n) | msgpack_pack_str_body(&c->pk, k, n);
        if (rc)
            return attn_error_set(c->err, ATTN_E_NOMEM, f, "no memory");
        bin_kind kind = bin_kind_of(k, n);
        /* tensors live at the top level, or under "tensors" (k, v) */
        bool at_tensor_level = depth == 1 || strcmp(field, "tensors") == 0;
        int rv;
        /* a run tensor may be a buffer reference {buf, offset, bytes}: a plain map */
        bool is_ref = json_is_object(val) && json_object_get(val, "buf") != NULL;
        if (at_tensor_level && kind >= BK_Q && !is_ref &&
            (json_is_array(val) || json_is_object(val)))
            rv = pack_tensor(c, val, dtype_for(&c->dt, kind), f);
        else
            rv = pack_json(c, val, depth + 1, f);
        if (rv != 0)
            return rv;
    }
    return 0;
}

static int pack_json(j2m *c, const json_t *v, uint32_t depth, const char *field)
{
    int rc = 0;
    if (depth > c->max_depth)
        return attn_error_set(c->err, ATTN_E_DEPTH, field, "%s nests deeper than %u levels",
                              field[0] ? field : "the message", c->max_depth);
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return pack_object(c, v, depth, field);
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        rc = msgpack_pack_array(&c->pk, n);
        for (size_t i = 0; i < n && rc == 0; i++) {
            char f[192];
            snprintf(f, sizeof f, "%s[%zu]", field, i);
            int rv = pack_json(c, json_array_get(v, i), depth + 1, f);
            if (rv != 0)
                return rv;
        }
        break;
    }
    case JSON_STRING: {
        size_t n = json_string_length(v);
        rc = msgpack_pack_str(&c->pk, n) | msgpack_pack_str_body(&c->pk, json_string_value(v), n);
        break;
    }
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        rc = i < 0 ? msgpack_pack_int64(&c->pk, i) : msgpack_pack_uint64(&c->pk, (uint64_t)i);
        break;
    }
    case JSON_REAL:
        rc = msgpack_pack_double(&c->pk, json_real_value(v));
        break;
    case JSON_TRUE:
        rc = msgpack_pack_true(&c->pk);
        break;
    case JSON_FALSE:
        rc = msgpack_pack_false(&c->pk);
        break;
    case JSON_NULL:
        rc = msgpack_pack_nil(&c->pk);
        break;
    }
    return rc ? attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory") : 0;
}

static int dtype_of_key(const json_t *root, const char *key, int hint)
{
    const char *s = json_string_value(json_object_get(root, key));
    int dt = s != NULL ? dtype_parse(s, strlen(s)) : -1;
    return dt >= 0 ? dt : hint;
}

int attn_json_to_msgpack(const char *text, size_t len, const attn_json_hints *hints, attn_buf *out,
                         attn_error_detail *err)
{
    json_error_t jerr;
    out->data = NULL;
    out->len = 0;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return attn_error_set(err, ATTN_E_PROTOCOL, "", "not JSON at line %d column %d: %s",
                              jerr.line, jerr.column, jerr.text);
    j2m c;
    attn_codec_limits lim;
    attn_codec_limits_default(&lim);
    c.max_depth = lim.max_depth;
    c.err = err;
    c.dt.q = dtype_of_key(root, "q_dtype", hints && hints->has_q_dtype ? (int)hints->q_dtype : -1);
    c.dt.o = dtype_of_key(root, "o_dtype", -1);
    c.dt.kv =
        dtype_of_key(root, "kv_dtype", hints && hints->has_kv_dtype ? (int)hints->kv_dtype : -1);
    msgpack_sbuffer_init(&c.sb);
    msgpack_packer_init(&c.pk, &c.sb, msgpack_sbuffer_write);
    int rv = pack_json(&c, root, 1, "");
    json_decref(root);
    if (rv != 0) {
        msgpack_sbuffer_destroy(&c.sb);
        return rv;
    }
    out->len = c.sb.size;
    out->data = (uint8_t *)msgpack_sbuffer_release(&c.sb);
    return 0;
}

int attn_json_request_decode(const char *text, size_t len, const attn_json_hints *hints,
                             attn_request *req, attn_buf *backing, attn_error_detail *err)
{
    int rv = attn_json_to_msgpack(text, len, hints, backing, err);
    if (rv != 0) {
        memset(req, 0, sizeof *req);
        req->op = ATTN_OP_COUNT;
        return rv;
    }
    rv = attn_request_decode(backing->data, backing->len, NULL, req, err);
    if (rv != 0)
        attn_buf_free(backing);
    return rv;
}

int attn_json_reply_decode(const char *text, size_t len, attn_reply *rep, attn_error_detail *err)
{
    attn_buf b;
    int rv = attn_json_to_msgpack(text, len, NULL, &b, err);
    if (rv != 0) {
        memset(rep, 0, sizeof *rep);
        return rv;
    }
    rv = attn_reply_decode(b.data, b.len, NULL, rep, err);
    if (rv != 0) {
        attn_buf_free(&b);
        return rv;
    }
    rep->backing = b.data;
    rep->backing_free = free;
    return 0;
}

/* ---- msgpack -> JSON ----------------------------------------------------- */

typedef struct m2j {
    attn_wire_reader r;
    dtypes dt;
    uint32_t max_depth;
    attn_error_detail *err;
} m2j;

static json_t *json_float(double f)
{
    if (isnan(f))
        return json_string("nan");
    if (isinf(f))
        return json_string(f < 0 ? "-inf" : "inf");
    return json_real(f);
}

static json_t *render_bin(const attn_wire_item *it, bin_kind kind, const dtypes *dt)
{
    json_t *a = json_array();
    int dtype = dtype_for(dt, kind);
    if (a == NULL)
        return NULL;
    if (kind == BK_I32 && it->len % 4 == 0) {
        for (uint32_t i = 0; i < it->len / 4; i++) {
            int32_t x;
            memcpy(&x, it->ptr + 4 * (size_t)i, 4);
            json_array_append_new(a, json_integer(x));
        }
    } else if (dtype >= 0 && it->len % attn_dtype_size((attn_dtype)dtype) == 0) {
        size_t n = it->len / attn_dtype_size((attn_dtype)dtype);
        for (size_t i = 0; i < n; i++) {
            /* copy out: the payload inside a message has no alignment */
            uint32_t raw = 0;
            memcpy(&raw, it->ptr + i * attn_dtype_size((attn_dtype)dtype),
                   attn_dtype_size((attn_dtype)dtype));
            json_array_append_new(a, json_float(attn_load_f32(&raw, (attn_dtype)dtype, 0)));
        }
    } else {
        for (uint32_t i = 0; i < it->len; i++)
            json_array_append_new(a, json_integer(it->ptr[i]));
    }
    return a;
}

static int render(m2j *c, uint32_t depth, bin_kind kind, const char *field, json_t **out);

static int render_map(m2j *c, const attn_wire_item *it, uint32_t depth, const char *field,
                      json_t **out)
{
    json_t *obj = json_object();
    if (obj == NULL)
        return attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory");
    for (uint32_t e = 0; e < it->len; e++) {
        attn_wire_item k;
        int rv = attn_wire_next(&c->r, &k);
        if (rv == 0 && k.type != ATTN_WT_STR)
            rv = attn_error_set(c->err, ATTN_E_TYPE, field, "map keys must be strings");
        else if (rv != 0)
            rv = attn_error_set(c->err, rv, field, "%s", attn_err_message(rv));
        if (rv != 0) {
            json_decref(obj);
            return rv;
        }
        char key[128], f[192];
        snprintf(key, sizeof key, "%.*s", (int)(k.len > 120 ? 120 : k.len), (const char *)k.ptr);
        snprintf(f, sizeof f, "%s%s%s", field, field[0] ? "." : "", key);
        /* tensors and integer arrays are named at the top level, in kv,
         * mask and tensors; a diag's bins are plain bytes */
        bin_kind kk = strcmp(field, "diag") == 0 || strncmp(field, "diag.", 5) == 0
                          ? BK_BYTES
                          : bin_kind_of(key, strlen(key));
        json_t *val = NULL;
        if ((rv = render(c, depth + 1, kk, f, &val)) != 0) {
            json_decref(obj);
            return rv;
        }
        json_object_set_new(obj, key, val);
    }
    *out = obj;
    return 0;
}

static int render(m2j *c, uint32_t depth, bin_kind kind, const char *field, json_t **out)
{
    attn_wire_item it;
    int rv = attn_wire_next(&c->r, &it);
    if (rv != 0)
        return attn_error_set(c->err, rv, field, "%s", attn_err_message(rv));
    if ((it.type == ATTN_WT_MAP || it.type == ATTN_WT_ARRAY) && depth > c->max_depth)
        return attn_error_set(c->err, ATTN_E_DEPTH, field, "%s nests deeper than %u levels",
                              field[0] ? field : "the message", c->max_depth);
    json_t *v = NULL;
    switch (it.type) {
    case ATTN_WT_NIL:
        v = json_null();
        break;
    case ATTN_WT_BOOL:
        v = json_boolean(it.b);
        break;
    case ATTN_WT_UINT:
        v = it.u <= (uint64_t)INT64_MAX ? json_integer((json_int_t)it.u) : json_real((double)it.u);
        break;
    case ATTN_WT_INT:
        v = json_integer(it.i);
        break;
    case ATTN_WT_FLOAT:
        v = json_float(it.f);
        break;
    case ATTN_WT_STR:
        v = json_stringn((const char *)it.ptr, it.len);
        if (v == NULL)
            return attn_error_set(c->err, ATTN_E_TYPE, field, "%s is not UTF-8 text", field);
        break;
    case ATTN_WT_BIN:
        v = render_bin(&it, kind, &c->dt);
        break;
    case ATTN_WT_EXT:
        return attn_error_set(c->err, ATTN_E_TYPE, field, "%s is a msgpack ext, not JSON-able",
                              field);
    case ATTN_WT_ARRAY:
        v = json_array();
        for (uint32_t i = 0; v != NULL && i < it.len; i++) {
            json_t *e = NULL;
            char f[192];
            snprintf(f, sizeof f, "%s[%u]", field, i);
            if ((rv = render(c, depth + 1, BK_BYTES, f, &e)) != 0) {
                json_decref(v);
                return rv;
            }
            json_array_append_new(v, e);
        }
        break;
    case ATTN_WT_MAP:
        return render_map(c, &it, depth, field, out);
    }
    if (v == NULL)
        return attn_error_set(c->err, ATTN_E_NOMEM, field, "no memory");
    *out = v;
    return 0;
}

/* Find the dtypes a top-level map states (q_dtype, o_dtype, kv_dtype). */
static void scan_dtypes(const void *buf, size_t len, dtypes *dt)
{
    attn_wire_reader r;
    attn_wire_item it, k, v;
    dt->q = dt->o = dt->kv = -1;
    attn_wire_init(&r, buf, len);
    if (attn_wire_next(&r, &it) != 0 || it.type != ATTN_WT_MAP)
        return;
    for (uint32_t e = 0; e < it.len; e++) {
        if (attn_wire_next(&r, &k) != 0)
            return;
        size_t at = r.pos;
        if (attn_wire_next(&r, &v) != 0)
            return;
        if (v.type == ATTN_WT_STR) {
            int d = dtype_parse((const char *)v.ptr, v.len);
            if (attn_wire_str_eq(&k, "q_dtype"))
                dt->q = d;
            else if (attn_wire_str_eq(&k, "o_dtype"))
                dt->o = d;
            else if (attn_wire_str_eq(&k, "kv_dtype"))
                dt->kv = d;
        } else {
            r.pos = at;
            if (attn_wire_skip(&r, 32) != 0)
                return;
        }
    }
}

int attn_msgpack_to_json(const void *buf, size_t len, uint32_t max_depth, bool pretty, char **out,
                         attn_error_detail *err)
{
    m2j c;
    json_t *root = NULL;
    attn_codec_limits lim;
    attn_codec_limits_default(&lim);
    *out = NULL;
    attn_wire_init(&c.r, buf, len);
    c.max_depth = max_depth ? max_depth : lim.max_depth;
    c.err = err;
    scan_dtypes(buf, len, &c.dt);
    int rv = render(&c, 1, BK_BYTES, "", &root);
    if (rv != 0)
        return rv;
    if (attn_wire_remaining(&c.r) != 0) {
        json_decref(root);
        return attn_error_set(err, ATTN_E_PROTOCOL, "", "bytes follow the message");
    }
    *out = json_dumps(root, (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER |
                                JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
    json_decref(root);
    return *out != NULL ? 0 : attn_error_set(err, ATTN_E_NOMEM, "", "no memory for JSON text");
}

int attn_request_to_json(const attn_request *req, bool pretty, char **out, attn_error_detail *err)
{
    attn_buf b;
    int rv = attn_request_encode(req, &b, err);
    if (rv != 0)
        return rv;
    rv = attn_msgpack_to_json(b.data, b.len, 0, pretty, out, err);
    attn_buf_free(&b);
    return rv;
}

int attn_reply_to_json(const attn_reply *rep, bool pretty, char **out, attn_error_detail *err)
{
    attn_buf b;
    int rv = attn_reply_encode(rep, &b, err);
    if (rv != 0)
        return rv;
    rv = attn_msgpack_to_json(b.data, b.len, 0, pretty, out, err);
    attn_buf_free(&b);
    return rv;
}

int attn_reply_diag_json(const attn_reply *rep, char **json, attn_error_detail *err)
{
    *json = NULL;
    if (rep->diag.len == 0)
        return attn_error_set(err, ATTN_E_MISSING, "diag", "the reply carries no diag");
    return attn_msgpack_to_json(rep->diag.data, (size_t)rep->diag.len, 0, true, json, err);
}
