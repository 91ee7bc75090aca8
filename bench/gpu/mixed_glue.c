/* ctypes entry points of libattn_cuda_bench.so for mixed batches through
 * the cuda_prefill engine itself (plan once, run per layer, issue 12), so
 * the benchmark times exactly what attnd runs under each policy.schedule
 * on K/V stores the benchmark (PyTorch) owns: every peer reads the same
 * pages in one process.  Pool layout NHD [num_pages, page, H_kv, d], bf16;
 * q, k_new, v_new, o and lse are host buffers (the engine's contract).
 * The engine's time is its CUDA events: append + attention kernels.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn/error.h"
#include "engines/cuda/prefill_engine.h"
#include "planner/engine.h"
#include "protocol/manifest.h"

typedef struct attnmx {
    attn_engine *eng;
    attn_engine_plan *plan;
    attn_manifest m;
    attn_pool_geometry g;
    void *kd[1], *vd[1];
    attn_pool_view pv;
    uint64_t *probe; /* device: the co-residency probe (attnmx_probe_run), or NULL */
    char err[256];
} attnmx;

/* Release a handle (NULL ignored). */
void attnmx_destroy(attnmx *h)
{
    if (!h)
        return;
    if (h->probe)
        cudaFree(h->probe);
    attn_engine_plan_release(h->plan);
    attn_engine_destroy(h->eng);
    free(h->m.requests);
    free(h->m.qo_indptr);
    free(h->m.kv.page_indptr);
    free(h->m.kv.page_indices);
    free(h->m.kv.last_page_len);
    free(h);
}

/* Plan B causal requests (T[b], C[b]) over a CSR paged bf16 NHD pool
 * whose K and V stores are the device pointers k_store / v_store, under
 * `schedule` (an attn_schedule_policy), on cuda_prefill (engine 0, the
 * mixed path) or cuda_decode (engine 1, the specialised decode engine).
 * NULL on failure, with the sentence in why[n]. */
attnmx *attnmx_create(uint32_t B, const int64_t *T, const int64_t *C, const int32_t *page_indptr,
                      const int32_t *page_indices, const int32_t *last_page_len, uint32_t num_pages,
                      uint32_t page_size, uint32_t hq, uint32_t hkv, uint32_t d, int schedule,
                      int engine, void *k_store, void *v_store, char *why, size_t why_n)
{
    attnmx *h = calloc(1, sizeof *h);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    if (!h)
        return NULL;
    attn_manifest *m = &h->m;
    snprintf(m->pool, sizeof m->pool, "bench");
    m->num_qo_heads = hq;
    m->num_requests = B;
    m->requests = calloc(B, sizeof *m->requests);
    m->qo_indptr = calloc(B + 1, sizeof *m->qo_indptr);
    m->kv.format = ATTN_KV_CSR;
    m->kv.page_indptr = malloc(sizeof(int32_t) * (B + 1));
    m->kv.num_page_indices = (uint32_t)page_indptr[B];
    m->kv.page_indices = malloc(sizeof(int32_t) * (page_indptr[B] + 1));
    m->kv.last_page_len = malloc(sizeof(int32_t) * B);
    if (!m->requests || !m->qo_indptr || !m->kv.page_indptr || !m->kv.page_indices ||
        !m->kv.last_page_len) {
        snprintf(why, why_n, "out of memory");
        attnmx_destroy(h);
        return NULL;
    }
    for (uint32_t b = 0; b < B; b++) {
        snprintf(m->requests[b].id, sizeof m->requests[b].id, "r%u", b);
        m->requests[b].cache_len = T[b];
        m->requests[b].new_len = C[b];
        m->qo_indptr[b + 1] = m->qo_indptr[b] + (int32_t)C[b];
        m->kv.last_page_len[b] = last_page_len[b];
    }
    memcpy(m->kv.page_indptr, page_indptr, sizeof(int32_t) * (B + 1));
    memcpy(m->kv.page_indices, page_indices, sizeof(int32_t) * page_indptr[B]);
    m->mask.kind = ATTN_MASK_CAUSAL;
    m->q_dtype = ATTN_BF16;
    m->policy.schedule = (attn_schedule_policy)schedule;
    m->policy.state_abi = ATTN_ABI_LSE_O;
    attn_pool_geometry *g = &h->g;
    snprintf(g->name, sizeof g->name, "bench");
    snprintf(g->device, sizeof g->device, "cuda:0");
    g->layers = 1;
    g->num_pages = num_pages;
    g->page_size = page_size;
    g->num_kv_heads = hkv;
    g->head_dim_qk = g->head_dim_vo = d;
    g->kv_dtype = ATTN_BF16;
    g->layout = ATTN_NHD;
    h->kd[0] = k_store;
    h->vd[0] = v_store;
    h->pv = (attn_pool_view){
        .geom = &h->g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = h->kd, .v = h->vd};
    attn_engine_config cfg = {.device = 0, .num_threads = 0, .tuning = NULL};
    int rv = attn_manifest_validate(m, g, &err);
    attn_admission adm;
    if (rv == 0 && (rv = attn_engine_create(engine == 1 ? attn_cuda_engine_ops()
                                                        : attn_cuda_prefill_engine_ops(),
                                            &cfg, &h->eng, &err)) == 0) {
        h->eng->ops->admit(h->eng, m, g, &adm);
        if (!adm.admitted)
            rv = attn_error_set(&err, ATTN_E_BACKEND_REJECTED, adm.reasons[0].field, "%s",
                                adm.reasons[0].text);
    }
    if (rv == 0)
        rv = attn_engine_plan_new(h->eng, m, g, &h->plan, &err);
    if (rv != 0) {
        snprintf(why, why_n, "%s %s: %s", attn_err_name(rv), err.field, err.message);
        attnmx_destroy(h);
        return NULL;
    }
    return h;
}

