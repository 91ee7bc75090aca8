/* attnd's event loop (see loop.h for the thread rules). */
#include "daemon/loop.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/notify.h"

/* After the last reply of a shutdown, wait this long without new requests
 * before closing the socket, so replies already queued reach their pipes. */
#define ATTND_DRAIN_QUIET_MS 150
#define ATTND_DRAIN_TICK_MS 20

typedef enum job_state { JOB_RECV = 0, JOB_WORK, JOB_SEND, JOB_IDLE } job_state;

typedef struct job {
    attnd_loop *l;
    nng_ctx ctx;
    nng_aio *aio;
    nng_msg *req;
    void *reply;
    size_t reply_len;
    uv_work_t work;
    uint64_t t_recv_ns;
    struct job *next;
    _Atomic int state;
} job;

struct attnd_loop {
    uv_loop_t loop;
    uv_async_t async;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    uv_timer_t drain;
    nng_socket sock;
    nng_listener lst;
    int sock_open;
    int lst_open;
    attnd_loop_opts o;
    char url[512];
    char ipc_path[512];
    job *jobs;
    uint32_t njobs;
    pthread_mutex_t qlock;
    job *qhead;
    job *qtail;
    _Atomic int stop_requested;
    _Atomic int refuse_pipes; /* shutdown began: close new connections */
    _Atomic uint64_t pending; /* received and not yet sent */
    _Atomic uint64_t last_recv_ms;
    _Atomic uint64_t last_reply_ms; /* a send completed: the reply is queued on its pipe */
    int stopping;                   /* loop thread only */
    int closed;                     /* loop thread only */
    attnd_metrics local_metrics;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* nng thread: a connection is being added (refused once shutdown began)
 * or went away; nng reports the removal of every pipe it announced. */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    attnd_loop *l = arg;
    if (ev == NNG_PIPE_EV_REM_POST) {
        atomic_fetch_sub(&l->o.metrics->connections, 1);
        return;
    }
    atomic_fetch_add(&l->o.metrics->connections, 1);
    atomic_fetch_add(&l->o.metrics->connections_total, 1);
    if (atomic_load(&l->refuse_pipes))
        nng_pipe_close(p);
}

/* Requests handed to the loop wait in its queue, then in libuv's for a
 * worker: the queue depth counts both, until a handler starts. */
static void enqueue(attnd_loop *l, job *j)
{
    atomic_fetch_add(&l->o.metrics->queued, 1);
    pthread_mutex_lock(&l->qlock);
    j->next = NULL;
    if (l->qtail != NULL)
        l->qtail->next = j;
    else
        l->qhead = j;
    l->qtail = j;
    pthread_mutex_unlock(&l->qlock);
}

static job *dequeue_all(attnd_loop *l)
{
    job *h;
    pthread_mutex_lock(&l->qlock);
    h = l->qhead;
    l->qhead = l->qtail = NULL;
    pthread_mutex_unlock(&l->qlock);
    return h;
}

static void send_reply(attnd_loop *l, job *j);

/* nng thread: a receive or a send of context `arg` completed. */
static void aio_cb(void *arg)
{
    job *j = arg;
    attnd_loop *l = j->l;
    int rv = nng_aio_result(j->aio);

    if (atomic_load(&j->state) == JOB_RECV) {
        if (rv != 0) {
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                atomic_store(&j->state, JOB_IDLE);
                return;
            }
            nng_ctx_recv(j->ctx, j->aio); /* transient (a dropped pipe): keep serving */
            return;
        }
        j->req = nng_aio_get_msg(j->aio);
        j->t_recv_ns = now_ns();
        atomic_fetch_add(&l->pending, 1);
        atomic_store(&l->last_recv_ms, j->t_recv_ns / 1000000ull);
        atomic_fetch_add(&l->o.metrics->requests, 1);
        atomic_fetch_add(&l->o.metrics->in_flight, 1);
        atomic_store(&j->state, JOB_WORK);
        /* hello/stats cost less than the hop to the loop thread (bench/ipc):
         * answer them here, on the nng thread; the handler is thread-safe
         * and touches no libuv state.  During shutdown everything goes to
         * the loop, which refuses it. */
        if (l->o.is_cheap != NULL && !atomic_load(&l->stop_requested) &&
            !atomic_load(&l->refuse_pipes) &&
            l->o.is_cheap(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req))) {
            atomic_fetch_add(&l->o.metrics->inline_ops, 1);
            l->o.handler(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply,
                         &j->reply_len);
            send_reply(l, j);
            return;
        }
        enqueue(l, j);
        uv_async_send(&l->async);
        return;
    }
    /* JOB_SEND completed */
    if (rv != 0) {
        nng_msg *m = nng_aio_get_msg(j->aio);
        if (m != NULL)
            nng_msg_free(m);
    } else {
        atomic_fetch_add(&l->o.metrics->replies, 1);
        atomic_store(&l->last_reply_ms, now_ns() / 1000000ull);
    }
    atomic_fetch_sub(&l->o.metrics->in_flight, 1);
    if (rv == NNG_ECLOSED) {
        atomic_store(&j->state, JOB_IDLE);
        atomic_fetch_sub(&l->pending, 1);
        return;
    }
    atomic_store(&j->state, JOB_RECV);
    nng_ctx_recv(j->ctx, j->aio);
    /* decrement after re-arming so the drain never closes between the two */
    atomic_fetch_sub(&l->pending, 1);
}

