/* The fused mixed-batch kernel (mixed_launch.h says what it is for and how
 * its warps divide the work): the prefill roles of kernels/cuda/prefill
 * (variant ATTN_PREFILL_FUSED) and the decode roles of kernels/cuda/decode
 * (the tensor-map copy warp and the tensor-core compute warps, two of them
 * instead of four) in one CTA per SM, each role on its own mbarrier ring in
 * its own part of shared memory.  Nothing here re-implements either side's
 * math: the decode compute warps call the decode producer's qk_tile,
 * softmax_update, pv_tile and epilogue, the prefill warps its producer and
 * consumer, so the contracts (masks, NaN rule, empty rows, state ABIs)
 * are theirs.  The roles never wait for each other after the CTA's one
 * barrier: they share the SM's issue slots, tensor cores and memory pipes.
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "attn/error.h"
#include "kernels/cuda/decode/device.cuh"
#include "kernels/cuda/mixed_launch.h"
#include "kernels/cuda/prefill/instance.cuh"

namespace attn_mixed
{

namespace dec = attn::decode;
namespace tc = attn::decode::tc;

/* The roles' warps.  [[maybe_unused]]: the portable compute_90 pass
 * compiles no kernel body (wgmma is sm_90a only), so there they are not
 * read. */
constexpr int kThreads = (int)ATTN_CUDA_MIXED_THREADS;
[[maybe_unused]] constexpr int kDecodeWarps = 2;  /* decode compute: warps 0, 1 */
[[maybe_unused]] constexpr int kCopyWarp = 2;     /* decode copies */
[[maybe_unused]] constexpr int kProducerWarp = 3; /* prefill producer; consumers: warps 4-11 */
/* the decode compute warps' named barrier, past the prefill consumers'
 * turn barriers (kSchedBar, kSchedBar + 1: d 256 only) */
[[maybe_unused]] constexpr int kDecodeBar = 3;
static_assert(kDecodeBar > (int)attn_prefill::kSchedBar + 1, "named barrier ids are distinct");

/* Shared memory of one CTA at head dim D: the prefill variant's own layout
 * (Q, K and V stages, barriers) from a 1024-aligned base, then the decode
 * stages (1024-aligned: the tensor map's 128-byte swizzle repeats every
 * 1024 bytes), the decode Q (hi only: q is in the cache dtype) and the
 * decode barriers.  The decode epilogue's merge area reuses its stages. */
template <int D> struct Layout {
    using PC = attn_prefill::Cfg<D, ATTN_PREFILL_FUSED>;
    using DC = tc::cfg<D>;
    /* d 128: as many decode stages as the prefill ring leaves room for (3
     * of 32 KB beside 2 of 32 KB; 2 beside 3 measured slower, r6); d 64: 4
     * of 16 KB, about 95 KB left unused (not measured deeper) */
    static constexpr int DSTAGES = D == 128 ? 3 : 4;
    static constexpr uint32_t PREFILL = ((uint32_t)PC::SMEM - 1024u + 1023u) / 1024u * 1024u;
    static constexpr uint32_t DEC_STAGES = 2u * DSTAGES * DC::TILE_VECS * 16u;
    static constexpr uint32_t DEC_Q = 16u * DC::CH * 16u;
    static constexpr uint32_t SMEM = 1024u + PREFILL + DEC_STAGES + DEC_Q + 2u * DSTAGES * 8u;
    static constexpr uint32_t RED = (kDecodeWarps * 16u * D + 2u * kDecodeWarps * 16u) * 4u;
    static_assert(SMEM <= 232448u, "one fused CTA fits the SM's 227 KB");
    static_assert(RED <= DEC_STAGES, "the decode merge area fits its stages");
};

/* The launch's arguments: both sides' parameters and tensor maps, and the
 * decode grid's shape (CTA b < dec_pieces runs decode piece b). */
struct fused_args {
    attn_cuda_prefill_params pf;
    attn_prefill::KvMaps pmaps;
    dec::tmap_args dec;
    uint32_t dec_x, dec_y, dec_pieces;
};

