/* table.h - measured latency tables: format, reader/writer, interpolation,
 * the hot path's coefficient fits, and the Vidur importer (vidur.c, vidur_all.c).  The
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
 * A table whose meta.json names no model ("model": "") holds collectives
 * only (profiles/<gpu>/_network/: a GPU's measured NCCL timings without
 * kernel tables); its dense.csv is optional and the fitted model skips it.
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
#include "perf/regress.h"
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
    char timing[8];           /* hetsim-exec's method: "alone", "cold", "stream"; "": not said */
    int64_t kv_pool_bytes;    /* K and V pool the attention rows ran over, bytes; 0: not said */
    double rest;              /* idle time after each row, times the row's own
                                 (hetsim-exec profile --rest); 0: none or not said */
    /* How the decode-attention kernel splits a batch (hs_dec_wave, perf.h);
     * decode_sms 0: not said (a Vidur table, the CPU backend) */
    int decode_sms, decode_resident;
    int decode_part_max, decode_part_min, decode_part_align, decode_fill;
    char clock_monitor[256];  /* what read the GPU's clocks while timing (hetsim-exec
                                 profile --clocks writes clocks.csv beside); "": none */
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
/* Replaces measured y(x) (x > 0, strictly increasing) by a robust,
 * non-decreasing fit: a point more than twice or under half the median of
 * the 7 points centred on it takes that median (the first point: when over
 * twice the median of the first 7; a low one is the latency floor); a last point above twice
 * the extension in proportion to x from its neighbour takes that
 * extension; then isotonic regression by pooled means (a pool keeps the
 * mean time of its points: the simulator sums many collectives).  Non-decreasing
 * data comes out unchanged unless its last point is such an outlier.  The
 * first value is the smallest, so with hs_curve_eval's flat start it is the
 * latency floor.  hs_ptable_allreduce_curve passes its points through it.
 * Returns 0, HS_EINVAL (n < 1, x not positive and increasing) or HS_ENOMEM. */
int hs_curve_smooth(const double *x, double *y, int n, hs_err *err);

/* Curve of op time (us) over tokens at (tp, bits); HS_ENOTFOUND naming the
 * file, op, tp and bits when there are no rows. */
int hs_ptable_op_curve(const hs_ptable *t, int op, int tp, int bits,
                       hs_curve *out, hs_err *err);
/* All-reduce time (us) over bytes for a group of `gpus`; HS_ENOTFOUND when
 * the table has no rows for that size. */
int hs_ptable_allreduce_curve(const hs_ptable *t, int gpus, hs_curve *out, hs_err *err);


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

/* Attention coefficients with a per-token prefill term, HS_ATTN_NCOEF of
 * them, the first four laid out as above:
 *   prefill: coef[0] + coef[1] * Q + coef[2] * X + coef[3] * P
 *            + coef[HS_ATTN_TOK] * N        (N = sum c, the chunks' new tokens)
 * fitted with each row's relative error weighted by its time;
 *   decode:  as hs_ptable_attn_coef, coef[3] = coef[HS_ATTN_TOK] = 0.
 * The N term carries what grows with a chunk's length alone (the kernel's
 * work per query block, its tail waves), which Q's c^2 cannot: without it
 * large chunks are under- and small ones over-predicted.  Errors as
 * hs_ptable_attn_coef / hs_attn_coef_rows. */
#define HS_ATTN_NCOEF 5
enum { HS_ATTN_TOK = 4 };
int hs_ptable_attn_coef5(const hs_ptable *t, int kind, int tp, double coef[HS_ATTN_NCOEF],
                         hs_fitstat *st, hs_err *err);
int hs_attn_coef5_rows(int kind, const hs_attn_row *rows, size_t n, double coef[HS_ATTN_NCOEF],
                       hs_fitstat *st, hs_err *err);

/* The decode rows of tp as a full grid: *buf = batches [nb], contexts [nc]
 * and times [nb][nc] in us, ascending, one malloc'd block (the caller
 * frees it).  *buf is NULL (and 0 returned) when some batch lacks some
 * context, or fewer than two contexts were measured: then only the fit
 * describes the table. */
int hs_ptable_decode_grid(const hs_ptable *t, int tp, int *nb, int *nc, double **buf, hs_err *err);

/* The prefill rows of tp as a grid (hs_pre_grid in perf.h; us), one
 * allocation at g->x that the caller frees.  g->nx is 0 (and 0 returned)
 * with fewer than two chunk lengths, or a chunk length measured twice at a
 * prefix. */
int hs_ptable_prefill_grid(const hs_ptable *t, int tp, hs_pre_grid *g, hs_err *err);

/* The decode rows of tp as the wave model of the kernel that meta.json
 * describes (decode_*; hs_dec_wave in perf.h), heads query heads per rank:
 * w's geometry from the meta, c0, a, b, cm in us fitted on the full grid
 * in relative error (the makespan's block counts depend on the
 * coefficients, so the fit alternates counts and least squares until they
 * settle).  w->sms is 0 (and 0 returned) when the meta says nothing or
 * the rows are not a full grid.  st (may be NULL): the fit on those rows. */
int hs_ptable_decode_wave(const hs_ptable *t, int tp, int heads, hs_dec_wave *w,
                          hs_fitstat *st, hs_err *err);

/* Send/recv as alpha + beta * bytes (us, us/byte) fitted as above. */
int hs_ptable_sendrecv_coef(const hs_ptable *t, double coef[2],
                            hs_fitstat *st, hs_err *err);


