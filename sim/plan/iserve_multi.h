/* iserve_multi.h - a multi-model cluster: LLMs deployed over time onto shared GPUs,
 * requests routed per model, FCFS batch-1 serving as in iServe.
 *
 * Each deployed model has one or more instances (DP replicas), each on a set
 * of GPUs with a parallel layout.  An instance serves one request at a time,
 * FCFS from its own queue (iServe Sec. 5: no batching, no preemption).  A
 * request's solo service time comes from the latency model of the instance's
 * layout (hs_solo: prefill pass + one decode pass per further token, context
 * growing; closed form because decode time is linear in the context).
 *
 * Interference model (co-located models; the paper gives none): GPUs are
 * time-sliced between the busy instances placed on them.  With k busy
 * instances on a GPU, each progresses at
 *     rate = 1 / (1 + alpha (k - 1))
 * of its solo speed; an instance spanning several GPUs advances at the rate
 * of its most contended GPU.  The default, HS_ISV_ALPHA = 1.22, is measured
 * in iServe's setup (one process per LLM, no MPS): batch-1 decode of
 * Llama-2-7B replayed by 1-4 hetsim-exec processes at once on an H200
 * (tools/gpu-run colocate), each process's decode steps per second of wall
 * time; least squares over k = 2-4 of two runs, residuals within 4%
 * (profiles/exec/colocate/h200-llama-2-7b.csv).  Above 1 because time
 * slicing is not free: k processes together keep 87% of one's throughput.
 * alpha 1 is time slicing with free context switches (NVIDIA's MPS
 * documentation: without MPS a GPU runs one process's context at a time);
 * alpha ~ 0.2 is the one published LLM co-location figure we found, under
 * MPS (two vLLM processes on an A100: TPOT +19.5%); alpha 0 is no
 * interference.  docs/iserve.md gives the sources.
 * Rates change only at starts and completions, so the run is an exact fluid
 * processor-sharing simulation driven by those events.
 *
 * Events: the run pops one hs_evq (core/evq.h) holding the deployments, the
 * pending arrival, the next load sample and the earliest completion.  At one
 * instant: the sample, then completions (lowest instance first), then
 * deployments (in scheduling order), then the arrival (iserve_multi.c says why).
 *
 * Randomness: one hs_rng (core/rng.h) seeded with cfg.seed draws, per trace
 * arrival, a uniform for thinning and, per arrival kept, its model.
 *
 * Routing: each arrival kept by thinning is assigned a model uniformly at
 * random (the paper's random query-to-LLM assignment), so every model sees
 * the same rate; arrivals for a model whose deployment time has not come
 * are not part of the workload (counted as `early`), those for a model that
 * could not be deployed are unserved (SLO misses).  Among a model's instances the one with
 * the fewest outstanding requests is chosen (ties: lowest id).
 *
 * Load monitor: every second each GPU's busy fraction over that second is
 * pushed; the load seen by placement is the mean over the last 120 samples.
 *
 * Invariants: MULTI-CONS kept arrivals == served + unserved at the end;
 * MULTI-MEM the true bytes placed on a GPU never exceed usable x capacity
 * (hs_multi_add refuses, asserted after each deployment). */
#ifndef HS_MULTI_H
#define HS_MULTI_H

#include <stdint.h>

#include "core/err.h"
#include "core/time.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "serve/runtime.h"
#include "workload/workload.h"

/* Solo latency of one request on one layout. */
typedef struct hs_solo {
    hs_perf perf;
    double lat_factor;      /* multiplies the modelled time (format kernels) */
    double pass_extra_ns;   /* added to every forward pass (CPU offload) */
} hs_solo;

/* The context (tokens) at which a variant's decode step is matched to its
 * measured ratio: one point for the estimator's fingerprints and the live
 * instances alike (a ratio drifts a few percent with the context). */
#define HS_ISV_RATIO_CTX 512

