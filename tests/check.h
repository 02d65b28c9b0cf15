/* check.h - a tiny test harness: each CHECK prints file, line and both values
 * on failure and counts it; main() returns hs_check_result(). */
#ifndef HS_CHECK_H
#define HS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hs__check_fail, hs__check_pass;

#define CHECK(cond) do { if (cond) hs__check_pass++; else { hs__check_fail++; \
    fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
    if (_a == _b) hs__check_pass++; else { hs__check_fail++; \
    fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, _a, _b); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (double)(a), _b = (double)(b); \
    if (fabs(_a - _b) <= (tol)) hs__check_pass++; else { hs__check_fail++; \
    fprintf(stderr, "%s:%d: %s ~= %s failed: %.9g vs %.9g (tol %g)\n", __FILE__, __LINE__, #a, #b, _a, _b, (double)(tol)); } } while (0)
#define CHECK_REL(a, b, rel) CHECK_NEAR(a, b, fabs((double)(b)) * (rel))
#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); \
    if (_a && _b && strcmp(_a, _b) == 0) hs__check_pass++; else { hs__check_fail++; \
    fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" vs \"%s\"\n", __FILE__, __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); } } while (0)
#define CHECK_OK(expr, errp) do { int _rc = (expr); if (_rc == 0) hs__check_pass++; else { hs__check_fail++; \
    fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #expr, _rc, (errp)->msg); } } while (0)
/* Skips the whole test program (ctest SKIP_RETURN_CODE 77). */
#define SKIP(msg) do { printf("SKIP: %s\n", msg); exit(77); } while (0)

static inline int hs_check_result(void)
{
    printf("%d checks passed, %d failed\n", hs__check_pass, hs__check_fail);
    if (hs__check_pass == 0 && hs__check_fail == 0) {
        fprintf(stderr, "no checks ran: a test that asserts nothing is a defect\n");
        return 1;
    }
    return hs__check_fail ? 1 : 0;
}

/* ../shared/data when present (tests skip otherwise); path via HS_SHARED_DATA. */
static inline const char *hs_shared_data(void)
{
    const char *p = getenv("HS_SHARED_DATA");
    return (p && *p) ? p : NULL;
}

/* The source tree (ctest passes HS_ROOT); also points the loaders at it
 * (HETSIM_ROOT) so tests read this checkout's models/ and profiles/. */
static inline const char *hs_test_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) {
        setenv("HETSIM_ROOT", env, 1);
        return env;
    }
    env = getenv("HETSIM_ROOT");
    return env && *env ? env : HS_SOURCE_ROOT;
}

/* A JSON object from "\"key\": value" lines, with the line of `key`
 * replaced by `with` (dropped when `with` is NULL; all kept when `key` is
 * NULL): the good file and its one-line-off variants for loader tests.
 * Returns a static buffer. */
static inline const char *hs_test_json_lines(const char *const *lines, const char *key,
                                             const char *with)
{
    static char buf[4096];
    size_t n = 0;
    int first = 1;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\n");
    for (int i = 0; lines[i]; i++) {
        const char *l = lines[i];
        if (key && !strncmp(l + 1, key, strlen(key)) && l[1 + strlen(key)] == '"') {
            if (!with) continue;
            l = with;
        }
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s  %s", first ? "" : ",\n", l);
        first = 0;
    }
    snprintf(buf + n, sizeof buf - n, "\n}\n");
    return buf;
}

/* Temporary files written by a test, removed at exit. */
static char hs__tmp[128][64];
static int hs__ntmp;

static void hs__tmp_cleanup(void)
{
    for (int i = 0; i < hs__ntmp; i++) unlink(hs__tmp[i]);
    hs__ntmp = 0;
}

/* Writes text to a fresh /tmp/hs_<tag>_XXXXXX and returns its path (valid
 * until exit).  Loaders take any name with a '/' as a path. */
static inline const char *hs_test_tmpfile(const char *tag, const char *text)
{
    char *p;
    FILE *fp;
    int fd;
    if (hs__ntmp >= 128) {
        fprintf(stderr, "too many temp files\n");
        exit(2);
    }
    if (hs__ntmp == 0) atexit(hs__tmp_cleanup);
    p = hs__tmp[hs__ntmp];
    snprintf(p, sizeof hs__tmp[0], "/tmp/hs_%s_XXXXXX", tag);
    fd = mkstemp(p);
    if (fd < 0 || !(fp = fdopen(fd, "wb"))) {
        perror("mkstemp");
        exit(2);
    }
    fputs(text, fp);
    fclose(fp);
    hs__ntmp++;
    return p;
}

#endif
