/* libattn: typed requests over nng REQ contexts (include/attn/client.h).
 *
 * Every call, synchronous or not, opens its own REQ context on the one
 * socket: contexts are nng's unit of concurrency for REQ, so threads never
 * share a pending request and replies cannot cross.  The request is encoded
 * before the call returns; the reply's nng message becomes the reply's
 * backing buffer (its tensors and diag point into it, zero copy).
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attn/client.h"
#include "attn/names.h"
#include "client/lib/cuda_ipc.h"
#include "protocol/codec.h"
#include "protocol/tls.h"
#include "protocol/wire.h"

struct attn_client {
    nng_socket sock;
    atomic_uint_fast64_t next_id;
    atomic_int timeout_ms;
    atomic_int pipes; /* connections to attnd now (nng pipe events) */
    char url[256];    /* for "no daemon at URL" */
};

/* How long a call waits for a first connection before it says "no daemon"
 * (nng redials every 100 ms or so, so a daemon started just now is found). */
#define ATTN_CONNECT_WAIT_MS 1000

/* A NULL argument: ATTN_E_INVALID naming it, in rep when there is one. */
static int invalid(attn_reply *rep, const char *what)
{
    if (rep != NULL) {
        memset(rep, 0, sizeof *rep);
        attn_error_set(&rep->error, ATTN_E_INVALID, what, "%s is NULL", what);
    }
    return ATTN_E_INVALID;
}

/* nng thread: count the client's connections. */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    attn_client *c = arg;
    (void)p;
    if (ev == NNG_PIPE_EV_ADD_POST)
        atomic_fetch_add(&c->pipes, 1);
    else if (ev == NNG_PIPE_EV_REM_POST)
        atomic_fetch_sub(&c->pipes, 1);
}

static int io_fail(attn_reply *rep, int nrv, const char *what)
{
    rep->ok = false;
    return attn_error_set(&rep->error, ATTN_E_IO, "", "%s: %s", what, nng_strerror(nrv));
}

/* Open the socket and dial url (TLS settings when tls is not NULL). */
static int client_open(attn_client **out, const char *url, const attn_client_tls *tls)
{
    int rv;
    attn_client *c;
    nng_dialer d;
    if (out == NULL)
        return ATTN_E_INVALID;
    *out = NULL;
    if (url == NULL)
        return ATTN_E_INVALID;
    if ((c = calloc(1, sizeof *c)) == NULL)
        return ATTN_E_NOMEM;
    snprintf(c->url, sizeof c->url, "%s", url);
    atomic_init(&c->pipes, 0);
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        free(c);
        return ATTN_E_IO;
    }
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, c);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_cb, c);
    /* replies carry whole O tensors: no 1 MiB receive cap on our side; and
     * never resend a request on our own (a resent plan would plan twice) */
    if ((rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_dialer_create(&d, c->sock, url)) != 0) {
        nng_close(c->sock);
        free(c);
        return rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? ATTN_E_RANGE : ATTN_E_IO;
    }
    if (tls != NULL) {
        attn_tls_files f = {tls->cert, tls->key, tls->ca, tls->server_name};
        attn_error_detail err;
        nng_tls_config *cfg;
        int rc = attn_tls_config_from_files(&cfg, 0, &f, &err);
        if (rc == 0) {
            rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
            nng_tls_config_free(cfg);
            rc = rv == 0 ? 0 : ATTN_E_IO;
        }
        if (rc != 0) {
            nng_close(c->sock);
            free(c);
            return rc;
        }
    }
    if ((rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) != 0) {
        nng_close(c->sock);
        free(c);
        return ATTN_E_IO;
    }
    atomic_init(&c->next_id, 1);
    atomic_init(&c->timeout_ms, 30000);
    *out = c;
    return 0;
}

int attn_client_open(attn_client **out, const char *url)
{
    return client_open(out, url, NULL);
}

int attn_client_open_tls(attn_client **out, const char *url, const attn_client_tls *tls)
{
    if (tls == NULL) {
        if (out != NULL)
            *out = NULL;
        return ATTN_E_INVALID;
    }
    return client_open(out, url, tls);
}

void attn_client_close(attn_client *c)
{
    if (c == NULL)
        return;
    nng_close(c->sock);
    free(c);
}

void attn_client_set_timeout(attn_client *c, int ms)
{
    if (c != NULL)
        atomic_store(&c->timeout_ms, ms);
}

