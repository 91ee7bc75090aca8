/* The producer choice of the CUDA decode engine (decode_path.h). */
#include "kernels/common/decode_path.h"

#include <stddef.h>

#include "attn/names.h"

/* cp.async.bulk moves whole 16-byte units between 16-byte aligned
 * addresses: every row start (page, slot and head offsets) must be one. */
static int aligned16(int64_t elems, size_t es)
{
    return ((uint64_t)elems * es) % 16u == 0;
}

/* A shape whose compute warps may take the keys as the mma's M rows. */
static int keys_as_rows_shape(const attn_decode_path_in *in)
{
    return in->group >= 1 && in->group <= 8 && in->q_dtype == in->kv_dtype &&
           (in->head_dim == 64 || in->head_dim == 128 || in->head_dim == 256);
}

int attn_decode_path_bulk(const attn_decode_path_in *in)
{
    if (in->bulk != ATTN_DECODE_BULK_AUTO)
        return in->bulk;
    if (in->head_dim == 128 && in->page_size >= 8 &&
        (keys_as_rows_shape(in) || in->keys_per_item == 0 ||
         in->keys_per_item >= ATTN_DECODE_TMAP_MIN_KEYS))
        return ATTN_DECODE_BULK_TMAP;
    if (in->head_dim == 128 && in->page_size >= 8 && in->pieces > 0 && in->sm_count > 0 &&
        in->pieces <= in->sm_count)
        return 4; /* one CTA per SM is all the grid fills */
    if (in->head_dim == 256 && in->page_size >= 8 && in->q_dtype == in->kv_dtype &&
        (in->keys_per_item == 0 || in->keys_per_item >= ATTN_DECODE_TMAP_MIN_KEYS))
        return ATTN_DECODE_BULK_TMAP;
    return in->head_dim == 256 ? 4 : 0;
}

attn_decode_producer attn_decode_path_pick(const attn_decode_path_in *in, const char **why)
{
    const char *no = NULL;
    const size_t es = attn_dtype_size(in->kv_dtype);
    const int bulk = attn_decode_path_bulk(in);
    if (why)
        *why = NULL;
    if (in->simt)
        return ATTN_DECODE_SIMT;
    if (!bulk)
        return ATTN_DECODE_TC;
    if (bulk != 1 && bulk != 2 && bulk != 4 && bulk != ATTN_DECODE_BULK_TMAP)
        no = "the copy-warp producer runs 1, 2 or 4 copy warps, or 8 (tensor-map copies)";
    else if (bulk == ATTN_DECODE_BULK_TMAP && (in->page_size < 8 || in->num_pages == 0))
        no = in->num_pages == 0 ? "tensor-map copies need the store's page count"
                                : "tensor-map copies need pages of 8 rows or more";
    else if (bulk == 2 && in->head_dim != 128)
        no = "two copy warps are built for head_dim 128 only";
    else if (es != 2)
        no = "the copy-warp producer has kernels for 2-byte K/V (bf16, fp16) only";
    else if (in->head_dim != 64 && in->head_dim != 128 && in->head_dim != 256)
        no = "the copy-warp producer has kernels for head_dim 64, 128 and 256 only";
    else if (!aligned16(in->page_stride, es) || !aligned16(in->row_stride, es) ||
             !aligned16(in->head_stride, es))
        no = "a K/V row does not start on a 16-byte boundary (page, row or head stride)";
    else if (in->k_addr % 16u || in->v_addr % 16u)
        no = "the K or V store is not 16-byte aligned";
    else if (in->q_dtype != in->kv_dtype && in->head_dim < 256)
        no = "q's dtype is not the cache's: the hi + lo variant of the copy-warp producer holds "
             "fewer CTAs per SM below head_dim 256";
    if (no == NULL)
        return ATTN_DECODE_TC_BULK;
    if (why)
        *why = no;
    return ATTN_DECODE_TC;
}

int attn_decode_path_keys_as_rows(const attn_decode_path_in *in)
{
    if (!keys_as_rows_shape(in))
        return 0;
    const attn_decode_producer p = attn_decode_path_pick(in, NULL);
    if (p == ATTN_DECODE_TC) /* the cp.async producer */
        return in->head_dim <= 128;
    if (p != ATTN_DECODE_TC_BULK)
        return 0;
    const int bulk = attn_decode_path_bulk(in);
    return bulk == ATTN_DECODE_BULK_TMAP || (in->head_dim == 256 && bulk == 4);
}

int attn_decode_path_plan_bulk(const attn_decode_path_in *in, uint64_t units)
{
    if (in->bulk == ATTN_DECODE_BULK_AUTO && in->head_dim == 64 && in->page_size >= 8 &&
        keys_as_rows_shape(in) && units > 0 && in->sm_count > 0 &&
        units <= (uint64_t)ATTN_DECODE_TMAP_D64_CTAS * in->sm_count)
        return ATTN_DECODE_BULK_TMAP;
    return in->bulk;
}

uint32_t attn_decode_path_persist(const attn_decode_path_in *in, uint32_t persist, uint64_t pieces)
{
    if (persist == 0 || pieces == 0 || in->head_dim != 128 || in->q_dtype != in->kv_dtype)
        return 0;
    if (attn_decode_path_pick(in, NULL) != ATTN_DECODE_TC_BULK ||
        attn_decode_path_bulk(in) != ATTN_DECODE_BULK_TMAP)
        return 0;
    return pieces < persist ? (uint32_t)pieces : persist;
}

uint32_t attn_decode_keys_per_item(const attn_work_item *items, uint32_t n)
{
    uint64_t keys = 0;
    for (uint32_t i = 0; i < n; i++)
        keys += (uint64_t)(items[i].kv_end - items[i].kv_begin);
    return n ? (uint32_t)(keys / n) : 0;
}

uint64_t attn_decode_kv_bytes(const attn_work_item *items, uint32_t n, uint32_t num_kv_heads,
                              uint32_t head_dim, uint32_t elem_bytes)
{
    uint64_t keys = 0;
    for (uint32_t i = 0; i < n; i++)
        keys += (uint64_t)(items[i].kv_end - items[i].kv_begin);
    return keys * num_kv_heads * head_dim * elem_bytes * 2u;
}

int attn_decode_path_l2_evict_first(int force, uint64_t kv_bytes, uint64_t l2_bytes)
{
    if (force >= 0)
        return force != 0;
    return l2_bytes != 0 && kv_bytes > l2_bytes;
}

int attn_decode_path_fused(int asked, int simt, uint32_t group, uint32_t head_dim)
{
    const uint32_t heads = group < ATTN_DECODE_CHUNK_HEADS ? group : ATTN_DECODE_CHUNK_HEADS;
    return asked && !simt && group > 0 && heads * (head_dim / 4u) <= 128u;
}

const char *attn_decode_producer_name(attn_decode_producer p)
{
    static const char *const names[] = {
#define ATTN__X(id, name) name,
        ATTN_DECODE_PRODUCERS(ATTN__X)
#undef ATTN__X
    };
    return (unsigned)p < ATTN_DECODE_PRODUCER_COUNT ? names[p] : "?";
}
