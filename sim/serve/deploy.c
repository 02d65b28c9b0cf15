/* deploy.c - deployments (JSON in/out, checks) and replica building; see
 * deploy.h. */
#include "serve/deploy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "llm/quant.h"

void hs_deploy_free(hs_deploy *d)
{
    if (!d) return;
    for (int32_t i = 0; i < d->n && d->r; i++) free(d->r[i].kv_route);
    free(d->r);
    free(d->engine);
    d->r = NULL;
    d->engine = NULL;
    d->n = 0;
    free(d->attn);
    d->attn = NULL;
    d->n_attn = 0;
}

int hs_deploy_add_attn(hs_deploy *d, const hs_deploy_attn *a, hs_err *err)
{
    hs_deploy_attn *na = realloc(d->attn, (size_t)(d->n_attn + 1) * sizeof *na);
    if (!na) return hs_errf(err, HS_ENOMEM, "out of memory adding an attention worker");
    d->attn = na;
    d->attn[d->n_attn++] = *a;
    return 0;
}

int hs_deploy_set_policy(hs_deploy *d, const char *policy, const char *engine_json, hs_err *err)
{
    char *cp = NULL;
    if (engine_json && !(cp = strdup(engine_json)))
        return hs_errf(err, HS_ENOMEM, "out of memory (deployment settings)");
    free(d->engine);
    d->engine = cp;
    snprintf(d->policy, sizeof d->policy, "%s", policy ? policy : "");
    return 0;
}

int hs_deploy_add(hs_deploy *d, const hs_deploy_replica *r, hs_err *err)
{
    hs_deploy_replica *nr = realloc(d->r, (size_t)(d->n + 1) * sizeof *nr);
    if (!nr) return hs_errf(err, HS_ENOMEM, "out of memory adding a replica");
    d->r = nr;
    d->r[d->n++] = *r;
    return 0;
}

/* kv_route of replica i: on a prefill replica, one weight per replica,
 * finite, >= 0, positive only toward decode replicas. */
static int hs_deploy_check_route(const hs_deploy *d, int32_t i, const char *where, hs_err *err)
{
    const hs_deploy_replica *r = &d->r[i];
    if (strcmp(r->role, "prefill"))
        return hs_errf(err, HS_EINVAL, "%s: replicas[%d].kv_route: only prefill replicas route KV (role is %s)",
                       where, i, r->role);
    if (r->n_kv_route != d->n)
        return hs_errf(err, HS_EINVAL, "%s: replicas[%d].kv_route: %d weights for %d replicas",
                       where, i, r->n_kv_route, d->n);
    for (int32_t j = 0; j < d->n; j++) {
        double w = r->kv_route[j];
        if (!isfinite(w) || w < 0)
            return hs_errf(err, HS_ERANGE, "%s: replicas[%d].kv_route[%d]: %g is not a finite weight >= 0",
                           where, i, j, w);
        if (w > 0 && strcmp(d->r[j].role, "decode"))
            return hs_errf(err, HS_EINVAL, "%s: replicas[%d].kv_route[%d]: replica %d is %s, not decode",
                           where, i, j, j, d->r[j].role);
    }
    return 0;
}

