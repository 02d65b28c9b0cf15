/* run.c - `hetsim run` and `hetsim plan`: configuration, planning, the
 * simulation and the results database.
 *
 * Order matters for "bad input never writes a database": everything that
 * can be checked up front (configuration, model, cluster, deployment,
 * memory fit, workload settings) is checked before the database is opened;
 * errors found while streaming the trace roll the run's transaction back,
 * and a database file this run created is removed again. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "core/str.h"
#include "core/conf.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "out/chrome.h"
#include "out/db.h"
#include "out/metrics.h"
#include "plan/plan.h"
#include "policy/policy.h"
#include "serve/deploy.h"
#include "serve/engine.h"
#include "core/time.h"

#ifndef HS_GIT_REV
#define HS_GIT_REV ""
#endif

int hs_cli_exit_code(int rc)
{
    return hs_exit_code(rc);
}

/* The registered names, comma-separated, wrapped after col characters. */
static void names_line(FILE *fp, const char *lead, const char *(*name)(int), int col)
{
    int w = fprintf(fp, "%s", lead);
    for (int i = 0; name(i); i++) {
        const char *n = name(i);
        if (i && w + (int)strlen(n) + 2 > col) w = fprintf(fp, ",\n%23s%s", "", n) - 2;
        else w += fprintf(fp, "%s%s", i ? ", " : "", n);
    }
    fputc('\n', fp);
}

static const char *policy_name(int i) { return hs_policies[i] ? hs_policies[i]->name : NULL; }

/* The registered policies whose int capability flag at offset `flag` of
 * hs_policy_ops is set, comma-separated (for messages that suggest one). */
static void policies_with(size_t flag, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; hs_policies[i]; i++) {
        int on;
        memcpy(&on, (const char *)hs_policies[i] + flag, sizeof on);
        if (on && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", hs_policies[i]->name);
    }
    if (!len) snprintf(buf, cap, "none registered");
}
static const char *planner_name(int i) { return hs_planners[i] ? hs_planners[i]->name : NULL; }
static const char *router_name(int i) { return hs_routers[i] ? hs_routers[i]->name : NULL; }

/* " (did you mean ...)" for an unknown registered name. */
static const char *dym_reg(char *buf, size_t cap, const char *(*name)(int), const char *want)
{
    const char *names[128];
    int n = 0;
    while (n < 128 && name(n)) {
        names[n] = name(n);
        n++;
    }
    return hs_str_did_you_mean(buf, cap, want, names, n);
}

static void run_usage(FILE *fp, const char *cmd)
{
    fprintf(fp,
            "usage: hetsim %s [options]\n"
            "\n"
            "options (flags override --config; later flags override earlier ones):\n"
            "  --config FILE        run configuration JSON (keys below)\n"
            "  --set KEY=VALUE      set one key, e.g. --set engine.block_size=32\n"
            "  --model NAME         model (models/NAME.json or a path)\n"
            "  --cluster NAME       cluster (profiles/clusters/NAME.json or a path)\n"
            "  --policy NAME        runtime policy (below)\n"
            "  --router NAME        router (below)\n"
            "  --planner NAME       planner (below)\n"
            "  --deployment FILE    replay a deployment JSON instead of planning\n"
            "  --plan-opts K=V,...  the planner's options (listed with the planners below)\n"
            "  --tp N, --pp N       parallel layout for the planner (tp 0: smallest that fits)\n"
            "  --trace FILE         Azure CSV, ShareGPT JSON or ShareGPT length CSV\n"
            "  --requests N         stop after N requests (0: the whole trace; presets default to 2000)\n"
            "  --rate R             requests/s for generated arrivals\n"
            "  --time-scale X       replay a timed trace X times faster\n"
            "  --seed S             seed of every random choice\n"
            "  --slo-ttft MS, --slo-tpot MS   SLO targets for goodput\n"
            "  --db FILE            results database (default results/hetsim.db)\n"
            "  --no-requests        do not store per-request rows\n"
            "  --label TEXT         label stored with the run\n"
            "  --emit-deployment F  write the deployment used to F\n"
            "  --emit-schedule F    write every iteration of chosen replicas to F (JSON lines,\n"
            "                       for hetsim-exec replay and hetsim validate)\n"
            "  --emit-replicas L    replicas to write, e.g. 0,2 (default 0)\n"
            "  --emit-trace F       write the run's timeline to F as a Chrome trace (Perfetto UI:\n"
            "                       lanes, iterations, preemptions, KV hand-overs; docs/results.md)\n"
            "  --emit-trace-limit N write at most N iterations to it (0: all; the file grows\n"
            "                       with the run, about 230 bytes per iteration)\n"
            "  --json-out F         write the run's metrics to F as one JSON object (the keys of\n"
            "                       benchmark_serving --save-result, the run id, config, deployment)\n"
            "  --quiet              no summary table\n", cmd);
    names_line(fp, "  policies:            ", policy_name, 100);
    names_line(fp, "  planners:            ", planner_name, 100);
    names_line(fp, "  routers:             ", router_name, 100);
    fputc('\n', fp);
    hs_run_cfg_help(fp);
}

/* Picks the trace kind from the file: .json is ShareGPT conversations; a CSV
 * is told apart by its header line. */
