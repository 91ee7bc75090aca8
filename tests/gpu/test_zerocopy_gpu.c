/* Zero-copy across two processes on one GPU (issue 11): a client process
 * (the child) allocates an arena with cudaMalloc, shares it with
 * cudaIpcGetMemHandle, writes q / k_new / v_new into it with its own stream
 * and signals a semaphore; the attnd side (the parent: the cuda_decode
 * engine instance and its IPC module, exactly what attnd runs) opens the
 * handle, runs decode attention reading the inputs and writing O and LSE in
 * the arena (device pointers, no host copy), waiting on the client's
 * semaphore on its stream and signalling its own after the last kernel.
 *
 * Checked: the cross-process run equals the inline (host-pointer) run bit
 * for bit, with a wait pending before the client wrote anything; the open
 * is cached per allocation; a bad handle and out-of-range offsets are
 * refused with their field; a wait nobody satisfies is released from the
 * control stream; a client killed while attnd waits on it leaves attnd
 * serving (release, run completes, next run fine).  Measured: first and
 * cached open, the engine-run hand-off per layer (client signal -> attnd
 * wait, kernels, attnd signal -> client wait), a bare memop ping-pong, the
 * release latency; and whether the device runs under MPS.
 *
 * No cmocka: one line per check, "zerocopy: ok" or "FAIL" last, exit 0/1.
 * Run it once without and once under MPS (scripts/device-zerocopy.sh).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/ipc.h"
#include "tests/lib/random_batch.h"

#define ITERS 200

static int g_fail;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            g_fail = 1;                                                                            \
        }                                                                                          \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The arena: inputs | O | LSE | semaphores, 256-aligned. */
typedef struct layout {
    size_t q, k, v, o, lse, ready, done, bytes;
} layout;

static size_t up256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static layout lay_out(const attn_rb *rb)
{
    layout l;
    size_t qs = attn_dtype_size(rb->m.q_dtype);
    l.q = 0;
    l.k = up256(l.q + rb->q_bytes);
    l.v = up256(l.k + rb->k_new_bytes);
    l.o = up256(l.v + rb->v_new_bytes);
    l.lse = up256(l.o + rb->o_elems * qs);
    l.ready = up256(l.lse + rb->lse_elems * 4);
    l.done = l.ready + 64;
    l.bytes = up256(l.done + 64) + (1u << 20); /* a tail past the last field */
    return l;
}

/* B = 64 decode requests, T in [512, 1024], H_q 32, H_kv 8, d 128, bf16, page 16. */
static int make_batch(attn_rb *rb)
{
    enum { B = 64 };
    int64_t T[B], C[B];
    uint64_t s = 11;
    for (int b = 0; b < B; b++) {
        T[b] = attn_rb_range(&s, 512, 1024);
        C[b] = 1;
    }
    attn_rb_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.num_requests = B;
    sp.max_cache_len = 1024;
    sp.phase_mask = 1u << ATTN_PHASE_DECODE;
    sp.num_qo_heads = 32;
    sp.num_kv_heads = 8;
    sp.head_dim_qk = 128;
    sp.head_dim_vo = 128;
    sp.page_size = 16;
    sp.spare_pages = 3;
    sp.kv_dtype = ATTN_BF16;
    sp.q_dtype = ATTN_BF16;
    sp.layout = ATTN_NHD;
    sp.format = ATTN_KV_CSR;
    sp.mask_kind = ATTN_MASK_CAUSAL;
    return attn_rb_make_lengths(rb, &sp, T, C, 2026);
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) {
            perror("write");
            exit(3);
        }
        c += k;
        n -= (size_t)k;
    }
}

static int recv_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Messages parent -> child. */
enum { MSG_CORRECT = 1, MSG_PINGPONG_RUN, MSG_PINGPONG_BARE, MSG_HANG, MSG_QUIT };

/* ---- the client (child) ---------------------------------------------------- */

