/* regress.h - least squares in relative error and fit quality, shared by
 * the measured tables' attention fits (table.c), the fitted model
 * (fitted.c), the engine profiles (overhead.c) and cross-validation. */
#ifndef HS_REGRESS_H
#define HS_REGRESS_H

#include "core/err.h"

/* Quality of a fit against the rows it came from, percent. */
typedef struct hs_fitstat {
    int n;
    double med_ape, p90_ape, max_ape;
} hs_fitstat;

/* Median / p90 / max of |a_i - b_i| / b_i in percent, over n >= 1 pairs. */
void hs_fitstat_compute(hs_fitstat *st, const double *pred, const double *meas, int n);

/* Non-negative least squares in relative error: minimises
 * sum_i ((X_i . coef) / y_i - 1)^2 over coef >= 0 (columns whose unconstrained
 * coefficient goes negative are dropped and the rest refitted).  X is n x k
 * row-major, k <= 4.  Returns 0, HS_EINVAL when n < 1. */
int hs_linfit_rel(const double *X, const double *y, int n, int k,
                  double *coef, hs_fitstat *st, hs_err *err);
/* The same with a weight w_i >= 0 on row i's squared relative error (w
 * NULL: all 1, as hs_linfit_rel), k <= HS_LINFIT_MAXK; st is unweighted.
 * Returns 0, HS_EINVAL (n < 1, k out of range, a weight negative or not
 * finite), HS_ERANGE (singular design) or HS_ENOMEM. */
#define HS_LINFIT_MAXK 8
int hs_linfit_relw(const double *X, const double *y, const double *w, int n, int k,
                   double *coef, hs_fitstat *st, hs_err *err);

#endif
