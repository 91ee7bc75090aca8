/* The CPU reference engine behind the engine interface (planner/engine.h):
 * one instance owns its worker threads and workspace; plan splits, checks
 * the split plan, builds the mask program, the row maps and the work order
 * once; run binds the layer's buffers and hands the work to the threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engines/cpu/cpu_int.h"
#include "planner/registry.h"

/* One instance: options, the persistent workers, the workspace they carve. */
typedef struct cpu_instance {
    attn_cpu_options opt;
    cpu_threads *threads;
    pthread_mutex_t mu; /* one run at a time on the workers and the workspace */
    void *ws;
    size_t ws_cap;
    void *rows; /* a kv_written run's new rows, gathered out of the pool */
    size_t rows_cap;
    _Atomic uint64_t plan_checks, mask_programs, runs;
} cpu_instance;

/* What a plan keeps between runs. */
typedef struct cpu_plan_priv {
    cpu_run r; /* prepared: shapes, mask program, row maps; no buffers */
    cpu_order ord;
    bool f64;
} cpu_plan_priv;

static int cpu_init(const attn_engine_config *cfg, void **state, attn_error_detail *err)
{
    cpu_instance *ci = calloc(1, sizeof *ci);
    if (ci == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "engine", "out of memory");
    if (cfg->tuning != NULL)
        ci->opt = *(const attn_cpu_options *)cfg->tuning;
    if (ci->opt.num_threads == 0)
        ci->opt.num_threads = cfg->num_threads;
    uint32_t n = ci->opt.num_threads ? ci->opt.num_threads : attn_cpu_online_threads();
    if (cpu_threads_create(n, &ci->threads) != 0) {
        free(ci);
        return attn_error_set(err, ATTN_E_NOMEM, "threads", "cannot make %u worker threads", n);
    }
    pthread_mutex_init(&ci->mu, NULL);
    *state = ci;
    return 0;
}

static void cpu_fini(void *state)
{
    cpu_instance *ci = state;
    if (ci == NULL)
        return;
    cpu_threads_destroy(ci->threads);
    pthread_mutex_destroy(&ci->mu);
    free(ci->ws);
    free(ci->rows);
    free(ci);
}

/* The reference engine runs every phase, dtype, layout, mask and head ratio
 * the wire can express; it only refuses what is malformed, and says why for
 * every factor (seed 0x07B: a rejection is a vector). */
static void cpu_admit(const attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                      attn_admission *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)m->q_dtype > ATTN_BF16)
        attn_admission_reject(out, ATTN_ADMIT_Q_DTYPE, "q_dtype", "unknown q_dtype %d",
                              (int)m->q_dtype);
    if ((unsigned)g->kv_dtype > ATTN_BF16)
        attn_admission_reject(out, ATTN_ADMIT_KV_DTYPE, "kv_dtype", "unknown kv_dtype %d",
                              (int)g->kv_dtype);
    if (g->head_dim_qk == 0 || g->head_dim_vo == 0)
        attn_admission_reject(out, ATTN_ADMIT_SHAPE, "head_dim_qk", "head dims %u/%u not positive",
                              g->head_dim_qk, g->head_dim_vo);
    if (g->num_kv_heads == 0 || m->num_qo_heads % g->num_kv_heads != 0)
        attn_admission_reject(out, ATTN_ADMIT_HEAD_RATIO, "num_qo_heads",
                              "num_qo_heads %u is not a multiple of num_kv_heads %u",
                              m->num_qo_heads, g->num_kv_heads);
    if ((unsigned)g->layout >= ATTN_LAYOUT_COUNT || g->page_size == 0)
        attn_admission_reject(out, ATTN_ADMIT_LAYOUT, "layout", "layout %d page_size %u",
                              (int)g->layout, g->page_size);
    if ((unsigned)m->mask.kind >= ATTN_MASK_KIND_COUNT)
        attn_admission_reject(out, ATTN_ADMIT_MASK, "mask.kind", "unknown mask kind %d",
                              (int)m->mask.kind);
    out->admitted = out->num_reasons == 0;
}

/* The daemon plans for a fixed virtual grid, not for this machine's thread
 * count: the split plan decides the reduction order, so a capture recorded
 * on a 2-core machine must replay bit for bit on a 16-core one (seed 0x02H:
 * freeze the reduction tree for a determinism contract).  Threads only
 * schedule the plan's items. */
