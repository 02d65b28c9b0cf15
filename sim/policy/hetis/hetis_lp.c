/* hetis_lp.c - the head dispatcher's min-max program with GLPK (see
 * hetis_lp.h).  Problems are tiny (a few devices, the requests that
 * arrived since the last step), so each solve builds a fresh glp_prob. */
#include "policy/hetis/hetis_lp.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>

static int silent(void *info, const char *s)
{
    (void)info;
    (void)s;
    return 1;
}

double hs_hetis_lp_eval(const hs_hetis_lp *p, const double *x)
{
    double z = 0;
    for (int g = 0; g < p->n_dev; g++) {
        double t = p->base[g], n = 0;
        for (int r = 0; r < p->n_req; r++) {
            t += p->coef[r * p->n_dev + g] * x[r * p->n_dev + g];
            n += x[r * p->n_dev + g];
        }
        if (n > 1e-9) t += p->fixed[g];
        if (t > z) z = t;
    }
    return z;
}

int hs_hetis_lp_feasible(const hs_hetis_lp *p, const double *x)
{
    for (int r = 0; r < p->n_req; r++) {
        double s = 0;
        for (int g = 0; g < p->n_dev; g++) {
            double v = x[r * p->n_dev + g];
            if (v < -1e-9) return 0;
            if (p->integral && fabs(v - floor(v + 0.5)) > 1e-6) return 0;
            s += v;
        }
        if (fabs(s - (p->req_groups ? p->req_groups[r] : p->groups)) > 1e-6) return 0;
    }
    for (int g = 0; g < p->n_dev; g++) {
        double m = 0;
        for (int r = 0; r < p->n_req; r++) m += p->mem[r] * x[r * p->n_dev + g];
        if (m > p->cap[g] + 1e-6 * (1 + p->cap[g])) return 0;
    }
    return 1;
}

