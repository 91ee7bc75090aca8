/* The CUDA prefill/append engine (prefill_engine.h): admission, the host
 * half of its plan, and the instance (plan once, run per layer) behind
 * planner/engine.h.
 *
 * Mixed batches (issue 12): unified runs every row on the prefill kernel;
 * partition marks the decode rows, leaves them out of the tile plan and
 * plans them as a decode sub-plan (engines/cuda/decode_plan.h) whose
 * kernels read and write the batch's own q / o / lse rows, so one staging,
 * one append transaction and one copy back serve both kernels; auto asks
 * planner/mixed_cost.h.
 *
 * Why a second engine rather than a branch inside cuda_decode: the two
 * kernels plan different things (split slots per request vs. a tile list
 * per m tile with mask classes), so their plans, ledgers and runs share
 * nothing but the append launcher; the registry already picks by phase
 * and priority and reports the choice in the diagnostic (candidates, each
 * rejection, fallback), so no phase branch hides in a run.
 *
 * Plain C over the CUDA runtime API.  Without ATTN_WITH_CUDA the host half
 * (admission, plan_host) still builds and is tested; init says "built
 * without CUDA".
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines/cuda/prefill_engine.h"
#include "engines/cuda/decode_plan.h"
#include "engines/cuda/instance.h"
#include "engines/cuda/ipc.h"
#include "engines/cuda/txn.h"
#include "attn/names.h"
#include "kernels/common/addr.h"
#include "kernels/common/dtype.h"
#include "kernels/common/mask.h"
#include "kernels/common/mixed_path.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/mixed_launch.h"
#include "kernels/cuda/prefill_launch.h"
#include "kernels/cuda/stamp.h"
#include "planner/ledger.h"
#include "planner/mixed_cost.h"
#include "planner/split.h"

#ifdef ATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- admission ------------------------------------------------------------ */

/* One reason more (registry.h's attn_admission_reject does the same, but
 * linking the registry would pull the key's SHA-256 and libcrypto into the
 * GPU test binaries, which run where there is none). */
static void add_reason(attn_admission *out, attn_admit_factor f, const char *field, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static void add_reason(attn_admission *out, attn_admit_factor f, const char *field, const char *fmt,
                       ...)
{
    out->admitted = false;
    if (out->num_reasons >= ATTN_REASONS_MAX)
        return;
    attn_reason *r = &out->reasons[out->num_reasons++];
    r->factor = f;
    snprintf(r->field, sizeof r->field, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
}

static bool head_dim_ok(uint32_t d)
{
    return d == 64 || d == 128 || d == 256;
}

/* Bit (1u << attn_phase) per phase present in the manifest. */
static uint32_t manifest_phases(const attn_manifest *m)
{
    uint32_t ph = 0;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        attn_phase p;
        if (attn_phase_classify(m->requests[b].cache_len, m->requests[b].new_len, &p) == 0)
            ph |= 1u << p;
    }
    return ph;
}

static bool one_phase(uint32_t phases)
{
    return phases != 0 && (phases & (phases - 1)) == 0;
}

/* Whether the batch has decode rows the schedule may give to the decode
 * kernels: a mixed batch, or a pure-decode one the registry handed to this
 * engine (partition and auto then run the decode kernels, not decode rows
 * padded into prefill m tiles; issue 12's M4). */
static bool has_decode(uint32_t phases)
{
    return (phases & (1u << ATTN_PHASE_DECODE)) != 0;
}

/* Why the decode kernels cannot take the decode rows of this batch, or
 * NULL: they apply length masks only, walk power-of-two pages
 * (cuda_engine.h's admission, restated for the rows partition gives them)
 * and need the producer's measured occupancy (`dev` NULL: not known yet). */
static const char *decode_rows_refusal(const attn_manifest *m, const attn_pool_geometry *g,
                                       const attn_cuda_device_facts *dev)
{
    const uint32_t lengths =
        ATTN_MASK_NEED_CAUSAL | ATTN_MASK_NEED_NONE | ATTN_MASK_NEED_WINDOW | ATTN_MASK_NEED_SINK;
    if ((attn_mask_needs(&m->mask) & ~lengths) != 0)
        return "the decode kernels apply length masks only, this mask needs per-cell tests";
    if (g != NULL &&
        (g->page_size == 0 || (g->page_size & (g->page_size - 1)) != 0 || g->page_size > 1024))
        return "the decode kernels need a power-of-two page_size <= 1024";
    if (dev != NULL && (dev->ctas_per_sm == 0 || dev->sm_count == 0))
        return "the decode producer has no measured occupancy on this device";
    return NULL;
}

/* Why graph mode cannot take the call, or NULL: its envelope covers the
 * unified launch's arrays and the length masks' per-request records only
 * (a FlashMask's or dense mask's arrays grow with the lengths, and
 * partition's decode sub-plan has its own launch counts). */
static const char *graph_refusal(const attn_manifest *m, uint32_t phases)
{
    if ((m->policy.schedule == ATTN_SCHED_PARTITION || m->policy.schedule == ATTN_SCHED_OVERLAP) &&
        has_decode(phases))
        return "partition's (and overlap's) decode sub-plan has no capacity envelope; ask unified "
               "or auto";
    const uint32_t lengths =
        ATTN_MASK_NEED_CAUSAL | ATTN_MASK_NEED_NONE | ATTN_MASK_NEED_WINDOW | ATTN_MASK_NEED_SINK;
    if ((attn_mask_needs(&m->mask) & ~lengths) != 0)
        return "the envelope holds length masks only (causal, none, window, sink); a "
               "per-cell mask's arrays grow with the lengths";
    return NULL;
}

/* Which trial overlap runs under tuning t (ATTN_OVERLAP_*; OFF: refused).
 * Both are kept for measurement and lose to partition on the H200
 * (2026-12-01): the light kernel shared SMs with the decode kernels (0-54 %
 * of the decode CTA-time) but cost 2.07x the full kernel alone, 1.14x
 * partition on M2 and 1.27x on M5 (r5); the fused kernel's decode roles,
 * one CTA per SM beside the prefill ring, stream at 0.58x the decode
 * kernel's rate (M4 decode 0.891 / 0.518 ms), 1.18-1.55x partition on
 * M1-M5 (r6). */
static int overlap_trial(const attn_cuda_prefill_tuning *t)
{
    return t != NULL ? t->overlap_trial : ATTN_OVERLAP_OFF;
}

static const char k_overlap_refused[] =
    "overlap refused: both designs measured 1.14-1.55x partition (H200, r5, r6); ask partition "
    "or unified (ATTN_MIXED_OVERLAP=1 or fused: a trial)";

/* Why overlap's fused kernel (kernels/cuda/mixed.cu: prefill and decode
 * roles in one CTA per SM) cannot run this geometry, or NULL (`g` NULL:
 * not known yet). */
static const char *fused_refusal(const attn_manifest *m, const attn_pool_geometry *g)
{
    return g != NULL ? attn_mixed_fused_refusal(g->head_dim_qk, g->head_dim_vo, m->q_dtype,
                                                g->kv_dtype, g->page_size)
                     : NULL;
}

void attn_cuda_prefill_admit(const attn_manifest *m, const attn_pool_geometry *g,
                             const attn_cuda_device_facts *dev, const attn_cuda_prefill_tuning *t,
                             attn_admission *out)
{
    memset(out, 0, sizeof *out);
    out->admitted = true;
    if (g != NULL && strncmp(g->device, "cuda", 4) != 0)
        add_reason(out, ATTN_ADMIT_HARDWARE, "pool.device",
                   "pool lives on \"%s\"; cuda_prefill reads only device pools", g->device);
    if (dev != NULL && (dev->cc_major != 9 || dev->cc_minor != 0))
        add_reason(out, ATTN_ADMIT_HARDWARE, "device",
                   "cuda:%d has compute capability %d.%d; the prefill kernel is sm_90a "
                   "(wgmma) only",
                   dev->device, dev->cc_major, dev->cc_minor);
    /* seed 0x08G: a schedule runs as asked or is refused, never relabelled */
    const uint32_t phases = manifest_phases(m);
    /* a pure-decode batch the decode kernels cannot take stays one launch
     * of the prefill kernel; a mixed one cannot be partitioned */
    const char *dec_why = decode_rows_refusal(m, g, NULL);
    if (m->policy.schedule == ATTN_SCHED_PARTITION && has_decode(phases) && !one_phase(phases) &&
        dec_why != NULL)
        add_reason(out, ATTN_ADMIT_PHASE, "policy.schedule",
                   "schedule partition puts the decode rows on the decode kernels: %s", dec_why);
    if (m->policy.schedule == ATTN_SCHED_OVERLAP && overlap_trial(t) == ATTN_OVERLAP_OFF)
        add_reason(out, ATTN_ADMIT_PHASE, "policy.schedule", "%s", k_overlap_refused);
    else if (m->policy.schedule == ATTN_SCHED_OVERLAP && overlap_trial(t) == ATTN_OVERLAP_FUSED) {
        /* the fused kernel: prefill and decode roles in one CTA per SM
         * (kernels/cuda/mixed.cu) */
        if (fused_refusal(m, g) != NULL)
            add_reason(out, ATTN_ADMIT_SHAPE, "policy.schedule",
                       "schedule overlap runs the fused mixed kernel: %s; ask partition or "
                       "unified",
                       fused_refusal(m, g));
        if (has_decode(phases) && !one_phase(phases) && dec_why != NULL)
            add_reason(out, ATTN_ADMIT_PHASE, "policy.schedule",
                       "schedule overlap runs the decode rows on the fused kernel's decode "
                       "roles: %s",
                       dec_why);
    } else if (m->policy.schedule == ATTN_SCHED_OVERLAP) {
        /* overlap = the light prefill kernel (one CTA per SM, room left for
         * a decode CTA beside it) and the decode kernels on a second
         * stream: the full kernel (384 x 168 registers, 230,912 B of shared
         * memory) leaves no decode CTA room, so there is no overlap at d 256 */
        if (g != NULL && !attn_prefill_variant_serves(ATTN_PREFILL_LIGHT, g->head_dim_qk))
            add_reason(out, ATTN_ADMIT_SHAPE, "policy.schedule",
                       "schedule overlap runs the light prefill kernel, which serves head_dim "
                       "64 and 128, not %u; ask partition or unified",
                       g->head_dim_qk);
        if (has_decode(phases) && !one_phase(phases) && dec_why != NULL)
            add_reason(out, ATTN_ADMIT_PHASE, "policy.schedule",
                       "schedule overlap puts the decode rows on the decode kernels: %s", dec_why);
    }
    /* graph mode (seed 0x03G): the plan is a capacity envelope; what has none is refused */
    const char *graph_why = m->policy.graph ? graph_refusal(m, phases) : NULL;
    if (graph_why != NULL)
        add_reason(out, ATTN_ADMIT_LIFECYCLE, "policy.graph", "graph mode: %s", graph_why);
    if (m->policy.state_abi != ATTN_ABI_LSE_O && m->policy.state_abi != ATTN_ABI_MLU)
        add_reason(out, ATTN_ADMIT_NUMERICS, "policy.state_abi", "state ABI %d unknown",
                   (int)m->policy.state_abi);
    /* the planner's index space: int32 key positions and packed rows */
    uint32_t group = g && g->num_kv_heads ? m->num_qo_heads / g->num_kv_heads : 1;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        const attn_request_desc *r = &m->requests[b];
        if (r->cache_len + r->new_len > INT32_MAX || r->new_len * (int64_t)group > INT32_MAX) {
            char f[48];
            snprintf(f, sizeof f, "requests[%u].new_len", b);
            add_reason(out, ATTN_ADMIT_SHAPE, f,
                       "request %u: T + C = %lld or C x group = %lld exceeds int32", b,
                       (long long)(r->cache_len + r->new_len),
                       (long long)(r->new_len * (int64_t)group));
            break; /* one reason per factor keeps the vector readable */
        }
    }
    if (g == NULL)
        return;
    /* the MMA takes q in the K/V dtype (an fp32 q rounded for it came within
     * 1e-4 of the LSE tolerance on the H200: the prefill kernel refuses it) */
    if (m->q_dtype != g->kv_dtype)
        add_reason(out, ATTN_ADMIT_Q_DTYPE, "q_dtype",
                   "q_dtype %s differs from kv_dtype %s; the prefill kernel takes q in "
                   "the K/V dtype",
                   attn_dtype_name(m->q_dtype), attn_dtype_name(g->kv_dtype));
    if (g->kv_dtype != ATTN_BF16 && g->kv_dtype != ATTN_FP16)
        add_reason(out, ATTN_ADMIT_KV_DTYPE, "kv_dtype", "kv_dtype %s not in {bf16, fp16}",
                   attn_dtype_name(g->kv_dtype));
    if (g->head_dim_qk != g->head_dim_vo)
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_vo",
                   "head_dim_vo %u differs from head_dim_qk %u", g->head_dim_vo, g->head_dim_qk);
    /* seed 0x07D: each unsupported head dimension is its own reason */
    if (!head_dim_ok(g->head_dim_qk))
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_qk", "head_dim_qk %u not in {64, 128, 256}",
                   g->head_dim_qk);
    if (!head_dim_ok(g->head_dim_vo))
        add_reason(out, ATTN_ADMIT_SHAPE, "head_dim_vo", "head_dim_vo %u not in {64, 128, 256}",
                   g->head_dim_vo);
    if (g->num_kv_heads == 0 || m->num_qo_heads % g->num_kv_heads)
        add_reason(out, ATTN_ADMIT_HEAD_RATIO, "num_qo_heads",
                   "num_qo_heads %u is not a multiple of num_kv_heads %u", m->num_qo_heads,
                   g->num_kv_heads);
    if (g->layout != ATTN_NHD && g->layout != ATTN_HND)
        add_reason(out, ATTN_ADMIT_LAYOUT, "layout", "layout %d unknown", (int)g->layout);
    if (g->page_size == 0 || g->page_size > 65536)
        add_reason(out, ATTN_ADMIT_LAYOUT, "page_size", "page_size %u outside [1, 65536]",
                   g->page_size);
    /* every mask kind of kernels/common/mask.h runs on the GPU (issue 10
     * item 4): nothing to refuse for the mask */
}

/* ---- the unit walk setting ------------------------------------------------- */

const char *attn_prefill_walk_name(attn_prefill_walk w)
{
#define ATTN__PREFILL_WALK_NAME(e, v, n)                                                           \
    case e:                                                                                        \
        return n;
    switch (w) {
        ATTN_PREFILL_WALKS(ATTN__PREFILL_WALK_NAME)
    }
#undef ATTN__PREFILL_WALK_NAME
    return "?";
}

