/* Portability macros: kernels/common compiles as C11 and as CUDA. */
#ifndef ATTN_COMMON_HD_H
#define ATTN_COMMON_HD_H

#ifdef __CUDACC__
#define ATTN_HD static __host__ __device__ __forceinline__
#else
#define ATTN_HD static inline
#endif

#endif
