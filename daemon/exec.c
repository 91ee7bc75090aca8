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
#include "daemon/handoff.h"
#include "daemon/verify.h"
#include "engines/cuda/cupti_trace.h"
#include "engines/cuda/ipc.h"
#include "planner/split.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"

#define SCRATCH_O 1
#define SCRATCH_LSE 2
#define SCRATCH_DIAG 3
#define SCRATCH_Q 4
#define SCRATCH_K 5
#define SCRATCH_V 6

#define ATTND_NO_HANDOFF (-2) /* encode_diag: the run has no semaphores */

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
                       const traced_kernels *tk, void **scratch, attn_bytes *out,
                       uint64_t async_seq, int handoff_device)
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
    if (async_seq != 0)
        attn_diag_set_async(dg, async_seq);
    if (handoff_device != ATTND_NO_HANDOFF) {
        /* the sentence with the ping-pong measured on the run's device */
        char note[ATTND_HANDOFF_NOTE];
        double us = 0;
        _Static_assert(sizeof dg->handoff_note >= sizeof note, "the diag holds a whole sentence");
        attnd_handoff_describe(&s->handoff, handoff_device, note, sizeof note, &us);
        attn_diag_set_handoff(dg, s->mps, note);
        attn_diag_set_handoff_measured(dg, us);
    }
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
    rc = encode_diag(s, p, id, NULL, 0, NULL, NULL, scratch, &rep->diag, 0, ATTND_NO_HANDOFF);
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

/* Everything one run needs once validated (run_prepare), what run_execute
 * reads and run_reply reports.  A synchronous run keeps it on the stack; an
 * asynchronous one is this job on the async queue and owns its memory
 * (copies of inline inputs, output staging), its plan and pool references
 * and its buffer holds until the run is done. */
typedef struct run_ctx {
    attnd_async_job job; /* first: the queue's view of it */
    attn_server *s;
    uint32_t conn;
    attnd_plan *p; /* referenced in the plan cache (async: the ctx's reference) */
    uint64_t plan_id;
    attnd_pool *pool;
    attnd_buffer_hold hold;
    attn_run_io a;
    bool is_async, trace, verify, return_lse;
    attn_tensor_ref o_ref, lse_ref;
    void *o_dst, *lse_dst; /* O / LSE into a buffer (host or device); NULL: the reply */
    uint64_t o_bytes, lse_bytes;
    const attn_run_args *ra; /* synchronous: the request (verify reads its inputs) */
    /* semaphores in shm buffers are waited and signalled on the host;
     * those in cuda_ipc buffers by the engine's stream (a.wait_dev) */
    uint64_t *wait_host, *sig_host;
    uint64_t wait_value, sig_value;
    attn_cuda_ipc *sem_ipc; /* releases a device wait when the connection closes */
    attnd_wait dw;          /* a device wait in progress, registered with the async queue */
    void *owned[6];         /* memory the ctx frees */
    attn_exec_report report;
    attn_verify_result vr;
    traced_kernels *tk;
    double exec_us;
} run_ctx;

/* Memory the ctx owns: `bytes` (+1, so 0 bytes still allocate). */
static void *ctx_alloc(run_ctx *c, uint64_t bytes)
{
    for (size_t i = 0; i < sizeof c->owned / sizeof c->owned[0]; i++)
        if (c->owned[i] == NULL)
            return c->owned[i] = malloc(bytes + 1);
    return NULL;
}

/* Resolve one reference for tensor or semaphore `field`: the pointer, and
 * whether it is device memory, refused unless the run's engine runs on the
 * buffer's device (a host engine cannot read a cuda_ipc buffer). */
static int resolve_one(run_ctx *c, const attn_tensor_ref *ref, const char *field, void **ptr,
                       bool *on_device, attn_error_detail *err)
{
    attn_buffer_kind kind = ATTN_BUFFER_SHM;
    int device = -1, rc;
    char f[48];
    if ((rc = attnd_buffers_resolve(c->s->buffers, c->conn, ref, field, &c->hold, ptr, &kind,
                                    &device, err)) != 0)
        return rc;
    *on_device = kind == ATTN_BUFFER_CUDA_IPC;
    if (!*on_device)
        return 0;
    snprintf(f, sizeof f, "%s.buf", field);
    if (c->p->engine->ops->platform != ATTN_PLATFORM_CUDA)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, f,
                              "%s is in cuda_ipc buffer %llu but the plan runs on engine %s (%s), "
                              "which reads host memory; use a shm buffer or an inline tensor",
                              field, (unsigned long long)ref->buf, c->p->engine->ops->name,
                              c->p->engine->where);
    if (device != c->pool->view.device)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, f,
                              "%s is in a buffer on cuda:%d but the pool is on %s", field, device,
                              c->p->engine->where);
    return 0;
}

