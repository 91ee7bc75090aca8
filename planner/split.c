/* Split plans for every policy (seed 0x03B, 0x03G, 0x09D, 0x0AB, 0x0AD).
 *
 * Building is two passes over the same per-request description: first each
 * request's active split count, then its bounds, produced left to right by
 * one `next_end` rule per policy so that coverage is exact by construction
 * (every split starts where the previous one ended and the last ends at L_b).
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/split.h"

/* A plan larger than this is a configuration error, not a schedule. */
#define ATTN__SPLIT_ITEMS_MAX (1u << 20)

typedef enum split_mode {
    SPLIT_MODE_BALANCED, /* S_b balanced quotient/remainder splits (0x03B) */
    SPLIT_MODE_CHUNK,    /* fixed chunk width, last chunk shorter (0x03B) */
    SPLIT_MODE_GLOBAL,   /* cut at global equal-work worker boundaries (0x09D) */
} split_mode;

typedef struct split_ctx {
    uint32_t num_requests;
    const int64_t *kv_len;
    split_mode mode;
    int64_t chunk;    /* CHUNK: width in keys */
    uint32_t *active; /* [B]: splits owning keys */
    /* GLOBAL: the total key count cut into `workers` balanced runs */
    int64_t *offset; /* [B]: first global key of request b */
    int64_t total;
    uint32_t workers;
} split_ctx;

/* ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b. */
static int64_t ceil_div_i64(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

void attn_split_plan_free(attn_split_plan *p)
{
    if (p == NULL)
        return;
    free(p->num_splits);
    free(p->slot_indptr);
    free(p->items);
    memset(p, 0, sizeof(*p));
}

void attn_split_bounds_balanced(int64_t len, uint32_t num_splits, uint32_t s, int64_t *begin,
                                int64_t *end)
{
    if (num_splits == 0) {
        *begin = *end = 0;
        return;
    }
    /* seed 0x03B: start = s q + min(s, r), n = q + [s < r] */
    int64_t q = len / num_splits;
    int64_t r = len % num_splits;
    int64_t si = s;
    *begin = si * q + (si < r ? si : r);
    *end = *begin + q + (si < r ? 1 : 0);
}

uint32_t attn_split_fa_heuristic(uint64_t blocks, uint32_t n_sm, uint64_t n_kblocks,
                                 uint32_t max_splits)
{
    if (n_sm == 0)
        return 1;
    /* seed 0x0AB (pinned source): a grid that already fills 80% of the
     * workers gains nothing from a second reduction level. */
    if ((double)blocks >= 0.8 * (double)n_sm)
        return 1;
    uint64_t cap = max_splits;
    if (cap > n_sm)
        cap = n_sm;
    if (cap > n_kblocks)
        cap = n_kblocks;
    if (cap <= 1)
        return 1;
    double best = 0.0;
    /* Two passes instead of a stored efficiency vector: the same values are
     * recomputed bit-identically, and the first pass only finds the best. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t s = 1; s <= cap; s++) {
            /* seed 0x0AB: a split count that leaves blocks-per-split
             * unchanged only adds partial states */
            bool eligible = s == 1 || ceil_div_i64((int64_t)n_kblocks, (int64_t)s) !=
                                          ceil_div_i64((int64_t)n_kblocks, (int64_t)(s - 1));
            if (!eligible)
                continue;
            double waves = (double)(blocks * s) / (double)n_sm;
            double eff = waves / ceil(waves);
            if (pass == 0 && eff > best)
                best = eff;
            if (pass == 1 && eff >= 0.85 * best)
                return (uint32_t)s;
        }
    }
    return 1;
}

static uint64_t fi_count_chunks(uint32_t num_requests, const int64_t *pages, int64_t per_chunk)
{
    uint64_t n = 0;
    for (uint32_t b = 0; b < num_requests; b++) {
        /* an empty request still occupies one (identity) producer */
        int64_t pg = pages[b] > 0 ? pages[b] : 1;
        n += (uint64_t)ceil_div_i64(pg, per_chunk);
    }
    return n;
}

