/* iserve_ctl.c - iServe's deployment controller as the multi-model runner's
 * deploy hook, and the baselines of the paper's evaluation:
 *   max-tp       TensorRT-LLM with the largest TP the model allows, PP 1, FP16
 *   max-pp       TensorRT-LLM / HF default: TP 1, PP = min(GPUs, 8), FP16
 *   accelerate   HF Accelerate big-model inference (FSDP-style sharding):
 *                layers balanced over all GPUs in order, each GPU taking what
 *                its free memory holds, the rest offloaded to CPU DRAM and
 *                streamed over PCIe on every forward pass
 *   alpaserve    AlpaServe-like: knows the whole trace (rates), FP16, one
 *                group size and (TP, PP) per model, DP replicas placed
 *                greedily; may drop models; alpaserve-star first gives every
 *                model a replica (dropping only one that fits no group).
 * Baselines place in GPU-id order and, like iServe, charge memory with the
 * fingerprint estimate; the runner refuses any instance whose true bytes
 * would not fit (OOM at load), and the controller then tries the next
 * configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan/iserve.h"

#define HS_ISV_ACCEL_FACTOR 1.5

const char *const hs_isv_sys_names[HS_ISV_NSYS] = {"iserve", "max-tp", "max-pp",
                                                   "accelerate", "alpaserve", "alpaserve-star"};

int hs_isv_sys_parse(const char *s)
{
    for (int i = 0; i < HS_ISV_NSYS; i++)
        if (!strcmp(s, hs_isv_sys_names[i])) return i;
    return -1;
}

void hs_isv_ctl_free(hs_isv_ctl *k)
{
    if (!k) return;
    free(k->est);
    free(k->base);
    free(k->chosen);
    k->est = NULL;
    k->base = NULL;
    k->chosen = NULL;
}

int hs_isv_ctl_init(hs_isv_ctl *k, const hs_cluster *c, const hs_model *models, int n_models,
                    const hs_isv_opts *o, const char *fp_dir, double usable, hs_err *err)
{
    int rc = 0;
    double gpu_b = hs_cluster_gpu(c, 0)->mem_bytes * usable;
    if (n_models > 64) return hs_errf(err, HS_ERANGE, "iserve: at most 64 models (got %d)", n_models);
    k->c = c;
    k->models = models;
    k->n_models = n_models;
    k->opts = *o;
    k->usable = usable;
    k->profile_s = 0;
    k->est = calloc((size_t)n_models, sizeof *k->est);
    k->base = calloc((size_t)n_models, sizeof *k->base);
    k->chosen = calloc((size_t)n_models, sizeof *k->chosen);
    if (!k->est || !k->base || !k->chosen) {
        hs_isv_ctl_free(k);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n_models && !rc; i++) {
        hs_isv_fp fp;
        char path[1200];
        struct stat st;
        int found = -1;
        /* Models repeated in the list share one profile. */
        for (int j = 0; j < i; j++)
            if (!strcmp(models[j].name, models[i].name)) found = j;
        if (found >= 0) {
            k->est[i] = k->est[found];
            k->base[i] = k->base[found];
            continue;
        }
        if (fp_dir && *fp_dir &&
            snprintf(path, sizeof path, "%s/%s.csv", fp_dir, models[i].name) < (int)sizeof path &&
            stat(path, &st) == 0)
            rc = hs_isv_fp_read(&fp, path, models[i].name, err);
        else
            rc = hs_isv_fp_measure(&fp, &models[i], c, o, err);
        if (rc) break;
        k->profile_s += fp.profile_s;
        rc = hs_isv_estimate(&k->est[i], &fp, models[i].layers, err);
        hs_isv_fp_free(&fp);
        if (rc) break;
        /* Base: fewest GPUs whose even FP16 share fits one GPU, then lower
         * estimated latency. */
        {
            int best = -1, n;
            hs_isv_cfg *sp;
            double best_lat = 0;
            if ((rc = hs_isv_space(&models[i], c->n_gpus, &sp, &n, err))) break;
            for (int j = 0; j < n; j++) {
                double lat, per;
                if (sp[j].var != 0 || !hs_isv_est_has(&k->est[i], &sp[j])) continue;
                per = hs_isv_est_mem_gib(&k->est[i], &sp[j]) * 1073741824.0 / (sp[j].tp * sp[j].pp);
                if (per > gpu_b) continue;
                lat = hs_isv_est_latency_s(&k->est[i], &sp[j], o->out2);
                if (best < 0 || sp[j].tp * sp[j].pp < sp[best].tp * sp[best].pp ||
                    (sp[j].tp * sp[j].pp == sp[best].tp * sp[best].pp && lat < best_lat))
                    best = j, best_lat = lat;
            }
            if (best < 0) {
                sp[0] = (hs_isv_cfg){1, models[i].layers < 8 ? models[i].layers : 8, 0};
                best = 0;
            }
            k->base[i] = sp[best];
            free(sp);
        }
    }
    if (rc) hs_isv_ctl_free(k);
    return rc;
}

