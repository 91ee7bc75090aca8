/* How one request flows (ARCHITECTURE.md "where a newcomer starts reading"):
 * decode (server.c) -> validate the manifest completely (protocol/manifest.h)
 * -> select an engine instance (planner/registry.h) -> the engine plans once
 * (planner/engine.h: splits, ledger, key environment, device metadata) ->
 * cache the plan -> run per layer (binds the tensors and launches, with
 * commit) -> reply with O, LSE and the dispatch diagnostic, which reports
 * what the engine planned, ran and measured.
 *
 * Nothing lost, nothing half-applied (seed 0x08H/0x08I "mutate cache before
 * validating"): a manifest is validated completely before any pool byte can
 * change; the run's tensors are shape-checked before the engine is called;
 * the engine stages the new rows and commits them only after attention
 * succeeded, so a failure leaves the pool as it was, and the reply says so.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/server_int.h"
#include "planner/diag.h"
#include "planner/ledger.h"
#include "planner/diag_encode.h"
#include "daemon/verify.h"
#include "engines/cuda/cupti_trace.h"
#include "planner/split.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"

#define SCRATCH_O 1
#define SCRATCH_LSE 2
#define SCRATCH_DIAG 3
#define SCRATCH_Q 4
#define SCRATCH_K 5
#define SCRATCH_V 6

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

uint64_t attnd_plan_bytes(const attnd_plan *p)
{
    uint64_t n = sizeof *p + attn_manifest_heap_bytes(&p->m);
    n += p->sel != NULL ? sizeof *p->sel : 0;
    if (p->eplan == NULL)
        return n;
    /* the engine plan: its struct, split arrays and the private data the
     * engine says it holds (a CPU plan's mask program and row maps, a CUDA
     * plan's device metadata) */
    const attn_split_plan *sp = &p->eplan->split;
    n += sizeof *p->eplan + p->eplan->priv_bytes;
    n += sp->num_splits ? sizeof(uint32_t) * (uint64_t)sp->num_requests : 0;
    n += sp->slot_indptr ? sizeof(uint32_t) * ((uint64_t)sp->num_requests + 1) : 0;
    n += sp->items ? sizeof *sp->items * (uint64_t)sp->num_items : 0;
    return n;
}

void attnd_plan_free(void *obj)
{
    attnd_plan *p = obj;
    if (p == NULL)
        return;
    /* the engine plan borrows the manifest and geometry: it goes first */
    attn_engine_plan_release(p->eplan);
    attn_manifest_free(&p->m);
    attn_key_fini(&p->call_key);
    free(p->sel);
    free(p);
}

/* ---- the diagnostic --------------------------------------------------------- */

/* The dispatch diagnostic (PROTOCOL.md "diag", planner/diag.h): call key,
 * candidates and selection (from plan time), schedule, workspace by field,
 * plan key and cache event, kernels as the engine reports them, timing and
 * the evidence level.  Packed with protocol/diag.h into scratch. */
/* Kernels a tracer observed for one run (seed 0x0BF), when it ran. */
typedef struct traced_kernels {
    uint32_t n;
    attn_diag_kernel k[ATTN_KERNELS_MAX];
} traced_kernels;

