/* iserve_multi_cb.c - the continuous-batching option of the multi-model runner.
 *
 * iServe serves FCFS at batch 1 (iserve_multi.c).  This option re-serves the same
 * cluster with a batching runtime policy (vllm, sarathi, static): after an
 * FCFS run has decided the deployments over time and which instance each
 * request goes to, every instance's requests are replayed through one
 * hs_engine (a one-replica deployment of the instance's layout), composing
 * existing engines rather than a shared event loop.
 *
 * Interference (mean field): instance i's latency tables are multiplied by
 *     s_i = 1 + alpha * sum_{j != i sharing a GPU with i} u_j
 * where u_j is j's busy fraction (decode iterations plus prefills, over the
 * run's span) measured in the previous pass; pass 1 runs with s = 1 and
 * `passes` rounds iterate towards the fixed point.  With one always-busy
 * neighbour this is the FCFS mode's factor 1 + alpha.
 *
 * KV memory: an instance's KV blocks are its own one-context reservation plus
 * an equal share of each of its GPUs' memory left after every co-located
 * instance's bytes (the smallest over its stages), at least one full
 * context per lane. */
#include <stdlib.h>
#include <string.h>

#include "serve/deploy.h"
#include "serve/engine.h"
#include "plan/iserve_multi.h"
#include "plan/iserve_multi_int.h"

typedef struct cb_sink {
    hs_ns *sched, *first, *finish;   /* per request of the instance */
    int *dropped;
    int64_t n;
    double busy_ns;
} cb_sink;

static int cb_request(void *ctx, const hs_req_record *r)
{
    cb_sink *s = ctx;
    if (r->id < 0 || r->id >= s->n) return HS_ESTATE;
    s->sched[r->id] = r->first_sched;
    s->first[r->id] = r->first_token;
    s->finish[r->id] = r->finish;
    s->dropped[r->id] = r->dropped;
    if (!r->dropped && r->first_token > r->first_sched)
        s->busy_ns += (double)(r->first_token - r->first_sched);
    return 0;
}

static void cb_itl(void *ctx, hs_ns interval, int64_t count)
{
    (void)count;
    ((cb_sink *)ctx)->busy_ns += (double)interval;
}

/* KV blocks of instance i (see the file comment). */
static int64_t kv_blocks(const hs_multi *mm, int i, const hs_engine_cfg *ec, int32_t mlen)
{
    const hs__inst *in = &mm->in[i];
    const hs_model *m = &mm->models[in->model];
    double best = -1;
    int64_t min_blocks = (int64_t)in->layout.pp * ((mlen + ec->block_size - 1) / ec->block_size);
    for (int s = 0; s < in->layout.pp; s++) {
        const hs_stage_layout *st = &in->layout.stage[s];
        double kvb = st->layers * hs_model_kv_bytes_token_layer(m, st->tp, in->layout.kv_bits) *
                     ec->block_size, share = -1, blocks;
        if (kvb <= 0) continue;
        for (int k = 0; k < st->tp; k++) {
            int g = st->gpus[k], on = 0;
            double spare = mm->cap_b[g] - mm->true_b[g], sh;
            for (int j = 0; j < mm->n_in; j++)
                for (int q = 0; q < mm->in[j].n_gpus; q++) on += mm->in[j].gpus[q] == g;
            sh = (spare > 0 ? spare : 0) / (on ? on : 1);
            if (share < 0 || sh < share) share = sh;
        }
        /* the one-context reservation counted in the instance's bytes (2048 tokens) */
        blocks = 2048.0 / ec->block_size + share / kvb;
        if (best < 0 || blocks < best) best = blocks;
    }
    if (best < (double)min_blocks) return min_blocks;
    return (int64_t)best;
}

