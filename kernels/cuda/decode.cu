/* The CUDA paged split-KV decode engine: producers, reducer and append.
 *
 * Producer (seed 0x03C, issue 4): one CTA per (work item, K/V head, head
 * chunk).  It serves every query head of the GQA group, so each K/V byte is
 * read from HBM once.  K and V tiles stream through a cp.async pipeline of
 * 16-byte vectors; page ids are looked up once per row while the tile is
 * issued, several stages ahead of its use.  Scores accumulate in fp32.
 * Masked keys never reach the kernel: the host turns the decode mask into
 * at most two visible key ranges per request, and the producer walks only
 * their intersection with its item (seed 0x05E, 0x06F; paged.cuh).
 *
 * Both producers are the same four steps per tile (QK, online softmax
 * update, PV) and one epilogue (merge the CTA's partial states with the
 * state.h algebra, then state_io.cuh writes O/LSE or a workspace slot).  A
 * request with one slot finalizes in the producer (direct path); otherwise
 * the reducer (or, fused, the producer's last CTA) folds the request's
 * slots in slot order (seed 0x02C, 0x03I).
 *
 * Non-finite inputs: scores are maximised with max.NaN, so a NaN score
 * makes m NaN instead of being dropped by fmaxf, and every partial state is
 * decoded with the one emptiness rule of state.h (m == -inf), never with
 * l > 0 (a NaN l compares false and used to pass for an empty split: issue 8).
 *
 * Copy-warp producers (issue 13, round 2): the same compute warps, fed by
 * extra warps through mbarrier stages instead of copying themselves:
 * producer_tc_bulk (1, 2 or 4 warps of cp.async.bulk row copies) and
 * producer_tc_tmap (one warp of tensor-map page boxes);
 * kernels/common/decode_path.h chooses among the producers per launch.
 *
 * Every kernel lives in namespace attn::decode, so traced symbols read
 * attn::decode::producer_tc<...> (docs/cuda.md lists them).
 */
#include <cuda.h> /* CUtensorMap (the encoder comes through the runtime) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn/error.h"
#include "kernels/common/decode_path.h"
#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "kernels/cuda/barrier.cuh"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/paged.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/state_io.cuh"
#include "kernels/cuda/decode/device.cuh"

namespace attn
{
namespace decode
{

/* The dynamic shared memory of every kernel in this file, on a 128-byte
 * line.  The fused fold's static flag (16 bytes) precedes it; unaligned, the
 * area started 16 bytes into a line, each 32-byte sector a 16-byte cp.async
 * brought in landed across two shared-memory sectors and was requested from
 * L2 twice (ncu: 32 L2 sectors per copy where 16 are ideal; aligned, page
 * size 1 ran 9 % faster and d = 64 5 %, docs/cuda.md issue 13 round 7).
 * tests/lint/test_decode_smem_align.py checks it from ptxas -v. */
extern __shared__ __align__(128) uint4 smem[];

/* ==== CUDA-core producer ===================================================
 * Each thread (tx, ty, tz) owns 8 lanes of head ty and the rows of row group
 * tz; a tile of kTileBytes of K (and of V) per stage, kStages deep, copied
 * by the whole CTA; kChunk rows per online-softmax step. */

namespace simt
{

constexpr int kVec = 8;          /* 2-byte elements per 16-byte vector */
constexpr int kTileBytes = 8192; /* K bytes (and V bytes) of one pipeline stage */
constexpr int kTileVecs = kTileBytes / 16;
constexpr int kStages = 4;
constexpr int kChunk = 4;        /* rows per online-softmax step */
constexpr int kMinThreads = 128; /* so a tile needs at most 4 vectors per thread */
constexpr int kMaxThreads = 256;
constexpr int kLoadsPerThread = kTileVecs / kMinThreads;

/* Running state of (head ty, row group tz, lanes tx) in the base-2 frame. */
struct row_state {
    float m, l, u[kVec];
};

/* Issue tile `t` into stage buffers (ks, vs): each thread copies up to 4
 * vectors of K and of V; rows past the walk are zero-filled. */
template <int D, typename KV>
__device__ __forceinline__ void issue_tile(uint4 *ks, uint4 *vs, const KV *kbase, const KV *vbase,
                                           const paged::key_walk &w, const paged::page_table &pt,
                                           int t, int tid, int nthreads)
{
    constexpr int BDX = D / kVec;
    constexpr int TR = kTileBytes / (D * 2);
#pragma unroll
    for (int j = 0; j < kLoadsPerThread; j++) {
        const int vi = tid + j * nthreads;
        if (vi < kTileVecs) {
            const int r = vi / BDX, c = vi % BDX;
            const int64_t v = (int64_t)t * TR + r;
            const bool ok = v < w.n;
            const int64_t off = ok ? pt.row_offset(w.key(v)) + c * kVec : 0;
            ptx::cp_async_cg_zfill(ks + vi, kbase + off, ok);
            ptx::cp_async_cg_zfill(vs + vi, vbase + off, ok);
        }
    }
}

/* QK: the kChunk scores of rows [c0, c0 + kChunk) of a tile for this
 * thread's head (q pre-scaled into the base-2 frame); rows at or past
 * `valid` are masked (-inf) before max and sum (seed 0x05C). */
template <int D, typename KV>
__device__ __forceinline__ void qk_chunk(float (&s)[kChunk], const float (&q)[kVec],
                                         const uint4 *kt, int c0, int tx, int64_t valid,
                                         unsigned tid)
{
    constexpr int BDX = D / kVec;
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
        float kf[kVec];
        ptx::widen8<KV>(kt[(c0 + j) * BDX + tx], kf);
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < kVec; i++)
            dot = fmaf(q[i], kf[i], dot);
        dot = ptx::group_sum<BDX>(dot, tid);
        s[j] = c0 + j < valid ? dot : -INFINITY;
    }
}

/* Online softmax update and PV for one chunk: rescale the state to the new
 * max, add p_j and p_j v_j.  An all-masked chunk on an empty state stays
 * empty before any exponential is evaluated (seed 0x02C); a NaN score makes
 * m NaN (max.NaN), so it reaches the output. */
template <int D, typename KV>
__device__ __forceinline__ void update_pv(row_state &r, const float (&s)[kChunk], const uint4 *vt,
                                          int c0, int tx)
{
    constexpr int BDX = D / kVec;
    float mc = s[0];
#pragma unroll
    for (int j = 1; j < kChunk; j++)
        mc = ptx::max_nan(mc, s[j]);
    const float mn = ptx::max_nan(r.m, mc);
    if (attn_state_empty_f32(mn))
        return;
    const float alpha = exp2f(r.m - mn); /* m = -inf gives 0 */
    r.l *= alpha;
#pragma unroll
    for (int i = 0; i < kVec; i++)
        r.u[i] *= alpha;
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
        const float pj = exp2f(s[j] - mn);
        float vf[kVec];
        ptx::widen8<KV>(vt[(c0 + j) * BDX + tx], vf);
        r.l += pj;
#pragma unroll
        for (int i = 0; i < kVec; i++)
            r.u[i] = fmaf(pj, vf[i], r.u[i]);
    }
    r.m = mn;
}

/* Epilogue: merge the row groups of each head through shared memory with
 * the state.h merge (fixed order z = 0, 1, ...), then write the head's
 * lanes (state_io).  Called by every thread after the last tile. */
