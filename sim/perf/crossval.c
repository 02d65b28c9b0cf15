/* crossval.c - cross-validation of the fitted model on Vidur's published
 * kernel timings (data nobody on this project measured); see fitted.h.
 *
 * Experiments (every row of the target tables, all TP degrees):
 *   A  fit on Llama-2-7B A100          -> predict Llama-2-70B A100
 *   B  fit on Llama-2-7B and 70B A100  -> predict Llama-2-7B and 70B A40
 * Reported per operator: median and p90 absolute percentage error, then the
 * whole decoder layer (qkv + rope + attn_out + mlp_up + act + mlp_down +
 * 2 norm + 2 add at each (tp, tokens)), then all operator rows pooled.
 * Also printed, for the measured-table path: the error of interpolating
 * between measured token counts (every other point held out) and of the
 * hot path's linear attention coefficients against the attention table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>

#include "perf/calib.h"
#include "perf/fitted.h"
#include "perf/table_int.h"

typedef struct cv_set {
    hs_ptable *t[2];
    hs_model m[2];
    hs_gpu g[2];
    int n;
} cv_set;

static void set_free(cv_set *s)
{
    for (int i = 0; i < s->n; i++) hs_ptable_destroy(s->t[i]);
    s->n = 0;
}

static int set_add(cv_set *s, const char *vidur_dir, const char *gpu, const char *model, hs_err *err)
{
    char mp[128], ours[48], gname[32];
    hs_ptable *t;
    int rc;
    snprintf(mp, sizeof mp, "meta-llama/%s", model);
    if ((rc = hs_vidur_import(&t, vidur_dir, gpu, mp, NULL, err))) return rc;
    if ((rc = hs_vidur_model_name(ours, sizeof ours, mp, err)) ||
        (rc = hs_vidur_gpu_name(gname, sizeof gname, gpu, err)) ||
        (rc = hs_model_find(&s->m[s->n], ours, err)) ||
        (rc = hs_gpu_find(&s->g[s->n], gname, err))) {
        hs_ptable_destroy(t);
        return rc;
    }
    s->t[s->n++] = t;
    return 0;
}

/* Growable pair list. */
typedef struct pairs {
    double *p, *m;
    int n, cap;
} pairs;

static int pairs_add(pairs *v, double p, double m)
{
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 256;
        double *np = realloc(v->p, (size_t)nc * sizeof *np);
        if (np) v->p = np;
        double *nm = realloc(v->m, (size_t)nc * sizeof *nm);
        if (nm) v->m = nm;
        if (!np || !nm) return -1;
        v->cap = nc;
    }
    v->p[v->n] = p;
    v->m[v->n++] = m;
    return 0;
}

static void stat_of(hs_fitstat *st, const pairs *v)
{
    if (v->n) hs_fitstat_compute(st, v->p, v->m, v->n);
    else memset(st, 0, sizeof *st);
}

static int layer_count(const hs_model *m, int op)
{
    switch (op) {
    case HS_OP_NORM: case HS_OP_ADD: return 2;
    case HS_OP_EMB: case HS_OP_LM_HEAD: return 0;
    case HS_OP_ROPE: return !strcmp(m->position, "rope");
    default: return 1;
    }
}

/* A predictor: the fitted model, or the roofline with cfg. */
typedef struct predictor {
    const hs_fit *fit;          /* NULL: roofline with cfg */
    const hs_perf_cfg *cfg;
} predictor;

static double predict(const predictor *f, int op, const hs_model *m, const hs_gpu *g, int tp,
                      int bits, double tokens)
{
    return f->fit ? hs_fit_op_us(f->fit, op, m, g, tp, bits, tokens)
                  : hs_roofline_op_us(op, m, g, tp, bits, tokens, f->cfg);
}

/* 0 when the predictor has no attention model of that kind. */
static double predict_attn(const predictor *f, int kind, const hs_model *m, const hs_gpu *g, int tp,
                           double x, double y)
{
    /* tables hold FP16 KV caches */
    if (f->fit) return hs_fit_attn_us(f->fit, kind == HS_ATTN_DECODE ? HS_FK_DECODE : HS_FK_PREFILL,
                                      m, g, tp, 16, x, y);
    return hs_roofline_attn_us(kind, m, g, tp, 16, x, y, f->cfg);
}

/* Accumulated (predicted, measured) pairs: per operator and weight
 * precision, per attention kind, per decoder layer, and every dense row. */
#define BITS_N 4
/* the keys are hs_compare's slots (fitted.h) */
enum { ACC_DEC = HS_CMP_DECODE, ACC_PRE, ACC_LAYER, ACC_ALL, ACC_N };
_Static_assert(HS_CMP_DECODE == HS_OP_COUNT * BITS_N && (int)ACC_N == (int)HS_CMP_N, "slots");

typedef struct acc {
    pairs v[ACC_N];
} acc;

static int bits_index(int bits)
{
    return bits == 8 ? 1 : bits == 4 ? 2 : bits == 3 ? 3 : 0;
}

static const int bits_of_index[BITS_N] = {16, 8, 4, 3};

static void acc_free(acc *a)
{
    for (int i = 0; i < ACC_N; i++) {
        free(a->v[i].p);
        free(a->v[i].m);
    }
    memset(a, 0, sizeof *a);
}

/* Predicts every row of one table.  A layer point is one qkv row's (tp,
 * bits, tokens) with every op of the layer measured there. */
