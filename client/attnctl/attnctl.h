/* attnctl internals: one connection type (an nng REQ socket) and the
 * subcommands.  attnctl is a client: it links libattn and protocol/ only.
 * --local starts attnd itself as a child process on a private ipc socket
 * (the daemon's own code path, without linking the daemon into attnctl). */
#ifndef ATTN_ATTNCTL_H
#define ATTN_ATTNCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <nng/nng.h>

#include <sys/types.h>

#include "attn/client.h"

#define ATTNCTL_DEFAULT_URL "ipc:///run/attnd/attnd.sock"

typedef struct actl_conn {
    nng_socket sock;
    int open;
    pid_t child;  /* --local: the attnd we started, else 0 */
    char dir[64]; /* --local: its private directory (socket inside) */
} actl_conn;

/* Connect to `url`; or, when `local`, start attnd (the binary beside
 * attnctl, or $ATTND) on an ipc socket in a fresh private directory, with
 * `--capture capture` when not NULL, wait until it is ready and connect. */
int actl_open(actl_conn *c, const char *url, int local, const char *capture);

/* Send one request frame and receive its reply (*rep malloc'ed). */
int actl_call(actl_conn *c, const void *req, size_t len, void **rep, size_t *rep_len);

/* Close the connection; a --local attnd is stopped (SIGTERM, then waited for). */
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

/* Print the command list (attnctl --help, or a usage error) to `out`. */
void actl_print_usage(FILE *out);

/* The full usage text of one command (options, defaults, exit codes); NULL
 * for an unknown command. */
const char *actl_command_usage(const char *cmd);

/* Print "attnctl VERSION (build ID)\n" to `out`. */
void actl_print_version(FILE *out);

/* 1 when the command's arguments (argv[0] = the command) ask for --help/-h. */
int actl_wants_help(int argc, char **argv);

/* attnctl explain (client/attnctl/explain.c). */
int attnctl_explain(int argc, char **argv);

#endif
