/* engine.c - the event loop, arrivals, routing and pipeline timing; see
 * engine.h.  The loop is small on purpose: everything a policy decides
 * lives in policy/, everything a lane keeps lives in lane.c. */
#include "serve/engine.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_ARRIVAL = 1, EV_KICK, EV_ITER_END, EV_NET };

void hs__engine_fail(hs_engine *e, int code, const char *fmt, ...)
{
    va_list ap;
    if (e->fatal) return; /* the first failure is the one to report */
    e->fatal = code ? code : HS_ESTATE;
    e->fatal_err.code = e->fatal;
    va_start(ap, fmt);
    vsnprintf(e->fatal_err.msg, sizeof e->fatal_err.msg, fmt, ap);
    va_end(ap);
}

const char *const hs_router_names[] = {"rr", "lor", "lot", "weighted", NULL};

int hs_router_parse(const char *name)
{
    for (int i = 0; hs_router_names[i]; i++)
        if (!strcmp(hs_router_names[i], name)) return i;
    return -1;
}

const hs_field hs_engine_cfg_fields[] = {
    HS_FIELD_NUM(hs_engine_cfg, block_size, HS_F_INT, 0, 16, 1, 1024, "tokens per KV block"),
    HS_FIELD_NUM(hs_engine_cfg, max_num_seqs, HS_F_INT, 0, 256, 1, 65536, "sequences per lane"),
    HS_FIELD_NUM(hs_engine_cfg, max_batched_tokens, HS_F_INT, 0, 0, 0, 1 << 20, "tokens per iteration (0: max(2048, context))"),
    HS_FIELD_NUM(hs_engine_cfg, chunk_size, HS_F_INT, 0, 512, 1, 1 << 20, "chunked-prefill token budget"),
    HS_FIELD_NUM(hs_engine_cfg, static_batch, HS_F_INT, 0, 8, 1, 65536, "static batching batch size"),
    HS_FIELD_NUM(hs_engine_cfg, prefill_seqs, HS_F_INT, 0, 0, 0, 65536, "pq policy: prompts per prefill micro-batch (eta), 0: no cap"),
    HS_FIELD_NUM(hs_engine_cfg, watermark, HS_F_DOUBLE, 0, 0.01, 0, 0.5, "fraction of KV blocks kept free at admission"),
    HS_FIELD_NUM(hs_engine_cfg, gpu_mem_util, HS_F_DOUBLE, 0, 0.9, 0.05, 1, "fraction of GPU memory used"),
    HS_FIELD_NUM(hs_engine_cfg, max_model_len, HS_F_INT, 0, 0, 0, 1 << 24, "context limit, tokens (0: model's)"),
    HS_FIELD_NUM(hs_engine_cfg, kv_bits, HS_F_INT, 0, 16, 8, 16, "KV cache bits (16 or 8)"),
    HS_FIELD_NUM(hs_engine_cfg, audit, HS_F_BOOL, 0, 0, 0, 1, "check invariants after every event"),
    HS_FIELD_NUM(hs_engine_cfg, fast_forward, HS_F_BOOL, 0, 1, 0, 1, "simulate runs of decode-only steps in one event"),
    HS_FIELD_NUM(hs_engine_cfg, prefill_lanes, HS_F_INT, 0, 1, 1, 8, "lanes per stage of prefill replicas (batches in flight per stage)"),
    HS_FIELD_NUM(hs_engine_cfg, exegpt_be, HS_F_INT, 0, 16, 1, 65536, "rra/waa: encoder batch B_E (queries per encoding phase)"),
    HS_FIELD_NUM(hs_engine_cfg, exegpt_nd, HS_F_INT, 0, 8, 1, 1 << 20, "rra: decoding iterations per encoding phase N_D"),
    HS_FIELD_NUM(hs_engine_cfg, exegpt_bd, HS_F_DOUBLE, 0, 0, 0, 1e9, "rra/waa: target decoding population (0: no decoder adjustment)"),
    HS_FIELD_NUM(hs_engine_cfg, exegpt_adjust, HS_F_DOUBLE, 0, 0.1, 0, 1, "rra/waa: dynamic workload adjustment threshold (0: off)"),
    HS_FIELD_NUM(hs_engine_cfg, exegpt_prompt_mean, HS_F_DOUBLE, 0, 0, 0, 1e9, "rra/waa: mean prompt tokens for the encoder workload target (0: running mean)"),
    {0},
};

void hs_engine_cfg_defaults(hs_engine_cfg *c)
{
    hs_conf_defaults(c, hs_engine_cfg_fields);
}

int hs_engine_pass_tokens(hs_engine_cfg *c, const hs_policy_ops *p, int32_t max_model_len)
{
    int64_t t;
    if (!c->max_batched_tokens) c->max_batched_tokens = max_model_len > 2048 ? max_model_len : 2048;
    t = p->pass_tokens ? p->pass_tokens(c, max_model_len) : c->max_batched_tokens;
    /* A decode step holds one token per running sequence, whatever the
     * prefill budget. */
    if (t < c->max_num_seqs) t = c->max_num_seqs;
    return t > HS_MAX_PASS_TOKENS ? -1 : (int)t;
}