/* Point the run's referenced tensors into their buffers (held in c->hold),
 * after the shape check: ranges inside buffers of the connection, device
 * buffers only for a CUDA engine on their device, device outputs aligned
 * for their elements, and no output overlapping an input or the other
 * output (the engine reads inputs while it writes outputs). */
static int resolve_refs(run_ctx *c, attn_run_args *ra, size_t esz, attn_error_detail *err)
{
    struct {
        const char *field;
        const attn_tensor_ref *ref;
        attn_bytes *t;
    } in[3] = {{"q", &ra->q_ref, &ra->q},
               {"k_new", &ra->k_new_ref, &ra->k_new},
               {"v_new", &ra->v_new_ref, &ra->v_new}};
    void *ptr;
    bool dev;
    int rc;
    for (int i = 0; i < 3; i++) {
        if (in[i].ref->buf == 0)
            continue;
        if ((rc = resolve_one(c, in[i].ref, in[i].field, &ptr, &dev, err)) != 0)
            return rc;
        in[i].t->data = ptr;
        in[i].t->len = in[i].ref->bytes;
        if (dev)
            c->a.on_device |= 1u << (ATTN_IO_Q + i);
    }
    if (ra->o_ref.buf != 0) {
        if ((rc = resolve_one(c, &ra->o_ref, "o", &c->o_dst, &dev, err)) != 0)
            return rc;
        if (dev && ((uintptr_t)c->o_dst & (esz - 1)) != 0)
            return attn_error_set(err, ATTN_E_BUFFER_RANGE, "o.offset",
                                  "o in a cuda_ipc buffer must be aligned to its %zu-byte elements",
                                  esz);
        if (dev)
            c->a.on_device |= 1u << ATTN_IO_O;
    }
    if (ra->lse_ref.buf != 0) {
        if ((rc = resolve_one(c, &ra->lse_ref, "lse", &c->lse_dst, &dev, err)) != 0)
            return rc;
        if (dev && ((uintptr_t)c->lse_dst & 3u) != 0)
            return attn_error_set(err, ATTN_E_BUFFER_RANGE, "lse.offset",
                                  "lse in a cuda_ipc buffer must be aligned to 4 bytes");
        if (dev)
            c->a.on_device |= 1u << ATTN_IO_LSE;
    }
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

/* The run's semaphores: 8-aligned uint64 words of the connection's buffers;
 * shm words are handled on the host, cuda_ipc words by the engine's stream. */
static int resolve_sems(run_ctx *c, const attn_run_args *ra, attn_error_detail *err)
{
    const attn_sem_ref *sem[2] = {&ra->wait, &ra->sig};
    const char *field[2] = {"wait", "signal"};
    for (int i = 0; i < 2; i++) {
        attn_tensor_ref ref = {sem[i]->buf, sem[i]->offset, sizeof(uint64_t)};
        void *ptr;
        bool dev;
        int rc;
        char f[24];
        if (ref.buf == 0)
            continue;
        snprintf(f, sizeof f, "%s.offset", field[i]);
        if ((rc = resolve_one(c, &ref, field[i], &ptr, &dev, err)) != 0) {
            /* the word's 8 bytes are implied: a range error is its offset's */
            if (rc == ATTN_E_BUFFER_RANGE)
                snprintf(err->field, sizeof err->field, "%s", f);
            return rc;
        }
        if (((uintptr_t)ptr & 7u) != 0) {
            return attn_error_set(err, ATTN_E_BUFFER_RANGE, f,
                                  "a semaphore is a uint64 at an 8-aligned offset, not %llu",
                                  (unsigned long long)ref.offset);
        }
        if (i == 0 && dev) {
            c->a.wait_dev = ptr;
            c->a.wait_value = sem[i]->value;
        } else if (i == 0) {
            c->wait_host = ptr;
            c->wait_value = sem[i]->value;
        } else if (dev) {
            c->a.signal_dev = ptr;
            c->a.signal_value = sem[i]->value;
        } else {
            c->sig_host = ptr;
            c->sig_value = sem[i]->value;
        }
    }
    if (c->a.wait_dev != NULL) {
        /* the connection's close releases the wait from the control stream */
        char why[160];
        c->sem_ipc = attnd_server_ipc(c->s, c->pool->view.device, why, sizeof why);
        if (c->sem_ipc == NULL)
            return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "wait.buf",
                                  "device semaphores need the CUDA engine's stream memory "
                                  "operations: %s",
                                  why);
    }
    if (c->a.signal_dev != NULL && c->p->engine->ops->signal == NULL)
        /* a failed run's signal is written through the engine (signal_failed_run) */
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "signal.buf",
                              "engine %s writes no device semaphores", c->p->engine->ops->name);
    return 0;
}

