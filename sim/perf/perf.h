/* perf.h - the latency model of one replica, pre-tabulated.
 *
 * A latency model is a builder: given the model, the cluster and a replica's
 * parallel layout, it fills an hs_perf whose hot-path queries are array
 * lookups and a few multiply-adds (the hot loop never parses, allocates or
 * interpolates from scratch).  Builders are registered by name: "roofline"
 * (per-operator roofline with efficiency factors, this file's companion
 * roofline.c); "table", "fitted" and "auto" (measured.c: measured tables,
 * a model fitted on other GPUs' and models' tables, or whichever exists)
 * fill the same output struct.
 *
 * Stage time for one iteration (ns) =
 *     dense[T] + head[S]                       (tabulated by tokens / samples)
 *   + dec_fixed + dec_seq * B + dec_ctx * C    (decode attention; a measured
                                               table's grid at (B, C / B)
                                               when the stage has one)
 *   + pre_fixed + pre_self * Q + pre_cross * X + pre_ctx * P + pre_tok * N
 *                                              (prefill attention)
 * where T = tokens in the pass, S = sequences sampled, B = decode sequences,
 * C = their total context; over the prefill chunks (c new tokens after a
 * cached prefix of p), Q = sum c(c+1)/2 (causal pairs inside the chunk),
 * X = sum c*p (pairs against the prefix), P = sum p (prefix tokens
 * read) and N = sum c (new tokens: per-query work outside the pairs; on
 * Vidur's A100 FlashAttention table a chunk's time grows as 0.10 c +
 * 1.2e-4 c^2 us, which pairs alone fit at -16% at 1,024 tokens and +10% at
 * 4,096; with N the median error is 2.9%).  Q and X are kept apart because kernels reach different speeds on
 * the causal triangle and on the dense block (measured on Vidur's tables:
 * one shared coefficient fits with 18% median error, two with 8%).
 * Activations are sent to the next stage in send_alpha + send_token * T.
 *
 * Encoder-decoder models add an encoding term, for E = prompt tokens put
 * through the encoder in the pass and Y = sum S^2 (bidirectional pairs of
 * each whole prompt of S tokens):
 *   + enc[E] + enc_fixed + enc_pair * Y
 * where enc[E] = the stage's encoder layers' dense work on E tokens plus
 * its decoder layers' cross-attention K/V projection of them (and the
 * embedding on the first stage).  Their decoder layers' dense[T] carries
 * the cross-attention projections and dec_fixed/dec_seq are paid twice
 * (self and cross attention kernels); the context C counts the prompt
 * (cross) and the generated tokens (self).  hs_perf_build derives all of
 * it from one-layer tables of the chosen builder (see perf.c). */
#ifndef HS_PERF_H
#define HS_PERF_H

#include <stdint.h>

#include "core/conf.h"
#include "core/err.h"
#include "core/time.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "llm/quant.h"

#define HS_MAX_TP 16
#define HS_MAX_PP 128
#define HS_MAX_LAYERS 512     /* decoder layers a layout's layer_bits can name */

typedef struct hs_stage_layout {
    int tp;
    int layers;               /* decoder layers */
    int bits;                 /* weight bits: 16, 8, 4, 3 (of every layer unless
                                 the layout's layer_bits say otherwise; then a
                                 summary, and the bits of encoder layers) */
    int gpus[HS_MAX_TP];      /* cluster GPU ids, tp of them */
    int enc_layers;           /* encoder layers (encoder-decoder models) */
} hs_stage_layout;

typedef struct hs_layout {
    int pp;
    int kv_bits;              /* 16 or 8 */
    int enc_set;              /* 1: stages' enc_layers are placed; 0: by default
                                 (hs_layout_place_enc, serve/deploy.h) */
    hs_stage_layout stage[HS_MAX_PP];
    /* Per-layer weight bits (LLM-PQ's mixed precision): decoder layer i in
     * pipeline order (stage 0's first); 0 = its stage's bits.  All zero in
     * layouts that planners build with one width per stage. */
    unsigned char layer_bits[HS_MAX_LAYERS];
} hs_layout;

