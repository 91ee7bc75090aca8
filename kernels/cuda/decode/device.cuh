/* The decode engine's device code shared by its kernels (decode.cu) and
 * the fused mixed-batch kernel (mixed.cu): the work of a producer CTA,
 * the fold of split slots (merge_fold), and the tensor-core compute warps
 * with their pipelines (namespace tc).  decode.cu's header comment says
 * how the producers work; docs/cuda.md lists them.
 */
#ifndef ATTN_CUDA_DECODE_DEVICE_CUH
#define ATTN_CUDA_DECODE_DEVICE_CUH

#include <cuda.h> /* CUtensorMap (the encoder comes through the runtime) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "kernels/cuda/barrier.cuh"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/paged.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/state_io.cuh"

namespace attn
{

/* The attn_dtype of a 16-bit CUDA element type (the kernel table's key). */
template <typename T> struct dtype_of;
template <> struct dtype_of<__nv_bfloat16> {
    static constexpr attn_dtype value = ATTN_BF16;
};
template <> struct dtype_of<__half> {
    static constexpr attn_dtype value = ATTN_FP16;
};

namespace decode
{

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kMergeHeads = 4;  /* query heads per reducer CTA */
constexpr int kMergeBatch = 16; /* slots fetched per batch by merge_fold */
constexpr int kMergeLanes = 4;  /* lanes of one head per merge_fold thread */

/* The state.h view of a decode launch's outputs (state_io.cuh). */
__device__ __forceinline__ state_io::sink sink_of(const attn_cuda_decode_params &p)
{
    state_io::sink s;
    s.o = p.o;
    s.lse = p.lse;
    s.o_dtype = p.q_dtype;
    s.num_qo_heads = p.num_qo_heads;
    s.part_vec = p.part_vec;
    s.part_m = p.part_m;
    s.part_l = p.part_l;
    s.abi = p.abi;
    return s;
}

/* What every producer CTA knows about its work before it reads K/V. */
struct cta_work {
    attn_work_item it;
    attn_cuda_req rq;
    int hkv;   /* K/V head */
    int g;     /* group size H_q / H_kv */
    bool live; /* false past the live item count (graph mode, seed 0x03G) */
};

/* heads_fast: the H_kv CTAs of one item are neighbours in launch order, so
 * they stream the same pages (NHD rows are H_kv x d contiguous). */
__device__ __forceinline__ void pdl_start(const attn_cuda_decode_params &p)
{
    /* programmatic dependent launch (attn_cuda_decode_params.pdl): with
     * ATTN_CUDA_PDL_EARLY the next kernel may be placed as soon as every CTA
     * of this grid runs (else after the main loops: pdl_main_loop_done).
     * Before the wait a CTA reads only the plan's metadata (cta_work_of);
     * Q, K/V, the slots, the counters and the outputs wait for the previous
     * kernel of the stream */
    if (p.pdl == ATTN_CUDA_PDL_EARLY)
        ptx::griddep_launch_dependents();
    if (p.pdl != ATTN_CUDA_PDL_OFF && p.pdl != ATTN_CUDA_PDL_NO_WAIT)
        ptx::griddep_wait();
}

/* ATTN_CUDA_PDL_NO_WAIT's join: declared first in every producer, so at any
 * return of thread 0 of CTA 0 it waits for the kernel this grid was launched
 * beside (one thread of one CTA: the others' slots are not held). */
struct pdl_join {
    const attn_cuda_decode_params &p;
    __device__ __forceinline__ ~pdl_join()
    {
        if (p.pdl == ATTN_CUDA_PDL_NO_WAIT && (blockIdx.x | blockIdx.y | blockIdx.z) == 0 &&
            (threadIdx.x | threadIdx.y | threadIdx.z) == 0)
            ptx::griddep_wait();
    }
};

/* The work of (item, K/V head); not live past the live item count. */
__device__ __forceinline__ cta_work work_at(const attn_cuda_decode_params &p, int item, int hkv)
{
    cta_work w;
    w.hkv = hkv;
    w.live = item < p.counts->num_items;
    if (!w.live)
        return w;
    w.it = p.items[item];
    w.rq = p.reqs[w.it.req];
    w.g = p.num_qo_heads / p.num_kv_heads;
    return w;
}

/* The CTA's work, read before the programmatic-launch wait: counts, items
 * and requests are the plan's metadata, uploaded by a synchronous copy
 * before any launch that reads them and written by no kernel, so their
 * three dependent loads need not wait for the previous kernel of the stream
 * (with the late trigger this CTA may be placed while that kernel's last
 * CTAs fold).  A CTA past the live items leaves without touching anything. */
__device__ __forceinline__ cta_work cta_work_of(const attn_cuda_decode_params &p)
{
    const cta_work w = p.heads_fast ? work_at(p, (int)blockIdx.y, (int)blockIdx.x)
                                    : work_at(p, (int)blockIdx.x, (int)blockIdx.y);
    pdl_start(p);
    return w;
}

/* The benchmarks' phase probe (attn_cuda_decode_params.probe_phases):
 * thread 0 of CTA i < probe_ctas stamps phase k (0: last tile read, 1:
 * fold started). */
__device__ __forceinline__ void probe_phase(const attn_cuda_decode_params &p, int k)
{
    if (p.probe_phases == nullptr || threadIdx.x != 0)
        return;
    const uint32_t i = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * (uint32_t)blockIdx.z);
    if (i < p.probe_ctas)
        p.probe_phases[2 * i + k] = ptx::globaltimer();
}

/* ATTN_CUDA_PDL_LATE: this CTA has read its last K/V tile; once every CTA
 * of the grid has, the next kernel may be placed on the slots they free (an
 * earlier trigger places it in the free slots of an under-filled grid). */
__device__ __forceinline__ void pdl_main_loop_done(const attn_cuda_decode_params &p)
{
    if (p.pdl == ATTN_CUDA_PDL_LATE || p.pdl == ATTN_CUDA_PDL_NO_WAIT)
        ptx::griddep_launch_dependents();
}

__device__ __forceinline__ paged::key_walk walk_of(const cta_work &w)
{
    return paged::key_walk::of(w.it.kv_begin, w.it.kv_end, w.rq.lo0, w.rq.hi0, w.rq.lo1, w.rq.hi1);
}

__device__ __forceinline__ paged::page_table table_of(const attn_cuda_decode_params &p,
                                                      const cta_work &w)
{
    paged::page_table t;
    t.pages = p.page_indices + w.rq.page_begin;
    t.page_shift = p.page_shift;
    t.page_stride = p.page_stride;
    t.row_stride = p.row_stride;
    return t;
}

/* The end of a fold (merge_fold, tc::fold_staged): the folded sums as a
 * state, finalized into this thread's 4 lanes of O (and the head's LSE). */
template <int D>
__device__ __forceinline__ void fold_finish(const attn_cuda_decode_params &p,
                                            const attn_cuda_req &rq, int hq, int lane0, float pivot,
                                            float l, float (&acc)[kMergeLanes])
{
    const attn_mlu_f32 st = attn_pivot_state_f32(pivot, l);
    float lse; /* an all-empty row: O = 0, LSE = -inf */
    attn_mlu_finalize_f32(&st, acc, kMergeLanes, acc, &lse);
    const size_t ooff = ((size_t)rq.qrow * p.num_qo_heads + hq) * D + lane0;
#pragma unroll
    for (int i = 0; i < kMergeLanes; i++)
        attn_store_f32(p.o, p.q_dtype, ooff + i, acc[i]);
    if (p.lse && lane0 == 0)
        p.lse[(size_t)rq.qrow * p.num_qo_heads + hq] = lse;
}

/* attn_pivot_add_f32 without its branch: the same FMAs for a state that is
 * not empty, and an empty one leaves the sums as they were (its vector is
 * read but not used), so the folds' unrolled slots need no branch each and
 * one slot's loads and exponential no longer wait behind the last one's
 * test.  merge_fold and fold_staged both add with it, so the fused fold and
 * the reducer kernel still agree bit for bit (and with state.h's sums).
 * Measured (H200, 2026-12-02, docs/cuda.md round 12): d64_B1_T32768 18.65
 * -> 17.95 us, d64_B2_T2048 8.49 -> 8.23, the reducer kernel's launches
 * 2-6 % faster, no shape slower beyond 0.6 %. */
__device__ __forceinline__ void pivot_add_sel(float pivot, float *l, float (&acc)[kMergeLanes],
                                              float m_i, float l_i, const float *u)
{
    const bool e = attn_state_empty_f32(m_i);
    const float w = expf(m_i - pivot);
    const float nl = w * l_i + *l;
    *l = e ? *l : nl;
#pragma unroll
    for (int i = 0; i < kMergeLanes; i++) {
        const float nu = w * u[i] + acc[i];
        acc[i] = e ? acc[i] : nu;
    }
}

/* The fold of one request's slots for query head hq, lanes [lane0, lane0+4):
 * exactly the slots [slot_begin, slot_begin + num_slots), in slot order,
 * against one pivot (state.h's n-way merge, seed 0x02B/C, 0x03I).  Slots are
 * fetched kMergeBatch at a time (independent loads in flight); a batch
 * raises the pivot once (one rescale) and adds each slot with its own
 * weight, so the dependent chain per slot is a few FMAs, not the binary
 * merge's exponentials and logarithm (about 200 cycles a slot, round 5 of
 * issue 13: the fold of 33 slots is the tail of a B = 1 launch).  The order
 * of the sums is fixed, so the result is the same bits whichever CTA folds.
 * Loads go through L2 (__ldcg): in the fused path the slots were written by
 * other CTAs of the same launch.  Used by the reducer kernel and by the last
 * producer CTA of a (request, K/V head, head chunk). */
template <int D>
__device__ __forceinline__ void merge_fold(const attn_cuda_decode_params &p,
                                           const attn_cuda_req &rq, int hq, int lane0)
{
    constexpr int LANES = kMergeLanes;
    const bool mlu = p.abi == ATTN_ABI_MLU;
    float acc[LANES] = {0.f, 0.f, 0.f, 0.f};
    float l = 0.f, pivot = -INFINITY;
    const int end = rq.slot_begin + rq.num_slots;
    for (int s0 = rq.slot_begin; s0 < end; s0 += kMergeBatch) {
        float bm[kMergeBatch], bl[kMergeBatch], bu[kMergeBatch][LANES];
#pragma unroll
        for (int j = 0; j < kMergeBatch; j++) {
            bm[j] = -INFINITY; /* past the last slot: an empty state */
            bl[j] = 1.f;       /* an (LSE, O) state is the MLU state (LSE, 1, O) */
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (s0 + j < end) {
                const size_t idx = (size_t)(s0 + j) * p.num_qo_heads + hq;
                bm[j] = __ldcg(p.part_m + idx);
                if (mlu)
                    bl[j] = __ldcg(p.part_l + idx);
                v = __ldcg(reinterpret_cast<const float4 *>(p.part_vec + idx * D + lane0));
            }
            bu[j][0] = v.x;
            bu[j][1] = v.y;
            bu[j][2] = v.z;
            bu[j][3] = v.w;
        }
        float next = pivot;
#pragma unroll
        for (int j = 0; j < kMergeBatch; j++)
            next = attn_pivot_max_f32(next, bm[j]);
        attn_pivot_raise_f32(&pivot, &l, acc, LANES, next);
#pragma unroll
        for (int j = 0; j < kMergeBatch; j++)
            pivot_add_sel(pivot, &l, acc, bm[j], bl[j], bu[j]);
    }
    fold_finish<D>(p, rq, hq, lane0, pivot, l, acc);
}

/* ==== tensor-core producer =================================================
 * The same contract, with the group's query heads as the M = 16 rows of
 * mma.m16n8k16 (seed 0x03A: GQA packing makes decode a skinny matrix
 * product).  Four warps each own 16 keys of a 64-key tile: S = Q K^T and
 * O += P V run on the tensor cores with fp32 accumulation; the online
 * softmax runs on the S fragments in fp32.  A q whose dtype is not the
 * cache dtype is split into hi + lo halves of the cache dtype (two
 * products, QLO), so scores keep ~16 extra bits instead of rounding q.
 * Tiles live in shared memory with 16-byte chunks XOR-swizzled by row, so
 * the ldmatrix reads are bank-conflict free.
 *
 * Every warp runs its own pipeline: warp w copies, waits for and reads only
 * rows [16 w, 16 w + 16) of each 64-key tile (its K rows for S = Q K^T, its
 * V rows for O += P V, its page-table offsets), so the main loop needs no
 * CTA barrier, only __syncwarp; the four warps drift apart and one late
 * copy stalls one warp instead of the whole CTA.  Inside a tile the
 * dependent chain is kept short: Q's A fragments stay in registers
 * (d <= 128), K fragments are fetched four ldmatrix at a time, and S
 * accumulates in two independent mma chains (even / odd k-steps). */

namespace tc
{

constexpr int kKeys = 64; /* keys per tile: 4 warps x 16 */
constexpr int kThreads = 128;
constexpr int kKGroup = 4; /* K (and V) fragments fetched per ldmatrix group */
/* Lazy rescale bound (base-2 frame): a row max that grows by at most this
 * keeps the old reference max, so p stays <= 2^8 (bf16/fp16 and the fp32
 * sums hold it exactly as well as p <= 1). */
constexpr float kLazyLog2 = 8.f;

template <int D> struct cfg {
    static constexpr int CH = D / 8; /* 16-byte chunks per row */
    /* Default pipeline depth; attn_cuda_decode_params.stages picks another
     * in [kMinStages, MAX_STAGES] (fewer stages: more resident CTAs).  d 64:
     * 2 stages (4 CTAs per SM by registers, 3 by shared memory at 4 stages);
     * once the stages sat on a 128-byte line, d64_B64_T2048 ran 39.5 us at 2
     * against 40.3 at 3 and 43.0 at 4 (H200, 2026-12-02; before the
     * alignment fix 4 stages had been the fastest, docs/cuda.md round 8). */
    static constexpr int STAGES = D == 256 ? 2 : (D == 128 ? 3 : 2);
    static constexpr int MAX_STAGES = D == 256 ? 3 : 6;
    static constexpr int TILE_VECS = kKeys * CH;
    static constexpr int WARP_VECS = 16 * CH;      /* one warp's 16 rows of a tile */
    static constexpr int NB = D / 8;               /* n-blocks of O */
    static constexpr int KS = D / 16;              /* k-steps of S = Q K^T */
    static constexpr bool QREG = D <= 128;         /* Q fragments in registers */
    static constexpr int Q_BYTES = 2 * 16 * D * 2; /* hi and lo */
    static constexpr int RED_BYTES = (4 * 16 * D + 2 * 64) * 4;
    /* Shared memory of a `stages`-deep pipeline: K and V tiles, Q hi/lo,
     * prefetched row offsets; the epilogue reuses it for the warp merge. */
    static constexpr uint32_t smem(int stages)
    {
        return 2 * stages * TILE_VECS * 16 + Q_BYTES + stages * kKeys * 8 > RED_BYTES
                   ? 2 * stages * TILE_VECS * 16 + Q_BYTES + stages * kKeys * 8
                   : RED_BYTES;
    }
    /* The copy-warp producer (producer_tc_bulk): a bulk copy writes a row
     * contiguously, so rows are padded by one 16-byte chunk instead of
     * swizzled (the 8 rows an ldmatrix reads still start in 8 different
     * bank groups).  Its depth: as many stages as keep the CTAs per SM of
     * the cp.async producer (2 at d = 128, 1 at d = 256). */
    static constexpr int ROW_VECS = CH + 1;
    static constexpr int PAD_TILE_VECS = kKeys * ROW_VECS;
    static constexpr int BULK_STAGES = D == 256 ? 2 : 3;
    static constexpr int BULK_MAX_STAGES = D == 256 ? 3 : (D == 128 ? 5 : 6);
    /* The tensor-map producer's default depth: the row copies' except at
     * d = 256, where three 64 KB stages (1 CTA per SM either way) ran the
     * four d 256 shapes of bench_decode.py 3.7-6.5 % faster than two, and
     * faster than the four row-copy warps (d256_B32_T4096 252.6 against
     * 264.3 us, d256_B128_T2048 506.2 against 537.9; H200, 2026-12-03,
     * docs/cuda.md round 16). */
    static constexpr int TMAP_STAGES = D == 256 ? 3 : BULK_STAGES;
    /* K and V stages, Q hi/lo, then the full and empty barriers of each
     * stage; the epilogue's merge area (RED_BYTES) stays below the barriers. */
    __host__ __device__ static constexpr uint32_t bulk_bar_offset(int stages)
    {
        return 2 * stages * PAD_TILE_VECS * 16 + Q_BYTES;
    }
    static constexpr uint32_t bulk_smem(int stages)
    {
        return bulk_bar_offset(stages) + 2 * stages * 8;
    }
    /* What a producer's epilogue and staged fold may reuse once its main
     * loop is done: the K and V stages (tile_vecs 16-byte vectors a tile:
     * TILE_VECS, or PAD_TILE_VECS for the row copies) and Q hi / lo. */
    __host__ __device__ static constexpr uint32_t reuse_bytes(int stages, int tile_vecs)
    {
        return (uint32_t)(2 * stages * tile_vecs + 32 * CH) * 16u;
    }
    /* The tensor-map producer: 1024 bytes to align the stages to the
     * swizzle's repeat, unpadded K and V stages, Q hi/lo, the barriers
     * (the epilogue's merge area fits in two stages). */
    static constexpr uint32_t tmap_smem(int stages)
    {
        return 1024 + 2 * stages * TILE_VECS * 16 + Q_BYTES + 2 * stages * 8;
    }
    static_assert(2 * 2 * TILE_VECS * 16 >= RED_BYTES, "the merge area of the tensor-map producer");
    static_assert(2 * 2 * PAD_TILE_VECS * 16 + Q_BYTES >= RED_BYTES,
                  "the epilogue's merge area must not reach the barriers");
};

constexpr int kMinStages = 2;

/* cp.async.wait_group with a run-time count (the instruction takes an
 * immediate): at most n of this thread's groups stay in flight. */
__device__ __forceinline__ void cp_async_wait_upto(int n)
{
    switch (n) {
    case 0:
        ptx::cp_async_wait<0>();
        break;
    case 1:
        ptx::cp_async_wait<1>();
        break;
    case 2:
        ptx::cp_async_wait<2>();
        break;
    case 3:
        ptx::cp_async_wait<3>();
        break;
    case 4:
        ptx::cp_async_wait<4>();
        break;
    default:
        ptx::cp_async_wait<5>();
        break;
    }
}

/* One warp's share of the K/V pipeline: its 16 rows of every tile.  With
 * PRE (row prefetch) the page-table walk of a tile (one row offset per
 * key, -1 past the item) runs STAGES tiles ahead into shared memory, so
 * issuing a tile's copies waits on no global load (seed 0x04E: translate
 * once per segment row, not per lane); lanes 0..15 own the warp's 16 rows.
 * The offsets of tile t + STAGES are loaded into a register one iteration
 * before they are stored, so a page-table load that misses L1 has two
 * tiles of math to return in. */
template <int D, typename KV, bool PRE> struct warp_pipe {
    using C = cfg<D>;
    uint4 *ks, *vs;
    int64_t *rowoff; /* [stages][kKeys] (PRE) */
    const KV *kbase, *vbase;
    paged::key_walk walk;
    paged::page_table pt;
    int lane, wrow0;
    int stages;        /* pipeline depth, kMinStages .. MAX_STAGES */
    int64_t nxt, nxt2; /* offsets of tiles t + STAGES and t + STAGES + 1 (PRE) */

    __device__ __forceinline__ int64_t row_off(int t, int r) const
    {
        const int64_t v = (int64_t)t * kKeys + r;
        return v < walk.n ? pt.row_offset(walk.key(v)) : -1;
    }

    /* Copy this warp's rows of tile t into stage s. */
    __device__ __forceinline__ void issue(int t, int s) const
    {
        /* partial unroll: enough loads in flight, fewer live registers */
#pragma unroll 4
        for (int j = 0; j < C::WARP_VECS / 32; j++) {
            const int vi = lane + j * 32;
            const int r = wrow0 + vi / C::CH, c = vi % C::CH;
            int64_t off;
            bool ok;
            if (PRE) {
                const int64_t ro = rowoff[s * kKeys + r];
                ok = ro >= 0;
                off = ok ? ro + c * 8 : 0;
            } else {
                const int64_t v = (int64_t)t * kKeys + r;
                ok = v < walk.n;
                off = ok ? pt.row_offset(walk.key(v)) + c * 8 : 0;
            }
            const int x = s * C::TILE_VECS + ptx::swizzle<C::CH>(r, c);
            ptx::cp_async_cg_zfill(ks + x, kbase + off, ok);
            ptx::cp_async_cg_zfill(vs + x, vbase + off, ok);
        }
    }

    /* Before the main loop: the first STAGES tiles' offsets (PRE) and the
     * copies of tiles 0 .. STAGES - 2. */
    __device__ __forceinline__ void prologue(int ntiles)
    {
        nxt = nxt2 = -1;
        if (PRE) {
            if (lane < 16) {
                for (int s = 0; s < stages; s++)
                    rowoff[s * kKeys + wrow0 + lane] = row_off(s, wrow0 + lane);
                nxt = row_off(stages, wrow0 + lane);
            }
            __syncwarp();
        }
#pragma unroll
        for (int s = 0; s < stages - 1; s++) {
            if (s < ntiles)
                issue(s, s);
            ptx::cp_async_commit();
        }
    }

    /* Top of iteration t: issue tile t + STAGES - 1 into stage sn, then wait
     * until tile t (this warp's rows) has landed. */
    __device__ __forceinline__ void acquire(int t, int sn, int ntiles)
    {
        if (t + stages - 1 < ntiles)
            issue(t + stages - 1, sn);
        ptx::cp_async_commit();
        if (PRE && lane < 16 && t + stages + 1 < ntiles)
            nxt2 = row_off(t + stages + 1, wrow0 + lane); /* in flight for two tiles' math */
        cp_async_wait_upto(stages - 1);
        __syncwarp(); /* the warp's rows of tile t, copied by its own lanes, are visible */
    }

    /* Bottom of iteration t: stage st may be refilled (tile t + STAGES
     * reuses the offset slot of tile t, issued long ago). */
    __device__ __forceinline__ void release(int t, int st, int ntiles)
    {
        if (PRE && lane < 16 && t + stages < ntiles) {
            rowoff[st * kKeys + wrow0 + lane] = nxt;
            nxt = nxt2;
        }
        __syncwarp(); /* every lane's reads of stage st precede its refill */
    }
};

/* Q rows [h0, h0 + 16) of the group into shared memory as the hi half (and,
 * QLO, the lo half x - hi) in the cache dtype, swizzled. */
template <int D, typename KV, bool QLO, int NT = kThreads>
__device__ __forceinline__ void stage_q(const attn_cuda_decode_params &p, const cta_work &w, int h0,
                                        uint4 *qh, uint4 *ql)
{
    constexpr int CH = cfg<D>::CH;
    for (int i = threadIdx.x; i < 16 * CH; i += NT) {
        const int r = i / CH, c = i % CH;
        const int hl = h0 + r;
        float x[8], lo[8];
        const size_t qoff = ((size_t)w.rq.qrow * p.num_qo_heads + w.hkv * w.g + hl) * D + c * 8;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            x[e] = hl < w.g ? attn_load_f32(p.q, p.q_dtype, qoff + e) : 0.f;
            const float hi = ptx::round_to<KV>(x[e]);
            lo[e] = x[e] - hi;
            x[e] = hi;
        }
        uint4 vh;
        vh.x = ptx::pack2<KV>(x[0], x[1]);
        vh.y = ptx::pack2<KV>(x[2], x[3]);
        vh.z = ptx::pack2<KV>(x[4], x[5]);
        vh.w = ptx::pack2<KV>(x[6], x[7]);
        qh[ptx::swizzle<CH>(r, c)] = vh;
        if (QLO) {
            uint4 vl;
            vl.x = ptx::pack2<KV>(lo[0], lo[1]);
            vl.y = ptx::pack2<KV>(lo[2], lo[3]);
            vl.z = ptx::pack2<KV>(lo[4], lo[5]);
            vl.w = ptx::pack2<KV>(lo[6], lo[7]);
            ql[ptx::swizzle<CH>(r, c)] = vl;
        }
    }
}

/* Index of 16-byte chunk c of row r of a K/V stage: XOR-swizzled rows of
 * CH chunks (the cp.async producers), rows padded to RS chunks (the
 * row-copy producer, RS = CH + 1), or (RS = 0) the tensor map's 128-byte
 * swizzle in 64-column blocks of kKeys rows (the tensor-map producer). */
template <int CH, int RS> __device__ __forceinline__ int kv_chunk(int r, int c)
{
    if (RS == 0)
        return (c >> 3) * (kKeys * 8) + r * 8 + ((c & 7) ^ (r & 7));
    return RS == CH ? ptx::swizzle<CH>(r, c) : r * RS + c;
}

/* The K and V fragments of four k-steps (K: d columns 16 (k0 + j)..) or
 * four 16-column blocks of d (V: d0 + j) of this warp's 16 rows of a stage,
 * shared by the heads-as-rows and keys-as-rows products.  K: b[j] = keys
 * 0-7 d lo, keys 0-7 d hi, keys 8-15 d lo, keys 8-15 d hi (krow: lanes
 * 16-31 address keys 8-15); V, transposed: keys 0-7 d lo, keys 8-15 d lo,
 * keys 0-7 d hi, keys 8-15 d hi (vrow: lanes 8-15 and 24-31 address keys
 * 8-15). */
template <int D, int RS>
__device__ __forceinline__ void ld_k_group(uint32_t (&b)[kKGroup][4], const uint4 *kt, int k0,
                                           int lane, int krow)
{
#pragma unroll
    for (int j = 0; j < kKGroup; j++)
        ptx::ldmatrix_x4(b[j],
                         kt + kv_chunk<cfg<D>::CH, RS>(krow, (k0 + j) * 2 + ((lane >> 3) & 1)));
}

template <int D, int RS>
__device__ __forceinline__ void ld_v_group(uint32_t (&b)[kKGroup][4], const uint4 *vt, int d0,
                                           int lane, int vrow)
{
#pragma unroll
    for (int j = 0; j < kKGroup; j++)
        ptx::ldmatrix_x4_trans(b[j],
                               vt + kv_chunk<cfg<D>::CH, RS>(vrow, (d0 + j) * 2 + (lane >> 4)));
}

/* QK: S (16 heads x this warp's 16 keys, two n-blocks) = Q K^T over stage
 * kt.  Even and odd k-steps go to two accumulator chains summed at the
 * end; with QLO the lo half of q goes into the same chains right after its
 * hi half.  qa: Q's A fragments when QREG, else read from qh per k-step. */
template <int D, typename KV, bool QLO, int RS = cfg<D>::CH>
__device__ __forceinline__ void qk_tile(float (&s)[2][4], const uint32_t (*qa)[4], const uint4 *qh,
                                        const uint4 *ql, const uint4 *kt, int lane, int qrow,
                                        int krow)
{
    using C = cfg<D>;
    float s2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int nb = 0; nb < 2; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            s[nb][i] = 0.f;
#pragma unroll
    for (int k0 = 0; k0 < C::KS; k0 += kKGroup) {
        uint32_t b[kKGroup][4];
        ld_k_group<D, RS>(b, kt, k0, lane, krow);
#pragma unroll
        for (int j = 0; j < kKGroup; j++) {
            const int kk = k0 + j;
            float(*acc)[4] = (kk & 1) ? s2 : s;
            uint32_t a[4];
            if (C::QREG) {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    a[e] = qa[C::QREG ? kk : 0][e];
            } else {
                ptx::ldmatrix_x4(a, qh + ptx::swizzle<C::CH>(qrow, kk * 2 + (lane >> 4)));
            }
            ptx::mma_m16n8k16<KV>(acc[0], a, b[j][0], b[j][1]);
            ptx::mma_m16n8k16<KV>(acc[1], a, b[j][2], b[j][3]);
        }
        if (QLO) {
#pragma unroll
            for (int j = 0; j < kKGroup; j++) {
                const int kk = k0 + j;
                float(*acc)[4] = (kk & 1) ? s2 : s;
                uint32_t a[4];
                ptx::ldmatrix_x4(a, ql + ptx::swizzle<C::CH>(qrow, kk * 2 + (lane >> 4)));
                ptx::mma_m16n8k16<KV>(acc[0], a, b[j][0], b[j][1]);
                ptx::mma_m16n8k16<KV>(acc[1], a, b[j][2], b[j][3]);
            }
        }
    }
#pragma unroll
    for (int nb = 0; nb < 2; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            s[nb][i] += s2[nb][i];
}

/* Online softmax update on the S fragments of rows (lane / 4) and
 * (lane / 4 + 8): scale into the base-2 frame, mask keys at or past
 * `valid` (seed 0x05C), take the row max over the quad with max.NaN (a NaN
 * score makes the row's m NaN, never dropped), rescale l and O, and turn S
 * into P packed as the A operand of P V.  An empty row stays empty and
 * never evaluates exp(-inf - -inf) (seed 0x02C).  Lazy rescale (issue 13):
 * when no row of the warp grew past its max + kLazyLog2, the stale maxima
 * stay and the O rescale (NB x 4 multiplies per lane) is skipped; any NaN,
 * empty row or larger growth takes the exact update below. */
template <int NB, typename KV>
__device__ __forceinline__ void softmax_update(float (&s)[2][4], float (&m)[2], float (&l)[2],
                                               float (&o)[NB][4], uint32_t (&pa)[4], float sc,
                                               int64_t key0, int64_t valid)
{
#pragma unroll
    for (int nb = 0; nb < 2; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            s[nb][i] = key0 + nb * 8 + (i & 1) < valid ? s[nb][i] * sc : -INFINITY;
    float mxs[2];
    bool grow = false;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        mxs[rr] = ptx::max_nan(ptx::max_nan(s[0][2 * rr], s[0][2 * rr + 1]),
                               ptx::max_nan(s[1][2 * rr], s[1][2 * rr + 1]));
        /* false only for finite m and mx <= m + kLazyLog2: NaN, -inf, a
         * growth beyond the bound all take the exact update.  Tested on
         * this thread's own scores: the row's m is the same in its four
         * lanes and the test is monotone in mx (NaN aside, which any lane
         * reports), so "some lane grew" is "the row's max grew" and the
         * row maxima's shuffles run only in the exact update below. */
        grow |= !(mxs[rr] - m[rr] <= kLazyLog2);
    }
    if (!__any_sync(0xffffffffu, grow)) {
        /* No row of this warp grew past the bound: keep the stale maxima,
         * so p <= 2^kLazyLog2 and O needs no rescale (alpha would be 1 or
         * the state is rewritten against the stale m, an exact identity). */
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
#pragma unroll
            for (int nb = 0; nb < 2; nb++) {
                s[nb][2 * rr] = exp2f(s[nb][2 * rr] - m[rr]);
                s[nb][2 * rr + 1] = exp2f(s[nb][2 * rr + 1] - m[rr]);
            }
            l[rr] += s[0][2 * rr] + s[0][2 * rr + 1] + s[1][2 * rr] + s[1][2 * rr + 1];
        }
        pa[0] = ptx::pack2<KV>(s[0][0], s[0][1]);
        pa[1] = ptx::pack2<KV>(s[0][2], s[0][3]);
        pa[2] = ptx::pack2<KV>(s[1][0], s[1][1]);
        pa[3] = ptx::pack2<KV>(s[1][2], s[1][3]);
        return;
    }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float mx = mxs[rr];
        mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = ptx::max_nan(m[rr], mx);
        float alpha = 1.f;
        if (attn_state_empty_f32(mn)) {
#pragma unroll
            for (int nb = 0; nb < 2; nb++)
                s[nb][2 * rr] = s[nb][2 * rr + 1] = 0.f;
        } else {
            alpha = exp2f(m[rr] - mn);
#pragma unroll
            for (int nb = 0; nb < 2; nb++) {
                s[nb][2 * rr] = exp2f(s[nb][2 * rr] - mn);
                s[nb][2 * rr + 1] = exp2f(s[nb][2 * rr + 1] - mn);
            }
        }
        l[rr] = l[rr] * alpha + s[0][2 * rr] + s[0][2 * rr + 1] + s[1][2 * rr] + s[1][2 * rr + 1];
        m[rr] = mn;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            o[nb][2 * rr] *= alpha;
            o[nb][2 * rr + 1] *= alpha;
        }
    }
    pa[0] = ptx::pack2<KV>(s[0][0], s[0][1]);
    pa[1] = ptx::pack2<KV>(s[0][2], s[0][3]);
    pa[2] = ptx::pack2<KV>(s[1][0], s[1][1]);
    pa[3] = ptx::pack2<KV>(s[1][2], s[1][3]);
}

