/* One address program for every K/V metadata encoding (seed 0x04).
 *
 * Contiguous NHD/HND caches with a cache-row remap, packed ragged rows,
 * paged dense block tables and paged CSR tables all reduce to one question:
 * for active request b and logical token t, which (page, slot) of a store of
 * `num_pages` pages of `page_size` rows holds the row?  The encodings only
 * differ in what a "page" is:
 *
 *   contiguous  page = cache row c = cache_row[b], page_size = T_c, slot = t
 *   ragged      page = 0 (one page holds every packed row),
 *               page_size = indptr[B], slot = indptr[b] + t
 *   paged       page = table entry of logical block t / P, slot = t % P
 *
 * so one element-offset formula serves them all (seed 0x04B/0x04D):
 *
 *   NHD  ((page * P + slot) * H_kv + h) * d + i
 *   HND  ((page * H_kv + h) * P + slot) * d + i
 *
 * where d is head_dim_qk for K and head_dim_vo for V (separate K and V
 * stores; an interleaved store would need another axis).  Byte offset =
 * element offset * element size.
 *
 * Kernels iterate page segments (page, slot, len) over a logical range
 * [begin, end), never single tokens (seed 0x04E): within one segment the rows
 * are `attn_kv_addr_slot_stride` elements apart.
 *
 * Everything here is ATTN_HD (C and CUDA).  The descriptor holds pointers
 * only; a CUDA engine copies the arrays to the device and swaps the pointers.
 * The descriptor does not validate: run attn_kv_table_validate (addr.c) on
 * the manifest first, then the translation is in bounds by construction.
 */
#ifndef ATTN_COMMON_ADDR_H
#define ATTN_COMMON_ADDR_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "hd.h"

/* Which metadata encoding a descriptor translates. */
typedef enum attn_kv_addr_kind {
    ATTN_KV_ADDR_CONTIG = 0,      /* padded [B_c, T_c, H, d] or [B_c, H, T_c, d] */
    ATTN_KV_ADDR_RAGGED = 1,      /* packed [sum T, H, d] (NHD) or [H, sum T, d] (HND) */
    ATTN_KV_ADDR_PAGED_DENSE = 2, /* block_table[c][j] */
    ATTN_KV_ADDR_PAGED_CSR = 3,   /* page_indices[page_indptr[b] + j] + last_page_len */
} attn_kv_addr_kind;

/* The translator of one microbatch: plain data, passed to kernels by value. */
typedef struct attn_kv_addr {
    attn_kv_addr_kind kind;
    attn_layout layout;
    uint32_t num_requests; /* B (active requests) */
    uint32_t num_kv_heads; /* H_kv */
    int64_t page_size;     /* P: rows per page (T_c for contiguous, indptr[B] for ragged) */
    int64_t num_pages;     /* pages in the store (B_c for contiguous, 1 for ragged) */
    /* contiguous and dense: active b -> cache row c (seed 0x04A); NULL = identity */
    const int32_t *cache_row;
    uint32_t num_cache_rows; /* rows of the contiguous cache or of the dense table */
    /* contiguous and dense: visible rows of active request b (T_b + C_b) */
    const int32_t *lens;
    /* ragged: [B + 1] packed row pointers */
    const int32_t *row_indptr;
    /* dense: [num_cache_rows][max_blocks] */
    const int32_t *block_table;
    uint32_t max_blocks;
    /* csr: [B + 1], [page_indptr[B]], [B] */
    const int32_t *page_indptr;
    const int32_t *page_indices;
    const int32_t *last_page_len;
    int64_t num_page_indices; /* csr: length of page_indices, -1 = not known (not checked) */
} attn_kv_addr;

/* One page segment: rows [t, t + len) of a request live in page `page`,
 * slots [slot, slot + len). */
typedef struct attn_kv_seg {
    int64_t t;
    int64_t page;
    int64_t slot;
    int64_t len;
} attn_kv_seg;

/* The K/V head a query head reads under regular GQA (seed 0x04A): h_q / (H_q / H_kv). */
ATTN_HD uint32_t attn_kv_head(uint32_t h_q, uint32_t num_qo_heads, uint32_t num_kv_heads)
{
    return h_q / (num_qo_heads / num_kv_heads);
}

