/* fitted.c - the fitted transfer model: per-kind efficiency curves fitted
 * with gsl_multifit_nlinear on measured tables; see fitted.h for the model.
 *
 * Invariants: a fitted kind's parameters are finite and positive (fitted as
 * logs, clamped to exp(+-40)), so every prediction is finite and >= c0 > 0;
 * fits use fixed starting points and keep the best, so equal inputs give
 * equal parameters. */
#include "perf/fitted.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>

#include "core/vec.h"
#include "perf/table_int.h"

const char *hs_fit_kind_name(int kind)
{
    if (kind == HS_FK_DECODE) return "attn_decode";
    if (kind == HS_FK_PREFILL) return "attn_prefill";
    return hs_op_name(kind);
}

/* ---- work ----------------------------------------------------------------- */

static void gemm(hs_work *w, double t, double k, double n, double wb)
{
    w->flops = 2.0 * t * k * n;
    w->bytes = k * n * wb + 2.0 * t * (k + n);
    w->x = t;
}

void hs_fit_op_work(int op, const hs_model *m, int tp, int bits, double t, hs_work *w)
{
    double wb = hs_weight_bytes_per_param(bits);
    double h = m->hidden, q = (double)m->heads * m->head_dim / tp;
    double kv = (double)hs_model_kv_heads_per_rank(m, tp) * m->head_dim;
    double f = (double)m->ffn / tp;
    memset(w, 0, sizeof *w);
    w->x = t;
    switch (op) {
    case HS_OP_EMB: w->bytes = t * h * 4; break;            /* gather a row, write it */
    case HS_OP_NORM: w->bytes = t * h * 4; break;           /* read, write */
    case HS_OP_QKV: gemm(w, t, h, q + 2 * kv, wb); break;
    case HS_OP_ROPE: w->bytes = t * (q + kv) * 4; break;    /* rotate q and k in place */
    case HS_OP_ATTN_OUT: gemm(w, t, q, h, wb); break;
    case HS_OP_MLP_UP: gemm(w, t, h, (m->ffn_gated ? 2 : 1) * f, wb); break;
    case HS_OP_ACT: w->bytes = t * f * 2 * (m->ffn_gated ? 3 : 2); break;
    case HS_OP_MLP_DOWN: gemm(w, t, f, h, wb); break;
    case HS_OP_ADD: w->bytes = t * h * 6; break;            /* two reads, one write */
    case HS_OP_LM_HEAD: gemm(w, t, h, (double)m->vocab / tp, 2.0); break; /* head stays FP16 */
    default: break;
    }
}

void hs_fit_attn_work(int kind, const hs_model *m, int tp, int kv_bits, double x,
                      double y, hs_work *w)
{
    double heads = (double)m->heads / tp, q = heads * m->head_dim;
    double kv = (double)hs_model_kv_heads_per_rank(m, tp) * m->head_dim;
    double kvb = hs_model_kv_bytes_token_layer(m, tp, kv_bits);
    memset(w, 0, sizeof *w);
    /* Parallelism is sequences (or query tokens) times heads: attention
     * kernels give each (sequence, head) pair its own thread blocks, so
     * small batches of GQA models leave SMs idle. */
    w->x = x * heads;
    if (kind == HS_FK_DECODE) {
        /* x sequences of y cached tokens: QK^T and PV over every pair, each
         * cached K/V read once, q read and o written. */
        w->flops = 4.0 * q * x * y;
        w->bytes = x * y * kvb + x * q * 4;
    } else {
        /* One chunk of x new tokens after y cached ones.  The chunk's own
         * causal triangle is counted as the full x * x square: on Vidur's
         * A100 measurements the triangle runs at about half the efficiency
         * of the prefix rectangle (masked tiles), and counting it as a
         * square brings the fit from 15% to 6% median error. */
        w->flops = 4.0 * q * (x * y + x * x);
        w->bytes = y * kvb + x * (2 * q + 2 * kv) * 2;
    }
}

/* ---- the model ------------------------------------------------------------ */

static double smax(double a, double b, double p)
{
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi <= 0) return 0;
    return hi * pow(1.0 + pow(lo / hi, p), 1.0 / p);
}

/* sm > 0: the memory-only form fitted across GPUs (see fitted.h), the
 * bytes bound by DRAM or by the SMs issuing them, whichever is slower. */
static double eval_pw(const double *par, const hs_work *w, double peak, double bw, double sm, int hbm)
{
    double em = par[HS_FP_EMI] + par[HS_FP_KC] / (par[HS_FP_BC] + w->bytes);
    double tm = w->bytes / (bw * em) * 1e6, s = tm;
    if (sm > 0) {
        s = smax(w->bytes / (sm * par[HS_FP_EC] * (hbm ? par[HS_FP_HBM] : 1.0)) * 1e6, tm, par[HS_FP_P]);
    } else if (w->flops > 0) {
        double ec = par[HS_FP_EC] * w->x / (w->x + par[HS_FP_TH]);
        s = smax(w->flops / (peak * ec) * 1e6, tm, par[HS_FP_P]);
    }
    return par[HS_FP_C0] + s;
}

double hs_fit_eval(const double *par, const hs_work *w, const hs_gpu *g)
{
    return eval_pw(par, w, g->flops16, g->mem_bw, 0, 0);
}

double hs_fit_eval_sm(const double *par, const hs_work *w, const hs_gpu *g)
{
    return g->sm_rate > 0 ? eval_pw(par, w, g->flops16, g->mem_bw, g->sm_rate, g->hbm) : 0;
}

