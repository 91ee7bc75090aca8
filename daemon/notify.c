/* sd_notify by hand (see notify.h): a datagram to $NOTIFY_SOCKET, where a
 * leading '@' names an abstract socket. */
#include "daemon/notify.h"

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
