/* systemd readiness notification without libsystemd: one datagram of
 * "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET. */
#ifndef ATTN_DAEMON_NOTIFY_H
#define ATTN_DAEMON_NOTIFY_H

#include <stdint.h>

/* Send `state` (e.g. "READY=1\nSTATUS=serving") when $NOTIFY_SOCKET is set;
 * returns 1 when sent, 0 when there is no socket, -1 on a send error. */
int attnd_notify(const char *state);

/* The watchdog timeout systemd set for this process ($WATCHDOG_USEC, honoured
 * when $WATCHDOG_PID is unset or names this process), in microseconds; 0 when
 * there is no watchdog.  WATCHDOG=1 must then arrive more often than that. */
uint64_t attnd_notify_watchdog_usec(void);

#endif
