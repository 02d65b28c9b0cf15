/* perf.c - latency-model registry and hs_perf_build (encoder-decoder terms,
 * engine host cost); see perf.h.  What the builders share is in perf_base.c. */
#include "perf/perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/overhead.h"
#include "perf/qlat.h"

extern const hs_perf_builder hs_perf_roofline;
extern const hs_perf_builder hs_perf_table;
extern const hs_perf_builder hs_perf_fitted;
extern const hs_perf_builder hs_perf_auto;

const hs_perf_builder *const hs_perf_builders[] = {
    &hs_perf_roofline,
    &hs_perf_table,
    &hs_perf_fitted,
    &hs_perf_auto,
    NULL,
};

const hs_perf_builder *hs_perf_find(const char *name)
{
    for (int i = 0; hs_perf_builders[i]; i++)
        if (!strcmp(hs_perf_builders[i]->name, name)) return hs_perf_builders[i];
    return NULL;
}

/* Host launch of every TP collective on the critical path of the stages
 * built by a builder (two all-reduces per layer, one with parallel
 * attention, and the logits gather of the last stage), ns each. */
static void add_launch(hs_perf *p, const hs_model *m, const hs_layout *l, double launch,
                       int dense)
{
    for (int s = 0; s < l->pp && launch > 0; s++) {
        hs_perf_stage *ps = &p->stage[s];
        double per_pass;
        if (l->stage[s].tp < 2) continue;
        per_pass = launch * (m->parallel_attn ? 1 : 2) * l->stage[s].layers;
        for (int t = 1; dense && t <= ps->max_tokens; t++) ps->dense[t] += per_pass;
        for (int k = 1; s == l->pp - 1 && k <= ps->max_seqs; k++) ps->head[k] += launch;
    }
}

/* The serving engine's host cost (perf/overhead.h): the per-iteration
 * coefficients into p (builders leave step_overhead at
 * perf.step_overhead_us; the profile adds to it), and the host launch of
 * one collective (ns; 0 without a profile). */
static int engine_terms(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m, const hs_cluster *c, const hs_layout *l,
                        double *launch, hs_err *err)
{
    hs_ovh_profile prof;
    double fixed, seq, tok;
    int tp = 1, rc;
    p->step_overhead = cfg->step_overhead_us * 1e3;
    p->step_seq = p->step_tok = 0;
    *launch = 0;
    snprintf(p->engine, sizeof p->engine, "none");
    if (!cfg->engine[0] || !strcmp(cfg->engine, "none")) return 0;
    if ((rc = hs_ovh_find(&prof, cfg->engine, err))) return rc;
    for (int s = 0; s < l->pp; s++)
        if (l->stage[s].tp > tp) tp = l->stage[s].tp;
    hs_ovh_coef(&prof, tp, l->pp, &fixed, &seq, &tok);
    p->step_overhead += fixed;
    p->step_seq = seq;
    p->step_tok = tok;
    snprintf(p->engine, sizeof p->engine, "%s", prof.name);
    *launch = prof.collective_launch_us * 1e3;
    /* the dispatch floor of each stage, from the slowest host among its
     * GPUs' types */
    for (int s = 0; s < l->pp && prof.n_disp; s++) {
        const hs_stage_layout *st = &l->stage[s];
        p->stage[s].dispatch_ns =
            (st->layers + st->enc_layers) * hs_ovh_stage_layer_us(&prof, m, c, st->gpus, st->tp) * 1e3;
    }
    return 0;
}

/* Tables of one layer of stage s at `bits` from builder b: a two-stage
 * layout on the stage's GPUs, no layer (which leaves the embedding: stage
 * 0's dense) then one layer (stage 1's dense and attention terms).  What
 * the per-layer terms below are built from, so every builder (roofline,
 * measured, fitted) serves them with its own per-layer times. */
static int one_layer(const hs_perf_builder *b, hs_perf *aux, const hs_perf_cfg *cfg,
                     const hs_model *m, const hs_cluster *c, const hs_layout *l, int s,
                     int bits, int max_tokens, hs_err *err)
{
    hs_layout one;
    memset(&one, 0, sizeof one);
    one.pp = 2;
    one.kv_bits = l->kv_bits;
    one.stage[0] = one.stage[1] = l->stage[s];
    one.stage[0].layers = one.stage[0].enc_layers = one.stage[1].enc_layers = 0;
    one.stage[1].layers = 1;
    one.stage[0].bits = one.stage[1].bits = bits;
    return b->build(aux, cfg, m, c, &one, max_tokens, 1, err);
}

