/* Host planning of the tensor-core prefill/append kernel (prefill_plan.h). */
#include "planner/prefill_plan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/schedule.h"

int64_t attn_prefill_unit_cost(const int32_t *tiles, int32_t begin, int32_t end)
{
    int64_t c = ATTN_PREFILL_COST_UNIT;
    for (int32_t i = begin; i < end; i++)
        c += (tiles[i] & 1) ? ATTN_PREFILL_COST_PARTIAL : ATTN_PREFILL_COST_FULL;
    return c;
}

void attn_prefill_tile_shape(uint32_t head_dim, attn_prefill_variant v, uint32_t *tile_m,
                             uint32_t *tile_n)
{
    if (v == ATTN_PREFILL_LIGHT) {
        *tile_m = ATTN_PREFILL_LIGHT_TILE_M;
        *tile_n = ATTN_PREFILL_LIGHT_TILE_N;
        return;
    }
    *tile_m = ATTN_PREFILL_TILE_M;
    *tile_n = v == ATTN_PREFILL_FUSED ? ATTN_PREFILL_FUSED_TILE_N : ATTN_PREFILL_TILE_N(head_dim);
}

int attn_prefill_variant_serves(attn_prefill_variant v, uint32_t head_dim)
{
    if (v == ATTN_PREFILL_LIGHT || v == ATTN_PREFILL_FUSED)
        return head_dim == 64 || head_dim == 128;
    return v == ATTN_PREFILL_FULL && (head_dim == 64 || head_dim == 128 || head_dim == 256);
}

#define ATTN__PREFILL_VARIANT_NAME(e, v, n) [v] = n,
static const char *const k_variant_names[] = {ATTN_PREFILL_VARIANTS(ATTN__PREFILL_VARIANT_NAME)};
#undef ATTN__PREFILL_VARIANT_NAME

const char *attn_prefill_variant_name(attn_prefill_variant v)
{
    return (unsigned)v < sizeof k_variant_names / sizeof k_variant_names[0] ? k_variant_names[v]
                                                                            : "?";
}

void attn_prefill_plan_free(attn_prefill_plan *p)
{
    free(p->reqs);
    free(p->tiles);
    free(p->items);
    free(p->merges);
    free(p->worker_indptr);
    free(p->order);
    memset(p, 0, sizeof *p);
}

void attn_prefill_plan_workspace(const attn_prefill_plan *p, uint32_t num_kv_heads,
                                 uint32_t head_dim, uint64_t *vec_floats, uint64_t *row_floats)
{
    uint64_t rows = (uint64_t)p->num_parts * num_kv_heads * p->tile_m;
    *vec_floats = rows * head_dim;
    *row_floats = rows;
}

/* A growable int32 array (the tile list). */
typedef struct tile_vec {
    int32_t *v;
    uint32_t n, cap;
} tile_vec;

static int tile_push(tile_vec *t, int32_t x)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 1024;
        int32_t *nv = realloc(t->v, sizeof *nv * cap);
        if (!nv)
            return ATTN_E_NOMEM;
        t->v = nv;
        t->cap = cap;
    }
    t->v[t->n++] = x;
    return 0;
}

/* One m tile before splitting: its tile-list range. */
typedef struct mtile {
    int32_t req, row0, begin, end;
} mtile;

/* Key range [lo, hi) that holds every visible key of tokens [q0, q1) of
 * request b (the union of the rows' hulls). */
static void tokens_key_hull(const attn_mask_prog *mp, uint32_t b, int64_t q0, int64_t q1,
                            int64_t *lo, int64_t *hi)
{
    int64_t l = INT64_MAX, h = 0;
    for (int64_t i = q0; i < q1; i++) {
        attn_row_keys k = attn_mask_row_keys(mp, b, i);
        if (k.hi0 > k.lo0) {
            l = k.lo0 < l ? k.lo0 : l;
            h = k.hi0 > h ? k.hi0 : h;
        }
        if (k.hi1 > k.lo1) {
            l = k.lo1 < l ? k.lo1 : l;
            h = k.hi1 > h ? k.hi1 : h;
        }
    }
    *lo = l == INT64_MAX ? 0 : l;
    *hi = h;
}

/* Part k of s of m tile t's tile list: [*b0, *b1), contiguous, the parts
 * of one m tile tiling its list in order. */
static void part_range(const mtile *t, uint32_t s, uint32_t k, int32_t *b0, int32_t *b1)
{
    const uint64_t n = (uint64_t)(t->end - t->begin);
    *b0 = t->begin + (int32_t)(n * k / s);
    *b1 = t->begin + (int32_t)(n * (k + 1) / s);
}

