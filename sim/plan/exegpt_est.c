/* exegpt_est.c - ExeGPT's XSimulator: expected throughput, latency and
 * memory of RRA and WAA schedules from the input/output length
 * distributions (papers/exegpt.txt Sec. 4 and 6); see exegpt.h.
 *
 * Layouts.  N GPUs in cluster order.  Partial TP with degree t and k groups:
 * the first k stages of a GPU range are TP groups of t consecutive GPUs of
 * one node (a group never spans nodes: the per-layer tables time the
 * all-reduce inside a node), the rest are single-GPU stages.  Layers are
 * split in proportion to the stages' GPU counts, so that every GPU holds
 * about E/N encoder and D/N decoder layers as RRA prescribes (Sec. 4.1),
 * TP groups included (see make_stages).
 *   RRA: one pipeline over all N GPUs; every stage holds its share of the
 *        encoder and of the decoder layers.
 *   WAA: GPUs [0, N_E) encode, [N_E, N) decode; TP groups go to the decode
 *        side first (its pipeline depth is paid on every token) and then to
 *        the encode side; a side with fewer than t GPUs gets none.
 *        Decoder-only models keep a full copy (embedding, layers, head) on
 *        each side; encoder-decoder models put the encoder layers (and the
 *        embedding) on the encode side and the decoder on the decode side.
 *        N_E = ceil(N A / (A + B)) clamped to [1, N - 1] with A, B the
 *        encode/decode compute (WAA-C) or memory (WAA-M) of one period at
 *        B_D = B_E S_D, on one GPU (tp = 1 tables), as Sec. 4.1 and 6 say.
 *
 * Per-layer latency (hs_perf, one table per TP degree, see get_tab):
 *   dense(T)  one self-attention decoder layer for T tokens, TP all-reduce
 *             included; an encoder layer is the same shape; an encoder-
 *             decoder's decoder layer adds the cross-attention Q and O
 *             projections (2 h q weights per token), so its dense time is
 *             scaled by r_dec = 1 + 2 h q / (encoder-layer weights): the
 *             layer's GEMMs are close to linear in weight bytes both when
 *             memory bound (decode) and compute bound;
 *   kvproj(T) the cross-attention K/V projection of T prompt tokens for one
 *             decoder layer, f_kv = 2 h kv / (encoder-layer weights) of a
 *             dense layer (FasterTransformer computes it at the first
 *             decoding step; we charge it where the decoder layer lives:
 *             in RRA's encoding phase, on WAA's decode GPUs);
 *   prefill attention: causal pairs E[S(S+1)/2] per prompt (decoder-only)
 *             with pre_self; bidirectional encoder pairs E[S^2] with
 *             pre_cross (the dense-block coefficient);
 *   decode attention: dec_fixed + dec_seq B + dec_ctx C, C = prompt +
 *             tokens decoded (for encoder-decoder: self context plus cross
 *             context, and fixed/per-sequence costs paid twice).
 * Stage sends use the cluster link between the stages (alpha + bytes /
 * (bw * link_eff)); the per-iteration step overhead is charged to the first
 * stage of every pass.
 *
 * Timelines.
 *   RRA round = encoding phase of B_E queries (m_E = min(P, B_E) micro-
 *     batches, fill and drain) + N_D decoding iterations, iteration u with
 *     batch b(u) split into min(P, b(u)) micro-batches.  Throughput =
 *     B_E / round.  A query with D iterations finishes after
 *     k = ceil(D/N_D) encoding phases, k-1 whole decoding phases and the
 *     first 1 + (D-1) mod N_D iterations of the last one.
 *   WAA: the encoders emit a batch every tau_E (bottleneck stage x
 *     micro-batches); the hand-over of the batch (decoder-only: its KV of
 *     all layers, from the encode GPU holding a layer to the decode GPU
 *     holding it, per-rank shards in parallel, serial per link; encoder-
 *     decoder: the encoder output to every decode stage) is overlapped with
 *     compute and bounds the period too.  The decoder iterates back to
 *     back (Table 6's WAA latencies, 3 s for 63 tokens, are far below 63
 *     encoder periods, so decoding is not paced one iteration per encoded
 *     batch); its population follows Little's law in time,
 *     B_D = lambda E[D] tau_D(B_D), solved by bisection; this is the
 *     paper's B_D = B_E S_D when tau_D = tau_E.  No fixed point within
 *     memory means the decoder cannot keep up: not feasible.
 *   Latency (SLA b): the p99-length query from the start of its encoding:
 *     RRA as above; WAA encode pass + hand-over + wait for its decode
 *     micro-batch (tau_D / B_m) + D iterations.  SLA (a) adds a wait for the
 *     encoding slot, uniform over one round (RRA) or encoder period (WAA),
 *     and takes the p99 over the output distribution.
 *
 * Memory per GPU: hs_model_stage_mem_enc for the stage's decoder and
 * encoder layers (the deployment places them alike) + KV of
 * the expected peak context (RRA: max over the round; WAA decode: the mean
 * population; WAA encode: two batches of prompt KV, one being encoded and
 * one being handed over) + activations of the largest pass; it must fit in
 * mem_util of the GPU. */
#include "plan/exegpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Section 6 ------------------------------------------------------------------ */

double hs_exegpt_pd_u_given_s(int u, int s, int nd)
{
    if (s < 1 || u < 1 || nd < 1 || u > nd) return 0;
    if (s <= nd) return u == s ? 1.0 : 0.0;
    return u == 1 + (s - 1) % nd ? 1.0 / ((s + nd - 1) / nd) : 0.0;
}

double hs_exegpt_pd_u(const hs_exegpt_dist *d, int nd, double *pu)
{
    double sum = 0;
    for (int u = 0; u <= nd; u++) pu[u] = 0;
    /* Only one U per S is non-zero, so this is O(max) rather than O(max nd). */
    for (int32_t s = 1; s <= d->max; s++) {
        int u;
        if (d->p[s] == 0) continue;
        u = s <= nd ? s : 1 + (s - 1) % nd;
        pu[u] += d->p[s] * hs_exegpt_pd_u_given_s(u, s, nd);
    }
    for (int u = 1; u <= nd; u++) sum += pu[u];
    return sum;
}

double hs_exegpt_bd(double be, const double *pu, int nd)
{
    double s = 0;
    for (int u = 1; u <= nd; u++) s += pu[u];
    return s > 0 ? be / s : 0;
}

/* Survival of the decoding queries: sv[x] = P(D >= x | D >= 1) for
 * x = 0..max+1 (sv[0] = sv[1] = 1 when any query decodes). */
static void survival(const hs_exegpt_dist *d, double *sv)
{
    double dec = 1 - d->p[0], acc = 0;
    sv[d->max + 1] = 0;
    for (int32_t x = d->max; x >= 1; x--) {
        acc += dec > 1e-15 ? d->p[x] / dec : 0;
        sv[x] = acc;
    }
    sv[0] = sv[1];
}

/* The round's counts.  With w the distribution of D among queries that
 * decode (D >= 1), S its survival and J joiners per round, the steady
 * state has, at iteration u, J cnt[u] queries whose decoded-token counts
 * (the current one included) sum to J sumk[u]:
 *   cnt[u]  = sum_D w(D) #{j >= 0 : j nd + u <= D} = sum_j S(u + j nd)
 *   sumk[u] = sum_D w(D) sum_j (j nd + u)          = sum_j (u + j nd) S(u + j nd)
 * so a round costs O(max + nd).  cnt/sumk: scratch of nd + 1 each. */
