/* The Hopper tensor-core prefill/append kernel (see prefill_launch.h for
 * the contract) and the combine kernel of split m tiles.
 *
 * CTA = 3 warpgroups (the light variant of Cfg: one producer warp and
 * one consumer warpgroup), one item (m tile of 128 packed rows, light 64,
 * range of its key tiles) and one K/V head (the unit walk below):
 *   WG 0, producer (88 registers; light: one warp): Q tile once, then K and V of every key
 *     tile of the list into the swizzled smem ring, K and V of a stage on
 *     their own full/empty barriers.  Two tiers: a paged store whose page
 *     size is a power of two in [8, BN] takes whole pages by TMA boxes
 *     (KvMaps; V's boxes carry a whole page at d >= 128 where the rule
 *     takes them; the request's last page and rows past its keys by cp.async
 *     with zero fill); any other store is gathered row by row through the
 *     address program with 16-byte cp.async, K and V of a row together.  A
 *     barrier completes once the TMA bytes and every producer thread's
 *     copies landed (cp.async.mbarrier.arrive).
 *   WG 1 and 2, consumers (208 registers), 64 rows each: S = Q K^T by
 *     wgmma (SS) once K_i landed, mask on PARTIAL tiles only, online
 *     softmax (fp32, base 2), P to bf16/fp16 in registers, O += P V by
 *     wgmma (RS, V MN-major); K_i's slot is released once S_i is done, V_i's
 *     once P_i V_i is (one arrive per warp).
 * The epilogue writes O and LSE (natural log) or, for a split item, the
 * partial state in the plan's ABI; attn_prefill_combine folds the parts of
 * a split m tile in ascending key order with kernels/common/state.h.
 *
 * Contracts (kernels/common/state.h): masked cells are -inf before the
 * max; a NaN score is visible (fmaxf drops it from the max, exp2 turns it
 * into a NaN p, so O and l become NaN); a row with no visible cell keeps
 * l = 0 and gives O = 0, LSE = -inf.
 */
#ifndef ATTN_CUDA_PREFILL_KERNEL_CUH
#define ATTN_CUDA_PREFILL_KERNEL_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "kernels/common/state.h"
#include "kernels/cuda/barrier.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/prefill/sm90.cuh"
#include "kernels/cuda/prefill/wgmma_ops.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/prefill_launch.h"