/* PV: O += P V over this warp's 16 V rows of stage vt. */
template <int D, typename KV, int RS = cfg<D>::CH>
__device__ __forceinline__ void pv_tile(float (&o)[cfg<D>::NB][4], const uint32_t (&pa)[4],
                                        const uint4 *vt, int lane, int vrow)
{
#pragma unroll
    for (int d0 = 0; d0 < D / 16; d0 += kKGroup) {
        uint32_t b[kKGroup][4];
        ld_v_group<D, RS>(b, vt, d0, lane, vrow);
#pragma unroll
        for (int j = 0; j < kKGroup; j++) {
            ptx::mma_m16n8k16<KV>(o[2 * (d0 + j)], pa, b[j][0], b[j][1]);
            ptx::mma_m16n8k16<KV>(o[2 * (d0 + j) + 1], pa, b[j][2], b[j][3]);
        }
    }
}

/* ---- keys as the M rows (groups of at most 8 query heads) ----------------
 * With g <= 8 query heads per K/V head, the 16 rows of an mma that hold the
 * heads above are at least half empty, and every product, exponential and
 * rescale of a tile is paid for 16 rows.  These three run the same tile
 * transposed: S^T = K Q^T with this warp's 16 keys as the M rows and 8
 * heads as the N columns (8 mma per tile at d = 128 instead of 16), the
 * softmax on 2 keys x 2 heads per lane (4 exponentials instead of 8), and
 * O^T += V^T P^T with 16 columns of d as the M rows (8 mma instead of 16),
 * so O^T holds D / 16 x 4 floats a lane instead of D / 8 x 4, and Q's B
 * fragments D / 8 registers instead of D / 4.  The K and V fragments come
 * from the same ldmatrix as qk_tile / pv_tile (operands in another order);
 * P^T becomes the B operand of the second product by movmatrix.  Lane l holds
 * keys (l / 4) and (l / 4 + 8) of S^T and heads 2 (l % 4) and 2 (l % 4) + 1;
 * of O^T, d = 16 b + l / 4 (+ 8) of block b for the same two heads. */

