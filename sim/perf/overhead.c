/* overhead.c - engine profiles (host cost per iteration): reader, writer,
 * the fit on Vidur's cpu_overheads.csv and its cross-validation; see
 * overhead.h.
 *
 * Invariants: a loaded or fitted profile has 1..HS_OVH_MAX_COMP components,
 * each with 1..HS_OVH_MAX_ROWS rows in strictly ascending min_tp and every
 * coefficient finite and >= 0, so every cost is finite and >= 0. */
#include "perf/overhead.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/conf.h"
#include "core/vec.h"
#include "hw/hw.h"
#include "perf/table_int.h"

const hs_ovh_vidur_col hs_ovh_vidur_comp[] = {
    {"schedule", 0, "schedule_median", "schedule_mean"},
    {"sampler", 0, "sampler_e2e_median", "sampler_e2e_mean"},
    {"prepare_inputs", 0, "prepare_inputs_e2e_median", "prepare_inputs_e2e_mean"},
    {"process_outputs", 0, "process_model_outputs_median", "process_model_outputs_mean"},
    {"ray_comm", 1, "ray_comm_time_median", "ray_comm_time_mean"},
    {NULL, 0, NULL, NULL},
};

/* ---- evaluation ------------------------------------------------------------ */

static const hs_ovh_row *pick(const hs_ovh_comp *c, int tp)
{
    const hs_ovh_row *r = &c->row[0];
    for (int i = 1; i < c->n; i++)
        if (c->row[i].min_tp <= tp) r = &c->row[i];
    return r;
}

double hs_ovh_comp_us(const hs_ovh_comp *c, int tp, int pp, double seqs, double tokens)
{
    const hs_ovh_row *r;
    if (c->n < 1 || (c->multi_gpu && tp * pp <= 1)) return 0;
    r = pick(c, tp);
    return r->fixed_us + r->per_seq_us * seqs + r->per_token_us * tokens;
}

void hs_ovh_coef(const hs_ovh_profile *p, int tp, int pp, double *fixed_ns, double *seq_ns,
                 double *tok_ns)
{
    double f = 0, s = 0, t = 0;
    for (int i = 0; i < p->n; i++) {
        const hs_ovh_comp *c = &p->comp[i];
        const hs_ovh_row *r;
        if (c->n < 1 || (c->multi_gpu && tp * pp <= 1)) continue;
        r = pick(c, tp);
        f += r->fixed_us;
        s += r->per_seq_us;
        t += r->per_token_us;
    }
    *fixed_ns = f * 1e3;
    *seq_ns = s * 1e3;
    *tok_ns = t * 1e3;
}

double hs_ovh_op_us(const hs_ovh_profile *p, const char *gpu)
{
    double any = 0;
    for (int i = 0; i < p->n_disp; i++) {
        if (!strcmp(p->disp[i].gpu, gpu)) return p->disp[i].op_us;
        if (!p->disp[i].gpu[0]) any = p->disp[i].op_us;
    }
    return any;
}

double hs_ovh_stage_layer_us(const hs_ovh_profile *p, const hs_model *m, const hs_cluster *c, const int *gpus,
                             int n)
{
    double us = 0;
    if (!p->n_disp) return 0; /* no floor: the planners' estimators call this per stage */
    for (int k = 0; k < n; k++) {
        double v = hs_ovh_op_us(p, hs_cluster_gpu(c, gpus[k])->name);
        if (v > us) us = v;
    }
    return us * hs_model_layer_ops(m, n);
}

/* ---- reader and writer ------------------------------------------------------- */

static int load_row(hs_ovh_row *r, const cJSON *o, const char *where, hs_err *err)
{
    long v;
    int rc;
    static const char *const keys[] = {"min_tp", "fixed_us", "per_seq_us", "per_token_us", "samples"};
    for (const cJSON *k = o->child; k; k = k->next) {
        int ok = 0;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) ok |= !strcmp(k->string, keys[i]);
        if (!ok) return hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, k->string);
    }
    memset(r, 0, sizeof *r);
    if ((rc = hs_json_int(o, "min_tp", 1, HS_MAX_TP, &v, where, err))) return rc;
    r->min_tp = (int)v;
    if ((rc = hs_json_num(o, "fixed_us", 0, 1e7, &r->fixed_us, where, err)) ||
        (rc = hs_json_num_opt(o, "per_seq_us", 0, 1e6, &r->per_seq_us, where, err)) ||
        (rc = hs_json_num_opt(o, "per_token_us", 0, 1e6, &r->per_token_us, where, err)))
        return rc;
    v = 0;
    if ((rc = hs_json_int_opt(o, "samples", 0, 1L << 30, &v, where, err))) return rc;
    r->samples = (int)v;
    return 0;
}

