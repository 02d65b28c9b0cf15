/* exegpt_int.h - what the ExeGPT estimator's files share (internal: hs__
 * prefix, not part of the public API, which is plan/exegpt.h).
 *
 * The estimator is four files, one concern each:
 *   exegpt_ctx.c    the context: options, creation (the workload's moments,
 *                   the decoding-iteration distribution), destruction, and
 *                   the facts and engine settings the planner reads;
 *   exegpt_round.c  the length-distribution math, free of hardware: the
 *                   distributions themselves (hs_exegpt_dist_*), Section
 *                   6's P_D(U) and B_D, the RRA round's expected workload,
 *                   the survival of D, the p99 with a uniform wait, E[max];
 *   exegpt_stage.c  the hardware side: per-TP latency tables, stage layouts,
 *                   per-stage encode / decode / send times, per-GPU memory,
 *                   and pipeline timing (fill and drain, ring period);
 *   exegpt_est.c    the estimates built from both: RRA, WAA (split,
 *                   hand-over, decoder population), the DeepSpeed-Inference
 *                   baseline, hs_exegpt_estimate and hs_exegpt_layouts; its
 *                   opening comment states the modelling choices.
 *
 * Invariants of the context (asserted where they are relied on):
 *   - the distributions (pin, dec) are normalised: p[] in [0, 1], summing
 *     to 1 within HS__EXEGPT_PTOL; pin.p[0] = 0 (prompts of >= 1 token);
 *     0 <= d_p99 <= dec.max;
 *   - pin_mean >= 1 - PTOL, d_mean, d_tri and ctx_sq finite and >= 0;
 *     cap, kv_full and w_total finite and > 0; 0 <= kv_margin < 1;
 *   - tab[t] is built for t in 1..min(node_gpus, n, HS_MAX_TP) on first
 *     use and never rebuilt; a stage's tab points at tab[stage tp];
 *   - se and sd hold n stages each; s_b .. s_f and sv hold dec.max + 2
 *     doubles each (sv is the survival of D, fixed after creation);
 *   - a stage list made by hs__exegpt_make_stages over GPUs [g_lo, g_hi)
 *     covers them in order, one stage per TP group (t consecutive GPUs of
 *     one node) or single GPU, and its layers sum to the counts asked for;
 *   - not thread-safe: the tables, stage lists and scratch are shared by
 *     every call, and hs_exegpt_dsi changes the prompt moments for the
 *     length of a call. */
#ifndef HS_PLAN_EXEGPT_INT_H
#define HS_PLAN_EXEGPT_INT_H

#include <stdint.h>

#include "plan/exegpt.h"

/* Probability mass of a distribution sums to 1 within this (exegpt.h). */
#define HS__EXEGPT_PTOL 1e-9

/* The per-layer latency tables of one TP degree. */
typedef struct hs__exegpt_tab {
    int built;
    hs_perf perf;            /* 3 one-layer stages: [emb + layer][layer][layer + head] */
} hs__exegpt_tab;

/* One pipeline stage of a schedule. */
typedef struct hs__exegpt_stg {
    int tp, g0, g1;          /* TP degree, first and last GPU id */
    int enc, dec;            /* encoder / decoder layers held */
    int first, last;         /* holds the embedding / the LM head */
    const hs__exegpt_tab *tab;
} hs__exegpt_stg;

/* The runtime's encoder batch for a share of `want` queries under the
 * workload band (policy exegpt.c band_ok): mean queries, prompt tokens and
 * attention pairs per batch (pairs: S^2 encoder-decoder, S(S+1)/2 else). */
typedef struct hs__exegpt_band {
    int done;
    double n, tok, pairs;
} hs__exegpt_band;
#define HS__EXEGPT_BAND_MAX 64

struct hs_exegpt {
    hs_model m;
    const hs_cluster *c;
    hs_exegpt_opts o;
    int n, node_gpus, encdec;
    double cap;              /* bytes usable per GPU */
    /* prompt moments */
    double pin_mean, pin_sq, pin_tri;   /* E[S], E[S^2], E[S(S+1)/2] */
    int32_t pin_max;
    /* decoding iterations per query */
    hs_exegpt_dist dec;
    double d_mean, d_tri;               /* E[D], E[D(D+1)/2] over all queries */
    double ctx_sq;                      /* time average of a decoding query's
                                           context squared, tokens^2 */
    int32_t d_p99;                      /* D of the p99-length output */
    double r_dec, f_kv;                 /* encoder-decoder factors (1, 0 otherwise) */
    double kv_full;                     /* KV bytes per token, all decoder layers, tp 1 */
    double w_total;                     /* bytes, one copy of the weights */
    hs__exegpt_tab tab[HS_MAX_TP + 1];
    hs__exegpt_stg *se, *sd;            /* [n] stage scratch: RRA / encode, decode */
    double *sv;                         /* [d_max + 2] survival of D among decoding queries */
    hs__exegpt_band *band;              /* [HS__EXEGPT_BAND_MAX + 1] encoder batches under
                                           the runtime's band, by want (lazily) */
    hs_exegpt_dist pin;                 /* the prompt distribution (DSI's padding) */
    double *s_b, *s_ctx, *s_cnt, *s_sumk, *s_td, *s_tl, *s_f;  /* [d_max + 2] scratch */
};

/* ---- exegpt_round.c */

#ifndef NDEBUG
/* Sanity of a distribution (for assert): p allocated, 0 <= max <=
 * HS_EXEGPT_MAX_LEN, every p[len] finite in [0, 1], summing to 1 within
 * HS__EXEGPT_PTOL.  Returns 1 when sane. */
