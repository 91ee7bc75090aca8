/* Test helper (integration tests only: it needs libattn): a random batch
 * served by a running attnd -- its pool created under a name, its whole
 * K/V written, its manifest planned.  Header-only, so the unit tests that
 * link tests/lib without libattn do not pull it in. */
#ifndef ATTN_TESTS_SERVED_BATCH_H
#define ATTN_TESTS_SERVED_BATCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/client.h"
#include "tests/lib/batch_call.h"

/* Make batch `rb` (num_requests requests, 2 spare pages, cache lengths up to
 * 40, `seed`), create its pool `name` on `c`, write every page and plan it:
 * *pages (malloc'ed, 0, 1, ...) and *plan_id for the caller.  0, or -1 at
 * the first step that fails. */
static inline int attn_served_batch(attn_client *c, attn_rb *rb, uint32_t num_requests,
                                    uint32_t seed, const char *name, int32_t **pages,
                                    uint64_t *plan_id)
{
    attn_rb_spec spec;
    attn_request req;
    attn_reply rep;
    memset(&spec, 0, sizeof spec);
    spec.num_requests = num_requests;
    spec.spare_pages = 2;
    spec.max_cache_len = 40;
    if (attn_rb_make(rb, &spec, seed) != 0)
        return -1;
    snprintf(rb->g.name, sizeof rb->g.name, "%s", name);
    snprintf(rb->m.pool, sizeof rb->m.pool, "%s", name);
    if (attn_pool_create(c, &rb->g, &rep) != 0)
        return -1;
    attn_reply_free(&rep);
    *pages = malloc(sizeof(int32_t) * rb->g.num_pages);
    if (*pages == NULL)
        return -1;
    attn_rb_kv_write_all(rb, *pages, &req);
    memset(&rep, 0, sizeof rep);
    if (attn_call(c, &req, &rep) != 0)
        return -1;
    attn_reply_free(&rep);
    if (attn_plan(c, &rb->m, &rep) != 0)
        return -1;
    *plan_id = rep.plan_id;
    attn_reply_free(&rep);
    return 0;
}

#endif
