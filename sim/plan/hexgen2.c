/* hexgen2.c - the HexGen-2 estimator, flow network and placement search;
 * see hexgen2.h. */
#include "plan/hexgen2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/maxflow.h"
#include "plan/partition.h"
#include "perf/overhead.h"
#include "perf/table.h"

/* ---------------------------------------------------------------- options */

int hs_hg2_opts_parse(hs_hg2_opts *o, const char *s, hs_err *err)
{
    char buf[1024], *save = NULL, *tok;
    memset(o, 0, sizeof *o);
    o->s_in = 1024;
    o->s_out = 256;
    o->period = 60;
    o->conc = 32;
    o->mem_tol = 0.25;
    o->search = HS_HG2_GUIDED;
    o->max_iters = 0;
    o->pop = 24;
    o->max_tp = HS_MAX_TP;
    o->width = 8;
    o->kv_reserve = 1;
    o->quiet = 1;
    if (!s || !*s) return 0;
    if (strlen(s) >= sizeof buf) return hs_errf(err, HS_ERANGE, "plan_opts: longer than %zu characters", sizeof buf - 1);
    strcpy(buf, s);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        const char *k = tok, *v;
        double d;
        if (!eq) return hs_errf(err, HS_EINVAL, "plan_opts: \"%s\" is not key=value", tok);
        *eq = 0;
        v = eq + 1;
        if (!strcmp(k, "search")) {
            if (!strcmp(v, "guided")) o->search = HS_HG2_GUIDED;
            else if (!strcmp(v, "random")) o->search = HS_HG2_RANDOM;
            else if (!strcmp(v, "ga")) o->search = HS_HG2_GA;
            else if (!strcmp(v, "none")) o->search = HS_HG2_NONE;
            else return hs_errf(err, HS_EINVAL, "plan_opts: search: \"%s\" is not guided, random, ga or none", v);
            continue;
        }
        if (!strcmp(k, "prefill")) {
            if (!strcmp(v, "latency")) o->prefill_tput = 0;
            else if (!strcmp(v, "throughput")) o->prefill_tput = 1;
            else return hs_errf(err, HS_EINVAL, "plan_opts: prefill: \"%s\" is not latency or throughput", v);
            continue;
        }
        if (!strcmp(k, "trace")) {
            if (strlen(v) >= sizeof o->trace) return hs_errf(err, HS_ERANGE, "plan_opts: trace: path too long");
            strcpy(o->trace, v);
            continue;
        }
        d = strtod(v, &end);
        if (end == v || *end || !isfinite(d) || d < 0)
            return hs_errf(err, HS_EINVAL, "plan_opts: %s: \"%s\" is not a non-negative number", k, v);
        if (!strcmp(k, "in") && d >= 1) o->s_in = d;
        else if (!strcmp(k, "out") && d >= 1) o->s_out = d;
        else if (!strcmp(k, "period") && d > 0) o->period = d;
        else if (!strcmp(k, "conc") && d >= 1 && d <= 1e6) o->conc = (int)d;
        else if (!strcmp(k, "tol") && d <= 10) o->mem_tol = d;
        else if (!strcmp(k, "time")) o->time_limit = d;
        else if (!strcmp(k, "iters") && d <= 1e9) o->max_iters = (int)d;
        else if (!strcmp(k, "pop") && d >= 4 && d <= 512) o->pop = (int)d;
        else if (!strcmp(k, "width") && d >= 1 && d <= 1e6) o->width = (int)d;
        else if (!strcmp(k, "first")) o->first = d != 0;
        else if (!strcmp(k, "reserve") && d <= 1) o->kv_reserve = d;
        else if (!strcmp(k, "maxtp") && d >= 1 && d <= HS_MAX_TP) o->max_tp = (int)d;
        else if (!strcmp(k, "ttft")) o->ttft_s = d / 1e3;
        else if (!strcmp(k, "tpot")) o->tpot_s = d / 1e3;
        else if (!strcmp(k, "verbose")) o->quiet = d == 0;
        else
            return hs_errf(err, HS_EINVAL, "plan_opts: unknown key or value out of range: %s=%s "
                           "(keys: search, prefill, in, out, period, conc, tol, time, iters, pop, width, first, reserve, maxtp, ttft, tpot, trace, verbose)", k, v);
    }
    return 0;
}

/* ---------------------------------------------------------------- context */

typedef struct centry {
    uint64_t h;
    int role, t_only, pp_only, n;
    int *key;                   /* sorted GPU ids [n] */
    hs_hg2_group g;
} centry;

struct hs_hg2_ctx {
    int oom;                 /* an evaluation ran out of memory (reads as "does not fit") */
    const hs_model *m;
    const hs_cluster *c;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_ovh_profile ovh;         /* engine profile of pc.engine; n = 0: none */
    int bits, max_tokens;
    int32_t mml;
    hs_hg2_opts o;
    int tps[8], n_tps;
    double kvbtl;               /* KV bytes per token per layer, all heads */
    uint64_t rng;
    centry **ent;
    long n_ent, cap_ent;
    int32_t *tab;               /* open addressing, -1 empty */
    long tab_cap;
    int *scratch;               /* [n_gpus] */
    double *kvbuf;              /* [2 n_gpus] zero between kv_time calls */
    int *touched;               /* [4 HS_MAX_TP HS_MAX_PP + 2 n_gpus] */
    uint64_t *pkey;             /* KV time per (group id, group id) + 1, 0 empty */
    double *pval;
    long p_n, p_cap;
    hs_hg2_stats st;
    double t0;
    FILE *trace;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rnd(hs_hg2_ctx *x)
{
    /* xorshift64*: deterministic per seed, no library state */
    x->rng ^= x->rng >> 12;
    x->rng ^= x->rng << 25;
    x->rng ^= x->rng >> 27;
    return x->rng * UINT64_C(2685821657736338717);
}

static int rndn(hs_hg2_ctx *x, int n)
{
    return n <= 1 ? 0 : (int)(rnd(x) % (uint64_t)n);
}

int hs_hg2_ctx_create(hs_hg2_ctx **out, const hs_plan_req *req,
                      const hs_hg2_opts *o, hs_err *err)
{
    hs_hg2_ctx *x = calloc(1, sizeof *x);
    if (!x) return hs_errf(err, HS_ENOMEM, "out of memory");
    x->m = req->model;
    x->c = req->cluster;
    x->ec = *req->engine;
    if (req->perf) x->pc = *req->perf;
    else hs_perf_cfg_defaults(&x->pc);
    /* the host cost the simulation will charge (perf.c engine_terms) */
    if (x->pc.engine[0] && strcmp(x->pc.engine, "none")) {
        int rc = hs_ovh_find(&x->ovh, x->pc.engine, err);
        if (rc) {
            free(x);
            return rc;
        }
    }
    x->bits = req->bits ? req->bits : 16;
    x->max_tokens = req->max_tokens > 0 ? req->max_tokens : 8192;
    x->mml = req->max_model_len > 0 ? req->max_model_len : hs_model_max_context(req->model);
    x->o = *o;
    /* The planned request must be one the engine would serve. */
    if (!(o->s_in >= 1 && o->s_out >= 1 && o->s_in + o->s_out <= x->mml)) {
        int mml = x->mml;
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_ERANGE, "plan_opts: in=%g + out=%g tokens must be at least 1 each and fit the %d-token context",
                       o->s_in, o->s_out, mml);
    }
    for (int t = 1; t <= HS_MAX_TP && t <= o->max_tp; t *= 2)
        if (req->model->heads % t == 0) x->tps[x->n_tps++] = t;
    x->kvbtl = hs_model_kv_bytes_token_layer(req->model, 1, x->ec.kv_bits);
    x->rng = req->seed * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x2545F4914F6CDD1D);
    if (!x->rng) x->rng = 1;
    x->tab_cap = 1024;
    x->tab = malloc((size_t)x->tab_cap * sizeof *x->tab);
    x->scratch = malloc((size_t)req->cluster->n_gpus * sizeof *x->scratch);
    x->kvbuf = calloc((size_t)req->cluster->n_gpus * 2, sizeof *x->kvbuf);
    x->touched = malloc((size_t)req->cluster->n_gpus * 2 * sizeof *x->touched);
    if (!x->tab || !x->scratch || !x->kvbuf || !x->touched) {
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    memset(x->tab, 0xff, (size_t)x->tab_cap * sizeof *x->tab);
    x->t0 = now_s();
    if (o->trace[0] && !(x->trace = fopen(o->trace, "w"))) {
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_EIO, "plan_opts: trace: cannot write %s", o->trace);
    }
    *out = x;
    return 0;
}

