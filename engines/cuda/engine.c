/* The CUDA engine's host side: admission, pools, and the engine instance
 * (plan once, run per layer) behind planner/engine.h.
 *
 * Plain C over the CUDA runtime API (cuda_runtime_api.h), so the daemon
 * links it like any module.  The kernels live in decode.cu behind
 * decode_launch.h.  Without ATTN_WITH_CUDA every entry point still exists
 * and says "built without CUDA"; the host half of planning
 * (attn_cuda_plan_host) is plain C in both builds.
 *
 * Plan (once per scheduler step): the split plan, the checks the manifest
 * validator cannot make (decode only, page ids against this pool, the
 * plan's capacity), the page list, request records with their visible key
 * ranges, work items and new-row offsets in one metadata image, uploaded
 * in one transfer to memory the plan owns; the ledger the run carves.
 * Run (per layer; seed 0x08C: one append transaction): copy q, k_new and
 * v_new in (one transfer through pinned staging), swap the new rows into their page slots (keeping
 * the old bytes), attend, copy O and LSE back, and put the old bytes back unless the caller
 * commits.  Any failure restores the pool before returning, so a failed run leaves it
 * byte-identical, or says ATTN_E_POOL_UNRESTORED when that cannot be confirmed
 * (engines/cuda/txn.h, the rule both CUDA engines share).
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/decode_plan.h"
#include "engines/cuda/instance.h"
#include "engines/cuda/ipc.h"
#include "engines/cuda/timeline.h"
#include "engines/cuda/txn.h"
#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "kernels/cuda/decode_launch.h"
#include "planner/ledger.h"
#include "planner/split.h"

#ifdef ATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

void attn_cuda_tuning_defaults(attn_cuda_tuning *t)
{
    memset(t, 0, sizeof *t);
    /* the best measured policy on the H200 (bench/results/decode-h200-*.md) */
    t->default_split = ATTN_SPLIT_FI;
    t->heads_fast = 1;
    t->row_prefetch = 1;
    t->bulk = ATTN_CUDA_BULK_DEFAULT; /* copy warps (issue 13, docs/cuda.md) */
    /* the last CTA of a split folds it, as the benchmark's attnd column has
     * measured since issue 13 round 1 (the reducer kernel where one round of
     * 128 threads does not cover the heads: fused_merge in decode.cu) */
    t->fused_merge = 1;
    t->wave_model = 1; /* ragged 64 x [256, 16384]: -11..-23 % (issue 13, docs/cuda.md) */
    t->pdl = ATTN_CUDA_PDL_DEFAULT; /* programmatic launch, late trigger (issue 13 round 3) */
    t->l2_evict_first = -1;         /* where the K/V exceed the L2 (issue 13 round 11) */
}

static void add_reason(attn_admission *out, attn_admit_factor f, const char *field, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static void add_reason(attn_admission *out, attn_admit_factor f, const char *field, const char *fmt,
                       ...)
{
    out->admitted = false;
    if (out->num_reasons >= ATTN_REASONS_MAX)
        return;
    attn_reason *r = &out->reasons[out->num_reasons++];
    r->factor = f;
    snprintf(r->field, sizeof r->field, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
}

static bool pow2(uint32_t x)
{
    return x && !(x & (x - 1));
}

uint64_t attn_cuda_store_bytes(const attn_pool_geometry *g, int v_store)
{
    uint64_t d = v_store ? g->head_dim_vo : g->head_dim_qk;
    return (uint64_t)g->num_pages * g->page_size * g->num_kv_heads * d *
           attn_dtype_size(g->kv_dtype);
}

void attn_cuda_admit(const attn_manifest *m, const attn_pool_geometry *g, attn_admission *out)
{
    memset(out, 0, sizeof *out);
    out->admitted = true;
    char why[160];
    int ndev = 0;
    if (!attn_cuda_available(&ndev, why, sizeof why))
        add_reason(out, ATTN_ADMIT_INSTALLED, "backend", "%s", why);
    if (g && strncmp(g->device, "cuda", 4) != 0)
        add_reason(out, ATTN_ADMIT_HARDWARE, "pool.device",
                   "pool lives on \"%s\"; the CUDA engine reads only device pools", g->device);
    for (uint32_t b = 0; b < m->num_requests; b++) {
        const attn_request_desc *r = &m->requests[b];
        if (r->new_len != 1 || r->cache_len <= 0) {
            char f[48];
            snprintf(f, sizeof f, "requests[%u].new_len", b);
            add_reason(out, ATTN_ADMIT_PHASE, f,
                       "request %u has (cache_len %lld, new_len %lld): only decode (T > 0, C = 1)",
                       b, (long long)r->cache_len, (long long)r->new_len);
            break; /* one reason per factor keeps the vector readable */
        }
    }
    if (m->q_dtype != ATTN_FP32 && m->q_dtype != ATTN_FP16 && m->q_dtype != ATTN_BF16)
        add_reason(out, ATTN_ADMIT_Q_DTYPE, "q_dtype", "q_dtype %d unknown", (int)m->q_dtype);
    if (!g)
        return;
    if (g->kv_dtype != ATTN_BF16 && g->kv_dtype != ATTN_FP16)
        add_reason(out, ATTN_ADMIT_KV_DTYPE, "kv_dtype", "kv_dtype %s not in {bf16, fp16}",
                   attn_dtype_name(g->kv_dtype));
    if (g->head_dim_qk != g->head_dim_vo)
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_vo",
                   "head_dim_vo %u differs from head_dim_qk %u", g->head_dim_vo, g->head_dim_qk);
    /* seed 0x07D: each unsupported head dimension is its own reason */
    if (g->head_dim_qk != 64 && g->head_dim_qk != 128 && g->head_dim_qk != 256)
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_qk", "head_dim_qk %u not in {64, 128, 256}",
                   g->head_dim_qk);
    if (g->head_dim_vo != 64 && g->head_dim_vo != 128 && g->head_dim_vo != 256)
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_vo", "head_dim_vo %u not in {64, 128, 256}",
                   g->head_dim_vo);
    if (g->num_kv_heads == 0 || m->num_qo_heads % g->num_kv_heads)
        add_reason(out, ATTN_ADMIT_HEAD_RATIO, "num_qo_heads",
                   "num_qo_heads %u is not a multiple of num_kv_heads %u", m->num_qo_heads,
                   g->num_kv_heads);
    if (!pow2(g->page_size) || g->page_size > 1024)
        add_reason(out, ATTN_ADMIT_LAYOUT, "page_size",
                   "page_size %u is not a power of two in [1, 1024]", g->page_size);
    uint32_t need = attn_mask_needs(&m->mask);
    uint32_t have =
        ATTN_MASK_NEED_CAUSAL | ATTN_MASK_NEED_NONE | ATTN_MASK_NEED_WINDOW | ATTN_MASK_NEED_SINK;
    if (need & ~have)
        add_reason(
            out, ATTN_ADMIT_MASK, "mask.kind",
            "mask kind %s needs per-cell tests; the decode producer applies length masks only",
            attn_mask_need_name(need));
    if (m->policy.state_abi != ATTN_ABI_LSE_O && m->policy.state_abi != ATTN_ABI_MLU)
        add_reason(out, ATTN_ADMIT_NUMERICS, "policy.state_abi", "state ABI %d unknown",
                   (int)m->policy.state_abi);
}

/* ---- the host half of a plan (no CUDA call) ------------------------------- */