/* A GPU on the same chip as a training GPU counts as seen: its kernels
 * are that GPU's, only its datasheet figures (bandwidth) differ. */
static int trained_on(const hs_fit *f, const hs_gpu *g)
{
    for (int i = 0; i < f->n_gpus; i++)
        if (!strcmp(f->gpus[i], g->name) || (g->same_chip_as[0] && !strcmp(f->gpus[i], g->same_chip_as)))
            return 1;
    return 0;
}

int hs_fit_extrapolates_tc(const hs_fit *f, const hs_gpu *g)
{
    if (hs_gpu_tensor_cores(g)) return 0;
    for (int i = 0; i < f->n_gpus; i++) {
        hs_gpu t;
        hs_err err = {0};
        if (!hs_gpu_find(&t, f->gpus[i], &err) && !hs_gpu_tensor_cores(&t)) return 0;
    }
    return 1;
}

double hs_fit_op_us(const hs_fit *f, int op, const hs_model *m, const hs_gpu *g,
                    int tp, int bits, double tokens)
{
    hs_work w;
    const hs_kindfit *kf;
    if (op < 0 || op >= HS_OP_COUNT || f->k[op].from < 0) return 0;
    kf = &f->k[op];
    if (kf->memory_only && (kf->sm_term ? g->sm_rate <= 0 : !f->memory_transfers && !trained_on(f, g))) {
        /* see fitted.h: a per-GPU memory fit does not transfer, and the
         * cross-GPU form needs the GPU's SM count and clock */
        hs_perf_cfg cfg;
        hs_perf_cfg_defaults(&cfg);
        return hs_roofline_op_us(op, m, g, tp, bits, tokens, &cfg);
    }
    hs_fit_op_work(op, m, tp, bits, tokens, &w);
    return kf->sm_term ? hs_fit_eval_sm(kf->par, &w, g) : hs_fit_eval(kf->par, &w, g);
}

double hs_fit_attn_us(const hs_fit *f, int kind, const hs_model *m, const hs_gpu *g,
                      int tp, int kv_bits, double x, double y)
{
    hs_work w;
    if ((kind != HS_FK_DECODE && kind != HS_FK_PREFILL) || f->k[kind].from < 0) return 0;
    hs_fit_attn_work(kind, m, tp, kv_bits, x, y, &w);
    return hs_fit_eval(f->k[kind].par, &w, g);
}

/* ---- fitting -------------------------------------------------------------- */

typedef struct sample {
    hs_work w;
    double peak, bw, sm;      /* FLOP/s, bytes/s, SM cycles/s of its GPU */
    int hbm;                  /* its GPU has HBM (hs_gpu.hbm) */
    double us;                /* measured */
} sample;

typedef struct fitctx {
    const sample *s;
    size_t n;
    unsigned free_mask;       /* 1 << HS_FP_*: fitted; others fixed */
    double base[HS_FP_COUNT]; /* values of the fixed parameters */
    int sm_form;              /* memory-only form across GPUs (eval_pw sm) */
    const double *wts;        /* per-row weights (robust pass); NULL: all 1 */
} fitctx;

/* The cross-GPU memory form bounds em_inf: unbounded, two GPUs with the
 * same bytes-per-SM-cycle balance (A100 and H100 both have about 13) cannot
 * tell DRAM from SM time apart and the fit may leave DRAM unbounded.  The
 * bound is what a streaming copy measures: hetsim-exec's copy reached
 * 4.1-4.2 of the H200's 4.8 TB/s (86-88%); fits that include the A40 land
 * at 0.82-0.89 without it. */
#define EM_MAX 0.9

#define THETA_MAX 40.0

/* theta (the free parameters, as logs; p as log(p - 1)) -> par. */
static void to_par(const fitctx *c, const gsl_vector *th, double *par)
{
    size_t j = 0;
    for (int i = 0; i < HS_FP_COUNT; i++) {
        double v;
        if (!(c->free_mask & (1u << i))) {
            par[i] = c->base[i];
            continue;
        }
        v = gsl_vector_get(th, j++);
        if (v > THETA_MAX) v = THETA_MAX;
        if (v < -THETA_MAX) v = -THETA_MAX;
        if (i == HS_FP_EMI && c->sm_form) par[i] = EM_MAX / (1.0 + exp(-v));
        else par[i] = i == HS_FP_P ? 1.0 + exp(v) : exp(v);
    }
    /* Without its own cache term a kind has one bandwidth fraction. */
    if (!(c->free_mask & (1u << HS_FP_KC))) par[HS_FP_KC] = 0;
}

/* Row i's error under par: log(predicted / measured). */
static double row_err(const fitctx *c, const double *par, size_t i)
{
    const sample *s = &c->s[i];
    return log(eval_pw(par, &s->w, s->peak, s->bw, c->sm_form ? s->sm : 0, s->hbm) / s->us);
}

static int resid(const gsl_vector *th, void *vc, gsl_vector *f)
{
    const fitctx *c = vc;
    double par[HS_FP_COUNT];
    to_par(c, th, par);
    for (size_t i = 0; i < c->n; i++) gsl_vector_set(f, i, row_err(c, par, i));
    return GSL_SUCCESS;
}

/* Analytic Jacobian of resid (finite differences cost a model evaluation
 * per parameter and made build-time fits several times slower).  With
 * r = log(pred / y):  dr/dtheta_j = (dpred/dpar_j) * (dpar_j/dtheta_j) / pred,
 * dpar/dtheta = par (p: p - 1).  S = smax_p(tc, tm): dS/dtc = (tc/S)^(p-1),
 * dS/dtm = (tm/S)^(p-1), dlnS/dp = -ln(Q)/p^2 + (u^p ln u + v^p ln v)/(p Q)
 * with u, v = tc, tm over their maximum and Q = u^p + v^p. */
