/* attnd: configuration, server state, event loop; exit 0 after a clean
 * shutdown (SIGTERM/SIGINT), 2 on a configuration error, 1 otherwise.
 * SIGHUP re-reads the configuration and applies the limits that can change
 * live (the reply cap, per-connection in-flight cap, send/idle/drain
 * timeouts). */
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/loop.h"
#include "daemon/notify.h"
#include "daemon/server.h"

/* What a SIGHUP reload needs: the command line (its --config file is read
 * again) and the running configuration and server. */
typedef struct reload_ctx {
    int argc;
    char **argv;
    attnd_config *cfg;
    attn_server *srv;
} reload_ctx;

/* SIGHUP: parse the configuration again; apply the live limits; say which
 * settings would need a restart (they stay as they are). */
static int reload_cb(void *arg, attnd_loop_live *live)
{
    reload_ctx *r = arg;
    attnd_config c;
    attn_error_detail err;
    const char *restart;
    memset(&err, 0, sizeof err);
    attnd_config_defaults(&c);
    if (attnd_config_parse_args(&c, r->argc, r->argv, &err) != 0 ||
        attnd_config_check(&c, &err) != 0) {
        fprintf(stderr, "attnd: SIGHUP: %s: %s (%s)\n", err.field, err.message,
                attn_err_name(err.code));
        return -1;
    }
    if ((restart = attnd_config_restart_setting(r->cfg, &c)) != NULL)
        fprintf(stderr,
                "attnd: SIGHUP: %s changed; that takes a restart, the running value stays\n",
                restart);
    attn_server_set_max_reply(r->srv, c.max_reply);
    r->cfg->max_reply = c.max_reply;
    r->cfg->conn_inflight = c.conn_inflight;
    r->cfg->send_timeout_ms = c.send_timeout_ms;
    r->cfg->idle_timeout_ms = c.idle_timeout_ms;
    r->cfg->drain_timeout_ms = c.drain_timeout_ms;
    live->conn_inflight = (uint32_t)c.conn_inflight;
    live->send_timeout_ms = c.send_timeout_ms;
    live->idle_timeout_ms = c.idle_timeout_ms;
    live->drain_timeout_ms = c.drain_timeout_ms;
    return 0;
}

int main(int argc, char **argv)
{
    reload_ctx rctx;
    attnd_config cfg;
    attn_error_detail err;
    attn_server *srv = NULL;
    attnd_loop *loop = NULL;
    attnd_loop_opts o;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(attnd_config_usage(), stdout);
            return 0;
        }
    }
    memset(&err, 0, sizeof err);
    attnd_config_defaults(&cfg);
    if (attnd_config_parse_args(&cfg, argc, argv, &err) != 0 ||
        attnd_config_check(&cfg, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n%s", err.field, err.message, attn_err_name(err.code),
                attnd_config_usage());
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
    o.max_conns = (uint32_t)cfg.max_conns;
    o.conn_inflight = (uint32_t)cfg.conn_inflight;
    o.send_timeout_ms = cfg.send_timeout_ms;
    o.idle_timeout_ms = cfg.idle_timeout_ms;
    o.drain_timeout_ms = cfg.drain_timeout_ms;
    rctx.argc = argc;
    rctx.argv = argv;
    rctx.cfg = &cfg;
    rctx.srv = srv;
    o.reload = reload_cb;
    o.reload_arg = &rctx;
    if (cfg.tls_cert[0] != '\0') {
        o.tls_cert = cfg.tls_cert;
        o.tls_key = cfg.tls_key;
        o.tls_ca = cfg.tls_ca;
    }
    o.metrics = attn_server_metrics(srv);
    if (attnd_loop_create(&loop, &o, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s\n", err.field, err.message);
        attn_server_destroy(srv);
        return 1;
    }
    fprintf(stderr, "attnd: serving on %s (max frame %zu bytes, %u contexts, %u workers)\n",
            cfg.listen, cfg.max_msg, cfg.contexts, cfg.workers);
    rc = attnd_loop_run(loop);
    if (attnd_loop_destroy(loop) != 0 && rc == 0)
        rc = ATTN_E_INTERNAL; /* a handle left open: not a clean shutdown */
    attn_server_destroy(srv);
    fprintf(stderr, "attnd: stopped%s\n", rc == 0 ? "" : " after an error");
    return rc == 0 ? 0 : 1;
}
