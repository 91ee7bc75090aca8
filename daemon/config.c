/* attnd configuration: defaults, JSON file, flags (see config.h). */
#include "daemon/config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/names.h"

void attnd_config_defaults(attnd_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "%s", ATTND_DEFAULT_URL);
    c->engine = ATTND_ENGINE_AUTO;
    c->threads = 0;
    c->workers = 2;
    c->contexts = ATTND_DEFAULT_CONTEXTS;
    c->max_msg = ATTND_DEFAULT_MAX_MSG;
    c->max_plans = ATTND_DEFAULT_MAX_PLANS;
    c->pool_budget = ATTND_DEFAULT_POOL_BUDGET;
    c->ipc_mode = 0660;
    c->ready_fd = -1;
    c->inline_cheap = 1;
    c->async_defer = 1;
    c->log_level = ATTND_LOG_INFO;
    c->log_format = ATTND_LOG_FORMAT_AUTO;
    c->log_rate = ATTND_DEFAULT_LOG_WARN_PER_S;
#define ATTND__LIMIT_DEFAULT(flag, key, field, def, lo, hi, doc) c->field = (def);
    ATTND_LIMITS(ATTND__LIMIT_DEFAULT)
#undef ATTND__LIMIT_DEFAULT
}

int attnd_engine_parse(const char *s, attnd_engine_pref *out)
{
    attn_platform p;
    if (strcmp(s, "auto") == 0) {
        *out = ATTND_ENGINE_AUTO;
        return 0;
    }
    /* the engine names are the platform names (attn/types.h ATTN_PLATFORMS) */
    if (attn_platform_parse(s, "engine", &p, NULL) != 0)
        return ATTN_E_UNKNOWN_BACKEND;
    *out = p == ATTN_PLATFORM_CUDA ? ATTND_ENGINE_CUDA : ATTND_ENGINE_CPU;
    return 0;
}

