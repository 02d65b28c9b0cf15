/* err.h - error codes and the caller-owned error message buffer.
 *
 * Every fallible function returns 0 or a negative HS_E* code and, on failure,
 * writes one line of context into the caller's hs_err (file, line or field,
 * and what is wrong).  Library code never exits the process; only main() does.
 * The code list is one X-macro so that the enum and hs_strerror() can never
 * drift apart (the libuv habit). */
#ifndef HS_ERR_H
#define HS_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define HS_ERRNO_MAP(X)                                   \
    X(NOMEM, "out of memory")                             \
    X(INVAL, "invalid argument")                          \
    X(IO, "input/output error")                           \
    X(PARSE, "malformed input")                           \
    X(NOTFOUND, "not found")                              \
    X(RANGE, "value out of range")                        \
    X(NOFIT, "does not fit in memory")                    \
    X(DB, "database error")                               \
    X(STATE, "inconsistent state")                        \
    X(UNSUPPORTED, "not supported")

enum {
    HS_OK = 0,
#define HS__ERR_ENUM(name, msg) HS_E##name,
    HS__ERR_FIRST = -1000,
    HS_ERRNO_MAP(HS__ERR_ENUM)
#undef HS__ERR_ENUM
    HS__ERR_LAST
};

#define HS_ERR_MSG_MAX 512

typedef struct hs_err {
    int code;                    /* last HS_E* code, 0 when clear */
    char msg[HS_ERR_MSG_MAX];    /* one line, no trailing newline */
} hs_err;

/* Formats the message into err (when err is not NULL) and returns code, so
 * callers can write `return hs_errf(err, HS_EPARSE, "%s:%d: ...", f, l);`. */
int hs_errf(hs_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hs_verrf(hs_err *err, int code, const char *fmt, va_list ap);

/* Prefixes the existing message with more context ("while loading X: ..."). */
int hs_err_prefix(hs_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void hs_err_clear(hs_err *err);

/* Copies src[0..n) (stopping early at a NUL) into dst (cap bytes, always
 * NUL-terminated when cap > 0) with control characters escaped as \n, \r,
 * \t or \xHH, truncating at a whole escape.  Returns the length written.
 * hs_errf and hs_err_prefix apply it to every message, so an error stays
 * one line whatever bytes the input held; code that prints input to stderr
 * itself uses it too. */
size_t hs_err_escape(char *dst, size_t cap, const char *src, size_t n);

/* Prints one formatted line to stderr with hs_err_escape applied to
 * everything but its final newline: for messages that quote command-line
 * values themselves instead of going through an hs_err. */
void hs_eprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *hs_strerror(int code);

/* The process exit code of an HS_E* code: 0 success, 1 a runtime failure
 * (out of memory, database, broken state), 2 bad input or usage. */
int hs_exit_code(int rc);

#endif