namespace attn_prefill
{

using namespace attn_sm90;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
/* What unit_at returns past a CTA's last unit. */
constexpr uint32_t kNoUnit = 0xffffffffu;
constexpr uint32_t kSchedBar = 1; /* named barriers 1, 2: the consumers' issue turns */
/* The full kernel run by 2-CTA clusters (the cluster walk: Cfg::CLUSTER,
 * produce_units); a configuration of the kernel, not a plan variant (its
 * plan is the full kernel's). */
constexpr int kFullCluster = 3;

/* The kernel's configuration per head dim D and variant V
 * (attn_prefill_variant, kernels/common/prefill_plan.h: 0 full, 1 light,
 * 2 fused -- the prefill roles of the fused mixed kernel, kernels/cuda/mixed.cu).  The full kernel
 * fills an SM: a producer warpgroup and 2 consumer warpgroups over a
 * 128-row m tile, up to 230,912 B of shared memory, 384 x 168 registers.
 * The light one (issue 12's overlap) is meant to leave room for a decode
 * producer CTA (producer_tc_tmap at d 128: 5 warps x 168 registers,
 * 107,568 B): one producer warp and one consumer warpgroup over a 64 x 64
 * tile, 5 warps x 168 registers, 116,224 B at d 128.  Registers are held
 * per SM sub-partition (4 x 16,384, a warp's in its own): 8 light warps
 * of 128 (a producer warpgroup) and 5 decode warps of 168 need 2 x 4,096 +
 * 2 x 5,376 = 18,944 on one sub-partition, which the H200 refused (no
 * decode CTA ran beside a light one, r5 call 2); 5 + 5 warps of 168 need 3
 * x 5,376 = 16,128 at most (docs/cuda-prefill-engine.md).  The fused one
 * runs beside the decode roles inside one CTA of 12 warps x 168 registers
 * (so no setmaxnreg): one producer warp and two consumer warpgroups over
 * a 128 x 64 tile, in the shared memory the decode stages leave. */
template <int D, int V = 0> struct Cfg {
    static constexpr bool LIGHT = V == ATTN_PREFILL_LIGHT;
    static constexpr bool FUSED = V == ATTN_PREFILL_FUSED;
    /* the full kernel's CTAs in 2-CTA clusters, each pair walking its two
     * queues in lockstep and multicasting the K/V tiles of sibling units
     * (produce_units); every other constant is the full kernel's */
    static constexpr bool CLUSTER = V == kFullCluster;
    static constexpr bool FULL = V == ATTN_PREFILL_FULL || CLUSTER;
    static constexpr int BM = LIGHT ? ATTN_PREFILL_LIGHT_TILE_M : ATTN_PREFILL_TILE_M;
    static constexpr int BN = LIGHT   ? ATTN_PREFILL_LIGHT_TILE_N
                              : FUSED ? ATTN_PREFILL_FUSED_TILE_N
                                      : ATTN_PREFILL_TILE_N(D);
    static constexpr int CONSUMER_WGS = BM / 64; /* one warpgroup per 64 rows */
    /* V's whole-page boxes (KvMaps::v_lg) exist in the full kernel at d >= 128
     * only (attn_cuda_prefill_v_page_boxes; in the light and fused trials
     * their code cost ptxas 16-84 bytes of spills) */
    static constexpr bool V_PAGE_BOXES = D >= 128 && FULL;
    static constexpr uint32_t LG_BN = BN == 128 ? 7u : BN == 64 ? 6u : 0u; /* V's one block */
    static_assert(1 << LG_BN == BN, "the key tile is 64 or 128 rows");
    static constexpr int PRODUCER_THREADS = LIGHT || FUSED ? 32 : 128;
    /* the producer warp that issues V's TMA boxes: the second where there
     * is one, so K's and V's boxes of a tile go out from two warps at once
     * (H200, 2026-12-03: causal S 8192 1.075 -> 0.995 ms, S 16384 4.261 ->
     * 3.909, d 256 2.120 -> 2.005; docs/cuda-prefill.md round 7) */
    static constexpr int V_ISSUE_WARP = PRODUCER_THREADS >= 64 ? 1 : 0;
    /* the producer's threads after the consumers' (the light kernel: its
     * consumer warpgroup must start at warp 0 for wgmma) */
    static constexpr bool PRODUCER_LAST = LIGHT;
    static constexpr int THREADS = PRODUCER_THREADS + 128 * CONSUMER_WGS;
    static constexpr int CONSUMER_WARPS = 4 * CONSUMER_WGS;
    /* __launch_bounds__(BOUND_THREADS, MIN_CTAS) caps the registers at
     * POOL_REGS: the light kernel declares 192 threads x 2 CTAs (it
     * launches 160), so the cap is 168 as the full kernel's 384 x 1 */
    static constexpr int BOUND_THREADS = LIGHT ? 192 : FUSED ? 384 : THREADS;
    static constexpr int MIN_CTAS = LIGHT ? 2 : 1;
    static constexpr uint32_t POOL_REGS = (65536 / (BOUND_THREADS * MIN_CTAS)) & ~7u;
    /* fused: what the decode roles' stages leave of the SM's 227 KB (at
     * d 128, 2 beside 3 decode stages; 3 beside 2 measured slower on every
     * mixed batch, H200 2026-12-01 r6) */
    static constexpr int STAGES = LIGHT   ? 3
                                  : FUSED ? (D == 128 ? 2 : 3)
                                          : (D == 256 ? 2 : (D == 128 ? 3 : 4));
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int PIECES = D / 8;         /* 16-byte pieces per row */
    static constexpr int ON = D > 128 ? 128 : D; /* N of one PV instruction */
    static constexpr int OC = D / ON;            /* PV instructions per k step */
    static constexpr int SMEM = 1024 + Q_BYTES + STAGES * 2 * KV_BYTES + 64 * 8;
    static_assert((4 * STAGES + 2) * 8 <= 64 * 8, "barriers fit their reserve");
    static_assert(!LIGHT || D <= 128, "the light variant serves d 64 and 128");
    static_assert(!FUSED || D <= 128, "the fused variant serves d 64 and 128");
    /* Overlap S_i with P_{i-1} V_{i-1} inside a warpgroup: it holds two
     * stages at once, so it pays only with three or more (d = 256 has two) */
    static constexpr bool OVERLAP = STAGES >= 3;
    /* setmaxnreg moves registers between warpgroups inside the CTA's pool
     * of POOL_REGS x THREADS (the light kernel, one producer warp, does not
     * move any): what the producer frees, (POOL - P) x 128, must cover what
     * the consumers take, (C - POOL) x 128 x CONSUMER_WGS, or their
     * setmaxnreg.inc waits forever.  88 / 208 is the split where ptxas
     * spills nothing at d 64, 128 and 256 (the producer's two tile loops
     * want more than 72; the consumers fit in 208 once Q's descriptors are
     * not hoisted; 2026-12-01) */
    static constexpr bool SETMAXNREG = !LIGHT && !FUSED;
    static constexpr uint32_t PRODUCER_REGS = 88;
    static constexpr uint32_t CONSUMER_REGS = 208;
    static_assert(!SETMAXNREG || (POOL_REGS - PRODUCER_REGS) * 128 >=
                                     (CONSUMER_REGS - POOL_REGS) * 128 * CONSUMER_WGS,
                  "register pool");
    /* The two consumer warpgroups take turns issuing (FA3's ping-pong on
     * named barriers) only at d 256.  With the overlap (d <= 128) the kernel
     * waits on its K/V loads, not on the tensor pipe, and the forced turns
     * put one warpgroup's wait on the other too: without them (and with
     * QPREFETCH) the consumers' share of samples at the K wait fell from
     * 11 % to 3 % and causal S 8192 went 1.166 -> 1.118 ms (H200,
     * 2026-12-01, bench/results/prefill-h200-2026-12-01-r3.md; timed at
     * d 128, d 64 shares the overlap and ran only the correctness sweep) */
    static constexpr bool PINGPONG = D > 128;
    /* The consumers warm L2 with the next unit's Q (prefetch_q, issued
     * beside the unit's first S product); with the overlap only (as
     * PINGPONG), so d 256 keeps its DRAM round trip */
    static constexpr bool QPREFETCH = D <= 128;
    /* The producer may load a unit's first K tile before its Q (FA3's
     * order: that slot frees while the previous unit still runs, Q's only
     * once its last S is done).  Measured on the H200 (r3, d 128): no
     * faster than Q first, and with QPREFETCH ptxas spilled 40 bytes in the
     * producer; off, kept measured (the kernels the device ran and timed
     * were built from this source) */
    static constexpr bool Q_AFTER_FIRST_TILE = false;
};

/* The MMA element type of a storage dtype. */
template <typename KV> struct Mma;

template <> struct Mma<__nv_bfloat16> {
    static constexpr attn_dtype dtype = ATTN_BF16;
    template <int N>
    static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t a, uint64_t b, int acc)
    {
        if constexpr (N == 64)
            wgmma_ss_m64n64k16_Bf16(d, a, b, acc);
        else
            wgmma_ss_m64n128k16_Bf16(d, a, b, acc);
    }
    template <int N>
    static __device__ __forceinline__ void ss_first(float (&d)[N / 2], uint64_t a, uint64_t b)
    {
        if constexpr (N == 64)
            wgmma_ss_m64n64k16_Bf16_first(d, a, b);
        else
            wgmma_ss_m64n128k16_Bf16_first(d, a, b);
    }
    template <int N>
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b,
                                              int acc)
    {
        if constexpr (N == 64)
            wgmma_rs_m64n64k16_Bf16(d, a, b, acc);
        else
            wgmma_rs_m64n128k16_Bf16(d, a, b, acc);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

template <> struct Mma<__half> {
    static constexpr attn_dtype dtype = ATTN_FP16;
    template <int N>
    static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t a, uint64_t b, int acc)
    {
        if constexpr (N == 64)
            wgmma_ss_m64n64k16_F16(d, a, b, acc);
        else
            wgmma_ss_m64n128k16_F16(d, a, b, acc);
    }
    template <int N>
    static __device__ __forceinline__ void ss_first(float (&d)[N / 2], uint64_t a, uint64_t b)
    {
        if constexpr (N == 64)
            wgmma_ss_m64n64k16_F16_first(d, a, b);
        else
            wgmma_ss_m64n128k16_F16_first(d, a, b);
    }
    template <int N>
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b,
                                              int acc)
    {
        if constexpr (N == 64)
            wgmma_rs_m64n64k16_F16(d, a, b, acc);
        else
            wgmma_rs_m64n128k16_F16(d, a, b, acc);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

/* The consumers' issue turn on named barrier `id` (Cfg::PINGPONG): wait
 * for it ... */
template <int D, int LT> __device__ __forceinline__ void turn_sync(uint32_t id)
{
    if constexpr (Cfg<D, LT>::PINGPONG)
        named_sync(id, 256);
}

/* ... and hand it to the other warpgroup. */
template <int D, int LT> __device__ __forceinline__ void turn_arrive(uint32_t id)
{
    if constexpr (Cfg<D, LT>::PINGPONG)
        named_arrive(id, 256);
}

/* Mask one PARTIAL tile of S (this thread's 2 rows x BN/4 keys).  Closed
 * forms compare keys with the row's exact visible ranges; FlashMask reads
 * each key column's endpoints once for both rows, dense masks each cell's
 * byte after the request's bounds; both into a bit set (keeping the
 * register array statically indexed). */
template <int BN>
__device__ __forceinline__ void mask_partial(const attn_cuda_prefill_params &p,
                                             const attn_prefill_item &it,
                                             const attn_prefill_req &rq, const int (&tok)[2],
                                             int64_t n, int lane, float (&sacc)[BN / 2])
{
    const int64_t key0 = n * BN + (lane % 4) * 2;
    if (p.mask.kind != ATTN_MASK_FLASHMASK && p.mask.kind != ATTN_MASK_DENSE) {
        attn_row_keys rk[2];
#pragma unroll
        for (int ri = 0; ri < 2; ri++) {
            if (tok[ri] < rq.C) {
                rk[ri] = attn_mask_row_keys(&p.mask, (uint32_t)it.req, tok[ri]);
            } else {
                rk[ri].lo0 = rk[ri].hi0 = rk[ri].lo1 = rk[ri].hi1 = 0;
            }
        }
#pragma unroll
        for (int c = 0; c < BN / 2; c++) {
            const int64_t key = key0 + (c / 4) * 8 + (c & 1);
            const attn_row_keys &k = rk[(c >> 1) & 1];
            const bool vis = (key >= k.lo0 && key < k.hi0) || (key >= k.lo1 && key < k.hi1);
            if (!vis)
                sacc[c] = -INFINITY;
        }
        return;
    }
    uint64_t vis = 0;
    if (p.mask.kind == ATTN_MASK_FLASHMASK) {
        /* attn_mask_visible's FlashMask case with its loads taken apart:
         * the request's bounds once, each of this lane's BN / 4 key
         * columns' four endpoints once for both rows, two column groups'
         * loads in flight together.  Per cell, the rolled call chained
         * the request's and the column's loads 64 times per PARTIAL tile
         * (~20 us a tile at d 128: FlashMask docs S 8192 ran 0.59 ms with
         * 128-key tiles and 0.43 with 64-key ones, H200 2026-12-02,
         * docs/cuda-prefill.md round 5) */
        const attn_mask_req_info r = p.mask.req[it.req];
        const int64_t keys = r.T + r.C;
        const bool row_ok[2] = {tok[0] < r.C, tok[1] < r.C};
#pragma unroll 2
        for (int kc = 0; kc < BN / 8; kc++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t j = key0 + kc * 8 + e;
                if (j >= keys) /* key0 >= 0: tiles start at key 0 */
                    continue;
                const int64_t col = r.col + j;
                const int32_t uts = p.mask.fm_uts[col], ute = p.mask.fm_ute[col];
                const int32_t lts = p.mask.fm_lts[col], lte = p.mask.fm_lte[col];
#pragma unroll
                for (int ri = 0; ri < 2; ri++) {
                    const int64_t i = tok[ri];
                    const bool hidden = (i >= uts && i < ute) || (i >= lts && i < lte);
                    const bool causal_ok = !p.mask.fm_causal || j <= r.T + i;
                    if (row_ok[ri] && causal_ok && !hidden)
                        vis |= 1ull << (kc * 4 + ri * 2 + e);
                }
            }
        }
    } else {
        /* attn_mask_visible's dense case, its loads taken apart the same
         * way: the request's bounds once, then one independent byte load
         * per cell (a cell's two rows are C keys apart, so no byte serves
         * both), two column groups in flight together.  The rolled
         * per-cell call chained the request's loads before each bit. */
        const attn_mask_req_info r = p.mask.req[it.req];
        const int64_t keys = r.T + r.C;
        const uint8_t *bits = p.mask.dense_bits + r.dense_byte;
        const bool row_ok[2] = {tok[0] < r.C, tok[1] < r.C};
        const int64_t row_bit[2] = {(int64_t)tok[0] * keys, (int64_t)tok[1] * keys};
#pragma unroll 2
        for (int kc = 0; kc < BN / 8; kc++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t j = key0 + kc * 8 + e;
                if (j >= keys)
                    continue;
#pragma unroll
                for (int ri = 0; ri < 2; ri++) {
                    if (!row_ok[ri])
                        continue;
                    const int64_t bit = row_bit[ri] + j;
                    const bool set = ((bits[bit >> 3] >> (bit & 7)) & 1u) != 0;
                    if (set != p.mask.true_means_masked)
                        vis |= 1ull << (kc * 4 + ri * 2 + e);
                }
            }
        }
    }
#pragma unroll
    for (int c = 0; c < BN / 2; c++)
        if (!((vis >> c) & 1ull))
            sacc[c] = -INFINITY;
}

/* The producer's walk of one request's pages: paged kinds read the page
 * list directly (shift and mask when the page size is a power of two);
 * contiguous and ragged stores go through attn_kv_addr_segment. */