/* A kv_written run (its new rows already in the pool, written by the
 * client through the export): only on an exported pool whose export is
 * still live, and not with verify, whose reference reads the rows the run
 * was sent.  The shape check already refused k_new / v_new. */
static int check_kv_written(const attnd_pool *pool, const attn_run_args *ra, attn_error_detail *err)
{
    if (!pool->exported)
        return attn_error_set(err, ATTN_E_SEMANTIC, "kv_written",
                              "pool '%s' is not exported, so nobody but attnd writes its rows: "
                              "create it with \"export\": true, or send k_new and v_new",
                              pool->geom.name);
    if (!atomic_load(&pool->export_live))
        return attn_error_set(err, ATTN_E_SEMANTIC, "kv_written",
                              "the connection that exported pool '%s' closed, which ended the "
                              "export; send k_new and v_new",
                              pool->geom.name);
    if (ra->verify)
        return attn_error_set(err, ATTN_E_SEMANTIC, "verify",
                              "verify recomputes from the rows a run sends; a kv_written run "
                              "sends none");
    return 0;
}

/* Validate one run completely and bind what the engine reads into c (its
 * pool acquired; nothing run yet).  Every refusal is reported before
 * anything is enqueued, and leaves the pool and the outputs untouched. */
static int run_prepare(run_ctx *c, attn_run_args *ra, void **scratch, attn_error_detail *err)
{
    attnd_plan *p = c->p;
    attn_server *s = c->s;
    size_t esz = p->m.q_dtype == ATTN_FP32 ? 4 : 2;
    uint64_t total_q, inline_bytes;
    void *o_direct = NULL, *lse_direct = NULL;
    int rc;

    if ((rc = attnd_pool_acquire(s->pools, p->pool, "plan_id", &c->pool, err)) != 0)
        return attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id", "the plan's pool '%s' was dropped",
                              p->pool);
    attnd_pool *pool = c->pool;
    if (pool->generation != p->pool_generation)
        return attn_error_set(err, ATTN_E_STALE_PLAN, "plan_id",
                              "pool '%s' was dropped and created again since this plan", p->pool);
    if ((rc = attnd_pool_check_serving(pool, err)) != 0)
        return rc;
    if (ra->layer >= pool->geom.layers)
        return attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u outside [0, %u)", ra->layer,
                              pool->geom.layers);
    if ((rc = attn_run_check_shapes(ra, &p->m, &pool->geom, err)) != 0 ||
        (ra->kv_written && (rc = check_kv_written(pool, ra, err)) != 0))
        return rc;
    if (ra->async) {
        /* its reply leaves before O exists, so O (and LSE) go to buffers */
        if (ra->o_ref.buf == 0)
            return attn_error_set(err, ATTN_E_MISSING, "o",
                                  "an asynchronous run writes O into a registered buffer: give o "
                                  "as {buf, offset, bytes}");
        if (ra->return_lse && ra->lse_ref.buf == 0)
            return attn_error_set(err, ATTN_E_MISSING, "lse",
                                  "an asynchronous run with return_lse writes LSE into a "
                                  "registered buffer: give lse as {buf, offset, bytes}");
        if (ra->trace || ra->verify)
            return attn_error_set(err, ATTN_E_SEMANTIC, ra->trace ? "trace" : "verify",
                                  "%s needs a synchronous run (its result is in the reply)",
                                  ra->trace ? "trace" : "verify");
    }
    if ((rc = resolve_refs(c, ra, esz, err)) != 0 || (rc = resolve_sems(c, ra, err)) != 0)
        return rc;
    if (ra->verify && c->a.on_device != 0)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "verify",
                              "verify recomputes on the host from the run's inputs and outputs; "
                              "it cannot read cuda_ipc buffers");
    if (ra->async) {
        /* the frame is freed once the reply is sent: own the inline inputs */
        attn_bytes *in[3] = {&ra->q, &ra->k_new, &ra->v_new};
        for (int i = 0; i < 3; i++) {
            if ((c->a.on_device >> i) & 1u || in[i]->data == NULL)
                continue;
            void *copy = ctx_alloc(c, in[i]->len);
            if (copy == NULL)
                return attn_error_set(err, ATTN_E_NOMEM,
                                      i == 0   ? "q"
                                      : i == 1 ? "k_new"
                                               : "v_new",
                                      "cannot copy the input of an asynchronous run");
            memcpy(copy, in[i]->data, in[i]->len);
            in[i]->data = copy;
        }
    } else if ((rc = aligned_view(&ra->q, scratch, SCRATCH_Q, err, "q")) != 0 ||
               (rc = aligned_view(&ra->k_new, scratch, SCRATCH_K, err, "k_new")) != 0 ||
               (rc = aligned_view(&ra->v_new, scratch, SCRATCH_V, err, "v_new")) != 0) {
        return rc;
    }
    total_q = (uint64_t)attn_manifest_total_q(&p->m);
    c->o_bytes = total_q * p->m.num_qo_heads * pool->geom.head_dim_vo * esz;
    c->lse_bytes = total_q * p->m.num_qo_heads * sizeof(float);
    /* nothing half-applied: a reply that cannot be sent is refused before the
     * engine commits rows (the encoder's backstop comes after the commit);
     * the cap counts the outputs that travel inline, not those in buffers */
    inline_bytes = (c->o_dst == NULL ? c->o_bytes : 0) +
                   (ra->return_lse && c->lse_dst == NULL ? c->lse_bytes : 0);
    if (inline_bytes > atomic_load(&s->max_reply))
        return attn_error_set(err, ATTN_E_TOO_LARGE, c->o_dst == NULL ? "q" : "lse",
                              "the inline outputs of %llu query rows make %llu bytes, over "
                              "--max-reply %llu (pass o/lse as buffer references); "
                              "the pool is unchanged",
                              (unsigned long long)total_q, (unsigned long long)inline_bytes,
                              (unsigned long long)atomic_load(&s->max_reply));
    /* an output goes straight into its buffer when aligned for its elements
     * (engines store float/uint16; a device output is aligned by now), else
     * through staging and one copy */
    if (c->o_dst != NULL && ((uintptr_t)c->o_dst & (esz - 1)) == 0)
        o_direct = c->o_dst;
    if (c->lse_dst != NULL && ((uintptr_t)c->lse_dst & (sizeof(float) - 1)) == 0)
        lse_direct = c->lse_dst;
    if (o_direct == NULL)
        o_direct =
            c->is_async ? ctx_alloc(c, c->o_bytes) : (scratch[SCRATCH_O] = malloc(c->o_bytes + 1));
    if (ra->return_lse && lse_direct == NULL)
        lse_direct = c->is_async ? ctx_alloc(c, c->lse_bytes)
                                 : (scratch[SCRATCH_LSE] = malloc(c->lse_bytes + 1));
    if (o_direct == NULL || (ra->return_lse && lse_direct == NULL))
        return attn_error_set(err, ATTN_E_NOMEM, "q", "cannot allocate the output");
    c->a.pool = &pool->view;
    c->a.layer = ra->layer;
    c->a.q = ra->q.data;
    c->a.k_new = ra->k_new.data;
    c->a.v_new = ra->v_new.data;
    c->a.o = o_direct;
    c->a.lse = lse_direct;
    c->a.commit = true;
    c->a.kv_written = ra->kv_written;
    c->trace = ra->trace;
    c->verify = ra->verify;
    c->return_lse = ra->return_lse;
    c->o_ref = ra->o_ref;
    c->lse_ref = ra->lse_ref;
    return 0;
}

