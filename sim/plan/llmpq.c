/* llmpq.c - LLM-PQ's outer search (the paper's Algorithm 1), its
 * baselines, deployment output and the planner registry entries.
 *
 * Search: for each device order and each micro-batch pair, one instance is
 * built and solved.  Orders, as the authors' enumerate_best_result
 * (llm_pq/algo/llm_pq.py in github.com/tonyzhao-jt/LLM-PQ) takes them:
 * permutations of the cluster's groups of identical GPUs (one (type, node)
 * signature each) kept whole; cfg.all_orders takes every distinct
 * permutation of the GPUs' signatures instead, as the paper's text says
 * ("permutating the devices"; identical GPUs are never permuted among
 * themselves).  Micro-batches, as that code: xi = ceil(B/N) (the paper's
 * pruning), eta each divisor of xi.  Each instance is built from the cost
 * models (llm/quant.h, perf/qlat.h); the bitwidth-transfer heuristic runs
 * on every instance (cheap) and gives the incumbent; unless
 * cfg.heuristic, the ILPs then run on the instances
 * in order of their heuristic objective, each with a cut-off at the best
 * objective so far minus cfg.mip_gap (1%), so an ILP only spends time
 * where it can improve by more than the gap (with the heuristic within 1%
 * of the optimum, most prove that quickly).  ILPs stop at cfg.ilp_limit_s
 * (GLPK's wall-clock limit); the search stops at cfg.total_limit_s of CPU
 * time (instances left are counted in n_timeout).
 * Baselines: PipeEdge keeps one bit-width for all layers (the highest that
 * fits, lowered from FP16 as the paper's baselines do), one micro-batch
 * size B/N for both phases and its heterogeneous partition (DP minimising
 * the slowest stage) in the cluster's GPU order, the first GPU holding the
 * embeddings, as the authors' adaptation plans it (its ILP takes the
 * devices in the order given; qpipe/algo/pipeedge_ilp.py in
 * github.com/tonyzhao-jt/LLM-PQ); Uniform splits layers evenly in the
 * cluster's GPU order at the highest bit-width that fits,
 * with xi = ceil(B/N) and as eta the largest divisor of xi that fits (the
 * authors' uniform.py as it runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/omega.h"
#include "perf/qlat.h"
#include "plan/llmpq.h"
#include "core/progress.h"
#include "plan/plan.h"

void hs_pq_cfg_defaults(hs_pq_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->B = 32;
    c->s = 512;
    c->n = 100;
    c->theta = 1;
    c->group = 1;
    c->ilp_limit_s = 2;
    c->total_limit_s = 15;
    c->mip_gap = 0.01;
    c->kv_bits = 16;
    /* LLM-PQ's planner budgets a GPU at 95% of the memory CUDA reports
     * ("to avoid OOM"; the GPU profile's mem_reported_gib, from its
     * get_device_mem_offline table) less 430 MB of CUDA context and 1.5 GB
     * of PyTorch temporary allocations (MB = MiB there): RATIO_AVOID_OOM
     * and CUDA_CONTEXT_MEM in llm_pq/_globals.py and
     * get_single_device_mem_constraints, in github.com/tonyzhao-jt/LLM-PQ;
     * then the temporaries of hs_qmem_temp.  Its PipeEdge is planned with
     * the same budget (qpipe/algo/pipeedge_ilp.py).  Its Uniform check is
     * looser (the mean share of a GPU against the smallest budget, the
     * temporaries on the first GPU only, llm_pq/algo/uniform.py); ours
     * checks each GPU's share, which on the paper's clusters gives the
     * widths its Uniform perplexities imply on C11 too (4 bits, where the
     * looser check fits INT8). */
    c->mem_frac = 0.95;
    c->reserve_bytes = (430.0 + 1500.0) * 1024 * 1024;
    c->bits_mask = (1 << HS_NBITS) - 1;
}

