/* engine.c - the engine's life cycle and event loop: configuration,
 * create/destroy, arrivals, kicks, the start of an iteration (its pipeline
 * timing) and its end; see engine.h.  The loop is small on purpose:
 * everything a policy decides lives in policy/, everything a lane keeps
 * lives in lane.c, and the rest of the engine is beside it (engine_int.h):
 * the router registry and lane choice in route.c (the routers themselves in
 * routers.c), fast-forward in fastforward.c, the disaggregated KV hand-over
 * and the network event in handover.c, schedule and timeline emission in
 * trace.c.
 *
 * Invariants: INV-1 the clock never goes back (evq); at most one arrival is
 * queued, and the source's arrivals never go back in time (next_arrival
 * fails otherwise); a busy lane has its ITER_END queued, a lane with kick
 * set its KICK; INV-CONS arrivals == completed + dropped when the run
 * returns 0; with engine.audit, INV-KV and INV-DEC after every event
 * (hs_engine_audit). */
#include "serve/engine_int.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hs_field hs_engine_cfg_fields[] = {
    HS_FIELD_NUM(hs_engine_cfg, block_size, HS_F_INT, 0, 16, 1, 1024, "tokens per KV block"),
    HS_FIELD_NUM(hs_engine_cfg, max_num_seqs, HS_F_INT, 0, 256, 1, 65536, "sequences per lane"),
    HS_FIELD_NUM(hs_engine_cfg, max_batched_tokens, HS_F_INT, 0, 0, 0, 1 << 20, "tokens per iteration (0: max(2048, context))"),
    HS_FIELD_NUM(hs_engine_cfg, watermark, HS_F_DOUBLE, 0, 0.01, 0, 0.5, "fraction of KV blocks kept free at admission"),
    HS_FIELD_NUM(hs_engine_cfg, gpu_mem_util, HS_F_DOUBLE, 0, 0.9, 0.05, 1, "fraction of GPU memory used"),
    HS_FIELD_NUM(hs_engine_cfg, max_model_len, HS_F_INT, 0, 0, 0, 1 << 24, "context limit, tokens (0: model's)"),
    HS_FIELD_NUM(hs_engine_cfg, kv_bits, HS_F_INT, 0, 16, 8, 16, "KV cache bits (16 or 8)"),
    HS_FIELD_NUM(hs_engine_cfg, audit, HS_F_BOOL, 0, 0, 0, 1, "check invariants after every event"),
    HS_FIELD_NUM(hs_engine_cfg, fast_forward, HS_F_BOOL, 0, 1, 0, 1, "simulate runs of decode-only steps in one event"),
    HS_FIELD_NUM(hs_engine_cfg, prefill_lanes, HS_F_INT, 0, 1, 1, 8, "lanes per stage of prefill replicas (batches in flight per stage)"),
    /* the bound keeps the pool's int32 capacity from overflowing (2^30 slots) */
    HS_FIELD_NUM(hs_engine_cfg, max_pending_mb, HS_F_INT, 0, 4096, 1, 262144, "MiB for requests in flight (256 bytes each); more stops the run with an error"),
    {0},
};

void hs_engine_cfg_defaults(hs_engine_cfg *c)
{
    hs_conf_defaults(c, hs_engine_cfg_fields);
}

void hs_policy_opts_defaults(const hs_policy_ops *p, hs_popts *o)
{
    memset(o, 0, sizeof *o);
    assert(p->opts_size <= sizeof *o); /* the registry's test checks every policy */
    if (p->opts) hs_conf_defaults(o->b, p->opts);
}

int hs_engine_pass_tokens(hs_engine_cfg *c, const hs_policy_ops *p, const void *opts,
                          int32_t max_model_len)
{
    int64_t t;
    hs_popts def;
    if (!opts) {
        hs_policy_opts_defaults(p, &def);
        opts = def.b;
    }
    if (!c->max_batched_tokens) c->max_batched_tokens = max_model_len > 2048 ? max_model_len : 2048;
    t = p->pass_tokens ? p->pass_tokens(c, opts, max_model_len) : c->max_batched_tokens;
    /* A decode step holds one token per running sequence, whatever the
     * prefill budget. */
    if (t < c->max_num_seqs) t = c->max_num_seqs;
    return t > HS_MAX_PASS_TOKENS ? -1 : (int)t;
}