/* A device wait of a closing connection: write the awaited value from the
 * CUDA engine's control stream, so the stream behind it moves on. */
static void release_device_wait(attnd_wait *w)
{
    run_ctx *c = w->arg;
    attn_cuda_ipc_release(c->sem_ipc, c->a.wait_dev, c->a.wait_value);
}

/* Whether an asynchronous run may return from its engine once enqueued
 * (the engine completes it later): no host semaphore (those are waited and
 * written around the engine call) and an engine that can defer. */
static bool run_defers(const run_ctx *c)
{
    return c->is_async && c->wait_host == NULL && c->sig_host == NULL &&
           c->p->engine->ops->complete != NULL && c->s->cfg.async_defer;
}

/* A run that could not put its rows back (E_POOL_UNRESTORED) quarantines
 * its pool before anything else may use it: called under the pool's lock
 * (synchronous runs) or while the run still counts as deferred. */
static void quarantine_if_unrestored(run_ctx *c, int rc, const attn_error_detail *eerr)
{
    char why[160];
    if (rc != ATTN_E_POOL_UNRESTORED)
        return;
    snprintf(why, sizeof why, "a run of engine %s at layer %u could not put its rows back (%.60s)",
             c->p->engine->ops->name, c->a.layer, eerr->message);
    attnd_pool_quarantine(c->pool, why);
}

