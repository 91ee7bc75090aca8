/* Exported pools: layout and shm backing (see pool_export.h). */
#include "daemon/pool_export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/common/dtype.h"

static uint64_t align256(uint64_t n)
{
    return (n + 255u) & ~(uint64_t)255u;
}

void attnd_export_layout(const attn_pool_geometry *g, uint64_t page_k, uint64_t page_v,
                         attn_pool_export *x)
{
    uint64_t es = attn_dtype_size(g->kv_dtype);
    uint64_t ks = align256(page_k * g->num_pages), vs = align256(page_v * g->num_pages);
    x->k_offset = 0;
    x->v_offset = ks;
    x->layer_stride = ks + vs;
    x->bytes = x->layer_stride * g->layers;
    x->page_stride_k = page_k;
    x->page_stride_v = page_v;
    /* kernels/common/addr.h: NHD page -> slot -> head -> dim, HND page -> head -> slot -> dim */
    if (g->layout == ATTN_NHD) {
        x->row_stride_k = (uint64_t)g->num_kv_heads * g->head_dim_qk * es;
        x->head_stride_k = (uint64_t)g->head_dim_qk * es;
        x->row_stride_v = (uint64_t)g->num_kv_heads * g->head_dim_vo * es;
        x->head_stride_v = (uint64_t)g->head_dim_vo * es;
    } else {
        x->row_stride_k = (uint64_t)g->head_dim_qk * es;
        x->head_stride_k = (uint64_t)g->page_size * g->head_dim_qk * es;
        x->row_stride_v = (uint64_t)g->head_dim_vo * es;
        x->head_stride_v = (uint64_t)g->page_size * g->head_dim_vo * es;
    }
    x->kv_dtype = g->kv_dtype;
    x->layout = g->layout;
}

int attnd_export_shm_create(attn_pool_export *x, const char *pool, uint64_t generation, void **base,
                            attn_error_detail *err)
{
    char safe[40];
    size_t n = 0;
    /* the pool's name may hold any character; the shm name keeps [A-Za-z0-9_-] of it */
    for (const char *c = pool; *c != '\0' && n + 1 < sizeof safe; c++)
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            *c == '_' || *c == '-')
            safe[n++] = *c;
    safe[n] = '\0';
    snprintf(x->name, sizeof x->name, "/attnd-%ld-%llu-%s", (long)getpid(),
             (unsigned long long)generation, safe);
    x->kind = ATTN_BUFFER_SHM;
    snprintf(x->device, sizeof x->device, "cpu");
    *base = NULL;
    int fd = shm_open(x->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return attn_error_set(err, ATTN_E_IO, "export", "cannot create shared memory %s: %s",
                              x->name, strerror(errno));
    if (ftruncate(fd, (off_t)x->bytes) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(x->name);
        return attn_error_set(err, ATTN_E_IO, "export", "cannot size %s to %llu bytes: %s", x->name,
                              (unsigned long long)x->bytes, strerror(e));
    }
    void *p = mmap(NULL, (size_t)x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the object */
    if (p == MAP_FAILED) {
        shm_unlink(x->name);
        return attn_error_set(err, ATTN_E_IO, "export", "cannot map %llu bytes of %s: %s",
                              (unsigned long long)x->bytes, x->name, strerror(e));
    }
    *base = p; /* a fresh object reads as zeros */
    return 0;
}

void attnd_export_shm_unlink(const attn_pool_export *x)
{
    shm_unlink(x->name); /* ENOENT the second time: nothing to do */
}

void attnd_export_shm_unmap(const attn_pool_export *x, void *base)
{
    if (base != NULL)
        munmap(base, (size_t)x->bytes);
}
