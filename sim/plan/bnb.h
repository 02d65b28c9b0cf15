/* bnb.h - branch-and-bound over an integer box of monotone control variables
 * (ExeGPT, Algorithm 1, generalised from two variables to up to
 * HS_BNB_MAX_DIM).
 *
 * Problem: maximise thr(x) subject to ok(x) and lat(x) <= lat_bound over the
 * integer box lo <= x <= hi, where thr and lat are non-decreasing in every
 * coordinate and ok is non-increasing (ok(x) = 0 for memory-infeasible
 * points; once a coordinate is large enough to run out of memory, larger
 * ones do too).  Callers orient their variables so that "larger index" means
 * "more throughput and more latency" (e.g. the planner maps N_D to
 * hi - index, since a smaller encoding interval raises both).
 *
 * Consequences used for pruning, per block [a, b]:
 *   - the best throughput in the block is at most thr(b) (top corner);
 *   - the lowest latency in the block is lat(a) (bottom corner), and if
 *     ok(a) = 0 no point of the block is ok;
 *   - if b is feasible it is the block's optimum: the block is resolved.
 * A block is dropped when lat(a) > lat_bound + eps_l or !ok(a), or when
 * thr(b) + eps_t <= T* (the incumbent).  eps_t and eps_l widen the search
 * where the functions are only monotone within a tolerance (Section 5.1);
 * with both 0 and truly monotone functions the result's throughput equals
 * the exhaustive optimum (tests/test_exegpt.c checks this).
 *
 * Every point is evaluated at most once (a hash table memoises callback
 * results); the incumbent is the best feasible point among all evaluated
 * ones, ordered by throughput, then lower latency, then lexicographically
 * smaller x, so the result is deterministic. */
#ifndef HS_BNB_H
#define HS_BNB_H

#include <stdint.h>

#include "core/err.h"

#define HS_BNB_MAX_DIM 6

/* One evaluation: latency (s or any unit), throughput, and ok = 0 when the
 * point is infeasible for a reason monotone like latency (memory).  thr must
 * still be an estimate (an upper bound is fine) when ok = 0: blocks are
 * ranked by their top corner's thr even when that corner does not fit. */
typedef struct hs_bnb_val {
    double lat, thr;
    int ok;
} hs_bnb_val;

/* Returns 0, or a negative HS_E* code (the search stops and returns it). */
typedef int (*hs_bnb_fn)(void *ctx, const int *x, hs_bnb_val *out, hs_err *err);

enum {
    HS_BNB_SPLIT_PAPER = 0,  /* Algorithm 1 lines 7-10, generalised (bnb.c) */
    HS_BNB_SPLIT_LONGEST     /* plain bisection of the longest side */
};

typedef struct hs_bnb_opts {
    double lat_bound;        /* INFINITY: unconstrained */
    double eps_t, eps_l;     /* tolerances, >= 0, same units as thr / lat */
    int split;               /* HS_BNB_SPLIT_* */
    int exhaustive;          /* 1: evaluate every point (for checking) */
} hs_bnb_opts;

typedef struct hs_bnb_result {
    int found;               /* 1: x/val hold the best feasible point */
    int x[HS_BNB_MAX_DIM];
    hs_bnb_val val;
    int64_t evals;           /* distinct points evaluated (callback calls) */
    int64_t lookups;         /* evaluations requested, memo hits included */
    int64_t blocks;          /* blocks popped from the queue */
    int64_t points;          /* points in the box */
} hs_bnb_result;

void hs_bnb_opts_defaults(hs_bnb_opts *o);

/* Searches the box [lo, hi] (dim in 1..HS_BNB_MAX_DIM, lo[k] <= hi[k]).
 * Returns 0 (res->found says whether a feasible point exists), HS_EINVAL for
 * a bad box or options, HS_ENOMEM, or the callback's error.  The exhaustive
 * mode refuses boxes of more than 1e8 points (HS_ERANGE). */
int hs_bnb_solve(int dim, const int *lo, const int *hi, hs_bnb_fn fn, void *ctx,
                 const hs_bnb_opts *o, hs_bnb_result *res, hs_err *err);

/* 1 when a is a better feasible candidate than b under the order above
 * (both assumed feasible); exposed for the tests' exhaustive references. */
int hs_bnb_better(const hs_bnb_val *a, const int *xa, const hs_bnb_val *b,
                  const int *xb, int dim);

#endif
