/* attnctl bench: closed-loop load from N concurrent clients, each with its
 * own REQ socket sending its next request as soon as the previous reply
 * arrived.  Prints requests/s and RTT p50/p99.  With --echo the target is a
 * bare nng echo server (bench/ipc/echo.c): the same frames are sent and the
 * replies are not decoded, so the two figures differ only by attnd's work.
 *
 * --op decode creates its own pool (bench-<tag>, a name no other run shares)
 * and drops it when done, after an error or on Ctrl-C, so runs of different
 * shapes follow each other on one daemon.  Progress goes to stderr when it
 * is a terminal; stdout carries only the result line (or JSON).
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "attnctl.h"
#include "progress.h"
#include "protocol/codec.h"

typedef struct bench_client {
    const char *url;
    const void *frame;
    size_t len;
    uint32_t requests;
    double *rtt;
    int errors;
    int echo;
    _Atomic uint64_t *done;    /* requests answered, all clients */
    _Atomic uint32_t *running; /* clients still sending */
} bench_client;

static void *client_main(void *arg)
{
    bench_client *bc = arg;
    nng_socket s;
    if (nng_req0_open(&s) != 0) {
        bc->errors = (int)bc->requests;
        atomic_fetch_sub(bc->running, 1);
        return NULL;
    }
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 60000);
    nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0);
    if (nng_dial(s, bc->url, NULL, 0) != 0) {
        bc->errors = (int)bc->requests;
        nng_close(s);
        atomic_fetch_sub(bc->running, 1);
        return NULL;
    }
    for (uint32_t i = 0; i < bc->requests && !actl_interrupted(); i++) {
        void *buf = NULL;
        size_t sz = 0;
        double t0 = actl_now_us();
        if (nng_send(s, (void *)bc->frame, bc->len, 0) != 0 ||
            nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) != 0) {
            bc->errors++;
            continue;
        }
        bc->rtt[i] = actl_now_us() - t0;
        if (!bc->echo) {
            attn_reply rep;
            attn_error_detail err;
            memset(&rep, 0, sizeof rep);
            if (attn_reply_decode(buf, sz, NULL, &rep, &err) != 0 || !rep.ok)
                bc->errors++;
        }
        nng_free(buf, sz);
        atomic_fetch_add(bc->done, 1);
    }
    nng_close(s);
    atomic_fetch_sub(bc->running, 1);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Set up a decode workload on the daemon (pool `pool`, history, plan) and
 * encode the run frame the clients send.  B, T, heads and d come from the
 * flags.  *created tells whether the pool exists now (the caller drops it). */
