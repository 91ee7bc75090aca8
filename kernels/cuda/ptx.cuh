/* PTX building blocks shared by every CUDA kernel of kernels/cuda (decode
 * today, prefill next): asynchronous copies, shared-memory fragment loads,
 * warp-level mma, warp reductions, exponentials and 16-bit conversions.
 *
 * Everything is a __device__ __forceinline__ function in namespace
 * attn::ptx, so a kernel that uses them compiles to the same SASS as one
 * that spells the asm out, and two kernels never carry two copies of one
 * wrapper.  The element type of a 16-bit operand is a template parameter:
 * __nv_bfloat16 or __half.  Requires sm_80 or newer (cp.async, ldmatrix,
 * mma.m16n8k16, max.NaN).
 */
#ifndef ATTN_CUDA_PTX_CUH
#define ATTN_CUDA_PTX_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace attn
{
namespace ptx
{

/* The SM this thread runs on (the overlap co-residency probe). */
__device__ __forceinline__ unsigned long long smid()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

/* The GPU's global nanosecond timer (one clock for every SM). */
__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* *p += v at GPU scope, a release of everything the CTA ordered before it
 * (a CTA barrier first) and an acquire of what the CTAs that added before
 * released; returns the old value.  One acq_rel atomic instead of a
 * sequentially consistent fence (MEMBAR.SC.GPU) on each side. */
__device__ __forceinline__ int atom_add_acq_rel_gpu(int *p, int v)
{
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
    return old;
}

/* ---- addresses ---------------------------------------------------------- */

/* The shared-state-space address of a generic pointer into shared memory. */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* p rounded up to a multiple of 1024 bytes: where a kernel's swizzled
 * stages start (TMA's 128-byte swizzle repeats every 1024 bytes; the
 * dynamic shared memory is sized 1024 bytes over for it). */
template <typename T> __device__ __forceinline__ T *align_1024(T *p)
{
    return reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(p) + 1023) &
                                 ~static_cast<uintptr_t>(1023));
}

/* ---- cp.async ------------------------------------------------------------ */

/* 16 bytes global -> shared, cached in L2 only (.cg: streamed K/V is read
 * once per CTA).  pred == false zero-fills the 16 bytes instead of reading
 * (gmem is not dereferenced then), so rows past a range never leave stale
 * shared memory in a sum. */
__device__ __forceinline__ void cp_async_cg_zfill(void *smem, const void *gmem, bool pred)
{
    const int n = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(n));
}

/* The same, cached in L1 too (.ca: data a CTA reads more than once). */
__device__ __forceinline__ void cp_async_ca_zfill(void *smem, const void *gmem, bool pred)
{
    const int n = pred ? 16 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(n));
}

/* 4 bytes global -> shared through L1 (.ca: cp.async copies 4 or 8 bytes
 * only cached); the merge fold stages a slot's m and l with it. */
__device__ __forceinline__ void cp_async_ca4(void *smem, const void *gmem)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}

/* An L2 eviction policy for cp_async_cg_zfill_hint and the tensor-map
 * copies (mbar::tensor_copy_4d_hint, the prefill kernel's tma_load_4d):
 * data read once by the whole grid (evict_first) or reused by later CTAs
 * (evict_last).  Not volatile: the same policy each time, so the compiler
 * may hoist it out of a copy loop. */
__device__ __forceinline__ uint64_t l2_policy_evict_first()
{
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}

__device__ __forceinline__ uint64_t l2_policy_evict_last()
{
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}

/* cp_async_cg_zfill with an L2 cache-eviction hint from l2_policy_*. */
__device__ __forceinline__ void cp_async_cg_zfill_hint(void *smem, const void *gmem, bool pred,
                                                       uint64_t policy)
{
    const int n = pred ? 16 : 0;
    asm volatile(
        "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr(smem)),
        "l"(gmem), "r"(n), "l"(policy));
}

/* Close the group of cp.async issued since the last commit. */
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

/* Wait until at most N committed groups of this thread are in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* ---- ldmatrix ------------------------------------------------------------ */