int hs_cli_trace_kind(const char *path, char *kind, size_t cap, hs_err *err)
{
    size_t n = strlen(path);
    char line[256];
    FILE *fp;
    if (n > 5 && !strcmp(path + n - 5, ".json")) {
        snprintf(kind, cap, "sharegpt-json");
        return 0;
    }
    fp = fopen(path, "r");
    if (!fp) return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!fgets(line, sizeof line, fp)) line[0] = '\0';
    fclose(fp);
    if (!strncmp(line, "TIMESTAMP", 9)) snprintf(kind, cap, "azure");
    else if (!strncmp(line, "num_prefill_tokens", 18)) snprintf(kind, cap, "sharegpt-csv");
    else
        return hs_errf(err, HS_EPARSE,
                       "%s:1: unrecognised trace header (expected TIMESTAMP,... or num_prefill_tokens,...)",
                       path);
    return 0;
}

/* Output options of `hetsim run` that are not simulation settings (they
 * stay out of the stored configuration, so they never make two runs'
 * cases differ). */
typedef struct run_opts {
    int quiet;
    const char *emit_trace;     /* Chrome trace file, NULL: none */
    int64_t emit_trace_limit;   /* most iterations in it, 0: all */
    const char *json_out;       /* JSON result file, NULL: none */
} run_opts;

/* Parses flags into cfg.  Returns 0, 1 for --help (printed), or an error. */
static int parse_args(int argc, char **argv, const char *cmd, hs_run_cfg *cfg,
                      run_opts *o, hs_err *err)
{
    int rc;
    char buf[1200];
    hs_run_cfg_defaults(cfg);
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) return hs_errf(err, HS_EINVAL, "--config needs a file");
            if ((rc = hs_run_cfg_load(cfg, argv[i + 1], err))) return rc;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *key = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout, cmd);
            return 1;
        }
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(a, "--no-requests")) { cfg->write_requests = 0; continue; }
        if (!strncmp(a, "--", 2) && !v)
            return hs_errf(err, HS_EINVAL, "%s needs a value (see hetsim %s --help)", a, cmd);
        if (!strcmp(a, "--config")) { i++; continue; }
        if (!strcmp(a, "--emit-trace") || !strcmp(a, "--json-out")) {
            if (!*v) return hs_errf(err, HS_EINVAL, "%s needs a file name", a);
            *(!strcmp(a, "--json-out") ? &o->json_out : &o->emit_trace) = v;
            i++;
            continue;
        }
        if (!strcmp(a, "--emit-trace-limit")) {
            char *end;
            long long n;
            errno = 0;
            n = strtoll(v, &end, 10);
            if (end == v || *end || errno || n < 0)
                return hs_errf(err, HS_EINVAL, "--emit-trace-limit: \"%s\" is not a count of iterations (0: all)", v);
            o->emit_trace_limit = n;
            i++;
            continue;
        }
        if (!strcmp(a, "--set")) {
            if ((rc = hs_run_cfg_set(cfg, v, "--set", err))) return rc;
            i++;
            continue;
        }
        if (!strcmp(a, "--trace")) {
            if ((rc = hs_cli_trace_kind(v, cfg->workload.kind, sizeof cfg->workload.kind, err))) return rc;
            snprintf(buf, sizeof buf, "path=%s", v);
            if ((rc = hs_workload_set(&cfg->workload, "path", v, err))) return rc;
            if ((rc = hs_workload_set(&cfg->workload, "kind", cfg->workload.kind, err))) return rc;
            i++;
            continue;
        }
        if (!strcmp(a, "--seed")) {
            snprintf(buf, sizeof buf, "seed=%s", v);
            if ((rc = hs_run_cfg_set(cfg, buf, "--seed", err))) return rc;
            i++;
            continue;
        }
        if (!strcmp(a, "--model")) key = "model";
        else if (!strcmp(a, "--cluster")) key = "cluster";
        else if (!strcmp(a, "--policy")) key = "policy";
        else if (!strcmp(a, "--router")) key = "router";
        else if (!strcmp(a, "--planner")) key = "planner";
        else if (!strcmp(a, "--plan-opts")) key = "plan_opts";
        else if (!strcmp(a, "--deployment")) key = "deployment";
        else if (!strcmp(a, "--emit-deployment")) key = "emit_deployment";
        else if (!strcmp(a, "--emit-schedule")) key = "emit_schedule";
        else if (!strcmp(a, "--emit-replicas")) key = "emit_replicas";
        else if (!strcmp(a, "--tp")) key = "tp";
        else if (!strcmp(a, "--pp")) key = "pp";
        else if (!strcmp(a, "--db")) key = "db";
        else if (!strcmp(a, "--label")) key = "label";
        else if (!strcmp(a, "--requests")) key = "workload.max_requests";
        else if (!strcmp(a, "--rate")) key = "workload.rate";
        else if (!strcmp(a, "--time-scale")) key = "workload.time_scale";
        else if (!strcmp(a, "--slo-ttft")) key = "slo.ttft_ms";
        else if (!strcmp(a, "--slo-tpot")) key = "slo.tpot_ms";
        else
            return hs_errf(err, HS_EINVAL, "unknown option \"%s\" (see hetsim %s --help)", a, cmd);
        snprintf(buf, sizeof buf, "%s=%s", key, v);
        if ((rc = hs_run_cfg_set(cfg, buf, a, err))) return rc;
        i++;
    }
    hs_run_cfg_finish(cfg);
    return 0;
}

/* Everything a run needs before the database: resolved limits, model,
 * cluster, deployment, replicas. */
typedef struct setup {
    hs_model model;
    hs_cluster *cluster;
    hs_deploy deploy;
    hs_replica *replicas;
    const hs_policy_ops *policy;
    const hs_router_ops *router;
    int32_t max_model_len;
    int max_tokens;
} setup;

