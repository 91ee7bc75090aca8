/* Call keys, plan keys, their canonical form and digest (seed 0x07A, 0x07F, 0x0BE). */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "planner/key.h"
#include "planner/split.h"
#include "attn/names.h"

void attn_key_init(attn_key *k)
{
    memset(k, 0, sizeof *k);
}

void attn_key_fini(attn_key *k)
{
    for (uint32_t i = 0; i < k->num_fields; i++)
        free(k->fields[i].ints);
    k->num_fields = 0; /* slots are reset when reused (key_slot) */
}

int attn_key_copy(attn_key *dst, const attn_key *src)
{
    if (dst == src)
        return 0;
    attn_key_fini(dst);
    *dst = *src;
    for (uint32_t i = 0; i < dst->num_fields; i++) {
        attn_key_field *f = &dst->fields[i];
        if (f->type != ATTN_KEY_INTS || f->num_ints == 0) {
            f->ints = NULL;
            continue;
        }
        f->ints = malloc(sizeof(int64_t) * f->num_ints);
        if (f->ints == NULL) {
            /* leave dst consistent: drop the arrays not yet copied */
            for (uint32_t j = i + 1; j < dst->num_fields; j++)
                dst->fields[j].ints = NULL;
            attn_key_fini(dst);
            return ATTN_E_NOMEM;
        }
        memcpy(f->ints, src->fields[i].ints, sizeof(int64_t) * f->num_ints);
    }
    return 0;
}

/* Find or append the slot for `name`; an existing slot is reset. */
static attn_key_field *key_slot(attn_key *k, const char *name)
{
    size_t len = name != NULL ? strlen(name) : ATTN_KEY_NAME_MAX;
    if (len >= ATTN_KEY_NAME_MAX)
        return NULL;
    for (uint32_t i = 0; i < k->num_fields; i++) {
        /* first byte first: keys are built field by field on every reply */
        if (k->fields[i].name[0] == name[0] && strcmp(k->fields[i].name, name) == 0) {
            free(k->fields[i].ints);
            memset(&k->fields[i], 0, sizeof k->fields[i]);
            memcpy(k->fields[i].name, name, len + 1);
            return &k->fields[i];
        }
    }
    if (k->num_fields == ATTN_KEY_MAX_FIELDS)
        return NULL;
    attn_key_field *f = &k->fields[k->num_fields++];
    memset(f, 0, sizeof *f);
    memcpy(f->name, name, len + 1); /* no printf: this runs ~40 times per reply */
    return f;
}

int attn_key_set_int(attn_key *k, const char *name, int64_t v)
{
    attn_key_field *f = key_slot(k, name);
    if (f == NULL)
        return ATTN_E_RANGE;
    f->type = ATTN_KEY_INT;
    f->i = v;
    return 0;
}

int attn_key_set_double(attn_key *k, const char *name, double v)
{
    attn_key_field *f = key_slot(k, name);
    if (f == NULL)
        return ATTN_E_RANGE;
    f->type = ATTN_KEY_DOUBLE;
    f->d = v;
    return 0;
}

int attn_key_set_bool(attn_key *k, const char *name, bool v)
{
    attn_key_field *f = key_slot(k, name);
    if (f == NULL)
        return ATTN_E_RANGE;
    f->type = ATTN_KEY_BOOL;
    f->b = v;
    return 0;
}

int attn_key_set_str(attn_key *k, const char *name, const char *v)
{
    size_t len = v != NULL ? strlen(v) : ATTN_KEY_STR_MAX;
    if (len >= ATTN_KEY_STR_MAX)
        return ATTN_E_RANGE;
    attn_key_field *f = key_slot(k, name);
    if (f == NULL)
        return ATTN_E_RANGE;
    f->type = ATTN_KEY_STR;
    memcpy(f->s, v, len + 1);
    return 0;
}

int attn_key_set_ints(attn_key *k, const char *name, const int64_t *v, uint32_t n)
{
    int64_t *copy = NULL;
    if (n > 0) {
        copy = malloc(sizeof(int64_t) * n);
        if (copy == NULL)
            return ATTN_E_NOMEM;
        memcpy(copy, v, sizeof(int64_t) * n);
    }
    attn_key_field *f = key_slot(k, name);
    if (f == NULL) {
        free(copy);
        return ATTN_E_RANGE;
    }
    f->type = ATTN_KEY_INTS;
    f->ints = copy;
    f->num_ints = n;
    return 0;
}

