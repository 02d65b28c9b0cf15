/* iserve.h - iServe (arXiv 2501.13111): intent-based deployment with
 * fingerprint-based estimation.
 *
 * 1. Configuration space (iserve_fp.c): TP in {1,2,4,8} dividing the heads,
 *    PP in 1..min(8, layers) with TP x PP <= GPUs, crossed with 12 variants:
 *    weights FP16/INT8/INT4/GPTQ4 x KV FP16/INT8, and four FP16 pruning
 *    variants (SparseGPT, Wanda, Wanda 2:4, Wanda 4:8).  Llama-2-70B on 8
 *    GPUs: 15 x 12 = 180 configurations, the paper's count.
 * 2. Fingerprints: the model reduced to 1 and 2 hidden layers.  Each
 *    measurement is one batch-1 request (prompt, output) on a (TP, PP,
 *    variant) configuration giving end-to-end latency and total memory over
 *    the configuration's GPUs.  A fingerprint file (CSV, format below) holds
 *    them; `hetsim-exec fingerprint` measures the rows on a device
 *    (exec/fingerprint.h), and without one hs_isv_fp_measure() "measures"
 *    through our latency and memory models.
 * 3. Estimator (the paper's L2 + M2): per PP=1 (TP, variant) the two output
 *    lengths give each fingerprint's TTFT and TPOT (latency = TTFT + TPOT x
 *    output); the 1- and 2-layer values give per-layer h and other-blocks o
 *    (TTFT = L h + o, TPOT likewise), reused for every PP (batch 1).  Memory:
 *    per variant, each fingerprint's footprint on (1,1), (1,2), (2,1) is
 *    extrapolated linearly to L layers, then W, A, A_pp are solved from
 *        M(t, p) = W + t A + (p - 1) A_pp.
 *    With no valid TP 2 (Falcon-7B's 71 heads) A is folded into W.
 * 4. Intents, ranking and placement (iserve_place.c).
 *
 * Fingerprint file (CSV; '#' comment lines; header row required):
 *   model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib
 * wq: fp16|int8|int4|gptq4; prune: none|sparsegpt|wanda|wanda24|wanda48;
 * layers: hidden layers of the fingerprint (1 or 2); latency_ms: end-to-end
 * latency of one request alone; mem_gib: peak memory summed over the TP x PP
 * GPUs, GiB.  Rows may come in any order; the estimator needs, for every
 * variant, the PP=1 rows at two distinct outputs per TP and the (1,1),
 * (1,2), (2,1) memory, for both fingerprints. */
#ifndef HS_ISERVE_H
#define HS_ISERVE_H

#include <stdio.h>

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "plan/iserve_multi.h"

enum { HS_ISV_FP16, HS_ISV_INT8, HS_ISV_INT4, HS_ISV_GPTQ4, HS_ISV_NWQ };
enum { HS_ISV_PRUNE_NONE, HS_ISV_SPARSEGPT, HS_ISV_WANDA, HS_ISV_WANDA24,
       HS_ISV_WANDA48, HS_ISV_NPRUNE };
#define HS_ISV_NVAR 12   /* 4 weight formats x 2 KV formats + 4 pruned */
#define HS_ISV_NTP 4     /* TP 1, 2, 4, 8 */

extern const char *const hs_isv_wq_names[HS_ISV_NWQ];
extern const char *const hs_isv_prune_names[HS_ISV_NPRUNE];

/* One deployment configuration. */
typedef struct hs_isv_cfg {
    int tp, pp;
    int var;        /* variant index 0..11, see hs_isv_var() */
} hs_isv_cfg;

/* A variant: weight format, KV bits, pruning, and its measured decode
 * latency against FP16 (the kernels our latency model does not see;
 * sources in iserve_fp.c). */
