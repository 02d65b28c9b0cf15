/* iserve.c - `hetsim iserve`: iServe's fingerprint estimator, intent ranking
 * and multi-model cluster runs with the paper's baselines.
 *
 *   hetsim iserve estimate --model M [--cluster C] [--fingerprints DIR]
 *                          [--emit-fingerprints FILE] [--verbose]
 *   hetsim iserve rank --model M --intent I [--target X] [--top N]
 *   hetsim iserve run --models a,b*2,c [--trace F | --preset azure-code]
 *                     [--rate R] [--system S] [--intent I] [--place P] ... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "out/db.h"
#include "plan/iserve.h"
#include "policy/policy.h"
#include "serve/deploy.h"
#include "plan/iserve_multi.h"
#include "workload/workload.h"
#include "core/time.h"

#ifndef HS_GIT_REV
#define HS_GIT_REV ""
#endif

typedef struct isv_args {
    const char *mode;
    char models[1024];
    const char *cluster, *fp_dir, *emit_fp, *trace, *preset;
    const char *perf_model, *ref_model, *serving, *db;
    int intent, system, place, top, output, verbose, deploy_batch, seed, passes;
    double target, rate, tau, deploy_every, deploy_start, slo_factor, alpha, duration, usable;
    double capacity;   /* > 0: search the highest rate whose SLO attainment reaches it */
} isv_args;

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim iserve estimate --model M [--cluster C] [--fingerprints DIR]\n"
            "                              [--emit-fingerprints FILE] [--reference M] [--verbose]\n"
            "       hetsim iserve rank --model M --intent I [--target X] [--top N]\n"
            "       hetsim iserve run --models a,b*2,... [options]\n"
            "\n"
            "iServe (arXiv 2501.13111): fingerprints (the model at 1 and 2 hidden layers)\n"
            "are measured per (TP, PP, variant) -- through the latency model here, or read\n"
            "from DIR/<model>.csv as written by --emit-fingerprints -- and extrapolated to\n"
            "the full model; deployments follow an intent.\n"
            "\n"
            "options:\n"
            "  --cluster C          cluster (iserve-a6000x8)\n"
            "  --intent I           min-latency, min-cost (default), min-memory, min-gpu-hours,\n"
            "                       latency-slo, cost-budget\n"
            "  --target X           latency-slo: factor of the base latency (2.5);\n"
            "                       cost-budget: factor of the base cost (1)\n"
            "  --output N           output tokens of the reference request for ranking (128)\n"
            "  --system S           iserve, max-tp, max-pp, accelerate, alpaserve, alpaserve-star\n"
            "  --place P            hybrid (default), pack, least-loaded, first\n"
            "  --tau X              hybrid: GPUs with load below X are packable (0.5)\n"
            "  --trace F            Azure trace CSV; else --preset azure-code|azure-conv\n"
            "  --rate R             fraction of arrivals kept, the paper's 0.1-0.4 (0.4)\n"
            "  --duration S         only the first S seconds of the trace (3600)\n"
            "  --deploy-every S     seconds between deployments (300)\n"
            "  --deploy-batch K     models deployed at a time (1)\n"
            "  --slo-factor K       request SLO = K x its latency on the base layout (5)\n"
            "  --alpha A            interference: k busy models on a GPU each run at 1/(1+A(k-1));\n"
            "                       %.2f (default): time slicing without MPS, as iServe runs, measured\n"
            "                       on an H200; 1: free context switches; 0.2: the published MPS\n"
            "                       slowdown; 0: none (docs/iserve.md gives the sources)\n"
            "  --int4-ratio R       INT4's decode latency over FP16's (0.4086: the paper's 59.14%%\n"
            "                       lower; sources in profiles/README.md), for sensitivity studies\n"
            "  --capacity P         search the highest --rate (bisection, 1/1024) whose SLO attainment\n"
            "                       is at least P, report it as capacity_* and run at it\n"
            "  --usable F           fraction of GPU memory models may use (0.95)\n"
            "  --perf-model M       latency model behind the measurements: auto (default), the\n"
            "                       calibrated model (measured tables, else fitted, else\n"
            "                       transferred); roofline: the datasheet alone\n"
            "  --reference M        estimate: the full model's latency through model M (e.g. auto:\n"
            "                       measured tables where they ship), not the fingerprints' own\n"
            "  --seed N             thinning and model assignment (1)\n"
            "  --serving S          fcfs (batch 1, the paper's; default) or a batching policy\n"
            "                       (vllm, sarathi, static): each instance re-served by an engine\n"
            "  --passes N           batching: mean-field interference rounds (3)\n"
            "  --db PATH            also store the run (runs, replicas = instances, summary)\n"
            "  --verbose            per-configuration / per-instance lines\n",
            HS_ISV_ALPHA);
}

