/* The engine-like C client of the zero-copy benchmark (issue 11): the same
 * 32-layer decode step as bench_zerocopy.py's Python client, through
 * libattn's prepared asynchronous runs.
 *
 * Per layer, on one stream: three device copies write q and the new K/V
 * rows into a registered cuda_ipc arena (the Python client's three torch
 * copies), a stream memop writes the `ready` semaphore, a prepared run
 * (attn_run_prepare once, attn_run_submit_prepared per layer: only id,
 * layer, order and the two semaphore values change) asks attnd to wait for
 * it, attend and signal `done`, then the stream waits for `done` and two
 * kernels consume O (acc += float(O), the two kernels torch runs for the
 * Python client and for (a)).  The host never blocks inside a step:
 * replies are counted by libattn's callbacks and collected once per step,
 * at most --window outstanding.
 *
 * How the stream waits for `done` (--variants, each measured in turn on
 * the same pool, plan and arena):
 *   memop   cuStreamWaitValue64 (the default, as the Python client)
 *   spin    a 1-thread kernel polls the word, then the consume kernel
 *   oneword memop, but ready and done are one word: the client writes 2e-1,
 *           attnd waits >= 2e-1 and writes 2e (one semaphore word per run)
 * --stamped 1: a stamped pass per variant instead of the timed steps
 * (GPU timestamps at 4 points of every layer, for attnd's timeline).
 * (A third wait, the consume kernel itself polling in each of 132 blocks
 * while attnd's kernels ran, hung on the H200 under MPS in its first step,
 * 2026-12-01: removed.)
 * --probe first measures, in this process, how soon a waiter sees a word
 * another stream writes with a memop after a kernel: memop wait + a stamp
 * kernel, a polling kernel + a stamp kernel, a polling kernel that stamps.
 *
 * The workload comes from bench_zerocopy.py (--data FILE: page table and
 * every layer's q / k_new / v_new, the same tensors its clients use), and
 * the pool (with layer 0's history) is the one it made; layer 0's O and
 * LSE of the last warm-up step and of the last timed step, and acc, are
 * written to --out for it to check against its fp32 torch reference.
 * Prints one JSON object per variant (and the probe) on stdout.
 *
 * Build (scripts/stage-zerocopy.sh): nvcc -c, linked with the static libattn.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "attn/client.h"

#define CHECK_CUDA(x)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

typedef CUresult (*stream_value64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

/* ---- device code ---------------------------------------------------------- */

/* A waiter spins while the counter is below `value` (CUDA's cyclic GEQ). */
__device__ static bool below(const volatile unsigned long long *word, unsigned long long value)
{
    return (long long)(*word - value) < 0;
}

__device__ static unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The `spin` variant's wait: one thread polls the word. */
__global__ void spin_wait(const volatile unsigned long long *word, unsigned long long value)
{
    while (below(word, value)) {
    }
    __threadfence();
}

/* The consume, as the Python client and (a) do it (acc += O.float(): two
 * kernels, so that every client does the same GPU work per layer):
 * f = float(o), then acc += f, over n elements. */
__global__ void to_float(float *f, const uint16_t *o, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        f[i] = __uint_as_float((uint32_t)o[i] << 16);
}

__global__ void add_into(float *acc, const float *f, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc[i] += f[i];
}

/* The probe's kernels: sleep ~us then stamp; stamp; poll then stamp. */
__global__ void sleep_stamp(unsigned long long *t, unsigned us)
{
    unsigned long long t0 = globaltimer();
    while (globaltimer() - t0 < us * 1000ull) {
    }
    *t = globaltimer();
}

__global__ void stamp(unsigned long long *t)
{
    *t = globaltimer();
}

__global__ void spin_stamp(const volatile unsigned long long *word, unsigned long long value,
                           unsigned long long *t)
{
    while (below(word, value)) {
    }
    *t = globaltimer();
}

/* ---- host side ------------------------------------------------------------ */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p-th percentile (nearest rank, as bench_zerocopy.py's pct) of n values (sorts them). */
static double pct(double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)llround(p / 100.0 * (double)(n - 1));
    return v[i < n ? i : n - 1];
}

/* A number for JSON (NaN, e.g. the median of nothing, as null). */
static void print_num(FILE *f, double x)
{
    if (isnan(x))
        fprintf(f, "null");
    else
        fprintf(f, "%.3f", x);
}

