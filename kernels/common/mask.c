/* Mask programs, host side: validation, the program arena, FlashMask block
 * summaries, row hulls, the visible ledger and the representability gate
 * (seed 0x05, 0x06, 0x08B).  The predicates themselves live in mask.h so the
 * CPU engine and the CUDA kernels share one copy. */
#include "kernels/common/mask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest C*(T+C) we accept, so bit and cell counts never overflow. */
#define MASK_CELLS_MAX ((int64_t)1 << 60)

uint32_t attn_mask_needs(const attn_mask *m)
{
    switch (m->kind) {
    case ATTN_MASK_CAUSAL:
        return ATTN_MASK_NEED_CAUSAL;
    case ATTN_MASK_NONE:
        return ATTN_MASK_NEED_NONE;
    case ATTN_MASK_WINDOW:
        return ATTN_MASK_NEED_WINDOW;
    case ATTN_MASK_SINK:
        return ATTN_MASK_NEED_SINK;
    case ATTN_MASK_FLASHMASK:
        return ATTN_MASK_NEED_INTERVAL;
    case ATTN_MASK_DENSE:
        return ATTN_MASK_NEED_DENSE;
    }
    return 0;
}

const char *attn_mask_need_name(uint32_t need)
{
    switch (need) {
    case ATTN_MASK_NEED_CAUSAL:
        return "causal";
    case ATTN_MASK_NEED_NONE:
        return "none";
    case ATTN_MASK_NEED_WINDOW:
        return "window";
    case ATTN_MASK_NEED_SINK:
        return "sink";
    case ATTN_MASK_NEED_INTERVAL:
        return "interval";
    case ATTN_MASK_NEED_DENSE:
        return "dense";
    }
    return "unknown";
}

/* ---- validation ----------------------------------------------------------- */

static uint64_t dense_request_bytes(int64_t T, int64_t C)
{
    return ((uint64_t)C * (uint64_t)(T + C) + 7) / 8;
}

static int check_requests(const attn_request_desc *req, uint32_t B, attn_error_detail *err)
{
    char field[64];
    if (B > 0 && !req)
        return attn_error_set(err, ATTN_E_MISSING, "requests", "mask checked without requests");
    int64_t cells = 0;
    for (uint32_t b = 0; b < B; b++) {
        int64_t T = req[b].cache_len, C = req[b].new_len;
        if (T < 0) {
            snprintf(field, sizeof(field), "requests[%u].cache_len", b);
            return attn_error_set(err, ATTN_E_PHASE, field, "cache_len %lld is negative",
                                  (long long)T);
        }
        if (C < 1) {
            snprintf(field, sizeof(field), "requests[%u].new_len", b);
            return attn_error_set(err, ATTN_E_PHASE, field, "new_len %lld must be at least 1",
                                  (long long)C);
        }
        /* interval endpoints are int32 rows in [0, C]; cells must fit 60 bits */
        if (C > INT32_MAX || T > MASK_CELLS_MAX / C - C) {
            snprintf(field, sizeof(field), "requests[%u].new_len", b);
            return attn_error_set(err, ATTN_E_RANGE, field,
                                  "score rectangle %lld x (%lld + %lld) too large for a mask",
                                  (long long)C, (long long)T, (long long)C);
        }
        /* the batch total bounds every concatenated vector and bit offset */
        cells += C * (T + C) + (T + C);
        if (cells > MASK_CELLS_MAX)
            return attn_error_set(err, ATTN_E_TOO_LARGE, "requests",
                                  "mask cells of the batch exceed 2^60");
    }
    return 0;
}

/* One endpoint pair [s, e) of column k (request-local rows in [0, C]); half-open
 * by contract (seed 0x06B), so the two classic inclusive-end slips get their
 * own sentences: e == C + 1 and the empty inclusive pair s == e + 1. */