/* max_prompt and max_seqs size the tables (a fitted latency model fits
 * decode attention over 1..max_seqs: build as the engine that runs the
 * layout will).  lat_ratio: the variant's measured decode
 * latency over FP16's (1: none); lat_factor becomes what makes the
 * layout's modelled one-sequence decode step at HS_ISV_RATIO_CTX lat_ratio
 * times the same layout's at 16 bits (weights and KV), so the measurement
 * holds whatever share of the step the weights are.  Prefill takes the
 * same factor: the sources time whole requests or decode steps, none a
 * prefill alone. */
int hs_solo_build(hs_solo *s, const hs_perf_cfg *pc, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_prompt, int max_seqs,
                  double lat_ratio, double pass_extra_ns, hs_err *err);
/* The factor that makes q's one-sequence decode step at HS_ISV_RATIO_CTX
 * lat_ratio times that of l's FP16 twin (weights and KV at 16 bits), the
 * twin built with q's max_seqs (decode attention is fitted over 1..max_seqs,
 * so tables of other widths differ in the fourth digit); lat_ratio itself
 * when l is FP16 throughout.  q: l's tables, unscaled. */
int hs_solo_factor(const hs_perf *q, const hs_perf_cfg *pc, const hs_model *m, const hs_cluster *c,
                   const hs_layout *l, int max_seqs, double lat_ratio, double *factor, hs_err *err);
void hs_solo_free(hs_solo *s);
/* ns; *ttft (may be NULL) gets the first-token part. */
double hs_solo_req_ns(const hs_solo *s, int prompt, int output, double *ttft);

/* Load monitor. */
#define HS_LOAD_WINDOW 120
typedef struct hs_loadmon {
    int n;
    double *samples;   /* [n * HS_LOAD_WINDOW] ring */
    double *sum;       /* [n] */
    int head, filled;
} hs_loadmon;
int hs_loadmon_init(hs_loadmon *mo, int n, hs_err *err);
void hs_loadmon_free(hs_loadmon *mo);
void hs_loadmon_push(hs_loadmon *mo, const double *busy_frac);
double hs_loadmon_load(const hs_loadmon *mo, int gpu);

/* measured default of hs_multi_cfg.alpha, see above */
#define HS_ISV_ALPHA 1.22

typedef struct hs_multi_cfg {
    double alpha;       /* interference, see above (HS_ISV_ALPHA) */
    double usable;      /* fraction of each GPU's memory models may use (0.95) */
    double slo_factor;  /* request SLO = factor x its solo latency on the model's base layout (5) */
    double rate;        /* fraction of trace arrivals kept, (0, 1] */
    int max_prompt;     /* prompts longer are clamped (1024: ShareGPT inputs <= 1K) */
    uint64_t seed;      /* the runner's hs_rng: thinning and model choice (1) */
    hs_perf_cfg perf;
} hs_multi_cfg;

void hs_multi_cfg_defaults(hs_multi_cfg *c);

typedef struct hs_multi hs_multi;

/* Called at each scheduled deployment of `model`; adds instances with
 * hs_multi_add.  Returns 0, HS_ENOFIT (the model stays undeployed) or
 * another negative code (the run fails). */
typedef int (*hs_multi_deploy_fn)(void *ctx, hs_multi *mm, int model, hs_err *err);

/* models: n_models entries, owned by the caller, outliving the runner. */
int hs_multi_create(hs_multi **out, const hs_multi_cfg *cfg, const hs_cluster *c,
                    const hs_model *models, int n_models, hs_err *err);
void hs_multi_destroy(hs_multi *mm);

/* The layout whose solo latency defines the model's SLO (minimum
 * parallelism, no quantisation). */
int hs_multi_set_base(hs_multi *mm, int model, const hs_layout *l, hs_err *err);
/* Deploys `model` at t seconds (several per model are allowed); from a
 * deploy hook, t must not be before the runner's clock (HS_ERANGE). */
int hs_multi_schedule(hs_multi *mm, int model, double t_s, hs_err *err);

