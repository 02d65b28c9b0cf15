/* exegpt_round.c - the ExeGPT estimator's length-distribution math, free of
 * hardware (papers/exegpt.txt Sec. 6; see exegpt.h and exegpt_int.h):
 *   hs_exegpt_dist_*             the discrete length distributions: built
 *                                from a workload's, samples or pairs; mean,
 *                                quantile, free;
 *   P_D(U | S), P_D(U), B_D      completion within a decoding phase;
 *   hs_exegpt_rra_round          the expected workload of one RRA round
 *                                (PAPER and STEADY counts, contexts);
 *   hs__exegpt_survival          P(D >= x | D >= 1), fixed per estimator;
 *   hs__exegpt_p99_with_wait     the p99 of a latency f(D) plus a uniform
 *                                wait (SLA (a));
 *   hs__exegpt_emax              E[max of b draws] (DSI's padding).
 *
 * Invariants (asserted where relied on):
 *   - a distribution's p[] is finite, in [0, 1] and sums to 1 within
 *     HS__EXEGPT_PTOL (exegpt.h), so P_D(U) sums to at most 1 (+ PTOL);
 *   - the survival is finite, >= 0 and non-increasing in x;
 *   - a round's batch b(u) and context ctx(u) are finite and >= 0 (PAPER's
 *     rounding dust after the last completion is cut to 0), and so are
 *     its joiners, decode steps and peak context;
 *   - a latency f(D) handed to the p99 is finite, >= 0 and non-decreasing
 *     in D (the no-wait p99 reads it at the 0.99 quantile), and the CDF of
 *     W + f(D) stays in [0, 1].
 * Deterministic: fixed loop orders, 60-step bisection. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/exegpt_int.h"

/* ---- length distributions (the planner's inputs; here, beside the math on
 * them, so that the context, exegpt_ctx.c, needs nothing from the planner) */

static int dist_alloc(hs_exegpt_dist *d, int32_t max, hs_err *err)
{
    memset(d, 0, sizeof *d);
    if (max < 0 || max > HS_EXEGPT_MAX_LEN)
        return hs_errf(err, HS_ERANGE, "length distribution: max length %d (0..%d)", max,
                       HS_EXEGPT_MAX_LEN);
    d->p = calloc((size_t)max + 1, sizeof *d->p);
    if (!d->p) return hs_errf(err, HS_ENOMEM, "out of memory (length distribution)");
    d->max = max;
    return 0;
}

/* Normalises and trims trailing zeros; HS_EINVAL when there is no mass. */
static int dist_finish(hs_exegpt_dist *d, hs_err *err)
{
    double s = 0;
    for (int32_t i = 0; i <= d->max; i++) s += d->p[i];
    if (!(s > 0) || !isfinite(s)) {
        hs_exegpt_dist_free(d);
        return hs_errf(err, HS_EINVAL, "length distribution: no probability mass");
    }
    for (int32_t i = 0; i <= d->max; i++) d->p[i] /= s;
    while (d->max > 0 && d->p[d->max] == 0) d->max--;
    return 0;
}

#define SQRT2 1.41421356237309504880

/* P(a <= Z < b) for a standard normal, accurate in both tails. */
static double norm_mass(double a, double b)
{
    if (a >= 0) return 0.5 * (erfc(a / SQRT2) - erfc(b / SQRT2));
    if (b <= 0) return 0.5 * (erfc(-b / SQRT2) - erfc(-a / SQRT2));
    return 1 - 0.5 * (erfc(-a / SQRT2) + erfc(b / SQRT2));
}

