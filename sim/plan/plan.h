/* plan.h - the planner interface and registry.
 *
 * A planner turns (model, cluster, constraints) into a deployment
 * (serve/deploy.h).  Planners are registered by name in plan.c; adding one
 * touches its own file and one registry line. */
#ifndef HS_PLAN_H
#define HS_PLAN_H

#include "core/conf.h"
#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "out/metrics.h"
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
    /* What the run knows that a planner may plan for (each may be NULL):
     * the workload (its length distributions), the latency targets, the
     * run's runtime policy (a planner may restrict itself to it) and the
     * latency model's settings; the seed of its random choices. */
    const hs_workload_cfg *workload;
    const hs_slo *slo;
    const char *policy;
    const hs_perf_cfg *perf;
    uint64_t seed;
    /* The planner's own options as given ("key=value,...", --plan-opts;
     * NULL or "" for defaults), which it reads with hs_planner_opts. */
    const char *opts;
} hs_plan_req;

/* A planner: a plug-in in its own files with one line in hs_planners[]
 * (plan.c).  It declares its options (`opts`, a schema over its own options
 * struct, which it fills with hs_planner_opts; NULL: none), so that
 * `hetsim list planners` and `plan --help` show them and a misspelt key is
 * an error naming it.
 * `plan` owns nothing after it returns but *out (hs_deploy_free). */
typedef struct hs_planner_ops {
    const char *name;
    const char *help;
    int (*plan)(const hs_plan_req *req, hs_deploy *out, hs_err *err);
    const hs_field *opts;
    /* A research subcommand that comes with the planner (`hetsim <name>
     * ...`, NULL: none), and its line in `hetsim --help`. */
    int (*command)(int argc, char **argv);
    const char *command_help;
} hs_planner_ops;

/* NULL-terminated; the first is the default planner. */
extern const hs_planner_ops *const hs_planners[];
const hs_planner_ops *hs_planner_find(const char *name);

/* p's options from text "key=value,..." (NULL or "": the defaults) into
 * blob (the struct p->opts describes).  Errors name plan_opts and the key; blob is
 * then unspecified. */
int hs_planner_opts(const hs_planner_ops *p, const char *text, void *blob, hs_err *err);
/* Length statistics of a workload, what planners plan for instead of
 * hand-typed means: prompt and output tokens, mean and percentiles over
 * the first HS_PLAN_SAMPLE requests (or workload.max_requests if fewer). */
#define HS_PLAN_SAMPLE 200000
typedef struct hs_plan_lengths {
    int64_t n;                       /* requests sampled */
    double in_mean, in_p50, in_p90, in_p99;    /* prompt tokens */
    double out_mean, out_p50, out_p90, out_p99; /* output tokens */
} hs_plan_lengths;

/* Reads the workload's first requests into *out.  HS_EINVAL when it has
 * none; the source's errors otherwise. */
int hs_plan_lengths_get(const hs_workload_cfg *wc, hs_plan_lengths *out, hs_err *err);

/* Prints p's option keys with their defaults and help, one per line, each
 * line starting with `indent`. */
void hs_planner_opts_help(const hs_planner_ops *p, FILE *fp, const char *indent);

#endif
