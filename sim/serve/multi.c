/* multi.c - the multi-model FCFS runner (multi.h): fluid time-slicing of
 * shared GPUs, deployments over time, per-model routing, load monitor. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "serve/multi.h"
#include "serve/multi_int.h"

/* ---- solo latency ---- */

int hs_solo_build(hs_solo *s, const hs_perf_cfg *pc, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_prompt,
                  double lat_factor, double pass_extra_ns, hs_err *err)
{
    memset(s, 0, sizeof *s);
    s->lat_factor = lat_factor;
    s->pass_extra_ns = pass_extra_ns;
    return hs_perf_build(&s->perf, pc, m, c, l, max_prompt, 1, err);
}

void hs_solo_free(hs_solo *s)
{
    if (s && s->perf.pp) hs_perf_free(&s->perf);
}

static double pass_ns(const hs_solo *t, const hs_batch_shape *b)
{
    double ns = hs_perf_step_ns(&t->perf, b) + t->pass_extra_ns;
    for (int s = 0; s < t->perf.pp; s++) {
        ns += hs_perf_stage_ns(&t->perf, s, b);
        if (s + 1 < t->perf.pp) ns += hs_perf_send_ns(&t->perf, s, b->tokens);
    }
    return ns;
}

double hs_solo_req_ns(const hs_solo *t, int prompt, int output, double *ttft)
{
    hs_batch_shape b;
    double pre, a, ctx_coef = 0, steps = output - 1, sum_ctx;
    memset(&b, 0, sizeof b);
    b.tokens = prompt;
    b.samples = 1;
    b.pre_chunks = 1;
    b.pre_self = (double)prompt * (prompt + 1) / 2;
    b.pre_tokens = prompt;
    pre = pass_ns(t, &b) * t->lat_factor;
    memset(&b, 0, sizeof b);
    b.tokens = 1;
    b.samples = 1;
    b.dec_seqs = 1;
    a = pass_ns(t, &b);
    for (int s = 0; s < t->perf.pp; s++) ctx_coef += t->perf.stage[s].dec_ctx;
    /* Decode step k (1..output-1) attends over prompt + k tokens: linear in
     * the context, so the sum over steps is closed form. */
    sum_ctx = steps * prompt + steps * (steps + 1) / 2;
    if (ttft) *ttft = pre;
    return pre + (steps * a + ctx_coef * sum_ctx) * t->lat_factor;
}

/* ---- load monitor ---- */

