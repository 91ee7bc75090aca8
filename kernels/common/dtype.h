/* Storage dtypes of attnd: fp32, fp16 (IEEE binary16) and bf16 (bfloat16),
 * single source for the CPU engine and the CUDA kernels.
 *
 * Widening (fp16/bf16 -> fp32) is exact.  Narrowing (fp32 -> fp16/bf16)
 * rounds to nearest, ties to even, like the hardware conversions, so the CPU
 * engine and a GPU kernel store the same bits for the same value (seed 0x03H:
 * dtype is a field-level contract).  NaN stays NaN (quiet, sign kept) and is
 * never rounded into an infinity; overflow gives a signed infinity.
 */
#ifndef ATTN_COMMON_DTYPE_H
#define ATTN_COMMON_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attn/names.h" /* attn_dtype_size, attn_dtype_name */
#include "attn/types.h"
#include "hd.h"

/* The bits of an fp32 (memcpy: no aliasing games, works in device code). */
ATTN_HD uint32_t attn__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The fp32 with these bits. */
ATTN_HD float attn__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 bits -> fp32 (exact: bf16 is the top half of an fp32). */
ATTN_HD float attn_bf16_to_f32(uint16_t h)
{
    return attn__bits_f32((uint32_t)h << 16);
}

/* fp32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN. */
ATTN_HD uint16_t attn_f32_to_bf16(float f)
{
    uint32_t u = attn__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the lowest kept bit rounds ties to even; a carry
     * into the exponent is the correct result, up to +-inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* fp16 bits -> fp32 (exact, subnormals included). */
ATTN_HD float attn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) /* inf or NaN; NaN payload kept */
        return attn__bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in fp32 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return attn__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* fp32 -> fp16 bits, round to nearest even (subnormals too); NaN stays a
 * quiet NaN, values at or past 65520 become infinity. */
ATTN_HD uint16_t attn_f32_to_f16(float f)
{
    uint32_t u = attn__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t x = u & 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf, or NaN made quiet */
        return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0));
    if (x >= 0x477ff000u) /* >= 65520: the tie above 65504 rounds to even, i.e. to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) {
        /* below 2^-14: fp16 subnormal, value m * 2^(e-150) in units of 2^-24 */
        if (x < 0x33000000u) /* below 2^-25 (and the 2^-25 tie) rounds to zero */
            return sign;
        uint32_t e = x >> 23;
        uint32_t m = (x & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 .. 24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++; /* may carry into the smallest normal, which has the right bits */
        return (uint16_t)(sign | r);
    }
    /* normal: rebias the exponent, then round the 13 dropped bits to even */
    x = x - 0x38000000u + 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | (x >> 13));
}

/* Element `i` of an array of dtype `dt`, widened to fp32. */
ATTN_HD float attn_load_f32(const void *base, attn_dtype dt, size_t i)
{
    switch (dt) {
    case ATTN_FP16:
        return attn_f16_to_f32(((const uint16_t *)base)[i]);
    case ATTN_BF16:
        return attn_bf16_to_f32(((const uint16_t *)base)[i]);
    case ATTN_FP32:
    default:
        return ((const float *)base)[i];
    }
}

/* Store fp32 `v` as element `i` of an array of dtype `dt` (rounded to even). */
ATTN_HD void attn_store_f32(void *base, attn_dtype dt, size_t i, float v)
{
    switch (dt) {
    case ATTN_FP16:
        ((uint16_t *)base)[i] = attn_f32_to_f16(v);
        break;
    case ATTN_BF16:
        ((uint16_t *)base)[i] = attn_f32_to_bf16(v);
        break;
    case ATTN_FP32:
    default:
        ((float *)base)[i] = v;
        break;
    }
}

/* Round fp32 `v` through dtype `dt` and back: the value a store then a load
 * of `dt` gives (tests compare against references built on rounded inputs). */
ATTN_HD float attn_round_through(attn_dtype dt, float v)
{
    switch (dt) {
    case ATTN_FP16:
        return attn_f16_to_f32(attn_f32_to_f16(v));
    case ATTN_BF16:
        return attn_bf16_to_f32(attn_f32_to_bf16(v));
    case ATTN_FP32:
    default:
        return v;
    }
}

#endif
