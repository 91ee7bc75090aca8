/* Test helper: random ragged mixed microbatches over a random paged pool,
 * and an unsplit fp64 reference to check engines against.
 *
 * A batch owns one pool layer (K and V stores), a manifest whose arrays are
 * malloc'ed (free with attn_rb_free), and the q / k_new / v_new inputs.
 * Physical pages are a random permutation of the pool, so logical and
 * physical page order differ (seed 0x04D); with `poison` every byte that is
 * not visible history (unused pages, page tails, the rows the append will
 * write) holds NaN, so any stray read shows up in the output (seed 0x04F).
 */
#ifndef ATTN_TESTS_RANDOM_BATCH_H
#define ATTN_TESTS_RANDOM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/types.h"

/* What to draw.  Zero fields take the defaults noted. */
typedef struct attn_rb_spec {
    uint32_t num_requests; /* B (default 4) */
    int64_t max_cache_len; /* T drawn in [1, max] for append/decode (default 40) */
    int64_t max_new_len;   /* C drawn in [1, max] for prefill, [2, max] for append (default 6) */
    uint32_t phase_mask;   /* bit (1u << attn_phase) per allowed phase (default all three) */
    uint32_t num_qo_heads; /* default 4 */
    uint32_t num_kv_heads; /* default 2 */
    uint32_t head_dim_qk;  /* default 8 */
    uint32_t head_dim_vo;  /* default head_dim_qk */
    uint32_t page_size;    /* default 4 */
    uint32_t spare_pages;  /* unused pages in the pool (default 0) */
    attn_dtype kv_dtype;
    attn_dtype q_dtype;
    attn_layout layout;
    attn_kv_format format;
    attn_mask_kind mask_kind; /* window/sink parameters and dense/flashmask data are drawn */
    bool poison;              /* NaN in every byte that is not visible history */
} attn_rb_spec;

typedef struct attn_rb {
    attn_rb_spec spec;    /* with defaults filled in */
    attn_pool_geometry g; /* one layer */
    attn_manifest m;      /* arrays malloc'ed */
    void *k, *v;          /* the pool layer */
    size_t k_bytes, v_bytes;
    void *q, *k_new, *v_new;
    size_t q_bytes, k_new_bytes, v_new_bytes;
    int64_t total_q;
    size_t o_elems;   /* total_q * H_q * d_vo */
    size_t lse_elems; /* total_q * H_q */
} attn_rb;

/* splitmix64 step: the next 64 random bits of state *s. */
uint64_t attn_rb_next(uint64_t *s);

/* A uniform double in [0, 1). */
double attn_rb_uniform(uint64_t *s);

/* A uniform integer in [lo, hi] (inclusive). */
int64_t attn_rb_range(uint64_t *s, int64_t lo, int64_t hi);

/* Draw a batch with random phases and lengths; returns 0 or ATTN_E_NOMEM. */
int attn_rb_make(attn_rb *rb, const attn_rb_spec *spec, uint64_t seed);

/* Build a batch with the given lengths (T[b], C[b]); everything else random. */
int attn_rb_make_lengths(attn_rb *rb, const attn_rb_spec *spec, const int64_t *T, const int64_t *C,
                         uint64_t seed);

/* Release everything the batch owns. */
void attn_rb_free(attn_rb *rb);

/* FNV-1a 64 of n bytes: the pool checksum of "byte-identical" assertions. */
uint64_t attn_rb_checksum(const void *p, size_t n);

/* Checksum of the batch's K and V stores together. */
uint64_t attn_rb_pool_checksum(const attn_rb *rb);

/* Unsplit fp64 reference over the batch's logical inputs (values as stored,
 * i.e. already rounded to their dtypes): o[total_q][H_q][d_vo],
 * lse[total_q][H_q], with the mask's visibility and O = 0, LSE = -inf for an
 * all-masked row (seed 0x02C).  Reads the page table itself, not through
 * kernels/common/addr.h.  Returns 0 or an attn_err. */
int attn_rb_reference(const attn_rb *rb, double *o, double *lse);

/* Staged new row i of request b (k_new or v_new), K/V head h, lane x,
 * widened to fp32: what a commit must write at logical row T_b + i. */
float attn_rb_new_value(const attn_rb *rb, uint32_t b, int64_t i, uint32_t h, uint32_t x,
                        bool want_v);

/* Stored value of row t of request b in the pool (by the page table). */
float attn_rb_pool_value(const attn_rb *rb, uint32_t b, int64_t t, uint32_t h, uint32_t x,
                         bool want_v);

/* One step of a capacity batch (graph-mode tests, seed 0x03G): the first
 * B requests of `cap` with lengths T[b] <= cap's T_b and T[b] + C[b] <=
 * cap's T_b + C_b, on cap's pool (each request keeps the first pages of its
 * list, so its history is cap's); a length mask only.  q, k_new and v_new
 * hold cap's q rows (the envelope's), the step's first, drawn from seed. */
typedef struct attn_rb_step {
    attn_manifest m; /* arrays malloc'ed */
    void *q, *k_new, *v_new;
    int64_t total_q;
    size_t o_elems, lse_elems; /* the step's rows */
} attn_rb_step;

/* Build the step; 0, ATTN_E_RANGE for lengths outside cap's, or ATTN_E_NOMEM. */
int attn_rb_make_step(const attn_rb *cap, uint32_t B, const int64_t *T, const int64_t *C,
                      uint64_t seed, attn_rb_step *out);

/* Release what a step owns. */
void attn_rb_step_free(attn_rb_step *s);

#endif
