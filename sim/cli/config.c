/* config.c - the run configuration; see config.h. */
#include "cli/config.h"

#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "core/str.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "plan/plan.h"

static const hs_field top_fields[] = {
    HS_FIELD_STR(hs_run_cfg, model, 0, "llama-2-70b", "model name (models/) or JSON path"),
    HS_FIELD_STR(hs_run_cfg, cluster, 0, "default", "cluster name (profiles/clusters/) or JSON path"),
    HS_FIELD_STR(hs_run_cfg, policy, 0, "", "runtime policy (hetsim list policies; default: the first)"),
    HS_FIELD_STR(hs_run_cfg, router, 0, "lor", "router (hetsim list routers)"),
    HS_FIELD_STR(hs_run_cfg, planner, 0, "", "planner (hetsim list planners; default: the first)"),
    HS_FIELD_STR(hs_run_cfg, deployment, 0, "", "deployment JSON to replay instead of planning"),
    HS_FIELD_STR(hs_run_cfg, emit_deployment, 0, "", "write the deployment used to this file"),
    HS_FIELD_STR(hs_run_cfg, emit_schedule, 0, "", "write the executed schedule (JSON lines) to this file"),
    HS_FIELD_STR(hs_run_cfg, emit_replicas, 0, "0", "replicas whose schedule is written, e.g. 0,2"),
    HS_FIELD_NUM(hs_run_cfg, tp, HS_F_INT, 0, 0, 0, HS_MAX_TP, "tensor-parallel degree (0: smallest that fits)"),
    HS_FIELD_NUM(hs_run_cfg, pp, HS_F_INT, 0, 1, 1, HS_MAX_PP, "pipeline stages"),
    HS_FIELD_NUM(hs_run_cfg, bits, HS_F_INT, 0, 16, 3, 16, "weight bits: 16, 8, 4, 3"),
    HS_FIELD_NUM(hs_run_cfg, seed, HS_F_I64, 0, 1, 0, 9007199254740991.0, "random seed"),
    HS_FIELD_STR(hs_run_cfg, db, 0, "results/hetsim.db", "SQLite results database"),
    HS_FIELD_STR(hs_run_cfg, label, 0, "", "free-form label stored with the run"),
    HS_FIELD_NUM(hs_run_cfg, write_requests, HS_F_BOOL, 0, 1, 0, 1, "store one row per request"),
    HS_FIELD_NUM(hs_run_cfg, max_replicas, HS_F_INT, 0, 0, 0, 1 << 20, "cap on planned replicas (0: all GPUs)"),
    HS_FIELD_NUM(hs_run_cfg, prefill_replicas, HS_F_INT, 0, 0, 0, 1 << 20, "disaggregate: this many prefill replicas, the rest decode (0: colocated)"),
    HS_FIELD_NUM(hs_run_cfg, sample_s, HS_F_DOUBLE, 0, 10, 0, 1e9, "simulated seconds between per-replica utilisation/KV samples (table samples; 0: none)"),
    HS_FIELD_STR(hs_run_cfg, plan_opts, 0, "", "the planner's options key=value,... (hetsim list planners)"),
    {"workload", HS_F_SKIP, 0, 0, 0, 0, 0, 0, NULL, "section"},
    {"engine", HS_F_SKIP, 0, 0, 0, 0, 0, 0, NULL, "section"},
    {"perf", HS_F_SKIP, 0, 0, 0, 0, 0, 0, NULL, "section"},
    {"slo", HS_F_SKIP, 0, 0, 0, 0, 0, 0, NULL, "section"},
    {0},
};

static const hs_field slo_fields[] = {
    HS_FIELD_NUM(hs_slo, ttft_ms, HS_F_DOUBLE, 0, 2000, 0, 1e9, "TTFT target, ms (0: none)"),
    HS_FIELD_NUM(hs_slo, tpot_ms, HS_F_DOUBLE, 0, 100, 0, 1e9, "TPOT target, ms (0: none)"),
    HS_FIELD_NUM(hs_slo, e2el_ms, HS_F_DOUBLE, 0, 0, 0, 1e12, "end-to-end target, ms (0: none)"),
    {0},
};

/* Outside the accepted range of workload.seed, so only "unset" has it. */
#define SEED_UNSET (UINT64_C(1) << 63)

