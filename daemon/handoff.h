/* What a GPU-side hand-off costs on this attnd (issue 11 item 4): the
 * sentence and figure the buffer_register reply of a cuda_ipc buffer and
 * the diag of every waiting or signalling run carry.
 *
 * The figure is measured, not assumed: each cuda_ipc registration runs the
 * CUDA engine's semaphore ping-pong on the buffer's device (engines/cuda/
 * ipc.h, attn_cuda_ipc_pingpong: what exactly it measures and why) through
 * the probe the server installs; the latest result per device is kept for
 * the diag.  Whether contexts run under MPS decides what the figure means:
 * under MPS it predicts the cross-process hand-off; without MPS the reply
 * says "time-sliced" plainly.  Semaphores in shm buffers are host
 * semaphores: no GPU figure.  No CUDA header here, so a fake probe tests it.
 */
#ifndef ATTN_DAEMON_HANDOFF_H
#define ATTN_DAEMON_HANDOFF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/error.h"

#define ATTND_HANDOFF_DEVICES 16
#define ATTND_HANDOFF_ROUNDS 16 /* round trips per measurement */
#define ATTND_HANDOFF_NOTE 224  /* bytes of a sentence, NUL included */

/* Measure `rounds` semaphore round trips on `device`: *us the mean; 0 or an
 * attn_err with err filled. */
typedef int (*attnd_pingpong_fn)(void *arg, int device, uint32_t rounds, double *us,
                                 attn_error_detail *err);

typedef struct attnd_handoff {
    pthread_mutex_t mu;
    int mps; /* 1 under MPS, 0 not, -1 unknown */
    attnd_pingpong_fn probe;
    void *arg;
    double us[ATTND_HANDOFF_DEVICES];    /* latest measurement; 0: none yet */
    char why[ATTND_HANDOFF_DEVICES][96]; /* the last failure, when it failed */
} attnd_handoff;

/* Start with MPS state `mps` and `probe` (NULL: nothing can be measured). */
void attnd_handoff_init(attnd_handoff *h, int mps, attnd_pingpong_fn probe, void *arg);

/* Release the mutex. */
void attnd_handoff_fini(attnd_handoff *h);

/* Measure on `device` now (a cuda_ipc registration), keep the figure, and
 * write the sentence into note (ATTND_HANDOFF_NOTE bytes); returns the
 * figure in us, 0 when it could not be measured (the sentence says why). */
double attnd_handoff_measure(attnd_handoff *h, int device, char *note, size_t n);

/* The sentence for a run whose semaphores are on `device` (-1: host
 * semaphores in shm buffers), from the latest measurement; *us (may be
 * NULL) gets its figure, 0 when none. */
void attnd_handoff_describe(attnd_handoff *h, int device, char *note, size_t n, double *us);

#endif
