/* fingerprint.h - `hetsim-exec fingerprint`: iServe's fingerprints measured
 * on this device (the model reduced to 1 and 2 hidden layers, one request
 * alone at batch 1), as rows of the fingerprint file that `hetsim iserve
 * --fingerprints DIR` reads (format in sim/plan/iserve.h):
 *
 *   model,layers,tp,pp,wq,kv_bits,prune,prompt,output,latency_ms,mem_gib
 *
 * How: for each layer count K and output length O, a one-request schedule
 * (a prefill of P tokens, then O - 1 decoding steps) whose header says the
 * model has K layers is replayed (replay.h) with a real paged KV cache;
 * latency_ms is the sum of the iterations' measured times (embedding, the K
 * layers, LM head; no TP collectives, which a single device cannot run),
 * mem_gib the bytes the executor allocated for it (weights of the K layers,
 * embedding and head, KV pool, activations) times tp (every rank holds a
 * shard of the same size).  Rows are written for pp = 1 only: one device
 * cannot hold a pipeline, and the iServe estimator then folds the pipeline
 * activation term into the others (A_pp = 0).  On the CPU backend the
 * numbers are fp32 OpenBLAS timings: the method runs end to end anywhere,
 * the figures mean something on a GPU. */
#ifndef HS_EXEC_FINGERPRINT_H
#define HS_EXEC_FINGERPRINT_H

#include <stdio.h>

#include "exec.h"

#define HS_EXEC_FP_MAX 8

typedef struct hs_exec_fp_opts {
    const char *model;          /* name (models/) */
    int tp;                     /* shapes of one rank of this TP degree */
    int bits;                   /* weight bits: 16, 8, 4 */
    int kv_bits;                /* 16 (the executor's cache is 16-bit) */
    int prompt;                 /* tokens */
    int outputs[HS_EXEC_FP_MAX], n_outputs;   /* at least two distinct */
    int layers[HS_EXEC_FP_MAX], n_layers;     /* default 1 and 2 */
    int repeats;                /* median of this many timed runs per iteration */
    int quiet;
} hs_exec_fp_opts;

/* Measures every (layers, output) pair on x and writes the header and one
 * row each to out.  Errors (one line): HS_EINVAL (options), the model's
 * or the replay's errors. */
int hs_exec_fingerprint(const hs_exec_fp_opts *o, hs_exec *x, FILE *out, hs_err *err);

#endif
