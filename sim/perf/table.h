/* table.h - measured latency tables: format, reader/writer, interpolation,
 * the hot path's coefficient fits, and the Vidur importer (vidur.c).  The
 * builders over tables are in measured.c, the fitted model in fitted.h.
 *
 * A table is one directory profiles/<gpu>/<model>/ (format in
 * profiles/README.md, "Measured latency tables"):
 *   dense.csv         op,tp,bits,tokens,time_us   one instance of one op, one rank
 *   attn_decode.csv   tp,batch,context,time_us    one layer, `batch` sequences of `context` cached tokens each
 *   attn_prefill.csv  tp,chunk,prefix,time_us     one layer, one sequence
 *   allreduce.csv     gpus,bytes,time_us          optional
 *   sendrecv.csv      bytes,time_us               optional
 *   meta.json
 * Times are medians in microseconds.  In memory the rows are kept sorted by
 * their key (hs_ptable_sort) so lookups and written files are deterministic;
 * a key appears at most once (the reader rejects duplicates, naming both
 * lines).  Tables are inputs to builders; the hot path never sees them. */
#ifndef HS_PERF_TABLE_H
#define HS_PERF_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gsl/gsl_interp.h>

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"

/* Operators of dense.csv.  Layer composition: qkv + rope + attn_out + mlp_up
 * + act + mlp_down + 2 norm + 2 add; emb on the first stage; lm_head + norm
 * on the last. */
enum {
    HS_OP_EMB, HS_OP_NORM, HS_OP_QKV, HS_OP_ROPE, HS_OP_ATTN_OUT,
    HS_OP_MLP_UP, HS_OP_ACT, HS_OP_MLP_DOWN, HS_OP_ADD, HS_OP_LM_HEAD,
    HS_OP_COUNT
};

const char *hs_op_name(int op);
/* Index of an op name, or -1. */
int hs_op_find(const char *name);

typedef struct hs_dense_row {
    int32_t op, tp, bits, tokens;
    double us;                /* us */
    int32_t line;             /* source line, 0 when built in memory */
} hs_dense_row;

/* Decode: x = batch, y = context per sequence (tokens).
 * Prefill: x = chunk (new tokens), y = prefix (cached tokens). */
typedef struct hs_attn_row {
    int32_t tp, x, y;
    double us;
    int32_t line;
} hs_attn_row;

typedef struct hs_comm_row {
    int32_t gpus;             /* all-reduce group size; 2 for send/recv */
    double bytes;             /* bytes */
    double us;
    int32_t line;
} hs_comm_row;

typedef struct hs_ptable_meta {
    char gpu[32];             /* a profiles/gpus name, e.g. "a100-80g" */
    char model[48];           /* a models/ name, e.g. "llama-2-7b" */
    char backend[8];          /* "cuda", "cpu" or "vidur" */
    char dtype[8];            /* "fp16" */
    char source[256];
    char created[32];         /* ISO date */
    int64_t mem_total_bytes;  /* bytes, 0: unknown */
    int64_t mem_usable_bytes; /* bytes, 0: unknown */
    int kv_block_size;        /* tokens */
    int64_t kv_blocks;        /* blocks, 0: unknown */
} hs_ptable_meta;

enum { HS_ATTN_DECODE, HS_ATTN_PREFILL };
enum { HS_COMM_ALLREDUCE, HS_COMM_SENDRECV };

typedef struct hs_ptable {
    char dir[512];            /* where it was read from ("" when built) */
    hs_ptable_meta meta;
    hs_dense_row *dense;
    hs_attn_row *attn[2];     /* [HS_ATTN_DECODE], [HS_ATTN_PREFILL] */
    hs_comm_row *comm[2];     /* [HS_COMM_ALLREDUCE], [HS_COMM_SENDRECV] */
    size_t n_dense, n_attn[2], n_comm[2];
    size_t cap_dense, cap_attn[2], cap_comm[2];
} hs_ptable;

