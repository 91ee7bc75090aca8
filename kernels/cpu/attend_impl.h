/* Producer and merge kernels of the CPU engine, written once and
 * instantiated by attend.c for each accumulation precision:
 *
 *   #define ACC double  / float      scalar type of scores and states
 *   #define SFX f64     / f32        suffix of the state.h functions
 *   #define EXPF exp    / expf
 *
 * No include guard: included once per precision.
 */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define MLU CAT(attn_mlu_, SFX)
#define LSEO CAT(attn_lseo_, SFX)
#define FN(name) CAT(name, CAT(_, SFX))

/* Independent partial sums per dot product: the compiler vectorises the
 * lane loop without reassociating, so results do not depend on -O flags. */
#define LANES (32 / (int)sizeof(ACC))

#ifndef ATTN_CPU_PREFETCH_BLOCKS
#define ATTN_CPU_PREFETCH_BLOCKS 1
#endif

/* Per-thread scratch, carved from one block (see cpu_scratch_bytes). */
typedef struct FN(scratch) {
    ACC *q;         /* [units heads][g][d_qk]: query rows, pre-scaled */
    ACC *u;         /* [units heads][g][d_vo]: running numerators */
    ACC *ub;        /* [g][d_vo]: numerators of the current key block */
    ACC *s;         /* [g][BK]: scores, then weights */
    ACC *kbuf;      /* [BK][d_qk]: converted K rows when storage != ACC */
    ACC *vbuf;      /* [BK][d_vo] */
    MLU *st;        /* [units heads][g] running states */
    const ACC **kp; /* [BK] K row pointers of the block */
    const ACC **vp; /* [BK] */
} FN(scratch);

static void FN(carve)(const cpu_run *r, void *mem, FN(scratch) * sc)
{
    size_t g = r->group, bk = r->block_keys, gu = g * r->heads_per_unit;
    /* widest alignment first: pointers, states, then ACC arrays */
    sc->kp = (const ACC **)mem;
    sc->vp = sc->kp + bk;
    sc->st = (MLU *)(void *)(sc->vp + bk);
    ACC *p = (ACC *)(void *)(sc->st + gu);
    sc->q = p, p += gu * r->d_qk;
    sc->u = p, p += gu * r->d_vo;
    sc->ub = p, p += g * r->d_vo;
    sc->s = p, p += g * bk;
    sc->kbuf = p, p += bk * r->d_qk;
    sc->vbuf = p, p += bk * r->d_vo;
}

/* Scores of one K row against the g query rows of the group.  LANES
 * independent partial sums per dot product, combined in a fixed tree, so
 * the lane loop vectorises without reassociation and results do not depend
 * on flags.  (Interleaving several keys here makes GCC's loop vectoriser
 * choose a permute-heavy outer-loop form that is 2-4x slower.) */
static inline __attribute__((always_inline)) void FN(scores_row)(const ACC *restrict q,
                                                                 const ACC *restrict k, uint32_t g,
                                                                 uint32_t d, ACC *restrict out,
                                                                 size_t out_stride)
{
    for (uint32_t hh = 0; hh < g; hh++) {
        const ACC *restrict qh = q + (size_t)hh * d;
        ACC acc[LANES];
        uint32_t x = 0;
        for (int j = 0; j < LANES; j++)
            acc[j] = 0;
        for (; x + LANES <= d; x += LANES)
            for (int j = 0; j < LANES; j++)
                acc[j] += qh[x + j] * k[x + j];
        for (int j = 0; x < d; x++, j++)
            acc[j] += qh[x] * k[x];
        for (int w = LANES / 2; w > 0; w /= 2)
            for (int j = 0; j < w; j++)
                acc[j] += acc[j + w];
        out[hh * out_stride] = acc[0];
    }
}

#if defined(__GNUC__)
/* Four keys at a time with GCC/Clang generic vectors (portable C, no
 * intrinsics): four independent accumulation chains per query head, which
 * the loop vectoriser will not form by itself without a permute-heavy
 * outer-loop plan.  Requires d % LANES == 0. */
typedef ACC FN(vec) __attribute__((vector_size(32)));

/* Horizontal sum of the LANES elements at t, in a fixed tree. */
static inline __attribute__((always_inline)) ACC FN(tree_sum)(ACC *t)
{
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            t[j] += t[j + w];
    return t[0];
}

