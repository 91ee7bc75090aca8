/* Names of the enumerations of attn/types.h, and the facts one list entry
 * carries (a dtype's size, a phase's letter), all generated from the lists.
 *
 * For every list there is one to-string and one from-string function:
 *
 *   const char *attn_<type>_name(attn_<type> v);       wire name, "?" if unknown
 *   int attn_<type>_parse(const char *s, const char *field, attn_<type> *out,
 *                         attn_error_detail *err);    0, or the list's error
 *
 * A parse failure names `field` and lists the allowed names, and leaves *out
 * untouched.  The error code is the one the protocol uses for that field:
 * E_DTYPE, E_RANGE (layout, kv format), E_PHASE, E_MASK_KIND,
 * E_MASK_POLARITY, E_POLICY (schedule, state ABI, split policy), E_RANGE
 * (platform), E_UNKNOWN_OP.  The implementation is kernels/common/names.c.
 */
#ifndef ATTN_NAMES_H
#define ATTN_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(type, LIST, error code of a bad name): the lists that have names. */
#define ATTN_NAMED_ENUMS(X)                                                                        \
    X(attn_dtype, ATTN_DTYPES, ATTN_E_DTYPE)                                                       \
    X(attn_layout, ATTN_LAYOUTS, ATTN_E_RANGE)                                                     \
    X(attn_phase, ATTN_PHASES, ATTN_E_PHASE)                                                       \
    X(attn_kv_format, ATTN_KV_FORMATS, ATTN_E_RANGE)                                               \
    X(attn_mask_kind, ATTN_MASK_KINDS, ATTN_E_MASK_KIND)                                           \
    X(attn_mask_polarity, ATTN_MASK_POLARITIES, ATTN_E_MASK_POLARITY)                              \
    X(attn_schedule_policy, ATTN_SCHEDULES, ATTN_E_POLICY)                                         \
    X(attn_state_abi, ATTN_STATE_ABIS, ATTN_E_POLICY)                                              \
    X(attn_split_policy, ATTN_SPLIT_POLICIES, ATTN_E_POLICY)                                       \
    X(attn_platform, ATTN_PLATFORMS, ATTN_E_RANGE)                                                 \
    X(attn_buffer_kind, ATTN_BUFFER_KINDS, ATTN_E_RANGE)                                           \
    X(attn_run_state, ATTN_RUN_STATES, ATTN_E_RANGE)

/* The wire name of a value and the parser of a wire name, per list (see the
 * head of this file for their contract). */
#define ATTN__NAMES_DECLARE(type, list, code)                                                      \
    const char *type##_name(type v);                                                               \
    int type##_parse(const char *s, const char *field, type *out, attn_error_detail *err);
ATTN_NAMED_ENUMS(ATTN__NAMES_DECLARE)
#undef ATTN__NAMES_DECLARE

/* Bytes of one element of `dt` (0 for a value not on the list).  Inline and,
 * under nvcc, host and device code alike: kernels size rows with it. */
#if defined(__CUDACC__)
#define ATTN__NAMES_HD static __host__ __device__ __forceinline__
#else
#define ATTN__NAMES_HD static inline
#endif
ATTN__NAMES_HD size_t attn_dtype_size(attn_dtype dt)
{
    switch (dt) {
#define ATTN__DTYPE_SIZE_CASE(e, v, s, bytes)                                                      \
    case e:                                                                                        \
        return (bytes);
        ATTN_DTYPES(ATTN__DTYPE_SIZE_CASE)
#undef ATTN__DTYPE_SIZE_CASE
    }
    return 0;
}

/* The one letter of a phase in the diagnostic's phase string ('?' if unknown). */
char attn_phase_letter(attn_phase ph);

/* The phase whose letter is `c`; 1 when there is one, else 0. */
int attn_phase_of_letter(char c, attn_phase *out);

/* Classify (T, C) as prefill, append or decode (seed 0x08B/H); anything else
 * (C <= 0, T < 0) returns ATTN_E_PHASE and leaves *phase untouched.  The one
 * copy of the phase rule: protocol, planner, engines and attnctl call it. */
int attn_phase_classify(int64_t cache_len, int64_t new_len, attn_phase *phase);

/* The default softmax scale 1/sqrt(head_dim_qk) in double precision (the
 * call key records it so; 1 for a zero head_dim of an unvalidated pool). */
double attn_sm_scale_default(uint32_t head_dim_qk);

/* The softmax scale in force: m->sm_scale when given, else the default of
 * the pool's head_dim_qk rounded to float (PROTOCOL.md "sm_scale"); every
 * engine uses it. */
float attn_manifest_sm_scale(const attn_manifest *m, const attn_pool_geometry *g);

/* The tolerance a call declares for verification (seed 0x0BG: a field of the
 * key, never adjusted after the fact).  fp32 storage: max relative error
 * 1e-5; fp16/bf16: relative L2 error 1e-2 and LSE absolute error 1e-3. */
typedef struct attn_tolerance {
    const char *metric; /* "max_rel" or "rel_l2" */
    double rtol;
    double lse_atol;
} attn_tolerance;

/* The declared tolerance of a call with these query and K/V dtypes. */
attn_tolerance attn_tolerance_for(attn_dtype q_dtype, attn_dtype kv_dtype);

#ifdef __cplusplus
}
#endif
#endif