static int accumulate(const predictor *f, const hs_ptable *t, const hs_model *m, const hs_gpu *g,
                      int attn, acc *a)
{
    for (size_t r = 0; r < t->n_dense; r++) {
        const hs_dense_row *d = &t->dense[r];
        double p = predict(f, d->op, m, g, d->tp, d->bits, d->tokens);
        if (p <= 0) continue; /* a kind the fitted model has nothing for */
        if (pairs_add(&a->v[d->op * BITS_N + bits_index(d->bits)], p, d->us) ||
            pairs_add(&a->v[ACC_ALL], p, d->us))
            return -1;
    }
    for (size_t r = 0; r < t->n_dense; r++) {
        const hs_dense_row *d = &t->dense[r];
        double lp = 0, lm = 0;
        int complete = 1;
        if (d->op != HS_OP_QKV) continue;
        for (int op = 0; op < HS_OP_COUNT; op++) {
            int c = layer_count(m, op);
            const hs_dense_row *hit;
            double p;
            if (!c) continue;
            hit = hs_ptable_dense_at(t, op, d->tp, d->bits, d->tokens);
            p = hit ? predict(f, op, m, g, d->tp, d->bits, d->tokens) : 0;
            if (p <= 0) { /* not measured there, or nothing to predict it with */
                complete = 0;
                break;
            }
            lm += c * hit->us;
            lp += c * p;
        }
        if (complete && pairs_add(&a->v[ACC_LAYER], lp, lm)) return -1;
    }
    for (int k = 0; attn && k < 2; k++)
        for (size_t r = 0; r < t->n_attn[k]; r++) {
            const hs_attn_row *d = &t->attn[k][r];
            double p = predict_attn(f, k, m, g, d->tp, d->x, d->y);
            if (p > 0 && pairs_add(&a->v[k == HS_ATTN_DECODE ? ACC_DEC : ACC_PRE], p, d->us)) return -1;
        }
    return 0;
}

/* Statistics of the pairs of keys [k0, k1). */
static int stat_keys(hs_fitstat *st, const acc *a, int k0, int k1)
{
    pairs v = {0};
    int rc = 0;
    for (int k = k0; !rc && k < k1; k++)
        for (int i = 0; !rc && i < a->v[k].n; i++) rc = pairs_add(&v, a->v[k].p[i], a->v[k].m[i]);
    if (!rc) stat_of(st, &v);
    free(v.p);
    free(v.m);
    return rc;
}

/* Predicts every row of the targets; fills per-op (all precisions pooled),
 * layer and pooled statistics. */
static int evaluate(const predictor *f, const cv_set *tg, hs_fitstat *op_st, hs_fitstat *layer_st,
                    hs_fitstat *all_st, hs_err *err)
{
    acc a;
    int rc = 0;
    memset(&a, 0, sizeof a);
    for (int i = 0; !rc && i < tg->n; i++) rc = accumulate(f, tg->t[i], &tg->m[i], &tg->g[i], 0, &a);
    for (int op = 0; !rc && op < HS_OP_COUNT; op++) rc = stat_keys(&op_st[op], &a, op * BITS_N, (op + 1) * BITS_N);
    if (!rc) rc = stat_keys(layer_st, &a, ACC_LAYER, ACC_LAYER + 1);
    if (!rc) rc = stat_keys(all_st, &a, ACC_ALL, ACC_ALL + 1);
    acc_free(&a);
    return rc ? hs_errf(err, HS_ENOMEM, "out of memory in cross-validation") : 0;
}

static int run_fit(hs_fit *f, const cv_set *tr, hs_err *err)
{
    hs_fit_input in[2];
    for (int i = 0; i < tr->n; i++) in[i] = (hs_fit_input){tr->t[i], &tr->m[i], &tr->g[i]};
    return hs_fit_run(f, in, tr->n, err);
}

/* Interpolation check: every other token point of each (op, tp) held out and
 * predicted from its neighbours. */
static int interp_holdout(const hs_ptable *t, FILE *out, hs_err *err)
{
    fprintf(out, "\nmeasured-table path, %s %s: interpolation over tokens with every other point held out\n",
            t->meta.gpu, t->meta.model);
    fprintf(out, "%-10s %6s %8s %8s\n", "op", "n", "med%", "p90%");
    for (int op = 0; op < HS_OP_COUNT; op++) {
        pairs v = {0};
        int rc = 0;
        for (size_t r = 0; r < t->n_dense;) {
            size_t e = r;
            int n = 0;
            double *x, *y;
            while (e < t->n_dense && t->dense[e].op == t->dense[r].op && t->dense[e].tp == t->dense[r].tp &&
                   t->dense[e].bits == t->dense[r].bits)
                e++;
            if (t->dense[r].op != op || e - r < 5) {
                r = e;
                continue;
            }
            x = malloc((e - r) * sizeof *x);
            y = malloc((e - r) * sizeof *y);
            if (!x || !y) rc = -1;
            for (size_t i = r; !rc && i < e; i += 2) {
                x[n] = t->dense[i].tokens;
                y[n++] = t->dense[i].us;
            }
            if (!rc) {
                hs_curve c;
                if ((rc = hs_curve_init(&c, x, y, n, err)) == 0) {
                    for (size_t i = r + 1; !rc && i + 1 < e; i += 2)
                        rc = pairs_add(&v, hs_curve_eval(&c, t->dense[i].tokens), t->dense[i].us);
                    hs_curve_free(&c);
                }
            }
            free(x);
            free(y);
            if (rc) break;
            r = e;
        }
        if (!rc && v.n) {
            hs_fitstat st;
            stat_of(&st, &v);
            fprintf(out, "%-10s %6d %8.2f %8.2f\n", hs_op_name(op), st.n, st.med_ape, st.p90_ape);
        }
        free(v.p);
        free(v.m);
        if (rc) return rc < 0 && rc != -1 ? rc : hs_errf(err, HS_ENOMEM, "interpolation check failed");
    }
    return 0;
}

