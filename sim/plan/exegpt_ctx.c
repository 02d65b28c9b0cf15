/* exegpt_ctx.c - the ExeGPT estimator's context (see exegpt.h; the layout
 * and its invariants are in exegpt_int.h): options and their defaults,
 * creation from the prompt and output distributions (the moments the
 * estimates use, the distribution of decoding iterations D, its survival),
 * destruction, and the facts and engine settings the planner reads.
 *
 * Invariants established here (asserted on creation, relied on by every
 * estimate):
 *   - the options are in range (checked, HS_EINVAL): 0 < mem_util <= 1,
 *     0 <= kv_margin < 1, 0 <= kv_z <= 10, enc_slack >= 0, tables >= 16;
 *   - the prompt and output distributions are normalised (exegpt.h) with
 *     no mass at 0 (checked); D = S - 1 (decoder-only) or S
 *     (encoder-decoder), so dec is normalised too and 0 <= d_p99 <= dec.max;
 *   - the moments are finite, pin_mean >= 1 (up to rounding), the rest
 *     >= 0; cap, kv_full and w_total are finite and > 0;
 *   - GPUs 0..n-1 are of one type (checked, HS_EUNSUPPORTED), so one table
 *     per TP degree serves every stage. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/exegpt_int.h"

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
    o->adjust = 0.1;
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
    free(x->band);
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
    assert(hs__exegpt_dist_sane(prompt) && hs__exegpt_dist_sane(output)); /* exegpt.h: normalised */
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
    hs__exegpt_survival(&x->dec, x->sv);
    assert(hs__exegpt_dist_sane(&x->dec) && x->d_p99 >= 0 && x->d_p99 <= x->dec.max);
    assert(isfinite(x->pin_mean) && x->pin_mean >= 1 - HS__EXEGPT_PTOL && isfinite(x->pin_sq) &&
           isfinite(x->pin_tri) && x->pin_max >= 1);
    assert(isfinite(x->d_mean) && x->d_mean >= 0 && isfinite(x->d_tri) && x->d_tri >= 0 &&
           isfinite(x->ctx_sq) && x->ctx_sq >= 0);
    assert(isfinite(x->cap) && x->cap > 0 && isfinite(x->kv_full) && x->kv_full > 0 &&
           isfinite(x->w_total) && x->w_total > 0 && x->node_gpus >= 1);
    *out = x;
    return 0;
fail:
    hs_exegpt_destroy(x);
    return rc;
}

/* ---- facts the planner needs ---------------------------------------------------- */

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
                          double adjust, hs_engine_cfg *ec, hs_exegpt_rt *rt)
{
    int rra = cfg->policy == HS_EXEGPT_RRA, mml = hs_exegpt_max_context(x);
    ec->gpu_mem_util = x->o.mem_util;
    ec->kv_bits = x->o.kv_bits;
    ec->watermark = 0;               /* ExeGPT keeps no free-block reserve */
    hs_exegpt_rt_defaults(rt);
    rt->exegpt_be = cfg->be;
    rt->exegpt_nd = rra ? cfg->nd : 1;
    rt->exegpt_bd = e->bd;
    rt->exegpt_adjust = adjust;
    rt->exegpt_prompt_mean = x->pin_mean;
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
