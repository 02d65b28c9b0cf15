/* config.h - the run configuration: one typed schema per section, loaded
 * from --config run.json and overridden by flags and --set key=value.
 *
 * Top-level keys: model, cluster, policy, router, planner, deployment,
 * tp, pp, bits, seed, db, label, write_requests, emit_deployment; sections:
 * workload.*, engine.*, perf.*, slo.* (see `hetsim run --help`).  The
 * engine section holds the engine's keys and those the policies declare. */
#ifndef HS_CONFIG_H
#define HS_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "out/metrics.h"
#include "perf/perf.h"
#include "policy/policy.h"
#include "serve/runtime.h"
#include "workload/workload.h"

typedef struct hs_run_cfg {
    char model[256];
    char cluster[256];
    char policy[32];
    char router[16];
    char planner[32];
    char deployment[1024];   /* deployment JSON to replay instead of planning */
    char emit_deployment[1024];
    char emit_schedule[1024];   /* per-iteration schedule of chosen replicas (JSON lines) */
    char emit_replicas[256];    /* which replicas, "0,3" */
    int tp, pp, bits;
    int64_t seed;
    char db[1024];
    char label[128];
    int write_requests;
    int max_replicas;
    int prefill_replicas;
    char given[2048];           /* keys set on the command line, ",k1,k2," */
    double sample_s;            /* s between utilisation/KV samples (0: none) */
    char plan_opts[512];      /* planner options "key=value,..." */
    hs_workload_cfg workload;
    hs_engine_cfg engine;
    /* The policies' own engine.* keys, one block per registered policy
     * (policy/policy.h); the run's policy reads its block. */
    hs_popts popts[HS_MAX_POLICIES];
    hs_perf_cfg perf;
    hs_slo slo;
} hs_run_cfg;

void hs_run_cfg_defaults(hs_run_cfg *c);
/* Applies a run configuration JSON file over c; on an error c is
 * unchanged (every section is checked before any is stored). */
int hs_run_cfg_load(hs_run_cfg *c, const char *path, hs_err *err);
/* "key=value" with dotted section keys (engine.block_size=32); `where`
 * names the source in messages ("--set", "--tp"). */
int hs_run_cfg_set(hs_run_cfg *c, const char *kv, const char *where, hs_err *err);
/* 1 when key ("policy", "engine.block_size") was set by hs_run_cfg_set. */
int hs_run_cfg_given(const hs_run_cfg *c, const char *key);
/* After all sources are applied: the workload seed follows the run seed
 * unless workload.seed was set explicitly. */
void hs_run_cfg_finish(hs_run_cfg *c);
/* Checks the names a run looks up first (policy, planner, router, latency
 * model, model, cluster) and the widths (hs_run_cfg_check_bits) without
 * building anything, with the errors the run would give; a sweep checks
 * every case this way before running any. */
int hs_run_cfg_check(const hs_run_cfg *c, hs_err *err);
/* The registered names a run looks up: 0 when found, else HS_ENOTFOUND with
 * the one message the run and the sweep's check both give ("policy:
 * unknown policy \"X\" (did you mean ...) (see hetsim list policies)"). */
int hs_check_policy(const char *name, hs_err *err);
int hs_check_planner(const char *name, hs_err *err);
int hs_check_router(const char *name, hs_err *err);
int hs_check_perf_model(const char *name, hs_err *err);
/* bits in {16, 8, 4, 3} and engine.kv_bits in {16, 8}: a set accepts any
 * integer in range, a run only these.  Shared by the run and the check. */
int hs_run_cfg_check_bits(const hs_run_cfg *c, hs_err *err);
/* The effective configuration as JSON text (caller frees). */
char *hs_run_cfg_json(const hs_run_cfg *c);
/* Sets engine.<key> from a JSON object of engine keys (a deployment's
 * settings), skipping the keys the command line gave; all or nothing.
 * `where` names the source. */
int hs_run_cfg_engine_json(hs_run_cfg *c, const cJSON *obj, const char *where, int skip_given,
                           hs_err *err);
/* Prints every key with its default and help (run --help). */
void hs_run_cfg_help(FILE *fp);

#endif