static void attn_coef_report(const hs_ptable *t, FILE *out)
{
    fprintf(out, "\nmeasured-table path, %s %s: hot-path attention coefficients (linear; prefill weighted by time, see table.h)\n",
            t->meta.gpu, t->meta.model);
    for (int k = 0; k < 2; k++)
        for (int tp = 1; tp <= HS_MAX_TP; tp++) {
            double c[HS_ATTN_NCOEF];
            hs_fitstat st;
            hs_err e = {0};
            if (!hs_ptable_has_attn(t, k, tp) || hs_ptable_attn_coef5(t, k, tp, c, &st, &e)) continue;
            if (k)
                fprintf(out, "prefill  tp %d: %8.3f us + %.4g us * Q + %.4g us * X + %.4g us * P + %.4g us * N   n %d  med %.2f%%  p90 %.2f%%  max %.1f%%\n",
                        tp, c[0], c[1], c[2], c[3], c[HS_ATTN_TOK], st.n, st.med_ape, st.p90_ape, st.max_ape);
            else
                fprintf(out, "decode   tp %d: %8.3f us + %.4g us * B + %.4g us * C   n %d  med %.2f%%  p90 %.2f%%  max %.1f%%\n",
                        tp, c[0], c[1], c[2], st.n, st.med_ape, st.p90_ape, st.max_ape);
        }
}

int hs_perf_crossval_run(const char *vidur_dir, hs_crossval *res, FILE *out, hs_err *err)
{
    static const char *const exp_name[2] = {
        "A: fit Llama-2-7B A100 -> predict Llama-2-70B A100",
        "B: fit Llama-2-7B+70B A100 -> predict Llama-2-7B+70B A40",
    };
    cv_set a100_7 = {0}, a100_70 = {0}, a100_both = {0}, a40_both = {0};
    hs_crossval r;
    hs_fit fit[2];
    hs_perf_cfg dflt;
    predictor pf[2], roof;
    hs_fitstat rop[2][HS_OP_COUNT], rlayer[2], rall[2];
    int rc;
    memset(&r, 0, sizeof r);
    hs_perf_cfg_defaults(&dflt);
    roof = (predictor){NULL, &dflt};
    pf[0] = (predictor){&fit[0], NULL};
    pf[1] = (predictor){&fit[1], NULL};
    if ((rc = set_add(&a100_7, vidur_dir, "a100", "Llama-2-7b-hf", err)) ||
        (rc = set_add(&a100_70, vidur_dir, "a100", "Llama-2-70b-hf", err)) ||
        (rc = set_add(&a40_both, vidur_dir, "a40", "Llama-2-7b-hf", err)) ||
        (rc = set_add(&a40_both, vidur_dir, "a40", "Llama-2-70b-hf", err)))
        goto out;
    /* B trains on both A100 tables (borrowed, not owned: n reset below). */
    a100_both.t[0] = a100_7.t[0];  a100_both.m[0] = a100_7.m[0];  a100_both.g[0] = a100_7.g[0];
    a100_both.t[1] = a100_70.t[0]; a100_both.m[1] = a100_70.m[0]; a100_both.g[1] = a100_70.g[0];
    a100_both.n = 2;
    if ((rc = run_fit(&fit[0], &a100_7, err)) ||
        (rc = evaluate(&pf[0], &a100_70, r.op[0], &r.layer[0], &r.all[0], err)) ||
        (rc = run_fit(&fit[1], &a100_both, err)) ||
        (rc = evaluate(&pf[1], &a40_both, r.op[1], &r.layer[1], &r.all[1], err)) ||
        /* the default roofline, from datasheets alone, on the same targets */
        (rc = evaluate(&roof, &a100_70, rop[0], &rlayer[0], &rall[0], err)) ||
        (rc = evaluate(&roof, &a40_both, rop[1], &rlayer[1], &rall[1], err)))
        goto out;
    if (out) {
        fprintf(out, "hetsim perf crossval: fitted latency model on Vidur's published profiles (%s)\n", vidur_dir);
        fprintf(out, "absolute percentage error of predicted per-operator times, every row of the target tables\n\n");
        fprintf(out, "%-10s | %-32s | %-32s\n", "", "A: 7B A100 -> 70B A100", "B: A100 -> A40 (7B, 70B)");
        fprintf(out, "%-10s | %6s %12s %12s | %6s %12s %12s\n", "operator", "rows", "median %", "p90 %",
                "rows", "median %", "p90 %");
        for (int op = 0; op <= HS_OP_COUNT + 1; op++) {
            const hs_fitstat *s0, *s1;
            const char *name;
            if (op < HS_OP_COUNT) {
                s0 = &r.op[0][op];
                s1 = &r.op[1][op];
                name = hs_op_name(op);
                if (!s0->n && !s1->n) continue;
            } else if (op == HS_OP_COUNT) {
                s0 = &r.layer[0]; s1 = &r.layer[1]; name = "layer";
            } else {
                s0 = &r.all[0]; s1 = &r.all[1]; name = "overall";
            }
            fprintf(out, "%-10s | %6d %12.2f %12.2f | %6d %12.2f %12.2f\n", name, s0->n, s0->med_ape,
                    s0->p90_ape, s1->n, s1->med_ape, s1->p90_ape);
        }
        fprintf(out, "\n(layer: one decoder layer's dense ops summed per (tp, tokens); overall: all operator rows pooled)\n");
        fprintf(out, "\nfor comparison, the default roofline (datasheet FLOP/s and bandwidth, perf.* efficiencies, no fitting):\n");
        fprintf(out, "%-10s | %-32s | %-32s\n", "", "70B A100", "A40 (7B, 70B)");
        for (int op = 0; op <= HS_OP_COUNT + 1; op++) {
            const hs_fitstat *s0 = op < HS_OP_COUNT ? &rop[0][op] : op == HS_OP_COUNT ? &rlayer[0] : &rall[0];
            const hs_fitstat *s1 = op < HS_OP_COUNT ? &rop[1][op] : op == HS_OP_COUNT ? &rlayer[1] : &rall[1];
            const char *name = op < HS_OP_COUNT ? hs_op_name(op) : op == HS_OP_COUNT ? "layer" : "overall";
            if (!s0->n && !s1->n) continue;
            fprintf(out, "%-10s | %6d %12.2f %12.2f | %6d %12.2f %12.2f\n", name, s0->n, s0->med_ape,
                    s0->p90_ape, s1->n, s1->med_ape, s1->p90_ape);
        }
        for (int e = 0; e < 2; e++) {
            fprintf(out, "\nfitted parameters, %s (error on training rows)\n", exp_name[e]);
            hs_fit_print(&fit[e], out);
        }
        if ((rc = interp_holdout(a100_70.t[0], out, err))) goto out;
        attn_coef_report(a100_70.t[0], out);
    }
    if (res) *res = r;
out:
    a100_both.n = 0;
    set_free(&a100_7);
    set_free(&a100_70);
    set_free(&a40_both);
    return rc;
}