/* The makespan, in quarter tiles, of the units of m tiles mt[0 .. nm) cut
 * into nsplit[i] parts each (NULL: uncut), H_kv units a part, under the
 * least-loaded rule of the queues (attn_prefill_plan_queues; the pair
 * walk's stay within ATTN_PREFILL_PAIR_SLACK_PCT of it) on at most
 * `sms` CTAs; mcost[i]: m tile i's uncut cost, already counted by the
 * caller.  -1 when it cannot be counted (too many units, no memory). */
static int64_t split_makespan(const int32_t *tiles, const mtile *mt, const int64_t *mcost,
                              uint32_t nm, const uint32_t *nsplit, uint32_t num_kv_heads,
                              uint32_t sms)
{
    uint64_t units = 0;
    for (uint32_t i = 0; i < nm; i++)
        units += (uint64_t)(nsplit ? nsplit[i] : 1) * num_kv_heads;
    if (units == 0 || units > UINT32_MAX)
        return -1;
    int64_t *cost = malloc(sizeof *cost * units);
    if (!cost)
        return -1;
    uint64_t u = 0;
    for (uint32_t i = 0; i < nm; i++) {
        const uint32_t s = nsplit ? nsplit[i] : 1;
        for (uint32_t k = 0; k < s; k++) {
            int32_t b0, b1;
            part_range(&mt[i], s, k, &b0, &b1);
            const int64_t c = s == 1 ? mcost[i] : attn_prefill_unit_cost(tiles, b0, b1);
            for (uint32_t h = 0; h < num_kv_heads; h++)
                cost[u++] = c;
        }
    }
    attn_schedule sch;
    const uint32_t workers = sms < units ? sms : (uint32_t)units;
    const int rv = attn_schedule_from_costs(cost, (uint32_t)units, ATTN_SCHEDULE_LEAST_LOADED,
                                            workers, &sch, NULL);
    free(cost);
    if (rv != 0)
        return -1;
    const int64_t span = sch.max_load;
    attn_schedule_free(&sch);
    return span;
}

/* Whether the load bound's cuts pay for their combine: the launch's
 * makespan with the cuts plus ATTN_PREFILL_COST_COMBINE below the makespan
 * without them (both as the queues would run them on `sms` CTAs).  When
 * either cannot be counted the cuts stay, as before this check. */
static bool splits_pay(const int32_t *tiles, const mtile *mt, const int64_t *mcost, uint32_t nm,
                       const uint32_t *nsplit, uint32_t num_kv_heads, uint32_t sms)
{
    const int64_t with = split_makespan(tiles, mt, mcost, nm, nsplit, num_kv_heads, sms);
    const int64_t without = split_makespan(tiles, mt, mcost, nm, NULL, num_kv_heads, sms);
    if (with < 0 || without < 0)
        return true;
    return with + ATTN_PREFILL_COST_COMBINE < without;
}

static int cmp_items_longest_first(const void *a, const void *b)
{
    const attn_prefill_item *x = a, *y = b;
    int32_t nx = x->tile_end - x->tile_begin, ny = y->tile_end - y->tile_begin;
    if (nx != ny)
        return nx > ny ? -1 : 1;
    /* stable tie-break: plan order (request, row, part) */
    if (x->req != y->req)
        return x->req < y->req ? -1 : 1;
    if (x->row0 != y->row0)
        return x->row0 < y->row0 ? -1 : 1;
    return x->tile_begin < y->tile_begin ? -1 : (x->tile_begin > y->tile_begin);
}

