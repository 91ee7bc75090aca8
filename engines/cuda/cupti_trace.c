/* CUPTI activity tracing of one request's kernels (seed 0x0BF). */
#include <stdio.h>
#include <string.h>

#include "engines/cuda/cupti_trace.h"

#ifndef ATTN_WITH_CUDA

int attn_cupti_available(char *why, size_t n)
{
    if (why != NULL && n > 0)
        snprintf(why, n, "built without CUDA (make CUDA=0): no CUPTI tracer");
    return 0;
}

int attn_cupti_begin(attn_error_detail *d)
{
    return attn_error_set(d, ATTN_E_CUDA, "trace", "built without CUDA: kernels cannot be traced");
}

int attn_cupti_end(attn_diag_kernel *out, uint32_t max, uint32_t *n, uint64_t *dropped,
                   attn_error_detail *d)
{
    *n = 0;
    if (dropped != NULL)
        *dropped = 0;
    return attn_error_set(d, ATTN_E_CUDA, "trace", "built without CUDA: kernels cannot be traced");
}

const char *attn_cupti_version(void)
{
    return "";
}

#else /* ATTN_WITH_CUDA */

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include <cupti.h>

#define TRACE_BUF_BYTES (1u << 20)
#define TRACE_ALIGN 8
#define TRACE_MAX_SYMBOLS 64

/* libcupti is loaded at run time (dlopen), so attnd links and runs where
 * CUPTI is not installed and says so instead; ATTN_CUPTI_LIB overrides the
 * library path.  The types come from the toolkit's cupti.h at build time. */
static struct {
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*version)(uint32_t *);
    int loaded;
    char why[160];
} g_api;
static pthread_once_t g_api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    const char *env = getenv("ATTN_CUPTI_LIB");
    const char *names[] = {env,
                           "libcupti.so",
                           "libcupti.so.13",
                           "libcupti.so.12",
                           "/usr/local/cuda/lib64/libcupti.so",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && h == NULL; i++)
        if (names[i] != NULL && names[i][0] != '\0')
            h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(g_api.why, sizeof g_api.why, "libcupti not found (set ATTN_CUPTI_LIB)");
        return;
    }
#define LOAD(field, sym)                                                                           \
    do {                                                                                           \
        *(void **)&g_api.field = dlsym(h, sym);                                                    \
        if (g_api.field == NULL) {                                                                 \
            snprintf(g_api.why, sizeof g_api.why, "libcupti lacks %s", sym);                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    LOAD(register_callbacks, "cuptiActivityRegisterCallbacks");
    LOAD(enable, "cuptiActivityEnable");
    LOAD(disable, "cuptiActivityDisable");
    LOAD(flush_all, "cuptiActivityFlushAll");
    LOAD(next_record, "cuptiActivityGetNextRecord");
    LOAD(dropped, "cuptiActivityGetNumDroppedRecords");
    LOAD(result_string, "cuptiGetResultString");
    LOAD(version, "cuptiGetVersion");
#undef LOAD
    g_api.loaded = 1;
}

static int api_ready(void)
{
    pthread_once(&g_api_once, api_load);
    return g_api.loaded;
}

/* Aggregation state of the open window; guarded by g_mu (CUPTI calls the
 * completion callback on its own thread). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_open;
static int g_registered;
static uint32_t g_count;
static attn_diag_kernel g_sym[TRACE_MAX_SYMBOLS];
static uint64_t g_dropped;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = aligned_alloc(TRACE_ALIGN, TRACE_BUF_BYTES);
    *buffer = b;
    *size = b != NULL ? TRACE_BUF_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

static void record_kernel(const CUpti_ActivityKernel10 *k)
{
    const char *name = k->name != NULL ? k->name : "(unnamed)";
    uint32_t i;
    for (i = 0; i < g_count; i++)
        if (strcmp(g_sym[i].symbol, name) == 0)
            break;
    if (i == g_count) {
        if (g_count == TRACE_MAX_SYMBOLS) {
            g_dropped++;
            return;
        }
        memset(&g_sym[i], 0, sizeof g_sym[i]);
        snprintf(g_sym[i].symbol, sizeof g_sym[i].symbol, "%s", name);
        g_sym[i].grid[0] = (uint32_t)k->gridX;
        g_sym[i].grid[1] = (uint32_t)k->gridY;
        g_sym[i].grid[2] = (uint32_t)k->gridZ;
        g_sym[i].block[0] = (uint32_t)k->blockX;
        g_sym[i].block[1] = (uint32_t)k->blockY;
        g_sym[i].block[2] = (uint32_t)k->blockZ;
        g_count++;
    }
    g_sym[i].launches++;
    if (k->end > k->start)
        g_sym[i].gpu_us += (double)(k->end - k->start) / 1e3; /* CUPTI timestamps are ns */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_mu);
    while (valid > 0 && g_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            record_kernel((const CUpti_ActivityKernel10 *)rec);
    }
    size_t lost = 0;
    if (g_api.dropped(ctx, stream, &lost) == CUPTI_SUCCESS)
        g_dropped += lost;
    pthread_mutex_unlock(&g_mu);
    free(buffer);
}