static inline __attribute__((always_inline)) void FN(scores4)(const ACC *restrict q,
                                                              const ACC *const *kp, uint32_t g,
                                                              uint32_t d, ACC *restrict out,
                                                              size_t out_stride)
{
    const ACC *k0 = kp[0], *k1 = kp[1], *k2 = kp[2], *k3 = kp[3];
    for (uint32_t hh = 0; hh < g; hh++) {
        const ACC *qh = q + (size_t)hh * d;
        FN(vec) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, qv, kv;
        for (uint32_t x = 0; x < d; x += LANES) {
            memcpy(&qv, qh + x, sizeof qv); /* unaligned vector loads */
            memcpy(&kv, k0 + x, sizeof kv);
            a0 += qv * kv;
            memcpy(&kv, k1 + x, sizeof kv);
            a1 += qv * kv;
            memcpy(&kv, k2 + x, sizeof kv);
            a2 += qv * kv;
            memcpy(&kv, k3 + x, sizeof kv);
            a3 += qv * kv;
        }
        ACC t[4][LANES], *o = out + hh * out_stride;
        memcpy(t[0], &a0, sizeof a0);
        memcpy(t[1], &a1, sizeof a1);
        memcpy(t[2], &a2, sizeof a2);
        memcpy(t[3], &a3, sizeof a3);
        for (int j = 0; j < 4; j++)
            o[j] = FN(tree_sum)(t[j]);
    }
}
#define ATTN_CPU_VEC 1
#endif

/* Point block row j at one K and one V row, converting them into the
 * scratch when the storage dtype is not ACC (fp16/bf16 widen exactly). */
static inline void FN(put_row)(const cpu_run *r, FN(scratch) * sc, int64_t j, const void *krow,
                               const void *vrow)
{
    if (r->kv_dtype == ATTN_FP32 && sizeof(ACC) == sizeof(float)) {
        sc->kp[j] = (const ACC *)krow;
        sc->vp[j] = (const ACC *)vrow;
        return;
    }
    ACC *kd = sc->kbuf + (size_t)j * r->d_qk, *vd = sc->vbuf + (size_t)j * r->d_vo;
    for (uint32_t x = 0; x < r->d_qk; x++)
        kd[x] = (ACC)attn_load_f32(krow, r->kv_dtype, x);
    for (uint32_t x = 0; x < r->d_vo; x++)
        vd[x] = (ACC)attn_load_f32(vrow, r->kv_dtype, x);
    sc->kp[j] = kd;
    sc->vp[j] = vd;
}

/* Ask for the pool rows [pos, end) of request b, K/V heads [hk0, hk0 + nh),
 * ahead of use.  Paged rows come in short runs (one head's rows of one page
 * in HND, H_kv x d apart in NHD) that the hardware stream prefetchers keep
 * re-learning, so the producer requests ATTN_CPU_PREFETCH_BLOCKS blocks
 * ahead while it computes (into L2). */
static inline void FN(prefetch_rows)(const cpu_run *r, uint32_t b, uint32_t hk0, uint32_t nh,
                                     int64_t pos, int64_t end)
{
#if defined(__GNUC__)
    const attn_kv_addr *a = &r->addr;
    int64_t T = r->m->requests[b].cache_len;
    size_t es = attn_dtype_size(r->kv_dtype);
    int64_t kstride = attn_kv_addr_slot_stride(a, r->d_qk) * (int64_t)es;
    int64_t vstride = attn_kv_addr_slot_stride(a, r->d_vo) * (int64_t)es;
    size_t kbytes = r->d_qk * es, vbytes = r->d_vo * es;
    if (end > T)
        end = T;
    while (pos < end) {
        attn_kv_seg seg;
        attn_kv_addr_segment(a, b, pos, end, &seg);
        const char *kb = (const char *)r->k_store +
                         attn_kv_addr_elem(a, seg.page, seg.slot, hk0, 0, r->d_qk) * (int64_t)es;
        const char *vb = (const char *)r->v_store +
                         attn_kv_addr_elem(a, seg.page, seg.slot, hk0, 0, r->d_vo) * (int64_t)es;
        /* NHD rows of consecutive heads are adjacent: nh heads are one run */
        for (int64_t j = 0; j < seg.len; j++) {
            for (size_t o = 0; o < kbytes * nh; o += 64)
                __builtin_prefetch(kb + j * kstride + o, 0, 3);
            for (size_t o = 0; o < vbytes * nh; o += 64)
                __builtin_prefetch(vb + j * vstride + o, 0, 3);
        }
        pos += seg.len;
    }
#else
    (void)r, (void)b, (void)hk0, (void)nh, (void)pos, (void)end;
#endif
}

/* Row pointers of keys [pos, pos + n) of request b, K/V head hk: rows below
 * T from the store through the translator's page segments (seed 0x04E),
 * rows from T on from the staged new rows (seed 0x08C: never the pool). */
