/* Host-side validation of K/V address metadata and its ledgers (seed 0x04).
 *
 * Validation runs before any engine touches a pool (seed 0x08I: "prevalidate
 * the complete mutation contract"), so a rejected manifest never mutates a
 * page.  Every check is one pass over the metadata; the only allocations are
 * the list of written blocks (sorted only when a read-only block lands on a
 * written page) and a bitmap of written pages, bounded by the metadata size
 * and the pool size.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/error.h"
#include "kernels/common/addr.h"

/* Field path "<prefix><name>" for an error detail. */
static const char *field(char *buf, size_t n, const char *prefix, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static const char *field(char *buf, size_t n, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    int k = snprintf(buf, n, "%s", prefix ? prefix : "");
    if (k < 0 || (size_t)k >= n)
        return buf;
    va_start(ap, fmt);
    vsnprintf(buf + k, n - (size_t)k, fmt, ap);
    va_end(ap);
    return buf;
}

static bool is_paged(const attn_kv_addr *a)
{
    return a->kind == ATTN_KV_ADDR_PAGED_DENSE || a->kind == ATTN_KV_ADDR_PAGED_CSR;
}

/* Rows request b must see after the append: T_b + C_b. */
static int request_rows(const attn_request_desc *req, uint32_t b, int64_t *rows,
                        attn_error_detail *err)
{
    char f[64];
    if (req[b].cache_len < 0 || req[b].cache_len > INT32_MAX)
        return attn_error_set(err, ATTN_E_RANGE,
                              field(f, sizeof f, "", "requests[%u].cache_len", b),
                              "cache_len %lld outside [0, 2^31)", (long long)req[b].cache_len);
    if (req[b].new_len < 0 || req[b].new_len > INT32_MAX - req[b].cache_len)
        return attn_error_set(err, ATTN_E_RANGE, field(f, sizeof f, "", "requests[%u].new_len", b),
                              "new_len %lld outside [0, 2^31 - cache_len)",
                              (long long)req[b].new_len);
    *rows = req[b].cache_len + req[b].new_len;
    return 0;
}

/* The remap active b -> cache row must stay inside the cache and be
 * injective (seed 0x04A, 0x08H assert_unique(cache_row_id)). */
static int check_cache_rows(const attn_kv_addr *a, const char *prefix, attn_error_detail *err)
{
    char f[128];
    uint32_t B = a->num_requests;
    if (!a->cache_row) {
        if (B > a->num_cache_rows)
            return attn_error_set(err, ATTN_E_CACHE_ROW,
                                  field(f, sizeof f, prefix, "cache_batch_idx"),
                                  "%u requests but only %u cache rows", B, a->num_cache_rows);
        return 0;
    }
    uint8_t *seen = calloc((size_t)a->num_cache_rows / 8 + 1, 1);
    if (!seen)
        return attn_error_set(err, ATTN_E_NOMEM, "", "cache-row bitmap");
    int rv = 0;
    for (uint32_t b = 0; b < B && rv == 0; b++) {
        int32_t c = a->cache_row[b];
        if (c < 0 || (uint32_t)c >= a->num_cache_rows)
            rv = attn_error_set(err, ATTN_E_CACHE_ROW,
                                field(f, sizeof f, prefix, "cache_batch_idx[%u]", b),
                                "cache row %d outside [0, %u)", c, a->num_cache_rows);
        else if (seen[c / 8] & (1u << (c % 8)))
            rv = attn_error_set(err, ATTN_E_CACHE_ROW,
                                field(f, sizeof f, prefix, "cache_batch_idx[%u]", b),
                                "cache row %d is already used by an earlier request", c);
        else
            seen[c / 8] |= (uint8_t)(1u << (c % 8));
    }
    free(seen);
    return rv;
}

/* lens[b] (contiguous, dense) must equal T_b + C_b exactly (seed 0x04F: the
 * exact context length is what keeps the tail invisible). */
static int check_lens(const attn_kv_addr *a, const int64_t *rows, const char *prefix,
                      attn_error_detail *err)
{
    char f[128];
    for (uint32_t b = 0; b < a->num_requests; b++) {
        if (a->lens[b] != rows[b])
            return attn_error_set(err, ATTN_E_COVERAGE, field(f, sizeof f, prefix, "lens[%u]", b),
                                  "lens %d but requests[%u] needs cache_len + new_len = %lld",
                                  a->lens[b], b, (long long)rows[b]);
    }
    return 0;
}

static int check_contig(const attn_kv_addr *a, const int64_t *rows, const char *prefix,
                        attn_error_detail *err)
{
    char f[128];
    int rv;
    if ((rv = check_cache_rows(a, prefix, err)) != 0)
        return rv;
    if ((rv = check_lens(a, rows, prefix, err)) != 0)
        return rv;
    for (uint32_t b = 0; b < a->num_requests; b++) {
        if (rows[b] > a->page_size)
            return attn_error_set(err, ATTN_E_COVERAGE, field(f, sizeof f, prefix, "lens[%u]", b),
                                  "%lld rows exceed the cache capacity of %lld rows",
                                  (long long)rows[b], (long long)a->page_size);
    }
    return 0;
}

/* Monotone indptr starting at 0 (seed 0x04C); `name` is its field name. */
static int check_indptr(const int32_t *p, uint32_t B, const char *name, const char *prefix,
                        attn_error_detail *err)
{
    char f[128];
    if (p[0] != 0)
        return attn_error_set(err, ATTN_E_INDPTR, field(f, sizeof f, prefix, "%s[0]", name),
                              "%s[0] is %d, must be 0", name, p[0]);
    for (uint32_t b = 0; b < B; b++) {
        if (p[b + 1] < p[b])
            return attn_error_set(err, ATTN_E_INDPTR,
                                  field(f, sizeof f, prefix, "%s[%u]", name, b + 1),
                                  "%s decreases from %d to %d", name, p[b], p[b + 1]);
    }
    return 0;
}

static int check_ragged(const attn_kv_addr *a, const int64_t *rows, const char *prefix,
                        attn_error_detail *err)
{
    char f[128];
    int rv;
    if ((rv = check_indptr(a->row_indptr, a->num_requests, "row_indptr", prefix, err)) != 0)
        return rv;
    for (uint32_t b = 0; b < a->num_requests; b++) {
        int64_t n = (int64_t)a->row_indptr[b + 1] - a->row_indptr[b];
        if (n != rows[b])
            return attn_error_set(err, ATTN_E_COVERAGE,
                                  field(f, sizeof f, prefix, "row_indptr[%u]", b + 1),
                                  "%lld packed rows but requests[%u] needs %lld", (long long)n, b,
                                  (long long)rows[b]);
    }
    if (a->page_size != a->row_indptr[a->num_requests])
        return attn_error_set(err, ATTN_E_INDPTR,
                              field(f, sizeof f, prefix, "row_indptr[%u]", a->num_requests),
                              "descriptor holds %lld packed rows, indptr ends at %d",
                              (long long)a->page_size, a->row_indptr[a->num_requests]);
    return 0;
}

/* Path of the table entry behind logical block j of request b. */
static const char *block_field(char *buf, size_t n, const attn_kv_addr *a, const char *prefix,
                               uint32_t b, int64_t j)
{
    if (a->kind == ATTN_KV_ADDR_PAGED_DENSE)
        return field(buf, n, prefix, "block_table[%lld][%lld]",
                     (long long)attn_kv_addr_cache_row(a, b), (long long)j);
    return field(buf, n, prefix, "page_indices[%lld]", (long long)a->page_indptr[b] + j);
}

/* Structure and coverage of the page table: every request's blocks cover
 * exactly T_b + C_b rows (seed 0x04D: T = P (n - 1) + last_page_len). */
static int check_paged_shape(const attn_kv_addr *a, const int64_t *rows, const char *prefix,
                             attn_error_detail *err)
{
    char f[128];
    int rv;
    uint32_t B = a->num_requests;
    int64_t P = a->page_size;
    if (a->kind == ATTN_KV_ADDR_PAGED_DENSE) {
        if ((rv = check_cache_rows(a, prefix, err)) != 0)
            return rv;
        if ((rv = check_lens(a, rows, prefix, err)) != 0)
            return rv;
        for (uint32_t b = 0; b < B; b++) {
            int64_t need = (rows[b] + P - 1) / P;
            if (need > (int64_t)a->max_blocks)
                return attn_error_set(
                    err, ATTN_E_COVERAGE,
                    field(f, sizeof f, prefix, "block_table[%lld]",
                          (long long)attn_kv_addr_cache_row(a, b)),
                    "requests[%u] needs %lld blocks of %lld rows, the table has %u", b,
                    (long long)need, (long long)P, a->max_blocks);
        }
        return 0;
    }
    if ((rv = check_indptr(a->page_indptr, B, "page_indptr", prefix, err)) != 0)
        return rv;
    if (a->num_page_indices >= 0 && a->page_indptr[B] != a->num_page_indices)
        return attn_error_set(err, ATTN_E_INDPTR, field(f, sizeof f, prefix, "page_indptr[%u]", B),
                              "page_indptr ends at %d but page_indices has %lld entries",
                              a->page_indptr[B], (long long)a->num_page_indices);
    for (uint32_t b = 0; b < B; b++) {
        int64_t n = (int64_t)a->page_indptr[b + 1] - a->page_indptr[b];
        int32_t last = a->last_page_len[b];
        if (n == 0 && rows[b] == 0)
            continue; /* nothing to cover, last_page_len is not read */
        if (last < 1 || last > P)
            return attn_error_set(err, ATTN_E_LAST_PAGE_LEN,
                                  field(f, sizeof f, prefix, "last_page_len[%u]", b),
                                  "last_page_len %d outside [1, %lld]", last, (long long)P);
        if (n != (rows[b] + P - 1) / P)
            return attn_error_set(
                err, ATTN_E_COVERAGE, field(f, sizeof f, prefix, "page_indptr[%u]", b + 1),
                "requests[%u] has %lld pages but %lld rows need %lld", b, (long long)n,
                (long long)rows[b], (long long)((rows[b] + P - 1) / P));
        if ((n - 1) * P + last != rows[b])
            return attn_error_set(
                err, ATTN_E_COVERAGE, field(f, sizeof f, prefix, "last_page_len[%u]", b),
                "%lld pages with last_page_len %d cover %lld rows, requests[%u] "
                "needs %lld",
                (long long)n, last, (long long)((n - 1) * P + last), b, (long long)rows[b]);
    }
    return 0;
}

/* Bitmap bound: page ids are int32, so pages past 2^31 cannot be named. */
static uint32_t page_bound(const attn_kv_addr *a)
{
    return a->num_pages > INT32_MAX ? (uint32_t)INT32_MAX + 1 : (uint32_t)a->num_pages;
}

/* Page ids of request b by logical block: a dense table row or a CSR
 * segment are both one int32 row, so the scans below are plain loops. */
static const int32_t *block_row(const attn_kv_addr *a, uint32_t b)
{
    if (a->kind == ATTN_KV_ADDR_PAGED_DENSE)
        return a->block_table + attn_kv_addr_cache_row(a, b) * (int64_t)a->max_blocks;
    return a->page_indices + a->page_indptr[b];
}

/* Every visible logical block maps to a page inside the pool (seed 0x04J:
 * "accept a visible-page sentinel or out-of-pool id").  Dense entries past
 * the visible blocks are capacity and may hold anything. */
static int check_pages(const attn_kv_addr *a, const int64_t *rows, const char *prefix,
                       attn_error_detail *err)
{
    char f[128];
    uint32_t np = page_bound(a);
    for (uint32_t b = 0; b < a->num_requests; b++) {
        const int32_t *row = block_row(a, b);
        int64_t nb = (rows[b] + a->page_size - 1) / a->page_size;
        int bad = 0;
        /* branch-free scan first; locate the culprit only on failure */
        for (int64_t j = 0; j < nb; j++)
            bad |= (uint32_t)row[j] >= np;
        if (!bad)
            continue;
        for (int64_t j = 0; j < nb; j++) {
            int64_t p = row[j];
            if (p == -1)
                return attn_error_set(
                    err, ATTN_E_UNMAPPED_BLOCK, block_field(f, sizeof f, a, prefix, b, j),
                    "logical block %lld of requests[%u] is visible but unmapped", (long long)j, b);
            if (p < 0 || p >= a->num_pages)
                return attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL,
                                      block_field(f, sizeof f, a, prefix, b, j),
                                      "page %lld outside the pool of %lld pages", (long long)p,
                                      (long long)a->num_pages);
        }
    }
    return 0;
}