/* QK^T: s = S^T of this warp's 16 keys (rows) x heads 0..7 (columns); even
 * and odd k-steps in two chains summed at the end, as qk_tile.  qb: Q's B
 * fragments (load_qb), 2 registers per k-step, so at every head dim. */
template <int D, typename KV, int RS = cfg<D>::CH>
__device__ __forceinline__ void qk_tile_kr(float (&s)[4], const uint32_t (*qb)[2], const uint4 *kt,
                                           int lane, int krow)
{
    using C = cfg<D>;
    float s2[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 4; i++)
        s[i] = 0.f;
#pragma unroll
    for (int k0 = 0; k0 < C::KS; k0 += kKGroup) {
        uint32_t b[kKGroup][4];
        ld_k_group<D, RS>(b, kt, k0, lane, krow);
#pragma unroll
        for (int j = 0; j < kKGroup; j++) {
            const int kk = k0 + j;
            /* b[j]: keys 0-7 d lo, keys 0-7 d hi, keys 8-15 d lo, keys 8-15 d hi */
            const uint32_t a[4] = {b[j][0], b[j][2], b[j][1], b[j][3]};
            ptx::mma_m16n8k16<KV>((kk & 1) ? s2 : s, a, qb[kk][0], qb[kk][1]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
        s[i] += s2[i];
}

/* softmax_update on S^T: column c (head 2 (lane % 4) + c) holds s[c] (key
 * key0) and s[c + 2] (key key0 + 8); its max runs over the 8 lanes of the
 * column (xor 4, 8, 16).  The same rules: max.NaN, mask before max and
 * sum, no exp(-inf - -inf), the lazy rescale while no column of the warp
 * grew past its max + kLazyLog2.  pb: P^T as the B operand of pv_tile_kr. */
template <int MB, typename KV>
__device__ __forceinline__ void softmax_update_kr(float (&s)[4], float (&m)[2], float (&l)[2],
                                                  float (&o)[MB][4], uint32_t (&pb)[2], float sc,
                                                  int64_t key0, int64_t valid)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        s[i] = key0 + (i >> 1) * 8 < valid ? s[i] * sc : -INFINITY;
    float mxs[2];
    bool grow = false;
#pragma unroll
    for (int c = 0; c < 2; c++) {
        mxs[c] = ptx::max_nan(s[c], s[c + 2]);
        grow |= !(mxs[c] - m[c] <= kLazyLog2); /* as softmax_update: this thread's keys */
    }
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float mx = mxs[c]; /* the column's max over the warp's 16 keys */
            mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
            mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
            const float mn = ptx::max_nan(m[c], mx);
            float alpha = 1.f;
            if (attn_state_empty_f32(mn)) {
                s[c] = s[c + 2] = 0.f;
            } else {
                alpha = exp2f(m[c] - mn);
                s[c] = exp2f(s[c] - mn);
                s[c + 2] = exp2f(s[c + 2] - mn);
            }
            l[c] = l[c] * alpha + s[c] + s[c + 2];
            m[c] = mn;
#pragma unroll
            for (int b = 0; b < MB; b++) {
                o[b][c] *= alpha;
                o[b][c + 2] *= alpha;
            }
        }
    } else {
#pragma unroll
        for (int c = 0; c < 2; c++) {
            s[c] = exp2f(s[c] - m[c]);
            s[c + 2] = exp2f(s[c + 2] - m[c]);
            l[c] += s[c] + s[c + 2];
        }
    }
    pb[0] = ptx::movmatrix_trans(ptx::pack2<KV>(s[0], s[1])); /* keys 0-7 */
    pb[1] = ptx::movmatrix_trans(ptx::pack2<KV>(s[2], s[3])); /* keys 8-15 */
}

