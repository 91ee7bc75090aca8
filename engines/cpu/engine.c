/* The CPU reference engine: validation, the append transaction, the work
 * order of a schedule, threads (seed 0x08C, 0x03I, 0x08G).  The kernels
 * themselves are in kernels/cpu/attend_impl.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "engines/cpu/cpu_int.h"
#include "planner/split.h"
#include "protocol/manifest.h"

uint32_t attn_cpu_online_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1u;
}

int attn_cpu_plan(const attn_manifest *m, const attn_pool_geometry *g, uint32_t num_threads,
                  attn_split_plan *out, attn_error_detail *err)
{
    attn_split_params p;
    memset(&p, 0, sizeof p);
    attn_split_params_from_manifest(m, g->num_kv_heads, &p);
    /* One CPU worker per thread; a (request, K/V head) unit is the producer
     * grain, so few splits are needed once B x H_kv covers the threads. */
    p.default_policy = ATTN_SPLIT_FA;
    p.grid_capacity = num_threads ? num_threads : attn_cpu_online_threads();
    p.units_per_split = g->layout == ATTN_NHD ? 1 : g->num_kv_heads; /* see heads_per_unit */
    return attn_split_plan_build(m, &p, out, err);
}

/* One phase of one segment, handed to every worker. */
typedef struct cpu_job {
    cpu_run *r;
    bool f64;
    size_t scratch_bytes;
    int phase;             /* 0 producers, 1 merges */
    const uint32_t *items; /* phase 0: the segment's items */
    const int64_t *rows;   /* phase 1: the segment's packed query rows */
    uint64_t num_units;    /* items x K/V head units, or rows x H_q */
    atomic_uint_fast64_t next;
    atomic_int failed;
} cpu_job;

