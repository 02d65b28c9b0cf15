/* runtime.h - the serving runtime's state: requests, lanes, replicas.
 *
 * A replica is one model instance on a set of GPUs with a parallel layout.
 * It runs `pp` lanes (virtual engines): each lane has its own
 * scheduler state and an equal share of the KV blocks, and lanes' iterations
 * flow through the shared pipeline stages in FIFO order, so micro-batches of
 * different lanes overlap.  With pp = 1 a replica has one lane.
 *
 * The decode set of a lane is kept as aggregates so that a decode iteration
 * costs O(1) plus O(log n) per completion, never O(batch):
 *   - step counter g (decode iterations done); a request that joined at g0
 *     with gen0 tokens generated and kv0 tokens cached has, at g,
 *     gen = gen0 + (g - g0) and kv = kv0 + (g - g0);
 *   - finish heap keyed by finish_step = g0 + output - gen0 (then id);
 *   - sum_kv = sum of kv over the set (attention context);
 *   - bucket[k]: members that need a fresh KV block when g % bs == k, i.e.
 *     whose kv is a multiple of the block size at that step:
 *     k = (g0 - kv0) mod bs.
 * Invariants (docs/INVARIANTS.md): INV-KV blocks_free + blocks held by the
 * lane's requests == blocks_total and 0 <= blocks_free (hs_lane_sane);
 * INV-DEC n_dec == size of the finish heap == length of `running`. */
#ifndef HS_RUNTIME_H
#define HS_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/conf.h"
#include "core/evq.h"
#include "core/time.h"
#include "perf/perf.h"
#include "serve/sink.h"

enum hs_req_state {
    HS_REQ_FREE = 0,
    HS_REQ_WAITING,    /* in a lane's waiting queue */
    HS_REQ_PREFILL,    /* admitted, prompt (partly) not yet processed */
    HS_REQ_DECODE,     /* in the decode set */
    HS_REQ_STATIC,     /* in a policy's fixed batch, outside the decode set */
    HS_REQ_INCOMING,   /* prefilled elsewhere, waiting for KV blocks here */
    HS_REQ_XFER        /* its KV is on the way from the prefill replica */
};

/* Replica roles.  Arrivals go to colocated and prefill replicas; a request
 * prefilled on a prefill replica moves, KV and all, to a decode replica. */
enum hs_role { HS_ROLE_COLOCATED = 0, HS_ROLE_PREFILL, HS_ROLE_DECODE };

typedef struct hs_req {
    int64_t id;
    hs_ns arrival, first_sched, first_token;
    int32_t prompt;       /* tokens */
    int32_t gen;          /* tokens generated (outside the decode set) */
    int32_t prefill_len;  /* tokens to prefill in this admission */
    int32_t prefilled;    /* of prefill_len, done */
    int32_t blocks;       /* KV blocks held (outside the decode set) */
    int32_t replica, lane;
    int32_t preemptions;
    int32_t state;
    int32_t prev, next;   /* list links (pool indices, -1 = none) */
    int32_t heap_idx;     /* position in the lane's finish heap */
    int64_t g0;           /* decode set: step counter at join */
    int32_t gen0, kv0;    /* decode set: gen and kv at join */
    int64_t finish_step;  /* decode set: g at which it is done */
    hs_ns last_token;     /* time of its latest token (for joiners' ITL) */
    /* disaggregation: while its KV moves from the prefill replica */
    int32_t src_lane;     /* lane still holding its prefill KV, -1 none */
    int32_t src_blocks;   /* blocks held there */
    int32_t xfer_pending; /* flows not yet delivered */
    int32_t proj_tokens;  /* encoder-decoder: encoder output received, whose
                             cross-attention KV its first step projects */
} hs_req;

typedef struct hs_list {
    int32_t head, tail, len;
} hs_list;

struct hs_lane;
struct hs_engine;
struct hs_engine_cfg;
struct hs_replica;
struct hs_deploy;
struct hs_model;
struct hs_cluster;