static int parse(isv_args *a, int argc, char **argv, hs_err *err)
{
    memset(a, 0, sizeof *a);
    a->cluster = "iserve-a6000x8";
    a->perf_model = "auto";
    a->serving = "fcfs";
    a->passes = 3;
    a->intent = HS_ISV_MIN_COST;
    a->target = NAN;
    a->top = 10;
    a->output = 128;
    a->rate = 0.4;
    a->tau = 0.5;
    a->deploy_every = 300;
    a->deploy_batch = 1;
    a->slo_factor = 5;
    a->alpha = HS_ISV_ALPHA;
    a->duration = 3600;
    a->usable = 0.95;
    a->seed = 1;
    if (argc < 2) return hs_errf(err, HS_EINVAL, "iserve: missing mode (estimate, rank, run)");
    a->mode = argv[1];
    if (strcmp(a->mode, "estimate") && strcmp(a->mode, "rank") && strcmp(a->mode, "run"))
        return hs_errf(err, HS_EINVAL, "iserve: unknown mode \"%s\" (estimate, rank, run)", a->mode);
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(o, "--verbose")) {
            a->verbose = 1;
            continue;
        }
        if (!v) return hs_errf(err, HS_EINVAL, "iserve: %s needs a value", o);
        i++;
        if (!strcmp(o, "--model") || !strcmp(o, "--models")) snprintf(a->models, sizeof a->models, "%s", v);
        else if (!strcmp(o, "--cluster")) a->cluster = v;
        else if (!strcmp(o, "--fingerprints")) a->fp_dir = v;
        else if (!strcmp(o, "--emit-fingerprints")) a->emit_fp = v;
        else if (!strcmp(o, "--trace")) a->trace = v;
        else if (!strcmp(o, "--preset")) a->preset = v;
        else if (!strcmp(o, "--perf-model")) a->perf_model = v;
        else if (!strcmp(o, "--reference")) a->ref_model = v;
        else if (!strcmp(o, "--db")) a->db = v;
        else if (!strcmp(o, "--serving")) {
            if (strcmp(v, "fcfs") && !hs_policy_find(v))
                return hs_errf(err, HS_EINVAL, "iserve: --serving: \"%s\" is neither fcfs nor a policy", v);
            a->serving = v;
        }
        else if (!strcmp(o, "--intent")) {
            if ((a->intent = hs_isv_intent_parse(v)) < 0)
                return hs_errf(err, HS_EINVAL, "iserve: --intent: unknown \"%s\"", v);
        } else if (!strcmp(o, "--system")) {
            if ((a->system = hs_isv_sys_parse(v)) < 0)
                return hs_errf(err, HS_EINVAL, "iserve: --system: unknown \"%s\"", v);
        } else if (!strcmp(o, "--place")) {
            if ((a->place = hs_isv_place_parse(v)) < 0)
                return hs_errf(err, HS_EINVAL, "iserve: --place: unknown \"%s\"", v);
        } else {
            double x = strtod(v, &end);
            if (!end || *end || !isfinite(x))
                return hs_errf(err, HS_EINVAL, "iserve: %s: \"%s\" is not a number", o, v);
            if (!strcmp(o, "--target")) a->target = x;
            else if (!strcmp(o, "--top")) a->top = (int)x;
            else if (!strcmp(o, "--output")) a->output = (int)x;
            else if (!strcmp(o, "--rate")) a->rate = x;
            else if (!strcmp(o, "--tau")) a->tau = x;
            else if (!strcmp(o, "--duration")) a->duration = x;
            else if (!strcmp(o, "--deploy-every")) a->deploy_every = x;
            else if (!strcmp(o, "--deploy-start")) a->deploy_start = x;
            else if (!strcmp(o, "--deploy-batch")) a->deploy_batch = (int)x;
            else if (!strcmp(o, "--slo-factor")) a->slo_factor = x;
            else if (!strcmp(o, "--alpha")) a->alpha = x;
            else if (!strcmp(o, "--int4-ratio")) {
                int rc = hs_isv_set_wq_ratio(HS_ISV_INT4, x, err);
                if (rc) return rc;
            }
            else if (!strcmp(o, "--capacity")) {
                if (!(x > 0 && x <= 1))
                    return hs_errf(err, HS_ERANGE, "iserve: --capacity %g must be in (0, 1]", x);
                a->capacity = x;
            }
            else if (!strcmp(o, "--usable")) a->usable = x;
            else if (!strcmp(o, "--seed")) a->seed = (int)x;
            else if (!strcmp(o, "--passes")) a->passes = (int)x;
            else return hs_errf(err, HS_EINVAL, "iserve: unknown option %s", o);
        }
    }
    if (!a->models[0]) return hs_errf(err, HS_EINVAL, "iserve: --model/--models is required");
    if (isnan(a->target)) a->target = a->intent == HS_ISV_COST_BUDGET ? 1.0 : 2.5;
    if (a->output < 1 || a->deploy_batch < 1 || !(a->deploy_every >= 0) || !(a->duration > 0) ||
        !(a->tau >= 0))
        return hs_errf(err, HS_ERANGE, "iserve: --output, --deploy-batch >= 1, --deploy-every, --tau >= 0 and --duration > 0");
    return 0;
}