static int check_interval(const char *sname, const char *ename, uint64_t k, int32_t s, int32_t e,
                          int64_t C, attn_error_detail *err)
{
    char field[64];
    if (s < 0 || s > C) {
        snprintf(field, sizeof(field), "mask.%s[%llu]", sname, (unsigned long long)k);
        return attn_error_set(err, ATTN_E_MASK_INTERVAL, field, "start %d outside [0, %lld]", s,
                              (long long)C);
    }
    if (e == C + 1) {
        snprintf(field, sizeof(field), "mask.%s[%llu]", ename, (unsigned long long)k);
        return attn_error_set(err, ATTN_E_MASK_INTERVAL, field,
                              "end %d is new_len + 1: ends are exclusive, [start, end) with end "
                              "<= %lld",
                              e, (long long)C);
    }
    if (e < 0 || e > C) {
        snprintf(field, sizeof(field), "mask.%s[%llu]", ename, (unsigned long long)k);
        return attn_error_set(err, ATTN_E_MASK_INTERVAL, field, "end %d outside [0, %lld]", e,
                              (long long)C);
    }
    if (s > e) {
        snprintf(field, sizeof(field), "mask.%s[%llu]", sname, (unsigned long long)k);
        if (s == e + 1)
            return attn_error_set(err, ATTN_E_MASK_INTERVAL, field,
                                  "start %d = end + 1 reads as an inclusive empty interval; use "
                                  "start == end for no masked rows",
                                  s);
        return attn_error_set(err, ATTN_E_MASK_INTERVAL, field, "start %d after end %d", s, e);
    }
    return 0;
}

static int check_flashmask(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                           attn_error_detail *err)
{
    uint64_t want = 0, k = 0;
    char field[64];
    int rv;
    if (!m->fm_lts || !m->fm_lte || !m->fm_uts || !m->fm_ute) {
        const char *f = !m->fm_lts   ? "mask.lts"
                        : !m->fm_lte ? "mask.lte"
                        : !m->fm_uts ? "mask.uts"
                                     : "mask.ute";
        return attn_error_set(err, ATTN_E_MISSING, f, "flashmask needs all four endpoint vectors");
    }
    for (uint32_t b = 0; b < B; b++)
        want += (uint64_t)(req[b].cache_len + req[b].new_len);
    if (m->fm_len != want)
        return attn_error_set(err, ATTN_E_SHAPE, "mask.lts",
                              "endpoint vectors hold %llu columns, requests need sum(T+C) = %llu",
                              (unsigned long long)m->fm_len, (unsigned long long)want);
    for (uint32_t b = 0; b < B; b++) {
        int64_t C = req[b].new_len, n = req[b].cache_len + C;
        for (int64_t j = 0; j < n; j++, k++) {
            int32_t us = m->fm_uts[k], ue = m->fm_ute[k], ls = m->fm_lts[k], le = m->fm_lte[k];
            if ((rv = check_interval("uts", "ute", k, us, ue, C, err)) != 0)
                return rv;
            if ((rv = check_interval("lts", "lte", k, ls, le, C, err)) != 0)
                return rv;
            if (us == ue || ls == le)
                continue;
            /* seed 0x06J: the two runs of a column must be disjoint, upper first */
            if (us < le && ls < ue) {
                snprintf(field, sizeof(field), "mask.lts[%llu]", (unsigned long long)k);
                return attn_error_set(err, ATTN_E_MASK_INTERVAL, field,
                                      "request %u column %lld: upper [%d, %d) and lower [%d, %d) "
                                      "overlap",
                                      b, (long long)j, us, ue, ls, le);
            }
            if (ue > ls) {
                snprintf(field, sizeof(field), "mask.uts[%llu]", (unsigned long long)k);
                return attn_error_set(err, ATTN_E_MASK_INTERVAL, field,
                                      "request %u column %lld: upper [%d, %d) lies below lower "
                                      "[%d, %d)",
                                      b, (long long)j, us, ue, ls, le);
            }
        }
    }
    return 0;
}

