/* Test helper: an in-process nng REP server loop for the client tests. */
#ifndef ATTN_TESTS_REP_SERVE_H
#define ATTN_TESTS_REP_SERVE_H

#include <stdatomic.h>
#include <stddef.h>

#include <nng/nng.h>

/* Turn one request body into reply bytes (*reply malloc'ed, freed by the
 * loop); nonzero stops serving. */
typedef int (*attn_rep_handler)(void *arg, const void *body, size_t len, void **reply,
                                size_t *reply_len);

/* Serve requests on one context of `sock` until *stop is set (or the socket
 * is closed, or `handle` fails): receive, handle, send the reply back.
 * Set *stop and join the serving threads BEFORE closing the socket: a send
 * racing nng_close can hit a destroyed lock inside nng 1.5 and abort. */
void attn_rep_serve(nng_socket sock, attn_rep_handler handle, void *arg, const atomic_int *stop);

#endif
