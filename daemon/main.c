/* attnd: configuration, server state, event loop; exit 0 after a clean
 * shutdown (SIGTERM/SIGINT), 2 on a configuration error, 1 otherwise.
 * SIGHUP re-reads the configuration and applies the limits that can change
 * live (the reply cap, per-connection in-flight cap, send/idle/drain
 * timeouts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn/client.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/http.h"
#include "daemon/loop.h"
#include "daemon/notify.h"
#include "daemon/server.h"
#include "protocol/codec.h"

/* The id of the watchdog's self-probe (a hello), recognisable in a debug log. */
#define ATTND_WATCHDOG_PROBE_ID 0x5744u /* "WD" */

/* --help and --version answer before anything else is parsed, exit 0. */
static int early_flag(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(attnd_config_usage(), stdout);
            return 1;
        }
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            printf("attnd %s (build %s)\n", attn_server_version(), attn_server_build_id());
            return 1;
        }
    }
    return 0;
}

static const char *engine_name(attnd_engine_pref e)
{
    return e == ATTND_ENGINE_CPU ? "cpu" : e == ATTND_ENGINE_CUDA ? "cuda" : "auto";
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What a SIGHUP reload needs: the command line (its --config file is read
 * again) and the running configuration and server. */
typedef struct reload_ctx {
    int argc;
    char **argv;
    attnd_config *cfg;
    attn_server *srv;
    attnd_log *log;
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
        attnd_log_write(r->log, ATTND_LOG_ERROR, "SIGHUP: %s: %s (%s); nothing changed", err.field,
                        err.message, attn_err_name(err.code));
        return -1;
    }
    if ((restart = attnd_config_restart_setting(r->cfg, &c)) != NULL)
        attnd_log_write(r->log, ATTND_LOG_WARN,
                        "SIGHUP: %s changed; that takes a restart, the running value stays",
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
    attnd_log_opts lo;
    attnd_log *log;
    attnd_metrics *m;
    attn_request probe;
    attn_buf probe_frame = {0};
    double t_start = mono_s();
    attnd_http *http = NULL;
    char metrics_url[300] = "";
    int rc;

    if (early_flag(argc, argv))
        return 0;
    /* Every kernel loads when the CUDA runtime initialises, not at its first
     * launch: a lazily loaded kernel queued behind a pending cross-process
     * semaphore wait deadlocks both processes (measured, ZERO-COPY.md §2).
     * Set before any CUDA call; it overrides a LAZY from the environment. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    memset(&err, 0, sizeof err);
    attnd_config_defaults(&cfg);
    if (attnd_config_parse_args(&cfg, argc, argv, &err) != 0 ||
        attnd_config_check(&cfg, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n%s", err.field, err.message, attn_err_name(err.code),
                attnd_config_usage());
        return 2;
    }
    if (cfg.metrics[0] != '\0' && attnd_http_url(cfg.metrics, cfg.metrics_allow_remote, metrics_url,
                                                 sizeof metrics_url, &err) != 0) {
        fprintf(stderr, "attnd: %s: %s (%s)\n", err.field, err.message, attn_err_name(err.code));
        return 2;
    }
    attnd_log_opts_default(&lo);
    lo.level = cfg.log_level;
    lo.format = cfg.log_format;
    lo.warn_per_s = cfg.log_rate;
    lo.warn_burst = 5 * cfg.log_rate;
    if ((log = attnd_log_create(&lo)) == NULL) {
        fprintf(stderr, "attnd: out of memory\n");
        return 1;
    }
    attnd_log_attach_nng(log);
    attnd_log_write(log, ATTND_LOG_INFO,
                    "attnd %s (build %s) starting: pid %d, listen %s, engine %s, %u workers, "
                    "%u contexts, max frame %zu bytes, %u configured pools, log level %s%s%s",
                    attn_server_version(), attn_server_build_id(), (int)getpid(), cfg.listen,
                    engine_name(cfg.engine), cfg.workers, cfg.contexts, cfg.max_msg, cfg.num_pools,
                    attnd_log_level_name(cfg.log_level), cfg.capture[0] ? ", capture " : "",
                    cfg.capture);
    if (attn_server_create(&srv, &cfg, &err) != 0) {
        attnd_log_write(log, ATTND_LOG_ERROR, "cannot start: %s: %s (%s)", err.field, err.message,
                        attn_err_name(err.code));
        attnd_log_attach_nng(NULL);
        attnd_log_destroy(log);
        return 2;
    }
    attn_server_set_log(srv, log);
    m = attn_server_metrics(srv);
    memset(&o, 0, sizeof o);
    o.url = cfg.listen;
    o.max_msg = cfg.max_msg;
    o.ipc_mode = cfg.ipc_mode;
    o.contexts = cfg.contexts;
    o.workers = cfg.workers;
    o.ready_fd = cfg.ready_fd;
    o.handler = attn_server_handle_cb;
    o.conn_closed = attn_server_conn_closed_cb;
    o.is_cheap = cfg.inline_cheap ? attn_server_is_cheap_cb : NULL;
    o.refuse = attn_server_refuse_cb;
    o.arg = srv;
    o.max_conns = (uint32_t)cfg.max_conns;
    o.conn_inflight = (uint32_t)cfg.conn_inflight;
    o.send_timeout_ms = cfg.send_timeout_ms;
    o.idle_timeout_ms = cfg.idle_timeout_ms;
    o.drain_timeout_ms = cfg.drain_timeout_ms;
    o.order_timeout_ms = cfg.order_timeout_ms;
    o.order_of = attn_server_order_of_cb;
    rctx.argc = argc;
    rctx.argv = argv;
    rctx.cfg = &cfg;
    rctx.srv = srv;
    rctx.log = log;
    o.reload = reload_cb;
    o.reload_arg = &rctx;
    if (cfg.tls_cert[0] != '\0') {
        o.tls_cert = cfg.tls_cert;
        o.tls_key = cfg.tls_key;
        o.tls_ca = cfg.tls_ca;
    }
    o.metrics = m;
    o.log = log;
    memset(&probe, 0, sizeof probe);
    probe.v = ATTN_PROTOCOL_VERSION;
    probe.op = ATTN_OP_HELLO;
    probe.id = ATTND_WATCHDOG_PROBE_ID;
    if (attn_request_encode(&probe, &probe_frame, &err) == 0) {
        o.probe_frame = probe_frame.data;
        o.probe_len = probe_frame.len;
    }
    if (attnd_loop_create(&loop, &o, &err) != 0) {
        attnd_log_write(log, ATTND_LOG_ERROR, "cannot listen: %s: %s", err.field, err.message);
        attn_buf_free(&probe_frame);
        attn_server_destroy(srv);
        attnd_log_attach_nng(NULL);
        attnd_log_destroy(log);
        return 1;
    }
    /* before any request is handled: a run of a closed connection is marked */
    attn_server_set_conn_open(srv, attnd_loop_conn_open_cb, loop);
    /* the endpoints come up before the listener, so /health/ready can say
     * "not listening yet" rather than nothing */
    if (metrics_url[0] != '\0' && attnd_http_start(&http, metrics_url, o.metrics,
                                                   attn_server_metrics_text_cb, srv, &err) != 0) {
        attnd_log_write(log, ATTND_LOG_ERROR, "cannot serve metrics: %s: %s", err.field,
                        err.message);
        attn_server_set_conn_open(srv, NULL, NULL);
        attnd_loop_destroy(loop);
        attn_server_destroy(srv);
        attnd_log_destroy(log);
        return 1;
    }
    if (http != NULL)
        attnd_log_write(log, ATTND_LOG_INFO, "metrics and health on %s", metrics_url);
    rc = attnd_loop_run(loop);
    attnd_http_stop(http);
    attn_server_set_conn_open(srv, NULL, NULL); /* the loop's table goes with it */
    if (attnd_loop_destroy(loop) != 0 && rc == 0)
        rc = ATTN_E_INTERNAL; /* a handle left open: not a clean shutdown */
    attnd_log_write(
        log, rc == 0 ? ATTND_LOG_INFO : ATTND_LOG_ERROR,
        "attnd stopped%s after %.1f s: %llu requests, %llu replies, %llu error replies, "
        "%llu refused while draining, %llu log lines suppressed; exit %d",
        rc == 0 ? "" : " with an error", mono_s() - t_start,
        (unsigned long long)atomic_load(&m->requests), (unsigned long long)atomic_load(&m->replies),
        (unsigned long long)atomic_load(&m->errors),
        (unsigned long long)atomic_load(&m->shutting_down_replies),
        (unsigned long long)attnd_log_suppressed(log), rc == 0 ? 0 : 1);
    attn_buf_free(&probe_frame);
    attn_server_destroy(srv);
    attnd_log_attach_nng(NULL);
    attnd_log_destroy(log);
    return rc == 0 ? 0 : 1;
}