void hs_run_cfg_defaults(hs_run_cfg *c)
{
    memset(c, 0, sizeof *c);
    hs_conf_defaults(c, top_fields);
    hs_workload_defaults(&c->workload);
    c->workload.seed = SEED_UNSET;
    /* The registries' first entries are the defaults, so no name of a
     * plug-in is written here. */
    snprintf(c->policy, sizeof c->policy, "%s", hs_policies[0]->name);
    snprintf(c->planner, sizeof c->planner, "%s", hs_planners[0]->name);
    hs_engine_cfg_defaults(&c->engine);
    hs_policies_opts_defaults(c->popts);
    hs_perf_cfg_defaults(&c->perf);
    hs_conf_defaults(&c->slo, slo_fields);
}

int hs_run_cfg_load(hs_run_cfg *c, const char *path, hs_err *err)
{
    cJSON *root, *it;
    char where[1100];
    hs_run_cfg *n;
    int rc;
    if ((rc = hs_json_load(path, &root, err))) return rc;
    /* All or nothing: the file's sections go into a copy (plain data),
     * which replaces c only when every one of them was good. */
    if (!(n = malloc(sizeof *n))) {
        cJSON_Delete(root);
        return hs_errf(err, HS_ENOMEM, "%s: out of memory", path);
    }
    *n = *c;
    rc = hs_conf_fill(n, top_fields, root, path, err);
    if (!rc && (it = cJSON_GetObjectItemCaseSensitive(root, "engine"))) {
        snprintf(where, sizeof where, "%s: engine", path);
        rc = hs_run_cfg_engine_json(n, it, where, 0, err);
    }
    if (!rc && (it = cJSON_GetObjectItemCaseSensitive(root, "perf"))) {
        snprintf(where, sizeof where, "%s: perf", path);
        rc = hs_conf_fill(&n->perf, hs_perf_cfg_fields, it, where, err);
    }
    if (!rc && (it = cJSON_GetObjectItemCaseSensitive(root, "slo"))) {
        snprintf(where, sizeof where, "%s: slo", path);
        rc = hs_conf_fill(&n->slo, slo_fields, it, where, err);
    }
    if (!rc && (it = cJSON_GetObjectItemCaseSensitive(root, "workload"))) {
        snprintf(where, sizeof where, "%s: workload", path);
        rc = hs_workload_conf(&n->workload, it, where, err);
    }
    if (!rc) *c = *n;
    free(n);
    cJSON_Delete(root);
    return rc;
}

void hs_run_cfg_finish(hs_run_cfg *c)
{
    if (c->workload.seed == SEED_UNSET) c->workload.seed = (uint64_t)c->seed;
}

static int cfg_set(hs_run_cfg *c, const char *kv, const char *where, hs_err *err);

/* Remembers the keys given on the command line (",key,key,"), so that
 * settings a deployment carries never override them. */
int hs_run_cfg_set(hs_run_cfg *c, const char *kv, const char *where, hs_err *err)
{
    const char *eq = strchr(kv, '=');
    int rc = cfg_set(c, kv, where, err);
    size_t have = strlen(c->given), n = eq ? (size_t)(eq - kv) : 0;
    if (!rc && n && have + n + 2 < sizeof c->given) {
        if (!have) c->given[have++] = ',';
        memcpy(c->given + have, kv, n);
        c->given[have + n] = ',';
        c->given[have + n + 1] = '\0';
    }
    return rc;
}

int hs_run_cfg_given(const hs_run_cfg *c, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = c->given; (p = strstr(p, key)); p += n)
        if (p > c->given && p[-1] == ',' && p[n] == ',') return 1;
    return 0;
}

