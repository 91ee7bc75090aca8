/* The CUDA paged split-KV decode engine: producer, reducer and append.
 *
 * Producer (seed 0x03C, issue 4): one CTA per (work item, K/V head, head
 * chunk).  It serves every query head of the GQA group, so each K/V byte is
 * read from HBM once.  K and V tiles stream through a kStages-deep cp.async
 * pipeline of 16-byte vectors; page ids are looked up once per row group
 * while the tile is issued, several stages ahead of its use.  Scores
 * accumulate in fp32.  Masked keys never reach the kernel: the host turns
 * the decode mask into at most two visible key ranges per request, and the
 * producer walks only their intersection with its item (seed 0x05E, 0x06F).
 *
 * Each thread (tx, ty, tz) owns 8 lanes of head ty and the rows of row group
 * tz; row groups are merged with the split-state algebra of kernels/common/
 * state.h (the algebra exists once).  A request with one slot finalizes in
 * the producer (direct path: O and LSE); otherwise the producer writes a
 * partial state in the plan's ABI and the reducer folds the request's slots
 * in slot order (seed 0x02C, 0x03I).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/error.h"
#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "kernels/cuda/decode_launch.h"

namespace
{

constexpr int kVec = 8;          /* 2-byte elements per 16-byte vector */
constexpr int kTileBytes = 8192; /* K bytes (and V bytes) of one pipeline stage */
constexpr int kTileVecs = kTileBytes / 16;
constexpr int kStages = 4;
constexpr int kChunk = 4;        /* rows per online-softmax step */
constexpr int kMinThreads = 128; /* so a tile needs at most 4 vectors per thread */
constexpr int kMaxThreads = 256;
constexpr int kLoadsPerThread = kTileVecs / kMinThreads;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kMergeHeads = 4; /* query heads per reducer CTA */

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool pred)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = pred ? 16 : 0; /* zero-fill rows past the range: stale smem never enters a sum */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename KV> __device__ __forceinline__ void widen8(const uint4 &r, float *f);

template <> __device__ __forceinline__ void widen8<__nv_bfloat16>(const uint4 &r, float *f)
{
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16); /* bf16 is the top half of an fp32 */
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

template <> __device__ __forceinline__ void widen8<__half>(const uint4 &r, float *f)
{
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
        float2 x = __half22float2(h);
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}

/* Sum over the `lanes` aligned lanes of one row group (lanes divides 32). */
template <int LANES> __device__ __forceinline__ float group_sum(float x)
{
    const unsigned lane = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned mask = LANES >= 32
                              ? 0xffffffffu
                              : (((1u << LANES) - 1u) << ((lane & 31u) & ~(unsigned)(LANES - 1)));
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        x += __shfl_xor_sync(mask, x, off);
    return x;
}

/* Logical key of virtual index v of the walk [a0, a0+na) ++ [b0, ...). */
__device__ __forceinline__ int64_t walk_key(int64_t v, int64_t a0, int64_t na, int64_t b0)
{
    return v < na ? a0 + v : b0 + (v - na);
}

template <int D, typename KV>
__global__ void __launch_bounds__(kMaxThreads) attn_decode_producer(attn_cuda_decode_params p)
{
    constexpr int BDX = D / kVec;
    constexpr int TR = kTileBytes / (D * 2); /* rows per tile */
    extern __shared__ uint4 smem[];
    uint4 *ks = smem;
    uint4 *vs = smem + kStages * kTileVecs;

    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int bdy = blockDim.y, bdz = blockDim.z;
    const int nthreads = BDX * bdy * bdz;
    const int tid = tx + BDX * (ty + bdy * tz);

    /* graph mode: the grid is the capacity envelope; CTAs past the live
     * item count own nothing and no reducer reads them (seed 0x03G). */
    const int item = p.heads_fast ? (int)blockIdx.y : (int)blockIdx.x;
    const int hkv = p.heads_fast ? (int)blockIdx.x : (int)blockIdx.y;
    if (item >= p.counts->num_items)
        return; /* graph mode: outside the live items (seed 0x03G) */
    const attn_work_item it = p.items[item];
    const attn_cuda_req rq = p.reqs[it.req];
    const int g = p.num_qo_heads / p.num_kv_heads;
    const int hloc = blockIdx.z * bdy + ty;
    const bool head_ok = hloc < g;
    const int hq = hkv * g + (head_ok ? hloc : 0);

    /* The item's keys that the mask leaves visible: two disjoint runs. */
    const int64_t a0 = max(it.kv_begin, rq.lo0), a1 = min(it.kv_end, rq.hi0);
    const int64_t na = a1 > a0 ? a1 - a0 : 0;
    const int64_t b0 = max(it.kv_begin, rq.lo1), b1 = min(it.kv_end, rq.hi1);
    const int64_t n = na + (b1 > b0 ? b1 - b0 : 0);
    const int ntiles = (int)((n + TR - 1) / TR);

    const KV *kbase = static_cast<const KV *>(p.k) + (int64_t)hkv * p.head_stride;
    const KV *vbase = static_cast<const KV *>(p.v) + (int64_t)hkv * p.head_stride;
    const int32_t *pages = p.page_indices + rq.page_begin;
    const int64_t pmask = ((int64_t)1 << p.page_shift) - 1;

    /* q of head hq, lanes tx*8.., pre-scaled into the base-2 frame. */
    float q[kVec];
    {
        const float sc = p.sm_scale * kLog2e;
        const size_t qoff = ((size_t)rq.qrow * p.num_qo_heads + hq) * D + tx * kVec;
#pragma unroll
        for (int i = 0; i < kVec; i++)
            q[i] = head_ok ? attn_load_f32(p.q, p.q_dtype, qoff + i) * sc : 0.f;
    }

    /* Issue tile `t` into stage `s`: each thread copies up to 4 vectors of K
     * and of V; the page id is looked up once per row (one segment step). */
    auto issue = [&](int t, int s) {
#pragma unroll
        for (int j = 0; j < kLoadsPerThread; j++) {
            const int vi = tid + j * nthreads;
            if (vi < kTileVecs) {
                const int r = vi / BDX, c = vi % BDX;
                const int64_t v = (int64_t)t * TR + r;
                const bool ok = v < n;
                int64_t off = 0;
                if (ok) {
                    const int64_t key = walk_key(v, a0, na, b0);
                    const int64_t page = pages[key >> p.page_shift];
                    off = page * p.page_stride + (key & pmask) * p.row_stride + c * kVec;
                }
                cp_async16(ks + s * kTileVecs + vi, kbase + off, ok);
                cp_async16(vs + s * kTileVecs + vi, vbase + off, ok);
            }
        }
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < ntiles)
            issue(s, s);
        cp_async_commit();
    }

    /* Running state of (head ty, row group tz, lanes tx) in the base-2 frame. */
    float m = -INFINITY, l = 0.f, u[kVec];