int hs_hg2_check_oom(const hs_hg2_ctx *x, int rc, hs_deploy *out, hs_err *err)
{
    if (!x->oom) return rc;
    if (!rc) hs_deploy_free(out);
    return hs_errf(err, HS_ENOMEM, "out of memory while evaluating placements");
}

void hs_hg2_ctx_destroy(hs_hg2_ctx *x)
{
    if (!x) return;
    for (long i = 0; i < x->n_ent; i++) {
        free(x->ent[i]->key);
        free(x->ent[i]->g.tp);
        free(x->ent[i]);
    }
    free(x->ent);
    free(x->tab);
    free(x->pkey);
    free(x->pval);
    free(x->scratch);
    free(x->kvbuf);
    free(x->touched);
    if (x->trace) fclose(x->trace);
    free(x);
}

void hs_hg2_stats_get(const hs_hg2_ctx *x, hs_hg2_stats *st)
{
    *st = x->st;
}

/* ---------------------------------------------------------------- estimator */

/* The roofline's per-rank view of a stage: slowest FLOP/s and bandwidth. */
static void stage_gpu(const hs_hg2_ctx *x, const int *gpus, int tp, hs_gpu *g)
{
    *g = *hs_cluster_gpu(x->c, gpus[0]);
    for (int i = 1; i < tp; i++) {
        const hs_gpu *h = hs_cluster_gpu(x->c, gpus[i]);
        if (h->flops16 < g->flops16) g->flops16 = h->flops16;
        if (h->mem_bw < g->mem_bw) g->mem_bw = h->mem_bw;
    }
}

/* Mirrors roofline.c's build() for one stage and shape, seconds. */
static double stage_time(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                         int bits, int kv_bits, int first, int last,
                         const hs_batch_shape *b)
{
    const hs_model *m = x->m;
    const hs_perf_cfg *cfg = &x->pc;
    hs_gpu g;
    double L = layers, s = 0, t = b->tokens, h = m->hidden;
    double q = (double)m->heads * m->head_dim / tp;
    double kvb = hs_model_kv_bytes_token_layer(m, tp, kv_bits);
    stage_gpu(x, gpus, tp, &g);
    if (b->tokens > 0) {
        static const int ops[] = {HS_OP_QKV, HS_OP_ATTN_OUT, HS_OP_MLP_UP, HS_OP_MLP_DOWN, HS_OP_ACT};
        double us = 0, layer;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
            us += hs_roofline_op_us(ops[k], m, &g, tp, bits, t, cfg);
        us += 2 * hs_roofline_op_us(HS_OP_NORM, m, &g, tp, bits, t, cfg);
        us += 2 * hs_roofline_op_us(HS_OP_ADD, m, &g, tp, bits, t, cfg);
        if (!strcmp(m->position, "rope")) us += hs_roofline_op_us(HS_OP_ROPE, m, &g, tp, bits, t, cfg);
        layer = us * 1e-6;
        /* all-reduces, each with the engine's host launch (perf.c engine_terms) */
        if (tp > 1)
            layer += (m->parallel_attn ? 1 : 2) * (hs_allreduce_s(x->c, gpus, tp, t * h * 2.0, cfg->link_eff) +
                                                   x->ovh.collective_launch_us * 1e-6);
        s += L * layer;
        if (first) s += hs_roofline_op_us(HS_OP_EMB, m, &g, tp, bits, t, cfg) * 1e-6;
    }
    if (last && b->samples > 0) {
        double k = b->samples;
        s += (hs_roofline_op_us(HS_OP_LM_HEAD, m, &g, tp, 16, k, cfg) +
              hs_roofline_op_us(HS_OP_NORM, m, &g, tp, 16, k, cfg)) * 1e-6;
        if (tp > 1)
            s += hs_allreduce_s(x->c, gpus, tp, k * (double)m->vocab / tp * 4.0, cfg->link_eff) / 2 +
                 x->ovh.collective_launch_us * 1e-6;
    }
    if (b->dec_seqs) {
        double per_c = 4.0 * q / (g.flops16 * cfg->attn_eff), per_m = kvb / (g.mem_bw * cfg->mem_eff);
        s += L * (per_c > per_m ? per_c : per_m) * (double)b->dec_ctx +
             L * (4.0 * q / (g.mem_bw * cfg->mem_eff)) * b->dec_seqs + L * cfg->launch_us * 1e-6;
    }
    if (b->pre_chunks) {
        double pair = L * 4.0 * q / (g.flops16 * cfg->attn_eff);
        s += pair * (2 * b->pre_self + b->pre_cross) + L * kvb / (g.mem_bw * cfg->mem_eff) * (double)b->pre_prefix +
             L * cfg->launch_us * 1e-6;
    }
    return s;
}

double hs_hg2_stage_s(const hs_hg2_ctx *x, const hs_layout *l, int s, const hs_batch_shape *b)
{
    const hs_stage_layout *st = &l->stage[s];
    return stage_time(x, st->gpus, st->tp, st->layers, st->bits, l->kv_bits, s == 0,
                      s == l->pp - 1, b);
}

/* Activation send to the next stage, s (roofline's send_alpha/send_token). */
static double send_time(const hs_hg2_ctx *x, int from, int to, double tokens)
{
    double bw, lat;
    if (from == to) return 0;
    bw = hs_cluster_bw(x->c, from, to);
    lat = hs_cluster_lat(x->c, from, to);
    return lat + tokens * x->m->hidden * 2.0 / (bw * x->pc.link_eff);
}

/* Usable bytes left for KV on the stage's tightest rank; < 0 when the
 * weights and activations do not fit. */
static double stage_avail(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                          int first, int last, double *kv_tok)
{
    hs_stage_mem mem;
    double avail = INFINITY;
    hs_model_stage_mem(x->m, layers, first, last, tp, x->bits, x->ec.kv_bits, x->max_tokens,
                       x->ec.max_num_seqs, &mem);
    for (int k = 0; k < tp; k++) {
        double a = hs_cluster_gpu(x->c, gpus[k])->mem_bytes * x->ec.gpu_mem_util - mem.weights - mem.activation;
        if (a < avail) avail = a;
    }
    *kv_tok = mem.kv_per_token;
    return avail;
}

/* Blocks a stage holds (hs_layout_kv_blocks' rule); -1 when it does not fit. */
static int64_t stage_blocks(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                            int first, int last)
{
    double kvt, a = stage_avail(x, gpus, tp, layers, first, last, &kvt);
    if (a <= 0) return -1;
    return (int64_t)floor(a / (kvt * x->ec.block_size));
}

/* INV-FIT of the runtime: every lane (one per stage) holds one context. */
static int stage_fits(const hs_hg2_ctx *x, const int *gpus, int tp, int layers, int first,
                      int last, int pp)
{
    int64_t b = stage_blocks(x, gpus, tp, layers, first, last);
    return b >= 0 && b / pp * x->ec.block_size >= x->mml;
}

static const hs_cluster *cmp_gpu_c;
static int cmp_gpu(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    const hs_cluster *c = cmp_gpu_c;
    if (c->gpu_node[i] != c->gpu_node[j]) return c->gpu_node[i] - c->gpu_node[j];
    if (c->gpu_type[i] != c->gpu_type[j]) return c->gpu_type[i] - c->gpu_type[j];
    return i - j;
}

static void sort_gpus(const hs_cluster *c, int *g, int n)
{
    /* qsort with a file-scope cluster: the planner is single-threaded and
     * the order is total (ties end on the id), so the result is deterministic */
    cmp_gpu_c = c;
    qsort(g, (size_t)n, sizeof *g, cmp_gpu);
}

