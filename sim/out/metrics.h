/* metrics.h - per-run latency metrics with vLLM `bench serve` names.
 *
 * Latencies go into log-bucketed histograms (relative resolution better than
 * 0.1%), so memory is O(1) in the number of requests; means are exact (kept
 * as sums).  ITL is fed per decode iteration with a weight (the batch size),
 * so it costs O(1) per iteration, never per token.
 *
 * Definitions (all per finished, non-dropped request):
 *   ttft  = first_token - arrival
 *   tpot  = (finish - first_token) / (output - 1), only for output > 1
 *   e2el  = finish - arrival
 *   queue = first_sched - arrival
 *   itl   = every inter-token interval of every request
 * A request meets the SLO when ttft <= slo.ttft, tpot <= slo.tpot and
 * e2el <= slo.e2el (a target of 0 is ignored).  goodput is SLO-meeting
 * requests per second of makespan (first arrival to last finish);
 * slo_attainment is their fraction of all arrivals (dropped count as missed). */
#ifndef HS_METRICS_H
#define HS_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "core/time.h"
#include "serve/sink.h"

typedef struct hs_hist hs_hist;

/* A histogram of non-negative int64 values (ns). */
hs_hist *hs_hist_create(void);
void hs_hist_destroy(hs_hist *h);
void hs_hist_add(hs_hist *h, int64_t v, int64_t weight);
int64_t hs_hist_count(const hs_hist *h);
double hs_hist_mean(const hs_hist *h);
/* q in [0,100]; returns the value at that percentile (nearest rank, within
 * the bucket resolution), 0 when empty. */
double hs_hist_percentile(const hs_hist *h, double q);
double hs_hist_max(const hs_hist *h);

typedef struct hs_slo {
    double ttft_ms, tpot_ms, e2el_ms;  /* 0: no target */
} hs_slo;

typedef struct hs_metrics hs_metrics;

hs_metrics *hs_metrics_create(const hs_slo *slo);
void hs_metrics_destroy(hs_metrics *m);
void hs_metrics_request(hs_metrics *m, const hs_req_record *r);
void hs_metrics_itl(hs_metrics *m, hs_ns interval, int64_t count);
/* 1 when r meets m's SLO (same rule as the summary). */
int hs_metrics_slo_met(const hs_metrics *m, const hs_req_record *r);

typedef struct hs_metric_value {
    char name[40];   /* e.g. "ttft_p99_ms", "request_throughput" */
    double value;
} hs_metric_value;

/* Computes the summary into out (caller array of cap entries); returns the
 * number written.  cost_per_hour is the deployment's $/h (0 when unknown).
 * Names: completed, dropped, duration_s, request_throughput (req/s),
 * input_token_throughput, output_token_throughput, total_token_throughput
 * (tok/s), {ttft,tpot,itl,e2el,queue}_{mean,p50,p90,p95,p99}_ms,
 * goodput (req/s), slo_attainment (0..1), preemptions, cost_per_hour,
 * tokens_per_dollar (output tokens per $). */
int hs_metrics_summary(const hs_metrics *m, double cost_per_hour,
                       hs_metric_value *out, int cap);

/* Prints the summary as an aligned table (the `hetsim run` display). */
void hs_metrics_print(const hs_metric_value *v, int n, FILE *fp);

#endif