struct KvWalk {
    const int32_t *pages; /* paged: the request's page list; else NULL */
    int64_t page_size;
    int shift; /* log2(page_size), or -1 */
    uint32_t req;
};

__device__ __forceinline__ KvWalk kv_walk(const attn_kv_addr &a, uint32_t b)
{
    KvWalk w;
    w.req = b;
    w.page_size = a.page_size;
    w.pages = 0;
    if (a.kind == ATTN_KV_ADDR_PAGED_CSR)
        w.pages = a.page_indices + a.page_indptr[b];
    else if (a.kind == ATTN_KV_ADDR_PAGED_DENSE)
        w.pages = a.block_table + attn_kv_addr_cache_row(&a, b) * (int64_t)a.max_blocks;
    w.shift = -1;
    if (a.page_size > 0 && (a.page_size & (a.page_size - 1)) == 0)
        w.shift = __ffsll(a.page_size) - 1;
    return w;
}

/* Logical block (page-table entry) of row t of a paged walk. */
__device__ __forceinline__ int64_t kv_block_of(const KvWalk &w, int64_t t)
{
    return w.shift >= 0 ? t >> w.shift : (int64_t)((uint32_t)t / (uint32_t)w.page_size);
}

/* Element offset of logical row t of the walk's request, K/V head h. */
__device__ __forceinline__ int64_t kv_row_elem(const attn_kv_addr &a, const KvWalk &w, int64_t t,
                                               uint32_t h, uint32_t d)
{
    if (w.pages) {
        int64_t j, slot;
        if (w.shift >= 0) {
            j = t >> w.shift;
            slot = t & (w.page_size - 1);
        } else {
            j = (int64_t)((uint32_t)t / (uint32_t)w.page_size);
            slot = t - j * w.page_size;
        }
        return attn_kv_addr_elem(&a, w.pages[j], slot, h, 0, d);
    }
    attn_kv_seg s;
    attn_kv_addr_segment(&a, w.req, t, t + 1, &s);
    return attn_kv_addr_elem(&a, s.page, s.slot, h, 0, d);
}

/* Two values of q-dtype `dt` at element i (i even) stored from fp32. */
__device__ __forceinline__ void store2(void *base, attn_dtype dt, size_t i, float x, float y)
{
    if (dt == ATTN_BF16) {
        *reinterpret_cast<__nv_bfloat162 *>(static_cast<uint16_t *>(base) + i) =
            __floats2bfloat162_rn(x, y);
    } else if (dt == ATTN_FP16) {
        *reinterpret_cast<__half2 *>(static_cast<uint16_t *>(base) + i) = __floats2half2_rn(x, y);
    } else {
        *reinterpret_cast<float2 *>(static_cast<float *>(base) + i) = make_float2(x, y);
    }
}

/* The TMA tier of the K/V loads (prefill/instance.cuh encodes the maps): a
 * paged store whose page size is a power of two in [8, BN] is read as a 4-d
 * tensor [pages][slot or head][head or slot][d] (NHD or HND), one box =
 * one page (P rows) x 64 columns of one head, landing in the swizzled tile
 * layout of sm90.cuh (TMA's 128-byte swizzle is the same XOR of 16-byte
 * piece and row % 8).  `on` is 0 when the store does not qualify; then
 * every row goes through the cp.async gather. */
struct KvMaps { /* 64-byte aligned by CUtensorMap */
    CUtensorMap k, v;
    uint32_t on;
    uint32_t box_rows; /* P: a box is one page */
    /* V's boxes carry every column chunk of a page (a 5-d map,
     * attn_cuda_prefill_v_page_boxes): log2(P), V's stage in page blocks
     * (swz_offset_blk); 0: one box per page and chunk, swz_offset's layout */
    uint32_t v_lg;
};

/* Whether this launch's K/V rows go by the TMA tier (the producer loads,
 * the consumers skip the proxy fence of TMA-only tiles): the one test. */
__device__ __forceinline__ bool kv_tma_tier(const attn_cuda_prefill_params &p, const KvMaps &maps)
{
    return maps.on &&
           (p.kv.kind == ATTN_KV_ADDR_PAGED_CSR || p.kv.kind == ATTN_KV_ADDR_PAGED_DENSE);
}

template <int D, typename KV> struct Smem {
    uint8_t *q, *k, *v;
    /* K and V of a stage have their own barriers: S_i = Q K_i^T starts when
     * K_i has landed, and K_i's slot is free once S_i is done */
    uint64_t *full_k, *full_v, *empty_k, *empty_v, *qfull, *qempty;
};

/* The producer's state of one K/V head of one request: where rows live and
 * how one tile's rows are split between TMA boxes and the cp.async gather. */
template <int D> struct KvLoad {
    KvWalk walk;
    int64_t keys;
    uint32_t hkv, page_elems, row_stride, head_off, slot_mask;
    bool hnd, tma;
    int box_rows; /* P, when tma */
};

/* The TMA tier's loads of one tile of K or V (by `src` and `map`) into the
 * stage at smem `dst`, completing on `full`: rows [0, nfull * box_rows) by
 * TMA (lane l of producer warp `warp` issues box l / CH, chunk l % CH, of
 * page `box_page`, or with `vlg` V's whole page l), the rest -- the request's last page and rows
 * past its keys (zero-filled) -- by 16-byte cp.async, the page looked up per row (the last tile of
 * a request only).  Every producer thread then arrives on `full` once its own copies landed
 * (PRODUCER_THREADS arrivals plus the TMA bytes).  With `mc` (Cfg::CLUSTER, a tile both CTAs
 * of the cluster read) this CTA issues the boxes of the pages whose index has parity `rank`,
 * multicast into both CTAs, and announces every box: the other CTA issues the rest. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void
load_tile_tma(const KvLoad<D> &L, const KV *src, const CUtensorMap *map, uint32_t dst,
              uint64_t *full, int64_t n, int32_t box_page, int nfull, int tid, uint32_t vlg = 0,
              int warp = 0, bool mc = false, uint32_t rank = 0)
{
    using C = Cfg<D, LT>;
    constexpr int CH = D / 64; /* 128-byte column chunks of a row */
    constexpr int ROWS_PER_PASS = C::PRODUCER_THREADS / C::PIECES;
    constexpr int RPT = C::BN / ROWS_PER_PASS;
    const int c = tid % C::PIECES, r_first = tid / C::PIECES;
    const int row_tma = nfull * L.box_rows;
    const int bt = tid - 32 * warp; /* this thread's box, in the issuing warp */
    if (C::V_PAGE_BOXES && vlg) {
        /* V as whole pages: lane b issues page b's box, every chunk; its
         * page id is lane b x CH's (the one that fetched it per chunk) */
        const int32_t page = __shfl_sync(0xffffffffu, box_page, (bt * CH) & 31);
        if (bt >= 0 && bt < nfull) {
            attn::mbar::expect_tx(full, (uint32_t)L.box_rows * 128u * CH);
            const uint32_t at = dst + bt * L.box_rows * 128 * CH;
            if (C::CLUSTER && mc) {
                if (((uint32_t)bt & 1u) == rank)
                    tma_load_5d_mc(at, map, full, 0, 0, 0, (int32_t)L.hkv, page, 0x3);
            } else {
                tma_load_5d(at, map, full, 0, 0, 0, (int32_t)L.hkv, page);
            }
        }
    } else if (bt >= 0 && bt < nfull * CH) {
        const int b = bt / CH, ch = bt % CH; /* box b = the tile's page b, from slot 0 */
        attn::mbar::expect_tx(full, (uint32_t)L.box_rows * 128u);
        const uint32_t at = dst + ch * C::BN * 128 + b * L.box_rows * 128;
        const int32_t c1 = L.hnd ? 0 : (int32_t)L.hkv, c2 = L.hnd ? (int32_t)L.hkv : 0;
        if (C::CLUSTER && mc) {
            if (((uint32_t)b & 1u) == rank)
                tma_load_4d_mc(at, map, full, ch * 64, c1, c2, box_page, 0x3);
        } else {
            tma_load_4d(at, map, full, ch * 64, c1, c2, box_page);
        }
    }
    if (row_tma < C::BN) {
#pragma unroll 1
        for (int j = 0; j < RPT; j++) {
            const int r = r_first + j * ROWS_PER_PASS;
            if (r < row_tma)
                continue;
            const int32_t t = (int32_t)n * C::BN + r;
            const bool ok = t < L.keys;
            const uint32_t slot = (uint32_t)t & L.slot_mask;
            const int32_t page = ok ? L.walk.pages[kv_block_of(L.walk, t)] : 0;
            const int64_t off =
                ok ? (int64_t)page * L.page_elems + (slot * L.row_stride + L.head_off + c * 8) : 0;
            cp_async16(dst + (C::V_PAGE_BOXES && vlg ? swz_offset_blk(r, c, vlg, CH)
                                                     : swz_offset(r, c, C::BN)),
                       src + off, ok);
        }
    }
    cp_async_arrive_noinc(full);
}

