/* iserve_multi.c - the multi-model FCFS runner (iserve_multi.h): fluid time-slicing of
 * shared GPUs, deployments over time, per-model routing, load monitor, all
 * driven by one event queue (core/evq.h), like the engine. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/vec.h"
#include "plan/iserve_multi.h"
#include "plan/iserve_multi_int.h"

/* ---- solo latency ---- */

static double pass_ns(const hs_solo *t, const hs_batch_shape *b)
{
    return hs_perf_pass_ns(&t->perf, b) + t->pass_extra_ns;
}

/* One sequence's decode step at ctx cached tokens on perf, ns, without the
 * extra per pass (an offload's transfer, not a format's kernel): what the
 * variants' measurements compare. */
static double decode1_ns(const hs_perf *perf, int ctx)
{
    hs_batch_shape b;
    memset(&b, 0, sizeof b);
    b.tokens = 1;
    b.samples = 1;
    b.dec_seqs = 1;
    b.dec_ctx = ctx;
    return hs_perf_pass_ns(perf, &b);
}

int hs_solo_factor(const hs_perf *q, const hs_perf_cfg *pc, const hs_model *m, const hs_cluster *c,
                   const hs_layout *l, int max_seqs, double lat_ratio, double *factor, hs_err *err)
{
    int rc, quant = l->kv_bits != 16;
    *factor = lat_ratio;
    for (int i = 0; i < l->pp; i++) quant |= hs_layout_stage_quant(l, i);
    if (quant) {
        /* the same layout at 16 bits: the variant's decode step is measured
         * against it, whatever share of the step its weights are */
        hs_layout l16 = *l;
        hs_perf t;
        double qn, fn;
        memset(&t, 0, sizeof t);
        l16.kv_bits = 16;
        memset(l16.layer_bits, 0, sizeof l16.layer_bits);
        for (int i = 0; i < l16.pp; i++) l16.stage[i].bits = 16;
        if ((rc = hs_perf_build(&t, pc, m, c, &l16, 1, max_seqs, err))) return rc;
        qn = decode1_ns(q, HS_ISV_RATIO_CTX);
        fn = decode1_ns(&t, HS_ISV_RATIO_CTX);
        hs_perf_free(&t);
        if (qn > 0 && fn > 0) *factor = lat_ratio * fn / qn;
    }
    return 0;
}

int hs_solo_build(hs_solo *s, const hs_perf_cfg *pc, const hs_model *m,
                  const hs_cluster *c, const hs_layout *l, int max_prompt, int max_seqs,
                  double lat_ratio, double pass_extra_ns, hs_err *err)
{
    int rc;
    memset(s, 0, sizeof *s);
    if ((rc = hs_perf_build(&s->perf, pc, m, c, l, max_prompt, max_seqs, err))) return rc;
    if ((rc = hs_solo_factor(&s->perf, pc, m, c, l, max_seqs, lat_ratio, &s->lat_factor, err))) {
        hs_perf_free(&s->perf);
        return rc;
    }
    s->pass_extra_ns = pass_extra_ns;
    return 0;
}

void hs_solo_free(hs_solo *s)
{
    if (s && s->perf.pp) hs_perf_free(&s->perf);
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
    /* the context is added in closed form below */
    a = decode1_ns(&t->perf, 0) + t->pass_extra_ns;
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
    c->alpha = HS_ISV_ALPHA;
    c->usable = 0.95;
    c->slo_factor = 5.0;
    c->rate = 1.0;
    c->max_prompt = 1024;
    c->seed = 1;
    hs_perf_cfg_defaults(&c->perf);   /* the calibrated model (auto) */
}

int hs_multi_create(hs_multi **out, const hs_multi_cfg *cfg, const hs_cluster *c,
                    const hs_model *models, int n_models, hs_err *err)
{
    hs_multi *mm;
    int n = c->n_gpus;
    *out = NULL;
    if (!(cfg->rate > 0 && cfg->rate <= 1))
        return hs_errf(err, HS_ERANGE, "iserve: rate %g must be in (0, 1]", cfg->rate);
    /* above 1 when switching between processes costs GPU time (measured: 1.22) */
    if (!(cfg->alpha >= 0 && cfg->alpha <= 4))
        return hs_errf(err, HS_ERANGE, "iserve: alpha %g must be in [0, 4]", cfg->alpha);
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
        hs_evq_init(&mm->q, 64) || hs_loadmon_init(&mm->mon, n, err)) {
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
    hs_evq_free(&mm->q);
    free(mm->in);
    free(mm->rq);
    free(mm->un);
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
                       mm->cfg.max_prompt, 1, 1.0, 0, err);
    if (!rc) mm->has_base[model] = 1;
    return rc;
}

