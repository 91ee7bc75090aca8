/* Asynchronous runs: one FIFO, one worker, a ring of recent states, the
 * connections' unreported failures and the waits in progress (see
 * async_runs.h). */
#include "daemon/async_runs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What run_status can say about one run. */
typedef struct run_record {
    uint64_t seq; /* 0: empty slot */
    uint32_t conn;
    attn_run_status st;
} run_record;

/* A failure not yet handed to a reply of its connection. */
typedef struct failure {
    struct failure *next;
    uint32_t conn;
    uint64_t seq;
    attn_error_detail e;
} failure;

struct attnd_async {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* a job was queued, or stop */
    pthread_cond_t settled; /* a job finished (drain_conn waits on it) */
    pthread_t worker;
    bool stop;
    attnd_async_job *head, *tail;
    attnd_async_job *running;
    bool running_cancelled; /* its connection closed while it ran */
    /* jobs enqueued on the device and not completed, oldest first; the
     * completer thread finishes them in order */
    struct {
        attnd_async_job *j;
        double t0;
        bool cancelled;
    } inflight[ATTND_ASYNC_INFLIGHT];
    uint32_t if_head, if_n;
    pthread_t completer;
    pthread_cond_t completable; /* a job went in flight, or the worker ended */
    bool worker_done;
    uint64_t next_seq;
    run_record *ring;
    uint32_t history;
    failure *failures;
    attnd_wait *waits;
    attnd_sync_run *syncs; /* synchronous runs in progress */
    attnd_conn_open_fn conn_open;
    void *conn_open_arg;
    attnd_async_stats st;
};

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The ring slot of `seq` when it still holds it (caller holds the lock). */
static run_record *record_locked(attnd_async *a, uint64_t seq)
{
    run_record *r = &a->ring[seq % a->history];
    return r->seq == seq ? r : NULL;
}

static void add_failure_locked(attnd_async *a, uint32_t conn, uint64_t seq,
                               const attn_error_detail *e)
{
    failure *f = calloc(1, sizeof *f), **tail = &a->failures;
    if (f == NULL)
        return; /* run_status and stats still say it */
    f->conn = conn;
    f->seq = seq;
    f->e = *e;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = f;
}

/* Record how job j ended (rc from run or complete) and release it.  Caller
 * holds the lock; it is dropped around the release and retaken. */
static void finish_locked(attnd_async *a, attnd_async_job *j, int rc, double engine_us,
                          const char *method, double exec_us, bool cancelled,
                          const attn_error_detail *e)
{
    run_record *r = record_locked(a, j->seq);
    cancelled = rc != 0 && cancelled;
    if (r != NULL) {
        r->st.state = rc == 0 ? ATTN_RUN_DONE : cancelled ? ATTN_RUN_CANCELLED : ATTN_RUN_FAILED;
        r->st.engine_us = engine_us;
        snprintf(r->st.timing_method, sizeof r->st.timing_method, "%s", method);
        r->st.exec_us = exec_us;
        if (rc != 0)
            r->st.error = *e;
    }
    if (rc == 0) {
        a->st.done++;
    } else if (cancelled) {
        a->st.cancelled++;
    } else {
        a->st.failed++;
        add_failure_locked(a, j->conn, j->seq, e);
    }
    a->st.pending--;
    pthread_mutex_unlock(&a->lock);
    j->release(j);
    pthread_mutex_lock(&a->lock);
    pthread_cond_broadcast(&a->settled);
}

/* A job cancelled while queued, at its turn: its `cancel` (outside the
 * lock) writes its signal behind the jobs before it, then it is recorded
 * as cancelled and released.  Caller holds the lock. */
static void finish_cancelled_locked(attnd_async *a, attnd_async_job *j)
{
    attn_error_detail e;
    attn_error_set(&e, ATTN_E_SHUTTING_DOWN, "run_seq",
                   "run %llu was cancelled before it started (its connection closed or attnd "
                   "stops); nothing ran",
                   (unsigned long long)j->seq);
    if (j->cancel != NULL) {
        pthread_mutex_unlock(&a->lock);
        j->cancel(j, &e);
        pthread_mutex_lock(&a->lock);
    }
    finish_locked(a, j, e.code, 0, "", 0, true, &e);
}

/* The newest job in flight (caller holds the lock; if_n > 0). */
static attnd_async_job *newest_inflight(const attnd_async *a)
{
    return a->inflight[(a->if_head + a->if_n - 1) % ATTND_ASYNC_INFLIGHT].j;
}

/* One job at a time, except that a job whose work is only enqueued
 * (ATTND_ASYNC_PENDING) goes to the completer, and the next job that can
 * follow it on the same stream is enqueued at once: the device does not
 * wait for the host between two runs.  A job that cannot follow waits
 * until nothing is in flight. */
