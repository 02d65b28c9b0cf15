/* sweep_cases.c - the case list of a sweep: options (--config, --set,
 * --grid, --case, --spec, ...), their expansion into cases in a fixed order
 * (list entries in order, each times the grid with its first axis varying
 * slowest), and each case's identity (hs_case_key of its canonical
 * configuration; equal configurations are one case).  Every case's
 * configuration is checked here, before anything runs or any database is
 * opened. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/config.h"
#include "cli/sweep_int.h"
#include "core/conf.h"
#include "core/str.h"
#include "out/sweepdb.h"

static int add_axis(hs_sweep *s, const char *kv, const char *where, hs_err *err)
{
    const char *eq = strchr(kv, '=');
    hs__axis ax;
    double a, b, st;
    char tail;
    if (!eq || eq == kv || !eq[1])
        return hs_errf(err, HS_EINVAL, "%s %s: expected KEY=V1,V2,... or KEY=A:B:STEP", where, kv);
    memset(&ax, 0, sizeof ax);
    if ((size_t)(eq - kv) >= sizeof ax.key) return hs_errf(err, HS_EINVAL, "%s: key too long", where);
    memcpy(ax.key, kv, (size_t)(eq - kv));
    for (int i = 0; i < s->n_axes; i++)
        if (!strcmp(s->axes[i].key, ax.key))
            return hs_errf(err, HS_EINVAL, "%s %s: key %s has two axes", where, kv, ax.key);
    if (sscanf(eq + 1, "%lf:%lf:%lf%c", &a, &b, &st, &tail) == 3) {
        if (!isfinite(a) || !isfinite(b) || !isfinite(st) || st <= 0 || b < a)
            return hs_errf(err, HS_ERANGE, "%s %s: need A <= B and STEP > 0", where, kv);
        /* Count in double first: a huge or infinite count does not fit a long. */
        double nd = floor((b - a) / st + 1e-9) + 1;
        if (!(nd <= 100000)) return hs_errf(err, HS_ERANGE, "%s %s: %.3g values is too many", where, kv, nd);
        long n = (long)nd;
        for (long k = 0; k < n; k++) {
            char buf[64];
            /* a + k*step, printed shortest so 0.1 steps do not read 0.30000000000000004 */
            double v = a + (double)k * st;
            snprintf(buf, sizeof buf, "%.12g", v);
            char *d = hs_xstrdup(buf);
            if (!d || hs_ptrs_push(&ax.vals, &ax.n, d)) goto nomem;
        }
    } else {
        const char *p = eq + 1;
        while (1) {
            const char *c = strchr(p, ',');
            size_t n = c ? (size_t)(c - p) : strlen(p);
            if (!n) {
                hs_strs_free(ax.vals, ax.n);
                return hs_errf(err, HS_EINVAL, "%s %s: empty value", where, kv);
            }
            char *d = malloc(n + 1);
            if (!d) goto nomem;
            memcpy(d, p, n);
            d[n] = '\0';
            if (hs_ptrs_push(&ax.vals, &ax.n, d)) {
                free(d);
                goto nomem;
            }
            if (!c) break;
            p = c + 1;
        }
    }
    {
        hs__axis *g = realloc(s->axes, (size_t)(s->n_axes + 1) * sizeof *g);
        if (!g) goto nomem;
        s->axes = g;
        g[s->n_axes++] = ax;
    }
    return 0;
nomem:
    hs_strs_free(ax.vals, ax.n);
    return hs_errf(err, HS_ENOMEM, "out of memory");
}