int64_t attn_split_fi_search(uint32_t num_requests, const int64_t *pages, uint32_t units,
                             uint32_t grid_capacity, int64_t min_pages, uint64_t *num_chunks)
{
    int64_t low = min_pages > 0 ? min_pages : 1;
    int64_t high = 0;
    uint64_t u = units > 0 ? units : 1;
    for (uint32_t b = 0; b < num_requests; b++)
        if (pages[b] > high)
            high = pages[b];
    /* seed 0x0AD: the smallest chunk whose partitioned grid still fits */
    while (low < high) {
        int64_t mid = low + (high - low) / 2;
        if (fi_count_chunks(num_requests, pages, mid) * u > grid_capacity)
            low = mid + 1;
        else
            high = mid;
    }
    if (num_chunks != NULL)
        *num_chunks = fi_count_chunks(num_requests, pages, low);
    return low;
}

/* Sift slot i of a min-heap of finish times down to its place. */
static void heap_down(int64_t *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < n && h[l] < h[m])
            m = l;
        if (l + 1 < n && h[l + 1] < h[m])
            m = l + 1;
        if (m == i)
            return;
        int64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int64_t attn_split_wave_makespan(uint32_t num_requests, const int64_t *kv_len, int64_t chunk,
                                 uint32_t units, uint32_t grid_capacity, int64_t item_keys)
{
    if (num_requests == 0 || kv_len == NULL || chunk <= 0 || grid_capacity == 0)
        return -1;
    uint64_t u = units > 0 ? units : 1, ctas = 0;
    for (uint32_t b = 0; b < num_requests; b++)
        ctas += (uint64_t)(kv_len[b] > 0 ? ceil_div_i64(kv_len[b], chunk) : 1) * u;
    if (ctas > ATTN_SPLIT_WAVE_CTAS)
        return -1;
    uint32_t n = grid_capacity < ctas ? grid_capacity : (uint32_t)ctas;
    int64_t *h = calloc(n, sizeof(int64_t)); /* finish time of each slot, a min-heap */
    if (h == NULL)
        return -1;
    int64_t span = 0;
    for (uint32_t b = 0; b < num_requests; b++) {
        for (int64_t k0 = 0; k0 < kv_len[b] || k0 == 0; k0 += chunk) {
            int64_t keys = kv_len[b] - k0 < chunk ? kv_len[b] - k0 : chunk;
            for (uint64_t j = 0; j < u; j++) {
                h[0] += keys + item_keys; /* the earliest free slot takes the next producer */
                if (h[0] > span)
                    span = h[0];
                heap_down(h, n, 0);
            }
            if (kv_len[b] == 0)
                break;
        }
    }
    free(h);
    return span;
}

/* The fluid bound of the wave model: every slot busy until the end (the
 * keys and item costs of all producers over the slots). */
static double wave_fluid_keys(const attn_split_params *p, uint32_t nb, const int64_t *kv_len)
{
    const uint32_t units = p->units_per_split > 0 ? p->units_per_split : 1;
    double keys = 0;
    for (uint32_t b = 0; b < nb; b++)
        keys += (double)((kv_len[b] > 0 ? kv_len[b] : 0) + p->wave_item_keys);
    return keys * units / (double)p->grid_capacity;
}

/* The FI wave model: the split count s in 1 .. ATTN_SPLIT_WAVE_MAX (chunks
 * of ceil(max_pages / s) pages, no shorter than min_pages but the tail)
 * with the shortest makespan plus wave_merge_keys when split; s = 1 keeps
 * per_chunk = max_pages.  A split must win by more than 2 %: the model is
 * coarse, and an unsplit plan needs no merge. */
static int64_t fi_wave_chunk(const attn_split_params *p, uint32_t nb, const int64_t *kv_len,
                             int64_t page, int64_t max_pages, int64_t min_pages)
{
    uint32_t units = p->units_per_split > 0 ? p->units_per_split : 1;
    int64_t best_pages = max_pages;
    int64_t base = attn_split_wave_makespan(nb, kv_len, max_pages * page, units, p->grid_capacity,
                                            p->wave_item_keys);
    if (base < 0)
        return max_pages;
    int64_t best = base;
    uint32_t s_max = ATTN_SPLIT_WAVE_MAX;
    for (uint32_t s = 2; s <= s_max; s++) {
        int64_t pages = ceil_div_i64(max_pages, s);
        if (pages < min_pages || pages == best_pages)
            continue;
        int64_t span = attn_split_wave_makespan(nb, kv_len, pages * page, units, p->grid_capacity,
                                                p->wave_item_keys);
        if (span < 0)
            continue;
        span += p->wave_merge_keys;
        if (span < best && (double)span < 0.98 * (double)base) {
            best = span;
            best_pages = pages;
        }
        /* a few long requests among many short ones: past 4 chunks the
         * best plan still ends on one CTA's lone chunk (more than twice
         * the fluid bound), so longer cuts are tried up to the tail cap */
        if (s == ATTN_SPLIT_WAVE_MAX && (double)best > 2.0 * wave_fluid_keys(p, nb, kv_len))
            s_max = p->fi_max_splits > 0 && p->fi_max_splits < ATTN_SPLIT_WAVE_TAIL_MAX
                        ? p->fi_max_splits
                        : ATTN_SPLIT_WAVE_TAIL_MAX;
    }
    return best_pages;
}

