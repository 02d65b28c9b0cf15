/* progress.h - a long command's progress line on stderr (planners'
 * searches, hetsim-exec replay).
 *
 * Work that runs past a few seconds says where it is, every 2 s: on a
 * terminal as one line rewritten in place; when stderr is not a terminal
 * only if asked (the caller's verbose option, e.g. a planner's verbose=1, or HS_PROGRESS=<seconds>
 * in the environment, which also sets the interval and the first line's
 * delay; HS_PROGRESS=0 turns it off, terminal or not).  Lines read
 * "<label>: <t> s, <what the caller says>" (label: "<planner> search",
 * "hetsim-exec: replay").  Reading the clock costs a system call, so
 * hs_progress_due looks at it only every `every` calls.  Progress goes to
 * stderr only: it never changes a plan or anything written to stdout. */
#ifndef HS_PROGRESS_H
#define HS_PROGRESS_H

typedef struct hs_progress {
    char name[64];   /* the label */
    double t0, next, interval; /* s, monotonic clock */
    unsigned long ticks, every;
    int on;                    /* lines allowed at all */
    int tty;                   /* stderr is a terminal: rewrite one line */
    int shown;                 /* a line was printed (end needs a newline) */
} hs_progress;

/* Starts p's clock.  every: calls of hs_progress_due per clock read (0 or 1:
 * each); verbose: show lines even when stderr is not a terminal. */
void hs_progress_start(hs_progress *p, const char *label, unsigned long every, int verbose);
/* 1 when a line is due now (then print it with hs_progress_printf). */
int hs_progress_due(hs_progress *p);
/* Prints "<label>: <t> s, " and the formatted rest (due or not: a final
 * line is the caller's to decide); nothing when progress is off. */
void hs_progress_printf(hs_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Ends a rewritten terminal line with its newline; a no-op otherwise. */
void hs_progress_end(hs_progress *p);

#endif
