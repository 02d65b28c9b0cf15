/* exegpt_reg.c - the `exegpt` planner: ExeGPT's XScheduler (exegpt_plan.c)
 * behind the planner interface, so that `hetsim plan|run --planner exegpt`
 * chooses the schedule (RRA or WAA, B_E, N_D, partial TP) with the best
 * estimated throughput under the end-to-end bound and returns it as a
 * deployment that names its runtime policy (rra / waa) and the engine
 * settings that run it (policy/exegpt/exegpt.c).
 *
 * Lengths: a synthetic workload gives its length distributions directly;
 * a trace (or "trace" lengths) is sampled (up to 200,000 requests).  The
 * bound is slo.e2el_ms (0: none), on the p99-length query (ExeGPT's SLA
 * (b)) or on 99% of queries (--plan-opts sla=queries).  The run's policy narrows
 * the search: rra plans RRA only, waa WAA-C and WAA-M, any other policy
 * all three. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/exegpt.h"
#include "plan/plan.h"

#define SAMPLE_MAX 200000

/* The planner's options (--plan-opts). */
typedef struct exegpt_popts {
    char sla[16];        /* "length" or "queries" */
    int exhaustive;
    double adjust;
} exegpt_popts;

static const hs_field popts[] = {
    HS_FIELD_STR(exegpt_popts, sla, 0, "length", "\"length\" bounds the p99-length query, \"queries\" 99% of queries"),
    HS_FIELD_NUM(exegpt_popts, exhaustive, HS_F_BOOL, 0, 0, 0, 1, "exhaustive search instead of branch and bound (checking)"),
    HS_FIELD_NUM(exegpt_popts, adjust, HS_F_DOUBLE, 0, 0.1, 0, 1, "dynamic workload adjustment threshold the runtime gets (engine.exegpt_adjust)"),
    {0},
};

static int sample_dists(const hs_workload_cfg *wc, hs_exegpt_dist *din, hs_exegpt_dist *dout,
                        hs_err *err)
{
    hs_source *src = NULL;
    hs_arrival a;
    int32_t *pin = NULL, *pout = NULL;
    int64_t n = 0;
    int rc;
    hs_workload_cfg c = *wc;
    if (!c.max_requests || c.max_requests > SAMPLE_MAX) c.max_requests = SAMPLE_MAX;
    if (!(pin = malloc(SAMPLE_MAX * sizeof *pin)) || !(pout = malloc(SAMPLE_MAX * sizeof *pout))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory (exegpt length samples)");
        goto out;
    }
    if ((rc = hs_source_open(&src, &c, err))) goto out;
    while (n < SAMPLE_MAX && (rc = hs_source_next(src, &a, err)) > 0) {
        pin[n] = a.prompt;
        pout[n] = a.output;
        n++;
    }
    if (rc < 0) goto out;
    if (n == 0) {
        rc = hs_errf(err, HS_EINVAL, "exegpt: the workload has no requests to take lengths from");
        goto out;
    }
    if ((rc = hs_exegpt_dist_from_samples(din, pin, n, err)) ||
        (rc = hs_exegpt_dist_from_samples(dout, pout, n, err)))
        goto out;
out:
    hs_source_close(src);
    free(pin);
    free(pout);
    return rc;
}

extern const hs_planner_ops hs_planner_exegpt;