static int decode_frame(actl_conn *c, const char *pool, uint32_t B, uint32_t T, uint32_t hq,
                        uint32_t hkv, uint32_t d, attn_buf *out, int *created)
{
    const uint32_t P = 16, per = (T + 1 + P - 1) / P;
    attn_request req;
    attn_reply rep;
    attn_error_detail err;
    attn_request_desc *rq = calloc(B, sizeof *rq);
    int32_t *qo = calloc(B + 1, 4), *pind = calloc(B + 1, 4), *lpl = calloc(B, 4);
    int32_t *pidx = calloc((size_t)B * per, 4);
    float *q = calloc((size_t)B * hq * d, 4), *kn = calloc((size_t)B * hkv * d, 4);
    int rc;

    if (rq == NULL || qo == NULL || pind == NULL || lpl == NULL || pidx == NULL || q == NULL ||
        kn == NULL) {
        rc = ATTN_E_NOMEM;
        goto done;
    }
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_POOL_CREATE;
    snprintf(req.pool, sizeof req.pool, "%s", pool);
    snprintf(req.geom.name, sizeof req.geom.name, "%s", pool);
    req.geom.layers = 1;
    req.geom.num_pages = B * per;
    req.geom.page_size = P;
    req.geom.num_kv_heads = hkv;
    req.geom.head_dim_qk = req.geom.head_dim_vo = d;
    req.geom.kv_dtype = ATTN_FP32;
    rc = actl_call_typed(c, &req, &rep, &err);
    attn_reply_free(&rep);
    if (rc != 0) {
        fprintf(stderr, "attnctl bench: pool_create %s: %s %s: %s\n", pool, attn_err_name(rc),
                err.field, err.message);
        goto done;
    }
    *created = 1;
    for (uint32_t i = 0; i < B * hq * d; i++)
        q[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (uint32_t i = 0; i < B * hkv * d; i++)
        kn[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    for (uint32_t b = 0; b < B; b++) {
        snprintf(rq[b].id, sizeof rq[b].id, "b%u", b);
        rq[b].cache_len = T;
        rq[b].new_len = 1;
        qo[b + 1] = (int32_t)(b + 1);
        for (uint32_t i = 0; i < per; i++)
            pidx[b * per + i] = (int32_t)(b * per + i);
        pind[b + 1] = (int32_t)((b + 1) * per);
        lpl[b] = (int32_t)(T + 1 - (per - 1) * P);
    }
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_PLAN;
    snprintf(req.manifest.pool, sizeof req.manifest.pool, "%s", pool);
    req.manifest.num_qo_heads = hq;
    req.manifest.num_requests = B;
    req.manifest.requests = rq;
    req.manifest.qo_indptr = qo;
    req.manifest.kv.format = ATTN_KV_CSR;
    req.manifest.kv.page_indptr = pind;
    req.manifest.kv.page_indices = pidx;
    req.manifest.kv.num_page_indices = B * per;
    req.manifest.kv.last_page_len = lpl;
    req.manifest.q_dtype = ATTN_FP32;
    snprintf(req.manifest.policy.backend, sizeof req.manifest.policy.backend, "auto");
    rc = actl_call_typed(c, &req, &rep, &err);
    if (rc == 0) {
        attn_request run;
        memset(&run, 0, sizeof run);
        run.v = ATTN_PROTOCOL_VERSION;
        run.op = ATTN_OP_RUN;
        run.id = 7;
        run.run.plan_id = rep.plan_id;
        run.run.q.data = q;
        run.run.q.len = (uint64_t)B * hq * d * 4;
        run.run.k_new.data = kn;
        run.run.k_new.len = (uint64_t)B * hkv * d * 4;
        run.run.v_new.data = kn;
        run.run.v_new.len = (uint64_t)B * hkv * d * 4;
        run.run.return_lse = true;
        rc = attn_request_encode(&run, out, &err);
    } else {
        fprintf(stderr, "attnctl bench: plan: %s %s\n", err.field, err.message);
    }
    attn_reply_free(&rep);
done:
    free(rq);
    free(qo);
    free(pind);
    free(lpl);
    free(pidx);
    free(q);
    free(kn);
    return rc;
}

int actl_cmd_bench(int argc, char **argv)
{
    const char *url = NULL, *op = "hello", *frame_url = NULL;
    uint32_t clients = 4, requests = 200, B = 16, T = 4096, hq = 32, hkv = 8, d = 128;
    int echo = 0, json = 0;
    attn_buf frame = {0};
    bench_client *bc;
    pthread_t *th;
    double *all, t0, wall;
    uint64_t n = 0, errors = 0;
    _Atomic uint64_t done = 0;
    _Atomic uint32_t running = 0;
    char pool[ATTN_NAME_MAX] = "";
    actl_conn setup;
    int have_setup = 0, created = 0, rc = 0;
    actl_progress pg;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--echo") == 0) {
            echo = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        i++;
        if (strcmp(a, "--url") == 0)
            url = v;
        else if (strcmp(a, "--setup-url") == 0)
            frame_url = v;
        else if (strcmp(a, "--op") == 0)
            op = v;
        else if (strcmp(a, "--clients") == 0)
            clients = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--requests") == 0)
            requests = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--batch") == 0)
            B = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--cache-len") == 0)
            T = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--qo-heads") == 0)
            hq = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--kv-heads") == 0)
            hkv = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--head-dim") == 0)
            d = (uint32_t)strtoul(v, NULL, 10);
        else {
            fprintf(
                stderr,
                "usage: attnctl bench [--url U] [--clients N] [--requests M] [--op "
                "hello|stats|decode]\n"
                "       [--batch B] [--cache-len T] [--qo-heads H] [--kv-heads H] [--head-dim D]\n"
                "       [--echo --setup-url ATTND_URL] [--json]\n");
            return 2;
        }
    }
    if (clients == 0 || clients > 1024 || requests == 0 || B == 0 || hq == 0 || hkv == 0 ||
        d == 0 || hq % hkv != 0)
        return 2;
    url = actl_url(url);
    if (strcmp(op, "hello") == 0 || strcmp(op, "stats") == 0) {
        attn_request req;
        attn_error_detail err;
        memset(&req, 0, sizeof req);
        req.v = ATTN_PROTOCOL_VERSION;
        req.op = strcmp(op, "hello") == 0 ? ATTN_OP_HELLO : ATTN_OP_STATS;
        req.id = 1;
        if (attn_request_encode(&req, &frame, &err) != 0)
            return 1;
    } else if (strcmp(op, "decode") == 0) {
        /* the decode frame is built against a real attnd (its plan id), also for --echo */
        char tag[24];
        actl_interrupt_catch();
        actl_unique_tag(tag, sizeof tag);
        snprintf(pool, sizeof pool, "bench-%s", tag);
        if (actl_open(&setup, echo ? actl_url(frame_url) : url, 0, NULL) != 0)
            return 1;
        have_setup = 1;
        if (decode_frame(&setup, pool, B, T, hq, hkv, d, &frame, &created) != 0) {
            rc = 1;
            goto out;
        }
    } else {
        fprintf(stderr, "attnctl bench: unknown --op %s\n", op);
        return 2;
    }
    bc = calloc(clients, sizeof *bc);
    th = calloc(clients, sizeof *th);
    all = calloc((size_t)clients * requests, sizeof *all);
    if (bc == NULL || th == NULL || all == NULL || actl_interrupted()) {
        free(bc);
        free(th);
        free(all);
        rc = 1;
        goto out;
    }
    actl_progress_begin(&pg, "bench");
    atomic_store(&running, clients);
    t0 = actl_now_us();
    for (uint32_t i = 0; i < clients; i++) {
        bc[i].url = url;
        bc[i].frame = frame.data;
        bc[i].len = frame.len;
        bc[i].requests = requests;
        bc[i].rtt = all + (size_t)i * requests;
        bc[i].echo = echo;
        bc[i].done = &done;
        bc[i].running = &running;
        if (pthread_create(&th[i], NULL, client_main, &bc[i]) != 0) {
            th[i] = 0;
            bc[i].errors = (int)requests;
            atomic_fetch_sub(&running, 1);
        }
    }
    while (atomic_load(&running) > 0) {
        actl_progress_show(&pg, atomic_load(&done), (uint64_t)clients * requests, "requests", NULL);
        usleep(50000);
    }
    actl_progress_end(&pg);
    for (uint32_t i = 0; i < clients; i++) {
        if (th[i] == 0)
            continue;
        pthread_join(th[i], NULL);
        errors += (uint64_t)bc[i].errors;
    }
    wall = actl_now_us() - t0;
    for (size_t i = 0; i < (size_t)clients * requests; i++)
        if (all[i] > 0)
            all[n++] = all[i];
    qsort(all, n, sizeof *all, cmp_d);
    if (json)
        printf("{\"target\": \"%s\", \"op\": \"%s\", \"frame_bytes\": %zu, \"clients\": %u, "
               "\"requests\": %llu, \"errors\": %llu, \"rps\": %.1f, \"p50_us\": %.1f, \"p99_us\": "
               "%.1f}\n",
               echo ? "echo" : "attnd", op, frame.len, clients, (unsigned long long)n,
               (unsigned long long)errors, n / (wall / 1e6), n ? all[n / 2] : 0.0,
               n ? all[(size_t)(n * 0.99)] : 0.0);
    else
        printf(
            "%s %s: %zu-byte frames, %u clients x %u requests: %llu ok, %llu errors, %.0f req/s, "
            "RTT p50 %.1f us, p99 %.1f us\n",
            echo ? "echo" : "attnd", op, frame.len, clients, requests, (unsigned long long)n,
            (unsigned long long)errors, n / (wall / 1e6), n ? all[n / 2] : 0.0,
            n ? all[(size_t)(n * 0.99)] : 0.0);
    free(bc);
    free(th);
    free(all);
    rc = errors == 0 ? 0 : 1;
out:
    attn_buf_free(&frame);
    if (created && actl_pool_drop(&setup, pool, 0) != 0)
        rc = 1;
    if (have_setup)
        actl_close(&setup);
    if (actl_interrupted()) {
        fprintf(stderr, "attnctl bench: interrupted%s\n", created ? "; its pool was dropped" : "");
        return 130;
    }
    return rc;
}
