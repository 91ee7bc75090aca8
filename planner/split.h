/* Split plans: which keys of which request each producer summarises (seed
 * 0x03B, 0x03C, 0x03G, 0x09D, 0x0AB, 0x0AD).
 *
 * Every builder covers the keys [0, L_b) of request b, L_b = T_b + C_b (the
 * keys its query rows may see after the append), exactly once and disjointly.
 * A split is never empty except as an explicit identity slot (an item with
 * kv_begin == kv_end), which exists only where a reducer consumes a slot that
 * owns no key: a request with L_b == 0, or the graph-mode capacity envelope.
 *
 * Slots of request b are numbered in key order, so the per-request merge in
 * slot order is a left-to-right fold over the K/V axis.  Items are listed in
 * producer launch order; for GLOBAL that order is the worker order.
 */
#ifndef ATTN_PLANNER_SPLIT_H
#define ATTN_PLANNER_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/names.h"
#include "attn/types.h"
#include "planner/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FlashAttention passes 128 as its split cap (seed 0x0AB); ours when max_splits == 0. */
#define ATTN_SPLIT_MAX_DEFAULT 128u
/* FA's K/V block width when kv_block == 0. */
#define ATTN_SPLIT_KV_BLOCK_DEFAULT 64u

/* Everything a policy needs besides the lengths.  Zero-initialise, then set
 * what applies; attn_split_params_from_manifest fills the manifest's part. */
typedef struct attn_split_params {
    /* AUTO resolves to FIXED when fixed_splits or fixed_chunk is set, else to
     * default_policy (the engine's choice); a default of AUTO is E_POLICY. */
    attn_split_policy policy;
    attn_split_policy default_policy;
    uint32_t fixed_splits; /* FIXED: balanced splits per request (seed 0x03B) */
    int64_t fixed_chunk;   /* FIXED: chunk width in keys instead of a count; 0 = unused */
    /* Concurrent workers: SMs x resident CTAs per SM on a GPU (seed 0x0AD),
     * the thread count on the CPU.  FA, FI and GLOBAL need it > 0. */
    uint32_t grid_capacity;
    /* Producer work units per split (H_kv for GQA-packed decode, H_q when
     * every query head is its own unit); 0 means 1. */
    uint32_t units_per_split;
    /* FA: query rows per producer tile (its M block); 0 = one tile per request. */
    uint32_t q_tile;
    /* FA: keys per K/V block (0 = ATTN_SPLIT_KV_BLOCK_DEFAULT).  FI: keys per
     * page, the granularity of its pages-per-chunk search (0 = 1). */
    uint32_t kv_block;
    int64_t min_chunk;   /* FA, FI: no split shorter than this many keys but a tail; 0 = none */
    int64_t max_chunk;   /* FI, FIXED chunk: no chunk longer than this; 0 = none */
    uint32_t max_splits; /* cap on splits per request; 0 = ATTN_SPLIT_MAX_DEFAULT */
    /* FI: no request split into more than this many chunks (its chunk is
     * then at least ceil(pages / fi_max_splits) pages); 0 = no cap.  An
     * engine whose merge cost grows with a request's slot count sets it
     * (ATTN_SPLIT_FI_MAX_SPLITS_CUDA). */
    uint32_t fi_max_splits;
    /* Graph mode (seed 0x03G): every request owns exactly graph_splits slots;
     * slots past its active splits get identity items.  0 = off. */
    uint32_t graph_splits;
    /* Slots the workspace holds; 0 = exactly what the plan uses.  A plan that
     * needs more is E_CAPACITY. */
    uint32_t slot_capacity;
    /* FI wave model (0 = off): when the unsplit grid already fills
     * grid_capacity, split every request into s = 1 .. ATTN_SPLIT_WAVE_MAX
     * page-aligned chunks and keep the s with the shortest modelled
     * makespan (attn_split_wave_makespan), so the last wave is not mostly
     * idle.  wave_item_keys: each producer's fixed cost in keys (prologue,
     * epilogue); wave_merge_keys: the merge's cost in keys, added when s > 1. */
    uint32_t wave_model;
    int64_t wave_item_keys, wave_merge_keys;
} attn_split_params;

/* Largest split count the FI wave model tries. */
#define ATTN_SPLIT_WAVE_MAX 4u
/* ... and where its best plan at 4 still takes more than twice the fluid
 * bound (sum of keys + item costs over the slots): a tail of lone long
 * chunks, e.g. two decodes behind ~55 K keys among 263 of <= 512 (a
 * serving step, 2026-12-03: 4 chunks left one CTA streaming ~7.5 MB
 * alone; tests/unit/test_split.c test_fi_wave_tail), up to this many (and
 * fi_max_splits).  Plans the bound does not flag keep their split. */
#define ATTN_SPLIT_WAVE_TAIL_MAX 32u
/* The CUDA decode producer's wave-model costs in keys (H200, d = 128,
 * 2026-12-01): a CTA's prologue and epilogue ~3 us at ~32 keys/us per CTA
 * slot; a reducer launch and its reads ~6 us (docs/cuda.md, issue 13). */
#define ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA 96
#define ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA 192
/* The CUDA decode engine's min_chunk: a split shorter than this spends more
 * on its state than on keys. */
