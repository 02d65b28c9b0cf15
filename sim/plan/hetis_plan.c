/* hetis_plan.c - Hetis's Parallelizer (§4.1, Fig. 4) and the two baselines
 * of its evaluation on the same cluster.
 *
 * "hetis": the hierarchical search.
 *   1. Instances: every GPU type is divided evenly over n instances (n
 *      divides every type's count); an instance that cannot hold the
 *      weights plus one full context per lane is dropped.
 *   2. Pipeline: each GPU type of an instance is one unified stage; layers
 *      go to stages so as to minimise the largest stage cost under perfect
 *      latency scaling, without communication ("it minimizes C_max, the
 *      maximum computation cost across all stages"): in proportion to the
 *      GPUs / the per-layer dense time of R on one GPU of the type, capped
 *      by each stage's memory.
 *   3. Prune: "GPUs are removed one by one, from the lowest- to highest-end
 *      type (in terms of computational power) within each device group, if
 *      the following criterion holds" with epsilon 0.05; "low-end GPUs,
 *      which contribute minimally to reducing the cost of dense
 *      computations, will be excluded".  The criterion's formula is lost
 *      from the text; we read it as (C' - C) / C <= epsilon with C the
 *      instance's cost for R, C' the cost without the GPU, and take for C
 *      the inverse of the estimated serving throughput (est_thr below):
 *      the pipeline's bottleneck stage over its dense modules (HexGen-style
 *      C_comp + C_comm on the latency model), its decode attention spread
 *      over the stage's primary and attention workers as the dispatcher
 *      balances it (Eq. 3, 4), and its decode batch bounded by the pooled KV
 *      cache.  So a GPU stays a primary worker when, as a pipeline stage,
 *      it raises the instance's throughput by more than epsilon over what
 *      it gives as an attention worker.  (Stage time alone, pp x slowest
 *      stage, is a latency: it makes every extra stage look worse and
 *      strips every GPU not needed for memory.)  A type's GPUs are first
 *      tried as a whole (they often help only as a TP group: 3 of 4 P100s
 *      leave an odd TP), then one by one from the last.  The highest-end
 *      type is kept.
 *   4. TP x PP inside each unified stage: every tp dividing the stage's GPU
 *      count and the heads, the rest as pipeline sub-stages; the combination
 *      of least latency C (below) is kept ("to further reduce latency").
 *   5. Roles: kept GPUs are Primary workers; pruned ones become Attention
 *      workers, each given to the instance's stage with the fewest cached
 *      tokens at that point (the pool's bottleneck).
 *   n is chosen to maximise n x the estimated instance throughput.
 *   R, the planned load (--plan-opts prompt=, output=; 1024 and 256): per
 *   lane a bundle of B requests, B = min(max_num_seqs, pooled KV tokens /
 *   pp / (prompt + output / 2)), each prefilled alone then decoded together.
 *   C, the latency cost of step 4 and of the HexGen-style baseline, is the
 *   module latency of the paper's Fig. 13 (stages x slowest stage, plus the
 *   activations sent between stages) for one 2048-token prefill pass plus
 *   32 decode passes of 64 sequences (dense modules only).
 *
 * "hetis-splitwise": Splitwise-style disaggregation: prefill replicas on
 * the highest-end type (smallest TP that fits, as many as fit), decode
 * replicas on the other types, one pipeline stage per type with layers in
 * proportion to memory; when the decode side cannot hold the model,
 * highest-end GPUs move to it one TP group at a time.
 *
 * "hetis-hexgen": HexGen as Hetis's evaluation deploys it (§7.2: "a
 * four-stage pipeline parallelism, assigning homogeneous GPUs (e.g., A100s,
 * 3090s, or P100s) to each stage and applying tensor parallelism within
 * stages"; HexGen "optimizes for end-to-end latency across all GPUs"):
 * every GPU serves; every stage holds one GPU type (a type may span several
 * stages, e.g. one per host); layers in proportion to decode speed (memory
 * bandwidth x GPUs: asymmetric division balancing computation time); n
 * instances and TP x PP per type chosen for the least latency C.  On
 * hetis-mixed12 with Llama-2-70B this is the paper's one four-stage
 * pipeline: A100 TP4, 3090 TP2, 3090 TP2, P100 TP4.  (A simple stand-in
 * for HexGen's genetic search, named for what it is.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"
#include "plan/plan.h"
#include "core/progress.h"
#include "policy/hetis/hetis.h"

#define HP_MAX_GRP 16

typedef struct hp_grp {
    int type;               /* cluster type index */
    int n;                  /* GPUs */
    int gpus[HS_MAX_TP];
} hp_grp;

static double layer_bytes(const hs_plan_req *q)
{
    return hs_model_layer_params(q->model) * q->bits / 8.0;
}

