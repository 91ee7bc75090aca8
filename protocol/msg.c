/* Typed messages: op names, ownership, and the shape checks of PROTOCOL.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"
#include "kernels/common/dtype.h" /* the one fp16/bf16 widening (seed 0x03H) */
#include "protocol/manifest.h"
#include "protocol/msg.h"

void attn_request_free(attn_request *req)
{
    if (req == NULL)
        return;
    attn_manifest_free(&req->manifest);
    free(req->kv.pages);
    req->kv.pages = NULL;
    req->kv.num_pages = 0;
}

void attn_reply_free(attn_reply *rep)
{
    if (rep == NULL)
        return;
    if (rep->backing != NULL && rep->backing_free != NULL)
        rep->backing_free(rep->backing);
    memset(rep, 0, sizeof *rep);
}

uint64_t attn_tensor_bytes(uint64_t n0, uint64_t n1, uint64_t n2, attn_dtype dt, bool *ok)
{
    uint64_t es = attn_dtype_size(dt);
    uint64_t r = es;
    const uint64_t dims[3] = {n0, n1, n2};
    *ok = es != 0;
    for (int k = 0; k < 3 && *ok; k++) {
        if (dims[k] != 0 && r > UINT64_MAX / dims[k])
            *ok = false;
        else
            r *= dims[k];
    }
    return *ok ? r : 0;
}

float attn_tensor_elem_f32(const attn_bytes *t, attn_dtype dt, size_t i)
{
    /* wire payloads may sit at any byte offset inside a frame: memcpy */
    const char *p = (const char *)t->data;
    uint16_t h;
    float f;
    switch (dt) {
    case ATTN_FP32:
        memcpy(&f, p + 4 * i, 4);
        return f;
    case ATTN_FP16:
        memcpy(&h, p + 2 * i, 2);
        return attn_f16_to_f32(h);
    case ATTN_BF16:
        memcpy(&h, p + 2 * i, 2);
        return attn_bf16_to_f32(h);
    }
    return NAN;
}

/* One tensor's byte length against its shape (ATTN_E_SHAPE with the field);
 * a reference (ref->buf != 0) is checked by its declared bytes, the same
 * rule: where the bytes live is checked later, against the buffer. */
static int check_tensor(const attn_bytes *t, const attn_tensor_ref *ref, const char *field,
                        uint64_t n0, uint64_t n1, uint64_t n2, attn_dtype dt,
                        attn_error_detail *err)
{
    bool ok;
    uint64_t want = attn_tensor_bytes(n0, n1, n2, dt, &ok);
    bool is_ref = ref != NULL && ref->buf != 0;
    uint64_t have = is_ref ? ref->bytes : t->len;
    if (!ok)
        return attn_error_set(err, ATTN_E_TOO_LARGE, field, "%s shape [%llu, %llu, %llu] overflows",
                              field, (unsigned long long)n0, (unsigned long long)n1,
                              (unsigned long long)n2);
    if (have != want || (!is_ref && want > 0 && t->data == NULL))
        return attn_error_set(
            err, ATTN_E_SHAPE, field, "%s has %llu bytes but [%llu, %llu, %llu] %s needs %llu",
            field, (unsigned long long)have, (unsigned long long)n0, (unsigned long long)n1,
            (unsigned long long)n2, attn_dtype_name(dt), (unsigned long long)want);
    return 0;
}

