/* regress.c - the regressions behind the fitted latency models and the
 * calibration (regress.h): fit quality, and least squares in relative
 * error through GSL's multifit. */
#include "perf/regress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

#include "perf/table_int.h"   /* hs__percentile (files.c) */

void hs_fitstat_compute(hs_fitstat *st, const double *pred, const double *meas, int n)
{
    double *e = malloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    memset(st, 0, sizeof *st);
    if (!e || n <= 0) {
        free(e);
        return;
    }
    for (int i = 0; i < n; i++) e[i] = 100.0 * fabs(pred[i] - meas[i]) / meas[i];
    st->n = n;
    st->med_ape = hs__percentile(e, n, 50);
    st->p90_ape = hs__percentile(e, n, 90);
    st->max_ape = e[n - 1];
    free(e);
}

int hs_linfit_relw(const double *X, const double *y, const double *w, int n, int k,
                   double *coef, hs_fitstat *st, hs_err *err)
{
    int active[HS_LINFIT_MAXK], na = k, rc = 0;
    gsl_error_handler_t *old;
    double *pred;
    if (n < 1 || k < 1 || k > HS_LINFIT_MAXK)
        return hs_errf(err, HS_EINVAL, "linear fit: %d rows, %d columns", n, k);
    for (int i = 0; w && i < n; i++)
        if (!(w[i] >= 0) || !isfinite(w[i]))
            return hs_errf(err, HS_EINVAL, "linear fit: row %d: weight %g is not finite and >= 0", i, w[i]);
    for (int j = 0; j < k; j++) {
        coef[j] = 0;
        active[j] = 1;
    }
    /* GSL reports singular systems through its handler, which aborts by
     * default; library code returns errors instead. */
    old = gsl_set_error_handler_off();
    while (na > 0) {
        gsl_matrix *A = gsl_matrix_alloc((size_t)n, (size_t)na);
        gsl_vector *b = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc((size_t)na);
        gsl_matrix *cov = gsl_matrix_alloc((size_t)na, (size_t)na);
        gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, (size_t)na);
        double chisq, worst = 0;
        int wj = -1, col;
        if (!A || !b || !c || !cov || !ws) rc = hs_errf(err, HS_ENOMEM, "out of memory in linear fit");
        /* Dividing each row by y_i turns relative error into ordinary least
         * squares: small and large times count alike.  A weight scales the
         * row's squared residual, so the row is scaled by its square root. */
        for (int i = 0; !rc && i < n; i++) {
            double s = w ? sqrt(w[i]) : 1.0;
            col = 0;
            for (int j = 0; j < k; j++)
                if (active[j]) gsl_matrix_set(A, (size_t)i, (size_t)col++, s * X[i * k + j] / y[i]);
            gsl_vector_set(b, (size_t)i, s);
        }
        if (!rc && gsl_multifit_linear(A, b, c, cov, &chisq, ws) != GSL_SUCCESS)
            rc = hs_errf(err, HS_ERANGE, "linear fit failed (singular design)");
        col = 0;
        for (int j = 0; !rc && j < k; j++) {
            if (!active[j]) continue;
            coef[j] = gsl_vector_get(c, (size_t)col++);
            if (coef[j] < worst) { worst = coef[j]; wj = j; }
        }
        gsl_matrix_free(A); gsl_vector_free(b); gsl_vector_free(c); gsl_matrix_free(cov);
        gsl_multifit_linear_free(ws);
        if (rc || wj < 0) break;
        active[wj] = 0; /* negative: drop the column and refit the rest */
        coef[wj] = 0;
        na--;
    }
    gsl_set_error_handler(old);
    if (rc) return rc;
    if (st) {
        if (!(pred = malloc((size_t)n * sizeof *pred))) return hs_errf(err, HS_ENOMEM, "out of memory");
        for (int i = 0; i < n; i++) {
            pred[i] = 0;
            for (int j = 0; j < k; j++) pred[i] += coef[j] * X[i * k + j];
        }
        hs_fitstat_compute(st, pred, y, n);
        free(pred);
    }
    return 0;
}

int hs_linfit_rel(const double *X, const double *y, int n, int k,
                  double *coef, hs_fitstat *st, hs_err *err)
{
    if (k > 4) return hs_errf(err, HS_EINVAL, "linear fit: %d rows, %d columns", n, k);
    return hs_linfit_relw(X, y, NULL, n, k, coef, st, err);
}
