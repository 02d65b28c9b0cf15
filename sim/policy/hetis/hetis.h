/* hetis.h - Hetis's runtime side (the `hetis` policy, policy.c): head-level attention offload, per
 * replica (Hetis paper, §4-§5).
 *
 * A Hetis replica is an ordinary replica (its GPUs are the Primary workers:
 * dense modules, prefill, their share of decode attention) plus Attention
 * workers, each serving one pipeline stage: they run decode attention for
 * the KV-head groups dispatched to them and hold those groups' cache.
 *
 * Devices of stage s: dev 0 is the stage's primary TP group (heads split
 * evenly over its ranks), dev 1.. its attention workers.  Each decode
 * member r has a placement x[s][g] (groups of stage s on device g).
 * Per-layer decode attention time of a lane's step on device g (Eq. 3, 4):
 *     T_g = a_g N_g + b_g M_g + c_g  [+ alpha_g + beta_g N_g for workers]
 * (N_g groups, M_g group-tokens of cache, both over the lane's members;
 * the fixed terms only when N_g > 0); the stage's decode attention is
 * layers_s * max_g T_g, replacing the perf model's dec_* term, and the
 * dense part stays hs_perf's.  The linear coefficients come from hs_perf
 * itself (the primary stage's table; a one-layer TP-1 table of each
 * worker's GPU), so the offload model and the plain runtime agree when
 * nothing is offloaded.  Transfer volume per group and layer is GQA-aware:
 * q (k query heads) + the new token's k and v + the output (k heads):
 * (2k + 2) * head_dim * 2 bytes.
 *
 * Life of a request: a prompt is prefilled on the primary and held in the
 * lane's block pool; when it joins the decode set the dispatcher places its
 * groups (min-max MILP, policy/hetis/hetis_lp.h, GLPK, 1% gap; the requests that
 * joined since the lane's last step are placed one after another in
 * arrival order, each seeing the ones before in its base) and the
 * offloaded groups' prompt KV is sent to the workers; the lane's next step
 * waits for it (charged in full, not overlapped with prefill).  Admission
 * also needs room for the prompt's groups on the stage's devices.  Before
 * each step the lane's growth is checked per device; an overfull device
 * sheds its latest-arrived request's groups to devices with room (only the
 * groups that change place move; migration is low priority and modelled
 * as free: it never delays a step, its bytes are counted), and when
 * nothing has room that request is preempted (recompute).  Every `period`
 * decode steps the lane's attention time is compared with the ideal (the
 * LP relaxation over its members, bucketed by length into 16 items); beyond
 * (1 + theta) one request, the heaviest on the bottleneck device, is
 * re-dispatched; memory-pressure migration also stops (falling back to
 * preemption) once it would push attention time beyond that bound.
 *
 * Memory: lane KV blocks are the pool of the primary's and the workers'
 * cache (vLLM-style admission sees the pool); per-device books are kept in
 * group-tokens.  Invariants (docs/INVARIANTS.md), hs_hetis_sane:
 *   INV-HEAD  every tracked member has sum_g x[s][g] == kv_heads in every
 *             stage, x >= 0, and the tracked members of a lane are exactly
 *             its decode set after a sync;
 *   INV-HMEM  per device, reserved group-tokens == sum over lanes of the
 *             members' cache plus their next step's growth, and <= cap. */
#ifndef HS_HETIS_H
#define HS_HETIS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "policy/hetis/hetis_lp.h"
#include "serve/deploy.h"
#include "serve/runtime.h"

/* Share of an attention worker's usable memory (x gpu_mem_util) its KV cache
 * takes; the rest is the attention kernel's scratch.  The planner
 * (plan/hetis_plan.c) sizes workers with it too, so its estimate matches. */
#define HS_HETIS_WORKER_KV_FRAC 0.98

typedef struct hs_hetis_cfg {
    double theta;      /* re-dispatch when attention time > (1+theta) * ideal (0.5) */
    int period;        /* decode steps of a lane between ideal-time checks (16) */
    int offload;       /* 0: never place heads on workers (ablation) */
} hs_hetis_cfg;

/* The policy's options: engine.hetis_theta, hetis_period, hetis_offload. */
extern const hs_field hs_hetis_cfg_fields[];
void hs_hetis_cfg_defaults(hs_hetis_cfg *c);

typedef struct hs_hetis_dev {
    int gpu;           /* cluster GPU id (primary: its first rank) */
    int primary;       /* 1: the stage's primary TP group */
    double a, b, c;    /* per layer: ns/group, ns/group-token, ns */
    double alpha, beta;/* per layer, workers: ns (two messages), ns/group */
    double link_bw;    /* bytes/s primary -> worker (prompt KV, migrations) */
    double link_lat;   /* s */
    double cap;        /* group-tokens of cache */
    double peak;       /* most group-tokens reserved at once */
} hs_hetis_dev;