/* End err's message with `note`, whole: what came before is cut to make
 * room (the client acts on the note, the engine's words are context). */
static void end_with_note(attn_error_detail *err, const char *note)
{
    if (err == NULL)
        return;
    const size_t room = sizeof err->message - 1, len = strlen(err->message), n = strlen(note);
    const size_t at = n >= room ? 0 : len < room - n ? len : room - n;
    snprintf(err->message + at, sizeof err->message - at, "%s", note);
}

/* The engine's failure as the reply says it, `note` (what became of the
 * run's signal, signal_failed_run) last.  An unrestored pool is named by
 * the run's layer, whether the engine said so (the synchronous unwind) or
 * not (a deferred run's completion only knows its ticket). */
static int engine_failure(run_ctx *c, int rc, const attn_error_detail *eerr, const char *note,
                          attn_error_detail *err)
{
    const attnd_plan *p = c->p;
    atomic_fetch_add(&c->s->engine_failures, 1);
    if (rc == ATTN_E_POOL_UNRESTORED)
        attn_error_set(err, rc, eerr->field[0] != '\0' ? eerr->field : "layer",
                       "engine %s failed at layer %u and could not restore the pool "
                       "(%.100s); pool '%s' is quarantined (pool_drop it)",
                       p->engine->ops->name, c->a.layer, eerr->message, p->pool);
    else
        attn_error_set(err, rc, eerr->field,
                       "engine %s on %s failed (%.150s); the pool is unchanged",
                       p->engine->ops->name, p->engine->where,
                       eerr->message[0] ? eerr->message : attn_err_message(rc));
    end_with_note(err, note);
    return rc;
}

#define ATTND_SIGNAL_NOTE 96 /* signal_failed_run's note */

/* The signal of a run that failed (synchronously or at its completion) or
 * was refused once admitted, so the client never waits for ever: it learns
 * of the failure from the reply, run_status or async_error.  A host word is
 * stored now.  A device word the engine did not enqueue yet is written by
 * the engine's stream (attn_engine_signal), behind every run enqueued there
 * before, so it cannot release a client's wait for an earlier run whose
 * work is still in flight (with rising values, N+1 written early satisfies
 * a wait for N).  One the engine enqueued (every deferred run's) is never
 * written twice: the second write could land after the client reset the
 * word.  It arrives unless the device faulted, and a fault leaves nothing
 * of attnd able to write: `note` (for the error's message, "" when there
 * is nothing to say) says that, or that the write failed. */
static void signal_failed_run(run_ctx *c, char *note, size_t n)
{
    attn_error_detail serr;
    note[0] = '\0';
    if (c->sig_host != NULL)
        attnd_sem_signal_host(c->sig_host, c->sig_value);
    if (c->a.signal_dev == NULL)
        return;
    if (c->report.signalled)
        snprintf(note, n, "; signal enqueued, lost if the device faulted");
    else if (attn_engine_signal(c->p->engine, c->a.signal_dev, c->a.signal_value, &serr) != 0)
        snprintf(note, n, "; signal not written (%.50s)", serr.message);
}

/* A run refused (or its host wait cancelled) after its wait was entered
 * and before its engine ran: it still signals, as a failed run does. */
static int refuse_before_engine(run_ctx *c, int rc, attn_error_detail *err)
{
    char note[ATTND_SIGNAL_NOTE];
    if (c->a.wait_dev != NULL)
        attnd_async_wait_leave(c->s->async, &c->dw);
    signal_failed_run(c, note, sizeof note);
    end_with_note(err, note);
    return rc;
}