static void setup_free(setup *s)
{
    if (s->replicas) hs_replicas_free(s->replicas, s->deploy.n);
    hs_deploy_free(&s->deploy);
    hs_cluster_destroy(s->cluster);
    memset(s, 0, sizeof *s);
}

/* A deployment that names its policy (and engine settings) runs it: the
 * schedule is part of the plan.  Its settings go over the configuration
 * file, not over what the command line sets (--policy, --set engine.K). */
static int apply_deploy_policy(hs_run_cfg *cfg, const hs_deploy *d, const char *where, hs_err *err)
{
    cJSON *eng;
    char w[1100];
    int rc;
    if (d->policy[0] && !hs_run_cfg_given(cfg, "policy")) {
        char dym[160];
        if (!hs_policy_find(d->policy))
            return hs_errf(err, HS_ENOTFOUND, "%s: policy: unknown policy \"%s\"%s (see hetsim list policies)",
                           where, d->policy, dym_reg(dym, sizeof dym, policy_name, d->policy));
        snprintf(cfg->policy, sizeof cfg->policy, "%s", d->policy);
    }
    if (!d->engine) return 0;
    if (!(eng = cJSON_Parse(d->engine)))
        return hs_errf(err, HS_EPARSE, "%s: engine: not a JSON object", where);
    snprintf(w, sizeof w, "%s: engine", where);
    /* The command line wins over the deployment. */
    rc = hs_run_cfg_engine_json(cfg, eng, w, 1, err);
    cJSON_Delete(eng);
    return rc;
}

/* The policy's state on the built replicas (replicas_setup).  A
 * deployment with attention workers is set up by the policy that offloads
 * attention even when another runs it, so that `hetsim plan` shows the
 * pooled cache (`run` then refuses the mismatch). */
static int setup_policy_state(setup *s, hs_run_cfg *cfg, hs_err *err)
{
    const hs_policy_ops *owner = s->policy;
    hs_policy_env env;
    if (!owner->attn_offload && s->deploy.n_attn) {
        owner = NULL;
        for (int i = 0; hs_policies[i] && !owner; i++)
            if (hs_policies[i]->attn_offload) owner = hs_policies[i];
    }
    if (!owner || !owner->replicas_setup) return 0;
    env = (hs_policy_env){&s->deploy, &s->model, s->cluster, &cfg->engine, &cfg->perf,
                          hs_policy_opts_of(cfg->popts, owner), owner == s->policy};
    return owner->replicas_setup(s->replicas, s->deploy.n, &env, err);
}