int attn_prefill_plan_build(const attn_prefill_plan_in *in, attn_prefill_plan *out,
                            attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    if (in->num_requests == 0)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "requests", "no requests");
    if (in->num_kv_heads == 0 || in->num_qo_heads % in->num_kv_heads)
        return attn_error_set(err, ATTN_E_HEADS, "num_qo_heads",
                              "num_qo_heads %u is not a multiple of num_kv_heads %u",
                              in->num_qo_heads, in->num_kv_heads);
    if (in->head_dim != 64 && in->head_dim != 128 && in->head_dim != 256)
        return attn_error_set(err, ATTN_E_SHAPE, "head_dim", "head_dim %u is not 64, 128 or 256",
                              in->head_dim);
    if (!attn_prefill_variant_serves(in->variant, in->head_dim))
        return attn_error_set(err, ATTN_E_SHAPE, "variant",
                              "the %s prefill kernel has no head_dim %u (light: 64 and 128)",
                              attn_prefill_variant_name(in->variant), in->head_dim);
    if (!in->mask || in->mask->num_requests != in->num_requests)
        return attn_error_set(err, ATTN_E_MISSING, "mask",
                              "the mask program must cover the %u requests", in->num_requests);
    const uint32_t B = in->num_requests, g = in->num_qo_heads / in->num_kv_heads;
    uint32_t tm, tn;
    attn_prefill_tile_shape(in->head_dim, in->variant, &tm, &tn);
    out->variant = in->variant;
    out->tile_m = tm;
    out->tile_n = tn;
    out->num_requests = B;
    out->reqs = calloc(B, sizeof *out->reqs);
    if (!out->reqs)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "out of memory");
    uint64_t num_mtiles = 0;
    for (uint32_t b = 0; b < B; b++) {
        int64_t T = in->T[b], C = in->C[b];
        if (T < 0 || C < 1 || T + C > INT32_MAX || (int64_t)C * g > INT32_MAX)
            return attn_prefill_plan_free(out),
                   attn_error_set(err, ATTN_E_RANGE, "requests", "request %u: T %lld, C %lld", b,
                                  (long long)T, (long long)C);
        if (in->qo_indptr[b + 1] - in->qo_indptr[b] != C)
            return attn_prefill_plan_free(out),
                   attn_error_set(err, ATTN_E_QO_INDPTR, "qo_indptr",
                                  "qo_indptr[%u..%u] does not span C = %lld rows", b, b + 1,
                                  (long long)C);
        out->reqs[b].T = (int32_t)T;
        out->reqs[b].C = (int32_t)C;
        out->reqs[b].qrow = in->qo_indptr[b];
        if (in->skip && in->skip[b])
            continue;
        num_mtiles += ((uint64_t)C * g + tm - 1) / tm;
    }

    mtile *mt = calloc(num_mtiles ? num_mtiles : 1, sizeof *mt);
    tile_vec tv = {0};
    int rv = 0;
    if (!mt) {
        rv = ATTN_E_NOMEM;
        goto fail;
    }
    /* classify every key tile of every m tile with the one classifier */
    uint32_t nm = 0;
    attn_prefill_ledger *lg = &out->ledger;
    for (uint32_t b = 0; b < B; b++) {
        if (in->skip && in->skip[b])
            continue;
        int64_t T = in->T[b], C = in->C[b], keys = T + C, rows = C * g;
        for (int64_t r0 = 0; r0 < rows; r0 += tm) {
            int64_t q0 = r0 / g, q1 = (r0 + tm - 1) / g + 1;
            if (q1 > C)
                q1 = C;
            int64_t lo, hi;
            tokens_key_hull(in->mask, b, q0, q1, &lo, &hi);
            int64_t n_lo = lo / tn, n_hi = (hi + tn - 1) / tn, n_all = (keys + tn - 1) / tn;
            mt[nm].req = (int32_t)b;
            mt[nm].row0 = (int32_t)r0;
            mt[nm].begin = (int32_t)tv.n;
            lg->skip_tiles += (uint64_t)(n_all - (n_hi - n_lo)) * in->num_kv_heads;
            for (int64_t n = n_lo; n < n_hi; n++) {
                int64_t k0 = n * tn, k1 = k0 + tn < keys ? k0 + tn : keys;
                attn_tile_class c = attn_mask_classify_tile(in->mask, b, q0, q1, k0, k1);
                if (c == ATTN_TILE_SKIP) {
                    lg->skip_tiles += in->num_kv_heads;
                    continue;
                }
                int partial = c == ATTN_TILE_PARTIAL || k1 - k0 < tn;
                if ((rv = tile_push(&tv, (int32_t)((n << 1) | partial))))
                    goto fail;
                if (partial)
                    lg->partial_tiles += in->num_kv_heads;
                else
                    lg->full_tiles += in->num_kv_heads;
            }
            mt[nm].end = (int32_t)tv.n;
            nm++;
        }
        lg->logical_cells += attn_mask_visible_cells(in->mask, b) * in->num_qo_heads;
    }
    lg->executed_cells = (lg->full_tiles + lg->partial_tiles) * tm * tn;

    /* splits (the load bound): the mean load of one CTA of the persistent
     * grid is total / num_sms; an m tile whose unit costs more is cut into
     * ceil(cost / mean) contiguous parts of at least 4 tiles each, so that
     * no unit exceeds the mean by more than a part's rounding and the grid
     * fills when the plan has fewer units than SMs; automatic cuts are
     * dropped again where they do not pay for their combine (splits_pay) */
    int64_t *mcost = calloc(nm ? nm : 1, sizeof *mcost);
    if (!mcost) {
        rv = ATTN_E_NOMEM;
        goto fail;
    }
    int64_t total = 0;
    for (uint32_t i = 0; i < nm; i++) {
        mcost[i] = attn_prefill_unit_cost(tv.v, mt[i].begin, mt[i].end);
        total += mcost[i] * in->num_kv_heads;
    }
    const int64_t mean = in->num_sms ? (total + in->num_sms - 1) / in->num_sms : 0;
    uint32_t *nsplit = calloc(nm ? nm : 1, sizeof *nsplit);
    if (!nsplit) {
        free(mcost);
        rv = ATTN_E_NOMEM;
        goto fail;
    }
    uint64_t num_items = 0;
    bool cut = false;
    for (uint32_t i = 0; i < nm; i++) {
        uint32_t n = (uint32_t)(mt[i].end - mt[i].begin), s = 1;
        if (in->fixed_splits)
            s = in->fixed_splits < n ? in->fixed_splits : n;
        else if (mean > 0 && mcost[i] > mean) {
            int64_t want = (mcost[i] + mean - 1) / mean;
            s = (int64_t)(n / 4) < want ? n / 4 : (uint32_t)want;
        }
        nsplit[i] = s > 1 ? s : 1;
        cut |= nsplit[i] > 1;
        num_items += nsplit[i];
    }
    if (cut && !in->fixed_splits &&
        !splits_pay(tv.v, mt, mcost, nm, nsplit, in->num_kv_heads, in->num_sms)) {
        for (uint32_t i = 0; i < nm; i++)
            nsplit[i] = 1;
        num_items = nm;
    }
    free(mcost);
    out->items = calloc(num_items ? num_items : 1, sizeof *out->items);
    out->merges = calloc(nm ? nm : 1, sizeof *out->merges);
    if (!out->items || !out->merges) {
        free(nsplit);
        rv = ATTN_E_NOMEM;
        goto fail;
    }
    uint32_t ni = 0, parts = 0;
    for (uint32_t i = 0; i < nm; i++) {
        const uint32_t s = nsplit[i];
        if (s <= 1) {
            out->items[ni++] =
                (attn_prefill_item){mt[i].req, mt[i].row0, mt[i].begin, mt[i].end, -1};
            continue;
        }
        out->merges[out->num_merges++] =
            (attn_prefill_merge){mt[i].req, mt[i].row0, (int32_t)parts, (int32_t)s};
        for (uint32_t k = 0; k < s; k++) {
            int32_t b0, b1;
            part_range(&mt[i], s, k, &b0, &b1);
            out->items[ni++] =
                (attn_prefill_item){mt[i].req, mt[i].row0, b0, b1, (int32_t)(parts + k)};
        }
        parts += s;
    }
    free(nsplit);
    out->num_items = ni;
    out->num_parts = parts;
    qsort(out->items, ni, sizeof *out->items, cmp_items_longest_first);
    out->tiles = tv.v;
    out->num_tiles = tv.n;
    free(mt);
    return 0;
