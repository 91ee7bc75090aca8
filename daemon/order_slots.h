/* Per-connection reorder slots for runs that carry `"order": n` (issue 11).
 *
 * nng's REP socket hands two requests of one connection to two contexts
 * whose callbacks race, so a connection's pipelined runs can reach the
 * handler out of the order sent.  A run with an order number is offered
 * here instead of being handled at once; the slot releases a connection's
 * runs one at a time, strictly by number (1, 2, 3, ...), the next only once
 * the previous one's handler has returned (an async run returns right after
 * its enqueue, so its successor is enqueued behind it).  A run ahead of a
 * gap is held as data: no thread waits for it.
 *
 * Every number is used once: a run refused before it reached the slot
 * (attnd_order_consume) still uses up its number, so later ones are not
 * stuck behind it; an old or duplicate number is refused (ATTND_ORDER_OLD).
 * A gap older than the timeout fails the runs held behind it
 * (attnd_order_expire), and the numbers up to the last of them count as
 * used.  The owner (daemon/loop.c) embeds attnd_order_item in its request
 * record and answers what the slot hands back.
 *
 * Thread-safe (one mutex): nng's callbacks and the loop thread call it.
 */
#ifndef ATTN_DAEMON_ORDER_SLOTS_H
#define ATTN_DAEMON_ORDER_SLOTS_H

#include <stdint.h>

typedef struct attnd_order attnd_order;

/* One request with an order number; the owner embeds it (and finds its
 * record again from the pointer). */
typedef struct attnd_order_item {
    struct attnd_order_item *next; /* the slot's list; a returned list's link */
    uint32_t conn;                 /* nng pipe id */
    uint64_t order;                /* >= 1 */
    uint64_t held_ms;              /* when it was offered (monotonic ms) */
} attnd_order_item;

/* What attnd_order_offer did with an item. */
typedef enum attnd_order_verdict {
    ATTND_ORDER_HELD = 0, /* kept: attnd_order_next hands it out in its turn */
    ATTND_ORDER_OLD,      /* its number was used already: refuse it (E_RANGE, order) */
    ATTND_ORDER_FULL,     /* no memory for the connection's slot: refuse it (E_NOMEM) */
} attnd_order_verdict;

/* An empty set of slots. */
int attnd_order_create(attnd_order **out);

/* Free the slots (the items belong to their owner and are not touched). */
void attnd_order_destroy(attnd_order *o);

/* Offer item (conn, order, held_ms set): held until its turn, or refused. */
attnd_order_verdict attnd_order_offer(attnd_order *o, attnd_order_item *it);

/* Number `order` of `conn` was refused before it reached the slot (E_BUSY):
 * mark it used, so the connection's later runs do not wait for it. */
void attnd_order_consume(attnd_order *o, uint32_t conn, uint64_t order);

/* An item whose turn it is (its number is its connection's next, and no
 * earlier item of that connection is still being handled), now being
 * handled; NULL when there is none.  Call attnd_order_done after its
 * handler returned. */
attnd_order_item *attnd_order_next(attnd_order *o);

/* The item attnd_order_next handed out for `conn` has been handled. */
void attnd_order_done(attnd_order *o, uint32_t conn);

/* Remove and return (a list through ->next) every held item of a
 * connection whose oldest held item has waited at least timeout_ms for a
 * gap before it (nothing of that connection being handled); their numbers
 * and the gap's count as used.  timeout_ms 0 removes every held item. */
attnd_order_item *attnd_order_expire(attnd_order *o, uint64_t now_ms, uint64_t timeout_ms);

/* Connection `conn` closed: forget its slot; returns its held items (a
 * list through ->next) for the owner to cancel. */
attnd_order_item *attnd_order_conn_closed(attnd_order *o, uint32_t conn);

/* Items held now, over every connection (stats and tests). */
uint64_t attnd_order_held(attnd_order *o);

#endif