/* Stage s's decoder layers at each width of hs_bits_set (llm/quant.h):
 * n[k] layers at hs_bits_set[k], from layer_bits where set, else the
 * stage's bits.  Returns 1 when some layer's width differs from
 * stage[s].bits (the stage is then timed and sized layer by layer), 0 when
 * all are stage[s].bits. */
int hs_layout_stage_bits(const hs_layout *l, int s, int n[HS_NBITS]);
/* 1 when stage s holds a decoder layer narrower than 16 bits (its
 * layer_bits where set, else its bits). */
int hs_layout_stage_quant(const hs_layout *l, int s);

/* A split decode-attention kernel timed in waves (hetsim-exec's CUDA
 * kernel, as vLLM's paged attention v2): every (sequence, query head) pair
 * gets one thread block per partition of part_len context keys, at most
 * part_max; when heads x sequences are fewer than fill blocks per
 * multiprocessor, partitions shrink (to part_min, rounded up to part_align)
 * until there are.  Blocks run `resident` at a time on each of `sms`
 * multiprocessors, so time goes in steps with the blocks over the slots:
 * an H200's decode steps of 14-31 sequences at about 1,300 tokens each run
 * three partitions where the grid's rows at 1,024 and 2,048 run two and
 * four, and interpolating between those rows put them 16% fast.  The cost
 * of a block is a + b * its keys; a pass costs c0 + the makespan of the
 * blocks, issued in launch order onto the free slots, + cm per slot-round
 * of the merge of partitions.  Contexts enter by their mean.  Times in the
 * unit of the coefficients (table.c fits them in us per layer). */
typedef struct hs_dec_wave {
    int heads;                /* query heads per rank */
    int sms, resident;        /* multiprocessors; blocks resident on each */
    int part_max, part_min, part_align, fill;
    double c0, a, b, cm;
} hs_dec_wave;

/* Time of b sequences of mean context ctx_mean (the kernel rounds it up);
 * k (may be NULL) gets the multipliers of c0, a, b and cm, so that the
 * time is k . (c0, a, b, cm): how table.c fits them. */
double hs_dec_wave_time(const hs_dec_wave *w, int64_t b, double ctx_mean, double k[4]);

/* Prefill attention of one chunk from a measured table's rows: x new
 * tokens after y cached ones.  Rows of one chunk length need not share
 * prefixes (a table stops at the model's context).  One allocation at x. */
typedef struct hs_pre_grid {
    int nx;                   /* chunk lengths; 0: none */
    double *x;                /* [nx] ascending */
    int *off;                 /* [nx + 1]: chunk j's rows are y, ns [off[j], off[j + 1]) */
    double *y, *ns;           /* prefixes ascending per chunk; ns of the stage's layers */
} hs_pre_grid;

/* The grid's ns at (x, y): linear in the prefix along each of the two chunk
 * rows around x, then linear in x between them.  Returns < 0 outside: x
 * before the first or past the last chunk, y past a row's last prefix
 * (there the fit prices it). */
double hs_pre_grid_ns(const hs_pre_grid *g, double x, double y);

typedef struct hs_perf_stage {
    int max_tokens, max_seqs;
    double *dense;            /* [max_tokens + 1] ns */
    double *head;             /* [max_seqs + 1] ns */
    double dec_fixed, dec_seq, dec_ctx;   /* ns, ns/seq, ns/token */
    double pre_fixed, pre_self, pre_cross, pre_ctx; /* ns, ns/pair, ns/pair, ns/token */
    double pre_tok;                       /* ns per new prefill token */
    double send_alpha, send_token;        /* ns, ns/token to next stage */
    double *enc;              /* [max_tokens + 1] ns, encoder-decoder models only (else NULL) */
    double enc_fixed, enc_pair;           /* ns, ns/pair */
    double dispatch_ns;       /* a pass takes at least this: the engine's host
                                 issuing the stage's layers (overhead.h); 0: none */
    /* Decode attention from a measured grid (a table with every batch at
     * every context): dg_ns[i * dg_nc + j] = ns of the stage's layers for
     * dg_b[i] sequences of dg_c[j] context tokens each; one allocation at
     * dg_b.  NULL: the linear terms dec_* above.  The linear fit of such a
     * table is 9% off median and -20 to -42% at batches 1-16 (A100, vLLM's
     * kernel), so the engine reads the grid; planners keep the terms. */
    double *dg_b, *dg_c, *dg_ns;
    int dg_nb, dg_nc;
    /* ... or, when the table says how its kernel splits (meta.json
     * decode_*), the wave model fitted on that grid, in ns of the stage's
     * layers; dw.sms == 0: none.  Read before the grid. */
    hs_dec_wave dw;
    /* Prefill attention, when one GPU type times the stage from a table
     * with two chunk lengths or more (perf.prefill_grid): the fit's sum over
     * the pass scaled by grid / fit at the pass's mean chunk, so a pass of
     * one chunk costs the table's value and one of several the fit's sum
     * corrected alike (the pass's shape keeps sums, not chunks).  The 5-term fit
     * misses the measured shape by up to 26% (hetsim-exec's H200 kernel, 8.2%
     * median over its rows); pg.nx == 0: the fit alone. */
    hs_pre_grid pg;
} hs_perf_stage;