int hs_deploy_check(const hs_deploy *d, const hs_model *m, const hs_cluster *c,
                    const char *where, hs_err *err)
{
    char *used;
    int rc = 0;
    if (d->n <= 0) return hs_errf(err, HS_EINVAL, "%s: deployment has no replicas", where);
    used = calloc((size_t)c->n_gpus, 1);
    if (!used) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int32_t i = 0; i < d->n && !rc; i++) {
        hs_layout placed = d->r[i].layout;
        const hs_layout *l = &placed;
        int layers = 0, enc = 0, E = m->encoder_layers;
        const char *role = d->r[i].role;
        if (l->pp < 1 || l->pp > HS_MAX_PP) {
            rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d]: %d stages (1..%d)", where, i, l->pp, HS_MAX_PP);
            break;
        }
        if (l->kv_bits != 16 && l->kv_bits != 8) {
            rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].kv_bits: %d is not 16 or 8", where, i, l->kv_bits);
            break;
        }
        if (d->r[i].quant_kernels[0]) {
            char key[1300];
            snprintf(key, sizeof key, "%s: replicas[%d].quant_kernels", where, i);
            if ((rc = hs_perf_check_kernels(d->r[i].quant_kernels, key, err))) break;
            if (!strcmp(d->r[i].quant_kernels, "lptorch") && (rc = hs_layout_check_lptorch(m, l, err))) {
                hs_err_prefix(err, "%s: ", key);
                break;
            }
        }
        if (d->r[i].latency_scale != 0 && !(d->r[i].latency_scale >= HS_LATENCY_SCALE_MIN &&
                                            d->r[i].latency_scale <= HS_LATENCY_SCALE_MAX)) {
            rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].latency_scale: %g is not in %g..%g", where, i,
                         d->r[i].latency_scale, HS_LATENCY_SCALE_MIN, HS_LATENCY_SCALE_MAX);
            break;
        }
        for (int s = 0; s < l->pp && !rc; s++)
            if (!E && l->stage[s].enc_layers)
                rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d].stages[%d].enc_layers: %s has no encoder",
                             where, i, s, m->name);
        if (rc) break;
        for (int k = 0; k < HS_MAX_LAYERS && !rc; k++)
            if (l->layer_bits[k] && hs_bits_index(l->layer_bits[k]) < 0)
                rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d]: layer %d: %d bits is not 16, 8, 4 or 3",
                             where, i, k, l->layer_bits[k]);
        if (rc) break;
        hs_layout_place_enc(&placed, m, role);
        for (int s = 0; s < l->pp && !rc; s++) {
            const hs_stage_layout *st = &l->stage[s];
            layers += st->layers;
            enc += st->enc_layers;
            if (st->tp < 1 || st->tp > HS_MAX_TP)
                rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].stages[%d].tp: %d (1..%d)", where, i, s, st->tp, HS_MAX_TP);
            else if (st->layers < 0 || st->enc_layers < 0 || st->layers + st->enc_layers < 1)
                rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].stages[%d].layers: %d%s; a stage holds at least one layer",
                             where, i, s, st->layers, E ? " (and enc_layers)" : "");
            else if (st->bits != 16 && st->bits != 8 && st->bits != 4 && st->bits != 3)
                rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].stages[%d].bits: %d is not 16, 8, 4 or 3", where, i, s, st->bits);
            else if (m->heads % st->tp)
                rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d].stages[%d].tp: %d does not divide the %d heads of %s",
                             where, i, s, st->tp, m->heads, m->name);
            for (int k = 0; k < st->tp && !rc; k++) {
                int g = st->gpus[k];
                if (g < 0 || g >= c->n_gpus)
                    rc = hs_errf(err, HS_ERANGE, "%s: replicas[%d].stages[%d].gpus: GPU %d not in cluster %s (0..%d)",
                                 where, i, s, g, c->name, c->n_gpus - 1);
                else if (used[g])
                    rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d].stages[%d].gpus: GPU %d is used twice", where, i, s, g);
                else
                    used[g] = 1;
            }
        }
        if (!rc && layers != m->layers && !(E && !strcmp(role, "prefill") && layers == 0))
            rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d]: stages hold %d %slayers, %s has %d%s",
                         where, i, layers, E ? "decoder " : "", m->name, m->layers,
                         E && !strcmp(role, "prefill") ? " (an encoder replica may hold none)" : "");
        if (!rc && E && !strcmp(role, "decode") && enc)
            rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d]: a decode replica holds no encoder layer (stages hold %d): "
                         "it receives the encoder output", where, i, enc);
        else if (!rc && E && strcmp(role, "decode") && enc != E)
            rc = hs_errf(err, HS_EINVAL, "%s: replicas[%d]: stages hold %d encoder layers, %s has %d",
                         where, i, enc, m->name, E);
        if (!rc && d->r[i].kv_route) rc = hs_deploy_check_route(d, i, where, err);
    }
    for (int32_t i = 0; i < d->n_attn && !rc; i++) {
        const hs_deploy_attn *a = &d->attn[i];
        if (a->replica < 0 || a->replica >= d->n)
            rc = hs_errf(err, HS_ERANGE, "%s: attention[%d].replica: %d not in 0..%d", where, i, a->replica, d->n - 1);
        else if (a->stage < 0 || a->stage >= d->r[a->replica].layout.pp)
            rc = hs_errf(err, HS_ERANGE, "%s: attention[%d].stage: %d not in 0..%d", where, i, a->stage,
                         d->r[a->replica].layout.pp - 1);
        else if (a->gpu < 0 || a->gpu >= c->n_gpus)
            rc = hs_errf(err, HS_ERANGE, "%s: attention[%d].gpu: GPU %d not in cluster %s (0..%d)", where, i,
                         a->gpu, c->name, c->n_gpus - 1);
        else if (used[a->gpu])
            rc = hs_errf(err, HS_EINVAL, "%s: attention[%d].gpu: GPU %d is used twice", where, i, a->gpu);
        else
            used[a->gpu] = 1;
    }
    free(used);
    return rc;
}

