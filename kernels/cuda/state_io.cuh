/* Where a kernel's split state for one (query row, head) goes: finalized
 * into O / LSE when the split is the whole row (a request with one slot),
 * or stored in a workspace slot in the plan's state ABI for the reducer
 * (seed 0x02C, 0x03I).  One home for the write-out, so every producer
 * writes the same bits in the same sentinel encoding:
 *
 *   MLU    part_vec = u, part_m = m, part_l = l; empty: (-inf, 0, 0)
 *   LSE_O  part_vec = O, part_m = LSE;           empty: (-inf, 0)
 *
 * and every reader decodes them with the one emptiness rule of
 * kernels/common/state.h (attn_state_empty_f32: m or LSE == -inf).
 */
#ifndef ATTN_CUDA_STATE_IO_CUH
#define ATTN_CUDA_STATE_IO_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/types.h"
#include "kernels/common/dtype.h"
#include "kernels/common/state.h"

namespace attn
{
namespace state_io
{

/* The output and workspace of one launch (device pointers). */
struct sink {
    void *o;                /* [rows, H_q, D] in o_dtype */
    float *lse;             /* [rows, H_q], or NULL */
    attn_dtype o_dtype;     /* dtype of o */
    uint32_t num_qo_heads;  /* H_q */
    float *part_vec;        /* [slots * H_q, D] */
    float *part_m, *part_l; /* [slots * H_q]; part_l for MLU only */
    attn_state_abi abi;     /* encoding of the workspace slots */
};

/* The (valid, m, l) scalars of a state stored as (m, l) sentinels. */
__device__ __forceinline__ attn_mlu_f32 from_ml(float m, float l)
{
    attn_mlu_f32 st;
    st.valid = !attn_state_empty_f32(m);
    st.m = m;
    st.l = l;
    return st;
}

/* O and LSE of lanes [lane0, lane0 + N) of head hq of query row `row`;
 * writes_lse: this thread also writes the head's LSE (one per head). */
template <int D, int N>
__device__ __forceinline__ void write_final(const sink &s, int32_t row, int hq, int lane0,
                                            const attn_mlu_f32 &st, const float *u, bool writes_lse)
{
    float o[N], lse;
    attn_mlu_finalize_f32(&st, u, N, o, &lse);
    const size_t rh = (size_t)row * s.num_qo_heads + hq;
    const size_t off = rh * D + lane0;
#pragma unroll
    for (int i = 0; i < N; i++)
        attn_store_f32(s.o, s.o_dtype, off + i, o[i]);
    if (s.lse && writes_lse)
        s.lse[rh] = lse;
}

/* The same lanes as a partial state in workspace slot `slot`;
 * writes_scalars: this thread also writes the head's m / l or LSE. */
template <int D, int N>
__device__ __forceinline__ void write_partial(const sink &s, int32_t slot, int hq, int lane0,
                                              const attn_mlu_f32 &st, const float *u,
                                              bool writes_scalars)
{
    const size_t sidx = (size_t)slot * s.num_qo_heads + hq;
    float *pv = s.part_vec + sidx * D + lane0;
    if (s.abi == ATTN_ABI_MLU) {
#pragma unroll
        for (int i = 0; i < N; i++)
            pv[i] = st.valid ? u[i] : 0.f;
        if (writes_scalars) {
            s.part_m[sidx] = st.valid ? st.m : -INFINITY;
            s.part_l[sidx] = st.valid ? st.l : 0.f;
        }
    } else {
        attn_lseo_f32 lo;
        float o[N];
        attn_mlu_to_lseo_f32(&st, u, N, &lo, o);
#pragma unroll
        for (int i = 0; i < N; i++)
            pv[i] = o[i];
        if (writes_scalars)
            s.part_m[sidx] = lo.lse;
    }
}

/* write_final when the split is the whole row (direct), else
 * write_partial into `slot`. */
template <int D, int N>
__device__ __forceinline__ void write(const sink &s, bool direct, int32_t row, int32_t slot, int hq,
                                      int lane0, const attn_mlu_f32 &st, const float *u,
                                      bool writes_scalars)
{
    if (direct)
        write_final<D, N>(s, row, hq, lane0, st, u, writes_scalars);
    else
        write_partial<D, N>(s, slot, hq, lane0, st, u, writes_scalars);
}

} // namespace state_io
} // namespace attn

#endif
