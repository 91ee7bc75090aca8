/* Dispatch of the tensor-core prefill kernels (prefill_launch.h). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn/error.h"
#include "kernels/cuda/prefill/dispatch.h"
#include "kernels/cuda/mixed_launch.h"
#include "kernels/cuda/prefill_launch.h"

extern "C" int attn_cuda_prefill_supported(uint32_t head_dim, attn_dtype kv_dtype,
                                           attn_dtype q_dtype)
{
    const bool d_ok = head_dim == 64 || head_dim == 128 || head_dim == 256;
    const bool kv_ok = kv_dtype == ATTN_BF16 || kv_dtype == ATTN_FP16;
    /* q must be in the K/V dtype: the MMA takes both operands in one type */
    return d_ok && kv_ok && q_dtype == kv_dtype;
}

extern "C" uint32_t attn_cuda_prefill_tile_n(const attn_cuda_prefill_params *p)
{
    return p->variant == ATTN_PREFILL_LIGHT   ? ATTN_PREFILL_LIGHT_TILE_N
           : p->variant == ATTN_PREFILL_FUSED ? ATTN_PREFILL_FUSED_TILE_N
                                              : ATTN_PREFILL_TILE_N(p->head_dim);
}

extern "C" int attn_cuda_prefill_tma_tier(const attn_cuda_prefill_params *p)
{
    const attn_kv_addr &a = p->kv;
    const bool paged = a.kind == ATTN_KV_ADDR_PAGED_CSR || a.kind == ATTN_KV_ADDR_PAGED_DENSE;
    const int64_t P = a.page_size;
    /* a box is one page: larger pages would need boxes starting inside a
     * page, which no device run has exercised yet */
    const int64_t tile_n = (int64_t)attn_cuda_prefill_tile_n(p);
    const bool pow2 = P >= 8 && P <= tile_n && (P & (P - 1)) == 0;
    const bool aligned = ((uintptr_t)p->k % 16) == 0 && ((uintptr_t)p->v % 16) == 0;
    return !p->gather_only && paged && pow2 && aligned && a.num_pages > 0 &&
           a.num_pages <= INT32_MAX;
}

extern "C" int attn_cuda_prefill_v_page_boxes(const attn_cuda_prefill_params *p)
{
    return !p->v_chunk_boxes && p->variant == ATTN_PREFILL_FULL && attn_cuda_prefill_tma_tier(p) &&
           p->head_dim >= 128 && p->kv.page_size >= 16;
}

extern "C" int attn_cuda_prefill_clustered(const attn_cuda_prefill_params *p)
{
    const bool ok = p->cluster <= ATTN_PREFILL_CLUSTER_LAUNCH && p->variant == ATTN_PREFILL_FULL &&
                    p->head_dim == 128 && p->worker_indptr != NULL && p->num_workers >= 2 &&
                    p->num_workers % 2 == 0 && attn_cuda_prefill_tma_tier(p);
    return ok ? (int)p->cluster : (int)ATTN_PREFILL_CLUSTER_OFF;
}

extern "C" int attn_cuda_prefill_launch(const attn_cuda_prefill_params *p, void *stream)
{
    if (!attn_cuda_prefill_supported(p->head_dim, p->kv_dtype, p->q_dtype))
        return p->head_dim == 64 || p->head_dim == 128 || p->head_dim == 256 ? ATTN_E_DTYPE
                                                                             : ATTN_E_SHAPE;
    if (p->num_kv_heads == 0 || p->num_qo_heads % p->num_kv_heads)
        return ATTN_E_SHAPE;
    switch (p->head_dim) {
    case 64:
        return attn_prefill_launch_d64(p, stream);
    case 128:
        return attn_prefill_launch_d128(p, stream);
    default:
        return attn_prefill_launch_d256(p, stream);
    }
}

extern "C" int attn_cuda_prefill_symbols(const attn_cuda_prefill_params *p, const char **attend,
                                         const char **combine)
{
    /* the names of the template instances, as the profiler shows them:
     * [variant][head dim][K/V dtype] (no light kernel at d 256) */
    static const char *const k_attend[2][3][2] = {
        {{"attn_prefill::attn_prefill_attend<64, __nv_bfloat16, false>",
          "attn_prefill::attn_prefill_attend<64, __half, false>"},
         {"attn_prefill::attn_prefill_attend<128, __nv_bfloat16, false>",
          "attn_prefill::attn_prefill_attend<128, __half, false>"},
         {"attn_prefill::attn_prefill_attend<256, __nv_bfloat16, false>",
          "attn_prefill::attn_prefill_attend<256, __half, false>"}},
        {{"attn_prefill::attn_prefill_attend<64, __nv_bfloat16, true>",
          "attn_prefill::attn_prefill_attend<64, __half, true>"},
         {"attn_prefill::attn_prefill_attend<128, __nv_bfloat16, true>",
          "attn_prefill::attn_prefill_attend<128, __half, true>"},
         {NULL, NULL}}};
    static const char *const k_combine[2][3] = {{"attn_prefill::attn_prefill_combine<64, false>",
                                                 "attn_prefill::attn_prefill_combine<128, false>",
                                                 "attn_prefill::attn_prefill_combine<256, false>"},
                                                {"attn_prefill::attn_prefill_combine<64, true>",
                                                 "attn_prefill::attn_prefill_combine<128, true>",
                                                 NULL}};
    if (!attn_cuda_prefill_supported(p->head_dim, p->kv_dtype, p->q_dtype) ||
        (p->variant != ATTN_PREFILL_FULL && p->variant != ATTN_PREFILL_LIGHT &&
         p->variant != ATTN_PREFILL_FUSED))
        return 0;
    const int di = p->head_dim == 64 ? 0 : p->head_dim == 128 ? 1 : 2;
    if (p->variant == ATTN_PREFILL_FUSED) {
        /* the fused mixed kernel (kernels/cuda/mixed.cu) attends; its split
         * m tiles have the full kernel's 128 rows, so the full combine folds */
        *attend = attn_cuda_mixed_symbol(p->head_dim, p->kv_dtype);
        if (*attend == NULL)
            return 0;
        *combine = p->num_merges ? k_combine[0][di] : NULL;
        return p->num_merges ? 2 : 1;
    }
    const int vi = p->variant == ATTN_PREFILL_LIGHT;
    if (k_attend[vi][di][0] == NULL)
        return 0;
    *attend = k_attend[vi][di][p->kv_dtype == ATTN_FP16];
    const int cl = attn_cuda_prefill_clustered(p);
    if (cl == ATTN_PREFILL_CLUSTER_MULTICAST || cl == ATTN_PREFILL_CLUSTER_LOCKSTEP)
        *attend = p->kv_dtype == ATTN_FP16
                      ? "attn_prefill::attn_prefill_attend_cluster<128, __half>"
                      : "attn_prefill::attn_prefill_attend_cluster<128, __nv_bfloat16>";
    *combine = p->num_merges ? k_combine[vi][di] : NULL;
    return p->num_merges ? 2 : 1;
}