/* What a plan keeps for its runs. */
typedef struct cuda_plan_priv {
    attn_cuda_tuning tuning;
    attn_cuda_plan_info info;
    int device;
    /* the metadata image: counts | reqs | items | pages | row offsets */
    void *host_meta; /* freed once uploaded */
    void *dev_meta;  /* the plan's device copy, uploaded once */
    size_t meta_bytes;
    size_t off_counts, off_reqs, off_items, off_pages, off_rows;
    /* the decode parameters that do not change per layer (pointers into
     * dev_meta are filled at upload) */
    attn_cuda_decode_params params;
    uint32_t total_q;
    size_t q_bytes, kv_bytes, lse_bytes, cnt_bytes;
    int64_t head_stride;
} cuda_plan_priv;

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static bool ledger_ok(const attn_ledger *led, attn_state_abi abi, uint32_t d)
{
    return attn_ledger_find(led, abi == ATTN_ABI_MLU ? "partial_u" : "partial_O") != NULL &&
           attn_ledger_find(led, abi == ATTN_ABI_MLU ? "partial_m" : "partial_LSE") != NULL &&
           (abi != ATTN_ABI_MLU || attn_ledger_find(led, "partial_l") != NULL) &&
           led->head_dim_padded == d;
}

void attn_cuda_plan_host_free(attn_engine_plan *p)
{
    cuda_plan_priv *pp = p->priv;
    if (pp != NULL) {
#ifdef ATTN_WITH_CUDA
        if (pp->dev_meta != NULL) {
            cudaSetDevice(pp->device);
            cudaFree(pp->dev_meta);
        }
#endif
        free(pp->host_meta);
        free(pp);
        p->priv = NULL;
    }
    if (p->split.slot_indptr != NULL || p->split.items != NULL || p->split.num_splits != NULL)
        attn_split_plan_free(&p->split);
}

uint64_t attn_cuda_plan_meta_bytes(const attn_engine_plan *p)
{
    const cuda_plan_priv *pp = p->priv;
    return pp != NULL ? pp->meta_bytes : 0;
}

int attn_cuda_plan_params(const attn_engine_plan *p, attn_cuda_decode_params *out)
{
    const cuda_plan_priv *pp = p != NULL ? p->priv : NULL;
    if (pp == NULL || pp->dev_meta == NULL || pp->params.reqs == NULL)
        return ATTN_E_ENGINE;
    *out = pp->params;
    return 0;
}

static int split_plan(const attn_manifest *m, const attn_pool_geometry *g,
                      const attn_cuda_device_facts *dev, const attn_cuda_tuning *t,
                      attn_split_plan *out, attn_cuda_plan_info *info, attn_error_detail *err)
{
    attn_split_params sp;
    memset(&sp, 0, sizeof sp);
    attn_split_params_from_manifest(m, g->num_kv_heads, &sp);
    sp.default_policy = t->default_split == ATTN_SPLIT_FA || t->default_split == ATTN_SPLIT_GLOBAL
                            ? t->default_split
                            : ATTN_SPLIT_FI;
    /* seed 0x0AD: workers = SMs x resident producer CTAs per SM (measured);
     * one split occupies H_kv x head-chunk CTAs */
    sp.grid_capacity = dev->sm_count * dev->ctas_per_sm;
    sp.units_per_split = g->num_kv_heads * (dev->head_chunks ? dev->head_chunks : 1);
    sp.kv_block = g->page_size; /* FI searches in whole pages */
    sp.min_chunk = ATTN_SPLIT_MIN_CHUNK_CUDA;
    sp.fi_max_splits = ATTN_SPLIT_FI_MAX_SPLITS_CUDA;
    sp.wave_model = t->wave_model != 0;
    sp.wave_item_keys = ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA;
    sp.wave_merge_keys = ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA;
    info->policy = sp.policy == ATTN_SPLIT_AUTO ? sp.default_policy : sp.policy;
    info->sm_count = dev->sm_count;
    info->ctas_per_sm = dev->ctas_per_sm;
    info->grid_capacity = sp.grid_capacity;
    return attn_split_plan_build(m, &sp, out, err);
}

int attn_cuda_plan_host(const attn_manifest *m, const attn_pool_geometry *g,
                        const attn_cuda_device_facts *dev, const attn_cuda_tuning *t,
                        attn_engine_plan *out, attn_error_detail *err)
{
    return attn_cuda_plan_host_rows(m, g, dev, t, NULL, out, err);
}