/* Builds the stages of gpus (sorted) under TP cap t; fills tp[], layers[]
 * and returns pp, or 0 when the model does not fit. */
static int build_layout(const hs_hg2_ctx *x, const int *g, int n, int role, int t, int pp_only,
                        int *tp, int *layers)
{
    const hs_cluster *c = x->c;
    int pp = 0, i = 0, off, L = x->m->layers;
    int lmax[HS_MAX_PP];
    double w[HS_MAX_PP];
    while (i < n) {
        int j = i;
        while (j < n && c->gpu_node[g[j]] == c->gpu_node[g[i]] && c->gpu_type[g[j]] == c->gpu_type[g[i]]) j++;
        for (int left = j - i; left > 0;) {
            int s = 1;
            for (int k = 0; k < x->n_tps; k++)
                if (x->tps[k] <= t && x->tps[k] <= left) s = x->tps[k];
            if (pp >= HS_MAX_PP) return 0;
            tp[pp++] = s;
            left -= s;
        }
        i = j;
    }
    if (pp > L || (pp_only && pp != pp_only)) return 0;
    /* memory cap per stage (binary search on layers), then speed shares */
    off = 0;
    for (int s = 0; s < pp; s++) {
        int lo = 0, hi = L - (pp - 1);
        hs_gpu gg;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (stage_fits(x, g + off, tp[s], mid, s == 0, s == pp - 1, pp)) lo = mid;
            else hi = mid - 1;
        }
        if (lo < 1) return 0;
        lmax[s] = lo;
        stage_gpu(x, g + off, tp[s], &gg);
        w[s] = tp[s] * (role == HS_HG2_DECODE ? gg.mem_bw : gg.flops16);
        layers[s] = 1;
        off += tp[s];
    }
    for (int k = pp; k < L; k++) {
        int best = -1;
        double bv = INFINITY;
        for (int s = 0; s < pp; s++) {
            double v;
            if (layers[s] >= lmax[s]) continue;
            v = (layers[s] + 1) / w[s];
            if (v < bv) {
                bv = v;
                best = s;
            }
        }
        if (best < 0) return 0;
        layers[best]++;
    }
    return pp;
}

/* Fills rate / lat / batch of a built layout. */
static void time_layout(const hs_hg2_ctx *x, const int *g, int pp, const int *tp,
                        const int *layers, int role, hs_hg2_group *out)
{
    double sum = 0, mx = 0, ovh, pre_rate, lat, of = 0, os = 0, ot = 0;
    int tpmax = 1;
    double si = x->o.s_in, so = x->o.s_out;
    int64_t blocks = INT64_MAX;
    hs_batch_shape b;
    int off = 0;
    /* prefill of one prompt */
    memset(&b, 0, sizeof b);
    b.tokens = (int32_t)si;
    b.samples = 1;
    b.pre_chunks = 1;
    b.pre_self = si * (si + 1) / 2;
    b.pre_tokens = (int64_t)si;
    for (int s = 0; s < pp; s++) tpmax = tp[s] > tpmax ? tp[s] : tpmax;
    if (x->ovh.n) hs_ovh_coef(&x->ovh, tpmax, pp, &of, &os, &ot);
    ovh = x->pc.step_overhead_us * 1e-6 + (of + os + ot * si) * 1e-9;
    for (int s = 0; s < pp; s++) {
        double v = stage_time(x, g + off, tp[s], layers[s], x->bits, x->ec.kv_bits, s == 0, s == pp - 1, &b);
        if (s + 1 < pp) v += send_time(x, g[off], g[off + tp[s]], si);
        sum += v;
        if (v > mx) mx = v;
        off += tp[s];
    }
    lat = sum + ovh;
    pre_rate = fmin(pp / lat, 1.0 / (mx + ovh));
    out->lat_s = lat;
    out->rate = pre_rate;
    out->batch = 0;
    if (role == HS_HG2_PREFILL) return;
    /* decode: the batch the KV holds */
    off = 0;
    for (int s = 0; s < pp; s++) {
        int64_t bl = stage_blocks(x, g + off, tp[s], layers[s], s == 0, s == pp - 1);
        if (bl < blocks) blocks = bl;
        off += tp[s];
    }
    {
        double ctx = si + so / 2, tokens = (double)blocks * x->ec.block_size;
        double B = fmin((double)pp * x->ec.max_num_seqs, floor(tokens / (si + so * x->o.kv_reserve))), bl, round, tok_s;
        bl = floor(B / pp);
        if (bl < 1) bl = 1;
        memset(&b, 0, sizeof b);
        b.tokens = (int32_t)bl;
        b.samples = (int32_t)bl;
        b.dec_seqs = (int32_t)bl;
        b.dec_ctx = (int64_t)(bl * ctx);
        sum = mx = 0;
        off = 0;
        for (int s = 0; s < pp; s++) {
            double v = stage_time(x, g + off, tp[s], layers[s], x->bits, x->ec.kv_bits, s == 0, s == pp - 1, &b);
            if (s + 1 < pp) v += send_time(x, g[off], g[off + tp[s]], bl);
            sum += v;
            if (v > mx) mx = v;
            off += tp[s];
        }
        ovh = x->pc.step_overhead_us * 1e-6 + (of + (os + ot) * bl) * 1e-9;
        round = fmax(sum, pp * mx) + ovh;
        tok_s = pp * bl / round;
        out->batch = pp * bl;
        if (role == HS_HG2_DECODE) {
            out->rate = tok_s / so;
            out->lat_s = round;
        } else {
            out->rate = 1.0 / (1.0 / pre_rate + so / tok_s);
        }
    }
}

static uint64_t key_hash(int role, int t_only, int pp_only, const int *g, int n)
{
    uint64_t h = UINT64_C(1469598103934665603);
    h = (h ^ (uint64_t)(role + 7 * t_only + 131 * pp_only)) * UINT64_C(1099511628211);
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)g[i]) * UINT64_C(1099511628211);
    return h ^ (uint64_t)n;
}

static int cache_grow(hs_hg2_ctx *x)
{
    long nc = x->tab_cap * 2;
    int32_t *nt = malloc((size_t)nc * sizeof *nt);
    if (!nt) return -1;
    memset(nt, 0xff, (size_t)nc * sizeof *nt);
    for (long i = 0; i < x->n_ent; i++) {
        long p = (long)(x->ent[i]->h & (uint64_t)(nc - 1));
        while (nt[p] >= 0) p = (p + 1) & (nc - 1);
        nt[p] = (int32_t)i;
    }
    free(x->tab);
    x->tab = nt;
    x->tab_cap = nc;
    return 0;
}

