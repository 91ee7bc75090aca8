/* Start and stop an attnd subprocess for tests (libuv habit: the helper
 * server signals readiness through a pipe before the test talks to it).
 * The daemon listens on ipc://<tmpdir>/attnd.sock; stopping it sends
 * SIGTERM, waits for the exit status and removes the directory. */
#ifndef ATTN_TESTS_DAEMON_PROC_H
#define ATTN_TESTS_DAEMON_PROC_H

#include <sys/types.h>

typedef struct attn_daemon_proc {
    pid_t pid;
    char dir[256];
    char sock[320];
    char url[340];
} attn_daemon_proc;

/* Start $ATTND (or `binary` when not NULL) with --listen on a fresh temp
 * directory, --ready-fd, and the NULL-terminated `extra` flags after them
 * (a --config FILE among them goes first, so the file cannot override the
 * socket; other flags can); waits up to 10 s for "READY".  Returns 0, or -1
 * with a message on stderr. */
int attn_daemon_start(attn_daemon_proc *d, const char *binary, const char *const *extra);

/* As attn_daemon_start, with the daemon's stderr (its log) appended to
 * `log_path` when not NULL. */
int attn_daemon_start_logged(attn_daemon_proc *d, const char *binary, const char *const *extra,
                             const char *log_path);

/* Send `sig` (SIGTERM when 0), wait up to 10 s, store the exit code (or
 * 128 + signal) in *status; returns 0 when it exited in time. */
int attn_daemon_stop(attn_daemon_proc *d, int sig, int *status);

/* Remove the temporary directory (and the socket if the daemon left it);
 * returns 1 when the socket was still there. */
int attn_daemon_cleanup(attn_daemon_proc *d);

#endif