static int setup_build(setup *s, hs_run_cfg *cfg, int build_replicas, hs_err *err)
{
    int rc;
    hs_engine_cfg *ec = &cfg->engine;
    memset(s, 0, sizeof *s);
    if (cfg->deployment[0]) {
        if ((rc = hs_deploy_read(&s->deploy, cfg->deployment, err))) return rc;
        if ((rc = apply_deploy_policy(cfg, &s->deploy, cfg->deployment, err))) goto fail;
    }
    /* from here on the deployment read above is ours: every error goes
     * through fail, which frees it */
    if ((rc = hs_check_policy(cfg->policy, err)) || (rc = hs_check_router(cfg->router, err)) ||
        (rc = hs_check_perf_model(cfg->perf.model, err)) ||
        (rc = hs_perf_check_kernels(cfg->perf.quant_kernels, NULL, err)) || (rc = hs_run_cfg_check_bits(cfg, err)))
        goto fail;
    s->policy = hs_policy_find(cfg->policy);
    s->router = hs_router_find(cfg->router);
    if (cfg->deployment[0]) {
        /* The deployment names its model and cluster, and the planner that
         * made it (so the run records that planner, not the default). */
        snprintf(cfg->model, sizeof cfg->model, "%s", s->deploy.model);
        snprintf(cfg->cluster, sizeof cfg->cluster, "%s", s->deploy.cluster);
        if (s->deploy.planner[0]) snprintf(cfg->planner, sizeof cfg->planner, "%s", s->deploy.planner);
    }
    if ((rc = hs_model_find(&s->model, cfg->model, err))) goto fail;
    if ((rc = hs_cluster_find(&s->cluster, cfg->cluster, err))) goto fail;
    s->max_model_len = ec->max_model_len ? ec->max_model_len : hs_model_max_context(&s->model);
    s->max_tokens = hs_engine_pass_tokens(ec, s->policy, hs_policy_opts_of(cfg->popts, s->policy),
                                          s->max_model_len);
    if (s->max_tokens < 0) {
        rc = hs_errf(err, HS_ERANGE,
                     "engine: one forward pass of %s would exceed %d tokens (lower the policy's batch size, "
                     "engine.max_num_seqs or engine.max_model_len)",
                     s->policy->name, HS_MAX_PASS_TOKENS);
        goto fail;
    }
    if (s->policy->whole_prompts && ec->max_batched_tokens < s->max_model_len) {
        char alt[256];
        policies_with(offsetof(hs_policy_ops, chunks), alt, sizeof alt);
        rc = hs_errf(err, HS_EINVAL,
                     "engine.max_batched_tokens: %d is below the context limit %d (%s prefills whole prompts; a policy that chunks them: %s)",
                     ec->max_batched_tokens, s->max_model_len, s->policy->name, alt);
        goto fail;
    }
    if (!cfg->deployment[0]) {
        const hs_planner_ops *pl = hs_planner_find(cfg->planner);
        hs_plan_req pr;
        if (!pl) {
            rc = hs_check_planner(cfg->planner, err);
            goto fail;
        }
        /* A planner reads the options it declares; one that declares none
         * must not silently ignore them. */
        if (cfg->plan_opts[0] && !pl->opts) {
            rc = hs_errf(err, HS_EINVAL, "plan_opts: planner %s takes no options", pl->name);
            goto fail;
        }
        memset(&pr, 0, sizeof pr);
        pr.model = &s->model;
        pr.cluster = s->cluster;
        pr.engine = ec;
        pr.tp = cfg->tp;
        pr.pp = cfg->pp;
        pr.bits = cfg->bits;
        pr.max_replicas = cfg->max_replicas;
        pr.prefill_replicas = cfg->prefill_replicas;
        pr.max_tokens = s->max_tokens;
        pr.max_model_len = s->max_model_len;
        pr.workload = &cfg->workload;
        pr.slo = &cfg->slo;
        pr.policy = cfg->policy;
        pr.perf = &cfg->perf;
        pr.seed = (uint64_t)cfg->seed;
        pr.opts = cfg->plan_opts;
        if ((rc = pl->plan(&pr, &s->deploy, err))) goto fail;
        /* A planner that chooses the runtime policy says so in the
         * deployment; the forward-pass size follows the new policy. */
        if (s->deploy.policy[0]) {
            if ((rc = apply_deploy_policy(cfg, &s->deploy, "planner", err))) goto fail;
            s->policy = hs_policy_find(cfg->policy);
            s->max_model_len = ec->max_model_len ? ec->max_model_len : hs_model_max_context(&s->model);
            s->max_tokens = hs_engine_pass_tokens(ec, s->policy, hs_policy_opts_of(cfg->popts, s->policy),
                                                  s->max_model_len);
            if (s->max_tokens < 0) {
                rc = hs_errf(err, HS_ERANGE, "engine: one forward pass of %s would exceed %d tokens",
                             s->policy->name, HS_MAX_PASS_TOKENS);
                goto fail;
            }
        }
    }
    if ((rc = hs_deploy_check(&s->deploy, &s->model, s->cluster,
                              cfg->deployment[0] ? cfg->deployment : "deployment", err)))
        goto fail;
    /* The command line wins over the kernels a deployment names, and the
     * deployment then says so (it is stored and may be emitted). */
    if (hs_run_cfg_given(cfg, "perf.quant_kernels"))
        for (int32_t i = 0; i < s->deploy.n; i++)
            snprintf(s->deploy.r[i].quant_kernels, sizeof s->deploy.r[i].quant_kernels, "%s",
                     cfg->perf.quant_kernels);
    if (build_replicas &&
        (rc = hs_replicas_build(&s->replicas, &s->deploy, &s->model, s->cluster, ec,
                                &cfg->perf, s->max_tokens, s->max_model_len, err)))
        goto fail;
    if (build_replicas && (rc = setup_policy_state(s, cfg, err))) goto fail;
    return 0;
fail:
    setup_free(s);
    return rc;
}

/* Opens the schedule file for the replicas listed in cfg->emit_replicas and
 * writes their headers. */
static int open_schedule(const hs_run_cfg *cfg, const setup *s, hs_sched_writer **out,
                         hs_err *err)
{
    int32_t ids[64];
    int n = 0, rc;
    const char *p = cfg->emit_replicas;
    *out = NULL;
    if (s->policy->complete)
        return hs_errf(err, HS_EUNSUPPORTED,
                       "emit_schedule: policy %s has its own completion step, which schedules do not describe", s->policy->name);
    if (s->model.encoder_layers)
        return hs_errf(err, HS_EUNSUPPORTED,
                       "emit_schedule: %s is an encoder-decoder model; hetsim-exec replays decoder-only schedules",
                       s->model.name);
    if (!*p)
        return hs_errf(err, HS_EINVAL, "emit_replicas: empty list (give replica ids, e.g. 0,2)");
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= s->deploy.n || n == 64)
            return hs_errf(err, HS_ERANGE, "emit_replicas: \"%s\": expected replica ids 0..%d",
                           cfg->emit_replicas, s->deploy.n - 1);
        if (s->replicas[v].role_kind != HS_ROLE_COLOCATED)
            return hs_errf(err, HS_EUNSUPPORTED,
                           "emit_replicas: replica %ld is a %s replica; only colocated replicas can be emitted",
                           v, s->replicas[v].role);
        if (s->replicas[v].layout.pp != 1)
            return hs_errf(err, HS_EUNSUPPORTED,
                           "emit_replicas: replica %ld has %d pipeline stages; only pp 1 replicas can be emitted",
                           v, s->replicas[v].layout.pp);
        ids[n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return hs_errf(err, HS_EPARSE, "emit_replicas: \"%s\": expected ids separated by commas",
                           cfg->emit_replicas);
    }
    if ((rc = hs_sched_writer_open(out, cfg->emit_schedule, ids, n, err))) return rc;
    for (int i = 0; i < n; i++) {
        const hs_replica *r = &s->replicas[ids[i]];
        hs_sched_header h;
        memset(&h, 0, sizeof h);
        h.replica = ids[i];
        snprintf(h.model, sizeof h.model, "%s", s->model.name);
        snprintf(h.gpu, sizeof h.gpu, "%s", hs_cluster_gpu(s->cluster, r->layout.stage[0].gpus[0])->name);
        snprintf(h.perf_model, sizeof h.perf_model, "%s", r->perf.model_name);
        h.tp = r->layout.stage[0].tp;
        h.pp = r->layout.pp;
        h.bits = r->layout.stage[0].bits;
        h.kv_bits = r->layout.kv_bits;
        h.layers = r->layout.stage[0].layers;
        h.block_size = cfg->engine.block_size;
        h.kv_blocks = r->kv_blocks;
        h.step_overhead_ns = r->perf.step_overhead;
        h.step_seq_ns = r->perf.step_seq;
        h.step_tok_ns = r->perf.step_tok;
        h.latency_scale = s->deploy.r[ids[i]].latency_scale;
        snprintf(h.quant_kernels, sizeof h.quant_kernels, "%s",
                 s->deploy.r[ids[i]].quant_kernels[0] ? s->deploy.r[ids[i]].quant_kernels : cfg->perf.quant_kernels);
        for (int k = 0; k < h.layers && h.layers <= HS_MAX_LAYERS; k++)
            if (r->layout.layer_bits[k]) h.n_layer_bits = h.layers;
        for (int k = 0; k < h.n_layer_bits; k++)
            h.layer_bits[k] = r->layout.layer_bits[k] ? r->layout.layer_bits[k] : (unsigned char)h.bits;
        hs_sched_write_header(*out, &h);
    }
    return 0;
}