#pragma unroll
    for (int i = 0; i < kVec; i++)
        u[i] = 0.f;

    for (int t = 0; t < ntiles; t++) {
        const int st = t % kStages;
        if (t + kStages - 1 < ntiles)
            issue(t + kStages - 1, (t + kStages - 1) % kStages);
        cp_async_commit();
        cp_async_wait<kStages - 1>();
        __syncthreads();

        const uint4 *kt = ks + st * kTileVecs;
        const uint4 *vt = vs + st * kTileVecs;
        const int64_t vrow0 = (int64_t)t * TR;
        for (int c0 = tz * kChunk; c0 < TR; c0 += bdz * kChunk) {
            float s[kChunk];
#pragma unroll
            for (int j = 0; j < kChunk; j++) {
                float kf[kVec];
                widen8<KV>(kt[(c0 + j) * BDX + tx], kf);
                float dot = 0.f;
#pragma unroll
                for (int i = 0; i < kVec; i++)
                    dot = fmaf(q[i], kf[i], dot);
                dot = group_sum<BDX>(dot);
                s[j] = (vrow0 + c0 + j < n) ? dot : -INFINITY;
            }
            float mc = s[0];
#pragma unroll
            for (int j = 1; j < kChunk; j++)
                mc = fmaxf(mc, s[j]);
            const float mn = fmaxf(m, mc);
            /* seed 0x02C: an all-masked chunk on an empty state stays empty
             * before any exponential is evaluated. */
            if (mn == -INFINITY)
                continue;
            const float alpha = exp2f(m - mn); /* m = -inf gives 0 */
            l *= alpha;
#pragma unroll
            for (int i = 0; i < kVec; i++)
                u[i] *= alpha;
#pragma unroll
            for (int j = 0; j < kChunk; j++) {
                const float pj = exp2f(s[j] - mn);
                float vf[kVec];
                widen8<KV>(vt[(c0 + j) * BDX + tx], vf);
                l += pj;
#pragma unroll
                for (int i = 0; i < kVec; i++)
                    u[i] = fmaf(pj, vf[i], u[i]);
            }
            m = mn;
        }
        __syncthreads(); /* the stage is refilled next iteration */
    }
    cp_async_wait<0>();
    __syncthreads();

    /* Merge the row groups through shared memory (state.h merge). */
    attn_mlu_f32 stt;
    stt.valid = m > -INFINITY;
    stt.m = stt.valid ? m * kLn2 : -INFINITY; /* back to the natural frame */
    stt.l = l;
    float *red = reinterpret_cast<float *>(smem);
    float *red_u = red;                         /* [bdz][bdy][D] */
    float *red_m = red + (size_t)bdz * bdy * D; /* [bdz][bdy] */
    float *red_l = red_m + bdz * bdy;
    if (tz > 0) {
#pragma unroll
        for (int i = 0; i < kVec; i++)
            red_u[((size_t)tz * bdy + ty) * D + tx * kVec + i] = u[i];
        if (tx == 0) {
            red_m[tz * bdy + ty] = stt.m;
            red_l[tz * bdy + ty] = stt.valid ? l : 0.f;
        }
    }
    __syncthreads();
    if (tz != 0 || !head_ok)
        return;
    for (int z = 1; z < bdz; z++) {
        attn_mlu_f32 o;
        o.m = red_m[z * bdy + ty];
        o.l = red_l[z * bdy + ty];
        o.valid = o.l > 0.f;
        attn_mlu_merge_f32(&stt, u, &o, red_u + ((size_t)z * bdy + ty) * D + tx * kVec, kVec);
    }

    if (rq.num_slots == 1) {
        /* direct path: the only slot of its request is the whole row */
        float o[kVec], lse;
        attn_mlu_finalize_f32(&stt, u, kVec, o, &lse);
        const size_t ooff = ((size_t)rq.qrow * p.num_qo_heads + hq) * D + tx * kVec;
#pragma unroll
        for (int i = 0; i < kVec; i++)
            attn_store_f32(p.o, p.q_dtype, ooff + i, o[i]);
        if (p.lse && tx == 0)
            p.lse[(size_t)rq.qrow * p.num_qo_heads + hq] = lse;
        return;
    }
    const size_t sidx = (size_t)it.slot * p.num_qo_heads + hq;
    float *pv = p.part_vec + sidx * D + tx * kVec;
    if (p.abi == ATTN_ABI_MLU) {
#pragma unroll
        for (int i = 0; i < kVec; i++)
            pv[i] = stt.valid ? u[i] : 0.f;
        if (tx == 0) {
            p.part_m[sidx] = stt.valid ? stt.m : -INFINITY;
            p.part_l[sidx] = stt.valid ? stt.l : 0.f;
        }
    } else {
        attn_lseo_f32 lo;
        float o[kVec];
        attn_mlu_to_lseo_f32(&stt, u, kVec, &lo, o);
#pragma unroll
        for (int i = 0; i < kVec; i++)
            pv[i] = o[i];
        if (tx == 0)
            p.part_m[sidx] = lo.lse;
    }
}

