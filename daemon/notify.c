/* sd_notify by hand (see notify.h): a datagram to $NOTIFY_SOCKET, where a
 * leading '@' names an abstract socket. */
#include "daemon/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int attnd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa;
    size_t n;
    socklen_t len;
    int fd, rc;

    if (path == NULL || path[0] == '\0')
        return 0;
    n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    rc = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0 ? -1 : 1;
    close(fd);
    return rc;
}

uint64_t attnd_notify_watchdog_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    char *end = NULL;
    unsigned long long v;

    if (usec == NULL || usec[0] == '\0')
        return 0;
    if (pid != NULL && pid[0] != '\0') {
        errno = 0;
        unsigned long long p = strtoull(pid, &end, 10);
        if (errno != 0 || *end != '\0' || p != (unsigned long long)getpid())
            return 0; /* meant for another process (a wrapper's child) */
    }
    errno = 0;
    v = strtoull(usec, &end, 10);
    if (errno != 0 || *end != '\0' || usec[0] == '-')
        return 0;
    return (uint64_t)v;
}
