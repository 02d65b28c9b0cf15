/* synth.c - arrival processes and length distributions for generated load.
 *
 * Arrivals: the first request arrives at 0, each later one after a gap drawn
 * from the process; times are integer ns, so they are non-decreasing by
 * construction (gaps are >= 0 and rounding is monotone).  "constant" computes
 * arrival i directly as i/rate, so no rounding error accumulates over millions
 * of requests.  time_scale divides every time (2 = twice the rate).
 *
 * Lengths (per side, in tokens, always integers in [lo, hi], lo >= 1):
 *   fixed      round(mean)
 *   uniform    integer uniform on [min, max]
 *   normal     mean + std * N(0,1), rounded, truncated to [min, max] by
 *              resampling (a true truncated normal, as ExeGPT uses); after
 *              HS__NORMAL_TRIES misses the last draw is clamped, so a mean far
 *              outside the bounds cannot stall the generator
 *   lognormal  mean/std are those of the lengths (not of log length); values
 *              are clamped to [min, max], which puts the excess mass at the cap
 *              the way real traces do (context limits, max_tokens)
 *   trace      handled by the caller (joint (prompt, output) pair resampling)
 * Every draw uses only the source's gsl_rng, so a seed fixes the sequence. */
#include "workload/workload_int.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

int hs__arrivals_init(hs__arrivals *a, const hs_workload_cfg *cfg, hs_err *err)
{
    memset(a, 0, sizeof *a);
    if (strcmp(cfg->arrival, "poisson") == 0) a->kind = HS__ARR_POISSON;
    else if (strcmp(cfg->arrival, "gamma") == 0) a->kind = HS__ARR_GAMMA;
    else if (strcmp(cfg->arrival, "constant") == 0) a->kind = HS__ARR_CONSTANT;
    else
        return hs_errf(err, HS_EINVAL,
                       "workload.arrival: unknown process \"%s\" (poisson, gamma, constant)",
                       cfg->arrival);
    if (!(cfg->rate > 0) || !isfinite(cfg->rate))
        return hs_errf(err, HS_ERANGE,
                       "workload.rate: must be > 0 requests/s for generated arrivals (got %g)",
                       cfg->rate);
    if (!(cfg->time_scale > 0) || !isfinite(cfg->time_scale))
        return hs_errf(err, HS_ERANGE, "workload.time_scale: must be > 0 (got %g)",
                       cfg->time_scale);
    if (a->kind == HS__ARR_GAMMA) {
        if (!(cfg->cv > 0) || !isfinite(cfg->cv))
            return hs_errf(err, HS_ERANGE, "workload.cv: must be > 0 for arrival gamma (got %g)",
                           cfg->cv);
        /* Gamma gaps with mean 1/rate and CV cv: shape k = 1/cv^2, scale
         * theta = mean/k = cv^2/rate. */
        a->shape = 1.0 / (cfg->cv * cfg->cv);
        a->scale = cfg->cv * cfg->cv / cfg->rate;
    }
    a->rate = cfg->rate;
    a->time_scale = cfg->time_scale;
    return 0;
}

hs_ns hs__arrivals_next(hs__arrivals *a, gsl_rng *r)
{
    double gap_s = 0, g;
    if (a->n++ == 0) {
        a->t = 0;
        return 0;
    }
    switch (a->kind) {
    case HS__ARR_CONSTANT:
        g = (double)(a->n - 1) * 1e9 / (a->rate * a->time_scale);
        a->t = g >= (double)HS_NS_MAX ? HS_NS_MAX : (hs_ns)llround(g);
        return a->t;
    case HS__ARR_POISSON: gap_s = gsl_ran_exponential(r, 1.0 / a->rate); break;
    case HS__ARR_GAMMA: gap_s = gsl_ran_gamma(r, a->shape, a->scale); break;
    }
    g = gap_s * 1e9 / a->time_scale;
    /* Saturate instead of overflowing (only absurd rates get near this). */
    if (!(g < (double)(HS_NS_MAX - a->t))) a->t = HS_NS_MAX;
    else a->t += (hs_ns)llround(g);
    return a->t;
}

int hs__lognormal_fit_mean_p99(double mean, double p99, double *mu, double *sigma)
{
    /* mean = exp(mu + s^2/2), p99 = exp(mu + z s)  =>
     * ln(p99/mean) = z s - s^2/2  =>  s = z - sqrt(z^2 - 2 ln(p99/mean))
     * (the smaller root; a solution exists when mean < p99 < mean e^{z^2/2}). */
    double z = gsl_cdf_ugaussian_Pinv(0.99), L, disc;
    if (!(mean > 0) || !(p99 > mean)) return -1;
    L = log(p99 / mean);
    disc = z * z - 2 * L;
    if (disc < 0) return -1;
    *sigma = z - sqrt(disc);
    *mu = log(mean) - *sigma * *sigma / 2;
    return 0;
}