static int encode_diag(attn_server *s, const attnd_plan *p, uint64_t plan_id,
                       const attn_exec_report *rep, double exec_us, const attn_verify_result *vr,
                       const traced_kernels *tk, void **scratch, attn_bytes *out)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    attn_diag *dg = calloc(1, sizeof *dg);
    int rc;

    if (dg == NULL)
        return ATTN_E_NOMEM;
    if ((rc = attn_diag_init(dg, &p->call_key)) != 0) {
        free(dg);
        return rc;
    }
    attn_diag_set_selection(dg, p->sel);
    /* what the engine plans to run, not what the policy asked (seed 0x08G) */
    attn_diag_set_schedule(dg, &p->eplan->split, p->eplan->schedule, p->m.policy.state_abi);
    attn_diag_set_schedule_choice(dg, p->m.policy.schedule, p->eplan->schedule_why);
    attn_diag_set_tiles(dg, &p->eplan->tiles);
    attn_diag_set_requests(dg, p->m.requests, p->m.num_requests);
    /* the ledger the engine carves */
    const attn_ledger *led = &p->eplan->ledger;
    for (uint32_t i = 0; i < led->num_fields; i++)
        attn_diag_add_workspace_field(dg, led->fields[i].name, led->fields[i].dtype,
                                      led->fields[i].elems, led->fields[i].bytes);
    attn_diag_set_plan(dg, p->plan_key_sha, &p->decision, plan_id);
    if (rep != NULL) {
        /* seed 0x0BF: a host engine's record of the functions it executed is an
         * observation; a device engine only declares until a tracer saw it.
         * The timing is the engine's, with its method and scope; the daemon's
         * own window is reported apart, by the host clock. */
        attn_diag_set_report(dg, rep, attn_kernel_source_for(p->engine->ops->platform, rep, false));
        attn_diag_set_host_timing(dg, exec_us, "daemon run: shape checks, locks, engine run");
    } else {
        attn_diag_set_timing(dg, p->plan_us, "host_clock", "validate, select, plan, cache");
    }
    if (vr != NULL && vr->done)
        attn_diag_set_verify(dg, vr);
    if (tk != NULL && tk->n > 0)
        attn_diag_set_traced(dg, tk->k, tk->n, "cupti activity");
    attn_diag_finish(dg, s->artifact_sha[0] ? s->artifact_sha : NULL, s->source_identified);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    rc = attn_diag_pack(dg, &pk);
    free(dg);
    if (rc != 0) {
        msgpack_sbuffer_destroy(&sb);
        return rc;
    }
    scratch[SCRATCH_DIAG] = sb.data;
    out->data = sb.data;
    out->len = sb.size;
    return 0;
}

/* ---- plan ------------------------------------------------------------------- */

/* Validate, select and split one manifest (moved out of `req` on success);
 * inserts the plan into the cache and returns it referenced in *out. */
static int plan_core(attn_server *s, attn_request *req, attnd_plan **out, uint64_t *id,
                     attn_error_detail *err)
{
    double t0 = now_us();
    attn_manifest *m = &req->manifest;
    attnd_pool *pool = NULL;
    attn_selection *sel = NULL;
    attnd_plan *p = NULL;
    uint64_t bytes;
    attn_key pk;
    attn_key_env env;
    int rc;

    attn_key_init(&pk);
    if ((rc = attnd_pool_acquire(s->pools, m->pool, "pool", &pool, err)) != 0)
        return rc;
    /* seed 0x08I: the complete mutation contract is checked before anything */
    if ((rc = attn_manifest_validate(m, &pool->geom, err)) != 0)
        goto out;
    p = calloc(1, sizeof *p);
    if (p != NULL) {
        attn_key_init(&p->call_key);
        p->sel = sel = calloc(1, sizeof *sel);
    }
    if (p == NULL || sel == NULL) {
        rc = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
        goto out;
    }
    if ((rc = attn_registry_select(&s->registry, m, &pool->geom, sel, err)) != 0)
        goto out;
    p->engine = sel->engine;
    p->geom = pool->geom;
    p->pool_generation = pool->generation;
    snprintf(p->pool, sizeof p->pool, "%s", pool->geom.name);
    p->m = *m; /* move the arrays: the request no longer owns them */
    memset(m, 0, sizeof *m);
    /* the engine plans once: splits, ledger, key environment, device metadata */
    if ((rc = attn_engine_plan_new(p->engine, &p->m, &p->geom, &p->eplan, err)) != 0)
        goto out;
    /* the partial states a run carves grow with rows x heads x splits: a
     * small request must not make an engine instance allocate (and keep) an
     * unbounded workspace */
    if (p->eplan->ledger.total_bytes > s->cfg.max_workspace) {
        bool asked = p->m.policy.split_policy == ATTN_SPLIT_FIXED || p->m.policy.splits > 0;
        rc = attn_error_set(err, ATTN_E_TOO_LARGE, asked ? "policy.splits" : "requests",
                            "the plan's workspace is %llu bytes (%u splits), over "
                            "--max-workspace %llu",
                            (unsigned long long)p->eplan->ledger.total_bytes,
                            p->eplan->split.num_items, (unsigned long long)s->cfg.max_workspace);
        goto out;
    }
    attn_selection_note_plan(sel, &p->m.policy, &p->eplan->split);
    env = attn_engine_key_env(&p->eplan->env);
    if ((rc = attn_call_key_build(&p->m, &p->geom, &env, &p->call_key)) != 0 ||
        (rc = attn_plan_key_build(&p->call_key, &pk)) != 0 ||
        (rc = attn_key_sha256(&pk, p->plan_key_sha)) != 0) {
        attn_error_set(err, rc, "", "cannot build the call key");
        goto out;
    }
    p->plan_us = now_us() - t0;
    bytes = attnd_plan_bytes(p);
    rc = attnd_plan_cache_insert(s->plans, p->pool, &pk, p, bytes, id, &p->decision);
    if (rc != 0) {
        p = NULL; /* the cache freed it */
        attn_error_set(err, rc, "requests",
                       rc == ATTN_E_TOO_LARGE ? "the plan holds %llu bytes, over --plan-cache-bytes"
                       : rc == ATTN_E_BUSY
                           ? "the plan (%llu bytes) does not fit --plan-cache-bytes beside the "
                             "plans runs hold now; retry"
                           : "cannot cache the plan (%llu bytes)",
                       (unsigned long long)bytes);
        goto out;
    }
    /* the insert returned it held for the caller (attend runs it at once) */
    *out = p;
    p = NULL;
out:
    if (rc != 0 && p != NULL) {
        /* give the arrays back so the request frees them */
        if (p->m.requests != NULL && m->requests == NULL) {
            *m = p->m;
            memset(&p->m, 0, sizeof p->m);
        }
        attnd_plan_free(p);
    }
    attn_key_fini(&pk);
    attnd_pool_release(s->pools, pool);
    return rc;
}