template <int D>
__device__ __forceinline__ void epilogue(const attn_cuda_decode_params &p, const cta_work &w,
                                         row_state &r, float *red, int hq, bool head_ok)
{
    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int bdy = blockDim.y, bdz = blockDim.z;
    attn_mlu_f32 st = state_io::from_ml(r.m, r.l);
    st.m = st.valid ? r.m * kLn2 : -INFINITY;   /* back to the natural frame */
    float *red_u = red;                         /* [bdz][bdy][D] */
    float *red_m = red + (size_t)bdz * bdy * D; /* [bdz][bdy] */
    float *red_l = red_m + bdz * bdy;
    if (tz > 0) {
#pragma unroll
        for (int i = 0; i < kVec; i++)
            red_u[((size_t)tz * bdy + ty) * D + tx * kVec + i] = r.u[i];
        if (tx == 0) {
            red_m[tz * bdy + ty] = st.m;
            red_l[tz * bdy + ty] = st.valid ? r.l : 0.f;
        }
    }
    __syncthreads();
    if (tz != 0 || !head_ok)
        return;
    for (int z = 1; z < bdz; z++) {
        const attn_mlu_f32 o = state_io::from_ml(red_m[z * bdy + ty], red_l[z * bdy + ty]);
        attn_mlu_merge_f32(&st, r.u, &o, red_u + ((size_t)z * bdy + ty) * D + tx * kVec, kVec);
    }
    state_io::write<D, kVec>(sink_of(p), w.rq.num_slots == 1, w.rq.qrow, w.it.slot, hq, tx * kVec,
                             st, r.u, tx == 0);
}

} // namespace simt

/* The CUDA-core producer: fp32 scores and p (the reference-precision path,
 * selected by attn_cuda_decode_params.simt). */
template <int D, typename KV>
__global__ void __launch_bounds__(simt::kMaxThreads) producer_simt(attn_cuda_decode_params p)
{
    const pdl_join join{p};
    using namespace simt;
    constexpr int BDX = D / kVec;
    constexpr int TR = kTileBytes / (D * 2); /* rows per tile */
    uint4 *ks = smem;
    uint4 *vs = smem + kStages * kTileVecs;

    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int bdy = blockDim.y, bdz = blockDim.z;
    const int nthreads = BDX * bdy * bdz;
    const int tid = tx + BDX * (ty + bdy * tz);

    const cta_work w = cta_work_of(p);
    if (!w.live)
        return;
    const int hloc = blockIdx.z * bdy + ty;
    const bool head_ok = hloc < w.g;
    const int hq = w.hkv * w.g + (head_ok ? hloc : 0);
    const paged::key_walk walk = walk_of(w);
    const paged::page_table pt = table_of(p, w);
    const int ntiles = (int)((walk.n + TR - 1) / TR);
    const KV *kbase = static_cast<const KV *>(p.k) + (int64_t)w.hkv * p.head_stride;
    const KV *vbase = static_cast<const KV *>(p.v) + (int64_t)w.hkv * p.head_stride;

    /* q of head hq, lanes tx*8.., pre-scaled into the base-2 frame. */
    float q[kVec];
    {
        const float sc = p.sm_scale * kLog2e;
        const size_t qoff = ((size_t)w.rq.qrow * p.num_qo_heads + hq) * D + tx * kVec;
#pragma unroll
        for (int i = 0; i < kVec; i++)
            q[i] = head_ok ? attn_load_f32(p.q, p.q_dtype, qoff + i) * sc : 0.f;
    }

#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        if (s < ntiles)
            issue_tile<D, KV>(ks + s * kTileVecs, vs + s * kTileVecs, kbase, vbase, walk, pt, s,
                              tid, nthreads);
        ptx::cp_async_commit();
    }

    row_state r;
    r.m = -INFINITY;
    r.l = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; i++)
        r.u[i] = 0.f;

    for (int t = 0; t < ntiles; t++) {
        const int st = t % kStages;
        if (t + kStages - 1 < ntiles) {
            const int sn = (t + kStages - 1) % kStages;
            issue_tile<D, KV>(ks + sn * kTileVecs, vs + sn * kTileVecs, kbase, vbase, walk, pt,
                              t + kStages - 1, tid, nthreads);
        }
        ptx::cp_async_commit();
        ptx::cp_async_wait<kStages - 1>();
        __syncthreads();

        const uint4 *kt = ks + st * kTileVecs;
        const uint4 *vt = vs + st * kTileVecs;
        const int64_t valid = walk.n - (int64_t)t * TR; /* rows of this tile inside the walk */
        for (int c0 = tz * kChunk; c0 < TR; c0 += bdz * kChunk) {
            float s[kChunk];
            qk_chunk<D, KV>(s, q, kt, c0, tx, valid, (unsigned)tid);
            update_pv<D, KV>(r, s, vt, c0, tx);
        }
        __syncthreads(); /* the stage is refilled next iteration */
    }
    ptx::cp_async_wait<0>();
    __syncthreads();
    epilogue<D>(p, w, r, reinterpret_cast<float *>(smem), hq, head_ok);
}

/* The tensor-core producer (default).  PRE: page-table row prefetch
 * (attn_cuda_decode_params.row_prefetch); QLO: q's dtype is not the cache
 * dtype, so q enters as hi + lo halves; KR: the keys as the mma's M rows
 * (groups of at most 8 heads, d <= 128, not with QLO).  All are template
 * parameters so the main loop carries no run-time flag. */
template <int D, typename KV, bool PRE, bool QLO, bool KR = false>
__global__ void __launch_bounds__(tc::kThreads) producer_tc(attn_cuda_decode_params p)
{
    const pdl_join join{p};
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TV = C::TILE_VECS;
    const int ST = p.stages ? (int)p.stages : C::STAGES; /* range checked by the launch */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

    const cta_work w = cta_work_of(p);
    if (!w.live)
        return;
    const int h0 = blockIdx.z * 16; /* first group head of this chunk */

    tc::warp_pipe<D, KV, PRE> pipe;
    pipe.ks = smem;
    pipe.vs = smem + ST * TV;
    uint4 *qh = smem + 2 * ST * TV;
    uint4 *ql = qh + 16 * CH;
    pipe.rowoff = reinterpret_cast<int64_t *>(ql + 16 * CH);
    pipe.kbase = static_cast<const KV *>(p.k) + (int64_t)w.hkv * p.head_stride;
    pipe.vbase = static_cast<const KV *>(p.v) + (int64_t)w.hkv * p.head_stride;
    pipe.walk = walk_of(w);
    pipe.pt = table_of(p, w);
    pipe.lane = lane;
    pipe.wrow0 = warp * 16;
    pipe.stages = ST;
    const int ntiles = (int)((pipe.walk.n + tc::kKeys - 1) / tc::kKeys);
    pipe.prologue(ntiles);

    tc::stage_q<D, KV, QLO>(p, w, h0, qh, ql);
    __syncthreads(); /* Q is read by every warp; the only barrier before the epilogue */

    const int krow = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
    const int vrow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const float sc = p.sm_scale * kLog2e;
    /* tile t's stages between the warp's copies of t and its refill */
    auto walk_tiles = [&](auto &&tile) {
        int st = 0, sn = ST - 1; /* stages of tile t and of tile t + ST - 1 */
        for (int t = 0; t < ntiles; t++) {
            pipe.acquire(t, sn, ntiles);
            tile(t, pipe.ks + st * TV, pipe.vs + st * TV);
            pipe.release(t, st, ntiles);
            st = st + 1 == ST ? 0 : st + 1;
            sn = sn + 1 == ST ? 0 : sn + 1;
        }
        ptx::cp_async_wait<0>();
        __syncthreads();
        pdl_main_loop_done(p);
    };
    if constexpr (KR) { /* keys as the M rows: g <= 8 (decode_path.h) */
        static_assert(!QLO, "keys as rows: q in the cache dtype");
        uint32_t qb[C::KS][2];
        load_qb<D>(qb, qh);
        float o[D / 16][4];
#pragma unroll
        for (int b = 0; b < D / 16; b++)
            o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        walk_tiles([&](int t, const uint4 *kt, const uint4 *vt) {
            float s[4];
            uint32_t pb[2];
            tc::qk_tile_kr<D, KV>(s, qb, kt, lane, krow);
            tc::softmax_update_kr<D / 16, KV>(
                s, m, l, o, pb, sc, (int64_t)t * tc::kKeys + warp * 16 + (lane >> 2), pipe.walk.n);
            tc::pv_tile_kr<D, KV>(o, pb, vt, lane, vrow);
        });
        tc::epilogue_kr<D>(p, w, h0, o, m, l, reinterpret_cast<float *>(smem));
    } else {
        const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
        uint32_t qa[C::QREG ? C::KS : 1][4];
        if (C::QREG) {
#pragma unroll
            for (int kk = 0; kk < (C::QREG ? C::KS : 0); kk++)
                ptx::ldmatrix_x4(qa[kk], qh + ptx::swizzle<CH>(qrow, kk * 2 + (lane >> 4)));
        }
        float o[C::NB][4];
#pragma unroll
        for (int nb = 0; nb < C::NB; nb++)
            o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        walk_tiles([&](int t, const uint4 *kt, const uint4 *vt) {
            float s[2][4];
            uint32_t pa[4];
            tc::qk_tile<D, KV, QLO>(s, qa, qh, ql, kt, lane, qrow, krow);
            tc::softmax_update<C::NB, KV>(s, m, l, o, pa, sc,
                                          (int64_t)t * tc::kKeys + warp * 16 + (lane & 3) * 2,
                                          pipe.walk.n);
            tc::pv_tile<D, KV>(o, pa, vt, lane, vrow);
        });
        tc::epilogue<D>(p, w, h0, o, m, l, reinterpret_cast<float *>(smem));
    }
    if (w.rq.num_slots == 1 || !p.merge_counters)
        return; /* direct path, or the reducer kernel folds the slots */
    tc::fused_fold<D, false, tc::kFoldStaged<D>>(p, w, h0, (int)blockIdx.z, (int)gridDim.z, smem,
                                                 C::reuse_bytes(ST, TV));
}