static nng_duration call_timeout(attn_client *c)
{
    int ms = atomic_load(&c->timeout_ms);
    return ms > 0 ? (nng_duration)ms : NNG_DURATION_INFINITE;
}

/* Encode `req` (assigning an id when zero) into a new nng message. */
static int request_msg(attn_client *c, attn_request *req, nng_msg **msg, attn_reply *rep)
{
    attn_buf b;
    int rv;
    if (req->id == 0)
        req->id = atomic_fetch_add(&c->next_id, 1);
    req->v = ATTN_PROTOCOL_VERSION;
    if ((rv = attn_request_encode(req, &b, &rep->error)) != 0)
        return rv;
    if (nng_msg_alloc(msg, 0) != 0) {
        attn_buf_free(&b);
        return attn_error_set(&rep->error, ATTN_E_NOMEM, "", "no memory for the request");
    }
    if (nng_msg_append(*msg, b.data, b.len) != 0) {
        nng_msg_free(*msg);
        attn_buf_free(&b);
        return attn_error_set(&rep->error, ATTN_E_NOMEM, "", "no memory for the request");
    }
    attn_buf_free(&b);
    return 0;
}

static void msg_free(void *p)
{
    nng_msg_free((nng_msg *)p);
}

/* Whether the message's top map has "ok": true: read past a failed decode
 * (which keeps no field), so a client knows whether attnd did what it asked
 * even when the rest of its answer is unreadable. */
static bool reply_says_ok(const void *body, size_t len)
{
    attn_wire_reader r;
    attn_wire_item top, key, val;
    attn_wire_init(&r, body, len);
    if (attn_wire_next(&r, &top) != 0 || top.type != ATTN_WT_MAP)
        return false;
    for (uint32_t i = 0; i < top.len; i++) {
        if (attn_wire_next(&r, &key) != 0)
            return false;
        if (!attn_wire_str_eq(&key, "ok")) {
            if (attn_wire_skip(&r, 64) != 0)
                return false;
            continue;
        }
        return attn_wire_next(&r, &val) == 0 && val.type == ATTN_WT_BOOL && val.b;
    }
    return false;
}

/* Decode the reply message into `rep` (taking the message) and map the
 * outcome to the call's return value; *unreadable (when not NULL) says
 * whether attnd's answer arrived saying ok: true but could not be decoded
 * (an undecodable refusal, ok: false, did nothing on attnd). */
static int finish_reply(nng_msg *msg, uint64_t id, attn_op op, attn_reply *rep, bool *unreadable)
{
    attn_error_detail e;
    int rv = attn_reply_decode(nng_msg_body(msg), nng_msg_len(msg), NULL, rep, &e);
    if (unreadable != NULL)
        *unreadable = rv != 0 && reply_says_ok(nng_msg_body(msg), nng_msg_len(msg));
    if (rv != 0) {
        nng_msg_free(msg);
        rep->ok = false;
        rep->error = e;
        return rv;
    }
    rep->backing = msg;
    rep->backing_free = msg_free;
    if (rep->id != id || (rep->op != ATTN_OP_COUNT && rep->op != op)) {
        rep->ok = false;
        return attn_error_set(&rep->error, ATTN_E_PROTOCOL, "id",
                              "reply %llu (%s) does not answer request %llu (%s)",
                              (unsigned long long)rep->id, attn_op_name(rep->op),
                              (unsigned long long)id, attn_op_name(op));
    }
    return rep->ok ? 0 : (rep->error.code != 0 ? rep->error.code : ATTN_E_INTERNAL);
}

/* Wait (at most ATTN_CONNECT_WAIT_MS, or the call timeout when shorter) for
 * a connection, so that a call with no daemon listening fails at once with
 * "no daemon at URL" instead of after the whole call timeout. */
static int connect_wait_ms(attn_client *c)
{
    int ms = atomic_load(&c->timeout_ms);
    return ms > 0 && ms < ATTN_CONNECT_WAIT_MS ? ms : ATTN_CONNECT_WAIT_MS;
}

/* The "no daemon" error of a call that found no connection within wait ms. */
static int no_daemon(attn_reply *rep, const char *url, int wait)
{
    rep->ok = false;
    return attn_error_set(&rep->error, ATTN_E_IO, "url",
                          "no daemon at %s (no connection within %d ms)", url, wait);
}

static int wait_connected(attn_client *c, attn_reply *rep)
{
    int wait = connect_wait_ms(c);
    for (int t = 0; atomic_load(&c->pipes) <= 0; t += 10) {
        if (t >= wait)
            return no_daemon(rep, c->url, wait);
        nng_msleep(10);
    }
    return 0;
}