/* Fails early, before any simulation, when path cannot be created: the
 * file itself is written (whole, renamed into place) after the run. */
static int check_writable(const char *path, const char *what, hs_err *err)
{
    /* Asked, not tried: writing a probe file would clobber one of the
     * user's.  The output goes to <path>.tmp in the same folder, renamed
     * over path at the end, so the folder must take new files. */
    char dir[1100];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= sizeof dir)
        return hs_errf(err, HS_ERANGE, "%s: %s: path too long", what, path);
    if (access(dir, W_OK | X_OK) != 0)
        return hs_errf(err, HS_EIO, "%s: %s: cannot create it: folder %s: %s", what, path, dir, strerror(errno));
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
        return hs_errf(err, HS_EIO, "%s: %s: not writable: %s", what, path, strerror(errno));
    return 0;
}

/* The sink: metrics always, per-request rows when asked. */
typedef struct sink_ctx {
    hs_metrics *m;
    hs_db *db;
    int64_t run;
    int rows;
    hs_err *err;
} sink_ctx;

static int sink_request(void *ctx, const hs_req_record *r)
{
    sink_ctx *s = ctx;
    hs_metrics_request(s->m, r);
    if (s->rows) return hs_db_request(s->db, s->run, r, hs_metrics_slo_met(s->m, r), s->err);
    return 0;
}

static void sink_itl(void *ctx, hs_ns dt, int64_t n)
{
    hs_metrics_itl(((sink_ctx *)ctx)->m, dt, n);
}

/* Time series: per replica, lane busy time and KV blocks at each sample
 * instant t (the engine calls this before handling events after t). */
typedef struct sampler {
    hs_db *db;
    int64_t run;
    hs_err *err;
    hs_ns *busy_prev;   /* [n] busy ns summed over lanes at the last sample */
    int32_t n;          /* replicas */
    hs_ns t_prev;
} sampler;

static int sample_replicas(void *ctx, const hs_engine *e, hs_ns t)
{
    sampler *sm = ctx;
    for (int32_t i = 0; i < sm->n; i++) {
        hs_sample_row row = {i, hs_ns_to_s(t), 0, 0, 0, 0};
        hs_replica_load ld;
        hs_engine_replica_load(e, i, t, &ld);
        row.running = ld.running;
        row.waiting = ld.waiting;
        if (t > sm->t_prev && ld.lanes > 0)
            row.util = (double)(ld.busy_ns - sm->busy_prev[i]) / ((double)(t - sm->t_prev) * ld.lanes);
        if (row.util > 1) row.util = 1;
        row.kv_used = ld.blocks_total > 0 ? (double)ld.blocks_used / (double)ld.blocks_total : 0;
        sm->busy_prev[i] = ld.busy_ns;
        int rc = hs_db_sample(sm->db, sm->run, &row, sm->err);
        if (rc) return rc;
    }
    sm->t_prev = t;
    return 0;
}

typedef struct progress {
    double t0, last;
} progress;

static void show_progress(void *ctx, const hs_engine *e)
{
    progress *p = ctx;
    double now = hs_wall_s();
    hs_engine_stats st;
    if (now - p->last < 0.5) return;
    p->last = now;
    hs_engine_stats_get(e, &st);
    fprintf(stderr, "\r  simulated %.1f s, %lld requests done, %lld in flight, %.2f M events/s   ",
            hs_ns_to_s(st.now), (long long)(st.completed + st.dropped),
            (long long)(st.arrivals - st.completed - st.dropped),
            (double)st.events / (now - p->t0) / 1e6);
    fflush(stderr);
}

/* One warning per run naming every GPU type some of whose kernel times were
 * not measured on it (perf.calib segments marked "uncalibrated"). */