int hs__lengen_init(hs__lengen *g, const hs_lendist *d, const char *side,
                    int32_t cap, hs_err *err)
{
    double lo, hi;
    memset(g, 0, sizeof *g);
    if (strcmp(d->kind, "fixed") == 0) g->kind = HS__LEN_FIXED;
    else if (strcmp(d->kind, "uniform") == 0) g->kind = HS__LEN_UNIFORM;
    else if (strcmp(d->kind, "normal") == 0) g->kind = HS__LEN_NORMAL;
    else if (strcmp(d->kind, "lognormal") == 0) g->kind = HS__LEN_LOGNORMAL;
    else if (strcmp(d->kind, "trace") == 0) {
        g->kind = HS__LEN_TRACE;
        return 0;
    } else
        return hs_errf(err, HS_EINVAL,
                       "workload.%s.kind: unknown distribution \"%s\" (fixed, uniform, normal, lognormal, trace)",
                       side, d->kind);
    if (!isfinite(d->mean) || !isfinite(d->std) || d->std < 0)
        return hs_errf(err, HS_ERANGE, "workload.%s.std: must be >= 0 (got %g)", side, d->std);
    if (g->kind == HS__LEN_FIXED) {
        double v = floor(d->mean + 0.5);
        if (!(v >= 1) || v > HS__TOKENS_ABSURD)
            return hs_errf(err, HS_ERANGE, "workload.%s.mean: must be in [1, %d] for kind fixed (got %g)",
                           side, HS__TOKENS_ABSURD, d->mean);
        if (cap > 0 && v > cap)
            return hs_errf(err, HS_ERANGE, "workload.%s.mean: %g exceeds max_prompt %d",
                           side, v, (int)cap);
        g->fixed = g->lo = g->hi = (int32_t)v;
        return 0;
    }
    if (!(d->min <= d->max))
        return hs_errf(err, HS_ERANGE, "workload.%s.min: %g is greater than %s.max %g",
                       side, d->min, side, d->max);
    lo = fmax(1, ceil(d->min));
    hi = fmin(HS__TOKENS_ABSURD, floor(d->max));
    if (hi < lo)
        return hs_errf(err, HS_ERANGE, "workload.%s.max: %g leaves no length >= 1 token",
                       side, d->max);
    if (cap > 0 && hi > cap) {
        if (lo > cap)
            return hs_errf(err, HS_ERANGE, "workload.%s.min: %g exceeds max_prompt %d",
                           side, d->min, (int)cap);
        hi = cap; /* the clamp half of max_prompt's "clamp/validate" */
    }
    g->lo = (int32_t)lo;
    g->hi = (int32_t)hi;
    g->mean = d->mean;
    g->std = d->std;
    if (g->kind == HS__LEN_LOGNORMAL) {
        double cv = d->std / d->mean;
        if (!(d->mean > 0))
            return hs_errf(err, HS_ERANGE, "workload.%s.mean: must be > 0 for kind lognormal (got %g)",
                           side, d->mean);
        /* Moments of a lognormal: mean = e^{mu + s^2/2}, cv^2 = e^{s^2} - 1. */
        g->sigma = sqrt(log1p(cv * cv));
        g->mu = log(d->mean) - g->sigma * g->sigma / 2;
    }
    return 0;
}

static int32_t clamp_round(double x, int32_t lo, int32_t hi)
{
    if (!(x >= lo)) return lo; /* also catches NaN */
    if (x >= hi) return hi;
    return (int32_t)llround(x); /* x in [lo, hi): the rounding stays in range */
}

int32_t hs__lengen_draw(const hs__lengen *g, gsl_rng *r)
{
    double x = 0;
    switch (g->kind) {
    case HS__LEN_FIXED:
    case HS__LEN_TRACE:
        return g->fixed;
    case HS__LEN_UNIFORM:
        return g->lo + (int32_t)gsl_rng_uniform_int(r, (unsigned long)(g->hi - g->lo) + 1);
    case HS__LEN_NORMAL:
        if (g->std == 0) return clamp_round(g->mean, g->lo, g->hi);
        for (int k = 0; k < HS__NORMAL_TRIES; k++) {
            x = g->mean + gsl_ran_gaussian(r, g->std);
            /* round(x) in [lo, hi]  <=>  x in [lo - 0.5, hi + 0.5) */
            if (x >= g->lo - 0.5 && x < g->hi + 0.5) return clamp_round(x, g->lo, g->hi);
        }
        return clamp_round(x, g->lo, g->hi);
    case HS__LEN_LOGNORMAL:
        x = gsl_ran_lognormal(r, g->mu, g->sigma);
        return clamp_round(x, g->lo, g->hi);
    }
    return g->lo;
}