/* PV^T: O^T (D / 16 blocks of 16 d rows x 8 heads) += V^T P^T over this
 * warp's 16 V rows of stage vt. */
template <int D, typename KV, int RS = cfg<D>::CH>
__device__ __forceinline__ void pv_tile_kr(float (&o)[D / 16][4], const uint32_t (&pb)[2],
                                           const uint4 *vt, int lane, int vrow)
{
#pragma unroll
    for (int d0 = 0; d0 < D / 16; d0 += kKGroup) {
        uint32_t b[kKGroup][4];
        ld_v_group<D, RS>(b, vt, d0, lane, vrow);
#pragma unroll
        for (int j = 0; j < kKGroup; j++) {
            /* b[j] (transposed): keys 0-7 d lo, keys 8-15 d lo, keys 0-7 d hi, keys 8-15 d hi */
            const uint32_t a[4] = {b[j][0], b[j][2], b[j][1], b[j][3]};
            ptx::mma_m16n8k16<KV>(o[d0 + j], a, pb[0], pb[1]);
        }
    }
}

/* A barrier of the NT compute threads (the first NT of the CTA): the whole
 * CTA (the cp.async producer), or named barrier ID over threads
 * 0 .. NT - 1 (NAMED: the copy-warp producers, whose copy warps have exited
 * by then; the fused mixed kernel, whose other roles never join it). */
