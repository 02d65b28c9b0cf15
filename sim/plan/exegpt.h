/* exegpt.h - ExeGPT's planning half (ASPLOS'24, papers/exegpt.txt Sec. 4-7):
 * the XSimulator estimator of RRA and WAA schedules from length
 * distributions, and the XScheduler that searches their control variables
 * by branch and bound (plan/bnb.h) for the best throughput under a latency
 * bound.
 *
 * Units: lengths in tokens, times in seconds (double; the estimator is an
 * analytic model, not the event-driven runtime), throughput in queries/s,
 * memory in bytes.
 *
 * Modelling choices where the paper is silent are stated next to the code
 * that makes them (exegpt_est.c); the summary:
 *   - a query of output length S needs D = S - 1 decoding iterations for a
 *     decoder-only model (the encoding pass samples its first token, as in
 *     FasterTransformer and vLLM) and D = S for an encoder-decoder model;
 *     P_D(U) and the workloads are computed on D;
 *   - latency tables come from hs_perf (built once per TP degree for a
 *     one-layer stage and cached); a stage's time is its layer count times
 *     the per-layer time, plus the embedding on the first stage and the LM
 *     head on the last; pipelines with m micro-batches take
 *     max(m * slowest stage, one pass through all stages) per iteration and
 *     sum + (m - 1) * slowest for a fill-and-drain phase;
 *   - expected workloads are plugged into the tables (the time of the
 *     expected batch, not the expected time of a random batch).
 * The estimator is deterministic and allocation-free after creation; it is
 * not thread-safe (it caches tables and scratch in the context). */
#ifndef HS_EXEGPT_H
#define HS_EXEGPT_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "plan/bnb.h"
#include "policy/exegpt/exegpt.h"
#include "serve/deploy.h"
#include "workload/workload.h"

/* ---- discrete length distributions (exegpt_round.c) ------------------------ */

/* P(len) for len = 0..max; p sums to 1 (within 1e-9). */
typedef struct hs_exegpt_dist {
    int32_t max;       /* tokens, largest length with p > 0 */
    double *p;         /* [max + 1], owned */
} hs_exegpt_dist;

#define HS_EXEGPT_MAX_LEN (1 << 20)

/* From a workload length distribution, discretised the way the synthetic
 * generator draws it (workload/synth.c): "fixed" round(mean); "uniform"
 * integers on [ceil(min), floor(max)]; "normal" round(mean + std * N(0,1))
 * truncated to [min, max] by resampling, i.e. P(s) proportional to
 * Phi((s + .5 - mean) / std) - Phi((s - .5 - mean) / std); "lognormal" with
 * the lengths' mean and std, clamped at the bounds (mass at the caps).
 * "trace" is HS_EUNSUPPORTED (use hs_exegpt_dist_from_samples). */
int hs_exegpt_dist_from_lendist(hs_exegpt_dist *d, const hs_lendist *ld, hs_err *err);
/* Histogram of n >= 1 samples (each in 0..HS_EXEGPT_MAX_LEN). */
int hs_exegpt_dist_from_samples(hs_exegpt_dist *d, const int32_t *len, int64_t n, hs_err *err);
/* n (length, weight) pairs, weights >= 0 with a positive sum (normalised). */
int hs_exegpt_dist_from_pairs(hs_exegpt_dist *d, const int32_t *len, const double *w, int n,
                              hs_err *err);
void hs_exegpt_dist_free(hs_exegpt_dist *d);     /* NULL / empty: no-op */
double hs_exegpt_dist_mean(const hs_exegpt_dist *d);
/* Smallest length whose CDF reaches q (q in (0, 1]). */
int32_t hs_exegpt_dist_quantile(const hs_exegpt_dist *d, double q);

/* ---- Section 6: completion within a decoding phase -------------------------- */

/* P_D(U | S) for U in 1..nd: 1 at U = S when S <= nd; 1/ceil(S/nd) at
 * U = 1 + ((S - 1) mod nd) when S > nd; 0 otherwise (and for S < 1). */
double hs_exegpt_pd_u_given_s(int u, int s, int nd);
/* pu[U] = P_D(U) = sum_S P_D(U|S) P(S) for U = 1..nd (pu[0] = 0), where d
 * is the distribution of decoding iterations S.  Returns sum_U P_D(U). */
double hs_exegpt_pd_u(const hs_exegpt_dist *d, int nd, double *pu);
/* B_D = B_E / sum_U P_D(U) (0 when the sum is 0). */
double hs_exegpt_bd(double be, const double *pu, int nd);