static void fill_plan_reply(const attnd_plan *p, uint64_t id, attn_reply *rep)
{
    rep->plan_id = id;
    snprintf(rep->plan_key, sizeof rep->plan_key, "%s", p->plan_key_sha);
    snprintf(rep->pool, sizeof rep->pool, "%s", p->pool);
}

int attnd_exec_plan(attn_server *s, attn_request *req, attn_reply *rep, void **scratch,
                    attn_error_detail *err)
{
    attnd_plan *p = NULL;
    uint64_t id = 0;
    int rc = plan_core(s, req, &p, &id, err);
    if (rc != 0)
        return rc;
    fill_plan_reply(p, id, rep);
    rc = encode_diag(s, p, id, NULL, 0, NULL, NULL, scratch, &rep->diag);
    attnd_plan_cache_release(s->plans, p);
    return rc;
}

/* ---- run -------------------------------------------------------------------- */

/* A tensor borrowed from the frame may sit at any byte offset; engines read
 * it as float or uint16, so copy it to aligned memory when it is not. */
static int aligned_view(attn_bytes *t, void **scratch, int slot, attn_error_detail *err,
                        const char *field)
{
    void *c;
    if (t->data == NULL || ((uintptr_t)t->data & 7u) == 0)
        return 0;
    c = malloc(t->len + 1);
    if (c == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, field, "cannot copy %llu bytes",
                              (unsigned long long)t->len);
    memcpy(c, t->data, t->len);
    scratch[slot] = c;
    t->data = c;
    return 0;
}

/* Copy one layer of a device pool to host memory, laid out as the pool's
 * own store, for the fp64 reference.  Caller holds the pool lock. */
static int layer_to_host(attnd_pool *pool, uint32_t layer, void **k, void **v,
                         attn_error_detail *err)
{
    uint32_t n = pool->geom.num_pages;
    int32_t *pages = malloc((size_t)n * sizeof *pages);
    *k = malloc((size_t)n * pool->page_bytes_k);
    *v = malloc((size_t)n * pool->page_bytes_v);
    int rc = ATTN_E_NOMEM;
    if (pages != NULL && *k != NULL && *v != NULL) {
        for (uint32_t i = 0; i < n; i++)
            pages[i] = (int32_t)i;
        rc = attnd_pool_read_held(pool, layer, pages, n, *k, *v, err);
    }
    free(pages);
    if (rc != 0) {
        free(*k);
        free(*v);
        *k = *v = NULL;
    }
    return rc;
}