int attn_prefill_walk_parse(const char *s, attn_prefill_walk *out, attn_error_detail *err)
{
    if (s == NULL || s[0] == '\0') {
        *out = ATTN_PREFILL_WALK_AUTO;
        return 0;
    }
#define ATTN__PREFILL_WALK_MATCH(e, v, n)                                                          \
    if (strcmp(s, n) == 0) {                                                                       \
        *out = e;                                                                                  \
        return 0;                                                                                  \
    }
    ATTN_PREFILL_WALKS(ATTN__PREFILL_WALK_MATCH)
#undef ATTN__PREFILL_WALK_MATCH
    return attn_error_set(err, ATTN_E_RANGE, "ATTN_PREFILL_WALK",
                          "unit walk '%.40s' is not auto, queue, pairs, cluster or snake", s);
}

/* The per-CTA queues of a queue-like walk (queue, or pairs and cluster:
 * sibling units side by side where that keeps the makespan). */
static int build_queues(attn_prefill_walk walk, attn_prefill_plan *tp, uint32_t num_kv_heads,
                        uint32_t ctas, attn_prefill_queue_stats *st, attn_error_detail *err)
{
    if (walk == ATTN_PREFILL_WALK_CLUSTER)
        return attn_prefill_plan_cluster_queues(tp, num_kv_heads, ctas, st, err);
    return walk == ATTN_PREFILL_WALK_PAIRS
               ? attn_prefill_plan_pair_queues(tp, num_kv_heads, ctas, st, err)
               : attn_prefill_plan_queues(tp, num_kv_heads, ctas, st, err);
}

int attn_mixed_overlap_parse(const char *s, int *trial, attn_error_detail *err)
{
    if (s == NULL || s[0] == '\0' || strcmp(s, "0") == 0) {
        *trial = ATTN_OVERLAP_OFF;
        return 0;
    }
    if (strcmp(s, "1") == 0 || strcmp(s, "light") == 0) {
        *trial = ATTN_OVERLAP_LIGHT;
        return 0;
    }
    if (strcmp(s, "fused") == 0) {
        *trial = ATTN_OVERLAP_FUSED;
        return 0;
    }
    return attn_error_set(err, ATTN_E_RANGE, "ATTN_MIXED_OVERLAP",
                          "overlap trial '%.40s' is not 0, 1 (light) or fused", s);
}

/* ---- the host half of a plan (no CUDA call) ------------------------------- */

/* How many of each array the metadata image holds: the plan's own counts,
 * or under graph mode the envelope's (the arrays padded past the step's
 * counts, so the same image serves every step inside it). */
typedef struct image_caps {
    uint32_t reqs; /* records; graph: the envelope's requests + 1, the last a request with no
                      rows (the padded merges name it, so their combine blocks exit at once) */
    uint32_t items, tiles, merges;
    uint32_t workers; /* queues (indptr entries - 1); 0: no queues */
    uint32_t units;   /* queue entries */
    size_t arena;     /* mask arena bytes */
    size_t tb[3];     /* table arrays' bytes (CSR: indptr, indices, last; dense: table, lens) */
    uint32_t rows;    /* new-row offsets */
    uint32_t table_requests, max_blocks, page_indices; /* the translator's shape */
} image_caps;

/* What an update may not change in a graph-mode plan: everything the
 * kernels get by value or the image's layout depends on (seed 0x07F). */
typedef struct graph_static {
    attn_pool_geometry g;
    uint32_t num_qo_heads;
    attn_dtype q_dtype;
    attn_mask_kind mask_kind;
    int32_t mask_left, mask_sinks;
    attn_state_abi abi;
    uint32_t splits;
    attn_kv_format format;
    float sm_scale;
    uint32_t sm_count; /* the split bound's grid (the plan's device) */
} graph_static;

/* What a plan keeps for its runs. */
typedef struct prefill_priv {
    attn_cuda_prefill_tuning tuning;
    int device;
    uint32_t tile_m, tile_n, num_tiles, num_parts;
    attn_mask_prog host_mask; /* until the upload: the arena the image copies */
    attn_kv_table dev_table;  /* the manifest's table, arrays re-pointed at upload */
    /* the metadata image: reqs | items | tiles | merges | queues | mask
     * arena | table arrays | new-row offsets */
    void *host_meta; /* freed once uploaded (graph mode: kept for the updates) */
    void *dev_meta;  /* the plan's device copy, uploaded once (graph mode: rewritten per step) */
    size_t meta_bytes;
    size_t off_reqs, off_items, off_tiles, off_merges, off_arena, off_rows;
    size_t off_wq, off_order; /* the per-CTA queues (walks queue, pairs and cluster) */
    image_caps caps;
    attn_prefill_walk walk; /* PAIRS, CLUSTER, QUEUE or SNAKE: what the plan's launches walk */
    attn_prefill_queue_stats queues;
    size_t off_t[3]; /* CSR: indptr, indices, last; dense: block_table, lens */
    /* kernel parameters fixed for the plan (device pointers set at upload) */
    attn_cuda_prefill_params params;
    uint32_t total_q; /* rows staged and copied per run (graph mode: the envelope's) */
    int64_t head_stride;
    size_t q_bytes, kv_bytes, lse_bytes;
    /* partition (issue 12): the decode rows run on the decode kernels from
     * this sub-plan (engines/cuda/decode_plan.h), reading and writing the
     * batch's own q / o / lse rows; their partial states follow the
     * prefill kernel's in every ledger field, from state dec_state0 on */
    bool partitioned;
    attn_engine_plan dec;
    uint64_t dec_state0;
    /* how the two families run (planner/mixed_cost.h): SERIAL on one
     * stream, or forked onto the instance's second stream in that launch
     * order, the prefill grid capped at prefill_ctas (0: one CTA per SM) */
    attn_mixed_order order;
    uint32_t prefill_ctas;
    /* graph mode (seed 0x03G): the envelope, what may not change, the step
     * the image holds now, and the plan's own run buffers (an instance's
     * grow with other plans; a captured graph's pointers must not move) */
    bool graph;
    attn_prefill_envelope env;
    graph_static fixed;
    attn_cuda_prefill_graph_info step;
    uint32_t grid_ctas;
    void *run_io, *run_ws;
    /* the prefill kernel's configuration (overlap: fused, or light
     * under the trial) */
    attn_prefill_variant variant;
    /* overlap on the fused kernel (kernels/cuda/mixed.cu): the launch's
     * CTAs, max(SMs, decode pieces), one prefill queue each */
    bool fused;
    uint32_t fused_ctas;
} prefill_priv;

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

void attn_cuda_prefill_plan_host_free(attn_engine_plan *p)
{
    prefill_priv *pp = p->priv;
    if (pp != NULL) {
#ifdef ATTN_WITH_CUDA
        if (pp->dev_meta != NULL || pp->run_io != NULL || pp->run_ws != NULL) {
            cudaSetDevice(pp->device);
            cudaFree(pp->dev_meta);
            cudaFree(pp->run_io);
            cudaFree(pp->run_ws);
        }
#endif
        attn_mask_prog_free(&pp->host_mask);
        free(pp->host_meta);
        if (pp->partitioned)
            attn_cuda_plan_host_free(&pp->dec);
        free(pp);
        p->priv = NULL;
    }
    if (p->split.slot_indptr != NULL || p->split.items != NULL || p->split.num_splits != NULL)
        attn_split_plan_free(&p->split);
}

/* The split view the diagnostic and attn_selection_note_plan read: per
 * request the most parts any of its m tiles was cut into (1 unsplit),
 * slots = partial states, work items = CTAs per K/V head.  items stays
 * NULL: the tile plan's items are not key ranges of attn_work_item. */
static int split_view(const attn_prefill_plan *tp, bool fixed, attn_split_plan *sv,
                      attn_error_detail *err)
{
    const uint32_t B = tp->num_requests;
    memset(sv, 0, sizeof *sv);
    sv->num_requests = B;
    sv->num_splits = calloc(B ? B : 1, sizeof *sv->num_splits);
    sv->slot_indptr = calloc(B + 1, sizeof *sv->slot_indptr);
    if (sv->num_splits == NULL || sv->slot_indptr == NULL) {
        attn_split_plan_free(sv);
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the split view");
    }
    for (uint32_t b = 0; b < B; b++)
        sv->num_splits[b] = 1;
    for (uint32_t i = 0; i < tp->num_merges; i++) {
        const attn_prefill_merge *mg = &tp->merges[i];
        if ((uint32_t)mg->num_parts > sv->num_splits[mg->req])
            sv->num_splits[mg->req] = (uint32_t)mg->num_parts;
        sv->slot_indptr[mg->req + 1] += (uint32_t)mg->num_parts;
    }
    for (uint32_t b = 0; b < B; b++)
        sv->slot_indptr[b + 1] += sv->slot_indptr[b];
    sv->num_slots = tp->num_parts;
    sv->slot_capacity = tp->num_parts;
    sv->num_items = tp->num_items;
    sv->policy = fixed ? ATTN_SPLIT_FIXED : ATTN_SPLIT_FA;
    return 0;
}

/* The table arrays' bytes of a manifest of B requests (CSR: indptr,
 * indices, last page lengths; dense: the table at row length max_blocks,
 * lens). */
static void table_bytes(const attn_kv_table *kv, uint32_t B, uint32_t page_indices,
                        uint32_t max_blocks, size_t tb[3])
{
    if (kv->format == ATTN_KV_CSR) {
        tb[0] = sizeof(int32_t) * (B + 1);
        tb[1] = sizeof(int32_t) * page_indices;
        tb[2] = sizeof(int32_t) * B;
    } else {
        tb[0] = sizeof(int32_t) * (size_t)B * max_blocks;
        tb[1] = sizeof(int32_t) * B;
        tb[2] = 0;
    }
}

/* The image's counts for the plan's own arrays (no padding). */
static image_caps caps_of_plan(const attn_manifest *m, const attn_pool_geometry *g,
                               const attn_prefill_plan *tp, const prefill_priv *pp)
{
    const uint32_t B = m->num_requests;
    image_caps c = {.reqs = B,
                    .items = tp->num_items,
                    .tiles = tp->num_tiles,
                    .merges = tp->num_merges,
                    .workers = tp->worker_indptr ? tp->num_workers : 0,
                    .units = tp->worker_indptr ? tp->num_items * g->num_kv_heads : 0,
                    .arena = pp->host_mask.arena_bytes,
                    .rows = (uint32_t)m->qo_indptr[B],
                    .table_requests = B,
                    .max_blocks = m->kv.max_blocks,
                    .page_indices = (uint32_t)m->kv.num_page_indices};
    table_bytes(&m->kv, B, c.page_indices, c.max_blocks, c.tb);
    return c;
}

/* The image's counts under graph mode: the envelope's, from the capacity
 * manifest `m` (its mask arena and page-table sizes are the most a step
 * may use). */
static image_caps caps_of_envelope(const attn_manifest *m, const attn_pool_geometry *g,
                                   const attn_prefill_envelope *e, const prefill_priv *pp)
{
    image_caps c = {.reqs = e->max_requests + 1,
                    .items = e->max_items,
                    .tiles = e->max_tiles,
                    .merges = e->max_merges,
                    .workers = e->workers,
                    .units = e->max_items * g->num_kv_heads,
                    .arena = pp->host_mask.arena_bytes,
                    .rows = e->max_q_rows,
                    .table_requests = e->max_requests,
                    .max_blocks = m->kv.max_blocks,
                    .page_indices = (uint32_t)m->kv.num_page_indices};
    table_bytes(&m->kv, e->max_requests, c.page_indices, c.max_blocks, c.tb);
    return c;
}

/* Offsets of every array in the image and its size, from pp->caps. */
static void layout_image(prefill_priv *pp)
{
    const image_caps *c = &pp->caps;
    size_t o = 0;
    pp->off_reqs = o;
    o += align256(sizeof(attn_prefill_req) * c->reqs);
    pp->off_items = o;
    o += align256(sizeof(attn_prefill_item) * c->items);
    pp->off_tiles = o;
    o += align256(sizeof(int32_t) * c->tiles);
    pp->off_merges = o;
    o += align256(sizeof(attn_prefill_merge) * c->merges);
    pp->off_wq = o;
    o += align256(c->workers ? sizeof(uint32_t) * (c->workers + 1) : 0);
    pp->off_order = o;
    o += align256(sizeof(uint32_t) * c->units);
    pp->off_arena = o;
    o += align256(c->arena);
    for (int i = 0; i < 3; i++) {
        pp->off_t[i] = o;
        o += align256(c->tb[i]);
    }
    pp->off_rows = o;
    o += align256(sizeof(int64_t) * c->rows);
    pp->meta_bytes = o;
}

/* Fill the zeroed image `hm` (pp's layout) for manifest m, tile plan tp
 * (its queues built) and mask program mp: the arrays, the padding past
 * their counts (graph mode), the checks the validator cannot make.  The
 * caller checked every count against pp->caps. */