/* Drops the tables and fit that the measured-table builders cache for the
 * process (measured.c); the next build reloads from disk. */
void hs_perf_cache_clear(void);

/* ---- Vidur importer (vidur.c, vidur_all.c) ------------------------------ */

/* Flags of hs_vidur_import_ex. */
enum { HS_VIDUR_LM_HEAD = 1 };  /* synthesise lm_head rows (hs_vidur_lm_head) */

/* What an import left out or added, for the log (counts). */
typedef struct hs_vidur_stats {
    size_t lm_head;            /* lm_head rows synthesised */
    size_t other[2];           /* rows of another collective (column collective),
                                  per HS_COMM_* file */
    char other_name[2][24];    /* the first such collective's name */
    size_t spans_nodes[2];     /* collective rows with devices_per_node != num_workers */
    size_t empty;              /* collective rows of 0 bytes or one GPU */
    size_t zero_ms;            /* times of 0 ms (below the profiler's resolution) */
} hs_vidur_stats;

/* Imports Vidur's profiles of one GPU and one model.  vidur_dir holds
 * compute/<gpu>/<model_path>/mlp.csv, network/<net>/{all_reduce,send_recv}.csv
 * and <gpu>_attention_*.csv files.  gpu is Vidur's device name ("a100",
 * "a40"), model_path e.g. "meta-llama/Llama-2-7b-hf".  network: a network
 * folder name, "" for the default of the device (a100: a100_dgx, a40:
 * a40_pairwise_nvlink, h100: h100_dgx), NULL for none.  Attention files of
 * the device whose shape (n_embd, heads, kv heads) equals the model's are
 * imported.  Times convert from ms to us; duplicate keys are averaged; the
 * two norms of a layer both feed "norm".  Only measured rows: no lm_head.
 * *out is owned by the caller; on failure it is NULL.  Errors: HS_EIO (a
 * file that does not open), HS_EPARSE / HS_ERANGE "<file>:<line>: <column>:
 * ...", HS_ENOTFOUND (a named network folder that is not there), HS_ENOMEM. */
int hs_vidur_import(hs_ptable **out, const char *vidur_dir, const char *gpu,
                    const char *model_path, const char *network, hs_err *err);

/* The same with flags (HS_VIDUR_LM_HEAD: also lm_head rows, which needs the
 * n_expanded_embd, vocab_size and use_gated_mlp columns of mlp.csv, else
 * HS_EPARSE naming the column) and, when st is not NULL, the counts of what
 * was added and skipped. */
int hs_vidur_import_ex(hs_ptable **out, const char *vidur_dir, const char *gpu,
                       const char *model_path, const char *network, unsigned flags,
                       hs_vidur_stats *st, hs_err *err);

/* Adds an lm_head row (bits 16) for every mlp_up row at 16 bits of t:
 * lm_head is [T x h] x [h x vocab/tp] and mlp_up [T x h] x [h x g ffn/tp]
 * (g = 2 when gated: gate and up fused), the same K, so FLOPs and weight bytes
 * both scale with N and time is taken as mlp_up x vocab / (g ffn).  Rows are
 * appended unsorted (then hs_ptable_sort); *added (may be NULL) gets their
 * count.  HS_EINVAL for a shape that is not one or a table that already has
 * lm_head rows, HS_ENOTFOUND without mlp_up rows; t is unchanged on error. */
int hs_vidur_lm_head(hs_ptable *t, long vocab, long ffn, int gated, size_t *added,
                     hs_err *err);

/* Our names for Vidur's: "a100" -> "a100-80g"; a model id (its part after
 * the last '/') is looked up among Vidur's published models
 * ("Meta-Llama-3-8B" -> "llama-3-8b", "CodeLlama-34b-Instruct-hf" ->
 * "codellama-34b", ...), else lower-cased with "-hf" dropped and then one
 * fine-tune suffix, "-instruct" or "-chat" (a fine-tune has its base model's
 * shape, hence its kernel times): "Llama-2-13b-chat-hf" -> "llama-2-13b".
 * Return 0 or HS_ERANGE (empty or longer than cap). */
int hs_vidur_gpu_name(char *buf, size_t cap, const char *vidur_gpu, hs_err *err);
int hs_vidur_model_name(char *buf, size_t cap, const char *model_path, hs_err *err);

/* Imports every table under vidur_dir and writes each as
 * outdir/<our gpu>/<our model>/, with lm_head rows synthesised.  Layouts:
 * the current one (compute/<gpu>/<org>/<model>/mlp.csv, as above), or, when
 * there is no compute/, Vidur's old single-folder one: <gpu>/mlp.csv holding
 * several models told apart by shape (each becomes the models/ file of that
 * shape; shapes no model has are reported and skipped) and/or
 * <gpu>/[<org>/]<model>/mlp.csv, with <gpu>/attention.csv (and an
 * attention.csv beside mlp.csv), <gpu>/all_reduce.csv, <gpu>/send_recv.csv;
 * see vidur_all.c.  Every table is built before the first is written, and two
 * sources landing on one table are an error (HS_EINVAL).  Prints one line
 * per table to log when not NULL: rows per file, lm_head rows synthesised,
 * rows skipped and why.  Returns 0 or the first error (HS_ENOTFOUND when
 * there is nothing to import). */
int hs_vidur_import_all(const char *vidur_dir, const char *outdir, FILE *log,
                        hs_err *err);

#endif
