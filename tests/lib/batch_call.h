/* Test helper: a random batch as a direct CPU engine call (the reference
 * that engine, server and daemon tests compare against) and as the parts of
 * server requests (the kv_write that loads its pool, the run arguments). */
#ifndef ATTN_TESTS_BATCH_CALL_H
#define ATTN_TESTS_BATCH_CALL_H

#include <stdbool.h>

#include "attn/client.h"
#include "attn/error.h"
#include "engines/cpu/engine.h"
#include "tests/lib/random_batch.h"

/* Fill `c` for the batch: its manifest, geometry and inputs, the pool layer
 * `k_store`/`v_store` (the batch's own when NULL), outputs `o` and `lse`;
 * no plan, no translator, no fp64 outputs.  Callers override what differs. */
void attn_rb_cpu_call(const attn_rb *rb, void *k_store, void *v_store, void *o, float *lse,
                      bool commit, attn_cpu_call *c);

/* Run the engine (default options, commit) on a copy of the batch's pool,
 * leaving the batch untouched: *k2 and *v2 get the committed copies, *o and
 * *lse the fp32 outputs, all malloc'ed for the caller.  Returns the engine's
 * result. */
int attn_rb_cpu_attend_copy(const attn_rb *rb, void **k2, void **v2, float **o, float **lse,
                            attn_error_detail *e);

/* A kv_write of the batch's whole pool layer to the pool its geometry
 * names: pages[] (num_pages entries, owned by the caller) gets 0, 1, ... */
void attn_rb_kv_write_all(const attn_rb *rb, int32_t *pages, attn_request *req);

/* The batch's q, k_new and v_new as run arguments, asking for the LSE. */
void attn_rb_run_args(const attn_rb *rb, attn_run_args *a);

#endif
