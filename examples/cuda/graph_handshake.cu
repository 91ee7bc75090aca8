/* A graph-safe handshake with attnd (issue 11 item 4; docs/cuda.md "CUDA
 * graphs"): the engine captures its per-layer work once into a CUDA graph
 * and replays it every decode step unchanged.
 *
 * Per layer l the graph holds: a kernel that writes q (into the client's
 * registered arena) and the step's new K/V rows (straight into attnd's
 * exported pool, at the slots the host put in the step's input block); a
 * stream write req[l] = 1 (inputs ready); a stream wait done[l] >= 1 (attnd
 * finished the layer); resets done[l] = 0 and req[l] = 0; a copy of O out
 * of the arena (what consumes it).  attnd's runs are asynchronous and
 * kv_written, each with wait {req[l] >= 1} and signal {done[l] = 1}.
 *
 * Why fixed values with resets, not values that grow with the step: the
 * captured memory operations replay with their values baked in, so growing
 * values need 2 L node updates per replay (cuGraphExecBatchMemOpNodeSetParams)
 * from the host; fixed values need none, and the words are reset by the
 * side that waited on them, after its wait.  That is race-free with two or
 * more layers: attnd's wait for layer l of step s+1 comes, on its stream,
 * after its wait for a layer the client signals only after it reset req[l]
 * of step s (for l = 0: layer L-1 of step s, signalled after the reset of
 * req[0]), so it never sees step s's stale 1; the client resets done[l]
 * before it signals anything of step s+1, and attnd writes done[l] of step
 * s+1 only after that signal.  One layer would race (use two word pairs by
 * step parity then); this example refuses L < 2.
 *
 * What changes per step lives in device memory the graph reads: the step's
 * input block (step number, page and slot of each request's new row) is
 * copied by the graph's first node from pinned host memory the host fills
 * before each replay, as engines feed slot mappings to captured kernels.
 *
 * Checked: every step's O of every layer is bit for bit the O of the same
 * run sent inline (k_new, v_new in the request) to an ordinary twin pool
 * holding the same history.  Prints the buffer_register hand-off figure,
 * per-step times, and PASS / FAIL last.  Needs attnd with the CUDA engine
 * (under MPS for overlap; CUDA_MODULE_LOADING=EAGER for both processes).
 *   nvcc -O2 -std=c++17 -Iinclude -I. examples/cuda/graph_handshake.cu \
 *        BUILD/libattn.a <libattn's link libraries> -lcudart_static -o graph_handshake
 *   graph_handshake ipc:///tmp/attnd.sock [steps]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "attn/client.h"
#include "attn/names.h"

#define B 4     /* requests */
#define HQ 8    /* query heads */
#define HKV 2   /* K/V heads */
#define D 128   /* head dim */
#define P 16    /* page size */
#define L 4     /* layers (>= 2: see above) */
#define MAXP 24 /* pages per request */

static const int T0[B] = {37, 64, 100, 15}; /* rows before step 0 */

/* The step's input block: what the host changes between replays. */
struct step_in {
    uint32_t step;
    int32_t page[B], slot[B];
};

/* The arena: semaphore words first, then per-layer q and O slots. */
#define SEM_REQ(l) ((uint64_t)(l)*16)
#define SEM_DONE(l) ((uint64_t)(l)*16 + 8)
#define Q_BYTES (B * HQ * D * 2)
#define OFF_STEP 4096
#define OFF_Q(l) (8192 + (uint64_t)(l)*Q_BYTES)
#define OFF_O(l) (8192 + (uint64_t)(L + (l)) * Q_BYTES)
#define ARENA_BYTES (8192 + 2 * L * Q_BYTES)