static void warn_uncalibrated(const setup *s, FILE *fp)
{
    char seen[1024] = "";
    size_t len = 0;
    for (int32_t i = 0; i < s->deploy.n; i++) {
        const char *c = s->replicas[i].perf.calib;
        if (!s->replicas[i].perf.uncalibrated) continue;
        while (*c) {
            const char *end = strstr(c, "; ");
            size_t n = end ? (size_t)(end - c) : strlen(c);
            char seg[256];
            snprintf(seg, sizeof seg, "%.*s", (int)n, c);
            if (strstr(seg, "uncalibrated") && !strstr(seen, seg) && len + n + 3 < sizeof seen)
                len += (size_t)snprintf(seen + len, sizeof seen - len, "%s%s", len ? "; " : "", seg);
            c += n;
            if (*c) c += 2;
        }
    }
    if (len)
        fprintf(fp, "hetsim: warning: kernel times not measured on the GPU they run on: %s "
                    "(profiles/README.md, \"Where a replica's kernel times come from\")\n", seen);
}

static void print_header(const hs_run_cfg *cfg, const setup *s, FILE *fp)
{
    int64_t blocks = 0;
    double price = 0;
    fprintf(fp, "model     %s (%.1fB params)\n", s->model.display, hs_model_params(&s->model) / 1e9);
    fprintf(fp, "cluster   %s: %d GPUs in %d nodes\n", s->cluster->name, s->cluster->n_gpus,
            s->cluster->n_nodes);
    for (int32_t i = 0; i < s->deploy.n; i++) {
        blocks += s->replicas[i].kv_blocks;
        price += s->replicas[i].price_per_hour;
    }
    fprintf(fp, "deploy    %d replicas by %s (first: TP %d x PP %d, %d-bit), %lld KV blocks of %d tokens, $%.2f/h\n",
            s->deploy.n, s->deploy.planner[0] ? s->deploy.planner : "file",
            s->deploy.r[0].layout.stage[0].tp, s->deploy.r[0].layout.pp,
            s->deploy.r[0].layout.stage[0].bits, (long long)blocks, cfg->engine.block_size, price);
    fprintf(fp, "policy    %s, router %s, latency model %s, engine %s\n", s->policy->name, cfg->router,
            s->replicas[0].perf.model_name, s->replicas[0].perf.engine);
    /* every distinct calibration once: how far to trust the numbers */
    for (int32_t i = 0; i < s->deploy.n; i++) {
        int seen = 0;
        for (int32_t j = 0; j < i; j++) seen |= !strcmp(s->replicas[j].perf.calib, s->replicas[i].perf.calib);
        if (!seen && s->replicas[i].perf.calib[0]) fprintf(fp, "trust     %s\n", s->replicas[i].perf.calib);
    }
    for (int32_t i = 0; i < s->deploy.n; i++)
        if (s->deploy.r[i].latency_scale > 0 && s->deploy.r[i].latency_scale != 1)
            fprintf(fp, "scaled    replica %d: every iteration x%.4g (the deployment's latency_scale)\n", i,
                    s->deploy.r[i].latency_scale);
}