static int fill_image(const attn_manifest *m, const attn_pool_geometry *g,
                      const attn_prefill_plan *tp, const attn_mask_prog *mp, const prefill_priv *pp,
                      char *hm, attn_error_detail *err)
{
    const uint32_t B = m->num_requests, d = g->head_dim_qk;
    const image_caps *c = &pp->caps;
    const attn_kv_table *kv = &m->kv;
    memcpy(hm + pp->off_reqs, tp->reqs, sizeof *tp->reqs * B);
    /* a plan that leaves every row to the decode kernels has no tiles */
    if (tp->num_items)
        memcpy(hm + pp->off_items, tp->items, sizeof *tp->items * tp->num_items);
    if (tp->num_tiles)
        memcpy(hm + pp->off_tiles, tp->tiles, sizeof *tp->tiles * tp->num_tiles);
    attn_prefill_merge *mg = (attn_prefill_merge *)(void *)(hm + pp->off_merges);
    if (tp->num_merges)
        memcpy(mg, tp->merges, sizeof *tp->merges * tp->num_merges);
    for (uint32_t i = tp->num_merges; i < c->merges; i++)
        mg[i] = (attn_prefill_merge){.req = (int32_t)c->reqs - 1}; /* C = 0: exits at once */
    if (c->workers) {
        uint32_t *wq = (uint32_t *)(void *)(hm + pp->off_wq);
        const uint32_t w = tp->worker_indptr ? tp->num_workers : 0;
        if (w)
            memcpy(wq, tp->worker_indptr, sizeof *wq * (w + 1));
        for (uint32_t i = w + 1; i <= c->workers; i++)
            wq[i] = wq[w]; /* empty queues: their CTAs exit at once */
        if (w)
            memcpy(hm + pp->off_order, tp->order,
                   sizeof(uint32_t) * tp->num_items * g->num_kv_heads);
    }
    if (mp->arena_bytes)
        memcpy(hm + pp->off_arena, mp->arena, mp->arena_bytes);
    size_t tb[3];
    table_bytes(kv, B, (uint32_t)kv->num_page_indices, kv->max_blocks, tb);
    if (kv->format == ATTN_KV_CSR) {
        int32_t *ip = (int32_t *)(void *)(hm + pp->off_t[0]);
        memcpy(ip, kv->page_indptr, tb[0]);
        for (uint32_t b = B + 1; b <= c->table_requests; b++)
            ip[b] = kv->page_indptr[B]; /* requests past the step's own no pages */
        if (tb[1])
            memcpy(hm + pp->off_t[1], kv->page_indices, tb[1]);
        memcpy(hm + pp->off_t[2], kv->last_page_len, tb[2]);
    } else {
        /* the table at the image's row length (the envelope's) */
        for (uint32_t b = 0; b < B; b++)
            memcpy(hm + pp->off_t[0] + sizeof(int32_t) * (size_t)b * c->max_blocks,
                   kv->block_table + (size_t)b * kv->max_blocks, sizeof(int32_t) * kv->max_blocks);
        memcpy(hm + pp->off_t[1], kv->lens, tb[1]);
    }

    /* every page the kernel may read lies in this pool, and every new row
     * has a slot (the manifest validator checked the shapes, not the pool) */
    attn_kv_addr ad;
    attn_kv_addr_from_table(&ad, kv, B, g);
    int64_t *rows = (int64_t *)(void *)(hm + pp->off_rows);
    char f[96];
    for (uint32_t b = 0; b < B; b++) {
        int64_t len = attn_kv_addr_len(&ad, b);
        int64_t nb = (len + g->page_size - 1) / g->page_size;
        for (int64_t j = 0; j < nb; j++) {
            int64_t page = attn_kv_addr_block_page(&ad, b, j);
            if (page < 0 || page >= (int64_t)g->num_pages) {
                snprintf(f, sizeof f, "kv.page_indices (request %u, block %lld)", b, (long long)j);
                return attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL, f, "page %lld outside [0, %u)",
                                      (long long)page, g->num_pages);
            }
        }
        /* seed 0x08C: new row i of request b lands at logical position T_b + i */
        const int64_t T = m->requests[b].cache_len, C = m->requests[b].new_len;
        for (int64_t i = 0; i < C; i++) {
            int64_t page, slot;
            if (!attn_kv_addr_locate(&ad, b, T + i, &page, &slot)) {
                snprintf(f, sizeof f, "requests[%u].new_len", b);
                return attn_error_set(err, ATTN_E_COVERAGE, f, "no page slot for new row %lld",
                                      (long long)i);
            }
            rows[m->qo_indptr[b] + i] = attn_kv_addr_elem(&ad, page, slot, 0, 0, d);
        }
    }
    for (uint32_t r = (uint32_t)m->qo_indptr[B]; r < c->rows; r++)
        rows[r] = -1; /* past the step's rows: the append moves nothing */
    return 0;
}

/* Lay the image out for pp->caps and fill it (the plan's host image). */
static int build_image(const attn_manifest *m, const attn_pool_geometry *g,
                       const attn_prefill_plan *tp, prefill_priv *pp, attn_error_detail *err)
{
    layout_image(pp);
    if ((pp->host_meta = calloc(1, pp->meta_bytes ? pp->meta_bytes : 1)) == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for %zu metadata bytes",
                              pp->meta_bytes);
    return fill_image(m, g, tp, &pp->host_mask, pp, pp->host_meta, err);
}

/* The partial states of split m tiles: one per (part, K/V head, packed
 * row), in the manifest's ABI; empty ledger when nothing is split. */
static int layout_ledger(const attn_manifest *m, const attn_pool_geometry *g,
                         const attn_prefill_plan *tp, uint64_t extra_states, attn_ledger *led,
                         attn_error_detail *err)
{
    memset(led, 0, sizeof *led);
    if (tp->num_parts == 0 && extra_states == 0)
        return 0;
    uint64_t vec_f, row_f;
    attn_prefill_plan_workspace(tp, g->num_kv_heads, g->head_dim_vo, &vec_f, &row_f);
    vec_f += extra_states * g->head_dim_vo;
    attn_ledger_spec ls;
    memset(&ls, 0, sizeof ls);
    ls.abi = m->policy.state_abi;
    ls.states = row_f + extra_states;
    ls.head_dim_vo = g->head_dim_vo;
    ls.vec_align = 1; /* the kernel indexes vec rows by d, unpadded */
    ls.vec_dtype = ATTN_FP32;
    ls.scalar_dtype = ATTN_FP32;
    ls.align_bytes = 256;
    int rv = attn_ledger_layout(&ls, NULL, 0, led, err);
    if (rv != 0)
        return rv;
    const bool mlu = ls.abi == ATTN_ABI_MLU;
    const attn_ledger_field *vec = attn_ledger_find(led, mlu ? "partial_u" : "partial_O");
    if (vec == NULL || attn_ledger_find(led, mlu ? "partial_m" : "partial_LSE") == NULL ||
        (mlu && attn_ledger_find(led, "partial_l") == NULL) || vec->elems != vec_f)
        return attn_error_set(err, ATTN_E_WORKSPACE, "policy.state_abi",
                              "the ledger lacks the fields the prefill kernel writes");
    return 0;
}

/* The tile plan of the prefill kernel; skip NULL: every row, else the
 * marked (decode) rows are left to the decode kernels. */
static int tile_plan(const attn_manifest *m, const attn_pool_geometry *g, const prefill_priv *pp,
                     const attn_cuda_device_facts *dev, const int64_t *T, const int64_t *C,
                     const uint8_t *skip, attn_prefill_plan *tp, attn_error_detail *err)
{
    attn_prefill_plan_in in = {.num_requests = m->num_requests,
                               .T = T,
                               .C = C,
                               .qo_indptr = m->qo_indptr,
                               .num_qo_heads = m->num_qo_heads,
                               .num_kv_heads = g->num_kv_heads,
                               .head_dim = g->head_dim_qk,
                               .mask = &pp->host_mask,
                               .num_sms = dev->sm_count,
                               .fixed_splits = m->policy.splits,
                               .skip = skip,
                               .variant = pp->variant};
    return attn_prefill_plan_build(&in, tp, err);
}

/* Tiles of the longest work item (one CTA walks it alone). */
static uint64_t longest_item(const attn_prefill_plan *tp)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < tp->num_items; i++) {
        uint64_t k = (uint64_t)(tp->items[i].tile_end - tp->items[i].tile_begin);
        n = k > n ? k : n;
    }
    return n;
}

/* K and V bytes the marked rows read: their visible keys x H_kv x d x 2. */
static uint64_t marked_kv_bytes(const attn_manifest *m, const attn_pool_geometry *g,
                                const attn_mask_prog *mp, const uint8_t *mark)
{
    uint64_t keys = 0;
    for (uint32_t b = 0; b < m->num_requests; b++)
        if (mark[b]) {
            attn_row_keys k = attn_mask_row_keys(mp, b, 0);
            keys += (uint64_t)(k.hi0 > k.lo0 ? k.hi0 - k.lo0 : 0) +
                    (uint64_t)(k.hi1 > k.lo1 ? k.hi1 - k.lo1 : 0);
        }
    return keys * g->num_kv_heads * (g->head_dim_qk + g->head_dim_vo) *
           attn_dtype_size(g->kv_dtype);
}

/* The marked (decode) requests as a manifest of their own, request order
 * kept, and each one's row in the batch's q / o / lse: what the decode
 * sub-plan is made from.  Free with free_submanifest. */
static int decode_submanifest(const attn_manifest *m, const uint8_t *mark, attn_manifest *sub,
                              int32_t **rows, attn_error_detail *err)
{
    const attn_kv_table *kv = &m->kv;
    uint32_t nd = 0, npi = 0;
    for (uint32_t b = 0; b < m->num_requests; b++)
        if (mark[b]) {
            nd++;
            if (kv->format == ATTN_KV_CSR)
                npi += (uint32_t)(kv->page_indptr[b + 1] - kv->page_indptr[b]);
        }
    *sub = *m; /* pool, heads, mask scalars, scale, q dtype, policy */
    memset(&sub->kv, 0, sizeof sub->kv);
    sub->num_requests = nd;
    sub->kv.format = kv->format;
    sub->requests = calloc(nd, sizeof *sub->requests);
    sub->qo_indptr = calloc(nd + 1, sizeof *sub->qo_indptr);
    *rows = calloc(nd, sizeof **rows);
    bool ok = sub->requests && sub->qo_indptr && *rows;
    if (kv->format == ATTN_KV_CSR) {
        sub->kv.page_indptr = calloc(nd + 1, sizeof(int32_t));
        sub->kv.page_indices = calloc(npi ? npi : 1, sizeof(int32_t));
        sub->kv.last_page_len = calloc(nd, sizeof(int32_t));
        sub->kv.num_page_indices = npi;
        ok = ok && sub->kv.page_indptr && sub->kv.page_indices && sub->kv.last_page_len;
    } else {
        sub->kv.max_blocks = kv->max_blocks;
        sub->kv.block_table = calloc((size_t)nd * kv->max_blocks + 1, sizeof(int32_t));
        sub->kv.lens = calloc(nd, sizeof(int32_t));
        ok = ok && sub->kv.block_table && sub->kv.lens;
    }
    if (!ok)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the decode sub-plan");
    uint32_t j = 0, pi = 0;
    for (uint32_t b = 0; b < m->num_requests; b++) {
        if (!mark[b])
            continue;
        sub->requests[j] = m->requests[b];
        sub->qo_indptr[j + 1] = (int32_t)j + 1;
        (*rows)[j] = m->qo_indptr[b];
        if (kv->format == ATTN_KV_CSR) {
            for (int32_t i = kv->page_indptr[b]; i < kv->page_indptr[b + 1]; i++)
                sub->kv.page_indices[pi++] = kv->page_indices[i];
            sub->kv.page_indptr[j + 1] = (int32_t)pi;
            sub->kv.last_page_len[j] = kv->last_page_len[b];
        } else {
            memcpy(sub->kv.block_table + (size_t)j * kv->max_blocks,
                   kv->block_table + (size_t)b * kv->max_blocks, sizeof(int32_t) * kv->max_blocks);
            sub->kv.lens[j] = kv->lens[b];
        }
        j++;
    }
    return 0;
}

static void free_submanifest(attn_manifest *sub, int32_t *rows)
{
    free(sub->requests);
    free(sub->qo_indptr);
    free(sub->kv.page_indptr);
    free(sub->kv.page_indices);
    free(sub->kv.last_page_len);
    free(sub->kv.block_table);
    free(sub->kv.lens);
    free(rows);
    memset(sub, 0, sizeof *sub);
}

/* The decode sub-plan over the marked rows, with the decode engine's
 * default tuning (no fused reducer: no counters to share). */
static int plan_decode_rows(const attn_manifest *m, const attn_pool_geometry *g,
                            const attn_cuda_device_facts *dev, const uint8_t *mark,
                            prefill_priv *pp, attn_error_detail *err)
{
    attn_manifest sub;
    int32_t *rows = NULL;
    int rv = decode_submanifest(m, mark, &sub, &rows, err);
    if (rv == 0) {
        attn_cuda_tuning dt;
        attn_cuda_tuning_defaults(&dt);
        dt.fused_merge = 0;
        rv = attn_cuda_plan_host_rows(&sub, g, dev, &dt, rows, &pp->dec, err);
        if (rv == 0)
            pp->partitioned = true;
    }
    free_submanifest(&sub, rows);
    return rv;
}

/* What the cost model reads from the candidate tile plans (all NULL: the
 * unified candidate is not estimated). */
static attn_mixed_cost_in cost_in(const attn_manifest *m, const attn_pool_geometry *g,
                                  const prefill_priv *pp, const attn_cuda_device_facts *dev,
                                  const uint8_t *mark, uint32_t nd, const attn_prefill_plan *all,
                                  const attn_prefill_plan *part)
{
    attn_mixed_cost_in ci = {
        .unified_tiles = all ? all->ledger.full_tiles + all->ledger.partial_tiles : 0,
        .unified_longest = all ? longest_item(all) : 0,
        .unified_units = all ? (uint64_t)all->num_items * g->num_kv_heads : 0,
        .unified_merges = all ? all->num_merges : 0,
        .prefill_tiles = part->ledger.full_tiles + part->ledger.partial_tiles,
        .prefill_longest = longest_item(part),
        .prefill_units = (uint64_t)part->num_items * g->num_kv_heads,
        .prefill_merges = part->num_merges,
        .decode_kv_bytes = marked_kv_bytes(m, g, &pp->host_mask, mark),
        .decode_requests = nd,
        /* the decode sub-plan's grid when it is planned (the wave term) */
        .decode_ctas = pp->partitioned ? (uint32_t)(pp->dec.split.num_items * g->num_kv_heads *
                                                    (dev->head_chunks ? dev->head_chunks : 1))
                                       : 0,
        .decode_ctas_per_sm = dev->ctas_per_sm,
        .num_sms = dev->sm_count,
        .head_dim = g->head_dim_qk,
        .tile_n = part->tile_n ? part->tile_n : pp->tile_n,
        .streams = pp->tuning.streams,
        /* not offered to auto: overlap is measured to lose on the H200 and
         * is refused unless the instance runs a trial (overlap_trial,
         * k_overlap_refused) */
        .overlap_ok = 0,
    };
    if (ci.unified_tiles < ci.prefill_tiles)
        ci.unified_tiles = ci.prefill_tiles; /* keeps the why's tile difference >= 0 */
    return ci;
}

/* Keep the cost model's stream variant for partition in the plan and say
 * it in the why after its first n characters: the variant, both
 * estimates, and the instance setting it came from. */
static void keep_streams(prefill_priv *pp, const attn_mixed_cost *mc, attn_engine_plan *out, int n)
{
    pp->order = mc->order;
    pp->prefill_ctas = mc->prefill_ctas;
    if (n < 0 || (size_t)n >= sizeof out->schedule_why)
        return;
    char *tail = out->schedule_why + n;
    const size_t room = sizeof out->schedule_why - (size_t)n;
    if (strncmp(out->schedule_why, "auto:", 5) == 0) /* auto's why has partition's variants */
        snprintf(tail, room, " (ATTN_MIXED_STREAMS=%s)",
                 attn_mixed_order_name(pp->tuning.streams.order));
    else {
        char parts[256];
        attn_mixed_cost_describe_partition(mc, parts, sizeof parts);
        snprintf(tail, room, "; %s (ATTN_MIXED_STREAMS=%s)", parts,
                 attn_mixed_order_name(pp->tuning.streams.order));
    }
}