fail:
    free(mt);
    free(tv.v);
    attn_prefill_plan_free(out);
    return attn_error_set(err, rv, "plan", "out of memory");
}

/* The least-loaded queues of the units (item, K/V head) on at most
 * max_ctas CTAs (attn_prefill_plan_queues), into *indptr / *order / *qs. */
static int plain_queues(const attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                        uint32_t **indptr, uint32_t **order, attn_prefill_queue_stats *qs,
                        attn_error_detail *err)
{
    const uint64_t units = (uint64_t)p->num_items * num_kv_heads;
    memset(qs, 0, sizeof *qs);
    *indptr = NULL;
    *order = NULL;
    if (units == 0)
        return 0;
    const uint32_t workers = max_ctas && max_ctas < units ? max_ctas : (uint32_t)units;
    int64_t *cost = malloc(sizeof *cost * units);
    if (!cost)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "out of memory for the queues");
    for (uint64_t u = 0; u < units; u++) {
        const attn_prefill_item *it = &p->items[u / num_kv_heads];
        cost[u] = attn_prefill_unit_cost(p->tiles, it->tile_begin, it->tile_end);
        qs->max_unit = cost[u] > qs->max_unit ? cost[u] : qs->max_unit;
    }
    attn_schedule s;
    int rv = attn_schedule_from_costs(cost, (uint32_t)units, ATTN_SCHEDULE_LEAST_LOADED, workers,
                                      &s, err);
    free(cost);
    if (rv != 0)
        return rv;
    *indptr = s.worker_indptr;
    *order = s.order;
    qs->workers = workers;
    qs->max_load = s.max_load;
    qs->mean_load = s.mean_load;
    qs->rho = s.max_over_mean;
    qs->eta = s.efficiency;
    free(s.load);
    return 0;
}

