/* attnd counters and their Prometheus text exposition (see metrics.h). */
#include "daemon/metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "attn/error.h"
#include "daemon/oversize.h"

#define ATTND__BOUND_NS(b) (uint64_t)((b)*1e9),
#define ATTND__BOUND_TEXT(b) #b,

static const uint64_t g_bound_ns[ATTND_NUM_BUCKETS] = {ATTND_LATENCY_BUCKETS(ATTND__BOUND_NS)};
static const char *const g_bound_text[ATTND_NUM_BUCKETS] = {
    ATTND_LATENCY_BUCKETS(ATTND__BOUND_TEXT)};

static const char *const g_platform[ATTND_NUM_PLATFORMS] = {"unknown", "cpu", "cuda"};

void attnd_metrics_observe(attnd_metrics *m, attn_op op, int code, uint64_t ns)
{
    unsigned slot = (unsigned)op < ATTN_OP_COUNT ? (unsigned)op : ATTN_OP_COUNT;
    attnd_histogram *h = &m->op_latency[slot];
    int b = 0;
    while (b < ATTND_NUM_BUCKETS && ns > g_bound_ns[b])
        b++;
    atomic_fetch_add_explicit(&m->op_requests[slot], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    if (code != 0) {
        unsigned c = code < 0 && -code < ATTND_NUM_ERROR_CODES ? (unsigned)-code
                                                               : (unsigned)-ATTN_E_INTERNAL;
        atomic_fetch_add_explicit(&m->op_errors[slot], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->error_codes[c], 1, memory_order_relaxed);
    }
}

void attnd_metrics_note_engine(attnd_metrics *m, int platform, uint64_t ns)
{
    int p = platform > 0 && platform < ATTND_NUM_PLATFORMS ? platform : 0;
    atomic_fetch_add_explicit(&m->engine_ns[p], ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->engine_runs[p], 1, memory_order_relaxed);
}

int attnd_metrics_ready(const attnd_metrics *m)
{
    return atomic_load(&m->engines_ready) && atomic_load(&m->listening) &&
           !atomic_load(&m->draining);
}

static const char *op_label(unsigned slot)
{
    return slot < ATTN_OP_COUNT ? attn_op_name((attn_op)slot) : "unreadable";
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
    family(f, name, type, help);
    fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

static void seconds(FILE *f, uint64_t ns)
{
    fprintf(f, "%.9f", (double)ns / 1e9);
}

static void render_requests(FILE *f, const attnd_metrics *m)
{
    family(f, "attnd_requests_total", "counter", "Requests answered, by op.");
    for (unsigned s = 0; s < ATTND_OP_SLOTS; s++)
        fprintf(f, "attnd_requests_total{op=\"%s\"} %llu\n", op_label(s),
                (unsigned long long)atomic_load(&m->op_requests[s]));
    family(f, "attnd_request_errors_total", "counter", "Error replies, by op.");
    for (unsigned s = 0; s < ATTND_OP_SLOTS; s++)
        fprintf(f, "attnd_request_errors_total{op=\"%s\"} %llu\n", op_label(s),
                (unsigned long long)atomic_load(&m->op_errors[s]));
    family(f, "attnd_errors_total", "counter", "Error replies, by error code.");
    /* every defined code is listed, at 0 too, so a rate query always finds it */
#define ATTND__ERROR_LINE(name, num, msg)                                                          \
    if ((num) < 0 && -(num) < ATTND_NUM_ERROR_CODES)                                               \
        fprintf(f, "attnd_errors_total{code=\"E_" #name "\"} %llu\n",                              \
                (unsigned long long)atomic_load(&m->error_codes[-(num)]));
    ATTN_ERRORS(ATTND__ERROR_LINE)
#undef ATTND__ERROR_LINE
    family(f, "attnd_request_duration_seconds", "histogram",
           "Time in the request handler (decode to encoded reply), by op.");
    for (unsigned s = 0; s < ATTND_OP_SLOTS; s++) {
        const attnd_histogram *h = &m->op_latency[s];
        uint64_t cum = 0;
        for (int b = 0; b < ATTND_NUM_BUCKETS; b++) {
            cum += atomic_load(&h->bucket[b]);
            fprintf(f, "attnd_request_duration_seconds_bucket{op=\"%s\",le=\"%s\"} %llu\n",
                    op_label(s), g_bound_text[b], (unsigned long long)cum);
        }
        cum += atomic_load(&h->bucket[ATTND_NUM_BUCKETS]);
        fprintf(f, "attnd_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n",
                op_label(s), (unsigned long long)cum);
        fprintf(f, "attnd_request_duration_seconds_sum{op=\"%s\"} ", op_label(s));
        seconds(f, atomic_load(&h->sum_ns));
        fprintf(f, "\nattnd_request_duration_seconds_count{op=\"%s\"} %llu\n", op_label(s),
                (unsigned long long)cum);
    }
}

static void render_engines(FILE *f, const attnd_metrics *m)
{
    family(f, "attnd_engine_seconds_total", "counter",
           "Time spent in engine runs (GPU engine time for cuda), by engine.");
    for (int p = 1; p < ATTND_NUM_PLATFORMS; p++) {
        fprintf(f, "attnd_engine_seconds_total{engine=\"%s\"} ", g_platform[p]);
        seconds(f, atomic_load(&m->engine_ns[p]));
        fputc('\n', f);
    }
    family(f, "attnd_engine_runs_total", "counter", "Engine runs, by engine.");
    for (int p = 1; p < ATTND_NUM_PLATFORMS; p++)
        fprintf(f, "attnd_engine_runs_total{engine=\"%s\"} %llu\n", g_platform[p],
                (unsigned long long)atomic_load(&m->engine_runs[p]));
}

static void render_gauges(FILE *f, const attnd_metrics *m, const attnd_metrics_gauges *g)
{
    scalar(f, "attnd_plan_cache_entries", "gauge", "Plans held.", g->plan_entries);
    scalar(f, "attnd_plan_cache_capacity", "gauge", "Plan cache bound (entries).",
           g->plan_capacity);
    scalar(f, "attnd_plan_cache_bytes", "gauge", "Bytes held by cached plans.", g->plan_bytes);
    scalar(f, "attnd_plan_cache_hits_total", "counter", "Plans whose static key was planned.",
           g->plan_hits);
    scalar(f, "attnd_plan_cache_misses_total", "counter", "Plans of a new static key.",
           g->plan_misses);
    scalar(f, "attnd_plan_cache_replans_total", "counter",
           "Plans that changed static fields of the caller's previous plan.", g->plan_replans);
    scalar(f, "attnd_plan_cache_evictions_total", "counter", "Plans evicted.", g->plan_evictions);
    scalar(f, "attnd_plan_cache_stale_total", "counter", "Runs naming an unknown or evicted plan.",
           g->plan_stale);
    scalar(f, "attnd_pools", "gauge", "Pools.", g->pools);
    scalar(f, "attnd_pool_bytes", "gauge", "Bytes of all pools (K and V, every layer).",
           g->pool_bytes);
    scalar(f, "attnd_pool_budget_bytes", "gauge", "Pool byte budget.", g->pool_budget);
    scalar(f, "attnd_engine_failures_total", "counter", "Engine runs that failed.",
           g->engine_failures);
    scalar(f, "attnd_in_flight_requests", "gauge", "Requests received and not yet answered.",
           atomic_load(&m->in_flight));
    scalar(f, "attnd_queue_depth", "gauge", "Requests waiting for a worker thread.",
           atomic_load(&m->queued));
    scalar(f, "attnd_connections", "gauge", "Open client connections.",
           atomic_load(&m->connections));
    scalar(f, "attnd_connections_total", "counter", "Client connections opened.",
           atomic_load(&m->connections_total));
    scalar(f, "attnd_frames_received_total", "counter", "Frames received by the listener.",
           atomic_load(&m->requests));
    scalar(f, "attnd_replies_sent_total", "counter", "Replies handed to the transport.",
           atomic_load(&m->replies));
    if (attnd_oversize_observable())
        scalar(f, "attnd_frames_oversized_total", "counter",
               "Connections closed for a frame over --max-msg (nng refuses it unread).",
               atomic_load(&m->frames_oversized));
    scalar(f, "attnd_shutting_down_replies_total", "counter",
           "Requests refused because shutdown began.", atomic_load(&m->shutting_down_replies));
    scalar(f, "attnd_ready", "gauge", "1 when /health/ready answers 200.", attnd_metrics_ready(m));
}

int attnd_metrics_render(const attnd_metrics *m, const attnd_metrics_gauges *g, char **out,
                         size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return ATTN_E_NOMEM;
    render_requests(f, m);
    render_engines(f, m);
    render_gauges(f, m, g);
    if (ferror(f)) {
        fclose(f);
        free(buf);
        return ATTN_E_NOMEM;
    }
    if (fclose(f) != 0) {
        free(buf);
        return ATTN_E_NOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}