/* A policy's options: a block laid out by its `opts` schema, copied by
 * value (the run configuration keeps one per registered policy). */
#define HS_POLICY_OPTS_MAX 128
typedef union hs_popts {
    max_align_t align;
    unsigned char b[HS_POLICY_OPTS_MAX];
} hs_popts;

/* What a policy's replica hook sees: the deployment the replicas were
 * built from and the models behind them (all read-only, valid during the
 * call). */
typedef struct hs_policy_env {
    const struct hs_deploy *deploy;
    const struct hs_model *model;
    const struct hs_cluster *cluster;
    const struct hs_engine_cfg *engine;
    const hs_perf_cfg *perf;
    const void *opts;     /* the policy's options */
    int active;           /* 1: the policy runs these replicas; 0: only sets
                             up what the deployment needs (hetsim plan) */
} hs_policy_env;

/* A runtime policy: how a lane composes iterations; a plug-in under
 * sim/policy/<name>/ with one line in the registry (policy/policy.c).
 *
 * `schedule` fills lane->it and returns 1 when an iteration should run, 0
 * when idle; it may admit, preempt and drop through the lane mechanisms
 * below.  `complete` applies the finished iteration (NULL:
 * hs_lane_complete).  Hooks may be NULL where documented.  Policies see
 * requests' prompts and progress, never their true output length (hs_req
 * has none; hs_req_done is the end-of-sequence signal a real runtime sees).
 *
 * State and ownership:
 *   - options: `opts` declares the policy's configuration keys (an
 *     engine.* key each, shared by the policies that declare the same key)
 *     over a block of `opts_size` <= HS_POLICY_OPTS_MAX bytes; the engine
 *     keeps a copy, read with hs_engine_popts;
 *   - per lane: `lane_bytes` of zeroed memory in lane->pstate, allocated
 *     and freed by the engine; `lane_free` releases what the policy hung
 *     on it (NULL: nothing);
 *   - per replica: `replicas_setup` may hang state on rp->pstate with its
 *     destructor in rp->pfree; the replica owns it from then on
 *     (hs_replicas_free calls pfree). */
typedef struct hs_policy_ops {
    const char *name;
    const char *help;
    int (*schedule)(struct hs_engine *e, struct hs_lane *l);
    void (*complete)(struct hs_engine *e, struct hs_lane *l);
    const hs_field *opts;
    size_t opts_size;
    size_t lane_bytes;
    void (*lane_free)(struct hs_lane *l);
    /* Most tokens one forward pass can hold, which sizes the latency tables
     * and the activation memory (NULL: engine.max_batched_tokens). */
    int64_t (*pass_tokens)(const struct hs_engine_cfg *c, const void *opts, int32_t max_model_len);
    /* Per-replica state, after hs_replicas_build and before the engine is
     * created; may raise rp[i].kv_blocks and price (devices it adds).
     * Errors name the replica. */
    int (*replicas_setup)(struct hs_replica *rp, int32_t n, const hs_policy_env *env, hs_err *err);
    /* Time of stage s for lane l's iteration in l->it, ns (NULL:
     * hs_perf_stage_ns on it.shape). */
    double (*stage_ns)(struct hs_engine *e, struct hs_lane *l, int s);
    /* Prints the policy's run statistics (NULL: none). */
    void (*report)(FILE *fp, const struct hs_replica *rp, int32_t n);
    /* 1: a policy with its own `complete` that still hands prefilled
     * requests over (via hs_lane_complete) on disaggregated replicas. */
    int disagg;
    /* 1: runs encoder-decoder models (lane.c's encoding passes: whole
     * prompts, no token until the first decoding step). */
    int encdec;
    /* 1: prefills every prompt in one pass, so a pass must hold the longest
     * context (engine.max_batched_tokens >= the context limit). */
    int whole_prompts;
    /* 1: cuts prompts into chunks (a policy to suggest when whole prompts
     * do not fit a pass). */
    int chunks;
    /* 1: offloads attention heads to attention workers: the policy whose
     * replicas_setup sets up a deployment's attention workers. */
    int attn_offload;
} hs_policy_ops;

