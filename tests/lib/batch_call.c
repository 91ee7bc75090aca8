/* A random batch as an engine call and as requests (see batch_call.h). */
#include "tests/lib/batch_call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void attn_rb_cpu_call(const attn_rb *rb, void *k_store, void *v_store, void *o, float *lse,
                      bool commit, attn_cpu_call *c)
{
    memset(c, 0, sizeof *c);
    c->m = &rb->m;
    c->g = &rb->g;
    c->k_store = k_store ? k_store : rb->k;
    c->v_store = v_store ? v_store : rb->v;
    c->q = rb->q;
    c->k_new = rb->k_new;
    c->v_new = rb->v_new;
    c->o = o;
    c->lse = lse;
    c->commit = commit;
}

int attn_rb_cpu_attend_copy(const attn_rb *rb, void **k2, void **v2, float **o, float **lse,
                            attn_error_detail *e)
{
    attn_cpu_call cc;
    *k2 = malloc(rb->k_bytes);
    *v2 = malloc(rb->v_bytes);
    memcpy(*k2, rb->k, rb->k_bytes);
    memcpy(*v2, rb->v, rb->v_bytes);
    *o = calloc(rb->o_elems, sizeof **o);
    *lse = calloc(rb->lse_elems, sizeof **lse);
    attn_rb_cpu_call(rb, *k2, *v2, *o, *lse, true, &cc);
    return attn_cpu_attend(&cc, NULL, e);
}

void attn_rb_kv_write_all(const attn_rb *rb, int32_t *pages, attn_request *req)
{
    for (uint32_t i = 0; i < rb->g.num_pages; i++)
        pages[i] = (int32_t)i;
    memset(req, 0, sizeof *req);
    req->op = ATTN_OP_KV_WRITE;
    snprintf(req->kv.pool, sizeof req->kv.pool, "%s", rb->g.name);
    req->kv.pages = pages;
    req->kv.num_pages = rb->g.num_pages;
    req->kv.k = (attn_bytes){rb->k, rb->k_bytes};
    req->kv.v = (attn_bytes){rb->v, rb->v_bytes};
}

void attn_rb_run_args(const attn_rb *rb, attn_run_args *a)
{
    memset(a, 0, sizeof *a);
    a->q = (attn_bytes){rb->q, rb->q_bytes};
    a->k_new = (attn_bytes){rb->k_new, rb->k_new_bytes};
    a->v_new = (attn_bytes){rb->v_new, rb->v_new_bytes};
    a->return_lse = true;
}
