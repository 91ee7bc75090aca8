/* Correctness evidence of one run (seed 0x07G, 0x0BG): recompute it with the
 * CPU reference engine in fp64 accumulation and compare output, LSE and,
 * when the run committed, the K/V rows it wrote, at the tolerance the call
 * key declares (planner/key.h attn_tolerance_for).
 */
#ifndef ATTN_DAEMON_VERIFY_H
#define ATTN_DAEMON_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "planner/diag.h"
#include "planner/key.h"
#include "planner/plan.h"

/* One run to check.  Stores are host copies of the layer (after the
 * candidate's commit is fine: the reference reads new rows from k_new/v_new,
 * never from the pool, seed 0x08C). */
typedef struct attn_verify_call {
    const attn_manifest *m;
    const attn_pool_geometry *g;
    const void *k_store, *v_store; /* host layer, g->kv_dtype */
    const void *q, *k_new, *v_new; /* the run's inputs */
    const void *o;                 /* candidate output [total_q, H_q, d_vo] in m->q_dtype */
    const float *lse;              /* candidate LSE [total_q, H_q], or NULL */
    bool committed;                /* the candidate committed: compare the written rows */
} attn_verify_call;

/* Compare candidate O (dtype `o_dtype`) and LSE against a reference O and LSE
 * (fp32) over `rows` = total_q * H_q rows of width d_vo: max abs, max rel
 * (normwise: max|err| / max|ref|, seed 0x07G), relative L2 and LSE max abs;
 * -inf LSE rows must agree and carry a zero O (all-masked policy); passes
 * when the declared metric is within tol.rtol and the LSE within tol.lse_atol. */
void attn_verify_compare(const void *o, attn_dtype o_dtype, const float *lse, const float *ref_o,
                         const float *ref_lse, uint64_t rows, uint32_t d_vo, attn_tolerance tol,
                         attn_verify_result *out);

/* Recompute the call with the CPU engine (fp64 accumulation, fp32 output,
 * no commit), compare at the declared tolerance, and check committed rows.
 * Returns 0 when the comparison ran (pass or fail is in `out`), or the
 * engine's error. */
int attn_verify_run(const attn_verify_call *c, attn_verify_result *out, attn_error_detail *d);

#endif
