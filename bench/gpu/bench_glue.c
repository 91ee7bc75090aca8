/* ctypes entry points of libattn_cuda_bench.so: attnd's decode kernels on
 * buffers the benchmark (PyTorch) owns, so every peer reads the same bytes
 * in one process.  Plans with the engine's own split policies and grid
 * capacity (SMs x measured occupancy); the graph-mode handle keeps a fixed
 * grid and refreshes its plan in place so a captured graph replays with
 * new lengths (seed 0x03G).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn/error.h"
#include "attn/names.h"
#include "kernels/common/decode_path.h"
#include "kernels/cuda/decode_launch.h"
#include "planner/split.h"

typedef struct attnb {
    attn_cuda_decode_params p;
    void *meta; /* device: counts | reqs | items | pages */
    size_t meta_cap, off_reqs, off_items, off_pages;
    void *ws;  /* device workspace */
    void *cnt; /* fused-reducer counters (zero between launches) */
    uint32_t B, page_cap, item_cap, slot_cap;
    uint32_t graph_splits;
    attn_split_policy policy;
    uint32_t num_items, num_slots, occupancy, grid_capacity;
    int64_t wave_item, wave_merge; /* FI wave model costs (wave_item < 0: off) */
    int64_t min_chunk;             /* shortest split in keys */
    uint32_t fi_max_splits;        /* FI: most splits per request (0: no cap) */
} attnb;

static uint32_t g_waves = 1;
static int64_t g_min_chunk = ATTN_SPLIT_MIN_CHUNK_CUDA;          /* the engine's */
static uint32_t g_fi_max_splits = ATTN_SPLIT_FI_MAX_SPLITS_CUDA; /* the engine's */
static int g_fused = 1;
static uint32_t g_stages = 0;
static int g_bulk = ATTN_CUDA_BULK_DEFAULT; /* copy warps, the engine's default */
static int g_l2_evict_first = -1;           /* -1: as the engine's plan (the L2 rule) */
/* FI wave model, the engine's default (off with item keys < 0) */
static int64_t g_wave_item = ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA;
static int64_t g_wave_merge = ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA;

/* The FI wave model's costs in keys for the next attnb_create
 * (item_keys < 0: off). */
void attnb_set_wave_model(int64_t item_keys, int64_t merge_keys)
{
    g_wave_item = item_keys;
    g_wave_merge = merge_keys;
}

/* Back to the engine's wave model (planner/split.h's CUDA costs). */
void attnb_reset_wave_model(void)
{
    g_wave_item = ATTN_SPLIT_WAVE_ITEM_KEYS_CUDA;
    g_wave_merge = ATTN_SPLIT_WAVE_MERGE_KEYS_CUDA;
}

/* L2 promotion of the tensor-map producer's copies (decode_launch.h), for
 * one handle. */
void attnb_set_tmap_l2(attnb *h, int promotion)
{
    h->p.tmap_l2 = promotion;
}

/* Copy warps of the copy-warp producer for the handles created next (0: the
 * cp.async producer; < 0: the engine's default). */
void attnb_set_bulk(int copy_warps)
{
    g_bulk = copy_warps < 0 ? ATTN_CUDA_BULK_DEFAULT : copy_warps;
}

/* The tensor-map producer's L2 policy for the plans made next: -1 as the
 * engine's (evict_first where the launch's K/V exceed the L2), 0 no
 * hint, 1 evict_first. */
void attnb_set_l2_evict_first(int v)
{
    g_l2_evict_first = v;
}

/* Tensor-core pipeline depth for the next attnb_create (0 = the default). */
void attnb_set_stages(uint32_t stages)
{
    g_stages = stages;
}

/* Programmatic dependent launch (attn_cuda_decode_params.pdl: ATTN_CUDA_PDL_*) for one handle. */
void attnb_set_pdl(attnb *h, int on)
{
    h->p.pdl = on;
}

/* The tensor-map producer's per-CTA probe for one handle (bench/gpu/decode_probe.py):
 * CTA i < n writes (%smid, start, end) in %globaltimer ns to probe[3 i ..]; NULL: off. */
