/* llmpq.h - LLM-PQ: phase-aware pipeline partition with adaptive
 * per-layer precision (Zhao et al.), and its baselines PipeEdge and
 * Uniform.
 *
 * The offline task: a global batch of B prompts padded to s tokens, n
 * tokens generated each (no EOS).  One pipeline stage per GPU in a device
 * order; prefill runs in micro-batches of eta sequences, decode in
 * micro-batches of xi.  The planner picks the order, (eta, xi), the layer
 * partition and each layer's bits in {16, 8, 4, 3} by minimising the
 * paper's objective (4):
 *   (ceil(B/eta)-1) * Tmax_pre + (ceil(B/xi)-1) * (n-1) * Tmax_dec
 *   + sum_j T_pre,j + (n-1) * sum_j T_dec,j + theta * sum_i omega_{i,b(i)}
 * subject to (5)-(16): stage times bound the maxima, transfers bound them
 * too, each layer one device and one bit-width, memory per device (the
 * first also holds the embeddings and LM head), contiguous stages with the
 * first layer on the first device and the last on the last.  As printed
 * in the paper T_dec enters once; we weight it by the n-1 decode rounds,
 * since every round pays the pipeline's fill (with xi = B and one
 * micro-batch the printed form would count decode once for n-1 steps and
 * always pick xi = B).  Every device in the
 * order holds at least one layer (one stage per GPU).
 *
 * An instance (hs_pq_inst) is one device order and one (eta, xi) pair,
 * with layers merged into decision units (grouping); solvers: the GLPK
 * ILP, brute force (tests), and the bitwidth-transfer heuristic. */
#ifndef HS_LLMPQ_H
#define HS_LLMPQ_H

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "llm/quant.h"
#include "perf/perf.h"
#include "serve/deploy.h"

enum hs_pq_kind { HS_PQ_LLMPQ = 0, HS_PQ_PIPEEDGE, HS_PQ_UNIFORM };

typedef struct hs_pq_cfg {
    int B, s, n;             /* global batch, padded prompt, generated tokens */
    double theta;            /* quality weight (objective units: seconds) */
    int group;               /* layers per decision unit (the paper's grouping), 0 or 1: none */
    int heuristic;           /* 1: bitwidth-transfer heuristic instead of the ILP */
    int all_orders;          /* 1: every distinct GPU order (the paper's text);
                                0: groups of identical GPUs kept whole (the
                                authors' code) */
    double ilp_limit_s;      /* GLPK time limit per ILP */
    double total_limit_s;    /* whole search; later instances are skipped */
    double mip_gap;          /* an ILP must beat the incumbent by this fraction */
    int kv_bits;             /* 16 */
    double mem_frac;         /* per GPU: fraction of the memory CUDA reports
                                (hs_gpu.mem_reported_bytes) planned on (0.95) */
    double reserve_bytes;    /* per GPU: CUDA context and PyTorch's temporary
                                allocations, taken off after mem_frac */
    int bits_mask;           /* allowed bit-widths, bit k = hs_bits_set[k] */
    int eta, xi;             /* 0: enumerate (xi = ceil(B/N), eta in 1,2,4..xi) */
    const double *omega;     /* [layers * HS_NBITS], NULL: hs_omega_default */
} hs_pq_cfg;

void hs_pq_cfg_defaults(hs_pq_cfg *c);

/* A chosen plan. */
typedef struct hs_pq_plan {
    int kind;                /* enum hs_pq_kind */
    int ndev;
    int dev[HS_MAX_PP];      /* cluster GPU ids in pipeline order */
    int first[HS_MAX_PP + 1];/* stage j holds layers [first[j], first[j+1]) */
    unsigned char bits[1024];/* per layer */
    int eta, xi;
    int B, s, n, kv_bits;    /* the workload planned for (0: unknown; hs_pq_plan_read) */
    double obj;              /* objective (4), s */
    double est_s;            /* its latency part, s */
    double quality;          /* sum of omega over the layers' bits */
    double solve_s;          /* CPU seconds of the search */
    int n_inst, n_ilp, n_timeout;   /* instances examined, ILPs solved, limits hit */
    int from_ilp;            /* 1: the ILP improved on the heuristic */
    char latency[1024];      /* where the FP16 layer's times came from, per GPU
                                type with its expected error (hs_qlat_cal_source);
                                "": the roofline */
} hs_pq_plan;