char *hs_deploy_to_json(const hs_deploy *d)
{
    cJSON *root = cJSON_CreateObject(), *reps;
    char *txt;
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "model", d->model);
    cJSON_AddStringToObject(root, "cluster", d->cluster);
    cJSON_AddStringToObject(root, "planner", d->planner);
    reps = cJSON_AddArrayToObject(root, "replicas");
    for (int32_t i = 0; i < d->n; i++) {
        const hs_layout *l = &d->r[i].layout;
        cJSON *r = cJSON_CreateObject(), *stages;
        int first = 0;   /* the stage's first decoder layer */
        cJSON_AddStringToObject(r, "role", d->r[i].role);
        cJSON_AddNumberToObject(r, "weight", d->r[i].weight);
        cJSON_AddNumberToObject(r, "kv_bits", l->kv_bits);
        if (d->r[i].kv_route)
            cJSON_AddItemToObject(r, "kv_route", cJSON_CreateDoubleArray(d->r[i].kv_route, d->r[i].n_kv_route));
        if (d->r[i].latency_scale != 0 && d->r[i].latency_scale != 1) {
            /* digits enough to read back exactly: cJSON's number printer
             * settles for 15 when they read back within an epsilon, and a
             * run of the file must price as the planner's own run does, bit
             * for bit */
            char num[32];
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof num, "%.*g", prec, d->r[i].latency_scale);
                if (strtod(num, NULL) == d->r[i].latency_scale) break;   /* the shortest exact */
            }
            cJSON_AddRawToObject(r, "latency_scale", num);
        }
        if (d->r[i].quant_kernels[0]) cJSON_AddStringToObject(r, "quant_kernels", d->r[i].quant_kernels);
        stages = cJSON_AddArrayToObject(r, "stages");
        for (int s = 0; s < l->pp; s++) {
            cJSON *st = cJSON_CreateObject();
            cJSON_AddNumberToObject(st, "tp", l->stage[s].tp);
            cJSON_AddNumberToObject(st, "layers", l->stage[s].layers);
            if (l->enc_set) cJSON_AddNumberToObject(st, "enc_layers", l->stage[s].enc_layers);
            cJSON_AddNumberToObject(st, "bits", l->stage[s].bits);
            cJSON_AddItemToObject(st, "gpus", cJSON_CreateIntArray(l->stage[s].gpus, l->stage[s].tp));
            if (l->stage[s].layers > 0 && first + l->stage[s].layers <= HS_MAX_LAYERS) {
                /* per-layer widths, only where the layout names some */
                int any = 0, lb[HS_MAX_LAYERS];
                for (int k = 0; k < l->stage[s].layers; k++) {
                    any |= l->layer_bits[first + k] != 0;
                    lb[k] = l->layer_bits[first + k] ? l->layer_bits[first + k] : l->stage[s].bits;
                }
                if (any) cJSON_AddItemToObject(st, "layer_bits", cJSON_CreateIntArray(lb, l->stage[s].layers));
            }
            first += l->stage[s].layers;
            cJSON_AddItemToArray(stages, st);
        }
        cJSON_AddItemToArray(reps, r);
    }
    if (d->policy[0]) cJSON_AddStringToObject(root, "policy", d->policy);
    if (d->summary[0]) cJSON_AddStringToObject(root, "summary", d->summary);
    if (d->engine) {
        cJSON *eng = cJSON_Parse(d->engine);
        if (eng) cJSON_AddItemToObject(root, "engine", eng);
    }
    if (d->n_attn) {
        cJSON *at = cJSON_AddArrayToObject(root, "attention");
        for (int32_t i = 0; i < d->n_attn; i++) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "replica", d->attn[i].replica);
            cJSON_AddNumberToObject(a, "stage", d->attn[i].stage);
            cJSON_AddNumberToObject(a, "gpu", d->attn[i].gpu);
            cJSON_AddItemToArray(at, a);
        }
    }
    txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return txt;
}

