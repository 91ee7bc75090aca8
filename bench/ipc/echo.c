/* A bare nng REP echo server: the floor attnd's IPC figures are compared
 * with (same transport, same frame sizes, no decoding and no work).  Uses
 * the same number of REP contexts as attnd's default, each re-arming its
 * receive from the send completion, so the only difference from attnd is
 * attnd's own code.  Usage: echo URL; stops on SIGTERM/SIGINT.
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#define CONTEXTS 16

typedef struct ctx {
    nng_ctx c;
    nng_aio *aio;
    int sending;
} ctx;

static void cb(void *arg)
{
    ctx *x = arg;
    if (nng_aio_result(x->aio) != 0) {
        if (x->sending)
            nng_msg_free(nng_aio_get_msg(x->aio));
        if (nng_aio_result(x->aio) == NNG_ECLOSED)
            return;
        x->sending = 0;
        nng_ctx_recv(x->c, x->aio);
        return;
    }
    if (x->sending) {
        x->sending = 0;
        nng_ctx_recv(x->c, x->aio);
    } else {
        x->sending = 1; /* the received message goes straight back */
        nng_ctx_send(x->c, x->aio);
    }
}

static volatile sig_atomic_t g_stop;
static void on_signal(int s)
{
    (void)s;
    g_stop = 1;
}

int main(int argc, char **argv)
{
    nng_socket s;
    nng_listener l;
    ctx cx[CONTEXTS];
    if (argc != 2) {
        fprintf(stderr, "usage: echo URL\n");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (nng_rep0_open(&s) != 0 || nng_listener_create(&l, s, argv[1]) != 0)
        return 1;
    nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, 64u << 20);
    if (nng_listener_start(l, 0) != 0)
        return 1;
    for (int i = 0; i < CONTEXTS; i++) {
        cx[i].sending = 0;
        nng_ctx_open(&cx[i].c, s);
        nng_aio_alloc(&cx[i].aio, cb, &cx[i]);
        nng_ctx_recv(cx[i].c, cx[i].aio);
    }
    printf("READY\n");
    fflush(stdout);
    while (!g_stop)
        pause();
    nng_close(s);
    for (int i = 0; i < CONTEXTS; i++)
        nng_aio_free(cx[i].aio);
    return 0;
}
