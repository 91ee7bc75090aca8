/* Where the fused mixed-batch kernel serves (mixed_path.h). */
#include "kernels/common/mixed_path.h"

#include "kernels/common/decode_path.h"

const char *attn_mixed_fused_refusal(uint32_t head_dim_qk, uint32_t head_dim_vo, attn_dtype q_dtype,
                                     attn_dtype kv_dtype, uint32_t page_size)
{
    if (head_dim_qk != head_dim_vo || (head_dim_qk != 64 && head_dim_qk != 128))
        return "the fused mixed kernel serves head_dim 64 and 128 (qk = vo)";
    if (kv_dtype != ATTN_BF16 && kv_dtype != ATTN_FP16)
        return "the fused mixed kernel serves bf16 and fp16 K/V";
    if (q_dtype != kv_dtype)
        return "the fused mixed kernel takes q in the K/V dtype";
    if (page_size < 8 || (page_size & (page_size - 1)) != 0)
        return "the fused mixed kernel's decode roles copy page runs by tensor map: page_size "
               "must be a power of two of at least 8";
    return 0;
}

uint64_t attn_mixed_fused_pieces(uint64_t items, uint32_t num_qo_heads, uint32_t num_kv_heads)
{
    if (num_kv_heads == 0 || num_qo_heads % num_kv_heads)
        return 0;
    const uint32_t g = num_qo_heads / num_kv_heads;
    return items * num_kv_heads * ((g + ATTN_DECODE_CHUNK_HEADS - 1) / ATTN_DECODE_CHUNK_HEADS);
}