static void FN(gather)(const cpu_run *r, FN(scratch) * sc, uint32_t b, uint32_t hk, int64_t pos,
                       int64_t n)
{
    const attn_kv_addr *a = &r->addr;
    int64_t T = r->m->requests[b].cache_len, end = pos + n, k = 0;
    size_t es = attn_dtype_size(r->kv_dtype);
    const unsigned char *ks = (const unsigned char *)r->k_store;
    const unsigned char *vs = (const unsigned char *)r->v_store;
    const unsigned char *kn = (const unsigned char *)r->k_new;
    const unsigned char *vn = (const unsigned char *)r->v_new;
    int64_t kstride = attn_kv_addr_slot_stride(a, r->d_qk) * (int64_t)es;
    int64_t vstride = attn_kv_addr_slot_stride(a, r->d_vo) * (int64_t)es;

    while (pos < end && pos < T) {
        attn_kv_seg seg;
        attn_kv_addr_segment(a, b, pos, end < T ? end : T, &seg);
        const unsigned char *kb =
            ks + attn_kv_addr_elem(a, seg.page, seg.slot, hk, 0, r->d_qk) * (int64_t)es;
        const unsigned char *vb =
            vs + attn_kv_addr_elem(a, seg.page, seg.slot, hk, 0, r->d_vo) * (int64_t)es;
        for (int64_t j = 0; j < seg.len; j++, k++)
            FN(put_row)(r, sc, k, kb + j * kstride, vb + j * vstride);
        pos += seg.len;
    }
    for (; pos < end; pos++, k++) {
        size_t row = (size_t)r->m->qo_indptr[b] + (size_t)(pos - T);
        FN(put_row)
        (r, sc, k, kn + (row * r->num_kv_heads + hk) * r->d_qk * es,
         vn + (row * r->num_kv_heads + hk) * r->d_vo * es);
    }
}

/* One block of n keys starting at key `pos` for query row i: scores, the
 * block's allowed-set summary per head (seed 0x03I summarize_allowed_split),
 * merged into the running states with attn_mlu_merge.  Hidden keys (a
 * non-exact mask) are dropped from the block before any score is formed
 * (seed 0x05C: masking happens before max and sum), so the loops below run
 * over allowed keys only.  DQ and DV are constants in the specialised
 * callers so the compiler sees fixed trip counts. */
static inline __attribute__((always_inline)) void
FN(block_body)(const cpu_run *r, FN(scratch) * sc, uint32_t b, int64_t i, int64_t pos, int64_t n,
               int exact, const uint32_t DQ, const uint32_t DV)
{
    uint32_t g = r->group;
    size_t bk = r->block_keys;
    if (!exact) {
        int64_t kept = 0;
        for (int64_t k = 0; k < n; k++)
            if (attn_mask_visible(&r->mask, b, i, pos + k)) {
                sc->kp[kept] = sc->kp[k];
                sc->vp[kept] = sc->vp[k];
                kept++;
            }
        n = kept;
        if (n == 0)
            return; /* a SKIP block is the empty identity (seed 0x06F) */
    }
    int64_t k4 = 0;
#ifdef ATTN_CPU_VEC
    if (DQ % LANES == 0)
        for (; k4 + 4 <= n; k4 += 4)
            FN(scores4)(sc->q, sc->kp + k4, g, DQ, sc->s + k4, bk);
#endif
    for (; k4 < n; k4++)
        FN(scores_row)(sc->q, sc->kp[k4], g, DQ, sc->s + k4, bk);
    for (uint32_t hh = 0; hh < g; hh++) {
        ACC *s = sc->s + hh * bk, m = s[0], l = 0;
        for (int64_t k = 1; k < n; k++)
            m = s[k] > m ? s[k] : m;
        for (int64_t k = 0; k < n; k++) {
            s[k] = EXPF(s[k] - m);
            l += s[k];
        }
        /* Every key here is allowed (masked keys were dropped above), so the
         * block is valid; finite inputs give l >= 1, and a non-finite score
         * (NaN or inf in q or K) makes the row NaN rather than passing for
         * a masked block or a smaller key set. */
        MLU blk = {true, m, l};
        /* u_blk = sum_k p_k v_k, one chunk of lanes at a time so the
         * partial sums stay in registers across the block's keys */
        ACC *restrict ub = sc->ub + (size_t)hh * DV;
        uint32_t x = 0;
#ifdef ATTN_CPU_VEC
        for (; x + 8 * LANES <= DV; x += 8 * LANES) {
            FN(vec) acc[8], vv;
            for (int j = 0; j < 8; j++)
                acc[j] = (FN(vec)){0};
            for (int64_t k = 0; k < n; k++) {
                const ACC *v = sc->vp[k] + x;
                ACC p = s[k];
                for (int j = 0; j < 8; j++) {
                    memcpy(&vv, v + j * LANES, sizeof vv);
                    acc[j] += p * vv;
                }
            }
            memcpy(ub + x, acc, sizeof acc);
        }
#endif
        for (; x + LANES <= DV; x += LANES) {
            ACC acc[LANES];
            for (int j = 0; j < LANES; j++)
                acc[j] = 0;
            for (int64_t k = 0; k < n; k++) {
                const ACC *restrict v = sc->vp[k] + x;
                ACC p = s[k];
                for (int j = 0; j < LANES; j++)
                    acc[j] += p * v[j];
            }
            for (int j = 0; j < LANES; j++)
                ub[x + j] = acc[j];
        }
        for (; x < DV; x++) {
            ACC acc = 0;
            for (int64_t k = 0; k < n; k++)
                acc += s[k] * sc->vp[k][x];
            ub[x] = acc;
        }
        CAT(attn_mlu_merge_, SFX)(&sc->st[hh], sc->u + (size_t)hh * DV, &blk, ub, (int)DV);
    }
}