int attn_mask_validate(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                       attn_error_detail *err)
{
    int rv;
    if (!m)
        return attn_error_set(err, ATTN_E_MISSING, "mask", "no mask given");
    if ((rv = check_requests(req, B, err)) != 0)
        return rv;
    switch (m->kind) {
    case ATTN_MASK_CAUSAL:
    case ATTN_MASK_NONE:
        return 0;
    case ATTN_MASK_SINK:
    case ATTN_MASK_WINDOW:
        if (m->kind == ATTN_MASK_SINK && m->sinks < 0)
            return attn_error_set(err, ATTN_E_MASK_INTERVAL, "mask.sinks", "sinks %d is negative",
                                  m->sinks);
        if (m->left < 0)
            return attn_error_set(err, ATTN_E_MASK_INTERVAL, "mask.left",
                                  "window left %d is negative", m->left);
        return 0;
    case ATTN_MASK_FLASHMASK:
        return check_flashmask(m, req, B, err);
    case ATTN_MASK_DENSE: {
        uint64_t want = 0;
        /* seed 0x05B: a bit without a bound polarity computes the complement graph */
        if (m->polarity != ATTN_POLARITY_TRUE_MEANS_MASKED &&
            m->polarity != ATTN_POLARITY_TRUE_MEANS_ALLOWED)
            return attn_error_set(err, ATTN_E_MASK_POLARITY, "mask.polarity",
                                  "dense mask needs polarity true_means_masked or "
                                  "true_means_allowed");
        if (!m->dense_bits)
            return attn_error_set(err, ATTN_E_MISSING, "mask.bits", "dense mask without bits");
        for (uint32_t b = 0; b < B; b++)
            want += dense_request_bytes(req[b].cache_len, req[b].new_len);
        if (m->dense_bytes != want)
            return attn_error_set(err, ATTN_E_SHAPE, "mask.bits",
                                  "dense mask holds %llu bytes, requests need %llu",
                                  (unsigned long long)m->dense_bytes, (unsigned long long)want);
        return 0;
    }
    }
    return attn_error_set(err, ATTN_E_MASK_KIND, "mask.kind", "unknown mask kind %d", (int)m->kind);
}

/* ---- FlashMask column geometry ----------------------------------------- */

/* The visible rows of one FlashMask column: [a, C) minus the two runs, where
 * a = max(0, j - T) under fm_causal.  Writes up to three sorted runs. */
static int fm_visible_runs(int64_t T, int64_t C, int64_t j, bool causal, int32_t us, int32_t ue,
                           int32_t ls, int32_t le, int64_t lo[3], int64_t hi[3])
{
    int64_t cut_s[2], cut_e[2], at = causal ? (j - T > 0 ? j - T : 0) : 0;
    int nc = 0, n = 0;
    if (us < ue) {
        cut_s[nc] = us;
        cut_e[nc++] = ue;
    }
    if (ls < le) {
        cut_s[nc] = ls;
        cut_e[nc++] = le;
    }
    for (int c = 0; c < nc; c++) { /* runs are ordered upper-first by validation */
        if (cut_s[c] > at) {
            lo[n] = at;
            hi[n++] = cut_s[c] < C ? cut_s[c] : C;
        }
        if (cut_e[c] > at)
            at = cut_e[c];
    }
    if (at < C) {
        lo[n] = at;
        hi[n++] = C;
    }
    return n;
}

/* Disjoint-set "next unpainted row" finder with path halving. */
static int64_t next_free(int64_t *nxt, int64_t r)
{
    while (nxt[r] != r) {
        nxt[r] = nxt[nxt[r]];
        r = nxt[r];
    }
    return r;
}

/* Row hulls of one FlashMask request: lo[i] = first column where row i is
 * visible, hi[i] = one past the last.  Each column paints its visible runs
 * onto rows not yet painted, so the sweep costs O((T+C) + C) not O(C(T+C)). */