int hs_deploy_write(const hs_deploy *d, const char *path, hs_err *err)
{
    char *txt = hs_deploy_to_json(d);
    FILE *fp;
    int ok;
    if (!txt) return hs_errf(err, HS_ENOMEM, "out of memory writing %s", path);
    fp = fopen(path, "w");
    if (!fp) {
        free(txt);
        return hs_errf(err, HS_EIO, "%s: cannot write", path);
    }
    ok = fputs(txt, fp) >= 0 && fputc('\n', fp) != EOF;
    ok = (fclose(fp) == 0) && ok;
    free(txt);
    return ok ? 0 : hs_errf(err, HS_EIO, "%s: write failed", path);
}

/* A stage's optional "layer_bits": one width per decoder layer, into the
 * layout's layer_bits at the stage's first layer (stages before s are
 * read). */
static int read_layer_bits(const cJSON *st, hs_layout *l, int s, const char *where, hs_err *err)
{
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(st, "layer_bits"), *b;
    int first = 0, k = 0;
    if (!lb) return 0;
    for (int r = 0; r < s; r++) first += l->stage[r].layers;
    if (!cJSON_IsArray(lb) || cJSON_GetArraySize(lb) != l->stage[s].layers)
        return hs_errf(err, HS_EPARSE, "%s: layer_bits: expected %d bit-widths (one per layer)",
                       where, l->stage[s].layers);
    if (first + l->stage[s].layers > HS_MAX_LAYERS)
        return hs_errf(err, HS_ERANGE, "%s: layer_bits: more than %d layers in the replica",
                       where, HS_MAX_LAYERS);
    cJSON_ArrayForEach(b, lb) {
        int v = cJSON_IsNumber(b) ? hs_bits_of(b->valuedouble) : -1;
        if (v < 0)
            return hs_errf(err, HS_EPARSE, "%s: layer_bits[%d]: not 16, 8, 4 or 3", where, k);
        l->layer_bits[first + k++] = (unsigned char)v;
    }
    return 0;
}