/* Types ordered from the highest-end (FP16 FLOP/s, then memory) down. */
static void type_order(const hs_cluster *c, int *ord)
{
    for (int i = 0; i < c->n_types; i++) ord[i] = i;
    for (int i = 1; i < c->n_types; i++)
        for (int j = i; j > 0; j--) {
            const hs_gpu *a = &c->types[ord[j - 1]], *b = &c->types[ord[j]];
            if (b->flops16 > a->flops16 || (b->flops16 == a->flops16 && b->mem_bytes > a->mem_bytes)) {
                int t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            } else
                break;
        }
}

static int count_type(const hs_cluster *c, int t)
{
    int n = 0;
    for (int g = 0; g < c->n_gpus; g++) n += c->gpu_type[g] == t;
    return n;
}

/* GPUs of type t, in id order, taking the k-th slice of n slices. */
static int slice_type(const hs_cluster *c, int t, int k, int n, int *out)
{
    int cnt = count_type(c, t), per = cnt / n, i = 0, m = 0;
    for (int g = 0; g < c->n_gpus; g++)
        if (c->gpu_type[g] == t) {
            if (i >= k * per && i < (k + 1) * per) {
                if (m == HS_MAX_TP) return -1;   /* a slice holds at most one TP group */
                out[m++] = g;
            }
            i++;
        }
    return m;
}

/* Dense cost C of a layout, ns (see the file comment). */
static int layout_cost(const hs_plan_req *q, const hs_layout *l, double *cost, hs_err *err)
{
    hs_perf_cfg pc;
    hs_perf p;
    hs_batch_shape pre, dec;
    double c = 0;
    int rc;
    hs_perf_cfg_defaults(&pc);
    memset(&p, 0, sizeof p);
    if ((rc = hs_perf_build(&p, &pc, q->model, q->cluster, l, 2048, 64, err))) return rc;
    memset(&pre, 0, sizeof pre);
    pre.tokens = 2048;
    pre.samples = 2;
    pre.pre_chunks = 2;
    pre.pre_self = 2.0 * 1024 * 1025 / 2;
    pre.pre_tokens = 2048;
    memset(&dec, 0, sizeof dec);
    dec.tokens = 64;
    dec.samples = 64;
    for (int pass = 0; pass < 2; pass++) {
        const hs_batch_shape *b = pass ? &dec : &pre;
        double mx = 0, send = 0;
        for (int s = 0; s < l->pp; s++) {
            double t = hs_perf_stage_ns(&p, s, b);
            if (t > mx) mx = t;
            if (s + 1 < l->pp) send += hs_perf_send_ns(&p, s, b->tokens);
        }
        c += (pass ? 32.0 : 1.0) * (l->pp * mx + send);
    }
    hs_perf_free(&p);
    *cost = c;
    return 0;
}

/* 1 when every stage holds its weights and each lane one full context. */
static int layout_fits(const hs_plan_req *q, const hs_layout *l)
{
    hs_err e = {0};
    int64_t b = hs_layout_kv_blocks(q->model, q->cluster, l, q->engine, q->max_tokens, &e);
    return b >= 0 && b / l->pp * q->engine->block_size >= q->max_model_len;
}

/* Layers per group in proportion to w[], each within what its memory can
 * hold (90% of usable memory for weights) and >= its sub-stage need.
 * Returns 0 when impossible. */
static int split_layers(const hs_plan_req *q, const hp_grp *g, int ng, const double *w, int *layers)
{
    int L = q->model->layers, left = L, mx[HP_MAX_GRP];
    double wsum = 0;
    for (int i = 0; i < ng; i++) {
        const hs_gpu *gp = &q->cluster->types[g[i].type];
        double usable = gp->mem_bytes * q->engine->gpu_mem_util * 0.9 * g[i].n;
        mx[i] = (int)floor(usable / layer_bytes(q));
        if (mx[i] < 1) return 0;
        wsum += w[i];
        layers[i] = 0;
    }
    /* largest remainder in proportion, then clamp and spill */
    for (int i = 0; i < ng; i++) {
        layers[i] = (int)floor(L * w[i] / wsum);
        if (layers[i] < 1) layers[i] = 1;
        if (layers[i] > mx[i]) layers[i] = mx[i];
        left -= layers[i];
    }
    while (left != 0) {
        int best = -1;
        double bv = 0;
        for (int i = 0; i < ng; i++) {
            double want = L * w[i] / wsum - layers[i];
            if (left > 0 && layers[i] < mx[i] && (best < 0 || want > bv)) best = i, bv = want;
            if (left < 0 && layers[i] > 1 && (best < 0 || want < bv)) best = i, bv = want;
        }
        if (best < 0) return 0;
        layers[best] += left > 0 ? 1 : -1;
        left += left > 0 ? -1 : 1;
    }
    return 1;
}