/* How RRA's decoding batch follows from B_E:
 *   PAPER  B_D = B_E / sum_U P_D(U) (Section 6), and the batch at iteration
 *          u of a phase is B_D (1 - sum_{U<u} P_D(U));
 *   STEADY the exact steady state of "B_E queries join every N_D
 *          iterations": a query with D iterations stays ceil(D/N_D) phases,
 *          so B_D = B_E E[ceil(D/N_D)] (Little's law) and the batch at u
 *          counts every (query, phase j) with j N_D + u <= D.
 * They differ because P_D(U) weights lengths by their share of arrivals,
 * while the running batch over-represents long queries (by ceil(D/N_D));
 * PAPER therefore under-counts decode work per round (sum_u b(u) < B_E E[D])
 * and over-states throughput.  PAPER is the default for fidelity to the
 * paper; the runtime half can tell which one it matches. */
enum { HS_EXEGPT_BD_PAPER = 0, HS_EXEGPT_BD_STEADY = 1 };

/* Expected workload of one RRA round (one encoding phase + nd iterations). */
typedef struct hs_exegpt_round {
    double joiners;    /* queries that enter decoding per round (B_E minus D = 0 ones) */
    double bd;         /* decoding batch at the first iteration */
    double dec_steps;  /* sum_u b(u): sequence-iterations per round */
    double ctx_peak;   /* tokens, max_u of the batch's total context */
} hs_exegpt_round;

/* d: decoding iterations per query (p[0]: queries that finish at encoding);
 * prompt_mean: tokens each query's context starts with.  Fills b[u] (batch)
 * and ctx[u] (its total context, tokens: prompt + tokens decoded so far,
 * the current one included) for u = 1..nd (index 0 unused; arrays of
 * nd + 1).  The context per query always comes from the exact steady
 * state; only the counts depend on mode.  Returns 0, HS_EINVAL, HS_ENOMEM. */
int hs_exegpt_rra_round(const hs_exegpt_dist *d, double prompt_mean, int nd, double be,
                        int mode, double *b, double *ctx, hs_exegpt_round *r, hs_err *err);

/* ---- the estimator ------------------------------------------------------------ */

enum { HS_EXEGPT_RRA = 0, HS_EXEGPT_WAA_C, HS_EXEGPT_WAA_M, HS_EXEGPT_NPOLICY };
const char *hs_exegpt_policy_name(int policy);   /* "RRA", "WAA-C", "WAA-M" */

typedef struct hs_exegpt_opts {
    hs_perf_cfg perf;    /* latency model (perf.model names the builder) */
    int bits;            /* weight bits, 16 (the paper runs FP16) */
    int kv_bits;         /* 16 */
    double mem_util;     /* fraction of GPU memory usable, 0.9 */
    int bd_mode;         /* HS_EXEGPT_BD_PAPER (default) or _STEADY */
    double enc_slack;    /* encode times x (1 + slack): buffer for the encoder-
                            workload variance the runtime's dynamic adjustment
                            absorbs (Sec. 5.2; Table 7 shows +-7..12% at p99); 0 */
    double kv_margin;    /* fraction of the KV memory the expected population may
                            not use, 0.1: the population fluctuates around its
                            mean, and a schedule planned at 100% of memory
                            preempts about half of the time (RRA, WAA encode) */
    double kv_z;         /* WAA decode: the KV a lane provisions is its mean
                            plus kv_z standard deviations of the population's
                            context (compound Poisson, see est_waa), 2.33: a
                            lane overflows 1% of the time */
    double adjust;       /* the runtime's workload adjustment threshold
                            (engine.exegpt_adjust) the WAA estimate assumes,
                            0.1: its encoder batches follow the band rule
                            (exegpt_est.c band_batch) */
    int table_tokens;    /* latency-table size in tokens (beyond: linear), 32768 */
    int table_seqs;      /* LM-head table size in sequences, 4096 */
    int n_gpus;          /* 0: every GPU of the cluster; else GPUs 0..n-1 */
} hs_exegpt_opts;

void hs_exegpt_opts_defaults(hs_exegpt_opts *o);

typedef struct hs_exegpt hs_exegpt;

/* Borrows the cluster (it must outlive the estimator); copies the model and
 * the distributions.  The cluster's GPUs 0..n-1 must be of one type (the
 * paper's clusters are; the per-layer tables are built once per TP degree).
 * Errors: HS_EINVAL (bad distributions or options), HS_EUNSUPPORTED
 * (mixed GPU types), HS_ENOMEM. */