/* The decode compute warps: the tiles of one piece (consume_tiles with two
 * warps: each takes the 16-key blocks warp, warp + 2 of every 64-key tile),
 * then the fixed-order merge of the two warps' states and the write-out
 * (tc::epilogue: O/LSE, or the piece's slot). */
template <int D, typename KV>
__device__ __forceinline__ void
decode_compute(const attn_cuda_decode_params &p, const dec::cta_work &w,
               const tc::tmap_pipe<D, KV> &pipe, const uint4 *qh, const attn::paged::key_walk &walk,
               int ntiles, int h0, uint4 *red)
{
    using C = tc::cfg<D>;
    float o[C::NB][4];
    float m[2], l[2];
    uint32_t qa[C::QREG ? C::KS : 1][4];
    dec::load_qa<D>(qa, qh);
    tc::ring rg;
    dec::consume_tiles<D, KV, false, 0, tc::tmap_pipe<D, KV>, kDecodeWarps>(
        p, pipe, qa, qh, nullptr, walk, ntiles, o, m, l, rg);
    /* every tile landed and was read (the copy warp issues exactly ntiles),
     * so the merge may reuse the stages */
    tc::compute_sync<true, 32 * kDecodeWarps, kDecodeBar>();
    tc::epilogue<D, true, kDecodeWarps, kDecodeBar>(p, w, h0, o, m, l,
                                                    reinterpret_cast<float *>(red));
}

template <int D, typename KV>
__global__ void __launch_bounds__(kThreads, 1) mixed_fused(const __grid_constant__ fused_args a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = Layout<D>;
    using PC = typename L::PC;
    using DC = typename L::DC;
    constexpr int V = ATTN_PREFILL_FUSED;
    const attn_cuda_prefill_params &p = a.pf;
    const attn_cuda_decode_params &dp = a.dec.p;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *base = attn::ptx::align_1024(smem_raw);
    const attn_prefill::Smem<D, KV> sm = attn_prefill::smem_at<D, KV, V>(base);
    uint4 *dbase = reinterpret_cast<uint4 *>(base + L::PREFILL);
    tc::tmap_pipe<D, KV> pipe;
    pipe.ks = dbase;
    pipe.vs = dbase + L::DSTAGES * DC::TILE_VECS;
    uint4 *qh = dbase + 2 * L::DSTAGES * DC::TILE_VECS;
    pipe.full = reinterpret_cast<uint64_t *>(qh + 16 * DC::CH);
    pipe.empty = pipe.full + L::DSTAGES;
    pipe.stages = L::DSTAGES;
    pipe.consumers = 32 * kDecodeWarps;
    pipe.set_l2(dp);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    /* this CTA's decode piece: the decode grid's CTA blockIdx.x, in its
     * launch order (x fastest), or none */
    dec::cta_work w;
    w.live = false;
    int h0 = 0;
    if (blockIdx.x < a.dec_pieces) {
        const uint32_t b = blockIdx.x, x = b % a.dec_x, y = (b / a.dec_x) % a.dec_y;
        w = dp.heads_fast ? dec::work_at(dp, (int)y, (int)x) : dec::work_at(dp, (int)x, (int)y);
        h0 = (int)(b / (a.dec_x * a.dec_y) * ATTN_DECODE_CHUNK_HEADS);
    }
    if (tid == 0) {
        attn_prefill::init_barriers<D, KV, V>(sm);
        pipe.init(); /* ends with the fence that shows both rings to the TMA unit */
        if (a.pmaps.on) {
            attn_sm90::prefetch_tensormap(&a.pmaps.k);
            attn_sm90::prefetch_tensormap(&a.pmaps.v);
        }
    }
    if (warp == kCopyWarp && lane == 0 && w.live) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            attn::ptx::prefetch_tensormap(&a.dec.maps[i]);
    }
    attn::paged::key_walk walk = {0, 0, 0, 0};
    int ntiles = 0;
    if (w.live) {
        walk = dec::walk_of(w);
        ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
        if (warp < kDecodeWarps)
            tc::stage_q<D, KV, false, 32 * kDecodeWarps>(dp, w, h0, qh, nullptr);
    }
    __syncthreads(); /* barriers initialised, decode Q staged: the CTA's one barrier */
    /* whether this CTA has a prefill queue (unit_at reads queue blockIdx.x) */
    const bool prefill = p.worker_indptr == nullptr || blockIdx.x < p.num_workers;

    if (warp < kDecodeWarps) {
        if (w.live)
            decode_compute<D, KV>(dp, w, pipe, qh, walk, ntiles, h0, dbase);
    } else if (warp == kCopyWarp) {
        if (w.live) {
            tc::ring rg;
            pipe.produce(a.dec.maps, a.dec.hnd != 0, w.hkv, walk, dec::table_of(dp, w), ntiles,
                         lane, rg);
        }
    } else if (!prefill) {
        /* a CTA past the prefill queues: its decode piece only */
    } else if (warp == kProducerWarp) {
        attn_prefill::produce_units<D, KV, V>(p, a.pmaps, sm, lane);
    } else {
        constexpr int C0 = 128; /* the first consumer thread: warpgroups 1 and 2 */
        attn_prefill::consume_units<D, KV, V>(p, a.pmaps, sm, tid / 128 - 1, tid % 128, tid - C0);
    }