int attn_cuda_plan_host_rows(const attn_manifest *m, const attn_pool_geometry *g,
                             const attn_cuda_device_facts *dev, const attn_cuda_tuning *t,
                             const int32_t *rows, attn_engine_plan *out, attn_error_detail *err)
{
    const uint32_t B = m->num_requests, Hq = m->num_qo_heads, Hkv = g->num_kv_heads;
    const uint32_t d = g->head_dim_qk;
    attn_cuda_tuning defaults;
    attn_mask_prog mp;
    char f[96];
    int rv;

    memset(&mp, 0, sizeof mp);
    if (t == NULL) {
        attn_cuda_tuning_defaults(&defaults);
        t = &defaults;
    }
    if (dev->sm_count == 0 || dev->ctas_per_sm == 0)
        return attn_error_set(err, ATTN_E_SHAPE, "head_dim_qk",
                              "no producer kernel for head_dim %u / %s on cuda:%d", d,
                              attn_dtype_name(g->kv_dtype), dev->device);
    cuda_plan_priv *pp = calloc(1, sizeof *pp);
    if (pp == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the plan");
    out->priv = pp;
    pp->tuning = *t;
    pp->device = dev->device;
    for (uint32_t b = 0; b < B; b++)
        if (m->requests[b].new_len != 1 || m->requests[b].cache_len <= 0 ||
            m->qo_indptr[b + 1] - m->qo_indptr[b] != 1) {
            snprintf(f, sizeof f, "requests[%u].new_len", b);
            rv =
                attn_error_set(err, ATTN_E_PHASE, f, "cuda_decode runs decode only (T > 0, C = 1)");
            goto fail;
        }
    if ((rv = split_plan(m, g, dev, t, &out->split, &pp->info, err)) != 0)
        goto fail;
    const attn_split_plan *plan = &out->split;
    if (plan->slot_capacity && plan->num_slots > plan->slot_capacity) {
        rv = attn_error_set(err, ATTN_E_CAPACITY, "policy.splits", "%u slots exceed capacity %u",
                            plan->num_slots, plan->slot_capacity);
        goto fail;
    }
    if ((rv = attn_mask_prog_build(&m->mask, m->requests, B, &mp, err)) != 0)
        goto fail;

    /* flattened page lists through the one address program (addr.h) */
    attn_kv_addr ad;
    attn_kv_addr_from_table(&ad, &m->kv, B, g);
    uint64_t npages = 0;
    for (uint32_t b = 0; b < B; b++)
        npages += (uint64_t)((attn_kv_addr_len(&ad, b) + g->page_size - 1) / g->page_size);
    pp->total_q = (uint32_t)m->qo_indptr[B];

    /* one metadata image: counts | reqs | items | pages | row offsets */
    pp->off_counts = 0;
    pp->off_reqs = align256(sizeof(attn_cuda_counts));
    pp->off_items = pp->off_reqs + align256(sizeof(attn_cuda_req) * B);
    pp->off_pages = pp->off_items + align256(sizeof(attn_work_item) * (plan->num_items + 1));
    pp->off_rows = pp->off_pages + align256(sizeof(int32_t) * (npages + 1));
    pp->meta_bytes = pp->off_rows + align256(sizeof(int64_t) * pp->total_q);
    if ((pp->host_meta = calloc(1, pp->meta_bytes)) == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %zu metadata bytes",
                            pp->meta_bytes);
        goto fail;
    }
    char *hm = (char *)pp->host_meta;
    attn_cuda_counts *cnt = (attn_cuda_counts *)(hm + pp->off_counts);
    attn_cuda_req *rq = (attn_cuda_req *)(hm + pp->off_reqs);
    int32_t *pg = (int32_t *)(hm + pp->off_pages);
    int64_t *row_off = (int64_t *)(hm + pp->off_rows);
    cnt->num_items = (int32_t)plan->num_items;
    cnt->num_requests = (int32_t)B;
    memcpy(hm + pp->off_items, plan->items, sizeof(attn_work_item) * plan->num_items);
    uint32_t shift = 0;
    while ((1u << shift) < g->page_size)
        shift++;
    int any_split = 0;
    uint64_t pi = 0;
    for (uint32_t b = 0; b < B; b++) {
        int64_t len = attn_kv_addr_len(&ad, b);
        int64_t nb = (len + g->page_size - 1) / g->page_size;
        rq[b].page_begin = (int32_t)pi;
        for (int64_t j = 0; j < nb; j++) {
            int64_t page = attn_kv_addr_block_page(&ad, b, j);
            if (page < 0 || page >= (int64_t)g->num_pages) {
                snprintf(f, sizeof f, "kv.page_indices (request %u, block %lld)", b, (long long)j);
                rv = attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL, f, "page %lld outside [0, %u)",
                                    (long long)page, g->num_pages);
                goto fail;
            }
            pg[pi++] = (int32_t)page;
        }
        attn_row_keys k = attn_mask_row_keys(&mp, b, 0);
        rq[b].lo0 = k.lo0;
        rq[b].hi0 = k.hi0;
        rq[b].lo1 = k.lo1;
        rq[b].hi1 = k.hi1;
        rq[b].qrow = rows != NULL ? rows[b] : m->qo_indptr[b];
        rq[b].slot_begin = (int32_t)plan->slot_indptr[b];
        rq[b].num_slots = (int32_t)(plan->slot_indptr[b + 1] - plan->slot_indptr[b]);
        if (rq[b].num_slots > 1)
            any_split = 1;
        /* the new row lands at logical position T_b (seed 0x08C) */
        int64_t page, slot;
        if (!attn_kv_addr_locate(&ad, b, m->requests[b].cache_len, &page, &slot)) {
            snprintf(f, sizeof f, "requests[%u].cache_len", b);
            rv = attn_error_set(err, ATTN_E_COVERAGE, f, "no page slot for the new row");
            goto fail;
        }
        row_off[m->qo_indptr[b]] = attn_kv_addr_elem(&ad, page, slot, 0, 0, d);
    }
    attn_mask_prog_free(&mp);

    /* the workspace the run carves: one state per (slot, query head) */
    uint32_t slot_cap =
        plan->slot_capacity > plan->num_slots ? plan->slot_capacity : plan->num_slots;
    attn_ledger_spec ls;
    memset(&ls, 0, sizeof ls);
    ls.abi = m->policy.state_abi;
    ls.states = (uint64_t)slot_cap * Hq;
    ls.head_dim_vo = d;
    ls.vec_align = 4;
    ls.vec_dtype = ATTN_FP32;
    ls.scalar_dtype = ATTN_FP32;
    ls.align_bytes = 256;
    if ((rv = attn_ledger_layout(&ls, NULL, 0, &out->ledger, err)) != 0)
        goto fail;
    if (!ledger_ok(&out->ledger, ls.abi, d)) {
        rv = attn_error_set(err, ATTN_E_WORKSPACE, "policy.state_abi",
                            "the ledger lacks the fields the producer writes");
        goto fail;
    }

    /* the launch parameters that stay fixed for the plan's life */
    const size_t es = attn_dtype_size(g->kv_dtype), qs = attn_dtype_size(m->q_dtype);
    pp->q_bytes = (size_t)pp->total_q * Hq * d * qs;
    pp->kv_bytes = (size_t)pp->total_q * Hkv * d * es;
    pp->lse_bytes = (size_t)pp->total_q * Hq * sizeof(float);
    pp->cnt_bytes = (size_t)B * Hkv * (dev->head_chunks ? dev->head_chunks : 1) * sizeof(int32_t);
    pp->head_stride = g->layout == ATTN_HND ? (int64_t)g->page_size * d : (int64_t)d;
    attn_cuda_decode_params *pr = &pp->params;
    pr->item_capacity = plan->num_items;
    pr->request_capacity = B;
    pr->num_qo_heads = Hq;
    pr->num_kv_heads = Hkv;
    pr->head_dim = d;
    pr->page_shift = shift;
    pr->page_stride = (int64_t)g->page_size * Hkv * d;
    pr->head_stride = pp->head_stride;
    pr->row_stride = attn_kv_addr_slot_stride(&ad, d);
    pr->q_dtype = m->q_dtype;
    pr->kv_dtype = g->kv_dtype;
    pr->abi = m->policy.state_abi;
    pr->sm_scale = attn_manifest_sm_scale(m, g);
    pr->any_split = any_split;
    pr->force_merge = m->policy.graph;
    pr->simt = t->simt;
    pr->fused_merge = t->fused_merge;
    /* ATTN_CUDA_PDL_NO_WAIT is the mixed one-stream fork's alone: this
     * engine's producer reads the rows its append kernel just wrote */
    pr->pdl = t->pdl == ATTN_CUDA_PDL_NO_WAIT ? ATTN_CUDA_PDL_DEFAULT : t->pdl;
    pr->persist = t->persist < 0 ? dev->sm_count * (dev->ctas_per_sm ? dev->ctas_per_sm : 1)
                                 : (uint32_t)t->persist;
    pr->row_prefetch = t->row_prefetch;
    pr->bulk = t->bulk;
    pr->num_pages = g->num_pages;
    pr->keys_per_item = attn_decode_keys_per_item(plan->items, plan->num_items);
    pr->l2_evict_first = attn_decode_path_l2_evict_first(
        t->l2_evict_first,
        attn_decode_kv_bytes(plan->items, plan->num_items, g->num_kv_heads, d,
                             (uint32_t)attn_dtype_size(g->kv_dtype)),
        dev->l2_bytes);
    pr->sm_count = dev->sm_count;
    pr->heads_fast = t->heads_fast && plan->num_items <= 65535u;

    attn_engine_env_cuda(&out->env, dev->device, dev->cc_major, dev->cc_minor);
    /* the metadata image: on the host until the upload, then its device copy */
    out->priv_bytes = sizeof *pp + pp->meta_bytes;
    out->schedule = ATTN_SCHED_PARTITION;
    /* who folds split requests (as attn_cuda_decode_launch decides): the
     * producers' last CTAs, or the reducer kernel */
    const char *fold = !(any_split || pr->force_merge) ? "no request split"
                       : attn_decode_path_fused(pr->fused_merge, pr->simt, Hq / Hkv, d)
                           ? "each split request folded by its last producer CTA"
                           : "then the reducer";
    const bool asked = m->policy.schedule == ATTN_SCHED_PARTITION;
    snprintf(out->schedule_why, sizeof out->schedule_why, "%s: decode producers, %s%s",
             asked ? "as asked" : "auto", fold, asked ? "" : " (the only schedule of cuda_decode)");
    return 0;
fail:
    attn_mask_prog_free(&mp);
    attn_cuda_plan_host_free(out);
    return rv;
}

int attn_cuda_plan_info_get(const attn_engine_plan *p, attn_cuda_plan_info *out)
{
    memset(out, 0, sizeof *out);
    if (p == NULL || p->owner == NULL || p->owner->ops != attn_cuda_engine_ops() || p->priv == NULL)
        return ATTN_E_ENGINE;
    *out = ((const cuda_plan_priv *)p->priv)->info;
    return 0;
}

