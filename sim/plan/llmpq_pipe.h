/* llmpq_pipe.h - the offline pipeline runtime of LLM-PQ, as a discrete-event
 * simulation.
 *
 * Workload: a global batch of B prompts padded to s tokens, each
 * generating exactly n tokens (no EOS; all prompts present at t = 0).
 * One stage per GPU in pipeline order, each holding layers at per-layer
 * bit-widths.  Prefill runs in ceil(B/eta) micro-batches of eta sequences
 * (the last one smaller), decode in ceil(B/xi) micro-batches of xi: the
 * master re-sizes micro-batches between the phases, so decode micro-batch
 * d starts once every sequence in it has its first token.  A micro-batch's
 * hidden states go from stage j to j+1 asynchronously over the link
 * (alpha-beta: latency + bytes / (bandwidth * link_eff), transfers on one
 * link serialised); the last stage sends them back to the first GPU,
 * where the master runs the FP16 LM head and samples (the embeddings and
 * LM head live on the first stage).  Each stage serves its ready work in
 * arrival order (FIFO, non-preemptive), so prefill and decode micro-batches
 * of different sequences overlap as in the paper's runtime.  Decode step t
 * of a micro-batch attends to s + t tokens (its true context, not the
 * planner's s + n/2 average).  Times are int64 ns; events are ordered by
 * (time, seq), so runs are deterministic.
 * Latency = the time the last token is sampled; throughput = B*n/latency. */
#ifndef HS_PQPIPE_H
#define HS_PQPIPE_H

#include "core/err.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "llm/quant.h"
#include "perf/perf.h"

typedef struct hs_pipe_job {
    int ndev;
    int dev[HS_MAX_PP];                 /* cluster GPU ids, pipeline order */
    int nbits[HS_MAX_PP][HS_NBITS];     /* layers of each bit-width per stage */
    int B, s, n;                        /* batch, padded prompt, tokens generated */
    int eta, xi;                        /* prefill / decode micro-batch sizes */
    int kv_bits;
} hs_pipe_job;

typedef struct hs_pipe_result {
    double latency_s;                   /* last token sampled */
    double prefill_s;                   /* last first-token sampled */
    double throughput;                  /* tokens/s = B*n / latency */
    double busy_s[HS_MAX_PP];           /* compute time per stage */
    long long events;
    char latency[1024];                 /* the FP16 layer's sources (hs_qlat_cal_source);
                                           "": the roofline */
} hs_pipe_result;

int hs_pipe_offline(const hs_model *m, const hs_cluster *c, const hs_perf_cfg *pc,
                    const hs_pipe_job *job, hs_pipe_result *res, hs_err *err);

#endif