#else
    /* wgmma exists on sm_90a only: the portable compute_90 PTX carries no
     * body (the launcher runs sm_90a only) */
    __trap();
#endif
}

/* The decode grid's CTAs (the pieces the fused CTAs take one each). */
uint32_t decode_pieces(const attn_cuda_decode_params *dp)
{
    const uint64_t n =
        attn_mixed_fused_pieces(dp->item_capacity, dp->num_qo_heads, dp->num_kv_heads);
    return n > 0xffffffffull ? 0xffffffffu : (uint32_t)n;
}

template <int D, typename KV>
int launch_typed(const attn_cuda_prefill_params *pf, const attn_cuda_decode_params *dp,
                 cudaStream_t st)
{
    using L = Layout<D>;
    fused_args a;
    memset(&a, 0, sizeof a);
    a.pf = *pf;
    a.pmaps = attn_prefill::kv_maps<D>(pf);
    a.dec.p = *dp;
    a.dec.p.merge_counters = nullptr; /* the decode reducer folds split slots */
    a.dec.p.pdl = ATTN_CUDA_PDL_OFF;
    a.dec.p.probe = nullptr;
    a.dec.p.probe_phases = nullptr;
    const uint32_t pieces = decode_pieces(dp);
    if (pieces > 0 && attn::decode::encode_maps(a.dec.p, a.dec) != 0)
        return ATTN_E_CUDA;
    a.dec_x = dp->heads_fast ? dp->num_kv_heads : dp->item_capacity;
    a.dec_y = dp->heads_fast ? dp->item_capacity : dp->num_kv_heads;
    a.dec_pieces = pieces;
    /* the prefill grid (the queues', or the snake's over at most max_ctas),
     * widened to one CTA per decode piece: the CTAs past the queues run
     * only their piece, the snake spreads its units over whatever grid runs */
    const uint32_t units = pf->num_items * pf->num_kv_heads;
    uint32_t grid = pf->worker_indptr                      ? pf->num_workers
                    : pf->max_ctas && pf->max_ctas < units ? pf->max_ctas
                                                           : units;
    grid = grid > pieces ? grid : pieces;
    if (grid > 0) {
        if (cudaFuncSetAttribute(mixed_fused<D, KV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)L::SMEM) != cudaSuccess)
            return ATTN_E_CUDA;
        mixed_fused<D, KV><<<grid, kThreads, L::SMEM, st>>>(a);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    if (pf->num_merges) { /* the fused tiles' rows are the full kernel's (tile_m 128) */
        static_assert(attn_prefill::Cfg<D, ATTN_PREFILL_FUSED>::BM ==
                          attn_prefill::Cfg<D, ATTN_PREFILL_FULL>::BM,
                      "the combine kernel folds 128-row m tiles");
        attn_prefill::attn_prefill_combine<D, false>
            <<<dim3(pf->num_merges, pf->num_kv_heads, attn_prefill::kCombineSlices), 128, 0, st>>>(
                *pf);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    return pieces > 0 ? attn_cuda_decode_merge_launch(dp, st) : 0;
}

template <typename KV>
int launch_d(const attn_cuda_prefill_params *pf, const attn_cuda_decode_params *dp, cudaStream_t st)
{
    return pf->head_dim == 64 ? launch_typed<64, KV>(pf, dp, st)
                              : launch_typed<128, KV>(pf, dp, st);
}

} // namespace attn_mixed

