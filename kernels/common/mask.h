/* Mask programs: visibility over logical score coordinates (seed 0x05, 0x06, 0x08B).
 *
 * Coordinates are per request b: T committed keys, C new query rows; local
 * query row i (0 <= i < C) sits at absolute position T+i and key j ranges
 * over [0, T+C).  Every kind reduces to one predicate V(b, i, j) and, so that
 * kernels skip work instead of testing cells, to two summaries:
 *
 *   - a per-row key-range summary (attn_mask_row_keys): at most two sorted,
 *     disjoint half-open key ranges; `exact` says whether every key inside
 *     them is visible (causal/none/window/sink) or whether the union is only
 *     a hull that still needs the per-cell predicate (flashmask/dense);
 *   - a SKIP/FULL/PARTIAL tile classifier (attn_mask_classify_tile) that is
 *     exact for the closed-form kinds and dense masks, and conservative for
 *     FlashMask (min/max block summaries, seed 0x06C/D): it never says SKIP
 *     for a tile holding a visible cell nor FULL for one holding a hidden cell.
 *
 * A SKIP tile contributes the empty identity of seed 0x02C (seed 0x06F), so
 * engines simply do not push its keys.  A PARTIAL tile must drop hidden keys
 * *before* they reach max and sum (seed 0x05C).
 *
 * The host builds an attn_mask_prog once per manifest (mask.c).  It is plain
 * data: a small struct with pointers into one arena that holds per-request
 * offsets, a validated copy of the FlashMask vectors and dense bits, the
 * FlashMask block summaries and per-row key hulls.  A CUDA engine copies the
 * arena to the device in one transfer and calls attn_mask_prog_rebase to get
 * a struct it can pass to a kernel by value.
 *
 * Everything below marked ATTN_HD compiles as C11 and as CUDA device code.
 */
#ifndef ATTN_COMMON_MASK_H
#define ATTN_COMMON_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/names.h" /* attn_mask_kind_name */
#include "attn/types.h"
#include "hd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default FlashMask summary block width B_c in key columns (seed 0x06G uses 64). */
#define ATTN_MASK_BLOCK_COLS_DEFAULT 64u

/* Tile classes of seed 0x05C. */
typedef enum attn_tile_class {
    ATTN_TILE_SKIP = 0,    /* every cell hidden: merge the empty identity, load nothing */
    ATTN_TILE_FULL = 1,    /* every cell visible: ordinary online update, no element mask */
    ATTN_TILE_PARTIAL = 2, /* mixed or unknown: evaluate attn_mask_visible per cell */
} attn_tile_class;

/* Indices of the eight FlashMask block summaries (seed 0x06C), in seed order. */
enum {
    ATTN_FM_UTS_MIN = 0,
    ATTN_FM_UTS_MAX = 1,
    ATTN_FM_UTE_MIN = 2,
    ATTN_FM_UTE_MAX = 3,
    ATTN_FM_LTS_MIN = 4,
    ATTN_FM_LTS_MAX = 5,
    ATTN_FM_LTE_MIN = 6,
    ATTN_FM_LTE_MAX = 7,
    ATTN_FM_SUMMARY_LEN = 8
};

/* What a mask needs from a backend (the mask factor of seed 0x07B/0x07D).
 * Exactly one bit is set for a valid mask; a backend admits the mask when
 * (needs & ~supported) == 0. */
typedef enum attn_mask_need {
    ATTN_MASK_NEED_CAUSAL = 1u << 0,   /* length-only bottom-right causal (T, C) */
    ATTN_MASK_NEED_NONE = 1u << 1,     /* length-only, every key of [0, T+C) */
    ATTN_MASK_NEED_WINDOW = 1u << 2,   /* causal plus a left window */
    ATTN_MASK_NEED_SINK = 1u << 3,     /* causal plus window plus leading sink keys */
    ATTN_MASK_NEED_INTERVAL = 1u << 4, /* per-column FlashMask intervals */
    ATTN_MASK_NEED_DENSE = 1u << 5,    /* explicit per-cell bits */
} attn_mask_need;

