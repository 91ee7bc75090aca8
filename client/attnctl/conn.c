/* attnctl connections: an nng REQ socket to a running attnd, or to one
 * attnctl starts itself (--local). */
#include <limits.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnctl.h"
#include "protocol/codec.h"
#include "protocol/json.h"
#include "protocol/tls.h"

double actl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void actl_unique_tag(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, cap, "%x%05lx", (unsigned)getpid() & 0xfffffu,
             (unsigned long)((ts.tv_sec * 1000 + ts.tv_nsec / 1000000) & 0xfffffu));
}

int actl_pool_drop(actl_conn *c, const char *name, int quiet_unknown)
{
    attn_request req;
    attn_reply rep;
    attn_error_detail err;
    int rc;
    memset(&req, 0, sizeof req);
    req.v = ATTN_PROTOCOL_VERSION;
    req.op = ATTN_OP_POOL_DROP;
    req.id = 1;
    snprintf(req.pool, sizeof req.pool, "%s", name);
    rc = actl_call_typed(c, &req, &rep, &err);
    attn_reply_free(&rep);
    if (rc != 0 && !(quiet_unknown && rc == ATTN_E_UNKNOWN_POOL))
        fprintf(stderr, "attnctl: pool_drop %s: %s: %s\n", name, attn_err_name(rc), err.message);
    return rc;
}

const char *actl_url(const char *flag)
{
    const char *env = getenv("ATTN_URL");
    if (flag != NULL)
        return flag;
    return env != NULL && env[0] != '\0' ? env : ATTNCTL_DEFAULT_URL;
}

/* The attnd to start for --local: $ATTND, else the attnd beside this
 * attnctl (build/ and an install's bin/ hold both), else "attnd" on PATH. */
static void local_binary(char *out, size_t n)
{
    const char *env = getenv("ATTND");
    char self[PATH_MAX];
    ssize_t len;
    if (env != NULL && env[0] != '\0') {
        snprintf(out, n, "%s", env);
        return;
    }
    len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            slash[1] = '\0';
            if ((size_t)(slash + 1 - self) + sizeof "attnd" <= n) {
                memcpy(out, self, (size_t)(slash + 1 - self));
                memcpy(out + (slash + 1 - self), "attnd", sizeof "attnd");
                if (access(out, X_OK) == 0)
                    return;
            }
        }
    }
    snprintf(out, n, "attnd");
}

/* Start attnd on ipc://<private dir>/attnd.sock and wait for its READY line
 * on a pipe (the daemon's --ready-fd); fills c->child, c->dir and `url`. */
static int local_start(actl_conn *c, const char *capture, char *url, size_t n)
{
    char bin[PATH_MAX], fdstr[16], buf[16] = {0};
    const char *argv[12];
    int argc = 0, pfd[2], st;
    struct pollfd pf;
    ssize_t got = 0;
    local_binary(bin, sizeof bin);
    snprintf(c->dir, sizeof c->dir, "/tmp/attnctl-XXXXXX");
    if (mkdtemp(c->dir) == NULL) {
        perror("attnctl: mkdtemp");
        c->dir[0] = '\0';
        return ATTN_E_IO;
    }
    snprintf(url, n, "ipc://%s/attnd.sock", c->dir);
    if (pipe(pfd) != 0) {
        perror("attnctl: pipe");
        return ATTN_E_IO;
    }
    snprintf(fdstr, sizeof fdstr, "%d", pfd[1]);
    argv[argc++] = bin;
    argv[argc++] = "--listen";
    argv[argc++] = url;
    argv[argc++] = "--ready-fd";
    argv[argc++] = fdstr;
    if (capture != NULL) {
        argv[argc++] = "--capture";
        argv[argc++] = capture;
    }
    argv[argc] = NULL;
    c->child = fork();
    if (c->child < 0) {
        perror("attnctl: fork");
        c->child = 0;
        close(pfd[0]);
        close(pfd[1]);
        return ATTN_E_IO;
    }
    if (c->child == 0) {
        /* the private daemon does not outlive its attnctl */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        close(pfd[0]);
        execvp(bin, (char *const *)argv);
        fprintf(stderr, "attnctl: cannot run %s (set ATTND)\n", bin);
        _exit(127);
    }
    close(pfd[1]);
    pf.fd = pfd[0];
    pf.events = POLLIN;
    if (poll(&pf, 1, 30000) == 1)
        got = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    if (got < 5 || strncmp(buf, "READY", 5) != 0) {
        fprintf(stderr, "attnctl: local attnd (%s) did not become ready\n", bin);
        kill(c->child, SIGKILL);
        waitpid(c->child, &st, 0);
        c->child = 0;
        return ATTN_E_IO;
    }
    return 0;
}

