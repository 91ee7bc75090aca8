/* attnd host pools (see pool.h). */
#include "daemon/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/config.h"
#include "daemon/pool_export.h"
#include "kernels/common/dtype.h"
#ifdef ATTN_WITH_CUDA
#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/ipc.h"
#endif

/* attnd_pool.quarantine */
enum { POOL_SERVING, POOL_QUARANTINING, POOL_QUARANTINED };

struct attnd_pool_table {
    pthread_mutex_t lock;
    uint64_t budget;
    uint64_t used;
    uint64_t next_generation;
    uint32_t n;
    uint32_t exported; /* pools of the table that are exported */
    attnd_pool *pools[ATTND_MAX_POOLS];
};

int attnd_pool_table_create(attnd_pool_table **t, uint64_t budget)
{
    attnd_pool_table *x = calloc(1, sizeof *x);
    if (x == NULL)
        return ATTN_E_NOMEM;
    pthread_mutex_init(&x->lock, NULL);
    x->budget = budget;
    x->next_generation = 1;
    *t = x;
    return 0;
}

/* Release an exported pool's one allocation (its stores point into it). */
static void export_free(attnd_pool *p)
{
#ifdef ATTN_WITH_CUDA
    if (p->view.platform == ATTN_PLATFORM_CUDA) {
        /* the client must have closed its IPC mapping by now (docs/protocol.md) */
        attn_cuda_pool_free(p->view.device, p->export_base);
        return;
    }
#endif
    attnd_export_shm_unlink(&p->exp);
    attnd_export_shm_unmap(&p->exp, p->export_base);
}