/* The compute warps of producer_tc_bulk and producer_tc_tmap: the tiles
 * (consume_tiles), then the epilogue and the fused fold among themselves
 * (named barrier).  `base`: the stages' start, reused by the epilogue. */
template <int D, typename KV, bool QLO, int RS, typename Pipe, bool KR = false>
__device__ __forceinline__ void bulk_compute(const attn_cuda_decode_params &p, const cta_work &w,
                                             const Pipe &pipe, const uint4 *qh, const uint4 *ql,
                                             const paged::key_walk &walk, int ntiles, int h0,
                                             uint4 *base, uint32_t stage_bytes)
{
    using C = tc::cfg<D>;
    tc::ring rg;
    if constexpr (KR) { /* keys as the M rows: g <= 8 (decode_path.h) */
        static_assert(!QLO, "keys as rows: q in the cache dtype");
        uint32_t qb[C::KS][2];
        load_qb<D>(qb, qh);
        float o[D / 16][4];
        float m[2], l[2];
        consume_tiles_kr<D, KV, RS>(p, pipe, qb, walk, ntiles, o, m, l, rg);
        probe_phase(p, 0);
        tc::compute_sync<true>(); /* as below */
        pdl_main_loop_done(p);
        tc::epilogue_kr<D, true>(p, w, h0, o, m, l, reinterpret_cast<float *>(base));
    } else {
        uint32_t qa[C::QREG ? C::KS : 1][4];
        load_qa<D>(qa, qh);
        float o[C::NB][4];
        float m[2], l[2];
        consume_tiles<D, KV, QLO, RS>(p, pipe, qa, qh, ql, walk, ntiles, o, m, l, rg);
        probe_phase(p, 0);
        /* every copy landed (full[s] of the last tiles) and was read, so the
         * epilogue may reuse the stages; the copy warps have no state to
         * merge (and have exited, which counts as their trigger) */
        tc::compute_sync<true>();
        pdl_main_loop_done(p);
        tc::epilogue<D, true>(p, w, h0, o, m, l, reinterpret_cast<float *>(base));
    }
    if (w.rq.num_slots == 1 || !p.merge_counters)
        return; /* direct path, or the reducer kernel folds the slots */
    tc::fused_fold<D, true, tc::kFoldStaged<D>>(p, w, h0, (int)blockIdx.z, (int)gridDim.z, base,
                                                stage_bytes);
}

/* The tensor-core producer with copy warps (issue 13; decode_path.h says
 * when it runs): warps 0-3 compute exactly as producer_tc (16 keys each of
 * a 64-key tile, the same QK, online softmax, PV, epilogue and fused fold),
 * warps 4 .. 3 + NP only copy (tc::bulk_pipe) and exit when their last
 * copy is issued, so the compute warps issue no copy or address
 * instruction and the copies move whole rows. */
template <int D, typename KV, bool QLO, int NP, bool KR>
__device__ __forceinline__ void bulk_body(const attn_cuda_decode_params &p)
{
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TP = C::PAD_TILE_VECS;
    const int ST = p.stages ? (int)p.stages : C::BULK_STAGES; /* range checked by the launch */
    const int tid = threadIdx.x, warp = tid >> 5;

    const cta_work w = cta_work_of(p);
    if (!w.live)
        return;
    const int h0 = blockIdx.z * 16; /* first group head of this chunk */

    tc::bulk_pipe<D, KV, NP> pipe;
    pipe.ks = smem;
    pipe.vs = smem + ST * TP;
    uint4 *qh = smem + 2 * ST * TP;
    uint4 *ql = qh + 16 * CH;
    pipe.full =
        reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(smem) + C::bulk_bar_offset(ST));
    pipe.empty = pipe.full + ST;
    pipe.stages = ST;
    const paged::key_walk walk = walk_of(w);
    const int ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
    if (tid == 0)
        pipe.init();
    __syncthreads(); /* barriers initialised; the last CTA-wide barrier */

    if (warp >= 4) { /* copy warps: their copies complete on full[s], nothing waits for them */
        const KV *kbase = static_cast<const KV *>(p.k) + (int64_t)w.hkv * p.head_stride;
        const KV *vbase = static_cast<const KV *>(p.v) + (int64_t)w.hkv * p.head_stride;
        pipe.produce(kbase, vbase, walk, table_of(p, w), ntiles, tid - tc::kThreads);
    } else {
        /* Q is staged while the first tiles are in flight: its loads'
         * latency no longer delays the copy warps' first copy */
        tc::stage_q<D, KV, QLO>(p, w, h0, qh, ql);
        tc::compute_sync<true>();
        bulk_compute<D, KV, QLO, C::ROW_VECS, tc::bulk_pipe<D, KV, NP>, KR>(
            p, w, pipe, qh, ql, walk, ntiles, h0, smem, C::reuse_bytes(ST, TP));
    }
}

/* KR: the compute warps take their keys as the mma's M rows
 * (consume_tiles_kr), for groups of at most 8 heads (d 256 where the
 * tensor-map producer does not serve it, decode_path.h). */
template <int D, typename KV, bool QLO, int NP, bool KR = false>
__global__ void __launch_bounds__(tc::kThreads + 32 * NP, (tc::bulk_regs<D, QLO, NP>::MIN_CTAS))
    producer_tc_bulk(attn_cuda_decode_params p)
{
    const pdl_join join{p};
    bulk_body<D, KV, QLO, NP, KR>(p);
}