const hs_hg2_group *hs_hg2_eval_group(hs_hg2_ctx *x, const int *gpus, int n, int role,
                                      int t_only, int pp_only)
{
    static const hs_hg2_group none = {.id = -1};
    int *g = x->scratch;
    uint64_t h;
    long p;
    centry *e;
    if (n <= 0) return &none;
    memcpy(g, gpus, (size_t)n * sizeof *g);
    sort_gpus(x->c, g, n);
    h = key_hash(role, t_only, pp_only, g, n);
    for (p = (long)(h & (uint64_t)(x->tab_cap - 1)); x->tab[p] >= 0; p = (p + 1) & (x->tab_cap - 1)) {
        e = x->ent[x->tab[p]];
        if (e->h == h && e->role == role && e->t_only == t_only && e->pp_only == pp_only && e->n == n &&
            !memcmp(e->key, g, (size_t)n * sizeof *g))
            return &e->g;
    }
    /* miss: evaluate every TP cap, keep the best for the role */
    x->st.group_evals++;
    e = calloc(1, sizeof *e);
    if (!e) {
        x->oom = 1;
        return &none;
    }
    e->h = h;
    e->role = role;
    e->t_only = t_only;
    e->pp_only = pp_only;
    e->n = n;
    e->key = malloc((size_t)n * sizeof *e->key);
    e->g.tp = malloc((size_t)(2 * HS_MAX_PP + n) * sizeof *e->g.tp);
    if (!e->key || !e->g.tp) {
        free(e->key);
        free(e->g.tp);
        free(e);
        x->oom = 1;
        return &none;
    }
    memcpy(e->key, g, (size_t)n * sizeof *g);
    e->g.layers = e->g.tp + HS_MAX_PP;
    e->g.gpus = e->g.tp + 2 * HS_MAX_PP;
    memcpy(e->g.gpus, g, (size_t)n * sizeof *g);
    for (int k = 0; k < x->n_tps; k++) {
        int tp[HS_MAX_PP], layers[HS_MAX_PP], pp;
        hs_hg2_group cand;
        if (t_only && x->tps[k] != t_only) continue;
        pp = build_layout(x, g, n, role, x->tps[k], pp_only, tp, layers);
        if (!pp) continue;
        memset(&cand, 0, sizeof cand);
        time_layout(x, g, pp, tp, layers, role, &cand);
        if (!e->g.ok || (role == HS_HG2_PREFILL && !x->o.prefill_tput ? cand.lat_s < e->g.lat_s : cand.rate > e->g.rate)) {
            e->g.ok = 1;
            e->g.pp = pp;
            e->g.rate = cand.rate;
            e->g.lat_s = cand.lat_s;
            e->g.batch = cand.batch;
            memcpy(e->g.tp, tp, (size_t)pp * sizeof *tp);
            memcpy(e->g.layers, layers, (size_t)pp * sizeof *layers);
        }
    }
    /* insert */
    if ((x->n_ent + 1) * 2 > x->tab_cap && cache_grow(x)) goto fail;
    if (x->n_ent == x->cap_ent) {
        long nc = x->cap_ent ? x->cap_ent * 2 : 256;
        centry **ne = realloc(x->ent, (size_t)nc * sizeof *ne);
        if (!ne) goto fail;
        x->ent = ne;
        x->cap_ent = nc;
    }
    for (p = (long)(h & (uint64_t)(x->tab_cap - 1)); x->tab[p] >= 0; p = (p + 1) & (x->tab_cap - 1))
        ;
    x->tab[p] = (int32_t)x->n_ent;
    e->g.id = x->n_ent;
    x->ent[x->n_ent++] = e;
    return &e->g;
fail:
    free(e->key);
    free(e->g.tp);
    free(e);
    return &none;
}

void hs_hg2_group_layout(const hs_hg2_ctx *x, const hs_hg2_group *g, hs_layout *l)
{
    int off = 0;
    memset(l, 0, sizeof *l);
    l->pp = g->pp;
    l->kv_bits = x->ec.kv_bits;
    for (int s = 0; s < g->pp; s++) {
        l->stage[s].tp = g->tp[s];
        l->stage[s].layers = g->layers[s];
        l->stage[s].bits = x->bits;
        memcpy(l->stage[s].gpus, g->gpus + off, (size_t)g->tp[s] * sizeof(int));
        off += g->tp[s];
    }
}

double hs_hg2_kv_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    /* Per sending GPU and per receiving GPU: serialised bytes / pair
     * bandwidth (a NIC or link shared by the flows of one request), plus
     * the largest latency; the flows mirror engine.c's start_transfer. */
    double *out = x->kvbuf, *in = x->kvbuf + x->c->n_gpus, worst = 0, lat = 0;
    int ao = 0, la = 0, nt = 0;
    for (int s = 0; s < a->pp; s++) {
        int bo = 0, lb = 0;
        for (int d = 0; d < b->pp; d++) {
            int lo = la > lb ? la : lb;
            int hi = la + a->layers[s] < lb + b->layers[d] ? la + a->layers[s] : lb + b->layers[d];
            if (hi > lo) {
                int nf = a->tp[s] > b->tp[d] ? a->tp[s] : b->tp[d];
                double bytes = (double)(hi - lo) * x->o.s_in * x->kvbtl / nf;
                for (int i = 0; i < nf; i++) {
                    int src = a->gpus[ao + i % a->tp[s]], dst = b->gpus[bo + i % b->tp[d]];
                    double t = src == dst ? 0 : bytes / hs_cluster_bw(x->c, src, dst);
                    if (out[src] == 0) x->touched[nt++] = src;
                    if (in[dst] == 0) x->touched[nt++] = x->c->n_gpus + dst;
                    out[src] += t;
                    in[dst] += t;
                    if (src != dst && hs_cluster_lat(x->c, src, dst) > lat) lat = hs_cluster_lat(x->c, src, dst);
                }
            }
            bo += b->tp[d];
            lb += b->layers[d];
        }
        ao += a->tp[s];
        la += a->layers[s];
    }
    for (int i = 0; i < nt; i++) {
        if (x->kvbuf[x->touched[i]] > worst) worst = x->kvbuf[x->touched[i]];
        x->kvbuf[x->touched[i]] = 0;
    }
    return lat + worst;
}

/* ---------------------------------------------------------------- placement */

static int place_alloc(hs_hg2_place *p, int n);

void hs_hg2_place_free(hs_hg2_place *p)
{
    free(p->group);
    free(p->role);
    free(p->t_only);
    free(p->pp_only);
    memset(p, 0, sizeof *p);
}

int hs_hg2_place_alloc(hs_hg2_place *p, int n)
{
    int rc = place_alloc(p, n);
    if (!rc)
        for (int i = 0; i < n; i++) p->group[i] = -1;
    return rc;
}

static int place_alloc(hs_hg2_place *p, int n)
{
    memset(p, 0, sizeof *p);
    p->n_gpus = n;
    p->K = n;
    p->group = malloc((size_t)n * sizeof *p->group);
    p->role = calloc((size_t)n, sizeof *p->role);
    if (!p->group || !p->role) {
        hs_hg2_place_free(p);
        return -1;
    }
    return 0;
}

static void place_copy(hs_hg2_place *d, const hs_hg2_place *s)
{
    memcpy(d->group, s->group, (size_t)s->n_gpus * sizeof *d->group);
    memcpy(d->role, s->role, (size_t)s->n_gpus * sizeof *d->role);
    d->K = s->K;
}

void hs_hg2_eval_free(hs_hg2_eval *ev)
{
    free(ev->cap);
    memset(ev, 0, sizeof *ev);
}

/* hs_hg2_kv_time memoised per pair of cached groups (ids are stable). */
static double pair_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    uint64_t key = (((uint64_t)a->id << 32) | (uint64_t)b->id) + 1, h;
    long p;
    if (a->id < 0 || b->id < 0) return hs_hg2_kv_time(x, a, b);
    if ((x->p_n + 1) * 2 > x->p_cap) {
        long nc = x->p_cap ? x->p_cap * 2 : 4096;
        uint64_t *nk = calloc((size_t)nc, sizeof *nk);
        double *nv = malloc((size_t)nc * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return hs_hg2_kv_time(x, a, b);
        }
        for (long i = 0; i < x->p_cap; i++) {
            if (!x->pkey[i]) continue;
            h = x->pkey[i] * UINT64_C(0x9E3779B97F4A7C15);
            for (p = (long)(h >> 20) & (nc - 1); nk[p]; p = (p + 1) & (nc - 1))
                ;
            nk[p] = x->pkey[i];
            nv[p] = x->pval[i];
        }
        free(x->pkey);
        free(x->pval);
        x->pkey = nk;
        x->pval = nv;
        x->p_cap = nc;
    }
    h = key * UINT64_C(0x9E3779B97F4A7C15);
    for (p = (long)(h >> 20) & (x->p_cap - 1); x->pkey[p]; p = (p + 1) & (x->p_cap - 1))
        if (x->pkey[p] == key) return x->pval[p];
    x->pkey[p] = key;
    x->pval[p] = hs_hg2_kv_time(x, a, b);
    x->p_n++;
    return x->pval[p];
}

/* Per request, the longest time one GPU of the group spends on its NIC
 * (egress for prefill, ingress for decode): the bytes of its stage's layers
 * over its NIC capacity, the largest bandwidth to another node (hw/net.h);
 * 0 when the group's GPUs have no other node. */