/* Sets up lane id of replica `replica` with `blocks` KV blocks; 0 or
 * HS_ENOMEM (hs_engine_destroy frees what it allocated). */
static int lane_init(hs_engine *e, hs_lane *l, int32_t id, int32_t replica,
                     int64_t blocks)
{
    memset(l, 0, sizeof *l);
    l->id = id;
    l->replica = replica;
    l->waiting = l->prefilling = l->running = l->incoming = l->landed = l->leaving = (hs_list){-1, -1, 0};
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
        if (l->pstate && e->policy->lane_free) e->policy->lane_free(l);
        free(l->pstate);
    }
    for (int32_t i = 0; i < e->n_replicas; i++) {
        free(e->replicas[i].lanes);
        e->replicas[i].lanes = NULL;
        e->replicas[i].n_lanes = 0;
    }
    hs_net_destroy(e->net);
    free(e->lanes);
    free(e->pool);
    free(e->eos);
    free(e->rstate);
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
                     const hs_policy_ops *policy, const void *popts, const hs_router_ops *router,
                     hs_replica *replicas, int32_t n_replicas, hs_source *src,
                     const hs_sink *sink, int32_t max_model_len,
                     const hs_cluster *cluster, hs_err *err)
{
    hs_engine *e;
    int32_t n = 0, n_pre = 0, n_dec = 0;
    size_t n_state;
    int rc;
    *out = NULL;
    if (n_replicas <= 0) return hs_errf(err, HS_EINVAL, "the engine needs at least one replica");
    if (!router) return hs_errf(err, HS_EINVAL, "the engine needs a router");
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
                       "policy %s cannot run disaggregated replicas (see hetsim list policies)", policy->name);
    for (int32_t i = 0; i < n_replicas; i++)
        if (replicas[i].encdec && !policy->encdec)
            return hs_errf(err, HS_EUNSUPPORTED,
                           "policy %s does not run encoder-decoder models (see hetsim list policies)",
                           policy->name);
    if (policy->opts_size > sizeof(hs_popts))
        return hs_errf(err, HS_EINVAL, "policy %s: options of %zu bytes exceed %d", policy->name,
                       policy->opts_size, HS_POLICY_OPTS_MAX);
    e = calloc(1, sizeof *e);
    if (!e) return hs_errf(err, HS_ENOMEM, "out of memory creating the engine");
    e->cfg = *cfg;
    /* callers that fill the struct by hand, not from the schema, leave it 0 */
    if (e->cfg.max_pending_mb <= 0) e->cfg.max_pending_mb = 4096;
    e->policy = policy;
    if (popts) memcpy(e->popts.b, popts, policy->opts_size);
    else hs_policy_opts_defaults(policy, &e->popts);
    e->router = router;
    e->replicas = replicas;
    e->n_replicas = n_replicas;
    e->n_prefill = n_pre;
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
    /* Lanes: one per stage (virtual engines); a prefill replica
     * may run more (engine.prefill_lanes), since its batches do not depend
     * on each other and an open pipeline keeps every stage busy whatever
     * the batches' sizes. */
    for (int32_t i = 0; i < n_replicas; i++)
        n += replicas[i].layout.pp * (replicas[i].role_kind == HS_ROLE_PREFILL ? cfg->prefill_lanes : 1);
    e->lanes = calloc((size_t)n, sizeof *e->lanes);
    e->load_req = calloc((size_t)n_replicas, sizeof *e->load_req);
    e->load_tok = calloc((size_t)n_replicas, sizeof *e->load_tok);
    if (!e->lanes || !e->load_req || !e->load_tok) goto nomem;
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
            if (policy->lane_bytes && !(l->pstate = calloc(1, policy->lane_bytes))) goto nomem;
        }
    }
    /* The router's state, sized once the weights are final. */
    n_state = router->state_bytes ? router->state_bytes(e) : 0;
    if (n_state && !(e->rstate = calloc(1, n_state))) goto nomem;
    *out = e;
    return 0;
