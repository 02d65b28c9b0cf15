/* hetis_lp.h - Hetis's head dispatcher: the min-max program of §5.2.
 *
 * One pipeline stage, G devices (the stage's primary TP group and its
 * attention workers), R requests to place.  The unit is one KV-head group
 * (a KV head and the k = heads / kv_heads query heads that read it; k = 1
 * for MHA): a group's query heads must sit with its KV, so it is the
 * smallest piece that can move without duplicating cache.
 *
 *   minimise   z
 *   subject to sum_g x[r][g] = H                        (integrity, Eq. 5)
 *              sum_r mem[r] * x[r][g] <= cap[g]          (memory, Eq. 6)
 *              base[g] + fixed[g] * y[g]
 *                + sum_r coef[r][g] * x[r][g] <= z      (Eq. 7a, per device)
 *              x[r][g] <= H * y[g],  y[g] in {0,1}       (a device pays its
 *                                                          launch + alpha only
 *                                                          when used)
 *              x[r][g] in {0..H}                          (Eq. 2b)
 *
 * base[g] is the device's current per-layer attention time from requests
 * already placed (Eq. 8 keeps it), fixed[g] the per-layer fixed cost a
 * device with no heads yet would start paying (0 when already active),
 * coef[r][g] the per-layer time of one group of r on g (a_g + b_g * l_r +
 * network beta per group for attention workers) and mem[r] the cache one
 * group of r needs on g (group-tokens).  Solved with GLPK: integral
 * (branch and cut) or as the LP relaxation (the "ideal" time T* of §5.3). */
#ifndef HS_HETIS_LP_H
#define HS_HETIS_LP_H

#include <stdint.h>

#include "core/err.h"

#define HS_HETIS_MAX_DEV 32

typedef struct hs_hetis_lp {
    int n_dev, n_req;
    int groups;            /* H: groups per request */
    const double *base;    /* [n_dev] ns */
    const double *fixed;   /* [n_dev] ns */
    const double *cap;     /* [n_dev] group-tokens free */
    const double *coef;    /* [n_req * n_dev] ns per group */
    const double *mem;     /* [n_req] group-tokens per group */
    int integral;          /* 1: x integral (MILP); 0: LP relaxation */
    const double *req_groups; /* [n_req] groups of each item (NULL: groups);
                                 lets the relaxation place buckets of
                                 similar requests as one item */
    double mip_gap;        /* relative gap at which branch and cut stops (0: proven optimum) */
    int time_limit_ms;     /* branch-and-cut limit, best placement found so far (0: none) */
} hs_hetis_lp;

/* Solves; fills x[n_req * n_dev] (rounded when integral) and *z (ns).
 * Returns 0, HS_ENOFIT when no placement fits the memory, or HS_ESTATE
 * when GLPK fails. */
int hs_hetis_lp_solve(const hs_hetis_lp *p, double *x, double *z, hs_err *err);

/* The objective of a given placement (max over devices), for checks. */
double hs_hetis_lp_eval(const hs_hetis_lp *p, const double *x);
/* 1 when x satisfies integrity and memory (integral within 1e-6 when
 * p->integral). */
int hs_hetis_lp_feasible(const hs_hetis_lp *p, const double *x);

#endif
