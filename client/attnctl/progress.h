/* attnctl's terminal side: progress lines on stderr when stderr is a
 * terminal (stdout stays machine-readable: tables, JSON), and Ctrl-C as a
 * request to stop at the next safe point so the pools a command created
 * can still be dropped. */
#ifndef ATTN_ATTNCTL_PROGRESS_H
#define ATTN_ATTNCTL_PROGRESS_H

#include <stdint.h>

typedef struct actl_progress {
    int on;         /* stderr is a terminal */
    int shown;      /* a line is on screen (cleared by actl_progress_end) */
    double last_us; /* when the line was last redrawn */
    char what[32];  /* "bench", "gen", ... */
} actl_progress;

/* Start a progress line labelled `what`; it stays silent unless stderr is a tty. */
void actl_progress_begin(actl_progress *p, const char *what);

/* Redraw "what: done/total unit (pct%) detail" at most every 200 ms;
 * `total` 0 leaves out the total and the percentage. */
void actl_progress_show(actl_progress *p, uint64_t done, uint64_t total, const char *unit,
                        const char *detail);

/* Erase the line, if one was drawn. */
void actl_progress_end(actl_progress *p);

/* Catch SIGINT and SIGTERM from now on: they only set the flag below. */
void actl_interrupt_catch(void);

/* 1 once SIGINT or SIGTERM arrived after actl_interrupt_catch. */
int actl_interrupted(void);

#endif