static double nic_time(const hs_hg2_ctx *x, const hs_hg2_group *g, int ingress)
{
    const hs_cluster *c = x->c;
    double worst = 0;
    int off = 0;
    for (int s = 0; s < g->pp; s++) {
        double bytes = g->layers[s] * x->o.s_in * x->kvbtl / g->tp[s];
        for (int k = 0; k < g->tp[s]; k++) {
            int a = g->gpus[off + k];
            double nic = 0;
            for (int b = 0; b < c->n_gpus; b++) {
                double bw;
                if (c->gpu_node[b] == c->gpu_node[a]) continue;
                bw = ingress ? hs_cluster_bw(c, b, a) : hs_cluster_bw(c, a, b);
                if (bw > nic) nic = bw;
            }
            if (nic > 0 && bytes / nic > worst) worst = bytes / nic;
        }
        off += g->tp[s];
    }
    return worst;
}

/* 1 when every GPU of both groups sits in one node (no NIC in between). */
static int same_node(const hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    int n0 = x->c->gpu_node[a->gpus[0]], na = 0, nb = 0;
    for (int s = 0; s < a->pp; s++) na += a->tp[s];
    for (int s = 0; s < b->pp; s++) nb += b->tp[s];
    for (int i = 0; i < na; i++)
        if (x->c->gpu_node[a->gpus[i]] != n0) return 0;
    for (int i = 0; i < nb; i++)
        if (x->c->gpu_node[b->gpus[i]] != n0) return 0;
    return 1;
}

/* Members of each group, counting-sorted: group k holds
 * mem[start[k] .. start[k+1]).  Arrays of the context's size. */
typedef struct members {
    int *mem, *start;
    const hs_hg2_group **g;
} members;

int hs_hg2_evaluate(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    int K = p->K, n = p->n_gpus, rc = 0, coloc = 1;
    int *mem = NULL, *start = NULL;
    const hs_hg2_group **g = NULL;
    hs_flow_graph *fg = NULL;
    double T = x->o.period;
    x->st.evals++;
    if (ev->K != K || !ev->cap) {
        hs_hg2_eval_free(ev);
        ev->cap = calloc((size_t)(3 * K + 3 * K * K), sizeof *ev->cap);
        if (!ev->cap) return hs_errf(err, HS_ENOMEM, "out of memory");
        ev->gflow = ev->cap + K;
        ev->ncap = ev->gflow + K;
        ev->pair = ev->ncap + K;
        ev->pcap = ev->pair + (size_t)K * K;
        ev->cross = ev->pcap + (size_t)K * K;
        ev->K = K;
    } else {
        memset(ev->cap, 0, (size_t)(3 * K + 3 * K * K) * sizeof *ev->cap);
    }
    mem = malloc((size_t)n * sizeof *mem);
    start = calloc((size_t)K + 1, sizeof *start);
    g = calloc((size_t)K, sizeof *g);
    if (!mem || !start || !g) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (p->group[i] >= 0) start[p->group[i] + 1]++;
    for (int k = 0; k < K; k++) start[k + 1] += start[k];
    {
        int *fill = x->scratch;
        memcpy(fill, start, (size_t)K * sizeof *fill);
        for (int i = 0; i < n; i++)
            if (p->group[i] >= 0) mem[fill[p->group[i]]++] = i;
    }
    for (int k = 0; k < K; k++) {
        g[k] = hs_hg2_eval_group(x, mem + start[k], start[k + 1] - start[k], p->role[k],
                                 p->t_only ? p->t_only[k] : 0, p->pp_only ? p->pp_only[k] : 0);
        ev->cap[k] = g[k]->ok ? g[k]->rate * T : 0;
        if (g[k]->ok && p->role[k] != HS_HG2_COLOC) {
            double tn = nic_time(x, g[k], p->role[k] == HS_HG2_DECODE);
            ev->ncap[k] = tn > 0 ? T / tn : -1; /* unbounded: set below */
        }
        if (start[k + 1] > start[k] && p->role[k] != HS_HG2_COLOC) coloc = 0;
    }
    if (coloc) {
        ev->flow = 0;
        for (int k = 0; k < K; k++) {
            ev->gflow[k] = ev->cap[k];
            ev->flow += ev->cap[k];
        }
    } else {
        /* nodes: group k, its NIC side K + k, source 2K, sink 2K + 1;
         * cross-node KV goes P_i -> nic(P_i) -> nic(D_j) -> D_j so the
         * flows of one group share its GPUs' NICs as in hw/net.h */
        int s = 2 * K, t = 2 * K + 1, e;
        /* "unbounded" edges get a finite cap that never binds: push-relabel's
         * zero tolerance scales with the largest capacity (maxflow.h) */
        double unbounded = 1;
        for (int k = 0; k < K; k++) unbounded += 2 * ev->cap[k];
        for (int k = 0; k < K; k++)
            if (ev->ncap[k] < 0 || ev->ncap[k] > unbounded) ev->ncap[k] = unbounded;
        if ((rc = hs_flow_create(&fg, 2 * K + 2, err))) goto out;
        for (int k = 0; k < K; k++) {
            if (ev->cap[k] <= 0) continue;
            e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, k, K + k, ev->ncap[k], err)
                                             : hs_flow_add_edge(fg, K + k, k, ev->ncap[k], err);
            if (e < 0) {
                rc = e;
                goto out;
            }
        }
        for (int k = 0; k < K; k++) {
            if (ev->cap[k] <= 0) continue;
            if (p->role[k] == HS_HG2_PREFILL) e = hs_flow_add_edge(fg, s, k, ev->cap[k], err);
            else e = hs_flow_add_edge(fg, k, t, ev->cap[k], err);
            if (e < 0) {
                rc = e;
                goto out;
            }
        }
        for (int i = 0; i < K; i++) {
            if (ev->cap[i] <= 0 || p->role[i] != HS_HG2_PREFILL) continue;
            for (int j = 0; j < K; j++) {
                double tt;
                if (ev->cap[j] <= 0 || p->role[j] != HS_HG2_DECODE) continue;
                tt = pair_time(x, g[i], g[j]);
                ev->pcap[(size_t)i * K + j] = tt > 0 ? fmin(T / tt, unbounded) : unbounded;
                ev->cross[(size_t)i * K + j] = !same_node(x, g[i], g[j]);
                e = ev->cross[(size_t)i * K + j] ? hs_flow_add_edge(fg, K + i, K + j, ev->pcap[(size_t)i * K + j], err)
                                                 : hs_flow_add_edge(fg, i, j, ev->pcap[(size_t)i * K + j], err);
                if (e < 0) {
                    rc = e;
                    goto out;
                }
            }
        }
        if ((rc = hs_flow_push_relabel(fg, s, t, &ev->flow, err))) goto out;
        for (e = 0; e < hs_flow_edges(fg); e++) {
            int a = hs_flow_edge_from(fg, e), b = hs_flow_edge_to(fg, e);
            double f = hs_flow_edge_flow(fg, e);
            if (a == s) ev->gflow[b] = f;
            else if (b == t) ev->gflow[a] = f;
            else if (a < K && b < K) ev->pair[(size_t)a * K + b] = f;
            else if (a >= K && b >= K) ev->pair[(size_t)(a - K) * K + (b - K)] = f;
        }
    }
    ev->tput = ev->flow / T * x->o.s_out;
out:
    hs_flow_destroy(fg);
    free(mem);
    free(start);
    free(g);
    return rc;
}

/* ---------------------------------------------------------------- search */

static double elapsed(const hs_hg2_ctx *x)
{
    return now_s() - x->t0;
}

static void note_best(hs_hg2_ctx *x, double tput)
{
    if (tput > x->st.best_tput * (1 + 1e-12) || x->st.best_tput == 0) {
        x->st.best_tput = tput;
        if (x->trace) fprintf(x->trace, "%.6f %.6f\n", elapsed(x), tput);
    }
}

/* Scores a placement (output tokens/s); -1 on error. */
static double score(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    if (hs_hg2_evaluate(x, p, ev, err)) return -1;
    note_best(x, ev->tput);
    return ev->tput;
}