void attnb_set_probe(attnb *h, unsigned long long *probe, uint32_t n)
{
    h->p.probe = probe;
    h->p.probe_ctas = probe != NULL ? n : 0;
}

/* With the probe: CTA i < n also writes {last tile read, fold started (0: no
 * fold)} in %globaltimer ns to phases[2 i ..] (the copy-warp producers); NULL: off. */
void attnb_set_probe_phases(attnb *h, unsigned long long *phases)
{
    h->p.probe_phases = phases;
}

/* Persistent CTAs (attn_cuda_decode_params.persist) for one handle: n > 0
 * CTAs, n < 0 the plan's grid capacity (SMs x resident CTAs per SM, what
 * the engine passes with attn_cuda_tuning.persist), 0 off. */
void attnb_set_persist(attnb *h, int n)
{
    h->p.persist = n < 0 ? h->grid_capacity : (uint32_t)n;
}

/* Shortest split in keys for the next attnb_create (< 0: the engine's). */
void attnb_set_min_chunk(int64_t keys)
{
    g_min_chunk = keys < 0 ? ATTN_SPLIT_MIN_CHUNK_CUDA : keys;
}

/* Most FI splits per request for the next attnb_create (< 0: the
 * engine's, 0: no cap). */
void attnb_set_fi_max_splits(int64_t n)
{
    g_fi_max_splits = n < 0 ? ATTN_SPLIT_FI_MAX_SPLITS_CUDA : (uint32_t)n;
}

/* Grid capacity multiplier for the next attnb_create (1 = one wave). */
void attnb_set_waves(uint32_t w)
{
    g_waves = w ? w : 1;
}