/* A router: which replica an arrival goes to.  `pick` returns a replica
 * index for which hs_router_admits holds (hs_engine_create made sure there
 * is one); it is called once per arrival, before the request is counted in
 * e->load_req and e->load_tok.  A router sees what a real one knows at
 * arrival: the engine's per-replica load (e->load_req, e->load_tok), the
 * replicas' weights and roles, the request's prompt; never its true output
 * length.  It must be deterministic (ties to the lowest index).  State it
 * keeps lives in e->rstate: `state_bytes` (NULL: none) gives its size once
 * the replicas and their weights are set, and the engine owns the block
 * (hs_engine_create allocates it zeroed, hs_engine_destroy frees it), so it
 * must be plain data that starts at zero. */
typedef struct hs_router_ops {
    const char *name;
    const char *help;
    int32_t (*pick)(struct hs_engine *e, const hs_req *q);
    size_t (*state_bytes)(const struct hs_engine *e);
} hs_router_ops;

/* The router registry (route.c), NULL-terminated; adding a router touches
 * its file and one line of hs_routers[]. */
extern const hs_router_ops *const hs_routers[];
/* By name; NULL when unknown. */
const hs_router_ops *hs_router_find(const char *name);
/* 1 when replica i takes arrivals: colocated or prefill, weight > 0. */
int hs_router_admits(const struct hs_engine *e, int32_t i);

/* One prefill chunk of an iteration. */
typedef struct hs_chunk {
    int32_t req;          /* pool index */
    int32_t len;          /* tokens of this chunk */
} hs_chunk;

/* The iteration being executed by a lane. */
typedef struct hs_iter {
    hs_batch_shape shape;
    int decode;           /* 1: the decode set steps in this iteration */
    int32_t n_chunks;
    hs_chunk *chunks;     /* [cap_chunks] */
    hs_ns start, end;
} hs_iter;

typedef struct hs_lane {
    int32_t id, replica;
    hs_list waiting, prefilling, running;
    /* decode set */
    int32_t n_dec;
    int64_t g;
    int64_t sum_kv;
    int32_t *heap;        /* finish heap of pool indices */
    int32_t *bucket;      /* [block_size] */
    int32_t *joiners;     /* joined since the last decode step */
    int32_t n_joiners, cap_joiners;
    int32_t n_old;        /* members that were in the last decode step */
    hs_ns last_dec_end;
    /* KV blocks */
    int64_t blocks_total, blocks_free, watermark;
    int64_t xfer_out;     /* blocks held for KV being sent to a decode replica */
    int64_t xfer_in;      /* blocks reserved for KV being received */
    int64_t fin_gen, fin_n; /* outputs finished here: tokens, requests (the
                               decode admission's horizon, handover.c) */
    hs_list incoming;     /* prefilled elsewhere: waiting for admission here or,
                             admitted, their KV in transfer (handover.c) */
    hs_list landed;       /* KV arrived, joining the decode set at the next step */
    hs_list leaving;      /* prefill replica: prompts done this iteration, handed
                             over by the engine once the iteration is applied */
    int64_t reserved;     /* blocks held by the policy, not by requests (static slots) */
    /* load seen by the router (known at arrival: counts and prompts only) */
    int64_t out_reqs, out_tokens;
    /* execution */
    int busy, kick;
    hs_iter it;
    /* Fast-forward: the iteration in flight stands for ff_k identical
     * decode-only steps (1 normally); ff_seq is its ITER_END event. */
    int32_t ff_k;
    uint64_t ff_seq;
    int32_t cap_chunks, heap_cap;
    void *pstate;         /* the policy's lane state (lane_bytes, engine-owned) */
    /* counters */
    int64_t iters, preemptions;
    hs_ns busy_ns;        /* ns spent in finished iterations (utilisation samples) */
    /* schedule emission: ids preempted since the lane's last iteration */
    int64_t *trace_pm;
    int32_t n_trace_pm, cap_trace_pm;
} hs_lane;

