/* One decode layer through attnd with every tensor in a registered CUDA
 * buffer and GPU-side ordering (PROTOCOL.md v2, docs/protocol.md):
 *
 *   1. one cudaMalloc arena, registered once (attn_buffer_register_cuda);
 *      q, k_new, v_new, O, LSE and two semaphore words live in it;
 *   2. the engine's stream writes the inputs, then ready = 1
 *      (cuStreamWriteValue64);
 *   3. attn_run with wait {ready >= 1}, signal {done = 1} and async: attnd
 *      replies once its work is enqueued behind the wait;
 *   4. the engine's stream waits for done >= 1 (cuStreamWaitValue64) before
 *      it reads O: the host never blocks on the GPU.
 *
 * The driver's stream memory operations come through the runtime's
 * cudaGetDriverEntryPointByVersion, so this links cudart only (no libcuda).
 * attnd must run under MPS for its kernels and the engine's to overlap
 * (docs/cuda.md).  Build: make CUDA=1 build/examples/zero_copy
 * Run:   build/examples/zero_copy ipc:///tmp/attnd.sock
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "attn/client.h"

/* The arena's layout (byte offsets); 256-aligned tensors. */
enum {
    SEM_READY = 0, /* engine -> attnd: inputs written */
    SEM_DONE = 8,  /* attnd -> engine: O and LSE written */
    OFF_Q = 256,
    OFF_K = 512,
    OFF_V = 768,
    OFF_O = 1024,
    OFF_LSE = 1536,
    ARENA_BYTES = 1 << 20,
};
#define HQ 2
#define HKV 1
#define D 64
#define T 20 /* committed rows; this step appends row 20 */

typedef CUresult (*stream_value64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

static uint16_t bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static int fail(const char *what, int rv, const attn_reply *rep)
{
    fprintf(stderr, "%s: %s %s: %s\n", what, attn_err_name(rv), rep->error.field,
            rep->error.message);
    return 1;
}

static int driver_entry(const char *name, stream_value64_fn *fn)
{
    enum cudaDriverEntryPointQueryResult q;
    void *p = NULL;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "no driver entry point %s\n", name);
        return 1;
    }
    *fn = (stream_value64_fn)p;
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "ipc:///run/attnd/attnd.sock";
    attn_client *c;
    attn_reply rep;
    int rv;
    stream_value64_fn write64, wait64;
    if (driver_entry("cuStreamWriteValue64", &write64) ||
        driver_entry("cuStreamWaitValue64", &wait64))
        return 1;
    if ((rv = attn_client_open(&c, url)) != 0)
        return fprintf(stderr, "cannot open %s\n", url), 1;

    attn_pool_geometry g = {.name = "zero-copy-example",
                            .layers = 1,
                            .num_pages = 8,
                            .page_size = 16,
                            .num_kv_heads = HKV,
                            .head_dim_qk = D,
                            .head_dim_vo = D,
                            .kv_dtype = ATTN_BF16,
                            .layout = ATTN_NHD,
                            .device = "cuda:0"};
    if ((rv = attn_pool_create(c, &g, &rep)) != 0 && rv != ATTN_E_POOL_EXISTS)
        return fail("pool_create", rv, &rep);
    attn_reply_free(&rep);

    /* the arena: registered once, every tensor a view of it */
    char *arena = NULL;
    uint64_t buf = 0;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (cudaMalloc((void **)&arena, ARENA_BYTES) != cudaSuccess ||
        cudaMemset(arena, 0, ARENA_BYTES) != cudaSuccess)
        return fprintf(stderr, "cudaMalloc failed\n"), 1;
    if ((rv = attn_buffer_register_cuda(c, arena, ARENA_BYTES, &buf, &rep)) != 0)
        return fail("buffer_register (cuda_ipc)", rv, &rep);
    attn_reply_free(&rep);

    /* one decode request: T rows in pages 3 and 5, the new row lands at row 20 */
    attn_request_desc req = {.id = "r0", .cache_len = T, .new_len = 1};
    int32_t qo_indptr[2] = {0, 1}, page_indptr[2] = {0, 2}, pages[2] = {3, 5};
    int32_t last_page_len[1] = {T + 1 - 16};
    attn_manifest m = {.num_qo_heads = HQ,
                       .num_requests = 1,
                       .requests = &req,
                       .qo_indptr = qo_indptr,
                       .q_dtype = ATTN_BF16};
    snprintf(m.pool, sizeof m.pool, "%s", g.name);
    m.kv.format = ATTN_KV_CSR;
    m.kv.page_indptr = page_indptr;
    m.kv.page_indices = pages;
    m.kv.num_page_indices = 2;
    m.kv.last_page_len = last_page_len;
    m.mask.kind = ATTN_MASK_CAUSAL;
    snprintf(m.policy.backend, sizeof m.policy.backend, "auto");
    if ((rv = attn_plan(c, &m, &rep)) != 0)
        return fail("plan", rv, &rep);
    uint64_t plan_id = rep.plan_id;
    attn_reply_free(&rep);

    /* the engine's kernels would write these; here a copy on the engine's stream */
    uint16_t q[HQ * D], k[HKV * D], v[HKV * D];
    for (int i = 0; i < HQ * D; i++)
        q[i] = bf16(sinf((float)i));
    for (int i = 0; i < HKV * D; i++) {
        k[i] = bf16(cosf((float)i));
        v[i] = bf16((float)(i % 7) - 3.0f);
    }
    cudaMemcpyAsync(arena + OFF_Q, q, sizeof q, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(arena + OFF_K, k, sizeof k, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(arena + OFF_V, v, sizeof v, cudaMemcpyHostToDevice, s);
    write64((CUstream)s, (CUdeviceptr)(arena + SEM_READY), 1, 0); /* inputs are in place */

    attn_run_args a = {.plan_id = plan_id, .layer = 0, .return_lse = true, .async = true};
    a.q_ref = (attn_tensor_ref){buf, OFF_Q, sizeof q};
    a.k_new_ref = (attn_tensor_ref){buf, OFF_K, sizeof k};
    a.v_new_ref = (attn_tensor_ref){buf, OFF_V, sizeof v};
    a.o_ref = (attn_tensor_ref){buf, OFF_O, sizeof q};
    a.lse_ref = (attn_tensor_ref){buf, OFF_LSE, HQ * sizeof(float)};
    a.wait = (attn_sem_ref){buf, SEM_READY, 1};
    a.sig = (attn_sem_ref){buf, SEM_DONE, 1};
    if ((rv = attn_run(c, &a, &rep)) != 0)
        return fail("run (async, wait/signal)", rv, &rep);
    attn_reply_free(&rep);

    /* everything after this on `s` sees O and LSE; the host only waits here to print */
    wait64((CUstream)s, (CUdeviceptr)(arena + SEM_DONE), 1, CU_STREAM_WAIT_VALUE_GEQ);
    uint16_t o[HQ * D];
    float lse[HQ];
    cudaMemcpyAsync(o, arena + OFF_O, sizeof o, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(lse, arena + OFF_LSE, sizeof lse, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    for (int h = 0; h < HQ; h++) {
        uint32_t bits = (uint32_t)o[h * D] << 16;
        float o0;
        memcpy(&o0, &bits, 4);
        printf("head %d: o[0] = %g, lse = %g\n", h, o0, lse[h]);
    }

    attn_buffer_drop(c, buf, &rep);
    attn_reply_free(&rep);
    attn_pool_drop(c, g.name, &rep);
    attn_reply_free(&rep);
    attn_client_close(c);
    cudaFree(arena);
    cudaStreamDestroy(s);
    return 0;
}