/* Point the run's referenced tensors into their buffers (held in `h`), after
 * the shape check: ranges inside buffers of connection `conn`, and no output
 * overlapping an input or the other output (the engine reads inputs while it
 * writes outputs).  *o_dst / *lse_dst get where O / LSE go (NULL: the reply). */
static int resolve_refs(attn_server *s, uint32_t conn, attn_run_args *ra, attnd_buffer_hold *h,
                        void **o_dst, void **lse_dst, attn_error_detail *err)
{
    struct {
        const char *field;
        const attn_tensor_ref *ref;
        attn_bytes *t;
    } in[3] = {{"q", &ra->q_ref, &ra->q},
               {"k_new", &ra->k_new_ref, &ra->k_new},
               {"v_new", &ra->v_new_ref, &ra->v_new}};
    void *ptr;
    int rc;
    *o_dst = *lse_dst = NULL;
    for (int i = 0; i < 3; i++) {
        if (in[i].ref->buf == 0)
            continue;
        if ((rc = attnd_buffers_resolve(s->buffers, conn, in[i].ref, in[i].field, h, &ptr, err)) !=
            0)
            return rc;
        in[i].t->data = ptr;
        in[i].t->len = in[i].ref->bytes;
    }
    if (ra->o_ref.buf != 0 &&
        (rc = attnd_buffers_resolve(s->buffers, conn, &ra->o_ref, "o", h, o_dst, err)) != 0)
        return rc;
    if (ra->lse_ref.buf != 0 &&
        (rc = attnd_buffers_resolve(s->buffers, conn, &ra->lse_ref, "lse", h, lse_dst, err)) != 0)
        return rc;
    for (int i = 0; i < 3; i++) {
        if (attnd_refs_overlap(&ra->o_ref, in[i].ref))
            return attn_error_set(err, ATTN_E_BUFFER_RANGE, "o", "o overlaps %s in buffer %llu",
                                  in[i].field, (unsigned long long)ra->o_ref.buf);
        if (attnd_refs_overlap(&ra->lse_ref, in[i].ref))
            return attn_error_set(err, ATTN_E_BUFFER_RANGE, "lse", "lse overlaps %s in buffer %llu",
                                  in[i].field, (unsigned long long)ra->lse_ref.buf);
    }
    if (attnd_refs_overlap(&ra->o_ref, &ra->lse_ref))
        return attn_error_set(err, ATTN_E_BUFFER_RANGE, "lse", "lse overlaps o in buffer %llu",
                              (unsigned long long)ra->lse_ref.buf);
    return 0;
}

