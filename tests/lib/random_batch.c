/* Random ragged mixed microbatches and the unsplit fp64 reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "attn/error.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "tests/lib/random_batch.h"

uint64_t attn_rb_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double attn_rb_uniform(uint64_t *s)
{
    return (double)(attn_rb_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

int64_t attn_rb_range(uint64_t *s, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(attn_rb_next(s) % (uint64_t)(hi - lo + 1));
}

uint64_t attn_rb_checksum(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t attn_rb_pool_checksum(const attn_rb *rb)
{
    return attn_rb_checksum(rb->k, rb->k_bytes) ^ (attn_rb_checksum(rb->v, rb->v_bytes) * 31u);
}

static void fill_defaults(attn_rb_spec *s)
{
    if (!s->num_requests)
        s->num_requests = 4;
    if (!s->max_cache_len)
        s->max_cache_len = 40;
    if (!s->max_new_len)
        s->max_new_len = 6;
    if (!s->phase_mask)
        s->phase_mask = 7;
    if (!s->num_qo_heads)
        s->num_qo_heads = 4;
    if (!s->num_kv_heads)
        s->num_kv_heads = 2;
    if (!s->head_dim_qk)
        s->head_dim_qk = 8;
    if (!s->head_dim_vo)
        s->head_dim_vo = s->head_dim_qk;
    if (!s->page_size)
        s->page_size = 4;
}

/* NaN in the storage dtype (fp32 quiet NaN, fp16 0x7e00, bf16 0x7fc0). */
static void poison_fill(void *p, attn_dtype dt, size_t n)
{
    for (size_t i = 0; i < n; i++)
        attn_store_f32(p, dt, i, NAN);
}

static void random_fill(void *p, attn_dtype dt, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        attn_store_f32(p, dt, i, (float)(2.0 * attn_rb_uniform(s) - 1.0));
}

/* Element offset of (page, slot, h, x) written out from seed 0x04D, apart
 * from kernels/common/addr.h so the reference does not share its code. */
static size_t ref_offset(const attn_rb *rb, int64_t page, int64_t slot, uint32_t h, uint32_t x,
                         uint32_t d)
{
    int64_t P = rb->g.page_size, H = rb->g.num_kv_heads;
    if (rb->g.layout == ATTN_HND)
        return (size_t)(((page * H + h) * P + slot) * d + x);
    return (size_t)(((page * P + slot) * H + h) * d + x);
}

static int64_t ref_page(const attn_rb *rb, uint32_t b, int64_t t)
{
    int64_t j = t / rb->g.page_size;
    if (rb->m.kv.format == ATTN_KV_DENSE)
        return rb->m.kv.block_table[(size_t)b * rb->m.kv.max_blocks + (size_t)j];
    return rb->m.kv.page_indices[rb->m.kv.page_indptr[b] + j];
}

float attn_rb_pool_value(const attn_rb *rb, uint32_t b, int64_t t, uint32_t h, uint32_t x,
                         bool want_v)
{
    uint32_t d = want_v ? rb->g.head_dim_vo : rb->g.head_dim_qk;
    size_t off = ref_offset(rb, ref_page(rb, b, t), t % rb->g.page_size, h, x, d);
    return attn_load_f32(want_v ? rb->v : rb->k, rb->g.kv_dtype, off);
}

float attn_rb_new_value(const attn_rb *rb, uint32_t b, int64_t i, uint32_t h, uint32_t x,
                        bool want_v)
{
    uint32_t d = want_v ? rb->g.head_dim_vo : rb->g.head_dim_qk;
    size_t row = (size_t)rb->m.qo_indptr[b] + (size_t)i;
    return attn_load_f32(want_v ? rb->v_new : rb->k_new, rb->g.kv_dtype,
                         (row * rb->g.num_kv_heads + h) * d + x);
}

/* Mask data for the drawn kind: window/sink scalars, FlashMask intervals
 * (upper run above lower run per column), or dense bits with a polarity. */
