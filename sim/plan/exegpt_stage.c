/* exegpt_stage.c - the ExeGPT estimator's hardware side (see exegpt.h and,
 * for the modelling choices, exegpt_est.c):
 *   hs__exegpt_get_tab       per-layer latency tables per TP degree (hs_perf
 *                            of a three-stage, one-layer layout), cached;
 *   lin, lay/emb/head_ns     table values at a real argument, ns;
 *   enc/dec_stage_s, send_s  one stage's encode and decode times and the
 *                            send between stages, s;
 *   hs__exegpt_make_stages   a GPU range as stages (partial TP) with layers
 *                            in proportion to their GPUs; group_cap;
 *   stage_mem(_kv)           per-GPU memory of a stage, bytes;
 *   ring_period, fill_drain  pipeline timing of micro-batches.
 *
 * Invariants (asserted where relied on):
 *   - a table in use is built, has pp = 3 and at least one token and one
 *     sequence (lin reads a[1] .. a[max]), times >= 0 there;
 *   - every stage time, send time and pipeline time is finite and >= 0;
 *     links between distinct GPUs have a finite bandwidth > 0 and a
 *     finite latency >= 0 (hw.h);
 *   - a stage list covers its GPU range in order, each stage a TP group of
 *     t GPUs (first and last on one node) or one GPU, with its TP degree's
 *     table; its encoder and decoder layers sum to the counts asked for,
 *     the first stage holds the embedding and only the last may hold the
 *     head; min(k, group_cap) TP groups are formed;
 *   - memory is finite and >= 0, KV asked for >= 0, kv_margin < 1;
 *   - pipelines have p >= 1 stages and m >= 1 micro-batches. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/exegpt_int.h"

#ifndef NDEBUG
/* Sanity of a built table (for assert): the three stages lin reads. */
static int tab_sane(const hs__exegpt_tab *t)
{
    if (!t->built || t->perf.pp != 3) return 0;
    for (int s = 0; s < 3; s++) {
        const hs_perf_stage *a = &t->perf.stage[s];
        if (a->max_tokens < 1 || !a->dense || !(a->dense[1] >= 0)) return 0;
    }
    return t->perf.stage[2].max_seqs >= 1 && t->perf.stage[2].head &&
           t->perf.stage[2].head[1] >= 0;
}

/* Sanity of a stage list (for assert): see the file's invariants. */
static int stages_sane(const hs_exegpt *x, const hs__exegpt_stg *st, int p, int g_lo, int g_hi,
                       int t, int k, int enc, int dec, int head, int formed)
{
    int g = g_lo, se = 0, sd = 0, groups = 0, cap = hs__exegpt_group_cap(x, g_lo, g_hi, t);
    if (p < 1 || p > g_hi - g_lo) return 0;
    for (int i = 0; i < p; i++) {
        const hs__exegpt_stg *s = &st[i];
        if (s->g0 != g || s->g1 != g + s->tp - 1 || (s->tp != 1 && s->tp != t)) return 0;
        if (x->c->gpu_node[s->g0] != x->c->gpu_node[s->g1]) return 0;
        if (s->tab != &x->tab[s->tp] || !s->tab->built) return 0;
        if (s->enc < 0 || s->dec < 0 || s->first != (i == 0)) return 0;
        if (s->last != (i == p - 1 ? head : 0)) return 0;
        se += s->enc;
        sd += s->dec;
        groups += s->tp > 1;
        g = s->g1 + 1;
    }
    if (k < 0) k = 0;
    return g == g_hi && se == enc && sd == dec && groups == formed && formed == (k < cap ? k : cap);
}
#endif

/* ---- the latency tables --------------------------------------------------------- */

/* Builds (once) the per-layer tables of TP degree tp: a three-stage layout
 * of one layer each on the first tp GPUs of a node, so that stage 1 is one
 * bare layer, stage 0 adds the embedding and stage 2 the LM head. */
int hs__exegpt_get_tab(hs_exegpt *x, int tp, const hs__exegpt_tab **out, hs_err *err)
{
    hs__exegpt_tab *t;
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
    assert(node >= 0); /* tp <= node_gpus: some node has tp of the GPUs */
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
    assert(tab_sane(t));
    return 0;
}

