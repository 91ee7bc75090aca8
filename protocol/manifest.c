/* Phases, packed query offsets, ledgers and the complete manifest validator
 * (seed 0x08; PROTOCOL.md "Manifest fields"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/addr.h"
#include "kernels/common/mask.h"
#include "protocol/manifest.h"

void attn_phase_ledger_of(int64_t cache_len, int64_t new_len, attn_phase_ledger *out)
{
    int64_t T = cache_len, C = new_len;
    /* seed 0x08B: N_rect = C(T+C), N_visible = CT + C(C+1)/2, masked = C(C-1)/2 */
    out->rect = C * (T + C);
    out->visible = C * T + C * (C + 1) / 2;
    out->causal_masked = C * (C - 1) / 2;
    out->post_len = T + C;
}

/* One request's (T, C) against the phase table; field "requests[i].*". */
static int check_request_phase(const attn_request_desc *r, uint32_t i, attn_phase *phase,
                               attn_error_detail *err)
{
    char field[64];
    if (attn_phase_classify(r->cache_len, r->new_len, phase) != 0) {
        snprintf(field, sizeof field, "requests[%u].%s", i,
                 r->cache_len < 0 ? "cache_len" : "new_len");
        return attn_error_set(err, ATTN_E_PHASE, field,
                              "(cache_len %lld, new_len %lld) is not prefill (T=0, C>0), "
                              "append (T>0, C>1) or decode (T>0, C=1)",
                              (long long)r->cache_len, (long long)r->new_len);
    }
    /* lengths travel as int32 on the wire (qo_indptr, lens, last_page_len) */
    if (r->cache_len + r->new_len > INT32_MAX) {
        snprintf(field, sizeof field, "requests[%u].cache_len", i);
        return attn_error_set(err, ATTN_E_RANGE, field,
                              "cache_len + new_len = %lld exceeds the int32 row range",
                              (long long)(r->cache_len + r->new_len));
    }
    return 0;
}

int attn_batch_ledger_build(const attn_request_desc *reqs, uint32_t num_requests,
                            attn_batch_ledger *out, attn_error_detail *err)
{
    int rv;
    memset(out, 0, sizeof *out);
    if (num_requests == 0 || reqs == NULL)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "requests", "the batch has no requests");
    out->num_requests = num_requests;
    for (uint32_t b = 0; b < num_requests; b++) {
        attn_phase ph;
        attn_phase_ledger l;
        if ((rv = check_request_phase(&reqs[b], b, &ph, err)) != 0)
            return rv;
        attn_phase_ledger_of(reqs[b].cache_len, reqs[b].new_len, &l);
        out->phase_count[ph]++;
        out->total_q += reqs[b].new_len;
        out->visible += l.visible;
        out->rect += l.rect;
        out->causal_masked += l.causal_masked;
        if (reqs[b].new_len > out->max_q)
            out->max_q = reqs[b].new_len;
        if (l.post_len > out->max_kv)
            out->max_kv = l.post_len;
    }
    /* seed 0x08F: the common padding envelope B x max C x max (T+C), and what
     * of it lies outside every request-local rectangle */
    out->envelope = (int64_t)num_requests * out->max_q * out->max_kv;
    out->beyond_rect = out->envelope - out->rect;
    return 0;
}

int attn_qo_indptr_derive(const attn_request_desc *reqs, uint32_t num_requests, int32_t *qo_indptr,
                          attn_error_detail *err)
{
    int rv;
    int64_t acc = 0;
    qo_indptr[0] = 0;
    for (uint32_t b = 0; b < num_requests; b++) {
        attn_phase ph;
        if ((rv = check_request_phase(&reqs[b], b, &ph, err)) != 0)
            return rv;
        /* seed 0x08F: qo_indptr[b+1] = qo_indptr[b] + C_b */
        acc += reqs[b].new_len;
        if (acc > INT32_MAX) {
            char field[64];
            snprintf(field, sizeof field, "requests[%u].new_len", b);
            return attn_error_set(err, ATTN_E_RANGE, field,
                                  "total query rows exceed the int32 range of qo_indptr");
        }
        qo_indptr[b + 1] = (int32_t)acc;
    }
    return 0;
}

