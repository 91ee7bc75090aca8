/* In-process nng REP server loop for the client tests (see rep_serve.h). */
#include "tests/lib/rep_serve.h"

#include <stdlib.h>

void attn_rep_serve(nng_socket sock, attn_rep_handler handle, void *arg, const atomic_int *stop)
{
    nng_ctx ctx;
    nng_aio *aio;
    if (nng_ctx_open(&ctx, sock) != 0 || nng_aio_alloc(&aio, NULL, NULL) != 0)
        return;
    /* short receive timeouts, so the loop notices *stop while idle */
    nng_aio_set_timeout(aio, 20);
    while (!atomic_load(stop)) {
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) == NNG_ETIMEDOUT)
            continue;
        if (nng_aio_result(aio) != 0)
            break;
        nng_msg *msg = nng_aio_get_msg(aio);
        void *reply = NULL;
        size_t len = 0;
        if (handle(arg, nng_msg_body(msg), nng_msg_len(msg), &reply, &len) != 0) {
            nng_msg_free(msg);
            break;
        }
        nng_msg_clear(msg);
        nng_msg_append(msg, reply, len);
        free(reply);
        nng_aio_set_msg(aio, msg);
        nng_aio_set_timeout(aio, NNG_DURATION_INFINITE);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0)
            nng_msg_free(msg);
        nng_aio_set_timeout(aio, 20);
    }
    nng_aio_free(aio);
    nng_ctx_close(ctx);
}