/* attn_call, also saying whether a reply arrived that could not be decoded. */
static int call_sync(attn_client *c, attn_request *req, attn_reply *rep, bool *unreadable)
{
    nng_ctx ctx;
    nng_aio *aio;
    nng_msg *msg = NULL;
    int rv, nrv;
    if (rep == NULL)
        return ATTN_E_INVALID;
    if (c == NULL || req == NULL)
        return invalid(rep, c == NULL ? "client" : "request");
    memset(rep, 0, sizeof *rep);
    rep->op = req->op;
    if ((rv = wait_connected(c, rep)) != 0)
        return rv;
    if ((rv = request_msg(c, req, &msg, rep)) != 0)
        return rv;
    /* nng 1.5 has no nng_ctx_sendmsg: a private aio, waited on, does it */
    if ((nrv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_msg_free(msg);
        return io_fail(rep, nrv, "cannot allocate an aio");
    }
    if ((nrv = nng_ctx_open(&ctx, c->sock)) != 0) {
        nng_aio_free(aio);
        nng_msg_free(msg);
        return io_fail(rep, nrv, "cannot open a request context");
    }
    nng_aio_set_timeout(aio, call_timeout(c));
    nng_aio_set_msg(aio, msg);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    if ((nrv = nng_aio_result(aio)) != 0) {
        nng_msg_free(nng_aio_get_msg(aio)); /* a failed send leaves the message with us */
        rv = io_fail(rep, nrv, "cannot send the request");
    } else {
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        if ((nrv = nng_aio_result(aio)) != 0)
            rv = io_fail(rep, nrv, "no reply");
        else
            rv = finish_reply(nng_aio_get_msg(aio), req->id, req->op, rep, unreadable);
    }
    nng_ctx_close(ctx);
    nng_aio_free(aio);
    return rv;
}

int attn_call(attn_client *c, attn_request *req, attn_reply *rep)
{
    return call_sync(c, req, rep, NULL);
}

/* ---- asynchronous calls -------------------------------------------------- */

typedef struct async_call {
    nng_ctx ctx;
    nng_aio *aio;
    bool sent;
    /* > 0: there was no connection when the call began, so the send (which
     * REQ completes only once a connection takes the request) waits this
     * long, not the whole call timeout, before "no daemon at URL" */
    int connect_wait_ms;
    nng_duration recv_timeout;
    char url[256];
    uint64_t id;
    attn_op op;
    attn_reply_cb cb;
    void *arg;
    attn_reply *rep; /* allocated up front: the callback always gets one */
} async_call;

/* Runs on an nng thread after the send, then after the receive. */
static void async_step(void *p)
{
    async_call *ac = p;
    int nrv = nng_aio_result(ac->aio);
    attn_reply *rep = ac->rep;
    int rv;
    if (!ac->sent) {
        if (nrv != 0) {
            nng_msg_free(nng_aio_get_msg(ac->aio)); /* a failed send leaves it with us */
            rv = nrv == NNG_ETIMEDOUT && ac->connect_wait_ms > 0
                     ? no_daemon(rep, ac->url, ac->connect_wait_ms)
                     : io_fail(rep, nrv, "cannot send the request");
            goto done;
        }
        ac->sent = true;
        nng_aio_set_timeout(ac->aio, ac->recv_timeout);
        nng_ctx_recv(ac->ctx, ac->aio);
        return;
    }
    if (nrv != 0) {
        rv = io_fail(rep, nrv, "no reply");
        goto done;
    }
    rv = finish_reply(nng_aio_get_msg(ac->aio), ac->id, ac->op, rep, NULL);
done:
    nng_ctx_close(ac->ctx);
    nng_aio_reap(ac->aio); /* nng_aio_free may not run in its own callback */
    ac->cb(ac->arg, rv, rep);
    free(ac);
}

/* Send the encoded request `msg` (id `id`, operation `op`) on a context of
 * its own; `cb` gets the reply.  Takes `msg` and `rep` in every case. */
static int send_async(attn_client *c, nng_msg *msg, attn_reply *rep, uint64_t id, attn_op op,
                      attn_reply_cb cb, void *arg)
{
    int rv;
    async_call *ac = calloc(1, sizeof *ac);
    if (ac == NULL) {
        nng_msg_free(msg);
        free(rep);
        return ATTN_E_NOMEM;
    }
    rep->op = op;
    ac->rep = rep;
    ac->id = id;
    ac->op = op;
    ac->cb = cb;
    ac->arg = arg;
    ac->recv_timeout = call_timeout(c);
    ac->connect_wait_ms = atomic_load(&c->pipes) <= 0 ? connect_wait_ms(c) : 0;
    snprintf(ac->url, sizeof ac->url, "%s", c->url);
    if (nng_ctx_open(&ac->ctx, c->sock) != 0) {
        rv = ATTN_E_IO;
    } else if (nng_aio_alloc(&ac->aio, async_step, ac) != 0) {
        nng_ctx_close(ac->ctx);
        rv = ATTN_E_NOMEM;
    } else {
        nng_aio_set_timeout(ac->aio, ac->connect_wait_ms > 0 ? (nng_duration)ac->connect_wait_ms
                                                             : ac->recv_timeout);
        nng_aio_set_msg(ac->aio, msg);
        nng_ctx_send(ac->ctx, ac->aio);
        return 0;
    }
    nng_msg_free(msg);
    free(rep);
    free(ac);
    return rv;
}

int attn_call_async(attn_client *c, attn_request *req, attn_reply_cb cb, void *arg)
{
    attn_reply *rep;
    nng_msg *msg = NULL;
    int rv;
    if (c == NULL || req == NULL || cb == NULL)
        return ATTN_E_INVALID;
    if ((rep = calloc(1, sizeof *rep)) == NULL)
        return ATTN_E_NOMEM;
    if ((rv = request_msg(c, req, &msg, rep)) != 0) {
        free(rep);
        return rv;
    }
    return send_async(c, msg, rep, req->id, req->op, cb, arg);
}

/* ---- prepared runs ------------------------------------------------------- */

struct attn_prepared_run {
    attn_client *c;
    attn_buf msg;         /* the encoded run, its per-submit fields in fixed width */
    attn_run_patch patch; /* where those fields are */
};

int attn_run_prepare(attn_client *c, const attn_run_args *a, attn_prepared_run **out,
                     attn_error_detail *err)
{
    attn_prepared_run *p;
    int rv;
    if (out == NULL)
        return attn_error_set(err, ATTN_E_INVALID, "prepared", "prepared is NULL");
    *out = NULL;
    if (c == NULL || a == NULL)
        return attn_error_set(err, ATTN_E_INVALID, c == NULL ? "client" : "run", "%s is NULL",
                              c == NULL ? "client" : "run");
    if ((p = calloc(1, sizeof *p)) == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "no memory for a prepared run");
    /* the id is a placeholder here: every submit takes a fresh one */
    attn_request req = {.op = ATTN_OP_RUN, .v = ATTN_PROTOCOL_VERSION, .id = 0, .run = *a};
    if ((rv = attn_run_request_encode_patchable(&req, &p->msg, &p->patch, err)) != 0) {
        free(p);
        return rv;
    }
    p->c = c;
    *out = p;
    return 0;
}

int attn_run_submit_prepared(attn_prepared_run *p, const attn_run_submit *v, attn_reply_cb cb,
                             void *arg)
{
    nng_msg *msg;
    attn_reply *rep;
    if (p == NULL || v == NULL || cb == NULL)
        return ATTN_E_INVALID;
    /* the order number is there or not since attn_run_prepare: a run that
     * carries one cannot go without it, nor one that does not get one */
    if ((p->patch.order != 0) != (v->order != 0))
        return ATTN_E_RANGE;
    if ((rep = calloc(1, sizeof *rep)) == NULL)
        return ATTN_E_NOMEM;
    if (nng_msg_alloc(&msg, p->msg.len) != 0) {
        free(rep);
        return ATTN_E_NOMEM;
    }
    uint8_t *body = nng_msg_body(msg);
    memcpy(body, p->msg.data, p->msg.len);
    attn_run_values vals = {.id = atomic_fetch_add(&p->c->next_id, 1),
                            .layer = v->layer,
                            .order = v->order,
                            .wait_value = v->wait_value,
                            .signal_value = v->signal_value};
    attn_run_patch_apply(body, &p->patch, &vals);
    return send_async(p->c, msg, rep, vals.id, ATTN_OP_RUN, cb, arg);
}

void attn_run_prepared_free(attn_prepared_run *p)
{
    if (p == NULL)
        return;
    attn_buf_free(&p->msg);
    free(p);
}

/* ---- one call per operation ---------------------------------------------- */

static int call_op(attn_client *c, attn_request *req, attn_reply *rep)
{
    if (c == NULL || rep == NULL)
        return invalid(rep, c == NULL ? "client" : "reply");
    req->v = ATTN_PROTOCOL_VERSION;
    return attn_call(c, req, rep);
}

int attn_hello(attn_client *c, attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_HELLO};
    return call_op(c, &req, rep);
}

