/* search.c - `hetsim search`: capacity (highest rate meeting a target, by
 * bisection), cheapest candidate meeting a target, and the Pareto front of
 * cost versus latency.  Every probe is a sweep case (sweep.h), so probes
 * land in the results database, are parallel where independent, and a
 * repeated search reuses the probes already stored. */
#include "cli/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/sweep.h"

static double round_sig(double x, int sig)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*g", sig, x);
    return strtod(buf, NULL);
}

int hs_search_bisect(const hs_bisect_cfg *c, hs_probe_fn probe, void *ctx, hs_bisect_result *out,
                     hs_err *err)
{
    double lo = c->lo, hi = c->hi;
    int pass, rc, sig = c->sig >= 2 && c->sig <= 15 ? c->sig : 6;
    memset(out, 0, sizeof *out);
    out->best = out->fail = NAN;
    if (!(lo > 0) || !(hi > lo) || !(c->tol > 0))
        return hs_errf(err, HS_ERANGE, "search: need 0 < lo < hi and tol > 0 (lo %g, hi %g, tol %g)", lo, hi,
                       c->tol);
    if ((rc = probe(ctx, hi, &pass, err))) return rc;
    out->probes++;
    if (pass) {
        out->status = HS_BISECT_ALL_PASS;
        out->best = hi;
        return 0;
    }
    out->fail = hi;
    if ((rc = probe(ctx, lo, &pass, err))) return rc;
    out->probes++;
    if (!pass) {
        out->status = HS_BISECT_NONE;
        out->fail = lo;
        return 0;
    }
    /* Invariant: lo passes, hi fails. */
    while (hi - lo > c->tol * hi && (c->max_probes <= 0 || out->probes < c->max_probes)) {
        double mid = round_sig(0.5 * (lo + hi), sig);
        if (mid <= lo || mid >= hi) break;   /* no representable point left */
        if ((rc = probe(ctx, mid, &pass, err))) return rc;
        out->probes++;
        if (pass) lo = mid;
        else hi = mid;
    }
    out->status = HS_BISECT_FOUND;
    out->best = lo;
    out->fail = hi;
    return 0;
}

int hs_pareto_front(const double *x, const double *y, int n, int *front)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        front[i] = !isnan(x[i]) && !isnan(y[i]);
        for (int j = 0; j < n && front[i]; j++) {
            if (j == i || isnan(x[j]) || isnan(y[j])) continue;
            int no_worse = x[j] <= x[i] && y[j] <= y[i];
            int better = x[j] < x[i] || y[j] < y[i];
            if (no_worse && (better || j < i)) front[i] = 0;
        }
        count += front[i];
    }
    return count;
}

/* ---- constraints "metric>=value" / "metric<=value" ---- */

typedef struct need {
    char metric[40];
    int ge;          /* 1: >=, 0: <= */
    double v;
} need;

static int parse_need(const char *s, need *n, hs_err *err)
{
    const char *op = strstr(s, ">=");
    char *end;
    if (op) n->ge = 1;
    else if ((op = strstr(s, "<="))) n->ge = 0;
    else return hs_errf(err, HS_EINVAL, "--need \"%s\": expected METRIC>=VALUE or METRIC<=VALUE", s);
    if (op == s || (size_t)(op - s) >= sizeof n->metric)
        return hs_errf(err, HS_EINVAL, "--need \"%s\": bad metric name", s);
    snprintf(n->metric, sizeof n->metric, "%.*s", (int)(op - s), s);
    n->v = strtod(op + 2, &end);
    if (end == op + 2 || *end || !isfinite(n->v))
        return hs_errf(err, HS_EINVAL, "--need \"%s\": \"%s\" is not a number", s, op + 2);
    return 0;
}

/* *pass: every need holds for sweep case pos (a failed case passes none). */
static int case_passes(hs_sweep *s, int pos, const need *nd, int n, int *pass, hs_err *err)
{
    int rc, found;
    double v;
    *pass = 1;
    for (int i = 0; i < n; i++) {
        if ((rc = hs_sweep_case_metric(s, pos, nd[i].metric, &v, &found, err))) return rc;
        if (!found || !(nd[i].ge ? v >= nd[i].v : v <= nd[i].v)) {
            *pass = 0;
            return 0;
        }
    }
    return 0;
}

/* ---- capacity: one bisection per group (a case of the user's grid) ---- */

typedef struct cap_ctx {
    hs_sweep *probes;
    const char *key;              /* the probed configuration key */
    const char *const *group;     /* the group's settings */
    int n_group;
    const need *needs;
    int n_needs;
} cap_ctx;