/* The tensor-core producer with tensor-map copy warps (bulk =
 * ATTN_CUDA_BULK_TMAP; decode_path.h says when it runs): the compute warps
 * of producer_tc_bulk over the tensor map's swizzled stages, which warps 4
 * and 5 fill a page-run box at a time, alternate tiles each
 * (tc::tmap_pipe).  Two copy warps, not one: one warp's box issues and
 * page-table loads capped a CTA at one 64-key tile per ~1.7 us whatever
 * the pipeline depth, ~38 GB/s per SM at 2 CTAs per SM, which only the
 * whole machine turns into HBM's rate; two read ~60 GB/s per SM on 32 SMs
 * (MPS), so a part of the SMs saturates HBM and partial waves cost less
 * (docs/cuda.md, issue 13 round 9).  Four spill at d 128 (128 registers).
 * KR: the compute warps take this warp's keys as the M rows of the mma
 * (consume_tiles_kr), for groups of at most 8 heads. */
constexpr int kTmapCopyWarps = 2;
static_assert(kTmapCopyWarps <= tc::kMinStages, "tmap_pipe::produce: copy warps <= stages");
template <int D, typename KV, bool QLO, bool KR = false>
__global__ void __launch_bounds__(tc::kThreads + 32 * kTmapCopyWarps,
                                  (tc::bulk_regs<D, QLO, 1>::MIN_CTAS))
    producer_tc_tmap(const __grid_constant__ tmap_args a)
{
    const pdl_join join{a.p};
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TV = C::TILE_VECS;
    const attn_cuda_decode_params &p = a.p;
    const int ST = p.stages ? (int)p.stages : C::TMAP_STAGES; /* range checked by the launch */
    uint4 *base = ptx::align_1024(smem);
    const int tid = threadIdx.x, warp = tid >> 5;
    if (tid == tc::kThreads) { /* the copy warp: its four descriptors, before the first copy */
#pragma unroll
        for (int i = 0; i < 4; i++)
            ptx::prefetch_tensormap(&a.maps[i]);
    }

    /* the overlap probe: where and when this CTA ran (NULL in production) */
    const uint32_t probe_at =
        blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * (uint32_t)blockIdx.z);
    const bool probed = p.probe != nullptr && tid == 0 && probe_at < p.probe_ctas;
    if (probed) {
        p.probe[3 * probe_at] = ptx::smid();
        p.probe[3 * probe_at + 1] = ptx::globaltimer();
    }
    const cta_work w = cta_work_of(p);
    if (!w.live)
        return;
    const int h0 = blockIdx.z * 16;

    tc::tmap_pipe<D, KV> pipe;
    pipe.ks = base;
    pipe.vs = base + ST * TV;
    uint4 *qh = base + 2 * ST * TV;
    uint4 *ql = qh + 16 * CH;
    pipe.full = reinterpret_cast<uint64_t *>(ql + 16 * CH);
    pipe.empty = pipe.full + ST;
    pipe.stages = ST;
    pipe.set_l2(p);
    const paged::key_walk walk = walk_of(w);
    const int ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
    if (tid == 0)
        pipe.init();
    __syncthreads(); /* barriers initialised; the last CTA-wide barrier */

    if (warp >= 4) {
        tc::ring rg;
        pipe.produce(a.maps, a.hnd != 0, w.hkv, walk, table_of(p, w), ntiles, tid & 31, rg,
                     warp - 4, kTmapCopyWarps);
    } else {
        tc::stage_q<D, KV, QLO>(p, w, h0, qh, ql); /* beside the first copies (bulk_body) */
        tc::compute_sync<true>();
        bulk_compute<D, KV, QLO, 0, tc::tmap_pipe<D, KV>, KR>(p, w, pipe, qh, ql, walk, ntiles, h0,
                                                              base, C::reuse_bytes(ST, TV));
    }
    if (probed)
        p.probe[3 * probe_at + 2] = ptx::globaltimer();
}

/* Shared memory of producer_tc_tmap_persist `stages` deep: the alignment,
 * the K and V stages, Q (hi only), the epilogue's merge area (epilogue_seq)
 * and the barriers. */
template <int D> struct persist_cfg {
    using C = tc::cfg<D>;
    static constexpr uint32_t Q_BYTES = 16 * D * 2;
    static constexpr uint32_t RED_BYTES = (16 * D + 2 * 64) * 4;
    __host__ __device__ static constexpr uint32_t bar_offset(int stages)
    {
        return 2 * stages * C::TILE_VECS * 16 + Q_BYTES + RED_BYTES;
    }
    static constexpr uint32_t smem(int stages)
    {
        return 1024 + bar_offset(stages) + 2 * stages * 8;
    }
};

/* One piece of producer_tc_tmap_persist on the compute warps: Q, the
 * tiles, the epilogue, the fold; `last`: the CTA's last piece. */
template <int D, typename KV>
__device__ __forceinline__ void
persist_piece(const attn_cuda_decode_params &p, const tc::tmap_pipe<D, KV> &pipe, uint4 *qh,
              float *red, int c, int X, int Y, int chunks, bool last, tc::ring &rg)
{
    using C = tc::cfg<D>;
    const int bx = c % X, by = (c / X) % Y, bz = c / (X * Y);
    const cta_work w = p.heads_fast ? work_at(p, by, bx) : work_at(p, bx, by);
    if (!w.live)
        return;
    const int h0 = bz * 16;
    const paged::key_walk walk = walk_of(w);
    const int ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
    tc::compute_sync<true>(); /* every warp holds the last piece's Q in registers */
    tc::stage_q<D, KV, false>(p, w, h0, qh, nullptr);
    tc::compute_sync<true>();
    uint32_t qa[C::KS][4];
    load_qa<D>(qa, qh);
    float o[C::NB][4], m[2], l[2];
    consume_tiles<D, KV, false, 0>(p, pipe, qa, qh, nullptr, walk, ntiles, o, m, l, rg);
    if (last)
        pdl_main_loop_done(p); /* this CTA's last piece read its last tile */
    tc::epilogue_seq<D>(p, w, h0, o, m, l, red);
    if (w.rq.num_slots > 1 && p.merge_counters)
        tc::fused_fold<D, true>(p, w, h0, bz, chunks);
}

/* The persistent tensor-map producer (issue 13 round 4; attn_cuda_decode_params.persist):
 * at most `persist` CTAs walk the pieces of the grid producer_tc_tmap would
 * launch, CTA b taking pieces b, b + gridDim.x, ... in that grid's launch
 * order (x fastest), each piece computed exactly as producer_tc_tmap
 * computes its CTA (same tiles, warp merge, slot, fused fold).  The copy
 * warp walks the same pieces and runs its ring of stages on across them, so
 * the next piece's page walk and K/V copies are in flight while the compute
 * warps finish a piece's epilogue and fold and stage its Q; one prologue
 * (barriers, descriptor prefetch, programmatic-launch wait) per CTA.  d <=
 * 128 with q in the cache dtype (Q fragments in registers). */
