/* Test helper: an in-process nng REP server loop for the client tests. */
#ifndef ATTN_TESTS_REP_SERVE_H
#define ATTN_TESTS_REP_SERVE_H

#include <stddef.h>

#include <nng/nng.h>

/* Turn one request body into reply bytes (*reply malloc'ed, freed by the
 * loop); nonzero stops serving. */
typedef int (*attn_rep_handler)(void *arg, const void *body, size_t len, void **reply,
                                size_t *reply_len);

/* Serve requests on one context of `sock` until the socket is closed (or
 * `handle` fails): receive, handle, send the reply back. */
void attn_rep_serve(nng_socket sock, attn_rep_handler handle, void *arg);

#endif