int attn_run_check_shapes(const attn_run_args *a, const attn_manifest *m,
                          const attn_pool_geometry *g, attn_error_detail *err)
{
    int rv;
    if (a->has_q_dtype && a->q_dtype != m->q_dtype)
        return attn_error_set(err, ATTN_E_DTYPE, "q_dtype",
                              "run says q_dtype %s but the plan has %s",
                              attn_dtype_name(a->q_dtype), attn_dtype_name(m->q_dtype));
    if (m->qo_indptr == NULL || m->qo_indptr[m->num_requests] < 0)
        return attn_error_set(err, ATTN_E_QO_INDPTR, "qo_indptr",
                              "qo_indptr is missing or negative");
    uint64_t total_q = (uint64_t)m->qo_indptr[m->num_requests];
    if ((rv = check_tensor(&a->q, &a->q_ref, "q", total_q, m->num_qo_heads, g->head_dim_qk,
                           m->q_dtype, err)) != 0)
        return rv;
    if (a->kv_written) {
        /* the new rows are in the pool already: sending them as well would
         * leave two versions of one row, so either is refused by name */
        if (a->k_new.data != NULL || a->k_new.len != 0 || a->k_new_ref.buf != 0)
            return attn_error_set(err, ATTN_E_SHAPE, "k_new",
                                  "a kv_written run takes no k_new: the new rows are already in "
                                  "the exported pool");
        if (a->v_new.data != NULL || a->v_new.len != 0 || a->v_new_ref.buf != 0)
            return attn_error_set(err, ATTN_E_SHAPE, "v_new",
                                  "a kv_written run takes no v_new: the new rows are already in "
                                  "the exported pool");
    } else if ((rv = check_tensor(&a->k_new, &a->k_new_ref, "k_new", total_q, g->num_kv_heads,
                                  g->head_dim_qk, g->kv_dtype, err)) ||
               (rv = check_tensor(&a->v_new, &a->v_new_ref, "v_new", total_q, g->num_kv_heads,
                                  g->head_dim_vo, g->kv_dtype, err)))
        return rv;
    /* outputs into a buffer: O [total_q, H_qo, d_vo] in q_dtype, LSE fp32 [total_q, H_qo];
     * they have no inline form, so the byte range stands empty */
    const attn_bytes none = {NULL, 0};
    if (a->o_ref.buf != 0 && (rv = check_tensor(&none, &a->o_ref, "o", total_q, m->num_qo_heads,
                                                g->head_dim_vo, m->q_dtype, err)))
        return rv;
    if (a->lse_ref.buf != 0)
        return check_tensor(&none, &a->lse_ref, "lse", total_q, m->num_qo_heads, 1, ATTN_FP32, err);
    return 0;
}

int attn_kv_check(const attn_kv_args *a, attn_op op, const attn_pool_geometry *g,
                  attn_error_detail *err)
{
    int rv;
    if (a->layer >= g->layers)
        return attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u is outside [0, %u)", a->layer,
                              g->layers);
    if (a->has_kv_dtype && a->kv_dtype != g->kv_dtype)
        return attn_error_set(err, ATTN_E_DTYPE, "kv_dtype", "kv_dtype %s but the pool holds %s",
                              attn_dtype_name(a->kv_dtype), attn_dtype_name(g->kv_dtype));
    for (uint32_t i = 0; i < a->num_pages; i++)
        if (a->pages[i] < 0 || (uint32_t)a->pages[i] >= g->num_pages) {
            char f[32];
            snprintf(f, sizeof f, "pages[%u]", i);
            return attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL, f, "page %d is outside [0, %u)",
                                  a->pages[i], g->num_pages);
        }
    if (op != ATTN_OP_KV_WRITE)
        return 0;
    /* a page named twice would be written twice, the last copy winning
     * silently: refused, naming the second mention (pages are in range here) */
    {
        uint8_t *seen = calloc((g->num_pages + 7) / 8, 1);
        if (seen == NULL)
            return attn_error_set(err, ATTN_E_NOMEM, "pages", "out of memory");
        for (uint32_t i = 0; i < a->num_pages; i++) {
            uint32_t pg = (uint32_t)a->pages[i];
            if (seen[pg / 8] & (1u << (pg % 8))) {
                char f[32];
                free(seen);
                snprintf(f, sizeof f, "pages[%u]", i);
                return attn_error_set(err, ATTN_E_RANGE, f,
                                      "page %u appears twice; a kv_write names each page once", pg);
            }
            seen[pg / 8] |= (uint8_t)(1u << (pg % 8));
        }
        free(seen);
    }
    /* NHD [n, P, H, d] and HND [n, H, P, d] have the same byte length. */
    uint64_t rows = (uint64_t)a->num_pages * g->page_size;
    if ((rv = check_tensor(&a->k, NULL, "k", rows, g->num_kv_heads, g->head_dim_qk, g->kv_dtype,
                           err)))
        return rv;
    return check_tensor(&a->v, NULL, "v", rows, g->num_kv_heads, g->head_dim_vo, g->kv_dtype, err);
}