static int push_base(hs_sweep *s, const char *flag, const char *v, hs_err *err)
{
    char *a = hs_xstrdup(flag), *b = hs_xstrdup(v);
    if (!a || !b || hs_ptrs_push(&s->base, &s->n_base, a) || hs_ptrs_push(&s->base, &s->n_base, b)) {
        free(b);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    return 0;
}

int hs_sweep_copy_base(hs_sweep *dst, const hs_sweep *src, hs_err *err)
{
    hs_strs_free(dst->base, dst->n_base);
    dst->base = NULL;
    dst->n_base = 0;
    for (int i = 0; i + 1 < src->n_base; i += 2) {
        int rc = push_base(dst, src->base[i], src->base[i + 1], err);
        if (rc) return rc;
    }
    return 0;
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out, hs_err *err)
{
    long long n;
    int rc = hs_parse_int(opt, v, lo, hi, &n, err);
    if (!rc) *out = (int)n;
    return rc;
}

int hs_sweep_option(hs_sweep *s, int argc, char **argv, int *i, hs_err *err)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc;
    if (!strcmp(a, "--retry-failed")) { s->retry_failed = 1; return 1; }
    if (!strcmp(a, "--dry-run")) { s->dry_run = 1; return 1; }
    if (!strcmp(a, "--quiet")) { s->quiet = 1; return 1; }
    if (!strncmp(a, "-j", 2) && a[2]) return (rc = parse_int("-j", a + 2, 1, 4096, &s->jobs, err)) ? rc : 1;
    if (strcmp(a, "--config") && strcmp(a, "--set") && strcmp(a, "--grid") && strcmp(a, "--case") &&
        strcmp(a, "--spec") && strcmp(a, "--db") && strcmp(a, "-j") && strcmp(a, "--jobs") &&
        strcmp(a, "--name") && strcmp(a, "--window"))
        return 0;
    if (!v) return hs_errf(err, HS_EINVAL, "%s needs a value (see hetsim %s --help)", a, s->cmd);
    (*i)++;
    if (!strcmp(a, "--config") || !strcmp(a, "--set")) rc = push_base(s, a, v, err);
    else if (!strcmp(a, "--grid")) rc = add_axis(s, v, "--grid", err);
    else if (!strcmp(a, "--case")) {
        char *d = hs_xstrdup(v);
        rc = !d || hs_ptrs_push(&s->lists, &s->n_lists, d) ? hs_errf(err, HS_ENOMEM, "out of memory") : 0;
    } else if (!strcmp(a, "--spec")) {
        snprintf(s->spec, sizeof s->spec, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--db")) {
        snprintf(s->db, sizeof s->db, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--name")) {
        snprintf(s->name, sizeof s->name, "%s", v);
        rc = 0;
    } else if (!strcmp(a, "--window")) rc = parse_int(a, v, 1, 1 << 20, &s->window, err);
    else rc = parse_int(a, v, 1, 4096, &s->jobs, err);
    return rc ? rc : 1;
}

/* The base configuration: --config files first, then --set in order (the
 * order `hetsim run` applies them). */
static int base_cfg(const hs_sweep *s, hs_run_cfg *c, hs_err *err)
{
    int rc;
    hs_run_cfg_defaults(c);
    for (int i = 0; i < s->n_base; i += 2)
        if (!strcmp(s->base[i], "--config") && (rc = hs_run_cfg_load(c, s->base[i + 1], err)))
            return rc;
    for (int i = 0; i < s->n_base; i += 2)
        if (!strcmp(s->base[i], "--set") && (rc = hs_run_cfg_set(c, s->base[i + 1], "--set", err)))
            return rc;
    return 0;
}

/* A JSON value as it would be typed after --set KEY=. */
static int json_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) snprintf(buf, cap, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "%d", cJSON_IsTrue(v) ? 1 : 0);
    else if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.17g", v->valuedouble);
    else return -1;
    /* Prefer the short form when it reads back the same number. */
    if (cJSON_IsNumber(v)) {
        char s12[64];
        snprintf(s12, sizeof s12, "%.12g", v->valuedouble);
        if (strtod(s12, NULL) == v->valuedouble) snprintf(buf, cap, "%s", s12);
    }
    return 0;
}