int hs_perf_crossval(const char *vidur_dir, FILE *out, hs_err *err)
{
    return hs_perf_crossval_run(vidur_dir, NULL, out, err);
}

/* ---- a measured table against the models ------------------------------------ */

/* Median of the signed error (pred / meas - 1), percent: the bias. */
static double bias_of(const pairs *v)
{
    double *e, b;
    if (!v->n || !(e = malloc((size_t)v->n * sizeof *e))) return 0;
    for (int i = 0; i < v->n; i++) e[i] = (v->p[i] / v->m[i] - 1.0) * 100.0;
    b = hs__percentile(e, v->n, 50);
    free(e);
    return b;
}

static void print_line(FILE *out, const char *name, const hs_compare *r, int slot)
{
    if (!r->st[0][slot].n) return;
    fprintf(out, "%-14s %6d", name, r->st[0][slot].n);
    for (int k = 0; k < r->n_pred; k++) {
        if (r->st[k][slot].n)
            fprintf(out, " | %8.2f %8.2f %+9.2f", r->st[k][slot].med_ape, r->st[k][slot].p90_ape, r->bias[k][slot]);
        else
            fprintf(out, " | %8s %8s %9s", "-", "-", "-");
    }
    fputc('\n', out);
}

/* ---- the roofline's prefill-attention knobs, refitted on a table ---------- */

typedef struct attn_refit {
    const hs_ptable *t;
    const hs_model *m;
    const hs_gpu *g;
    hs_perf_cfg cfg;          /* the other perf.* settings */
} attn_refit;

/* theta = logs of attn_eff, attn_knee, attn_query_keys */
static void refit_cfg(const attn_refit *c, const gsl_vector *th, hs_perf_cfg *cfg)
{
    double v[3];
    for (int i = 0; i < 3; i++) v[i] = exp(fmin(fmax(gsl_vector_get(th, (size_t)i), -40), 40));
    *cfg = c->cfg;
    cfg->attn_eff = fmin(v[0], 1.0);
    cfg->attn_knee = v[1];
    cfg->attn_query_keys = v[2];
}

static int refit_resid(const gsl_vector *th, void *vc, gsl_vector *f)
{
    const attn_refit *c = vc;
    const hs_attn_row *r = c->t->attn[HS_ATTN_PREFILL];
    hs_perf_cfg cfg;
    refit_cfg(c, th, &cfg);
    for (size_t i = 0; i < c->t->n_attn[HS_ATTN_PREFILL]; i++)
        gsl_vector_set(f, i, log(hs_roofline_attn_us(HS_ATTN_PREFILL, c->m, c->g, r[i].tp, 16, r[i].x, r[i].y, &cfg) /
                                 r[i].us));
    return GSL_SUCCESS;
}

/* Error of the roofline's prefill attention with cfg on the table's rows. */
static void refit_stat(const attn_refit *c, const hs_perf_cfg *cfg, hs_fitstat *st)
{
    pairs v = {0};
    const hs_attn_row *r = c->t->attn[HS_ATTN_PREFILL];
    for (size_t i = 0; i < c->t->n_attn[HS_ATTN_PREFILL]; i++)
        if (pairs_add(&v, hs_roofline_attn_us(HS_ATTN_PREFILL, c->m, c->g, r[i].tp, 16, r[i].x, r[i].y, cfg),
                      r[i].us))
            break;
    stat_of(st, &v);
    free(v.p);
    free(v.m);
}

/* Refits attn_eff, attn_knee and attn_query_keys on the table's prefill
 * rows (Levenberg-Marquardt on log time, finite-difference Jacobian, from
 * the defaults) and prints them beside the defaults' error: how the shipped
 * defaults were made, and what another GPU's table would give. */
static void attn_refit_report(const hs_ptable *t, const hs_model *m, const hs_gpu *g, FILE *out)
{
    size_t n = t->n_attn[HS_ATTN_PREFILL];
    attn_refit c;
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_fdf fdf;
    gsl_multifit_nlinear_workspace *w;
    gsl_vector *x;
    gsl_error_handler_t *old;
    hs_fitstat st0, st1;
    hs_perf_cfg fitted;
    int info;
    if (n < 3) return;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.m = m;
    c.g = g;
    hs_perf_cfg_defaults(&c.cfg);
    x = gsl_vector_alloc(3);
    w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, n, 3);
    if (!x || !w) goto out;
    gsl_vector_set(x, 0, log(c.cfg.attn_eff));
    gsl_vector_set(x, 1, log(c.cfg.attn_knee > 1 ? c.cfg.attn_knee : 1));
    gsl_vector_set(x, 2, log(c.cfg.attn_query_keys > 1 ? c.cfg.attn_query_keys : 1));
    fdf.f = refit_resid;
    fdf.df = NULL;
    fdf.fvv = NULL;
    fdf.n = n;
    fdf.p = 3;
    fdf.params = &c;
    old = gsl_set_error_handler_off();
    if (gsl_multifit_nlinear_init(x, &fdf, w) == GSL_SUCCESS) {
        gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 0.0, NULL, NULL, &info, w);
        refit_cfg(&c, gsl_multifit_nlinear_position(w), &fitted);
        refit_stat(&c, &c.cfg, &st0);
        refit_stat(&c, &fitted, &st1);
        fprintf(out, "\nroofline prefill attention refitted on these %zu rows (least squares on log time):\n", n);
        fprintf(out, "  defaults: attn_eff %.3f  attn_knee %.3g  attn_query_keys %.0f   median %.2f%%  p90 %.2f%%\n",
                c.cfg.attn_eff, c.cfg.attn_knee, c.cfg.attn_query_keys, st0.med_ape, st0.p90_ape);
        fprintf(out, "  refit:    attn_eff %.3f  attn_knee %.3g  attn_query_keys %.0f   median %.2f%%  p90 %.2f%%\n",
                fitted.attn_eff, fitted.attn_knee, fitted.attn_query_keys, st1.med_ape, st1.p90_ape);
    }
    gsl_set_error_handler(old);