int attn_qo_indptr_check(const attn_request_desc *reqs, uint32_t num_requests,
                         const int32_t *qo_indptr, size_t len, attn_error_detail *err)
{
    char field[64];
    if (qo_indptr == NULL)
        return attn_error_set(err, ATTN_E_QO_INDPTR, "qo_indptr", "qo_indptr is missing");
    if (len != (size_t)num_requests + 1)
        return attn_error_set(err, ATTN_E_QO_INDPTR, "qo_indptr",
                              "qo_indptr has %zu entries, expected B + 1 = %u", len,
                              num_requests + 1);
    if (qo_indptr[0] != 0)
        return attn_error_set(err, ATTN_E_QO_INDPTR, "qo_indptr[0]",
                              "qo_indptr must start at 0, got %d", qo_indptr[0]);
    for (uint32_t b = 0; b < num_requests; b++) {
        /* the field path is formatted only for an error (hot loop otherwise) */
        if (qo_indptr[b + 1] < qo_indptr[b]) {
            snprintf(field, sizeof field, "qo_indptr[%u]", b + 1);
            return attn_error_set(err, ATTN_E_QO_INDPTR, field,
                                  "qo_indptr is not monotone: %d after %d", qo_indptr[b + 1],
                                  qo_indptr[b]);
        }
        if ((int64_t)qo_indptr[b + 1] - qo_indptr[b] != reqs[b].new_len)
            return attn_error_set(err, ATTN_E_QO_INDPTR,
                                  (snprintf(field, sizeof field, "qo_indptr[%u]", b + 1), field),
                                  "qo_indptr[%u] - qo_indptr[%u] = %lld but new_len is %lld", b + 1,
                                  b, (long long)qo_indptr[b + 1] - qo_indptr[b],
                                  (long long)reqs[b].new_len);
    }
    return 0;
}

int attn_pool_geometry_validate(const attn_pool_geometry *g, attn_error_detail *err)
{
    if (g == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "pool", "no pool geometry");
    if (g->layers == 0)
        return attn_error_set(err, ATTN_E_RANGE, "pool.layers", "a pool needs >= 1 layer");
    if (g->num_pages == 0 || g->num_pages > INT32_MAX)
        return attn_error_set(err, ATTN_E_RANGE, "pool.num_pages", "num_pages %u outside [1, 2^31)",
                              g->num_pages);
    if (g->page_size == 0 || g->page_size > INT32_MAX)
        return attn_error_set(err, ATTN_E_RANGE, "pool.page_size", "page_size %u outside [1, 2^31)",
                              g->page_size);
    if (g->num_kv_heads == 0)
        return attn_error_set(err, ATTN_E_RANGE, "pool.num_kv_heads", "num_kv_heads must be > 0");
    if (g->head_dim_qk == 0 || g->head_dim_qk > ATTN_MAX_HEAD_DIM)
        return attn_error_set(err, ATTN_E_RANGE, "pool.head_dim_qk",
                              "head_dim_qk %u outside [1, %u]", g->head_dim_qk, ATTN_MAX_HEAD_DIM);
    if (g->head_dim_vo == 0 || g->head_dim_vo > ATTN_MAX_HEAD_DIM)
        return attn_error_set(err, ATTN_E_RANGE, "pool.head_dim_vo",
                              "head_dim_vo %u outside [1, %u]", g->head_dim_vo, ATTN_MAX_HEAD_DIM);
    if ((unsigned)g->kv_dtype > ATTN_BF16)
        return attn_error_set(err, ATTN_E_DTYPE, "pool.kv_dtype", "unknown kv_dtype %d",
                              (int)g->kv_dtype);
    if ((unsigned)g->layout > ATTN_HND)
        return attn_error_set(err, ATTN_E_RANGE, "pool.layout", "unknown layout %d",
                              (int)g->layout);
    /* every element offset of one layer must fit int64 with room to spare */
    double elems = (double)g->num_pages * g->page_size * g->num_kv_heads *
                   (g->head_dim_qk > g->head_dim_vo ? g->head_dim_qk : g->head_dim_vo);
    if (elems > 4.0e18)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "pool.num_pages",
                              "one layer of %.3g elements is not addressable", elems);
    return 0;
}

/* Ids must be NUL-terminated inside their buffer, non-empty and unique
 * (seed 0x08H assert_unique(request_id)). */