/* Adds an instance.  charge_b: bytes per GPU the controller charges (its
 * estimate, NULL: the true bytes); true bytes per GPU come from true_b
 * (indexed like l's GPUs, stage-major).  Returns HS_ENOFIT, changing
 * nothing, when the true bytes would exceed a GPU's usable memory. */
int hs_multi_add(hs_multi *mm, int model, const hs_layout *l, double lat_ratio,
                 double pass_extra_ns, const double *charge_b, const double *true_b,
                 const char *label, hs_err *err);

/* Views for the deployment controller (arrays of n GPUs, valid until the
 * next hs_multi call). */
int hs_multi_n_gpus(const hs_multi *mm);
const double *hs_multi_free_b(hs_multi *mm);   /* usable - charged */
const double *hs_multi_used_b(hs_multi *mm);   /* charged */
const double *hs_multi_load(hs_multi *mm);     /* monitor window means */
double hs_multi_now_s(const hs_multi *mm);

typedef struct hs_multi_result {
    int64_t arrivals;       /* trace arrivals read */
    int64_t kept;           /* after rate thinning, for models whose deployment time has come */
    int64_t early;          /* thinned-in arrivals for models not yet due (not in kept) */
    int64_t served, unserved; /* unserved: its model could not be deployed (or an engine dropped it) */
    double p50_s, p95_s, p99_s, mean_s;   /* end-to-end latency of served requests */
    double ttft_p50_s;
    double slo_attainment;  /* served within SLO / kept (unserved count as misses) */
    double mem_gib;         /* true bytes of deployed instances at the end */
    double cost;            /* mean per served request of instance GiB x latency s */
    double gpu_hours;       /* sum over served requests of GPUs x solo service time */
    int gpus_used;
    double gpu_throughput;  /* served / (duration x GPUs used), req/s/GPU */
    double duration_s;      /* first arrival to last finish */
    int deployed, instances;
} hs_multi_result;

/* Runs the arrivals of src through the cluster, calling deploy at the
 * scheduled times.  Once per runner (HS_ESTATE after): the deployments are
 * consumed.  HS_ESTATE too when src goes back in time. */
int hs_multi_run(hs_multi *mm, hs_source *src, hs_multi_deploy_fn deploy, void *ctx,
                 hs_multi_result *res, hs_err *err);

/* The continuous-batching option (iserve_multi_cb.c): after hs_multi_run, re-serves
 * every instance's requests with `policy` through one hs_engine each,
 * interference by mean field over `passes` rounds; overwrites the latency,
 * SLO, cost, GPU-hours and throughput figures of res (requests the engine
 * drops count as unserved). */
int hs_multi_run_batched(hs_multi *mm, const hs_policy_ops *policy, const hs_engine_cfg *ec,
                         int passes, hs_multi_result *res, hs_err *err);

/* After a run: instance i's description (NULL past the end). */
const char *hs_multi_inst_label(const hs_multi *mm, int i, int *model, int *n_gpus,
                                double *gib, int64_t *served, double *p50_s);

/* Instance i's layout (NULL past the end). */
const hs_layout *hs_multi_inst_layout(const hs_multi *mm, int i);

/* Instance i's latency model, for where its times came from (calib,
 * expected_err): NULL past the end or when it was never built. */
const hs_perf *hs_multi_inst_perf(const hs_multi *mm, int i);

/* After a run: request i (0.. kept - 1: the served ones in arrival order,
 * then those of undeployed models) as a record for the requests table:
 * replica = instance index (-1: never routed), first_sched = start of
 * service, first_token = start + the solo TTFT scaled by the request's mean
 * slowdown.  *model (may be NULL) gets its model, *slo_met (may be NULL)
 * whether it finished within its SLO.  Returns 0 past the end.  In the
 * batched option, first_token is the engine's; the record is valid until
 * the runner is destroyed (why points to static text). */
int hs_multi_request(const hs_multi *mm, int64_t i, hs_req_record *rec, int *model, int *slo_met);

/* 1 when every GPU's true bytes are within usable x capacity (MULTI-MEM). */
int hs_multi_mem_sane(const hs_multi *mm);

#endif