/* Process CPU seconds: limits and reported solver times do not depend on
 * what else runs on the machine (the search is single-threaded, so on an
 * idle machine this equals wall time). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct ctx {
    const hs_model *m;
    const hs_cluster *c;
    const hs_pq_cfg *cfg;
    const hs_perf_cfg *pc;
    hs_qlat_cal *cal;        /* the calibrated FP16 layer; NULL: roofline */
    double *omega;           /* [layers * HS_NBITS] */
    int U, usize[1024], ufirst[1024];
} ctx;

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* Instance for device order `ord` (N GPUs) and (eta, xi). */
static void build_inst(const ctx *x, const int *ord, int N, int eta, int xi, hs_pq_inst *in,
                       double *om_unit)
{
    const hs_model *m = x->m;
    const hs_pq_cfg *cfg = x->cfg;
    int nb = 0;
    memset(in, 0, sizeof *in);
    for (int k = 0; k < HS_NBITS; k++)
        if (cfg->bits_mask & (1 << k)) in->bits[nb++] = hs_bits_set[k];
    in->nb = nb;
    in->N = N;
    in->U = x->U;
    in->usize = (int *)x->usize;
    in->omega = om_unit;
    for (int u = 0; u < x->U; u++)
        for (int k = 0; k < nb; k++) {
            int kk = hs_bits_index(in->bits[k]);
            double w = 0;
            for (int l = x->ufirst[u]; l < x->ufirst[u] + x->usize[u]; l++)
                w += x->omega[l * HS_NBITS + kk];
            om_unit[u * nb + k] = w;
        }
    for (int k = 0; k < nb; k++)
        /* whole MiB per layer, rounded up, as the authors' ILP's M (which
         * rounds per group of layers: with --group > 1 ours may count up
         * to group - 1 MiB more per unit) */
        in->mlay[k] = ceil(hs_qmem_layer_total(m, in->bits[k], cfg->B, cfg->s, cfg->n, cfg->kv_bits) / 1048576.0) *
                      1048576.0;
    for (int j = 0; j < N; j++) {
        const hs_gpu *g = hs_cluster_gpu(x->c, ord[j]);
        in->cap[j] = g->mem_reported_bytes * cfg->mem_frac - cfg->reserve_bytes -
                     hs_qmem_temp(m, cfg->B, eta, cfg->s, cfg->n, j == 0) -
                     (j == 0 ? hs_qmem_embed(m) : 0);
        for (int k = 0; k < nb; k++) {
            in->lpre[j][k] = hs_qlat_prefill_s(m, g, in->bits[k], eta, cfg->s, cfg->kv_bits, x->pc, x->cal);
            in->ldec[j][k] = hs_qlat_decode_s(m, g, in->bits[k], xi, cfg->s + cfg->n / 2.0,
                                              cfg->kv_bits, x->pc, x->cal);
        }
        if (j == 0) {
            in->cpre[j] = hs_qlat_embed_s(m, g, (double)eta * cfg->s, x->pc) +
                          hs_qlat_head_s(m, g, eta, x->pc, x->cal);
            in->cdec[j] = hs_qlat_embed_s(m, g, xi, x->pc) + hs_qlat_head_s(m, g, xi, x->pc, x->cal);
        }
        if (N > 1) {
            int a = ord[j], b = ord[(j + 1) % N];
            double bw = hs_cluster_bw(x->c, a, b) * x->pc->link_eff, lat = hs_cluster_lat(x->c, a, b);
            in->commpre[j] = lat + (double)eta * cfg->s * m->hidden * 2.0 / bw;
            in->commdec[j] = lat + (double)xi * m->hidden * 2.0 / bw;
        }
    }
    in->w_pre = ceil_div(cfg->B, eta);
    in->w_dec = (double)ceil_div(cfg->B, xi) * (cfg->n - 1);
    in->a_pre = in->w_pre - 1;
    in->a_dec = (double)(ceil_div(cfg->B, xi) - 1) * (cfg->n - 1);
    in->rounds = cfg->n - 1;
    in->theta = cfg->theta;
}

/* Distinct orders: permutations of the GPUs' signatures in lexicographic
 * order (next_permutation skips duplicates). */
static int next_perm(int *a, int n)
{
    int i = n - 2, j = n - 1;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    while (a[j] <= a[i]) j--;
    { int t = a[i]; a[i] = a[j]; a[j] = t; }
    for (int l = i + 1, r = n - 1; l < r; l++, r--) { int t = a[l]; a[l] = a[r]; a[r] = t; }
    return 1;
}

/* GPU ids for a signature sequence: the k-th use of a signature takes its
 * k-th GPU. */
static void order_of(const hs_cluster *c, const int *sig, const int *gsig, int N, int *ord)
{
    char used[HS_MAX_PP] = {0};
    for (int j = 0; j < N; j++)
        for (int g = 0; g < c->n_gpus; g++)
            if (!used[g] && gsig[g] == sig[j]) {
                used[g] = 1;
                ord[j] = g;
                break;
            }
}

