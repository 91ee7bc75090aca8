/* What one microbatch is: phases, packed query offsets, the logical ledgers
 * of seed 0x08, and the one complete manifest validator.
 *
 * A manifest (include/attn/types.h) freezes, per request b, the committed
 * length T_b and the new length C_b.  Phase follows from (T_b, C_b) alone
 * (seed 0x08B/H); qo_indptr is their prefix sum (seed 0x08F).  The ledgers
 * count *logical score cells* only (seed 0x08B: not FLOPs, tiles or bytes).
 *
 * attn_manifest_validate is the gate in front of every engine: a manifest it
 * accepts can never make an engine read or write outside the pool, the
 * packed query/output rows, or the mask data (ARCHITECTURE.md step 2).
 */
#ifndef ATTN_PROTOCOL_MANIFEST_H
#define ATTN_PROTOCOL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/names.h" /* attn_phase_classify, attn_phase_name, attn_manifest_sm_scale */
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Logical cell ledger of one request (seed 0x08B/C). */
typedef struct attn_phase_ledger {
    int64_t rect;          /* C (T + C): the full score rectangle */
    int64_t visible;       /* C T + C (C + 1) / 2 under bottom-right causality */
    int64_t causal_masked; /* C (C - 1) / 2, independent of T */
    int64_t post_len;      /* T + C after a valid commit */
} attn_phase_ledger;

/* Fill the ledger of one request with T = cache_len, C = new_len (>= 0). */
void attn_phase_ledger_of(int64_t cache_len, int64_t new_len, attn_phase_ledger *out);

/* Ledger of a whole mixed batch (seed 0x08F). */
typedef struct attn_batch_ledger {
    uint32_t num_requests;
    uint32_t phase_count[ATTN_PHASE_COUNT]; /* requests per attn_phase */
    int64_t total_q;                        /* sum C_b: packed query rows = rows appended */
    int64_t visible;                        /* sum of per-request visible cells */
    int64_t rect;                           /* sum of per-request rectangles */
    int64_t causal_masked;                  /* sum of C_b (C_b - 1) / 2 */
    int64_t max_q;                          /* max C_b */
    int64_t max_kv;                         /* max T_b + C_b */
    int64_t envelope;                       /* B * max_q * max_kv: a padding envelope, not work */
    int64_t beyond_rect; /* envelope - rect: cells outside every request rectangle */
} attn_batch_ledger;

/* Build the batch ledger; ATTN_E_EMPTY_BATCH / ATTN_E_PHASE on bad requests. */
int attn_batch_ledger_build(const attn_request_desc *reqs, uint32_t num_requests,
                            attn_batch_ledger *out, attn_error_detail *err);

/* Derive qo_indptr[0..B] = prefix sums of new_len (seed 0x08F); ATTN_E_RANGE
 * when the total does not fit int32, ATTN_E_PHASE on a bad request. */
int attn_qo_indptr_derive(const attn_request_desc *reqs, uint32_t num_requests, int32_t *qo_indptr,
                          attn_error_detail *err);

/* Check a given qo_indptr: length B + 1 (`len`), starts at 0, monotone, and
 * qo_indptr[b+1] - qo_indptr[b] == C_b; else ATTN_E_QO_INDPTR with the field. */
int attn_qo_indptr_check(const attn_request_desc *reqs, uint32_t num_requests,
                         const int32_t *qo_indptr, size_t len, attn_error_detail *err);

/* Check a pool geometry on its own (sizes non-zero, enums known, byte size
 * of one layer representable); ATTN_E_RANGE / ATTN_E_DTYPE with "pool.<field>". */
int attn_pool_geometry_validate(const attn_pool_geometry *g, attn_error_detail *err);

/* Validate a manifest against the pool it names, completely: structure
 * (counts, enums, arrays present), then semantics (phases, qo_indptr, unique
 * ids, head ratio, sm_scale, page table via attn_kv_table_validate, mask via
 * attn_mask_validate, written rows claimed by one request only).  Returns 0
 * or the specific ATTN_E_* with the offending field path in `err`. */
int attn_manifest_validate(const attn_manifest *m, const attn_pool_geometry *g,
                           attn_error_detail *err);

/* attn_manifest_validate without the page table checks, for callers that
 * address K/V through another encoding of seed 0x04 (contiguous with a
 * cache-row remap, packed ragged) and check that translator themselves. */
int attn_manifest_validate_core(const attn_manifest *m, const attn_pool_geometry *g,
                                attn_error_detail *err);

/* Free every array a decoder or attn_manifest_clone allocated with malloc
 * (requests, qo_indptr, kv and mask arrays) and zero those pointers; the
 * struct itself is the caller's. */
void attn_manifest_free(attn_manifest *m);

/* Deep copy of `src` into `dst` (arrays malloc'ed; free with
 * attn_manifest_free).  Returns 0 or ATTN_E_NOMEM (dst then holds nothing). */
int attn_manifest_clone(attn_manifest *dst, const attn_manifest *src);

/* Packed query rows of a manifest: sum of new_len (qo_indptr[B] once valid). */
int64_t attn_manifest_total_q(const attn_manifest *m);

/* One human-readable summary for the diagnostic: a line per request with its
 * id, phase, (T, C), query slice and ledger, then the batch ledger.  Writes
 * at most `cap` bytes (NUL included) and returns the length it needed, like
 * snprintf. */
size_t attn_manifest_summary(const attn_manifest *m, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