static int run_core(attn_server *s, uint32_t conn, attnd_plan *p, uint64_t plan_id,
                    attn_run_args *ra, attn_reply *rep, void **scratch, attn_error_detail *err)
{
    attnd_buffer_hold hold = {0};
    void *o_dst = NULL, *lse_dst = NULL;
    double t0 = now_us();
    attnd_pool *pool = NULL;
    attn_run_io a;
    attn_error_detail eerr;
    attn_exec_report report;
    attn_verify_result vr;
    traced_kernels *tk = NULL;
    int tracing = 0, exclusive;
    double exec_us, engine_t0;
    uint64_t total_q, o_bytes, lse_bytes, inline_bytes;
    void *o_direct = NULL, *lse_direct = NULL;
    size_t esz = p->m.q_dtype == ATTN_FP32 ? 4 : 2;
    int rc;

    if ((rc = attnd_pool_acquire(s->pools, p->pool, "plan_id", &pool, err)) != 0)
        return attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id", "the plan's pool '%s' was dropped",
                              p->pool);
    if (pool->generation != p->pool_generation) {
        rc = attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id",
                            "pool '%s' was dropped and created again since this plan", p->pool);
        goto out;
    }
    if (ra->layer >= pool->geom.layers) {
        rc = attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u outside [0, %u)", ra->layer,
                            pool->geom.layers);
        goto out;
    }
    if ((rc = attn_run_check_shapes(ra, &p->m, &pool->geom, err)) != 0 ||
        (rc = resolve_refs(s, conn, ra, &hold, &o_dst, &lse_dst, err)) != 0)
        goto out;
    if ((rc = aligned_view(&ra->q, scratch, SCRATCH_Q, err, "q")) != 0 ||
        (rc = aligned_view(&ra->k_new, scratch, SCRATCH_K, err, "k_new")) != 0 ||
        (rc = aligned_view(&ra->v_new, scratch, SCRATCH_V, err, "v_new")) != 0)
        goto out;
    total_q = (uint64_t)attn_manifest_total_q(&p->m);
    o_bytes = total_q * p->m.num_qo_heads * pool->geom.head_dim_vo * esz;
    lse_bytes = total_q * p->m.num_qo_heads * sizeof(float);
    /* nothing half-applied: a reply that cannot be sent is refused before the
     * engine commits rows (the encoder's backstop comes after the commit);
     * the cap counts the outputs that travel inline, not those in buffers */
    inline_bytes =
        (o_dst == NULL ? o_bytes : 0) + (ra->return_lse && lse_dst == NULL ? lse_bytes : 0);
    if (inline_bytes > atomic_load(&s->max_reply)) {
        rc = attn_error_set(err, ATTN_E_TOO_LARGE, o_dst == NULL ? "q" : "lse",
                            "the inline outputs of %llu query rows make %llu bytes, over "
                            "--max-reply %llu (pass o/lse as buffer references); "
                            "the pool is unchanged",
                            (unsigned long long)total_q, (unsigned long long)inline_bytes,
                            (unsigned long long)atomic_load(&s->max_reply));
        goto out;
    }
    /* an output goes straight into its buffer when aligned for its elements
     * (engines store float/uint16), else through scratch and one copy */
    if (o_dst != NULL && ((uintptr_t)o_dst & (esz - 1)) == 0)
        o_direct = o_dst;
    if (lse_dst != NULL && ((uintptr_t)lse_dst & (sizeof(float) - 1)) == 0)
        lse_direct = lse_dst;
    if (o_direct == NULL)
        scratch[SCRATCH_O] = malloc(o_bytes + 1);
    if (ra->return_lse && lse_direct == NULL)
        scratch[SCRATCH_LSE] = malloc(lse_bytes + 1);
    if ((o_direct == NULL && scratch[SCRATCH_O] == NULL) ||
        (ra->return_lse && lse_direct == NULL && scratch[SCRATCH_LSE] == NULL)) {
        rc = attn_error_set(err, ATTN_E_NOMEM, "q", "cannot allocate the output");
        goto out;
    }
    memset(&a, 0, sizeof a);
    memset(&report, 0, sizeof report);
    memset(&eerr, 0, sizeof eerr);
    a.pool = &pool->view;
    a.layer = ra->layer;
    a.q = ra->q.data;
    a.k_new = ra->k_new.data;
    a.v_new = ra->v_new.data;
    a.o = o_direct != NULL ? o_direct : scratch[SCRATCH_O];
    a.lse = lse_direct != NULL ? lse_direct : scratch[SCRATCH_LSE];
    a.commit = true;
    memset(&vr, 0, sizeof vr);
    /* seed 0x0BF: a CUPTI window is device-wide, so a traced device run
     * runs alone (every other run holds the trace lock shared) */
    exclusive = ra->trace && p->engine->ops->platform == ATTN_PLATFORM_CUDA;
    if (exclusive) {
        pthread_rwlock_wrlock(&s->trace_lock);
        tk = calloc(1, sizeof *tk);
        tracing = tk != NULL && attn_cupti_begin(NULL) == 0;
    } else {
        pthread_rwlock_rdlock(&s->trace_lock);
    }
    /* one writer per pool: the staged rows commit while nobody reads them */
    pthread_mutex_lock(&pool->lock);
    engine_t0 = now_us();
    rc = attn_engine_run(p->engine, p->eplan, &a, &report, &eerr);
    exec_us = now_us() - t0;
    attnd_metrics_note_engine(&s->metrics, p->engine->ops->platform,
                              (uint64_t)((now_us() - engine_t0) * 1e3));
    /* the engine's run copied O back to the host: the device is synchronised */
    if (tracing && attn_cupti_end(tk->k, ATTN_KERNELS_MAX, &tk->n, NULL, NULL) != 0)
        tk->n = 0;
    if (rc == 0 && ra->verify) {
        /* seed 0x0BG: recompute in fp64 with the reference and compare at the
         * declared tolerance; under the pool lock, the layer as committed
         * (a device layer through a host copy of it) */
        attn_verify_call vc;
        attn_error_detail verr;
        void *host_k = NULL, *host_v = NULL;
        memset(&vc, 0, sizeof vc);
        vc.m = &p->m;
        vc.g = &pool->geom;
        vc.k_store = pool->layer_k[ra->layer];
        vc.v_store = pool->layer_v[ra->layer];
        if (pool->view.platform != ATTN_PLATFORM_CPU &&
            layer_to_host(pool, ra->layer, &host_k, &host_v, &verr) == 0) {
            vc.k_store = host_k;
            vc.v_store = host_v;
        }
        vc.q = ra->q.data;
        vc.k_new = ra->k_new.data;
        vc.v_new = ra->v_new.data;
        vc.o = a.o;
        vc.lse = a.lse;
        vc.committed = true;
        if ((pool->view.platform != ATTN_PLATFORM_CPU && host_k == NULL) ||
            attn_verify_run(&vc, &vr, &verr) != 0)
            memset(&vr, 0, sizeof vr);
        free(host_k);
        free(host_v);
    }
    pthread_mutex_unlock(&pool->lock);
    pthread_rwlock_unlock(&s->trace_lock);
    if (rc != 0) {
        atomic_fetch_add(&s->engine_failures, 1);
        if (rc == ATTN_E_POOL_UNRESTORED)
            attn_error_set(err, rc, eerr.field,
                           "engine %s failed and could not restore the pool: "
                           "the rows of this run may be partly written (%.120s)",
                           p->engine->ops->name, eerr.message);
        else
            attn_error_set(err, rc, eerr.field,
                           "engine %s on %s failed (%.150s); the pool is unchanged",
                           p->engine->ops->name, p->engine->where,
                           eerr.message[0] ? eerr.message : attn_err_message(rc));
        goto out;
    }
    rep->o_dtype = p->m.q_dtype;
    rep->has_lse = ra->return_lse;
    if (o_dst != NULL) {
        /* O is in the client's buffer: the reply says where, not what */
        if (o_direct == NULL)
            memcpy(o_dst, a.o, o_bytes);
        rep->o_ref = ra->o_ref;
    } else {
        rep->o.data = a.o;
        rep->o.len = o_bytes;
    }
    if (lse_dst != NULL) {
        if (lse_direct == NULL)
            memcpy(lse_dst, a.lse, lse_bytes);
        rep->lse_ref = ra->lse_ref;
    } else if (ra->return_lse) {
        rep->lse.data = a.lse;
        rep->lse.len = lse_bytes;
    }
    rc = encode_diag(s, p, plan_id, &report, exec_us, &vr, tk, scratch, &rep->diag);