/* One logical block that receives new rows: slots [wslot, ...) of `page`. */
typedef struct written_block {
    int64_t page;
    int64_t wslot; /* first written slot */
    uint32_t b;
    int64_t j;
} written_block;

static int cmp_written(const void *x, const void *y)
{
    const written_block *p = x, *q = y;
    if (p->page != q->page)
        return p->page < q->page ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->j < q->j ? -1 : (p->j > q->j);
}

static const written_block *find_written(const written_block *w, size_t n, int64_t page)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w[mid].page < page)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && w[lo].page == page ? &w[lo] : NULL;
}

/* The new rows T_b .. T_b + C_b - 1 must land on (page, slot)s that no other
 * logical row of any request reads or writes; read-only sharing (a common
 * prefix page) is legal (seed 0x08H: commit each request to its own rows).
 * Every logical block covers slots [0, rows_in_block) of its page, so two
 * written blocks on one page always collide, and a read-only block on a
 * written page collides exactly when its visible rows reach the first
 * written slot.  Cost: one pass over the blocks with a bitmap of written
 * pages; the written list is sorted only when a read-only block hits one. */
static int check_written_unique(const attn_kv_addr *a, const attn_request_desc *req,
                                const int64_t *rows, const char *prefix, attn_error_detail *err)
{
    char f[128];
    uint32_t B = a->num_requests;
    int64_t P = a->page_size;
    size_t nw = 0;
    for (uint32_t b = 0; b < B; b++) {
        if (rows[b] > req[b].cache_len)
            nw += (size_t)((rows[b] - 1) / P - req[b].cache_len / P + 1);
    }
    if (nw == 0)
        return 0;
    written_block *w = malloc(nw * sizeof *w);
    uint8_t *bits = calloc((size_t)page_bound(a) / 8 + 1, 1);
    int rv = 0;
    bool sorted = false;
    if (!w || !bits) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "written-block list");
        goto out;
    }
    size_t k = 0;
    for (uint32_t b = 0; b < B; b++) {
        const int32_t *row = block_row(a, b);
        int64_t T = req[b].cache_len;
        if (rows[b] <= T)
            continue;
        for (int64_t j = T / P; j <= (rows[b] - 1) / P; j++) {
            int32_t p = row[j];
            if (bits[p >> 3] & (1u << (p & 7))) {
                size_t o = 0;
                while (o < k && w[o].page != p)
                    o++;
                rv = attn_error_set(
                    err, ATTN_E_DUPLICATE_CACHE, block_field(f, sizeof f, a, prefix, b, j),
                    "page %d receives new rows of requests[%u] and requests[%u]", p, w[o].b, b);
                goto out;
            }
            bits[p >> 3] |= (uint8_t)(1u << (p & 7));
            w[k].page = p;
            w[k].wslot = T > j * P ? T - j * P : 0;
            w[k].b = b;
            w[k].j = j;
            k++;
        }
    }
    for (uint32_t b = 0; b < B; b++) {
        const int32_t *row = block_row(a, b);
        int64_t nb = (rows[b] + P - 1) / P;
        /* blocks from here on are b's own written blocks (unique pages) */
        int64_t first_written = rows[b] > req[b].cache_len ? req[b].cache_len / P : nb;
        for (int64_t j = 0; j < first_written; j++) {
            int32_t p = row[j];
            if (!(bits[p >> 3] & (1u << (p & 7))))
                continue;
            if (!sorted) {
                qsort(w, nw, sizeof *w, cmp_written);
                sorted = true;
            }
            const written_block *wb = find_written(w, nw, p);
            int64_t visible = rows[b] - j * P < P ? rows[b] - j * P : P;
            if (visible > wb->wslot) {
                rv = attn_error_set(err, ATTN_E_DUPLICATE_CACHE,
                                    block_field(f, sizeof f, a, prefix, b, j),
                                    "requests[%u] reads slot %lld of page %d, which "
                                    "requests[%u] overwrites with a new row",
                                    b, (long long)wb->wslot, p, wb->b);
                goto out;
            }
        }
    }