/* "a,b*2,c" -> models (at most 64). */
static int load_models(const char *list, hs_model *ms, int *n, hs_err *err)
{
    char buf[1024], *save = NULL, *tok;
    int rc;
    *n = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *star = strchr(tok, '*');
        int rep = 1;
        if (star) {
            *star = 0;
            rep = atoi(star + 1);
            if (rep < 1) return hs_errf(err, HS_EINVAL, "--models: bad count in \"%s*%s\"", tok, star + 1);
        }
        for (int r = 0; r < rep; r++) {
            if (*n >= 64) return hs_errf(err, HS_ERANGE, "--models: at most 64");
            if ((rc = hs_model_find(&ms[*n], tok, err))) return rc;
            (*n)++;
        }
    }
    if (!*n) return hs_errf(err, HS_EINVAL, "--models: empty list");
    return 0;
}

static void opts_of(const isv_args *a, hs_isv_opts *o)
{
    hs_isv_opts_defaults(o);
    snprintf(o->perf.model, sizeof o->perf.model, "%s", a->perf_model);
}

/* One line: where the deployed instances' kernel times came from, per GPU
 * type, and the largest expected error, as a main run's trust line. */
static void print_trust(const hs_multi *mm)
{
    hs_perf acc;
    const hs_perf *p;
    memset(&acc, 0, sizeof acc);
    acc.expected_err = -1;
    for (int i = 0; hs_multi_inst_layout(mm, i); i++)
        if ((p = hs_multi_inst_perf(mm, i))) hs_perf_merge_calib(&acc, p);
    if (acc.calib[0]) printf("trust   %s\n", acc.calib);
}