out:
    gsl_vector_free(x);
    if (w) gsl_multifit_nlinear_free(w);
}

/* How well the table's own attention rows are described by the closed
 * forms: the fits planners use (decode linear, prefill 5-term) and, when
 * meta.json says how the decode kernel splits, the wave model (perf.h
 * hs_dec_wave).  Where one GPU type times a stage the engine reads the
 * rows themselves (the decode grid or waves, the prefill rows). */
static void attn_self_report(const hs_ptable *t, const hs_model *m, FILE *out)
{
    int first = 1;
    for (int tp = 1; tp <= HS_MAX_TP; tp++) {
        double c5[HS_ATTN_NCOEF], coef[4];
        hs_fitstat st, wst;
        hs_dec_wave w;
        hs_err e = {0};
        int pre = hs_ptable_has_attn(t, HS_ATTN_PREFILL, tp), dec = hs_ptable_has_attn(t, HS_ATTN_DECODE, tp);
        if ((!pre && !dec) || m->heads % tp) continue;
        if (first) fprintf(out, "\nattention from the table itself (error on its rows):\n");
        first = 0;
        /* a fit that cannot be made is reported, not fatal: the rest of
         * the comparison stands */
        if (pre && hs_ptable_attn_coef5(t, HS_ATTN_PREFILL, tp, c5, &st, &e))
            fprintf(out, "  tp %d: prefill, no 5-term fit: %s\n", tp, e.msg);
        else if (pre)
            fprintf(out, "  tp %d: prefill 5-term fit median %.2f%%  p90 %.2f%%  max %.2f%% (%d rows)\n", tp,
                    st.med_ape, st.p90_ape, st.max_ape, st.n);
        if (!dec) continue;
        if (hs_ptable_attn_coef(t, HS_ATTN_DECODE, tp, coef, &st, &e)) {
            fprintf(out, "  tp %d: decode, no linear fit: %s\n", tp, e.msg);
            continue;
        }
        fprintf(out, "  tp %d: decode linear fit median %.2f%%  p90 %.2f%%  max %.2f%% (%d rows)\n", tp,
                st.med_ape, st.p90_ape, st.max_ape, st.n);
        if (hs_ptable_decode_wave(t, tp, m->heads / tp, &w, &wst, &e))
            fprintf(out, "        no wave fit: %s\n", e.msg);
        else if (w.sms)
            fprintf(out, "        waves (%d SMs x %d blocks): median %.2f%%  p90 %.2f%%  max %.2f%%;"
                         " c0 %.2f us, block %.3f us + %.4f us/key, merge %.2f us per round\n",
                    w.sms, w.resident, wst.med_ape, wst.p90_ape, wst.max_ape, w.c0, w.a, w.b, w.cm);
    }
}