int hs_deploy_read(hs_deploy *d, const char *path, hs_err *err)
{
    cJSON *root;
    const cJSON *reps, *r;
    int rc, i = 0;
    char where[1200];
    memset(d, 0, sizeof *d);
    if ((rc = hs_json_load(path, &root, err))) return rc;
    if ((rc = hs_json_str(root, "model", d->model, sizeof d->model, path, err)) ||
        (rc = hs_json_str(root, "cluster", d->cluster, sizeof d->cluster, path, err)) ||
        (rc = hs_json_str_opt(root, "planner", d->planner, sizeof d->planner, path, err)) ||
        (rc = hs_json_str_opt(root, "policy", d->policy, sizeof d->policy, path, err)) ||
        (rc = hs_json_str_opt(root, "summary", d->summary, sizeof d->summary, path, err)))
        goto out;
    {
        const cJSON *eng = cJSON_GetObjectItemCaseSensitive(root, "engine");
        if (eng && !cJSON_IsObject(eng)) {
            rc = hs_errf(err, HS_EPARSE, "%s: engine: expected an object of engine settings", path);
            goto out;
        }
        if (eng && !(d->engine = cJSON_PrintUnformatted(eng))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory reading %s", path);
            goto out;
        }
    }
    reps = cJSON_GetObjectItemCaseSensitive(root, "replicas");
    if (!cJSON_IsArray(reps) || !cJSON_GetArraySize(reps)) {
        rc = hs_errf(err, HS_EPARSE, "%s: replicas: expected a non-empty array", path);
        goto out;
    }
    cJSON_ArrayForEach(r, reps) {
        hs_deploy_replica dr;
        const cJSON *stages, *st;
        long kvb = 16;
        int s = 0;
        memset(&dr, 0, sizeof dr);
        snprintf(where, sizeof where, "%s: replicas[%d]", path, i);
        strcpy(dr.role, "colocated");
        dr.weight = 1;
        if ((rc = hs_json_str_opt(r, "role", dr.role, sizeof dr.role, where, err)) ||
            (rc = hs_json_num_opt(r, "weight", 0, 1e9, &dr.weight, where, err)) ||
            (rc = hs_json_int_opt(r, "kv_bits", 8, 16, &kvb, where, err)) ||
            (rc = hs_json_num_opt(r, "latency_scale", HS_LATENCY_SCALE_MIN, HS_LATENCY_SCALE_MAX,
                                  &dr.latency_scale, where, err)) ||
            (rc = hs_json_str_opt(r, "quant_kernels", dr.quant_kernels, sizeof dr.quant_kernels, where, err)))
            goto out;
        dr.layout.kv_bits = (int)kvb;
        stages = cJSON_GetObjectItemCaseSensitive(r, "stages");
        if (!cJSON_IsArray(stages) || !cJSON_GetArraySize(stages) ||
            cJSON_GetArraySize(stages) > HS_MAX_PP) {
            rc = hs_errf(err, HS_EPARSE, "%s: stages: expected 1..%d stages", where, HS_MAX_PP);
            goto out;
        }
        cJSON_ArrayForEach(st, stages) {
            hs_stage_layout *sl = &dr.layout.stage[s];
            const cJSON *g, *gpus = cJSON_GetObjectItemCaseSensitive(st, "gpus");
            long tp = 0, layers = 0, bits = 16, enc = 0;
            int k = 0;
            snprintf(where, sizeof where, "%s: replicas[%d].stages[%d]", path, i, s);
            if (cJSON_GetObjectItemCaseSensitive(st, "enc_layers")) dr.layout.enc_set = 1;
            if ((rc = hs_json_int(st, "tp", 1, HS_MAX_TP, &tp, where, err)) ||
                (rc = hs_json_int(st, "layers", 0, 100000, &layers, where, err)) ||
                (rc = hs_json_int_opt(st, "enc_layers", 0, 100000, &enc, where, err)) ||
                (rc = hs_json_int_opt(st, "bits", 3, 16, &bits, where, err)))
                goto out;
            if (!cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) != tp) {
                rc = hs_errf(err, HS_EPARSE, "%s: gpus: expected %ld GPU ids (one per TP rank)", where, tp);
                goto out;
            }
            cJSON_ArrayForEach(g, gpus) {
                if (!cJSON_IsNumber(g) || g->valuedouble != floor(g->valuedouble) ||
                    g->valuedouble < 0 || g->valuedouble > 65535) {
                    rc = hs_errf(err, HS_EPARSE, "%s: gpus[%d]: expected a GPU id", where, k);
                    goto out;
                }
                sl->gpus[k++] = (int)g->valuedouble;
            }
            sl->tp = (int)tp;
            sl->layers = (int)layers;
            sl->enc_layers = (int)enc;
            sl->bits = (int)bits;
            if ((rc = read_layer_bits(st, &dr.layout, s, where, err))) goto out;
            s++;
        }
        dr.layout.pp = s;
        {
            const cJSON *kr = cJSON_GetObjectItemCaseSensitive(r, "kv_route"), *w;
            if (kr) {
                int k = 0;
                snprintf(where, sizeof where, "%s: replicas[%d].kv_route", path, i);
                if (!cJSON_IsArray(kr) || !cJSON_GetArraySize(kr) || cJSON_GetArraySize(kr) > 1 << 20) {
                    rc = hs_errf(err, HS_EPARSE, "%s: expected an array of weights", where);
                    goto out;
                }
                dr.kv_route = calloc((size_t)cJSON_GetArraySize(kr), sizeof *dr.kv_route);
                if (!dr.kv_route) {
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
                    goto out;
                }
                dr.n_kv_route = cJSON_GetArraySize(kr);
                cJSON_ArrayForEach(w, kr) {
                    if (!cJSON_IsNumber(w) || !isfinite(w->valuedouble) || w->valuedouble < 0) {
                        free(dr.kv_route);
                        rc = hs_errf(err, HS_EPARSE, "%s[%d]: expected a number >= 0", where, k);
                        goto out;
                    }
                    dr.kv_route[k++] = w->valuedouble;
                }
            }
        }
        if ((rc = hs_deploy_add(d, &dr, err))) {
            free(dr.kv_route);
            goto out;
        }
        i++;
    }
    if ((reps = cJSON_GetObjectItemCaseSensitive(root, "attention"))) {
        if (!cJSON_IsArray(reps)) {
            rc = hs_errf(err, HS_EPARSE, "%s: attention: expected an array", path);
            goto out;
        }
        i = 0;
        cJSON_ArrayForEach(r, reps) {
            long rep = 0, stage = 0, gpu = 0;
            hs_deploy_attn a;
            snprintf(where, sizeof where, "%s: attention[%d]", path, i++);
            if ((rc = hs_json_int(r, "replica", 0, 1 << 20, &rep, where, err)) ||
                (rc = hs_json_int(r, "stage", 0, HS_MAX_PP - 1, &stage, where, err)) ||
                (rc = hs_json_int(r, "gpu", 0, 65535, &gpu, where, err)))
                goto out;
            a.replica = (int32_t)rep;
            a.stage = (int32_t)stage;
            a.gpu = (int32_t)gpu;
            if ((rc = hs_deploy_add_attn(d, &a, err))) goto out;
        }
    }