#define ATTN_SPLIT_MIN_CHUNK_CUDA 256
/* The CUDA decode engine's fi_max_splits: the fold of a split request (the
 * producer's last CTA, or the reducer kernel) reads its slots 16 at a time,
 * one L2 round trip (~1.3 us on the H200) per batch, so every slot past a
 * multiple of 16 costs a round trip, and a long fold is the launch's tail.
 * H200, 2026-12-02 (docs/cuda.md round 8): B1_T32768 43.4 us at 33 splits,
 * 42.0 at 32; d 64 (H_kv 4) B1_T32768 27.1 us at 128 splits, 22.3 at 64,
 * 22.0 at 32. */
#define ATTN_SPLIT_FI_MAX_SPLITS_CUDA 32u

/* Fill the manifest's part of `p`: policy, fixed split count, units (H_kv
 * when num_kv_heads > 0, else H_q) and, under policy.graph with a fixed
 * count, graph_splits = that count.  The engine's fields (grid_capacity,
 * default_policy, ...) are left untouched. */
void attn_split_params_from_manifest(const attn_manifest *m, uint32_t num_kv_heads,
                                     attn_split_params *p);

/* Build the plan for a validated manifest: L_b = cache_len + new_len, query
 * rows C_b = new_len.  Returns 0 or an attn_err with `err` naming the field;
 * on failure `out` holds no arrays. */
int attn_split_plan_build(const attn_manifest *m, const attn_split_params *p, attn_split_plan *out,
                          attn_error_detail *err);

/* The same from plain arrays: kv_len[b] = L_b >= 0, q_len[b] = query rows
 * (NULL: one row each, i.e. decode). */
int attn_split_plan_build_lengths(uint32_t num_requests, const int64_t *kv_len,
                                  const int64_t *q_len, const attn_split_params *p,
                                  attn_split_plan *out, attn_error_detail *err);

/* Balanced quotient/remainder bounds of split s of S over [0, len): split s
 * gets len/S keys plus one when s < len % S (seed 0x03B). */
void attn_split_bounds_balanced(int64_t len, uint32_t num_splits, uint32_t s, int64_t *begin,
                                int64_t *end);

/* FlashAttention's split count (seed 0x0AB): the smallest eligible s whose
 * wave efficiency is >= 85% of the best, with G unsplit producer blocks,
 * n_sm workers and n_kblocks K/V blocks; 1 when G already fills 80% of n_sm. */
uint32_t attn_split_fa_heuristic(uint64_t blocks, uint32_t n_sm, uint64_t n_kblocks,
                                 uint32_t max_splits);

/* Makespan, in keys, of producers launched in plan order (request-major,
 * `units` producers per chunk) onto grid_capacity slots, each starting on
 * the first slot to free up, as the block scheduler does: every request cut
 * into chunks of `chunk` keys, a producer costing its keys plus item_keys.
 * Returns -1 when the plan would exceed ATTN_SPLIT_WAVE_CTAS producers
 * (or on a bad argument). */
int64_t attn_split_wave_makespan(uint32_t num_requests, const int64_t *kv_len, int64_t chunk,
                                 uint32_t units, uint32_t grid_capacity, int64_t item_keys);

/* Producer count above which attn_split_wave_makespan does not simulate. */
#define ATTN_SPLIT_WAVE_CTAS 65536u

/* FlashInfer's binary search (seed 0x0AD): the smallest pages-per-chunk in
 * [min_pages, max_b pages[b]] whose chunk count times `units` fits
 * `grid_capacity`; *num_chunks receives that chunk count. */
int64_t attn_split_fi_search(uint32_t num_requests, const int64_t *pages, uint32_t units,
                             uint32_t grid_capacity, int64_t min_pages, uint64_t *num_chunks);

/* The FlashInfer paper's integer chunk limit (seed 0x09E, alpha = 0,
 * beta = 1): ceil(sum_b ceil(q_len[b] / q_tile) * kv_len[b] / workers). */
int64_t attn_split_paper_chunk(uint32_t num_requests, const int64_t *kv_len, const int64_t *q_len,
                               uint32_t q_tile, uint32_t workers);

/* Conceptual owner counts of seed 0x03C for a plan: producers are
 * (request, query head, slot), reducers (query row, query head). */
typedef struct attn_owner_counts {
    uint64_t producer; /* items x H_q */
    uint64_t active;   /* non-empty items x H_q */
    uint64_t identity; /* identity items x H_q */
    uint64_t reducer;  /* sum_b C_b x H_q */
    uint64_t merges;   /* binary merges: H_q x sum_b C_b x (slots_b - 1) */
} attn_owner_counts;

/* Count the owners of `plan`; q_len NULL means one query row per request. */
void attn_split_owner_counts(const attn_split_plan *plan, const int64_t *q_len,
                             uint32_t num_qo_heads, attn_owner_counts *out);

/* Check the plan's invariants (seed 0x02I): every key of [0, kv_len[b])
 * covered exactly once, slots of b in key order inside slot_indptr, every
 * slot written by exactly one item, num_slots <= slot_capacity. */
int attn_split_plan_check(const attn_split_plan *plan, const int64_t *kv_len,
                          attn_error_detail *err);

/* Write the plan as one JSON object (policy, chunk, slots, split counts per
 * request, and the first max_items items as [req, slot, begin, end]) for the
 * dispatch diagnostic.  Returns the length it needs, like snprintf. */
size_t attn_split_plan_json(const attn_split_plan *plan, uint32_t max_items, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