void hs_isv_ctl_base_layout(const hs_isv_ctl *k, int model, hs_layout *l)
{
    int gpus[64];
    for (int i = 0; i < 64; i++) gpus[i] = i % k->c->n_gpus;
    hs_isv_layout_even(l, &k->models[model], &k->base[model], gpus);
}

/* True bytes per GPU of a layout (stage-major like the runner). */
static void true_bytes(const hs_isv_ctl *k, int model, int var, const hs_layout *l, double *tb)
{
    int n = 0;
    for (int s = 0; s < l->pp; s++)
        for (int i = 0; i < l->stage[s].tp; i++)
            tb[n++] = hs_isv_stage_bytes(&k->models[model], var, l->stage[s].layers, s == 0,
                                         s == l->pp - 1, l->stage[s].tp, &k->opts);
}

/* Tries cfgs in order; the first that places and loads wins. */
static int deploy_ranked(hs_isv_ctl *k, hs_multi *mm, int model, const hs_isv_cfg *cfgs,
                         int n, int policy, hs_err *err)
{
    for (int i = 0; i < n; i++) {
        hs_isv_gpus g = {hs_multi_n_gpus(mm), hs_multi_free_b(mm), hs_multi_used_b(mm),
                         hs_multi_load(mm)};
        hs_isv_placement pl;
        double tb[64];
        char label[64], cs[40];
        int rc;
        if (hs_isv_place(&k->models[model], &k->est[model], &cfgs[i], &g, policy, k->tau, &pl, NULL))
            continue;
        true_bytes(k, model, cfgs[i].var, &pl.layout, tb);
        hs_isv_cfg_str(&cfgs[i], cs, sizeof cs);
        snprintf(label, sizeof label, "%s", cs);
        for (int s = 0; s < pl.layout.pp && pl.layout.pp > 1; s++) {
            size_t len = strlen(label);
            snprintf(label + len, sizeof label - len, "%s%d", s ? "/" : " L", pl.layout.stage[s].layers);
        }
        rc = hs_multi_add(mm, model, &pl.layout, hs_isv_var(cfgs[i].var)->lat_ratio, 0,
                          pl.charge_b, tb, label, err);
        if (rc == HS_ENOFIT) continue;   /* estimate too low: OOM at load, next one */
        if (rc) return rc;
        snprintf(k->chosen[model], sizeof k->chosen[model], "%s", label);
        return 0;
    }
    return hs_errf(err, HS_ENOFIT, "iserve: %s fits nowhere", k->models[model].name);
}

static int max_tp(const hs_model *m, int n)
{
    int t = 1;
    for (int tp = 2; tp <= 8 && tp <= n; tp *= 2)
        if (m->heads % tp == 0) t = tp;
    return t;
}

