/* attnctl hello, pool create|drop|info, stats, run FILE.json. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"
#include "attnctl.h"
#include "protocol/codec.h"
#include "protocol/json.h"

/* Common flags: --url U, --local; returns the index of the first other argument. */
typedef struct common_opts {
    const char *url;
    int local;
    int pretty;
} common_opts;

static int take_common(int *i, int argc, char **argv, common_opts *o)
{
    if (strcmp(argv[*i], "--url") == 0 && *i + 1 < argc) {
        o->url = argv[++*i];
        return 1;
    }
    if (strcmp(argv[*i], "--local") == 0) {
        o->local = 1;
        return 1;
    }
    if (strcmp(argv[*i], "--compact") == 0) {
        o->pretty = 0;
        return 1;
    }
    return 0;
}

/* Send a typed request and print the reply as JSON; exit status 0 when ok. */
static int simple_call(const common_opts *o, attn_request *req)
{
    actl_conn c;
    attn_buf b = {0};
    attn_error_detail err;
    void *rb = NULL;
    size_t rl = 0;
    attn_reply rep;
    int rc;
    if (actl_open(&c, actl_url(o->url), o->local, NULL) != 0)
        return 1;
    req->v = ATTN_PROTOCOL_VERSION;
    if (req->id == 0)
        req->id = 1;
    if ((rc = attn_request_encode(req, &b, &err)) != 0) {
        fprintf(stderr, "attnctl: %s: %s\n", err.field, err.message);
        actl_close(&c);
        return 1;
    }
    rc = actl_call(&c, b.data, b.len, &rb, &rl);
    attn_buf_free(&b);
    if (rc != 0) {
        actl_close(&c);
        return 1;
    }
    actl_print_frame(rb, rl, o->pretty);
    putchar('\n');
    memset(&rep, 0, sizeof rep);
    rc = attn_reply_decode(rb, rl, NULL, &rep, &err) == 0 && rep.ok ? 0 : 1;
    free(rb);
    actl_close(&c);
    return rc;
}

int actl_cmd_hello(int argc, char **argv)
{
    common_opts o = {NULL, 0, 1};
    attn_request req;
    for (int i = 1; i < argc; i++) {
        if (!take_common(&i, argc, argv, &o)) {
            fprintf(stderr, "usage: attnctl hello [--url U | --local]\n");
            return 2;
        }
    }
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_HELLO;
    return simple_call(&o, &req);
}

int actl_cmd_stats(int argc, char **argv)
{
    common_opts o = {NULL, 0, 1};
    attn_request req;
    for (int i = 1; i < argc; i++) {
        if (!take_common(&i, argc, argv, &o)) {
            fprintf(stderr, "usage: attnctl stats [--url U]\n");
            return 2;
        }
    }
    memset(&req, 0, sizeof req);
    req.op = ATTN_OP_STATS;
    return simple_call(&o, &req);
}

static const char pool_usage[] =
    "usage: attnctl pool create NAME --layers L --pages N --page-size P --kv-heads H --head-dim D\n"
    "                           [--head-dim-vo D] [--dtype fp32|fp16|bf16] [--layout NHD|HND]\n"
    "                           [--device cpu] [--url U]\n"
    "       attnctl pool drop NAME [--url U]\n"
    "       attnctl pool info NAME [--url U]\n";