out:
    free(w);
    free(bits);
    return rv;
}

/* The arrays a kind reads must be present (descriptors built by callers
 * other than attn_kv_addr_from_table reach the validator too). */
static int check_present(const attn_kv_addr *a, const char *prefix, attn_error_detail *err)
{
    char f[128];
    const char *missing = NULL;
    switch (a->kind) {
    case ATTN_KV_ADDR_CONTIG:
        missing = !a->lens ? "lens" : NULL;
        break;
    case ATTN_KV_ADDR_RAGGED:
        missing = !a->row_indptr ? "row_indptr" : NULL;
        break;
    case ATTN_KV_ADDR_PAGED_DENSE:
        missing = !a->lens ? "lens" : !a->block_table && a->max_blocks > 0 ? "block_table" : NULL;
        break;
    case ATTN_KV_ADDR_PAGED_CSR:
        missing = !a->page_indptr                                           ? "page_indptr"
                  : !a->last_page_len                                       ? "last_page_len"
                  : !a->page_indices && a->page_indptr[a->num_requests] > 0 ? "page_indices"
                                                                            : NULL;
        break;
    }
    if (missing)
        return attn_error_set(err, ATTN_E_MISSING, field(f, sizeof f, prefix, "%s", missing),
                              "%s is required by this encoding", missing);
    return 0;
}