static int lane_init(hs_engine *e, hs_lane *l, int32_t id, int32_t replica,
                     int64_t blocks)
{
    memset(l, 0, sizeof *l);
    l->id = id;
    l->replica = replica;
    l->waiting = l->prefilling = l->running = l->incoming = l->landed = (hs_list){-1, -1, 0};
    l->blocks_total = l->blocks_free = blocks;
    l->watermark = (int64_t)floor(e->cfg.watermark * (double)blocks);
    l->bucket = calloc((size_t)e->cfg.block_size, sizeof *l->bucket);
    l->heap_cap = 64;
    l->heap = malloc((size_t)l->heap_cap * sizeof *l->heap);
    l->last_dec_end = 0;
    return (l->bucket && l->heap) ? 0 : HS_ENOMEM;
}

void hs_engine_destroy(hs_engine *e)
{
    if (!e) return;
    for (int32_t i = 0; i < e->n_lanes; i++) {
        hs_lane *l = e->lanes[i];
        free(l->bucket);
        free(l->heap);
        free(l->joiners);
        free(l->it.chunks);
        free(l->trace_pm);
        if (e->policy->lane_free) e->policy->lane_free(l);
        else free(l->pstate);
    }
    for (int32_t i = 0; i < e->n_replicas; i++) {
        free(e->replicas[i].lanes);
        e->replicas[i].lanes = NULL;
    }
    hs_net_destroy(e->net);
    free(e->lanes);
    free(e->pool);
    free(e->wrr);
    free(e->kv_wrr);
    free(e->kv_pairs);
    free(e->load_req);
    free(e->load_tok);
    free(e->trace_it.pre);
    free(e->trace_it.dec);
    free(e->trace_it.first);
    free(e->trace_it.finished);
    hs_evq_free(&e->q);
    free(e);
}

int hs_engine_create(hs_engine **out, const hs_engine_cfg *cfg,
                     const hs_policy_ops *policy, int router,
                     hs_replica *replicas, int32_t n_replicas, hs_source *src,
                     const hs_sink *sink, int32_t max_model_len,
                     const hs_cluster *cluster, hs_err *err)
{
    hs_engine *e;
    int32_t n = 0, n_pre = 0, n_dec = 0;
    int rc;
    *out = NULL;
    if (n_replicas <= 0) return hs_errf(err, HS_EINVAL, "the engine needs at least one replica");
    for (int32_t i = 0; i < n_replicas; i++) {
        n_pre += replicas[i].role_kind == HS_ROLE_PREFILL;
        n_dec += replicas[i].role_kind == HS_ROLE_DECODE;
    }
    if ((n_pre > 0) != (n_dec > 0))
        return hs_errf(err, HS_EINVAL,
                       "deployment has %d prefill and %d decode replicas: disaggregation needs both",
                       n_pre, n_dec);
    if (n_pre && policy->complete && !policy->disagg)
        return hs_errf(err, HS_EUNSUPPORTED,
                       "policy %s cannot run disaggregated replicas (vllm, sarathi, waa can)", policy->name);
    for (int32_t i = 0; i < n_replicas; i++)
        if (replicas[i].encdec && !policy->encdec)
            return hs_errf(err, HS_EUNSUPPORTED,
                           "policy %s does not run encoder-decoder models (vllm, static, rra and waa do)",
                           policy->name);
    e = calloc(1, sizeof *e);
    if (!e) return hs_errf(err, HS_ENOMEM, "out of memory creating the engine");
    e->cfg = *cfg;
    e->policy = policy;
    e->router = router;
    e->replicas = replicas;
    e->n_replicas = n_replicas;
    e->src = src;
    e->sink = *sink;
    e->max_model_len = max_model_len;
    e->free_head = -1;
    e->net_time = -1;
    if (hs_evq_init(&e->q, 1024)) goto nomem;
    if (n_pre && (rc = hs_net_create(&e->net, cluster, err))) {
        hs_engine_destroy(e);
        return rc;
    }
    /* Weights: 0 switches a replica off; all zero (among the replicas that
     * take arrivals, and among decode replicas) means all equal. */
    for (int side = 0; side < 2; side++) {
        int any = 0;
        for (int32_t i = 0; i < n_replicas; i++)
            if ((replicas[i].role_kind == HS_ROLE_DECODE) == side) any |= replicas[i].weight > 0;
        if (!any)
            for (int32_t i = 0; i < n_replicas; i++)
                if ((replicas[i].role_kind == HS_ROLE_DECODE) == side) replicas[i].weight = 1;
    }
    /* Lanes: one per stage (vLLM's virtual engines); a prefill replica
     * may run more (engine.prefill_lanes), since its batches do not depend
     * on each other and an open pipeline keeps every stage busy whatever
     * the batches' sizes. */
    for (int32_t i = 0; i < n_replicas; i++)
        n += replicas[i].layout.pp * (replicas[i].role_kind == HS_ROLE_PREFILL ? cfg->prefill_lanes : 1);
    e->lanes = calloc((size_t)n, sizeof *e->lanes);
    e->wrr = calloc((size_t)n_replicas, sizeof *e->wrr);
    e->load_req = calloc((size_t)n_replicas, sizeof *e->load_req);
    e->load_tok = calloc((size_t)n_replicas, sizeof *e->load_tok);
    if (!e->lanes || !e->wrr || !e->load_req || !e->load_tok) goto nomem;
    for (int32_t i = 0; i < n_replicas; i++) {
        hs_replica *rp = &replicas[i];
        rp->n_lanes = rp->layout.pp * (rp->role_kind == HS_ROLE_PREFILL ? cfg->prefill_lanes : 1);
        rp->lanes = calloc((size_t)rp->n_lanes, sizeof *rp->lanes);
        if (!rp->lanes) goto nomem;
        for (int s = 0; s < HS_MAX_PP; s++) rp->stage_free[s] = 0;
        for (int32_t k = 0; k < rp->n_lanes; k++) {
            hs_lane *l = &rp->lanes[k];
            e->lanes[e->n_lanes] = l;
            if (lane_init(e, l, e->n_lanes, i, rp->kv_blocks / rp->n_lanes)) {
                e->n_lanes++;
                goto nomem;
            }
            e->n_lanes++;
        }
    }
    *out = e;
    return 0;
nomem:
    hs_engine_destroy(e);
    return hs_errf(err, HS_ENOMEM, "out of memory creating the engine");
}

