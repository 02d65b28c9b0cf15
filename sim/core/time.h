/* time.h - simulated time.  Time is int64 nanoseconds everywhere inside the
 * simulator; seconds (double) exist only at the input/output boundary. */
#ifndef HS_TIME_H
#define HS_TIME_H

#include <stdint.h>
#include <math.h>
#include <time.h>

typedef int64_t hs_ns;

#define HS_NS_PER_US INT64_C(1000)
#define HS_NS_PER_MS INT64_C(1000000)
#define HS_NS_PER_S  INT64_C(1000000000)
#define HS_NS_MAX    INT64_MAX

/* Rounds to the nearest ns; callers validate range/finiteness first. */
static inline hs_ns hs_ns_from_s(double s) { return (hs_ns)llround(s * 1e9); }
static inline double hs_ns_to_s(hs_ns t) { return (double)t * 1e-9; }
static inline double hs_ns_to_ms(hs_ns t) { return (double)t * 1e-6; }

/* The host's monotonic clock: for the program's own time (planners' time
 * limits, progress lines, the executor's idle and stamps), never simulated
 * time or a result.  One clock for every process on the host. */
static inline int64_t hs_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * HS_NS_PER_S + ts.tv_nsec;
}

static inline double hs_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