int hs_cli_run(int argc, char **argv)
{
    hs_run_cfg cfg;
    run_opts o;
    hs_err err = {0};
    setup s;
    hs_source *src = NULL;
    hs_metrics *m = NULL;
    hs_db *db = NULL;
    hs_engine *e = NULL;
    hs_sched_writer *sched = NULL;
    hs_chrome *chrome = NULL;
    char *cfg_json = NULL, *dep_json = NULL;
    int rc, db_new = 0, run_open = 0;
    int64_t run_id = 0;
    double t0;
    sink_ctx sc;
    hs_sink sink;
    progress prog;
    hs_engine_stats st;
    int shown = 0;
    sampler sm = {0};
    hs_metric_value vals[64];
    int nv;

    memset(&s, 0, sizeof s);
    rc = parse_args(argc, argv, "run", &cfg, &o, &err);
    if (rc == 1) return 0;
    if (rc) goto fail;
    /* before planning and simulating, which can take long */
    if ((rc = hs_db_check_writable(cfg.db, &err))) goto fail;
    if ((rc = setup_build(&s, &cfg, 1, &err))) goto fail;
    if (s.deploy.n_attn && !s.policy->attn_offload) {
        char alt[256];
        policies_with(offsetof(hs_policy_ops, attn_offload), alt, sizeof alt);
        rc = hs_errf(&err, HS_EINVAL, "deployment: %d attention workers need a policy that offloads attention (%s; policy is %s)",
                     s.deploy.n_attn, alt, s.policy->name);
        goto fail;
    }
    if ((rc = hs_source_open(&src, &cfg.workload, &err))) goto fail;
    if (cfg.emit_schedule[0] && (rc = open_schedule(&cfg, &s, &sched, &err))) goto fail;
    if (o.json_out && (rc = check_writable(o.json_out, "json_out", &err))) goto fail;
    if (o.emit_trace && (rc = hs_chrome_open(&chrome, o.emit_trace, o.emit_trace_limit, &err))) goto fail;
    m = hs_metrics_create(&cfg.slo);
    cfg_json = hs_run_cfg_json(&cfg);
    /* the deployment's content, not the path it came from */
    dep_json = hs_deploy_to_json(&s.deploy);
    if (!m || !cfg_json || !dep_json) {
        rc = hs_errf(&err, HS_ENOMEM, "out of memory");
        goto fail;
    }
    db_new = access(cfg.db, F_OK) != 0;
    if ((rc = hs_db_open(&db, cfg.db, &err))) goto fail;
    {
        hs_run_info ri = {cfg_json, HS_GIT_REV, cfg.label, (uint64_t)cfg.seed};
        if ((rc = hs_db_run_begin(db, &ri, &run_id, &err))) goto fail;
        run_open = 1;
        if ((rc = hs_db_run_deployment(db, run_id, dep_json, s.deploy.planner, &err))) goto fail;
    }
    for (int32_t i = 0; i < s.deploy.n; i++) {
        char gpus[1024];
        const hs_replica *r = &s.replicas[i];
        hs_replica_row row;
        hs_layout_gpus_str(&r->layout, s.cluster, gpus, sizeof gpus);
        row.id = i;
        row.role = r->role;
        row.gpus = gpus;
        row.tp = r->layout.stage[0].tp;
        row.pp = r->layout.pp;
        row.bits = r->layout.stage[0].bits;
        row.kv_blocks = r->kv_blocks;
        row.perf_model = r->perf.model_name;
        row.calibration = r->perf.calib;
        row.expected_err_pct = r->perf.expected_err;
        row.engine = r->perf.engine;
        if ((rc = hs_db_replica(db, run_id, &row, &err))) goto fail;
    }
    sc = (sink_ctx){m, db, run_id, cfg.write_requests, &err};
    sink = (hs_sink){&sc, sink_request, sink_itl};
    if ((rc = hs_engine_create(&e, &cfg.engine, s.policy, hs_policy_opts_of(cfg.popts, s.policy), s.router,
                               s.replicas, s.deploy.n, src,
                               &sink, s.max_model_len, s.cluster, &err)))
        goto fail;
    hs_engine_set_trace(e, sched);
    if (chrome) {
        for (int32_t i = 0; i < s.deploy.n; i++) {
            char gpus[1024];
            hs_layout_gpus_str(&s.replicas[i].layout, s.cluster, gpus, sizeof gpus);
            hs_chrome_replica(chrome, i, s.replicas[i].role, gpus, s.replicas[i].n_lanes);
        }
        hs_engine_set_timeline(e, hs_chrome_timeline(chrome));
    }
    if (cfg.sample_s > 0) {
        sm.busy_prev = calloc((size_t)s.deploy.n, sizeof *sm.busy_prev);
        if (!sm.busy_prev) {
            rc = hs_errf(&err, HS_ENOMEM, "out of memory");
            goto fail;
        }
        sm.db = db;
        sm.run = run_id;
        sm.err = &err;
        sm.n = s.deploy.n;
        hs_engine_on_sample(e, hs_ns_from_s(cfg.sample_s), sample_replicas, &sm);
    }
    warn_uncalibrated(&s, stderr);
    t0 = hs_wall_s();
    prog = (progress){t0, t0};
    if (isatty(2) && !o.quiet) {
        hs_engine_on_progress(e, show_progress, &prog);
        shown = 1;
    }
    rc = hs_engine_run(e, &err);
    if (shown && prog.last > t0) fprintf(stderr, "\n");
    hs_engine_stats_get(e, &st);
    if (rc) goto fail;
    if (!o.quiet && s.policy->report) s.policy->report(stderr, s.replicas, s.deploy.n);
    {
        double price = 0;
        for (int32_t i = 0; i < s.deploy.n; i++) price += s.replicas[i].price_per_hour;
        nv = hs_metrics_summary(m, price, vals, 60);
    }
    {
        const struct { const char *n; double v; } extra[] = {
            {"arrivals", (double)st.arrivals},
            {"truncated", (double)st.truncated},
            {"iterations", (double)st.iterations},
            {"events", (double)st.events},
            {"simulated_s", hs_ns_to_s(st.end_time)},
        };
        for (size_t k = 0; k < sizeof extra / sizeof extra[0] && nv < 64; k++, nv++) {
            snprintf(vals[nv].name, sizeof vals[nv].name, "%s", extra[k].n);
            vals[nv].value = extra[k].v;
        }
    }
    if ((rc = hs_db_summary(db, run_id, vals, nv, &err))) goto fail;
    if (sched) fflush(NULL); /* surface write errors before committing */
    if ((rc = hs_db_run_commit(db, run_id, hs_wall_s() - t0, (int64_t)st.events, &err))) goto fail;
    run_open = 0;
    if (sched) {
        /* The run is stored; a schedule file that cannot be completed is
         * removed and reported, never left half-written. */
        rc = hs_sched_writer_close(sched, 0, &err);
        sched = NULL;
        if (rc) fprintf(stderr, "hetsim: warning: run %lld is stored, but %s\n", (long long)run_id, err.msg);
        rc = 0;
    }
    /* Written only once the run is stored, so a failed run leaves no file. */
    if (cfg.emit_deployment[0] && (rc = hs_deploy_write(&s.deploy, cfg.emit_deployment, &err)))
        fprintf(stderr, "hetsim: warning: run %lld is stored, but %s\n", (long long)run_id, err.msg);
    rc = 0;
    /* The files asked for by name: the run is stored either way, but a
     * missing one fails the command (a script would read it next). */
    if (chrome) {
        int64_t cut = hs_chrome_dropped(chrome);
        int crc = hs_chrome_close(chrome, 0, &err);
        chrome = NULL;
        if (crc) {
            fprintf(stderr, "hetsim: run %lld is stored in %s, but %s\n", (long long)run_id, cfg.db, err.msg);
            rc = crc;
        } else if (cut) {
            fprintf(stderr, "hetsim: note: %s holds the first %lld iterations; --emit-trace-limit left out %lld\n",
                    o.emit_trace, (long long)o.emit_trace_limit, (long long)cut);
        }
    }
    if (o.json_out) {
        int jrc = hs_db_run_json(db, run_id, o.json_out, &err);
        if (jrc) {
            fprintf(stderr, "hetsim: run %lld is stored in %s, but json_out: %s\n", (long long)run_id, cfg.db,
                    err.msg);
            rc = jrc;
        }
    }
    if (!o.quiet) {
        print_header(&cfg, &s, stdout);
        hs_metrics_print(vals, nv, stdout);
        printf("run %lld stored in %s\n", (long long)run_id, cfg.db);
    }
    {
        /* Wall-clock figures go to stderr: they are not simulated results. */
        struct rusage ru;
        double wall = hs_wall_s() - t0;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr, "hetsim: %.3f s wall, %llu events, %.2f M events/s, peak RSS %.1f MiB\n",
                wall, (unsigned long long)st.events, (double)st.events / wall / 1e6,
                ru.ru_maxrss / 1024.0);
    }
    free(sm.busy_prev);
    hs_engine_destroy(e);
    hs_db_close(db);
    hs_metrics_destroy(m);
    hs_source_close(src);
    free(cfg_json);
    free(dep_json);
    setup_free(&s);
    return hs_cli_exit_code(rc);

