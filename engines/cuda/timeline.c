/* The CUDA engine's GPU timeline (see timeline.h): stamps in mapped pinned
 * memory, one JSON line per completed run. */
#include "engines/cuda/timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ATTN_WITH_CUDA

int attn_cuda_timeline_open(const char *path, uint32_t slots, attn_cuda_timeline **out,
                            attn_error_detail *err)
{
    *out = NULL;
    return attn_error_set(err, ATTN_E_ENGINE, "ATTN_CUDA_TIMELINE", "built without CUDA");
}

void attn_cuda_timeline_close(attn_cuda_timeline *t)
{
}

void attn_cuda_timeline_begin(attn_cuda_timeline *t, uint32_t slot, uint32_t layer,
                              uint64_t wait_value, uint64_t signal_value, bool host_behind)
{
}

int attn_cuda_timeline_stamp(attn_cuda_timeline *t, uint32_t slot, attn_cuda_timeline_point point,
                             void *stream)
{
    return ATTN_E_ENGINE;
}

void attn_cuda_timeline_write(attn_cuda_timeline *t, uint32_t slot)
{
}

#else /* ATTN_WITH_CUDA */

#include <cuda_runtime_api.h>

#include "kernels/cuda/stamp.h"

/* What a run's line says besides its stamps. */
typedef struct tl_run {
    uint32_t layer;
    uint64_t wait_value, signal_value;
    bool host_behind;
} tl_run;

struct attn_cuda_timeline {
    pthread_mutex_t mu; /* the file: runs complete on the engine's and the completer's threads */
    FILE *f;
    uint32_t slots;
    uint64_t *host; /* [slots][ATTN_TL_NUM_POINTS], mapped: the stamp kernels write it */
    uint64_t *dev;  /* the same memory as the device sees it */
    tl_run *runs;   /* [slots] */
};

static const char *const g_point_names[] = {
#define ATTN__TL_NAME(e, v, name) [v] = name,
    ATTN_CUDA_TIMELINE_POINTS(ATTN__TL_NAME)
#undef ATTN__TL_NAME
};

int attn_cuda_timeline_open(const char *path, uint32_t slots, attn_cuda_timeline **out,
                            attn_error_detail *err)
{
    *out = NULL;
    attn_cuda_timeline *t = calloc(1, sizeof *t);
    if (t == NULL || slots == 0 || (t->runs = calloc(slots, sizeof *t->runs)) == NULL) {
        free(t);
        return attn_error_set(err, ATTN_E_NOMEM, "ATTN_CUDA_TIMELINE", "out of memory");
    }
    t->slots = slots;
    size_t bytes = (size_t)slots * ATTN_TL_NUM_POINTS * sizeof(uint64_t);
    cudaError_t e = cudaHostAlloc((void **)&t->host, bytes, cudaHostAllocMapped);
    if (e == cudaSuccess)
        e = cudaHostGetDevicePointer((void **)&t->dev, t->host, 0);
    if (e != cudaSuccess) {
        if (t->host != NULL)
            cudaFreeHost(t->host);
        free(t->runs);
        free(t);
        return attn_error_set(err, ATTN_E_CUDA, "ATTN_CUDA_TIMELINE",
                              "cannot map the timeline's stamps: %s", cudaGetErrorString(e));
    }
    memset(t->host, 0, bytes);
    if ((t->f = fopen(path, "w")) == NULL) {
        int en = errno;
        cudaFreeHost(t->host);
        free(t->runs);
        free(t);
        return attn_error_set(err, ATTN_E_IO, "ATTN_CUDA_TIMELINE", "cannot write %s: %s", path,
                              strerror(en));
    }
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

void attn_cuda_timeline_close(attn_cuda_timeline *t)
{
    if (t == NULL)
        return;
    fclose(t->f);
    cudaFreeHost(t->host);
    pthread_mutex_destroy(&t->mu);
    free(t->runs);
    free(t);
}

void attn_cuda_timeline_begin(attn_cuda_timeline *t, uint32_t slot, uint32_t layer,
                              uint64_t wait_value, uint64_t signal_value, bool host_behind)
{
    tl_run *r = &t->runs[slot % t->slots];
    r->layer = layer;
    r->wait_value = wait_value;
    r->signal_value = signal_value;
    r->host_behind = host_behind;
    /* a stamp a run does not reach reads 0 in its line */
    memset(&t->host[(slot % t->slots) * ATTN_TL_NUM_POINTS], 0,
           ATTN_TL_NUM_POINTS * sizeof(uint64_t));
}

int attn_cuda_timeline_stamp(attn_cuda_timeline *t, uint32_t slot, attn_cuda_timeline_point point,
                             void *stream)
{
    return attn_cuda_stamp_launch(&t->dev[(slot % t->slots) * ATTN_TL_NUM_POINTS + point], stream);
}

void attn_cuda_timeline_write(attn_cuda_timeline *t, uint32_t slot)
{
    const tl_run *r = &t->runs[slot % t->slots];
    const volatile uint64_t *s = &t->host[(slot % t->slots) * ATTN_TL_NUM_POINTS];
    pthread_mutex_lock(&t->mu);
    fprintf(t->f, "{\"layer\":%u,\"wait\":%llu,\"signal\":%llu,\"host_behind\":%s", r->layer,
            (unsigned long long)r->wait_value, (unsigned long long)r->signal_value,
            r->host_behind ? "true" : "false");
    for (int i = 0; i < ATTN_TL_NUM_POINTS; i++)
        fprintf(t->f, ",\"%s\":%llu", g_point_names[i], (unsigned long long)s[i]);
    fputs("}\n", t->f);
    fflush(t->f); /* read while attnd runs */
    pthread_mutex_unlock(&t->mu);
}

#endif /* ATTN_WITH_CUDA */