static int jac(const gsl_vector *th, void *vc, gsl_matrix *J)
{
    const fitctx *c = vc;
    double par[HS_FP_COUNT];
    to_par(c, th, par);
    for (size_t i = 0; i < c->n; i++) {
        const hs_work *w = &c->s[i].w;
        double d[HS_FP_COUNT] = {0};
        double g = 1.0 / (par[HS_FP_BC] + w->bytes);
        double em = par[HS_FP_EMI] + par[HS_FP_KC] * g;
        double tm = w->bytes / (c->s[i].bw * em) * 1e6, dS_dtm = 1, S = tm, pred;
        size_t j = 0;
        if (c->sm_form) {
            /* S = smax_p(ts, tm), ts = B / (sm * ec * hbm factor); p is fixed */
            double f = c->s[i].hbm ? par[HS_FP_HBM] : 1.0;
            double p = par[HS_FP_P], ts = w->bytes / (c->s[i].sm * par[HS_FP_EC] * f) * 1e6;
            double hi = ts > tm ? ts : tm, Q = pow(ts / hi, p) + pow(tm / hi, p);
            S = hi * pow(Q, 1.0 / p);
            dS_dtm = pow(tm / S, p - 1);
            d[HS_FP_EC] = -pow(ts / S, p - 1) * ts / par[HS_FP_EC];
            d[HS_FP_HBM] = c->s[i].hbm ? -pow(ts / S, p - 1) * ts / par[HS_FP_HBM] : 0;
        } else if (w->flops > 0) {
            double p = par[HS_FP_P], ece = par[HS_FP_EC] * w->x / (w->x + par[HS_FP_TH]);
            double tc = w->flops / (c->s[i].peak * ece) * 1e6, hi = tc > tm ? tc : tm;
            double u = tc / hi, v = tm / hi, up = pow(u, p), vp = pow(v, p), Q = up + vp;
            double dS_dtc, lu = u > 0 ? up * log(u) : 0, lv = v > 0 ? vp * log(v) : 0;
            S = hi * pow(Q, 1.0 / p);
            dS_dtc = pow(tc / S, p - 1);
            dS_dtm = pow(tm / S, p - 1);
            d[HS_FP_EC] = -dS_dtc * tc / par[HS_FP_EC];
            d[HS_FP_TH] = dS_dtc * tc / (w->x + par[HS_FP_TH]);
            d[HS_FP_P] = S * (-log(Q) / (p * p) + (lu + lv) / (p * Q));
        }
        d[HS_FP_C0] = 1;
        /* d tm / d em = -tm / em */
        d[HS_FP_EMI] = -dS_dtm * tm / em;
        d[HS_FP_KC] = -dS_dtm * tm / em * g;
        d[HS_FP_BC] = dS_dtm * tm / em * par[HS_FP_KC] * g * g;
        pred = par[HS_FP_C0] + S;
        for (int k = 0; k < HS_FP_COUNT; k++) {
            double dp_dth = k == HS_FP_P ? par[k] - 1.0 : par[k];
            if (!(c->free_mask & (1u << k))) continue;
            if (k == HS_FP_EMI && c->sm_form) dp_dth = par[k] * (1.0 - par[k] / EM_MAX);
            gsl_matrix_set(J, i, j++, d[k] * dp_dth / pred);
        }
    }
    return GSL_SUCCESS;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* One Levenberg-Marquardt run from par0; returns the final cost (sum of
 * squared log errors, weighted by c->wts when set), +inf when the run
 * fails, -1 out of memory; par receives the result. */
static double lm_run(fitctx *c, const double *par0, double *par)
{
    size_t np = 0, j = 0;
    double cost = INFINITY, chisq;
    int info;
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_fdf fdf;
    gsl_multifit_nlinear_workspace *w;
    gsl_vector *x;
    for (int i = 0; i < HS_FP_COUNT; i++) np += (c->free_mask >> i) & 1u;
    if (c->n < np) return INFINITY;
    x = gsl_vector_alloc(np);
    w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, c->n, np);
    if (!x || !w) {
        cost = -1;
        goto out;
    }
    /* A parameter that ended on its bound (em_inf at EM_MAX, p at 1: to_par
     * rounds there past theta ~ 37) maps back to +-inf; start it on the
     * clamp to_par applies instead. */
    for (int i = 0; i < HS_FP_COUNT; i++)
        if (c->free_mask & (1u << i))
            gsl_vector_set(x, j++, clampd(i == HS_FP_P ? log(par0[i] - 1.0)
                                          : i == HS_FP_EMI && c->sm_form ? log(par0[i] / (EM_MAX - par0[i]))
                                                                         : log(par0[i]),
                                          -THETA_MAX, THETA_MAX));
    fdf.f = resid;
    fdf.df = jac;
    fdf.fvv = NULL;
    fdf.n = c->n;
    fdf.p = np;
    fdf.params = c;
    if (c->wts) {
        gsl_vector_const_view wv = gsl_vector_const_view_array(c->wts, c->n);
        if (gsl_multifit_nlinear_winit(x, &wv.vector, &fdf, w) != GSL_SUCCESS) goto out;
    } else if (gsl_multifit_nlinear_init(x, &fdf, w) != GSL_SUCCESS) {
        goto out;
    }
    /* GSL_EMAXITER or a stalled step still leaves the best point reached. */
    gsl_multifit_nlinear_driver(400, 1e-10, 1e-10, 0.0, NULL, NULL, &info, w);
    gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w), &chisq);
    if (isfinite(chisq)) {
        cost = chisq;
        to_par(c, gsl_multifit_nlinear_position(w), par);
    }