/* The block for the head widths that serving models use, with constant
 * widths, and one generic fallback; each is also compiled for AVX2 and
 * picked at load time where the CPU has it (ATTN_CPU_CLONES, attend.c). */
ATTN_CPU_CLONES static void FN(block_64)(const cpu_run *r, FN(scratch) * sc, uint32_t b, int64_t i,
                                         int64_t pos, int64_t n, int exact)
{
    FN(block_body)(r, sc, b, i, pos, n, exact, 64, 64);
}

ATTN_CPU_CLONES static void FN(block_128)(const cpu_run *r, FN(scratch) * sc, uint32_t b, int64_t i,
                                          int64_t pos, int64_t n, int exact)
{
    FN(block_body)(r, sc, b, i, pos, n, exact, 128, 128);
}

ATTN_CPU_CLONES static void FN(block_256)(const cpu_run *r, FN(scratch) * sc, uint32_t b, int64_t i,
                                          int64_t pos, int64_t n, int exact)
{
    FN(block_body)(r, sc, b, i, pos, n, exact, 256, 256);
}

ATTN_CPU_CLONES static void FN(block_any)(const cpu_run *r, FN(scratch) * sc, uint32_t b, int64_t i,
                                          int64_t pos, int64_t n, int exact)
{
    FN(block_body)(r, sc, b, i, pos, n, exact, r->d_qk, r->d_vo);
}