static void print_summary(FILE *f, const char *key, double *v, size_t n, int comma)
{
    double mn = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        mn = v[i] < mn ? v[i] : mn;
    double p50 = pct(v, n, 50), p99 = pct(v, n, 99);
    fprintf(f, "\"%s\": {\"p50\": ", key);
    print_num(f, p50);
    fprintf(f, ", \"p99\": ");
    print_num(f, p99);
    fprintf(f, ", \"min\": ");
    print_num(f, mn);
    fprintf(f, ", \"n\": %zu}%s", n, comma ? ", " : "");
}

/* The workload file bench_zerocopy.py writes (little-endian). */
typedef struct workload {
    uint32_t B, HQ, HKV, D, P, L, n_indices, T;
    int32_t *indptr, *indices, *last;
    void *q, *k, *v;          /* host: [L][B][H][D] bf16 */
    size_t q_bytes, kv_bytes; /* of one layer */
} workload;

static void *read_n(FILE *f, size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL || fread(p, 1, n, f) != n) {
        fprintf(stderr, "data file: cannot read %s (%zu bytes)\n", what, n);
        exit(2);
    }
    return p;
}

static void load_workload(const char *path, workload *w)
{
    FILE *f = fopen(path, "rb");
    uint32_t hdr[9];
    if (f == NULL || fread(hdr, 4, 9, f) != 9 || hdr[0] != 0x7a637731u /* "zcw1" */) {
        fprintf(stderr, "%s: not a zc workload file (%s)\n", path, strerror(errno));
        exit(2);
    }
    w->B = hdr[1], w->HQ = hdr[2], w->HKV = hdr[3], w->D = hdr[4], w->P = hdr[5], w->L = hdr[6];
    w->n_indices = hdr[7], w->T = hdr[8];
    w->indptr = (int32_t *)read_n(f, 4 * (size_t)(w->B + 1), "kv_indptr");
    w->indices = (int32_t *)read_n(f, 4 * (size_t)w->n_indices, "kv_indices");
    w->last = (int32_t *)read_n(f, 4 * (size_t)w->B, "kv_last_page_len");
    w->q_bytes = (size_t)w->B * w->HQ * w->D * 2;
    w->kv_bytes = (size_t)w->B * w->HKV * w->D * 2;
    w->q = read_n(f, w->q_bytes * w->L, "q");
    w->k = read_n(f, w->kv_bytes * w->L, "k_new");
    w->v = read_n(f, w->kv_bytes * w->L, "v_new");
    fclose(f);
}

/* What the reply callbacks collect (an nng thread writes, the main thread reads). */
typedef struct replies {
    int arrived;           /* atomic: replies read */
    int errors;            /* atomic: error replies */
    uint64_t *seqs;        /* run_seq of submit i */
    char first_error[600]; /* printed inside a JSON string: no quotes or backslashes */
} replies;

typedef struct ticket {
    replies *r;
    size_t index;
} ticket;

static void on_reply(void *arg, int rv, attn_reply *rep)
{
    ticket *t = (ticket *)arg;
    replies *r = t->r;
    if (rv != 0) {
        if (__atomic_fetch_add(&r->errors, 1, __ATOMIC_ACQ_REL) == 0) {
            snprintf(r->first_error, sizeof r->first_error, "%.40s %.100s: %.400s",
                     attn_err_name(rv), rep->error.field, rep->error.message);
            for (char *p = r->first_error; *p; p++)
                if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
                    *p = '\'';
        }
    } else {
        r->seqs[t->index] = rep->run_seq;
    }
    attn_reply_free(rep);
    free(rep);
    __atomic_fetch_add(&r->arrived, 1, __ATOMIC_RELEASE);
}

static void wait_replies(replies *r, int upto)
{
    while (__atomic_load_n(&r->arrived, __ATOMIC_ACQUIRE) < upto) {
    }
}

static int fail(const char *what, int rv, const attn_reply *rep)
{
    fprintf(stderr, "%s: %s %s: %s\n", what, attn_err_name(rv), rep->error.field,
            rep->error.message);
    return 1;
}

static stream_value64_fn driver_entry(const char *name)
{
    enum cudaDriverEntryPointQueryResult q;
    void *p = NULL;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "no driver entry point %s\n", name);
        exit(2);
    }
    return (stream_value64_fn)p;
}