/* ---- the instance ---------------------------------------------------------- */

static void engine_admit(const attn_engine *self, const attn_manifest *m,
                         const attn_pool_geometry *g, attn_admission *out)
{
    attn_cuda_admit(m, g, out);
}

static void engine_plan_free(attn_engine *self, attn_engine_plan *p)
{
    attn_cuda_plan_host_free(p);
}

#ifndef ATTN_WITH_CUDA

int attn_cuda_available(int *num_devices, char *why, size_t n)
{
    if (num_devices)
        *num_devices = 0;
    if (why && n)
        snprintf(why, n, "attnd was built without CUDA (make CUDA=0)");
    return 0;
}

int attn_cuda_pool_alloc(int device, uint64_t bytes, void **out, attn_error_detail *err)
{
    *out = NULL;
    return attn_error_set(err, ATTN_E_CUDA, "device", "built without CUDA");
}

void attn_cuda_pool_free(int device, void *store)
{
}

int attn_cuda_pool_pages(const attn_pool_geometry *g, int device, void *store, int v_store,
                         const int32_t *pages, uint32_t num_pages, void *host, int write,
                         attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "device", "built without CUDA");
}

int attn_cuda_device_info_get(int device, attn_cuda_device_info *out, attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    return attn_error_set(err, ATTN_E_CUDA, "device", "built without CUDA");
}

static int engine_init(const attn_engine_config *cfg, void **state, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "device", "attnd was built without CUDA (make CUDA=0)");
}

static void engine_fini(void *state)
{
}

static int engine_plan(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                       attn_engine_plan *out, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

int attn_cuda_plan_upload(attn_engine_plan *p, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

static int engine_run(attn_engine *self, attn_engine_plan *p, const attn_run_io *io,
                      attn_exec_report *rep, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

void attn_cuda_engine_set_tuning(attn_engine *e, const attn_cuda_tuning *t)
{
}

attn_cuda_ipc *attn_cuda_engine_ipc(attn_engine *e, char *why, size_t n)
{
    if (why != NULL && n > 0)
        snprintf(why, n, "built without CUDA");
    return NULL;
}

#else /* ATTN_WITH_CUDA */

int attn_cuda_available(int *num_devices, char *why, size_t n)
{
    int c = 0;
    cudaError_t e = cudaGetDeviceCount(&c);
    if (num_devices)
        *num_devices = e == cudaSuccess ? c : 0;
    if (e != cudaSuccess || c == 0) {
        if (why && n)
            snprintf(why, n, "no CUDA device: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return 0;
    }
    return 1;
}

int attn_cuda_pool_alloc(int device, uint64_t bytes, void **out, attn_error_detail *err)
{
    *out = NULL;
    if (cudaSetDevice(device) != cudaSuccess)
        return attn_error_set(err, ATTN_E_CUDA, "device", "cannot select cuda:%d", device);
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *out = NULL;
        return attn_error_set(err, e == cudaErrorMemoryAllocation ? ATTN_E_NOMEM : ATTN_E_CUDA,
                              "num_pages", "cudaMalloc(%llu) failed: %s", (unsigned long long)bytes,
                              cudaGetErrorString(e));
    }
    /* zero, so a page never written reads as zeros, not as another pool's data */
    if (cudaMemset(*out, 0, bytes ? bytes : 16) != cudaSuccess) {
        cudaFree(*out);
        *out = NULL;
        return attn_error_set(err, ATTN_E_CUDA, "device", "cudaMemset failed");
    }
    return 0;
}

void attn_cuda_pool_free(int device, void *store)
{
    if (!store)
        return;
    cudaSetDevice(device);
    cudaFree(store);
}

int attn_cuda_pool_pages(const attn_pool_geometry *g, int device, void *store, int v_store,
                         const int32_t *pages, uint32_t num_pages, void *host, int write,
                         attn_error_detail *err)
{
    uint64_t page_bytes = attn_cuda_store_bytes(g, v_store) / (g->num_pages ? g->num_pages : 1);
    for (uint32_t i = 0; i < num_pages; i++)
        if (pages[i] < 0 || (uint32_t)pages[i] >= g->num_pages) {
            char f[32];
            snprintf(f, sizeof f, "pages[%u]", i);
            return attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL, f, "page %d outside [0, %u)",
                                  pages[i], g->num_pages);
        }
    if (cudaSetDevice(device) != cudaSuccess)
        return attn_error_set(err, ATTN_E_CUDA, "device", "cannot select cuda:%d", device);
    /* a page is contiguous in both layouts ([P,H,d] or [H,P,d]); runs of
     * consecutive page ids move in one copy */
    for (uint32_t i = 0; i < num_pages;) {
        uint32_t j = i + 1;
        while (j < num_pages && pages[j] == pages[j - 1] + 1)
            j++;
        char *dev = (char *)store + (uint64_t)pages[i] * page_bytes;
        char *h = (char *)host + (uint64_t)i * page_bytes;
        uint64_t n = (uint64_t)(j - i) * page_bytes;
        cudaError_t e = write ? cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice)
                              : cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            return attn_error_set(err, ATTN_E_CUDA, "pages", "cudaMemcpy failed: %s",
                                  cudaGetErrorString(e));
        i = j;
    }
    return 0;
}

int attn_cuda_device_info_get(int device, attn_cuda_device_info *out, attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, device) != cudaSuccess)
        return attn_error_set(err, ATTN_E_CUDA, "device", "no properties for cuda:%d", device);
    snprintf(out->name, sizeof out->name, "%.127s", pr.name);
    out->cc_major = pr.major;
    out->cc_minor = pr.minor;
    out->sm_count = pr.multiProcessorCount;
    out->total_mem = pr.totalGlobalMem;
    out->l2_bytes = (uint64_t)pr.l2CacheSize;
    cudaDriverGetVersion(&out->driver_version);
    cudaRuntimeGetVersion(&out->runtime_version);
    /* identity of the loaded image: the symbols this engine can launch */
    uint64_t h = 1469598103934665603ull;
    static const uint32_t dims[] = {64, 128, 256};
    static const attn_dtype dts[] = {ATTN_BF16, ATTN_FP16};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            attn_cuda_decode_params p;
            memset(&p, 0, sizeof p);
            p.head_dim = dims[i];
            p.kv_dtype = dts[j];
            p.any_split = 1;
            const char *ps = NULL, *rs = NULL;
            attn_cuda_decode_symbols(&p, &ps, &rs);
            for (const char *s = ps; s && *s; s++)
                h = (h ^ (uint8_t)*s) * 1099511628211ull;
            for (const char *s = rs; s && *s; s++)
                h = (h ^ (uint8_t)*s) * 1099511628211ull;
        }
    h = (h ^ (uint64_t)out->runtime_version) * 1099511628211ull;
    snprintf(out->image_id, sizeof out->image_id, "%016llx", (unsigned long long)h);
    return 0;
}

/* Deferred runs in flight at most (the daemon keeps two). */
#define CUDA_DEFER_SLOTS 16

/* One instance: its device, stream, events and the buffers every run
 * reuses, grown when a plan needs more (the workspace from the ledger,
 * seed 0x03E). */