template <int D, typename KV>
__global__ void __launch_bounds__(tc::kThreads + 32, (tc::bulk_regs<D, false, 1>::MIN_CTAS))
    producer_tc_tmap_persist(const __grid_constant__ tmap_args a)
{
    const pdl_join join{a.p};
    using C = tc::cfg<D>;
    static_assert(C::QREG, "Q stays in registers across a piece");
    constexpr int TV = C::TILE_VECS;
    const attn_cuda_decode_params &p = a.p;
    const int ST = p.stages ? (int)p.stages : C::BULK_STAGES; /* range checked by the launch */
    uint4 *base = ptx::align_1024(smem);
    const int tid = threadIdx.x, warp = tid >> 5;
    if (tid == tc::kThreads) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            ptx::prefetch_tensormap(&a.maps[i]);
    }
    pdl_start(p);

    tc::tmap_pipe<D, KV> pipe;
    pipe.ks = base;
    pipe.vs = base + ST * TV;
    uint4 *qh = base + 2 * ST * TV;
    float *red = reinterpret_cast<float *>(qh + 16 * C::CH);
    pipe.full = reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(base) +
                                             persist_cfg<D>::bar_offset(ST));
    pipe.empty = pipe.full + ST;
    pipe.stages = ST;
    pipe.set_l2(p);
    if (tid == 0)
        pipe.init();
    __syncthreads(); /* barriers initialised; the only CTA-wide barrier */

    /* the piece grid of producer_tc_tmap: (X, Y, chunks), x fastest */
    const int g = (int)(p.num_qo_heads / p.num_kv_heads), chunks = (g + 15) / 16;
    const int X = p.heads_fast ? (int)p.num_kv_heads : (int)p.item_capacity;
    const int Y = p.heads_fast ? (int)p.item_capacity : (int)p.num_kv_heads;
    const int total = X * Y * chunks;
    tc::ring rg;
    if (warp >= 4) {
        for (int c = blockIdx.x; c < total; c += gridDim.x) {
            const int bx = c % X, by = (c / X) % Y;
            const cta_work w = p.heads_fast ? work_at(p, by, bx) : work_at(p, bx, by);
            if (!w.live)
                continue;
            const paged::key_walk walk = walk_of(w);
            const int ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
            pipe.produce(a.maps, a.hnd != 0, w.hkv, walk, table_of(p, w), ntiles, tid & 31, rg);
        }
        return;
    }
    for (int c = blockIdx.x; c < total; c += gridDim.x)
        persist_piece<D, KV>(p, pipe, qh, red, c, X, Y, chunks, c + (int)gridDim.x >= total, rg);
}

/* Reducer: one CTA per (request, 4 query heads); each thread folds 4 lanes
 * of one head (merge_fold).  Launched only when the producer does not fold
 * (CUDA-core producer, or the fused reducer off). */
template <int D> __global__ void merge(attn_cuda_decode_params p)
{
    /* programmatic launch: EARLY lets the next kernel be placed from the
     * start; LATE at exit (an early trigger would place the next producer in
     * the slots an under-filled producer grid left free: B 2 x T 2048 +9 %) */
    if (p.pdl == ATTN_CUDA_PDL_EARLY)
        ptx::griddep_launch_dependents();
    /* the plan's metadata before the wait (cta_work_of says why) */
    const int b = blockIdx.x;
    const bool live = b < p.counts->num_requests;
    const attn_cuda_req rq = live ? p.reqs[b] : attn_cuda_req{};
    if (p.pdl != ATTN_CUDA_PDL_OFF)
        ptx::griddep_wait(); /* the producers' slots (and any earlier kernel's writes) are visible
                              */
    if (!live || rq.num_slots <= 1)
        return; /* no request, or the producer wrote it directly */
    const int hq = blockIdx.y * kMergeHeads + threadIdx.y;
    if (hq >= (int)p.num_qo_heads)
        return;
    merge_fold<D>(p, rq, hq, threadIdx.x * kMergeLanes);
}

/* Append (seed 0x08H): swap one new row per (row, kv head) into its page
 * slot, keeping the old bytes so a failed or uncommitted run restores them.
 * One thread per 16-byte vector of the row. */
__global__ void append_rows(attn_cuda_append_params p)
{
    const int r = blockIdx.x, h = blockIdx.y, c = threadIdx.x;
    const int es = (int)attn_dtype_size(p.kv_dtype);
    const int vecs = (int)(p.head_dim * es / 16), elems_per_vec = 16 / es;
    /* a negative offset is a row past the step's in a graph-mode plan's
     * capacity envelope (engines/cuda/prefill_engine.c): nothing to move */
    if (c >= vecs || p.row_off[r] < 0)
        return;
    uint4 *k = static_cast<uint4 *>(p.k), *v = static_cast<uint4 *>(p.v);
    const int64_t dst = p.row_off[r] / elems_per_vec + h * (p.head_stride / elems_per_vec) + c;
    const int64_t src = ((int64_t)r * p.num_kv_heads + h) * vecs + c;
    uint4 *sk = static_cast<uint4 *>(p.save_k), *sv = static_cast<uint4 *>(p.save_v);
    if (p.restore) {
        k[dst] = sk[src];
        v[dst] = sv[src];
    } else {
        sk[src] = k[dst];
        sv[src] = v[dst];
        k[dst] = static_cast<const uint4 *>(p.new_k)[src];
        v[dst] = static_cast<const uint4 *>(p.new_v)[src];
    }
}

/* ==== host side: the kernel table and the launch glue ==================== */

typedef void (*kernel_fn)(attn_cuda_decode_params);

struct producer_entry {
    uint32_t d;
    attn_dtype kv;
    bool tc, pre, qlo; /* tensor cores; row prefetch and q hi+lo (tc only) */
    bool kr;           /* keys as the mma's M rows: groups of at most 8 heads only */
    int np;            /* bulk value of the copy-warp producers (tc only); 0: cp.async */
    kernel_fn fn;
    const char *symbol;              /* the demangled name, without return type and parameters */
    uint32_t (*tc_smem)(int stages); /* the tensor-core producer's shared memory */
    int tc_stages, tc_max_stages;    /* its default and deepest pipeline */
    void (*tmap_fn)(tmap_args);      /* the tensor-map producer (fn is then NULL) */

    /* The kernel, for the attribute and occupancy calls. */
    const void *kernel() const
    {
        return tmap_fn ? (const void *)tmap_fn : (const void *)fn;
    }
    /* Copy warps after the four compute warps. */
    int copy_warps() const
    {
        return tmap_fn ? kTmapCopyWarps : np;
    }
};

/* One table row per kernel: the dispatch key, the kernel, the symbol a
 * tracer demangles it to, and the tensor-core producer's shared memory. */
// clang-format off
#define ATTN__TC(D, T, PRE, QLO, KR)                                                               \
    {D, dtype_of<T>::value, true, PRE, QLO, KR, 0, producer_tc<D, T, PRE, QLO, KR>,                \
     "attn::decode::producer_tc<" #D ", " #T ", " #PRE ", " #QLO ", " #KR ">", tc::cfg<D>::smem,  \
     tc::cfg<D>::STAGES, tc::cfg<D>::MAX_STAGES, nullptr}
#define ATTN__TMAP(D, T, QLO, KR)                                                                  \
    {D,                                                                                            \
     dtype_of<T>::value,                                                                           \
     true,                                                                                         \
     false,                                                                                        \
     QLO,                                                                                          \
     KR,                                                                                           \
     ATTN_CUDA_BULK_TMAP,                                                                          \
     nullptr,                                                                                      \
     "attn::decode::producer_tc_tmap<" #D ", " #T ", " #QLO ", " #KR ">",                         \
     tc::cfg<D>::tmap_smem,                                                                        \
     tc::cfg<D>::TMAP_STAGES,                                                                      \
     tc::cfg<D>::BULK_MAX_STAGES,                                                                  \
     producer_tc_tmap<D, T, QLO, KR>}
#define ATTN__BULK(D, T, QLO, NP, KR)                                                              \
    {D, dtype_of<T>::value, true, false, QLO, KR, NP, producer_tc_bulk<D, T, QLO, NP, KR>,         \
     "attn::decode::producer_tc_bulk<" #D ", " #T ", " #QLO ", " #NP ", " #KR ">",                \
     tc::cfg<D>::bulk_smem, tc::cfg<D>::BULK_STAGES, tc::cfg<D>::BULK_MAX_STAGES, nullptr}