typedef enum { V_MEMOP, V_SPIN, V_ONEWORD, V_COUNT } variant;
static const char *const g_variant_names[V_COUNT] = {"memop", "spin", "oneword"};

/* The arena's layout: semaphore words, then the tensors (256-aligned). */
enum { SEM_READY = 0, SEM_DONE = 8, SEM_ONE = 16, ARENA_HEAD = 256 };

typedef struct bench {
    workload w;
    attn_client *c;
    uint64_t plan_id, buf;
    char *arena; /* device */
    size_t off_q, off_k, off_v, off_o, off_lse, arena_bytes;
    char *src_q, *src_k, *src_v; /* device: every layer's inputs */
    float *acc;
    char *save_o[2], *save_lse[2]; /* layer 0 after the warm-up, after the last step */
    cudaStream_t s;
    stream_value64_fn write64, wait64;
    attn_prepared_run *run0, *run; /* layer 0 (with LSE), the other layers */
    uint64_t epoch, order;
    int window;
} bench;

static size_t up256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* Plan the batch on the pool, allocate and register the arena, copy every
 * layer's inputs to the device, prepare the two runs. */
static int setup(bench *b, const char *url, const char *pool)
{
    attn_reply rep;
    attn_error_detail err;
    workload *w = &b->w;
    int rv;
    if ((rv = attn_client_open(&b->c, url)) != 0)
        return fprintf(stderr, "cannot open %s\n", url), 1;
    attn_client_set_timeout(b->c, 120000);

    attn_request_desc *reqs = (attn_request_desc *)calloc(w->B, sizeof *reqs);
    int32_t *qo = (int32_t *)calloc(w->B + 1, sizeof *qo);
    for (uint32_t i = 0; i < w->B; i++) {
        snprintf(reqs[i].id, sizeof reqs[i].id, "%u", i);
        reqs[i].cache_len = w->T;
        reqs[i].new_len = 1;
        qo[i + 1] = (int32_t)(i + 1);
    }
    attn_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.pool, sizeof m.pool, "%s", pool);
    m.num_qo_heads = w->HQ;
    m.num_requests = w->B;
    m.requests = reqs;
    m.qo_indptr = qo;
    m.q_dtype = ATTN_BF16;
    m.kv.format = ATTN_KV_CSR;
    m.kv.page_indptr = w->indptr;
    m.kv.page_indices = w->indices;
    m.kv.num_page_indices = w->n_indices;
    m.kv.last_page_len = w->last;
    m.mask.kind = ATTN_MASK_CAUSAL;
    snprintf(m.policy.backend, sizeof m.policy.backend, "auto");
    if ((rv = attn_plan(b->c, &m, &rep)) != 0)
        return fail("plan", rv, &rep);
    b->plan_id = rep.plan_id;
    attn_reply_free(&rep);
    free(reqs);
    free(qo);

    size_t o_bytes = w->q_bytes, lse_bytes = (size_t)w->B * w->HQ * 4;
    b->off_q = ARENA_HEAD;
    b->off_k = b->off_q + up256(w->q_bytes);
    b->off_v = b->off_k + up256(w->kv_bytes);
    b->off_o = b->off_v + up256(w->kv_bytes);
    b->off_lse = b->off_o + up256(o_bytes);
    b->arena_bytes = b->off_lse + up256(lse_bytes);
    CHECK_CUDA(cudaMalloc((void **)&b->arena, b->arena_bytes));
    CHECK_CUDA(cudaMemset(b->arena, 0, b->arena_bytes));
    if ((rv = attn_buffer_register_cuda(b->c, b->arena, b->arena_bytes, &b->buf, &rep)) != 0)
        return fail("buffer_register (cuda_ipc)", rv, &rep);
    attn_reply_free(&rep);

    CHECK_CUDA(cudaMalloc((void **)&b->src_q, w->q_bytes * w->L));
    CHECK_CUDA(cudaMalloc((void **)&b->src_k, w->kv_bytes * w->L));
    CHECK_CUDA(cudaMalloc((void **)&b->src_v, w->kv_bytes * w->L));
    CHECK_CUDA(cudaMemcpy(b->src_q, w->q, w->q_bytes * w->L, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b->src_k, w->k, w->kv_bytes * w->L, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b->src_v, w->v, w->kv_bytes * w->L, cudaMemcpyHostToDevice));
    /* acc (fp32) and the consume's float(O) behind it */
    CHECK_CUDA(cudaMalloc((void **)&b->acc, o_bytes * 2 * 2));
    for (int i = 0; i < 2; i++) {
        CHECK_CUDA(cudaMalloc((void **)&b->save_o[i], o_bytes));
        CHECK_CUDA(cudaMalloc((void **)&b->save_lse[i], lse_bytes));
    }
    CHECK_CUDA(cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
    b->write64 = driver_entry("cuStreamWriteValue64");
    b->wait64 = driver_entry("cuStreamWaitValue64");

    attn_run_args a;
    memset(&a, 0, sizeof a);
    a.plan_id = b->plan_id;
    a.async = true;
    a.q_ref = (attn_tensor_ref){b->buf, b->off_q, w->q_bytes};
    a.k_new_ref = (attn_tensor_ref){b->buf, b->off_k, w->kv_bytes};
    a.v_new_ref = (attn_tensor_ref){b->buf, b->off_v, w->kv_bytes};
    a.o_ref = (attn_tensor_ref){b->buf, b->off_o, o_bytes};
    a.wait = (attn_sem_ref){b->buf, SEM_READY, 0};
    a.sig = (attn_sem_ref){b->buf, SEM_DONE, 0};
    a.order = 1; /* numbered: attnd enqueues the connection's runs in send order */
    if ((rv = attn_run_prepare(b->c, &a, &b->run, &err)) != 0)
        return fprintf(stderr, "attn_run_prepare: %s\n", err.message), 1;
    a.lse_ref = (attn_tensor_ref){b->buf, b->off_lse, lse_bytes};
    a.return_lse = true;
    if ((rv = attn_run_prepare(b->c, &a, &b->run0, &err)) != 0)
        return fprintf(stderr, "attn_run_prepare: %s\n", err.message), 1;
    return 0;
}