/* Estimated vs "measured" (the full model through the same models). */
static int do_estimate(const isv_args *a, const hs_model *m, const hs_cluster *c, hs_err *err)
{
    hs_isv_opts o;
    hs_isv_fp fp;
    hs_isv_est e;
    hs_isv_cfg *sp = NULL;
    int n = 0, rc, cnt = 0;
    double mem_abs = 0, mem_max = 0, lat_rel = 0, lat_max = 0, full_s = 0;
    hs_perf_cfg ref;
    opts_of(a, &o);
    /* The "measured" side: the fingerprints' own model (a self-consistency
     * check of the extrapolation) or an independent one (--reference). */
    ref = o.perf;
    if (a->ref_model) snprintf(ref.model, sizeof ref.model, "%s", a->ref_model);
    if (a->fp_dir) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.csv", a->fp_dir, m->name);
        rc = hs_isv_fp_read(&fp, path, m->name, err);
    } else {
        rc = hs_isv_fp_measure(&fp, m, c, &o, err);
    }
    if (rc) return rc;
    if (a->emit_fp) {
        FILE *f = fopen(a->emit_fp, "w");
        if (!f) rc = hs_errf(err, HS_EIO, "%s: cannot write", a->emit_fp);
        else {
            if (hs_isv_fp_write(&fp, f)) rc = hs_errf(err, HS_EIO, "%s: write failed", a->emit_fp);
            if (fclose(f) && !rc) rc = hs_errf(err, HS_EIO, "%s: write failed", a->emit_fp);
            if (rc) remove(a->emit_fp);   /* never leave half a fingerprint file */
        }
    }
    if (!rc) rc = hs_isv_estimate(&e, &fp, m->layers, err);
    if (!rc) rc = hs_isv_space(m, c->n_gpus, &sp, &n, err);
    if (a->verbose && !rc)
        printf("%-26s %10s %10s %7s %10s %10s %7s\n", "config", "est_s", "full_s", "err%",
               "est_GiB", "full_GiB", "errGiB");
    for (int i = 0; i < n && !rc; i++) {
        int gpus[64];
        hs_layout l;
        hs_solo s;
        double tl, tm, el, em;
        char cs[40];
        if (!hs_isv_est_has(&e, &sp[i])) continue;
        for (int g = 0; g < 64; g++) gpus[g] = g % c->n_gpus;
        hs_isv_layout_even(&l, m, &sp[i], gpus);
        if ((rc = hs_solo_build(&s, &ref, m, c, &l, o.prompt, 1, hs_isv_var(sp[i].var)->lat_ratio, 0, err)))
            break;
        tl = hs_solo_req_ns(&s, o.prompt, o.out2, NULL) / 1e9;
        hs_solo_free(&s);
        tm = hs_isv_layout_bytes(m, sp[i].var, &l, &o) / 1073741824.0;
        el = hs_isv_est_latency_s(&e, &sp[i], o.out2);
        em = hs_isv_est_mem_gib(&e, &sp[i]);
        full_s += (tl * 2) * sp[i].tp * sp[i].pp;
        cnt++;
        mem_abs += fabs(em - tm);
        if (fabs(em - tm) > mem_max) mem_max = fabs(em - tm);
        lat_rel += fabs(el - tl) / tl;
        if (fabs(el - tl) / tl > lat_max) lat_max = fabs(el - tl) / tl;
        if (a->verbose) {
            hs_isv_cfg_str(&sp[i], cs, sizeof cs);
            printf("%-26s %10.4f %10.4f %7.2f %10.2f %10.2f %7.2f\n", cs, el, tl,
                   100 * (el - tl) / tl, em, tm, em - tm);
        }
    }
    if (!rc) {
        /* Size of the 2-layer fingerprint against the model, FP16 on one GPU
         * (paper: Llama-2-70B's fingerprint is 2.40% of the model). */
        double fp_b = 0, full_b = 0;
        for (int i = 0; i < fp.n; i++)
            if (fp.m[i].layers == 2 && fp.m[i].tp == 1 && fp.m[i].pp == 1 && fp.m[i].var == 0)
                fp_b = fp.m[i].mem_gib;
        full_b = hs_isv_stage_bytes(m, 0, m->layers, 1, 1, 1, &o) / 1073741824.0;
        printf("estimate model=%s reference=%s configs=%d mem_err_mean_gib=%.3f mem_err_max_gib=%.3f "
               "lat_err_mean_pct=%.2f lat_err_max_pct=%.2f fingerprint_rows=%d "
               "profile_gpu_s=%.1f full_profile_gpu_s=%.1f fingerprint_mem_pct=%.2f\n",
               m->name, ref.model, cnt, cnt ? mem_abs / cnt : 0, mem_max, cnt ? 100 * lat_rel / cnt : 0,
               100 * lat_max, fp.n, fp.profile_s, full_s, full_b > 0 ? 100 * fp_b / full_b : 0);
    }
    free(sp);
    hs_isv_fp_free(&fp);
    return rc;
}