#define ATTN__SIMT(D, T)                                                                           \
    {D, dtype_of<T>::value, false, false, false, false, 0, producer_simt<D, T>,                    \
     "attn::decode::producer_simt<" #D ", " #T ">", nullptr, 0, 0, nullptr}
#define ATTN__PRODUCERS(D, T)                                                                      \
    ATTN__SIMT(D, T), ATTN__TC(D, T, false, false, false), ATTN__TC(D, T, false, true, false),     \
    ATTN__TC(D, T, true, false, false), ATTN__TC(D, T, true, true, false),                         \
    ATTN__BULK(D, T, false, 1, false)
#define ATTN__TC_KR(D, T) ATTN__TC(D, T, false, false, true), ATTN__TC(D, T, true, false, true)

/* Every producer of one K/V dtype T.  Keys as rows (KR): g <= 8, q in the
 * cache dtype, d <= 128 on the cp.async producer, every d on the tensor-map
 * producer, d = 256 on four row-copy warps; q hi + lo copy warps only at d = 256
 * (decode_path.h); two copy warps only at d = 128. */
#define ATTN__ALL(T)                                                                               \
    ATTN__PRODUCERS(64, T),                                                                        \
    ATTN__PRODUCERS(128, T),                                                                       \
    ATTN__PRODUCERS(256, T),                                                                       \
    ATTN__BULK(64, T, false, 4, false),                                                            \
    ATTN__TMAP(64, T, false, false),                                                               \
    ATTN__TMAP(128, T, false, false),                                                              \
    ATTN__TMAP(256, T, false, false),                                                              \
    ATTN__TMAP(256, T, true, false),                                                               \
    ATTN__TC_KR(64, T),                                                                            \
    ATTN__TC_KR(128, T),                                                                           \
    ATTN__TMAP(64, T, false, true),                                                                \
    ATTN__TMAP(128, T, false, true),                                                               \
    ATTN__TMAP(256, T, false, true),                                                               \
    ATTN__BULK(128, T, false, 4, false),                                                           \
    ATTN__BULK(256, T, false, 4, false),                                                           \
    ATTN__BULK(256, T, false, 4, true),                                                            \
    ATTN__BULK(256, T, true, 1, false),                                                            \
    ATTN__BULK(256, T, true, 4, false),                                                            \
    ATTN__BULK(128, T, false, 2, false)

/* The only instantiations: head dims 64/128/256 x {bf16, fp16} x {CUDA
 * core, tensor core x row prefetch x q hi+lo, copy warp (q hi+lo at d = 256
 * only)}; page size, layout, group size, q dtype and ABI are run-time
 * parameters (q's dtype only decides whether the hi + lo split runs). */
const producer_entry kProducers[] = {ATTN__ALL(__nv_bfloat16), ATTN__ALL(__half)};
#undef ATTN__ALL
#undef ATTN__PRODUCERS
#undef ATTN__TC_KR
#undef ATTN__SIMT
#undef ATTN__TC
#undef ATTN__BULK
#undef ATTN__TMAP
// clang-format on

constexpr int kNumProducers = sizeof(kProducers) / sizeof(kProducers[0]);

/* The persistent tensor-map producers (attn_cuda_decode_params.persist):
 * d = 128, q in the cache dtype; each stands in for the tensor-map entry of
 * the same key. */
struct persist_entry {
    uint32_t d;
    attn_dtype kv;
    void (*fn)(tmap_args);
    const char *symbol;
    uint32_t (*smem)(int stages);
};
#define ATTN__PERSIST(D, T)                                                                        \
    {                                                                                              \
        D, dtype_of<T>::value, producer_tc_tmap_persist<D, T>,                                     \
            "attn::decode::producer_tc_tmap_persist<" #D ", " #T ">", persist_cfg<D>::smem         \
    }
const persist_entry kPersist[] = {
    ATTN__PERSIST(128, __nv_bfloat16),
    ATTN__PERSIST(128, __half),
};
#undef ATTN__PERSIST
constexpr int kNumPersist = sizeof(kPersist) / sizeof(kPersist[0]);

attn_decode_path_in path_in(const attn_cuda_decode_params *p);

/* The persistent producer that runs instead of producer e for launch p
 * and its CTAs (*ctas; decode_path.h says when), or NULL. */
const persist_entry *find_persist(const attn_cuda_decode_params *p, const producer_entry *e,
                                  uint64_t pieces, uint32_t *ctas)
{
    const attn_decode_path_in in = path_in(p);
    *ctas = attn_decode_path_persist(&in, p->persist, pieces);
    if (*ctas == 0 || e == nullptr || e->tmap_fn == nullptr)
        return nullptr;
    for (const persist_entry &x : kPersist)
        if (x.d == e->d && x.kv == e->kv)
            return &x;
    return nullptr;
}

/* raise_smem_once for a persistent producer. */
int raise_persist_smem_once(const persist_entry *e, uint32_t bytes)
{
    static uint32_t done[kNumPersist];
    const int idx = (int)(e - kPersist);
    if (done[idx] >= bytes)
        return 0;
    if (cudaFuncSetAttribute((const void *)e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bytes) != cudaSuccess)
        return ATTN_E_CUDA;
    done[idx] = bytes;
    return 0;
}

/* Raise the dynamic shared-memory limit once per kernel, so later launches
 * (inside a CUDA graph capture too) make no attribute call. */
int raise_smem_once(const producer_entry *e, uint32_t bytes)
{
    static uint32_t done[kNumProducers];
    const int idx = (int)(e - kProducers);
    if (done[idx] >= bytes)
        return 0;
    if (cudaFuncSetAttribute(e->kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bytes) != cudaSuccess)
        return ATTN_E_CUDA;
    done[idx] = bytes;
    return 0;
}

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no
 * link against libcuda); NULL when the driver lacks it.  Looked up once. */
