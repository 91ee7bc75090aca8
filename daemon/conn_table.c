/* attnd per-connection accounting (see conn_table.h). */
#include "daemon/conn_table.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct conn {
    uint32_t id; /* nng pipe id; 0 = free slot */
    uint32_t inflight;
    uint32_t sending;
    uint64_t last_ms;
    char peer[ATTND_CONN_PEER_CAP]; /* described when added: a closed pipe may no longer say */
} conn;

struct attnd_conn_table {
    pthread_mutex_t lock;
    uint32_t cap;
    uint32_t inflight_cap;
    uint32_t count;
    conn *slots;
};

int attnd_conn_table_create(attnd_conn_table **out, uint32_t cap, uint32_t inflight)
{
    attnd_conn_table *t = calloc(1, sizeof *t);
    if (t == NULL || (t->slots = calloc(cap ? cap : 1, sizeof *t->slots)) == NULL) {
        free(t);
        return -1;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->cap = cap ? cap : 1;
    t->inflight_cap = inflight ? inflight : 1;
    *out = t;
    return 0;
}

void attnd_conn_table_destroy(attnd_conn_table *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t);
}

/* The slot of `id` (lock held), or NULL. */
static conn *find(attnd_conn_table *t, uint32_t id)
{
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->slots[i].id == id)
            return &t->slots[i];
    return NULL;
}

int attnd_conn_add(attnd_conn_table *t, uint32_t id, uint64_t now_ms)
{
    conn *c;
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && find(t, id) == NULL && (c = find(t, 0)) != NULL) {
        c->id = id;
        c->inflight = c->sending = 0;
        c->last_ms = now_ms;
        c->peer[0] = '\0';
        t->count++;
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void attnd_conn_remove(attnd_conn_table *t, uint32_t id)
{
    conn *c;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL) {
        c->id = 0;
        t->count--;
    }
    pthread_mutex_unlock(&t->lock);
}

void attnd_conn_set_peer(attnd_conn_table *t, uint32_t id, const char *peer)
{
    conn *c;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL)
        snprintf(c->peer, sizeof c->peer, "%s", peer ? peer : "");
    pthread_mutex_unlock(&t->lock);
}

void attnd_conn_peer(attnd_conn_table *t, uint32_t id, char *out, size_t cap)
{
    conn *c;
    if (cap == 0)
        return;
    out[0] = '\0';
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL)
        snprintf(out, cap, "%s", c->peer);
    pthread_mutex_unlock(&t->lock);
}

int attnd_conn_is_open(attnd_conn_table *t, uint32_t id)
{
    int open;
    pthread_mutex_lock(&t->lock);
    open = id != 0 && find(t, id) != NULL;
    pthread_mutex_unlock(&t->lock);
    return open;
}

attnd_conn_verdict attnd_conn_begin(attnd_conn_table *t, uint32_t id, uint64_t now_ms)
{
    attnd_conn_verdict v = ATTND_CONN_SERVE;
    conn *c;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL) {
        if (c->inflight >= t->inflight_cap)
            v = c->sending > 0 ? ATTND_CONN_CLOSE : ATTND_CONN_BUSY;
        c->inflight++;
        c->last_ms = now_ms;
    }
    pthread_mutex_unlock(&t->lock);
    return v;
}

void attnd_conn_sending(attnd_conn_table *t, uint32_t id)
{
    conn *c;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL)
        c->sending++;
    pthread_mutex_unlock(&t->lock);
}

void attnd_conn_end(attnd_conn_table *t, uint32_t id, int was_sending, uint64_t now_ms)
{
    conn *c;
    pthread_mutex_lock(&t->lock);
    if (id != 0 && (c = find(t, id)) != NULL) {
        if (c->inflight > 0)
            c->inflight--;
        if (was_sending && c->sending > 0)
            c->sending--;
        c->last_ms = now_ms;
    }
    pthread_mutex_unlock(&t->lock);
}

size_t attnd_conn_idle(attnd_conn_table *t, uint64_t now_ms, uint64_t idle_ms, uint32_t *ids,
                       size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->cap && n < max; i++) {
        conn *c = &t->slots[i];
        /* now_ms was read before the lock: a connection an nng thread stamped
         * since then (last_ms > now_ms) was just active, not idle */
        if (c->id != 0 && c->inflight == 0 && c->last_ms <= now_ms &&
            now_ms - c->last_ms >= idle_ms)
            ids[n++] = c->id;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

void attnd_conn_set_inflight(attnd_conn_table *t, uint32_t inflight)
{
    pthread_mutex_lock(&t->lock);
    t->inflight_cap = inflight ? inflight : 1;
    pthread_mutex_unlock(&t->lock);
}

uint32_t attnd_conn_count(attnd_conn_table *t)
{
    uint32_t n;
    pthread_mutex_lock(&t->lock);
    n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
}
