/* ctypes entry points of libattn_cuda_bench.so for the prefill kernel:
 * plan once on the host (mask program, tile lists, splits), upload the
 * plan and a CSR page table, then launch on buffers the benchmark
 * (PyTorch) owns, so every peer reads the same bytes in one process.
 * Pool layout NHD [num_pages, page, H_kv, d]; q/o [rows, H_q, d].
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn/error.h"
#include "kernels/common/mask.h"
#include "kernels/cuda/prefill_launch.h"
#include "planner/prefill_plan.h"

/* A handle's device buffers: the table's three arrays, the mask arena, the
 * plan's four arrays and, for a split plan, three partial-state arrays. */
#define ATTNPF_MAX_DEV 11

typedef struct attnpf {
    attn_cuda_prefill_params p;
    attn_prefill_plan plan;
    void *dev[ATTNPF_MAX_DEV];
    int ndev;
    int failed; /* an allocation or upload failed: create answers ATTN_E_CUDA */
} attnpf;

/* A device copy of n bytes of src (NULL: uninitialized), recorded for
 * attnpf_free.  The table has room for every buffer create makes (a split
 * plan's eleventh once overwrote ndev: bench_mixed.py died with SIGSEGV
 * after the small step S1, 2026-12-03; tests/unit/test_prefill_glue.c). */
static void *up(attnpf *h, const void *src, size_t n)
{
    void *d = NULL;
    if (h->ndev == ATTNPF_MAX_DEV || cudaMalloc(&d, n ? n : 4) != cudaSuccess) {
        h->failed = 1;
        return NULL;
    }
    h->dev[h->ndev++] = d;
    if (src && n && cudaMemcpy(d, src, n, cudaMemcpyHostToDevice) != cudaSuccess)
        h->failed = 1;
    return d;
}

/* Release a handle (NULL ignored). */
void attnpf_free(attnpf *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->ndev; i++)
        cudaFree(h->dev[i]);
    attn_prefill_plan_free(&h->plan);
    free(h);
}

/* Plan B requests (T[b], C[b]) under mask m (its pointers the caller's)
 * over a CSR paged NHD pool; see attnpf_create. */
static attnpf *create_with_mask(uint32_t B, const int64_t *T, const int64_t *C,
                                const int32_t *qo_indptr, const int32_t *page_indptr,
                                const int32_t *page_indices, const int32_t *last_page_len,
                                uint32_t num_pages, uint32_t page_size, uint32_t hq, uint32_t hkv,
                                uint32_t d, const attn_mask *mask, uint32_t fixed_splits, int *rv)
{
    attnpf *h = calloc(1, sizeof *h);
    attn_request_desc *req = calloc(B, sizeof *req);
    if (!h || !req) {
        free(h);
        free(req);
        *rv = ATTN_E_NOMEM;
        return NULL;
    }
    for (uint32_t b = 0; b < B; b++) {
        req[b].cache_len = T[b];
        req[b].new_len = C[b];
    }
    const attn_mask m = *mask;
    uint32_t tm, tn;
    attn_prefill_tile_shape(d, ATTN_PREFILL_FULL, &tm, &tn);
    attn_mask_prog prog;
    attn_error_detail err;
    *rv = attn_mask_prog_build_blocks(&m, req, B, tn, &prog, &err);
    free(req);
    if (*rv) {
        free(h);
        return NULL;
    }
    int sms = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    attn_prefill_plan_in in = {.num_requests = B,
                               .T = T,
                               .C = C,
                               .qo_indptr = qo_indptr,
                               .num_qo_heads = hq,
                               .num_kv_heads = hkv,
                               .head_dim = d,
                               .mask = &prog,
                               .num_sms = (uint32_t)sms,
                               .fixed_splits = fixed_splits};
    *rv = attn_prefill_plan_build(&in, &h->plan, &err);
    if (*rv) {
        attn_mask_prog_free(&prog);
        free(h);
        return NULL;
    }
    attn_cuda_prefill_params *p = &h->p;
    attn_kv_table kv;
    memset(&kv, 0, sizeof kv);
    kv.format = ATTN_KV_CSR;
    kv.page_indptr = up(h, page_indptr, (B + 1) * 4);
    kv.page_indices = up(h, page_indices, (size_t)page_indptr[B] * 4);
    kv.last_page_len = up(h, last_page_len, B * 4);
    kv.num_page_indices = (uint32_t)page_indptr[B];
    attn_pool_geometry g;
    memset(&g, 0, sizeof g);
    g.num_pages = num_pages;
    g.page_size = page_size;
    g.num_kv_heads = hkv;
    g.head_dim_qk = g.head_dim_vo = d;
    g.kv_dtype = ATTN_BF16;
    g.layout = ATTN_NHD;
    attn_kv_addr_from_table(&p->kv, &kv, B, &g);
    void *arena = up(h, prog.arena, prog.arena_bytes);
    p->mask = attn_mask_prog_rebase(&prog, arena);
    attn_mask_prog_free(&prog);
    attn_prefill_plan *pl = &h->plan;
    p->reqs = up(h, pl->reqs, B * sizeof *pl->reqs);
    p->items = up(h, pl->items, pl->num_items * sizeof *pl->items);
    p->tiles = up(h, pl->tiles, pl->num_tiles * sizeof *pl->tiles);
    p->merges = up(h, pl->merges, pl->num_merges * sizeof *pl->merges);
    p->num_items = pl->num_items;
    p->num_merges = pl->num_merges;
    uint64_t vf, rf;
    attn_prefill_plan_workspace(pl, hkv, d, &vf, &rf);
    if (pl->num_parts) {
        p->part_vec = up(h, NULL, vf * 4);
        p->part_m = up(h, NULL, rf * 4);
        p->part_l = up(h, NULL, rf * 4);
    }
    p->num_qo_heads = hq;
    p->num_kv_heads = hkv;
    p->head_dim = d;
    p->q_dtype = p->kv_dtype = ATTN_BF16;
    p->abi = ATTN_ABI_LSE_O;
    p->sm_scale = 1.0f / sqrtf((float)d);
    p->max_ctas = (uint32_t)sms; /* persistent by default; attnpf_set_max_ctas changes it */
    if (h->failed) {
        attnpf_free(h);
        *rv = ATTN_E_CUDA;
        return NULL;
    }
    *rv = 0;
    return h;
}