typedef CUresult (*tmap_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                   const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                   const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

tmap_encode_fn lookup_tmap_encoder()
{
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return nullptr;
    return reinterpret_cast<tmap_encode_fn>(f);
}

/* The four tensor maps of a tensor-map launch over the layer's stores:
 * 4-D (d, head, slot, page) for NHD, (d, slot, head, page) for HND (the
 * strides grow in that order), boxes of 64 columns x min(P, 64) slots
 * (whole) or 1 slot (row), 128-byte swizzle. */
int encode_maps(const attn_cuda_decode_params &p, tmap_args &a)
{
    static const tmap_encode_fn enc = lookup_tmap_encoder();
    if (enc == nullptr || p.num_pages == 0)
        return ATTN_E_CUDA;
    const bool hnd = p.head_stride > p.row_stride;
    const cuuint64_t P = 1ull << p.page_shift, R = P < tc::kKeys ? P : tc::kKeys;
    const cuuint64_t dims[4] = {p.head_dim, hnd ? P : p.num_kv_heads, hnd ? p.num_kv_heads : P,
                                p.num_pages};
    const cuuint64_t strides[3] = {(cuuint64_t)(hnd ? p.row_stride : p.head_stride) * 2,
                                   (cuuint64_t)(hnd ? p.head_stride : p.row_stride) * 2,
                                   (cuuint64_t)p.page_stride * 2};
    const cuuint32_t elems[4] = {1, 1, 1, 1};
    const CUtensorMapL2promotion promo = p.tmap_l2 == 1   ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                                         : p.tmap_l2 == 3 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                                          : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    const CUtensorMapDataType dt = p.kv_dtype == ATTN_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    for (int i = 0; i < 4; i++) {
        const cuuint32_t rows = i < 2 ? (cuuint32_t)R : 1u;
        const cuuint32_t box[4] = {64, hnd ? rows : 1u, hnd ? 1u : rows, 1};
        void *g = const_cast<void *>(i & 1 ? p.v : p.k);
        if (enc(&a.maps[i], dt, 4, g, dims, strides, box, elems, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, promo,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
            return ATTN_E_CUDA;
    }
    a.hnd = hnd;
    return 0;
}

/* The kernel of producer `path` for head dim d, cache dtype kv; for the
 * cp.async tensor-core one, the row-prefetch variant; q hi+lo for both
 * tensor-core ones. */
const producer_entry *find_producer(uint32_t d, attn_dtype kv, attn_decode_producer path, bool pre,
                                    bool qlo, int np, bool kr = false)
{
    const bool simt = path == ATTN_DECODE_SIMT, bulk = path == ATTN_DECODE_TC_BULK;
    const producer_entry *any = nullptr; /* the match without keys as rows */
    for (const producer_entry &e : kProducers)
        if (e.d == d && e.kv == kv && e.tc == !simt &&
            (simt || (e.np == (bulk ? np : 0) && (bulk || e.pre == pre) && e.qlo == qlo))) {
            if (e.kr == kr)
                return &e;
            if (!e.kr && any == nullptr)
                any = &e;
        }
    return any;
}

/* What decode_path.h decides on for a launch. */
attn_decode_path_in path_in(const attn_cuda_decode_params *p)
{
    attn_decode_path_in in;
    in.simt = p->simt;
    in.bulk = p->bulk;
    in.head_dim = p->head_dim;
    in.kv_dtype = p->kv_dtype;
    in.q_dtype = p->q_dtype;
    in.page_stride = p->page_stride;
    in.head_stride = p->head_stride;
    in.row_stride = p->row_stride;
    in.page_size = 1u << p->page_shift;
    in.num_pages = p->num_pages;
    in.keys_per_item = p->keys_per_item;
    in.pieces = 0;
    if (p->num_kv_heads != 0) /* the tensor-core grid: 16 query heads per CTA */
        in.pieces = (uint64_t)p->item_capacity * p->num_kv_heads *
                    ((p->num_qo_heads / p->num_kv_heads + 15) / 16);
    in.sm_count = p->sm_count;
    in.group = p->num_kv_heads != 0 ? p->num_qo_heads / p->num_kv_heads : 0;
    in.k_addr = (uint64_t)(uintptr_t)p->k;
    in.v_addr = (uint64_t)(uintptr_t)p->v;
    return in;
}

const producer_entry *find_producer(const attn_cuda_decode_params *p)
{
    const attn_decode_path_in in = path_in(p);
    return find_producer(p->head_dim, p->kv_dtype, attn_decode_path_pick(&in, nullptr),
                         p->row_prefetch != 0, p->q_dtype != p->kv_dtype,
                         attn_decode_path_bulk(&in), attn_decode_path_keys_as_rows(&in));
}

kernel_fn find_merge(uint32_t d, const char **sym)
{
    switch (d) {
    case 64:
        *sym = "attn::decode::merge<64>";
        return merge<64>;
    case 128:
        *sym = "attn::decode::merge<128>";
        return merge<128>;
    case 256:
        *sym = "attn::decode::merge<256>";
        return merge<256>;
    }
    return nullptr;
}

/* Launch `fn(arg)`; with `pdl`, with programmatic stream serialization
 * (attn_cuda_decode_params.pdl: the kernel may start while the previous one
 * of the stream drains; it waits in cta_work_of / merge before reading). */
template <typename Arg>
cudaError_t launch(void (*fn)(Arg), dim3 grid, dim3 block, uint32_t smem, cudaStream_t st, int pdl,
                   const Arg &arg)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, fn, arg);
}

/* The pipeline depth a tensor-core producer runs with for the requested
 * `stages` (0: its default), or 0 when the request is out of range. */
int stages_of(const producer_entry *e, uint32_t stages)
{
    if (stages == 0)
        return e->tc_stages;
    return stages >= (uint32_t)tc::kMinStages && stages <= (uint32_t)e->tc_max_stages ? (int)stages
                                                                                      : 0;
}

/* Block shape, grid.z and shared memory of a producer for group size g
 * (tensor cores: `stages` deep, already checked by stages_of). */
void producer_shape(const producer_entry *e, uint32_t group, int stages, attn_cuda_launch_shape *s)
{
    if (e->tc) {
        s->bdx = tc::kThreads + 32 * e->copy_warps();
        s->bdy = s->bdz = 1;
        s->head_chunks = (group + 15) / 16; /* 16 heads are the M of one mma */
        s->smem_bytes = e->tc_smem(stages);
        return;
    }
    attn_cuda_decode_shape(e->d, group, s);
}

/* The tensor-core producer folds split requests itself (last CTA per
 * request / K/V head / head chunk) where decode_path.h says so and the
 * caller gave merge counters. */
bool fused_merge(const attn_cuda_decode_params *p)
{
    static_assert(tc::kThreads == 128 && kMergeLanes == 4, "attn_decode_path_fused's round");
    if (p->merge_counters == nullptr || p->num_kv_heads == 0)
        return false;
    return attn_decode_path_fused(p->fused_merge, p->simt, p->num_qo_heads / p->num_kv_heads,
                                  p->head_dim) != 0;
}

} // namespace decode
} // namespace attn

using namespace attn::decode;

extern "C" void attn_cuda_decode_shape(uint32_t head_dim, uint32_t group, attn_cuda_launch_shape *s)
{
    const uint32_t bdx = head_dim / simt::kVec;
    uint32_t bdy = group;
    if (bdx * bdy > (uint32_t)simt::kMaxThreads)
        bdy = simt::kMaxThreads / bdx; /* more heads than one CTA holds: head chunks */
    uint32_t bdz = 1;
    while (bdx * bdy * bdz < (uint32_t)simt::kMinThreads)
        bdz++;
    s->bdx = bdx;
    s->bdy = bdy;
    s->bdz = bdz;
    s->head_chunks = (group + bdy - 1) / bdy;
    uint32_t pipe = 2u * simt::kStages * simt::kTileBytes;
    uint32_t red = (bdz * bdy * (head_dim + 2)) * 4u;
    s->smem_bytes = pipe > red ? pipe : red;
}

extern "C" int attn_cuda_decode_occupancy_path(uint32_t head_dim, attn_dtype kv_dtype,
                                               uint32_t group, uint32_t stages, int bulk)
{
    if (bulk == ATTN_DECODE_BULK_AUTO) { /* page 16: the CTAs per SM of every choice agree */
        attn_decode_path_in in;
        memset(&in, 0, sizeof in);
        in.bulk = bulk;
        in.head_dim = head_dim;
        in.page_size = 16;
        bulk = attn_decode_path_bulk(&in);
    }
    const producer_entry *e = find_producer(
        head_dim, kv_dtype, bulk ? ATTN_DECODE_TC_BULK : ATTN_DECODE_TC, true, false, bulk);
    if (!e || group == 0)
        return 0;
    const int st = stages_of(e, stages);
    if (st == 0)
        return 0;
    attn_cuda_launch_shape sh;
    producer_shape(e, group, st, &sh);
    if (raise_smem_once(e, sh.smem_bytes) != 0)
        return 0;
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, e->kernel(), (int)(sh.bdx * sh.bdy * sh.bdz), sh.smem_bytes) != cudaSuccess)
        return 0;
    return n;
}