/* The schedule the plan runs (an attn_schedule_policy) and its why. */
int attnmx_schedule(const attnmx *h, char *why, size_t n)
{
    if (why && n)
        snprintf(why, n, "%s", h->plan->schedule_why);
    return (int)h->plan->schedule;
}

/* One run, no commit (the pool is restored); *us = the engine's CUDA-event
 * time.  Returns 0 or an attn_err (the sentence in attnmx_run_error). */
int attnmx_run(attnmx *h, const void *q, const void *k_new, const void *v_new, void *o, float *lse,
               double *us)
{
    attn_run_io io = {.pool = &h->pv,
                      .layer = 0,
                      .q = q,
                      .k_new = k_new,
                      .v_new = v_new,
                      .o = o,
                      .lse = lse,
                      .commit = false};
    attn_exec_report rep;
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    int rv = attn_engine_run(h->eng, h->plan, &io, &rep, &err);
    if (rv != 0) {
        snprintf(h->err, sizeof h->err, "%s %s: %s", attn_err_name(rv), err.field, err.message);
        return rv;
    }
    *us = rep.engine_us;
    return 0;
}

/* The last failed run's sentence. */
const char *attnmx_run_error(const attnmx *h)
{
    return h->err;
}

/* What the plan holds, for the cost model's calibration: out[0] executed
 * prefill-kernel tiles x H_kv, out[1] its work items, out[2] the schedule,
 * out[3] producer items of the whole plan (decode sub-plan included),
 * out[4] the prefill launch's merges (m tiles cut into parts). */
void attnmx_info(const attnmx *h, uint64_t *out)
{
    const attn_prefill_ledger *lg = &h->plan->tiles.ledger;
    attn_cuda_prefill_plan_info pi;
    memset(out, 0, sizeof(uint64_t) * 5);
    if (attn_cuda_prefill_plan_info_get(h->plan, &pi) == 0) {
        out[0] = lg->full_tiles + lg->partial_tiles;
        out[1] = pi.num_items;
        out[4] = pi.num_merges;
    }
    out[2] = (uint64_t)h->plan->schedule;
    out[3] = h->plan->split.num_items;
}

/* One run with the engine's co-residency probe on (a forked run: overlap
 * or forked partition): out[0], out[1] = the GPU times (ns) at which the
 * decode kernels' stream reached and left them, then per prefill CTA
 * {%smid, start, end} (3 x SMs values), then the same for the first
 * decode_ctas CTAs of the decode producer; n_out = 2 + 3 x (SMs +
 * decode_ctas).  The probe is off again afterwards.  Returns 0 or an
 * attn_err. */
int attnmx_probe_run(attnmx *h, const void *q, const void *k_new, const void *v_new, void *o,
                     float *lse, uint64_t *out, uint32_t n_out, uint32_t decode_ctas)
{
    const size_t bytes = sizeof(uint64_t) * n_out;
    if (!h->probe && cudaMalloc((void **)&h->probe, bytes) != cudaSuccess)
        return ATTN_E_CUDA;
    if (cudaMemset(h->probe, 0, bytes) != cudaSuccess)
        return ATTN_E_CUDA;
    attn_cuda_prefill_tuning t;
    memset(&t, 0, sizeof t);
    t.probe = h->probe;
    t.probe_decode_ctas = decode_ctas;
    t.overlap_trial = ATTN_OVERLAP_LIGHT; /* a probe run is the light overlap trial */
    attn_cuda_prefill_engine_set_tuning(h->eng, &t);
    double us = 0;
    int rv = attnmx_run(h, q, k_new, v_new, o, lse, &us);
    t.probe = NULL;
    attn_cuda_prefill_engine_set_tuning(h->eng, &t);
    if (rv == 0 && cudaMemcpy(out, h->probe, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        rv = ATTN_E_CUDA;
    return rv;
}