static void round_core(const hs_exegpt_dist *d, const double *sv, double prompt_mean, int nd,
                       double be, int mode, double *b, double *ctx, double *cnt, double *sumk,
                       hs_exegpt_round *r)
{
    double dec = 1 - d->p[0], J = be * dec;
    memset(r, 0, sizeof *r);
    r->joiners = J;
    for (int u = 0; u <= nd; u++) b[u] = ctx[u] = cnt[u] = sumk[u] = 0;
    if (!(dec > 1e-15)) return;
    for (int u = 1; u <= nd && u <= d->max; u++)
        for (int32_t k = u; k <= d->max; k += nd) {
            cnt[u] += sv[k];
            sumk[u] += k * sv[k];
        }
    if (mode == HS_EXEGPT_BD_PAPER) {
        /* P_D(U) on the decoding queries: one non-zero U per D. */
        double sum = 0, done = 0, bd;
        for (int32_t D = 1; D <= d->max; D++) {
            int u = D <= nd ? D : 1 + (D - 1) % nd;
            if (d->p[D] == 0) continue;
            b[u] += d->p[D] / dec * hs_exegpt_pd_u_given_s(u, D, nd);
        }
        for (int u = 1; u <= nd; u++) sum += b[u];
        bd = sum > 0 ? J / sum : 0;
        for (int u = 1; u <= nd; u++) {
            double pu = b[u];
            b[u] = bd * (1 - done);
            if (b[u] < 1e-12 * bd) b[u] = 0; /* rounding dust after the last completion */
            done += pu;
        }
    } else {
        for (int u = 1; u <= nd; u++) b[u] = J * cnt[u];
    }
    for (int u = 1; u <= nd; u++) {
        ctx[u] = cnt[u] > 0 ? b[u] * (prompt_mean + sumk[u] / cnt[u]) : 0;
        r->dec_steps += b[u];
        if (ctx[u] > r->ctx_peak) r->ctx_peak = ctx[u];
    }
    r->bd = b[1];
}

int hs_exegpt_rra_round(const hs_exegpt_dist *d, double prompt_mean, int nd, double be,
                        int mode, double *b, double *ctx, hs_exegpt_round *r, hs_err *err)
{
    double *tmp;
    if (nd < 1 || !(be >= 0) || !(prompt_mean >= 0) || !d->p ||
        (mode != HS_EXEGPT_BD_PAPER && mode != HS_EXEGPT_BD_STEADY))
        return hs_errf(err, HS_EINVAL, "RRA round: nd %d, B_E %g, mode %d", nd, be, mode);
    tmp = malloc((2 * ((size_t)nd + 1) + (size_t)d->max + 2) * sizeof *tmp);
    if (!tmp) return hs_errf(err, HS_ENOMEM, "out of memory (RRA round)");
    survival(d, tmp + 2 * (nd + 1));
    round_core(d, tmp + 2 * (nd + 1), prompt_mean, nd, be, mode, b, ctx, tmp, tmp + nd + 1, r);
    free(tmp);
    return 0;
}

/* ---- the estimator context ------------------------------------------------------- */

typedef struct tptab {
    int built;
    hs_perf perf;            /* 3 one-layer stages: [emb + layer][layer][layer + head] */
} tptab;

/* One pipeline stage of a schedule. */
typedef struct stg {
    int tp, g0, g1;          /* TP degree, first and last GPU id */
    int enc, dec;            /* encoder / decoder layers held */
    int first, last;         /* holds the embedding / the LM head */
    const tptab *tab;
} stg;

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
    tptab tab[HS_MAX_TP + 1];
    stg *se, *sd;                       /* [n] stage scratch: RRA / encode, decode */
    double *sv;                         /* [d_max + 2] survival of D among decoding queries */
    hs_exegpt_dist pin;                 /* the prompt distribution (DSI's padding) */
    double *s_b, *s_ctx, *s_cnt, *s_sumk, *s_td, *s_tl, *s_f;  /* [d_max + 2] scratch */
};

const char *hs_exegpt_policy_name(int policy)
{
    static const char *const names[] = {"RRA", "WAA-C", "WAA-M"};
    return policy >= 0 && policy < HS_EXEGPT_NPOLICY ? names[policy] : "?";
}

void hs_exegpt_opts_defaults(hs_exegpt_opts *o)
{
    memset(o, 0, sizeof *o);
    hs_perf_cfg_defaults(&o->perf);
    o->bits = 16;
    o->kv_bits = 16;
    o->mem_util = 0.9;
    o->kv_margin = 0.1;
    o->kv_z = 2.33;
    o->bd_mode = HS_EXEGPT_BD_PAPER;
    o->enc_slack = 0;
    o->table_tokens = 32768;
    o->table_seqs = 4096;
}

void hs_exegpt_destroy(hs_exegpt *x)
{
    if (!x) return;
    for (int t = 0; t <= HS_MAX_TP; t++)
        if (x->tab[t].built) hs_perf_free(&x->tab[t].perf);
    hs_exegpt_dist_free(&x->dec);
    hs_exegpt_dist_free(&x->pin);
    free(x->se);
    free(x->sd);
    free(x->s_b);
    free(x);
}

