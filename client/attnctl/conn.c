/* attnctl connections: nng REQ socket or the in-process server. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attnctl.h"
#include "protocol/codec.h"
#include "protocol/json.h"

double actl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void actl_unique_tag(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, cap, "%x%05lx", (unsigned)getpid() & 0xfffffu,
             (unsigned long)((ts.tv_sec * 1000 + ts.tv_nsec / 1000000) & 0xfffffu));
}

int actl_pool_drop(actl_conn *c, const char *name, int quiet_unknown)
{
    attn_request req;
    attn_reply rep;
    attn_error_detail err;
    int rc;
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.op = ATTN_OP_POOL_DROP;
    req.id = 1;
    snprintf(req.pool, sizeof req.pool, "%s", name);
    rc = actl_call_typed(c, &req, &rep, &err);
    attn_reply_free(&rep);
    if (rc != 0 && !(quiet_unknown && rc == ATTN_E_UNKNOWN_POOL))
        fprintf(stderr, "attnctl: pool_drop %s: %s: %s\n", name, attn_err_name(rc), err.message);
    return rc;
}

const char *actl_url(const char *flag)
{
    const char *env = getenv("ATTN_URL");
    if (flag != NULL)
        return flag;
    return env != NULL && env[0] != '\0' ? env : ATTNCTL_DEFAULT_URL;
}

int actl_open(actl_conn *c, const char *url, int local, const char *capture)
{
    int rv;
    memset(c, 0, sizeof *c);
    if (local) {
        attnd_config cfg;
        attn_error_detail err;
        attnd_config_defaults(&cfg);
        /* like attnd's default: the CUDA engine too when built and a device answers */
        cfg.engine = ATTND_ENGINE_AUTO;
        if (capture != NULL)
            snprintf(cfg.capture, sizeof cfg.capture, "%s", capture);
        if (attn_server_create(&c->local, &cfg, &err) != 0) {
            fprintf(stderr, "attnctl: local server: %s: %s\n", err.field, err.message);
            return ATTN_E_IO;
        }
        return 0;
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        fprintf(stderr, "attnctl: nng_req0_open: %s\n", nng_strerror(rv));
        return ATTN_E_IO;
    }
    nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, 60000);
    nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, 60000);
    nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0);
    if ((rv = nng_dial(c->sock, url, NULL, 0)) != 0) {
        fprintf(stderr, "attnctl: cannot connect to %s: %s\n", url, nng_strerror(rv));
        nng_close(c->sock);
        return ATTN_E_IO;
    }
    c->open = 1;
    return 0;
}

int actl_call(actl_conn *c, const void *req, size_t len, void **rep, size_t *rep_len)
{
    void *buf = NULL;
    size_t sz = 0;
    int rv;
    if (c->local != NULL)
        return attn_server_handle(c->local, req, len, rep, rep_len);
    if ((rv = nng_send(c->sock, (void *)req, len, 0)) != 0 ||
        (rv = nng_recv(c->sock, &buf, &sz, NNG_FLAG_ALLOC)) != 0) {
        fprintf(stderr, "attnctl: %s\n", nng_strerror(rv));
        return ATTN_E_IO;
    }
    *rep = malloc(sz + 1);
    if (*rep == NULL) {
        nng_free(buf, sz);
        return ATTN_E_NOMEM;
    }
    memcpy(*rep, buf, sz);
    nng_free(buf, sz);
    *rep_len = sz;
    return 0;
}

void actl_close(actl_conn *c)
{
    if (c->local != NULL)
        attn_server_destroy(c->local);
    if (c->open)
        nng_close(c->sock);
    memset(c, 0, sizeof *c);
}

static void free_backing(void *p)
{
    free(p);
}

int actl_call_typed(actl_conn *c, attn_request *req, attn_reply *rep, attn_error_detail *err)
{
    attn_buf b = {0};
    void *rb = NULL;
    size_t rl = 0;
    int rc;
    memset(rep, 0, sizeof *rep);
    if ((rc = attn_request_encode(req, &b, err)) != 0)
        return rc;
    rc = actl_call(c, b.data, b.len, &rb, &rl);
    attn_buf_free(&b);
    if (rc != 0)
        return attn_error_set(err, rc, "", "transport failure");
    if ((rc = attn_reply_decode(rb, rl, NULL, rep, err)) != 0) {
        free(rb);
        return rc;
    }
    rep->backing = rb;
    rep->backing_free = free_backing;
    if (!rep->ok) {
        *err = rep->error;
        return rep->error.code != 0 ? rep->error.code : ATTN_E_INTERNAL;
    }
    return 0;
}

void actl_print_frame(const void *buf, size_t len, int pretty)
{
    char *js = NULL;
    attn_error_detail err;
    if (attn_msgpack_to_json(buf, len, 0, pretty != 0, &js, &err) != 0) {
        printf("{\"error\": \"cannot render reply: %s\"}\n", err.message);
        return;
    }
    fputs(js, stdout);
    free(js);
}