static int load_comp(hs_ovh_comp *c, const cJSON *o, const char *path, int idx, hs_err *err)
{
    char where[700];
    const cJSON *rows, *mg;
    int rc;
    memset(c, 0, sizeof *c);
    snprintf(where, sizeof where, "%s: components[%d]", path, idx);
    if (!cJSON_IsObject(o)) return hs_errf(err, HS_EPARSE, "%s: expected an object", where);
    for (const cJSON *k = o->child; k; k = k->next)
        if (strcmp(k->string, "name") && strcmp(k->string, "multi_gpu") && strcmp(k->string, "rows"))
            return hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, k->string);
    if ((rc = hs_json_str(o, "name", c->name, sizeof c->name, where, err))) return rc;
    mg = cJSON_GetObjectItemCaseSensitive(o, "multi_gpu");
    if (mg && !cJSON_IsBool(mg)) return hs_errf(err, HS_EPARSE, "%s: multi_gpu: expected true or false", where);
    c->multi_gpu = mg && cJSON_IsTrue(mg);
    rows = cJSON_GetObjectItemCaseSensitive(o, "rows");
    if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) < 1 || cJSON_GetArraySize(rows) > HS_OVH_MAX_ROWS)
        return hs_errf(err, HS_EPARSE, "%s (%s): rows: expected an array of 1..%d objects", where,
                       c->name, HS_OVH_MAX_ROWS);
    for (const cJSON *r = rows->child; r; r = r->next) {
        char w2[800];
        snprintf(w2, sizeof w2, "%s (%s): rows[%d]", where, c->name, c->n);
        if (!cJSON_IsObject(r)) return hs_errf(err, HS_EPARSE, "%s: expected an object", w2);
        if ((rc = load_row(&c->row[c->n], r, w2, err))) return rc;
        if (c->n && c->row[c->n].min_tp <= c->row[c->n - 1].min_tp)
            return hs_errf(err, HS_EPARSE, "%s: min_tp %d must be above the previous row's %d", w2,
                           c->row[c->n].min_tp, c->row[c->n - 1].min_tp);
        c->n++;
    }
    return 0;
}