int64_t attn_split_paper_chunk(uint32_t num_requests, const int64_t *kv_len, const int64_t *q_len,
                               uint32_t q_tile, uint32_t workers)
{
    int64_t work = 0;
    int64_t tile = q_tile > 0 ? q_tile : 1;
    for (uint32_t b = 0; b < num_requests; b++) {
        int64_t rows = q_len != NULL ? q_len[b] : 1;
        work += ceil_div_i64(rows > 0 ? rows : 1, tile) * kv_len[b];
    }
    if (workers == 0 || work <= 0)
        return 1;
    /* seed 0x09E: integerised with ceil so the chunks never outnumber the
     * queue length the formula intends */
    return ceil_div_i64(work, workers);
}

void attn_split_params_from_manifest(const attn_manifest *m, uint32_t num_kv_heads,
                                     attn_split_params *p)
{
    p->policy = m->policy.split_policy;
    p->fixed_splits = m->policy.splits;
    p->units_per_split = num_kv_heads > 0 ? num_kv_heads : m->num_qo_heads;
    if (m->policy.graph && m->policy.splits > 0)
        p->graph_splits = m->policy.splits;
}

/* GLOBAL: the worker owning global key `pos` under balanced runs. */
static uint32_t global_worker_of(const split_ctx *c, int64_t pos)
{
    int64_t q = c->total / c->workers;
    int64_t r = c->total % c->workers;
    if (pos < r * (q + 1))
        return (uint32_t)(pos / (q + 1));
    return (uint32_t)(r + (pos - r * (q + 1)) / q);
}

/* End (request-local) of split s of request b that begins at `begin`. */
static int64_t split_next_end(const split_ctx *c, uint32_t b, uint32_t s, int64_t begin)
{
    int64_t len = c->kv_len[b];
    switch (c->mode) {
    case SPLIT_MODE_BALANCED: {
        int64_t lo, hi;
        attn_split_bounds_balanced(len, c->active[b], s, &lo, &hi);
        return hi;
    }
    case SPLIT_MODE_CHUNK:
        return begin + c->chunk < len ? begin + c->chunk : len;
    case SPLIT_MODE_GLOBAL: {
        /* seed 0x09D: a worker run may cross into the next request, the
         * fragment (and its state) may not */
        int64_t lo, hi;
        uint32_t w = global_worker_of(c, c->offset[b] + begin);
        attn_split_bounds_balanced(c->total, c->workers, w, &lo, &hi);
        hi -= c->offset[b];
        return hi < len ? hi : len;
    }
    }
    return len;
}

static int resolve_policy(const attn_split_params *p, attn_split_policy *out,
                          attn_error_detail *err)
{
    attn_split_policy pol = p->policy;
    if (pol == ATTN_SPLIT_AUTO)
        pol = (p->fixed_splits > 0 || p->fixed_chunk > 0) ? ATTN_SPLIT_FIXED : p->default_policy;
    switch (pol) {
    case ATTN_SPLIT_FA:
    case ATTN_SPLIT_FI:
    case ATTN_SPLIT_GLOBAL:
    case ATTN_SPLIT_FIXED:
        *out = pol;
        return 0;
    case ATTN_SPLIT_AUTO:
        return attn_error_set(err, ATTN_E_POLICY, "policy.split_policy",
                              "auto split policy with no engine default");
    }
    return attn_error_set(err, ATTN_E_POLICY, "policy.split_policy", "unknown split policy %d",
                          (int)p->policy);
}

