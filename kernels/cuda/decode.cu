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
constexpr int kMergeHeads = 4; /* query heads per reducer CTA */
constexpr int kMergeBatch = 8; /* slots fetched per batch by merge_fold */
constexpr int kMergeLanes = 4; /* lanes of one head per merge_fold thread */

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
     * of this grid runs (else after the main loops: pdl_main_loop_done);
     * nothing of this launch's inputs or outputs is touched before the
     * previous kernel of the stream is done */
    if (p.pdl == ATTN_CUDA_PDL_EARLY)
        ptx::griddep_launch_dependents();
    if (p.pdl != ATTN_CUDA_PDL_OFF)
        ptx::griddep_wait();
}

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

__device__ __forceinline__ cta_work cta_work_of(const attn_cuda_decode_params &p)
{
    pdl_start(p);
    return p.heads_fast ? work_at(p, (int)blockIdx.y, (int)blockIdx.x)
                        : work_at(p, (int)blockIdx.x, (int)blockIdx.y);
}

/* ATTN_CUDA_PDL_LATE: this CTA has read its last K/V tile; once every CTA
 * of the grid has, the next kernel may be placed on the slots they free (an
 * earlier trigger places it in the free slots of an under-filled grid). */
__device__ __forceinline__ void pdl_main_loop_done(const attn_cuda_decode_params &p)
{
    if (p.pdl == ATTN_CUDA_PDL_LATE)
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

/* The fold of one request's slots for query head hq, lanes [lane0, lane0+4):
 * exactly the slots [slot_begin, slot_begin + num_slots) in slot order, with
 * the state.h merge (seed 0x02C, 0x03I).  Slots are fetched kMergeBatch at a
 * time (independent loads in flight), then folded one by one: the order
 * stays fixed while the memory latency is paid once per batch instead of
 * once per slot.  Loads go through L2 (__ldcg): in the fused path the slots
 * were written by other CTAs of the same launch.  Used by the reducer kernel
 * and by the last producer CTA of a (request, K/V head, head chunk). */
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
                const attn_mlu_f32 o = state_io::from_ml(bm[j], bl[j]);
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
    using namespace simt;
    constexpr int BDX = D / kVec;
    constexpr int TR = kTileBytes / (D * 2); /* rows per tile */
    extern __shared__ uint4 smem[];
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
     * in [kMinStages, MAX_STAGES] (fewer stages: more resident CTAs). */
    static constexpr int STAGES = D == 256 ? 2 : (D == 128 ? 3 : 4);
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
template <int D, typename KV, bool QLO>
__device__ __forceinline__ void stage_q(const attn_cuda_decode_params &p, const cta_work &w, int h0,
                                        uint4 *qh, uint4 *ql)
{
    constexpr int CH = cfg<D>::CH;
    for (int i = threadIdx.x; i < 16 * CH; i += kThreads) {
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
#pragma unroll
        for (int j = 0; j < kKGroup; j++)
            ptx::ldmatrix_x4(b[j],
                             kt + kv_chunk<C::CH, RS>(krow, (k0 + j) * 2 + ((lane >> 3) & 1)));
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
        float mx = ptx::max_nan(ptx::max_nan(s[0][2 * rr], s[0][2 * rr + 1]),
                                ptx::max_nan(s[1][2 * rr], s[1][2 * rr + 1]));
        mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = ptx::max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mxs[rr] = mx;
        /* false only for finite m and mx <= m + kLazyLog2: NaN, -inf, a
         * growth beyond the bound all take the exact update */
        grow |= !(mx - m[rr] <= kLazyLog2);
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
        const float mn = ptx::max_nan(m[rr], mxs[rr]);
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
    using C = cfg<D>;
#pragma unroll
    for (int d0 = 0; d0 < D / 16; d0 += kKGroup) {
        uint32_t b[kKGroup][4];
#pragma unroll
        for (int j = 0; j < kKGroup; j++)
            ptx::ldmatrix_x4_trans(b[j],
                                   vt + kv_chunk<C::CH, RS>(vrow, (d0 + j) * 2 + (lane >> 4)));
#pragma unroll
        for (int j = 0; j < kKGroup; j++) {
            ptx::mma_m16n8k16<KV>(o[2 * (d0 + j)], pa, b[j][0], b[j][1]);
            ptx::mma_m16n8k16<KV>(o[2 * (d0 + j) + 1], pa, b[j][2], b[j][3]);
        }
    }
}

/* A barrier of the four compute warps: the whole CTA (the cp.async
 * producer), or named barrier 1 over threads 0 .. kThreads - 1 (NAMED: the
 * copy-warp producer, whose copy warps have exited by then). */
template <bool NAMED> __device__ __forceinline__ void compute_sync()
{
    if (NAMED)
        asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
    else
        __syncthreads();
}

/* Epilogue: per-warp states -> shared memory, then a fixed-order merge of
 * the four warps with the state.h algebra, and the write-out of this
 * thread's EPT lanes of one head (state_io).  Every compute thread calls it
 * after the pipeline has drained. */
template <int D, bool NAMED = false>
__device__ __forceinline__ void epilogue(const attn_cuda_decode_params &p, const cta_work &w,
                                         int h0, float (&o)[cfg<D>::NB][4], float (&m)[2],
                                         float (&l)[2], float *red)
{
    constexpr int NB = cfg<D>::NB;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    float *red_o = red;                /* [4][16][D] */
    float *red_m = red_o + 4 * 16 * D; /* [4][16] */
    float *red_l = red_m + 64;
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
    compute_sync<NAMED>();

    constexpr int EPT = D / 8; /* lanes of one row per thread */
    const int row = tid >> 3, seg = tid & 7;
    const int hl = h0 + row;
    if (hl >= w.g)
        return;
    float u[EPT];
    attn_mlu_f32 st = state_io::from_ml(red_m[row], red_l[row]);
#pragma unroll
    for (int i = 0; i < EPT; i++)
        u[i] = red_o[row * D + seg * EPT + i];
    for (int wi = 1; wi < 4; wi++) {
        const attn_mlu_f32 ot = state_io::from_ml(red_m[wi * 16 + row], red_l[wi * 16 + row]);
        attn_mlu_merge_f32(&st, u, &ot, red_o + (wi * 16 + row) * D + seg * EPT, EPT);
    }
    state_io::write<D, EPT>(sink_of(p), w.rq.num_slots == 1, w.rq.qrow, w.it.slot, w.hkv * w.g + hl,
                            seg * EPT, st, u, seg == 0);
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

/* Fused reducer: the last of the request's num_slots CTAs for this (K/V
 * head, head chunk `chunk` of `chunks`) folds the slots.  Which CTA is last
 * varies; the fold does not: merge_fold reads the slots in slot order, so
 * the result is bit-identical to the reducer kernel's. */
template <int D, bool NAMED = false>
__device__ __forceinline__ void fused_fold(const attn_cuda_decode_params &p, const cta_work &w,
                                           int h0, int chunk, int chunks)
{
    __shared__ int s_last;
    const int tid = threadIdx.x;
    __threadfence(); /* this CTA's slot is visible device-wide before it counts */
    compute_sync<NAMED>();
    if (tid == 0) {
        int *cnt = p.merge_counters + ((size_t)w.it.req * p.num_kv_heads + w.hkv) * chunks + chunk;
        const int prev = atomicAdd(cnt, 1);
        s_last = prev == w.rq.num_slots - 1;
        if (s_last)
            *cnt = 0; /* every slot has arrived: ready for the next launch */
    }
    compute_sync<NAMED>();
    if (!s_last)
        return;
    __threadfence();
    const int heads = min(16, w.g - h0);
    constexpr int UPH = D / kMergeLanes; /* fold units per head */
    for (int u = tid; u < heads * UPH; u += kThreads)
        merge_fold<D>(p, w.rq, w.hkv * w.g + h0 + u / UPH, (u % UPH) * kMergeLanes);
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

/* The tensor-map copy warp of producer_tc_tmap (issue 13, round 2): one
 * warp moves each 64-key tile as boxes of R = min(P, 64) rows x 64 columns
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

    __device__ __forceinline__ void init() const
    {
        for (int s = 0; s < stages; s++) {
            mbar::init(&full[s], 32);
            mbar::init(&empty[s], kThreads);
        }
        mbar::fence_init();
    }

    /* Box b of tile t: K or V, row block j, column block h. */
    struct box {
        int tens, j, h;
    };
    __device__ __forceinline__ static box box_of(int b, int nb)
    {
        box x;
        x.tens = b / (nb * kCols);
        x.j = (b / kCols) % nb;
        x.h = b % kCols;
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
        if (walk.key(vl) - k0 == vl - v0 && k0 % R == 0) { /* one run inside one page */
            if (issue) {
                const int page = pt.pages[k0 >> pt.page_shift], slot = (int)(k0 & mask);
                mbar::tensor_copy_4d(d0, whole, x.h * 64, hnd ? slot : hkv, hnd ? hkv : slot, page,
                                     bar);
            }
            return (uint32_t)R * 128u;
        }
        for (int64_t v = v0; v <= vl && issue; v++) {
            const int64_t k = walk.key(v);
            const int page = pt.pages[k >> pt.page_shift], slot = (int)(k & mask);
            mbar::tensor_copy_4d(d0 + (v - v0) * 8, row, x.h * 64, hnd ? slot : hkv,
                                 hnd ? hkv : slot, page, bar);
        }
        return (uint32_t)(vl - v0 + 1) * 128u;
    }

    /* The copy warp's loop: lane l serves boxes l, l + 32, ... of each tile;
     * `rg`: where this piece's tiles enter the ring. */
    __device__ __forceinline__ void produce(const CUtensorMap *maps, bool hnd, int hkv,
                                            const paged::key_walk &walk,
                                            const paged::page_table &pt, int ntiles, int lane,
                                            ring &rg) const
    {
        const int P = 1 << pt.page_shift, R = P < kKeys ? P : kKeys, nb = kKeys / R;
        const int nbox = 2 * nb * kCols;
        for (int t = 0; t < ntiles; t++) {
            const int s = rg.s;
            if (rg.n >= stages) /* the consumers of the tile stages tiles back are done */
                mbar::wait(&empty[s], rg.ph ^ 1u);
            uint32_t bytes = 0;
            for (int b = lane; b < nbox; b += 32) {
                const box x = box_of(b, nb);
                bytes += copy_box(maps, hnd, hkv, walk, pt, t, R, x, nullptr, nullptr, false);
            }
            mbar::arrive_expect_tx(&full[s], bytes);
            for (int b = lane; b < nbox; b += 32) {
                const box x = box_of(b, nb);
                uint4 *dst = (x.tens ? vs : ks) + s * C::TILE_VECS;
                copy_box(maps, hnd, hkv, walk, pt, t, R, x, dst, &full[s], true);
            }
            rg.next(stages);
        }
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

/* The tensor-core producer (default).  PRE: page-table row prefetch
 * (attn_cuda_decode_params.row_prefetch); QLO: q's dtype is not the cache
 * dtype, so q enters as hi + lo halves.  Both are template parameters so
 * the main loop carries no run-time flag. */
template <int D, typename KV, bool PRE, bool QLO>
__global__ void __launch_bounds__(tc::kThreads) producer_tc(attn_cuda_decode_params p)
{
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TV = C::TILE_VECS;
    const int ST = p.stages ? (int)p.stages : C::STAGES; /* range checked by the launch */
    extern __shared__ uint4 smem[];
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

    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
    const int krow = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
    const int vrow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
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
    const float sc = p.sm_scale * kLog2e;

    int st = 0, sn = ST - 1; /* stages of tile t and of tile t + ST - 1 */
    for (int t = 0; t < ntiles; t++) {
        pipe.acquire(t, sn, ntiles);
        const uint4 *kt = pipe.ks + st * TV;
        const uint4 *vt = pipe.vs + st * TV;
        float s[2][4];
        uint32_t pa[4];
        tc::qk_tile<D, KV, QLO>(s, qa, qh, ql, kt, lane, qrow, krow);
        tc::softmax_update<C::NB, KV>(
            s, m, l, o, pa, sc, (int64_t)t * tc::kKeys + warp * 16 + (lane & 3) * 2, pipe.walk.n);
        tc::pv_tile<D, KV>(o, pa, vt, lane, vrow);
        pipe.release(t, st, ntiles);
        st = st + 1 == ST ? 0 : st + 1;
        sn = sn + 1 == ST ? 0 : sn + 1;
    }
    ptx::cp_async_wait<0>();
    __syncthreads();
    pdl_main_loop_done(p);

    tc::epilogue<D>(p, w, h0, o, m, l, reinterpret_cast<float *>(smem));
    if (w.rq.num_slots == 1 || !p.merge_counters)
        return; /* direct path, or the reducer kernel folds the slots */
    tc::fused_fold<D>(p, w, h0, (int)blockIdx.z, (int)gridDim.z);
}

/* The compute warps' loop over one piece's tiles of a copy-warp pipeline:
 * wait on full[s], QK, online softmax, PV, release empty[s].  RS: the stage
 * layout (kv_chunk); `rg`: where the piece's tiles are in the ring. */
template <int D, typename KV, bool QLO, int RS, typename Pipe>
__device__ __forceinline__ void
consume_tiles(const attn_cuda_decode_params &p, const Pipe &pipe, const uint32_t (*qa)[4],
              const uint4 *qh, const uint4 *ql, const paged::key_walk &walk, int ntiles,
              float (&o)[tc::cfg<D>::NB][4], float (&m)[2], float (&l)[2], tc::ring &rg)
{
    using C = tc::cfg<D>;
    constexpr int TP = RS == 0 ? C::TILE_VECS : C::PAD_TILE_VECS;
    const int ST = pipe.stages;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int nb = 0; nb < C::NB; nb++)
        o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    const int qrow = (lane & 7) + ((lane >> 3) & 1) * 8; /* ldmatrix row of A */
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
        float sf[2][4];
        uint32_t pa[4];
        tc::qk_tile<D, KV, QLO, RS>(sf, qa, qh, ql, kt, lane, qrow, krow);
        tc::softmax_update<C::NB, KV>(sf, m, l, o, pa, sc,
                                      (int64_t)t * tc::kKeys + warp * 16 + (lane & 3) * 2, walk.n);
        tc::pv_tile<D, KV, RS>(o, pa, vt, lane, vrow);
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

/* The compute warps of producer_tc_bulk and producer_tc_tmap: the tiles
 * (consume_tiles), then the epilogue and the fused fold among themselves
 * (named barrier).  `base`: the stages' start, reused by the epilogue. */
template <int D, typename KV, bool QLO, int RS, typename Pipe>
__device__ __forceinline__ void
bulk_compute(const attn_cuda_decode_params &p, const cta_work &w, const Pipe &pipe, const uint4 *qh,
             const uint4 *ql, const paged::key_walk &walk, int ntiles, int h0, uint4 *base)
{
    using C = tc::cfg<D>;
    float o[C::NB][4];
    float m[2], l[2];
    uint32_t qa[C::QREG ? C::KS : 1][4];
    load_qa<D>(qa, qh);
    tc::ring rg;
    consume_tiles<D, KV, QLO, RS>(p, pipe, qa, qh, ql, walk, ntiles, o, m, l, rg);
    /* every copy landed (full[s] of the last tiles) and was read, so the
     * epilogue may reuse the stages; the copy warps have no state to merge
     * (and have exited, which counts as their trigger) */
    tc::compute_sync<true>();
    pdl_main_loop_done(p);
    tc::epilogue<D, true>(p, w, h0, o, m, l, reinterpret_cast<float *>(base));
    if (w.rq.num_slots == 1 || !p.merge_counters)
        return; /* direct path, or the reducer kernel folds the slots */
    tc::fused_fold<D, true>(p, w, h0, (int)blockIdx.z, (int)gridDim.z);
}

/* The tensor-core producer with copy warps (issue 13; decode_path.h says
 * when it runs): warps 0-3 compute exactly as producer_tc (16 keys each of
 * a 64-key tile, the same QK, online softmax, PV, epilogue and fused fold),
 * warps 4 .. 3 + NP only copy (tc::bulk_pipe) and exit when their last
 * copy is issued, so the compute warps issue no copy or address
 * instruction and the copies move whole rows. */
template <int D, typename KV, bool QLO, int NP>
__device__ __forceinline__ void bulk_body(const attn_cuda_decode_params &p)
{
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TP = C::PAD_TILE_VECS;
    const int ST = p.stages ? (int)p.stages : C::BULK_STAGES; /* range checked by the launch */
    extern __shared__ uint4 smem[];
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
    if (warp < 4)
        tc::stage_q<D, KV, QLO>(p, w, h0, qh, ql);
    __syncthreads(); /* barriers initialised, Q staged; the last CTA-wide barrier */

    if (warp >= 4) { /* copy warps: their copies complete on full[s], nothing waits for them */
        const KV *kbase = static_cast<const KV *>(p.k) + (int64_t)w.hkv * p.head_stride;
        const KV *vbase = static_cast<const KV *>(p.v) + (int64_t)w.hkv * p.head_stride;
        pipe.produce(kbase, vbase, walk, table_of(p, w), ntiles, tid - tc::kThreads);
    } else {
        bulk_compute<D, KV, QLO, C::ROW_VECS>(p, w, pipe, qh, ql, walk, ntiles, h0, smem);
    }
}

template <int D, typename KV, bool QLO, int NP>
__global__ void __launch_bounds__(tc::kThreads + 32 * NP, (tc::bulk_regs<D, QLO, NP>::MIN_CTAS))
    producer_tc_bulk(attn_cuda_decode_params p)
{
    bulk_body<D, KV, QLO, NP>(p);
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

/* The tensor-core producer with one tensor-map copy warp (bulk =
 * ATTN_CUDA_BULK_TMAP; decode_path.h says when it runs): the compute warps
 * of producer_tc_bulk over the tensor map's swizzled stages, which warp 4
 * fills a page-run box at a time (tc::tmap_pipe). */
template <int D, typename KV, bool QLO>
__global__ void __launch_bounds__(tc::kThreads + 32, (tc::bulk_regs<D, QLO, 1>::MIN_CTAS))
    producer_tc_tmap(const __grid_constant__ tmap_args a)
{
    using C = tc::cfg<D>;
    constexpr int CH = C::CH, TV = C::TILE_VECS;
    const attn_cuda_decode_params &p = a.p;
    const int ST = p.stages ? (int)p.stages : C::BULK_STAGES; /* range checked by the launch */
    extern __shared__ uint4 smem[];
    /* the 128-byte swizzle repeats every 1024 bytes: stages start on one */
    uint4 *base = reinterpret_cast<uint4 *>((reinterpret_cast<uintptr_t>(smem) + 1023) &
                                            ~static_cast<uintptr_t>(1023));
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
    const paged::key_walk walk = walk_of(w);
    const int ntiles = (int)((walk.n + tc::kKeys - 1) / tc::kKeys);
    if (tid == 0)
        pipe.init();
    if (warp < 4)
        tc::stage_q<D, KV, QLO>(p, w, h0, qh, ql);
    __syncthreads(); /* barriers initialised, Q staged; the last CTA-wide barrier */

    if (warp >= 4) {
        tc::ring rg;
        pipe.produce(a.maps, a.hnd != 0, w.hkv, walk, table_of(p, w), ntiles, tid & 31, rg);
    } else {
        bulk_compute<D, KV, QLO, 0>(p, w, pipe, qh, ql, walk, ntiles, h0, base);
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
    using C = tc::cfg<D>;
    static_assert(C::QREG, "Q stays in registers across a piece");
    constexpr int TV = C::TILE_VECS;
    const attn_cuda_decode_params &p = a.p;
    const int ST = p.stages ? (int)p.stages : C::BULK_STAGES; /* range checked by the launch */
    extern __shared__ uint4 smem[];
    uint4 *base = reinterpret_cast<uint4 *>((reinterpret_cast<uintptr_t>(smem) + 1023) &
                                            ~static_cast<uintptr_t>(1023));
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
    if (p.pdl != ATTN_CUDA_PDL_OFF)
        ptx::griddep_wait(); /* the producers' slots (and any earlier kernel's writes) are visible
                              */
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
        return tmap_fn ? 1 : np;
    }
};

/* One table row per kernel: the dispatch key, the kernel, the symbol a
 * tracer demangles it to, and the tensor-core producer's shared memory. */
// clang-format off
#define ATTN__TC(D, T, PRE, QLO)                                                                   \
    {D, dtype_of<T>::value, true, PRE, QLO, 0, producer_tc<D, T, PRE, QLO>,                        \
     "attn::decode::producer_tc<" #D ", " #T ", " #PRE ", " #QLO ">", tc::cfg<D>::smem,           \
     tc::cfg<D>::STAGES, tc::cfg<D>::MAX_STAGES, nullptr}
#define ATTN__TMAP(D, T, QLO)                                                                      \
    {D,                                                                                            \
     dtype_of<T>::value,                                                                           \
     true,                                                                                         \
     false,                                                                                        \
     QLO,                                                                                          \
     ATTN_CUDA_BULK_TMAP,                                                                          \
     nullptr,                                                                                      \
     "attn::decode::producer_tc_tmap<" #D ", " #T ", " #QLO ">",                                  \
     tc::cfg<D>::tmap_smem,                                                                        \
     tc::cfg<D>::BULK_STAGES,                                                                      \
     tc::cfg<D>::BULK_MAX_STAGES,                                                                  \
     producer_tc_tmap<D, T, QLO>}
#define ATTN__BULK(D, T, QLO, NP)                                                                  \
    {D, dtype_of<T>::value, true, false, QLO, NP, producer_tc_bulk<D, T, QLO, NP>,                 \
     "attn::decode::producer_tc_bulk<" #D ", " #T ", " #QLO ", " #NP ">", tc::cfg<D>::bulk_smem,  \
     tc::cfg<D>::BULK_STAGES, tc::cfg<D>::BULK_MAX_STAGES, nullptr}
#define ATTN__SIMT(D, T)                                                                           \
    {D, dtype_of<T>::value, false, false, false, 0, producer_simt<D, T>,                           \
     "attn::decode::producer_simt<" #D ", " #T ">", nullptr, 0, 0, nullptr}
#define ATTN__PRODUCERS(D, T)                                                                      \
    ATTN__SIMT(D, T), ATTN__TC(D, T, false, false), ATTN__TC(D, T, false, true),                   \
    ATTN__TC(D, T, true, false), ATTN__TC(D, T, true, true), ATTN__BULK(D, T, false, 1)

/* The only instantiations: head dims 64/128/256 x {bf16, fp16} x {CUDA
 * core, tensor core x row prefetch x q hi+lo, copy warp (q hi+lo at d = 256
 * only)}; page size, layout, group size, q dtype and ABI are run-time
 * parameters (q's dtype only decides whether the hi + lo split runs). */
const producer_entry kProducers[] = {
    ATTN__PRODUCERS(64, __nv_bfloat16),
    ATTN__PRODUCERS(128, __nv_bfloat16),
    ATTN__PRODUCERS(256, __nv_bfloat16),
    ATTN__BULK(64, __nv_bfloat16, false, 4),
    ATTN__TMAP(64, __nv_bfloat16, false),
    ATTN__TMAP(128, __nv_bfloat16, false),
    ATTN__TMAP(256, __nv_bfloat16, false),
    ATTN__TMAP(256, __nv_bfloat16, true),
    ATTN__BULK(128, __nv_bfloat16, false, 4),
    ATTN__BULK(256, __nv_bfloat16, false, 4),
    ATTN__BULK(256, __nv_bfloat16, true, 1), /* q hi + lo: only at d = 256 (decode_path.h) */
    ATTN__BULK(256, __nv_bfloat16, true, 4),
    ATTN__BULK(128, __nv_bfloat16, false, 2), /* two copy warps: d = 128 only */
    ATTN__PRODUCERS(64, __half),
    ATTN__PRODUCERS(128, __half),
    ATTN__PRODUCERS(256, __half),
    ATTN__BULK(64, __half, false, 4),
    ATTN__TMAP(64, __half, false),
    ATTN__TMAP(128, __half, false),
    ATTN__TMAP(256, __half, false),
    ATTN__TMAP(256, __half, true),
    ATTN__BULK(128, __half, false, 4),
    ATTN__BULK(256, __half, false, 4),
    ATTN__BULK(256, __half, true, 1),
    ATTN__BULK(256, __half, true, 4),
    ATTN__BULK(128, __half, false, 2),
};
#undef ATTN__PRODUCERS
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
                                    bool qlo, int np)
{
    const bool simt = path == ATTN_DECODE_SIMT, bulk = path == ATTN_DECODE_TC_BULK;
    for (const producer_entry &e : kProducers)
        if (e.d == d && e.kv == kv && e.tc == !simt &&
            (simt || (e.np == (bulk ? np : 0) && (bulk || e.pre == pre) && e.qlo == qlo)))
            return &e;
    return nullptr;
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
    in.k_addr = (uint64_t)(uintptr_t)p->k;
    in.v_addr = (uint64_t)(uintptr_t)p->v;
    return in;
}

const producer_entry *find_producer(const attn_cuda_decode_params *p)
{
    const attn_decode_path_in in = path_in(p);
    return find_producer(p->head_dim, p->kv_dtype, attn_decode_path_pick(&in, nullptr),
                         p->row_prefetch != 0, p->q_dtype != p->kv_dtype,
                         attn_decode_path_bulk(&in));
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
 * request / K/V head / head chunk) when the caller asks (fused_merge) and
 * gave merge counters.  Only where one round of 128 threads folds every
 * lane of the chunk's heads (g <= 4 at d = 128): more rounds serialize L2
 * round trips in the last CTA, and the reducer kernel is faster (group 16:
 * measured). */
bool fused_merge(const attn_cuda_decode_params *p)
{
    if (!p->fused_merge || p->merge_counters == nullptr || p->simt || p->num_kv_heads == 0)
        return false;
    const uint32_t g = p->num_qo_heads / p->num_kv_heads, heads = g < 16 ? g : 16;
    return heads * (p->head_dim / kMergeLanes) <= (uint32_t)tc::kThreads;
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
    if (p->pdl < ATTN_CUDA_PDL_OFF || p->pdl > ATTN_CUDA_PDL_LATE)
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
                fn = pe->fn;
            }
            if (launch(fn, grid, block, smem, st, p->pdl, a) != cudaSuccess)
                return ATTN_E_CUDA;
        } else if (launch(e->fn, grid, block, sh.smem_bytes, st, p->pdl, pp) != cudaSuccess) {
            return ATTN_E_CUDA;
        }
    }
    if ((p->any_split || p->force_merge) && p->request_capacity > 0 && !fused) {
        dim3 grid(p->request_capacity, (p->num_qo_heads + kMergeHeads - 1) / kMergeHeads);
        dim3 block(p->head_dim / kMergeLanes, kMergeHeads);
        attn_cuda_decode_params pp = *p;
        pp.merge_counters = nullptr;
        if (launch(mf, grid, block, 0, st, p->pdl, pp) != cudaSuccess)
            return ATTN_E_CUDA;
    }
    return 0;
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