out:
    free(tk);
    attnd_buffer_hold_release(s->buffers, &hold);
    attnd_pool_release(s->pools, pool);
    return rc;
}

int attnd_exec_run(attn_server *s, uint32_t conn, attn_request *req, attn_reply *rep,
                   void **scratch, attn_error_detail *err)
{
    void *obj = NULL;
    attnd_plan *p;
    int rc = attnd_plan_cache_acquire(s->plans, req->run.plan_id, &obj, err);
    if (rc != 0)
        return rc;
    p = obj;
    rc = run_core(s, conn, p, req->run.plan_id, &req->run, rep, scratch, err);
    if (rc == 0) {
        rep->plan_id = req->run.plan_id;
        snprintf(rep->plan_key, sizeof rep->plan_key, "%s", p->plan_key_sha);
    }
    attnd_plan_cache_release(s->plans, p);
    return rc;
}

int attnd_exec_attend(attn_server *s, uint32_t conn, attn_request *req, attn_reply *rep,
                      void **scratch, attn_error_detail *err)
{
    attnd_plan *p = NULL;
    uint64_t id = 0;
    int rc = plan_core(s, req, &p, &id, err);
    if (rc != 0)
        return rc;
    rc = run_core(s, conn, p, id, &req->run, rep, scratch, err);
    if (rc == 0)
        fill_plan_reply(p, id, rep);
    attnd_plan_cache_release(s->plans, p);
    return rc;
}