int hs_ovh_load(hs_ovh_profile *p, const char *path, hs_err *err)
{
    static const char *const keys[] = {"name", "display", "source", "licence", "collective_launch_us",
                                       "fit_median_ape", "fit_p90_ape", "cv_median_ape", "components",
                                       "dispatch"};
    cJSON *root;
    const cJSON *comps, *disp;
    int rc;
    memset(p, 0, sizeof *p);
    if ((rc = hs_json_load(path, &root, err))) return rc;
    if (!cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON object", path);
        goto out;
    }
    for (const cJSON *k = root->child; k; k = k->next) {
        int ok = 0;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) ok |= !strcmp(k->string, keys[i]);
        if (!ok) {
            rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", path, k->string);
            goto out;
        }
    }
    p->fit_med_ape = p->fit_p90_ape = p->cv_med_ape = -1;
    if ((rc = hs_json_str(root, "name", p->name, sizeof p->name, path, err)) ||
        (rc = hs_json_str_opt(root, "display", p->display, sizeof p->display, path, err)) ||
        (rc = hs_json_str(root, "source", p->source, sizeof p->source, path, err)) ||
        (rc = hs_json_str_opt(root, "licence", p->licence, sizeof p->licence, path, err)) ||
        (rc = hs_json_num_opt(root, "collective_launch_us", 0, 1e5, &p->collective_launch_us, path, err)) ||
        (rc = hs_json_num_opt(root, "fit_median_ape", 0, 1e4, &p->fit_med_ape, path, err)) ||
        (rc = hs_json_num_opt(root, "fit_p90_ape", 0, 1e4, &p->fit_p90_ape, path, err)) ||
        (rc = hs_json_num_opt(root, "cv_median_ape", 0, 1e4, &p->cv_med_ape, path, err)))
        goto out;
    comps = cJSON_GetObjectItemCaseSensitive(root, "components");
    if (!cJSON_IsArray(comps) || cJSON_GetArraySize(comps) < 1 ||
        cJSON_GetArraySize(comps) > HS_OVH_MAX_COMP) {
        rc = hs_errf(err, HS_EPARSE, "%s: components: expected an array of 1..%d objects", path,
                     HS_OVH_MAX_COMP);
        goto out;
    }
    for (const cJSON *c = comps->child; c; c = c->next, p->n++)
        if ((rc = load_comp(&p->comp[p->n], c, path, p->n, err))) goto out;
    if ((disp = cJSON_GetObjectItemCaseSensitive(root, "dispatch"))) {
        if (!cJSON_IsArray(disp) || cJSON_GetArraySize(disp) > HS_OVH_MAX_DISP) {
            rc = hs_errf(err, HS_EPARSE, "%s: dispatch: expected an array of 0..%d objects", path, HS_OVH_MAX_DISP);
            goto out;
        }
        for (const cJSON *d = disp->child; d; d = d->next, p->n_disp++) {
            char where[600];
            snprintf(where, sizeof where, "%s: dispatch[%d]", path, p->n_disp);
            if (!cJSON_IsObject(d)) {
                rc = hs_errf(err, HS_EPARSE, "%s: expected an object", where);
                goto out;
            }
            for (const cJSON *k = d->child; k; k = k->next) {
                if (!strcmp(k->string, "layer_us")) {
                    /* the per-layer form could not tell a BLOOM layer from a Llama one */
                    rc = hs_errf(err, HS_EPARSE, "%s: layer_us: replaced by op_us, the host time per operator "
                                 "(a layer's floor is op_us x its operators; profiles/README.md)", where);
                    goto out;
                }
                if (strcmp(k->string, "gpu") && strcmp(k->string, "op_us")) {
                    rc = hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"", where, k->string);
                    goto out;
                }
            }
            if ((rc = hs_json_str(d, "gpu", p->disp[p->n_disp].gpu, sizeof p->disp[0].gpu, where, err)) ||
                (rc = hs_json_num(d, "op_us", 0, 1e5, &p->disp[p->n_disp].op_us, where, err)))
                goto out;
            for (int i = 0; i < p->n_disp; i++)
                if (!strcmp(p->disp[i].gpu, p->disp[p->n_disp].gpu)) {
                    rc = hs_errf(err, HS_EPARSE, "%s: gpu \"%s\" listed twice", where, p->disp[i].gpu);
                    goto out;
                }
        }
    }
out:
    cJSON_Delete(root);
    if (rc) memset(p, 0, sizeof *p);
    return rc;
}

int hs_ovh_find(hs_ovh_profile *p, const char *name, hs_err *err)
{
    char path[1024];
    int rc = hs_resolve(path, sizeof path, "profiles/engines", name, err);
    if (rc) return rc;
    if (!hs__is_file(path))
        return hs_errf(err, HS_ENOTFOUND, "perf.engine: unknown engine profile \"%s\" (no %s; \"none\" for a flat perf.step_overhead_us)",
                       name, path);
    return hs_ovh_load(p, path, err);
}

/* Numbers are rounded to 4 significant digits when written: a profile is a
 * fit whose error is percent, and short numbers keep the file readable. */
static double r4(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.4g", v);
    return strtod(b, NULL);
}