/* Plan B requests (T[b], C[b]) over a CSR paged NHD pool; mask_kind is an
 * attn_mask_kind; for FlashMask the four vectors (sum T+C entries each)
 * and fm_causal; fixed_splits 0 = automatic.  Returns NULL on failure with
 * the error code in *rv. */
attnpf *attnpf_create(uint32_t B, const int64_t *T, const int64_t *C, const int32_t *qo_indptr,
                      const int32_t *page_indptr, const int32_t *page_indices,
                      const int32_t *last_page_len, uint32_t num_pages, uint32_t page_size,
                      uint32_t hq, uint32_t hkv, uint32_t d, int mask_kind, const int32_t *lts,
                      const int32_t *lte, const int32_t *uts, const int32_t *ute, int fm_causal,
                      uint32_t fixed_splits, int *rv)
{
    attn_mask m;
    memset(&m, 0, sizeof m);
    m.kind = (attn_mask_kind)mask_kind;
    if (m.kind == ATTN_MASK_FLASHMASK) {
        uint64_t cols = 0;
        for (uint32_t b = 0; b < B; b++)
            cols += (uint64_t)(T[b] + C[b]);
        m.fm_lts = (int32_t *)lts;
        m.fm_lte = (int32_t *)lte;
        m.fm_uts = (int32_t *)uts;
        m.fm_ute = (int32_t *)ute;
        m.fm_len = cols;
        m.fm_causal = fm_causal != 0;
    }
    return create_with_mask(B, T, C, qo_indptr, page_indptr, page_indices, last_page_len, num_pages,
                            page_size, hq, hkv, d, &m, fixed_splits, rv);
}

/* attnpf_create under a dense mask: per request a C x (T + C) row-major
 * bit matrix, LSB first, each request's starting on a byte boundary
 * (PROTOCOL.md "mask"), `bytes` in all; a set bit hides its cell when
 * true_means_masked, else shows it. */
attnpf *attnpf_create_dense(uint32_t B, const int64_t *T, const int64_t *C,
                            const int32_t *qo_indptr, const int32_t *page_indptr,
                            const int32_t *page_indices, const int32_t *last_page_len,
                            uint32_t num_pages, uint32_t page_size, uint32_t hq, uint32_t hkv,
                            uint32_t d, const uint8_t *bits, uint64_t bytes, int true_means_masked,
                            uint32_t fixed_splits, int *rv)
{
    attn_mask m;
    memset(&m, 0, sizeof m);
    m.kind = ATTN_MASK_DENSE;
    m.dense_bits = (uint8_t *)bits;
    m.dense_bytes = bytes;
    m.polarity =
        true_means_masked ? ATTN_POLARITY_TRUE_MEANS_MASKED : ATTN_POLARITY_TRUE_MEANS_ALLOWED;
    return create_with_mask(B, T, C, qo_indptr, page_indptr, page_indices, last_page_len, num_pages,
                            page_size, hq, hkv, d, &m, fixed_splits, rv);
}

/* Persistent grid size for the next runs (0 = one CTA per unit). */
void attnpf_set_max_ctas(attnpf *h, uint32_t n)
{
    h->p.max_ctas = n;
}

/* 1: every K/V row by the cp.async gather (no TMA tier), for A/B runs. */
void attnpf_set_gather_only(attnpf *h, uint32_t on)
{
    h->p.gather_only = on;
}

/* 1: V's TMA boxes per page and 64-column chunk, as K's, for A/B runs
 * (attn_cuda_prefill_params.v_chunk_boxes); 0: whole pages where admitted. */
void attnpf_set_v_chunk_boxes(attnpf *h, uint32_t on)
{
    h->p.v_chunk_boxes = on;
}

/* Launch on the given device buffers and stream; returns 0 or an attn_err. */
int attnpf_run(attnpf *h, const void *q, const void *k, const void *v, void *o, float *lse,
               void *stream)
{
    h->p.q = q;
    h->p.k = k;
    h->p.v = v;
    h->p.o = o;
    h->p.lse = lse;
    return attn_cuda_prefill_launch(&h->p, stream);
}

/* Plan figures: items, merges, skip/full/partial tiles, logical and
 * executed cells (8 values). */
void attnpf_info(const attnpf *h, uint64_t *out)
{
    const attn_prefill_ledger *l = &h->plan.ledger;
    out[0] = h->plan.num_items;
    out[1] = h->plan.num_merges;
    out[2] = l->skip_tiles;
    out[3] = l->full_tiles;
    out[4] = l->partial_tiles;
    out[5] = l->logical_cells;
    out[6] = l->executed_cells;
    out[7] = h->plan.num_parts;
}