int hs_exegpt_create(hs_exegpt **out, const hs_model *m, const hs_cluster *c,
                     const hs_exegpt_dist *prompt, const hs_exegpt_dist *output,
                     const hs_exegpt_opts *o, hs_err *err);
void hs_exegpt_destroy(hs_exegpt *x);            /* NULL: no-op */

/* A schedule: policy plus the control variables. */
typedef struct hs_exegpt_cfg {
    int policy;          /* HS_EXEGPT_* */
    int tp;              /* TP degree t (1: none) */
    int tp_groups;       /* k: stages that are TP groups of t GPUs (partial TP) */
    int be;              /* encoding batch B_E, queries */
    int nd;              /* RRA: decoding iterations per encoding phase N_D */
    int bm;              /* WAA: decoder micro-batches B_m (0: one per decode stage) */
} hs_exegpt_cfg;

/* Why a schedule does not run. */
enum {
    HS_EXEGPT_FITS = 0,
    HS_EXEGPT_OOM,           /* weights + KV + activations exceed a GPU */
    HS_EXEGPT_SLOW_DECODER,  /* WAA: the decoder cannot keep up at any batch, or
                                runs so near its limit (loop gain over
                                HS_EXEGPT_MAX_GAIN) that its latency is unpriced */
    HS_EXEGPT_NO_LAYOUT      /* WAA on one GPU */
};

/* WAA's largest decoder loop gain lam E[D] tau_D'(B) / (1 - rho) with a
 * priced latency: a rate error e becomes a latency error e / (1 - g), and
 * the rate is within about 2% of the engine's, so 0.8 keeps it within 10%
 * (exegpt_est.c est_waa). */
#define HS_EXEGPT_MAX_GAIN 0.8

typedef struct hs_exegpt_est {
    int fit;             /* HS_EXEGPT_FITS or the reason it does not */
    double thr;          /* queries/s (estimated also when it does not fit) */
    double lat_b;        /* s, SLA (b): the p99-length output, from the start
                            of its encoding (the paper's L_B) */
    double lat_a;        /* s, SLA (a): p99 over all queries, counting the wait
                            for an encoding slot (uniform over one round) */
    double bd;           /* decoding batch: RRA at a phase's first iteration,
                            WAA the mean population */
    double t_enc;        /* s: RRA encoding phase; WAA one batch through the encoders */
    double t_dec;        /* s: RRA mean decoding iteration; WAA decoding iteration */
    double t_cycle;      /* s: RRA round; WAA encoder period */
    double t_xfer;       /* s: WAA hand-over of one batch (KV or encoder output) */
    double gain;         /* WAA: the decoder's loop gain at its population (0: not solved) */
    double mem_peak;     /* bytes, the largest per-GPU demand */
    double mem_cap;      /* bytes usable per GPU */
    int pp;              /* RRA stages; WAA encode stages */
    int pp_dec;          /* WAA decode stages */
    int n_enc, n_dec;    /* WAA GPUs encoding / decoding */
    int bm;              /* WAA decoder micro-batches used */
    int tp_groups;       /* TP groups actually formed (partial TP) */
} hs_exegpt_est;

/* Estimates one schedule.  Returns 0 (e->fit says whether it runs), or
 * HS_EINVAL (bad cfg), HS_ERANGE (TP degree above a node or the GPU
 * count), or the latency model's error. */
int hs_exegpt_estimate(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_exegpt_est *e, hs_err *err);

/* DeepSpeed-Inference-style baseline (hybrid micro-batching, static batch
 * of `batch` padded prompts run to the longest output, m_enc prompt and
 * m_dec decode micro-batches on RRA's pipeline layout of TP degree tp with
 * `groups` TP groups): *lat s for a batch of the longest prompt and
 * output (the bound), *thr queries/s for batches that last to their
 * expected longest, *fits memory.
 * Analytic from the estimator's stage times; the `dsi` runtime policy
 * (policy/dsi) simulates it, this form is its cross-check (test_dsi.c).
 * Returns 0 or HS_EINVAL / HS_ERANGE. */
int hs_exegpt_dsi(hs_exegpt *x, int tp, int groups, int batch, int m_enc, int m_dec, double *thr,
                  double *lat, int *fits, hs_err *err);

/* WAA's encode GPU count N_E for B_E: ceil(N A / (A + B)) in [1, N - 1],
 * A, B = encode/decode compute (WAA-C) or memory (WAA-M) of one period.
 * Returns 0 or HS_EINVAL (one GPU, RRA) or the latency model's error. */
int hs_exegpt_waa_split(hs_exegpt *x, int policy, int be, int *n_enc, hs_err *err);