static int cap_probe(void *vctx, double x, int *pass, hs_err *err)
{
    cap_ctx *c = vctx;
    const char *sets[80];
    char kv[200];
    int pos, rc, failed;
    if (c->n_group > 78) return hs_errf(err, HS_ERANGE, "search: too many settings in one case");
    for (int i = 0; i < c->n_group; i++) sets[i] = c->group[i];
    snprintf(kv, sizeof kv, "%s=%.15g", c->key, x);
    sets[c->n_group] = kv;
    if ((rc = hs_sweep_add_case(c->probes, sets, c->n_group + 1, &pos, err))) return rc;
    if ((rc = hs_sweep_exec(c->probes, &failed, err))) return rc;
    if ((rc = case_passes(c->probes, pos, c->needs, c->n_needs, pass, err))) return rc;
    if (!hs_sweep_quiet(c->probes))
        fprintf(stderr, "hetsim search: %s: %s\n", kv, *pass ? "meets the target" : "misses the target");
    return 0;
}

static void search_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim search capacity|cheapest|pareto [options]\n"
            "\n"
            "  capacity   highest value of --key (default workload.rate) meeting every --need,\n"
            "             by bisection in [--lo, --hi] to relative --tol; one search per case of\n"
            "             the grid/list (e.g. --grid policy=A,B)\n"
            "  cheapest   runs every case of the grid/list (e.g. --grid cluster=a,b --grid tp=1,2)\n"
            "             and names the lowest --cost meeting every --need\n"
            "  pareto     runs every case and prints those not dominated in (--x, --y), both\n"
            "             minimised (default cost_per_hour vs e2el_p99_ms)\n"
            "\n"
            "search options:\n"
            "  --need M>=V|M<=V     target on a summary metric (repeatable; default\n"
            "                       slo_attainment>=0.9)\n"
            "  --key KEY            capacity: the configuration key searched (workload.rate)\n"
            "  --lo X, --hi X       capacity: interval (0.25, 64)\n"
            "  --tol T              capacity: relative width to stop at (0.02)\n"
            "  --cost M             cheapest: the metric minimised (cost_per_hour)\n"
            "  --x M, --y M         pareto: the two metrics minimised\n"
            "\n"
            "sweep options (probes are stored as sweep cases, named search-MODE):\n");
    hs_sweep_options_help(fp);
}