/* ---- tensor-core producer ------------------------------------------------
 * The same contract as attn_decode_producer, with the group's query heads as
 * the M = 16 rows of mma.m16n8k16 (seed 0x03A: GQA packing makes decode a
 * skinny matrix product).  Four warps each own 16 keys of a 64-key tile:
 * S = Q K^T and O += P V run on the tensor cores with fp32 accumulation;
 * the online softmax runs on the S fragments in fp32.  A q whose dtype is
 * not the cache dtype is split into hi + lo halves of the cache dtype (two
 * products), so scores keep ~16 extra bits instead of rounding q.  Tiles
 * live in shared memory with 16-byte chunks XOR-swizzled by row, so the
 * ldmatrix reads are bank-conflict free. */

constexpr int kTcKeys = 64; /* keys per tile: 4 warps x 16 */
constexpr int kTcThreads = 128;

template <int D> struct tc_cfg {
    static constexpr int CH = D / 8; /* 16-byte chunks per row */
    static constexpr int STAGES = D == 256 ? 2 : (D == 128 ? 3 : 4);
    static constexpr int TILE_VECS = kTcKeys * CH;
    static constexpr int WARP_VECS = 16 * CH; /* one warp's 16 rows of a tile */
    static constexpr int PIPE_BYTES = 2 * STAGES * TILE_VECS * 16;
    static constexpr int Q_BYTES = 2 * 16 * D * 2;         /* hi and lo */
    static constexpr int ROW_BYTES = STAGES * kTcKeys * 8; /* prefetched row offsets */
    static constexpr int RED_BYTES = (4 * 16 * D + 2 * 64) * 4;
    static constexpr int SMEM =
        PIPE_BYTES + Q_BYTES + ROW_BYTES > RED_BYTES ? PIPE_BYTES + Q_BYTES + ROW_BYTES : RED_BYTES;
};

__device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