static void *worker_main(void *arg)
{
    attnd_async *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (a->head == NULL && !a->stop)
            pthread_cond_wait(&a->work, &a->lock);
        if (a->head == NULL)
            break;
        attnd_async_job *j = a->head;
        if (a->if_n == ATTND_ASYNC_INFLIGHT ||
            (a->if_n > 0 && (j->follows == NULL || !j->follows(j, newest_inflight(a))))) {
            pthread_cond_wait(&a->settled, &a->lock); /* the completer makes room */
            continue;
        }
        a->head = j->next;
        if (a->head == NULL)
            a->tail = NULL;
        if (j->cancelled) {
            finish_cancelled_locked(a, j);
            continue;
        }
        a->running = j;
        a->running_cancelled = false;
        run_record *r = record_locked(a, j->seq);
        double t0 = mono_us();
        if (r != NULL) {
            r->st.state = ATTN_RUN_RUNNING;
            r->st.queued_us = t0 - j->t_enqueued_us;
        }
        pthread_mutex_unlock(&a->lock);

        attn_error_detail e;
        double engine_us = 0;
        char method[32] = "";
        memset(&e, 0, sizeof e);
        int rc = j->run(j, &engine_us, method, &e);

        pthread_mutex_lock(&a->lock);
        bool cancelled = a->running_cancelled;
        a->running = NULL;
        if (rc == ATTND_ASYNC_PENDING && j->complete != NULL) {
            uint32_t slot = (a->if_head + a->if_n) % ATTND_ASYNC_INFLIGHT;
            a->inflight[slot].j = j;
            a->inflight[slot].t0 = t0;
            a->inflight[slot].cancelled = cancelled;
            a->if_n++;
            pthread_cond_signal(&a->completable);
            continue;
        }
        finish_locked(a, j, rc, engine_us, method, mono_us() - t0, cancelled, &e);
    }
    a->worker_done = true;
    pthread_cond_broadcast(&a->completable);
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* Finish the jobs in flight in order: wait for each one's device work
 * (outside the lock), then record it. */
static void *completer_main(void *arg)
{
    attnd_async *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (a->if_n == 0 && !a->worker_done)
            pthread_cond_wait(&a->completable, &a->lock);
        if (a->if_n == 0)
            break;
        attnd_async_job *j = a->inflight[a->if_head].j;
        double t0 = a->inflight[a->if_head].t0;
        attn_error_detail e;
        double engine_us = 0;
        char method[32] = "";
        memset(&e, 0, sizeof e);
        pthread_mutex_unlock(&a->lock);
        int rc = j->complete(j, &engine_us, method, &e);
        double exec_us = mono_us() - t0;
        pthread_mutex_lock(&a->lock);
        bool cancelled = a->inflight[a->if_head].cancelled;
        a->if_head = (a->if_head + 1) % ATTND_ASYNC_INFLIGHT;
        a->if_n--;
        finish_locked(a, j, rc, engine_us, method, exec_us, cancelled, &e);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* Free what create set up, once no thread of `a` runs (create's failure
 * path and destroy). */
static void free_joined(attnd_async *a)
{
    pthread_cond_destroy(&a->completable);
    pthread_cond_destroy(&a->settled);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->lock);
    free(a->ring);
    free(a);
}

int attnd_async_create(attnd_async **out, uint32_t history)
{
    attnd_async *a = calloc(1, sizeof *a);
    *out = NULL;
    if (a == NULL)
        return ATTN_E_NOMEM;
    a->history = history ? history : 1;
    a->ring = calloc(a->history, sizeof *a->ring);
    if (a->ring == NULL) {
        free(a);
        return ATTN_E_NOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->work, NULL);
    pthread_cond_init(&a->settled, NULL);
    pthread_cond_init(&a->completable, NULL);
    a->next_seq = 1;
    if (pthread_create(&a->completer, NULL, completer_main, a) != 0)
        goto fail;
    if (pthread_create(&a->worker, NULL, worker_main, a) != 0) {
        /* the completer runs: tell it no work will come, then join it */
        pthread_mutex_lock(&a->lock);
        a->worker_done = true;
        pthread_cond_broadcast(&a->completable);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->completer, NULL);
        goto fail;
    }
    *out = a;
    return 0;

fail:
    free_joined(a);
    return ATTN_E_NOMEM;
}

/* Release every wait of `conn` (all when all_conns) and take it off the
 * list.  Under the lock, so that a waiter cannot leave (and free its record)
 * while its release runs; a release only enqueues a write, it never blocks. */
