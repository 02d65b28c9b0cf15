/* perf.c - latency-model registry, shared pieces (collectives); see perf.h. */
#include "perf/perf.h"

#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "perf/overhead.h"
#include "perf/table_int.h"

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

/* Defaults of the plain roofline (the last resort: perf.model auto uses
 * measured tables and the shipped calibration first): efficiencies typical
 * of FP16 inference kernels on NVIDIA data centre GPUs (cuBLAS reaches
 * 70-80% of dense peak on large GEMMs; HBM copies 80-90%; NCCL ring
 * all-reduce about 80% of link bandwidth), and attention's fitted on the
 * one measured attention table (roofline.c). */
void hs_perf_cfg_defaults(hs_perf_cfg *c)
{
    hs_conf_defaults(c, hs_perf_cfg_fields);
}

const hs_field hs_perf_cfg_fields[] = {
    HS_FIELD_STR(hs_perf_cfg, model, 0, "auto", "latency model: auto (measured table, else fitted, else roofline), table, fitted, roofline"),
    HS_FIELD_NUM(hs_perf_cfg, gemm_eff, HS_F_DOUBLE, 0, 0.7, 0.01, 1, "GEMM fraction of peak FLOP/s"),
    HS_FIELD_NUM(hs_perf_cfg, attn_eff, HS_F_DOUBLE, 0, 0.38, 0.01, 1, "attention fraction of peak FLOP/s (0.38: fitted on Vidur's A100 FlashAttention prefill table)"),
    HS_FIELD_NUM(hs_perf_cfg, mem_eff, HS_F_DOUBLE, 0, 0.8, 0.01, 1, "fraction of memory bandwidth"),
    HS_FIELD_NUM(hs_perf_cfg, link_eff, HS_F_DOUBLE, 0, 0.8, 0.01, 1, "fraction of link bandwidth"),
    HS_FIELD_NUM(hs_perf_cfg, launch_us, HS_F_DOUBLE, 0, 4, 0, 1e4, "per kernel launch, us"),
    HS_FIELD_STR(hs_perf_cfg, engine, 0, "vllm", "serving engine's host cost per iteration: a profile in profiles/engines (or a path), none: only perf.step_overhead_us"),
    HS_FIELD_NUM(hs_perf_cfg, step_overhead_us, HS_F_DOUBLE, 0, 0, 0, 1e6, "per iteration, us, added to the engine profile's cost"),
    HS_FIELD_STR(hs_perf_cfg, tables, 0, "", "measured tables root (empty: <data root>/profiles)"),
    HS_FIELD_STR(hs_perf_cfg, fit_from, 0, "", "comma-separated table dirs or roots the fitted model learns from (empty: perf.tables)"),
    {0},
};

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

int hs__prov_has(const char *prov, const char *gpu)
{
    size_t n = strlen(gpu);
    for (const char *seg = prov; *seg; ) {
        const char *end = strstr(seg, "; ");
        if (!strncmp(seg, gpu, n) && seg[n] == ':') return 1;
        if (!end) break;
        seg = end + 2;
    }
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

void hs_perf_free(hs_perf *p)
{
    if (!p) return;
    for (int s = 0; s < p->pp; s++) {
        free(p->stage[s].dense);
        free(p->stage[s].head);
        free(p->stage[s].enc);
        p->stage[s].dense = p->stage[s].head = p->stage[s].enc = NULL;
    }
    p->pp = 0;
}

double hs_allreduce_s(const hs_cluster *c, const int *gpus, int n,
                      double bytes, double link_eff)
{
    double bw = 0, lat = 0;
    if (n <= 1) return 0;
    /* A ring is as fast as its slowest hop; NCCL picks the ring, so we take
     * the slowest link and highest latency among the members. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double b, a;
            if (i == j) continue;
            b = hs_cluster_bw(c, gpus[i], gpus[j]);
            a = hs_cluster_lat(c, gpus[i], gpus[j]);
            if (bw == 0 || b < bw) bw = b;
            if (a > lat) lat = a;
        }
    return 2.0 * (n - 1) * lat + 2.0 * (n - 1) / n * bytes / (bw * link_eff);
}
