/* CUDA IPC handles, semaphores and MPS detection (see ipc.h).
 *
 * Handles: cudaIpcOpenMemHandle may open one allocation once per context;
 * a second open of the same handle returns the same base and counts a
 * reference (CUDA docs), but each costs a driver call, so the cache keys
 * on the handle's 64 bytes and counts opens itself.  The allocation's size
 * comes from cuMemGetAddressRange on the opened base, which bounds every
 * registration (Triton checks the same way, ZERO-COPY.md §3).
 *
 * Driver entry points: cudaGetDriverEntryPointByVersion with the CUDA 12.0
 * ABI of each symbol (cuStreamWaitValue64 and cuStreamWriteValue64 are then
 * the _v2 functions that need no NVreg_EnableStreamMemOPs), so attnd links
 * only the runtime.
 */
#include "engines/cuda/ipc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ATTN_WITH_CUDA

int attn_cuda_ipc_create(int device, attn_cuda_ipc **out, attn_error_detail *err)
{
    *out = NULL;
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "device",
                          "this build has no CUDA (make CUDA=1)");
}

void attn_cuda_ipc_destroy(attn_cuda_ipc *c)
{
    (void)c;
}

int attn_cuda_ipc_open(attn_cuda_ipc *c, const uint8_t *handle, uint64_t offset, uint64_t bytes,
                       void **dev_ptr, attn_error_detail *err)
{
    *dev_ptr = NULL;
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "kind",
                          "cuda_ipc buffers need a CUDA build");
}

void attn_cuda_ipc_close(attn_cuda_ipc *c, void *dev_ptr)
{
}

int attn_cuda_ipc_export(int device, void *dev_ptr, uint8_t handle[64], uint64_t *offset,
                         attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "export", "no CUDA in this build");
}

uint32_t attn_cuda_ipc_open_count(attn_cuda_ipc *c)
{
    return 0;
}

int attn_cuda_ipc_wait(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                       attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "wait", "no CUDA in this build");
}

int attn_cuda_ipc_signal(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                         attn_error_detail *err)
{
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "signal", "no CUDA in this build");
}

int attn_cuda_ipc_release(attn_cuda_ipc *c, void *addr, uint64_t value)
{
    return ATTN_E_BUFFER_UNSUPPORTED;
}

int attn_cuda_ipc_pingpong(attn_cuda_ipc *c, uint32_t rounds, double *us, attn_error_detail *err)
{
    *us = 0;
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "handoff", "no CUDA in this build");
}

int attn_cuda_mps_state(int device, char *why, size_t n)
{
    if (why != NULL && n > 0)
        snprintf(why, n, "built without CUDA");
    return -1;
}

#else /* ATTN_WITH_CUDA */

#include <cuda.h>
#include <cuda_runtime_api.h>

typedef CUresult (*wait64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*write64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*errstr_fn)(CUresult, const char **);

/* One opened allocation. */
typedef struct ipc_entry {
    struct ipc_entry *next;
    uint8_t handle[CU_IPC_HANDLE_SIZE];
    char *base;
    size_t size;
    uint32_t opens;
} ipc_entry;

struct attn_cuda_ipc {
    pthread_mutex_t mu;
    int device;
    cudaStream_t control; /* releases waits; never waits itself */
    wait64_fn wait64;
    write64_fn write64;
    range_fn range;
    errstr_fn errstr;
    ipc_entry *entries;
    /* the ping-pong's own streams, events and words, made at its first use
     * and kept: freeing device memory or synchronising a stream here could
     * wait behind another client's pending semaphore wait */
    pthread_mutex_t probe_mu;
    cudaStream_t probe_a, probe_b;
    cudaEvent_t probe_e0, probe_e1;
    uint64_t *probe_w;
    uint64_t probe_next; /* the first value of the next probe (values only rise) */
};

/* The CUDA 12.0 ABI of driver symbol `name` into *fn. */
/* `field` is what the failing request names: "device" for a registration,
 * "export" for an exported pool (docs/protocol.md). */
static int entry_point(const char *name, void **fn, const char *field, attn_error_detail *err)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL) {
        *fn = NULL;
        return attn_error_set(err, ATTN_E_CUDA, field,
                              "the CUDA driver has no %s (cudaGetDriverEntryPointByVersion: %s)",
                              name, e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
    }
    return 0;
}

static const char *cu_text(const attn_cuda_ipc *c, CUresult r)
{
    const char *s = NULL;
    if (c->errstr == NULL || c->errstr(r, &s) != CUDA_SUCCESS || s == NULL)
        return "unknown driver error";
    return s;
}