static uint32_t release_waits_locked(attnd_async *a, uint32_t conn, bool all_conns)
{
    uint32_t n = 0;
    for (attnd_wait **pp = &a->waits; *pp != NULL;) {
        attnd_wait *w = *pp;
        if (!all_conns && w->conn != conn) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->next = NULL;
        if (w->release != NULL)
            w->release(w);
        atomic_store(&w->released, 1);
        n++;
    }
    return n;
}

/* Cancel the queued jobs of `conn` (all when all_conns); caller holds the
 * lock.  They stay queued, so that the worker gives each its `cancel` in
 * turn: a cancelled run's signal lands behind the runs before it, as a
 * failed run's does (docs/protocol.md "Semaphores"), never from here,
 * ahead of a run still in the engine. */
static void cancel_queued_locked(attnd_async *a, uint32_t conn, bool all_conns)
{
    for (attnd_async_job *j = a->head; j != NULL; j = j->next)
        if (all_conns || j->conn == conn)
            j->cancelled = true;
}

void attnd_async_destroy(attnd_async *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    cancel_queued_locked(a, 0, true);
    if (a->running != NULL)
        a->running_cancelled = true;
    release_waits_locked(a, 0, true);
    pthread_cond_broadcast(&a->work);
    pthread_cond_broadcast(&a->settled);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->worker, NULL);
    pthread_join(a->completer, NULL); /* after the worker: it drains what is in flight */
    while (a->failures != NULL) {
        failure *f = a->failures;
        a->failures = f->next;
        free(f);
    }
    free_joined(a);
}

uint64_t attnd_async_reserve_seq(attnd_async *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t seq = a->next_seq++;
    pthread_mutex_unlock(&a->lock);
    return seq;
}

void attnd_async_submit(attnd_async *a, attnd_async_job *j)
{
    pthread_mutex_lock(&a->lock);
    j->next = NULL;
    j->cancelled = false;
    j->t_enqueued_us = mono_us();
    run_record *r = &a->ring[j->seq % a->history];
    memset(r, 0, sizeof *r);
    r->seq = j->seq;
    r->conn = j->conn;
    r->st.state = ATTN_RUN_QUEUED;
    if (a->tail != NULL)
        a->tail->next = j;
    else
        a->head = j;
    a->tail = j;
    a->st.enqueued++;
    a->st.pending++;
    pthread_cond_signal(&a->work);
    pthread_mutex_unlock(&a->lock);
}