int hs_ovh_write(const hs_ovh_profile *p, const char *path, hs_err *err)
{
    cJSON *j = cJSON_CreateObject(), *arr;
    int rc, bad = !j;
    if (!bad) {
        bad = !cJSON_AddStringToObject(j, "name", p->name) ||
              !cJSON_AddStringToObject(j, "display", p->display) ||
              !cJSON_AddStringToObject(j, "source", p->source) ||
              !cJSON_AddStringToObject(j, "licence", p->licence) ||
              !cJSON_AddNumberToObject(j, "collective_launch_us", r4(p->collective_launch_us));
        if (!bad && p->fit_med_ape >= 0)
            bad = !cJSON_AddNumberToObject(j, "fit_median_ape", r4(p->fit_med_ape)) ||
                  !cJSON_AddNumberToObject(j, "fit_p90_ape", r4(p->fit_p90_ape));
        if (!bad && p->cv_med_ape >= 0) bad = !cJSON_AddNumberToObject(j, "cv_median_ape", r4(p->cv_med_ape));
        if (!bad && p->n_disp > 0) {
            cJSON *d = cJSON_AddArrayToObject(j, "dispatch");
            bad = !d;
            for (int i = 0; !bad && i < p->n_disp; i++) {
                cJSON *o = cJSON_CreateObject();
                bad = !o || !cJSON_AddItemToArray(d, o);
                if (bad) {
                    if (o) cJSON_Delete(o);
                    break;
                }
                bad = !cJSON_AddStringToObject(o, "gpu", p->disp[i].gpu) ||
                      !cJSON_AddNumberToObject(o, "op_us", r4(p->disp[i].op_us));
            }
        }
        bad = bad || !(arr = cJSON_AddArrayToObject(j, "components"));
        for (int i = 0; !bad && i < p->n; i++) {
            const hs_ovh_comp *c = &p->comp[i];
            cJSON *o = cJSON_CreateObject(), *rows;
            bad = !o || !cJSON_AddItemToArray(arr, o);
            if (bad) {
                if (o) cJSON_Delete(o);
                break;
            }
            bad = !cJSON_AddStringToObject(o, "name", c->name) ||
                  !cJSON_AddBoolToObject(o, "multi_gpu", c->multi_gpu) ||
                  !(rows = cJSON_AddArrayToObject(o, "rows"));
            for (int k = 0; !bad && k < c->n; k++) {
                const hs_ovh_row *r = &c->row[k];
                cJSON *ro = cJSON_CreateObject();
                bad = !ro || !cJSON_AddItemToArray(rows, ro);
                if (bad) {
                    if (ro) cJSON_Delete(ro);
                    break;
                }
                bad = !cJSON_AddNumberToObject(ro, "min_tp", r->min_tp) ||
                      !cJSON_AddNumberToObject(ro, "fixed_us", r4(r->fixed_us)) ||
                      !cJSON_AddNumberToObject(ro, "per_seq_us", r4(r->per_seq_us)) ||
                      !cJSON_AddNumberToObject(ro, "per_token_us", r4(r->per_token_us)) ||
                      !cJSON_AddNumberToObject(ro, "samples", r->samples);
            }
        }
    }
    rc = hs_json_save(bad ? NULL : j, path, err);
    cJSON_Delete(j);
    return rc;
}

/* ---- Vidur's cpu_overheads.csv ----------------------------------------------- */

static int find_col(const hs__tcsv *c, const char *name)
{
    for (int i = 0; name && i < c->nf; i++)
        if (!strcmp(c->field[i], name)) return i;
    return -1;
}

int hs_ovh_read_vidur(const char *path, hs_ovh_sample **out, int *n, hs_err *err)
{
    hs__tcsv c;
    int rc, ci[HS_OVH_MAX_COMP], cm, ct, cb, nf, cnt = 0;
    size_t cap = 0;
    const char *cname[HS_OVH_MAX_COMP];
    hs_ovh_sample *v = NULL;
    *out = NULL;
    *n = 0;
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    nf = c.nf;
    cm = find_col(&c, "model_name");
    ct = find_col(&c, "tensor_parallel_degree");
    cb = find_col(&c, "batch_size");
    if (cm < 0 || ct < 0 || cb < 0) {
        rc = hs_errf(err, HS_EPARSE, "%s:%d: header needs model_name, batch_size and tensor_parallel_degree",
                     path, c.lineno);
        goto out;
    }
    for (int k = 0; hs_ovh_vidur_comp[k].name; k++) {
        ci[k] = find_col(&c, cname[k] = hs_ovh_vidur_comp[k].median);
        if (ci[k] < 0) ci[k] = find_col(&c, cname[k] = hs_ovh_vidur_comp[k].mean);
        if (ci[k] < 0) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: no column %s or %s", path, c.lineno,
                         hs_ovh_vidur_comp[k].median, hs_ovh_vidur_comp[k].mean);
            goto out;
        }
    }
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long tp, b;
        hs_ovh_sample *s;
        if (c.nf != nf) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: expected %d fields, got %d", path, c.lineno, nf, c.nf);
            goto out;
        }
        if (hs_vec_reserve((void **)&v, &cap, (size_t)cnt + 1, sizeof *v, 64)) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory reading %s", path);
            goto out;
        }
        s = &v[cnt];
        memset(s, 0, sizeof *s);
        if ((rc = hs__tcsv_int(&c, ct, "tensor_parallel_degree", 1, HS_MAX_TP, &tp, err)) ||
            (rc = hs__tcsv_int(&c, cb, "batch_size", 1, 1 << 20, &b, err)))
            goto out;
        if (!c.field[cm][0]) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: model_name: empty", path, c.lineno);
            goto out;
        }
        snprintf(s->model, sizeof s->model, "%s", c.field[cm]);
        s->tp = (int)tp;
        s->batch = (int)b;
        s->line = c.lineno;
        for (int k = 0; hs_ovh_vidur_comp[k].name; k++) {
            double ms;
            if ((rc = hs__tcsv_num(&c, ci[k], cname[k], 0, 1e6, &ms, err))) goto out;
            s->us[k] = ms * 1e3;
        }
        cnt++;
    }
    if (rc < 0) goto out;
    rc = 0;
    if (!cnt) rc = hs_errf(err, HS_EPARSE, "%s: no rows", path);