/* Table value at a real argument, ns: linear between entries; a pass of
 * less than one token or sequence costs as much as one (weights are read
 * whole); beyond the table, the slope of its last eighth. */
static double lin(const double *a, int max, double v)
{
    int i, k;
    assert(max >= 1);
    if (!(v > 0)) return 0;
    if (v <= 1) return a[1];
    if (v >= max) {
        k = max - (max / 8 > 0 ? max / 8 : 1);
        return a[max] + (a[max] - a[k]) / (max - k) * (v - max);
    }
    i = (int)v;
    return a[i] + (v - i) * (a[i + 1] - a[i]);
}

double hs__exegpt_lay_ns(const hs__exegpt_tab *t, double tok)
{
    const hs_perf_stage *s = &t->perf.stage[1];
    double v = lin(s->dense, s->max_tokens, tok);
    assert(isfinite(v) && v >= 0);
    return v;
}

static double emb_ns(const hs__exegpt_tab *t, double tok)
{
    const hs_perf_stage *s0 = &t->perf.stage[0], *s1 = &t->perf.stage[1];
    double v = lin(s0->dense, s0->max_tokens, tok) - lin(s1->dense, s1->max_tokens, tok);
    return v > 0 ? v : 0;
}

static double head_ns(const hs__exegpt_tab *t, double seqs)
{
    const hs_perf_stage *s = &t->perf.stage[2];
    return lin(s->head, s->max_seqs, seqs);
}

/* ---- stage times ---------------------------------------------------------------- */

double hs__exegpt_enc_batch_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b, double tok,
                              double pairs)
{
    const hs__exegpt_tab *t = s->tab;
    const hs_perf_stage *a = &t->perf.stage[1];
    double ns = 0;
    if (!(b > 0)) return 0;
    if (!x->encdec) {
        ns += s->dec * (hs__exegpt_lay_ns(t, tok) + a->pre_fixed + a->pre_self * pairs + a->pre_tok * tok);
        if (s->last) ns += head_ns(t, b);
    } else {
        ns += s->enc * (hs__exegpt_lay_ns(t, tok) + a->pre_fixed + a->pre_cross * pairs + a->pre_tok * tok);
        ns += s->dec * x->f_kv * hs__exegpt_lay_ns(t, tok);
    }
    if (s->first) ns += emb_ns(t, tok);
    ns = fmax(ns, (s->enc + s->dec) * a->dispatch_ns); /* the engine's dispatch floor */
    if (s->first) ns += t->perf.step_overhead + t->perf.step_seq * b + t->perf.step_tok * tok;
    assert(isfinite(ns) && ns >= 0);
    return ns * 1e-9 * (1 + x->o.enc_slack);
}

double hs__exegpt_enc_stage_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b)
{
    return hs__exegpt_enc_batch_s(x, s, b, b * x->pin_mean, b * (x->encdec ? x->pin_sq : x->pin_tri));
}

double hs__exegpt_dec_stage_s(const hs_exegpt *x, const hs__exegpt_stg *s, double b, double ctx)
{
    const hs__exegpt_tab *t = s->tab;
    const hs_perf_stage *a = &t->perf.stage[1];
    double twice = x->encdec ? 2 : 1, ns;
    if (!(b > 0)) return 0;
    assert(ctx >= 0);
    ns = s->dec * (x->r_dec * hs__exegpt_lay_ns(t, b) + twice * (a->dec_fixed + a->dec_seq * b) +
                   a->dec_ctx * ctx);
    if (s->last) ns += head_ns(t, b);
    if (s->first) ns += emb_ns(t, b);
    ns = fmax(ns, s->dec * a->dispatch_ns); /* the engine's dispatch floor */
    if (s->first) ns += t->perf.step_overhead + (t->perf.step_seq + t->perf.step_tok) * b;
    assert(isfinite(ns) && ns >= 0);
    return ns * 1e-9;
}