static int check_params(const attn_split_params *p, attn_split_policy pol, attn_error_detail *err)
{
    if (p->min_chunk < 0)
        return attn_error_set(err, ATTN_E_SPLIT, "min_chunk", "min_chunk %lld is negative",
                              (long long)p->min_chunk);
    if (p->max_chunk < 0)
        return attn_error_set(err, ATTN_E_SPLIT, "max_chunk", "max_chunk %lld is negative",
                              (long long)p->max_chunk);
    if (p->min_chunk > 0 && p->max_chunk > 0 && p->min_chunk > p->max_chunk)
        return attn_error_set(err, ATTN_E_SPLIT, "min_chunk",
                              "min_chunk %lld exceeds max_chunk %lld", (long long)p->min_chunk,
                              (long long)p->max_chunk);
    if (pol == ATTN_SPLIT_FIXED) {
        if (p->fixed_chunk < 0)
            return attn_error_set(err, ATTN_E_SPLIT, "policy.chunk", "chunk %lld is negative",
                                  (long long)p->fixed_chunk);
        if (p->fixed_splits == 0 && p->fixed_chunk == 0)
            return attn_error_set(err, ATTN_E_SPLIT, "policy.splits",
                                  "fixed split policy needs a split count > 0 or a chunk width");
        if (p->fixed_splits > 0 && p->fixed_chunk > 0)
            return attn_error_set(err, ATTN_E_SPLIT, "policy.splits",
                                  "give a split count or a chunk width, not both");
        if (p->fixed_chunk > 0 && p->max_chunk > 0 && p->fixed_chunk > p->max_chunk)
            return attn_error_set(err, ATTN_E_SPLIT, "policy.chunk",
                                  "chunk %lld exceeds max_chunk %lld", (long long)p->fixed_chunk,
                                  (long long)p->max_chunk);
    } else if (p->grid_capacity == 0) {
        return attn_error_set(err, ATTN_E_SPLIT, "grid_capacity",
                              "policy %s needs a grid capacity > 0", attn_split_policy_name(pol));
    }
    return 0;
}

/* FA (seed 0x0AB): one split count for the batch from the wave heuristic,
 * then per-request balanced bounds (0x03B) capped by L_b and min_chunk. */
static void plan_fa(const attn_split_params *p, uint32_t nb, const int64_t *kv_len,
                    const int64_t *q_len, split_ctx *c)
{
    uint64_t units = p->units_per_split > 0 ? p->units_per_split : 1;
    int64_t kv_block = p->kv_block > 0 ? p->kv_block : ATTN_SPLIT_KV_BLOCK_DEFAULT;
    uint64_t blocks = 0;
    int64_t max_len = 0;
    for (uint32_t b = 0; b < nb; b++) {
        int64_t rows = q_len != NULL && q_len[b] > 0 ? q_len[b] : 1;
        blocks += units * (uint64_t)(p->q_tile > 0 ? ceil_div_i64(rows, p->q_tile) : 1);
        if (kv_len[b] > max_len)
            max_len = kv_len[b];
    }
    uint32_t max_splits = p->max_splits > 0 ? p->max_splits : ATTN_SPLIT_MAX_DEFAULT;
    uint32_t s = attn_split_fa_heuristic(blocks, p->grid_capacity,
                                         (uint64_t)ceil_div_i64(max_len, kv_block), max_splits);
    c->mode = SPLIT_MODE_BALANCED;
    for (uint32_t b = 0; b < nb; b++) {
        int64_t sb = s;
        if (p->min_chunk > 0 && kv_len[b] / p->min_chunk < sb)
            sb = kv_len[b] / p->min_chunk > 0 ? kv_len[b] / p->min_chunk : 1;
        if (kv_len[b] < sb)
            sb = kv_len[b];
        c->active[b] = (uint32_t)sb;
    }
}

/* FI (seed 0x0AD): unsplit when B x units already fills the grid (or, with
 * the wave model, the split count that shortens the last wave), else the
 * binary-searched pages-per-chunk; fixed-width chunks per request. */
