/* workload.c - workload configuration, presets and the hs_source dispatcher.
 *
 * Configuration is one typed key table (core/conf.h).  The nested length
 * distributions use dotted keys ("prompt.mean"), both in --set form and, after
 * flattening, in JSON ({"prompt": {"mean": ...}}), so every error names the
 * full key.
 *
 * Presets are applied when the "preset" key is set (by hs_workload_set, or
 * first of all keys by hs_workload_conf): they write kind = synthetic, the
 * arrival process and both length distributions; keys set afterwards override
 * them.  Writing cfg->preset directly changes nothing but the label.  A
 * synthetic workload with a preset label and neither max_requests nor
 * duration stops after HS__PRESET_REQUESTS requests.
 *
 * Source invariants: ids are 0, 1, 2 ... in emitted order; arrivals are
 * non-decreasing (the CSV reader rejects timestamps going backwards, the
 * generators only add gaps >= 0); prompt and output are >= 1 tokens; prompt
 * <= max_prompt when set. */
#include "workload/workload_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#define HS__PRESET_REQUESTS 2000

/* ---- configuration table ----------------------------------------------- */

#define NUM(m, t, d, lo, hi, h) HS_FIELD_NUM(hs_workload_cfg, m, t, 0, d, lo, hi, h)
#define STR(m, d, h) HS_FIELD_STR(hs_workload_cfg, m, 0, d, h)
#define SIDE(s)                                                                         \
    STR(s.kind, "fixed", #s " length distribution: fixed, uniform, normal, lognormal, trace"), \
    NUM(s.mean, HS_F_DOUBLE, 1, 0, HS__TOKENS_ABSURD, #s " mean (fixed: the value), tokens"), \
    NUM(s.std, HS_F_DOUBLE, 0, 0, HS__TOKENS_ABSURD, #s " standard deviation, tokens"),       \
    NUM(s.min, HS_F_DOUBLE, 1, 0, HS__TOKENS_ABSURD, #s " lower bound (inclusive), tokens"),  \
    NUM(s.max, HS_F_DOUBLE, 4096, 0, HS__TOKENS_ABSURD, #s " upper bound (inclusive), tokens")

static const hs_field workload_fields[] = {
    STR(kind, "synthetic", "source: azure, sharegpt-json, sharegpt-csv, synthetic"),
    STR(path, NULL, "trace file (trace kinds; synthetic with lengths \"trace\")"),
    STR(preset, NULL, "synthetic preset: azure-conv, azure-code, S, T, G, C1, C2, or empty"),
    STR(arrival, "poisson", "generated arrivals: poisson, gamma, constant"),
    NUM(rate, HS_F_DOUBLE, 1, 0, 1e9, "generated arrival rate, requests/s"),
    NUM(cv, HS_F_DOUBLE, 1, 0, 1e4, "coefficient of variation of gaps (gamma)"),
    NUM(max_requests, HS_F_I64, 0, 0, 1e15, "stop after this many requests (0: no limit)"),
    NUM(duration, HS_F_DOUBLE, 0, 0, 1e9, "generated arrivals: stop at this time, s (0: none)"),
    NUM(window_start, HS_F_DOUBLE, 0, 0, 1e9, "azure: skip requests before this offset, s"),
    NUM(window_end, HS_F_DOUBLE, 0, 0, 1e9, "azure: stop at this offset from the first row, s (0: none)"),
    NUM(time_scale, HS_F_DOUBLE, 1, 1e-6, 1e6, "arrival times are divided by this (2: twice the rate)"),
    NUM(max_prompt, HS_F_INT, 0, 0, HS__TOKENS_ABSURD, "prompts above this are errors (synthetic: clamp), tokens (0: none)"),
    NUM(fit_context, HS_F_INT, 0, 0, HS__TOKENS_ABSURD, "shorten prompts so that prompt + output fits this many tokens, keeping the output (Vidur's rule), 0: off"),
    NUM(seed, HS_F_I64, 1, 0, 9007199254740992.0, "random seed (integer below 2^53)"),
    SIDE(prompt),
    SIDE(output),
    {NULL, HS_F_SKIP, 0, 0, 0, 0, 0, 0, NULL, NULL},
};

/* ---- presets ----------------------------------------------------------- */

/* Azure presets: lognormal lengths fitted to the trace's mean and p99 (the two
 * figures that drive capacity: token throughput and the tail), clamped at the
 * trace's min/max.  ExeGPT presets: Table 3's (avg, std, max) as the
 * parameters of a normal truncated to [1, max]; the paper gives no arrival
 * rate (it measures offline throughput), so 10 requests/s is a documented
 * default to override.  See traces/README.md for the fit figures. */
typedef struct preset_def {
    const char *name, *arrival;
    double rate, cv;
    int lognormal;     /* 1: p[] / o[] are (mean, p99, min, max); 0: (mean, std, min, max) */
    double p[4], o[4];
} preset_def;

static const preset_def presets[] = {
    {"azure-conv", "poisson", 5.53, 1.0, 1, {1154.7, 4142, 1, 14050}, {211.1, 601, 1, 1000}},
    {"azure-code", "gamma", 2.57, 13.15, 1, {2047.8, 7436, 1, 7437}, {27.9, 251, 1, 1899}},
    {"S", "poisson", 10, 1.0, 0, {256, 252, 1, 512}, {32, 13, 1, 80}},
    {"T", "poisson", 10, 1.0, 0, {128, 81, 1, 256}, {128, 68, 1, 320}},
    {"G", "poisson", 10, 1.0, 0, {64, 23, 1, 128}, {192, 93, 1, 480}},
    {"C1", "poisson", 10, 1.0, 0, {256, 115, 1, 512}, {64, 30, 1, 160}},
    {"C2", "poisson", 10, 1.0, 0, {512, 252, 1, 1024}, {256, 134, 1, 640}},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

static const preset_def *preset_find(const char *name)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

static void preset_side(hs_lendist *d, int lognormal, const double v[4])
{
    memset(d, 0, sizeof *d);
    if (lognormal) {
        double mu, sigma = 0;
        if (hs__lognormal_fit_mean_p99(v[0], v[1], &mu, &sigma) != 0)
            sigma = 0; /* unreachable: every (mean, p99) above fits (test_presets) */
        snprintf(d->kind, sizeof d->kind, "lognormal");
        d->mean = v[0];
        d->std = v[0] * sqrt(expm1(sigma * sigma));
    } else {
        snprintf(d->kind, sizeof d->kind, "normal");
        d->mean = v[0];
        d->std = v[1];
    }
    d->min = v[2];
    d->max = v[3];
}

static int apply_preset(hs_workload_cfg *cfg, const char *name, const char *where,
                        hs_err *err)
{
    const preset_def *p;
    if (name[0] == '\0') { /* "no preset": only clears the label */
        cfg->preset[0] = '\0';
        return 0;
    }
    p = preset_find(name);
    if (!p)
        return hs_errf(err, HS_EINVAL,
                       "%s: preset: unknown preset \"%s\" (azure-conv, azure-code, S, T, G, C1, C2)",
                       where, name);
    snprintf(cfg->preset, sizeof cfg->preset, "%s", p->name);
    snprintf(cfg->kind, sizeof cfg->kind, "synthetic");
    snprintf(cfg->arrival, sizeof cfg->arrival, "%s", p->arrival);
    cfg->rate = p->rate;
    cfg->cv = p->cv;
    preset_side(&cfg->prompt, p->lognormal, p->p);
    preset_side(&cfg->output, p->lognormal, p->o);
    return 0;
}

void hs_workload_defaults(hs_workload_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    hs_conf_defaults(cfg, workload_fields);
    apply_preset(cfg, "azure-conv", "workload", NULL);
}

int hs_workload_conf(hs_workload_cfg *cfg, const cJSON *json, const char *where,
                     hs_err *err)
{
    hs_workload_cfg tmp = *cfg; /* no partial update on failure */
    const cJSON *it, *preset;
    cJSON *flat;
    char key[128];
    int rc = 0;

    if (!cJSON_IsObject(json))
        return hs_errf(err, HS_EPARSE, "%s: expected a JSON object", where);
    preset = cJSON_GetObjectItemCaseSensitive(json, "preset");
    if (preset) {
        if (!cJSON_IsString(preset))
            return hs_errf(err, HS_EPARSE, "%s: preset: expected a string", where);
        if ((rc = apply_preset(&tmp, preset->valuestring, where, err)) != 0) return rc;
    }
    /* Flatten {"prompt": {"mean": 5}} to {"prompt.mean": 5} for the table. */
    flat = cJSON_CreateObject();
    if (!flat) return hs_errf(err, HS_ENOMEM, "%s: out of memory", where);
    cJSON_ArrayForEach(it, json) {
        if (strcmp(it->string, "preset") == 0) continue;
        if (strcmp(it->string, "prompt") == 0 || strcmp(it->string, "output") == 0) {
            const cJSON *sub;
            if (!cJSON_IsObject(it)) {
                rc = hs_errf(err, HS_EPARSE, "%s: %s: expected an object with kind, mean, std, min, max",
                             where, it->string);
                goto done;
            }
            cJSON_ArrayForEach(sub, it) {
                cJSON *dup = cJSON_Duplicate(sub, 1);
                snprintf(key, sizeof key, "%s.%s", it->string, sub->string);
                if (!dup || !cJSON_AddItemToObject(flat, key, dup)) {
                    cJSON_Delete(dup);
                    rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", where);
                    goto done;
                }
            }
        } else {
            cJSON *dup = cJSON_Duplicate(it, 1);
            if (!dup || !cJSON_AddItemToObject(flat, it->string, dup)) {
                cJSON_Delete(dup);
                rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", where);
                goto done;
            }
        }
    }
    rc = hs_conf_fill(&tmp, workload_fields, flat, where, err);
    if (rc == 0) *cfg = tmp;
done:
    cJSON_Delete(flat);
    return rc;
}

int hs_workload_set(hs_workload_cfg *cfg, const char *key, const char *value,
                    hs_err *err)
{
    if (strcmp(key, "preset") == 0) return apply_preset(cfg, value, "workload", err);
    return hs_conf_set(cfg, workload_fields, key, value, "workload", err);
}

/* ---- sources ----------------------------------------------------------- */

typedef enum srckind { SRC_AZURE, SRC_SHAREGPT_CSV, SRC_SHAREGPT_JSON, SRC_SYNTHETIC, SRC_ARRAY } srckind;

struct hs_source {
    srckind kind;
    hs_workload_cfg cfg;
    gsl_rng *rng;            /* NULL for azure (no randomness) */
    hs__arrivals arr;        /* generated arrivals (all kinds but azure) */
    hs__lengen plen, olen;   /* synthetic lengths */
    hs__csv csv;             /* azure, sharegpt-csv */
    int csv_open;
    hs__pairs pairs;         /* sharegpt-json (in order), synthetic "trace" (resampled) */
    size_t next_pair;
    int64_t emitted;         /* == next id */
    int64_t limit;           /* max requests to emit (INT64_MAX: none) */
    hs_ns duration;          /* generated arrivals stop at this time (0: none) */
    hs_ns first_ts;          /* azure: ns since epoch of the trace's first row */
    int have_first;
    hs_ns win_start, win_end;/* azure: offsets from the first row, ns (win_end 0: none) */
    int done, failed;
    const hs_arrival *list;  /* SRC_ARRAY: caller's arrivals, not owned */
    int64_t n_list;
};

static int kind_of(const char *k, srckind *out)
{
    if (strcmp(k, "azure") == 0) *out = SRC_AZURE;
    else if (strcmp(k, "sharegpt-csv") == 0) *out = SRC_SHAREGPT_CSV;
    else if (strcmp(k, "sharegpt-json") == 0) *out = SRC_SHAREGPT_JSON;
    else if (strcmp(k, "synthetic") == 0) *out = SRC_SYNTHETIC;
    else return -1;
    return 0;
}

/* Checks that depend only on cfg, before anything is opened. */
static int validate(const hs_workload_cfg *c, srckind kind, hs_err *err)
{
    int trace_lens = strcmp(c->prompt.kind, "trace") == 0 || strcmp(c->output.kind, "trace") == 0;
    if (!(c->time_scale > 0) || !isfinite(c->time_scale))
        return hs_errf(err, HS_ERANGE, "workload.time_scale: must be > 0 (got %g)", c->time_scale);
    if (c->max_requests < 0)
        return hs_errf(err, HS_ERANGE, "workload.max_requests: must be >= 0");
    if (c->max_prompt < 0)
        return hs_errf(err, HS_ERANGE, "workload.max_prompt: must be >= 0");
    if (!(c->duration >= 0) || !isfinite(c->duration))
        return hs_errf(err, HS_ERANGE, "workload.duration: must be >= 0 s (got %g)", c->duration);
    if (c->preset[0] && !preset_find(c->preset))
        return hs_errf(err, HS_EINVAL, "workload.preset: unknown preset \"%s\"", c->preset);
    if (kind == SRC_AZURE) {
        if (c->duration > 0)
            return hs_errf(err, HS_EINVAL,
                           "workload.duration: applies to generated arrivals; use window_end for kind azure");
        if (!(c->window_start >= 0) || !isfinite(c->window_start))
            return hs_errf(err, HS_ERANGE, "workload.window_start: must be >= 0 s");
        if (!(c->window_end >= 0) || !isfinite(c->window_end))
            return hs_errf(err, HS_ERANGE, "workload.window_end: must be >= 0 s");
        if (c->window_end > 0 && c->window_end <= c->window_start)
            return hs_errf(err, HS_ERANGE,
                           "workload.window_end: %g s must be greater than window_start %g s",
                           c->window_end, c->window_start);
    } else {
        if (c->window_start != 0 || c->window_end != 0)
            return hs_errf(err, HS_EINVAL, "workload.%s: applies only to kind azure (timestamped traces)",
                           c->window_start != 0 ? "window_start" : "window_end");
    }
    if (kind == SRC_SYNTHETIC && trace_lens && strcmp(c->prompt.kind, c->output.kind) != 0)
        return hs_errf(err, HS_EINVAL,
                       "workload.%s.kind: must also be \"trace\" (prompt and output are resampled as pairs)",
                       strcmp(c->prompt.kind, "trace") == 0 ? "output" : "prompt");
    if (kind != SRC_SYNTHETIC || trace_lens) {
        if (c->path[0] == '\0')
            return hs_errf(err, HS_EINVAL, "workload.path: required for %s%s",
                           kind == SRC_SYNTHETIC ? "lengths " : "kind ",
                           kind == SRC_SYNTHETIC ? "\"trace\"" : c->kind);
    } else if (c->path[0] != '\0') {
        return hs_errf(err, HS_EINVAL,
                       "workload.path: \"%s\" is unused by kind synthetic (set prompt.kind and output.kind to \"trace\" to resample it)",
                       c->path);
    }
    if (kind == SRC_SYNTHETIC && c->max_requests == 0 && c->duration == 0 && c->preset[0] == '\0')
        return hs_errf(err, HS_EINVAL,
                       "workload.max_requests: a synthetic workload needs max_requests or duration (both are 0)");
    return 0;
}

int hs_source_open(hs_source **out, const hs_workload_cfg *cfg, hs_err *err)
{
    hs_source *s;
    srckind kind;
    int rc;

    *out = NULL;
    if (kind_of(cfg->kind, &kind) < 0)
        return hs_errf(err, HS_EINVAL,
                       "workload.kind: unknown kind \"%s\" (azure, sharegpt-json, sharegpt-csv, synthetic)",
                       cfg->kind);
    if ((rc = validate(cfg, kind, err)) != 0) return rc;
    s = calloc(1, sizeof *s);
    if (!s) return hs_errf(err, HS_ENOMEM, "workload: out of memory");
    s->kind = kind;
    s->cfg = *cfg;
    s->limit = cfg->max_requests > 0 ? cfg->max_requests : INT64_MAX;
    s->duration = cfg->duration > 0 ? hs_ns_from_s(cfg->duration) : 0;

    if (kind != SRC_AZURE) {
        if ((rc = hs__arrivals_init(&s->arr, cfg, err)) != 0) goto fail;
        s->rng = gsl_rng_alloc(gsl_rng_mt19937);
        if (!s->rng) {
            rc = hs_errf(err, HS_ENOMEM, "workload: out of memory for the random generator");
            goto fail;
        }
        gsl_rng_set(s->rng, (unsigned long)cfg->seed);
    }
    switch (kind) {
    case SRC_AZURE:
        s->win_start = hs_ns_from_s(cfg->window_start);
        s->win_end = cfg->window_end > 0 ? hs_ns_from_s(cfg->window_end) : 0;
        rc = hs__csv_open(&s->csv, cfg->path, HS__CSV_AZURE, cfg->max_prompt, err);
        if (rc) goto fail;
        s->csv_open = 1;
        break;
    case SRC_SHAREGPT_CSV:
        rc = hs__csv_open(&s->csv, cfg->path, HS__CSV_SHAREGPT, cfg->max_prompt, err);
        if (rc) goto fail;
        s->csv_open = 1;
        break;
    case SRC_SHAREGPT_JSON:
        if ((rc = hs__pairs_load_json(&s->pairs, cfg->path, cfg->max_prompt, err)) != 0) goto fail;
        break;
    case SRC_SYNTHETIC:
        if ((rc = hs__lengen_init(&s->plen, &cfg->prompt, "prompt", cfg->max_prompt, err)) != 0 ||
            (rc = hs__lengen_init(&s->olen, &cfg->output, "output", 0, err)) != 0)
            goto fail;
        if (s->plen.kind == HS__LEN_TRACE &&
            (rc = hs__pairs_load_csv(&s->pairs, cfg->path, cfg->max_prompt, err)) != 0)
            goto fail;
        if (s->pairs.n > 0xffffffffu) { /* gsl_rng_uniform_int's range for mt19937 */
            rc = hs_errf(err, HS_ERANGE, "%s: more than 2^32 rows to resample", cfg->path);
            goto fail;
        }
        if (cfg->max_requests == 0 && cfg->duration == 0) s->limit = HS__PRESET_REQUESTS;
        break;
    case SRC_ARRAY: /* only hs_source_open_array makes these */
        break;
    }
    *out = s;
    return 0;
fail:
    hs_source_close(s);
    return rc;
}

/* Azure: the next row inside the window, as an arrival relative to window_start. */
static int next_azure(hs_source *s, hs_arrival *a, hs_err *err)
{
    hs__row row;
    for (;;) {
        hs_ns off;
        int rc = hs__csv_next(&s->csv, &row, err);
        if (rc <= 0) return rc;
        if (!s->have_first) {
            s->first_ts = row.ts;
            s->have_first = 1;
        }
        off = row.ts - s->first_ts;
        if (off < s->win_start) continue;
        if (s->win_end > 0 && off >= s->win_end) return 0; /* rows are sorted: done */
        off -= s->win_start;
        {
            /* Bounded so that the clock, and every completion time the
             * engine adds to it, stays far from int64 overflow. */
            double t = (double)off / s->cfg.time_scale;
            if (t > (double)HS__ARRIVAL_MAX_NS)
                return hs_errf(err, HS_ERANGE,
                               "%s:%ld: arrival %.0f s after the first row%s is beyond the "
                               "simulated horizon of 200 years",
                               s->csv.lines.path, row.line, t / 1e9,
                               s->cfg.time_scale == 1 ? "" : " (after workload.time_scale)");
            a->arrival = s->cfg.time_scale == 1 ? off : (hs_ns)llround(t);
        }
        a->prompt = row.prompt;
        a->output = row.output;
        return 1;
    }
}

static int next_generated(hs_source *s, hs_arrival *a, hs_err *err)
{
    hs_ns t = hs__arrivals_next(&s->arr, s->rng);
    if (s->duration > 0 && t >= s->duration) return 0;
    a->arrival = t;
    switch (s->kind) {
    case SRC_SHAREGPT_CSV: {
        hs__row row;
        int rc = hs__csv_next(&s->csv, &row, err);
        if (rc <= 0) return rc;
        a->prompt = row.prompt;
        a->output = row.output;
        return 1;
    }
    case SRC_SHAREGPT_JSON:
        if (s->next_pair == s->pairs.n) return 0;
        a->prompt = s->pairs.v[s->next_pair].prompt;
        a->output = s->pairs.v[s->next_pair].output;
        s->next_pair++;
        return 1;
    case SRC_SYNTHETIC:
        if (s->plen.kind == HS__LEN_TRACE) {
            /* joint resampling keeps the prompt/output correlation of the trace */
            const hs__pair *p = &s->pairs.v[gsl_rng_uniform_int(s->rng, s->pairs.n)];
            a->prompt = p->prompt;
            a->output = p->output;
        } else {
            a->prompt = hs__lengen_draw(&s->plen, s->rng);
            a->output = hs__lengen_draw(&s->olen, s->rng);
        }
        return 1;
    case SRC_AZURE:
    case SRC_ARRAY:
        break;
    }
    return hs_errf(err, HS_ESTATE, "workload: bad source kind");
}

int hs_source_next(hs_source *s, hs_arrival *a, hs_err *err)
{
    int rc;
    if (s->failed)
        return hs_errf(err, HS_ESTATE, "workload: source already failed (%s)", s->cfg.path);
    if (s->done) return 0;
    if (s->emitted >= s->limit) {
        s->done = 1;
        return 0;
    }
    if (s->kind == SRC_ARRAY) {
        rc = s->emitted < s->n_list;
        if (rc) *a = s->list[s->emitted];
    } else {
        rc = s->kind == SRC_AZURE ? next_azure(s, a, err) : next_generated(s, a, err);
    }
    if (rc < 0) {
        s->failed = 1;
        return rc;
    }
    if (rc == 0) {
        s->done = 1;
        return 0;
    }
    /* Vidur caps prompt + output by shortening the prompt; replaying its
     * jobs needs the same requests */
    if (s->cfg.fit_context > 0 && (int64_t)a->prompt + a->output > s->cfg.fit_context) {
        /* an output that alone fills the context keeps one prompt token
         * and is cut to the rest, so the cap always holds */
        if (a->output >= s->cfg.fit_context) a->output = s->cfg.fit_context > 1 ? s->cfg.fit_context - 1 : 1;
        a->prompt = s->cfg.fit_context - a->output > 1 ? s->cfg.fit_context - a->output : 1;
    }
    a->id = s->emitted++;
    return 1;
}

int hs_source_open_array(hs_source **out, const hs_arrival *list, int64_t n, hs_err *err)
{
    hs_source *s;
    *out = NULL;
    for (int64_t i = 0; i < n; i++)
        if (list[i].prompt < 1 || list[i].output < 1 || list[i].arrival < 0 ||
            (i && list[i].arrival < list[i - 1].arrival))
            return hs_errf(err, HS_EINVAL, "workload: arrival list entry %lld: lengths >= 1 and times non-decreasing",
                           (long long)i);
    s = calloc(1, sizeof *s);
    if (!s) return hs_errf(err, HS_ENOMEM, "out of memory");
    s->kind = SRC_ARRAY;
    s->list = list;
    s->n_list = n;
    s->limit = INT64_MAX;
    *out = s;
    return 0;
}

void hs_source_close(hs_source *s)
{
    if (!s) return;
    if (s->csv_open) hs__csv_close(&s->csv);
    hs__pairs_free(&s->pairs);
    if (s->rng) gsl_rng_free(s->rng);
    free(s);
}

int64_t hs__source_clamped(const hs_source *s)
{
    return s->csv.clamped + s->pairs.clamped;
}
