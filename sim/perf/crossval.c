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

static int layer_count(int op)
{
    switch (op) {
    case HS_OP_NORM: case HS_OP_ADD: return 2;
    case HS_OP_EMB: case HS_OP_LM_HEAD: return 0;
    default: return 1;
    }
}

/* A per-operator predictor: the fitted model, or the datasheet roofline. */
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

/* Predicts every row of the targets; fills per-op, layer and pooled
 * statistics. */
static int evaluate(const predictor *f, const cv_set *tg, hs_fitstat *op_st, hs_fitstat *layer_st,
                    hs_fitstat *all_st, hs_err *err)
{
    pairs per[HS_OP_COUNT], layer = {0}, all = {0};
    int rc = 0;
    memset(per, 0, sizeof per);
    for (int i = 0; !rc && i < tg->n; i++) {
        const hs_ptable *t = tg->t[i];
        /* rows are sorted by (op, tp, bits, tokens); a layer point is the
         * same (tp, tokens) across ops */
        for (size_t r = 0; !rc && r < t->n_dense; r++) {
            const hs_dense_row *d = &t->dense[r];
            double p = predict(f, d->op, &tg->m[i], &tg->g[i], d->tp, d->bits, d->tokens);
            if (pairs_add(&per[d->op], p, d->us) || pairs_add(&all, p, d->us)) rc = -1;
        }
        for (size_t r = 0; !rc && r < t->n_dense; r++) {
            const hs_dense_row *d = &t->dense[r];
            double lp = 0, lm = 0;
            int complete = 1;
            if (d->op != HS_OP_QKV) continue; /* one layer point per qkv row */
            for (int op = 0; op < HS_OP_COUNT; op++) {
                int c = layer_count(op);
                const hs_dense_row *hit = NULL;
                if (!c) continue;
                for (size_t q = 0; q < t->n_dense && !hit; q++)
                    if (t->dense[q].op == op && t->dense[q].tp == d->tp && t->dense[q].tokens == d->tokens)
                        hit = &t->dense[q];
                if (!hit) {
                    complete = 0;
                    break;
                }
                lm += c * hit->us;
                lp += c * predict(f, op, &tg->m[i], &tg->g[i], d->tp, d->bits, d->tokens);
            }
            if (complete && pairs_add(&layer, lp, lm)) rc = -1;
        }
    }
    if (rc) rc = hs_errf(err, HS_ENOMEM, "out of memory in cross-validation");
    for (int op = 0; op < HS_OP_COUNT; op++) {
        stat_of(&op_st[op], &per[op]);
        free(per[op].p);
        free(per[op].m);
    }
    stat_of(layer_st, &layer);
    stat_of(all_st, &all);
    free(layer.p); free(layer.m); free(all.p); free(all.m);
    return rc;
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
    fprintf(out, "\nmeasured-table path, %s %s: hot-path attention coefficients (linear, relative least squares)\n",
            t->meta.gpu, t->meta.model);
    for (int k = 0; k < 2; k++)
        for (int tp = 1; tp <= HS_MAX_TP; tp++) {
            double c[4];
            hs_fitstat st;
            hs_err e = {0};
            if (!hs_ptable_has_attn(t, k, tp) || hs_ptable_attn_coef(t, k, tp, c, &st, &e)) continue;
            if (k)
                fprintf(out, "prefill  tp %d: %8.3f us + %.4g us * Q + %.4g us * X + %.4g us * P   n %d  med %.2f%%  p90 %.2f%%  max %.1f%%\n",
                        tp, c[0], c[1], c[2], c[3], st.n, st.med_ape, st.p90_ape, st.max_ape);
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