static int32_t pool_get(hs_engine *e)
{
    int32_t r;
    if (e->free_head < 0) {
        int32_t old = e->pool_cap, nc = old ? old * 2 : 1024;
        hs_req *np = realloc(e->pool, (size_t)nc * sizeof *np);
        if (!np) return -1;
        e->pool = np;
        e->pool_cap = nc;
        /* Thread the new slots in ascending order so allocation order, and
         * so every later iteration order, is deterministic. */
        for (int32_t i = nc - 1; i >= old; i--) {
            memset(&np[i], 0, sizeof np[i]);
            np[i].next = e->free_head;
            e->free_head = i;
        }
    }
    r = e->free_head;
    e->free_head = e->pool[r].next;
    return r;
}

/* Routers see only what a real router knows at arrival: per replica the
 * outstanding request count and prompt tokens, and the static weights. */
/* Arrivals go to colocated and prefill replicas of positive weight (create
 * made sure there is one). */
static int admits(const hs_engine *e, int32_t i)
{
    return e->replicas[i].role_kind != HS_ROLE_DECODE && e->replicas[i].weight > 0;
}

static int32_t route(hs_engine *e, const hs_req *q)
{
    int32_t best = 0;
    (void)q;
    switch (e->router) {
    case HS_ROUTE_RR:
        do best = (int32_t)(e->rr_next++ % e->n_replicas);
        while (!admits(e, best));
        break;
    case HS_ROUTE_LOR:
    case HS_ROUTE_LOT: {
        const int64_t *load = e->router == HS_ROUTE_LOR ? e->load_req : e->load_tok;
        double bv = INFINITY;
        /* A replica of weight 0 is switched off. */
        for (int32_t i = 0; i < e->n_replicas; i++) {
            double w = e->replicas[i].weight, v;
            if (!admits(e, i)) continue;
            v = (double)load[i] / w;
            if (v < bv) {
                bv = v;
                best = i;
            }
        }
        break;
    }
    case HS_ROUTE_WEIGHTED: {
        /* Smooth weighted round robin (nginx): deterministic, proportional. */
        double total = 0, bv = -INFINITY;
        for (int32_t i = 0; i < e->n_replicas; i++) {
            if (!admits(e, i)) continue;
            e->wrr[i] += e->replicas[i].weight;
            total += e->replicas[i].weight;
            if (e->wrr[i] > bv) {
                bv = e->wrr[i];
                best = i;
            }
        }
        e->wrr[best] -= total;
        break;
    }
    }
    return best;
}

static hs_lane *pick_lane(hs_replica *rp)
{
    hs_lane *b = &rp->lanes[0];
    for (int32_t k = 1; k < rp->n_lanes; k++)
        if (rp->lanes[k].out_reqs < b->out_reqs) b = &rp->lanes[k];
    return b;
}

void hs_engine_kick(hs_engine *e, hs_lane *l)
{
    if (l->busy || l->kick) return;
    l->kick = 1;
    if (!hs_evq_push(&e->q, e->q.now, HS_PRIO_STEP, EV_KICK, l->id, 0))
        hs__engine_fail(e, HS_ENOMEM, "out of memory queueing a lane's next step");
}

