/* Per-connection reorder slots (see order_slots.h). */
#include "daemon/order_slots.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* Numbers refused before they reached the slot, remembered per connection
 * until the slot passes them; beyond this many, further ones are forgotten
 * (their successors then wait for the gap timeout). */
#define ORDER_USED_MAX 64

typedef struct slot {
    struct slot *next;
    uint32_t conn;
    uint64_t want;                 /* the next number to hand out */
    bool busy;                     /* an item of this connection is being handled */
    attnd_order_item *held;        /* ascending by order */
    uint64_t used[ORDER_USED_MAX]; /* ascending, all >= want */
    uint32_t nused;
} slot;

struct attnd_order {
    pthread_mutex_t mu;
    slot *slots;
    uint64_t held;
};

int attnd_order_create(attnd_order **out)
{
    attnd_order *o = calloc(1, sizeof *o);
    if (o == NULL)
        return -1;
    pthread_mutex_init(&o->mu, NULL);
    *out = o;
    return 0;
}

void attnd_order_destroy(attnd_order *o)
{
    if (o == NULL)
        return;
    while (o->slots != NULL) {
        slot *s = o->slots;
        o->slots = s->next;
        free(s);
    }
    pthread_mutex_destroy(&o->mu);
    free(o);
}

/* The slot of `conn`, created (want = 1) when `create`; NULL without one. */
static slot *find_slot(attnd_order *o, uint32_t conn, bool create)
{
    for (slot *s = o->slots; s != NULL; s = s->next)
        if (s->conn == conn)
            return s;
    if (!create)
        return NULL;
    slot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->conn = conn;
    s->want = 1;
    s->next = o->slots;
    o->slots = s;
    return s;
}

static bool is_used(const slot *s, uint64_t order)
{
    for (uint32_t i = 0; i < s->nused; i++)
        if (s->used[i] == order)
            return true;
    return false;
}

static bool is_held(const slot *s, uint64_t order)
{
    for (const attnd_order_item *it = s->held; it != NULL; it = it->next)
        if (it->order == order)
            return true;
    return false;
}

/* Drop remembered numbers below `want`, and step `want` over used ones. */
static void skip_used(slot *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->nused; i++) {
        if (s->used[i] == s->want)
            s->want++; /* ascending: each one found in turn */
        else if (s->used[i] > s->want)
            s->used[k++] = s->used[i];
    }
    s->nused = k;
}

attnd_order_verdict attnd_order_offer(attnd_order *o, attnd_order_item *it)
{
    attnd_order_verdict v = ATTND_ORDER_HELD;
    pthread_mutex_lock(&o->mu);
    slot *s = find_slot(o, it->conn, true);
    if (s == NULL) {
        v = ATTND_ORDER_FULL;
        goto out;
    }
    if (it->order < s->want || is_used(s, it->order)) {
        v = ATTND_ORDER_OLD;
        goto out;
    }
    attnd_order_item **p = &s->held;
    while (*p != NULL && (*p)->order < it->order)
        p = &(*p)->next;
    if (*p != NULL && (*p)->order == it->order) {
        v = ATTND_ORDER_OLD; /* a duplicate of one held */
        goto out;
    }
    it->next = *p;
    *p = it;
    o->held++;
out:
    pthread_mutex_unlock(&o->mu);
    return v;
}

void attnd_order_consume(attnd_order *o, uint32_t conn, uint64_t order)
{
    pthread_mutex_lock(&o->mu);
    slot *s = find_slot(o, conn, true);
    /* a duplicate of a held number leaves the held run its turn */
    if (s != NULL && order >= s->want && !is_used(s, order) && !is_held(s, order) &&
        s->nused < ORDER_USED_MAX) {
        uint32_t i = s->nused++;
        while (i > 0 && s->used[i - 1] > order) {
            s->used[i] = s->used[i - 1];
            i--;
        }
        s->used[i] = order;
    }
    pthread_mutex_unlock(&o->mu);
}

attnd_order_item *attnd_order_next(attnd_order *o)
{
    attnd_order_item *it = NULL;
    pthread_mutex_lock(&o->mu);
    for (slot *s = o->slots; s != NULL && it == NULL; s = s->next) {
        if (s->busy)
            continue;
        skip_used(s);
        if (s->held == NULL || s->held->order != s->want)
            continue;
        it = s->held;
        s->held = it->next;
        it->next = NULL;
        s->want++;
        s->busy = true;
        o->held--;
    }
    pthread_mutex_unlock(&o->mu);
    return it;
}

void attnd_order_done(attnd_order *o, uint32_t conn)
{
    pthread_mutex_lock(&o->mu);
    slot *s = find_slot(o, conn, false);
    if (s != NULL)
        s->busy = false;
    pthread_mutex_unlock(&o->mu);
}

/* Append list `l` to *tail's list. */
static void append(attnd_order_item ***tail, attnd_order_item *l)
{
    **tail = l;
    while (l != NULL) {
        *tail = &l->next;
        l = l->next;
    }
}

attnd_order_item *attnd_order_expire(attnd_order *o, uint64_t now_ms, uint64_t timeout_ms)
{
    attnd_order_item *out = NULL, **tail = &out;
    pthread_mutex_lock(&o->mu);
    for (slot *s = o->slots; s != NULL; s = s->next) {
        if (s->held == NULL)
            continue;
        if (timeout_ms > 0) {
            if (s->busy)
                continue; /* the earlier run is being handled: no gap */
            skip_used(s);
            if (s->held->order == s->want)
                continue; /* its turn came: attnd_order_next hands it out */
            uint64_t oldest = UINT64_MAX;
            for (attnd_order_item *it = s->held; it != NULL; it = it->next)
                oldest = it->held_ms < oldest ? it->held_ms : oldest;
            if (now_ms - oldest < timeout_ms)
                continue;
        }
        attnd_order_item *last = s->held;
        uint64_t n = 0;
        for (; last->next != NULL; last = last->next)
            n++;
        s->want = last->order + 1; /* the gap and the failed runs are used up */
        o->held -= n + 1;
        append(&tail, s->held);
        s->held = NULL;
        skip_used(s);
    }
    pthread_mutex_unlock(&o->mu);
    return out;
}

attnd_order_item *attnd_order_conn_closed(attnd_order *o, uint32_t conn)
{
    attnd_order_item *out = NULL;
    pthread_mutex_lock(&o->mu);
    for (slot **p = &o->slots; *p != NULL; p = &(*p)->next) {
        slot *s = *p;
        if (s->conn != conn)
            continue;
        out = s->held;
        for (attnd_order_item *it = out; it != NULL; it = it->next)
            o->held--;
        *p = s->next;
        free(s);
        break;
    }
    pthread_mutex_unlock(&o->mu);
    return out;
}

uint64_t attnd_order_held(attnd_order *o)
{
    pthread_mutex_lock(&o->mu);
    uint64_t n = o->held;
    pthread_mutex_unlock(&o->mu);
    return n;
}
