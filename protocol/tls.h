/* TLS for the tcp transport (issue 9 item 10): an nng TLS configuration built
 * from PEM files, one home for attnd's listener (server: client certificates
 * required, chaining to the CA) and libattn/attnctl's dialer (client: the
 * server's certificate must chain to the CA; our own certificate offered).
 * nng's TLS is mbedTLS (scripts/deps.sh builds nng with it).
 */
#ifndef ATTN_PROTOCOL_TLS_H
#define ATTN_PROTOCOL_TLS_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "attn/error.h"

/* The PEM files of one side (paths); server_name: the name the client
 * checks in the server's certificate (NULL: none checked beyond the CA). */
typedef struct attn_tls_files {
    const char *cert;
    const char *key;
    const char *ca;
    const char *server_name;
} attn_tls_files;

/* Build a configuration (server when `server`, else client) from `f`; every
 * file is required.  E_IO naming the setting ("tls-cert", "tls-key",
 * "tls-ca") on failure.  Free with nng_tls_config_free. */
int attn_tls_config_from_files(nng_tls_config **out, int server, const attn_tls_files *f,
                               attn_error_detail *err);

#endif