static int make_mask(attn_rb *rb, uint64_t *s)
{
    attn_mask *mk = &rb->m.mask;
    const attn_request_desc *r = rb->m.requests;
    uint32_t B = rb->m.num_requests;
    memset(mk, 0, sizeof *mk);
    mk->kind = rb->spec.mask_kind;
    if (mk->kind == ATTN_MASK_WINDOW || mk->kind == ATTN_MASK_SINK) {
        mk->left = (int32_t)attn_rb_range(s, 0, rb->spec.max_cache_len / 2 + 1);
        mk->sinks = mk->kind == ATTN_MASK_SINK ? (int32_t)attn_rb_range(s, 0, 4) : 0;
    } else if (mk->kind == ATTN_MASK_FLASHMASK) {
        uint64_t n = 0, k = 0;
        for (uint32_t b = 0; b < B; b++)
            n += (uint64_t)(r[b].cache_len + r[b].new_len);
        mk->fm_len = n;
        mk->fm_causal = attn_rb_next(s) & 1;
        mk->fm_uts = malloc(n * sizeof(int32_t) + 1);
        mk->fm_ute = malloc(n * sizeof(int32_t) + 1);
        mk->fm_lts = malloc(n * sizeof(int32_t) + 1);
        mk->fm_lte = malloc(n * sizeof(int32_t) + 1);
        if (!mk->fm_uts || !mk->fm_ute || !mk->fm_lts || !mk->fm_lte)
            return ATTN_E_NOMEM;
        for (uint32_t b = 0; b < B; b++)
            for (int64_t j = 0; j < r[b].cache_len + r[b].new_len; j++, k++) {
                int32_t e[4];
                for (int t = 0; t < 4; t++)
                    e[t] = (int32_t)attn_rb_range(s, 0, r[b].new_len);
                for (int a = 1; a < 4; a++) /* sort the four endpoints */
                    for (int c = a; c > 0 && e[c - 1] > e[c]; c--) {
                        int32_t tmp = e[c];
                        e[c] = e[c - 1];
                        e[c - 1] = tmp;
                    }
                mk->fm_uts[k] = e[0];
                mk->fm_ute[k] = e[1];
                mk->fm_lts[k] = e[2];
                mk->fm_lte[k] = e[3];
            }
    } else if (mk->kind == ATTN_MASK_DENSE) {
        uint64_t bytes = 0;
        for (uint32_t b = 0; b < B; b++)
            bytes += ((uint64_t)r[b].new_len * (uint64_t)(r[b].cache_len + r[b].new_len) + 7) / 8;
        mk->polarity = (attn_rb_next(s) & 1) ? ATTN_POLARITY_TRUE_MEANS_MASKED
                                             : ATTN_POLARITY_TRUE_MEANS_ALLOWED;
        mk->dense_bytes = bytes;
        if ((mk->dense_bits = malloc(bytes + 1)) == NULL)
            return ATTN_E_NOMEM;
        for (uint64_t i = 0; i < bytes; i++) /* about one cell in four masked */
            mk->dense_bits[i] = (uint8_t)(attn_rb_next(s) & attn_rb_next(s));
        if (mk->polarity == ATTN_POLARITY_TRUE_MEANS_ALLOWED)
            for (uint64_t i = 0; i < bytes; i++)
                mk->dense_bits[i] = (uint8_t)~mk->dense_bits[i];
    }
    return 0;
}

