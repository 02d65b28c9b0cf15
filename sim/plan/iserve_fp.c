/* iserve_fp.c - iServe's configuration space, the ground truth behind
 * profiling, fingerprint files and the fingerprint estimator (iserve.h).
 *
 * Variant ratios: our latency model sees a format's smaller weights but
 * not its kernels, so each variant carries its measured decode latency
 * over FP16's and hs_solo_build scales the modelled layout to it (against
 * the same layout at 16 bits, whatever share of a step the weights are;
 * profiles/README.md, "iServe's deployment variants", gives each source):
 *   INT4 (bitsandbytes 4-bit)  0.4086: the paper's own measurement, INT4
 *        Llama-2 59.14% lower latency than FP16 (Sec. 8.2);
 *   INT8 (LLM.int8)            1.25: decode at 1.25x FP16, BLOOM-176B on
 *        A100s (Hugging Face's BLOOM inference benchmark, 1.22-1.29x; the
 *        largest model measured: smaller ones are slower still, so INT8 is
 *        if anything favoured);
 *   GPTQ4 (AutoGPTQ)           0.739: Llama-7B on an A100 at batch 1,
 *        25.53 against 18.87 tokens/s (AutoGPTQ's README);
 *   KV8                        1.13: int8 KV makes decode 13-14% slower
 *        (per-token latency of 0.5B and 1.5B models, llama.cpp, flash
 *        attention on; kvquant's measurement);
 * which keep the paper's Sec. 3 orderings (INT4 fastest for large models,
 * GPTQ4 and INT8 slower).  Pruning (Sec. 3): unstructured 50% (SparseGPT,
 * Wanda) keeps dense storage and is slower (+73% on 7B, +31.5% on 13B: we
 * take x1.5); 2:4 with semi-structured kernels stores 0.5 of the weights
 * plus 1/16 metadata and is x1.18 (the structured column: +33%/+3%); 4:8
 * has no kernel and stays dense, x1.18. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "plan/iserve.h"

const char *const hs_isv_wq_names[HS_ISV_NWQ] = {"fp16", "int8", "int4", "gptq4"};
const char *const hs_isv_prune_names[HS_ISV_NPRUNE] = {"none", "sparsegpt", "wanda",
                                                       "wanda24", "wanda48"};

#define KV8 1.13   /* int8 KV's decode ratio, above */

/* not const: hs_isv_set_wq_ratio overrides a format's ratio (sensitivity) */
static hs_isv_variant vars[HS_ISV_NVAR] = {
    {HS_ISV_FP16, 16, HS_ISV_PRUNE_NONE, 16, 1.00, 1.0, "fp16"},
    {HS_ISV_FP16, 8, HS_ISV_PRUNE_NONE, 16, KV8, 1.0, "fp16+kv8"},
    {HS_ISV_INT8, 16, HS_ISV_PRUNE_NONE, 8, 1.25, 1.0, "int8"},
    {HS_ISV_INT8, 8, HS_ISV_PRUNE_NONE, 8, 1.25 * KV8, 1.0, "int8+kv8"},
    {HS_ISV_INT4, 16, HS_ISV_PRUNE_NONE, 4, 0.4086, 1.0, "int4"},
    {HS_ISV_INT4, 8, HS_ISV_PRUNE_NONE, 4, 0.4086 * KV8, 1.0, "int4+kv8"},
    {HS_ISV_GPTQ4, 16, HS_ISV_PRUNE_NONE, 4, 0.739, 1.0, "gptq4"},
    {HS_ISV_GPTQ4, 8, HS_ISV_PRUNE_NONE, 4, 0.739 * KV8, 1.0, "gptq4+kv8"},
    {HS_ISV_FP16, 16, HS_ISV_SPARSEGPT, 16, 1.50, 1.0, "sparsegpt"},
    {HS_ISV_FP16, 16, HS_ISV_WANDA, 16, 1.50, 1.0, "wanda"},
    {HS_ISV_FP16, 16, HS_ISV_WANDA24, 16, 1.18, 0.5625, "wanda24"},
    {HS_ISV_FP16, 16, HS_ISV_WANDA48, 16, 1.18, 1.0, "wanda48"},
};