/* The gather tier's loads of one tile, K and V together (one address per
 * row serves both copies: the gather is the producer's critical path),
 * into the stages at smem `kst` and `vst`; both full barriers complete
 * once every copy landed.  Page ids come from `pg` (this thread's rows,
 * read one tile ahead) for paged stores, else through kv_row_elem. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void
load_tile_gather(const attn_cuda_prefill_params &p, const KvLoad<D> &L, const KV *kb, const KV *vb,
                 uint32_t kst, uint32_t vst, uint64_t *full_k, uint64_t *full_v, int64_t n,
                 const int32_t *pg, int tid)
{
    using C = Cfg<D, LT>;
    constexpr int ROWS_PER_PASS = C::PRODUCER_THREADS / C::PIECES;
    constexpr int RPT = C::BN / ROWS_PER_PASS;
    const int c = tid % C::PIECES, r_first = tid / C::PIECES;
    if (L.walk.pages) {
        /* paged: offset = page * (P H_kv d) + slot * row_stride + head
         * offset, the last two in 32 bits (seed 0x04B/D, addr.h) */
#pragma unroll
        for (int j = 0; j < RPT; j++) {
            const int r = r_first + j * ROWS_PER_PASS;
            const int32_t t = (int32_t)n * C::BN + r;
            const bool ok = t < L.keys;
            const uint32_t slot = L.walk.shift >= 0 ? (uint32_t)t & L.slot_mask
                                                    : (uint32_t)t % (uint32_t)L.walk.page_size;
            const int64_t off =
                ok ? (int64_t)pg[j] * L.page_elems + (slot * L.row_stride + L.head_off + c * 8) : 0;
            const uint32_t so = swz_offset(r, c, C::BN);
            cp_async16(kst + so, kb + off, ok);
            cp_async16(vst + so, vb + off, ok);
        }
    } else {
#pragma unroll 4
        for (int j = 0; j < RPT; j++) {
            const int r = r_first + j * ROWS_PER_PASS;
            const int64_t t = n * C::BN + r;
            const bool ok = t < L.keys;
            const int64_t off = ok ? kv_row_elem(p.kv, L.walk, t, L.hkv, D) + c * 8 : 0;
            const uint32_t so = swz_offset(r, c, C::BN);
            cp_async16(kst + so, kb + off, ok);
            cp_async16(vst + so, vb + off, ok);
        }
    }
    cp_async_arrive_noinc(full_k);
    cp_async_arrive_noinc(full_v);
}

/* Warm L2 with the Q rows of unit (nx, nhkv), the next one this CTA takes:
 * Q is read once, from DRAM, by a load that waits until the consumers are
 * done with the previous unit's Q, so without this every unit started
 * with a DRAM round trip.  One prefetch per 128-byte line of the g heads'
 * contiguous rows of each token inside the request; `ct` is the consumer
 * thread (0 .. 128 x CONSUMER_WGS - 1) (the producer's 88 registers have none to spare: ptxas
 * spilled 4-40 bytes with it there). */
template <int D, int LT>
__device__ __forceinline__ void prefetch_q(const attn_cuda_prefill_params &p,
                                           const attn_prefill_item &nx, uint32_t nhkv, int ct)
{
    const uint32_t g = p.num_qo_heads / p.num_kv_heads;
    const attn_prefill_req nrq = p.reqs[nx.req];
    const int t0 = nx.row0 / (int)g;
    const int t_end = (nx.row0 + (int)Cfg<D, LT>::BM + (int)g - 1) / (int)g;
    const int t1 = t_end < (int)nrq.C ? t_end : (int)nrq.C;
    const int lines = (int)g * D / 64; /* 128-byte lines of one token's g heads */
    const char *q = static_cast<const char *>(p.q);
    for (int idx = ct; idx < (t1 - t0) * lines; idx += Cfg<D, LT>::CONSUMER_WGS * 128) {
        const int tok = t0 + idx / lines;
        const size_t off =
            ((size_t)(nrq.qrow + tok) * p.num_qo_heads + nhkv * g) * D * 2 + (idx % lines) * 128;
        prefetch_l2(q + off);
    }
}

/* The producer of one unit: Q, then K and V of each of its key tiles into
 * the ring.  k counts this CTA's units (Q's barrier phases), gi its stages.
 * Cfg::CLUSTER: the first `common` tiles are the ones the other CTA of the
 * cluster reads too (a sibling unit), multicast half by each CTA (`rank`). */
template <int D, typename KV, int LT>
__device__ __forceinline__ void
producer(const attn_cuda_prefill_params &p, const KvMaps &maps, const Smem<D, KV> &sm,
         const attn_prefill_item &it, const attn_prefill_req &rq, uint32_t hkv, int tid, uint32_t k,
         uint32_t &gi, int common = 0, uint32_t rank = 0)
{
    using C = Cfg<D, LT>;
    const uint32_t g = p.num_qo_heads / p.num_kv_heads;
    const uint32_t qs = smem_addr(sm.q);

    /* Q: tile rows are packed (token, head); rows past the request are 0 */
    auto load_q = [&]() {
        if (k > 0) /* the consumers are done with the previous unit's Q */
            mbar_wait(sm.qempty, (k - 1) & 1);
        /* q is in the K/V dtype (the launcher refuses anything else: rounding
         * an fp32 q to bf16 would cost the LSE its 1e-3 tolerance) */
        const uint16_t *q = static_cast<const uint16_t *>(p.q);
        for (int idx = tid; idx < C::BM * C::PIECES; idx += C::PRODUCER_THREADS) {
            const int r = idx / C::PIECES, c = idx % C::PIECES;
            const int pr = it.row0 + r;
            const int tok = pr / (int)g, hh = pr % (int)g;
            const bool ok = tok < rq.C;
            const size_t off =
                ok ? (((size_t)(rq.qrow + tok) * p.num_qo_heads + hkv * g + hh) * D + c * 8) : 0;
            cp_async16(qs + swz_offset(r, c, C::BM), q + off, ok);
        }
        /* qfull completes once the copies landed; the consumers fence */
        cp_async_arrive_noinc(sm.qfull);
    };
    constexpr bool Q_FIRST = !Cfg<D, LT>::Q_AFTER_FIRST_TILE;
    if constexpr (Q_FIRST)
        load_q();

    /* K/V: consecutive threads copy consecutive pieces of one row */
    const KV *kb = static_cast<const KV *>(p.k);
    const KV *vb = static_cast<const KV *>(p.v);
    const uint32_t ks = smem_addr(sm.k), vs = smem_addr(sm.v);
    KvLoad<D> L;
    L.walk = kv_walk(p.kv, (uint32_t)it.req);
    L.keys = (int64_t)rq.T + rq.C;
    L.hkv = hkv;
    L.page_elems = (uint32_t)L.walk.page_size * p.kv.num_kv_heads * D;
    L.hnd = p.kv.layout == ATTN_HND;
    L.row_stride = L.hnd ? D : p.kv.num_kv_heads * D;
    L.head_off = L.hnd ? hkv * (uint32_t)L.walk.page_size * D : hkv * D;
    L.slot_mask = (uint32_t)L.walk.page_size - 1u;
    L.tma = kv_tma_tier(p, maps);
    L.box_rows = (int)maps.box_rows;
    constexpr int CH = D / 64;
    constexpr int ROWS_PER_PASS = C::PRODUCER_THREADS / C::PIECES;
    constexpr int RPT = C::BN / ROWS_PER_PASS; /* rows of one thread per tile */
    const int r_first = tid / C::PIECES;
    /* The page ids of a tile are read one tile ahead, all at once (a
     * dependent load before the copies is the producer's critical path),
     * while the producer waits for the next free stage: with TMA one per
     * box (this thread's box), else one per row of this thread.  Two copies
     * of the tile loop, one per tier, so the gather's per-row page ids hold
     * registers only where they are used. */
    auto tile_loop = [&](auto tma_tier) {
        constexpr bool TMA = decltype(tma_tier)::value;
        int32_t pg[RPT];
        int32_t box_page = 0;
        int nfull_next = 0;
        int64_t n_next = 0;
        auto fetch = [&](int ti) {
            n_next = p.tiles[ti] >> 1;
            const int64_t t0 = n_next * C::BN;
            if constexpr (TMA) {
                /* boxes wholly inside the request's keys go by TMA */
                const int64_t whole = (L.keys - t0) / L.box_rows;
                const int nb = C::BN / L.box_rows;
                nfull_next = whole < 0 ? 0 : (whole > nb ? nb : (int)whole);
                /* warps 0 and 1 each hold the tile's page ids, lane l the
                 * page of box l: warp 0 issues K's boxes, warp 1 V's */
                const int b = (tid & 31) / CH;
                box_page =
                    (C::PRODUCER_THREADS >= 64 ? tid < 64 : true) && (tid & 31) < nfull_next * CH
                        ? L.walk.pages[kv_block_of(L.walk, t0 + (int64_t)b * L.box_rows)]
                        : 0;
            } else if (L.walk.pages) {
#pragma unroll
                for (int j = 0; j < RPT; j++) {
                    const int64_t t = t0 + r_first + j * ROWS_PER_PASS;
                    pg[j] = t < L.keys ? L.walk.pages[kv_block_of(L.walk, t)] : 0;
                }
            }
        };
        /* One tile: K and V into the next stage, then the next tile's page
         * ids; with Cfg::Q_AFTER_FIRST_TILE the first tile is a copy of its
         * own that loads Q between K and V (Q's operands stay out of the loop) */
        auto step = [&](int ti, auto with_q) {
            constexpr bool WQ = decltype(with_q)::value;
            const int64_t n = n_next; /* fetch(ti + 1) below moves on to the next tile */
            const int s = gi % C::STAGES;
            const uint32_t par = ((gi / C::STAGES) & 1) ^ 1;
            const uint32_t kst = ks + s * C::KV_BYTES, vst = vs + s * C::KV_BYTES;
            mbar_wait(&sm.empty_k[s], par);
            if constexpr (TMA) {
                const bool mc = C::CLUSTER && ti - it.tile_begin < common;
                load_tile_tma<D, KV, LT>(L, kb, &maps.k, kst, &sm.full_k[s], n, box_page,
                                         nfull_next, tid, 0, 0, mc, rank);
                if constexpr (WQ)
                    load_q();
                mbar_wait(&sm.empty_v[s], par);
                load_tile_tma<D, KV, LT>(L, vb, &maps.v, vst, &sm.full_v[s], n, box_page,
                                         nfull_next, tid, maps.v_lg, C::V_ISSUE_WARP, mc, rank);
            } else {
                mbar_wait(&sm.empty_v[s], par);
                load_tile_gather<D, KV, LT>(p, L, kb, vb, kst, vst, &sm.full_k[s], &sm.full_v[s], n,
                                            pg, tid);
                if constexpr (WQ)
                    load_q();
            }
            if (ti + 1 < it.tile_end)
                fetch(ti + 1);
            gi++;
        };
        if (it.tile_begin < it.tile_end) {
            fetch(it.tile_begin);
            int ti = it.tile_begin;
            if constexpr (!Q_FIRST) {
                step(ti, std::true_type{});
                ti++;
            }
            for (; ti < it.tile_end; ti++)
                step(ti, std::false_type{});
        }
    };
    if (L.tma)
        tile_loop(std::true_type{});
    else
        tile_loop(std::false_type{});
    if (!Q_FIRST && it.tile_begin == it.tile_end)
        load_q(); /* a unit without key tiles still hands its consumers a Q */
}