int hs_exegpt_create(hs_exegpt **out, const hs_model *m, const hs_cluster *c,
                     const hs_exegpt_dist *prompt, const hs_exegpt_dist *output,
                     const hs_exegpt_opts *o, hs_err *err)
{
    hs_exegpt *x;
    int rc, n = o->n_gpus ? o->n_gpus : c->n_gpus;
    size_t nd;
    *out = NULL;
    if (n < 1 || n > c->n_gpus)
        return hs_errf(err, HS_EINVAL, "exegpt: %d GPUs requested, cluster %s has %d", n, c->name,
                       c->n_gpus);
    if (!(o->mem_util > 0 && o->mem_util <= 1) || !(o->enc_slack >= 0) ||
        !(o->kv_margin >= 0 && o->kv_margin < 1) || !(o->kv_z >= 0 && o->kv_z <= 10) ||
        o->table_tokens < 16 || o->table_seqs < 16 ||
        (o->bd_mode != HS_EXEGPT_BD_PAPER && o->bd_mode != HS_EXEGPT_BD_STEADY) ||
        (o->kv_bits != 16 && o->kv_bits != 8) || o->bits < 3 || o->bits > 16)
        return hs_errf(err, HS_EINVAL, "exegpt: options out of range (mem_util %g, enc_slack %g, "
                       "tables %d/%d, bd_mode %d, bits %d/%d)", o->mem_util, o->enc_slack,
                       o->table_tokens, o->table_seqs, o->bd_mode, o->bits, o->kv_bits);
    if (!prompt->p || !output->p || prompt->max < 1 || output->max < 1 || prompt->p[0] > 0 ||
        output->p[0] > 0)
        return hs_errf(err, HS_EINVAL, "exegpt: prompt and output lengths must be >= 1 token");
    for (int g = 1; g < n; g++)
        if (c->gpu_type[g] != c->gpu_type[0])
            return hs_errf(err, HS_EUNSUPPORTED,
                           "exegpt: GPUs 0..%d of cluster %s mix types %s and %s (the estimator "
                           "assumes one type, as the paper's clusters)", n - 1, c->name,
                           hs_cluster_gpu(c, 0)->name, hs_cluster_gpu(c, g)->name);
    if (!(x = calloc(1, sizeof *x))) return hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
    x->m = *m;
    x->c = c;
    x->o = *o;
    x->n = n;
    x->encdec = m->encoder_layers > 0;
    x->cap = hs_cluster_gpu(c, 0)->mem_bytes * o->mem_util;
    for (int node = 0; node < c->n_nodes; node++) {
        int cnt = 0;
        for (int g = 0; g < n; g++) cnt += c->gpu_node[g] == node;
        if (cnt > x->node_gpus) x->node_gpus = cnt;
    }
    x->pin.max = prompt->max;
    if (!(x->pin.p = malloc(((size_t)prompt->max + 1) * sizeof *x->pin.p))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
        goto fail;
    }
    memcpy(x->pin.p, prompt->p, ((size_t)prompt->max + 1) * sizeof *x->pin.p);
    for (int32_t s = 1; s <= prompt->max; s++) {
        x->pin_mean += s * prompt->p[s];
        x->pin_sq += (double)s * s * prompt->p[s];
        x->pin_tri += (double)s * (s + 1) / 2 * prompt->p[s];
        if (prompt->p[s] > 0) x->pin_max = s;
    }
    /* Decoding iterations: D = S - 1 for decoder-only models (the encoding
     * pass samples the first token), D = S for encoder-decoder ones. */
    {
        int shift = x->encdec ? 0 : 1;
        x->dec.max = output->max - shift;
        if (!(x->dec.p = calloc((size_t)x->dec.max + 1, sizeof *x->dec.p))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
            goto fail;
        }
        for (int32_t s = 1; s <= output->max; s++) x->dec.p[s - shift] += output->p[s];
        for (int32_t dd = 0; dd <= x->dec.max; dd++) {
            x->d_mean += dd * x->dec.p[dd];
            x->d_tri += (double)dd * (dd + 1) / 2 * x->dec.p[dd];
        }
        x->d_p99 = hs_exegpt_dist_quantile(output, 0.99) - shift;
        /* E[sum_{j=1..D} (S + j)^2] / E[D], S and D independent */
        if (x->d_mean > 0) {
            double d6 = 0;
            for (int32_t dd = 0; dd <= x->dec.max; dd++)
                d6 += (double)dd * (dd + 1) * (2.0 * dd + 1) / 6 * x->dec.p[dd];
            x->ctx_sq = (x->pin_sq * x->d_mean + x->pin_mean * 2 * x->d_tri + d6) / x->d_mean;
        }
    }
    x->r_dec = hs_model_dec_ratio(m);
    x->f_kv = hs_model_cross_kv_ratio(m);
    x->kv_full = m->layers * hs_model_kv_bytes_token_layer(m, 1, o->kv_bits);
    x->w_total = hs_model_params(m) * hs_weight_bytes_per_param(o->bits);
    nd = (size_t)x->dec.max + 2;
    x->se = calloc((size_t)n, sizeof *x->se);
    x->sd = calloc((size_t)n, sizeof *x->sd);
    x->s_b = calloc(8 * nd, sizeof *x->s_b);
    if (!x->se || !x->sd || !x->s_b) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
        goto fail;
    }
    x->s_ctx = x->s_b + nd;
    x->s_cnt = x->s_ctx + nd;
    x->s_sumk = x->s_cnt + nd;
    x->s_td = x->s_sumk + nd;
    x->s_tl = x->s_td + nd;
    x->s_f = x->s_tl + nd;
    x->sv = x->s_f + nd;
    survival(&x->dec, x->sv);
    *out = x;
    return 0;
fail:
    hs_exegpt_destroy(x);
    return rc;
}

int hs_exegpt_gpus(const hs_exegpt *x) { return x->n; }
int hs_exegpt_node_gpus(const hs_exegpt *x) { return x->node_gpus; }
int hs_exegpt_max_nd(const hs_exegpt *x) { return x->dec.max > 1 ? x->dec.max : 1; }
const hs_model *hs_exegpt_model(const hs_exegpt *x) { return &x->m; }
const hs_cluster *hs_exegpt_cluster(const hs_exegpt *x) { return x->c; }
int32_t hs_exegpt_out_p99(const hs_exegpt *x) { return x->d_p99 + (x->encdec ? 0 : 1); }
int32_t hs_exegpt_max_context(const hs_exegpt *x) { return x->pin_max + x->dec.max + (x->encdec ? 0 : 1); }

int32_t hs_exegpt_batch_tokens(const hs_exegpt *x, int be, int lanes, double adjust)
{
    int per = (be + lanes - 1) / (lanes > 0 ? lanes : 1);
    double t = ceil((1 + adjust) * per * x->pin_mean) + hs_exegpt_max_context(x);
    return t > HS_MAX_PASS_TOKENS ? HS_MAX_PASS_TOKENS : (int32_t)t;
}


void hs_exegpt_engine_cfg(const hs_exegpt *x, const hs_exegpt_cfg *cfg, const hs_exegpt_est *e,
                          double adjust, hs_engine_cfg *ec)
{
    int rra = cfg->policy == HS_EXEGPT_RRA, mml = hs_exegpt_max_context(x);
    ec->gpu_mem_util = x->o.mem_util;
    ec->kv_bits = x->o.kv_bits;
    ec->watermark = 0;               /* ExeGPT keeps no free-block reserve */
    ec->exegpt_be = cfg->be;
    ec->exegpt_nd = rra ? cfg->nd : 1;
    ec->exegpt_bd = e->bd;
    ec->exegpt_adjust = adjust;
    ec->exegpt_prompt_mean = x->pin_mean;
    /* WAA's encoders are an open pipeline (a batch enters stage 0 as soon
     * as it is free): two batches in flight per stage. */
    ec->prefill_lanes = 2;
    /* Contexts never exceed the longest prompt plus the longest output
     * (ExeGPT sizes its caches for them). */
    ec->max_model_len = mml < hs_model_max_context(&x->m) ? mml : hs_model_max_context(&x->m);
    ec->max_batched_tokens = hs_exegpt_batch_tokens(x, cfg->be, e->pp, adjust);
    /* Room for the whole decoding population in one lane's batch. */
    ec->max_num_seqs = (int)fmin(65536, fmax(256, ceil(2 * e->bd / (e->pp > 0 ? e->pp : 1)) + cfg->be));
}

int hs_exegpt_max_be(const hs_exegpt *x)
{
    double free_b = x->n * x->cap - x->w_total;
    double per_q = x->kv_full * (x->pin_mean + 1);
    double b = per_q > 0 ? floor(free_b / per_q) : 1;
    if (!(b >= 1)) return 1;
    return b > 1e6 ? 1000000 : (int)b;
}

/* Builds (once) the per-layer tables of TP degree tp: a three-stage layout
 * of one layer each on the first tp GPUs of a node, so that stage 1 is one
 * bare layer, stage 0 adds the embedding and stage 2 the LM head. */