static size_t a256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* Re-plan for new lengths and upload (same capacities). */
int attnb_update(attnb *h, const int32_t *lens, const int32_t *page_indptr,
                 const int32_t *page_indices)
{
    int sms = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    uint32_t group = h->p.num_qo_heads / h->p.num_kv_heads;
    int occ = attn_cuda_decode_occupancy_path(h->p.head_dim, h->p.kv_dtype, group, h->p.stages,
                                              h->p.bulk);
    if (occ <= 0)
        return ATTN_E_SHAPE;
    attn_split_params sp;
    memset(&sp, 0, sizeof sp);
    sp.policy = h->policy;
    sp.default_policy = ATTN_SPLIT_FI;
    sp.fixed_splits = h->policy == ATTN_SPLIT_FIXED ? h->graph_splits : 0;
    sp.grid_capacity = (uint32_t)(sms * occ) * g_waves;
    sp.units_per_split =
        h->p.num_kv_heads * attn_cuda_decode_head_chunks(h->p.head_dim, h->p.kv_dtype, group);
    sp.kv_block = 1u << h->p.page_shift;
    sp.min_chunk = h->min_chunk;
    sp.fi_max_splits = h->fi_max_splits;
    sp.graph_splits = h->graph_splits;
    sp.wave_model = h->wave_item >= 0;
    sp.wave_item_keys = h->wave_item;
    sp.wave_merge_keys = h->wave_merge;
    int64_t *kv = malloc(sizeof *kv * h->B);
    if (!kv)
        return ATTN_E_NOMEM;
    for (uint32_t b = 0; b < h->B; b++)
        kv[b] = lens[b];
    attn_split_plan plan;
    attn_error_detail err;
    int rv = attn_split_plan_build_lengths(h->B, kv, NULL, &sp, &plan, &err);
    free(kv);
    if (rv)
        return rv;
    h->num_items = plan.num_items;
    h->num_slots = plan.num_slots;
    h->p.sm_count = (uint32_t)sms; /* the engine's: the auto producer choice of short grids */
    h->occupancy = (uint32_t)occ;
    h->grid_capacity = sp.grid_capacity;
    if (h->item_cap && (plan.num_items > h->item_cap || plan.num_slots > h->slot_cap ||
                        page_indptr[h->B] > (int32_t)h->page_cap)) {
        attn_split_plan_free(&plan);
        return ATTN_E_CAPACITY;
    }
    { /* after the capacity check: a refused update keeps the last plan's policy */
        int l2 = 0;
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
        h->p.l2_evict_first = attn_decode_path_l2_evict_first(
            g_l2_evict_first,
            attn_decode_kv_bytes(plan.items, plan.num_items, h->p.num_kv_heads, h->p.head_dim,
                                 (uint32_t)attn_dtype_size(h->p.kv_dtype)),
            l2 > 0 ? (uint64_t)l2 : 0);
    }
    if (!h->item_cap) { /* first plan sets the envelope */
        h->item_cap = plan.num_items;
        h->slot_cap = plan.num_slots;
        h->page_cap = (uint32_t)page_indptr[h->B];
        h->off_reqs = a256(sizeof(attn_cuda_counts));
        h->off_items = h->off_reqs + a256(sizeof(attn_cuda_req) * h->B);
        h->off_pages = h->off_items + a256(sizeof(attn_work_item) * h->item_cap);
        h->meta_cap = h->off_pages + a256(sizeof(int32_t) * (h->page_cap + 1));
        size_t ws = (size_t)h->slot_cap * h->p.num_qo_heads * (h->p.head_dim + 2) * 4 + 1024;
        size_t cnt = (size_t)h->B * h->p.num_kv_heads *
                     attn_cuda_decode_head_chunks(h->p.head_dim, h->p.kv_dtype, group) *
                     sizeof(int32_t);
        if (cudaMalloc(&h->meta, h->meta_cap) != cudaSuccess ||
            cudaMalloc(&h->ws, ws) != cudaSuccess || cudaMalloc(&h->cnt, cnt) != cudaSuccess ||
            cudaMemset(h->cnt, 0, cnt) != cudaSuccess)
            return ATTN_E_NOMEM;
        h->p.merge_counters = (int32_t *)h->cnt;
        float *w = h->ws;
        size_t states = (size_t)h->slot_cap * h->p.num_qo_heads;
        h->p.part_vec = w;
        h->p.part_m = w + a256(states * h->p.head_dim * 4) / 4;
        h->p.part_l = h->p.part_m + a256(states * 4) / 4;
    }
    char *hm = calloc(1, h->meta_cap);
    if (!hm)
        return ATTN_E_NOMEM;
    attn_cuda_counts *c = (attn_cuda_counts *)hm;
    c->num_items = (int32_t)plan.num_items;
    c->num_requests = (int32_t)h->B;
    attn_cuda_req *rq = (attn_cuda_req *)(hm + h->off_reqs);
    int any = 0;
    for (uint32_t b = 0; b < h->B; b++) {
        rq[b].lo0 = 0;
        rq[b].hi0 = lens[b];
        rq[b].lo1 = rq[b].hi1 = 0;
        rq[b].qrow = (int32_t)b;
        rq[b].page_begin = page_indptr[b];
        rq[b].slot_begin = (int32_t)plan.slot_indptr[b];
        rq[b].num_slots = (int32_t)(plan.slot_indptr[b + 1] - plan.slot_indptr[b]);
        any |= rq[b].num_slots > 1;
    }
    memcpy(hm + h->off_items, plan.items, sizeof(attn_work_item) * plan.num_items);
    memcpy(hm + h->off_pages, page_indices, sizeof(int32_t) * (size_t)page_indptr[h->B]);
    rv = cudaMemcpy(h->meta, hm, h->meta_cap, cudaMemcpyHostToDevice) == cudaSuccess ? 0
                                                                                     : ATTN_E_CUDA;
    free(hm);
    h->p.any_split = any;
    h->p.keys_per_item = attn_decode_keys_per_item(plan.items, plan.num_items);
    h->p.force_merge = h->graph_splits > 0;
    attn_split_plan_free(&plan);
    return rv;
}

/* A handle for one batch geometry; policy 1 = FA, 2 = FI, 3 = GLOBAL,
 * 4 = FIXED (graph_splits each); graph_splits > 0 turns graph mode on. */