int hs_perf_compare(const char *dir, const hs_compare_opts *o, hs_compare *res, FILE *out,
                    hs_err *err)
{
    hs_ptable *t = NULL;
    hs_model m;
    hs_gpu g, groof;
    hs_fit_data d = {0};
    hs_fit fit;
    hs_fit_input *in = NULL;
    hs_perf_cfg dflt;
    predictor pr[2];
    acc a[2];
    hs_compare r;
    int rc, n_pred = 1, n_in = 0;
    memset(a, 0, sizeof a);
    memset(&r, 0, sizeof r);
    if (res) memset(res, 0, sizeof *res);
    if ((rc = hs_ptable_read(&t, dir, err))) return rc;
    if ((rc = hs_model_find(&m, t->meta.model, err)) || (rc = hs_gpu_find(&g, t->meta.gpu, err))) {
        hs_err_prefix(err, "%s/meta.json: ", dir);
        goto out;
    }
    hs_perf_cfg_defaults(&dflt);
    groof = g;
    /* Given ceilings are rates reached (a large GEMM, a large copy): the
     * efficiency factors that discount the datasheet for them become 1. */
    if (o && o->tflops > 0) {
        /* attn_eff is a fraction of peak: keep attention's ratio to what
         * GEMMs reach */
        groof.flops16 = o->tflops * 1e12;
        dflt.attn_eff /= dflt.gemm_eff;
        dflt.gemm_eff = 1;
    }
    if (o && o->gbs > 0) {
        groof.mem_bw = o->gbs * 1e9;
        dflt.mem_eff = 1;
    }
    pr[0] = (predictor){NULL, &dflt};
    if (o && o->fit_dirs && *o->fit_dirs) {
        /* Tables of the target's own GPU are left out: the column says how
         * the model predicts a GPU it has never measured.  A GPU on its chip
         * (same_chip_as) stays in: pass folders without it for a new chip,
         * or with it alone for the same-chip rule (tools/bench-fidelity). */
        if ((rc = hs_fit_data_load(&d, o->fit_dirs, err))) goto out;
        if (!d.n) {
            rc = hs_errf(err, HS_ENOTFOUND, "--fit %s: no measured tables (<gpu>/<model>/meta.json)",
                         o->fit_dirs);
            goto out;
        }
        if (!(in = calloc((size_t)d.n, sizeof *in))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < d.n; i++)
            if (strcmp(d.gpus[i].name, g.name)) in[n_in++] = d.in[i];
        if (!n_in) {
            rc = hs_errf(err, HS_ENOTFOUND, "--fit %s: no table of a GPU other than %s to fit on",
                         o->fit_dirs, g.name);
            goto out;
        }
        if ((rc = hs_fit_run(&fit, in, n_in, err))) goto out;
        pr[1] = (predictor){&fit, NULL};
        n_pred = 2;
    }
    for (int k = 0; k < n_pred; k++)
        if (accumulate(&pr[k], t, &m, k ? &g : &groof, 1, &a[k])) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory comparing %s", dir);
            goto out;
        }
    r.n_pred = n_pred;
    for (int k = 0; k < n_pred; k++)
        for (int slot = 0; slot < HS_CMP_N; slot++) {
            stat_of(&r.st[k][slot], &a[k].v[slot]);
            r.bias[k][slot] = bias_of(&a[k].v[slot]);
        }
    if (res) *res = r;
    if (!out) goto out;
    fprintf(out, "hetsim perf compare: %s (%s on %s, backend %s, %s)\n", dir, t->meta.model, t->meta.gpu,
            t->meta.backend, t->meta.dtype);
    fprintf(out, "rows: %zu dense, %zu decode attention, %zu prefill attention\n", t->n_dense,
            t->n_attn[HS_ATTN_DECODE], t->n_attn[HS_ATTN_PREFILL]);
    fprintf(out, "roofline: %s %.1f TFLOP/s and %.0f GB/s with the perf.* defaults (gemm_eff %.2f, mem_eff %.2f, attn_eff %.2f, launch %.1f us)\n",
            (o && (o->tflops > 0 || o->gbs > 0)) ? "given ceilings" : "datasheet", groof.flops16 / 1e12,
            groof.mem_bw / 1e9, dflt.gemm_eff, dflt.mem_eff, dflt.attn_eff, dflt.launch_us);
    if (n_pred == 2) {
        fprintf(out, "fitted: trained on %d table%s of other GPUs:", n_in, n_in == 1 ? "" : "s");
        for (int i = 0; i < n_in; i++) fprintf(out, " %s/%s", in[i].g->name, in[i].m->name);
        fputc('\n', out);
    }
    fprintf(out, "error per row: median and p90 of |pred/meas - 1|, and bias = median of (pred/meas - 1), percent\n\n");
    fprintf(out, "%-14s %6s | %-27s", "", "", "roofline");
    if (n_pred == 2) fprintf(out, " | %-27s", "fitted");
    fprintf(out, "\n%-14s %6s", "row", "n");
    for (int k = 0; k < n_pred; k++) fprintf(out, " | %8s %8s %9s", "median%", "p90%", "bias%");
    fputc('\n', out);
    for (int op = 0; op < HS_OP_COUNT; op++)
        for (int b = 0; b < BITS_N; b++) {
            char name[32];
            if (b) snprintf(name, sizeof name, "%s/int%d", hs_op_name(op), bits_of_index[b]);
            else snprintf(name, sizeof name, "%s", hs_op_name(op));
            print_line(out, name, &r, op * BITS_N + b);
        }
    print_line(out, "attn_decode", &r, HS_CMP_DECODE);
    print_line(out, "attn_prefill", &r, HS_CMP_PREFILL);
    print_line(out, "layer", &r, HS_CMP_LAYER);
    print_line(out, "dense pooled", &r, HS_CMP_ALL);
    fprintf(out, "\n(layer: qkv + rope + attn_out + mlp_up + act + mlp_down + 2 norm + 2 add at each measured (tp, bits, tokens))\n");
    if (!(o && (o->tflops > 0 || o->gbs > 0))) attn_refit_report(t, &m, &g, out);
    attn_self_report(t, &m, out);
out:
    for (int k = 0; k < 2; k++) acc_free(&a[k]);
    free(in);
    hs_fit_data_free(&d);
    hs_ptable_destroy(t);
    return rc;
}

/* ---- the shipped calibration (calib.h) -------------------------------------- */

/* Fits on the inputs whose GPU is `gpu` (keep 1) or, with keep 0, is not on
 * its chip (a fold that leaves the H100 out leaves the H200 out too: the same
 * chip would be no transfer), and whose index is not `skip`;
 * f->n_inputs == 0 when there is nothing to fit on. */
static int fit_subset(hs_fit *f, const hs_fit_data *d, const char *gpu, int keep, int skip,
                      hs_err *err)
{
    hs_fit_input *in = malloc((size_t)(d->n ? d->n : 1) * sizeof *in);
    const char *chip = gpu;
    int n = 0, rc = 0;
    memset(f, 0, sizeof *f);
    if (!in) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; gpu && i < d->n; i++)
        if (!strcmp(d->in[i].g->name, gpu)) chip = hs_gpu_chip(d->in[i].g);
    for (int i = 0; i < d->n; i++) {
        int use = !gpu || (keep ? !strcmp(d->in[i].g->name, gpu) : !!strcmp(hs_gpu_chip(d->in[i].g), chip));
        if (i != skip && use) in[n++] = d->in[i];
    }
    if (n) rc = hs_fit_run(f, in, n, err);
    free(in);
    return rc;
}

/* Statistics of an accumulation into an entry's cv and, per op, into
 * op_st (op rows pooled over precisions). */
static int cv_stats(const acc *a, hs_calib_cv *cv, hs_fitstat *op_st, double *op_bias)
{
    hs_fitstat st;
    pairs att = {0};
    int rc = stat_keys(&st, a, ACC_LAYER, ACC_LAYER + 1);
    cv->fold_med = cv->fold_lo = cv->fold_hi = -1; /* the transfer entry sets them */
    cv->folds = 0;
    cv->layer_med = st.n ? st.med_ape : -1;
    cv->layer_p90 = st.p90_ape;
    cv->n = st.n;
    cv->layer_bias = bias_of(&a->v[ACC_LAYER]);
    for (int k = ACC_DEC; !rc && k <= ACC_PRE; k++)
        for (int i = 0; !rc && i < a->v[k].n; i++) rc = pairs_add(&att, a->v[k].p[i], a->v[k].m[i]);
    if (!rc) {
        stat_of(&st, &att);
        cv->attn_med = st.n ? st.med_ape : -1;
    }
    free(att.p);
    free(att.m);
    for (int op = 0; !rc && op < HS_OP_COUNT; op++) {
        pairs v = {0};
        for (int k = op * BITS_N; !rc && k < (op + 1) * BITS_N; k++)
            for (int i = 0; !rc && i < a->v[k].n; i++) rc = pairs_add(&v, a->v[k].p[i], a->v[k].m[i]);
        if (!rc) {
            stat_of(&op_st[op], &v);
            op_bias[op] = bias_of(&v);
        }
        free(v.p);
        free(v.m);
    }
    return rc;
}