/* Hand the reply bytes of `j` to nng (loop thread, or the nng thread for
 * cheap ops: it touches only nng and atomics). */
static void send_reply(attnd_loop *l, job *j)
{
    nng_msg *m = NULL;
    if (j->req != NULL) {
        nng_msg_free(j->req);
        j->req = NULL;
    }
    if (j->reply == NULL || nng_msg_alloc(&m, j->reply_len) != 0) {
        /* no reply possible: REP drops the request; the client's REQ times out */
        free(j->reply);
        j->reply = NULL;
        atomic_fetch_sub(&l->o.metrics->in_flight, 1);
        atomic_store(&j->state, JOB_RECV);
        nng_ctx_recv(j->ctx, j->aio);
        atomic_fetch_sub(&l->pending, 1);
        return;
    }
    if (j->reply_len > 0)
        memcpy(nng_msg_body(m), j->reply, j->reply_len);
    free(j->reply);
    j->reply = NULL;
    atomic_store(&j->state, JOB_SEND);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
}

static void work_cb(uv_work_t *w)
{
    job *j = w->data;
    attnd_loop *l = j->l;
    atomic_fetch_sub(&l->o.metrics->queued, 1);
    attnd_metrics_note_handoff(l->o.metrics, now_ns() - j->t_recv_ns);
    j->reply = NULL;
    j->reply_len = 0;
    l->o.handler(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply, &j->reply_len);
}

static void after_work_cb(uv_work_t *w, int status)
{
    job *j = w->data;
    (void)status;
    send_reply(j->l, j);
}

static void begin_shutdown(attnd_loop *l)
{
    if (l->stopping)
        return;
    l->stopping = 1;
    atomic_store(&l->o.metrics->draining, 1);
    attnd_notify("STOPPING=1\nSTATUS=draining");
    /* Stop accepting: new connections are closed by pipe_cb from now on.
     * The listener itself stays open, because closing an nng listener also
     * closes the pipes it accepted, and with them the replies still owed on
     * them; requests arriving on open pipes get E_SHUTTING_DOWN. */
    atomic_store(&l->refuse_pipes, 1);
}

static void close_all(attnd_loop *l);

static void drain_cb(uv_timer_t *t)
{
    attnd_loop *l = t->data;
    uint64_t now_ms = now_ns() / 1000000ull;
    if (atomic_load(&l->pending) != 0)
        return;
    if (now_ms - atomic_load(&l->last_recv_ms) < ATTND_DRAIN_QUIET_MS)
        return;
    /* a reply handed over just now may still sit in its pipe's queue, and
     * closing the socket drops it: the quiet period runs from the last
     * reply too (a request that ran longer than the period lost its reply) */
    if (now_ms - atomic_load(&l->last_reply_ms) < ATTND_DRAIN_QUIET_MS)
        return;
    close_all(l);
}

