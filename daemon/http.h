/* attnd's operator endpoints on `--metrics ADDR`, served by nng's own HTTP
 * server (no other dependency):
 *
 *   GET /metrics       the Prometheus text exposition (daemon/metrics.h)
 *   GET /health/live   200 while the process serves HTTP at all
 *   GET /health/ready  200 when the engines are up, the listener is bound
 *                      and shutdown has not begun; 503 with the reason else
 *
 * The handlers run on nng's threads and only read atomics and call the
 * metrics text callback, which must be thread-safe.
 */
#ifndef ATTN_DAEMON_HTTP_H
#define ATTN_DAEMON_HTTP_H

#include <stddef.h>

#include "attn/error.h"
#include "daemon/metrics.h"

/* Produce the /metrics body (malloc'ed); 0 or an attn_err. */
typedef int (*attnd_metrics_text_fn)(void *arg, char **text, size_t *len);

typedef struct attnd_http attnd_http;

/* Turn a --metrics value ("HOST:PORT" or "http://HOST:PORT") into the http://
 * URL it binds (`url`, `cap` bytes) and check it: a non-loopback host needs
 * `allow_remote` (the endpoints have no authentication).  E_RANGE with the
 * field "metrics" otherwise. */
int attnd_http_url(const char *addr, int allow_remote, char *url, size_t cap,
                   attn_error_detail *err);

/* Bind `url` (from attnd_http_url) and start serving; E_IO naming "metrics". */
int attnd_http_start(attnd_http **out, const char *url, const attnd_metrics *m,
                     attnd_metrics_text_fn text, void *arg, attn_error_detail *err);

/* Stop serving and free everything (NULL is a no-op). */
void attnd_http_stop(attnd_http *h);

#endif