static int cfg_set(hs_run_cfg *c, const char *kv, const char *where, hs_err *err)
{
    char key[128];
    const char *eq = strchr(kv, '='), *dot;
    size_t n;
    if (!eq || eq == kv) return hs_errf(err, HS_EINVAL, "%s %s: expected key=value", where, kv);
    n = (size_t)(eq - kv);
    if (n >= sizeof key) return hs_errf(err, HS_EINVAL, "%s: key too long", where);
    memcpy(key, kv, n);
    key[n] = '\0';
    dot = strchr(key, '.');
    if (dot) {
        const char *sub = dot + 1;
        size_t sn = (size_t)(dot - key);
        char w[160];
        snprintf(w, sizeof w, "%s %.*s", where, (int)sn, key);
        if (sn == 6 && !strncmp(key, "engine", 6)) {
            int rc;
            if (hs_conf_find(hs_engine_cfg_fields, sub))
                return hs_conf_set(&c->engine, hs_engine_cfg_fields, sub, eq + 1, w, err);
            rc = hs_policies_opt_set(c->popts, sub, eq + 1, w, err);
            if (rc == HS_ENOTFOUND) {
                /* Candidates: the engine's keys and every policy's. */
                const char *names[512];
                char dym[160];
                int nn = 0;
                for (const hs_field *f = hs_engine_cfg_fields; f->key && nn < 512; f++) names[nn++] = f->key;
                for (int i = 0; hs_policies[i]; i++)
                    for (const hs_field *f = hs_policies[i]->opts; f && f->key && nn < 512; f++) names[nn++] = f->key;
                return hs_errf(err, HS_EINVAL, "%s: unknown key \"%s\"%s (hetsim run --help lists the engine's and the policies' keys)",
                               w, sub, hs_str_did_you_mean(dym, sizeof dym, sub, names, nn));
            }
            return rc;
        }
        if (sn == 4 && !strncmp(key, "perf", 4))
            return hs_conf_set(&c->perf, hs_perf_cfg_fields, sub, eq + 1, w, err);
        if (sn == 3 && !strncmp(key, "slo", 3))
            return hs_conf_set(&c->slo, slo_fields, sub, eq + 1, w, err);
        if (sn == 8 && !strncmp(key, "workload", 8)) {
            int rc = hs_workload_set(&c->workload, sub, eq + 1, err);
            return rc ? hs_err_prefix(err, "%s: ", where) : 0;
        }
        {
            static const char *const secs[] = {"workload", "engine", "perf", "slo"};
            char sec[64], dym[160];
            snprintf(sec, sizeof sec, "%.*s", (int)sn, key);
            return hs_errf(err, HS_EINVAL, "%s %s: unknown section%s (workload, engine, perf, slo)", where, key,
                           hs_str_did_you_mean(dym, sizeof dym, sec, secs, 4));
        }
    }
    return hs_conf_set(c, top_fields, key, eq + 1, where, err);
}

/* One JSON value as the text --set would give. */
static int json_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsBool(v)) snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "1" : "0");
    else if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, cap, "%s", v->valuestring);
    else return -1;
    return 0;
}

int hs_run_cfg_engine_json(hs_run_cfg *c, const cJSON *obj, const char *where, int skip_given,
                           hs_err *err)
{
    hs_engine_cfg eng = c->engine;
    hs_popts po[HS_MAX_POLICIES];
    cJSON *core;
    int rc = 0;
    if (!cJSON_IsObject(obj)) return hs_errf(err, HS_EPARSE, "%s: not a JSON object", where);
    if (!(core = cJSON_CreateObject())) return hs_errf(err, HS_ENOMEM, "%s: out of memory", where);
    memcpy(po, c->popts, sizeof po);
    /* The engine's own keys go through its schema in one go; the
     * policies' keys one by one; everything lands only if all are good. */
    for (const cJSON *it = obj->child; it && !rc; it = it->next) {
        char key[160], val[512];
        snprintf(key, sizeof key, "engine.%s", it->string ? it->string : "");
        if (skip_given && hs_run_cfg_given(c, key)) continue;
        if (hs_conf_find(hs_engine_cfg_fields, it->string ? it->string : "")) {
            cJSON *dup = cJSON_Duplicate(it, 1);
            if (!dup) rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", where);
            else cJSON_AddItemToObject(core, it->string, dup);
            continue;
        }
        if (!hs_policies_has_opt(it->string ? it->string : "")) {
            rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, it->string ? it->string : "");
            break;
        }
        if (json_text(it, val, sizeof val)) {
            rc = hs_errf(err, HS_EPARSE, "%s: %s: expected a number, a bool or a string", where, it->string);
            break;
        }
        rc = hs_policies_opt_set(po, it->string, val, where, err);
    }
    if (!rc) rc = hs_conf_fill(&eng, hs_engine_cfg_fields, core, where, err);
    cJSON_Delete(core);
    if (rc) return rc;
    c->engine = eng;
    memcpy(c->popts, po, sizeof po);
    return 0;
}

static void add_fields(cJSON *o, const void *obj, const hs_field *f)
{
    for (; f->key; f++) {
        const char *p = (const char *)obj + f->offset;
        switch (f->type) {
        case HS_F_INT: cJSON_AddNumberToObject(o, f->key, *(const int *)p); break;
        case HS_F_BOOL: cJSON_AddBoolToObject(o, f->key, *(const int *)p); break;
        case HS_F_I64: cJSON_AddNumberToObject(o, f->key, (double)*(const int64_t *)p); break;
        case HS_F_DOUBLE: cJSON_AddNumberToObject(o, f->key, *(const double *)p); break;
        case HS_F_STRING: cJSON_AddStringToObject(o, f->key, p); break;
        case HS_F_SKIP: break;
        }
    }
}