int hs_hetis_lp_solve(const hs_hetis_lp *p, double *x, double *z, hs_err *err)
{
    int G = p->n_dev, R = p->n_req, H = p->groups;
    int nx = R * G, iz, ret, st, rows, nnz = 0;
    int *ia, *ja, *ycol;
    double *ar, scale = 0;
    glp_prob *lp;
    if (G <= 0 || G > HS_HETIS_MAX_DEV || R <= 0 || H <= 0)
        return hs_errf(err, HS_EINVAL, "hetis dispatch: %d devices, %d requests, %d groups", G, R, H);
    /* Scale times to microseconds-ish magnitudes: GLPK's tolerances are
     * absolute, and ns values reach 1e7. */
    for (int g = 0; g < G; g++) scale = fmax(scale, p->base[g] + p->fixed[g]);
    for (int i = 0; i < nx; i++) scale = fmax(scale, p->coef[i] * (p->req_groups ? p->req_groups[i / G] : H));
    scale = scale > 0 ? 1.0 / scale : 1.0;
    glp_term_hook(silent, NULL);
    lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    /* Columns: x (nx), y (G), z. */
    glp_add_cols(lp, nx + G + 1);
    for (int i = 0; i < nx; i++) {
        glp_set_col_bnds(lp, i + 1, GLP_DB, 0, p->req_groups ? p->req_groups[i / G] : H);
        if (p->integral) glp_set_col_kind(lp, i + 1, GLP_IV);
    }
    if (!(ycol = malloc(sizeof *ycol * (size_t)G))) {
        glp_delete_prob(lp);
        return hs_errf(err, HS_ENOMEM, "out of memory in the hetis dispatcher");
    }
    for (int g = 0; g < G; g++) {
        ycol[g] = nx + g + 1;
        /* a device already paying its fixed cost is simply on */
        if (p->fixed[g] > 0) glp_set_col_bnds(lp, ycol[g], GLP_DB, 0, 1);
        else glp_set_col_bnds(lp, ycol[g], GLP_FX, 1, 1);
        if (p->integral) glp_set_col_kind(lp, ycol[g], GLP_IV);
    }
    iz = nx + G + 1;
    glp_set_col_bnds(lp, iz, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, iz, 1);
    rows = R + G + G + nx;
    glp_add_rows(lp, rows);
    ia = malloc(sizeof *ia * (size_t)(5 * nx + 3 * G + 8));
    ja = malloc(sizeof *ja * (size_t)(5 * nx + 3 * G + 8));
    ar = malloc(sizeof *ar * (size_t)(5 * nx + 3 * G + 8));
    if (!ia || !ja || !ar || !ycol) {
        free(ia), free(ja), free(ar), free(ycol);
        glp_delete_prob(lp);
        return hs_errf(err, HS_ENOMEM, "out of memory in the hetis dispatcher");
    }
#define NZ(i, j, v) (ia[++nnz] = (i), ja[nnz] = (j), ar[nnz] = (v))
    for (int r = 0; r < R; r++) { /* integrity */
        double hr = p->req_groups ? p->req_groups[r] : H;
        glp_set_row_bnds(lp, r + 1, GLP_FX, hr, hr);
        for (int g = 0; g < G; g++) NZ(r + 1, r * G + g + 1, 1.0);
    }
    for (int g = 0; g < G; g++) { /* memory */
        int row = R + g + 1;
        glp_set_row_bnds(lp, row, GLP_UP, 0, p->cap[g] > 0 ? p->cap[g] : 0);
        for (int r = 0; r < R; r++) NZ(row, r * G + g + 1, p->mem[r]);
    }
    for (int g = 0; g < G; g++) { /* time: base + fixed*y + coef.x - z <= 0 */
        int row = R + G + g + 1;
        glp_set_row_bnds(lp, row, GLP_UP, 0, -p->base[g] * scale);
        for (int r = 0; r < R; r++) NZ(row, r * G + g + 1, p->coef[r * G + g] * scale);
        if (p->fixed[g] > 0) NZ(row, ycol[g], p->fixed[g] * scale);
        NZ(row, iz, -1.0);
    }
    for (int r = 0; r < R; r++) /* x <= H y */
        for (int g = 0; g < G; g++) {
            int row = R + 2 * G + r * G + g + 1;
            glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
            NZ(row, r * G + g + 1, 1.0);
            NZ(row, ycol[g], -(p->req_groups ? p->req_groups[r] : (double)H));
        }
#undef NZ
    glp_load_matrix(lp, nnz, ia, ja, ar);
    free(ia), free(ja), free(ar), free(ycol);
    if (p->integral) {
        glp_iocp io;
        glp_init_iocp(&io);
        io.presolve = GLP_ON;
        io.msg_lev = GLP_MSG_OFF;
        io.mip_gap = p->mip_gap;
        if (p->time_limit_ms > 0) io.tm_lim = p->time_limit_ms;
        ret = glp_intopt(lp, &io);
        st = glp_mip_status(lp);
        /* stopped by the gap or the clock with an integral placement: use it */
        if ((ret == GLP_EMIPGAP || ret == GLP_ETMLIM) && st == GLP_FEAS) ret = 0, st = GLP_OPT;
        if (ret == GLP_ENOPFS || ret == GLP_ENODFS || st == GLP_NOFEAS) {
            glp_delete_prob(lp);
            return HS_ENOFIT;
        }
        if (ret || st != GLP_OPT) {
            glp_delete_prob(lp);
            return hs_errf(err, HS_ESTATE, "hetis dispatch: GLPK intopt returned %d (status %d)", ret, st);
        }
        for (int i = 0; i < nx; i++) x[i] = floor(glp_mip_col_val(lp, i + 1) + 0.5);
    } else {
        glp_smcp sm;
        glp_init_smcp(&sm);
        sm.msg_lev = GLP_MSG_OFF;
        sm.presolve = GLP_ON;
        ret = glp_simplex(lp, &sm);
        st = glp_get_status(lp);
        if (ret == GLP_ENOPFS || st == GLP_NOFEAS) {
            glp_delete_prob(lp);
            return HS_ENOFIT;
        }
        if (ret || st != GLP_OPT) {
            glp_delete_prob(lp);
            return hs_errf(err, HS_ESTATE, "hetis dispatch: GLPK simplex returned %d (status %d)", ret, st);
        }
        for (int i = 0; i < nx; i++) x[i] = glp_get_col_prim(lp, i + 1);
    }
    glp_delete_prob(lp);
    /* The model's objective, not GLPK's scaled one (in the relaxation
     * y may be fractional; evaluating counts a used device's fixed cost
     * in full, as the runtime does). */
    *z = hs_hetis_lp_eval(p, x);
    return 0;
}