/* Facts the planner needs. */
int hs_exegpt_gpus(const hs_exegpt *x);
int hs_exegpt_node_gpus(const hs_exegpt *x);     /* largest node among the GPUs */
int hs_exegpt_max_nd(const hs_exegpt *x);        /* decoding iterations of the longest query */
/* Upper bound on B_E from memory (queries whose prompt KV fits in all the
 * GPUs' memory left after one copy of the weights), at least 1. */
int hs_exegpt_max_be(const hs_exegpt *x);
const hs_model *hs_exegpt_model(const hs_exegpt *x);
const hs_cluster *hs_exegpt_cluster(const hs_exegpt *x);
int32_t hs_exegpt_out_p99(const hs_exegpt *x);   /* tokens, the p99 output length */
int32_t hs_exegpt_max_context(const hs_exegpt *x); /* tokens, longest prompt + longest output */
/* engine.max_batched_tokens for the runtime: an encoding batch of a lane's
 * share of B_E (lanes: the encoding replica's stages) at the mean prompt,
 * widened by the adjustment threshold, plus one longest context. */
int32_t hs_exegpt_batch_tokens(const hs_exegpt *x, int be, int lanes, double adjust);

/* The parallel layouts of a schedule: RRA fills `enc` only (one pipeline
 * doing both phases); WAA fills `enc` (encoding GPUs) and `dec`.  Stage
 * layers count decoder layers (encoder layers of encoder-decoder models are
 * not part of hs_layout).  Returns 0 or HS_EINVAL / HS_ERANGE. */
int hs_exegpt_layouts(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_layout *enc, hs_layout *dec,
                      hs_err *err);

/* ---- the planner (exegpt_plan.c) --------------------------------------------- */

enum { HS_EXEGPT_SLA_B = 0, HS_EXEGPT_SLA_A = 1 };

typedef struct hs_exegpt_plan_opts {
    double lat_bound;    /* s; INFINITY: none */
    int sla;             /* HS_EXEGPT_SLA_B (default) or _A */
    unsigned policies;   /* mask of 1u << HS_EXEGPT_*; 0: all three */
    int max_tp;          /* largest TP degree tried; 0: the node size */
    int max_be;          /* B_E range top; 0: hs_exegpt_max_be */
    double eps_t;        /* queries/s, B&B throughput tolerance */
    double eps_l;        /* s, B&B latency tolerance */
    int exhaustive;      /* 1: evaluate every point (checking only) */
    int split;           /* HS_BNB_SPLIT_* */
} hs_exegpt_plan_opts;

void hs_exegpt_plan_opts_defaults(hs_exegpt_plan_opts *o);

typedef struct hs_exegpt_result {
    int found;                         /* 1: cfg/est hold the best schedule */
    hs_exegpt_cfg cfg;
    hs_exegpt_est est;
    int64_t evals;                     /* estimator calls, all searches */
    int64_t points;                    /* points in all boxes searched */
    int searches;                      /* (policy, TP degree) pairs searched */
    int found_by[HS_EXEGPT_NPOLICY];   /* best per policy, for reports */
    hs_exegpt_cfg cfg_by[HS_EXEGPT_NPOLICY];
    hs_exegpt_est est_by[HS_EXEGPT_NPOLICY];
    int64_t evals_by[HS_EXEGPT_NPOLICY];
} hs_exegpt_result;

/* Runs branch and bound per policy and per TP degree t (t divides the head
 * count, t <= max_tp) over (B_E, N_D, k) for RRA and (B_E, k) for WAA, and
 * keeps the best feasible schedule (throughput, then latency).  WAA's B_E
 * range is cut into runs of equal N_E (hs_exegpt_waa_split), each searched
 * as its own box, because a change of split breaks monotonicity in B_E.
 * B_m is one micro-batch per decode stage: in our timeline fewer only
 * lengthen the decode pass and more only add weight reads, so it is not a
 * trade-off (hs_exegpt_estimate takes any B_m).  Returns 0 (out->found = 0
 * when nothing meets the bound) or an error. */
int hs_exegpt_plan(hs_exegpt *x, const hs_exegpt_plan_opts *o, hs_exegpt_result *out,
                   hs_err *err);

/* A deployment of a schedule for the rra/waa runtime policies: RRA is one
 * "colocated" replica (the pipeline with partial TP; an encoder-decoder
 * model's stages hold their share of encoder and decoder layers); WAA is a
 * "prefill" (encoding) and a "decode" replica, each a full copy of a
 * decoder-only model, or the encoder and the decoder of an encoder-decoder
 * one (stages' enc_layers / layers). */