/* Items a and b are siblings: the same request, and the key tiles of one
 * are those of the other in the same order, but for a last tile (m tiles of
 * one request whose rows see the same keys, or the same part of two such m
 * tiles; an append's second m tile may see one key tile more), so their
 * units of one K/V head read the same K/V bytes. */
static bool items_are_siblings(const attn_prefill_plan *p, const attn_prefill_item *a,
                               const attn_prefill_item *b)
{
    const int32_t na = a->tile_end - a->tile_begin, nb = b->tile_end - b->tile_begin;
    if (a->req != b->req || na - nb > 1 || nb - na > 1)
        return false;
    for (int32_t i = 0; i < na && i < nb; i++)
        if ((p->tiles[a->tile_begin + i] >> 1) != (p->tiles[b->tile_begin + i] >> 1))
            return false;
    return true;
}

/* An item's place in the plan's making order: by request, then first row,
 * then first tile, where an m tile's siblings follow it. */
typedef struct made_key {
    int32_t req, row0, tile_begin;
    uint32_t item;
} made_key;

static int cmp_made_order(const void *x, const void *y)
{
    const made_key *a = x, *b = y;
    if (a->req != b->req)
        return a->req < b->req ? -1 : 1;
    if (a->row0 != b->row0)
        return a->row0 < b->row0 ? -1 : 1;
    return a->tile_begin < b->tile_begin ? -1 : (a->tile_begin > b->tile_begin);
}

/* How many items after an item, in making order, its sibling is looked
 * for: the parts of its own m tile and of the next (a bound keeps a long
 * request linear). */
#define PAIR_SEARCH 64u

/* The pair walk's queues (attn_prefill_plan_pair_queues): jobs of two
 * units, sibling pairs first found in making order and the other units two
 * by two in item order (longest first), scheduled least-loaded on max_ctas
 * / 2 CTA pairs; CTA 2j runs the first unit of each of pair j's jobs, CTA
 * 2j + 1 the second, at the same queue position (the last job's second unit
 * may be missing when the singles are odd: that job goes last in its pair's
 * queues, so CTA 2j + 1's queue is one shorter, or empty).  A sibling job's
 * two entries carry ATTN_PREFILL_ORDER_SHARED.  *beside: the units placed
 * beside their sibling.  0 with *indptr NULL where no sibling pair exists
 * or fewer than two CTAs run. */