template <int D, typename KV, int LT>
__device__ __forceinline__ void pv_product(float (&oacc)[Cfg<D, LT>::OC][Cfg<D, LT>::ON / 2],
                                           const uint32_t (&pa)[Cfg<D, LT>::BN / 16][4],
                                           uint32_t vst, uint32_t vlg)
{
    using C = Cfg<D, LT>;
    constexpr int BN = C::BN, ON = C::ON, OC = C::OC, CH = D / 64;
    /* V in blocks of 2^vlg rows, [block][chunk][row] (vlg = log2(BN): one
     * block, the tile layout); a 16-key step stays inside a block (P >= 16) */
    const uint32_t lg = C::V_PAGE_BOXES ? vlg : C::LG_BN;
    const uint32_t chunk_bytes = 128u << lg, row_mask = (1u << lg) - 1u;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
        for (int a = 0; a < OC; a++) {
            const uint32_t r0 = kk * 16;
            const uint32_t at =
                vst + ((r0 >> lg) * CH + a * ON / 64) * chunk_bytes + (r0 & row_mask) * 128u;
            const uint64_t db = make_desc(at, chunk_bytes, 1024);
            Mma<KV>::template rs<ON>(oacc[a], pa[kk], db, 1);
        }
}

/* A consumer warp frees a stage slot (lane 0 arrives): on its own CTA's
 * barrier and, under Cfg::CLUSTER, on the other CTA's too, whose producer
 * may multicast into this CTA's slot (a slot of either CTA is refilled once
 * both CTAs' consumers are done with it: the pair walks in lockstep). */
template <int D, int LT> __device__ __forceinline__ void release_slot(uint64_t *bar)
{
    mbar_arrive(bar);
    if constexpr (Cfg<D, LT>::CLUSTER)
        mbar_arrive_cluster(bar, cluster_ctarank() ^ 1u);
}