int attn_stats(attn_client *c, attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_STATS};
    return call_op(c, &req, rep);
}

int attn_pool_create(attn_client *c, const attn_pool_geometry *g, attn_reply *rep)
{
    if (g == NULL)
        return invalid(rep, "geometry");
    attn_request req = {.op = ATTN_OP_POOL_CREATE, .geom = *g};
    return call_op(c, &req, rep);
}

/* The export map decoder names its fields "export" or "export.*" (so does
 * a duplicated top-level key "export": finish_reply's `unreadable` is set
 * only for a reply that said ok, i.e. attnd made the pool). */
static bool export_field(const char *field)
{
    return strncmp(field, "export", 6) == 0 && (field[6] == '\0' || field[6] == '.');
}

int attn_pool_create_exported(attn_client *c, const attn_pool_geometry *g, attn_reply *rep)
{
    attn_error_detail why;
    attn_reply dropped;
    bool unreadable = false;
    if (g == NULL)
        return invalid(rep, "geometry");
    if (c == NULL || rep == NULL)
        return invalid(rep, c == NULL ? "client" : "reply");
    attn_request req = {.op = ATTN_OP_POOL_CREATE, .geom = *g, .pool_export = true};
    req.v = ATTN_PROTOCOL_VERSION;
    int rc = call_sync(c, &req, rep, &unreadable);
    if (rc == 0 && rep->has_export)
        return 0;
    if (rc == 0) {
        /* an attnd that ignored the flag would leave the client writing nowhere */
        attn_error_set(&why, ATTN_E_PROTOCOL, "export",
                       "the pool_create reply carries no export map");
    } else if (unreadable && export_field(rep->error.field)) {
        why = rep->error;
    } else {
        return rc; /* attnd refused (nothing was made), or no reply came */
    }
    /* attnd made the pool but the caller cannot use it: drop it, so the
     * failed call leaves nothing behind on attnd */
    attn_reply_free(rep);
    int drc = attn_pool_drop(c, g->name, &dropped);
    rep->ok = false;
    rep->op = ATTN_OP_POOL_CREATE;
    if (drc == 0)
        attn_error_set(&rep->error, ATTN_E_PROTOCOL, why.field, "%s; pool '%s' was dropped again",
                       why.message, g->name);
    else
        attn_error_set(&rep->error, ATTN_E_PROTOCOL, why.field,
                       "%s; pool '%s' stays on attnd (pool_drop failed: %s)", why.message, g->name,
                       dropped.error.message);
    attn_reply_free(&dropped);
    return ATTN_E_PROTOCOL;
}