static int deploy_accelerate(hs_isv_ctl *k, hs_multi *mm, int model, hs_err *err)
{
    const hs_model *m = &k->models[model];
    const hs_cluster *c = k->c;
    const double *free_b = hs_multi_free_b(mm);
    /* The first GPU holds the embedding and the LM head (device_map order). */
    double fixed_first = hs_isv_stage_bytes(m, 0, 0, 1, 1, 1, &k->opts);
    double fixed_mid = hs_isv_stage_bytes(m, 0, 0, 0, 0, 1, &k->opts);
    double layer_b = hs_isv_stage_bytes(m, 0, 1, 0, 0, 1, &k->opts) - fixed_mid;
    double wlayer = hs_model_layer_params(m) * 2.0, tb[64], offload_b, pcie;
    int L = m->layers, target = (L + c->n_gpus - 1) / c->n_gpus, left = L, ns = 0, rc;
    hs_layout l;
    char label[64];
    memset(&l, 0, sizeof l);
    l.kv_bits = 16;
    for (int g = 0; g < c->n_gpus && left > 0 && ns < 8; g++) {
        double fixed = ns ? fixed_mid : fixed_first;
        int cnt;
        if (free_b[g] < fixed + layer_b) continue;
        cnt = (int)((free_b[g] - fixed) / layer_b);
        if (cnt > target) cnt = target;
        if (cnt > left) cnt = left;
        l.stage[ns].tp = 1;
        l.stage[ns].bits = 16;
        l.stage[ns].layers = cnt;
        l.stage[ns].gpus[0] = g;
        tb[ns] = fixed + cnt * layer_b;
        ns++;
        left -= cnt;
    }
    offload_b = left * wlayer;
    if (ns == 0) {
        /* No GPU holds a layer: everything, embeddings and head included,
         * streams from CPU DRAM through the GPU with the most free memory,
         * which keeps only the runtime overhead and the activations. */
        int best = 0;
        for (int g = 1; g < c->n_gpus; g++)
            if (free_b[g] > free_b[best]) best = g;
        tb[0] = fixed_mid;
        if (free_b[best] < tb[0]) return hs_errf(err, HS_ENOFIT, "accelerate: no GPU memory left");
        l.stage[0].tp = 1;
        l.stage[0].bits = 16;
        l.stage[0].gpus[0] = best;
        offload_b += fixed_first - fixed_mid;
        ns = 1;
    }
    l.pp = ns;
    /* Offloaded layers compute on the last GPU, streamed in every pass. */
    l.stage[ns - 1].layers += left;
    pcie = hs_cluster_gpu(c, l.stage[ns - 1].gpus[0])->pcie_bw * k->opts.perf.link_eff;
    snprintf(label, sizeof label, "accelerate pp%d offload %d/%d layers", ns, left, L);
    rc = hs_multi_add(mm, model, &l, HS_ISV_ACCEL_FACTOR, offload_b / pcie * 1e9, tb, tb, label, err);
    if (!rc) snprintf(k->chosen[model], sizeof k->chosen[model], "%s", label);
    return rc;
}

static int deploy_alpa(hs_isv_ctl *k, hs_multi *mm, int model, hs_err *err)
{
    const hs_isv_alpa *a = &k->alpa;
    int placed = 0;
    if (!a->group) return hs_errf(err, HS_EINVAL, "alpaserve: no plan");
    for (int r = 0; r < a->n_rep[model]; r++) {
        hs_isv_cfg cfg = {a->tp[model], a->pp[model], 0};
        int gpus[64], rc;
        hs_layout l;
        double tb[64], ch[64], est;
        char label[64];
        for (int i = 0; i < a->group; i++) gpus[i] = a->rep_group[model][r] * a->group + i;
        hs_isv_layout_even(&l, &k->models[model], &cfg, gpus);
        true_bytes(k, model, 0, &l, tb);
        est = hs_isv_est_mem_gib(&k->est[model], &cfg) * 1073741824.0 / a->group;
        for (int i = 0; i < a->group; i++) ch[i] = est;
        snprintf(label, sizeof label, "alpaserve tp%d-pp%d x%d", cfg.tp, cfg.pp, a->n_rep[model]);
        rc = hs_multi_add(mm, model, &l, 1.0, 0, ch, tb, label, err);
        if (rc == HS_ENOFIT) continue;
        if (rc) return rc;
        snprintf(k->chosen[model], sizeof k->chosen[model], "%s", label);
        placed++;
    }
    return placed ? 0 : hs_errf(err, HS_ENOFIT, "alpaserve: %s dropped", k->models[model].name);
}