int attn_rb_make_lengths(attn_rb *rb, const attn_rb_spec *spec, const int64_t *T, const int64_t *C,
                         uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    memset(rb, 0, sizeof *rb);
    rb->spec = *spec;
    fill_defaults(&rb->spec);
    const attn_rb_spec *sp = &rb->spec;
    uint32_t B = sp->num_requests, P = sp->page_size;

    /* pages: ceil((T + C) / P) per request, plus spares, in random order */
    uint32_t pages = sp->spare_pages;
    for (uint32_t b = 0; b < B; b++)
        pages += (uint32_t)((T[b] + C[b] + P - 1) / P);
    attn_pool_geometry *g = &rb->g;
    snprintf(g->name, sizeof g->name, "rb");
    snprintf(g->device, sizeof g->device, "cpu");
    g->layers = 1;
    g->num_pages = pages ? pages : 1;
    g->page_size = P;
    g->num_kv_heads = sp->num_kv_heads;
    g->head_dim_qk = sp->head_dim_qk;
    g->head_dim_vo = sp->head_dim_vo;
    g->kv_dtype = sp->kv_dtype;
    g->layout = sp->layout;

    attn_manifest *m = &rb->m;
    snprintf(m->pool, sizeof m->pool, "rb");
    m->num_qo_heads = sp->num_qo_heads;
    m->num_requests = B;
    m->q_dtype = sp->q_dtype;
    m->kv.format = sp->format;
    m->requests = calloc(B, sizeof *m->requests);
    m->qo_indptr = calloc(B + 1, sizeof(int32_t));
    uint32_t *perm = malloc(sizeof *perm * g->num_pages);
    if (!m->requests || !m->qo_indptr || !perm)
        goto nomem;
    for (uint32_t p = 0; p < g->num_pages; p++)
        perm[p] = p;
    for (uint32_t p = g->num_pages; p > 1; p--) {
        uint32_t q = (uint32_t)attn_rb_range(&s, 0, p - 1), t = perm[p - 1];
        perm[p - 1] = perm[q];
        perm[q] = t;
    }
    for (uint32_t b = 0; b < B; b++) {
        snprintf(m->requests[b].id, sizeof m->requests[b].id, "req-%u", b);
        m->requests[b].cache_len = T[b];
        m->requests[b].new_len = C[b];
        m->qo_indptr[b + 1] = m->qo_indptr[b] + (int32_t)C[b];
    }
    rb->total_q = m->qo_indptr[B];

    /* page table in the requested format; dense rows padded with -1 */
    uint32_t max_blocks = 0, used = 0;
    for (uint32_t b = 0; b < B; b++) {
        uint32_t n = (uint32_t)((T[b] + C[b] + P - 1) / P);
        max_blocks = n > max_blocks ? n : max_blocks;
    }
    if (sp->format == ATTN_KV_DENSE) {
        m->kv.max_blocks = max_blocks + 1; /* one spare column of sentinels */
        m->kv.block_table = malloc(sizeof(int32_t) * B * m->kv.max_blocks);
        m->kv.lens = malloc(sizeof(int32_t) * B);
        if (!m->kv.block_table || !m->kv.lens)
            goto nomem;
        for (uint32_t b = 0; b < B; b++) {
            uint32_t n = (uint32_t)((T[b] + C[b] + P - 1) / P);
            for (uint32_t j = 0; j < m->kv.max_blocks; j++)
                m->kv.block_table[b * m->kv.max_blocks + j] = j < n ? (int32_t)perm[used++] : -1;
            m->kv.lens[b] = (int32_t)(T[b] + C[b]);
        }
    } else {
        m->kv.page_indptr = malloc(sizeof(int32_t) * (B + 1));
        m->kv.last_page_len = malloc(sizeof(int32_t) * B);
        m->kv.page_indices = malloc(sizeof(int32_t) * (g->num_pages + 1));
        if (!m->kv.page_indptr || !m->kv.last_page_len || !m->kv.page_indices)
            goto nomem;
        m->kv.page_indptr[0] = 0;
        for (uint32_t b = 0; b < B; b++) {
            uint32_t n = (uint32_t)((T[b] + C[b] + P - 1) / P);
            for (uint32_t j = 0; j < n; j++, used++)
                m->kv.page_indices[used] = (int32_t)perm[used];
            m->kv.page_indptr[b + 1] = (int32_t)used;
            /* seed 0x04D: T = P (n - 1) + last_page_len */
            m->kv.last_page_len[b] = (int32_t)(T[b] + C[b] - (int64_t)(n - 1) * P);
        }
        m->kv.num_page_indices = used;
    }
    free(perm);
    perm = NULL;
    m->policy.state_abi = ATTN_ABI_MLU;
    snprintf(m->policy.backend, sizeof m->policy.backend, "auto");
    if (make_mask(rb, &s) != 0)
        goto nomem;

    /* the pool: poison (or zeros) everywhere, then visible history [0, T) */
    size_t es = attn_dtype_size(g->kv_dtype);
    size_t kel = (size_t)g->num_pages * P * g->num_kv_heads * g->head_dim_qk;
    size_t vel = (size_t)g->num_pages * P * g->num_kv_heads * g->head_dim_vo;
    rb->k_bytes = kel * es;
    rb->v_bytes = vel * es;
    rb->k = calloc(kel, es);
    rb->v = calloc(vel, es);
    if (!rb->k || !rb->v)
        goto nomem;
    if (sp->poison) {
        poison_fill(rb->k, g->kv_dtype, kel);
        poison_fill(rb->v, g->kv_dtype, vel);
    }
    for (uint32_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T[b]; t++) {
            int64_t page = ref_page(rb, b, t), slot = t % P;
            for (uint32_t h = 0; h < g->num_kv_heads; h++) {
                random_fill((char *)rb->k + ref_offset(rb, page, slot, h, 0, g->head_dim_qk) * es,
                            g->kv_dtype, g->head_dim_qk, &s);
                random_fill((char *)rb->v + ref_offset(rb, page, slot, h, 0, g->head_dim_vo) * es,
                            g->kv_dtype, g->head_dim_vo, &s);
            }
        }

    /* the run inputs */
    size_t nq = (size_t)rb->total_q;
    rb->q_bytes = nq * m->num_qo_heads * g->head_dim_qk * attn_dtype_size(m->q_dtype);
    rb->k_new_bytes = nq * g->num_kv_heads * g->head_dim_qk * es;
    rb->v_new_bytes = nq * g->num_kv_heads * g->head_dim_vo * es;
    rb->q = malloc(rb->q_bytes + 1);
    rb->k_new = malloc(rb->k_new_bytes + 1);
    rb->v_new = malloc(rb->v_new_bytes + 1);
    if (!rb->q || !rb->k_new || !rb->v_new)
        goto nomem;
    random_fill(rb->q, m->q_dtype, nq * m->num_qo_heads * g->head_dim_qk, &s);
    random_fill(rb->k_new, g->kv_dtype, nq * g->num_kv_heads * g->head_dim_qk, &s);
    random_fill(rb->v_new, g->kv_dtype, nq * g->num_kv_heads * g->head_dim_vo, &s);
    rb->o_elems = nq * m->num_qo_heads * g->head_dim_vo;
    rb->lse_elems = nq * m->num_qo_heads;
    return 0;
nomem:
    free(perm);
    attn_rb_free(rb);
    return ATTN_E_NOMEM;
}