extern "C" uint32_t attn_cuda_mixed_smem(uint32_t head_dim)
{
    return head_dim == 64    ? attn_mixed::Layout<64>::SMEM
           : head_dim == 128 ? attn_mixed::Layout<128>::SMEM
                             : 0u;
}

extern "C" int attn_cuda_mixed_launch(const attn_cuda_prefill_params *pf,
                                      const attn_cuda_decode_params *dp, void *stream)
{
    if (pf->variant != ATTN_PREFILL_FUSED || pf->head_dim != dp->head_dim ||
        pf->num_qo_heads != dp->num_qo_heads || pf->num_kv_heads != dp->num_kv_heads ||
        pf->num_kv_heads == 0 || pf->num_qo_heads % pf->num_kv_heads)
        return ATTN_E_SHAPE;
    /* the dtypes refused as dtypes, the page size and head dim as shapes */
    const bool dtypes_ok = (pf->kv_dtype == ATTN_BF16 || pf->kv_dtype == ATTN_FP16) &&
                           pf->q_dtype == pf->kv_dtype && dp->q_dtype == pf->q_dtype &&
                           dp->kv_dtype == pf->kv_dtype;
    if (!dtypes_ok)
        return ATTN_E_DTYPE;
    if (attn_mixed_fused_refusal(pf->head_dim, pf->head_dim, pf->q_dtype, pf->kv_dtype,
                                 1u << dp->page_shift) != nullptr)
        return ATTN_E_SHAPE;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    return pf->kv_dtype == ATTN_BF16 ? attn_mixed::launch_d<__nv_bfloat16>(pf, dp, st)
                                     : attn_mixed::launch_d<__half>(pf, dp, st);
}

extern "C" const char *attn_cuda_mixed_symbol(uint32_t head_dim, attn_dtype kv_dtype)
{
    static const char *const k_fused[2][2] = {
        {"attn_mixed::mixed_fused<64, __nv_bfloat16>", "attn_mixed::mixed_fused<64, __half>"},
        {"attn_mixed::mixed_fused<128, __nv_bfloat16>", "attn_mixed::mixed_fused<128, __half>"}};
    if ((head_dim != 64 && head_dim != 128) || (kv_dtype != ATTN_BF16 && kv_dtype != ATTN_FP16))
        return nullptr;
    return k_fused[head_dim == 128][kv_dtype == ATTN_FP16];
}

extern "C" int attn_cuda_mixed_symbols(const attn_cuda_prefill_params *pf,
                                       const attn_cuda_decode_params *dp, const char **fused,
                                       const char **combine, const char **reducer)
{
    if (pf->variant != ATTN_PREFILL_FUSED ||
        attn_mixed_fused_refusal(pf->head_dim, pf->head_dim, pf->q_dtype, pf->kv_dtype,
                                 1u << dp->page_shift) != nullptr ||
        attn_cuda_prefill_symbols(pf, fused, combine) == 0)
        return 0;
    attn_cuda_decode_params d = *dp;
    d.fused_merge = 0;
    const char *producer = nullptr;
    *reducer = nullptr;
    if (attn_mixed::decode_pieces(dp) > 0)
        attn_cuda_decode_symbols(&d, &producer, reducer);
    return 1 + (*combine != nullptr) + (*reducer != nullptr);
}
