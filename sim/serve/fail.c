/* fail.c - how a callback stops the run (runtime.h, hs__engine_fail): in a
 * file of its own because every part of the engine raises errors and none
 * should depend on the event loop for it. */
#include "serve/engine_int.h"

#include <stdarg.h>
#include <stdio.h>

void hs__engine_fail(hs_engine *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (e->fatal) return; /* the first failure is the one to report */
    e->fatal = code ? code : HS_ESTATE;
    e->fatal_err.code = e->fatal;
    va_start(ap, fmt);
    vsnprintf(e->fatal_err.msg, sizeof e->fatal_err.msg, fmt, ap);
    va_end(ap);
}
