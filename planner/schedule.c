/* Work schedules (seed 0x09B, 0x09D, 0x09E, 0x09G): deterministic per-worker
 * queues over the items of a split plan, with their logical loads. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "planner/schedule.h"

const char *attn_schedule_kind_label(attn_schedule_kind k)
{
    switch (k) {
    case ATTN_SCHEDULE_STATIC:
        return "static";
    case ATTN_SCHEDULE_LEAST_LOADED:
        return "least_loaded";
    case ATTN_SCHEDULE_CONTIGUOUS:
        return "contiguous";
    }
    return "unknown";
}

void attn_schedule_free(attn_schedule *s)
{
    if (s == NULL)
        return;
    free(s->worker_indptr);
    free(s->order);
    free(s->load);
    memset(s, 0, sizeof(*s));
}

typedef struct sched_key {
    int64_t cost;
    uint32_t item;
} sched_key;

/* Largest cost first, then lowest item index: a total order, so the sort
 * result does not depend on qsort's stability. */
static int sched_key_cmp(const void *a, const void *b)
{
    const sched_key *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->item < y->item ? -1 : (x->item > y->item ? 1 : 0);
}

/* Min-heap of workers by (load, worker id): the least-loaded worker, ties
 * to the lowest id, in O(log W). */
static bool heap_less(const int64_t *load, uint32_t a, uint32_t b)
{
    if (load[a] != load[b])
        return load[a] < load[b];
    return a < b;
}

static void heap_sift_down(uint32_t *heap, uint32_t n, const int64_t *load, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_less(load, heap[l], heap[m]))
            m = l;
        if (r < n && heap_less(load, heap[r], heap[m]))
            m = r;
        if (m == i)
            return;
        uint32_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static int assign_least_loaded(const int64_t *cost, uint32_t n, uint32_t workers,
                               uint32_t *worker_of, int64_t *load)
{
    sched_key *keys = malloc(sizeof(sched_key) * (n > 0 ? n : 1));
    uint32_t *heap = malloc(sizeof(uint32_t) * workers);
    if (keys == NULL || heap == NULL) {
        free(keys);
        free(heap);
        return ATTN_E_NOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        keys[i].cost = cost[i];
        keys[i].item = i;
    }
    qsort(keys, n, sizeof(sched_key), sched_key_cmp);
    /* all loads are zero: the identity permutation is already a heap */
    for (uint32_t w = 0; w < workers; w++)
        heap[w] = w;
    for (uint32_t k = 0; k < n; k++) {
        /* seed 0x09E: the next-largest chunk goes to the least-loaded worker */
        uint32_t w = heap[0];
        worker_of[keys[k].item] = w;
        load[w] += keys[k].cost;
        heap_sift_down(heap, workers, load, 0);
    }
    free(heap);
    free(keys);
    return 0;
}

/* The run of balanced equal-work runs (seed 0x09D) holding position pos. */
static uint32_t contiguous_worker_of(int64_t total, uint32_t workers, int64_t pos)
{
    int64_t q = total / workers, r = total % workers;
    if (pos >= total)
        pos = total > 0 ? total - 1 : 0;
    if (pos < r * (q + 1))
        return (uint32_t)(pos / (q + 1));
    return q > 0 ? (uint32_t)(r + (pos - r * (q + 1)) / q) : 0;
}