/* ---- fast-forward ----
 * A decode-only iteration with nothing waiting and nothing half-prefilled is
 * followed by identical decode steps (same members, context growing by one
 * token each) until the first member finishes, unless an arrival or a lack
 * of KV blocks intervenes.  Such a run is simulated as one ITER_END event
 * standing for ff_k steps; ends are recomputed with exactly the arithmetic
 * of single steps, so results are bit-identical with fast_forward off
 * (test_fastforward).  An arrival on the lane truncates the run at the
 * first step boundary after it.  Only single-stage replicas (no pipeline
 * reservations to replay) and policies using the default completion. */

static hs_ns ff_step_end(const hs_replica *rp, const hs_lane *l, int32_t i, hs_ns start)
{
    hs_batch_shape b = l->it.shape;
    b.dec_ctx += (int64_t)i * l->n_dec;
    return (hs_ns)ceil((double)start + hs_perf_step_ns(&rp->perf, &b) + hs_perf_stage_ns(&rp->perf, 0, &b));
}

static int32_t ff_need(const hs_engine *e, const hs_lane *l, int32_t i)
{
    int64_t m = (l->g + i) % e->cfg.block_size;
    return l->bucket[m < 0 ? m + e->cfg.block_size : m];
}

/* Extends the decode step just scheduled into a run; returns its end. */
static hs_ns ff_extend(hs_engine *e, hs_lane *l, const hs_replica *rp, hs_ns end)
{
    int64_t steps = hs_req_at(e, l->heap[0])->finish_step - l->g;
    int32_t k = 1;
    while (k < steps && k < (1 << 20)) {
        int32_t need = ff_need(e, l, k);
        if (l->blocks_free < need) break;
        l->blocks_free -= need;
        end = ff_step_end(rp, l, k, end);
        k++;
    }
    l->ff_k = k;
    return end;
}

/* Cuts the run in flight after the first step ending after t. */
static void ff_truncate(hs_engine *e, hs_lane *l, hs_ns t)
{
    const hs_replica *rp = &e->replicas[l->replica];
    hs_ns end = ff_step_end(rp, l, 0, l->it.start);
    int32_t j = 1;
    while (end <= t && j < l->ff_k) end = ff_step_end(rp, l, j++, end);
    if (j == l->ff_k) return;
    for (int32_t i = j; i < l->ff_k; i++) l->blocks_free += ff_need(e, l, i);
    l->ff_k = j;
    l->it.end = end;
    if (hs_evq_cancel(&e->q, l->ff_seq) ||
        !(l->ff_seq = hs_evq_push(&e->q, end, HS_PRIO_COMPLETE, EV_ITER_END, l->id, 0)))
        hs__engine_fail(e, HS_ENOMEM, "out of memory cutting a fast-forwarded run short");
}

/* Applies every step of the run (the last one may finish requests). */
static void ff_complete(hs_engine *e, hs_lane *l)
{
    const hs_replica *rp = &e->replicas[l->replica];
    hs_ns start = l->it.start;
    int32_t k = l->ff_k;
    hs_batch_shape b0 = l->it.shape;
    for (int32_t i = 0; i < k; i++) {
        l->it.shape = b0;
        l->it.shape.dec_ctx = l->sum_kv + l->n_dec;
        l->it.end = ff_step_end(rp, l, 0, start);
        start = l->it.end;
        hs_lane_complete(e, l);
    }
    l->iters += k - 1;
    e->iterations += k - 1;
    l->ff_k = 1;
}

/* ---- disaggregation: KV hand-over from prefill to decode replicas ----
 * A request whose prompt is done on a prefill replica keeps its blocks
 * there (xfer_out) and queues on a decode lane (incoming) until that lane
 * can reserve blocks for its context (xfer_in); then each GPU holding
 * layer j of the prefill replica sends that layer's KV to the GPU holding
 * layer j on the decode side, one flow per rank pair (max(tp) flows per
 * overlapping stage pair, the bytes split evenly), sharing links max-min
 * fairly (hw/net.h).  When its last flow lands the prefill blocks are freed
 * and the request joins the decode set at the decode lane's next iteration
 * boundary (landed), never in the middle of one.  A request preempted on a
 * decode replica is recomputed there (vLLM's recompute), not sent back. */

static void net_reschedule(hs_engine *e)
{
    hs_ns t = hs_net_next_event(e->net);
    if (t == e->net_time) return;
    if (e->net_seq && hs_evq_cancel(&e->q, e->net_seq))
        hs__engine_fail(e, HS_ENOMEM, "out of memory rescheduling the network's next event");
    e->net_seq = 0;
    if (t != HS_NS_MAX) {
        if (t < e->q.now) t = e->q.now;
        e->net_seq = hs_evq_push(&e->q, t, HS_PRIO_TRANSFER, EV_NET, 0, 0);
        if (!e->net_seq) hs__engine_fail(e, HS_ENOMEM, "out of memory queueing the network's next event");
    }
    e->net_time = t;
}

/* The decode replica for a hand-over from src when src has a kv_route
 * (deploy.h): smooth weighted round robin over the route's positive weights
 * toward decode replicas that are on, per source replica, so the pairs'
 * shares follow the planned flows; -1 when the route names none. */
