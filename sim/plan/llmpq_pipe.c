/* llmpq_pipe.c - LLM-PQ's offline pipeline runtime; see llmpq_pipe.h. */
#include "plan/llmpq_pipe.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/time.h"
#include "perf/qlat.h"

enum { K_STAGE = 0, K_HEAD };

typedef struct item {
    hs_ns t;
    uint64_t seq;
    int kind, stage, pre, mb, step;
} item;

typedef struct heap {
    item *a;
    size_t n, cap;
    uint64_t seq;
} heap;

static int before(const item *x, const item *y)
{
    return x->t != y->t ? x->t < y->t : x->seq < y->seq;
}

static int push(heap *h, item it)
{
    size_t i;
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 256;
        item *na = realloc(h->a, nc * sizeof *na);
        if (!na) return HS_ENOMEM;
        h->a = na;
        h->cap = nc;
    }
    it.seq = h->seq++;
    i = h->n++;
    while (i && before(&it, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = it;
    return 0;
}

static item pop(heap *h)
{
    item top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->a[c + 1], &h->a[c])) c++;
        if (!before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

static hs_ns ns_of(double s)
{
    return (hs_ns)llround(s * 1e9);
}

/* Compute time of stage j for v sequences (prefill of s tokens, or decode
 * at context ctx). */
static double stage_s(const hs_model *m, const hs_cluster *c, const hs_perf_cfg *pc,
                      const hs_qlat_cal *cal, const hs_pipe_job *jb, int j, int pre, int v, double ctx)
{
    const hs_gpu *g = hs_cluster_gpu(c, jb->dev[j]);
    double t = 0;
    for (int k = 0; k < HS_NBITS; k++) {
        if (!jb->nbits[j][k]) continue;
        t += jb->nbits[j][k] *
             (pre ? hs_qlat_prefill_s(m, g, hs_bits_set[k], v, jb->s, jb->kv_bits, pc, cal)
                  : hs_qlat_decode_s(m, g, hs_bits_set[k], v, ctx, jb->kv_bits, pc, cal));
    }
    if (j == 0) t += hs_qlat_embed_s(m, g, pre ? (double)v * jb->s : v, pc);
    return t;
}

int hs_pipe_offline(const hs_model *m, const hs_cluster *c, const hs_perf_cfg *pc,
                    const hs_pipe_job *jb, hs_pipe_result *res, hs_err *err)
{
    int N = jb->ndev, npre, ndec, rc = 0;
    heap h = {0};
    hs_ns sfree[HS_MAX_PP] = {0}, lfree[HS_MAX_PP] = {0}, end_all = 0, pre_all = 0;
    int *left = NULL;       /* per decode micro-batch: sequences without a first token */
    hs_qlat_cal *cal = NULL; /* the calibrated FP16 layer; NULL: roofline */
    int tmax, smax;
    memset(res, 0, sizeof *res);
    if (N < 1 || N > HS_MAX_PP || jb->B < 1 || jb->s < 1 || jb->n < 1 || jb->eta < 1 ||
        jb->xi < 1)
        return hs_errf(err, HS_EINVAL, "pipeline job: need 1..%d stages and B, s, n, eta, xi >= 1",
                       HS_MAX_PP);
    for (int j = 0; j < N; j++)
        if (jb->dev[j] < 0 || jb->dev[j] >= c->n_gpus)
            return hs_errf(err, HS_ERANGE, "pipeline job: stage %d: GPU %d not in cluster %s",
                           j, jb->dev[j], c->name);
    npre = (jb->B + jb->eta - 1) / jb->eta;
    ndec = (jb->B + jb->xi - 1) / jb->xi;
    /* every pass priced exactly: prefills of eta prompts, decodes of xi
     * tokens, heads of up to max(B, eta, xi) sequences */
    tmax = hs_qlat_cal_tokens(jb->eta, jb->s);
    if (jb->xi > tmax) tmax = jb->xi;
    smax = jb->B > jb->eta ? jb->B : jb->eta;
    if (jb->xi > smax) smax = jb->xi;
    if ((rc = hs_qlat_cal_build(&cal, m, c, pc, tmax, smax, err))) return rc;
    if (cal) snprintf(res->latency, sizeof res->latency, "%s", hs_qlat_cal_source(cal, NULL));
    if (!(left = malloc(sizeof *left * ndec))) {
        hs_qlat_cal_free(cal);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (int d = 0; d < ndec; d++)
        left[d] = (d + 1) * jb->xi <= jb->B ? jb->xi : jb->B - d * jb->xi;
    for (int k = 0; k < npre && !rc; k++)
        rc = push(&h, (item){0, 0, K_STAGE, 0, 1, k, 0});
    while (!rc && h.n) {
        item it = pop(&h);
        int j = it.kind == K_HEAD ? 0 : it.stage;
        int v = it.pre ? (it.mb + 1 <= npre - 1 || jb->B % jb->eta == 0 ? jb->eta : jb->B % jb->eta)
                       : (it.mb + 1 <= ndec - 1 || jb->B % jb->xi == 0 ? jb->xi : jb->B % jb->xi);
        hs_ns start = it.t > sfree[j] ? it.t : sfree[j], end;
        double dur = it.kind == K_HEAD
                         ? hs_qlat_head_s(m, hs_cluster_gpu(c, jb->dev[0]), v, pc, cal)
                         : stage_s(m, c, pc, cal, jb, j, it.pre, v, (double)jb->s + it.step);
        end = start + ns_of(dur);
        sfree[j] = end;
        res->busy_s[j] += dur;
        res->events++;
        if (it.kind == K_STAGE) {
            item nx = it;
            if (N > 1) {
                /* hidden states to the next stage (the last sends them back
                 * to the master on the first GPU) */
                int a = jb->dev[j], b = jb->dev[(j + 1) % N];
                double tok = it.pre ? (double)v * jb->s : v;
                hs_ns ts = end > lfree[j] ? end : lfree[j];
                lfree[j] = ts + ns_of(tok * m->hidden * 2.0 / (hs_cluster_bw(c, a, b) * pc->link_eff));
                nx.t = lfree[j] + ns_of(hs_cluster_lat(c, a, b));
            } else nx.t = end;
            if (j == N - 1) nx.kind = K_HEAD;
            else nx.stage = j + 1;
            rc = push(&h, nx);
            continue;
        }
        /* the master sampled a token for v sequences at `end` */
        if (end > end_all) end_all = end;
        if (it.pre) {
            int lo = it.mb * jb->eta, hi = lo + v;   /* sequences [lo, hi) */
            if (end > pre_all) pre_all = end;
            for (int q = lo; q < hi && !rc; q++) {
                int d = q / jb->xi;
                if (--left[d] == 0 && jb->n > 1)
                    rc = push(&h, (item){end, 0, K_STAGE, 0, 0, d, 1});
            }
        } else if (it.step + 1 < jb->n) {
            rc = push(&h, (item){end, 0, K_STAGE, 0, 0, it.mb, it.step + 1});
        }
    }
    free(h.a);
    free(left);
    hs_qlat_cal_free(cal);
    if (rc) return hs_errf(err, rc, "out of memory in the pipeline simulation");
    res->latency_s = end_all / 1e9;
    res->prefill_s = pre_all / 1e9;
    res->throughput = res->latency_s > 0 ? (double)jb->B * jb->n / res->latency_s : 0;
    return 0;
}
