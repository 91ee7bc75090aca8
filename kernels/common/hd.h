/* Portability macros: kernels/common compiles as C11 and as CUDA. */
#ifndef ATTN_COMMON_HD_H
#define ATTN_COMMON_HD_H

#ifdef __CUDACC__
#define ATTN_HD static __host__ __device__ __forceinline__
/* Unroll the next loop (its bounds are constants where a kernel inlines it:
 * its arrays then stay in registers); nothing in C. */
#define ATTN_UNROLL _Pragma("unroll")
#else
#define ATTN_HD static inline
#define ATTN_UNROLL
#endif

#endif