static int32_t pick_decode_route(hs_engine *e, int32_t src)
{
    const hs_replica *sp = &e->replicas[src];
    double total = 0, bv = -INFINITY, *cur;
    int32_t best = -1;
    if (!sp->kv_route) return -1;
    if (!e->kv_wrr) {
        e->kv_wrr = calloc((size_t)e->n_replicas * (size_t)e->n_replicas, sizeof *e->kv_wrr);
        e->kv_pairs = calloc((size_t)e->n_replicas * (size_t)e->n_replicas, sizeof *e->kv_pairs);
        if (!e->kv_wrr || !e->kv_pairs) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
            return -1;
        }
    }
    cur = e->kv_wrr + (size_t)src * (size_t)e->n_replicas;
    for (int32_t j = 0; j < sp->n_kv_route && j < e->n_replicas; j++) {
        double w = sp->kv_route[j];
        if (w <= 0 || e->replicas[j].role_kind != HS_ROLE_DECODE || e->replicas[j].weight <= 0) continue;
        cur[j] += w;
        total += w;
        if (cur[j] > bv) {
            bv = cur[j];
            best = j;
        }
    }
    if (best >= 0) {
        cur[best] -= total;
        e->kv_pairs[(size_t)src * (size_t)e->n_replicas + (size_t)best]++;
    }
    return best;
}

/* The decode lane for a hand-over: the source's KV route when it has one,
 * else least outstanding requests per weight. */
static hs_lane *pick_decode(hs_engine *e, int32_t src)
{
    int32_t best = pick_decode_route(e, src);
    double bv = INFINITY;
    if (best >= 0) return pick_lane(&e->replicas[best]);
    for (int32_t i = 0; i < e->n_replicas; i++) {
        const hs_replica *rp = &e->replicas[i];
        double v;
        if (rp->role_kind != HS_ROLE_DECODE || rp->weight <= 0) continue;
        v = (double)e->load_req[i] / rp->weight;
        if (v < bv) {
            bv = v;
            best = i;
        }
    }
    return pick_lane(&e->replicas[best]);
}

static int flow(hs_engine *e, int32_t r, int from, int to, double bytes)
{
    if (hs_net_start(e->net, e->q.now, from, to, bytes, r, NULL, NULL)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return -1;
    }
    e->pool[r].xfer_pending++;
    return 0;
}

static void start_transfer(hs_engine *e, hs_lane *dl, int32_t r)
{
    hs_req *q = &e->pool[r];
    const hs_replica *sp = &e->replicas[e->lanes[q->src_lane]->replica];
    const hs_replica *dp = &e->replicas[dl->replica];
    int a = 0;
    q->state = HS_REQ_XFER;
    q->xfer_pending = 0;
    if (sp->encdec && sp->dec_layers == 0) {
        /* An encoder replica: the encoder output, from the last stage's
         * ranks to every rank of every decode stage (each projects the
         * cross-attention KV of its own heads); the decode side projects
         * it at the request's first step (proj_tokens). */
        const hs_stage_layout *ss = &sp->layout.stage[sp->layout.pp - 1];
        double bytes = (double)q->prefill_len * sp->enc_out_bytes_token;
        for (int d = 0; d < dp->layout.pp; d++)
            for (int k = 0; k < dp->layout.stage[d].tp; k++)
                if (flow(e, r, ss->gpus[k % ss->tp], dp->layout.stage[d].gpus[k], bytes)) return;
        net_reschedule(e);
        return;
    }
    for (int s = 0; s < sp->layout.pp; s++) {
        const hs_stage_layout *ss = &sp->layout.stage[s];
        int c = 0;
        for (int d = 0; d < dp->layout.pp; d++) {
            const hs_stage_layout *ds = &dp->layout.stage[d];
            int lo = a > c ? a : c, hi = a + ss->layers < c + ds->layers ? a + ss->layers : c + ds->layers;
            if (hi > lo) {
                int nf = ss->tp > ds->tp ? ss->tp : ds->tp;
                double bytes = (double)(hi - lo) * q->prefill_len * sp->kv_bytes_token_layer / nf;
                for (int i = 0; i < nf; i++)
                    if (flow(e, r, ss->gpus[i % ss->tp], ds->gpus[i % ds->tp], bytes)) return;
            }
            c += ds->layers;
        }
        a += ss->layers;
    }
    net_reschedule(e);
}

/* Starts the transfers of incoming requests while the lane has blocks. */
static void admit_incoming(hs_engine *e, hs_lane *dl)
{
    while (dl->incoming.head >= 0) {
        int32_t r = dl->incoming.head;
        hs_req *q = &e->pool[r];
        int32_t need = hs_blocks_for(e, q->prefill_len);
        /* Every lane holds one full context (INV-FIT), so need always fits
         * an empty lane and a stalled queue drains as decodes finish. */
        assert(need <= dl->blocks_total);
        if (dl->blocks_free < need) break;
        hs_list_remove(e, &dl->incoming, r);
        dl->blocks_free -= need;
        dl->xfer_in += need;
        q->blocks = need;
        start_transfer(e, dl, r);
    }
}