int attn_rb_make(attn_rb *rb, const attn_rb_spec *spec, uint64_t seed)
{
    attn_rb_spec sp = *spec;
    uint64_t s = seed ^ 0x5deece66dull;
    fill_defaults(&sp);
    int64_t *T = malloc(sizeof *T * sp.num_requests), *C = malloc(sizeof *C * sp.num_requests);
    int rv;
    if (!T || !C) {
        free(T);
        free(C);
        return ATTN_E_NOMEM;
    }
    for (uint32_t b = 0; b < sp.num_requests; b++) {
        attn_phase ph;
        do
            ph = (attn_phase)attn_rb_range(&s, 0, 2);
        while (!(sp.phase_mask & (1u << ph)));
        if (ph == ATTN_PHASE_PREFILL) {
            T[b] = 0;
            C[b] = attn_rb_range(&s, 1, sp.max_new_len);
        } else if (ph == ATTN_PHASE_DECODE) {
            T[b] = attn_rb_range(&s, 1, sp.max_cache_len);
            C[b] = 1;
        } else {
            T[b] = attn_rb_range(&s, 1, sp.max_cache_len);
            C[b] = attn_rb_range(&s, 2, sp.max_new_len > 2 ? sp.max_new_len : 2);
        }
    }
    rv = attn_rb_make_lengths(rb, &sp, T, C, seed);
    free(T);
    free(C);
    return rv;
}

void attn_rb_free(attn_rb *rb)
{
    free(rb->m.requests);
    free(rb->m.qo_indptr);
    free(rb->m.kv.page_indptr);
    free(rb->m.kv.page_indices);
    free(rb->m.kv.last_page_len);
    free(rb->m.kv.block_table);
    free(rb->m.kv.lens);
    free(rb->m.mask.fm_lts);
    free(rb->m.mask.fm_lte);
    free(rb->m.mask.fm_uts);
    free(rb->m.mask.fm_ute);
    free(rb->m.mask.dense_bits);
    free(rb->k);
    free(rb->v);
    free(rb->q);
    free(rb->k_new);
    free(rb->v_new);
    memset(rb, 0, sizeof *rb);
}