/* Median error of an op's rows measured at min_us or more (all
 * precisions); st->n == 0 when none, -1 out of memory. */
static int op_stat_above(const acc *a, int op, double min_us, hs_fitstat *st)
{
    pairs v = {0};
    int rc = 0;
    for (int k = op * BITS_N; !rc && k < (op + 1) * BITS_N; k++)
        for (int i = 0; !rc && i < a->v[k].n; i++)
            if (a->v[k].m[i] >= min_us) rc = pairs_add(&v, a->v[k].p[i], a->v[k].m[i]);
    if (!rc) stat_of(st, &v);
    free(v.p);
    free(v.m);
    return rc;
}

/* Tables give times to 1 us (Vidur's H100 rows) or 0.5 us: a row of a few
 * microseconds is off by 10% or more before any model is.  So an op with
 * rows under 10 us gets a second median, over the rows of 10 us or more. */
#define CV_PRECISE_US 10.0

static void cv_print(FILE *log, const char *what, const hs_calib_cv *cv, const hs_fitstat *op_st,
                     const double *op_bias, const acc *a)
{
    if (!log) return;
    fprintf(log, "  %s:\n", what);
    for (int op = 0; op < HS_OP_COUNT; op++) {
        hs_fitstat big;
        if (!op_st[op].n) continue;
        fprintf(log, "    %-13s median %6.1f%%  p90 %6.1f%%  bias %+6.1f%%  (%d rows", hs_op_name(op),
                op_st[op].med_ape, op_st[op].p90_ape, op_bias[op], op_st[op].n);
        if (op_stat_above(a, op, CV_PRECISE_US, &big) == 0 && big.n && big.n < op_st[op].n)
            fprintf(log, "; %d of %.0f+ us: %.1f%%", big.n, CV_PRECISE_US, big.med_ape);
        fprintf(log, ")\n");
    }
    for (int k = ACC_DEC; k <= ACC_PRE; k++)
        if (a->v[k].n) {
            hs_fitstat st;
            stat_of(&st, &a->v[k]);
            fprintf(log, "    %-13s median %6.1f%%  p90 %6.1f%%  bias %+6.1f%%  (%d rows)\n",
                    k == ACC_DEC ? "attn_decode" : "attn_prefill", st.med_ape, st.p90_ape,
                    bias_of(&a->v[k]), st.n);
        }
    if (cv->n)
        fprintf(log, "    %-13s median %6.1f%%  p90 %6.1f%%  bias %+6.1f%%  (%d points)\n", "layer",
                cv->layer_med, cv->layer_p90, cv->layer_bias, cv->n);
}