int hs_exegpt_deploy(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_deploy *out, hs_err *err);

/* The engine settings that run schedule cfg (e: its estimate by x, whose
 * bd becomes the decoding-population target) with dynamic-adjustment
 * threshold `adjust`: B_E, N_D, the target population, the mean prompt, no
 * watermark, two lanes per encode stage, the context of the longest query,
 * and pass and sequence caps sized from B_E and the population.  The
 * planner writes them into its deployment; the DES check runs with them. */
void hs_exegpt_engine_cfg(const hs_exegpt *x, const hs_exegpt_cfg *cfg, const hs_exegpt_est *e,
                          double adjust, hs_engine_cfg *ec, hs_exegpt_rt *rt);

/* ---- checking the estimator against the event-driven runtime (exegpt_des.c) -- */

/* What a discrete-event run of a schedule measured, in the estimator's
 * terms: throughput over the steady part of a saturated run (the middle
 * 60% of completions), and the p99-length query's latency from the start
 * of its encoding (the mean over the queries of that output length in the
 * steady part; SLA (b)). */
typedef struct hs_exegpt_des {
    double thr;          /* queries/s */
    double lat_b;        /* s */
    int64_t n_lat;       /* queries the latency is the mean of */
    double itl;          /* s, mean interval between a query's tokens */
    int64_t completed, preemptions, iterations;
    double sim_s;        /* simulated seconds */
    double wall_s;       /* wall seconds of the run */
} hs_exegpt_des;

/* Runs schedule `cfg` of estimator x (its model and cluster) on the engine
 * with policy rra or waa, n queries drawn from wc (arrivals all at once:
 * ExeGPT's throughput setting), the planner's engine settings (B_E, N_D,
 * target population from the steady-state estimate bd_steady, mean prompt)
 * and dynamic adjustment threshold `adjust`.  pc: the latency model (the
 * estimator's).  Returns 0 or an error. */
int hs_exegpt_des_run(hs_exegpt *x, const hs_exegpt_cfg *cfg, const hs_workload_cfg *wc, int64_t n,
                      double bd_steady, double adjust, const hs_perf_cfg *pc, hs_exegpt_des *out,
                      hs_err *err);

/* A deployment played on the engine with all queries queued at once
 * (ExeGPT's throughput setting): the records in finish order and the
 * engine's counters.  Shared by hs_exegpt_des_run and the baselines of
 * tools/bench-exegpt. */
typedef struct hs_exegpt_play {
    hs_req_record *rec;  /* [n], finish order; hs_exegpt_play_free frees */
    int64_t n;
    double itl;          /* s, mean interval between a query's tokens */
    int64_t completed, preemptions, iterations;
    double sim_s, wall_s;
} hs_exegpt_play;

/* Plays d with `policy`, its options popts (NULL: defaults) and engine
 * settings ec (max_model_len 0: the model's context) on the first n
 * queries of wc.  Returns 0 or an error (out freed). */
int hs_exegpt_play_run(const hs_model *m, const hs_cluster *c, const hs_deploy *d, const char *policy,
                       const hs_engine_cfg *ec, const void *popts, const hs_workload_cfg *wc, int64_t n,
                       const hs_perf_cfg *pc, hs_exegpt_play *out, hs_err *err);
void hs_exegpt_play_free(hs_exegpt_play *p);

/* ExeGPT's measures of a played run: throughput over the middle 60% of
 * completions, and the mean latency (first scheduled to finish) of the
 * queries within a few tokens of output length p99 there.  Returns
 * HS_ESTATE when the run is too short to have a middle. */
int hs_exegpt_measure(const hs_exegpt_play *p, int32_t p99, double *thr, double *lat, int64_t *n_lat);

/* "RRA B_E=52 N_D=13 TP=4x1" style label. */
void hs_exegpt_cfg_str(const hs_exegpt_cfg *cfg, const hs_exegpt_est *e, char *buf, size_t cap);

/* Table 6 of the paper (OPT-13B on exegpt-a40x4, task S, L_B = 3.1, 5.9,
 * 11.5, Inf s): plans each bound with the latency model `pc` and prints our
 * schedule next to the paper's, with the search cost.  out[4] / wall_s[4]
 * receive the plans and scheduler wall times (either may be NULL). */
int hs_exegpt_table6(FILE *fp, const hs_perf_cfg *pc, int bd_mode, hs_exegpt_result *out,
                     double *wall_s, hs_err *err);

#endif
