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
#include "core/str.h"
#include "out/db.h"
#include "out/metrics.h"

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

/* ---- metric names: a misspelt one must not read as "no case meets" ---- */

/* The names a run writes to its summary table: hs_metrics_summary's and
 * the run's own counters (sim/cli/run.c). */
static int known_metrics(char names[][40], int cap)
{
    static const char *const extra[] = {"arrivals", "truncated", "iterations", "events", "simulated_s"};
    hs_metric_value v[96];
    hs_metrics *m = hs_metrics_create(NULL);
    int n = 0;
    if (m) {
        n = hs_metrics_summary(m, 0, v, 96);
        hs_metrics_destroy(m);
    }
    if (n > cap) n = cap;
    for (int i = 0; i < n; i++) memcpy(names[i], v[i].name, sizeof v[i].name);
    for (size_t k = 0; k < sizeof extra / sizeof extra[0] && n < cap; k++) snprintf(names[n++], 40, "%s", extra[k]);
    return n;
}

/* 0 when `metric` is a summary metric; else HS_EINVAL naming the option,
 * with the closest name. */
static int check_metric(const char *opt, const char *metric, hs_err *err)
{
    char names[128][40], dym[160];
    const char *ptr[128];
    int n = known_metrics(names, 128);
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], metric)) return 0;
        ptr[i] = names[i];
    }
    return hs_errf(err, HS_EINVAL, "%s: unknown metric \"%s\"%s (summary metrics: ttft_p99_ms, tpot_p99_ms, "
                   "e2el_p99_ms, slo_attainment, goodput, request_throughput, cost_per_hour, ...; "
                   "{ttft,tpot,itl,e2el,queue}_{mean,p50,p90,p95,p99}_ms)",
                   opt, metric, hs_str_did_you_mean(dym, sizeof dym, metric, ptr, n));
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
        hs_eprintf("hetsim search: %s: %s\n", kv, *pass ? "meets the target" : "misses the target");
    return 0;
}

/* ---- cheapest / pareto: groups, ranking, fronts ---- */

/* 1 when swept key k groups cases by default: what is asked of the
 * cluster (workload, SLO, model), not how it is built. */
static int demand_key(const char *k)
{
    return !strncmp(k, "workload.", 9) || !strncmp(k, "slo.", 4) || !strcmp(k, "model");
}

/* 1 when key k is in the comma list `by` (NULL: demand_key). */
static int in_by(const char *by, const char *k, size_t klen)
{
    if (!by) {
        char kb[128];
        snprintf(kb, sizeof kb, "%.*s", (int)klen, k);
        return demand_key(kb);
    }
    for (const char *p = by; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == klen && !strncmp(p, k, n)) return 1;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

/* The group of case pos: its settings of the grouping keys, "k=v k=v"
 * (malloc'd, "" for none). */
static char *group_key(hs_sweep *s, int pos, const char *by)
{
    int n;
    const char *const *sets = hs_sweep_case_sets(s, pos, &n);
    size_t cap = 1, len = 0;
    char *out;
    for (int i = 0; i < n; i++) cap += strlen(sets[i]) + 1;
    if (!(out = malloc(cap))) return NULL;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(sets[i], '=');
        if (!eq || !in_by(by, sets[i], (size_t)(eq - sets[i]))) continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", sets[i]);
    }
    return out;
}

/* 0 when every key in the comma list `by` is one some case sets: a
 * misspelt key would otherwise put every case into one group, quietly. */