attnb *attnb_create(uint32_t B, const int32_t *lens, const int32_t *page_indptr,
                    const int32_t *page_indices, uint32_t hq, uint32_t hkv, uint32_t d,
                    uint32_t page_size, uint32_t layout, uint32_t kv_dtype, uint32_t q_dtype,
                    uint32_t policy, uint32_t abi, uint32_t graph_splits, int64_t num_pages)
{
    attnb *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->B = B;
    h->policy = (attn_split_policy)policy;
    h->graph_splits = graph_splits;
    h->wave_item = g_wave_item;
    h->wave_merge = g_wave_merge;
    h->min_chunk = g_min_chunk;
    h->fi_max_splits = g_fi_max_splits;
    attn_cuda_decode_params *p = &h->p;
    p->num_qo_heads = hq;
    p->num_kv_heads = hkv;
    p->head_dim = d;
    while ((1u << p->page_shift) < page_size)
        p->page_shift++;
    p->row_stride = layout ? (int64_t)d : (int64_t)hkv * d;
    p->head_stride = layout ? (int64_t)page_size * d : (int64_t)d;
    p->page_stride = (int64_t)page_size * hkv * d;
    p->kv_dtype = (attn_dtype)kv_dtype;
    p->q_dtype = (attn_dtype)q_dtype;
    p->abi = (attn_state_abi)abi;
    p->sm_scale = 1.0f / sqrtf((float)d);
    p->fused_merge = g_fused;
    p->pdl = ATTN_CUDA_PDL_DEFAULT; /* the engine's (attnb_set_pdl changes it) */
    p->stages = g_stages;
    {
        int sms = 0, dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        p->bulk = attn_cuda_decode_plan_bulk(d, p->kv_dtype, p->q_dtype, hq, hkv, page_size, B,
                                             (uint32_t)sms, g_bulk); /* as the engine's plan */
    }
    p->num_pages = num_pages > 0 && num_pages <= UINT32_MAX ? (uint32_t)num_pages : 0;
    if (attnb_update(h, lens, page_indptr, page_indices) != 0) {
        free(h);
        return NULL;
    }
    p->counts = (const attn_cuda_counts *)h->meta;
    p->reqs = (const attn_cuda_req *)((char *)h->meta + h->off_reqs);
    p->items = (const attn_work_item *)((char *)h->meta + h->off_items);
    p->page_indices = (const int32_t *)((char *)h->meta + h->off_pages);
    p->item_capacity = h->item_cap;
    p->request_capacity = B;
    return h;
}

/* Select the CUDA-core producer (simt != 0), the grid order and the
 * page-table prefetch of the tensor-core producer. */
void attnb_set_simt(attnb *h, int simt, int heads_fast, int row_prefetch)
{
    h->p.simt = simt;
    h->p.row_prefetch = row_prefetch;
    h->p.heads_fast = heads_fast && h->item_cap <= 65535u;
}

/* Fused reducer on/off for the handles created next (default on). */
void attnb_set_fused(int on)
{
    g_fused = on;
}

/* Launch producer (+ reducer) on `stream` over the caller's device buffers. */
int attnb_run(attnb *h, void *q, void *k, void *v, void *o, float *lse, void *stream)
{
    h->p.q = q;
    h->p.k = k;
    h->p.v = v;
    h->p.o = o;
    h->p.lse = lse;
    return attn_cuda_decode_launch(&h->p, stream);
}

/* What the plan used: items, slots, CTAs per SM, grid capacity. */
void attnb_info(const attnb *h, uint32_t *out4)
{
    out4[0] = h->num_items;
    out4[1] = h->num_slots;
    out4[2] = h->occupancy;
    out4[3] = h->grid_capacity;
}

/* Free the handle and its device buffers. */
void attnb_destroy(attnb *h)
{
    if (!h)
        return;
    cudaFree(h->meta);
    cudaFree(h->ws);
    cudaFree(h->cnt);
    free(h);
}