static int child_main(int fd)
{
    attn_rb rb;
    attn_error_detail err;
    attn_cuda_ipc *ipc = NULL;
    cudaStream_t cs;
    char *arena = NULL;
    cudaIpcMemHandle_t h;
    if (make_batch(&rb) != 0)
        return 2;
    layout l = lay_out(&rb);
    if (cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&arena, l.bytes) != cudaSuccess ||
        cudaMemset(arena, 0, l.bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess ||
        cudaIpcGetMemHandle(&h, arena) != cudaSuccess || attn_cuda_ipc_create(0, &ipc, &err) != 0) {
        fprintf(stderr, "child: CUDA set-up failed\n");
        return 2;
    }
    send_all(fd, &h, sizeof h);
    for (;;) {
        int msg;
        uint64_t base;
        if (recv_all(fd, &msg, sizeof msg) != 0 || msg == MSG_QUIT)
            break;
        if (recv_all(fd, &base, sizeof base) != 0)
            break;
        if (msg == MSG_CORRECT) {
            /* attnd's wait is already pending: write the inputs late */
            usleep(20000);
            cudaMemcpyAsync(arena + l.q, rb.q, rb.q_bytes, cudaMemcpyHostToDevice, cs);
            cudaMemcpyAsync(arena + l.k, rb.k_new, rb.k_new_bytes, cudaMemcpyHostToDevice, cs);
            cudaMemcpyAsync(arena + l.v, rb.v_new, rb.v_new_bytes, cudaMemcpyHostToDevice, cs);
            attn_cuda_ipc_signal(ipc, cs, arena + l.ready, base, &err);
            attn_cuda_ipc_wait(ipc, cs, arena + l.done, base, &err);
            cudaStreamSynchronize(cs);
            double ok = 1;
            send_all(fd, &ok, sizeof ok);
        } else if (msg == MSG_PINGPONG_RUN || msg == MSG_PINGPONG_BARE) {
            /* per layer: signal ready = k, wait until done >= k, all on the
             * GPU; the host only waits at the end */
            double t0 = now_us();
            for (uint64_t k = 1; k <= ITERS; k++) {
                attn_cuda_ipc_signal(ipc, cs, arena + l.ready, base + k, &err);
                attn_cuda_ipc_wait(ipc, cs, arena + l.done, base + k, &err);
            }
            cudaError_t e = cudaStreamSynchronize(cs);
            double us = (now_us() - t0) / ITERS;
            if (e != cudaSuccess)
                us = -1;
            send_all(fd, &us, sizeof us);
        } else if (msg == MSG_HANG) {
            /* never signal: attnd waits until it releases itself, or we die */
            pause();
        }
    }
    attn_cuda_ipc_destroy(ipc);
    cudaFree(arena);
    attn_rb_free(&rb);
    return 0;
}

/* ---- the attnd side (parent) ------------------------------------------------ */

typedef struct hang_run {
    attn_engine *e;
    attn_engine_plan *ep;
    attn_run_io a;
    int rv;
    double t_done;
} hang_run;

static void *hang_thread(void *arg)
{
    hang_run *h = arg;
    attn_error_detail err;
    h->rv = attn_engine_run(h->e, h->ep, &h->a, NULL, &err);
    h->t_done = now_us();
    return NULL;
}