int hs_cli_search(int argc, char **argv)
{
    hs_err err = {0};
    hs_sweep *groups = NULL, *probes = NULL;
    need needs[16];
    int n_needs = 0, rc = 0, failed = 0;
    const char *mode, *key = "workload.rate", *cost = "cost_per_hour", *mx = "cost_per_hour",
                      *my = "e2el_p99_ms";
    hs_bisect_cfg bc = {0.25, 64, 0.02, 6, 64};
    char name[64];
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        search_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    mode = argv[1];
    if (strcmp(mode, "capacity") && strcmp(mode, "cheapest") && strcmp(mode, "pareto")) {
        fprintf(stderr, "hetsim: search: unknown mode \"%s\" (capacity, cheapest, pareto)\n", mode);
        return 2;
    }
    snprintf(name, sizeof name, "search-%s", mode);
    groups = hs_sweep_create("search");
    probes = hs_sweep_create("search");
    if (!groups || !probes) {
        rc = hs_errf(&err, HS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        int r, j = i;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            search_usage(stdout);
            goto done;
        }
        if (!strcmp(a, "--need") || !strcmp(a, "--key") || !strcmp(a, "--lo") || !strcmp(a, "--hi") ||
            !strcmp(a, "--tol") || !strcmp(a, "--cost") || !strcmp(a, "--x") || !strcmp(a, "--y")) {
            if (!v) {
                rc = hs_errf(&err, HS_EINVAL, "%s needs a value (see hetsim search --help)", a);
                goto fail;
            }
            i++;
            if (!strcmp(a, "--need")) {
                if (n_needs == 16) {
                    rc = hs_errf(&err, HS_ERANGE, "--need: at most 16");
                    goto fail;
                }
                if ((rc = parse_need(v, &needs[n_needs++], &err))) goto fail;
            } else if (!strcmp(a, "--key")) key = v;
            else if (!strcmp(a, "--cost")) cost = v;
            else if (!strcmp(a, "--x")) mx = v;
            else if (!strcmp(a, "--y")) my = v;
            else {
                double d = strtod(v, &end);
                if (end == v || *end || !isfinite(d) || d <= 0) {
                    rc = hs_errf(&err, HS_ERANGE, "%s: \"%s\" is not a positive number", a, v);
                    goto fail;
                }
                if (!strcmp(a, "--lo")) bc.lo = d;
                else if (!strcmp(a, "--hi")) bc.hi = d;
                else bc.tol = d;
            }
            continue;
        }
        /* Sweep options go to both sweeps (same base, same database). */
        r = hs_sweep_option(groups, argc, argv, &i, &err);
        if (r < 0) {
            rc = r;
            goto fail;
        }
        if (r == 0) {
            rc = hs_errf(&err, HS_EINVAL, "unknown option \"%s\" (see hetsim search --help)", a);
            goto fail;
        }
        if ((r = hs_sweep_option(probes, argc, argv, &j, &err)) < 0) {
            rc = r;
            goto fail;
        }
    }
    if (!n_needs) parse_need("slo_attainment>=0.9", &needs[n_needs++], &err);
    hs_sweep_default_name(groups, name);
    hs_sweep_default_name(probes, name);
    hs_sweep_no_progress(probes);
    if ((rc = hs_sweep_expand(groups, &err))) goto fail;
    /* Expanding read the spec's "set" into the groups' base; the probes
     * must run on it too. */
    if ((rc = hs_sweep_copy_base(probes, groups, &err))) goto fail;

    if (!strcmp(mode, "capacity")) {
        if (!(bc.hi > bc.lo)) {
            rc = hs_errf(&err, HS_ERANGE, "--lo %g must be below --hi %g", bc.lo, bc.hi);
            goto fail;
        }
        printf("%-40s %12s %12s %7s  %s\n", "case", "capacity", "fails at", "probes", "status");
        for (int g = 0; g < hs_sweep_count(groups); g++) {
            hs_bisect_result res;
            cap_ctx cc = {probes, key, NULL, 0, needs, n_needs};
            cc.group = hs_sweep_case_sets(groups, g, &cc.n_group);
            if ((rc = hs_search_bisect(&bc, cap_probe, &cc, &res, &err))) goto fail;
            printf("%-40s %12.6g %12.6g %7d  %s\n", hs_sweep_case_text(groups, g)[0] ? hs_sweep_case_text(groups, g) : "(base)",
                   res.best, res.fail, res.probes,
                   res.status == HS_BISECT_FOUND      ? "found"
                   : res.status == HS_BISECT_ALL_PASS ? "meets the target at --hi (raise it)"
                                                      : "misses the target at --lo");
        }
        printf("capacity: highest %s meeting", key);
        for (int i = 0; i < n_needs; i++)
            printf(" %s%s%g", needs[i].metric, needs[i].ge ? ">=" : "<=", needs[i].v);
        printf(" (results in %s)\n", hs_sweep_db_path(probes));
    } else {
        /* cheapest / pareto: every case of the grid, in parallel. */
        int n = hs_sweep_count(groups), best = -1;
        double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
        int *front = calloc((size_t)n + 1, sizeof *front), *pass = calloc((size_t)n + 1, sizeof *pass);
        if (!x || !y || !front || !pass) {
            free(x), free(y), free(front), free(pass);
            rc = hs_errf(&err, HS_ENOMEM, "out of memory");
            goto fail;
        }
        if ((rc = hs_sweep_exec(groups, &failed, &err))) {
            free(x), free(y), free(front), free(pass);
            goto fail;
        }
        for (int i = 0; i < n && !rc; i++) {
            int f1 = 0, f2 = 0;
            rc = hs_sweep_case_metric(groups, i, !strcmp(mode, "cheapest") ? cost : mx, &x[i], &f1, &err);
            if (!rc) rc = hs_sweep_case_metric(groups, i, my, &y[i], &f2, &err);
            if (!rc) rc = case_passes(groups, i, needs, n_needs, &pass[i], &err);
            if (!f1) x[i] = NAN;
            if (!f2) y[i] = NAN;
        }
        if (rc) {
            free(x), free(y), free(front), free(pass);
            goto fail;
        }
        if (!strcmp(mode, "cheapest")) {
            printf("%-50s %14s %6s\n", "case", cost, "meets");
            for (int i = 0; i < n; i++) {
                printf("%-50s %14.6g %6s\n", hs_sweep_case_text(groups, i), x[i], pass[i] ? "yes" : "no");
                /* Ties: the first in case order. */
                if (pass[i] && !isnan(x[i]) && (best < 0 || x[i] < x[best])) best = i;
            }
            if (best >= 0) printf("cheapest: %s (%s %g)\n", hs_sweep_case_text(groups, best), cost, x[best]);
            else printf("cheapest: no case meets the target\n");
        } else {
            int nf = hs_pareto_front(x, y, n, front);
            printf("%-50s %14s %14s %6s\n", "case", mx, my, "front");
            for (int i = 0; i < n; i++)
                printf("%-50s %14.6g %14.6g %6s\n", hs_sweep_case_text(groups, i), x[i], y[i],
                       front[i] ? "*" : "");
            printf("pareto: %d of %d cases are not dominated in (%s, %s)\n", nf, n, mx, my);
        }
        free(x), free(y), free(front), free(pass);
        if (!strcmp(mode, "cheapest") && best < 0) {
            hs_sweep_destroy(groups);
            hs_sweep_destroy(probes);
            return 3;
        }
    }
done:
    hs_sweep_destroy(groups);
    hs_sweep_destroy(probes);
    return 0;
fail:
    fprintf(stderr, "hetsim: %s\n", err.msg[0] ? err.msg : hs_strerror(rc));
    hs_sweep_destroy(groups);
    hs_sweep_destroy(probes);
    return hs_cli_exit_code(rc);
}
