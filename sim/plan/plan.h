/* plan.h - the planner interface and registry.
 *
 * A planner turns (model, cluster, constraints) into a deployment
 * (serve/deploy.h).  Planners are registered by name in plan.c; adding one
 * touches its own file and one registry line. */
#ifndef HS_PLAN_H
#define HS_PLAN_H

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "serve/deploy.h"
#include "workload/workload.h"

typedef struct hs_plan_req {
    const hs_model *model;
    const hs_cluster *cluster;
    const hs_engine_cfg *engine;
    int tp;            /* 0: smallest that fits */
    int pp;            /* >= 1 */
    int bits;          /* weight bits */
    int max_replicas;  /* 0: as many as the GPUs allow */
    int prefill_replicas; /* > 0: the first ones get role prefill, the rest decode */
    int max_tokens;    /* largest forward pass, for the memory check */
    int32_t max_model_len;
    /* For planners that plan for a workload and a latency target (exegpt):
     * the workload (its length distributions), the end-to-end bound (ms,
     * 0: none), the run's policy (a planner may restrict itself to it),
     * the SLA form and an exhaustive-search switch for checking. */
    const hs_workload_cfg *workload;
    double e2e_bound_ms;
    const char *policy;
    int sla_all;       /* 1: 99% of queries within the bound; 0: the p99-length query */
    int exhaustive;
    /* Search planners (hexgen2 and its baselines): the latency model's
     * efficiency knobs (NULL: defaults), the seed and "key=value,..."
     * options (plan_opts; NULL or "" for defaults). */
    const hs_perf_cfg *perf;
    uint64_t seed;
    const char *opts;
} hs_plan_req;

typedef struct hs_planner_ops {
    const char *name;
    const char *help;
    int (*plan)(const hs_plan_req *req, hs_deploy *out, hs_err *err);
} hs_planner_ops;

extern const hs_planner_ops *const hs_planners[];
const hs_planner_ops *hs_planner_find(const char *name);

#endif