ATTN_HD void attn_kv_addr__zero(attn_kv_addr *a)
{
    a->kind = ATTN_KV_ADDR_CONTIG;
    a->layout = ATTN_NHD;
    a->num_requests = 0;
    a->num_kv_heads = 0;
    a->page_size = 0;
    a->num_pages = 0;
    a->cache_row = 0;
    a->num_cache_rows = 0;
    a->lens = 0;
    a->row_indptr = 0;
    a->block_table = 0;
    a->max_blocks = 0;
    a->page_indptr = 0;
    a->page_indices = 0;
    a->last_page_len = 0;
    a->num_page_indices = -1;
}

/* Describe a padded contiguous cache of num_cache_rows x max_len rows;
 * cache_row (may be NULL) maps active b to its cache row, lens[b] is the
 * visible length of active request b. */
ATTN_HD void attn_kv_addr_contiguous(attn_kv_addr *a, attn_layout layout, uint32_t B,
                                     uint32_t num_kv_heads, uint32_t num_cache_rows,
                                     int64_t max_len, const int32_t *cache_row, const int32_t *lens)
{
    attn_kv_addr__zero(a);
    a->kind = ATTN_KV_ADDR_CONTIG;
    a->layout = layout;
    a->num_requests = B;
    a->num_kv_heads = num_kv_heads;
    a->page_size = max_len;
    a->num_pages = num_cache_rows;
    a->num_cache_rows = num_cache_rows;
    a->cache_row = cache_row;
    a->lens = lens;
}

/* Describe a packed ragged store; row_indptr[B] (read here, so a host
 * pointer at construction) is the total number of packed rows. */
ATTN_HD void attn_kv_addr_ragged(attn_kv_addr *a, attn_layout layout, uint32_t B,
                                 uint32_t num_kv_heads, const int32_t *row_indptr)
{
    attn_kv_addr__zero(a);
    a->kind = ATTN_KV_ADDR_RAGGED;
    a->layout = layout;
    a->num_requests = B;
    a->num_kv_heads = num_kv_heads;
    a->page_size = row_indptr[B];
    a->num_pages = 1;
    a->row_indptr = row_indptr;
}

/* Describe a paged pool read through a dense block table
 * [num_cache_rows][max_blocks]; cache_row (may be NULL) maps active b to its
 * table row, lens[b] is the visible length of active request b. */
ATTN_HD void attn_kv_addr_paged_dense(attn_kv_addr *a, attn_layout layout, uint32_t B,
                                      uint32_t num_kv_heads, int64_t page_size, int64_t num_pages,
                                      const int32_t *block_table, uint32_t num_cache_rows,
                                      uint32_t max_blocks, const int32_t *cache_row,
                                      const int32_t *lens)
{
    attn_kv_addr__zero(a);
    a->kind = ATTN_KV_ADDR_PAGED_DENSE;
    a->layout = layout;
    a->num_requests = B;
    a->num_kv_heads = num_kv_heads;
    a->page_size = page_size;
    a->num_pages = num_pages;
    a->block_table = block_table;
    a->num_cache_rows = num_cache_rows;
    a->max_blocks = max_blocks;
    a->cache_row = cache_row;
    a->lens = lens;
}

/* Describe a paged pool read through a CSR page table (FlashInfer's
 * kv_page_indptr / kv_page_indices / kv_last_page_len, seed 0x04D). */
ATTN_HD void attn_kv_addr_paged_csr(attn_kv_addr *a, attn_layout layout, uint32_t B,
                                    uint32_t num_kv_heads, int64_t page_size, int64_t num_pages,
                                    const int32_t *page_indptr, const int32_t *page_indices,
                                    const int32_t *last_page_len)
{
    attn_kv_addr__zero(a);
    a->kind = ATTN_KV_ADDR_PAGED_CSR;
    a->layout = layout;
    a->num_requests = B;
    a->num_kv_heads = num_kv_heads;
    a->page_size = page_size;
    a->num_pages = num_pages;
    a->page_indptr = page_indptr;
    a->page_indices = page_indices;
    a->last_page_len = last_page_len;
}

/* The translator of a manifest's page table over a pool (the engines' entry
 * point): CSR or dense with the identity remap (table row b = request b). */
