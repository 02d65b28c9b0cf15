/* plan_opts.c - planners' options: "key=value,..." text through the schema
 * each planner declares (hs_planner_ops.opts), and the workload's length
 * statistics planners plan for; see plan.h.  Apart from the
 * registry (plan.c), so that planners depend on it and not on the list
 * that names them. */
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"

int hs_planner_opts(const hs_planner_ops *p, const char *text, void *blob, hs_err *err)
{
    char buf[1024], *save = NULL, *tok, where[96];
    if (p->opts) hs_conf_defaults(blob, p->opts);
    if (!text || !*text) return 0;
    if (!p->opts) return hs_errf(err, HS_EINVAL, "plan_opts: planner %s takes no options", p->name);
    if (strlen(text) >= sizeof buf)
        return hs_errf(err, HS_ERANGE, "plan_opts: longer than %zu characters", sizeof buf - 1);
    strcpy(buf, text);
    snprintf(where, sizeof where, "plan_opts (planner %s)", p->name);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int rc;
        if (!eq) return hs_errf(err, HS_EINVAL, "plan_opts: \"%s\" is not key=value", tok);
        *eq = 0;
        if (!hs_conf_find(p->opts, tok)) {
            char keys[512], dym[160];
            const char *names[128];
            size_t n = 0;
            int nn = 0;
            keys[0] = 0;
            for (const hs_field *f = p->opts; f->key && n < sizeof keys; f++)
                n += (size_t)snprintf(keys + n, sizeof keys - n, "%s%s", n ? ", " : "", f->key);
            for (const hs_field *f = p->opts; f->key && nn < 128; f++) names[nn++] = f->key;
            return hs_errf(err, HS_EINVAL, "plan_opts: %s: unknown key for planner %s (keys: %s)%s", tok, p->name,
                           keys, hs_str_did_you_mean(dym, sizeof dym, tok, names, nn));
        }
        if ((rc = hs_conf_set(blob, p->opts, tok, eq + 1, where, err))) return rc;
    }
    return 0;
}

void hs_planner_opts_help(const hs_planner_ops *p, FILE *fp, const char *indent)
{
    for (const hs_field *f = p->opts; f && f->key; f++) {
        char def[64];
        if (f->type == HS_F_STRING) snprintf(def, sizeof def, "\"%s\"", f->def_str ? f->def_str : "");
        else snprintf(def, sizeof def, "%g", f->def);
        fprintf(fp, "%s%-12s %-10s %s\n", indent, f->key, def, f->help);
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const int32_t *v, int64_t n, double q)
{
    int64_t k = (int64_t)(q * (double)n + 0.999999999) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

int hs_plan_lengths_get(const hs_workload_cfg *wc, hs_plan_lengths *out, hs_err *err)
{
    hs_source *src = NULL;
    hs_arrival a;
    int32_t *pin = NULL, *pout = NULL;
    int64_t n = 0;
    double sin = 0, sout = 0;
    int rc;
    hs_workload_cfg c = *wc;
    memset(out, 0, sizeof *out);
    if (!c.max_requests || c.max_requests > HS_PLAN_SAMPLE) c.max_requests = HS_PLAN_SAMPLE;
    if (!(pin = malloc(HS_PLAN_SAMPLE * sizeof *pin)) || !(pout = malloc(HS_PLAN_SAMPLE * sizeof *pout))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory (workload length samples)");
        goto out;
    }
    if ((rc = hs_source_open(&src, &c, err))) goto out;
    while (n < HS_PLAN_SAMPLE && (rc = hs_source_next(src, &a, err)) > 0) {
        pin[n] = a.prompt;
        pout[n] = a.output;
        sin += a.prompt;
        sout += a.output;
        n++;
    }
    if (rc < 0) goto out;
    rc = 0;
    if (n == 0) {
        rc = hs_errf(err, HS_EINVAL, "workload: no requests to take prompt and output lengths from");
        goto out;
    }
    qsort(pin, (size_t)n, sizeof *pin, cmp_i32);
    qsort(pout, (size_t)n, sizeof *pout, cmp_i32);
    out->n = n;
    out->in_mean = sin / (double)n;
    out->out_mean = sout / (double)n;
    out->in_p50 = pct(pin, n, 0.5);
    out->in_p90 = pct(pin, n, 0.9);
    out->in_p99 = pct(pin, n, 0.99);
    out->out_p50 = pct(pout, n, 0.5);
    out->out_p90 = pct(pout, n, 0.9);
    out->out_p99 = pct(pout, n, 0.99);
out:
    hs_source_close(src);
    free(pin);
    free(pout);
    return rc;
}
