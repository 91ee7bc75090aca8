/* Cost of the dispatch diagnostic per reply (issue 5 budget: <= 20 us for
 * construction + encoding).  Times, per iteration, exactly what the daemon
 * adds to a reply for the diagnostic: the call key, its SHA-256, the typed
 * diagnostic (selection, schedule, workspace, plan event, kernels, evidence)
 * and its msgpack encoding.  Selection itself is timed separately (it runs
 * whether or not a diagnostic is sent).
 *
 * Build and run (after `make BUILD=build CUDA=0 unit-core` built the core):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -I. bench/diag_cost.c build/libattn_core.a \
 *      -lmsgpackc -ljansson -lcrypto -lpthread -lm -o build/diag_cost && ./build/diag_cost [B]
 * Timing: CLOCK_MONOTONIC around each iteration (one sample per reply),
 * 2000 warm-up iterations, 20000 samples; prints min/median/p95/p99/max.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/diag.h"
#include "planner/key.h"
#include "planner/registry.h"
#include "planner/diag_encode.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Two backends like the daemon's: a CUDA decode engine that rejects d = 80
 * (so the diagnostic carries reasons) and the CPU reference. */
static void admit_cuda(const attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                       attn_admission *out)
{
    if (g->head_dim_qk != 64 && g->head_dim_qk != 128 && g->head_dim_qk != 256)
        attn_admission_reject(out, ATTN_ADMIT_SHAPE, "head_dim_qk", "head_dim_qk=%u unsupported",
                              g->head_dim_qk);
    if (g->head_dim_vo != 64 && g->head_dim_vo != 128 && g->head_dim_vo != 256)
        attn_admission_reject(out, ATTN_ADMIT_SHAPE, "head_dim_vo", "head_dim_vo=%u unsupported",
                              g->head_dim_vo);
    out->admitted = out->num_reasons == 0;
}

static void admit_cpu(const attn_engine *self, const attn_manifest *m, const attn_pool_geometry *g,
                      attn_admission *out)
{
    out->admitted = true;
}

static void report(const char *what, double *s, int n, FILE *out)
{
    qsort(s, (size_t)n, sizeof s[0], cmp_double);
    fprintf(out, "%-34s min %7.2f  median %7.2f  p95 %7.2f  p99 %7.2f  max %8.2f us\n", what,
            s[0] / 1e3, s[n / 2] / 1e3, s[(int)(n * 0.95)] / 1e3, s[(int)(n * 0.99)] / 1e3,
            s[n - 1] / 1e3);
}

/* The part of a reply's diagnostic after its key: selection, schedule,
 * workspace, plan event, kernels, evidence, then the msgpack encoding. */
static void diag_fill_and_pack(attn_diag *dg, const attn_selection *sel,
                               const attn_request_desc *req, const attn_split_plan *plan,
                               const char *plan_sha, const attn_plan_decision *ev,
                               const attn_exec_report *rep, msgpack_sbuffer *sb, msgpack_packer *pk)
{
    attn_diag_set_selection(dg, sel);
    attn_diag_set_requests(dg, req, plan->num_requests);
    attn_diag_set_schedule(dg, plan, ATTN_SCHED_PARTITION, ATTN_ABI_LSE_O);
    attn_diag_add_workspace_field(dg, "partial_O", "fp32", 1u << 18, 1u << 20);
    attn_diag_add_workspace_field(dg, "partial_LSE", "fp32", 1u << 10, 1u << 12);
    attn_diag_set_plan(dg, plan_sha, ev, 42);
    attn_diag_set_report(dg, rep, ATTN_KERNELS_DECLARED);
    attn_diag_finish(dg, plan_sha, true);
    sb->size = 0;
    attn_diag_pack(dg, pk);
}