out:
    hs__tcsv_close(&c);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---- fit ------------------------------------------------------------------------ */

/* Weighted least squares of y ~ a + b x with weights w, then a >= 0, b >= 0
 * (a negative coefficient is dropped and the other refitted). */
static void wls2(const double *x, const double *y, const double *w, int n, double *a, double *b)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, det;
    for (int i = 0; i < n; i++) {
        sw += w[i];
        sx += w[i] * x[i];
        sy += w[i] * y[i];
        sxx += w[i] * x[i] * x[i];
        sxy += w[i] * x[i] * y[i];
    }
    det = sw * sxx - sx * sx;
    if (det > 1e-12 * sw * sxx) {
        *a = (sxx * sy - sx * sxy) / det;
        *b = (sw * sxy - sx * sy) / det;
    } else {
        *a = sy / sw;
        *b = 0;
    }
    if (*b < 0) {
        *a = sy / sw;
        *b = 0;
    }
    if (*a < 0) {
        *a = 0;
        *b = sxx > 0 ? sxy / sxx : 0;
        if (*b < 0) *b = 0;
    }
}

/* Least absolute relative deviation: minimise sum |a + b x_i - y_i| / y_i
 * by iteratively reweighted least squares (weight 1 / (y^2 |r|), |r| the
 * relative residual, floored at 0.1% so that exact points do not take all
 * the weight).  The median fit keeps a host timer's occasional stall (a
 * garbage collection, a context switch: the A40 file's schedule column has
 * 3x jumps between neighbouring batch sizes) from moving the line. */
static int lad_fit(const double *x, const double *y, int n, double *a, double *b)
{
    double *w = malloc((size_t)n * sizeof *w);
    if (!w) return HS_ENOMEM;
    for (int i = 0; i < n; i++) w[i] = 1.0 / (y[i] * y[i]);
    wls2(x, y, w, n, a, b);
    for (int it = 0; it < 60; it++) {
        for (int i = 0; i < n; i++) {
            double r = fabs(*a + *b * x[i] - y[i]) / y[i];
            w[i] = 1.0 / (y[i] * y[i] * (r > 1e-3 ? r : 1e-3));
        }
        wls2(x, y, w, n, a, b);
    }
    free(w);
    return 0;
}

/* TP classes of a fitted profile: 1, 2, 3 and more. */
static const int tp_class_min[] = {1, 2, 3};
#define N_TP_CLASS 3

static int tp_class(int tp)
{
    return tp >= 3 ? 2 : tp - 1;
}