template <bool NAMED, int NT = kThreads, int ID = 1> __device__ __forceinline__ void compute_sync()
{
    if (NAMED)
        asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(NT) : "memory");
    else
        __syncthreads();
}

/* The second half of the epilogues: once every compute warp's state is in
 * red ([NW][16][D] O, [NW][16] m in the natural frame, [NW][16] l), the
 * fixed-order merge of the NW warps with the state.h algebra and the
 * write-out of this thread's EPT lanes of one head (state_io). */
template <int D, bool NAMED, int NW, int BAR>
__device__ __forceinline__ void epilogue_merge(const attn_cuda_decode_params &p, const cta_work &w,
                                               int h0, const float *red)
{
    const int tid = threadIdx.x;
    const float *red_o = red;
    const float *red_m = red_o + NW * 16 * D;
    const float *red_l = red_m + NW * 16;
    compute_sync<NAMED, 32 * NW, BAR>();

    constexpr int SEGS = 2 * NW;  /* threads of one row */
    constexpr int EPT = D / SEGS; /* lanes of one row per thread */
    const int row = (int)((unsigned)tid / SEGS), seg = (int)((unsigned)tid % SEGS);
    const int hl = h0 + row;
    if (hl >= w.g)
        return;
    float u[EPT];
    attn_mlu_f32 st = state_io::from_ml(red_m[row], red_l[row]);
#pragma unroll
    for (int i = 0; i < EPT; i++)
        u[i] = red_o[row * D + seg * EPT + i];
    for (int wi = 1; wi < NW; wi++) {
        const attn_mlu_f32 ot = state_io::from_ml(red_m[wi * 16 + row], red_l[wi * 16 + row]);
        attn_mlu_merge_f32(&st, u, &ot, red_o + (wi * 16 + row) * D + seg * EPT, EPT);
    }
    state_io::write<D, EPT>(sink_of(p), w.rq.num_slots == 1, w.rq.qrow, w.it.slot, w.hkv * w.g + hl,
                            seg * EPT, st, u, seg == 0);
}

/* Epilogue: per-warp states -> shared memory, then the fixed-order merge
 * of the NW compute warps (threads 0 .. 32 NW - 1, epilogue_merge).  Every
 * compute thread calls it after the pipeline has drained; BAR is the named
 * barrier (NAMED) the compute warps meet at. */
template <int D, bool NAMED = false, int NW = 4, int BAR = 1>
__device__ __forceinline__ void epilogue(const attn_cuda_decode_params &p, const cta_work &w,
                                         int h0, float (&o)[cfg<D>::NB][4], float (&m)[2],
                                         float (&l)[2], float *red)
{
    constexpr int NB = cfg<D>::NB;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *red_o = red;                 /* [NW][16][D] */
    float *red_m = red_o + NW * 16 * D; /* [NW][16] */
    float *red_l = red_m + NW * 16;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
        const int row = (lane >> 2) + rr * 8;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            float2 v = make_float2(o[nb][2 * rr], o[nb][2 * rr + 1]);
            *reinterpret_cast<float2 *>(red_o + (warp * 16 + row) * D + nb * 8 + (lane & 3) * 2) =
                v;
        }
        if ((lane & 3) == 0) {
            const bool empty = attn_state_empty_f32(m[rr]);
            red_m[warp * 16 + row] = empty ? -INFINITY : m[rr] * kLn2; /* natural frame */
            red_l[warp * 16 + row] = empty ? 0.f : l[rr];
        }
    }
    epilogue_merge<D, NAMED, NW, BAR>(p, w, h0, red);
}

/* epilogue for the keys-as-rows state (o: O^T blocks, m / l per head
 * column): rows 8..15 of each warp's area are not written, and not read
 * (g <= 8 heads). */
template <int D, bool NAMED = false, int NW = 4, int BAR = 1>
__device__ __forceinline__ void epilogue_kr(const attn_cuda_decode_params &p, const cta_work &w,
                                            int h0, float (&o)[D / 16][4], float (&m)[2],
                                            float (&l)[2], float *red)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *red_o = red;                 /* [NW][16][D] */
    float *red_m = red_o + NW * 16 * D; /* [NW][16] */
    float *red_l = red_m + NW * 16;
    const int row0 = warp * 16 + (lane & 3) * 2; /* head 2 (lane % 4), then + 1 */
#pragma unroll
    for (int c = 0; c < 2; c++) {
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 4);
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 8);
        l[c] += __shfl_xor_sync(0xffffffffu, l[c], 16);
#pragma unroll
        for (int b = 0; b < D / 16; b++) {
            red_o[(row0 + c) * D + b * 16 + (lane >> 2)] = o[b][c];
            red_o[(row0 + c) * D + b * 16 + (lane >> 2) + 8] = o[b][c + 2];
        }
        if (lane < 4) {
            const bool empty = attn_state_empty_f32(m[c]);
            red_m[row0 + c] = empty ? -INFINITY : m[c] * kLn2; /* natural frame */
            red_l[row0 + c] = empty ? 0.f : l[c];
        }
    }
    epilogue_merge<D, NAMED, NW, BAR>(p, w, h0, red);
}

/* The epilogue of the persistent producer (producer_tc_tmap_persist), whose
 * copy warp already fills the stages with the next piece's tiles, so the
 * merge cannot borrow them: the same fixed-order merge of the four warps
 * (bit-identical to `epilogue`) through one warp's O at a time, red =
 * [16][D] O + [4][16] m + [4][16] l floats (8.5 KB at d = 128 instead of
 * 33 KB), at the price of six more barriers among the compute warps. */
template <int D>
__device__ __forceinline__ void epilogue_seq(const attn_cuda_decode_params &p, const cta_work &w,
                                             int h0, float (&o)[cfg<D>::NB][4], float (&m)[2],
                                             float (&l)[2], float *red)
{
    constexpr int NB = cfg<D>::NB;
    constexpr int EPT = D / 8; /* lanes of one row per thread */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    float *red_o = red;            /* [16][D]: warp wi's O in round wi */
    float *red_m = red_o + 16 * D; /* [4][16] */
    float *red_l = red_m + 64;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
        if ((lane & 3) == 0) {
            const int row = (lane >> 2) + rr * 8;
            const bool empty = attn_state_empty_f32(m[rr]);
            red_m[warp * 16 + row] = empty ? -INFINITY : m[rr] * kLn2; /* natural frame */
            red_l[warp * 16 + row] = empty ? 0.f : l[rr];
        }
    }
    const int row = tid >> 3, seg = tid & 7;
    float u[EPT];
    attn_mlu_f32 st;
    for (int wi = 0; wi < 4; wi++) {
        if (warp == wi) {
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                const int r = (lane >> 2) + rr * 8;
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
                    *reinterpret_cast<float2 *>(red_o + r * D + nb * 8 + (lane & 3) * 2) =
                        make_float2(o[nb][2 * rr], o[nb][2 * rr + 1]);
            }
        }
        compute_sync<true>();
        const float *src = red_o + row * D + seg * EPT;
        if (wi == 0) {
            st = state_io::from_ml(red_m[row], red_l[row]);
#pragma unroll
            for (int i = 0; i < EPT; i++)
                u[i] = src[i];
        } else {
            const attn_mlu_f32 ot = state_io::from_ml(red_m[wi * 16 + row], red_l[wi * 16 + row]);
            attn_mlu_merge_f32(&st, u, &ot, src, EPT);
        }
        if (wi < 3)
            compute_sync<true>(); /* read before the next warp's O replaces it */
    }
    const int hl = h0 + row;
    if (hl >= w.g)
        return;
    state_io::write<D, EPT>(sink_of(p), w.rq.num_slots == 1, w.rq.qrow, w.it.slot, w.hkv * w.g + hl,
                            seg * EPT, st, u, seg == 0);
}