static int fm_row_hulls(const attn_mask *m, int64_t T, int64_t C, uint64_t col, int64_t *row_lo,
                        int64_t *row_hi, uint64_t *visible)
{
    int64_t n = T + C, lo[3], hi[3];
    int64_t *nxt = malloc(sizeof(*nxt) * (size_t)(C + 1));
    uint64_t vis = 0;
    if (!nxt)
        return ATTN_E_NOMEM;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t r = 0; r <= C; r++)
            nxt[r] = r;
        for (int64_t t = 0; t < n; t++) {
            int64_t j = pass == 0 ? t : n - 1 - t;
            uint64_t k = col + (uint64_t)j;
            int nr = fm_visible_runs(T, C, j, m->fm_causal, m->fm_uts[k], m->fm_ute[k],
                                     m->fm_lts[k], m->fm_lte[k], lo, hi);
            for (int q = 0; q < nr; q++) {
                if (pass == 0)
                    vis += (uint64_t)(hi[q] - lo[q]);
                for (int64_t r = next_free(nxt, lo[q]); r < hi[q]; r = next_free(nxt, r)) {
                    if (pass == 0)
                        row_lo[r] = j;
                    else
                        row_hi[r] = j + 1;
                    nxt[r] = r + 1;
                }
            }
        }
    }
    free(nxt);
    *visible = vis;
    return 0;
}

/* The eight summaries of one family over columns [c0, c1) (seed 0x06C),
 * taken over non-empty intervals only: an empty column makes the start max
 * INT32_MAX so the family can never claim to cover the block, and a block
 * without any interval reads as disjoint.  Both keep the 0x06D tests safe. */
static void fm_family_summary(const int32_t *st, const int32_t *en, uint64_t c0, uint64_t c1,
                              int32_t out[4])
{
    int32_t s_min = INT32_MAX, s_max = INT32_MIN, e_min = INT32_MAX, e_max = INT32_MIN;
    bool any_empty = false;
    for (uint64_t c = c0; c < c1; c++) {
        if (st[c] == en[c]) {
            any_empty = true;
            continue;
        }
        s_min = st[c] < s_min ? st[c] : s_min;
        s_max = st[c] > s_max ? st[c] : s_max;
        e_min = en[c] < e_min ? en[c] : e_min;
        e_max = en[c] > e_max ? en[c] : e_max;
    }
    if (any_empty)
        s_max = INT32_MAX;
    out[0] = s_min;
    out[1] = s_max;
    out[2] = e_min;
    out[3] = e_max;
}

void attn_mask_fm_summarize(const int32_t *lts, const int32_t *lte, const int32_t *uts,
                            const int32_t *ute, uint64_t n_cols, uint32_t block_cols, int32_t *out)
{
    for (uint64_t c0 = 0; c0 < n_cols; c0 += block_cols, out += ATTN_FM_SUMMARY_LEN) {
        uint64_t c1 = c0 + block_cols < n_cols ? c0 + block_cols : n_cols;
        fm_family_summary(uts, ute, c0, c1, out + ATTN_FM_UTS_MIN);
        fm_family_summary(lts, lte, c0, c1, out + ATTN_FM_LTS_MIN);
    }
}

/* ---- program build -------------------------------------------------------- */

static size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

int attn_mask_prog_build(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                         attn_mask_prog *out, attn_error_detail *err)
{
    return attn_mask_prog_build_blocks(m, req, B, ATTN_MASK_BLOCK_COLS_DEFAULT, out, err);
}

