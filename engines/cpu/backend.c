/* The CPU reference engine behind the backend interface (planner/backend.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engines/cpu/engine.h"
#include "planner/registry.h"

static attn_cpu_options g_cpu_options; /* zero: all online CPUs, fp32 */

void attn_cpu_backend_configure(const attn_cpu_options *opt)
{
    if (opt != NULL)
        g_cpu_options = *opt;
    else
        memset(&g_cpu_options, 0, sizeof g_cpu_options);
}

/* The reference engine runs every phase, dtype, layout, mask and head ratio
 * the wire can express; it only refuses what is malformed, and says why for
 * every factor (seed 0x07B: a rejection is a vector). */
static void cpu_admit(const attn_backend *self, const attn_manifest *m, const attn_pool_geometry *g,
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
    if ((unsigned)g->layout > ATTN_HND || g->page_size == 0)
        attn_admission_reject(out, ATTN_ADMIT_LAYOUT, "layout", "layout %d page_size %u",
                              (int)g->layout, g->page_size);
    if ((unsigned)m->mask.kind > ATTN_MASK_DENSE)
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

static int cpu_plan(const attn_backend *self, const attn_manifest *m, const attn_pool_geometry *g,
                    attn_split_plan *out)
{
    return attn_cpu_plan(m, g, ATTN_CPU_PLAN_GRID, out, NULL);
}

static void report_kernel(attn_exec_report *rep, const char *symbol)
{
    if (rep->num_kernels >= ATTN_KERNELS_MAX)
        return;
    snprintf(rep->kernels[rep->num_kernels].symbol, sizeof rep->kernels[0].symbol, "%s", symbol);
    rep->kernels[rep->num_kernels].launches = 1;
    rep->num_kernels++;
}

static int cpu_run(const attn_backend *self, const attn_exec_args *a, attn_exec_report *rep)
{
    attn_cpu_call c;
    struct timespec t0, t1;
    int rv;

    if (a == NULL || a->m == NULL || a->pool == NULL || a->pool->geom == NULL)
        return ATTN_E_MISSING;
    if (a->pool->platform != ATTN_PLATFORM_CPU)
        return ATTN_E_BACKEND_REJECTED; /* the engine reads host memory only */
    if (a->layer >= a->pool->geom->layers || a->pool->k == NULL || a->pool->v == NULL)
        return ATTN_E_LAYER;
    memset(&c, 0, sizeof c);
    c.m = a->m;
    c.g = a->pool->geom;
    c.plan = a->plan;
    c.k_store = a->pool->k[a->layer];
    c.v_store = a->pool->v[a->layer];
    c.q = a->q;
    c.k_new = a->k_new;
    c.v_new = a->v_new;
    c.o = a->o;
    c.lse = a->lse;
    c.commit = a->commit;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rv = attn_cpu_attend(&c, &g_cpu_options, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rep != NULL) {
        memset(rep, 0, sizeof *rep);
        if (rv == 0) {
            /* declared, not observed: no tracer watches host functions */
            report_kernel(rep, g_cpu_options.acc == ATTN_CPU_ACC_F64 ? "cpu_produce_f64"
                                                                     : "cpu_produce_f32");
            report_kernel(rep, g_cpu_options.acc == ATTN_CPU_ACC_F64 ? "cpu_merge_f64"
                                                                     : "cpu_merge_f32");
            if (a->commit)
                report_kernel(rep, "cpu_commit_rows");
        }
        rep->kernels_observed = false;
        rep->engine_us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
        snprintf(rep->timing_method, sizeof rep->timing_method, "host_clock");
    }
    return rv;
}

static const attn_backend g_cpu_backend = {
    .name = "cpu_ref",
    .platform = ATTN_PLATFORM_CPU,
    .phases = (1u << ATTN_PHASE_PREFILL) | (1u << ATTN_PHASE_APPEND) | (1u << ATTN_PHASE_DECODE),
    .priority = 100, /* after any GPU engine under auto */
    .admit = cpu_admit,
    .plan = cpu_plan,
    .run = cpu_run,
    .ctx = NULL,
};

const attn_backend *attn_cpu_backend(void)
{
    return &g_cpu_backend;
}