void hs__handoff(hs_engine *e, hs_lane *sl, int32_t r, hs_ns t)
{
    hs_req *q = &e->pool[r];
    hs_lane *dl = pick_decode(e, sl->replica);
    /* the prefill blocks stay held until the KV is out */
    sl->xfer_out += q->blocks;
    q->src_lane = sl->id;
    q->src_blocks = q->blocks;
    q->blocks = 0;
    sl->out_reqs--;
    sl->out_tokens -= q->prompt;
    e->load_req[sl->replica]--;
    e->load_tok[sl->replica] -= q->prompt;
    dl->out_reqs++;
    dl->out_tokens += q->prompt;
    e->load_req[dl->replica]++;
    e->load_tok[dl->replica] += q->prompt;
    q->replica = dl->replica;
    q->lane = dl->id;
    q->last_token = t;
    q->state = HS_REQ_INCOMING;
    hs_list_push_back(e, &dl->incoming, r);
    e->handoffs++;
    /* like an arrival: the next step boundary must look at it */
    if (dl->busy && dl->ff_k > 1) ff_truncate(e, dl, t);
    if (!dl->busy) admit_incoming(e, dl);
    hs_engine_kick(e, dl);
}

/* The last flow of r landed: free the prefill side, queue the join. */
static void transfer_done(hs_engine *e, int32_t r)
{
    hs_req *q = &e->pool[r];
    hs_lane *sl = e->lanes[q->src_lane], *dl = e->lanes[q->lane];
    /* encoder output in: its first step on the decode lane projects its
     * cross KV (it joins the decode set at that step's boundary) */
    if (e->replicas[sl->replica].encdec && e->replicas[sl->replica].dec_layers == 0) q->proj_tokens = q->prefill_len;
    sl->blocks_free += q->src_blocks;
    sl->xfer_out -= q->src_blocks;
    q->src_blocks = 0;
    q->src_lane = -1;
    hs_list_push_back(e, &dl->landed, r);
    if (dl->busy && dl->ff_k > 1) ff_truncate(e, dl, e->q.now);
    hs_engine_kick(e, dl);
    hs_engine_kick(e, sl);
}

/* At an iteration boundary: landed requests join the decode set (keeping
 * their last token time, so their first ITL spans the hand-over), then
 * queued hand-overs take the blocks that are free. */
static void join_landed(hs_engine *e, hs_lane *l)
{
    while (l->landed.head >= 0) {
        int32_t r = l->landed.head;
        hs_req *q = &e->pool[r];
        hs_ns last = q->last_token;
        hs_list_remove(e, &l->landed, r);
        l->xfer_in -= q->blocks;
        if (hs__dec_join(e, l, r, e->q.now)) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
            return;
        }
        e->pool[r].last_token = last;
    }
}

static void on_net(hs_engine *e)
{
    int64_t tag;
    e->net_seq = 0;
    e->net_time = -1;
    hs_net_advance(e->net, e->q.now);
    while (hs_net_pop_done(e->net, e->q.now, &tag, NULL))
        if (--e->pool[tag].xfer_pending == 0) transfer_done(e, (int32_t)tag);
    net_reschedule(e);
}

/* ---- schedule emission ---- */