int hs_calib_build(hs_calib *c, const char *dirs, FILE *log, hs_err *err)
{
    hs_fit_data d;
    char gpus[HS_FIT_MAX_GPUS][32];
    int ng = 0, rc;
    hs_fit *f = NULL;
    acc lomo;                 /* leave-one-model-out rows of every GPU */
    memset(c, 0, sizeof *c);
    memset(&lomo, 0, sizeof lomo);
    if ((rc = hs_fit_data_load(&d, dirs, err))) return rc;
    if (!d.n) return hs_errf(err, HS_ENOTFOUND, "%s: no measured tables (<gpu>/<model>/meta.json)", dirs);
    if (!(f = malloc(sizeof *f))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < d.n; i++) {
        int seen = 0;
        for (int j = 0; j < ng; j++) seen |= !strcmp(gpus[j], d.in[i].g->name);
        if (!seen && ng == HS_FIT_MAX_GPUS) {
            rc = hs_errf(err, HS_ERANGE, "%s: more than %d GPU types of measured tables (calibration holds %d)",
                         d.tables[i]->dir, HS_FIT_MAX_GPUS, HS_FIT_MAX_GPUS);
            goto out;
        }
        if (!seen) snprintf(gpus[ng++], sizeof gpus[0], "%s", d.in[i].g->name);
    }
    snprintf(c->source, sizeof c->source, "hetsim perf calibrate on %d measured tables of %d GPU types", d.n, ng);
    /* per GPU: fit on its tables; leave one model out among them */
    for (int g = 0; g < ng && !rc; g++) {
        hs_calib_entry *e = &c->e[c->n++];
        hs_fitstat op_st[HS_OP_COUNT];
        double op_bias[HS_OP_COUNT];
        acc a;
        char what[96];
        memset(&a, 0, sizeof a);
        snprintf(e->gpu, sizeof e->gpu, "%s", gpus[g]);
        for (int i = 0; i < d.n; i++)
            if (!strcmp(d.in[i].g->name, gpus[g])) {
                size_t len = strlen(e->models);
                snprintf(e->models + len, sizeof e->models - len, "%s%s", e->n_tables++ ? "," : "",
                         d.in[i].m->name);
            }
        if ((rc = fit_subset(&e->fit, &d, gpus[g], 1, -1, err))) break;
        for (int i = 0; !rc && e->n_tables > 1 && i < d.n; i++) {
            predictor p = {f, NULL};
            if (strcmp(d.in[i].g->name, gpus[g])) continue;
            if ((rc = fit_subset(f, &d, gpus[g], 1, i, err))) break;
            if (accumulate(&p, d.tables[i], d.in[i].m, d.in[i].g, 1, &a) ||
                accumulate(&p, d.tables[i], d.in[i].m, d.in[i].g, 1, &lomo))
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
        }
        if (!rc && cv_stats(&a, &e->cv, op_st, op_bias)) rc = hs_errf(err, HS_ENOMEM, "out of memory");
        snprintf(what, sizeof what, "%s: fitted on %d table%s, leave-one-model-out", e->gpu, e->n_tables,
                 e->n_tables == 1 ? "" : "s");
        if (!rc) cv_print(log, what, &e->cv, op_st, op_bias, &a);
        acc_free(&a);
    }
    /* every GPU's held-out models together, rows weighted as in the
     * leave-one-GPU-out figure below (not stored: each GPU's own entry
     * carries its figure) */
    if (!rc && log && lomo.v[ACC_ALL].n) {
        hs_calib_cv cv;
        hs_fitstat op_st[HS_OP_COUNT];
        double op_bias[HS_OP_COUNT];
        if (cv_stats(&lomo, &cv, op_st, op_bias)) rc = hs_errf(err, HS_ENOMEM, "out of memory");
        else cv_print(log, "every GPU together: leave-one-model-out", &cv, op_st, op_bias, &lomo);
    }
    /* transfer: fit on everything; leave one GPU type out */
    if (!rc) {
        hs_calib_entry *e = &c->e[c->n++];
        hs_fitstat op_st[HS_OP_COUNT];
        double op_bias[HS_OP_COUNT];
        acc a;
        memset(&a, 0, sizeof a);
        e->n_tables = d.n;
        snprintf(e->models, sizeof e->models, "all");
        double fold[HS_FIT_MAX_GPUS];
        int nfold = 0;
        rc = fit_subset(&e->fit, &d, NULL, 1, -1, err);
        for (int g = 0; !rc && ng > 1 && g < ng; g++) {
            predictor p = {f, NULL};
            acc one;
            memset(&one, 0, sizeof one);
            if ((rc = fit_subset(f, &d, gpus[g], 0, -1, err))) break;
            if (!f->n_inputs) {
                /* every other table is on the held-out GPU's chip */
                if (log) fprintf(log, "  transfer, %s held out: no table of another chip to fit on\n", gpus[g]);
                continue;
            }
            for (int i = 0; i < d.n && !rc; i++)
                if (!strcmp(d.in[i].g->name, gpus[g]) &&
                    (accumulate(&p, d.tables[i], d.in[i].m, d.in[i].g, 1, &a) ||
                     accumulate(&p, d.tables[i], d.in[i].m, d.in[i].g, 1, &one)))
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
            /* each fold alone: how far the transfer lands on that GPU */
            if (!rc) {
                hs_calib_cv cv;
                hs_fitstat ost[HS_OP_COUNT];
                double ob[HS_OP_COUNT];
                if (cv_stats(&one, &cv, ost, ob)) rc = hs_errf(err, HS_ENOMEM, "out of memory");
                else if (cv.n) fold[nfold++] = cv.layer_med; /* ng <= HS_FIT_MAX_GPUS */
                if (!rc && log && cv.n) {
                    fprintf(log, "  transfer, %s held out: layer median %.1f%%  p90 %.1f%%  bias %+.1f%%  (%d points)\n",
                            gpus[g], cv.layer_med, cv.layer_p90, cv.layer_bias, cv.n);
                    /* the memory-bound ops are the ones that transfer worst */
                    fprintf(log, "    memory-bound ops, median (bias) %%:");
                    for (int op = 0; op < HS_OP_COUNT; op++)
                        if (f->k[op].memory_only && ost[op].n)
                            fprintf(log, " %s %.1f (%+.1f)", hs_op_name(op), ost[op].med_ape, ob[op]);
                    fprintf(log, "\n");
                    fprintf(log, "    GEMMs, median (bias) %%:");
                    for (int op = 0; op < HS_OP_COUNT; op++)
                        if (!f->k[op].memory_only && ost[op].n)
                            fprintf(log, " %s %.1f (%+.1f)", hs_op_name(op), ost[op].med_ape, ob[op]);
                    fprintf(log, "\n");
                } else if (!rc && log) {
                    /* tables of some ops only (the H200's GEMMs): no whole layer */
                    fprintf(log, "  transfer, %s held out: no whole layer measured; ops, median (bias) %%:", gpus[g]);
                    for (int op = 0; op < HS_OP_COUNT; op++)
                        if (ost[op].n) fprintf(log, " %s %.1f (%+.1f)", hs_op_name(op), ost[op].med_ape, ob[op]);
                    fprintf(log, "\n");
                }
            }
            acc_free(&one);
        }
        if (!rc && cv_stats(&a, &e->cv, op_st, op_bias)) rc = hs_errf(err, HS_ENOMEM, "out of memory");
        if (!rc && nfold) {
            e->cv.folds = nfold;
            e->cv.fold_med = hs__percentile(fold, nfold, 50); /* sorts fold */
            e->cv.fold_lo = fold[0];
            e->cv.fold_hi = fold[nfold - 1];
        }
        if (!rc) cv_print(log, "transfer (all tables): leave-one-GPU-out", &e->cv, op_st, op_bias, &a);
        if (!rc && log && nfold)
            fprintf(log, "    %-13s median %6.1f%% over the %d GPUs held out, %.1f-%.1f%%: what one new GPU should expect\n",
                    "layer, by GPU", e->cv.fold_med, nfold, e->cv.fold_lo, e->cv.fold_hi);
        acc_free(&a);
    }
    /* the shipped fits: did every robust fit settle (fitted.c robust_pass)? */
    if (!rc && log) {
        int fits = 0, unsettled = 0;
        for (int i = 0; i < c->n; i++)
            for (int k = 0; k < HS_FK_COUNT; k++) {
                fits += c->e[i].fit.k[k].rows > 0;
                if (c->e[i].fit.k[k].unsettled) {
                    unsettled++;
                    fprintf(log, "  warning: %s %s: the robust fit stopped at its pass cap, still moving\n",
                            c->e[i].gpu[0] ? c->e[i].gpu : "transfer", hs_fit_kind_name(k));
                }
            }
        fprintf(log, "  %d fitted kinds in the entries, %d stopped at the robust fit's pass cap\n", fits, unsettled);
    }
out:
    acc_free(&lomo);
    free(f);
    hs_fit_data_free(&d);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}
