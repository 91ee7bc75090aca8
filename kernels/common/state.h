/* The exact split-state algebra of seed 0x02, single source for C and CUDA.
 *
 * A split of the K/V axis summarises its *allowed* positions A_c for one
 * query row by (valid, m, l, u):  m = max score, l = sum exp(s - m),
 * u = sum exp(s - m) v  (u is not yet divided by l).  The empty set is
 * (false, -inf, 0, 0).  Merging moves both states into one exponential frame;
 * the empty branches are taken *before* any exponential so that
 * exp(-inf - -inf) is never evaluated (seed 0x02C).
 *
 * The second ABI stores (LSE, O) = (m + log l, u / l); an empty state is
 * LSE = -inf, O = 0.  Conversion between the two is exact up to rounding.
 *
 * Scalars (valid, m, l or LSE) live in a small struct; the width-d vector
 * (u or O) is passed separately so kernels may keep it in registers or
 * shared memory.  Every function exists for float (_f32) and double (_f64).
 */
#ifndef ATTN_COMMON_STATE_H
#define ATTN_COMMON_STATE_H

#include <math.h>
#include <stdbool.h>

#include "hd.h"

#define ATTN__STATE_DEFINE(T, S, EXP, LOG)                                                         \
    /* Scalars of one (valid, m, l, u) state. */                                                   \
    typedef struct attn_mlu_##S {                                                                  \
        bool valid;                                                                                \
        T m;                                                                                       \
        T l;                                                                                       \
    } attn_mlu_##S;                                                                                \
                                                                                                   \
    /* Scalars of one (LSE, O) state; LSE = -inf marks the empty state. */                         \
    typedef struct attn_lseo_##S {                                                                 \
        T lse;                                                                                     \
    } attn_lseo_##S;                                                                               \
                                                                                                   \
    /* THE emptiness rule, one copy for every engine and kernel: a state is                        \
     * empty exactly when its max score m (MLU) or its LSE is -inf.  A NaN or                      \
     * +inf m/LSE is a non-finite input that must reach the output as NaN,                         \
     * never pass for an all-masked split; l (which a NaN makes NaN, and                           \
     * which `l > 0` would then call empty) is never the test. */                                  \
    ATTN_HD bool attn_state_empty_##S(T m_or_lse)                                                  \
    {                                                                                              \
        return m_or_lse == -(T)INFINITY;                                                           \
    }                                                                                              \
                                                                                                   \
    /* The empty identity e = (false, -inf, 0, 0). */                                              \
    ATTN_HD void attn_mlu_empty_##S(attn_mlu_##S *st, T *u, int d)                                 \
    {                                                                                              \
        st->valid = false;                                                                         \
        st->m = -(T)INFINITY;                                                                      \
        st->l = 0;                                                                                 \
        for (int i = 0; i < d; i++)                                                                \
            u[i] = 0;                                                                              \
    }                                                                                              \
                                                                                                   \
    /* Online update with one allowed score s and its value row v (seed 0x02A).                    \
     * Masked positions are never pushed: masking happens before max and sum. */                   \
    ATTN_HD void attn_mlu_push_##S(attn_mlu_##S *st, T *u, T s, const T *v, int d)                 \
    {                                                                                              \
        if (!st->valid) {                                                                          \
            st->valid = true;                                                                      \
            st->m = s;                                                                             \
            st->l = 1;                                                                             \
            for (int i = 0; i < d; i++)                                                            \
                u[i] = v[i];                                                                       \
            return;                                                                                \
        }                                                                                          \
        if (s > st->m) {                                                                           \
            T alpha = EXP(st->m - s);                                                              \
            st->l = st->l * alpha + 1;                                                             \
            for (int i = 0; i < d; i++)                                                            \
                u[i] = u[i] * alpha + v[i];                                                        \
            st->m = s;                                                                             \
        } else {                                                                                   \
            T p = EXP(s - st->m);                                                                  \
            st->l += p;                                                                            \
            for (int i = 0; i < d; i++)                                                            \
                u[i] += p * v[i];                                                                  \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Frame-conversion factors of a binary merge (seed 0x02B/C).  Returns false                   \
     * (and leaves the outputs untouched) when both operands are empty; an                         \
     * empty operand gets factor 0 without evaluating an exponential. */                           \
    ATTN_HD bool attn_mlu_merge_factors_##S(bool va, T ma, bool vb, T mb, T *m, T *alpha, T *beta) \
    {                                                                                              \
        if (!va && !vb)                                                                            \
            return false;                                                                          \
        if (!va) {                                                                                 \
            *m = mb;                                                                               \
            *alpha = 0;                                                                            \
            *beta = 1;                                                                             \
            return true;                                                                           \
        }                                                                                          \
        if (!vb) {                                                                                 \
            *m = ma;                                                                               \
            *alpha = 1;                                                                            \
            *beta = 0;                                                                             \
            return true;                                                                           \
        }                                                                                          \
        *m = ma > mb ? ma : mb;                                                                    \
        *alpha = EXP(ma - *m);                                                                     \
        *beta = EXP(mb - *m);                                                                      \
        return true;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* a := a (+) b in place (seed 0x02C merge_state). */                                          \
    ATTN_HD void attn_mlu_merge_##S(attn_mlu_##S *a, T *ua, const attn_mlu_##S *b, const T *ub,    \
                                    int d)                                                         \
    {                                                                                              \
        T m, alpha, beta;                                                                          \
        if (!b->valid)                                                                             \
            return; /* a (+) e = a: nothing to touch */                                            \
        if (!attn_mlu_merge_factors_##S(a->valid, a->m, b->valid, b->m, &m, &alpha, &beta))        \
            return;                                                                                \
        if (!a->valid) {                                                                           \
            *a = *b;                                                                               \
            for (int i = 0; i < d; i++)                                                            \
                ua[i] = ub[i];                                                                     \
            return;                                                                                \
        }                                                                                          \
        a->m = m;                                                                                  \
        a->l = alpha * a->l + beta * b->l;                                                         \
        for (int i = 0; i < d; i++)                                                                \
            ua[i] = alpha * ua[i] + beta * ub[i];                                                  \
    }                                                                                              \
                                                                                                   \
    /* O = u / l and LSE = m + log l; the all-masked row gives O = 0 and                           \
     * LSE = -inf (the declared policy of seed 0x02C), never NaN.  Only an                         \
     * empty state is all-masked: a non-finite score (NaN or inf input)                            \
     * reaches the output as NaN instead of passing for a masked row. */                           \
    ATTN_HD void attn_mlu_finalize_##S(const attn_mlu_##S *st, const T *u, int d, T *o, T *lse)    \
    {                                                                                              \
        if (!st->valid) {                                                                          \
            for (int i = 0; i < d; i++)                                                            \
                o[i] = 0;                                                                          \
            *lse = -(T)INFINITY;                                                                   \
            return;                                                                                \
        }                                                                                          \
        T inv = (T)1 / st->l;                                                                      \
        for (int i = 0; i < d; i++)                                                                \
            o[i] = u[i] * inv;                                                                     \
        *lse = st->m + LOG(st->l);                                                                 \
    }                                                                                              \
                                                                                                   \
    /* (valid, m, l, u) -> (LSE, O).  In place allowed (o may alias u). */                         \
    ATTN_HD void attn_mlu_to_lseo_##S(const attn_mlu_##S *st, const T *u, int d,                   \
                                      attn_lseo_##S *out, T *o)                                    \
    {                                                                                              \
        attn_mlu_finalize_##S(st, u, d, o, &out->lse);                                             \
    }                                                                                              \
                                                                                                   \
    /* (LSE, O) -> (valid, m, l, u) in the frame m = LSE, where l = 1 and u = O.                   \
     * In place allowed (u may alias o). */                                                        \
    ATTN_HD void attn_lseo_to_mlu_##S(const attn_lseo_##S *in, const T *o, int d,                  \
                                      attn_mlu_##S *st, T *u)                                      \
    {                                                                                              \
        if (attn_state_empty_##S(in->lse)) {                                                       \
            attn_mlu_empty_##S(st, u, d);                                                          \
            return;                                                                                \
        }                                                                                          \
        st->valid = true;                                                                          \
        st->m = in->lse;                                                                           \
        st->l = 1;                                                                                 \
        for (int i = 0; i < d; i++)                                                                \
            u[i] = o[i];                                                                           \
    }                                                                                              \
                                                                                                   \
    /* (LSE, O) merge with a stable pivot (seed 0x02F): a := a (+) b. */                           \
    ATTN_HD void attn_lseo_merge_##S(attn_lseo_##S *a, T *oa, const attn_lseo_##S *b, const T *ob, \
                                     int d)                                                        \
    {                                                                                              \
        /* only -inf is empty: a NaN state stays NaN through the merge */                          \
        bool va = !attn_state_empty_##S(a->lse), vb = !attn_state_empty_##S(b->lse);               \
        if (!vb)                                                                                   \
            return;                                                                                \
        if (!va) {                                                                                 \
            *a = *b;                                                                               \
            for (int i = 0; i < d; i++)                                                            \
                oa[i] = ob[i];                                                                     \
            return;                                                                                \
        }                                                                                          \
        T p = a->lse > b->lse ? a->lse : b->lse;                                                   \
        T lse = p + LOG(EXP(a->lse - p) + EXP(b->lse - p));                                        \
        T wa = EXP(a->lse - lse), wb = EXP(b->lse - lse);                                          \
        for (int i = 0; i < d; i++)                                                                \
            oa[i] = wa * oa[i] + wb * ob[i];                                                       \
        a->lse = lse;                                                                              \
    }                                                                                              \
                                                                                                   \
    /* n-way merge in one frame (seed 0x02B: the merge is associative and                          \
     * commutative, so n states may be folded against one pivot instead of by                      \
     * n - 1 binary merges).  A fold keeps (pivot, l, u): the states' l and u                      \
     * weighted by EXP(m_i - pivot), where m_i is the m of an MLU state or the                     \
     * LSE of an (LSE, O) state (whose l is 1 and u is O); it starts empty                         \
     * (-inf, 0, 0).  A batch of states raises the pivot once to their max                         \
     * (attn_pivot_max) and is then added state by state: the weights are                          \
     * independent of one another, so a kernel pays one exponential per state                      \
     * and one rescale per batch instead of a dependent chain of exponentials                      \
     * and a logarithm per state.  The result, attn_pivot_state with u,                            \
     * finalizes like any MLU state. */                                                            \
                                                                                                   \
    /* The pivot after one more state: the max, where -inf (empty) never                           \
     * wins and a NaN always does, so a row whose only non-empty state is NaN                      \
     * finalizes as NaN, not as the all-masked row (a NaN or +inf m beside                         \
     * valid states is NaN through its weight anyway). */                                          \
    ATTN_HD T attn_pivot_max_##S(T pivot, T m_or_lse)                                              \
    {                                                                                              \
        return m_or_lse > pivot || m_or_lse != m_or_lse ? m_or_lse : pivot;                        \
    }                                                                                              \
                                                                                                   \
    /* Move the sums to the pivot `to` (>= the current pivot).  Sums taken                         \
     * while every state was empty are 0: no exp(-inf - -inf) (seed 0x02C). */                     \
    ATTN_HD void attn_pivot_raise_##S(T *pivot, T *sum_l, T *sum_u, int d, T to)                   \
    {                                                                                              \
        T r = attn_state_empty_##S(*pivot) ? (T)0 : EXP(*pivot - to);                              \
        *sum_l *= r;                                                                               \
        for (int i = 0; i < d; i++)                                                                \
            sum_u[i] *= r;                                                                         \
        *pivot = to;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* Add one state (m_i, l_i, u_i), m_i <= pivot; an empty state is                              \
     * skipped before any exponential and its vector is never read. */                             \
    ATTN_HD void attn_pivot_add_##S(T pivot, T *sum_l, T *sum_u, int d, T m_i, T l_i,              \
                                    const T *u_i)                                                  \
    {                                                                                              \
        if (attn_state_empty_##S(m_i))                                                             \
            return;                                                                                \
        T w = EXP(m_i - pivot);                                                                    \
        *sum_l = w * l_i + *sum_l;                                                                 \
        for (int i = 0; i < d; i++)                                                                \
            sum_u[i] = w * u_i[i] + sum_u[i];                                                      \
    }                                                                                              \
                                                                                                   \
    /* One batch of n states, state j = (m[j], l[j], u + j d): the pivot is                        \
     * raised once to their max, then every state is added in order. */                            \
    ATTN_HD void attn_pivot_batch_##S(T *pivot, T *sum_l, T *sum_u, int d, int n, const T *m,      \
                                      const T *l, const T *u)                                      \
    {                                                                                              \
        T next = *pivot;                                                                           \
        ATTN_UNROLL for (int j = 0; j < n; j++) next = attn_pivot_max_##S(next, m[j]);             \
        attn_pivot_raise_##S(pivot, sum_l, sum_u, d, next);                                        \
        ATTN_UNROLL for (int j = 0; j < n; j++)                                                    \
            attn_pivot_add_##S(*pivot, sum_l, sum_u, d, m[j], l[j], u + j * d);                    \
    }                                                                                              \
                                                                                                   \
    /* The folded sums as an MLU state (its vector is the fold's u). */                            \
    ATTN_HD attn_mlu_##S attn_pivot_state_##S(T pivot, T l)                                        \
    {                                                                                              \
        attn_mlu_##S st;                                                                           \
        st.valid = !attn_state_empty_##S(pivot);                                                   \
        st.m = pivot;                                                                              \
        st.l = st.valid ? l : (T)0;                                                                \
        return st;                                                                                 \
    }

/* cppcheck's whole-program check reads the macro's functions as one line
 * and takes an output pointer of one (attn_mlu_empty's u, merge_factors' m,
 * finalize's lse) for the read-and-update sums of another (attn_pivot_*):
 * a false positive, suppressed here only. */
/* cppcheck-suppress ctuuninitvar */
ATTN__STATE_DEFINE(double, f64, exp, log)
/* cppcheck-suppress ctuuninitvar */
ATTN__STATE_DEFINE(float, f32, expf, logf)

#endif