fail:
    hs_sched_writer_close(sched, 1, NULL);
    hs_chrome_close(chrome, 1, NULL);
    if (run_open) hs_db_run_abort(db);
    hs_db_close(db);
    /* A database this run created (even one whose schema failed half-way)
     * goes again: bad input never leaves a file behind. */
    if (db_new) unlink(cfg.db);
    free(sm.busy_prev);
    hs_engine_destroy(e);
    hs_metrics_destroy(m);
    hs_source_close(src);
    free(cfg_json);
    free(dep_json);
    setup_free(&s);
    fprintf(stderr, "hetsim: %s\n", err.msg[0] ? err.msg : hs_strerror(rc));
    return hs_cli_exit_code(rc);
}

/* "plan: 2 prefill + 4 decode replicas" for a disaggregated plan. */
static void plan_roles(const hs_deploy *d)
{
    char names[8][16];
    int count[8], n = 0;
    for (int32_t i = 0; i < d->n; i++) {
        int k = 0;
        while (k < n && strcmp(names[k], d->r[i].role)) k++;
        if (k == n && n < 8) {
            snprintf(names[n], sizeof names[n], "%s", d->r[i].role);
            count[n++] = 0;
        }
        if (k < n) count[k]++;
    }
    if (n < 2) return;
    fprintf(stderr, "plan: roles:");
    for (int k = 0; k < n; k++) fprintf(stderr, "%s %d %s", k ? " +" : "", count[k], names[k]);
    fprintf(stderr, "\n");
}

/* The workload's lengths the planners plan for, one line. */
static void plan_lengths(const hs_run_cfg *cfg)
{
    hs_plan_lengths L;
    hs_err e = {0};
    if (hs_plan_lengths_get(&cfg->workload, &L, &e)) return;  /* the planner reports it */
    fprintf(stderr, "plan: workload lengths (%lld requests): prompt mean %.0f p50 %.0f p90 %.0f p99 %.0f; "
            "output mean %.0f p50 %.0f p90 %.0f p99 %.0f tokens\n",
            (long long)L.n, L.in_mean, L.in_p50, L.in_p90, L.in_p99, L.out_mean, L.out_p50, L.out_p90, L.out_p99);
}

int hs_cli_plan(int argc, char **argv)
{
    hs_run_cfg cfg;
    run_opts o;
    hs_err err = {0};
    setup s;
    char *txt;
    int rc = parse_args(argc, argv, "plan", &cfg, &o, &err);
    if (rc == 1) return 0;
    if (!rc && (o.emit_trace || o.json_out))
        rc = hs_errf(&err, HS_EINVAL, "%s: hetsim plan runs nothing (use it with hetsim run)",
                     o.emit_trace ? "--emit-trace" : "--json-out");
    if (!rc) rc = setup_build(&s, &cfg, 1, &err);
    /* after the plan: bad input stays one line */
    if (!rc && !o.quiet && !cfg.deployment[0]) plan_lengths(&cfg);
    if (rc) {
        fprintf(stderr, "hetsim: %s\n", err.msg);
        return hs_cli_exit_code(rc);
    }
    if (cfg.emit_deployment[0] && (rc = hs_deploy_write(&s.deploy, cfg.emit_deployment, &err))) {
        fprintf(stderr, "hetsim: %s\n", err.msg);
        setup_free(&s);
        return hs_cli_exit_code(rc);
    }
    if (!cfg.emit_deployment[0]) {
        txt = hs_deploy_to_json(&s.deploy);
        if (txt) puts(txt);
        free(txt);
    }
    if (!o.quiet) {
        if (s.deploy.summary[0]) fprintf(stderr, "plan: %s\n", s.deploy.summary);
        if (s.deploy.policy[0]) fprintf(stderr, "plan: runs with policy %s%s%s\n", s.deploy.policy,
                                        s.deploy.engine ? ", engine " : "", s.deploy.engine ? s.deploy.engine : "");
        for (int32_t i = 0; i < s.deploy.n; i++) {
            char gpus[1024];
            hs_layout_gpus_str(&s.replicas[i].layout, s.cluster, gpus, sizeof gpus);
            fprintf(stderr, "replica %d: %s, %s, %lld KV blocks, $%.2f/h\n", i, s.deploy.r[i].role, gpus,
                    (long long)s.replicas[i].kv_blocks, s.replicas[i].price_per_hour);
        }
        plan_roles(&s.deploy);
    }
    setup_free(&s);
    return 0;
}