static int cupti_fail(attn_error_detail *d, const char *what, CUptiResult r)
{
    const char *s = NULL;
    g_api.result_string(r, &s);
    return attn_error_set(d, ATTN_E_CUDA, "trace", "%s: %s", what, s ? s : "CUPTI error");
}

int attn_cupti_available(char *why, size_t n)
{
    uint32_t v = 0;
    if (!api_ready()) {
        if (why != NULL && n > 0)
            snprintf(why, n, "%s", g_api.why);
        return 0;
    }
    if (g_api.version(&v) != CUPTI_SUCCESS) {
        if (why != NULL && n > 0)
            snprintf(why, n, "libcupti could not be initialised");
        return 0;
    }
    if (why != NULL && n > 0)
        why[0] = '\0';
    return 1;
}

int attn_cupti_begin(attn_error_detail *d)
{
    CUptiResult r;
    if (!api_ready())
        return attn_error_set(d, ATTN_E_CUDA, "trace", "%s", g_api.why);
    pthread_mutex_lock(&g_mu);
    if (g_open) {
        pthread_mutex_unlock(&g_mu);
        return attn_error_set(d, ATTN_E_BUSY, "trace", "another trace window is open");
    }
    g_open = 1;
    g_count = 0;
    g_dropped = 0;
    pthread_mutex_unlock(&g_mu);
    if (!g_registered) {
        r = g_api.register_callbacks(buffer_requested, buffer_completed);
        if (r != CUPTI_SUCCESS) {
            g_open = 0;
            return cupti_fail(d, "cuptiActivityRegisterCallbacks", r);
        }
        g_registered = 1;
    }
    r = g_api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        g_open = 0;
        return cupti_fail(d, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    }
    return 0;
}

int attn_cupti_end(attn_diag_kernel *out, uint32_t max, uint32_t *n, uint64_t *dropped,
                   attn_error_detail *d)
{
    *n = 0;
    if (!api_ready())
        return attn_error_set(d, ATTN_E_CUDA, "trace", "%s", g_api.why);
    /* forced flush: hand every buffer, even partly filled, to buffer_completed */
    CUptiResult r = g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    CUptiResult r2 = g_api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    pthread_mutex_lock(&g_mu);
    uint32_t k = g_count < max ? g_count : max;
    memcpy(out, g_sym, sizeof g_sym[0] * k);
    *n = k;
    if (dropped != NULL)
        *dropped = g_dropped + (g_count - k);
    g_open = 0;
    pthread_mutex_unlock(&g_mu);
    if (r != CUPTI_SUCCESS)
        return cupti_fail(d, "cuptiActivityFlushAll", r);
    if (r2 != CUPTI_SUCCESS)
        return cupti_fail(d, "cuptiActivityDisable", r2);
    return 0;
}

const char *attn_cupti_version(void)
{
    static char v[32];
    uint32_t api = 0;
    if (api_ready() && g_api.version(&api) == CUPTI_SUCCESS)
        snprintf(v, sizeof v, "cupti api %u", api);
    return v;
}

#endif /* ATTN_WITH_CUDA */