static int check_request_ids(const attn_manifest *m, attn_error_detail *err)
{
    char field[64];
    uint32_t B = m->num_requests;
    for (uint32_t b = 0; b < B; b++) {
        const char *id = m->requests[b].id;
        if (memchr(id, '\0', ATTN_NAME_MAX) == NULL || id[0] == '\0') {
            snprintf(field, sizeof field, "requests[%u].id", b);
            if (id[0] == '\0')
                return attn_error_set(err, ATTN_E_MISSING, field, "request id is empty");
            return attn_error_set(err, ATTN_E_TOO_LARGE, field, "request id longer than %d bytes",
                                  ATTN_NAME_MAX - 1);
        }
    }
    /* seed 0x08F: unique request identities.  An open-addressing set of
     * FNV-1a hashes, O(B); ids are compared only when their hashes meet. */
    uint32_t cap = 16;
    while (cap < 2 * B)
        cap *= 2;
    uint32_t *slot = malloc(sizeof *slot * cap); /* request index + 1, 0 = empty */
    uint32_t *hash = malloc(sizeof *hash * cap);
    if (slot == NULL || hash == NULL) {
        free(slot);
        free(hash);
        return attn_error_set(err, ATTN_E_NOMEM, "requests", "out of memory checking ids");
    }
    memset(slot, 0, sizeof *slot * cap);
    int rv = 0;
    for (uint32_t b = 0; b < B && rv == 0; b++) {
        uint32_t h = 2166136261u;
        for (const unsigned char *c = (const unsigned char *)m->requests[b].id; *c; c++)
            h = (h ^ *c) * 16777619u;
        for (uint32_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
            if (slot[i] == 0) {
                slot[i] = b + 1;
                hash[i] = h;
                break;
            }
            uint32_t first = slot[i] - 1;
            if (hash[i] == h && strcmp(m->requests[first].id, m->requests[b].id) == 0) {
                snprintf(field, sizeof field, "requests[%u].id", b);
                rv = attn_error_set(err, ATTN_E_DUPLICATE_REQUEST, field,
                                    "request id \"%s\" already used by requests[%u]",
                                    m->requests[b].id, first);
                break;
            }
        }
    }
    free(slot);
    free(hash);
    return rv;
}

static int check_policy(const attn_policy *p, attn_error_detail *err)
{
    if (memchr(p->backend, '\0', ATTN_NAME_MAX) == NULL)
        return attn_error_set(err, ATTN_E_POLICY, "policy.backend", "backend name too long");
    if ((unsigned)p->schedule > ATTN_SCHED_OVERLAP)
        return attn_error_set(err, ATTN_E_POLICY, "policy.schedule", "unknown schedule %d",
                              (int)p->schedule);
    if ((unsigned)p->split_policy > ATTN_SPLIT_FIXED)
        return attn_error_set(err, ATTN_E_POLICY, "policy.splits", "unknown split policy %d",
                              (int)p->split_policy);
    if ((unsigned)p->state_abi > ATTN_ABI_MLU)
        return attn_error_set(err, ATTN_E_POLICY, "policy.state_abi", "unknown state ABI %d",
                              (int)p->state_abi);
    if (p->split_policy == ATTN_SPLIT_FIXED && p->splits == 0)
        return attn_error_set(err, ATTN_E_POLICY, "policy.splits",
                              "a fixed split policy needs splits >= 1");
    return 0;
}

/* Everything but the page table: shared by attn_manifest_validate and the
 * engines' direct entry points that address another store encoding. */