int attn_cuda_ipc_create(int device, attn_cuda_ipc **out, attn_error_detail *err)
{
    attn_cuda_ipc *c = calloc(1, sizeof *c);
    cudaError_t e;
    int rv;
    *out = NULL;
    if (c == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "device", "out of memory");
    c->device = device;
    if ((rv = entry_point("cuStreamWaitValue64", (void **)&c->wait64, "device", err)) != 0 ||
        (rv = entry_point("cuStreamWriteValue64", (void **)&c->write64, "device", err)) != 0 ||
        (rv = entry_point("cuMemGetAddressRange", (void **)&c->range, "device", err)) != 0 ||
        (rv = entry_point("cuGetErrorString", (void **)&c->errstr, "device", err)) != 0) {
        free(c);
        return rv;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c->control, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        return attn_error_set(err, ATTN_E_CUDA, "device", "cannot create the control stream: %s",
                              cudaGetErrorString(e));
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->probe_mu, NULL);
    c->probe_next = 1;
    *out = c;
    return 0;
}

void attn_cuda_ipc_destroy(attn_cuda_ipc *c)
{
    if (c == NULL)
        return;
    cudaSetDevice(c->device);
    while (c->entries != NULL) {
        ipc_entry *x = c->entries;
        c->entries = x->next;
        cudaIpcCloseMemHandle(x->base);
        free(x);
    }
    cudaStreamSynchronize(c->control);
    cudaStreamDestroy(c->control);
    if (c->probe_a != NULL) {
        /* at shutdown: the streams were released (probe_stuck) or are idle */
        cudaStreamDestroy(c->probe_a);
        cudaStreamDestroy(c->probe_b);
        cudaEventDestroy(c->probe_e0);
        cudaEventDestroy(c->probe_e1);
        cudaFree(c->probe_w);
    }
    pthread_mutex_destroy(&c->probe_mu);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int attn_cuda_ipc_open(attn_cuda_ipc *c, const uint8_t *handle, uint64_t offset, uint64_t bytes,
                       void **dev_ptr, attn_error_detail *err)
{
    ipc_entry *x;
    int rv = 0;
    *dev_ptr = NULL;
    pthread_mutex_lock(&c->mu);
    for (x = c->entries; x != NULL; x = x->next)
        if (memcmp(x->handle, handle, sizeof x->handle) == 0)
            break;
    if (x == NULL) {
        cudaIpcMemHandle_t h;
        void *base = NULL;
        CUdeviceptr rbase = 0;
        size_t size = 0;
        cudaError_t e;
        memcpy(&h, handle, sizeof h);
        if ((e = cudaSetDevice(c->device)) != cudaSuccess ||
            (e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: clear it for the next call */
            rv = attn_error_set(
                err, ATTN_E_BUFFER_UNSUPPORTED, "handle",
                "cannot open the CUDA IPC handle on cuda:%d (cudaIpcOpenMemHandle: %s); it must "
                "come from cudaIpcGetMemHandle on a cudaMalloc allocation of another live process "
                "(torch's expandable segments and cuMemCreate memory cannot be shared this way)",
                c->device, cudaGetErrorString(e));
            goto out;
        }
        CUresult r = c->range(&rbase, &size, (CUdeviceptr)(uintptr_t)base);
        if (r != CUDA_SUCCESS) {
            cudaIpcCloseMemHandle(base);
            rv = attn_error_set(err, ATTN_E_CUDA, "handle",
                                "cuMemGetAddressRange of the opened handle failed: %s",
                                cu_text(c, r));
            goto out;
        }
        if ((x = calloc(1, sizeof *x)) == NULL) {
            cudaIpcCloseMemHandle(base);
            rv = attn_error_set(err, ATTN_E_NOMEM, "handle", "out of memory");
            goto out;
        }
        memcpy(x->handle, handle, sizeof x->handle);
        x->base = (char *)(uintptr_t)rbase;
        x->size = size;
        x->next = c->entries;
        c->entries = x;
    }
    if (offset > x->size) {
        rv = attn_error_set(err, ATTN_E_BUFFER_RANGE, "offset",
                            "offset %llu is past the end of the handle's allocation (%zu bytes)",
                            (unsigned long long)offset, x->size);
    } else if (bytes > x->size - offset) {
        rv = attn_error_set(err, ATTN_E_BUFFER_RANGE, "bytes",
                            "[%llu, +%llu) ends past the handle's allocation (%zu bytes)",
                            (unsigned long long)offset, (unsigned long long)bytes, x->size);
    } else {
        x->opens++;
        *dev_ptr = x->base + offset;
    }
    if (rv != 0 && x->opens == 0) {
        /* a fresh entry nobody uses: close it again */
        ipc_entry **pp = &c->entries;
        while (*pp != x)
            pp = &(*pp)->next;
        *pp = x->next;
        cudaIpcCloseMemHandle(x->base);
        free(x);
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rv;
}

int attn_cuda_ipc_export(int device, void *dev_ptr, uint8_t handle[64], uint64_t *offset,
                         attn_error_detail *err)
{
    range_fn range = NULL;
    CUdeviceptr base = 0;
    size_t size = 0;
    cudaIpcMemHandle_t h;
    cudaError_t e;
    int rv;
    if ((rv = entry_point("cuMemGetAddressRange", (void **)&range, "export", err)) != 0)
        return rv;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaIpcGetMemHandle(&h, dev_ptr)) != cudaSuccess) {
        cudaGetLastError();
        return attn_error_set(err, ATTN_E_CUDA, "export",
                              "cudaIpcGetMemHandle of the pool on cuda:%d failed: %s", device,
                              cudaGetErrorString(e));
    }
    if (range(&base, &size, (CUdeviceptr)(uintptr_t)dev_ptr) != CUDA_SUCCESS)
        return attn_error_set(err, ATTN_E_CUDA, "export",
                              "cuMemGetAddressRange of the pool on cuda:%d failed", device);
    _Static_assert(sizeof h == 64, "a legacy IPC handle has 64 bytes");
    memcpy(handle, &h, sizeof h);
    *offset = (uint64_t)((uintptr_t)dev_ptr - (uintptr_t)base);
    return 0;
}

void attn_cuda_ipc_close(attn_cuda_ipc *c, void *dev_ptr)
{
    char *p = dev_ptr;
    pthread_mutex_lock(&c->mu);
    for (ipc_entry **pp = &c->entries; *pp != NULL; pp = &(*pp)->next) {
        ipc_entry *x = *pp;
        if (p < x->base || p > x->base + x->size)
            continue;
        if (--x->opens == 0) {
            /* nothing still queued may use it: the instance's runs are done
             * (their holds kept the buffer until then) */
            *pp = x->next;
            cudaSetDevice(c->device);
            cudaIpcCloseMemHandle(x->base);
            free(x);
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

uint32_t attn_cuda_ipc_open_count(attn_cuda_ipc *c)
{
    uint32_t n = 0;
    pthread_mutex_lock(&c->mu);
    for (ipc_entry *x = c->entries; x != NULL; x = x->next)
        n++;
    pthread_mutex_unlock(&c->mu);
    return n;
}

int attn_cuda_ipc_wait(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                       attn_error_detail *err)
{
    CUresult r =
        c->wait64((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
        return attn_error_set(err, ATTN_E_CUDA, "wait", "cuStreamWaitValue64 failed: %s",
                              cu_text(c, r));
    return 0;
}

int attn_cuda_ipc_signal(attn_cuda_ipc *c, void *stream, void *addr, uint64_t value,
                         attn_error_detail *err)
{
    CUresult r = c->write64((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                            CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
        return attn_error_set(err, ATTN_E_CUDA, "signal", "cuStreamWriteValue64 failed: %s",
                              cu_text(c, r));
    return 0;
}

int attn_cuda_ipc_release(attn_cuda_ipc *c, void *addr, uint64_t value)
{
    CUresult r = c->write64((CUstream)c->control, (CUdeviceptr)(uintptr_t)addr, value,
                            CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? 0 : ATTN_E_CUDA;
}

/* Enqueue round trips first..last of the ping-pong on streams a and b. */
static int pingpong_rounds(attn_cuda_ipc *c, cudaStream_t a, cudaStream_t b, uint64_t *w,
                           uint64_t first, uint64_t last, attn_error_detail *err)
{
    int rv = 0;
    for (uint64_t n = first; n <= last && rv == 0; n++) {
        if ((rv = attn_cuda_ipc_wait(c, a, &w[0], n, err)) == 0 &&
            (rv = attn_cuda_ipc_signal(c, a, &w[1], n, err)) == 0 &&
            (rv = attn_cuda_ipc_signal(c, b, &w[0], n, err)) == 0)
            rv = attn_cuda_ipc_wait(c, b, &w[1], n, err);
    }
    return rv;
}

/* The probe's streams, events and words, made once (caller holds probe_mu). */
static int probe_setup(attn_cuda_ipc *c, attn_error_detail *err)
{
    cudaError_t e;
    if (c->probe_a != NULL)
        return 0;
    if ((e = cudaSetDevice(c->device)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->probe_w, 2 * sizeof *c->probe_w)) != cudaSuccess ||
        (e = cudaMemset(c->probe_w, 0, 2 * sizeof *c->probe_w)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c->probe_a, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c->probe_b, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&c->probe_e0)) != cudaSuccess ||
        (e = cudaEventCreate(&c->probe_e1)) != cudaSuccess) {
        cudaGetLastError();
        c->probe_a = NULL; /* not made: the next probe tries again (the rest leaks) */
        return attn_error_set(err, ATTN_E_CUDA, "handoff", "cannot set up the ping-pong: %s",
                              cudaGetErrorString(e));
    }
    return 0;
}

int attn_cuda_ipc_pingpong(attn_cuda_ipc *c, uint32_t rounds, double *us, attn_error_detail *err)
{
    cudaError_t e = cudaSuccess;
    int rv;
    float ms = 0;
    *us = 0;
    if (rounds == 0)
        rounds = 1;
    pthread_mutex_lock(&c->probe_mu);
    if ((rv = probe_setup(c, err)) != 0)
        goto out;
    cudaSetDevice(c->device);
    if (cudaEventQuery(c->probe_e1) == cudaErrorNotReady) {
        /* an earlier probe never finished: its streams sit behind something */
        rv =
            attn_error_set(err, ATTN_E_TIMEOUT, "handoff",
                           "an earlier semaphore ping-pong on cuda:%d has not finished", c->device);
        goto out;
    }
    uint64_t first = c->probe_next, last = first + rounds; /* round `first` warms up */
    c->probe_next = last + 1;
    uint64_t *w = c->probe_w;
    if ((rv = pingpong_rounds(c, c->probe_a, c->probe_b, w, first, first, err)) != 0 ||
        (e = cudaEventRecord(c->probe_e0, c->probe_b)) != cudaSuccess ||
        (rv = pingpong_rounds(c, c->probe_a, c->probe_b, w, first + 1, last, err)) != 0 ||
        (e = cudaEventRecord(c->probe_e1, c->probe_b)) != cudaSuccess) {
        if (rv == 0)
            rv = attn_error_set(err, ATTN_E_CUDA, "handoff", "cudaEventRecord: %s",
                                cudaGetErrorString(e));
        goto release;
    }
    /* poll, never block: a stuck probe must not hold the registration */
    for (int i = 0; i < 1000; i++) {
        e = cudaEventQuery(c->probe_e1);
        if (e != cudaErrorNotReady)
            break;
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
    if (e == cudaErrorNotReady) {
        rv = attn_error_set(err, ATTN_E_TIMEOUT, "handoff",
                            "the semaphore ping-pong on cuda:%d did not finish in 100 ms (a "
                            "stream of it may share a hardware queue with a waiting one)",
                            c->device);
        goto release;
    }
    if (e != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, c->probe_e0, c->probe_e1)) != cudaSuccess) {
        cudaGetLastError();
        rv = attn_error_set(err, ATTN_E_CUDA, "handoff", "the ping-pong failed: %s",
                            cudaGetErrorString(e));
        goto out;
    }
    *us = (double)ms * 1000.0 / rounds;
    goto out;
release:
    /* let whatever was enqueued pass: the last values from the control
     * stream (a write from another stream of this process releases a wait);
     * nothing here waits for it */
    attn_cuda_ipc_release(c, &w[0], last);
    attn_cuda_ipc_release(c, &w[1], last);
out:
    pthread_mutex_unlock(&c->probe_mu);
    return rv;
}

int attn_cuda_mps_state(int device, char *why, size_t n)
{
    attr_fn attr = NULL;
    attn_error_detail e;
    int v = 0;
    if (entry_point("cuDeviceGetAttribute", (void **)&attr, "device", &e) != 0) {
        if (why != NULL && n > 0)
            snprintf(why, n, "%s", e.message);
        return -1;
    }
    /* the attribute exists from CUDA 12.? drivers on; an older driver says invalid value */
    CUresult r = attr(&v, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, (CUdevice)device);
    if (r != CUDA_SUCCESS) {
        if (why != NULL && n > 0)
            snprintf(why, n, "cuDeviceGetAttribute(MPS_ENABLED) failed (driver error %d)", (int)r);
        return -1;
    }
    if (why != NULL && n > 0)
        snprintf(why, n,
                 v ? "contexts on cuda:%d are shared through MPS: a GPU-side hand-off between "
                     "processes overlaps (buffer_register measures its ping-pong)"
                   : "no MPS on cuda:%d: the contexts of two processes time-slice, so a GPU-side "
                     "hand-off costs ~140 us each way (start nvidia-cuda-mps-control -d)",
                 device);
    return v ? 1 : 0;
}

#endif /* ATTN_WITH_CUDA */
