/* attnd's log (see log.h). */
#include "daemon/log.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 2048

struct attnd_log {
    attnd_log_opts o;
    pthread_mutex_t bucket_lock;
    double tokens;
    uint64_t refill_ns;        /* monotonic time of the last refill */
    uint64_t pending_suppress; /* suppressed since the last line that passed */
    _Atomic uint64_t suppressed;
};

static const char *const level_names[] = {
#define X(name, str, prio) str,
    ATTND_LOG_LEVELS(X)
#undef X
};
static const int level_prio[] = {
#define X(name, str, prio) prio,
    ATTND_LOG_LEVELS(X)
#undef X
};
static const char *const format_names[] = {
#define X(name, str) str,
    ATTND_LOG_FORMATS(X)
#undef X
};

const char *attnd_log_level_name(attnd_log_level level)
{
    return (unsigned)level < ATTND_LOG_LEVEL_COUNT ? level_names[level] : "?";
}

int attnd_log_level_parse(const char *s, attnd_log_level *out)
{
    for (int i = 0; i < ATTND_LOG_LEVEL_COUNT; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (attnd_log_level)i;
            return 0;
        }
    return -1;
}

int attnd_log_format_parse(const char *s, attnd_log_format *out)
{
    for (int i = 0; i < ATTND_LOG_FORMAT_COUNT; i++)
        if (strcmp(s, format_names[i]) == 0) {
            *out = (attnd_log_format)i;
            return 0;
        }
    return -1;
}

void attnd_log_opts_default(attnd_log_opts *o)
{
    memset(o, 0, sizeof *o);
    o->level = ATTND_LOG_INFO;
    o->format = ATTND_LOG_FORMAT_AUTO;
    o->fd = 2;
    o->warn_per_s = ATTND_DEFAULT_LOG_WARN_PER_S;
    o->warn_burst = ATTND_DEFAULT_LOG_WARN_BURST;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

attnd_log *attnd_log_create(const attnd_log_opts *o)
{
    attnd_log *log = calloc(1, sizeof *log);
    if (log == NULL)
        return NULL;
    log->o = *o;
    if (log->o.format == ATTND_LOG_FORMAT_AUTO) {
        /* systemd sets JOURNAL_STREAM when stderr is connected to journald */
        const char *js = getenv("JOURNAL_STREAM");
        log->o.format =
            js != NULL && js[0] != '\0' ? ATTND_LOG_FORMAT_JOURNAL : ATTND_LOG_FORMAT_PLAIN;
    }
    pthread_mutex_init(&log->bucket_lock, NULL);
    log->tokens = o->warn_burst;
    log->refill_ns = mono_ns();
    return log;
}

void attnd_log_destroy(attnd_log *log)
{
    if (log == NULL)
        return;
    pthread_mutex_destroy(&log->bucket_lock);
    free(log);
}

int attnd_log_enabled(const attnd_log *log, attnd_log_level level)
{
    return log != NULL && level <= log->o.level;
}

/* Format and write one line: [<N>]TIMESTAMP LEVEL message\n, one write(2). */
static void emit(attnd_log *log, attnd_log_level level, const char *fmt, va_list ap)
{
    char msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 128];
    struct timespec ts;
    struct tm tm;
    size_t n = 0;
    int m;

    m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    if (log->o.format == ATTND_LOG_FORMAT_JOURNAL)
        n += (size_t)snprintf(line, sizeof line, "<%d>", level_prio[level]);
    n += strftime(line + n, sizeof line - n, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %s ", ts.tv_nsec / 1000000L,
                          level_names[level]);
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        if (n + 5 >= sizeof line)
            break;
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02x", *p);
        else
            line[n++] = (char)*p;
    }
    if ((size_t)m >= sizeof msg && n + 4 < sizeof line) {
        memcpy(line + n, "...", 3); /* say the line was cut */
        n += 3;
    }
    line[n++] = '\n';
    for (size_t off = 0; off < n;) {
        ssize_t w = write(log->o.fd, line + off, n - off);
        if (w <= 0)
            return; /* a log that cannot be written must not stop serving */
        off += (size_t)w;
    }
}

void attnd_log_write(attnd_log *log, attnd_log_level level, const char *fmt, ...)
{
    va_list ap;
    if (!attnd_log_enabled(log, level))
        return;
    va_start(ap, fmt);
    emit(log, level, fmt, ap);
    va_end(ap);
}

/* Take a token; returns 1 when the line may pass and sets *was_suppressed to
 * the lines dropped since the last one that passed. */
static int take_token(attnd_log *log, uint64_t *was_suppressed)
{
    int pass;
    uint64_t now = mono_ns();
    pthread_mutex_lock(&log->bucket_lock);
    log->tokens += (double)(now - log->refill_ns) * 1e-9 * log->o.warn_per_s;
    if (log->tokens > log->o.warn_burst)
        log->tokens = log->o.warn_burst;
    log->refill_ns = now;
    pass = log->tokens >= 1.0;
    if (pass) {
        log->tokens -= 1.0;
        *was_suppressed = log->pending_suppress;
        log->pending_suppress = 0;
    } else {
        log->pending_suppress++;
        atomic_fetch_add(&log->suppressed, 1);
    }
    pthread_mutex_unlock(&log->bucket_lock);
    return pass;
}

void attnd_log_limited(attnd_log *log, attnd_log_level level, const char *fmt, ...)
{
    va_list ap;
    uint64_t dropped = 0;
    if (!attnd_log_enabled(log, level) || !take_token(log, &dropped))
        return;
    if (dropped > 0)
        attnd_log_write(log, ATTND_LOG_WARN,
                        "log: %llu client-triggered lines suppressed (more than %u/s)",
                        (unsigned long long)dropped, log->o.warn_per_s);
    va_start(ap, fmt);
    emit(log, level, fmt, ap);
    va_end(ap);
}

uint64_t attnd_log_suppressed(const attnd_log *log)
{
    return log == NULL ? 0 : atomic_load(&log->suppressed);
}

#if NNG_MAJOR_VERSION > 1 || (NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION >= 9)
/* nng's logger callback takes no user pointer, so the target is the one
 * process-wide variable of this module (nng's logger is process-wide too). */
static _Atomic(attnd_log *) nng_target;

static void nng_bridge(nng_log_level level, nng_log_facility facility, const char *msgid,
                       const char *msg)
{
    attnd_log *log = atomic_load(&nng_target);
    (void)facility;
    if (log == NULL)
        return;
    attnd_log_limited(log, level <= NNG_LOG_ERR ? ATTND_LOG_ERROR : ATTND_LOG_WARN, "nng: %s: %s",
                      msgid != NULL ? msgid : "-", msg != NULL ? msg : "");
}

void attnd_log_attach_nng(attnd_log *log)
{
    atomic_store(&nng_target, log);
    nng_log_set_level(NNG_LOG_WARN);
    nng_log_set_logger(log != NULL ? nng_bridge : nng_null_logger);
}
#else
void attnd_log_attach_nng(attnd_log *log)
{
    /* nng before 1.9 has no log API: oversized frames close the pipe silently */
    (void)log;
}
#endif