out:
    cJSON_Delete(root);
    if (rc) hs_deploy_free(d);
    return rc;
}

void hs_layout_gpus_str(const hs_layout *l, const hs_cluster *c, char *buf,
                        size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int s = 0; s < l->pp && n < cap; s++) {
        const hs_stage_layout *st = &l->stage[s];
        n += (size_t)snprintf(buf + n, cap - n, "%s%s:", s ? "|" : "",
                              hs_cluster_gpu(c, st->gpus[0])->name);
        for (int k = 0; k < st->tp && n < cap; k++)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d", k ? "," : "", st->gpus[k]);
    }
}

void hs_layout_place_enc(hs_layout *l, const hs_model *m, const char *role)
{
    int E = m->encoder_layers, tot = 0, cum = 0, prev = 0, by_gpus;
    if (l->enc_set) return;
    l->enc_set = 1;
    for (int s = 0; s < l->pp; s++) {
        l->stage[s].enc_layers = 0;
        tot += l->stage[s].layers > 0 ? l->stage[s].layers : 0;
    }
    if (!E || !strcmp(role, "decode")) return;
    by_gpus = tot == 0;
    if (by_gpus)
        for (int s = 0; s < l->pp; s++) tot += l->stage[s].tp > 0 ? l->stage[s].tp : 0;
    if (tot <= 0) return; /* no stage to hold them: hs_deploy_check says so */
    /* cumulative rounding: deterministic, sums to E exactly */
    for (int s = 0; s < l->pp; s++) {
        int c;
        cum += by_gpus ? (l->stage[s].tp > 0 ? l->stage[s].tp : 0)
                       : (l->stage[s].layers > 0 ? l->stage[s].layers : 0);
        c = (int)floor((double)E * cum / tot + 0.5);
        l->stage[s].enc_layers = c - prev;
        prev = c;
    }
}

