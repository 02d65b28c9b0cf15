/* db.h - the SQLite results writer.
 *
 * A database holds many runs.  Schema (results/schema.sql is the same text,
 * versioned in table `meta` key 'schema_version'):
 *   runs(id, started, config, git_rev, seed, wall_s, events, label,
 *        deployment, planner)                               -- version 4
 *   requests(run, id, arrival, prompt, output, replica, ttft, tpot, e2e,
 *            queue_delay, preemptions, slo_met, dropped)      -- times in s
 *   replicas(run, id, role, gpus, tp, pp, bits, kv_blocks, perf_model)
 *   summary(run, metric, value)
 *   validations(run, device, iteration, predicted_ns, measured_ns)
 *   sweep_cases(case_key, sweep, idx, params, run, error)   -- version 2
 *   samples(run, replica, t, util, kv_used, running, waiting) -- version 2
 *   views requests_ms (requests in ms) and summary_wide (one row per run,
 *   vLLM benchmark_serving names)                             -- version 4
 * A run is written inside one transaction: hs_db_run_begin() opens it,
 * hs_db_run_commit() commits, hs_db_run_abort() rolls back, so a failed run
 * leaves no row anywhere.  Inserts use prepared statements. */
#ifndef HS_DB_H
#define HS_DB_H

#include <stdint.h>

#include "core/err.h"
#include "out/metrics.h"
#include "serve/sink.h"

#define HS_DB_SCHEMA_VERSION 4

typedef struct hs_db hs_db;

/* Opens (creating when needed) the database and its schema.  A database
 * whose schema_version is newer than this build is an error; an older one
 * is migrated. */
int hs_db_open(hs_db **out, const char *path, hs_err *err);
void hs_db_close(hs_db *db);

/* Checks, without creating or changing anything, that a run could be
 * written to path: an existing file must open read-write, and its folder
 * (or, for a new file, the folder it would be created in) must take new
 * files (SQLite's journal).  Lets a command fail before simulating rather
 * than at its first write.  Returns 0, or HS_EIO with the reason. */
int hs_db_check_writable(const char *path, hs_err *err);

typedef struct hs_run_info {
    const char *config_json;  /* the whole effective configuration */
    const char *git_rev;      /* may be "" */
    const char *label;        /* may be "" */
    uint64_t seed;
} hs_run_info;

/* Begins a transaction and inserts the runs row; *run_id is its id. */
int hs_db_run_begin(hs_db *db, const hs_run_info *info, int64_t *run_id,
                    hs_err *err);
/* Records the deployment the open run serves: its JSON text (the content,
 * serve/deploy.h's format) and the planner that made it; NULL or "" stores
 * NULL (not recorded, unknown). */
int hs_db_run_deployment(hs_db *db, int64_t run_id, const char *deployment_json,
                         const char *planner, hs_err *err);

typedef struct hs_replica_row {
    int32_t id;
    const char *role;       /* "colocated", "prefill", "decode", ... */
    const char *gpus;       /* e.g. "a100-80g:0,1,2,3" */
    int32_t tp, pp;
    int32_t bits;           /* weight bits (16, 8, 4, 3) */
    int64_t kv_blocks;
    const char *perf_model; /* which latency model served it, e.g. "roofline" */
    const char *calibration;/* per GPU type, where its kernel times come from */
    double expected_err_pct;/* cross-validated error per layer, %; < 0: NULL */
    const char *engine;     /* engine profile of the host cost, "none" */
} hs_replica_row;

int hs_db_replica(hs_db *db, int64_t run_id, const hs_replica_row *r,
                  hs_err *err);
/* slo_met is computed by the caller (hs_metrics_slo_met). */
int hs_db_request(hs_db *db, int64_t run_id, const hs_req_record *r,
                  int slo_met, hs_err *err);
int hs_db_summary(hs_db *db, int64_t run_id, const hs_metric_value *v, int n,
                  hs_err *err);
/* Fills wall_s and events into the runs row and commits. */
int hs_db_run_commit(hs_db *db, int64_t run_id, double wall_s, int64_t events,
                     hs_err *err);
/* Rolls back the open run; safe to call when none is open. */
void hs_db_run_abort(hs_db *db);

/* One point of a replica's time series (table samples, written by
 * `hetsim run` every sample_s simulated seconds). */
typedef struct hs_sample_row {
    int32_t replica;
    double t;          /* s, simulated */
    double util;       /* busy fraction of lane time since the previous sample, 0..1 */
    double kv_used;    /* fraction of the replica's KV blocks held, 0..1 */
    int64_t running;   /* sequences in decode sets */
    int64_t waiting;   /* requests waiting for admission */
} hs_sample_row;

int hs_db_sample(hs_db *db, int64_t run_id, const hs_sample_row *s, hs_err *err);

/* Writes committed run run_id as one JSON object to path (atomically:
 * a temporary renamed into place): the columns of its summary_wide row
 * under their vLLM benchmark_serving names, then "run", "config" and
 * "deployment" as JSON values.  HS_ENOTFOUND when the run has no summary,
 * HS_EIO when the file cannot be written, HS_EDB on SQLite errors. */
int hs_db_run_json(hs_db *db, int64_t run_id, const char *path, hs_err *err);

/* The id of the newest run; HS_ENOTFOUND when the database has none. */
int hs_db_latest_run(hs_db *db, int64_t *run_id, hs_err *err);

/* Stores measured-vs-predicted iteration times of a committed run in one
 * transaction, replacing earlier rows of the same run and device. */
int hs_db_validations(hs_db *db, int64_t run_id, const char *device, const int64_t *iteration,
                      const int64_t *predicted_ns, const int64_t *measured_ns, int64_t n,
                      hs_err *err);

#endif