int actl_cmd_pool(int argc, char **argv)
{
    common_opts o = {NULL, 0, 1};
    attn_request req;
    attn_pool_geometry *g = &req.geom;
    const char *what, *name;
    memset(&req, 0, sizeof req);
    if (argc < 3) {
        fputs(pool_usage, stderr);
        return 2;
    }
    what = argv[1];
    name = argv[2];
    if (strlen(name) >= ATTN_NAME_MAX) {
        fprintf(stderr, "attnctl: pool name too long\n");
        return 2;
    }
    snprintf(req.pool, sizeof req.pool, "%s", name);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->kv_dtype = ATTN_FP32;
    g->layout = ATTN_NHD;
    attn_error_detail perr;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (take_common(&i, argc, argv, &o))
            continue;
        if (v == NULL) {
            fputs(pool_usage, stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--layers") == 0)
            g->layers = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--pages") == 0)
            g->num_pages = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--page-size") == 0)
            g->page_size = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--kv-heads") == 0)
            g->num_kv_heads = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--head-dim") == 0)
            g->head_dim_qk = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--head-dim-vo") == 0)
            g->head_dim_vo = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--dtype") == 0) {
            if (attn_dtype_parse(v, "--dtype", &g->kv_dtype, &perr) != 0) {
                fprintf(stderr, "attnctl: %s\n", perr.message);
                return 2;
            }
        } else if (strcmp(a, "--layout") == 0) {
            if (attn_layout_parse(v, "--layout", &g->layout, &perr) != 0) {
                fprintf(stderr, "attnctl: %s\n", perr.message);
                return 2;
            }
        } else if (strcmp(a, "--device") == 0) {
            snprintf(g->device, sizeof g->device, "%.15s", v);
            req.has_device = true;
        } else {
            fputs(pool_usage, stderr);
            return 2;
        }
    }
    if (g->head_dim_vo == 0)
        g->head_dim_vo = g->head_dim_qk;
    if (strcmp(what, "create") == 0)
        req.op = ATTN_OP_POOL_CREATE;
    else if (strcmp(what, "drop") == 0)
        req.op = ATTN_OP_POOL_DROP;
    else if (strcmp(what, "info") == 0)
        req.op = ATTN_OP_POOL_INFO;
    else {
        fputs(pool_usage, stderr);
        return 2;
    }
    return simple_call(&o, &req);
}

static const char run_usage[] =
    "usage: attnctl run FILE.json [--url U | --local] [--compact] [--replace | --reuse] "
    "[--keep-going]\n";

/* What `run` does when a pool_create meets a pool of that name. */
typedef enum run_existing { RUN_FAIL = 0, RUN_REPLACE, RUN_REUSE } run_existing;

static int same_geometry(const attn_pool_geometry *a, const attn_pool_geometry *b)
{
    uint32_t avo = a->head_dim_vo ? a->head_dim_vo : a->head_dim_qk;
    uint32_t bvo = b->head_dim_vo ? b->head_dim_vo : b->head_dim_qk;
    return a->layers == b->layers && a->num_pages == b->num_pages && a->page_size == b->page_size &&
           a->num_kv_heads == b->num_kv_heads && a->head_dim_qk == b->head_dim_qk && avo == bvo &&
           a->kv_dtype == b->kv_dtype && a->layout == b->layout;
}

/* Before a pool_create (msgpack `frame`): --replace drops the pool of that
 * name (absent is fine).  Fills *g with the geometry asked for. */
static void before_pool_create(actl_conn *c, run_existing mode, const void *frame, size_t len,
                               attn_pool_geometry *g)
{
    attn_request r;
    attn_error_detail err;
    memset(&r, 0, sizeof r);
    memset(g, 0, sizeof *g);
    if (attn_request_decode(frame, len, NULL, &r, &err) != 0)
        return;
    *g = r.geom;
    if (g->name[0] == '\0')
        snprintf(g->name, sizeof g->name, "%s", r.pool);
    attn_request_free(&r);
    if (mode == RUN_REPLACE && g->name[0] != '\0')
        actl_pool_drop(c, g->name, 1);
}

/* --reuse after E_POOL_EXISTS: the existing pool counts as created when its
 * geometry is the one asked for; its pool_info reply replaces the error in
 * *rb.  Returns 1 when reused. */
