/* attnd's metrics and health endpoints over nng's HTTP server (see http.h). */
#include "daemon/http.h"

#include <arpa/inet.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct attnd_http {
    nng_http_server *server;
    nng_url *url;
    const attnd_metrics *m;
    attnd_metrics_text_fn text;
    void *arg;
    int started;
};

static int is_loopback(const char *host)
{
    unsigned char a[16];
    if (strcmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) == 1)
        return memcmp(a, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0;
    return 0;
}

int attnd_http_url(const char *addr, int allow_remote, char *url, size_t cap,
                   attn_error_detail *err)
{
    nng_url *u = NULL;
    int rc = 0;
    if (strncmp(addr, "http://", 7) == 0)
        snprintf(url, cap, "%s", addr);
    else if (strstr(addr, "://") != NULL)
        return attn_error_set(err, ATTN_E_RANGE, "metrics",
                              "'%s': the metrics endpoint speaks plain http://", addr);
    else
        snprintf(url, cap, "http://%s", addr);
    if (nng_url_parse(&u, url) != 0 || u->u_hostname == NULL || u->u_hostname[0] == '\0' ||
        u->u_port == NULL || u->u_port[0] == '\0' || strcmp(u->u_port, "80") == 0 ||
        (u->u_path != NULL && u->u_path[0] != '\0' && strcmp(u->u_path, "/") != 0)) {
        /* nng fills in port 80 when none is given: a port must be explicit */
        rc = attn_error_set(err, ATTN_E_RANGE, "metrics",
                            "'%s' is not HOST:PORT (e.g. 127.0.0.1:9464)", addr);
    } else if (!allow_remote && !is_loopback(u->u_hostname)) {
        rc = attn_error_set(err, ATTN_E_RANGE, "metrics",
                            "'%s' is not a loopback address and the endpoints have no "
                            "authentication; add --metrics-allow-remote 1 to serve it anyway",
                            u->u_hostname);
    }
    nng_url_free(u);
    return rc;
}

/* nng thread: answer with `status` and a text body. */
static void reply(nng_aio *aio, uint16_t status, const char *type, const char *body, size_t len)
{
    nng_http_res *res = NULL;
    int rv;
    if ((rv = nng_http_res_alloc(&res)) != 0 || (rv = nng_http_res_set_status(res, status)) != 0 ||
        (rv = nng_http_res_set_header(res, "Content-Type", type)) != 0 ||
        (rv = nng_http_res_copy_data(res, body, len)) != 0) {
        if (res != NULL)
            nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static attnd_http *handler_ctx(nng_aio *aio)
{
    return nng_http_handler_get_data(nng_aio_get_input(aio, 1));
}

static void on_metrics(nng_aio *aio)
{
    attnd_http *h = handler_ctx(aio);
    char *text = NULL;
    size_t len = 0;
    if (h->text(h->arg, &text, &len) != 0) {
        static const char msg[] = "cannot render the metrics: out of memory\n";
        reply(aio, 500, "text/plain; charset=utf-8", msg, sizeof msg - 1);
        return;
    }
    reply(aio, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void on_live(nng_aio *aio)
{
    static const char msg[] = "live\n";
    reply(aio, 200, "text/plain; charset=utf-8", msg, sizeof msg - 1);
}

static void on_ready(nng_aio *aio)
{
    const attnd_metrics *m = handler_ctx(aio)->m;
    const char *why = atomic_load(&m->draining)         ? "not ready: shutting down\n"
                      : !atomic_load(&m->engines_ready) ? "not ready: engines not initialised\n"
                      : !atomic_load(&m->listening)     ? "not ready: not listening yet\n"
                                                        : NULL;
    if (why != NULL)
        reply(aio, 503, "text/plain; charset=utf-8", why, strlen(why));
    else
        reply(aio, 200, "text/plain; charset=utf-8", "ready\n", 6);
}

static int add(attnd_http *h, const char *path, void (*cb)(nng_aio *))
{
    nng_http_handler *hd = NULL;
    int rv;
    if ((rv = nng_http_handler_alloc(&hd, path, cb)) != 0)
        return rv;
    if ((rv = nng_http_handler_set_method(hd, "GET")) != 0 ||
        (rv = nng_http_handler_set_data(hd, h, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(h->server, hd)) != 0) {
        nng_http_handler_free(hd);
        return rv;
    }
    return 0;
}

int attnd_http_start(attnd_http **out, const char *url, const attnd_metrics *m,
                     attnd_metrics_text_fn text, void *arg, attn_error_detail *err)
{
    attnd_http *h = calloc(1, sizeof *h);
    int rv;
    if (h == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "metrics", "out of memory");
    h->m = m;
    h->text = text;
    h->arg = arg;
    if ((rv = nng_url_parse(&h->url, url)) != 0 ||
        (rv = nng_http_server_hold(&h->server, h->url)) != 0) {
        attnd_http_stop(h);
        return attn_error_set(err, ATTN_E_IO, "metrics", "%s: %s", url, nng_strerror(rv));
    }
    if ((rv = add(h, "/metrics", on_metrics)) != 0 || (rv = add(h, "/health/live", on_live)) != 0 ||
        (rv = add(h, "/health/ready", on_ready)) != 0 ||
        (rv = nng_http_server_start(h->server)) != 0) {
        attnd_http_stop(h);
        return attn_error_set(err, ATTN_E_IO, "metrics", "cannot serve %s: %s", url,
                              nng_strerror(rv));
    }
    h->started = 1;
    *out = h;
    return 0;
}

void attnd_http_stop(attnd_http *h)
{
    if (h == NULL)
        return;
    if (h->server != NULL) {
        if (h->started)
            nng_http_server_stop(h->server);
        nng_http_server_release(h->server); /* frees the handlers it holds */
    }
    if (h->url != NULL)
        nng_url_free(h->url);
    free(h);
}