/* The oneword variant's runs use one word for both semaphores. */
static int prepare_oneword(bench *b, attn_prepared_run **run0, attn_prepared_run **run)
{
    workload *w = &b->w;
    attn_error_detail err;
    attn_run_args a;
    memset(&a, 0, sizeof a);
    a.plan_id = b->plan_id;
    a.async = true;
    a.q_ref = (attn_tensor_ref){b->buf, b->off_q, w->q_bytes};
    a.k_new_ref = (attn_tensor_ref){b->buf, b->off_k, w->kv_bytes};
    a.v_new_ref = (attn_tensor_ref){b->buf, b->off_v, w->kv_bytes};
    a.o_ref = (attn_tensor_ref){b->buf, b->off_o, w->q_bytes};
    a.wait = (attn_sem_ref){b->buf, SEM_ONE, 0};
    a.sig = (attn_sem_ref){b->buf, SEM_ONE, 0};
    a.order = 1;
    if (attn_run_prepare(b->c, &a, run, &err) != 0)
        return fprintf(stderr, "attn_run_prepare: %s\n", err.message), 1;
    a.lse_ref = (attn_tensor_ref){b->buf, b->off_lse, (size_t)w->B * w->HQ * 4};
    a.return_lse = true;
    if (attn_run_prepare(b->c, &a, run0, &err) != 0)
        return fprintf(stderr, "attn_run_prepare: %s\n", err.message), 1;
    return 0;
}

/* Per-run host times (µs): from after the input copies to after the done
 * wait is enqueued (what bench_zerocopy.py's submit measures), and its parts. */
typedef struct times {
    double *submit, *ready, *send, *done;
    size_t n;
} times;