/* overlap on the fused kernel: the decode rows' sub-plan first, split for
 * one fused CTA per SM (the kernel's decode roles run one piece per CTA),
 * then the prefill/append rows' tile plan, cut for the fused variant with
 * its split bound over the launch's CTAs, max(SMs, decode pieces): CTA b
 * runs decode piece b beside prefill queue b, so each CTA gets the same
 * share of the prefill work (the queues are built over those CTAs). */
static int fused_schedule(const attn_manifest *m, const attn_pool_geometry *g, prefill_priv *pp,
                          const attn_cuda_device_facts *dev, const int64_t *T, const int64_t *C,
                          const uint8_t *mark, attn_prefill_plan *tp, attn_engine_plan *out,
                          attn_error_detail *err)
{
    attn_cuda_device_facts one = *dev;
    one.ctas_per_sm = 1; /* 384 threads x 168 registers: one fused CTA per SM */
    int rv = plan_decode_rows(m, g, &one, mark, pp, err);
    if (rv != 0)
        return rv;
    const uint64_t pieces =
        attn_mixed_fused_pieces(pp->dec.split.num_items, m->num_qo_heads, g->num_kv_heads);
    if (pieces > INT32_MAX)
        return attn_error_set(err, ATTN_E_CAPACITY, "requests",
                              "%llu decode pieces exceed the fused launch's grid",
                              (unsigned long long)pieces);
    pp->fused_ctas = pieces > dev->sm_count ? (uint32_t)pieces : dev->sm_count;
    pp->order = ATTN_MIXED_ORDER_SERIAL;
    pp->prefill_ctas = 0;
    out->schedule = ATTN_SCHED_OVERLAP;
    snprintf(out->schedule_why, sizeof out->schedule_why,
             "as asked: every row in one launch of the fused kernel, %u CTAs (one per SM at a "
             "time), CTA b running decode piece b of %llu beside prefill queue b",
             pp->fused_ctas, (unsigned long long)pieces);
    attn_cuda_device_facts wide = *dev;
    wide.sm_count = pp->fused_ctas; /* the split bound: one share per fused CTA */
    return tile_plan(m, g, pp, &wide, T, C, mark, tp, err);
}

/* The schedule a batch with decode rows runs: as asked, or auto's pick
 * from the cost model over both candidate tile plans.  Leaves in *tp the
 * tile plan the run uses (empty when partition leaves it no rows). */
static int choose_schedule(const attn_manifest *m, const attn_pool_geometry *g, prefill_priv *pp,
                           const attn_cuda_device_facts *dev, const int64_t *T, const int64_t *C,
                           const uint8_t *mark, attn_prefill_plan *tp, attn_engine_plan *out,
                           attn_error_detail *err)
{
    const char *dec_why = decode_rows_refusal(m, g, dev);
    uint32_t nd = 0;
    for (uint32_t b = 0; b < m->num_requests; b++)
        nd += mark[b] != 0;
    const attn_schedule_policy asked = m->policy.schedule;
    int rv;
    if (asked == ATTN_SCHED_PARTITION && dec_why != NULL)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.schedule",
                              "schedule partition: %s", dec_why);
    if (asked == ATTN_SCHED_OVERLAP) {
        if (dec_why != NULL)
            return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.schedule",
                                  "schedule overlap: %s", dec_why);
        if (pp->fused)
            return fused_schedule(m, g, pp, dev, T, C, mark, tp, out, err);
        /* the trial: the light grid first (one CTA per SM), the decode kernels on the
         * second stream fill the room beside it (launch order measured,
         * docs/cuda-prefill-engine.md) */
        pp->order = ATTN_MIXED_ORDER_PREFILL_FIRST;
        pp->prefill_ctas = 0;
        out->schedule = asked;
        snprintf(out->schedule_why, sizeof out->schedule_why, "as asked: %s",
                 "a trial: prefill/append rows on the light prefill kernel (one CTA per SM), "
                 "decode rows on the decode kernels on a second stream launched after it (two "
                 "launches; co-residency not guaranteed: the probe measures it)");
        return tile_plan(m, g, pp, dev, T, C, mark, tp, err);
    }
    if (asked == ATTN_SCHED_UNIFIED) {
        out->schedule = asked;
        snprintf(out->schedule_why, sizeof out->schedule_why, "as asked: %s",
                 "every row, decode rows included, in one launch of the prefill kernel");
        return tile_plan(m, g, pp, dev, T, C, NULL, tp, err);
    }
    /* the decode rows' sub-plan before the estimate: partition runs it, and
     * the cost model reads its grid (the waves it fills beside a capped
     * prefill grid); dropped again when auto picks unified */
    if (dec_why == NULL && nd > 0 && !pp->partitioned &&
        (rv = plan_decode_rows(m, g, dev, mark, pp, err)) != 0)
        return rv;
    if (asked == ATTN_SCHED_PARTITION) {
        if ((rv = tile_plan(m, g, pp, dev, T, C, mark, tp, err)) != 0)
            return rv;
        attn_mixed_cost_in ci = cost_in(m, g, pp, dev, mark, nd, NULL, tp);
        attn_mixed_cost mc;
        attn_mixed_cost_estimate(&ci, attn_mixed_cost_h200(), 1, &mc);
        out->schedule = asked;
        int n = snprintf(out->schedule_why, sizeof out->schedule_why, "as asked: %s",
                         "prefill/append rows on the prefill kernel, decode rows on the decode "
                         "kernels");
        keep_streams(pp, &mc, out, n);
        return 0;
    }
    /* auto: estimate both from their tile plans, keep the cheaper */
    attn_prefill_plan all, part;
    memset(&part, 0, sizeof part);
    if ((rv = tile_plan(m, g, pp, dev, T, C, NULL, &all, err)) != 0)
        return rv;
    if (dec_why == NULL && (rv = tile_plan(m, g, pp, dev, T, C, mark, &part, err)) != 0) {
        attn_prefill_plan_free(&all);
        return rv;
    }
    attn_mixed_cost_in ci = cost_in(m, g, pp, dev, mark, nd, &all, &part);
    attn_mixed_cost mc;
    attn_mixed_cost_estimate(&ci, attn_mixed_cost_h200(), dec_why == NULL, &mc);
    out->schedule = mc.pick;
    int n = snprintf(out->schedule_why, sizeof out->schedule_why, "%s", mc.why);
    if (mc.pick == ATTN_SCHED_PARTITION) {
        keep_streams(pp, &mc, out, n);
        *tp = part;
        attn_prefill_plan_free(&all);
    } else {
        *tp = all;
        attn_prefill_plan_free(&part);
        if (pp->partitioned) {
            attn_cuda_plan_host_free(&pp->dec);
            pp->partitioned = false;
        }
    }
    return 0;
}

/* Append a clause to the plan's schedule_why, whole: the why before it is
 * cut to make room (its tail, the variants' details, matters least; the
 * walk's rho / eta are what seed 0x09G asks the why to report). */