/* 1 when every TP group of tp consecutive GPUs of g sits in one host: a
 * tensor-parallel all-reduce per layer over the 100 Gb/s LAN is what no
 * deployment (Hetis's, HexGen's four stages, Splitwise's) does. */
static int tp_in_hosts(const hs_cluster *c, const hp_grp *g, int tp)
{
    for (int k = 0; k < g->n; k += tp)
        for (int r = 1; r < tp; r++)
            if (c->gpu_node[g->gpus[k + r]] != c->gpu_node[g->gpus[k]]) return 0;
    return 1;
}

/* Step 4: the cheapest TP x PP inside each group for a given layer split. */
static int best_layout(const hs_plan_req *q, const hp_grp *g, int ng, const int *layers, hs_layout *best,
                       double *best_cost, hs_err *err)
{
    int choice[HP_MAX_GRP] = {0}, opts[HP_MAX_GRP][HS_MAX_TP + 1], nopt[HP_MAX_GRP];
    int found = 0;
    for (int i = 0; i < ng; i++) {
        nopt[i] = 0;
        for (int tp = 1; tp <= g[i].n && tp <= HS_MAX_TP; tp++)
            if (g[i].n % tp == 0 && q->model->heads % tp == 0 && layers[i] >= g[i].n / tp &&
                tp_in_hosts(q->cluster, &g[i], tp))
                opts[i][nopt[i]++] = tp;
        if (!nopt[i]) return HS_ENOFIT;
    }
    for (;;) {
        hs_layout l;
        double c;
        int s = 0;
        memset(&l, 0, sizeof l);
        l.kv_bits = q->engine->kv_bits;
        for (int i = 0; i < ng; i++) {
            int tp = opts[i][choice[i]], pp = g[i].n / tp;
            for (int k = 0; k < pp && s < HS_MAX_PP; k++, s++) {
                l.stage[s].tp = tp;
                l.stage[s].bits = q->bits;
                l.stage[s].layers = layers[i] / pp + (k < layers[i] % pp);
                for (int r = 0; r < tp; r++) l.stage[s].gpus[r] = g[i].gpus[k * tp + r];
            }
        }
        l.pp = s;
        if (layout_fits(q, &l) && !layout_cost(q, &l, &c, err) && (!found || c < *best_cost)) {
            *best = l;
            *best_cost = c;
            found = 1;
        }
        {
            int i = 0;
            while (i < ng && ++choice[i] == nopt[i]) choice[i++] = 0;
            if (i == ng) break;
        }
    }
    return found ? 0 : HS_ENOFIT;
}

/* What a group's share of the layers follows, per GPU of a type: its
 * speed on R (Hetis, per_type[] filled by the caller), memory bandwidth
 * (HexGen-style) or memory (Splitwise-style). */
enum { HP_BY_SPEED, HP_BY_BW, HP_BY_MEM };

/* Steps 2 + 4 for one instance made of groups g, layers split in
 * proportion to the groups' GPUs x the per-type metric `by` (per_type:
 * HP_BY_SPEED's speeds, by cluster type index). */
static int instance_layout(const hs_plan_req *q, const hp_grp *g, int ng, int by, const double *per_type,
                           hs_layout *l, double *cost, hs_err *err)
{
    int layers[HP_MAX_GRP];
    hp_grp gg[HP_MAX_GRP];
    double ww[HP_MAX_GRP];
    int n = 0;
    for (int i = 0; i < ng; i++) {
        const hs_gpu *t = &q->cluster->types[g[i].type];
        if (g[i].n <= 0) continue;
        gg[n] = g[i];
        ww[n++] = g[i].n * (by == HP_BY_SPEED ? per_type[g[i].type] : by == HP_BY_BW ? t->mem_bw : t->mem_bytes);
    }
    if (!n || !split_layers(q, gg, n, ww, layers)) return HS_ENOFIT;
    return best_layout(q, gg, n, layers, l, cost, err);
}

static void init_out(const hs_plan_req *q, hs_deploy *out, const char *name)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", q->model->name);
    snprintf(out->cluster, sizeof out->cluster, "%s", q->cluster->name);
    snprintf(out->planner, sizeof out->planner, "%s", name);
}