/* Reads --spec into base sets, axes and list entries. */
static int load_spec(hs_sweep *s, hs_err *err)
{
    cJSON *root, *it;
    int rc = 0;
    char val[1200], kv[1400];
    if ((rc = hs_json_load(s->spec, &root, err))) return rc;
    if (!cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON object with set, grid, list", s->spec);
        goto out;
    }
    cJSON_ArrayForEach(it, root) {
        if (strcmp(it->string, "set") && strcmp(it->string, "grid") && strcmp(it->string, "list")) {
            rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\" (set, grid, list)", s->spec, it->string);
            goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "set"))) {
        cJSON *x;
        if (!cJSON_IsObject(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: set: expected an object", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(x, it) {
            if (json_text(x, val, sizeof val)) {
                rc = hs_errf(err, HS_EPARSE, "%s: set.%s: expected a number, string or bool", s->spec, x->string);
                goto out;
            }
            snprintf(kv, sizeof kv, "%s=%s", x->string, val);
            if ((rc = push_base(s, "--set", kv, err))) goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "grid"))) {
        cJSON *x;
        if (!cJSON_IsObject(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: grid: expected an object of arrays", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(x, it) {
            cJSON *y;
            size_t len;
            char *joined;
            if (!cJSON_IsArray(x) || !cJSON_GetArraySize(x)) {
                rc = hs_errf(err, HS_EPARSE, "%s: grid.%s: expected a non-empty array", s->spec, x->string);
                goto out;
            }
            /* Reuse add_axis on "key=v1,v2" unless a value holds a comma. */
            len = strlen(x->string) + 2;
            cJSON_ArrayForEach(y, x) {
                if (json_text(y, val, sizeof val) || strchr(val, ',')) {
                    rc = hs_errf(err, HS_EPARSE, "%s: grid.%s: values must be numbers, bools or strings "
                                 "without commas", s->spec, x->string);
                    goto out;
                }
                len += strlen(val) + 1;
            }
            joined = malloc(len);
            if (!joined) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                goto out;
            }
            size_t o = (size_t)snprintf(joined, len, "%s=", x->string);
            cJSON_ArrayForEach(y, x) {
                json_text(y, val, sizeof val);
                o += (size_t)snprintf(joined + o, len - o, "%s%s", y == x->child ? "" : ",", val);
            }
            rc = add_axis(s, joined, s->spec, err);
            free(joined);
            if (rc) goto out;
        }
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "list"))) {
        cJSON *e;
        int k = 0;
        if (!cJSON_IsArray(it)) {
            rc = hs_errf(err, HS_EPARSE, "%s: list: expected an array of objects", s->spec);
            goto out;
        }
        cJSON_ArrayForEach(e, it) {
            cJSON *x;
            char *entry = hs_xstrdup("");
            if (!cJSON_IsObject(e) || !entry) {
                free(entry);
                rc = hs_errf(err, HS_EPARSE, "%s: list[%d]: expected an object", s->spec, k);
                goto out;
            }
            cJSON_ArrayForEach(x, e) {
                size_t n;
                char *g;
                if (json_text(x, val, sizeof val) || strchr(val, ';')) {
                    free(entry);
                    rc = hs_errf(err, HS_EPARSE, "%s: list[%d].%s: expected a number, bool or string without ';'",
                                 s->spec, k, x->string);
                    goto out;
                }
                n = strlen(entry) + strlen(x->string) + strlen(val) + 3;
                g = realloc(entry, n);
                if (!g) {
                    free(entry);
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
                    goto out;
                }
                entry = g;
                snprintf(entry + strlen(entry), n - strlen(entry), "%s%s=%s", entry[0] ? ";" : "", x->string, val);
            }
            if (hs_ptrs_push(&s->lists, &s->n_lists, entry)) {
                free(entry);
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                goto out;
            }
            k++;
        }
    }
out:
    cJSON_Delete(root);
    return rc;
}

/* A value as JSON: a number when the whole text is one, else a string. */
static cJSON *param_value(const char *v)
{
    char *end;
    double d = strtod(v, &end);
    if (end != v && !*end && isfinite(d)) return cJSON_CreateNumber(d);
    return cJSON_CreateString(v);
}

