/* Server-side costs of attnd, in-process (no transport):
 *   plan  B=256, 65,536 CSR page entries: whole attn_server_handle (decode,
 *         validate, select, split, keys, cache, diag, reply encode) and its
 *         parts request decode and manifest validation;
 *   run   decode B=16, T=4096, H_q=32, H_kv=8, d=128, fp32, CPU engine:
 *         request decode, whole handle, engine/exec time from the reply's
 *         diagnostic, reply encode.
 * Prints one JSON object (bench/ipc/run.sh folds it into the results).
 * Usage: server_cost [iterations]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/server.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "protocol/manifest.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[(int)(p * (n - 1))];
}

static void handle_ok(attn_server *s, const attn_buf *f, void **out, size_t *len)
{
    attn_reply rep;
    attn_error_detail e;
    if (attn_server_handle(s, f->data, f->len, out, len) != 0 ||
        attn_reply_decode(*out, *len, NULL, &rep, &e) != 0 || !rep.ok) {
        fprintf(stderr, "server_cost: request failed: %s %s\n", rep.error.field, rep.error.message);
        exit(1);
    }
}

/* A pool and a decode manifest: B requests of T committed rows, C = 1. */
static void make_decode(attn_server *s, const char *pool, uint32_t B, uint32_t T, uint32_t P,
                        uint32_t hq, uint32_t hkv, uint32_t d, attn_dtype kvdt, attn_request *req)
{
    uint32_t per = (T + 1 + P - 1) / P;
    attn_request pc;
    attn_buf f = {0};
    attn_error_detail e;
    void *out;
    size_t len;
    memset(&pc, 0, sizeof pc);
    pc.v = 1;
    pc.id = 1;
    pc.op = ATTN_OP_POOL_CREATE;
    snprintf(pc.pool, sizeof pc.pool, "%s", pool);
    snprintf(pc.geom.name, sizeof pc.geom.name, "%s", pool);
    pc.geom.layers = 1;
    pc.geom.num_pages = B * per;
    pc.geom.page_size = P;
    pc.geom.num_kv_heads = hkv;
    pc.geom.head_dim_qk = pc.geom.head_dim_vo = d;
    pc.geom.kv_dtype = kvdt;
    attn_request_encode(&pc, &f, &e);
    handle_ok(s, &f, &out, &len);
    free(out);
    attn_buf_free(&f);

    memset(req, 0, sizeof *req);
    req->v = 1;
    req->id = 2;
    req->op = ATTN_OP_PLAN;
    snprintf(req->manifest.pool, sizeof req->manifest.pool, "%s", pool);
    req->manifest.num_qo_heads = hq;
    req->manifest.num_requests = B;
    req->manifest.requests = calloc(B, sizeof(attn_request_desc));
    req->manifest.qo_indptr = calloc(B + 1, 4);
    req->manifest.kv.format = ATTN_KV_CSR;
    req->manifest.kv.page_indptr = calloc(B + 1, 4);
    req->manifest.kv.page_indices = calloc((size_t)B * per, 4);
    req->manifest.kv.num_page_indices = B * per;
    req->manifest.kv.last_page_len = calloc(B, 4);
    req->manifest.q_dtype = ATTN_FP32;
    snprintf(req->manifest.policy.backend, sizeof req->manifest.policy.backend, "auto");
    for (uint32_t b = 0; b < B; b++) {
        snprintf(req->manifest.requests[b].id, ATTN_NAME_MAX, "req-%u", b);
        req->manifest.requests[b].cache_len = T;
        req->manifest.requests[b].new_len = 1;
        req->manifest.qo_indptr[b + 1] = (int32_t)(b + 1);
        for (uint32_t i = 0; i < per; i++)
            req->manifest.kv.page_indices[b * per + i] = (int32_t)(b * per + i);
        req->manifest.kv.page_indptr[b + 1] = (int32_t)((b + 1) * per);
        req->manifest.kv.last_page_len[b] = (int32_t)(T + 1 - (per - 1) * P);
    }
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    attnd_config cfg;
    attn_error_detail e;
    attn_server *s;
    attn_request plan, run, dec;
    attn_buf pf = {0}, rf = {0};
    double *t_handle = calloc((size_t)iters, sizeof(double)),
           *t_dec = calloc((size_t)iters, sizeof(double));
    double *t_val = calloc((size_t)iters, sizeof(double)),
           *t_enc = calloc((size_t)iters, sizeof(double));
    double *t_exec = calloc((size_t)iters, sizeof(double));
    void *out;
    size_t len;
    attn_reply rep;
    json_t *res = json_object(), *jp = json_object(), *jr = json_object();
    float *q, *kn;

    attnd_config_defaults(&cfg);
    cfg.engine = ATTND_ENGINE_CPU;
    cfg.pool_budget = 16ull << 30; /* calloc'ed pools stay virtual until written */
    if (attn_server_create(&s, &cfg, &e) != 0) {
        fprintf(stderr, "server_cost: %s\n", e.message);
        return 1;
    }

    /* ---- plan: B = 256, 256 pages each = 65,536 CSR entries ---- */
    make_decode(s, "plan256", 256, 4095, 16, 32, 8, 128, ATTN_FP16, &plan);
    attn_request_encode(&plan, &pf, &e);
    /* three separate loops: interleaving them made each part pay for the
     * others' freed buffers (page faults), and the parts summed to more
     * than the whole */
    /* cold: the first plans into an empty plan table (the heap grows);
     * steady: after the table (256 plans) is full and recycles memory, the
     * regime of a long-running daemon */
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        handle_ok(s, &pf, &out, &len);
        t_val[i] = now_us() - t0;
        free(out);
    }
    json_object_set_new(jp, "handle_cold_p50_us", json_real(pct(t_val, iters, 0.5)));
    json_object_set_new(jp, "handle_cold_p99_us", json_real(pct(t_val, iters, 0.99)));
    for (int i = 0; i < 300; i++) {
        handle_ok(s, &pf, &out, &len);
        free(out);
    }
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        handle_ok(s, &pf, &out, &len);
        t_handle[i] = now_us() - t0;
        free(out);
    }
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        memset(&dec, 0, sizeof dec);
        attn_request_decode(pf.data, pf.len, NULL, &dec, &e);
        t_dec[i] = now_us() - t0;
        attn_request_free(&dec);
    }
    {
        attn_pool_geometry g;
        memset(&g, 0, sizeof g);
        snprintf(g.name, sizeof g.name, "plan256");
        g.layers = 1;
        g.num_pages = 65536;
        g.page_size = 16;
        g.num_kv_heads = 8;
        g.head_dim_qk = g.head_dim_vo = 128;
        g.kv_dtype = ATTN_FP16;
        memset(&dec, 0, sizeof dec);
        attn_request_decode(pf.data, pf.len, NULL, &dec, &e);
        for (int i = 0; i < iters; i++) {
            double t0 = now_us();
            if (attn_manifest_validate(&dec.manifest, &g, &e) != 0) {
                fprintf(stderr, "validate: %s %s\n", e.field, e.message);
                return 1;
            }
            t_val[i] = now_us() - t0;
        }
        attn_request_free(&dec);
    }
    json_object_set_new(jp, "B", json_integer(256));
    json_object_set_new(jp, "page_entries", json_integer(65536));
    json_object_set_new(jp, "frame_bytes", json_integer((json_int_t)pf.len));
    json_object_set_new(jp, "handle_p50_us", json_real(pct(t_handle, iters, 0.5)));
    json_object_set_new(jp, "handle_p99_us", json_real(pct(t_handle, iters, 0.99)));
    json_object_set_new(jp, "decode_p50_us", json_real(pct(t_dec, iters, 0.5)));
    json_object_set_new(jp, "validate_p50_us", json_real(pct(t_val, iters, 0.5)));
    json_object_set_new(res, "plan", jp);

    /* ---- run: decode B=16, T=4096, H_q=32, H_kv=8, d=128, fp32 ---- */
    make_decode(s, "dec16", 16, 4096, 16, 32, 8, 128, ATTN_FP32, &run);
    attn_request_encode(&run, &pf, &e);
    handle_ok(s, &pf, &out, &len);
    attn_reply_decode(out, len, NULL, &rep, &e);
    memset(&dec, 0, sizeof dec);
    dec.v = 1;
    dec.id = 3;
    dec.op = ATTN_OP_RUN;
    dec.run.plan_id = rep.plan_id;
    free(out);
    q = calloc(16 * 32 * 128, 4);
    kn = calloc(16 * 8 * 128, 4);
    for (int i = 0; i < 16 * 32 * 128; i++)
        q[i] = (float)(i % 7) * 0.01f;
    dec.run.q = (attn_bytes){q, 16 * 32 * 128 * 4};
    dec.run.k_new = (attn_bytes){kn, 16 * 8 * 128 * 4};
    dec.run.v_new = (attn_bytes){kn, 16 * 8 * 128 * 4};
    dec.run.return_lse = true;
    attn_request_encode(&dec, &rf, &e);
    for (int i = 0; i < iters / 4 + 1; i++) {
        attn_request r2;
        attn_buf enc = {0};
        double t0 = now_us();
        handle_ok(s, &rf, &out, &len);
        t_handle[i] = now_us() - t0;
        memset(&rep, 0, sizeof rep);
        attn_reply_decode(out, len, NULL, &rep, &e);
        {
            /* the engine's exec time as the diagnostic reports it */
            char *js = NULL;
            json_t *d;
            attn_msgpack_to_json(rep.diag.data, rep.diag.len, 0, false, &js, &e);
            d = js ? json_loads(js, 0, NULL) : NULL;
            t_exec[i] = d ? json_number_value(json_object_get(d, "timing_us")) : 0;
            json_decref(d);
            free(js);
        }
        t0 = now_us();
        attn_reply_encode(&rep, &enc, &e);
        t_enc[i] = now_us() - t0;
        attn_buf_free(&enc);
        free(out);
        t0 = now_us();
        memset(&r2, 0, sizeof r2);
        attn_request_decode(rf.data, rf.len, NULL, &r2, &e);
        t_dec[i] = now_us() - t0;
        attn_request_free(&r2);
    }
    iters = iters / 4 + 1;
    json_object_set_new(jr, "shape", json_string("decode B=16 T=4096 H_q=32 H_kv=8 d=128 fp32"));
    json_object_set_new(jr, "frame_bytes", json_integer((json_int_t)rf.len));
    json_object_set_new(jr, "reply_bytes", json_integer((json_int_t)len));
    json_object_set_new(jr, "handle_p50_us", json_real(pct(t_handle, iters, 0.5)));
    json_object_set_new(jr, "request_decode_p50_us", json_real(pct(t_dec, iters, 0.5)));
    json_object_set_new(jr, "exec_p50_us", json_real(pct(t_exec, iters, 0.5)));
    json_object_set_new(jr, "reply_encode_p50_us", json_real(pct(t_enc, iters, 0.5)));
    json_object_set_new(res, "run", jr);
    {
        char *txt = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        puts(txt);
        free(txt);
    }
    json_decref(res);
    attn_buf_free(&pf);
    attn_buf_free(&rf);
    attn_server_destroy(s);
    return 0;
}