static int add_replica(hs_deploy *out, const hs_layout *l, const char *role, hs_err *err)
{
    hs_deploy_replica r;
    memset(&r, 0, sizeof r);
    snprintf(r.role, sizeof r.role, "%s", role);
    r.weight = 1;
    r.layout = *l;
    return hs_deploy_add(out, &r, err);
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Groups of instance k of n: one per type, highest-end first. */
static int instance_groups(const hs_cluster *c, const int *ord, int k, int n, hp_grp *g)
{
    int ng = 0;
    for (int i = 0; i < c->n_types; i++) {
        g[ng].type = ord[i];
        g[ng].n = slice_type(c, ord[i], k, n, g[ng].gpus);
        if (g[ng].n < 0) return -1;   /* more GPUs of a type than one TP group: more instances */
        if (g[ng].n > 0) ng++;
    }
    return ng;
}

static int types_gcd(const hs_cluster *c)
{
    int d = 0;
    for (int t = 0; t < c->n_types; t++) d = gcd(d, count_type(c, t));
    return d;
}

/* ---- hetis ---- */

/* Per-type groups live in arrays of HP_MAX_GRP. */
static int check_types(const hs_cluster *c, hs_err *err)
{
    if (c->n_types > HP_MAX_GRP)
        return hs_errf(err, HS_ERANGE, "cluster %s: %d GPU types (the hetis planners take at most %d)", c->name,
                       c->n_types, HP_MAX_GRP);
    return 0;
}

/* The planner's options (--plan-opts). */
typedef struct hp_opts {
    double eps;
    int prompt, output;
} hp_opts;

static const hs_field hp_fields[] = {
    HS_FIELD_NUM(hp_opts, eps, HS_F_DOUBLE, 0, 0.05, 0, 1e9,
                 "step 3: a GPU leaves the dense path when keeping it raises estimated throughput by <= eps"),
    HS_FIELD_NUM(hp_opts, prompt, HS_F_INT, 0, 1024, 1, 32768, "prompt tokens of the planned load R"),
    HS_FIELD_NUM(hp_opts, output, HS_F_INT, 0, 256, 1, 32768, "output tokens of the planned load R"),
    {0},
};

/* What the throughput estimate needs, built once per plan. */
typedef struct hp_est {
    const hs_plan_req *q;
    hp_opts o;
    hs_perf_cfg pc;
    int max_seqs;               /* decode batch cap per lane */
    hs_perf one[HP_MAX_GRP];    /* per type: one layer, TP 1, on its first GPU */
    double speed[HP_MAX_GRP];   /* per type: 1 / (dense ns of one layer for a bundle of R) */
} hp_est;

static void est_free(hp_est *x)
{
    for (int t = 0; t < HP_MAX_GRP; t++) hs_perf_free(&x->one[t]);
}

static void shape_decode(hs_batch_shape *b, int seqs)
{
    memset(b, 0, sizeof *b);
    b->tokens = b->samples = seqs; /* dense modules and LM head; attention apart */
}

static void shape_prefill(hs_batch_shape *b, int tokens)
{
    memset(b, 0, sizeof *b);
    b->tokens = tokens;
    b->samples = 1;
    b->pre_chunks = 1;
    b->pre_self = (double)tokens * (tokens + 1) / 2;
    b->pre_tokens = tokens;
}

static int est_init(hp_est *x, const hs_plan_req *q, const char *opts, const hs_planner_ops *ops, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int rc;
    memset(x, 0, sizeof *x);
    x->q = q;
    if ((rc = hs_planner_opts(ops, opts, &x->o, err))) return rc;
    if (q->perf) x->pc = *q->perf;
    else hs_perf_cfg_defaults(&x->pc);
    x->max_seqs = q->engine->max_num_seqs;
    for (int t = 0; t < c->n_types; t++) {
        hs_layout l;
        hs_batch_shape b;
        int g = 0, B0 = x->max_seqs;
        while (c->gpu_type[g] != t) g++;
        memset(&l, 0, sizeof l);
        l.pp = 1;
        l.kv_bits = q->engine->kv_bits;
        l.stage[0].tp = 1;
        l.stage[0].layers = 1;
        l.stage[0].bits = q->bits;
        l.stage[0].gpus[0] = g;
        if ((rc = hs_perf_build(&x->one[t], &x->pc, q->model, c, &l, x->o.prompt > B0 ? x->o.prompt : B0,
                                x->max_seqs, err))) {
            est_free(x);
            return rc;
        }
        /* Step 2's per-layer cost: B0 prompts prefilled, then their output
         * decoded together (dense modules and prefill attention: the work
         * only primaries do).  B0 = max_num_seqs, the batch a lane reaches
         * when cache allows: at 32 a 3090 looked twice as fast relative to
         * an A100 as at 256 and got layers that made it the bottleneck. */
        shape_prefill(&b, x->o.prompt);
        {
            double ns = B0 * hs_perf_stage_ns(&x->one[t], 0, &b);
            shape_decode(&b, B0);
            b.samples = 0; /* the LM head is not a layer's */
            ns += x->o.output * hs_perf_stage_ns(&x->one[t], 0, &b);
            x->speed[t] = ns > 0 ? 1.0 / ns : 0;
        }
    }
    return 0;
}

/* Cached tokens each stage's primaries hold (tok[s]); 0 when a stage's
 * weights do not fit. */
static int stage_tokens(const hs_plan_req *q, const hs_layout *l, double *tok)
{
    for (int s = 0; s < l->pp; s++) {
        const hs_stage_layout *sl = &l->stage[s];
        hs_stage_mem mem;
        double avail = INFINITY;
        hs_model_stage_mem(q->model, sl->layers, s == 0, s == l->pp - 1, sl->tp, sl->bits, l->kv_bits,
                           q->max_tokens, q->engine->max_num_seqs, &mem);
        for (int k = 0; k < sl->tp; k++) {
            double a = hs_cluster_gpu(q->cluster, sl->gpus[k])->mem_bytes * q->engine->gpu_mem_util - mem.weights -
                       mem.activation;
            if (a < avail) avail = a;
        }
        if (avail <= 0) return 0;
        tok[s] = avail / (hs_model_kv_bytes_token_layer(q->model, sl->tp, l->kv_bits) * sl->layers);
    }
    return 1;
}

/* Tokens an attention worker caches for a stage of `layers` layers (as
 * the runtime sizes it, policy/hetis/hetis.c). */
static double worker_tokens(const hs_plan_req *q, int gpu, int layers, int kv_bits)
{
    return hs_cluster_gpu(q->cluster, gpu)->mem_bytes * q->engine->gpu_mem_util * HS_HETIS_WORKER_KV_FRAC /
           (hs_model_kv_bytes_token_layer(q->model, 1, kv_bits) * layers);
}

/* Step 5: each worker joins the stage with the fewest cached tokens at that
 * point (the pool's bottleneck); stage[j] receives its choice, tok[] the
 * stages' pooled tokens. */
static void assign_workers(const hs_plan_req *q, const hs_layout *l, const int *wk, int nw, int *stage, double *tok)
{
    for (int j = 0; j < nw; j++) {
        int bs = 0;
        for (int s = 1; s < l->pp; s++)
            if (tok[s] < tok[bs]) bs = s;
        stage[j] = bs;
        tok[bs] += worker_tokens(q, wk[j], l->stage[bs].layers, l->kv_bits);
    }
}

/* Decode attention of a stage for `groups` KV-head groups at context ctx,
 * ns, balanced min-max over its primary and workers as the dispatcher does
 * (Eq. 3 + 4, continuous): device g takes N_g groups for f_g + k_g N_g;
 * all busy devices end together. */
static double stage_attn_ns(const hp_est *x, const hs_layout *l, const hs_perf *p, int s, const int *wk,
                            const int *wstage, int nw, double groups, double ctx)
{
    const hs_model *m = x->q->model;
    const hs_cluster *c = x->q->cluster;
    double k[HS_MAX_TP * HP_MAX_GRP + 1], f[HS_MAX_TP * HP_MAX_GRP + 1], T = 0;
    int n = 0, on[HS_MAX_TP * HP_MAX_GRP + 1];
    const hs_perf_stage *st = &p->stage[s];
    double xfer = (2.0 * (m->heads / m->kv_heads) + 2.0) * m->head_dim * 2.0; /* q, k, v, out per group, layer */
    int L = l->stage[s].layers;
    k[n] = (st->dec_seq + st->dec_ctx * ctx) / m->kv_heads;
    f[n++] = st->dec_fixed;
    for (int j = 0; j < nw; j++) {
        const hs_perf_stage *w = &x->one[c->gpu_type[wk[j]]].stage[0];
        double bw = hs_cluster_bw(c, l->stage[s].gpus[0], wk[j]), lat = hs_cluster_lat(c, l->stage[s].gpus[0], wk[j]);
        if (wstage[j] != s) continue;
        k[n] = L * ((w->dec_seq + w->dec_ctx * ctx) / m->kv_heads + xfer / bw * 1e9);
        f[n++] = L * (w->dec_fixed + 2.0 * lat * 1e9);
    }
    for (int g = 0; g < n; g++) on[g] = 1;
    /* drop the devices whose fixed cost exceeds the common finish time */
    for (int changed = 1; changed;) {
        double sk = 0, sf = 0;
        changed = 0;
        for (int g = 0; g < n; g++)
            if (on[g]) sk += 1 / k[g], sf += f[g] / k[g];
        T = (groups + sf) / sk;
        for (int g = 1; g < n; g++)
            if (on[g] && f[g] >= T) on[g] = 0, changed = 1;
    }
    return T;
}

/* Estimated serving throughput of one instance (primary layout l, attention
 * workers wk), requests/s, for R: per lane a bundle of B requests, each
 * prefilled alone (one pass of `prompt` tokens) then decoded together for
 * `output` steps at the mean context prompt + output / 2; B is the lane's
 * share of the pooled cache over that context, at most max_num_seqs.  The
 * pp lanes share the stages, so a bundle cycles in max(its path through
 * all stages and sends, pp x the busiest stage's work).  0 when no request
 * fits. */
static int est_thr(const hp_est *x, const hs_layout *l, const int *wk, int nw, double *thr, hs_err *err)
{
    const hs_plan_req *q = x->q;
    int P = x->o.prompt, O = x->o.output, pp = l->pp, wstage[HS_MAX_TP * HP_MAX_GRP], B;
    double tok[HS_MAX_PP], K = INFINITY, ctx = P + O / 2.0, work[HS_MAX_PP], sum = 0, mx = 0;
    hs_perf p;
    hs_batch_shape pre, dec;
    int rc;
    *thr = 0;
    if (!stage_tokens(q, l, tok)) return 0;
    assign_workers(q, l, wk, nw, wstage, tok);
    for (int s = 0; s < pp; s++)
        if (tok[s] < K) K = tok[s];
    B = (int)fmin(x->max_seqs, floor(K / pp / ctx));
    if (B < 1) return 0;
    memset(&p, 0, sizeof p);
    if ((rc = hs_perf_build(&p, &x->pc, q->model, q->cluster, l, P > B ? P : B, x->max_seqs, err))) return rc;
    shape_prefill(&pre, P);
    shape_decode(&dec, B);
    for (int s = 0; s < pp; s++) {
        double t_dec = hs_perf_stage_ns(&p, s, &dec) +
                       stage_attn_ns(x, l, &p, s, wk, wstage, nw, (double)B * q->model->kv_heads, ctx);
        work[s] = B * hs_perf_stage_ns(&p, s, &pre) + O * t_dec;
        if (s + 1 < pp) sum += B * hs_perf_send_ns(&p, s, P) + O * hs_perf_send_ns(&p, s, B);
    }
    /* host work precedes the first stage of every pass */
    dec.dec_seqs = B;
    work[0] += B * hs_perf_step_ns(&p, &pre) + O * hs_perf_step_ns(&p, &dec);
    for (int s = 0; s < pp; s++) sum += work[s], mx = fmax(mx, work[s]);
    *thr = pp * B / (fmax(sum, pp * mx) * 1e-9);
    hs_perf_free(&p);
    return 0;
}

/* Instance 0 of n for the search: groups, their layout, its throughput
 * with the workers pruned so far. */
typedef struct hp_inst {
    hp_grp g[HP_MAX_GRP];
    int ng;
    int wk[HS_MAX_TP * HP_MAX_GRP], nw;
    double thr;
} hp_inst;

/* Drops the last k GPUs of group i into the workers; evaluates.  Returns
 * 0 with thr = 0 when the rest cannot hold the model. */
static int try_prune(const hp_est *x, const hp_inst *in, int i, int k, hp_inst *out, hs_err *err)
{
    hs_layout l;
    double cost;
    int rc;
    *out = *in;
    for (int j = in->g[i].n - k; j < in->g[i].n; j++) out->wk[out->nw++] = in->g[i].gpus[j];
    out->g[i].n -= k;
    out->thr = 0;
    rc = instance_layout(x->q, out->g, out->ng, HP_BY_SPEED, x->speed, &l, &cost, err);
    if (rc == HS_ENOFIT) return 0;
    if (rc) return rc;
    return est_thr(x, &l, out->wk, out->nw, &out->thr, err);
}

/* Step 3 on instance `in` (all GPUs primary on entry): the criterion
 * (C' - C) / C <= eps with C = 1 / throughput, i.e. a GPU leaves when the
 * instance without it (the GPU then an attention worker) keeps
 * throughput >= thr / (1 + eps). */
static int prune(const hp_est *x, hp_inst *in, hs_err *err)
{
    int rc;
    for (int i = in->ng - 1; i >= 1; i--) {
        hp_inst t;
        if ((rc = try_prune(x, in, i, in->g[i].n, &t, err))) return rc;
        if (t.thr > 0 && in->thr <= t.thr * (1 + x->o.eps)) {
            *in = t;
            continue;
        }
        while (in->g[i].n > 1) {
            if ((rc = try_prune(x, in, i, 1, &t, err))) return rc;
            if (!(t.thr > 0 && in->thr <= t.thr * (1 + x->o.eps))) break;
            *in = t;
        }
    }
    return 0;
}

static int plan_hetis_x(const hs_plan_req *q, hp_est *x, hs_progress *pg, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], best_n = 0, dmax = types_gcd(c), rc;
    double best_score = 0;
    hp_inst best;
    type_order(c, ord);
    for (int n = 1; n <= dmax; n++) {
        hp_inst in;
        hs_layout l;
        double cost;
        if (dmax % n) continue;
        if (hs_progress_due(pg)) hs_progress_printf(pg, "%d instances of at most %d, best score %.4g", n, dmax, best_score);
        memset(&in, 0, sizeof in);
        in.ng = instance_groups(c, ord, 0, n, in.g);
        if (in.ng < 0) continue;
        rc = instance_layout(q, in.g, in.ng, HP_BY_SPEED, x->speed, &l, &cost, err); /* step 1 filter */
        if (rc == HS_ENOFIT) continue;
        if (rc || (rc = est_thr(x, &l, NULL, 0, &in.thr, err)) || (rc = prune(x, &in, err))) return rc;
        if (in.thr > 0 && (!best_n || n * in.thr > best_score)) {
            best_score = n * in.thr;
            best_n = n;
            best = in;
        }
    }
    if (!best_n)
        return hs_errf(err, HS_ENOFIT, "hetis: %s fits no instance split of cluster %s (weights plus one %d-token context)",
                       q->model->name, c->name, q->max_model_len);
    init_out(q, out, "hetis");
    /* Every instance repeats instance 0's shape on its own slice. */
    for (int k = 0; k < best_n; k++) {
        hp_grp g[HP_MAX_GRP];
        double cost, tok[HS_MAX_PP];
        hs_layout l;
        int ng = instance_groups(c, ord, k, best_n, g), np = 0, wstage[HS_MAX_TP * HP_MAX_GRP];
        int workers[HS_MAX_TP * HP_MAX_GRP];
        for (int i = 0; i < ng && i < best.ng; i++) {
            int keep = best.g[i].n;
            for (int j = keep; j < g[i].n; j++) workers[np++] = g[i].gpus[j];
            g[i].n = keep;
        }
        if ((rc = instance_layout(q, g, ng, HP_BY_SPEED, x->speed, &l, &cost, err)) || !stage_tokens(q, &l, tok)) {
            hs_deploy_free(out);
            return hs_errf(err, rc ? rc : HS_ENOFIT, "hetis: instance %d of %d does not fit", k, best_n);
        }
        if ((rc = add_replica(out, &l, "colocated", err))) {
            hs_deploy_free(out);
            return rc;
        }
        /* step 5 */
        assign_workers(q, &l, workers, np, wstage, tok);
        for (int j = 0; j < np; j++) {
            hs_deploy_attn a;
            a.replica = out->n - 1;
            a.stage = wstage[j];
            a.gpu = workers[j];
            if ((rc = hs_deploy_add_attn(out, &a, err))) {
                hs_deploy_free(out);
                return rc;
            }
        }
    }
    return 0;
}

