/* The engine lifecycle around an ops table (planner/engine.h). */
#include "planner/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int attn_engine_create(const attn_engine_ops *ops, const attn_engine_config *cfg, attn_engine **out,
                       attn_error_detail *err)
{
    attn_engine_config host = {.device = -1, .num_threads = 0, .tuning = NULL};
    *out = NULL;
    if (ops == NULL || ops->name == NULL)
        return attn_error_set(err, ATTN_E_INTERNAL, "engine", "no ops table");
    /* nng's habit: a table built against another interface is refused, not guessed at */
    if (ops->version != ATTN_ENGINE_OPS_VERSION)
        return attn_error_set(err, ATTN_E_VERSION, "engine",
                              "engine %s has ops version %u, this build needs %u", ops->name,
                              ops->version, ATTN_ENGINE_OPS_VERSION);
    if (ops->admit == NULL || ops->plan == NULL || ops->run == NULL || ops->plan_free == NULL)
        return attn_error_set(err, ATTN_E_INTERNAL, "engine",
                              "engine %s lacks admit, plan, run or plan_free", ops->name);
    if (cfg == NULL)
        cfg = &host;
    attn_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "engine", "out of memory");
    e->ops = ops;
    e->device = cfg->device;
    if (ops->platform == ATTN_PLATFORM_CUDA)
        snprintf(e->where, sizeof e->where, "cuda:%d", cfg->device < 0 ? 0 : cfg->device);
    else
        snprintf(e->where, sizeof e->where, "cpu");
    if (ops->init != NULL) {
        int rv = ops->init(cfg, &e->state, err);
        if (rv != 0) {
            free(e);
            return rv;
        }
    }
    *out = e;
    return 0;
}

void attn_engine_destroy(attn_engine *e)
{
    if (e == NULL)
        return;
    if (e->ops->fini != NULL)
        e->ops->fini(e->state);
    free(e);
}

int attn_engine_plan_new(attn_engine *e, const attn_manifest *m, const attn_pool_geometry *g,
                         attn_engine_plan **out, attn_error_detail *err)
{
    *out = NULL;
    attn_engine_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for an engine plan");
    p->owner = e;
    int rv = e->ops->plan(e, m, g, p, err);
    if (rv != 0) {
        free(p);
        return rv;
    }
    atomic_fetch_add(&e->count.plans, 1);
    *out = p;
    return 0;
}

void attn_engine_plan_release(attn_engine_plan *p)
{
    if (p == NULL)
        return;
    p->owner->ops->plan_free(p->owner, p);
    free(p);
}

int attn_engine_run(attn_engine *e, attn_engine_plan *p, const attn_run_io *io,
                    attn_exec_report *rep, attn_error_detail *err)
{
    if (p == NULL || p->owner != e)
        return attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id",
                              "the plan was made by another engine instance than %s on %s",
                              e->ops->name, e->where);
    atomic_fetch_add(&e->count.runs, 1);
    return e->ops->run(e, p, io, rep, err);
}

int attn_engine_complete(attn_engine *e, uint64_t ticket, attn_exec_report *rep,
                         attn_error_detail *err)
{
    if (e->ops->complete == NULL)
        return attn_error_set(err, ATTN_E_INVALID, "engine", "engine %s never defers a run",
                              e->ops->name);
    return e->ops->complete(e, ticket, rep, err);
}

int attn_engine_signal(attn_engine *e, void *addr, uint64_t value, attn_error_detail *err)
{
    if (e->ops->signal == NULL)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "signal",
                              "engine %s writes no device semaphores", e->ops->name);
    return e->ops->signal(e, addr, value, err);
}

void attn_engine_env_host(attn_engine_env *env)
{
    memset(env, 0, sizeof *env);
    snprintf(env->device_type, sizeof env->device_type, "cpu");
    snprintf(env->device, sizeof env->device, "cpu");
    snprintf(env->workspace_device, sizeof env->workspace_device, "cpu");
}

void attn_engine_env_cuda(attn_engine_env *env, int device, int cc_major, int cc_minor)
{
    memset(env, 0, sizeof *env);
    snprintf(env->device_type, sizeof env->device_type, "cuda");
    env->compute_capability = cc_major * 10 + cc_minor;
    snprintf(env->device, sizeof env->device, "cuda:%d", device);
    snprintf(env->workspace_device, sizeof env->workspace_device, "cuda:%d", device);
}

attn_key_env attn_engine_key_env(const attn_engine_env *env)
{
    attn_key_env k;
    k.device_type = env->device_type;
    k.compute_capability = env->compute_capability;
    k.device = env->device;
    k.workspace_device = env->workspace_device;
    return k;
}

bool attn_engine_implements(const attn_engine_ops *ops, attn_schedule_policy s)
{
    return s == ATTN_SCHED_AUTO || (ops->schedules & (1u << s)) != 0;
}