typedef struct hs_isv_variant {
    int wq, kv_bits, prune;
    int bits;             /* weight bits given to the memory/latency models */
    double lat_ratio;     /* a decode step's latency over FP16's, measured:
                             hs_solo_build scales the modelled layout to it */
    double wmem_factor;   /* multiplies hidden-layer weight bytes */
    char name[24];        /* "fp16", "int4+kv8", "wanda24" ... */
} hs_isv_variant;

const hs_isv_variant *hs_isv_var(int var);
/* Overrides weight format wq's measured decode ratio (its KV8 variant gets
 * ratio x KV8's) for a sensitivity study: process-wide, before any run.
 * HS_ERANGE outside (0, 10]. */
int hs_isv_set_wq_ratio(int wq, double ratio, hs_err *err);
/* Index of the variant with these settings, -1 when none. */
/* `hetsim iserve ...` (iserve_cli.c): the process exit code. */
int hs_iserve_command(int argc, char **argv);

int hs_isv_var_find(int wq, int kv_bits, int prune);

/* Options of the profiling run and of the "true" model behind it. */
typedef struct hs_isv_opts {
    int prompt;            /* tokens of the profiling request (512) */
    int out1, out2;        /* its two output lengths (16, 128) */
    int ctx;               /* context the KV memory is sized for (2048) */
    double gpu_overhead;   /* bytes per GPU: CUDA context + allocator (0.6 GiB) */
    hs_perf_cfg perf;      /* latency model (the calibrated one, "auto", by default) */
} hs_isv_opts;

void hs_isv_opts_defaults(hs_isv_opts *o);

/* 1 when cfg is valid for the model on n_gpus GPUs. */
int hs_isv_cfg_valid(const hs_model *m, const hs_isv_cfg *c, int n_gpus);
/* Every valid configuration, in (variant, tp, pp) order; *out malloc'ed. */
int hs_isv_space(const hs_model *m, int n_gpus, hs_isv_cfg **out, int *n, hs_err *err);
void hs_isv_cfg_str(const hs_isv_cfg *c, char *buf, size_t cap);

/* Ground truth behind profiling and serving: a request's solo latency is
 * hs_solo_req_ns (plan/iserve_multi.h) on the layout's latency model with the
 * variant's factor; memory is the sum of the stage ranks' bytes below. */
/* Bytes on one rank of a stage holding `layers` hidden layers. */
double hs_isv_stage_bytes(const hs_model *m, int var, int layers, int first,
                          int last, int tp, const hs_isv_opts *o);
/* Bytes of the whole layout (sum over stages and ranks). */
double hs_isv_layout_bytes(const hs_model *m, int var, const hs_layout *l,
                           const hs_isv_opts *o);
/* An even layout of cfg on GPUs gpus[0..tp*pp) (stage s on tp consecutive ids). */
void hs_isv_layout_even(hs_layout *l, const hs_model *m, const hs_isv_cfg *c,
                        const int *gpus);

/* Fingerprint measurements. */
typedef struct hs_isv_meas {
    int layers, tp, pp, var;
    int prompt, output;
    double latency_ms, mem_gib;
} hs_isv_meas;

typedef struct hs_isv_fp {
    char model[48];
    int n;
    size_t cap;
    hs_isv_meas *m;
    double profile_s;      /* simulated GPU time the profiling took */
} hs_isv_fp;

void hs_isv_fp_free(hs_isv_fp *f);
int hs_isv_fp_add(hs_isv_fp *f, const hs_isv_meas *m, hs_err *err);
/* Measures both fingerprints of m on the cluster's GPUs 0.. through the
 * latency and memory models: every PP=1 (TP, variant) at out1 and out2, and
 * (1,2) for the memory system. */
int hs_isv_fp_measure(hs_isv_fp *f, const hs_model *m, const hs_cluster *c,
                      const hs_isv_opts *o, hs_err *err);
int hs_isv_fp_write(const hs_isv_fp *f, FILE *fp);
/* Reads a fingerprint file; errors name file:line and field.  Rows of other
 * models are an error. */
int hs_isv_fp_read(hs_isv_fp *f, const char *path, const char *model, hs_err *err);