out:
    gsl_vector_free(x);
    if (w) gsl_multifit_nlinear_free(w);
    return cost;
}

/* Huber's M-estimator by iteratively reweighted least squares, at most
 * max_passes weighted Levenberg-Marquardt runs from par: each pass weighs
 * the rows by the residuals r of the last, scale s = 1.4826 MAD.  A row
 * with |r| > k s (k = 1.345) gets weight k s / |r|: its pull on the fit is
 * capped at that of a row k s away.  So a GPU far from the others (the
 * 70 W T4 runs its GEMMs at half the datasheet fraction of the rest,
 * consumer cards boost past their rated clock) no longer drags the
 * efficiency fitted for the others, nor a table's stray rows its fit, and
 * Huber's loss stays convex in the residuals.  The constants are the
 * textbook ones (95% efficiency under normal errors).  Settled when no
 * row's prediction moves by 0.1% in a pass (the shipped calibration's fits
 * all settle within the 50 passes); predictions, not parameters, because
 * parameters the data cannot pin down (th far below every x) may drift
 * without changing any.
 * A kind with few rows keeps least squares (fit_kind): its MAD says little,
 * and with five free parameters the weights could discount most of what it
 * has.  The threshold counts a fit's training rows, so two folds of one
 * cross-validation may differ in method.
 * Returns 0; 1 when the first pass's fit failed (par unchanged); -1 out
 * of memory.  *settled (when given): 1 when it settled within max_passes. */
#define HUBER_K 1.345
#define ROBUST_MAX_PASSES 50
#define ROBUST_SCOUT_PASSES 2   /* per start, before the best one goes on */
#define ROBUST_MIN_ROWS 100
#define ROBUST_TOL 1e-3

/* 1.4826 x the median absolute deviation of r[0..n): the robust scale of
 * normal errors; a is scratch of n. */
static double mad_of(const double *r, double *a, size_t n)
{
    double med;
    memcpy(a, r, n * sizeof *a);
    med = hs__percentile(a, (int)n, 50);
    for (size_t i = 0; i < n; i++) a[i] = fabs(r[i] - med);
    return 1.4826 * hs__percentile(a, (int)n, 50);
}

static int robust_pass(fitctx *c, double *par, int max_passes, int *settled)
{
    double *r = malloc(c->n * sizeof *r), *prev = malloc(c->n * sizeof *prev);
    double *a = malloc(c->n * sizeof *a), *wt = malloc(c->n * sizeof *wt), next[HS_FP_COUNT];
    int rc = 1;
    if (!r || !prev || !a || !wt) rc = -1;
    if (settled) *settled = 0;
    memcpy(c->base, par, sizeof c->base);
    for (int it = 0; rc >= 0 && it <= max_passes; it++) {
        double scale, moved = 0, cost;
        for (size_t i = 0; i < c->n; i++) {
            r[i] = row_err(c, par, i);
            if (it) moved = fmax(moved, fabs(r[i] - prev[i]));
        }
        if (it && moved < ROBUST_TOL) {
            if (settled) *settled = 1;
            break;
        }
        if (it == max_passes) break;
        memcpy(prev, r, c->n * sizeof *r);
        scale = mad_of(r, a, c->n);
        if (!(scale > 1e-9)) { /* an exact fit: nothing to reweight */
            if (settled) *settled = 1;
            rc = 0;
            break;
        }
        for (size_t i = 0; i < c->n; i++)
            wt[i] = fabs(r[i]) <= HUBER_K * scale ? 1.0 : HUBER_K * scale / fabs(r[i]);
        c->wts = wt;
        cost = lm_run(c, par, next);
        if (cost < 0) {
            rc = -1;
            break;
        }
        if (!isfinite(cost)) break; /* keep the last good fit */
        memcpy(par, next, sizeof next);
        rc = 0;
    }
    c->wts = NULL;
    free(r);
    free(prev);
    free(a);
    free(wt);
    return rc;
}

/* mad_of the rows' errors under par; -1 out of memory. */
static double mad_scale(const fitctx *c, const double *par)
{
    double *r = malloc(c->n * sizeof *r), *a = malloc(c->n * sizeof *a), scale = -1;
    if (r && a) {
        for (size_t i = 0; i < c->n; i++) r[i] = row_err(c, par, i);
        scale = mad_of(r, a, c->n);
    }
    free(r);
    free(a);
    return scale;
}

/* Huber's loss of par's log errors at scale s: sum of r^2 / 2 within
 * k = HUBER_K s, k (|r| - k / 2) beyond; at s = 0 (an exact fit among the
 * candidates) its limit over k, the sum of |r|. */
static double huber_loss(const fitctx *c, const double *par, double scale)
{
    double k = HUBER_K * scale, loss = 0;
    if (!(k > 1e-12)) k = 0;
    for (size_t i = 0; i < c->n; i++) {
        double r = fabs(row_err(c, par, i));
        loss += k == 0 ? r : r <= k ? r * r / 2 : k * (r - k / 2);
    }
    return loss;
}

