/* llmpq_ilp.c - LLM-PQ instances: evaluation, the GLPK integer program,
 * brute force, the bitwidth-transfer heuristic and PipeEdge's partition.
 *
 * ILP variables: z[u][j][k] (unit u on device j at bit index k, binary),
 * s[u][j] (unit u on a device <= j, binary; a sparser and tighter form of
 * (16) than the paper's pairwise rows) and the continuous maxima Tp, Td.
 * Rows: (9)-(11) sum_k z[u][j][k] = s[u][j] - s[u][j-1];
 * (12)-(13) memory per device (GB, the first device's capacity already
 * net of the embeddings); (5)-(6) Tp >= T_pre,j, Td >= T_dec,j; (7) as
 * column lower bounds on Tp and Td; every device non-empty; (16) as
 * s[u+1][j] <= s[u][j]; (15) by fixing s of the first and last unit.
 * Columns that can never be 1 (a device too early or too late for a
 * non-empty order, or a layer too big for the device) are fixed at 0. */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/llmpq.h"

double hs_pq_eval(const hs_pq_inst *in, const int *dev, const int *bi, double *lat)
{
    double tpre[HS_MAX_PP] = {0}, tdec[HS_MAX_PP] = {0}, mem[HS_MAX_PP] = {0};
    double q = 0, tp = 0, td = 0, sum = 0;
    int count[HS_MAX_PP] = {0};
    if (dev[0] != 0 || dev[in->U - 1] != in->N - 1) return INFINITY;
    for (int u = 0; u < in->U; u++) {
        int j = dev[u], k = bi[u];
        if (j < 0 || j >= in->N || k < 0 || k >= in->nb) return INFINITY;
        if (u && (j < dev[u - 1] || j > dev[u - 1] + 1)) return INFINITY;
        count[j]++;
        tpre[j] += in->usize[u] * in->lpre[j][k];
        tdec[j] += in->usize[u] * in->ldec[j][k];
        mem[j] += in->usize[u] * in->mlay[k];
        q += in->omega[u * in->nb + k];
    }
    for (int j = 0; j < in->N; j++) {
        if (!count[j] || mem[j] > in->cap[j] * (1 + 1e-9)) return INFINITY;
        tpre[j] += in->cpre[j];
        tdec[j] += in->cdec[j];
        sum += tpre[j] + in->rounds * tdec[j];
        tp = fmax(tp, fmax(tpre[j], in->commpre[j]));
        td = fmax(td, fmax(tdec[j], in->commdec[j]));
    }
    sum += in->a_pre * tp + in->a_dec * td;
    if (lat) *lat = sum;
    return sum + in->theta * q;
}

static int zcol(const hs_pq_inst *in, int u, int j, int k)
{
    return 1 + (u * in->N + j) * in->nb + k;
}

/* s[u][j] (j < N-1): unit u sits on a device <= j. */
static int scol(const hs_pq_inst *in, int u, int j)
{
    return 1 + in->U * in->N * in->nb + u * (in->N - 1) + j;
}

int hs_pq_ilp(const hs_pq_inst *in, double limit_s, double cutoff, int *dev, int *bi,
              double *obj, int *timeout, hs_err *err)
{
    int U = in->U, N = in->N, nb = in->nb, nz = U * N * nb, ns = U * (N - 1);
    int ctp = nz + ns + 1, ctd = nz + ns + 2, ncol = nz + ns + 2;
    int rows = U * N + (U - 1) * (N - 1) + 4 * N + 1, row = 0;
    size_t cap = (size_t)nz * 6 + (size_t)ns * 4 + (size_t)4 * N + 16, ne = 0;
    int *ia = malloc((cap + 1) * sizeof *ia), *ja = malloc((cap + 1) * sizeof *ja);
    double *ar = malloc((cap + 1) * sizeof *ar), constant = 0, tpl = 0, tdl = 0;
    glp_prob *lp = NULL;
    glp_iocp parm;
    int rc = 0, st;
    *timeout = 0;
    if (!ia || !ja || !ar) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory building the ILP");
        goto out;
    }