/* The fused fold through shared memory (issue 13 round 11): merge_fold's
 * arithmetic in its order (batches of kMergeBatch slots, one pivot raise
 * per batch, slots added in slot order), so the result is the same bits as
 * the reducer kernel's, but not its code.  merge_fold holds a batch's 16
 * slots in 96 registers and unrolls it into ~1000 instructions; inlined in
 * a producer it can set the register count of the whole kernel (ptxas with
 * this fold instead: the cp.async producer at d 128 127 -> 121, the d 64
 * tensor-map one 126 -> 80, which kFoldStaged leaves as it was).  Here the
 * slots are staged by cp.async from loops that are not unrolled (one memory
 * round trip per pass, where merge_fold takes one per batch) and folded
 * from shared memory by loops unrolled four times.  Measured (H200,
 * 2026-12-02, docs/cuda.md round 11): the fold of 33 slots at B 1 x T 32768
 * 3.8 -> 3.5 us, the launch 41.6 -> 41.2 us, B 2 x T 2048 10.7 -> 10.4.  A
 * round serves kThreads fold units (4 lanes of one head each); a pass as
 * many slots as the free stages hold (whole batches when the slots need
 * more than one pass): per slot each thread's 16-byte vector and the
 * (m, l) of the round's heads, which the threads stage together and meet
 * at a barrier for.  The loops' trip counts are the CTA's, so every compute
 * thread meets every barrier.  (The engine fuses the fold only where one
 * round serves every unit, heads x D / 4 <= kThreads: fused_merge in
 * decode.cu; the round loop keeps the function whole for any caller.) */
template <int D> struct fold_cells {
    static constexpr int UPH = D / kMergeLanes; /* fold units per head */
    static constexpr int HR = kThreads / UPH;   /* heads per round */
    static constexpr uint32_t SLOT_BYTES = kThreads * 16 + HR * 8;
    /* the smallest area a producer passes: two stages and Q */
    static_assert(cfg<D>::reuse_bytes(kMinStages, cfg<D>::TILE_VECS) >= kMergeBatch * SLOT_BYTES,
                  "a pass of the staged fold holds a whole batch");
};

/* Which head dims fold through shared memory: 128 and 256.  At 64 the
 * staged fold took the producers' registers down (tensor maps 126 -> 80,
 * cp.async 127 -> 64), so more CTAs fit an SM than the plan was measured
 * with, and d64_B256_T2048 ran 139.9 against 130.2 us (H200, 2026-12-02);
 * merge_fold keeps them as they were. */
template <int D> constexpr bool kFoldStaged = D >= 128;

template <int D, bool NAMED>
__device__ __forceinline__ void fold_staged(const attn_cuda_decode_params &p, const cta_work &w,
                                            int h0, int heads, void *stage, uint32_t stage_bytes)
{
    using F = fold_cells<D>;
    const int tid = threadIdx.x, n = w.rq.num_slots;
    const int fit = (int)(stage_bytes / F::SLOT_BYTES); /* >= kMergeBatch: fold_cells asserts it */
    const int P = n <= fit ? n : fit / kMergeBatch * kMergeBatch;
    float4 *sv = static_cast<float4 *>(stage);
    float2 *sml = reinterpret_cast<float2 *>(sv + (size_t)P * kThreads);
    const bool mlu = p.abi == ATTN_ABI_MLU;
    const int hq0 = w.hkv * w.g + h0;
    for (int r0 = 0; r0 < heads * F::UPH; r0 += kThreads) {
        const int u = r0 + tid, hr0 = r0 / F::UPH, hrn = min(F::HR, heads - hr0);
        const bool has = u < heads * F::UPH;
        const int hq = hq0 + u / F::UPH, hl = u / F::UPH - hr0, lane0 = (u % F::UPH) * kMergeLanes;
        float acc[kMergeLanes] = {0.f, 0.f, 0.f, 0.f};
        float l = 0.f, pivot = -INFINITY;
        for (int s0 = 0; s0 < n; s0 += P) {
            const int np = min(P, n - s0);
            if (r0 > 0 || s0 > 0)
                compute_sync<NAMED>(); /* the last pass's cells are read */
            const size_t slot0 = (size_t)(w.rq.slot_begin + s0);
            if (has) {
#pragma unroll 1
                for (int j = 0; j < np; j++)
                    ptx::cp_async_cg_zfill(
                        sv + j * kThreads + tid,
                        p.part_vec + ((slot0 + j) * p.num_qo_heads + hq) * D + lane0, true);
            }
#pragma unroll 1
            for (int i = tid; i < np * hrn; i += kThreads) {
                const int j = i / hrn, h = i % hrn;
                const size_t idx = (slot0 + j) * p.num_qo_heads + hq0 + hr0 + h;
                ptx::cp_async_ca4(&sml[j * F::HR + h].x, p.part_m + idx);
                if (mlu)
                    ptx::cp_async_ca4(&sml[j * F::HR + h].y, p.part_l + idx);
            }
            ptx::cp_async_commit();
            ptx::cp_async_wait<0>();
            compute_sync<NAMED>(); /* every thread's (m, l) cells landed */
            if (!has)
                continue;
#pragma unroll 1
            for (int b = 0; b < np; b += kMergeBatch) {
                const int nb = min(kMergeBatch, np - b);
                float next = pivot;
#pragma unroll 4
                for (int j = b; j < b + nb; j++)
                    next = attn_pivot_max_f32(next, sml[j * F::HR + hl].x);
                attn_pivot_raise_f32(&pivot, &l, acc, kMergeLanes, next);
#pragma unroll 4
                for (int j = b; j < b + nb; j++) {
                    const float2 ml = sml[j * F::HR + hl];
                    const float4 v = sv[j * kThreads + tid];
                    const float uv[kMergeLanes] = {v.x, v.y, v.z, v.w};
                    pivot_add_sel(pivot, &l, acc, ml.x, mlu ? ml.y : 1.f, uv);
                }
            }
        }
        if (!has)
            continue;
        fold_finish<D>(p, w.rq, hq, lane0, pivot, l, acc);
    }
}

/* Fused reducer: the last of the request's num_slots CTAs for this (K/V
 * head, head chunk `chunk` of `chunks`) folds the slots.  Which CTA is last
 * varies; the fold does not: merge_fold reads the slots in slot order, so
 * the result is bit-identical to the reducer kernel's.  STAGED (every
 * producer but the persistent one, whose stages hold the next piece's
 * tiles): through the free stages, fold_staged. */
template <int D, bool NAMED = false, bool STAGED = false>
__device__ __forceinline__ void fused_fold(const attn_cuda_decode_params &p, const cta_work &w,
                                           int h0, int chunk, int chunks, void *stage = nullptr,
                                           uint32_t stage_bytes = 0)
{
    __shared__ int s_last;
    const int tid = threadIdx.x;
    /* the CTA's slot writes are ordered before thread 0's count, which
     * releases them (and, in the last CTA, acquires every other CTA's slot
     * for the loads after the second barrier): no fence per thread, where
     * __threadfence was a MEMBAR.SC.GPU in every thread on each side */
    compute_sync<NAMED>();
    if (tid == 0) {
        int *cnt = p.merge_counters + ((size_t)w.it.req * p.num_kv_heads + w.hkv) * chunks + chunk;
        const int prev = ptx::atom_add_acq_rel_gpu(cnt, 1);
        s_last = prev == w.rq.num_slots - 1;
        if (s_last)
            *cnt = 0; /* every slot has arrived: ready for the next launch */
    }
    compute_sync<NAMED>();
    if (!s_last)
        return;
    probe_phase(p, 1);
    const int heads = min(16, w.g - h0);
    if constexpr (STAGED) {
        fold_staged<D, NAMED>(p, w, h0, heads, stage, stage_bytes);
    } else {
        constexpr int UPH = D / kMergeLanes; /* fold units per head */
        for (int u = tid; u < heads * UPH; u += kThreads)
            merge_fold<D>(p, w.rq, w.hkv * w.g + h0 + u / UPH, (u % UPH) * kMergeLanes);
    }
}

/* A position in a ring of mbarrier stages: the stage, its phase parity and
 * the tiles that went through the ring so far (a stage is waited for reuse
 * once every stage has been filled).  The persistent producer carries one
 * across its pieces, so the ring never drains between them. */
struct ring {
    int s = 0;
    uint32_t ph = 0;
    int n = 0;
    __device__ __forceinline__ void next(int stages)
    {
        n++;
        if (++s == stages) {
            s = 0;
            ph ^= 1u;
        }
    }
};

/* The copy-warp pipeline of producer_tc_bulk (issue 13): NP warps after
 * the four compute warps walk the page table and issue, for each key row of
 * a 64-key tile, one cp.async.bulk of its K row and one of its V row into
 * stage s (rows padded to ROW_VECS chunks), all completing on full[s]; they
 * run up to `stages` tiles ahead of the compute warps, which wait on
 * full[s], compute, and arrive on empty[s] (every compute thread, so no
 * warp barrier is needed before the release).  The 128 copies of a tile
 * are spread over the 32 NP copy lanes (NP = 1: 4 each; 4: one each): one
 * warp issues its bulk copies one lane at a time, so more copy warps keep
 * more of them in flight (measured, docs/cuda.md).  A row past the walk is
 * not copied: its V row is zeroed (P is 0 there, and 0 x a stale NaN would
 * be NaN); its K row may hold anything, the score is masked by select
 * before max and sum. */