/* Wait (host semaphore), run the engine under the pool's lock, verify when
 * asked, signal (host semaphore; a device signal is the engine's when the
 * run succeeds, signal_failed_run's when it fails).  A
 * failure leaves the pool as it was (or says it could not).  A deferring
 * run returns ATTND_ASYNC_PENDING once its engine enqueued the work;
 * run_complete finishes it. */
static int run_execute(run_ctx *c, attn_error_detail *err)
{
    attn_server *s = c->s;
    attnd_plan *p = c->p;
    attnd_pool *pool = c->pool;
    attn_error_detail eerr;
    char note[ATTND_SIGNAL_NOTE];
    double t0 = now_us(), engine_t0;
    int rc, tracing = 0, exclusive;

    memset(&eerr, 0, sizeof eerr);
    memset(&c->report, 0, sizeof c->report);
    memset(&c->vr, 0, sizeof c->vr);
    /* a host wait released by a cancellation (its connection closed, attnd
     * stops) runs nothing, but still signals, as a failed run does */
    if (c->wait_host != NULL &&
        (rc = attnd_sem_wait_host(s->async, c->conn, c->wait_host, c->wait_value, err)) != 0)
        return refuse_before_engine(c, rc, err);
    c->a.defer = run_defers(c);
    memset(&c->dw, 0, sizeof c->dw);
    if (c->a.wait_dev != NULL) {
        /* the connection's close releases it while the stream sits on it */
        c->dw.conn = c->conn;
        c->dw.release = release_device_wait;
        c->dw.arg = c;
        attnd_async_wait_enter(s->async, &c->dw);
    }
    /* seed 0x0BF: a CUPTI window is device-wide, so a traced device run
     * runs alone (every other run holds the trace lock shared) */
    exclusive = c->trace && p->engine->ops->platform == ATTN_PLATFORM_CUDA;
    if (exclusive) {
        pthread_rwlock_wrlock(&s->trace_lock);
        c->tk = calloc(1, sizeof *c->tk);
        tracing = c->tk != NULL && attn_cupti_begin(NULL) == 0;
    } else {
        pthread_rwlock_rdlock(&s->trace_lock);
    }
    /* one writer per pool: the staged rows commit while nobody reads them.
     * A deferring run follows the queue's deferred runs on the same stream
     * (attnd_async's `follows`), so it does not wait for them; any other
     * run waits until no deferred run writes the pool */
    if (c->a.defer)
        pthread_mutex_lock(&pool->lock);
    else
        attnd_pool_lock_idle(pool);
    /* a queued run was admitted before an earlier one quarantined the pool */
    if ((rc = attnd_pool_check_serving(pool, err)) != 0) {
        if (tracing)
            attn_cupti_end(c->tk->k, ATTN_KERNELS_MAX, &c->tk->n, NULL, NULL);
        pthread_mutex_unlock(&pool->lock);
        pthread_rwlock_unlock(&s->trace_lock);
        return refuse_before_engine(c, rc, err);
    }
    engine_t0 = now_us();
    rc = attn_engine_run(p->engine, p->eplan, &c->a, &c->report, &eerr);
    if (rc == 0 && c->report.deferred)
        atomic_fetch_add(&pool->deferred, 1); /* under the lock: see attnd_pool_lock_idle */
    quarantine_if_unrestored(c, rc, &eerr);
    c->exec_us = now_us() - t0;
    attnd_metrics_note_engine(&s->metrics, p->engine->ops->platform,
                              (uint64_t)((now_us() - engine_t0) * 1e3));
    /* the engine's run synchronised its stream */
    if (tracing && attn_cupti_end(c->tk->k, ATTN_KERNELS_MAX, &c->tk->n, NULL, NULL) != 0)
        c->tk->n = 0;
    if (rc == 0 && c->verify) {
        /* seed 0x0BG: recompute in fp64 with the reference and compare at the
         * declared tolerance; under the pool lock, the layer as committed
         * (a device layer through a host copy of it) */
        attn_verify_call vc;
        attn_error_detail verr;
        void *host_k = NULL, *host_v = NULL;
        memset(&vc, 0, sizeof vc);
        vc.m = &p->m;
        vc.g = &pool->geom;
        vc.k_store = pool->layer_k[c->a.layer];
        vc.v_store = pool->layer_v[c->a.layer];
        if (pool->view.platform != ATTN_PLATFORM_CPU &&
            layer_to_host(pool, c->a.layer, &host_k, &host_v, &verr) == 0) {
            vc.k_store = host_k;
            vc.v_store = host_v;
        }
        vc.q = c->a.q;
        vc.k_new = c->a.k_new;
        vc.v_new = c->a.v_new;
        vc.o = c->a.o;
        vc.lse = c->a.lse;
        vc.committed = true;
        if ((pool->view.platform != ATTN_PLATFORM_CPU && host_k == NULL) ||
            attn_verify_run(&vc, &c->vr, &verr) != 0)
            memset(&c->vr, 0, sizeof c->vr);
        free(host_k);
        free(host_v);
    }
    pthread_mutex_unlock(&pool->lock);
    pthread_rwlock_unlock(&s->trace_lock);
    if (rc == 0 && c->report.deferred)
        return ATTND_ASYNC_PENDING; /* outputs are on the device; run_complete */
    if (c->a.wait_dev != NULL)
        attnd_async_wait_leave(s->async, &c->dw);
    if (rc == 0) {
        /* O and LSE into a host buffer not aligned for their elements */
        if (c->o_dst != NULL && c->a.o != c->o_dst)
            memcpy(c->o_dst, c->a.o, c->o_bytes);
        if (c->lse_dst != NULL && c->a.lse != c->lse_dst)
            memcpy(c->lse_dst, c->a.lse, c->lse_bytes);
    }
    if (rc == 0) {
        if (c->sig_host != NULL)
            attnd_sem_signal_host(c->sig_host, c->sig_value);
        return 0;
    }
    signal_failed_run(c, note, sizeof note);
    return engine_failure(c, rc, &eerr, note, err);
}

