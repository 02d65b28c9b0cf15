/* overhead.h - the serving framework's host cost per iteration.
 *
 * Kernel tables time the GPU; a serving engine adds host work to every
 * iteration that the GPU waits for: scheduling, preparing the input tensors,
 * sampling, processing the outputs and, with several GPUs, the driver's
 * round trip to its workers (Ray in vLLM).  Vidur measured these for vLLM at
 * 3.7-12 ms per iteration on a DGX-A100 host; a flat per-step constant gets
 * decode TPOT wrong by a fifth.
 *
 * An engine profile (profiles/engines/<name>.json, format in
 * profiles/README.md) is a list of components.  Each component has rows per
 * TP class; the row used for a layout is the one with the largest min_tp
 * that is <= the replica's TP degree (the smallest row when none is):
 *     cost_us = fixed_us + per_seq_us * S + per_token_us * T
 * with S = sequences in the batch (decoding plus prefilling) and T = tokens
 * in the pass.  A component marked multi_gpu is paid only when the replica
 * spans more than one GPU (tp * pp > 1).  collective_launch_us is the host
 * cost of launching one NCCL collective, paid on the critical path of every
 * TP all-reduce (Vidur: 20 us).
 *
 * An engine that issues every operator from Python without CUDA graphs
 * (eager PyTorch) is host bound when the GPU work is small: a pass cannot
 * end before the host has issued it.  `dispatch` gives that host time per
 * operator for the hosts of each GPU type (a DGX-H100's CPUs issue faster
 * than a DGX-A100's); a stage's pass takes at least its layers x the
 * model's operators per layer (hs_model_layer_ops) x op_us (perf.h
 * hs_perf_stage_ns, dispatch_ns).  Splitwise's DGX measurements of
 * Llama-2-70B decode no faster at TP 8 than at TP 4 for this reason, and
 * BLOOM-176B's layers (15 operators to Llama's 12: LayerNorm with separate
 * residual adds, biases after the all-reduces) take longer to issue
 * (tools/bench-dgx).
 *
 * Profiles are fitted once (hs_ovh_fit, `hetsim perf fit-overhead`) and
 * loaded; the hot path sees three numbers per replica (hs_ovh_coef) and
 * one floor per stage. */
#ifndef HS_PERF_OVERHEAD_H
#define HS_PERF_OVERHEAD_H

#include <stdio.h>

#include "core/err.h"
#include "perf/table.h"

#define HS_OVH_MAX_COMP 8
#define HS_OVH_MAX_ROWS 4
#define HS_OVH_MAX_DISP 8

typedef struct hs_ovh_row {
    int min_tp;               /* TP degrees >= this use the row */
    double fixed_us;          /* us per iteration */
    double per_seq_us;        /* us per sequence in the batch */
    double per_token_us;      /* us per token in the pass */
    int samples;              /* measurements it was fitted on (0: given) */
} hs_ovh_row;

typedef struct hs_ovh_comp {
    char name[32];
    int multi_gpu;            /* 1: only when tp * pp > 1 */
    int n;
    hs_ovh_row row[HS_OVH_MAX_ROWS];  /* ascending min_tp */
} hs_ovh_comp;

typedef struct hs_ovh_profile {
    char name[48];
    char display[128];
    char source[512];
    char licence[128];
    double collective_launch_us;      /* us per collective */
    double fit_med_ape, fit_p90_ape;  /* % on the rows it was fitted on; < 0: unknown */
    double cv_med_ape;                /* % leave-one-model-out; < 0: not measured */
    int n;
    hs_ovh_comp comp[HS_OVH_MAX_COMP];
    int n_disp;                       /* host dispatch floors, by GPU type */
    struct {
        char gpu[32];                 /* "" : any GPU type not listed */
        double op_us;                 /* host time to issue one operator */
    } disp[HS_OVH_MAX_DISP];
} hs_ovh_profile;

/* Reads a profile; every error names the file and the key.  Unknown keys
 * are errors. */