/* Four 8x8 b16 matrices from shared memory; lane i gives the row address
 * of matrix i / 8, row i % 8. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(smem)));
}

/* The same, each 8x8 matrix transposed (V as the B operand of P V). */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(smem)));
}

/* Two 8x8 b16 matrices (lanes 0..15 give the row addresses). */
__device__ __forceinline__ void ldmatrix_x2(uint32_t *r, const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(smem)));
}

/* The transpose of an 8x8 matrix of 16-bit pairs held as a warp fragment
 * (lane l: row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, low half
 * first): lane l then holds row l / 4 of the transpose.  It turns an mma
 * accumulator packed to 16 bits into the B operand of the next mma. */
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x)
{
    uint32_t y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* ---- mma.sync m16n8k16, fp32 accumulation ------------------------------- */

/* c[4] += A (16x16, row, 4 regs) * B (16x8, col, 2 regs) for 16-bit T. */
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float *c, const uint32_t *a,
                                                            uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float *c, const uint32_t *a, uint32_t b0,
                                                     uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- warp shuffles and reductions --------------------------------------- */

/* Butterfly sum over aligned groups of LANES lanes (LANES a power of two
 * <= 32); every lane of the warp must take part. */
template <int LANES> __device__ __forceinline__ float warp_sum(float x)
{
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* The same sum where the block may end inside a warp: only the aligned
 * group of LANES lanes that holds linear thread index `tid` takes part
 * (its lanes all exist when the block size is a multiple of LANES). */
template <int LANES> __device__ __forceinline__ float group_sum(float x, unsigned tid)
{
    const unsigned mask = LANES >= 32
                              ? 0xffffffffu
                              : (((1u << LANES) - 1u) << ((tid & 31u) & ~(unsigned)(LANES - 1)));
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        x += __shfl_xor_sync(mask, x, off);
    return x;
}

/* ---- arithmetic ---------------------------------------------------------- */

/* max(a, b) that returns NaN when either is NaN (PTX max.NaN, sm_80+).
 * fmaxf drops a NaN operand, which would let a NaN score pass for a
 * smaller key set instead of reaching the output (kernels/common/state.h:
 * only an empty state is all-masked). */
__device__ __forceinline__ float max_nan(float a, float b)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* Butterfly max over aligned groups of LANES lanes that propagates NaN:
 * a NaN score in any lane reaches every lane. */
template <int LANES> __device__ __forceinline__ float warp_max_nan(float x)
{
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        x = max_nan(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}

/* 2^x by the SFU (ex2.approx.ftz: ~2 ulp, denormal results flush to 0;
 * -inf gives +0). */
__device__ __forceinline__ float exp2_approx(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

/* ---- 16-bit conversions -------------------------------------------------- */

/* Two floats rounded to nearest into one 32-bit pair of T (lo in the low
 * half, as mma fragments expect). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);

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

/* x rounded to the nearest T and back (the hi half of a hi + lo split). */
template <typename T> __device__ __forceinline__ float round_to(float x);

template <> __device__ __forceinline__ float round_to<__nv_bfloat16>(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}

template <> __device__ __forceinline__ float round_to<__half>(float x)
{
    return __half2float(__float2half_rn(x));
}

/* The 8 elements of T in one 16-byte vector, widened to fp32. */
template <typename T> __device__ __forceinline__ void widen8(const uint4 &r, float *f);

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
        const float2 x = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
        f[2 * i] = x.x;
        f[2 * i + 1] = x.y;
    }
}

/* ---- shared-memory layout ------------------------------------------------ */

/* Index of 16-byte chunk c of row r in a tile of CH chunks per row, XOR-
 * swizzled by row so the 8 rows an ldmatrix reads hit 8 different bank
 * groups (CH a multiple of 8). */
template <int CH> __device__ __forceinline__ int swizzle(int r, int c)
{
    return r * CH + (c ^ (r & 7));
}

} // namespace ptx
} // namespace attn

#endif