int attn_manifest_validate_core(const attn_manifest *m, const attn_pool_geometry *g,
                                attn_error_detail *err)
{
    int rv;
    if (m == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "", "no manifest");
    /* structure first: geometry, counts, enums, arrays present */
    if ((rv = attn_pool_geometry_validate(g, err)) != 0)
        return rv;
    if (memchr(m->pool, '\0', ATTN_NAME_MAX) == NULL)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "pool", "pool name too long");
    if (m->num_requests == 0)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "requests", "the batch has no requests");
    if (m->requests == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "requests", "requests array is missing");
    if (m->num_requests > INT32_MAX - 1)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "requests", "too many requests");
    if (m->num_qo_heads == 0)
        return attn_error_set(err, ATTN_E_RANGE, "num_qo_heads", "num_qo_heads must be > 0");
    if ((unsigned)m->q_dtype > ATTN_BF16)
        return attn_error_set(err, ATTN_E_DTYPE, "q_dtype", "unknown q_dtype %d", (int)m->q_dtype);
    if ((rv = check_policy(&m->policy, err)) != 0)
        return rv;
    if ((unsigned)m->kv.format > ATTN_KV_DENSE)
        return attn_error_set(err, ATTN_E_PROTOCOL, "kv.format", "unknown kv format %d",
                              (int)m->kv.format);

    /* semantics: GQA head ratio (seed 0x04A: g = H_q / H_kv must be integral) */
    if (m->num_qo_heads % g->num_kv_heads != 0)
        return attn_error_set(err, ATTN_E_HEADS, "num_qo_heads",
                              "num_qo_heads %u is not a multiple of num_kv_heads %u",
                              m->num_qo_heads, g->num_kv_heads);
    if (m->has_sm_scale && !(isfinite(m->sm_scale) && m->sm_scale > 0))
        return attn_error_set(err, ATTN_E_RANGE, "sm_scale",
                              "sm_scale must be finite and > 0, got %g", (double)m->sm_scale);
    for (uint32_t b = 0; b < m->num_requests; b++) {
        attn_phase ph;
        if ((rv = check_request_phase(&m->requests[b], b, &ph, err)) != 0)
            return rv;
    }
    if ((rv = attn_qo_indptr_check(m->requests, m->num_requests, m->qo_indptr,
                                   m->qo_indptr ? (size_t)m->num_requests + 1 : 0, err)) != 0)
        return rv;
    if ((rv = check_request_ids(m, err)) != 0)
        return rv;
    return attn_mask_validate(&m->mask, m->requests, m->num_requests, err);
}

int attn_manifest_validate(const attn_manifest *m, const attn_pool_geometry *g,
                           attn_error_detail *err)
{
    int rv;
    if ((rv = attn_manifest_validate_core(m, g, err)) != 0)
        return rv;
    /* page ids in the pool, visible blocks mapped, exact coverage of T + C
     * rows, and no written row shared with another logical row (seed 0x04J,
     * 0x08H assert_unique(cache_row_id)) */
    return attn_kv_table_validate(&m->kv, m->requests, m->num_requests, g, err);
}

void attn_manifest_free(attn_manifest *m)
{
    if (m == NULL)
        return;
    free(m->requests);
    free(m->qo_indptr);
    free(m->kv.page_indptr);
    free(m->kv.page_indices);
    free(m->kv.last_page_len);
    free(m->kv.block_table);
    free(m->kv.lens);
    free(m->mask.fm_lts);
    free(m->mask.fm_lte);
    free(m->mask.fm_uts);
    free(m->mask.fm_ute);
    free(m->mask.dense_bits);
    m->requests = NULL;
    m->qo_indptr = NULL;
    m->kv.page_indptr = m->kv.page_indices = m->kv.last_page_len = NULL;
    m->kv.block_table = m->kv.lens = NULL;
    m->mask.fm_lts = m->mask.fm_lte = m->mask.fm_uts = m->mask.fm_ute = NULL;
    m->mask.dense_bits = NULL;
}

uint64_t attn_manifest_heap_bytes(const attn_manifest *m)
{
    const attn_kv_table *kv = &m->kv;
    uint64_t B = m->num_requests;
    uint64_t n = 0;
    n += m->requests ? sizeof *m->requests * B : 0;
    n += m->qo_indptr ? sizeof(int32_t) * (B + 1) : 0;
    n += kv->page_indptr ? sizeof(int32_t) * (B + 1) : 0;
    n += kv->page_indices ? sizeof(int32_t) * (uint64_t)kv->num_page_indices : 0;
    n += kv->last_page_len ? sizeof(int32_t) * B : 0;
    n += kv->block_table ? sizeof(int32_t) * B * kv->max_blocks : 0;
    n += kv->lens ? sizeof(int32_t) * B : 0;
    n += (m->mask.fm_lts ? 4 : 0) * sizeof(int32_t) * m->mask.fm_len;
    n += m->mask.dense_bits ? m->mask.dense_bytes : 0;
    return n;
}

/* malloc'ed copy of n bytes (NULL stays NULL; n == 0 copies nothing). */
static int dup_bytes(void **dst, const void *src, size_t n)
{
    *dst = NULL;
    if (src == NULL || n == 0)
        return 0;
    if ((*dst = malloc(n)) == NULL)
        return ATTN_E_NOMEM;
    memcpy(*dst, src, n);
    return 0;
}