static void append_why(attn_engine_plan *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void append_why(attn_engine_plan *out, const char *fmt, ...)
{
    char clause[sizeof out->schedule_why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(clause, sizeof clause, fmt, ap);
    va_end(ap);
    const size_t room = sizeof out->schedule_why - 1, len = strlen(out->schedule_why);
    const size_t n = strlen(clause), at = n >= room ? 0 : len < room - n ? len : room - n;
    snprintf(out->schedule_why + at, sizeof out->schedule_why - at, "%s", clause);
}

/* A single-kernel batch (no decode rows, or only decode rows the decode
 * kernels cannot take): one launch of the prefill kernel, whatever the
 * label (every row of it belongs to that kernel). */
static void single_kernel_schedule(const attn_manifest *m, uint32_t phases, attn_prefill_variant v,
                                   attn_engine_plan *out)
{
    const bool mixed = !one_phase(phases);
    out->schedule = m->policy.schedule != ATTN_SCHED_AUTO ? m->policy.schedule
                    : mixed                               ? ATTN_SCHED_UNIFIED
                                                          : ATTN_SCHED_PARTITION;
    snprintf(out->schedule_why, sizeof out->schedule_why, "%s%s",
             m->policy.schedule != ATTN_SCHED_AUTO ? "as asked: " : "auto: ",
             v == ATTN_PREFILL_LIGHT
                 ? "nothing to overlap (no decode rows the decode kernels take): one launch of "
                   "the light prefill kernel"
             : m->policy.schedule == ATTN_SCHED_OVERLAP
                 ? "nothing to overlap (no decode rows the decode kernels take): one launch of "
                   "the prefill kernel"
             : mixed ? "prefill and append rows in one launch of the prefill kernel"
                     : "one launch of the prefill kernel (attend, then combine when split)");
}

/* Where the run's buffers lie in its io allocation: q | k_new | v_new | o
 * | lse | saved k | saved v (the plan's rows, graph mode the envelope's). */
typedef struct io_layout {
    size_t q, k, v, o, l, sk, sv, bytes;
} io_layout;

static io_layout io_layout_of(const prefill_priv *pp)
{
    io_layout L;
    L.q = 0;
    L.k = align256(pp->q_bytes);
    L.v = L.k + align256(pp->kv_bytes);
    L.o = L.v + align256(pp->kv_bytes);
    L.l = L.o + align256(pp->q_bytes);
    L.sk = L.l + align256(pp->lse_bytes);
    L.sv = L.sk + align256(pp->kv_bytes);
    L.bytes = L.sv + align256(pp->kv_bytes);
    return L;
}

/* ---- graph mode: the capacity envelope (seed 0x03G) ----------------------- */

/* What graph mode refuses at plan time beyond admission: the snake walk
 * (it reads the unit count from a launch parameter; the queues are device
 * memory). */
static int graph_admit(const attn_manifest *m, uint32_t phases, const prefill_priv *pp,
                       attn_error_detail *err)
{
    const char *why = graph_refusal(m, phases);
    if (why != NULL)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.graph", "graph mode: %s", why);
    if (pp->tuning.walk == ATTN_PREFILL_WALK_SNAKE)
        return attn_error_set(
            err, ATTN_E_BACKEND_REJECTED, "ATTN_PREFILL_WALK",
            "graph mode needs per-CTA queues (walk pairs, cluster or queue): the snake's unit "
            "count is a launch parameter");
    return 0;
}

/* The envelope of the capacity manifest m (its requests, q rows and the
 * keys of its longest request), checked against its own tile plan. */
static int graph_envelope(const attn_manifest *m, const attn_pool_geometry *g,
                          const attn_cuda_device_facts *dev, const attn_prefill_plan *tp,
                          prefill_priv *pp, attn_error_detail *err)
{
    const uint32_t B = m->num_requests;
    int64_t keys = 1;
    for (uint32_t b = 0; b < B; b++) {
        const int64_t k = m->requests[b].cache_len + m->requests[b].new_len;
        keys = k > keys ? k : keys;
    }
    const attn_prefill_envelope_in ei = {.max_requests = B,
                                         .max_q_rows = (uint32_t)m->qo_indptr[B],
                                         .max_keys = keys,
                                         .num_qo_heads = m->num_qo_heads,
                                         .num_kv_heads = g->num_kv_heads,
                                         .head_dim = g->head_dim_qk,
                                         .num_sms = dev->sm_count,
                                         .fixed_splits = m->policy.splits,
                                         .workers = pp->grid_ctas,
                                         .variant = pp->variant};
    int rv = attn_prefill_envelope_size(&ei, &pp->env, err);
    return rv != 0 ? rv : attn_prefill_envelope_check(&pp->env, tp, err);
}

/* The step a graph-mode image describes (tp: its tile plan, queues built). */
static void graph_note_step(const attn_manifest *m, const attn_prefill_plan *tp, prefill_priv *pp)
{
    attn_cuda_prefill_graph_info *s = &pp->step;
    s->graph = true;
    s->env = pp->env;
    s->max_page_indices = m->kv.format == ATTN_KV_CSR ? pp->caps.page_indices : pp->caps.max_blocks;
    s->step_requests = m->num_requests;
    s->step_q_rows = (uint32_t)m->qo_indptr[m->num_requests];
    s->step_items = tp->num_items;
    s->step_tiles = tp->num_tiles;
    s->step_merges = tp->num_merges;
    s->step_parts = tp->num_parts;
    s->step_workers = tp->num_workers;
}

/* Keep what an update may not change, and the first step. */
static void graph_keep(const attn_manifest *m, const attn_pool_geometry *g,
                       const attn_prefill_plan *tp, float sm_scale, prefill_priv *pp)
{
    graph_static *f = &pp->fixed;
    f->g = *g;
    f->num_qo_heads = m->num_qo_heads;
    f->q_dtype = m->q_dtype;
    f->mask_kind = m->mask.kind;
    f->mask_left = m->mask.left;
    f->mask_sinks = m->mask.sinks;
    f->abi = m->policy.state_abi;
    f->splits = m->policy.splits;
    f->format = m->kv.format;
    f->sm_scale = sm_scale;
    f->sm_count = pp->grid_ctas;
    graph_note_step(m, tp, pp);
}

/* The plan-static field the step m (on pool g) changes, or NULL. */
static const char *graph_static_diff(const graph_static *f, const attn_manifest *m,
                                     const attn_pool_geometry *g)
{
    if (!m->policy.graph)
        return "policy.graph";
    if (m->num_qo_heads != f->num_qo_heads)
        return "num_qo_heads";
    if (m->q_dtype != f->q_dtype)
        return "q_dtype";
    if (m->mask.kind != f->mask_kind)
        return "mask.kind";
    if (m->mask.left != f->mask_left)
        return "mask.left";
    if (m->mask.sinks != f->mask_sinks)
        return "mask.sinks";
    if (m->policy.state_abi != f->abi)
        return "policy.state_abi";
    if (m->policy.splits != f->splits)
        return "policy.splits";
    if (m->kv.format != f->format)
        return "kv.format";
    if (attn_manifest_sm_scale(m, g) != f->sm_scale)
        return "sm_scale";
    if (g->num_kv_heads != f->g.num_kv_heads)
        return "pool.num_kv_heads";
    if (g->head_dim_qk != f->g.head_dim_qk || g->head_dim_vo != f->g.head_dim_vo)
        return "pool.head_dim";
    if (g->page_size != f->g.page_size)
        return "pool.page_size";
    if (g->num_pages != f->g.num_pages)
        return "pool.num_pages";
    if (g->kv_dtype != f->g.kv_dtype)
        return "pool.kv_dtype";
    if (g->layout != f->g.layout)
        return "pool.layout";
    return NULL;
}

int attn_cuda_prefill_plan_host(const attn_manifest *m, const attn_pool_geometry *g,
                                const attn_cuda_device_facts *dev,
                                const attn_cuda_prefill_tuning *t, attn_engine_plan *out,
                                attn_error_detail *err)
{
    const uint32_t B = m->num_requests, Hq = m->num_qo_heads, Hkv = g->num_kv_heads;
    const uint32_t d = g->head_dim_qk;
    attn_prefill_plan tp;
    int64_t *T = NULL, *C = NULL;
    uint8_t *mark = NULL;
    int rv;

    memset(&tp, 0, sizeof tp);
    if (!head_dim_ok(d) || g->head_dim_vo != d || Hkv == 0 || Hq % Hkv)
        return attn_error_set(err, ATTN_E_SHAPE, "head_dim_qk",
                              "no prefill kernel for head_dim %u/%u, H_q %u, H_kv %u", d,
                              g->head_dim_vo, Hq, Hkv);
    const bool overlap = m->policy.schedule == ATTN_SCHED_OVERLAP;
    const int trial = overlap_trial(t);
    if (overlap && trial == ATTN_OVERLAP_OFF)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.schedule", "%s",
                              k_overlap_refused);
    if (overlap && trial == ATTN_OVERLAP_FUSED && fused_refusal(m, g) != NULL)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.schedule",
                              "schedule overlap runs the fused mixed kernel: %s",
                              fused_refusal(m, g));
    if (overlap && trial == ATTN_OVERLAP_LIGHT &&
        !attn_prefill_variant_serves(ATTN_PREFILL_LIGHT, d))
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.schedule",
                              "schedule overlap runs the light prefill kernel, which serves "
                              "head_dim 64 and 128, not %u",
                              d);
    prefill_priv *pp = calloc(1, sizeof *pp);
    if (pp == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the plan");
    out->priv = pp;
    pp->order = ATTN_MIXED_ORDER_SERIAL; /* until partition's cost model says otherwise */
    if (t != NULL)
        pp->tuning = *t;
    pp->device = dev->device;
    const uint32_t phases = manifest_phases(m);
    /* decode rows the schedule may send to the decode kernels: a mixed
     * batch, or a pure-decode one they can take */
    const bool two_kernels =
        has_decode(phases) && (!one_phase(phases) || decode_rows_refusal(m, g, dev) == NULL);
    /* overlap asked: its trial's tiles, the light kernel's or the fused
     * kernel's (the fused trial with no decode rows: the full kernel alone) */
    pp->variant = ATTN_PREFILL_FULL;
    if (overlap && trial == ATTN_OVERLAP_LIGHT)
        pp->variant = ATTN_PREFILL_LIGHT;
    else if (overlap && trial == ATTN_OVERLAP_FUSED && two_kernels && !m->policy.graph) {
        pp->variant = ATTN_PREFILL_FUSED;
        pp->fused = true;
    }
    attn_prefill_tile_shape(d, pp->variant, &pp->tile_m, &pp->tile_n);

    /* the mask program at the kernel's key-tile width (its block summaries
     * classify whole tiles), then the tile plan */
    if ((rv = attn_mask_prog_build_blocks(&m->mask, m->requests, B, pp->tile_n, &pp->host_mask,
                                          err)) != 0)
        goto fail;
    T = malloc(sizeof *T * B);
    C = malloc(sizeof *C * B);
    mark = calloc(B ? B : 1, 1);
    if (T == NULL || C == NULL || mark == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
        goto fail;
    }
    for (uint32_t b = 0; b < B; b++) {
        T[b] = m->requests[b].cache_len;
        C[b] = m->requests[b].new_len;
        attn_phase ph;
        mark[b] = attn_phase_classify(T[b], C[b], &ph) == 0 && ph == ATTN_PHASE_DECODE;
    }
    const bool fixed = m->policy.splits > 0;
    pp->graph = m->policy.graph;
    if (pp->graph && (rv = graph_admit(m, phases, pp, err)) != 0)
        goto fail;
    if (pp->graph && two_kernels) {
        /* graph mode: the one launch the envelope covers */
        out->schedule = ATTN_SCHED_UNIFIED;
        snprintf(out->schedule_why, sizeof out->schedule_why, "%s%s",
                 m->policy.schedule == ATTN_SCHED_AUTO ? "auto: " : "as asked: ",
                 "graph mode: every row, decode rows included, in one launch of the prefill "
                 "kernel (partition's decode sub-plan has no capacity envelope)");
        if ((rv = tile_plan(m, g, pp, dev, T, C, NULL, &tp, err)) != 0)
            goto fail;
    } else if (two_kernels) {
        if ((rv = choose_schedule(m, g, pp, dev, T, C, mark, &tp, out, err)) != 0)
            goto fail;
    } else {
        single_kernel_schedule(m, phases, pp->variant, out);
        if ((rv = tile_plan(m, g, pp, dev, T, C, NULL, &tp, err)) != 0)
            goto fail;
    }
    if ((out->schedule == ATTN_SCHED_PARTITION || out->schedule == ATTN_SCHED_OVERLAP) &&
        two_kernels && !pp->partitioned && (rv = plan_decode_rows(m, g, dev, mark, pp, err)) != 0)
        goto fail;
    pp->num_tiles = tp.num_tiles;
    pp->num_parts = tp.num_parts;
    uint64_t dec_states = 0;
    if (pp->partitioned) {
        const attn_ledger_field *f = attn_ledger_find(
            &pp->dec.ledger, m->policy.state_abi == ATTN_ABI_MLU ? "partial_m" : "partial_LSE");
        dec_states = f != NULL ? f->elems : 0;
        uint64_t vec_f;
        attn_prefill_plan_workspace(&tp, Hkv, d, &vec_f, &pp->dec_state0);
    }
    /* the persistent grid: one CTA per SM, fewer when partition forks (the
     * decode kernels take the rest); its per-CTA queues when the walk is
     * queue (seed 0x09E), their rho / eta in the why (seed 0x09G) */
    uint32_t grid_ctas = pp->fused ? pp->fused_ctas : dev->sm_count;
    if (pp->partitioned && pp->order != ATTN_MIXED_ORDER_SERIAL && pp->prefill_ctas != 0 &&
        pp->prefill_ctas < dev->sm_count)
        grid_ctas = pp->prefill_ctas;
    pp->walk =
        pp->tuning.walk == ATTN_PREFILL_WALK_AUTO ? ATTN_PREFILL_WALK_DEFAULT : pp->tuning.walk;
    if (pp->walk != ATTN_PREFILL_WALK_SNAKE && tp.num_items > 0) {
        if ((rv = build_queues(pp->walk, &tp, Hkv, grid_ctas, &pp->queues, err)) != 0)
            goto fail;
        if (pp->walk == ATTN_PREFILL_WALK_PAIRS || pp->walk == ATTN_PREFILL_WALK_CLUSTER)
            append_why(out,
                       "; walk %s (least-loaded, %u units beside their sibling): %u CTAs, "
                       "rho %.3f, eta %.3f",
                       attn_prefill_walk_name(pp->walk), pp->queues.pairs, pp->queues.workers,
                       pp->queues.rho, pp->queues.eta);
        else
            append_why(out, "; walk queue (least-loaded): %u CTAs, rho %.3f, eta %.3f",
                       pp->queues.workers, pp->queues.rho, pp->queues.eta);
    } else if (tp.num_items > 0) {
        append_why(
            out, "; walk snake: %u CTAs",
            (uint32_t)(tp.num_items * (uint64_t)Hkv < grid_ctas ? tp.num_items * Hkv : grid_ctas));
    }
    /* the image's counts: the plan's own, or the envelope's (graph mode) */
    attn_prefill_plan ws_plan = tp; /* what the partial states are sized for */
    pp->grid_ctas = grid_ctas;
    if (pp->graph) {
        if ((rv = graph_envelope(m, g, dev, &tp, pp, err)) != 0)
            goto fail;
        pp->caps = caps_of_envelope(m, g, &pp->env, pp);
        ws_plan.num_parts = pp->env.max_parts;
        append_why(out,
                   "; graph envelope: requests %u, q rows %u, keys %lld, tiles %u, items %u, "
                   "merges %u, parts %u, grid %u CTAs",
                   pp->env.max_requests, pp->env.max_q_rows, (long long)pp->env.max_keys,
                   pp->env.max_tiles, pp->env.max_items, pp->env.max_merges, pp->env.max_parts,
                   pp->env.workers);
    } else
        pp->caps = caps_of_plan(m, g, &tp, pp);
    if ((rv = build_image(m, g, &tp, pp, err)) != 0 ||
        (rv = layout_ledger(m, g, &ws_plan, dec_states, &out->ledger, err)) != 0 ||
        (rv = split_view(&tp, fixed, &out->split, err)) != 0)
        goto fail;
    if (pp->partitioned) {
        /* the split view counts the decode rows' splits and producer items too */
        uint32_t j = 0;
        for (uint32_t b = 0; b < B; b++)
            if (mark[b])
                out->split.num_splits[b] = pp->dec.split.num_splits[j++];
        out->split.num_items += pp->dec.split.num_items;
    }

    out->tiles.counted = true;
    out->tiles.tile_m = tp.tile_m;
    out->tiles.tile_n = tp.tile_n;
    out->tiles.ledger = tp.ledger;
    /* the metadata image (mask arena included): on the host until the
     * upload, then its device copy (the daemon's plan-cache bound) */
    out->priv_bytes = sizeof *pp + pp->meta_bytes + pp->dec.priv_bytes;

    /* kernel parameters fixed for the plan's life (graph mode: the rows
     * the run copies and stages are the envelope's) */
    pp->total_q = pp->caps.rows;
    const size_t es = attn_dtype_size(g->kv_dtype), qs = attn_dtype_size(m->q_dtype);
    pp->q_bytes = (size_t)pp->total_q * Hq * d * qs;
    pp->kv_bytes = (size_t)pp->total_q * Hkv * d * es;
    pp->lse_bytes = (size_t)pp->total_q * Hq * sizeof(float);
    if (pp->graph) /* the host image stays, and the plan owns its run buffers */
        out->priv_bytes += pp->meta_bytes + io_layout_of(pp).bytes + out->ledger.total_bytes;
    pp->head_stride = g->layout == ATTN_HND ? (int64_t)g->page_size * d : (int64_t)d;
    pp->dev_table = m->kv;
    attn_cuda_prefill_params *pr = &pp->params;
    pr->num_items = tp.num_items;
    pr->num_merges = pp->caps.merges; /* graph mode: the envelope's, the padded ones exit */
    pr->num_qo_heads = Hq;
    pr->num_kv_heads = Hkv;
    pr->head_dim = d;
    pr->q_dtype = m->q_dtype;
    pr->kv_dtype = g->kv_dtype;
    pr->abi = m->policy.state_abi;
    pr->sm_scale = attn_manifest_sm_scale(m, g);
    pr->max_ctas = grid_ctas;
    pr->num_workers = pp->caps.workers; /* the queues' grid (0: the snake's) */
    pr->variant = pp->variant;
    /* the cluster walk's launch (attn_cuda_prefill_clustered says where it
     * applies) where the pairs were taken; not under graph mode, whose
     * steps may rebuild plain queues, which the clustered kernel would run
     * in lockstep (each position costing its longer unit on both CTAs) */
    pr->cluster =
        pp->walk == ATTN_PREFILL_WALK_CLUSTER && pp->queues.pairs > 0 && !pp->graph
            ? (pp->tuning.cluster_trial ? pp->tuning.cluster_trial : ATTN_PREFILL_CLUSTER_MULTICAST)
            : ATTN_PREFILL_CLUSTER_OFF;
    if (pp->graph)
        graph_keep(m, g, &tp, pr->sm_scale, pp);

    attn_engine_env_cuda(&out->env, dev->device, dev->cc_major, dev->cc_minor);
    attn_prefill_plan_free(&tp);
    free(T);
    free(C);
    free(mark);
    return 0;
fail:
    attn_prefill_plan_free(&tp);
    free(T);
    free(C);
    free(mark);
    attn_cuda_prefill_plan_host_free(out);
    memset(&out->ledger, 0, sizeof out->ledger);
    memset(&out->tiles, 0, sizeof out->tiles);
    return rv;
}

int attn_cuda_prefill_plan_info_get(const attn_engine_plan *p, attn_cuda_prefill_plan_info *out)
{
    memset(out, 0, sizeof *out);
    if (p == NULL || p->priv == NULL || !p->tiles.counted ||
        (p->owner != NULL && p->owner->ops != attn_cuda_prefill_engine_ops()))
        return ATTN_E_ENGINE;
    const prefill_priv *pp = p->priv;
    out->tile_m = pp->tile_m;
    out->tile_n = pp->tile_n;
    out->num_items = pp->params.num_items;
    out->num_tiles = pp->num_tiles;
    out->num_merges = pp->params.num_merges;
    out->num_parts = pp->num_parts;
    out->total_q = pp->total_q;
    out->meta_bytes = pp->meta_bytes;
    out->streams = attn_mixed_order_name(pp->order);
    out->max_ctas = pp->params.max_ctas;
    out->walk = attn_prefill_walk_name(pp->walk);
    out->num_workers = pp->params.num_workers;
    out->pairs = pp->queues.pairs;
    out->cluster = pp->params.cluster;
    out->rho = pp->queues.rho;
    out->eta = pp->queues.eta;
#ifdef ATTN_WITH_CUDA
    attn_cuda_prefill_symbols(&pp->params, &out->attend, &out->combine);
#endif
    return 0;
}

int attn_cuda_prefill_graph_info_get(const attn_engine_plan *p, attn_cuda_prefill_graph_info *out)
{
    memset(out, 0, sizeof *out);
    if (p == NULL || p->priv == NULL || !p->tiles.counted ||
        (p->owner != NULL && p->owner->ops != attn_cuda_prefill_engine_ops()))
        return ATTN_E_ENGINE;
    const prefill_priv *pp = p->priv;
    if (pp->graph)
        *out = pp->step;
    return 0;
}

