/* The hand-off sentence and its measured figure (see handoff.h). */
#include "daemon/handoff.h"

#include <stdio.h>
#include <string.h>

void attnd_handoff_init(attnd_handoff *h, int mps, attnd_pingpong_fn probe, void *arg)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    h->mps = mps;
    h->probe = probe;
    h->arg = arg;
}

void attnd_handoff_fini(attnd_handoff *h)
{
    pthread_mutex_destroy(&h->mu);
}

/* The sentence for device semaphores on `device` with figure `us` (0: none,
 * `why` says why when it failed).  It must fit the note whole: the remedy
 * comes before the failure's reason, and only the reason is shortened to
 * the room left (a failed probe's message once pushed the remedy out). */
static void sentence(int mps, int device, double us, const char *why, char *note, size_t n)
{
    static const char time_sliced[] = "time-sliced: no MPS, so two processes' kernels take turns "
                                      "and a cross-process hand-off costs ~286 us";
    static const char remedy[] = "start nvidia-cuda-mps-control -d";
    char num[32];
    if (us > 0) {
        /* a figure past any plausible one keeps its width bounded */
        if (us < 1e7)
            snprintf(num, sizeof num, "%.1f", us);
        else
            snprintf(num, sizeof num, "%.3e", us);
        if (mps == 1)
            snprintf(note, n,
                     "MPS: GPU-side hand-offs between processes overlap; semaphore ping-pong "
                     "measured %s us per round trip on cuda:%d",
                     num, device);
        else if (mps == 0)
            snprintf(note, n, "%s, not the %s us semaphore ping-pong measured on cuda:%d; %s",
                     time_sliced, num, device, remedy);
        else
            snprintf(note, n,
                     "MPS state unknown (time-sliced unless MPS runs); semaphore ping-pong "
                     "measured %s us per round trip on cuda:%d",
                     num, device);
        return;
    }
    char lead[192];
    if (mps == 1)
        snprintf(lead, sizeof lead, "MPS: GPU-side hand-offs between processes overlap");
    else if (mps == 0)
        snprintf(lead, sizeof lead, "%s; %s", time_sliced, remedy);
    else
        snprintf(lead, sizeof lead, "MPS state unknown (time-sliced unless MPS runs)");
    const char *sep = why[0] ? ": " : " yet";
    int fixed = snprintf(NULL, 0, "%s; no ping-pong measured on cuda:%d%s", lead, device, sep);
    int room = fixed >= 0 && (size_t)fixed < n ? (int)(n - 1 - (size_t)fixed) : 0;
    snprintf(note, n, "%s; no ping-pong measured on cuda:%d%s%.*s", lead, device, sep, room, why);
}

double attnd_handoff_measure(attnd_handoff *h, int device, char *note, size_t n)
{
    attn_error_detail err;
    double us = 0;
    memset(&err, 0, sizeof err);
    int rc = h->probe != NULL ? h->probe(h->arg, device, ATTND_HANDOFF_ROUNDS, &us, &err)
                              : attn_error_set(&err, ATTN_E_BUFFER_UNSUPPORTED, "handoff",
                                               "no CUDA engine to measure with");
    if (rc != 0 || !(us > 0))
        us = 0;
    if (device >= 0 && device < ATTND_HANDOFF_DEVICES) {
        pthread_mutex_lock(&h->mu);
        h->us[device] = us;
        snprintf(h->why[device], sizeof h->why[device], "%.95s", rc != 0 ? err.message : "");
        pthread_mutex_unlock(&h->mu);
    }
    sentence(h->mps, device, us, rc != 0 ? err.message : "", note, n);
    return us;
}

void attnd_handoff_describe(attnd_handoff *h, int device, char *note, size_t n, double *us)
{
    double v = 0;
    char why[96] = "";
    if (device < 0) {
        snprintf(note, n,
                 "host semaphores (shm buffer): attnd waits and signals them on the host, "
                 "no GPU hand-off figure");
        if (us != NULL)
            *us = 0;
        return;
    }
    if (device < ATTND_HANDOFF_DEVICES) {
        pthread_mutex_lock(&h->mu);
        v = h->us[device];
        snprintf(why, sizeof why, "%s", h->why[device]);
        pthread_mutex_unlock(&h->mu);
    }
    sentence(h->mps, device, v, why, note, n);
    if (us != NULL)
        *us = v;
}