static int pair_queues(const attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                       bool lockstep, uint32_t **indptr, uint32_t **order,
                       attn_prefill_queue_stats *qs, uint32_t *beside, attn_error_detail *err)
{
    const uint32_t items = p->num_items, heads = num_kv_heads;
    const uint64_t units = (uint64_t)items * heads; /* <= ORDER_UNIT: check_units */
    const uint32_t none = UINT32_MAX;               /* no mate, no second unit */
    memset(qs, 0, sizeof *qs);
    *indptr = NULL;
    *order = NULL;
    *beside = 0;
    uint32_t *mate = malloc(sizeof *mate * (items ? items : 1));
    int64_t *item_cost = malloc(sizeof *item_cost * (items ? items : 1));
    uint32_t *job_unit = malloc(sizeof *job_unit * 2 * (units ? units : 1)); /* [job][2] */
    int64_t *job_cost = malloc(sizeof *job_cost * (units ? units : 1));
    uint32_t *single = malloc(sizeof *single * (units ? units : 1));
    made_key *made = malloc(sizeof *made * (items ? items : 1));
    int rv = 0;
    attn_schedule sch;
    memset(&sch, 0, sizeof sch);
    if (!mate || !item_cost || !job_unit || !job_cost || !single || !made) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "plan", "out of memory for the queues");
        goto done;
    }
    for (uint32_t i = 0; i < items; i++) {
        item_cost[i] =
            attn_prefill_unit_cost(p->tiles, p->items[i].tile_begin, p->items[i].tile_end);
        mate[i] = none;
        made[i] = (made_key){p->items[i].req, p->items[i].row0, p->items[i].tile_begin, i};
    }
    /* siblings: in making order each m tile's items meet the next m
     * tile's; the first unpaired sibling there is the mate */
    qsort(made, items, sizeof *made, cmp_made_order);
    uint32_t sibling_pairs = 0;
    for (uint32_t x = 0; x < items; x++) {
        const uint32_t i = made[x].item;
        if (mate[i] != none)
            continue;
        for (uint32_t y = x + 1; y < items && y <= x + PAIR_SEARCH; y++) {
            const uint32_t j = made[y].item;
            if (p->items[j].req != p->items[i].req ||
                p->items[j].row0 > p->items[i].row0 + (int32_t)p->tile_m)
                break;
            if (mate[j] == none && p->items[j].row0 != p->items[i].row0 &&
                items_are_siblings(p, &p->items[i], &p->items[j])) {
                mate[i] = j;
                mate[j] = i;
                sibling_pairs++;
                break;
            }
        }
    }
    const uint32_t ctas = max_ctas && max_ctas < units ? max_ctas : (uint32_t)units;
    if (sibling_pairs == 0 || ctas < 2)
        goto done;
    /* jobs: each sibling pair once per K/V head (jobs [0, sibling_jobs)),
     * then the other units two by two in item order: the items are longest
     * first, so the two units of a job have about the same number of tiles */
    const uint32_t sibling_jobs = sibling_pairs * heads;
    uint32_t jobs = 0, singles = 0;
    for (uint32_t i = 0; i < items; i++) {
        if (mate[i] == none) {
            for (uint32_t h = 0; h < heads; h++)
                single[singles++] = i * heads + h;
        } else if (mate[i] > i) {
            const uint32_t j = mate[i];
            for (uint32_t h = 0; h < heads; h++, jobs++) {
                job_unit[2 * jobs] = i * heads + h;
                job_unit[2 * jobs + 1] = j * heads + h;
                job_cost[jobs] = item_cost[i] > item_cost[j] ? item_cost[i] : item_cost[j];
            }
        }
    }
    for (uint32_t k = 0; k < singles; k += 2, jobs++) {
        const uint32_t a = single[k], b = k + 1 < singles ? single[k + 1] : none;
        const int64_t ca = item_cost[a / heads], cb = b != none ? item_cost[b / heads] : 0;
        job_unit[2 * jobs] = a;
        job_unit[2 * jobs + 1] = b;
        job_cost[jobs] = ca > cb ? ca : cb;
    }
    /* jobs >= units / 2 >= ctas / 2: every CTA pair gets a job */
    const uint32_t cta_pairs = ctas / 2;
    if ((rv = attn_schedule_from_costs(job_cost, jobs, ATTN_SCHEDULE_LEAST_LOADED, cta_pairs, &sch,
                                       err)) != 0)
        goto done;
    const uint32_t workers = 2 * cta_pairs;
    uint32_t *q_indptr = calloc((size_t)workers + 1, sizeof *q_indptr);
    uint32_t *q_order = malloc(sizeof *q_order * units);
    int64_t *load = calloc(workers, sizeof *load), work = 0;
    if (!q_indptr || !q_order || !load) {
        free(q_indptr);
        free(q_order);
        free(load);
        rv = attn_error_set(err, ATTN_E_NOMEM, "plan", "out of memory for the queues");
        goto done;
    }
    for (uint32_t c = 0; c < cta_pairs; c++)
        for (uint32_t k = sch.worker_indptr[c]; k < sch.worker_indptr[c + 1]; k++)
            for (uint32_t m = 0; m < 2; m++)
                if (job_unit[2 * sch.order[k] + m] != none)
                    q_indptr[2 * c + m + 1]++;
    for (uint32_t w = 0; w < workers; w++)
        q_indptr[w + 1] += q_indptr[w];
    /* each pair's jobs in schedule order, a job without a second unit
     * last (so the pair's two queues stay aligned by position) */
    for (uint32_t c = 0; c < cta_pairs; c++)
        for (uint32_t m = 0; m < 2; m++) {
            const uint32_t w = 2 * c + m;
            uint32_t at = q_indptr[w];
            for (uint32_t pass = 0; pass < 2; pass++)
                for (uint32_t k = sch.worker_indptr[c]; k < sch.worker_indptr[c + 1]; k++) {
                    const uint32_t job = sch.order[k];
                    const uint32_t u = job_unit[2 * job + m];
                    if ((job_unit[2 * job + 1] == none) != (pass == 1) || u == none)
                        continue;
                    q_order[at++] = u | (job < sibling_jobs ? ATTN_PREFILL_ORDER_SHARED : 0u);
                    /* lockstep (the cluster walk): both CTAs pay the job's longer unit */
                    load[w] += lockstep ? job_cost[job] : item_cost[u / heads];
                    work += item_cost[u / heads];
                }
        }
    for (uint32_t w = 0; w < workers; w++)
        qs->max_load = load[w] > qs->max_load ? load[w] : qs->max_load;
    for (uint32_t i = 0; i < items; i++)
        qs->max_unit = item_cost[i] > qs->max_unit ? item_cost[i] : qs->max_unit;
    free(load);
    /* the mean and eta count the units' own work (a lockstep CTA's pad
     * stages are idle time, not load) */
    qs->workers = workers;
    qs->mean_load = (double)work / workers;
    qs->rho = qs->mean_load > 0 ? qs->max_load / qs->mean_load : 1.0;
    qs->eta = qs->max_load > 0 ? (double)work / ((double)workers * qs->max_load) : 1.0;
    *indptr = q_indptr;
    *order = q_order;
    *beside = 2 * sibling_pairs * heads;