int hs_sweep_add_case(hs_sweep *s, const char *const *sets, int n, int *pos, hs_err *err)
{
    hs_run_cfg *cfg = malloc(sizeof *cfg);
    hs__case c;
    cJSON *params = NULL;
    char *json = NULL, where[64];
    int rc;
    size_t tl = 1;
    memset(&c, 0, sizeof c);
    if (!cfg) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = base_cfg(s, cfg, err))) goto out;
    snprintf(where, sizeof where, "case %d", s->n_cases + 1);
    for (int i = 0; i < n; i++)
        if ((rc = hs_run_cfg_set(cfg, sets[i], where, err))) goto out;
    hs_run_cfg_finish(cfg);
    {
        hs_err ce = {0};
        if (hs_run_cfg_check(cfg, &ce) && !(c.check = hs_xstrdup(ce.msg[0] ? ce.msg : "configuration error"))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (!s->db[0]) snprintf(s->db, sizeof s->db, "%s", cfg->db);
    /* Identity: the configuration that decides the simulated results. */
    cfg->db[0] = '\0';
    cfg->label[0] = '\0';
    json = hs_run_cfg_json(cfg);
    params = cJSON_CreateObject();
    c.sets = calloc((size_t)(n > 0 ? n : 1), sizeof *c.sets);
    if (!json || !params || !c.sets) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    hs_case_key(json, c.key);
    for (int i = 0; i < s->n_cases; i++)
        if (!strcmp(s->cases[i].key, c.key)) {
            *pos = i;
            goto out;   /* the same configuration: one case */
        }
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(sets[i], '=');
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(params, key);  /* the later setting wins */
        cJSON_AddItemToObject(params, key, param_value(eq + 1));
        if (!(c.sets[c.n_sets] = hs_xstrdup(sets[i]))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        c.n_sets++;
        tl += strlen(sets[i]) + 1;
    }
    c.params = cJSON_PrintUnformatted(params);
    c.text = malloc(tl);
    if (!c.params || !c.text) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    c.text[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strcat(c.text, " ");
        strcat(c.text, sets[i]);
    }
    {
        hs__case *g = realloc(s->cases, (size_t)(s->n_cases + 1) * sizeof *g);
        if (!g) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        s->cases = g;
        *pos = s->n_cases;
        g[s->n_cases++] = c;
        memset(&c, 0, sizeof c);
    }
out:
    hs_strs_free(c.sets, c.n_sets);
    free(c.params);
    free(c.text);
    free(c.check);
    cJSON_Delete(params);
    free(json);
    free(cfg);
    return rc;
}

int hs_sweep_expand(hs_sweep *s, hs_err *err)
{
    int rc, n_list = s->n_lists ? s->n_lists : 1, pos;
    int *odo = NULL;
    char **sets = NULL;
    int cap = 0;
    if (s->spec[0] && (rc = load_spec(s, err))) return rc;
    n_list = s->n_lists ? s->n_lists : 1;
    odo = calloc((size_t)s->n_axes + 1, sizeof *odo);
    if (!odo) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int li = 0; li < n_list; li++) {
        /* Split the list entry "k=v;k=v". */
        char *entry = s->n_lists ? hs_xstrdup(s->lists[li]) : hs_xstrdup("");
        int n_entry = 0;
        if (!entry) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        cap = 0;
        for (char *p = entry; *p; p++) cap += *p == ';';
        cap += 1 + s->n_axes;
        free(sets);
        sets = calloc((size_t)cap, sizeof *sets);
        if (!sets) {
            free(entry);
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        for (char *p = entry, *q; *p; p = q) {
            q = strchr(p, ';');
            if (q) *q++ = '\0';
            else q = p + strlen(p);
            if (!*p) continue;
            if (!strchr(p, '=') || *p == '=') {
                rc = hs_errf(err, HS_EINVAL, "--case \"%s\": \"%s\" is not KEY=VALUE", s->lists[li], p);
                free(entry);
                goto out;
            }
            sets[n_entry++] = p;
        }
        memset(odo, 0, ((size_t)s->n_axes + 1) * sizeof *odo);
        while (1) {
            char kvbuf[64][1200];
            int n = n_entry;
            if (s->n_axes > 64) {
                free(entry);
                rc = hs_errf(err, HS_ERANGE, "at most 64 grid axes");
                goto out;
            }
            for (int a = 0; a < s->n_axes; a++) {
                snprintf(kvbuf[a], sizeof kvbuf[a], "%s=%s", s->axes[a].key, s->axes[a].vals[odo[a]]);
                sets[n++] = kvbuf[a];
            }
            if ((rc = hs_sweep_add_case(s, (const char *const *)sets, n, &pos, err))) {
                free(entry);
                goto out;
            }
            /* Odometer: the last axis varies fastest. */
            int a = s->n_axes - 1;
            while (a >= 0 && ++odo[a] == s->axes[a].n) odo[a--] = 0;
            if (a < 0) break;
        }
        free(entry);
    }
    rc = 0;
out:
    free(sets);
    free(odo);
    return rc;
}