static int parent_main(int fd, pid_t child)
{
    attn_rb rb;
    attn_error_detail err;
    attn_engine *e = NULL;
    attn_engine_config cfg = {.device = 0, .num_threads = 0, .tuning = NULL};
    cudaIpcMemHandle_t h;
    char why[200];
    memset(&err, 0, sizeof err);
    if (make_batch(&rb) != 0)
        return 2;
    layout l = lay_out(&rb);
    int mps = attn_cuda_mps_state(0, why, sizeof why);
    printf("mps: %d (%s)\n", mps, why);
    printf("CUDA_MODULE_LOADING=%s\n", getenv("CUDA_MODULE_LOADING"));
    if (attn_engine_create(attn_cuda_engine_ops(), &cfg, &e, &err) != 0) {
        printf("FAIL engine: %s\n", err.message);
        return 1;
    }
    attn_cuda_ipc *ipc = attn_cuda_engine_ipc(e, why, sizeof why);
    CHECK(ipc != NULL, "no ipc: %s", why);
    if (ipc == NULL)
        return 1;
    if (recv_all(fd, &h, sizeof h) != 0) {
        printf("FAIL child died before sharing its arena\n");
        return 1;
    }

    /* open: first and cached */
    void *arena = NULL, *again = NULL;
    double t0 = now_us();
    int rv = attn_cuda_ipc_open(ipc, (const uint8_t *)&h, 0, l.bytes, &arena, &err);
    double t_open = now_us() - t0;
    CHECK(rv == 0, "open: %s %s", err.field, err.message);
    t0 = now_us();
    rv = attn_cuda_ipc_open(ipc, (const uint8_t *)&h, l.o, l.bytes - l.o, &again, &err);
    double t_reopen = now_us() - t0;
    CHECK(rv == 0 && (char *)again == (char *)arena + l.o, "cached open at an offset");
    CHECK(attn_cuda_ipc_open_count(ipc) == 1, "one allocation open, not %u",
          attn_cuda_ipc_open_count(ipc));
    printf("ipc open: first %.1f us, cached %.2f us\n", t_open, t_reopen);
    attn_cuda_ipc_close(ipc, again);
    CHECK(attn_cuda_ipc_open_count(ipc) == 1, "still open after one of two closes");
    /* refusals, with their fields */
    {
        uint8_t junk[64];
        void *p = NULL;
        for (int i = 0; i < 64; i++)
            junk[i] = (uint8_t)(i * 37 + 5);
        memset(&err, 0, sizeof err);
        rv = attn_cuda_ipc_open(ipc, junk, 0, 4096, &p, &err);
        CHECK(rv == ATTN_E_BUFFER_UNSUPPORTED && strcmp(err.field, "handle") == 0,
              "junk handle: %d %s", rv, err.field);
        printf("junk handle refused: %s\n", err.message);
        rv = attn_cuda_ipc_open(ipc, (const uint8_t *)&h, l.bytes + (64u << 20), 16, &p, &err);
        CHECK(rv == ATTN_E_BUFFER_RANGE && strcmp(err.field, "offset") == 0, "offset past: %d %s",
              rv, err.field);
        rv = attn_cuda_ipc_open(ipc, (const uint8_t *)&h, 0, (size_t)1 << 40, &p, &err);
        CHECK(rv == ATTN_E_BUFFER_RANGE && strcmp(err.field, "bytes") == 0, "bytes past: %d %s", rv,
              err.field);
        CHECK(attn_cuda_ipc_open_count(ipc) == 1, "refusals opened nothing more");
    }

    /* the pool, the plan and the inline reference run */
    attn_pool_geometry g = rb.g;
    snprintf(g.device, sizeof g.device, "cuda:0");
    void *dk = NULL, *dv = NULL;
    int32_t *all = malloc(sizeof *all * g.num_pages);
    for (uint32_t p = 0; p < g.num_pages; p++)
        all[p] = (int32_t)p;
    CHECK(attn_cuda_pool_alloc(0, rb.k_bytes, &dk, &err) == 0, "pool");
    CHECK(attn_cuda_pool_alloc(0, rb.v_bytes, &dv, &err) == 0, "pool");
    CHECK(attn_cuda_pool_pages(&g, 0, dk, 0, all, g.num_pages, rb.k, 1, &err) == 0, "upload");
    CHECK(attn_cuda_pool_pages(&g, 0, dv, 1, all, g.num_pages, rb.v, 1, &err) == 0, "upload");
    attn_engine_plan *ep = NULL;
    rv = attn_engine_plan_new(e, &rb.m, &g, &ep, &err);
    CHECK(rv == 0, "plan: %s", err.message);
    if (rv != 0)
        return 1;
    size_t qs = attn_dtype_size(rb.m.q_dtype);
    void *o_ref = malloc(rb.o_elems * qs), *o_got = malloc(rb.o_elems * qs);
    float *lse_ref = malloc(rb.lse_elems * 4), *lse_got = malloc(rb.lse_elems * 4);
    void *kd[1] = {dk}, *vd[1] = {dv};
    attn_pool_view pv = {.geom = &g, .platform = ATTN_PLATFORM_CUDA, .device = 0, .k = kd, .v = vd};
    attn_run_io a = {.pool = &pv,
                     .layer = 0,
                     .q = rb.q,
                     .k_new = rb.k_new,
                     .v_new = rb.v_new,
                     .o = o_ref,
                     .lse = lse_ref,
                     .commit = false};
    attn_exec_report rep;
    rv = attn_engine_run(e, ep, &a, &rep, &err);
    CHECK(rv == 0, "inline run: %s", err.message);
    printf("inline run: %.1f us of kernels (cuda events)\n", rep.engine_us);
    uint64_t nan = 0;
    for (size_t i = 0; i < rb.o_elems; i++) {
        uint16_t v = ((const uint16_t *)o_ref)[i];
        nan += (v & 0x7f80) == 0x7f80 && (v & 0x7f) != 0;
    }
    CHECK(nan == 0, "%llu NaN in the inline O", (unsigned long long)nan);

    /* the same run by reference into the client's arena, waiting on the
     * client's semaphore before it wrote anything */
    char *ar = arena;
    attn_run_io d = a;
    d.q = ar + l.q;
    d.k_new = ar + l.k;
    d.v_new = ar + l.v;
    d.o = ar + l.o;
    d.lse = (float *)(void *)(ar + l.lse);
    d.on_device = (1u << ATTN_IO_Q) | (1u << ATTN_IO_K_NEW) | (1u << ATTN_IO_V_NEW) |
                  (1u << ATTN_IO_O) | (1u << ATTN_IO_LSE);
    d.wait_dev = ar + l.ready;
    d.signal_dev = ar + l.done;
    {
        int msg = MSG_CORRECT;
        uint64_t base = 1;
        double ok = 0;
        d.wait_value = d.signal_value = 1;
        send_all(fd, &msg, sizeof msg);
        send_all(fd, &base, sizeof base);
        t0 = now_us();
        rv = attn_engine_run(e, ep, &d, &rep, &err);
        double t_run = now_us() - t0;
        CHECK(rv == 0, "run by reference: %s %s", err.field, err.message);
        CHECK(recv_all(fd, &ok, sizeof ok) == 0 && ok == 1, "the client saw attnd's signal");
        cudaMemcpy(o_got, ar + l.o, rb.o_elems * qs, cudaMemcpyDeviceToHost);
        cudaMemcpy(lse_got, ar + l.lse, rb.lse_elems * 4, cudaMemcpyDeviceToHost);
        CHECK(memcmp(o_got, o_ref, rb.o_elems * qs) == 0, "O by reference == O inline");
        CHECK(memcmp(lse_got, lse_ref, rb.lse_elems * 4) == 0, "LSE by reference == LSE inline");
        printf("cross-process run: bit-identical to inline; %.1f ms with the client's 20 ms "
               "late write\n",
               t_run / 1000);
    }

    /* hand-off per layer with the engine's run: ITERS runs, each waiting on
     * the client's ready = base + k and signalling done = base + k */
    {
        int msg = MSG_PINGPONG_RUN;
        uint64_t base = 100;
        double client_us = 0, kern = 0;
        send_all(fd, &msg, sizeof msg);
        send_all(fd, &base, sizeof base);
        t0 = now_us();
        for (uint64_t k = 1; k <= ITERS && !g_fail; k++) {
            d.wait_value = d.signal_value = base + k;
            rv = attn_engine_run(e, ep, &d, &rep, &err);
            CHECK(rv == 0, "run %llu: %s", (unsigned long long)k, err.message);
            kern += rep.engine_us;
        }
        double attnd_us = (now_us() - t0) / ITERS;
        CHECK(recv_all(fd, &client_us, sizeof client_us) == 0 && client_us > 0, "client ping-pong");
        printf("per layer with attention (B=64, T 512..1024, Hq32 Hkv8 d128 bf16): client step "
               "%.1f us, attnd run %.1f us wall, kernels %.1f us => hand-off overhead %.1f us\n",
               client_us, attnd_us, kern / ITERS, client_us - kern / ITERS);
    }

    /* the same with deferred runs, as attnd's async queue drives them: run
     * k+1 is enqueued before run k is completed, so the device does not wait
     * for the host between layers */
    {
        int msg = MSG_PINGPONG_RUN;
        uint64_t base = 500, prev = 0;
        double client_us = 0, kern = 0;
        int deferred = 0;
        attn_exec_report crep;
        send_all(fd, &msg, sizeof msg);
        send_all(fd, &base, sizeof base);
        t0 = now_us();
        for (uint64_t k = 1; k <= ITERS && !g_fail; k++) {
            attn_run_io dd = d;
            dd.defer = true;
            dd.commit = true; /* deferral needs a committed run: no restore after the fact */
            dd.wait_value = dd.signal_value = base + k;
            rv = attn_engine_run(e, ep, &dd, &rep, &err);
            CHECK(rv == 0, "deferred run %llu: %s", (unsigned long long)k, err.message);
            deferred += rep.deferred;
            if (k > 1) {
                CHECK(attn_engine_complete(e, prev, &crep, &err) == 0, "complete: %s", err.message);
                kern += crep.engine_us;
            }
            prev = rep.ticket;
        }
        CHECK(attn_engine_complete(e, prev, &crep, &err) == 0, "complete: %s", err.message);
        kern += crep.engine_us;
        double attnd_us = (now_us() - t0) / ITERS;
        CHECK(deferred == ITERS, "every run deferred (%d of %d)", deferred, ITERS);
        CHECK(recv_all(fd, &client_us, sizeof client_us) == 0 && client_us > 0,
              "client ping-pong (deferred)");
        cudaMemcpy(o_got, ar + l.o, rb.o_elems * qs, cudaMemcpyDeviceToHost);
        CHECK(memcmp(o_got, o_ref, rb.o_elems * qs) == 0, "deferred O == inline O");
        printf("per layer, deferred runs (attnd's async queue): client step %.1f us, attnd "
               "%.1f us wall, kernels %.1f us => hand-off overhead %.1f us\n",
               client_us, attnd_us, kern / ITERS, client_us - kern / ITERS);
    }

    /* the bare semaphore ping-pong: no kernels, attnd's side on its own stream */
    {
        int msg = MSG_PINGPONG_BARE;
        uint64_t base = 1000;
        double client_us = 0;
        cudaStream_t ps;
        cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking);
        send_all(fd, &msg, sizeof msg);
        send_all(fd, &base, sizeof base);
        for (uint64_t k = 1; k <= ITERS; k++) {
            attn_cuda_ipc_wait(ipc, ps, ar + l.ready, base + k, &err);
            attn_cuda_ipc_signal(ipc, ps, ar + l.done, base + k, &err);
        }
        CHECK(cudaStreamSynchronize(ps) == cudaSuccess, "bare ping-pong");
        CHECK(recv_all(fd, &client_us, sizeof client_us) == 0 && client_us > 0,
              "client bare ping-pong");
        printf("bare semaphore round trip (client -> attnd -> client, GPU only): %.1f us\n",
               client_us);
        cudaStreamDestroy(ps);
    }

    /* a wait nobody satisfies, released from the control stream */
    {
        hang_run hr;
        pthread_t th;
        memset(&hr, 0, sizeof hr);
        hr.e = e;
        hr.ep = ep;
        hr.a = d;
        hr.a.wait_value = 1ull << 40;
        hr.a.signal_value = 1ull << 40;
        pthread_create(&th, NULL, hang_thread, &hr);
        usleep(50000);
        CHECK(hr.t_done == 0, "the run waits");
        t0 = now_us();
        CHECK(attn_cuda_ipc_release(ipc, hr.a.wait_dev, hr.a.wait_value) == 0, "release");
        pthread_join(th, NULL);
        CHECK(hr.rv == 0, "the released run completes");
        printf("release of a pending wait from the control stream: %.1f us to completion\n",
               hr.t_done - t0);
    }

    /* the client dies while attnd waits on it: release, complete, serve on */
    {
        hang_run hr;
        pthread_t th;
        int msg = MSG_HANG, st = 0;
        uint64_t base = 5000;
        memset(&hr, 0, sizeof hr);
        hr.e = e;
        hr.ep = ep;
        hr.a = d;
        hr.a.wait_value = hr.a.signal_value = 1ull << 41;
        send_all(fd, &msg, sizeof msg);
        send_all(fd, &base, sizeof base);
        pthread_create(&th, NULL, hang_thread, &hr);
        usleep(30000);
        kill(child, SIGKILL);
        waitpid(child, &st, 0);
        /* what attnd does when the connection closes */
        attn_cuda_ipc_release(ipc, hr.a.wait_dev, hr.a.wait_value);
        pthread_join(th, NULL);
        CHECK(hr.rv == 0, "the run of a killed client completes after the release: %d", hr.rv);
        attn_cuda_ipc_close(ipc, arena);
        CHECK(attn_cuda_ipc_open_count(ipc) == 0, "closed after the last close");
        a.o = o_got;
        a.lse = lse_got;
        rv = attn_engine_run(e, ep, &a, &rep, &err);
        CHECK(rv == 0 && memcmp(o_got, o_ref, rb.o_elems * qs) == 0,
              "attnd serves on after the client died");
        printf("client killed mid-wait: released, run completed, next inline run identical\n");
    }
    attn_engine_plan_release(ep);
    attn_cuda_pool_free(0, dk);
    attn_cuda_pool_free(0, dv);
    attn_engine_destroy(e);
    free(all);
    free(o_ref);
    free(o_got);
    free(lse_ref);
    free(lse_got);
    attn_rb_free(&rb);
    return 0;
}

int main(void)
{
    int sp[2];
    /* eager loading before any CUDA call, in both processes (the lazy
     * default deadlocks a first launch queued behind a pending wait) */
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) {
        perror("socketpair");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        close(sp[0]);
        _exit(child_main(sp[1]));
    }
    close(sp[1]);
    signal(SIGPIPE, SIG_IGN);
    int rc = parent_main(sp[0], pid);
    {
        int msg = MSG_QUIT;
        (void)!write(sp[0], &msg, sizeof msg);
    }
    close(sp[0]);
    waitpid(pid, NULL, WNOHANG);
    printf("%s\n", rc == 0 && !g_fail ? "zerocopy: ok" : "zerocopy: FAIL");
    return rc == 0 && !g_fail ? 0 : 1;
}