int attn_kv_addr_validate(const attn_kv_addr *a, const attn_request_desc *req, const char *prefix,
                          attn_error_detail *err)
{
    char f[128];
    int rv = 0;
    uint32_t B = a->num_requests;
    if (B == 0)
        return 0;
    if (a->num_kv_heads == 0)
        return attn_error_set(err, ATTN_E_RANGE, field(f, sizeof f, prefix, "num_kv_heads"),
                              "num_kv_heads must be positive");
    if (a->page_size < 0 || (is_paged(a) && a->page_size == 0))
        return attn_error_set(err, ATTN_E_RANGE, field(f, sizeof f, prefix, "page_size"),
                              "page_size %lld must be positive", (long long)a->page_size);
    if ((rv = check_present(a, prefix, err)) != 0)
        return rv;
    int64_t *rows = malloc(B * sizeof *rows);
    if (!rows)
        return attn_error_set(err, ATTN_E_NOMEM, "", "row counts");
    for (uint32_t b = 0; b < B && rv == 0; b++)
        rv = request_rows(req, b, &rows[b], err);
    if (rv != 0)
        goto out;
    switch (a->kind) {
    case ATTN_KV_ADDR_CONTIG:
        rv = check_contig(a, rows, prefix, err);
        break;
    case ATTN_KV_ADDR_RAGGED:
        rv = check_ragged(a, rows, prefix, err);
        break;
    case ATTN_KV_ADDR_PAGED_DENSE:
    case ATTN_KV_ADDR_PAGED_CSR:
        if ((rv = check_paged_shape(a, rows, prefix, err)) != 0)
            break;
        if ((rv = check_pages(a, rows, prefix, err)) != 0)
            break;
        rv = check_written_unique(a, req, rows, prefix, err);
        break;
    default:
        rv = attn_error_set(err, ATTN_E_INTERNAL, field(f, sizeof f, prefix, "kind"),
                            "unknown address kind %d", (int)a->kind);
    }
out:
    free(rows);
    return rv;
}