static void add_lendist(cJSON *o, const char *name, const hs_lendist *d)
{
    cJSON *x = cJSON_AddObjectToObject(o, name);
    cJSON_AddStringToObject(x, "kind", d->kind);
    cJSON_AddNumberToObject(x, "mean", d->mean);
    cJSON_AddNumberToObject(x, "std", d->std);
    cJSON_AddNumberToObject(x, "min", d->min);
    cJSON_AddNumberToObject(x, "max", d->max);
}

struct popt_ctx {
    cJSON *o;
    const hs_run_cfg *c;
};

/* A policy's key with its value, as the first policy declaring it holds it. */
static void add_popt(void *ctx, const hs_policy_ops *p, const hs_field *f, const char *owners)
{
    const struct popt_ctx *x = ctx;
    hs_field one[2] = {*f, {0}};
    (void)owners;
    add_fields(x->o, hs_policy_opts_of(x->c->popts, p), one);
}

char *hs_run_cfg_json(const hs_run_cfg *c)
{
    cJSON *root = cJSON_CreateObject(), *w;
    const hs_workload_cfg *wc = &c->workload;
    char *txt;
    if (!root) return NULL;
    add_fields(root, c, top_fields);
    w = cJSON_AddObjectToObject(root, "workload");
    cJSON_AddStringToObject(w, "kind", wc->kind);
    cJSON_AddStringToObject(w, "path", wc->path);
    cJSON_AddStringToObject(w, "preset", wc->preset);
    cJSON_AddStringToObject(w, "arrival", wc->arrival);
    cJSON_AddNumberToObject(w, "rate", wc->rate);
    cJSON_AddNumberToObject(w, "cv", wc->cv);
    add_lendist(w, "prompt", &wc->prompt);
    add_lendist(w, "output", &wc->output);
    cJSON_AddNumberToObject(w, "max_requests", (double)wc->max_requests);
    cJSON_AddNumberToObject(w, "duration", wc->duration);
    cJSON_AddNumberToObject(w, "window_start", wc->window_start);
    cJSON_AddNumberToObject(w, "window_end", wc->window_end);
    cJSON_AddNumberToObject(w, "time_scale", wc->time_scale);
    cJSON_AddNumberToObject(w, "max_prompt", wc->max_prompt);
    cJSON_AddNumberToObject(w, "fit_context", wc->fit_context);
    cJSON_AddNumberToObject(w, "seed", (double)wc->seed);
    w = cJSON_AddObjectToObject(root, "engine");
    add_fields(w, &c->engine, hs_engine_cfg_fields);
    hs_policies_opts_each(add_popt, (void *)&(struct popt_ctx){w, c});
    add_fields(cJSON_AddObjectToObject(root, "perf"), &c->perf, hs_perf_cfg_fields);
    add_fields(cJSON_AddObjectToObject(root, "slo"), &c->slo, slo_fields);
    txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return txt;
}

static void help_table(FILE *fp, const char *prefix, const hs_field *f)
{
    for (; f->key; f++) {
        char key[64], def[64];
        if (f->type == HS_F_SKIP) continue;
        snprintf(key, sizeof key, "%s%s", prefix, f->key);
        if (f->type == HS_F_STRING) snprintf(def, sizeof def, "\"%s\"", f->def_str ? f->def_str : "");
        else snprintf(def, sizeof def, "%g", f->def);
        fprintf(fp, "  %-28s %-22s %s\n", key, def, f->help);
    }
}

/* A policy's key: its default and help, and which policies read it. */
static void help_popt(void *ctx, const hs_policy_ops *p, const hs_field *f, const char *owners)
{
    hs_field one[2] = {*f, {0}};
    char prefix[64];
    (void)p;
    (void)owners;
    snprintf(prefix, sizeof prefix, "engine.");
    help_table(ctx, prefix, one);
}