/* add_launch for one_layer's tables: the one layer of stage s (stage 0
 * of that layout, tp 0, has no collectives). */
static void one_layer_launch(hs_perf *aux, const hs_model *m, const hs_layout *l, int s,
                             double launch)
{
    hs_layout one;
    memset(&one, 0, sizeof one);
    one.pp = 2;
    one.stage[1] = l->stage[s];
    one.stage[1].layers = 1;
    add_launch(aux, m, &one, launch, 1);
}

/* Per-layer bit-widths (the layout's layer_bits; LLM-PQ's runtime runs each
 * layer with its own kernel): a stage whose layers differ from its bits
 * takes, per pass, the sum over its layers of one layer's dense time at
 * that layer's width (plus the embedding on the first stage), into dec
 * [max_tokens + 1] (dec[0] = 0), with emb (may be NULL) the embedding alone.
 * Attention does not depend on the weights' width (kv_bits is the
 * layout's); host launches are per layer whatever the width (add_launch). */
static int layer_sum(const hs_perf_builder *b, const hs_perf_cfg *cfg, const hs_model *m,
                     const hs_cluster *c, const hs_layout *l, int s, const int n[HS_NBITS],
                     int max_tokens, double launch, double *dec, double *emb, hs_err *err)
{
    int have_emb = 0;
    for (int t = 0; t <= max_tokens; t++) dec[t] = 0;
    for (int k = 0; k < HS_NBITS; k++) {
        hs_perf aux;
        int rc;
        if (!n[k]) continue;
        if ((rc = one_layer(b, &aux, cfg, m, c, l, s, hs_bits_set[k], max_tokens, err))) return rc;
        /* encdec_terms' one-layer tables carry the layer's launches */
        if (m->encoder_layers) one_layer_launch(&aux, m, l, s, launch);
        for (int t = 1; t <= max_tokens; t++) dec[t] += n[k] * aux.stage[1].dense[t];
        if (emb && !have_emb)
            for (int t = 0; t <= max_tokens; t++) emb[t] = t ? aux.stage[0].dense[t] : 0;
        have_emb = 1;
        hs_perf_free(&aux);
    }
    return 0;
}

/* Decoder-only stages with mixed widths: dense[t] from layer_sum. */
static int mixed_terms(const hs_perf_builder *b, hs_perf *p, const hs_perf_cfg *cfg,
                       const hs_model *m, const hs_cluster *c, const hs_layout *l,
                       int max_tokens, hs_err *err)
{
    double *dec = NULL, *emb = NULL;
    int rc = 0;
    for (int s = 0; s < l->pp && !rc; s++) {
        int n[HS_NBITS];
        if (!hs_layout_stage_bits(l, s, n)) continue;
        if (!dec && (!(dec = malloc(((size_t)max_tokens + 1) * sizeof *dec)) ||
                     !(emb = malloc(((size_t)max_tokens + 1) * sizeof *emb)))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
            break;
        }
        if ((rc = layer_sum(b, cfg, m, c, l, s, n, max_tokens, 0, dec, emb, err))) break;
        for (int t = 1; t <= max_tokens; t++) p->stage[s].dense[t] = (s == 0 ? emb[t] : 0) + dec[t];
    }
    free(dec);
    free(emb);
    return rc;
}

/* perf.quant_kernels=lptorch: the 8/4/3-bit layers of a stage run LLM-PQ's
 * kernels, as LLM-PQ's cost model prices them (hs_qlat_layer_s on this
 * builder's FP16 layer: LLM.int8 at its kernel model's ratio to FP16 plus
 * its host cost per linear call, GPTQ's FP32 vecquant on the datasheet), so
 * that a run of an LLM-PQ plan meets the plan's own prices.  The layout was
 * built at 16 bits (hs_perf_build): FP16 layers, attention and the head
 * are the builder's, and no table needs quantised rows.  LLM-PQ runs one
 * GPU per stage (checked by hs_perf_build). */