int hs_exegpt_dist_from_lendist(hs_exegpt_dist *d, const hs_lendist *ld, hs_err *err)
{
    double lo, hi;
    int rc;
    memset(d, 0, sizeof *d);
    if (!strcmp(ld->kind, "fixed")) {
        double v = fmax(1, round(ld->mean));
        if (!(v <= HS_EXEGPT_MAX_LEN))
            return hs_errf(err, HS_ERANGE, "length distribution: fixed length %g too large", ld->mean);
        if ((rc = dist_alloc(d, (int32_t)v, err))) return rc;
        d->p[(int32_t)v] = 1;
        return 0;
    }
    if (!strcmp(ld->kind, "trace"))
        return hs_errf(err, HS_EUNSUPPORTED,
                       "length distribution: kind trace: build it from samples instead");
    lo = fmax(1, ceil(ld->min));
    hi = floor(ld->max);
    if (!(hi >= lo) || !(hi <= HS_EXEGPT_MAX_LEN))
        return hs_errf(err, HS_ERANGE, "length distribution: bounds [%g, %g] hold no length in 1..%d",
                       ld->min, ld->max, HS_EXEGPT_MAX_LEN);
    if ((rc = dist_alloc(d, (int32_t)hi, err))) return rc;
    if (!strcmp(ld->kind, "uniform")) {
        for (int32_t s = (int32_t)lo; s <= (int32_t)hi; s++) d->p[s] = 1;
    } else if (!strcmp(ld->kind, "normal")) {
        if (!(ld->std > 0)) {
            d->p[(int32_t)fmin(hi, fmax(lo, round(ld->mean)))] = 1;
        } else {
            for (int32_t s = (int32_t)lo; s <= (int32_t)hi; s++)
                d->p[s] = norm_mass((s - 0.5 - ld->mean) / ld->std, (s + 0.5 - ld->mean) / ld->std);
            /* All mass far outside the bounds: the generator ends up clamping. */
            double sum = 0;
            for (int32_t s = (int32_t)lo; s <= (int32_t)hi; s++) sum += d->p[s];
            if (!(sum > 1e-300)) d->p[ld->mean < lo ? (int32_t)lo : (int32_t)hi] = 1;
        }
    } else if (!strcmp(ld->kind, "lognormal")) {
        double cv, sg, mu;
        if (!(ld->mean > 0) || !(ld->std >= 0)) {
            hs_exegpt_dist_free(d);
            return hs_errf(err, HS_ERANGE, "length distribution: lognormal needs mean > 0, std >= 0");
        }
        cv = ld->std / ld->mean;
        sg = sqrt(log1p(cv * cv));
        mu = log(ld->mean) - sg * sg / 2;
        if (sg == 0) {
            d->p[(int32_t)fmin(hi, fmax(lo, round(ld->mean)))] = 1;
        } else {
            for (int32_t s = (int32_t)lo; s <= (int32_t)hi; s++) {
                /* The generator clamps: x < lo + .5 -> lo, x >= hi - .5 -> hi. */
                double a = s == (int32_t)lo ? -INFINITY : (log(s - 0.5) - mu) / sg;
                double b = s == (int32_t)hi ? INFINITY : (log(s + 0.5) - mu) / sg;
                d->p[s] = norm_mass(a, b);
            }
        }
    } else {
        hs_exegpt_dist_free(d);
        return hs_errf(err, HS_EINVAL, "length distribution: unknown kind \"%s\"", ld->kind);
    }
    return dist_finish(d, err);
}

int hs_exegpt_dist_from_samples(hs_exegpt_dist *d, const int32_t *len, int64_t n, hs_err *err)
{
    int32_t max = 0;
    int rc;
    memset(d, 0, sizeof *d);
    if (n < 1) return hs_errf(err, HS_EINVAL, "length distribution: no samples");
    for (int64_t i = 0; i < n; i++) {
        if (len[i] < 0 || len[i] > HS_EXEGPT_MAX_LEN)
            return hs_errf(err, HS_ERANGE, "length distribution: sample %lld is %d tokens",
                           (long long)i, len[i]);
        if (len[i] > max) max = len[i];
    }
    if ((rc = dist_alloc(d, max, err))) return rc;
    for (int64_t i = 0; i < n; i++) d->p[len[i]] += 1;
    return dist_finish(d, err);
}

int hs_exegpt_dist_from_pairs(hs_exegpt_dist *d, const int32_t *len, const double *w, int n,
                              hs_err *err)
{
    int32_t max = 0;
    int rc;
    memset(d, 0, sizeof *d);
    if (n < 1) return hs_errf(err, HS_EINVAL, "length distribution: no lengths");
    for (int i = 0; i < n; i++) {
        if (len[i] < 0 || len[i] > HS_EXEGPT_MAX_LEN || !(w[i] >= 0) || !isfinite(w[i]))
            return hs_errf(err, HS_ERANGE, "length distribution: pair %d (%d, %g) out of range",
                           i, len[i], w[i]);
        if (len[i] > max) max = len[i];
    }
    if ((rc = dist_alloc(d, max, err))) return rc;
    for (int i = 0; i < n; i++) d->p[len[i]] += w[i];
    return dist_finish(d, err);
}

void hs_exegpt_dist_free(hs_exegpt_dist *d)
{
    if (!d) return;
    free(d->p);
    d->p = NULL;
    d->max = 0;
}

double hs_exegpt_dist_mean(const hs_exegpt_dist *d)
{
    double m = 0;
    for (int32_t s = 0; s <= d->max; s++) m += s * d->p[s];
    return m;
}

int32_t hs_exegpt_dist_quantile(const hs_exegpt_dist *d, double q)
{
    double c = 0;
    for (int32_t s = 0; s <= d->max; s++) {
        c += d->p[s];
        if (c >= q - 1e-12) return s;
    }
    return d->max;
}