static int reuse_pool(actl_conn *c, const attn_pool_geometry *want, size_t index, void **rb,
                      size_t *rl)
{
    attn_request r;
    attn_reply info;
    attn_error_detail err;
    attn_buf b = {0};
    void *ib = NULL;
    size_t il = 0;
    int same;
    memset(&r, 0, sizeof r);
    r.v = ATTN_PROTOCOL_VERSION;
    r.op = ATTN_OP_POOL_INFO;
    r.id = index + 1;
    snprintf(r.pool, sizeof r.pool, "%s", want->name);
    if (attn_request_encode(&r, &b, &err) != 0 || actl_call(c, b.data, b.len, &ib, &il) != 0) {
        attn_buf_free(&b);
        return 0;
    }
    attn_buf_free(&b);
    memset(&info, 0, sizeof info);
    same = attn_reply_decode(ib, il, NULL, &info, &err) == 0 && info.ok &&
           same_geometry(&info.geom, want);
    if (!same) {
        fprintf(stderr,
                "attnctl run: request %zu: pool %s exists with another geometry; not "
                "reused\n",
                index, want->name);
        free(ib);
        return 0;
    }
    fprintf(stderr, "attnctl run: request %zu: pool %s exists with this geometry; reused\n", index,
            want->name);
    free(*rb);
    *rb = ib;
    *rl = il;
    return 1;
}

/* attnctl run FILE.json: one request or an array of requests in JSON form;
 * "plan_id": "last" names the plan of the latest plan/attend reply.  The
 * first error reply stops the run (--keep-going sends the rest) and the
 * exit status is 1 after any error reply.  A pool_create whose pool exists
 * fails unless --replace (drop it first) or --reuse (keep it when its
 * geometry matches), so the same file can run again on one daemon. */
