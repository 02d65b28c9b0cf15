/* deploy.h - deployments: the planner's output, replayable from JSON.
 *
 * A deployment lists replicas, each with a role, a parallel layout (TP per
 * stage, layers per stage, GPU ids per stage, weight bits) and a routing
 * weight.  hs_replicas_build() turns it into runtime replicas: latency
 * tables per replica and KV blocks from the memory model, failing with one
 * clear line when the model does not fit the chosen GPUs.
 *
 * JSON form:
 *   {"model": "llama-2-70b", "cluster": "a100x16", "planner": "<name>",
 *    "replicas": [{"role": "colocated", "weight": 1, "kv_bits": 16,
 *       "stages": [{"tp": 4, "layers": 80, "bits": 16, "gpus": [0,1,2,3]}]}],
 *    "policy": "<name>", "engine": {"<key>": 52}}      (last two optional)
 * A stage may carry "layer_bits": [16, 4, ...], one width per decoder layer
 * (mixed precision per layer; hs_layout.layer_bits): the engine then times
 * the stage as the sum of its layers at their own widths and sizes its
 * weights the same way ("bits" stays the stage's summary and the width of
 * its encoder layers).
 * A prefill replica may carry "kv_route": [w0, w1, ...], one weight >= 0 per
 * replica of the deployment, positive only toward decode replicas.
 * A replica may carry "latency_scale": f (0.001..1000, default 1): every
 * iteration it runs takes f times what the latency model gives
 * (hs_perf_scale; prefill and decode alike, attention workers too), for a
 * speed measured against the model that it does not price itself (a
 * planner's measured ratio for a weight format, say).
 * A replica may name the kernels its 8/4/3-bit layers run,
 * "quant_kernels": "model" or "lptorch" (perf.quant_kernels, which it
 * overrides for that replica unless the command line sets it): the
 * runtime is part of what was planned.
 *
 * Encoder-decoder models: "layers" counts decoder layers and a stage may
 * add "enc_layers" (encoder layers).  Without enc_layers the encoder is
 * placed by hs_layout_place_enc.  A colocated replica holds the whole
 * model; a prefill (encoder) replica holds the encoder and either no
 * decoder layer (it hands the encoder output over) or all of them (it
 * projects the cross-attention KV and hands that over); a decode replica
 * holds the decoder and no encoder layer. */
#ifndef HS_DEPLOY_H
#define HS_DEPLOY_H

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "serve/runtime.h"

#define HS_LATENCY_SCALE_MIN 1e-3
#define HS_LATENCY_SCALE_MAX 1e3

typedef struct hs_deploy_replica {
    char role[16];
    double weight;
    hs_layout layout;
    /* Prefill replicas only, optional: KV routing weight to each replica
     * of the deployment by index (non-zero only toward decode replicas);
     * the engine picks a hand-over's decode replica by smooth weighted
     * round robin over it.  Owned by the deployment (malloc'd; hs_deploy_add
     * takes ownership, hs_deploy_free frees). */
    double *kv_route;
    int32_t n_kv_route;
    /* Multiplies the replica's iteration times (hs_perf_scale); 0 (a
     * zeroed replica) or 1: as the latency model gives them. */
    double latency_scale;
    /* The kernels its quantised layers run (perf.quant_kernels: "model",
     * "lptorch"); "": the run's perf.quant_kernels. */
    char quant_kernels[16];
} hs_deploy_replica;

/* An attention worker: a GPU that runs only decode attention for the heads
 * dispatched to it, serving one pipeline stage of one replica; the policy
 * that offloads attention (hs_policy_ops.attn_offload) runs it.  JSON:
 * "attention": [{"replica": 0, "stage": 0, "gpu": 8}, ...] beside
 * "replicas"; absent unless the planner places such workers. */
typedef struct hs_deploy_attn {
    int32_t replica, stage, gpu;
} hs_deploy_attn;

typedef struct hs_deploy {
    char model[48];
    char cluster[64];
    char planner[32];
    /* Optional: the runtime policy the plan is meant for and its engine
     * settings (a JSON object of engine.* keys, the policy's own among
     * them, owned).  `hetsim run` applies them over the configuration. */
    char policy[32];
    char *engine;
    char summary[256];   /* optional: the planner's prediction, one line */
    int32_t n;
    hs_deploy_replica *r;
    int32_t n_attn;
    hs_deploy_attn *attn;
} hs_deploy;

/* Frees what the deployment owns (replica arrays, kv_route, engine text,
 * attention workers) and zeroes it; the struct itself is the caller's. */
void hs_deploy_free(hs_deploy *d);
/* Sets the policy and engine settings (engine_json: an object's text or
 * NULL; copied). */
int hs_deploy_set_policy(hs_deploy *d, const char *policy, const char *engine_json, hs_err *err);
/* Appends a replica (copies it). */
int hs_deploy_add(hs_deploy *d, const hs_deploy_replica *r, hs_err *err);
/* Appends an attention worker. */
int hs_deploy_add_attn(hs_deploy *d, const hs_deploy_attn *a, hs_err *err);

/* Checks ids, TP and layer sums against the model and cluster, and that no
 * GPU is used twice.  Errors name the replica and stage. */
int hs_deploy_check(const hs_deploy *d, const hs_model *m, const hs_cluster *c,
                    const char *where, hs_err *err);

int hs_deploy_write(const hs_deploy *d, const char *path, hs_err *err);
/* The JSON text (caller frees with free()). */
char *hs_deploy_to_json(const hs_deploy *d);
/* Reads a deployment JSON into *d (which the caller then owns and frees
 * with hs_deploy_free; on an error nothing is left to free). */
int hs_deploy_read(hs_deploy *d, const char *path, hs_err *err);

/* Places an encoder-decoder model's encoder layers when the layout does
 * not (l->enc_set == 0): none on a decode replica; elsewhere in proportion
 * to the stages' decoder layers (to their GPUs when they hold none), so
 * every GPU holds about E/N encoder and D/N decoder layers (round-robin
 * allocation of both).  Sets l->enc_set. */
void hs_layout_place_enc(hs_layout *l, const hs_model *m, const char *role);

/* KV blocks a layout holds: min over stages and ranks of the memory left
 * after weights and activations, divided by the bytes of one block.
 * Returns < 0 with err set when the weights alone do not fit. */
int64_t hs_layout_kv_blocks(const hs_model *m, const hs_cluster *c,
                            const hs_layout *l, const hs_engine_cfg *ec,
                            int max_tokens, hs_err *err);

/* Builds runtime replicas (array of d->n, caller frees with
 * hs_replicas_free).  max_tokens/max_seqs size the latency tables.
 * Ownership: the array and everything hung on it belong to the caller:
 * each replica's latency tables, KV routing weights, and the state a
 * policy attaches (pstate, freed through pfree by hs_replicas_free).  An
 * engine borrows the array for its lifetime and gives its lanes back at
 * hs_engine_destroy. */
int hs_replicas_build(hs_replica **out, const hs_deploy *d, const hs_model *m,
                      const hs_cluster *c, const hs_engine_cfg *ec,
                      const hs_perf_cfg *pc, int max_tokens, int32_t max_model_len,
                      hs_err *err);
void hs_replicas_free(hs_replica *r, int32_t n);

/* "a100-80g:0,1,2,3|a100-80g:4,5" style description for the replicas table. */
void hs_layout_gpus_str(const hs_layout *l, const hs_cluster *c, char *buf,
                        size_t cap);

#endif