int attn_mask_prog_build_blocks(const attn_mask *m, const attn_request_desc *req, uint32_t B,
                                uint32_t block_cols, attn_mask_prog *out, attn_error_detail *err)
{
    size_t off_req, off_fm, off_sum, off_rows, off_bits, total;
    uint64_t rows = 0, cols = 0, blocks = 0, bytes = 0;
    bool fm, dense;
    attn_mask_req_info *info;
    char *arena;
    int rv;

    memset(out, 0, sizeof(*out));
    if (block_cols == 0)
        return attn_error_set(err, ATTN_E_RANGE, "block_cols", "summary block width must be >= 1");
    if ((rv = attn_mask_validate(m, req, B, err)) != 0)
        return rv;
    fm = m->kind == ATTN_MASK_FLASHMASK;
    dense = m->kind == ATTN_MASK_DENSE;
    for (uint32_t b = 0; b < B; b++) {
        uint64_t n = (uint64_t)(req[b].cache_len + req[b].new_len);
        rows += (uint64_t)req[b].new_len;
        cols += n;
        blocks += (n + block_cols - 1) / block_cols;
        bytes += dense_request_bytes(req[b].cache_len, req[b].new_len);
    }
    off_req = 0;
    off_fm = align16(off_req + sizeof(attn_mask_req_info) * B);
    off_sum = align16(off_fm + (fm ? 4 * sizeof(int32_t) * cols : 0));
    off_rows = align16(off_sum + (fm ? ATTN_FM_SUMMARY_LEN * sizeof(int32_t) * blocks : 0));
    off_bits = align16(off_rows + (fm || dense ? 2 * sizeof(int64_t) * rows : 0));
    total = align16(off_bits + (dense ? bytes : 0));
    arena = calloc(1, total ? total : 1);
    if (!arena)
        return attn_error_set(err, ATTN_E_NOMEM, "mask", "mask program of %zu bytes", total);

    out->kind = m->kind;
    out->left = m->left;
    out->sinks = m->sinks;
    out->fm_causal = m->fm_causal;
    out->true_means_masked = m->polarity == ATTN_POLARITY_TRUE_MEANS_MASKED;
    out->num_requests = B;
    out->block_cols = block_cols;
    out->arena = arena;
    out->arena_bytes = total;
    info = (attn_mask_req_info *)(arena + off_req);
    out->req = info;
    if (fm) {
        int32_t *v = (int32_t *)(arena + off_fm);
        memcpy(v, m->fm_lts, sizeof(int32_t) * cols);
        memcpy(v + cols, m->fm_lte, sizeof(int32_t) * cols);
        memcpy(v + 2 * cols, m->fm_uts, sizeof(int32_t) * cols);
        memcpy(v + 3 * cols, m->fm_ute, sizeof(int32_t) * cols);
        out->fm_lts = v;
        out->fm_lte = v + cols;
        out->fm_uts = v + 2 * cols;
        out->fm_ute = v + 3 * cols;
        out->fm_summary = (const int32_t *)(arena + off_sum);
        out->num_blocks = blocks;
    }
    if (fm || dense) {
        out->row_lo = (const int64_t *)(arena + off_rows);
        out->row_hi = out->row_lo + rows;
    }
    if (dense) {
        memcpy(arena + off_bits, m->dense_bits, bytes);
        out->dense_bits = (const uint8_t *)(arena + off_bits);
    }

    rows = cols = blocks = bytes = 0;
    for (uint32_t b = 0; b < B; b++) {
        attn_mask_req_info *r = &info[b];
        int64_t n;
        r->T = req[b].cache_len;
        r->C = req[b].new_len;
        r->col = (int64_t)cols;
        r->row = (int64_t)rows;
        r->blk = (int64_t)blocks;
        r->dense_byte = (int64_t)bytes;
        n = r->T + r->C;
        if (fm) {
            int32_t *sum = (int32_t *)(arena + off_sum) + blocks * ATTN_FM_SUMMARY_LEN;
            int64_t *lo = (int64_t *)out->row_lo + rows;
            int64_t *hi = (int64_t *)out->row_hi + rows;
            attn_mask_fm_summarize(m->fm_lts + cols, m->fm_lte + cols, m->fm_uts + cols,
                                   m->fm_ute + cols, (uint64_t)n, block_cols, sum);
            if ((rv = fm_row_hulls(m, r->T, r->C, cols, lo, hi, &r->visible)) != 0) {
                attn_mask_prog_free(out);
                return attn_error_set(err, rv, "mask", "no memory for FlashMask row hulls");
            }
        } else if (dense) {
            int64_t *lo = (int64_t *)out->row_lo + rows;
            int64_t *hi = (int64_t *)out->row_hi + rows;
            for (int64_t i = 0; i < r->C; i++) {
                lo[i] = hi[i] = 0;
                for (int64_t j = 0; j < n; j++)
                    if (attn_mask_visible(out, b, i, j)) {
                        if (hi[i] == 0)
                            lo[i] = j;
                        hi[i] = j + 1;
                        r->visible++;
                    }
            }
        } else {
            /* closed forms: the row ranges are exact, so their widths are the ledger */
            for (int64_t i = 0; i < r->C; i++) {
                attn_row_keys k = attn_mask_row_keys(out, b, i);
                r->visible += (uint64_t)((k.hi0 - k.lo0) + (k.hi1 - k.lo1));
            }
        }
        out->total_visible += r->visible;
        rows += (uint64_t)r->C;
        cols += (uint64_t)n;
        blocks += ((uint64_t)n + block_cols - 1) / block_cols;
        bytes += dense_request_bytes(r->T, r->C);
    }
    return 0;
}