int hs_ovh_fit(hs_ovh_profile *p, const hs_ovh_sample *s, int n, const char *exclude, hs_err *err)
{
    double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    double *y = malloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    memset(p, 0, sizeof *p);
    p->fit_med_ape = p->fit_p90_ape = p->cv_med_ape = -1;
    if (!x || !y) {
        free(x);
        free(y);
        return hs_errf(err, HS_ENOMEM, "out of memory fitting an engine profile");
    }
    for (int k = 0; hs_ovh_vidur_comp[k].name; k++) {
        hs_ovh_comp *c = &p->comp[p->n++];
        snprintf(c->name, sizeof c->name, "%s", hs_ovh_vidur_comp[k].name);
        c->multi_gpu = hs_ovh_vidur_comp[k].multi_gpu;
        for (int cl = 0; cl < N_TP_CLASS; cl++) {
            int m = 0;
            double a, b;
            for (int i = 0; i < n; i++) {
                if (tp_class(s[i].tp) != cl || (exclude && !strcmp(s[i].model, exclude))) continue;
                if (!(s[i].us[k] > 0)) continue; /* a zero is no measurement */
                x[m] = s[i].batch;
                y[m++] = s[i].us[k];
            }
            if (m < 2) continue;
            if (lad_fit(x, y, m, &a, &b)) {
                free(x);
                free(y);
                memset(p, 0, sizeof *p);
                return hs_errf(err, HS_ENOMEM, "out of memory fitting an engine profile");
            }
            c->row[c->n++] = (hs_ovh_row){tp_class_min[cl], a, b, 0, m};
        }
        /* A component measured on one GPU is paid there too, whatever
         * Vidur's column implies (the A40 file's Ray time at TP 1 is
         * 0.2-0.9 ms); only without TP-1 samples does the flag decide. */
        if (c->n && c->row[0].min_tp == 1) c->multi_gpu = 0;
        if (!c->n) {
            free(x);
            free(y);
            memset(p, 0, sizeof *p);
            return hs_errf(err, HS_EINVAL, "engine profile fit: component %s has fewer than two samples in any TP class",
                           hs_ovh_vidur_comp[k].name);
        }
    }
    free(x);
    free(y);
    return 0;
}

static const hs_ovh_comp *comp_by_name(const hs_ovh_profile *p, const char *name)
{
    for (int k = 0; k < p->n; k++)
        if (!strcmp(p->comp[k].name, name)) return &p->comp[k];
    return NULL;
}

void hs_ovh_eval(const hs_ovh_profile *p, const hs_ovh_sample *s, int n, const char *only,
                 hs_fitstat *st, double *bias)
{
    double *pred = malloc((size_t)(n > 0 ? n : 1) * sizeof *pred);
    double *meas = malloc((size_t)(n > 0 ? n : 1) * sizeof *meas);
    int m = 0;
    memset(st, 0, sizeof *st);
    if (bias) *bias = 0;
    if (!pred || !meas) goto out;
    for (int i = 0; i < n; i++) {
        double pr = 0, me = 0;
        if (only && strcmp(s[i].model, only)) continue;
        for (int k = 0; hs_ovh_vidur_comp[k].name; k++) {
            const hs_ovh_comp *c = comp_by_name(p, hs_ovh_vidur_comp[k].name);
            if (c) pr += hs_ovh_comp_us(c, s[i].tp, 1, s[i].batch, 0);
            me += s[i].us[k];
        }
        if (!(me > 0)) continue;
        pred[m] = pr;
        meas[m++] = me;
    }
    if (!m) goto out;
    hs_fitstat_compute(st, pred, meas, m);
    if (bias) {
        for (int i = 0; i < m; i++) pred[i] = 100.0 * (pred[i] - meas[i]) / meas[i];
        *bias = hs__percentile(pred, m, 50);
    }
out:
    free(pred);
    free(meas);
}