int hs_isv_deploy(void *ctx, hs_multi *mm, int model, hs_err *err)
{
    hs_isv_ctl *k = ctx;
    const hs_model *m = &k->models[model];
    int n = hs_multi_n_gpus(mm), rc;
    if (k->system == HS_ISV_SYS_ISERVE) {
        hs_isv_cfg *sp;
        hs_isv_intent in = k->intent;
        hs_isv_score bs;
        int ns, nr;
        hs_isv_score_of(&k->est[model], &k->base[model], in.output, &bs);
        if (in.kind == HS_ISV_LATENCY_SLO) in.target *= bs.latency_s;
        if (in.kind == HS_ISV_COST_BUDGET) in.target *= bs.cost;
        if ((rc = hs_isv_space(m, n, &sp, &ns, err))) return rc;
        nr = hs_isv_rank(&k->est[model], &in, sp, ns, NULL);
        rc = nr < 0 ? hs_errf(err, HS_ENOMEM, "out of memory")
                    : deploy_ranked(k, mm, model, sp, nr, k->place, err);
        free(sp);
        return rc;
    }
    if (k->system == HS_ISV_SYS_MAXTP || k->system == HS_ISV_SYS_MAXPP) {
        hs_isv_cfg cfg = {1, 1, 0};
        if (k->system == HS_ISV_SYS_MAXTP) cfg.tp = max_tp(m, n);
        else cfg.pp = n < 8 ? n : 8;
        if (cfg.pp > m->layers) cfg.pp = m->layers;
        return deploy_ranked(k, mm, model, &cfg, 1, HS_ISV_PLACE_FIRST, err);
    }
    if (k->system == HS_ISV_SYS_ACCEL) return deploy_accelerate(k, mm, model, err);
    return deploy_alpa(k, mm, model, err);
}

/* ---- AlpaServe-like planning ---- */

/* Rate-weighted mean latency: each model's requests split evenly over its
 * replicas; a group is a processor-sharing server with utilisation rho, so
 * a replica's mean latency is S / (1 - rho).  Overloaded groups and dropped
 * models cost a large penalty per request. */
static double alpa_obj(int nm, int ng, const double *lam, const double *S,
                       const int *nrep, int rep[][8])
{
    double rho[64] = {0}, J = 0;
    for (int m = 0; m < nm; m++)
        for (int r = 0; r < nrep[m]; r++) rho[rep[m][r]] += lam[m] / nrep[m] * S[m];
    for (int m = 0; m < nm; m++) {
        if (!nrep[m]) {
            J += lam[m] * S[m] * 1e4;
            continue;
        }
        for (int r = 0; r < nrep[m]; r++) {
            double u = rho[rep[m][r]];
            J += lam[m] / nrep[m] * (u < 0.99 ? S[m] / (1 - u) : S[m] * (100 + 1e3 * u));
        }
    }
    (void)ng;
    return J;
}