/* Stop a --local attnd and remove its private directory. */
static void local_stop(actl_conn *c)
{
    char path[128];
    int st;
    if (c->child > 0) {
        kill(c->child, SIGTERM);
        waitpid(c->child, &st, 0);
    }
    if (c->dir[0] != '\0') {
        snprintf(path, sizeof path, "%s/attnd.sock", c->dir);
        unlink(path);
        rmdir(c->dir);
    }
    c->child = 0;
    c->dir[0] = '\0';
}

/* Dial url (blocking); a tls+tcp:// URL takes its PEM files from
 * ATTN_TLS_CERT, ATTN_TLS_KEY, ATTN_TLS_CA (and ATTN_TLS_SERVER_NAME). */
static int dial(nng_socket s, const char *url)
{
    nng_dialer d;
    int rv;
    if ((rv = nng_dialer_create(&d, s, url)) != 0) {
        fprintf(stderr, "attnctl: cannot connect to %s: %s\n", url, nng_strerror(rv));
        return ATTN_E_IO;
    }
    if (strncmp(url, "tls+tcp://", 10) == 0) {
        attn_tls_files f = {getenv("ATTN_TLS_CERT"), getenv("ATTN_TLS_KEY"), getenv("ATTN_TLS_CA"),
                            getenv("ATTN_TLS_SERVER_NAME")};
        attn_error_detail err;
        nng_tls_config *cfg;
        int rc = attn_tls_config_from_files(&cfg, 0, &f, &err);
        if (rc != 0) {
            fprintf(stderr, "attnctl: %s: %s (set ATTN_TLS_CERT, ATTN_TLS_KEY, ATTN_TLS_CA)\n",
                    err.field, err.message);
            return rc;
        }
        rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
        nng_tls_config_free(cfg);
        if (rv != 0) {
            fprintf(stderr, "attnctl: tls: %s\n", nng_strerror(rv));
            return ATTN_E_IO;
        }
    }
    if ((rv = nng_dialer_start(d, 0)) != 0) {
        fprintf(stderr, "attnctl: no daemon at %s: %s\n", url, nng_strerror(rv));
        return ATTN_E_IO;
    }
    return 0;
}

int actl_open(actl_conn *c, const char *url, int local, const char *capture)
{
    char local_url[128];
    int rv;
    memset(c, 0, sizeof *c);
    if (local) {
        if ((rv = local_start(c, capture, local_url, sizeof local_url)) != 0) {
            local_stop(c);
            return rv;
        }
        url = local_url;
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        fprintf(stderr, "attnctl: nng_req0_open: %s\n", nng_strerror(rv));
        local_stop(c);
        return ATTN_E_IO;
    }
    nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, 60000);
    nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, 60000);
    nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0);
    if ((rv = dial(c->sock, url)) != 0) {
        nng_close(c->sock);
        local_stop(c);
        return rv;
    }
    c->open = 1;
    return 0;
}

int actl_call(actl_conn *c, const void *req, size_t len, void **rep, size_t *rep_len)
{
    void *buf = NULL;
    size_t sz = 0;
    int rv;
    if ((rv = nng_send(c->sock, (void *)req, len, 0)) != 0 ||
        (rv = nng_recv(c->sock, &buf, &sz, NNG_FLAG_ALLOC)) != 0) {
        fprintf(stderr, "attnctl: %s\n", nng_strerror(rv));
        return ATTN_E_IO;
    }
    *rep = malloc(sz + 1);
    if (*rep == NULL) {
        nng_free(buf, sz);
        return ATTN_E_NOMEM;
    }
    memcpy(*rep, buf, sz);
    nng_free(buf, sz);
    *rep_len = sz;
    return 0;
}

void actl_close(actl_conn *c)
{
    if (c->open)
        nng_close(c->sock);
    local_stop(c);
    memset(c, 0, sizeof *c);
}

static void free_backing(void *p)
{
    free(p);
}

int actl_call_typed(actl_conn *c, attn_request *req, attn_reply *rep, attn_error_detail *err)
{
    attn_buf b = {0};
    void *rb = NULL;
    size_t rl = 0;
    int rc;
    memset(rep, 0, sizeof *rep);
    if ((rc = attn_request_encode(req, &b, err)) != 0)
        return rc;
    rc = actl_call(c, b.data, b.len, &rb, &rl);
    attn_buf_free(&b);
    if (rc != 0)
        return attn_error_set(err, rc, "", "transport failure");
    if ((rc = attn_reply_decode(rb, rl, NULL, rep, err)) != 0) {
        free(rb);
        return rc;
    }
    rep->backing = rb;
    rep->backing_free = free_backing;
    if (!rep->ok) {
        *err = rep->error;
        return rep->error.code != 0 ? rep->error.code : ATTN_E_INTERNAL;
    }
    return 0;
}

void actl_print_frame(const void *buf, size_t len, int pretty)
{
    char *js = NULL;
    attn_error_detail err;
    if (attn_msgpack_to_json(buf, len, 0, pretty != 0, &js, &err) != 0) {
        printf("{\"error\": \"cannot render reply: %s\"}\n", err.message);
        return;
    }
    fputs(js, stdout);
    free(js);
}