/* Per-request offsets and ledger inside a mask program. */
typedef struct attn_mask_req_info {
    int64_t T;          /* committed keys */
    int64_t C;          /* new query rows */
    int64_t col;        /* first key column of the request in fm_* (flashmask) */
    int64_t row;        /* first query row of the request in row_lo/row_hi (packed qo offset) */
    int64_t blk;        /* first summary block of the request (flashmask) */
    int64_t dense_byte; /* first byte of the request in dense_bits (dense) */
    uint64_t visible;   /* visible cells of the request (seed 0x08B ledger) */
} attn_mask_req_info;

/* A validated, host-built mask program.  Fields are read-only after
 * attn_mask_prog_build; pointers point into `arena` (host) or, after
 * attn_mask_prog_rebase, into a device copy of it. */
typedef struct attn_mask_prog {
    attn_mask_kind kind;
    int32_t left;           /* window, sink */
    int32_t sinks;          /* sink */
    bool fm_causal;         /* flashmask: also apply bottom-right causality */
    bool true_means_masked; /* dense: polarity resolved at build time (seed 0x05B) */
    uint32_t num_requests;
    uint32_t block_cols; /* flashmask summary width B_c */
    uint64_t total_visible;
    const attn_mask_req_info *req; /* [B] */
    /* flashmask: copies of the four endpoint vectors, request-concatenated */
    const int32_t *fm_lts, *fm_lte, *fm_uts, *fm_ute;
    /* flashmask: [num_blocks][ATTN_FM_SUMMARY_LEN], blocks request-concatenated */
    const int32_t *fm_summary;
    uint64_t num_blocks;
    /* flashmask, dense: per packed query row the hull [lo, hi) of its visible keys */
    const int64_t *row_lo, *row_hi;
    /* dense: copy of the bits, same layout as attn_mask.dense_bits */
    const uint8_t *dense_bits;
    /* host arena owning everything above; freed by attn_mask_prog_free */
    void *arena;
    size_t arena_bytes;
} attn_mask_prog;

/* Visible keys of one query row: the union of [lo0, hi0) and [lo1, hi1),
 * sorted and disjoint (either may be empty, lo == hi).  When `exact` is
 * false the union is only a hull: test each key with attn_mask_visible. */
typedef struct attn_row_keys {
    int64_t lo0, hi0;
    int64_t lo1, hi1;
    bool exact;
} attn_row_keys;

/* ---- host API (mask.c) ---------------------------------------------------- */

/* Check a mask against the B requests it covers; 0 or ATTN_E_MASK_* (or
 * ATTN_E_MISSING/ATTN_E_SHAPE/ATTN_E_RANGE for absent or mis-sized arrays),
 * with the offending field path in `err` (e.g. "mask.lte[12]"). */
int attn_mask_validate(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                       attn_error_detail *err);

/* Validate and build the program with the default summary width. */
int attn_mask_prog_build(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                         attn_mask_prog *out, attn_error_detail *err);

/* Validate and build the program with FlashMask summary blocks of `block_cols`
 * key columns (the kernel's key-tile width; must be >= 1). */
int attn_mask_prog_build_blocks(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                                uint32_t block_cols, attn_mask_prog *out, attn_error_detail *err);

/* Release the arena of a host-built program and zero the struct. */
void attn_mask_prog_free(attn_mask_prog *p);

/* Return a copy of `host` whose pointers point into `dev_arena`, a byte-exact
 * copy of host->arena (e.g. after cudaMemcpy); the copy owns nothing. */
attn_mask_prog attn_mask_prog_rebase(const attn_mask_prog *host, void *dev_arena);

/* Visible cells of request b (seed 0x08B ledger: C*T + C(C+1)/2 when causal). */
uint64_t attn_mask_visible_cells(const attn_mask_prog *p, uint32_t b);

/* The backend capability a mask needs: one ATTN_MASK_NEED_* bit, 0 for an unknown kind. */
uint32_t attn_mask_needs(const attn_mask *m);