int hs_isv_alpa_plan(hs_isv_ctl *k, const double *lam, int mean_output, int star, hs_err *err)
{
    int n = k->c->n_gpus, nm = k->n_models, found = 0, placed, best_placed = 0;
    double gpu_b = hs_cluster_gpu(k->c, 0)->mem_bytes * k->usable;
    memset(&k->alpa, 0, sizeof k->alpa);
    for (int g = 1; g <= 8 && g <= n; g *= 2) {
        int ng = n / g, nrep[64] = {0}, rep[64][8], tp[64], pp[64];
        double left[64], need[64], S[64], J;
        if (n % g || ng > 64) continue;
        for (int i = 0; i < ng; i++) left[i] = gpu_b;
        for (int m = 0; m < nm; m++) {
            hs_isv_cfg cfg;
            tp[m] = max_tp(&k->models[m], g);
            pp[m] = g / tp[m];
            cfg = (hs_isv_cfg){tp[m], pp[m], 0};
            if (pp[m] > k->models[m].layers || !hs_isv_est_has(&k->est[m], &cfg)) {
                need[m] = INFINITY;   /* cannot use this group size: its drop costs its base work */
                S[m] = hs_isv_est_latency_s(&k->est[m], &k->base[m], mean_output);
                continue;
            }
            need[m] = hs_isv_est_mem_gib(&k->est[m], &cfg) * 1073741824.0 / g;
            S[m] = hs_isv_est_latency_s(&k->est[m], &cfg, mean_output);
        }
        if (star) {
            /* Every model first, heaviest load first, onto the emptiest group. */
            int order[64];
            for (int m = 0; m < nm; m++) order[m] = m;
            for (int i = 0; i < nm; i++)
                for (int j = i + 1; j < nm; j++)
                    if (lam[order[j]] * S[order[j]] > lam[order[i]] * S[order[i]]) {
                        int t = order[i];
                        order[i] = order[j];
                        order[j] = t;
                    }
            for (int i = 0; i < nm; i++) {
                int m = order[i], bg = -1;
                for (int q = 0; q < ng; q++)
                    if (left[q] >= need[m] && (bg < 0 || left[q] > left[bg])) bg = q;
                if (bg < 0) continue; /* fits no group: dropped after all */
                rep[m][nrep[m]++] = bg;
                left[bg] -= need[m];
            }
        }
        for (;;) {
            double J0 = alpa_obj(nm, ng, lam, S, nrep, rep), best = J0;
            int bm = -1, bq = -1;
            for (int m = 0; m < nm; m++) {
                if (nrep[m] >= 8) continue;
                for (int q = 0; q < ng; q++) {
                    int dup = 0;
                    double Jn;
                    for (int r = 0; r < nrep[m]; r++) dup |= rep[m][r] == q;
                    if (dup || left[q] < need[m]) continue;
                    rep[m][nrep[m]++] = q;
                    Jn = alpa_obj(nm, ng, lam, S, nrep, rep);
                    nrep[m]--;
                    if (Jn < best * (1 - 1e-9)) best = Jn, bm = m, bq = q;
                }
            }
            if (bm < 0) break;
            rep[bm][nrep[bm]++] = bq;
            left[bq] -= need[bm];
        }
        J = alpa_obj(nm, ng, lam, S, nrep, rep);
        placed = 0;
        for (int m = 0; m < nm; m++) placed += nrep[m] > 0;
        /* AlpaServe* prefers the group size that drops the fewest models. */
        if (!found || (star && placed > best_placed) ||
            ((!star || placed == best_placed) && J < k->alpa.objective)) {
            found = 1;
            best_placed = placed;
            k->alpa.group = g;
            k->alpa.objective = J;
            for (int m = 0; m < nm; m++) {
                k->alpa.n_rep[m] = nrep[m];
                k->alpa.tp[m] = tp[m];
                k->alpa.pp[m] = pp[m];
                for (int r = 0; r < nrep[m]; r++) k->alpa.rep_group[m][r] = rep[m][r];
            }
        }
    }
    if (!found) return hs_errf(err, HS_ENOFIT, "alpaserve: no group size fits the cluster");
    return 0;
}