done:
    attn_schedule_free(&sch);
    free(mate);
    free(item_cost);
    free(job_unit);
    free(job_cost);
    free(single);
    free(made);
    return rv;
}

/* Store built queues into the plan (replacing older ones). */
static void set_queues(attn_prefill_plan *p, uint32_t *indptr, uint32_t *order,
                       const attn_prefill_queue_stats *qs, attn_prefill_queue_stats *st)
{
    free(p->worker_indptr);
    free(p->order);
    p->worker_indptr = indptr;
    p->order = order;
    p->num_workers = qs->workers;
    if (st)
        *st = *qs;
}

static int check_units(const attn_prefill_plan *p, uint32_t num_kv_heads, attn_error_detail *err)
{
    const uint64_t units = (uint64_t)p->num_items * num_kv_heads;
    if (units > ATTN_PREFILL_ORDER_UNIT) /* a queue entry's unit bits */
        return attn_error_set(err, ATTN_E_RANGE, "plan", "%llu units exceed the queue index",
                              (unsigned long long)units);
    return 0;
}

int attn_prefill_plan_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                             attn_prefill_queue_stats *st, attn_error_detail *err)
{
    uint32_t *indptr, *order;
    attn_prefill_queue_stats qs;
    int rv = check_units(p, num_kv_heads, err);
    if (rv == 0)
        rv = plain_queues(p, num_kv_heads, max_ctas, &indptr, &order, &qs, err);
    if (rv == 0)
        set_queues(p, indptr, order, &qs, st);
    return rv;
}

/* The pair walk's queues where they keep the makespan (lockstep: the
 * cluster walk's accounting), else the plain ones. */
static int paired_or_plain(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                           bool lockstep, attn_prefill_queue_stats *st, attn_error_detail *err)
{
    uint32_t *plain_indptr, *plain_order, *pair_indptr, *pair_order, beside;
    attn_prefill_queue_stats plain, paired;
    int rv = check_units(p, num_kv_heads, err);
    if (rv == 0)
        rv = plain_queues(p, num_kv_heads, max_ctas, &plain_indptr, &plain_order, &plain, err);
    if (rv != 0)
        return rv;
    if ((rv = pair_queues(p, num_kv_heads, max_ctas, lockstep, &pair_indptr, &pair_order, &paired,
                          &beside, err)) != 0) {
        free(plain_indptr);
        free(plain_order);
        return rv;
    }
    /* the pairs only where they lengthen the makespan by at most the slack */
    if (pair_indptr &&
        paired.max_load * 100 <= plain.max_load * (100 + ATTN_PREFILL_PAIR_SLACK_PCT)) {
        free(plain_indptr);
        free(plain_order);
        paired.pairs = beside;
        set_queues(p, pair_indptr, pair_order, &paired, st);
        return 0;
    }
    free(pair_indptr);
    free(pair_order);
    set_queues(p, plain_indptr, plain_order, &plain, st);
    return 0;
}

int attn_prefill_plan_pair_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                                  attn_prefill_queue_stats *st, attn_error_detail *err)
{
    return paired_or_plain(p, num_kv_heads, max_ctas, false, st, err);
}