int attn_schedule_from_costs(const int64_t *icost, uint32_t n, attn_schedule_kind kind,
                             uint32_t workers, attn_schedule *out, attn_error_detail *err)
{
    memset(out, 0, sizeof(*out));
    if (workers == 0)
        return attn_error_set(err, ATTN_E_RANGE, "workers", "a schedule needs workers > 0");
    if (kind != ATTN_SCHEDULE_STATIC && kind != ATTN_SCHEDULE_LEAST_LOADED &&
        kind != ATTN_SCHEDULE_CONTIGUOUS)
        return attn_error_set(err, ATTN_E_POLICY, "schedule", "unknown schedule kind %d",
                              (int)kind);
    int64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (icost[i] < 0)
            return attn_error_set(err, ATTN_E_RANGE, "cost", "item %u costs %lld (negative)", i,
                                  (long long)icost[i]);
        total += icost[i];
    }
    out->num_workers = workers;
    out->num_items = n;
    out->worker_indptr = calloc((size_t)workers + 1, sizeof(uint32_t));
    out->order = malloc(sizeof(uint32_t) * (n > 0 ? n : 1));
    out->load = calloc(workers, sizeof(int64_t));
    uint32_t *worker_of = malloc(sizeof(uint32_t) * (n > 0 ? n : 1));
    int rv = 0;
    if (out->worker_indptr == NULL || out->order == NULL || out->load == NULL ||
        worker_of == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "schedule", "no memory for %u items", n);
        goto done;
    }

    switch (kind) {
    case ATTN_SCHEDULE_STATIC:
        /* seed 0x09B: the fixed grid, one item per worker and wave */
        for (uint32_t i = 0; i < n; i++) {
            worker_of[i] = i % workers;
            out->load[i % workers] += icost[i];
        }
        break;
    case ATTN_SCHEDULE_LEAST_LOADED:
        if (assign_least_loaded(icost, n, workers, worker_of, out->load) != 0) {
            rv = attn_error_set(err, ATTN_E_NOMEM, "schedule", "no memory to sort %u items", n);
            goto done;
        }
        break;
    case ATTN_SCHEDULE_CONTIGUOUS: {
        int64_t pos = 0;
        for (uint32_t i = 0; i < n; i++) {
            worker_of[i] = contiguous_worker_of(total, workers, pos);
            out->load[worker_of[i]] += icost[i];
            pos += icost[i];
        }
        break;
    }
    }

    /* Queues: items of worker w in their assignment order.  STATIC and
     * CONTIGUOUS assign in item order; LEAST_LOADED in sorted order, which a
     * second pass over the same sort reproduces. */
    for (uint32_t i = 0; i < n; i++)
        out->worker_indptr[worker_of[i] + 1]++;
    for (uint32_t w = 0; w < workers; w++)
        out->worker_indptr[w + 1] += out->worker_indptr[w];
    {
        uint32_t *fill = malloc(sizeof(uint32_t) * workers);
        sched_key *keys = malloc(sizeof(sched_key) * (n > 0 ? n : 1));
        if (fill == NULL || keys == NULL) {
            free(fill);
            free(keys);
            rv = attn_error_set(err, ATTN_E_NOMEM, "schedule", "no memory for queues");
            goto done;
        }
        memcpy(fill, out->worker_indptr, sizeof(uint32_t) * workers);
        for (uint32_t i = 0; i < n; i++) {
            keys[i].cost = kind == ATTN_SCHEDULE_LEAST_LOADED ? icost[i] : 0;
            keys[i].item = i;
        }
        if (kind == ATTN_SCHEDULE_LEAST_LOADED)
            qsort(keys, n, sizeof(sched_key), sched_key_cmp);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = keys[k].item;
            out->order[fill[worker_of[i]]++] = i;
        }
        free(fill);
        free(keys);
    }

    for (uint32_t w = 0; w < workers; w++)
        if (out->load[w] > out->max_load)
            out->max_load = out->load[w];
    out->mean_load = (double)total / (double)workers;
    if (out->max_load > 0) {
        /* seed 0x09G: rho = max / mean, eta = W / (P max) */
        out->max_over_mean = (double)out->max_load / out->mean_load;
        out->efficiency = (double)total / ((double)workers * (double)out->max_load);
    }
done:
    free(worker_of);
    if (rv != 0)
        attn_schedule_free(out);
    return rv;
}

int attn_schedule_build(const attn_split_plan *plan, attn_schedule_kind kind, uint32_t workers,
                        const attn_cost_model *cost, const int64_t *q_len, attn_schedule *out,
                        attn_error_detail *err)
{
    attn_cost_model cm = {0, 1};
    memset(out, 0, sizeof(*out));
    if (cost != NULL)
        cm = *cost;
    if (cm.alpha < 0 || cm.beta < 0)
        return attn_error_set(err, ATTN_E_RANGE, "cost", "cost weights (%lld, %lld) negative",
                              (long long)cm.alpha, (long long)cm.beta);
    uint32_t n = plan->num_items;
    int64_t *icost = malloc(sizeof(int64_t) * (n > 0 ? n : 1));
    if (icost == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "schedule", "no memory for %u items", n);
    for (uint32_t i = 0; i < n; i++) {
        const attn_work_item *it = &plan->items[i];
        int64_t keys = it->kv_end - it->kv_begin;
        int64_t rows = q_len != NULL ? q_len[it->req] : 1;
        /* an identity item only writes the empty state: no attention work */
        icost[i] = keys > 0 ? cm.alpha * rows + cm.beta * keys : 0;
    }
    int rv = attn_schedule_from_costs(icost, n, kind, workers, out, err);
    free(icost);
    return rv;
}