/* Event kinds; each is also its priority among events at the same instant
 * (lower first):
 *   - the load sample first: it closes the second ending at that instant,
 *     and a deployment then places with that second counted;
 *   - a completion frees its instance before new work is placed (one
 *     completion is queued at a time, the earliest, ties to the lowest
 *     instance index: see queue_finish);
 *   - a deployment before an arrival, so an arrival at the deployment's
 *     instant finds the model due and its instances in place;
 *   - deployments at one instant in the order they were scheduled (seq). */
enum { EV_SAMPLE, EV_FINISH, EV_DEPLOY, EV_ARRIVAL };

int hs_multi_schedule(hs_multi *mm, int model, double t_s, hs_err *err)
{
    hs_ns t;
    /* Times are int64 ns inside: at most about 292 years. */
    if (model < 0 || model >= mm->n_models || !(t_s >= 0) || !(t_s <= 9e9))
        return hs_errf(err, HS_ERANGE, "iserve: deployment of model %d at %g s", model, t_s);
    t = hs_ns_from_s(t_s);
    if (t < mm->q.now) /* from a deploy hook: the clock has passed it */
        return hs_errf(err, HS_ERANGE, "iserve: deployment of model %d at %g s is in the past (%g s)",
                       model, t_s, hs_ns_to_s(mm->q.now));
    if (!hs_evq_push(&mm->q, t, EV_DEPLOY, EV_DEPLOY, model, 0))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    mm->deps_left++;
    return 0;
}

int hs_multi_add(hs_multi *mm, int model, const hs_layout *l, double lat_ratio,
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
                            mm->cfg.max_prompt, 1, lat_ratio, pass_extra_ns, err)))
        return rc;
    in->model = model;
    in->layout = *l;
    in->lat_ratio = lat_ratio;   /* the batched mode scales its own tables alike */
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

/* One run's state beside the runner's. */
typedef struct mrun {
    hs_source *src;
    hs_rng rng;                  /* thinning, then the model of each kept arrival */
    hs_arrival a;                /* the pending kept arrival, when have */
    int have;
    hs_multi_deploy_fn deploy;
    void *ctx;
    hs_multi_result *res;
    hs_ns first_arr, last_fin;
} mrun;

/* Reads up to the next arrival kept by thinning and queues it. */
static int next_arrival(hs_multi *mm, mrun *u, hs_err *err)
{
    int rc;
    while ((rc = hs_source_next(u->src, &u->a, err)) == 1) {
        u->res->arrivals++;
        if (hs_rng_uniform(&u->rng) < mm->cfg.rate) break;
    }
    if (rc < 0) return rc;
    u->have = rc == 1;
    if (!u->have) return 0;
    if (u->a.arrival < mm->q.now)
        return hs_errf(err, HS_ESTATE, "iserve: request %lld arrives before the previous one",
                       (long long)u->a.id);
    if (!hs_evq_push(&mm->q, u->a.arrival, EV_ARRIVAL, EV_ARRIVAL, u->a.id, 0))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    return 0;
}

/* Keeps the one queued completion on the earliest predicted finish, ties to
 * the lowest instance index.  Predictions move whenever rates change, and
 * after any advance of the fluid state (the ceil of a rounded remainder),
 * so this runs after every event; the queued event is replaced only when
 * the earliest (time, instance) changed. */
static int queue_finish(hs_multi *mm, hs_err *err)
{
    hs_ns t_fin = HS_NS_MAX;
    int fin_i = -1;
    for (int i = 0; i < mm->n_in; i++) {
        const hs__inst *in = &mm->in[i];
        hs_ns f;
        if (in->cur < 0) continue;
        f = mm->now + (hs_ns)ceil((in->remaining > 0 ? in->remaining : 0) / in->rate);
        if (f < t_fin) t_fin = f, fin_i = i;
    }
    if (mm->fin_seq && mm->fin_t == t_fin && mm->fin_i == fin_i) return 0;
    if (mm->fin_seq && hs_evq_cancel(&mm->q, mm->fin_seq))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    mm->fin_seq = 0;
    if (fin_i < 0) return 0;
    if (!(mm->fin_seq = hs_evq_push(&mm->q, t_fin, EV_FINISH, EV_FINISH, fin_i, 0)))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    mm->fin_t = t_fin;
    mm->fin_i = fin_i;
    return 0;
}