/* Decode attention of b sequences holding ctx context tokens in all, from
 * the stage's grid: bilinear in (sequences, mean context), linear beyond
 * the grid's last row and column, flat below its first context. */
double hs_perf_dec_grid_ns(const hs_perf_stage *st, int32_t b, int64_t ctx);

typedef struct hs_perf {
    int pp;
    char model_name[32];      /* which builder made it, recorded per replica */
    char engine[48];          /* engine profile of the host cost, "none": flat */
    char calib[1024];         /* per GPU type, where the kernel times come from
                                 ("a100-80g: measured table; h100-sxm-80g:
                                 transferred from a100-80g,a40, uncalibrated") */
    double expected_err;      /* %, cross-validated error per layer of the least
                                 trusted source; < 0: not measured (a table) */
    int uncalibrated;         /* 1: some GPU type runs ops not measured on it */
    /* Host cost of one iteration (the serving framework: schedule, prepare
     * inputs, sample, process outputs; perf/overhead.h), paid before the
     * first stage runs: step_overhead + step_seq * sequences + step_tok *
     * tokens (hs_perf_step_ns). */
    double step_overhead;     /* ns per iteration */
    double step_seq;          /* ns per sequence in the batch */
    double step_tok;          /* ns per token in the pass */
    hs_perf_stage stage[HS_MAX_PP];
} hs_perf;

/* The work of one iteration, as aggregates (never per request). */
typedef struct hs_batch_shape {
    int32_t tokens;           /* T: all tokens in the forward pass */
    int32_t samples;          /* S: sequences producing a token */
    int32_t dec_seqs;         /* B */
    int64_t dec_ctx;          /* C, tokens */
    double pre_self;          /* Q, pairs */
    double pre_cross;         /* X, pairs */
    int64_t pre_prefix;       /* P, tokens */
    int64_t pre_tokens;       /* N, new tokens of the prefill chunks */
    int32_t pre_chunks;       /* prefill chunks in the pass */
    int32_t enc_tokens;       /* E: prompt tokens encoded (encoder-decoder), and
                                 cross-KV projections of handed-over prompts */
    double enc_pairs;         /* Y, pairs */
    int32_t enc_seqs;         /* prompts encoded (host cost per sequence) */
    int32_t enc_new;          /* their tokens (host cost per token; E less the
                                 projections, whose inputs the host does not prepare) */
} hs_batch_shape;

