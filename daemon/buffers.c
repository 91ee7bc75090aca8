/* Registered buffers: a slot table under one mutex (see buffers.h).
 *
 * A buffer leaves its slot when it is dropped (by buffer_drop or its
 * connection's close), so no later lookup finds it; it is unmapped when the
 * last run holding it lets go.  Its bytes count against the cap until then,
 * because they are still mapped.
 */
#include "daemon/buffers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct attnd_buffer {
    uint64_t id;
    uint32_t conn;
    uint32_t refs; /* the slot's reference (while registered) + one per hold */
    attn_buffer_kind kind;
    int device; /* cuda_ipc: the CUDA ordinal; -1 for shm */
    uint8_t *base;
    uint64_t bytes;
};

struct attnd_buffer_table {
    pthread_mutex_t lock;
    attnd_buffer **slots; /* [max_buffers]; NULL = free */
    uint32_t max_buffers;
    uint64_t max_bytes;
    uint64_t next_id;
    attnd_buffer_stats st;
    attnd_ipc_opener ipc; /* open == NULL: no cuda_ipc */
};

int attnd_buffers_create(attnd_buffer_table **out, uint32_t max_buffers, uint64_t max_bytes)
{
    attnd_buffer_table *t = calloc(1, sizeof *t);
    *out = NULL;
    if (t == NULL)
        return ATTN_E_NOMEM;
    t->slots = calloc(max_buffers ? max_buffers : 1, sizeof *t->slots);
    if (t->slots == NULL) {
        free(t);
        return ATTN_E_NOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->max_buffers = max_buffers;
    t->max_bytes = max_bytes;
    t->next_id = 1; /* 0 means "no reference" on the wire */
    *out = t;
    return 0;
}

void attnd_buffers_set_ipc(attnd_buffer_table *t, const attnd_ipc_opener *o)
{
    pthread_mutex_lock(&t->lock);
    if (o != NULL)
        t->ipc = *o;
    else
        memset(&t->ipc, 0, sizeof t->ipc);
    pthread_mutex_unlock(&t->lock);
}

static void unmap(attnd_buffer_table *t, attnd_buffer *b)
{
    switch (b->kind) {
    case ATTN_BUFFER_SHM:
        munmap(b->base, (size_t)b->bytes);
        break;
    case ATTN_BUFFER_CUDA_IPC:
        if (t->ipc.close != NULL)
            t->ipc.close(t->ipc.arg, b->device, b->base);
        break;
    }
    free(b);
}

/* Drop one reference; the last one unmaps.  Caller holds the lock. */
static void unref_locked(attnd_buffer_table *t, attnd_buffer *b)
{
    if (--b->refs > 0)
        return;
    t->st.bytes -= b->bytes;
    unmap(t, b);
}

void attnd_buffers_destroy(attnd_buffer_table *t)
{
    if (t == NULL)
        return;
    for (uint32_t i = 0; i < t->max_buffers; i++)
        if (t->slots[i] != NULL)
            unmap(t, t->slots[i]);
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t);
}

/* Map the shm object a->name: read-write, at least a->bytes long, owned by
 * `peer_uid` when that is >= 0. */