template <int D, typename KV, int NP> struct bulk_pipe {
    using C = cfg<D>;
    static constexpr uint32_t kRowBytes = D * 2; /* one head's row of K (or V) */
    static constexpr int kLanes = 32 * NP;       /* copy lanes; arrivals on full[s] */
    static constexpr int kCopies = 2 * kKeys;    /* K and V rows of one tile */
    static constexpr int kPerLane = kCopies / kLanes;
    static constexpr int kConsumers = kThreads; /* arrivals on empty[s] */
    static_assert(kCopies % kLanes == 0, "copies per lane");
    uint4 *ks, *vs;         /* [stages][kKeys][ROW_VECS] */
    uint64_t *full, *empty; /* [stages] each */
    int stages;

    /* One thread, before the CTA barrier that precedes every use. */
    __device__ __forceinline__ void init() const
    {
        for (int s = 0; s < stages; s++) {
            mbar::init(&full[s], kLanes);
            mbar::init(&empty[s], kConsumers);
        }
        mbar::fence_init();
    }

    /* The copy lanes' loop over tiles 0 .. ntiles - 1: copy j of lane c is
     * copy c + j kLanes of the tile, K rows first, then V rows.  The row
     * offsets of tile t + 1 are loaded before the wait for stage reuse, so
     * a page-table miss overlaps it. */
    __device__ __forceinline__ void produce(const KV *kbase, const KV *vbase,
                                            const paged::key_walk &walk,
                                            const paged::page_table &pt, int ntiles, int c) const
    {
        int64_t nx[kPerLane];
#pragma unroll
        for (int j = 0; j < kPerLane; j++)
            nx[j] = row_off(walk, pt, 0, (c + j * kLanes) % kKeys);
        int s = 0;
        uint32_t ph = 0;
        for (int t = 0; t < ntiles; t++) {
            int64_t off[kPerLane];
            bool tail = false;
#pragma unroll
            for (int j = 0; j < kPerLane; j++) {
                off[j] = nx[j];
                tail |= off[j] < 0;
            }
            if (t + 1 < ntiles) {
#pragma unroll
                for (int j = 0; j < kPerLane; j++)
                    nx[j] = row_off(walk, pt, t + 1, (c + j * kLanes) % kKeys);
            }
            if (t >= stages)
                mbar::wait(&empty[s], ph ^ 1u); /* the consumers of tile t - stages are done */
            uint4 *kd = ks + s * C::PAD_TILE_VECS, *vd = vs + s * C::PAD_TILE_VECS;
            uint32_t bytes = 0;
#pragma unroll
            for (int j = 0; j < kPerLane; j++) {
                const int x = c + j * kLanes;
                if (off[j] < 0 && x >= kKeys) /* the walk ends inside this tile (its last) */
                    zero_row(vd + (x - kKeys) * C::ROW_VECS);
                bytes += off[j] >= 0 ? kRowBytes : 0u;
            }
            if (tail)
                mbar::fence_proxy_async();
            mbar::arrive_expect_tx(&full[s], bytes); /* release: the zeroed rows too */
#pragma unroll
            for (int j = 0; j < kPerLane; j++) {
                const int x = c + j * kLanes, r = x % kKeys;
                if (off[j] >= 0)
                    mbar::bulk_copy_g2s((x < kKeys ? kd : vd) + r * C::ROW_VECS,
                                        (x < kKeys ? kbase : vbase) + off[j], kRowBytes, &full[s]);
            }
            if (++s == stages) {
                s = 0;
                ph ^= 1u;
            }
        }
    }

    /* Element offset of row r of tile t, or -1 past the walk. */
    __device__ __forceinline__ static int64_t row_off(const paged::key_walk &walk,
                                                      const paged::page_table &pt, int t, int r)
    {
        const int64_t v = (int64_t)t * kKeys + r;
        return v < walk.n ? pt.row_offset(walk.key(v)) : -1;
    }

    __device__ __forceinline__ static void zero_row(uint4 *row)
    {
#pragma unroll
        for (int c = 0; c < C::CH; c++)
            row[c] = make_uint4(0u, 0u, 0u, 0u);
    }
};

/* CTAs per SM producer_tc_bulk is built for: 2, except d = 256 and q hi +
 * lo (~240 registers) and four copy warps at d = 128 (256 threads x ~164
 * registers; moving registers to the compute warps with setmaxnreg under a
 * 128-register entry cap made ptxas spill, -Xptxas -v). */
template <int D, bool QLO, int NP> struct bulk_regs {
    static constexpr int MIN_CTAS = D == 256 || QLO || (D == 128 && NP == 4) ? 1 : 2;
};

/* The tensor-map copy warps of producer_tc_tmap (issue 13, rounds 2 and
 * 9; one in the persistent and the fused mixed kernels): a warp moves each
 * of its 64-key tiles as boxes of R = min(P, 64) rows x 64 columns
 * (a box is one page's run of rows of one K/V head; d / 64 boxes side by
 * side), so a tile of 64 keys is 2 x (64 / R) x (d / 64) copy instructions
 * instead of 128 row copies.  The stage layout is the tensor map's 128-byte
 * swizzle: [d / 64 column blocks][64 rows][8 chunks], chunk c of a row at
 * c ^ (row & 7) (kv_chunk with RS = 0).  A box whose rows are not one run
 * of keys inside one page (a mask run or a split boundary inside it) is
 * copied row by row with the one-row maps.  Rows past the walk are not
 * written or hold the page's tail; the compute warps zero their V rows
 * there (tmap_zero_tail). */
template <int D, typename KV> struct tmap_pipe {
    using C = cfg<D>;
    static constexpr int kCols = D / 64; /* 64-column blocks of a row */
    uint4 *ks, *vs;                      /* [stages][kCols][kKeys][8] */
    uint64_t *full, *empty;              /* [stages] each */
    int stages;
    int consumers = kThreads; /* compute threads, each arriving on empty[s] */
    /* attn_cuda_decode_params.l2_evict_first: the copies carry l2_policy
     * (evict_first); else no hint at all, which is not the evict_normal
     * policy: copies hinted evict_normal ran B 64 x T 4096 in 278 us against
     * 248 without a hint (H200, 2026-12-02) */
    bool evict_first = false;
    uint64_t l2_policy = 0;

    /* The L2 policy of a launch's copies (l2_evict_first above). */
    __device__ __forceinline__ void set_l2(const attn_cuda_decode_params &p)
    {
        evict_first = p.l2_evict_first != 0;
        l2_policy = ptx::l2_policy_evict_first();
    }

    /* One box of map at (column block h, the page's slot, K/V head, page)
     * into dst, completing on bar, with the launch's L2 policy. */
    __device__ __forceinline__ void copy(uint4 *dst, const CUtensorMap *map, int h, bool hnd,
                                         int slot, int hkv, int page, uint64_t *bar) const
    {
        if (evict_first)
            mbar::tensor_copy_4d_hint(dst, map, h * 64, hnd ? slot : hkv, hnd ? hkv : slot, page,
                                      bar, l2_policy);
        else
            mbar::tensor_copy_4d(dst, map, h * 64, hnd ? slot : hkv, hnd ? hkv : slot, page, bar);
    }

    __device__ __forceinline__ void init() const
    {
        for (int s = 0; s < stages; s++) {
            mbar::init(&full[s], 32);
            mbar::init(&empty[s], consumers);
        }
        mbar::fence_init();
    }

    /* Box b of tile t: K or V, row block j, column block h.  nb = 64 / R
     * row blocks (R, P and kCols are powers of two): shifts and masks, as
     * the copy lanes decompose their boxes on every tile, and run-time
     * divisions there were long dependent chains (~20 instructions each,
     * plus 64-bit remainders) ahead of each tile's first copy. */
    struct box {
        int tens, j, h;
    };
    static constexpr int kColShift = kCols == 1 ? 0 : (kCols == 2 ? 1 : 2);
    static_assert((1 << kColShift) == kCols, "d / 64 column blocks: 1, 2 or 4");
    __device__ __forceinline__ static box box_of(int b, int nb_shift)
    {
        box x;
        x.tens = b >> (nb_shift + kColShift);
        x.j = (b >> kColShift) & ((1 << nb_shift) - 1);
        x.h = b & (kCols - 1);
        return x;
    }

    /* One box (or its rows one by one) into stage s; returns the bytes
     * announced (issue = false: only counts them). */
    __device__ __forceinline__ uint32_t copy_box(const CUtensorMap *maps, bool hnd, int hkv,
                                                 const paged::key_walk &walk,
                                                 const paged::page_table &pt, int t, int R, box x,
                                                 uint4 *dst, uint64_t *bar, bool issue) const
    {
        const int64_t v0 = (int64_t)t * kKeys + (int64_t)x.j * R;
        if (v0 >= walk.n)
            return 0;
        const int64_t vl = (v0 + R < walk.n ? v0 + R : walk.n) - 1;
        const int64_t k0 = walk.key(v0);
        const int64_t mask = (((int64_t)1) << pt.page_shift) - 1;
        const CUtensorMap *whole = maps + x.tens, *row = maps + 2 + x.tens;
        uint4 *d0 = dst + x.h * kKeys * 8 + x.j * R * 8;
        if (walk.key(vl) - k0 == vl - v0 && (k0 & (R - 1)) == 0) { /* one run inside one page */
            if (issue) {
                const int page = pt.pages[k0 >> pt.page_shift], slot = (int)(k0 & mask);
                copy(d0, whole, x.h, hnd, slot, hkv, page, bar);
            }
            return (uint32_t)R * 128u;
        }
        for (int64_t v = v0; v <= vl && issue; v++) {
            const int64_t k = walk.key(v);
            const int page = pt.pages[k >> pt.page_shift], slot = (int)(k & mask);
            copy(d0 + (v - v0) * 8, row, x.h, hnd, slot, hkv, page, bar);
        }
        return (uint32_t)(vl - v0 + 1) * 128u;
    }

    /* Copy warp cw of ncw's loop: tiles cw, cw + ncw, ... of the piece;
     * lane l serves boxes l, l + 32, ... of each.  `rg`: where this piece's
     * tiles enter the ring; on return, where they leave it.  Several copy
     * warps each wait for their own tiles' stages, so one warp's page-table
     * load and box issues overlap another's.  A stage's phases stay in
     * order: tile t + stages cannot be issued before tile t is consumed,
     * which needs tile t issued, so no warp waits on a parity two phases
     * stale.  That needs ncw <= stages: before tile t' its warp issued tile
     * t' - ncw, after tile t' - ncw - stages was consumed, which must be no
     * earlier than tile t' - 2 stages (four warps on three stages failed
     * their launches, H200 2026-12-02). */
    __device__ __forceinline__ void produce(const CUtensorMap *maps, bool hnd, int hkv,
                                            const paged::key_walk &walk,
                                            const paged::page_table &pt, int ntiles, int lane,
                                            ring &rg, int cw = 0, int ncw = 1) const
    {
        constexpr int kKeyShift = 6;
        static_assert((1 << kKeyShift) == kKeys, "kKeyShift: log2 of the tile's keys");
        const int r_shift = pt.page_shift < kKeyShift ? (int)pt.page_shift : kKeyShift;
        const int R = 1 << r_shift, nb_shift = kKeyShift - r_shift; /* nb = 64 / R */
        const int nbox = 2 << (nb_shift + kColShift);
        ring at = rg;
        for (int i = 0; i < cw; i++)
            at.next(stages);
        for (int t = cw; t < ntiles; t += ncw) {
            const int s = at.s;
            if (at.n >= stages) /* the consumers of the tile stages tiles back are done */
                mbar::wait(&empty[s], at.ph ^ 1u);
            uint32_t bytes = 0;
            for (int b = lane; b < nbox; b += 32) {
                const box x = box_of(b, nb_shift);
                bytes += copy_box(maps, hnd, hkv, walk, pt, t, R, x, nullptr, nullptr, false);
            }
            mbar::arrive_expect_tx(&full[s], bytes);
            for (int b = lane; b < nbox; b += 32) {
                const box x = box_of(b, nb_shift);
                uint4 *dst = (x.tens ? vs : ks) + s * C::TILE_VECS;
                copy_box(maps, hnd, hkv, walk, pt, t, R, x, dst, &full[s], true);
            }
            for (int i = 0; i < ncw; i++)
                at.next(stages);
        }
        for (int t = 0; t < ntiles; t++)
            rg.next(stages);
    }
};

