/* GPU tests of the Hopper tensor-core prefill/append kernel (run on a
 * machine with an H100/H200: tests/gpu/build.sh builds, bench/gpu/
 * run_prefill.sh runs).
 *
 * Every run draws fresh random manifests (the seed is printed, ATTN_SEED
 * replays one): ragged T and C, pages in random physical order with unused
 * pages and NaN-poisoned page tails (tests/lib/random_batch.c), CSR and
 * dense tables, NHD and HND, bf16 and fp16, d 64/128/256, GQA groups 1..16,
 * every mask kind (FlashMask: random two-interval columns, causal
 * documents, a shared prefix with answers; dense bits of both polarities),
 * automatic and forced splits with both state ABIs.  The C new rows are
 * staged into their page slots first (what the engine's append launcher
 * does before attention).  O, LSE and the partial workspace are poisoned
 * with NaN before the launch, so an element the kernel does not write
 * shows up.  Each case is compared with the CPU engine (fp64 accumulation)
 * or, when that would take too long, with an fp64 reference on a random
 * sample of (row, head) pairs: relative L2 of O <= 1e-2, |LSE err| <= 1e-3,
 * -inf LSE exactly where the reference has it, no NaN anywhere.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "engines/cpu/engine.h"
#include "engines/cuda/cuda_engine.h"
#include "kernels/cuda/prefill_launch.h"
#include "planner/prefill_plan.h"
#include "tests/lib/random_batch.h"

static uint64_t g_seed;
static double g_worst_rel, g_worst_lse;
static int g_quick; /* ATTN_GPU_QUICK=1: small sweep for compute-sanitizer */
static int g_sms = 132;
static int g_failures; /* cases outside the tolerances so far */

/* FlashMask shapes a case can ask for (random_batch draws the first). */
typedef enum fm_style { FM_RANDOM = 0, FM_DOCUMENTS = 1, FM_SHARED_QUESTION = 2 } fm_style;