int attn_prefill_plan_cluster_queues(attn_prefill_plan *p, uint32_t num_kv_heads, uint32_t max_ctas,
                                     attn_prefill_queue_stats *st, attn_error_detail *err)
{
    return paired_or_plain(p, num_kv_heads, max_ctas, true, st, err);
}

/* The bounds, for a step of B <= max_requests requests (each C >= 1),
 * Q <= max_q_rows rows, T + C <= K keys per request, group g, tile
 * tm x tn, S CTAs, H_kv heads:
 * - m tiles: sum_b ceil(C_b g / tm) <= (Q g + B (tm - 1)) / tm;
 * - tiles: an m tile lists at most ceil(K / tn) key tiles;
 * - fixed splits n: at most n parts per m tile, every m tile a merge;
 * - load bound (S > 0): an m tile is cut only when its cost exceeds the
 *   mean, ceil(total / S) >= total / S, where total sums H_kv x cost over
 *   m tiles, so fewer than S / H_kv m tiles are cut (merges), and the
 *   parts, ceil(cost / mean) each, number fewer than S / H_kv + merges
 *   < 2 S / H_kv;
 * - items: the m tiles not cut plus the parts. */
int attn_prefill_envelope_size(const attn_prefill_envelope_in *in, attn_prefill_envelope *out,
                               attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    if (in->max_requests == 0 || in->max_q_rows < in->max_requests || in->max_keys < 1 ||
        in->num_kv_heads == 0 || in->num_qo_heads % in->num_kv_heads)
        return attn_error_set(err, ATTN_E_RANGE, "envelope",
                              "envelope of %u requests, %u q rows, %lld keys, H_q %u / H_kv %u",
                              in->max_requests, in->max_q_rows, (long long)in->max_keys,
                              in->num_qo_heads, in->num_kv_heads);
    uint32_t tm, tn;
    attn_prefill_tile_shape(in->head_dim, in->variant, &tm, &tn);
    const uint64_t g = in->num_qo_heads / in->num_kv_heads, H = in->num_kv_heads;
    const uint64_t mt = ((uint64_t)in->max_q_rows * g + (uint64_t)in->max_requests * (tm - 1)) / tm;
    const uint64_t tiles = mt * (((uint64_t)in->max_keys + tn - 1) / tn);
    uint64_t merges = 0, parts = 0;
    if (in->fixed_splits > 1) {
        merges = mt;
        parts = mt * in->fixed_splits;
    } else if (in->fixed_splits == 0 && in->num_sms > 0) {
        const uint64_t cut = (in->num_sms + H - 1) / H;
        merges = cut < mt ? cut : mt;
        parts = (2 * (uint64_t)in->num_sms + H - 1) / H;
    }
    const uint64_t items = mt + parts;
    const struct {
        const char *field;
        uint64_t v;
    } k[] = {{"envelope.max_m_tiles", mt},
             {"envelope.max_tiles", tiles},
             {"envelope.max_merges", merges},
             {"envelope.max_parts", parts},
             {"envelope.max_items", items * H}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].v > INT32_MAX)
            return attn_error_set(err, ATTN_E_CAPACITY, k[i].field,
                                  "%llu exceeds the kernel's 32-bit indices",
                                  (unsigned long long)k[i].v);
    out->max_requests = in->max_requests;
    out->max_q_rows = in->max_q_rows;
    out->max_keys = in->max_keys;
    out->max_m_tiles = (uint32_t)mt;
    out->max_tiles = (uint32_t)tiles;
    out->max_merges = (uint32_t)merges;
    out->max_parts = (uint32_t)parts;
    out->max_items = (uint32_t)items;
    out->workers = in->workers;
    return 0;
}

int attn_prefill_envelope_check(const attn_prefill_envelope *e, const attn_prefill_plan *p,
                                attn_error_detail *err)
{
    const struct {
        const char *field;
        uint64_t v, cap;
    } k[] = {{"envelope.max_requests", p->num_requests, e->max_requests},
             {"envelope.max_tiles", p->num_tiles, e->max_tiles},
             {"envelope.max_items", p->num_items, e->max_items},
             {"envelope.max_merges", p->num_merges, e->max_merges},
             {"envelope.max_parts", p->num_parts, e->max_parts},
             {"envelope.workers", p->num_workers, e->workers}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].v > k[i].cap)
            return attn_error_set(err, ATTN_E_CAPACITY, k[i].field,
                                  "the step needs %llu, the envelope holds %llu",
                                  (unsigned long long)k[i].v, (unsigned long long)k[i].cap);
    return 0;
}
