/* attnd configuration: defaults, a JSON configuration file, then flags.
 *
 * Hard limits are configuration with safe defaults (STYLE.md, redis habit):
 * the frame-size cap, the plan-cache bound and the pool-byte budget are all
 * here and documented in docs/daemon.md.  Flags override the file.
 */
#ifndef ATTN_DAEMON_CONFIG_H
#define ATTN_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"
#include "attn/types.h"
#include "daemon/log.h"

#define ATTND_DEFAULT_URL "ipc:///run/attnd/attnd.sock"
#define ATTND_DEFAULT_MAX_MSG (64u << 20)      /* 64 MiB frame cap (NNG_OPT_RECVMAXSZ) */
#define ATTND_DEFAULT_MAX_PLANS 256            /* plan-cache entries */
#define ATTND_DEFAULT_POOL_BUDGET (8ull << 30) /* host pool bytes, all pools together */
#define ATTND_DEFAULT_CONTEXTS 16              /* nng REP contexts (concurrent requests) */
#define ATTND_MAX_CONFIG_POOLS 16

/* The limits that bound what one client can hold (issue 9), as one list:
 * X(flag, json key, field, default, min, max, what the docs call it).
 * Each is a flag (--max-reply), the same key in the JSON file (max_reply),
 * documented in docs/daemon.md. */
#define ATTND_LIMITS(X)                                                                            \
    X("max-reply", "max_reply", max_reply, 64ull << 20, 1024, 1ull << 40,                          \
      "reply-bytes cap, checked before a reply is built")                                          \
    X("plan-cache-bytes", "plan_cache_bytes", plan_cache_bytes, 1ull << 30, 1 << 16, 1ull << 44,   \
      "bytes all cached plans may hold")                                                           \
    X("max-conns", "max_conns", max_conns, 64, 1, 65536, "connections at once")                    \
    X("conn-inflight", "conn_inflight", conn_inflight, 8, 1, 4096,                                 \
      "requests of one connection in progress at once")                                            \
    X("send-timeout-ms", "send_timeout_ms", send_timeout_ms, 2000, 1, 3600000,                     \
      "a reply its connection does not take within this closes the connection")                    \
    X("idle-timeout-ms", "idle_timeout_ms", idle_timeout_ms, 60000, 10, 86400000,                  \
      "a connection with nothing in progress and no complete request for this long is closed")     \
    X("drain-timeout-ms", "drain_timeout_ms", drain_timeout_ms, 10000, 1, 3600000,                 \
      "hard deadline of a shutdown's drain")                                                       \
    X("order-timeout-ms", "order_timeout_ms", order_timeout_ms, 2000, 1, 3600000,                  \
      "a gap in a connection's run order numbers older than this fails the runs held behind it")   \
    X("max-buffers", "max_buffers", max_buffers, 256, 1, 65536,                                    \
      "registered buffers at once, all connections together")                                      \
    X("max-buffer-bytes", "max_buffer_bytes", max_buffer_bytes, 16ull << 30, 4096, 1ull << 44,     \
      "bytes all registered buffers may map together")                                             \
    X("max-workspace", "max_workspace", max_workspace, 4ull << 30, 1 << 20, 1ull << 44,            \
      "workspace bytes one plan's run may carve (partial states)")

/* "auto" or one platform; the values are the attn_platform ones. */
typedef enum attnd_engine_pref {
    ATTND_ENGINE_AUTO = 0,
    ATTND_ENGINE_CPU = ATTN_PLATFORM_CPU,
    ATTND_ENGINE_CUDA = ATTN_PLATFORM_CUDA,
} attnd_engine_pref;

typedef struct attnd_config {
    char listen[512];
    attnd_engine_pref engine;
    uint32_t threads;  /* CPU engine threads; 0 = online CPUs */
    uint32_t workers;  /* request worker threads (libuv pool); 0 = 2 */
    uint32_t contexts; /* nng REP contexts */
    size_t max_msg;    /* frame-size cap in bytes */
    uint32_t max_plans;
    uint64_t pool_budget;
    int ipc_mode; /* permission bits of the IPC socket, default 0660 */
    char capture[512];
    int ready_fd;     /* write "READY\n" here when serving (tests); -1 when unset */
    int inline_cheap; /* answer hello/stats in the nng callback (default 1; 0 to measure) */
    int async_defer;  /* an async GPU run returns at enqueue (default 1; 0: synchronise each) */
    attnd_log_level log_level;   /* default info */
    attnd_log_format log_format; /* default auto: "<N>" prefixes under journald */
    uint32_t log_rate;           /* client-triggered log lines per second (burst 5x) */
    char metrics[256];           /* --metrics HOST:PORT for /metrics and /health; "" = off */
    int metrics_allow_remote;    /* serve them on a non-loopback address too */
    uint32_t num_pools;
    attn_pool_geometry pools[ATTND_MAX_CONFIG_POOLS];
#define ATTND__LIMIT_FIELD(flag, key, field, def, lo, hi, doc) uint64_t field;
    ATTND_LIMITS(ATTND__LIMIT_FIELD)
#undef ATTND__LIMIT_FIELD
    int allow_remote;   /* 1: a tcp listener may bind a non-loopback address */
    char tls_cert[512]; /* tls+tcp:// listener: certificate chain (PEM) */
    char tls_key[512];  /* its private key (PEM) */
    char tls_ca[512];   /* CA that client certificates must chain to (PEM); required */
} attnd_config;

/* Fill `c` with the documented defaults. */
void attnd_config_defaults(attnd_config *c);

/* Apply a JSON configuration file (keys as the long flags, plus "pools": an
 * array of pool_create maps); unknown keys are an error with their path. */
int attnd_config_load_file(attnd_config *c, const char *path, attn_error_detail *err);

/* Check the settings together (a non-loopback or TLS listener's
 * requirements); E_* naming the setting. */
int attnd_config_check(const attnd_config *c, attn_error_detail *err);

/* The first setting that differs between a and b and takes a restart to
 * change (--max-buffers and --max-buffer-bytes among them; everything but --max-reply,
 * --conn-inflight, --send-timeout-ms,
 * --idle-timeout-ms, --drain-timeout-ms, which SIGHUP applies live); NULL
 * when none does. */
const char *attnd_config_restart_setting(const attnd_config *a, const attnd_config *b);

/* Apply command-line flags (argv[0] skipped); --config FILE is applied at its
 * position, so later flags override the file. */
int attnd_config_parse_args(attnd_config *c, int argc, char **argv, attn_error_detail *err);

/* Parse "NAME:LAYERS:PAGES:PAGE_SIZE:HKV:D[:DTYPE[:LAYOUT[:DEVICE]]]" (the --pool flag). */
int attnd_pool_spec_parse(const char *spec, attn_pool_geometry *g, attn_error_detail *err);

/* Parse an engine name ("cpu", "cuda", "auto"). */
int attnd_engine_parse(const char *s, attnd_engine_pref *out);

/* The text printed by --help. */
const char *attnd_config_usage(void);

#endif