static int plan_fi(const attn_split_params *p, uint32_t nb, const int64_t *kv_len, split_ctx *c,
                   attn_error_detail *err)
{
    int64_t page = p->kv_block > 0 ? p->kv_block : 1;
    uint64_t units = p->units_per_split > 0 ? p->units_per_split : 1;
    int64_t *pages = malloc(sizeof(int64_t) * nb);
    if (pages == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory for %u page counts", nb);
    int64_t max_pages = 1;
    for (uint32_t b = 0; b < nb; b++) {
        pages[b] = ceil_div_i64(kv_len[b], page);
        if (pages[b] > max_pages)
            max_pages = pages[b];
    }
    int64_t per_chunk = max_pages;
    int64_t min_pages = p->min_chunk > 0 ? ceil_div_i64(p->min_chunk, page) : 1;
    /* the engine's cap on a request's chunks: no chunk shorter than the
     * longest request over the cap (the search starts there) */
    const int64_t capped = p->fi_max_splits > 0 ? ceil_div_i64(max_pages, p->fi_max_splits) : 0;
    if (capped > min_pages)
        min_pages = capped;
    if ((uint64_t)nb * units < p->grid_capacity)
        per_chunk =
            attn_split_fi_search(nb, pages, (uint32_t)units, p->grid_capacity, min_pages, NULL);
    else if (p->wave_model)
        per_chunk = fi_wave_chunk(p, nb, kv_len, page, max_pages, min_pages);
    free(pages);
    if (p->max_chunk > 0) {
        int64_t cap = p->max_chunk / page > 0 ? p->max_chunk / page : 1;
        if (per_chunk > cap)
            per_chunk = cap;
    }
    c->mode = SPLIT_MODE_CHUNK;
    c->chunk = per_chunk * page;
    for (uint32_t b = 0; b < nb; b++)
        c->active[b] = (uint32_t)ceil_div_i64(kv_len[b], c->chunk);
    return 0;
}

/* GLOBAL (seed 0x09D): the total key count cut into P = grid / units equal
 * runs; each run's intersection with a request is one fragment (slot). */
static int plan_global(const attn_split_params *p, uint32_t nb, const int64_t *kv_len, split_ctx *c,
                       attn_error_detail *err)
{
    uint32_t units = p->units_per_split > 0 ? p->units_per_split : 1;
    c->mode = SPLIT_MODE_GLOBAL;
    c->workers = p->grid_capacity / units > 0 ? p->grid_capacity / units : 1;
    c->offset = malloc(sizeof(int64_t) * nb);
    if (c->offset == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory for %u offsets", nb);
    c->total = 0;
    for (uint32_t b = 0; b < nb; b++) {
        c->offset[b] = c->total;
        if (kv_len[b] > INT64_MAX - c->total)
            return attn_error_set(err, ATTN_E_TOO_LARGE, "requests",
                                  "total key count overflows at request %u", b);
        c->total += kv_len[b];
    }
    for (uint32_t b = 0; b < nb; b++) {
        if (kv_len[b] == 0) {
            c->active[b] = 0;
            continue;
        }
        uint32_t first = global_worker_of(c, c->offset[b]);
        uint32_t last = global_worker_of(c, c->offset[b] + kv_len[b] - 1);
        c->active[b] = last - first + 1;
    }
    return 0;
}

static int plan_fixed(const attn_split_params *p, uint32_t nb, const int64_t *kv_len, split_ctx *c)
{
    if (p->fixed_chunk > 0) {
        c->mode = SPLIT_MODE_CHUNK;
        c->chunk = p->fixed_chunk;
        for (uint32_t b = 0; b < nb; b++)
            c->active[b] = (uint32_t)ceil_div_i64(kv_len[b], c->chunk);
        return 0;
    }
    c->mode = SPLIT_MODE_BALANCED;
    for (uint32_t b = 0; b < nb; b++)
        /* never an empty split outside the identity slots: S_b <= L_b */
        c->active[b] = kv_len[b] < p->fixed_splits ? (uint32_t)kv_len[b] : p->fixed_splits;
    return 0;
}

/* Slots and items from the active counts (shared by every policy). */
static int materialise(const attn_split_params *p, attn_split_policy pol, split_ctx *c,
                       attn_split_plan *out, attn_error_detail *err)
{
    uint32_t nb = c->num_requests;
    uint64_t slots = 0;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t a = c->active[b];
        if (p->graph_splits > 0 && a > p->graph_splits)
            return attn_error_set(err, ATTN_E_CAPACITY, "graph_splits",
                                  "request %u needs %u splits, graph capacity is %u", b, a,
                                  p->graph_splits);
        /* seed 0x03G: a slot the reducer consumes is written, so a request
         * without keys still gets one identity slot */
        slots += p->graph_splits > 0 ? p->graph_splits : (a > 0 ? a : 1);
        if (slots > ATTN__SPLIT_ITEMS_MAX)
            return attn_error_set(err, ATTN_E_TOO_LARGE, "plan", "plan needs more than %u slots",
                                  ATTN__SPLIT_ITEMS_MAX);
    }
    if (p->slot_capacity > 0 && slots > p->slot_capacity)
        return attn_error_set(err, ATTN_E_CAPACITY, "slot_capacity",
                              "plan needs %llu slots, workspace capacity is %u",
                              (unsigned long long)slots, p->slot_capacity);

    memset(out, 0, sizeof(*out));
    out->num_requests = nb;
    out->num_splits = malloc(sizeof(uint32_t) * nb);
    out->slot_indptr = malloc(sizeof(uint32_t) * (nb + 1));
    out->items = malloc(sizeof(attn_work_item) * (size_t)slots);
    if (out->num_splits == NULL || out->slot_indptr == NULL || out->items == NULL) {
        attn_split_plan_free(out);
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory for %llu items",
                              (unsigned long long)slots);
    }
    uint32_t k = 0;
    out->slot_indptr[0] = 0;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t a = c->active[b];
        uint32_t n = p->graph_splits > 0 ? p->graph_splits : (a > 0 ? a : 1);
        int64_t begin = 0;
        for (uint32_t s = 0; s < n; s++, k++) {
            attn_work_item *it = &out->items[k];
            it->req = b;
            it->slot = k;
            if (s < a) {
                it->kv_begin = begin;
                it->kv_end = split_next_end(c, b, s, begin);
                begin = it->kv_end;
            } else {
                it->kv_begin = it->kv_end = c->kv_len[b];
            }
        }
        if (begin != c->kv_len[b]) {
            attn_split_plan_free(out);
            return attn_error_set(err, ATTN_E_INTERNAL, "plan",
                                  "request %u covered [0, %lld) of %lld keys", b, (long long)begin,
                                  (long long)c->kv_len[b]);
        }
        out->num_splits[b] = n;
        out->slot_indptr[b + 1] = k;
    }
    out->num_slots = k;
    out->num_items = k;
    out->slot_capacity = p->slot_capacity > 0 ? p->slot_capacity : k;
    out->policy = pol;
    out->chunk = c->mode == SPLIT_MODE_CHUNK ? (uint32_t)(c->chunk < UINT32_MAX ? c->chunk : 0) : 0;
    return 0;
}