extern const hs_planner_ops hs_planner_hetis;

static int plan_hetis(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hp_est x;
    hs_progress pg;
    int rc;
    if ((rc = check_types(q->cluster, err)) || (rc = est_init(&x, q, q->opts, &hs_planner_hetis, err))) return rc;
    hs_progress_start(&pg, "hetis search", 1, 0);
    rc = plan_hetis_x(q, &x, &pg, out, err);
    hs_progress_end(&pg);
    est_free(&x);
    return rc;
}

/* ---- HexGen-style ---- */

static int plan_hexgen(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], dmax = types_gcd(c), best_n = 0, rc;
    double best_cost = 0;
    hs_progress pg;
    if ((rc = check_types(c, err))) return rc;
    type_order(c, ord);
    hs_progress_start(&pg, "hetis-hexgen search", 1, 0);
    /* HexGen minimises end-to-end latency over all GPUs: the n of least C */
    for (int n = 1; n <= dmax; n++) {
        hp_grp g[HP_MAX_GRP];
        double cost;
        hs_layout l;
        int ng;
        if (dmax % n) continue;
        if (hs_progress_due(&pg)) hs_progress_printf(&pg, "%d instances of at most %d, best cost %.4g", n, dmax, best_cost);
        ng = instance_groups(c, ord, 0, n, g);
        if (ng < 0) continue;
        if (instance_layout(q, g, ng, HP_BY_BW, NULL, &l, &cost, err)) continue;
        if (!best_n || cost < best_cost) best_cost = cost, best_n = n;
    }
    hs_progress_end(&pg);
    if (!best_n)
        return hs_errf(err, HS_ENOFIT, "hetis-hexgen: %s fits no instance split of cluster %s", q->model->name,
                       c->name);
    init_out(q, out, "hetis-hexgen");
    for (int k = 0; k < best_n; k++) {
        hp_grp g[HP_MAX_GRP];
        double cost;
        hs_layout l;
        int ng = instance_groups(c, ord, k, best_n, g);
        if ((rc = instance_layout(q, g, ng, HP_BY_BW, NULL, &l, &cost, err)) ||
            (rc = add_replica(out, &l, "colocated", err))) {
            hs_deploy_free(out);
            return rc == HS_ENOFIT ? hs_errf(err, rc, "hetis-hexgen: instance %d does not fit", k) : rc;
        }
    }
    return 0;
}