static int lptorch_terms(const hs_perf_builder *b, hs_perf *p, const hs_perf_cfg *cfg,
                         const hs_model *m, const hs_cluster *c, const hs_layout *l,
                         int max_tokens, hs_err *err)
{
    int any = 0;
    for (int s = 0; s < l->pp; s++) {
        const hs_stage_layout *st = &l->stage[s];
        const hs_gpu *g = hs_cluster_gpu(c, st->gpus[0]);
        int n[HS_NBITS], rc;
        hs_perf aux;
        if (!hs_layout_stage_quant(l, s)) continue;
        hs_layout_stage_bits(l, s, n);
        if ((rc = one_layer(b, &aux, cfg, m, c, l, s, 16, max_tokens, err))) return rc;
        for (int t = 1; t <= max_tokens; t++) {
            double fp16 = aux.stage[1].dense[t], sum = s == 0 ? aux.stage[0].dense[t] : 0;
            for (int k = 0; k < HS_NBITS; k++)
                if (n[k])
                    sum += n[k] * (hs_bits_set[k] == 16 ? fp16
                                                        : hs_qlat_layer_s(m, g, hs_bits_set[k], t, fp16 * 1e-9, cfg) *
                                                              1e9);
            p->stage[s].dense[t] = sum;
        }
        hs_perf_free(&aux);
        any = 1;
    }
    /* recorded per replica (replicas.perf_model): whose kernels priced it */
    if (any) {
        size_t n = strlen(p->model_name);
        snprintf(p->model_name + n, sizeof p->model_name - n, "+lptorch");
    }
    return 0;
}

/* Encoder-decoder models.  Builders time the decoder layers of a decoder-
 * only model; the encoder terms and the decoder's cross-attention come from
 * one_layer's tables at the stage's bits.  An encoder layer has the shape of
 * a self-attention decoder layer; the decoder layer adds the cross-
 * attention projections (hs_model_dec_ratio) and kernels; the encoding
 * pass projects the prompt's cross-attention K/V on every decoder layer
 * (hs_model_cross_kv_ratio).  Bidirectional pairs take the dense-block
 * coefficient pre_cross, as the exegpt estimator does.  The encoding of a
 * pipeline whose stages hold encoder and decoder layers (RRA) is charged
 * stage by stage, as if each stage's decoder layers projected the cross KV
 * as the encoder output passes (the estimator's model too).  Decoder layers
 * of mixed widths are summed layer by layer (layer_sum); encoder layers run
 * at the stage's bits. */
static int encdec_terms(const hs_perf_builder *b, hs_perf *p, const hs_perf_cfg *cfg,
                        const hs_model *m, const hs_cluster *c, const hs_layout *l,
                        int max_tokens, double launch, hs_err *err)
{
    double rd = hs_model_dec_ratio(m), fkv = hs_model_cross_kv_ratio(m);
    double *dec = NULL;
    int has_enc = 0, rc = 0;
    for (int s = 0; s < l->pp; s++) has_enc |= l->stage[s].enc_layers > 0;
    for (int s = 0; s < l->pp && !rc; s++) {
        hs_perf aux;
        hs_perf_stage *ps = &p->stage[s];
        const hs_perf_stage *e0, *e1;
        double L = l->stage[s].layers, E = l->stage[s].enc_layers;
        int n[HS_NBITS], mixed = hs_layout_stage_bits(l, s, n);
        if (mixed && !dec && !(dec = malloc(((size_t)max_tokens + 1) * sizeof *dec))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
            break;
        }
        if (mixed && (rc = layer_sum(b, cfg, m, c, l, s, n, max_tokens, launch, dec, NULL, err)))
            break;
        if ((rc = one_layer(b, &aux, cfg, m, c, l, s, l->stage[s].bits, max_tokens, err))) break;
        /* the one layer's collectives are launched like any other, so every
         * term derived from it below carries them in proportion */
        one_layer_launch(&aux, m, l, s, launch);
        e0 = &aux.stage[0];
        e1 = &aux.stage[1];
        if (!(ps->enc = calloc((size_t)max_tokens + 1, sizeof *ps->enc))) {
            hs_perf_free(&aux);
            rc = hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
            break;
        }
        for (int t = 1; t <= max_tokens; t++) {
            double emb = s == 0 ? e0->dense[t] : 0;
            /* prompt tokens are embedded where the encoder starts; a
             * decoder replica only projects the encoder output it got */
            if (!mixed) {
                ps->dense[t] = emb + L * rd * e1->dense[t];
                ps->enc[t] = (has_enc ? emb : 0) + (E + L * fkv) * e1->dense[t] + E * e1->pre_tok * t;
            } else {
                ps->dense[t] = emb + rd * dec[t];
                ps->enc[t] = (has_enc ? emb : 0) + E * e1->dense[t] + fkv * dec[t] + E * e1->pre_tok * t;
            }
        }
        ps->dec_fixed = 2 * L * e1->dec_fixed;
        ps->dec_seq = 2 * L * e1->dec_seq;
        ps->dec_ctx = L * e1->dec_ctx;
        /* self and cross attention: the linear terms above, not a grid */
        free(ps->dg_b);
        ps->dg_b = ps->dg_c = ps->dg_ns = NULL;
        memset(&ps->dw, 0, sizeof ps->dw);
        free(ps->pg.x);
        memset(&ps->pg, 0, sizeof ps->pg);
        ps->enc_fixed = E * e1->pre_fixed;
        ps->enc_pair = E * e1->pre_cross;
        hs_perf_free(&aux);
    }
    free(dec);
    return rc;
}