void hs_run_cfg_help(FILE *fp)
{
    fprintf(fp, "Configuration keys (--config FILE sets them as JSON, --set KEY=VALUE one at a time):\n");
    fprintf(fp, "  %-28s %-22s %s\n", "key", "default", "meaning");
    help_table(fp, "", top_fields);
    help_table(fp, "engine.", hs_engine_cfg_fields);
    hs_policies_opts_each(help_popt, fp);
    help_table(fp, "perf.", hs_perf_cfg_fields);
    help_table(fp, "slo.", slo_fields);
    fprintf(fp, "  %-28s %-22s %s\n", "workload.kind", "\"synthetic\"", "azure, sharegpt-json, sharegpt-csv, synthetic");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.path", "\"\"", "trace file");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.preset", "\"azure-conv\"", "azure-conv, azure-code, S, T, G, C1, C2");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.arrival", "\"poisson\"", "poisson, gamma, constant");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.rate", "preset", "requests/s for generated arrivals");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.cv", "preset", "gap coefficient of variation (gamma)");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.prompt.{kind,mean,std,min,max}", "", "prompt length distribution");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.output.{kind,mean,std,min,max}", "", "output length distribution");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.max_requests", "preset", "stop after this many requests (0: no limit)");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.duration", "0", "synthetic: seconds of arrivals");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.window_start/end", "0", "trace: seconds from the first request");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.time_scale", "1", "2 = arrivals twice as fast");
    fprintf(fp, "  %-28s %-22s %s\n", "workload.fit_context", "0", "tokens: shorten prompts so prompt + output fits (Vidur's rule), 0: off");
}

int hs_run_cfg_check_bits(const hs_run_cfg *c, hs_err *err)
{
    if (c->engine.kv_bits != 16 && c->engine.kv_bits != 8)
        return hs_errf(err, HS_ERANGE, "engine.kv_bits: %d is not 16 or 8", c->engine.kv_bits);
    if (c->bits != 16 && c->bits != 8 && c->bits != 4 && c->bits != 3)
        return hs_errf(err, HS_ERANGE, "bits: %d is not 16, 8, 4 or 3", c->bits);
    return 0;
}

/* The registries' names by index (NULL past the end), for messages. */
static const char *policy_at(int i) { return hs_policies[i] ? hs_policies[i]->name : NULL; }
static const char *planner_at(int i) { return hs_planners[i] ? hs_planners[i]->name : NULL; }
static const char *router_at(int i) { return hs_routers[i] ? hs_routers[i]->name : NULL; }

/* The message for a name no registry entry has, with the did-you-mean. */
static int unknown_name(const char *kind, const char *list, const char *name, const char *(*at)(int),
                        hs_err *err)
{
    const char *names[128];
    char dym[160];
    int n = 0;
    while (n < 128 && at(n)) {
        names[n] = at(n);
        n++;
    }
    return hs_errf(err, HS_ENOTFOUND, "%s: unknown %s \"%s\"%s (see hetsim list %s)", kind, kind, name,
                   hs_str_did_you_mean(dym, sizeof dym, name, names, n), list);
}

int hs_check_policy(const char *name, hs_err *err)
{
    return hs_policy_find(name) ? 0 : unknown_name("policy", "policies", name, policy_at, err);
}

int hs_check_planner(const char *name, hs_err *err)
{
    return hs_planner_find(name) ? 0 : unknown_name("planner", "planners", name, planner_at, err);
}

int hs_check_router(const char *name, hs_err *err)
{
    return hs_router_find(name) ? 0 : unknown_name("router", "routers", name, router_at, err);
}

int hs_check_perf_model(const char *name, hs_err *err)
{
    if (hs_perf_find(name)) return 0;
    return hs_errf(err, HS_ENOTFOUND, "perf.model: unknown latency model \"%s\"", name);
}

int hs_run_cfg_check(const hs_run_cfg *c, hs_err *err)
{
    hs_model m;
    int rc;
    /* A deployment names its own model, cluster and maybe policy. */
    if (!c->deployment[0]) {
        if ((rc = hs_check_policy(c->policy, err)) || (rc = hs_check_planner(c->planner, err)) ||
            (rc = hs_model_find(&m, c->model, err)) || (rc = hs_cluster_check(c->cluster, err)))
            return rc;
    }
    if ((rc = hs_check_router(c->router, err)) || (rc = hs_check_perf_model(c->perf.model, err)) ||
        (rc = hs_perf_check_kernels(c->perf.quant_kernels, NULL, err)))
        return rc;
    if ((rc = hs_run_cfg_check_bits(c, err))) return rc;
    /* Opening the workload checks its settings and its trace's header;
     * nothing is read past that. */
    {
        hs_source *src = NULL;
        rc = hs_source_open(&src, &c->workload, err);
        hs_source_close(src);
        if (rc) return rc;
    }
    return 0;
}