static int check_by(hs_sweep *s, const char *by, hs_err *err)
{
    char keys[64][128], want[128], dym[160];
    const char *ptr[64];
    int nk = 0;
    for (const char *p = by; p && *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        int found = 0;
        for (int pos = 0; pos < hs_sweep_count(s) && !found; pos++) {
            int n;
            const char *const *sets = hs_sweep_case_sets(s, pos, &n);
            for (int i = 0; i < n && !found; i++) {
                const char *eq = strchr(sets[i], '=');
                size_t kl = eq ? (size_t)(eq - sets[i]) : 0;
                found = kl == len && !strncmp(sets[i], p, len);
                /* the distinct swept keys, for the suggestion */
                if (eq && kl < sizeof keys[0]) {
                    int k = 0;
                    while (k < nk && (strlen(keys[k]) != kl || strncmp(keys[k], sets[i], kl))) k++;
                    if (k == nk && nk < 64) snprintf(keys[nk++], sizeof keys[0], "%.*s", (int)kl, sets[i]);
                }
            }
        }
        if (!found) {
            for (int k = 0; k < nk; k++) ptr[k] = keys[k];
            snprintf(want, sizeof want, "%.*s", (int)len, p);
            return hs_errf(err, HS_EINVAL, "--by: \"%s\" is not a key the cases set%s (--grid, --case or the spec's)",
                           want, hs_str_did_you_mean(dym, sizeof dym, want, ptr, nk));
        }
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

static void print_grouping(hs_sweep *s, const char *by)
{
    if (by && !*by) return;
    if (by) printf("groups: by %s\n", by);
    else if (hs_sweep_count(s) > 0) {
        int n, any = 0;
        const char *const *sets = hs_sweep_case_sets(s, 0, &n);
        for (int i = 0; i < n; i++) {
            const char *eq = strchr(sets[i], '=');
            if (eq && in_by(NULL, sets[i], (size_t)(eq - sets[i]))) {
                printf("%s%.*s", any ? "," : "groups: by ", (int)(eq - sets[i]), sets[i]);
                any = 1;
            }
        }
        if (any) printf(" (--by to change)\n");
    }
}

/* The group keys in order of first appearance: first[g] is the first case
 * of group g; returns the group count. */
static int group_list(char **gkey, int n, int *first)
{
    int ng = 0;
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < ng && strcmp(gkey[first[g]], gkey[i])) g++;
        if (g == ng) first[ng++] = i;
    }
    return ng;
}

typedef struct rank_ctx {
    const double *x, *y;
} rank_ctx;
static rank_ctx g_rank;

/* Costs equal to 9 significant digits are a tie: $/h summed over replicas
 * in a different order differs in the last bits. */
static double cost_key(double x)
{
    return isnan(x) ? x : round_sig(x, 9);
}

/* Total order: lower x (cost_key), then lower y (NaN last), then case order. */
static int cmp_rank(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    double xa = cost_key(g_rank.x[a]), xb = cost_key(g_rank.x[b]), ya = g_rank.y[a], yb = g_rank.y[b];
    if (xa != xb) return xa < xb ? -1 : 1;
    if (isnan(ya) != isnan(yb)) return isnan(ya) ? 1 : -1;
    if (!isnan(ya) && ya != yb) return ya < yb ? -1 : 1;
    return (a > b) - (a < b);
}

static void print_needs(const need *nd, int n)
{
    for (int i = 0; i < n; i++) printf("%s%s%s%g", i ? ", " : "", nd[i].metric, nd[i].ge ? ">=" : "<=", nd[i].v);
}

static int report_cheapest(hs_sweep *s, char **gkey, const double *x, const double *y, const int *pass, int n,
                           const char *cost, const char *my, const need *nd, int n_nd, int top, int *missing,
                           hs_err *err)
{
    int *first = malloc((size_t)(n + 1) * sizeof *first), *ord = malloc((size_t)(n + 1) * sizeof *ord);
    int ng;
    if (!first || !ord) {
        free(first);
        free(ord);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    ng = group_list(gkey, n, first);
    *missing = 0;
    g_rank.x = x;
    g_rank.y = y;
    for (int g = 0; g < ng; g++) {
        const char *gk = gkey[first[g]];
        int m = 0, total = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(gkey[i], gk)) continue;
            total++;
            if (pass[i] && !isnan(x[i])) ord[m++] = i;
        }
        qsort(ord, (size_t)m, sizeof *ord, cmp_rank);
        printf("\n%s%s: %d of %d cases meet ", gk[0] ? "group " : "", gk[0] ? gk : "all cases", m, total);
        print_needs(nd, n_nd);
        printf("\n");
        if (m) {
            printf("  %-5s %14s %14s", "rank", cost, my);
            for (int k = 0; k < n_nd; k++)
                if (strcmp(nd[k].metric, cost) && strcmp(nd[k].metric, my)) printf(" %14s", nd[k].metric);
            printf("  case\n");
        }
        for (int r = 0; r < m && r < top; r++) {
            int i = ord[r];
            char rank[16];
            /* '=' marks a tie on the cost, decided by --y then case order */
            int tie = (r > 0 && cost_key(x[ord[r - 1]]) == cost_key(x[i])) ||
                      (r + 1 < m && cost_key(x[ord[r + 1]]) == cost_key(x[i]));
            snprintf(rank, sizeof rank, "%d%s", r + 1, tie ? "=" : "");
            printf("  %-5s %14.6g %14.6g", rank, x[i], y[i]);
            for (int k = 0; k < n_nd; k++)
                if (strcmp(nd[k].metric, cost) && strcmp(nd[k].metric, my)) {
                    double v;
                    int f;
                    if (hs_sweep_case_metric(s, i, nd[k].metric, &v, &f, err) || !f) v = NAN;
                    printf(" %14.6g", v);
                }
            printf("  %s\n", hs_sweep_case_text(s, i)[0] ? hs_sweep_case_text(s, i) : "(base)");
        }
        if (m > top) printf("  ... %d more meet the target (--top)\n", m - top);
        if (m > 1 && cost_key(x[ord[0]]) == cost_key(x[ord[1]])) {
            int t = 2;
            while (t < m && cost_key(x[ord[t]]) == cost_key(x[ord[0]])) t++;
            printf("  tie: %d cases cost %g; ranked by %s, then case order\n", t, x[ord[0]], my);
        }
        if (m)
            printf("cheapest%s%s%s: %s (%s %g)\n", gk[0] ? " [" : "", gk, gk[0] ? "]" : "",
                   hs_sweep_case_text(s, ord[0])[0] ? hs_sweep_case_text(s, ord[0]) : "(base)", cost, x[ord[0]]);
        else {
            printf("cheapest%s%s%s: no case meets the target\n", gk[0] ? " [" : "", gk, gk[0] ? "]" : "");
            (*missing)++;
        }
    }
    free(first);
    free(ord);
    return 0;
}