/* Cfg::CLUSTER: `pad` stages this CTA holds no tile of while the other CTA
 * of the pair loads its own (its unit has more tiles, or this CTA has no
 * unit at this queue position): the producer arrives on each stage's full
 * barriers without a copy, each consumer warp waits and frees the slots,
 * so both CTAs' rings stay at the same stage and phase. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void produce_pad(const Smem<D, KV> &sm, uint32_t &gi, int pad)
{
    using C = Cfg<D, LT>;
    for (int i = 0; i < pad; i++, gi++) {
        const int s = gi % C::STAGES;
        const uint32_t par = ((gi / C::STAGES) & 1) ^ 1;
        mbar_wait(&sm.empty_k[s], par);
        cp_async_arrive_noinc(&sm.full_k[s]);
        mbar_wait(&sm.empty_v[s], par);
        cp_async_arrive_noinc(&sm.full_v[s]);
    }
}

template <int D, typename KV, int LT>
__device__ __forceinline__ void consume_pad(const Smem<D, KV> &sm, int lane, uint32_t &gi, int pad)
{
    using C = Cfg<D, LT>;
    for (int i = 0; i < pad; i++, gi++) {
        const int s = gi % C::STAGES;
        const uint32_t par = (gi / C::STAGES) & 1;
        mbar_wait(&sm.full_k[s], par);
        __syncwarp();
        if (lane == 0)
            release_slot<D, LT>(&sm.empty_k[s]);
        mbar_wait(&sm.full_v[s], par);
        __syncwarp();
        if (lane == 0)
            release_slot<D, LT>(&sm.empty_v[s]);
    }
}

/* The consumers of one unit (warpgroup cw); k counts this CTA's units (Q's
 * phases), gi its stages.  Cfg::CLUSTER: `pad` more stages after the
 * unit's tiles (consume_pad) before the epilogue. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void consumer(const attn_cuda_prefill_params &p, const Smem<D, KV> &sm,
                                         const attn_prefill_item &it, const attn_prefill_req &rq,
                                         uint32_t hkv, int cw, int ctid, uint32_t k, uint32_t &gi,
                                         bool tma, uint32_t un, int ct, uint32_t vlg, int pad = 0)
{
    using C = Cfg<D, LT>;
    using M = Mma<KV>;
    constexpr int BN = C::BN, ON = C::ON, OC = C::OC;
    const int warp = ctid / 32, lane = ctid % 32;
    const uint32_t g = p.num_qo_heads / p.num_kv_heads;
    const float scale2 = p.sm_scale * kLog2e;

    float oacc[OC][ON / 2];
#pragma unroll
    for (int a = 0; a < OC; a++)
#pragma unroll
        for (int i = 0; i < ON / 2; i++)
            oacc[a][i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    /* this thread's two rows (within the WG's 64) and four columns per n8 block */
    const int r_in = warp * 16 + lane / 4;
    const int prow[2] = {it.row0 + cw * 64 + r_in, it.row0 + cw * 64 + r_in + 8};
    const int tok[2] = {prow[0] / (int)g, prow[1] / (int)g};

    const uint32_t qs = smem_addr(sm.q) + cw * 64 * 128;
    const uint32_t ks = smem_addr(sm.k), vs = smem_addr(sm.v);
    mbar_wait(sm.qfull, k & 1);
    fence_proxy_async();

    /* Software pipeline (FA3's intra-warpgroup overlap): iteration i issues
     * S_i = Q K_i^T and O += P_{i-1} V_{i-1} together, runs the softmax of
     * S_i while the P V product is in flight, then rescales O and converts
     * P_i.  At d 256 the two consumer warpgroups take turns issuing
     * (Cfg::PINGPONG); elsewhere each issues as soon as its tiles landed. */
    const int num = it.tile_end - it.tile_begin;
    uint32_t pa[BN / 16][4];
    float sacc[BN / 2];

    /* Whether tile `code` holds rows the producer wrote with cp.async (the
     * generic proxy, so wgmma needs a proxy fence): always for the gather
     * tier, only a request's last tile for the TMA tier. */
    const int32_t tma_tiles = tma ? (rq.T + rq.C) / BN : 0; /* key tiles wholly by TMA */
    auto gathered = [&](int32_t tile_code) { return (tile_code >> 1) >= tma_tiles; };
    int32_t code = 0; /* the tile code (planner/prefill_plan.h) of the tile in hand */
    /* Wait for tile i (and, at d 256, this warpgroup's issue turn), issue S_i. */
    auto issue_s = [&](int i, int32_t tile_code) {
        const uint32_t gt = gi + i;
        const int s = gt % C::STAGES;
        mbar_wait(&sm.full_k[s], (gt / C::STAGES) & 1);
        if (gathered(tile_code))
            fence_proxy_async(); /* the producer's cp.async bytes, seen by wgmma */
        const uint32_t kst = ks + s * C::KV_BYTES;
        turn_sync<D, LT>(kSchedBar + cw);
        wgmma_fence();
        /* Q's descriptors are formed per tile like K's (a few uniform
         * operations per MMA) rather than hoisted out of the loop, where
         * they would pin 2 x D/16 registers the softmax needs */
        uint32_t qa = qs;
        asm volatile("" : "+r"(qa));
        M::template ss_first<BN>(sacc, make_desc(qa, 16, 1024), make_desc(kst, 16, 1024));
#pragma unroll
        for (int k = 1; k < D / 16; k++) {
            const uint64_t da = make_desc(qa + (k / 4) * C::BM * 128 + (k % 4) * 32, 16, 1024);
            const uint64_t db = make_desc(kst + (k / 4) * BN * 128 + (k % 4) * 32, 16, 1024);
            M::template ss<BN>(sacc, da, db, 1);
        }
        wgmma_commit();
    };
    /* Hand the turn to the other warpgroup; without overlap warpgroup 1
     * skips its last hand-off (it has one arrive more than 0 has syncs). */
    auto pass_turn = [&](int i) {
        if (C::OVERLAP || !(cw == 1 && i == num - 1))
            turn_arrive<D, LT>(kSchedBar + (1 - cw));
    };
    /* Mask (PARTIAL only) and online softmax of S_i in place; returns the
     * rescale factors of O. */
    auto softmax = [&](int32_t tile_code, float(&alpha)[2]) {
        if (tile_code & 1)
            mask_partial<BN>(p, it, rq, tok, tile_code >> 1, lane, sacc);
#pragma unroll
        for (int ri = 0; ri < 2; ri++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                mx = fmaxf(mx, sacc[j * 4 + ri * 2]);
                mx = fmaxf(mx, sacc[j * 4 + ri * 2 + 1]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[ri], mx * scale2);
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            alpha[ri] = attn::ptx::exp2_approx(m_run[ri] - m_use);
            m_run[ri] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float pv =
                        attn::ptx::exp2_approx(fmaf(sacc[j * 4 + ri * 2 + e], scale2, -m_use));
                    sacc[j * 4 + ri * 2 + e] = pv;
                    sum += pv;
                }
            l_run[ri] = l_run[ri] * alpha[ri] + sum;
        }
    };
    /* O *= alpha, then P_i into the A fragment of m64k16: k-step kk covers
     * keys 16kk .. 16kk+15 (rows r, r+8 x keys 2q, 2q+1 and 2q+8, 2q+9). */
    auto rescale_convert = [&](const float(&alpha)[2]) {
#pragma unroll
        for (int a = 0; a < OC; a++)
#pragma unroll
            for (int j = 0; j < ON / 8; j++)
#pragma unroll
                for (int ri = 0; ri < 2; ri++) {
                    oacc[a][j * 4 + ri * 2] *= alpha[ri];
                    oacc[a][j * 4 + ri * 2 + 1] *= alpha[ri];
                }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            pa[kk][0] = M::pack(sacc[kk * 8 + 0], sacc[kk * 8 + 1]);
            pa[kk][1] = M::pack(sacc[kk * 8 + 2], sacc[kk * 8 + 3]);
            pa[kk][2] = M::pack(sacc[kk * 8 + 4], sacc[kk * 8 + 5]);
            pa[kk][3] = M::pack(sacc[kk * 8 + 6], sacc[kk * 8 + 7]);
        }
    };
    /* S_i is done (the caller waited for it): free tile i's K slot. */
    auto release_k = [&](int i) {
        __syncwarp();
        if (lane == 0)
            release_slot<D, LT>(&sm.empty_k[(gi + i) % C::STAGES]);
    };
    /* Every S product of the unit is done (the caller waited for the
     * last): the producer may load the next unit's Q.  With the overlap
     * (d <= 128) released as soon as the last S is, not after its softmax
     * and the P V before it, so the next Q lands while this unit's last
     * products and epilogue run (H200, 2026-12-02, with the prefetch
     * beside S_0: causal S 4096 0.330 -> 0.316-0.319 ms, S 8192 -3 %,
     * d 64 S 8192 -3 %, FlashMask -5 %); d 256 (turns, no overlap) hands it
     * back after the loop as before: measured there within the run's
     * drift, 2.25 -> 2.29 ms, so not taken. */
    auto release_q = [&]() {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(sm.qempty);
    };
    /* Wait for every product in flight, then free tile i's V slot. */
    auto finish_pv = [&](int i) {
        wgmma_wait<0>();
#pragma unroll
        for (int a = 0; a < OC; a++)
            reg_fence(oacc[a]);
        __syncwarp();
        if (lane == 0)
            release_slot<D, LT>(&sm.empty_v[(gi + i) % C::STAGES]);
    };
    /* Wait for V_i (it lands after K_i, usually long before its product). */
    auto wait_v = [&](int i, int32_t tile_code) {
        const uint32_t gt = gi + i;
        mbar_wait(&sm.full_v[gt % C::STAGES], (gt / C::STAGES) & 1);
        if (gathered(tile_code))
            fence_proxy_async();
    };
    auto issue_pv = [&](int i) {
        pv_product<D, KV, LT>(oacc, pa, vs + ((gi + i) % C::STAGES) * C::KV_BYTES, vlg);
        wgmma_commit();
    };

    /* Software pipeline (FA3's intra-warpgroup overlap): iteration i issues
     * S_i = Q K_i^T and O += P_{i-1} V_{i-1} together, runs the softmax of
     * S_i while the P V product is in flight, then rescales O and converts
     * P_i (at d 256 the warpgroups take turns, Cfg::PINGPONG).  The
     * loop is peeled so no MMA sits behind a data-dependent branch (ptxas
     * serializes every wgmma of a kernel that has one). */
    if (num > 0) {
        float alpha[2];
        if (cw == 1)
            turn_arrive<D, LT>(kSchedBar); /* warpgroup 0 issues first */
        /* tile codes are read before the products they follow, so the load
         * is in flight while the tensor cores run (not after their wait) */
        code = p.tiles[it.tile_begin];
        issue_s(0, code);
        pass_turn(0);
        /* the next unit's Q into L2 (Cfg::QPREFETCH) while S_0 runs: its
         * two dependent metadata loads then wait beside the product, not
         * before this unit's first wait (with release_q early they had
         * become the unit's critical path) */
        if (C::QPREFETCH && un != kNoUnit)
            prefetch_q<D, LT>(p, p.items[un / p.num_kv_heads], un % p.num_kv_heads, ct);
        wgmma_wait<0>();
        reg_fence(sacc);
        release_k(0);
        if (C::OVERLAP && num == 1)
            release_q();
        softmax(code, alpha);
        rescale_convert(alpha);
        if constexpr (!C::OVERLAP) {
            wait_v(0, code);
            /* O is 0 * alpha here, two values the compiler knows: pin each
             * accumulator in its own register before the fence, or ptxas
             * copies them in after it and injects a warpgroup.arrive
             * (C7519) in front of the first P V product */
#pragma unroll
            for (int a = 0; a < OC; a++)
                reg_fence(oacc[a]);
            wgmma_fence();
            issue_pv(0);
            finish_pv(0);
        }
        for (int i = 1; i < num; i++) {
            const int32_t prev = code;
            code = p.tiles[it.tile_begin + i];
            if constexpr (C::OVERLAP)
                wait_v(i - 1, prev);
            issue_s(i, code);
            if constexpr (C::OVERLAP)
                issue_pv(i - 1);
            pass_turn(i);
            if constexpr (C::OVERLAP)
                wgmma_wait<1>();
            else
                wgmma_wait<0>();
            reg_fence(sacc);
            release_k(i);
            if (C::OVERLAP && i == num - 1)
                release_q();
            softmax(code, alpha);
            if constexpr (C::OVERLAP)
                finish_pv(i - 1);
            rescale_convert(alpha);
            if constexpr (!C::OVERLAP) {
                wait_v(i, code);
                wgmma_fence();
                issue_pv(i);
                finish_pv(i);
            }
        }
    }
    if (!C::OVERLAP || num == 0) /* d 256, or a unit without key tiles */
        release_q();
    if (C::OVERLAP && num > 0) {
        wait_v(num - 1, code);
        turn_sync<D, LT>(kSchedBar + cw);
        wgmma_fence();
        issue_pv(num - 1);
        if (cw == 0) /* warpgroup 1 syncs once more; warpgroup 0 does not */
            turn_arrive<D, LT>(kSchedBar + 1);
        finish_pv(num - 1);
    }
    gi += num;
    if constexpr (C::CLUSTER)
        consume_pad<D, KV, LT>(sm, lane, gi, pad);

        /* epilogue */