/* Initial placement: K from memory, spectral + KL, coarsen, max-cut. */
static int k_from_memory(const hs_hg2_ctx *x)
{
    double total = 0, need;
    for (int i = 0; i < x->c->n_gpus; i++) total += hs_cluster_gpu(x->c, i)->mem_bytes * x->ec.gpu_mem_util;
    need = hs_model_params(x->m) * hs_weight_bytes_per_param(x->bits) +
           x->o.conc * (x->o.s_in + x->o.s_out) * x->kvbtl * x->m->layers;
    return hs_part_k_from_memory(total, need);
}

/* kforce > 0: that many groups instead of K from memory. */
static int initial(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, int kforce, hs_err *err)
{
    const hs_cluster *c = x->c;
    int n = c->n_gpus, K = kforce > 0 ? kforce : k_from_memory(x), rc;
    hs_part_graph *g = NULL, *cg = NULL;
    int *side = NULL;
    if (!colocated && K < 2) K = 2;
    if (K > n) K = n;
    if (place_alloc(p, n)) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = hs_part_graph_from_cluster(&g, c, err))) goto out;
    if ((rc = hs_part_spectral(g, K, p->group, err))) goto out;
    {
        hs_err e2 = {0};
        /* an unreachable balance keeps the spectral partition (ENOFIT) */
        rc = hs_part_kl_refine(g, K, p->group, x->o.mem_tol, &e2);
        if (rc && rc != HS_ENOFIT) {
            *err = e2;
            goto out;
        }
        rc = 0;
    }
    p->K = K;
    for (int k = 0; k < n; k++) p->role[k] = colocated ? HS_HG2_COLOC : HS_HG2_DECODE;
    if (!colocated && K >= 2) {
        side = malloc((size_t)K * sizeof *side);
        if (!side) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = hs_part_coarsen(g, p->group, K, &cg, err))) goto out;
        if ((rc = hs_part_bipartition_max_cut(cg, side, err))) goto out;
        {
            /* which side prefills: the better of the two orientations */
            hs_hg2_eval ev = {0};
            double a, b;
            for (int k = 0; k < K; k++) p->role[k] = side[k] ? HS_HG2_DECODE : HS_HG2_PREFILL;
            if ((a = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
            for (int k = 0; k < K && !rc; k++) p->role[k] = side[k] ? HS_HG2_PREFILL : HS_HG2_DECODE;
            if (!rc && (b = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
            if (!rc && a >= b)
                for (int k = 0; k < K; k++) p->role[k] = side[k] ? HS_HG2_DECODE : HS_HG2_PREFILL;
            hs_hg2_eval_free(&ev);
        }
    }
    /* group ids beyond K are free slots for splits (roles default decode) */
    p->K = n;
out:
    free(side);
    hs_part_graph_destroy(g);
    hs_part_graph_destroy(cg);
    if (rc) hs_hg2_place_free(p);
    return rc;
}

static int group_size(const hs_hg2_place *p, int k)
{
    int c = 0;
    for (int i = 0; i < p->n_gpus; i++) c += p->group[i] == k;
    return c;
}

/* Class of a GPU: same node and type are interchangeable for moves. */
static int same_class(const hs_cluster *c, int a, int b)
{
    return c->gpu_node[a] == c->gpu_node[b] && c->gpu_type[a] == c->gpu_type[b];
}

/* One representative (largest id) per class among the GPUs of group k. */
static int class_reps(const hs_hg2_ctx *x, const hs_hg2_place *p, int k, int *reps)
{
    int nr = 0;
    for (int i = p->n_gpus - 1; i >= 0; i--) {
        int dup = 0;
        if (p->group[i] != k) continue;
        for (int r = 0; r < nr && !dup; r++) dup = same_class(x->c, reps[r], i);
        if (!dup) reps[nr++] = i;
    }
    return nr;
}

static int empty_slot(const hs_hg2_place *p);

static int c_ngpus(const hs_hg2_ctx *x)
{
    return x->c->n_gpus;
}

/* Max-flow-guided refinement: see hexgen2.h. */
static int guided(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int n = p->n_gpus, K = p->K, rc = 0;
    hs_hg2_eval ev = {0}, tv = {0};
    hs_hg2_place best;
    int *recv = malloc((size_t)K * sizeof *recv), *size = malloc((size_t)K * sizeof *size);
    int *ra = malloc((size_t)n * sizeof *ra), *rb = malloc((size_t)n * sizeof *rb);
    int *amem = malloc((size_t)n * sizeof *amem), *isd = malloc((size_t)K * 4 * sizeof *isd);
    int *isr = isd + K, *dl = isd + 2 * K, *rl = isd + 3 * K;
    double cur;
    if (!recv || !size || !ra || !rb || !amem || !isd || place_alloc(&best, n)) {
        free(recv); free(size); free(ra); free(rb); free(amem); free(isd);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    if ((cur = score(x, p, &ev, err)) < 0) {
        rc = HS_ENOMEM;
        goto out;
    }
    for (;;) {
        double bv = cur;
        int found = 0, any_donor = 0;
        x->st.steps++;
        for (int k = 0; k < K; k++) {
            size[k] = group_size(p, k);
            recv[k] = 0;
            if (!size[k] || ev.cap[k] <= 0) continue;
            if (colocated) recv[k] = 1;
            else if (ev.gflow[k] >= ev.cap[k] * (1 - 1e-6)) recv[k] = 1;
            for (int j = 0; j < K && !recv[k]; j++) {
                double pc = p->role[k] == HS_HG2_PREFILL ? ev.pcap[(size_t)k * K + j] : ev.pcap[(size_t)j * K + k];
                double pf = p->role[k] == HS_HG2_PREFILL ? ev.pair[(size_t)k * K + j] : ev.pair[(size_t)j * K + k];
                if (pc > 0 && pf >= pc * (1 - 1e-6)) recv[k] = 1;
            }
        }
        for (int k = 0; k < K; k++) any_donor |= size[k] && !recv[k];
        /* the W donors with the most slack (infeasible groups first) and
         * the W tightest receivers (smallest capacity): the max-flow's
         * under-used and bottleneck parts; W bounds a step's candidates */
        {
            int nd = 0, nr = 0, W = x->o.width;
            for (int k = 0; k < K; k++) {
                isd[k] = isr[k] = 0;
                if (!size[k]) continue;
                if (!recv[k] || !any_donor) dl[nd++] = k;
                if (recv[k] || !any_donor) rl[nr++] = k;
            }
            for (int i = 1; i < nd; i++) { /* insertion sort, stable: slack desc */
                int v = dl[i], j = i;
                double sv = ev.cap[v] > 0 ? ev.cap[v] - ev.gflow[v] : INFINITY;
                while (j > 0 && (ev.cap[dl[j - 1]] > 0 ? ev.cap[dl[j - 1]] - ev.gflow[dl[j - 1]] : INFINITY) < sv) {
                    dl[j] = dl[j - 1];
                    j--;
                }
                dl[j] = v;
            }
            for (int i = 1; i < nr; i++) { /* capacity asc */
                int v = rl[i], j = i;
                while (j > 0 && ev.cap[rl[j - 1]] > ev.cap[v]) {
                    rl[j] = rl[j - 1];
                    j--;
                }
                rl[j] = v;
            }
            for (int i = 0; i < nd && i < W; i++) isd[dl[i]] = 1;
            for (int i = 0; i < nr && i < W; i++) isr[rl[i]] = 1;
            /* the richest receivers also give: regrouping inside the
             * bottleneck side (e.g. pooling small GPUs into a deeper
             * pipeline that holds more KV) is a move toward it too */
            for (int i = nr - 1; i >= 0 && i >= nr - W; i--) isd[rl[i]] = 1;
        }
        best.K = p->K;
        for (int a = 0; a < K; a++) {
            int na;
            if (!isd[a]) continue;
            na = class_reps(x, p, a, ra);
            /* flip the donor's role */
            if (!colocated) {
                double v;
                p->role[a] ^= 1;
                if ((v = score(x, p, &tv, err)) < 0) { rc = HS_ENOMEM; goto out; }
                if (v > bv * (1 + 1e-9)) { bv = v; found = 1; place_copy(&best, p); if (x->o.first) goto apply; }
                p->role[a] ^= 1;
            }
            /* split the donor in two halves (GPU order), new half of either role */
            if (size[a] >= 2) {
                int e = empty_slot(p), c = 0;
                if (e >= 0) {
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == a && (c++ >= size[a] / 2)) p->group[i] = e;
                    for (int r = 0; r < (colocated ? 1 : 2); r++) {
                        double v;
                        p->role[e] = colocated ? HS_HG2_COLOC : r;
                        if ((v = score(x, p, &tv, err)) < 0) { rc = HS_ENOMEM; goto out; }
                        if (v > bv * (1 + 1e-9)) { bv = v; found = 1; place_copy(&best, p); if (x->o.first) goto apply; }
                    }
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == e) p->group[i] = a;
                }
            }
            for (int b = 0; b < K; b++) {
                int nb;
                if (b == a || !isr[b]) continue;
                nb = class_reps(x, p, b, rb);
                /* merge the donor into b */
                {
                    double v;
                    int m = 0;
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == a) {
                            amem[m++] = i;
                            p->group[i] = b;
                        }
                    if ((v = score(x, p, &tv, err)) < 0) { rc = HS_ENOMEM; goto out; }
                    if (v > bv * (1 + 1e-9)) { bv = v; found = 1; place_copy(&best, p); if (x->o.first) goto apply; }
                    for (int i = 0; i < m; i++) p->group[amem[i]] = a;
                }
                for (int i = 0; i < na; i++) {
                    double v;
                    int g = ra[i];
                    /* move g: a -> b */
                    p->group[g] = b;
                    if ((v = score(x, p, &tv, err)) < 0) { rc = HS_ENOMEM; goto out; }
                    if (v > bv * (1 + 1e-9)) { bv = v; found = 1; place_copy(&best, p); if (x->o.first) goto apply; }
                    /* swap g with one of b's other classes */
                    for (int j = 0; j < nb; j++) {
                        int h = rb[j];
                        if (same_class(x->c, g, h)) continue;
                        p->group[h] = a;
                        if ((v = score(x, p, &tv, err)) < 0) { rc = HS_ENOMEM; goto out; }
                        if (v > bv * (1 + 1e-9)) { bv = v; found = 1; place_copy(&best, p); if (x->o.first) goto apply; }
                        p->group[h] = b;
                    }
                    p->group[g] = a;
                }
            }
        }
    apply:
        if (!found) break;
        place_copy(p, &best);
        if ((cur = score(x, p, &ev, err)) < 0) { rc = HS_ENOMEM; goto out; }
        if (x->o.time_limit > 0 && elapsed(x) > x->o.time_limit) break;
    }
out:
    hs_hg2_eval_free(&ev);
    hs_hg2_eval_free(&tv);
    hs_hg2_place_free(&best);
    free(recv); free(size); free(ra); free(rb); free(amem); free(isd);
    return rc;
}