int attnd_async_status(attnd_async *a, uint32_t conn, uint64_t seq, attn_run_status *st,
                       attn_error_detail *err)
{
    int rc = 0;
    pthread_mutex_lock(&a->lock);
    run_record *r = record_locked(a, seq);
    if (r == NULL || r->conn != conn) {
        rc = attn_error_set(err, ATTN_E_RANGE, "run_seq",
                            seq >= a->next_seq ? "run %llu was never enqueued"
                            : r == NULL ? "run %llu is older than the last runs attnd remembers"
                                        : "run %llu belongs to another connection",
                            (unsigned long long)seq);
    } else {
        *st = r->st;
        if (st->state == ATTN_RUN_QUEUED)
            st->queued_us = 0;
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

bool attnd_async_take_failure(attnd_async *a, uint32_t conn, uint64_t *seq, attn_error_detail *e)
{
    bool found = false;
    pthread_mutex_lock(&a->lock);
    for (failure **pp = &a->failures; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->conn == conn) {
            failure *f = *pp;
            *pp = f->next;
            *seq = f->seq;
            *e = f->e;
            free(f);
            found = true;
            break;
        }
    pthread_mutex_unlock(&a->lock);
    return found;
}

/* Whether a job of `conn` is queued or running (caller holds the lock). */
static bool conn_busy_locked(attnd_async *a, uint32_t conn)
{
    if (a->running != NULL && a->running->conn == conn)
        return true;
    for (uint32_t i = 0; i < a->if_n; i++)
        if (a->inflight[(a->if_head + i) % ATTND_ASYNC_INFLIGHT].j->conn == conn)
            return true;
    for (attnd_async_job *j = a->head; j != NULL; j = j->next)
        if (j->conn == conn)
            return true;
    return false;
}

void attnd_async_drain_conn(attnd_async *a, uint32_t conn)
{
    pthread_mutex_lock(&a->lock);
    while (conn_busy_locked(a, conn))
        pthread_cond_wait(&a->settled, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

void attnd_async_conn_closed(attnd_async *a, uint32_t conn)
{
    pthread_mutex_lock(&a->lock);
    cancel_queued_locked(a, conn, false);
    if (a->running != NULL && a->running->conn == conn)
        a->running_cancelled = true;
    for (uint32_t i = 0; i < a->if_n; i++) {
        uint32_t k = (a->if_head + i) % ATTND_ASYNC_INFLIGHT;
        if (a->inflight[k].j->conn == conn)
            a->inflight[k].cancelled = true;
    }
    for (attnd_sync_run *r = a->syncs; r != NULL; r = r->next)
        if (r->conn == conn)
            r->closed = true;
    a->st.waits_released_on_close += release_waits_locked(a, conn, false);
    for (failure **pp = &a->failures; *pp != NULL;) {
        failure *f = *pp;
        if (f->conn == conn) {
            *pp = f->next;
            free(f);
        } else {
            pp = &f->next;
        }
    }
    pthread_mutex_unlock(&a->lock);
}

void attnd_async_set_conn_open(attnd_async *a, attnd_conn_open_fn fn, void *arg)
{
    pthread_mutex_lock(&a->lock);
    a->conn_open = fn;
    a->conn_open_arg = arg;
    pthread_mutex_unlock(&a->lock);
}

void attnd_async_sync_begin(attnd_async *a, attnd_sync_run *r, uint32_t conn)
{
    pthread_mutex_lock(&a->lock);
    r->conn = conn;
    /* a request handled after its connection closed (its close came first)
     * lists a run that no close will mark: mark it now */
    r->closed = a->conn_open != NULL && !a->conn_open(a->conn_open_arg, conn);
    r->next = a->syncs;
    a->syncs = r;
    pthread_mutex_unlock(&a->lock);
}

void attnd_async_sync_end(attnd_async *a, attnd_sync_run *r)
{
    pthread_mutex_lock(&a->lock);
    for (attnd_sync_run **pp = &a->syncs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&a->lock);
}

/* Whether `conn` closed while a run of it was in progress: the worker's
 * running job or a synchronous run (caller holds the lock). */
static bool run_conn_closed_locked(const attnd_async *a, uint32_t conn)
{
    if (a->running != NULL && a->running_cancelled && a->running->conn == conn)
        return true;
    for (const attnd_sync_run *r = a->syncs; r != NULL; r = r->next)
        if (r->conn == conn && r->closed)
            return true;
    return false;
}

void attnd_async_wait_enter(attnd_async *a, attnd_wait *w)
{
    pthread_mutex_lock(&a->lock);
    w->next = NULL;
    /* attnd stops, or the connection of a run in progress (the worker's or
     * a handler's synchronous one) closed before this wait was listed (its
     * waits were released then): a wait that starts now is released at once */
    if (a->stop || run_conn_closed_locked(a, w->conn)) {
        if (w->release != NULL)
            w->release(w);
        atomic_store(&w->released, 1);
    } else {
        atomic_store(&w->released, 0);
        w->next = a->waits;
        a->waits = w;
    }
    pthread_mutex_unlock(&a->lock);
}

void attnd_async_wait_leave(attnd_async *a, attnd_wait *w)
{
    pthread_mutex_lock(&a->lock);
    for (attnd_wait **pp = &a->waits; *pp != NULL; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    pthread_mutex_unlock(&a->lock);
}

/* CUDA's GEQ on 64-bit words is cyclic: (int64_t)(have - want) >= 0. */
static bool sem_reached(uint64_t have, uint64_t want)
{
    return (int64_t)(have - want) >= 0;
}

int attnd_sem_wait_host(attnd_async *a, uint32_t conn, const uint64_t *addr, uint64_t value,
                        attn_error_detail *err)
{
    attnd_wait w;
    long ns = 1000;
    if (sem_reached(__atomic_load_n(addr, __ATOMIC_ACQUIRE), value))
        return 0;
    memset(&w, 0, sizeof w);
    w.conn = conn;
    attnd_async_wait_enter(a, &w);
    /* poll with a bounded back-off: a few microseconds at first, 200 us at most */
    while (!sem_reached(__atomic_load_n(addr, __ATOMIC_ACQUIRE), value)) {
        if (atomic_load(&w.released)) {
            attnd_async_wait_leave(a, &w);
            return attn_error_set(err, ATTN_E_SHUTTING_DOWN, "wait",
                                  "the wait for the semaphore to reach %llu was released "
                                  "(its connection closed or attnd stops); nothing ran",
                                  (unsigned long long)value);
        }
        nanosleep(&(struct timespec){0, ns}, NULL);
        if (ns < 200000)
            ns *= 2;
    }
    attnd_async_wait_leave(a, &w);
    return 0;
}

void attnd_sem_signal_host(uint64_t *addr, uint64_t value)
{
    __atomic_store_n(addr, value, __ATOMIC_RELEASE);
}

void attnd_async_stats_get(attnd_async *a, attnd_async_stats *st)
{
    pthread_mutex_lock(&a->lock);
    *st = a->st;
    pthread_mutex_unlock(&a->lock);
}