typedef struct cuda_instance {
    pthread_mutex_t mu; /* one run at a time on the stream and the buffers */
    attn_cuda_device_facts dev;
    attn_cuda_tuning tuning;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    void *dev_io; /* q | k_new | v_new | o | lse | saved k | saved v */
    size_t dev_io_cap;
    void *host_io; /* pinned, laid out like dev_io up to lse: one copy each way */
    size_t host_io_cap;
    void *dev_ws; /* partial states */
    size_t dev_ws_cap;
    void *dev_cnt; /* fused-reducer counters, zero between runs */
    size_t dev_cnt_cap;
    attn_cuda_ipc *ipc; /* IPC handles and semaphores; NULL when the driver lacks them */
    char ipc_why[160];  /* why ipc is NULL */
    /* deferred runs (attn_run_io.defer): tickets [done_ticket, next_ticket)
     * are enqueued and not yet completed; each has its pair of events */
    cudaEvent_t def0[CUDA_DEFER_SLOTS], def1[CUDA_DEFER_SLOTS];
    uint32_t def_layer[CUDA_DEFER_SLOTS]; /* what a failed completion names */
    uint64_t next_ticket, done_ticket;
    /* ATTN_CUDA_TIMELINE: stamps of every run (slot: its ticket's, or
     * CUDA_DEFER_SLOTS for a run that synchronises); NULL when unset */
    attn_cuda_timeline *tl;
} cuda_instance;

/* Pinned host staging that grows as attn_cuda_grow does (instance.h). */
static cudaError_t grow_host(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return cudaSuccess;
    if (*p)
        cudaFreeHost(*p);
    *p = NULL;
    *cap = 0;
    size_t n = need + need / 4;
    cudaError_t e = cudaMallocHost(p, n);
    if (e != cudaSuccess) {
        *p = NULL;
        return e;
    }
    *cap = n;
    return cudaSuccess;
}

/* Free what engine_init made of `ci` so far (every handle zero until made). */
static void instance_unwind(cuda_instance *ci)
{
    attn_cuda_timeline_close(ci->tl);
    attn_cuda_ipc_destroy(ci->ipc);
    for (int i = 0; i < CUDA_DEFER_SLOTS; i++) {
        if (ci->def0[i] != NULL)
            cudaEventDestroy(ci->def0[i]);
        if (ci->def1[i] != NULL)
            cudaEventDestroy(ci->def1[i]);
    }
    if (ci->ev0 != NULL)
        cudaEventDestroy(ci->ev0);
    if (ci->ev1 != NULL)
        cudaEventDestroy(ci->ev1);
    if (ci->stream != NULL)
        cudaStreamDestroy(ci->stream);
    free(ci);
}

static int engine_init(const attn_engine_config *cfg, void **state, attn_error_detail *err)
{
    int dev = cfg->device < 0 ? 0 : cfg->device, ndev = 0;
    cudaError_t e;
    int rv;
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess)
        return attn_cuda_error(err, e, "device", "cudaGetDeviceCount");
    if (dev >= ndev)
        return attn_error_set(err, ATTN_E_CUDA, "device", "cuda:%d does not exist (%d devices)",
                              dev, ndev);
    cuda_instance *ci = calloc(1, sizeof *ci);
    if (ci == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "engine", "out of memory");
    struct cudaDeviceProp pr;
    if ((e = cudaSetDevice(dev)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&pr, dev)) != cudaSuccess) {
        instance_unwind(ci);
        return attn_cuda_error(err, e, "device", "cannot select the device");
    }
    /* the timeline first: a bad ATTN_CUDA_TIMELINE path fails before any
     * stream or event exists (a failure past it leaked them: the unwind
     * now frees whatever was made) */
    const char *tl_path = getenv("ATTN_CUDA_TIMELINE");
    if (tl_path != NULL && tl_path[0] != '\0' &&
        (rv = attn_cuda_timeline_open(tl_path, dev, CUDA_DEFER_SLOTS + 1, &ci->tl, err)) != 0) {
        instance_unwind(ci);
        return rv;
    }
    if ((e = cudaStreamCreateWithFlags(&ci->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&ci->ev0)) != cudaSuccess ||
        (e = cudaEventCreate(&ci->ev1)) != cudaSuccess) {
        instance_unwind(ci);
        return attn_cuda_error(err, e, "device", "cannot set up the instance's stream and events");
    }
    for (int i = 0; i < CUDA_DEFER_SLOTS; i++)
        if ((e = cudaEventCreate(&ci->def0[i])) != cudaSuccess ||
            (e = cudaEventCreate(&ci->def1[i])) != cudaSuccess) {
            instance_unwind(ci);
            return attn_cuda_error(err, e, "device", "cannot create the deferred runs' events");
        }
    pthread_mutex_init(&ci->mu, NULL);
    {
        attn_error_detail ie;
        memset(&ie, 0, sizeof ie);
        if (attn_cuda_ipc_create(dev, &ci->ipc, &ie) != 0)
            snprintf(ci->ipc_why, sizeof ci->ipc_why, "%.150s", ie.message);
    }
    ci->dev.device = dev;
    ci->dev.cc_major = pr.major;
    ci->dev.cc_minor = pr.minor;
    ci->dev.sm_count = (uint32_t)pr.multiProcessorCount;
    ci->dev.l2_bytes = pr.l2CacheSize > 0 ? (uint64_t)pr.l2CacheSize : 0;
    if (cfg->tuning != NULL)
        ci->tuning = *(const attn_cuda_tuning *)cfg->tuning;
    else
        attn_cuda_tuning_defaults(&ci->tuning);
    *state = ci;
    return 0;
}

static void engine_fini(void *state)
{
    cuda_instance *ci = state;
    if (ci == NULL)
        return;
    cudaSetDevice(ci->dev.device);
    cudaStreamSynchronize(ci->stream);
    attn_cuda_ipc_destroy(ci->ipc);
    attn_cuda_timeline_close(ci->tl);
    cudaFree(ci->dev_io);
    cudaFreeHost(ci->host_io);
    cudaFree(ci->dev_ws);
    cudaFree(ci->dev_cnt);
    cudaEventDestroy(ci->ev0);
    cudaEventDestroy(ci->ev1);
    for (int i = 0; i < CUDA_DEFER_SLOTS; i++) {
        cudaEventDestroy(ci->def0[i]);
        cudaEventDestroy(ci->def1[i]);
    }
    cudaStreamDestroy(ci->stream);
    pthread_mutex_destroy(&ci->mu);
    free(ci);
}

attn_cuda_ipc *attn_cuda_engine_ipc(attn_engine *e, char *why, size_t n)
{
    if (e == NULL || e->ops != attn_cuda_engine_ops() || e->state == NULL) {
        if (why != NULL && n > 0)
            snprintf(why, n, "not a cuda_decode instance");
        return NULL;
    }
    cuda_instance *ci = e->state;
    if (ci->ipc == NULL && why != NULL && n > 0)
        snprintf(why, n, "%s", ci->ipc_why);
    return ci->ipc;
}

void attn_cuda_engine_set_tuning(attn_engine *e, const attn_cuda_tuning *t)
{
    if (e == NULL || e->ops != attn_cuda_engine_ops() || e->state == NULL)
        return;
    cuda_instance *ci = e->state;
    pthread_mutex_lock(&ci->mu);
    if (t != NULL)
        ci->tuning = *t;
    else
        attn_cuda_tuning_defaults(&ci->tuning);
    pthread_mutex_unlock(&ci->mu);
}