int attn_split_plan_build_lengths(uint32_t num_requests, const int64_t *kv_len,
                                  const int64_t *q_len, const attn_split_params *p,
                                  attn_split_plan *out, attn_error_detail *err)
{
    int rv;
    attn_split_policy pol = ATTN_SPLIT_FIXED;
    memset(out, 0, sizeof(*out));
    if (num_requests == 0 || kv_len == NULL)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "requests", "no requests to plan");
    if ((rv = resolve_policy(p, &pol, err)) != 0)
        return rv;
    if ((rv = check_params(p, pol, err)) != 0)
        return rv;
    for (uint32_t b = 0; b < num_requests; b++) {
        char field[48];
        if (kv_len[b] < 0) {
            snprintf(field, sizeof(field), "requests[%u]", b);
            return attn_error_set(err, ATTN_E_RANGE, field, "key length %lld is negative",
                                  (long long)kv_len[b]);
        }
        if (q_len != NULL && q_len[b] < 0) {
            snprintf(field, sizeof(field), "requests[%u]", b);
            return attn_error_set(err, ATTN_E_RANGE, field, "query length %lld is negative",
                                  (long long)q_len[b]);
        }
    }

    split_ctx c;
    memset(&c, 0, sizeof(c));
    c.num_requests = num_requests;
    c.kv_len = kv_len;
    c.active = calloc(num_requests, sizeof(uint32_t));
    if (c.active == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory for %u requests", num_requests);
    /* A request's split count must fit a uint32 before materialise sums them. */
    for (uint32_t b = 0; b < num_requests && p->fixed_chunk > 0 && pol == ATTN_SPLIT_FIXED; b++)
        if (ceil_div_i64(kv_len[b], p->fixed_chunk) > ATTN__SPLIT_ITEMS_MAX) {
            free(c.active);
            return attn_error_set(err, ATTN_E_TOO_LARGE, "policy.chunk",
                                  "chunk %lld cuts request %u into more than %u splits",
                                  (long long)p->fixed_chunk, b, ATTN__SPLIT_ITEMS_MAX);
        }

    switch (pol) {
    case ATTN_SPLIT_FA:
        plan_fa(p, num_requests, kv_len, q_len, &c);
        break;
    case ATTN_SPLIT_FI:
        rv = plan_fi(p, num_requests, kv_len, &c, err);
        break;
    case ATTN_SPLIT_GLOBAL:
        rv = plan_global(p, num_requests, kv_len, &c, err);
        break;
    default:
        rv = plan_fixed(p, num_requests, kv_len, &c);
        break;
    }
    if (rv == 0)
        rv = materialise(p, pol, &c, out, err);
    free(c.active);
    free(c.offset);
    return rv;
}