static void async_cb(uv_async_t *a)
{
    attnd_loop *l = a->data;
    job *j = dequeue_all(l);

    if (atomic_load(&l->stop_requested) && !l->stopping) {
        begin_shutdown(l);
        uv_timer_start(&l->drain, drain_cb, ATTND_DRAIN_TICK_MS, ATTND_DRAIN_TICK_MS);
    }
    while (j != NULL) {
        job *next = j->next;
        atomic_fetch_sub(&l->o.metrics->queued, 1); /* out of the loop's queue */
        if (l->closed) {
            /* only after the socket closed: nobody can be answered */
            nng_msg_free(j->req);
            j->req = NULL;
            atomic_fetch_sub(&l->pending, 1);
        } else if (l->stopping && l->o.refuse != NULL) {
            atomic_fetch_add(&l->o.metrics->shutting_down_replies, 1);
            l->o.refuse(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply,
                        &j->reply_len);
            send_reply(l, j);
        } else if (l->o.is_cheap != NULL &&
                   l->o.is_cheap(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req))) {
            /* the hand-off costs more than hello/stats themselves (docs/daemon.md) */
            atomic_fetch_add(&l->o.metrics->inline_ops, 1);
            l->o.handler(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply,
                         &j->reply_len);
            send_reply(l, j);
        } else {
            atomic_fetch_add(&l->o.metrics->worker_ops, 1);
            atomic_fetch_add(&l->o.metrics->queued, 1); /* into libuv's, until work_cb */
            j->work.data = j;
            if (uv_queue_work(&l->loop, &j->work, work_cb, after_work_cb) != 0) {
                atomic_fetch_sub(&l->o.metrics->queued, 1);
                l->o.handler(l->o.arg, nng_msg_body(j->req), nng_msg_len(j->req), &j->reply,
                             &j->reply_len);
                send_reply(l, j);
            }
        }
        j = next;
    }
}

static void signal_cb(uv_signal_t *s, int signum)
{
    attnd_loop *l = s->data;
    (void)signum;
    if (!l->stopping) {
        begin_shutdown(l);
        uv_timer_start(&l->drain, drain_cb, ATTND_DRAIN_TICK_MS, ATTND_DRAIN_TICK_MS);
    }
}

static void close_all(attnd_loop *l)
{
    if (l->closed)
        return;
    l->closed = 1;
    if (l->sock_open) {
        nng_close(l->sock); /* every context's aio completes with NNG_ECLOSED */
        l->sock_open = 0;
    }
    if (l->ipc_path[0] != '\0')
        unlink(l->ipc_path);
    uv_timer_stop(&l->drain);
    uv_close((uv_handle_t *)&l->drain, NULL);
    uv_close((uv_handle_t *)&l->async, NULL);
    uv_close((uv_handle_t *)&l->sigterm, NULL);
    uv_close((uv_handle_t *)&l->sigint, NULL);
}

static int fail(attn_error_detail *err, const char *what, int rv)
{
    return attn_error_set(err, ATTN_E_IO, "listen", "%s: %s", what, nng_strerror(rv));
}