/* Efficiency knobs of the roofline model (typed config "perf.*"). */
typedef struct hs_perf_cfg {
    char model[32];           /* builder name, "roofline" */
    double gemm_eff;          /* fraction of peak FLOP/s reached by large GEMMs */
    double attn_eff;          /* fraction of peak FLOP/s reached by attention */
    double attn_knee;         /* prefill attention: a call costs attn_knee more
                                 query-key pairs than it has (its ramp to attn_eff) */
    double attn_query_keys;   /* prefill attention: each query row costs as many
                                 pairs more (its tiles, softmax and output) */
    double mem_eff;           /* fraction of peak memory bandwidth */
    double link_eff;          /* fraction of link bandwidth in collectives */
    double launch_us;         /* per kernel launch */
    char engine[48];          /* engine profile (profiles/engines), "none" */
    double step_overhead_us;  /* per iteration, on top of the engine profile */
    char tables[256];         /* measured tables root, "": <data root>/profiles */
    char fit_from[512];       /* comma-separated tables/roots to fit on, "": tables */
    int prefill_grid;         /* 1: prefill attention read from a measured table's
                                 rows (hs_perf_stage.pg); 0: its fit */
    int decode_grid;          /* decode attention from a measured table: 2 the
                                 kernel's waves where the table gives its split
                                 (hs_dec_wave), else 1: the grid (hs_perf_stage);
                                 0: its linear fit */
    char quant_kernels[16];   /* the kernels of quantised layers: "model" (the
                                 builder's own: weight-only kernels reading the
                                 packed width, or a table's measured rows) or
                                 "lptorch" (LLM-PQ's runtime: LLM.int8 and GPTQ's
                                 vecquant, perf/qlat.h) */
} hs_perf_cfg;

void hs_perf_cfg_defaults(hs_perf_cfg *c);
/* 0 when name is a perf.quant_kernels value (model, lptorch); else an error
 * naming `key` (NULL: perf.quant_kernels). */
int hs_perf_check_kernels(const char *name, const char *key, hs_err *err);
/* 0 when LLM-PQ's kernels (perf.quant_kernels=lptorch) can time layout l of
 * m: every stage holding a quantised layer (or encoder layers at its bits)
 * is one GPU of a decoder-only model, as LLM-PQ's runtime runs; else an
 * error naming the stage. */
int hs_layout_check_lptorch(const hs_model *m, const hs_layout *l, hs_err *err);
/* One command-line "--set perf.KEY=VALUE" into c (perf step, validate
 * --reprice); HS_EPARSE naming the argument when it has no perf. key. */
int hs_perf_cfg_set_arg(hs_perf_cfg *c, const char *kv, hs_err *err);
extern const hs_field hs_perf_cfg_fields[];

typedef struct hs_perf_builder {
    const char *name;
    const char *help;
    int (*build)(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                 const hs_cluster *c, const hs_layout *l, int max_tokens,
                 int max_seqs, hs_err *err);
} hs_perf_builder;

const hs_perf_builder *hs_perf_find(const char *name);
extern const hs_perf_builder *const hs_perf_builders[];

/* Builds with the builder named in cfg->model. */
int hs_perf_build(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_tokens,
                  int max_seqs, hs_err *err);
void hs_perf_free(hs_perf *p);

/* Adds from's per-GPU-type sources (calib) to into's, keeping the types
 * into already names, with its expected error when larger and its
 * uncalibrated mark: a replica that uses devices priced by another build
 * (Hetis's attention workers) reports where their numbers came from too.
 * A full calib ends in "...". */
void hs_perf_merge_calib(hs_perf *into, const hs_perf *from);

/* The stage's 5-term prefill-attention fit over sums of chunks: causal
 * pairs q, chunk x prefix pairs x, prefix tokens pre, new tokens n. */
static inline double hs_perf_pre_fit_ns(const hs_perf_stage *st, double q, double x, double pre,
                                        double n)
{
    return st->pre_fixed + st->pre_self * q + st->pre_cross * x + st->pre_ctx * pre + st->pre_tok * n;
}

/* A pass's prefill attention pre (the fit's sum) scaled by the grid over
 * the fit at the pass's mean chunk (hs_perf_stage.pg). */
double hs_perf_pre_scaled(const hs_perf_stage *st, const hs_batch_shape *b, double pre);

/* Multiplies what the stage reads from tables for attention (the decode
 * grid, the wave coefficients, the prefill rows) by f: us per layer to ns
 * per stage, or a planner's slow-down. */
void hs_perf_stage_attn_scale(hs_perf_stage *st, double f);

/* Multiplies every term of an iteration's time by f > 0: the host cost,
 * each stage's kernels and collectives (tables, fits, grids, waves), its
 * dispatch floor and its send, so that every pass of any shape takes f
 * times as long.  For a speed the model does not price but has measured
 * against it: a deployment replica's latency_scale, iServe's format
 * ratios. */
