/* check.h - a tiny test harness: each CHECK prints file, line and both values
 * on failure and counts it; main() returns hs_check_result(). */
#ifndef HS_CHECK_H
#define HS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