static const int tps[HS_ISV_NTP] = {1, 2, 4, 8};

static int tp_index(int tp)
{
    for (int i = 0; i < HS_ISV_NTP; i++)
        if (tps[i] == tp) return i;
    return -1;
}

const hs_isv_variant *hs_isv_var(int var)
{
    return var >= 0 && var < HS_ISV_NVAR ? &vars[var] : NULL;
}

int hs_isv_set_wq_ratio(int wq, double ratio, hs_err *err)
{
    if (wq <= HS_ISV_FP16 || wq >= HS_ISV_NWQ)
        return hs_errf(err, HS_EINVAL, "iserve: weight format %d has no ratio to set (FP16 is the reference)", wq);
    if (!(ratio > 0 && ratio <= 10))
        return hs_errf(err, HS_ERANGE, "iserve: a weight format's latency ratio must be in (0, 10], got %g", ratio);
    for (int v = 0; v < HS_ISV_NVAR; v++)
        if (vars[v].prune == HS_ISV_PRUNE_NONE && vars[v].wq == wq)
            vars[v].lat_ratio = vars[v].kv_bits == 16 ? ratio : ratio * KV8;
    return 0;
}

int hs_isv_var_find(int wq, int kv_bits, int prune)
{
    for (int v = 0; v < HS_ISV_NVAR; v++)
        if (vars[v].wq == wq && vars[v].kv_bits == kv_bits && vars[v].prune == prune) return v;
    return -1;
}

void hs_isv_opts_defaults(hs_isv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->prompt = 512;
    o->out1 = 16;
    o->out2 = 128;
    o->ctx = 2048;
    o->gpu_overhead = 0.6 * 1073741824.0;
    hs_perf_cfg_defaults(&o->perf);   /* the calibrated model (auto) */
}

int hs_isv_cfg_valid(const hs_model *m, const hs_isv_cfg *c, int n_gpus)
{
    if (tp_index(c->tp) < 0 || c->pp < 1 || c->pp > 8 || c->pp > m->layers) return 0;
    if (m->heads % c->tp || c->tp * c->pp > n_gpus) return 0;
    return c->var >= 0 && c->var < HS_ISV_NVAR;
}

int hs_isv_space(const hs_model *m, int n_gpus, hs_isv_cfg **out, int *n, hs_err *err)
{
    hs_isv_cfg *v = malloc(sizeof *v * HS_ISV_NVAR * HS_ISV_NTP * 8);
    int k = 0;
    if (!v) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int var = 0; var < HS_ISV_NVAR; var++)
        for (int i = 0; i < HS_ISV_NTP; i++)
            for (int pp = 1; pp <= 8; pp++) {
                hs_isv_cfg c = {tps[i], pp, var};
                if (hs_isv_cfg_valid(m, &c, n_gpus)) v[k++] = c;
            }
    *out = v;
    *n = k;
    return 0;
}

void hs_isv_cfg_str(const hs_isv_cfg *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "tp%d-pp%d-%s", c->tp, c->pp, vars[c->var].name);
}

void hs_isv_layout_even(hs_layout *l, const hs_model *m, const hs_isv_cfg *c, const int *gpus)
{
    int base = m->layers / c->pp, extra = m->layers % c->pp;
    memset(l, 0, sizeof *l);
    l->pp = c->pp;
    l->kv_bits = vars[c->var].kv_bits;
    for (int s = 0; s < c->pp; s++) {
        l->stage[s].tp = c->tp;
        l->stage[s].bits = vars[c->var].bits;
        l->stage[s].layers = base + (s < extra);
        for (int i = 0; i < c->tp; i++) l->stage[s].gpus[i] = gpus[s * c->tp + i];
    }
}

double hs_isv_stage_bytes(const hs_model *m, int var, int layers, int first, int last,
                          int tp, const hs_isv_opts *o)
{
    const hs_isv_variant *v = &vars[var];
    hs_stage_mem sm;
    double wl;
    hs_model_stage_mem(m, layers, first, last, tp, v->bits, v->kv_bits, o->ctx, 1, &sm);
    wl = layers * hs_model_layer_params(m) * hs_weight_bytes_per_param(v->bits) / tp;
    return sm.weights - wl * (1.0 - v->wmem_factor) + sm.activation +
           sm.kv_per_token * o->ctx + o->gpu_overhead;
}

