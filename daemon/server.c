/* attnd request dispatch: decode, route by op, encode (see server.h).
 * plan/run/attend live in exec.c; pools, kv, hello and stats here. */
#include "daemon/server.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/artifact.h"
#include "daemon/loop.h"
#include "daemon/server_int.h"
#include "engines/cpu/engine.h"
#include "engines/cuda/cuda_engine.h" /* plain C; both CUDA engines exist in a CUDA=0 build too */
#include "engines/cuda/ipc.h"
#include "engines/cuda/prefill_engine.h"
#include "protocol/manifest.h"
#include "protocol/msg.h"
#include "protocol/wire.h"

#ifndef ATTN_BUILD_ID
#define ATTN_BUILD_ID "dev-" __DATE__ " " __TIME__
#endif

attnd_metrics *attn_server_metrics(attn_server *s)
{
    return &s->metrics;
}

void attn_server_set_log(attn_server *s, attnd_log *log)
{
    s->log = log;
}

const char *attn_server_version(void)
{
    return ATTND_VERSION;
}

const char *attn_server_build_id(void)
{
    return ATTN_BUILD_ID;
}

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* One request's log line: debug when it succeeded, warn (rate-limited: a
 * client can trigger it at will) for an error reply or a malformed frame. */
static void log_request(attn_server *s, int decoded, const attn_request *req, size_t len,
                        const attn_error_detail *err, int failed, double us)
{
    const char *op = decoded && (unsigned)req->op < ATTN_OP_COUNT ? attn_op_name(req->op) : "?";
    if (!failed) {
        if (attnd_log_enabled(s->log, ATTND_LOG_DEBUG))
            attnd_log_write(s->log, ATTND_LOG_DEBUG, "request op=%s id=%llu result=ok us=%.0f", op,
                            (unsigned long long)req->id, us);
        return;
    }
    if (!attnd_log_enabled(s->log, ATTND_LOG_WARN))
        return;
    if (!decoded)
        attnd_log_limited(s->log, ATTND_LOG_WARN,
                          "malformed frame of %zu bytes id=%s%llu result=%s field=%s us=%.0f: %s",
                          len, req->has_id ? "" : "none/", (unsigned long long)req->id,
                          attn_err_name(err->code), err->field[0] ? err->field : "-", us,
                          err->message);
    else
        attnd_log_limited(s->log, ATTND_LOG_WARN,
                          "request op=%s id=%llu result=%s field=%s us=%.0f: %s", op,
                          (unsigned long long)req->id, attn_err_name(err->code),
                          err->field[0] ? err->field : "-", us, err->message);
}

void attn_server_set_max_reply(attn_server *s, uint64_t bytes)
{
    atomic_store(&s->max_reply, bytes);
}

/* Declare both CUDA engines with the reason they cannot run here (hello
 * lists them; forcing one fails with that reason). */
