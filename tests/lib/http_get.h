/* Test helper: a minimal HTTP/1.0 GET over a loopback TCP socket (the tests
 * need no curl), and a free loopback port to bind a listener to. */
#ifndef ATTN_TESTS_HTTP_GET_H
#define ATTN_TESTS_HTTP_GET_H

#include <stddef.h>

/* GET http://127.0.0.1:port/path; *status gets the status code and *body
 * the malloc'ed, NUL-terminated body.  Returns 0, or -1 when no complete
 * response arrived within 10 s. */
int attn_http_get(int port, const char *path, int *status, char **body);

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, then closed). */
int attn_free_port(void);

#endif
