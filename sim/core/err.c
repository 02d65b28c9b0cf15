/* err.c - error messages; see err.h. */
#include "core/err.h"

#include <stdio.h>
#include <string.h>

int hs_verrf(hs_err *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int hs_errf(hs_err *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_verrf(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int hs_err_prefix(hs_err *err, const char *fmt, ...)
{
    char head[HS_ERR_MSG_MAX];
    size_t hn, on;
    va_list ap;
    if (!err) return 0;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    hn = strlen(head);
    on = strnlen(err->msg, sizeof err->msg - 1);
    if (hn > sizeof err->msg - 1) hn = sizeof err->msg - 1;
    if (hn + on > sizeof err->msg - 1) on = sizeof err->msg - 1 - hn;
    memmove(err->msg + hn, err->msg, on);
    memcpy(err->msg, head, hn);
    err->msg[hn + on] = '\0';
    return err->code;
}

void hs_err_clear(hs_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}

const char *hs_strerror(int code)
{
    switch (code) {
    case HS_OK: return "success";
#define HS__ERR_STR(name, msg) case HS_E##name: return msg;
        HS_ERRNO_MAP(HS__ERR_STR)
#undef HS__ERR_STR
    default: return "unknown error";
    }
}

int hs_exit_code(int rc)
{
    switch (rc) {
    case 0: return 0;
    case HS_ENOMEM:
    case HS_EDB:
    case HS_ESTATE: return 1;
    default: return 2;
    }
}
