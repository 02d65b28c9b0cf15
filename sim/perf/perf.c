/* perf.c - latency-model registry and hs_perf_build (encoder-decoder terms,
 * engine host cost); see perf.h.  What the builders share is in perf_base.c. */
#include "perf/perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/overhead.h"

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
static int engine_terms(hs_perf *p, const hs_perf_cfg *cfg, const hs_layout *l, double *launch,
                        hs_err *err)
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
    return 0;
}

/* Encoder-decoder models.  Builders time the decoder layers of a decoder-
 * only model; the encoder terms and the decoder's cross-attention come from
 * tables of the same builder for one layer on the stage's GPUs (a two-stage
 * layout on them: no layer, which leaves the embedding, then one layer),
 * so every builder (roofline, measured, fitted) serves encoder-decoder
 * models with its own per-layer times.  An encoder layer has the shape of
 * a self-attention decoder layer; the decoder layer adds the cross-
 * attention projections (hs_model_dec_ratio) and kernels; the encoding
 * pass projects the prompt's cross-attention K/V on every decoder layer
 * (hs_model_cross_kv_ratio).  Bidirectional pairs take the dense-block
 * coefficient pre_cross, as the exegpt estimator does.  The encoding of a
 * pipeline whose stages hold encoder and decoder layers (RRA) is charged
 * stage by stage, as if each stage's decoder layers projected the cross KV
 * as the encoder output passes (the estimator's model too). */
static int encdec_terms(const hs_perf_builder *b, hs_perf *p, const hs_perf_cfg *cfg,
                        const hs_model *m, const hs_cluster *c, const hs_layout *l,
                        int max_tokens, double launch, hs_err *err)
{
    double rd = hs_model_dec_ratio(m), fkv = hs_model_cross_kv_ratio(m);
    int has_enc = 0;
    for (int s = 0; s < l->pp; s++) has_enc |= l->stage[s].enc_layers > 0;
    for (int s = 0; s < l->pp; s++) {
        hs_perf aux;
        hs_layout one;
        hs_perf_stage *ps = &p->stage[s];
        const hs_perf_stage *e0, *e1;
        double L = l->stage[s].layers, E = l->stage[s].enc_layers;
        int rc;
        memset(&one, 0, sizeof one);
        one.pp = 2;
        one.kv_bits = l->kv_bits;
        one.stage[0] = one.stage[1] = l->stage[s];
        one.stage[0].layers = one.stage[0].enc_layers = one.stage[1].enc_layers = 0;
        one.stage[1].layers = 1;
        if ((rc = b->build(&aux, cfg, m, c, &one, max_tokens, 1, err))) return rc;
        /* the one layer's collectives are launched like any other, so every
         * term derived from it below carries them in proportion */
        add_launch(&aux, m, &one, launch, 1);
        e0 = &aux.stage[0];
        e1 = &aux.stage[1];
        if (!(ps->enc = calloc((size_t)max_tokens + 1, sizeof *ps->enc))) {
            hs_perf_free(&aux);
            return hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
        }
        for (int t = 1; t <= max_tokens; t++) {
            double emb = s == 0 ? e0->dense[t] : 0;
            ps->dense[t] = emb + L * rd * e1->dense[t];
            /* prompt tokens are embedded where the encoder starts; a
             * decoder replica only projects the encoder output it got */
            ps->enc[t] = (has_enc ? emb : 0) + (E + L * fkv) * e1->dense[t] + E * e1->pre_tok * t;
        }
        ps->dec_fixed = 2 * L * e1->dec_fixed;
        ps->dec_seq = 2 * L * e1->dec_seq;
        ps->dec_ctx = L * e1->dec_ctx;
        ps->enc_fixed = E * e1->pre_fixed;
        ps->enc_pair = E * e1->pre_cross;
        hs_perf_free(&aux);
    }
    return 0;
}

int hs_perf_build(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_tokens,
                  int max_seqs, hs_err *err)
{
    const hs_perf_builder *b = hs_perf_find(cfg->model);
    double launch;
    int rc;
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
    if ((rc = b->build(p, cfg, m, c, l, max_tokens, max_seqs, err))) return rc;
    if ((rc = engine_terms(p, cfg, l, &launch, err)) ||
        (m->encoder_layers && (rc = encdec_terms(b, p, cfg, m, c, l, max_tokens, launch, err)))) {
        hs_perf_free(p);
        return rc;
    }
    /* encoder-decoder dense and encoder terms carry it already (encdec_terms) */
    add_launch(p, m, l, launch, !m->encoder_layers);
    return 0;
}
