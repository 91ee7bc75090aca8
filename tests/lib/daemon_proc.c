/* attnd subprocess helper for integration tests (see daemon_proc.h). */
#include "daemon_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int attn_daemon_start(attn_daemon_proc *d, const char *binary, const char *const *extra)
{
    return attn_daemon_start_logged(d, binary, extra, NULL);
}

int attn_daemon_start_logged(attn_daemon_proc *d, const char *binary, const char *const *extra,
                             const char *log_path)
{
    const char *bin = binary != NULL ? binary : getenv("ATTND");
    int pfd[2];
    char fdstr[16];
    const char *argv[64];
    int argc = 0;
    char buf[16] = {0};
    struct pollfd pf;
    ssize_t n;

    memset(d, 0, sizeof *d);
    d->pid = -1;
    if (bin == NULL) {
        fprintf(stderr, "daemon_proc: ATTND is not set\n");
        return -1;
    }
    snprintf(d->dir, sizeof d->dir, "/tmp/attnd-test-XXXXXX");
    if (mkdtemp(d->dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(d->sock, sizeof d->sock, "%s/attnd.sock", d->dir);
    snprintf(d->url, sizeof d->url, "ipc://%s", d->sock);
    if (pipe(pfd) != 0) {
        perror("pipe");
        return -1;
    }
    snprintf(fdstr, sizeof fdstr, "%d", pfd[1]);
    argv[argc++] = bin;
    /* a --config among the extra flags goes first, so the file cannot move
     * the socket; the other extra flags follow --listen and may override it */
    for (int i = 0; extra != NULL && extra[i] != NULL && extra[i + 1] != NULL && argc < 58; i++)
        if (strcmp(extra[i], "--config") == 0) {
            argv[argc++] = extra[i];
            argv[argc++] = extra[++i];
        }
    argv[argc++] = "--listen";
    argv[argc++] = d->url;
    argv[argc++] = "--ready-fd";
    argv[argc++] = fdstr;
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 62; i++) {
        if (strcmp(extra[i], "--config") == 0 && extra[i + 1] != NULL) {
            i++;
            continue;
        }
        argv[argc++] = extra[i];
    }
    argv[argc] = NULL;
    d->pid = fork();
    if (d->pid < 0) {
        perror("fork");
        return -1;
    }
    if (d->pid == 0) {
        close(pfd[0]);
        if (log_path != NULL) {
            int lfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            if (lfd < 0 || dup2(lfd, 2) < 0)
                _exit(126);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    pf.fd = pfd[0];
    pf.events = POLLIN;
    n = 0;
    if (poll(&pf, 1, 10000) == 1)
        n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    if (n < 5 || strncmp(buf, "READY", 5) != 0) {
        int st;
        fprintf(stderr, "daemon_proc: %s did not become ready\n", bin);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
        d->pid = -1;
        attn_daemon_cleanup(d);
        return -1;
    }
    return 0;
}

int attn_daemon_stop(attn_daemon_proc *d, int sig, int *status)
{
    int st = 0;
    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig == 0 ? SIGTERM : sig);
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            if (status != NULL)
                *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            d->pid = -1;
            return 0;
        }
        usleep(10000);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &st, 0);
    d->pid = -1;
    if (status != NULL)
        *status = 137;
    return -1;
}

int attn_daemon_cleanup(attn_daemon_proc *d)
{
    struct stat sb;
    int left = 0;
    if (d->sock[0] != '\0' && stat(d->sock, &sb) == 0) {
        left = 1;
        unlink(d->sock);
    }
    if (d->dir[0] != '\0')
        rmdir(d->dir);
    return left;
}
