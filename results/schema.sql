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