int attn_kv_table_validate(const attn_kv_table *kv, const attn_request_desc *req, uint32_t B,
                           const attn_pool_geometry *g, attn_error_detail *err)
{
    attn_kv_addr a;
    if (g->page_size == 0)
        return attn_error_set(err, ATTN_E_RANGE, "pool.page_size", "page_size must be positive");
    if (g->num_kv_heads == 0)
        return attn_error_set(err, ATTN_E_RANGE, "pool.num_kv_heads",
                              "num_kv_heads must be positive");
    if (B == 0)
        return 0;
    if (kv->format == ATTN_KV_DENSE) {
        if (!kv->lens)
            return attn_error_set(err, ATTN_E_MISSING, "kv.lens", "dense tables need lens");
        if (!kv->block_table && kv->max_blocks > 0)
            return attn_error_set(err, ATTN_E_MISSING, "kv.block_table", "no block table");
        if ((uint64_t)B * kv->max_blocks > INT32_MAX)
            return attn_error_set(err, ATTN_E_TOO_LARGE, "kv.block_table",
                                  "%u x %u entries exceed 2^31", B, kv->max_blocks);
    } else if (kv->format == ATTN_KV_CSR) {
        if (!kv->page_indptr)
            return attn_error_set(err, ATTN_E_MISSING, "kv.page_indptr", "no page_indptr");
        if (!kv->last_page_len)
            return attn_error_set(err, ATTN_E_MISSING, "kv.last_page_len", "no last_page_len");
        if (!kv->page_indices && kv->num_page_indices > 0)
            return attn_error_set(err, ATTN_E_MISSING, "kv.page_indices", "no page_indices");
    } else {
        return attn_error_set(err, ATTN_E_RANGE, "kv.format", "unknown page-table format %d",
                              (int)kv->format);
    }
    attn_kv_addr_from_table(&a, kv, B, g);
    return attn_kv_addr_validate(&a, req, "kv.", err);
}

