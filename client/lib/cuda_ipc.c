/* Legacy CUDA IPC export of a device pointer through the driver API, opened
 * with dlopen per call.  Why the driver and not libcudart: libcuda.so.1 is
 * present wherever a GPU driver is, its entry points are ABI-stable across
 * CUDA releases (the runtime's soname changes with each major version and a
 * second runtime copy in the process would be a second set of state), and
 * it answers everything needed here: the allocation's base and size
 * (cuMemGetAddressRange), the device, whether the memory is legacy-IPC
 * capable (VMM / expandable-segment memory is not), and the handle.  A
 * registration is rare, so the library is opened and closed each time
 * instead of kept in a global.
 */
#include "client/lib/cuda_ipc.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* The few driver ABI values used (cuda.h, stable since CUDA 4-11). */
typedef int cu_result;
typedef unsigned long long cu_deviceptr;
enum {
    CU_OK = 0,
    CU_ATTR_CONTEXT = 1,                     /* CU_POINTER_ATTRIBUTE_CONTEXT */
    CU_ATTR_MEMORY_TYPE = 2,                 /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
    CU_ATTR_IS_MANAGED = 8,                  /* CU_POINTER_ATTRIBUTE_IS_MANAGED */
    CU_ATTR_DEVICE_ORDINAL = 9,              /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
    CU_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10, /* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE */
    CU_MEMORYTYPE_DEVICE = 2,
};

typedef struct driver {
    void *lib;
    cu_result (*init)(unsigned flags);
    cu_result (*get_error_string)(cu_result r, const char **s);
    cu_result (*pointer_get_attribute)(void *data, int attr, cu_deviceptr p);
    cu_result (*mem_get_address_range)(cu_deviceptr *base, size_t *size, cu_deviceptr p);
    cu_result (*ctx_push)(void *ctx);
    cu_result (*ctx_pop)(void **ctx);
    cu_result (*ipc_get_mem_handle)(void *handle, cu_deviceptr p);
} driver;

static int unsupported(attn_error_detail *err, const char *why, const char *detail)
{
    return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "dev_ptr", "%s%s%s", why,
                          detail ? ": " : "", detail ? detail : "");
}

static const char *cu_msg(const driver *d, cu_result r)
{
    const char *s = NULL;
    if (d->get_error_string == NULL || d->get_error_string(r, &s) != CU_OK || s == NULL)
        return "unknown CUDA driver error";
    return s;
}

static int driver_open(driver *d, attn_error_detail *err)
{
    const char *path = getenv("ATTN_CUDA_DRIVER_LIB");
    memset(d, 0, sizeof *d);
    d->lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d->lib == NULL)
        return unsupported(err, "no CUDA driver (libcuda.so.1) in this process's library path",
                           dlerror());
    /* POSIX allows the object-to-function pointer conversion dlsym needs */
    *(void **)&d->init = dlsym(d->lib, "cuInit");
    *(void **)&d->get_error_string = dlsym(d->lib, "cuGetErrorString");
    *(void **)&d->pointer_get_attribute = dlsym(d->lib, "cuPointerGetAttribute");
    *(void **)&d->mem_get_address_range = dlsym(d->lib, "cuMemGetAddressRange_v2");
    *(void **)&d->ctx_push = dlsym(d->lib, "cuCtxPushCurrent_v2");
    *(void **)&d->ctx_pop = dlsym(d->lib, "cuCtxPopCurrent_v2");
    *(void **)&d->ipc_get_mem_handle = dlsym(d->lib, "cuIpcGetMemHandle");
    if (!d->init || !d->pointer_get_attribute || !d->mem_get_address_range || !d->ctx_push ||
        !d->ctx_pop || !d->ipc_get_mem_handle) {
        dlclose(d->lib);
        d->lib = NULL;
        return unsupported(err, "the CUDA driver lacks a needed entry point", NULL);
    }
    return 0;
}

/* With the driver open: every check, then the handle in the pointer's own
 * context (pushed, so a thread that never touched CUDA works too). */
static int describe(const driver *d, cu_deviceptr p, uint64_t bytes, attn_cuda_ipc_desc *out,
                    attn_error_detail *err)
{
    cu_result r;
    unsigned mem_type = 0, ipc_ok = 0, managed = 0;
    int ordinal = -1;
    void *ctx = NULL, *popped = NULL;
    cu_deviceptr base = 0;
    size_t size = 0;
    if ((r = d->init(0)) != CU_OK)
        return unsupported(err, "cuInit failed (no usable GPU)", cu_msg(d, r));
    if ((r = d->pointer_get_attribute(&mem_type, CU_ATTR_MEMORY_TYPE, p)) != CU_OK)
        return unsupported(err, "dev_ptr is not memory the CUDA driver knows", cu_msg(d, r));
    if (d->pointer_get_attribute(&managed, CU_ATTR_IS_MANAGED, p) == CU_OK && managed)
        return unsupported(err, "managed memory has no IPC handle", NULL);
    if (mem_type != CU_MEMORYTYPE_DEVICE)
        return unsupported(err, "dev_ptr is host memory, not device memory", NULL);
    if ((r = d->pointer_get_attribute(&ipc_ok, CU_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE, p)) != CU_OK ||
        !ipc_ok)
        return unsupported(err,
                           "this allocation has no legacy IPC handle (cuMemCreate/VMM memory, "
                           "e.g. torch expandable_segments; allocate with cudaMalloc)",
                           r != CU_OK ? cu_msg(d, r) : NULL);
    if ((r = d->pointer_get_attribute(&ordinal, CU_ATTR_DEVICE_ORDINAL, p)) != CU_OK ||
        (r = d->pointer_get_attribute(&ctx, CU_ATTR_CONTEXT, p)) != CU_OK ||
        (r = d->mem_get_address_range(&base, &size, p)) != CU_OK)
        return unsupported(err, "the driver does not describe dev_ptr", cu_msg(d, r));
    if (bytes > size - (uint64_t)(p - base))
        return attn_error_set(err, ATTN_E_BUFFER_RANGE, "bytes",
                              "%llu bytes at offset %llu pass the allocation's end (%zu bytes)",
                              (unsigned long long)bytes, (unsigned long long)(p - base), size);
    if ((r = d->ctx_push(ctx)) != CU_OK)
        return unsupported(err, "cannot make the pointer's context current", cu_msg(d, r));
    r = d->ipc_get_mem_handle(out->handle, base);
    d->ctx_pop(&popped);
    if (r != CU_OK)
        return unsupported(err, "cuIpcGetMemHandle failed", cu_msg(d, r));
    out->offset = (uint64_t)(p - base);
    out->ordinal = ordinal;
    return 0;
}

int attn_cuda_ipc_describe(const void *ptr, uint64_t bytes, attn_cuda_ipc_desc *out,
                           attn_error_detail *err)
{
    driver d;
    int rv;
    memset(out, 0, sizeof *out);
    if (ptr == NULL)
        return unsupported(err, "dev_ptr is NULL", NULL);
    if (bytes == 0)
        return attn_error_set(err, ATTN_E_RANGE, "bytes", "a buffer has at least 1 byte");
    if ((rv = driver_open(&d, err)) != 0)
        return rv;
    rv = describe(&d, (cu_deviceptr)(uintptr_t)ptr, bytes, out, err);
    dlclose(d.lib);
    return rv;
}