/* Parse an unsigned decimal (or 0-prefixed octal/0x hex) that must fit `max`. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;
    if (s == NULL || *s == '\0' || *s == '-')
        return ATTN_E_RANGE;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0' || v > max)
        return ATTN_E_RANGE;
    *out = v;
    return 0;
}

int attnd_pool_spec_parse(const char *spec, attn_pool_geometry *g, attn_error_detail *err)
{
    char buf[256];
    char *parts[9] = {0};
    int rv;
    int n = 0;
    uint64_t v[5];
    char *save = NULL, *tok;

    if (strlen(spec) >= sizeof buf)
        return attn_error_set(err, ATTN_E_RANGE, "pool", "pool spec too long");
    snprintf(buf, sizeof buf, "%s", spec);
    for (tok = strtok_r(buf, ":", &save); tok != NULL && n < 9; tok = strtok_r(NULL, ":", &save))
        parts[n++] = tok;
    if (n < 6)
        return attn_error_set(
            err, ATTN_E_MISSING, "pool",
            "expected NAME:LAYERS:PAGES:PAGE_SIZE:HKV:D[:DTYPE[:LAYOUT[:DEVICE]]]");
    memset(g, 0, sizeof *g);
    if (strlen(parts[0]) >= sizeof g->name)
        return attn_error_set(err, ATTN_E_RANGE, "pool.name", "pool name too long");
    snprintf(g->name, sizeof g->name, "%s", parts[0]);
    for (int i = 0; i < 5; i++)
        if (parse_u64(parts[i + 1], UINT32_MAX, &v[i]) != 0 || v[i] == 0)
            return attn_error_set(err, ATTN_E_RANGE, "pool",
                                  "field %d ('%s') is not a positive integer", i + 1, parts[i + 1]);
    g->layers = (uint32_t)v[0];
    g->num_pages = (uint32_t)v[1];
    g->page_size = (uint32_t)v[2];
    g->num_kv_heads = (uint32_t)v[3];
    g->head_dim_qk = g->head_dim_vo = (uint32_t)v[4];
    g->kv_dtype = ATTN_FP32;
    g->layout = ATTN_NHD;
    snprintf(g->device, sizeof g->device, "cpu");
    if (n > 6 && (rv = attn_dtype_parse(parts[6], "pool.kv_dtype", &g->kv_dtype, err)) != 0)
        return rv;
    if (n > 7 && (rv = attn_layout_parse(parts[7], "pool.layout", &g->layout, err)) != 0)
        return rv;
    if (n > 8)
        snprintf(g->device, sizeof g->device, "%s", parts[8]);
    return 0;
}

/* One pool from a JSON map with the pool_create keys (PROTOCOL.md). */
static int pool_from_json(json_t *o, attn_pool_geometry *g, const char *path,
                          attn_error_detail *err)
{
    static const char *ukeys[] = {"layers",       "num_pages",   "page_size",
                                  "num_kv_heads", "head_dim_qk", "head_dim_vo"};
    uint32_t *dst[] = {&g->layers,       &g->num_pages,   &g->page_size,
                       &g->num_kv_heads, &g->head_dim_qk, &g->head_dim_vo};
    char field[128];
    const char *key;
    json_t *val;

    if (!json_is_object(o))
        return attn_error_set(err, ATTN_E_TYPE, path, "a pool must be a map");
    memset(g, 0, sizeof *g);
    g->kv_dtype = ATTN_FP32;
    g->layout = ATTN_NHD;
    snprintf(g->device, sizeof g->device, "cpu");
    json_object_foreach(o, key, val)
    {
        int known = 0;
        snprintf(field, sizeof field, "%s.%s", path, key);
        for (size_t i = 0; i < sizeof ukeys / sizeof ukeys[0]; i++) {
            if (strcmp(key, ukeys[i]) == 0) {
                json_int_t x;
                if (!json_is_integer(val))
                    return attn_error_set(err, ATTN_E_TYPE, field, "must be an integer");
                x = json_integer_value(val);
                if (x <= 0 || x > (json_int_t)UINT32_MAX)
                    return attn_error_set(err, ATTN_E_RANGE, field, "must be in [1, 2^32)");
                *dst[i] = (uint32_t)x;
                known = 1;
            }
        }
        if (known)
            continue;
        if (!json_is_string(val))
            return attn_error_set(err, json_is_integer(val) ? ATTN_E_TYPE : ATTN_E_TYPE, field,
                                  "must be a string");
        if (strcmp(key, "pool") == 0 || strcmp(key, "name") == 0) {
            if (strlen(json_string_value(val)) >= sizeof g->name || json_string_length(val) == 0)
                return attn_error_set(err, ATTN_E_RANGE, field, "pool name must be 1..63 bytes");
            snprintf(g->name, sizeof g->name, "%s", json_string_value(val));
        } else if (strcmp(key, "kv_dtype") == 0) {
            int rv = attn_dtype_parse(json_string_value(val), field, &g->kv_dtype, err);
            if (rv != 0)
                return rv;
        } else if (strcmp(key, "layout") == 0) {
            int rv = attn_layout_parse(json_string_value(val), field, &g->layout, err);
            if (rv != 0)
                return rv;
        } else if (strcmp(key, "device") == 0) {
            if (json_string_length(val) >= sizeof g->device)
                return attn_error_set(err, ATTN_E_RANGE, field, "device name too long");
            snprintf(g->device, sizeof g->device, "%s", json_string_value(val));
        } else {
            return attn_error_set(err, ATTN_E_PROTOCOL, field, "unknown pool key");
        }
    }
    if (g->name[0] == '\0')
        return attn_error_set(err, ATTN_E_MISSING, path, "pool needs a name (\"pool\")");
    if (g->head_dim_vo == 0)
        g->head_dim_vo = g->head_dim_qk;
    if (g->layers == 0 || g->num_pages == 0 || g->page_size == 0 || g->num_kv_heads == 0 ||
        g->head_dim_qk == 0)
        return attn_error_set(err, ATTN_E_MISSING, path,
                              "pool needs layers, num_pages, page_size, num_kv_heads, head_dim_qk");
    return 0;
}