double hs_isv_layout_bytes(const hs_model *m, int var, const hs_layout *l,
                           const hs_isv_opts *o)
{
    double b = 0;
    for (int s = 0; s < l->pp; s++)
        b += l->stage[s].tp * hs_isv_stage_bytes(m, var, l->stage[s].layers, s == 0,
                                                 s == l->pp - 1, l->stage[s].tp, o);
    return b;
}

void hs_isv_fp_free(hs_isv_fp *f)
{
    if (!f) return;
    free(f->m);
    memset(f, 0, sizeof *f);
}

int hs_isv_fp_add(hs_isv_fp *f, const hs_isv_meas *m, hs_err *err)
{
    if (hs_vec_reserve((void **)&f->m, &f->cap, (size_t)f->n + 1, sizeof *f->m, 64))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    f->m[f->n++] = *m;
    return 0;
}

/* One fingerprint configuration at two output lengths (one when out2 < 0). */
static int measure_one(hs_isv_fp *f, const hs_model *fm, const hs_cluster *c,
                       int tp, int pp, int var, const hs_isv_opts *o, hs_err *err)
{
    hs_isv_cfg cfg = {tp, pp, var};
    int gpus[64], rc, outs[2] = {o->out1, o->out2};
    hs_layout l;
    hs_solo t;
    double mem;
    for (int i = 0; i < tp * pp; i++) gpus[i] = i;
    hs_isv_layout_even(&l, fm, &cfg, gpus);
    if ((rc = hs_solo_build(&t, &o->perf, fm, c, &l, o->prompt, 1, vars[var].lat_ratio, 0, err)))
        return rc;
    mem = hs_isv_layout_bytes(fm, var, &l, o);
    for (int k = 0; k < 2 && !rc; k++) {
        hs_isv_meas me = {fm->layers, tp, pp, var, o->prompt, outs[k], 0, mem / 1073741824.0};
        me.latency_ms = hs_solo_req_ns(&t, o->prompt, outs[k], NULL) / 1e6;
        f->profile_s += me.latency_ms / 1e3 * tp * pp;
        rc = hs_isv_fp_add(f, &me, err);
    }
    hs_solo_free(&t);
    return rc;
}

int hs_isv_fp_measure(hs_isv_fp *f, const hs_model *m, const hs_cluster *c,
                      const hs_isv_opts *o, hs_err *err)
{
    int rc = 0;
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", m->name);
    if (o->out1 == o->out2 || o->out1 < 1 || o->out2 < 1 || o->prompt < 1)
        return hs_errf(err, HS_EINVAL, "iserve: profiling request needs prompt >= 1 and two distinct outputs >= 1");
    for (int nl = 1; nl <= 2 && !rc; nl++) {
        hs_model fm = *m;
        fm.layers = nl;   /* the fingerprint: same blocks, nl hidden layers */
        for (int var = 0; var < HS_ISV_NVAR && !rc; var++) {
            for (int i = 0; i < HS_ISV_NTP && !rc; i++) {
                int tp = tps[i];
                if (m->heads % tp || tp > c->n_gpus) continue;
                rc = measure_one(f, &fm, c, tp, 1, var, o, err);
            }
            if (!rc && c->n_gpus >= 2) rc = measure_one(f, &fm, c, 1, 2, var, o, err);
        }
    }
    if (rc) hs_isv_fp_free(f);
    return rc;
}

int hs_isv_fp_write(const hs_isv_fp *f, FILE *fp)
{
    fprintf(fp, "# hetsim iServe fingerprint v1 (see sim/plan/iserve.h)\n");
    fprintf(fp, "model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib\n");
    for (int i = 0; i < f->n; i++) {
        const hs_isv_meas *m = &f->m[i];
        const hs_isv_variant *v = &vars[m->var];
        fprintf(fp, "%s,%d,%d,%d,%s,%d,%s,%d,%d,%.17g,%.17g\n", f->model, m->layers, m->tp,
                m->pp, hs_isv_wq_names[v->wq], v->kv_bits, hs_isv_prune_names[v->prune],
                m->prompt, m->output, m->latency_ms, m->mem_gib);
    }
    return ferror(fp) ? HS_EIO : 0;
}