#define NZ(r, c, v) (ne++, ia[ne] = (r), ja[ne] = (c), ar[ne] = (v))
    glp_term_out(GLP_OFF);
    lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, ncol);
    glp_add_rows(lp, rows);
    for (int j = 0; j < N; j++) {
        constant += in->cpre[j] + in->rounds * in->cdec[j];
        tpl = fmax(tpl, in->commpre[j]);
        tdl = fmax(tdl, in->commdec[j]);
    }
    for (int u = 0; u < U; u++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < nb; k++) {
                int c = zcol(in, u, j, k);
                /* a non-empty order puts unit u on a device in
                 * [max(0, N-U+u), min(u, N-1)] */
                int lo = N - U + u > 0 ? N - U + u : 0, hi = u < N - 1 ? u : N - 1;
                glp_set_col_kind(lp, c, GLP_BV);
                if (j < lo || j > hi || in->usize[u] * in->mlay[k] > in->cap[j])
                    glp_set_col_bnds(lp, c, GLP_FX, 0, 0);
                glp_set_obj_coef(lp, c, in->usize[u] * (in->lpre[j][k] + in->rounds * in->ldec[j][k]) +
                                            in->theta * in->omega[u * nb + k]);
            }
    for (int u = 0; u < U; u++)
        for (int j = 0; j + 1 < N; j++) {
            int c = scol(in, u, j);
            glp_set_col_kind(lp, c, GLP_BV);
            /* (15): the first unit on the first device, the last on the last */
            if (u == 0) glp_set_col_bnds(lp, c, GLP_FX, 1, 1);
            else if (u == U - 1) glp_set_col_bnds(lp, c, GLP_FX, 0, 0);
        }
    glp_set_col_bnds(lp, ctp, GLP_LO, tpl, 0);
    glp_set_col_bnds(lp, ctd, GLP_LO, tdl, 0);
    glp_set_obj_coef(lp, ctp, in->a_pre);
    glp_set_obj_coef(lp, ctd, in->a_dec);
    glp_set_obj_coef(lp, 0, constant);
    /* (9)-(11): sum_k z[u][j][k] = s[u][j] - s[u][j-1] (s[u][-1] = 0,
     * s[u][N-1] = 1), so each unit has exactly one device and bit-width */
    for (int u = 0; u < U; u++)
        for (int j = 0; j < N; j++) {
            double rhs = j == N - 1 ? 1 : 0;
            row++;
            for (int k = 0; k < nb; k++) NZ(row, zcol(in, u, j, k), 1);
            if (j < N - 1) NZ(row, scol(in, u, j), -1);
            if (j > 0) NZ(row, scol(in, u, j - 1), 1);
            glp_set_row_bnds(lp, row, GLP_FX, rhs, rhs);
        }
    /* (16): s[u+1][j] <= s[u][j], stages contiguous in layer order */
    for (int u = 0; u + 1 < U; u++)
        for (int j = 0; j + 1 < N; j++) {
            row++;
            glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
            NZ(row, scol(in, u + 1, j), 1);
            NZ(row, scol(in, u, j), -1);
        }
    for (int j = 0; j < N; j++) {
        int rm = ++row, rp = ++row, rd = ++row, re = ++row;
        /* (12)-(13) in GB; 1e-6 GB below the cap so that GLPK's bound
         * tolerance cannot admit what hs_pq_eval's exact check refuses. */
        glp_set_row_bnds(lp, rm, GLP_UP, 0, in->cap[j] / 1e9 - 1e-6);
        glp_set_row_bnds(lp, rp, GLP_UP, 0, -in->cpre[j]);              /* (5) */
        glp_set_row_bnds(lp, rd, GLP_UP, 0, -in->cdec[j]);              /* (6) */
        glp_set_row_bnds(lp, re, GLP_LO, 1, 0);                         /* non-empty */
        for (int u = 0; u < U; u++)
            for (int k = 0; k < nb; k++) {
                int c = zcol(in, u, j, k);
                NZ(rm, c, in->usize[u] * in->mlay[k] / 1e9);
                NZ(rp, c, in->usize[u] * in->lpre[j][k]);
                NZ(rd, c, in->usize[u] * in->ldec[j][k]);
                NZ(re, c, 1);
            }
        NZ(rp, ctp, -1);
        NZ(rd, ctd, -1);
    }
    /* cut-off: only solutions better than the incumbent are of use */
    row++;
    if (isfinite(cutoff)) glp_set_row_bnds(lp, row, GLP_UP, 0, cutoff - constant);
    else glp_set_row_bnds(lp, row, GLP_FR, 0, 0);
    for (int c = 1; c <= ncol; c++) {
        double v = glp_get_obj_coef(lp, c);
        if (v != 0) NZ(row, c, v);
    }
