/* The persistent worker pool of the CPU engine (threads.h): a generation
 * counter under one mutex starts a job on every worker; a pending count
 * says when the last one finished. */
#include "engines/cpu/threads.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "attn/error.h"

#define CPU_THREADS_MAX 256

struct cpu_threads {
    pthread_mutex_t mu;
    pthread_cond_t go;   /* a new generation (job) or stop */
    pthread_cond_t done; /* pending reached zero */
    uint64_t generation;
    uint32_t pending; /* workers (not the caller) still in the current job */
    bool stop;
    void (*fn)(void *arg, uint32_t worker);
    void *arg;
    uint32_t num_workers; /* started threads, excluding the caller */
    uint64_t started;
    pthread_t tid[CPU_THREADS_MAX];
};

typedef struct worker_arg {
    cpu_threads *t;
    uint32_t index;
} worker_arg;

static void *worker_main(void *p)
{
    worker_arg wa = *(worker_arg *)p;
    free(p);
    cpu_threads *t = wa.t;
    uint64_t seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->generation == seen)
            pthread_cond_wait(&t->go, &t->mu);
        if (t->stop)
            break;
        seen = t->generation;
        void (*fn)(void *, uint32_t) = t->fn;
        void *arg = t->arg;
        pthread_mutex_unlock(&t->mu);
        fn(arg, wa.index);
        pthread_mutex_lock(&t->mu);
        if (--t->pending == 0)
            pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int cpu_threads_create(uint32_t n, cpu_threads **out)
{
    cpu_threads *t = calloc(1, sizeof *t);
    *out = NULL;
    if (t == NULL)
        return ATTN_E_NOMEM;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    if (n > CPU_THREADS_MAX)
        n = CPU_THREADS_MAX;
    for (uint32_t i = 1; i < n; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa == NULL)
            break;
        wa->t = t;
        wa->index = t->num_workers + 1;
        if (pthread_create(&t->tid[t->num_workers], NULL, worker_main, wa) != 0) {
            free(wa);
            break;
        }
        t->num_workers++;
        t->started++;
    }
    *out = t;
    return 0;
}

void cpu_threads_destroy(cpu_threads *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    for (uint32_t i = 0; i < t->num_workers; i++)
        pthread_join(t->tid[i], NULL);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

uint32_t cpu_threads_count(const cpu_threads *t)
{
    return t->num_workers + 1;
}

uint64_t cpu_threads_started(const cpu_threads *t)
{
    return t->started;
}

void cpu_threads_run(cpu_threads *t, void (*fn)(void *arg, uint32_t worker), void *arg)
{
    pthread_mutex_lock(&t->mu);
    t->fn = fn;
    t->arg = arg;
    t->pending = t->num_workers;
    t->generation++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    fn(arg, 0);
    pthread_mutex_lock(&t->mu);
    while (t->pending > 0)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}