static int engine_plan(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                       attn_engine_plan *out, attn_error_detail *err)
{
    cuda_instance *ci = self->state;
    attn_cuda_device_facts dev;
    attn_cuda_tuning tuning;
    cudaError_t e;
    int rv;

    pthread_mutex_lock(&ci->mu);
    dev = ci->dev;
    tuning = ci->tuning;
    pthread_mutex_unlock(&ci->mu);
    if ((e = cudaSetDevice(dev.device)) != cudaSuccess)
        return attn_cuda_error(err, e, "device", "cudaSetDevice");
    uint32_t group = g->num_kv_heads ? m->num_qo_heads / g->num_kv_heads : 1;
    /* the producer the plan is sized for is the one it launches */
    tuning.bulk = attn_cuda_decode_plan_bulk(g->head_dim_qk, g->kv_dtype, m->q_dtype,
                                             m->num_qo_heads, g->num_kv_heads, g->page_size,
                                             m->num_requests, dev.sm_count, tuning.bulk);
    int occ = attn_cuda_decode_occupancy_path(g->head_dim_qk, g->kv_dtype, group, 0, tuning.bulk);
    dev.ctas_per_sm = occ > 0 ? (uint32_t)occ : 0;
    dev.head_chunks = attn_cuda_decode_head_chunks(g->head_dim_qk, g->kv_dtype, group);
    if ((rv = attn_cuda_plan_host(m, g, &dev, &tuning, out, err)) != 0)
        return rv;
    if ((rv = attn_cuda_plan_upload(out, err)) != 0) {
        attn_cuda_plan_host_free(out);
        return rv;
    }
    return 0;
}

int attn_cuda_plan_upload(attn_engine_plan *p, attn_error_detail *err)
{
    /* the one upload of plan time: every run reuses this copy */
    cuda_plan_priv *pp = p->priv;
    cudaError_t e;
    if ((e = cudaSetDevice(pp->device)) != cudaSuccess)
        return attn_cuda_error(err, e, "device", "cudaSetDevice");
    if ((e = cudaMalloc(&pp->dev_meta, pp->meta_bytes)) != cudaSuccess) {
        pp->dev_meta = NULL;
        return attn_cuda_error(err, e, "", "cudaMalloc of the plan's metadata");
    }
    if ((e = cudaMemcpy(pp->dev_meta, pp->host_meta, pp->meta_bytes, cudaMemcpyHostToDevice)) !=
        cudaSuccess)
        return attn_cuda_error(err, e, "", "upload of the plan's metadata");
    free(pp->host_meta);
    pp->host_meta = NULL;
    char *dm = (char *)pp->dev_meta;
    pp->params.reqs = (const attn_cuda_req *)(dm + pp->off_reqs);
    pp->params.page_indices = (const int32_t *)(dm + pp->off_pages);
    pp->params.items = (const attn_work_item *)(dm + pp->off_items);
    pp->params.counts = (const attn_cuda_counts *)(dm + pp->off_counts);
    return 0;
}

/* The run's rows for the append transaction (engines/cuda/txn.h): the new
 * rows at new_k/new_v (the run's buffers, or the client's own), the old
 * ones saved at o_sk/o_sv of the run's buffers. */
static attn_cuda_append_params append_rows(const cuda_plan_priv *pp, void *kst, void *vst,
                                           const void *new_k, const void *new_v, char *io,
                                           size_t o_sk, size_t o_sv)
{
    const attn_cuda_decode_params *pr = &pp->params;
    attn_cuda_append_params ap;
    memset(&ap, 0, sizeof ap);
    ap.k = kst;
    ap.v = vst;
    ap.row_off = (const int64_t *)((const char *)pp->dev_meta + pp->off_rows);
    ap.rows = pp->total_q;
    ap.num_kv_heads = pr->num_kv_heads;
    ap.head_dim = pr->head_dim;
    ap.head_stride = pp->head_stride;
    ap.kv_dtype = pr->kv_dtype;
    ap.new_k = new_k;
    ap.new_v = new_v;
    ap.save_k = io + o_sk;
    ap.save_v = io + o_sv;
    return ap;
}

/* The append kernel runs once to stage, twice when the rows go back
 * (no commit), never for a kv_written run (the rows are in the pool). */
static uint32_t append_launches(const attn_run_io *io)
{
    return io->kv_written ? 0u : io->commit ? 1u : 2u;
}

static void report_kernels(const attn_cuda_decode_params *p, uint32_t appends,
                           attn_exec_report *rep)
{
    const char *ps = NULL, *rs = NULL;
    attn_cuda_decode_symbols(p, &ps, &rs);
    const char *syms[3] = {attn_cuda_append_symbol(), ps, rs};
    uint32_t launches[3] = {appends, 1, 1};
    for (int i = 0; i < 3; i++)
        if (syms[i] && launches[i] && rep->num_kernels < ATTN_KERNELS_MAX) {
            snprintf(rep->kernels[rep->num_kernels].symbol, sizeof rep->kernels[0].symbol, "%s",
                     syms[i]);
            rep->kernels[rep->num_kernels++].launches = launches[i];
        }
    rep->kernels_observed = false;
}

