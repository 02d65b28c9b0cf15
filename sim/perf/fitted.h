/* fitted.h - a latency model fitted on measured tables of other GPUs and
 * models, for a GPU or model that has no table of its own.
 *
 * Every kind (the ten dense ops, decode and prefill attention) is timed as
 *     t = c0 + smax_p( F / (P * ec * x / (x + th)),  B / (W * em(B)) )
 *     em(B) = em_inf + k_c / (b_c + B)
 *     smax_p(a, b) = (a^p + b^p)^(1/p)
 * with F the op's FLOPs and B its bytes on one rank (from the model's
 * shapes, TP degree and weight bits), P and W the GPU's datasheet FP16 peak
 * and memory bandwidth, and x the op's parallelism (tokens; batch for decode,
 * chunk for prefill).  The parameters are per kind:
 *   c0      us, fixed cost (launch, tail)
 *   ec, th  peak fraction reached at large x, and the x where half of it is
 *   p       sharpness of the roofline corner (p -> inf: max)
 *   em_inf  bandwidth fraction for large transfers (DRAM)
 *   k_c     cache bonus (bytes): small transfers reach em_inf + k_c / b_c
 *           (L2 resident, may exceed 1), large ones tend to em_inf
 *   b_c     bytes, where the bonus halves
 * Memory-only ops (F = 0: norms, adds, rope, activation, embedding) have
 * only c0, em_inf, k_c, b_c; the others have no cache term (k_c = 0).  Parameters are fitted with
 * gsl_multifit_nlinear (trust region, Levenberg-Marquardt) on the log of
 * time, so every row counts by its relative error; a kind with 100 rows or
 * more as Huber's M-estimator (iteratively reweighted, fitted.c
 * robust_pass), so that a GPU or a stray row far from the rest counts
 * less; positive parameters are fitted as logs.  A kind with no training rows borrows the parameters of a
 * similar kind (lm_head <- mlp_up, ...), recorded in `from`.
 * Transfer assumptions (what makes a prediction for a new GPU possible):
 * compute efficiencies are fractions of datasheet peaks and carry over
 * between GPUs; fixed costs carry over in microseconds.
 * Memory-only ops need a second bound to transfer.  Their DRAM fraction is
 * not a constant: Vidur's A100 and H100 elementwise kernels reach 14-50% of
 * HBM bandwidth, the A40's 55-85% of GDDR6.  What the three share is a cost
 * per byte in SM cycles: the large ops of one model take the same number of
 * SM cycles (SMs x boost clock x time) on A100 and H100 within about 10%,
 * and the A40, with a third of their bytes per SM cycle, runs into its DRAM
 * instead.  So a fit across two or more chips (sm_term) times them as
 *     t = c0 + smax_4( B / (R * ec),  B / (W * em_inf) ),  em_inf <= 0.9
 * with R the GPU's SM cycles per second (sms x boost_mhz) and ec the op's
 * bytes per SM cycle.  A fit on one chip keeps the cache form above; it
 * applies to that chip only, and elsewhere (or on a GPU without sms and
 * boost_mhz) the datasheet roofline times memory-only ops.
 * `hetsim perf crossval` and tools/bench-fidelity measure both. */
#ifndef HS_PERF_FITTED_H
#define HS_PERF_FITTED_H

#include "perf/table.h"

/* HS_FP_HBM: emb fitted across GPUs (sm_term) only, the SM rate's factor
 * on GPUs with HBM (hs_gpu.hbm): its gather waits on memory latency,
 * longer per SM cycle on HBM2e than on GDDR (the A100's emb gathers 0.49
 * elements per SM cycle, the A40's 0.57); 1 for every other kind and
 * GPU.  Stored apart from "par" (calibration.json "hbm_factor"). */
enum {
    HS_FP_C0, HS_FP_EC, HS_FP_TH, HS_FP_P, HS_FP_EMI, HS_FP_KC, HS_FP_BC, HS_FP_HBM,
    HS_FP_COUNT
};

/* Kinds: HS_OP_* then the two attention kinds. */
#define HS_FK_DECODE HS_OP_COUNT
#define HS_FK_PREFILL (HS_OP_COUNT + 1)
#define HS_FK_COUNT (HS_OP_COUNT + 2)

const char *hs_fit_kind_name(int kind);

typedef struct hs_kindfit {
    int rows;                 /* training rows (0: borrowed or absent) */
    int from;                 /* kind the parameters were fitted on; -1: none */
    int memory_only;          /* 1: no compute term (ec, th, p unused) */
    int sm_term;              /* memory-only, fitted across GPUs: ec is bytes
                                 per SM cycle, p fixed, no cache term */
    double par[HS_FP_COUNT];  /* see the top of this file */
    hs_fitstat st;            /* error on its training rows */
    int unsettled;            /* 1: the robust fit stopped at its pass cap,
                                 its predictions still moving 0.1% a pass */
} hs_kindfit;

#define HS_FIT_MAX_GPUS 16

typedef struct hs_fit {
    int n_inputs;
    hs_kindfit k[HS_FK_COUNT];
    int n_gpus;                          /* GPU types of the training tables */
    char gpus[HS_FIT_MAX_GPUS][32];
    int memory_transfers;                /* 1: memory-only fits apply to unseen GPUs
                                            too (0 after hs_fit_run; tests of the
                                            fit machinery set it) */
} hs_fit;

/* 1 when g has no tensor cores and none of the GPUs f was fitted on lacks
 * them (GPU files looked up by name; one not found counts as having
 * them): f's GEMM efficiencies, ramp over tokens included, come from
 * tensor-core kernels, so on g they are an extrapolation. */