/* Units are claimed in chunks so workers rarely touch the shared counter. */
static void cpu_worker(void *arg, uint32_t worker)
{
    cpu_job *j = arg;
    cpu_run *r = j->r;
    (void)worker;
    if (j->num_units == 0)
        return;
    void *scratch = malloc(j->scratch_bytes);
    if (scratch == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    uint64_t chunk = j->phase == 0 ? 1 : 16;
    uint32_t units = r->num_kv_heads / r->heads_per_unit;
    for (;;) {
        uint64_t u0 = atomic_fetch_add(&j->next, chunk);
        if (u0 >= j->num_units || atomic_load(&j->failed))
            break;
        uint64_t u1 = u0 + chunk < j->num_units ? u0 + chunk : j->num_units;
        for (uint64_t u = u0; u < u1; u++) {
            if (j->phase == 0) {
                uint32_t item = j->items[u / units], hk = (uint32_t)(u % units) * r->heads_per_unit;
                if (j->f64)
                    cpu_produce_f64(r, scratch, item, hk);
                else
                    cpu_produce_f32(r, scratch, item, hk);
            } else {
                int64_t row = j->rows[u / r->num_qo_heads];
                uint32_t h = (uint32_t)(u % r->num_qo_heads);
                if (j->f64)
                    cpu_merge_f64(r, scratch, row, h);
                else
                    cpu_merge_f32(r, scratch, row, h);
            }
        }
    }
    free(scratch);
}

int cpu_execute(cpu_run *r, bool f64, cpu_threads *t, const cpu_order *ord)
{
    cpu_job job;
    memset(&job, 0, sizeof job);
    job.r = r;
    job.f64 = f64;
    job.scratch_bytes = cpu_scratch_bytes(r, f64 ? sizeof(double) : sizeof(float));
    if (job.scratch_bytes < r->d_vo * sizeof(double))
        job.scratch_bytes = r->d_vo * sizeof(double); /* the merge's O row */
    atomic_init(&job.failed, 0);
    uint32_t units = r->num_kv_heads / r->heads_per_unit;
    /* each segment: its producers, then its merges (seed 0x03I's two launches) */
    for (uint32_t s = 0; s < ord->num_segments; s++) {
        job.phase = 0;
        job.items = ord->items + ord->item_indptr[s];
        job.num_units = (uint64_t)(ord->item_indptr[s + 1] - ord->item_indptr[s]) * units;
        atomic_store(&job.next, 0);
        cpu_threads_run(t, cpu_worker, &job);
        if (atomic_load(&job.failed))
            return ATTN_E_NOMEM;
        job.phase = 1;
        job.rows = ord->rows + ord->row_indptr[s];
        job.num_units = (ord->row_indptr[s + 1] - ord->row_indptr[s]) * r->num_qo_heads;
        atomic_store(&job.next, 0);
        cpu_threads_run(t, cpu_worker, &job);
        if (atomic_load(&job.failed))
            return ATTN_E_NOMEM;
    }
    return 0;
}

/* Phase of request b from (T, C): the segment it belongs to under PARTITION. */
static int request_phase(const attn_request_desc *q)
{
    attn_phase ph;
    return attn_phase_classify(q->cache_len, q->new_len, &ph) == 0 ? (int)ph : 0;
}

static int64_t item_cost(const cpu_run *r, uint32_t i)
{
    const attn_work_item *it = &r->plan->items[i];
    return (it->kv_end - it->kv_begin) * r->m->requests[it->req].new_len;
}

typedef struct cost_idx {
    int64_t cost;
    uint32_t idx;
} cost_idx;

static int cost_desc(const void *a, const void *b)
{
    const cost_idx *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int cpu_order_build(const cpu_run *r, attn_schedule_policy s, cpu_order *o, char *why,
                    size_t why_len)
{
    const attn_split_plan *p = r->plan;
    uint32_t present = 0;
    memset(o, 0, sizeof *o);
    for (uint32_t b = 0; b < r->num_requests; b++)
        present |= 1u << request_phase(&r->m->requests[b]);
    uint32_t nphases = (uint32_t)__builtin_popcount(present);
    if (s == ATTN_SCHED_AUTO) {
        /* one pass has one barrier pair instead of one per phase; with one
         * phase present the two schedules are the same work */
        s = nphases > 1 ? ATTN_SCHED_UNIFIED : ATTN_SCHED_PARTITION;
        snprintf(why, why_len, "%s",
                 nphases > 1 ? "auto: one work list over every phase, largest items first"
                             : "auto: one phase present, one producer and one merge pass");
    } else {
        snprintf(why, why_len, "%s",
                 s == ATTN_SCHED_UNIFIED
                     ? "as asked: one work list over every phase, largest items first"
                     : "as asked: one producer and merge pass per phase");
    }
    o->schedule = s;
    o->items = malloc(sizeof *o->items * (p->num_items ? p->num_items : 1));
    o->rows = malloc(sizeof *o->rows * (size_t)(r->total_q ? r->total_q : 1));
    if (o->items == NULL || o->rows == NULL) {
        cpu_order_free(o);
        return ATTN_E_NOMEM;
    }
    if (s == ATTN_SCHED_UNIFIED) {
        o->num_segments = 1;
        /* largest first, ties by index: deterministic, so the queue order is frozen */
        cost_idx *ci = malloc(sizeof *ci * (p->num_items ? p->num_items : 1));
        if (ci == NULL) {
            cpu_order_free(o);
            return ATTN_E_NOMEM;
        }
        for (uint32_t i = 0; i < p->num_items; i++) {
            ci[i].cost = item_cost(r, i);
            ci[i].idx = i;
        }
        qsort(ci, p->num_items, sizeof *ci, cost_desc);
        for (uint32_t i = 0; i < p->num_items; i++)
            o->items[i] = ci[i].idx;
        free(ci);
        o->item_indptr[1] = p->num_items;
        for (int64_t q = 0; q < r->total_q; q++)
            o->rows[q] = q;
        o->row_indptr[1] = (uint64_t)r->total_q;
        return 0;
    }
    uint32_t ni = 0;
    uint64_t nr = 0;
    for (int ph = 0; ph < 3; ph++) {
        if ((present & (1u << ph)) == 0)
            continue;
        for (uint32_t i = 0; i < p->num_items; i++)
            if (request_phase(&r->m->requests[p->items[i].req]) == ph)
                o->items[ni++] = i;
        for (uint32_t b = 0; b < r->num_requests; b++)
            if (request_phase(&r->m->requests[b]) == ph)
                for (int32_t q = r->m->qo_indptr[b]; q < r->m->qo_indptr[b + 1]; q++)
                    o->rows[nr++] = q;
        o->num_segments++;
        o->item_indptr[o->num_segments] = ni;
        o->row_indptr[o->num_segments] = nr;
    }
    return 0;
}

void cpu_order_free(cpu_order *o)
{
    free(o->items);
    free(o->rows);
    o->items = NULL;
    o->rows = NULL;
}

int cpu_check_buffers(const void *k_store, const void *v_store, const void *q, const void *k_new,
                      const void *v_new, const void *o, attn_error_detail *err)
{
    if (k_store == NULL || v_store == NULL)
        return attn_error_set(err, ATTN_E_MISSING, k_store == NULL ? "pool.k" : "pool.v",
                              "no K/V store for this layer");
    if (q == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "q", "q is missing");
    if (k_new == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "k_new", "k_new is missing");
    if (v_new == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "v_new", "v_new is missing");
    if (o == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "o", "no output buffer");
    return 0;
}

/* A caller's plan must be for this batch and keep the seed 0x02I closure:
 * exact disjoint coverage of [0, T_b + C_b), every slot written once. */
static int check_plan(const attn_split_plan *p, const attn_manifest *m, attn_error_detail *err)
{
    int rv;
    if (p->num_requests != m->num_requests)
        return attn_error_set(err, ATTN_E_SPLIT, "plan.num_requests",
                              "plan is for %u requests, the manifest has %u", p->num_requests,
                              m->num_requests);
    if (p->slot_indptr == NULL || (p->items == NULL && p->num_items > 0))
        return attn_error_set(err, ATTN_E_SPLIT, "plan", "plan arrays are missing");
    int64_t *kv_len = malloc(sizeof *kv_len * m->num_requests);
    if (kv_len == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "plan", "out of memory");
    for (uint32_t b = 0; b < m->num_requests; b++)
        kv_len[b] = m->requests[b].cache_len + m->requests[b].new_len;
    rv = attn_split_plan_check(p, kv_len, err);
    free(kv_len);
    return rv;
}

/* Copy between the staged rows and their cache rows: staged row i of
 * request b is logical row T_b + i of *its* pages (cache identity, seed
 * 0x08F), every K/V head; `to_store` picks the direction. */
static void copy_rows(const cpu_run *r, char *k_store, char *v_store, char *k_rows, char *v_rows,
                      bool to_store)
{
    size_t es = attn_dtype_size(r->kv_dtype);
    for (uint32_t b = 0; b < r->num_requests; b++) {
        const attn_request_desc *q = &r->m->requests[b];
        for (int64_t i = 0; i < q->new_len; i++) {
            int64_t page, slot;
            size_t row = (size_t)r->m->qo_indptr[b] + (size_t)i;
            if (!attn_kv_addr_locate(&r->addr, b, q->cache_len + i, &page, &slot))
                continue; /* unreachable after validation */
            for (uint32_t hk = 0; hk < r->num_kv_heads; hk++) {
                char *ks =
                    k_store + attn_kv_addr_elem(&r->addr, page, slot, hk, 0, r->d_qk) * (int64_t)es;
                char *vs =
                    v_store + attn_kv_addr_elem(&r->addr, page, slot, hk, 0, r->d_vo) * (int64_t)es;
                char *kr = k_rows + (row * r->num_kv_heads + hk) * r->d_qk * es;
                char *vr = v_rows + (row * r->num_kv_heads + hk) * r->d_vo * es;
                memcpy(to_store ? ks : kr, to_store ? kr : ks, r->d_qk * es);
                memcpy(to_store ? vs : vr, to_store ? vr : vs, r->d_vo * es);
            }
        }
    }
}

/* The commit of seed 0x08C. */
void cpu_commit_rows(const cpu_run *r, void *k_store, void *v_store)
{
    copy_rows(r, k_store, v_store, (char *)r->k_new, (char *)r->v_new, true);
}

void cpu_rows_bytes(const cpu_run *r, size_t *k_bytes, size_t *v_bytes)
{
    size_t rows = (size_t)r->m->qo_indptr[r->num_requests] * r->num_kv_heads;
    size_t es = attn_dtype_size(r->kv_dtype);
    *k_bytes = rows * r->d_qk * es;
    *v_bytes = rows * r->d_vo * es;
}

void cpu_gather_rows(const cpu_run *r, const void *k_store, const void *v_store, void *k_new,
                     void *v_new)
{
    /* the store is only read: copy_rows writes the rows side */
    copy_rows(r, (char *)k_store, (char *)v_store, k_new, v_new, false);
}

int cpu_prepare(cpu_run *r, const attn_manifest *m, const attn_pool_geometry *g,
                const attn_kv_addr *addr, const attn_split_plan *plan, const attn_cpu_options *opt,
                bool validated, attn_error_detail *err)
{
    int rv;

    memset(r, 0, sizeof *r);
    if (addr == NULL) {
        if (!validated && (rv = attn_manifest_validate(m, g, err)) != 0)
            return rv;
        attn_kv_addr_from_table(&r->addr, &m->kv, m->num_requests, g);
    } else {
        if (!validated && (rv = attn_manifest_validate_core(m, g, err)) != 0)
            return rv;
        if (addr->num_requests != m->num_requests || addr->num_kv_heads != g->num_kv_heads)
            return attn_error_set(err, ATTN_E_SHAPE, "kv",
                                  "translator has %u requests and %u heads, expected %u and %u",
                                  addr->num_requests, addr->num_kv_heads, m->num_requests,
                                  g->num_kv_heads);
        if ((rv = attn_kv_addr_validate(addr, m->requests, "kv.", err)) != 0)
            return rv;
        r->addr = *addr;
    }
    r->plan = plan;
    if ((rv = check_plan(plan, m, err)) != 0)
        return rv;
    if ((rv = attn_mask_prog_build(&m->mask, m->requests, m->num_requests, &r->mask, err)) != 0)
        return rv;

    r->m = m;
    r->num_requests = m->num_requests;
    r->num_qo_heads = m->num_qo_heads;
    r->num_kv_heads = g->num_kv_heads;
    r->group = m->num_qo_heads / g->num_kv_heads; /* seed 0x04A: h_kv = h_q / g */
    /* NHD keeps the rows of all K/V heads of one token adjacent: a unit
     * walking every head reads the pages sequentially.  HND keeps each
     * head's rows adjacent: one head per unit. */
    r->heads_per_unit = r->addr.layout == ATTN_NHD ? g->num_kv_heads : 1;
    r->d_qk = g->head_dim_qk;
    r->d_vo = g->head_dim_vo;
    r->kv_dtype = g->kv_dtype;
    r->q_dtype = m->q_dtype;
    r->abi = m->policy.state_abi;
    r->scale = attn_manifest_sm_scale(m, g);
    r->block_keys = opt->block_keys         ? opt->block_keys
                    : r->heads_per_unit > 1 ? ATTN_CPU_BLOCK_KEYS_NHD_DEFAULT
                                            : ATTN_CPU_BLOCK_KEYS_DEFAULT;
    if (r->block_keys > ATTN_CPU_BLOCK_KEYS_MAX)
        r->block_keys = ATTN_CPU_BLOCK_KEYS_MAX;
    r->total_q = attn_manifest_total_q(m);

    /* workspace geometry: one state per (query row, query head, slot) (seed 0x03D) */
    r->row_req = malloc(sizeof *r->row_req * (size_t)(r->total_q ? r->total_q : 1));
    r->ws_off = malloc(sizeof *r->ws_off * m->num_requests);
    if (r->row_req == NULL || r->ws_off == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the row maps");
    r->num_states = 0;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        uint64_t S_b = plan->slot_indptr[b + 1] - plan->slot_indptr[b];
        r->ws_off[b] = r->num_states;
        r->num_states += (uint64_t)m->requests[b].new_len * m->num_qo_heads * S_b;
        for (int32_t q = m->qo_indptr[b]; q < m->qo_indptr[b + 1]; q++)
            r->row_req[q] = b;
    }
    return 0;
}

void cpu_release(cpu_run *r)
{
    attn_mask_prog_free(&r->mask);
    free(r->row_req);
    free(r->ws_off);
    r->row_req = NULL;
    r->ws_off = NULL;
}

static void ledger_field(attn_ledger *l, const char *name, const char *dtype, uint32_t elem_bytes,
                         uint64_t elems, uint64_t offset)
{
    attn_ledger_field *f = &l->fields[l->num_fields++];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->dtype, sizeof f->dtype, "%s", dtype);
    f->elem_bytes = elem_bytes;
    f->elems = elems;
    f->bytes = elems * elem_bytes;
    f->offset = offset;
    f->ptr = NULL;
    l->payload_bytes += f->bytes;
    l->total_bytes = offset + f->bytes;
}

void cpu_ledger(const cpu_run *r, bool f64, attn_ledger *l)
{
    bool mlu = r->abi == ATTN_ABI_MLU;
    size_t scal = f64 ? (mlu ? sizeof(attn_mlu_f64) : sizeof(attn_lseo_f64))
                      : (mlu ? sizeof(attn_mlu_f32) : sizeof(attn_lseo_f32));
    size_t acc = f64 ? sizeof(double) : sizeof(float);
    uint64_t n = r->num_states ? r->num_states : 1;
    memset(l, 0, sizeof *l);
    l->head_dim_padded = r->d_vo;
    /* the scalar part of a state is one struct (state.h), so it is one field */
    ledger_field(l, mlu ? "partial_m_l" : "partial_LSE", f64 ? "fp64" : "fp32", (uint32_t)scal, n,
                 0);
    uint64_t vec_off = (n * scal + 63) & ~(uint64_t)63;
    ledger_field(l, mlu ? "partial_u" : "partial_O", f64 ? "fp64" : "fp32", (uint32_t)acc,
                 n * r->d_vo, vec_off);
}

void cpu_ws_bind(cpu_run *r, void *ws, const attn_ledger *l)
{
    r->ws_scal = (char *)ws + l->fields[0].offset;
    r->ws_vec = (char *)ws + l->fields[1].offset;
}

int attn_cpu_attend(const attn_cpu_call *c, const attn_cpu_options *opt, attn_error_detail *err)
{
    attn_cpu_options defaults;
    attn_split_plan own_plan;
    cpu_run r;
    cpu_order ord;
    cpu_threads *threads = NULL;
    attn_ledger led;
    void *ws = NULL;
    char why[128];
    int rv;

    if (c == NULL || c->m == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "", "no call or no manifest");
    if (opt == NULL) {
        memset(&defaults, 0, sizeof defaults);
        opt = &defaults;
    }
    memset(&own_plan, 0, sizeof own_plan);
    memset(&r, 0, sizeof r);
    memset(&ord, 0, sizeof ord);
    bool f64 = opt->acc == ATTN_CPU_ACC_F64;
    /* the manifest must be sound before a plan is made of it */
    if ((rv = c->addr == NULL ? attn_manifest_validate(c->m, c->g, err)
                              : attn_manifest_validate_core(c->m, c->g, err)) != 0)
        goto out;
    const attn_split_plan *plan = c->plan;
    if (plan == NULL) {
        if ((rv = attn_cpu_plan(c->m, c->g, opt->num_threads, &own_plan, err)) != 0)
            goto out;
        plan = &own_plan;
    }
    if ((rv = cpu_prepare(&r, c->m, c->g, c->addr, plan, opt, true, err)) != 0 ||
        (rv = cpu_check_buffers(c->k_store, c->v_store, c->q, c->k_new, c->v_new, c->o, err)) != 0)
        goto out;
    r.k_store = c->k_store;
    r.v_store = c->v_store;
    r.q = c->q;
    r.k_new = c->k_new;
    r.v_new = c->v_new;
    r.o = c->o;
    r.lse = c->lse;
    r.o64 = c->o64;
    r.lse64 = c->lse64;
    cpu_ledger(&r, f64, &led);
    if ((ws = malloc(led.total_bytes)) == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %llu partial states",
                            (unsigned long long)r.num_states);
        goto out;
    }
    cpu_ws_bind(&r, ws, &led);
    if ((rv = cpu_order_build(&r, c->m->policy.schedule, &ord, why, sizeof why)) != 0) {
        rv = attn_error_set(err, rv, "", "out of memory for the work order");
        goto out;
    }
    /* a direct call owns its threads for this call only; an engine
     * instance keeps them (engines/cpu/backend.c) */
    uint32_t n = opt->num_threads ? opt->num_threads : attn_cpu_online_threads();
    if ((rv = cpu_threads_create(n, &threads)) != 0 ||
        (rv = cpu_execute(&r, f64, threads, &ord)) != 0) {
        rv = attn_error_set(err, rv, "", "out of memory for thread scratch");
        goto out;
    }
    /* seed 0x08C: commit only after attention succeeded */
    if (c->commit)
        cpu_commit_rows(&r, c->k_store, c->v_store);
out:
    cpu_threads_destroy(threads);
    cpu_order_free(&ord);
    free(ws);
    cpu_release(&r);
    if (own_plan.slot_indptr != NULL || own_plan.items != NULL || own_plan.num_splits != NULL)
        attn_split_plan_free(&own_plan);
    return rv;
}
