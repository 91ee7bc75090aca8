/* The page-table walk of kernels/common/addr.h, in the form device code
 * uses it: a flattened page list per request and element strides, so one
 * formula serves NHD and HND (seed 0x04B, 0x04D):
 *
 *   elem(key, h, i) = page_of(key) * page_stride + (key % P) * row_stride
 *                     + h * head_stride + i
 *
 * with NHD: page_stride = P H_kv d, row_stride = H_kv d, head_stride = d;
 *      HND: page_stride = H_kv P d, row_stride = d,      head_stride = P d
 * (attn_kv_addr_elem of addr.h, the host's translation, gives the same
 * offsets).  The keys a work item reads are its range intersected with the
 * request's visible runs [lo0, hi0) U [lo1, hi1) (the decode mask, already
 * applied by the host: seed 0x05E), walked as one virtual index.
 */
#ifndef ATTN_CUDA_PAGED_CUH
#define ATTN_CUDA_PAGED_CUH

#include <stdint.h>

namespace attn
{
namespace paged
{

/* The visible keys of one work item as a virtual index v in [0, n):
 * v < na walks [a0, a0 + na), the rest walks [b0, b0 + n - na). */
struct key_walk {
    int64_t a0, na, b0, n;

    /* The item's keys [begin, end) that the runs [lo0, hi0), [lo1, hi1)
     * (disjoint, in key order) leave visible. */
    __device__ __forceinline__ static key_walk of(int64_t begin, int64_t end, int64_t lo0,
                                                  int64_t hi0, int64_t lo1, int64_t hi1)
    {
        key_walk w;
        w.a0 = begin > lo0 ? begin : lo0;
        const int64_t a1 = end < hi0 ? end : hi0;
        w.na = a1 > w.a0 ? a1 - w.a0 : 0;
        w.b0 = begin > lo1 ? begin : lo1;
        const int64_t b1 = end < hi1 ? end : hi1;
        w.n = w.na + (b1 > w.b0 ? b1 - w.b0 : 0);
        return w;
    }

    /* Logical key of virtual index v (v < n). */
    __device__ __forceinline__ int64_t key(int64_t v) const
    {
        return v < na ? a0 + v : b0 + (v - na);
    }
};

/* One request's page list and the store's strides (elements). */
struct page_table {
    const int32_t *pages; /* this request's entries of the flattened page list */
    uint32_t page_shift;  /* log2(P) */
    int64_t page_stride, row_stride;

    /* Element offset of logical key `key` at kv head 0, lane 0. */
    __device__ __forceinline__ int64_t row_offset(int64_t key) const
    {
        const int64_t slot = key & (((int64_t)1 << page_shift) - 1);
        return (int64_t)pages[key >> page_shift] * page_stride + slot * row_stride;
    }
};

} // namespace paged
} // namespace attn

#endif