double hs__exegpt_send_s(const hs_exegpt *x, const hs__exegpt_stg *from, const hs__exegpt_stg *to,
                         double tok)
{
    double bw, lat;
    if (from->g1 == to->g0) return 0;
    bw = hs_cluster_bw(x->c, from->g1, to->g0) * x->o.perf.link_eff;
    lat = hs_cluster_lat(x->c, from->g1, to->g0);
    assert(isfinite(bw) && bw > 0 && isfinite(lat) && lat >= 0); /* hw.h: off-diagonal links exist */
    assert(tok >= 0);
    return lat + tok * x->m.hidden * 2.0 / bw;
}

/* ---- stage layouts -------------------------------------------------------------- */

int hs__exegpt_make_stages(hs_exegpt *x, hs__exegpt_stg *st, int g_lo, int g_hi, int t, int k,
                           int enc, int dec, int head, int *formed, hs_err *err)
{
    int p = 0, g = g_lo, made = 0, rc;
    assert(0 <= g_lo && g_lo < g_hi && g_hi <= x->n); /* p >= 1 and st[] holds the stages */
    assert(enc >= 0 && dec >= 0);
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
        if ((rc = hs__exegpt_get_tab(x, w, &st[p].tab, err))) return rc;
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
    assert(stages_sane(x, st, p, g_lo, g_hi, t, k, enc, dec, head, made)); /* every layer once */
    return p;
}

int hs__exegpt_group_cap(const hs_exegpt *x, int g_lo, int g_hi, int t)
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

/* ---- memory --------------------------------------------------------------------- */

double hs__exegpt_stage_mem_kv(const hs_exegpt *x, const hs__exegpt_stg *s, double act_tok,
                               double act_seqs, double kv_tok)
{
    hs_stage_mem sm;
    int at = act_tok > 1e9 ? 1000000000 : (int)ceil(act_tok);
    int as = act_seqs > 1e9 ? 1000000000 : (int)ceil(act_seqs);
    double mem;
    assert(isfinite(kv_tok) && kv_tok >= 0 && !isnan(act_tok) && !isnan(act_seqs));
    hs_model_stage_mem_enc(&x->m, s->dec, s->enc, s->first, s->last, s->tp, x->o.bits, x->o.kv_bits,
                           at > 0 ? at : 1, as > 0 ? as : 1, &sm);
    mem = sm.weights + sm.activation + kv_tok * sm.kv_per_token;
    assert(isfinite(mem) && mem >= 0);
    return mem;
}

double hs__exegpt_stage_mem(const hs_exegpt *x, const hs__exegpt_stg *s, double act_tok,
                            double act_seqs, double kv_tok)
{
    assert(x->o.kv_margin >= 0 && x->o.kv_margin < 1);
    return hs__exegpt_stage_mem_kv(x, s, act_tok, act_seqs, kv_tok / (1 - x->o.kv_margin));
}

/* ---- pipeline timing ------------------------------------------------------------ */

/* One pass through the p stages (compute plus sends of tok tokens); *mx
 * receives the slowest stage or send. */
static double one_pass(const hs_exegpt *x, const hs__exegpt_stg *st, int p, const double *ts,
                       double tok, double *mx)
{
    double pass = 0;
    assert(p >= 1);
    *mx = 0;
    for (int i = 0; i < p; i++) {
        double sd = i + 1 < p ? hs__exegpt_send_s(x, &st[i], &st[i + 1], tok) : 0;
        assert(isfinite(ts[i]) && ts[i] >= 0);
        if (ts[i] > *mx) *mx = ts[i];
        if (sd > *mx) *mx = sd;
        pass += ts[i] + sd;
    }
    return pass;
}

double hs__exegpt_ring_period(const hs_exegpt *x, const hs__exegpt_stg *st, int p, double m,
                              const double *ts, double tok)
{
    double mx, pass = one_pass(x, st, p, ts, tok, &mx);
    assert(m >= 1 && isfinite(m));
    if (p > 1) pass += hs__exegpt_send_s(x, &st[p - 1], &st[0], 0); /* the sampled token goes round */
    return fmax(m * mx, pass);
}

double hs__exegpt_fill_drain(const hs_exegpt *x, const hs__exegpt_stg *st, int p, double m,
                             const double *ts, double tok)
{
    double mx, pass = one_pass(x, st, p, ts, tok, &mx);
    assert(m >= 1 && isfinite(m));
    return pass + (m - 1) * mx;
}