/* Finish a deferred run: wait for its device work, then let the pool go.
 * A failure signals as any other (signal_failed_run: a signal enqueued
 * behind the run's kernels is not written again). */
static int run_complete(run_ctx *c, attn_error_detail *err)
{
    attn_error_detail eerr;
    char note[ATTND_SIGNAL_NOTE];
    memset(&eerr, 0, sizeof eerr);
    int rc = attn_engine_complete(c->p->engine, c->report.ticket, &c->report, &eerr);
    quarantine_if_unrestored(c, rc, &eerr); /* before the pool counts as idle */
    atomic_fetch_sub(&c->pool->deferred, 1);
    if (c->a.wait_dev != NULL)
        attnd_async_wait_leave(c->s->async, &c->dw);
    if (rc == 0)
        return 0;
    signal_failed_run(c, note, sizeof note);
    return engine_failure(c, rc, &eerr, note, err);
}

/* A run that waits or signals: its diag reports the hand-off (MPS or
 * time-sliced, with the ping-pong measured on the device; host semaphores:
 * -1); ATTND_NO_HANDOFF for a run without semaphores. */
static int run_hands_off(const run_ctx *c)
{
    if (c->a.wait_dev != NULL || c->a.signal_dev != NULL)
        return c->pool->view.device;
    return c->wait_host != NULL || c->sig_host != NULL ? -1 : ATTND_NO_HANDOFF;
}

/* Release what the ctx holds (buffers, pool, owned memory; not the plan). */
static void run_ctx_release(run_ctx *c)
{
    attnd_buffer_hold_release(c->s->buffers, &c->hold);
    attnd_pool_release(c->s->pools, c->pool);
    c->pool = NULL;
    for (size_t i = 0; i < sizeof c->owned / sizeof c->owned[0]; i++) {
        free(c->owned[i]);
        c->owned[i] = NULL;
    }
    free(c->tk);
    c->tk = NULL;
}

static int async_run_cb(attnd_async_job *j, double *engine_us, char method[32],
                        attn_error_detail *err)
{
    run_ctx *c = (run_ctx *)j;
    int rc = run_execute(c, err);
    *engine_us = c->report.engine_us;
    snprintf(method, 32, "%s", c->report.timing_method);
    return rc;
}

static int async_complete_cb(attnd_async_job *j, double *engine_us, char method[32],
                             attn_error_detail *err)
{
    run_ctx *c = (run_ctx *)j;
    int rc = run_complete(c, err);
    *engine_us = c->report.engine_us;
    snprintf(method, 32, "%s", c->report.timing_method);
    return rc;
}

/* A deferring run on the engine instance of the one in flight: its work
 * queues behind it on the same stream. */
static bool async_follows_cb(const attnd_async_job *j, const attnd_async_job *prev)
{
    const run_ctx *c = (const run_ctx *)j, *pc = (const run_ctx *)prev;
    return run_defers(c) && c->p->engine == pc->p->engine;
}