/* The estimator's configuration map. */
typedef struct hs_isv_est {
    int layers;                                   /* L of the full model */
    int prompt;                                   /* of the profiling request */
    int lat_ok[HS_ISV_NVAR][HS_ISV_NTP];
    double h_ttft[HS_ISV_NVAR][HS_ISV_NTP], o_ttft[HS_ISV_NVAR][HS_ISV_NTP]; /* ms */
    double h_tpot[HS_ISV_NVAR][HS_ISV_NTP], o_tpot[HS_ISV_NVAR][HS_ISV_NTP]; /* ms */
    int mem_ok[HS_ISV_NVAR];
    double W[HS_ISV_NVAR], A[HS_ISV_NVAR], App[HS_ISV_NVAR];                 /* GiB */
} hs_isv_est;

int hs_isv_estimate(hs_isv_est *e, const hs_isv_fp *f, int layers, hs_err *err);
/* 1 when the map has latency and memory for cfg. */
int hs_isv_est_has(const hs_isv_est *e, const hs_isv_cfg *c);
double hs_isv_est_ttft_ms(const hs_isv_est *e, const hs_isv_cfg *c);
double hs_isv_est_tpot_ms(const hs_isv_est *e, const hs_isv_cfg *c);
double hs_isv_est_latency_s(const hs_isv_est *e, const hs_isv_cfg *c, int output);
double hs_isv_est_mem_gib(const hs_isv_est *e, const hs_isv_cfg *c);

/* ---- intents, ranking, placement (iserve_place.c) ---- */
enum { HS_ISV_MIN_LATENCY, HS_ISV_MIN_COST, HS_ISV_MIN_MEMORY, HS_ISV_MIN_GPUHOURS,
       HS_ISV_LATENCY_SLO, HS_ISV_COST_BUDGET, HS_ISV_NINTENT };
extern const char *const hs_isv_intent_names[HS_ISV_NINTENT];
int hs_isv_intent_parse(const char *s);

typedef struct hs_isv_intent {
    int kind;
    double target;     /* s (LATENCY_SLO) or GiB x s (COST_BUDGET) */
    int output;        /* output tokens of the reference request (128) */
} hs_isv_intent;

/* The intent's figures of one configuration. */
typedef struct hs_isv_score {
    double latency_s, mem_gib, cost, gpu_hours;
} hs_isv_score;
void hs_isv_score_of(const hs_isv_est *e, const hs_isv_cfg *c, int output, hs_isv_score *s);

/* Sorts cfgs[0..n) (those the map covers) best first for the intent:
 * MIN_*: by the metric; LATENCY_SLO: configurations meeting the target by
 * cost, then the rest by latency (best effort); COST_BUDGET: those within the
 * budget by latency, then the rest by cost.  Ties: fewer GPUs, then the
 * original index (a total order).  Returns how many were ranked (the map
 * covers them; they are cfgs[0..k)), -1 when out of memory; *meet (may be
 * NULL) gets how many meet the target (all for the MIN_* intents). */
int hs_isv_rank(const hs_isv_est *e, const hs_isv_intent *in, hs_isv_cfg *cfgs, int n,
                int *meet);

/* Placement policies: candidate GPU order.  pack: highest load first (then
 * most memory in use), so new models join busy GPUs; least-loaded: lowest
 * load first (then least memory in use); hybrid (the paper's default): pack
 * onto the GPUs whose load is below tau, and when they cannot hold the
 * configuration, least-loaded over all GPUs; first: GPU id order (the
 * baselines).  Ties end on the GPU id. */
enum { HS_ISV_PLACE_HYBRID, HS_ISV_PLACE_PACK, HS_ISV_PLACE_LEAST, HS_ISV_PLACE_FIRST,
       HS_ISV_NPLACE };
extern const char *const hs_isv_place_names[HS_ISV_NPLACE];
int hs_isv_place_parse(const char *s);

