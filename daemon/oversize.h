/* Frames over --max-msg (issue 9 item 14).  nng refuses such a frame in its
 * transport, from the 8-byte length header, and closes the connection before
 * attnd sees a byte of it: no request, so no reply, no error log line.
 * attnd's private nng build (scripts/nng/rcv-max-rejects.patch) leaves the
 * declared size on the closed pipe (NNG_OPT_RECVMAX_REJECTED) until nng
 * reports the pipe gone; this module reads it there, counts the frame
 * (attnd_frames_oversized_total) and logs a warn line naming the limit, the
 * size and the peer.  With an nng that lacks the option (the system's, from
 * 1.10.1 on) nng's own log line (NNG-RCVMAX, daemon/log.c) is all there is.
 */
#ifndef ATTN_DAEMON_OVERSIZE_H
#define ATTN_DAEMON_OVERSIZE_H

#include <nng/nng.h>
#include <stddef.h>

#include "daemon/log.h"
#include "daemon/metrics.h"

/* 1 when the linked nng says which pipe it closed for an oversized frame
 * (the counter and the warn line work), 0 when it does not. */
int attnd_oversize_observable(void);

/* ", peer pid 12 uid 1000" (ipc), ", peer 127.0.0.1:4711" (tcp, tls), or ""
 * when the transport cannot say (inproc); taken while the pipe is open. */
void attnd_oversize_describe_peer(nng_pipe p, char *out, size_t cap);

/* From pipe `p`'s NNG_PIPE_EV_REM_POST callback (an nng thread): when nng
 * closed `p` for a frame over `max_msg`, count it in m->frames_oversized and
 * log a rate-limited warn line naming the peer (`peer_at_add`, the
 * description taken when the pipe was added, or NULL to ask the pipe now);
 * returns 1 then, 0 for any other removal. */
int attnd_oversize_note_removed(nng_pipe p, const char *peer_at_add, size_t max_msg,
                                attnd_metrics *m, attnd_log *log);

#endif
