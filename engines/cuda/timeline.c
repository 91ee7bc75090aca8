/* The CUDA engine's GPU timeline (see timeline.h): stamps in mapped pinned
 * memory, one JSON line per completed run appended to the file
 * (timeline_file.h). */
#include "engines/cuda/timeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ATTN_WITH_CUDA

int attn_cuda_timeline_open(const char *path, int device, uint32_t slots, attn_cuda_timeline **out,
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

#include "engines/cuda/timeline_file.h"
#include "kernels/cuda/stamp.h"

/* What a run's line says besides its stamps. */
typedef struct tl_run {
    uint32_t layer;
    uint64_t wait_value, signal_value;
    bool host_behind;
} tl_run;

struct attn_cuda_timeline {
    attn_tl_file *file; /* one write per line: the engine's and the completer's threads share it */
    uint32_t slots;
    uint64_t *host; /* [slots][ATTN_TL_NUM_POINTS], mapped: the stamp kernels write it */
    uint64_t *dev;  /* the same memory as the device sees it */
    tl_run *runs;   /* [slots] */
};

int attn_cuda_timeline_open(const char *path, int device, uint32_t slots, attn_cuda_timeline **out,
                            attn_error_detail *err)
{
    *out = NULL;
    attn_cuda_timeline *t = calloc(1, sizeof *t);
    if (t == NULL || slots == 0 || (t->runs = calloc(slots, sizeof *t->runs)) == NULL) {
        free(t);
        return attn_error_set(err, ATTN_E_NOMEM, "ATTN_CUDA_TIMELINE", "out of memory");
    }
    int rv = attn_tl_file_open(path, device, &t->file, err);
    if (rv != 0) {
        free(t->runs);
        free(t);
        return rv;
    }
    t->slots = slots;
    size_t bytes = (size_t)slots * ATTN_TL_NUM_POINTS * sizeof(uint64_t);
    cudaError_t e = cudaHostAlloc((void **)&t->host, bytes, cudaHostAllocMapped);
    if (e == cudaSuccess)
        e = cudaHostGetDevicePointer((void **)&t->dev, t->host, 0);
    if (e != cudaSuccess) {
        if (t->host != NULL)
            cudaFreeHost(t->host);
        attn_tl_file_close(t->file);
        free(t->runs);
        free(t);
        return attn_error_set(err, ATTN_E_CUDA, "ATTN_CUDA_TIMELINE",
                              "cannot map the timeline's stamps: %s", cudaGetErrorString(e));
    }
    memset(t->host, 0, bytes);
    *out = t;
    return 0;
}

void attn_cuda_timeline_close(attn_cuda_timeline *t)
{
    if (t == NULL)
        return;
    attn_tl_file_close(t->file);
    cudaFreeHost(t->host);
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
    attn_tl_record rec = {.layer = r->layer,
                          .wait_value = r->wait_value,
                          .signal_value = r->signal_value,
                          .host_behind = r->host_behind};
    for (int i = 0; i < ATTN_TL_NUM_POINTS; i++)
        rec.stamps[i] = s[i];
    (void)attn_tl_file_write(t->file, &rec); /* a diagnostic: a lost line fails no run */
}

#endif /* ATTN_WITH_CUDA */