static int get_tab(hs_exegpt *x, int tp, const tptab **out, hs_err *err)
{
    tptab *t;
    hs_layout l;
    hs_model bare = x->m;
    int rc, node = -1;
    if (tp < 1 || tp > HS_MAX_TP || tp > x->node_gpus || tp > x->n)
        return hs_errf(err, HS_ERANGE, "exegpt: TP degree %d (1..%d: GPUs in one node)", tp,
                       x->node_gpus < HS_MAX_TP ? x->node_gpus : HS_MAX_TP);
    t = &x->tab[tp];
    *out = t;
    if (t->built) return 0;
    memset(&l, 0, sizeof l);
    l.pp = 3;
    l.kv_bits = x->o.kv_bits;
    for (int nn = 0; nn < x->c->n_nodes && node < 0; nn++) {
        int cnt = 0;
        for (int g = 0; g < x->n; g++) cnt += x->c->gpu_node[g] == nn;
        if (cnt >= tp) node = nn;
    }
    for (int s = 0; s < 3; s++) {
        int k = 0;
        l.stage[s].tp = tp;
        l.stage[s].layers = 1;
        l.stage[s].bits = x->o.bits;
        for (int g = 0; g < x->n && k < tp; g++)
            if (x->c->gpu_node[g] == node) l.stage[s].gpus[k++] = g;
    }
    /* Bare layers: r_dec and f_kv are applied here, not by hs_perf_build's
     * encoder-decoder terms (which derive them the same way). */
    bare.encoder_layers = 0;
    if ((rc = hs_perf_build(&t->perf, &x->o.perf, &bare, x->c, &l, x->o.table_tokens,
                            x->o.table_seqs, err))) {
        hs_err_prefix(err, "exegpt: TP %d latency tables: ", tp);
        return rc;
    }
    t->built = 1;
    return 0;
}

/* Table value at a real argument, ns: linear between entries; a pass of
 * less than one token or sequence costs as much as one (weights are read
 * whole); beyond the table, the slope of its last eighth. */
static double lin(const double *a, int max, double v)
{
    int i, k;
    if (!(v > 0)) return 0;
    if (v <= 1) return a[1];
    if (v >= max) {
        k = max - (max / 8 > 0 ? max / 8 : 1);
        return a[max] + (a[max] - a[k]) / (max - k) * (v - max);
    }
    i = (int)v;
    return a[i] + (v - i) * (a[i + 1] - a[i]);
}

static double lay_ns(const tptab *t, double tok)
{
    const hs_perf_stage *s = &t->perf.stage[1];
    return lin(s->dense, s->max_tokens, tok);
}

static double emb_ns(const tptab *t, double tok)
{
    const hs_perf_stage *s0 = &t->perf.stage[0], *s1 = &t->perf.stage[1];
    double v = lin(s0->dense, s0->max_tokens, tok) - lin(s1->dense, s1->max_tokens, tok);
    return v > 0 ? v : 0;
}

static double head_ns(const tptab *t, double seqs)
{
    const hs_perf_stage *s = &t->perf.stage[2];
    return lin(s->head, s->max_seqs, seqs);
}

/* Encoding b prompts (a micro-batch) on one stage, s. */
static double enc_stage_s(const hs_exegpt *x, const stg *s, double b)
{
    const tptab *t = s->tab;
    const hs_perf_stage *a = &t->perf.stage[1];
    double tok = b * x->pin_mean, ns = 0;
    if (!(b > 0)) return 0;
    if (!x->encdec) {
        ns += s->dec * (lay_ns(t, tok) + a->pre_fixed + a->pre_self * b * x->pin_tri + a->pre_tok * tok);
        if (s->last) ns += head_ns(t, b);
    } else {
        ns += s->enc * (lay_ns(t, tok) + a->pre_fixed + a->pre_cross * b * x->pin_sq + a->pre_tok * tok);
        ns += s->dec * x->f_kv * lay_ns(t, tok);
    }
    if (s->first) ns += emb_ns(t, tok) + t->perf.step_overhead + t->perf.step_seq * b + t->perf.step_tok * tok;
    return ns * 1e-9 * (1 + x->o.enc_slack);
}

/* One decoding step of b sequences holding ctx context tokens in all, s. */
static double dec_stage_s(const hs_exegpt *x, const stg *s, double b, double ctx)
{
    const tptab *t = s->tab;
    const hs_perf_stage *a = &t->perf.stage[1];
    double twice = x->encdec ? 2 : 1, ns;
    if (!(b > 0)) return 0;
    ns = s->dec * (x->r_dec * lay_ns(t, b) + twice * (a->dec_fixed + a->dec_seq * b) +
                   a->dec_ctx * ctx);
    if (s->last) ns += head_ns(t, b);
    if (s->first) ns += emb_ns(t, b) + t->perf.step_overhead + (t->perf.step_seq + t->perf.step_tok) * b;
    return ns * 1e-9;
}

/* Activations of `tok` tokens from stage i to stage j, s. */
static double send_s(const hs_exegpt *x, const stg *from, const stg *to, double tok)
{
    double bw, lat;
    if (from->g1 == to->g0) return 0;
    bw = hs_cluster_bw(x->c, from->g1, to->g0) * x->o.perf.link_eff;
    lat = hs_cluster_lat(x->c, from->g1, to->g0);
    return lat + tok * x->m.hidden * 2.0 / bw;
}

/* Lays out GPUs [g_lo, g_hi) as stages: up to k TP groups of t GPUs inside
 * one node first, then single GPUs.  Returns the stage
 * count; *formed = TP groups made. */
static int make_stages(hs_exegpt *x, stg *st, int g_lo, int g_hi, int t, int k, int enc, int dec,
                       int head, int *formed, hs_err *err)
{
    int p = 0, g = g_lo, made = 0, rc;
    while (g < g_hi) {
        int w = 1;
        if (t > 1 && made < k && g + t <= g_hi && x->c->gpu_node[g] == x->c->gpu_node[g + t - 1]) {
            w = t;
            made++;
        }
        memset(&st[p], 0, sizeof st[p]);
        st[p].tp = w;
        st[p].g0 = g;
        st[p].g1 = g + w - 1;
        if ((rc = get_tab(x, w, &st[p].tab, err))) return rc;
        g += w;
        p++;
    }
    /* Layers in proportion to the stage's GPUs, so every GPU holds about
     * E/N and D/N layers as RRA prescribes, TP groups included (an even
     * split per stage would leave a TP group idle half the time behind
     * single-GPU stages holding more layers, and make partial TP lengthen
     * the pipeline's critical path instead of shortening it).  Cumulative
     * rounding keeps the split deterministic and exact. */
    {
        int cum = 0, pe = 0, pd = 0, width = g_hi - g_lo;
        for (int i = 0; i < p; i++) {
            int ce, cd;
            cum += st[i].tp;
            ce = (int)floor((double)enc * cum / width + 0.5);
            cd = (int)floor((double)dec * cum / width + 0.5);
            st[i].enc = ce - pe;
            st[i].dec = cd - pd;
            pe = ce;
            pd = cd;
        }
    }
    st[0].first = 1;
    st[p - 1].last = head;
    *formed = made;
    return p;
}

