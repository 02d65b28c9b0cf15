/* workload_int.h - private interfaces shared by the workload/ files.
 *
 * Not part of the public API: only the sim/workload sources and tests/test_workload.c
 * include it.  Cross-file names use the hs__ prefix (STYLE.md #2).
 *
 * Files:
 *   workload.c  configuration table, presets, validation, hs_source dispatch
 *   csv.c       streaming CSV trace reader (Azure 2023/2024, ShareGPT stats CSV),
 *               timestamp parsing, pair tables for length resampling
 *   sharegpt.c  ShareGPT JSON conversations -> (prompt, output) pairs
 *   synth.c     arrival processes and length distributions
 *   stats.c     hs_trace_stats_compute / hs_trace_stats_print */
#ifndef HS_WORKLOAD_INT_H
#define HS_WORKLOAD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gsl/gsl_rng.h>

#include "workload/workload.h"

/* Token counts above this are rejected as absurd (no model has such a context). */
#define HS__TOKENS_ABSURD 10000000

/* Arrival times (ns after the trace's first row) above this are errors: 200
 * years, leaving over 90 years of int64 ns headroom for the run itself. */
#define HS__ARRIVAL_MAX_NS (INT64_C(200) * 36525 * 864 * 1000000000)

/* ---- timestamps (csv.c) ------------------------------------------------ */

/* Days since 1970-01-01 of the proleptic Gregorian date y-m-d (Howard
 * Hinnant's days_from_civil); exact for any int32 year.  m in 1..12. */
int64_t hs__days_from_civil(int64_t y, int m, int d);

/* Parses "YYYY-MM-DD HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM|+HHMM]" ('T' also
 * accepted as the separator; fraction digits beyond 9 are truncated) into
 * absolute ns since the Unix epoch, UTC.  Integer arithmetic only, no libc
 * time functions, so the result never depends on the host's time zone.
 * Times outside [1970-01-01, 2262-04-11] UTC (int64 ns) are rejected.
 * Returns 0, or -1 with *why set to a static description. */
int hs__parse_timestamp(const char *s, size_t len, hs_ns *out, const char **why);

/* ---- line reader (csv.c) ----------------------------------------------- */

/* Reads a text file line by line through one reusable getline() buffer, so
 * memory stays O(longest line) whatever the file size.  Strips "\n" and
 * "\r\n", skips blank lines, counts physical lines from 1. */
typedef struct hs__lines {
    FILE *fp;
    char *buf;
    size_t cap;
    long line;          /* physical line number of the last line returned */
    const char *path;   /* for messages; not owned */
} hs__lines;

int hs__lines_open(hs__lines *l, const char *path, hs_err *err);
/* 1: *line points into the buffer (valid until the next call), *len set;
 * 0: end of file; <0: HS_EIO. */
int hs__lines_next(hs__lines *l, char **line, size_t *len, hs_err *err);
void hs__lines_close(hs__lines *l);

/* ---- CSV trace rows (csv.c) -------------------------------------------- */

typedef enum hs__csvfmt {
    HS__CSV_ANY = 0,     /* accept either (length resampling) */
    HS__CSV_AZURE,       /* TIMESTAMP,ContextTokens,GeneratedTokens */
    HS__CSV_SHAREGPT     /* num_prefill_tokens,num_decode_tokens[,...] */
} hs__csvfmt;

#define HS__CSV_MAXCOLS 32

/* One CSV trace being read.  Invariant: timestamps of returned rows are
 * non-decreasing (checked, HS_EPARSE otherwise). */
typedef struct hs__csv {
    hs__lines lines;
    hs__csvfmt fmt;          /* detected from the header */
    int ncols;               /* columns in the header; every row must match */
    int col_ts, col_prompt, col_output;  /* column indices; col_ts -1 for sharegpt */
    int32_t max_prompt;      /* 0: no limit; larger prompts are errors */
    int have_prev;
    hs_ns prev_ts;           /* ns since epoch of the previous row */
    int64_t rows;            /* data rows returned */
    int64_t clamped;         /* token counts of 0 raised to 1 */
} hs__csv;