#define ATTN_CPU_PLAN_GRID 16

static void cpu_plan_free(attn_engine *self, attn_engine_plan *p)
{
    cpu_plan_priv *pp = p->priv;
    if (pp != NULL) {
        cpu_order_free(&pp->ord);
        cpu_release(&pp->r);
        free(pp);
        p->priv = NULL;
    }
    if (p->split.slot_indptr != NULL || p->split.items != NULL || p->split.num_splits != NULL)
        attn_split_plan_free(&p->split);
}

static int cpu_plan(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                    attn_engine_plan *out, attn_error_detail *err)
{
    cpu_instance *ci = self->state;
    int rv;
    cpu_plan_priv *pp = calloc(1, sizeof *pp);
    if (pp == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the plan");
    out->priv = pp;
    pp->f64 = ci->opt.acc == ATTN_CPU_ACC_F64;
    /* the manifest was validated before selection (engine.h); what is left
     * to check is the split plan's closure, once, with the mask program and
     * the row maps: runs reuse them */
    if ((rv = attn_cpu_plan(m, g, ATTN_CPU_PLAN_GRID, &out->split, err)) != 0)
        goto fail;
    atomic_fetch_add(&ci->plan_checks, 1);
    atomic_fetch_add(&ci->mask_programs, 1);
    if ((rv = cpu_prepare(&pp->r, m, g, NULL, &out->split, &ci->opt, true, err)) != 0)
        goto fail;
    if ((rv = cpu_order_build(&pp->r, m->policy.schedule, &pp->ord, out->schedule_why,
                              sizeof out->schedule_why)) != 0) {
        rv = attn_error_set(err, rv, "", "out of memory for the work order");
        goto fail;
    }
    out->schedule = pp->ord.schedule;
    /* what this plan keeps between runs: the mask program (a dense mask's
     * bits and row hulls), the row maps and the work order */
    out->priv_bytes = sizeof *pp + pp->r.mask.arena_bytes +
                      (sizeof *pp->r.row_req + sizeof *pp->ord.rows) * (uint64_t)pp->r.total_q +
                      sizeof *pp->r.ws_off * (uint64_t)m->num_requests +
                      sizeof *pp->ord.items * (uint64_t)out->split.num_items;
    cpu_ledger(&pp->r, pp->f64, &out->ledger);
    attn_engine_env_host(&out->env);
    snprintf(out->env.device, sizeof out->env.device, "%s", g->device[0] ? g->device : "cpu");
    return 0;
fail:
    cpu_plan_free(self, out);
    return rv;
}

static void report_kernel(attn_exec_report *rep, const char *symbol, uint32_t launches)
{
    if (rep->num_kernels >= ATTN_KERNELS_MAX)
        return;
    snprintf(rep->kernels[rep->num_kernels].symbol, sizeof rep->kernels[0].symbol, "%s", symbol);
    rep->kernels[rep->num_kernels].launches = launches;
    rep->num_kernels++;
}

static int grow_ws(cpu_instance *ci, size_t need)
{
    if (need <= ci->ws_cap)
        return 0;
    void *n = malloc(need);
    if (n == NULL)
        return ATTN_E_NOMEM;
    free(ci->ws);
    ci->ws = n;
    ci->ws_cap = need;
    return 0;
}

static int cpu_run_plan(attn_engine *self, attn_engine_plan *p, const attn_run_io *io,
                        attn_exec_report *rep, attn_error_detail *err)
{
    cpu_instance *ci = self->state;
    cpu_plan_priv *pp = p->priv;
    struct timespec t0, t1;
    int rv;

    if (rep != NULL)
        memset(rep, 0, sizeof *rep);
    if (io == NULL || io->pool == NULL || io->pool->geom == NULL)
        return attn_error_set(err, ATTN_E_MISSING, "pool", "no pool to run on");
    if (io->pool->platform != ATTN_PLATFORM_CPU)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "pool.device",
                              "cpu_ref reads host pools only"); /* admission says so too */
    if (io->layer >= io->pool->geom->layers || io->pool->k == NULL || io->pool->v == NULL)
        return attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u outside the pool", io->layer);
    void *ks = io->pool->k[io->layer], *vs = io->pool->v[io->layer];
    /* kv_written: the new rows are in the pool; they stand in for k_new/v_new below */
    const void *kn = io->kv_written ? ks : io->k_new, *vn = io->kv_written ? vs : io->v_new;
    if ((rv = cpu_check_buffers(ks, vs, io->q, kn, vn, io->o, err)) != 0)
        return rv;
    /* bind: a copy of the prepared run with this layer's pointers */
    cpu_run r = pp->r;
    r.k_store = ks;
    r.v_store = vs;
    r.q = io->q;
    r.k_new = io->k_new;
    r.v_new = io->v_new;
    r.o = io->o;
    r.lse = io->lse;
    pthread_mutex_lock(&ci->mu);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (grow_ws(ci, p->ledger.total_bytes) != 0) {
        pthread_mutex_unlock(&ci->mu);
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %llu workspace bytes",
                              (unsigned long long)p->ledger.total_bytes);
    }
    if (io->kv_written) {
        /* the producers read new rows from staging (they are not in the pool
         * during an inline run until its commit): stage the rows the client
         * wrote, so the run is the inline run bit for bit, and commit nothing */
        size_t kb = 0, vb = 0;
        cpu_rows_bytes(&r, &kb, &vb);
        if (kb + vb > ci->rows_cap) {
            void *n = realloc(ci->rows, kb + vb);
            if (n == NULL) {
                pthread_mutex_unlock(&ci->mu);
                return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %zu row bytes",
                                      kb + vb);
            }
            ci->rows = n;
            ci->rows_cap = kb + vb;
        }
        r.k_new = ci->rows;
        r.v_new = (char *)ci->rows + kb;
        cpu_gather_rows(&r, ks, vs, ci->rows, (char *)ci->rows + kb);
    }
    cpu_ws_bind(&r, ci->ws, &p->ledger);
    atomic_fetch_add(&ci->runs, 1);
    rv = cpu_execute(&r, pp->f64, ci->threads, &pp->ord);
    /* seed 0x08C: commit only after attention succeeded */
    if (rv == 0 && io->commit && !io->kv_written)
        cpu_commit_rows(&r, ks, vs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_mutex_unlock(&ci->mu);
    if (rv != 0)
        return attn_error_set(err, rv, "", "out of memory for thread scratch");
    if (rep != NULL) {
        /* a host engine records the functions it executed, one launch per segment */
        uint32_t seg = pp->ord.num_segments;
        report_kernel(rep, pp->f64 ? "cpu_produce_f64" : "cpu_produce_f32", seg);
        report_kernel(rep, pp->f64 ? "cpu_merge_f64" : "cpu_merge_f32", seg);
        if (io->kv_written)
            report_kernel(rep, "cpu_gather_rows", 1);
        else if (io->commit)
            report_kernel(rep, "cpu_commit_rows", 1);
        rep->kernels_observed = false;
        rep->engine_us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
        snprintf(rep->timing_method, sizeof rep->timing_method, "host_clock");
        snprintf(rep->timing_scope, sizeof rep->timing_scope,
                 "cpu engine: producers, merges, commit");
    }
    return 0;
}