/* Capacity of a side for TP groups of t. */
static int group_cap(const hs_exegpt *x, int g_lo, int g_hi, int t)
{
    int g = g_lo, n = 0;
    if (t <= 1) return 0;
    while (g + t <= g_hi) {
        if (x->c->gpu_node[g] == x->c->gpu_node[g + t - 1]) {
            n++;
            g += t;
        } else {
            g++;
        }
    }
    return n;
}

/* Per-GPU memory of a stage holding kv_tok tokens of KV exactly, bytes. */
static double stage_mem_kv(const hs_exegpt *x, const stg *s, double act_tok, double act_seqs,
                           double kv_tok)
{
    hs_stage_mem sm;
    int at = act_tok > 1e9 ? 1000000000 : (int)ceil(act_tok);
    int as = act_seqs > 1e9 ? 1000000000 : (int)ceil(act_seqs);
    hs_model_stage_mem_enc(&x->m, s->dec, s->enc, s->first, s->last, s->tp, x->o.bits, x->o.kv_bits,
                           at > 0 ? at : 1, as > 0 ? as : 1, &sm);
    return sm.weights + sm.activation + kv_tok * sm.kv_per_token;
}

/* The same for an expected kv_tok tokens, with kv_margin to spare. */
static double stage_mem(const hs_exegpt *x, const stg *s, double act_tok, double act_seqs,
                        double kv_tok)
{
    return stage_mem_kv(x, s, act_tok, act_seqs, kv_tok / (1 - x->o.kv_margin));
}

/* KV tokens a WAA decode replica provisions for a population of B queries
 * over `lanes` lanes, each holding 1/lanes of the blocks: per lane, mean
 * plus kv_z standard deviations.  Members join a lane as a Poisson stream
 * and stay D iterations (M/G/inf), so a lane's KV is compound Poisson:
 * mean (B/lanes) E_t[ctx] and variance (B/lanes) E_t[ctx^2], E_t the time
 * average over a member's life.  The fluctuation matters: planned at its
 * mean, a lane of a few hundred long-context members overflows often and
 * preempts in cascades (GPT-3 39B, task T, 5 decode lanes). */
static double waa_kv_tokens(const hs_exegpt *x, double B, int lanes, double ctxq)
{
    double b = B / lanes;
    return lanes * (b * ctxq + x->o.kv_z * sqrt(b * x->ctx_sq));
}

/* The largest B whose waa_kv_tokens fits `tokens`: the root of
 * ctxq u^2 + z sqrt(E_t[ctx^2]) u = tokens / lanes in u = sqrt(B / lanes). */
static double waa_max_pop(const hs_exegpt *x, double tokens, int lanes, double ctxq)
{
    double c = tokens / lanes, zs = x->o.kv_z * sqrt(x->ctx_sq), u;
    if (!(c > 0) || !(ctxq > 0)) return 0;
    u = (-zs + sqrt(zs * zs + 4 * ctxq * c)) / (2 * ctxq);
    return lanes * u * u;
}

/* One pass through the p stages (compute plus sends of tok tokens); *mx
 * receives the slowest stage or send. */
static double one_pass(const hs_exegpt *x, const stg *st, int p, const double *ts, double tok,
                       double *mx)
{
    double pass = 0;
    *mx = 0;
    for (int i = 0; i < p; i++) {
        double sd = i + 1 < p ? send_s(x, &st[i], &st[i + 1], tok) : 0;
        if (ts[i] > *mx) *mx = ts[i];
        if (sd > *mx) *mx = sd;
        pass += ts[i] + sd;
    }
    return pass;
}

/* Pipeline period of one iteration with m micro-batches: the slowest stage
 * serves all m, and a micro-batch needs a full pass before its next step. */
static double ring_period(const hs_exegpt *x, const stg *st, int p, double m, const double *ts,
                          double tok)
{
    double mx, pass = one_pass(x, st, p, ts, tok, &mx);
    if (p > 1) pass += send_s(x, &st[p - 1], &st[0], 0); /* the sampled token goes round */
    return fmax(m * mx, pass);
}

/* Fill and drain of m micro-batches through the stages. */
static double fill_drain(const hs_exegpt *x, const stg *st, int p, double m, const double *ts,
                         double tok)
{
    double mx, pass = one_pass(x, st, p, ts, tok, &mx);
    return pass + (m - 1) * mx;
}

/* p99 of W + f(D) with W uniform on [0, wait], over the decoding
 * distribution (f[D] for D = 0..max). */
static double p99_with_wait(const hs_exegpt *x, const double *f, double wait)
{
    double lo = INFINITY, hi = 0;
    for (int32_t dd = 0; dd <= x->dec.max; dd++) {
        if (x->dec.p[dd] == 0) continue;
        if (f[dd] < lo) lo = f[dd];
        if (f[dd] + wait > hi) hi = f[dd] + wait;
    }
    if (!(wait > 0)) {
        /* The p99 of f itself (f is non-decreasing in D here). */
        double c = 0;
        for (int32_t dd = 0; dd <= x->dec.max; dd++) {
            c += x->dec.p[dd];
            if (c >= 0.99 - 1e-12) return f[dd];
        }
        return hi;
    }
    for (int it = 0; it < 60; it++) {
        double mid = (lo + hi) / 2, cdf = 0;
        for (int32_t dd = 0; dd <= x->dec.max; dd++) {
            double q;
            if (x->dec.p[dd] == 0) continue;
            q = (mid - f[dd]) / wait;
            cdf += x->dec.p[dd] * (q < 0 ? 0 : q > 1 ? 1 : q);
        }
        if (cdf >= 0.99) hi = mid;
        else lo = mid;
    }
    return hi;
}

#define MAXP 256  /* stage-time scratch on the stack; more stages use the heap */

