/* attnctl connections: nng REQ socket or the in-process server. */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attnctl.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "protocol/tls.h"

double actl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

const char *actl_url(const char *flag)
{
    const char *env = getenv("ATTN_URL");
    if (flag != NULL)
        return flag;
    return env != NULL && env[0] != '\0' ? env : ATTNCTL_DEFAULT_URL;
}

/* Dial url (blocking); a tls+tcp:// URL takes its PEM files from
 * ATTN_TLS_CERT, ATTN_TLS_KEY, ATTN_TLS_CA (and ATTN_TLS_SERVER_NAME). */
static int dial(nng_socket s, const char *url)
{
    nng_dialer d;
    int rv;
    if ((rv = nng_dialer_create(&d, s, url)) != 0) {
        fprintf(stderr, "attnctl: cannot connect to %s: %s\n", url, nng_strerror(rv));
        return ATTN_E_IO;
    }
    if (strncmp(url, "tls+tcp://", 10) == 0) {
        attn_tls_files f = {getenv("ATTN_TLS_CERT"), getenv("ATTN_TLS_KEY"), getenv("ATTN_TLS_CA"),
                            getenv("ATTN_TLS_SERVER_NAME")};
        attn_error_detail err;
        nng_tls_config *cfg;
        int rc = attn_tls_config_from_files(&cfg, 0, &f, &err);
        if (rc != 0) {
            fprintf(stderr, "attnctl: %s: %s (set ATTN_TLS_CERT, ATTN_TLS_KEY, ATTN_TLS_CA)\n",
                    err.field, err.message);
            return rc;
        }
        rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg);
        if (rv != 0) {
            fprintf(stderr, "attnctl: tls: %s\n", nng_strerror(rv));
            return ATTN_E_IO;
        }
    }
    if ((rv = nng_dialer_start(d, 0)) != 0) {
        fprintf(stderr, "attnctl: no daemon at %s: %s\n", url, nng_strerror(rv));
        return ATTN_E_IO;
    }
    return 0;
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
    if ((rv = dial(c->sock, url)) != 0) {
        nng_close(c->sock);
        return rv;
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