int64_t hs_layout_kv_blocks(const hs_model *m, const hs_cluster *c,
                            const hs_layout *lay, const hs_engine_cfg *ec,
                            int max_tokens, hs_err *err)
{
    int64_t blocks = INT64_MAX;
    hs_layout placed = *lay;
    const hs_layout *l = &placed;
    int dec = 0;
    /* a layout nobody placed the encoder of: a whole model (colocated) */
    hs_layout_place_enc(&placed, m, "colocated");
    for (int s = 0; s < l->pp; s++) dec += l->stage[s].layers;
    for (int s = 0; s < l->pp; s++) {
        const hs_stage_layout *st = &l->stage[s];
        hs_stage_mem mem;
        /* an encoder replica with no decoder layer holds no LM head */
        int n[HS_NBITS];
        hs_model_stage_mem_enc(m, st->layers, st->enc_layers, s == 0, s == l->pp - 1 && dec > 0,
                               st->tp, st->bits, l->kv_bits, max_tokens, ec->max_num_seqs, &mem);
        if (hs_layout_stage_bits(l, s, n)) {
            /* per-layer widths: the stage's weights without its decoder
             * layers (embeddings, head, encoder layers), plus each layer at
             * its own width */
            hs_stage_mem bare;
            hs_model_stage_mem_enc(m, 0, st->enc_layers, s == 0, s == l->pp - 1 && dec > 0,
                                   st->tp, st->bits, l->kv_bits, max_tokens, ec->max_num_seqs, &bare);
            mem.weights = bare.weights + hs_qmem_layers_engine(m, n, st->tp);
        }
        for (int k = 0; k < st->tp; k++) {
            const hs_gpu *g = hs_cluster_gpu(c, st->gpus[k]);
            double avail = g->mem_bytes * ec->gpu_mem_util - mem.weights - mem.activation;
            double b;
            if (avail <= 0)
                return hs_errf(err, HS_ENOFIT,
                               "%s does not fit: stage %d on GPU %d (%s) needs %.1f GiB of weights and %.1f GiB of activations, %.1f GiB usable",
                               m->name, s, st->gpus[k], g->name, mem.weights / 1073741824.0,
                               mem.activation / 1073741824.0,
                               g->mem_bytes * ec->gpu_mem_util / 1073741824.0);
            b = floor(avail / (mem.kv_per_token * ec->block_size));
            if ((int64_t)b < blocks) blocks = (int64_t)b;
        }
    }
    return blocks;
}

void hs_replicas_free(hs_replica *r, int32_t n)
{
    if (!r) return;
    for (int32_t i = 0; i < n; i++) {
        if (r[i].pfree) r[i].pfree(&r[i]);
        hs_perf_free(&r[i].perf);
        free(r[i].kv_route);
    }
    free(r);
}

