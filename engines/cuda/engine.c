/* The CUDA engine's host side: admission, planning, pools and one run.
 *
 * Plain C over the CUDA runtime API (cuda_runtime_api.h), so the daemon
 * links it like any module.  The kernels live in decode.cu behind
 * decode_launch.h.  Without ATTN_WITH_CUDA every entry point still exists
 * and says "built without CUDA".
 *
 * One run (seed 0x08C: one append transaction): validate what the manifest
 * validator cannot know (pool platform, page ids against this store),
 * upload every metadata array in one transfer, swap the new rows into their
 * page slots (keeping the old bytes), attend, copy O and LSE back, and put
 * the old bytes back unless the caller commits.  Any failure restores the
 * pool before returning, so a failed run leaves it byte-identical.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "engines/cuda/cuda_engine.h"
#include "kernels/cuda/decode_launch.h"
#include "planner/ledger.h"
#include "planner/split.h"

#ifdef ATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* The best measured policy on the H200 (bench/results/decode-h200-*.md). */
static attn_split_policy g_default_split = ATTN_SPLIT_FI;
static int g_poison;
static int g_simt;
static int g_heads_fast = 1;
static int g_row_prefetch = 1;

void attn_cuda_set_producer(int simt, int heads_fast, int row_prefetch)
{
    g_simt = simt;
    g_heads_fast = heads_fast;
    g_row_prefetch = row_prefetch;
}

void attn_cuda_debug_poison(int on)
{
    g_poison = on;
}

