/* err.c - error messages; see err.h. */
#include "core/err.h"

#include <stdio.h>
#include <string.h>

size_t hs_err_escape(char *dst, size_t cap, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!cap) return 0;
    for (size_t i = 0; i < n && src[i]; i++) {
        unsigned char c = (unsigned char)src[i];
        char e[4];
        size_t k = 0;
        if (c == '\n') e[k++] = '\\', e[k++] = 'n';
        else if (c == '\r') e[k++] = '\\', e[k++] = 'r';
        else if (c == '\t') e[k++] = '\\', e[k++] = 't';
        else if (c < 0x20 || c == 0x7f)
            e[k++] = '\\', e[k++] = 'x', e[k++] = hex[c >> 4], e[k++] = hex[c & 15];
        else e[k++] = (char)c;
        if (o + k > cap - 1) break; /* truncate at a whole escape */
        memcpy(dst + o, e, k);
        o += k;
    }
    dst[o] = '\0';
    return o;
}

void hs_eprintf(const char *fmt, ...)
{
    char raw[HS_ERR_MSG_MAX], out[HS_ERR_MSG_MAX];
    va_list ap;
    size_t n;
    int nl;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    n = strlen(raw);
    nl = n && raw[n - 1] == '\n';
    hs_err_escape(out, sizeof out, raw, n - (size_t)nl);
    fprintf(stderr, "%s%s", out, nl ? "\n" : "");
}

/* Rewrites err->msg with its control characters escaped, so that a newline
 * or terminal escape taken from the input (a JSON key, a flag's value)
 * cannot split the one-line message or drive the user's terminal. */
static void escape_msg(hs_err *err)
{
    char raw[HS_ERR_MSG_MAX];
    size_t n = strnlen(err->msg, sizeof err->msg - 1);
    size_t i;
    for (i = 0; i < n; i++)
        if ((unsigned char)err->msg[i] < 0x20 || err->msg[i] == 0x7f) break;
    if (i == n) return; /* the common case: nothing to escape */
    memcpy(raw, err->msg, n);
    hs_err_escape(err->msg, sizeof err->msg, raw, n);
}

int hs_verrf(hs_err *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        escape_msg(err);
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
    escape_msg(err);
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