int attn_pool_export_map_shm(const attn_pool_export *e, void **base, attn_error_detail *err)
{
    if (e == NULL || base == NULL)
        return attn_error_set(err, ATTN_E_INVALID, e == NULL ? "export" : "base", "NULL argument");
    *base = NULL;
    if (e->kind != ATTN_BUFFER_SHM)
        return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "export.kind",
                              "the pool is exported as %s, not shm: open its handle with "
                              "cudaIpcOpenMemHandle",
                              attn_buffer_kind_name(e->kind));
    int fd = shm_open(e->name, O_RDWR, 0);
    if (fd < 0)
        return attn_error_set(err, ATTN_E_IO, "export.name", "cannot open %s: %s", e->name,
                              strerror(errno));
    void *p = mmap(NULL, (size_t)e->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the object */
    if (p == MAP_FAILED)
        return attn_error_set(err, ATTN_E_IO, "export.bytes", "cannot map %llu bytes of %s: %s",
                              (unsigned long long)e->bytes, e->name, strerror(errno));
    *base = p;
    return 0;
}

/* pool_drop and pool_info name one pool. */
static int pool_op(attn_client *c, attn_op op, const char *pool, attn_reply *rep)
{
    attn_request req = {.op = op};
    size_t n;
    if (pool == NULL || rep == NULL)
        return invalid(rep, pool == NULL ? "pool" : "reply");
    n = strlen(pool);
    if (n == 0 || n >= sizeof req.pool) {
        memset(rep, 0, sizeof *rep);
        return attn_error_set(&rep->error, ATTN_E_RANGE, "pool", "pool names have 1 to %zu bytes",
                              sizeof req.pool - 1);
    }
    memcpy(req.pool, pool, n + 1);
    return call_op(c, &req, rep);
}

