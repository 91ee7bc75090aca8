/* What `trace: false` adds to a run (seed 0x0BH cost ledger): every untraced
 * run takes the daemon's trace lock shared and releases it (daemon/exec.c),
 * and tests one flag.  This measures that pair on the machine it runs on, to
 * set beside the run's own time.
 * Build: cc -O2 -o trace_lock_cost bench/trace_lock_cost.c -lpthread */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(void)
{
    pthread_rwlock_t lock;
    volatile int traced = 0, sink = 0;
    enum { N = 10000000 };
    pthread_rwlock_init(&lock, NULL);
    double t0 = now_ns();
    for (int i = 0; i < N; i++) {
        if (traced)
            pthread_rwlock_wrlock(&lock);
        else
            pthread_rwlock_rdlock(&lock);
        sink++;
        pthread_rwlock_unlock(&lock);
    }
    double per = (now_ns() - t0) / N;
    printf("{\"trace_false_overhead_ns\": %.1f, \"iterations\": %d}\n", per, N);
    return sink == N ? 0 : 1;
}