static int do_rank(const isv_args *a, const hs_model *m, const hs_cluster *c, hs_err *err)
{
    hs_isv_opts o;
    hs_isv_ctl k;
    hs_isv_cfg *sp;
    hs_isv_intent in = {a->intent, a->target, a->output};
    hs_isv_score bs;
    int n, nr, meet, rc;
    opts_of(a, &o);
    memset(&k, 0, sizeof k);
    if ((rc = hs_isv_ctl_init(&k, c, m, 1, &o, a->fp_dir, a->usable, err))) return rc;
    hs_isv_score_of(&k.est[0], &k.base[0], a->output, &bs);
    if (in.kind == HS_ISV_LATENCY_SLO) in.target *= bs.latency_s;
    if (in.kind == HS_ISV_COST_BUDGET) in.target *= bs.cost;
    if ((rc = hs_isv_space(m, c->n_gpus, &sp, &n, err))) {
        hs_isv_ctl_free(&k);
        return rc;
    }
    nr = hs_isv_rank(&k.est[0], &in, sp, n, &meet);
    printf("rank model=%s intent=%s configs=%d meet=%d\n", m->name,
           hs_isv_intent_names[a->intent], nr, meet);
    for (int i = 0; i < nr && i < a->top; i++) {
        hs_isv_score s;
        char cs[40];
        hs_isv_score_of(&k.est[0], &sp[i], a->output, &s);
        hs_isv_cfg_str(&sp[i], cs, sizeof cs);
        printf("%3d %-26s latency_s=%.4f mem_gib=%.2f cost=%.3f gpu_hours=%.3g\n", i + 1, cs,
               s.latency_s, s.mem_gib, s.cost, s.gpu_hours);
    }
    free(sp);
    hs_isv_ctl_free(&k);
    return 0;
}

static int open_source(const isv_args *a, hs_source **src, hs_err *err)
{
    hs_workload_cfg w;
    int rc;
    hs_workload_defaults(&w);
    if (a->trace) {
        if ((rc = hs_workload_set(&w, "kind", "azure", err))) return rc;
        if ((rc = hs_workload_set(&w, "path", a->trace, err))) return rc;
        w.window_end = a->duration;
    } else {
        if ((rc = hs_workload_set(&w, "preset", a->preset ? a->preset : "azure-code", err))) return rc;
        w.duration = a->duration;
        w.max_requests = 0;
    }
    w.seed = (uint64_t)a->seed;
    return hs_source_open(src, &w, err);
}

/* The capacity search's outcome (a->capacity > 0). */
typedef struct isv_cap {
    double rate;       /* highest --rate meeting the attainment (0: none down to 1/1024) */
    double req_s;      /* its offered load: thinned-in arrivals / trace window, req/s */
    double req_s_gpu;  /* req_s / GPUs used at that rate */
    int runs;          /* simulations the search took */
} isv_cap;

/* Stores one run whole or not at all: runs row (the options as config),
 * one replicas row per instance, one requests row per kept arrival
 * (replica = instance; those of undeployed models dropped), the summary
 * (iserve_* names). */