#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t ck_ = (call);                                                                  \
        if (ck_ != cudaSuccess) {                                                                  \
            rv = attn_cuda_error(err, ck_, "", what);                                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* One stamp of the run's timeline (ATTN_CUDA_TIMELINE), when there is one. */
static int timeline_stamp(cuda_instance *ci, uint32_t slot, attn_cuda_timeline_point point,
                          cudaStream_t st, attn_error_detail *err)
{
    if (ci->tl == NULL || attn_cuda_timeline_stamp(ci->tl, slot, point, st) == 0)
        return 0;
    return attn_error_set(err, ATTN_E_CUDA, "", "timeline stamp launch failed: %s",
                          cudaGetErrorString(cudaGetLastError()));
}

static int run_locked(cuda_instance *ci, cuda_plan_priv *pp, const attn_ledger *led,
                      const attn_run_io *io, attn_exec_report *rep, attn_error_detail *err)
{
    int rv = 0;
    cudaStream_t st = ci->stream;
    /* the pool's state from the stage launch on: any failure unwinds it */
    attn_cuda_txn txn = {.stream = st,
                         .launch = attn_cuda_append_launch,
                         .wait = attn_cuda_txn_stream_wait,
                         .layer = io->layer,
                         .refuse_restores = pp->tuning.fail_restore_launches};
    void *kst = io->pool->k[io->layer], *vst = io->pool->v[io->layer];

    /* io buffers: q | k_new | v_new | o | lse | save_k | save_v */
    size_t o_q = 0, o_k = align256(pp->q_bytes), o_v = o_k + align256(pp->kv_bytes);
    size_t o_o = o_v + align256(pp->kv_bytes), o_l = o_o + align256(pp->q_bytes);
    size_t o_sk = o_l + align256(pp->lse_bytes), o_sv = o_sk + align256(pp->kv_bytes);
    size_t io_bytes = o_sv + align256(pp->kv_bytes);
    const unsigned new_rows = io->kv_written ? 0u : (1u << ATTN_IO_K_NEW) | (1u << ATTN_IO_V_NEW);
    const unsigned all_dev = (1u << ATTN_IO_Q) | new_rows | (1u << ATTN_IO_O) |
                             (io->lse != NULL ? 1u << ATTN_IO_LSE : 0);
    /* deferred: every tensor on the device (nothing to copy back on the
     * host), committed (no restore after the fact), not poisoned */
    const bool defer = io->defer && (io->on_device & all_dev) == all_dev && io->commit &&
                       !pp->tuning.poison && ci->next_ticket - ci->done_ticket < CUDA_DEFER_SLOTS;
    CK(cudaSetDevice(ci->dev.device), "cudaSetDevice");
    if (ci->next_ticket != ci->done_ticket &&
        (io_bytes > ci->dev_io_cap || o_sk > ci->host_io_cap ||
         led->total_bytes + 256 > ci->dev_ws_cap || pp->cnt_bytes > ci->dev_cnt_cap))
        /* a buffer grows (freed and allocated again): deferred runs still use it */
        CK(cudaStreamSynchronize(st), "the deferred runs before a buffer grows");
    CK(attn_cuda_grow(&ci->dev_io, &ci->dev_io_cap, io_bytes), "cudaMalloc of the run's buffers");
    CK(grow_host(&ci->host_io, &ci->host_io_cap, o_sk), "cudaMallocHost of the run's staging");
    CK(attn_cuda_grow(&ci->dev_ws, &ci->dev_ws_cap, led->total_bytes + 256),
       "cudaMalloc of the workspace");
    if (pp->cnt_bytes > ci->dev_cnt_cap) {
        /* fused reducer: one counter per (request, K/V head, head chunk),
         * zeroed when allocated and left zero by every completed launch */
        CK(attn_cuda_grow(&ci->dev_cnt, &ci->dev_cnt_cap, pp->cnt_bytes),
           "cudaMalloc of the counters");
        CK(cudaMemsetAsync(ci->dev_cnt, 0, ci->dev_cnt_cap, st), "cudaMemsetAsync");
    }
    char *dio = (char *)ci->dev_io;
    /* bind: the plan's parameters with this layer's pointers */
    attn_cuda_decode_params p = pp->params;
    p.q = dio + o_q;
    p.k = kst;
    p.v = vst;
    p.o = dio + o_o;
    p.lse = (float *)(void *)(dio + o_l);
    bool mlu = p.abi == ATTN_ABI_MLU;
    char *ws = (char *)ci->dev_ws;
    p.part_vec =
        (float *)(void *)(ws + attn_ledger_find(led, mlu ? "partial_u" : "partial_O")->offset);
    p.part_m =
        (float *)(void *)(ws + attn_ledger_find(led, mlu ? "partial_m" : "partial_LSE")->offset);
    p.part_l = mlu ? (float *)(void *)(ws + attn_ledger_find(led, "partial_l")->offset) : NULL;
    p.merge_counters = (int32_t *)ci->dev_cnt;

    /* an input on the device is read where it is when aligned for the
     * kernels (q), else copied device to device; host inputs go through
     * pinned staging, in one transfer when all three are on the host (a
     * copy from pageable memory is one synchronous driver copy per tensor) */
    unsigned dv = io->on_device;
    char *hio = (char *)ci->host_io;
    bool o_out_dev = (dv >> ATTN_IO_O) & 1u, lse_out_dev = (dv >> ATTN_IO_LSE) & 1u;
    const uint32_t tl_slot =
        defer ? (uint32_t)(ci->next_ticket % CUDA_DEFER_SLOTS) : CUDA_DEFER_SLOTS;
    if (ci->tl != NULL)
        /* nothing left on the stream: the GPU has been waiting for this enqueue */
        attn_cuda_timeline_begin(ci->tl, tl_slot, io->layer, io->wait_value, io->signal_value,
                                 cudaStreamQuery(st) == cudaSuccess);
    if (io->wait_dev != NULL) {
        /* nothing of this run may read an input before the client's signal */
        if ((rv = attn_cuda_ipc_wait(ci->ipc, st, io->wait_dev, io->wait_value, err)) != 0)
            goto fail;
    }
    if ((rv = timeline_stamp(ci, tl_slot, ATTN_TL_WAIT_RELEASED, st, err)) != 0)
        goto fail;
    /* the new rows the append reads: the run's buffer, or the client's own
     * (16-aligned: the append moves 16-byte vectors) */
    const void *new_k = dio + o_k, *new_v = dio + o_v;
    if ((dv & ((1u << ATTN_IO_Q) | (1u << ATTN_IO_K_NEW) | (1u << ATTN_IO_V_NEW))) ||
        io->kv_written) {
        const void *src[3] = {io->q, io->k_new, io->v_new};
        const void **in_place[3] = {&p.q, &new_k, &new_v};
        size_t off[3] = {o_q, o_k, o_v}, len[3] = {pp->q_bytes, pp->kv_bytes, pp->kv_bytes};
        for (int i = 0; i < 3; i++) {
            if (i != ATTN_IO_Q && io->kv_written)
                continue; /* the rows are in their pages already */
            if ((dv >> i) & 1u) {
                if (((uintptr_t)src[i] & 15u) == 0) {
                    *in_place[i] = src[i]; /* read where it is: no copy on the stream */
                    continue;
                }
                CK(cudaMemcpyAsync(dio + off[i], src[i], len[i], cudaMemcpyDeviceToDevice, st),
                   "device copy of an input");
            } else {
                memcpy(hio + off[i], src[i], len[i]);
                CK(cudaMemcpyAsync(dio + off[i], hio + off[i], len[i], cudaMemcpyHostToDevice, st),
                   "copy of an input");
            }
        }
    } else {
        memcpy(hio + o_q, io->q, pp->q_bytes);
        memcpy(hio + o_k, io->k_new, pp->kv_bytes);
        memcpy(hio + o_v, io->v_new, pp->kv_bytes);
        CK(cudaMemcpyAsync(dio, hio, o_o, cudaMemcpyHostToDevice, st), "copy of q, k_new, v_new");
    }
    /* outputs on the device are written in place when aligned */
    if (o_out_dev && ((uintptr_t)io->o & 15u) == 0)
        p.o = io->o;
    if (lse_out_dev && io->lse != NULL && ((uintptr_t)io->lse & 3u) == 0)
        p.lse = io->lse;
    if (pp->tuning.poison) {
        /* tests: NaN everywhere a kernel must write, so an unwritten element shows */
        CK(cudaMemsetAsync(p.o, 0xff, pp->q_bytes, st), "poison");
        CK(cudaMemsetAsync(p.lse, 0xff, pp->lse_bytes, st), "poison");
        CK(cudaMemsetAsync(ci->dev_ws, 0xff, led->total_bytes, st), "poison");
    }
    /* the engine's timing: CUDA events around the kernels only (a deferred
     * run's own pair, read by complete) */
    cudaEvent_t e0 = defer ? ci->def0[ci->next_ticket % CUDA_DEFER_SLOTS] : ci->ev0;
    cudaEvent_t e1 = defer ? ci->def1[ci->next_ticket % CUDA_DEFER_SLOTS] : ci->ev1;
    if ((rv = timeline_stamp(ci, tl_slot, ATTN_TL_KERNELS_START, st, err)) != 0)
        goto fail;
    CK(cudaEventRecord(e0, st), "cudaEventRecord");
    if (!io->kv_written) {
        txn.rows = append_rows(pp, kst, vst, new_k, new_v, dio, o_sk, o_sv);
        if ((rv = attn_cuda_txn_stage(&txn)) != 0) {
            rv = attn_error_set(err, rv, "", "append launch failed");
            goto fail;
        }
    }
    if ((rv = attn_cuda_decode_launch(&p, st)) != 0) {
        rv = attn_error_set(err, rv, "", "decode launch failed: %s",
                            cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    if ((rv = timeline_stamp(ci, tl_slot, ATTN_TL_KERNELS_END, st, err)) != 0)
        goto fail;
    /* a deferred run that signals records its end after the signal: the
     * client's stream is released one event record sooner (the timeline
     * showed the done hand-off ~5 us longer than the ready one), and its
     * completion then also covers the signal */
    const bool end_after_signal = defer && io->signal_dev != NULL;
    if (!end_after_signal)
        CK(cudaEventRecord(e1, st), "cudaEventRecord");
    /* O and LSE: a host output back through the staging (one transfer when
     * both go to the host), a device output not written in place copied */
    if (!o_out_dev && (io->lse == NULL || !lse_out_dev)) {
        CK(cudaMemcpyAsync(hio + o_o, dio + o_o, (io->lse ? o_sk : o_l) - o_o,
                           cudaMemcpyDeviceToHost, st),
           "copy of o and lse");
    } else {
        if (!o_out_dev)
            CK(cudaMemcpyAsync(hio + o_o, dio + o_o, pp->q_bytes, cudaMemcpyDeviceToHost, st),
               "copy of o");
        else if (p.o != io->o)
            CK(cudaMemcpyAsync(io->o, p.o, pp->q_bytes, cudaMemcpyDeviceToDevice, st),
               "device copy of o");
        if (io->lse != NULL && !lse_out_dev)
            CK(cudaMemcpyAsync(hio + o_l, dio + o_l, pp->lse_bytes, cudaMemcpyDeviceToHost, st),
               "copy of lse");
        else if (io->lse != NULL && p.lse != io->lse)
            CK(cudaMemcpyAsync(io->lse, p.lse, pp->lse_bytes, cudaMemcpyDeviceToDevice, st),
               "device copy of lse");
    }
    /* the pool counts as staged until the stream confirms the restore */
    if (!io->commit && !io->kv_written && (rv = attn_cuda_txn_restore(&txn, err)) != 0)
        goto fail;
    if (io->signal_dev != NULL) {
        /* after the last kernel and copy: the client reads O behind it */
        if ((rv = attn_cuda_ipc_signal(ci->ipc, st, io->signal_dev, io->signal_value, err)) != 0)
            goto fail;
        if (rep)
            rep->signalled = true;
    }
    if (end_after_signal)
        CK(cudaEventRecord(e1, st), "cudaEventRecord");
    if (defer) {
        /* enqueued: complete(ticket) waits for it and reads its timing */
        if (rep) {
            report_kernels(&p, append_launches(io), rep);
            rep->deferred = true;
            rep->ticket = ci->next_ticket;
            snprintf(rep->timing_method, sizeof rep->timing_method, "cuda_events");
            snprintf(rep->timing_scope, sizeof rep->timing_scope, "%s",
                     end_after_signal ? "cuda events: append, producer, reducer kernels, the signal"
                                      : "cuda events: append, producer and reducer kernels");
        }
        ci->def_layer[ci->next_ticket % CUDA_DEFER_SLOTS] = io->layer;
        ci->next_ticket++;
        return 0;
    }
    CK(cudaStreamSynchronize(st), "the run's stream");
    if (ci->tl != NULL)
        attn_cuda_timeline_write(ci->tl, tl_slot);
    if (!o_out_dev)
        memcpy(io->o, hio + o_o, pp->q_bytes);
    if (io->lse && !lse_out_dev)
        memcpy(io->lse, hio + o_l, pp->lse_bytes);
    if (rep) {
        report_kernels(&p, append_launches(io), rep);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        rep->engine_us = ms * 1000.0;
        snprintf(rep->timing_method, sizeof rep->timing_method, "cuda_events");
        snprintf(rep->timing_scope, sizeof rep->timing_scope,
                 "cuda events: append, producer and reducer kernels");
    }
    return 0;

fail:
    if (ci->dev_cnt) /* a launch that failed may have left counts behind */
        cudaMemsetAsync(ci->dev_cnt, 0, ci->dev_cnt_cap, st);
    /* the old rows back so the pool is unchanged (engine.h contract), or
     * E_POOL_UNRESTORED when that cannot be confirmed */
    rv = attn_cuda_txn_unwind(&txn, rv, err);
    /* the signal of a run that failed before it enqueued its signal is the
     * caller's (engine_signal, on this stream: a write from the control
     * stream could land before an earlier deferred run's signal) */
    /* nothing still in flight may read the staging once the lock is released */
    cudaStreamSynchronize(st);
    return rv;
}

static int engine_run(attn_engine *self, attn_engine_plan *p, const attn_run_io *io,
                      attn_exec_report *rep, attn_error_detail *err)
{
    cuda_instance *ci = self->state;
    cuda_plan_priv *pp = p->priv;
    if (rep != NULL)
        memset(rep, 0, sizeof *rep);
    const attn_cuda_run_target target = {.device = ci->dev.device,
                                         .where = self->where,
                                         .plan_uploaded = pp != NULL && pp->dev_meta != NULL,
                                         .has_ipc = ci->ipc != NULL,
                                         .ipc_why = ci->ipc_why};
    int rv = attn_cuda_run_check(io, &target, err);
    if (rv != 0)
        return rv;
    pthread_mutex_lock(&ci->mu);
    rv = run_locked(ci, pp, &p->ledger, io, rep, err);
    pthread_mutex_unlock(&ci->mu);
    return rv;
}

/* The signal of a run that failed or was refused: on the run stream,
 * behind every run enqueued there before. */
static int engine_signal(attn_engine *self, void *addr, uint64_t value, attn_error_detail *err)
{
    cuda_instance *ci = self->state;
    const attn_cuda_run_target target = {
        .device = ci->dev.device, .where = self->where, .ipc_why = ci->ipc_why};
    pthread_mutex_lock(&ci->mu);
    int rv = attn_cuda_signal_behind(ci->ipc, &target, ci->stream, addr, value, err);
    pthread_mutex_unlock(&ci->mu);
    return rv;
}

/* A deferred run's completion: its end event, outside the instance lock
 * (the next run enqueues meanwhile), then its timing. */
static int engine_complete(attn_engine *self, uint64_t ticket, attn_exec_report *rep,
                           attn_error_detail *err)
{
    cuda_instance *ci = self->state;
    pthread_mutex_lock(&ci->mu);
    bool in_order = ticket == ci->done_ticket && ticket != ci->next_ticket;
    const uint32_t layer = ci->def_layer[ticket % CUDA_DEFER_SLOTS];
    pthread_mutex_unlock(&ci->mu);
    if (!in_order)
        return attn_error_set(err, ATTN_E_INVALID, "ticket",
                              "deferred run %llu is not the oldest one in flight",
                              (unsigned long long)ticket);
    cudaEvent_t e0 = ci->def0[ticket % CUDA_DEFER_SLOTS], e1 = ci->def1[ticket % CUDA_DEFER_SLOTS];
    cudaSetDevice(ci->dev.device);
    cudaError_t e = cudaEventSynchronize(e1);
    float ms = 0;
    if (e == cudaSuccess)
        cudaEventElapsedTime(&ms, e0, e1);
    if (e == cudaSuccess && ci->tl != NULL) /* before the slot can be reused */
        attn_cuda_timeline_write(ci->tl, (uint32_t)(ticket % CUDA_DEFER_SLOTS));
    pthread_mutex_lock(&ci->mu);
    ci->done_ticket++;
    pthread_mutex_unlock(&ci->mu);
    if (e != cudaSuccess)
        return attn_cuda_txn_deferred_failed(layer, cudaGetErrorString(e), err);
    if (rep != NULL) {
        rep->engine_us = ms * 1000.0;
        snprintf(rep->timing_method, sizeof rep->timing_method, "cuda_events");
    }
    return 0;
}

#endif /* ATTN_WITH_CUDA */

static const attn_engine_ops g_cuda_ops = {
    .version = ATTN_ENGINE_OPS_VERSION,
    .name = "cuda_decode",
    .platform = ATTN_PLATFORM_CUDA,
    .phases = 1u << ATTN_PHASE_DECODE,
    .schedules = 1u << ATTN_SCHED_PARTITION, /* no unified persistent kernel yet */
    .priority = 10,
    .init = engine_init,
    .fini = engine_fini,
    .admit = engine_admit,
    .plan = engine_plan,
    .run = engine_run,
    .plan_free = engine_plan_free,
#ifdef ATTN_WITH_CUDA
    .complete = engine_complete,
    .signal = engine_signal,
#endif
};

const attn_engine_ops *attn_cuda_engine_ops(void)
{
    return &g_cuda_ops;
}