/* One layer: inputs, ready, the run, the done wait, the consume. */
static int layer(bench *b, variant v, attn_prepared_run *run0, attn_prepared_run *run, uint32_t li,
                 replies *r, ticket *tk, size_t *nsub, times *tm, int save, unsigned long long *st)
{
    workload *w = &b->w;
    CUstream cs = (CUstream)b->s;
    if (st != NULL)
        stamp<<<1, 1, 0, b->s>>>(st + 0);
    CHECK_CUDA(cudaMemcpyAsync(b->arena + b->off_q, b->src_q + li * w->q_bytes, w->q_bytes,
                               cudaMemcpyDeviceToDevice, b->s));
    CHECK_CUDA(cudaMemcpyAsync(b->arena + b->off_k, b->src_k + li * w->kv_bytes, w->kv_bytes,
                               cudaMemcpyDeviceToDevice, b->s));
    CHECK_CUDA(cudaMemcpyAsync(b->arena + b->off_v, b->src_v + li * w->kv_bytes, w->kv_bytes,
                               cudaMemcpyDeviceToDevice, b->s));
    if (st != NULL)
        stamp<<<1, 1, 0, b->s>>>(st + 1);
    double t0 = now_us();
    uint64_t e = ++b->epoch;
    uint64_t ready_v = v == V_ONEWORD ? 2 * e - 1 : e, done_v = v == V_ONEWORD ? 2 * e : e;
    CUdeviceptr ready_w = (CUdeviceptr)(b->arena + (v == V_ONEWORD ? SEM_ONE : SEM_READY));
    CUdeviceptr done_w = (CUdeviceptr)(b->arena + (v == V_ONEWORD ? SEM_ONE : SEM_DONE));
    if (b->write64(cs, ready_w, ready_v, 0) != CUDA_SUCCESS)
        return fprintf(stderr, "cuStreamWriteValue64 failed\n"), 1;
    double t1 = now_us();
    /* at most `window` replies unread: the oldest first */
    if ((int)*nsub - __atomic_load_n(&r->arrived, __ATOMIC_ACQUIRE) >= b->window)
        wait_replies(r, (int)*nsub - b->window + 1);
    tk[*nsub] = (ticket){r, *nsub};
    attn_run_submit sv = {
        .layer = li, .wait_value = ready_v, .signal_value = done_v, .order = ++b->order};
    int rv = attn_run_submit_prepared(li == 0 ? run0 : run, &sv, on_reply, &tk[*nsub]);
    if (rv != 0)
        return fprintf(stderr, "attn_run_submit_prepared: %s\n", attn_err_name(rv)), 1;
    (*nsub)++;
    double t2 = now_us();
    const volatile unsigned long long *dw = (const volatile unsigned long long *)done_w;
    if (v == V_MEMOP || v == V_ONEWORD) {
        if (b->wait64(cs, done_w, done_v, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
            return fprintf(stderr, "cuStreamWaitValue64 failed\n"), 1;
    } else if (v == V_SPIN) {
        spin_wait<<<1, 1, 0, b->s>>>(dw, done_v);
    }
    if (st != NULL)
        stamp<<<1, 1, 0, b->s>>>(st + 2);
    double t3 = now_us();
    if (tm != NULL) {
        tm->submit[tm->n] = t3 - t0;
        tm->ready[tm->n] = t1 - t0;
        tm->send[tm->n] = t2 - t1;
        tm->done[tm->n] = t3 - t2;
        tm->n++;
    }
    size_t n = (size_t)w->B * w->HQ * w->D;
    const uint16_t *o = (const uint16_t *)(b->arena + b->off_o);
    unsigned grid = (unsigned)((n + 255) / 256);
    to_float<<<grid, 256, 0, b->s>>>(b->acc + n, o, n);
    add_into<<<grid, 256, 0, b->s>>>(b->acc, b->acc + n, n);
    if (st != NULL)
        stamp<<<1, 1, 0, b->s>>>(st + 3);
    if (li == 0 && save >= 0) { /* what the Python client's o.clone() / lse.clone() copy */
        CHECK_CUDA(cudaMemcpyAsync(b->save_o[save], b->arena + b->off_o, w->q_bytes,
                                   cudaMemcpyDeviceToDevice, b->s));
        CHECK_CUDA(cudaMemcpyAsync(b->save_lse[save], b->arena + b->off_lse,
                                   (size_t)w->B * w->HQ * 4, cudaMemcpyDeviceToDevice, b->s));
    }
    return 0;
}

/* After an error reply a `done` may never come: write the last epoch's
 * value from another stream of ours so that nothing on b->s hangs. */
static void release_stream(bench *b, variant v)
{
    cudaStream_t side;
    CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    uint64_t e = b->epoch;
    b->write64((CUstream)side, (CUdeviceptr)(b->arena + SEM_DONE), e, 0);
    b->write64((CUstream)side, (CUdeviceptr)(b->arena + SEM_ONE), 2 * e, 0);
    CHECK_CUDA(cudaStreamSynchronize(side));
    CHECK_CUDA(cudaStreamDestroy(side));
    (void)v;
}

static int write_file(const char *dir, const char *name, const void *dev, size_t n)
{
    char path[1024];
    void *h = malloc(n);
    CHECK_CUDA(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(h, 1, n, f) != n)
        return fprintf(stderr, "cannot write %s\n", path), 1;
    fclose(f);
    free(h);
    return 0;
}

/* One variant: a warm-up step, `steps` timed ones; prints its JSON line. */
static int measure(bench *b, variant v, int steps, const char *out)
{
    workload *w = &b->w;
    attn_prepared_run *run0 = b->run0, *run = b->run;
    if (v == V_ONEWORD && prepare_oneword(b, &run0, &run) != 0)
        return 1;
    size_t total = (size_t)(steps + 1) * w->L;
    replies r;
    memset(&r, 0, sizeof r);
    r.seqs = (uint64_t *)calloc(total, sizeof *r.seqs);
    ticket *tk = (ticket *)calloc(total, sizeof *tk);
    times tm = {(double *)calloc(total, 8), (double *)calloc(total, 8), (double *)calloc(total, 8),
                (double *)calloc(total, 8), 0};
    double *step_us = (double *)calloc(steps, 8), *handed = (double *)calloc(steps, 8);
    size_t nsub = 0;
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaMemsetAsync(b->acc, 0, (size_t)w->B * w->HQ * w->D * 4, b->s));
    int rc = 0;
    for (int s = -1; s < steps && rc == 0; s++) {
        double h0 = now_us();
        CHECK_CUDA(cudaEventRecord(e0, b->s));
        for (uint32_t li = 0; li < w->L && rc == 0; li++)
            rc = layer(b, v, run0, run, li, &r, tk, &nsub, s < 0 ? NULL : &tm, s < 0 ? 0 : 1, NULL);
        CHECK_CUDA(cudaEventRecord(e1, b->s));
        if (s >= 0)
            handed[s] = now_us() - h0;
        wait_replies(&r, (int)nsub); /* the step's replies: collected once a step */
        if (__atomic_load_n(&r.errors, __ATOMIC_ACQUIRE) > 0) {
            fprintf(stderr, "(%s) %s\n", g_variant_names[v], r.first_error);
            release_stream(b, v);
            rc = 1;
        }
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (s >= 0)
            step_us[s] = ms * 1e3;
    }
    CHECK_CUDA(cudaStreamSynchronize(b->s));
    /* attnd's GPU time of the last 4 steps' runs */
    double *eng = (double *)calloc(total, 8);
    size_t neng = 0;
    int in_order = 1;
    for (size_t i = 1; i < nsub; i++)
        in_order &= r.seqs[i] > r.seqs[i - 1];
    for (size_t i = nsub > 4 * (size_t)w->L ? nsub - 4 * (size_t)w->L : 0; rc == 0 && i < nsub;
         i++) {
        attn_reply rep;
        if (attn_run_status_get(b->c, r.seqs[i], &rep) == 0 && rep.status.state == ATTN_RUN_DONE)
            eng[neng++] = rep.status.engine_us;
        attn_reply_free(&rep);
    }
    char name[64];
    size_t o_bytes = w->q_bytes, lse_bytes = (size_t)w->B * w->HQ * 4;
    for (int i = 0; i < 2 && rc == 0; i++) {
        snprintf(name, sizeof name, "c_%s_o0_%d.bin", g_variant_names[v], i);
        rc |= write_file(out, name, b->save_o[i], o_bytes);
        snprintf(name, sizeof name, "c_%s_lse0_%d.bin", g_variant_names[v], i);
        rc |= write_file(out, name, b->save_lse[i], lse_bytes);
    }
    if (rc == 0) {
        snprintf(name, sizeof name, "c_%s_acc.bin", g_variant_names[v]);
        rc |= write_file(out, name, b->acc, (size_t)w->B * w->HQ * w->D * 4);
    }
    printf("{\"variant\": \"%s\", \"ok\": %s, \"error\": \"%s\", \"window\": %d, "
           "\"run_seq_in_send_order\": %s, ",
           g_variant_names[v], rc == 0 ? "true" : "false", r.first_error, b->window,
           in_order ? "true" : "false");
    print_summary(stdout, "step_us", step_us, (size_t)(rc == 0 ? steps : 0), 1);
    print_summary(stdout, "step_submit_us", handed, (size_t)(rc == 0 ? steps : 0), 1);
    print_summary(stdout, "submit_us", tm.submit, tm.n, 1);
    print_summary(stdout, "diag_kernel_us", eng, neng, 1);
    fprintf(stdout, "\"submit_parts_us\": {");
    double p_ready = pct(tm.ready, tm.n, 50), p_send = pct(tm.send, tm.n, 50),
           p_done = pct(tm.done, tm.n, 50);
    fprintf(stdout, "\"ready_memop\": ");
    print_num(stdout, p_ready);
    fprintf(stdout, ", \"prepared_submit\": ");
    print_num(stdout, p_send);
    fprintf(stdout, ", \"done_wait\": ");
    print_num(stdout, p_done);
    fprintf(stdout, "}}\n");
    fflush(stdout);
    if (v == V_ONEWORD) {
        attn_run_prepared_free(run0);
        attn_run_prepared_free(run);
    }
    free(r.seqs), free(tk), free(tm.submit), free(tm.ready), free(tm.send), free(tm.done);
    free(step_us), free(handed), free(eng);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return rc;
}

/* A stamped pass of one variant (attnd started with ATTN_CUDA_TIMELINE):
 * a warm-up step, then 3 steps with %globaltimer stamps on our stream at
 * 4 points of every layer (before the input copies, after them, after the
 * done wait, after the consume).  Prints the stamps and each run's wait value
 * (the key of attnd's timeline lines) as one JSON line. */
static int stamped(bench *b, variant v)
{
    workload *w = &b->w;
    attn_prepared_run *run0 = b->run0, *run = b->run;
    if (v == V_ONEWORD && prepare_oneword(b, &run0, &run) != 0)
        return 1;
    const int steps = 3;
    size_t total = (size_t)(steps + 1) * w->L, npts = (size_t)steps * w->L * 4;
    replies r;
    memset(&r, 0, sizeof r);
    r.seqs = (uint64_t *)calloc(total, sizeof *r.seqs);
    ticket *tk = (ticket *)calloc(total, sizeof *tk);
    uint64_t *waits = (uint64_t *)calloc((size_t)steps * w->L, 8);
    unsigned long long *dst, *hst = (unsigned long long *)calloc(npts, 8);
    CHECK_CUDA(cudaMalloc((void **)&dst, npts * 8));
    CHECK_CUDA(cudaMemset(dst, 0, npts * 8));
    size_t nsub = 0;
    int rc = 0;
    for (int s = -1; s < steps && rc == 0; s++) {
        for (uint32_t li = 0; li < w->L && rc == 0; li++) {
            rc = layer(b, v, run0, run, li, &r, tk, &nsub, NULL, -1,
                       s < 0 ? NULL : dst + ((size_t)s * w->L + li) * 4);
            if (s >= 0)
                waits[(size_t)s * w->L + li] = v == V_ONEWORD ? 2 * b->epoch - 1 : b->epoch;
        }
        wait_replies(&r, (int)nsub);
        if (__atomic_load_n(&r.errors, __ATOMIC_ACQUIRE) > 0) {
            fprintf(stderr, "(%s, stamped) %s\n", g_variant_names[v], r.first_error);
            release_stream(b, v);
            rc = 1;
        }
    }
    CHECK_CUDA(cudaStreamSynchronize(b->s));
    CHECK_CUDA(cudaMemcpy(hst, dst, npts * 8, cudaMemcpyDeviceToHost));
    printf("{\"stamped\": \"%s\", \"ok\": %s, \"layers\": %u, \"waits\": [", g_variant_names[v],
           rc == 0 ? "true" : "false", w->L);
    for (size_t i = 0; i < (size_t)steps * w->L; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)waits[i]);
    printf("], \"stamps\": [");
    for (size_t i = 0; i < npts; i++)
        printf("%s%llu", i ? ", " : "", hst[i]);
    printf("]}\n");
    fflush(stdout);
    if (v == V_ONEWORD) {
        attn_run_prepared_free(run0);
        attn_run_prepared_free(run);
    }
    cudaFree(dst);
    free(hst), free(waits), free(r.seqs), free(tk);
    return rc;
}