/* A run cancelled while queued (its connection closed, attnd stops), at
 * its turn in the queue: it runs nothing, but still signals, as a failed
 * run does. */
static void async_cancel_cb(attnd_async_job *j, attn_error_detail *err)
{
    run_ctx *c = (run_ctx *)j;
    char note[ATTND_SIGNAL_NOTE];
    signal_failed_run(c, note, sizeof note);
    end_with_note(err, note);
}

static void async_release_cb(attnd_async_job *j)
{
    run_ctx *c = (run_ctx *)j;
    run_ctx_release(c);
    attnd_plan_cache_release(c->s->plans, c->p);
    free(c);
}

/* The diag of a run (synchronous: with its timing; asynchronous: "async"). */
static int run_diag(const run_ctx *c, uint64_t seq, void **scratch, attn_bytes *out)
{
    return encode_diag(c->s, c->p, c->plan_id, seq ? NULL : &c->report, c->exec_us,
                       seq ? NULL : &c->vr, seq ? NULL : c->tk, scratch, out, seq,
                       run_hands_off(c));
}

/* One run of plan p for connection `conn`: synchronous (validate, run,
 * reply with O or its reference) or, when asked, asynchronous (validate,
 * enqueue, reply with the run_seq; the queue then owns the ctx and takes
 * its own reference on the plan). */
static int run_core(attn_server *s, uint32_t conn, attnd_plan *p, uint64_t plan_id,
                    attn_run_args *ra, attn_reply *rep, void **scratch, attn_error_detail *err)
{
    int rc;
    if (!ra->async) {
        /* a connection's requests apply in order: its async runs first */
        attnd_async_drain_conn(s->async, conn);
        /* listed before its buffers are resolved: a close from here on
         * releases its waits, even one entered after the close; a run that
         * starts after the close finds no buffer (attn_server_conn_closed
         * drops them before it marks the runs) */
        attnd_sync_run sr;
        attnd_async_sync_begin(s->async, &sr, conn);
        run_ctx c;
        memset(&c, 0, sizeof c);
        c.s = s;
        c.conn = conn;
        c.p = p;
        c.plan_id = plan_id;
        c.ra = ra;
        if ((rc = run_prepare(&c, ra, scratch, err)) == 0 && (rc = run_execute(&c, err)) == 0) {
            rep->o_dtype = p->m.q_dtype;
            rep->has_lse = ra->return_lse;
            if (c.o_dst != NULL) {
                /* O is in the client's buffer: the reply says where, not what */
                rep->o_ref = ra->o_ref;
            } else {
                rep->o.data = c.a.o;
                rep->o.len = c.o_bytes;
            }
            if (c.lse_dst != NULL) {
                rep->lse_ref = ra->lse_ref;
            } else if (ra->return_lse) {
                rep->lse.data = c.a.lse;
                rep->lse.len = c.lse_bytes;
            }
            rc = run_diag(&c, 0, scratch, &rep->diag);
        }
        run_ctx_release(&c);
        attnd_async_sync_end(s->async, &sr);
        return rc;
    }
    run_ctx *c = calloc(1, sizeof *c);
    void *again = NULL;
    if (c == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "async", "out of memory");
    c->s = s;
    c->conn = conn;
    c->p = p;
    c->plan_id = plan_id;
    c->is_async = true;
    if ((rc = run_prepare(c, ra, scratch, err)) != 0 ||
        (rc = attnd_plan_cache_acquire(s->plans, plan_id, &again, err)) != 0) {
        run_ctx_release(c);
        free(c);
        return rc;
    }
    c->job.conn = conn;
    c->job.run = async_run_cb;
    c->job.release = async_release_cb;
    c->job.complete = async_complete_cb;
    c->job.follows = async_follows_cb;
    c->job.cancel = async_cancel_cb;
    /* the reply is built before the queue may finish (and free) the run */
    rep->o_dtype = p->m.q_dtype;
    rep->has_lse = ra->return_lse;
    rep->o_ref = ra->o_ref;
    rep->lse_ref = ra->lse_ref;
    c->job.seq = attnd_async_reserve_seq(s->async);
    if ((rc = run_diag(c, c->job.seq, scratch, &rep->diag)) != 0) {
        run_ctx_release(c);
        attnd_plan_cache_release(s->plans, c->p);
        free(c);
        return rc;
    }
    rep->run_seq = c->job.seq;
    attnd_async_submit(s->async, &c->job);
    return 0;
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