int attn_manifest_clone(attn_manifest *dst, const attn_manifest *src)
{
    const attn_kv_table *kv = &src->kv;
    const attn_mask *mk = &src->mask;
    uint32_t B = src->num_requests;
    size_t fm = (size_t)mk->fm_len * sizeof(int32_t);
    int rv = 0;

    *dst = *src;
    dst->requests = NULL;
    dst->qo_indptr = NULL;
    memset(&dst->kv, 0, sizeof dst->kv);
    dst->kv.format = kv->format;
    dst->kv.num_page_indices = kv->num_page_indices;
    dst->kv.max_blocks = kv->max_blocks;
    dst->mask.fm_lts = dst->mask.fm_lte = dst->mask.fm_uts = dst->mask.fm_ute = NULL;
    dst->mask.dense_bits = NULL;

    rv |= dup_bytes((void **)&dst->requests, src->requests, sizeof *src->requests * B);
    rv |= dup_bytes((void **)&dst->qo_indptr, src->qo_indptr, sizeof(int32_t) * (B + 1));
    rv |= dup_bytes((void **)&dst->kv.page_indptr, kv->page_indptr, sizeof(int32_t) * (B + 1));
    rv |= dup_bytes((void **)&dst->kv.page_indices, kv->page_indices,
                    sizeof(int32_t) * kv->num_page_indices);
    rv |= dup_bytes((void **)&dst->kv.last_page_len, kv->last_page_len, sizeof(int32_t) * B);
    rv |= dup_bytes((void **)&dst->kv.block_table, kv->block_table,
                    sizeof(int32_t) * B * (size_t)kv->max_blocks);
    rv |= dup_bytes((void **)&dst->kv.lens, kv->lens, sizeof(int32_t) * B);
    rv |= dup_bytes((void **)&dst->mask.fm_lts, mk->fm_lts, fm);
    rv |= dup_bytes((void **)&dst->mask.fm_lte, mk->fm_lte, fm);
    rv |= dup_bytes((void **)&dst->mask.fm_uts, mk->fm_uts, fm);
    rv |= dup_bytes((void **)&dst->mask.fm_ute, mk->fm_ute, fm);
    rv |= dup_bytes((void **)&dst->mask.dense_bits, mk->dense_bits, mk->dense_bytes);
    if (rv != 0) {
        attn_manifest_free(dst);
        return ATTN_E_NOMEM;
    }
    return 0;
}

int64_t attn_manifest_total_q(const attn_manifest *m)
{
    int64_t n = 0;
    for (uint32_t b = 0; b < m->num_requests; b++)
        n += m->requests[b].new_len;
    return n;
}

/* snprintf into buf at *len, tracking the length needed even past cap. */
static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

size_t attn_manifest_summary(const attn_manifest *m, char *buf, size_t cap)
{
    size_t len = 0;
    int64_t q0 = 0;
    attn_batch_ledger bl;
    if (cap > 0)
        buf[0] = '\0';
    for (uint32_t b = 0; b < m->num_requests; b++) {
        const attn_request_desc *r = &m->requests[b];
        attn_phase ph;
        attn_phase_ledger l;
        attn_phase_ledger_of(r->cache_len, r->new_len, &l);
        const char *name = attn_phase_classify(r->cache_len, r->new_len, &ph) == 0
                               ? attn_phase_name(ph)
                               : "invalid";
        appendf(buf, cap, &len,
                "%s %s (T=%lld, C=%lld) q[%lld:%lld) visible %lld/%lld masked %lld "
                "len %lld->%lld\n",
                r->id, name, (long long)r->cache_len, (long long)r->new_len, (long long)q0,
                (long long)(q0 + r->new_len), (long long)l.visible, (long long)l.rect,
                (long long)l.causal_masked, (long long)r->cache_len, (long long)l.post_len);
        q0 += r->new_len;
    }
    if (attn_batch_ledger_build(m->requests, m->num_requests, &bl, NULL) == 0)
        appendf(buf, cap, &len,
                "batch B=%u prefill %u append %u decode %u: visible %lld/%lld, %lld rows "
                "appended, envelope %lld (%lld beyond the request rectangles)\n",
                bl.num_requests, bl.phase_count[ATTN_PHASE_PREFILL],
                bl.phase_count[ATTN_PHASE_APPEND], bl.phase_count[ATTN_PHASE_DECODE],
                (long long)bl.visible, (long long)bl.rect, (long long)bl.total_q,
                (long long)bl.envelope, (long long)bl.beyond_rect);
    return len;
}