int hs_ovh_report(const char *csv, const hs_ovh_opts *o, FILE *log, hs_fitstat *cv,
                  double *cv_bias, hs_err *err)
{
    hs_ovh_sample *s = NULL;
    hs_ovh_profile p;
    hs_fitstat st;
    char (*models)[96] = NULL;
    double bias, *e = NULL;
    int n, nm = 0, rc, ne = 0;
    if (cv) memset(cv, 0, sizeof *cv);
    if (cv_bias) *cv_bias = 0;
    if ((rc = hs_ovh_read_vidur(csv, &s, &n, err))) return rc;
    if ((rc = hs_ovh_fit(&p, s, n, NULL, err))) goto done;
    hs_ovh_eval(&p, s, n, NULL, &st, &bias);
    p.fit_med_ape = st.med_ape;
    p.fit_p90_ape = st.p90_ape;
    if (log) {
        fprintf(log, "engine profile fitted on %s: %d rows\n", csv, n);
        fprintf(log, "  %-16s %-9s %6s %10s %10s %7s\n", "component", "gpus", "min_tp", "fixed_us",
                "per_seq_us", "samples");
        for (int k = 0; k < p.n; k++)
            for (int r = 0; r < p.comp[k].n; r++)
                fprintf(log, "  %-16s %-9s %6d %10.1f %10.2f %7d\n", p.comp[k].name,
                        p.comp[k].multi_gpu ? "multi" : "any", p.comp[k].row[r].min_tp,
                        p.comp[k].row[r].fixed_us, p.comp[k].row[r].per_seq_us, p.comp[k].row[r].samples);
        fprintf(log, "  in-sample error of the total: median %.1f%%, p90 %.1f%%, bias %+.1f%% (%d rows)\n",
                st.med_ape, st.p90_ape, bias, st.n);
    }
    /* leave one model out: fit on the others, predict its rows */
    if (!(models = calloc((size_t)n, sizeof *models)) || !(e = malloc((size_t)n * 2 * sizeof *e))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < nm; j++) seen |= !strcmp(models[j], s[i].model);
        if (!seen) snprintf(models[nm++], sizeof models[0], "%s", s[i].model);
    }
    if (nm >= 2) {
        double *pe = e + n;
        int np = 0;
        for (int j = 0; j < nm; j++) {
            hs_ovh_profile q;
            hs_fitstat ms;
            double mb;
            hs_err ignore;
            if (hs_ovh_fit(&q, s, n, models[j], &ignore)) {
                if (log) fprintf(log, "  leave out %-40s (the others cannot fit every component)\n", models[j]);
                continue;
            }
            hs_ovh_eval(&q, s, n, models[j], &ms, &mb);
            if (log)
                fprintf(log, "  leave out %-40s median %5.1f%%, p90 %5.1f%%, bias %+6.1f%% (%d rows)\n",
                        models[j], ms.med_ape, ms.p90_ape, mb, ms.n);
            for (int i = 0; i < n; i++) {
                double pr = 0, me = 0;
                if (strcmp(s[i].model, models[j])) continue;
                for (int k = 0; hs_ovh_vidur_comp[k].name; k++) {
                    const hs_ovh_comp *c = comp_by_name(&q, hs_ovh_vidur_comp[k].name);
                    if (c) pr += hs_ovh_comp_us(c, s[i].tp, 1, s[i].batch, 0);
                    me += s[i].us[k];
                }
                if (!(me > 0)) continue;
                e[ne++] = fabs(pr - me) / me * 100;
                pe[np++] = (pr - me) / me * 100;
            }
        }
        if (ne) {
            double med = hs__percentile(e, ne, 50), p90 = hs__percentile(e, ne, 90);
            double b = hs__percentile(pe, np, 50);
            p.cv_med_ape = med;
            if (cv) {
                cv->n = ne;
                cv->med_ape = med;
                cv->p90_ape = p90;
                cv->max_ape = e[ne - 1];
            }
            if (cv_bias) *cv_bias = b;
            if (log)
                fprintf(log, "  leave-one-model-out, pooled: median %.1f%%, p90 %.1f%%, bias %+.1f%% (%d rows)\n",
                        med, p90, b, ne);
        }
    } else if (log) {
        fprintf(log, "  one model in the file: no leave-one-model-out figure\n");
    }
    if (o->out) {
        const char *base = strrchr(csv, '/');
        base = base ? base + 1 : csv;
        snprintf(p.name, sizeof p.name, "%s", o->name && *o->name ? o->name : "fitted");
        snprintf(p.display, sizeof p.display, "%s", o->display && *o->display ? o->display : "host cost per iteration");
        if (o->source && *o->source)
            snprintf(p.source, sizeof p.source, "%s; fitted by hetsim perf fit-overhead on %s (%d rows)",
                     o->source, base, n);
        else
            snprintf(p.source, sizeof p.source, "hetsim perf fit-overhead on %s (%d rows)", base, n);
        snprintf(p.licence, sizeof p.licence, "%s", o->licence && *o->licence ? o->licence : "as the input's");
        p.collective_launch_us = o->collective_launch_us;
        if ((rc = hs_ovh_write(&p, o->out, err))) goto done;
        if (log) fprintf(log, "wrote %s\n", o->out);
    }
done:
    free(models);
    free(e);
    free(s);
    return rc;
}