int main(int argc, char **argv)
{
    uint32_t B = argc > 1 ? (uint32_t)atoi(argv[1]) : 32;
    if (B == 0 || B > 4096)
        B = 32;
    enum { WARM = 2000, N = 20000 };
    attn_request_desc *req = calloc(B, sizeof *req);
    int32_t *qo = calloc(B + 1, sizeof *qo);
    uint32_t *splits = calloc(B, sizeof *splits), *slots = calloc(B + 1, sizeof *slots);
    for (uint32_t b = 0; b < B; b++) {
        snprintf(req[b].id, sizeof req[b].id, "r%u", b);
        req[b].cache_len = 1000 + 37 * b;
        req[b].new_len = 1;
        qo[b + 1] = qo[b] + 1;
        splits[b] = 1 + b % 4;
        slots[b + 1] = slots[b] + splits[b];
    }
    attn_manifest m;
    memset(&m, 0, sizeof m);
    m.num_qo_heads = 32;
    m.num_requests = B;
    m.requests = req;
    m.qo_indptr = qo;
    m.q_dtype = ATTN_BF16;
    snprintf(m.policy.backend, sizeof m.policy.backend, "auto");
    attn_pool_geometry g;
    memset(&g, 0, sizeof g);
    g.page_size = 16;
    g.num_kv_heads = 8;
    g.head_dim_qk = g.head_dim_vo = 80;
    g.kv_dtype = ATTN_BF16;
    g.num_pages = 1u << 20;
    snprintf(g.device, sizeof g.device, "cuda:0");
    attn_engine_ops cuda_ops = {.version = ATTN_ENGINE_OPS_VERSION,
                                .name = "cuda_decode",
                                .platform = ATTN_PLATFORM_CUDA,
                                .phases = 1u << ATTN_PHASE_DECODE,
                                .schedules = 1u << ATTN_SCHED_PARTITION,
                                .priority = 10,
                                .admit = admit_cuda};
    attn_engine_ops cpu_ops = {.version = ATTN_ENGINE_OPS_VERSION,
                               .name = "cpu_ref",
                               .platform = ATTN_PLATFORM_CPU,
                               .phases = 7,
                               .schedules = 6,
                               .priority = 100,
                               .admit = admit_cpu};
    attn_engine cuda = {.ops = &cuda_ops, .device = 0, .where = "cuda:0"};
    attn_engine cpu = {.ops = &cpu_ops, .device = -1, .where = "cpu"};
    attn_registry reg;
    attn_registry_init(&reg);
    attn_registry_add(&reg, &cuda, NULL);
    attn_registry_add_platforms(&reg, &cpu, 1u << ATTN_PLATFORM_CUDA, NULL);
    attn_split_plan plan = {B, splits, slots, slots[B], slots[B], NULL, slots[B], ATTN_SPLIT_FA, 0};
    attn_exec_report rep;
    memset(&rep, 0, sizeof rep);
    rep.num_kernels = 2;
    snprintf(rep.kernels[0].symbol, sizeof rep.kernels[0].symbol,
             "attn::decode::producer_tc<128, __nv_bfloat16, true, false>");
    snprintf(rep.kernels[1].symbol, sizeof rep.kernels[1].symbol, "attn::decode::merge<128>");
    rep.kernels[0].launches = rep.kernels[1].launches = 1;
    rep.engine_us = 12.5;
    snprintf(rep.timing_method, sizeof rep.timing_method, "cuda_events");
    attn_key_env env = {"cuda", 90, "cuda:0", "cuda:0"};
    char plan_sha[ATTN_SHA256_HEX];
    memset(plan_sha, 'a', 64);
    plan_sha[64] = '\0';
    attn_plan_decision ev = {ATTN_PLAN_HIT, "static projection unchanged"};

    attn_selection *sel = calloc(1, sizeof *sel);
    attn_diag *dg = calloc(1, sizeof *dg);
    double *t_total = malloc(sizeof(double) * N), *t_key = malloc(sizeof(double) * N),
           *t_sel = malloc(sizeof(double) * N), *t_enc = malloc(sizeof(double) * N),
           *t_run = malloc(sizeof(double) * N);
    char planned_sha[ATTN_SHA256_HEX] = "";
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    attn_key key;
    attn_key_init(&key);
    size_t bytes = 0;
    for (int it = 0; it < WARM + N; it++) {
        double t0 = now_ns();
        if (attn_registry_select(&reg, &m, &g, sel, NULL) != 0)
            return 1;
        double t1 = now_ns();
        /* ---- what the diagnostic adds to a reply ---- */
        attn_call_key_build(&m, &g, &env, &key);
        attn_diag_init(dg, &key); /* SHA-256 of the canonical key */
        double t2 = now_ns();
        diag_fill_and_pack(dg, sel, req, &plan, plan_sha, &ev, &rep, &sb, &pk);
        double t3 = now_ns();
        bytes = sb.size;
        /* a `run` of a cached plan: the call key and its digest exist already */
        if (planned_sha[0] == '\0')
            memcpy(planned_sha, dg->call_key_sha256, sizeof planned_sha);
        double t4 = now_ns();
        attn_diag_init_digest(dg, &key, planned_sha);
        diag_fill_and_pack(dg, sel, req, &plan, plan_sha, &ev, &rep, &sb, &pk);
        double t5 = now_ns();
        if (it >= WARM) {
            t_sel[it - WARM] = t1 - t0;
            t_key[it - WARM] = t2 - t1;
            t_enc[it - WARM] = t3 - t2;
            t_total[it - WARM] = t3 - t1;
            t_run[it - WARM] = t5 - t4;
        }
    }
    printf("diag_cost: B=%u decode requests, H_q 32, 2 candidates (1 rejected with 2 reasons),"
           " %zu-byte msgpack diag, %d samples\n",
           B, bytes, N);
    report("selection (not part of the budget)", t_sel, N, stdout);
    report("call key build + SHA-256", t_key, N, stdout);
    report("diag fill + finish + msgpack", t_enc, N, stdout);
    report("TOTAL one-shot (attend) reply", t_total, N, stdout);
    report("TOTAL run of a cached plan", t_run, N, stdout);
    printf("budget 20 us per reply: attend median %s, p99 %s; run median %s, p99 %s\n",
           t_total[N / 2] / 1e3 <= 20.0 ? "met" : "NOT met",
           t_total[(int)(N * 0.99)] / 1e3 <= 20.0 ? "met" : "NOT met",
           t_run[N / 2] / 1e3 <= 20.0 ? "met" : "NOT met",
           t_run[(int)(N * 0.99)] / 1e3 <= 20.0 ? "met" : "NOT met");
    attn_key_fini(&key);
    msgpack_sbuffer_destroy(&sb);
    free(t_total);
    free(t_key);
    free(t_sel);
    free(t_enc);
    free(t_run);
    free(sel);
    free(dg);
    free(req);
    free(qo);
    free(splits);
    free(slots);
    return 0;
}
