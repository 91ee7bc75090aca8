/* attnctl gen: synthetic workloads written as capture files.
 *
 * The workload runs through a private attnd that attnctl starts (--local:
 * the daemon's own code path) with capture on, so the file holds every request with the reply the
 * CPU engine gave: hello, pool_create, kv_write of each request's history,
 * then per step a plan + one run per layer (or a one-shot attend), kv_read
 * of the committed rows and stats.  Phases: decode (T > 0, C = 1), prefill
 * (T = 0 first, then decode), append (T > 0, C in [2, 6]) or mixed.
 * On a terminal, stderr shows the frames sent and the bytes written so far.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attnctl.h"
#include "attn/names.h"
#include "progress.h"

typedef struct gen_opts {
    const char *out;
    const char *kind;
    const char *dist; /* uniform | longtail */
    const char *pool;
    const char *device; /* "cpu" or "cuda:N": where the pool lives */
    uint64_t seed;
    uint32_t requests, steps, layers, kv_heads, qo_heads, head_dim, page_size;
    uint32_t min_len, max_len;
    attn_dtype dtype;
    bool trace;  /* every run asks for CUPTI kernel records (seed 0x0BF) */
    bool verify; /* every run asks for the fp64 CPU recomputation (seed 0x0BG) */
} gen_opts;

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: deterministic across platforms for a given seed */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static uint32_t rng_range(uint64_t *s, uint32_t lo, uint32_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (uint32_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* A history length from the chosen distribution, within [min, max]. */
static uint32_t rng_len(uint64_t *s, const gen_opts *o)
{
    if (strcmp(o->dist, "longtail") == 0) {
        /* exponential with mean a quarter of the range: many short, few long */
        double mean = (o->max_len - o->min_len) / 4.0 + 1.0;
        double x = o->min_len - mean * log(1.0 - rng_unit(s));
        return x > o->max_len ? o->max_len : (uint32_t)x;
    }
    return rng_range(s, o->min_len, o->max_len);
}

static void fill_random(uint64_t *s, void *buf, size_t elems, attn_dtype dt)
{
    for (size_t i = 0; i < elems; i++) {
        float v = (float)(rng_unit(s) * 2.0 - 1.0);
        if (dt == ATTN_FP32) {
            ((float *)buf)[i] = v;
        } else {
            /* a half-precision pattern: round fp32 to bf16, or small fp16 values */
            uint32_t u;
            memcpy(&u, &v, 4);
            ((uint16_t *)buf)[i] = dt == ATTN_BF16 ? (uint16_t)(u >> 16)
                                                   : (uint16_t)(0x3000u + (rng_next(s) & 0x3ffu));
        }
    }
}

typedef struct gen_state {
    actl_conn c;
    uint64_t next_id;
    int failures;
    actl_progress pg;
    uint64_t total_frames; /* what the workload will send, for the progress line */
    const char *out;
} gen_state;

static int send_req(gen_state *g, attn_request *req, attn_reply *rep)
{
    attn_error_detail err;
    int rc;
    req->v = ATTN_PROTOCOL_VERSION;
    req->id = ++g->next_id;
    memset(&err, 0, sizeof err);
    rc = actl_call_typed(&g->c, req, rep, &err);
    if (rc != 0) {
        fprintf(stderr, "attnctl gen: %s request %llu failed: %s %s: %s\n", attn_op_name(req->op),
                (unsigned long long)req->id, attn_err_name(rc), err.field, err.message);
        g->failures++;
    }
    if (g->pg.on) {
        struct stat st;
        char detail[64] = "";
        if (stat(g->out, &st) == 0)
            snprintf(detail, sizeof detail, "%.1f MiB written", (double)st.st_size / 1048576.0);
        actl_progress_show(&g->pg, g->next_id, g->total_frames, "frames", detail);
    }
    return rc;
}

static const char gen_usage[] =
    "usage: attnctl gen --out FILE [--kind decode|prefill|append|mixed] [--seed N] [--pool NAME]\n"
    "                   [--requests B] [--steps S] [--min-len T] [--max-len T]\n"
    "                   [--dist uniform|longtail] [--layers L] [--kv-heads H] [--qo-heads H]\n"
    "                   [--head-dim D] [--page-size P] [--dtype fp32|fp16|bf16] [--device "
    "cpu|cuda:N]\n"
    "                   [--trace] [--verify]   (ask every run for kernel records / an fp64 "
    "check)\n";

static int parse_gen(int argc, char **argv, gen_opts *o)
{
    o->out = NULL;
    o->kind = "mixed";
    o->dist = "uniform";
    o->pool = "gen";
    o->device = "cpu";
    o->seed = 1;
    o->requests = 4;
    o->steps = 3;
    o->layers = 2;
    o->kv_heads = 2;
    o->qo_heads = 4;
    o->head_dim = 32;
    o->page_size = 16;
    o->min_len = 8;
    o->max_len = 96;
    o->dtype = ATTN_FP32;
    o->trace = false;
    o->verify = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--trace") == 0 || strcmp(a, "--verify") == 0) {
            *(a[2] == 't' ? &o->trace : &o->verify) = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        uint32_t *u = NULL;
        if (v == NULL)
            return -1;
        if (strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--kind") == 0)
            o->kind = v;
        else if (strcmp(a, "--dist") == 0)
            o->dist = v;
        else if (strcmp(a, "--pool") == 0)
            o->pool = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--dtype") == 0) {
            if (attn_dtype_parse(v, "--dtype", &o->dtype, NULL) != 0)
                return -1;
        } else if (strcmp(a, "--requests") == 0)
            u = &o->requests;
        else if (strcmp(a, "--steps") == 0)
            u = &o->steps;
        else if (strcmp(a, "--layers") == 0)
            u = &o->layers;
        else if (strcmp(a, "--kv-heads") == 0)
            u = &o->kv_heads;
        else if (strcmp(a, "--qo-heads") == 0)
            u = &o->qo_heads;
        else if (strcmp(a, "--head-dim") == 0)
            u = &o->head_dim;
        else if (strcmp(a, "--page-size") == 0)
            u = &o->page_size;
        else if (strcmp(a, "--min-len") == 0)
            u = &o->min_len;
        else if (strcmp(a, "--max-len") == 0)
            u = &o->max_len;
        else
            return -1;
        if (u != NULL)
            *u = (uint32_t)strtoul(v, NULL, 10);
    }
    if (o->out == NULL || o->requests == 0 || o->steps == 0 || o->layers == 0 || o->kv_heads == 0 ||
        o->qo_heads == 0 || o->qo_heads % o->kv_heads != 0 || o->head_dim == 0 ||
        o->page_size == 0 || o->min_len == 0 || o->max_len < o->min_len || o->requests > 4096 ||
        o->steps > 1000)
        return -1;
    if (strcmp(o->kind, "decode") != 0 && strcmp(o->kind, "prefill") != 0 &&
        strcmp(o->kind, "append") != 0 && strcmp(o->kind, "mixed") != 0)
        return -1;
    if (strcmp(o->dist, "uniform") != 0 && strcmp(o->dist, "longtail") != 0)
        return -1;
    if (o->pool[0] == '\0' || strlen(o->pool) >= ATTN_NAME_MAX || strlen(o->device) >= 16)
        return -1;
    return 0;
}

/* New rows of request b at step s for this workload kind. */
static uint32_t new_len_for(uint64_t *rs, const gen_opts *o, uint32_t T, uint32_t step, int phase0)
{
    if (T == 0) /* prefill: the prompt */
        return rng_range(rs, o->min_len, o->max_len);
    if (strcmp(o->kind, "append") == 0)
        return rng_range(rs, 2, 6);
    if (strcmp(o->kind, "mixed") == 0 && step == 0 && phase0 == 1)
        return rng_range(rs, 2, 6);
    if (strcmp(o->kind, "mixed") == 0 && step > 0 && (rng_next(rs) & 3u) == 0)
        return rng_range(rs, 2, 4);
    return 1;
}

int actl_cmd_gen(int argc, char **argv)
{
    gen_opts o;
    gen_state g;
    uint64_t rs;
    uint32_t B, P, total_pages = 0;
    uint32_t *T, **C, *npages, *first;
    int32_t *perm;
    int *phase0;
    size_t es;
    attn_request req;
    attn_reply rep;
    int rc = 0;

    if (parse_gen(argc, argv, &o) != 0) {
        fputs(gen_usage, stderr);
        return 2;
    }
    B = o.requests;
    P = o.page_size;
    es = attn_dtype_size(o.dtype);
    rs = o.seed * 0x9E3779B97F4A7C15ull + 1;
    T = calloc(B, sizeof *T);
    C = calloc(o.steps, sizeof *C);
    npages = calloc(B, sizeof *npages);
    first = calloc(B, sizeof *first);
    phase0 = calloc(B, sizeof *phase0);
    if (T == NULL || C == NULL || npages == NULL || first == NULL || phase0 == NULL)
        return 1;
    /* lengths first, so every page a request will need is known up front */
    for (uint32_t b = 0; b < B; b++) {
        int ph = strcmp(o.kind, "prefill") == 0  ? 0
                 : strcmp(o.kind, "decode") == 0 ? 2
                 : strcmp(o.kind, "append") == 0 ? 1
                                                 : (int)(rng_next(&rs) % 3u);
        phase0[b] = ph;
        T[b] = ph == 0 ? 0 : rng_len(&rs, &o);
    }
    for (uint32_t s = 0; s < o.steps; s++) {
        C[s] = calloc(B, sizeof **C);
        if (C[s] == NULL)
            return 1;
    }
    for (uint32_t b = 0; b < B; b++) {
        uint32_t L = T[b];
        for (uint32_t s = 0; s < o.steps; s++) {
            C[s][b] = new_len_for(&rs, &o, L, s, phase0[b]);
            L += C[s][b];
        }
        npages[b] = (L + P - 1) / P;
        first[b] = total_pages;
        total_pages += npages[b];
    }
    total_pages += 3; /* unused pages the manifests never name */
    /* a random page permutation: logical blocks are not physical pages */
    perm = malloc(sizeof *perm * total_pages);
    if (perm == NULL)
        return 1;
    for (uint32_t i = 0; i < total_pages; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = total_pages - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rng_next(&rs) % (i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }

    memset(&g, 0, sizeof g);
    g.out = o.out;
    /* hello, pool_create, history per request and layer, per step a plan and
     * a run per layer, kv_read, stats */
    g.total_frames = 2 + (uint64_t)B * o.layers + (uint64_t)o.steps * (o.layers + 1) + 2;
    actl_progress_begin(&g.pg, "gen");
    if (actl_open(&g.c, NULL, 1, o.out) != 0)
        return 1;
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_HELLO;
    send_req(&g, &req, &rep);
    attn_reply_free(&rep);

    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_POOL_CREATE;
    snprintf(req.pool, sizeof req.pool, "%s", o.pool);
    snprintf(req.geom.name, sizeof req.geom.name, "%s", o.pool);
    req.geom.layers = o.layers;
    req.geom.num_pages = total_pages;
    req.geom.page_size = P;
    req.geom.num_kv_heads = o.kv_heads;
    req.geom.head_dim_qk = req.geom.head_dim_vo = o.head_dim;
    req.geom.kv_dtype = o.dtype;
    req.geom.layout = ATTN_NHD;
    snprintf(req.geom.device, sizeof req.geom.device, "%s", o.device);
    req.has_device = true;
    if ((rc = send_req(&g, &req, &rep)) != 0)
        goto done;
    attn_reply_free(&rep);

    /* history: the pages holding each request's first T rows, every layer */
    for (uint32_t b = 0; b < B && rc == 0; b++) {
        uint32_t hp = (T[b] + P - 1) / P;
        size_t pe = (size_t)P * o.kv_heads * o.head_dim;
        void *k, *v;
        if (hp == 0)
            continue;
        k = malloc(pe * hp * es);
        v = malloc(pe * hp * es);
        for (uint32_t l = 0; l < o.layers && k != NULL && v != NULL; l++) {
            fill_random(&rs, k, pe * hp, o.dtype);
            fill_random(&rs, v, pe * hp, o.dtype);
            memset(&req, 0, sizeof req);
            req.op = ATTN_OP_KV_WRITE;
            snprintf(req.kv.pool, sizeof req.kv.pool, "%s", o.pool);
            req.kv.layer = l;
            req.kv.pages = perm + first[b];
            req.kv.num_pages = hp;
            req.kv.k.data = k;
            req.kv.k.len = pe * hp * es;
            req.kv.v.data = v;
            req.kv.v.len = pe * hp * es;
            if ((rc = send_req(&g, &req, &rep)) != 0)
                break;
            attn_reply_free(&rep);
        }
        free(k);
        free(v);
    }

    for (uint32_t s = 0; s < o.steps && rc == 0; s++) {
        attn_request_desc *rq = calloc(B, sizeof *rq);
        int32_t *qo = calloc(B + 1, sizeof *qo), *pind = calloc(B + 1, sizeof *pind);
        int32_t *lpl = calloc(B, sizeof *lpl), *pidx = calloc(total_pages, sizeof *pidx);
        uint32_t nidx = 0, total_q;
        size_t qe, ke;
        void *q = NULL, *kn = NULL, *vn = NULL;
        int one_shot = strcmp(o.kind, "mixed") == 0 && (s % 2) == 1;
        uint64_t plan_id = 0;

        if (rq == NULL || qo == NULL || pind == NULL || lpl == NULL || pidx == NULL) {
            rc = 1;
            goto step_done;
        }
        for (uint32_t b = 0; b < B; b++) {
            uint32_t L = T[b] + C[s][b], n = (L + P - 1) / P;
            snprintf(rq[b].id, sizeof rq[b].id, "r%u", b);
            rq[b].cache_len = T[b];
            rq[b].new_len = C[s][b];
            qo[b + 1] = qo[b] + (int32_t)C[s][b];
            for (uint32_t i = 0; i < n; i++)
                pidx[nidx++] = perm[first[b] + i];
            pind[b + 1] = (int32_t)nidx;
            lpl[b] = (int32_t)(L - (n - 1) * P);
        }
        total_q = (uint32_t)qo[B];
        qe = (size_t)total_q * o.qo_heads * o.head_dim;
        ke = (size_t)total_q * o.kv_heads * o.head_dim;
        q = malloc(qe * es);
        kn = malloc(ke * es);
        vn = malloc(ke * es);
        if (q == NULL || kn == NULL || vn == NULL) {
            rc = 1;
            goto step_done;
        }
        memset(&req, 0, sizeof req);
        req.op = one_shot ? ATTN_OP_ATTEND : ATTN_OP_PLAN;
        snprintf(req.manifest.pool, sizeof req.manifest.pool, "%s", o.pool);
        req.manifest.num_qo_heads = o.qo_heads;
        req.manifest.num_requests = B;
        req.manifest.requests = rq;
        req.manifest.qo_indptr = qo;
        req.manifest.kv.format = ATTN_KV_CSR;
        req.manifest.kv.page_indptr = pind;
        req.manifest.kv.page_indices = pidx;
        req.manifest.kv.num_page_indices = nidx;
        req.manifest.kv.last_page_len = lpl;
        req.manifest.mask.kind = ATTN_MASK_CAUSAL;
        req.manifest.q_dtype = o.dtype;
        snprintf(req.manifest.policy.backend, sizeof req.manifest.policy.backend, "auto");
        if (!one_shot) {
            if ((rc = send_req(&g, &req, &rep)) != 0)
                goto step_done;
            plan_id = rep.plan_id;
            attn_reply_free(&rep);
        }
        for (uint32_t l = 0; l < o.layers; l++) {
            attn_request rr;
            fill_random(&rs, q, qe, o.dtype);
            fill_random(&rs, kn, ke, o.dtype);
            fill_random(&rs, vn, ke, o.dtype);
            if (one_shot) {
                rr = req;
            } else {
                memset(&rr, 0, sizeof rr);
                rr.op = ATTN_OP_RUN;
                rr.run.plan_id = plan_id;
            }
            rr.run.layer = l;
            rr.run.q.data = q;
            rr.run.q.len = qe * es;
            rr.run.k_new.data = kn;
            rr.run.k_new.len = ke * es;
            rr.run.v_new.data = vn;
            rr.run.v_new.len = ke * es;
            rr.run.return_lse = true;
            rr.run.trace = o.trace;
            rr.run.verify = o.verify;
            if ((rc = send_req(&g, &rr, &rep)) != 0)
                goto step_done;
            attn_reply_free(&rep);
        }
        for (uint32_t b = 0; b < B; b++)
            T[b] += C[s][b];
    step_done:
        free(rq);
        free(qo);
        free(pind);
        free(lpl);
        free(pidx);
        free(q);
        free(kn);
        free(vn);
    }

    if (rc == 0) {
        /* the committed rows of request 0, layer 0: replay checks the state too */
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_KV_READ;
        snprintf(req.kv.pool, sizeof req.kv.pool, "%s", o.pool);
        req.kv.pages = perm + first[0];
        req.kv.num_pages = npages[0];
        if (send_req(&g, &req, &rep) == 0)
            attn_reply_free(&rep);
        memset(&req, 0, sizeof req);
        req.op = ATTN_OP_STATS;
        if (send_req(&g, &req, &rep) == 0)
            attn_reply_free(&rep);
    }
done:
    actl_progress_end(&g.pg);
    actl_close(&g.c);
    fprintf(stderr, "attnctl gen: %s: kind %s, %u requests, %u steps, %llu frames%s\n", o.out,
            o.kind, B, o.steps, (unsigned long long)g.next_id,
            g.failures ? " (with failures)" : "");
    for (uint32_t s = 0; s < o.steps; s++)
        free(C[s]);
    free(C);
    free(T);
    free(npages);
    free(first);
    free(phase0);
    free(perm);
    return g.failures == 0 && rc == 0 ? 0 : 1;
}