int attn_rb_reference(const attn_rb *rb, double *o, double *lse)
{
    const attn_manifest *m = &rb->m;
    const attn_pool_geometry *g = &rb->g;
    uint32_t Hq = m->num_qo_heads, Hkv = g->num_kv_heads, dq = g->head_dim_qk, dv = g->head_dim_vo;
    double scale = m->has_sm_scale ? (double)m->sm_scale : (double)(float)(1.0 / sqrt((double)dq));
    attn_mask_prog prog;
    int rv = attn_mask_prog_build(&m->mask, m->requests, m->num_requests, &prog, NULL);
    if (rv != 0)
        return rv;
    int64_t maxL = 0;
    for (uint32_t b = 0; b < m->num_requests; b++)
        if (m->requests[b].cache_len + m->requests[b].new_len > maxL)
            maxL = m->requests[b].cache_len + m->requests[b].new_len;
    double *s = malloc(sizeof *s * (size_t)(maxL + 1));
    if (!s) {
        attn_mask_prog_free(&prog);
        return ATTN_E_NOMEM;
    }
    for (uint32_t b = 0; b < m->num_requests; b++) {
        int64_t T = m->requests[b].cache_len, C = m->requests[b].new_len, L = T + C;
        for (int64_t i = 0; i < C; i++) {
            size_t row = (size_t)m->qo_indptr[b] + (size_t)i;
            for (uint32_t h = 0; h < Hq; h++) {
                uint32_t hk = h / (Hq / Hkv); /* seed 0x04A */
                double mx = -INFINITY, l = 0;
                double *orow = o + (row * Hq + h) * dv;
                for (int64_t j = 0; j < L; j++) {
                    s[j] = -INFINITY;
                    if (!attn_mask_visible(&prog, b, i, j))
                        continue;
                    double acc = 0;
                    for (uint32_t x = 0; x < dq; x++) {
                        double qv = attn_load_f32(rb->q, m->q_dtype, (row * Hq + h) * dq + x);
                        double kv = j < T ? attn_rb_pool_value(rb, b, j, hk, x, false)
                                          : attn_rb_new_value(rb, b, j - T, hk, x, false);
                        acc += qv * kv;
                    }
                    s[j] = acc * scale;
                    if (s[j] > mx)
                        mx = s[j];
                }
                for (uint32_t x = 0; x < dv; x++)
                    orow[x] = 0;
                if (mx == -INFINITY) { /* all masked: O = 0, LSE = -inf (seed 0x02C) */
                    lse[row * Hq + h] = -INFINITY;
                    continue;
                }
                for (int64_t j = 0; j < L; j++) {
                    if (s[j] == -INFINITY)
                        continue;
                    double p = exp(s[j] - mx);
                    l += p;
                    for (uint32_t x = 0; x < dv; x++)
                        orow[x] += p * (j < T ? attn_rb_pool_value(rb, b, j, hk, x, true)
                                              : attn_rb_new_value(rb, b, j - T, hk, x, true));
                }
                for (uint32_t x = 0; x < dv; x++)
                    orow[x] /= l;
                lse[row * Hq + h] = mx + log(l);
            }
        }
    }
    free(s);
    attn_mask_prog_free(&prog);
    return 0;
}