/* Empty table with meta defaults (backend "cuda", dtype "fp16",
 * kv_block_size 16).  Returns 0 or HS_ENOMEM. */
int hs_ptable_create(hs_ptable **out, hs_err *err);
void hs_ptable_destroy(hs_ptable *t);

/* Append rows (unsorted until hs_ptable_sort).  Values are range-checked
 * (tp 1..HS_MAX_TP, bits 16/8/4/3, tokens >= 1, time > 0 and finite). */
int hs_ptable_add_dense(hs_ptable *t, int op, int tp, int bits, int tokens,
                        double us, hs_err *err);
int hs_ptable_add_attn(hs_ptable *t, int kind, int tp, int x, int y,
                       double us, hs_err *err);
int hs_ptable_add_comm(hs_ptable *t, int kind, int gpus, double bytes,
                       double us, hs_err *err);

/* Sorts every row set by key and rejects duplicate keys (naming both source
 * lines when known).  Returns 0 or HS_EPARSE. */
int hs_ptable_sort(hs_ptable *t, hs_err *err);

/* Reads a table directory.  Missing optional files are fine; attention files
 * may be absent (hs_ptable_check reports what a layout needs).  Malformed
 * rows are errors "<file>:<line>: ...".  *out is owned by the caller. */
int hs_ptable_read(hs_ptable **out, const char *dir, hs_err *err);

/* Writes the table (sorted) into dir, creating it and its parents.  Files
 * for empty row sets (attention, all-reduce, send/recv) are not written. */
int hs_ptable_write(const hs_ptable *t, const char *dir, hs_err *err);

/* What a stage needs from a table. */
typedef struct hs_ptable_need {
    int tp, bits;
    unsigned ops;             /* bit mask of 1u << HS_OP_* */
    int decode, prefill;      /* 1: attention rows at tp are needed */
} hs_ptable_need;

/* Returns 0 when the table has everything in *need, else HS_ENOTFOUND with
 * a message listing each missing op (with tp and bits) and attention file. */
int hs_ptable_check(const hs_ptable *t, const hs_ptable_need *need, hs_err *err);
/* 1 when the table has rows for op at (tp, bits). */
int hs_ptable_has_op(const hs_ptable *t, int op, int tp, int bits);
/* The weight bits whose rows serve op at (tp, bits), 0 when none: bits
 * itself, else 16 for ops whose cost does not depend on weight precision
 * (all but the four quantised GEMMs); the LM head and the embedding are
 * always read at 16 bits (profiles/README.md). */
int hs_ptable_op_bits(const hs_ptable *t, int op, int tp, int bits);
/* The row serving op at (tp, bits, tokens) by hs_ptable_op_bits, or NULL. */
const hs_dense_row *hs_ptable_dense_at(const hs_ptable *t, int op, int tp, int bits, int tokens);
int hs_ptable_has_attn(const hs_ptable *t, int kind, int tp);

/* A 1-D interpolant y(x) over measured points, x strictly increasing.
 * Steffen's method (monotone between points wherever the data is, C1, no
 * overshoot) for 3+ points, linear for 2, constant for 1.  Below the first
 * point the first value holds (small inputs are latency floors); beyond the
 * last, y grows in proportion to x (large inputs are throughput bound). */
typedef struct hs_curve {
    int n;
    double *x, *y;
    gsl_interp *interp;       /* NULL when n == 1 */
} hs_curve;

int hs_curve_init(hs_curve *c, const double *x, const double *y, int n, hs_err *err);
double hs_curve_eval(const hs_curve *c, double x);
void hs_curve_free(hs_curve *c);

/* Curve of op time (us) over tokens at (tp, bits); HS_ENOTFOUND naming the
 * file, op, tp and bits when there are no rows. */
int hs_ptable_op_curve(const hs_ptable *t, int op, int tp, int bits,
                       hs_curve *out, hs_err *err);
/* All-reduce time (us) over bytes for a group of `gpus`; HS_ENOTFOUND when
 * the table has no rows for that size. */