int attnd_loop_create(attnd_loop **out, const attnd_loop_opts *o, attn_error_detail *err)
{
    attnd_loop *l = calloc(1, sizeof *l);
    int rv;
    char nthreads[16];

    if (l == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    l->o = *o;
    if (l->o.metrics == NULL)
        l->o.metrics = &l->local_metrics;
    if (l->o.contexts == 0)
        l->o.contexts = 1;
    snprintf(l->url, sizeof l->url, "%s", o->url);
    pthread_mutex_init(&l->qlock, NULL);
    /* libuv reads UV_THREADPOOL_SIZE once, at the first uv_queue_work */
    snprintf(nthreads, sizeof nthreads, "%u", o->workers == 0 ? 2 : o->workers);
    setenv("UV_THREADPOOL_SIZE", nthreads, 0);

    if ((rv = nng_rep0_open(&l->sock)) != 0) {
        free(l);
        return fail(err, "nng_rep0_open", rv);
    }
    l->sock_open = 1;
    nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, l);
    nng_pipe_notify(l->sock, NNG_PIPE_EV_REM_POST, pipe_cb, l);
    if ((rv = nng_listener_create(&l->lst, l->sock, l->url)) != 0) {
        attnd_loop_destroy(l);
        return fail(err, l->url, rv);
    }
    l->lst_open = 1;
    /* the frame-size cap is the listener's: an oversized frame closes that pipe */
    if ((rv = nng_listener_set_size(l->lst, NNG_OPT_RECVMAXSZ, o->max_msg)) != 0) {
        attnd_loop_destroy(l);
        return fail(err, "recv-size-max", rv);
    }
    if (strncmp(l->url, "ipc://", 6) == 0) {
        snprintf(l->ipc_path, sizeof l->ipc_path, "%s", l->url + 6);
        if ((rv = nng_listener_set_int(l->lst, NNG_OPT_IPC_PERMISSIONS, o->ipc_mode)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "ipc:permissions", rv);
        }
    }
    l->njobs = l->o.contexts;
    l->jobs = calloc(l->njobs, sizeof *l->jobs);
    if (l->jobs == NULL) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_NOMEM, "", "out of memory");
    }
    for (uint32_t i = 0; i < l->njobs; i++) {
        job *j = &l->jobs[i];
        j->l = l;
        atomic_store(&j->state, JOB_IDLE);
        if ((rv = nng_ctx_open(&j->ctx, l->sock)) != 0 ||
            (rv = nng_aio_alloc(&j->aio, aio_cb, j)) != 0) {
            attnd_loop_destroy(l);
            return fail(err, "nng context", rv);
        }
    }
    if (uv_loop_init(&l->loop) != 0) {
        attnd_loop_destroy(l);
        return attn_error_set(err, ATTN_E_IO, "", "uv_loop_init failed");
    }
    uv_async_init(&l->loop, &l->async, async_cb);
    l->async.data = l;
    uv_signal_init(&l->loop, &l->sigterm);
    uv_signal_init(&l->loop, &l->sigint);
    l->sigterm.data = l->sigint.data = l;
    uv_timer_init(&l->loop, &l->drain);
    l->drain.data = l;
    *out = l;
    return 0;
}

int attnd_loop_run(attnd_loop *l)
{
    int rv;
    signal(SIGPIPE, SIG_IGN);
    uv_signal_start(&l->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&l->sigint, signal_cb, SIGINT);
    if ((rv = nng_listener_start(l->lst, 0)) != 0) {
        fprintf(stderr, "attnd: cannot listen on %s: %s\n", l->url, nng_strerror(rv));
        l->lst_open = 0;       /* never started; nng_close frees it */
        l->ipc_path[0] = '\0'; /* someone else's socket, or none: not ours to remove */
        close_all(l);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        return ATTN_E_IO;
    }
    for (uint32_t i = 0; i < l->njobs; i++) {
        atomic_store(&l->jobs[i].state, JOB_RECV);
        nng_ctx_recv(l->jobs[i].ctx, l->jobs[i].aio);
    }
    atomic_store(&l->o.metrics->listening, 1);
    if (l->o.ready_fd >= 0) {
        ssize_t w = write(l->o.ready_fd, "READY\n", 6);
        (void)w;
        close(l->o.ready_fd);
        l->o.ready_fd = -1;
    }
    {
        char st[600];
        snprintf(st, sizeof st, "READY=1\nSTATUS=serving on %s", l->url);
        attnd_notify(st);
    }
    /* a stop requested before the loop ran */
    if (atomic_load(&l->stop_requested))
        uv_async_send(&l->async);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return 0;
}

void attnd_loop_stop(attnd_loop *l)
{
    atomic_store(&l->stop_requested, 1);
    uv_async_send(&l->async);
}

int attnd_loop_destroy(attnd_loop *l)
{
    int rc = 0;
    if (l == NULL)
        return 0;
    if (l->sock_open) {
        nng_close(l->sock);
        l->sock_open = 0;
    }
    for (uint32_t i = 0; l->jobs != NULL && i < l->njobs; i++) {
        job *j = &l->jobs[i];
        if (j->aio != NULL)
            nng_aio_free(j->aio); /* waits for its callback */
        if (j->req != NULL)
            nng_msg_free(j->req);
        free(j->reply);
    }
    /* the loop only exists when create got that far */
    if (l->async.loop != NULL) {
        if (!l->closed) {
            l->ipc_path[0] = '\0';
            close_all(l);
        }
        uv_run(&l->loop, UV_RUN_DEFAULT);
        rc = uv_loop_close(&l->loop);
        if (rc != 0)
            fprintf(stderr, "attnd: uv_loop_close: %s\n", uv_strerror(rc));
    }
    free(l->jobs);
    pthread_mutex_destroy(&l->qlock);
    free(l);
    return rc;
}
