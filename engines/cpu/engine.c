/* The CPU reference engine: validation, the append transaction, threads
 * (seed 0x08C, 0x03I).  The kernels themselves are in attend_impl.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "engines/cpu/engine.h"
#include "kernels/cpu/run.h"
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

/* Work of one call, handed to every thread. */
typedef struct cpu_job {
    cpu_run *r;
    bool f64;
    size_t scratch_bytes;
    uint64_t num_units; /* producer units (phase 0) or merge units (phase 1) */
    int phase;
    atomic_uint_fast64_t next;
    atomic_int failed;
} cpu_job;

/* Units are claimed in chunks so threads rarely touch the shared counter. */
static void *cpu_worker(void *arg)
{
    cpu_job *j = arg;
    cpu_run *r = j->r;
    void *scratch = malloc(j->scratch_bytes);
    if (scratch == NULL) {
        atomic_store(&j->failed, 1);
        return NULL;
    }
    uint64_t chunk = j->phase == 0 ? 1 : 16;
    for (;;) {
        uint64_t u0 = atomic_fetch_add(&j->next, chunk);
        if (u0 >= j->num_units || atomic_load(&j->failed))
            break;
        uint64_t u1 = u0 + chunk < j->num_units ? u0 + chunk : j->num_units;
        for (uint64_t u = u0; u < u1; u++) {
            if (j->phase == 0) {
                uint32_t units = r->num_kv_heads / r->heads_per_unit;
                uint32_t item = (uint32_t)(u / units),
                         hk = (uint32_t)(u % units) * r->heads_per_unit;
                if (j->f64)
                    cpu_produce_f64(r, scratch, item, hk);
                else
                    cpu_produce_f32(r, scratch, item, hk);
            } else {
                int64_t row = (int64_t)(u / r->num_qo_heads);
                uint32_t h = (uint32_t)(u % r->num_qo_heads);
                if (j->f64)
                    cpu_merge_f64(r, scratch, row, h);
                else
                    cpu_merge_f32(r, scratch, row, h);
            }
        }
    }
    free(scratch);
    return NULL;
}

/* Run one phase over `units` on n threads (the calling thread is one). */
static int cpu_parallel(cpu_job *j, int phase, uint64_t units, uint32_t n)
{
    pthread_t tid[256];
    uint32_t started = 0;
    j->phase = phase;
    j->num_units = units;
    atomic_store(&j->next, 0);
    if (n > 256)
        n = 256;
    if ((uint64_t)n > units)
        n = units > 0 ? (uint32_t)units : 1;
    for (uint32_t t = 1; t < n; t++) {
        if (pthread_create(&tid[started], NULL, cpu_worker, j) != 0)
            break; /* fewer threads is still correct: units are claimed dynamically */
        started++;
    }
    cpu_worker(j);
    for (uint32_t t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    return atomic_load(&j->failed) ? ATTN_E_NOMEM : 0;
}

/* Buffers a call must name; field paths as on the wire (PROTOCOL.md run). */
static int check_buffers(const attn_cpu_call *c, attn_error_detail *err)
{
    if (c->k_store == NULL || c->v_store == NULL)
        return attn_error_set(err, ATTN_E_MISSING, c->k_store == NULL ? "pool.k" : "pool.v",
                              "no K/V store for this layer");
    if (c->q == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "q", "q is missing");
    if (c->k_new == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "k_new", "k_new is missing");
    if (c->v_new == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "v_new", "v_new is missing");
    if (c->o == NULL)
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

/* The commit of seed 0x08C: staged row i of request b goes to logical row
 * T_b + i of *its* pages (cache identity, seed 0x08F), every K/V head. */
static void commit_rows(const cpu_run *r, void *k_store, void *v_store)
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
                memcpy((char *)k_store +
                           attn_kv_addr_elem(&r->addr, page, slot, hk, 0, r->d_qk) * (int64_t)es,
                       (const char *)r->k_new + (row * r->num_kv_heads + hk) * r->d_qk * es,
                       r->d_qk * es);
                memcpy((char *)v_store +
                           attn_kv_addr_elem(&r->addr, page, slot, hk, 0, r->d_vo) * (int64_t)es,
                       (const char *)r->v_new + (row * r->num_kv_heads + hk) * r->d_vo * es,
                       r->d_vo * es);
            }
        }
    }
}

/* Everything that can fail: validation, the default plan, the mask program
 * and the workspace.  Nothing here writes the store. */