ATTN_HD void attn_kv_addr_from_table(attn_kv_addr *a, const attn_kv_table *kv, uint32_t B,
                                     const attn_pool_geometry *g)
{
    if (kv->format == ATTN_KV_DENSE)
        attn_kv_addr_paged_dense(a, g->layout, B, g->num_kv_heads, g->page_size, g->num_pages,
                                 kv->block_table, B, kv->max_blocks, 0, kv->lens);
    else {
        attn_kv_addr_paged_csr(a, g->layout, B, g->num_kv_heads, g->page_size, g->num_pages,
                               kv->page_indptr, kv->page_indices, kv->last_page_len);
        a->num_page_indices = kv->num_page_indices;
    }
}

/* Cache row (contiguous) or table row (dense) of active request b. */
ATTN_HD int64_t attn_kv_addr_cache_row(const attn_kv_addr *a, uint32_t b)
{
    return a->cache_row ? (int64_t)a->cache_row[b] : (int64_t)b;
}

/* Visible rows of active request b after the append (T_b + C_b); rows at or
 * past this are allocated tail, never history (seed 0x04F). */
ATTN_HD int64_t attn_kv_addr_len(const attn_kv_addr *a, uint32_t b)
{
    switch (a->kind) {
    case ATTN_KV_ADDR_RAGGED:
        return (int64_t)a->row_indptr[b + 1] - a->row_indptr[b];
    case ATTN_KV_ADDR_PAGED_CSR: {
        int64_t n = (int64_t)a->page_indptr[b + 1] - a->page_indptr[b];
        return n > 0 ? (n - 1) * a->page_size + a->last_page_len[b] : 0;
    }
    default:
        return a->lens[b];
    }
}

/* Physical page of logical block j of request b (paged kinds), the cache row
 * (contiguous) or 0 (ragged); may be -1 for an unmapped dense entry. */
ATTN_HD int64_t attn_kv_addr_block_page(const attn_kv_addr *a, uint32_t b, int64_t j)
{
    switch (a->kind) {
    case ATTN_KV_ADDR_PAGED_DENSE:
        return a->block_table[attn_kv_addr_cache_row(a, b) * (int64_t)a->max_blocks + j];
    case ATTN_KV_ADDR_PAGED_CSR:
        return a->page_indices[(int64_t)a->page_indptr[b] + j];
    case ATTN_KV_ADDR_RAGGED:
        return 0;
    default:
        return attn_kv_addr_cache_row(a, b);
    }
}

/* The segment of request b that starts at logical row `pos` and ends at the
 * next page boundary or at `end`, whichever comes first (seed 0x04E/0x04H).
 * Requires pos < end <= attn_kv_addr_len(a, b); returns seg->len. */
ATTN_HD int64_t attn_kv_addr_segment(const attn_kv_addr *a, uint32_t b, int64_t pos, int64_t end,
                                     attn_kv_seg *seg)
{
    seg->t = pos;
    if (a->kind == ATTN_KV_ADDR_PAGED_DENSE || a->kind == ATTN_KV_ADDR_PAGED_CSR) {
        int64_t j = pos / a->page_size;
        int64_t block_end = (j + 1) * a->page_size;
        seg->page = attn_kv_addr_block_page(a, b, j);
        seg->slot = pos - j * a->page_size;
        seg->len = (end < block_end ? end : block_end) - pos;
    } else if (a->kind == ATTN_KV_ADDR_RAGGED) {
        /* seed 0x04C: the packed row is indptr[b] + t, not a page id */
        seg->page = 0;
        seg->slot = (int64_t)a->row_indptr[b] + pos;
        seg->len = end - pos;
    } else {
        seg->page = attn_kv_addr_cache_row(a, b);
        seg->slot = pos;
        seg->len = end - pos;
    }
    return seg->len;
}

/* Segments touched by the non-empty range [begin, end) (seed 0x04E):
 * 1 + floor((end-1)/P) - floor(begin/P) for paged kinds, else 1. */
ATTN_HD int64_t attn_kv_addr_num_segments(const attn_kv_addr *a, int64_t begin, int64_t end)
{
    if (end <= begin)
        return 0;
    if (a->kind == ATTN_KV_ADDR_PAGED_DENSE || a->kind == ATTN_KV_ADDR_PAGED_CSR)
        return 1 + (end - 1) / a->page_size - begin / a->page_size;
    return 1;
}

/* Translate one logical row: (page, slot) of token t of request b.  Returns
 * false (and leaves the outputs alone) when t is not visible or the page is
 * outside the store: the visibility and address invariants of seed 0x04H. */