/* 0: fitted; 1: no run converged to a finite cost; -1: out of memory. */
static int fit_kind(hs_kindfit *kf, const sample *s, size_t n, int memory_only, int sm_form, int hbm_free)
{
    /* Starting points from the data, so that a kind far from typical
     * efficiencies (decode attention reaches a few percent of tensor peak)
     * starts in the right basin: the efficiency the best rows imply (time
     * at 100% of peak over measured time, 90th percentile), the corner at
     * the 10th and 50th percentile of x with a soft and a sharp corner; for
     * memory kinds the median and 90th-percentile bandwidth fraction and a
     * cache knee at the 25th and 75th percentile of bytes; for the cross-GPU
     * memory form the median and 90th-percentile bytes per SM cycle.  With
     * fewer than ROBUST_MIN_ROWS rows the best least-squares run of the four
     * is kept; otherwise the robust passes below choose. */
    fitctx c = {s, n, 0, {0}, sm_form, NULL};
    double best = INFINITY, ymin = INFINITY, par0[HS_FP_COUNT], par[HS_FP_COUNT];
    double cand[4][HS_FP_COUNT], cand_scale[4] = {-1, -1, -1, -1};
    double *v = malloc(n * sizeof *v), ec90, em50, em90, x10, x50, b25, b75, k50 = 1, k90 = 1;
    size_t nc = 0, hbm_rows = 0;
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) hbm_rows += s[i].hbm != 0;
    for (size_t i = 0; i < n; i++) if (s[i].us < ymin) ymin = s[i].us;
    for (size_t i = 0; i < n; i++)
        if (s[i].w.flops > 0) v[nc++] = s[i].w.flops / s[i].peak * 1e6 / s[i].us;
    ec90 = nc ? clampd(hs__percentile(v, (int)nc, 90), 0.005, 1) : 0.7;
    for (size_t i = 0; i < n; i++) v[i] = s[i].w.bytes / s[i].bw * 1e6 / s[i].us;
    em50 = clampd(hs__percentile(v, (int)n, 50), 0.01, 2);
    em90 = clampd(hs__percentile(v, (int)n, 90), 0.01, 2);
    for (size_t i = 0; i < n; i++) v[i] = s[i].w.x;
    x10 = hs__percentile(v, (int)n, 10);
    x50 = hs__percentile(v, (int)n, 50);
    for (size_t i = 0; i < n; i++) v[i] = s[i].w.bytes;
    b25 = hs__percentile(v, (int)n, 25);
    b75 = hs__percentile(v, (int)n, 75);
    if (sm_form) {
        for (size_t i = 0; i < n; i++) v[i] = s[i].w.bytes / (s[i].sm * s[i].us * 1e-6);
        k50 = clampd(hs__percentile(v, (int)n, 50), 1e-3, 1e3);
        k90 = clampd(hs__percentile(v, (int)n, 90), 1e-3, 1e3);
    }
    free(v);
    par0[HS_FP_C0] = ymin * 0.5;
    par0[HS_FP_EC] = ec90;
    par0[HS_FP_TH] = x10 > 1 ? x10 : 1;
    par0[HS_FP_P] = 4;
    par0[HS_FP_EMI] = em90;
    par0[HS_FP_KC] = 0;
    par0[HS_FP_BC] = b25 > 1 ? b25 : 1;
    par0[HS_FP_HBM] = 1;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            double cost;
            if (sm_form) {
                c.free_mask = 1u << HS_FP_C0 | 1u << HS_FP_EC | 1u << HS_FP_EMI;
                /* the HBM factor: for the latency-bound gather only (the
                 * streaming ops fit no better with it and the RTX 3090's
                 * rope, act and add folds worse: 7-18% against 4-7%), and
                 * only where both kinds of memory are in the rows (one
                 * kind alone cannot tell it from ec) */
                if (hbm_free && hbm_rows && hbm_rows < n) c.free_mask |= 1u << HS_FP_HBM;
                par0[HS_FP_EC] = a ? k90 : k50;
                par0[HS_FP_EMI] = clampd(b ? em90 : em50, 0.05, 0.85);
                par0[HS_FP_P] = 4;
                par0[HS_FP_KC] = 0;
            } else if (memory_only) {
                c.free_mask = 1u << HS_FP_C0 | 1u << HS_FP_EMI | 1u << HS_FP_KC | 1u << HS_FP_BC;
                par0[HS_FP_EMI] = a ? em90 : em50;
                par0[HS_FP_BC] = (b ? b75 : b25) > 1 ? (b ? b75 : b25) : 1;
                par0[HS_FP_KC] = par0[HS_FP_BC] * par0[HS_FP_EMI]; /* small: twice em_inf */
            } else {
                c.free_mask = 1u << HS_FP_C0 | 1u << HS_FP_EC | 1u << HS_FP_TH | 1u << HS_FP_P |
                              1u << HS_FP_EMI;
                par0[HS_FP_TH] = (a ? x50 : x10) > 1 ? (a ? x50 : x10) : 1;
                par0[HS_FP_P] = b ? 8 : 2;
            }
            memcpy(c.base, par0, sizeof par0);
            if (n < ROBUST_MIN_ROWS) {
                cost = lm_run(&c, par0, par);
                if (cost < 0) return -1;
                if (cost < best) {
                    best = cost;
                    memcpy(kf->par, par, sizeof par);
                }
            } else {
                /* Huber from the start itself, not from a least-squares
                 * fit: a group of outlying rows (a GPU twice as slow as
                 * the rest) can pull least squares into another basin (c0
                 * and th at their floor, a soft corner), from which
                 * reweighting does not get out.  Each start gets a few
                 * passes; the one with the least Huber loss (at the
                 * smallest of their scales) goes on until it settles. */
                int got, j = 2 * a + b;
                memcpy(par, par0, sizeof par);
                got = robust_pass(&c, par, ROBUST_SCOUT_PASSES, NULL);
                if (got < 0) return -1;
                if (got == 0) {
                    memcpy(cand[j], par, sizeof par);
                    if ((cand_scale[j] = mad_scale(&c, par)) < 0) return -1;
                }
            }
        }
    if (n >= ROBUST_MIN_ROWS) {
        double s_min = INFINITY;
        for (int j = 0; j < 4; j++)
            if (cand_scale[j] >= 0 && cand_scale[j] < s_min) s_min = cand_scale[j];
        for (int j = 0; j < 4 && isfinite(s_min); j++) {
            double loss;
            if (cand_scale[j] < 0) continue;
            loss = huber_loss(&c, cand[j], s_min);
            if (loss < best) {
                best = loss;
                memcpy(kf->par, cand[j], sizeof cand[j]);
            }
        }
    }
    if (!isfinite(best)) return 1;
    /* the chosen start, reweighted until it settles */
    if (n >= ROBUST_MIN_ROWS) {
        int settled;
        if (robust_pass(&c, kf->par, ROBUST_MAX_PASSES, &settled) < 0) return -1;
        kf->unsettled = !settled;
    }
    {
        double *pred = malloc(n * sizeof *pred), *meas = malloc(n * sizeof *meas);
        if (!pred || !meas) {
            free(pred);
            free(meas);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            pred[i] = eval_pw(kf->par, &s[i].w, s[i].peak, s[i].bw, sm_form ? s[i].sm : 0, s[i].hbm);
            meas[i] = s[i].us;
        }
        hs_fitstat_compute(&kf->st, pred, meas, (int)n);
        free(pred);
        free(meas);
    }
    kf->rows = (int)n;
    kf->memory_only = memory_only;
    kf->sm_term = sm_form;
    return 0;
}