static void pool_free(attnd_pool *p)
{
    if (p == NULL)
        return;
    if (p->exported) {
        if (p->export_base != NULL)
            export_free(p);
        free(p->layer_k);
        free(p->layer_v);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return;
    }
    for (uint32_t l = 0; l < p->geom.layers; l++) {
#ifdef ATTN_WITH_CUDA
        if (p->view.platform == ATTN_PLATFORM_CUDA) {
            if (p->layer_k != NULL)
                attn_cuda_pool_free(p->view.device, p->layer_k[l]);
            if (p->layer_v != NULL)
                attn_cuda_pool_free(p->view.device, p->layer_v[l]);
            continue;
        }
#endif
        if (p->layer_k != NULL)
            free(p->layer_k[l]);
        if (p->layer_v != NULL)
            free(p->layer_v[l]);
    }
    free(p->layer_k);
    free(p->layer_v);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void attnd_pool_table_destroy(attnd_pool_table *t)
{
    if (t == NULL)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        pool_free(t->pools[i]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static int find_locked(attnd_pool_table *t, const char *name)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (strcmp(t->pools[i]->geom.name, name) == 0)
            return (int)i;
    return -1;
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define HEAD_DIM_TEXT STRINGIFY(ATTN_MAX_HEAD_DIM)

/* One geometry dimension must lie in [1, max]; `max_text` is how the error names max. */
static int check_dim(const char *field, uint32_t v, uint32_t max, const char *max_text,
                     attn_error_detail *err)
{
    if (v == 0 || v > max)
        return attn_error_set(err, ATTN_E_RANGE, field, "must be in [1, %s], got %u", max_text, v);
    return 0;
}

/* Geometry limits: each dimension positive and the products far from overflow. */
static int check_geometry(const attn_pool_geometry *g, uint64_t *pk, uint64_t *pv,
                          attn_error_detail *err)
{
    uint64_t es = attn_dtype_size(g->kv_dtype);
    int rv;
    if (g->name[0] == '\0')
        return attn_error_set(err, ATTN_E_RANGE, "pool", "pool name is empty");
    if ((rv = check_dim("layers", g->layers, 1024, "1024", err)) != 0 ||
        (rv = check_dim("num_pages", g->num_pages, 1u << 30, "2^30", err)) != 0 ||
        (rv = check_dim("page_size", g->page_size, 65536, "65536", err)) != 0 ||
        (rv = check_dim("num_kv_heads", g->num_kv_heads, 1024, "1024", err)) != 0 ||
        (rv = check_dim("head_dim_qk", g->head_dim_qk, ATTN_MAX_HEAD_DIM, HEAD_DIM_TEXT, err)) !=
            0 ||
        (rv = check_dim("head_dim_vo", g->head_dim_vo, ATTN_MAX_HEAD_DIM, HEAD_DIM_TEXT, err)) != 0)
        return rv;
    if (g->kv_dtype != ATTN_FP32 && g->kv_dtype != ATTN_FP16 && g->kv_dtype != ATTN_BF16)
        return attn_error_set(err, ATTN_E_DTYPE, "kv_dtype", "unknown dtype");
    if (g->layout != ATTN_NHD && g->layout != ATTN_HND)
        return attn_error_set(err, ATTN_E_RANGE, "layout", "layout must be NHD or HND");
    /* each factor < 2^30 and page*heads*dim < 2^40: the products fit in 64 bits */
    *pk = (uint64_t)g->page_size * g->num_kv_heads * g->head_dim_qk * es;
    *pv = (uint64_t)g->page_size * g->num_kv_heads * g->head_dim_vo * es;
    return 0;
}

/* Map (shm) or allocate (CUDA) an exported pool's one allocation and point
 * every store into it. */
static int export_alloc(attnd_pool *p, int device, attn_error_detail *err)
{
    attn_pool_export *x = &p->exp;
    int rc;
#ifdef ATTN_WITH_CUDA
    if (device >= 0) {
        if ((rc = attn_cuda_pool_alloc(device, x->bytes, &p->export_base, err)) != 0)
            return rc;
        x->kind = ATTN_BUFFER_CUDA_IPC;
        snprintf(x->device, sizeof x->device, "cuda:%d", device);
        if ((rc = attn_cuda_ipc_export(device, p->export_base, x->handle, &x->offset, err)) != 0)
            return rc;
    }
#endif
    if (device < 0 &&
        (rc = attnd_export_shm_create(x, p->geom.name, p->generation, &p->export_base, err)) != 0)
        return rc;
    for (uint32_t l = 0; l < p->geom.layers; l++) {
        p->layer_k[l] = (char *)p->export_base + x->k_offset + l * x->layer_stride;
        p->layer_v[l] = (char *)p->export_base + x->v_offset + l * x->layer_stride;
    }
    return 0;
}

static int create_pool(attnd_pool_table *t, const attn_pool_geometry *g, bool exported,
                       uint32_t conn, uint64_t *bytes, attn_pool_export *exp,
                       attn_error_detail *err)
{
    uint64_t pk = 0, pv = 0, total;
    attnd_pool *p;
    attn_pool_export layout;
    uint64_t generation;
    memset(&layout, 0, sizeof layout);
    int rc = check_geometry(g, &pk, &pv, err);
    if (rc != 0)
        return rc;
    int device = -1;
    if (strcmp(g->device, "") != 0 && strcmp(g->device, "cpu") != 0) {
#ifdef ATTN_WITH_CUDA
        char *end = NULL;
        long dv = strncmp(g->device, "cuda:", 5) == 0 ? strtol(g->device + 5, &end, 10) : -1;
        int ndev = 0;
        char why[160];
        if (dv < 0 || end == NULL || *end != '\0' || dv > 64)
            return attn_error_set(err, ATTN_E_RANGE, "device",
                                  "device must be \"cpu\" or \"cuda:N\"");
        if (!attn_cuda_available(&ndev, why, sizeof why) || dv >= ndev)
            return attn_error_set(err, ATTN_E_RANGE, "device", "device '%s' is not available: %s",
                                  g->device, ndev > 0 ? "ordinal out of range" : why);
        device = (int)dv;
#else
        /* device pools need the CUDA engine's pool API (built with CUDA=1) */
        return attn_error_set(err, ATTN_E_RANGE, "device",
                              "device '%s' has no pool allocator in this build; use \"cpu\"",
                              g->device);
#endif
    }
    if ((pk + pv) > UINT64_MAX / g->num_pages / g->layers)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "num_pages", "pool size overflows");
    total = (pk + pv) * g->num_pages * g->layers;
    if (exported) {
        /* one allocation, each store 256-aligned: a little more than the
         * pages, at most 2 x 255 bytes per layer, which must not wrap the
         * total (it did: a 512-byte allocation for a ~2^64-byte geometry) */
        if (total > UINT64_MAX - 512u * (uint64_t)g->layers)
            return attn_error_set(err, ATTN_E_TOO_LARGE, "num_pages", "pool size overflows");
        attnd_export_layout(g, pk, pv, &layout);
        total = layout.bytes;
    }

    pthread_mutex_lock(&t->lock);
    if (find_locked(t, g->name) >= 0) {
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_POOL_EXISTS, "pool", "pool '%s' already exists", g->name);
    }
    if (t->n >= ATTND_MAX_POOLS) {
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_BUSY, "pool", "at most %d pools", ATTND_MAX_POOLS);
    }
    if (exported && t->exported >= ATTND_MAX_EXPORTED_POOLS) {
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_BUSY, "export",
                              "at most %d exported pools at once; drop one first",
                              ATTND_MAX_EXPORTED_POOLS);
    }
    if (total > t->budget - t->used) {
        uint64_t left = t->budget - t->used;
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_TOO_LARGE, "num_pages",
                              "pool needs %llu bytes, the pool budget has %llu left",
                              (unsigned long long)total, (unsigned long long)left);
    }
    t->used += total; /* reserve before allocating outside the lock */
    generation = t->next_generation++;
    if (exported)
        t->exported++; /* reserved as the bytes are */
    pthread_mutex_unlock(&t->lock);

    p = calloc(1, sizeof *p);
    if (p == NULL)
        goto nomem;
    p->geom = *g;
    if (p->geom.device[0] == '\0')
        snprintf(p->geom.device, sizeof p->geom.device, "cpu");
    pthread_mutex_init(&p->lock, NULL);
    atomic_init(&p->quarantine, POOL_SERVING);
    p->page_bytes_k = pk;
    p->page_bytes_v = pv;
    p->bytes = total;
    p->layer_k = calloc(g->layers, sizeof(void *));
    p->layer_v = calloc(g->layers, sizeof(void *));
    if (p->layer_k == NULL || p->layer_v == NULL)
        goto nomem;
    p->view.platform = device >= 0 ? ATTN_PLATFORM_CUDA : ATTN_PLATFORM_CPU;
    p->view.device = device;
    p->generation = generation;
    if (exported) {
        p->exported = true;
        p->exp = layout;
        p->exporter = conn;
        atomic_init(&p->export_live, true);
        if ((rc = export_alloc(p, device, err)) != 0)
            goto fail;
    }
    for (uint32_t l = 0; l < g->layers && !exported; l++) {
#ifdef ATTN_WITH_CUDA
        if (device >= 0) {
            if (attn_cuda_pool_alloc(device, pk * g->num_pages, &p->layer_k[l], NULL) != 0 ||
                attn_cuda_pool_alloc(device, pv * g->num_pages, &p->layer_v[l], NULL) != 0)
                goto nomem;
            continue;
        }
#endif
        p->layer_k[l] = calloc(g->num_pages, pk);
        p->layer_v[l] = calloc(g->num_pages, pv);
        if (p->layer_k[l] == NULL || p->layer_v[l] == NULL)
            goto nomem;
    }
    p->view.geom = &p->geom;
    p->view.k = p->layer_k;
    p->view.v = p->layer_v;

    pthread_mutex_lock(&t->lock);
    if (find_locked(t, g->name) >= 0) { /* lost a race with a concurrent create */
        t->used -= total;
        t->exported -= exported ? 1u : 0u;
        pthread_mutex_unlock(&t->lock);
        pool_free(p);
        return attn_error_set(err, ATTN_E_POOL_EXISTS, "pool", "pool '%s' already exists", g->name);
    }
    p->refs = 1; /* the table's own reference */
    t->pools[t->n++] = p;
    /* read p while the table holds it: once the lock is released another
     * connection's pool_drop may free it */
    if (bytes != NULL)
        *bytes = total;
    if (exp != NULL && exported)
        *exp = p->exp;
    pthread_mutex_unlock(&t->lock);
    return 0;