typedef struct hs_replica {
    int32_t id;
    char role[16];
    int role_kind;                 /* enum hs_role */
    double kv_bytes_token_layer;   /* all KV heads, bytes per token per layer */
    int encdec;                    /* encoder-decoder model: prompts are encoded
                                      (no token), tokens come from decoding steps */
    double enc_out_bytes_token;    /* encoder output per prompt token, bytes */
    int32_t window;                /* encoder-decoder: most tokens per side
                                      (prompt in, output out): max_seq_len */
    int32_t dec_layers, enc_layers;/* held by the stages in all */
    hs_layout layout;
    hs_perf perf;
    int32_t n_lanes;
    hs_lane *lanes;
    double stage_free[HS_MAX_PP];  /* ns, when each stage is next free */
    int64_t kv_blocks;             /* whole replica */
    double weight;                 /* routing weight */
    double price_per_hour;
    double *kv_route;              /* prefill: KV weight per replica (deploy.h), or NULL */
    int32_t n_kv_route;
    /* A policy's per-replica state (replicas_setup; NULL: none), owned by
     * the replica and freed by hs_replicas_free through pfree. */
    void *pstate;
    void (*pfree)(struct hs_replica *rp);
} hs_replica;

/* Engine configuration ("engine.*" keys). */
typedef struct hs_engine_cfg {
    int block_size;          /* tokens per KV block */
    int max_num_seqs;        /* sequences per lane */
    int max_batched_tokens;  /* tokens per iteration (0: max(2048, context), hs_engine_pass_tokens) */
    double watermark;        /* fraction of blocks kept free at admission */
    double gpu_mem_util;     /* fraction of GPU memory the runtime may use */
    int max_model_len;       /* tokens (0: the model's context window) */
    int kv_bits;             /* 16 or 8 */
    int audit;               /* 1: check invariants after every event (tests) */
    int fast_forward;        /* 1: runs of decode-only steps in one event */
    int prefill_lanes;       /* lanes per stage of prefill replicas */
    int max_pending_mb;      /* MiB for requests in flight, at HS_REQ_BYTES each */
} hs_engine_cfg;

/* Memory budget of one request in flight, bytes: its pool slot (hs_req and
 * its output length) and the pool's doubling slack; measured RSS growth is
 * about 225 bytes per pending request (README, Limits).  A run whose
 * requests in flight would exceed max_pending_mb stops with HS_ERANGE. */
#define HS_REQ_BYTES 256

void hs_engine_cfg_defaults(hs_engine_cfg *c);
/* Largest forward pass the latency tables are built for (8 MB per stage). */
#define HS_MAX_PASS_TOKENS (1 << 20)

/* Fills c->max_batched_tokens when 0 (max(context, 2048)) and returns the
 * most tokens one forward pass of policy p with options opts (NULL: its
 * defaults) can hold, or -1 when that exceeds HS_MAX_PASS_TOKENS. */
int hs_engine_pass_tokens(hs_engine_cfg *c, const hs_policy_ops *p, const void *opts,
                          int32_t max_model_len);
/* p's default options into o. */
void hs_policy_opts_defaults(const hs_policy_ops *p, hs_popts *o);
extern const hs_field hs_engine_cfg_fields[];

/* Lane mechanisms used by policies (lane.c). */
void hs_list_push_back(struct hs_engine *e, hs_list *l, int32_t r);
void hs_list_push_front(struct hs_engine *e, hs_list *l, int32_t r);
void hs_list_remove(struct hs_engine *e, hs_list *l, int32_t r);
hs_req *hs_req_at(struct hs_engine *e, int32_t r);
/* The end-of-sequence signal: 1 when request r stops once it has `gen`
 * tokens (a real runtime sees the EOS token; the simulator knows the
 * trace's output length, which policies never read). */