int actl_cmd_run(int argc, char **argv)
{
    common_opts o = {NULL, 0, 1};
    const char *file = NULL;
    json_error_t je;
    json_t *root, *arr;
    attn_json_hints hints;
    actl_conn c;
    uint64_t last_plan = 0;
    int failures = 0, keep_going = 0;
    run_existing existing = RUN_FAIL;
    size_t i;
    json_t *el;

    for (int k = 1; k < argc; k++) {
        if (take_common(&k, argc, argv, &o))
            continue;
        if (strcmp(argv[k], "--replace") == 0 && existing != RUN_REUSE) {
            existing = RUN_REPLACE;
            continue;
        }
        if (strcmp(argv[k], "--reuse") == 0 && existing != RUN_REPLACE) {
            existing = RUN_REUSE;
            continue;
        }
        if (strcmp(argv[k], "--keep-going") == 0) {
            keep_going = 1;
            continue;
        }
        if (file == NULL && argv[k][0] != '-') {
            file = argv[k];
            continue;
        }
        fputs(run_usage, stderr);
        return 2;
    }
    if (file == NULL) {
        fputs(run_usage, stderr);
        return 2;
    }
    root = json_load_file(file, JSON_DECODE_ANY, &je);
    if (root == NULL) {
        fprintf(stderr, "attnctl: %s:%d:%d: %s\n", file, je.line, je.column, je.text);
        return 2;
    }
    if (json_is_array(root)) {
        arr = root;
    } else {
        arr = json_array();
        json_array_append(arr, root);
    }
    if (actl_open(&c, actl_url(o.url), o.local, NULL) != 0) {
        json_decref(root);
        if (arr != root)
            json_decref(arr);
        return 1;
    }
    memset(&hints, 0, sizeof hints);
    printf("[");
    json_array_foreach(arr, i, el)
    {
        attn_buf b = {0};
        attn_error_detail err;
        void *rb = NULL;
        size_t rl = 0;
        char *text;
        json_t *pid, *op, *qd, *kd;
        attn_reply rep;
        attn_pool_geometry want;
        int is_create;

        memset(&err, 0, sizeof err);
        if (i > 0)
            printf(",");
        printf("\n");
        pid = json_object_get(el, "plan_id");
        if (json_is_string(pid) && strcmp(json_string_value(pid), "last") == 0)
            json_object_set_new(el, "plan_id", json_integer((json_int_t)last_plan));
        if (json_object_get(el, "id") == NULL)
            json_object_set_new(el, "id", json_integer((json_int_t)(i + 1)));
        if (json_object_get(el, "v") == NULL)
            json_object_set_new(el, "v", json_integer(1));
        op = json_object_get(el, "op");
        qd = json_object_get(el, "q_dtype");
        kd = json_object_get(el, "kv_dtype");
        if (json_is_string(qd) &&
            attn_dtype_parse(json_string_value(qd), "q_dtype", &hints.q_dtype, NULL) == 0)
            hints.has_q_dtype = true;
        attn_op opv = ATTN_OP_COUNT;
        if (json_is_string(op) && attn_op_from_name(json_string_value(op), &opv) &&
            opv == ATTN_OP_POOL_CREATE) {
            hints.has_kv_dtype = true;
            hints.kv_dtype = ATTN_FP32;
            if (json_is_string(kd))
                attn_dtype_parse(json_string_value(kd), "kv_dtype", &hints.kv_dtype, NULL);
        }
        text = json_dumps(el, JSON_COMPACT);
        if (text == NULL || attn_json_to_msgpack(text, strlen(text), &hints, &b, &err) != 0) {
            printf("{\"ok\": false, \"error\": {\"code\": \"%s\", \"field\": \"%s\", \"message\": "
                   "\"request %zu: not converted to msgpack\"}}",
                   attn_err_name(err.code), err.field, i);
            fprintf(stderr, "attnctl run: request %zu: not converted to msgpack: %s: %s\n", i,
                    err.field, err.message);
            free(text);
            failures++;
            if (!keep_going)
                break;
            continue;
        }
        free(text);
        is_create = json_is_string(op) && strcmp(json_string_value(op), "pool_create") == 0;
        if (is_create)
            before_pool_create(&c, existing, b.data, b.len, &want);
        if (actl_call(&c, b.data, b.len, &rb, &rl) != 0) {
            attn_buf_free(&b);
            failures++;
            break;
        }
        attn_buf_free(&b);
        memset(&rep, 0, sizeof rep);
        if (attn_reply_decode(rb, rl, NULL, &rep, &err) != 0) {
            actl_print_frame(rb, rl, o.pretty);
            fprintf(stderr, "attnctl run: request %zu: reply not decodable: %s\n", i, err.message);
            failures++;
            free(rb);
            if (!keep_going)
                break;
            continue;
        }
        if (!rep.ok && is_create && existing == RUN_REUSE && rep.error.code == ATTN_E_POOL_EXISTS &&
            reuse_pool(&c, &want, i, &rb, &rl))
            rep.ok = true;
        actl_print_frame(rb, rl, o.pretty);
        if (rep.ok) {
            if (rep.plan_id != 0)
                last_plan = rep.plan_id;
        } else {
            failures++;
            fprintf(stderr, "attnctl run: request %zu (%s) failed: %s %s: %s%s\n", i,
                    json_is_string(op) ? json_string_value(op) : "?", attn_err_name(rep.error.code),
                    rep.error.field, rep.error.message,
                    rep.error.code == ATTN_E_POOL_EXISTS
                        ? " (--replace drops it first, --reuse keeps a pool of this geometry)"
                        : "");
        }
        free(rb);
        if (failures > 0 && !keep_going) {
            if (i + 1 < json_array_size(arr))
                fprintf(stderr,
                        "attnctl run: stopped; %zu request(s) not sent (--keep-going sends "
                        "them)\n",
                        json_array_size(arr) - i - 1);
            break;
        }
    }
    printf("\n]\n");
    actl_close(&c);
    if (arr != root)
        json_decref(arr);
    json_decref(root);
    return failures == 0 ? 0 : 1;
}