nomem:
    rc = attn_error_set(err, ATTN_E_NOMEM, "num_pages", "cannot allocate %llu bytes",
                        (unsigned long long)total);
fail:
    pool_free(p);
    pthread_mutex_lock(&t->lock);
    t->used -= total;
    t->exported -= exported ? 1u : 0u;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int attnd_pool_create(attnd_pool_table *t, const attn_pool_geometry *g, uint64_t *bytes,
                      attn_error_detail *err)
{
    return create_pool(t, g, false, 0, bytes, NULL, err);
}

int attnd_pool_create_exported(attnd_pool_table *t, const attn_pool_geometry *g, uint32_t conn,
                               uint64_t *bytes, attn_pool_export *exp, attn_error_detail *err)
{
    return create_pool(t, g, true, conn, bytes, exp, err);
}

uint32_t attnd_pool_table_conn_closed(attnd_pool_table *t, uint32_t conn)
{
    uint32_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->n; i++) {
        attnd_pool *p = t->pools[i];
        if (!p->exported || p->exporter != conn || !atomic_load(&p->export_live))
            continue;
        atomic_store(&p->export_live, false);
        if (p->view.platform == ATTN_PLATFORM_CPU)
            attnd_export_shm_unlink(&p->exp); /* nobody can map it any more */
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

uint32_t attnd_pool_table_exported(attnd_pool_table *t)
{
    pthread_mutex_lock(&t->lock);
    uint32_t n = t->exported;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void attnd_pool_quarantine(attnd_pool *p, const char *why)
{
    int expected = POOL_SERVING;
    /* a failed deferred completion calls this without the pool's lock, so
     * the first caller claims the reason and publishes it when written */
    if (!atomic_compare_exchange_strong(&p->quarantine, &expected, POOL_QUARANTINING))
        return;
    snprintf(p->quarantine_why, sizeof p->quarantine_why, "%s", why);
    atomic_store(&p->quarantine, POOL_QUARANTINED);
}

int attnd_pool_check_serving(const attnd_pool *p, attn_error_detail *err)
{
    int q = atomic_load(&p->quarantine);
    if (q == POOL_SERVING)
        return 0;
    return attn_error_set(err, ATTN_E_POOL_UNRESTORED, "pool",
                          "pool '%s' is quarantined, no run uses it (pool_drop it and create it "
                          "again): %.120s, so its bytes may hold rows no manifest describes",
                          p->geom.name,
                          q == POOL_QUARANTINED ? p->quarantine_why : "a run could not restore it");
}

uint32_t attnd_pool_table_quarantined(attnd_pool_table *t)
{
    uint32_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->n; i++)
        n += atomic_load(&t->pools[i]->quarantine) != POOL_SERVING;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int attnd_pool_drop(attnd_pool_table *t, const char *name, attn_error_detail *err)
{
    attnd_pool *p;
    int i;
    pthread_mutex_lock(&t->lock);
    i = find_locked(t, name);
    if (i < 0) {
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_UNKNOWN_POOL, "pool", "no pool named '%s'", name);
    }
    p = t->pools[i];
    t->pools[i] = t->pools[--t->n];
    if (p->exported) {
        t->exported--;
        if (p->view.platform == ATTN_PLATFORM_CPU)
            attnd_export_shm_unlink(&p->exp); /* no new mapping of a dropped pool */
    }
    /* the budget comes back when the memory does: a run still holding the
     * pool keeps its bytes reserved until its release frees them */
    if (--p->refs == 0) {
        t->used -= p->bytes;
        pthread_mutex_unlock(&t->lock);
        pool_free(p);
        return 0;
    }
    pthread_mutex_unlock(&t->lock);
    return 0;
}

int attnd_pool_acquire(attnd_pool_table *t, const char *name, const char *field, attnd_pool **out,
                       attn_error_detail *err)
{
    int i;
    pthread_mutex_lock(&t->lock);
    i = find_locked(t, name);
    if (i < 0) {
        pthread_mutex_unlock(&t->lock);
        return attn_error_set(err, ATTN_E_UNKNOWN_POOL, field, "no pool named '%s'", name);
    }
    *out = t->pools[i];
    (*out)->refs++;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

void attnd_pool_release(attnd_pool_table *t, attnd_pool *p)
{
    int last;
    if (p == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    last = --p->refs == 0;
    if (last)
        t->used -= p->bytes; /* a dropped pool's last holder */
    pthread_mutex_unlock(&t->lock);
    if (last)
        pool_free(p);
}

int attnd_pool_check_pages(const attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n,
                           attn_error_detail *err)
{
    if (layer >= p->geom.layers)
        return attn_error_set(err, ATTN_E_LAYER, "layer", "layer %u outside [0, %u)", layer,
                              p->geom.layers);
    for (uint32_t i = 0; i < n; i++) {
        if (pages[i] < 0 || (uint32_t)pages[i] >= p->geom.num_pages) {
            char field[48];
            snprintf(field, sizeof field, "pages[%u]", i);
            return attn_error_set(err, ATTN_E_PAGE_OUT_OF_POOL, field, "page %d outside [0, %u)",
                                  pages[i], p->geom.num_pages);
        }
    }
    return 0;
}

int attnd_pool_read_held(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, void *k,
                         void *v, attn_error_detail *err)
{
    int rc = attnd_pool_check_pages(p, layer, pages, n, err);
    if (rc != 0)
        return rc;
#ifdef ATTN_WITH_CUDA
    if (p->view.platform == ATTN_PLATFORM_CUDA) {
        rc = attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_k[layer], 0, pages, n, k, 0,
                                  err);
        if (rc == 0)
            rc = attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_v[layer], 1, pages, n, v,
                                      0, err);
        return rc;
    }
#endif
    for (uint32_t i = 0; i < n; i++) {
        memcpy((char *)k + i * p->page_bytes_k,
               (char *)p->layer_k[layer] + pages[i] * p->page_bytes_k, p->page_bytes_k);
        memcpy((char *)v + i * p->page_bytes_v,
               (char *)p->layer_v[layer] + pages[i] * p->page_bytes_v, p->page_bytes_v);
    }
    return 0;
}

void attnd_pool_lock_idle(attnd_pool *p)
{
    pthread_mutex_lock(&p->lock);
    /* the count only rises under the lock, so 0 seen here stays 0 until unlock */
    while (atomic_load(&p->deferred) != 0) {
        pthread_mutex_unlock(&p->lock);
        /* a deferred run lasts a kernel's time: poll briefly */
        nanosleep(&(struct timespec){0, 5000}, NULL);
        pthread_mutex_lock(&p->lock);
    }
}

int attnd_pool_read(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, void *k,
                    void *v, attn_error_detail *err)
{
    attnd_pool_lock_idle(p);
    int rc = attnd_pool_read_held(p, layer, pages, n, k, v, err);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int attnd_pool_write(attnd_pool *p, uint32_t layer, const int32_t *pages, uint32_t n, const void *k,
                     const void *v, attn_error_detail *err)
{
    int rc = attnd_pool_check_pages(p, layer, pages, n, err);
    if (rc != 0)
        return rc;
#ifdef ATTN_WITH_CUDA
    if (p->view.platform == ATTN_PLATFORM_CUDA) {
        /* nothing half-applied: the old bytes of the named pages are saved
         * first, and put back when a copy fails part way (a device error;
         * the pages were checked above).  kv_write loads history, off the
         * per-layer path, so the extra read is affordable. */
        void *old_k = malloc((size_t)n * p->page_bytes_k + 1);
        void *old_v = malloc((size_t)n * p->page_bytes_v + 1);
        if (old_k == NULL || old_v == NULL) {
            free(old_k);
            free(old_v);
            return attn_error_set(err, ATTN_E_NOMEM, "pages", "cannot stage %u pages", n);
        }
        attnd_pool_lock_idle(p);
        rc = attnd_pool_read_held(p, layer, pages, n, old_k, old_v, err);
        if (rc == 0) {
            rc = attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_k[layer], 0, pages, n,
                                      (void *)k, 1, err);
            if (rc == 0)
                rc = attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_v[layer], 1, pages, n,
                                          (void *)v, 1, err);
            if (rc != 0) {
                attn_error_detail ignored;
                if (attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_k[layer], 0, pages, n,
                                         old_k, 1, &ignored) != 0 ||
                    attn_cuda_pool_pages(&p->geom, p->view.device, p->layer_v[layer], 1, pages, n,
                                         old_v, 1, &ignored) != 0) {
                    rc = attn_error_set(err, ATTN_E_POOL_UNRESTORED, "pages",
                                        "copying the pages failed and so did putting the old "
                                        "bytes back: the named pages may be partly written; "
                                        "pool '%s' is quarantined (pool_drop it)",
                                        p->geom.name);
                    char why[96];
                    snprintf(why, sizeof why,
                             "a kv_write of layer %u could not put its old "
                             "bytes back",
                             layer);
                    attnd_pool_quarantine(p, why);
                }
            }
        }
        pthread_mutex_unlock(&p->lock);
        free(old_k);
        free(old_v);
        return rc;
    }
