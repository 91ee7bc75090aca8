/* attnd's log: one line per event on stderr (journald-friendly), each with
 * an RFC 3339 UTC timestamp and a level; optional "<N>" syslog priority
 * prefixes so journald files each line under its level.
 *
 * Client-triggered lines (error replies, malformed or oversized frames) go
 * through a token bucket: a flood of bad requests costs at most `warn_burst`
 * lines, then `warn_per_s` per second, and the next line that passes says
 * how many were suppressed.  Each line is one write(2), so lines from
 * several threads never interleave.
 */
#ifndef ATTN_DAEMON_LOG_H
#define ATTN_DAEMON_LOG_H

#include <stdint.h>

/* X(NAME, name, syslog priority) */
#define ATTND_LOG_LEVELS(X)                                                                        \
    X(ERROR, "error", 3)                                                                           \
    X(WARN, "warn", 4)                                                                             \
    X(INFO, "info", 6)                                                                             \
    X(DEBUG, "debug", 7)

#define ATTND__LOG_ENUM(name, str, prio) ATTND_LOG_##name,
typedef enum attnd_log_level {
    ATTND_LOG_LEVELS(ATTND__LOG_ENUM) ATTND_LOG_LEVEL_COUNT
} attnd_log_level;
#undef ATTND__LOG_ENUM

/* X(NAME, name) */
#define ATTND_LOG_FORMATS(X)                                                                       \
    X(AUTO, "auto")       /* journal when $JOURNAL_STREAM is set (stderr goes to journald) */      \
    X(PLAIN, "plain")     /* timestamp level message */                                            \
    X(JOURNAL, "journal") /* "<N>" priority prefix, then as plain */

#define ATTND__LOGF_ENUM(name, str) ATTND_LOG_FORMAT_##name,
typedef enum attnd_log_format {
    ATTND_LOG_FORMATS(ATTND__LOGF_ENUM) ATTND_LOG_FORMAT_COUNT
} attnd_log_format;
#undef ATTND__LOGF_ENUM

#define ATTND_DEFAULT_LOG_WARN_PER_S 10 /* client-triggered lines per second, sustained */
#define ATTND_DEFAULT_LOG_WARN_BURST 50 /* ... and at once */

typedef struct attnd_log_opts {
    attnd_log_level level; /* lines above it are dropped */
    attnd_log_format format;
    int fd;              /* where lines go (2 = stderr) */
    uint32_t warn_per_s; /* token refill rate of the client-triggered bucket */
    uint32_t warn_burst; /* bucket size */
} attnd_log_opts;

typedef struct attnd_log attnd_log;

/* The level's name ("warn"), or "?" out of range. */
const char *attnd_log_level_name(attnd_log_level level);

/* Parse a level name; returns 0, or -1 for an unknown name. */
int attnd_log_level_parse(const char *s, attnd_log_level *out);

/* Parse a format name ("auto", "plain", "journal"); returns 0 or -1. */
int attnd_log_format_parse(const char *s, attnd_log_format *out);

/* Fill `o` with the defaults: info, auto, stderr, the documented bucket. */
void attnd_log_opts_default(attnd_log_opts *o);

/* A log writing to o->fd; NULL when out of memory.  AUTO is resolved here. */
attnd_log *attnd_log_create(const attnd_log_opts *o);

/* Free the log (the fd is not closed). */
void attnd_log_destroy(attnd_log *log);

/* Whether a line at `level` would be written (skip formatting work when not);
 * false for a NULL log. */
int attnd_log_enabled(const attnd_log *log, attnd_log_level level);

/* Write one line at `level` (NULL log: nothing).  Control bytes in the
 * message are escaped as \xNN, so client-supplied text cannot forge lines. */
void attnd_log_write(attnd_log *log, attnd_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As attnd_log_write, through the client-triggered token bucket. */
void attnd_log_limited(attnd_log *log, attnd_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* How many client-triggered lines the bucket has suppressed so far. */
uint64_t attnd_log_suppressed(const attnd_log *log);

/* Route nng's own log messages (nng >= 1.9: oversized frames, failed
 * negotiations) into `log` as client-triggered lines; NULL detaches.  nng has
 * one process-wide logger, so only one attnd_log can be attached. */
void attnd_log_attach_nng(attnd_log *log);

#endif