typedef struct pf_case {
    const char *name;
    uint32_t B;
    int64_t t_min, t_max; /* T drawn in [t_min, t_max] */
    int64_t c_min, c_max; /* C drawn in [c_min, c_max] */
    uint32_t hq, hkv, d, page;
    attn_dtype kv;
    attn_layout layout;
    attn_kv_format format;
    attn_mask_kind mask;
    fm_style fm;
    int splits;                   /* 0 auto, > 0 fixed, < 0 random 2..5 */
    attn_prefill_variant variant; /* the kernel configuration (zero: full) */
} pf_case;

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static void *dev_copy(const void *h, size_t n)
{
    void *d = NULL;
    if (n == 0)
        n = 4;
    CK(cudaMalloc(&d, n));
    if (h)
        CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

static void *dev_poisoned(size_t n)
{
    void *d = dev_copy(NULL, n);
    CK(cudaMemset(d, 0xff, n ? n : 4)); /* all-ones: NaN in bf16, fp16 and fp32 */
    return d;
}

/* Element offset of logical row t of request b, K/V head h, in the host pool. */
static int64_t row_elem(const attn_rb *rb, const attn_kv_addr *a, uint32_t b, int64_t t, uint32_t h,
                        uint32_t d)
{
    int64_t page, slot;
    (void)rb;
    if (!attn_kv_addr_locate(a, b, t, &page, &slot))
        return -1;
    return attn_kv_addr_elem(a, page, slot, h, 0, d);
}

/* Rewrite the FlashMask vectors: documents (each sees only itself,
 * causally) or one shared prefix followed by answers that see the prefix
 * and themselves.  Keys of the history (j < T) stay visible to all rows. */
static void shape_flashmask(attn_rb *rb, fm_style st, uint64_t *s)
{
    attn_mask *mk = &rb->m.mask;
    uint64_t k = 0;
    mk->fm_causal = true;
    for (uint32_t b = 0; b < rb->m.num_requests; b++) {
        int64_t T = rb->m.requests[b].cache_len, C = rb->m.requests[b].new_len;
        int64_t bounds[10];
        int nb = 0;
        if (st == FM_DOCUMENTS) {
            int docs = (int)attn_rb_range(s, 1, 8);
            bounds[nb++] = 0;
            for (int i = 1; i < docs; i++)
                bounds[nb++] = C * i / docs;
            bounds[nb++] = C;
        } else {
            int64_t prefix = C / 4;
            bounds[nb++] = 0;
            bounds[nb++] = prefix;
            for (int i = 1; i < 4; i++)
                bounds[nb++] = prefix + (C - prefix) * i / 4;
            bounds[nb++] = C;
        }
        for (int64_t j = 0; j < T + C; j++, k++) {
            int32_t lts = (int32_t)C, lte = (int32_t)C; /* empty lower run */
            if (j >= T) {
                int64_t r = j - T;
                int seg = 0;
                while (seg + 1 < nb && bounds[seg + 1] <= r)
                    seg++;
                bool prefix_seg = st == FM_SHARED_QUESTION && seg == 0;
                if (!prefix_seg)
                    lts = (int32_t)bounds[seg + 1]; /* rows past the segment's end */
            }
            mk->fm_lts[k] = lts;
            mk->fm_lte[k] = lte;
            mk->fm_uts[k] = 0;
            mk->fm_ute[k] = 0;
        }
    }
}

typedef struct dev_run {
    void *q, *o, *k, *v;
    float *lse, *pv, *pm, *pl;
    void *reqs, *items, *tiles, *merges, *arena;
    void *t_indptr, *t_indices, *t_last, *t_block, *t_lens;
} dev_run;

static void dev_run_free(dev_run *r)
{
    void *all[] = {r->q,     r->o,        r->k,         r->v,      r->lse,     r->pv,
                   r->pm,    r->pl,       r->reqs,      r->items,  r->tiles,   r->merges,
                   r->arena, r->t_indptr, r->t_indices, r->t_last, r->t_block, r->t_lens};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            cudaFree(all[i]);
    memset(r, 0, sizeof *r);
}

/* fp64 reference of one (row, head) pair of request b: O and LSE. */
static void sample_ref(const attn_rb *rb, const attn_kv_addr *a, const attn_mask_prog *mp,
                       uint32_t b, int64_t i, uint32_t hq, double *o, double *lse)
{
    const uint32_t d = rb->g.head_dim_qk,
                   hkv = attn_kv_head(hq, rb->m.num_qo_heads, rb->g.num_kv_heads);
    const int64_t T = rb->m.requests[b].cache_len, C = rb->m.requests[b].new_len;
    const double scale = rb->m.has_sm_scale ? rb->m.sm_scale : 1.0 / sqrt((double)d);
    const size_t qoff = ((size_t)(rb->m.qo_indptr[b] + i) * rb->m.num_qo_heads + hq) * d;
    double q[256], m = -INFINITY, l = 0;
    for (uint32_t x = 0; x < d; x++) {
        q[x] = attn_load_f32(rb->q, rb->m.q_dtype, qoff + x);
        o[x] = 0;
    }
    for (int64_t j = 0; j < T + C; j++) {
        if (!attn_mask_visible(mp, b, i, j))
            continue;
        int64_t e = row_elem(rb, a, b, j, hkv, d);
        double s = 0;
        for (uint32_t x = 0; x < d; x++)
            s += q[x] * attn_load_f32(rb->k, rb->g.kv_dtype, (size_t)e + x);
        s *= scale;
        double mn = s > m ? s : m, al = exp(m - mn), p = exp(s - mn);
        l = l * al + p;
        for (uint32_t x = 0; x < d; x++)
            o[x] = o[x] * al + p * attn_load_f32(rb->v, rb->g.kv_dtype, (size_t)e + x);
        m = mn;
    }
    if (l == 0) {
        *lse = -INFINITY;
        return;
    }
    for (uint32_t x = 0; x < d; x++)
        o[x] /= l;
    *lse = m + log(l);
}

static void run_case(const pf_case *pc, uint64_t seed)
{
    uint64_t s = seed;
    const uint32_t B = pc->B;
    int64_t *T = calloc(B, sizeof *T), *C = calloc(B, sizeof *C);
    assert_true(T && C);
    int64_t maxT = 1;
    for (uint32_t b = 0; b < B; b++) {
        T[b] = attn_rb_range(&s, pc->t_min, pc->t_max);
        C[b] = attn_rb_range(&s, pc->c_min, pc->c_max);
        maxT = T[b] > maxT ? T[b] : maxT;
    }
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = B;
    sp.max_cache_len = maxT;
    sp.num_qo_heads = pc->hq;
    sp.num_kv_heads = pc->hkv;
    sp.head_dim_qk = sp.head_dim_vo = pc->d;
    sp.page_size = pc->page;
    sp.spare_pages = (uint32_t)attn_rb_range(&s, 1, 9);
    sp.kv_dtype = pc->kv;
    sp.q_dtype = pc->kv; /* the kernel takes q in the K/V dtype */
    sp.layout = pc->layout;
    sp.format = pc->format;
    sp.mask_kind = pc->mask;
    sp.poison = true;
    attn_rb rb;
    assert_int_equal(attn_rb_make_lengths(&rb, &sp, T, C, seed), 0);
    if (pc->mask == ATTN_MASK_FLASHMASK && pc->fm != FM_RANDOM)
        shape_flashmask(&rb, pc->fm, &s);
    const attn_state_abi abi = (attn_state_abi)attn_rb_range(&s, 0, 1);
    const uint32_t fixed = pc->splits > 0   ? (uint32_t)pc->splits
                           : pc->splits < 0 ? (uint32_t)attn_rb_range(&s, 2, 5)
                                            : 0;

    /* stage the C new rows into their page slots (the engine's append step) */
    attn_kv_addr ha;
    attn_kv_addr_from_table(&ha, &rb.m.kv, B, &rb.g);
    const size_t es = attn_dtype_size(rb.g.kv_dtype);
    for (uint32_t b = 0; b < B; b++)
        for (int64_t i = 0; i < C[b]; i++)
            for (uint32_t h = 0; h < pc->hkv; h++) {
                int64_t e = row_elem(&rb, &ha, b, T[b] + i, h, pc->d);
                assert_true(e >= 0);
                size_t src = ((size_t)(rb.m.qo_indptr[b] + i) * pc->hkv + h) * pc->d;
                memcpy((char *)rb.k + e * es, (char *)rb.k_new + src * es, pc->d * es);
                memcpy((char *)rb.v + e * es, (char *)rb.v_new + src * es, pc->d * es);
            }

    /* host plan: mask program at the kernel's key-tile width, then tiles */
    uint32_t tm, tn;
    attn_prefill_tile_shape(pc->d, pc->variant, &tm, &tn);
    attn_error_detail err;
    memset(&err, 0, sizeof err);
    attn_mask_prog prog;
    int rv = attn_mask_prog_build_blocks(&rb.m.mask, rb.m.requests, B, tn, &prog, &err);
    if (rv)
        fprintf(stderr, "mask: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
    assert_int_equal(rv, 0);
    attn_prefill_plan_in in = {.num_requests = B,
                               .T = T,
                               .C = C,
                               .qo_indptr = rb.m.qo_indptr,
                               .num_qo_heads = pc->hq,
                               .num_kv_heads = pc->hkv,
                               .head_dim = pc->d,
                               .mask = &prog,
                               .num_sms = (uint32_t)g_sms,
                               .fixed_splits = fixed,
                               .variant = pc->variant};
    attn_prefill_plan plan;
    rv = attn_prefill_plan_build(&in, &plan, &err);
    if (rv)
        fprintf(stderr, "plan: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
    assert_int_equal(rv, 0);

    /* device copies */
    dev_run dr;
    memset(&dr, 0, sizeof dr);
    dr.k = dev_copy(rb.k, rb.k_bytes);
    dr.v = dev_copy(rb.v, rb.v_bytes);
    dr.q = dev_copy(rb.q, rb.q_bytes);
    const size_t qs = attn_dtype_size(rb.m.q_dtype);
    dr.o = dev_poisoned(rb.o_elems * qs);
    dr.lse = dev_poisoned(rb.lse_elems * sizeof(float));
    attn_kv_table dk = rb.m.kv;
    if (dk.format == ATTN_KV_CSR) {
        dk.page_indptr = dr.t_indptr = dev_copy(rb.m.kv.page_indptr, (B + 1) * 4);
        dk.page_indices = dr.t_indices =
            dev_copy(rb.m.kv.page_indices, (size_t)rb.m.kv.num_page_indices * 4);
        dk.last_page_len = dr.t_last = dev_copy(rb.m.kv.last_page_len, B * 4);
    } else {
        dk.block_table = dr.t_block =
            dev_copy(rb.m.kv.block_table, (size_t)B * rb.m.kv.max_blocks * 4);
        dk.lens = dr.t_lens = dev_copy(rb.m.kv.lens, B * 4);
    }
    dr.arena = dev_copy(prog.arena, prog.arena_bytes);
    dr.reqs = dev_copy(plan.reqs, B * sizeof *plan.reqs);
    dr.items = dev_copy(plan.items, plan.num_items * sizeof *plan.items);
    dr.tiles = dev_copy(plan.tiles, plan.num_tiles * sizeof *plan.tiles);
    dr.merges = dev_copy(plan.merges, plan.num_merges * sizeof *plan.merges);
    uint64_t vec_f, row_f;
    attn_prefill_plan_workspace(&plan, pc->hkv, pc->d, &vec_f, &row_f);
    if (plan.num_parts) {
        dr.pv = dev_poisoned(vec_f * 4);
        dr.pm = dev_poisoned(row_f * 4);
        dr.pl = dev_poisoned(row_f * 4);
    }
    attn_cuda_prefill_params p;
    memset(&p, 0, sizeof p);
    p.q = dr.q;
    p.o = dr.o;
    p.lse = dr.lse;
    p.k = dr.k;
    p.v = dr.v;
    attn_kv_addr_from_table(&p.kv, &dk, B, &rb.g);
    p.mask = attn_mask_prog_rebase(&prog, dr.arena);
    p.reqs = dr.reqs;
    p.items = dr.items;
    p.tiles = dr.tiles;
    p.merges = dr.merges;
    p.num_items = plan.num_items;
    p.num_merges = plan.num_merges;
    p.part_vec = dr.pv;
    p.part_m = dr.pm;
    p.part_l = dr.pl;
    p.num_qo_heads = pc->hq;
    p.num_kv_heads = pc->hkv;
    p.head_dim = pc->d;
    p.q_dtype = rb.m.q_dtype;
    p.kv_dtype = rb.g.kv_dtype;
    p.abi = abi;
    p.sm_scale = rb.m.has_sm_scale ? rb.m.sm_scale : 1.0f / sqrtf((float)pc->d);
    p.variant = pc->variant;
    /* one CTA per unit, a persistent grid of SM count, or a few CTAs that
     * each walk many units (the cross-unit pipeline under stress) */
    const int grid_kind = (int)attn_rb_range(&s, 0, 2);
    p.max_ctas = grid_kind == 0   ? 0
                 : grid_kind == 1 ? (uint32_t)g_sms
                                  : (uint32_t)attn_rb_range(&s, 1, 7);
    /* a quarter of the runs load every K/V row by the cp.async gather, the
     * rest let the launcher take the TMA tier where the store admits it */
    p.gather_only = attn_rb_range(&s, 0, 3) == 0;
    /* a third of the runs load V's TMA boxes per chunk, as K's; the rest
     * take whole pages where attn_cuda_prefill_v_page_boxes admits them */
    p.v_chunk_boxes = attn_rb_range(&s, 0, 2) == 0;
    rv = attn_cuda_prefill_launch(&p, NULL);
    assert_int_equal(rv, 0);
    CK(cudaDeviceSynchronize());
    void *o = malloc(rb.o_elems * qs);
    float *lse = malloc(rb.lse_elems * sizeof *lse);
    assert_true(o && lse);
    CK(cudaMemcpy(o, dr.o, rb.o_elems * qs, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse, dr.lse, rb.lse_elems * sizeof *lse, cudaMemcpyDeviceToHost));

    /* every element written and finite */
    size_t nan = 0;
    for (size_t i = 0; i < rb.o_elems; i++)
        nan += isnan(attn_load_f32(o, rb.m.q_dtype, i)) != 0;
    for (size_t i = 0; i < rb.lse_elems; i++)
        nan += isnan(lse[i]) != 0;

    /* the reference: the CPU engine when affordable, else a row sample */
    double cost = 0;
    for (uint32_t b = 0; b < B; b++)
        cost += (double)C[b] * (double)(T[b] + C[b]) * pc->hq * pc->d;
    const bool full = cost <= (g_quick ? 5e7 : 1.5e9);
    double num = 0, den = 0, lse_err = 0;
    size_t inf_mismatch = 0, checked = 0;
    if (full) {
        double *o64 = malloc(sizeof *o64 * rb.o_elems), *l64 = malloc(sizeof *l64 * rb.lse_elems);
        void *o_ref = malloc(rb.o_elems * qs);
        float *lse_ref = malloc(sizeof *lse_ref * rb.lse_elems);
        assert_true(o64 && l64 && o_ref && lse_ref);
        attn_cpu_call cc = {.m = &rb.m,
                            .g = &rb.g,
                            .k_store = rb.k,
                            .v_store = rb.v,
                            .q = rb.q,
                            .k_new = rb.k_new,
                            .v_new = rb.v_new,
                            .o = o_ref,
                            .lse = lse_ref,
                            .o64 = o64,
                            .lse64 = l64};
        attn_cpu_options opt = {.acc = ATTN_CPU_ACC_F64};
        rv = attn_cpu_attend(&cc, &opt, &err);
        if (rv)
            fprintf(stderr, "cpu: %s %s: %s\n", attn_err_name(rv), err.field, err.message);
        assert_int_equal(rv, 0);
        for (size_t i = 0; i < rb.o_elems; i++) {
            double x = attn_load_f32(o, rb.m.q_dtype, i), r = o64[i];
            num += (x - r) * (x - r);
            den += r * r;
        }
        for (size_t i = 0; i < rb.lse_elems; i++) {
            if (isnan(lse[i]))
                continue;
            if (isinf(lse[i]) || isinf(l64[i]))
                inf_mismatch += lse[i] != (float)l64[i];
            else if (fabs(lse[i] - l64[i]) > lse_err)
                lse_err = fabs(lse[i] - l64[i]);
        }
        checked = rb.lse_elems;
        free(o64);
        free(l64);
        free(o_ref);
        free(lse_ref);
    } else {
        double ro[256], rl;
        const int samples = 40;
        for (int k = 0; k < samples; k++) {
            uint32_t b = (uint32_t)attn_rb_range(&s, 0, B - 1);
            int64_t i = k < 2 ? (k == 0 ? 0 : C[b] - 1) : attn_rb_range(&s, 0, C[b] - 1);
            uint32_t hq = (uint32_t)attn_rb_range(&s, 0, pc->hq - 1);
            sample_ref(&rb, &ha, &prog, b, i, hq, ro, &rl);
            size_t row = (size_t)(rb.m.qo_indptr[b] + i) * pc->hq + hq;
            for (uint32_t x = 0; x < pc->d; x++) {
                double v = attn_load_f32(o, rb.m.q_dtype, row * pc->d + x);
                num += (v - ro[x]) * (v - ro[x]);
                den += ro[x] * ro[x];
            }
            if (isinf(lse[row]) || isinf(rl))
                inf_mismatch += lse[row] != (float)rl;
            else if (!isnan(lse[row]) && fabs(lse[row] - rl) > lse_err)
                lse_err = fabs(lse[row] - rl);
            checked++;
        }
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const attn_prefill_ledger *lg = &plan.ledger;
    printf("  %-24s %s seed=%llu B=%u g=%u d=%u P=%u %s %s %s q=%s abi=%s splits=%u ctas=%u "
           "items=%u "
           "merges=%u tiles(skip/full/partial)=%llu/%llu/%llu cells(logical/executed)=%llu/%llu "
           "%s %s rel=%.2e lse=%.2e nan=%zu infmis=%zu\n",
           pc->name, attn_prefill_variant_name(pc->variant), (unsigned long long)seed, B,
           pc->hq / pc->hkv, pc->d, pc->page, attn_dtype_name(pc->kv),
           pc->layout == ATTN_HND ? "HND" : "NHD", pc->format == ATTN_KV_CSR ? "csr" : "dense",
           attn_dtype_name(rb.m.q_dtype), abi == ATTN_ABI_MLU ? "mlu" : "lse_o", fixed, p.max_ctas,
           plan.num_items, plan.num_merges, (unsigned long long)lg->skip_tiles,
           (unsigned long long)lg->full_tiles, (unsigned long long)lg->partial_tiles,
           (unsigned long long)lg->logical_cells, (unsigned long long)lg->executed_cells,
           full ? "cpu-engine" : "sampled",
           p.gather_only                        ? "gather"
           : attn_cuda_prefill_v_page_boxes(&p) ? "tma-vpage"
                                                : "tma-if-paged",
           rel, lse_err, nan, inf_mismatch);
    fflush(stdout);
    (void)checked;
    if (rel > g_worst_rel)
        g_worst_rel = rel;
    if (lse_err > g_worst_lse)
        g_worst_lse = lse_err;
    /* record and go on, so one run reports every failing case */
    if (nan || inf_mismatch || !(rel <= 1e-2) || !(lse_err <= 1e-3)) {
        printf("  FAILED CASE %s (seed %llu)\n", pc->name, (unsigned long long)seed);
        g_failures++;
    }

    free(o);
    free(lse);
    dev_run_free(&dr);
    attn_prefill_plan_free(&plan);
    attn_mask_prog_free(&prog);
    attn_rb_free(&rb);
    free(T);
    free(C);
}

/* name, B, T range, C range, H_q, H_kv, d, page, dtype, layout, table, mask, fm, splits,
 * variant (the sweep also runs each d <= 128 case on the light one) */
static const pf_case k_cases[] = {
    {"tiny-none-d64", 1, 0, 0, 64, 64, 1, 1, 64, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_NONE, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"prefill-causal-g4", 3, 0, 0, 1, 700, 8, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"append-p1-hnd-fp16", 4, 1, 3000, 2, 300, 4, 1, 128, 1, ATTN_FP16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"append-d256-p64-dense", 3, 1, 2000, 2, 200, 8, 8, 256, 64, ATTN_BF16, ATTN_NHD, ATTN_KV_DENSE,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"fewq-g16-p128", 6, 1, 9000, 2, 8, 32, 2, 128, 128, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"window-g8-d64", 3, 0, 3000, 1, 400, 16, 2, 64, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_WINDOW, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"sink-d256-fp16-hnd", 2, 1, 2500, 2, 200, 4, 4, 256, 16, ATTN_FP16, ATTN_HND, ATTN_KV_DENSE,
     ATTN_MASK_SINK, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"none-append-g1", 2, 1, 1500, 2, 300, 4, 4, 64, 64, ATTN_FP16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_NONE, FM_RANDOM, -1, ATTN_PREFILL_FULL},
    {"flashmask-random", 3, 0, 1000, 1, 500, 8, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_FLASHMASK, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"flashmask-docs", 1, 0, 0, 1024, 2048, 4, 1, 128, 64, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_FLASHMASK, FM_DOCUMENTS, 0, ATTN_PREFILL_FULL},
    {"flashmask-question-app", 2, 0, 600, 300, 1200, 4, 1, 64, 16, ATTN_BF16, ATTN_HND,
     ATTN_KV_DENSE, ATTN_MASK_FLASHMASK, FM_SHARED_QUESTION, 0, ATTN_PREFILL_FULL},
    {"dense-mask", 2, 0, 500, 1, 300, 4, 2, 64, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_DENSE, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"dense-mask-d128-fp16", 2, 0, 300, 1, 200, 8, 2, 128, 1, ATTN_FP16, ATTN_HND, ATTN_KV_DENSE,
     ATTN_MASK_DENSE, FM_RANDOM, -1, ATTN_PREFILL_FULL},
    {"ragged-b8-g4", 8, 0, 2000, 1, 512, 8, 2, 128, 16, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"splits-fixed-g8-d256", 2, 100, 4000, 2, 150, 8, 1, 256, 128, ATTN_BF16, ATTN_NHD, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, -1, ATTN_PREFILL_FULL},
    {"long-T65536-auto-split", 1, 65536, 65536, 1, 64, 8, 1, 128, 16, ATTN_BF16, ATTN_NHD,
     ATTN_KV_CSR, ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"C4096-p128", 1, 0, 1000, 4096, 4096, 2, 1, 64, 128, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"append-hnd-d128-p32", 3, 1, 3000, 2, 300, 8, 2, 128, 32, ATTN_BF16, ATTN_HND, ATTN_KV_CSR,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"append-p12-not-pow2", 3, 0, 1000, 1, 200, 8, 2, 128, 12, ATTN_BF16, ATTN_HND, ATTN_KV_DENSE,
     ATTN_MASK_CAUSAL, FM_RANDOM, 0, ATTN_PREFILL_FULL},
    {"append-g16-d64-window", 2, 1000, 20000, 16, 512, 16, 1, 64, 64, ATTN_FP16, ATTN_NHD,
     ATTN_KV_DENSE, ATTN_MASK_WINDOW, FM_RANDOM, 0, ATTN_PREFILL_FULL},
};

static void test_random_sweep(void **state)
{
    (void)state;
    size_t n = sizeof k_cases / sizeof k_cases[0];
    int rounds = g_quick ? 1 : 2;
    const char *only = getenv("ATTN_PREFILL_CASE");
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++) {
            pf_case pc = k_cases[i];
            if (only && !strstr(pc.name, only))
                continue;
            if (g_quick) {
                if (pc.t_max > 2000 || pc.c_max > 700)
                    continue;
                pc.t_max = pc.t_max < 300 ? pc.t_max : 300;
                pc.t_min = pc.t_min < pc.t_max ? pc.t_min : pc.t_max;
                pc.c_max = pc.c_max < 200 ? pc.c_max : 200;
                pc.c_min = pc.c_min < pc.c_max ? pc.c_min : pc.c_max;
                if (pc.B > 3)
                    pc.B = 3;
            }
            run_case(&pc, g_seed + 1000u * (uint64_t)r + i);
            /* the light variant (overlap's kernel) on the same draw where
             * it exists: one consumer warpgroup over 64 x 64 tiles */
            if (attn_prefill_variant_serves(ATTN_PREFILL_LIGHT, pc.d)) {
                pc.variant = ATTN_PREFILL_LIGHT;
                run_case(&pc, g_seed + 1000u * (uint64_t)r + i);
            }
        }
    printf("  worst rel L2 %.3e, worst |LSE err| %.3e, failing cases %d\n", g_worst_rel,
           g_worst_lse, g_failures);
    assert_int_equal(g_failures, 0);
}

/* A split m tile folds to the same answer as the unsplit one: run one
 * manifest with 1 and with 2..7 forced parts (both ABIs; the second on the
 * light variant, whose combine folds 64-row parts). */
static void test_split_matches_unsplit(void **state)
{
    (void)state;
    for (int abi = 0; abi < 2; abi++)
        for (int sp = 2; sp <= 7; sp += 5) {
            pf_case pc = {"split-vs-unsplit",
                          2,
                          500,
                          3000,
                          20,
                          200,
                          8,
                          2,
                          128,
                          16,
                          ATTN_BF16,
                          ATTN_NHD,
                          ATTN_KV_CSR,
                          ATTN_MASK_CAUSAL,
                          FM_RANDOM,
                          sp,
                          (attn_prefill_variant)(abi & 1)};
            run_case(&pc, g_seed + 77u + (uint64_t)abi);
            pc.splits = 1;
            run_case(&pc, g_seed + 77u + (uint64_t)abi);
        }
    assert_int_equal(g_failures, 0);
}

int main(void)
{
    const char *e = getenv("ATTN_SEED");
    g_seed = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    g_quick = getenv("ATTN_GPU_QUICK") != NULL;
    printf("test_prefill_gpu: seed %llu (replay with ATTN_SEED)\n", (unsigned long long)g_seed);
    char why[160];
    if (!attn_cuda_available(NULL, why, sizeof why)) {
        printf("no GPU: %s\n", why);
        return 0;
    }
    attn_cuda_device_info di;
    if (attn_cuda_device_info_get(0, &di, NULL) == 0) {
        printf("device: %s cc %d.%d, %d SMs\n", di.name, di.cc_major, di.cc_minor, di.sm_count);
        g_sms = di.sm_count;
        if (di.cc_major != 9) {
            printf("the prefill kernel needs sm_90a; skipping\n");
            return 0;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_sweep),
        cmocka_unit_test(test_split_matches_unsplit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