#pragma unroll
    for (int ri = 0; ri < 2; ri++) {
        float l = l_run[ri];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        /* No visible cell leaves l == 0 exactly; a visible NaN score leaves m
         * at -inf (fmaxf drops NaN) but l NaN, so l is this thread's test.
         * What leaves the kernel keeps state.h's rule: m / LSE is -inf
         * exactly for an empty row. */
        const bool empty = l == 0.f;
        const float inv = empty ? 0.f : 1.f / l;
        const float m_use = m_run[ri] == -INFINITY ? 0.f : m_run[ri];
        const float lse = empty ? -INFINITY : (m_use + log2f(l)) * kLn2;
        if (tok[ri] >= rq.C)
            continue;
        const uint32_t hq = hkv * g + (uint32_t)(prow[ri] % (int)g);
        if (it.part < 0) {
            const size_t row = (size_t)(rq.qrow + tok[ri]) * p.num_qo_heads + hq;
#pragma unroll
            for (int a = 0; a < OC; a++)
#pragma unroll
                for (int j = 0; j < ON / 8; j++) {
                    const int col = a * ON + j * 8 + (lane % 4) * 2;
                    store2(p.o, p.q_dtype, row * D + col, oacc[a][j * 4 + ri * 2] * inv,
                           oacc[a][j * 4 + ri * 2 + 1] * inv);
                }
            if (p.lse && lane % 4 == 0)
                p.lse[row] = lse;
        } else {
            const size_t srow =
                ((size_t)it.part * p.num_kv_heads + hkv) * C::BM + cw * 64 + r_in + ri * 8;
            const bool mlu = p.abi == ATTN_ABI_MLU;
            const float sc = mlu ? 1.f : inv;
#pragma unroll
            for (int a = 0; a < OC; a++)
#pragma unroll
                for (int j = 0; j < ON / 8; j++) {
                    const int col = a * ON + j * 8 + (lane % 4) * 2;
                    *reinterpret_cast<float2 *>(p.part_vec + srow * D + col) =
                        make_float2(oacc[a][j * 4 + ri * 2] * sc, oacc[a][j * 4 + ri * 2 + 1] * sc);
                }
            if (lane % 4 == 0) {
                if (mlu) {
                    p.part_m[srow] = empty ? -INFINITY : m_use * kLn2;
                    p.part_l[srow] = l;
                } else {
                    p.part_m[srow] = lse;
                }
            }
        }
    }
}

/* Which units (item * H_kv + K/V head) this CTA runs, in order: with the
 * plan's per-CTA queues (p.worker_indptr set, planner/prefill_plan.h: the
 * least-loaded schedule), the k-th entry of queue blockIdx.x; without, the
 * snake over the units sorted longest first (unit blockIdx.x, then one per
 * grid stride, every other round from the far end; with one CTA per unit
 * just u = blockIdx.x).  The one home of the walk: producer, consumers and
 * the consumers' Q prefetch all ask unit_at (the queue bounds re-read per
 * unit, two cached loads, rather than held in registers). */

/* The k-th entry of CTA w's queue (ATTN_PREFILL_ORDER_SHARED and the unit),
 * or kNoUnit past its last (w < the queues: the grid is one CTA a queue). */
__device__ __forceinline__ uint32_t queue_entry(const attn_cuda_prefill_params &p, uint32_t w,
                                                uint32_t k)
{
    const uint32_t q = __ldg(&p.worker_indptr[w]) + k;
    return q < __ldg(&p.worker_indptr[w + 1]) ? __ldg(&p.order[q]) : kNoUnit;
}

/* The k-th unit of this CTA, or kNoUnit past its last. */
__device__ __forceinline__ uint32_t unit_at(const attn_cuda_prefill_params &p, uint32_t k)
{
    if (p.worker_indptr) {
        const uint32_t e = queue_entry(p, blockIdx.x, k);
        return e == kNoUnit ? kNoUnit : e & ATTN_PREFILL_ORDER_UNIT;
    }
    const uint32_t G = gridDim.x;
    const uint32_t u = k * G + ((k & 1) ? G - 1 - blockIdx.x : blockIdx.x);
    return u < p.num_items * p.num_kv_heads ? u : kNoUnit;
}

/* The shared memory of configuration LT from a 1024-aligned `base`: Q,
 * the K and V stages, then the ring's and Q's barriers (Cfg::SMEM - 1024
 * bytes; the attend kernel and the fused mixed kernel's prefill roles). */
template <int D, typename KV, int LT> __device__ __forceinline__ Smem<D, KV> smem_at(uint8_t *base)
{
    using C = Cfg<D, LT>;
    Smem<D, KV> sm;
    sm.q = base;
    sm.k = sm.q + C::Q_BYTES;
    sm.v = sm.k + C::STAGES * C::KV_BYTES;
    sm.full_k = reinterpret_cast<uint64_t *>(sm.v + C::STAGES * C::KV_BYTES);
    sm.full_v = sm.full_k + C::STAGES;
    sm.empty_k = sm.full_v + C::STAGES;
    sm.empty_v = sm.empty_k + C::STAGES;
    sm.qfull = sm.empty_v + C::STAGES;
    sm.qempty = sm.qfull + 1;
    return sm;
}

/* One thread: the barriers of the ring and of Q (a fill completes on the
 * producer's threads, a release on one arrival per consumer warp); the
 * caller fences them for the async proxy. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void init_barriers(const Smem<D, KV> &sm)
{
    using C = Cfg<D, LT>;
    /* Cfg::CLUSTER: a slot is free once both CTAs' consumers freed it */
    constexpr uint32_t releases = C::CONSUMER_WARPS * (C::CLUSTER ? 2 : 1);
    for (int s = 0; s < C::STAGES; s++) {
        mbar_init(&sm.full_k[s], C::PRODUCER_THREADS);
        mbar_init(&sm.full_v[s], C::PRODUCER_THREADS);
        mbar_init(&sm.empty_k[s], releases);
        mbar_init(&sm.empty_v[s], releases);
    }
    mbar_init(sm.qfull, C::PRODUCER_THREADS);
    mbar_init(sm.qempty, C::CONSUMER_WARPS);
}

/* One queue position of a CTA pair (Cfg::CLUSTER): this CTA's entry and
 * the other CTA's, their tile counts, how many leading tiles both read
 * (sibling units: the planner flags both entries) and the pad stages this
 * CTA runs after its own unit (the other's unit is longer by that many). */
struct PairJob {
    uint32_t own, other; /* queue entries, kNoUnit where a queue has ended */
    int n_own, n_other, common, pad;
};

__device__ __forceinline__ int entry_tiles(const attn_cuda_prefill_params &p, uint32_t e)
{
    if (e == kNoUnit)
        return 0;
    const attn_prefill_item &it = p.items[(e & ATTN_PREFILL_ORDER_UNIT) / p.num_kv_heads];
    return it.tile_end - it.tile_begin;
}

__device__ __forceinline__ PairJob pair_job(const attn_cuda_prefill_params &p, uint32_t k)
{
    PairJob j;
    j.own = queue_entry(p, blockIdx.x, k);
    j.other = queue_entry(p, blockIdx.x ^ 1u, k);
    j.n_own = entry_tiles(p, j.own);
    j.n_other = entry_tiles(p, j.other);
    const bool shared = p.cluster == ATTN_PREFILL_CLUSTER_MULTICAST && j.own != kNoUnit &&
                        j.other != kNoUnit && (j.own & j.other & ATTN_PREFILL_ORDER_SHARED) != 0;
    j.common = shared ? (j.n_own < j.n_other ? j.n_own : j.n_other) : 0;
    j.pad = j.n_other > j.n_own ? j.n_other - j.n_own : 0;
    return j;
}

/* The producer's walk of this CTA's units (unit_at); `ptid` its thread
 * (0 .. PRODUCER_THREADS - 1).  Its stage ring (gi) and Q barrier phases
 * (k) run on across units, so the next unit's loads overlap this unit's
 * last products. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void produce_units(const attn_cuda_prefill_params &p, const KvMaps &maps,
                                              const Smem<D, KV> &sm, int ptid)
{
    uint32_t gi = 0;
    if constexpr (Cfg<D, LT>::CLUSTER) {
        /* the CTA pair walks its two queues in lockstep: at each position
         * both rings move by the longer unit's tiles (produce_pad) */
        const uint32_t rank = cluster_ctarank();
        for (uint32_t k = 0, q = 0;; k++) {
            const PairJob j = pair_job(p, k);
            if (j.own == kNoUnit && j.other == kNoUnit)
                break;
            if (j.own != kNoUnit) {
                const uint32_t u = j.own & ATTN_PREFILL_ORDER_UNIT;
                const attn_prefill_item it = p.items[u / p.num_kv_heads];
                producer<D, KV, LT>(p, maps, sm, it, p.reqs[it.req], u % p.num_kv_heads, ptid, q++,
                                    gi, j.common, rank);
            }
            produce_pad<D, KV, LT>(sm, gi, j.pad);
        }
    } else {
        for (uint32_t k = 0;; k++) {
            const uint32_t u = unit_at(p, k);
            if (u == kNoUnit)
                break;
            const attn_prefill_item it = p.items[u / p.num_kv_heads];
            producer<D, KV, LT>(p, maps, sm, it, p.reqs[it.req], u % p.num_kv_heads, ptid, k, gi);
        }
    }
    cp_async_wait<0>(); /* leave no copy in flight behind an exiting thread */
}

/* The consumers' walk of the same units: consumer warpgroup `cw`, its
 * thread `ctid` (0 .. 127), thread `ct` of all the consumers (0 .. 128 x
 * CONSUMER_WGS - 1, for the Q prefetch); each computed by the caller as
 * the attend kernel always did (other forms cost spills, see there).  The
 * next unit is looked up once, for the consumer's Q prefetch, and carried
 * into the next round. */