typedef CUresult (*value64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

/* A value in [-1, 1) as bf16 bits, from (step, layer, tensor, index): the
 * kernel and the host reference compute the same bits. */
__host__ __device__ static uint16_t gen(uint32_t step, uint32_t layer, uint32_t tensor, uint32_t i)
{
    uint64_t z = ((uint64_t)step << 40) ^ ((uint64_t)layer << 32) ^ ((uint64_t)tensor << 28) ^ i;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float x = (float)(z >> 40) / (float)(1ull << 24) * 2.0f - 1.0f;
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* The engine's own kernel: q into its arena slot, the new K/V rows into the
 * exported pool at the layout's addresses (NHD). */
__global__ void write_inputs(const step_in *in, uint32_t layer, uint16_t *q, uint8_t *k_store,
                             uint8_t *v_store, uint64_t page_stride, uint64_t row_stride,
                             uint64_t head_stride)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t step = in->step;
    if (i < B * HQ * D)
        q[i] = gen(step, layer, 0, i);
    if (i < B * HKV * D) {
        uint32_t b = i / (HKV * D), h = (i / D) % HKV, x = i % D;
        uint64_t at =
            in->page[b] * page_stride + in->slot[b] * row_stride + h * head_stride + x * 2;
        *(uint16_t *)(k_store + at) = gen(step, layer, 1, i);
        *(uint16_t *)(v_store + at) = gen(step, layer, 2, i);
    }
}

static int fail(const char *what, int rv, const attn_reply *rep)
{
    printf("FAIL graph_handshake: %s: %s %s: %s\n", what, attn_err_name(rv), rep->error.field,
           rep->error.message);
    return 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("FAIL graph_handshake: %s: %s\n", #x, cudaGetErrorString(e_));                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The step's manifest on `pool`: request b has T0[b] + step rows and one new. */
struct manifest_buf {
    attn_request_desc req[B];
    int32_t qo_indptr[B + 1], page_indptr[B + 1], pages[B * MAXP], last[B];
    attn_manifest m;
};

static void make_manifest(manifest_buf *mb, const char *pool, uint32_t step,
                          const int32_t pages_of[B][MAXP])
{
    memset(mb, 0, sizeof *mb);
    int32_t n = 0;
    mb->page_indptr[0] = 0;
    for (int b = 0; b < B; b++) {
        int rows = T0[b] + (int)step + 1;
        int np = (rows + P - 1) / P;
        snprintf(mb->req[b].id, sizeof mb->req[b].id, "r%d", b);
        mb->req[b].cache_len = rows - 1;
        mb->req[b].new_len = 1;
        mb->qo_indptr[b + 1] = b + 1;
        for (int j = 0; j < np; j++)
            mb->pages[n++] = pages_of[b][j];
        mb->page_indptr[b + 1] = n;
        mb->last[b] = rows - (np - 1) * P;
    }
    attn_manifest *m = &mb->m;
    snprintf(m->pool, sizeof m->pool, "%s", pool);
    m->num_qo_heads = HQ;
    m->num_requests = B;
    m->requests = mb->req;
    m->qo_indptr = mb->qo_indptr;
    m->q_dtype = ATTN_BF16;
    m->kv.format = ATTN_KV_CSR;
    m->kv.page_indptr = mb->page_indptr;
    m->kv.page_indices = mb->pages;
    m->kv.num_page_indices = (uint32_t)n;
    m->kv.last_page_len = mb->last;
    m->mask.kind = ATTN_MASK_CAUSAL;
    snprintf(m->policy.backend, sizeof m->policy.backend, "auto");
}

static int plan_on(attn_client *c, const char *pool, uint32_t step, const int32_t pages_of[B][MAXP],
                   uint64_t *id)
{
    static manifest_buf mb;
    attn_reply rep;
    make_manifest(&mb, pool, step, pages_of);
    int rv = attn_plan(c, &mb.m, &rep);
    if (rv != 0)
        return fail("plan", rv, &rep);
    *id = rep.plan_id;
    attn_reply_free(&rep);
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "ipc:///run/attnd/attnd.sock";
    int steps = argc > 2 ? atoi(argv[2]) : 4;
    attn_client *c;
    attn_reply rep;
    int rv;
    value64_fn write64 = NULL, wait64 = NULL;
    enum cudaDriverEntryPointQueryResult qr;
    if (L < 2)
        return printf("FAIL graph_handshake: fixed-value resets need >= 2 layers\n"), 1;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", (void **)&write64, 12000,
                                         cudaEnableDefault, &qr) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", (void **)&wait64, 12000,
                                         cudaEnableDefault, &qr) != cudaSuccess)
        return printf("FAIL graph_handshake: no stream memory operations\n"), 1;
    if ((rv = attn_client_open(&c, url)) != 0)
        return printf("FAIL graph_handshake: cannot open %s\n", url), 1;

    /* two pools with one history: "gx" exported (the graph writes its new
     * rows), "gr" ordinary (the reference runs send theirs inline) */
    int32_t pages_of[B][MAXP];
    uint32_t num_pages = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < MAXP; j++)
            pages_of[b][j] = (int32_t)(num_pages++ * 7 % (B * MAXP)); /* scattered */
    attn_pool_geometry g = {};
    g.layers = L;
    g.num_pages = B * MAXP;
    g.page_size = P;
    g.num_kv_heads = HKV;
    g.head_dim_qk = g.head_dim_vo = D;
    g.kv_dtype = ATTN_BF16;
    g.layout = ATTN_NHD;
    snprintf(g.device, sizeof g.device, "cuda:0");
    snprintf(g.name, sizeof g.name, "gx");
    if ((rv = attn_pool_create_exported(c, &g, &rep)) != 0)
        return fail("pool_create export", rv, &rep);
    attn_pool_export x = rep.exp;
    attn_reply_free(&rep);
    snprintf(g.name, sizeof g.name, "gr");
    if ((rv = attn_pool_create(c, &g, &rep)) != 0)
        return fail("pool_create", rv, &rep);
    attn_reply_free(&rep);
    if (x.kind != ATTN_BUFFER_CUDA_IPC)
        return printf("FAIL graph_handshake: the export is %s, not cuda_ipc\n",
                      attn_buffer_kind_name(x.kind)),
               1;
    {
        size_t page_bytes = (size_t)P * HKV * D * 2;
        uint16_t *hist = (uint16_t *)malloc(page_bytes * g.num_pages);
        int32_t all[B * MAXP];
        for (uint32_t i = 0; i < g.num_pages; i++)
            all[i] = (int32_t)i;
        for (uint32_t l = 0; l < L; l++) {
            for (size_t i = 0; i < page_bytes * g.num_pages / 2; i++)
                hist[i] = gen(0xffffff, l, 3, (uint32_t)i);
            static const char *const twins[2] = {"gx", "gr"};
            for (const char *pool : twins) {
                attn_kv_args kv = {};
                snprintf(kv.pool, sizeof kv.pool, "%s", pool);
                kv.layer = l;
                kv.pages = all;
                kv.num_pages = g.num_pages;
                kv.k = attn_bytes{hist, page_bytes * g.num_pages};
                kv.v = attn_bytes{hist, page_bytes * g.num_pages};
                if ((rv = attn_kv_write(c, &kv, &rep)) != 0)
                    return fail("kv_write", rv, &rep);
                attn_reply_free(&rep);
            }
        }
        free(hist);
    }

    /* the exported pool, mapped here */
    cudaIpcMemHandle_t h;
    memcpy(&h, x.handle, sizeof h);
    uint8_t *pool_base = NULL;
    CK(cudaSetDevice(0));
    CK(cudaIpcOpenMemHandle((void **)&pool_base, h, cudaIpcMemLazyEnablePeerAccess));
    pool_base += x.offset;

    /* the arena, registered once; its reply says what a hand-off costs */
    uint8_t *arena = NULL;
    uint64_t buf = 0;
    CK(cudaMalloc((void **)&arena, ARENA_BYTES));
    CK(cudaMemset(arena, 0, ARENA_BYTES));
    uint8_t *out_hist = NULL;
    CK(cudaMalloc((void **)&out_hist, (size_t)L * Q_BYTES));
    if ((rv = attn_buffer_register_cuda(c, arena, ARENA_BYTES, &buf, &rep)) != 0)
        return fail("buffer_register", rv, &rep);
    printf("HANDOFF pingpong_us=%.2f note=%s\n", rep.handoff_us, rep.handoff);
    attn_reply_free(&rep);

    /* capture the step once */
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    step_in *host_in = NULL;
    CK(cudaMallocHost((void **)&host_in, sizeof *host_in));
    step_in *dev_in = (step_in *)(arena + OFF_STEP);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CK(cudaMemcpyAsync(dev_in, host_in, sizeof *host_in, cudaMemcpyHostToDevice, s));
    for (uint32_t l = 0; l < L; l++) {
        uint8_t *ks = pool_base + x.k_offset + l * x.layer_stride;
        uint8_t *vs = pool_base + x.v_offset + l * x.layer_stride;
        write_inputs<<<(B * HQ * D + 255) / 256, 256, 0, s>>>(
            dev_in, l, (uint16_t *)(arena + OFF_Q(l)), ks, vs, x.page_stride_k, x.row_stride_k,
            x.head_stride_k);
        CUstream cs = (CUstream)s;
        if (write64(cs, (CUdeviceptr)(arena + SEM_REQ(l)), 1, 0) != CUDA_SUCCESS ||
            wait64(cs, (CUdeviceptr)(arena + SEM_DONE(l)), 1, CU_STREAM_WAIT_VALUE_GEQ) !=
                CUDA_SUCCESS ||
            write64(cs, (CUdeviceptr)(arena + SEM_DONE(l)), 0, 0) != CUDA_SUCCESS ||
            write64(cs, (CUdeviceptr)(arena + SEM_REQ(l)), 0, 0) != CUDA_SUCCESS)
            return printf("FAIL graph_handshake: a stream memory operation was refused\n"), 1;
        CK(cudaMemcpyAsync(out_hist + l * Q_BYTES, arena + OFF_O(l), Q_BYTES,
                           cudaMemcpyDeviceToDevice, s));
    }
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));

    uint16_t *got = (uint16_t *)malloc((size_t)L * Q_BYTES);
    uint16_t qh[B * HQ * D], kh[B * HKV * D], vh[B * HKV * D];
    uint64_t order = 0, mismatches = 0;
    double total_ms = 0;
    for (int st = 0; st < steps; st++) {
        uint64_t gx_plan, gr_plan;
        if (plan_on(c, "gx", (uint32_t)st, pages_of, &gx_plan) ||
            plan_on(c, "gr", (uint32_t)st, pages_of, &gr_plan))
            return 1;
        host_in->step = (uint32_t)st;
        for (int b = 0; b < B; b++) {
            int t = T0[b] + st; /* the new row's logical position */
            host_in->page[b] = pages_of[b][t / P];
            host_in->slot[b] = t % P;
        }
        double t0 = now_ms();
        /* the step's runs, enqueued behind their waits, then the replay */
        for (uint32_t l = 0; l < L; l++) {
            attn_run_args a = {};
            a.plan_id = gx_plan;
            a.layer = l;
            a.async = true;
            a.kv_written = true;
            a.order = ++order;
            a.q_ref = attn_tensor_ref{buf, OFF_Q(l), Q_BYTES};
            a.o_ref = attn_tensor_ref{buf, OFF_O(l), Q_BYTES};
            a.wait = attn_sem_ref{buf, SEM_REQ(l), 1};
            a.sig = attn_sem_ref{buf, SEM_DONE(l), 1};
            if ((rv = attn_run(c, &a, &rep)) != 0)
                return fail("run (async, kv_written)", rv, &rep);
            attn_reply_free(&rep);
        }
        CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        double ms = now_ms() - t0;
        total_ms += ms;
        CK(cudaMemcpy(got, out_hist, (size_t)L * Q_BYTES, cudaMemcpyDeviceToHost));
        /* the reference: the same inputs inline on the twin pool */
        uint64_t bad = 0;
        for (uint32_t l = 0; l < L; l++) {
            for (uint32_t i = 0; i < B * HQ * D; i++)
                qh[i] = gen((uint32_t)st, l, 0, i);
            for (uint32_t i = 0; i < B * HKV * D; i++) {
                kh[i] = gen((uint32_t)st, l, 1, i);
                vh[i] = gen((uint32_t)st, l, 2, i);
            }
            attn_run_args a = {};
            a.plan_id = gr_plan;
            a.layer = l;
            a.order = ++order;
            a.q = attn_bytes{qh, sizeof qh};
            a.k_new = attn_bytes{kh, sizeof kh};
            a.v_new = attn_bytes{vh, sizeof vh};
            if ((rv = attn_run(c, &a, &rep)) != 0)
                return fail("reference run", rv, &rep);
            if (rep.o.len != Q_BYTES ||
                memcmp(rep.o.data, got + (size_t)l * Q_BYTES / 2, Q_BYTES) != 0)
                bad++;
            attn_reply_free(&rep);
        }
        mismatches += bad;
        printf("step %d: %d layers in %.3f ms (graph replay + handshakes), %llu layers differ "
               "from the inline reference\n",
               st, L, ms, (unsigned long long)bad);
    }
    attn_buffer_drop(c, buf, &rep);
    attn_reply_free(&rep);
    cudaIpcCloseMemHandle(pool_base - x.offset);
    attn_pool_drop(c, "gx", &rep);
    attn_reply_free(&rep);
    attn_pool_drop(c, "gr", &rep);
    attn_reply_free(&rep);
    attn_client_close(c);
    if (mismatches != 0) {
        printf("FAIL graph_handshake: %llu of %d layer outputs differ from the inline runs\n",
               (unsigned long long)mismatches, steps * L);
        return 1;
    }
    printf("PASS graph_handshake: %d steps x %d layers replayed from one graph, O bit-identical "
           "to inline runs, %.3f ms per step\n",
           steps, L, total_ms / (steps > 0 ? steps : 1));
    return 0;
}