void hs_perf_scale(hs_perf *p, double f);

/* Time of stage s for the batch, ns (double; callers round once). */
static inline double hs_perf_stage_ns(const hs_perf *p, int s,
                                      const hs_batch_shape *b)
{
    const hs_perf_stage *st = &p->stage[s];
    int t = b->tokens < st->max_tokens ? b->tokens : st->max_tokens;
    int k = b->samples < st->max_seqs ? b->samples : st->max_seqs;
    double ns = st->dense[t] + st->head[k];
    /* Beyond the table, scale linearly from its last entry (only reachable
     * through misconfiguration; the replica caps batches to the table). */
    if (b->tokens > st->max_tokens)
        ns += st->dense[st->max_tokens] * (double)(b->tokens - st->max_tokens) / st->max_tokens;
    if (b->dec_seqs)
        ns += st->dw.sms ? hs_dec_wave_time(&st->dw, b->dec_seqs, (double)b->dec_ctx / b->dec_seqs, NULL)
            : st->dg_b ? hs_perf_dec_grid_ns(st, b->dec_seqs, b->dec_ctx)
                       : st->dec_fixed + st->dec_seq * b->dec_seqs + st->dec_ctx * (double)b->dec_ctx;
    if (b->pre_chunks) {
        double pre = hs_perf_pre_fit_ns(st, b->pre_self, b->pre_cross, (double)b->pre_prefix,
                                        (double)b->pre_tokens);
        ns += st->pg.nx ? hs_perf_pre_scaled(st, b, pre) : pre;
    }
    if (b->enc_tokens && st->enc) {
        int e = b->enc_tokens < st->max_tokens ? b->enc_tokens : st->max_tokens;
        ns += st->enc[e] + st->enc_fixed + st->enc_pair * b->enc_pairs;
        if (b->enc_tokens > st->max_tokens)
            ns += st->enc[st->max_tokens] * (double)(b->enc_tokens - st->max_tokens) / st->max_tokens;
    }
    return ns > st->dispatch_ns ? ns : st->dispatch_ns;
}

/* Host cost of one iteration of the batch, ns. */
static inline double hs_perf_step_ns(const hs_perf *p, const hs_batch_shape *b)
{
    /* an encoder pass prepares its prompts as a prefill does */
    return p->step_overhead + p->step_seq * (double)(b->dec_seqs + b->pre_chunks + b->enc_seqs) +
           p->step_tok * (double)(b->tokens + b->enc_new);
}

static inline double hs_perf_send_ns(const hs_perf *p, int s, int32_t tokens)
{
    return p->stage[s].send_alpha + p->stage[s].send_token * tokens;
}

/* One batch through every stage in turn, ns: the host cost, each stage's
 * time and the sends between them (a lone request's pass, no pipelining). */
static inline double hs_perf_pass_ns(const hs_perf *p, const hs_batch_shape *b)
{
    double ns = hs_perf_step_ns(p, b);
    for (int s = 0; s < p->pp; s++) {
        ns += hs_perf_stage_ns(p, s, b);
        if (s + 1 < p->pp) ns += hs_perf_send_ns(p, s, b->tokens);
    }
    return ns;
}

/* The roofline's time of one operator (HS_OP_* of perf/table.h) on one rank
 * of GPU g, us: what the default model assumes before any measurement. */
double hs_roofline_op_us(int op, const hs_model *m, const hs_gpu *g, int tp, int bits,
                         double tokens, const hs_perf_cfg *cfg);

/* The roofline's time of one layer's attention kernel on one rank, us, in
 * the shapes of the measured tables: kind HS_ATTN_DECODE (perf/table.h), x
 * sequences each decoding one token against y cached tokens; or
 * HS_ATTN_PREFILL, one sequence adding a chunk of x tokens after y cached. */
double hs_roofline_attn_us(int kind, const hs_model *m, const hs_gpu *g, int tp, int kv_bits,
                           double x, double y, const hs_perf_cfg *cfg);

/* Ring all-reduce of `bytes` over the GPUs (alpha-beta, slowest link), s. */
double hs_allreduce_s(const hs_cluster *c, const int *gpus, int n,
                      double bytes, double link_eff);

#endif