void FN(cpu_produce)(const cpu_run *r, void *scratch, uint32_t item, uint32_t hk0)
{
    FN(scratch) sc;
    const attn_work_item *it = &r->plan->items[item];
    uint32_t b = it->req, g = r->group, dq = r->d_qk, dv = r->d_vo, nh = r->heads_per_unit;
    uint32_t slot0 = r->plan->slot_indptr[b];
    uint32_t S_b = r->plan->slot_indptr[b + 1] - slot0, s = it->slot - slot0;
    int64_t C = r->m->requests[b].new_len;
    FN(carve)(r, scratch, &sc);
    void (*block)(const cpu_run *, FN(scratch) *, uint32_t, int64_t, int64_t, int64_t, int) =
        FN(block_any);
    if (dq == dv && dq == 64)
        block = FN(block_64);
    else if (dq == dv && dq == 128)
        block = FN(block_128);
    else if (dq == dv && dq == 256)
        block = FN(block_256);

    for (int64_t i = 0; i < C; i++) {
        int64_t qrow = (int64_t)r->m->qo_indptr[b] + i;
        /* query heads hk0 * g .. (hk0 + nh) * g - 1, in head order */
        for (uint32_t hh = 0; hh < nh * g; hh++) {
            size_t qoff = ((size_t)qrow * r->num_qo_heads + hk0 * g + hh) * dq;
            for (uint32_t x = 0; x < dq; x++)
                sc.q[hh * dq + x] = (ACC)attn_load_f32(r->q, r->q_dtype, qoff + x) * (ACC)r->scale;
            CAT(attn_mlu_empty_, SFX)(&sc.st[hh], sc.u + (size_t)hh * dv, (int)dv);
        }
        /* the row's visible key ranges, clipped to this item's keys */
        attn_row_keys rk = attn_mask_row_keys(&r->mask, b, i);
        int64_t lo[2] = {rk.lo0, rk.lo1}, hi[2] = {rk.hi0, rk.hi1};
        for (int ri = 0; ri < 2; ri++) {
            int64_t a0 = lo[ri] > it->kv_begin ? lo[ri] : it->kv_begin;
            int64_t a1 = hi[ri] < it->kv_end ? hi[ri] : it->kv_end;
            int64_t bk = r->block_keys, ahead = ATTN_CPU_PREFETCH_BLOCKS * bk;
            if (a0 < a1) /* the first blocks, then one block per step, `ahead` keys early */
                FN(prefetch_rows)(r, b, hk0, nh, a0, a0 + ahead < a1 ? a0 + ahead : a1);
            for (int64_t pos = a0; pos < a1; pos += bk) {
                int64_t n = a1 - pos < bk ? a1 - pos : bk;
                if (pos + ahead < a1)
                    FN(prefetch_rows)
                (r, b, hk0, nh, pos + ahead, pos + ahead + bk < a1 ? pos + ahead + bk : a1);
                /* one pass over each K/V head's rows serves its g query heads */
                for (uint32_t j = 0; j < nh; j++) {
                    FN(scratch) h = sc;
                    h.q = sc.q + (size_t)j * g * dq;
                    h.u = sc.u + (size_t)j * g * dv;
                    h.st = sc.st + (size_t)j * g;
                    FN(gather)(r, &h, b, hk0 + j, pos, n);
                    block(r, &h, b, i, pos, n, rk.exact);
                }
            }
        }
        for (uint32_t hh = 0; hh < nh * g; hh++) {
            uint64_t idx = r->ws_off[b] + ((uint64_t)i * r->num_qo_heads + hk0 * g + hh) * S_b + s;
            ACC *vec = (ACC *)r->ws_vec + idx * dv;
            if (r->abi == ATTN_ABI_MLU) {
                ((MLU *)r->ws_scal)[idx] = sc.st[hh];
                for (uint32_t x = 0; x < dv; x++)
                    vec[x] = sc.u[(size_t)hh * dv + x];
            } else {
                CAT(attn_mlu_to_lseo_, SFX)
                (&sc.st[hh], sc.u + (size_t)hh * dv, (int)dv, &((LSEO *)r->ws_scal)[idx], vec);
            }
        }
    }
}

void FN(cpu_merge)(const cpu_run *r, void *scratch, int64_t row, uint32_t h)
{
    uint32_t b = r->row_req[row], dv = r->d_vo;
    uint32_t slot0 = r->plan->slot_indptr[b], S_b = r->plan->slot_indptr[b + 1] - slot0;
    int64_t i = row - r->m->qo_indptr[b];
    uint64_t base = r->ws_off[b] + ((uint64_t)i * r->num_qo_heads + h) * S_b;
    const ACC *vec = (const ACC *)r->ws_vec;
    ACC *o = (ACC *)scratch, lse;
    /* seed 0x03I: fold the request's slots in slot order */
    if (r->abi == ATTN_ABI_MLU) {
        MLU st = {false, 0, 0}; /* set by attn_mlu_empty; initialised for the linters */
        CAT(attn_mlu_empty_, SFX)(&st, o, (int)dv);
        for (uint32_t s = 0; s < S_b; s++)
            CAT(attn_mlu_merge_, SFX)
        (&st, o, &((const MLU *)r->ws_scal)[base + s], vec + (base + s) * dv, (int)dv);
        CAT(attn_mlu_finalize_, SFX)(&st, o, (int)dv, o, &lse);
    } else {
        LSEO acc = {-(ACC)INFINITY};
        for (uint32_t x = 0; x < dv; x++)
            o[x] = 0;
        for (uint32_t s = 0; s < S_b; s++)
            CAT(attn_lseo_merge_, SFX)
        (&acc, o, &((const LSEO *)r->ws_scal)[base + s], vec + (base + s) * dv, (int)dv);
        lse = acc.lse;
    }
    size_t ooff = ((size_t)row * r->num_qo_heads + h) * dv;
    for (uint32_t x = 0; x < dv; x++)
        attn_store_f32(r->o, r->q_dtype, ooff + x, (float)o[x]);
    if (r->lse != NULL)
        r->lse[(size_t)row * r->num_qo_heads + h] = (float)lse;
    if (r->o64 != NULL)
        for (uint32_t x = 0; x < dv; x++)
            r->o64[ooff + x] = (double)o[x];
    if (r->lse64 != NULL)
        r->lse64[(size_t)row * r->num_qo_heads + h] = (double)lse;
}

#undef CAT_
#undef CAT
#undef MLU
#undef LSEO
#undef FN
#undef LANES
#undef ATTN_CPU_VEC