static int nonempty_group(hs_hg2_ctx *x, const hs_hg2_place *p)
{
    return p->group[rndn(x, p->n_gpus)];
}

static int empty_slot(const hs_hg2_place *p)
{
    for (int k = 0; k < p->K; k++) {
        int used = 0;
        for (int i = 0; i < p->n_gpus && !used; i++) used = p->group[i] == k;
        if (!used) return k;
    }
    return -1;
}

/* One random mutation (move, swap, flip, merge, split). */
static void mutate(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, int allow_merge)
{
    int n = p->n_gpus, op = rndn(x, allow_merge ? 10 : 7), g = rndn(x, n), h = rndn(x, n);
    if (op < 3) { /* move g into h's group */
        if (p->group[h] >= 0) p->group[g] = p->group[h];
    } else if (op < 6) { /* swap */
        int t = p->group[g];
        p->group[g] = p->group[h];
        p->group[h] = t;
    } else if (op < 7) {
        int k = nonempty_group(x, p);
        if (!colocated && k >= 0) p->role[k] ^= 1;
    } else if (op < 8) { /* merge h's group into g's */
        int a = p->group[g], b = p->group[h];
        if (a >= 0 && b >= 0 && a != b)
            for (int i = 0; i < n; i++)
                if (p->group[i] == b) p->group[i] = a;
    } else { /* split half of g's group off */
        int a = p->group[g], e = empty_slot(p), c = 0;
        if (a < 0 || e < 0) return;
        p->role[e] = colocated ? HS_HG2_COLOC : (rnd(x) & 1);
        for (int i = 0; i < n; i++)
            if (p->group[i] == a && (c++ & 1)) p->group[i] = e;
    }
}

static int stop_now(const hs_hg2_ctx *x, long it, long limit)
{
    if (x->o.time_limit > 0 && elapsed(x) > x->o.time_limit) return 1;
    return it >= limit;
}

static int random_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    hs_hg2_eval ev = {0};
    hs_hg2_place t;
    long limit = x->o.max_iters ? x->o.max_iters : 20L * p->n_gpus;
    double cur;
    int rc = 0;
    if (place_alloc(&t, p->n_gpus)) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((cur = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
    for (long it = 0; !rc && !stop_now(x, it, limit); it++) {
        double v;
        place_copy(&t, p);
        mutate(x, &t, colocated, 0);
        x->st.steps++;
        if ((v = score(x, &t, &ev, err)) < 0) rc = HS_ENOMEM;
        else if (v > cur * (1 + 1e-9)) {
            cur = v;
            place_copy(p, &t);
        }
    }
    hs_hg2_eval_free(&ev);
    hs_hg2_place_free(&t);
    return rc;
}

static int ga_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int P = x->o.pop, n = p->n_gpus, rc = 0;
    long gens = x->o.max_iters ? x->o.max_iters : 60;
    hs_hg2_place *pop = calloc((size_t)P * 2, sizeof *pop);
    double *fit = calloc((size_t)P * 2, sizeof *fit);
    int *order = malloc((size_t)P * 2 * sizeof *order);
    hs_hg2_eval ev = {0};
    if (!pop || !fit || !order) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2 * P; i++)
        if (place_alloc(&pop[i], n)) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
    for (int i = 0; i < P && !rc; i++) {
        place_copy(&pop[i], p);
        for (int k = 0; k < (i ? 1 + i % 5 : 0); k++) mutate(x, &pop[i], colocated, 1);
        if ((fit[i] = score(x, &pop[i], &ev, err)) < 0) rc = HS_ENOMEM;
    }
    for (long gen = 0; !rc && !stop_now(x, gen, gens); gen++) {
        x->st.steps++;
        for (int c = P; c < 2 * P && !rc; c++) {
            int pa = rndn(x, P), pb = rndn(x, P), q;
            /* tournament of 2 for each parent */
            q = rndn(x, P); if (fit[q] > fit[pa]) pa = q;
            q = rndn(x, P); if (fit[q] > fit[pb]) pb = q;
            place_copy(&pop[c], &pop[pa]);
            if (rnd(x) & 1) {
                /* group-preserving crossover: one of b's groups, whole */
                int gb = pop[pb].group[rndn(x, n)], e = empty_slot(&pop[c]);
                if (gb >= 0 && e >= 0) {
                    pop[c].role[e] = pop[pb].role[gb];
                    for (int i = 0; i < n; i++)
                        if (pop[pb].group[i] == gb) pop[c].group[i] = e;
                }
            }
            for (int k = 0, nm = 1 + rndn(x, 2); k < nm; k++) mutate(x, &pop[c], colocated, 1);
            if ((fit[c] = score(x, &pop[c], &ev, err)) < 0) rc = HS_ENOMEM;
        }
        /* survivors: the best P of parents and children (stable by index) */
        for (int i = 0; i < 2 * P; i++) order[i] = i;
        for (int i = 1; i < 2 * P; i++) {
            int v = order[i], j = i;
            while (j > 0 && fit[order[j - 1]] < fit[v]) { order[j] = order[j - 1]; j--; }
            order[j] = v;
        }
        {
            hs_hg2_place tmp[1024];
            double tf[1024];
            int m = 2 * P < 1024 ? 2 * P : 1024;
            for (int i = 0; i < m; i++) { tmp[i] = pop[order[i]]; tf[i] = fit[order[i]]; }
            for (int i = 0; i < m; i++) { pop[i] = tmp[i]; fit[i] = tf[i]; }
        }
    }
    if (!rc) place_copy(p, &pop[0]);
