/* workload.h - request sources: trace readers and synthetic generators.
 *
 * A source yields arrivals one at a time in non-decreasing arrival order
 * (the simulator keeps one pending arrival in its queue, so memory is
 * O(requests in flight), never O(trace)).  Readers stream their file; no
 * reader loads a whole trace into memory except the length-resampling
 * generator, which keeps only the (prompt, output) pairs it samples from.
 *
 * Kinds (hs_workload_cfg.kind):
 *   "azure"         Azure LLM inference trace CSV, 2023 and 2024 timestamp forms
 *   "sharegpt-json" public ShareGPT conversations JSON (token counts estimated)
 *   "sharegpt-csv"  length-statistics CSV (num_prefill_tokens,num_decode_tokens,...)
 *   "synthetic"     arrival process x length distributions, or a preset
 * Sources without arrival times (ShareGPT, synthetic) draw arrivals from the
 * arrival process (arrival/rate/cv).  All randomness comes from one gsl_rng
 * seeded from cfg->seed, so a source is deterministic for a seed. */
#ifndef HS_WORKLOAD_H
#define HS_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>

#include "core/conf.h"
#include "core/err.h"
#include "core/time.h"

typedef struct hs_arrival {
    int64_t id;        /* 0, 1, 2 ... in arrival order */
    hs_ns arrival;     /* ns since the start of the workload (first kept request at its offset from window start) */
    int32_t prompt;    /* tokens, >= 1 */
    int32_t output;    /* tokens to generate, >= 1 */
} hs_arrival;

/* Length distribution of one side (prompt or output). */
typedef struct hs_lendist {
    char kind[16];     /* "fixed", "uniform", "normal" (truncated to [min,max]), "lognormal", "trace" */
    double mean;       /* tokens (fixed value for "fixed") */
    double std;        /* tokens */
    double min, max;   /* tokens, inclusive bounds */
} hs_lendist;

typedef struct hs_workload_cfg {
    char kind[24];         /* see above */
    char path[1024];       /* file for trace kinds and for lengths "trace" resampling */
    char preset[16];       /* synthetic presets: "azure-conv" (default run), "azure-code", "S","T","G","C1","C2" (ExeGPT Table 3), "" */
    char arrival[16];      /* "poisson", "gamma", "constant" */
    double rate;           /* requests/s for generated arrivals */
    double cv;             /* coefficient of variation of gaps, for "gamma" */
    hs_lendist prompt, output;
    int64_t max_requests;  /* 0: no limit */
    double duration;       /* s, synthetic: stop generating after this (0: only max_requests) */
    double window_start;   /* s, trace kinds: skip requests before start + this offset */
    double window_end;     /* s, trace kinds: stop at this offset from the first request (0: none) */
    double time_scale;     /* arrival times are multiplied by 1/time_scale: 2 = twice the rate */
    int32_t max_prompt;    /* clamp/validate: tokens beyond this are an error (0: no limit) */
    int32_t fit_context;   /* > 0: a prompt whose prompt + output exceeds this is
                              shortened to fit, keeping the output (Vidur's rule);
                              an output that alone fills it keeps one prompt token */
    uint64_t seed;
} hs_workload_cfg;

typedef struct hs_source hs_source;

/* Fills cfg with defaults: synthetic, preset "azure-conv", seed 1. */
void hs_workload_defaults(hs_workload_cfg *cfg);

/* Applies a JSON object (the "workload" section of a run config). */
int hs_workload_conf(hs_workload_cfg *cfg, const cJSON *json, const char *where,
                     hs_err *err);
/* Applies one --set style key (e.g. "rate", "prompt.mean", "kind"). */
int hs_workload_set(hs_workload_cfg *cfg, const char *key, const char *value,
                    hs_err *err);

/* Opens a source.  Validates the configuration (errors name the field). */
int hs_source_open(hs_source **out, const hs_workload_cfg *cfg, hs_err *err);

/* A source replaying the caller's arrivals (kept, not copied; they must
 * outlive the source); ids are reassigned 0, 1, 2 ... */
int hs_source_open_array(hs_source **out, const hs_arrival *list, int64_t n, hs_err *err);

/* Next arrival: returns 1 and fills *a, 0 at the end, or a negative HS_E*
 * code with err naming "file:line: problem" for malformed input (bad CSV
 * line, negative or absurd token counts, timestamps going backwards). */
int hs_source_next(hs_source *s, hs_arrival *a, hs_err *err);

/* destroy(NULL) is a no-op. */
void hs_source_close(hs_source *s);

/* Summary of a trace (hetsim trace stats): count, duration, rate, gap CV,
 * prompt/output mean, median, p90, p99, max.  Reads the whole source. */
typedef struct hs_trace_stats {
    int64_t count;
    double duration_s, rate, gap_cv, max_gap_s;
    double prompt_mean, prompt_p50, prompt_p90, prompt_p99, prompt_max;
    double output_mean, output_p50, output_p90, output_p99, output_max;
} hs_trace_stats;

int hs_trace_stats_compute(hs_source *s, hs_trace_stats *st, hs_err *err);
void hs_trace_stats_print(const hs_trace_stats *st, FILE *fp);

#endif