int hs_ptable_allreduce_curve(const hs_ptable *t, int gpus, hs_curve *out, hs_err *err);

/* Quality of a fit against the rows it came from, percent. */
typedef struct hs_fitstat {
    int n;
    double med_ape, p90_ape, max_ape;
} hs_fitstat;

/* Median / p90 / max of |a_i - b_i| / b_i in percent, over n >= 1 pairs. */
void hs_fitstat_compute(hs_fitstat *st, const double *pred, const double *meas, int n);

/* Non-negative least squares in relative error: minimises
 * sum_i ((X_i . coef) / y_i - 1)^2 over coef >= 0 (columns whose unconstrained
 * coefficient goes negative are dropped and the rest refitted).  X is n x k
 * row-major, k <= 4.  Returns 0, HS_EINVAL when n < 1. */
int hs_linfit_rel(const double *X, const double *y, int n, int k,
                  double *coef, hs_fitstat *st, hs_err *err);

/* Hot-path attention coefficients of one layer at tp, in us, fitted (above)
 * on every row of the table at that tp:
 *   decode:  coef[0] + coef[1] * B + coef[2] * C        (C = B * context; coef[3] = 0)
 *   prefill: coef[0] + coef[1] * Q + coef[2] * X + coef[3] * P
 *            (Q = c(c+1)/2, X = c*p, P = p; see perf.h)
 * st receives the fit error.  HS_ENOTFOUND when there are no rows. */
int hs_ptable_attn_coef(const hs_ptable *t, int kind, int tp, double coef[4],
                        hs_fitstat *st, hs_err *err);

/* The same fit over the given rows (all of them, whatever their tp); used
 * for rows synthesised from the fitted model. */
int hs_attn_coef_rows(int kind, const hs_attn_row *rows, size_t n, double coef[4],
                      hs_fitstat *st, hs_err *err);

/* Send/recv as alpha + beta * bytes (us, us/byte) fitted as above. */
int hs_ptable_sendrecv_coef(const hs_ptable *t, double coef[2],
                            hs_fitstat *st, hs_err *err);


/* Drops the tables and fit that the measured-table builders cache for the
 * process (measured.c); the next build reloads from disk. */
void hs_perf_cache_clear(void);

/* ---- Vidur importer (vidur.c) ------------------------------------------ */

/* Imports Vidur's profiles of one GPU and one model.  vidur_dir holds
 * compute/<gpu>/<model_path>/mlp.csv, network/<net>/{all_reduce,send_recv}.csv
 * and <gpu>_attention_*.csv files.  gpu is Vidur's device name ("a100",
 * "a40"), model_path e.g. "meta-llama/Llama-2-7b-hf".  network: a network
 * folder name, "" for the default of the device (a100: a100_dgx, a40:
 * a40_pairwise_nvlink, h100: h100_dgx), NULL for none.  Attention files of
 * the device whose shape (n_embd, heads, kv heads) equals the model's are
 * imported.  Times convert from ms to us; duplicate keys are averaged; the
 * two norms of a layer both feed "norm".  *out is owned by the caller. */
int hs_vidur_import(hs_ptable **out, const char *vidur_dir, const char *gpu,
                    const char *model_path, const char *network, hs_err *err);

/* Our names for Vidur's: "a100" -> "a100-80g", "Llama-2-7b-hf" ->
 * "llama-2-7b" (lower case, "-hf" dropped).  Return 0 or HS_ERANGE. */
int hs_vidur_gpu_name(char *buf, size_t cap, const char *vidur_gpu, hs_err *err);
int hs_vidur_model_name(char *buf, size_t cap, const char *model_path, hs_err *err);

/* Imports every compute/<gpu>/<org>/<model>/mlp.csv under vidur_dir and
 * writes each as outdir/<our gpu>/<our model>/.  Prints one line per table
 * to log when not NULL.  Returns 0 or the first error. */
int hs_vidur_import_all(const char *vidur_dir, const char *outdir, FILE *log,
                        hs_err *err);

#endif