int attn_pool_drop(attn_client *c, const char *pool, attn_reply *rep)
{
    return pool_op(c, ATTN_OP_POOL_DROP, pool, rep);
}

int attn_pool_info(attn_client *c, const char *pool, attn_reply *rep)
{
    return pool_op(c, ATTN_OP_POOL_INFO, pool, rep);
}

int attn_kv_write(attn_client *c, const attn_kv_args *a, attn_reply *rep)
{
    if (a == NULL)
        return invalid(rep, "kv");
    attn_request req = {.op = ATTN_OP_KV_WRITE, .kv = *a};
    return call_op(c, &req, rep);
}

int attn_kv_read(attn_client *c, const attn_kv_args *a, attn_reply *rep)
{
    if (a == NULL)
        return invalid(rep, "kv");
    attn_request req = {.op = ATTN_OP_KV_READ, .kv = *a};
    return call_op(c, &req, rep);
}

int attn_plan(attn_client *c, const attn_manifest *m, attn_reply *rep)
{
    if (m == NULL)
        return invalid(rep, "manifest");
    attn_request req = {.op = ATTN_OP_PLAN, .manifest = *m};
    return call_op(c, &req, rep);
}

int attn_run(attn_client *c, const attn_run_args *a, attn_reply *rep)
{
    if (a == NULL)
        return invalid(rep, "run");
    attn_request req = {.op = ATTN_OP_RUN, .run = *a};
    return call_op(c, &req, rep);
}

int attn_attend(attn_client *c, const attn_manifest *m, const attn_run_args *a, attn_reply *rep)
{
    if (m == NULL || a == NULL)
        return invalid(rep, m == NULL ? "manifest" : "run");
    attn_request req = {.op = ATTN_OP_ATTEND, .manifest = *m, .run = *a};
    return call_op(c, &req, rep);
}

int attn_buffer_register_shm(attn_client *c, const char *name, uint64_t bytes, uint64_t *buf,
                             attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_BUFFER_REGISTER};
    size_t n;
    int rv;
    if (name == NULL || buf == NULL || rep == NULL)
        return invalid(rep, name == NULL ? "name" : buf == NULL ? "buf" : "reply");
    n = strlen(name);
    if (n == 0 || n >= sizeof req.buffer.name) {
        memset(rep, 0, sizeof *rep);
        return attn_error_set(&rep->error, ATTN_E_RANGE, "name", "name must have 1 to %zu bytes",
                              sizeof req.buffer.name - 1);
    }
    req.buffer.kind = ATTN_BUFFER_SHM;
    memcpy(req.buffer.name, name, n + 1);
    req.buffer.bytes = bytes;
    rv = call_op(c, &req, rep);
    *buf = rv == 0 ? rep->buf : 0;
    return rv;
}

int attn_buffer_register_cuda(attn_client *c, const void *dev_ptr, uint64_t bytes, uint64_t *buf,
                              attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_BUFFER_REGISTER};
    attn_cuda_ipc_desc desc;
    int rv;
    if (c == NULL || buf == NULL || rep == NULL)
        return invalid(rep, c == NULL ? "client" : buf == NULL ? "buf" : "reply");
    *buf = 0;
    memset(rep, 0, sizeof *rep);
    if ((rv = attn_cuda_ipc_describe(dev_ptr, bytes, &desc, &rep->error)) != 0)
        return rv;
    req.buffer.kind = ATTN_BUFFER_CUDA_IPC;
    memcpy(req.buffer.handle, desc.handle, sizeof req.buffer.handle);
    req.buffer.offset = desc.offset;
    req.buffer.bytes = bytes;
    snprintf(req.buffer.device, sizeof req.buffer.device, "cuda:%d", desc.ordinal);
    rv = call_op(c, &req, rep);
    *buf = rv == 0 ? rep->buf : 0;
    return rv;
}

int attn_buffer_drop(attn_client *c, uint64_t buf, attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_BUFFER_DROP};
    req.buffer.buf = buf;
    return call_op(c, &req, rep);
}

int attn_run_status_get(attn_client *c, uint64_t run_seq, attn_reply *rep)
{
    attn_request req = {.op = ATTN_OP_RUN_STATUS};
    req.run_seq = run_seq;
    return call_op(c, &req, rep);
}