void attn_mask_prog_free(attn_mask_prog *p)
{
    if (!p)
        return;
    free(p->arena);
    memset(p, 0, sizeof(*p));
}

/* Move a pointer that lies in [host, host + bytes) to the same offset in dev. */
static const void *rebase_ptr(const void *ptr, const void *host, void *dev)
{
    if (!ptr)
        return NULL;
    return (const char *)dev + ((const char *)ptr - (const char *)host);
}

attn_mask_prog attn_mask_prog_rebase(const attn_mask_prog *host, void *dev_arena)
{
    attn_mask_prog d = *host;
    const void *h = host->arena;
    d.req = (const attn_mask_req_info *)rebase_ptr(host->req, h, dev_arena);
    d.fm_lts = (const int32_t *)rebase_ptr(host->fm_lts, h, dev_arena);
    d.fm_lte = (const int32_t *)rebase_ptr(host->fm_lte, h, dev_arena);
    d.fm_uts = (const int32_t *)rebase_ptr(host->fm_uts, h, dev_arena);
    d.fm_ute = (const int32_t *)rebase_ptr(host->fm_ute, h, dev_arena);
    d.fm_summary = (const int32_t *)rebase_ptr(host->fm_summary, h, dev_arena);
    d.row_lo = (const int64_t *)rebase_ptr(host->row_lo, h, dev_arena);
    d.row_hi = (const int64_t *)rebase_ptr(host->row_hi, h, dev_arena);
    d.dense_bits = (const uint8_t *)rebase_ptr(host->dense_bits, h, dev_arena);
    d.arena = NULL; /* the device copy is owned by whoever made it */
    return d;
}

uint64_t attn_mask_visible_cells(const attn_mask_prog *p, uint32_t b)
{
    return b < p->num_requests ? p->req[b].visible : 0;
}

/* ---- representability gate (seed 0x06H) ----------------------------------- */