static int declare_cuda(attn_server *s, const char *why, attn_error_detail *err)
{
    const attn_engine_ops *dec = attn_cuda_engine_ops(), *pre = attn_cuda_prefill_engine_ops();
    int rc = attn_registry_declare(&s->registry, dec->name, ATTN_PLATFORM_CUDA, dec->phases,
                                   dec->priority, why, err);
    return rc != 0 ? rc
                   : attn_registry_declare(&s->registry, pre->name, ATTN_PLATFORM_CUDA, pre->phases,
                                           pre->priority, why, err);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int attn_server_metrics_text(attn_server *s, char **text, size_t *len)
{
    attnd_metrics_gauges g;
    attnd_plan_cache_stats pc;
    uint32_t np = 0;
    memset(&g, 0, sizeof g);
    attnd_plan_cache_stats_get(s->plans, &pc);
    g.plan_entries = pc.entries;
    g.plan_capacity = pc.capacity;
    g.plan_bytes = pc.bytes;
    g.plan_hits = pc.hits;
    g.plan_misses = pc.misses;
    g.plan_replans = pc.replans;
    g.plan_evictions = pc.evictions;
    g.plan_stale = pc.stale;
    attnd_pool_table_usage(s->pools, &np, &g.pool_bytes);
    g.pools = np;
    g.pool_budget = s->cfg.pool_budget;
    g.engine_failures = atomic_load(&s->engine_failures);
    return attnd_metrics_render(&s->metrics, &g, text, len);
}

/* Register the engines this build has; the CUDA engine is declared with its
 * reason when it was not built (seed 0x07C: hello lists it, forcing it fails
 * with that reason). */
static int register_engines(attn_server *s, attn_error_detail *err)
{
    attn_cpu_options opt;
    attn_engine_config cfg;
    attn_engine *e = NULL;
    int rc;
    memset(&opt, 0, sizeof opt);
    opt.num_threads = s->cfg.threads;
    opt.acc = ATTN_CPU_ACC_F32;
    memset(&cfg, 0, sizeof cfg);
    cfg.device = -1;
    cfg.num_threads = s->cfg.threads;
    cfg.tuning = &opt;
    attn_registry_init(&s->registry);
    if ((rc = attn_engine_create(attn_cpu_engine_ops(), &cfg, &e, err)) != 0)
        return rc;
    s->engines[s->num_engines++] = e;
    if ((rc = attn_registry_add(&s->registry, e, err)) != 0)
        return rc;
#ifdef ATTN_WITH_CUDA
    {
        int ndev = 0;
        char why[160] = "";
        if (s->cfg.engine != ATTND_ENGINE_CPU && attn_cuda_available(&ndev, why, sizeof why)) {
            /* per device one instance of each CUDA engine, each with its own
             * stream and workspace: cuda_decode (C = 1) ranks first, so a
             * decode batch keeps its kernel; cuda_prefill takes the rest */
            const attn_engine_ops *const cuda_ops[] = {attn_cuda_engine_ops(),
                                                       attn_cuda_prefill_engine_ops()};
            for (int d = 0; d < ndev && d < ATTN_ENGINE_DEVICES_MAX; d++)
                for (size_t k = 0; k < sizeof cuda_ops / sizeof cuda_ops[0]; k++) {
                    if (s->num_engines >= sizeof s->engines / sizeof s->engines[0])
                        return attn_error_set(err, ATTN_E_TOO_LARGE, "engine",
                                              "too many engine instances (%u)", s->num_engines);
                    cfg.device = d;
                    cfg.num_threads = 0;
                    cfg.tuning = NULL;
                    if ((rc = attn_engine_create(cuda_ops[k], &cfg, &e, err)) != 0)
                        return rc;
                    s->engines[s->num_engines++] = e;
                    if ((rc = attn_registry_add(&s->registry, e, err)) != 0)
                        return rc;
                }
            return 0;
        }
        if (s->cfg.engine == ATTND_ENGINE_CUDA)
            return attn_error_set(err, ATTN_E_UNKNOWN_BACKEND, "engine", "--engine cuda: %s", why);
        return declare_cuda(s, s->cfg.engine == ATTND_ENGINE_CPU ? "disabled by --engine cpu" : why,
                            err);
    }
#else
    if (s->cfg.engine == ATTND_ENGINE_CUDA)
        return attn_error_set(err, ATTN_E_UNKNOWN_BACKEND, "engine",
                              "--engine cuda: this attnd was built without the CUDA engine");
    return declare_cuda(s, "not compiled into this attnd (built with CUDA=0)", err);
#endif
}

attn_cuda_ipc *attnd_server_ipc(attn_server *s, int device, char *why, size_t n)
{
    for (uint32_t i = 0; i < s->num_engines; i++)
        if (s->engines[i]->ops == attn_cuda_engine_ops() && s->engines[i]->device == device)
            return attn_cuda_engine_ipc(s->engines[i], why, n);
    if (why != NULL && n > 0)
        snprintf(why, n, "attnd has no CUDA engine on cuda:%d", device);
    return NULL;
}

/* The buffer table's cuda_ipc hook: the CUDA engine of the device opens. */
static int ipc_open(void *arg, int device, const uint8_t *handle, uint64_t offset, uint64_t bytes,
                    void **dev_ptr, attn_error_detail *err)
{
    attn_server *s = arg;
    char why[160];
    attn_cuda_ipc *c = attnd_server_ipc(s, device, why, sizeof why);
    bool any_cuda = false;
    *dev_ptr = NULL;
    for (uint32_t i = 0; i < s->num_engines; i++)
        any_cuda = any_cuda || s->engines[i]->ops == attn_cuda_engine_ops();
    if (c == NULL)
        /* no CUDA engine at all: the kind is what this attnd cannot serve */
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, any_cuda ? "device" : "kind",
                              "cannot open a cuda_ipc handle on cuda:%d: %s (CUDA IPC buffers need "
                              "the CUDA engine on that device)",
                              device, why);
    return attn_cuda_ipc_open(c, handle, offset, bytes, dev_ptr, err);
}

static void ipc_close(void *arg, int device, void *dev_ptr)
{
    attn_cuda_ipc *c = attnd_server_ipc(arg, device, NULL, 0);
    if (c != NULL)
        attn_cuda_ipc_close(c, dev_ptr);
}

/* The hand-off table's probe: the ping-pong of the device's CUDA engine. */
static int pingpong_probe(void *arg, int device, uint32_t rounds, double *us,
                          attn_error_detail *err)
{
    char why[160];
    attn_cuda_ipc *c = attnd_server_ipc(arg, device, why, sizeof why);
    *us = 0;
    if (c == NULL)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "handoff", "%s", why);
    return attn_cuda_ipc_pingpong(c, rounds, us, err);
}

/* Whether the CUDA contexts of this attnd run under MPS, and the sentence
 * hello and the diag of every waiting or signalling run carry. */
static void detect_mps(attn_server *s)
{
    s->mps = -1;
    snprintf(s->mps_note, sizeof s->mps_note,
             "no CUDA engine: semaphores in shm buffers are "
             "waited and signalled on the host");
    for (uint32_t i = 0; i < s->num_engines; i++)
        if (s->engines[i]->ops == attn_cuda_engine_ops()) {
            s->mps = attn_cuda_mps_state(s->engines[i]->device, s->mps_note, sizeof s->mps_note);
            return;
        }
}