extern "C" int attn_cuda_decode_occupancy_stages(uint32_t head_dim, attn_dtype kv_dtype,
                                                 uint32_t group, uint32_t stages)
{
    return attn_cuda_decode_occupancy_path(head_dim, kv_dtype, group, stages,
                                           ATTN_CUDA_BULK_DEFAULT);
}

extern "C" int attn_cuda_decode_occupancy(uint32_t head_dim, attn_dtype kv_dtype, uint32_t group)
{
    return attn_cuda_decode_occupancy_stages(head_dim, kv_dtype, group, 0);
}

extern "C" uint32_t attn_cuda_decode_head_chunks(uint32_t head_dim, attn_dtype kv_dtype,
                                                 uint32_t group)
{
    const producer_entry *e = find_producer(head_dim, kv_dtype, ATTN_DECODE_TC, true, false, 0);
    if (!e)
        return 1;
    attn_cuda_launch_shape sh;
    producer_shape(e, group, e->tc_stages, &sh);
    return sh.head_chunks;
}

extern "C" int attn_cuda_decode_plan_bulk(uint32_t head_dim, attn_dtype kv_dtype,
                                          attn_dtype q_dtype, uint32_t num_qo_heads,
                                          uint32_t num_kv_heads, uint32_t page_size,
                                          uint64_t requests, uint32_t sm_count, int bulk)
{
    if (num_kv_heads == 0)
        return bulk;
    const uint32_t group = num_qo_heads / num_kv_heads;
    attn_decode_path_in in;
    memset(&in, 0, sizeof in);
    in.bulk = bulk;
    in.head_dim = head_dim;
    in.kv_dtype = kv_dtype;
    in.q_dtype = q_dtype;
    in.page_size = page_size;
    in.group = group;
    in.sm_count = sm_count;
    return attn_decode_path_plan_bulk(
        &in, requests * num_kv_heads * attn_cuda_decode_head_chunks(head_dim, kv_dtype, group));
}

extern "C" int attn_cuda_decode_symbols(const attn_cuda_decode_params *p, const char **producer,
                                        const char **reducer)
{
    const producer_entry *e = find_producer(p);
    uint32_t ctas = 0;
    const persist_entry *pe = nullptr;
    if (e && e->tc && p->num_kv_heads != 0 && p->num_qo_heads % p->num_kv_heads == 0) {
        attn_cuda_launch_shape sh;
        producer_shape(e, p->num_qo_heads / p->num_kv_heads, e->tc_stages, &sh);
        pe = find_persist(p, e, (uint64_t)p->item_capacity * p->num_kv_heads * sh.head_chunks,
                          &ctas);
    }
    const char *ms = nullptr;
    find_merge(p->head_dim, &ms);
    *producer = pe ? pe->symbol : e ? e->symbol : nullptr;
    *reducer = (p->any_split || p->force_merge) && !fused_merge(p) ? ms : nullptr;
    return (e ? 1 : 0) + (*reducer ? 1 : 0);
}

extern "C" int attn_cuda_decode_launch(const attn_cuda_decode_params *p, void *stream)
{
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const producer_entry *e = find_producer(p);
    const char *ms = nullptr;
    kernel_fn mf = find_merge(p->head_dim, &ms);
    if (!e || !mf)
        return ATTN_E_SHAPE;
    if (p->num_kv_heads == 0 || p->num_qo_heads % p->num_kv_heads)
        return ATTN_E_SHAPE;
    if (p->pdl < ATTN_CUDA_PDL_OFF || p->pdl > ATTN_CUDA_PDL_NO_WAIT)
        return ATTN_E_SHAPE; /* attn_cuda_decode_params.pdl is not an ATTN_CUDA_PDL_* */
    const int stages = e->tc ? stages_of(e, p->stages) : 0;
    if (e->tc && stages == 0)
        return ATTN_E_SHAPE; /* attn_cuda_decode_params.stages out of range */
    attn_cuda_launch_shape sh;
    producer_shape(e, p->num_qo_heads / p->num_kv_heads, stages, &sh);
    if (raise_smem_once(e, sh.smem_bytes) != 0)
        return ATTN_E_CUDA;
    const bool fused = fused_merge(p);
    if (p->item_capacity > 0) {
        if (p->heads_fast && p->item_capacity > 65535u)
            return ATTN_E_CAPACITY; /* grid.y limit */
        dim3 grid = p->heads_fast ? dim3(p->num_kv_heads, p->item_capacity, sh.head_chunks)
                                  : dim3(p->item_capacity, p->num_kv_heads, sh.head_chunks);
        dim3 block(sh.bdx, sh.bdy, sh.bdz);
        attn_cuda_decode_params pp = *p;
        if (!fused)
            pp.merge_counters = nullptr; /* the producer then never counts nor folds */
        const uint64_t pieces = (uint64_t)grid.x * grid.y * grid.z;
        uint32_t ctas = 0;
        const persist_entry *pe = find_persist(p, e, pieces, &ctas);
        if (e->tmap_fn) {
            tmap_args a;
            a.p = pp;
            const int rv = encode_maps(pp, a);
            if (rv != 0)
                return rv;
            uint32_t smem = sh.smem_bytes;
            void (*fn)(tmap_args) = e->tmap_fn;
            if (pe) { /* `ctas` CTAs walk the pieces of `grid` */
                smem = pe->smem(stages);
                if (pieces > (uint64_t)INT32_MAX)
                    return ATTN_E_CAPACITY;
                if (raise_persist_smem_once(pe, smem) != 0)
                    return ATTN_E_CUDA;
                grid = dim3(ctas, 1, 1);
                block = dim3(tc::kThreads + 32, 1, 1); /* its one copy warp */
                fn = pe->fn;
            }
            if (launch(fn, grid, block, smem, st, p->pdl, a) != cudaSuccess)
                return ATTN_E_CUDA;
        } else if (launch(e->fn, grid, block, sh.smem_bytes, st, p->pdl, pp) != cudaSuccess) {
            return ATTN_E_CUDA;
        }
    }
    if (!fused)
        return attn_cuda_decode_merge_launch(p, stream);
    return 0;
}

extern "C" int attn_cuda_decode_merge_launch(const attn_cuda_decode_params *p, void *stream)
{
    const char *ms = nullptr;
    kernel_fn mf = find_merge(p->head_dim, &ms);
    if (!mf)
        return ATTN_E_SHAPE;
    if (!(p->any_split || p->force_merge) || p->request_capacity == 0)
        return 0;
    dim3 grid(p->request_capacity, (p->num_qo_heads + kMergeHeads - 1) / kMergeHeads);
    dim3 block(p->head_dim / kMergeLanes, kMergeHeads);
    attn_cuda_decode_params pp = *p;
    pp.merge_counters = nullptr;
    return launch(mf, grid, block, 0, static_cast<cudaStream_t>(stream), p->pdl, pp) == cudaSuccess
               ? 0
               : ATTN_E_CUDA;
}

extern "C" const char *attn_cuda_append_symbol(void)
{
    return "attn::decode::append_rows";
}

extern "C" int attn_cuda_append_launch(const attn_cuda_append_params *p, void *stream)
{
    const size_t es = attn_dtype_size(p->kv_dtype);
    if (es == 0 || (p->head_dim * es) % 16 || (p->head_stride * (int64_t)es) % 16)
        return ATTN_E_SHAPE;
    if (p->rows == 0)
        return 0;
    const int vecs = (int)(p->head_dim * es / 16);
    dim3 grid(p->rows, p->num_kv_heads);
    append_rows<<<grid, vecs, 0, static_cast<cudaStream_t>(stream)>>>(*p);
    return cudaGetLastError() == cudaSuccess ? 0 : ATTN_E_CUDA;
}