int hs_ovh_load(hs_ovh_profile *p, const char *path, hs_err *err);
/* By name under <data root>/profiles/engines/, or a path (hs_resolve). */
int hs_ovh_find(hs_ovh_profile *p, const char *name, hs_err *err);
int hs_ovh_write(const hs_ovh_profile *p, const char *path, hs_err *err);

/* The host time per operator (us) on hosts of GPU type gpu: its entry,
 * else the "" entry, else 0 (no floor). */
double hs_ovh_op_us(const hs_ovh_profile *p, const char *gpu);
/* The dispatch floor per decoder layer of m (us) on a stage of GPUs
 * gpus[0..n-1] of c, n the TP degree: the slowest host among their types
 * times m's operators per layer at that degree (what perf.c gives the
 * stage, and the planners' mirrors). */
double hs_ovh_stage_layer_us(const hs_ovh_profile *p, const hs_model *m, const hs_cluster *c, const int *gpus,
                             int n);

/* One component's cost (us) for a replica of tp x pp GPUs. */
double hs_ovh_comp_us(const hs_ovh_comp *c, int tp, int pp, double seqs, double tokens);
/* The whole profile as hot-path coefficients: ns, ns per sequence, ns per
 * token. */
void hs_ovh_coef(const hs_ovh_profile *p, int tp, int pp, double *fixed_ns,
                 double *seq_ns, double *tok_ns);

/* One row of Vidur's cpu_overheads.csv: ms converted to us, per component
 * in the order of hs_ovh_vidur_comp. */
typedef struct hs_ovh_sample {
    char model[96];
    int tp, batch;
    double us[HS_OVH_MAX_COMP];
    int line;
} hs_ovh_sample;

/* Components read from Vidur's file (name, multi_gpu, column); NULL-ended. */
typedef struct hs_ovh_vidur_col {
    const char *name;
    int multi_gpu;
    const char *median, *mean;  /* column names; the median when present */
} hs_ovh_vidur_col;
extern const hs_ovh_vidur_col hs_ovh_vidur_comp[];

/* Reads Vidur's cpu_overheads.csv; *out (malloc'd, *n rows) is the
 * caller's.  Errors "<file>:<line>: <column>: ...". */
int hs_ovh_read_vidur(const char *path, hs_ovh_sample **out, int *n, hs_err *err);

/* Fits a profile on the samples, skipping those of model `exclude` (NULL:
 * none).  TP classes 1, 2 and 3+ each get a row where they have samples;
 * each row is a least-absolute-relative-deviation fit of fixed + per_seq *
 * batch (iteratively reweighted least squares, coefficients >= 0), robust to
 * the outliers of a host-side timer.  Only the components and metadata are
 * set; the caller names the profile. */
int hs_ovh_fit(hs_ovh_profile *p, const hs_ovh_sample *s, int n, const char *exclude,
               hs_err *err);

/* Error of a profile on samples (total of the components), as fit stats and
 * the median signed error (%, the bias).  Samples of model `only` (NULL:
 * all). */
void hs_ovh_eval(const hs_ovh_profile *p, const hs_ovh_sample *s, int n, const char *only,
                 hs_fitstat *st, double *bias);

/* `hetsim perf fit-overhead CSV [--out FILE --name N ...]`: fits, prints the
 * components, the in-sample error and, with two or more models in the file,
 * the leave-one-model-out error per model and pooled; writes the profile
 * when out is not NULL.  cv receives the pooled leave-one-model-out stats
 * (n = 0 when not measured). */
typedef struct hs_ovh_opts {
    const char *out;          /* NULL: write nothing */
    const char *name, *display, *source, *licence;  /* NULL: generic text */
    double collective_launch_us;
} hs_ovh_opts;

int hs_ovh_report(const char *csv, const hs_ovh_opts *o, FILE *log, hs_fitstat *cv,
                  double *cv_bias, hs_err *err);

#endif