template <typename KV>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0,
                                                        uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<__half>(float *c, const uint32_t *a, uint32_t b0,
                                                 uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <typename KV> __device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

template <typename KV> __device__ __forceinline__ float round_kv(float x);
template <> __device__ __forceinline__ float round_kv<__nv_bfloat16>(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}
template <> __device__ __forceinline__ float round_kv<__half>(float x)
{
    return __half2float(__float2half_rn(x));
}

/* Chunk c of row r of a swizzled tile. */
template <int CH> __device__ __forceinline__ int swz(int r, int c)
{
    return r * CH + (c ^ (r & 7));
}

/* The fold of one request's slots for query head hq, lanes [lane0, lane0+4):
 * exactly the slots [slot_begin, slot_begin + num_slots) in slot order, with
 * the state.h merge (seed 0x02C, 0x03I).  Slots are fetched kMergeBatch at a
 * time (independent loads in flight), then folded one by one: the order
 * stays fixed while the memory latency is paid once per batch instead of
 * once per slot.  Loads go through L2 (__ldcg): in the fused path the slots
 * were written by other CTAs of the same launch.  Used by the reducer kernel
 * and by the last producer CTA of a (request, K/V head, head chunk). */
constexpr int kMergeBatch = 8;
constexpr int kMergeLanes = 4;

template <int D>
__device__ __forceinline__ void merge_fold(const attn_cuda_decode_params &p,
                                           const attn_cuda_req &rq, int hq, int lane0)
{
    constexpr int LANES = kMergeLanes;
    const bool mlu = p.abi == ATTN_ABI_MLU;
    float acc[LANES];
    attn_mlu_f32 st;
    attn_lseo_f32 sl;
    attn_mlu_empty_f32(&st, acc, LANES);
    sl.lse = -INFINITY;
    const int end = rq.slot_begin + rq.num_slots;
    for (int s0 = rq.slot_begin; s0 < end; s0 += kMergeBatch) {
        float bm[kMergeBatch], bl[kMergeBatch];
        float4 bv[kMergeBatch];
#pragma unroll
        for (int j = 0; j < kMergeBatch; j++) {
            if (s0 + j < end) {
                const size_t idx = (size_t)(s0 + j) * p.num_qo_heads + hq;
                bm[j] = __ldcg(p.part_m + idx);
                bl[j] = mlu ? __ldcg(p.part_l + idx) : 0.f;
                bv[j] = __ldcg(reinterpret_cast<const float4 *>(p.part_vec + idx * D + lane0));
            }
        }
#pragma unroll
        for (int j = 0; j < kMergeBatch; j++) {
            if (s0 + j >= end)
                break;
            const float ou[LANES] = {bv[j].x, bv[j].y, bv[j].z, bv[j].w};
            if (mlu) {
                attn_mlu_f32 o;
                o.m = bm[j];
                o.l = bl[j];
                o.valid = o.l > 0.f; /* seed 0x03D: emptiness by sentinel, branched on */
                attn_mlu_merge_f32(&st, acc, &o, ou, LANES);
            } else {
                attn_lseo_f32 o;
                o.lse = bm[j];
                attn_lseo_merge_f32(&sl, acc, &o, ou, LANES);
            }
        }
    }
    float lse;
    if (mlu)
        attn_mlu_finalize_f32(&st, acc, LANES, acc, &lse);
    else
        lse = sl.lse; /* an all-empty row keeps LSE = -inf and O = 0 */
    const size_t ooff = ((size_t)rq.qrow * p.num_qo_heads + hq) * D + lane0;
#pragma unroll
    for (int i = 0; i < LANES; i++)
        attn_store_f32(p.o, p.q_dtype, ooff + i, acc[i]);
    if (p.lse && lane0 == 0)
        p.lse[(size_t)rq.qrow * p.num_qo_heads + hq] = lse;
}

/* Every warp runs its own pipeline: warp w copies, waits for and reads only
 * rows [16 w, 16 w + 16) of each 64-key tile (its K rows for S = Q K^T, its
 * V rows for O += P V, its page-table offsets), so the main loop needs no
 * CTA barrier, only __syncwarp; the four warps drift apart and one late
 * copy stalls one warp instead of the whole CTA.  The key -> warp mapping
 * is the same as with a CTA-wide pipeline.  Inside a tile the dependent
 * chain is kept short: Q's A fragments stay in registers (d <= 128), K
 * fragments are fetched four ldmatrix at a time, and S accumulates in two
 * independent mma chains (even / odd k-steps) summed at the end. */
template <int D, typename KV>
__global__ void __launch_bounds__(kTcThreads) attn_decode_producer_tc(attn_cuda_decode_params p)
{
    using C = tc_cfg<D>;
    constexpr int CH = C::CH, ST = C::STAGES, TV = C::TILE_VECS, WV = C::WARP_VECS, NB = D / 8;
    constexpr int KS = D / 16;      /* k-steps of S = Q K^T */
    constexpr bool QREG = D <= 128; /* Q fragments in registers */
    constexpr int KG = 4;           /* K fragments fetched per group */
    extern __shared__ uint4 smem[];
    uint4 *ks = smem;
    uint4 *vs = smem + ST * TV;
    uint4 *qh = smem + 2 * ST * TV;
    uint4 *ql = qh + 16 * CH;
    int64_t *rowoff = reinterpret_cast<int64_t *>(ql + 16 * CH); /* [ST][kTcKeys] */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wrow0 = warp * 16; /* this warp's rows of every tile */

    /* heads_fast: the H_kv CTAs of one item are neighbours in launch order,
     * so they stream the same pages (NHD rows are H_kv x d contiguous) */
    const int item = p.heads_fast ? (int)blockIdx.y : (int)blockIdx.x;
    const int hkv = p.heads_fast ? (int)blockIdx.x : (int)blockIdx.y;
    if (item >= p.counts->num_items)
        return; /* graph mode: outside the live items (seed 0x03G) */
    const attn_work_item it = p.items[item];
    const attn_cuda_req rq = p.reqs[it.req];
    const int g = p.num_qo_heads / p.num_kv_heads;
    const int h0 = blockIdx.z * 16; /* first group head of this chunk */

    const int64_t a0 = max(it.kv_begin, rq.lo0), a1 = min(it.kv_end, rq.hi0);
    const int64_t na = a1 > a0 ? a1 - a0 : 0;
    const int64_t b0 = max(it.kv_begin, rq.lo1), b1 = min(it.kv_end, rq.hi1);
    const int64_t n = na + (b1 > b0 ? b1 - b0 : 0);
    const int ntiles = (int)((n + kTcKeys - 1) / kTcKeys);

    const KV *kbase = static_cast<const KV *>(p.k) + (int64_t)hkv * p.head_stride;
    const KV *vbase = static_cast<const KV *>(p.v) + (int64_t)hkv * p.head_stride;
    const int32_t *pages = p.page_indices + rq.page_begin;
    const int64_t pmask = ((int64_t)1 << p.page_shift) - 1;

    /* Issue this warp's rows of tile `t` into stage `s`. */
    auto issue = [&](int t, int s) {
    /* partial unroll: enough loads in flight, fewer live registers */
#pragma unroll 4
        for (int j = 0; j < WV / 32; j++) {
            const int vi = lane + j * 32;
            const int r = wrow0 + vi / CH, c = vi % CH;
            const int64_t v = (int64_t)t * kTcKeys + r;
            const bool ok = v < n;
            int64_t off = 0;
            if (ok) {
                const int64_t key = walk_key(v, a0, na, b0);
                off = (int64_t)pages[key >> p.page_shift] * p.page_stride +
                      (key & pmask) * p.row_stride + c * 8;
            }
            cp_async16(ks + s * TV + swz<CH>(r, c), kbase + off, ok);
            cp_async16(vs + s * TV + swz<CH>(r, c), vbase + off, ok);
        }
    };

    /* row_prefetch: the page-table walk of a tile (one row offset per key,
     * -1 past the item) runs ST tiles ahead into shared memory, so issuing a
     * tile's copies waits on no global load (seed 0x04E: translate once per
     * segment row, not per lane).  Lanes 0..15 of a warp own its 16 rows. */
    auto row_off = [&](int t, int r) -> int64_t {
        const int64_t v = (int64_t)t * kTcKeys + r;
        if (v >= n)
            return -1;
        const int64_t key = walk_key(v, a0, na, b0);
        return (int64_t)pages[key >> p.page_shift] * p.page_stride + (key & pmask) * p.row_stride;
    };
    auto issue_pre = [&](int s) {
#pragma unroll 4
        for (int j = 0; j < WV / 32; j++) {
            const int vi = lane + j * 32;
            const int r = wrow0 + vi / CH, c = vi % CH;
            const int64_t ro = rowoff[s * kTcKeys + r];
            const bool ok = ro >= 0;
            const int64_t off = ok ? ro + c * 8 : 0;
            cp_async16(ks + s * TV + swz<CH>(r, c), kbase + off, ok);
            cp_async16(vs + s * TV + swz<CH>(r, c), vbase + off, ok);
        }
    };
    const bool pre = p.row_prefetch != 0;
    /* the offsets of tile t + ST are loaded into a register one iteration
     * before they are stored (end of iteration t), so a page-table load that
     * misses L1 has two tiles of math to return in */
    int64_t nxt = -1, nxt2 = -1;
    if (pre) {
        if (lane < 16) {
            for (int s = 0; s < ST; s++)
                rowoff[s * kTcKeys + wrow0 + lane] = row_off(s, wrow0 + lane);
            nxt = row_off(ST, wrow0 + lane);
        }
        __syncwarp();
    }

#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < ntiles) {
            if (pre)
                issue_pre(s);
            else
                issue(s, s);
        }
        cp_async_commit();
    }

    /* Q rows of this head chunk, as hi (+ lo when q is not the cache dtype). */
    const bool need_lo = p.q_dtype != p.kv_dtype;
    for (int i = tid; i < 16 * CH; i += kTcThreads) {
        const int r = i / CH, c = i % CH;
        const int hl = h0 + r;
        float x[8], lo[8];
        const size_t qoff = ((size_t)rq.qrow * p.num_qo_heads + hkv * g + hl) * D + c * 8;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            x[e] = hl < g ? attn_load_f32(p.q, p.q_dtype, qoff + e) : 0.f;
            const float hi = round_kv<KV>(x[e]);
            lo[e] = x[e] - hi;
            x[e] = hi;
        }
        uint4 vh, vl;
        vh.x = pack2<KV>(x[0], x[1]);
        vh.y = pack2<KV>(x[2], x[3]);
        vh.z = pack2<KV>(x[4], x[5]);
        vh.w = pack2<KV>(x[6], x[7]);
        vl.x = pack2<KV>(lo[0], lo[1]);
        vl.y = pack2<KV>(lo[2], lo[3]);
        vl.z = pack2<KV>(lo[4], lo[5]);
        vl.w = pack2<KV>(lo[6], lo[7]);
        qh[swz<CH>(r, c)] = vh;
        ql[swz<CH>(r, c)] = vl;
    }
    __syncthreads(); /* Q is read by every warp; the only barrier before the epilogue */

    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
    const int krow = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
    const int vrow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    uint32_t qa[QREG ? KS : 1][4];
    if (QREG) {
#pragma unroll
        for (int kk = 0; kk < (QREG ? KS : 0); kk++)
            ldsm_x4(qa[kk], qh + swz<CH>(qrow, kk * 2 + (lane >> 4)));
    }

    float o[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
        o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sc = p.sm_scale * kLog2e;

    int st = 0, sn = ST - 1; /* stages of tile t and of tile t + ST - 1 */
    for (int t = 0; t < ntiles; t++) {
        if (t + ST - 1 < ntiles) {
            if (pre)
                issue_pre(sn);
            else
                issue(t + ST - 1, sn);
        }
        cp_async_commit();
        if (pre && lane < 16 && t + ST + 1 < ntiles)
            nxt2 = row_off(t + ST + 1, wrow0 + lane); /* in flight for two tiles' math */
        cp_async_wait<ST - 1>();
        __syncwarp(); /* the warp's rows of tile t, copied by its own lanes, are visible */
        const uint4 *kt = ks + st * TV;
        const uint4 *vt = vs + st * TV;

        /* S = Q K^T over the warp's 16 keys: even and odd k-steps in two
         * accumulator chains; the lo half of q (when q is not the cache
         * dtype) goes into the same chains right after its hi half */
        float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        float s2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int k0 = 0; k0 < KS; k0 += KG) {
            uint32_t b[KG][4];
#pragma unroll
            for (int j = 0; j < KG; j++)
                ldsm_x4(b[j], kt + swz<CH>(krow, (k0 + j) * 2 + ((lane >> 3) & 1)));
#pragma unroll
            for (int j = 0; j < KG; j++) {
                const int kk = k0 + j;
                float(*acc)[4] = (kk & 1) ? s2 : s;
                uint32_t a[4];
                if (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        a[e] = qa[QREG ? kk : 0][e];
                } else {
                    ldsm_x4(a, qh + swz<CH>(qrow, kk * 2 + (lane >> 4)));
                }
                mma16816<KV>(acc[0], a, b[j][0], b[j][1]);
                mma16816<KV>(acc[1], a, b[j][2], b[j][3]);
            }
            if (need_lo) {
#pragma unroll
                for (int j = 0; j < KG; j++) {
                    const int kk = k0 + j;
                    float(*acc)[4] = (kk & 1) ? s2 : s;
                    uint32_t a[4];
                    ldsm_x4(a, ql + swz<CH>(qrow, kk * 2 + (lane >> 4)));
                    mma16816<KV>(acc[0], a, b[j][0], b[j][1]);
                    mma16816<KV>(acc[1], a, b[j][2], b[j][3]);
                }
            }
        }
#pragma unroll
        for (int nb = 0; nb < 2; nb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[nb][i] += s2[nb][i];
        /* scale into the base-2 frame; keys past the item are masked
         * before max and sum (seed 0x05C) */
        const int64_t kb = (int64_t)t * kTcKeys + warp * 16 + (lane & 3) * 2;
#pragma unroll
        for (int nb = 0; nb < 2; nb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[nb][i] = kb + nb * 8 + (i & 1) < n ? s[nb][i] * sc : -INFINITY;
        uint32_t pa[4];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            float mx =
                fmaxf(fmaxf(s[0][2 * rr], s[0][2 * rr + 1]), fmaxf(s[1][2 * rr], s[1][2 * rr + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mn = fmaxf(m[rr], mx);
            float alpha = 1.f;
            /* seed 0x02C: an empty row stays empty, no exp(-inf - -inf) */
            if (mn == -INFINITY) {
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
            l[rr] =
                l[rr] * alpha + s[0][2 * rr] + s[0][2 * rr + 1] + s[1][2 * rr] + s[1][2 * rr + 1];
            m[rr] = mn;
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                o[nb][2 * rr] *= alpha;
                o[nb][2 * rr + 1] *= alpha;
            }
        }
        pa[0] = pack2<KV>(s[0][0], s[0][1]);
        pa[1] = pack2<KV>(s[0][2], s[0][3]);
        pa[2] = pack2<KV>(s[1][0], s[1][1]);
        pa[3] = pack2<KV>(s[1][2], s[1][3]);
#pragma unroll
        for (int d0 = 0; d0 < D / 16; d0 += KG) {
            uint32_t b[KG][4];
#pragma unroll
            for (int j = 0; j < KG; j++)
                ldsm_x4_t(b[j], vt + swz<CH>(vrow, (d0 + j) * 2 + (lane >> 4)));
#pragma unroll
            for (int j = 0; j < KG; j++) {
                mma16816<KV>(o[2 * (d0 + j)], pa, b[j][0], b[j][1]);
                mma16816<KV>(o[2 * (d0 + j) + 1], pa, b[j][2], b[j][3]);
            }
        }
        /* tile t + ST reuses the offset slot of tile t, issued long ago */
        if (pre && lane < 16 && t + ST < ntiles) {
            rowoff[st * kTcKeys + wrow0 + lane] = nxt;
            nxt = nxt2;
        }
        __syncwarp(); /* every lane's reads of stage st precede its refill */
        st = st + 1 == ST ? 0 : st + 1;
        sn = sn + 1 == ST ? 0 : sn + 1;
    }
    cp_async_wait<0>();
    __syncthreads();

    /* per-warp states -> shared memory, then a fixed-order merge of the
     * four warps with the state.h algebra */
    float *red_o = reinterpret_cast<float *>(smem); /* [4][16][D] */
    float *red_m = red_o + 4 * 16 * D;              /* [4][16] */
    float *red_l = red_m + 64;
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
        l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
        const int row = (lane >> 2) + rr * 8;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            float2 w = make_float2(o[nb][2 * rr], o[nb][2 * rr + 1]);
            *reinterpret_cast<float2 *>(red_o + (warp * 16 + row) * D + nb * 8 + (lane & 3) * 2) =
                w;
        }
        if ((lane & 3) == 0) {
            red_m[warp * 16 + row] = m[rr] > -INFINITY ? m[rr] * kLn2 : -INFINITY;
            red_l[warp * 16 + row] = m[rr] > -INFINITY ? l[rr] : 0.f;
        }
    }
    __syncthreads();

    constexpr int EPT = D / 8; /* lanes of one row per thread */
    const int row = tid >> 3, seg = tid & 7;
    const int hl = h0 + row;
    if (hl < g) {
        const int hq = hkv * g + hl;
        float u[EPT];
        attn_mlu_f32 stt;
        stt.m = red_m[row];
        stt.l = red_l[row];
        stt.valid = stt.l > 0.f;
#pragma unroll
        for (int i = 0; i < EPT; i++)
            u[i] = red_o[row * D + seg * EPT + i];
        for (int w = 1; w < 4; w++) {
            attn_mlu_f32 ot;
            ot.m = red_m[w * 16 + row];
            ot.l = red_l[w * 16 + row];
            ot.valid = ot.l > 0.f;
            attn_mlu_merge_f32(&stt, u, &ot, red_o + (w * 16 + row) * D + seg * EPT, EPT);
        }
        if (rq.num_slots == 1) {
            float ov[EPT], lse;
            attn_mlu_finalize_f32(&stt, u, EPT, ov, &lse);
            const size_t ooff = ((size_t)rq.qrow * p.num_qo_heads + hq) * D + seg * EPT;
#pragma unroll
            for (int i = 0; i < EPT; i++)
                attn_store_f32(p.o, p.q_dtype, ooff + i, ov[i]);
            if (p.lse && seg == 0)
                p.lse[(size_t)rq.qrow * p.num_qo_heads + hq] = lse;
        } else {
            const size_t sidx = (size_t)it.slot * p.num_qo_heads + hq;
            float *pv = p.part_vec + sidx * D + seg * EPT;
            if (p.abi == ATTN_ABI_MLU) {
#pragma unroll
                for (int i = 0; i < EPT; i++)
                    pv[i] = stt.valid ? u[i] : 0.f;
                if (seg == 0) {
                    p.part_m[sidx] = stt.valid ? stt.m : -INFINITY;
                    p.part_l[sidx] = stt.valid ? stt.l : 0.f;
                }
            } else {
                attn_lseo_f32 lo;
                float ov[EPT];
                attn_mlu_to_lseo_f32(&stt, u, EPT, &lo, ov);
#pragma unroll
                for (int i = 0; i < EPT; i++)
                    pv[i] = ov[i];
                if (seg == 0)
                    p.part_m[sidx] = lo.lse;
            }
        }
    }
    if (rq.num_slots == 1 || !p.merge_counters)
        return; /* direct path, or the reducer kernel folds the slots */

    /* Fused reducer: the last of the request's num_slots CTAs for this
     * (K/V head, head chunk) folds the slots.  Which CTA is last varies;
     * the fold does not: merge_fold reads the slots in slot order, so the
     * result is bit-identical to the reducer kernel's. */
    __shared__ int s_last;
    __threadfence(); /* this CTA's slot is visible device-wide before it counts */
    __syncthreads();
    if (tid == 0) {
        int *cnt =
            p.merge_counters + ((size_t)it.req * p.num_kv_heads + hkv) * gridDim.z + blockIdx.z;
        const int prev = atomicAdd(cnt, 1);
        s_last = prev == rq.num_slots - 1;
        if (s_last)
            *cnt = 0; /* every slot has arrived: ready for the next launch */
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    const int heads = min(16, g - h0);
    constexpr int UPH = D / kMergeLanes; /* fold units per head */
    for (int u = tid; u < heads * UPH; u += kTcThreads)
        merge_fold<D>(p, rq, hkv * g + h0 + u / UPH, (u % UPH) * kMergeLanes);
}

/* Reducer: one CTA per (request, 4 query heads); each thread folds 4 lanes
 * of one head (merge_fold).  Launched only when the producer does not fold
 * (CUDA-core producer, or no merge counters). */
template <int D> __global__ void attn_decode_merge(attn_cuda_decode_params p)
{
    const int b = blockIdx.x;
    if (b >= p.counts->num_requests)
        return;
    const attn_cuda_req rq = p.reqs[b];
    if (rq.num_slots <= 1)
        return; /* the producer wrote it directly */
    const int hq = blockIdx.y * kMergeHeads + threadIdx.y;
    if (hq >= (int)p.num_qo_heads)
        return;
    merge_fold<D>(p, rq, hq, threadIdx.x * kMergeLanes);
}

/* Append (seed 0x08H): swap one new row per (row, kv head) into its page
 * slot, keeping the old bytes so a failed or uncommitted run restores them. */
__global__ void attn_append_rows(uint4 *k, uint4 *v, const int64_t *row_off, int num_kv_heads,
                                 int vecs, int elems_per_vec, int64_t head_stride_vecs,
                                 const uint4 *nk, const uint4 *nv, uint4 *sk, uint4 *sv,
                                 int restore)
{
    const int r = blockIdx.x, h = blockIdx.y, c = threadIdx.x;
    if (c >= vecs)
        return;
    const int64_t dst = row_off[r] / elems_per_vec + h * head_stride_vecs + c;
    const int64_t src = ((int64_t)r * num_kv_heads + h) * vecs + c;
    if (restore) {
        k[dst] = sk[src];
        v[dst] = sv[src];
    } else {
        sk[src] = k[dst];
        sv[src] = v[dst];
        k[dst] = nk[src];
        v[dst] = nv[src];
    }
}

typedef void (*producer_fn)(attn_cuda_decode_params);
typedef void (*merge_fn)(attn_cuda_decode_params);

struct producer_entry {
    uint32_t d;
    attn_dtype kv;
    bool tc;
    producer_fn fn;
    const char *symbol;
    uint32_t tc_smem;
};

#define ATTN__PRODUCERS(D, T, NAME)                                                                \
    {D, ATTN_##NAME, false, attn_decode_producer<D, T>, "attn_decode_producer<" #D "," #NAME ">",  \
     0},                                                                                           \
        {D,                                                                                        \
         ATTN_##NAME,                                                                              \
         true,                                                                                     \
         attn_decode_producer_tc<D, T>,                                                            \
         "attn_decode_producer_tc<" #D "," #NAME ">",                                              \
         (uint32_t)tc_cfg<D>::SMEM},

/* The only instantiations: head dims 64/128/256 x {bf16, fp16} x {tensor
 * core, CUDA core}; page size, layout, group size, q dtype and ABI are
 * run-time parameters. */
const producer_entry kProducers[] = {
    ATTN__PRODUCERS(64, __nv_bfloat16, BF16) ATTN__PRODUCERS(128, __nv_bfloat16, BF16)
        ATTN__PRODUCERS(256, __nv_bfloat16, BF16) ATTN__PRODUCERS(64, __half, FP16)
            ATTN__PRODUCERS(128, __half, FP16) ATTN__PRODUCERS(256, __half, FP16)};

constexpr int kNumProducers = sizeof(kProducers) / sizeof(kProducers[0]);

/* Raise the dynamic shared-memory limit once per kernel, so later launches
 * (inside a CUDA graph capture too) make no attribute call. */
int raise_smem_once(const producer_entry *e, uint32_t bytes)
{
    static uint32_t done[kNumProducers];
    const int idx = (int)(e - kProducers);
    if (done[idx] >= bytes)
        return 0;
    if (cudaFuncSetAttribute((const void *)e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bytes) != cudaSuccess)
        return ATTN_E_CUDA;
    done[idx] = bytes;
    return 0;
}

const producer_entry *find_producer(uint32_t d, attn_dtype kv, bool simt)
{
    for (const producer_entry &e : kProducers)
        if (e.d == d && e.kv == kv && e.tc == !simt)
            return &e;
    return nullptr;
}

merge_fn find_merge(uint32_t d, const char **sym)
{
    switch (d) {
    case 64:
        *sym = "attn_decode_merge<64>";
        return attn_decode_merge<64>;
    case 128:
        *sym = "attn_decode_merge<128>";
        return attn_decode_merge<128>;
    case 256:
        *sym = "attn_decode_merge<256>";
        return attn_decode_merge<256>;
    }
    return nullptr;
}

/* Block shape, grid.z and shared memory of a producer for group size g. */
void producer_shape(const producer_entry *e, uint32_t group, attn_cuda_launch_shape *s)
{
    if (e->tc) {
        s->bdx = kTcThreads;
        s->bdy = s->bdz = 1;
        s->head_chunks = (group + 15) / 16; /* 16 heads are the M of one mma */
        s->smem_bytes = e->tc_smem;
        return;
    }
    attn_cuda_decode_shape(e->d, group, s);
}

} // namespace

extern "C" void attn_cuda_decode_shape(uint32_t head_dim, uint32_t group, attn_cuda_launch_shape *s)
{
    const uint32_t bdx = head_dim / kVec;
    uint32_t bdy = group;
    if (bdx * bdy > (uint32_t)kMaxThreads)
        bdy = kMaxThreads / bdx; /* more heads than one CTA holds: head chunks */
    uint32_t bdz = 1;
    while (bdx * bdy * bdz < (uint32_t)kMinThreads)
        bdz++;
    s->bdx = bdx;
    s->bdy = bdy;
    s->bdz = bdz;
    s->head_chunks = (group + bdy - 1) / bdy;
    uint32_t pipe = 2u * kStages * kTileBytes;
    uint32_t red = (bdz * bdy * (head_dim + 2)) * 4u;
    s->smem_bytes = pipe > red ? pipe : red;
}

static int g_force_simt = -1;

static bool use_simt(const attn_cuda_decode_params *p)
{
    if (g_force_simt < 0) {
        const char *e = getenv("ATTN_CUDA_SIMT");
        g_force_simt = e && *e == '1';
    }
    return p->simt || g_force_simt == 1;
}

static int g_fused_merge = -1; /* -1 = not read yet */

/* The tensor-core producer folds split requests itself (last CTA per
 * request / K/V head / head chunk) when the caller gave merge counters and
 * the fused reducer is on (ATTN_CUDA_FUSED_MERGE=1 or
 * attn_cuda_decode_set_fused_merge(1)).  Off by default: it measured within
 * 0.5% of the reducer kernel (geomean over the benchmark shapes, H200), and
 * a separate reducer launch keeps the merge observable as its own kernel in
 * a trace (seed 0x0BF). */
static bool fused_merge(const attn_cuda_decode_params *p)
{
    if (g_fused_merge < 0) {
        const char *e = getenv("ATTN_CUDA_FUSED_MERGE");
        g_fused_merge = e && *e == '1' ? 1 : 0;
    }
    if (g_fused_merge != 1 || p->merge_counters == nullptr || use_simt(p) || p->num_kv_heads == 0)
        return false;
    /* only where one round of 128 threads folds every lane of the chunk's
     * heads (g <= 4 at d = 128): more rounds serialize L2 round trips in
     * the last CTA, and the reducer kernel is faster (group 16: measured) */
    const uint32_t g = p->num_qo_heads / p->num_kv_heads, heads = g < 16 ? g : 16;
    return heads * (p->head_dim / kMergeLanes) <= (uint32_t)kTcThreads;
}

extern "C" void attn_cuda_decode_set_fused_merge(int on)
{
    g_fused_merge = on ? 1 : 0;
}

extern "C" int attn_cuda_decode_occupancy(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group)
{
    attn_cuda_decode_params p;
    memset(&p, 0, sizeof p);
    const producer_entry *e = find_producer(head_dim, kv_dtype, use_simt(&p));
    if (!e || group == 0)
        return 0;
    attn_cuda_launch_shape sh;
    producer_shape(e, group, &sh);
    if (raise_smem_once(e, sh.smem_bytes) != 0)
        return 0;
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, (const void *)e->fn, (int)(sh.bdx * sh.bdy * sh.bdz), sh.smem_bytes) != cudaSuccess)
        return 0;
    return n;
}