int attn_mask_dense_to_flashmask(const uint8_t *bits, attn_mask_polarity polarity, int64_t T,
                                 int64_t C, int32_t *lts, int32_t *lte, int32_t *uts, int32_t *ute,
                                 attn_error_detail *err)
{
    int64_t n = T + C;
    bool masked_bit;
    if (polarity != ATTN_POLARITY_TRUE_MEANS_MASKED && polarity != ATTN_POLARITY_TRUE_MEANS_ALLOWED)
        return attn_error_set(err, ATTN_E_MASK_POLARITY, "mask.polarity",
                              "dense mask needs an explicit polarity");
    if (T < 0 || C < 1 || C > INT32_MAX)
        return attn_error_set(err, ATTN_E_RANGE, "requests", "bad (T, C) = (%lld, %lld)",
                              (long long)T, (long long)C);
    masked_bit = polarity == ATTN_POLARITY_TRUE_MEANS_MASKED;
    for (int64_t j = 0; j < n; j++) {
        int32_t rs[2] = {0, 0}, re[2] = {0, 0};
        int runs = 0;
        bool in_run = false;
        for (int64_t i = 0; i <= C; i++) {
            bool hidden = false;
            if (i < C) {
                int64_t bit = i * n + j;
                hidden = (((bits[bit >> 3] >> (bit & 7)) & 1u) != 0) == masked_bit;
            }
            if (hidden && !in_run) {
                if (runs == 2) {
                    /* a third run: two intervals cannot hold it (seed 0x06H) */
                    return attn_error_set(err, ATTN_E_MASK_UNREPRESENTABLE, "mask.bits",
                                          "column %lld has more than two masked row runs (third "
                                          "starts at row %lld); FlashMask holds at most two",
                                          (long long)j, (long long)i);
                }
                rs[runs] = (int32_t)i;
                in_run = true;
            } else if (!hidden && in_run) {
                re[runs++] = (int32_t)i;
                in_run = false;
            }
        }
        if (runs == 1 && rs[0] > j - T) {
            /* a single run below the diagonal is the lower interval, as in a causal document mask
             */
            rs[1] = rs[0];
            re[1] = re[0];
            rs[0] = re[0] = 0;
        }
        uts[j] = rs[0];
        ute[j] = re[0];
        lts[j] = rs[1];
        lte[j] = re[1];
    }
    return 0;
}

int attn_mask_dense_to_flashmask_all(const attn_mask *dense, const attn_request_desc *req,
                                     uint32_t B, attn_mask *out, attn_error_detail *err)
{
    uint64_t cols = 0, col = 0, byte = 0;
    int rv;
    memset(out, 0, sizeof(*out));
    if ((rv = attn_mask_validate(dense, req, B, err)) != 0)
        return rv;
    if (dense->kind != ATTN_MASK_DENSE)
        return attn_error_set(err, ATTN_E_MASK_KIND, "mask.kind",
                              "only a dense mask converts to FlashMask");
    for (uint32_t b = 0; b < B; b++)
        cols += (uint64_t)(req[b].cache_len + req[b].new_len);
    out->kind = ATTN_MASK_FLASHMASK;
    out->fm_len = cols;
    out->fm_lts = malloc(sizeof(int32_t) * (cols ? cols : 1));
    out->fm_lte = malloc(sizeof(int32_t) * (cols ? cols : 1));
    out->fm_uts = malloc(sizeof(int32_t) * (cols ? cols : 1));
    out->fm_ute = malloc(sizeof(int32_t) * (cols ? cols : 1));
    if (!out->fm_lts || !out->fm_lte || !out->fm_uts || !out->fm_ute) {
        attn_mask_flashmask_release(out);
        return attn_error_set(err, ATTN_E_NOMEM, "mask", "no memory for FlashMask vectors");
    }
    for (uint32_t b = 0; b < B; b++) {
        int64_t T = req[b].cache_len, C = req[b].new_len;
        rv = attn_mask_dense_to_flashmask(dense->dense_bits + byte, dense->polarity, T, C,
                                          out->fm_lts + col, out->fm_lte + col, out->fm_uts + col,
                                          out->fm_ute + col, err);
        if (rv != 0) {
            attn_mask_flashmask_release(out);
            if (err) {
                char inner[sizeof(err->message)];
                memcpy(inner, err->message, sizeof(inner));
                snprintf(err->message, sizeof(err->message), "request %u: %.200s", b, inner);
            }
            return rv;
        }
        col += (uint64_t)(T + C);
        byte += dense_request_bytes(T, C);
    }
    return 0;
}

void attn_mask_flashmask_release(attn_mask *m)
{
    free(m->fm_lts);
    free(m->fm_lte);
    free(m->fm_uts);
    free(m->fm_ute);
    m->fm_lts = m->fm_lte = m->fm_uts = m->fm_ute = NULL;
    m->fm_len = 0;
}