static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

int hs_isv_fp_read(hs_isv_fp *f, const char *path, const char *model, hs_err *err)
{
    FILE *fp = fopen(path, "r");
    char line[512];
    int lineno = 0, header = 0, rc = 0;
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", model);
    if (!fp) return hs_errf(err, HS_EIO, "%s: cannot open fingerprint file", path);
    while (!rc && fgets(line, sizeof line, fp)) {
        char name[64], wq[16], pr[16];
        hs_isv_meas me;
        int kv, w, p;
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0) continue;
        if (!header) {
            if (strcmp(line, "model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib"))
                rc = hs_errf(err, HS_EPARSE, "%s:%d: expected the header model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib",
                             path, lineno);
            header = 1;
            continue;
        }
        memset(&me, 0, sizeof me);
        if (sscanf(line, "%63[^,],%d,%d,%d,%15[^,],%d,%15[^,],%d,%d,%lf,%lf", name, &me.layers,
                   &me.tp, &me.pp, wq, &kv, pr, &me.prompt, &me.output, &me.latency_ms,
                   &me.mem_gib) != 11) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: expected 11 comma-separated fields", path, lineno);
            break;
        }
        w = name_index(wq, hs_isv_wq_names, HS_ISV_NWQ);
        p = name_index(pr, hs_isv_prune_names, HS_ISV_NPRUNE);
        if (strcmp(name, model))
            rc = hs_errf(err, HS_EPARSE, "%s:%d: model \"%s\", expected \"%s\"", path, lineno, name, model);
        else if (me.layers < 1 || me.layers > 2)
            rc = hs_errf(err, HS_EPARSE, "%s:%d: layers: %d, a fingerprint has 1 or 2", path, lineno, me.layers);
        else if (tp_index(me.tp) < 0 || me.pp < 1 || me.pp > 8)
            rc = hs_errf(err, HS_EPARSE, "%s:%d: tp %d / pp %d out of range", path, lineno, me.tp, me.pp);
        else if (w < 0 || p < 0 || (me.var = hs_isv_var_find(w, kv, p)) < 0)
            rc = hs_errf(err, HS_EPARSE, "%s:%d: unknown variant wq=%s kv_bits=%d prune=%s", path, lineno, wq, kv, pr);
        else if (me.prompt < 1 || me.output < 1 || !(me.latency_ms > 0) || !isfinite(me.latency_ms) ||
                 !(me.mem_gib > 0) || !isfinite(me.mem_gib))
            rc = hs_errf(err, HS_EPARSE, "%s:%d: prompt, output, latency_ms and mem_gib must be positive and finite", path, lineno);
        else
            rc = hs_isv_fp_add(f, &me, err);
    }
    fclose(fp);
    if (!rc && !header) rc = hs_errf(err, HS_EPARSE, "%s: no header row", path);
    if (rc) hs_isv_fp_free(f);
    return rc;
}

/* Rows of (layers, tp, pp, var) with the smallest and largest output. */
static int find_pair(const hs_isv_fp *f, int nl, int tp, int pp, int var,
                     const hs_isv_meas **lo, const hs_isv_meas **hi)
{
    *lo = *hi = NULL;
    for (int i = 0; i < f->n; i++) {
        const hs_isv_meas *m = &f->m[i];
        if (m->layers != nl || m->tp != tp || m->pp != pp || m->var != var) continue;
        if (!*lo || m->output < (*lo)->output) *lo = m;
        if (!*hi || m->output > (*hi)->output) *hi = m;
    }
    return *lo != NULL;
}