int hs_fit_extrapolates_tc(const hs_fit *f, const hs_gpu *g);

/* One training table with the model and GPU it was measured on. */
typedef struct hs_fit_input {
    const hs_ptable *t;
    const hs_model *m;
    const hs_gpu *g;
} hs_fit_input;

/* Fits every kind on all rows of the inputs.  HS_ENOTFOUND when no dense op
 * has any row, HS_ENOMEM out of memory.  Deterministic: fixed starting
 * points, no randomness. */
int hs_fit_run(hs_fit *f, const hs_fit_input *in, int n, hs_err *err);

/* Work of one op on one rank (FLOPs, bytes) and its parallelism x. */
typedef struct hs_work {
    double flops, bytes, x;
} hs_work;

void hs_fit_op_work(int op, const hs_model *m, int tp, int bits, double tokens, hs_work *w);
/* Decode: x = batch, y = context per sequence; prefill: x = chunk, y = prefix. */
void hs_fit_attn_work(int kind, const hs_model *m, int tp, int kv_bits, double x,
                      double y, hs_work *w);

/* Predicted time in us of a kind with the given parameters and work. */
double hs_fit_eval(const double *par, const hs_work *w, const hs_gpu *g);
/* The cross-GPU memory-only form (sm_term); 0 when g has no sm_rate. */
double hs_fit_eval_sm(const double *par, const hs_work *w, const hs_gpu *g);

/* Predicted op / attention time (us); 0 when the kind has no parameters
 * (k[].from < 0). */
double hs_fit_op_us(const hs_fit *f, int op, const hs_model *m, const hs_gpu *g,
                    int tp, int bits, double tokens);
double hs_fit_attn_us(const hs_fit *f, int kind, const hs_model *m, const hs_gpu *g,
                      int tp, int kv_bits, double x, double y);

/* Writes one line per kind (parameters, rows, training error). */
void hs_fit_print(const hs_fit *f, FILE *out);

/* Training data loaded from disk: every table under the given directories,
 * with the model and GPU named in its meta.json (resolved under the data
 * root; an unknown name is an error naming the table). */
typedef struct hs_fit_data {
    int n;
    hs_fit_input *in;         /* [n], pointing into the arrays below */
    hs_ptable **tables;       /* [n], owned */
    hs_model *models;         /* [n] */
    hs_gpu *gpus;             /* [n] */
} hs_fit_data;

/* dirs: comma-separated list, each a table (holds meta.json) or a root
 * holding <gpu>/<model>/ tables (profiles/ itself is one: gpus/ and
 * clusters/ hold no meta.json and are passed over).  Tables are taken in
 * sorted order.  A list that finds no table gives d->n == 0 and returns 0. */
int hs_fit_data_load(hs_fit_data *d, const char *dirs, hs_err *err);
void hs_fit_data_free(hs_fit_data *d);

/* `hetsim perf fit`: loads the tables named by dirs (as hs_fit_data_load;
 * NULL or "": <data root>/profiles), fits, and prints the tables used and
 * one line of parameters and training error per kind.  HS_ENOTFOUND when
 * there is no table. */
int hs_fit_report(const char *dirs, FILE *out, hs_err *err);

/* Cross-validation on Vidur's published profiles (see crossval.c): fits on
 * Llama-2-7B A100 and predicts Llama-2-70B A100; fits on A100 (both models)
 * and predicts A40 (both); prints median and p90 absolute percentage error
 * per operator, the whole layer, and an overall line. */
typedef struct hs_crossval {
    hs_fitstat op[2][HS_OP_COUNT];     /* [experiment][op], n = 0: no rows */
    hs_fitstat layer[2], all[2];
} hs_crossval;

/* `hetsim perf compare DIR`: how the latency models predict one measured
 * table (a GPU's profile, say): the roofline on the GPU's datasheet (or on
 * given ceilings, e.g. those `hetsim-exec info` measured) and, with
 * fit_dirs, the fitted model trained on the tables found there except the
 * target GPU's own.  Per operator and weight precision, per attention kind,
 * per decoder layer and pooled over dense rows: median and p90 absolute
 * percentage error and the bias (median signed error). */
typedef struct hs_compare_opts {
    const char *fit_dirs;     /* NULL or "": no fitted column */
    double tflops, gbs;       /* > 0: the roofline's ceilings instead of the datasheet's,
                                 reached rates: gemm_eff (mem_eff) is then 1 and
                                 attn_eff becomes attn_eff / gemm_eff */
} hs_compare_opts;

/* Result slots: HS_OP_* x 4 precisions (16, 8, 4, 3 bits) then these. */
enum { HS_CMP_DECODE = HS_OP_COUNT * 4, HS_CMP_PREFILL, HS_CMP_LAYER, HS_CMP_ALL, HS_CMP_N };

typedef struct hs_compare {
    int n_pred;                       /* 1: roofline only; 2: and fitted */
    hs_fitstat st[2][HS_CMP_N];       /* [0] roofline, [1] fitted; n = 0: no rows */
    double bias[2][HS_CMP_N];         /* percent */
} hs_compare;

int hs_perf_compare(const char *dir, const hs_compare_opts *o, hs_compare *res, FILE *out,
                    hs_err *err);

int hs_perf_crossval_run(const char *vidur_dir, hs_crossval *res, FILE *out, hs_err *err);
int hs_perf_crossval(const char *vidur_dir, FILE *out, hs_err *err);

#endif