static int add_pool(attnd_config *c, const attn_pool_geometry *g, attn_error_detail *err)
{
    if (c->num_pools >= ATTND_MAX_CONFIG_POOLS)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "pools", "at most %d configured pools",
                              ATTND_MAX_CONFIG_POOLS);
    c->pools[c->num_pools++] = *g;
    return 0;
}

/* Apply one of ATTND_LIMITS by flag or JSON key; 1 when `key` is none of them. */
static int apply_limit(attnd_config *c, const char *key, const char *val, attn_error_detail *err)
{
    uint64_t v;
#define ATTND__LIMIT_APPLY(flag, jkey, field, def, lo, hi, doc)                                    \
    if (strcmp(key, flag) == 0 || strcmp(key, jkey) == 0) {                                        \
        if (parse_u64(val, (hi), &v) != 0 || v < (lo))                                             \
            return attn_error_set(err, ATTN_E_RANGE, key, "must be an integer in [%llu, %llu]",    \
                                  (unsigned long long)(lo), (unsigned long long)(hi));             \
        c->field = v;                                                                              \
        return 0;                                                                                  \
    }
    ATTND_LIMITS(ATTND__LIMIT_APPLY)
#undef ATTND__LIMIT_APPLY
    return 1;
}

/* Apply one setting given by name (a long flag without "--"). */
static int apply_setting(attnd_config *c, const char *key, const char *val, attn_error_detail *err)
{
    uint64_t v;
    int lim = apply_limit(c, key, val, err);
    if (lim != 1)
        return lim;
    if (strcmp(key, "listen") == 0) {
        if (strlen(val) >= sizeof c->listen)
            return attn_error_set(err, ATTN_E_RANGE, key, "URL too long");
        snprintf(c->listen, sizeof c->listen, "%s", val);
    } else if (strcmp(key, "engine") == 0) {
        if (attnd_engine_parse(val, &c->engine) != 0)
            return attn_error_set(err, ATTN_E_UNKNOWN_BACKEND, key,
                                  "engine must be cpu, cuda or auto");
    } else if (strcmp(key, "capture") == 0) {
        if (strlen(val) >= sizeof c->capture)
            return attn_error_set(err, ATTN_E_RANGE, key, "path too long");
        snprintf(c->capture, sizeof c->capture, "%s", val);
    } else if (strcmp(key, "metrics") == 0) {
        if (strlen(val) >= sizeof c->metrics)
            return attn_error_set(err, ATTN_E_RANGE, key, "address too long");
        snprintf(c->metrics, sizeof c->metrics, "%s", val);
    } else if (strcmp(key, "metrics-allow-remote") == 0 ||
               strcmp(key, "metrics_allow_remote") == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be 0 or 1");
        c->metrics_allow_remote = val[0] == '1';
    } else if (strcmp(key, "pool") == 0) {
        attn_pool_geometry g;
        int rc = attnd_pool_spec_parse(val, &g, err);
        if (rc != 0)
            return rc;
        return add_pool(c, &g, err);
    } else if (strcmp(key, "threads") == 0 || strcmp(key, "workers") == 0 ||
               strcmp(key, "contexts") == 0 || strcmp(key, "max-plans") == 0 ||
               strcmp(key, "max_plans") == 0) {
        if (parse_u64(val, 4096, &v) != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be an integer in [0, 4096]");
        if (key[0] == 't')
            c->threads = (uint32_t)v;
        else if (key[0] == 'w')
            c->workers = v == 0 ? 1 : (uint32_t)v;
        else if (key[0] == 'c')
            c->contexts = v == 0 ? 1 : (uint32_t)v;
        else
            c->max_plans = v == 0 ? 1 : (uint32_t)v;
    } else if (strcmp(key, "max-msg") == 0 || strcmp(key, "max_msg") == 0) {
        if (parse_u64(val, (uint64_t)1 << 34, &v) != 0 || v < 1024)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be an integer in [1024, 2^34]");
        c->max_msg = (size_t)v;
    } else if (strcmp(key, "pool-budget") == 0 || strcmp(key, "pool_budget") == 0) {
        if (parse_u64(val, UINT64_MAX, &v) != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be a byte count");
        c->pool_budget = v;
    } else if (strcmp(key, "ipc-mode") == 0 || strcmp(key, "ipc_mode") == 0) {
        /* always octal, as chmod takes it */
        char *end = NULL;
        long m = strtol(val, &end, 8);
        if (*val == '\0' || *end != '\0' || m < 0 || m > 0777)
            return attn_error_set(err, ATTN_E_RANGE, key,
                                  "must be octal permission bits, e.g. 0660");
        c->ipc_mode = (int)m;
    } else if (strcmp(key, "inline-cheap") == 0 || strcmp(key, "inline_cheap") == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be 0 or 1");
        c->inline_cheap = val[0] == '1';
    } else if (strcmp(key, "log-level") == 0 || strcmp(key, "log_level") == 0) {
        if (attnd_log_level_parse(val, &c->log_level) != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be error, warn, info or debug");
    } else if (strcmp(key, "log-format") == 0 || strcmp(key, "log_format") == 0) {
        if (attnd_log_format_parse(val, &c->log_format) != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be auto, plain or journal");
    } else if (strcmp(key, "log-rate") == 0 || strcmp(key, "log_rate") == 0) {
        if (parse_u64(val, 1000000, &v) != 0 || v == 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be an integer in [1, 1000000]");
        c->log_rate = (uint32_t)v;
    } else if (strcmp(key, "async-defer") == 0 || strcmp(key, "async_defer") == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be 0 or 1");
        c->async_defer = val[0] == '1';
    } else if (strcmp(key, "allow-remote") == 0 || strcmp(key, "allow_remote") == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be 0 or 1");
        c->allow_remote = val[0] == '1';
    } else if (strncmp(key, "tls-", 4) == 0 || strncmp(key, "tls_", 4) == 0) {
        char *dst = strcmp(key + 4, "cert") == 0  ? c->tls_cert
                    : strcmp(key + 4, "key") == 0 ? c->tls_key
                    : strcmp(key + 4, "ca") == 0  ? c->tls_ca
                                                  : NULL;
        if (dst == NULL)
            return attn_error_set(err, ATTN_E_PROTOCOL, key, "unknown setting '%s'", key);
        if (strlen(val) >= sizeof c->tls_cert)
            return attn_error_set(err, ATTN_E_RANGE, key, "path too long");
        snprintf(dst, sizeof c->tls_cert, "%s", val);
    } else if (strcmp(key, "ready-fd") == 0) {
        if (parse_u64(val, 65535, &v) != 0)
            return attn_error_set(err, ATTN_E_RANGE, key, "must be a file descriptor number");
        c->ready_fd = (int)v;
    } else {
        return attn_error_set(err, ATTN_E_PROTOCOL, key, "unknown setting '%s'", key);
    }
    return 0;
}

int attnd_config_load_file(attnd_config *c, const char *path, attn_error_detail *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    const char *key;
    json_t *val;
    int rc = 0;

    if (root == NULL)
        return attn_error_set(err, ATTN_E_IO, "config", "%s:%d: %s", path, je.line, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return attn_error_set(err, ATTN_E_TYPE, "config", "the configuration must be a JSON map");
    }
    json_object_foreach(root, key, val)
    {
        char num[64];
        if (strcmp(key, "pools") == 0) {
            size_t i;
            json_t *p;
            if (!json_is_array(val)) {
                rc = attn_error_set(err, ATTN_E_TYPE, "pools", "must be an array of maps");
                break;
            }
            json_array_foreach(val, i, p)
            {
                attn_pool_geometry g;
                char field[32];
                snprintf(field, sizeof field, "pools[%zu]", i);
                if ((rc = pool_from_json(p, &g, field, err)) != 0 ||
                    (rc = add_pool(c, &g, err)) != 0)
                    break;
            }
            if (rc != 0)
                break;
            continue;
        }
        if (json_is_string(val)) {
            rc = apply_setting(c, key, json_string_value(val), err);
        } else if (json_is_integer(val)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(val));
            /* an integer ipc_mode means its octal digits as written: 660 */
            rc = apply_setting(c, key, num, err);
        } else {
            rc = attn_error_set(err, ATTN_E_TYPE, key, "must be a string or an integer");
        }
        if (rc != 0)
            break;
    }
    json_decref(root);
    return rc;
}

/* Whether the host of a tcp:// or tls+tcp:// URL is a loopback literal
 * (127.0.0.0/8, localhost, [::1]); a wildcard or any other name is not. */
static int url_is_loopback(const char *url)
{
    const char *host = strstr(url, "://") + 3;
    const char *colon = strrchr(host, ':');
    size_t n = colon != NULL ? (size_t)(colon - host) : strlen(host);
    if (n == 9 && strncmp(host, "localhost", 9) == 0)
        return 1;
    if (n == 5 && strncmp(host, "[::1]", 5) == 0)
        return 1;
    return n > 4 && strncmp(host, "127.", 4) == 0;
}

int attnd_config_check(const attnd_config *c, attn_error_detail *err)
{
    int tcp = strncmp(c->listen, "tcp://", 6) == 0 || strncmp(c->listen, "tcp4://", 7) == 0 ||
              strncmp(c->listen, "tcp6://", 7) == 0;
    int tls = strncmp(c->listen, "tls+tcp://", 10) == 0;
    if ((tcp || tls) && !c->allow_remote && !url_is_loopback(c->listen))
        return attn_error_set(err, ATTN_E_RANGE, "listen",
                              "%.200s is not a loopback address: any peer could read, write "
                              "and drop pools; pass --allow-remote 1 to mean it (and prefer "
                              "tls+tcp:// with --tls-cert, --tls-key and --tls-ca)",
                              c->listen);
    if (tls) {
        if (c->tls_cert[0] == '\0')
            return attn_error_set(err, ATTN_E_MISSING, "tls-cert",
                                  "a tls+tcp:// listener needs --tls-cert (PEM chain)");
        if (c->tls_key[0] == '\0')
            return attn_error_set(err, ATTN_E_MISSING, "tls-key",
                                  "a tls+tcp:// listener needs --tls-key (PEM private key)");
        if (c->tls_ca[0] == '\0')
            return attn_error_set(err, ATTN_E_MISSING, "tls-ca",
                                  "a tls+tcp:// listener needs --tls-ca: client certificates "
                                  "are required and must chain to it");
    } else if (c->tls_cert[0] != '\0' || c->tls_key[0] != '\0' || c->tls_ca[0] != '\0') {
        return attn_error_set(err, ATTN_E_SEMANTIC,
                              c->tls_cert[0]  ? "tls-cert"
                              : c->tls_key[0] ? "tls-key"
                                              : "tls-ca",
                              "TLS settings need a tls+tcp:// --listen URL");
    }
    return 0;
}

const char *attnd_config_restart_setting(const attnd_config *a, const attnd_config *b)
{
#define ATTND__SAME(f) (memcmp(&a->f, &b->f, sizeof a->f) == 0)
    if (strcmp(a->listen, b->listen) != 0)
        return "listen";
    if (strcmp(a->capture, b->capture) != 0)
        return "capture";
    if (strcmp(a->tls_cert, b->tls_cert) != 0 || strcmp(a->tls_key, b->tls_key) != 0 ||
        strcmp(a->tls_ca, b->tls_ca) != 0)
        return "tls";
    if (!ATTND__SAME(engine))
        return "engine";
    if (!ATTND__SAME(threads) || !ATTND__SAME(workers) || !ATTND__SAME(contexts))
        return "threads/workers/contexts";
    if (!ATTND__SAME(max_msg))
        return "max-msg";
    if (!ATTND__SAME(max_plans) || !ATTND__SAME(plan_cache_bytes))
        return "max-plans/plan-cache-bytes";
    if (!ATTND__SAME(pool_budget))
        return "pool-budget";
    if (!ATTND__SAME(ipc_mode))
        return "ipc-mode";
    if (!ATTND__SAME(inline_cheap))
        return "inline-cheap";
    if (!ATTND__SAME(max_conns))
        return "max-conns";
    if (!ATTND__SAME(max_buffers) || !ATTND__SAME(max_buffer_bytes))
        return "max-buffers/max-buffer-bytes";
    if (!ATTND__SAME(max_workspace))
        return "max-workspace";
    if (!ATTND__SAME(order_timeout_ms))
        return "order-timeout-ms";
    if (!ATTND__SAME(async_defer))
        return "async-defer";
    if (!ATTND__SAME(allow_remote))
        return "allow-remote";
    if (a->num_pools != b->num_pools ||
        memcmp(a->pools, b->pools, sizeof a->pools[0] * a->num_pools) != 0)
        return "pools";
#undef ATTND__SAME
    return NULL;
}

int attnd_config_parse_args(attnd_config *c, int argc, char **argv, attn_error_detail *err)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char key[64];
        const char *val;
        const char *eq;
        int rc;
        if (strncmp(a, "--", 2) != 0)
            return attn_error_set(err, ATTN_E_PROTOCOL, a, "unexpected argument '%s'", a);
        a += 2;
        eq = strchr(a, '=');
        if (eq != NULL) {
            if ((size_t)(eq - a) >= sizeof key)
                return attn_error_set(err, ATTN_E_PROTOCOL, argv[i], "flag too long");
            memcpy(key, a, (size_t)(eq - a));
            key[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", a);
            if (i + 1 >= argc)
                return attn_error_set(err, ATTN_E_MISSING, key, "--%s needs a value", key);
            val = argv[++i];
        }
        if (strcmp(key, "config") == 0)
            rc = attnd_config_load_file(c, val, err);
        else
            rc = apply_setting(c, key, val, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

const char *attnd_config_usage(void)
{
    return "usage: attnd [--config FILE] [--listen URL] [--engine cpu|cuda|auto]\n"
           "             [--threads N] [--workers N] [--contexts N] [--max-msg BYTES]\n"
           "             [--max-plans N] [--pool-budget BYTES] [--ipc-mode 0660]\n"
           "             [--capture FILE] [--pool "
           "NAME:LAYERS:PAGES:PAGE_SIZE:HKV:D[:DTYPE[:LAYOUT]]]\n"
           "             [--inline-cheap 0|1] [--async-defer 0|1] [--ready-fd FD] [--allow-remote "
           "0|1]\n"
           "             [--tls-cert PEM --tls-key PEM --tls-ca PEM] (tls+tcp://)\n"
           "             [--max-reply BYTES] [--plan-cache-bytes BYTES] [--max-conns N]\n"
           "             [--conn-inflight N] [--send-timeout-ms MS] [--idle-timeout-ms MS]\n"
           "             [--drain-timeout-ms MS] [--max-workspace BYTES]\n"
           "             [--metrics HOST:PORT [--metrics-allow-remote 1]]\n"
           "             [--log-level error|warn|info|debug] [--log-format auto|plain|journal]\n"
           "             [--log-rate LINES_PER_S]\n"
           "       attnd --version | --help\n"
           "defaults: --listen " ATTND_DEFAULT_URL " --engine auto --workers 2 --contexts 16\n"
           "          --max-msg 67108864 (64 MiB) --max-plans 256 --pool-budget 8 GiB --ipc-mode "
           "0660\n"
           "          --log-level info --log-format auto --log-rate 10\n"
           "Keys of a --config JSON file are the long flags without \"--\".\n"
           "Logs go to stderr; docs/daemon.md describes every flag.\n";
}