static int store_run(const isv_args *a, double rate, hs_multi *mm, const hs_model *ms, const hs_cluster *c,
                     const hs_multi_result *r, const isv_cap *cap, double profile_s, double wall_s,
                     hs_err *err)
{
    hs_db *db = NULL;
    int64_t run = 0;
    char cfg[2048];
    int rc;
    hs_metric_value v[] = {
        {"iserve_kept", (double)r->kept}, {"iserve_served", (double)r->served},
        {"iserve_unserved", (double)r->unserved}, {"iserve_early", (double)r->early},
        {"e2el_p50_ms", r->p50_s * 1e3}, {"e2el_p95_ms", r->p95_s * 1e3},
        {"e2el_p99_ms", r->p99_s * 1e3}, {"e2el_mean_ms", r->mean_s * 1e3},
        {"ttft_p50_ms", r->ttft_p50_s * 1e3}, {"slo_attainment", r->slo_attainment},
        {"iserve_mem_gib", r->mem_gib}, {"iserve_cost_gib_s", r->cost},
        {"iserve_gpu_hours", r->gpu_hours}, {"iserve_gpus_used", r->gpus_used},
        {"iserve_gpu_throughput", r->gpu_throughput}, {"duration_s", r->duration_s},
        {"iserve_deployed", r->deployed}, {"iserve_instances", r->instances},
        {"iserve_profile_gpu_s", profile_s},
        {"iserve_capacity_rate", cap ? cap->rate : 0}, {"iserve_capacity_req_s", cap ? cap->req_s : 0},
        {"iserve_capacity_req_s_gpu", cap ? cap->req_s_gpu : 0},
    };
    int nv = (int)(sizeof v / sizeof v[0]) - (cap ? 0 : 3);
    snprintf(cfg, sizeof cfg,
             "{\"command\":\"iserve run\",\"models\":\"%s\",\"cluster\":\"%s\",\"trace\":\"%s\","
             "\"preset\":\"%s\",\"rate\":%g,\"duration\":%g,\"system\":\"%s\",\"intent\":\"%s\","
             "\"target\":%g,\"place\":\"%s\",\"tau\":%g,\"deploy_every\":%g,\"deploy_batch\":%d,"
             "\"slo_factor\":%g,\"alpha\":%g,\"usable\":%g,\"serving\":\"%s\",\"passes\":%d,"
             "\"perf_model\":\"%s\",\"capacity\":%g,\"seed\":%d,\"int4_ratio\":%g}",
             a->models, c->name, a->trace ? a->trace : "", a->trace ? "" : (a->preset ? a->preset : "azure-code"),
             rate, a->duration, hs_isv_sys_names[a->system], hs_isv_intent_names[a->intent], a->target,
             hs_isv_place_names[a->place], a->tau, a->deploy_every, a->deploy_batch, a->slo_factor,
             a->alpha, a->usable, a->serving, a->passes, a->perf_model, a->capacity, a->seed,
             hs_isv_var(hs_isv_var_find(HS_ISV_INT4, 16, HS_ISV_PRUNE_NONE))->lat_ratio);
    if ((rc = hs_db_open(&db, a->db, err))) return rc;
    {
        hs_run_info ri = {cfg, HS_GIT_REV, "iserve", (uint64_t)a->seed};
        rc = hs_db_run_begin(db, &ri, &run, err);
    }
    for (int i = 0; !rc; i++) {
        const hs_layout *l = hs_multi_inst_layout(mm, i);
        char gpus[512], role[96];
        int model;
        const char *lab = hs_multi_inst_label(mm, i, &model, NULL, NULL, NULL, NULL);
        hs_replica_row row;
        if (!l) break;
        hs_layout_gpus_str(l, c, gpus, sizeof gpus);
        snprintf(role, sizeof role, "%s %s", ms[model].name, lab);
        const hs_perf *pf = hs_multi_inst_perf(mm, i);
        row = (hs_replica_row){i, role, gpus, l->stage[0].tp, l->pp, l->stage[0].bits, 0, a->perf_model,
                               pf ? pf->calib : "", pf ? pf->expected_err : -1, ""};
        rc = hs_db_replica(db, run, &row, err);
    }
    for (int64_t i = 0; !rc; i++) {
        hs_req_record rec;
        int met;
        if (!hs_multi_request(mm, i, &rec, NULL, &met)) break;
        rc = hs_db_request(db, run, &rec, met, err);
    }
    if (!rc) rc = hs_db_summary(db, run, v, nv, err);
    if (!rc) rc = hs_db_run_commit(db, run, wall_s, r->kept, err);
    if (rc) hs_db_run_abort(db);
    hs_db_close(db);
    return rc;
}

/* One simulation at `rate`: on success *mm_out holds the runner (the
 * caller destroys it) and *r its figures. */