int hs_req_done(const struct hs_engine *e, int32_t r, int32_t gen);
int32_t hs_blocks_for(const struct hs_engine *e, int64_t tokens);
/* Appends a prefill chunk to the iteration (grows the chunk array). */
int hs_iter_add_chunk(struct hs_engine *e, hs_lane *l, int32_t r, int32_t len);
/* Moves waiting request r to prefilling and allocates its prompt blocks. */
void hs_lane_admit(struct hs_engine *e, hs_lane *l, int32_t r);
/* Drops waiting request r when it could never be admitted on this lane
 * (more blocks than the lane has, or longer than max_tokens when that is
 * not 0); returns 1 when dropped. */
int hs_lane_drop_if_never_fits(struct hs_engine *e, hs_lane *l, int32_t r, int32_t max_tokens);
/* Drops a waiting request that can never be served. */
void hs_lane_drop(struct hs_engine *e, hs_lane *l, int32_t r, const char *why);
/* Evicts r (a decode member or an admitted prefill) back to the head of
 * the waiting queue, dropping its KV (recompute preemption). */
void hs_lane_preempt(struct hs_engine *e, hs_lane *l, int32_t r);
/* Reserves the blocks the decode set needs for the next step, preempting
 * (recompute) the latest-admitted members while short.  Returns 0, or -1
 * when even an empty set cannot provide them (never with a sane config). */
int hs_lane_reserve_decode(struct hs_engine *e, hs_lane *l);
/* Fills it.shape's decode fields from the aggregates. */
void hs_lane_decode_shape(struct hs_engine *e, hs_lane *l);

/* Stops the run from inside a callback (a policy hook, a scheduling or
 * completion step) that cannot return an error: the first failure wins and
 * keeps its code and message (e->fatal, e->fatal_err); later ones are
 * dropped, as they are usually its consequences.  hs_engine_run reports it
 * as "simulation stopped: <message>". */
