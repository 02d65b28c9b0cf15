-- hetsim results database, schema version 3 (its last section migrates a
-- version 2 database; run the whole file on an empty database only).
-- sim/out/db.c embeds this text up to version 2 and applies the later
-- versions as migrations (tests/test_db.c checks that both
-- create the same sqlite_master); change them together and bump
-- HS_DB_SCHEMA_VERSION in sim/out/db.h with a migration in db.c.
-- Times in requests are seconds; validations are nanoseconds.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,              -- ISO-8601 UTC wall clock, 2024-05-01T12:00:00Z
    config  TEXT NOT NULL,              -- the effective configuration, JSON
    git_rev TEXT NOT NULL DEFAULT '',
    seed    INTEGER NOT NULL,           -- uint64 stored as its int64 bit pattern
    wall_s  REAL,                       -- wall-clock seconds; NULL until committed
    events  INTEGER,                    -- simulated events processed
    label   TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS requests (
    run         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    id          INTEGER NOT NULL,
    arrival     REAL NOT NULL,          -- s
    prompt      INTEGER NOT NULL,       -- tokens
    output      INTEGER NOT NULL,       -- tokens generated
    replica     INTEGER,                -- NULL: never routed
    ttft        REAL,                   -- s; NULL when dropped
    tpot        REAL,                   -- s; NULL when dropped or output <= 1
    e2e         REAL,                   -- s; NULL when dropped
    queue_delay REAL,                   -- s; NULL when dropped
    preemptions INTEGER NOT NULL,
    slo_met     INTEGER NOT NULL,       -- 0 or 1
    dropped     INTEGER NOT NULL,       -- 0 or 1
    drop_reason TEXT,                   -- why it was dropped; NULL otherwise
    PRIMARY KEY (run, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS replicas (
    run        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    id         INTEGER NOT NULL,
    role       TEXT NOT NULL,           -- colocated, prefill, decode, ...
    gpus       TEXT NOT NULL,           -- e.g. a100-80g:0,1,2,3
    tp         INTEGER NOT NULL,
    pp         INTEGER NOT NULL,
    bits       INTEGER NOT NULL,        -- weight bits
    kv_blocks  INTEGER NOT NULL,
    perf_model TEXT NOT NULL,           -- latency model that served it
    PRIMARY KEY (run, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summary (
    run    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric TEXT NOT NULL,               -- vLLM-style name, e.g. ttft_p99_ms
    value  REAL,
    PRIMARY KEY (run, metric)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS validations (
    run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    device       TEXT NOT NULL,
    iteration    INTEGER NOT NULL,
    predicted_ns INTEGER NOT NULL,
    measured_ns  INTEGER NOT NULL,
    PRIMARY KEY (run, device, iteration)
) WITHOUT ROWID;
-- Schema version 2: sweeps and time series.
CREATE TABLE IF NOT EXISTS sweep_cases (
    case_key TEXT PRIMARY KEY,          -- 16 hex digits: FNV-1a 64 of the canonical configuration
    sweep    TEXT NOT NULL DEFAULT '',  -- name given to the sweep (--name)
    idx      INTEGER NOT NULL,          -- position in that sweep's case list
    params   TEXT NOT NULL,             -- the swept keys and values, JSON object
    run      INTEGER REFERENCES runs(id) ON DELETE CASCADE,  -- NULL: the case failed
    error    TEXT                       -- why it failed; NULL when it ran
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS samples (
    run     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    replica INTEGER NOT NULL,
    t       REAL NOT NULL,              -- s, simulated: the state at this instant
    util    REAL NOT NULL,              -- busy fraction of lane time since the previous sample
    kv_used REAL NOT NULL,              -- fraction of KV blocks held
    running INTEGER NOT NULL,           -- sequences in the decode set
    waiting INTEGER NOT NULL,           -- requests waiting for admission
    PRIMARY KEY (run, replica, t)
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '2');
-- Schema version 3: how far to trust each replica's latencies (db.c applies
-- these as its migration from version 2; kept in this order).
-- calibration: per GPU type, where the kernel times come from, e.g.
--   "a100-80g: measured table; h100-sxm-80g: transferred from a100-80g,a40, uncalibrated"
-- expected_err_pct: cross-validated error per decoder layer of the least
--   trusted source, %; NULL for measured tables
-- engine: the engine profile of the host cost per iteration ("none": flat)
ALTER TABLE replicas ADD COLUMN calibration TEXT;
ALTER TABLE replicas ADD COLUMN expected_err_pct REAL;
ALTER TABLE replicas ADD COLUMN engine TEXT;
UPDATE meta SET value = '3' WHERE key = 'schema_version';
-- Schema version 4 (db.c applies it as its migration from version 3):
-- runs.deployment is the deployment the run served, as JSON (the content,
-- not a file path); runs.planner the planner that made it (NULL: unknown).
-- Views: requests_ms is requests with latencies in ms, as in summary;
-- summary_wide is one row per run with vLLM benchmark_serving key names
-- (docs/results.md has the mapping; std_* come from the requests rows and
-- are NULL for runs stored without them).
ALTER TABLE runs ADD COLUMN deployment TEXT;
ALTER TABLE runs ADD COLUMN planner TEXT;
CREATE VIEW IF NOT EXISTS requests_ms AS
SELECT run, id, arrival AS arrival_s, prompt AS prompt_tokens, output AS output_tokens,
       replica, 1000 * ttft AS ttft_ms, 1000 * tpot AS tpot_ms, 1000 * e2e AS e2el_ms,
       1000 * queue_delay AS queue_ms, preemptions, slo_met, dropped, drop_reason
FROM requests;
CREATE VIEW IF NOT EXISTS summary_wide AS
SELECT p.run AS run, r.label AS label, r.started AS started,
       coalesce(r.planner, json_extract(r.config, '$.planner')) AS planner,
       CAST(p.num_prompts AS INTEGER) AS num_prompts,
       CAST(p.completed AS INTEGER) AS completed,
       CAST(p.dropped AS INTEGER) AS dropped,
       p.duration AS duration,
       CAST(round(p.input_throughput * p.duration) AS INTEGER) AS total_input_tokens,
       CAST(round(p.output_throughput * p.duration) AS INTEGER) AS total_output_tokens,
       p.request_throughput AS request_throughput,
       p.request_goodput AS request_goodput,
       p.input_throughput AS input_throughput,
       p.output_throughput AS output_throughput,
       p.total_token_throughput AS total_token_throughput,
       p.mean_ttft_ms AS mean_ttft_ms, p.median_ttft_ms AS median_ttft_ms,
       (SELECT sqrt(avg((1000 * q.ttft - p.mean_ttft_ms) * (1000 * q.ttft - p.mean_ttft_ms)))
        FROM requests q WHERE q.run = p.run AND q.ttft IS NOT NULL) AS std_ttft_ms,
       p.p90_ttft_ms AS p90_ttft_ms, p.p95_ttft_ms AS p95_ttft_ms, p.p99_ttft_ms AS p99_ttft_ms,
       p.mean_tpot_ms AS mean_tpot_ms, p.median_tpot_ms AS median_tpot_ms,
       (SELECT sqrt(avg((1000 * q.tpot - p.mean_tpot_ms) * (1000 * q.tpot - p.mean_tpot_ms)))
        FROM requests q WHERE q.run = p.run AND q.tpot IS NOT NULL) AS std_tpot_ms,
       p.p90_tpot_ms AS p90_tpot_ms, p.p95_tpot_ms AS p95_tpot_ms, p.p99_tpot_ms AS p99_tpot_ms,
       p.mean_itl_ms AS mean_itl_ms, p.median_itl_ms AS median_itl_ms,
       p.p90_itl_ms AS p90_itl_ms, p.p95_itl_ms AS p95_itl_ms, p.p99_itl_ms AS p99_itl_ms,
       p.mean_e2el_ms AS mean_e2el_ms, p.median_e2el_ms AS median_e2el_ms,
       (SELECT sqrt(avg((1000 * q.e2e - p.mean_e2el_ms) * (1000 * q.e2e - p.mean_e2el_ms)))
        FROM requests q WHERE q.run = p.run AND q.e2e IS NOT NULL) AS std_e2el_ms,
       p.p90_e2el_ms AS p90_e2el_ms, p.p95_e2el_ms AS p95_e2el_ms, p.p99_e2el_ms AS p99_e2el_ms,
       p.mean_queue_ms AS mean_queue_ms, p.median_queue_ms AS median_queue_ms,
       p.p90_queue_ms AS p90_queue_ms, p.p95_queue_ms AS p95_queue_ms, p.p99_queue_ms AS p99_queue_ms,
       p.slo_attainment AS slo_attainment,
       CAST(p.preemptions AS INTEGER) AS preemptions,
       p.cost_per_hour AS cost_per_hour,
       p.tokens_per_dollar AS tokens_per_dollar,
       CAST(p.iterations AS INTEGER) AS iterations,
       p.simulated_s AS simulated_s
FROM (SELECT run,
             max(CASE metric WHEN 'arrivals' THEN value END) AS num_prompts,
             max(CASE metric WHEN 'completed' THEN value END) AS completed,
             max(CASE metric WHEN 'dropped' THEN value END) AS dropped,
             max(CASE metric WHEN 'duration_s' THEN value END) AS duration,
             max(CASE metric WHEN 'request_throughput' THEN value END) AS request_throughput,
             max(CASE metric WHEN 'goodput' THEN value END) AS request_goodput,
             max(CASE metric WHEN 'input_token_throughput' THEN value END) AS input_throughput,
             max(CASE metric WHEN 'output_token_throughput' THEN value END) AS output_throughput,
             max(CASE metric WHEN 'total_token_throughput' THEN value END) AS total_token_throughput,
             max(CASE metric WHEN 'ttft_mean_ms' THEN value END) AS mean_ttft_ms,
             max(CASE metric WHEN 'ttft_p50_ms' THEN value END) AS median_ttft_ms,
             max(CASE metric WHEN 'ttft_p90_ms' THEN value END) AS p90_ttft_ms,
             max(CASE metric WHEN 'ttft_p95_ms' THEN value END) AS p95_ttft_ms,
             max(CASE metric WHEN 'ttft_p99_ms' THEN value END) AS p99_ttft_ms,
             max(CASE metric WHEN 'tpot_mean_ms' THEN value END) AS mean_tpot_ms,
             max(CASE metric WHEN 'tpot_p50_ms' THEN value END) AS median_tpot_ms,
             max(CASE metric WHEN 'tpot_p90_ms' THEN value END) AS p90_tpot_ms,
             max(CASE metric WHEN 'tpot_p95_ms' THEN value END) AS p95_tpot_ms,
             max(CASE metric WHEN 'tpot_p99_ms' THEN value END) AS p99_tpot_ms,
             max(CASE metric WHEN 'itl_mean_ms' THEN value END) AS mean_itl_ms,
             max(CASE metric WHEN 'itl_p50_ms' THEN value END) AS median_itl_ms,
             max(CASE metric WHEN 'itl_p90_ms' THEN value END) AS p90_itl_ms,
             max(CASE metric WHEN 'itl_p95_ms' THEN value END) AS p95_itl_ms,
             max(CASE metric WHEN 'itl_p99_ms' THEN value END) AS p99_itl_ms,
             max(CASE metric WHEN 'e2el_mean_ms' THEN value END) AS mean_e2el_ms,
             max(CASE metric WHEN 'e2el_p50_ms' THEN value END) AS median_e2el_ms,
             max(CASE metric WHEN 'e2el_p90_ms' THEN value END) AS p90_e2el_ms,
             max(CASE metric WHEN 'e2el_p95_ms' THEN value END) AS p95_e2el_ms,
             max(CASE metric WHEN 'e2el_p99_ms' THEN value END) AS p99_e2el_ms,
             max(CASE metric WHEN 'queue_mean_ms' THEN value END) AS mean_queue_ms,
             max(CASE metric WHEN 'queue_p50_ms' THEN value END) AS median_queue_ms,
             max(CASE metric WHEN 'queue_p90_ms' THEN value END) AS p90_queue_ms,
             max(CASE metric WHEN 'queue_p95_ms' THEN value END) AS p95_queue_ms,
             max(CASE metric WHEN 'queue_p99_ms' THEN value END) AS p99_queue_ms,
             max(CASE metric WHEN 'slo_attainment' THEN value END) AS slo_attainment,
             max(CASE metric WHEN 'preemptions' THEN value END) AS preemptions,
             max(CASE metric WHEN 'cost_per_hour' THEN value END) AS cost_per_hour,
             max(CASE metric WHEN 'tokens_per_dollar' THEN value END) AS tokens_per_dollar,
             max(CASE metric WHEN 'iterations' THEN value END) AS iterations,
             max(CASE metric WHEN 'simulated_s' THEN value END) AS simulated_s
      FROM summary GROUP BY run) AS p
JOIN runs AS r ON r.id = p.run;
UPDATE meta SET value = '4' WHERE key = 'schema_version';