static int simulate(const isv_args *a, const hs_model *ms, int nm, const hs_cluster *c, double rate,
                    hs_multi **mm_out, hs_multi_result *r, double *profile_s, hs_err *err)
{
    hs_isv_opts o;
    hs_isv_ctl k;
    hs_multi_cfg mc;
    hs_multi *mm = NULL;
    hs_source *src = NULL;
    int rc;
    *mm_out = NULL;
    opts_of(a, &o);
    memset(&k, 0, sizeof k);
    if ((rc = hs_isv_ctl_init(&k, c, ms, nm, &o, a->fp_dir, a->usable, err))) return rc;
    k.system = a->system;
    k.intent = (hs_isv_intent){a->intent, a->target, a->output};
    k.place = a->place;
    k.tau = a->tau;
    hs_multi_cfg_defaults(&mc);
    mc.alpha = a->alpha;
    mc.usable = a->usable;
    mc.slo_factor = a->slo_factor;
    mc.rate = rate;
    mc.seed = (uint64_t)a->seed;
    mc.perf = o.perf;
    if ((rc = hs_multi_create(&mm, &mc, c, ms, nm, err))) goto out;
    for (int i = 0; i < nm && !rc; i++) {
        hs_layout l;
        hs_isv_ctl_base_layout(&k, i, &l);
        rc = hs_multi_set_base(mm, i, &l, err);
        if (!rc) rc = hs_multi_schedule(mm, i, a->deploy_start + (i / a->deploy_batch) * a->deploy_every, err);
    }
    if (rc) goto out;
    if (a->system == HS_ISV_SYS_ALPA || a->system == HS_ISV_SYS_ALPA_STAR) {
        /* AlpaServe sees the whole trace in advance. */
        hs_arrival ar;
        double lam[64], n = 0, out_sum = 0, t_end = 0;
        if ((rc = open_source(a, &src, err))) goto out;
        while ((rc = hs_source_next(src, &ar, err)) == 1) {
            n++;
            out_sum += ar.output;
            t_end = hs_ns_to_s(ar.arrival);
        }
        hs_source_close(src);
        src = NULL;
        if (rc < 0) goto out;
        for (int i = 0; i < nm; i++) lam[i] = n * rate / (t_end > 0 ? t_end : 1) / nm;
        if ((rc = hs_isv_alpa_plan(&k, lam, n ? (int)(out_sum / n) : 1,
                                   a->system == HS_ISV_SYS_ALPA_STAR, err)))
            goto out;
    }
    if ((rc = open_source(a, &src, err))) goto out;
    if ((rc = hs_multi_run(mm, src, hs_isv_deploy, &k, r, err))) goto out;
    if (strcmp(a->serving, "fcfs")) {
        hs_engine_cfg ec;
        hs_engine_cfg_defaults(&ec);
        if ((rc = hs_multi_run_batched(mm, hs_policy_find(a->serving), &ec, a->passes, r, err)))
            goto out;
    }
    *profile_s = k.profile_s;
out:
    hs_source_close(src);
    hs_isv_ctl_free(&k);
    if (rc) hs_multi_destroy(mm);
    else *mm_out = mm;
    return rc;
}

/* Highest rate in (0, 1] whose SLO attainment is at least a->capacity, by
 * bisection to 1/1024.  Assumes attainment falls as the rate grows; the
 * load-aware placement can break that locally, so the answer is the edge
 * the bisection finds, not a proof that every lower rate meets the SLO. */
static int capacity_search(const isv_args *a, const hs_model *ms, int nm, const hs_cluster *c,
                           isv_cap *cap, hs_err *err)
{
    double lo = 0, hi = 1, ps;
    int rc;
    memset(cap, 0, sizeof *cap);
    for (int step = 0; step <= 10; step++) {
        double x = step ? (lo + hi) / 2 : 1.0;
        hs_multi *mm = NULL;
        hs_multi_result r;
        if ((rc = simulate(a, ms, nm, c, x, &mm, &r, &ps, err))) return rc;
        hs_multi_destroy(mm);
        cap->runs++;
        if (r.slo_attainment >= a->capacity) {
            lo = x;
            cap->req_s = (double)(r.kept + r.early) / a->duration;
            cap->req_s_gpu = r.gpus_used ? cap->req_s / r.gpus_used : 0;
            if (!step) break;   /* the whole trace meets it */
        } else {
            hi = x;
        }
    }
    cap->rate = lo;
    return 0;
}