static void on_sample(hs_multi *mm)
{
    double frac[256];
    for (int g = 0; g < mm->n_gpus; g++) {
        frac[g] = mm->busy_ns[g] / 1e9;
        mm->busy_ns[g] = 0;
    }
    hs_loadmon_push(&mm->mon, frac);
}

static void on_finish(hs_multi *mm, mrun *u, int i)
{
    hs__inst *in = &mm->in[i];
    hs__mreq *r = &mm->rq[in->cur];
    r->finish = mm->now;
    if (mm->now > u->last_fin) u->last_fin = mm->now;
    in->served++;
    u->res->served++;
    in->cur = -1;
    in->remaining = 0;
    start_next(mm, i);
}

static int on_deploy(hs_multi *mm, mrun *u, int m, hs_err *err)
{
    int rc;
    mm->deps_left--;
    mm->due[m] = 1;
    rc = u->deploy(u->ctx, mm, m, err);
    if (rc == HS_ENOFIT) {
        if (err) err->code = 0;
        rc = 0;
    }
    return rc;
}

/* Routes the pending arrival: a uniform model, then its instance with the
 * fewest outstanding requests (ties: lowest index). */
static int on_arrival(hs_multi *mm, mrun *u, hs_err *err)
{
    int model = (int)hs_rng_below(&u->rng, (uint64_t)mm->n_models), best = -1;
    const hs_model *md = &mm->models[model];
    hs_ns t = mm->now;
    hs__mreq *r;
    hs__inst *in;
    int32_t id;
    u->have = 0;
    if (!mm->due[model]) {
        /* Its deployment is still to come: not part of the workload yet. */
        u->res->early++;
        return 0;
    }
    u->res->kept++;
    if (u->first_arr < 0) u->first_arr = t;
    for (int i = 0; i < mm->n_in; i++) {
        int o, ob;
        if (mm->in[i].model != model) continue;
        o = mm->in[i].qlen + (mm->in[i].cur >= 0);
        ob = best < 0 ? 0 : mm->in[best].qlen + (mm->in[best].cur >= 0);
        if (best < 0 || o < ob) best = i;
    }
    if (best < 0) {
        /* Its model could not be deployed: a miss, kept for the request rows. */
        if (hs_vec_reserve((void **)&mm->un, &mm->cap_un, (size_t)mm->n_un + 1, sizeof *mm->un, 256))
            return hs_errf(err, HS_ENOMEM, "out of memory");
        r = &mm->un[mm->n_un++];
        memset(r, 0, sizeof *r);
        r->id = u->a.id;
        r->arrival = t;
        r->prompt = u->a.prompt;
        r->output = u->a.output;
        r->model = model;
        r->inst = -1;
        r->dropped = 1;
        u->res->unserved++;
        return 0;
    }
    if (hs_vec_reserve((void **)&mm->rq, &mm->cap_rq, (size_t)mm->n_rq + 1, sizeof *mm->rq, 4096))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    r = &mm->rq[mm->n_rq];
    memset(r, 0, sizeof *r);
    r->id = u->a.id;
    r->arrival = t;
    r->prompt = u->a.prompt < mm->cfg.max_prompt ? u->a.prompt : mm->cfg.max_prompt;
    r->output = u->a.output;
    if (r->prompt + r->output > md->max_seq_len) r->output = md->max_seq_len - r->prompt;
    if (r->output < 1) r->output = 1;
    r->model = model;
    r->inst = best;
    r->next = -1;
    r->slo_ns = mm->cfg.slo_factor * hs_solo_req_ns(&mm->base[model], r->prompt, r->output, NULL);
    in = &mm->in[best];
    id = (int32_t)mm->n_rq;
    if (in->qtail >= 0) mm->rq[in->qtail].next = id;
    else in->qhead = id;
    in->qtail = id;
    in->qlen++;
    mm->n_rq++;
    start_next(mm, best);
    return 0;
}

static int summarize(hs_multi *mm, const mrun *u, hs_multi_result *res, hs_err *err)
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
    res->duration_s = u->first_arr >= 0 && u->last_fin > u->first_arr
                          ? hs_ns_to_s(u->last_fin - u->first_arr) : 0;
    res->gpu_throughput = used && res->duration_s > 0
                              ? (double)res->served / (res->duration_s * used) : 0;
    return 0;
}