/* A short name for a need bit ("causal", "none", "window", "sink", "interval", "dense"). */
const char *attn_mask_need_name(uint32_t need);

/* Convert one request's dense C x (T+C) bit matrix (layout of attn_mask.dense_bits,
 * starting at `bits`) into FlashMask vectors of length T+C.  Rejects with
 * ATTN_E_MASK_UNREPRESENTABLE (field "mask.bits") any column with more than two
 * masked runs (seed 0x06H); ATTN_E_MASK_POLARITY when polarity is unset. */
int attn_mask_dense_to_flashmask(const uint8_t *bits, attn_mask_polarity polarity, int64_t T,
                                 int64_t C, int32_t *lts, int32_t *lte, int32_t *uts, int32_t *ute,
                                 attn_error_detail *err);

/* Convert a whole dense mask into a FlashMask mask (fm_causal false) whose four
 * vectors are malloc'ed; release them with attn_mask_flashmask_release. */
int attn_mask_dense_to_flashmask_all(const attn_mask *dense, const attn_request_desc *req,
                                     uint32_t B, attn_mask *out, attn_error_detail *err);

/* The eight block summaries (seed 0x06C) of `n_cols` FlashMask columns in
 * blocks of `block_cols`: out is [ceil(n_cols / block_cols)][ATTN_FM_SUMMARY_LEN].
 * Taken over non-empty intervals; a block with an empty interval in a family
 * gets that family's start-max INT32_MAX, so it never claims to cover. */
void attn_mask_fm_summarize(const int32_t *lts, const int32_t *lte, const int32_t *uts,
                            const int32_t *ute, uint64_t n_cols, uint32_t block_cols, int32_t *out);

/* Free the four FlashMask vectors of a mask made by attn_mask_dense_to_flashmask_all. */
void attn_mask_flashmask_release(attn_mask *m);

/* ---- host and device helpers (ATTN_HD) ------------------------------------ */

ATTN_HD int64_t attn__mask_min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

ATTN_HD int64_t attn__mask_max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* One bit of a dense mask: request-local (i, j), row-major, LSB first. */
ATTN_HD bool attn__mask_dense_bit(const attn_mask_prog *p, const attn_mask_req_info *r, int64_t i,
                                  int64_t j)
{
    int64_t bit = i * (r->T + r->C) + j;
    return ((p->dense_bits[r->dense_byte + (bit >> 3)] >> (bit & 7)) & 1u) != 0;
}

/* FlashMask column test: row i masked by [UTS, UTE) or [LTS, LTE) (seed 0x06A/B). */
ATTN_HD bool attn__mask_fm_hidden(const attn_mask_prog *p, const attn_mask_req_info *r, int64_t i,
                                  int64_t j)
{
    int64_t c = r->col + j;
    return (i >= p->fm_uts[c] && i < p->fm_ute[c]) || (i >= p->fm_lts[c] && i < p->fm_lte[c]);
}

/* Is key j visible to local query row i of request b (the semantic predicate V). */
ATTN_HD bool attn_mask_visible(const attn_mask_prog *p, uint32_t b, int64_t i, int64_t j)
{
    const attn_mask_req_info *r = &p->req[b];
    int64_t pos = r->T + i; /* seed 0x08B: absolute position of row i */
    if (i < 0 || i >= r->C || j < 0 || j >= r->T + r->C)
        return false;
    switch (p->kind) {
    case ATTN_MASK_CAUSAL:
        return j <= pos;
    case ATTN_MASK_NONE:
        return true;
    case ATTN_MASK_WINDOW:
        return j <= pos && j >= pos - p->left;
    case ATTN_MASK_SINK:
        return j <= pos && (j < p->sinks || j >= pos - p->left);
    case ATTN_MASK_FLASHMASK:
        if (p->fm_causal && j > pos)
            return false;
        return !attn__mask_fm_hidden(p, r, i, j);
    case ATTN_MASK_DENSE:
        return attn__mask_dense_bit(p, r, i, j) != p->true_means_masked;
    }
    return false;
}