/* The compute warp's V rows of the last tile past the walk, zeroed after
 * the tile landed (a box copies a page's tail there, a row past the walk is
 * not copied at all), so 0 x NaN never reaches O; this warp alone reads
 * them. */
template <int D>
__device__ __forceinline__ void tmap_zero_tail(uint4 *vt, int t, int64_t n, int warp, int lane)
{
    const int64_t first = (int64_t)t * kKeys + warp * 16;
    if (first + 16 <= n)
        return;
    for (int i = lane; i < 16 * (D / 8); i += 32) {
        const int r = warp * 16 + i % 16, c = i / 16;
        if ((int64_t)t * kKeys + r >= n)
            vt[kv_chunk<D / 8, 0>(r, c)] = make_uint4(0u, 0u, 0u, 0u);
    }
    __syncwarp();
}

} // namespace tc

/* The compute warps' loop over one piece's tiles of a copy-warp pipeline:
 * wait on full[s], QK, online softmax, PV, release empty[s].  RS: the stage
 * layout (kv_chunk); `rg`: where the piece's tiles are in the ring.  NW
 * compute warps (threads 0 .. 32 NW - 1): warp w takes the 16-key blocks
 * w, w + NW, ... of each 64-key tile, one online-softmax state across them
 * (NW 4: the copy-warp producers; 2: the fused mixed kernel). */
template <int D, typename KV, bool QLO, int RS, typename Pipe, int NW = 4>
__device__ __forceinline__ void
consume_tiles(const attn_cuda_decode_params &p, const Pipe &pipe, const uint32_t (*qa)[4],
              const uint4 *qh, const uint4 *ql, const paged::key_walk &walk, int ntiles,
              float (&o)[tc::cfg<D>::NB][4], float (&m)[2], float (&l)[2], tc::ring &rg)
{
    using C = tc::cfg<D>;
    constexpr int TP = RS == 0 ? C::TILE_VECS : C::PAD_TILE_VECS;
    constexpr int SUBS = 4 / NW; /* 16-key blocks of a tile per warp */
    static_assert(SUBS * NW == 4, "the warps split a tile's four 16-key blocks");
    const int ST = pipe.stages;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int nb = 0; nb < C::NB; nb++)
        o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
    const float sc = p.sm_scale * kLog2e;
    for (int t = 0; t < ntiles; t++) {
        const int s = rg.s;
        mbar::wait(&pipe.full[s], rg.ph);
        const uint4 *kt = pipe.ks + s * TP;
        uint4 *vt = pipe.vs + s * TP;
        if (RS == 0 && t == ntiles - 1) {
#pragma unroll
            for (int j = 0; j < SUBS; j++)
                tc::tmap_zero_tail<D>(vt, t, walk.n, warp + NW * j, lane);
        }
        /* rolled for two blocks: unrolled, their fragments are live at once
         * and ptxas spilled 24 bytes at the fused kernel's 168-register cap */
#pragma unroll 1
        for (int j = 0; j < SUBS; j++) {
            const int wr = warp + NW * j;
            const int krow = wr * 16 + (lane & 7) + ((lane >> 4) << 3);
            const int vrow = wr * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            float sf[2][4];
            uint32_t pa[4];
            tc::qk_tile<D, KV, QLO, RS>(sf, qa, qh, ql, kt, lane, qrow, krow);
            tc::softmax_update<C::NB, KV>(
                sf, m, l, o, pa, sc, (int64_t)t * tc::kKeys + wr * 16 + (lane & 3) * 2, walk.n);
            tc::pv_tile<D, KV, RS>(o, pa, vt, lane, vrow);
        }
        mbar::arrive(&pipe.empty[s]); /* release: this thread's reads of stage s are done */
        rg.next(ST);
    }
}

/* consume_tiles with keys as the M rows (tc::qk_tile_kr, groups of at most
 * 8 heads): the four compute warps' loop over the piece's tiles, the state
 * as O^T blocks and m / l per head column. */
template <int D, typename KV, int RS, typename Pipe>
__device__ __forceinline__ void
consume_tiles_kr(const attn_cuda_decode_params &p, const Pipe &pipe, const uint32_t (*qb)[2],
                 const paged::key_walk &walk, int ntiles, float (&o)[D / 16][4], float (&m)[2],
                 float (&l)[2], tc::ring &rg)
{
    using C = tc::cfg<D>;
    constexpr int TP = RS == 0 ? C::TILE_VECS : C::PAD_TILE_VECS;
    const int ST = pipe.stages;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int b = 0; b < D / 16; b++)
        o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    const int krow = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
    const int vrow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const float sc = p.sm_scale * kLog2e;
    for (int t = 0; t < ntiles; t++) {
        const int s = rg.s;
        mbar::wait(&pipe.full[s], rg.ph);
        const uint4 *kt = pipe.ks + s * TP;
        uint4 *vt = pipe.vs + s * TP;
        if (RS == 0 && t == ntiles - 1)
            tc::tmap_zero_tail<D>(vt, t, walk.n, warp, lane);
        float sf[4];
        uint32_t pb[2];
        tc::qk_tile_kr<D, KV, RS>(sf, qb, kt, lane, krow);
        tc::softmax_update_kr<D / 16, KV>(sf, m, l, o, pb, sc,
                                          (int64_t)t * tc::kKeys + warp * 16 + (lane >> 2), walk.n);
        tc::pv_tile_kr<D, KV, RS>(o, pb, vt, lane, vrow);
        mbar::arrive(&pipe.empty[s]); /* release: this thread's reads of stage s are done */
        rg.next(ST);
    }
}

/* Q's A fragments into registers (d <= 128; C::QREG), once Q is staged. */
template <int D> __device__ __forceinline__ void load_qa(uint32_t (*qa)[4], const uint4 *qh)
{
    using C = tc::cfg<D>;
    const int lane = threadIdx.x & 31;
    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
    if (C::QREG) {
#pragma unroll
        for (int kk = 0; kk < (C::QREG ? C::KS : 0); kk++)
            ptx::ldmatrix_x4(qa[kk], qh + ptx::swizzle<C::CH>(qrow, kk * 2 + (lane >> 4)));
    }
}

/* Q's B fragments for the keys-as-rows products (heads 0..7 as the N
 * columns of S^T = K Q^T): per k-step the d lo and d hi halves of rows
 * 0..7, once Q is staged. */
template <int D> __device__ __forceinline__ void load_qb(uint32_t (*qb)[2], const uint4 *qh)
{
    using C = tc::cfg<D>;
    const int lane = threadIdx.x & 31;
    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
#pragma unroll
    for (int kk = 0; kk < C::KS; kk++) {
        uint32_t a[4]; /* rows 0-7 d lo, rows 8-15 d lo, rows 0-7 d hi, rows 8-15 d hi */
        ptx::ldmatrix_x4(a, qh + ptx::swizzle<C::CH>(qrow, kk * 2 + (lane >> 4)));
        qb[kk][0] = a[0];
        qb[kk][1] = a[2];
    }
}

/* The launch arguments of producer_tc_tmap: the decode parameters and the
 * tensor maps of the layer's stores (whole-box and one-row boxes of K and
 * V), encoded by the launch; `hnd`: the maps' dimension order (d, slot,
 * head, page) instead of (d, head, slot, page). */
struct tmap_args {
    attn_cuda_decode_params p;
    CUtensorMap maps[4]; /* K box, V box, K row, V row */
    int hnd;
};

/* The four tensor maps of a tensor-map launch (decode.cu). */
int encode_maps(const attn_cuda_decode_params &p, tmap_args &a);

} // namespace decode
} // namespace attn

#endif