nomem:
    hs_engine_destroy(e);
    return hs_errf(err, HS_ENOMEM, "out of memory creating the engine");
}

/* A free request slot (pool index), growing the pool; -1 when out of
 * memory. */
static int32_t pool_get(hs_engine *e)
{
    int32_t r;
    if (e->free_head < 0) {
        int32_t old = e->pool_cap, nc = old ? old * 2 : 1024;
        hs_req *np = realloc(e->pool, (size_t)nc * sizeof *np);
        int32_t *ne;
        if (!np) return -1;
        e->pool = np;
        if (!(ne = realloc(e->eos, (size_t)nc * sizeof *ne))) return -1;
        e->eos = ne;
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

/* Starts the lane's next iteration if its policy has work.  Stages are
 * reserved FIFO: an iteration enters stage s when it has left stage s-1
 * and the stage has finished the previous lane's micro-batch. */
static void try_start(hs_engine *e, hs_lane *l)
{
    hs_replica *rp = &e->replicas[l->replica];
    double in;
    if (l->busy) return;
    if (l->landed.head >= 0) hs__join_landed(e, l);
    /* Requests preempted here are readmitted before new hand-overs take
     * the blocks (a preempted queue is served first). */
    if (l->incoming.head >= 0 && l->waiting.head < 0) hs__admit_incoming(e, l);
    memset(&l->it.shape, 0, sizeof l->it.shape);
    l->it.decode = 0;
    l->it.n_chunks = 0;
    if (!e->policy->schedule(e, l)) return;
    /* The engine's host work (schedule, prepare inputs; hs_perf_step_ns)
     * runs in the driver, which is also the first stage's rank: it holds
     * stage 0 before the stage's kernels, so micro-batches of a pipeline
     * queue for it one at a time (virtual engines share one driver),
     * as the planners' estimators charge it to the first stage. */
    in = (double)e->q.now;
    for (int s = 0; s < rp->perf.pp; s++) {
        double start = (in > rp->stage_free[s] ? in : rp->stage_free[s]) +
                       (s == 0 ? hs_perf_step_ns(&rp->perf, &l->it.shape) : 0);
        double end = start + (e->policy->stage_ns ? e->policy->stage_ns(e, l, s)
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
    if (e->trace && hs_sched_wants(e->trace, l->replica)) hs__trace_iter(e, l);
    else if (hs__ff_eligible(e, l, rp)) l->it.end = hs__ff_extend(e, l, rp, l->it.end);
    l->busy = 1;
    l->iters++;
    e->iterations++;
    if (!(l->ff_seq = hs_evq_push(&e->q, l->it.end, HS_PRIO_COMPLETE, HS__EV_ITER_END, l->id, 0)))
        hs__engine_fail(e, HS_ENOMEM, "out of memory queueing an iteration's end");
}

/* ARRIVAL: e->pending becomes a request, routed to a lane's waiting queue
 * (or dropped when it can never be served); HS_ENOMEM when no slot. */
static int on_arrival(hs_engine *e)
{
    const hs_arrival *a = &e->pending;
    int32_t r;
    hs_req *q;
    hs_replica *rp;
    hs_lane *l;
    int32_t to, *out;
    /* checked before the pool grows, so an overloaded run stops with a
     * clear error rather than exhausting the host's memory */
    if ((e->arrivals - e->completed - e->dropped + 1) * HS_REQ_BYTES >
        (int64_t)e->cfg.max_pending_mb << 20)
        return HS_ERANGE;
    if ((r = pool_get(e)) < 0) return HS_ENOMEM;
    q = &e->pool[r];
    out = &e->eos[r];
    memset(q, 0, sizeof *q);
    q->id = a->id;
    q->arrival = a->arrival;
    q->prompt = a->prompt;
    *out = a->output;
    q->prefill_len = a->prompt;
    q->first_sched = q->first_token = -1;
    q->prev = q->next = q->heap_idx = -1;
    q->src_lane = -1;
    q->state = HS_REQ_WAITING;
    e->arrivals++;
    e->prompt_tokens_seen += a->prompt;
    /* The context limit truncates generation, as serving engines stop at
     * max_model_len; a prompt that alone reaches it is rejected. */
    if (q->prompt < e->max_model_len && q->prompt + *out > e->max_model_len) {
        *out = e->max_model_len - q->prompt;
        e->truncated++;
    }
    /* Encoder-decoder: the decoder's window bounds the output, as the
     * encoder's bounds the prompt (checked below). */
    if (e->replicas[0].encdec && *out > e->replicas[0].window) {
        *out = e->replicas[0].window;
        e->truncated++;
    }
    r = (int32_t)(q - e->pool);
    to = e->router->pick(e, q);
    assert(to >= 0 && to < e->n_replicas && hs_router_admits(e, to)); /* the router contract */
    rp = &e->replicas[to];
    l = hs__pick_lane(rp);
    q->replica = rp->id;
    q->lane = l->id;
    l->out_reqs++;
    l->out_tokens += q->prompt;
    e->load_req[rp->id]++;
    e->load_tok[rp->id] += q->prompt;
    hs_list_push_back(e, &l->waiting, r);
    if (e->trace && hs_sched_wants(e->trace, rp->id)) hs__trace_request(e, q);
    if (q->prompt >= e->max_model_len) {
        hs_lane_drop(e, l, r, "prompt reaches the context limit");
        return 0;
    }
    if (rp->encdec && q->prompt > rp->window) {
        hs_lane_drop(e, l, r, "prompt longer than the encoder's window");
        return 0;
    }
    if (l->busy && l->ff_k > 1) hs__ff_truncate(e, l, e->q.now);
    hs_engine_kick(e, l);
    return 0;
}

/* Queues the source's next arrival, if any; 0, or the source's error,
 * HS_ESTATE (an arrival earlier than now) or HS_ENOMEM. */
static int next_arrival(hs_engine *e, hs_err *err)
{
    int rc = hs_source_next(e->src, &e->pending, err);
    if (rc < 0) return rc;
    if (rc == 0) return 0;
    if (e->pending.arrival < e->q.now)
        return hs_errf(err, HS_ESTATE, "workload: request %lld arrives before the previous one",
                       (long long)e->pending.id);
    if (!hs_evq_push(&e->q, e->pending.arrival, HS_PRIO_ARRIVAL, HS__EV_ARRIVAL, e->pending.id, 0))
        return hs_errf(err, HS_ENOMEM, "out of memory in the event queue");
    return 0;
}

int hs_engine_audit(hs_engine *e)
{
    for (int32_t i = 0; i < e->n_lanes; i++)
        if (!hs_lane_sane(e, e->lanes[i])) return 0;
    return 1;
}

/* 1 when no lane has an iteration in flight: until the next event the
 * state, and so every sample, is then constant. */
static int all_idle(const hs_engine *e)
{
    for (int32_t i = 0; i < e->n_lanes; i++)
        if (e->lanes[i]->busy) return 0;
    return 1;
}

/* Takes the samples due before an event at time t.  Across an idle gap only
 * the first and the last sample are taken: the ones between would repeat
 * the last one (nothing runs, nothing arrives), and a trace with a gap of
 * years would otherwise write millions of identical rows.  The last one is
 * kept so that the sample after the gap measures the same interval (and
 * utilisation) as without the skip. */
static int sample_until(hs_engine *e, hs_ns t)
{
    int rc;
    while (t > e->sample_next) {
        if ((rc = e->sample(e->sample_ctx, e, e->sample_next))) return rc;
        /* the last multiple of the period before t */
        hs_ns last = e->sample_next + (t - 1 - e->sample_next) / e->sample_period * e->sample_period;
        if (last > e->sample_next + e->sample_period && all_idle(e))
            e->sample_next = last;
        else
            e->sample_next += e->sample_period;
    }
    return 0;
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
        if (e->sample && e->sample_period > 0 && ev.time > e->sample_next &&
            (rc = sample_until(e, ev.time)))
            return rc;
        switch (ev.type) {
        case HS__EV_ARRIVAL:
            if ((rc = on_arrival(e)) == HS_ERANGE)
                return hs_errf(err, rc,
                               "request %lld: %lld requests in flight exceed engine.max_pending_mb "
                               "(%d MiB at %d bytes each); the cluster falls behind the arrivals: "
                               "lower the rate or raise engine.max_pending_mb",
                               (long long)e->pending.id,
                               (long long)(e->arrivals - e->completed - e->dropped),
                               e->cfg.max_pending_mb, HS_REQ_BYTES);
            if (rc) return hs_errf(err, rc, "out of memory for requests");
            if ((rc = next_arrival(e, err))) return rc;
            break;
        case HS__EV_KICK:
            l = e->lanes[ev.a];
            l->kick = 0;
            try_start(e, l);
            break;
        case HS__EV_NET:
            hs__on_net(e);
            break;
        case HS__EV_ITER_END:
            l = e->lanes[ev.a];
            l->busy_ns += e->q.now - l->it.start;
            /* a fast-forwarded run tells each of its steps (fastforward.c) */
            if (e->tl && l->ff_k == 1) hs__tl_iter(e, l, l->it.start, e->q.now);
            if (e->policy->complete) e->policy->complete(e, l);
            else if (l->ff_k > 1) hs__ff_complete(e, l);
            else hs_lane_complete(e, l);
            /* prompts done on a prefill replica leave for a decode one */
            if (l->leaving.head >= 0) hs__handoff_leaving(e, l);
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

void hs_engine_stats_get(const hs_engine *e, hs_engine_stats *out)
{
    out->now = e->q.now;
    out->end_time = e->end_time;
    out->arrivals = e->arrivals;
    out->completed = e->completed;
    out->dropped = e->dropped;
    out->truncated = e->truncated;
    out->preemptions = e->preemptions;
    out->iterations = e->iterations;
    out->handoffs = e->handoffs;
    out->events = e->q.popped;
}

void hs_engine_replica_load(const hs_engine *e, int32_t i, hs_ns t, hs_replica_load *out)
{
    const hs_replica *r = &e->replicas[i];
    memset(out, 0, sizeof *out);
    out->lanes = r->n_lanes;
    for (int32_t k = 0; k < r->n_lanes; k++) {
        const hs_lane *l = &r->lanes[k];
        out->busy_ns += l->busy_ns + (l->busy && l->it.start < t ? t - l->it.start : 0);
        out->blocks_total += l->blocks_total;
        out->blocks_used += l->blocks_total - l->blocks_free;
        out->running += l->n_dec;
        out->waiting += l->waiting.len;
    }
}

void hs_engine_set_trace(hs_engine *e, hs_sched_writer *w)
{
    e->trace = w;
}

void hs_engine_set_timeline(hs_engine *e, const hs_timeline *tl)
{
    e->tl = tl;
}

void hs_engine_on_progress(hs_engine *e, void (*fn)(void *ctx, const hs_engine *e), void *ctx)
{
    e->progress = fn;
    e->progress_ctx = ctx;
}

void hs_engine_on_sample(hs_engine *e, hs_ns period, int (*fn)(void *ctx, const hs_engine *e, hs_ns t),
                         void *ctx)
{
    e->sample = fn;
    e->sample_ctx = ctx;
    e->sample_period = period > 0 ? period : 1;
    e->sample_next = 0;
}
