/* attnd: configuration, server state, event loop; exit 0 after a clean
 * shutdown (SIGTERM/SIGINT), 2 on a configuration error, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/http.h"
#include "daemon/loop.h"
#include "daemon/notify.h"
#include "daemon/server.h"

int main(int argc, char **argv)
{
    attnd_config cfg;
    attn_error_detail err;
    attn_server *srv = NULL;
    attnd_loop *loop = NULL;
    attnd_loop_opts o;
    attnd_http *http = NULL;
    char metrics_url[300] = "";
    int rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(attnd_config_usage(), stdout);
            return 0;
        }
    }
    memset(&err, 0, sizeof err);
    attnd_config_defaults(&cfg);
    if (attnd_config_parse_args(&cfg, argc, argv, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n%s", err.field, err.message, attn_err_name(err.code),
                attnd_config_usage());
        return 2;
    }
    if (cfg.metrics[0] != '\0' && attnd_http_url(cfg.metrics, cfg.metrics_allow_remote, metrics_url,
                                                 sizeof metrics_url, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n", err.field, err.message, attn_err_name(err.code));
        return 2;
    }
    if (attn_server_create(&srv, &cfg, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n", err.field, err.message, attn_err_name(err.code));
        return 2;
    }
    memset(&o, 0, sizeof o);
    o.url = cfg.listen;
    o.max_msg = cfg.max_msg;
    o.ipc_mode = cfg.ipc_mode;
    o.contexts = cfg.contexts;
    o.workers = cfg.workers;
    o.ready_fd = cfg.ready_fd;
    o.handler = attn_server_handle_cb;
    o.is_cheap = cfg.inline_cheap ? attn_server_is_cheap_cb : NULL;
    o.refuse = attn_server_refuse_cb;
    o.arg = srv;
    o.metrics = attn_server_metrics(srv);
    if (attnd_loop_create(&loop, &o, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s\n", err.field, err.message);
        attn_server_destroy(srv);
        return 1;
    }
    /* the endpoints come up before the listener, so /health/ready can say
     * "not listening yet" rather than nothing */
    if (metrics_url[0] != '\0' && attnd_http_start(&http, metrics_url, o.metrics,
                                                   attn_server_metrics_text_cb, srv, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s\n", err.field, err.message);
        attnd_loop_destroy(loop);
        attn_server_destroy(srv);
        return 1;
    }
    fprintf(stderr, "attnd: serving on %s (max frame %zu bytes, %u contexts, %u workers)\n",
            cfg.listen, cfg.max_msg, cfg.contexts, cfg.workers);
    if (http != NULL)
        fprintf(stderr, "attnd: metrics and health on %s\n", metrics_url);
    rc = attnd_loop_run(loop);
    attnd_http_stop(http);
    if (attnd_loop_destroy(loop) != 0 && rc == 0)
        rc = ATTN_E_INTERNAL; /* a handle left open: not a clean shutdown */
    attn_server_destroy(srv);
    fprintf(stderr, "attnd: stopped%s\n", rc == 0 ? "" : " after an error");
    return rc == 0 ? 0 : 1;
}