ATTN_HD bool attn_kv_addr_locate(const attn_kv_addr *a, uint32_t b, int64_t t, int64_t *page,
                                 int64_t *slot)
{
    attn_kv_seg s;
    if (b >= a->num_requests || t < 0 || t >= attn_kv_addr_len(a, b))
        return false;
    attn_kv_addr_segment(a, b, t, t + 1, &s);
    if (s.page < 0 || s.page >= a->num_pages || s.slot < 0 || s.slot >= a->page_size)
        return false;
    *page = s.page;
    *slot = s.slot;
    return true;
}

/* Element offset of (page, slot, kv head h, lane i) in a store of head width
 * d, in the descriptor's layout (seed 0x04B, 0x04D). */
ATTN_HD int64_t attn_kv_addr_elem(const attn_kv_addr *a, int64_t page, int64_t slot, uint32_t h,
                                  uint32_t i, uint32_t d)
{
    if (a->layout == ATTN_HND)
        return ((page * a->num_kv_heads + h) * a->page_size + slot) * (int64_t)d + i;
    return ((page * a->page_size + slot) * a->num_kv_heads + h) * (int64_t)d + i;
}

/* Elements between consecutive slots of one page for a fixed (h, i):
 * H_kv * d in NHD, d in HND. */
ATTN_HD int64_t attn_kv_addr_slot_stride(const attn_kv_addr *a, uint32_t d)
{
    return a->layout == ATTN_HND ? (int64_t)d : (int64_t)a->num_kv_heads * d;
}

/* Elements of the whole store (every page) for head width d: the bound every
 * translated offset stays below. */
ATTN_HD int64_t attn_kv_addr_store_elems(const attn_kv_addr *a, uint32_t d)
{
    return a->num_pages * a->page_size * (int64_t)a->num_kv_heads * d;
}

/* ---- host-only functions (addr.c) ---- */

#ifdef __cplusplus
extern "C" {
#endif

/* Validate a manifest's page table completely against its requests and the
 * pool (seed 0x04J, 0x08I): structure, coverage of exactly T_b + C_b rows,
 * every visible page mapped and inside the pool, and no written row shared
 * with any other logical row.  Returns 0 or the specific ATTN_E_* code with
 * the field path ("kv.page_indices[17]") in err.  O(total pages). */
int attn_kv_table_validate(const attn_kv_table *kv, const attn_request_desc *req, uint32_t B,
                           const attn_pool_geometry *g, attn_error_detail *err);

/* Validate any descriptor (contiguous remap and capacity, ragged indptr,
 * dense or CSR tables) against its requests; field paths are `prefix`
 * followed by the metadata name ("cache_batch_idx[2]", "block_table[1][0]"). */
int attn_kv_addr_validate(const attn_kv_addr *a, const attn_request_desc *req, const char *prefix,
                          attn_error_detail *err);

/* One logical K/V range [begin, end) of request `req` that a producer reads. */
typedef struct attn_kv_range {
    uint32_t req;
    int64_t begin;
    int64_t end;
} attn_kv_range;

/* The metadata ledgers of seed 0x04I.  Resident = stored int32 metadata of
 * the page mapping (dense table; CSR indptr + indices + last_page_len; ragged
 * indptr), with cache-row remaps and context lengths counted apart.  Logical = entries the
 * segment walk must look up for the given ranges.  Neither is measured
 * traffic: that needs profiler counters at one runtime coordinate. */
typedef struct attn_kv_meta_ledger {
    uint64_t resident_entries;       /* page-mapping int32 entries (contiguous: 0) */
    uint64_t resident_bytes;         /* resident_entries * 4 */
    uint64_t resident_aux_entries;   /* cache_batch_idx and lens entries, apart */
    uint64_t lookup_segments;        /* page segments walked */
    uint64_t lookup_page_entries;    /* page ids / cache rows read, one per segment */
    uint64_t lookup_pointer_entries; /* indptr, lens, last_page_len entries read */
    uint64_t lookup_bytes;           /* (page + pointer entries) * 4 */
} attn_kv_meta_ledger;

/* Fill the ledgers for `ranges` (or, when ranges is NULL, one full range
 * [0, len_b) per request).  Returns 0, or ATTN_E_RANGE for a range outside
 * its request's visible rows. */
int attn_kv_meta_ledger_compute(const attn_kv_addr *a, const attn_kv_range *ranges,
                                uint32_t num_ranges, attn_kv_meta_ledger *out);

#ifdef __cplusplus
}
#endif

#endif