static int est_rra(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_exegpt_est *e, hs_err *err)
{
    stg *st = x->se;
    int k = cfg->tp > 1 ? cfg->tp_groups : 0, formed, p, nd = cfg->nd;
    double ts_stack[MAXP], *ts = ts_stack, m_e, b_e, tE, full = 0, peak = 0, act_tok, act_seq;
    double *b = x->s_b, *ctx = x->s_ctx, *td = x->s_td, *tl = x->s_tl, *f = x->s_f;
    hs_exegpt_round r;
    p = make_stages(x, st, 0, x->n, cfg->tp, k, x->m.encoder_layers, x->m.layers, 1, &formed, err);
    if (p < 0) return p;
    if (p > MAXP && !(ts = malloc((size_t)p * sizeof *ts)))
        return hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
    e->pp = p;
    e->tp_groups = formed;
    /* N_D beyond the longest query changes nothing: every query then
     * finishes within its first phase. */
    if (nd > hs_exegpt_max_nd(x)) nd = hs_exegpt_max_nd(x);
    round_core(&x->dec, x->sv, x->pin_mean, nd, cfg->be, x->o.bd_mode, b, ctx, x->s_cnt, x->s_sumk, &r);
    e->bd = r.bd;
    /* Encoding phase. */
    m_e = fmin(p, fmax(1, cfg->be));
    b_e = cfg->be / m_e;
    for (int i = 0; i < p; i++) ts[i] = enc_stage_s(x, &st[i], b_e);
    tE = fill_drain(x, st, p, m_e, ts, b_e * x->pin_mean);
    act_tok = ceil(b_e) * x->pin_mean * (1 + x->o.enc_slack);
    act_seq = ceil(b_e);
    /* Decoding iterations.  For the round (throughput), an expected batch
     * below one sequence stands for an iteration that happens with that
     * probability (td); on a tagged query's latency path the iteration
     * always happens, with the query itself in it (tl). */
    td[0] = tl[0] = 0;
    for (int u = 1; u <= nd; u++) {
        double m, bb, t;
        if (!(b[u] > 0)) {
            td[u] = tl[u] = 0;
            continue;
        }
        bb = fmax(b[u], 1);
        m = fmin(p, bb);
        for (int i = 0; i < p; i++) ts[i] = dec_stage_s(x, &st[i], bb / m, ctx[u] / b[u] * bb / m);
        t = ring_period(x, st, p, m, ts, bb / m);
        tl[u] = t;
        td[u] = b[u] < 1 ? t * b[u] : t;
        full += td[u];
        if (bb / m > act_tok) act_tok = bb / m;
        if (bb / m > act_seq) act_seq = bb / m;
    }
    e->t_enc = tE;
    e->t_cycle = tE + full;
    e->t_dec = nd > 0 ? full / nd : 0;
    e->thr = e->t_cycle > 0 ? cfg->be / e->t_cycle : 0;
    /* Latency of a query with D iterations: every iteration of its phases
     * runs with the query in it (tl, turned into a prefix sum here). */
    for (int u = 1; u <= nd; u++) tl[u] += tl[u - 1];
    for (int32_t dd = 0; dd <= x->dec.max; dd++) {
        int kk = dd == 0 ? 1 : (dd + nd - 1) / nd, uu = dd == 0 ? 0 : 1 + (dd - 1) % nd;
        f[dd] = kk * tE + (kk - 1) * tl[nd] + tl[uu];
    }
    e->lat_b = f[x->d_p99 < 0 ? 0 : x->d_p99];
    e->lat_a = p99_with_wait(x, f, e->t_cycle);
    /* Memory: the round's peak context stays resident on every stage. */
    for (int i = 0; i < p; i++) {
        double mem = stage_mem(x, &st[i], act_tok, act_seq, r.ctx_peak);
        if (mem > peak) peak = mem;
    }
    e->mem_peak = peak;
    e->fit = peak <= x->cap ? HS_EXEGPT_FITS : HS_EXEGPT_OOM;
    if (ts != ts_stack) free(ts);
    return 0;
}

/* Whole-model work of one WAA period on one GPU (tp 1): encoding B_E
 * prompts, and one decoding iteration of B_D = B_E E[D] sequences. */
static void waa_split_inputs(hs_exegpt *x, const tptab *t1, double be, double *ce, double *cd,
                             double *me, double *md)
{
    stg whole;
    double bd = be * x->d_mean, ctxq = x->d_mean > 0 ? x->pin_mean + x->d_tri / x->d_mean : 0;
    memset(&whole, 0, sizeof whole);
    whole.tp = 1;
    whole.tab = t1;
    whole.first = 1;
    whole.enc = x->m.encoder_layers;
    whole.dec = x->encdec ? 0 : x->m.layers;
    whole.last = !x->encdec;
    *ce = enc_stage_s(x, &whole, be);
    *me = stage_mem(x, &whole, be * x->pin_mean, be, x->encdec ? 0 : 2 * be * x->pin_mean);
    whole.enc = 0;
    whole.dec = x->m.layers;
    whole.last = 1;
    *cd = dec_stage_s(x, &whole, bd, bd * ctxq);
    if (x->encdec) *cd += x->m.layers * x->f_kv * lay_ns(t1, be * x->pin_mean) * 1e-9;
    *md = stage_mem(x, &whole, bd, bd, bd * ctxq);
}

/* Hand-over time of one encoded batch, s. */
static double waa_xfer(const hs_exegpt *x, const stg *se, int pe, const stg *sd, int pdn, double be)
{
    double worst = 0, eff = x->o.perf.link_eff, tok = be * x->pin_mean;
    if (x->encdec) {
        /* The encoder output, from the last encode stage to every decode stage. */
        const stg *src = &se[pe - 1];
        double t = 0, bytes = tok * x->m.hidden * 2.0;
        for (int j = 0; j < pdn; j++) {
            double bw = hs_cluster_bw(x->c, src->g1, sd[j].g0) * eff;
            t += hs_cluster_lat(x->c, src->g1, sd[j].g0) + bytes / bw;
        }
        return t;
    }
    /* KV of layer l moves from the encode stage holding it to the decode
     * stage holding it; each rank sends its shard, links serve in turn. */
    {
        double kvl = hs_model_kv_bytes_token_layer(&x->m, 1, x->o.kv_bits) * tok;
        int a0 = 0, b0;
        for (int i = 0; i < pe; i++) {
            double t = 0;
            int a1 = a0 + se[i].dec;
            b0 = 0;
            for (int j = 0; j < pdn; j++) {
                int b1 = b0 + sd[j].dec, ov = (a1 < b1 ? a1 : b1) - (a0 > b0 ? a0 : b0);
                if (ov > 0) {
                    double bw = hs_cluster_bw(x->c, se[i].g0, sd[j].g0) * eff;
                    t += hs_cluster_lat(x->c, se[i].g0, sd[j].g0) + kvl * ov / se[i].tp / bw;
                }
                b0 = b1;
            }
            if (t > worst) worst = t;
            a0 = a1;
        }
        /* The receiving side: each decode rank takes its shard from every source. */
        b0 = 0;
        for (int j = 0; j < pdn; j++) {
            double t = 0;
            int b1 = b0 + sd[j].dec;
            a0 = 0;
            for (int i = 0; i < pe; i++) {
                int a1 = a0 + se[i].dec, ov = (a1 < b1 ? a1 : b1) - (a0 > b0 ? a0 : b0);
                if (ov > 0) {
                    double bw = hs_cluster_bw(x->c, se[i].g0, sd[j].g0) * eff;
                    t += kvl * ov / sd[j].tp / bw;
                }
                a0 = a1;
            }
            if (t > worst) worst = t;
            b0 = b1;
        }
    }
    return worst;
}

/* Decoding iteration of a population of B sequences, s. */
static double waa_tau_d(const hs_exegpt *x, const stg *sd, int pdn, double bm, double B,
                        double ctxq, double *ts)
{
    double bb = fmax(B, 1), m = fmin(bm, bb), t;
    for (int j = 0; j < pdn; j++) ts[j] = dec_stage_s(x, &sd[j], bb / m, ctxq * bb / m);
    t = ring_period(x, sd, pdn, m, ts, bb / m);
    return B < 1 ? t * fmax(B, 0) : t;
}

int hs_exegpt_waa_split(hs_exegpt *x, int policy, int be, int *n_enc, hs_err *err)
{
    const tptab *t1;
    double ce, cd, me, md, a, sum;
    int rc, ne;
    *n_enc = 0;
    if (x->n < 2 || (policy != HS_EXEGPT_WAA_C && policy != HS_EXEGPT_WAA_M) || be < 1)
        return hs_errf(err, HS_EINVAL, "exegpt: WAA split of %d GPUs, policy %d, B_E %d", x->n,
                       policy, be);
    if ((rc = get_tab(x, 1, &t1, err))) return rc;
    waa_split_inputs(x, t1, be, &ce, &cd, &me, &md);
    a = policy == HS_EXEGPT_WAA_C ? ce : me;
    sum = policy == HS_EXEGPT_WAA_C ? ce + cd : me + md;
    ne = (int)ceil(x->n * a / sum - 1e-9);
    *n_enc = ne < 1 ? 1 : ne > x->n - 1 ? x->n - 1 : ne;
    return 0;
}