int attn_split_plan_build(const attn_manifest *m, const attn_split_params *p, attn_split_plan *out,
                          attn_error_detail *err)
{
    uint32_t nb = m->num_requests;
    memset(out, 0, sizeof(*out));
    if (nb == 0 || m->requests == NULL)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "requests", "manifest has no requests");
    int64_t *lens = malloc(sizeof(int64_t) * 2 * (size_t)nb);
    if (lens == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory for %u lengths", nb);
    int64_t *kv = lens, *q = lens + nb;
    for (uint32_t b = 0; b < nb; b++) {
        char field[64];
        const attn_request_desc *r = &m->requests[b];
        if (r->cache_len < 0 || r->new_len < 0 || r->cache_len > INT64_MAX - r->new_len) {
            snprintf(field, sizeof(field), "requests[%u].%s", b,
                     r->cache_len < 0 ? "cache_len" : "new_len");
            free(lens);
            return attn_error_set(err, ATTN_E_RANGE, field, "lengths (%lld, %lld) out of range",
                                  (long long)r->cache_len, (long long)r->new_len);
        }
        /* L_b = T_b + C_b: the keys the query rows may see after the append */
        kv[b] = r->cache_len + r->new_len;
        q[b] = r->new_len;
    }
    int rv = attn_split_plan_build_lengths(nb, kv, q, p, out, err);
    free(lens);
    return rv;
}

void attn_split_owner_counts(const attn_split_plan *plan, const int64_t *q_len,
                             uint32_t num_qo_heads, attn_owner_counts *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < plan->num_items; i++) {
        const attn_work_item *it = &plan->items[i];
        out->producer += num_qo_heads;
        if (it->kv_end > it->kv_begin)
            out->active += num_qo_heads;
        else
            out->identity += num_qo_heads;
    }
    for (uint32_t b = 0; b < plan->num_requests; b++) {
        uint64_t rows = q_len != NULL ? (uint64_t)q_len[b] : 1;
        uint64_t n = plan->num_splits[b];
        out->reducer += rows * num_qo_heads;
        out->merges += rows * num_qo_heads * (n > 0 ? n - 1 : 0);
    }
}