static void record(const ctx *x, const hs_pq_inst *in, const int *ord, int eta, int xi,
                   const int *dev, const int *bi, double obj, hs_pq_plan *p)
{
    double lat = 0, q = 0;
    hs_pq_eval(in, dev, bi, &lat);
    p->ndev = in->N;
    memcpy(p->dev, ord, sizeof *ord * in->N);
    p->eta = eta;
    p->xi = xi;
    p->obj = obj;
    p->est_s = lat;
    for (int j = 0; j <= in->N; j++) p->first[j] = x->m->layers;
    for (int u = in->U - 1; u >= 0; u--) p->first[dev[u]] = x->ufirst[u];
    p->first[0] = 0;
    for (int u = 0; u < in->U; u++) {
        for (int l = x->ufirst[u]; l < x->ufirst[u] + x->usize[u]; l++) {
            p->bits[l] = (unsigned char)in->bits[bi[u]];
            q += x->omega[l * HS_NBITS + hs_bits_index(in->bits[bi[u]])];
        }
    }
    p->quality = q;
}

/* An instance waiting for the ILP phase. */
typedef struct cand {
    int ord[HS_MAX_PP], eta, xi, seq;
    double heur;             /* heuristic objective, INFINITY when it failed */
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->heur != y->heur) return x->heur < y->heur ? -1 : 1;
    return x->seq - y->seq;   /* total: ties keep enumeration order */
}

