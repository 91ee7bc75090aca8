/* One instantiation of the prefill kernels per head dim (both K/V dtypes):
 * ATTN_PREFILL_INSTANCE(D) defines attn_prefill_launch_d<D>, declared in
 * prefill/dispatch.h, so each head dim compiles in its own translation unit. */
#ifndef ATTN_CUDA_PREFILL_INSTANCE_CUH
#define ATTN_CUDA_PREFILL_INSTANCE_CUH

#include <cudaTypedefs.h>
#include <string.h>

#include "attn/error.h"
#include "kernels/cuda/prefill/dispatch.h"
#include "kernels/cuda/prefill/kernel.cuh"

namespace attn_prefill
{

/* The TMA tier's maps of p's K and V stores (KvMaps): on when
 * attn_cuda_prefill_tma_tier admits the store (the one gate) and the
 * driver encodes them; otherwise every row takes the gather. */
template <int D> KvMaps kv_maps(const attn_cuda_prefill_params *p)
{
    KvMaps m;
    memset(&m, 0, sizeof m);
    const attn_kv_addr &a = p->kv;
    const int64_t P = a.page_size;
    if (!attn_cuda_prefill_tma_tier(p))
        return m;
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
        return m;
    const PFN_cuTensorMapEncodeTiled_v12000 encode =
        reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    const uint32_t rows = (uint32_t)P; /* one box per page */
    const uint64_t es = 2, H = a.num_kv_heads;
    /* innermost first: d, then (NHD) head, slot or (HND) slot, head; pages */
    const bool hnd = a.layout == ATTN_HND;
    const cuuint64_t dims[4] = {D, hnd ? (cuuint64_t)P : H, hnd ? H : (cuuint64_t)P,
                                (cuuint64_t)a.num_pages};
    const cuuint64_t strides[3] = {D * es, (hnd ? (uint64_t)P : H) * D * es,
                                   (uint64_t)P * H * D * es};
    const cuuint32_t box[4] = {64, hnd ? rows : 1u, hnd ? 1u : rows, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    const void *base[2] = {p->k, p->v};
    CUtensorMap *out[2] = {&m.k, &m.v};
    for (int i = 0; i < 2; i++)
        if (encode(out[i], CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void *>(base[i]), dims,
                   strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            memset(&m, 0, sizeof m);
            return m;
        }
    m.on = 1;
    m.box_rows = rows;
    if (attn_cuda_prefill_v_page_boxes(p)) {
        /* V's box = one page, every 64-column chunk: the chunk dimension
         * (stride 128 B) outside the page's rows, so a box lands as
         * [chunk][row], one block of the page-blocked stage.  8 boxes per
         * 128-key tile instead of 16 at P 16, d 128 (H200, 2026-12-03:
         * docs/cuda-prefill.md round 7) */
        const cuuint64_t dims5[5] = {64, (cuuint64_t)P, D / 64, H, (cuuint64_t)a.num_pages};
        const cuuint64_t strides5[4] = {(hnd ? (uint64_t)D : H * D) * es, 128,
                                        (hnd ? (uint64_t)P * D : (uint64_t)D) * es,
                                        (uint64_t)P * H * D * es};
        const cuuint32_t box5[5] = {64, rows, D / 64, 1, 1};
        const cuuint32_t estr5[5] = {1, 1, 1, 1, 1};
        if (encode(&m.v, CU_TENSOR_MAP_DATA_TYPE_UINT16, 5, const_cast<void *>(p->v), dims5,
                   strides5, box5, estr5, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            memset(&m, 0, sizeof m);
            return m;
        }
        m.v_lg = (uint32_t)__builtin_ctzll((unsigned long long)P);
    }
    return m;
}

template <int D, bool L> int launch_combine(const attn_cuda_prefill_params *p, cudaStream_t stream)
{
    dim3 grid(p->num_merges, p->num_kv_heads, kCombineSlices);
    attn_prefill_combine<D, L><<<grid, 128, 0, stream>>>(*p);
    return cudaGetLastError() != cudaSuccess ? ATTN_E_CUDA : 0;
}

/* An attend kernel in 2-CTA clusters (attn_cuda_prefill_clustered: an
 * even number of queues, one CTA each): the clustered one, or under
 * ATTN_PREFILL_CLUSTER_LAUNCH the plain one (measurement). */
template <int D, typename KV>
int launch_cluster(const attn_cuda_prefill_params *p, const KvMaps &maps, cudaStream_t stream)
{
    using C = Cfg<D, kFullCluster>;
    static_assert(C::SMEM == Cfg<D, 0>::SMEM && C::THREADS == Cfg<D, 0>::THREADS, "one shape");
    void (*kernel)(attn_cuda_prefill_params, KvMaps) = p->cluster == ATTN_PREFILL_CLUSTER_LAUNCH
                                                           ? attn_prefill_attend<D, KV, false>
                                                           : attn_prefill_attend_cluster<D, KV>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) !=
        cudaSuccess)
        return ATTN_E_CUDA;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(p->num_workers);
    cfg.blockDim = dim3(C::THREADS);
    cfg.dynamicSmemBytes = C::SMEM;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kernel, *p, maps) != cudaSuccess)
        return ATTN_E_CUDA;
    return cudaGetLastError() != cudaSuccess ? ATTN_E_CUDA : 0;
}