int hs_multi_run_batched(hs_multi *mm, const hs_policy_ops *policy, const hs_engine_cfg *ecfg,
                         int passes, hs_multi_result *res, hs_err *err)
{
    int n = mm->n_in, rc = 0;
    double *u = calloc((size_t)(n ? n : 1), sizeof *u), *slow = calloc((size_t)(n ? n : 1), sizeof *slow);
    double *busy = calloc((size_t)(n ? n : 1), sizeof *busy);
    hs_ns *sched = malloc(sizeof *sched * (size_t)(mm->n_rq ? mm->n_rq : 1));
    hs_ns *first = malloc(sizeof *first * (size_t)(mm->n_rq ? mm->n_rq : 1));
    hs_ns *finish = malloc(sizeof *finish * (size_t)(mm->n_rq ? mm->n_rq : 1));
    int *drop = calloc((size_t)(mm->n_rq ? mm->n_rq : 1), sizeof *drop);
    hs_arrival *arr = malloc(sizeof *arr * (size_t)(mm->n_rq ? mm->n_rq : 1));
    int64_t *idx = malloc(sizeof *idx * (size_t)(mm->n_rq ? mm->n_rq : 1));
    hs_ns t0 = -1, t1 = 0;
    double span;
    if (!u || !slow || !busy || !sched || !first || !finish || !drop || !arr || !idx) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    if (passes < 1) passes = 1;
    for (int64_t r = 0; r < mm->n_rq; r++) {
        if (t0 < 0 || mm->rq[r].arrival < t0) t0 = mm->rq[r].arrival;
        if (mm->rq[r].finish > t1) t1 = mm->rq[r].finish;
    }
    span = t1 > t0 ? (double)(t1 - t0) : 1;
    for (int pass = 0; pass < passes && !rc; pass++) {
        for (int i = 0; i < n; i++) {
            double sum = 0;
            for (int j = 0; j < n; j++) {
                int share = 0;
                if (j == i) continue;
                for (int a = 0; a < mm->in[i].n_gpus && !share; a++)
                    for (int b = 0; b < mm->in[j].n_gpus; b++)
                        share |= mm->in[i].gpus[a] == mm->in[j].gpus[b];
                if (share) sum += u[j];
            }
            slow[i] = 1 + mm->cfg.alpha * sum;
        }
        for (int i = 0; i < n && !rc; i++) {
            hs__inst *in = &mm->in[i];
            hs_engine_cfg ec = *ecfg;
            hs_replica *rep = NULL;
            hs_engine *e = NULL;
            hs_source *src = NULL;
            hs_sink sink;
            cb_sink cs;
            int64_t k = 0;
            int32_t mlen = 1;
            int64_t pt;
            for (int64_t r = 0; r < mm->n_rq; r++) {
                const hs__mreq *q = &mm->rq[r];
                if (q->inst != i) continue;
                arr[k] = (hs_arrival){k, q->arrival, q->prompt, q->output};
                idx[k++] = r;
                if (q->prompt + q->output > mlen) mlen = q->prompt + q->output;
            }
            busy[i] = 0;
            if (!k) continue;
            ec.max_model_len = mlen;
            ec.max_batched_tokens = 0;
            pt = hs_engine_pass_tokens(&ec, policy, NULL, mlen);
            if (pt < 0) {
                rc = hs_errf(err, HS_ERANGE, "batched: instance %d: pass too large", i);
                break;
            }
            rep = calloc(1, sizeof *rep);
            if (!rep) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                break;
            }
            snprintf(rep->role, sizeof rep->role, "colocated");
            rep->role_kind = HS_ROLE_COLOCATED;
            rep->layout = in->layout;
            rep->kv_bytes_token_layer = hs_model_kv_bytes_token_layer(&mm->models[in->model], 1,
                                                                      in->layout.kv_bits);
            rep->kv_blocks = kv_blocks(mm, i, &ec, mlen);
            rep->weight = 1;
            if ((rc = hs_perf_build(&rep->perf, &mm->cfg.perf, &mm->models[in->model], mm->c,
                                    &in->layout, (int)pt, ec.max_num_seqs, err))) {
                free(rep);
                hs_err_prefix(err, "batched: instance %d: ", i);
                break;
            }
            {
                /* the factor on these tables, as the fluid mode's on its own */
                double f;
                if ((rc = hs_solo_factor(&rep->perf, &mm->cfg.perf, &mm->models[in->model], mm->c,
                                         &in->layout, ec.max_num_seqs, in->lat_ratio, &f, err))) {
                    hs_replicas_free(rep, 1);
                    hs_err_prefix(err, "batched: instance %d: ", i);
                    break;
                }
                hs_perf_scale(&rep->perf, f * slow[i]);
            }
            rep->perf.step_overhead += in->pass_extra_ns;
            memset(&cs, 0, sizeof cs);
            cs.sched = sched;
            cs.first = first;
            cs.finish = finish;
            cs.dropped = drop;
            cs.n = k;
            sink = (hs_sink){&cs, cb_request, cb_itl};
            if (!(rc = hs_source_open_array(&src, arr, k, err)) &&
                !(rc = hs_engine_create(&e, &ec, policy, NULL, hs_router_find("rr"), rep, 1, src, &sink,
                                        mlen, mm->c, err)))
                rc = hs_engine_run(e, err);
            hs_engine_destroy(e);
            hs_source_close(src);
            hs_replicas_free(rep, 1);
            if (rc) {
                hs_err_prefix(err, "batched: instance %d: ", i);
                break;
            }
            busy[i] = cs.busy_ns < span ? cs.busy_ns : span;
            u[i] = busy[i] / span;
            /* Results of this pass, by original request (kept per request). */
            for (int64_t q = 0; q < k; q++) {
                hs__mreq *r = &mm->rq[idx[q]];
                r->start = drop[q] ? -1 : sched[q];
                r->dropped = drop[q];
                r->ttft_ns = (double)(first[q] - r->arrival);
                r->finish = finish[q];
            }
        }
    }
    if (rc) goto out;
    mm->batched = 1;
    {
        double *lat = malloc(sizeof *lat * (size_t)(mm->n_rq ? mm->n_rq : 1));
        double *tt = malloc(sizeof *tt * (size_t)(mm->n_rq ? mm->n_rq : 1));
        hs_multi_result fc = *res;
        int64_t m = 0, met = 0;
        hs_ns a0 = -1, f1 = 0;
        if (!lat || !tt) {
            free(lat);
            free(tt);
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        res->served = 0;
        res->mean_s = res->cost = res->gpu_hours = 0;
        for (int64_t r = 0; r < mm->n_rq; r++) {
            const hs__mreq *q = &mm->rq[r];
            double l;
            if (q->dropped) continue; /* dropped by the engine */
            l = hs_ns_to_s(q->finish - q->arrival);
            lat[m] = l;
            tt[m++] = q->ttft_ns / 1e9;
            res->mean_s += l;
            met += (double)(q->finish - q->arrival) <= q->slo_ns;
            res->cost += mm->in[q->inst].bytes / 1073741824.0 * l;
            if (a0 < 0 || q->arrival < a0) a0 = q->arrival;
            if (q->finish > f1) f1 = q->finish;
        }
        for (int i = 0; i < n; i++) res->gpu_hours += mm->in[i].n_gpus * busy[i] / 1e9 / 3600.0;
        res->served = m;
        res->unserved = fc.kept - m;
        if (m) {
            res->mean_s /= (double)m;
            res->cost /= (double)m;
        }
        hs__sort_doubles(lat, m);
        hs__sort_doubles(tt, m);
        res->p50_s = hs__pct(lat, m, 0.50);
        res->p95_s = hs__pct(lat, m, 0.95);
        res->p99_s = hs__pct(lat, m, 0.99);
        res->ttft_p50_s = hs__pct(tt, m, 0.50);
        res->slo_attainment = res->kept ? (double)met / (double)res->kept : 0;
        res->duration_s = a0 >= 0 && f1 > a0 ? hs_ns_to_s(f1 - a0) : 0;
        res->gpu_throughput = res->gpus_used && res->duration_s > 0
                                  ? (double)m / (res->duration_s * res->gpus_used) : 0;
        free(lat);
        free(tt);
    }
out:
    free(u);
    free(slow);
    free(busy);
    free(sched);
    free(first);
    free(finish);
    free(drop);
    free(arr);
    free(idx);
    return rc;
}