typedef struct hs__row {
    hs_ns ts;        /* ns since the Unix epoch (azure), 0 otherwise */
    int32_t prompt;  /* tokens, >= 1 */
    int32_t output;  /* tokens, >= 1 */
    long line;
} hs__row;

/* Opens path and reads its header; want != ANY requires that format. */
int hs__csv_open(hs__csv *c, const char *path, hs__csvfmt want,
                 int32_t max_prompt, hs_err *err);
/* 1 and *row, 0 at end of file, or HS_EPARSE/HS_EIO ("path:LINE: what"). */
int hs__csv_next(hs__csv *c, hs__row *row, hs_err *err);
void hs__csv_close(hs__csv *c);

/* ---- (prompt, output) pair tables (csv.c, sharegpt.c) ------------------ */

typedef struct hs__pair { int32_t prompt, output; } hs__pair;

typedef struct hs__pairs {
    hs__pair *v;
    size_t n, cap;
    int64_t clamped;   /* token counts raised from 0 to 1 while loading */
    int64_t skipped;   /* JSON: conversations without a human->gpt exchange */
} hs__pairs;

int hs__pairs_push(hs__pairs *p, int32_t prompt, int32_t output, hs_err *err);
void hs__pairs_free(hs__pairs *p);
/* Loads every pair of an Azure or ShareGPT-stats CSV (format from the header). */
int hs__pairs_load_csv(hs__pairs *p, const char *path, int32_t max_prompt,
                       hs_err *err);
/* Loads a ShareGPT conversations JSON file (sharegpt.c). */
int hs__pairs_load_json(hs__pairs *p, const char *path, int32_t max_prompt,
                        hs_err *err);
/* Token estimate for a text of `bytes` UTF-8 bytes: max(1, round(bytes/4)). */
int64_t hs__tokens_estimate(size_t bytes);

/* ---- arrival processes and length distributions (synth.c) -------------- */

typedef enum hs__arrkind { HS__ARR_POISSON, HS__ARR_GAMMA, HS__ARR_CONSTANT } hs__arrkind;

typedef struct hs__arrivals {
    hs__arrkind kind;
    double rate;        /* requests/s before time_scale */
    double shape, scale;/* gamma: shape 1/cv^2, scale cv^2/rate (s) */
    double time_scale;
    int64_t n;          /* arrivals drawn so far */
    hs_ns t;            /* last arrival, ns */
} hs__arrivals;

/* Returns 0 or an error naming the field ("workload.rate: ..."). */
int hs__arrivals_init(hs__arrivals *a, const hs_workload_cfg *cfg, hs_err *err);
/* The first arrival is at 0; later ones add one gap each. Non-decreasing. */
hs_ns hs__arrivals_next(hs__arrivals *a, gsl_rng *r);

typedef enum hs__lenkind {
    HS__LEN_FIXED, HS__LEN_UNIFORM, HS__LEN_NORMAL, HS__LEN_LOGNORMAL, HS__LEN_TRACE
} hs__lenkind;

typedef struct hs__lengen {
    hs__lenkind kind;
    double mean, std;       /* normal: of the underlying normal, tokens */
    double mu, sigma;       /* lognormal: of log(length) */
    int32_t lo, hi;         /* inclusive bounds after max_prompt, tokens */
    int32_t fixed;          /* fixed value */
} hs__lengen;

/* side is "prompt" or "output" for messages; cap is max_prompt (0: none). */
int hs__lengen_init(hs__lengen *g, const hs_lendist *d, const char *side,
                    int32_t cap, hs_err *err);
int32_t hs__lengen_draw(const hs__lengen *g, gsl_rng *r);

/* Maximum tries of the truncated normal before clamping (keeps a mean far
 * outside [min,max] from looping forever). */
#define HS__NORMAL_TRIES 1000

/* Lognormal (mu, sigma) of the lengths whose mean and p99 are given. */
int hs__lognormal_fit_mean_p99(double mean, double p99, double *mu, double *sigma);

/* ---- source internals (workload.c) ------------------------------------- */

/* Token counts of 0 raised to 1 so far (0 occurs in some public traces; a
 * request always carries at least one prompt token and yields one token). */
int64_t hs__source_clamped(const hs_source *s);

#endif
