/* TLS configuration from PEM files (see tls.h). */
#include "protocol/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole text file at `path` (malloc'ed, NUL-terminated; at most 1 MiB), or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1l << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

int attn_tls_config_from_files(nng_tls_config **out, int server, const attn_tls_files *f,
                               attn_error_detail *err)
{
    static const char *const field[3] = {"tls-cert", "tls-key", "tls-ca"};
    const char *path[3] = {f->cert, f->key, f->ca};
    char *pem[3] = {NULL, NULL, NULL};
    nng_tls_config *cfg = NULL;
    int rv, rc = 0;
    *out = NULL;
    for (int i = 0; i < 3 && rc == 0; i++)
        if (path[i] == NULL || path[i][0] == '\0')
            rc = attn_error_set(err, ATTN_E_MISSING, field[i], "%s is required for TLS", field[i]);
        else if ((pem[i] = read_text(path[i])) == NULL)
            rc = attn_error_set(err, ATTN_E_IO, field[i], "cannot read %s: %s", path[i],
                                strerror(errno));
    if (rc == 0 &&
        (rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT)) != 0)
        rc = attn_error_set(err, ATTN_E_IO, "tls", "nng_tls_config_alloc: %s", nng_strerror(rv));
    if (rc == 0 && (rv = nng_tls_config_own_cert(cfg, pem[0], pem[1], NULL)) != 0)
        rc = attn_error_set(err, ATTN_E_IO, "tls-cert", "%s with key %s: %s", path[0], path[1],
                            nng_strerror(rv));
    if (rc == 0 && (rv = nng_tls_config_ca_chain(cfg, pem[2], NULL)) != 0)
        rc = attn_error_set(err, ATTN_E_IO, "tls-ca", "%s: %s", path[2], nng_strerror(rv));
    if (rc == 0 && (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0)
        rc = attn_error_set(err, ATTN_E_IO, "tls", "auth mode: %s", nng_strerror(rv));
    if (rc == 0 && f->server_name != NULL && f->server_name[0] != '\0' &&
        (rv = nng_tls_config_server_name(cfg, f->server_name)) != 0)
        rc = attn_error_set(err, ATTN_E_IO, "tls-server-name", "%s: %s", f->server_name,
                            nng_strerror(rv));
    for (int i = 0; i < 3; i++)
        free(pem[i]);
    if (rc != 0) {
        if (cfg != NULL)
            nng_tls_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}