int attn_kv_meta_ledger_compute(const attn_kv_addr *a, const attn_kv_range *ranges,
                                uint32_t num_ranges, attn_kv_meta_ledger *out)
{
    uint32_t B = a->num_requests;
    memset(out, 0, sizeof *out);
    /* seed 0x04I: resident = shape * dtype bytes of the page mapping */
    switch (a->kind) {
    case ATTN_KV_ADDR_CONTIG:
        out->resident_aux_entries = (a->cache_row ? B : 0) + (uint64_t)B;
        break;
    case ATTN_KV_ADDR_RAGGED:
        out->resident_entries = (uint64_t)B + 1;
        break;
    case ATTN_KV_ADDR_PAGED_DENSE:
        out->resident_entries = (uint64_t)a->num_cache_rows * a->max_blocks;
        out->resident_aux_entries = (a->cache_row ? B : 0) + (uint64_t)B;
        break;
    case ATTN_KV_ADDR_PAGED_CSR:
        out->resident_entries = (uint64_t)B + 1 + (uint64_t)a->page_indptr[B] + B;
        break;
    }
    out->resident_bytes = out->resident_entries * sizeof(int32_t);
    uint32_t n = ranges ? num_ranges : B;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t b = ranges ? ranges[r].req : r;
        if (b >= B)
            return ATTN_E_RANGE;
        int64_t len = attn_kv_addr_len(a, b);
        int64_t begin = ranges ? ranges[r].begin : 0;
        int64_t end = ranges ? ranges[r].end : len;
        if (begin < 0 || end < begin || end > len)
            return ATTN_E_RANGE;
        int64_t segs = attn_kv_addr_num_segments(a, begin, end);
        out->lookup_segments += (uint64_t)segs;
        /* logical demand: what the segment walk reads for this range */
        switch (a->kind) {
        case ATTN_KV_ADDR_CONTIG:
            out->lookup_page_entries += a->cache_row && segs ? 1 : 0;
            out->lookup_pointer_entries += 1; /* lens[b] */
            break;
        case ATTN_KV_ADDR_RAGGED:
            out->lookup_pointer_entries += 2; /* indptr[b], indptr[b + 1] */
            break;
        case ATTN_KV_ADDR_PAGED_DENSE:
            out->lookup_page_entries += (uint64_t)segs;
            out->lookup_pointer_entries += 1 + (a->cache_row ? 1 : 0); /* lens, remap */
            break;
        case ATTN_KV_ADDR_PAGED_CSR:
            out->lookup_page_entries += (uint64_t)segs;
            out->lookup_pointer_entries += 3; /* indptr[b], indptr[b + 1], last_page_len[b] */
            break;
        }
    }
    out->lookup_bytes = (out->lookup_page_entries + out->lookup_pointer_entries) * sizeof(int32_t);
    return 0;
}