int attn_cuda_prefill_plan_arrays(const attn_engine_plan *p, attn_prefill_plan *view,
                                  const int64_t **rows, uint32_t *num_rows)
{
    memset(view, 0, sizeof *view);
    if (p == NULL || p->priv == NULL || !p->tiles.counted ||
        (p->owner != NULL && p->owner->ops != attn_cuda_prefill_engine_ops()))
        return ATTN_E_ENGINE;
    const prefill_priv *pp = p->priv;
    if (pp->host_meta == NULL)
        return ATTN_E_ENGINE;
    char *hm = pp->host_meta;
    const image_caps *c = &pp->caps;
    view->tile_m = pp->tile_m;
    view->tile_n = pp->tile_n;
    view->reqs = (attn_prefill_req *)(void *)(hm + pp->off_reqs);
    view->num_requests = c->reqs;
    view->items = (attn_prefill_item *)(void *)(hm + pp->off_items);
    view->num_items = c->items;
    view->tiles = (int32_t *)(void *)(hm + pp->off_tiles);
    view->num_tiles = c->tiles;
    view->merges = (attn_prefill_merge *)(void *)(hm + pp->off_merges);
    view->num_merges = c->merges;
    view->num_parts = pp->graph ? pp->env.max_parts : pp->num_parts;
    view->num_workers = c->workers;
    view->worker_indptr = c->workers ? (uint32_t *)(void *)(hm + pp->off_wq) : NULL;
    view->order = c->workers ? (uint32_t *)(void *)(hm + pp->off_order) : NULL;
    *rows = (const int64_t *)(const void *)(hm + pp->off_rows);
    *num_rows = c->rows;
    return 0;
}

/* Plan the step m of graph-mode plan p inside its envelope into a new image
 * (*img, pp->meta_bytes) and its tile plan (*tp); nothing of p changes. */
static int graph_step(const attn_engine_plan *p, const attn_manifest *m,
                      const attn_pool_geometry *g, char **img, attn_prefill_plan *tp,
                      attn_error_detail *err)
{
    const prefill_priv *pp = p != NULL ? p->priv : NULL;
    *img = NULL;
    memset(tp, 0, sizeof *tp);
    if (pp == NULL || !pp->graph || pp->host_meta == NULL ||
        (p->owner != NULL && p->owner->ops != attn_cuda_prefill_engine_ops()))
        return attn_error_set(err, ATTN_E_ENGINE, "plan",
                              "not a graph-mode plan of cuda_prefill (policy.graph)");
    const char *f = graph_static_diff(&pp->fixed, m, g);
    if (f != NULL)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, f,
                              "graph mode: %s differs from the plan's (it is fixed for the "
                              "plan's life; make a new plan)",
                              f);
    const uint32_t B = m->num_requests;
    const char *why = graph_refusal(m, manifest_phases(m));
    if (why != NULL)
        return attn_error_set(err, ATTN_E_BACKEND_REJECTED, "policy.graph", "graph mode: %s", why);
    /* the direct limits first, each naming the manifest's field */
    const attn_prefill_envelope *e = &pp->env;
    if (B == 0)
        return attn_error_set(err, ATTN_E_EMPTY_BATCH, "num_requests", "no requests");
    if (B > e->max_requests)
        return attn_error_set(err, ATTN_E_CAPACITY, "num_requests",
                              "%u requests; the graph envelope holds %u", B, e->max_requests);
    if (m->qo_indptr[B] < 0 || (uint32_t)m->qo_indptr[B] > e->max_q_rows)
        return attn_error_set(err, ATTN_E_CAPACITY, "qo_indptr",
                              "%d q rows; the graph envelope holds %u", m->qo_indptr[B],
                              e->max_q_rows);
    for (uint32_t b = 0; b < B; b++) {
        const int64_t k = m->requests[b].cache_len + m->requests[b].new_len;
        if (k > e->max_keys) {
            char fb[40];
            snprintf(fb, sizeof fb, "requests[%u]", b);
            return attn_error_set(err, ATTN_E_CAPACITY, fb,
                                  "T + C = %lld keys; the graph envelope holds %lld", (long long)k,
                                  (long long)e->max_keys);
        }
    }
    if (m->kv.format == ATTN_KV_CSR && m->kv.num_page_indices > pp->caps.page_indices)
        return attn_error_set(err, ATTN_E_CAPACITY, "kv.page_indices",
                              "%lld page indices; the graph envelope holds %u",
                              (long long)m->kv.num_page_indices, pp->caps.page_indices);
    if (m->kv.format == ATTN_KV_DENSE && m->kv.max_blocks > pp->caps.max_blocks)
        return attn_error_set(err, ATTN_E_CAPACITY, "kv.max_blocks",
                              "%u blocks per request; the graph envelope holds %u",
                              m->kv.max_blocks, pp->caps.max_blocks);
    attn_mask_prog mp;
    int rv = attn_mask_prog_build_blocks(&m->mask, m->requests, B, pp->tile_n, &mp, err);
    if (rv != 0)
        return rv;
    int64_t *T = malloc(sizeof *T * B), *C = malloc(sizeof *C * B);
    if (T == NULL || C == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
        goto done;
    }
    for (uint32_t b = 0; b < B; b++) {
        T[b] = m->requests[b].cache_len;
        C[b] = m->requests[b].new_len;
    }
    if (mp.arena_bytes > pp->caps.arena) {
        rv = attn_error_set(err, ATTN_E_CAPACITY, "mask", "%zu mask bytes; the envelope holds %zu",
                            mp.arena_bytes, pp->caps.arena);
        goto done;
    }
    /* the plan's split policy and grid: the same planner as a fresh plan */
    attn_prefill_plan_in in = {.num_requests = B,
                               .T = T,
                               .C = C,
                               .qo_indptr = m->qo_indptr,
                               .num_qo_heads = m->num_qo_heads,
                               .num_kv_heads = g->num_kv_heads,
                               .head_dim = g->head_dim_qk,
                               .mask = &mp,
                               .num_sms = pp->fixed.sm_count,
                               .fixed_splits = m->policy.splits};
    if ((rv = attn_prefill_plan_build(&in, tp, err)) != 0 ||
        (rv = build_queues(pp->walk, tp, g->num_kv_heads, pp->grid_ctas, NULL, err)) != 0 ||
        (rv = attn_prefill_envelope_check(e, tp, err)) != 0)
        goto done;
    if ((*img = calloc(1, pp->meta_bytes ? pp->meta_bytes : 1)) == NULL) {
        rv = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory for the step's image");
        goto done;
    }
    rv = fill_image(m, g, tp, &mp, pp, *img, err);
done:
    if (rv != 0) {
        free(*img);
        *img = NULL;
        attn_prefill_plan_free(tp);
    }
    attn_mask_prog_free(&mp);
    free(T);
    free(C);
    return rv;
}

/* Make the step's image the plan's (host side): the image, the step's
 * record and its tile-class report. */
static void graph_commit(attn_engine_plan *p, const attn_manifest *m, char *img,
                         attn_prefill_plan *tp)
{
    prefill_priv *pp = p->priv;
    memcpy(pp->host_meta, img, pp->meta_bytes);
    graph_note_step(m, tp, pp);
    pp->num_tiles = tp->num_tiles;
    pp->num_parts = tp->num_parts;
    pp->params.num_items = tp->num_items;
    p->tiles.ledger = tp->ledger;
    free(img);
    attn_prefill_plan_free(tp);
}

int attn_cuda_prefill_plan_host_update(attn_engine_plan *p, const attn_manifest *m,
                                       const attn_pool_geometry *g, attn_error_detail *err)
{
    char *img;
    attn_prefill_plan tp;
    int rv = graph_step(p, m, g, &img, &tp, err);
    if (rv == 0)
        graph_commit(p, m, img, &tp);
    return rv;
}

/* ---- the instance ---------------------------------------------------------- */

#ifndef ATTN_WITH_CUDA

static int engine_init(const attn_engine_config *cfg, void **state, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "device", "attnd was built without CUDA (make CUDA=0)");
}

static void engine_fini(void *state)
{
}

static void engine_admit(const attn_engine *self, const attn_manifest *m,
                         const attn_pool_geometry *g, attn_admission *out)
{
    attn_cuda_prefill_admit(m, g, NULL, NULL, out);
}

static int engine_plan(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                       attn_engine_plan *out, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

static int engine_run(attn_engine *self, attn_engine_plan *p, const attn_run_io *io,
                      attn_exec_report *rep, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

void attn_cuda_prefill_engine_set_tuning(attn_engine *e, const attn_cuda_prefill_tuning *t)
{
}

int attn_cuda_prefill_graph_update(attn_engine *e, attn_engine_plan *p, const attn_manifest *m,
                                   const attn_pool_geometry *g, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

int attn_cuda_prefill_graph_enqueue(attn_engine *e, attn_engine_plan *p, const attn_run_io *io,
                                    void *stream, attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_CUDA, "backend", "built without CUDA");
}

#else /* ATTN_WITH_CUDA */

/* One instance: its device, stream, events and the buffers every run
 * reuses, grown when a plan needs more. */
typedef struct prefill_instance {
    attn_cuda_device_facts dev; /* first: what admission reads */
    pthread_mutex_t mu;         /* one run at a time on the stream and the buffers */
    attn_cuda_prefill_tuning tuning;
    cudaStream_t stream;
    cudaStream_t side;            /* partition forked: the decode kernels' stream */
    cudaEvent_t ev0, ev1;         /* the engine's timing, on `stream` */
    cudaEvent_t ev_fork, ev_join; /* side waits for the append; stream waits for side */
    void *dev_io;                 /* q | k_new | v_new | o | lse | saved k | saved v */
    size_t dev_io_cap;
    void *dev_ws; /* partial states */
    size_t dev_ws_cap;
    attn_cuda_ipc *ipc; /* the semaphores' stream memory operations; NULL: the driver lacks them */
    char ipc_why[160];  /* why ipc is NULL */
} prefill_instance;

static void engine_fini(void *state);

static int engine_init(const attn_engine_config *cfg, void **state, attn_error_detail *err)
{
    int dev = cfg->device < 0 ? 0 : cfg->device, ndev = 0;
    cudaError_t e;
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess)
        return attn_cuda_error(err, e, "device", "cudaGetDeviceCount");
    if (dev >= ndev)
        return attn_error_set(err, ATTN_E_CUDA, "device", "cuda:%d does not exist (%d devices)",
                              dev, ndev);
    prefill_instance *pi = calloc(1, sizeof *pi);
    if (pi == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "engine", "out of memory");
    struct cudaDeviceProp pr;
    if ((e = cudaSetDevice(dev)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&pr, dev)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&pi->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&pi->ev0)) != cudaSuccess ||
        (e = cudaEventCreate(&pi->ev1)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&pi->side, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&pi->ev_fork, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&pi->ev_join, cudaEventDisableTiming)) != cudaSuccess) {
        free(pi);
        return attn_cuda_error(err, e, "device", "cannot set up the instance's stream and events");
    }
    pthread_mutex_init(&pi->mu, NULL);
    {
        /* the stream memory operations of semaphores (no IPC handles are opened here) */
        attn_error_detail ie;
        memset(&ie, 0, sizeof ie);
        if (attn_cuda_ipc_create(dev, &pi->ipc, &ie) != 0)
            snprintf(pi->ipc_why, sizeof pi->ipc_why, "%.150s", ie.message);
    }
    pi->dev.device = dev;
    pi->dev.cc_major = pr.major;
    pi->dev.cc_minor = pr.minor;
    pi->dev.sm_count = (uint32_t)pr.multiProcessorCount;
    pi->dev.l2_bytes = pr.l2CacheSize > 0 ? (uint64_t)pr.l2CacheSize : 0;
    if (cfg->tuning != NULL)
        pi->tuning = *(const attn_cuda_prefill_tuning *)cfg->tuning;
    /* partition's stream variant, one setting per instance so one process
     * can measure every variant (bench/gpu/bench_mixed.py) */
    const char *order = getenv("ATTN_MIXED_STREAMS"), *ctas = getenv("ATTN_MIXED_PREFILL_CTAS");
    const char *ov = getenv("ATTN_MIXED_OVERLAP"); /* overlap's trial, for measurement */
    if (ov != NULL && ov[0]) {
        int rv = attn_mixed_overlap_parse(ov, &pi->tuning.overlap_trial, err);
        if (rv != 0) {
            engine_fini(pi);
            return rv;
        }
    }
    if ((order != NULL && order[0]) || (ctas != NULL && ctas[0])) {
        int rv = attn_mixed_streams_parse(order, ctas, pi->dev.sm_count, &pi->tuning.streams, err);
        if (rv != 0) {
            engine_fini(pi);
            return rv;
        }
    }
    /* the cluster walk's parts alone, for measurement */
    const char *ct = getenv("ATTN_PREFILL_CLUSTER_TRIAL");
    if (ct != NULL && ct[0]) {
        if (strcmp(ct, "lockstep") == 0)
            pi->tuning.cluster_trial = ATTN_PREFILL_CLUSTER_LOCKSTEP;
        else if (strcmp(ct, "launch") == 0)
            pi->tuning.cluster_trial = ATTN_PREFILL_CLUSTER_LAUNCH;
        else {
            engine_fini(pi);
            return attn_error_set(err, ATTN_E_RANGE, "ATTN_PREFILL_CLUSTER_TRIAL",
                                  "cluster trial '%.40s' is not lockstep or launch", ct);
        }
    }
    /* the unit walk, one setting per instance (A/B in one process) */
    const char *walk = getenv("ATTN_PREFILL_WALK");
    if (walk != NULL && walk[0]) {
        int rv = attn_prefill_walk_parse(walk, &pi->tuning.walk, err);
        if (rv != 0) {
            engine_fini(pi);
            return rv;
        }
    }
    *state = pi;
    return 0;
}

static void engine_fini(void *state)
{
    prefill_instance *pi = state;
    if (pi == NULL)
        return;
    cudaSetDevice(pi->dev.device);
    cudaStreamSynchronize(pi->stream);
    attn_cuda_ipc_destroy(pi->ipc);
    cudaFree(pi->dev_io);
    cudaFree(pi->dev_ws);
    cudaStreamSynchronize(pi->side);
    cudaEventDestroy(pi->ev0);
    cudaEventDestroy(pi->ev1);
    cudaEventDestroy(pi->ev_fork);
    cudaEventDestroy(pi->ev_join);
    cudaStreamDestroy(pi->side);
    cudaStreamDestroy(pi->stream);
    pthread_mutex_destroy(&pi->mu);
    free(pi);
}