/* ---- the estimator's math on them ------------------------------------------ */

#ifndef NDEBUG
int hs__exegpt_dist_sane(const hs_exegpt_dist *d)
{
    double sum = 0;
    if (!d->p || d->max < 0 || d->max > HS_EXEGPT_MAX_LEN) return 0;
    for (int32_t s = 0; s <= d->max; s++) {
        if (!(d->p[s] >= 0 && d->p[s] <= 1)) return 0;
        sum += d->p[s];
    }
    return fabs(sum - 1) <= HS__EXEGPT_PTOL;
}

/* Sanity of a latency over D (for assert): f[0..max] finite, >= 0 and
 * non-decreasing up to rounding (RRA's sums of phases round on their own;
 * a step down of more than 1e-12 relative is a bug). */
static int lat_sane(const double *f, int32_t max)
{
    for (int32_t dd = 0; dd <= max; dd++) {
        if (!isfinite(f[dd]) || f[dd] < 0) return 0;
        if (dd > 0 && f[dd] < f[dd - 1] * (1 - 1e-12)) return 0;
    }
    return 1;
}
#endif

/* ---- Section 6 ------------------------------------------------------------------ */

double hs_exegpt_pd_u_given_s(int u, int s, int nd)
{
    if (s < 1 || u < 1 || nd < 1 || u > nd) return 0;
    if (s <= nd) return u == s ? 1.0 : 0.0;
    return u == 1 + (s - 1) % nd ? 1.0 / ((s + nd - 1) / nd) : 0.0;
}

double hs_exegpt_pd_u(const hs_exegpt_dist *d, int nd, double *pu)
{
    double sum = 0;
    assert(nd >= 0 && hs__exegpt_dist_sane(d));
    for (int u = 0; u <= nd; u++) pu[u] = 0;
    /* Only one U per S is non-zero, so this is O(max) rather than O(max nd). */
    for (int32_t s = 1; s <= d->max; s++) {
        int u;
        if (d->p[s] == 0) continue;
        u = s <= nd ? s : 1 + (s - 1) % nd;
        pu[u] += d->p[s] * hs_exegpt_pd_u_given_s(u, s, nd);
    }
    for (int u = 1; u <= nd; u++) sum += pu[u];
    assert(sum >= 0 && sum <= 1 + 2 * HS__EXEGPT_PTOL); /* a probability */
    return sum;
}

double hs_exegpt_bd(double be, const double *pu, int nd)
{
    double s = 0;
    for (int u = 1; u <= nd; u++) s += pu[u];
    return s > 0 ? be / s : 0;
}

void hs__exegpt_survival(const hs_exegpt_dist *d, double *sv)
{
    double dec = 1 - d->p[0], acc = 0;
    sv[d->max + 1] = 0;
    for (int32_t x = d->max; x >= 1; x--) {
        acc += dec > 1e-15 ? d->p[x] / dec : 0;
        sv[x] = acc;
    }
    sv[0] = sv[1];
    /* acc only grows (rounding is monotone): sv is non-increasing in x and
     * sv[0] bounds it */
    assert(isfinite(sv[0]) && sv[0] >= 0);
}

/* The round's counts.  With w the distribution of D among queries that
 * decode (D >= 1), S its survival and J joiners per round, the steady
 * state has, at iteration u, J cnt[u] queries whose decoded-token counts
 * (the current one included) sum to J sumk[u]:
 *   cnt[u]  = sum_D w(D) #{j >= 0 : j nd + u <= D} = sum_j S(u + j nd)
 *   sumk[u] = sum_D w(D) sum_j (j nd + u)          = sum_j (u + j nd) S(u + j nd)
 * so a round costs O(max + nd).  cnt/sumk: scratch of nd + 1 each. */