int attn_key_remove(attn_key *k, const char *name)
{
    for (uint32_t i = 0; i < k->num_fields; i++) {
        /* first byte first: keys are built field by field on every reply */
        if (k->fields[i].name[0] == name[0] && strcmp(k->fields[i].name, name) == 0) {
            free(k->fields[i].ints);
            memmove(&k->fields[i], &k->fields[i + 1],
                    sizeof k->fields[0] * (k->num_fields - i - 1));
            k->num_fields--;
            return 1;
        }
    }
    return 0;
}

const attn_key_field *attn_key_get(const attn_key *k, const char *name)
{
    for (uint32_t i = 0; i < k->num_fields; i++)
        if (strcmp(k->fields[i].name, name) == 0)
            return &k->fields[i];
    return NULL;
}

int attn_key_field_equal(const attn_key_field *a, const attn_key_field *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case ATTN_KEY_INT:
        return a->i == b->i;
    case ATTN_KEY_DOUBLE:
        /* bitwise: the canonical form distinguishes what == would merge (0.0, -0.0) */
        return memcmp(&a->d, &b->d, sizeof a->d) == 0;
    case ATTN_KEY_BOOL:
        return a->b == b->b;
    case ATTN_KEY_STR:
        return strcmp(a->s, b->s) == 0;
    case ATTN_KEY_INTS:
        return a->num_ints == b->num_ints &&
               (a->num_ints == 0 || memcmp(a->ints, b->ints, sizeof(int64_t) * a->num_ints) == 0);
    }
    return 0;
}

/* Shortest round-trip decimal of a double, laid out the way Python's repr
 * does (fixed notation for exponents in [-4, 16), always a fractional part),
 * so our digests equal the fixtures' json.dumps digests (seed 0x07D). */