/* Kinds to borrow from, in order, when a kind has no rows of its own. */
static const int borrow[HS_FK_COUNT][4] = {
    [HS_OP_EMB] = {HS_OP_NORM, HS_OP_ADD, -1},
    [HS_OP_NORM] = {HS_OP_ADD, HS_OP_EMB, -1},
    [HS_OP_QKV] = {HS_OP_MLP_UP, HS_OP_ATTN_OUT, HS_OP_MLP_DOWN, -1},
    [HS_OP_ROPE] = {HS_OP_ACT, HS_OP_NORM, -1},
    [HS_OP_ATTN_OUT] = {HS_OP_MLP_DOWN, HS_OP_QKV, HS_OP_MLP_UP, -1},
    [HS_OP_MLP_UP] = {HS_OP_QKV, HS_OP_MLP_DOWN, HS_OP_ATTN_OUT, -1},
    [HS_OP_ACT] = {HS_OP_ROPE, HS_OP_ADD, HS_OP_NORM, -1},
    [HS_OP_MLP_DOWN] = {HS_OP_ATTN_OUT, HS_OP_MLP_UP, HS_OP_QKV, -1},
    [HS_OP_ADD] = {HS_OP_NORM, HS_OP_ACT, -1},
    [HS_OP_LM_HEAD] = {HS_OP_MLP_UP, HS_OP_QKV, HS_OP_MLP_DOWN, -1},
    [HS_FK_DECODE] = {-1},
    [HS_FK_PREFILL] = {-1},
};

#define FIT_MAX_ROWS 3000