int hs_isv_estimate(hs_isv_est *e, const hs_isv_fp *f, int layers, hs_err *err)
{
    int any = 0;
    memset(e, 0, sizeof *e);
    e->layers = layers;
    if (layers < 1) return hs_errf(err, HS_EINVAL, "iserve: model has %d layers", layers);
    for (int v = 0; v < HS_ISV_NVAR; v++) {
        double mem[3], X[3];
        int have[3];
        static const int cfgs[3][2] = {{1, 1}, {1, 2}, {2, 1}};
        for (int i = 0; i < HS_ISV_NTP; i++) {
            double ttft[3], tpot[3];
            int ok = 1;
            for (int nl = 1; nl <= 2 && ok; nl++) {
                const hs_isv_meas *lo, *hi;
                if (!find_pair(f, nl, tps[i], 1, v, &lo, &hi) || lo->output == hi->output) {
                    ok = 0;
                    break;
                }
                if (!e->prompt) e->prompt = lo->prompt;
                /* Eq. 1 at two output lengths. */
                tpot[nl] = (hi->latency_ms - lo->latency_ms) / (hi->output - lo->output);
                ttft[nl] = lo->latency_ms - tpot[nl] * lo->output;
            }
            if (!ok) continue;
            /* Eqs. 2-3 at one and two layers. */
            e->h_ttft[v][i] = ttft[2] - ttft[1];
            e->o_ttft[v][i] = ttft[1] - e->h_ttft[v][i];
            e->h_tpot[v][i] = tpot[2] - tpot[1];
            e->o_tpot[v][i] = tpot[1] - e->h_tpot[v][i];
            /* Fingerprints whose extrapolation is not a positive time (noisy
             * or inconsistent rows) estimate nothing: a negative latency
             * would rank first. */
            if (!(layers * e->h_ttft[v][i] + e->o_ttft[v][i] > 0) ||
                !(layers * e->h_tpot[v][i] + e->o_tpot[v][i] > 0))
                continue;
            e->lat_ok[v][i] = 1;
            any = 1;
        }
        /* M2: extrapolate each fingerprint footprint to L layers. */
        for (int k = 0; k < 3; k++) {
            const hs_isv_meas *l1, *l2, *hi;
            have[k] = find_pair(f, 1, cfgs[k][0], cfgs[k][1], v, &l1, &hi) &&
                      find_pair(f, 2, cfgs[k][0], cfgs[k][1], v, &l2, &hi);
            if (have[k]) {
                mem[k] = l1->mem_gib + (layers - 1) * (l2->mem_gib - l1->mem_gib);
                X[k] = mem[k];
            }
        }
        if (!have[0]) continue;
        e->App[v] = have[1] ? X[1] - X[0] : 0;
        e->A[v] = have[2] ? X[2] - X[0] : 0;
        e->W[v] = X[0] - e->A[v];
        e->mem_ok[v] = e->W[v] + e->A[v] > 0;
    }
    if (!any)
        return hs_errf(err, HS_EINVAL, "iserve: fingerprints of %s give no configuration (need PP=1 rows at two outputs for 1 and 2 layers)",
                       f->model);
    return 0;
}

int hs_isv_est_has(const hs_isv_est *e, const hs_isv_cfg *c)
{
    int i = tp_index(c->tp);
    return i >= 0 && c->var >= 0 && c->var < HS_ISV_NVAR && e->lat_ok[c->var][i] &&
           e->mem_ok[c->var];
}

double hs_isv_est_ttft_ms(const hs_isv_est *e, const hs_isv_cfg *c)
{
    int i = tp_index(c->tp);
    return e->layers * e->h_ttft[c->var][i] + e->o_ttft[c->var][i];
}

double hs_isv_est_tpot_ms(const hs_isv_est *e, const hs_isv_cfg *c)
{
    int i = tp_index(c->tp);
    return e->layers * e->h_tpot[c->var][i] + e->o_tpot[c->var][i];
}

double hs_isv_est_latency_s(const hs_isv_est *e, const hs_isv_cfg *c, int output)
{
    return (hs_isv_est_ttft_ms(e, c) + hs_isv_est_tpot_ms(e, c) * output) / 1e3;
}

double hs_isv_est_mem_gib(const hs_isv_est *e, const hs_isv_cfg *c)
{
    return e->W[c->var] + c->tp * e->A[c->var] + (c->pp - 1) * e->App[c->var];
}
