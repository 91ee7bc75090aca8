/* CPU decode benchmark: the CPU engine's achieved K/V read bandwidth on the
 * acceptance shape, against the machine's memory read bandwidth measured in
 * the same run (a large array sum on every thread).  Median of repeats.
 *
 *   bench_cpu_decode [--out FILE.md] [--repeats N] [--threads N]
 *                    [--batch B] [--ctx T] [--layout nhd|hnd] [--block-keys N]
 *
 * Defaults: B = 16, T = 8192, H_q = 32, H_kv = 8, d = 128, fp32 storage,
 * pages of 16 rows (CSR), fp32 accumulation, the engine's default plan.
 * The K/V bytes counted are the logical rows every (request, K/V head)
 * reads once: B x H_kv x (T + 1) x (d_qk + d_vo) x 4 (seed 0x04I: a logical
 * ledger, not a profiler counter).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn/error.h"
#include "engines/cpu/engine.h"
#include "planner/split.h"
#include "protocol/manifest.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- memory read bandwidth: a float array summed by every thread -------- */

typedef struct sum_job {
    const float *a;
    size_t n;
    double result;
} sum_job;

/* 16 independent partial sums so the loop vectorises without reassociation. */
__attribute__((optimize("O3"))) static void *sum_part(void *arg)
{
    sum_job *j = arg;
    float acc[16] = {0};
    size_t i = 0, n = j->n; /* cppcheck-suppress uninitvar ; set by array_sum_seconds */
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++)
            acc[k] += j->a[i + k];
    for (; i < n; i++)
        acc[0] += j->a[i];
    double s = 0;
    for (int k = 0; k < 16; k++)
        s += acc[k];
    j->result = s;
    return NULL;
}

static double array_sum_seconds(const float *a, size_t n, uint32_t threads, double *sink)
{
    pthread_t tid[64];
    sum_job jobs[64];
    if (threads < 1 || threads > 64)
        threads = threads < 1 ? 1 : 64;
    size_t per = n / threads;
    for (uint32_t t = 0; t < threads; t++) {
        jobs[t].a = a + per * t;
        jobs[t].n = t + 1 == threads ? n - per * t : per;
        jobs[t].result = 0;
    }
    double t0 = now_s();
    for (uint32_t t = 1; t < threads; t++)
        pthread_create(&tid[t], NULL, sum_part, &jobs[t]);
    sum_part(&jobs[0]);
    for (uint32_t t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);
    double dt = now_s() - t0;
    for (uint32_t t = 0; t < threads; t++)
        *sink += jobs[t].result;
    return dt;
}

/* ---- the decode batch ---------------------------------------------------- */

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static float rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

static void shell(char *buf, size_t cap, const char *cmd)
{
    FILE *p = popen(cmd, "r");
    buf[0] = '\0';
    if (p == NULL)
        return;
    if (fgets(buf, (int)cap, p) == NULL)
        buf[0] = '\0';
    pclose(p);
    buf[strcspn(buf, "\n")] = '\0';
}