int hs__exegpt_dist_sane(const hs_exegpt_dist *d);
#endif

/* Survival of the decoding queries: sv[x] = P(D >= x | D >= 1) for
 * x = 0..max+1 (sv[0] = sv[1] = 1 when any query decodes); all 0 when none
 * does.  sv holds d->max + 2. */
void hs__exegpt_survival(const hs_exegpt_dist *d, double *sv);

/* The RRA round's counts (hs_exegpt_rra_round without the checks and the
 * allocation): sv from hs__exegpt_survival(d); b, ctx as there; cnt / sumk
 * scratch of nd + 1 each.  nd >= 1, be >= 0, prompt_mean >= 0, mode a
 * HS_EXEGPT_BD_*.  Every b[u], ctx[u] and r's fields come out finite and
 * >= 0, and r->bd = b[1]. */
void hs__exegpt_round_core(const hs_exegpt_dist *d, const double *sv, double prompt_mean, int nd,
                           double be, int mode, double *b, double *ctx, double *cnt, double *sumk,
                           hs_exegpt_round *r);

/* p99 of W + f[D] with W uniform on [0, wait] and D distributed as d
 * (f[D] for D = 0..d->max, finite, >= 0 and non-decreasing in D).  Returns
 * a finite value >= 0. */
double hs__exegpt_p99_with_wait(const hs_exegpt_dist *d, const double *f, double wait);

/* E[max of b >= 1 draws] of d, rounded to a length in 0..d->max. */
int32_t hs__exegpt_emax(const hs_exegpt_dist *d, int b);

/* ---- exegpt_stage.c */

/* The per-layer tables of TP degree tp, built on first use: *out =
 * &x->tab[tp].  Returns 0, HS_ERANGE (tp outside 1..min(node_gpus, n,
 * HS_MAX_TP)) or the latency model's error (the table stays unbuilt). */
int hs__exegpt_get_tab(hs_exegpt *x, int tp, const hs__exegpt_tab **out, hs_err *err);

/* One bare decoder layer (dense part, TP all-reduce included) for tok
 * tokens, ns: finite and >= 0. */
double hs__exegpt_lay_ns(const hs__exegpt_tab *t, double tok);

/* Encoding b prompts of the mean length (a micro-batch) on stage s, with
 * enc_slack, s.  0 when b <= 0; finite and >= 0. */
double hs__exegpt_enc_stage_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b);
/* The same for b prompts of tok tokens and pairs attention pairs in all. */
double hs__exegpt_enc_batch_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b, double tok,
                              double pairs);

/* One decoding step of b sequences holding ctx context tokens in all on
 * stage s, s.  0 when b <= 0; finite and >= 0. */
double hs__exegpt_dec_stage_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b, double ctx);

/* Sending tok tokens of activations from stage `from` to stage `to`, s:
 * 0 when the last GPU of one is the first of the other, else the link's
 * latency plus bytes over its bandwidth times link_eff; finite, >= 0. */
double hs__exegpt_send_s(const hs_exegpt *x, const hs__exegpt_stg *from, const hs__exegpt_stg *to,
                         double tok);

/* Lays out GPUs [g_lo, g_hi) (0 <= g_lo < g_hi <= n) as stages in st[]
 * (room for g_hi - g_lo): up to k TP groups of t GPUs inside one node
 * first, then single GPUs; enc and dec layers split in proportion to the
 * stages' GPU counts; the first stage holds the embedding, the last the
 * LM head when `head`.  Returns the stage count (>= 1) and *formed = the
 * TP groups made (min(k, hs__exegpt_group_cap)), or a negative error of
 * hs__exegpt_get_tab. */
int hs__exegpt_make_stages(hs_exegpt *x, hs__exegpt_stg *st, int g_lo, int g_hi, int t, int k,
                           int enc, int dec, int head, int *formed, hs_err *err);

/* TP groups of t GPUs that hs__exegpt_make_stages can form on GPUs
 * [g_lo, g_hi) (0 when t <= 1). */
int hs__exegpt_group_cap(const hs_exegpt *x, int g_lo, int g_hi, int t);

/* Per-GPU memory of stage s: weights, activations of act_tok tokens and
 * act_seqs sequences (at least 1 each), and kv_tok >= 0 tokens of KV
 * exactly, bytes (finite, >= 0). */
double hs__exegpt_stage_mem_kv(const hs_exegpt *x, const hs__exegpt_stg *s, double act_tok,
                               double act_seqs, double kv_tok);
/* The same for an expected kv_tok tokens, with kv_margin to spare. */
double hs__exegpt_stage_mem(const hs_exegpt *x, const hs__exegpt_stg *s, double act_tok,
                            double act_seqs, double kv_tok);

/* Pipeline period of one iteration of m >= 1 micro-batches of tok tokens
 * through the p >= 1 stages st with stage times ts (s): the slowest stage
 * or send serves all m, and a micro-batch needs a full pass (and the
 * sampled token's way back to stage 0) before its next step.  s, finite
 * and >= 0. */
double hs__exegpt_ring_period(const hs_exegpt *x, const hs__exegpt_stg *st, int p, double m,
                              const double *ts, double tok);
/* Fill and drain of m >= 1 micro-batches through the same: one pass plus
 * m - 1 times the slowest stage or send.  s, finite and >= 0. */
double hs__exegpt_fill_drain(const hs_exegpt *x, const hs__exegpt_stg *st, int p, double m,
                             const double *ts, double tok);

#endif
