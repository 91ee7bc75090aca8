/* attnctl internals: one connection type over either a socket (nng REQ) or
 * the in-process server (--local: attn_server_handle, the daemon's own code
 * path), and the subcommands. */
#ifndef ATTN_ATTNCTL_H
#define ATTN_ATTNCTL_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "attn/client.h"
#include "daemon/config.h"
#include "daemon/server.h"

#define ATTNCTL_DEFAULT_URL "ipc:///run/attnd/attnd.sock"

typedef struct actl_conn {
    attn_server *local; /* --local */
    nng_socket sock;
    int open;
} actl_conn;

/* Connect to `url`, or build an in-process server when `local` (with `capture` when not NULL). */
int actl_open(actl_conn *c, const char *url, int local, const char *capture);

/* Send one request frame and receive its reply (*rep malloc'ed). */
int actl_call(actl_conn *c, const void *req, size_t len, void **rep, size_t *rep_len);

/* Close the connection (or free the in-process server). */
void actl_close(actl_conn *c);

/* Encode a typed request, call, and decode the reply into `rep`, which
 * then owns the reply bytes (attn_reply_free). */
int actl_call_typed(actl_conn *c, attn_request *req, attn_reply *rep, attn_error_detail *err);

/* The URL from --url, else $ATTN_URL, else the default. */
const char *actl_url(const char *flag);

/* Monotonic microseconds. */
double actl_now_us(void);

/* A short tag distinct per invocation (pid and start time, hex), for pool
 * names that two runs of a command never share. */
void actl_unique_tag(char *buf, size_t cap);

/* Drop pool `name`; 0, or the error code (message on stderr unless it is
 * E_UNKNOWN_POOL and `quiet_unknown`). */
int actl_pool_drop(actl_conn *c, const char *name, int quiet_unknown);

/* Print a msgpack frame as JSON to stdout. */
void actl_print_frame(const void *buf, size_t len, int pretty);

int actl_cmd_hello(int argc, char **argv);
int actl_cmd_pool(int argc, char **argv);
int actl_cmd_stats(int argc, char **argv);
int actl_cmd_run(int argc, char **argv);
int actl_cmd_gen(int argc, char **argv);
int actl_cmd_replay(int argc, char **argv);
int actl_cmd_bench(int argc, char **argv);

/* attnctl explain (client/attnctl/explain.c). */
int attnctl_explain(int argc, char **argv);

#endif