int hs_replicas_build(hs_replica **out, const hs_deploy *d, const hs_model *m,
                      const hs_cluster *c, const hs_engine_cfg *ec,
                      const hs_perf_cfg *pc, int max_tokens, int32_t max_model_len,
                      hs_err *err)
{
    hs_replica *r = calloc((size_t)d->n, sizeof *r);
    int rc;
    *out = NULL;
    if (!r) return hs_errf(err, HS_ENOMEM, "out of memory building replicas");
    for (int32_t i = 0; i < d->n; i++) {
        hs_layout placed = d->r[i].layout;
        const hs_layout *l = &placed;
        int64_t blocks;
        hs_layout_place_enc(&placed, m, d->r[i].role);
        blocks = hs_layout_kv_blocks(m, c, l, ec, max_tokens, err);
        if (blocks < 0) {
            hs_err_prefix(err, "replica %d: ", i);
            rc = (int)blocks;
            goto fail;
        }
        if (blocks / l->pp * ec->block_size < max_model_len) {
            rc = hs_errf(err, HS_ENOFIT,
                         "replica %d: KV cache holds %lld tokens per lane, less than one %d-token context; lower engine.max_model_len or use more GPUs",
                         i, (long long)(blocks / l->pp * ec->block_size), max_model_len);
            goto fail;
        }
        r[i].id = i;
        snprintf(r[i].role, sizeof r[i].role, "%s", d->r[i].role);
        if (!strcmp(r[i].role, "colocated")) r[i].role_kind = HS_ROLE_COLOCATED;
        else if (!strcmp(r[i].role, "prefill")) r[i].role_kind = HS_ROLE_PREFILL;
        else if (!strcmp(r[i].role, "decode")) r[i].role_kind = HS_ROLE_DECODE;
        else {
            rc = hs_errf(err, HS_EINVAL, "replica %d: role \"%s\" is not colocated, prefill or decode",
                         i, r[i].role);
            goto fail;
        }
        r[i].kv_bytes_token_layer = hs_model_kv_bytes_token_layer(m, 1, l->kv_bits);
        r[i].encdec = m->encoder_layers > 0;
        r[i].enc_out_bytes_token = m->hidden * 2.0;
        r[i].window = m->max_seq_len;
        for (int s = 0; s < l->pp; s++) {
            r[i].dec_layers += l->stage[s].layers;
            r[i].enc_layers += l->stage[s].enc_layers;
        }
        r[i].layout = *l;
        r[i].kv_blocks = blocks;
        r[i].weight = d->r[i].weight;
        if (d->r[i].kv_route) {
            r[i].kv_route = malloc((size_t)d->r[i].n_kv_route * sizeof *r[i].kv_route);
            if (!r[i].kv_route) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory building replicas");
                goto fail;
            }
            memcpy(r[i].kv_route, d->r[i].kv_route, (size_t)d->r[i].n_kv_route * sizeof *r[i].kv_route);
            r[i].n_kv_route = d->r[i].n_kv_route;
        }
        for (int s = 0; s < l->pp; s++)
            r[i].price_per_hour += hs_cluster_price(c, l->stage[s].gpus, l->stage[s].tp);
        {
            /* the kernels the replica was planned with */
            hs_perf_cfg own = *pc;
            if (d->r[i].quant_kernels[0])
                snprintf(own.quant_kernels, sizeof own.quant_kernels, "%s", d->r[i].quant_kernels);
            if ((rc = hs_perf_build(&r[i].perf, &own, m, c, l, max_tokens, ec->max_num_seqs, err))) {
                hs_err_prefix(err, "replica %d: ", i);
                goto fail;
            }
        }
        if (d->r[i].latency_scale > 0 && d->r[i].latency_scale != 1) hs_perf_scale(&r[i].perf, d->r[i].latency_scale);
    }
    *out = r;
    return 0;
fail:
    hs_replicas_free(r, d->n);
    return rc;
}