static int plan(const hs_plan_req *req, hs_deploy *out, hs_err *err)
{
    hs_exegpt_dist din = {0, NULL}, dout = {0, NULL};
    hs_exegpt_opts eo;
    hs_exegpt_plan_opts po;
    hs_exegpt_result res;
    hs_exegpt *x = NULL;
    hs_engine_cfg ec;
    hs_exegpt_rt rt;
    exegpt_popts o;
    double bound = req->slo && req->slo->e2el_ms > 0 ? req->slo->e2el_ms : 0;
    const hs_workload_cfg *wc = req->workload;
    char eng[256], label[128];
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = hs_planner_opts(&hs_planner_exegpt, req->opts, &o, err))) return rc;
    if (strcmp(o.sla, "length") && strcmp(o.sla, "queries"))
        return hs_errf(err, HS_EINVAL, "plan_opts: sla: \"%s\" is not \"length\" or \"queries\"", o.sla);
    if (!wc) return hs_errf(err, HS_EINVAL, "planner exegpt: needs the workload's length distributions");
    if (!strcmp(wc->kind, "synthetic") && strcmp(wc->prompt.kind, "trace") && strcmp(wc->output.kind, "trace")) {
        if ((rc = hs_exegpt_dist_from_lendist(&din, &wc->prompt, err)) ||
            (rc = hs_exegpt_dist_from_lendist(&dout, &wc->output, err)))
            goto out;
    } else if ((rc = sample_dists(wc, &din, &dout, err))) {
        goto out;
    }
    hs_exegpt_opts_defaults(&eo);
    /* Plan with the latency model the run will use (perf.*), not the
     * defaults: a plan for another model is a plan for another machine. */
    if (req->perf) eo.perf = *req->perf;
    eo.bits = req->bits ? req->bits : 16;
    eo.kv_bits = req->engine ? req->engine->kv_bits : 16;
    if (req->engine) eo.mem_util = req->engine->gpu_mem_util;
    /* Plan with the population the schedule really sustains (the exact
     * steady state; the paper's B_D formula under-counts the decoding work
     * and picks schedules that do not fit when played, see exegpt.h). */
    eo.bd_mode = HS_EXEGPT_BD_STEADY;
    eo.adjust = o.adjust; /* the runtime's band, which the WAA estimate forms batches by */
    if ((rc = hs_exegpt_create(&x, req->model, req->cluster, &din, &dout, &eo, err))) goto out;
    hs_exegpt_plan_opts_defaults(&po);
    po.lat_bound = bound > 0 ? bound / 1000.0 : INFINITY;
    po.sla = !strcmp(o.sla, "queries") ? HS_EXEGPT_SLA_A : HS_EXEGPT_SLA_B;
    po.exhaustive = o.exhaustive;
    if (req->tp > 0) po.max_tp = req->tp;
    /* engine.exegpt_be takes at most 65536 queries per batch. */
    po.max_be = hs_exegpt_max_be(x) < 65536 ? hs_exegpt_max_be(x) : 65536;
    if (req->policy && !strcmp(req->policy, "rra")) po.policies = 1u << HS_EXEGPT_RRA;
    if (req->policy && !strcmp(req->policy, "waa"))
        po.policies = (1u << HS_EXEGPT_WAA_C) | (1u << HS_EXEGPT_WAA_M);
    if ((rc = hs_exegpt_plan(x, &po, &res, err))) goto out;
    if (!res.found) {
        if (bound > 0)
            rc = hs_errf(err, HS_EINVAL,
                         "planner exegpt: no schedule of %s on %s meets the bound of %.0f ms (slo.e2el_ms)",
                         req->model->name, req->cluster->name, bound);
        else
            rc = hs_errf(err, HS_EINVAL,
                         "planner exegpt: no %s%sschedule of %s on %s fits in memory with a decoder that keeps up",
                         req->policy ? req->policy : "", req->policy ? " " : "", req->model->name, req->cluster->name);
        goto out;
    }
    if ((rc = hs_exegpt_deploy(x, &res.cfg, out, err))) goto out;
    hs_engine_cfg_defaults(&ec);
    hs_exegpt_engine_cfg(x, &res.cfg, &res.est, o.adjust, &ec, &rt);
    snprintf(eng, sizeof eng,
             "{\"exegpt_be\":%d,\"exegpt_nd\":%d,\"exegpt_bd\":%.3f,\"exegpt_prompt_mean\":%.3f,"
             "\"watermark\":0,\"max_batched_tokens\":%d,\"max_num_seqs\":%d,\"max_model_len\":%d,"
             "\"prefill_lanes\":%d}",
             rt.exegpt_be, rt.exegpt_nd, rt.exegpt_bd, rt.exegpt_prompt_mean, ec.max_batched_tokens,
             ec.max_num_seqs, ec.max_model_len, ec.prefill_lanes);
    if ((rc = hs_deploy_set_policy(out, res.cfg.policy == HS_EXEGPT_RRA ? "rra" : "waa", eng, err)))
        goto fail;
    snprintf(out->cluster, sizeof out->cluster, "%s", req->cluster->name);
    hs_exegpt_cfg_str(&res.cfg, &res.est, label, sizeof label);
    snprintf(out->summary, sizeof out->summary,
             "%s: predicted %.3f queries/s, p99-length latency %.2f s, p99 latency %.2f s; %lld of %lld points evaluated",
             label, res.est.thr, res.est.lat_b, res.est.lat_a, (long long)res.evals, (long long)res.points);
    goto out;
fail:
    hs_deploy_free(out);
out:
    hs_exegpt_destroy(x);
    hs_exegpt_dist_free(&din);
    hs_exegpt_dist_free(&dout);
    return rc;
}

const hs_planner_ops hs_planner_exegpt = {
    .name = "exegpt",
    .help = "ExeGPT XScheduler: best RRA/WAA schedule under slo.e2el_ms by branch and bound (sets the policy)",
    .plan = plan,
    .opts = popts,
};