out:
    if (pop)
        for (int i = 0; i < 2 * P; i++) hs_hg2_place_free(&pop[i]);
    free(pop);
    free(fit);
    free(order);
    hs_hg2_eval_free(&ev);
    return rc;
}

int hs_hg2_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int rc;
    x->t0 = now_s();
    memset(&x->st, 0, sizeof x->st);
    if ((rc = initial(x, p, colocated, 0, err))) return rc;
    switch (x->o.search) {
    case HS_HG2_GUIDED: {
        /* Local search from one partition stops at the first local optimum,
         * and single-GPU moves cannot regroup replicas wholesale, so the
         * guided search restarts from partitions with a few K around the
         * memory estimate (K/2, K-1, K, K+1, 2K) and keeps the best. */
        int K0 = k_from_memory(x), ks[5], nk = 0;
        double bestv = -1;
        hs_hg2_place q = {0};
        hs_hg2_eval ev = {0};
        int cand[5] = {K0, K0 - 1, K0 + 1, K0 / 2, 2 * K0};
        for (int i = 0; i < 5; i++) {
            int k = cand[i], dup = 0;
            if (!colocated && k < 2) k = 2;
            if (k < 1) k = 1;
            if (k > c_ngpus(x)) k = c_ngpus(x);
            for (int j = 0; j < nk; j++) dup |= ks[j] == k;
            if (!dup) ks[nk++] = k;
        }
        hs_hg2_place_free(p);
        for (int i = 0; i < nk && !rc; i++) {
            double v;
            if ((rc = initial(x, &q, colocated, ks[i], err))) break;
            if ((rc = guided(x, &q, colocated, err))) break;
            if ((v = score(x, &q, &ev, err)) < 0) rc = HS_ENOMEM;
            else if (v > bestv * (1 + 1e-9)) {
                bestv = v;
                hs_hg2_place_free(p);
                *p = q;
                memset(&q, 0, sizeof q);
            }
            hs_hg2_place_free(&q);
        }
        hs_hg2_eval_free(&ev);
        break;
    }
    case HS_HG2_RANDOM: rc = random_search(x, p, colocated, err); break;
    case HS_HG2_GA: rc = ga_search(x, p, colocated, err); break;
    default: {
        hs_hg2_eval ev = {0};
        if (score(x, p, &ev, err) < 0) rc = HS_ENOMEM;
        hs_hg2_eval_free(&ev);
    }
    }
    x->st.seconds = elapsed(x);
    if (x->trace) fflush(x->trace);
    if (rc) hs_hg2_place_free(p);
    return rc;
}

/* ---------------------------------------------------------------- output */

int hs_hg2_to_deploy(hs_hg2_ctx *x, const hs_hg2_place *p, const char *planner,
                     hs_deploy *out, hs_err *err)
{
    hs_hg2_eval ev = {0};
    int K = p->K, n = p->n_gpus, rc, *idx = NULL, *mem = NULL, n_dec = 0;
    memset(out, 0, sizeof *out);
    if ((rc = hs_hg2_evaluate(x, p, &ev, err))) return rc;
    if (ev.flow <= 0) {
        rc = hs_errf(err, HS_ENOFIT, "%s: no placement of %s on cluster %s serves any request "
                     "(the model fits no group, or no prefill group reaches a decode group)",
                     planner, x->m->name, x->c->name);
        goto out;
    }
    idx = malloc((size_t)K * sizeof *idx);
    mem = malloc((size_t)n * sizeof *mem);
    if (!idx || !mem) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(out->model, sizeof out->model, "%s", x->m->name);
    snprintf(out->cluster, sizeof out->cluster, "%s", x->c->name);
    snprintf(out->planner, sizeof out->planner, "%s", planner);
    for (int k = 0; k < K; k++) idx[k] = -1;
    /* replicas in group order; decode replicas get indices first so each
     * prefill replica's kv_route can be filled as it is added */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (int k = 0; k < K && !rc; k++) {
            hs_deploy_replica r;
            const hs_hg2_group *g;
            int m = 0;
            if (ev.cap[k] <= 0) continue;
            if ((pass == 0) != (p->role[k] != HS_HG2_PREFILL)) continue;
            for (int i = 0; i < n; i++)
                if (p->group[i] == k) mem[m++] = i;
            g = hs_hg2_eval_group(x, mem, m, p->role[k], p->t_only ? p->t_only[k] : 0,
                                  p->pp_only ? p->pp_only[k] : 0);
            memset(&r, 0, sizeof r);
            snprintf(r.role, sizeof r.role, "%s", p->role[k] == HS_HG2_PREFILL ? "prefill"
                                                  : p->role[k] == HS_HG2_DECODE ? "decode" : "colocated");
            r.weight = ev.gflow[k];
            hs_hg2_group_layout(x, g, &r.layout);
            if (p->role[k] == HS_HG2_PREFILL && n_dec) {
                r.kv_route = calloc((size_t)out->n + 1, sizeof *r.kv_route);
                if (!r.kv_route) {
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
                    break;
                }
                r.n_kv_route = out->n + 1;
                for (int j = 0; j < K; j++)
                    if (idx[j] >= 0) r.kv_route[idx[j]] = ev.pair[(size_t)k * K + j];
            }
            if (p->role[k] == HS_HG2_DECODE) n_dec++;
            idx[k] = out->n;
            if ((rc = hs_deploy_add(out, &r, err))) free(r.kv_route);
        }
    /* kv_route vectors cover every replica */
    for (int32_t i = 0; !rc && i < out->n; i++) {
        hs_deploy_replica *r = &out->r[i];
        if (r->kv_route && r->n_kv_route < out->n) {
            double *nr = realloc(r->kv_route, (size_t)out->n * sizeof *nr);
            if (!nr) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                break;
            }
            for (int32_t j = r->n_kv_route; j < out->n; j++) nr[j] = 0;
            r->kv_route = nr;
            r->n_kv_route = out->n;
        }
    }
out:
    if (rc) hs_deploy_free(out);
    free(idx);
    free(mem);
    hs_hg2_eval_free(&ev);
    return rc;
}

int hs_hg2_plan_search(const hs_plan_req *q, const hs_hg2_opts *o, int colocated, const char *name,
                       hs_deploy *out, hs_err *err)
{
    hs_hg2_ctx *x = NULL;
    hs_hg2_place p = {0};
    int rc;
    if ((rc = hs_hg2_ctx_create(&x, q, o, err))) return rc;
    if (!(rc = hs_hg2_search(x, &p, colocated, err))) rc = hs_hg2_to_deploy(x, &p, name, out, err);
    if (!rc && !o->quiet) {
        hs_hg2_stats st;
        hs_hg2_stats_get(x, &st);
        fprintf(stderr, "%s: %.0f tokens/s estimated, %.3f s, %ld evaluations, %ld group evaluations\n", name,
                st.best_tput, st.seconds, st.evals, st.group_evals);
    }
    hs_hg2_place_free(&p);
    rc = hs_hg2_check_oom(x, rc, out, err);
    hs_hg2_ctx_destroy(x);
    return rc;
}

static int plan(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hs_hg2_opts o;
    int rc;
    if ((rc = hs_hg2_opts_parse(&o, q->opts, err))) return rc;
    if (q->cluster->n_gpus < 2)
        return hs_errf(err, HS_ENOFIT, "hexgen2: cluster %s has %d GPU, disaggregation needs 2",
                       q->cluster->name, q->cluster->n_gpus);
    return hs_hg2_plan_search(q, &o, 0, "hexgen2", out, err);
}

const hs_planner_ops hs_planner_hexgen2 = {
    "hexgen2",
    "HexGen-2: graph partition + max-flow + guided swaps, prefill/decode groups with KV routing (plan_opts)",
    plan,
};