static int est_waa(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_exegpt_est *e, hs_err *err)
{
    stg *se = x->se, *sd = x->sd;
    double ts_stack[MAXP], *ts = ts_stack;
    double m_e, b_e, tauE, lE, tauX, period, lam, ctxq, rho = 0, bm, lo, hi, B, tauD, peak = 0;
    double *f = x->s_f;
    int n = x->n, ne, pe, pdn, k = cfg->tp > 1 ? cfg->tp_groups : 0, kd, ke, fe, fd, rc;
    if (n < 2) {
        e->fit = HS_EXEGPT_NO_LAYOUT;
        return 0;
    }
    if ((rc = hs_exegpt_waa_split(x, cfg->policy, cfg->be, &ne, err))) return rc;
    e->n_enc = ne;
    e->n_dec = n - ne;
    /* TP groups: decode side first. */
    kd = group_cap(x, ne, n, cfg->tp);
    if (kd > k) kd = k;
    ke = group_cap(x, 0, ne, cfg->tp);
    if (ke > k - kd) ke = k - kd;
    pe = make_stages(x, se, 0, ne, cfg->tp, ke, x->m.encoder_layers, x->encdec ? 0 : x->m.layers,
                     !x->encdec, &fe, err);
    if (pe < 0) return pe;
    pdn = make_stages(x, sd, ne, n, cfg->tp, kd, 0, x->m.layers, 1, &fd, err);
    if (pdn < 0) return pdn;
    e->pp = pe;
    e->pp_dec = pdn;
    e->tp_groups = fe + fd;
    if ((pe > MAXP || pdn > MAXP) &&
        !(ts = malloc((size_t)(pe > pdn ? pe : pdn) * sizeof *ts)))
        return hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
    /* Encoders: batches of B_E in m_E micro-batches. */
    m_e = fmin(pe, fmax(1, cfg->be));
    b_e = cfg->be / m_e;
    for (int i = 0; i < pe; i++) ts[i] = enc_stage_s(x, &se[i], b_e);
    lE = fill_drain(x, se, pe, m_e, ts, b_e * x->pin_mean);
    tauE = 0;
    for (int i = 0; i < pe; i++) {
        double sdn = i + 1 < pe ? send_s(x, &se[i], &se[i + 1], b_e * x->pin_mean) : 0;
        tauE = fmax(tauE, fmax(ts[i], sdn));
    }
    tauE *= m_e;
    tauX = waa_xfer(x, se, pe, sd, pdn, cfg->be);
    period = fmax(tauE, tauX);
    lam = cfg->be / period;
    e->t_enc = lE;
    e->t_xfer = tauX;
    e->t_cycle = period;
    e->thr = lam;
    /* Encoder-decoder: the cross K/V projection of each new batch occupies
     * the decode stages for a fraction rho of the time. */
    if (x->encdec)
        for (int j = 0; j < pdn; j++)
            rho = fmax(rho, sd[j].dec * x->f_kv * lay_ns(sd[j].tab, cfg->be * x->pin_mean) * 1e-9 / period);
    bm = cfg->bm > 0 ? fmin(cfg->bm, pdn) : pdn;
    ctxq = x->d_mean > 0 ? x->pin_mean + x->d_tri / x->d_mean : x->pin_mean;
    /* Decoder population B = lam E[D] tau_D(B) / (1 - rho), below the
     * memory cap of the decode stages. */
    hi = INFINITY;
    for (int j = 0; j < pdn; j++) {
        double w = stage_mem_kv(x, &sd[j], 1, 1, 0), per = stage_mem_kv(x, &sd[j], 1, 1, 1) - w;
        double c = per > 0 ? waa_max_pop(x, (x->cap - w) / per, pdn, ctxq) : INFINITY;
        if (c < hi) hi = c;
    }
    hi = fmin(hi, 1e9);
    lo = 0;
    B = hi;
    if (!(hi >= 1)) {
        /* Not one sequence fits next to the weights. */
        e->fit = HS_EXEGPT_OOM;
        B = 0;
    } else if (x->d_mean <= 0) {
        B = 0;
    } else if (rho >= 1 || lam * x->d_mean * waa_tau_d(x, sd, pdn, bm, hi, ctxq, ts) / (1 - rho) > hi) {
        e->fit = HS_EXEGPT_SLOW_DECODER;
        B = hi;
    } else {
        for (int it = 0; it < 60; it++) {
            double mid = (lo + hi) / 2;
            if (lam * x->d_mean * waa_tau_d(x, sd, pdn, bm, mid, ctxq, ts) / (1 - rho) > mid) lo = mid;
            else hi = mid;
        }
        B = hi;
    }
    tauD = waa_tau_d(x, sd, pdn, bm, fmax(B, 1), ctxq, ts) / (1 - fmin(rho, 0.999));
    e->bd = B;
    e->bm = (int)fmin(bm, fmax(1, ceil(B)));
    e->t_dec = tauD;
    for (int32_t dd = 0; dd <= x->dec.max; dd++)
        f[dd] = lE + tauX + (dd > 0 ? tauD / fmin(bm, fmax(B, 1)) + dd * tauD : 0);
    e->lat_b = f[x->d_p99 < 0 ? 0 : x->d_p99];
    e->lat_a = p99_with_wait(x, f, period);
    /* Memory: encode stages hold two batches of prompt KV (decoder-only) or
     * of encoder output (last encode stage, encoder-decoder). */
    for (int i = 0; i < pe; i++) {
        double mem = stage_mem(x, &se[i], ceil(b_e) * x->pin_mean * (1 + x->o.enc_slack), ceil(b_e),
                               x->encdec ? 0 : 2.0 * cfg->be * x->pin_mean);
        if (x->encdec && se[i].last)
            mem += 2.0 * cfg->be * x->pin_mean * x->m.hidden * 2.0;
        if (mem > peak) peak = mem;
    }
    {
        double mb = fmax(B, 1) / fmin(bm, fmax(B, 1));
        double act = x->encdec ? fmax(mb, cfg->be * x->pin_mean) : mb;
        for (int j = 0; j < pdn; j++) {
            double mem = stage_mem_kv(x, &sd[j], act, mb, waa_kv_tokens(x, B, pdn, ctxq));
            if (mem > peak) peak = mem;
        }
    }
    e->mem_peak = peak;
    if (e->fit == HS_EXEGPT_FITS && peak > x->cap) e->fit = HS_EXEGPT_OOM;
    if (ts != ts_stack) free(ts);
    return 0;
}

