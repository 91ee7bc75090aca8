/* Private to engines/cpu: a persistent pool of worker threads.  An engine
 * instance starts its workers once (attn_engine_create) and hands each
 * phase of a run to all of them, instead of spawning and joining threads
 * twice per run inside libuv's worker pool. */
#ifndef ATTN_ENGINES_CPU_THREADS_H
#define ATTN_ENGINES_CPU_THREADS_H

#include <stdint.h>

typedef struct cpu_threads cpu_threads;

/* Start n - 1 workers (the caller of cpu_threads_run is worker 0); fewer
 * when the system refuses threads (units are claimed dynamically, so fewer
 * is still correct).  0 or ATTN_E_NOMEM. */
int cpu_threads_create(uint32_t n, cpu_threads **out);

/* Stop and join the workers, free the pool (NULL is ignored). */
void cpu_threads_destroy(cpu_threads *t);

/* Workers including the caller. */
uint32_t cpu_threads_count(const cpu_threads *t);

/* Threads this pool ever created (a test counts that runs start none). */
uint64_t cpu_threads_started(const cpu_threads *t);

/* Run fn(arg, worker) on every worker, the caller as worker 0, and return
 * when all have returned.  Callers serialise: one job at a time per pool. */
void cpu_threads_run(cpu_threads *t, void (*fn)(void *arg, uint32_t worker), void *arg);

#endif