static void engine_admit(const attn_engine *self, const attn_manifest *m,
                         const attn_pool_geometry *g, attn_admission *out)
{
    const prefill_instance *pi = self->state;
    attn_cuda_prefill_admit(m, g, pi != NULL ? &pi->dev : NULL, pi != NULL ? &pi->tuning : NULL,
                            out);
}

void attn_cuda_prefill_engine_set_tuning(attn_engine *e, const attn_cuda_prefill_tuning *t)
{
    if (e == NULL || e->ops != attn_cuda_prefill_engine_ops() || e->state == NULL)
        return;
    prefill_instance *pi = e->state;
    pthread_mutex_lock(&pi->mu);
    if (t != NULL)
        pi->tuning = *t;
    else
        memset(&pi->tuning, 0, sizeof pi->tuning);
    pthread_mutex_unlock(&pi->mu);
}

/* The one upload of plan time; afterwards the kernel parameters point
 * into the device image and the host copies are released. */
static int upload(prefill_priv *pp, const attn_ledger *led, const attn_manifest *m,
                  const attn_pool_geometry *g, attn_error_detail *err)
{
    cudaError_t e;
    if (pp->graph) {
        /* graph mode: the plan's own run buffers, so a captured graph's
         * pointers outlive every other plan's growth of the instance's */
        if ((e = cudaMalloc(&pp->run_io, io_layout_of(pp).bytes)) != cudaSuccess ||
            (e = cudaMalloc(&pp->run_ws, led->total_bytes + 256)) != cudaSuccess)
            return attn_cuda_error(err, e, "", "cudaMalloc of the graph-mode plan's buffers");
    }
    if ((e = cudaMalloc(&pp->dev_meta, pp->meta_bytes ? pp->meta_bytes : 256)) != cudaSuccess) {
        pp->dev_meta = NULL;
        return attn_cuda_error(err, e, "", "cudaMalloc of the plan's metadata");
    }
    if ((e = cudaMemcpy(pp->dev_meta, pp->host_meta, pp->meta_bytes, cudaMemcpyHostToDevice)) !=
        cudaSuccess)
        return attn_cuda_error(err, e, "", "upload of the plan's metadata");
    char *dm = pp->dev_meta;
    attn_cuda_prefill_params *pr = &pp->params;
    pr->reqs = (const attn_prefill_req *)(const void *)(dm + pp->off_reqs);
    pr->items = (const attn_prefill_item *)(const void *)(dm + pp->off_items);
    pr->tiles = (const int32_t *)(const void *)(dm + pp->off_tiles);
    pr->merges = (const attn_prefill_merge *)(const void *)(dm + pp->off_merges);
    if (pr->num_workers) {
        pr->worker_indptr = (const uint32_t *)(const void *)(dm + pp->off_wq);
        pr->order = (const uint32_t *)(const void *)(dm + pp->off_order);
    }
    pr->mask = attn_mask_prog_rebase(&pp->host_mask, dm + pp->off_arena);
    attn_kv_table *t = &pp->dev_table;
    if (t->format == ATTN_KV_CSR) {
        t->page_indptr = (int32_t *)(void *)(dm + pp->off_t[0]);
        t->page_indices = (int32_t *)(void *)(dm + pp->off_t[1]);
        t->last_page_len = (int32_t *)(void *)(dm + pp->off_t[2]);
    } else {
        t->block_table = (int32_t *)(void *)(dm + pp->off_t[0]);
        t->lens = (int32_t *)(void *)(dm + pp->off_t[1]);
    }
    /* graph mode: the table's shape is the envelope's (requests past the
     * step's have no pages) */
    attn_kv_addr_from_table(&pr->kv, t, pp->caps.table_requests, g);
    if (!pp->graph) { /* graph mode keeps the host image for the updates */
        free(pp->host_meta);
        pp->host_meta = NULL;
    }
    attn_mask_prog_free(&pp->host_mask);
    return 0;
}

static int engine_plan(attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                       attn_engine_plan *out, attn_error_detail *err)
{
    prefill_instance *pi = self->state;
    attn_cuda_device_facts dev;
    attn_cuda_prefill_tuning tuning;
    cudaError_t e;
    int rv;

    pthread_mutex_lock(&pi->mu);
    dev = pi->dev;
    tuning = pi->tuning;
    pthread_mutex_unlock(&pi->mu);
    if ((e = cudaSetDevice(dev.device)) != cudaSuccess)
        return attn_cuda_error(err, e, "device", "cudaSetDevice");
    /* what a decode sub-plan (partition) needs: the producer's measured grid */
    const uint32_t group = g->num_kv_heads ? m->num_qo_heads / g->num_kv_heads : 1;
    const int occ = attn_cuda_decode_occupancy(g->head_dim_qk, g->kv_dtype, group);
    dev.ctas_per_sm = occ > 0 ? (uint32_t)occ : 0;
    dev.head_chunks = attn_cuda_decode_head_chunks(g->head_dim_qk, g->kv_dtype, group);
    if ((rv = attn_cuda_prefill_plan_host(m, g, &dev, &tuning, out, err)) != 0)
        return rv;
    prefill_priv *pp = out->priv;
    if ((rv = upload(pp, &out->ledger, m, g, err)) != 0 ||
        (pp->partitioned && (rv = attn_cuda_plan_upload(&pp->dec, err)) != 0)) {
        attn_cuda_prefill_plan_host_free(out);
        return rv;
    }
    return 0;
}

/* The run's rows for the append transaction (engines/cuda/txn.h): the new
 * rows at o_k/o_v of the run's buffers, the old ones saved at o_sk/o_sv. */
static attn_cuda_append_params append_rows(const prefill_priv *pp, void *kst, void *vst, char *io,
                                           size_t o_k, size_t o_v, size_t o_sk, size_t o_sv)
{
    const attn_cuda_prefill_params *pr = &pp->params;
    attn_cuda_append_params ap = {
        .k = kst,
        .v = vst,
        .row_off = (const int64_t *)(const void *)((const char *)pp->dev_meta + pp->off_rows),
        .rows = pp->total_q,
        .num_kv_heads = pr->num_kv_heads,
        .head_dim = pr->head_dim,
        .head_stride = pp->head_stride,
        .kv_dtype = pr->kv_dtype,
        .new_k = io + o_k,
        .new_v = io + o_v,
        .save_k = io + o_sk,
        .save_v = io + o_sv,
    };
    return ap;
}

static void report_kernels(const attn_cuda_prefill_params *p, const attn_cuda_decode_params *dp,
                           uint32_t appends, attn_exec_report *rep)
{
    const char *attend = NULL, *combine = NULL, *producer = NULL, *reducer = NULL;
    if (p->variant == ATTN_PREFILL_FUSED && dp != NULL) {
        /* one fused launch stands for the prefill attend and the decode
         * producer; the combine and the reducer as they run after it */
        attn_cuda_mixed_symbols(p, dp, &attend, &combine, &reducer);
    } else {
        attn_cuda_prefill_symbols(p, &attend, &combine);
        if (dp != NULL) {
            attn_cuda_decode_symbols(dp, &producer, &reducer);
            if (!dp->any_split && !dp->force_merge)
                reducer = NULL;
        }
    }
    const bool fused = p->variant == ATTN_PREFILL_FUSED;
    const char *syms[5] = {attn_cuda_append_symbol(), attend, combine, producer, reducer};
    const uint32_t launches[5] = {appends, fused || p->num_items ? 1u : 0u, 1, 1, 1};
    for (int i = 0; i < 5; i++)
        if (syms[i] && launches[i] && rep->num_kernels < ATTN_KERNELS_MAX) {
            snprintf(rep->kernels[rep->num_kernels].symbol, sizeof rep->kernels[0].symbol, "%s",
                     syms[i]);
            rep->kernels[rep->num_kernels++].launches = launches[i];
        }
    rep->kernels_observed = false;
}

/* Partition forked prefill-first on one stream: the attend kernel, whose
 * CTAs trigger their dependents at their start, then the decode kernels
 * with the producer its programmatic dependent that does not wait for it
 * (ATTN_CUDA_PDL_NO_WAIT: they read none of its writes; the producer's
 * grid still completes after it), then the combine kernel when the plan
 * splits.  With the probe, two stamps bracket the three launches (a stamp
 * between them would be the producer's predecessor instead). */
static int one_stream_fork(const attn_cuda_prefill_params *p, const attn_cuda_decode_params *dp,
                           uint64_t *probe, cudaStream_t st, attn_error_detail *err)
{
    if (probe != NULL && attn_cuda_stamp_launch(probe, st) != 0)
        return attn_error_set(err, ATTN_E_CUDA, "tuning.probe", "stamp launch failed");
    attn_cuda_prefill_params a = *p;
    a.trigger_dependents = 1;
    a.parts = ATTN_PREFILL_PARTS_ATTEND;
    int rv = attn_cuda_prefill_launch(&a, st);
    if (rv != 0)
        return attn_error_set(err, rv, "", "prefill launch failed: %s",
                              cudaGetErrorString(cudaGetLastError()));
    attn_cuda_decode_params d = *dp;
    d.pdl = ATTN_CUDA_PDL_NO_WAIT;
    if ((rv = attn_cuda_decode_launch(&d, st)) != 0)
        return attn_error_set(err, rv, "", "decode launch failed: %s",
                              cudaGetErrorString(cudaGetLastError()));
    a.trigger_dependents = 0;
    a.parts = ATTN_PREFILL_PARTS_COMBINE;
    if (p->num_merges && (rv = attn_cuda_prefill_launch(&a, st)) != 0)
        return attn_error_set(err, rv, "", "prefill combine launch failed: %s",
                              cudaGetErrorString(cudaGetLastError()));
    if (probe != NULL && attn_cuda_stamp_launch(probe + 1, st) != 0)
        return attn_error_set(err, ATTN_E_CUDA, "tuning.probe", "stamp launch failed");
    return 0;
}