/* Visible key ranges of local query row i of request b (see attn_row_keys). */
ATTN_HD attn_row_keys attn_mask_row_keys(const attn_mask_prog *p, uint32_t b, int64_t i)
{
    const attn_mask_req_info *r = &p->req[b];
    int64_t end = r->T + i + 1; /* causal: [0, T+i+1) */
    attn_row_keys k;
    k.lo0 = k.hi0 = k.lo1 = k.hi1 = 0;
    k.exact = true;
    switch (p->kind) {
    case ATTN_MASK_CAUSAL:
        k.hi0 = end;
        break;
    case ATTN_MASK_NONE:
        k.hi0 = r->T + r->C;
        break;
    case ATTN_MASK_WINDOW:
        k.lo0 = attn__mask_max64(0, r->T + i - p->left);
        k.hi0 = end;
        break;
    case ATTN_MASK_SINK: {
        int64_t wlo = attn__mask_max64(0, r->T + i - p->left);
        int64_t shi = attn__mask_min64(p->sinks, end);
        if (shi >= wlo) { /* sinks reach the window: one range */
            k.hi0 = end;
        } else {
            k.hi0 = shi;
            k.lo1 = wlo;
            k.hi1 = end;
        }
        break;
    }
    case ATTN_MASK_FLASHMASK: /* host-computed hull, per-cell test inside */
    case ATTN_MASK_DENSE:
        k.lo0 = p->row_lo[r->row + i];
        k.hi0 = p->row_hi[r->row + i];
        k.exact = false;
        break;
    }
    return k;
}

/* Relation of rows [q0, q1) to one interval family given its four summaries
 * (min/max of starts and ends over a key block): 1 = covers every cell,
 * 0 = disjoint from every interval, 2 = may overlap (seed 0x06D). */
ATTN_HD int attn__mask_fm_family(int64_t q0, int64_t q1, int32_t s_min, int32_t s_max,
                                 int32_t e_min, int32_t e_max)
{
    if (q0 >= s_max && q1 <= e_min)
        return 1;
    if (q1 <= s_min || q0 >= e_max)
        return 0;
    return 2;
}

/* Classify rows [q0, q1) against one FlashMask block summary (seed 0x06D):
 * SKIP when either family covers, FULL when both are disjoint, else PARTIAL. */
ATTN_HD attn_tile_class attn_mask_fm_classify(int64_t q0, int64_t q1, const int32_t *s)
{
    int up = attn__mask_fm_family(q0, q1, s[ATTN_FM_UTS_MIN], s[ATTN_FM_UTS_MAX],
                                  s[ATTN_FM_UTE_MIN], s[ATTN_FM_UTE_MAX]);
    int lo = attn__mask_fm_family(q0, q1, s[ATTN_FM_LTS_MIN], s[ATTN_FM_LTS_MAX],
                                  s[ATTN_FM_LTE_MIN], s[ATTN_FM_LTE_MAX]);
    if (up == 1 || lo == 1)
        return ATTN_TILE_SKIP;
    if (up == 0 && lo == 0)
        return ATTN_TILE_FULL;
    return ATTN_TILE_PARTIAL;
}

/* Exact class of a tile under "causal and j - i in [T - left, T]" (left < 0
 * means no left bound).  Over a rectangle, j - i takes every integer in
 * [k0 - (q1-1), (k1-1) - q0], so comparing that range with the band is exact. */
ATTN_HD attn_tile_class attn__mask_band_class(int64_t T, int64_t left, int64_t q0, int64_t q1,
                                              int64_t k0, int64_t k1)
{
    int64_t dmin = k0 - (q1 - 1), dmax = (k1 - 1) - q0;
    int64_t blo = left < 0 ? INT64_MIN : T - left;
    if (dmin > T || dmax < blo)
        return ATTN_TILE_SKIP;
    if (dmax <= T && dmin >= blo)
        return ATTN_TILE_FULL;
    return ATTN_TILE_PARTIAL;
}