/* ---- Splitwise-style ---- */

static int plan_splitwise(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], top, n_top, tp_p = 0, rc;
    int top_gpus[HS_MAX_TP * 8];
    if ((rc = check_types(c, err))) return rc;
    if (c->n_types < 2) return hs_errf(err, HS_EINVAL, "hetis-splitwise: cluster %s has one GPU type", c->name);
    type_order(c, ord);
    top = ord[0];
    n_top = 0;
    for (int g = 0; g < c->n_gpus && n_top < (int)(sizeof top_gpus / sizeof *top_gpus); g++)
        if (c->gpu_type[g] == top) top_gpus[n_top++] = g;
    for (int tp = 1; tp <= n_top && tp <= HS_MAX_TP; tp++) {
        hs_layout l;
        if (n_top % tp || q->model->heads % tp) continue;
        memset(&l, 0, sizeof l);
        l.pp = 1;
        l.kv_bits = q->engine->kv_bits;
        l.stage[0].tp = tp;
        l.stage[0].layers = q->model->layers;
        l.stage[0].bits = q->bits;
        for (int r = 0; r < tp; r++) l.stage[0].gpus[r] = top_gpus[r];
        if (layout_fits(q, &l)) {
            tp_p = tp;
            break;
        }
    }
    if (!tp_p)
        return hs_errf(err, HS_ENOFIT, "hetis-splitwise: %s fits no TP group of the %s GPUs", q->model->name,
                       c->types[top].name);
    /* borrow = highest-end GPUs given to the decode side */
    for (int borrow = 0; borrow + tp_p <= n_top; borrow += tp_p) {
        int rest[64], nr = 0, dmax = 0;
        for (int i = 1; i < c->n_types; i++) rest[nr++] = ord[i];
        for (int i = 0; i < nr; i++) dmax = gcd(dmax, count_type(c, rest[i]));
        if (borrow) dmax = gcd(dmax, borrow);
        for (int n = dmax; n >= 1; n--) {
            hp_grp g[HP_MAX_GRP];
            double cost;
            hs_layout dl[16];
            int ok = 1, ng;
            if (dmax % n || n > 16) continue;
            for (int k = 0; k < n && ok; k++) {
                ng = 0;
                if (borrow && borrow / n > HS_MAX_TP) {
                    ok = 0;
                    break;
                }
                if (borrow) {
                    g[ng].type = top;
                    g[ng].n = borrow / n;
                    for (int r = 0; r < g[ng].n; r++) g[ng].gpus[r] = top_gpus[n_top - borrow + k * (borrow / n) + r];
                    ng++;
                }
                for (int i = 0; i < nr && ok; i++) {
                    g[ng].type = rest[i];
                    g[ng].n = slice_type(c, rest[i], k, n, g[ng].gpus);
                    if (g[ng].n < 0) ok = 0;
                    ng++;
                }
                if (!ok) break;
                ok = !instance_layout(q, g, ng, HP_BY_MEM, NULL, &dl[k], &cost, err);
            }
            if (!ok) continue;
            init_out(q, out, "hetis-splitwise");
            for (int p = 0; p + tp_p <= n_top - borrow; p += tp_p) {
                hs_layout l;
                memset(&l, 0, sizeof l);
                l.pp = 1;
                l.kv_bits = q->engine->kv_bits;
                l.stage[0].tp = tp_p;
                l.stage[0].layers = q->model->layers;
                l.stage[0].bits = q->bits;
                for (int r = 0; r < tp_p; r++) l.stage[0].gpus[r] = top_gpus[p + r];
                if ((rc = add_replica(out, &l, "prefill", err))) goto fail;
            }
            for (int k = 0; k < n; k++)
                if ((rc = add_replica(out, &dl[k], "decode", err))) goto fail;
            if (out->n == n) { /* nothing left to prefill */
                hs_deploy_free(out);
                break;
            }
            return 0;
        fail:
            hs_deploy_free(out);
            return rc;
        }
    }
    return hs_errf(err, HS_ENOFIT, "hetis-splitwise: %s fits no prefill/decode split of cluster %s", q->model->name,
                   c->name);
}

const hs_planner_ops hs_planner_hetis = {
    .name = "hetis",
    .help = "Hetis: instances, one stage per GPU type, prune low-end GPUs to attention workers when they add <= eps (0.05) estimated throughput as a stage, TP x PP per stage",
    .plan = plan_hetis,
    .opts = hp_fields,
};

const hs_planner_ops hs_planner_hetis_splitwise = {
    .name = "hetis-splitwise",
    .help = "Splitwise-style baseline of Hetis: prefill on the top GPU type, decode pipelines on the others",
    .plan = plan_splitwise,
};

const hs_planner_ops hs_planner_hetis_hexgen = {
    .name = "hetis-hexgen",
    .help = "HexGen baseline as Hetis deploys it: all GPUs, one GPU type per stage, layers by decode speed, TP x PP and instances of least latency",
    .plan = plan_hexgen,
};