#endif
    attnd_pool_lock_idle(p);
    for (uint32_t i = 0; i < n; i++) {
        memcpy((char *)p->layer_k[layer] + pages[i] * p->page_bytes_k,
               (const char *)k + i * p->page_bytes_k, p->page_bytes_k);
        memcpy((char *)p->layer_v[layer] + pages[i] * p->page_bytes_v,
               (const char *)v + i * p->page_bytes_v, p->page_bytes_v);
    }
    pthread_mutex_unlock(&p->lock);
    return 0;
}

static uint64_t fnv1a(uint64_t h, const unsigned char *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t attnd_pool_checksum(attnd_pool *p)
{
    uint64_t h = 1469598103934665603ull;
#ifdef ATTN_WITH_CUDA
    if (p->view.platform == ATTN_PLATFORM_CUDA) {
        /* one page at a time through the host */
        char *buf = malloc(p->page_bytes_k + p->page_bytes_v);
        if (buf == NULL)
            return 0;
        for (uint32_t l = 0; l < p->geom.layers; l++) {
            for (uint32_t pg = 0; pg < p->geom.num_pages; pg++) {
                int32_t id = (int32_t)pg;
                if (attnd_pool_read(p, l, &id, 1, buf, buf + p->page_bytes_k, NULL) != 0) {
                    free(buf);
                    return 0;
                }
                h = fnv1a(h, (unsigned char *)buf, p->page_bytes_k + p->page_bytes_v);
            }
        }
        free(buf);
        return h;
    }
#endif
    attnd_pool_lock_idle(p);
    for (uint32_t l = 0; l < p->geom.layers; l++) {
        h = fnv1a(h, p->layer_k[l], p->page_bytes_k * p->geom.num_pages);
        h = fnv1a(h, p->layer_v[l], p->page_bytes_v * p->geom.num_pages);
    }
    pthread_mutex_unlock(&p->lock);
    return h;
}

void attnd_pool_table_usage(attnd_pool_table *t, uint32_t *num_pools, uint64_t *bytes)
{
    pthread_mutex_lock(&t->lock);
    *num_pools = t->n;
    *bytes = t->used;
    pthread_mutex_unlock(&t->lock);
}

uint32_t attnd_pool_table_list(attnd_pool_table *t, attn_pool_geometry *out, uint32_t max)
{
    uint32_t n;
    pthread_mutex_lock(&t->lock);
    n = t->n < max ? t->n : max;
    for (uint32_t i = 0; i < n; i++)
        out[i] = t->pools[i]->geom;
    pthread_mutex_unlock(&t->lock);
    return n;
}
