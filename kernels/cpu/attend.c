/* The CPU engine's producer and merge kernels, instantiated for fp32 and
 * fp64 accumulation from one source (attend_impl.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/dtype.h"
#include "kernels/common/state.h"
#include "kernels/cpu/run.h"

/* The score and value loops are plain C that -O3 vectorises (no intrinsics);
 * the project builds with -O2 elsewhere. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#pragma GCC optimize("O3")
#endif

/* The same plain C compiled twice, for baseline x86-64 and for AVX2 (wider
 * vectors, no FMA contraction under ISO C), selected once by the loader
 * through an ifunc: portable binaries that still use the host's vectors.
 * -DATTN_CPU_NO_CLONES builds the baseline only (to test that path). */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(__clang__) &&       \
    !defined(ATTN_CPU_NO_CLONES)
#define ATTN_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ATTN_CPU_CLONES
#endif

size_t cpu_scratch_bytes(const cpu_run *r, size_t acc_bytes)
{
    size_t g = r->group, bk = r->block_keys, gu = g * r->heads_per_unit;
    size_t mlu = acc_bytes == 4 ? sizeof(attn_mlu_f32) : sizeof(attn_mlu_f64);
    size_t acc = gu * r->d_qk + gu * r->d_vo + g * r->d_vo + g * bk + bk * r->d_qk + bk * r->d_vo;
    /* + states, row pointers, and slack for alignment */
    return acc * acc_bytes + gu * mlu + 2 * bk * sizeof(void *) + 64;
}

#define ACC float
#define SFX f32
#define EXPF expf
#include "kernels/cpu/attend_impl.h"
#undef ACC
#undef SFX
#undef EXPF

#define ACC double
#define SFX f64
#define EXPF exp
#include "kernels/cpu/attend_impl.h"
#undef ACC
#undef SFX
#undef EXPF