static const attn_engine_ops g_cpu_ops = {
    .version = ATTN_ENGINE_OPS_VERSION,
    .name = "cpu_ref",
    .platform = ATTN_PLATFORM_CPU,
    .phases = (1u << ATTN_PHASE_PREFILL) | (1u << ATTN_PHASE_APPEND) | (1u << ATTN_PHASE_DECODE),
    .schedules = (1u << ATTN_SCHED_PARTITION) | (1u << ATTN_SCHED_UNIFIED),
    .priority = 100, /* after any GPU engine under auto */
    .init = cpu_init,
    .fini = cpu_fini,
    .admit = cpu_admit,
    .plan = cpu_plan,
    .run = cpu_run_plan,
    .plan_free = cpu_plan_free,
};

const attn_engine_ops *attn_cpu_engine_ops(void)
{
    return &g_cpu_ops;
}

void attn_cpu_engine_counts_get(const attn_engine *e, attn_cpu_engine_counts *out)
{
    const cpu_instance *ci = e->state;
    memset(out, 0, sizeof *out);
    if (e->ops != &g_cpu_ops || ci == NULL)
        return;
    out->plan_checks = atomic_load(&ci->plan_checks);
    out->mask_programs = atomic_load(&ci->mask_programs);
    out->runs = atomic_load(&ci->runs);
    out->threads_started = cpu_threads_started(ci->threads);
}