template <int D, typename KV, int LT>
__device__ __forceinline__ void consume_units(const attn_cuda_prefill_params &p, const KvMaps &maps,
                                              const Smem<D, KV> &sm, int cw, int ctid, int ct)
{
    using C = Cfg<D, LT>;
    /* the producer's tier (its KvLoad::tma): TMA-only tiles need no fence */
    const bool tma = kv_tma_tier(p, maps);
    /* V's stage layout: page blocks where its boxes are whole pages */
    const uint32_t vlg = C::V_PAGE_BOXES && tma && maps.v_lg ? maps.v_lg : C::LG_BN;
    uint32_t gi = 0;
    if constexpr (C::CLUSTER) {
        const int lane = ctid % 32;
        for (uint32_t k = 0, q = 0;; k++) {
            const PairJob j = pair_job(p, k);
            if (j.own == kNoUnit && j.other == kNoUnit)
                break;
            if (j.own == kNoUnit) {
                consume_pad<D, KV, LT>(sm, lane, gi, j.pad);
                continue;
            }
            const uint32_t u = j.own & ATTN_PREFILL_ORDER_UNIT;
            const attn_prefill_item it = p.items[u / p.num_kv_heads];
            consumer<D, KV, LT>(p, sm, it, p.reqs[it.req], u % p.num_kv_heads, cw, ctid, q++, gi,
                                tma, unit_at(p, k + 1), ct, vlg, j.pad);
        }
        return;
    }
    uint32_t u = unit_at(p, 0);
    for (uint32_t k = 0; u != kNoUnit; k++) {
        const attn_prefill_item it = p.items[u / p.num_kv_heads];
        const uint32_t un = unit_at(p, k + 1); /* the unit this CTA takes next (Q prefetch) */
        consumer<D, KV, LT>(p, sm, it, p.reqs[it.req], u % p.num_kv_heads, cw, ctid, k, gi, tma, un,
                            ct, vlg);
        u = un;
    }
}

/* The attend kernels' body, configuration LT (Cfg: full, light or the
 * full kernel in clusters). */
template <int D, typename KV, int LT>
__device__ __forceinline__ void attend_body(const attn_cuda_prefill_params &p, const KvMaps &maps)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = Cfg<D, LT>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *base = attn::ptx::align_1024(smem_raw);
    const Smem<D, KV> sm = smem_at<D, KV, LT>(base);

    const int tid = threadIdx.x;
    if (p.trigger_dependents) /* partition's one-stream fork: the decode kernels may be placed */
        attn::ptx::griddep_launch_dependents();
    if (p.probe && tid == 0) { /* the co-residency probe: where and when this CTA ran */
        p.probe[3 * blockIdx.x] = attn::ptx::smid();
        p.probe[3 * blockIdx.x + 1] = attn::ptx::globaltimer();
    }
    if (tid == 0) {
        init_barriers<D, KV, LT>(sm);
        attn::mbar::fence_init(); /* the TMA unit (async proxy) sees them */
    }
    if (maps.on && tid == 0) {
        prefetch_tensormap(&maps.k);
        prefetch_tensormap(&maps.v);
    }
    if constexpr (C::CLUSTER)
        cluster_sync_all(); /* the other CTA's barriers exist before any remote arrival */
    else
        __syncthreads();
    /* Work units u = item * H_kv + head (unit_at): each CTA runs its
     * queue of the plan, or the snake; producer and consumers walk the
     * same units (produce_units, consume_units).
     * wgmma runs on whole warpgroups (warps 4k .. 4k + 3): the light
     * kernel's consumer warpgroup is warps 0-3, its producer warp 4.  The
     * roles are tested and the consumers' warpgroup computed as the full
     * kernel always did (tid < 128, tid / 128 - 1): written as
     * (tid - C0) / 128 ptxas spilled 224 bytes in the full kernel */
    constexpr int P0 = C::PRODUCER_LAST ? 128 * C::CONSUMER_WGS : 0; /* first producer thread */
    constexpr int C0 = C::PRODUCER_LAST ? 0 : C::PRODUCER_THREADS;   /* first consumer thread */
    if (C::PRODUCER_LAST ? tid >= P0 : tid < C::PRODUCER_THREADS) {
        if constexpr (C::SETMAXNREG)
            reg_dealloc<C::PRODUCER_REGS>();
        produce_units<D, KV, LT>(p, maps, sm, tid - P0);
    } else {
        if constexpr (C::SETMAXNREG)
            reg_alloc<C::CONSUMER_REGS>();
        consume_units<D, KV, LT>(p, maps, sm, C::PRODUCER_LAST ? tid / 128 : tid / 128 - 1,
                                 tid % 128, tid - C0);
        if (p.probe && tid == C0) /* the first consumer's last epilogue is done */
            p.probe[3 * blockIdx.x + 2] = attn::ptx::globaltimer();
    }
    if constexpr (C::CLUSTER)
        cluster_sync_all(); /* no CTA exits while the other may still arrive on its barriers */
#else
    /* wgmma and setmaxnreg exist on sm_90a only: the portable compute_90
     * PTX of the build carries no body (the launcher runs sm_90a only) */
    __trap();
#endif
}

template <int D, typename KV, bool LT>
__global__ void __launch_bounds__(Cfg<D, LT>::BOUND_THREADS, Cfg<D, LT>::MIN_CTAS)
    attn_prefill_attend(const __grid_constant__ attn_cuda_prefill_params p,
                        const __grid_constant__ KvMaps maps)
{
    attend_body<D, KV, LT>(p, maps);
}

/* The full kernel launched in 2-CTA clusters (attn_cuda_prefill_clustered):
 * CTAs 2j and 2j + 1 walk their queues in lockstep and multicast the K/V
 * tiles of the sibling units the pair walk put side by side. */
template <int D, typename KV>
__global__ void __launch_bounds__(Cfg<D, kFullCluster>::BOUND_THREADS, 1)
    attn_prefill_attend_cluster(const __grid_constant__ attn_cuda_prefill_params p,
                                const __grid_constant__ KvMaps maps)
{
    attend_body<D, KV, kFullCluster>(p, maps);
}

/* The combine kernel's CTAs per (merge, K/V head): each folds BM /
 * kCombineSlices of the m tile's rows, 4 warps one row at a time.  One CTA
 * per (merge, head), each warp walking 32 rows one dependent fold after
 * another, took 46.7 us for a small mixed step's prefill parts (H200,
 * 2026-12-02, ncu: S1 of bench_mixed.py, where the attend kernel took
 * 34.6; bench/results/mixed-h200-2026-12-02-r25-small/). */
constexpr int kCombineSlices = 8;

/* Fold the parts of one split m tile (blockIdx.x = merge, blockIdx.y = K/V
 * head, blockIdx.z = slice of its rows): one warp per packed row, lane x
 * owns lanes x, x + 32, ... of d. */
template <int D, bool LT>
__global__ void __launch_bounds__(128)
    attn_prefill_combine(const __grid_constant__ attn_cuda_prefill_params p)
{
    constexpr int BM = Cfg<D, LT>::BM, PER = D / 32, ROWS = BM / kCombineSlices;
    static_assert(BM % kCombineSlices == 0, "a slice holds whole rows");
    const attn_prefill_merge mg = p.merges[blockIdx.x];
    const attn_prefill_req rq = p.reqs[mg.req];
    const uint32_t hkv = blockIdx.y, g = p.num_qo_heads / p.num_kv_heads;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r0 = (int)blockIdx.z * ROWS;
    for (int r = r0 + warp; r < r0 + ROWS; r += 4) {
        const int pr = mg.row0 + r, tok = pr / (int)g;
        if (tok >= rq.C)
            break;
        /* state.h's pivot fold in batches of kBatch parts, in ascending
         * key order: one rescale per batch and independent weights, as the
         * decode reducer folds its slots (kernels/cuda/decode/device.cuh) */
        constexpr int kBatch = 8;
        const bool mlu = p.abi == ATTN_ABI_MLU;
        float acc[PER], o[PER];
        float pivot = -INFINITY, l = 0.f, lse_out;
        for (int i = 0; i < PER; i++)
            acc[i] = 0.f;
        for (int k0 = 0; k0 < mg.num_parts; k0 += kBatch) {
            float bm[kBatch], bl[kBatch], part[kBatch][PER];
#pragma unroll
            for (int j = 0; j < kBatch; j++) {
                bm[j] = -INFINITY; /* past the last part: an empty state */
                bl[j] = 1.f;       /* an (LSE, O) part is the MLU state (LSE, 1, O) */
                if (k0 + j < mg.num_parts) {
                    const size_t srow =
                        ((size_t)(mg.part_begin + k0 + j) * p.num_kv_heads + hkv) * BM + r;
                    bm[j] = p.part_m[srow];
                    if (mlu)
                        bl[j] = p.part_l[srow];
                    for (int i = 0; i < PER; i++)
                        part[j][i] = p.part_vec[srow * D + lane + 32 * i];
                }
            }
            attn_pivot_batch_f32(&pivot, &l, acc, PER, kBatch, bm, bl, &part[0][0]);
        }
        const attn_mlu_f32 st = attn_pivot_state_f32(pivot, l);
        attn_mlu_finalize_f32(&st, acc, PER, o, &lse_out);
        const uint32_t hq = hkv * g + (uint32_t)(pr % (int)g);
        const size_t row = (size_t)(rq.qrow + tok) * p.num_qo_heads + hq;
        for (int i = 0; i < PER; i++)
            attn_store_f32(p.o, p.q_dtype, row * D + lane + 32 * i, o[i]);
        if (p.lse && lane == 0)
            p.lse[row] = lse_out;
    }
}

} // namespace attn_prefill

#endif
