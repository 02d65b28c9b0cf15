/* progress.c - a long command's progress line on stderr (progress.h). */
#include "core/progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/time.h"

#define HS_PROGRESS_EVERY_S 2.0

void hs_progress_start(hs_progress *p, const char *label, unsigned long every, int verbose)
{
    const char *env = getenv("HS_PROGRESS");
    char *end;
    double s;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", label && *label ? label : "hetsim");
    p->every = every ? every : 1;
    p->tty = isatty(2);
    p->on = p->tty || verbose;
    p->interval = HS_PROGRESS_EVERY_S;
    if (env && *env) {
        /* a malformed value is ignored: progress is a courtesy, not input */
        s = strtod(env, &end);
        if (!*end && s == s) {
            p->on = s > 0;
            if (s > 0) p->interval = s;
        }
    }
    p->t0 = hs_wall_s();
    p->next = p->interval;
}

int hs_progress_due(hs_progress *p)
{
    double t;
    if (!p->on || ++p->ticks % p->every) return 0;
    t = hs_wall_s() - p->t0;
    if (t < p->next) return 0;
    p->next = t + p->interval;
    return 1;
}

void hs_progress_printf(hs_progress *p, const char *fmt, ...)
{
    va_list ap;
    if (!p->on) return;
    fprintf(stderr, "%s%s: %.1f s, ", p->tty ? "\r\033[K" : "", p->name, hs_wall_s() - p->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (!p->tty) fputc('\n', stderr);
    fflush(stderr);
    p->shown = 1;
}

void hs_progress_end(hs_progress *p)
{
    if (p->shown && p->tty) fputc('\n', stderr);
    p->shown = 0;
}
