/* search.h - the decision procedures of `hetsim search`, kept free of the
 * simulator so tests can drive them with synthetic functions.
 *
 * Capacity search assumes the probed predicate is monotone in x (passes up
 * to some capacity, fails above it), which holds for SLO attainment versus
 * request rate in expectation; with noise, the answer is one crossing. */
#ifndef HS_SEARCH_H
#define HS_SEARCH_H

#include "core/err.h"

/* Evaluates the predicate at x: *pass 1 when the target is met. */
typedef int (*hs_probe_fn)(void *ctx, double x, int *pass, hs_err *err);

typedef struct hs_bisect_cfg {
    double lo, hi;      /* search interval, 0 < lo < hi */
    double tol;         /* stop when hi - lo <= tol * hi (relative) */
    int sig;            /* significant digits of probed x (so x prints exactly), 2..15 */
    int max_probes;
} hs_bisect_cfg;

enum { HS_BISECT_FOUND = 0, HS_BISECT_ALL_PASS = 1, HS_BISECT_NONE = 2 };

typedef struct hs_bisect_result {
    int status;         /* HS_BISECT_* */
    double best;        /* highest x seen passing (FOUND, ALL_PASS) */
    double fail;        /* lowest x seen failing (FOUND, NONE) */
    int probes;
} hs_bisect_result;

/* Bisection: probes hi (all pass?), lo (none?), then halves [pass, fail]
 * until it is within tol.  Returns 0 or the probe's error. */
int hs_search_bisect(const hs_bisect_cfg *c, hs_probe_fn probe, void *ctx, hs_bisect_result *out,
                     hs_err *err);

/* Marks the points not dominated when minimising both x and y (ties: the
 * first in input order is kept, later equal points are dominated).
 * front[i] = 1 for front members; returns their count.  NaN points are
 * never on the front. */
int hs_pareto_front(const double *x, const double *y, int n, int *front);

#endif