/* The GPUs as the deployment controller sees them. */
typedef struct hs_isv_gpus {
    int n;
    const double *free_b;   /* bytes free (after the usable fraction) [n] */
    const double *used_b;   /* bytes in use [n] */
    const double *load;     /* load monitor's window mean, 0..1 [n] */
} hs_isv_gpus;

typedef struct hs_isv_placement {
    hs_isv_cfg cfg;
    hs_layout layout;       /* GPUs and (possibly uneven) layers per stage */
    double block_b;         /* per-layer memory block on one GPU, bytes */
    int n_gpus;
    int gpus[64];           /* GPUs used, stage-major */
    double charge_b[64];    /* bytes charged on each */
} hs_isv_placement;

/* First-feasible placement of one configuration: the per-layer block is
 * M(t,p) / (t L); the candidate GPUs (in the policy's order) that can hold a
 * block form p groups of t; layers are spread evenly, water-filling around
 * groups that hold fewer.  Returns 0, or HS_ENOFIT.  Never charges a GPU
 * more than its free bytes. */
int hs_isv_place(const hs_model *m, const hs_isv_est *e, const hs_isv_cfg *c,
                 const hs_isv_gpus *g, int policy, double tau, hs_isv_placement *out,
                 hs_err *err);


/* ---- deployment controller and baselines (iserve_ctl.c) ---- */
enum { HS_ISV_SYS_ISERVE, HS_ISV_SYS_MAXTP, HS_ISV_SYS_MAXPP, HS_ISV_SYS_ACCEL,
       HS_ISV_SYS_ALPA, HS_ISV_SYS_ALPA_STAR, HS_ISV_NSYS };
extern const char *const hs_isv_sys_names[HS_ISV_NSYS];
int hs_isv_sys_parse(const char *s);

/* AlpaServe-like plan: per model, replicas on GPU groups. */
typedef struct hs_isv_alpa {
    int group;               /* GPUs per group */
    int n_rep[64];           /* replicas per model */
    int rep_group[64][8];    /* group index of each replica */
    int tp[64], pp[64];      /* per model */
    double objective;
} hs_isv_alpa;

typedef struct hs_isv_ctl {
    int system;
    hs_isv_intent intent;     /* target: for LATENCY_SLO a factor of the base
                                 latency, for COST_BUDGET of the base cost */
    int place;
    double tau;
    const hs_cluster *c;
    const hs_model *models;
    int n_models;
    hs_isv_opts opts;
    hs_isv_est *est;          /* [n_models] */
    hs_isv_cfg *base;         /* [n_models] minimum parallelism, FP16 */
    hs_isv_alpa alpa;
    double usable;            /* fraction of GPU memory (as the runner) */
    char (*chosen)[64];       /* [n_models] label of the deployed config */
    double profile_s;         /* simulated GPU-seconds of profiling */
} hs_isv_ctl;

/* Profiles (fp_dir: read <fp_dir>/<model>.csv when it exists) and estimates
 * every model, and finds each one's base configuration. */
int hs_isv_ctl_init(hs_isv_ctl *k, const hs_cluster *c, const hs_model *models, int n_models,
                    const hs_isv_opts *o, const char *fp_dir, double usable, hs_err *err);
void hs_isv_ctl_free(hs_isv_ctl *k);
/* Even layout of the model's base configuration on GPUs 0.. (for SLOs). */
void hs_isv_ctl_base_layout(const hs_isv_ctl *k, int model, hs_layout *l);
/* AlpaServe: given each model's request rate (req/s) and the trace's mean
 * output, chooses a group size, a (TP, PP) per model and replicas greedily
 * minimising the rate-weighted M/G/1-processor-sharing latency; star: every
 * model gets a replica first (never drops one). */
int hs_isv_alpa_plan(hs_isv_ctl *k, const double *rate, int mean_output, int star, hs_err *err);
/* The runner's deploy hook (ctx: hs_isv_ctl). */
int hs_isv_deploy(void *ctx, hs_multi *mm, int model, hs_err *err);

#endif