/* One instance: device order fixed, (eta, xi) fixed, U units. */
typedef struct hs_pq_inst {
    int U, N, nb;
    int bits[HS_NBITS];      /* allowed bit-widths */
    int *usize;              /* [U] layers per unit */
    double *omega;           /* [U * nb] summed over the unit */
    double lpre[HS_MAX_PP][HS_NBITS], ldec[HS_MAX_PP][HS_NBITS]; /* per layer, s */
    double cpre[HS_MAX_PP], cdec[HS_MAX_PP];     /* fixed per stage (embed, head), s */
    double commpre[HS_MAX_PP], commdec[HS_MAX_PP]; /* transfer to the next stage, s */
    double cap[HS_MAX_PP];   /* bytes for layers (after embeddings, peak, reserve) */
    double mlay[HS_NBITS];   /* bytes per layer: weights + KV for s+n */
    double a_pre, a_dec;     /* ceil(B/eta)-1, (ceil(B/xi)-1)*(n-1) */
    double w_pre, w_dec;     /* a stage's busy weights: ceil(B/eta), ceil(B/xi)*(n-1) */
    double rounds;           /* decode rounds n-1: the weight of sum_j T_dec,j */
    double theta;
} hs_pq_inst;

/* Objective of an assignment (unit u on device dev[u], bit index bi[u]),
 * or INFINITY when infeasible (memory, contiguity, empty device).  lat
 * (may be NULL) receives the latency part. */
double hs_pq_eval(const hs_pq_inst *in, const int *dev, const int *bi, double *lat);
/* The ILP with GLPK.  Returns 0 with dev/bi filled, HS_ENOFIT when
 * infeasible, HS_ERANGE when the limit passed without a solution; *timeout
 * is set to 1 when the limit stopped the search (solution may be
 * suboptimal). */
int hs_pq_ilp(const hs_pq_inst *in, double limit_s, double cutoff, int *dev, int *bi,
              double *obj, int *timeout, hs_err *err);
/* Exhaustive search (tiny instances, tests). */
int hs_pq_brute(const hs_pq_inst *in, int *dev, int *bi, double *obj);
/* Bitwidth-transfer heuristic: adabits (quality-optimal under memory,
 * latency ignored) then moves between the slowest stage and the others. */
int hs_pq_heuristic(const hs_pq_inst *in, int *dev, int *bi, double *obj, hs_err *err);
/* PipeEdge's partition: uniform bit index bi0, contiguous split that
 * minimises the slowest stage's total time over the workload (DP). */
int hs_pq_pipeedge_split(const hs_pq_inst *in, int bi0, int *dev, int *bi, double *obj);

/* Whole search for `kind` on all GPUs of the cluster. */
int hs_pq_plan_search(const hs_model *m, const hs_cluster *c, const hs_pq_cfg *cfg,
                      const hs_perf_cfg *pc, int kind, hs_pq_plan *out, hs_err *err);
/* The plan as a deployment (one replica, one stage per GPU; a stage's
 * "bits" is its most common bit-width, the layout's layer_bits every
 * layer's, which the engine runs). */
int hs_pq_to_deploy(const hs_pq_plan *p, const hs_model *m, const hs_cluster *c,
                    int kv_bits, hs_deploy *d, hs_err *err);
/* JSON of the deployment with the LLM-PQ extras (layer_bits per stage,
 * eta, xi, workload); caller frees. */
char *hs_pq_deploy_json(const hs_pq_plan *p, const hs_model *m, const hs_cluster *c,
                        const hs_pq_cfg *cfg);
/* Reads a plan back from such a JSON file (deployment + extras). */
/* `hetsim llmpq ...` (llmpq_cli.c): the process exit code. */
int hs_llmpq_command(int argc, char **argv);

int hs_pq_plan_read(hs_pq_plan *p, const char *path, const hs_model *m,
                    const hs_cluster *c, hs_err *err);

#endif