typedef struct hs_hetis_stats {
    int64_t dispatches, dispatched_reqs, offloaded_groups, placed_groups;
    double dispatch_wall_s, dispatch_wall_max_s;  /* thread CPU time, s; never in results */
    int64_t dispatch_hist[32];  /* dispatch calls by wall time: bucket k holds [2^k, 2^(k+1)) us */
    int64_t redispatches, migrations, moved_groups, fallback_preempts;
    double moved_bytes, prompt_bytes;
    int64_t checks, imbalanced;
} hs_hetis_stats;

typedef struct hs_hetis {
    hs_hetis_cfg cfg;
    int pp, n_lanes, groups, block_size;
    int layers[HS_MAX_PP];
    int n_dev[HS_MAX_PP];
    hs_hetis_dev dev[HS_MAX_PP][HS_HETIS_MAX_DEV];
    double bytes_gt_layer;      /* KV bytes per group-token per layer */
    double xfer_group_bytes;    /* per group per layer per step */
    double scale;               /* the replica's latency_scale (1: none): its
                                   workers and transfers run at it too */
    /* per lane x stage x device: members' groups, cache (group-tokens),
     * reserved (cache + next step's growth) */
    double *n, *m, *resv;
    double *debt;               /* [lane * pp + s] ns owed by the next step */
    int64_t *steps;             /* [lane] decode steps seen */
    double *ideal;              /* [lane * pp + s] last ideal time, ns */
    /* per request, by engine pool index */
    int32_t cap_rec;
    int64_t *rec_id;            /* -1: free */
    int32_t *rec_lane;
    int64_t *rec_seen;
    int16_t *rec_x;             /* [cap_rec * pp * HS_HETIS_MAX_DEV] */
    int32_t *tracked;           /* pool indices of tracked members */
    int32_t n_tracked, cap_tracked;
    int64_t epoch;
    hs_hetis_stats st;
} hs_hetis;

/* Builds Hetis state for each replica that has attention workers in d (and
 * for every replica when all_replicas: head books without workers), hangs
 * it on rp[i].pstate (the replica owns it: hs_replicas_free or
 * hs_hetis_detach frees it) and raises rp[i].kv_blocks to the pooled
 * cache.  Call after hs_replicas_build, before hs_engine_create.  Errors
 * name the replica. */
int hs_hetis_attach(hs_replica *rp, int32_t n_rep, const hs_deploy *d, const hs_model *m,
                    const hs_cluster *c, const hs_engine_cfg *ec, const hs_perf_cfg *pc,
                    const hs_hetis_cfg *hc, int all_replicas, hs_err *err);
void hs_hetis_detach(hs_replica *rp, int32_t n_rep);
/* The Hetis state of a replica, NULL when it has none. */
hs_hetis *hs_hetis_of(const hs_replica *rp);
/* The policy's replicas_setup hook: attaches (env->opts) to every replica
 * when the policy runs them, and to the replicas with attention workers
 * otherwise (so that `hetsim plan` shows the pooled cache). */
int hs_hetis_setup(hs_replica *rp, int32_t n, const hs_policy_env *env, hs_err *err);
/* Sums the replicas' dispatcher statistics (zero when none is attached). */
void hs_hetis_totals(const hs_replica *rp, int32_t n_rep, hs_hetis_stats *out);
/* Quantile q of the dispatch wall time from the histogram (upper edge of
 * its bucket), s. */
double hs_hetis_dispatch_quantile(const hs_hetis_stats *st, double q);
/* Prints dispatcher statistics (wall-clock dispatch time included) to fp;
 * nothing when no replica has Hetis state. */
void hs_hetis_report(FILE *fp, const hs_replica *rp, int32_t n_rep);

/* Runtime hooks used by the hetis policy (policy/hetis.c). */
int hs_hetis_prepare(struct hs_engine *e, hs_lane *l);   /* before scheduling */
void hs_hetis_resync(struct hs_engine *e, hs_lane *l);   /* after scheduling */
double hs_hetis_stage_ns(struct hs_engine *e, hs_lane *l, int s);
/* 1 when waiting request r's prompt, after the prompts being prefilled,
 * has room for all its groups in every stage (admission). */
int hs_hetis_admit_ok(struct hs_engine *e, const hs_lane *l, int32_t r);
/* 1 when no lane of l's replica holds cache on any device (1 without
 * Hetis state). */
int hs_hetis_idle(struct hs_engine *e, const hs_lane *l);

/* Per-layer attention time of device g of stage s for the lane's current
 * members, ns. */
double hs_hetis_dev_ns(const hs_hetis *h, int lane, int s, int g);

/* 1 when INV-HEAD and INV-HMEM hold for lane (-1: all lanes). */
int hs_hetis_sane(struct hs_engine *e, const hs_hetis *h, int lane);

/* Groups that a move from placement `from` to `to` (n devices) transfers:
 * sum_g max(0, to[g] - from[g]).  Heads that keep their device keep their
 * cache. */
int hs_hetis_moved_groups(const int16_t *from, const int16_t *to, int n);

#endif
