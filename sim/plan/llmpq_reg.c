/* llmpq_reg.c - the planners of the LLM-PQ family behind the registry
 * (llmpq, pipeedge, uniform-pp) and LLM-PQ's subcommand; apart from the
 * planner (llmpq*.c) so that neither the planner nor the subcommand
 * depends on the other's file. */
#include "plan/llmpq.h"
#include "plan/plan.h"

/* Registry entries: the paper's default workload (B = 32, s = 512,
 * n = 100); `hetsim llmpq plan` sets all options. */
static int plan_kind(const hs_plan_req *q, hs_deploy *out, int kind, hs_err *err)
{
    hs_pq_cfg cfg;
    hs_perf_cfg pc;
    hs_pq_plan p;
    int rc;
    hs_pq_cfg_defaults(&cfg);
    /* the run's perf options (--set perf.*) price the plan too */
    if (q->perf) pc = *q->perf;
    else hs_perf_cfg_defaults(&pc);
    cfg.kv_bits = q->engine ? q->engine->kv_bits : 16;
    if (q->max_model_len > 0 && q->max_model_len < cfg.s + cfg.n) {
        cfg.n = q->max_model_len / 6 > 0 ? q->max_model_len / 6 : 1;
        cfg.s = q->max_model_len - cfg.n;
    }
    if ((rc = hs_pq_plan_search(q->model, q->cluster, &cfg, &pc, kind, &p, err))) return rc;
    return hs_pq_to_deploy(&p, q->model, q->cluster, cfg.kv_bits, out, err);
}

static int plan_llmpq(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    return plan_kind(q, out, HS_PQ_LLMPQ, err);
}
static int plan_pipeedge(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    return plan_kind(q, out, HS_PQ_PIPEEDGE, err);
}
static int plan_uniform_pp(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    return plan_kind(q, out, HS_PQ_UNIFORM, err);
}

const hs_planner_ops hs_planner_llmpq = {
    .name = "llmpq",
    .help = "LLM-PQ: one stage per GPU, per-layer bits {16,8,4,3}, ILP (GLPK) over device orders and micro-batches",
    .plan = plan_llmpq,
    .command = hs_llmpq_command,
    .command_help = "LLM-PQ planner, offline pipeline simulation, omega tool",
};
const hs_planner_ops hs_planner_pipeedge = {
    .name = "pipeedge",
    .help = "PipeEdge: one stage per GPU, uniform bits, heterogeneous partition (DP)",
    .plan = plan_pipeedge,
};
const hs_planner_ops hs_planner_uniform_pp = {
    .name = "uniform-pp",
    .help = "LLM-PQ's Uniform baseline: one stage per GPU, even split, uniform bits",
    .plan = plan_uniform_pp,
};