int attn_split_plan_check(const attn_split_plan *plan, const int64_t *kv_len,
                          attn_error_detail *err)
{
    uint32_t nb = plan->num_requests;
    if (plan->slot_indptr == NULL || plan->num_splits == NULL || nb == 0)
        return attn_error_set(err, ATTN_E_SPLIT, "plan", "plan has no requests");
    if (plan->slot_indptr[0] != 0 || plan->slot_indptr[nb] != plan->num_slots)
        return attn_error_set(err, ATTN_E_SPLIT, "slot_indptr",
                              "slot_indptr spans [%u, %u), plan has %u slots", plan->slot_indptr[0],
                              plan->slot_indptr[nb], plan->num_slots);
    if (plan->num_slots > plan->slot_capacity)
        return attn_error_set(err, ATTN_E_CAPACITY, "slot_capacity", "%u slots exceed capacity %u",
                              plan->num_slots, plan->slot_capacity);
    for (uint32_t b = 0; b < nb; b++) {
        char field[48];
        snprintf(field, sizeof(field), "slot_indptr[%u]", b + 1);
        if (plan->slot_indptr[b + 1] < plan->slot_indptr[b] ||
            plan->slot_indptr[b + 1] - plan->slot_indptr[b] != plan->num_splits[b])
            return attn_error_set(err, ATTN_E_SPLIT, field,
                                  "slot range of request %u disagrees with num_splits %u", b,
                                  plan->num_splits[b]);
        if (plan->num_splits[b] == 0)
            return attn_error_set(err, ATTN_E_SPLIT, field,
                                  "request %u has no slot for its reducer to read", b);
    }
    uint32_t *by_slot = malloc(sizeof(uint32_t) * (plan->num_slots > 0 ? plan->num_slots : 1));
    if (by_slot == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "no memory to check %u slots",
                              plan->num_slots);
    memset(by_slot, 0xff, sizeof(uint32_t) * plan->num_slots);
    int rv = 0;
    for (uint32_t i = 0; i < plan->num_items && rv == 0; i++) {
        const attn_work_item *it = &plan->items[i];
        char field[48];
        snprintf(field, sizeof(field), "items[%u]", i);
        if (it->req >= nb || it->slot < plan->slot_indptr[it->req] ||
            it->slot >= plan->slot_indptr[it->req + 1])
            rv = attn_error_set(err, ATTN_E_SPLIT, field, "slot %u is not a slot of request %u",
                                it->slot, it->req);
        else if (by_slot[it->slot] != UINT32_MAX)
            rv = attn_error_set(err, ATTN_E_SPLIT, field, "slot %u already written by item %u",
                                it->slot, by_slot[it->slot]);
        else
            by_slot[it->slot] = i;
    }
    /* seed 0x02I: walk each request's slots in order; non-empty splits must
     * tile [0, L_b) without gap or overlap, identity slots own nothing */
    for (uint32_t b = 0; b < nb && rv == 0; b++) {
        int64_t cursor = 0;
        for (uint32_t s = plan->slot_indptr[b]; s < plan->slot_indptr[b + 1] && rv == 0; s++) {
            char field[48];
            snprintf(field, sizeof(field), "slots[%u]", s);
            if (by_slot[s] == UINT32_MAX) {
                rv = attn_error_set(err, ATTN_E_SPLIT, field,
                                    "slot %u of request %u is never written", s, b);
                break;
            }
            const attn_work_item *it = &plan->items[by_slot[s]];
            if (it->kv_begin == it->kv_end)
                continue;
            if (it->kv_begin != cursor || it->kv_end < it->kv_begin)
                rv = attn_error_set(err, ATTN_E_SPLIT, field,
                                    "split [%lld, %lld) of request %u does not start at %lld",
                                    (long long)it->kv_begin, (long long)it->kv_end, b,
                                    (long long)cursor);
            cursor = it->kv_end;
        }
        if (rv == 0 && cursor != kv_len[b]) {
            char field[48];
            snprintf(field, sizeof(field), "requests[%u]", b);
            rv = attn_error_set(err, ATTN_E_SPLIT, field, "splits cover [0, %lld) of %lld keys",
                                (long long)cursor, (long long)kv_len[b]);
        }
    }
    free(by_slot);
    return rv;
}

/* snprintf-style appender: counts what it could not write. */
typedef struct json_out {
    char *buf;
    size_t cap;
    size_t len;
} json_out;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
json_put(json_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room > 0 ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

size_t attn_split_plan_json(const attn_split_plan *plan, uint32_t max_items, char *buf, size_t cap)
{
    json_out o = {buf, cap, 0};
    if (buf != NULL && cap > 0)
        buf[0] = '\0';
    json_put(&o, "{\"policy\":\"%s\",\"chunk\":%u,\"num_requests\":%u,\"num_slots\":%u,",
             attn_split_policy_name(plan->policy), plan->chunk, plan->num_requests,
             plan->num_slots);
    json_put(&o, "\"slot_capacity\":%u,\"num_splits\":[", plan->slot_capacity);
    for (uint32_t b = 0; b < plan->num_requests; b++)
        json_put(&o, "%s%u", b ? "," : "", plan->num_splits[b]);
    uint32_t shown = plan->num_items < max_items ? plan->num_items : max_items;
    json_put(&o, "],\"num_items\":%u,\"items\":[", plan->num_items);
    for (uint32_t i = 0; i < shown; i++) {
        const attn_work_item *it = &plan->items[i];
        json_put(&o, "%s[%u,%u,%lld,%lld]", i ? "," : "", it->req, it->slot,
                 (long long)it->kv_begin, (long long)it->kv_end);
    }
    json_put(&o, "],\"items_omitted\":%u}", plan->num_items - shown);
    return o.len;
}