int hs_loadmon_init(hs_loadmon *mo, int n, hs_err *err)
{
    memset(mo, 0, sizeof *mo);
    mo->n = n;
    mo->samples = calloc((size_t)n * HS_LOAD_WINDOW, sizeof *mo->samples);
    mo->sum = calloc((size_t)n, sizeof *mo->sum);
    if (!mo->samples || !mo->sum) {
        hs_loadmon_free(mo);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    return 0;
}

void hs_loadmon_free(hs_loadmon *mo)
{
    if (!mo) return;
    free(mo->samples);
    free(mo->sum);
    mo->samples = mo->sum = NULL;
}

void hs_loadmon_push(hs_loadmon *mo, const double *busy)
{
    for (int g = 0; g < mo->n; g++) {
        double *slot = &mo->samples[(size_t)g * HS_LOAD_WINDOW + mo->head];
        mo->sum[g] += busy[g] - *slot;
        *slot = busy[g];
    }
    mo->head = (mo->head + 1) % HS_LOAD_WINDOW;
    if (mo->filled < HS_LOAD_WINDOW) mo->filled++;
}

double hs_loadmon_load(const hs_loadmon *mo, int g)
{
    double v;
    if (!mo->filled) return 0;
    v = mo->sum[g] / mo->filled;
    return v < 0 ? 0 : v; /* rounding of the running sum */
}

/* ---- runner ---- */

void hs_multi_cfg_defaults(hs_multi_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->alpha = 1.0;
    c->usable = 0.95;
    c->slo_factor = 5.0;
    c->rate = 1.0;
    c->max_prompt = 1024;
    c->seed = 1;
    hs_perf_cfg_defaults(&c->perf);
    snprintf(c->perf.model, sizeof c->perf.model, "roofline");
}

int hs_multi_create(hs_multi **out, const hs_multi_cfg *cfg, const hs_cluster *c,
                    const hs_model *models, int n_models, hs_err *err)
{
    hs_multi *mm;
    int n = c->n_gpus;
    *out = NULL;
    if (!(cfg->rate > 0 && cfg->rate <= 1))
        return hs_errf(err, HS_ERANGE, "iserve: rate %g must be in (0, 1]", cfg->rate);
    if (!(cfg->alpha >= 0 && cfg->alpha <= 1))
        return hs_errf(err, HS_ERANGE, "iserve: alpha %g must be in [0, 1]", cfg->alpha);
    if (!(cfg->usable > 0 && cfg->usable <= 1))
        return hs_errf(err, HS_ERANGE, "iserve: usable %g must be in (0, 1]", cfg->usable);
    if (n < 1 || n > 256) return hs_errf(err, HS_ERANGE, "iserve: cluster %s has %d GPUs (1..256)", c->name, n);
    if (!(cfg->slo_factor > 0) || cfg->max_prompt < 1 || n_models < 1)
        return hs_errf(err, HS_ERANGE, "iserve: slo_factor > 0, max_prompt >= 1 and a model are needed");
    mm = calloc(1, sizeof *mm);
    if (!mm) return hs_errf(err, HS_ENOMEM, "out of memory");
    mm->cfg = *cfg;
    mm->c = c;
    mm->models = models;
    mm->n_models = n_models;
    mm->n_gpus = n;
    mm->base = calloc((size_t)n_models, sizeof *mm->base);
    mm->has_base = calloc((size_t)n_models, sizeof *mm->has_base);
    mm->deployed = calloc((size_t)n_models, sizeof *mm->deployed);
    mm->due = calloc((size_t)n_models, sizeof *mm->due);
    mm->cap_b = calloc((size_t)n, sizeof(double));
    mm->charge_b = calloc((size_t)n, sizeof(double));
    mm->free_b = calloc((size_t)n, sizeof(double));
    mm->true_b = calloc((size_t)n, sizeof(double));
    mm->loadv = calloc((size_t)n, sizeof(double));
    mm->busy_ns = calloc((size_t)n, sizeof(double));
    mm->busy_k = calloc((size_t)n, sizeof(int));
    if (!mm->base || !mm->has_base || !mm->deployed || !mm->due || !mm->cap_b || !mm->charge_b ||
        !mm->free_b || !mm->true_b || !mm->loadv || !mm->busy_ns || !mm->busy_k ||
        hs_loadmon_init(&mm->mon, n, err)) {
        hs_multi_destroy(mm);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (int g = 0; g < n; g++) mm->cap_b[g] = hs_cluster_gpu(c, g)->mem_bytes * cfg->usable;
    *out = mm;
    return 0;
}

void hs_multi_destroy(hs_multi *mm)
{
    if (!mm) return;
    for (int i = 0; i < mm->n_models && mm->base; i++) hs_solo_free(&mm->base[i]);
    for (int i = 0; i < mm->n_in; i++) hs_solo_free(&mm->in[i].solo);
    free(mm->base);
    free(mm->has_base);
    free(mm->deployed);
    free(mm->due);
    free(mm->deps);
    free(mm->in);
    free(mm->rq);
    free(mm->cap_b);
    free(mm->charge_b);
    free(mm->free_b);
    free(mm->true_b);
    free(mm->loadv);
    free(mm->busy_ns);
    free(mm->busy_k);
    hs_loadmon_free(&mm->mon);
    free(mm);
}

int hs_multi_set_base(hs_multi *mm, int model, const hs_layout *l, hs_err *err)
{
    int rc;
    if (model < 0 || model >= mm->n_models) return hs_errf(err, HS_ERANGE, "iserve: model %d", model);
    hs_solo_free(&mm->base[model]);
    mm->has_base[model] = 0;
    rc = hs_solo_build(&mm->base[model], &mm->cfg.perf, &mm->models[model], mm->c, l,
                       mm->cfg.max_prompt, 1.0, 0, err);
    if (!rc) mm->has_base[model] = 1;
    return rc;
}

int hs_multi_schedule(hs_multi *mm, int model, double t_s, hs_err *err)
{
    /* Times are int64 ns inside: at most about 292 years. */
    if (model < 0 || model >= mm->n_models || !(t_s >= 0) || !(t_s <= 9e9))
        return hs_errf(err, HS_ERANGE, "iserve: deployment of model %d at %g s", model, t_s);
    if (hs_vec_reserve((void **)&mm->deps, &mm->cap_deps, (size_t)mm->n_deps + 1, sizeof *mm->deps, 16))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    mm->deps[mm->n_deps] = (hs__dep){hs_ns_from_s(t_s), model, mm->n_deps};
    mm->n_deps++;
    return 0;
}

int hs_multi_add(hs_multi *mm, int model, const hs_layout *l, double lat_factor,
                 double pass_extra_ns, const double *charge_b, const double *true_b,
                 const char *label, hs_err *err)
{
    hs__inst *in;
    int k = 0, rc;
    double need[256] = {0};
    if (mm->n_gpus > 256) return hs_errf(err, HS_ERANGE, "iserve: at most 256 GPUs");
    for (int s = 0; s < l->pp; s++)
        for (int i = 0; i < l->stage[s].tp; i++, k++) {
            int g = l->stage[s].gpus[i];
            if (k >= 64 || g < 0 || g >= mm->n_gpus)
                return hs_errf(err, HS_ERANGE, "iserve: instance GPU %d out of range", g);
            need[g] += true_b[k];
        }
    for (int g = 0; g < mm->n_gpus; g++)
        if (need[g] > 0 && mm->true_b[g] + need[g] > mm->cap_b[g])
            return hs_errf(err, HS_ENOFIT, "iserve: GPU %d would hold %.2f GiB, over %.2f usable",
                           g, (mm->true_b[g] + need[g]) / 1073741824.0, mm->cap_b[g] / 1073741824.0);
    if (hs_vec_reserve((void **)&mm->in, &mm->cap_in, (size_t)mm->n_in + 1, sizeof *mm->in, 16))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    in = &mm->in[mm->n_in];
    memset(in, 0, sizeof *in);
    if ((rc = hs_solo_build(&in->solo, &mm->cfg.perf, &mm->models[model], mm->c, l,
                            mm->cfg.max_prompt, lat_factor, pass_extra_ns, err)))
        return rc;
    in->model = model;
    in->layout = *l;
    in->lat_factor = lat_factor;
    in->pass_extra_ns = pass_extra_ns;
    in->cur = -1;
    in->qhead = in->qtail = -1;
    snprintf(in->label, sizeof in->label, "%s", label ? label : "");
    k = 0;
    for (int s = 0; s < l->pp; s++)
        for (int i = 0; i < l->stage[s].tp; i++, k++) {
            int g = l->stage[s].gpus[i], dup = 0;
            double ch = charge_b ? charge_b[k] : true_b[k];
            mm->true_b[g] += true_b[k];
            mm->charge_b[g] += ch;
            in->bytes += true_b[k];
            for (int j = 0; j < in->n_gpus; j++) dup |= in->gpus[j] == g;
            if (!dup) in->gpus[in->n_gpus++] = g;
        }
    mm->n_in++;
    mm->deployed[model] = 1;
    mm->due[model] = 1;
    assert(hs_multi_mem_sane(mm)); /* MULTI-MEM */
    return 0;
}

int hs_multi_mem_sane(const hs_multi *mm)
{
    for (int g = 0; g < mm->n_gpus; g++)
        if (mm->true_b[g] > mm->cap_b[g] * (1 + 1e-12)) return 0;
    return 1;
}

int hs_multi_n_gpus(const hs_multi *mm) { return mm->n_gpus; }
double hs_multi_now_s(const hs_multi *mm) { return hs_ns_to_s(mm->now); }

const double *hs_multi_free_b(hs_multi *mm)
{
    for (int g = 0; g < mm->n_gpus; g++) {
        double f = mm->cap_b[g] - mm->charge_b[g];
        mm->free_b[g] = f > 0 ? f : 0;
    }
    return mm->free_b;
}

const double *hs_multi_used_b(hs_multi *mm) { return mm->charge_b; }

const double *hs_multi_load(hs_multi *mm)
{
    for (int g = 0; g < mm->n_gpus; g++) mm->loadv[g] = hs_loadmon_load(&mm->mon, g);
    return mm->loadv;
}

/* splitmix64: the runner's own deterministic stream (thinning, model choice). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static void advance(hs_multi *mm, hs_ns t)
{
    double dt = (double)(t - mm->now);
    if (dt <= 0) return;
    for (int i = 0; i < mm->n_in; i++)
        if (mm->in[i].cur >= 0) mm->in[i].remaining -= mm->in[i].rate * dt;
    for (int g = 0; g < mm->n_gpus; g++)
        if (mm->busy_k[g]) mm->busy_ns[g] += dt;
    mm->now = t;
}

static void rerate(hs_multi *mm)
{
    memset(mm->busy_k, 0, sizeof *mm->busy_k * (size_t)mm->n_gpus);
    for (int i = 0; i < mm->n_in; i++)
        if (mm->in[i].cur >= 0)
            for (int j = 0; j < mm->in[i].n_gpus; j++) mm->busy_k[mm->in[i].gpus[j]]++;
    for (int i = 0; i < mm->n_in; i++) {
        hs__inst *in = &mm->in[i];
        int k = 1;
        if (in->cur < 0) continue;
        for (int j = 0; j < in->n_gpus; j++)
            if (mm->busy_k[in->gpus[j]] > k) k = mm->busy_k[in->gpus[j]];
        in->rate = 1.0 / (1.0 + mm->cfg.alpha * (k - 1));
    }
}

static void start_next(hs_multi *mm, int i)
{
    hs__inst *in = &mm->in[i];
    hs__mreq *r;
    if (in->cur >= 0 || in->qhead < 0) return;
    in->cur = in->qhead;
    r = &mm->rq[in->cur];
    in->qhead = r->next;
    if (in->qhead < 0) in->qtail = -1;
    in->qlen--;
    r->start = mm->now;
    r->solo_ns = hs_solo_req_ns(&in->solo, r->prompt, r->output, &r->ttft_ns);
    in->remaining = r->solo_ns;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hs__pct(const double *v, int64_t n, double q)
{
    double pos;
    int64_t i;
    if (n == 0) return 0;
    pos = q * (double)(n - 1);
    i = (int64_t)pos;
    if (i + 1 >= n) return v[n - 1];
    return v[i] + (v[i + 1] - v[i]) * (pos - (double)i);
}

void hs__sort_doubles(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
}

static int cmp_dep(const void *a, const void *b)
{
    const hs__dep *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->seq - y->seq;
}

int hs_multi_run(hs_multi *mm, hs_source *src, hs_multi_deploy_fn deploy, void *ctx,
                 hs_multi_result *res, hs_err *err)
{
    uint64_t rng = mm->cfg.seed * 0x2545f4914f6cdd1dULL + 7;
    hs_arrival a;
    int have = 0, rc = 0, di = 0;
    hs_ns next_sample = HS_NS_PER_S;
    hs_ns first_arr = -1, last_fin = 0;
    memset(res, 0, sizeof *res);
    if (mm->n_deps && !deploy)
        return hs_errf(err, HS_EINVAL, "iserve: deployments scheduled but no deploy hook");
    if (mm->n_deps) qsort(mm->deps, (size_t)mm->n_deps, sizeof *mm->deps, cmp_dep);
    for (int m = 0; m < mm->n_models; m++)
        if (!mm->has_base[m])
            return hs_errf(err, HS_EINVAL, "iserve: model %s has no base layout for its SLO",
                           mm->models[m].name);
    for (;;) {
        hs_ns t_arr = INT64_MAX, t_dep = INT64_MAX, t_fin = INT64_MAX, t;
        int fin_i = -1, busy = 0;
        if (!have) {
            /* Next kept arrival: thinning by rate, then a uniform model. */
            while ((rc = hs_source_next(src, &a, err)) == 1) {
                res->arrivals++;
                if (rng_unit(&rng) < mm->cfg.rate) break;
            }
            if (rc < 0) return rc;
            have = rc == 1;
            rc = 0;
        }
        if (have) t_arr = a.arrival;
        if (di < mm->n_deps) t_dep = mm->deps[di].t;
        for (int i = 0; i < mm->n_in; i++) {
            hs__inst *in = &mm->in[i];
            hs_ns f;
            if (in->cur < 0) continue;
            busy = 1;
            f = mm->now + (hs_ns)ceil((in->remaining > 0 ? in->remaining : 0) / in->rate);
            if (f < t_fin) t_fin = f, fin_i = i;
        }
        if (!have && di >= mm->n_deps && !busy) break;
        t = t_fin;
        if (t_dep < t) t = t_dep;
        if (t_arr < t) t = t_arr;
        /* Sample the load every second while anything remains to happen. */
        if (next_sample <= t) {
            double frac[256];
            advance(mm, next_sample);
            for (int g = 0; g < mm->n_gpus; g++) {
                frac[g] = mm->busy_ns[g] / 1e9;
                mm->busy_ns[g] = 0;
            }
            hs_loadmon_push(&mm->mon, frac);
            next_sample += HS_NS_PER_S;
            continue;
        }
        advance(mm, t);
        if (t == t_fin) {
            hs__inst *in = &mm->in[fin_i];
            hs__mreq *r = &mm->rq[in->cur];
            r->finish = t;
            if (t > last_fin) last_fin = t;
            in->served++;
            res->served++;
            in->cur = -1;
            in->remaining = 0;
            start_next(mm, fin_i);
        } else if (t == t_dep) {
            int m = mm->deps[di++].model;
            mm->due[m] = 1;
            rc = deploy(ctx, mm, m, err);
            if (rc == HS_ENOFIT) {
                if (err) err->code = 0;
                rc = 0;
            }
            if (rc) return rc;
        } else {
            int model = (int)(rng_next(&rng) % (uint64_t)mm->n_models), best = -1;
            const hs_model *md = &mm->models[model];
            hs__mreq *r;
            have = 0;
            if (!mm->due[model]) {
                /* Its deployment is still to come: not part of the workload yet. */
                res->early++;
                continue;
            }
            res->kept++;
            if (first_arr < 0) first_arr = t;
            for (int i = 0; i < mm->n_in; i++) {
                int o, ob;
                if (mm->in[i].model != model) continue;
                o = mm->in[i].qlen + (mm->in[i].cur >= 0);
                ob = best < 0 ? 0 : mm->in[best].qlen + (mm->in[best].cur >= 0);
                if (best < 0 || o < ob) best = i;
            }
            if (best < 0) {
                res->unserved++;
                rerate(mm);
                continue;
            }
            if (hs_vec_reserve((void **)&mm->rq, &mm->cap_rq, (size_t)mm->n_rq + 1, sizeof *mm->rq,
                               4096))
                return hs_errf(err, HS_ENOMEM, "out of memory");
            r = &mm->rq[mm->n_rq];
            memset(r, 0, sizeof *r);
            r->arrival = t;
            r->prompt = a.prompt < mm->cfg.max_prompt ? a.prompt : mm->cfg.max_prompt;
            r->output = a.output;
            if (r->prompt + r->output > md->max_seq_len) r->output = md->max_seq_len - r->prompt;
            if (r->output < 1) r->output = 1;
            r->model = model;
            r->inst = best;
            r->next = -1;
            r->slo_ns = mm->cfg.slo_factor * hs_solo_req_ns(&mm->base[model], r->prompt, r->output, NULL);
            {
                hs__inst *in = &mm->in[best];
                int32_t id = (int32_t)mm->n_rq;
                if (in->qtail >= 0) mm->rq[in->qtail].next = id;
                else in->qhead = id;
                in->qtail = id;
                in->qlen++;
            }
            mm->n_rq++;
            start_next(mm, best);
        }
        rerate(mm);
    }
    assert(res->kept == res->served + res->unserved); /* MULTI-CONS */
    {
        double *lat = malloc(sizeof *lat * (size_t)(mm->n_rq ? mm->n_rq : 1));
        double *tt = malloc(sizeof *tt * (size_t)(mm->n_rq ? mm->n_rq : 1));
        int64_t met = 0;
        int used = 0;
        if (!lat || !tt) {
            free(lat);
            free(tt);
            return hs_errf(err, HS_ENOMEM, "out of memory");
        }
        for (int64_t i = 0; i < mm->n_rq; i++) {
            const hs__mreq *r = &mm->rq[i];
            double l = hs_ns_to_s(r->finish - r->arrival);
            lat[i] = l;
            tt[i] = hs_ns_to_s(r->start - r->arrival) + r->ttft_ns / 1e9 * 1.0;
            res->mean_s += l;
            met += (double)(r->finish - r->arrival) <= r->slo_ns;
            res->cost += mm->in[r->inst].bytes / 1073741824.0 * l;
            res->gpu_hours += mm->in[r->inst].n_gpus * r->solo_ns / 1e9 / 3600.0;
        }
        if (mm->n_rq) {
            res->mean_s /= (double)mm->n_rq;
            res->cost /= (double)mm->n_rq;
        }
        qsort(lat, (size_t)mm->n_rq, sizeof *lat, cmp_dbl);
        qsort(tt, (size_t)mm->n_rq, sizeof *tt, cmp_dbl);
        res->p50_s = hs__pct(lat, mm->n_rq, 0.50);
        res->p95_s = hs__pct(lat, mm->n_rq, 0.95);
        res->p99_s = hs__pct(lat, mm->n_rq, 0.99);
        res->ttft_p50_s = hs__pct(tt, mm->n_rq, 0.50);
        res->slo_attainment = res->kept ? (double)met / (double)res->kept : 0;
        free(lat);
        free(tt);
        for (int g = 0; g < mm->n_gpus; g++) used += mm->true_b[g] > 0;
        for (int i = 0; i < mm->n_in; i++) res->mem_gib += mm->in[i].bytes / 1073741824.0;
        for (int m = 0; m < mm->n_models; m++) res->deployed += mm->deployed[m];
        res->instances = mm->n_in;
        res->gpus_used = used;
        res->duration_s = first_arr >= 0 && last_fin > first_arr ? hs_ns_to_s(last_fin - first_arr) : 0;
        res->gpu_throughput = used && res->duration_s > 0
                                  ? (double)res->served / (res->duration_s * used) : 0;
    }
    return 0;
}

const char *hs_multi_inst_label(const hs_multi *mm, int i, int *model, int *n_gpus,
                                double *gib, int64_t *served, double *p50_s)
{
    if (i < 0 || i >= mm->n_in) return NULL;
    if (model) *model = mm->in[i].model;
    if (n_gpus) *n_gpus = mm->in[i].n_gpus;
    if (gib) *gib = mm->in[i].bytes / 1073741824.0;
    if (served) *served = mm->in[i].served;
    if (p50_s) *p50_s = 0;
    return mm->in[i].label;
}

const hs_layout *hs_multi_inst_layout(const hs_multi *mm, int i)
{
    return i >= 0 && i < mm->n_in ? &mm->in[i].layout : NULL;
}