int hs_pq_plan_search(const hs_model *m, const hs_cluster *c, const hs_pq_cfg *cfg,
                      const hs_perf_cfg *pc, int kind, hs_pq_plan *out, hs_err *err)
{
    ctx x = {m, c, cfg, pc, NULL, NULL, 0, {0}, {0}};
    int N = c->n_gpus, sig[HS_MAX_PP], gsig[HS_MAX_PP], ord[HS_MAX_PP], rc = 0, found = 0;
    int *dev = NULL, *bi = NULL, group = cfg->group > 0 ? cfg->group : 1;
    double *om_unit = NULL, t0 = now_s(), best = INFINITY;
    cand *cands = NULL;
    int ncand = 0, capcand = 0, stop = 0;
    hs_pq_inst in;
    hs_progress pg;
    memset(out, 0, sizeof *out);
    out->kind = kind;
    hs_progress_start(&pg,
                      kind == HS_PQ_LLMPQ      ? "llmpq search"
                      : kind == HS_PQ_PIPEEDGE ? "pipeedge search"
                                               : "uniform-pp search",
                      1, 0);
    if (N > HS_MAX_PP || m->layers > 1024)
        return hs_errf(err, HS_ERANGE, "llmpq: %d GPUs / %d layers exceed the planner's limits (%d, 1024)",
                       N, m->layers, HS_MAX_PP);
    if (N > m->layers)
        return hs_errf(err, HS_ENOFIT, "llmpq: %d GPUs for %d layers: one stage per GPU needs a layer each",
                       N, m->layers);
    if (cfg->B < 1 || cfg->s < 1 || cfg->n < 1 || !(cfg->bits_mask & ((1 << HS_NBITS) - 1)))
        return hs_errf(err, HS_EINVAL, "llmpq: B, s and n must be >= 1 and some bit-width allowed");
    if (!(cfg->mem_frac > 0 && cfg->mem_frac <= 1) || !(cfg->reserve_bytes >= 0))
        return hs_errf(err, HS_EINVAL, "llmpq: memory fraction %g (0..1] or reserve %g bytes (>= 0) out of range",
                       cfg->mem_frac, cfg->reserve_bytes);
    if ((rc = hs_qlat_cal_build(&x.cal, m, c, pc, hs_qlat_cal_tokens(cfg->B, cfg->s), cfg->B, err)))
        goto out;
    if (x.cal) snprintf(out->latency, sizeof out->latency, "%s", hs_qlat_cal_source(x.cal, NULL));
    if (!(x.omega = malloc(sizeof *x.omega * m->layers * HS_NBITS)) ||
        !(om_unit = malloc(sizeof *om_unit * m->layers * HS_NBITS)) ||
        !(dev = malloc(sizeof *dev * m->layers)) || !(bi = malloc(sizeof *bi * m->layers))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    if (cfg->omega) memcpy(x.omega, cfg->omega, sizeof *x.omega * m->layers * HS_NBITS);
    else hs_omega_default(m, x.omega);
    /* decision units: `group` layers each (the last takes the remainder),
     * but never fewer units than GPUs */
    while (group > 1 && ceil_div(m->layers, group) < N) group--;
    for (int l = 0; l < m->layers; l += group) {
        x.ufirst[x.U] = l;
        x.usize[x.U++] = l + group <= m->layers ? group : m->layers - l;
    }
    for (int g = 0; g < N; g++) gsig[g] = c->gpu_type[g] * 1000 + c->gpu_node[g];
    if (kind == HS_PQ_UNIFORM) {
        /* even split, the cluster's order, uniform bits; the decode
         * micro-batch ceil(B/N) and a prefill micro-batch among its
         * divisors, as the authors' Uniform (llm_pq/algo/uniform.py:
         * get_default_decode_bz, get_factors).  Its loop keeps the last
         * divisor that fits, not the fastest (its best-so-far latency is
         * never updated), so the paper's Uniform ran the largest prefill
         * micro-batch that fits: on a homogeneous cluster PipeEdge's plan,
         * as Table 5 shows on C9 (same latency). */
        int xi = ceil_div(cfg->B, N);
        for (int j = 0; j < N; j++) ord[j] = j;
        for (int k0 = 0; k0 < HS_NBITS && !found; k0++) {
            if (!(cfg->bits_mask & (1 << k0))) continue;
            for (int eta = 1; eta <= xi; eta++) {
                int b0 = -1;
                double o;
                if (xi % eta) continue;
                build_inst(&x, ord, N, eta, xi, &in, om_unit);
                for (int k = 0; k < in.nb; k++)
                    if (in.bits[k] == hs_bits_set[k0]) b0 = k;
                for (int u = 0; u < x.U; u++) {
                    /* unit u's middle layer decides its stage */
                    int mid = x.ufirst[u] + x.usize[u] / 2, base = m->layers / N, ex = m->layers % N;
                    int j = 0, acc = 0;
                    while (j < N - 1 && mid >= acc + base + (j < ex)) acc += base + (j++ < ex);
                    dev[u] = j;
                    bi[u] = b0;
                }
                o = hs_pq_eval(&in, dev, bi, NULL);
                out->n_inst++;
                if (isfinite(o)) {   /* the last that fits */
                    found = 1;
                    record(&x, &in, ord, eta, xi, dev, bi, o, out);
                }
            }
        }
        goto done;
    }
    for (int k0 = 0; k0 < HS_NBITS; k0++) {
        /* groups of identical GPUs: gs[g] their signature, gc[g] how
         * many; gperm orders the groups when they are kept whole */
        int sorted[HS_MAX_PP], gs[HS_MAX_PP], gc[HS_MAX_PP], gperm[HS_MAX_PP], ng = 0;
        int whole = kind == HS_PQ_LLMPQ && !cfg->all_orders;
        if (kind == HS_PQ_PIPEEDGE && (found || !(cfg->bits_mask & (1 << k0)))) continue;
        if (kind == HS_PQ_LLMPQ && k0) break;
        memcpy(sorted, gsig, sizeof *gsig * N);
        for (int a = 1; a < N; a++)
            for (int b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
                int t = sorted[b]; sorted[b] = sorted[b - 1]; sorted[b - 1] = t;
            }
        for (int a = 0; a < N; a++) {
            if (!ng || gs[ng - 1] != sorted[a]) {
                gs[ng] = sorted[a];
                gc[ng++] = 0;
            }
            gc[ng - 1]++;
        }
        for (int g = 0; g < ng; g++) gperm[g] = g;
        memcpy(sig, sorted, sizeof *sig * N);
        do {
            int xi = kind == HS_PQ_PIPEEDGE ? ceil_div(cfg->B, N) : (cfg->xi ? cfg->xi : ceil_div(cfg->B, N));
            if (whole)   /* the group order, expanded GPU by GPU */
                for (int g = 0, j = 0; g < ng; g++)
                    for (int q = 0; q < gc[gperm[g]]; q++) sig[j++] = gs[gperm[g]];
            order_of(c, sig, gsig, N, ord);
            if (kind == HS_PQ_PIPEEDGE)   /* the given order only */
                for (int j = 0; j < N; j++) ord[j] = j;
            for (int eta = 1; eta <= xi; eta++) {
                double o;
                int e = kind == HS_PQ_PIPEEDGE ? xi : (cfg->eta ? cfg->eta : eta);
                if (xi % eta) continue;
                if (now_s() - t0 > cfg->total_limit_s) {
                    /* out of time: stop enumerating (a large cluster has
                     * astronomically many orders) */
                    out->n_timeout++;
                    stop = 1;
                    goto next;
                }
                build_inst(&x, ord, N, e, xi, &in, om_unit);
                out->n_inst++;
                if (hs_progress_due(&pg))
                    hs_progress_printf(&pg, "%d instances, best objective %.4g", out->n_inst, best);
                if (kind == HS_PQ_PIPEEDGE) {
                    int b0 = -1;
                    for (int k = 0; k < in.nb; k++)
                        if (in.bits[k] == hs_bits_set[k0]) b0 = k;
                    if (!hs_pq_pipeedge_split(&in, b0, dev, bi, &o) && o < best) {
                        best = o;
                        found = 1;
                        record(&x, &in, ord, e, xi, dev, bi, o, out);
                    }
                } else {
                    double ho = INFINITY;
                    rc = hs_pq_heuristic(&in, dev, bi, &ho, err);
                    if (rc && rc != HS_ENOFIT) goto out;
                    rc = 0;
                    if (isfinite(ho) && ho < best) {
                        best = ho;
                        found = 1;
                        record(&x, &in, ord, e, xi, dev, bi, ho, out);
                    }
                    if (!cfg->heuristic) {
                        cand *nc = ncand < capcand ? cands : realloc(cands, sizeof *cands * (capcand = 2 * capcand + 16));
                        if (!nc) {
                            rc = hs_errf(err, HS_ENOMEM, "out of memory");
                            goto out;
                        }
                        cands = nc;
                        cands[ncand].eta = e;
                        cands[ncand].xi = xi;
                        cands[ncand].heur = ho;
                        cands[ncand].seq = ncand;
                        memcpy(cands[ncand++].ord, ord, sizeof *ord * N);
                    }
                }
                if (cfg->eta || kind == HS_PQ_PIPEEDGE) break;
            }
        next:;
        } while (!stop && kind != HS_PQ_PIPEEDGE && (whole ? next_perm(gperm, ng) : next_perm(sig, N)));
    }
    /* ILP phase: instances in order of their heuristic objective (most
     * promising first, so the cut-off prunes the rest early) */
    if (ncand) qsort(cands, (size_t)ncand, sizeof *cands, cand_cmp);
    for (int i = 0; i < ncand; i++) {
        double o, lim = cfg->ilp_limit_s, left = cfg->total_limit_s - (now_s() - t0);
        int to = 0;
        if (left <= 0) {
            out->n_timeout += ncand - i;
            break;
        }
        if (left < lim) lim = left;
        build_inst(&x, cands[i].ord, N, cands[i].eta, cands[i].xi, &in, om_unit);
        out->n_ilp++;
        if (hs_progress_due(&pg)) hs_progress_printf(&pg, "ILP %d of %d, best objective %.4g", i + 1, ncand, best);
        rc = hs_pq_ilp(&in, lim, isfinite(best) ? best - cfg->mip_gap * fabs(best) : INFINITY,
                       dev, bi, &o, &to, err);
        out->n_timeout += to;
        if (!rc && o < best) {
            best = o;
            found = 1;
            record(&x, &in, cands[i].ord, cands[i].eta, cands[i].xi, dev, bi, o, out);
            out->from_ilp = 1;
        } else if (rc && rc != HS_ENOFIT && rc != HS_ERANGE) goto out;
        rc = 0;
    }
done:
    if (!found)
        rc = hs_errf(err, HS_ENOFIT, "%s: %s does not fit on cluster %s (B=%d, s=%d, n=%d) at any allowed bit-width",
                     kind == HS_PQ_LLMPQ ? "llmpq" : kind == HS_PQ_PIPEEDGE ? "pipeedge" : "uniform-pp",
                     m->name, c->name, cfg->B, cfg->s, cfg->n);
out:
    hs_progress_end(&pg);
    out->solve_s = now_s() - t0;
    free(cands);
    hs_qlat_cal_free(x.cal);
    free(x.omega);
    free(om_unit);
    free(dev);
    free(bi);
    return rc;
}