void hs__exegpt_round_core(const hs_exegpt_dist *d, const double *sv, double prompt_mean, int nd,
                           double be, int mode, double *b, double *ctx, double *cnt, double *sumk,
                           hs_exegpt_round *r)
{
    double dec = 1 - d->p[0], J = be * dec;
    assert(nd >= 1 && be >= 0 && prompt_mean >= 0 &&
           (mode == HS_EXEGPT_BD_PAPER || mode == HS_EXEGPT_BD_STEADY));
    assert(dec >= 0 && dec <= 1); /* p[0] is a probability */
    memset(r, 0, sizeof *r);
    r->joiners = J;
    for (int u = 0; u <= nd; u++) b[u] = ctx[u] = cnt[u] = sumk[u] = 0;
    if (!(dec > 1e-15)) return;
    for (int u = 1; u <= nd && u <= d->max; u++)
        for (int32_t k = u; k <= d->max; k += nd) {
            cnt[u] += sv[k];
            sumk[u] += k * sv[k];
        }
    if (mode == HS_EXEGPT_BD_PAPER) {
        /* P_D(U) on the decoding queries: one non-zero U per D. */
        double sum = 0, done = 0, bd;
        for (int32_t D = 1; D <= d->max; D++) {
            int u = D <= nd ? D : 1 + (D - 1) % nd;
            if (d->p[D] == 0) continue;
            b[u] += d->p[D] / dec * hs_exegpt_pd_u_given_s(u, D, nd);
        }
        for (int u = 1; u <= nd; u++) sum += b[u];
        bd = sum > 0 ? J / sum : 0;
        for (int u = 1; u <= nd; u++) {
            double pu = b[u];
            b[u] = bd * (1 - done);
            if (b[u] < 1e-12 * bd) b[u] = 0; /* rounding dust after the last completion */
            done += pu;
        }
    } else {
        for (int u = 1; u <= nd; u++) b[u] = J * cnt[u];
    }
    for (int u = 1; u <= nd; u++) {
        ctx[u] = cnt[u] > 0 ? b[u] * (prompt_mean + sumk[u] / cnt[u]) : 0;
        assert(isfinite(b[u]) && b[u] >= 0 && isfinite(ctx[u]) && ctx[u] >= 0);
        r->dec_steps += b[u];
        if (ctx[u] > r->ctx_peak) r->ctx_peak = ctx[u];
    }
    r->bd = b[1];
    assert(isfinite(r->dec_steps) && r->joiners >= 0);
}

int hs_exegpt_rra_round(const hs_exegpt_dist *d, double prompt_mean, int nd, double be,
                        int mode, double *b, double *ctx, hs_exegpt_round *r, hs_err *err)
{
    double *tmp;
    if (nd < 1 || !(be >= 0) || !(prompt_mean >= 0) || !d->p ||
        (mode != HS_EXEGPT_BD_PAPER && mode != HS_EXEGPT_BD_STEADY))
        return hs_errf(err, HS_EINVAL, "RRA round: nd %d, B_E %g, mode %d", nd, be, mode);
    assert(hs__exegpt_dist_sane(d));
    tmp = malloc((2 * ((size_t)nd + 1) + (size_t)d->max + 2) * sizeof *tmp);
    if (!tmp) return hs_errf(err, HS_ENOMEM, "out of memory (RRA round)");
    hs__exegpt_survival(d, tmp + 2 * (nd + 1));
    hs__exegpt_round_core(d, tmp + 2 * (nd + 1), prompt_mean, nd, be, mode, b, ctx, tmp,
                          tmp + nd + 1, r);
    free(tmp);
    return 0;
}

/* ---- latency distribution ------------------------------------------------------- */

double hs__exegpt_p99_with_wait(const hs_exegpt_dist *d, const double *f, double wait)
{
    double lo = INFINITY, hi = 0;
    assert(lat_sane(f, d->max) && isfinite(wait) && wait >= 0);
    for (int32_t dd = 0; dd <= d->max; dd++) {
        if (d->p[dd] == 0) continue;
        if (f[dd] < lo) lo = f[dd];
        if (f[dd] + wait > hi) hi = f[dd] + wait;
    }
    if (!(wait > 0)) {
        /* The p99 of f itself (f is non-decreasing in D here). */
        double c = 0;
        for (int32_t dd = 0; dd <= d->max; dd++) {
            c += d->p[dd];
            if (c >= 0.99 - 1e-12) return f[dd];
        }
        return hi;
    }
    for (int it = 0; it < 60; it++) {
        double mid = (lo + hi) / 2, cdf = 0;
        for (int32_t dd = 0; dd <= d->max; dd++) {
            double q;
            if (d->p[dd] == 0) continue;
            q = (mid - f[dd]) / wait;
            cdf += d->p[dd] * (q < 0 ? 0 : q > 1 ? 1 : q);
        }
        assert(cdf >= 0 && cdf <= 1 + 2 * HS__EXEGPT_PTOL); /* a probability */
        if (cdf >= 0.99) hi = mid;
        else lo = mid;
    }
    assert(isfinite(hi) && hi >= 0);
    return hi;
}

int32_t hs__exegpt_emax(const hs_exegpt_dist *d, int b)
{
    double f = 0, prev = 0, e = 0;
    assert(b >= 1);
    for (int32_t s = 0; s <= d->max; s++) {
        double fb;
        f += d->p[s];
        fb = pow(fmin(f, 1), b);
        e += s * (fb - prev);
        prev = fb;
    }
    assert(lround(e) >= 0 && lround(e) <= d->max);
    return (int32_t)lround(e);
}