static int do_run(const isv_args *a, hs_model *ms, int nm, const hs_cluster *c, hs_err *err)
{
    hs_multi *mm = NULL;
    hs_multi_result r;
    isv_cap cap;
    double t_start = hs_wall_s(), rate = a->rate, profile_s = 0;
    int rc;
    if (a->capacity > 0) {
        if ((rc = capacity_search(a, ms, nm, c, &cap, err))) return rc;
        printf("capacity slo_target=%.3f rate=%.5f req_s=%.5f req_s_gpu=%.5f runs=%d\n", a->capacity,
               cap.rate, cap.req_s, cap.req_s_gpu, cap.runs);
        rate = cap.rate > 0 ? cap.rate : 1.0 / 1024;
    }
    if ((rc = simulate(a, ms, nm, c, rate, &mm, &r, &profile_s, err))) return rc;
    printf("result serving=%s system=%s intent=%s place=%s rate=%.5f alpha=%.3f models=%d deployed=%d instances=%d "
           "gpus_used=%d early=%lld kept=%lld served=%lld unserved=%lld p50_s=%.3f p95_s=%.3f p99_s=%.3f "
           "mean_s=%.3f ttft_p50_s=%.3f slo_attainment=%.4f mem_gib=%.1f cost=%.2f gpu_hours=%.3f "
           "gpu_throughput=%.5f duration_s=%.0f profile_gpu_s=%.1f\n",
           a->serving, hs_isv_sys_names[a->system], a->system == HS_ISV_SYS_ISERVE ? hs_isv_intent_names[a->intent] : "-",
           a->system == HS_ISV_SYS_ISERVE ? hs_isv_place_names[a->place] : "first", rate, a->alpha, nm,
           r.deployed, r.instances, r.gpus_used, (long long)r.early, (long long)r.kept, (long long)r.served,
           (long long)r.unserved, r.p50_s, r.p95_s, r.p99_s, r.mean_s, r.ttft_p50_s,
           r.slo_attainment, r.mem_gib, r.cost, r.gpu_hours, r.gpu_throughput, r.duration_s,
           profile_s);
    print_trust(mm);
    if (a->db && (rc = store_run(a, rate, mm, ms, c, &r, a->capacity > 0 ? &cap : NULL, profile_s,
                                 hs_wall_s() - t_start, err)))
        goto out;
    if (a->verbose)
        for (int i = 0;; i++) {
            int model, ng;
            double gib;
            int64_t served;
            const char *lab = hs_multi_inst_label(mm, i, &model, &ng, &gib, &served, NULL);
            if (!lab) break;
            printf("  instance %d model=%s gpus=%d gib=%.1f served=%lld config=%s\n", i,
                   ms[model].name, ng, gib, (long long)served, lab);
        }
out:
    hs_multi_destroy(mm);
    return rc;
}

int hs_iserve_command(int argc, char **argv)
{
    isv_args a;
    hs_err err = {0, ""};
    hs_cluster *c = NULL;
    hs_model *ms = NULL;
    int nm = 0, rc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if ((rc = parse(&a, argc, argv, &err))) {
        fprintf(stderr, "hetsim: %s\n", err.msg);
        usage(stderr);
        return 2;
    }
    ms = calloc(64, sizeof *ms);
    if (!ms) rc = hs_errf(&err, HS_ENOMEM, "out of memory");
    if (!rc) rc = hs_cluster_find(&c, a.cluster, &err);
    if (!rc) rc = load_models(a.models, ms, &nm, &err);
    if (!rc && strcmp(a.mode, "run") && nm != 1)
        rc = hs_errf(&err, HS_EINVAL, "iserve %s: one --model", a.mode);
    if (!rc) {
        if (!strcmp(a.mode, "estimate")) rc = do_estimate(&a, &ms[0], c, &err);
        else if (!strcmp(a.mode, "rank")) rc = do_rank(&a, &ms[0], c, &err);
        else rc = do_run(&a, ms, nm, c, &err);
    }
    if (rc) fprintf(stderr, "hetsim: %s\n", err.msg);
    hs_cluster_destroy(c);
    free(ms);
    return hs_exit_code(rc);
}