/* In-process hand-off latency: stream A's kernel stamps t1 and a memop
 * writes the word (attnd's signal); stream B waits (memop + stamp kernel,
 * polling kernel + stamp kernel, or a polling kernel that stamps) and
 * stamps t2.  Median of t2 - t1 over `n` rounds, per wait. */
static void probe(bench *b, int n)
{
    cudaStream_t sa, sb;
    CHECK_CUDA(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    unsigned long long *t, *word, ht[2];
    CHECK_CUDA(cudaMalloc((void **)&t, 16));
    CHECK_CUDA(cudaMalloc((void **)&word, 8));
    CHECK_CUDA(cudaMemset(word, 0, 8));
    static const char *const names[3] = {"memop_wait", "spin_kernel", "spin_stamps"};
    double *lat = (double *)calloc(n, 8);
    printf("{\"probe\": \"handoff_in_process\", \"rounds\": %d, ", n);
    uint64_t value = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (int i = -3; i < n; i++) { /* 3 rounds to warm up */
            value++;
            if (mode == 0) {
                b->wait64((CUstream)sb, (CUdeviceptr)word, value, CU_STREAM_WAIT_VALUE_GEQ);
                stamp<<<1, 1, 0, sb>>>(t + 1);
            } else if (mode == 1) {
                spin_wait<<<1, 1, 0, sb>>>(word, value);
                stamp<<<1, 1, 0, sb>>>(t + 1);
            } else {
                spin_stamp<<<1, 1, 0, sb>>>(word, value, t + 1);
            }
            sleep_stamp<<<1, 1, 0, sa>>>(t, 30);
            b->write64((CUstream)sa, (CUdeviceptr)word, value, 0);
            CHECK_CUDA(cudaStreamSynchronize(sa));
            CHECK_CUDA(cudaStreamSynchronize(sb));
            CHECK_CUDA(cudaMemcpy(ht, t, 16, cudaMemcpyDeviceToHost));
            if (i >= 0)
                lat[i] = (double)(ht[1] - ht[0]) / 1e3;
        }
        print_summary(stdout, names[mode], lat, (size_t)n, mode < 2);
    }
    printf("}\n");
    fflush(stdout);
    free(lat);
    cudaFree(t);
    cudaFree(word);
    cudaStreamDestroy(sa);
    cudaStreamDestroy(sb);
}