#undef NZ
    glp_load_matrix(lp, (int)ne, ia, ja, ar);
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.mir_cuts = GLP_ON;
    parm.mip_gap = 1e-4;
    parm.tm_lim = limit_s > 0 ? (int)(limit_s * 1000) : INT32_MAX;
    st = glp_intopt(lp, &parm);
    if (st == GLP_EMIPGAP) st = 0;   /* within mip_gap of the bound: done */
    if (st == GLP_ETMLIM) *timeout = 1;
    else if (st == GLP_ENOPFS || st == GLP_ENODFS) {
        rc = HS_ENOFIT;
        goto out;
    } else if (st) {
        rc = hs_errf(err, HS_ESTATE, "GLPK glp_intopt failed with code %d", st);
        goto out;
    }
    st = glp_mip_status(lp);
    if (st == GLP_NOFEAS) {
        rc = HS_ENOFIT;
        goto out;
    }
    if (st != GLP_OPT && st != GLP_FEAS) {
        rc = *timeout ? HS_ERANGE : HS_ENOFIT;
        goto out;
    }
    for (int u = 0; u < U; u++) {
        dev[u] = bi[u] = -1;
        for (int j = 0; j < N; j++)
            for (int k = 0; k < nb; k++)
                if (glp_mip_col_val(lp, zcol(in, u, j, k)) > 0.5) dev[u] = j, bi[u] = k;
    }
    *obj = hs_pq_eval(in, dev, bi, NULL);
    /* A solution at the tolerance's edge: skip this instance, not the search. */
    if (!isfinite(*obj)) rc = hs_errf(err, HS_ENOFIT, "GLPK returned an assignment the exact memory check refuses");
out:
    if (lp) glp_delete_prob(lp);
    free(ia);
    free(ja);
    free(ar);
    return rc;
}

/* Brute force: every contiguous non-empty split and every bit vector. */
typedef struct bf {
    const hs_pq_inst *in;
    int *dev, *bi, *bdev, *bbi;
    double best;
} bf;

static void bf_bits(bf *b, int u)
{
    if (u == b->in->U) {
        double o = hs_pq_eval(b->in, b->dev, b->bi, NULL);
        if (o < b->best) {
            b->best = o;
            memcpy(b->bdev, b->dev, sizeof *b->dev * b->in->U);
            memcpy(b->bbi, b->bi, sizeof *b->bi * b->in->U);
        }
        return;
    }
    for (int k = 0; k < b->in->nb; k++) {
        b->bi[u] = k;
        bf_bits(b, u + 1);
    }
}

static void bf_split(bf *b, int u)
{
    if (u == b->in->U) {
        if (u > 0 && b->dev[u - 1] == b->in->N - 1) bf_bits(b, 0);
        return;
    }
    for (int step = 0; step <= (u ? 1 : 0); step++) {
        b->dev[u] = u ? b->dev[u - 1] + step : 0;
        if (b->dev[u] < b->in->N) bf_split(b, u + 1);
    }
}

int hs_pq_brute(const hs_pq_inst *in, int *dev, int *bi, double *obj)
{
    int *d, *k;
    bf b;
    if (in->U < 1 || in->N < 1) return HS_EINVAL;
    d = calloc((size_t)in->U, sizeof *d);
    k = calloc((size_t)in->U, sizeof *k);
    b = (bf){in, d, k, dev, bi, INFINITY};
    if (!d || !k) {
        free(d);
        free(k);
        return HS_ENOMEM;
    }
    bf_split(&b, 0);
    free(d);
    free(k);
    *obj = b.best;
    return isfinite(b.best) ? 0 : HS_ENOFIT;
}
