/* Host cost of handing one pipelined asynchronous run to attnd through
 * libattn (issue 11's "host submit"): the call's own time, p50 and p99, for
 *   prepared  attn_run_submit_prepared (encoded once, fields rewritten)
 *   full      attn_call_async of the same run (encoded every time)
 * on one connection, every run numbered ("order") and by reference into a
 * shm buffer, at most WINDOW replies unread (the step's window of
 * bench/gpu/zc_client.cu).  attnd: a subprocess on the CPU engine
 * (tests/lib/daemon_proc), a small random batch; the runs' GPU side (stream
 * memops) is not here: bench/gpu/zc_client.cu measures the whole submit.
 * Build (after make, which makes the tests/lib objects) and run:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -I. -I$(scripts/deps.sh --nng-prefix)/include \
 *      -o build/bench/c_submit_latency bench/ipc/c_submit_latency.c \
 *      build/obj/tests/lib/{daemon_proc,random_batch,batch_call}.o build/libattn.a \
 *      $(scripts/deps.sh --nng-prefix)/lib/libnng.a -lmbedtls -lmbedx509 -lmbedcrypto \
 *      -lmsgpackc -ljansson -lcrypto -lpthread -lm -ldl -lrt
 *   ATTND=build/attnd build/bench/c_submit_latency [N]
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "attn/client.h"
#include "tests/lib/daemon_proc.h"
#include "tests/lib/random_batch.h"
#include "tests/lib/served_batch.h"

#define WINDOW 64

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

static int g_arrived, g_errors;

static void on_reply(void *arg, int rv, attn_reply *rep)
{
    (void)arg;
    if (rv != 0 && __atomic_fetch_add(&g_errors, 1, __ATOMIC_ACQ_REL) == 0)
        fprintf(stderr, "run failed: %s %s: %s\n", attn_err_name(rv), rep->error.field,
                rep->error.message);
    attn_reply_free(rep);
    free(rep);
    __atomic_fetch_add(&g_arrived, 1, __ATOMIC_RELEASE);
}

static void wait_arrived(int n)
{
    while (__atomic_load_n(&g_arrived, __ATOMIC_ACQUIRE) < n)
        usleep(10);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    attn_daemon_proc d;
    attn_client *c;
    attn_rb rb;
    int32_t *pages;
    uint64_t plan;
    const char *extra[] = {"--engine", "cpu",        "--workers", "1", "--conn-inflight",
                           "256",      "--contexts", "256",       NULL};
    if (n < 100 || attn_daemon_start(&d, NULL, extra) != 0 || attn_client_open(&c, d.url) != 0 ||
        attn_served_batch(c, &rb, 4, 7, "lat", &pages, &plan) != 0)
        return fprintf(stderr, "setup failed (ATTND set?)\n"), 1;

    /* q | k | v | o | lse in one shm buffer */
    size_t off_k = rb.q_bytes, off_v = off_k + rb.k_new_bytes, off_o = off_v + rb.v_new_bytes;
    size_t bytes = off_o + rb.o_elems * 4 + 64;
    char name[64];
    snprintf(name, sizeof name, "/attn-lat-%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        return fprintf(stderr, "shm failed\n"), 1;
    close(fd);
    attn_reply rep;
    uint64_t buf;
    if (attn_buffer_register_shm(c, name, bytes, &buf, &rep) != 0)
        return fprintf(stderr, "register: %s\n", rep.error.message), 1;
    attn_reply_free(&rep);

    attn_run_args a;
    memset(&a, 0, sizeof a);
    a.plan_id = plan;
    a.async = true;
    a.q_ref = (attn_tensor_ref){buf, 0, rb.q_bytes};
    a.k_new_ref = (attn_tensor_ref){buf, off_k, rb.k_new_bytes};
    a.v_new_ref = (attn_tensor_ref){buf, off_v, rb.v_new_bytes};
    a.o_ref = (attn_tensor_ref){buf, off_o, rb.o_elems * 4};
    a.order = 1;
    attn_prepared_run *p;
    attn_error_detail err;
    if (attn_run_prepare(c, &a, &p, &err) != 0)
        return fprintf(stderr, "prepare: %s\n", err.message), 1;

    double *t = malloc(sizeof *t * (size_t)n);
    uint64_t order = 0;
    int sent = 0;
    printf("# libattn pipelined async run submit, %d runs each, window %d, CPU engine, %s\n", n,
           WINDOW, "shm references");
    for (int kind = 0; kind < 2; kind++) {
        for (int i = 0; i < n; i++) {
            if (sent - __atomic_load_n(&g_arrived, __ATOMIC_ACQUIRE) >= WINDOW)
                wait_arrived(sent - WINDOW + 1);
            double t0 = now_us();
            int rv;
            if (kind == 0) {
                attn_run_submit v = {.layer = 0, .order = ++order};
                rv = attn_run_submit_prepared(p, &v, on_reply, NULL);
            } else {
                attn_request req = {.op = ATTN_OP_RUN, .run = a};
                req.run.order = ++order;
                rv = attn_call_async(c, &req, on_reply, NULL);
            }
            t[i] = now_us() - t0;
            if (rv != 0)
                return fprintf(stderr, "submit: %s\n", attn_err_name(rv)), 1;
            sent++;
        }
        wait_arrived(sent);
        qsort(t, (size_t)n, sizeof *t, cmp_d);
        printf("%-9s p50 %.2f us  p99 %.2f us\n", kind == 0 ? "prepared" : "full", t[n / 2],
               t[(size_t)llround(0.99 * (n - 1))]);
    }
    int st = -1;
    attn_run_prepared_free(p);
    attn_buffer_drop(c, buf, &rep);
    attn_reply_free(&rep);
    attn_client_close(c);
    shm_unlink(name);
    attn_daemon_stop(&d, 0, &st);
    attn_daemon_cleanup(&d);
    attn_rb_free(&rb);
    free(pages);
    free(t);
    return g_errors != 0;
}