extern "C" uint32_t attn_cuda_decode_head_chunks(uint32_t head_dim, attn_dtype kv_dtype,
                                                 uint32_t group)
{
    attn_cuda_decode_params p;
    memset(&p, 0, sizeof p);
    const producer_entry *e = find_producer(head_dim, kv_dtype, use_simt(&p));
    if (!e)
        return 1;
    attn_cuda_launch_shape sh;
    producer_shape(e, group, &sh);
    return sh.head_chunks;
}

extern "C" int attn_cuda_decode_symbols(const attn_cuda_decode_params *p, const char **producer,
                                        const char **reducer)
{
    const producer_entry *e = find_producer(p->head_dim, p->kv_dtype, use_simt(p));
    const char *ms = nullptr;
    find_merge(p->head_dim, &ms);
    *producer = e ? e->symbol : nullptr;
    *reducer = (p->any_split || p->force_merge) && !fused_merge(p) ? ms : nullptr;
    return (e ? 1 : 0) + (*reducer ? 1 : 0);
}

extern "C" int attn_cuda_decode_launch(const attn_cuda_decode_params *p, void *stream)
{
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const producer_entry *e = find_producer(p->head_dim, p->kv_dtype, use_simt(p));
    const char *ms = nullptr;
    merge_fn mf = find_merge(p->head_dim, &ms);
    if (!e || !mf)
        return ATTN_E_SHAPE;
    if (p->num_kv_heads == 0 || p->num_qo_heads % p->num_kv_heads)
        return ATTN_E_SHAPE;
    attn_cuda_launch_shape sh;
    producer_shape(e, p->num_qo_heads / p->num_kv_heads, &sh);
    if (raise_smem_once(e, sh.smem_bytes) != 0)
        return ATTN_E_CUDA;
    if (p->item_capacity > 0) {
        if (p->heads_fast && p->item_capacity > 65535u)
            return ATTN_E_CAPACITY; /* grid.y limit */
        dim3 grid = p->heads_fast ? dim3(p->num_kv_heads, p->item_capacity, sh.head_chunks)
                                  : dim3(p->item_capacity, p->num_kv_heads, sh.head_chunks);
        dim3 block(sh.bdx, sh.bdy, sh.bdz);
        attn_cuda_decode_params pp = *p;
        if (!fused_merge(p))
            pp.merge_counters = nullptr; /* the producer then never counts nor folds */
        e->fn<<<grid, block, sh.smem_bytes, st>>>(pp);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    if ((p->any_split || p->force_merge) && p->request_capacity > 0 && !fused_merge(p)) {
        dim3 grid(p->request_capacity, (p->num_qo_heads + kMergeHeads - 1) / kMergeHeads);
        dim3 block(p->head_dim / kMergeLanes, kMergeHeads);
        attn_cuda_decode_params pp = *p;
        pp.merge_counters = nullptr;
        mf<<<grid, block, 0, st>>>(pp);
        if (cudaGetLastError() != cudaSuccess)
            return ATTN_E_CUDA;
    }
    return 0;
}

extern "C" int attn_cuda_append_launch(void *k, void *v, const int64_t *row_off, uint32_t rows,
                                       uint32_t num_kv_heads, uint32_t head_dim,
                                       int64_t head_stride, attn_dtype kv_dtype, const void *new_k,
                                       const void *new_v, void *save_k, void *save_v, int restore,
                                       void *stream)
{
    const size_t es = attn_dtype_size(kv_dtype);
    if (es == 0 || (head_dim * es) % 16 || (head_stride * (int64_t)es) % 16)
        return ATTN_E_SHAPE;
    if (rows == 0)
        return 0;
    const int vecs = (int)(head_dim * es / 16);
    dim3 grid(rows, num_kv_heads);
    attn_append_rows<<<grid, vecs, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<uint4 *>(k), static_cast<uint4 *>(v), row_off, (int)num_kv_heads, vecs,
        (int)(16 / es), head_stride * (int64_t)es / 16, static_cast<const uint4 *>(new_k),
        static_cast<const uint4 *>(new_v), static_cast<uint4 *>(save_k),
        static_cast<uint4 *>(save_v), restore);
    return cudaGetLastError() == cudaSuccess ? 0 : ATTN_E_CUDA;
}