int main(int argc, char **argv)
{
    uint32_t B = 16, Hq = 32, Hkv = 8, d = 128, P = 16, threads = 0, block_keys = 0;
    int64_t T = 8192;
    int repeats = 7;
    attn_layout layout = ATTN_NHD;
    const char *out = NULL;
    char cmdline[512] = "";
    for (int i = 0; i < argc; i++) {
        strncat(cmdline, argv[i], sizeof cmdline - strlen(cmdline) - 2);
        strncat(cmdline, i + 1 < argc ? " " : "", sizeof cmdline - strlen(cmdline) - 1);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            B = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
            T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--block-keys") && i + 1 < argc)
            block_keys = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc)
            layout = strcmp(argv[++i], "hnd") == 0 ? ATTN_HND : ATTN_NHD;
        else {
            fprintf(stderr,
                    "usage: %s [--out FILE.md] [--repeats N] [--threads N] [--batch B] "
                    "[--ctx T] [--layout nhd|hnd] [--block-keys N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeats < 1 || B < 1 || T < 1)
        return 2;
    if (threads == 0)
        threads = attn_cpu_online_threads();
    if (threads > 64)
        threads = 64;

    /* pool: every request owns ceil((T + 1) / P) consecutive pages */
    uint32_t pages_per = (uint32_t)((T + 1 + P - 1) / P);
    attn_pool_geometry g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "bench");
    snprintf(g.device, sizeof g.device, "cpu");
    g.layers = 1;
    g.num_pages = B * pages_per;
    g.page_size = P;
    g.num_kv_heads = Hkv;
    g.head_dim_qk = g.head_dim_vo = d;
    g.kv_dtype = ATTN_FP32;
    g.layout = layout;
    size_t elems = (size_t)g.num_pages * P * Hkv * d;
    float *k = malloc(elems * sizeof(float)), *v = malloc(elems * sizeof(float));
    attn_request_desc *req = calloc(B, sizeof *req);
    int32_t *qo = calloc(B + 1, sizeof(int32_t)), *indptr = calloc(B + 1, sizeof(int32_t));
    int32_t *indices = calloc(g.num_pages, sizeof(int32_t)), *last = calloc(B, sizeof(int32_t));
    float *q = malloc((size_t)B * Hq * d * sizeof(float));
    float *kn = malloc((size_t)B * Hkv * d * sizeof(float));
    float *vn = malloc((size_t)B * Hkv * d * sizeof(float));
    float *o = malloc((size_t)B * Hq * d * sizeof(float));
    float *lse = malloc((size_t)B * Hq * sizeof(float));
    if (!k || !v || !req || !qo || !indptr || !indices || !last || !q || !kn || !vn || !o || !lse) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < elems; i++) {
        k[i] = rnd();
        v[i] = rnd();
    }
    for (size_t i = 0; i < (size_t)B * Hq * d; i++)
        q[i] = rnd();
    for (size_t i = 0; i < (size_t)B * Hkv * d; i++) {
        kn[i] = rnd();
        vn[i] = rnd();
    }
    for (uint32_t b = 0; b < B; b++) {
        snprintf(req[b].id, sizeof req[b].id, "r%u", b);
        req[b].cache_len = T;
        req[b].new_len = 1;
        qo[b + 1] = (int32_t)(b + 1);
        indptr[b + 1] = (int32_t)((b + 1) * pages_per);
        for (uint32_t j = 0; j < pages_per; j++)
            indices[b * pages_per + j] = (int32_t)(b * pages_per + j);
        last[b] = (int32_t)(T + 1 - (int64_t)(pages_per - 1) * P);
    }
    attn_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.pool, sizeof m.pool, "bench");
    m.num_qo_heads = Hq;
    m.num_requests = B;
    m.requests = req;
    m.qo_indptr = qo;
    m.kv.format = ATTN_KV_CSR;
    m.kv.page_indptr = indptr;
    m.kv.page_indices = indices;
    m.kv.num_page_indices = g.num_pages;
    m.kv.last_page_len = last;
    m.mask.kind = ATTN_MASK_CAUSAL;
    m.q_dtype = ATTN_FP32;
    m.policy.state_abi = ATTN_ABI_LSE_O;

    attn_error_detail err;
    attn_split_plan plan;
    attn_cpu_options opt;
    memset(&opt, 0, sizeof opt);
    opt.num_threads = threads;
    opt.acc = ATTN_CPU_ACC_F32;
    opt.block_keys = block_keys;
    if (attn_cpu_plan(&m, &g, threads, &plan, &err) != 0) {
        fprintf(stderr, "plan: %s %s: %s\n", attn_err_name(err.code), err.field, err.message);
        return 1;
    }
    attn_cpu_call c;
    memset(&c, 0, sizeof c);
    c.m = &m;
    c.g = &g;
    c.plan = &plan;
    c.k_store = k;
    c.v_store = v;
    c.q = q;
    c.k_new = kn;
    c.v_new = vn;
    c.o = o;
    c.lse = lse;

    double kv_bytes = (double)B * Hkv * (double)(T + 1) * (2.0 * d) * sizeof(float);
    double *mem_s = calloc((size_t)repeats, sizeof(double));
    double *eng_s = calloc((size_t)repeats, sizeof(double));
    double sink = 0;
    /* warm-up: one engine call and one sum (page faults, thread start) */
    if (attn_cpu_attend(&c, &opt, &err) != 0) {
        fprintf(stderr, "engine: %s %s: %s\n", attn_err_name(err.code), err.field, err.message);
        return 1;
    }
    array_sum_seconds(k, elems, threads, &sink);
    /* interleave the two measurements so both see the same machine state */
    for (int r = 0; r < repeats; r++) {
        double dk = array_sum_seconds(k, elems, threads, &sink);
        double dv = array_sum_seconds(v, elems, threads, &sink);
        mem_s[r] = dk + dv; /* the same 2 x elems x 4 bytes the engine touches */
        double t0 = now_s();
        if (attn_cpu_attend(&c, &opt, &err) != 0)
            return 1;
        eng_s[r] = now_s() - t0;
    }
    double mem_bytes = 2.0 * (double)elems * sizeof(float);
    double mem_gbs = mem_bytes / median(mem_s, repeats) / 1e9;
    double eng_med = median(eng_s, repeats);
    double eng_gbs = kv_bytes / eng_med / 1e9;
    double ratio = eng_gbs / mem_gbs;

    char model[256], nproc[32], date[64];
    shell(model, sizeof model, "lscpu | sed -n 's/^Model name: *//p' | head -1");
    shell(nproc, sizeof nproc, "nproc");
    shell(date, sizeof date, "date -u +%Y-%m-%dT%H:%M:%SZ");
    char report[4096];
    snprintf(report, sizeof report,
             "# CPU decode benchmark (%s)\n\n"
             "- date: %s\n"
             "- machine: %s, nproc %s\n"
             "- command: `%s`\n"
             "- shape: decode B=%u, T=%lld (+1 staged row), H_q=%u, H_kv=%u, d=%u, fp32 K/V, "
             "%s pages of %u rows (CSR), fp32 accumulation, LSE-O states, %u threads\n"
             "- plan: policy %s, %u slots for %u requests\n"
             "- repeats: %d, median reported (sink %.3g)\n\n"
             "| measure | bytes | median time (ms) | GB/s |\n"
             "|---|---:|---:|---:|\n"
             "| memory read (array sum, %u threads) | %.0f | %.2f | %.2f |\n"
             "| engine K/V read (logical rows) | %.0f | %.2f | %.2f |\n\n"
             "engine / memory bandwidth = **%.1f%%** (acceptance: >= 50%%).\n\n"
             "Bytes are logical ledgers (seed 0x04I), not hardware counters: the engine's "
             "figure counts each visible K and V row once per (request, K/V head); the memory "
             "figure sums the same two arrays.\n",
             date, date, model, nproc, cmdline, B, (long long)T, Hq, Hkv, d,
             attn_layout_name(layout), P, threads, attn_split_policy_name(plan.policy),
             plan.num_slots, plan.num_requests, repeats, sink, threads, mem_bytes,
             median(mem_s, repeats) * 1e3, mem_gbs, kv_bytes, eng_med * 1e3, eng_gbs,
             100.0 * ratio);
    fputs(report, stdout);
    if (out != NULL) {
        FILE *f = fopen(out, "w");
        if (f == NULL) {
            perror(out);
            return 1;
        }
        fputs(report, f);
        fclose(f);
    }
    attn_split_plan_free(&plan);
    free(k);
    free(v);
    free(req);
    free(qo);
    free(indptr);
    free(indices);
    free(last);
    free(q);
    free(kn);
    free(vn);
    free(o);
    free(lse);
    free(mem_s);
    free(eng_s);
    return 0;
}