static int prepare(cpu_run *r, const attn_cpu_call *c, const attn_cpu_options *opt,
                   attn_split_plan *own_plan, attn_error_detail *err)
{
    const attn_manifest *m = c->m;
    const attn_pool_geometry *g = c->g;
    int rv;

    if (c->addr == NULL) {
        if ((rv = attn_manifest_validate(m, g, err)) != 0)
            return rv;
        attn_kv_addr_from_table(&r->addr, &m->kv, m->num_requests, g);
    } else {
        if ((rv = attn_manifest_validate_core(m, g, err)) != 0)
            return rv;
        if (c->addr->num_requests != m->num_requests || c->addr->num_kv_heads != g->num_kv_heads)
            return attn_error_set(err, ATTN_E_SHAPE, "kv",
                                  "translator has %u requests and %u heads, expected %u and %u",
                                  c->addr->num_requests, c->addr->num_kv_heads, m->num_requests,
                                  g->num_kv_heads);
        if ((rv = attn_kv_addr_validate(c->addr, m->requests, "kv.", err)) != 0)
            return rv;
        r->addr = *c->addr;
    }
    if ((rv = check_buffers(c, err)) != 0)
        return rv;
    if (c->plan == NULL) {
        if ((rv = attn_cpu_plan(m, g, opt->num_threads, own_plan, err)) != 0)
            return rv;
        r->plan = own_plan;
    } else {
        r->plan = c->plan;
    }
    if ((rv = check_plan(r->plan, m, err)) != 0)
        return rv;
    if ((rv = attn_mask_prog_build(&m->mask, m->requests, m->num_requests, &r->mask, err)) != 0)
        return rv;

    r->m = m;
    r->k_store = c->k_store;
    r->v_store = c->v_store;
    r->q = c->q;
    r->k_new = c->k_new;
    r->v_new = c->v_new;
    r->o = c->o;
    r->lse = c->lse;
    r->o64 = c->o64;
    r->lse64 = c->lse64;
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

    /* workspace: one state per (query row, query head, slot) (seed 0x03D) */
    r->row_req = malloc(sizeof *r->row_req * (size_t)(r->total_q ? r->total_q : 1));
    r->ws_off = malloc(sizeof *r->ws_off * m->num_requests);
    if (r->row_req == NULL || r->ws_off == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the row maps");
    r->num_states = 0;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        uint64_t S_b = r->plan->slot_indptr[b + 1] - r->plan->slot_indptr[b];
        r->ws_off[b] = r->num_states;
        r->num_states += (uint64_t)m->requests[b].new_len * m->num_qo_heads * S_b;
        for (int32_t q = m->qo_indptr[b]; q < m->qo_indptr[b + 1]; q++)
            r->row_req[q] = b;
    }
    size_t acc = opt->acc == ATTN_CPU_ACC_F64 ? sizeof(double) : sizeof(float);
    size_t scal = opt->acc == ATTN_CPU_ACC_F64
                      ? (r->abi == ATTN_ABI_MLU ? sizeof(attn_mlu_f64) : sizeof(attn_lseo_f64))
                      : (r->abi == ATTN_ABI_MLU ? sizeof(attn_mlu_f32) : sizeof(attn_lseo_f32));
    size_t n = r->num_states ? (size_t)r->num_states : 1;
    r->ws_scal = malloc(n * scal);
    r->ws_vec = malloc(n * r->d_vo * acc);
    if (r->ws_scal == NULL || r->ws_vec == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %llu partial states",
                              (unsigned long long)r->num_states);
    return 0;
}

static void release(cpu_run *r, attn_split_plan *own_plan)
{
    attn_mask_prog_free(&r->mask);
    free(r->row_req);
    free(r->ws_off);
    free(r->ws_scal);
    free(r->ws_vec);
    if (own_plan->slot_indptr != NULL || own_plan->items != NULL || own_plan->num_splits != NULL)
        attn_split_plan_free(own_plan);
}

int attn_cpu_attend(const attn_cpu_call *c, const attn_cpu_options *opt, attn_error_detail *err)
{
    attn_cpu_options defaults;
    attn_split_plan own_plan;
    cpu_run r;
    cpu_job *job = NULL;
    int rv;

    if (c == NULL || c->m == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "", "no call or no manifest");
    if (opt == NULL) {
        memset(&defaults, 0, sizeof defaults);
        opt = &defaults;
    }
    memset(&own_plan, 0, sizeof own_plan);
    memset(&r, 0, sizeof r);
    if ((rv = prepare(&r, c, opt, &own_plan, err)) != 0)
        goto out;

    uint32_t threads = opt->num_threads ? opt->num_threads : attn_cpu_online_threads();
    bool f64 = opt->acc == ATTN_CPU_ACC_F64;
    if ((job = calloc(1, sizeof *job)) == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
        goto out;
    }
    job->r = &r;
    job->f64 = f64;
    job->scratch_bytes = cpu_scratch_bytes(&r, f64 ? sizeof(double) : sizeof(float));
    if (job->scratch_bytes < r.d_vo * sizeof(double))
        job->scratch_bytes = r.d_vo * sizeof(double); /* the merge's O row */
    atomic_init(&job->failed, 0);

    /* producers, then the per-request merge: the two launches of seed 0x03I */
    uint64_t units = (uint64_t)r.plan->num_items * (r.num_kv_heads / r.heads_per_unit);
    if ((rv = cpu_parallel(job, 0, units, threads)) != 0 ||
        (rv = cpu_parallel(job, 1, (uint64_t)r.total_q * r.num_qo_heads, threads)) != 0) {
        rv = attn_error_set(err, rv, "", "out of memory for thread scratch");
        goto out;
    }
    /* seed 0x08C: commit only after attention succeeded */
    if (c->commit)
        commit_rows(&r, c->k_store, c->v_store);
out:
    free(job);
    release(&r, &own_plan);
    return rv;
}