/* DeepSpeed-Inference-style hybrid micro-batching (papers/exegpt.txt
 * Sec. 2): a static batch of B queries, prompts padded to the longest, run
 * for the longest output with no early termination; the prompt phase is cut
 * into m_enc micro-batches and the decoding into m_dec (fewer: larger
 * decode micro-batches, more weight reuse) on one pipeline over all GPUs,
 * laid out as RRA's (partial TP included).  Analytic, from the same stage
 * times as the estimator: fill and drain of the prompt micro-batches, then
 * one ring period per decoding iteration.  Throughput is B per batch time;
 * the latency bound applies to the batch (every query waits for the
 * longest).  Returns 0 (*fits says whether weights, the batch's KV for
 * its whole context and activations fit) or an error. */
/* E[max of b draws] of distribution d, rounded to a length. */
static int32_t emax(const hs_exegpt_dist *d, int b)
{
    double f = 0, prev = 0, e = 0;
    for (int32_t s = 0; s <= d->max; s++) {
        double fb;
        f += d->p[s];
        fb = pow(fmin(f, 1), b);
        e += s * (fb - prev);
        prev = fb;
    }
    return (int32_t)lround(e);
}

/* One DSI batch with prompts padded to pad tokens and dlen decoding
 * iterations, s. */
static double dsi_batch(hs_exegpt *x, stg *st, int p, double *ts, int batch, int m_enc, int m_dec,
                        int32_t pad, int32_t dlen)
{
    double save[3] = {x->pin_mean, x->pin_sq, x->pin_tri}, total, b = (double)batch / m_enc;
    x->pin_mean = pad;
    x->pin_sq = (double)pad * pad;
    x->pin_tri = (double)pad * (pad + 1) / 2;
    for (int i = 0; i < p; i++) ts[i] = enc_stage_s(x, &st[i], b);
    total = fill_drain(x, st, p, m_enc, ts, b * pad);
    x->pin_mean = save[0];
    x->pin_sq = save[1];
    x->pin_tri = save[2];
    b = (double)batch / m_dec;
    for (int32_t u = 1; u <= dlen; u++) {
        for (int i = 0; i < p; i++) ts[i] = dec_stage_s(x, &st[i], b, b * ((double)pad + u));
        total += ring_period(x, st, p, m_dec, ts, b);
    }
    return total;
}

int hs_exegpt_dsi(hs_exegpt *x, int tp, int groups, int batch, int m_enc, int m_dec, double *thr,
                  double *lat, int *fits, hs_err *err)
{
    stg *st = x->se;
    double ts_stack[MAXP], *ts = ts_stack, peak = 0;
    int k = tp > 1 ? groups : 0, formed, p;
    *thr = *lat = 0;
    *fits = 0;
    if (batch < 1 || m_enc < 1 || m_dec < 1 || m_enc > batch || m_dec > batch || tp < 1)
        return hs_errf(err, HS_EINVAL, "exegpt: DSI batch %d, micro-batches %d/%d, tp %d", batch, m_enc,
                       m_dec, tp);
    if (tp > x->node_gpus || tp > x->n || tp > HS_MAX_TP)
        return hs_errf(err, HS_ERANGE, "exegpt: TP degree %d (at most %d: GPUs in one node)", tp,
                       x->node_gpus < x->n ? x->node_gpus : x->n);
    p = make_stages(x, st, 0, x->n, tp, k, x->m.encoder_layers, x->m.layers, 1, &formed, err);
    if (p < 0) return p;
    if (p > MAXP && !(ts = malloc((size_t)p * sizeof *ts)))
        return hs_errf(err, HS_ENOMEM, "out of memory (exegpt)");
    /* The latency bound holds for the longest prompt and output; a batch
     * of real queries lasts until its own longest (expected maxima of
     * `batch` draws), which sets the throughput. */
    *lat = dsi_batch(x, st, p, ts, batch, m_enc, m_dec, x->pin_max, x->dec.max);
    {
        double t = dsi_batch(x, st, p, ts, batch, m_enc, m_dec, emax(&x->pin, batch), emax(&x->dec, batch));
        *thr = t > 0 ? batch / t : 0;
    }
    for (int i = 0; i < p; i++) {
        double act = fmax((double)batch / m_enc * x->pin_max, (double)batch / m_dec);
        double mem = stage_mem(x, &st[i], act, batch, (double)batch * (x->pin_max + x->dec.max));
        if (mem > peak) peak = mem;
    }
    if (ts != ts_stack) free(ts);
    *fits = peak <= x->cap;
    return 0;
}

int hs_exegpt_estimate(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_exegpt_est *e, hs_err *err)
{
    memset(e, 0, sizeof *e);
    e->mem_cap = x->cap;
    if (cfg->tp > x->node_gpus || cfg->tp > x->n || cfg->tp > HS_MAX_TP)
        return hs_errf(err, HS_ERANGE, "exegpt: TP degree %d (at most %d: GPUs in one node)", cfg->tp,
                       x->node_gpus < x->n ? x->node_gpus : x->n);
    if (cfg->policy < 0 || cfg->policy >= HS_EXEGPT_NPOLICY || cfg->tp < 1 || cfg->tp_groups < 0 ||
        cfg->be < 1 || (cfg->policy == HS_EXEGPT_RRA && cfg->nd < 1) || cfg->bm < 0)
        return hs_errf(err, HS_EINVAL, "exegpt: schedule out of range (policy %d, tp %d, groups %d, "
                       "B_E %d, N_D %d, B_m %d)", cfg->policy, cfg->tp, cfg->tp_groups, cfg->be,
                       cfg->nd, cfg->bm);
    return cfg->policy == HS_EXEGPT_RRA ? est_rra(x, cfg, e, err) : est_waa(x, cfg, e, err);
}

int hs_exegpt_layouts(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_layout *enc, hs_layout *dec,
                      hs_err *err)
{
    hs_exegpt_est e;
    int rc, p[2], sides;
    const stg *sv[2] = {x->se, x->sd};
    hs_layout *lv[2] = {enc, dec};
    memset(enc, 0, sizeof *enc);
    memset(dec, 0, sizeof *dec);
    /* Estimating lays the stages out in the scratch arrays. */
    if ((rc = hs_exegpt_estimate(x, cfg, &e, err))) return rc;
    if (cfg->policy != HS_EXEGPT_RRA && e.fit == HS_EXEGPT_NO_LAYOUT)
        return hs_errf(err, HS_EINVAL, "exegpt: WAA needs at least two GPUs");
    p[0] = e.pp;
    p[1] = e.pp_dec;
    sides = cfg->policy == HS_EXEGPT_RRA ? 1 : 2;
    for (int s = 0; s < sides; s++) {
        if (p[s] > HS_MAX_PP)
            return hs_errf(err, HS_ERANGE, "exegpt: %d stages (at most %d)", p[s], HS_MAX_PP);
        lv[s]->pp = p[s];
        lv[s]->kv_bits = x->o.kv_bits;
        lv[s]->enc_set = 1;
        for (int i = 0; i < p[s]; i++) {
            const stg *st = &sv[s][i];
            lv[s]->stage[i].tp = st->tp;
            lv[s]->stage[i].bits = x->o.bits;
            /* WAA's encoder replica of an encoder-decoder model holds only
             * encoder layers, its decoder only decoder layers */
            lv[s]->stage[i].layers = st->dec;
            lv[s]->stage[i].enc_layers = st->enc;
            for (int g = 0; g < st->tp; g++) lv[s]->stage[i].gpus[g] = st->g0 + g;
        }
    }
    return 0;
}