static void format_double_uncached(double x, char *out, size_t n)
{
    if (isnan(x)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(x)) {
        snprintf(out, n, x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (x == 0) {
        snprintf(out, n, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    char sci[40];
    /* round-tripping is monotone in the digit count: binary-search the shortest */
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(sci, sizeof sci, "%.*e", mid - 1, x);
        if (strtod(sci, NULL) == x)
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(sci, sizeof sci, "%.*e", lo - 1, x);
    /* sci is "[-]d[.ddd]e[+-]XX": split digits and exponent */
    char digits[24];
    size_t nd = 0;
    const char *c = sci;
    bool neg = false;
    if (*c == '-') {
        neg = true;
        c++;
    }
    for (; *c != 'e'; c++)
        if (*c != '.' && nd + 1 < sizeof digits)
            digits[nd++] = *c;
    digits[nd] = '\0';
    int e = atoi(c + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';
    char buf[64];
    size_t o = 0;
    if (neg)
        buf[o++] = '-';
    if (e >= -4 && e < 16) {
        if (e < 0) {
            buf[o++] = '0';
            buf[o++] = '.';
            for (int z = 0; z < -e - 1; z++)
                buf[o++] = '0';
            for (size_t d = 0; d < nd; d++)
                buf[o++] = digits[d];
        } else {
            for (int d = 0; d <= e; d++)
                buf[o++] = (size_t)d < nd ? digits[d] : '0';
            buf[o++] = '.';
            if ((size_t)e + 1 < nd)
                for (size_t d = (size_t)e + 1; d < nd; d++)
                    buf[o++] = digits[d];
            else
                buf[o++] = '0';
        }
        buf[o] = '\0';
    } else {
        buf[o++] = digits[0];
        if (nd > 1) {
            buf[o++] = '.';
            for (size_t d = 1; d < nd; d++)
                buf[o++] = digits[d];
        }
        snprintf(buf + o, sizeof buf - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    snprintf(out, n, "%s", buf);
}

/* The shortest round trip costs a few snprintf/strtod probes (about 2 us a
 * value, most of a B = 256 call key's canonical form); a call key repeats
 * the same few doubles (sm_scale, tolerances), so each thread keeps the
 * last ones it formatted, keyed by their bit pattern. */
#define FMT_CACHE 8
static _Thread_local struct fmt_cache_entry {
    uint64_t bits;
    bool used;
    char s[64]; /* format_double_uncached writes at most 64 bytes */
} g_fmt_cache[FMT_CACHE];

static void format_double(double x, char *out, size_t n)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    struct fmt_cache_entry *c = &g_fmt_cache[(bits ^ (bits >> 17) ^ (bits >> 41)) % FMT_CACHE];
    if (!c->used || c->bits != bits) {
        format_double_uncached(x, c->s, sizeof c->s);
        c->bits = bits;
        c->used = true;
    }
    snprintf(out, n, "%s", c->s);
}

/* A growable output buffer for the canonical writer. */
typedef struct key_buf {
    char *p;
    size_t len, cap;
    int err;
} key_buf;

/* Make room for n more bytes (and the NUL); false once out of memory. */
static bool kb_reserve(key_buf *b, size_t n)
{
    if (b->err)
        return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->err = ATTN_E_NOMEM;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

static void kb_put(key_buf *b, const char *s, size_t n)
{
    if (!kb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void kb_str(key_buf *b, const char *s)
{
    kb_put(b, s, strlen(s));
}

/* JSON string with the escapes json.dumps uses for ASCII input. */
static void kb_json_string(key_buf *b, const char *s)
{
    kb_put(b, "\"", 1);
    while (*s) {
        size_t run = 0;
        while (s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20 &&
               (unsigned char)s[run] < 0x7f)
            run++;
        kb_put(b, s, run);
        s += run;
        if (*s == '\0')
            break;
        unsigned char ch = (unsigned char)*s++;
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            kb_put(b, esc, 2);
        } else {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            kb_str(b, esc);
        }
    }
    kb_put(b, "\"", 1);
}

/* Decimal of an int64 without printf (the key of a large batch has one per request). */
/* Decimal digits of v written in place (room for 20 reserved by the caller).
 * Two digits per step from a table, written back to front once the length
 * is known: a B = 256 call key formats 512 of these per reply. */
static size_t int_digits(char *out, int64_t v)
{
    static const char pairs[] =
        "000102030405060708091011121314151617181920212223242526272829303132333435363738394041424344"
        "454647484950515253545556575859606162636465666768697071727374757677787980818283848586878889"
        "90919293949596979899";
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t sign = v < 0, len = 1;
    while (len < 20 && u >= pow10[len])
        len++;
    if (sign)
        out[0] = '-';
    char *p = out + sign + len;
    while (u >= 100) {
        size_t i = (size_t)(u % 100) * 2;
        u /= 100;
        *--p = pairs[i + 1];
        *--p = pairs[i];
    }
    if (u >= 10) {
        *--p = pairs[u * 2 + 1];
        *--p = pairs[u * 2];
    } else {
        *--p = (char)('0' + u);
    }
    return sign + len;
}

static void kb_int(key_buf *b, int64_t v)
{
    if (!kb_reserve(b, 20))
        return;
    b->len += int_digits(b->p + b->len, v);
    b->p[b->len] = '\0';
}

/* "[a,b,...]" with one reservation for the whole array: a call key carries
 * q_len and kv_len of every request, the bulk of a B = 256 key. */
static void kb_ints(key_buf *b, const int64_t *v, uint32_t n)
{
    if (!kb_reserve(b, (size_t)n * 21 + 2))
        return;
    char *p = b->p + b->len;
    *p++ = '[';
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += int_digits(p, v[i]);
    }
    *p++ = ']';
    b->len = (size_t)(p - b->p);
    b->p[b->len] = '\0';
}

static void kb_field_value(key_buf *b, const attn_key_field *f)
{
    char num[64];
    switch (f->type) {
    case ATTN_KEY_INT:
        kb_int(b, f->i);
        break;
    case ATTN_KEY_DOUBLE:
        format_double(f->d, num, sizeof num);
        kb_str(b, num);
        break;
    case ATTN_KEY_BOOL:
        kb_str(b, f->b ? "true" : "false");
        break;
    case ATTN_KEY_STR:
        kb_json_string(b, f->s);
        break;
    case ATTN_KEY_INTS:
        kb_ints(b, f->ints, f->num_ints);
        break;
    }
}

void attn_key_field_str(const attn_key_field *f, char *buf, size_t n)
{
    key_buf b = {0};
    kb_field_value(&b, f);
    snprintf(buf, n, "%s", b.err || b.p == NULL ? "?" : b.p);
    free(b.p);
}

int attn_key_canonical(const attn_key *k, char **out, size_t *len)
{
    const attn_key_field *order[ATTN_KEY_MAX_FIELDS];
    /* seed 0x07D: sorted keys, so insertion order never changes the digest
     * (insertion sort: keys are small and this runs once per reply) */
    for (uint32_t i = 0; i < k->num_fields; i++) {
        uint32_t j = i;
        while (j > 0 && strcmp(order[j - 1]->name, k->fields[i].name) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = &k->fields[i];
    }
    key_buf b = {0};
    kb_put(&b, "{", 1);
    for (uint32_t i = 0; i < k->num_fields; i++) {
        if (i)
            kb_put(&b, ",", 1);
        kb_json_string(&b, order[i]->name);
        kb_put(&b, ":", 1);
        kb_field_value(&b, order[i]);
    }
    kb_put(&b, "}", 1);
    if (b.err) {
        free(b.p);
        return b.err;
    }
    *out = b.p;
    if (len != NULL)
        *len = b.len;
    return 0;
}

/* OpenSSL 3 looks an implementation up on every EVP_sha256() use; fetch it
 * once (it dominated the per-reply cost of the diagnostic). */
static EVP_MD *g_sha256;
static pthread_once_t g_sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
    g_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256_md(void)
{
    pthread_once(&g_sha256_once, sha256_fetch);
    return g_sha256 != NULL ? g_sha256 : EVP_sha256();
}

int attn_key_sha256_bytes(const void *data, size_t len, char hex[ATTN_SHA256_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, sha256_md(), NULL) != 1 || mdlen != 32)
        return ATTN_E_INTERNAL;
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < mdlen; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * mdlen] = '\0';
    return 0;
}

int attn_key_sha256(const attn_key *k, char hex[ATTN_SHA256_HEX])
{
    char *s = NULL;
    size_t n = 0;
    int rv = attn_key_canonical(k, &s, &n);
    if (rv == 0)
        rv = attn_key_sha256_bytes(s, n, hex);
    free(s);
    return rv;
}

/* SHA-256 of the mask payload, so the key changes when the mask program
 * changes even though the vectors themselves are too large to inline. */
static int mask_data_digest(const attn_mask *mk, char hex[ATTN_SHA256_HEX])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int ok = ctx != NULL && EVP_DigestInit_ex(ctx, sha256_md(), NULL) == 1;
    if (ok && mk->kind == ATTN_MASK_FLASHMASK) {
        const int32_t *v[4] = {mk->fm_lts, mk->fm_lte, mk->fm_uts, mk->fm_ute};
        unsigned char causal = mk->fm_causal;
        ok = EVP_DigestUpdate(ctx, &causal, 1) == 1;
        for (int j = 0; ok && j < 4; j++)
            if (v[j] != NULL)
                ok = EVP_DigestUpdate(ctx, v[j], sizeof(int32_t) * mk->fm_len) == 1;
    } else if (ok && mk->kind == ATTN_MASK_DENSE && mk->dense_bits != NULL) {
        ok = EVP_DigestUpdate(ctx, mk->dense_bits, mk->dense_bytes) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return ATTN_E_INTERNAL;
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int attn_call_key_build(const attn_manifest *m, const attn_pool_geometry *g,
                        const attn_key_env *env, attn_key *out)
{
    int rv = 0;
    uint32_t B = m->num_requests;
    int64_t *q_len = malloc(sizeof(int64_t) * (B ? B : 1));
    int64_t *kv_len = malloc(sizeof(int64_t) * (B ? B : 1));
    if (q_len == NULL || kv_len == NULL) {
        free(q_len);
        free(kv_len);
        return ATTN_E_NOMEM;
    }
    uint32_t phases = 0;
    int64_t total_q = 0;
    for (uint32_t b = 0; b < B; b++) {
        attn_phase ph;
        if (attn_phase_classify(m->requests[b].cache_len, m->requests[b].new_len, &ph) == 0)
            phases |= 1u << ph;
        q_len[b] = m->requests[b].new_len;
        kv_len[b] = m->requests[b].cache_len + m->requests[b].new_len;
        total_q += q_len[b];
    }
    const char *phase = "invalid";
    if (phases != 0 && (phases & (phases - 1)) == 0)
        phase = attn_phase_name((attn_phase)__builtin_ctz(phases));
    else if (phases != 0)
        phase = "mixed"; /* seed 0x08F: a mixed batch is its own operation coordinate */

    /* the key spells the layout "paged_nhd"/"paged_hnd" (digests of
     * recorded keys depend on it): the wire name in lower case */
    char layout[24];
    int ln = snprintf(layout, sizeof layout, "paged_%s", attn_layout_name(g->layout));
    for (int i = 6; i < ln && i < (int)sizeof layout; i++)
        layout[i] = (char)tolower((unsigned char)layout[i]);
    char mask_hex[ATTN_SHA256_HEX] = "";
    attn_tolerance tol = attn_tolerance_for(m->q_dtype, g->kv_dtype);
    /* the default in double, as keys have always recorded it (digests of
     * recorded keys depend on it); the formula's one home is names.c */
    double sm_scale = m->has_sm_scale ? (double)m->sm_scale : attn_sm_scale_default(g->head_dim_qk);
    const char *polarity = attn_mask_polarity_name(m->mask.polarity);
    attn_key_fini(out);
    if (m->mask.kind == ATTN_MASK_FLASHMASK || m->mask.kind == ATTN_MASK_DENSE)
        rv = mask_data_digest(&m->mask, mask_hex);
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if (rv == 0)                                                                               \
            rv = (call);                                                                           \
    } while (0)
    /* environment (seed 0x07A E) */
    TRY(attn_key_set_str(out, "device_type", env->device_type));
    TRY(attn_key_set_int(out, "compute_capability", env->compute_capability));
    TRY(attn_key_set_str(out, "device", env->device));
    TRY(attn_key_set_str(out, "workspace_device", env->workspace_device));
    /* operation O */
    TRY(attn_key_set_str(out, "phase", phase));
    TRY(attn_key_set_bool(out, "training", false));
    /* tensors T */
    TRY(attn_key_set_int(out, "B", B));
    TRY(attn_key_set_int(out, "total_q", total_q));
    TRY(attn_key_set_ints(out, "q_len", q_len, B));
    TRY(attn_key_set_ints(out, "kv_len", kv_len, B));
    TRY(attn_key_set_int(out, "num_q_heads", m->num_qo_heads));
    TRY(attn_key_set_int(out, "num_kv_heads", g->num_kv_heads));
    TRY(attn_key_set_int(out, "head_dim_qk", g->head_dim_qk));
    TRY(attn_key_set_int(out, "head_dim_vo", g->head_dim_vo));
    TRY(attn_key_set_str(out, "q_dtype", attn_dtype_name(m->q_dtype)));
    TRY(attn_key_set_str(out, "kv_dtype", attn_dtype_name(g->kv_dtype)));
    TRY(attn_key_set_str(out, "cache_layout", layout));
    TRY(attn_key_set_str(out, "kv_format", attn_kv_format_name(m->kv.format)));
    TRY(attn_key_set_int(out, "page_size", g->page_size));
    TRY(attn_key_set_bool(out, "last_dim_contiguous", true)); /* wire tensors are row-major */
    /* semantics S */
    TRY(attn_key_set_str(out, "mask_kind", attn_mask_kind_name(m->mask.kind)));
    TRY(attn_key_set_int(out, "mask_left", m->mask.left));
    TRY(attn_key_set_int(out, "mask_sinks", m->mask.sinks));
    TRY(attn_key_set_str(out, "mask_polarity", polarity));
    TRY(attn_key_set_str(out, "mask_data_sha256", mask_hex));
    TRY(attn_key_set_double(out, "sm_scale", sm_scale));
    TRY(attn_key_set_double(out, "dropout_p", 0.0));
    /* runtime controls R (seed 0x07G: determinism and numerics belong in the key) */
    TRY(attn_key_set_str(out, "backend_request",
                         m->policy.backend[0] ? m->policy.backend : "auto"));
    TRY(attn_key_set_str(out, "schedule", attn_schedule_policy_name(m->policy.schedule)));
    TRY(attn_key_set_str(out, "split_policy", attn_split_policy_name(m->policy.split_policy)));
    TRY(attn_key_set_int(out, "splits", m->policy.splits));
    TRY(attn_key_set_str(out, "state_abi", attn_state_abi_name(m->policy.state_abi)));
    TRY(attn_key_set_bool(out, "requires_deterministic", m->policy.deterministic));
    TRY(attn_key_set_bool(out, "cuda_graph", m->policy.graph));
    /* seed 0x0BG: the tolerance is a field of the key, not a post-hoc choice */
    TRY(attn_key_set_str(out, "verify_metric", tol.metric));
    TRY(attn_key_set_double(out, "verify_rtol", tol.rtol));
    TRY(attn_key_set_double(out, "verify_lse_atol", tol.lse_atol));
#undef TRY
    free(q_len);
    free(kv_len);
    if (rv != 0)
        attn_key_fini(out);
    return rv;
}

/* The static projection (seed 0x07F) with its output names and why each is frozen. */
static const struct {
    const char *from, *to, *why;
} g_plan_fields[] = {
    {"device", "device", "workspace ownership changes"},
    {"workspace_device", "workspace_device", "workspace ownership changes"},
    {"cache_layout", "kv_layout", "kernel/layout specialization changes"},
    {"page_size", "page_size", "kernel/layout specialization changes"},
    {"num_q_heads", "num_q_heads", "kernel/layout specialization changes"},
    {"num_kv_heads", "num_kv_heads", "kernel/layout specialization changes"},
    {"head_dim_qk", "head_dim_qk", "kernel/layout specialization changes"},
    {"head_dim_vo", "head_dim_vo", "kernel/layout specialization changes"},
    {"q_dtype", "q_dtype", "kernel/layout specialization changes"},
    {"kv_dtype", "kv_dtype", "kernel/layout specialization changes"},
    {"cuda_graph", "cuda_graph", "capture/lifecycle contract changes"},
    {"schedule", "schedule", "schedule and workspace ledger change"},
    {"state_abi", "state_abi", "partial-state workspace layout changes"},
};
#define PLAN_FIELDS (sizeof g_plan_fields / sizeof g_plan_fields[0])

int attn_plan_key_build(const attn_key *call_key, attn_key *out)
{
    attn_key_fini(out);
    for (size_t i = 0; i < PLAN_FIELDS; i++) {
        const attn_key_field *f = attn_key_get(call_key, g_plan_fields[i].from);
        if (f == NULL) {
            attn_key_fini(out);
            return ATTN_E_MISSING;
        }
        attn_key_field *d = key_slot(out, g_plan_fields[i].to);
        if (d == NULL) {
            attn_key_fini(out);
            return ATTN_E_RANGE;
        }
        char name[ATTN_KEY_NAME_MAX];
        memcpy(name, d->name, sizeof name);
        *d = *f;
        memcpy(d->name, name, sizeof name);
        d->ints = NULL; /* no array field is frozen */
        d->num_ints = 0;
    }
    return 0;
}

const char *attn_plan_event_name(attn_plan_event e)
{
    return e == ATTN_PLAN_HIT ? "hit" : e == ATTN_PLAN_REPLAN ? "replan" : "miss";
}

static const char *frozen_why(const char *name)
{
    for (size_t i = 0; i < PLAN_FIELDS; i++)
        if (strcmp(g_plan_fields[i].to, name) == 0)
            return g_plan_fields[i].why;
    return "static projection changes";
}

/* Append "name old->new (why)" for every field of a or b that differs. */
static int describe_changes(const attn_key *a, const attn_key *b, char *out, size_t n)
{
    size_t o = 0;
    int changed = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        const attn_key *x = pass == 0 ? a : b, *y = pass == 0 ? b : a;
        for (uint32_t i = 0; i < x->num_fields; i++) {
            const attn_key_field *fx = &x->fields[i];
            const attn_key_field *fy = attn_key_get(y, fx->name);
            if (pass == 1 && fy != NULL)
                continue; /* already reported in the first pass */
            if (fy != NULL && attn_key_field_equal(fx, fy))
                continue;
            char vx[40] = "absent", vy[40] = "absent";
            attn_key_field_str(fx, pass == 0 ? vx : vy, sizeof vx);
            if (fy != NULL)
                attn_key_field_str(fy, pass == 0 ? vy : vx, sizeof vy);
            if (o < n) {
                int w = snprintf(out + o, n - o, "%s%s %s->%s (%s)", changed ? "; " : "", fx->name,
                                 vx, vy, frozen_why(fx->name));
                o += w > 0 ? (size_t)w : 0;
            }
            changed++;
        }
    }
    return changed;
}

void attn_plan_decide(const attn_key *frozen, const attn_key *now, attn_plan_decision *out)
{
    if (frozen == NULL) {
        out->event = ATTN_PLAN_MISS;
        snprintf(out->reason, sizeof out->reason, "no plan with this static projection");
        return;
    }
    if (describe_changes(frozen, now, out->reason, sizeof out->reason) == 0) {
        out->event = ATTN_PLAN_HIT;
        snprintf(out->reason, sizeof out->reason, "static projection unchanged");
        return;
    }
    /* seed 0x07F: a stale plan can mean wrong workspace sizes or graph pointers */
    out->event = ATTN_PLAN_REPLAN;
}

int attn_plan_check_named(const attn_key *frozen, const attn_key *now, attn_error_detail *d)
{
    char why[256];
    if (describe_changes(frozen, now, why, sizeof why) == 0)
        return 0;
    return attn_error_set(d, ATTN_E_STALE_PLAN, "plan_id",
                          "the run changes a field its plan froze: %s; send a new plan", why);
}