void hs__engine_fail(struct hs_engine *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Continuous batching's admission, shared by the policies that batch whole
 * prompts: moves
 * waiting requests FCFS into this iteration as prefill chunks while the lane
 * stays within max_num_seqs sequences, max_tok tokens in the pass, the
 * watermark, and max_new prompts (0: no cap); a request that could never
 * fit is dropped.  `veto` (may be NULL) is asked last about each candidate:
 * HS_ADMIT_OK admits it (the veto may count it), HS_ADMIT_STOP ends the
 * batch, HS_ADMIT_DROP drops it.  Returns the number admitted, or -1 with
 * e->fatal set. */
enum { HS_ADMIT_OK = 0, HS_ADMIT_STOP, HS_ADMIT_DROP };
typedef int (*hs_admit_veto)(void *ctx, struct hs_engine *e, hs_lane *l, int32_t r, const char **why);
int32_t hs_lane_admit_fcfs(struct hs_engine *e, hs_lane *l, int32_t max_tok, int32_t max_new,
                           hs_admit_veto veto, void *ctx);
/* Continuous batching's decode half: reserves the blocks of the next step (preempting the
 * latest-admitted members while short) and sets the step up.  Returns 1
 * when a step is set up, 0 when nothing decodes (all of it preempted, or
 * nothing to begin with), -1 with e->fatal set. */
int hs_lane_decode_setup(struct hs_engine *e, hs_lane *l);
/* Continuous batching's whole iteration (the default policy's, shared by the
 * policies built on it): whole prompts admitted FCFS as above (max_new,
 * veto) take the iteration; otherwise the decode set steps.  A decode step
 * that preempted everything gives admission a second chance (one sequence
 * outgrew the lane).  Returns 1 when an iteration is set up, 0 when idle
 * (or e->fatal set). */
int hs_lane_continuous(struct hs_engine *e, hs_lane *l, int32_t max_new, hs_admit_veto veto, void *ctx);
/* Forms a fixed batch (static batching, outside the decode set): moves up
 * to `want` requests from the head of the waiting queue to `running`
 * (state HS_REQ_STATIC, first scheduled now), their pool indices into
 * *reqs (grown to *cap; the policy owns it), and sets *max_prompt.
 * Returns how many were taken, or -1 with e->fatal set (out of memory). */
int32_t hs_lane_batch_take(struct hs_engine *e, hs_lane *l, int32_t want, int32_t **reqs, int32_t *cap,
                           int32_t *max_prompt);
/* A fixed batch's tokens (static batching, outside the decode set): each
 * of reqs[0..alive) now has `gen` tokens (gen <= 0: none yet, as after an
 * encoding pass), the first stamped at t; those whose sequence ends at gen
 * (hs_req_done) leave `running` and finish at t in their order in reqs,
 * the others keep their order at the front.  Returns how many remain. */
int32_t hs_lane_batch_tokens(struct hs_engine *e, hs_lane *l, int32_t *reqs, int32_t alive, int32_t gen, hs_ns t);
/* A fixed batch (static batching, DeepSpeed-Inference's micro-batches):
 * taken at once, prompts padded to the longest, run to its longest output
 * with nothing admitted meanwhile; finished requests leave at their own
 * last token but keep their slot. */
typedef struct hs_fixed_batch {
    int active, prefill;       /* a batch is running; in its prompt pass */
    int32_t n, max_prompt;
    /* unpadded: the prompt pass runs its GEMMs on the prompts' own
     * sum_prompt tokens (FasterTransformer's GPT with remove_padding); its
     * attention, the cache and the decode steps stay padded to
     * max_prompt.  0: every prompt padded. */
    int unpadded;
    int64_t sum_prompt;
    int32_t alive;             /* of reqs[0..n), the first `alive` are still generating */
    int64_t step;              /* decode steps done */
    int32_t *reqs, cap;        /* the unfinished first (hs_lane_batch_tokens) */
    hs_ns last_end;            /* end of the previous iteration */
} hs_fixed_batch;
/* The shape of n of b's sequences in b's current phase, into s (zeroed
 * first): the prompt pass (or encoding) of n x max_prompt tokens (the
 * GEMMs on b's own prompt tokens when b->unpadded, which needs n == b->n),
 * or a decode step of n slots at the padded context (l->it.decode set). */
void hs_fixed_shape(struct hs_engine *e, hs_lane *l, const hs_fixed_batch *b, int32_t n, hs_batch_shape *s);
/* b's iteration ended at t: the prompt pass is over or one more step is
 * decoded (inter-token gap to the sink), every live slot has its token and
 * finished requests leave.  Returns 1 when the last one has (b->active
 * cleared; the policy releases the slots), else 0. */
int hs_fixed_step(struct hs_engine *e, hs_lane *l, hs_fixed_batch *b, hs_ns t);
/* Default completion: decode step, chunk progress, joins, finishes. */
void hs_lane_complete(struct hs_engine *e, hs_lane *l);
/* Finishes a request (record to the sink, frees its slot). */
void hs_lane_finish(struct hs_engine *e, hs_lane *l, int32_t r, hs_ns t);
/* Joins r, whose KV is cached (prefill_len tokens, blocks held), to l's
 * decode set at t (lane.c). */
int hs__dec_join(struct hs_engine *e, hs_lane *l, int32_t r, hs_ns t);
/* Notes a preemption for the schedule file (trace.c). */
void hs__trace_preempt(struct hs_engine *e, hs_lane *l, const hs_req *q);
/* 1 when the lane's invariants hold (for assert and the audit). */
int hs_lane_sane(struct hs_engine *e, const hs_lane *l);

#endif