int attn_rb_make_step(const attn_rb *cap, uint32_t B, const int64_t *T, const int64_t *C,
                      uint64_t seed, attn_rb_step *out)
{
    memset(out, 0, sizeof *out);
    const attn_manifest *cm = &cap->m;
    const int64_t P = cap->g.page_size;
    if (B == 0 || B > cm->num_requests || cm->mask.kind == ATTN_MASK_FLASHMASK ||
        cm->mask.kind == ATTN_MASK_DENSE)
        return ATTN_E_RANGE;
    for (uint32_t b = 0; b < B; b++)
        if (T[b] < 0 || C[b] < 1 || T[b] > cm->requests[b].cache_len ||
            T[b] + C[b] > cm->requests[b].cache_len + cm->requests[b].new_len)
            return ATTN_E_RANGE;
    attn_manifest *m = &out->m;
    *m = *cm; /* pool, heads, mask scalars, scale, dtype, policy */
    m->num_requests = B;
    m->requests = calloc(B, sizeof *m->requests);
    m->qo_indptr = calloc(B + 1, sizeof *m->qo_indptr);
    memset(&m->kv, 0, sizeof m->kv);
    m->kv.format = cm->kv.format;
    bool ok = m->requests && m->qo_indptr;
    if (cm->kv.format == ATTN_KV_CSR) {
        m->kv.page_indptr = calloc(B + 1, sizeof(int32_t));
        m->kv.page_indices = calloc(cm->kv.num_page_indices + 1, sizeof(int32_t));
        m->kv.last_page_len = calloc(B, sizeof(int32_t));
        ok = ok && m->kv.page_indptr && m->kv.page_indices && m->kv.last_page_len;
    } else {
        m->kv.max_blocks = cm->kv.max_blocks;
        m->kv.block_table = calloc((size_t)B * cm->kv.max_blocks + 1, sizeof(int32_t));
        m->kv.lens = calloc(B, sizeof(int32_t));
        ok = ok && m->kv.block_table && m->kv.lens;
    }
    if (!ok) {
        attn_rb_step_free(out);
        return ATTN_E_NOMEM;
    }
    uint32_t pi = 0;
    for (uint32_t b = 0; b < B; b++) {
        m->requests[b] = cm->requests[b];
        m->requests[b].cache_len = T[b];
        m->requests[b].new_len = C[b];
        m->qo_indptr[b + 1] = m->qo_indptr[b] + (int32_t)C[b];
        const int64_t len = T[b] + C[b], pages = (len + P - 1) / P;
        if (cm->kv.format == ATTN_KV_CSR) {
            for (int64_t j = 0; j < pages; j++)
                m->kv.page_indices[pi++] = cm->kv.page_indices[cm->kv.page_indptr[b] + j];
            m->kv.page_indptr[b + 1] = (int32_t)pi;
            m->kv.last_page_len[b] = (int32_t)(len - (pages - 1) * P);
        } else {
            memcpy(m->kv.block_table + (size_t)b * cm->kv.max_blocks,
                   cm->kv.block_table + (size_t)b * cm->kv.max_blocks,
                   sizeof(int32_t) * cm->kv.max_blocks);
            m->kv.lens[b] = (int32_t)len;
        }
    }
    m->kv.num_page_indices = pi;
    out->total_q = m->qo_indptr[B];
    const uint32_t hq = cm->num_qo_heads, hkv = cap->g.num_kv_heads, d = cap->g.head_dim_qk;
    out->o_elems = (size_t)out->total_q * hq * cap->g.head_dim_vo;
    out->lse_elems = (size_t)out->total_q * hq;
    const size_t qn = (size_t)cap->total_q * hq * d, kn = (size_t)cap->total_q * hkv * d;
    out->q = calloc(qn ? qn : 1, attn_dtype_size(cm->q_dtype));
    out->k_new = calloc(kn ? kn : 1, attn_dtype_size(cap->g.kv_dtype));
    out->v_new = calloc(kn ? kn : 1, attn_dtype_size(cap->g.kv_dtype));
    if (!out->q || !out->k_new || !out->v_new) {
        attn_rb_step_free(out);
        return ATTN_E_NOMEM;
    }
    uint64_t s = seed ^ 0x9e3779b97f4a7c15ull;
    random_fill(out->q, cm->q_dtype, qn, &s);
    random_fill(out->k_new, cap->g.kv_dtype, kn, &s);
    random_fill(out->v_new, cap->g.kv_dtype, kn, &s);
    return 0;
}

void attn_rb_step_free(attn_rb_step *s)
{
    free(s->m.requests);
    free(s->m.qo_indptr);
    free(s->m.kv.page_indptr);
    free(s->m.kv.page_indices);
    free(s->m.kv.last_page_len);
    free(s->m.kv.block_table);
    free(s->m.kv.lens);
    free(s->q);
    free(s->k_new);
    free(s->v_new);
    memset(s, 0, sizeof *s);
}
