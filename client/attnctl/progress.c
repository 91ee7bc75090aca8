/* attnctl progress lines and Ctrl-C (see progress.h). */
#include "progress.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attnctl.h"

#define PROGRESS_PERIOD_US 200000.0

void actl_progress_begin(actl_progress *p, const char *what)
{
    memset(p, 0, sizeof *p);
    p->on = isatty(STDERR_FILENO);
    snprintf(p->what, sizeof p->what, "%s", what);
}

void actl_progress_show(actl_progress *p, uint64_t done, uint64_t total, const char *unit,
                        const char *detail)
{
    double now;
    if (!p->on)
        return;
    now = actl_now_us();
    if (p->shown && now - p->last_us < PROGRESS_PERIOD_US && (total == 0 || done < total))
        return;
    p->last_us = now;
    p->shown = 1;
    /* \r and erase-to-end: one line, redrawn in place */
    if (total > 0)
        fprintf(stderr, "\r\033[K%s: %llu/%llu %s (%.0f%%)%s%s", p->what, (unsigned long long)done,
                (unsigned long long)total, unit, 100.0 * (double)done / (double)total,
                detail != NULL ? " " : "", detail != NULL ? detail : "");
    else
        fprintf(stderr, "\r\033[K%s: %llu %s%s%s", p->what, (unsigned long long)done, unit,
                detail != NULL ? " " : "", detail != NULL ? detail : "");
    fflush(stderr);
}

void actl_progress_end(actl_progress *p)
{
    if (p->on && p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->shown = 0;
}

/* A signal handler can only reach a static flag: this is the one piece of
 * process state attnctl keeps outside its command's frame. */
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

void actl_interrupt_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int actl_interrupted(void)
{
    return g_interrupted != 0;
}