int hs_multi_run(hs_multi *mm, hs_source *src, hs_multi_deploy_fn deploy, void *ctx,
                 hs_multi_result *res, hs_err *err)
{
    mrun u;
    hs_event ev;
    int rc = 0;
    memset(res, 0, sizeof *res);
    if (mm->ran) return hs_errf(err, HS_ESTATE, "iserve: a multi-model runner runs once");
    if (mm->deps_left && !deploy)
        return hs_errf(err, HS_EINVAL, "iserve: deployments scheduled but no deploy hook");
    for (int m = 0; m < mm->n_models; m++)
        if (!mm->has_base[m])
            return hs_errf(err, HS_EINVAL, "iserve: model %s has no base layout for its SLO",
                           mm->models[m].name);
    mm->ran = 1;
    memset(&u, 0, sizeof u);
    u.src = src;
    u.deploy = deploy;
    u.ctx = ctx;
    u.res = res;
    u.first_arr = -1;
    hs_rng_seed(&u.rng, mm->cfg.seed);
    /* The load is sampled every second while anything remains to happen. */
    if (!hs_evq_push(&mm->q, HS_NS_PER_S, EV_SAMPLE, EV_SAMPLE, 0, 0))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    if ((rc = next_arrival(mm, &u, err)) || (rc = queue_finish(mm, err))) return rc;
    while (hs_evq_pop(&mm->q, &ev)) {
        /* Nothing left but the sample (fin_seq is 0 when all are idle): done. */
        if (ev.type == EV_SAMPLE && !u.have && !mm->deps_left && !mm->fin_seq) break;
        advance(mm, ev.time);
        switch (ev.type) {
        case EV_SAMPLE:
            on_sample(mm);
            if (!hs_evq_push(&mm->q, ev.time + HS_NS_PER_S, EV_SAMPLE, EV_SAMPLE, 0, 0))
                return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
            break;
        case EV_FINISH:
            assert(ev.seq == mm->fin_seq && ev.a == mm->fin_i);
            mm->fin_seq = 0;
            on_finish(mm, &u, (int)ev.a);
            break;
        case EV_DEPLOY:
            rc = on_deploy(mm, &u, (int)ev.a, err);
            break;
        case EV_ARRIVAL:
            if (!(rc = on_arrival(mm, &u, err))) rc = next_arrival(mm, &u, err);
            break;
        default:
            assert(0);
        }
        if (rc) return rc;
        if (ev.type != EV_SAMPLE) rerate(mm); /* rates change at starts and completions */
        if ((rc = queue_finish(mm, err))) return rc;
    }
    assert(res->kept == res->served + res->unserved); /* MULTI-CONS */
    return summarize(mm, &u, res, err);
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

const hs_perf *hs_multi_inst_perf(const hs_multi *mm, int i)
{
    return i >= 0 && i < mm->n_in && mm->in[i].solo.perf.pp ? &mm->in[i].solo.perf : NULL;
}

int hs_multi_request(const hs_multi *mm, int64_t i, hs_req_record *rec, int *model, int *slo_met)
{
    const hs__mreq *r;
    if (!mm->ran || i < 0 || i >= mm->n_rq + mm->n_un) return 0;
    r = i < mm->n_rq ? &mm->rq[i] : &mm->un[i - mm->n_rq];
    memset(rec, 0, sizeof *rec);
    rec->id = r->id;
    rec->replica = r->inst;
    rec->prompt = r->prompt;
    rec->output = r->output;
    rec->arrival = r->arrival;
    rec->dropped = r->dropped;
    if (r->dropped) {
        rec->why = r->inst < 0 ? "model not deployed" : "dropped by the engine";
    } else if (mm->batched) {
        rec->first_sched = r->start;
        rec->first_token = r->arrival + (hs_ns)r->ttft_ns;
        rec->finish = r->finish;
    } else {
        double span = (double)(r->finish - r->start);
        rec->first_sched = r->start;
        /* The solo first-token share of the service, stretched like the
         * whole service by the interference it met (rates are piecewise
         * constant, so the ratio is the mean slowdown). */
        rec->first_token = r->start + (hs_ns)(r->solo_ns > 0 ? r->ttft_ns * span / r->solo_ns : 0);
        if (rec->first_token > r->finish) rec->first_token = r->finish;
        rec->finish = r->finish;
    }
    if (model) *model = r->model;
    if (slo_met) *slo_met = !r->dropped && (double)(r->finish - r->arrival) <= r->slo_ns;
    return 1;
}