int hs_fit_run(hs_fit *f, const hs_fit_input *in, int n, hs_err *err)
{
    size_t cap = 0;
    sample *s = NULL;
    int rc = 0, any = 0, sm_form;
    gsl_error_handler_t *old;
    memset(f, 0, sizeof *f);
    f->n_inputs = n;
    for (int k = 0; k < HS_FK_COUNT; k++) f->k[k].from = -1;
    /* every GPU by name, a same-chip pair too (H200 beside H100): the list
     * says what the fit saw; trained_on() then counts the chip */
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < f->n_gpus; j++) seen |= !strcmp(f->gpus[j], in[i].g->name);
        if (!seen && f->n_gpus < HS_FIT_MAX_GPUS)
            snprintf(f->gpus[f->n_gpus++], sizeof f->gpus[0], "%s", in[i].g->name);
    }
    /* Memory-only kinds get the cross-GPU form when there is more than one
     * chip to fit it on (an H200 beside the H100 is the same chip) and every
     * GPU gives its SM count and clock. */
    sm_form = 0;
    for (int i = 1; i < n && !sm_form; i++) sm_form = strcmp(hs_gpu_chip(in[i].g), hs_gpu_chip(in[0].g)) != 0;
    for (int i = 0; i < n; i++) sm_form = sm_form && in[i].g->sm_rate > 0;
    for (int i = 0; i < n; i++) {
        size_t m = in[i].t->n_dense;
        if (in[i].t->n_attn[0] > m) m = in[i].t->n_attn[0];
        if (in[i].t->n_attn[1] > m) m = in[i].t->n_attn[1];
        cap += m;
    }
    if (!(s = malloc((cap ? cap : 1) * sizeof *s))) return hs_errf(err, HS_ENOMEM, "out of memory fitting");
    /* The nonlinear solver may report singular steps through GSL's handler,
     * which aborts by default; library code returns instead. */
    old = gsl_set_error_handler_off();
    for (int k = 0; k < HS_FK_COUNT; k++) {
        size_t ns = 0;
        for (int i = 0; i < n; i++) {
            const hs_ptable *t = in[i].t;
            if (k < HS_OP_COUNT) {
                for (size_t r = 0; r < t->n_dense; r++) {
                    const hs_dense_row *d = &t->dense[r];
                    if (d->op != k) continue;
                    hs_fit_op_work(k, in[i].m, d->tp, d->bits, d->tokens, &s[ns].w);
                    s[ns].peak = in[i].g->flops16;
                    s[ns].bw = in[i].g->mem_bw;
                    s[ns].sm = in[i].g->sm_rate;
                    s[ns].hbm = in[i].g->hbm;
                    s[ns++].us = d->us;
                }
            } else {
                int a = k == HS_FK_DECODE ? HS_ATTN_DECODE : HS_ATTN_PREFILL;
                for (size_t r = 0; r < t->n_attn[a]; r++) {
                    const hs_attn_row *d = &t->attn[a][r];
                    /* tables hold FP16 KV caches */
                    hs_fit_attn_work(k, in[i].m, d->tp, 16, d->x, d->y, &s[ns].w);
                    s[ns].peak = in[i].g->flops16;
                    s[ns].bw = in[i].g->mem_bw;
                    s[ns].sm = in[i].g->sm_rate;
                    s[ns].hbm = in[i].g->hbm;
                    s[ns++].us = d->us;
                }
            }
        }
        if (!ns) continue;
        if (ns > FIT_MAX_ROWS) {
            /* Seven parameters need far fewer rows than a full attention
             * grid (10k); every stride-th row keeps the grid's coverage
             * and cuts a build-time fit several-fold. */
            size_t stride = (ns + FIT_MAX_ROWS - 1) / FIT_MAX_ROWS, m = 0;
            for (size_t i = 0; i < ns; i += stride) s[m++] = s[i];
            ns = m;
        }
        {
            hs_work probe;
            hs_fit_op_work(k, in[0].m, 1, 16, 1, &probe);
            int memory_only = k < HS_OP_COUNT && probe.flops == 0;
            int got = fit_kind(&f->k[k], s, ns, memory_only, memory_only && sm_form, k == HS_OP_EMB);
            if (got < 0) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory fitting %s", hs_fit_kind_name(k));
                break;
            }
            if (got == 0) {
                f->k[k].from = k;
                any += k < HS_OP_COUNT;
            }
        }
    }
    gsl_set_error_handler(old);
    free(s);
    if (rc) return rc;
    if (!any) return hs_errf(err, HS_ENOTFOUND, "no dense-op rows to fit on (%d tables)", n);
    for (int k = 0; k < HS_FK_COUNT; k++) {
        if (f->k[k].from >= 0) continue;
        for (int b = 0; b < 4 && borrow[k][b] >= 0; b++) {
            const hs_kindfit *src = &f->k[borrow[k][b]];
            if (src->rows > 0) {
                memcpy(f->k[k].par, src->par, sizeof src->par);
                f->k[k].memory_only = src->memory_only;
                f->k[k].sm_term = src->sm_term;
                f->k[k].from = borrow[k][b];
                break;
            }
        }
    }
    return rc;
}

void hs_fit_print(const hs_fit *f, FILE *out)
{
    int any_sm = 0;
    fprintf(out, "%-13s %6s %-12s %9s %9s %9s %6s %6s %9s %9s %7s %7s\n", "kind", "rows", "from",
            "c0_us", "ec", "th", "p", "em_inf", "k_c", "b_c", "med%", "p90%");
    for (int k = 0; k < HS_FK_COUNT; k++) {
        const hs_kindfit *kf = &f->k[k];
        const double *p = kf->par;
        if (kf->from < 0) {
            fprintf(out, "%-13s %6d %-12s (no data)\n", hs_fit_kind_name(k), 0, "-");
            continue;
        }
        fprintf(out, "%-13s %6d %-12s %9.3f ", hs_fit_kind_name(k), kf->rows, hs_fit_kind_name(kf->from),
                p[HS_FP_C0]);
        if (kf->sm_term) fprintf(out, "%9.3g %9s %6.2f ", p[HS_FP_EC], "-", p[HS_FP_P]);
        else if (kf->memory_only) fprintf(out, "%9s %9s %6s ", "-", "-", "-");
        else fprintf(out, "%9.3g %9.3g %6.2f ", p[HS_FP_EC], p[HS_FP_TH], p[HS_FP_P]);
        fprintf(out, "%6.3f ", p[HS_FP_EMI]);
        if (kf->memory_only && !kf->sm_term) fprintf(out, "%9.3g %9.3g ", p[HS_FP_KC], p[HS_FP_BC]);
        else fprintf(out, "%9s %9s ", "-", "-");
        if (kf->rows) fprintf(out, "%7.2f %7.2f\n", kf->st.med_ape, kf->st.p90_ape);
        else fprintf(out, "%7s %7s\n", "-", "-");
        any_sm |= kf->sm_term;
    }
    if (any_sm)
        fprintf(out, "memory-only kinds fitted across GPUs: ec is bytes per SM cycle (the SMs' issue bound), "
                     "em_inf <= %.2f; on HBM GPUs ec times:", EM_MAX);
    for (int k = 0; any_sm && k < HS_FK_COUNT; k++)
        if (f->k[k].sm_term) fprintf(out, " %s %.3g", hs_fit_kind_name(k), f->k[k].par[HS_FP_HBM]);
    if (any_sm) fprintf(out, "\n");
    for (int k = 0; k < HS_FK_COUNT; k++)
        if (f->k[k].unsettled)
            fprintf(out, "%s: the robust fit stopped at %d passes, its predictions still moving\n",
                    hs_fit_kind_name(k), ROBUST_MAX_PASSES);
}