/* Join the classes of two disjoint sub-tiles that together form one tile. */
ATTN_HD attn_tile_class attn__mask_join(attn_tile_class a, attn_tile_class b)
{
    return a == b ? a : ATTN_TILE_PARTIAL;
}

/* Class of the tile rows [q0, q1) x keys [k0, k1) of request b (both
 * request-local, non-empty, inside [0, C) x [0, T+C)).  Exact for causal,
 * none, window, sink and dense; conservative for flashmask. */
ATTN_HD attn_tile_class attn_mask_classify_tile(const attn_mask_prog *p, uint32_t b, int64_t q0,
                                                int64_t q1, int64_t k0, int64_t k1)
{
    const attn_mask_req_info *r = &p->req[b];
    switch (p->kind) {
    case ATTN_MASK_NONE:
        return ATTN_TILE_FULL;
    case ATTN_MASK_CAUSAL:
        return attn__mask_band_class(r->T, -1, q0, q1, k0, k1);
    case ATTN_MASK_WINDOW:
        return attn__mask_band_class(r->T, p->left, q0, q1, k0, k1);
    case ATTN_MASK_SINK: {
        /* split the keys at `sinks`: causal left of it, causal window right of it */
        int64_t mid = attn__mask_min64(attn__mask_max64(k0, (int64_t)p->sinks), k1);
        if (mid == k1)
            return attn__mask_band_class(r->T, -1, q0, q1, k0, k1);
        if (mid == k0)
            return attn__mask_band_class(r->T, p->left, q0, q1, k0, k1);
        return attn__mask_join(attn__mask_band_class(r->T, -1, q0, q1, k0, mid),
                               attn__mask_band_class(r->T, p->left, q0, q1, mid, k1));
    }
    case ATTN_MASK_FLASHMASK: {
        /* Summaries of every block the keys touch: a superset of columns only
         * raises max-starts and lowers min-ends, so the test stays safe. */
        int32_t s[ATTN_FM_SUMMARY_LEN];
        int64_t bl0 = k0 / p->block_cols, bl1 = (k1 - 1) / p->block_cols;
        const int32_t *f = p->fm_summary + (size_t)(r->blk + bl0) * ATTN_FM_SUMMARY_LEN;
        attn_tile_class fm, causal;
        for (int t = 0; t < ATTN_FM_SUMMARY_LEN; t++)
            s[t] = f[t];
        for (int64_t bl = bl0 + 1; bl <= bl1; bl++) {
            f = p->fm_summary + (size_t)(r->blk + bl) * ATTN_FM_SUMMARY_LEN;
            for (int t = 0; t < ATTN_FM_SUMMARY_LEN; t += 2) {
                s[t] = s[t] < f[t] ? s[t] : f[t];
                s[t + 1] = s[t + 1] > f[t + 1] ? s[t + 1] : f[t + 1];
            }
        }
        fm = attn_mask_fm_classify(q0, q1, s);
        if (!p->fm_causal)
            return fm;
        causal = attn__mask_band_class(r->T, -1, q0, q1, k0, k1);
        if (fm == ATTN_TILE_SKIP || causal == ATTN_TILE_SKIP)
            return ATTN_TILE_SKIP;
        if (fm == ATTN_TILE_FULL && causal == ATTN_TILE_FULL)
            return ATTN_TILE_FULL;
        return ATTN_TILE_PARTIAL;
    }
    case ATTN_MASK_DENSE: {
        /* dense bits are the truth itself: an exact scan of the tile */
        bool any_vis = false, any_hid = false;
        for (int64_t i = q0; i < q1; i++)
            for (int64_t j = k0; j < k1; j++) {
                if (attn__mask_dense_bit(p, r, i, j) != p->true_means_masked)
                    any_vis = true;
                else
                    any_hid = true;
                if (any_vis && any_hid)
                    return ATTN_TILE_PARTIAL;
            }
        return any_vis ? ATTN_TILE_FULL : ATTN_TILE_SKIP;
    }
    }
    return ATTN_TILE_PARTIAL;
}

#ifdef __cplusplus
}
#endif
#endif
