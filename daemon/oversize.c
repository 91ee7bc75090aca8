/* Frames over --max-msg, read from the pipe nng closed (see oversize.h). */
#include "daemon/oversize.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>

int attnd_oversize_observable(void)
{
#ifdef NNG_OPT_RECVMAX_REJECTED
    return 1;
#else
    return 0;
#endif
}

void attnd_oversize_describe_peer(nng_pipe p, char *out, size_t cap)
{
    uint64_t pid = 0, uid = 0;
    nng_sockaddr sa;
    char host[INET6_ADDRSTRLEN] = "";
    out[0] = '\0';
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0) {
        if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) == 0)
            snprintf(out, cap, ", peer pid %llu uid %llu", (unsigned long long)pid,
                     (unsigned long long)uid);
        else
            snprintf(out, cap, ", peer pid %llu", (unsigned long long)pid);
        return;
    }
    if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
        return;
    /* nng keeps the port (and the address) in network byte order */
    if (sa.s_family == NNG_AF_INET &&
        inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof host) != NULL)
        snprintf(out, cap, ", peer %s:%u", host, (unsigned)ntohs(sa.s_in.sa_port));
    else if (sa.s_family == NNG_AF_INET6 &&
             inet_ntop(AF_INET6, sa.s_in6.sa_addr, host, sizeof host) != NULL)
        snprintf(out, cap, ", peer [%s]:%u", host, (unsigned)ntohs(sa.s_in6.sa_port));
}

int attnd_oversize_note_removed(nng_pipe p, const char *peer_at_add, size_t max_msg,
                                attnd_metrics *m, attnd_log *log)
{
#ifdef NNG_OPT_RECVMAX_REJECTED
    uint64_t declared = 0;
    char peer[96];
    if (nng_pipe_get_uint64(p, NNG_OPT_RECVMAX_REJECTED, &declared) != 0 || declared == 0)
        return 0;
    atomic_fetch_add_explicit(&m->frames_oversized, 1, memory_order_relaxed);
    if (!attnd_log_enabled(log, ATTND_LOG_WARN))
        return 1;
    /* a tcp pipe nng has closed may no longer know its peer (getpeername
     * on a closed socket): the description taken when it was added wins */
    if (peer_at_add != NULL && peer_at_add[0] != '\0')
        snprintf(peer, sizeof peer, "%s", peer_at_add);
    else
        attnd_oversize_describe_peer(p, peer, sizeof peer);
    attnd_log_limited(log, ATTND_LOG_WARN,
                      "connection %d closed: frame of %llu bytes over --max-msg %zu%s",
                      nng_pipe_id(p), (unsigned long long)declared, max_msg, peer);
    return 1;
#else
    (void)p;
    (void)peer_at_add;
    (void)max_msg;
    (void)m;
    (void)log;
    return 0;
#endif
}