void attn_cuda_set_default_split(attn_split_policy p)
{
    if (p == ATTN_SPLIT_FA || p == ATTN_SPLIT_FI || p == ATTN_SPLIT_GLOBAL)
        g_default_split = p;
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

static void backend_admit(const attn_backend *self, const attn_manifest *m,
                          const attn_pool_geometry *g, attn_admission *out)
{
    (void)self;
    attn_cuda_admit(m, g, out);
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

int attn_cuda_plan(const attn_manifest *m, const attn_pool_geometry *g, attn_split_policy policy,
                   attn_split_plan *out, attn_cuda_plan_info *info, attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

static int backend_plan(const attn_backend *self, const attn_manifest *m,
                        const attn_pool_geometry *g, attn_split_plan *out)
{
    return attn_cuda_plan(m, g, ATTN_SPLIT_AUTO, out, NULL, NULL);
}

static int backend_run(const attn_backend *self, const attn_exec_args *a, attn_exec_report *rep)
{
    return ATTN_E_CUDA;
}

#else /* ATTN_WITH_CUDA */

#define CK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != cudaSuccess) {                                                               \
            rv = ATTN_E_CUDA;                                                                      \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

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

int attn_cuda_plan(const attn_manifest *m, const attn_pool_geometry *g, attn_split_policy policy,
                   attn_split_plan *out, attn_cuda_plan_info *info, attn_error_detail *err)
{
    memset(out, 0, sizeof *out);
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return attn_error_set(err, ATTN_E_CUDA, "backend", "no CUDA device for planning");
    uint32_t group = g->num_kv_heads ? m->num_qo_heads / g->num_kv_heads : 1;
    int occ = attn_cuda_decode_occupancy(g->head_dim_qk, g->kv_dtype, group);
    if (occ <= 0)
        return attn_error_set(err, ATTN_E_SHAPE, "head_dim_qk",
                              "no producer kernel for head_dim %u / %s", g->head_dim_qk,
                              attn_dtype_name(g->kv_dtype));
    attn_split_params sp;
    memset(&sp, 0, sizeof sp);
    attn_split_params_from_manifest(m, g->num_kv_heads, &sp);
    if (policy != ATTN_SPLIT_AUTO)
        sp.policy = policy;
    sp.default_policy = g_default_split;
    /* seed 0x0AD: workers = SMs x resident producer CTAs per SM (measured);
     * one split occupies H_kv x head-chunk CTAs */
    sp.grid_capacity = (uint32_t)sms * (uint32_t)occ;
    sp.units_per_split =
        g->num_kv_heads * attn_cuda_decode_head_chunks(g->head_dim_qk, g->kv_dtype, group);
    sp.kv_block = g->page_size; /* FI searches in whole pages */
    sp.min_chunk = 256; /* a split shorter than this spends more on its state than on keys */
    if (info) {
        info->policy = sp.policy == ATTN_SPLIT_AUTO ? sp.default_policy : sp.policy;
        info->sm_count = (uint32_t)sms;
        info->ctas_per_sm = (uint32_t)occ;
        info->grid_capacity = sp.grid_capacity;
    }
    return attn_split_plan_build(m, &sp, out, err);
}

static int backend_plan(const attn_backend *self, const attn_manifest *m,
                        const attn_pool_geometry *g, attn_split_plan *out)
{
    (void)self;
    return attn_cuda_plan(m, g, ATTN_SPLIT_AUTO, out, NULL, NULL);
}

/* Buffers the engine keeps between runs: allocated once, grown when a call
 * needs more (the workspace from the ledger, seed 0x03E). */
typedef struct cuda_ctx {
    pthread_mutex_t mu;
    int device;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    void *dev_meta;
    size_t dev_meta_cap;
    void *host_meta; /* pinned staging of the one metadata transfer */
    size_t host_meta_cap;
    void *dev_io; /* q, k_new, v_new, o, lse, saved rows */
    size_t dev_io_cap;
    void *dev_ws; /* partial states */
    size_t dev_ws_cap;
    void *dev_cnt; /* fused-reducer counters, zero between runs */
    size_t dev_cnt_cap;
} cuda_ctx;

static cuda_ctx g_ctx = {.mu = PTHREAD_MUTEX_INITIALIZER, .device = -1};

static int grow_dev(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    if (*p)
        cudaFree(*p);
    *p = NULL;
    *cap = 0;
    size_t n = need + need / 4;
    if (cudaMalloc(p, n) != cudaSuccess) {
        *p = NULL;
        return ATTN_E_NOMEM;
    }
    *cap = n;
    return 0;
}

static int grow_host(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    if (*p)
        cudaFreeHost(*p);
    *p = NULL;
    *cap = 0;
    size_t n = need + need / 4;
    if (cudaMallocHost(p, n) != cudaSuccess) {
        *p = NULL;
        return ATTN_E_NOMEM;
    }
    *cap = n;
    return 0;
}

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static int ctx_ready(cuda_ctx *c, int device)
{
    if (c->device == device)
        return 0;
    if (c->device >= 0)
        return ATTN_E_CUDA; /* one engine instance serves one device */
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&c->ev0) != cudaSuccess || cudaEventCreate(&c->ev1) != cudaSuccess)
        return ATTN_E_CUDA;
    c->device = device;
    return 0;
}

static int run_locked(cuda_ctx *c, const attn_exec_args *a, attn_exec_report *rep)
{
    int rv = 0;
    const attn_manifest *m = a->m;
    const attn_split_plan *plan = a->plan;
    const attn_pool_geometry *g = a->pool->geom;
    const uint32_t B = m->num_requests, Hq = m->num_qo_heads, Hkv = g->num_kv_heads;
    const uint32_t d = g->head_dim_qk;
    const size_t es = attn_dtype_size(g->kv_dtype), qs = attn_dtype_size(m->q_dtype);
    bool swapped = false;
    attn_mask_prog mp;
    memset(&mp, 0, sizeof mp);
    char *io = NULL, *dm = NULL;
    void *kst = NULL, *vst = NULL;
    size_t off_rows = 0, o_sk = 0, o_sv = 0;
    int64_t head_stride = 0;
    uint32_t total_q = 0;
    cudaStream_t st = NULL;

    if (a->pool->platform != ATTN_PLATFORM_CUDA || a->layer >= g->layers)
        return ATTN_E_ENGINE;
    if ((rv = ctx_ready(c, a->pool->device)) != 0)
        return rv;
    if (cudaSetDevice(c->device) != cudaSuccess)
        return ATTN_E_CUDA;
    for (uint32_t b = 0; b < B; b++)
        if (m->requests[b].new_len != 1 || m->requests[b].cache_len <= 0 ||
            m->qo_indptr[b + 1] - m->qo_indptr[b] != 1)
            return ATTN_E_PHASE;
    if (plan->num_requests != B)
        return ATTN_E_SPLIT;
    if ((rv = attn_mask_prog_build(&m->mask, m->requests, B, &mp, NULL)) != 0)
        return rv;

    /* Flattened page lists through the one address program (addr.h). */
    attn_kv_addr ad;
    attn_kv_addr_from_table(&ad, &m->kv, B, g);
    uint64_t npages = 0;
    for (uint32_t b = 0; b < B; b++)
        npages += (uint64_t)((attn_kv_addr_len(&ad, b) + g->page_size - 1) / g->page_size);
    total_q = (uint32_t)m->qo_indptr[B];

    /* one metadata transfer: counts | reqs | items | pages | row offsets */
    size_t off_counts = 0;
    size_t off_reqs = align256(sizeof(attn_cuda_counts));
    size_t off_items = off_reqs + align256(sizeof(attn_cuda_req) * B);
    size_t off_pages = off_items + align256(sizeof(attn_work_item) * (plan->num_items + 1));
    off_rows = off_pages + align256(sizeof(int32_t) * (npages + 1));
    size_t meta_bytes = off_rows + align256(sizeof(int64_t) * total_q);
    if ((rv = grow_host(&c->host_meta, &c->host_meta_cap, meta_bytes)) ||
        (rv = grow_dev(&c->dev_meta, &c->dev_meta_cap, meta_bytes)))
        goto fail;
    char *hm = (char *)c->host_meta;
    attn_cuda_counts *cnt = (attn_cuda_counts *)(hm + off_counts);
    attn_cuda_req *rq = (attn_cuda_req *)(hm + off_reqs);
    int32_t *pg = (int32_t *)(hm + off_pages);
    int64_t *row_off = (int64_t *)(hm + off_rows);
    cnt->num_items = (int32_t)plan->num_items;
    cnt->num_requests = (int32_t)B;
    memcpy(hm + off_items, plan->items, sizeof(attn_work_item) * plan->num_items);
    uint32_t shift = 0;
    while ((1u << shift) < g->page_size)
        shift++;
    const int64_t row_stride = attn_kv_addr_slot_stride(&ad, d);
    head_stride = g->layout == ATTN_HND ? (int64_t)g->page_size * d : (int64_t)d;
    const int64_t page_stride = (int64_t)g->page_size * Hkv * d;
    int any_split = 0;
    uint64_t pi = 0;
    for (uint32_t b = 0; b < B; b++) {
        int64_t len = attn_kv_addr_len(&ad, b);
        int64_t nb = (len + g->page_size - 1) / g->page_size;
        rq[b].page_begin = (int32_t)pi;
        for (int64_t j = 0; j < nb; j++) {
            int64_t page = attn_kv_addr_block_page(&ad, b, j);
            if (page < 0 || page >= (int64_t)g->num_pages) {
                rv = ATTN_E_PAGE_OUT_OF_POOL;
                goto fail;
            }
            pg[pi++] = (int32_t)page;
        }
        attn_row_keys k = attn_mask_row_keys(&mp, b, 0);
        rq[b].lo0 = k.lo0;
        rq[b].hi0 = k.hi0;
        rq[b].lo1 = k.lo1;
        rq[b].hi1 = k.hi1;
        rq[b].qrow = m->qo_indptr[b];
        rq[b].slot_begin = (int32_t)plan->slot_indptr[b];
        rq[b].num_slots = (int32_t)(plan->slot_indptr[b + 1] - plan->slot_indptr[b]);
        if (rq[b].num_slots > 1)
            any_split = 1;
        /* the new row lands at logical position T_b (seed 0x08C) */
        int64_t page, slot;
        if (!attn_kv_addr_locate(&ad, b, m->requests[b].cache_len, &page, &slot)) {
            rv = ATTN_E_COVERAGE;
            goto fail;
        }
        row_off[m->qo_indptr[b]] = attn_kv_addr_elem(&ad, page, slot, 0, 0, d);
    }
    if (plan->num_slots > plan->slot_capacity && plan->slot_capacity) {
        rv = ATTN_E_CAPACITY;
        goto fail;
    }

    /* workspace from the ledger: one state per (slot, query head) */
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
    attn_ledger led;
    if ((rv = attn_ledger_layout(&ls, NULL, 0, &led, NULL)) != 0)
        goto fail;
    if ((rv = grow_dev(&c->dev_ws, &c->dev_ws_cap, led.total_bytes + 256)) != 0)
        goto fail;
    if ((rv = attn_ledger_layout(&ls, c->dev_ws, c->dev_ws_cap, &led, NULL)) != 0)
        goto fail;

    /* io buffers: q | k_new | v_new | o | lse | save_k | save_v */
    size_t q_bytes = (size_t)total_q * Hq * d * qs;
    size_t kv_bytes = (size_t)total_q * Hkv * d * es;
    size_t lse_bytes = (size_t)total_q * Hq * sizeof(float);
    size_t o_q = 0, o_k = align256(q_bytes), o_v = o_k + align256(kv_bytes);
    size_t o_o = o_v + align256(kv_bytes), o_l = o_o + align256(q_bytes);
    o_sk = o_l + align256(lse_bytes);
    o_sv = o_sk + align256(kv_bytes);
    size_t io_bytes = o_sv + align256(kv_bytes);
    if ((rv = grow_dev(&c->dev_io, &c->dev_io_cap, io_bytes)) != 0)
        goto fail;
    io = (char *)c->dev_io;
    dm = (char *)c->dev_meta;
    st = c->stream;
    kst = a->pool->k[a->layer];
    vst = a->pool->v[a->layer];

    CK(cudaEventRecord(c->ev0, st));
    CK(cudaMemcpyAsync(dm, hm, meta_bytes, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(io + o_q, a->q, q_bytes, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(io + o_k, a->k_new, kv_bytes, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(io + o_v, a->v_new, kv_bytes, cudaMemcpyHostToDevice, st));
    if (g_poison) {
        /* tests: NaN everywhere a kernel must write, so an unwritten element shows */
        CK(cudaMemsetAsync(io + o_o, 0xff, q_bytes, st));
        CK(cudaMemsetAsync(io + o_l, 0xff, lse_bytes, st));
        CK(cudaMemsetAsync(c->dev_ws, 0xff, led.total_bytes, st));
    }
    if ((rv = attn_cuda_append_launch(kst, vst, (const int64_t *)(dm + off_rows), total_q, Hkv, d,
                                      head_stride, g->kv_dtype, io + o_k, io + o_v, io + o_sk,
                                      io + o_sv, 0, st)) != 0)
        goto fail;
    swapped = true;

    attn_cuda_decode_params p;
    memset(&p, 0, sizeof p);
    p.q = io + o_q;
    p.k = kst;
    p.v = vst;
    p.o = io + o_o;
    p.lse = (float *)(io + o_l);
    const attn_ledger_field *fv =
        attn_ledger_find(&led, ls.abi == ATTN_ABI_MLU ? "partial_u" : "partial_O");
    const attn_ledger_field *fm =
        attn_ledger_find(&led, ls.abi == ATTN_ABI_MLU ? "partial_m" : "partial_LSE");
    const attn_ledger_field *fl = attn_ledger_find(&led, "partial_l");
    if (!fv || !fm || (ls.abi == ATTN_ABI_MLU && !fl) || led.head_dim_padded != d) {
        rv = ATTN_E_WORKSPACE;
        goto fail;
    }
    p.part_vec = (float *)fv->ptr;
    p.part_m = (float *)fm->ptr;
    p.part_l = fl ? (float *)fl->ptr : NULL;
    p.reqs = (const attn_cuda_req *)(dm + off_reqs);
    p.page_indices = (const int32_t *)(dm + off_pages);
    p.items = (const attn_work_item *)(dm + off_items);
    p.counts = (const attn_cuda_counts *)(dm + off_counts);
    p.item_capacity = plan->num_items;
    p.request_capacity = B;
    p.num_qo_heads = Hq;
    p.num_kv_heads = Hkv;
    p.head_dim = d;
    p.page_shift = shift;
    p.page_stride = page_stride;
    p.head_stride = head_stride;
    p.row_stride = row_stride;
    p.q_dtype = m->q_dtype;
    p.kv_dtype = g->kv_dtype;
    p.abi = m->policy.state_abi;
    p.sm_scale = m->has_sm_scale ? m->sm_scale : 1.0f / sqrtf((float)d);
    p.any_split = any_split;
    p.force_merge = m->policy.graph;
    p.simt = g_simt;
    p.row_prefetch = g_row_prefetch;
    p.heads_fast = g_heads_fast && plan->num_items <= 65535u;
    {
        /* fused reducer: one counter per (request, K/V head, head chunk),
         * zeroed when allocated and left zero by every completed launch */
        const size_t cnt_bytes = (size_t)B * Hkv *
                                 attn_cuda_decode_head_chunks(d, g->kv_dtype, Hq / Hkv) *
                                 sizeof(int32_t);
        if (cnt_bytes > c->dev_cnt_cap) {
            if ((rv = grow_dev(&c->dev_cnt, &c->dev_cnt_cap, cnt_bytes)) != 0)
                goto fail;
            CK(cudaMemsetAsync(c->dev_cnt, 0, c->dev_cnt_cap, st));
        }
        p.merge_counters = (int32_t *)c->dev_cnt;
    }
    if ((rv = attn_cuda_decode_launch(&p, st)) != 0)
        goto fail;
    CK(cudaMemcpyAsync(a->o, io + o_o, q_bytes, cudaMemcpyDeviceToHost, st));
    if (a->lse)
        CK(cudaMemcpyAsync(a->lse, io + o_l, lse_bytes, cudaMemcpyDeviceToHost, st));
    if (!a->commit) {
        swapped = false;
        if ((rv = attn_cuda_append_launch(kst, vst, (const int64_t *)(dm + off_rows), total_q, Hkv,
                                          d, head_stride, g->kv_dtype, NULL, NULL, io + o_sk,
                                          io + o_sv, 1, st)) != 0)
            goto fail;
    }
    CK(cudaEventRecord(c->ev1, st));
    CK(cudaStreamSynchronize(st));
    if (rep) {
        memset(rep, 0, sizeof *rep);
        const char *ps = NULL, *rs = NULL;
        attn_cuda_decode_symbols(&p, &ps, &rs);
        const char *syms[3] = {"attn_append_rows", ps, rs};
        uint32_t launches[3] = {a->commit ? 1u : 2u, 1, 1};
        for (int i = 0; i < 3; i++)
            if (syms[i]) {
                snprintf(rep->kernels[rep->num_kernels].symbol, sizeof rep->kernels[0].symbol, "%s",
                         syms[i]);
                rep->kernels[rep->num_kernels++].launches = launches[i];
            }
        rep->kernels_observed = false;
        float ms = 0;
        cudaEventElapsedTime(&ms, c->ev0, c->ev1);
        rep->engine_us = ms * 1000.0;
        snprintf(rep->timing_method, sizeof rep->timing_method, "cuda_events");
    }
    attn_mask_prog_free(&mp);
    return 0;

fail:
    if (c->dev_cnt) /* a launch that failed may have left counts behind */
        cudaMemsetAsync(c->dev_cnt, 0, c->dev_cnt_cap, st);
    if (swapped) {
        /* put the old rows back so the pool is unchanged (backend.h contract);
         * when even that fails, say so instead of claiming an unchanged pool */
        int back = attn_cuda_append_launch(kst, vst, (const int64_t *)(dm + off_rows), total_q, Hkv,
                                           d, head_stride, g->kv_dtype, NULL, NULL, io + o_sk,
                                           io + o_sv, 1, st);
        if (back != 0 || cudaStreamSynchronize(st) != cudaSuccess)
            rv = ATTN_E_POOL_UNRESTORED;
    }
    attn_mask_prog_free(&mp);
    return rv;
}

static int backend_run(const attn_backend *self, const attn_exec_args *a, attn_exec_report *rep)
{
    (void)self;
    pthread_mutex_lock(&g_ctx.mu);
    int rv = run_locked(&g_ctx, a, rep);
    pthread_mutex_unlock(&g_ctx.mu);
    return rv;
}

#endif /* ATTN_WITH_CUDA */

static const attn_backend g_backend = {
    .name = "cuda_decode",
    .platform = ATTN_PLATFORM_CUDA,
    .phases = 1u << ATTN_PHASE_DECODE,
    .priority = 10,
    .admit = backend_admit,
    .plan = backend_plan,
    .run = backend_run,
    .ctx = NULL,
};

const attn_backend *attn_cuda_backend(void)
{
    return &g_backend;
}