#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t ck_ = (call);                                                                  \
        if (ck_ != cudaSuccess) {                                                                  \
            rv = attn_cuda_error(err, ck_, "", what);                                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* The plan's kernel parameters with one run's pointers: its io buffers
 * `dio` (io_layout_of), partial states in `ws` (the ledger's fields), the
 * layer's K and V stores. */
static attn_cuda_prefill_params bind_params(const prefill_priv *pp, const attn_ledger *led,
                                            char *dio, char *ws, void *kst, void *vst)
{
    const io_layout L = io_layout_of(pp);
    attn_cuda_prefill_params p = pp->params;
    p.q = dio + L.q;
    p.o = dio + L.o;
    p.lse = (float *)(void *)(dio + L.l);
    p.k = kst;
    p.v = vst;
    if (led->num_fields) {
        const bool mlu = p.abi == ATTN_ABI_MLU;
        p.part_vec =
            (float *)(void *)(ws + attn_ledger_find(led, mlu ? "partial_u" : "partial_O")->offset);
        p.part_m =
            (float *)(void *)(ws +
                              attn_ledger_find(led, mlu ? "partial_m" : "partial_LSE")->offset);
        p.part_l = mlu ? (float *)(void *)(ws + attn_ledger_find(led, "partial_l")->offset) : NULL;
    }
    return p;
}

static int run_locked(prefill_instance *pi, prefill_priv *pp, const attn_ledger *led,
                      const attn_run_io *io, attn_exec_report *rep, attn_error_detail *err)
{
    int rv = 0;
    cudaStream_t st = pi->stream;
    /* the pool's state from the stage launch on: any failure unwinds it */
    attn_cuda_txn txn = {.stream = st,
                         .launch = attn_cuda_append_launch,
                         .wait = attn_cuda_txn_stream_wait,
                         .layer = io->layer,
                         .refuse_restores = pp->tuning.fail_restore_launches};
    void *kst = io->pool->k[io->layer], *vst = io->pool->v[io->layer];

    /* io buffers: q | k_new | v_new | o | lse | save_k | save_v */
    const io_layout L = io_layout_of(pp);
    const size_t o_q = L.q, o_k = L.k, o_v = L.v, o_o = L.o, o_l = L.l, o_sk = L.sk, o_sv = L.sv;
    CK(cudaSetDevice(pi->dev.device), "cudaSetDevice");
    char *dio = pp->run_io, *ws = pp->run_ws; /* graph mode: the plan's own */
    if (!pp->graph) {
        CK(attn_cuda_grow(&pi->dev_io, &pi->dev_io_cap, L.bytes),
           "cudaMalloc of the run's buffers");
        CK(attn_cuda_grow(&pi->dev_ws, &pi->dev_ws_cap, led->total_bytes + 256),
           "cudaMalloc of the workspace");
        dio = pi->dev_io;
        ws = pi->dev_ws;
    }
    /* bind: the plan's parameters with this layer's pointers */
    attn_cuda_prefill_params p = bind_params(pp, led, dio, ws, kst, vst);
    /* partition: the decode rows' kernels on the same buffers, their
     * partial states after the prefill kernel's */
    attn_cuda_decode_params dp;
    memset(&dp, 0, sizeof dp);
    if (pp->partitioned) {
        if (attn_cuda_plan_params(&pp->dec, &dp) != 0) {
            rv = attn_error_set(err, ATTN_E_ENGINE, "plan", "the decode sub-plan is not uploaded");
            goto fail;
        }
        /* the decode rows share the SMs with prefill CTAs: keep the producer
         * the mixed cost model was fitted on (the short-grid choice of
         * attn_decode_path_bulk assumes the grid has the SMs to itself) */
        dp.sm_count = 0;
        dp.q = p.q;
        dp.k = kst;
        dp.v = vst;
        dp.o = p.o;
        dp.lse = p.lse;
        dp.part_vec = p.part_vec + pp->dec_state0 * p.head_dim;
        dp.part_m = p.part_m + pp->dec_state0;
        dp.part_l = p.part_l != NULL ? p.part_l + pp->dec_state0 : NULL;
        dp.merge_counters = NULL;
    }

    if (io->wait_dev != NULL &&
        (rv = attn_cuda_ipc_wait(pi->ipc, st, io->wait_dev, io->wait_value, err)) != 0)
        goto fail;
    /* cudaMemcpyDefault: an input may be host memory or a registered cuda_ipc
     * buffer (a device pointer, copied device to device) */
    CK(cudaMemcpyAsync(dio + o_q, io->q, pp->q_bytes, cudaMemcpyDefault, st), "copy of q");
    if (!io->kv_written) { /* kv_written: the rows are in their pages already */
        CK(cudaMemcpyAsync(dio + o_k, io->k_new, pp->kv_bytes, cudaMemcpyDefault, st),
           "copy of k_new");
        CK(cudaMemcpyAsync(dio + o_v, io->v_new, pp->kv_bytes, cudaMemcpyDefault, st),
           "copy of v_new");
    }
    if (pp->tuning.poison) {
        /* tests: NaN everywhere a kernel must write, so an unwritten element shows */
        CK(cudaMemsetAsync(dio + o_o, 0xff, pp->q_bytes, st), "poison");
        CK(cudaMemsetAsync(dio + o_l, 0xff, pp->lse_bytes, st), "poison");
        if (led->total_bytes)
            CK(cudaMemsetAsync(ws, 0xff, led->total_bytes, st), "poison");
    }
    /* the engine's timing: CUDA events around the kernels only */
    CK(cudaEventRecord(pi->ev0, st), "cudaEventRecord");
    if (!io->kv_written) {
        txn.rows = append_rows(pp, kst, vst, dio, o_k, o_v, o_sk, o_sv);
        if ((rv = attn_cuda_txn_stage(&txn)) != 0) {
            rv = attn_error_set(err, rv, "", "append launch failed");
            goto fail;
        }
    }
    if (pp->tuning.fail_after_staging) {
        rv = attn_error_set(err, ATTN_E_CUDA, "test", "failure injected after staging");
        goto fail;
    }
    const bool has_prefill = p.num_items || p.num_merges;
    const bool forked = pp->partitioned && has_prefill && pp->order != ATTN_MIXED_ORDER_SERIAL;
    /* prefill-first on the full kernel forks on one stream: the decode
     * producer is launched as the programmatic dependent of the attend
     * kernel, whose capped grid lets it be placed once every attend CTA has
     * started (trigger_dependents), so the decode CTAs take the SMs the
     * grid left and those its CTAs free, never the attend kernel's (two
     * streams raced for them: docs/cuda-prefill-engine.md, Forks); the
     * combine kernel, when split, follows both */
    const bool one_stream = forked && pp->order == ATTN_MIXED_ORDER_PREFILL_FIRST &&
                            pp->variant == ATTN_PREFILL_FULL && p.num_items;
    /* forked on two streams: the decode kernels on the side stream after the
     * append, joined before the ev1 record, so the timing and the copy back
     * cover both */
    const bool two_streams = forked && !one_stream;
    cudaStream_t dst = two_streams ? pi->side : st;
    if (two_streams) {
        CK(cudaEventRecord(pi->ev_fork, st), "cudaEventRecord (fork)");
        CK(cudaStreamWaitEvent(pi->side, pi->ev_fork, 0), "cudaStreamWaitEvent (fork)");
    }
    const bool decode_first = forked && pp->order == ATTN_MIXED_ORDER_DECODE_FIRST;
    uint64_t *probe = forked ? pi->tuning.probe : NULL; /* tests: co-residency (read per run) */
    if (probe != NULL) {
        p.probe = (unsigned long long *)(probe + 2);
        dp.probe = (unsigned long long *)(probe + 2 + 3 * (size_t)pi->dev.sm_count);
        dp.probe_ctas = pi->tuning.probe_decode_ctas;
    }
    /* overlap on the fused kernel: one launch for every row (then the
     * prefill combine and the decode reducer when split) */
    if (pp->fused && (rv = attn_cuda_mixed_launch(&p, &dp, st)) != 0) {
        rv = attn_error_set(err, rv, "", "fused mixed launch failed: %s",
                            cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    if (one_stream && (rv = one_stream_fork(&p, &dp, probe, st, err)) != 0)
        goto fail;
    for (int k = 0; k < 2 && !pp->fused && !one_stream; k++) {
        const bool decode_now = (k == 0) == decode_first;
        if (!decode_now && has_prefill && (rv = attn_cuda_prefill_launch(&p, st)) != 0) {
            rv = attn_error_set(err, rv, "", "prefill launch failed: %s",
                                cudaGetErrorString(cudaGetLastError()));
            goto fail;
        }
        if (decode_now && probe != NULL && attn_cuda_stamp_launch(probe, dst) != 0) {
            rv = attn_error_set(err, ATTN_E_CUDA, "tuning.probe", "stamp launch failed");
            goto fail;
        }
        if (decode_now && pp->partitioned && (rv = attn_cuda_decode_launch(&dp, dst)) != 0) {
            rv = attn_error_set(err, rv, "", "decode launch failed: %s",
                                cudaGetErrorString(cudaGetLastError()));
            goto fail;
        }
        if (decode_now && probe != NULL && attn_cuda_stamp_launch(probe + 1, dst) != 0) {
            rv = attn_error_set(err, ATTN_E_CUDA, "tuning.probe", "stamp launch failed");
            goto fail;
        }
    }
    if (two_streams) {
        CK(cudaEventRecord(pi->ev_join, pi->side), "cudaEventRecord (join)");
        CK(cudaStreamWaitEvent(st, pi->ev_join, 0), "cudaStreamWaitEvent (join)");
    }
    CK(cudaEventRecord(pi->ev1, st), "cudaEventRecord");
    CK(cudaMemcpyAsync(io->o, dio + o_o, pp->q_bytes, cudaMemcpyDefault, st), "copy of o");
    if (io->lse)
        CK(cudaMemcpyAsync(io->lse, dio + o_l, pp->lse_bytes, cudaMemcpyDefault, st),
           "copy of lse");
    /* the pool counts as staged until the stream confirms the restore */
    if (!io->commit && !io->kv_written && (rv = attn_cuda_txn_restore(&txn, err)) != 0)
        goto fail;
    if (io->signal_dev != NULL) {
        /* after the last kernel and copy: the client reads O behind it */
        if ((rv = attn_cuda_ipc_signal(pi->ipc, st, io->signal_dev, io->signal_value, err)) != 0)
            goto fail;
        if (rep)
            rep->signalled = true;
    }
    CK(cudaStreamSynchronize(st), "the run's stream");
    if (rep) {
        report_kernels(&p, pp->partitioned ? &dp : NULL,
                       io->kv_written ? 0u
                       : io->commit   ? 1u
                                      : 2u,
                       rep);
        float ms = 0;
        cudaEventElapsedTime(&ms, pi->ev0, pi->ev1);
        rep->engine_us = ms * 1000.0;
        snprintf(rep->timing_method, sizeof rep->timing_method, "cuda_events");
        snprintf(rep->timing_scope, sizeof rep->timing_scope, "%s",
                 pp->fused ? "cuda events: append, fused kernel, combine/reducer if split"
                 : forked && pp->variant == ATTN_PREFILL_LIGHT
                     ? "cuda events: append, fork, light prefill || decode, join"
                 : one_stream      ? "cuda events: append, one-stream fork: prefill || decode"
                 : forked          ? "cuda events: append, fork, prefill || decode, join"
                 : pp->partitioned ? "cuda events: append, prefill, then decode kernels"
                                   : "cuda events: append, prefill attend and combine");
    }
    return 0;

fail:
    cudaStreamSynchronize(pi->side); /* a forked decode kernel may still read the pool */
    if (!txn.staged)
        cudaStreamSynchronize(st); /* no copy may still read the caller's buffers */
    /* the old rows back so the pool is unchanged (engine.h contract), or
     * E_POOL_UNRESTORED when that cannot be confirmed (the unwind waits) */
    rv = attn_cuda_txn_unwind(&txn, rv, err);
    /* the signal of a run that failed before it enqueued its signal is the
     * caller's (engine_signal) */
    return rv;
}

static int engine_run(attn_engine *self, attn_engine_plan *p, const attn_run_io *io,
                      attn_exec_report *rep, attn_error_detail *err)
{
    prefill_instance *pi = self->state;
    prefill_priv *pp = p->priv;
    if (rep != NULL)
        memset(rep, 0, sizeof *rep);
    const attn_cuda_run_target target = {.device = pi->dev.device,
                                         .where = self->where,
                                         .plan_uploaded = pp != NULL && pp->dev_meta != NULL,
                                         .has_ipc = pi->ipc != NULL,
                                         .ipc_why = pi->ipc_why};
    int rv = attn_cuda_run_check(io, &target, err);
    if (rv != 0)
        return rv;
    pthread_mutex_lock(&pi->mu);
    rv = run_locked(pi, pp, &p->ledger, io, rep, err);
    pthread_mutex_unlock(&pi->mu);
    return rv;
}

/* The signal of a run that failed or was refused: on the run stream,
 * behind everything enqueued there before. */
static int engine_signal(attn_engine *self, void *addr, uint64_t value, attn_error_detail *err)
{
    prefill_instance *pi = self->state;
    const attn_cuda_run_target target = {
        .device = pi->dev.device, .where = self->where, .ipc_why = pi->ipc_why};
    pthread_mutex_lock(&pi->mu);
    int rv = attn_cuda_signal_behind(pi->ipc, &target, pi->stream, addr, value, err);
    pthread_mutex_unlock(&pi->mu);
    return rv;
}

int attn_cuda_prefill_graph_update(attn_engine *e, attn_engine_plan *p, const attn_manifest *m,
                                   const attn_pool_geometry *g, attn_error_detail *err)
{
    char *img;
    attn_prefill_plan tp;
    int rv = graph_step(p, m, g, &img, &tp, err);
    if (rv != 0)
        return rv;
    prefill_priv *pp = p->priv;
    cudaError_t ce;
    if (pp->dev_meta == NULL) {
        rv = attn_error_set(err, ATTN_E_ENGINE, "plan", "the graph-mode plan is not uploaded");
    } else if ((ce = cudaSetDevice(pp->device)) != cudaSuccess ||
               (ce = cudaMemcpy(pp->dev_meta, img, pp->meta_bytes, cudaMemcpyHostToDevice)) !=
                   cudaSuccess) {
        rv = attn_cuda_error(err, ce, "", "copy of the step's metadata image");
    }
    if (rv != 0) {
        free(img);
        attn_prefill_plan_free(&tp);
        return rv;
    }
    (void)e;
    graph_commit(p, m, img, &tp);
    return 0;
}

int attn_cuda_prefill_graph_enqueue(attn_engine *e, attn_engine_plan *p, const attn_run_io *io,
                                    void *stream, attn_error_detail *err)
{
    prefill_priv *pp = p != NULL ? p->priv : NULL;
    if (e == NULL || e->ops != attn_cuda_prefill_engine_ops() || pp == NULL || !pp->graph ||
        pp->dev_meta == NULL)
        return attn_error_set(err, ATTN_E_ENGINE, "plan",
                              "not an uploaded graph-mode plan of this cuda_prefill instance");
    if (!io->commit)
        return attn_error_set(err, ATTN_E_RANGE, "commit",
                              "a graph-mode enqueue commits its rows (no restore without a wait)");
    if (io->wait_dev != NULL || io->signal_dev != NULL)
        return attn_error_set(err, ATTN_E_RANGE, io->wait_dev ? "wait" : "signal",
                              "a graph-mode enqueue takes no semaphores");
    const prefill_instance *pi = e->state;
    const attn_cuda_run_target target = {.device = pi->dev.device,
                                         .where = e->where,
                                         .plan_uploaded = true,
                                         .ipc_why = "a graph-mode enqueue takes no semaphores"};
    int rv = attn_cuda_run_check(io, &target, err);
    if (rv != 0)
        return rv;
    const attn_pool_view *pv = io->pool;
    cudaStream_t st = (cudaStream_t)stream;
    void *kst = pv->k[io->layer], *vst = pv->v[io->layer];
    const io_layout L = io_layout_of(pp);
    char *dio = pp->run_io;
    const attn_cuda_prefill_params prm = bind_params(pp, &p->ledger, dio, pp->run_ws, kst, vst);
    /* cudaMemcpyDefault: host (pinned, under capture) or device buffers of the envelope's rows */
    CK(cudaSetDevice(pp->device), "cudaSetDevice");
    CK(cudaMemcpyAsync(dio + L.q, io->q, pp->q_bytes, cudaMemcpyDefault, st), "copy of q");
    if (!io->kv_written) {
        CK(cudaMemcpyAsync(dio + L.k, io->k_new, pp->kv_bytes, cudaMemcpyDefault, st),
           "copy of k_new");
        CK(cudaMemcpyAsync(dio + L.v, io->v_new, pp->kv_bytes, cudaMemcpyDefault, st),
           "copy of v_new");
    }
    if (pp->tuning.poison) {
        CK(cudaMemsetAsync(dio + L.o, 0xff, pp->q_bytes, st), "poison");
        CK(cudaMemsetAsync(dio + L.l, 0xff, pp->lse_bytes, st), "poison");
        if (p->ledger.total_bytes)
            CK(cudaMemsetAsync(pp->run_ws, 0xff, p->ledger.total_bytes, st), "poison");
    }
    if (!io->kv_written) {
        const attn_cuda_append_params ap = append_rows(pp, kst, vst, dio, L.k, L.v, L.sk, L.sv);
        if ((rv = attn_cuda_append_launch(&ap, st)) != 0)
            return attn_error_set(err, rv, "", "append launch failed");
    }
    if ((rv = attn_cuda_prefill_launch(&prm, st)) != 0)
        return attn_error_set(err, rv, "", "prefill launch failed: %s",
                              cudaGetErrorString(cudaGetLastError()));
    CK(cudaMemcpyAsync(io->o, dio + L.o, pp->q_bytes, cudaMemcpyDefault, st), "copy of o");
    if (io->lse)
        CK(cudaMemcpyAsync(io->lse, dio + L.l, pp->lse_bytes, cudaMemcpyDefault, st),
           "copy of lse");
    return 0;
fail:
    return rv;
}

#endif /* ATTN_WITH_CUDA */

static void engine_plan_free(attn_engine *self, attn_engine_plan *p)
{
    attn_cuda_prefill_plan_host_free(p);
}

static const attn_engine_ops g_prefill_ops = {
    .version = ATTN_ENGINE_OPS_VERSION,
    .name = "cuda_prefill",
    .platform = ATTN_PLATFORM_CUDA,
    .phases = (1u << ATTN_PHASE_PREFILL) | (1u << ATTN_PHASE_APPEND) | (1u << ATTN_PHASE_DECODE),
    .schedules =
        (1u << ATTN_SCHED_PARTITION) | (1u << ATTN_SCHED_UNIFIED) | (1u << ATTN_SCHED_OVERLAP),
    .priority = ATTN_CUDA_PREFILL_PRIORITY,
    .init = engine_init,
    .fini = engine_fini,
    .admit = engine_admit,
    .plan = engine_plan,
    .run = engine_run,
    .plan_free = engine_plan_free,
#ifdef ATTN_WITH_CUDA
    .signal = engine_signal,
#endif
};

const attn_engine_ops *attn_cuda_prefill_engine_ops(void)
{
    return &g_prefill_ops;
}
