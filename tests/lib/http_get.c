/* Test helper: minimal HTTP GET and a free port (see http_get.h). */
#include "tests/lib/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int loopback_socket(int port, struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {10, 0};
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return fd;
}

int attn_http_get(int port, const char *path, int *status, char **body)
{
    struct sockaddr_in a;
    char req[512];
    char *buf = NULL, *sep;
    size_t len = 0, cap = 0;
    int fd = loopback_socket(port, &a), n;
    *body = NULL;
    if (fd < 0)
        return -1;
    n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                 path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t got;
        if (cap - len < 4096) {
            char *grown = realloc(buf, cap + 65536);
            if (grown == NULL)
                break;
            buf = grown;
            cap += 65536;
        }
        got = read(fd, buf + len, cap - len - 1);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    if (buf == NULL)
        return -1;
    buf[len] = '\0';
    sep = strstr(buf, "\r\n\r\n");
    if (sep == NULL || sscanf(buf, "HTTP/1.%*d %d", status) != 1) {
        free(buf);
        return -1;
    }
    memmove(buf, sep + 4, len - (size_t)(sep + 4 - buf) + 1);
    *body = buf;
    return 0;
}

int attn_free_port(void)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int fd = loopback_socket(0, &a), port = -1;
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}
