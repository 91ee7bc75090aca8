/* Host cost of one CUDA engine run, comparable before and after the
 * plan/run split (issue 8; issue 11 wants <= 30 us host submit per run).
 *
 * For each decode shape: plan once, then time `runs` runs of that plan on
 * cuda:0 (inline host tensors, no commit).  Reported per run:
 *   wall_us   the run call, by the host clock (copies, launches, sync)
 *   cpu_us    the calling thread's CPU time for the call; the process runs
 *             with cudaDeviceScheduleBlockingSync, so waiting for the GPU
 *             sleeps instead of spinning and cpu_us is the host-side work
 *   event_us  the engine's own CUDA-event time (its scope differs: before
 *             the split the events also bracketed the copies)
 * as p50 and p90 over the runs.  The same file builds against the tree
 * before the split (attn_backend, kernels/ or engines/ paths) and after it
 * (planner/engine.h), so one command measures both: see host_bench.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "attn/error.h"
#if __has_include("engines/cuda/cuda_engine.h")
#include "engines/cuda/cuda_engine.h"
#else
#include "kernels/cuda/cuda_engine.h"
#endif
#if __has_include("planner/engine.h")
#include "planner/engine.h"
#define BENCH_OPS_TABLE 1 /* the versioned ops table exists: the "after" tree */
#endif
#include "tests/lib/random_batch.h"

static double now_us(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct shape {
    uint32_t B;
    int64_t T; /* committed keys per request */
} shape;

static int bench_shape(const shape *sh, int runs, FILE *out)
{
    attn_rb_spec sp;
    attn_rb rb;
    attn_error_detail err;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = sh->B;
    sp.max_cache_len = sh->T;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.num_qo_heads = 32;
    sp.num_kv_heads = 8;
    sp.head_dim_qk = sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.kv_dtype = ATTN_BF16;
    sp.q_dtype = ATTN_BF16;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    int64_t *T = malloc(sizeof *T * sh->B), *C = malloc(sizeof *C * sh->B);
    for (uint32_t b = 0; b < sh->B; b++) {
        T[b] = sh->T;
        C[b] = 1;
    }
    if (attn_rb_make_lengths(&rb, &sp, T, C, 1) != 0)
        return 1;
    free(T);
    free(C);
    attn_pool_geometry g = rb.g;
    snprintf(g.device, sizeof g.device, "cuda:0");
    void *dk = NULL, *dv = NULL;
    int32_t *all = malloc(sizeof *all * g.num_pages);
    for (uint32_t p = 0; p < g.num_pages; p++)
        all[p] = (int32_t)p;
    if (attn_cuda_pool_alloc(0, rb.k_bytes, &dk, &err) != 0 ||
        attn_cuda_pool_alloc(0, rb.v_bytes, &dv, &err) != 0 ||
        attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, rb.k, 1, &err) != 0 ||
        attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, rb.v, 1, &err) != 0) {
        fprintf(stderr, "pool: %s\n", err.message);
        return 1;
    }
    void *kd[1] = {dk}, *vd[1] = {dv};
    attn_pool_view pv = {.geom = &g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = kd, .v = vd};
    void *o = malloc(rb.o_elems * 2);
    float *lse = malloc(sizeof *lse * rb.lse_elems);
    attn_exec_report rep;
    double plan_us = now_us(CLOCK_MONOTONIC);
#ifdef BENCH_OPS_TABLE
    static attn_engine *e;
    if (e == NULL) {
        attn_engine_config cfg = {.device = 0, .num_threads = 0, .tuning = NULL};
        if (attn_engine_create(attn_cuda_engine_ops(), &cfg, &e, &err) != 0) {
            fprintf(stderr, "instance: %s\n", err.message);
            return 1;
        }
    }
    attn_engine_plan *plan = NULL;
    if (attn_engine_plan_new(e, &rb.m, &g, &plan, &err) != 0) {
        fprintf(stderr, "plan: %s\n", err.message);
        return 1;
    }
    attn_run_io a = {.pool = &pv,
                     .layer = 0,
                     .q = rb.q,
                     .k_new = rb.k_new,
                     .v_new = rb.v_new,
                     .o = o,
                     .lse = lse,
                     .commit = false};
#define RUN_ONCE() attn_engine_run(e, plan, &a, &rep, &err)
#else
    attn_split_plan plan;
    if (attn_cuda_plan(&rb.m, &g, ATTN_SPLIT_AUTO, &plan, NULL, &err) != 0) {
        fprintf(stderr, "plan: %s\n", err.message);
        return 1;
    }
    attn_exec_args a = {.m = &rb.m,
                        .plan = &plan,
                        .pool = &pv,
                        .layer = 0,
                        .q = rb.q,
                        .k_new = rb.k_new,
                        .v_new = rb.v_new,
                        .o = o,
                        .lse = lse,
                        .commit = false};
#define RUN_ONCE() attn_cuda_backend()->run(attn_cuda_backend(), &a, &rep)
#endif
    plan_us = now_us(CLOCK_MONOTONIC) - plan_us;
    double *wall = malloc(sizeof *wall * runs), *cpu = malloc(sizeof *cpu * runs),
           *ev = malloc(sizeof *ev * runs);
    for (int i = 0; i < 20; i++) /* warm: buffers grown, caches hot */
        if (RUN_ONCE() != 0) {
            fprintf(stderr, "run failed: %s\n", err.message);
            return 1;
        }
    for (int i = 0; i < runs; i++) {
        double w0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
        int rv = RUN_ONCE();
        cpu[i] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[i] = now_us(CLOCK_MONOTONIC) - w0;
        ev[i] = rep.engine_us;
        if (rv != 0)
            return 1;
    }
    fprintf(out,
            "%-10s B=%-4u T=%-6lld plan_us %9.1f  wall_us p50 %8.1f p90 %8.1f  cpu_us p50 %8.1f "
            "p90 %8.1f  event_us p50 %8.1f (%s)\n",
#ifdef BENCH_OPS_TABLE
            "plan/run",
#else
            "per-run",
#endif
            sh->B, (long long)sh->T, plan_us, pct(wall, runs, 0.5), pct(wall, runs, 0.9),
            pct(cpu, runs, 0.5), pct(cpu, runs, 0.9), pct(ev, runs, 0.5), rep.timing_method);
#ifdef BENCH_OPS_TABLE
    attn_engine_plan_release(plan);
#else
    attn_split_plan_free(&plan);
#endif
    free(wall);
    free(cpu);
    free(ev);
    free(o);
    free(lse);
    free(all);
    attn_cuda_pool_free(0, dk);
    attn_cuda_pool_free(0, dv);
    attn_rb_free(&rb);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 300;
    /* waiting for the GPU sleeps, so thread CPU time is the host's own work */
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) {
        fprintf(stderr, "cannot set blocking sync\n");
        return 1;
    }
    static const shape shapes[] = {{1, 16}, {1, 4096}, {16, 1024}, {64, 4096}, {256, 1024}};
    printf("# bench_run_host: %d runs per shape, H_q 32, H_kv 8, d 128, bf16, page 16, cuda:0\n",
           runs);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (bench_shape(&shapes[i], runs, stdout) != 0)
            return 1;
    return 0;
}