/* The attend kernel over p's units on `grid` CTAs: in 2-CTA clusters where
 * attn_cuda_prefill_clustered says so (the one clustered instance: d 128,
 * the full variant), else one CTA per cluster. */
template <int D, typename KV, bool L>
int launch_attend(const attn_cuda_prefill_params *p, dim3 grid, cudaStream_t stream)
{
    using C = Cfg<D, L>;
    const KvMaps maps = kv_maps<D>(p);
    if constexpr (D == 128 && !L) {
        if (attn_cuda_prefill_clustered(p))
            return launch_cluster<D, KV>(p, maps, stream);
    }
    attn_prefill_attend<D, KV, L><<<grid, C::THREADS, C::SMEM, stream>>>(*p, maps);
    return cudaGetLastError() != cudaSuccess ? ATTN_E_CUDA : 0;
}

template <int D, typename KV, bool L>
int launch_typed(const attn_cuda_prefill_params *p, cudaStream_t stream)
{
    using C = Cfg<D, L>;
    /* the attribute is per function and per device; setting it each launch
     * costs ~1 us and keeps no static state (STYLE.md: no file globals) */
    if (cudaFuncSetAttribute(attn_prefill_attend<D, KV, L>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) != cudaSuccess)
        return ATTN_E_CUDA;
    /* light: the SM's whole shared memory for the carveout, so a decode CTA
     * (107,568 B at d 128) fits beside the light CTA; the driver would
     * otherwise size the carveout for the light CTA alone, and a decode
     * CTA would wait for the SM to drain.  Necessary, not enough: with it
     * the producer-warpgroup light kernel still had no decode CTA beside it
     * (r5; docs/cuda-prefill-engine.md, Overlap) */
    if (L && cudaFuncSetAttribute(attn_prefill_attend<D, KV, L>,
                                  cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared) != cudaSuccess)
        return ATTN_E_CUDA;
    const uint32_t units = p->num_items * p->num_kv_heads;
    const bool attend = p->parts != ATTN_PREFILL_PARTS_COMBINE;
    const bool combine = p->parts != ATTN_PREFILL_PARTS_ATTEND;
    if (units && attend) {
        /* the queues fix the grid (one CTA per queue); else the snake's */
        dim3 grid(p->worker_indptr                     ? p->num_workers
                  : p->max_ctas && p->max_ctas < units ? p->max_ctas
                                                       : units);
        if (launch_attend<D, KV, L>(p, grid, stream) != 0)
            return ATTN_E_CUDA;
    }
    if (p->num_merges && combine)
        return launch_combine<D, L>(p, stream);
    return 0;
}

/* p's variant of the kernels for K/V type KV: the light one exists at
 * d <= 128 only (attn_prefill_variant_serves; ATTN_E_SHAPE elsewhere). */
template <int D, typename KV> int launch_variant(const attn_cuda_prefill_params *p, cudaStream_t s)
{
    if (p->variant == ATTN_PREFILL_FULL)
        return launch_typed<D, KV, false>(p, s);
    if constexpr (D <= 128) {
        if (p->variant == ATTN_PREFILL_LIGHT)
            return launch_typed<D, KV, true>(p, s);
    }
    return ATTN_E_SHAPE;
}

} // namespace attn_prefill

#define ATTN_PREFILL_INSTANCE(D)                                                                   \
    int attn_prefill_launch_d##D(const attn_cuda_prefill_params *p, void *stream)                  \
    {                                                                                              \
        cudaStream_t s = static_cast<cudaStream_t>(stream);                                        \
        if (p->kv_dtype == ATTN_BF16)                                                              \
            return attn_prefill::launch_variant<D, __nv_bfloat16>(p, s);                           \
        if (p->kv_dtype == ATTN_FP16)                                                              \
            return attn_prefill::launch_variant<D, __half>(p, s);                                  \
        return ATTN_E_DTYPE;                                                                       \
    }

#endif