static int tgrow(void **p, int32_t *cap, int32_t n, size_t sz)
{
    void *np;
    int32_t nc = *cap ? *cap : 64;
    if (n <= *cap) return 0;
    while (nc < n) nc *= 2;
    if (!(np = realloc(*p, (size_t)nc * sz))) return HS_ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

void hs__trace_preempt(hs_engine *e, hs_lane *l, const hs_req *q)
{
    if (tgrow((void **)&l->trace_pm, &l->cap_trace_pm, l->n_trace_pm + 1, sizeof *l->trace_pm)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return;
    }
    l->trace_pm[l->n_trace_pm++] = q->id;
}

/* Writes the iteration just scheduled: everything, including which requests
 * get their first token or finish, follows from the state at its start. */
static void trace_iter(hs_engine *e, hs_lane *l)
{
    hs_sched_iter *t = &e->trace_it;
    int32_t n = l->n_dec + l->it.n_chunks;
    t->replica = l->replica;
    t->start = l->it.start;
    t->end = l->it.end;
    t->kv_blocks_used = l->blocks_total - l->blocks_free;
    t->n_pre = t->n_dec = t->n_first = t->n_finished = 0;
    if (tgrow((void **)&t->pre, &e->cap_tpre, l->it.n_chunks, sizeof *t->pre) ||
        tgrow((void **)&t->dec, &e->cap_tdec, l->n_dec, sizeof *t->dec) ||
        tgrow((void **)&t->first, &e->cap_tfirst, n, sizeof *t->first) ||
        tgrow((void **)&t->finished, &e->cap_tfin, n, sizeof *t->finished)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return;
    }
    for (int32_t k = 0; k < l->it.n_chunks; k++) {
        const hs_req *q = hs_req_at(e, l->it.chunks[k].req);
        int32_t len = l->it.chunks[k].len;
        t->pre[t->n_pre++] = (hs_sched_chunk){q->id, len, q->prefilled, q->prefill_len};
        /* encoding an encoder-decoder query yields no token */
        if (q->prefilled + len == q->prefill_len && (!e->replicas[l->replica].encdec || q->gen > 0)) {
            if (q->first_token < 0) t->first[t->n_first++] = q->id;
            if (q->gen + 1 >= q->output) t->finished[t->n_finished++] = q->id;
        }
    }
    if (l->it.decode)
        for (int32_t r = l->running.head; r >= 0; r = e->pool[r].next) {
            const hs_req *q = &e->pool[r];
            t->dec[t->n_dec++] = (hs_sched_dec){q->id, (int32_t)(q->kv0 + (l->g - q->g0) + 1)};
            if (q->first_token < 0) t->first[t->n_first++] = q->id;
            if (q->finish_step == l->g + 1) t->finished[t->n_finished++] = q->id;
        }
    t->preempted = l->trace_pm;
    t->n_preempted = l->n_trace_pm;
    hs_sched_write_iter(e->trace, t);
    t->preempted = NULL;
    l->n_trace_pm = 0;
}

/* Starts the lane's next iteration if its policy has work.  Stages are
 * reserved FIFO: an iteration enters stage s when it has left stage s-1
 * and the stage has finished the previous lane's micro-batch. */
static void try_start(hs_engine *e, hs_lane *l)
{
    hs_replica *rp = &e->replicas[l->replica];
    double in;
    if (l->busy) return;
    if (l->landed.head >= 0) join_landed(e, l);
    /* Requests preempted here are readmitted before new hand-overs take
     * the blocks (vLLM serves its preempted queue first). */
    if (l->incoming.head >= 0 && l->waiting.head < 0) admit_incoming(e, l);
    memset(&l->it.shape, 0, sizeof l->it.shape);
    l->it.decode = 0;
    l->it.n_chunks = 0;
    if (!e->policy->schedule(e, l)) return;
    /* The engine's host work (schedule, prepare inputs; hs_perf_step_ns)
     * runs in the driver, which is also the first stage's rank: it holds
     * stage 0 before the stage's kernels, so micro-batches of a pipeline
     * queue for it one at a time (vLLM's virtual engines share one driver),
     * as the planners' estimators charge it to the first stage. */
    in = (double)e->q.now;
    for (int s = 0; s < rp->perf.pp; s++) {
        double start = (in > rp->stage_free[s] ? in : rp->stage_free[s]) +
                       (s == 0 ? hs_perf_step_ns(&rp->perf, &l->it.shape) : 0);
        double end = start + (rp->stage_ns ? rp->stage_ns(e, l, s)
                                           : hs_perf_stage_ns(&rp->perf, s, &l->it.shape));
        rp->stage_free[s] = end;
        /* activations of the tokens going through: decoder tokens, and
         * prompt tokens on their way through the encoder layers */
        in = end + (s + 1 < rp->perf.pp
                        ? hs_perf_send_ns(&rp->perf, s, l->it.shape.tokens +
                                                            (rp->enc_layers ? l->it.shape.enc_tokens : 0))
                        : 0);
    }
    l->it.start = e->q.now;
    l->it.end = (hs_ns)ceil(in);
    if (l->it.end <= e->q.now) l->it.end = e->q.now + 1;
    l->ff_k = 1;
    if (e->trace && hs_sched_wants(e->trace, l->replica)) trace_iter(e, l);
    else if (e->cfg.fast_forward && !e->trace && l->it.decode && l->it.n_chunks == 0 && rp->perf.pp == 1 &&
        !e->policy->complete && l->waiting.len == 0 && l->prefilling.len == 0 && l->n_dec > 0 &&
        l->incoming.len == 0 && l->landed.len == 0 && l->it.shape.enc_tokens == 0)
        l->it.end = ff_extend(e, l, rp, l->it.end);
    l->busy = 1;
    l->iters++;
    e->iterations++;
    if (!(l->ff_seq = hs_evq_push(&e->q, l->it.end, HS_PRIO_COMPLETE, EV_ITER_END, l->id, 0)))
        hs__engine_fail(e, HS_ENOMEM, "out of memory queueing an iteration's end");
}

static int on_arrival(hs_engine *e)
{
    const hs_arrival *a = &e->pending;
    int32_t r = pool_get(e);
    hs_req *q;
    hs_replica *rp;
    hs_lane *l;
    if (r < 0) return HS_ENOMEM;
    q = &e->pool[r];
    memset(q, 0, sizeof *q);
    q->id = a->id;
    q->arrival = a->arrival;
    q->prompt = a->prompt;
    q->output = a->output;
    q->prefill_len = a->prompt;
    q->first_sched = q->first_token = -1;
    q->prev = q->next = q->heap_idx = -1;
    q->src_lane = -1;
    q->state = HS_REQ_WAITING;
    e->arrivals++;
    e->prompt_tokens_seen += a->prompt;
    /* The context limit truncates generation, as vLLM stops at
     * max_model_len; a prompt that alone reaches it is rejected. */
    if (q->prompt < e->max_model_len && q->prompt + q->output > e->max_model_len) {
        q->output = e->max_model_len - q->prompt;
        e->truncated++;
    }
    /* Encoder-decoder: the decoder's window bounds the output, as the
     * encoder's bounds the prompt (checked below). */
    if (e->replicas[0].encdec && q->output > e->replicas[0].window) {
        q->output = e->replicas[0].window;
        e->truncated++;
    }
    r = (int32_t)(q - e->pool);
    rp = &e->replicas[route(e, q)];
    l = pick_lane(rp);
    q->replica = rp->id;
    q->lane = l->id;
    l->out_reqs++;
    l->out_tokens += q->prompt;
    e->load_req[rp->id]++;
    e->load_tok[rp->id] += q->prompt;
    hs_list_push_back(e, &l->waiting, r);
    if (e->trace && hs_sched_wants(e->trace, rp->id)) {
        hs_sched_request sr = {rp->id, q->id, q->arrival, q->prompt, q->output};
        hs_sched_write_request(e->trace, &sr);
    }
    if (q->prompt >= e->max_model_len) {
        hs_lane_drop(e, l, r, "prompt reaches the context limit");
        return 0;
    }
    if (rp->encdec && q->prompt > rp->window) {
        hs_lane_drop(e, l, r, "prompt longer than the encoder's window");
        return 0;
    }
    if (l->busy && l->ff_k > 1) ff_truncate(e, l, e->q.now);
    hs_engine_kick(e, l);
    return 0;
}

static int next_arrival(hs_engine *e, hs_err *err)
{
    int rc = hs_source_next(e->src, &e->pending, err);
    if (rc < 0) return rc;
    if (rc == 0) return 0;
    if (e->pending.arrival < e->q.now)
        return hs_errf(err, HS_ESTATE, "workload: request %lld arrives before the previous one",
                       (long long)e->pending.id);
    if (!hs_evq_push(&e->q, e->pending.arrival, HS_PRIO_ARRIVAL, EV_ARRIVAL, e->pending.id, 0))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    return 0;
}

int hs_engine_audit(hs_engine *e)
{
    for (int32_t i = 0; i < e->n_lanes; i++)
        if (!hs_lane_sane(e, e->lanes[i])) return 0;
    return 1;
}

int hs_engine_run(hs_engine *e, hs_err *err)
{
    hs_event ev;
    int rc;
    /* A message present when a callback fails was written during the run
     * (the sink names its own errors), so start from a clean buffer. */
    hs_err_clear(err);
    if ((rc = next_arrival(e, err))) return rc;
    if (e->sample && e->sample_period > 0 && e->sample_next <= 0) e->sample_next = e->sample_period;
    while (hs_evq_pop(&e->q, &ev)) {
        hs_lane *l;
        /* Samples see the state at their instant: every event up to it is
         * handled, none after it. */
        while (e->sample && e->sample_period > 0 && ev.time > e->sample_next) {
            if ((rc = e->sample(e->sample_ctx, e, e->sample_next))) return rc;
            e->sample_next += e->sample_period;
        }
        switch (ev.type) {
        case EV_ARRIVAL:
            if ((rc = on_arrival(e))) return hs_errf(err, rc, "out of memory for requests");
            if ((rc = next_arrival(e, err))) return rc;
            break;
        case EV_KICK:
            l = e->lanes[ev.a];
            l->kick = 0;
            try_start(e, l);
            break;
        case EV_NET:
            on_net(e);
            break;
        case EV_ITER_END:
            l = e->lanes[ev.a];
            l->busy_ns += e->q.now - l->it.start;
            if (e->policy->complete) e->policy->complete(e, l);
            else if (l->ff_k > 1) ff_complete(e, l);
            else hs_lane_complete(e, l);
            l->busy = 0;
            try_start(e, l);
            break;
        default:
            assert(0);
        }
        if (e->fatal) {
            /* a sink names its own errors in the caller's buffer */
            if (err && err->code == e->fatal && err->msg[0]) return e->fatal;
            return hs_errf(err, e->fatal, "simulation stopped: %s",
                           e->fatal_err.msg[0] ? e->fatal_err.msg : hs_strerror(e->fatal));
        }
        if (e->progress && (e->q.popped & 0xFFFF) == 0) e->progress(e->progress_ctx, e);
        if (e->cfg.audit && !hs_engine_audit(e))
            return hs_errf(err, HS_ESTATE, "invariant violated at t=%lld ns (KV or decode-set books)",
                           (long long)e->q.now);
    }
    e->end_time = e->q.now;
    if (e->arrivals != e->completed + e->dropped)
        return hs_errf(err, HS_ESTATE, "%lld of %lld requests never finished (a policy stalled)",
                       (long long)(e->arrivals - e->completed - e->dropped),
                       (long long)e->arrivals);
    return 0;
}