/* ---- training data from disk ----------------------------------------------- */

static int names_push(char ***v, int *n, size_t *cap, const char *s, hs_err *err)
{
    if (hs_vec_reserve((void **)v, cap, (size_t)*n + 1, sizeof **v, 8))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    if (!((*v)[*n] = strdup(s))) return hs_errf(err, HS_ENOMEM, "out of memory");
    (*n)++;
    return 0;
}

int hs__table_dirs(const char *dirs, char ***out, int *n, hs_err *err)
{
    char *list = strdup(dirs ? dirs : ""), *save = NULL, path[1100];
    char **v = NULL;
    int rc = 0, cnt = 0;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (!list) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (char *dir = strtok_r(list, ",", &save); !rc && dir; dir = strtok_r(NULL, ",", &save)) {
        char **gpus = NULL;
        int ng = 0;
        if (snprintf(path, sizeof path, "%s/meta.json", dir) < (int)sizeof path && hs__is_file(path)) {
            rc = names_push(&v, &cnt, &cap, dir, err);
            continue;
        }
        if ((rc = hs__subdirs(dir, &gpus, &ng, err))) break;
        for (int g = 0; !rc && g < ng; g++) {
            char gdir[1100], **models = NULL;
            int nm = 0;
            if (snprintf(gdir, sizeof gdir, "%s/%s", dir, gpus[g]) >= (int)sizeof gdir - 64) {
                rc = hs_errf(err, HS_ERANGE, "%s/%s: path too long", dir, gpus[g]);
                break;
            }
            if ((rc = hs__subdirs(gdir, &models, &nm, err))) break;
            for (int m = 0; !rc && m < nm; m++) {
                char tdir[1100];
                if (snprintf(tdir, sizeof tdir, "%s/%s", gdir, models[m]) >= (int)sizeof tdir - 16) {
                    rc = hs_errf(err, HS_ERANGE, "%s/%s: path too long", gdir, models[m]);
                    break;
                }
                if (snprintf(path, sizeof path, "%s/meta.json", tdir) < (int)sizeof path &&
                    hs__is_file(path))
                    rc = names_push(&v, &cnt, &cap, tdir, err);
            }
            hs__names_free(models, nm);
        }
        hs__names_free(gpus, ng);
    }
    free(list);
    if (rc) {
        hs__names_free(v, cnt);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int hs_fit_data_load(hs_fit_data *d, const char *dirs, hs_err *err)
{
    char **tdirs = NULL;
    int nt = 0, rc;
    memset(d, 0, sizeof *d);
    if ((rc = hs__table_dirs(dirs, &tdirs, &nt, err))) return rc;
    if (!nt) return 0;
    d->tables = calloc((size_t)nt, sizeof *d->tables);
    d->models = calloc((size_t)nt, sizeof *d->models);
    d->gpus = calloc((size_t)nt, sizeof *d->gpus);
    d->in = calloc((size_t)nt, sizeof *d->in);
    if (!d->tables || !d->models || !d->gpus || !d->in) rc = hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < nt; i++) {
        hs_ptable *t = NULL;
        if ((rc = hs_ptable_read(&t, tdirs[i], err))) break;
        if (!t->meta.model[0]) { /* collectives only: nothing to fit */
            hs_ptable_destroy(t);
            continue;
        }
        if ((rc = hs_model_find(&d->models[d->n], t->meta.model, err)) ||
            (rc = hs_gpu_find(&d->gpus[d->n], t->meta.gpu, err))) {
            hs_err_prefix(err, "%s/meta.json: ", tdirs[i]);
            hs_ptable_destroy(t);
            break;
        }
        d->tables[d->n] = t;
        d->in[d->n] = (hs_fit_input){t, &d->models[d->n], &d->gpus[d->n]};
        d->n++;
    }
    hs__names_free(tdirs, nt);
    if (rc) hs_fit_data_free(d);
    return rc;
}

void hs_fit_data_free(hs_fit_data *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) hs_ptable_destroy(d->tables[i]);
    free(d->tables);
    free(d->models);
    free(d->gpus);
    free(d->in);
    memset(d, 0, sizeof *d);
}

int hs_fit_report(const char *dirs, FILE *out, hs_err *err)
{
    char root[600];
    hs_fit_data d;
    hs_fit f;
    int rc;
    if (!dirs || !*dirs) {
        snprintf(root, sizeof root, "%s/profiles", hs_data_root());
        dirs = root;
    }
    if ((rc = hs_fit_data_load(&d, dirs, err))) return rc;
    if (!d.n) return hs_errf(err, HS_ENOTFOUND, "%s: no measured tables (<gpu>/<model>/meta.json)", dirs);
    rc = hs_fit_run(&f, d.in, d.n, err);
    if (!rc) {
        fprintf(out, "fitted latency model on %d table%s:\n", d.n, d.n == 1 ? "" : "s");
        for (int i = 0; i < d.n; i++) {
            const hs_ptable *t = d.tables[i];
            fprintf(out, "  %s (%s on %s, %s): %zu dense, %zu decode, %zu prefill rows\n", t->dir,
                    t->meta.model, t->meta.gpu, t->meta.backend, t->n_dense, t->n_attn[0], t->n_attn[1]);
        }
        fprintf(out, "\n");
        hs_fit_print(&f, out);
    }
    hs_fit_data_free(&d);
    return rc;
}
