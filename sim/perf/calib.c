/* calib.c - reader and writer of the shipped calibration; see calib.h.
 * (hs_calib_build, which needs the cross-validation evaluator, is in
 * crossval.c.)
 *
 * Invariant: a loaded entry's fitted kinds have finite parameters > 0 (the
 * fit's own invariant, checked again here since the file is an input), so
 * predictions from it are finite. */
#include "perf/calib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/conf.h"

static int kind_find(const char *name)
{
    for (int k = 0; k < HS_FK_COUNT; k++)
        if (!strcmp(hs_fit_kind_name(k), name)) return k;
    return -1;
}

/* ---- writer ------------------------------------------------------------------- */

static cJSON *entry_json(const hs_calib_entry *e)
{
    cJSON *o = cJSON_CreateObject(), *kinds, *cv, *gl;
    int bad = !o;
    if (bad) return NULL;
    bad = !cJSON_AddStringToObject(o, "gpu", e->gpu) ||
          !cJSON_AddNumberToObject(o, "tables", e->n_tables) ||
          !cJSON_AddStringToObject(o, "models", e->models) ||
          !(gl = cJSON_AddArrayToObject(o, "trained_on"));
    for (int i = 0; !bad && i < e->fit.n_gpus; i++) {
        cJSON *s = cJSON_CreateString(e->fit.gpus[i]);
        bad = !s || !cJSON_AddItemToArray(gl, s);
    }
    bad = bad || !(cv = cJSON_AddObjectToObject(o, "cv"));
    if (!bad)
        bad = !cJSON_AddNumberToObject(cv, "layer_median_ape", e->cv.layer_med) ||
              !cJSON_AddNumberToObject(cv, "layer_p90_ape", e->cv.layer_p90) ||
              !cJSON_AddNumberToObject(cv, "layer_bias", e->cv.layer_bias) ||
              !cJSON_AddNumberToObject(cv, "attention_median_ape", e->cv.attn_med) ||
              !cJSON_AddNumberToObject(cv, "layer_points", e->cv.n);
    if (!bad && e->cv.fold_med >= 0)
        bad = !cJSON_AddNumberToObject(cv, "gpu_fold_median_ape", e->cv.fold_med) ||
              !cJSON_AddNumberToObject(cv, "gpu_fold_min_ape", e->cv.fold_lo) ||
              !cJSON_AddNumberToObject(cv, "gpu_fold_max_ape", e->cv.fold_hi) ||
              !cJSON_AddNumberToObject(cv, "gpu_folds", e->cv.folds);
    bad = bad || !(kinds = cJSON_AddArrayToObject(o, "kinds"));
    for (int k = 0; !bad && k < HS_FK_COUNT; k++) {
        const hs_kindfit *kf = &e->fit.k[k];
        cJSON *ko, *par;
        if (kf->from < 0) continue;
        ko = cJSON_CreateObject();
        bad = !ko || !cJSON_AddItemToArray(kinds, ko);
        if (bad) {
            if (ko) cJSON_Delete(ko);
            break;
        }
        bad = !cJSON_AddStringToObject(ko, "kind", hs_fit_kind_name(k)) ||
              !cJSON_AddStringToObject(ko, "from", hs_fit_kind_name(kf->from)) ||
              !cJSON_AddNumberToObject(ko, "rows", kf->rows) ||
              !cJSON_AddBoolToObject(ko, "memory_only", kf->memory_only) ||
              (kf->sm_term && !cJSON_AddBoolToObject(ko, "sm_term", 1)) ||
              (kf->sm_term && !cJSON_AddNumberToObject(ko, "hbm_factor", kf->par[HS_FP_HBM])) ||
              !cJSON_AddNumberToObject(ko, "fit_median_ape", kf->st.med_ape) ||
              !cJSON_AddNumberToObject(ko, "fit_p90_ape", kf->st.p90_ape) ||
              !(par = cJSON_AddArrayToObject(ko, "par"));
        for (int i = 0; !bad && i < HS_FP_HBM; i++) {  /* the HBM factor apart, above */
            cJSON *v = cJSON_CreateNumber(kf->par[i]);
            bad = !v || !cJSON_AddItemToArray(par, v);
        }
    }
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int hs_calib_write(const hs_calib *c, const char *path, hs_err *err)
{
    cJSON *j = cJSON_CreateObject(), *arr = NULL;
    int rc, bad = !j || !cJSON_AddStringToObject(j, "source", c->source) ||
              !(arr = cJSON_AddArrayToObject(j, "entries"));
    for (int i = 0; !bad && i < c->n; i++) {
        cJSON *e = entry_json(&c->e[i]);
        bad = !e || !cJSON_AddItemToArray(arr, e);
        if (bad && e) cJSON_Delete(e);
    }
    rc = hs_json_save(bad ? NULL : j, path, err);
    cJSON_Delete(j);
    return rc;
}

/* ---- reader ------------------------------------------------------------------- */

static int load_kind(hs_fit *f, const cJSON *ko, const char *where, hs_err *err)
{
    char name[32], from[32];
    const cJSON *par, *mo;
    long iv = 0;
    int k, kf, rc, i = 0;
    if (!cJSON_IsObject(ko)) return hs_errf(err, HS_EPARSE, "%s: expected an object", where);
    if ((rc = hs_json_str(ko, "kind", name, sizeof name, where, err)) ||
        (rc = hs_json_str(ko, "from", from, sizeof from, where, err)))
        return rc;
    if ((k = kind_find(name)) < 0) return hs_errf(err, HS_EPARSE, "%s: kind: unknown \"%s\"", where, name);
    if ((kf = kind_find(from)) < 0) return hs_errf(err, HS_EPARSE, "%s (%s): from: unknown \"%s\"", where, name, from);
    f->k[k].from = kf;
    if ((rc = hs_json_int_opt(ko, "rows", 0, 1000000000, &iv, where, err))) return rc;
    f->k[k].rows = (int)iv;
    mo = cJSON_GetObjectItemCaseSensitive(ko, "memory_only");
    if (!cJSON_IsBool(mo)) return hs_errf(err, HS_EPARSE, "%s (%s): memory_only: expected true or false", where, name);
    f->k[k].memory_only = cJSON_IsTrue(mo);
    mo = cJSON_GetObjectItemCaseSensitive(ko, "sm_term");
    if (mo && !cJSON_IsBool(mo)) return hs_errf(err, HS_EPARSE, "%s (%s): sm_term: expected true or false", where, name);
    f->k[k].sm_term = cJSON_IsTrue(mo);
    if (f->k[k].sm_term && !f->k[k].memory_only)
        return hs_errf(err, HS_EPARSE, "%s (%s): sm_term: only memory-only kinds have it", where, name);
    if ((rc = hs_json_num_opt(ko, "fit_median_ape", 0, 1e6, &f->k[k].st.med_ape, where, err)) ||
        (rc = hs_json_num_opt(ko, "fit_p90_ape", 0, 1e6, &f->k[k].st.p90_ape, where, err)))
        return rc;
    /* a file without it (written before it was fitted) keeps factor 1 */
    f->k[k].par[HS_FP_HBM] = 1;
    /* fitted as a log like par, clamped to exp(+-40): a factor at the top
     * says the SM term never binds on HBM GPUs for this kind */
    {
        char w2[800];
        snprintf(w2, sizeof w2, "%.700s (%s)", where, name);
        if ((rc = hs_json_num_opt(ko, "hbm_factor", 1e-18, 1e18, &f->k[k].par[HS_FP_HBM], w2, err))) return rc;
    }
    if (cJSON_GetObjectItemCaseSensitive(ko, "hbm_factor") && !f->k[k].sm_term)
        return hs_errf(err, HS_EPARSE, "%s (%s): hbm_factor: only sm_term kinds have it", where, name);
    par = cJSON_GetObjectItemCaseSensitive(ko, "par");
    if (!cJSON_IsArray(par) || cJSON_GetArraySize(par) != HS_FP_HBM)
        return hs_errf(err, HS_EPARSE, "%s (%s): par: expected %d numbers", where, name, HS_FP_HBM);
    for (const cJSON *p = par->child; p; p = p->next, i++) {
        /* k_c may be 0 (no cache term); every other parameter is > 0 */
        if (!cJSON_IsNumber(p) || !isfinite(p->valuedouble) || p->valuedouble < 0 ||
            (p->valuedouble == 0 && i != HS_FP_KC))
            return hs_errf(err, HS_EPARSE, "%s (%s): par[%d]: expected a finite number > 0", where, name, i);
        f->k[k].par[i] = p->valuedouble;
    }
    return 0;
}

static int load_entry(hs_calib_entry *e, const cJSON *o, const char *path, int idx, hs_err *err)
{
    char where[700];
    const cJSON *kinds, *cv, *gl;
    long iv = 0;
    int rc;
    memset(e, 0, sizeof *e);
    for (int k = 0; k < HS_FK_COUNT; k++) e->fit.k[k].from = -1;
    snprintf(where, sizeof where, "%s: entries[%d]", path, idx);
    if (!cJSON_IsObject(o)) return hs_errf(err, HS_EPARSE, "%s: expected an object", where);
    if ((rc = hs_json_str(o, "gpu", e->gpu, sizeof e->gpu, where, err)) ||
        (rc = hs_json_int_opt(o, "tables", 0, 1000000, &iv, where, err)) ||
        (rc = hs_json_str_opt(o, "models", e->models, sizeof e->models, where, err)))
        return rc;
    e->n_tables = (int)iv;
    gl = cJSON_GetObjectItemCaseSensitive(o, "trained_on");
    if (!cJSON_IsArray(gl)) return hs_errf(err, HS_EPARSE, "%s: trained_on: expected an array of GPU names", where);
    for (const cJSON *g = gl->child; g; g = g->next) {
        if (!cJSON_IsString(g) || e->fit.n_gpus >= HS_FIT_MAX_GPUS || strlen(g->valuestring) >= 32)
            return hs_errf(err, HS_EPARSE, "%s: trained_on: expected at most %d GPU names", where, HS_FIT_MAX_GPUS);
        snprintf(e->fit.gpus[e->fit.n_gpus++], sizeof e->fit.gpus[0], "%s", g->valuestring);
    }
    e->cv.layer_med = e->cv.attn_med = -1;
    e->cv.fold_med = e->cv.fold_lo = e->cv.fold_hi = -1;
    e->cv.folds = 0;
    cv = cJSON_GetObjectItemCaseSensitive(o, "cv");
    if (cv) {
        char w2[760];
        snprintf(w2, sizeof w2, "%s: cv", where);
        if ((rc = hs_json_num_opt(cv, "layer_median_ape", -1, 1e6, &e->cv.layer_med, w2, err)) ||
            (rc = hs_json_num_opt(cv, "layer_p90_ape", -1, 1e6, &e->cv.layer_p90, w2, err)) ||
            (rc = hs_json_num_opt(cv, "layer_bias", -1e6, 1e6, &e->cv.layer_bias, w2, err)) ||
            (rc = hs_json_num_opt(cv, "attention_median_ape", -1, 1e6, &e->cv.attn_med, w2, err)))
            return rc;
        iv = 0;
        if ((rc = hs_json_int_opt(cv, "layer_points", 0, 1000000000, &iv, w2, err))) return rc;
        e->cv.n = (int)iv;
        /* the by-GPU figures: all four or none */
        if ((rc = hs_json_num_opt(cv, "gpu_fold_median_ape", -1, 1e6, &e->cv.fold_med, w2, err))) return rc;
        if (e->cv.fold_med >= 0) {
            static const char *const need[] = {"gpu_fold_min_ape", "gpu_fold_max_ape", "gpu_folds"};
            for (int i = 0; i < 3; i++)
                if (!cJSON_GetObjectItemCaseSensitive(cv, need[i]))
                    return hs_errf(err, HS_EPARSE, "%s: %s: missing (gpu_fold_median_ape is given)", w2, need[i]);
            if ((rc = hs_json_num_opt(cv, "gpu_fold_min_ape", 0, 1e6, &e->cv.fold_lo, w2, err)) ||
                (rc = hs_json_num_opt(cv, "gpu_fold_max_ape", 0, 1e6, &e->cv.fold_hi, w2, err)))
                return rc;
            iv = 0;
            if ((rc = hs_json_int_opt(cv, "gpu_folds", 1, HS_FIT_MAX_GPUS, &iv, w2, err))) return rc;
            e->cv.folds = (int)iv;
            if (!(e->cv.fold_lo <= e->cv.fold_med && e->cv.fold_med <= e->cv.fold_hi))
                return hs_errf(err, HS_ERANGE,
                               "%s: gpu_fold_median_ape: %g is not within gpu_fold_min_ape %g and gpu_fold_max_ape %g",
                               w2, e->cv.fold_med, e->cv.fold_lo, e->cv.fold_hi);
        }
    }
    kinds = cJSON_GetObjectItemCaseSensitive(o, "kinds");
    if (!cJSON_IsArray(kinds)) return hs_errf(err, HS_EPARSE, "%s: kinds: expected an array", where);
    {
        int i = 0;
        for (const cJSON *k = kinds->child; k; k = k->next, i++) {
            char w2[760];
            snprintf(w2, sizeof w2, "%s: kinds[%d]", where, i);
            if ((rc = load_kind(&e->fit, k, w2, err))) return rc;
        }
    }
    e->fit.n_inputs = e->n_tables;
    return 0;
}

int hs_calib_load(hs_calib *c, const char *path, hs_err *err)
{
    cJSON *root;
    const cJSON *arr;
    int rc;
    memset(c, 0, sizeof *c);
    if ((rc = hs_json_load(path, &root, err))) return rc;
    if (!cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON object", path);
        goto out;
    }
    if ((rc = hs_json_str_opt(root, "source", c->source, sizeof c->source, path, err))) goto out;
    arr = cJSON_GetObjectItemCaseSensitive(root, "entries");
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > HS_CALIB_MAX) {
        rc = hs_errf(err, HS_EPARSE, "%s: entries: expected an array of at most %d objects", path, HS_CALIB_MAX);
        goto out;
    }
    for (const cJSON *e = arr->child; e; e = e->next, c->n++)
        if ((rc = load_entry(&c->e[c->n], e, path, c->n, err))) goto out;
out:
    cJSON_Delete(root);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

double hs_calib_expected_err(const hs_calib_entry *e, double *lo, double *hi)
{
    *lo = *hi = -1;
    if (!e) return -1;
    if (e->gpu[0] || e->cv.fold_med < 0) return e->cv.layer_med;
    *lo = e->cv.fold_lo;
    *hi = e->cv.fold_hi;
    return e->cv.fold_med;
}

const hs_calib_entry *hs_calib_for(const hs_calib *c, const char *gpu)
{
    const hs_calib_entry *t = NULL;
    for (int i = 0; i < c->n; i++) {
        if (!strcmp(c->e[i].gpu, gpu)) return &c->e[i];
        if (!c->e[i].gpu[0]) t = &c->e[i];
    }
    return t;
}
