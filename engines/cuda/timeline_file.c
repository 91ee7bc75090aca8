/* The CUDA timeline's file (see timeline_file.h). */
#include "engines/cuda/timeline_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct attn_tl_file {
    int fd;
    int device;
    long pid;
};

static const char *const g_point_names[] = {
#define ATTN__TL_NAME(e, v, name) [v] = name,
    ATTN_CUDA_TIMELINE_POINTS(ATTN__TL_NAME)
#undef ATTN__TL_NAME
};

int attn_tl_file_open(const char *path, int device, attn_tl_file **out, attn_error_detail *err)
{
    *out = NULL;
    attn_tl_file *f = calloc(1, sizeof *f);
    if (f == NULL)
        return attn_error_set(err, ATTN_E_NOMEM, "ATTN_CUDA_TIMELINE", "out of memory");
    /* appended, not truncated: another instance may be writing it already */
    f->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int en = errno;
        free(f);
        return attn_error_set(err, ATTN_E_IO, "ATTN_CUDA_TIMELINE", "cannot append to %.150s: %s",
                              path, strerror(en));
    }
    f->device = device;
    f->pid = (long)getpid();
    *out = f;
    return 0;
}

void attn_tl_file_close(attn_tl_file *f)
{
    if (f == NULL)
        return;
    close(f->fd);
    free(f);
}

int attn_tl_file_write(attn_tl_file *f, const attn_tl_record *r)
{
    char line[512];
    int n = snprintf(line, sizeof line,
                     "{\"pid\":%ld,\"device\":%d,\"layer\":%u,\"wait\":%llu,\"signal\":%llu,"
                     "\"host_behind\":%s",
                     f->pid, f->device, r->layer, (unsigned long long)r->wait_value,
                     (unsigned long long)r->signal_value, r->host_behind ? "true" : "false");
    for (int i = 0; i < ATTN_TL_NUM_POINTS && n > 0 && (size_t)n < sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, ",\"%s\":%llu", g_point_names[i],
                      (unsigned long long)r->stamps[i]);
    if (n <= 0 || (size_t)n + 2 > sizeof line)
        return ATTN_E_INTERNAL; /* cannot happen: every field is a bounded number */
    line[n++] = '}';
    line[n++] = '\n';
    /* one write of an O_APPEND file: the line lands whole after every other */
    ssize_t w = write(f->fd, line, (size_t)n);
    return w == (ssize_t)n ? 0 : ATTN_E_IO;
}