int attn_server_create(attn_server **out, const attnd_config *cfg, attn_error_detail *err)
{
    attn_server *s = calloc(1, sizeof *s);
    int rc;
    if (s == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    s->cfg = *cfg;
    pthread_rwlock_init(&s->trace_lock, NULL);
    attn_codec_limits_default(&s->limits);
    atomic_init(&s->max_reply, cfg->max_reply);
    snprintf(s->build_id, sizeof s->build_id, "%s", ATTN_BUILD_ID);
    {
        /* seed 0x0BA: the loaded-artifact identity, hashed once at start */
        const attn_artifact *a = attn_artifact_get();
        if (a != NULL && a->sha256[0] != '\0') {
            snprintf(s->artifact, sizeof s->artifact, "sha256:%s", a->sha256);
            snprintf(s->artifact_sha, sizeof s->artifact_sha, "%s", a->sha256);
            s->source_identified = attn_artifact_source_identified(a);
            if (strcmp(a->build_id, "unknown") != 0)
                snprintf(s->build_id, sizeof s->build_id, "%s", a->build_id);
            msgpack_sbuffer sb;
            msgpack_packer pk;
            msgpack_sbuffer_init(&sb);
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            if (attn_artifact_pack(a, &pk) == 0) {
                s->identity = sb.data; /* ownership moves to the server */
                s->identity_len = sb.size;
            } else {
                msgpack_sbuffer_destroy(&sb);
            }
            if (a->has_device)
                snprintf(s->device_desc, sizeof s->device_desc, "cuda:0 %.24s cc%d.%d %dsm %lluGiB",
                         a->device_name, a->cc_major, a->cc_minor, a->sm_count,
                         (unsigned long long)(a->device_memory >> 30));
        } else {
            snprintf(s->artifact, sizeof s->artifact, "attnd %s %s", ATTND_VERSION, s->build_id);
        }
    }
    if ((rc = register_engines(s, err)) != 0)
        goto fail;
    detect_mps(s);
    attnd_handoff_init(&s->handoff, s->mps, pingpong_probe, s);
    if ((rc = attnd_async_create(&s->async, 4096)) != 0) {
        attn_error_set(err, rc, "", "cannot start the asynchronous-run worker");
        goto fail;
    }
    if ((rc = attnd_pool_table_create(&s->pools, cfg->pool_budget)) != 0) {
        attn_error_set(err, rc, "", "out of memory");
        goto fail;
    }
    if ((rc = attnd_buffers_create(&s->buffers, (uint32_t)cfg->max_buffers,
                                   cfg->max_buffer_bytes)) != 0) {
        attn_error_set(err, rc, "max_buffers", "cannot create the buffer table");
        goto fail;
    }
    {
        attnd_ipc_opener o = {ipc_open, ipc_close, s};
        attnd_buffers_set_ipc(s->buffers, &o);
    }
    if ((rc = attnd_plan_cache_create(&s->plans, cfg->max_plans, cfg->plan_cache_bytes,
                                      attnd_plan_free)) != 0) {
        attn_error_set(err, rc, "max_plans", "cannot create the plan cache");
        goto fail;
    }
    for (uint32_t i = 0; i < cfg->num_pools; i++) {
        if ((rc = attnd_pool_create(s->pools, &cfg->pools[i], NULL, err)) != 0) {
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%s", err->message);
            snprintf(err->message, sizeof err->message, "configured pool %u: %.200s", i, msg);
            goto fail;
        }
    }
    if (cfg->capture[0] != '\0') {
        attn_capture_header h;
        memset(&h, 0, sizeof h);
        h.version = ATTN_CAPTURE_VERSION;
        snprintf(h.attnd, sizeof h.attnd, "%s", ATTND_VERSION);
        snprintf(h.build, sizeof h.build, "%s", s->build_id);
        /* an engine preference is a platform (same values) or "auto" */
        snprintf(h.engine, sizeof h.engine, "%s",
                 cfg->engine == ATTND_ENGINE_AUTO ? "auto"
                                                  : attn_platform_name((attn_platform)cfg->engine));
        h.num_pools = attnd_pool_table_list(s->pools, h.pools, ATTN_CAPTURE_MAX_POOLS);
        if ((rc = attn_capture_open(&s->capture, cfg->capture, &h, err)) != 0)
            goto fail;
    }
    atomic_store(&s->metrics.engines_ready, 1);
    *out = s;
    return 0;
fail:
    attn_server_destroy(s);
    return rc;
}

void attn_server_destroy(attn_server *s)
{
    if (s == NULL)
        return;
    attnd_async_destroy(s->async); /* queued runs hold plans, pools and buffers */
    attn_capture_close(s->capture);
    attnd_plan_cache_destroy(s->plans); /* engine plans go before their engines */
    attnd_pool_table_destroy(s->pools);
    attnd_buffers_destroy(s->buffers);
    for (uint32_t i = 0; i < s->num_engines; i++)
        attn_engine_destroy(s->engines[i]);
    pthread_rwlock_destroy(&s->trace_lock);
    attnd_handoff_fini(&s->handoff);
    free(s->identity);
    free(s);
}

struct attn_registry *attn_server_registry(attn_server *s)
{
    return &s->registry;
}

int attn_server_pool_checksum(attn_server *s, const char *pool, uint64_t *sum)
{
    attnd_pool *p;
    int rc = attnd_pool_acquire(s->pools, pool, "pool", &p, NULL);
    if (rc != 0)
        return rc;
    *sum = attnd_pool_checksum(p);
    attnd_pool_release(s->pools, p);
    return 0;
}

/* ---- the cheap ops -------------------------------------------------------- */

static int do_hello(attn_server *s, attn_reply *rep)
{
    attn_server_info *si = &rep->server;
    snprintf(si->version, sizeof si->version, "%s", ATTND_VERSION);
    snprintf(si->build_id, sizeof si->build_id, "%s", s->build_id);
    snprintf(si->artifact, sizeof si->artifact, "%s", s->artifact);
    for (uint32_t i = 0; i < s->registry.num_entries && i < ATTN_HELLO_MAX_BACKENDS; i++) {
        const attn_registry_entry *e = &s->registry.entries[i];
        attn_backend_info *b = &si->backends[si->num_backends++];
        snprintf(b->name, sizeof b->name, "%s", e->name);
        b->available = e->ops != NULL && e->enabled;
        snprintf(b->reason, sizeof b->reason, "%s", e->unavailable);
    }
    si->num_devices = 1;
    snprintf(si->devices[0], sizeof si->devices[0], "cpu:%u", attn_cpu_online_threads());
    if (s->device_desc[0] != '\0')
        snprintf(si->devices[si->num_devices++], sizeof si->devices[0], "%s", s->device_desc);
    si->identity.data = s->identity;
    si->identity.len = s->identity_len;
    si->mps = s->mps;
    snprintf(si->gpu_handoff, sizeof si->gpu_handoff, "%s", s->mps_note);
    return 0;
}

static void add_counter(attn_stats_info *st, const char *name, uint64_t v)
{
    if (st->num_counters >= ATTN_STATS_MAX_COUNTERS)
        return;
    snprintf(st->counters[st->num_counters].name, sizeof st->counters[0].name, "%s", name);
    st->counters[st->num_counters++].value = v;
}

_Static_assert(ATTN_STATS_MAX_POOLS >= ATTND_MAX_POOLS, "stats must be able to list every pool");

static int do_stats(attn_server *s, attn_reply *rep)
{
    attn_stats_info *st = &rep->stats;
    attnd_plan_cache_stats pc;
    attn_pool_geometry g[ATTN_STATS_MAX_POOLS];
    uint32_t np;
    uint64_t wops = atomic_load(&s->metrics.worker_ops);
    add_counter(st, "requests", atomic_load(&s->metrics.requests));
    add_counter(st, "replies", atomic_load(&s->metrics.replies));
    add_counter(st, "errors", atomic_load(&s->metrics.errors));
    add_counter(st, "in_flight", atomic_load(&s->metrics.in_flight));
    add_counter(st, "inline_ops", atomic_load(&s->metrics.inline_ops));
    add_counter(st, "worker_ops", wops);
    add_counter(st, "handoff_ns_total", atomic_load(&s->metrics.handoff_ns));
    add_counter(st, "handoff_ns_mean", wops ? atomic_load(&s->metrics.handoff_ns) / wops : 0);
    add_counter(st, "handoff_ns_max", atomic_load(&s->metrics.handoff_max_ns));
    add_counter(st, "engine_failures", atomic_load(&s->engine_failures));
    add_counter(st, "shutting_down_replies", atomic_load(&s->metrics.shutting_down_replies));
    add_counter(st, "busy_replies", atomic_load(&s->metrics.busy_replies));
    add_counter(st, "conns_refused", atomic_load(&s->metrics.conns_refused));
    add_counter(st, "conns_closed_inflight", atomic_load(&s->metrics.conns_closed_inflight));
    add_counter(st, "conns_closed_idle", atomic_load(&s->metrics.conns_closed_idle));
    add_counter(st, "send_timeouts", atomic_load(&s->metrics.send_timeouts));
    {
        attnd_buffer_stats bs;
        attnd_buffers_stats(s->buffers, &bs);
        add_counter(st, "buffers", bs.live);
        add_counter(st, "buffer_bytes", bs.bytes);
        add_counter(st, "buffers_registered", bs.registered);
        add_counter(st, "buffers_dropped", bs.dropped);
        add_counter(st, "buffers_released_on_close", bs.released_on_close);
        add_counter(st, "buffers_refused", bs.refused);
        add_counter(st, "pools_exported", attnd_pool_table_exported(s->pools));
        add_counter(st, "pools_quarantined", attnd_pool_table_quarantined(s->pools));
    }
    {
        attnd_async_stats as;
        attnd_async_stats_get(s->async, &as);
        add_counter(st, "async_enqueued", as.enqueued);
        add_counter(st, "async_done", as.done);
        add_counter(st, "async_failed", as.failed);
        add_counter(st, "async_cancelled", as.cancelled);
        add_counter(st, "async_pending", as.pending);
        add_counter(st, "waits_released_on_close", as.waits_released_on_close);
    }
    for (int op = 0; op < ATTN_OP_COUNT; op++) {
        char name[48];
        snprintf(name, sizeof name, "op_%s", attn_op_name((attn_op)op));
        add_counter(st, name, atomic_load(&s->metrics.op_requests[op]));
    }
    attnd_plan_cache_stats_get(s->plans, &pc);
    add_counter(st, "plan_cache_stale", pc.stale);
    add_counter(st, "plan_cache_bytes", pc.bytes);
    add_counter(st, "plan_cache_max_bytes", pc.max_bytes);
    add_counter(st, "plan_cache_refused", pc.refused);
    st->plan_cache.entries = pc.entries;
    st->plan_cache.capacity = pc.capacity;
    st->plan_cache.hits = pc.hits;
    st->plan_cache.misses = pc.misses;
    st->plan_cache.replans = pc.replans;
    st->plan_cache.evictions = pc.evictions;
    np = attnd_pool_table_list(s->pools, g, ATTN_STATS_MAX_POOLS);
    for (uint32_t i = 0; i < np; i++) {
        attnd_pool *p;
        memcpy(st->pools[i].name, g[i].name, sizeof st->pools[i].name);
        st->pools[i].name[sizeof st->pools[i].name - 1] = '\0';
        if (attnd_pool_acquire(s->pools, g[i].name, "pool", &p, NULL) == 0) {
            st->pools[i].bytes = p->bytes;
            attnd_pool_release(s->pools, p);
        }
    }
    st->num_pools = np;
    return 0;
}

/* ---- pools and K/V pages -------------------------------------------------- */

static int do_pool_create(attn_server *s, uint32_t conn, attn_request *req, attn_reply *rep,
                          attn_error_detail *err)
{
    attn_pool_geometry g = req->geom;
    int rc;
    if (g.name[0] == '\0')
        snprintf(g.name, sizeof g.name, "%s", req->pool);
    if (!req->has_device || g.device[0] == '\0')
        snprintf(g.device, sizeof g.device, "cpu");
    if ((rc = attn_pool_geometry_validate(&g, err)) != 0) {
        /* the validator names a manifest's pool ("pool.num_pages"); in a
         * pool_create those are the request's own top-level keys, as
         * attnd_pool_create names them: one scheme for the op */
        if (strncmp(err->field, "pool.", 5) == 0)
            memmove(err->field, err->field + 5, strlen(err->field + 5) + 1);
        return rc;
    }
    if (req->pool_export) {
        /* the export belongs to this connection: it ends when it closes */
        if ((rc = attnd_pool_create_exported(s->pools, &g, conn, &rep->bytes, &rep->exp, err)) != 0)
            return rc;
        rep->has_export = true;
    } else if ((rc = attnd_pool_create(s->pools, &g, &rep->bytes, err)) != 0) {
        return rc;
    }
    snprintf(rep->pool, sizeof rep->pool, "%s", g.name);
    return 0;
}

static int do_pool_info(attn_server *s, attn_request *req, attn_reply *rep, attn_error_detail *err)
{
    attnd_pool *p;
    int rc = attnd_pool_acquire(s->pools, req->pool, "pool", &p, err);
    if (rc != 0)
        return rc;
    snprintf(rep->pool, sizeof rep->pool, "%s", p->geom.name);
    rep->geom = p->geom;
    rep->bytes = p->bytes;
    attnd_pool_release(s->pools, p);
    return 0;
}

static int do_kv(attn_server *s, attn_request *req, attn_reply *rep, void **scratch,
                 attn_error_detail *err)
{
    attnd_pool *p;
    attn_kv_args *a = &req->kv;
    int rc = attnd_pool_acquire(s->pools, a->pool, "pool", &p, err);
    if (rc != 0)
        return rc;
    if ((rc = attn_kv_check(a, req->op, &p->geom, err)) != 0)
        goto out;
    if (req->op == ATTN_OP_KV_WRITE) {
        /* checked completely above: nothing is written unless all of it can be */
        rc = attnd_pool_write(p, a->layer, a->pages, a->num_pages, a->k.data, a->v.data, err);
    } else {
        uint64_t kb = (uint64_t)a->num_pages * p->page_bytes_k;
        uint64_t vb = (uint64_t)a->num_pages * p->page_bytes_v;
        char *buf;
        /* a small request can name one large page many times: the reply's
         * size is checked before anything is allocated for it */
        if (kb + vb > atomic_load(&s->max_reply)) {
            rc = attn_error_set(err, ATTN_E_TOO_LARGE, "pages",
                                "%u pages would make a %llu-byte reply, over --max-reply %llu",
                                a->num_pages, (unsigned long long)(kb + vb),
                                (unsigned long long)atomic_load(&s->max_reply));
            goto out;
        }
        buf = malloc(kb + vb + 1);
        if (buf == NULL) {
            rc = attn_error_set(err, ATTN_E_NOMEM, "pages", "cannot allocate %llu bytes",
                                (unsigned long long)(kb + vb));
            goto out;
        }
        scratch[0] = buf;
        rc = attnd_pool_read(p, a->layer, a->pages, a->num_pages, buf, buf + kb, err);
        rep->k.data = buf;
        rep->k.len = kb;
        rep->v_data.data = buf + kb;
        rep->v_data.len = vb;
        rep->kv_dtype = p->geom.kv_dtype;
    }
    snprintf(rep->pool, sizeof rep->pool, "%s", p->geom.name);
out:
    attnd_pool_release(s->pools, p);
    return rc;
}

/* ---- registered buffers ------------------------------------------------------ */

/* A shm object is mapped only for the user who owns it: the peer's uid of an
 * ipc:// connection (a remote or inproc peer has none, so it cannot register
 * shm); an in-process caller (conn 0, attnctl --local) is trusted. */
static int do_buffer_register(attn_server *s, uint32_t conn, const attn_buffer_args *a,
                              attn_reply *rep, attn_error_detail *err)
{
    int64_t peer_uid = -1;
    uint64_t uid;
    if (a->kind == ATTN_BUFFER_SHM && conn != 0) {
        if (attnd_conn_peer_uid(conn, &uid) != 0)
            return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "kind",
                                  "shm buffers need a local ipc:// connection (attnd checks the "
                                  "object's owner against the connecting process's uid)");
        peer_uid = (int64_t)uid;
    }
    int rc = attnd_buffers_register(s->buffers, conn, peer_uid, a, &rep->buf, err);
    if (rc != 0)
        return rc;
    /* what a hand-off through this buffer's semaphores costs: measured now
     * for a device buffer, host semaphores for a shm one */
    _Static_assert(sizeof rep->handoff >= ATTND_HANDOFF_NOTE, "the reply holds a whole sentence");
    if (a->kind == ATTN_BUFFER_CUDA_IPC)
        rep->handoff_us = attnd_handoff_measure(&s->handoff, atoi(a->device + 5), rep->handoff,
                                                sizeof rep->handoff);
    else
        attnd_handoff_describe(&s->handoff, -1, rep->handoff, sizeof rep->handoff, NULL);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

static int peek_op(const void *frame, size_t len, attn_op *op);

#define ATTND_SCRATCH 8

static int encode_error(attn_server *s, uint64_t id, attn_op op, const attn_error_detail *e,
                        void **reply, size_t *reply_len)
{
    attn_buf b = {0};
    int rc = attn_error_reply_encode(id, op, e, &b);
    atomic_fetch_add(&s->metrics.errors, 1);
    if (rc != 0)
        return rc;
    *reply = b.data;
    *reply_len = b.len;
    return 0;
}

int attn_server_handle(attn_server *s, const void *frame, size_t len, void **reply,
                       size_t *reply_len)
{
    return attn_server_handle_conn(s, 0, frame, len, reply, reply_len);
}

int attn_server_handle_conn(attn_server *s, uint32_t conn, const void *frame, size_t len,
                            void **reply, size_t *reply_len)
{
    attn_request req;
    attn_reply rep;
    attn_error_detail err;
    void *scratch[ATTND_SCRATCH] = {0};
    attn_buf out = {0};
    double t0 = mono_us();
    uint64_t t0_ns = now_ns();
    attn_op op = ATTN_OP_COUNT;
    int code = 0; /* of the reply: 0 or the error it carries */
    int rc, decoded = 0, failed = 0;

    memset(&err, 0, sizeof err);
    memset(&req, 0, sizeof req);
    memset(&rep, 0, sizeof rep);
    *reply = NULL;
    *reply_len = 0;
    rc = attn_request_decode(frame, len, &s->limits, &req, &err);
    if (rc != 0) {
        failed = 1;
        peek_op(frame, len, &op); /* counted under its op when that much is readable */
        code = rc;
        rc = encode_error(s, req.has_id ? req.id : 0, ATTN_OP_COUNT, &err, reply, reply_len);
        goto capture;
    }
    decoded = 1;
    op = req.op;
    rep.v = ATTN_PROTOCOL_VERSION;
    rep.op = req.op;
    rep.id = req.id;
    rep.ok = true;
    /* an asynchronous run of this connection that failed before this request
     * came: this reply carries it (run_status and stats keep it too); taken
     * first, so that a run's own reply never carries its own failure */
    rep.has_async_error =
        attnd_async_take_failure(s->async, conn, &rep.async_error_seq, &rep.async_error);
    switch (req.op) {
    case ATTN_OP_HELLO:
        rc = do_hello(s, &rep);
        break;
    case ATTN_OP_STATS:
        rc = do_stats(s, &rep);
        break;
    case ATTN_OP_POOL_CREATE:
        rc = do_pool_create(s, conn, &req, &rep, &err);
        break;
    case ATTN_OP_POOL_DROP:
        attnd_async_drain_conn(s->async, conn); /* after this connection's async runs */
        rc = attnd_pool_drop(s->pools, req.pool, &err);
        snprintf(rep.pool, sizeof rep.pool, "%s", req.pool);
        break;
    case ATTN_OP_POOL_INFO:
        rc = do_pool_info(s, &req, &rep, &err);
        break;
    case ATTN_OP_KV_READ:
    case ATTN_OP_KV_WRITE:
        attnd_async_drain_conn(s->async, conn); /* after this connection's async runs */
        rc = do_kv(s, &req, &rep, scratch, &err);
        break;
    case ATTN_OP_PLAN:
        rc = attnd_exec_plan(s, &req, &rep, scratch, &err);
        break;
    case ATTN_OP_RUN:
        rc = attnd_exec_run(s, conn, &req, &rep, scratch, &err);
        break;
    case ATTN_OP_ATTEND:
        rc = attnd_exec_attend(s, conn, &req, &rep, scratch, &err);
        break;
    case ATTN_OP_BUFFER_REGISTER:
        rc = do_buffer_register(s, conn, &req.buffer, &rep, &err);
        break;
    case ATTN_OP_BUFFER_DROP:
        rc = attnd_buffers_drop(s->buffers, conn, req.buffer.buf, &err);
        break;
    case ATTN_OP_RUN_STATUS:
        rc = attnd_async_status(s->async, conn, req.run_seq, &rep.status, &err);
        rep.run_seq = req.run_seq;
        break;
    default:
        rc = attn_error_set(&err, ATTN_E_UNKNOWN_OP, "op", "unknown operation");
        break;
    }
    if (rc == 0) {
        rc = attn_reply_encode(&rep, &out, &err);
        if (rc == 0 && out.len > atomic_load(&s->max_reply)) {
            /* every other reply is bounded by its request; this is the backstop */
            rc = attn_error_set(&err, ATTN_E_TOO_LARGE, "reply",
                                "the reply would be %zu bytes, over --max-reply %llu", out.len,
                                (unsigned long long)atomic_load(&s->max_reply));
            attn_buf_free(&out);
        }
        if (rc == 0) {
            *reply = out.data;
            *reply_len = out.len;
        }
    }
    if (rc != 0) {
        failed = 1;
        code = rc;
        if (rep.has_async_error) {
            /* the error reply carries the async failure all the same */
            attn_reply er;
            memset(&er, 0, sizeof er);
            er.id = req.id;
            er.op = req.op;
            er.error = err;
            er.has_async_error = true;
            er.async_error_seq = rep.async_error_seq;
            er.async_error = rep.async_error;
            atomic_fetch_add(&s->metrics.errors, 1);
            rc = attn_reply_encode(&er, &out, NULL);
            if (rc == 0) {
                *reply = out.data;
                *reply_len = out.len;
            }
        } else {
            rc = encode_error(s, req.id, req.op, &err, reply, reply_len);
        }
    }
    attn_request_free(&req);
    for (int i = 0; i < ATTND_SCRATCH; i++)
        free(scratch[i]);
capture:
    attnd_metrics_observe(&s->metrics, op, rc != 0 ? rc : code, now_ns() - t0_ns);
    if (rc == 0 && s->capture != NULL)
        attn_capture_append(s->capture, frame, len, *reply, *reply_len);
    if (s->log != NULL)
        log_request(s, decoded, &req, len, &err, failed, mono_us() - t0);
    return rc;
}

/* Find the top-level "op" string without decoding the whole frame. */
static int peek_op(const void *frame, size_t len, attn_op *op)
{
    attn_wire_reader r;
    attn_wire_item it, k, v;
    attn_wire_init(&r, frame, len);
    if (attn_wire_next(&r, &it) != 0 || it.type != ATTN_WT_MAP || it.len > 64)
        return 0;
    for (uint32_t i = 0; i < it.len; i++) {
        if (attn_wire_next(&r, &k) != 0 || k.type != ATTN_WT_STR)
            return 0;
        if (attn_wire_str_eq(&k, "op")) {
            char name[32];
            if (attn_wire_next(&r, &v) != 0 || v.type != ATTN_WT_STR || v.len >= sizeof name)
                return 0;
            memcpy(name, v.ptr, v.len);
            name[v.len] = '\0';
            return attn_op_from_name(name, op);
        }
        if (attn_wire_skip(&r, 16) != 0)
            return 0;
    }
    return 0;
}

int attn_server_is_cheap(attn_server *s, const void *frame, size_t len)
{
    attn_op op;
    (void)s;
    if (len > 4096 || !peek_op(frame, len, &op))
        return 0;
    return op == ATTN_OP_HELLO || op == ATTN_OP_STATS;
}

uint64_t attn_server_order_of(attn_server *s, const void *frame, size_t len)
{
    attn_wire_reader r;
    attn_wire_item it, k, v;
    attn_op op = ATTN_OP_COUNT;
    uint64_t order = 0;
    (void)s;
    if (!peek_op(frame, len, &op) || (op != ATTN_OP_RUN && op != ATTN_OP_ATTEND))
        return 0;
    /* a top-level key: skipped values are bounded by the frame, not copied */
    attn_wire_init(&r, frame, len);
    if (attn_wire_next(&r, &it) != 0 || it.type != ATTN_WT_MAP || it.len > 64)
        return 0;
    for (uint32_t i = 0; i < it.len; i++) {
        if (attn_wire_next(&r, &k) != 0 || k.type != ATTN_WT_STR)
            return 0;
        if (attn_wire_str_eq(&k, "order")) {
            if (attn_wire_next(&r, &v) != 0 || v.type != ATTN_WT_UINT)
                return 0; /* the handler's decode names what is wrong */
            order = v.u;
            break;
        }
        if (attn_wire_skip(&r, 16) != 0)
            return 0;
    }
    return order;
}

uint64_t attn_server_order_of_cb(void *arg, const void *req, size_t len)
{
    return attn_server_order_of(arg, req, len);
}

int attn_server_refuse(attn_server *s, const void *frame, size_t len, int code, void **reply,
                       size_t *reply_len)
{
    attn_error_detail err;
    attn_wire_reader r;
    attn_wire_item it, k, v;
    uint64_t id = 0;
    attn_op op = ATTN_OP_COUNT;
    /* the id, when readable, so the client can match the refusal */
    attn_wire_init(&r, frame, len);
    if (attn_wire_next(&r, &it) == 0 && it.type == ATTN_WT_MAP) {
        for (uint32_t i = 0; i < it.len && i < 64; i++) {
            if (attn_wire_next(&r, &k) != 0 || k.type != ATTN_WT_STR)
                break;
            if (attn_wire_str_eq(&k, "id")) {
                if (attn_wire_next(&r, &v) == 0 && v.type == ATTN_WT_UINT)
                    id = v.u;
                break;
            }
            if (attn_wire_skip(&r, 16) != 0)
                break;
        }
    }
    peek_op(frame, len, &op);
    const char *why = "refused, draining";
    uint64_t order = attn_server_order_of(s, frame, len);
    if (code == ATTN_E_BUSY) {
        attn_error_set(&err, ATTN_E_BUSY, "conn_inflight",
                       "this connection already has --conn-inflight requests in progress; "
                       "wait for a reply first");
        why = "refused, busy";
    } else if (code == ATTN_E_RANGE) {
        attn_error_set(&err, ATTN_E_RANGE, "order",
                       "order %llu was already used on this connection (a duplicate, or older "
                       "than a run handled, refused or timed out); nothing was run",
                       (unsigned long long)order);
        why = "refused, order number used";
    } else if (code == ATTN_E_TIMEOUT) {
        attn_error_set(&err, ATTN_E_TIMEOUT, "order",
                       "order %llu waited longer than --order-timeout-ms for an earlier number of "
                       "this connection that never came; nothing was run",
                       (unsigned long long)order);
        why = "refused, order gap timed out";
    } else if (code == ATTN_E_NOMEM) {
        attn_error_set(&err, ATTN_E_NOMEM, "order",
                       "out of memory for the connection's order slot");
        why = "refused, no memory";
    } else {
        attn_error_set(&err, ATTN_E_SHUTTING_DOWN, "", "attnd is shutting down; retry elsewhere");
    }
    attnd_log_limited(s->log, ATTND_LOG_WARN, "request op=%s id=%llu result=%s: %s",
                      (unsigned)op < ATTN_OP_COUNT ? attn_op_name(op) : "?", (unsigned long long)id,
                      attn_err_name(err.code), why);
    attnd_metrics_observe(&s->metrics, op, err.code, 0);
    return encode_error(s, id, op, &err, reply, reply_len);
}

int attn_server_handle_cb(void *arg, uint32_t conn, const void *req, size_t len, void **reply,
                          size_t *reply_len)
{
    return attn_server_handle_conn(arg, conn, req, len, reply, reply_len);
}

void attn_server_conn_closed(attn_server *s, uint32_t conn)
{
    /* its buffers dropped first: a synchronous run that starts after the
     * close then finds none (nor a word to wait on), one listed before is
     * marked by attnd_async_conn_closed, and one listed after (a buffer
     * registered by a request handled after the close) is marked when it
     * lists itself (attn_server_set_conn_open), so its wait, entered at any
     * time, is released.  Runs hold their buffers until they complete
     * (the waits released and queued runs cancelled here use them), then
     * they unmap */
    attnd_buffers_drop_conn(s->buffers, conn);
    attnd_async_conn_closed(s->async, conn);
    attnd_pool_table_conn_closed(s->pools, conn);
}

void attn_server_conn_closed_cb(void *arg, uint32_t conn)
{
    attn_server_conn_closed(arg, conn);
}

void attn_server_set_conn_open(attn_server *s, bool (*open)(void *arg, uint32_t conn), void *arg)
{
    attnd_async_set_conn_open(s->async, open, arg);
}

int attn_server_is_cheap_cb(void *arg, const void *req, size_t len)
{
    return attn_server_is_cheap(arg, req, len);
}

int attn_server_refuse_cb(void *arg, const void *req, size_t len, int code, void **reply,
                          size_t *reply_len)
{
    return attn_server_refuse(arg, req, len, code, reply, reply_len);
}

int attn_server_metrics_text_cb(void *arg, char **text, size_t *len)
{
    return attn_server_metrics_text(arg, text, len);
}