static int report_pareto(hs_sweep *s, char **gkey, const double *x, const double *y, const int *pass, int *front,
                         int n, const char *mx, const char *my, const need *nd, int n_nd, hs_err *err)
{
    int *first = malloc((size_t)(n + 1) * sizeof *first), *idx = malloc((size_t)(n + 1) * sizeof *idx);
    double *gx = malloc((size_t)(n + 1) * sizeof *gx), *gy = malloc((size_t)(n + 1) * sizeof *gy);
    int *gf = malloc((size_t)(n + 1) * sizeof *gf);
    int ng, nf_all = 0, n_pass = 0;
    if (!first || !idx || !gx || !gy || !gf) {
        free(first), free(idx), free(gx), free(gy), free(gf);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    ng = group_list(gkey, n, first);
    memset(front, 0, (size_t)n * sizeof *front);
    /* Only cases meeting every --need compete: an overloaded case is not
     * a trade-off, whatever its cost. */
    for (int g = 0; g < ng; g++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(gkey[i], gkey[first[g]]) && pass[i]) {
                idx[m] = i;
                gx[m] = x[i];
                gy[m] = y[i];
                m++;
            }
        n_pass += m;
        hs_pareto_front(gx, gy, m, gf);
        for (int k = 0; k < m; k++) front[idx[k]] = gf[k];
    }
    for (int g = 0; g < ng; g++) {
        const char *gk = gkey[first[g]];
        int nf = 0, total = 0;
        if (gk[0]) printf("\ngroup %s:\n", gk);
        printf("%-50s %14s %14s %6s %6s\n", "case", mx, my, "meets", "front");
        for (int i = 0; i < n; i++) {
            if (strcmp(gkey[i], gk)) continue;
            total++;
            nf += front[i];
            printf("%-50s %14.6g %14.6g %6s %6s\n", hs_sweep_case_text(s, i)[0] ? hs_sweep_case_text(s, i) : "(base)",
                   x[i], y[i], pass[i] ? "yes" : "no", front[i] ? "*" : "");
        }
        nf_all += nf;
        if (gk[0]) printf("pareto [%s]: %d of %d cases\n", gk, nf, total);
    }
    printf("pareto: %d of %d cases are not dominated in (%s, %s) among the %d meeting ", nf_all, n, mx, my, n_pass);
    print_needs(nd, n_nd);
    printf("\n");
    free(first), free(idx), free(gx), free(gy), free(gf);
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
            "             and, per group (--by), ranks the cases meeting every --need by --cost\n"
            "             (ties: lower --y, then case order, marked '='); prints the --top best\n"
            "  pareto     runs every case and, per group, marks the cases meeting every --need\n"
            "             that no other such case dominates in (--x, --y), both minimised\n"
            "             (default cost_per_hour vs e2el_p99_ms)\n"
            "\n"
            "search options:\n"
            "  --need 'M>=V'|'M<=V' target on a summary metric (repeatable; default\n"
            "                       slo_attainment>=0.9); quote it, or the shell reads >= as\n"
            "                       a redirection\n"
            "  --key KEY            capacity: the configuration key searched (workload.rate)\n"
            "  --lo X, --hi X       capacity: interval (0.25, 64)\n"
            "  --tol T              capacity: relative width to stop at (0.02)\n"
            "  --cost M             cheapest: the metric minimised (cost_per_hour)\n"
            "  --x M, --y M         pareto: the two metrics minimised; cheapest: --y breaks ties\n"
            "  --by K1,K2           cheapest, pareto: swept keys that form groups (default: the\n"
            "                       swept workload.*, slo.* and model keys; \"\" for one group)\n"
            "  --top N              cheapest: cases shown per group (3)\n"
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
    const char *by = NULL;
    int top = 3;
    hs_bisect_cfg bc = {0.25, 64, 0.02, 6, 64};
    char name[64];
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        search_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    mode = argv[1];
    if (strcmp(mode, "capacity") && strcmp(mode, "cheapest") && strcmp(mode, "pareto")) {
        hs_eprintf("hetsim: search: unknown mode \"%s\" (capacity, cheapest, pareto)\n", mode);
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
            !strcmp(a, "--tol") || !strcmp(a, "--cost") || !strcmp(a, "--x") || !strcmp(a, "--y") ||
            !strcmp(a, "--by") || !strcmp(a, "--top")) {
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
            else if (!strcmp(a, "--by")) by = v;
            else if (!strcmp(a, "--top")) {
                long long t;
                if ((rc = hs_parse_int("--top", v, 1, 1000, &t, &err))) goto fail;
                top = (int)t;
            } else {
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
    /* Every metric named is checked before anything runs. */
    for (int i = 0; i < n_needs && !rc; i++) rc = check_metric("--need", needs[i].metric, &err);
    if (!rc) rc = check_metric("--cost", cost, &err);
    if (!rc) rc = check_metric("--x", mx, &err);
    if (!rc) rc = check_metric("--y", my, &err);
    if (rc) goto fail;
    hs_sweep_default_name(groups, name);
    hs_sweep_default_name(probes, name);
    hs_sweep_no_progress(probes);
    if ((rc = hs_sweep_expand(groups, &err))) goto fail;
    /* Expanding read the spec's "set" into the groups' base; the probes
     * must run on it too. */
    if ((rc = hs_sweep_copy_base(probes, groups, &err))) goto fail;
    if ((rc = check_by(groups, by, &err))) goto fail;
    /* before any probe or header: a database it cannot write is one line */
    if ((rc = hs_db_check_writable(hs_sweep_db_path(probes), &err))) goto fail;

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
        int n = hs_sweep_count(groups), ch = !strcmp(mode, "cheapest");
        int missing = 0;
        double *x = NULL, *y = NULL;
        int *front = NULL, *pass = NULL;
        char **gkey = NULL;
        if ((rc = hs_sweep_exec(groups, &failed, &err))) goto fail;
        x = calloc((size_t)n + 1, sizeof *x);
        y = calloc((size_t)n + 1, sizeof *y);
        front = calloc((size_t)n + 1, sizeof *front);
        pass = calloc((size_t)n + 1, sizeof *pass);
        gkey = calloc((size_t)n + 1, sizeof *gkey);
        if (!x || !y || !front || !pass || !gkey) rc = hs_errf(&err, HS_ENOMEM, "out of memory");
        for (int i = 0; i < n && !rc; i++) {
            int f1 = 0, f2 = 0;
            rc = hs_sweep_case_metric(groups, i, ch ? cost : mx, &x[i], &f1, &err);
            if (!rc) rc = hs_sweep_case_metric(groups, i, my, &y[i], &f2, &err);
            if (!rc) rc = case_passes(groups, i, needs, n_needs, &pass[i], &err);
            if (!f1) x[i] = NAN;
            if (!f2) y[i] = NAN;
            if (!rc && !(gkey[i] = group_key(groups, i, by))) rc = hs_errf(&err, HS_ENOMEM, "out of memory");
        }
        if (!rc) {
            print_grouping(groups, by);
            rc = ch ? report_cheapest(groups, gkey, x, y, pass, n, cost, my, needs, n_needs, top, &missing, &err)
                    : report_pareto(groups, gkey, x, y, pass, front, n, mx, my, needs, n_needs, &err);
        }
        free(x), free(y), free(front), free(pass);
        hs_strs_free(gkey, gkey ? n : 0);
        if (rc) goto fail;
        if (ch && missing) {
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
    hs_eprintf("hetsim: %s\n", err.msg[0] ? err.msg : hs_strerror(rc));
    hs_sweep_destroy(groups);
    hs_sweep_destroy(probes);
    return hs_cli_exit_code(rc);
}