static int map_shm(const attn_buffer_args *a, int64_t peer_uid, uint8_t **base,
                   attn_error_detail *err)
{
    struct stat st;
    void *p;
    int fd = shm_open(a->name, O_RDWR, 0);
    if (fd < 0)
        return attn_error_set(err, ATTN_E_IO, "name", "cannot open shared memory %s: %s", a->name,
                              strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return attn_error_set(err, ATTN_E_IO, "name", "%s is not a shared-memory object", a->name);
    }
    if (peer_uid >= 0 && (int64_t)st.st_uid != peer_uid) {
        close(fd);
        return attn_error_set(err, ATTN_E_IO, "name",
                              "shared memory %s belongs to uid %lld, not to this connection's "
                              "uid %lld",
                              a->name, (long long)st.st_uid, (long long)peer_uid);
    }
    if ((uint64_t)st.st_size < a->bytes) {
        close(fd);
        return attn_error_set(err, ATTN_E_BUFFER_RANGE, "bytes",
                              "bytes is %llu but shared memory %s holds only %lld",
                              (unsigned long long)a->bytes, a->name, (long long)st.st_size);
    }
    if (a->bytes > SIZE_MAX) {
        close(fd);
        return attn_error_set(err, ATTN_E_TOO_LARGE, "bytes", "bytes does not fit this machine");
    }
    p = mmap(NULL, (size_t)a->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the object */
    if (p == MAP_FAILED)
        return attn_error_set(err, ATTN_E_IO, "name", "cannot map %llu bytes of %s: %s",
                              (unsigned long long)a->bytes, a->name, strerror(errno));
    *base = p;
    return 0;
}

/* The caps, checked before anything is opened (caller holds the lock). */
static int check_caps_locked(attnd_buffer_table *t, uint64_t bytes, uint32_t *slot,
                             attn_error_detail *err)
{
    uint32_t i = 0;
    if (bytes > t->max_bytes)
        return attn_error_set(err, ATTN_E_TOO_LARGE, "bytes",
                              "a %llu-byte buffer exceeds --max-buffer-bytes %llu",
                              (unsigned long long)bytes, (unsigned long long)t->max_bytes);
    while (i < t->max_buffers && t->slots[i] != NULL)
        i++;
    if (i == t->max_buffers)
        return attn_error_set(err, ATTN_E_BUSY, "max_buffers",
                              "attnd holds --max-buffers %u buffers; drop one first",
                              t->max_buffers);
    if (t->st.bytes + bytes > t->max_bytes)
        return attn_error_set(err, ATTN_E_BUSY, "max_buffer_bytes",
                              "%llu more bytes would pass --max-buffer-bytes %llu (%llu mapped)",
                              (unsigned long long)bytes, (unsigned long long)t->max_bytes,
                              (unsigned long long)t->st.bytes);
    *slot = i;
    return 0;
}

int attnd_buffers_register(attnd_buffer_table *t, uint32_t conn, int64_t peer_uid,
                           const attn_buffer_args *a, uint64_t *id, attn_error_detail *err)
{
    attnd_buffer *b;
    uint8_t *base = NULL;
    uint32_t slot;
    int rc;

    int device = -1;
    attnd_ipc_opener ipc;
    pthread_mutex_lock(&t->lock);
    ipc = t->ipc;
    pthread_mutex_unlock(&t->lock);
    switch (a->kind) {
    case ATTN_BUFFER_SHM:
        break;
    case ATTN_BUFFER_CUDA_IPC:
        /* the codec checked "cuda:N" */
        device = strncmp(a->device, "cuda:", 5) == 0 ? atoi(a->device + 5) : -1;
        if (ipc.open == NULL || device < 0) {
            pthread_mutex_lock(&t->lock);
            t->st.refused++;
            pthread_mutex_unlock(&t->lock);
#ifdef ATTN_WITH_CUDA
            return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "kind",
                                  "this attnd has no CUDA engine on %s to open cuda_ipc "
                                  "handles; register a shm buffer or send tensors inline",
                                  a->device);
#else
            return attn_error_set(err, ATTN_E_BUFFER_UNSUPPORTED, "kind",
                                  "CUDA IPC buffers need a CUDA build and device; this attnd was "
                                  "built without CUDA");
#endif
        }
        break;
    }
    /* the caps first, so a refused registration maps nothing; checked again
     * under the lock after the (slow) map, since others may have registered */
    pthread_mutex_lock(&t->lock);
    rc = check_caps_locked(t, a->bytes, &slot, err);
    pthread_mutex_unlock(&t->lock);
    if (rc == 0 && a->kind == ATTN_BUFFER_SHM)
        rc = map_shm(a, peer_uid, &base, err);
    else if (rc == 0)
        rc = ipc.open(ipc.arg, device, a->handle, a->offset, a->bytes, (void **)&base, err);
    b = rc == 0 ? calloc(1, sizeof *b) : NULL;
    if (rc == 0 && b == NULL)
        rc = attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    pthread_mutex_lock(&t->lock);
    if (rc == 0)
        rc = check_caps_locked(t, a->bytes, &slot, err);
    if (rc != 0) {
        t->st.refused++;
        pthread_mutex_unlock(&t->lock);
        if (base != NULL && a->kind == ATTN_BUFFER_SHM)
            munmap(base, (size_t)a->bytes);
        else if (base != NULL)
            ipc.close(ipc.arg, device, base);
        free(b);
        return rc;
    }
    b->id = t->next_id++;
    b->conn = conn;
    b->refs = 1;
    b->kind = a->kind;
    b->device = device;
    b->base = base;
    b->bytes = a->bytes;
    t->slots[slot] = b;
    t->st.live++;
    t->st.bytes += b->bytes;
    t->st.registered++;
    *id = b->id;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

/* The slot of buffer `id`, or max_buffers (caller holds the lock). */
static uint32_t find_locked(attnd_buffer_table *t, uint64_t id)
{
    uint32_t i = 0;
    while (i < t->max_buffers && (t->slots[i] == NULL || t->slots[i]->id != id))
        i++;
    return i;
}

/* Why connection `conn` cannot use buffer id `id` (caller holds the lock). */
static int unknown_locked(attnd_buffer_table *t, uint32_t conn, uint64_t id, const char *field,
                          attn_error_detail *err)
{
    uint32_t i = find_locked(t, id);
    if (i < t->max_buffers && t->slots[i]->conn != conn)
        return attn_error_set(err, ATTN_E_UNKNOWN_BUFFER, field,
                              "buffer %llu belongs to another connection", (unsigned long long)id);
    if (id < t->next_id)
        return attn_error_set(err, ATTN_E_UNKNOWN_BUFFER, field,
                              "buffer %llu was dropped (or its connection closed)",
                              (unsigned long long)id);
    return attn_error_set(err, ATTN_E_UNKNOWN_BUFFER, field, "no buffer %llu was registered",
                          (unsigned long long)id);
}

/* Take buffer slot i out of the table (caller holds the lock). */
static void remove_locked(attnd_buffer_table *t, uint32_t i)
{
    attnd_buffer *b = t->slots[i];
    t->slots[i] = NULL;
    t->st.live--;
    unref_locked(t, b);
}

int attnd_buffers_drop(attnd_buffer_table *t, uint32_t conn, uint64_t id, attn_error_detail *err)
{
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    uint32_t i = find_locked(t, id);
    if (i == t->max_buffers || t->slots[i]->conn != conn) {
        rc = unknown_locked(t, conn, id, "buf", err);
    } else {
        remove_locked(t, i);
        t->st.dropped++;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

uint32_t attnd_buffers_drop_conn(attnd_buffer_table *t, uint32_t conn)
{
    uint32_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->max_buffers; i++)
        if (t->slots[i] != NULL && t->slots[i]->conn == conn) {
            remove_locked(t, i);
            n++;
        }
    t->st.released_on_close += n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int attnd_buffers_resolve(attnd_buffer_table *t, uint32_t conn, const attn_tensor_ref *ref,
                          const char *field, attnd_buffer_hold *h, void **ptr,
                          attn_buffer_kind *kind, int *device, attn_error_detail *err)
{
    char f[48];
    int rc = 0;
    attnd_buffer *b;
    pthread_mutex_lock(&t->lock);
    uint32_t i = find_locked(t, ref->buf);
    if (i == t->max_buffers || t->slots[i]->conn != conn) {
        snprintf(f, sizeof f, "%s.buf", field);
        rc = unknown_locked(t, conn, ref->buf, f, err);
        goto out;
    }
    b = t->slots[i];
    if (ref->offset > b->bytes) {
        snprintf(f, sizeof f, "%s.offset", field);
        rc = attn_error_set(err, ATTN_E_BUFFER_RANGE, f,
                            "%s offset %llu is past buffer %llu (%llu bytes)", field,
                            (unsigned long long)ref->offset, (unsigned long long)b->id,
                            (unsigned long long)b->bytes);
        goto out;
    }
    if (ref->bytes > b->bytes - ref->offset) {
        snprintf(f, sizeof f, "%s.bytes", field);
        rc = attn_error_set(err, ATTN_E_BUFFER_RANGE, f,
                            "%s [%llu, +%llu) ends past buffer %llu (%llu bytes)", field,
                            (unsigned long long)ref->offset, (unsigned long long)ref->bytes,
                            (unsigned long long)b->id, (unsigned long long)b->bytes);
        goto out;
    }
    if (h->n == ATTND_HOLD_MAX) {
        rc = attn_error_set(err, ATTN_E_INTERNAL, field, "too many buffer references in one run");
        goto out;
    }
    b->refs++;
    h->held[h->n++] = b;
    *ptr = b->base + ref->offset;
    if (kind != NULL)
        *kind = b->kind;
    if (device != NULL)
        *device = b->device;
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void attnd_buffer_hold_release(attnd_buffer_table *t, attnd_buffer_hold *h)
{
    if (h->n == 0)
        return;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < h->n; i++)
        unref_locked(t, h->held[i]);
    pthread_mutex_unlock(&t->lock);
    h->n = 0;
}

bool attnd_refs_overlap(const attn_tensor_ref *a, const attn_tensor_ref *b)
{
    if (a->buf == 0 || a->buf != b->buf || a->bytes == 0 || b->bytes == 0)
        return false;
    /* ranges are inside one buffer here, so the sums cannot wrap */
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

void attnd_buffers_stats(attnd_buffer_table *t, attnd_buffer_stats *st)
{
    pthread_mutex_lock(&t->lock);
    *st = t->st;
    pthread_mutex_unlock(&t->lock);
}