int main(int argc, char **argv)
{
    const char *url = "ipc:///tmp/attnd-zc.sock", *pool = "zc", *data = NULL, *out = ".";
    const char *variants = "memop,spin,oneword";
    int steps = 10, probe_rounds = 0, stamped_pass = 0;
    bench b;
    memset(&b, 0, sizeof b);
    b.window = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--url"))
            url = argv[i + 1];
        else if (!strcmp(argv[i], "--pool"))
            pool = argv[i + 1];
        else if (!strcmp(argv[i], "--data"))
            data = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--variants"))
            variants = argv[i + 1];
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--window"))
            b.window = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--probe"))
            probe_rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stamped"))
            stamped_pass = atoi(argv[i + 1]);
        else
            return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    if (data == NULL || steps < 1 || b.window < 1)
        return fprintf(stderr,
                       "usage: %s --data FILE [--url U] [--pool P] [--out DIR] "
                       "[--variants memop,spin,oneword] [--steps N] [--window W] "
                       "[--probe ROUNDS] [--stamped 1]\n",
                       argv[0]),
               2;
    load_workload(data, &b.w);
    if (setup(&b, url, pool) != 0)
        return 1;
    if (probe_rounds > 0)
        probe(&b, probe_rounds);
    int rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", variants);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        int v = 0;
        while (v < V_COUNT && strcmp(tok, g_variant_names[v]) != 0)
            v++;
        if (v == V_COUNT)
            return fprintf(stderr, "unknown variant %s\n", tok), 2;
        rc |= stamped_pass ? stamped(&b, (variant)v) : measure(&b, (variant)v, steps, out);
    }
    attn_reply rep;
    attn_buffer_drop(b.c, b.buf, &rep);
    attn_reply_free(&rep);
    attn_run_prepared_free(b.run0);
    attn_run_prepared_free(b.run);
    attn_client_close(b.c);
    return rc;
}