int hs_perf_build(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_tokens,
                  int max_seqs, hs_err *err)
{
    const hs_perf_builder *b = hs_perf_find(cfg->model);
    double launch;
    hs_layout l16;
    int rc, lpt;
    memset(p, 0, sizeof *p);
    if (!b) return hs_errf(err, HS_ENOTFOUND, "perf.model: unknown latency model \"%s\"", cfg->model);
    if (max_tokens < 1 || max_seqs < 1)
        return hs_errf(err, HS_ERANGE, "latency tables need max_tokens and max_seqs >= 1 (got %d, %d)",
                       max_tokens, max_seqs);
    if (l->pp < 1 || l->pp > HS_MAX_PP)
        return hs_errf(err, HS_ERANGE, "layout: %d stages (1..%d)", l->pp, HS_MAX_PP);
    for (int s = 0; s < l->pp; s++) {
        if (l->stage[s].tp < 1 || l->stage[s].tp > HS_MAX_TP)
            return hs_errf(err, HS_ERANGE, "layout: stage %d: tp %d (1..%d)", s, l->stage[s].tp, HS_MAX_TP);
        for (int k = 0; k < l->stage[s].tp; k++)
            if (l->stage[s].gpus[k] < 0 || l->stage[s].gpus[k] >= c->n_gpus)
                return hs_errf(err, HS_ERANGE, "layout: stage %d: GPU %d not in cluster %s",
                               s, l->stage[s].gpus[k], c->name);
    }
    for (int s = 0; s < l->pp; s++)
        if (l->stage[s].layers < 0 || l->stage[s].enc_layers < 0 ||
            (l->stage[s].enc_layers && !m->encoder_layers))
            return hs_errf(err, HS_ERANGE, "layout: stage %d: %d decoder and %d encoder layers (%s has %d encoder layers)",
                           s, l->stage[s].layers, l->stage[s].enc_layers, m->name, m->encoder_layers);
    if ((rc = hs_perf_check_kernels(cfg->quant_kernels, NULL, err))) return rc;
    lpt = !strcmp(cfg->quant_kernels, "lptorch");
    if (lpt) {
        /* LLM-PQ's kernels time every quantised layer (lptorch_terms): the
         * builder times the layout at 16 bits */
        if ((rc = hs_layout_check_lptorch(m, l, err))) {
            hs_err_prefix(err, "perf.quant_kernels: ");
            return rc;
        }
        l16 = *l;
        memset(l16.layer_bits, 0, sizeof l16.layer_bits);
        for (int s = 0; s < l16.pp; s++) l16.stage[s].bits = 16;
    }
    if ((rc = b->build(p, cfg, m, c, lpt ? &l16 : l, max_tokens, max_seqs, err))) return rc;
    if ((rc = engine_terms(p, cfg, m, c, l, &launch, err)) ||
        (!m->encoder_layers && !lpt && (rc = mixed_terms(b, p, cfg, m, c, l, max_tokens, err))) ||
        (lpt && (rc = lptorch_terms(b, p, cfg, m, c, l, max_tokens, err))) ||
        (m->encoder_layers && (rc = encdec_terms(b, p, cfg, m, c, l, max_tokens, launch, err)))) {
        hs_perf_free(p);
        return rc;
    }
    /* encoder-decoder dense and encoder terms carry it already (encdec_terms) */
    add_launch(p, m, l, launch, !m->encoder_layers);
    return 0;
}
